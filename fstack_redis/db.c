/* db.c - the keyspace: hash table, expiry, glob matching, the numbered
 * databases, the dicts of hashes and sets, and the keyspace commands (DEL,
 * EXISTS, EXPIRE, TTL, TYPE, KEYS, SCAN, RENAME, COPY, MOVE, SWAPDB, DBSIZE,
 * FLUSHDB ...).
 *
 * The hash table follows Redis's dict.c: chained buckets in power-of-two
 * arrays, two tables during a resize and an incremental rehash that moves a
 * bucket on every lookup/insert/delete (plus ~1 ms per server tick), growth
 * at load factor 1 and shrinking below 10% fill. Keys are hashed with
 * SipHash-1-3 under a random 128-bit key chosen when the db is created, so
 * clients cannot aim keys at one bucket.
 *
 * Keys with a TTL are also kept in a dense array (db->vol), which makes
 * active expiry's random sampling O(1) and uniform.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "chunks.h"
#include "blocked.h"
#include "commands.h"
#include "db_internal.h"
#include "multi.h"
#include "notify.h"
#include "param.h"
#include "replay.h"
#include "replication.h"
#include "script.h"
#include "server.h"

/* Active expiry: keys sampled per round, and the time budget of one call
 * (Redis's slow cycle: 25% of a 100 ms tick). */
#define ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP 20
#define ACTIVE_EXPIRE_CYCLE_SLOW_TIME_US 25000
#define DICT_REHASH_TICK_US 1000
/* Glob recursion limit (one level per non-adjacent '*'). */
#define GLOB_MAX_NESTING 1000

/* ---- allocation ------------------------------------------------------------ */

void *dbMalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        serverLog("Out Of Memory allocating %zu bytes in the keyspace", n);
        abort();
    }
    return p;
}

static void *dbCalloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (!p) {
        serverLog("Out Of Memory allocating %zu bytes in the keyspace", n * size);
        abort();
    }
    return p;
}

static void *dbRealloc(void *old, size_t n) {
    void *p = realloc(old, n ? n : 1);
    if (!p) {
        serverLog("Out Of Memory allocating %zu bytes in the keyspace", n);
        abort();
    }
    return p;
}

static uint64_t monotonicUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- the hash table ----------------------------------------------------------- */

void dictInit(dict *d, const uint8_t seed[16]) {
    memset(d->ht, 0, sizeof(d->ht));
    d->rehashidx = -1;
    memcpy(d->seed, seed, sizeof(d->seed));
}

void dictReleaseTables(dict *d) {
    free(d->ht[0].table);
    free(d->ht[1].table);
    memset(d->ht, 0, sizeof(d->ht));
    d->rehashidx = -1;
}

uint64_t dictHashKey(const dict *d, const void *key, size_t len) {
    return siphash13(key, len, d->seed);
}

static size_t dictNextSize(size_t want) {
    size_t size = DICT_HT_INITIAL_SIZE;
    while (size < want && size < ((size_t)1 << (sizeof(size_t) * 8 - 2))) size <<= 1;
    return size;
}

/* Start moving to a table of the smallest power of two >= want. */
static void dictResize(dict *d, size_t want) {
    size_t size = dictNextSize(want);
    if (dictIsRehashing(d) || size == d->ht[0].size) return;
    dictht n = {dbCalloc(size, sizeof(dbEntry *)), size, 0};
    if (d->ht[0].table == NULL) { /* first allocation: nothing to move */
        d->ht[0] = n;
        return;
    }
    d->ht[1] = n;
    d->rehashidx = 0;
}

static void dictExpandIfNeeded(dict *d) {
    if (dictIsRehashing(d)) return;
    if (d->ht[0].size == 0) dictResize(d, DICT_HT_INITIAL_SIZE);
    else if (d->ht[0].used >= d->ht[0].size) dictResize(d, d->ht[0].used + 1);
}

static void dictShrinkIfNeeded(dict *d) {
    if (dictIsRehashing(d)) return;
    size_t size = d->ht[0].size, used = d->ht[0].used;
    if (size > DICT_HT_INITIAL_SIZE && used * 100 / size < DICT_MIN_FILL) dictResize(d, used);
}

int dictRehash(dict *d, int n) {
    size_t empty_visits = (size_t)n * 10;
    if (!dictIsRehashing(d)) return 0;
    dictht *from = &d->ht[0], *to = &d->ht[1];
    size_t tomask = to->size - 1;

    while (n-- && from->used != 0) {
        while (from->table[d->rehashidx] == NULL) {
            d->rehashidx++;
            if (--empty_visits == 0) return 1;
        }
        dbEntry *e = from->table[d->rehashidx];
        while (e) {
            dbEntry *next = e->next;
            size_t idx = e->hash & tomask;
            e->next = to->table[idx];
            to->table[idx] = e;
            from->used--;
            to->used++;
            e = next;
        }
        from->table[d->rehashidx++] = NULL;
    }
    if (from->used == 0) {
        free(from->table);
        d->ht[0] = d->ht[1];
        memset(&d->ht[1], 0, sizeof(d->ht[1]));
        d->rehashidx = -1;
        return 0;
    }
    return 1;
}

long dictRehashMicroseconds(dict *d, uint64_t us) {
    uint64_t start = monotonicUs();
    long moved = 0;
    while (dictRehash(d, 100)) {
        moved += 100;
        if (monotonicUs() - start > us) break;
    }
    return moved;
}

dbEntry *dictFind(dict *d, const void *key, size_t len, uint64_t h) {
    if (dictSize(d) == 0) return NULL;
    if (dictIsRehashing(d)) dictRehash(d, 1);
    for (int t = 0; t <= 1; t++) {
        const dictht *ht = &d->ht[t];
        if (ht->size) {
            for (dbEntry *e = ht->table[h & (ht->size - 1)]; e; e = e->next)
                if (e->hash == h && e->klen == len && memcmp(e->key, key, len) == 0) return e;
        }
        if (!dictIsRehashing(d)) break;
    }
    return NULL;
}

void dictLink(dict *d, dbEntry *e) {
    if (dictIsRehashing(d)) dictRehash(d, 1);
    dictExpandIfNeeded(d);
    dictht *ht = dictIsRehashing(d) ? &d->ht[1] : &d->ht[0];
    size_t idx = e->hash & (ht->size - 1);
    e->next = ht->table[idx];
    ht->table[idx] = e;
    ht->used++;
}

void dictUnlink(dict *d, dbEntry *e) {
    if (dictIsRehashing(d)) dictRehash(d, 1);
    for (int t = 0; t <= 1; t++) {
        dictht *ht = &d->ht[t];
        if (!ht->size) continue;
        dbEntry **pp = &ht->table[e->hash & (ht->size - 1)];
        for (; *pp; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                e->next = NULL;
                ht->used--;
                dictShrinkIfNeeded(d);
                return;
            }
        }
    }
}

/* ---- glob matching ---------------------------------------------------------
 * The algorithm of Redis's stringmatchlen() (so KEYS answers the same), with
 * explicit bounds instead of reading the pattern's NUL terminator, and its
 * two guards against abusive patterns: a '*' that failed to match the rest
 * of the pattern anywhere in the string stops the enclosing '*'s from trying
 * longer matches, and recursion depth is bounded. Like Redis on x86, bytes
 * compare as signed chars in [a-z] ranges. */

static int globLower(int ch) { return (ch >= 'A' && ch <= 'Z') ? ch + ('a' - 'A') : ch; }

static int globMatch(const char *p, size_t plen, const char *s, size_t slen, int nocase,
                     int *skip_longer, int nesting) {
    if (nesting > GLOB_MAX_NESTING) return 0;

    while (plen && slen) {
        switch (p[0]) {
        case '*':
            while (plen > 1 && p[1] == '*') { /* collapse runs of '*' */
                p++;
                plen--;
            }
            if (plen == 1) return 1; /* trailing '*' matches the rest */
            while (slen) {
                if (globMatch(p + 1, plen - 1, s, slen, nocase, skip_longer, nesting + 1)) return 1;
                if (*skip_longer) return 0;
                s++;
                slen--;
            }
            /* The rest of the pattern matches nowhere in the rest of the
             * string, so no earlier '*' can help by matching more. */
            *skip_longer = 1;
            return 0;
        case '?':
            s++;
            slen--;
            break;
        case '[': {
            int negate, match = 0;
            p++;
            plen--;
            negate = plen && p[0] == '^';
            if (negate) {
                p++;
                plen--;
            }
            for (;;) {
                if (plen == 0) { /* unterminated class: ends with the pattern */
                    p--;
                    plen++;
                    break;
                } else if (p[0] == '\\' && plen >= 2) {
                    p++;
                    plen--;
                    if (p[0] == s[0]) match = 1;
                } else if (p[0] == ']') {
                    break;
                } else if (plen >= 3 && p[1] == '-') {
                    int lo = (signed char)p[0], hi = (signed char)p[2], ch = (signed char)s[0];
                    if (lo > hi) {
                        int t = lo;
                        lo = hi;
                        hi = t;
                    }
                    if (nocase) {
                        lo = globLower(lo);
                        hi = globLower(hi);
                        ch = globLower(ch);
                    }
                    p += 2;
                    plen -= 2;
                    if (ch >= lo && ch <= hi) match = 1;
                } else if (nocase ? globLower((unsigned char)p[0]) == globLower((unsigned char)s[0])
                                  : p[0] == s[0]) {
                    match = 1;
                }
                p++;
                plen--;
            }
            if (negate) match = !match;
            if (!match) return 0;
            s++;
            slen--;
            break;
        }
        case '\\':
            if (plen >= 2) {
                p++;
                plen--;
            }
            /* fall through */
        default:
            if (nocase ? globLower((unsigned char)p[0]) != globLower((unsigned char)s[0])
                       : p[0] != s[0])
                return 0;
            s++;
            slen--;
            break;
        }
        p++;
        plen--;
        if (slen == 0) {
            while (plen && p[0] == '*') {
                p++;
                plen--;
            }
            break;
        }
    }
    return plen == 0 && slen == 0;
}

