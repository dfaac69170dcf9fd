/* sumtree.c - the prioritized sampler: a K-ary sum tree plus a min tree.
 *
 * Layout. One flat, 64-byte aligned array of doubles holds the sum tree level
 * by level, top-down: level 0 is the root, level D the leaves (the stored
 * priorities). The children of node j of level d are the K contiguous nodes
 * [j*K, j*K + K) of level d+1, and every level starts on a 64-byte boundary,
 * so a child block is one cache line for K = 8 (half/quarter of one for K =
 * 4/2, two/four whole lines for K = 16/32). A level has as many nodes as its
 * parent level has children (padding nodes hold 0).
 *
 * The min tree has the same shape for the inner levels 0..D-1 (a second
 * array, same offsets); its leaves are not stored: a leaf's min-tree value is
 * its stored priority when positive, else +inf, read straight from the sum
 * tree's leaf level. That saves a copy of the biggest level and half of the
 * leaf writes.
 *
 * Precision. Sums are doubles and an inner node is always recomputed as the
 * sum of its K children, in one fixed order (sum_K: fold the upper half onto
 * the lower half), never adjusted by a delta, so there is no drift:
 * ir_sampler_rebuild() recomputes the very same values and finds a
 * difference of exactly 0. Stored priorities are capped at
 * DBL_MAX / (2 * leaves) so no partial sum can overflow. The transform
 * (raw + epsilon)^alpha is libm's pow (exact shortcuts for alpha 0 and 1
 * only), so stored values equal what Python or C compute with pow().
 *
 * Hot loops are generated once per K in {2,4,8,16,32} (the ST_GEN macros) so
 * that K is a compile-time constant there; the constructor picks the set of
 * functions. On x86-64 CPUs with AVX2 (checked at run time; the environment
 * variable IR_SUMTREE_NO_AVX2 forces the portable code) K >= 4 uses vector
 * kernels: prefix sums four children at a time for the descent and the same
 * fold as sum_K for node updates (bit-identical results); the weights'
 * r^beta is vectorized for every K. Sampling descends a chunk of ST_CHUNK queries level
 * by level and prefetches each query's next child block right after choosing
 * it, so the cache misses of a whole chunk overlap. Nothing on the hot paths
 * allocates, except that update/set/clear grow a scratch buffer once when a
 * batch is bigger than any before.
 *
 * Zero-priority slots are never drawn: the descent takes the first child
 * whose running sum exceeds the point, which has positive mass when the sum
 * runs left to right, and pick_positive() handles whatever rounding leaves.
 *
 * Why this layout stays (bench/memfloor --layout all, 2026-12-02, a4332cb,
 * 2-core AMD EPYC VM loaded by other work, 5 interleaved rounds of
 * bench/server_time.py plus one run alone; 128 B items, SAMPLE 512). A draw
 * touches 10 lines at 2M items (9 at 100k): the 7 (6) child blocks of this
 * tree, the slot record, the item's 2 lines. memfloor times the lines of
 * candidate layouts in the same passes; each one's floor over this one's,
 * median of the rounds at 100k / 2M items:
 *   fold: record folded into an 8-byte item header + offsets     1.12 / 1.12
 *   leafrec: leaf block + 8-byte offsets in its line pair        1.10 / 1.12
 *   leafrec16: leaf block + the 16-byte records beside it        0.98 / 0.99
 *   leafrec8: leafrec's pair, whole record in 8 B (8-bit times)  0.96 / 0.98
 *   k16 / k16inner: K = 16 everywhere / above blocks of 8 leaves 1.29 / 1.38, 1.25 / 1.25
 *   k16inner-leafrec, k16-fold                                   1.31-1.54
 *   norecord: no record at all (a bound, not a layout)           0.88 / 0.86
 * So no layout reaches the 0.75x asked of a new one: a header pushes a 128 B
 * item onto a third line; a K = 16 block is two lines, more than the level
 * it saves; and even with no record the tree's path (about half the floor:
 * 15-22 us of 28-47 us at 2M) and the item's lines remain. The tree's lines
 * per draw are fixed by exactness: fewer levels means other sums, so other
 * draws, and the K = 8 sums must stay byte-identical. The record beside the
 * leaf block buys 1-4%, inside the rounds' spread, for a second layout of
 * the leaf level and UPDATE's path 1-7% slower: not worth the change. The
 * floor to sit on is this layout's.
 */
#include "../inreplay.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ST_MAX_LEVELS 48 /* K = 2 and 2^40 leaves: 40 levels + root */
#define ST_MAX_CAPACITY (1ULL << 40)
#define ST_CHUNK 128     /* queries descended together */
#define ST_PF 8          /* prefetch distance of the update loops */
#define ST_SCRATCH0 1024 /* scratch entries allocated up front */

typedef struct st_ops {
    /* descend m queries: sv[i] is the point (mass from the left), node[i]
     * receives the leaf index */
    void (*descend)(const ir_sampler *s, size_t m, double *sv, uint64_t *node);
    /* the same, summing children strictly left to right: never ends on an
     * empty leaf */
    void (*descend_exact)(const ir_sampler *s, size_t m, double *sv, uint64_t *node);
    /* recompute the parents (on inner level d) of the m level-(d+1) nodes in
     * idx; replace idx by those parents, consecutive repeats dropped, and
     * return their number */
    size_t (*fix_parents)(ir_sampler *s, unsigned d, uint64_t *idx, size_t m);
    /* recompute every node of inner level d */
    void (*fix_level)(ir_sampler *s, unsigned d);
} st_ops;

