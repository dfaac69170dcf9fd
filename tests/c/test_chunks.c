/* test_chunks.c - the chunk store and TRAJECTORY tables:
 * 10^6 items inserted in batches into two tables that share chunks (a ring
 * table with fifo eviction and a general table with a uniform remover and
 * MAX_TIMES_SAMPLED, so items go at random), over streams whose episodes end
 * at random. Checked on the way: every chunk's count equals the references
 * live items and streams hold on it, the store's counters match, sampled
 * items assemble the steps they reference. At the end, with the tables
 * dropped and the streams gone, no chunk, reference or byte is left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "chunk_store.h" /* white box: the engine's storage */
#include "chunks.h"
#include "replay.h"
#include "table.h"

#define NSTREAMS 4
#define S 8
#define HIST 64
#define OB 120 /* obs bytes per step: chunks of 960 B, worth compressing */

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

/* the value every byte of (stream, episode, step, field) holds */
static uint8_t stepByte(int st, uint64_t ep, uint64_t step, uint32_t f) {
    return (uint8_t)(st * 31 + ep * 17 + step * 7 + f * 3 + 1);
}

static uint64_t episodes[NSTREAMS];

/* walk every live item of t: add its references to counts[handle] */
static uint64_t countRefs(const ir_table *t, uint32_t *counts) {
    uint64_t refs = 0;
    uint64_t n = tableSize(t);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot = t->general ? t->dense[i] : (t->oldest_id + i) % t->o.capacity;
        const char *rec = t->arena + t->slots[slot].off;
        uint32_t ncols = chunkItemCols(rec);
        for (uint32_t k = 0; k < ncols; k++) {
            uint32_t hs[64];
            uint32_t nch = chunkItemColChunks(rec, k, hs, 64);
            CHECK(nch <= 64);
            for (uint32_t j = 0; j < nch; j++) {
                counts[hs[j]]++;
                refs++;
            }
        }
    }
    return refs;
}

static void checkConsistent(ir_chunk_store *s, ir_table **tabs, int ntabs, const char *when) {
    uint32_t *counts = calloc(s->used + 1, sizeof(uint32_t));
    uint64_t refs = 0;
    for (int i = 0; i < ntabs; i++) refs += countRefs(tabs[i], counts);
    for (ir_stream *st = s->streams; st; st = st->next)
        for (size_t i = 0; i < (size_t)st->nfields * st->ring; i++)
            if (st->held[i]) counts[st->held[i]]++;
    uint64_t live = 0, bytes = 0, bad = 0;
    for (uint32_t h = 1; h < s->used; h++) {
        if (s->c[h].refs) live++, bytes += s->c[h].bytes;
        if (s->c[h].refs != counts[h]) bad++;
    }
    CHECKF(bad == 0, "%s: %llu chunks whose count is not their references", when,
           (unsigned long long)bad);
    CHECKF(refs == s->references, "%s: %llu references in items, store says %llu", when,
           (unsigned long long)refs, (unsigned long long)s->references);
    CHECKF(live == s->chunks && bytes == s->chunk_bytes,
           "%s: %llu live chunks of %llu B, store "
           "says %llu of %llu B",
           when, (unsigned long long)live, (unsigned long long)bytes, (unsigned long long)s->chunks,
           (unsigned long long)s->chunk_bytes);
    free(counts);
}

