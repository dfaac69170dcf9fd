/* t_list.c - list values and the list commands (LPUSH, RPUSH, LPOP, RPOP,
 * LLEN, LRANGE).
 *
 * A list is a deque: a circular array of {pointer, length} elements whose
 * capacity is a power of two, so pushes and pops at either end are O(1)
 * amortized and LRANGE indexes directly. Each element owns one malloc'd
 * buffer; a pushed argument's buffer is taken over (argSteal), so a big
 * element is never copied. The array doubles when full and halves when a
 * quarter full, and an emptied list is deleted, as in Redis.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "server.h"

#define LIST_HEAD 1
#define LIST_TAIL 0
#define LIST_MIN_CAP 4
#define LIST_SHRINK_MIN_CAP 64

/* ---- the deque -------------------------------------------------------------------- */

void listInit(dbList *l) {
    l->a = NULL;
    l->cap = l->head = l->len = 0;
}

static void listResize(ir_db *db, dbList *l, size_t cap) {
    lelem *a = dbMalloc(cap * sizeof(lelem));
    size_t first = l->cap ? l->cap - l->head : 0; /* elements before the wrap */
    if (first > l->len) first = l->len;
    if (l->len) {
        memcpy(a, l->a + l->head, first * sizeof(lelem));
        memcpy(a + first, l->a, (l->len - first) * sizeof(lelem));
    }
    free(l->a);
    db->bytes += cap * sizeof(lelem);
    db->bytes -= l->cap * sizeof(lelem);
    l->a = a;
    l->cap = cap;
    l->head = 0;
}

void listPush(ir_db *db, dbList *l, char *p, size_t len, int head) {
    if (l->len == l->cap) listResize(db, l, l->cap ? l->cap * 2 : LIST_MIN_CAP);
    size_t mask = l->cap - 1, at;
    if (head) at = l->head = (l->head + mask) & mask;
    else at = (l->head + l->len) & mask;
    l->a[at].p = p;
    l->a[at].len = len;
    l->len++;
    db->bytes += dbBufBytes(len + 1);
}

/* The caller owns (and frees) the returned element. l must not be empty. */
lelem listPop(ir_db *db, dbList *l, int head) {
    size_t mask = l->cap - 1;
    lelem x;
    if (head) {
        x = l->a[l->head];
        l->head = (l->head + 1) & mask;
    } else {
        x = l->a[(l->head + l->len - 1) & mask];
    }
    l->len--;
    db->bytes -= dbBufBytes(x.len + 1);
    if (l->cap > LIST_SHRINK_MIN_CAP && l->len < l->cap / 4) listResize(db, l, l->cap / 2);
    return x;
}

void listFreeAll(ir_db *db, dbList *l) {
    for (size_t i = 0; i < l->len; i++) {
        lelem *x = listAt(l, i);
        db->bytes -= dbBufBytes(x->len + 1);
        free(x->p);
    }
    db->bytes -= l->cap * sizeof(lelem);
    free(l->a);
    listInit(l);
}

/* ---- commands ------------------------------------------------------------------------- */

static void pushGenericCommand(client *c, int where) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_LIST) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    if (!e) e = dbAdd(db, &k, OBJ_LIST, 0);
    for (int j = 2; j < c->argc; j++) {
        size_t len;
        char *p = argSteal(c, j, &len);
        if (!p) p = dbMalloc(0); /* argSteal only fails when out of memory */
        listPush(db, &e->v.list, p, len, where);
    }
    addReplyLongLong(c, (long long)e->v.list.len);
}

/* LPUSH key element [element ...] */
void lpushCommand(client *c) { pushGenericCommand(c, LIST_HEAD); }

/* RPUSH key element [element ...] */
void rpushCommand(client *c) { pushGenericCommand(c, LIST_TAIL); }

static void popGenericCommand(client *c, int where) {
    int hascount = c->argc == 3;
    long long count = 0;

    if (c->argc > 3) {
        addReplyErrorFormat(c, "wrong number of arguments for '%s' command",
                            where == LIST_HEAD ? "lpop" : "rpop");
        return;
    }
    if (hascount && (!string2ll(c->argv[2].ptr, c->argv[2].len, &count) || count < 0)) {
        addReplyError(c, "value is out of range, must be positive");
        return;
    }

    ir_db *db = dbFor(c);
    dbEntry *e = lookupKeyOrReply(c, 1, hascount ? shared.nullarray : shared.nullbulk, OBJ_LIST);
    if (!e) return;
    if (hascount && count == 0) {
        addReplyStr(c, shared.emptyarray);
        return;
    }

    dbList *l = &e->v.list;
    if (!hascount) {
        lelem x = listPop(db, l, where);
        addReplyBulk(c, x.p, x.len);
        dbFreeLater(db, x.p, x.len); /* the reply may point at it */
    } else {
        size_t n = (unsigned long long)count < l->len ? (size_t)count : l->len;
        addReplyArrayLen(c, (long)n);
        while (n--) {
            lelem x = listPop(db, l, where);
            addReplyBulk(c, x.p, x.len);
            dbFreeLater(db, x.p, x.len);
        }
    }
    if (l->len == 0) dbDeleteEntry(db, e);
}

/* LPOP key [count] */
void lpopCommand(client *c) { popGenericCommand(c, LIST_HEAD); }

/* RPOP key [count] */
void rpopCommand(client *c) { popGenericCommand(c, LIST_TAIL); }

/* LLEN key */
void llenCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_LIST);
    if (!e) return;
    addReplyLongLong(c, (long long)e->v.list.len);
}

/* LRANGE key start stop */
void lrangeCommand(client *c) {
    long long start, end;
    if (getLongLongFromArg(c, 2, &start) != 0 || getLongLongFromArg(c, 3, &end) != 0) return;

    dbEntry *e = lookupKeyOrReply(c, 1, shared.emptyarray, OBJ_LIST);
    if (!e) return;

    const dbList *l = &e->v.list;
    long long llen = (long long)l->len;
    if (start < 0) start = llen + start;
    if (end < 0) end = llen + end;
    if (start < 0) start = 0;
    /* start >= 0 now, so this is also true when end < 0 */
    if (start > end || start >= llen) {
        addReplyStr(c, shared.emptyarray);
        return;
    }
    if (end >= llen) end = llen - 1;
    addReplyArrayLen(c, (long)(end - start + 1));
    for (long long i = start; i <= end; i++) {
        const lelem *x = listAt(l, (size_t)i);
        addReplyBulk(c, x->p, x->len);
    }
}