struct ir_sampler {
    double *sum; /* sum tree, levels 0..D */
    double *mn;  /* min tree, levels 0..D-1 */
    const st_ops *ops;
    uint64_t capacity;
    unsigned K, shift, depth; /* depth = D: leaves are level D */
    double alpha, epsilon;
    double maxp;                       /* largest stored priority ever set */
    double limit;                      /* largest storable priority */
    uint64_t off[ST_MAX_LEVELS + 2];   /* first node of each level */
    uint64_t nodes[ST_MAX_LEVELS + 1]; /* real (non-padding) nodes per level */
    uint64_t rng[4];
    int avx2; /* the CPU has AVX2 (vectorized weights) */
    /* scratch for batched writes */
    double *st;
    uint64_t *idx;
    size_t scratch_cap;
};

/* ---- RNG: xoshiro256** seeded through splitmix64 ------------------------ */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t xoshiro_next(uint64_t *r) {
    const uint64_t result = rotl64(r[1] * 5, 7) * 9;
    const uint64_t t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = rotl64(r[3], 45);
    return result;
}

/* uniform in [0, 1) with 53 random bits */
static inline double rng_unit(uint64_t *r) { return (double)(xoshiro_next(r) >> 11) * 0x1.0p-53; }

void ir_sampler_seed(ir_sampler *s, uint64_t seed) {
    if (!s) return;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

/* ---- per-K kernels ------------------------------------------------------ */

static inline double min_d(double a, double b) { return b < a ? b : a; }

/* a leaf's value in the min tree: empty (0) leaves do not count */
static inline double leaf_min_value(double v) { return v > 0.0 ? v : INFINITY; }

/* Rounding put the point past the chosen child, or on a child without mass
 * (possible only when the prefix sums are not computed left to right): take
 * the first positive child at or after cnt, entering at its left end, or, if
 * there is none, the last positive child, entering at its right end. A node
 * with positive mass has a positive child, so one of them exists. */
static __attribute__((noinline, cold)) unsigned pick_positive(const double *c, unsigned K,
                                                              unsigned cnt, double *nx) {
    for (unsigned k = cnt; k < K; k++)
        if (c[k] > 0.0) {
            *nx = 0.0;
            return k;
        }
    for (unsigned k = K; k-- > 0;)
        if (c[k] > 0.0) {
            *nx = c[k];
            return k;
        }
    *nx = 0.0;
    return 0;
}

/* Recomputing inner nodes; instantiated once per K and, on x86-64, once more
 * compiled for AVX2 (same arithmetic in the same order, so the same results). */
#define ST_GEN_FIX(K, SFX, ATTR) \
    ATTR static size_t fix_parents_##SFX##K(ir_sampler *s, unsigned d, uint64_t *idx, size_t m) { \
        double *ps = s->sum + s->off[d], *pm = s->mn + s->off[d]; \
        const double *cs = s->sum + s->off[d + 1]; \
        const double *cm = s->mn + s->off[d + 1]; \
        const int leafkids = d + 1 == s->depth; \
        uint64_t prev = UINT64_MAX; \
        size_t w = 0; \
        for (size_t i = 0; i < m; i++) { \
            if (i + ST_PF < m) { \
                const uint64_t f = idx[i + ST_PF] / (K); \
                __builtin_prefetch(ps + f, 1, 3); \
                __builtin_prefetch(pm + f, 1, 3); \
                if ((K) > 8) { \
                    prefetch_block_##K(cs + f * (K)); \
                    if (!leafkids) prefetch_block_##K(cm + f * (K)); \
                } \
            } \
            const uint64_t j = idx[i] / (K); \
            if (j == prev) continue; \
            prev = j; \
            idx[w++] = j; \
            ps[j] = sum_##SFX##K(cs + j * (K)); \
            pm[j] = leafkids ? min_leaf_##SFX##K(cs + j * (K)) : min_inner_##SFX##K(cm + j * (K)); \
        } \
        return w; \
    } \
    ATTR static void fix_level_##SFX##K(ir_sampler *s, unsigned d) { \
        double *ps = s->sum + s->off[d], *pm = s->mn + s->off[d]; \
        const double *cs = s->sum + s->off[d + 1]; \
        const double *cm = s->mn + s->off[d + 1]; \
        const uint64_t n = s->nodes[d]; \
        if (d + 1 == s->depth) { \
            for (uint64_t j = 0; j < n; j++) { \
                ps[j] = sum_##SFX##K(cs + j * (K)); \
                pm[j] = min_leaf_##SFX##K(cs + j * (K)); \
            } \
        } else { \
            for (uint64_t j = 0; j < n; j++) { \
                ps[j] = sum_##SFX##K(cs + j * (K)); \
                pm[j] = min_inner_##SFX##K(cm + j * (K)); \
            } \
        } \
    }

/* Sum of K children in a fixed pairwise order: fold the upper half onto the
 * lower half until one value is left (what a vector reduction does). Every
 * place that computes a node uses this, so results are reproducible. */
