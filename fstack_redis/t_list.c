/* t_list.c - list values and the list commands: LPUSH RPUSH LPUSHX RPUSHX
 * LPOP RPOP LLEN LRANGE LINDEX LSET LREM LTRIM LINSERT LPOS LMOVE RPOPLPUSH
 * LMPOP, and the blocking BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP (blocked.c),
 * with Redis 7.0's replies and error texts.
 *
 * A list is a deque: a circular array of {pointer, length} elements whose
 * capacity is a power of two, so pushes and pops at either end are O(1)
 * amortized and LRANGE indexes directly. Each element owns one malloc'd
 * buffer; a pushed argument's buffer is taken over (argSteal), so a big
 * element is never copied. The array doubles when full and halves when a
 * quarter full, and an emptied list is deleted, as in Redis.
 *
 * Every command that adds elements calls signalKeyAsReady (clients blocked
 * on the key are served after the command); every write signalModifiedKey.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blocked.h"
#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "replication.h"
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

/* Insert p (taken over) so that it becomes element i (0 <= i <= len). */
static void listInsertAt(ir_db *db, dbList *l, size_t i, char *p, size_t len) {
    if (i == 0) {
        listPush(db, l, p, len, LIST_HEAD);
        return;
    }
    listPush(db, l, p, len, LIST_TAIL); /* grows if needed; then rotate into place */
    lelem x = *listAt(l, l->len - 1);
    for (size_t j = l->len - 1; j > i; j--) *listAt(l, j) = *listAt(l, j - 1);
    *listAt(l, i) = x;
}

static char *dupElement(const char *p, size_t len) {
    char *d = dbMalloc(len + 1);
    memcpy(d, p, len);
    d[len] = '\0';
    return d;
}

/* ---- helpers -------------------------------------------------------------- */

/* The list at argv[i]: 1 with *out (NULL if there is no such key), or 0 after
 * replying WRONGTYPE. */
static int lookupList(client *c, ir_db *db, int i, dbEntry **out) {
    dbkey k = argKey(db, c, i);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_LIST) {
        addReplyStr(c, shared.wrongtypeerr);
        return 0;
    }
    *out = e;
    return 1;
}

static void keyChanged(client *c, ir_db *db, const dbEntry *e) {
    signalModifiedKey(c, db, e->key, e->klen);
}

/* After elements were removed: an emptied list goes (signalled first). */
static void listRemoved(client *c, ir_db *db, dbEntry *e) {
    signalModifiedKey(c, db, e->key, e->klen);
    if (e->v.list.len == 0) notifyKeyspaceEvent(NOTIFY_GENERIC, "del", e->key, e->klen, db->id);
    if (e->v.list.len == 0) dbDeleteEntry(db, e);
}

/* LEFT or RIGHT, else a syntax error. */
static int getListPosition(client *c, int i, int *where) {
    if (argEq(c, i, "left")) *where = LIST_HEAD;
    else if (argEq(c, i, "right")) *where = LIST_TAIL;
    else {
        addReplyStr(c, shared.syntaxerr);
        return -1;
    }
    return 0;
}

