/* t_set.c - the set commands (SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER,
 * SCARD, SPOP, SRANDMEMBER, SMOVE, SINTER/SUNION/SDIFF and their STORE
 * forms, SINTERCARD, SSCAN).
 *
 * A set is a dict of member entries without values (see dbColl in
 * db_internal.h). OBJECT ENCODING reports intset while every member is an
 * integer and there are at most 512, then hashtable for good, as Redis 7.0;
 * while intset, SMEMBERS, SSCAN, DUMP and set operations' results list the
 * members ascending, as an intset does (dbColl's ord array).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "replication.h"
#include "server.h"

/* Add a member if absent; 1 if added. */
static int setAdd(ir_db *db, dbColl *co, const char *p, size_t len) {
    if (collFind(co, p, len)) return 0;
    long long v;
    if (!co->big && !string2ll(p, len, &v)) collSetBig(db, co);
    collAdd(db, co, p, len, NULL, 0);
    if (!co->big && (long long)dictSize(&co->d) > encodingLimits.set_max_intset_entries)
        collSetBig(db, co);
    return 1;
}

/* SADD key member [member ...] */
void saddCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_SET) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    if (!e) e = dbAdd(db, &k, OBJ_SET, 0);
    long long added = 0;
    for (int j = 2; j < c->argc; j++)
        added += setAdd(db, e->v.coll, c->argv[j].ptr, c->argv[j].len);
    if (added) signalModifiedKey(c, db, k.p, k.len);
    if (added) notifyKeyspaceEvent(NOTIFY_SET, "sadd", k.p, k.len, db->id);
    addReplyLongLong(c, added);
}

/* SREM key member [member ...] */
void sremCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_SET);
    if (!e) return;
    ir_db *db = dbFor(c);
    long long removed = 0;
    for (int j = 2; j < c->argc; j++) {
        dbEntry *m = collFind(e->v.coll, c->argv[j].ptr, c->argv[j].len);
        if (!m) continue;
        collDelete(db, e->v.coll, m);
        removed++;
        if (dictSize(&e->v.coll->d) == 0) break;
    }
    if (removed) {
        signalModifiedKey(c, db, c->argv[1].ptr, c->argv[1].len);
        notifyKeyspaceEvent(NOTIFY_SET, "srem", c->argv[1].ptr, c->argv[1].len, db->id);
        if (dictSize(&e->v.coll->d) == 0)
            notifyKeyspaceEvent(NOTIFY_GENERIC, "del", c->argv[1].ptr, c->argv[1].len, db->id);
        if (dictSize(&e->v.coll->d) == 0) dbDeleteEntry(db, e);
    }
    addReplyLongLong(c, removed);
}

static void addReplyMembers(client *c, dbColl *co, int as_set) {
    if (as_set) addReplySetLen(c, (long)dictSize(&co->d));
    else addReplyArrayLen(c, (long)dictSize(&co->d));
    collIter it; /* an intset ascending, as Redis's */
    collIterInit(&it, co);
    for (const dbEntry *m; (m = collNext(&it));) addReplyBulk(c, m->key, m->klen);
}

/* SMEMBERS key */
void smembersCommand(client *c) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_SET, &missing);
    if (!e) {
        if (missing) addReplySetLen(c, 0);
        return;
    }
    addReplyMembers(c, e->v.coll, 1);
}

/* SISMEMBER key member */
void sismemberCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_SET);
    if (!e) return;
    addReplyStr(c,
                collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len) ? shared.cone : shared.czero);
}

/* SMISMEMBER key member [member ...] */
void smismemberCommand(client *c) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_SET, &missing);
    if (!e && !missing) return;
    addReplyArrayLen(c, c->argc - 2);
    for (int j = 2; j < c->argc; j++)
        addReplyStr(c, e && collFind(e->v.coll, c->argv[j].ptr, c->argv[j].len) ? shared.cone
                                                                                : shared.czero);
}

/* SCARD key */
void scardCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_SET);
    if (!e) return;
    addReplyLongLong(c, (long long)dictSize(&e->v.coll->d));
}