int stringmatchlen(const char *pattern, size_t plen, const char *string, size_t slen, int nocase) {
    int skip_longer = 0;
    return globMatch(pattern, plen, string, slen, nocase, &skip_longer, 0);
}

/* ---- the database --------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t dbRandom(ir_db *db) {
    /* xorshift64* */
    uint64_t x = db->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    db->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void randomSeed(uint8_t seed[16]) {
    size_t got = 0;
    while (got < 16) {
        ssize_t n = getrandom(seed + got, 16 - got, 0);
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (got < 16) { /* no getrandom: still unpredictable enough to spread keys */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid() ^
                     (uint64_t)(uintptr_t)seed;
        uint64_t a = splitmix64(&x), b = splitmix64(&x);
        memcpy(seed, &a, 8);
        memcpy(seed + 8, &b, 8);
    }
}

/* One hash seed for the process, as Redis's siphash seed: a set or a hash
 * iterates in the same order whichever database holds it (SWAPDB, MOVE, COPY
 * keep its replies; the fuzzer's split-equivalence check found per-database
 * seeds reordering SMEMBERS after a SWAPDB). */
static uint8_t hash_seed[16];
static pthread_once_t hash_seed_once = PTHREAD_ONCE_INIT;
static void hashSeedInit(void) { randomSeed(hash_seed); }

struct ir_db *dbNew(void) {
    ir_db *db = dbCalloc(1, sizeof(*db));
    pthread_once(&hash_seed_once, hashSeedInit);
    dictInit(&db->d, hash_seed);
    uint8_t seed[16]; /* the database's own sampler (RANDOMKEY, SPOP ...) */
    randomSeed(seed);
    uint64_t x = sipLoad64le(seed) ^ sipRotl64(sipLoad64le(seed + 8), 17);
    db->rng = splitmix64(&x) | 1;
    return db;
}

ir_db *dbByIndex(ir_server *s, int id) { return id == 0 ? s->db : s->dbs[id]; }

/* The command being run counts keyspace hits and misses (one thread, one
 * server: see dbFor and lookupKey); 1 also sends keymiss events, 2 (OBJECT)
 * does not. */
static int readStats;

/* Does c's command count keyspace hits and misses? Redis counts the lookups
 * of lookupKeyRead: every command that is not a write, and the write
 * commands that read their key first (GETEX, GETDEL, GETSET, SET ... GET,
 * XREADGROUP, XACK, XCLAIM, XAUTOCLAIM).
 * COPY counts its source itself (copyCommand). */
static int readsKeys(const client *c) {
    const ir_command *cmd = c->cmd;
    if (!cmd) return 0;
    if (cmd->proc == objectCommand) return 2; /* read without a keymiss event (LOOKUP_NONOTIFY) */
    if (!(cmd->flags & CMD_WRITE)) return 1;
    if (cmd->proc == getexCommand || cmd->proc == getdelCommand || cmd->proc == getsetCommand)
        return 1;
    /* the stream writes that look their key up with lookupKeyRead */
    if (cmd->proc == xreadgroupCommand || cmd->proc == xackCommand || cmd->proc == xclaimCommand ||
        cmd->proc == xautoclaimCommand)
        return 1;
    if (cmd->proc == setCommand)
        for (int j = 3; j < c->argc; j++)
            if (argEq(c, j, "get")) return 1;
    return 0;
}

ir_db *dbFor(client *c) {
    ir_db *db = dbByIndex(c->srv, c->db);
    /* read the clock again if this command needs it; a script's commands all
     * see the time the script started, as in Redis */
    db->now = (c->flags & CLIENT_SCRIPT) ? scriptStartMs(c->srv) : 0;
    readStats = readsKeys(c);
    return db;
}

dbkey argKey(ir_db *db, client *c, int i) { return dbKey(db, c->argv[i].ptr, c->argv[i].len); }

/* -- keys with a TTL -- */

static void volAdd(ir_db *db, dbEntry *e) {
    if (db->nvol == db->volcap) {
        db->volcap = db->volcap ? db->volcap * 2 : 64;
        db->vol = dbRealloc(db->vol, db->volcap * sizeof(dbEntry *));
    }
    e->vidx = (uint32_t)db->nvol;
    db->vol[db->nvol++] = e;
}

static void volRemove(ir_db *db, dbEntry *e) {
    size_t i = e->vidx;
    dbEntry *last = db->vol[--db->nvol];
    db->vol[i] = last;
    last->vidx = (uint32_t)i;
    if (db->volcap > 1024 && db->nvol < db->volcap / 4) {
        db->volcap /= 2;
        db->vol = dbRealloc(db->vol, db->volcap * sizeof(dbEntry *));
    }
}

void setExpire(ir_db *db, dbEntry *e, int64_t when) {
    if (e->expire == -1) volAdd(db, e);
    e->expire = when;
}

int removeExpire(ir_db *db, dbEntry *e) {
    if (e->expire == -1) return 0;
    volRemove(db, e);
    e->expire = -1;
    return 1;
}

/* -- entries -- */

/* dbEntry keeps a key's (or field's) length in 32 bits. */
static void keyLenCheck(size_t len) {
    if (len > UINT32_MAX) {
        serverLog("a key of %zu bytes is longer than the keyspace can hold (4 GB)", len);
        abort();
    }
}

dbEntry *dbAdd(ir_db *db, const dbkey *k, int type, size_t embed_cap) {
    if (type != OBJ_STRING || embed_cap > DB_EMBED_MAX) embed_cap = 0;
    keyLenCheck(k->len);
    dbEntry *e = dbMalloc(sizeof(dbEntry) + k->len + 1 + embed_cap);
    e->lru = (uint32_t)(dbNow(db) / 1000);
    e->next = NULL;
    e->hash = k->h;
    e->expire = -1;
    e->klen = k->len;
    e->vidx = 0;
    e->type = (uint8_t)type;
    e->flags = 0;
    e->ecap = (uint8_t)embed_cap;
    memcpy(e->key, k->p, k->len);
    e->key[k->len] = '\0';
    if (type == OBJ_STRING) {
        e->v.str.len = 0;
        e->v.str.pin = NULL;
        if (embed_cap) {
            e->v.str.ptr = e->key + k->len + 1;
            e->v.str.ptr[0] = '\0';
            e->v.str.cap = embed_cap;
            e->flags |= DBE_EMBEDDED;
        } else {
            e->v.str.ptr = NULL;
            e->v.str.cap = 0;
        }
    } else if (type == OBJ_LIST) {
        listInit(&e->v.list);
    } else if (type == OBJ_STREAM) {
        e->v.stream = NULL; /* the caller gives it one (streamNew) */
    } else {
        dbColl *co = dbMalloc(sizeof(*co));
        collInit(co, db->d.seed, type);
        e->v.coll = co;
        db->bytes += sizeof(*co) + DB_MALLOC_OVERHEAD;
    }
    dictLink(&db->d, e);
    db->bytes += dbEntryBytes(k->len, embed_cap);
    if (!notifyNoNewKey) notifyKeyspaceEvent(NOTIFY_NEW, "new", k->p, k->len, db->id);
    return e;
}

static void collFree(ir_db *db, dbColl *co);

void dbFreeValue(ir_db *db, dbEntry *e) {
    if (e->type == OBJ_STRING) strFreeValue(db, e);
    else if (e->type == OBJ_LIST) listFreeAll(db, &e->v.list);
    else if (e->type == OBJ_STREAM) streamFree(db, e->v.stream);
    else collFree(db, e->v.coll);
}

void dbMakeString(ir_db *db, dbEntry *e) {
    if (e->type == OBJ_STRING) return;
    if (e->type == OBJ_STREAM) signalKeyAsReady(db, e->key, e->klen);
    dbFreeValue(db, e);
    e->type = OBJ_STRING;
    e->v.str.len = 0;
    e->v.str.pin = NULL;
    if (e->ecap) {
        e->v.str.ptr = e->key + e->klen + 1;
        e->v.str.ptr[0] = '\0';
        e->v.str.cap = e->ecap;
        e->flags |= DBE_EMBEDDED;
    } else {
        e->v.str.ptr = NULL;
        e->v.str.cap = 0;
        e->flags &= (uint8_t)~DBE_EMBEDDED;
    }
}

void dbDeleteEntry(ir_db *db, dbEntry *e) {
    /* XREADGROUP waiters on a stream that goes are answered (blocked.c) */
    if (e->type == OBJ_STREAM) signalKeyAsReady(db, e->key, e->klen);
    dictUnlink(&db->d, e);
    if (e->expire != -1) volRemove(db, e);
    dbFreeValue(db, e);
    db->bytes -= dbEntryBytes(e->klen, e->ecap);
    free(e);
}

int dbDelete(ir_db *db, const dbkey *k) {
    dbEntry *e = dictFind(&db->d, k->p, k->len, k->h);
    if (!e) return 0;
    dbDeleteEntry(db, e);
    return 1;
}

static void countRead(const dbEntry *e) {
    if (!g_server) return;
    if (e) g_server->keyspace_hits++;
    else g_server->keyspace_misses++;
}

/* Deletes e when it has expired (and tells WATCH, notifications and replicas);
 * NULL then, else e. k is the caller's copy of the name. */
static dbEntry *expireIfNeeded(ir_db *db, dbEntry *e, const dbkey *k) {
    if (e && e->expire != -1 && keyIsExpired(e, dbNow(db))) {
        /* deleted first, then signalled (with the caller's copy of the
         * name), as Redis's deleteExpiredKeyAndPropagate: a WATCH of a key
         * that was already stale can tell that the key is gone */
        dbDeleteEntry(db, e);
        db->expired_keys++;
        notifyKeyspaceEvent(NOTIFY_EXPIRED, "expired", k->p, k->len, db->id);
        signalModifiedKey(NULL, db, k->p, k->len);
        replPropagateExpired(db, k->p, k->len);
        e = NULL;
    }
    return e;
}

static dbEntry *lookupKeyGeneric(ir_db *db, const dbkey *k, int touch) {
    dbEntry *e = expireIfNeeded(db, dictFind(&db->d, k->p, k->len, k->h), k);
    if (readStats) countRead(e);
    if (!e && readStats == 1) notifyKeyspaceEvent(NOTIFY_KEY_MISS, "keymiss", k->p, k->len, db->id);
    if (e && touch) e->lru = (uint32_t)(dbNow(db) / 1000);
    return e;
}

uint64_t dbEntryIdleSeconds(ir_db *db, const dbEntry *e) {
    uint32_t now = (uint32_t)(dbNow(db) / 1000);
    return now >= e->lru ? now - e->lru : 0;
}

dbEntry *lookupKey(ir_db *db, const dbkey *k) { return lookupKeyGeneric(db, k, 1); }
dbEntry *lookupKeyNoTouch(ir_db *db, const dbkey *k) { return lookupKeyGeneric(db, k, 0); }
dbEntry *lookupKeyNoStats(ir_db *db, const dbkey *k) {
    return expireIfNeeded(db, dictFind(&db->d, k->p, k->len, k->h), k);
}

dbEntry *lookupKeyOrReply(client *c, int i, ir_str missing, int type) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, i);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyStr(c, missing);
        return NULL;
    }
    if (e->type != type) {
        addReplyStr(c, shared.wrongtypeerr);
        return NULL;
    }
    return e;
}