#define ST_GEN(K) \
    static inline double sum_##K(const double *c) { \
        double t[K]; \
        _Pragma("GCC unroll 32") for (unsigned k = 0; k < (K); k++) t[k] = c[k]; \
        _Pragma("GCC unroll 16") for (unsigned h = (K) / 2; h >= 1; h /= 2) { \
            _Pragma("GCC unroll 16") for (unsigned k = 0; k < h; k++) t[k] = t[k] + t[k + h]; \
        } \
        return t[0]; \
    } \
    static inline double min_inner_##K(const double *c) { \
        double t[K]; \
        _Pragma("GCC unroll 32") for (unsigned k = 0; k < (K); k++) t[k] = c[k]; \
        _Pragma("GCC unroll 16") for (unsigned h = (K) / 2; h >= 1; h /= 2) { \
            _Pragma("GCC unroll 16") for (unsigned k = 0; k < h; k++) t[k] = \
                min_d(t[k], t[k + h]); \
        } \
        return t[0]; \
    } \
    static inline double min_leaf_##K(const double *c) { \
        double t[K]; \
        _Pragma("GCC unroll 32") for (unsigned k = 0; k < (K); k++) t[k] = leaf_min_value(c[k]); \
        _Pragma("GCC unroll 16") for (unsigned h = (K) / 2; h >= 1; h /= 2) { \
            _Pragma("GCC unroll 16") for (unsigned k = 0; k < h; k++) t[k] = \
                min_d(t[k], t[k + h]); \
        } \
        return t[0]; \
    } \
    static inline void prefetch_block_##K(const double *p) { \
        __builtin_prefetch(p, 0, 3); \
        if ((K) > 8) __builtin_prefetch(p + 8, 0, 3); \
        if ((K) > 16) { \
            __builtin_prefetch(p + 16, 0, 3); \
            __builtin_prefetch(p + 24, 0, 3); \
        } \
    } \
    static void descend_##K(const ir_sampler *s, size_t m, double *sv, uint64_t *node) { \
        const unsigned D = s->depth; \
        for (size_t i = 0; i < m; i++) node[i] = 0; \
        for (unsigned d = 0; d < D; d++) { \
            const double *base = s->sum + s->off[d + 1]; \
            const double *next = s->sum + s->off[d + 2]; \
            const int more = d + 1 < D; \
            for (size_t i = 0; i < m; i++) { \
                const double *c = base + node[i] * (K); \
                const double x = sv[i]; \
                double cum = 0.0, before = 0.0; \
                unsigned cnt = 0; \
                /* cum is nondecreasing, so the children with cum <= x are    \
                 * a prefix: cnt is the first child whose cum exceeds x. A    \
                 * child chosen that way has c[cnt] > 0, since               \
                 * cum + 0 == cum. */ \
                _Pragma("GCC unroll 32") for (unsigned k = 0; k < (K); k++) { \
                    cum += c[k]; \
                    const int le = cum <= x; \
                    cnt += (unsigned)le; \
                    before = le ? cum : before; \
                } \
                double nx = x - before; \
                if (__builtin_expect(cnt >= (K), 0)) cnt = pick_positive(c, (K), cnt, &nx); \
                const uint64_t nj = node[i] * (K) + cnt; \
                node[i] = nj; \
                sv[i] = nx; \
                if (more) prefetch_block_##K(next + nj * (K)); \
            } \
        } \
    } \
    ST_GEN_FIX(K, , ) \
    static const st_ops ops_##K = {descend_##K, descend_##K, fix_parents_##K, fix_level_##K};

ST_GEN(2)
ST_GEN(4)
ST_GEN(8)
ST_GEN(16)
ST_GEN(32)

/* ---- AVX2 descent (x86-64, chosen at run time) -------------------------- */

#if defined(__x86_64__) && defined(__GNUC__)
#define ST_HAVE_AVX2 1
#include <immintrin.h>
#define ST_AVX2 __attribute__((target("avx2")))

/* inclusive prefix sum of 4 lanes: [a, a+b, (b+c)+a, (c+d)+(a+b)] */
ST_AVX2 static inline __m256d prefix4(__m256d a) {
    __m256d t = _mm256_permute4x64_pd(a, _MM_SHUFFLE(2, 1, 0, 0));
    t = _mm256_blend_pd(t, _mm256_setzero_pd(), 1);
    a = _mm256_add_pd(a, t);
    t = _mm256_permute2f128_pd(a, a, 0x08);
    return _mm256_add_pd(a, t);
}

ST_AVX2 static inline double hmax4(__m256d v) {
    __m128d m = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(m, _mm_unpackhi_pd(m, m)));
}

/* sum_K's fold (upper half onto lower half) with vectors: the same additions
 * in the same order, so bit-identical results. */
