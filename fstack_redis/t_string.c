/* t_string.c - string values and the string commands (GET, SET, MGET, MSET,
 * INCR/DECR/INCRBY/DECRBY, STRLEN, GETEX, SETEX, PSETEX, SETNX, GETSET,
 * GETDEL, APPEND, GETRANGE, SETRANGE, MSETNX, INCRBYFLOAT, LCS); the bit
 * commands over string values are in t_bitops.c, HyperLogLogs in t_hll.c.
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
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "replication.h"
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
    e->flags &= (uint8_t) ~(DBE_ENC_RAW | DBE_ENC_STR);
    char *buf = strPrepare(db, e, len);
    memmove(buf, p, len);
    buf[len] = '\0';
    e->v.str.len = len;
}

void strSetFromArg(ir_db *db, dbEntry *e, client *c, int i, int keep_old_big) {
    e->flags &= (uint8_t) ~(DBE_ENC_RAW | DBE_ENC_STR);
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
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "set", k.p, k.len, db->id);
    if (expire_arg) notifyKeyspaceEvent(NOTIFY_GENERIC, "expire", k.p, k.len, db->id);
    if (expire_arg) replRewriteSetPxat(c, 2, when); /* replicas: SET key value PXAT ms */

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
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_STRING, "set", k.p, k.len, db->id);
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
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "incrby", k.p, k.len, db->id);
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

/* ---- the rest of the string family ------------------------------------------- */

static const char *cmdName(client *c) { return c->cmd ? c->cmd->name : c->argv[0].ptr; }

/* Redis's getExpireMillisecondsOrReply: argv[i] in seconds (unit 1000) or
 * ms, relative (to now) or absolute; > 0 and no overflow. */
static int expireArgOrReply(client *c, ir_db *db, int i, long long unit, int absolute,
                            long long *when) {
    long long v;
    if (getLongLongFromArg(c, i, &v) != 0) return -1;
    if (v <= 0 || __builtin_mul_overflow(v, unit, &v) ||
        (!absolute && __builtin_add_overflow(v, (long long)dbNow(db), &v))) {
        addReplyErrorFormat(c, "invalid expire time in '%s' command", cmdName(c));
        return -1;
    }
    *when = v;
    return 0;
}

/* Redis's checkStringLength. */
static int checkStringLength(client *c, long long size, long long append) {
    long long total;
    if (__builtin_add_overflow(size, append, &total) ||
        (uint64_t)total > c->srv->cfg.proto_max_bulk_len) {
        addReplyError(c, "string exceeds maximum allowed size (proto-max-bulk-len)");
        return -1;
    }
    return 0;
}

/* GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds |
 *     PXAT unix-time-milliseconds | PERSIST] */
void getexCommand(client *c) {
    ir_db *db = dbFor(c);
    int kind = 0, expire_arg = 0; /* kind: 1 EX, 2 PX, 3 EXAT, 4 PXAT, 5 PERSIST */
    for (int j = 2; j < c->argc; j++) {
        int has_next = j + 1 < c->argc, k = 0;
        if (argEq(c, j, "ex") && has_next) k = 1;
        else if (argEq(c, j, "px") && has_next) k = 2;
        else if (argEq(c, j, "exat") && has_next) k = 3;
        else if (argEq(c, j, "pxat") && has_next) k = 4;
        else if (argEq(c, j, "persist")) k = 5;
        if (!k || (kind && kind != k)) {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
        kind = k;
        if (k != 5) expire_arg = ++j;
    }
    long long when = 0;
    if (expire_arg &&
        expireArgOrReply(c, db, expire_arg, kind == 1 || kind == 3 ? 1000 : 1, kind >= 3, &when))
        return;
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyNull(c);
        return;
    }
    if (e->type != OBJ_STRING) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    addReplyValue(c, e); /* pinned: a deletion below detaches it */
    if (expire_arg && kind >= 3 && when <= dbNow(db)) {
        signalModifiedKey(c, db, k.p, k.len);
        dbDeleteEntry(db, e);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "del", k.p, k.len, db->id);
        replRewriteDel(c, (int)repl_lazy_expire);
    } else if (expire_arg) {
        setExpire(db, e, when);
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "expire", k.p, k.len, db->id);
        replRewritePexpireat(c, when, 0);
    } else if (kind == 5 && removeExpire(db, e)) {
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "persist", k.p, k.len, db->id);
        replRewrite(c, 2, (ir_str[]){IR_STR("PERSIST"), replArg(c, 1)});
    }
}

