/* test_sumtree.c - unit tests of the prioritized sampler (fstack_redis/replay/sumtree.c).
 *
 * Plain C, no framework: every CHECK counts as one test; the program prints
 * "N passed, M failed" and exits non-zero if anything failed. The kernels are
 * chosen by CPU at construction; the sampling tests run a second time with
 * IR_SUMTREE_NO_AVX2=1 (portable kernels), and test_kernels_agree compares
 * the two.
 */
#include "check.h"
#include "../../fstack_redis/inreplay.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned fanouts[] = {2, 4, 8, 16, 32};
#define NFANOUTS (sizeof(fanouts) / sizeof(fanouts[0]))

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state = 12345;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double unit(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

/* reference: plain arrays of stored priorities */
typedef struct ref {
    uint64_t cap;
    double *p;
    double maxp;
} ref;

static ref ref_new(uint64_t cap) {
    ref r = {cap, calloc(cap, sizeof(double)), 1.0};
    return r;
}

static long double ref_total(const ref *r) {
    long double t = 0;
    for (uint64_t i = 0; i < r->cap; i++) t += r->p[i];
    return t;
}

static double ref_min(const ref *r) {
    double m = INFINITY;
    for (uint64_t i = 0; i < r->cap; i++)
        if (r->p[i] > 0 && r->p[i] < m) m = r->p[i];
    return m;
}

/* compare every observable of s with r; returns 1 if all equal */
static int same_as_ref(const ir_sampler *s, const ref *r, const char *what) {
    int ok = 1;
    for (uint64_t i = 0; i < r->cap; i++)
        if (ir_sampler_get(s, i) != r->p[i]) {
            fprintf(stderr, "  %s: slot %llu: %.17g != %.17g\n", what, (unsigned long long)i,
                    ir_sampler_get(s, i), r->p[i]);
            ok = 0;
            break;
        }
    long double t = ref_total(r);
    double tot = ir_sampler_total(s);
    if (fabsl((long double)tot - t) > 1e-12L * t + 1e-300L) {
        fprintf(stderr, "  %s: total %.17g != %.17Lg\n", what, tot, t);
        ok = 0;
    }
    if (ir_sampler_min(s) != ref_min(r)) {
        fprintf(stderr, "  %s: min %.17g != %.17g\n", what, ir_sampler_min(s), ref_min(r));
        ok = 0;
    }
    if (ir_sampler_max(s) != r->maxp) {
        fprintf(stderr, "  %s: max %.17g != %.17g\n", what, ir_sampler_max(s), r->maxp);
        ok = 0;
    }
    return ok;
}

/* index of the slot whose cumulative interval [c_{i-1}, c_i) holds x */
static uint64_t ref_find(const ref *r, long double x) {
    long double c = 0;
    uint64_t last = 0;
    for (uint64_t i = 0; i < r->cap; i++) {
        if (r->p[i] > 0) {
            last = i;
            c += r->p[i];
            if (x < c) return i;
        }
    }
    return last;
}

/* ---- tests -------------------------------------------------------------- */

static void test_construction(void) {
    CHECKF(ir_sampler_new(0, 8, 0.6, 1e-6, 1) == NULL, "capacity 0");
    CHECKF(ir_sampler_new(10, 3, 0.6, 1e-6, 1) == NULL, "fanout 3");
    CHECKF(ir_sampler_new(10, 64, 0.6, 1e-6, 1) == NULL, "fanout 64");
    CHECKF(ir_sampler_new(10, 8, -0.1, 1e-6, 1) == NULL, "alpha < 0");
    CHECKF(ir_sampler_new(10, 8, NAN, 1e-6, 1) == NULL, "alpha NaN");
    CHECKF(ir_sampler_new(10, 8, INFINITY, 1e-6, 1) == NULL, "alpha inf");
    CHECKF(ir_sampler_new(10, 8, 0.6, -1e-6, 1) == NULL, "epsilon < 0");
    CHECKF(ir_sampler_new(10, 8, 0.6, NAN, 1) == NULL, "epsilon NaN");
    CHECKF(ir_sampler_new(1ULL << 60, 8, 0.6, 0, 1) == NULL, "absurd capacity");

    ir_sampler *s = ir_sampler_new(1000, 0, 0.7, 0.01, 5);
    CHECKF(s != NULL, "default fanout");
    CHECKF(ir_sampler_fanout(s) == IR_DEFAULT_FANOUT, "fanout %u", ir_sampler_fanout(s));
    CHECKF(ir_sampler_capacity(s) == 1000, "capacity");
    CHECKF(ir_sampler_alpha(s) == 0.7, "alpha");
    CHECKF(ir_sampler_epsilon(s) == 0.01, "epsilon");
    CHECKF(ir_sampler_total(s) == 0.0, "empty total");
    CHECKF(isinf(ir_sampler_min(s)) && ir_sampler_min(s) > 0, "empty min");
    CHECKF(ir_sampler_max(s) == 1.0, "initial max");
    CHECKF(ir_sampler_get(s, 999) == 0.0, "empty slot");
    CHECKF(isnan(ir_sampler_get(s, 1000)), "slot out of range");
    CHECKF(ir_sampler_rebuild(s) == 0.0, "rebuild empty");
    ir_sampler_free(s);
    ir_sampler_free(NULL);

    for (size_t k = 0; k < NFANOUTS; k++) {
        s = ir_sampler_new(1, fanouts[k], 1.0, 0.0, 1);
        CHECKF(s != NULL, "capacity 1, K %u", fanouts[k]);
        uint64_t slot = 0, out = 99;
        double v = 3.0;
        float w = 0;
        CHECKF(ir_sampler_update(s, &slot, &v, 1) == IR_OK, "update");
        CHECKF(ir_sampler_total(s) == 3.0, "total");
        CHECKF(ir_sampler_sample(s, 1, 0.4, 0, 1, &out, &w) == IR_OK && out == 0 && w == 1.0f,
               "sample capacity 1");
        ir_sampler_free(s);
    }
}

/* random updates, sets and clears against the reference */
static void test_random_ops(void) {
    static const uint64_t caps[] = {1,  2,  3,  7,  8,   9,    31,   32,
                                    33, 63, 64, 65, 100, 1000, 4097, 33000};
    uint64_t slots[700];
    double vals[700];
    float vf[700];
    for (size_t k = 0; k < NFANOUTS; k++) {
        for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
            const uint64_t cap = caps[c];
            const double alpha = (c % 3 == 0) ? 1.0 : (c % 3 == 1) ? 0.6 : 0.5;
            ir_sampler *s = ir_sampler_new(cap, fanouts[k], alpha, 1e-3, c);
            ref r = ref_new(cap);
            int ok = 1;
            for (int round = 0; round < 60 && ok; round++) {
                size_t n = 1 + rnd() % 600;
                int op = (int)(rnd() % 5);
                int consecutive = rnd() % 2;
                uint64_t base = rnd() % cap;
                for (size_t i = 0; i < n; i++) {
                    slots[i] = consecutive ? (base + i) % cap : rnd() % cap;
                    vals[i] = (rnd() % 7 == 0) ? 0.0 : unit() * 10.0;
                    vf[i] = (float)vals[i];
                }
                int rc;
                if (op == 0 || op == 1) {
                    rc = ir_sampler_update(s, slots, vals, n);
                    for (size_t i = 0; i < n; i++) {
                        double st = pow(vals[i] + 1e-3, alpha);
                        r.p[slots[i]] = st;
                        if (st > r.maxp) r.maxp = st;
                    }
                } else if (op == 2) {
                    rc = ir_sampler_update_f32(s, slots, vf, n);
                    for (size_t i = 0; i < n; i++) {
                        double st = pow((double)vf[i] + 1e-3, alpha);
                        r.p[slots[i]] = st;
                        if (st > r.maxp) r.maxp = st;
                    }
                } else if (op == 3) {
                    rc = ir_sampler_set_stored(s, slots, vals, n);
                    for (size_t i = 0; i < n; i++) {
                        r.p[slots[i]] = vals[i];
                        if (vals[i] > r.maxp) r.maxp = vals[i];
                    }
                } else {
                    rc = ir_sampler_clear(s, slots, n);
                    for (size_t i = 0; i < n; i++) r.p[slots[i]] = 0.0;
                }
                ok = rc == IR_OK && same_as_ref(s, &r, "random ops");
            }
            CHECKF(ok, "K %u capacity %llu", fanouts[k], (unsigned long long)cap);
            double drift = ir_sampler_rebuild(s);
            CHECKF(drift == 0.0, "rebuild drift %g (K %u cap %llu)", drift, fanouts[k],
                   (unsigned long long)cap);
            CHECKF(same_as_ref(s, &r, "after rebuild"), "K %u", fanouts[k]);
            free(r.p);
            ir_sampler_free(s);
        }
    }
}

