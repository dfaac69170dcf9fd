/* t_hash.c - the hash commands (HSET, HGET, HMGET, HDEL, HGETALL, HINCRBY,
 * HINCRBYFLOAT, HRANDFIELD, HSCAN, ...).
 *
 * A hash is a dict of field entries (see dbColl in db_internal.h); each
 * value is a malloc'd buffer of its own, which replies copy. OBJECT ENCODING reports listpack until the hash passes
 * Redis's listpack limits (512 fields, 64-byte fields and values), then
 * hashtable for good. While listpack, HGETALL, HKEYS, HVALS, HSCAN,
 * HRANDFIELD with a count, DUMP and snapshots follow insertion order, as
 * Redis's listpack does (an overwritten field keeps its place, HDEL closes
 * the gap: dbColl's ord array); once hashtable, the table's order.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "replication.h"
#include "server.h"

/* Redis's hashTypeTryConversion and the size check after an insert. */
static void hashNoteLen(ir_db *db, dbColl *co, size_t flen, size_t vlen) {
    long long max = encodingLimits.hash_max_listpack_value;
    if (!co->big && ((long long)flen > max || (long long)vlen > max)) collSetBig(db, co);
}

static void hashNoteSize(ir_db *db, dbColl *co) {
    if (!co->big && (long long)dictSize(&co->d) > encodingLimits.hash_max_listpack_entries)
        collSetBig(db, co);
}

/* The hash at argv[1] for writing, created if absent; NULL after WRONGTYPE. */
static dbEntry *hashLookupWriteOrCreate(client *c, ir_db *db, const dbkey *k) {
    dbEntry *e = lookupKey(db, k);
    if (e && e->type != OBJ_HASH) {
        addReplyStr(c, shared.wrongtypeerr);
        return NULL;
    }
    return e ? e : dbAdd(db, k, OBJ_HASH, 0);
}

/* Set one field; 1 if it is new. */
static int hashSet(ir_db *db, dbColl *co, const ir_arg *f, const ir_arg *v) {
    hashNoteLen(db, co, f->len, v->len);
    dbEntry *fe = collFind(co, f->ptr, f->len);
    if (fe) {
        collSetValue(db, fe, v->ptr, v->len);
        return 0;
    }
    collAdd(db, co, f->ptr, f->len, v->ptr, v->len);
    hashNoteSize(db, co);
    return 1;
}

static void hsetGeneric(client *c, int ok_reply) {
    if (c->argc % 2 == 1) {
        addReplyErrorArity(c);
        return;
    }
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = hashLookupWriteOrCreate(c, db, &k);
    if (!e) return;
    long long created = 0;
    for (int j = 2; j < c->argc; j += 2)
        created += hashSet(db, e->v.coll, &c->argv[j], &c->argv[j + 1]);
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_HASH, "hset", k.p, k.len, db->id);
    if (ok_reply) addReplyStr(c, shared.ok);
    else addReplyLongLong(c, created);
}

/* HSET key field value [field value ...] */
void hsetCommand(client *c) { hsetGeneric(c, 0); }

/* HMSET key field value [field value ...] */
void hmsetCommand(client *c) { hsetGeneric(c, 1); }

/* HSETNX key field value */
void hsetnxCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = hashLookupWriteOrCreate(c, db, &k);
    if (!e) return;
    if (collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len)) {
        addReplyStr(c, shared.czero);
        return;
    }
    hashSet(db, e->v.coll, &c->argv[2], &c->argv[3]);
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_HASH, "hset", k.p, k.len, db->id);
    addReplyStr(c, shared.cone);
}

static void addReplyField(client *c, const dbEntry *fe) {
    if (fe) addReplyBulk(c, fe->v.str.ptr, fe->v.str.len);
    else addReplyNull(c);
}

/* HGET key field */
void hgetCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.nullbulk, OBJ_HASH);
    if (!e) return;
    addReplyField(c, collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len));
}

/* HMGET key field [field ...] */
void hmgetCommand(client *c) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_HASH, &missing);
    if (!e && !missing) return;
    addReplyArrayLen(c, c->argc - 2);
    for (int j = 2; j < c->argc; j++)
        addReplyField(c, e ? collFind(e->v.coll, c->argv[j].ptr, c->argv[j].len) : NULL);
}