/* SET with an expiry in argv[2] (unit 1000: seconds) and the value in argv[3]. */
static void setexGeneric(client *c, long long unit) {
    ir_db *db = dbFor(c);
    long long when;
    if (expireArgOrReply(c, db, 2, unit, 0, &when) != 0) return;
    dbkey k = argKey(db, c, 1);
    dbEntry *e = setKeyFromArgs(db, c, &k, lookupKey(db, &k), 3, 0);
    setExpire(db, e, when);
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "set", k.p, k.len, db->id);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "expire", k.p, k.len, db->id);
    replRewriteSetPxat(c, 3, when);
    addReplyStr(c, shared.ok);
}

/* SETEX key seconds value */
void setexCommand(client *c) { setexGeneric(c, 1000); }

/* PSETEX key milliseconds value */
void psetexCommand(client *c) { setexGeneric(c, 1); }

/* SETNX key value */
void setnxCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    if (lookupKey(db, &k)) {
        addReplyStr(c, shared.czero);
        return;
    }
    setKeyFromArgs(db, c, &k, NULL, 2, 0);
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "set", k.p, k.len, db->id);
    addReplyStr(c, shared.cone);
}

/* GETSET key value */
void getsetCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_STRING) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    if (e) addReplyValue(c, e); /* pinned: the write below detaches it */
    else addReplyNull(c);
    setKeyFromArgs(db, c, &k, e, 2, 0);
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "set", k.p, k.len, db->id);
    replRewrite(c, 3, (ir_str[]){IR_STR("SET"), replArg(c, 1), replArg(c, 2)}); /* as Redis */
}

/* GETDEL key */
void getdelCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyNull(c);
        return;
    }
    if (e->type != OBJ_STRING) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    addReplyValue(c, e);
    signalModifiedKey(c, db, k.p, k.len);
    dbDeleteEntry(db, e);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "del", k.p, k.len, db->id);
    replRewriteDel(c, 0);
}

/* Make e's value newlen bytes long (bytes past the old end are zeroes),
 * in a buffer of its own that no reply is reading; a new buffer grows like
 * an sds (double up to 1 MB, then +1 MB), so a run of APPENDs copies each
 * byte O(1) times. */
void strResize(ir_db *db, dbEntry *e, size_t newlen) {
    size_t old = e->v.str.len, need = newlen + 1;
    if (!e->v.str.ptr || e->v.str.pin || need > e->v.str.cap) {
        size_t cap = need < (1u << 20) ? need * 2 : need + (1u << 20);
        char *buf = dbMalloc(cap);
        size_t keep = old < newlen ? old : newlen;
        if (keep) memcpy(buf, e->v.str.ptr, keep);
        strDropHeapBuf(db, e); /* freed, or detached if a reply still reads it */
        e->v.str.ptr = buf;
        e->v.str.cap = cap;
        e->flags &= (uint8_t)~DBE_EMBEDDED;
        db->bytes += dbBufBytes(cap);
    }
    if (newlen > old) memset(e->v.str.ptr + old, 0, newlen - old);
    e->v.str.len = newlen;
    e->v.str.ptr[newlen] = '\0';
}

char *strWritable(ir_db *db, dbEntry *e, size_t len, size_t room) {
    strResize(db, e, len + room); /* unpinned, zero-filled past the old end */
    e->v.str.len = len;
    e->v.str.ptr[len] = '\0';
    e->flags |= DBE_ENC_RAW;
    return e->v.str.ptr;
}

