/* t_hll.c - HyperLogLog over string values: PFADD, PFCOUNT, PFMERGE,
 * PFDEBUG, PFSELFTEST, byte for byte in Redis 7.0's representation so that
 * GET/SET/DUMP of an HLL move between inreplay and Redis.
 *
 * The value (Redis's format, as hyperloglog.c documents it):
 *   header    16 bytes: "HYLL", the encoding (0 dense, 1 sparse), 3 unused
 *             bytes, the cached cardinality as 64-bit little endian whose top
 *             bit set means "stale, recompute".
 *   dense     16384 registers of 6 bits, register i at bit 6i counted from
 *             the least significant bit of byte 0 upwards: 12288 bytes.
 *   sparse    run-length opcodes: 00xxxxxx (ZERO: x+1 zero registers),
 *             01xxxxxx yyyyyyyy (XZERO: 14-bit length + 1), 1vvvvvxx (VAL:
 *             x+1 registers of value v+1). A new HLL is XZERO:16384.
 * An element's register is the low 14 bits of its 64-bit MurmurHash2
 * (seed 0xadc83b19), its value the position of the first 1 bit above them
 * (1-based, at most 51). A register too big for VAL (> 32) or a sparse form
 * longer than hll-sparse-max-bytes turns the value dense for good.
 *
 * Sparse updates edit the opcode holding the register in place (split into
 * up to three opcodes, then merge equal neighbouring VALs within a window of
 * five opcodes), the same edits Redis makes, so both servers produce the
 * same bytes for the same commands. The cardinality is Ertl's improved raw
 * estimator over the register histogram ("New cardinality estimation
 * algorithms for HyperLogLog sketches", arXiv:1702.01284), computed in the
 * order Redis computes it so the cached value matches.
 *
 * Nothing here allocates per element: registers of merges live on the stack
 * (16 KB), and a value grows through strWritable's doubling buffer.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "replication.h"
#include "server.h"

#define HLL_P 14
#define HLL_Q (64 - HLL_P)
#define HLL_REGS (1 << HLL_P)
#define HLL_HDR 16
#define HLL_DENSE_BYTES (HLL_REGS * 6 / 8)
#define HLL_DENSE_SIZE (HLL_HDR + HLL_DENSE_BYTES)
#define HLL_ENC_DENSE 0
#define HLL_ENC_SPARSE 1
#define HLL_VAL_MAX 32 /* the largest register a VAL opcode holds */
#define HLL_VAL_MAXLEN 4
#define HLL_ZERO_MAXLEN 64
#define HLL_XZERO_MAXLEN 16384
#define HLL_EMPTY_SPARSE (HLL_HDR + 2)

static const char hll_invalid_err[] = "-INVALIDOBJ Corrupted HLL object detected";
static const char hll_type_err[] = "-WRONGTYPE Key is not a valid HyperLogLog string value.";

/* ---- hashing ---------------------------------------------------------------- */

/* MurmurHash64A (Austin Appleby's public-domain MurmurHash2, 64-bit), the
 * input read as little-endian words on every host, as Redis reads it. */
static uint64_t murmur64a(const uint8_t *p, size_t len, uint64_t seed) {
    const uint64_t m = 0xc6a4a7935bd1e995ULL;
    uint64_t h = seed ^ ((uint64_t)len * m);
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++, p += 8) {
        uint64_t k = 0;
        for (int b = 7; b >= 0; b--) k = (k << 8) | p[b];
        k *= m;
        k ^= k >> 47;
        k *= m;
        h = (h ^ k) * m;
    }
    size_t rest = len & 7;
    if (rest) {
        uint64_t t = 0;
        for (size_t b = rest; b-- > 0;) t = (t << 8) | p[b];
        h = (h ^ t) * m;
    }
    h ^= h >> 47;
    h *= m;
    h ^= h >> 47;
    return h;
}

/* The register an element falls in and the value it offers (1..51). */
static int hllHash(const void *ele, size_t len, long *reg) {
    uint64_t h = murmur64a(ele, len, 0xadc83b19ULL);
    *reg = (long)(h & (HLL_REGS - 1));
    h = (h >> HLL_P) | (UINT64_C(1) << HLL_Q); /* a 1 bit ends the run at Q + 1 */
    return __builtin_ctzll(h) + 1;
}