/* bad input changes nothing */
static void test_validation(void) {
    enum { cap = 100 };
    for (size_t k = 0; k < NFANOUTS; k++) {
        ir_sampler *s = ir_sampler_new(cap, fanouts[k], 0.6, 1e-6, 1);
        uint64_t slots[cap];
        double v[cap];
        for (uint64_t i = 0; i < cap; i++) {
            slots[i] = i;
            v[i] = 1.0 + (double)i;
        }
        CHECKF(ir_sampler_update(s, slots, v, cap) == IR_OK, "fill");
        double before[cap];
        for (uint64_t i = 0; i < cap; i++) before[i] = ir_sampler_get(s, i);
        const double t0 = ir_sampler_total(s), m0 = ir_sampler_min(s), x0 = ir_sampler_max(s);

        static const double bad[] = {-1.0, -0.0 - 1e-300, NAN, INFINITY, -INFINITY};
        for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
            double vv[cap];
            for (uint64_t i = 0; i < cap; i++) vv[i] = 0.5;
            vv[cap - 1 - b] = bad[b];
            int rc = ir_sampler_update(s, slots, vv, cap);
            CHECKF(rc == IR_EINVAL, "update bad[%zu] rc %d", b, rc);
            float vf[cap];
            for (uint64_t i = 0; i < cap; i++) vf[i] = 0.5f;
            vf[cap - 1 - b] = (float)bad[b];
            if (b != 1) /* -1e-300 is -0.0f, which is fine */
                CHECKF(ir_sampler_update_f32(s, slots, vf, cap) == IR_EINVAL, "f32 bad[%zu]", b);
            CHECKF(ir_sampler_set_stored(s, slots, vv, cap) == IR_EINVAL, "set_stored bad[%zu]", b);
        }
        uint64_t badslots[3] = {1, cap, 2};
        double three[3] = {1, 2, 3};
        CHECKF(ir_sampler_update(s, badslots, three, 3) == IR_EINVAL, "slot >= capacity");
        CHECKF(ir_sampler_set_stored(s, badslots, three, 3) == IR_EINVAL, "set_stored slot");
        CHECKF(ir_sampler_clear(s, badslots, 3) == IR_EINVAL, "clear slot");
        CHECKF(ir_sampler_update(s, NULL, three, 3) == IR_EINVAL, "NULL slots");
        CHECKF(ir_sampler_update(s, slots, NULL, 3) == IR_EINVAL, "NULL values");
        CHECKF(ir_sampler_update(s, NULL, NULL, 0) == IR_OK, "n = 0");
        CHECKF(ir_sampler_update(NULL, slots, three, 1) == IR_EINVAL, "NULL sampler");

        int same = ir_sampler_total(s) == t0 && ir_sampler_min(s) == m0 && ir_sampler_max(s) == x0;
        for (uint64_t i = 0; i < cap; i++) same &= ir_sampler_get(s, i) == before[i];
        CHECKF(same, "tree changed by rejected calls (K %u)", fanouts[k]);
        CHECKF(ir_sampler_rebuild(s) == 0.0, "no drift");
        ir_sampler_free(s);
    }

    /* a transform result of +inf, or too large to sum, is rejected */
    ir_sampler *s = ir_sampler_new(10, 8, 3.0, 0.0, 1);
    uint64_t slot = 3;
    double big = 1e200, fine = 2.0;
    CHECKF(ir_sampler_update(s, &slot, &big, 1) == IR_EINVAL, "(1e200)^3 = inf");
    CHECKF(ir_sampler_update(s, &slot, &fine, 1) == IR_OK, "2^3");
    CHECKF(ir_sampler_get(s, slot) == 8.0, "2^3 = %g", ir_sampler_get(s, slot));
    double huge = DBL_MAX / 4;
    CHECKF(ir_sampler_set_stored(s, &slot, &huge, 1) == IR_EINVAL, "stored too large to sum");
    double fmax_raw = DBL_MAX;
    CHECKF(ir_sampler_update(s, &slot, &fmax_raw, 1) == IR_EINVAL, "DBL_MAX^3");
    CHECKF(ir_sampler_get(s, slot) == 8.0, "unchanged");
    double negzero = -0.0;
    CHECKF(ir_sampler_set_stored(s, &slot, &negzero, 1) == IR_OK, "-0 is 0");
    CHECKF(ir_sampler_get(s, slot) == 0.0 && !signbit(ir_sampler_get(s, slot)), "+0 stored");
    ir_sampler_free(s);
}