void strTakeBuffer(ir_db *db, dbEntry *e, char *buf, size_t len, size_t cap) {
    strDropHeapBuf(db, e); /* freed, or detached if a reply still reads it */
    e->v.str.ptr = buf;
    e->v.str.len = len;
    e->v.str.cap = cap;
    buf[len] = '\0';
    e->flags &= (uint8_t) ~(DBE_EMBEDDED | DBE_ENC_STR);
    e->flags |= DBE_ENC_RAW;
    db->bytes += dbBufBytes(cap);
}

static void strAppend(ir_db *db, dbEntry *e, const char *p, size_t len) {
    size_t old = e->v.str.len;
    strResize(db, e, old + len);
    memcpy(e->v.str.ptr + old, p, len);
}

/* APPEND key value */
void appendCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        e = setKeyFromArgs(db, c, &k, NULL, 2, 0);
    } else {
        if (e->type != OBJ_STRING) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
        if (checkStringLength(c, (long long)e->v.str.len, (long long)c->argv[2].len) != 0) return;
        strAppend(db, e, c->argv[2].ptr, c->argv[2].len);
        e->flags |= DBE_ENC_RAW;
    }
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "append", k.p, k.len, db->id);
    addReplyLongLong(c, (long long)e->v.str.len);
}

/* GETRANGE key start end (and SUBSTR) */
void getrangeCommand(client *c) {
    long long start, end;
    if (getLongLongFromArg(c, 2, &start) != 0 || getLongLongFromArg(c, 3, &end) != 0) return;
    dbEntry *e = lookupKeyOrReply(c, 1, IR_STR("$0\r\n\r\n"), OBJ_STRING);
    if (!e) return;
    long long len = (long long)e->v.str.len;
    if (start < 0 && end < 0 && start > end) {
        addReplyProto(c, "$0\r\n\r\n", 6);
        return;
    }
    if (start < 0) start += len;
    if (end < 0) end += len;
    if (start < 0) start = 0;
    if (end < 0) end = 0;
    if (end >= len) end = len - 1;
    if (start > end || len == 0) {
        addReplyProto(c, "$0\r\n\r\n", 6);
        return;
    }
    addReplyBulk(c, e->v.str.ptr + start, (size_t)(end - start + 1));
}

/* SETRANGE key offset value */
void setrangeCommand(client *c) {
    ir_db *db = dbFor(c);
    long long offset;
    if (getLongLongFromArg(c, 2, &offset) != 0) return;
    if (offset < 0) {
        addReplyError(c, "offset is out of range");
        return;
    }
    const char *v = c->argv[3].ptr;
    size_t vlen = c->argv[3].len;
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        if (vlen == 0) {
            addReplyStr(c, shared.czero);
            return;
        }
        if (checkStringLength(c, offset, (long long)vlen) != 0) return;
        e = dbAdd(db, &k, OBJ_STRING, 0);
        strSetValue(db, e, "", 0, 0);
    } else {
        if (e->type != OBJ_STRING) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
        if (vlen == 0) {
            addReplyLongLong(c, (long long)e->v.str.len);
            return;
        }
        if (checkStringLength(c, offset, (long long)vlen) != 0) return;
    }
    size_t end = (size_t)offset + vlen, old = e->v.str.len;
    strResize(db, e, end > old ? end : old); /* zero-filled; copied if a reply reads it */
    memcpy(e->v.str.ptr + offset, v, vlen);
    e->flags |= DBE_ENC_RAW;
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "setrange", k.p, k.len, db->id);
    addReplyLongLong(c, (long long)e->v.str.len);
}