/* ---- dense registers ------------------------------------------------------------ */

static inline int denseGet(const uint8_t *r, long i) {
    size_t bit = (size_t)i * 6, byte = bit >> 3;
    unsigned shift = bit & 7, v = r[byte] >> shift;
    if (shift > 2) v |= (unsigned)r[byte + 1] << (8 - shift);
    return (int)(v & 63);
}

static inline void denseSetReg(uint8_t *r, long i, int val) {
    size_t bit = (size_t)i * 6, byte = bit >> 3;
    unsigned shift = bit & 7;
    r[byte] = (uint8_t)((r[byte] & ~(63u << shift)) | ((unsigned)val << shift));
    if (shift > 2) {
        unsigned hi = 8 - shift; /* bits that spill into the next byte */
        r[byte + 1] = (uint8_t)((r[byte + 1] & ~(63u >> hi)) | ((unsigned)val >> hi));
    }
}

/* Raise register i to val: 1 if it changed. */
static int denseRaise(uint8_t *r, long i, int val) {
    if (denseGet(r, i) >= val) return 0;
    denseSetReg(r, i, val);
    return 1;
}

/* ---- sparse opcodes ------------------------------------------------------------- */

#define OP_IS_ZERO(b) (((b)&0xc0) == 0)
#define OP_IS_XZERO(b) (((b)&0xc0) == 0x40)
#define OP_IS_VAL(b) ((b)&0x80)
#define VAL_VALUE(b) ((((b) >> 2) & 0x1f) + 1)
#define VAL_LEN(b) (((b)&3) + 1)

static inline uint8_t opVal(int val, int len) {
    return (uint8_t)(0x80 | (val - 1) << 2 | (len - 1));
}

/* One opcode at p (end: the end of the opcodes; a truncated XZERO reads a
 * zero second byte, as Redis reads its string's terminator): registers
 * covered, value, bytes taken. */
static inline void opDecode(const uint8_t *p, const uint8_t *end, long *run, int *val, int *oplen) {
    if (OP_IS_ZERO(*p)) {
        *run = (*p & 0x3f) + 1, *val = 0, *oplen = 1;
    } else if (OP_IS_XZERO(*p)) {
        *run = (long)(((*p & 0x3f) << 8) | (p + 1 < end ? p[1] : 0)) + 1, *val = 0, *oplen = 2;
    } else {
        *run = VAL_LEN(*p), *val = VAL_VALUE(*p), *oplen = 1;
    }
}

/* Append the opcodes for a run of `len` zero registers (len <= 16384). */
static uint8_t *putZeros(uint8_t *n, long len) {
    if (len > HLL_ZERO_MAXLEN) {
        *n++ = (uint8_t)(0x40 | ((len - 1) >> 8));
        *n++ = (uint8_t)((len - 1) & 0xff);
    } else {
        *n++ = (uint8_t)(len - 1);
    }
    return n;
}

/* Walk the sparse opcodes of s[0, len): each register run goes to fn.
 * 0 if they cover exactly the 16384 registers, -1 if not (corrupt). */
typedef void (*runFn)(void *ctx, long first, long run, int val);
static int sparseWalk(const uint8_t *s, size_t len, runFn fn, void *ctx) {
    const uint8_t *p = s, *end = s + len;
    long idx = 0;
    while (p < end) {
        long run;
        int val, oplen;
        opDecode(p, end, &run, &val, &oplen);
        if (run + idx > HLL_REGS) return -1;
        fn(ctx, idx, run, val);
        idx += run;
        p += oplen;
    }
    return idx == HLL_REGS ? 0 : -1;
}

static void runToRegs(void *ctx, long first, long run, int val) {
    if (val) memset((uint8_t *)ctx + first, val, (size_t)run);
}

static void runMaxRegs(void *ctx, long first, long run, int val) {
    uint8_t *m = (uint8_t *)ctx + first;
    for (long i = 0; i < run; i++)
        if (m[i] < val) m[i] = (uint8_t)val;
}