dbEntry *lookupTyped(client *c, int i, int type, int *missing) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, i);
    dbEntry *e = lookupKey(db, &k);
    *missing = e == NULL;
    if (e && e->type != type) {
        addReplyStr(c, shared.wrongtypeerr);
        return NULL;
    }
    return e;
}

uint64_t dbSize(const struct ir_db *db) { return dictSize(&db->d); }
uint64_t dbExpires(const struct ir_db *db) { return db->nvol; }
uint64_t dbBytes(const struct ir_db *db) { return db->bytes; }

void dbEmpty(struct ir_db *db) {
    for (int t = 0; t <= 1; t++) {
        dictht *ht = &db->d.ht[t];
        for (size_t i = 0; i < ht->size && ht->used; i++) {
            dbEntry *e = ht->table[i];
            while (e) {
                dbEntry *next = e->next;
                dbFreeValue(db, e);
                free(e);
                ht->used--;
                e = next;
            }
        }
    }
    dictReleaseTables(&db->d);
    free(db->vol);
    db->vol = NULL;
    db->nvol = db->volcap = 0;
    free(db->scratch);
    db->scratch = NULL;
    db->scratchcap = 0;
    db->bytes = 0;
}

void dbFree(struct ir_db *db) {
    if (!db) return;
    dbEmpty(db);
    free(db);
}

void dbActiveExpire(struct ir_db *db, uint64_t now_ms) {
    if (dictIsRehashing(&db->d)) dictRehashMicroseconds(&db->d, DICT_REHASH_TICK_US);
    if (db->nvol == 0) return;

    int64_t now = (int64_t)now_ms;
    uint64_t start = monotonicUs();
    unsigned iterations = 0;
    size_t sampled, expired;
    do {
        sampled = expired = 0;
        for (int i = 0; i < ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP && db->nvol; i++) {
            dbEntry *e = db->vol[dbRandom(db) % db->nvol];
            sampled++;
            if (keyIsExpired(e, now)) {
                notifyKeyspaceEvent(NOTIFY_EXPIRED, "expired", e->key, e->klen, db->id);
                signalModifiedKey(NULL, db, e->key, e->klen);
                replPropagateExpired(db, e->key, e->klen);
                dbDeleteEntry(db, e);
                db->expired_keys++;
                expired++;
            }
        }
        if ((++iterations & 15) == 0 && monotonicUs() - start > ACTIVE_EXPIRE_CYCLE_SLOW_TIME_US)
            break;
    } while (db->nvol && expired * 4 > sampled); /* more than 25% were stale: go on */
    db->now = 0;
}

/* ---- every database of a server ------------------------------------------------ */

int dbsCreate(ir_server *s) {
    int n = s->cfg.databases > 0 ? s->cfg.databases : 1;
    s->dbs = calloc((size_t)n, sizeof(*s->dbs));
    if (!s->dbs) return -1;
    s->ndbs = n;
    for (int i = 1; i < n; i++) {
        s->dbs[i] = dbNew();
        s->dbs[i]->id = i;
    }
    return 0;
}

void dbsFree(ir_server *s) {
    if (!s->dbs) return;
    for (int i = 1; i < s->ndbs; i++) dbFree(s->dbs[i]);
    free(s->dbs);
    s->dbs = NULL;
    s->ndbs = 0;
}

int dbsCount(const ir_server *s) { return s->ndbs ? s->ndbs : 1; }

struct ir_db *dbsAt(const ir_server *s, int id) {
    return id == 0 ? s->db : s->dbs[id];
}

uint64_t dbsSize(const ir_server *s) {
    uint64_t n = 0;
    for (int i = 0; i < dbsCount(s); i++) n += dbSize(dbsAt(s, i));
    return n;
}

uint64_t dbsBytes(const ir_server *s) {
    uint64_t n = 0;
    for (int i = 0; i < dbsCount(s); i++) n += dbBytes(dbsAt(s, i));
    return n;
}

uint64_t dbsExpiredKeys(const ir_server *s) {
    uint64_t n = 0;
    for (int i = 0; i < dbsCount(s); i++) n += dbsAt(s, i)->expired_keys;
    return n;
}

int dbActiveExpireEnabled = 1;

void dbsActiveExpire(ir_server *s, uint64_t now_ms) {
    if (!dbActiveExpireEnabled) return;
    for (int i = 0; i < dbsCount(s); i++) dbActiveExpire(dbsAt(s, i), now_ms);
}

/* ---- hashes and sets: a dict of entries ---------------------------------------- */

ir_encoding_limits encodingLimits = {512, 64, 512, 128, 64, 4096, 100, 3000};

dbEntry *collFind(dbColl *co, const void *f, size_t len) {
    return dictFind(&co->d, f, len, dictHashKey(&co->d, f, len));
}

/* A hash value up to DB_EMBED_MAX bytes lives in its field's entry, after
 * the field (as short strings do in the keyspace): one allocation per field. */
