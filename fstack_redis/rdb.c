/* rdb.c - the RDB image of the keyspace a replica loads (see rdb.h).
 *
 * Layout (RDB version 10, as Redis 7.0 writes and loads it):
 *   "REDIS0010"
 *   aux fields      0xFA <string name> <string value>
 *   per database    0xFE <len id>, 0xFB <len keys> <len keys with a TTL>, then
 *                   per key: [0xFC <u64 LE unix ms>] <type> <string key> <value>
 *   end             0xFF <u64 LE CRC64 of every byte before it>
 * Types: 0 string, 1 list, 2 set, 4 hash (the plain encodings every Redis
 * since 2.x loads). Lengths: 00xxxxxx (< 64), 01xxxxxx xxxxxxxx (< 16384),
 * 0x80 + u32 BE, 0x81 + u64 BE. Strings that are decimal integers with no
 * leading zeroes are written in the integer encodings 0xC0/0xC1/0xC2 (8, 16,
 * 32 bits little-endian), as Redis does.
 */
#include "rdb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db_internal.h"

#define RDB_OP_AUX 0xFA
#define RDB_OP_RESIZEDB 0xFB
#define RDB_OP_EXPIRETIME_MS 0xFC
#define RDB_OP_SELECTDB 0xFE
#define RDB_OP_EOF 0xFF
#define RDB_TYPE_STRING 0
#define RDB_TYPE_LIST 1
#define RDB_TYPE_SET 2
#define RDB_TYPE_HASH 4

/* ---- CRC64 (Jones) ------------------------------------------------------ */

static uint64_t crc_table[256];
static int crc_ready;

static void crcInit(void) {
    const uint64_t poly = 0x95ac9329ac4bc9b5ULL; /* 0xad93d23594c935a9, bits reversed */
    for (int i = 0; i < 256; i++) {
        uint64_t c = (uint64_t)i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        crc_table[i] = c;
    }
    crc_ready = 1;
}

uint64_t crc64Jones(uint64_t crc, const void *p, size_t len) {
    if (!crc_ready) crcInit();
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++) crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

/* ---- the output buffer -------------------------------------------------- */

typedef struct rbuf {
    char *p;
    size_t len, cap;
    int oom;
} rbuf;