static void runHisto(void *ctx, long first, long run, int val) {
    (void)first;
    ((int *)ctx)[val] += (int)run;
}

/* Raise register `index` of the sparse opcodes s[0, *len) to `count`, with
 * room for 3 more bytes after them. 1 changed (*len updated), 0 no change,
 * -1 corrupt, 2 when the value must go dense first (a register over 32, or
 * longer than maxbytes with the header): nothing was changed then. */
static int sparseRaise(uint8_t *s, size_t *len, long index, int count, size_t maxbytes) {
    if (count > HLL_VAL_MAX) return 2;
    uint8_t *p = s, *end = s + *len, *prev = NULL;
    long first = 0, run = 0;
    int val = 0, oplen = 1;
    while (p < end) { /* the opcode holding the register */
        opDecode(p, end, &run, &val, &oplen);
        if (index <= first + run - 1) break;
        prev = p;
        p += oplen;
        first += run;
    }
    if (run == 0 || p >= end) return -1; /* the register is past the opcodes */
    int is_val = OP_IS_VAL(*p) != 0;
    if (is_val && val >= count) return 0;
    uint8_t *stop = end; /* end of the opcodes after the edit */
    if ((is_val || OP_IS_ZERO(*p)) && run == 1) {
        *p = opVal(count, 1); /* a run of one: rewrite it */
    } else { /* split: [before] VAL(count,1) [after], each side as the old opcode was */
        uint8_t seq[5], *n = seq;
        long last = first + run - 1;
        if (index > first)
            n = is_val ? (*n = opVal(val, (int)(index - first)), n + 1)
                       : putZeros(n, index - first);
        *n++ = opVal(count, 1);
        if (index < last)
            n = is_val ? (*n = opVal(val, (int)(last - index)), n + 1) : putZeros(n, last - index);
        long seqlen = n - seq, delta = seqlen - oplen;
        if (delta > 0 && *len + HLL_HDR + (size_t)delta > maxbytes) return 2;
        uint8_t *next = p + oplen;
        if (next < end) memmove(next + delta, next, (size_t)(end - next));
        memcpy(p, seq, (size_t)seqlen); /* (an XZERO cut short by the end loses its last byte, as
                                           in Redis: at most p + 4 <= end + 3, inside the room) */
        stop = end + delta;
    }
    /* merge equal neighbouring VALs, scanning five opcodes from the one before */
    p = prev ? prev : s;
    for (int scan = 5; p < stop && scan-- > 0;) {
        if (!OP_IS_VAL(*p)) {
            p += OP_IS_XZERO(*p) ? 2 : 1;
            continue;
        }
        if (p + 1 < stop && OP_IS_VAL(p[1]) && VAL_VALUE(*p) == VAL_VALUE(p[1]) &&
            VAL_LEN(*p) + VAL_LEN(p[1]) <= HLL_VAL_MAXLEN) {
            p[1] = opVal(VAL_VALUE(*p), VAL_LEN(*p) + VAL_LEN(p[1]));
            memmove(p, p + 1, (size_t)(stop - p - 1));
            stop--;
            continue; /* the merged one may merge again with the next */
        }
        p++;
    }
    *len = (size_t)(stop - s);
    return 1;
}

/* ---- the value ---------------------------------------------------------------- */

static inline int hllEncoding(const dbEntry *e) { return (uint8_t)e->v.str.ptr[4]; }
static inline void hllInvalidate(uint8_t *hdr) { hdr[15] |= 0x80; }

/* Redis's isHLLObjectOrReply: a string with the magic, a known encoding and,
 * dense, the exact length. 0, or -1 after replying WRONGTYPE. */
static int hllCheckOrReply(client *c, const dbEntry *e) {
    if (e->type != OBJ_STRING) {
        addReplyStr(c, shared.wrongtypeerr);
        return -1;
    }
    const uint8_t *p = (const uint8_t *)e->v.str.ptr;
    size_t len = e->v.str.len;
    if (len < HLL_HDR || memcmp(p, "HYLL", 4) != 0 || p[4] > HLL_ENC_SPARSE ||
        (p[4] == HLL_ENC_DENSE && len != HLL_DENSE_SIZE)) {
        addReplyError(c, hll_type_err);
        return -1;
    }
    return 0;
}