static size_t fieldEmbedCap(size_t vlen) {
    return vlen + 1 <= DB_EMBED_MAX ? (vlen + 1 + 7) & ~(size_t)7 : 0;
}

static size_t fieldBytes(const dbEntry *fe) {
    size_t b = dbEntryBytes(fe->klen, fe->ecap);
    if (fe->v.str.ptr && !(fe->flags & DBE_EMBEDDED)) b += dbBufBytes(fe->v.str.cap);
    return b;
}

/* The value's own buffer, NULL when there is none or it is embedded. */
static char *fieldHeapBuf(const dbEntry *fe) {
    return fe->flags & DBE_EMBEDDED ? NULL : fe->v.str.ptr;
}

static void fieldPut(dbEntry *fe, const void *val, size_t vlen) {
    if (vlen + 1 <= fe->ecap) {
        fe->v.str.ptr = fe->key + fe->klen + 1;
        fe->v.str.cap = fe->ecap;
        fe->flags |= DBE_EMBEDDED;
    } else {
        fe->v.str.ptr = dbMalloc(vlen + 1);
        fe->v.str.cap = vlen + 1;
        fe->flags &= (uint8_t)~DBE_EMBEDDED;
    }
    memcpy(fe->v.str.ptr, val, vlen);
    fe->v.str.ptr[vlen] = '\0';
    fe->v.str.len = vlen;
}

void collInit(dbColl *co, const uint8_t seed[16], int type) {
    dictInit(&co->d, seed);
    co->ord = NULL;
    co->nord = co->ordcap = 0;
    co->big = 0;
    co->order = type == OBJ_HASH ? COLL_ORD_INSERT : type == OBJ_SET ? COLL_ORD_INT : COLL_ORD_NONE;
    co->zsl = NULL; /* a sorted set's skiplist comes with its first member (t_zset.c) */
}

static void collDropOrder(ir_db *db, dbColl *co) {
    if (co->ord) db->bytes -= dbBufBytes(co->ordcap * sizeof(dbEntry *));
    free(co->ord);
    co->ord = NULL;
    co->nord = co->ordcap = 0;
    co->order = COLL_ORD_NONE;
}

void collSetBig(ir_db *db, dbColl *co) {
    co->big = 1;
    collDropOrder(db, co);
}

/* An intset member's value; 0 if it is not an integer. */
static int memberInt(const dbEntry *m, long long *v) { return string2ll(m->key, m->klen, v); }

/* Put fe into co's order: last for a hash, by value for an intset. */
static void collOrderInsert(ir_db *db, dbColl *co, dbEntry *fe) {
    uint32_t at = co->nord;
    if (co->order == COLL_ORD_INT) {
        long long v, w;
        if (!memberInt(fe, &v)) { /* not an intset any more (the caller sees to big) */
            collSetBig(db, co);
            return;
        }
        uint32_t lo = 0, hi = co->nord;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            memberInt(co->ord[mid], &w);
            if (w < v) lo = mid + 1;
            else hi = mid;
        }
        at = lo;
    }
    if (co->nord == co->ordcap) {
        if (co->ordcap == UINT32_MAX) abort(); /* far past any compact encoding's limit */
        uint32_t cap = co->ordcap ? (co->ordcap > UINT32_MAX / 2 ? UINT32_MAX : co->ordcap * 2) : 4;
        dbEntry **ord = realloc(co->ord, (size_t)cap * sizeof(*ord));
        if (!ord) abort();
        if (co->ord) db->bytes -= dbBufBytes(co->ordcap * sizeof(dbEntry *));
        db->bytes += dbBufBytes((size_t)cap * sizeof(dbEntry *));
        co->ord = ord;
        co->ordcap = cap;
    }
    memmove(co->ord + at + 1, co->ord + at, (size_t)(co->nord - at) * sizeof(*co->ord));
    co->ord[at] = fe;
    co->nord++;
    for (uint32_t i = at; i < co->nord; i++) co->ord[i]->vidx = i;
}

/* Take fe out of co's order, closing the gap (as a listpack delete). */
static void collOrderRemove(dbColl *co, const dbEntry *fe) {
    uint32_t at = fe->vidx;
    co->nord--;
    memmove(co->ord + at, co->ord + at + 1, (size_t)(co->nord - at) * sizeof(*co->ord));
    for (uint32_t i = at; i < co->nord; i++) co->ord[i]->vidx = i;
}

void collIterInit(collIter *it, const dbColl *co) {
    it->co = co;
    it->pos = 0;
    it->t = 0;
    it->fe = NULL;
}

const dbEntry *collNext(collIter *it) {
    const dbColl *co = it->co;
    if (collOrdered(co)) return it->pos < co->nord ? co->ord[it->pos++] : NULL;
    while (!it->fe) {
        if (it->pos >= co->d.ht[it->t].size) {
            if (it->t == 1) return NULL;
            it->t = 1;
            it->pos = 0;
            continue;
        }
        it->fe = co->d.ht[it->t].table[it->pos++];
    }
    const dbEntry *fe = it->fe;
    it->fe = fe->next;
    return fe;
}

dbEntry *collAdd(ir_db *db, dbColl *co, const void *f, size_t len, const void *val, size_t vlen) {
    size_t ecap = val ? fieldEmbedCap(vlen) : 0;
    keyLenCheck(len);
    dbEntry *fe = dbMalloc(sizeof(dbEntry) + len + 1 + ecap);
    memset(fe, 0, sizeof(*fe));
    fe->hash = dictHashKey(&co->d, f, len);
    fe->expire = -1;
    fe->klen = len;
    fe->type = OBJ_STRING;
    fe->ecap = (uint8_t)ecap;
    memcpy(fe->key, f, len);
    fe->key[len] = '\0';
    if (val) fieldPut(fe, val, vlen);
    dictLink(&co->d, fe);
    db->bytes += fieldBytes(fe);
    if (co->order != COLL_ORD_NONE) {
        if (co->big) collDropOrder(db, co);
        else collOrderInsert(db, co, fe);
    }
    return fe;
}

void collSetValue(ir_db *db, dbEntry *fe, const void *val, size_t vlen) {
    db->bytes -= fieldBytes(fe);
    char *old = fieldHeapBuf(fe);
    fieldPut(fe, val, vlen);
    free(old);
    db->bytes += fieldBytes(fe);
}

void collDelete(ir_db *db, dbColl *co, dbEntry *fe) {
    if (co->order != COLL_ORD_NONE) {
        if (co->big) collDropOrder(db, co);
        else collOrderRemove(co, fe);
    }
    dictUnlink(&co->d, fe);
    db->bytes -= fieldBytes(fe);
    free(fieldHeapBuf(fe));
    free(fe);
}

static void collFree(ir_db *db, dbColl *co) {
    if (co->zsl) zsetFreeSkiplist(co);
    for (int t = 0; t <= 1; t++) {
        dictht *ht = &co->d.ht[t];
        for (size_t i = 0; i < ht->size; i++) {
            for (dbEntry *fe = ht->table[i], *next; fe; fe = next) {
                next = fe->next;
                db->bytes -= fieldBytes(fe);
                free(fieldHeapBuf(fe));
                free(fe);
            }
        }
    }
    dictReleaseTables(&co->d);
    collDropOrder(db, co);
    db->bytes -= sizeof(*co) + DB_MALLOC_OVERHEAD;
    free(co);
}

/* A random entry of d (NULL if empty): a random bucket of either table
 * (during a rehash too: no rehash is forced), then a random slot of its
 * chain, retrying on an empty one (uniform while chains are at most 8 long,
 * as they are at a load factor of 1). */
static dbEntry *dictRandom(ir_db *db, dict *d) {
    if (dictSize(d) == 0) return NULL;
    size_t s0 = d->ht[0].size, s1 = dictIsRehashing(d) ? d->ht[1].size : 0;
    for (;;) {
        size_t idx = dbRandom(db) % (s0 + s1);
        dbEntry *e = idx < s0 ? d->ht[0].table[idx] : d->ht[1].table[idx - s0];
        if (!e) continue;
        size_t len = 0;
        for (dbEntry *x = e; x; x = x->next) len++;
        size_t k = dbRandom(db) % (len > 8 ? len : 8);
        if (k >= len) continue;
        while (k--) e = e->next;
        return e;
    }
}

dbEntry *collRandom(ir_db *db, dbColl *co) { return dictRandom(db, &co->d); }

uint64_t dbRand(ir_db *db) { return dbRandom(db); }

static void scratchReserve(ir_db *db, size_t n);

dbEntry **dbScratch(ir_db *db, size_t n) {
    scratchReserve(db, n ? n : 1);
    return db->scratch;
}

static int byOrder(const void *a, const void *b) {
    uint32_t x = (*(dbEntry *const *)a)->vidx, y = (*(dbEntry *const *)b)->vidx;
    return x < y ? -1 : x > y;
}