#define ST_GEN_AVX2_NODE(K) \
    ST_AVX2 static inline double sum_avx2_##K(const double *c) { \
        __m256d v[(K) / 4]; \
        _Pragma("GCC unroll 8") for (unsigned i = 0; i < (K) / 4; i++) v[i] = \
            _mm256_load_pd(c + 4 * i); \
        _Pragma("GCC unroll 4") for (unsigned h = (K) / 8; h >= 1; h /= 2) { \
            _Pragma("GCC unroll 4") for (unsigned i = 0; i < h; i++) v[i] = \
                _mm256_add_pd(v[i], v[i + h]); \
        } \
        __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v[0]), _mm256_extractf128_pd(v[0], 1)); \
        return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x))); \
    } \
    ST_AVX2 static inline double min4_avx2_##K(__m256d *v) { \
        _Pragma("GCC unroll 4") for (unsigned h = (K) / 8; h >= 1; h /= 2) { \
            _Pragma("GCC unroll 4") for (unsigned i = 0; i < h; i++) v[i] = \
                _mm256_min_pd(v[i], v[i + h]); \
        } \
        __m128d x = _mm_min_pd(_mm256_castpd256_pd128(v[0]), _mm256_extractf128_pd(v[0], 1)); \
        return _mm_cvtsd_f64(_mm_min_sd(x, _mm_unpackhi_pd(x, x))); \
    } \
    ST_AVX2 static inline double min_inner_avx2_##K(const double *c) { \
        __m256d v[(K) / 4]; \
        _Pragma("GCC unroll 8") for (unsigned i = 0; i < (K) / 4; i++) v[i] = \
            _mm256_load_pd(c + 4 * i); \
        return min4_avx2_##K(v); \
    } \
    ST_AVX2 static inline double min_leaf_avx2_##K(const double *c) { \
        const __m256d inf = _mm256_set1_pd(INFINITY); \
        __m256d v[(K) / 4]; \
        _Pragma("GCC unroll 8") for (unsigned i = 0; i < (K) / 4; i++) { \
            const __m256d x = _mm256_load_pd(c + 4 * i); \
            const __m256d pos = _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_GT_OQ); \
            v[i] = _mm256_blendv_pd(inf, x, pos); \
        } \
        return min4_avx2_##K(v); \
    }

/* Prefix sums four children at a time; cnt = the first child whose prefix
 * exceeds x, "before" = the largest prefix <= x. The last lane of prefix4 is
 * not summed left to right, so with a zero last child, its prefix can round
 * above the previous one and a point in between would enter an empty child
 * (and end on an empty leaf): descend_checked() redoes such rare queries with
 * the left-to-right kernel, which keeps the per-level loop free of a
 * dependent load. The points of a stratified batch ascend, so consecutive
 * queries often sit in one node (every query at the root, most of them on the
 * next levels): a node's prefix sums are computed once for the run of queries
 * in it, and each query only compares. Same arithmetic, so the same draws;
 * measured against the per-query prefix (K = 8, 512 draws, interleaved in one
 * process): 22.3 vs 25.5 us at 100k leaves, 24.7 vs 27.8 us at 2M. */
#define ST_GEN_AVX2(K) \
    ST_GEN_AVX2_NODE(K) \
    ST_AVX2 static void descend_avx2_##K(const ir_sampler *s, size_t m, double *sv, \
                                         uint64_t *node) { \
        const unsigned D = s->depth; \
        for (size_t i = 0; i < m; i++) node[i] = 0; \
        for (unsigned d = 0; d < D; d++) { \
            const double *base = s->sum + s->off[d + 1]; \
            const double *next = s->sum + s->off[d + 2]; \
            const int more = d + 1 < D; \
            uint64_t prev = UINT64_MAX; /* the node whose prefix sums pv holds */ \
            __m256d pv[(K) / 4]; \
            _Pragma("GCC unroll 8") for (unsigned v = 0; v < (K) / 4; v++) pv[v] = \
                _mm256_setzero_pd(); \
            for (size_t i = 0; i < m; i++) { \
                const uint64_t nd = node[i]; \
                const double *c = base + nd * (K); \
                if (nd != prev) { \
                    prev = nd; \
                    __m256d carry = _mm256_setzero_pd(); \
                    _Pragma("GCC unroll 8") for (unsigned v = 0; v < (K) / 4; v++) { \
                        pv[v] = _mm256_add_pd(prefix4(_mm256_load_pd(c + 4 * v)), carry); \
                        carry = _mm256_permute4x64_pd(pv[v], 0xff); \
                    } \
                } \
                const double x = sv[i]; \
                const __m256d xv = _mm256_set1_pd(x); \
                __m256d best = _mm256_setzero_pd(); \
                uint64_t le = 0; \
                _Pragma("GCC unroll 8") for (unsigned v = 0; v < (K) / 4; v++) { \
                    const __m256d ok = _mm256_cmp_pd(pv[v], xv, _CMP_LE_OQ); \
                    le |= (uint64_t)_mm256_movemask_pd(ok) << (4 * v); \
                    best = _mm256_max_pd(best, _mm256_and_pd(ok, pv[v])); \
                } \
                unsigned cnt = (unsigned)__builtin_ctzll(~le); \
                double nx = x - hmax4(best); \
                if (__builtin_expect(cnt >= (K), 0)) cnt = pick_positive(c, (K), cnt, &nx); \
                const uint64_t nj = nd * (K) + cnt; \
                node[i] = nj; \
                sv[i] = nx; \
                if (more) prefetch_block_##K(next + nj * (K)); \
            } \
        } \
    } \
    ST_GEN_FIX(K, avx2_, ST_AVX2) \
    static const st_ops ops_avx2_##K = {descend_avx2_##K, descend_##K, fix_parents_avx2_##K, \
                                        fix_level_avx2_##K};

ST_GEN_AVX2(4)
ST_GEN_AVX2(8)
ST_GEN_AVX2(16)
ST_GEN_AVX2(32)

/* w[i] = r[i]^beta for r in [DBL_MIN, 1], beta > 0, four at a time, as
 * exp(beta * ln r) with short polynomials: relative error below 1e-9, far
 * under float32's 6e-8 (results below e^-110 come out as e^-110, which is
 * 1.7e-48, i.e. 0 as a float). */