/* A new key holding an empty HLL (sparse, cache valid at 0). */
static dbEntry *hllCreate(ir_db *db, const dbkey *k) {
    uint8_t v[HLL_EMPTY_SPARSE] = {'H', 'Y', 'L', 'L', HLL_ENC_SPARSE};
    v[HLL_HDR] = 0x40 | ((HLL_XZERO_MAXLEN - 1) >> 8);
    v[HLL_HDR + 1] = (HLL_XZERO_MAXLEN - 1) & 0xff;
    dbEntry *e = dbAdd(db, k, OBJ_STRING, 0);
    strSetValue(db, e, v, sizeof(v), 0);
    e->flags |= DBE_ENC_RAW; /* as Redis's: never embstr */
    return e;
}

/* Turn the sparse opcodes s[0, len) into 16384 dense 6-bit registers at out
 * (12288 bytes, zeroed here). -1 if they are corrupt. */
static int sparseToDense(const uint8_t *s, size_t len, uint8_t *out) {
    uint8_t regs[HLL_REGS] = {0};
    if (sparseWalk(s, len, runToRegs, regs) != 0) return -1;
    memset(out, 0, HLL_DENSE_BYTES);
    for (long i = 0; i < HLL_REGS; i++)
        if (regs[i]) denseSetReg(out, i, regs[i]);
    return 0;
}

/* Make e's HLL dense (header kept, encoding byte changed). -1 if corrupt. */
static int hllMakeDense(ir_db *db, dbEntry *e) {
    if (hllEncoding(e) == HLL_ENC_DENSE) return 0;
    uint8_t dense[HLL_DENSE_SIZE];
    memcpy(dense, e->v.str.ptr, HLL_HDR);
    dense[4] = HLL_ENC_DENSE;
    if (sparseToDense((const uint8_t *)e->v.str.ptr + HLL_HDR, e->v.str.len - HLL_HDR,
                      dense + HLL_HDR) != 0)
        return -1;
    strSetValue(db, e, dense, sizeof(dense), 0); /* exactly sized, reused when it fits */
    e->flags |= DBE_ENC_RAW;
    return 0;
}

/* Raise register index of e's HLL to count, going dense when needed:
 * 1 changed, 0 not, -1 corrupt. */
static int hllRaise(ir_db *db, dbEntry *e, long index, int count) {
    if (hllEncoding(e) == HLL_ENC_SPARSE) {
        size_t len = e->v.str.len - HLL_HDR;
        uint8_t *p = (uint8_t *)strWritable(db, e, e->v.str.len, 3);
        int r = sparseRaise(p + HLL_HDR, &len, index, count,
                            (size_t)encodingLimits.hll_sparse_max_bytes);
        if (r != 2) {
            e->v.str.len = len + HLL_HDR;
            e->v.str.ptr[e->v.str.len] = '\0';
            if (r == 1) hllInvalidate(p); /* at once, as Redis: a later corrupt step keeps it */
            return r;
        }
        if (hllMakeDense(db, e) != 0) return -1;
    }
    return denseRaise((uint8_t *)e->v.str.ptr + HLL_HDR, index, count);
}

/* ---- cardinality ---------------------------------------------------------------- */

static double hllSigma(double x) {
    if (x == 1.) return INFINITY;
    double y = 1, z = x, prev;
    do {
        x *= x;
        prev = z;
        z += x * y;
        y += y;
    } while (prev != z);
    return z;
}

static double hllTau(double x) {
    if (x == 0. || x == 1.) return 0.;
    double y = 1.0, z = 1 - x, prev;
    do {
        x = sqrt(x);
        prev = z;
        y *= 0.5;
        z -= pow(1 - x, 2) * y;
    } while (prev != z);
    return z / 3;
}

/* The estimate from the histogram of register values (64 slots: corrupt
 * dense registers may hold up to 63). */
