/* rdb.c - the RDB image of the keyspace a replica loads, and the value
 * encoder it shares with DUMP (see rdb.h).
 *
 * Layout (RDB version 10, as Redis 7.0 writes and loads it):
 *   "REDIS0010"
 *   aux fields      0xFA <string name> <string value>
 *   per database    0xFE <len id>, 0xFB <len keys> <len keys with a TTL>, then
 *                   per key: [0xFC <u64 LE unix ms>] <type> <string key> <value>
 *   end             0xFF <u64 LE CRC64 of every byte before it>
 * Types: 0 string, 1 list, 2 set, 4 hash (the plain encodings every Redis
 * since 2.x loads), 5 sorted set (ZSET_2: member, then the score as a
 * little-endian IEEE double; since Redis 4), 19 stream (STREAM_LISTPACKS_2,
 * Redis 7.0's: t_stream.c's streamPutRedisRDB). Lengths: 00xxxxxx (< 64), 01xxxxxx xxxxxxxx (< 16384),
 * 0x80 + u32 BE, 0x81 + u64 BE. Strings that are decimal integers with no
 * leading zeroes are written in the integer encodings 0xC0/0xC1/0xC2 (8, 16,
 * 32 bits little-endian), as Redis does. A DUMP payload is one <type> <value>
 * of the same encoding (dump.c adds its version and CRC64 trailer).
 */
#include "functions.h"
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