size_t collSample(ir_db *db, dbColl *co, size_t count) {
    size_t n = collAll(co, dbScratch(db, dictSize(&co->d)));
    if (count >= n) return n;
    for (size_t i = 0; i < count; i++) { /* a partial Fisher-Yates shuffle */
        size_t j = i + dbRandom(db) % (n - i);
        dbEntry *t = db->scratch[i];
        db->scratch[i] = db->scratch[j];
        db->scratch[j] = t;
    }
    /* Redis picks a few (count * 3 <= size) from a listpack in its order */
    if (collOrdered(co) && co->order == COLL_ORD_INSERT)
        qsort(db->scratch, count, sizeof(dbEntry *), byOrder);
    return count;
}

size_t collAll(dbColl *co, dbEntry **out) {
    if (collOrdered(co)) {
        if (co->nord) memcpy(out, co->ord, co->nord * sizeof(*out));
        return co->nord;
    }
    size_t n = 0;
    for (int t = 0; t <= 1; t++) {
        const dictht *ht = &co->d.ht[t];
        for (size_t i = 0; i < ht->size; i++)
            for (dbEntry *fe = ht->table[i]; fe; fe = fe->next) out[n++] = fe;
    }
    return n;
}

static uint64_t rev64(uint64_t v) {
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
    return __builtin_bswap64(v);
}

static void scanBucket(dbEntry *e, void (*fn)(dbEntry *e, void *arg), void *arg, long *seen) {
    for (; e; e = e->next) {
        fn(e, arg);
        (*seen)++;
    }
}

/* The cursor counts buckets with its bits reversed, so a table that grew or
 * shrank between two calls still sees every entry present throughout at
 * least once (Redis's SCAN guarantee). During a rehash a step visits the
 * cursor's bucket in the smaller table and every bucket of the larger one
 * that it expands to, so nothing is forced to finish. */
uint64_t dictScan(dict *d, uint64_t v, long count, void (*fn)(dbEntry *e, void *arg), void *arg) {
    if (dictSize(d) == 0) return 0;
    long seen = 0, visits = count * 10;
    do {
        if (!dictIsRehashing(d)) {
            const dictht *t = &d->ht[0];
            uint64_t m0 = t->size - 1;
            scanBucket(t->table[v & m0], fn, arg, &seen);
            v |= ~m0;
            v = rev64(rev64(v) + 1);
        } else {
            const dictht *t0 = &d->ht[0], *t1 = &d->ht[1];
            if (t0->size > t1->size) {
                const dictht *x = t0;
                t0 = t1;
                t1 = x;
            }
            uint64_t m0 = t0->size - 1, m1 = t1->size - 1;
            scanBucket(t0->table[v & m0], fn, arg, &seen);
            do { /* the buckets of the larger table that v & m0 expands to */
                scanBucket(t1->table[v & m1], fn, arg, &seen);
                v |= ~m1;
                v = rev64(rev64(v) + 1);
            } while (v & (m0 ^ m1));
        }
    } while (v && seen < count && --visits > 0);
    return v;
}

/* Bytes e's value counts in dbBytes() (to move it between databases). */
static uint64_t valueBytes(const dbEntry *e) {
    uint64_t b = 0;
    if (e->type == OBJ_STRING) {
        if (!(e->flags & DBE_EMBEDDED) && e->v.str.ptr) b = dbBufBytes(e->v.str.cap);
    } else if (e->type == OBJ_LIST) {
        b = e->v.list.cap * sizeof(lelem);
        for (size_t i = 0; i < e->v.list.len; i++) b += dbBufBytes(listAt(&e->v.list, i)->len + 1);
    } else if (e->type == OBJ_STREAM) {
        b = streamBytes(e->v.stream);
    } else {
        b = sizeof(dbColl) + DB_MALLOC_OVERHEAD;
        if (e->v.coll->ord) b += dbBufBytes(e->v.coll->ordcap * sizeof(dbEntry *));
        const dict *d = &e->v.coll->d;
        for (int t = 0; t <= 1; t++)
            for (size_t i = 0; i < d->ht[t].size; i++)
                for (const dbEntry *fe = d->ht[t].table[i]; fe; fe = fe->next) b += fieldBytes(fe);
    }
    return b;
}

/* MEMORY USAGE's estimate of e: the entry and its value as this file
 * allocates them. A list's or collection's elements are sampled (samples
 * of them, every one when samples <= 0 or the value is smaller) and their
 * average size scaled to the count, as Redis's objectComputeSize does. */
uint64_t dbEntryMemoryUsage(const dbEntry *e, long long samples) {
    uint64_t b = dbEntryBytes(e->klen, e->ecap);
    if (e->type == OBJ_STRING || e->type == OBJ_STREAM) return b + valueBytes(e);
    if (e->type == OBJ_LIST) {
        const dbList *l = &e->v.list;
        size_t n = samples <= 0 || (unsigned long long)samples > l->len ? l->len : (size_t)samples;
        uint64_t eb = 0;
        for (size_t i = 0; i < n; i++) eb += dbBufBytes(listAt(l, i)->len + 1);
        b += l->cap * sizeof(lelem);
        if (n) b += (uint64_t)((double)eb / (double)n * (double)l->len);
        return b;
    }
    const dict *d = &e->v.coll->d;
    b += sizeof(dbColl) + DB_MALLOC_OVERHEAD + dictBuckets(d) * sizeof(dbEntry *);
    size_t total = dictSize(d), n = 0;
    size_t want = samples <= 0 || (unsigned long long)samples > total ? total : (size_t)samples;
    uint64_t eb = 0;
    for (int t = 0; t <= 1 && n < want; t++)
        for (size_t i = 0; i < d->ht[t].size && n < want; i++)
            for (const dbEntry *fe = d->ht[t].table[i]; fe && n < want; fe = fe->next, n++)
                eb += fieldBytes(fe);
    if (n) b += (uint64_t)((double)eb / (double)n * (double)total);
    return b;
}

/* Give e (in db `from`) the key nk in db `to` (nk absent there): a new
 * entry takes over the value, TTL included; returns it. */
dbEntry *dbRekey(ir_db *from, dbEntry *e, ir_db *to, const dbkey *nk) {
    size_t ecap = e->ecap;
    keyLenCheck(nk->len);
    dbEntry *ne = dbMalloc(sizeof(dbEntry) + nk->len + 1 + ecap);
    *ne = *e;
    ne->next = NULL;
    ne->hash = nk->h;
    ne->klen = nk->len;
    memcpy(ne->key, nk->p, nk->len);
    ne->key[nk->len] = '\0';
    if (ne->type == OBJ_STRING && (e->flags & DBE_EMBEDDED)) {
        memcpy(ne->key + nk->len + 1, e->key + e->klen + 1, ecap);
        ne->v.str.ptr = ne->key + nk->len + 1;
    }
    if (ne->type == OBJ_STRING && ne->v.str.pin) ne->v.str.pin->holder = &ne->v.str.pin;
    int64_t when = e->expire;
    uint64_t vb = valueBytes(e);
    dictUnlink(&from->d, e);
    if (when != -1) removeExpire(from, e);
    from->bytes -= dbEntryBytes(e->klen, ecap) + vb;
    free(e);
    ne->expire = -1;
    dictLink(&to->d, ne);
    if (when != -1) setExpire(to, ne, when);
    to->bytes += dbEntryBytes(ne->klen, ecap) + vb;
    return ne;
}

/* A copy of e's value (and TTL) under key nk in db `to` (nk absent there). */
static void dbCopyEntry(ir_db *to, const dbEntry *e, const dbkey *nk) {
    dbEntry *ne;
    if (e->type == OBJ_STRING) {
        size_t embed = e->v.str.len + 1 <= DB_EMBED_MAX ? (e->v.str.len + 1 + 7) & ~(size_t)7 : 0;
        ne = dbAdd(to, nk, OBJ_STRING, embed);
        strSetValue(to, ne, e->v.str.ptr, e->v.str.len, 0);
        ne->flags |= e->flags & (DBE_ENC_RAW | DBE_ENC_STR);
    } else if (e->type == OBJ_LIST) {
        ne = dbAdd(to, nk, OBJ_LIST, 0);
        for (size_t i = 0; i < e->v.list.len; i++) {
            const lelem *x = listAt(&e->v.list, i);
            char *p = dbMalloc(x->len + 1);
            memcpy(p, x->p, x->len + 1);
            listPush(to, &ne->v.list, p, x->len, 0);
        }
    } else if (e->type == OBJ_ZSET) {
        ne = dbAdd(to, nk, OBJ_ZSET, 0);
        zsetCopy(to, ne->v.coll, e->v.coll);
    } else if (e->type == OBJ_STREAM) {
        ne = dbAdd(to, nk, OBJ_STREAM, 0);
        ne->v.stream = streamDup(to, e->v.stream);
    } else {
        ne = dbAdd(to, nk, e->type, 0);
        if (e->v.coll->big) collSetBig(to, ne->v.coll);
        collIter it;
        collIterInit(&it, e->v.coll);
        for (const dbEntry *fe; (fe = collNext(&it));)
            collAdd(to, ne->v.coll, fe->key, fe->klen, fe->v.str.ptr, fe->v.str.len);
    }
    if (e->expire != -1) setExpire(to, ne, e->expire);
}

