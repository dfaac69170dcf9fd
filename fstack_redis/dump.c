/* dump.c - DUMP and RESTORE with Redis's payload format: one value in RDB
 * serialization, the RDB version (2 bytes, little-endian) and a CRC-64 (Jones,
 * as Redis's crc64) of everything before it (8 bytes, little-endian).
 *
 * DUMP writes the plain RDB types every Redis loads: 0 string, 1 list, 2 set,
 * 4 hash, with raw length-prefixed strings. RESTORE reads those, with the
 * integer and LZF string encodings Redis writes for strings, so a string
 * DUMPed by Redis restores here; Redis's compact encodings of lists, sets and
 * hashes (quicklist, intset, listpack) are not read: "Bad data format".
 *
 * The writing is rdb.c's (the same value encoder as the replication image,
 * one CRC-64 table); this file keeps only the reading.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "rdb.h"
#include "replication.h"

/* DUMP key */
void dumpCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyNull(c);
        return;
    }
    rdbBuf b = {0};
    /* raw strings: the payloads DUMP has always written (RESTORE, here and
     * in Redis, reads the integer encodings too) */
    rdbPutValue(&b, e, RDB_RAW_STRINGS);
    rdbPutLE(&b, RDB_VERSION, 2);
    if (!b.oom) rdbPutLE(&b, crc64Jones(0, b.p, b.len), 8);
    if (b.oom) { /* as ir_xrealloc, which DUMP's own buffer used: Redis aborts too */
        serverLog("out of memory (DUMP of %zu bytes)", b.cap);
        abort();
    }
    addReplyBulk(c, b.p, b.len);
    if (c->has_refs) clientFlush(c); /* a big reply points into b */
    free(b.p);
}

/* ---- reading -------------------------------------------------------------- */

typedef struct rbuf {
    const unsigned char *p, *end;
} rbuf;

/* A length, or with *enc set a special string encoding; -1 past the end. */
static int getLen(rbuf *r, uint64_t *len, int *enc) {
    if (r->p >= r->end) return -1;
    unsigned char h = *r->p++;
    *enc = -1;
    switch (h >> 6) {
    case 0: *len = h & 0x3f; return 0;
    case 1:
        if (r->p >= r->end) return -1;
        *len = ((uint64_t)(h & 0x3f) << 8) | *r->p++;
        return 0;
    case 3: *enc = h & 0x3f; return 0;
    default: break;
    }
    int n = h == 0x80 ? 4 : h == 0x81 ? 8 : 0;
    if (!n || r->end - r->p < n) return -1;
    *len = 0;
    for (int i = 0; i < n; i++) *len = (*len << 8) | *r->p++;
    return 0;
}

/* LZF (liblzf's format, as Redis compresses strings): 0 if in decodes to exactly outlen bytes. */
static int lzfDecompress(const unsigned char *in, size_t inlen, char *out, size_t outlen) {
    const unsigned char *ip = in, *iend = in + inlen;
    size_t op = 0;
    while (ip < iend) {
        unsigned ctrl = *ip++;
        if (ctrl < 32) { /* a literal run of ctrl + 1 bytes */
            size_t n = ctrl + 1;
            if (op + n > outlen || (size_t)(iend - ip) < n) return -1;
            memcpy(out + op, ip, n);
            op += n, ip += n;
        } else { /* a back reference */
            size_t n = ctrl >> 5;
            if (n == 7) {
                if (ip >= iend) return -1;
                n += *ip++;
            }
            if (ip >= iend) return -1;
            size_t back = ((size_t)(ctrl & 0x1f) << 8) + *ip++ + 1;
            n += 2;
            if (back > op || op + n > outlen) return -1;
            for (size_t i = 0; i < n; i++, op++) out[op] = out[op - back];
        }
    }
    return op == outlen ? 0 : -1;
}

/* A string into *p (malloc'd, NUL-terminated) and *len; -1 if malformed. */
static int getStr(rbuf *r, char **p, size_t *len) {
    uint64_t n;
    int enc;
    if (getLen(r, &n, &enc) != 0) return -1;
    if (enc == -1) {
        if ((uint64_t)(r->end - r->p) < n) return -1;
        *p = dbMalloc(n + 1);
        memcpy(*p, r->p, n);
        r->p += n;
    } else if (enc <= RDB_ENC_INT32) {
        int bytes = 1 << enc;
        if (r->end - r->p < bytes) return -1;
        uint32_t u = 0;
        for (int i = 0; i < bytes; i++) u |= (uint32_t)r->p[i] << (8 * i);
        r->p += bytes;
        long long v = enc == RDB_ENC_INT8 ? (int8_t)u : enc == RDB_ENC_INT16 ? (int16_t)u : (int32_t)u;
        *p = dbMalloc(24);
        n = (uint64_t)ll2string(*p, 24, v);
    } else if (enc == RDB_ENC_LZF) {
        uint64_t clen;
        int e2;
        if (getLen(r, &clen, &e2) != 0 || e2 != -1 || getLen(r, &n, &e2) != 0 || e2 != -1 ||
            (uint64_t)(r->end - r->p) < clen || n > ((uint64_t)1 << 32))
            return -1;
        *p = dbMalloc(n + 1);
        if (lzfDecompress(r->p, clen, *p, n) != 0) {
            free(*p);
            *p = NULL;
            return -1;
        }
        r->p += clen;
    } else {
        return -1;
    }
    (*p)[n] = '\0';
    *len = n;
    return 0;
}