static void test_duplicates(void) {
    for (size_t k = 0; k < NFANOUTS; k++) {
        ir_sampler *s = ir_sampler_new(50, fanouts[k], 1.0, 0.0, 1);
        uint64_t slots[5] = {7, 8, 7, 9, 7};
        double v[5] = {1, 2, 3, 4, 5};
        CHECKF(ir_sampler_update(s, slots, v, 5) == IR_OK, "update");
        CHECKF(ir_sampler_get(s, 7) == 5.0, "last value wins: %g", ir_sampler_get(s, 7));
        CHECKF(ir_sampler_total(s) == 11.0, "total %g", ir_sampler_total(s));
        CHECKF(ir_sampler_min(s) == 2.0, "min %g", ir_sampler_min(s));
        CHECKF(ir_sampler_max(s) == 5.0, "max %g", ir_sampler_max(s));
        CHECKF(ir_sampler_clear(s, slots, 1) == IR_OK, "clear");
        CHECKF(ir_sampler_total(s) == 6.0 && ir_sampler_min(s) == 2.0, "after clear");
        CHECKF(ir_sampler_clear(s, slots, 5) == IR_OK, "clear all");
        CHECKF(ir_sampler_total(s) == 0.0 && isinf(ir_sampler_min(s)), "after clear all");
        CHECKF(ir_sampler_max(s) == 5.0, "max never decreases");
        ir_sampler_free(s);
    }
}