/* MSETNX key value [key value ...] */
void msetnxCommand(client *c) {
    ir_db *db = dbFor(c);
    if ((c->argc % 2) == 0) {
        addReplyErrorArity(c);
        return;
    }
    for (int j = 1; j < c->argc; j += 2) {
        dbkey k = argKey(db, c, j);
        if (lookupKey(db, &k)) {
            addReplyStr(c, shared.czero);
            return;
        }
    }
    for (int j = 1; j < c->argc; j += 2) {
        dbkey k = argKey(db, c, j);
        setKeyFromArgs(db, c, &k, lookupKey(db, &k), j + 1, 0);
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_STRING, "set", k.p, k.len, db->id);
    }
    addReplyStr(c, shared.cone);
}

#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

int string2ld(const char *s, size_t slen, long double *dp) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';
    errno = 0;
    char *eptr;
    long double value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || (size_t)(eptr - buf) != slen ||
        (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL || value == 0)) ||
        errno == EINVAL || isnan(value))
        return 0;
    *dp = value;
    return 1;
}

int ld2stringHuman(char *buf, size_t len, long double value) {
    int l = snprintf(buf, len, "%.17Lf", value);
    if (l < 0 || (size_t)l + 1 > len) return 0;
    if (strchr(buf, '.')) { /* no trailing zeroes after the point, nor a bare point */
        char *p = buf + l - 1;
        while (*p == '0') p--, l--;
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    buf[l] = '\0';
    return l;
}

/* INCRBYFLOAT key increment */
void incrbyfloatCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    long double value = 0, incr;
    if (e && e->type != OBJ_STRING) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    if ((e && !string2ld(e->v.str.ptr, e->v.str.len, &value)) ||
        !string2ld(c->argv[2].ptr, c->argv[2].len, &incr)) {
        addReplyError(c, "value is not a valid float");
        return;
    }
    value += incr;
    if (isnan(value) || isinf(value)) {
        addReplyError(c, "increment would produce NaN or Infinity");
        return;
    }
    char buf[MAX_LONG_DOUBLE_CHARS];
    int n = ld2stringHuman(buf, sizeof(buf), value);
    if (!e) e = dbAdd(db, &k, OBJ_STRING, 0);
    strSetValue(db, e, buf, (size_t)n, 0); /* the TTL stays */
    e->flags |= DBE_ENC_STR;
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "incrbyfloat", k.p, k.len, db->id);
    replRewrite(c, 4,
                (ir_str[]){IR_STR("SET"), replArg(c, 1), {buf, (size_t)n}, IR_STR("KEEPTTL")});
    addReplyBulk(c, buf, (size_t)n);
}

/* LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest
 * common subsequence by the textbook dynamic programme (a table of
 * (|a|+1)(|b|+1) lengths, bounded by proto-max-bulk-len as in Redis), walked
 * back from the end to build the string and the matching ranges, which come
 * out last to first as Redis sends them. */
