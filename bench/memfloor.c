/* memfloor.c - what this machine allows REPLAY.SAMPLE and REPLAY.UPDATE of 512
 * (at most 25 and 15 us of server time at 2M items of 128 B).
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
 *           sorted (a stratified batch ascends) and every line's address is
 *           computed before the clock starts: the timed loop only loads, each
 *           load independent of the others, so the misses overlap as far as
 *           the machine lets them. No descent, no reply.
 *   tree    the tree path alone (fresh slots);
 *   items   the items' own lines alone (fresh slots): what any server that copies
 *           512 items of a table this size out of memory must load, whatever
 *           its index;
 *   update  the tree path of 512 sorted random slots read and written back,
 *           level by level from the leaves, each block once per run of slots
 *           in it (as the tree's fix-up goes), addresses again computed first;
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
 * "sample_us", "tree_us", "items_us", "update_us", "pow_us"}.
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

/* The data a table of `items` items keeps, laid out as the server lays it. */
typedef struct layout {
    unsigned depth;
    unsigned char *level[MAX_LEVELS + 1]; /* level d (1..depth) of the tree */
    unsigned char *records;
    unsigned char *arena;
    uint64_t stride, item_bytes;
} layout;

enum { TREE = 1, RECORD = 2, ITEM = 4 }; /* the parts of a draw's lines */

/* The lines a draw of slot s reads, appended at a: the parts in `what`, in the
 * order a draw reads them: the child block on every level, the slot's record,
 * every line of its item. */
static size_t draw_lines(const layout *L, unsigned char **a, uint64_t s, int what) {
    size_t n = 0;
    if (what & TREE)
        for (unsigned d = 1; d <= L->depth; d++)
            a[n++] =
                L->level[d] + ((s >> (3 * (L->depth - d))) & ~(uint64_t)(K - 1)) * sizeof(double);
    if (what & RECORD) a[n++] = L->records + s * RECORD_BYTES;
    if (!(what & ITEM)) return n;
    for (uint64_t b = s * L->stride & ~(uint64_t)63; b < s * L->stride + L->item_bytes; b += 64)
        a[n++] = L->arena + b;
    return n;
}

/* 512 sorted random slots' lines */
static size_t batch_lines(const layout *L, unsigned char **a, uint64_t items, int what) {
    uint64_t slots[BATCH];
    for (int i = 0; i < BATCH; i++) slots[i] = rnd() % items;
    qsort(slots, BATCH, sizeof(*slots), cmp_u64);
    size_t n = 0;
    for (int i = 0; i < BATCH; i++) n += draw_lines(L, a + n, slots[i], what);
    return n;
}

/* An update of 512 sorted random slots: each level's blocks, leaves first,
 * a block once for a run of slots in it (as the tree's fix-up writes them). */
static size_t update_lines(const layout *L, unsigned char **a, uint64_t items) {
    uint64_t slots[BATCH];
    for (int i = 0; i < BATCH; i++) slots[i] = rnd() % items;
    qsort(slots, BATCH, sizeof(*slots), cmp_u64);
    size_t n = 0;
    for (unsigned d = L->depth; d >= 1; d--)
        for (int i = 0; i < BATCH; i++) {
            unsigned char *p =
                L->level[d] +
                ((slots[i] >> (3 * (L->depth - d))) & ~(uint64_t)(K - 1)) * sizeof(double);
            if (!n || a[n - 1] != p) a[n++] = p;
        }
    return n;
}

static uint64_t load_all(unsigned char *const *a, size_t n) {
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) acc += *a[i];
    return acc;
}

static void bump_all(unsigned char *const *a, size_t n) {
    for (size_t i = 0; i < n; i++) (*a[i])++;
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

    layout L = {.item_bytes = item_bytes, .stride = (item_bytes + 7) & ~(uint64_t)7};
    L.depth = 1; /* the smallest D with K^D >= items */
    while ((items - 1) >> (3 * L.depth)) L.depth++;
    for (unsigned d = 1; d <= L.depth; d++) {
        uint64_t parents = ((items - 1) >> (3 * (L.depth - d + 1))) + 1;
        L.level[d] = region(parents * K * sizeof(double));
    }
    L.records = region(items * RECORD_BYTES);
    L.arena = region(items * (L.stride ? L.stride : 8) + 64);

    const size_t per_draw = MAX_LEVELS + 1 + item_bytes / 64 + 2;
    unsigned char **a = malloc(BATCH * per_draw * sizeof(*a));
    uint64_t *ts = malloc(reps * sizeof(*ts)), *tt = malloc(reps * sizeof(*tt)),
             *tu = malloc(reps * sizeof(*tu)), *tp = malloc(reps * sizeof(*tp)),
             *ti = malloc(reps * sizeof(*ti));
    double *x = malloc(BATCH * sizeof(*x)), *y = malloc(BATCH * sizeof(*y));
    if (!a || !ts || !tt || !tu || !tp || !ti || !x || !y) return 1;
    volatile uint64_t sink = 0;
    volatile double fsink = 0;

    for (size_t r = 0; r < reps + reps / 10; r++) { /* the first tenth warms up */
        const size_t at = r < reps / 10 ? 0 : r - reps / 10;
        size_t n = batch_lines(&L, a, items, TREE); /* the tree path alone */
        uint64_t t0 = now_ns();
        sink += load_all(a, n);
        tt[at] = now_ns() - t0;

        n = batch_lines(&L, a, items, ITEM); /* the items' lines alone */
        t0 = now_ns();
        sink += load_all(a, n);
        ti[at] = now_ns() - t0;

        n = batch_lines(&L, a, items, TREE | RECORD | ITEM); /* sample: all of a draw */
        t0 = now_ns();
        sink += load_all(a, n);
        ts[at] = now_ns() - t0;

        n = update_lines(&L, a, items); /* update: the tree path, read and written */
        t0 = now_ns();
        bump_all(a, n);
        tu[at] = now_ns() - t0;

        /* 512 priorities through libm's pow */
        for (int i = 0; i < BATCH; i++) x[i] = 0.1 + (double)(rnd() >> 11) * 0x1.0p-53 + 1e-6;
        t0 = now_ns();
        for (int i = 0; i < BATCH; i++) y[i] = pow(x[i], 0.6);
        tp[at] = now_ns() - t0;
        fsink = fsink + y[r % BATCH];
    }
    printf("{\"items\": %llu, \"item_bytes\": %llu, \"batch\": %d, \"fanout\": %d, "
           "\"depth\": %u, \"sample_us\": %.2f, \"tree_us\": %.2f, \"items_us\": %.2f, "
           "\"update_us\": %.2f, \"pow_us\": %.2f}\n",
           (unsigned long long)items, (unsigned long long)item_bytes, BATCH, K, L.depth,
           median_us(ts, reps), median_us(tt, reps), median_us(ti, reps), median_us(tu, reps),
           median_us(tp, reps));
    return 0;
}