/* Redis's getRangeLongFromObjectOrReply: msg replaces both errors when set. */
static int getRangeLong(client *c, int i, long long min, long long max, long long *out,
                        const char *msg) {
    long long v;
    if (!string2ll(c->argv[i].ptr, c->argv[i].len, &v)) {
        addReplyError(c, msg ? msg : "value is not an integer or out of range");
        return -1;
    }
    if (v < min || v > max) {
        if (msg) addReplyError(c, msg);
        else
            addReplyErrorFormat(c, "value is out of range, value must between %lld and %lld", min,
                                max);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- commands ------------------------------------------------------------------------- */

static void pushGenericCommand(client *c, int where, int xx) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_LIST) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    if (!e && xx) {
        addReplyStr(c, shared.czero);
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
    signalKeyAsReady(db, e->key, e->klen);
    keyChanged(c, db, e);
    notifyKeyspaceEvent(NOTIFY_LIST, where == LIST_HEAD ? "lpush" : "rpush", e->key, e->klen,
                        db->id);
}

/* LPUSH key element [element ...] */
void lpushCommand(client *c) { pushGenericCommand(c, LIST_HEAD, 0); }

/* RPUSH key element [element ...] */
void rpushCommand(client *c) { pushGenericCommand(c, LIST_TAIL, 0); }

/* LPUSHX key element [element ...] */
void lpushxCommand(client *c) { pushGenericCommand(c, LIST_HEAD, 1); }

/* RPUSHX key element [element ...] */
void rpushxCommand(client *c) { pushGenericCommand(c, LIST_TAIL, 1); }

/* Pop up to count elements of e as one array (LPOP with a count, LMPOP). */
static void popRange(client *c, ir_db *db, dbEntry *e, int where, long long count) {
    dbList *l = &e->v.list;
    size_t n = (unsigned long long)count < l->len ? (size_t)count : l->len;
    addReplyArrayLen(c, (long)n);
    while (n--) {
        lelem x = listPop(db, l, where);
        addReplyBulk(c, x.p, x.len);
        free(x.p);
    }
    notifyKeyspaceEvent(NOTIFY_LIST, where == LIST_HEAD ? "lpop" : "rpop", e->key, e->klen, db->id);
    listRemoved(c, db, e);
}

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
    dbEntry *e;
    if (!lookupList(c, db, 1, &e)) return;
    if (!e) {
        if (hascount) addReplyNullArray(c);
        else addReplyNull(c);
        return;
    }
    if (hascount && count == 0) {
        addReplyStr(c, shared.emptyarray);
        return;
    }
    if (hascount) {
        popRange(c, db, e, where, count);
        return;
    }
    lelem x = listPop(db, &e->v.list, where);
    addReplyBulk(c, x.p, x.len);
    free(x.p);
    notifyKeyspaceEvent(NOTIFY_LIST, where == LIST_HEAD ? "lpop" : "rpop", e->key, e->klen, db->id);
    listRemoved(c, db, e);
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

/* LINDEX key index */
void lindexCommand(client *c) {
    long long index;
    ir_db *db = dbFor(c);
    dbEntry *e;
    if (!lookupList(c, db, 1, &e)) return; /* Redis looks the key up first here */
    if (!e) {
        addReplyNull(c);
        return;
    }
    if (getLongLongFromArg(c, 2, &index) != 0) return;
    long long llen = (long long)e->v.list.len;
    if (index < 0) index += llen;
    if (index < 0 || index >= llen) {
        addReplyNull(c);
        return;
    }
    const lelem *x = listAt(&e->v.list, (size_t)index);
    addReplyBulk(c, x->p, x->len);
}

/* LSET key index element */
void lsetCommand(client *c) {
    long long index;
    if (getLongLongFromArg(c, 2, &index) != 0) return;
    ir_db *db = dbFor(c);
    dbEntry *e;
    if (!lookupList(c, db, 1, &e)) return;
    if (!e) {
        addReplyStr(c, shared.nokeyerr);
        return;
    }
    dbList *l = &e->v.list;
    long long llen = (long long)l->len;
    if (index < 0) index += llen;
    if (index < 0 || index >= llen) {
        addReplyStr(c, shared.outofrange);
        return;
    }
    size_t len;
    char *p = argSteal(c, 3, &len);
    if (!p) p = dupElement("", 0);
    lelem *x = listAt(l, (size_t)index);
    db->bytes -= dbBufBytes(x->len + 1);
    free(x->p);
    x->p = p;
    x->len = len;
    db->bytes += dbBufBytes(len + 1);
    addReplyStr(c, shared.ok);
    keyChanged(c, db, e);
    notifyKeyspaceEvent(NOTIFY_LIST, "lset", e->key, e->klen, db->id);
}

static int elemEq(const lelem *x, const ir_arg *a) {
    return x->len == a->len && memcmp(x->p, a->ptr, a->len) == 0;
}

/* LREM key count element */
void lremCommand(client *c) {
    long long count;
    if (getLongLongFromArg(c, 2, &count) != 0) return;
    ir_db *db = dbFor(c);
    dbEntry *e;
    if (!lookupList(c, db, 1, &e)) return;
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    dbList *l = &e->v.list;
    const ir_arg *want = &c->argv[3];
    long long removed = 0;
    /* Compact in one pass, keeping order: from the head for count >= 0,
     * from the tail for count < 0. */
    size_t n = l->len, keep = 0;
    if (count >= 0) {
        for (size_t i = 0; i < n; i++) {
            lelem x = *listAt(l, i);
            if ((count == 0 || removed < count) && elemEq(&x, want)) {
                removed++;
                db->bytes -= dbBufBytes(x.len + 1);
                free(x.p);
            } else {
                *listAt(l, keep++) = x;
            }
        }
    } else {
        for (size_t i = n; i-- > 0;) {
            lelem x = *listAt(l, i);
            if (removed < -count && elemEq(&x, want)) {
                removed++;
                db->bytes -= dbBufBytes(x.len + 1);
                free(x.p);
            } else {
                *listAt(l, n - 1 - keep++) = x;
            }
        }
        l->head = (l->head + (n - keep)) & (l->cap - 1);
    }
    l->len = keep;
    if (l->cap > LIST_SHRINK_MIN_CAP && l->len < l->cap / 4) {
        size_t cap = l->cap;
        while (cap > LIST_SHRINK_MIN_CAP && l->len < cap / 4) cap /= 2;
        listResize(db, l, cap);
    }
    addReplyLongLong(c, removed);
    if (removed) notifyKeyspaceEvent(NOTIFY_LIST, "lrem", e->key, e->klen, db->id);
    if (removed) listRemoved(c, db, e);
}

/* LTRIM key start stop */
void ltrimCommand(client *c) {
    long long start, end;
    if (getLongLongFromArg(c, 2, &start) != 0 || getLongLongFromArg(c, 3, &end) != 0) return;
    ir_db *db = dbFor(c);
    dbEntry *e;
    if (!lookupList(c, db, 1, &e)) return;
    if (!e) {
        addReplyStr(c, shared.ok);
        return;
    }
    dbList *l = &e->v.list;
    long long llen = (long long)l->len, ltrim, rtrim;
    if (start < 0) start = llen + start;
    if (end < 0) end = llen + end;
    if (start < 0) start = 0;
    if (start > end || start >= llen) {
        ltrim = llen; /* everything goes */
        rtrim = 0;
    } else {
        if (end >= llen) end = llen - 1;
        ltrim = start;
        rtrim = llen - end - 1;
    }
    for (long long i = 0; i < ltrim; i++) {
        lelem x = listPop(db, l, LIST_HEAD);
        free(x.p);
    }
    for (long long i = 0; i < rtrim; i++) {
        lelem x = listPop(db, l, LIST_TAIL);
        free(x.p);
    }
    addReplyStr(c, shared.ok);
    notifyKeyspaceEvent(NOTIFY_LIST, "ltrim", e->key, e->klen, db->id);
    listRemoved(c, db, e);
    if (!ltrim && !rtrim) replPrevent(c); /* signalled, but nothing to replicate (as Redis) */
}

/* LINSERT key BEFORE|AFTER pivot element */
void linsertCommand(client *c) {
    int after;
    if (argEq(c, 2, "after")) after = 1;
    else if (argEq(c, 2, "before")) after = 0;
    else {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    ir_db *db = dbFor(c);
    dbEntry *e;
    if (!lookupList(c, db, 1, &e)) return;
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    dbList *l = &e->v.list;
    for (size_t i = 0; i < l->len; i++) {
        if (!elemEq(listAt(l, i), &c->argv[3])) continue;
        size_t len;
        char *p = argSteal(c, 4, &len);
        if (!p) p = dupElement("", 0);
        listInsertAt(db, l, after ? i + 1 : i, p, len);
        addReplyLongLong(c, (long long)l->len);
        signalKeyAsReady(db, e->key, e->klen);
        keyChanged(c, db, e);
        notifyKeyspaceEvent(NOTIFY_LIST, "linsert", e->key, e->klen, db->id);
        return;
    }
    addReplyLongLong(c, -1);
}

/* LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len] */
void lposCommand(client *c) {
    long long rank = 1, count = -1, maxlen = 0;
    for (int j = 3; j < c->argc; j++) {
        int moreargs = c->argc - 1 - j;
        if (argEq(c, j, "rank") && moreargs) {
            j++;
            if (getLongLongFromArg(c, j, &rank) != 0) return;
            if (rank == 0) {
                addReplyError(c, "RANK can't be zero: use 1 to start from the first match, 2 from "
                                 "the second ... or use negative to start from the end of the "
                                 "list");
                return;
            }
        } else if (argEq(c, j, "count") && moreargs) {
            j++;
            if (getRangeLong(c, j, 0, LLONG_MAX, &count, "COUNT can't be negative") != 0) return;
        } else if (argEq(c, j, "maxlen") && moreargs) {
            j++;
            if (getRangeLong(c, j, 0, LLONG_MAX, &maxlen, "MAXLEN can't be negative") != 0) return;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    int fromtail = rank < 0;
    /* Redis 7.0 negates LLONG_MIN into itself, which then matches at once */
    if (rank < 0) rank = rank == LLONG_MIN ? 1 : -rank;
    ir_db *db = dbFor(c);
    dbEntry *e;
    if (!lookupList(c, db, 1, &e)) return;
    if (!e) {
        if (count != -1) addReplyStr(c, shared.emptyarray);
        else addReplyNull(c);
        return;
    }
    const dbList *l = &e->v.list;
    size_t llen = l->len;
    long long matches = 0, found = 0;
    long long *out = NULL;
    size_t outcap = 0;
    long long first = -1;
    for (size_t idx = 0; idx < llen && (maxlen == 0 || (long long)idx < maxlen); idx++) {
        size_t pos = fromtail ? llen - 1 - idx : idx;
        if (!elemEq(listAt(l, pos), &c->argv[2])) continue;
        if (++matches < rank) continue;
        if (count == -1) {
            first = (long long)pos;
            break;
        }
        if ((size_t)found == outcap) {
            outcap = outcap ? outcap * 2 : 16;
            out = realloc(out, outcap * sizeof(*out));
            if (!out) abort();
        }
        out[found++] = (long long)pos;
        if (count && found >= count) break;
    }
    if (count == -1) {
        if (first >= 0) addReplyLongLong(c, first);
        else addReplyNull(c);
        return;
    }
    addReplyArrayLen(c, (long)found);
    for (long long i = 0; i < found; i++) addReplyLongLong(c, out[i]);
    free(out);
}

/* Pop from src (a non-empty list) and push onto dst (argv[dsti]; NULL = none
 * yet), replying with the element; src is deleted when emptied. */
static void moveElement(client *c, ir_db *db, dbEntry *src, dbEntry *dst, int dsti, int wherefrom,
                        int whereto) {
    lelem x = listPop(db, &src->v.list, wherefrom);
    if (!dst) {
        dbkey dk = argKey(db, c, dsti);
        dst = dbAdd(db, &dk, OBJ_LIST, 0);
    }
    listPush(db, &dst->v.list, x.p, x.len, whereto);
    addReplyBulk(c, x.p, x.len);
    signalKeyAsReady(db, dst->key, dst->klen);
    keyChanged(c, db, dst);
    notifyKeyspaceEvent(NOTIFY_LIST, whereto == LIST_HEAD ? "lpush" : "rpush", dst->key, dst->klen,
                        db->id);
    notifyKeyspaceEvent(NOTIFY_LIST, wherefrom == LIST_HEAD ? "lpop" : "rpop", src->key, src->klen,
                        db->id);
    if (src != dst) listRemoved(c, db, src);
}

static void lmoveGeneric(client *c, int wherefrom, int whereto, int timeout_arg) {
    uint64_t deadline = 0;
    if (timeout_arg && getBlockingTimeoutFromArg(c, timeout_arg, &deadline) != 0) return;
    ir_db *db = dbFor(c);
    dbEntry *src, *dst;
    if (!lookupList(c, db, 1, &src)) return;
    if (!src) {
        if (!timeout_arg) addReplyNull(c);
        else if (c->flags & CLIENT_MULTI) addReplyNull(c);  /* as Redis inside MULTI */
        else if (!blockingAllowed(c)) addReplyNullArray(c); /* the timeout's reply */
        else blockForKeys(c, db, 1, 1, 1, deadline);
        return;
    }
    if (!lookupList(c, db, 2, &dst)) return;
    moveElement(c, db, src, dst, 2, wherefrom, whereto);
    if (timeout_arg == 3) { /* replicas: the non-blocking form */
        replRewrite(c, 3, (ir_str[]){IR_STR("RPOPLPUSH"), replArg(c, 1), replArg(c, 2)});
    } else if (timeout_arg) { /* served after waiting: Redis's own lower-case words */
        int served = c->flags & CLIENT_BLOCKED;
        ir_str left = IR_STR("left"), right = IR_STR("right");
        ir_str from = served ? (wherefrom == LIST_HEAD ? left : right) : replArg(c, 3);
        ir_str to = served ? (whereto == LIST_HEAD ? left : right) : replArg(c, 4);
        replRewrite(c, 5, (ir_str[]){IR_STR("LMOVE"), replArg(c, 1), replArg(c, 2), from, to});
    }
}

/* LMOVE source destination LEFT|RIGHT LEFT|RIGHT */
void lmoveCommand(client *c) {
    int from, to;
    if (getListPosition(c, 3, &from) != 0 || getListPosition(c, 4, &to) != 0) return;
    lmoveGeneric(c, from, to, 0);
}

/* RPOPLPUSH source destination */
void rpoplpushCommand(client *c) { lmoveGeneric(c, LIST_TAIL, LIST_HEAD, 0); }

/* BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout */
void blmoveCommand(client *c) {
    int from, to;
    if (getListPosition(c, 3, &from) != 0 || getListPosition(c, 4, &to) != 0) return;
    lmoveGeneric(c, from, to, 5);
}

/* BRPOPLPUSH source destination timeout */
void brpoplpushCommand(client *c) { lmoveGeneric(c, LIST_TAIL, LIST_HEAD, 3); }

/* BLPOP/BRPOP/BLMPOP/LMPOP over keys argv[first .. first+n). count -1: one
 * element as [key, element]; else [key, [elements]]. timeout_arg 0: never
 * blocks (LMPOP). */
static void popKeysGeneric(client *c, int first, int n, int where, long long count,
                           int timeout_arg) {
    uint64_t deadline = 0;
    if (timeout_arg && getBlockingTimeoutFromArg(c, timeout_arg, &deadline) != 0) return;
    ir_db *db = dbFor(c);
    for (int j = first; j < first + n; j++) {
        dbEntry *e;
        if (!lookupList(c, db, j, &e)) return;
        if (!e || e->v.list.len == 0) continue;
        addReplyArrayLen(c, 2);
        addReplyBulk(c, c->argv[j].ptr, c->argv[j].len);
        ir_str pop = where == LIST_HEAD ? IR_STR("LPOP") : IR_STR("RPOP");
        if (count != -1) {
            char num[24]; /* replicas: [B]LMPOP as LPOP/RPOP key <popped> */
            size_t popped =
                (unsigned long long)count < e->v.list.len ? (size_t)count : e->v.list.len;
            int nl = ll2string(num, sizeof(num), (long long)popped);
            replRewrite(c, 3, (ir_str[]){pop, replArg(c, j), {num, (size_t)nl}});
            popRange(c, db, e, where, count);
        } else {
            replRewrite(c, 2, (ir_str[]){pop, replArg(c, j)}); /* replicas: BLPOP as LPOP key */
            lelem x = listPop(db, &e->v.list, where);
            addReplyBulk(c, x.p, x.len);
            free(x.p);
            notifyKeyspaceEvent(NOTIFY_LIST, where == LIST_HEAD ? "lpop" : "rpop", e->key, e->klen,
                                db->id);
            listRemoved(c, db, e);
        }
        return;
    }
    /* Nothing to pop: wait, or answer as a timeout (LMPOP, MULTI, deadline). */
    if (!timeout_arg || !blockingAllowed(c)) addReplyNullArray(c);
    else blockForKeys(c, db, first, n, 1, deadline);
}

/* BLPOP key [key ...] timeout */
void blpopCommand(client *c) { popKeysGeneric(c, 1, c->argc - 2, LIST_HEAD, -1, c->argc - 1); }

/* BRPOP key [key ...] timeout */
void brpopCommand(client *c) { popKeysGeneric(c, 1, c->argc - 2, LIST_TAIL, -1, c->argc - 1); }

/* [B]LMPOP [timeout] numkeys key [key ...] LEFT|RIGHT [COUNT count] */
static void lmpopGeneric(client *c, int numkeys_idx, int blocking) {
    long long numkeys, count = -1;
    int where;
    if (getRangeLong(c, numkeys_idx, 1, LONG_MAX, &numkeys, "numkeys should be greater than 0"))
        return;
    long long where_idx = numkeys >= c->argc ? c->argc : numkeys_idx + numkeys + 1;
    if (where_idx >= c->argc) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    if (getListPosition(c, (int)where_idx, &where) != 0) return;
    for (int j = (int)where_idx + 1; j < c->argc; j++) {
        int moreargs = c->argc - 1 - j;
        if (count == -1 && argEq(c, j, "count") && moreargs) {
            j++;
            if (getRangeLong(c, j, 1, LONG_MAX, &count, "count should be greater than 0") != 0)
                return;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (count == -1) count = 1;
    popKeysGeneric(c, numkeys_idx + 1, (int)numkeys, where, count, blocking ? 1 : 0);
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count] */
void lmpopCommand(client *c) { lmpopGeneric(c, 1, 0); }

/* BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count] */
void blmpopCommand(client *c) { lmpopGeneric(c, 2, 1); }