/* sample_at descends to the slot whose cumulative interval holds the point */
static void test_descent_exact(void) {
    enum { cap = 3000 };
    for (size_t k = 0; k < NFANOUTS; k++) {
        ir_sampler *s = ir_sampler_new(cap, fanouts[k], 1.0, 0.0, 1);
        ref r = ref_new(cap);
        /* integer priorities: every sum is exact, so the descent must match exactly */
        uint64_t slots[cap];
        double v[cap];
        for (uint64_t i = 0; i < cap; i++) {
            slots[i] = i;
            v[i] = (rnd() % 3 == 0) ? 0.0 : (double)(1 + rnd() % 100);
            r.p[i] = v[i];
        }
        ir_sampler_update(s, slots, v, cap);
        const double total = ir_sampler_total(s);
        int ok = 1;
        for (int t = 0; t < 3000 && ok; t++) {
            /* n = 1: point = u * total */
            double u = t == 0 ? 0.0 : t == 1 ? 0x1.fffffffffffffp-1 : unit();
            uint64_t out;
            ok = ir_sampler_sample_at(s, 1, &u, &out) == IR_OK;
            uint64_t want = ref_find(&r, (long double)u * total);
            if (out != want || !(r.p[out] > 0)) {
                fprintf(stderr, "  u %.17g: got %llu want %llu\n", u, (unsigned long long)out,
                        (unsigned long long)want);
                ok = 0;
            }
        }
        CHECKF(ok, "exact descent K %u", fanouts[k]);

        /* stratified: n points, ascending strata */
        size_t n = 257;
        double u[257];
        uint64_t out[257];
        for (size_t i = 0; i < n; i++) u[i] = unit();
        CHECKF(ir_sampler_sample_at(s, n, u, out) == IR_OK, "sample_at");
        ok = 1;
        for (size_t i = 0; i < n && ok; i++) {
            long double x = ((long double)i + u[i]) * (total / (double)n);
            uint64_t want = ref_find(&r, x);
            /* the point is rounded once in double: allow the neighbour at a boundary */
            if (out[i] != want) {
                long double c = 0;
                for (uint64_t j = 0; j <= want; j++) c += r.p[j];
                if (!(fabsl(c - x) < 1e-9L * total || fabsl(c - r.p[want] - x) < 1e-9L * total))
                    ok = 0;
            }
            if (i && out[i] < out[i - 1]) ok = 0;
        }
        CHECKF(ok, "stratified order and slots, K %u", fanouts[k]);

        /* bad points */
        double badu[2] = {0.5, 1.0};
        CHECKF(ir_sampler_sample_at(s, 2, badu, out) == IR_EINVAL, "u = 1");
        badu[1] = -0.0 - 1e-9;
        CHECKF(ir_sampler_sample_at(s, 2, badu, out) == IR_EINVAL, "u < 0");
        badu[1] = NAN;
        CHECKF(ir_sampler_sample_at(s, 2, badu, out) == IR_EINVAL, "u NaN");
        CHECKF(ir_sampler_sample_at(s, 0, NULL, NULL) == IR_OK, "n = 0");
        free(r.p);
        ir_sampler_free(s);
    }
}

/* zero-priority slots are never drawn, whatever rounding does */
static void test_zero_never_sampled(void) {
    for (size_t k = 0; k < NFANOUTS; k++) {
        enum { cap = 5000 };
        ir_sampler *s = ir_sampler_new(cap, fanouts[k], 1.0, 0.0, 7);
        uint64_t slots[cap];
        double v[cap];
        /* wild dynamic range so that partial sums round a lot, zeros everywhere,
         * and trailing zeros after the last positive slot */
        for (uint64_t i = 0; i < cap; i++) {
            slots[i] = i;
            int z = rnd() % 4 == 0 || i > cap - 40;
            double mag = pow(10.0, -300.0 + 600.0 * unit());
            v[i] = z ? 0.0 : (rnd() % 2 ? mag : 1e-300 * unit() + 1e-310);
        }
        /* a few giants make small slots almost massless */
        v[3] = 1e300;
        v[cap / 2] = 3e299;
        CHECKF(ir_sampler_set_stored(s, slots, v, cap) == IR_OK, "set");
        int ok = 1;
        uint64_t out[512];
        float w[512];
        double u[512];
        for (int t = 0; t < 400 && ok; t++) {
            size_t n = 1 + rnd() % 512;
            for (size_t i = 0; i < n; i++)
                u[i] = t % 3 == 0 ? 0x1.fffffffffffffp-1 : t % 3 == 1 ? 0.0 : unit();
            ok &= ir_sampler_sample_at(s, n, u, out) == IR_OK;
            for (size_t i = 0; i < n; i++) ok &= v[out[i]] > 0.0;
            ok &= ir_sampler_sample(s, n, 0.7, 0, cap, out, w) == IR_OK;
            for (size_t i = 0; i < n; i++) ok &= v[out[i]] > 0.0 && w[i] >= 0.0f && w[i] <= 1.0f;
        }
        CHECKF(ok, "zero priority drawn (K %u)", fanouts[k]);

        /* last stratum at u -> 1 rounds to the very end: the last positive slot */
        uint64_t last = cap - 1;
        while (!(v[last] > 0)) last--;
        double ones[1] = {0x1.fffffffffffffp-1};
        uint64_t o;
        ir_sampler_sample_at(s, 1, ones, &o);
        CHECKF(v[o] > 0, "u -> 1");
        /* all mass in a single tiny slot among zeros */
        ir_sampler_clear(s, slots, cap);
        double tiny = 4.9e-324;
        uint64_t one = cap - 41;
        ir_sampler_set_stored(s, &one, &tiny, 1);
        ok = ir_sampler_sample(s, 512, 0.5, 0, cap, out, w) == IR_OK;
        for (size_t i = 0; i < 512; i++) ok &= out[i] == one && w[i] == 1.0f;
        CHECKF(ok, "single subnormal slot (K %u)", fanouts[k]);
        ir_sampler_free(s);
    }
}