ST_AVX2 static void pow_unit_avx2(const double *r, float *w, size_t m, double beta) {
    const __m256i mant_mask = _mm256_set1_epi64x(0x000fffffffffffffLL);
    const __m256i sqrt2_bits = _mm256_set1_epi64x(0x6a09e667f3bccLL); /* > this: >= sqrt 2 */
    const __m256i one52 = _mm256_set1_epi64x(1LL << 52);
    const __m256i ebias = _mm256_set1_epi64x(0x4330000000000000LL);
    const __m256i one_bits = _mm256_set1_epi64x(0x3ff0000000000000LL);
    const __m256d one = _mm256_set1_pd(1.0), vbeta = _mm256_set1_pd(beta);
    const __m256d ln2_hi = _mm256_set1_pd(0x1.62e42fefa3800p-1);
    const __m256d ln2_lo = _mm256_set1_pd(0x1.ef35793c76730p-45);
    const __m256d magic = _mm256_set1_pd(0x1.8p52);
    for (size_t i = 0; i < m; i += 4) {
        __m256d x;
        if (i + 4 <= m) {
            x = _mm256_loadu_pd(r + i);
        } else {
            double tail[4] = {1.0, 1.0, 1.0, 1.0};
            for (size_t k = 0; i + k < m; k++) tail[k] = r[i + k];
            x = _mm256_loadu_pd(tail);
        }
        /* x = 2^e * mant, mant in [sqrt(1/2), sqrt(2)) */
        __m256i b = _mm256_castpd_si256(x);
        const __m256i mb = _mm256_and_si256(b, mant_mask);
        const __m256i big = _mm256_and_si256(_mm256_cmpgt_epi64(mb, sqrt2_bits), one52);
        b = _mm256_add_epi64(b, big);
        const __m256d e =
            _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(_mm256_srli_epi64(b, 52), ebias)),
                          _mm256_set1_pd(0x1.0p52 + 1023.0));
        const __m256d mant =
            _mm256_castsi256_pd(_mm256_sub_epi64(_mm256_or_si256(mb, one_bits), big));
        /* ln(mant) = 2 atanh(z), |z| < 0.1716 */
        const __m256d z = _mm256_div_pd(_mm256_sub_pd(mant, one), _mm256_add_pd(mant, one));
        const __m256d z2 = _mm256_mul_pd(z, z), z4 = _mm256_mul_pd(z2, z2);
        __m256d q =
            _mm256_add_pd(_mm256_set1_pd(2.0 / 5), _mm256_mul_pd(z2, _mm256_set1_pd(2.0 / 7)));
        q = _mm256_add_pd(q, _mm256_mul_pd(z4, _mm256_set1_pd(2.0 / 9)));
        q = _mm256_add_pd(
            _mm256_add_pd(_mm256_set1_pd(2.0), _mm256_mul_pd(z2, _mm256_set1_pd(2.0 / 3))),
            _mm256_mul_pd(z4, q));
        const __m256d lnm = _mm256_mul_pd(z, q);
        __m256d y =
            _mm256_add_pd(_mm256_mul_pd(e, ln2_hi), _mm256_add_pd(_mm256_mul_pd(e, ln2_lo), lnm));
        y = _mm256_max_pd(_mm256_mul_pd(vbeta, y), _mm256_set1_pd(-110.0));
        /* exp(y) = 2^n exp(f), |f| <= ln(2)/2 */
        const __m256d t =
            _mm256_add_pd(_mm256_mul_pd(y, _mm256_set1_pd(0x1.71547652b82fep0)), magic);
        const __m256d n = _mm256_sub_pd(t, magic);
        const __m256d f =
            _mm256_sub_pd(_mm256_sub_pd(y, _mm256_mul_pd(n, ln2_hi)), _mm256_mul_pd(n, ln2_lo));
        const __m256d f2 = _mm256_mul_pd(f, f), f4 = _mm256_mul_pd(f2, f2);
#define ST_C(v) _mm256_set1_pd(v)
        const __m256d p0 = _mm256_add_pd(
            _mm256_add_pd(one, f),
            _mm256_mul_pd(f2, _mm256_add_pd(ST_C(1.0 / 2), _mm256_mul_pd(f, ST_C(1.0 / 6)))));
        const __m256d p1 = _mm256_add_pd(ST_C(1.0 / 24), _mm256_mul_pd(f, ST_C(1.0 / 120)));
        const __m256d p2 =
            _mm256_add_pd(_mm256_add_pd(ST_C(1.0 / 720), _mm256_mul_pd(f, ST_C(1.0 / 5040))),
                          _mm256_mul_pd(f2, ST_C(1.0 / 40320)));
#undef ST_C
        const __m256d p =
            _mm256_add_pd(p0, _mm256_mul_pd(f4, _mm256_add_pd(p1, _mm256_mul_pd(f2, p2))));
        const __m256i sb = _mm256_slli_epi64(
            _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(1023)), 52);
        const __m128 res = _mm256_cvtpd_ps(_mm256_mul_pd(p, _mm256_castsi256_pd(sb)));
        if (i + 4 <= m) {
            _mm_storeu_ps(w + i, res);
        } else {
            float tail[4];
            _mm_storeu_ps(tail, res);
            for (size_t k = 0; i + k < m; k++) w[i + k] = tail[k];
        }
    }
}
#endif