static uint64_t hllEstimate(const int *histo) {
    double m = HLL_REGS;
    double z = m * hllTau((m - histo[HLL_Q + 1]) / m);
    for (int j = HLL_Q; j >= 1; j--) {
        z += histo[j];
        z *= 0.5;
    }
    z += m * hllSigma(histo[0] / m);
    return (uint64_t)llroundl(0.721347520444481703680 * m * m / z); /* alpha_inf = 1 / (2 ln 2) */
}

static void denseHisto(const uint8_t *r, int *histo) {
    for (long i = 0; i < HLL_REGS; i++) histo[denseGet(r, i)]++;
}

/* The cardinality of e's HLL (checked by hllCheckOrReply); -1 if corrupt. */
static long long hllCardinality(const uint8_t *v, size_t len) {
    int histo[64] = {0};
    if (v[4] == HLL_ENC_DENSE) denseHisto(v + HLL_HDR, histo);
    else if (sparseWalk(v + HLL_HDR, len - HLL_HDR, runHisto, histo) != 0) return -1;
    return (long long)hllEstimate(histo);
}

/* max[i] = MAX(max[i], register i of v): -1 if v is corrupt. */
static int hllMergeInto(uint8_t *max, const uint8_t *v, size_t len) {
    if (v[4] == HLL_ENC_SPARSE) return sparseWalk(v + HLL_HDR, len - HLL_HDR, runMaxRegs, max);
    for (long i = 0; i < HLL_REGS; i++) {
        int r = denseGet(v + HLL_HDR, i);
        if (r > max[i]) max[i] = (uint8_t)r;
    }
    return 0;
}

/* ---- commands ------------------------------------------------------------------ */

/* PFADD key [element ...]: 1 if a register changed (or the key was made). */
void pfaddCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    int updated = 0;
    if (!e) {
        e = hllCreate(db, &k);
        updated = 1;
    } else if (hllCheckOrReply(c, e) != 0) {
        return;
    }
    for (int j = 2; j < c->argc; j++) {
        long reg;
        int count = hllHash(c->argv[j].ptr, c->argv[j].len, &reg);
        int r = hllRaise(db, e, reg, count);
        if (r < 0) {
            addReplyError(c, hll_invalid_err);
            return;
        }
        updated += r;
    }
    if (updated) {
        hllInvalidate((uint8_t *)strWritable(db, e, e->v.str.len, 0));
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_STRING, "pfadd", k.p, k.len, db->id);
    }
    c->srv->cmd_changes = updated; /* each changed register, as Redis counts them */
    addReplyStr(c, updated ? shared.cone : shared.czero);
}

/* PFCOUNT key [key ...]: one key's cardinality (cached in its header), or the
 * cardinality of the union of several. */
void pfcountCommand(client *c) {
    ir_db *db = dbFor(c);
    if (c->argc > 2) {
        uint8_t max[HLL_REGS] = {0};
        for (int j = 1; j < c->argc; j++) {
            dbkey k = argKey(db, c, j);
            dbEntry *e = lookupKey(db, &k);
            if (!e) continue; /* an empty HLL */
            if (hllCheckOrReply(c, e) != 0) return;
            if (hllMergeInto(max, (const uint8_t *)e->v.str.ptr, e->v.str.len) != 0) {
                addReplyError(c, hll_invalid_err);
                return;
            }
        }
        int histo[64] = {0};
        for (long i = 0; i < HLL_REGS; i++) histo[max[i]]++;
        addReplyLongLong(c, (long long)hllEstimate(histo));
        return;
    }
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    if (hllCheckOrReply(c, e) != 0) return;
    const uint8_t *v = (const uint8_t *)e->v.str.ptr;
    uint64_t card = 0;
    if (!(v[15] & 0x80)) { /* the cached value */
        for (int i = 7; i >= 0; i--) card = (card << 8) | v[8 + i];
        addReplyLongLong(c, (long long)card);
        return;
    }
    long long n = hllCardinality(v, e->v.str.len);
    if (n < 0) {
        addReplyError(c, hll_invalid_err);
        return;
    }
    uint8_t *w = (uint8_t *)strWritable(db, e, e->v.str.len, 0);
    for (int i = 0; i < 8; i++) w[8 + i] = (uint8_t)((uint64_t)n >> (8 * i));
    signalModifiedKey(c, db, k.p, k.len); /* the value changed (its cache), as Redis says */
    addReplyLongLong(c, n);
}