/* The AVX2 kernel sums four children as [a, a+b, (b+c)+a, (c+d)+(a+b)]: with
 * d = 0 the last prefix can exceed the third, and a point in between would
 * pick the empty child without the guard. Build exactly that case. */
static void test_prefix_rounding_guard(void) {
    int found = 0;
    for (int t = 0; t < 1000000 && !found; t++) {
        volatile double a = unit(), b = unit(), c = unit();
        double lane2 = (b + c) + a, lane3 = (c + 0.0) + (a + b);
        if (!(lane3 > lane2)) continue;
        ir_sampler *s = ir_sampler_new(4, 4, 1.0, 0.0, 1);
        uint64_t slots[4] = {0, 1, 2, 3};
        double v[4] = {a, b, c, 0.0};
        ir_sampler_set_stored(s, slots, v, 4);
        const double total = ir_sampler_total(s);
        /* a u with u * total in [lane2, lane3) */
        double u = lane2 / total;
        for (int k = 0; k < 8 && u * total < lane2; k++) u = nextafter(u, 1.0);
        for (int k = 0; k < 8 && u * total >= lane3; k++) u = nextafter(u, 0.0);
        if (u * total >= lane2 && u * total < lane3 && u < 1.0) {
            found = 1;
            uint64_t out = 99;
            CHECKF(ir_sampler_sample_at(s, 1, &u, &out) == IR_OK && out != 3 && out < 4,
                   "guard: drew slot %llu", (unsigned long long)out);
        }
        ir_sampler_free(s);
    }
    CHECKF(found, "no rounding case found");
}

static void test_weights(void) {
    for (size_t k = 0; k < NFANOUTS; k++) {
        enum { cap = 20000 };
        ir_sampler *s = ir_sampler_new(cap, fanouts[k], 1.0, 0.0, 3);
        static uint64_t slots[cap];
        static double v[cap];
        for (uint64_t i = 0; i < cap; i++) {
            slots[i] = i;
            /* ratios over 30 orders of magnitude */
            v[i] = pow(10.0, -30.0 * unit());
        }
        for (int sub = 0; sub < 2; sub++) {
            if (sub == 1) { /* min / p subnormal for everyone else: the exact path */
                uint64_t at = 17;
                double tinyp = 1e-320;
                ir_sampler_set_stored(s, &at, &tinyp, 1);
                v[17] = tinyp;
            } else {
                ir_sampler_set_stored(s, slots, v, cap);
            }
            const double minp = ir_sampler_min(s);
            CHECKF(minp == (sub ? 1e-320 : ref_min(&(ref){cap, v, 1.0})), "min %g", minp);
            static const double betas[] = {0.0, 0.4, 0.5, 1.0, 0.9999, 2.5, 1e-6};
            uint64_t out[1000];
            float w[1000];
            for (size_t b = 0; b < sizeof(betas) / sizeof(betas[0]); b++) {
                int ok = 1;
                double worst = 0;
                for (int t = 0; t < 20; t++) {
                    size_t n = 1 + rnd() % 1000;
                    ok &= ir_sampler_sample(s, n, betas[b], 0, cap, out, w) == IR_OK;
                    for (size_t i = 0; i < n; i++) {
                        double want = pow(minp / v[out[i]], betas[b]);
                        float fw = (float)want;
                        double err = fw == w[i] ? 0 : fabs((double)w[i] - want) / fmax(want, 1e-38);
                        if (fw != w[i] && want < 1e-37) /* float subnormal range */
                            err = fabs((double)w[i] - want) < 1e-44 ? 0 : 1;
                        if (err > worst) worst = err;
                    }
                }
                CHECKF(ok && worst < 2e-7, "weights beta %g K %u sub %d: rel err %g", betas[b],
                       fanouts[k], sub, worst);
            }
        }
        uint64_t out[1000];
        float w[1000];
        /* the heaviest possible weight is exactly 1: the min slot itself */
        ir_sampler_clear(s, slots, cap);
        double same[4] = {2.5, 2.5, 2.5, 2.5};
        ir_sampler_set_stored(s, slots, same, 4);
        ir_sampler_sample(s, 1000, 0.4, 0, cap, out, w);
        int ones = 1;
        for (size_t i = 0; i < 1000; i++) ones &= w[i] == 1.0f && out[i] < 4;
        CHECKF(ones, "equal priorities: all weights 1");
        ir_sampler_free(s);
    }
}