void lcsCommand(client *c) {
    ir_db *db = dbFor(c);
    const char *s[2];
    size_t n[2];
    for (int j = 0; j < 2; j++) {
        dbkey k = argKey(db, c, 1 + j);
        dbEntry *e = lookupKey(db, &k);
        if (e && e->type != OBJ_STRING) {
            addReplyError(c, "The specified keys must contain string values");
            return;
        }
        s[j] = e ? e->v.str.ptr : "";
        n[j] = e ? e->v.str.len : 0;
    }
    int getlen = 0, getidx = 0, withmatchlen = 0;
    long long minmatchlen = 0;
    for (int j = 3; j < c->argc; j++) {
        if (argEq(c, j, "idx")) getidx = 1;
        else if (argEq(c, j, "len")) getlen = 1;
        else if (argEq(c, j, "withmatchlen")) withmatchlen = 1;
        else if (argEq(c, j, "minmatchlen") && j + 1 < c->argc) {
            if (getLongLongFromArg(c, ++j, &minmatchlen) != 0) return;
            if (minmatchlen < 0) minmatchlen = 0;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (getidx && getlen) {
        addReplyError(c, "If you want both the length and indexes, please just use IDX.");
        return;
    }
    if (n[0] >= UINT32_MAX - 1 || n[1] >= UINT32_MAX - 1) {
        addReplyError(c, "String too long for LCS");
        return;
    }
    const char *a = s[0], *b = s[1];
    uint32_t alen = (uint32_t)n[0], blen = (uint32_t)n[1];
    unsigned long long cells = (unsigned long long)(alen + 1) * (blen + 1);
    if (cells * sizeof(uint32_t) > c->srv->cfg.proto_max_bulk_len) {
        addReplyError(c,
                      "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
        return;
    }
    uint32_t *dp = malloc((size_t)cells * sizeof(uint32_t));
    if (!dp) {
        addReplyError(c, "Insufficient memory, failed allocating transient memory for LCS");
        return;
    }
#define LCS(i, j) dp[(size_t)(j) + (size_t)(i) * (blen + 1)]
    for (uint32_t i = 0; i <= alen; i++)
        for (uint32_t j = 0; j <= blen; j++) {
            if (i == 0 || j == 0) LCS(i, j) = 0;
            else if (a[i - 1] == b[j - 1]) LCS(i, j) = LCS(i - 1, j - 1) + 1;
            else LCS(i, j) = LCS(i - 1, j) > LCS(i, j - 1) ? LCS(i - 1, j) : LCS(i, j - 1);
        }
    uint32_t total = LCS(alen, blen), idx = total;
    if (getlen) {
        free(dp);
        addReplyLongLong(c, total);
        return;
    }
    char *result = malloc(total + 1);
    uint32_t(*ranges)[5] = getidx ? malloc(((size_t)total + 1) * sizeof(*ranges)) : NULL;
    if (!result || (getidx && !ranges)) {
        free(dp);
        free(result);
        free(ranges);
        addReplyError(c, "Insufficient memory, failed allocating transient memory for LCS");
        return;
    }
    size_t nranges = 0;
    uint32_t as = alen, ae = 0, bs = 0, be = 0; /* as == alen: no range open */
    for (uint32_t i = alen, j = blen; i > 0 && j > 0;) {
        int emit = 0;
        if (a[i - 1] == b[j - 1]) {
            result[idx - 1] = a[i - 1];
            if (as == alen) {
                as = ae = i - 1;
                bs = be = j - 1;
            } else if (as == i && bs == j) { /* contiguous: extend backwards */
                as--;
                bs--;
            } else {
                emit = 1;
            }
            if (as == 0 || bs == 0) emit = 1; /* the first byte of a string: done */
            idx--;
            i--;
            j--;
        } else {
            if (LCS(i - 1, j) > LCS(i, j - 1)) i--;
            else j--;
            if (as != alen) emit = 1;
        }
        if (emit) {
            uint32_t len = ae - as + 1;
            if (ranges && (minmatchlen == 0 || len >= minmatchlen)) {
                uint32_t *r = ranges[nranges++];
                r[0] = as, r[1] = ae, r[2] = bs, r[3] = be, r[4] = len;
            }
            as = alen;
        }
    }
#undef LCS
    free(dp);
    if (!getidx) {
        if (total) memcpy(addReplyBulkReserve(c, total), result, total); /* freed below */
        else addReplyProto(c, "$0\r\n\r\n", 6);
    } else {
        addReplyMapLen(c, 2);
        addReplyBulkCString(c, "matches");
        addReplyArrayLen(c, (long)nranges);
        for (size_t k = 0; k < nranges; k++) {
            addReplyArrayLen(c, 2 + withmatchlen);
            addReplyArrayLen(c, 2);
            addReplyLongLong(c, ranges[k][0]);
            addReplyLongLong(c, ranges[k][1]);
            addReplyArrayLen(c, 2);
            addReplyLongLong(c, ranges[k][2]);
            addReplyLongLong(c, ranges[k][3]);
            if (withmatchlen) addReplyLongLong(c, ranges[k][4]);
        }
        addReplyBulkCString(c, "len");
        addReplyLongLong(c, total);
    }
    free(result);
    free(ranges);
}
