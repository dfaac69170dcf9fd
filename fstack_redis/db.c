/* db.c - the keyspace: hash table, expiry, glob matching and the keyspace
 * commands (DEL, EXISTS, EXPIRE, TTL, TYPE, KEYS, DBSIZE, FLUSHDB ...).
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
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "db_internal.h"
#include "replay.h"
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

/* ---- SipHash ---------------------------------------------------------------
 * SipHash-c-d (Aumasson & Bernstein), written from the paper. The keyspace
 * uses c=1, d=3 (what Redis and CPython use for hash tables); 2-4 is there so
 * the test can check the known test vectors of the reference. */

static inline uint64_t rotl64(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static inline uint64_t load64le(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

#define SIPROUND                                                                                  \
    do {                                                                                          \
        v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);                             \
        v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                                                  \
        v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                                                  \
        v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);                             \
    } while (0)

static inline uint64_t siphash(const void *in, size_t inlen, const uint8_t k[16], int crounds,
                               int drounds) {
    const uint8_t *m = in;
    uint64_t k0 = load64le(k), k1 = load64le(k + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    const uint8_t *end = m + (inlen & ~(size_t)7);
    uint64_t b = (uint64_t)inlen << 56;

    for (; m != end; m += 8) {
        uint64_t w = load64le(m);
        v3 ^= w;
        for (int i = 0; i < crounds; i++) SIPROUND;
        v0 ^= w;
    }
    switch (inlen & 7) {
    case 7: b |= (uint64_t)m[6] << 48; /* fall through */
    case 6: b |= (uint64_t)m[5] << 40; /* fall through */
    case 5: b |= (uint64_t)m[4] << 32; /* fall through */
    case 4: b |= (uint64_t)m[3] << 24; /* fall through */
    case 3: b |= (uint64_t)m[2] << 16; /* fall through */
    case 2: b |= (uint64_t)m[1] << 8;  /* fall through */
    case 1: b |= (uint64_t)m[0]; break;
    case 0: break;
    }
    v3 ^= b;
    for (int i = 0; i < crounds; i++) SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < drounds; i++) SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t siphash13(const void *in, size_t inlen, const uint8_t k[16]) {
    return siphash(in, inlen, k, 1, 3);
}

uint64_t siphash24(const void *in, size_t inlen, const uint8_t k[16]) {
    return siphash(in, inlen, k, 2, 4);
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
                if (globMatch(p + 1, plen - 1, s, slen, nocase, skip_longer, nesting + 1))
                    return 1;
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

struct ir_db *dbNew(void) {
    ir_db *db = dbCalloc(1, sizeof(*db));
    uint8_t seed[16];
    randomSeed(seed);
    dictInit(&db->d, seed);
    uint64_t x = load64le(seed) ^ rotl64(load64le(seed + 8), 17);
    db->rng = splitmix64(&x) | 1;
    return db;
}


ir_db *dbFor(client *c) {
    ir_db *db = c->srv->db;
    if (db->nlater) dbReleaseLater(db);
    db->now = 0; /* read the clock again if this command needs it */
    return db;
}

dbkey argKey(ir_db *db, client *c, int i) { return dbKey(db, c->argv[i].ptr, c->argv[i].len); }

void dbFreeLater(ir_db *db, void *p, size_t len) {
    if (!p) return;
    if (len < IR_REF_MIN) { /* a reply copies bodies this small */
        free(p);
        return;
    }
    if (db->nlater == db->latercap) {
        db->latercap = db->latercap ? db->latercap * 2 : 16;
        db->later = dbRealloc(db->later, db->latercap * sizeof(void *));
    }
    db->later[db->nlater++] = p;
}

void dbReleaseLater(ir_db *db) {
    for (size_t i = 0; i < db->nlater; i++) free(db->later[i]);
    db->nlater = 0;
    if (db->latercap > 1024) { /* a big LPOP count: do not keep the array */
        free(db->later);
        db->later = NULL;
        db->latercap = 0;
    }
}

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

dbEntry *dbAdd(ir_db *db, const dbkey *k, int type, size_t embed_cap) {
    if (type != OBJ_STRING || embed_cap > DB_EMBED_MAX) embed_cap = 0;
    dbEntry *e = dbMalloc(sizeof(dbEntry) + k->len + 1 + embed_cap);
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
    } else {
        listInit(&e->v.list);
    }
    dictLink(&db->d, e);
    db->bytes += dbEntryBytes(k->len, embed_cap);
    return e;
}

static void dbFreeValue(ir_db *db, dbEntry *e) {
    if (e->type == OBJ_STRING) strFreeValue(db, e);
    else listFreeAll(db, &e->v.list);
}

void dbMakeString(ir_db *db, dbEntry *e) {
    if (e->type == OBJ_STRING) return;
    listFreeAll(db, &e->v.list);
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

dbEntry *lookupKey(ir_db *db, const dbkey *k) {
    dbEntry *e = dictFind(&db->d, k->p, k->len, k->h);
    if (e && e->expire != -1 && keyIsExpired(e, dbNow(db))) {
        dbDeleteEntry(db, e);
        db->expired_keys++;
        return NULL;
    }
    return e;
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
    dbReleaseLater(db);
    free(db->later);
    free(db);
}

void dbActiveExpire(struct ir_db *db, uint64_t now_ms) {
    /* Between commands: every reply has been flushed or copied by now. */
    if (db->nlater) dbReleaseLater(db);
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

/* FLUSHDB [ASYNC|SYNC] */
void flushdbCommand(client *c) {
    ir_db *db = dbFor(c);
    if (getFlushCommandFlags(c) != 0) return;
    dbEmpty(db);
    addReplyStr(c, shared.ok);
}

/* FLUSHALL [ASYNC|SYNC]: the keyspace and every replay table. */
void flushallCommand(client *c) {
    ir_db *db = dbFor(c);
    if (getFlushCommandFlags(c) != 0) return;
    dbEmpty(db);
    tablesFlush(c->srv->tables);
    addReplyStr(c, shared.ok);
}

/* DEL key [key ...] */
void delCommand(client *c) {
    ir_db *db = dbFor(c);
    long long deleted = 0;
    for (int j = 1; j < c->argc; j++) {
        dbkey k = argKey(db, c, j);
        dbEntry *e = lookupKey(db, &k); /* an expired key does not count */
        if (e) {
            dbDeleteEntry(db, e);
            deleted++;
        }
    }
    addReplyLongLong(c, deleted);
}

/* EXISTS key [key ...] */
void existsCommand(client *c) {
    ir_db *db = dbFor(c);
    long long count = 0;
    for (int j = 1; j < c->argc; j++) {
        dbkey k = argKey(db, c, j);
        if (lookupKey(db, &k)) count++;
    }
    addReplyLongLong(c, count);
}

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

/* EXPIRE/PEXPIRE: the timeout argv[2] is in seconds (unit 1000) or ms (1). */
static void expireGenericCommand(client *c, long long unit, const char *name) {
    ir_db *db = dbFor(c);
    int flags = 0;
    long long when;
    if (parseExtendedExpireArgumentsOrReply(c, &flags) != 0) return;
    if (getLongLongFromArg(c, 2, &when) != 0) return;

    /* Negative timeouts are allowed (the key is deleted); overflows are not. */
    long long basetime = dbNow(db);
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
    if (when <= basetime) { /* already in the past */
        dbDeleteEntry(db, e);
    } else {
        setExpire(db, e, when);
    }
    addReplyStr(c, shared.cone);
    return;
noop:
    addReplyStr(c, shared.czero);
}

/* EXPIRE key seconds [NX|XX|GT|LT] */
void expireCommand(client *c) { expireGenericCommand(c, 1000, "expire"); }

/* PEXPIRE key milliseconds [NX|XX|GT|LT] */
void pexpireCommand(client *c) { expireGenericCommand(c, 1, "pexpire"); }

static void ttlGenericCommand(client *c, int output_ms) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyLongLong(c, -2);
        return;
    }
    if (e->expire == -1) {
        addReplyLongLong(c, -1);
        return;
    }
    long long ttl = e->expire - dbNow(db);
    if (ttl < 0) ttl = 0;
    addReplyLongLong(c, output_ms ? ttl : (ttl + 500) / 1000);
}

/* TTL key */
void ttlCommand(client *c) { ttlGenericCommand(c, 0); }

/* PTTL key */
void pttlCommand(client *c) { ttlGenericCommand(c, 1); }

/* PERSIST key */
void persistCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    addReplyStr(c, e && removeExpire(db, e) ? shared.cone : shared.czero);
}

/* TYPE key */
void typeCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    const char *type = "none";
    if (e) type = e->type == OBJ_STRING ? "string" : "list";
    addReplyStatus(c, type);
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
                if (n == db->scratchcap) {
                    db->scratchcap = db->scratchcap ? db->scratchcap * 2 : 256;
                    db->scratch = dbRealloc(db->scratch, db->scratchcap * sizeof(dbEntry *));
                }
                db->scratch[n++] = e;
            }
        }
    }
    addReplyArrayLen(c, (long)n);
    for (size_t i = 0; i < n; i++) addReplyBulk(c, db->scratch[i]->key, db->scratch[i]->klen);
    if (db->scratchcap > 65536) { /* one huge KEYS: give the memory back */
        free(db->scratch);
        db->scratch = NULL;
        db->scratchcap = 0;
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
