/* memfloor.c - what this machine allows REPLAY.SAMPLE and REPLAY.UPDATE of 512
 * (at most 25 and 15 us of server time at 2M items of 128 B), and what other
 * layouts of a sampled item's path would allow.
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
 * Candidate layouts (--layout NAME, or all: every one in the same passes).
 * The same figures for other ways of keeping a sampled item's path, so that a
 * layout can be judged by its floor before the engine is changed:
 *
 *   today             today's: the K = 8 tree, a 16-byte record per slot in
 *                     its own array, the item's bytes;
 *   fold              the record folded into the item: an 8-byte header (length,
 *                     times sampled) before the item's bytes, and an array of
 *                     8-byte offsets (a ring of items of mixed lengths cannot
 *                     compute where an item starts);
 *   leafrec           the leaf block with 8-byte records: each block of 8 leaves
 *                     (64 B) followed by its 8 slots' offsets (the next line,
 *                     one 128-byte aligned pair), length and times in the
 *                     item's 8-byte header, no record array;
 *   leafrec16         the whole 16-byte record beside the leaf block (64 B of
 *                     leaves, 128 B of records), no header;
 *   k16               K = 16 everywhere (a child block is two lines);
 *   k16inner          K = 16 inner levels over blocks of 8 leaves (more children
 *                     per level above the leaves), records as today;
 *   k16inner-leafrec  k16inner with leafrec's leaf blocks and header;
 *   leafrec8          leafrec's 128-byte pair with the whole record in its 8
 *                     bytes and no header: offset / 8 in 32 bits, length in 24,
 *                     times sampled in 8 (narrower than today's 32-bit counter,
 *                     so not a drop-in record: it shows what the pair alone buys);
 *   k16-fold          k16 with fold's header and offset array;
 *   norecord          no record at all, as if every offset followed from the slot
 *                     (a ring of equal-length items) and times sampled were not
 *                     kept: a bound for any placement of the record, not a layout
 *                     ("bound": true; bench/report.py judges only layouts).
 *
 * The K = 8 ones keep today's sums, so the sampled slots, byte for byte
 * (sumtree.c: "exact": true); the K = 16 ones change them. A
 * draw's lines are every line of each level's child block (the descent reads
 * all K children), its record's line and its item's lines. In all mode each
 * pass runs every layout in turn (a different one first in each pass), with
 * two untimed batches first so that a layout meets its own data in the caches.
 *
 * Each figure is the median over --reps passes, each over fresh random slots;
 * the arrays stay allocated between passes, so caches hold what they would
 * hold in a server sampling the same table over and over.
 *
 *     memfloor [--items N] [--item-bytes B] [--reps R] [--layout NAME|all]
 *
 * prints one JSON object: {"items", "item_bytes", "batch", "fanout", "depth",
 * "layout", "sample_us", "tree_us", "items_us", "update_us", "pow_us",
 * "layouts"}: the top-level figures are the first measured layout's (today's
 * by default and in all mode), "layouts" maps every measured layout to its
 * {"fanout", "leaf_fanout", "depth", "exact", "bound", "lines_per_draw",
 * "distinct_lines", "sample_us", "tree_us", "items_us", "update_us"}.
 * bench/server_time.py runs it (--layout all) and bench/report.py prints it
 * beside item 4's verdicts and judges the layouts against today's. */
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
#define WARM 2          /* untimed batches of a layout at the start of its pass */
#define PASS_REPS 20    /* timed batches of a layout per pass in all mode */

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

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (unsigned char *const *)a;
    uintptr_t y = (uintptr_t) * (unsigned char *const *)b;
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

/* where a slot's record lives */
enum { REC_ARRAY16, REC_ARRAY8, REC_LEAF8, REC_LEAF16, REC_NONE };

/* One candidate: its name, fanouts, record placement and item header. */
typedef struct candidate {
    const char *name;
    unsigned fanout, leaf_fanout; /* children per node above / at the leaves */
    int rec;
    unsigned header; /* bytes before an item's own */
    int exact;       /* keeps today's K = 8 sums (the same draws) */
    int bound;       /* keeps less than a table must: a bound, not a layout */
} candidate;