/* ---- keyspace commands ------------------------------------------------------- */

/* DBSIZE */
void dbsizeCommand(client *c) {
    ir_db *db = dbFor(c);
    addReplyLongLong(c, (long long)dictSize(&db->d));
}

/* Parse FLUSHDB/FLUSHALL's optional [ASYNC|SYNC]; both free synchronously. */
static int getFlushCommandFlags(client *c) {
    if (c->argc == 1 || (c->argc == 2 && (argEq(c, 1, "sync") || argEq(c, 1, "async")))) return 0;
    addReplyStr(c, shared.syntaxerr);
    return -1;
}

/* FLUSHDB [ASYNC|SYNC]: the selected database. */
void flushdbCommand(client *c) {
    ir_db *db = dbFor(c);
    if (getFlushCommandFlags(c) != 0) return;
    signalFlushedDb(db);
    dbEmpty(db);
    blockedDbReady(c->srv, db); /* XREADGROUP waiters learn their stream went */
    addReplyStr(c, shared.ok);
}

/* FLUSHALL [ASYNC|SYNC]: every database, every replay table and every parameter table. */
void flushallCommand(client *c) {
    dbFor(c);
    if (getFlushCommandFlags(c) != 0) return;
    for (int i = 0; i < dbsCount(c->srv); i++) {
        ir_db *db = dbsAt(c->srv, i);
        signalFlushedDb(db);
        dbEmpty(db);
        blockedDbReady(c->srv, db); /* XREADGROUP waiters learn their stream went */
    }
    tablesFlush(c->srv->tables);
    chunkStoreFlushStreams(c->srv->chunks);
    paramsFlush(c->srv->params);
    addReplyStr(c, shared.ok);
}

/* DEL key [key ...] (and UNLINK: values are freed at once either way) */
void delCommand(client *c) {
    ir_db *db = dbFor(c);
    long long deleted = 0;
    for (int j = 1; j < c->argc; j++) {
        dbkey k = argKey(db, c, j);
        dbEntry *e = lookupKey(db, &k); /* an expired key does not count */
        if (e) {
            signalModifiedKey(c, db, k.p, k.len);
            dbDeleteEntry(db, e);
            notifyKeyspaceEvent(NOTIFY_GENERIC, "del", k.p, k.len, db->id);
            deleted++;
        }
    }
    addReplyLongLong(c, deleted);
}

/* UNLINK key [key ...] */
void unlinkCommand(client *c) { delCommand(c); }

static void existsGeneric(client *c, int touch) {
    ir_db *db = dbFor(c);
    long long count = 0;
    for (int j = 1; j < c->argc; j++) {
        dbkey k = argKey(db, c, j);
        if (touch ? lookupKey(db, &k) : lookupKeyNoTouch(db, &k)) count++;
    }
    addReplyLongLong(c, count);
}

/* EXISTS key [key ...] (not an access: OBJECT IDLETIME goes on) */
void existsCommand(client *c) { existsGeneric(c, 0); }

/* TOUCH key [key ...]: how many exist; their access time is now. */
void touchCommand(client *c) { existsGeneric(c, 1); }

#define EXPIRE_NX (1 << 0)
#define EXPIRE_XX (1 << 1)
#define EXPIRE_GT (1 << 2)
#define EXPIRE_LT (1 << 3)

static int parseExtendedExpireArgumentsOrReply(client *c, int *flags) {
    for (int j = 3; j < c->argc; j++) {
        if (argEq(c, j, "nx")) *flags |= EXPIRE_NX;
        else if (argEq(c, j, "xx")) *flags |= EXPIRE_XX;
        else if (argEq(c, j, "gt")) *flags |= EXPIRE_GT;
        else if (argEq(c, j, "lt")) *flags |= EXPIRE_LT;
        else {
            addReplyErrorFormat(c, "Unsupported option %s", c->argv[j].ptr);
            return -1;
        }
    }
    if ((*flags & EXPIRE_NX) && (*flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT))) {
        addReplyError(c, "NX and XX, GT or LT options at the same time are not compatible");
        return -1;
    }
    if ((*flags & EXPIRE_GT) && (*flags & EXPIRE_LT)) {
        addReplyError(c, "GT and LT options at the same time are not compatible");
        return -1;
    }
    return 0;
}

/* EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT: argv[2] is in seconds (unit 1000) or
 * ms (1), relative to now or (absolute) to the epoch. */
static void expireGenericCommand(client *c, long long unit, int absolute, const char *name) {
    ir_db *db = dbFor(c);
    int flags = 0;
    long long when;
    if (parseExtendedExpireArgumentsOrReply(c, &flags) != 0) return;
    if (getLongLongFromArg(c, 2, &when) != 0) return;

    /* Negative timeouts are allowed (the key is deleted); overflows are not. */
    long long now = dbNow(db), basetime = absolute ? 0 : now;
    if (__builtin_mul_overflow(when, unit, &when) || when > LLONG_MAX - basetime) {
        addReplyErrorFormat(c, "invalid expire time in '%s' command", name);
        return;
    }
    when += basetime;

    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    if (flags) {
        long long current = e->expire;
        if ((flags & EXPIRE_NX) && current != -1) goto noop;
        if ((flags & EXPIRE_XX) && current == -1) goto noop;
        /* no TTL counts as an infinite one */
        if ((flags & EXPIRE_GT) && (current == -1 || when <= current)) goto noop;
        if ((flags & EXPIRE_LT) && current != -1 && when >= current) goto noop;
    }
    signalModifiedKey(c, db, k.p, k.len);
    if (when <= now) { /* already in the past */
        dbDeleteEntry(db, e);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "del", k.p, k.len, db->id);
        replRewriteDel(c, (int)repl_lazy_server_del);
    } else {
        setExpire(db, e, when);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "expire", k.p, k.len, db->id);
        replRewritePexpireat(c, when, 3); /* replicas: PEXPIREAT key ms [options] */
    }
    addReplyStr(c, shared.cone);
    return;
noop:
    addReplyStr(c, shared.czero);
}

/* EXPIRE key seconds [NX|XX|GT|LT] */
void expireCommand(client *c) { expireGenericCommand(c, 1000, 0, "expire"); }

/* PEXPIRE key milliseconds [NX|XX|GT|LT] */
void pexpireCommand(client *c) { expireGenericCommand(c, 1, 0, "pexpire"); }

/* EXPIREAT key unix-time-seconds [NX|XX|GT|LT] */
void expireatCommand(client *c) { expireGenericCommand(c, 1000, 1, "expireat"); }

/* PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT] */
void pexpireatCommand(client *c) { expireGenericCommand(c, 1, 1, "pexpireat"); }

static void ttlGenericCommand(client *c, int output_ms, int absolute) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKeyNoTouch(db, &k);
    if (!e) {
        addReplyLongLong(c, -2);
        return;
    }
    if (e->expire == -1) {
        addReplyLongLong(c, -1);
        return;
    }
    long long ttl = absolute ? e->expire : e->expire - dbNow(db);
    if (ttl < 0) ttl = 0;
    addReplyLongLong(c, output_ms ? ttl : (ttl + 500) / 1000);
}

/* TTL key */
void ttlCommand(client *c) { ttlGenericCommand(c, 0, 0); }

/* PTTL key */
void pttlCommand(client *c) { ttlGenericCommand(c, 1, 0); }

/* EXPIRETIME key */
void expiretimeCommand(client *c) { ttlGenericCommand(c, 0, 1); }

/* PEXPIRETIME key */
void pexpiretimeCommand(client *c) { ttlGenericCommand(c, 1, 1); }

/* PERSIST key */
void persistCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    int done = e && removeExpire(db, e);
    if (done) signalModifiedKey(c, db, k.p, k.len);
    if (done) notifyKeyspaceEvent(NOTIFY_GENERIC, "persist", k.p, k.len, db->id);
    addReplyStr(c, done ? shared.cone : shared.czero);
}

static const char *typeName(int type) {
    switch (type) {
    case OBJ_STRING: return "string";
    case OBJ_LIST: return "list";
    case OBJ_SET: return "set";
    case OBJ_ZSET: return "zset";
    case OBJ_HASH: return "hash";
    case OBJ_STREAM: return "stream";
    default: return "none";
    }
}

/* TYPE key */
void typeCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKeyNoTouch(db, &k);
    addReplyStatus(c, e ? typeName(e->type) : "none");
}