static void test_uniform_fallback(void) {
    for (size_t k = 0; k < NFANOUTS; k++) {
        const uint64_t cap = 1000;
        ir_sampler *s = ir_sampler_new(cap, fanouts[k], 0.6, 0.0, 9);
        uint64_t out[4096];
        float w[4096];
        CHECKF(ir_sampler_sample(s, 10, 0.4, 0, 0, out, w) == IR_EEMPTY, "live 0");
        CHECKF(ir_sampler_sample(s, 0, 0.4, 0, 0, out, w) == IR_OK, "n 0");
        CHECKF(ir_sampler_sample(s, 10, 0.4, 0, cap + 1, out, w) == IR_EINVAL, "live > cap");
        CHECKF(ir_sampler_sample(s, 10, -0.1, 0, 10, out, w) == IR_EINVAL, "beta < 0");
        CHECKF(ir_sampler_sample(s, 10, NAN, 0, 10, out, w) == IR_EINVAL, "beta NaN");
        CHECKF(ir_sampler_sample(s, 10, 0.4, 0, 10, NULL, w) == IR_EINVAL, "NULL slots");
        double u = 0.5;
        CHECKF(ir_sampler_sample_at(s, 1, &u, out) == IR_EEMPTY, "sample_at on zero mass");

        /* window [990, 990 + 30) wraps */
        unsigned hits[1000] = {0};
        int ok = ir_sampler_sample(s, 4096, 0.4, 990, 30, out, w) == IR_OK;
        for (size_t i = 0; i < 4096; i++) {
            ok &= (out[i] >= 990 || out[i] < 20) && w[i] == 1.0f;
            hits[out[i]]++;
        }
        CHECKF(ok, "window with wrap");
        unsigned lo = 4096, hi = 0;
        for (uint64_t i = 0; i < cap; i++)
            if (i >= 990 || i < 20) {
                lo = hits[i] < lo ? hits[i] : lo;
                hi = hits[i] > hi ? hits[i] : hi;
            }
        CHECKF(lo > 80 && hi < 200, "roughly uniform: %u..%u of 136", lo, hi);
        ok = ir_sampler_sample(s, 100, 0.4, 5, 1, out, NULL) == IR_OK;
        for (size_t i = 0; i < 100; i++) ok &= out[i] == 5;
        CHECKF(ok, "live 1");
        /* all-zero after clears: uniform again */
        uint64_t sl[3] = {1, 2, 3};
        double v[3] = {1, 2, 3};
        ir_sampler_update(s, sl, v, 3);
        ir_sampler_clear(s, sl, 3);
        CHECKF(ir_sampler_total(s) == 0.0, "total after clearing all: %g", ir_sampler_total(s));
        ok = ir_sampler_sample(s, 100, 0.4, 0, 10, out, w) == IR_OK;
        for (size_t i = 0; i < 100; i++) ok &= out[i] < 10 && w[i] == 1.0f;
        CHECKF(ok, "uniform after clear");
        ir_sampler_free(s);
    }
}

/* frequencies follow the priorities: a chi-square statistic over 10^6 draws */
static void test_frequencies(void) {
    for (size_t k = 0; k < NFANOUTS; k++) {
        enum { cap = 200 };
        ir_sampler *s = ir_sampler_new(cap, fanouts[k], 0.6, 0.0, 11 + k);
        uint64_t slots[cap];
        double v[cap];
        for (uint64_t i = 0; i < cap; i++) {
            slots[i] = i;
            v[i] = i % 10 == 0 ? 0.0 : 0.01 + unit() * 5;
        }
        ir_sampler_update(s, slots, v, cap);
        double p[cap], tot = 0;
        for (uint64_t i = 0; i < cap; i++) {
            p[i] = ir_sampler_get(s, i);
            tot += p[i];
        }
        double *cnt = calloc(cap, sizeof(double));
        uint64_t out[500];
        for (int t = 0; t < 2000; t++) {
            ir_sampler_sample(s, 500, 0.4, 0, cap, out, NULL);
            for (size_t i = 0; i < 500; i++) cnt[out[i]]++;
        }
        double chi = 0;
        int df = -1, zero_ok = 1;
        for (uint64_t i = 0; i < cap; i++) {
            if (p[i] > 0) {
                double e = 1e6 * p[i] / tot;
                chi += (cnt[i] - e) * (cnt[i] - e) / e;
                df++;
            } else {
                zero_ok &= cnt[i] == 0;
            }
        }
        /* df = 179: mean 179, sd 19; stratification makes it smaller still. 300 is p ~ 1e-8 */
        CHECKF(chi < 300, "chi2 %g with %d df (K %u)", chi, df, fanouts[k]);
        CHECKF(zero_ok, "zero slots drawn");
        free(cnt);
        ir_sampler_free(s);
    }
}