/* PFMERGE destkey [sourcekey ...]: the union into destkey (which counts as a source). */
void pfmergeCommand(client *c) {
    ir_db *db = dbFor(c);
    uint8_t max[HLL_REGS] = {0};
    int dense = 0;
    for (int j = 1; j < c->argc; j++) {
        dbkey k = argKey(db, c, j);
        dbEntry *e = lookupKey(db, &k);
        if (!e) continue;
        if (hllCheckOrReply(c, e) != 0) return;
        if (hllEncoding(e) == HLL_ENC_DENSE) dense = 1;
        if (hllMergeInto(max, (const uint8_t *)e->v.str.ptr, e->v.str.len) != 0) {
            addReplyError(c, hll_invalid_err);
            return;
        }
    }
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) e = hllCreate(db, &k);
    if (dense && hllMakeDense(db, e) != 0) {
        addReplyError(c, hll_invalid_err);
        return;
    }
    for (long i = 0; i < HLL_REGS; i++)
        if (max[i]) hllRaise(db, e, i, max[i]); /* as Redis: a corrupt destination stays so */
    hllInvalidate((uint8_t *)strWritable(db, e, e->v.str.len, 0));
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STRING, "pfadd", k.p, k.len, db->id); /* a mass add, as Redis */
    addReplyStr(c, shared.ok);
}

/* PFDEBUG GETREG | DECODE | ENCODING | TODENSE key */
void pfdebugCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 2);
    dbEntry *e = lookupKey(db, &k);
    if (!e) {
        addReplyError(c, "The specified key does not exist");
        return;
    }
    if (hllCheckOrReply(c, e) != 0) return;
    int sparse = hllEncoding(e) == HLL_ENC_SPARSE;
    if (argEq(c, 1, "getreg") || argEq(c, 1, "todense")) {
        if (sparse) {
            if (hllMakeDense(db, e) != 0) {
                addReplyError(c, hll_invalid_err);
                return;
            }
            replMarkDirty(); /* an encoding change replicas get */
        }
        if (argEq(c, 1, "todense")) {
            addReplyStr(c, sparse ? shared.cone : shared.czero);
            return;
        }
        const uint8_t *r = (const uint8_t *)e->v.str.ptr + HLL_HDR;
        addReplyArrayLen(c, HLL_REGS);
        for (long i = 0; i < HLL_REGS; i++) addReplyLongLong(c, denseGet(r, i));
    } else if (argEq(c, 1, "decode")) {
        if (!sparse) {
            addReplyError(c, "HLL encoding is not sparse");
            return;
        }
        const uint8_t *p = (const uint8_t *)e->v.str.ptr + HLL_HDR,
                      *end = (const uint8_t *)e->v.str.ptr + e->v.str.len;
        size_t cap = 64 + (size_t)(end - p) * 8, n = 0; /* at most "v:32,4 " per byte */
        char *out = malloc(cap);
        if (!out) {
            addReplyError(c, "Insufficient memory to decode the HLL");
            return;
        }
        while (p < end) {
            long run;
            int val, oplen;
            opDecode(p, end, &run, &val, &oplen);
            if (val) n += (size_t)snprintf(out + n, cap - n, "v:%d,%ld ", val, run);
            else n += (size_t)snprintf(out + n, cap - n, "%c:%ld ", oplen == 2 ? 'Z' : 'z', run);
            p += oplen;
        }
        if (n) n--;                                       /* the last space */
        if (n) memcpy(addReplyBulkReserve(c, n), out, n); /* copied: out is freed below */
        else addReplyProto(c, "$0\r\n\r\n", 6);
        free(out);
    } else if (argEq(c, 1, "encoding")) {
        addReplyStatus(c, sparse ? "sparse" : "dense");
    } else {
        addReplyErrorFormat(c, "Unknown PFDEBUG subcommand '%.*s'", (int)c->argv[1].len,
                            c->argv[1].ptr);
    }
}