/* HDEL key field [field ...] */
void hdelCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_HASH);
    if (!e) return;
    ir_db *db = dbFor(c);
    long long deleted = 0;
    for (int j = 2; j < c->argc; j++) {
        dbEntry *fe = collFind(e->v.coll, c->argv[j].ptr, c->argv[j].len);
        if (!fe) continue;
        collDelete(db, e->v.coll, fe);
        deleted++;
        if (dictSize(&e->v.coll->d) == 0) break;
    }
    if (deleted) {
        signalModifiedKey(c, db, c->argv[1].ptr, c->argv[1].len);
        notifyKeyspaceEvent(NOTIFY_HASH, "hdel", c->argv[1].ptr, c->argv[1].len, db->id);
        if (dictSize(&e->v.coll->d) == 0)
            notifyKeyspaceEvent(NOTIFY_GENERIC, "del", c->argv[1].ptr, c->argv[1].len, db->id);
        if (dictSize(&e->v.coll->d) == 0) dbDeleteEntry(db, e);
    }
    addReplyLongLong(c, deleted);
}

/* HLEN key */
void hlenCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_HASH);
    if (!e) return;
    addReplyLongLong(c, (long long)dictSize(&e->v.coll->d));
}

/* HEXISTS key field */
void hexistsCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_HASH);
    if (!e) return;
    addReplyStr(c,
                collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len) ? shared.cone : shared.czero);
}

/* HSTRLEN key field */
void hstrlenCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_HASH);
    if (!e) return;
    dbEntry *fe = collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len);
    addReplyLongLong(c, fe ? (long long)fe->v.str.len : 0);
}

#define HASH_KEYS 1
#define HASH_VALS 2

/* HGETALL / HKEYS / HVALS: a map in RESP3 for both, an array otherwise. */
static void hgetallGeneric(client *c, int what) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_HASH, &missing);
    if (!e) {
        if (!missing) return;
        if (what == (HASH_KEYS | HASH_VALS)) addReplyMapLen(c, 0);
        else addReplyArrayLen(c, 0);
        return;
    }
    long n = (long)dictSize(&e->v.coll->d);
    if (what == (HASH_KEYS | HASH_VALS)) addReplyMapLen(c, n);
    else addReplyArrayLen(c, n);
    collIter it; /* a listpack's insertion order, else the table's */
    collIterInit(&it, e->v.coll);
    for (const dbEntry *fe; (fe = collNext(&it));) {
        if (what & HASH_KEYS) addReplyBulk(c, fe->key, fe->klen);
        if (what & HASH_VALS) addReplyBulk(c, fe->v.str.ptr, fe->v.str.len);
    }
}

/* HGETALL key */
void hgetallCommand(client *c) { hgetallGeneric(c, HASH_KEYS | HASH_VALS); }

/* HKEYS key */
void hkeysCommand(client *c) { hgetallGeneric(c, HASH_KEYS); }

/* HVALS key */
void hvalsCommand(client *c) { hgetallGeneric(c, HASH_VALS); }

/* HINCRBY key field increment */
void hincrbyCommand(client *c) {
    long long incr, value = 0;
    if (getLongLongFromArg(c, 3, &incr) != 0) return;
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_HASH) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    dbEntry *fe = e ? collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len) : NULL;
    if (fe && !string2ll(fe->v.str.ptr, fe->v.str.len, &value)) {
        addReplyError(c, "hash value is not an integer");
        return;
    }
    if ((incr < 0 && value < 0 && incr < LLONG_MIN - value) ||
        (incr > 0 && value > 0 && incr > LLONG_MAX - value)) {
        addReplyError(c, "increment or decrement would overflow");
        return;
    }
    value += incr;
    char buf[32];
    int n = ll2string(buf, sizeof(buf), value);
    if (!e) e = dbAdd(db, &k, OBJ_HASH, 0);
    if (fe) {
        hashNoteLen(db, e->v.coll, c->argv[2].len, (size_t)n);
        collSetValue(db, fe, buf, (size_t)n);
    } else {
        hashNoteLen(db, e->v.coll, c->argv[2].len, (size_t)n);
        collAdd(db, e->v.coll, c->argv[2].ptr, c->argv[2].len, buf, (size_t)n);
        hashNoteSize(db, e->v.coll);
    }
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_HASH, "hincrby", k.p, k.len, db->id);
    addReplyLongLong(c, value);
}

