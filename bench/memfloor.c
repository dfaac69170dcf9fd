/* memfloor.c - what this machine allows REPLAY.SAMPLE and REPLAY.UPDATE of 512
 * (issue 21, item 4: at most 25 and 15 us of server time at 2M items of 128 B).
 *
 * Those goals are absolute; this measures, on the same machine and in the same
 * run, the part of that time that no implementation keeping the same data can
 * avoid, so that a NOT MET comes with its floor:
 *
 *   sample  the cache lines one stratified draw of 512 reads, and nothing else:
 *           per draw the child block on every level of a K = 8 sum tree of N
 *           leaves (doubles, level by level, each level 64-byte aligned, as
 *           libinreplay lays it out), the slot's 16-byte record (offset,
 *           length, times sampled) and the item's B bytes in a ring of items
 *           8-byte aligned, as a ring-mode table keeps them. The slots are
 *           sorted (a stratified batch ascends), every address is known before
 *           the first load and the loads are independent, so the misses
 *           overlap as far as the machine lets them. No descent, no reply.
 *   update  the same tree path read and written back for 512 sorted random
 *           slots (a leaf and its ancestors), addresses again known in advance;
 *   pow     512 calls of libm's pow(x, 0.6), which REPLAY.UPDATE's priority
 *           transform makes (stored priorities equal pow()'s: sumtree.c).
 *
 * Each figure is the median over --reps passes, each over fresh random slots;
 * the arrays stay allocated between passes, so caches hold what they would
 * hold in a server sampling the same table over and over.
 *
 *     memfloor [--items N] [--item-bytes B] [--reps R]
 *
 * prints one JSON object: {"items", "item_bytes", "batch", "fanout", "depth",
 * "sample_us", "tree_us", "update_us", "pow_us"}.
 * bench/server_time.py runs it and bench/report.py prints it beside item 4's
 * verdicts. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BATCH 512
#define K 8 /* the default fanout (IR_DEFAULT_FANOUT) */
#define MAX_LEVELS 24
#define RECORD_BYTES 16 /* sizeof(ir_slot) */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_us(uint64_t *t, size_t n) {
    qsort(t, n, sizeof(*t), cmp_u64);
    return (double)t[n / 2] / 1e3;
}

/* touched once, on huge pages where the kernel gives them (as the server's
 * tree, slot records and arena are) */
static unsigned char *region(size_t bytes) {
    bytes = (bytes + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("memfloor: mmap");
        exit(1);
    }
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 1, bytes);
    return p;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--items N] [--item-bytes B] [--reps R]\n", argv0);
    exit(2);
}

int main(int argc, char **argv) {
    uint64_t items = 2000000, item_bytes = 128;
    size_t reps = 2000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--items") && i + 1 < argc) items = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--item-bytes") && i + 1 < argc)
            item_bytes = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = strtoul(argv[++i], NULL, 10);
        else usage(argv[0]);
    }
    if (items < K || items > (1ULL << 32) || item_bytes > (1ULL << 20) || reps < 1) usage(argv[0]);

    /* the tree's levels: level d (1..D) holds nodes[d-1] * K doubles */
    unsigned depth = 1;
    while ((items - 1) >> (3 * depth)) depth++;
    unsigned char *level[MAX_LEVELS + 1];
    for (unsigned d = 1; d <= depth; d++) {
        uint64_t parents = ((items - 1) >> (3 * (depth - d + 1))) + 1;
        level[d] = region(parents * K * sizeof(double));
    }
    const uint64_t stride = (item_bytes + 7) & ~(uint64_t)7; /* reserveLen */
    unsigned char *records = region(items * RECORD_BYTES);
    unsigned char *arena = region(items * (stride ? stride : 8) + 64);

    uint64_t *slots = malloc(BATCH * sizeof(*slots));
    uint64_t *ts = malloc(reps * sizeof(*ts)), *tt = malloc(reps * sizeof(*tt)),
             *tu = malloc(reps * sizeof(*tu)), *tp = malloc(reps * sizeof(*tp));
    double *x = malloc(BATCH * sizeof(*x)), *y = malloc(BATCH * sizeof(*y));
    if (!slots || !ts || !tt || !tu || !tp || !x || !y) return 1;
    volatile uint64_t sink = 0;
    volatile double fsink = 0;

    for (size_t r = 0; r < reps + reps / 10; r++) { /* the first tenth warms up */
        const size_t at = r < reps / 10 ? 0 : r - reps / 10;
        /* the tree path alone */
        for (int i = 0; i < BATCH; i++) slots[i] = rnd() % items;
        qsort(slots, BATCH, sizeof(*slots), cmp_u64);
        uint64_t acc = 0, t0 = now_ns();
        for (int i = 0; i < BATCH; i++)
            for (unsigned d = 1; d <= depth; d++)
                acc += level[d][((slots[i] >> (3 * (depth - d))) & ~(uint64_t)(K - 1)) *
                                sizeof(double)];
        tt[at] = now_ns() - t0;

        /* sample: tree path, record, item (fresh slots) */
        for (int i = 0; i < BATCH; i++) slots[i] = rnd() % items;
        qsort(slots, BATCH, sizeof(*slots), cmp_u64);
        t0 = now_ns();
        for (int i = 0; i < BATCH; i++) {
            const uint64_t s = slots[i];
            for (unsigned d = 1; d <= depth; d++)
                acc += level[d][((s >> (3 * (depth - d))) & ~(uint64_t)(K - 1)) * sizeof(double)];
            acc += records[s * RECORD_BYTES];
            for (uint64_t a = s * stride & ~(uint64_t)63; a < s * stride + item_bytes; a += 64)
                acc += arena[a]; /* every line of the item */
        }
        ts[at] = now_ns() - t0;
        sink += acc;

        /* update: the tree path read and written back, fresh slots */
        for (int i = 0; i < BATCH; i++) slots[i] = rnd() % items;
        qsort(slots, BATCH, sizeof(*slots), cmp_u64);
        t0 = now_ns();
        for (int i = 0; i < BATCH; i++)
            for (unsigned d = 1; d <= depth; d++)
                level[d][((slots[i] >> (3 * (depth - d))) & ~(uint64_t)(K - 1)) * sizeof(double)]++;
        tu[at] = now_ns() - t0;

        /* 512 priorities through libm's pow */
        for (int i = 0; i < BATCH; i++) x[i] = 0.1 + (double)(rnd() >> 11) * 0x1.0p-53 + 1e-6;
        t0 = now_ns();
        for (int i = 0; i < BATCH; i++) y[i] = pow(x[i], 0.6);
        tp[at] = now_ns() - t0;
        fsink = fsink + y[r % BATCH];
    }
    printf("{\"items\": %llu, \"item_bytes\": %llu, \"batch\": %d, \"fanout\": %d, "
           "\"depth\": %u, \"sample_us\": %.2f, \"tree_us\": %.2f, \"update_us\": %.2f, "
           "\"pow_us\": %.2f}\n",
           (unsigned long long)items, (unsigned long long)item_bytes, BATCH, K, depth,
           median_us(ts, reps), median_us(tt, reps),
           median_us(tu, reps), median_us(tp, reps));
    return 0;
}
