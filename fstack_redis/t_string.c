/* t_string.c - string values and the string commands (GET, SET, MGET, MSET,
 * INCR/DECR/INCRBY/DECRBY, STRLEN).
 *
 * A string value is a NUL-terminated buffer: embedded in the entry when it
 * was short at creation, otherwise malloc'd. Overwrites reuse the buffer
 * when the new value fits (and the buffer is not far too big), big request
 * arguments are taken over instead of copied, and INCR rewrites the digits
 * in place, so the steady state of SET/INCR on existing keys allocates
 * nothing.
 *
 * A reply sends a big value by reference and pins it (e->v.str.pin, see
 * server.h): until the client has read it, the buffer is never rewritten or
 * freed. SET, DEL, EXPIRE, FLUSHALL ... of a pinned value detach the buffer
 * (it is freed after the last write) and the key gets a new one.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "server.h"

/* ---- values ----------------------------------------------------------------- */

static inline char *embeddedBuf(dbEntry *e) { return e->key + e->klen + 1; }

/* Drop e's heap buffer (if any): freed, or handed to its pin if a pending
 * reply points into it. */
static void strDropHeapBuf(ir_db *db, dbEntry *e) {
    if ((e->flags & DBE_EMBEDDED) || !e->v.str.ptr) return;
    uint64_t bytes = dbBufBytes(e->v.str.cap);
    db->bytes -= bytes;
    if (e->v.str.pin) pinDetach(e->v.str.pin, e->v.str.ptr, 0, bytes); /* clears v.str.pin */
    else free(e->v.str.ptr);
    e->v.str.ptr = NULL;
    e->v.str.cap = 0;
}

/* Point e at a buffer able to hold len bytes + NUL; may keep the old one
 * (never a pinned one: a reply is still reading it). */
static char *strPrepare(ir_db *db, dbEntry *e, size_t len) {
    size_t need = len + 1;
    char *buf = e->v.str.ptr;
    if (buf && !e->v.str.pin && need <= e->v.str.cap &&
        ((e->flags & DBE_EMBEDDED) || e->v.str.cap <= 2 * need + DB_EMBED_MAX))
        return buf;
    strDropHeapBuf(db, e);
    if (need <= e->ecap) {
        e->v.str.ptr = embeddedBuf(e);
        e->v.str.cap = e->ecap;
        e->flags |= DBE_EMBEDDED;
    } else {
        size_t cap = need < DB_INT_CAP ? DB_INT_CAP : need; /* malloc's minimum anyway */
        e->v.str.ptr = dbMalloc(cap);
        e->v.str.cap = cap;
        e->flags &= (uint8_t)~DBE_EMBEDDED;
        db->bytes += dbBufBytes(cap);
    }
    return e->v.str.ptr;
}

/* A string value in a reply: big ones by reference, pinned. */
static void addReplyValue(client *c, dbEntry *e) {
    addReplyBulkPinned(c, e->v.str.ptr, e->v.str.len, &e->v.str.pin);
}

void strSetValue(ir_db *db, dbEntry *e, const void *p, size_t len, int keep_old_big) {
    (void)keep_old_big;
    char *buf = strPrepare(db, e, len);
    memmove(buf, p, len);
    buf[len] = '\0';
    e->v.str.len = len;
}

void strSetFromArg(ir_db *db, dbEntry *e, client *c, int i, int keep_old_big) {
    if (!c->argv[i].owned) {
        strSetValue(db, e, c->argv[i].ptr, c->argv[i].len, keep_old_big);
        return;
    }
    /* A big bulk already has a buffer of its own: take it, no copy. */
    strDropHeapBuf(db, e);
    size_t len;
    char *p = argSteal(c, i, &len);
    if (!p) p = dbMalloc(0); /* unreachable: owned args are never copied */
    e->v.str.ptr = p;
    e->v.str.len = len;
    e->v.str.cap = len + 1;
    e->flags &= (uint8_t)~DBE_EMBEDDED;
    db->bytes += dbBufBytes(len + 1);
}