/* HINCRBYFLOAT key field increment */
void hincrbyfloatCommand(client *c) {
    long double incr, value = 0;
    if (!string2ld(c->argv[3].ptr, c->argv[3].len, &incr)) {
        addReplyError(c, "value is not a valid float");
        return;
    }
    if (isnan(incr) || isinf(incr)) {
        addReplyError(c, "value is NaN or Infinity");
        return;
    }
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_HASH) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    dbEntry *fe = e ? collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len) : NULL;
    if (fe && !string2ld(fe->v.str.ptr, fe->v.str.len, &value)) {
        addReplyError(c, "hash value is not a float");
        return;
    }
    value += incr;
    if (isnan(value) || isinf(value)) {
        addReplyError(c, "increment would produce NaN or Infinity");
        return;
    }
    char buf[5 * 1024];
    int n = ld2stringHuman(buf, sizeof(buf), value);
    if (!e) e = dbAdd(db, &k, OBJ_HASH, 0);
    if (fe) {
        hashNoteLen(db, e->v.coll, c->argv[2].len, (size_t)n);
        collSetValue(db, fe, buf, (size_t)n);
    } else {
        hashNoteLen(db, e->v.coll, c->argv[2].len, (size_t)n);
        collAdd(db, e->v.coll, c->argv[2].ptr, c->argv[2].len, buf, (size_t)n);
        hashNoteSize(db, e->v.coll);
    }
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_HASH, "hincrbyfloat", k.p, k.len, db->id);
    replRewrite(c, 4, (ir_str[]){IR_STR("HSET"), replArg(c, 1), replArg(c, 2), {buf, (size_t)n}});
    addReplyBulk(c, buf, (size_t)n);
}

static void addReplyHashPair(client *c, const dbEntry *fe, int withvalues) {
    if (withvalues && c->resp >= 3) addReplyArrayLen(c, 2);
    addReplyBulk(c, fe->key, fe->klen);
    if (withvalues) addReplyBulk(c, fe->v.str.ptr, fe->v.str.len);
}

/* HRANDFIELD key [count [WITHVALUES]] */
void hrandfieldCommand(client *c) {
    ir_db *db = dbFor(c);
    if (c->argc == 2) {
        dbEntry *e = lookupKeyOrReply(c, 1, shared.nullbulk, OBJ_HASH);
        if (!e) return;
        dbEntry *fe = collRandom(db, e->v.coll);
        addReplyBulk(c, fe->key, fe->klen);
        return;
    }
    long long l;
    int withvalues = 0;
    if (getLongLongFromArg(c, 2, &l) != 0) return;
    if (l == LLONG_MIN) {
        addReplyErrorFormat(c, "value is out of range, value must between %lld and %lld",
                            -LLONG_MAX, LLONG_MAX);
        return;
    }
    if (c->argc >= 4) {
        if (c->argc > 4 || !argEq(c, 3, "withvalues")) {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
        if (l < -LLONG_MAX / 2 || l > LLONG_MAX / 2) {
            addReplyError(c, "value is out of range");
            return;
        }
        withvalues = 1;
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.emptyarray, OBJ_HASH);
    if (!e) return;
    if (l == 0) {
        addReplyStr(c, shared.emptyarray);
        return;
    }
    dbColl *co = e->v.coll;
    size_t size = dictSize(&co->d);
    if (l < 0) { /* repeats allowed: uniform draws from an array of the fields */
        long long count = -l;
        dbEntry **all = dbScratch(db, size);
        collAll(co, all);
        addReplyArrayLen(c, (long)(withvalues && c->resp == 2 ? count * 2 : count));
        while (count--) addReplyHashPair(c, all[dbRand(db) % size], withvalues);
        return;
    }
    size_t n = collSample(db, co, (size_t)l < size ? (size_t)l : size);
    dbEntry **picked = dbScratch(db, 0);
    addReplyArrayLen(c, (long)(withvalues && c->resp == 2 ? n * 2 : n));
    for (size_t i = 0; i < n; i++) addReplyHashPair(c, picked[i], withvalues);
}

/* HSCAN key cursor [MATCH pattern] [COUNT count] */
void hscanCommand(client *c) {
    unsigned long long cursor;
    if (parseScanCursorOrReply(c, 2, &cursor) != 0) return;
    dbEntry *e = lookupKeyOrReply(c, 1, IR_STR("*2\r\n$1\r\n0\r\n*0\r\n"), OBJ_HASH);
    if (!e) return;
    scanGenericCommand(c, e);
}