void rdbPut(rdbBuf *b, const void *p, size_t n) {
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

void rdbPutByte(rdbBuf *b, unsigned v) {
    unsigned char c = (unsigned char)v;
    rdbPut(b, &c, 1);
}

void rdbPutLen(rdbBuf *b, uint64_t n) {
    unsigned char t[9];
    if (n < 64) {
        rdbPutByte(b, (unsigned)n);
    } else if (n < 16384) {
        t[0] = (unsigned char)(0x40 | (n >> 8));
        t[1] = (unsigned char)(n & 0xff);
        rdbPut(b, t, 2);
    } else if (n <= UINT32_MAX) {
        t[0] = 0x80;
        for (int i = 0; i < 4; i++) t[1 + i] = (unsigned char)(n >> (24 - 8 * i));
        rdbPut(b, t, 5);
    } else {
        t[0] = 0x81;
        for (int i = 0; i < 8; i++) t[1 + i] = (unsigned char)(n >> (56 - 8 * i));
        rdbPut(b, t, 9);
    }
}

void rdbPutLE(rdbBuf *b, uint64_t v, int bytes) {
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    rdbPut(b, t, (size_t)bytes);
}

void rdbPutString(rdbBuf *b, const char *p, size_t len, int flags) {
    long long v;
    char tmp[24];
    /* only a canonical decimal ("12", not "012" or "+12") reads back the same */
    if (!(flags & RDB_RAW_STRINGS) && len && len <= 11 && string2ll(p, len, &v) &&
        (size_t)ll2string(tmp, sizeof(tmp), v) == len && memcmp(tmp, p, len) == 0) {
        if (v >= INT8_MIN && v <= INT8_MAX) {
            rdbPutByte(b, 0xC0 | RDB_ENC_INT8);
            rdbPutLE(b, (uint64_t)v, 1);
            return;
        }
        if (v >= INT16_MIN && v <= INT16_MAX) {
            rdbPutByte(b, 0xC0 | RDB_ENC_INT16);
            rdbPutLE(b, (uint64_t)v, 2);
            return;
        }
        if (v >= INT32_MIN && v <= INT32_MAX) {
            rdbPutByte(b, 0xC0 | RDB_ENC_INT32);
            rdbPutLE(b, (uint64_t)v, 4);
            return;
        }
    }
    rdbPutLen(b, len);
    rdbPut(b, p, len);
}

/* A set's members or a hash's fields and values in the order replies give
 * them (collIter: a listpack's insertion order, an intset's ascending one),
 * walked in place: no array of the entries is needed. */
static void putColl(rdbBuf *b, const dbColl *co, int hash, int flags) {
    rdbPutLen(b, dictSize(&co->d));
    collIter it;
    collIterInit(&it, co);
    for (const dbEntry *fe; (fe = collNext(&it));) {
        rdbPutString(b, fe->key, fe->klen, flags);
        if (hash) rdbPutString(b, fe->v.str.ptr, fe->v.str.len, flags);
    }
}

typedef struct zputArg {
    rdbBuf *b;
    int flags;
} zputArg;

/* A sorted set member: its string, then its score as 8 bytes little-endian. */
static void putZsetMember(const char *m, size_t len, double score, void *arg) {
    zputArg *z = arg;
    uint64_t u;
    memcpy(&u, &score, 8);
    rdbPutString(z->b, m, len, z->flags);
    rdbPutLE(z->b, u, 8);
}

void rdbPutValue(rdbBuf *b, const dbEntry *e, int flags) {
    rdbPutByte(b, e->type == OBJ_STRING   ? RDB_TYPE_STRING
                  : e->type == OBJ_LIST   ? RDB_TYPE_LIST
                  : e->type == OBJ_SET    ? RDB_TYPE_SET
                  : e->type == OBJ_ZSET   ? RDB_TYPE_ZSET_2
                  : e->type == OBJ_STREAM ? RDB_TYPE_STREAM_LISTPACKS_2
                                          : RDB_TYPE_HASH);
    if (flags & RDB_WITH_KEY) rdbPutString(b, e->key, e->klen, flags);
    switch (e->type) {
    case OBJ_STRING: rdbPutString(b, e->v.str.ptr, e->v.str.len, flags); break;
    case OBJ_LIST:
        rdbPutLen(b, e->v.list.len);
        for (size_t i = 0; i < e->v.list.len; i++) {
            const lelem *l = listAt(&e->v.list, i);
            rdbPutString(b, l->p, l->len, flags);
        }
        break;
    case OBJ_SET:
    case OBJ_HASH: putColl(b, e->v.coll, e->type == OBJ_HASH, flags); break;
    case OBJ_ZSET: { /* greatest first, as Redis writes a skiplist */
        zputArg z = {b, flags};
        rdbPutLen(b, dictSize(&e->v.coll->d));
        zsetForEachRev(e->v.coll, putZsetMember, &z);
        break;
    }
    case OBJ_STREAM: streamPutRedisRDB(b, e->v.stream); break;
    }
}

static void putAux(rdbBuf *b, const char *name, const char *value) {
    rdbPutByte(b, RDB_OP_AUX);
    rdbPutString(b, name, strlen(name), 0);
    rdbPutString(b, value, strlen(value), 0);
}

/* ---- the keyspace ------------------------------------------------------- */

typedef struct walk {
    rdbBuf *b;
    int64_t now;
} walk;

static int countLive(const dbEntry *e, void *arg) {
    uint64_t *n = arg;
    if (!keyIsExpired(e, *(const int64_t *)(n + 2))) {
        n[0]++;
        if (e->expire != -1) n[1]++;
    }
    return 0;
}

/* One record: [expiry time] type key value. */
static int writeEntry(const dbEntry *e, void *arg) {
    walk *w = arg;
    if (keyIsExpired(e, w->now)) return 0;
    if (e->expire != -1) {
        rdbPutByte(w->b, RDB_OP_EXPIRETIME_MS);
        rdbPutLE(w->b, (uint64_t)e->expire, 8);
    }
    rdbPutValue(w->b, e, RDB_WITH_KEY);
    return w->b->oom;
}

char *rdbBuild(const ir_server *s, const char *repl_id, uint64_t repl_offset, size_t *len) {
    rdbBuf b = {0};
    char num[32];
    snprintf(num, sizeof(num), "REDIS%04d", RDB_VERSION);
    rdbPut(&b, num, 9);
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
    functionsRdbPut(s, &b); /* the libraries, before the keys, as Redis writes them */
    walk w = {&b, (int64_t)ir_mstime()};
    for (int i = 0; i < dbsCount(s) && !b.oom; i++) {
        const ir_db *db = dbsAt(s, i);
        uint64_t n[3] = {0, 0, (uint64_t)w.now};
        dbForEach(db, countLive, n);
        if (!n[0]) continue;
        rdbPutByte(&b, RDB_OP_SELECTDB);
        rdbPutLen(&b, (uint64_t)i);
        rdbPutByte(&b, RDB_OP_RESIZEDB);
        rdbPutLen(&b, n[0]);
        rdbPutLen(&b, n[1]);
        dbForEach(db, writeEntry, &w);
    }
    rdbPutByte(&b, RDB_OP_EOF);
    if (!b.oom) rdbPutLE(&b, crc64Jones(0, b.p, b.len), 8);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
