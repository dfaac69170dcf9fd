/* sumtree_k.c - micro-benchmark of the sum tree's fanout K.
 *
 * For K in {2,4,8,16,32} and capacities 1e4, 1e5, 1e6, 2e6 (full tree, raw
 * priorities uniform in [0.1, 1.1), alpha 0.6, beta 0.4) it times three
 * batched operations of 512 items and reports the median over many reps:
 *   sample  ir_sampler_sample(512) with importance weights
 *   update  ir_sampler_update(512) at random slots
 *   insert  ir_sampler_update(512) at the next 512 slots of a ring
 *
 * usage: sumtree_k [--quick] [--json] [--reps N] [--batch B]
 *   default output is a table (ns per call of B items); --json prints one
 *   JSON object per line instead: {"k":8,"capacity":..,"sample_ns":..,...}
 */
#include "inreplay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t bench_rng = 0x243f6a8885a308d3ULL;
static uint64_t rnd(void) {
    /* splitmix64 */
    uint64_t z = (bench_rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *t, size_t n) {
    qsort(t, n, sizeof(*t), cmp_u64);
    return t[n / 2];
}

int main(int argc, char **argv) {
    int quick = 0, json = 0;
    size_t reps = 0, batch = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--quick] [--json] [--reps N] [--batch B]\n", argv[0]);
            return 2;
        }
    }
    if (!reps) reps = quick ? 200 : 2000;
    if (!batch) batch = 512;

    static const unsigned ks[] = {2, 4, 8, 16, 32};
    static const uint64_t caps_full[] = {10000, 100000, 1000000, 2000000};
    static const uint64_t caps_quick[] = {10000, 1000000};
    const uint64_t *caps = quick ? caps_quick : caps_full;
    const size_t ncaps = quick ? 2 : 4;

    const size_t fill = 4096;
    uint64_t *slots = malloc(sizeof(uint64_t) * (fill > batch ? fill : batch));
    double *raw = malloc(sizeof(double) * (fill > batch ? fill : batch));
    float *w = malloc(sizeof(float) * batch);
    uint64_t *ts = malloc(sizeof(uint64_t) * reps), *tu = malloc(sizeof(uint64_t) * reps),
             *ti = malloc(sizeof(uint64_t) * reps);
    if (!slots || !raw || !w || !ts || !tu || !ti) return 1;

    /* spin ~0.3 s first so that the CPU's clock has ramped up */
    for (uint64_t t0 = now_ns(); now_ns() - t0 < 300000000ULL;) (void)rnd();

    if (!json) {
        printf("# sum tree fanout: median ns per call of %zu items (%zu reps)\n", batch, reps);
        printf("%4s %9s %6s %12s %12s %12s\n", "K", "capacity", "depth", "sample+w", "update",
               "insert");
    }
    for (size_t c = 0; c < ncaps; c++) {
        const uint64_t cap = caps[c];
        for (size_t k = 0; k < sizeof(ks) / sizeof(ks[0]); k++) {
            ir_sampler *s = ir_sampler_new(cap, ks[k], 0.6, 1e-6, 1);
            if (!s) {
                fprintf(stderr, "ir_sampler_new(%llu, %u) failed\n", (unsigned long long)cap,
                        ks[k]);
                return 1;
            }
            for (uint64_t b = 0; b < cap; b += fill) {
                size_t m = cap - b < fill ? (size_t)(cap - b) : fill;
                for (size_t i = 0; i < m; i++) {
                    slots[i] = b + i;
                    raw[i] = 0.1 + rnd_unit();
                }
                if (ir_sampler_update(s, slots, raw, m) != IR_OK) return 1;
            }
            unsigned depth = 0;
            for (uint64_t x = 1; x < cap; x *= ks[k]) depth++;
            uint64_t head = 0;
            for (size_t r = 0; r < reps + reps / 10; r++) {
                const size_t at = r < reps / 10 ? 0 : r - reps / 10; /* warm-up first */
                uint64_t t0 = now_ns();
                if (ir_sampler_sample(s, batch, 0.4, 0, cap, slots, w) != IR_OK) return 1;
                uint64_t t1 = now_ns();
                ts[at] = t1 - t0;
                for (size_t i = 0; i < batch; i++) {
                    slots[i] = rnd() % cap;
                    raw[i] = 0.1 + rnd_unit();
                }
                t0 = now_ns();
                if (ir_sampler_update(s, slots, raw, batch) != IR_OK) return 1;
                t1 = now_ns();
                tu[at] = t1 - t0;
                for (size_t i = 0; i < batch; i++) {
                    slots[i] = head;
                    head = head + 1 == cap ? 0 : head + 1;
                }
                t0 = now_ns();
                if (ir_sampler_update(s, slots, raw, batch) != IR_OK) return 1;
                t1 = now_ns();
                ti[at] = t1 - t0;
            }
            uint64_t ms = median(ts, reps), mu = median(tu, reps), mi = median(ti, reps);
            if (json)
                printf("{\"k\": %u, \"capacity\": %llu, \"depth\": %u, \"batch\": %zu, "
                       "\"sample_ns\": %llu, \"update_ns\": %llu, \"insert_ns\": %llu}\n",
                       ks[k], (unsigned long long)cap, depth, batch, (unsigned long long)ms,
                       (unsigned long long)mu, (unsigned long long)mi);
            else
                printf("%4u %9llu %6u %12llu %12llu %12llu\n", ks[k], (unsigned long long)cap,
                       depth, (unsigned long long)ms, (unsigned long long)mu,
                       (unsigned long long)mi);
            fflush(stdout);
            ir_sampler_free(s);
        }
    }
    free(slots);
    free(raw);
    free(w);
    free(ts);
    free(tu);
    free(ti);
    return 0;
}