/* ---- construction ------------------------------------------------------- */

/* Big trees get transparent huge pages (madvise, best effort): a descent's
 * reads are random, and on 4 KB pages each level below the top misses the TLB
 * at 2M leaves. */
static void *alloc64(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p && bytes >= (2u << 20)) {
        uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
        if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
    return p;
}

static int scratch_reserve(ir_sampler *s, size_t n) {
    if (n <= s->scratch_cap) return IR_OK;
    size_t cap = s->scratch_cap * 2;
    if (cap < n) cap = n;
    if (cap > SIZE_MAX / sizeof(double)) return IR_ENOMEM;
    double *st = malloc(cap * sizeof(double));
    uint64_t *idx = malloc(cap * sizeof(uint64_t));
    if (!st || !idx) {
        free(st);
        free(idx);
        return IR_ENOMEM;
    }
    free(s->st);
    free(s->idx);
    s->st = st;
    s->idx = idx;
    s->scratch_cap = cap;
    return IR_OK;
}

ir_sampler *ir_sampler_new(uint64_t capacity, unsigned fanout, double alpha, double epsilon,
                           uint64_t seed) {
    if (fanout == 0) fanout = IR_DEFAULT_FANOUT;
    const st_ops *ops;
    unsigned shift;
    switch (fanout) {
    case 2:
        ops = &ops_2;
        shift = 1;
        break;
    case 4:
        ops = &ops_4;
        shift = 2;
        break;
    case 8:
        ops = &ops_8;
        shift = 3;
        break;
    case 16:
        ops = &ops_16;
        shift = 4;
        break;
    case 32:
        ops = &ops_32;
        shift = 5;
        break;
    default: return NULL;
    }
#ifdef ST_HAVE_AVX2
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && !getenv("IR_SUMTREE_NO_AVX2");
    if (avx2) {
        switch (fanout) {
        case 4: ops = &ops_avx2_4; break;
        case 8: ops = &ops_avx2_8; break;
        case 16: ops = &ops_avx2_16; break;
        case 32: ops = &ops_avx2_32; break;
        default: break;
        }
    }
#endif
    if (capacity == 0 || capacity > ST_MAX_CAPACITY) return NULL;
    if (!(alpha >= 0.0) || !isfinite(alpha) || !(epsilon >= 0.0) || !isfinite(epsilon)) return NULL;

    ir_sampler *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->ops = ops;
#ifdef ST_HAVE_AVX2
    s->avx2 = avx2;
#endif
    s->capacity = capacity;
    s->K = fanout;
    s->shift = shift;
    s->alpha = alpha;
    s->epsilon = epsilon;
    s->maxp = 1.0;

    /* depth: the smallest D >= 1 with K^D >= capacity */
    unsigned D = 1;
    while (D * shift < 64 && (capacity - 1) >> (D * shift)) D++;
    s->depth = D;
    /* real nodes of level d: ceil(capacity / K^(D-d)) */
    for (unsigned d = 0; d <= D; d++) {
        unsigned sh = (D - d) * shift;
        s->nodes[d] = sh >= 64 ? 1 : ((capacity - 1) >> sh) + 1;
    }
    /* level d holds nodes[d-1] * K entries; starts rounded up to 8 doubles */
    uint64_t off = 0;
    for (unsigned d = 0; d <= D; d++) {
        s->off[d] = off;
        uint64_t len = d == 0 ? 1 : s->nodes[d - 1] * fanout;
        off += (len + 7) & ~(uint64_t)7;
    }
    s->off[D + 1] = off; /* end (never dereferenced) */
    const uint64_t leaves = s->nodes[D - 1] * fanout;
    s->limit = DBL_MAX / (2.0 * (double)leaves);

    s->sum = alloc64(off * sizeof(double));
    s->mn = alloc64(s->off[D] * sizeof(double));
    if (!s->sum || !s->mn || scratch_reserve(s, ST_SCRATCH0) != IR_OK) {
        ir_sampler_free(s);
        return NULL;
    }
    memset(s->sum, 0, off * sizeof(double));
    for (uint64_t i = 0; i < s->off[D]; i++) s->mn[i] = INFINITY;
    ir_sampler_seed(s, seed);
    return s;
}

void ir_sampler_free(ir_sampler *s) {
    if (!s) return;
    free(s->sum);
    free(s->mn);
    free(s->st);
    free(s->idx);
    free(s);
}

uint64_t ir_sampler_capacity(const ir_sampler *s) { return s ? s->capacity : 0; }
unsigned ir_sampler_fanout(const ir_sampler *s) { return s ? s->K : 0; }

int ir_sampler_uses_avx2(const ir_sampler *s) { return s ? s->avx2 : 0; }
double ir_sampler_alpha(const ir_sampler *s) { return s ? s->alpha : NAN; }
double ir_sampler_epsilon(const ir_sampler *s) { return s ? s->epsilon : NAN; }

/* ---- writes ------------------------------------------------------------- */

/* After the leaves of the n slots in s->idx changed: recompute their
 * ancestors level by level. Consecutive equal parents are recomputed once.
 * From the first level with at most half as many nodes as there are entries
 * left to propagate, whole levels are recomputed sequentially instead (less
 * work than scattered, possibly repeated recomputes; the levels above are
 * smaller still). Clobbers s->idx. */