/* A ZSET_2 body of n members (member, 8-byte little-endian double); its
 * encoding as Redis picks it on load. NULL if malformed (NaN, duplicates). */
static dbEntry *loadZset(ir_db *db, const dbkey *k, rbuf *r, uint64_t n) {
    dbEntry *e = dbAdd(db, k, OBJ_ZSET, 0);
    size_t maxlen = 0;
    for (uint64_t i = 0; i < n; i++) {
        char *m = NULL;
        size_t mlen;
        if (getStr(r, &m, &mlen) != 0) goto bad;
        uint64_t u = 0;
        double score;
        if (r->end - r->p < 8) {
            free(m);
            goto bad;
        }
        for (int j = 0; j < 8; j++) u |= (uint64_t)r->p[j] << (8 * j);
        r->p += 8;
        memcpy(&score, &u, 8);
        int ok = !isnan(score) && zsetLoadAdd(db, e->v.coll, m, mlen, score);
        free(m);
        if (!ok) goto bad;
        if (mlen > maxlen) maxlen = mlen;
    }
    if (r->p != r->end) goto bad;
    e->v.coll->big = (long long)n > encodingLimits.zset_max_listpack_entries ||
                     (long long)maxlen > encodingLimits.zset_max_listpack_value;
    return e;
bad:
    dbDeleteEntry(db, e);
    return NULL;
}

/* Build the value of the payload under key k (absent); NULL if malformed. */
static dbEntry *loadValue(ir_db *db, const dbkey *k, rbuf *r) {
    if (r->p >= r->end) return NULL;
    unsigned char type = *r->p++;
    char *a = NULL, *b = NULL;
    size_t alen, blen;
    if (type == RDB_TYPE_STRING) {
        if (getStr(r, &a, &alen) != 0 || r->p != r->end) {
            free(a);
            return NULL;
        }
        dbEntry *e = dbAdd(db, k, OBJ_STRING, alen + 1 <= DB_EMBED_MAX ? alen + 1 : 0);
        strSetValue(db, e, a, alen, 0);
        free(a);
        return e;
    }
    if (type == RDB_TYPE_STREAM_IR) {
        size_t used;
        const char *err;
        stream *s = streamDeserialize(db, r->p, (size_t)(r->end - r->p), &used, &err);
        if (!s) return NULL;
        if (used != (size_t)(r->end - r->p)) {
            streamFree(db, s);
            return NULL;
        }
        r->p += used;
        dbEntry *e = dbAdd(db, k, OBJ_STREAM, 0);
        e->v.stream = s;
        return e;
    }
    if (type != RDB_TYPE_LIST && type != RDB_TYPE_SET && type != RDB_TYPE_HASH &&
        type != RDB_TYPE_ZSET_2)
        return NULL;
    uint64_t n;
    int enc;
    if (getLen(r, &n, &enc) != 0 || enc != -1 || n == 0) return NULL; /* Redis refuses empty ones */
    if (type == RDB_TYPE_ZSET_2) return loadZset(db, k, r, n);
    dbEntry *e = dbAdd(db, k, type == RDB_TYPE_LIST ? OBJ_LIST : type == RDB_TYPE_SET ? OBJ_SET
                                                                                     : OBJ_HASH, 0);
    for (uint64_t i = 0; i < n; i++) {
        a = b = NULL;
        if (getStr(r, &a, &alen) != 0 || (type == RDB_TYPE_HASH && getStr(r, &b, &blen) != 0))
            goto bad;
        if (type == RDB_TYPE_LIST) {
            listPush(db, &e->v.list, a, alen, 0);
            continue;
        }
        dbColl *co = e->v.coll;
        if (collFind(co, a, alen)) goto bad; /* duplicate members or fields */
        collAdd(db, co, a, alen, b, b ? blen : 0);
        /* the encoding OBJECT ENCODING reports, as t_set.c and t_hash.c decide it */
        long long iv;
        if (type == RDB_TYPE_SET && !string2ll(a, alen, &iv)) collSetBig(db, co);
        if (type == RDB_TYPE_HASH && ((long long)alen > encodingLimits.hash_max_listpack_value ||
                                      (long long)blen > encodingLimits.hash_max_listpack_value))
            collSetBig(db, co);
        long long max = type == RDB_TYPE_SET ? encodingLimits.set_max_intset_entries
                                             : encodingLimits.hash_max_listpack_entries;
        if (!co->big && (long long)dictSize(&co->d) > max) collSetBig(db, co);
        free(a);
        free(b);
    }
    if (r->p == r->end) return e;
    a = b = NULL;
bad:
    free(a);
    free(b);
    dbDeleteEntry(db, e);
    return NULL;
}

/* RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency] */
void restoreCommand(client *c) {
    ir_db *db = dbFor(c);
    int replace = 0, absttl = 0;
    long long idle = -1, freq = -1, ttl;
    for (int j = 4; j < c->argc; j++) {
        int more = c->argc - j - 1;
        if (argEq(c, j, "replace")) {
            replace = 1;
        } else if (argEq(c, j, "absttl")) {
            absttl = 1;
        } else if (argEq(c, j, "idletime") && more >= 1 && freq == -1) {
            if (getLongLongFromArg(c, j + 1, &idle) != 0) return;
            if (idle < 0) {
                addReplyError(c, "Invalid IDLETIME value, must be >= 0");
                return;
            }
            j++;
        } else if (argEq(c, j, "freq") && more >= 1 && idle == -1) {
            if (getLongLongFromArg(c, j + 1, &freq) != 0) return;
            if (freq < 0 || freq > 255) {
                addReplyError(c, "Invalid FREQ value, must be >= 0 and <= 255");
                return;
            }
            j++;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    dbkey k = argKey(db, c, 1);
    dbEntry *old = lookupKey(db, &k);
    if (!replace && old) {
        addReplyError(c, "-BUSYKEY Target key name already exists.");
        return;
    }
    if (getLongLongFromArg(c, 2, &ttl) != 0) return;
    if (ttl < 0) {
        addReplyError(c, "Invalid TTL value, must be >= 0");
        return;
    }
    const unsigned char *p = (const unsigned char *)c->argv[3].ptr;
    size_t len = c->argv[3].len;
    uint64_t crc = 0;
    for (int i = 0; len >= 10 && i < 8; i++) crc |= (uint64_t)p[len - 8 + i] << (8 * i);
    if (len < 10 || (p[len - 10] | (p[len - 9] << 8)) > RDB_VERSION ||
        crc64Jones(0, p, len - 8) != crc) {
        addReplyError(c, "DUMP payload version or checksum are wrong");
        return;
    }
    /* built in a database of its own, so a malformed payload changes nothing */
    ir_db *scratch = dbNew();
    dbkey sk = dbKey(scratch, k.p, k.len);
    rbuf r = {p, p + len - 10};
    notifyNoNewKey = 1; /* the scratch key is not the keyspace's: "new" comes below */
    dbEntry *e = loadValue(scratch, &sk, &r);
    notifyNoNewKey = 0;
    if (!e) {
        dbFree(scratch);
        addReplyError(c, "Bad data format");
        return;
    }
    if (ttl && !absttl) ttl += dbNow(db);
    if (ttl && ttl <= dbNow(db)) { /* already expired: only the deletion happens */
        dbFree(scratch); /* the value never enters the keyspace ("new" is not sent) */
        if (old) { /* as Redis: the replaced key's deletion is what replicas see */
            dbDeleteEntry(db, old);
            signalModifiedKey(c, db, k.p, k.len);
            notifyKeyspaceEvent(NOTIFY_GENERIC, "del", k.p, k.len, db->id);
            replRewriteDel(c, (int)repl_lazy_server_del);
        } else {
            replPrevent(c);
        }
        addReplyStr(c, shared.ok);
        return;
    }
    if (old) dbDeleteEntry(db, old);
    e = dbRekey(scratch, e, db, &k);
    dbFree(scratch);
    notifyKeyspaceEvent(NOTIFY_NEW, "new", k.p, k.len, db->id);
    if (ttl) setExpire(db, e, ttl);
    if (ttl && !absttl && replActive()) {
        /* replicas get the absolute time (RESTORE key <unix ms> payload ... ABSTTL),
         * as Redis propagates it, so a late replica does not extend the TTL */
        ir_str *argv = malloc(((size_t)c->argc + 1) * sizeof(*argv));
        if (!argv) abort();
        char num[24];
        for (int i = 0; i < c->argc; i++) argv[i] = replArg(c, i);
        argv[2] = (ir_str){num, (size_t)ll2string(num, sizeof(num), ttl)};
        argv[c->argc] = IR_STR("ABSTTL");
        replRewrite(c, c->argc + 1, argv);
        free(argv);
    }
    if (idle > 0) {
        uint64_t now_s = (uint64_t)dbNow(db) / 1000;
        e->lru = (uint32_t)(now_s > (uint64_t)idle ? now_s - (uint64_t)idle : 0);
    }
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "restore", k.p, k.len, db->id);
    if (e->type == OBJ_LIST || e->type == OBJ_ZSET || e->type == OBJ_STREAM) signalKeyAsReady(db, k.p, k.len);
    addReplyStr(c, shared.ok);
}