/* SPOP key [count] */
void spopCommand(client *c) {
    ir_db *db = dbFor(c);
    if (c->argc > 3) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    long long count = -1;
    if (c->argc == 3 && getPositiveLongFromArg(c, 2, &count) != 0) return;
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_SET, &missing);
    if (!e) {
        if (!missing) return;
        if (count < 0) addReplyNull(c);
        else addReplySetLen(c, 0);
        return;
    }
    dbColl *co = e->v.coll;
    if (count == 0) {
        addReplySetLen(c, 0);
        return;
    }
    if (count < 0) {
        dbEntry *m = collRandom(db, co);
        addReplyBulk(c, m->key, m->klen);
        replRewrite(c, 3, (ir_str[]){IR_STR("SREM"), replArg(c, 1), {m->key, m->klen}});
        collDelete(db, co, m);
    } else {
        /* replicas: all of it as DEL, else one SREM per member (in MULTI/EXEC) */
        int all = (unsigned long long)count >= dictSize(&co->d);
        if (all) replRewriteDel(c, (int)repl_lazy_server_del);
        else replPrevent(c);
        size_t n = collSample(db, co, (size_t)count);
        dbEntry **picked = dbScratch(db, 0);
        addReplySetLen(c, (long)n);
        for (size_t i = 0; i < n; i++) {
            addReplyBulk(c, picked[i]->key, picked[i]->klen);
            if (!all)
                replAlso(
                    c, 3,
                    (ir_str[]){IR_STR("SREM"), replArg(c, 1), {picked[i]->key, picked[i]->klen}});
            collDelete(db, co, picked[i]);
        }
    }
    signalModifiedKey(c, db, c->argv[1].ptr, c->argv[1].len);
    notifyKeyspaceEvent(NOTIFY_SET, "spop", c->argv[1].ptr, c->argv[1].len, db->id);
    if (dictSize(&co->d) == 0)
        notifyKeyspaceEvent(NOTIFY_GENERIC, "del", c->argv[1].ptr, c->argv[1].len, db->id);
    if (dictSize(&co->d) == 0) dbDeleteEntry(db, e);
}

/* SRANDMEMBER key [count] */
void srandmemberCommand(client *c) {
    ir_db *db = dbFor(c);
    if (c->argc > 3) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    if (c->argc == 2) {
        dbEntry *e = lookupKeyOrReply(c, 1, shared.nullbulk, OBJ_SET);
        if (!e) return;
        dbEntry *m = collRandom(db, e->v.coll);
        addReplyBulk(c, m->key, m->klen);
        return;
    }
    long long l;
    if (getLongLongFromArg(c, 2, &l) != 0) return;
    if (l == LLONG_MIN) {
        addReplyErrorFormat(c, "value is out of range, value must between %lld and %lld",
                            -LLONG_MAX, LLONG_MAX);
        return;
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.emptyarray, OBJ_SET);
    if (!e) return;
    if (l == 0) {
        addReplyStr(c, shared.emptyarray);
        return;
    }
    dbColl *co = e->v.coll;
    if (l < 0) { /* repeats allowed: uniform draws from an array of the members */
        size_t size = dictSize(&co->d);
        dbEntry **all = dbScratch(db, size);
        collAll(co, all);
        addReplyArrayLen(c, (long)-l);
        for (long long i = 0; i < -l; i++) {
            dbEntry *m = all[dbRand(db) % size];
            addReplyBulk(c, m->key, m->klen);
        }
        return;
    }
    size_t n = collSample(db, co, (size_t)l);
    dbEntry **picked = dbScratch(db, 0);
    addReplyArrayLen(c, (long)n);
    for (size_t i = 0; i < n; i++) addReplyBulk(c, picked[i]->key, picked[i]->klen);
}

/* SMOVE source destination member */
void smoveCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey sk = argKey(db, c, 1), dk = argKey(db, c, 2);
    dbEntry *src = lookupKey(db, &sk), *dst = lookupKey(db, &dk);
    if (!src) {
        addReplyStr(c, shared.czero);
        return;
    }
    if (src->type != OBJ_SET || (dst && dst->type != OBJ_SET)) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    const ir_arg *m = &c->argv[3];
    dbEntry *me = collFind(src->v.coll, m->ptr, m->len);
    if (src == dst || !me) {
        addReplyStr(c, me ? shared.cone : shared.czero);
        return;
    }
    collDelete(db, src->v.coll, me);
    notifyKeyspaceEvent(NOTIFY_SET, "srem", sk.p, sk.len, db->id);
    if (dictSize(&src->v.coll->d) == 0)
        notifyKeyspaceEvent(NOTIFY_GENERIC, "del", sk.p, sk.len, db->id);
    if (dictSize(&src->v.coll->d) == 0) dbDeleteEntry(db, src);
    signalModifiedKey(c, db, sk.p, sk.len);
    if (!dst) dst = dbAdd(db, &dk, OBJ_SET, 0);
    /* the destination changed only if it did not hold the member already */
    int added = setAdd(db, dst->v.coll, m->ptr, m->len);
    if (added) signalModifiedKey(c, db, dk.p, dk.len);
    if (added) notifyKeyspaceEvent(NOTIFY_SET, "sadd", dk.p, dk.len, db->id);
    addReplyStr(c, shared.cone);
}