static void fix_ancestors(ir_sampler *s, size_t n) {
    size_t m = n;
    int whole = 0;
    for (unsigned d = s->depth; d-- > 0;) {
        whole = whole || (uint64_t)m >= 2 * s->nodes[d];
        if (whole) s->ops->fix_level(s, d);
        else m = s->ops->fix_parents(s, d, s->idx, m);
    }
}

/* Write s->st[0..n) to the leaves of slots[0..n) and fix the tree. */
static void apply(ir_sampler *s, const uint64_t *slots, size_t n) {
    double *leaf = s->sum + s->off[s->depth];
    const double *st = s->st;
    double mx = s->maxp;
    for (size_t i = 0; i < n; i++) {
        if (i + ST_PF < n) __builtin_prefetch(leaf + slots[i + ST_PF], 1, 3);
        leaf[slots[i]] = st[i];
        s->idx[i] = slots[i];
        mx = st[i] > mx ? st[i] : mx;
    }
    s->maxp = mx;
    fix_ancestors(s, n);
}

static inline int bad_stored(const ir_sampler *s, double v) {
    /* catches NaN too */
    return !(v >= 0.0 && v <= s->limit);
}

/* The priority transform, stored = (raw + epsilon)^alpha, for n values
 * (src as double or float) into s->st; IR_EINVAL if any input or result is
 * out of range. Also checks the slots. */
#define ST_TRANSFORM(NAME, T) \
    static int NAME(ir_sampler *s, const uint64_t *slots, const T *raw, size_t n) { \
        const double a = s->alpha, e = s->epsilon; \
        const uint64_t cap = s->capacity; \
        double *st = s->st; \
        int bad = 0; \
        for (size_t i = 0; i < n; i++) { \
            const double r = (double)raw[i]; \
            bad |= !(r >= 0.0 && r <= DBL_MAX) | (slots[i] >= cap); \
            st[i] = r + e; \
        } \
        if (bad) return IR_EINVAL; \
        /* exact fast paths only: other exponents go through pow() so that    \
         * stored values match (p + eps) ** alpha computed elsewhere */ \
        if (a == 1.0) { \
        } else if (a == 0.0) { \
            for (size_t i = 0; i < n; i++) st[i] = 1.0; \
        } else { \
            for (size_t i = 0; i < n; i++) st[i] = pow(st[i], a); \
        } \
        for (size_t i = 0; i < n; i++) bad |= bad_stored(s, st[i]); \
        return bad ? IR_EINVAL : IR_OK; \
    }

int ir_sampler_valid(const ir_sampler *s, double raw) {
    if (!s || !(raw >= 0.0 && raw <= DBL_MAX)) return 0;
    double v = raw + s->epsilon; /* the same steps as ST_TRANSFORM */
    if (s->alpha == 0.0) return !bad_stored(s, 1.0);
    /* 0 < alpha < 1: v^alpha <= max(v, 1), and libm's pow (under 1 ulp) cannot
     * round past v or 1, both representable; limit >= 1. So v <= limit
     * answers without the pow: REPLAY.UPDATE checks every priority before it
     * applies any, and this halves its pow calls (512 of 1,024 per batch of
     * 512, ~100k of ~250k instructions, callgrind). */
    if (s->alpha < 1.0 && v <= s->limit && s->limit >= 1.0) return 1;
    if (s->alpha != 1.0) v = pow(v, s->alpha);
    return !bad_stored(s, v);
}

ST_TRANSFORM(transform_f64, double)
ST_TRANSFORM(transform_f32, float)

int ir_sampler_update(ir_sampler *s, const uint64_t *slots, const double *raw, size_t n) {
    if (!s || (n && (!slots || !raw))) return IR_EINVAL;
    if (n == 0) return IR_OK;
    int rc = scratch_reserve(s, n);
    if (rc == IR_OK) rc = transform_f64(s, slots, raw, n);
    if (rc == IR_OK) apply(s, slots, n);
    return rc;
}

int ir_sampler_update_f32(ir_sampler *s, const uint64_t *slots, const float *raw, size_t n) {
    if (!s || (n && (!slots || !raw))) return IR_EINVAL;
    if (n == 0) return IR_OK;
    int rc = scratch_reserve(s, n);
    if (rc == IR_OK) rc = transform_f32(s, slots, raw, n);
    if (rc == IR_OK) apply(s, slots, n);
    return rc;
}

int ir_sampler_set_stored(ir_sampler *s, const uint64_t *slots, const double *stored, size_t n) {
    if (!s || (n && (!slots || !stored))) return IR_EINVAL;
    if (n == 0) return IR_OK;
    int rc = scratch_reserve(s, n);
    if (rc != IR_OK) return rc;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= bad_stored(s, stored[i]) | (slots[i] >= s->capacity);
        s->st[i] = stored[i] + 0.0; /* -0 becomes +0 */
    }
    if (bad) return IR_EINVAL;
    apply(s, slots, n);
    return IR_OK;
}