/* ---- PFSELFTEST ---------------------------------------------------------------- */

/* PFSELFTEST: the dense registers keep what is written to them without
 * touching their neighbours, and the estimates of a dense and a sparse HLL
 * fed the same ten million elements agree and stay within six standard
 * errors at 1, 10, ..., 10^7 elements. */
void pfselftestCommand(client *c) {
    uint8_t *dense = calloc(1, HLL_DENSE_BYTES + 1), *bytes = malloc(HLL_REGS);
    /* (a sparse HLL never needs more than about 2 bytes a register) */
    size_t maxbytes = (size_t)encodingLimits.hll_sparse_max_bytes;
    if (maxbytes > 4 * HLL_REGS) maxbytes = 4 * HLL_REGS;
    size_t sparse_cap = maxbytes + 8;
    uint8_t *sparse = malloc(sparse_cap), *sdense = NULL;
    size_t slen = 2;
    const char *fail = NULL;
    char why[128];
    if (!dense || !bytes || !sparse) {
        fail = "TESTFAILED out of memory";
        goto done;
    }
    for (int cycle = 0; cycle < 1000 && !fail; cycle++) {
        for (long i = 0; i < HLL_REGS; i++) {
            bytes[i] = (uint8_t)(rand() & 63);
            denseSetReg(dense, i, bytes[i]);
        }
        for (long i = 0; i < HLL_REGS && !fail; i++) {
            if (denseGet(dense, i) != bytes[i]) {
                snprintf(why, sizeof(why), "TESTFAILED Register %ld should be %d but is %d", i,
                         bytes[i], denseGet(dense, i));
                fail = why;
            }
        }
    }
    if (fail) goto done;
    memset(dense, 0, HLL_DENSE_BYTES);
    sparse[0] = 0x40 | ((HLL_XZERO_MAXLEN - 1) >> 8);
    sparse[1] = (HLL_XZERO_MAXLEN - 1) & 0xff;
    double relerr = 1.04 / sqrt(HLL_REGS);
    uint64_t seed = (uint64_t)rand() | (uint64_t)rand() << 32, checkpoint = 1;
    for (uint64_t j = 1; j <= 10000000; j++) {
        uint64_t ele = j ^ seed;
        uint8_t buf[8];
        for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(ele >> (8 * b));
        long reg;
        int count = hllHash(buf, sizeof(buf), &reg);
        denseRaise(dense, reg, count);
        if (!sdense && sparseRaise(sparse, &slen, reg, count, maxbytes) == 2) {
            sdense = calloc(1, HLL_DENSE_BYTES + 1);
            if (!sdense || sparseToDense(sparse, slen, sdense) != 0) {
                fail = "TESTFAILED sparse to dense conversion";
                goto done;
            }
        }
        if (sdense) denseRaise(sdense, reg, count);
        if (j != checkpoint) continue;
        if (j < maxbytes / 2 && sdense) {
            fail = "TESTFAILED sparse encoding not used";
            goto done;
        }
        int h1[64] = {0}, h2[64] = {0};
        denseHisto(dense, h1);
        if (sdense) denseHisto(sdense, h2);
        else sparseWalk(sparse, slen, runHisto, h2);
        uint64_t est = hllEstimate(h1);
        if (est != hllEstimate(h2)) {
            fail = "TESTFAILED dense/sparse disagree";
            goto done;
        }
        uint64_t maxerr = j == 10 ? 1 : (uint64_t)ceil(relerr * 6 * (double)checkpoint);
        uint64_t abserr = est > checkpoint ? est - checkpoint : checkpoint - est;
        if (abserr > maxerr) {
            snprintf(why, sizeof(why), "TESTFAILED Too big error. card:%llu abserr:%llu",
                     (unsigned long long)checkpoint, (unsigned long long)abserr);
            fail = why;
            goto done;
        }
        checkpoint *= 10;
    }
done:
    if (fail) addReplyError(c, fail);
    else addReplyStr(c, shared.ok);
    free(dense);
    free(bytes);
    free(sparse);
    free(sdense);
}