static void scratchPush(ir_db *db, size_t n, dbEntry *e) {
    if (n == db->scratchcap) {
        db->scratchcap = db->scratchcap ? db->scratchcap * 2 : 256;
        db->scratch = dbRealloc(db->scratch, db->scratchcap * sizeof(dbEntry *));
    }
    db->scratch[n] = e;
}

static void scratchReserve(ir_db *db, size_t n) {
    if (db->scratchcap >= n) return;
    while (db->scratchcap < n) db->scratchcap = db->scratchcap ? db->scratchcap * 2 : 256;
    db->scratch = dbRealloc(db->scratch, db->scratchcap * sizeof(dbEntry *));
}

static void scratchTrim(ir_db *db) {
    if (db->scratchcap > 65536) { /* one huge KEYS: give the memory back */
        free(db->scratch);
        db->scratch = NULL;
        db->scratchcap = 0;
    }
}

/* KEYS pattern */
void keysCommand(client *c) {
    ir_db *db = dbFor(c);
    const char *pattern = c->argv[1].ptr;
    size_t plen = c->argv[1].len;
    int allkeys = plen == 1 && pattern[0] == '*';
    int64_t now = dbNow(db);
    size_t n = 0;

    /* The reply's length comes first, so collect the matches (in a buffer
     * the db keeps), then reply. Expired keys are skipped, not deleted. */
    for (int t = 0; t <= 1; t++) {
        const dictht *ht = &db->d.ht[t];
        for (size_t i = 0; i < ht->size; i++) {
            for (dbEntry *e = ht->table[i]; e; e = e->next) {
                if (keyIsExpired(e, now)) continue;
                if (!allkeys && !stringmatchlen(pattern, plen, e->key, e->klen, 0)) continue;
                scratchPush(db, n++, e);
            }
        }
    }
    addReplyArrayLen(c, (long)n);
    for (size_t i = 0; i < n; i++) addReplyBulk(c, db->scratch[i]->key, db->scratch[i]->klen);
    scratchTrim(db);
}

typedef struct scanCtx {
    ir_db *db;
    size_t n;
} scanCtx;

static void scanCollect(dbEntry *e, void *arg) {
    scanCtx *sc = arg;
    scratchPush(sc->db, sc->n++, e);
}

int parseScanCursorOrReply(client *c, int i, unsigned long long *cursor) {
    const char *cs = c->argv[i].ptr;
    char *endp;
    errno = 0;
    *cursor = strtoull(cs, &endp, 10);
    if (*endp != '\0' || errno == ERANGE || isspace((unsigned char)cs[0])) {
        addReplyError(c, "invalid cursor");
        return -1;
    }
    return 0;
}

/* SCAN cursor [MATCH pattern] [COUNT count] [TYPE type], and HSCAN/SSCAN
 * key cursor [MATCH pattern] [COUNT count] over a hash's or set's dict
 * (co != NULL; argv[2] is the cursor). A compact (listpack/intset) one is
 * returned whole with cursor 0, as Redis does. */