/* ---- SINTER, SUNION, SDIFF -------------------------------------------------- */

#define SET_OP_INTER 0
#define SET_OP_UNION 1
#define SET_OP_DIFF 2

/* The sets named by argv[first .. first+n-1] into sets[] (NULL: no such
 * key); -1 after replying WRONGTYPE. */
static int lookupSets(client *c, ir_db *db, int first, int n, dbColl **sets) {
    for (int j = 0; j < n; j++) {
        dbkey k = argKey(db, c, first + j);
        dbEntry *e = lookupKey(db, &k);
        if (e && e->type != OBJ_SET) {
            addReplyStr(c, shared.wrongtypeerr);
            return -1;
        }
        if (!e && c->cmd && (c->cmd->flags & CMD_WRITE)) /* the STOREs read as lookupKeyRead */
            notifyKeyspaceEvent(NOTIFY_KEY_MISS, "keymiss", k.p, k.len, db->id);
        sets[j] = e ? e->v.coll : NULL;
    }
    return 0;
}

/* A set not in the keyspace yet (its bytes count in db's). */
static dbEntry *tempSet(ir_db *db) {
    dbEntry *e = dbMalloc(sizeof(dbEntry) + 1);
    memset(e, 0, sizeof(*e));
    e->type = OBJ_SET;
    e->expire = -1;
    dbColl *co = dbMalloc(sizeof(*co));
    collInit(co, db->d.seed, OBJ_SET);
    e->v.coll = co;
    db->bytes += sizeof(*co) + DB_MALLOC_OVERHEAD;
    return e;
}

static void tempSetFree(ir_db *db, dbEntry *t) {
    dbFreeValue(db, t);
    free(t);
}

/* SINTER/SUNION/SDIFF[STORE]: the keys are argv[first..argc-1]; dst is the
 * STORE form's destination argument (0: reply with the members). */
static void setOpGeneric(client *c, int first, int dst, int op) {
    ir_db *db = dbFor(c);
    int n = c->argc - first;
    dbColl *stack[16] = {0}, **sets = n <= 16 ? stack : dbMalloc((size_t)n * sizeof(*sets));
    if (lookupSets(c, db, first, n, sets) != 0) goto done;

    dbEntry *res = tempSet(db);
    dbColl *rc = res->v.coll;
    if (op == SET_OP_INTER) {
        int empty = 0, smallest = 0;
        for (int j = 0; j < n; j++) {
            if (!sets[j]) empty = 1;
            else if (sets[smallest] && dictSize(&sets[j]->d) < dictSize(&sets[smallest]->d))
                smallest = j;
        }
        if (!empty) {
            dict *d = &sets[smallest]->d;
            for (int t = 0; t <= 1; t++)
                for (size_t i = 0; i < d->ht[t].size; i++)
                    for (const dbEntry *m = d->ht[t].table[i]; m; m = m->next) {
                        int all = 1;
                        for (int j = 0; j < n && all; j++)
                            if (j != smallest && sets[j] != sets[smallest])
                                all = collFind(sets[j], m->key, m->klen) != NULL;
                        if (all) setAdd(db, rc, m->key, m->klen);
                    }
        }
    } else {
        for (int j = 0; j < n; j++) {
            if (!sets[j]) continue;
            if (op == SET_OP_DIFF && j > 0) {
                if (dictSize(&rc->d) == 0) break;
                dict *d = &sets[j]->d;
                for (int t = 0; t <= 1; t++)
                    for (size_t i = 0; i < d->ht[t].size; i++)
                        for (const dbEntry *m = d->ht[t].table[i]; m; m = m->next) {
                            dbEntry *x = collFind(rc, m->key, m->klen);
                            if (x) collDelete(db, rc, x);
                        }
                continue;
            }
            dict *d = &sets[j]->d;
            for (int t = 0; t <= 1; t++)
                for (size_t i = 0; i < d->ht[t].size; i++)
                    for (const dbEntry *m = d->ht[t].table[i]; m; m = m->next)
                        setAdd(db, rc, m->key, m->klen);
        }
    }

    if (!dst) {
        addReplyMembers(c, rc, 1);
        tempSetFree(db, res);
        goto done;
    }
    dbkey dk = argKey(db, c, dst);
    dbEntry *old = lookupKey(db, &dk);
    long long size = (long long)dictSize(&rc->d);
    if (old) dbDeleteEntry(db, old);
    if (size > 0) {
        notifyNoNewKey = old != NULL; /* Redis overwrites the destination: no "new" */
        dbEntry *e = dbAdd(db, &dk, OBJ_SET, 0);
        notifyNoNewKey = 0;
        dbFreeValue(db, e);
        e->v.coll = rc; /* the result becomes the value */
        free(res);
    } else {
        tempSetFree(db, res);
    }
    if (old || size > 0) signalModifiedKey(c, db, dk.p, dk.len);
    static const char *const storeEvents[] = {"sinterstore", "sunionstore", "sdiffstore"};
    if (size > 0) notifyKeyspaceEvent(NOTIFY_SET, storeEvents[op], dk.p, dk.len, db->id);
    else if (old) notifyKeyspaceEvent(NOTIFY_GENERIC, "del", dk.p, dk.len, db->id);
    addReplyLongLong(c, size);
done:
    if (sets != stack) free(sets);
}