int ir_sampler_clear(ir_sampler *s, const uint64_t *slots, size_t n) {
    if (!s || (n && !slots)) return IR_EINVAL;
    if (n == 0) return IR_OK;
    int rc = scratch_reserve(s, n);
    if (rc != IR_OK) return rc;
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= slots[i] >= s->capacity;
    if (bad) return IR_EINVAL;
    double *leaf = s->sum + s->off[s->depth];
    for (size_t i = 0; i < n; i++) {
        if (i + ST_PF < n) __builtin_prefetch(leaf + slots[i + ST_PF], 1, 3);
        leaf[slots[i]] = 0.0;
        s->idx[i] = slots[i];
    }
    fix_ancestors(s, n);
    return IR_OK;
}

/* ---- reads -------------------------------------------------------------- */

double ir_sampler_get(const ir_sampler *s, uint64_t slot) {
    if (!s || slot >= s->capacity) return NAN;
    return s->sum[s->off[s->depth] + slot];
}

double ir_sampler_total(const ir_sampler *s) { return s ? s->sum[0] : NAN; }
double ir_sampler_min(const ir_sampler *s) { return s ? s->mn[0] : NAN; }
double ir_sampler_max(const ir_sampler *s) { return s ? s->maxp : NAN; }

double ir_sampler_rebuild(ir_sampler *s) {
    if (!s) return NAN;
    const double before = s->sum[0];
    for (unsigned d = s->depth; d-- > 0;) s->ops->fix_level(s, d);
    return fabs(s->sum[0] - before);
}

/* ---- sampling ----------------------------------------------------------- */

/* ops->descend, then any query that ended on an empty leaf (possible only
 * through the vector kernels' rounding) redone with the exact kernel */
static void descend_checked(const ir_sampler *s, size_t m, double *sv, uint64_t *out) {
    double x0[ST_CHUNK];
    memcpy(x0, sv, m * sizeof(double));
    s->ops->descend(s, m, sv, out);
    if (s->ops->descend_exact == s->ops->descend) return;
    const double *leaf = s->sum + s->off[s->depth];
    for (size_t i = 0; i < m; i++)
        if (__builtin_expect(!(leaf[out[i]] > 0.0), 0))
            s->ops->descend_exact(s, 1, &x0[i], &out[i]);
}

/* (min_p / p)^beta for the m <= ST_CHUNK slots, as float */
static void weights_of(const ir_sampler *s, const uint64_t *slots, size_t m, double beta,
                       float *w) {
    const double *leaf = s->sum + s->off[s->depth];
    const double minp = s->mn[0];
    double r[ST_CHUNK];
    if (beta == 0.0) {
        for (size_t i = 0; i < m; i++) w[i] = 1.0f;
        return;
    }
    int tiny = 0;
    for (size_t i = 0; i < m; i++) {
        r[i] = minp / leaf[slots[i]];
        tiny |= r[i] < DBL_MIN;
    }
    if (beta == 1.0) {
        for (size_t i = 0; i < m; i++) w[i] = (float)r[i];
    } else if (beta == 0.5) {
        for (size_t i = 0; i < m; i++) w[i] = (float)sqrt(r[i]);
#ifdef ST_HAVE_AVX2
    } else if (s->avx2 && !tiny) {
        pow_unit_avx2(r, w, m, beta);
#endif
    } else {
        for (size_t i = 0; i < m; i++) w[i] = (float)pow(r[i], beta);
    }
}

int ir_sampler_sample(ir_sampler *s, size_t n, double beta, uint64_t first, uint64_t live,
                      uint64_t *slots, float *weights) {
    if (!s || (n && !slots) || !(beta >= 0.0) || !isfinite(beta) || live > s->capacity)
        return IR_EINVAL;
    if (n == 0) return IR_OK;
    if (live == 0) return IR_EEMPTY;
    const double total = s->sum[0];
    if (!(total > 0.0)) {
        /* nothing has mass: uniform over the live window */
        const uint64_t cap = s->capacity, f = first % cap;
        for (size_t i = 0; i < n; i++) {
            uint64_t k = (uint64_t)(rng_unit(s->rng) * (double)live);
            if (k >= live) k = live - 1;
            uint64_t slot = f + k;
            slots[i] = slot >= cap ? slot - cap : slot;
            if (weights) weights[i] = 1.0f;
        }
        return IR_OK;
    }
    const double stratum = total / (double)n;
    double sv[ST_CHUNK];
    for (size_t b = 0; b < n; b += ST_CHUNK) {
        const size_t m = n - b < ST_CHUNK ? n - b : ST_CHUNK;
        for (size_t i = 0; i < m; i++) sv[i] = ((double)(b + i) + rng_unit(s->rng)) * stratum;
        descend_checked(s, m, sv, slots + b);
        if (weights) weights_of(s, slots + b, m, beta, weights + b);
    }
    return IR_OK;
}

int ir_sampler_sample_at(const ir_sampler *s, size_t n, const double *u, uint64_t *slots) {
    if (!s || (n && (!u || !slots))) return IR_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!(u[i] >= 0.0 && u[i] < 1.0)) return IR_EINVAL;
    if (n == 0) return IR_OK;
    const double total = s->sum[0];
    if (!(total > 0.0)) return IR_EEMPTY;
    const double stratum = total / (double)n;
    double sv[ST_CHUNK];
    for (size_t b = 0; b < n; b += ST_CHUNK) {
        const size_t m = n - b < ST_CHUNK ? n - b : ST_CHUNK;
        for (size_t i = 0; i < m; i++) sv[i] = ((double)(b + i) + u[b + i]) * stratum;
        descend_checked(s, m, sv, slots + b);
    }
    return IR_OK;
}
