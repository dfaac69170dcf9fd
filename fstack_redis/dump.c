/* dump.c - DUMP and RESTORE with Redis's payload format: one value in RDB
 * serialization, the RDB version (2 bytes, little-endian) and a CRC-64 (Jones,
 * as Redis's crc64) of everything before it (8 bytes, little-endian).
 *
 * DUMP writes the plain RDB types every Redis loads: 0 string, 1 list, 2 set,
 * 4 hash, with raw length-prefixed strings. RESTORE reads those, with the
 * integer and LZF string encodings Redis writes for strings, so a string
 * DUMPed by Redis restores here; Redis's compact encodings of lists, sets and
 * hashes (quicklist, intset, listpack) are not read: "Bad data format".
 * Streams are the exception: DUMP writes and RESTORE reads Redis's own
 * listpack stream encoding (types 15 and 19), so a stream payload moves
 * between inreplay and Redis both ways.
 *
 * The writing is rdb.c's (the same value encoder as the replication image,
 * one CRC-64 table); this file keeps only the reading.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "db.h"
#include "db_internal.h"
#include "functions.h"
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
    free(b.p);
}

/* ---- reading -------------------------------------------------------------- */

typedef struct rbuf {
    const unsigned char *p, *end;
    int inner; /* a value inside an image: more follows it (a payload ends with its value) */
    /* what the values may still take beyond their own bytes: a stream's
     * entries copy their node's master fields, so a small node can expand to
     * (entries x fields) bytes; past this the payload is refused */
    uint64_t room;
} rbuf;

/* The room for r: the machine's physical memory less what the server uses
 * (unbounded when the machine does not say). */
static uint64_t loadRoom(const ir_server *s) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0) return UINT64_MAX;
    uint64_t phys = (uint64_t)pages * (uint64_t)size, used = serverUsedMemory(s);
    return phys > used ? phys - used : 0;
}

/* The bytes left to read: what bounds every length the payload declares. A
 * string of n bytes needs n of them, a collection of n elements at least n
 * (each element is one string or more), so a lying length is refused before
 * anything is allocated by it. */
static uint64_t left(const rbuf *r) { return (uint64_t)(r->end - r->p); }

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

/* A count of elements at least `each` bytes apiece: -1 if the rest of the
 * payload cannot hold that many, or past the end. */
static int getCount(rbuf *r, uint64_t *n, uint64_t each) {
    int enc;
    if (getLen(r, n, &enc) != 0 || enc != -1 || *n > left(r) / each) return -1;
    return 0;
}

/* The most one byte of LZF input decodes to: a long back reference, 3 bytes,
 * copies 7 + 255 + 2 = 264. */
