/* selector_model.h - the selectors' shared C test harness (each selector's
 * own test, tests/c/selectors/test_sel_<name>.c, runs it for its selector):
 * replay tables with a sampler/remover pair and
 * MAX_TIMES_SAMPLED, driven directly and checked against a plain model after
 * every operation: which items live, their bytes, priorities and times
 * sampled, the exact item a fifo/lifo/minheap/maxheap draws or removes, the
 * arena's byte count under MAXBYTES (general mode compacts), and exact stale
 * ids in REPLAY.UPDATE (batches of several ids: the heaps re-key them all). Also 10^6 draws of the uniform and prioritized
 * selectors in general mode against their exact distributions (total
 * variation below 0.01). Run under ASan/UBSan by `make test-c`.
 * Header-only (static functions): each test is one small main over it.
 */
#ifndef IR_SELECTOR_MODEL_H
#define IR_SELECTOR_MODEL_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "replay.h"
#include "table.h" /* white box: the tables' storage */

#define CAP 24
#define MAXB 1024
#define NMODEL 4096

typedef struct {
    uint64_t id;
    double prio;
    uint32_t times, len;
    unsigned char fill;
    int live;
} mitem;

static mitem model[NMODEL];
static size_t nmodel;
static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t recBytes(const ir_table *t, uint32_t len) {
    uint64_t r = tableItemReserve(len);
    return t->general ? r + 16 : r;
}

/* The model's choice of a deterministic selector, or -1. */
static long pick(int sel) {
    long best = -1;
    for (size_t i = 0; i < nmodel; i++) {
        if (!model[i].live) continue;
        if (best < 0) {
            best = (long)i;
            continue;
        }
        const mitem *a = &model[i], *b = &model[best];
        int better = 0;
        if (sel == IR_SEL_FIFO) better = a->id < b->id;
        else if (sel == IR_SEL_LIFO) better = a->id > b->id;
        else if (sel == IR_SEL_MINHEAP)
            better = a->prio < b->prio || (a->prio == b->prio && a->id < b->id);
        else if (sel == IR_SEL_MAXHEAP)
            better = a->prio > b->prio || (a->prio == b->prio && a->id < b->id);
        if (better) best = (long)i;
    }
    return best;
}

static long findId(uint64_t id) {
    for (size_t i = 0; i < nmodel; i++)
        if (model[i].id == id) return (long)i;
    return -1;
}

static size_t liveCount(void) {
    size_t n = 0;
    for (size_t i = 0; i < nmodel; i++) n += model[i].live;
    return n;
}

static void checkAgainstModel(ir_table *t, const char *what) {
    uint64_t bytes = 0;
    size_t live = 0;
    for (size_t i = 0; i < nmodel; i++) {
        const mitem *m = &model[i];
        uint64_t slot = tableSlotOf(t, m->id);
        if (!m->live) {
            CHECKF(slot == UINT64_MAX, "%s: removed id %llu still has a slot", what,
                   (unsigned long long)m->id);
            continue;
        }
        live++;
        bytes += recBytes(t, m->len);
        CHECKF(slot != UINT64_MAX, "%s: live id %llu has no slot", what, (unsigned long long)m->id);
        if (slot == UINT64_MAX) continue;
        ir_item_view v;
        tableItem(t, m->id, &v);
        int same = v.len == m->len && v.stored == m->prio && v.times == m->times;
        for (uint32_t k = 0; same && k < v.len; k++) same = (unsigned char)v.data[k] == m->fill;
        CHECKF(same, "%s: id %llu: len %u/%u prio %g/%g times %u/%u", what,
               (unsigned long long)m->id, v.len, m->len, v.stored, m->prio, v.times, m->times);
    }
    CHECKF(tableSize(t) == live, "%s: size %llu, model %zu", what, (unsigned long long)tableSize(t),
           live);
    CHECKF(t->bytes_used == bytes && bytes <= t->o.maxbytes, "%s: bytes %llu, model %llu", what,
           (unsigned long long)t->bytes_used, (unsigned long long)bytes);
}