/* SINTER key [key ...] */
void sinterCommand(client *c) { setOpGeneric(c, 1, 0, SET_OP_INTER); }

/* SINTERSTORE destination key [key ...] */
void sinterstoreCommand(client *c) { setOpGeneric(c, 2, 1, SET_OP_INTER); }

/* SUNION key [key ...] */
void sunionCommand(client *c) { setOpGeneric(c, 1, 0, SET_OP_UNION); }

/* SUNIONSTORE destination key [key ...] */
void sunionstoreCommand(client *c) { setOpGeneric(c, 2, 1, SET_OP_UNION); }

/* SDIFF key [key ...] */
void sdiffCommand(client *c) { setOpGeneric(c, 1, 0, SET_OP_DIFF); }

/* SDIFFSTORE destination key [key ...] */
void sdiffstoreCommand(client *c) { setOpGeneric(c, 2, 1, SET_OP_DIFF); }

/* SINTERCARD numkeys key [key ...] [LIMIT limit] */
void sintercardCommand(client *c) {
    ir_db *db = dbFor(c);
    long long numkeys, limit = 0;
    if (!string2ll(c->argv[1].ptr, c->argv[1].len, &numkeys) || numkeys < 1) {
        addReplyError(c, "numkeys should be greater than 0");
        return;
    }
    if (numkeys > c->argc - 2) {
        addReplyError(c, "Number of keys can't be greater than number of args");
        return;
    }
    for (int j = 2 + (int)numkeys; j < c->argc; j++) {
        if (argEq(c, j, "limit") && j + 1 < c->argc) {
            j++;
            if (!string2ll(c->argv[j].ptr, c->argv[j].len, &limit) || limit < 0) {
                addReplyError(c, "LIMIT can't be negative");
                return;
            }
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    int n = (int)numkeys;
    dbColl *stack[16] = {0}, **sets = n <= 16 ? stack : dbMalloc((size_t)n * sizeof(*sets));
    if (lookupSets(c, db, 2, n, sets) != 0) goto done;
    int smallest = 0;
    long long card = 0;
    for (int j = 0; j < n; j++) {
        if (!sets[j]) goto reply;
        if (dictSize(&sets[j]->d) < dictSize(&sets[smallest]->d)) smallest = j;
    }
    dict *d = &sets[smallest]->d;
    for (int t = 0; t <= 1; t++)
        for (size_t i = 0; i < d->ht[t].size; i++)
            for (const dbEntry *m = d->ht[t].table[i]; m; m = m->next) {
                int all = 1;
                for (int j = 0; j < n && all; j++)
                    if (j != smallest) all = collFind(sets[j], m->key, m->klen) != NULL;
                if (all && ++card == limit) goto reply;
            }
reply:
    addReplyLongLong(c, card);
done:
    if (sets != stack) free(sets);
}

/* SSCAN key cursor [MATCH pattern] [COUNT count] */
void sscanCommand(client *c) {
    unsigned long long cursor;
    if (parseScanCursorOrReply(c, 2, &cursor) != 0) return;
    dbEntry *e = lookupKeyOrReply(c, 1, IR_STR("*2\r\n$1\r\n0\r\n*0\r\n"), OBJ_SET);
    if (!e) return;
    scanGenericCommand(c, e);
}