void scanGenericCommand(client *c, dbEntry *owner) {
    ir_db *db = dbFor(c);
    int ci = owner ? 2 : 1;
    unsigned long long cursor;
    if (parseScanCursorOrReply(c, ci, &cursor) != 0) return;
    long long count = 10;
    const char *pat = NULL, *type = NULL;
    size_t plen = 0;
    for (int j = ci + 1; j < c->argc; j += 2) {
        int more = c->argc - j - 1;
        if (argEq(c, j, "count") && more >= 1) {
            if (getLongLongFromArg(c, j + 1, &count) != 0) return;
            if (count < 1) {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
        } else if (argEq(c, j, "match") && more >= 1) {
            pat = c->argv[j + 1].ptr;
            plen = c->argv[j + 1].len;
            if (plen == 1 && pat[0] == '*') pat = NULL;
        } else if (argEq(c, j, "type") && !owner && more >= 1) {
            type = c->argv[j + 1].ptr;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    scanCtx sc = {db, 0};
    dict *d = owner ? &owner->v.coll->d : &db->d;
    if (owner && !owner->v.coll->big) {
        cursor = 0;
        scratchReserve(db, dictSize(d));
        sc.n = owner->type == OBJ_ZSET ? zsetAll(owner->v.coll, db->scratch)
                                       : collAll(owner->v.coll, db->scratch);
    } else {
        cursor = dictScan(d, cursor, (long)(count > LONG_MAX / 10 ? LONG_MAX / 10 : count),
                          scanCollect, &sc);
    }
    int64_t now = dbNow(db);
    size_t kept = 0;
    for (size_t i = 0; i < sc.n; i++) {
        dbEntry *e = db->scratch[i];
        int expired = !owner && keyIsExpired(e, now);
        if (pat && !stringmatchlen(pat, plen, e->key, e->klen, 0)) continue;
        /* Redis reads the type of each key the pattern let through with a
         * lookup, which counts a keyspace hit (a miss when it expired) */
        if (type && readStats) countRead(expired ? NULL : e);
        if (expired) { /* and removes it, as Redis's SCAN does (not KEYS); replicas told */
            notifyKeyspaceEvent(NOTIFY_EXPIRED, "expired", e->key, e->klen, db->id);
            if (type) notifyKeyspaceEvent(NOTIFY_KEY_MISS, "keymiss", e->key, e->klen, db->id);
            signalModifiedKey(NULL, db, e->key, e->klen);
            replPropagateExpired(db, e->key, e->klen);
            dbDeleteEntry(db, e);
            db->expired_keys++;
            continue;
        }
        if (type && strcasecmp(type, typeName(e->type)) != 0) continue;
        db->scratch[kept++] = e;
    }
    int pairs = owner && (owner->type == OBJ_HASH || owner->type == OBJ_ZSET);
    char cbuf[32];
    int cn = snprintf(cbuf, sizeof(cbuf), "%llu", cursor);
    addReplyArrayLen(c, 2);
    addReplyBulk(c, cbuf, (size_t)cn);
    addReplyArrayLen(c, (long)(pairs ? 2 * kept : kept));
    for (size_t i = 0; i < kept; i++) {
        dbEntry *e = db->scratch[i];
        addReplyBulk(c, e->key, e->klen);
        if (pairs && owner->type == OBJ_ZSET) {
            char sb[64];
            addReplyBulk(c, sb, (size_t)zsetScanScore(owner->v.coll, e, sb, sizeof(sb)));
        } else if (pairs) {
            addReplyBulk(c, e->v.str.ptr, e->v.str.len);
        }
    }
    scratchTrim(db);
}

/* SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] */
void scanCommand(client *c) { scanGenericCommand(c, NULL); }

/* An int argument, with Redis's getIntFromObjectOrReply errors (msg NULL:
 * "value is not an integer or out of range"). */
int getIntFromArg(client *c, int i, int *out, const char *msg) {
    long long v;
    int isint = string2ll(c->argv[i].ptr, c->argv[i].len, &v);
    if (!isint || v < INT_MIN || v > INT_MAX) {
        if (msg) addReplyError(c, msg);
        else if (!isint) addReplyStr(c, shared.notinteger);
        else
            addReplyErrorFormat(c, "value is out of range, value must between %d and %d", INT_MIN,
                                INT_MAX);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static const char *sameobjecterr = "source and destination objects are the same";

static void renameGenericCommand(client *c, int nx) {
    ir_db *db = dbFor(c);
    dbkey src = argKey(db, c, 1), dst = argKey(db, c, 2);
    dbEntry *e = lookupKey(db, &src);
    if (!e) {
        addReplyStr(c, shared.nokeyerr);
        return;
    }
    if (src.len == dst.len && memcmp(src.p, dst.p, src.len) == 0) {
        addReplyStr(c, nx ? shared.czero : shared.ok);
        return;
    }
    dbEntry *old = lookupKey(db, &dst);
    if (old) {
        if (nx) {
            addReplyStr(c, shared.czero);
            return;
        }
        dbDeleteEntry(db, old);
    }
    signalModifiedKey(c, db, src.p, src.len);
    dbEntry *ne = dbRekey(db, e, db, &dst);
    signalModifiedKey(c, db, dst.p, dst.len);
    notifyKeyspaceEvent(NOTIFY_NEW, "new", dst.p, dst.len, db->id);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "rename_from", src.p, src.len, db->id);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "rename_to", dst.p, dst.len, db->id);
    if (ne->type == OBJ_LIST || ne->type == OBJ_ZSET || ne->type == OBJ_STREAM)
        signalKeyAsReady(db, dst.p, dst.len); /* a new list there */
    addReplyStr(c, nx ? shared.cone : shared.ok);
}

/* RENAME key newkey */
void renameCommand(client *c) { renameGenericCommand(c, 0); }

/* RENAMENX key newkey */
void renamenxCommand(client *c) { renameGenericCommand(c, 1); }

/* COPY source destination [DB destination-db] [REPLACE] */
void copyCommand(client *c) {
    ir_db *src = dbFor(c), *dst = src;
    int replace = 0;
    for (int j = 3; j < c->argc; j++) {
        if (argEq(c, j, "replace")) {
            replace = 1;
        } else if (argEq(c, j, "db") && j + 1 < c->argc) {
            int id;
            if (getIntFromArg(c, j + 1, &id, NULL) != 0) return;
            if (id < 0 || id >= dbsCount(c->srv)) {
                addReplyError(c, "DB index is out of range");
                return;
            }
            dst = dbByIndex(c->srv, id);
            j++;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (src == dst && c->argv[1].len == c->argv[2].len &&
        memcmp(c->argv[1].ptr, c->argv[2].ptr, c->argv[1].len) == 0) {
        addReplyError(c, sameobjecterr);
        return;
    }
    dbkey k = argKey(src, c, 1);
    dbEntry *e = lookupKey(src, &k);
    countRead(e); /* Redis reads the source with lookupKeyRead */
    if (!e && !readStats) notifyKeyspaceEvent(NOTIFY_KEY_MISS, "keymiss", k.p, k.len, src->id);
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    dst->now = src->now;
    dbkey nk = argKey(dst, c, 2);
    dbEntry *old = lookupKey(dst, &nk);
    if (old) {
        if (!replace) {
            addReplyStr(c, shared.czero);
            return;
        }
        dbDeleteEntry(dst, old);
    }
    dbCopyEntry(dst, e, &nk);
    signalModifiedKey(c, dst, nk.p, nk.len);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "copy_to", nk.p, nk.len, dst->id);
    if (e->type == OBJ_LIST || e->type == OBJ_ZSET || e->type == OBJ_STREAM)
        signalKeyAsReady(dst, nk.p, nk.len);
    addReplyStr(c, shared.cone);
}

/* MOVE key db */
void moveCommand(client *c) {
    ir_db *src = dbFor(c);
    int id;
    if (getIntFromArg(c, 2, &id, NULL) != 0) return;
    if (id < 0 || id >= dbsCount(c->srv)) {
        addReplyError(c, "DB index is out of range");
        return;
    }
    ir_db *dst = dbByIndex(c->srv, id);
    if (src == dst) {
        addReplyError(c, sameobjecterr);
        return;
    }
    dbkey k = argKey(src, c, 1);
    dbEntry *e = lookupKey(src, &k);
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    dst->now = src->now;
    dbkey nk = argKey(dst, c, 1);
    if (lookupKey(dst, &nk)) {
        addReplyStr(c, shared.czero);
        return;
    }
    signalModifiedKey(c, src, k.p, k.len);
    dbEntry *ne = dbRekey(src, e, dst, &nk);
    signalModifiedKey(c, dst, nk.p, nk.len);
    notifyKeyspaceEvent(NOTIFY_NEW, "new", nk.p, nk.len, dst->id);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "move_from", k.p, k.len, src->id);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "move_to", nk.p, nk.len, dst->id);
    if (ne->type == OBJ_LIST || ne->type == OBJ_ZSET || ne->type == OBJ_STREAM)
        signalKeyAsReady(dst, nk.p, nk.len);
    addReplyStr(c, shared.cone);
}

/* SWAPDB index1 index2: the two databases trade contents; clients stay on
 * their index. */
void swapdbCommand(client *c) {
    int a, b;
    dbFor(c);
    if (getIntFromArg(c, 1, &a, "invalid first DB index") != 0) return;
    if (getIntFromArg(c, 2, &b, "invalid second DB index") != 0) return;
    int n = dbsCount(c->srv);
    if (a < 0 || a >= n || b < 0 || b >= n) {
        addReplyError(c, "DB index is out of range");
        return;
    }
    if (a != b) {
        ir_db *x = dbByIndex(c->srv, a), *y = dbByIndex(c->srv, b);
        if (c->srv->watched) multiTouchSwappedDbs(c->srv, x, y);
        ir_db t = *x;
        *x = *y;
        *y = t;
        x->id = a; /* the indexes stay where they were */
        y->id = b;
        blockedDbReady(c->srv, x); /* clients blocked in either may now find a list */
        blockedDbReady(c->srv, y);
    }
    addReplyStr(c, shared.ok);
}

/* RANDOMKEY */
void randomkeyCommand(client *c) {
    ir_db *db = dbFor(c);
    int64_t now = dbNow(db);
    for (int tries = 0;; tries++) {
        dbEntry *e = dictRandom(db, &db->d);
        if (!e) {
            addReplyNull(c);
            return;
        }
        if (keyIsExpired(e, now)) {
            if (db->nvol == dictSize(&db->d) && tries > 100) { /* all volatile: give up */
                addReplyBulk(c, e->key, e->klen);
                return;
            }
            notifyKeyspaceEvent(NOTIFY_EXPIRED, "expired", e->key, e->klen, db->id);
            signalModifiedKey(NULL, db, e->key, e->klen);
            replPropagateExpired(db, e->key, e->klen);
            dbDeleteEntry(db, e);
            db->expired_keys++;
            continue;
        }
        addReplyBulk(c, e->key, e->klen);
        return;
    }
}

const char *dbEncodingName(const dbEntry *e) {
    switch (e->type) {
    case OBJ_STRING: {
        long long v;
        if (e->flags & DBE_ENC_RAW) return "raw";
        if (!(e->flags & DBE_ENC_STR) && e->v.str.len <= 20 &&
            string2ll(e->v.str.ptr, e->v.str.len, &v))
            return "int";
        return e->v.str.len <= 44 ? "embstr" : "raw";
    }
    case OBJ_LIST: return "quicklist";
    case OBJ_SET: return e->v.coll->big ? "hashtable" : "intset";
    case OBJ_HASH: return e->v.coll->big ? "hashtable" : "listpack";
    case OBJ_ZSET: return e->v.coll->big ? "skiplist" : "listpack";
    case OBJ_STREAM: return "stream";
    default: return "unknown";
    }
}

/* OBJECT ENCODING key | REFCOUNT key | FREQ key | HELP (no access times or
 * frequencies are kept: IDLETIME is not built) */
void objectCommand(client *c) {
    if (argEq(c, 1, "help") && c->argc == 2) {
        static const char *help[] = {
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        };
        addReplyHelpOf(c, help);
        return;
    }
    int known = argEq(c, 1, "encoding") || argEq(c, 1, "refcount") || argEq(c, 1, "freq") ||
                argEq(c, 1, "idletime");
    if (!known && !argEq(c, 1, "help")) {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try OBJECT HELP.", c->argv[1].ptr);
        return;
    }
    if (c->argc != 3 || argEq(c, 1, "help")) {
        addReplySubcommandArity(c, "object");
        return;
    }
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 2);
    dbEntry *e = lookupKeyNoTouch(db, &k);
    if (!e) {
        addReplyNull(c);
        return;
    }
    if (argEq(c, 1, "idletime")) {
        /* maxmemory-policy is always noeviction here: access times are kept */
        addReplyLongLong(c, (long long)dbEntryIdleSeconds(db, e));
    } else if (argEq(c, 1, "encoding")) {
        addReplyBulkCString(c, dbEncodingName(e));
    } else if (argEq(c, 1, "refcount")) {
        long long v;
        int shared_int = e->type == OBJ_STRING && !strcmp(dbEncodingName(e), "int") &&
                         string2ll(e->v.str.ptr, e->v.str.len, &v) && v >= 0 && v < 10000;
        addReplyLongLong(c, shared_int ? 2147483647LL : 1);
    } else {
        addReplyError(c, "An LFU maxmemory policy is not selected, access frequency not tracked. "
                         "Please note that when switching between policies at runtime LRU and "
                         "LFU data will take some time to adjust.");
    }
}

/* ---- snapshots (see db_internal.h) ------------------------------------------- */

int dbForEach(const ir_db *db, int (*fn)(const dbEntry *e, void *arg), void *arg) {
    for (int t = 0; t <= 1; t++) {
        const dictht *ht = &db->d.ht[t];
        for (size_t i = 0; i < ht->size; i++) {
            for (const dbEntry *e = ht->table[i]; e; e = e->next) {
                int rc = fn(e, arg);
                if (rc) return rc;
            }
        }
    }
    return 0;
}

void dbStrAdopt(ir_db *db, dbEntry *e, char *p, size_t len) {
    strFreeValue(db, e); /* frees the old buffer, or detaches it if pinned */
    e->v.str.ptr = p;
    e->v.str.len = len;
    e->v.str.cap = len + 1;
    e->flags &= (uint8_t)~DBE_EMBEDDED;
    db->bytes += dbBufBytes(len + 1);
}