static void runCombo(int sampler, int remover, uint32_t k, int steps) {
    ir_tables *ts = tablesNew();
    ir_table_opts o = {.capacity = CAP,
                       .alpha = 1.0,
                       .beta = 0.5,
                       .epsilon = 0,
                       .maxbytes = MAXB,
                       .fanout = 4,
                       .seed = 7,
                       .sampler = sampler,
                       .remover = remover,
                       .max_times_sampled = k};
    ir_table *t;
    const char *err;
    char what[96];
    snprintf(what, sizeof(what), "%s/%s/k=%u", tableSelectorName(sampler),
             tableSelectorName(remover), k);
    CHECKF(tableCreate(ts, "t", 1, &o, &t, &err) == 0, "%s: create", what);
    nmodel = 0;
    static char buf[200];
    for (int step = 0; step < steps; step++) {
        int op = (int)(rnd() % 10);
        if (op < 5 && nmodel < NMODEL) { /* insert one item */
            uint32_t len = (uint32_t)(rnd() % 120);
            unsigned char fill = (unsigned char)(rnd() & 0xff);
            double prio = (double)(rnd() % 6);
            memset(buf, fill, len);
            /* which items the table must remove first, for deterministic removers */
            uint64_t need = recBytes(t, len);
            uint64_t used = t->bytes_used;
            size_t live = liveCount();
            int deterministic = remover != IR_SEL_UNIFORM && remover != IR_SEL_PRIORITIZED;
            long expect[CAP + 1];
            size_t nexp = 0;
            if (t->general && deterministic) {
                while (live == CAP || used + need > MAXB) {
                    long v = pick(remover);
                    expect[nexp++] = v;
                    model[v].live = 0;
                    used -= recBytes(t, model[v].len);
                    live--;
                }
                for (size_t e = 0; e < nexp; e++) model[expect[e]].live = 1; /* checked below */
            }
            ir_item_in it = {buf, len, prio, 0};
            uint64_t id;
            CHECKF(tableAdd(t, &it, 1, &id, &err) == 0, "%s: add", what);
            for (size_t e = 0; e < nexp; e++) {
                CHECKF(tableSlotOf(t, model[expect[e]].id) == UINT64_MAX,
                       "%s: remover kept id %llu", what, (unsigned long long)model[expect[e]].id);
                model[expect[e]].live = 0;
            }
            /* whatever else went (uniform/prioritized removers, ring evictions) */
            for (size_t i = 0; i < nmodel; i++)
                if (model[i].live && tableSlotOf(t, model[i].id) == UINT64_MAX) model[i].live = 0;
            model[nmodel++] = (mitem){id, prio, 0, len, fill, 1};
        } else if (op < 8) { /* sample a few */
            size_t n = 1 + rnd() % 4;
            int rc = tableSample(t, n, 0.5);
            size_t live = liveCount();
            uint64_t draws = 0;
            for (size_t i = 0; i < nmodel; i++)
                if (model[i].live) draws += k ? k - model[i].times : 1;
            if (live == 0 || (k && draws < n)) {
                CHECKF(rc == IR_EEMPTY, "%s: sample of %zu with %llu draws left gave %d", what, n,
                       (unsigned long long)draws, rc);
                continue;
            }
            CHECKF(rc == IR_OK, "%s: sample rc %d", what, rc);
            ir_sample_view v;
            tableSampleView(t, n, &v);
            CHECK(v.n == n && v.ids == t->scratch_ids && v.times == t->scratch_times);
            for (size_t d = 0; d < n; d++) {
                long want = -1;
                if (sampler != IR_SEL_UNIFORM && sampler != IR_SEL_PRIORITIZED)
                    want = pick(sampler);
                long got = findId(t->scratch_ids[d]);
                CHECKF(got >= 0 && model[got].live, "%s: drew a dead id", what);
                if (got < 0) break;
                /* the view's item is the drawn one's bytes, in place */
                int same = v.items[d].len == model[got].len;
                for (size_t q = 0; same && q < v.items[d].len; q++)
                    same = (unsigned char)v.items[d].data[q] == model[got].fill;
                CHECKF(same, "%s: draw %zu: the view's item is not id %llu's bytes", what, d,
                       (unsigned long long)model[got].id);
                if (want >= 0)
                    CHECKF(got == want, "%s: draw %zu got id %llu, want %llu", what, d,
                           (unsigned long long)model[got].id, (unsigned long long)model[want].id);
                if (sampler == IR_SEL_PRIORITIZED && !t->general)
                    CHECKF(model[got].prio > 0 || tableSize(t) > 0, "%s", what);
                model[got].times++;
                CHECKF(t->scratch_times[d] == model[got].times, "%s: times %u/%u", what,
                       t->scratch_times[d], model[got].times);
                if (k && model[got].times >= k) model[got].live = 0;
            }
        } else { /* update a batch of distinct ids, live and removed ones */
            if (!nmodel) continue;
            size_t nb = 1 + rnd() % 4, m = 0;
            long idx[4];
            uint64_t ids[4];
            float raw[4];
            size_t want = 0;
            for (size_t b = 0; b < nb; b++) {
                long i = (long)(rnd() % nmodel), dup = 0;
                for (size_t q = 0; q < m; q++) dup |= idx[q] == i;
                if (dup) continue;
                idx[m] = i;
                ids[m] = model[i].id;
                raw[m] = (float)(rnd() % 6);
                want += model[i].live ? 1 : 0;
                m++;
            }
            long applied = tableUpdate(t, ids, raw, m, &err);
            CHECKF(applied == (long)want, "%s: update of %zu ids (%zu live) applied %ld", what, m,
                   want, applied);
            for (size_t q = 0; q < m; q++)
                if (model[idx[q]].live) model[idx[q]].prio = raw[q];
        }
        checkAgainstModel(t, what);
        if (failed > 20) break;
    }
    tablesFree(ts);
}