/* the AVX2 and portable kernels agree (on a CPU with AVX2: elsewhere there is
 * only one kernel, and the test says so instead of comparing it with itself) */
static void test_kernels_agree(void) {
#if defined(__x86_64__) || defined(__i386__)
    const int have_avx2 = __builtin_cpu_supports("avx2");
#else
    const int have_avx2 = 0;
#endif
    if (!have_avx2) {
        printf("SKIP test_kernels_agree: this CPU has no AVX2, only the portable kernels run\n");
        return;
    }
    const uint64_t cap = 100000;
    uint64_t *slots = malloc(cap * sizeof(uint64_t));
    double *v = malloc(cap * sizeof(double));
    for (uint64_t i = 0; i < cap; i++) {
        slots[i] = i;
        v[i] = rnd() % 5 == 0 ? 0.0 : unit();
    }
    for (size_t k = 0; k < NFANOUTS; k++) {
        unsetenv("IR_SUMTREE_NO_AVX2");
        ir_sampler *a = ir_sampler_new(cap, fanouts[k], 0.6, 0.0, 1);
        setenv("IR_SUMTREE_NO_AVX2", "1", 1);
        ir_sampler *b = ir_sampler_new(cap, fanouts[k], 0.6, 0.0, 1);
        unsetenv("IR_SUMTREE_NO_AVX2");
        /* the two kernels the comparison is about really ran */
        CHECKF(ir_sampler_uses_avx2(a) == 1, "AVX2 kernels chosen (K %u)", fanouts[k]);
        CHECKF(ir_sampler_uses_avx2(b) == 0, "portable kernels chosen (K %u)", fanouts[k]);
        ir_sampler_update(a, slots, v, cap);
        ir_sampler_update(b, slots, v, cap);
        CHECKF(ir_sampler_total(a) == ir_sampler_total(b), "same tree");
        uint64_t oa[512], ob[512];
        float wa[512], wb[512];
        size_t differ = 0;
        double werr = 0;
        for (int t = 0; t < 200; t++) {
            ir_sampler_sample(a, 512, 0.4, 0, cap, oa, wa);
            ir_sampler_sample(b, 512, 0.4, 0, cap, ob, wb);
            for (size_t i = 0; i < 512; i++) {
                differ += oa[i] != ob[i];
                if (oa[i] == ob[i]) {
                    double e = fabs((double)wa[i] - wb[i]) / wb[i];
                    werr = e > werr ? e : werr;
                }
            }
        }
        /* only a point within rounding of a boundary could go either way */
        CHECKF(differ <= 2, "%zu of 102400 draws differ (K %u)", differ, fanouts[k]);
        CHECKF(werr < 2e-7, "weights differ by %g", werr);
        ir_sampler_free(a);
        ir_sampler_free(b);
    }
    free(slots);
    free(v);
}

/* many updates leave no drift; the root never goes negative */
static void test_drift(void) {
    for (size_t k = 0; k < NFANOUTS; k++) {
        enum { cap = 10000 };
        ir_sampler *s = ir_sampler_new(cap, fanouts[k], 0.6, 1e-6, 2);
        uint64_t slots[256];
        double v[256];
        int ok = 1;
        for (int t = 0; t < 2000; t++) {
            for (size_t i = 0; i < 256; i++) {
                slots[i] = rnd() % cap;
                v[i] = unit() * pow(10.0, (double)(rnd() % 12) - 6.0);
            }
            if (t % 3 == 2) ir_sampler_clear(s, slots, 256);
            else ir_sampler_update(s, slots, v, 256);
            ok &= ir_sampler_total(s) >= 0.0;
        }
        CHECKF(ok, "root negative");
        CHECKF(ir_sampler_rebuild(s) == 0.0, "drift after 512k updates (K %u)", fanouts[k]);
        /* clear everything: exactly zero */
        uint64_t all[cap];
        for (uint64_t i = 0; i < cap; i++) all[i] = i;
        ir_sampler_clear(s, all, cap);
        CHECKF(ir_sampler_total(s) == 0.0 && isinf(ir_sampler_min(s)), "empty again");
        ir_sampler_free(s);
    }
}

static void test_seed(void) {
    ir_sampler *a = ir_sampler_new(1000, 8, 1.0, 0.0, 42);
    ir_sampler *b = ir_sampler_new(1000, 8, 1.0, 0.0, 42);
    uint64_t slots[1000];
    double v[1000];
    for (uint64_t i = 0; i < 1000; i++) {
        slots[i] = i;
        v[i] = unit();
    }
    ir_sampler_update(a, slots, v, 1000);
    ir_sampler_update(b, slots, v, 1000);
    uint64_t oa[64], ob[64];
    ir_sampler_sample(a, 64, 0.4, 0, 1000, oa, NULL);
    ir_sampler_sample(b, 64, 0.4, 0, 1000, ob, NULL);
    CHECKF(!memcmp(oa, ob, sizeof(oa)), "same seed, same draws");
    ir_sampler_seed(b, 43);
    ir_sampler_sample(a, 64, 0.4, 0, 1000, oa, NULL);
    ir_sampler_sample(b, 64, 0.4, 0, 1000, ob, NULL);
    CHECKF(memcmp(oa, ob, sizeof(oa)) != 0, "other seed, other draws");
    ir_sampler_free(a);
    ir_sampler_free(b);
}