static const candidate CANDIDATES[] = {
    {"today", 8, 8, REC_ARRAY16, 0, 1, 0},     {"fold", 8, 8, REC_ARRAY8, 8, 1, 0},
    {"leafrec", 8, 8, REC_LEAF8, 8, 1, 0},     {"leafrec16", 8, 8, REC_LEAF16, 0, 1, 0},
    {"leafrec8", 8, 8, REC_LEAF8, 0, 1, 0},    {"k16", 16, 16, REC_ARRAY16, 0, 0, 0},
    {"k16inner", 16, 8, REC_ARRAY16, 0, 0, 0}, {"k16inner-leafrec", 16, 8, REC_LEAF8, 8, 0, 0},
    {"k16-fold", 16, 16, REC_ARRAY8, 8, 0, 0}, {"norecord", 8, 8, REC_NONE, 0, 1, 1},
};
#define NCAND (sizeof(CANDIDATES) / sizeof(CANDIDATES[0]))

/* The data a table of `items` items keeps, laid out as a candidate lays it. */
typedef struct layout {
    const candidate *c;
    unsigned depth;
    unsigned fan[MAX_LEVELS + 1];         /* block size (children) of level d */
    uint64_t group[MAX_LEVELS + 1];       /* bytes per block of level d */
    unsigned char *level[MAX_LEVELS + 1]; /* level d (1..depth) of the tree */
    unsigned char *records;               /* REC_ARRAY*: the record array */
    unsigned char *arena;                 /* shared by all layouts */
    uint64_t stride, item_bytes;
    /* timings, one per timed batch */
    uint64_t *ts, *tt, *ti, *tu;
    size_t lines, draws, distinct; /* lines of the sampled batches, draws */
} layout;

enum { TREE = 1, RECORD = 2, ITEM = 4 }; /* the parts of a draw's lines */

static void layout_init(layout *L, const candidate *c, uint64_t items, uint64_t item_bytes,
                        unsigned char *records, unsigned char *arena, size_t reps) {
    memset(L, 0, sizeof(*L));
    L->c = c;
    L->item_bytes = item_bytes;
    L->stride = (c->header + item_bytes + 7) & ~(uint64_t)7;
    L->records = records;
    L->arena = arena;
    /* nodes per level, bottom-up: the leaves, then ceil(n / fanout) until 1 */
    uint64_t n[MAX_LEVELS + 2];
    unsigned d = 0;
    n[0] = items;
    do {
        unsigned f = d == 0 ? c->leaf_fanout : c->fanout;
        n[d + 1] = (n[d] + f - 1) / f;
        d++;
    } while (n[d] > 1 && d < MAX_LEVELS);
    L->depth = d;
    for (unsigned lv = 1; lv <= L->depth; lv++) { /* level lv holds n[depth - lv] nodes */
        unsigned below = L->depth - lv;           /* 0 at the leaves */
        L->fan[lv] = below == 0 ? c->leaf_fanout : c->fanout;
        L->group[lv] = L->fan[lv] * sizeof(double);
        if (below == 0 && c->rec == REC_LEAF8) L->group[lv] += L->fan[lv] * 8;
        if (below == 0 && c->rec == REC_LEAF16) L->group[lv] += L->fan[lv] * 16;
        L->level[lv] = region(n[below + 1] * L->group[lv]);
    }
    L->ts = malloc(reps * sizeof(uint64_t));
    L->tt = malloc(reps * sizeof(uint64_t));
    L->ti = malloc(reps * sizeof(uint64_t));
    L->tu = malloc(reps * sizeof(uint64_t));
    if (!L->ts || !L->tt || !L->ti || !L->tu) exit(1);
}

/* The lines a draw of slot s reads, appended at a: the parts in `what`, in the
 * order a draw reads them: every line of the child block on every level, the
 * slot's record, every line of its item (with its header). */