void strFreeValue(ir_db *db, dbEntry *e) { strDropHeapBuf(db, e); }

/* Bytes to embed for a new key whose value will be len bytes long. */
static size_t embedFor(client *c, int i) {
    if (c->argv[i].owned || c->argv[i].len + 1 > DB_EMBED_MAX) return 0;
    return (c->argv[i].len + 1 + 7) & ~(size_t)7;
}

/* Set key argv[ki] to argv[vi] (any old value and TTL are replaced). */
static dbEntry *setKeyFromArgs(ir_db *db, client *c, const dbkey *k, dbEntry *e, int vi,
                               int keep_old_big) {
    if (!e) {
        e = dbAdd(db, k, OBJ_STRING, embedFor(c, vi));
    } else {
        dbMakeString(db, e);
        removeExpire(db, e);
    }
    strSetFromArg(db, e, c, vi, keep_old_big);
    return e;
}

/* ---- commands ------------------------------------------------------------------ */

/* GET key */
void getCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.nullbulk, OBJ_STRING);
    if (!e) return;
    addReplyValue(c, e);
}

#define OBJ_NO_FLAGS 0
#define OBJ_SET_NX (1 << 0)
#define OBJ_SET_XX (1 << 1)
#define OBJ_EX (1 << 2)
#define OBJ_PX (1 << 3)
#define OBJ_KEEPTTL (1 << 4)
#define OBJ_SET_GET (1 << 5)
#define OBJ_EXAT (1 << 6)
#define OBJ_PXAT (1 << 7)

/* SET key value [NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|
 *     PXAT unix-time-milliseconds|KEEPTTL] */
void setCommand(client *c) {
    ir_db *db = dbFor(c);
    int flags = OBJ_NO_FLAGS, expire_arg = 0;

    /* Same acceptance as Redis: repeating an option is fine, mixing
     * NX with XX or two different expire kinds is a syntax error. */
    for (int j = 3; j < c->argc; j++) {
        int has_next = j + 1 < c->argc;
        if (argEq(c, j, "nx") && !(flags & OBJ_SET_XX)) {
            flags |= OBJ_SET_NX;
        } else if (argEq(c, j, "xx") && !(flags & OBJ_SET_NX)) {
            flags |= OBJ_SET_XX;
        } else if (argEq(c, j, "get")) {
            flags |= OBJ_SET_GET;
        } else if (argEq(c, j, "keepttl") && !(flags & (OBJ_EX | OBJ_PX | OBJ_EXAT | OBJ_PXAT))) {
            flags |= OBJ_KEEPTTL;
        } else if (argEq(c, j, "ex") && has_next &&
                   !(flags & (OBJ_KEEPTTL | OBJ_PX | OBJ_EXAT | OBJ_PXAT))) {
            flags |= OBJ_EX;
            expire_arg = ++j;
        } else if (argEq(c, j, "px") && has_next &&
                   !(flags & (OBJ_KEEPTTL | OBJ_EX | OBJ_EXAT | OBJ_PXAT))) {
            flags |= OBJ_PX;
            expire_arg = ++j;
        } else if (argEq(c, j, "exat") && has_next &&
                   !(flags & (OBJ_KEEPTTL | OBJ_EX | OBJ_PX | OBJ_PXAT))) {
            flags |= OBJ_EXAT;
            expire_arg = ++j;
        } else if (argEq(c, j, "pxat") && has_next &&
                   !(flags & (OBJ_KEEPTTL | OBJ_EX | OBJ_EXAT | OBJ_PX))) {
            flags |= OBJ_PXAT;
            expire_arg = ++j;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }

    long long when = 0; /* absolute unix time in ms */
    if (expire_arg) {
        if (getLongLongFromArg(c, expire_arg, &when) != 0) return;
        int bad = when <= 0; /* zero, negative, or overflowing on the way */
        if (!bad && (flags & (OBJ_EX | OBJ_EXAT))) bad = __builtin_mul_overflow(when, 1000, &when);
        if (!bad && (flags & (OBJ_EX | OBJ_PX)))
            bad = __builtin_add_overflow(when, (long long)dbNow(db), &when);
        if (bad) {
            addReplyError(c, "invalid expire time in 'set' command");
            return;
        }
    }

    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (flags & OBJ_SET_GET) {
        if (!e) {
            addReplyStr(c, shared.nullbulk);
        } else if (e->type != OBJ_STRING) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        } else {
            addReplyValue(c, e); /* pinned: the SET below detaches it */
        }
    }
    if (((flags & OBJ_SET_NX) && e) || ((flags & OBJ_SET_XX) && !e)) {
        if (!(flags & OBJ_SET_GET)) addReplyStr(c, shared.nullbulk);
        return;
    }

    if (!e) {
        e = dbAdd(db, &k, OBJ_STRING, embedFor(c, 2));
    } else {
        dbMakeString(db, e);
        if (!(flags & OBJ_KEEPTTL)) removeExpire(db, e);
    }
    strSetFromArg(db, e, c, 2, 0);
    if (expire_arg) setExpire(db, e, when);

    if (!(flags & OBJ_SET_GET)) addReplyStr(c, shared.ok);
}