/* 10^6 draws: total variation from the exact distribution. */
static __attribute__((unused)) void distribution(int sampler) {
    ir_tables *ts = tablesNew();
    ir_table_opts o = {.capacity = 64,
                       .alpha = 1.0,
                       .beta = 0.4,
                       .epsilon = 0,
                       .maxbytes = 1 << 16,
                       .fanout = 8,
                       .seed = 11,
                       .sampler = sampler,
                       .remover = IR_SEL_UNIFORM};
    ir_table *t;
    const char *err;
    CHECK(tableCreate(ts, "d", 1, &o, &t, &err) == 0);
    enum { N = 50 };
    ir_item_in it[N];
    uint64_t ids[N];
    double mass = 0;
    for (int i = 0; i < N; i++) {
        it[i] = (ir_item_in){"x", 1, (double)(i % 10), 0};
        mass += i % 10;
    }
    CHECK(tableAdd(t, it, N, ids, &err) == 0);
    static double count[N];
    memset(count, 0, sizeof(count));
    for (int b = 0; b < 10; b++) {
        CHECK(tableSample(t, 100000, 0.4) == IR_OK);
        for (size_t d = 0; d < 100000; d++) count[t->scratch_ids[d] - ids[0]] += 1;
    }
    double tv = 0;
    for (int i = 0; i < N; i++) {
        double exact = sampler == IR_SEL_UNIFORM ? 1.0 / N : (i % 10) / mass;
        tv += fabs(count[i] / 1e6 - exact) / 2;
    }
    CHECKF(tv < 0.01, "%s: total variation %g", tableSelectorName(sampler), tv);
    printf("%s sampler, general mode: total variation %.5f over 10^6 draws\n",
           tableSelectorName(sampler), tv);
    tablesFree(ts);
}

/* Every combination with sel as the sampler or the remover, with
 * MAX_TIMES_SAMPLED 0, 1 and 2 (each is the general mode's and, for a fifo
 * remover without it, the ring mode's). */
static void runSelectorCombos(int sel, int steps) {
    for (int other = IR_SEL_PRIORITIZED; other < IR_SEL_COUNT; other++)
        for (uint32_t k = 0; k <= 2; k++) {
            runCombo(sel, other, k, steps);
            if (other != sel) runCombo(other, sel, k, steps);
        }
}

/* A QUEUE-like table (MAX_TIMES_SAMPLED 1, uniform remover) of items with
 * priorities 3, 1, 2, 1 drains in exactly the order `want` (indices of those
 * four) gives: the ordering selectors' own test. */
static __attribute__((unused)) void checkDrainOrder(int sel, const int *want) {
    ir_tables *ts = tablesNew();
    ir_table_opts o = tableOptsDefault();
    o.capacity = 8;
    o.maxbytes = 4096;
    o.alpha = 1.0;
    o.epsilon = 0;
    o.sampler = sel;
    o.remover = IR_SEL_UNIFORM;
    o.max_times_sampled = 1;
    ir_table *t;
    const char *err;
    CHECK(tableCreate(ts, "o", 1, &o, &t, &err) == 0);
    ir_item_in it[4] = {{"a", 1, 3, 0}, {"b", 1, 1, 0}, {"c", 1, 2, 0}, {"d", 1, 1, 0}};
    uint64_t ids[4];
    CHECK(tableAdd(t, it, 4, ids, &err) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK(tableSample(t, 1, 0.4) == IR_OK);
        CHECKF(t->scratch_ids[0] == ids[want[i]], "draw %d: id %llu, want %llu", i,
               (unsigned long long)t->scratch_ids[0], (unsigned long long)ids[want[i]]);
    }
    CHECK(tableSample(t, 1, 0.4) == IR_EEMPTY);
    tablesFree(ts);
}

#endif