static size_t draw_lines(const layout *L, unsigned char **a, uint64_t s, int what) {
    size_t n = 0;
    uint64_t node[MAX_LEVELS + 1]; /* the path's node on each level */
    node[L->depth] = s;
    for (unsigned d = L->depth; d > 1; d--) node[d - 1] = node[d] / L->fan[d];
    unsigned char *leafblock = L->level[L->depth] + s / L->fan[L->depth] * L->group[L->depth];
    if (what & TREE)
        for (unsigned d = 1; d <= L->depth; d++) {
            unsigned char *b = L->level[d] + node[d] / L->fan[d] * L->group[d];
            for (uint64_t o = 0; o < L->fan[d] * sizeof(double); o += 64) a[n++] = b + o;
        }
    if (what & RECORD) {
        uint64_t k = s % L->fan[L->depth];
        switch (L->c->rec) {
        case REC_ARRAY16: a[n++] = L->records + s * 16; break;
        case REC_ARRAY8: a[n++] = L->records + s * 8; break;
        case REC_LEAF8: a[n++] = leafblock + L->fan[L->depth] * sizeof(double) + k * 8; break;
        case REC_LEAF16: a[n++] = leafblock + L->fan[L->depth] * sizeof(double) + k * 16; break;
        case REC_NONE: break;
        }
    }
    if (!(what & ITEM)) return n;
    const uint64_t end = s * L->stride + L->c->header + L->item_bytes;
    for (uint64_t b = s * L->stride & ~(uint64_t)63; b < end; b += 64) a[n++] = L->arena + b;
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
    for (unsigned d = L->depth; d >= 1; d--) {
        unsigned char *prev = NULL;
        for (int i = 0; i < BATCH; i++) {
            unsigned char *p = L->level[d] + slots[i] / L->fan[d] * L->group[d];
            if (p == prev) continue;
            prev = p;
            for (uint64_t o = 0; o < L->fan[d] * sizeof(double); o += 64) a[n++] = p + o;
        }
        for (int i = 0; i < BATCH; i++) slots[i] /= L->fan[d]; /* the parents */
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

/* distinct cache lines among a batch's n addresses (sorts a) */
static size_t distinct_lines(unsigned char **a, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = (unsigned char *)((uintptr_t)a[i] & ~(uintptr_t)63);
    qsort(a, n, sizeof(*a), cmp_ptr);
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += !i || a[i] != a[i - 1];
    return d;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--items N] [--item-bytes B] [--reps R] [--layout NAME|all]\n",
            argv0);
    fprintf(stderr, "layouts:");
    for (size_t c = 0; c < NCAND; c++) fprintf(stderr, " %s", CANDIDATES[c].name);
    fprintf(stderr, "\n");
    exit(2);
}