int main(void) {
    ir_chunk_store *s = chunkStoreNew();
    ir_tables *ts = tablesNew();
    ir_table *tabs[2];
    const char *err;
    ir_table_opts o1 = {
        .capacity = 5000, .alpha = 1, .beta = 0.4, .maxbytes = 1 << 22, .fanout = 4, .seed = 1};
    ir_table_opts o2 = {.capacity = 3000,
                        .alpha = 1,
                        .beta = 0.4,
                        .maxbytes = 1 << 22,
                        .fanout = 4,
                        .seed = 2,
                        .sampler = IR_SEL_PRIORITIZED,
                        .remover = IR_SEL_UNIFORM,
                        .max_times_sampled = 3};
    CHECK(tableCreate(ts, "ring", 4, &o1, &tabs[0], &err) == 0);
    CHECK(tableCreate(ts, "gen", 3, &o2, &tabs[1], &err) == 0);
    for (int i = 0; i < 2; i++) tabs[i]->traj = s;
    CHECK(tabs[1]->general && !tabs[0]->general);

    ir_field f[2] = {{.name = "obs", .dtype = IR_DT_U8, .ndim = 1, .shape = {OB}, .step_bytes = OB},
                     {.name = "rew", .dtype = IR_DT_F32, .ndim = 0, .step_bytes = 4}};
    ir_stream *st[NSTREAMS];
    char name[16];
    for (int i = 0; i < NSTREAMS; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        /* streams 0 and 1 compress their full chunks when this build can */
        int z = i < 2 && chunkCanCompress() ? 1 : 0;
        CHECK(streamDeclare(s, name, strlen(name), f, 2, S, HIST, z, &st[i], &err) == 0);
    }
    /* a second declaration with the same signature is the same stream; another is refused */
    ir_stream *again;
    CHECK(streamDeclare(s, "s0", 2, f, 2, S, HIST, st[0]->zlevel, &again, &err) == 0 &&
          again == st[0]);
    CHECK(streamDeclare(s, "s0", 2, f, 1, S, HIST, st[0]->zlevel, &again, &err) == -1);

    static char obs[64 * OB], rew[64 * 4];
    static char rec[4096], got[32 * OB];
    const uint64_t total = 1000000;
    uint64_t inserted = 0, batches = 0, copies_bad = 0, deferred_frees = 0;
    char errbuf[256];
    while (inserted < total) {
        int k = (int)(rnd() % NSTREAMS);
        ir_stream *x = st[k];
        /* append 1..16 steps */
        uint64_t n = 1 + rnd() % 16;
        for (uint64_t i = 0; i < n; i++) {
            memset(obs + i * OB, stepByte(k, episodes[k], x->nsteps + i, 0), OB);
            float r = (float)stepByte(k, episodes[k], x->nsteps + i, 1);
            memcpy(rew + i * 4, &r, 4);
        }
        const char *data[2] = {obs, rew};
        CHECK(streamAppend(s, x, n, data) == 0);
        /* a batch of items over recent steps: obs[t-3..t], rew[t..t+2] style windows */
        int nb = 1 + (int)(rnd() % 8);
        for (int b = 0; b < nb && inserted < total; b++) {
            uint64_t oldest = streamOldestStep(x);
            uint64_t span = x->nsteps - oldest;
            uint32_t l1 = 1 + (uint32_t)(rnd() % 20), l2 = 1 + (uint32_t)(rnd() % 4);
            if (l1 > span) l1 = (uint32_t)span;
            if (l2 > span) l2 = (uint32_t)span;
            ir_colref cols[2] = {{x, 0, x->nsteps - l1 - rnd() % (span - l1 + 1), l1},
                                 {x, 1, x->nsteps - l2, l2}};
            if (cols[0].first < oldest) cols[0].first = oldest;
            CHECK(chunkColCheck(&cols[0], errbuf, sizeof(errbuf)) == 0);
            CHECK(chunkColCheck(&cols[1], errbuf, sizeof(errbuf)) == 0);
            ir_table *t = tabs[rnd() % 2];
            size_t len = chunkItemSize(cols, 2);
            chunkItemMake(s, cols, 2, rec);
            ir_item_in it = {.data = rec, .len = len, .raw = (double)(rnd() % 100) + 1};
            uint64_t id;
            CHECK(tableAdd(t, &it, 1, &id, &err) == 0);
            inserted++;
        }
        /* bad references are refused */
        ir_colref past = {x, 0, x->nsteps, 1};
        CHECK(chunkColCheck(&past, errbuf, sizeof(errbuf)) == -1);
        if (x->nsteps > HIST + 2 * S) {
            ir_colref freed = {x, 0, 0, 1};
            CHECK(chunkColCheck(&freed, errbuf, sizeof(errbuf)) == -1);
        }
        /* sample from the general table: draws may remove items (k = 3) */
        if (rnd() % 4 == 0 && tableSize(tabs[1]) > 0 && tabs[1]->draws_left >= 8) {
            /* the draws free nothing and allocate nothing: the removed
             * items' chunks wait in `pending`, reserved before the draws */
            CHECK(chunkDeferBegin(s) == 0 && s->pending_cap >= s->chunks);
            const uint32_t *p0 = s->pending;
            size_t cap0 = s->pending_cap;
            uint64_t live0 = s->chunks;
            uint64_t consumed0 = tabs[1]->consumed;
            CHECK(tableSample(tabs[1], 8, 0.4) == IR_OK);
            CHECK(s->pending == p0 && s->pending_cap == cap0 && s->chunks == live0);
            if (tabs[1]->consumed > consumed0 && s->npending) deferred_frees++;
            for (int i = 0; i < 8; i++) {
                const char *r = tabs[1]->arena + tabs[1]->slots[tabs[1]->scratch_slots[i]].off;
                uint32_t sb, l;
                chunkItemCol(r, 0, &sb, &l);
                chunkItemCopy(s, r, 0, got);
                /* consecutive steps: bytes differ by 7 per step within one episode */
                for (uint32_t q = 1; q < l; q++)
                    if ((uint8_t)(got[q * sb] - got[(q - 1) * sb]) != 7 && copies_bad++ < 3)
                        fprintf(stderr, "col len %u sb %u q %u: %u %u\n", l, sb, q,
                                (uint8_t)got[(q - 1) * sb], (uint8_t)got[q * sb]);
            }
            size_t np = s->npending;
            chunkCollect(s);
            CHECK(s->chunks + np == live0 && !s->defer);
        }
        if (rnd() % 64 == 0) {
            streamEndEpisode(s, x);
            episodes[k]++;
        }
        if (++batches % 20000 == 0) checkConsistent(s, tabs, 2, "during");
    }
    /* a batch longer than the stream keeps: only its last HISTORY-odd steps stay */
    {
        static char bo[1000 * OB], br[1000 * 4];
        for (int i = 0; i < 1000; i++) memset(bo + i * OB, (uint8_t)i, OB);
        const char *data[2] = {bo, br};
        streamEndEpisode(s, st[0]);
        CHECK(streamAppend(s, st[0], 1000, data) == 0 && st[0]->nsteps == 1000);
        uint64_t oldest = streamOldestStep(st[0]);
        CHECK(oldest <= 1000 - HIST && oldest > 0);
        ir_colref c = {st[0], 0, oldest, (uint32_t)(1000 - oldest)};
        CHECK(chunkColCheck(&c, errbuf, sizeof(errbuf)) == 0);
        chunkItemMake(s, &c, 1, rec);
        static char all[1000 * OB];
        chunkItemCopy(s, rec, 0, all);
        int ok = 1;
        for (uint64_t i = 0; i < 1000 - oldest; i++)
            ok &= (uint8_t)all[i * OB] == (uint8_t)(oldest + i);
        CHECK(ok);
        chunkItemRelease(s, rec, (uint32_t)chunkItemSize(&c, 1));
    }
    CHECKF(copies_bad == 0, "%llu sampled columns not consecutive steps",
           (unsigned long long)copies_bad);
    checkConsistent(s, tabs, 2, "after the inserts");
    CHECK(tabs[0]->evictions > 0 && tabs[1]->evictions > 0 && tabs[1]->consumed > 0);
    CHECKF(deferred_frees > 0, "no sample deferred a chunk's free"); /* the case above happened */
    CHECK(!chunkCanCompress() || s->chunks_compressed > 0);
    printf("%llu compressed chunks (%llu B raw in %llu B)\n",
           (unsigned long long)s->chunks_compressed, (unsigned long long)s->raw_bytes_compressed,
           (unsigned long long)s->chunk_bytes);
    printf("%llu items, %llu evictions + %llu consumed; %llu chunks made, %llu live\n",
           (unsigned long long)inserted,
           (unsigned long long)(tabs[0]->evictions + tabs[1]->evictions),
           (unsigned long long)tabs[1]->consumed, (unsigned long long)s->chunks_made,
           (unsigned long long)s->chunks);
    /* baseline: drop both tables and the streams */
    tableDrop(ts, "ring", 4);
    CHECK(s->references == 0 || tableSize(tabs[1]) > 0);
    tableDrop(ts, "gen", 3);
    CHECK(s->references == 0);
    for (int i = 0; i < NSTREAMS; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        CHECK(streamDrop(s, name, strlen(name)) == 0);
    }
    CHECKF(s->chunks == 0 && s->chunk_bytes == 0 && s->references == 0 && s->nstreams == 0,
           "left: %llu chunks, %llu B, %llu references", (unsigned long long)s->chunks,
           (unsigned long long)s->chunk_bytes, (unsigned long long)s->references);
    /* every header is back on the free list */
    uint32_t nfree = 0;
    for (uint32_t h = s->free_head; h; h = s->c[h].next_free) nfree++;
    CHECKF(nfree + 1 == s->used, "%u headers free of %u", nfree, s->used - 1);
    tablesFree(ts);
    chunkStoreFree(s);
    return checkSummary();
}