static void put(rbuf *b, const void *p, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void putByte(rbuf *b, unsigned v) {
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

static void putLen(rbuf *b, uint64_t n) {
    unsigned char t[9];
    if (n < 64) {
        putByte(b, (unsigned)n);
    } else if (n < 16384) {
        t[0] = (unsigned char)(0x40 | (n >> 8));
        t[1] = (unsigned char)(n & 0xff);
        put(b, t, 2);
    } else if (n <= UINT32_MAX) {
        t[0] = 0x80;
        for (int i = 0; i < 4; i++) t[1 + i] = (unsigned char)(n >> (24 - 8 * i));
        put(b, t, 5);
    } else {
        t[0] = 0x81;
        for (int i = 0; i < 8; i++) t[1 + i] = (unsigned char)(n >> (56 - 8 * i));
        put(b, t, 9);
    }
}

static void putLE(rbuf *b, uint64_t v, int bytes) {
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    put(b, t, (size_t)bytes);
}

/* A string; one that reads back as the same integer goes in 1, 2 or 4 bytes. */
static void putString(rbuf *b, const char *p, size_t len) {
    long long v;
    char tmp[24];
    if (len && len <= 11 && string2ll(p, len, &v) &&
        (size_t)ll2string(tmp, sizeof(tmp), v) == len && memcmp(tmp, p, len) == 0) {
        if (v >= INT8_MIN && v <= INT8_MAX) {
            putByte(b, 0xC0);
            putLE(b, (uint64_t)v, 1);
            return;
        }
        if (v >= INT16_MIN && v <= INT16_MAX) {
            putByte(b, 0xC1);
            putLE(b, (uint64_t)v, 2);
            return;
        }
        if (v >= INT32_MIN && v <= INT32_MAX) {
            putByte(b, 0xC2);
            putLE(b, (uint64_t)v, 4);
            return;
        }
    }
    putLen(b, len);
    put(b, p, len);
}

static void putAux(rbuf *b, const char *name, const char *value) {
    putByte(b, RDB_OP_AUX);
    putString(b, name, strlen(name));
    putString(b, value, strlen(value));
}

/* ---- the keyspace ------------------------------------------------------- */

typedef struct walk {
    rbuf *b;
    int64_t now;
    dbEntry **tmp; /* a collection's entries */
    size_t tmpcap;
} walk;

static int countLive(const dbEntry *e, void *arg) {
    uint64_t *n = arg;
    if (!keyIsExpired(e, *(const int64_t *)(n + 2))) {
        n[0]++;
        if (e->expire != -1) n[1]++;
    }
    return 0;
}

static int writeColl(walk *w, const dbColl *co, int hash) {
    size_t n = dictSize(&co->d);
    if (n > w->tmpcap) {
        dbEntry **t = realloc(w->tmp, n * sizeof(*t));
        if (!t) return w->b->oom = 1;
        w->tmp = t;
        w->tmpcap = n;
    }
    n = collAll((dbColl *)co, w->tmp);
    putLen(w->b, n);
    for (size_t i = 0; i < n; i++) {
        const dbEntry *fe = w->tmp[i];
        putString(w->b, fe->key, fe->klen);
        if (hash) putString(w->b, fe->v.str.ptr, fe->v.str.len);
    }
    return 0;
}

static int writeEntry(const dbEntry *e, void *arg) {
    walk *w = arg;
    rbuf *b = w->b;
    if (keyIsExpired(e, w->now)) return 0;
    if (e->expire != -1) {
        putByte(b, RDB_OP_EXPIRETIME_MS);
        putLE(b, (uint64_t)e->expire, 8);
    }
    switch (e->type) {
    case OBJ_STRING:
        putByte(b, RDB_TYPE_STRING);
        putString(b, e->key, e->klen);
        putString(b, e->v.str.ptr, e->v.str.len);
        break;
    case OBJ_LIST:
        putByte(b, RDB_TYPE_LIST);
        putString(b, e->key, e->klen);
        putLen(b, e->v.list.len);
        for (size_t i = 0; i < e->v.list.len; i++) {
            const lelem *l = listAt(&e->v.list, i);
            putString(b, l->p, l->len);
        }
        break;
    case OBJ_SET:
        putByte(b, RDB_TYPE_SET);
        putString(b, e->key, e->klen);
        writeColl(w, e->v.coll, 0);
        break;
    case OBJ_HASH:
        putByte(b, RDB_TYPE_HASH);
        putString(b, e->key, e->klen);
        writeColl(w, e->v.coll, 1);
        break;
    }
    return b->oom;
}

char *rdbBuild(const ir_server *s, const char *repl_id, uint64_t repl_offset, size_t *len) {
    rbuf b = {0};
    char num[32];
    put(&b, "REDIS0010", 9);
    putAux(&b, "redis-ver", IR_REDIS_VERSION);
    putAux(&b, "redis-bits", sizeof(void *) == 8 ? "64" : "32");
    snprintf(num, sizeof(num), "%lld", (long long)time(NULL));
    putAux(&b, "ctime", num);
    snprintf(num, sizeof(num), "%llu", (unsigned long long)serverUsedMemory(s));
    putAux(&b, "used-mem", num);
    putAux(&b, "repl-stream-db", "0");
    putAux(&b, "repl-id", repl_id);
    snprintf(num, sizeof(num), "%llu", (unsigned long long)repl_offset);
    putAux(&b, "repl-offset", num);
    putAux(&b, "aof-base", "0");
    walk w = {&b, (int64_t)ir_mstime(), NULL, 0};
    for (int i = 0; i < dbsCount(s) && !b.oom; i++) {
        const ir_db *db = dbsAt(s, i);
        uint64_t n[3] = {0, 0, (uint64_t)w.now};
        dbForEach(db, countLive, n);
        if (!n[0]) continue;
        putByte(&b, RDB_OP_SELECTDB);
        putLen(&b, (uint64_t)i);
        putByte(&b, RDB_OP_RESIZEDB);
        putLen(&b, n[0]);
        putLen(&b, n[1]);
        dbForEach(db, writeEntry, &w);
    }
    free(w.tmp);
    putByte(&b, RDB_OP_EOF);
    if (!b.oom) putLE(&b, crc64Jones(0, b.p, b.len), 8);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