#define LZF_MAX_RATIO 88

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
        if (left(r) < n) return -1;
        *p = dbMalloc(n + 1);
        memcpy(*p, r->p, n);
        r->p += n;
    } else if (enc <= RDB_ENC_INT32) {
        int bytes = 1 << enc;
        if (r->end - r->p < bytes) return -1;
        uint32_t u = 0;
        for (int i = 0; i < bytes; i++) u |= (uint32_t)r->p[i] << (8 * i);
        r->p += bytes;
        long long v = enc == RDB_ENC_INT8    ? (int8_t)u
                      : enc == RDB_ENC_INT16 ? (int16_t)u
                                             : (int32_t)u;
        *p = dbMalloc(24);
        n = (uint64_t)ll2string(*p, 24, v);
    } else if (enc == RDB_ENC_LZF) {
        uint64_t clen;
        int e2;
        if (getLen(r, &clen, &e2) != 0 || e2 != -1 || getLen(r, &n, &e2) != 0 || e2 != -1 ||
            left(r) < clen || n > ((uint64_t)1 << 32) || n > clen * LZF_MAX_RATIO)
            return -1; /* the output is sized by n: only what clen bytes can decode to */
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

int rdbReadString(const unsigned char **p, const unsigned char *end, char **out, size_t *len) {
    rbuf r = {*p, end, 0, UINT64_MAX}; /* a string: no more than its bytes say */
    if (getStr(&r, out, len) != 0) return -1;
    *p = r.p;
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
    if (!r->inner && r->p != r->end) goto bad;
    e->v.coll->big = (long long)n > encodingLimits.zset_max_listpack_entries ||
                     (long long)maxlen > encodingLimits.zset_max_listpack_value;
    return e;
bad:
    dbDeleteEntry(db, e);
    return NULL;
}

/* ---- streams: Redis's listpack encoding (RDB_TYPE_STREAM_LISTPACKS 15 and _2 19) ---- */

/* One listpack element: an integer (*isint) or a string (*p, *len). 0, or -1 if malformed. */
static int lpNextElem(const unsigned char **pp, const unsigned char *end, int *isint, int64_t *v,
                      const char **p, size_t *len) {
    const unsigned char *q = *pp;
    if (q >= end) return -1;
    unsigned b = *q;
    size_t enc, dlen = 0;
    *isint = 1;
    if ((b & 0x80) == 0) {
        *v = b & 0x7F;
        enc = 1;
    } else if ((b & 0xC0) == 0x80) {
        dlen = b & 0x3F;
        enc = 1;
        *isint = 0;
    } else if ((b & 0xE0) == 0xC0) {
        if (end - q < 2) return -1;
        uint64_t u = ((uint64_t)(b & 0x1F) << 8) | q[1];
        *v = u >= 4096 ? (int64_t)u - 8192 : (int64_t)u;
        enc = 2;
    } else if ((b & 0xF0) == 0xE0) {
        if (end - q < 2) return -1;
        dlen = ((size_t)(b & 0x0F) << 8) | q[1];
        enc = 2;
        *isint = 0;
    } else if (b == 0xF0) {
        if (end - q < 5) return -1;
        dlen = (size_t)q[1] | (size_t)q[2] << 8 | (size_t)q[3] << 16 | (size_t)q[4] << 24;
        enc = 5;
        *isint = 0;
    } else if (b >= 0xF1 && b <= 0xF4) {
        int n = b == 0xF1 ? 2 : b == 0xF2 ? 3 : b == 0xF3 ? 4 : 8;
        if (end - q < 1 + n) return -1;
        uint64_t u = 0;
        for (int i = 0; i < n; i++) u |= (uint64_t)q[1 + i] << (8 * i);
        if (n < 8 && (u >> (8 * n - 1))) u |= ~(uint64_t)0 << (8 * n); /* sign */
        *v = (int64_t)u;
        enc = (size_t)n + 1;
    } else {
        return -1;
    }
    size_t l = enc + dlen;
    size_t bl = l <= 127 ? 1 : l < 16383 ? 2 : l < 2097151 ? 3 : l < 268435455 ? 4 : 5;
    if ((size_t)(end - q) < l + bl) return -1;
    *p = (const char *)q + enc;
    *len = dlen;
    *pp = q + l + bl;
    return 0;
}

static int lpInt64(const unsigned char **pp, const unsigned char *end, int64_t *v) {
    int isint;
    const char *p;
    size_t len;
    if (lpNextElem(pp, end, &isint, v, &p, &len) != 0) return -1;
    if (isint) return 0;
    long long ll;
    if (!string2ll(p, len, &ll)) return -1;
    *v = ll;
    return 0;
}

/* A listpack string (an integer element as its decimal text) appended to the
 * entry buffer as t_stream.c lays it out: u32 length, bytes. Without buf, only
 * *size grows (what the entry will take). */
static int lpAppendField(const unsigned char **pp, const unsigned char *end, char **buf,
                         size_t *cap, size_t *size) {
    int isint;
    int64_t v;
    const char *p;
    size_t len;
    char num[24];
    if (lpNextElem(pp, end, &isint, &v, &p, &len) != 0) return -1;
    if (isint) {
        len = (size_t)ll2string(num, sizeof(num), v);
        p = num;
    }
    if (!buf) {
        *size += 4 + len;
        return 0;
    }
    if (*size + 4 + len > *cap) {
        size_t nc = *cap ? *cap : 256;
        while (nc < *size + 4 + len) nc *= 2;
        *buf = ir_xrealloc(*buf, nc);
        *cap = nc;
    }
    uint32_t l = (uint32_t)len;
    memcpy(*buf + *size, &l, 4);
    memcpy(*buf + *size + 4, p, len);
    *size += 4 + len;
    return 0;
}

static void decodeRawID(const unsigned char *k, streamID *id) {
    id->ms = id->seq = 0;
    for (int i = 0; i < 8; i++) {
        id->ms = (id->ms << 8) | k[i];
        id->seq = (id->seq << 8) | k[8 + i];
    }
}

/* One node's listpack into s. -1 if malformed. With room, nothing is loaded
 * or copied: the bytes its entries would take (each its own copy of its
 * fields, the master's ones too) come off *room, -1 if it has not that many. */
static int loadStreamListpack(ir_db *db, stream *s, const streamID *master, const char *lp,
                              size_t lplen, char **buf, size_t *cap, uint64_t *room) {
    const unsigned char *q = (const unsigned char *)lp, *end = q + lplen;
    if (lplen < 7 || end[-1] != 0xFF) return -1;
    uint32_t total =
        (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    if (total != lplen) return -1;
    q += 6;
    end -= 1; /* the terminator */
    int64_t count, deleted, nmf, zero;
    if (lpInt64(&q, end, &count) || lpInt64(&q, end, &deleted) || lpInt64(&q, end, &nmf) ||
        count < 0 || deleted < 0 || nmf < 0 || count + deleted == 0 || nmf > (int64_t)lplen)
        return -1;
    const unsigned char *mf = q; /* the master fields */
    for (int64_t i = 0; i < nmf; i++) {
        int isint;
        int64_t v;
        const char *p;
        size_t len;
        if (lpNextElem(&q, end, &isint, &v, &p, &len) != 0) return -1;
    }
    if (lpInt64(&q, end, &zero) || zero != 0) return -1;
    int first = 1;
    int64_t live = 0;
    streamID last = *master;
    for (int64_t n = 0; n < count + deleted; n++) {
        int64_t flags, msd, seqd, nf, lpcount;
        if (lpInt64(&q, end, &flags) || lpInt64(&q, end, &msd) || lpInt64(&q, end, &seqd))
            return -1;
        streamID id = {master->ms + (uint64_t)msd, master->seq + (uint64_t)seqd};
        size_t size = 0;
        if (flags & 2) { /* SAMEFIELDS: the master's fields, then the values */
            nf = nmf;
            const unsigned char *f = mf;
            for (int64_t i = 0; i < nf; i++)
                if (lpAppendField(&f, end, buf, cap, &size) ||
                    lpAppendField(&q, end, buf, cap, &size))
                    return -1;
        } else {
            if (lpInt64(&q, end, &nf) || nf < 0 || nf > (int64_t)lplen) return -1;
            for (int64_t i = 0; i < nf * 2; i++)
                if (lpAppendField(&q, end, buf, cap, &size)) return -1;
        }
        if (lpInt64(&q, end, &lpcount)) return -1;
        last = id;
        if (flags & 1) continue; /* deleted: it still counts in the node */
        if (nf == 0) return -1;
        if (room) {
            if (*room < (uint64_t)size + sizeof(sentry)) return -1;
            *room -= (uint64_t)size + sizeof(sentry);
            live++;
            continue;
        }
        if (streamLoadEntry(db, s, &id, (uint32_t)nf, *buf, (uint32_t)size, first) != 0) return -1;
        first = 0;
        live++;
    }
    if (q != end || live != count || live == 0) return -1;
    if (room) return 0;
    /* the node's last ID (deleted or not), its master ID and its exact size */
    streamLoadNodeEnd(s, &last, master, lplen, (uint32_t)count, (uint32_t)deleted);
    return 0;
}

static int getID2(rbuf *r, streamID *id) {
    int e1, e2;
    if (getLen(r, &id->ms, &e1) || e1 != -1 || getLen(r, &id->seq, &e2) || e2 != -1) return -1;
    return 0;
}

static int getRawID(rbuf *r, streamID *id) {
    if (r->end - r->p < 16) return -1;
    decodeRawID(r->p, id);
    r->p += 16;
    return 0;
}

static int getMs(rbuf *r, int64_t *ms) {
    if (r->end - r->p < 8) return -1;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u |= (uint64_t)r->p[i] << (8 * i);
    r->p += 8;
    *ms = (int64_t)u;
    return 0;
}

static dbEntry *loadStream(ir_db *db, const dbkey *k, rbuf *r, int v2) {
    stream *s = streamNew(db);
    char *buf = NULL, *key = NULL, *lp = NULL, *name = NULL;
    size_t cap = 0, klen, lplen, nlen;
    uint64_t nodes, length, ngroups;
    int enc;
    /* each count bounded by the smallest record it counts: a node's key (17
     * bytes) and listpack (8), a group's name, ID, PEL and consumer counts (5),
     * a PEL entry's ID, time and count (25), a consumer's name, seen time and
     * PEL count (10), a consumer's PEL entry (16) */
    if (getCount(r, &nodes, 25)) goto bad;
    /* Two passes over the nodes: the first prices what their entries take
     * here (a node's master fields are written once, copied into every entry
     * that shares them: a small payload can ask for gigabytes), and past the
     * room nothing is loaded; the second loads them. */
    const unsigned char *nodes_at = r->p;
    for (int pass = 0; pass < 2; pass++) {
        r->p = nodes_at;
        for (uint64_t i = 0; i < nodes; i++) {
            if (getStr(r, &key, &klen) || klen != 16 || getStr(r, &lp, &lplen)) goto bad;
            streamID master;
            decodeRawID((const unsigned char *)key, &master);
            if (loadStreamListpack(db, s, &master, lp, lplen, pass ? &buf : NULL, &cap,
                                   pass ? NULL : &r->room))
                goto bad;
            free(key);
            free(lp);
            key = lp = NULL;
        }
    }
    streamID last, first, maxdel = {0, 0};
    uint64_t added;
    if (getLen(r, &length, &enc) || enc != -1 || length != streamLength(s) || getID2(r, &last))
        goto bad;
    if (v2) {
        if (getID2(r, &first) || getID2(r, &maxdel) || getLen(r, &added, &enc) || enc != -1)
            goto bad;
    } else {
        added = length; /* as Redis 7.0 loads a 6.x stream */
    }
    streamLoadMeta(s, &last, &maxdel, added);
    if (getCount(r, &ngroups, 5)) goto bad;
    for (uint64_t gi = 0; gi < ngroups; gi++) {
        streamID glast;
        uint64_t er = 0, npel, ncons;
        if (getStr(r, &name, &nlen) || getID2(r, &glast)) goto bad;
        if (v2 && (getLen(r, &er, &enc) || enc != -1)) goto bad;
        sgroup *g = streamLoadGroup(db, s, name, nlen, &glast, (long long)er, !v2);
        free(name);
        name = NULL;
        if (!g || getCount(r, &npel, 25)) goto bad;
        for (uint64_t pi = 0; pi < npel; pi++) {
            streamID id;
            int64_t t;
            uint64_t cnt;
            if (getRawID(r, &id) || getMs(r, &t) || getLen(r, &cnt, &enc) || enc != -1 ||
                streamLoadPending(db, s, g, &id, t, cnt))
                goto bad;
        }
        if (getCount(r, &ncons, 10)) goto bad;
        for (uint64_t ci = 0; ci < ncons; ci++) {
            int64_t seen;
            uint64_t cpel;
            if (getStr(r, &name, &nlen) || getMs(r, &seen)) goto bad;
            sconsumer *cn = streamLoadConsumer(db, s, g, name, nlen, seen);
            free(name);
            name = NULL;
            if (!cn || getCount(r, &cpel, 16)) goto bad;
            for (uint64_t pi = 0; pi < cpel; pi++) {
                streamID id;
                if (getRawID(r, &id) || streamLoadOwn(g, cn, &id)) goto bad;
            }
        }
    }
    if ((!r->inner && r->p != r->end) || streamLoadCheck(s)) goto bad;
    free(buf);
    dbEntry *e = dbAdd(db, k, OBJ_STREAM, 0);
    e->v.stream = s;
    return e;
bad:
    free(buf);
    free(key);
    free(lp);
    free(name);
    streamFree(db, s);
    return NULL;
}

/* Build the value of the payload under key k (absent); NULL if malformed. */
static dbEntry *loadTyped(ir_db *db, const dbkey *k, rbuf *r, unsigned char type);
static dbEntry *loadValue(ir_db *db, const dbkey *k, rbuf *r) {
    if (r->p >= r->end) return NULL;
    unsigned char type = *r->p++;
    return loadTyped(db, k, r, type);
}

/* The value after its type byte (an image has the key between the two). */
static dbEntry *loadTyped(ir_db *db, const dbkey *k, rbuf *r, unsigned char type) {
    char *a = NULL, *b = NULL;
    size_t alen, blen;
    if (type == RDB_TYPE_STRING) {
        if (getStr(r, &a, &alen) != 0 || (!r->inner && r->p != r->end)) {
            free(a);
            return NULL;
        }
        dbEntry *e = dbAdd(db, k, OBJ_STRING, alen + 1 <= DB_EMBED_MAX ? alen + 1 : 0);
        strSetValue(db, e, a, alen, 0);
        free(a);
        return e;
    }
    if (type == RDB_TYPE_STREAM_LISTPACKS || type == RDB_TYPE_STREAM_LISTPACKS_2)
        return loadStream(db, k, r, type == RDB_TYPE_STREAM_LISTPACKS_2);
    if (type != RDB_TYPE_LIST && type != RDB_TYPE_SET && type != RDB_TYPE_HASH &&
        type != RDB_TYPE_ZSET_2)
        return NULL;
    uint64_t n;
    /* an element is a string (1 byte at least), a field and its value (2), a
     * member and its 8-byte score (9) */
    uint64_t each = type == RDB_TYPE_HASH ? 2 : type == RDB_TYPE_ZSET_2 ? 9 : 1;
    if (getCount(r, &n, each) != 0 || n == 0) return NULL; /* Redis refuses empty ones */
    if (type == RDB_TYPE_ZSET_2) return loadZset(db, k, r, n);
    dbEntry *e = dbAdd(db, k,
                       type == RDB_TYPE_LIST  ? OBJ_LIST
                       : type == RDB_TYPE_SET ? OBJ_SET
                                              : OBJ_HASH,
                       0);
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
    if (r->inner || r->p == r->end) return e;
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
    rbuf r = {p, p + len - 10, 0, loadRoom(c->srv)};
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
        dbFree(scratch);           /* the value never enters the keyspace ("new" is not sent) */
        if (old) {                 /* as Redis: the replaced key's deletion is what replicas see */
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
    if (e->type == OBJ_LIST || e->type == OBJ_ZSET || e->type == OBJ_STREAM)
        signalKeyAsReady(db, k.p, k.len);
    addReplyStr(c, shared.ok);
}

/* ---- a whole image (an AOF's RDB preamble) --------------------------------- */

#define OP_FUNCTION2 0xF5
#define OP_IDLE 0xF8
#define OP_FREQ 0xF9
#define OP_AUX 0xFA
#define OP_RESIZEDB 0xFB
#define OP_EXPIRETIME_MS 0xFC
#define OP_EXPIRETIME 0xFD
#define OP_SELECTDB 0xFE
#define OP_EOF 0xFF

static int imageError(char *err, size_t errlen, const char *why) {
    snprintf(err, errlen, "%s", why);
    return -1;
}

int rdbLoadImage(ir_server *s, const unsigned char *p, size_t len, size_t *used, char *err,
                 size_t errlen) {
    if (len < 9 || memcmp(p, "REDIS", 5) != 0)
        return imageError(err, errlen, "Wrong signature trying to load DB from file");
    int ver = 0;
    for (int i = 5; i < 9; i++) {
        if (p[i] < '0' || p[i] > '9') return imageError(err, errlen, "Wrong RDB version");
        ver = ver * 10 + (p[i] - '0');
    }
    if (ver < 1 || ver > RDB_VERSION)
        return imageError(err, errlen, "Can't handle RDB format version");
    rbuf r = {p + 9, p + len, 1, loadRoom(s)};
    ir_db *db = dbsAt(s, 0);
    int64_t expire = -1;
    char **codes = NULL;
    size_t *lens = NULL, ncodes = 0;
    int rc = -1;
    char *a = NULL, *b = NULL;
    size_t alen, blen;
    for (;;) {
        if (r.p >= r.end) {
            imageError(err, errlen, "Short read or OOM loading DB. Unrecoverable error, aborting");
            goto out;
        }
        unsigned char type = *r.p++;
        uint64_t n, m;
        int enc;
        if (type == OP_EOF) break;
        if (type == OP_EXPIRETIME_MS || type == OP_EXPIRETIME) {
            int bytes = type == OP_EXPIRETIME_MS ? 8 : 4;
            if (r.end - r.p < bytes) goto bad;
            uint64_t v = 0;
            for (int i = 0; i < bytes; i++) v |= (uint64_t)r.p[i] << (8 * i);
            r.p += bytes;
            expire = type == OP_EXPIRETIME_MS ? (int64_t)v : (int64_t)v * 1000;
            continue;
        }
        if (type == OP_SELECTDB) {
            if (getLen(&r, &n, &enc) || enc != -1) goto bad;
            if (n >= (uint64_t)dbsCount(s)) {
                imageError(err, errlen,
                           "FATAL: Data file was created with a Redis server configured to handle "
                           "more databases than this one");
                goto out;
            }
            db = dbsAt(s, (int)n);
            continue;
        }
        if (type == OP_RESIZEDB) {
            if (getLen(&r, &n, &enc) || enc != -1 || getLen(&r, &m, &enc) || enc != -1) goto bad;
            continue;
        }
        if (type == OP_AUX) {
            if (getStr(&r, &a, &alen) || getStr(&r, &b, &blen)) goto bad;
            free(a);
            free(b);
            a = b = NULL;
            continue;
        }
        if (type == OP_IDLE) {
            if (getLen(&r, &n, &enc) || enc != -1) goto bad;
            continue;
        }
        if (type == OP_FREQ) {
            if (r.p >= r.end) goto bad;
            r.p++;
            continue;
        }
        if (type == OP_FUNCTION2) {
            if (getStr(&r, &a, &alen)) goto bad;
            char **nc = realloc(codes, (ncodes + 1) * sizeof(*nc));
            size_t *nl = nc ? realloc(lens, (ncodes + 1) * sizeof(*nl)) : NULL;
            if (nc) codes = nc;
            if (!nc || !nl) goto bad;
            lens = nl;
            codes[ncodes] = a;
            lens[ncodes++] = alen;
            a = NULL;
            continue;
        }
        /* a key: type, key, value */
        if (getStr(&r, &a, &alen)) goto bad;
        dbkey k = dbKey(db, a, alen);
        if (dictFind(&db->d, k.p, k.len, k.h)) {
            snprintf(err, errlen, "RDB has duplicated key '%.128s' in DB %d", a, db->id);
            goto out;
        }
        notifyNoNewKey = 1;
        dbEntry *e = loadTyped(db, &k, &r, type);
        notifyNoNewKey = 0;
        if (!e) goto bad;
        if (expire != -1) setExpire(db, e, expire);
        if (e->type == OBJ_LIST || e->type == OBJ_ZSET || e->type == OBJ_STREAM)
            signalKeyAsReady(db, k.p, k.len);
        expire = -1;
        free(a);
        a = NULL;
    }
    if (ver >= 5) {
        if (r.end - r.p < 8) goto bad;
        uint64_t want = 0;
        for (int i = 0; i < 8; i++) want |= (uint64_t)r.p[i] << (8 * i);
        if (want && crc64Jones(0, p, (size_t)(r.p - p)) != want) {
            imageError(err, errlen, "Wrong RDB checksum. Aborting now.");
            goto out;
        }
        r.p += 8;
    }
    if (ncodes) {
        struct ir_functions *set = functionsPrepare(s, codes, lens, ncodes, err, errlen);
        if (!set) goto out;
        functionsInstall(s, set);
    }
    *used = (size_t)(r.p - p);
    rc = 0;
    goto out;
bad:
    imageError(err, errlen, "Bad data format in the RDB image");
out:
    free(a);
    free(b);
    for (size_t i = 0; i < ncodes; i++) free(codes[i]);
    free(codes);
    free(lens);
    return rc;
}