/* MGET key [key ...] */
void mgetCommand(client *c) {
    ir_db *db = dbFor(c);
    addReplyArrayLen(c, c->argc - 1);
    for (int j = 1; j < c->argc; j++) {
        dbkey k = argKey(db, c, j);
        dbEntry *e = lookupKey(db, &k);
        if (e && e->type == OBJ_STRING) addReplyValue(c, e);
        else addReplyStr(c, shared.nullbulk);
    }
}

/* MSET key value [key value ...] */
void msetCommand(client *c) {
    ir_db *db = dbFor(c);
    if ((c->argc % 2) == 0) {
        addReplyError(c, "wrong number of arguments for 'mset' command");
        return;
    }
    for (int j = 1; j < c->argc; j += 2) {
        dbkey k = argKey(db, c, j);
        setKeyFromArgs(db, c, &k, lookupKey(db, &k), j + 1, 0);
    }
    addReplyStr(c, shared.ok);
}

static void incrDecrCommand(client *c, long long incr) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    long long value = 0;

    if (e) {
        if (e->type != OBJ_STRING) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
        if (!string2ll(e->v.str.ptr, e->v.str.len, &value)) {
            addReplyStr(c, shared.notinteger);
            return;
        }
    }
    if ((incr < 0 && value < 0 && incr < LLONG_MIN - value) ||
        (incr > 0 && value > 0 && incr > LLONG_MAX - value)) {
        addReplyError(c, "increment or decrement would overflow");
        return;
    }
    value += incr;

    char buf[32];
    int n = ll2string(buf, sizeof(buf), value);
    if (!e) e = dbAdd(db, &k, OBJ_STRING, DB_INT_CAP);
    strSetValue(db, e, buf, (size_t)n, 0); /* in place; the TTL stays */
    addReplyLongLong(c, value);
}

/* INCR key */
void incrCommand(client *c) { incrDecrCommand(c, 1); }

/* DECR key */
void decrCommand(client *c) { incrDecrCommand(c, -1); }

/* INCRBY key increment */
void incrbyCommand(client *c) {
    long long incr;
    if (getLongLongFromArg(c, 2, &incr) != 0) return;
    incrDecrCommand(c, incr);
}

/* DECRBY key decrement */
void decrbyCommand(client *c) {
    long long incr;
    if (getLongLongFromArg(c, 2, &incr) != 0) return;
    if (incr == LLONG_MIN) { /* cannot be negated */
        addReplyError(c, "decrement would overflow");
        return;
    }
    incrDecrCommand(c, -incr);
}

/* STRLEN key */
void strlenCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_STRING);
    if (!e) return;
    addReplyLongLong(c, (long long)e->v.str.len);
}