/* The transform stores (raw + epsilon)^alpha. The reference is independent of
 * libm's pow: inputs whose powers are exact doubles (k^2 for alpha 0.5, powers
 * of 2 for 0.75 and 0.625, small integers and halves for 1.5, 2 and 3), where a pow within
 * one ulp, as glibc's is, must return exactly that double (so the exponents
 * are dyadic: 0.6 itself is not a double); alpha 0 and 1 are
 * the fast paths (1.0, and raw + epsilon untouched). */
static void test_transform(void) {
    static const struct {
        double alpha, in, out;
    } exact[] = {
        {0.5, 4.0, 2.0},    {0.5, 2.25, 1.5},         {0.5, 1e6, 1e3},      {0.5, 0x1p-40, 0x1p-20},
        {2.0, 3.0, 9.0},    {2.0, 1.5, 2.25},         {3.0, 2.0, 8.0},      {3.0, 0.5, 0.125},
        {0.75, 16.0, 8.0},  {0.75, 0x1p-40, 0x1p-30}, {0.625, 256.0, 32.0}, {1.5, 4.0, 8.0},
        {0.0, 123.25, 1.0}, {0.0, 0.0, 1.0},          {1.0, 0.1, 0.1},      {1.0, 7e300, 7e300},
    };
    for (size_t k = 0; k < sizeof(exact) / sizeof(exact[0]); k++) {
        ir_sampler *s = ir_sampler_new(8, 4, exact[k].alpha, 0.0, 1);
        uint64_t slot = 3;
        double raw = exact[k].in;
        ir_sampler_update(s, &slot, &raw, 1);
        double got = ir_sampler_get(s, 3);
        CHECKF(got == exact[k].out, "(%a)^%g stored %a, want %a", exact[k].in, exact[k].alpha, got,
               exact[k].out);
        ir_sampler_free(s);
    }
    /* epsilon is added before the exponent: (1.75 + 0.25)^3 = 8 */
    ir_sampler *s = ir_sampler_new(8, 4, 3.0, 0.25, 1);
    uint64_t slot = 0;
    double raw = 1.75;
    ir_sampler_update(s, &slot, &raw, 1);
    CHECKF(ir_sampler_get(s, 0) == 8.0, "epsilon before the exponent: %a", ir_sampler_get(s, 0));
    ir_sampler_free(s);
}

/* ir_sampler_valid answers exactly what an update of that priority does
 * (accepted or IR_EINVAL), for exponents below, at and above 1 and values
 * around the stored limit (DBL_MAX / (2 * leaves)), where its shortcut for
 * alpha < 1 skips pow. */
static void test_valid_matches_update(void) {
    const double alphas[] = {0.0, 0.3, 0.6, 0.999999, 1.0, 1.5, 3.0};
    const uint64_t caps[] = {1, 8, 1000};
    for (size_t a = 0; a < sizeof(alphas) / sizeof(alphas[0]); a++) {
        for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
            ir_sampler *s = ir_sampler_new(caps[c], 8, alphas[a], 1e-6, 1);
            CHECK(s != NULL);
            double limit = DBL_MAX / (2.0 * (double)caps[c] * 8.0);
            const double raws[] = {0.0,        1e-300,      0.5,        1.0,       2.0,   1e10,
                                   1e100,      1e300,       limit / 16, limit / 2, limit, limit * 2,
                                   limit * 16, DBL_MAX / 4, DBL_MAX,    INFINITY,  -1.0,  NAN};
            for (size_t r = 0; r < sizeof(raws) / sizeof(raws[0]); r++) {
                uint64_t slot = 0;
                double raw = raws[r];
                int valid = ir_sampler_valid(s, raw);
                int rc = ir_sampler_update(s, &slot, &raw, 1);
                CHECKF(valid == (rc == IR_OK), "alpha %g cap %llu raw %g: valid %d, update %d",
                       alphas[a], (unsigned long long)caps[c], raw, valid, rc);
            }
            ir_sampler_free(s);
        }
    }
}

int main(void) {
    test_construction();
    test_valid_matches_update();
    test_random_ops();
    test_validation();
    test_duplicates();
    test_descent_exact();
    test_zero_never_sampled();
    test_prefix_rounding_guard();
    test_weights();
    test_uniform_fallback();
    test_frequencies();
    test_drift();
    test_seed();
    test_transform();
    test_kernels_agree();
    /* everything again on the portable kernels */
    setenv("IR_SUMTREE_NO_AVX2", "1", 1);
    test_descent_exact();
    test_zero_never_sampled();
    test_prefix_rounding_guard();
    test_weights();
    test_frequencies();
    unsetenv("IR_SUMTREE_NO_AVX2");
    return checkSummary();
}