int main(int argc, char **argv) {
    uint64_t items = 2000000, item_bytes = 128;
    size_t reps = 2000;
    const char *which = "today";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--items") && i + 1 < argc) items = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--item-bytes") && i + 1 < argc)
            item_bytes = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--layout") && i + 1 < argc) which = argv[++i];
        else usage(argv[0]);
    }
    if (items < K || items > (1ULL << 32) || item_bytes > (1ULL << 20) || reps < 1) usage(argv[0]);
    const candidate *chosen[NCAND];
    size_t nl = 0;
    for (size_t c = 0; c < NCAND; c++)
        if (!strcmp(which, "all") || !strcmp(which, CANDIDATES[c].name))
            chosen[nl++] = &CANDIDATES[c];
    if (!nl) {
        fprintf(stderr, "memfloor: unknown layout '%s'\n", which);
        usage(argv[0]);
    }

    /* one record array and one arena, as big as the largest candidate needs:
     * a batch's 512 random items of millions hardly meet another's */
    unsigned char *records = region(items * RECORD_BYTES);
    const uint64_t max_stride = (8 + item_bytes + 7) & ~(uint64_t)7;
    unsigned char *arena = region(items * max_stride + 64);
    layout *L = calloc(nl, sizeof(*L));
    if (!L) return 1;
    for (size_t l = 0; l < nl; l++)
        layout_init(&L[l], chosen[l], items, item_bytes, records, arena, reps);

    const size_t per_draw = 2 * (MAX_LEVELS + 1) + item_bytes / 64 + 4;
    unsigned char **a = malloc(BATCH * per_draw * sizeof(*a));
    uint64_t *tp = malloc(reps * sizeof(*tp));
    double *x = malloc(BATCH * sizeof(*x)), *y = malloc(BATCH * sizeof(*y));
    if (!a || !tp || !x || !y) return 1;
    volatile uint64_t sink = 0;
    volatile double fsink = 0;

    /* the passes: every layout in turn, for `block` timed batches each after
     * WARM untimed ones; one layout alone has one pass with a tenth warming up */
    const size_t block = nl == 1 ? reps : PASS_REPS;
    const size_t warm = nl == 1 ? reps / 10 : WARM;
    for (size_t done = 0, pass = 0; done < reps; done += block, pass++) {
        const size_t todo = reps - done < block ? reps - done : block;
        for (size_t j = 0; j < nl; j++) {
            layout *M = &L[(pass + j) % nl];
            for (size_t r = 0; r < warm + todo; r++) {
                const size_t at = done + (r < warm ? 0 : r - warm);
                size_t n = batch_lines(M, a, items, TREE); /* the tree path alone */
                uint64_t t0 = now_ns();
                sink += load_all(a, n);
                M->tt[at] = now_ns() - t0;

                n = batch_lines(M, a, items, ITEM); /* the items' lines alone */
                t0 = now_ns();
                sink += load_all(a, n);
                M->ti[at] = now_ns() - t0;

                n = batch_lines(M, a, items, TREE | RECORD | ITEM); /* sample: all of a draw */
                t0 = now_ns();
                sink += load_all(a, n);
                M->ts[at] = now_ns() - t0;
                M->lines += n;
                M->draws += BATCH;
                if (r == warm) M->distinct += distinct_lines(a, n);

                n = update_lines(M, a, items); /* update: the tree path, read and written */
                t0 = now_ns();
                bump_all(a, n);
                M->tu[at] = now_ns() - t0;
            }
        }
        /* 512 priorities through libm's pow, once per pass's batch */
        for (size_t r = 0; r < todo; r++) {
            for (int i = 0; i < BATCH; i++) x[i] = 0.1 + (double)(rnd() >> 11) * 0x1.0p-53 + 1e-6;
            uint64_t t0 = now_ns();
            for (int i = 0; i < BATCH; i++) y[i] = pow(x[i], 0.6);
            tp[done + r] = now_ns() - t0;
            fsink = fsink + y[r % BATCH];
        }
    }
    const size_t passes = (reps + block - 1) / block;
    const layout *F = &L[0];
    const double pow_us = median_us(tp, reps);
    double fs = median_us(F->ts, reps), ft = median_us(F->tt, reps), fi = median_us(F->ti, reps),
           fu = median_us(F->tu, reps);
    printf("{\"items\": %llu, \"item_bytes\": %llu, \"batch\": %d, \"fanout\": %u, "
           "\"depth\": %u, \"layout\": \"%s\", \"sample_us\": %.2f, \"tree_us\": %.2f, "
           "\"items_us\": %.2f, \"update_us\": %.2f, \"pow_us\": %.2f, \"layouts\": {",
           (unsigned long long)items, (unsigned long long)item_bytes, BATCH, F->c->fanout, F->depth,
           F->c->name, fs, ft, fi, fu, pow_us);
    for (size_t l = 0; l < nl; l++) {
        layout *M = &L[l];
        printf("%s\"%s\": {\"fanout\": %u, \"leaf_fanout\": %u, \"depth\": %u, \"exact\": %s, "
               "\"bound\": %s, "
               "\"lines_per_draw\": %.2f, \"distinct_lines\": %.1f, \"sample_us\": %.2f, "
               "\"tree_us\": %.2f, \"items_us\": %.2f, \"update_us\": %.2f}",
               l ? ", " : "", M->c->name, M->c->fanout, M->c->leaf_fanout, M->depth,
               M->c->exact ? "true" : "false", M->c->bound ? "true" : "false",
               (double)M->lines / (double)M->draws, (double)M->distinct / (double)passes / BATCH,
               median_us(M->ts, reps), median_us(M->tt, reps), median_us(M->ti, reps),
               median_us(M->tu, reps));
    }
    printf("}}\n");
    return 0;
}
