/* persist.c - the replay engine's records (persist.h): tables and the chunk
 * store written through a host's ir_pwriter and read back through its
 * ir_preader. The record bodies are the native snapshot's (snapshot.c's head
 * comment has TABL, TABG, TTMS and TLIM; the trajectory records are below).
 *
 * Loading checks every length against what is left of its record and every
 * table against the invariants of tableAdd (replay.c), so a crafted record
 * cannot make the loader read past its record, allocate more than the
 * record holds (tables allocate by capacity and maxbytes, bounded as in
 * REPLAY.CREATE) or build an inconsistent table.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_store.h"
#include "chunks.h"
#include "param.h"
#include "persist.h"
#include "replay.h"
#include "table.h"

#define TABLE_FIXED 140 /* a TABL body without its name and items */
#define ITEM_FIXED 28   /* an item without its bytes */
#define TABG_EXTRA 28   /* consumed, sampler, remover, k, queue (not n) */
#define TLIM_BODY 48

/* ---- the host's writer and reader ------------------------------------------- */

static void wRecord(ir_pwriter *w, const char *tag, uint64_t len) {
    if (!w->err) w->record(w, tag, len);
}
static void wBytes(ir_pwriter *w, const void *p, size_t n) {
    if (!w->err && n) w->bytes(w, p, n);
}
static void wU32(ir_pwriter *w, uint32_t v) {
    if (!w->err) w->u32(w, v);
}
static void wU64(ir_pwriter *w, uint64_t v) {
    if (!w->err) w->u64(w, v);
}
static void wF64(ir_pwriter *w, double d) {
    if (!w->err) w->f64(w, d);
}

static int rRead(ir_preader *r, void *dst, uint64_t n) { return n ? r->bytes(r, dst, n) : 0; }
static int rU32(ir_preader *r, uint32_t *v) { return r->u32(r, v); }
static int rU64(ir_preader *r, uint64_t *v) { return r->u64(r, v); }
static int rF64(ir_preader *r, double *d) { return r->f64(r, d); }
static uint64_t rLeft(const ir_preader *r) { return r->left(r); }

static int bad(ir_ploader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(ir_ploader *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->why, sizeof(L->why), fmt, ap);
    va_end(ap);
    return IR_PERSIST_CORRUPT;
}

static int nomem(ir_ploader *L, const char *what) {
    snprintf(L->why, sizeof(L->why), "out of memory for %s", what);
    return IR_PERSIST_NOMEM;
}

/* ---- tables ------------------------------------------------------------------ */

/* The ids of a table's live items in id order: the window, or (general
 * mode) an allocated sorted list. */
static int tableIds(const ir_table *t, const ir_table_state *st, uint64_t **ids, uint64_t *n) {
    *n = tableLive(t);
    *ids = NULL;
    if (!t->general) return 0;
    *ids = malloc((*n ? *n : 1) * sizeof(uint64_t));
    if (!*ids) return -1;
    tableGeneralIds(t, *ids);
    return 0;
}

static inline uint64_t idAt(const ir_table_state *st, const uint64_t *ids, uint64_t i) {
    return ids ? ids[i] : st->oldest_id + i;
}

static void saveTrajLayout(ir_pwriter *w, const ir_table *t);

void persistSaveTable(ir_pwriter *w, const ir_table *t) {
    ir_table_state st;
    ir_item_view v;
    tableGetState(t, &st);
    int tabg = t->o.sampler != IR_SEL_PRIORITIZED || t->o.remover != IR_SEL_FIFO ||
               t->o.max_times_sampled || t->lim.queue;
    uint64_t *ids, n, sampled = 0;
    if (tableIds(t, &st, &ids, &n) != 0) {
        if (!w->err) w->err = ENOMEM;
        return;
    }
    if (ids) st.oldest_id = n ? ids[0] : st.next_id;
    uint64_t body = TABLE_FIXED + (uint64_t)t->namelen;
    if (tabg) body += TABG_EXTRA + 8;
    for (uint64_t i = 0; i < n; i++) {
        tableItem(t, idAt(&st, ids, i), &v);
        body += ITEM_FIXED + (tabg ? 4 : 0) + (uint64_t)v.len;
        sampled |= v.times;
    }
    wRecord(w, tabg ? IR_PTAG_TABG : IR_PTAG_TABL, body);
    wU64(w, t->namelen);
    wBytes(w, t->name, t->namelen);
    wU64(w, t->o.capacity);
    wU32(w, ir_sampler_fanout(t->sampler));
    wU64(w, t->o.maxbytes);
    wF64(w, t->o.alpha);
    wF64(w, t->o.beta);
    wF64(w, t->o.epsilon);
    wU64(w, t->o.seed);
    wU64(w, st.next_id);
    wU64(w, st.oldest_id);
    wU64(w, st.tail);
    wF64(w, st.max_priority);
    wU64(w, st.inserts);
    wU64(w, st.samples);
    wU64(w, st.sample_calls);
    wU64(w, st.updates);
    wU64(w, st.stale_updates);
    wU64(w, st.evictions);
    if (tabg) {
        wU64(w, st.consumed);
        wU32(w, (uint32_t)t->o.sampler);
        wU32(w, (uint32_t)t->o.remover);
        wU32(w, t->o.max_times_sampled);
        wU64(w, t->lim.queue);
        wU64(w, n);
    }
    for (uint64_t i = 0; i < n && !w->err; i++) {
        tableItem(t, idAt(&st, ids, i), &v);
        wU64(w, v.id);
        wF64(w, v.stored);
        wU64(w, v.off);
        if (tabg) wU32(w, v.times);
        wU32(w, v.len);
        wBytes(w, v.data, v.len);
    }
    if (t->traj) saveTrajLayout(w, t); /* before TTMS and TLIM, which end the table */
    if (!tabg && sampled) {
        wRecord(w, IR_PTAG_TTMS, 8 + 4 * n);
        wU64(w, n);
        for (uint64_t i = 0; i < n && !w->err; i++) {
            tableItem(t, idAt(&st, ids, i), &v);
            wU32(w, v.times);
        }
    }
    free(ids);
    if (t->lim.min_size || t->lim.samples_per_insert > 0 || t->lim.queue ||
        t->o.max_times_sampled) {
        wRecord(w, IR_PTAG_TLIM, TLIM_BODY);
        wU64(w, t->lim.min_size);
        wF64(w, t->lim.samples_per_insert);
        wF64(w, t->lim.error_buffer);
        wU64(w, t->limiter_inserts);
        wU64(w, t->limiter_samples);
        wU64(w, t->waited_us);
    }
}

static int loadTable(ir_ploader *L, int tabg) {
    ir_preader *r = L->r;
    uint64_t namelen;
    char name[IR_TABLE_NAME_MAX + 1];
    if (rU64(r, &namelen)) return bad(L, "table name runs past the record");
    if (namelen == 0 || namelen > IR_TABLE_NAME_MAX)
        return bad(L, "table name length %llu", (unsigned long long)namelen);
    if (rRead(r, name, namelen)) return bad(L, "table name runs past the record");
    name[namelen] = '\0';
    ir_table_opts o;
    ir_table_state st;
    uint32_t fanout;
    memset(&o, 0, sizeof(o));
    if (rU64(r, &o.capacity) || rU32(r, &fanout) || rU64(r, &o.maxbytes) || rF64(r, &o.alpha) ||
        rF64(r, &o.beta) || rF64(r, &o.epsilon) || rU64(r, &o.seed) || rU64(r, &st.next_id) ||
        rU64(r, &st.oldest_id) || rU64(r, &st.tail) || rF64(r, &st.max_priority) ||
        rU64(r, &st.inserts) || rU64(r, &st.samples) || rU64(r, &st.sample_calls) ||
        rU64(r, &st.updates) || rU64(r, &st.stale_updates) || rU64(r, &st.evictions))
        return bad(L, "table header runs past the record");
    o.fanout = fanout;
    st.consumed = 0;
    uint32_t sel[3] = {IR_SEL_PRIORITIZED, IR_SEL_FIFO, 0};
    uint64_t queue = 0, count = 0;
    if (tabg && (rU64(r, &st.consumed) || rU32(r, &sel[0]) || rU32(r, &sel[1]) ||
                 rU32(r, &sel[2]) || rU64(r, &queue) || rU64(r, &count)))
        return bad(L, "table header runs past the record");
    if (!tableSelectorName((int)sel[0]) || !tableSelectorName((int)sel[1]))
        return bad(L, "table '%s': unknown selector", name);
    if (queue && queue != o.capacity)
        return bad(L, "table '%s': queue size is not its capacity", name);
    o.sampler = (int)sel[0];
    o.remover = (int)sel[1];
    o.max_times_sampled = sel[2];
    /* Checked here with REPLAY.CREATE's limits, so that tableCreate can only
     * fail for want of memory. */
    if (tableFind(L->tables, name, (size_t)namelen)) return bad(L, "duplicate table '%s'", name);
    if (o.capacity == 0 || o.capacity > (1ULL << 32)) return bad(L, "table capacity out of range");
    if (fanout != 2 && fanout != 4 && fanout != 8 && fanout != 16 && fanout != 32)
        return bad(L, "table fanout %u", fanout);
    if (o.maxbytes < tableItemReserve(0)) return bad(L, "table maxbytes out of range");
    if (!(o.alpha >= 0 && isfinite(o.alpha)) || !(o.beta >= 0 && isfinite(o.beta)) ||
        !(o.epsilon >= 0 && isfinite(o.epsilon)))
        return bad(L, "table alpha, beta or epsilon out of range");
    if (st.oldest_id > st.next_id) return bad(L, "table oldest_id > next_id");
    int general = o.remover != IR_SEL_FIFO || o.max_times_sampled;
    uint64_t n = general ? count : st.next_id - st.oldest_id;
    if (tabg && n != count) return bad(L, "table '%s': item count is not the id window", name);
    if (n > o.capacity || n > rLeft(r) / ITEM_FIXED)
        return bad(L, "table item count %llu larger than its capacity or the record",
                   (unsigned long long)n);
    ir_table *t;
    const char *err;
    if (tableCreate(L->tables, name, (size_t)namelen, &o, &t, &err) != 0)
        return nomem(L, "a table of this capacity and maxbytes");
    t->lim.queue = queue;
    if (tableLoadBegin(&L->tl, t, &st, &err) != 0) return bad(L, "table '%s': %s", name, err);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id, off;
        uint32_t len, times = 0;
        double stored;
        if (rU64(r, &id) || rF64(r, &stored) || rU64(r, &off) || (tabg && rU32(r, &times)) ||
            rU32(r, &len))
            return bad(L, "table '%s': item %llu runs past the record", name,
                       (unsigned long long)i);
        if (len > rLeft(r))
            return bad(L, "table '%s': item length %u runs past the record", name, len);
        char *dst = general ? tableLoadGeneral(&L->tl, id, stored, times, len, &err)
                            : tableLoadItem(&L->tl, id, stored, off, len, &err);
        if (dst && !general)
            t->slots[tableSlotOf(t, id)].times = times; /* tableLoadItem made it live */
        if (!dst) return bad(L, "table '%s': item %llu: %s", name, (unsigned long long)id, err);
        if (rRead(r, dst, len))
            return bad(L, "table '%s': item %llu runs past the record", name,
                       (unsigned long long)id);
    }
    if (tableLoadEnd(&L->tl, &err) != 0) return bad(L, "table '%s': %s", name, err);
    L->ntables++;
    L->last_table = t;
    return IR_PERSIST_OK;
}

static int loadTimes(ir_ploader *L) {
    ir_preader *r = L->r;
    ir_table *t = L->last_table;
    uint64_t n;
    if (!t || t->general) return bad(L, "TTMS record without a TABL before it");
    if (rU64(r, &n) || n != tableLive(t) || n > rLeft(r) / 4)
        return bad(L, "table '%s': times sampled do not match its items", t->name);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v;
        if (rU32(r, &v)) return bad(L, "table '%s': times sampled run past the record", t->name);
        t->slots[(t->oldest_id + i) % t->o.capacity].times = v;
    }
    return IR_PERSIST_OK;
}

static int loadLimiter(ir_ploader *L) {
    ir_preader *r = L->r;
    ir_table *t = L->last_table;
    if (!t) return bad(L, "TLIM record without a table before it");
    ir_limiter_opts lim;
    uint64_t ins, smp, waited;
    const char *err;
    if (rU64(r, &lim.min_size) || rF64(r, &lim.samples_per_insert) || rF64(r, &lim.error_buffer) ||
        rU64(r, &ins) || rU64(r, &smp) || rU64(r, &waited))
        return bad(L, "table '%s': limiter runs past the record", t->name);
    lim.queue = t->lim.queue; /* from its TABG record */
    if (tableLimiterCheck(&lim, t->o.capacity, &err) != 0)
        return bad(L, "table '%s': limiter: %s", t->name, err);
    t->lim = lim;
    t->limiter_inserts = ins;
    t->limiter_samples = smp;
    t->waited_us = waited;
    L->last_table = NULL; /* one TLIM per table */
    return IR_PERSIST_OK;
}

/* ---- trajectories --------------------------------------------
 * Written when the server has streams or chunks (or made some): one CSTO
 * record, then a TSTR per stream, before the first table; a TTRJ follows the
 * TABL/TABG of every TRAJECTORY table (before its TTMS and TLIM). Each body
 * starts with u32 version (1); a reader refuses another. Chunks keep their
 * handles, so the items' reference records (chunks.h) are the table items'
 * bytes as saved; the load checks every record against its table's columns
 * and the chunks, takes the references anew and compares every chunk's
 * count with the one saved.
 *   "CSTO" the chunk store   u32 version, u64 steps appended, u64 items made,
 *                            u64 chunks made, u32 handles used, u32 header
 *                            capacity, u32 nfree, nfree x u32 the free list
 *                            from its head, u64 chunk count n, then n chunks
 *                            by handle: u32 handle, u32 references, u32 data
 *                            bytes, u32 raw size (0: stored raw; else the
 *                            bytes are one zstd frame of that many), bytes
 *   "TSTR" an episode stream u32 version, u32 name length, name, u32 CHUNK,
 *                            u32 HISTORY, u32 COMPRESS level (0 none), u64
 *                            steps of the open episode (0: none open), u64
 *                            episodes ended, u32 field count f, per field
 *                            u32 name length, name, u32 dtype (chunks.h's
 *                            IR_DT_*), u32 ndim, ndim x u32 shape; then f x
 *                            ring u32 the chunks it holds (0 none), ring =
 *                            ceil(HISTORY / CHUNK) + 1 per field
 *   "TTRJ" a TRAJECTORY table's columns: u32 version, u32 column count c
 *                            (0 before its first item), per column u32 name
 *                            length, name, u32 dtype, u32 ndim, ndim x u32
 *                            shape, u32 steps */

static uint64_t fieldBody(const char *name, int ndim) {
    return 12 + strlen(name) + 4 * (uint64_t)ndim;
}

static void wField(ir_pwriter *w, const char *name, int dtype, int ndim, const uint32_t *shape) {
    wU32(w, (uint32_t)strlen(name));
    wBytes(w, name, strlen(name));
    wU32(w, (uint32_t)dtype);
    wU32(w, (uint32_t)ndim);
    for (int d = 0; d < ndim; d++) wU32(w, shape[d]);
}

void persistSaveChunkStore(ir_pwriter *w, const ir_chunk_store *cs) {
    if (!cs->used && !cs->nstreams && !cs->steps_appended && !cs->items_made && !cs->chunks_made)
        return; /* a server that never used trajectories writes what it always wrote */
    uint32_t nfree = 0;
    for (uint32_t h = cs->free_head; h; h = cs->c[h].next_free) nfree++;
    uint64_t body = 4 + 24 + 12 + 4 * (uint64_t)nfree + 8;
    for (uint32_t h = 1; h < cs->used; h++)
        if (cs->c[h].data) body += 16 + (uint64_t)cs->c[h].bytes;
    wRecord(w, IR_PTAG_CSTO, body);
    wU32(w, IR_PERSIST_TRAJ_VERSION);
    wU64(w, cs->steps_appended);
    wU64(w, cs->items_made);
    wU64(w, cs->chunks_made);
    wU32(w, cs->used);
    wU32(w, cs->cap);
    wU32(w, nfree);
    for (uint32_t h = cs->free_head; h; h = cs->c[h].next_free) wU32(w, h);
    wU64(w, cs->chunks);
    for (uint32_t h = 1; h < cs->used && !w->err; h++) {
        const ir_chunk *c = &cs->c[h];
        if (!c->data) continue;
        wU32(w, h);
        wU32(w, c->refs);
        wU32(w, c->bytes);
        wU32(w, c->raw);
        wBytes(w, c->data, c->bytes);
    }
    for (const ir_stream *st = cs->streams; st && !w->err; st = st->next) {
        uint64_t nheld = (uint64_t)st->nfields * st->ring;
        body = 4 + 4 + st->namelen + 12 + 16 + 4 + 4 * nheld;
        for (uint32_t f = 0; f < st->nfields; f++)
            body += fieldBody(st->fields[f].name, st->fields[f].ndim);
        wRecord(w, IR_PTAG_TSTR, body);
        wU32(w, IR_PERSIST_TRAJ_VERSION);
        wU32(w, (uint32_t)st->namelen);
        wBytes(w, st->name, st->namelen);
        wU32(w, st->chunk_steps);
        wU32(w, st->history);
        wU32(w, (uint32_t)st->zlevel);
        wU64(w, st->nsteps);
        wU64(w, st->episodes);
        wU32(w, st->nfields);
        for (uint32_t f = 0; f < st->nfields; f++)
            wField(w, st->fields[f].name, st->fields[f].dtype, st->fields[f].ndim,
                   st->fields[f].shape);
        for (uint64_t i = 0; i < nheld; i++) wU32(w, st->held[i]);
    }
}

static void saveTrajLayout(ir_pwriter *w, const ir_table *t) {
    const ir_traj_layout *lay = t->layout;
    uint64_t body = 8;
    for (uint32_t k = 0; k < lay->ncols; k++)
        body += fieldBody(lay->col[k].name, lay->col[k].ndim) + 4;
    wRecord(w, IR_PTAG_TTRJ, body);
    wU32(w, IR_PERSIST_TRAJ_VERSION);
    wU32(w, lay->ncols);
    for (uint32_t k = 0; k < lay->ncols; k++) {
        const ir_traj_col *c = &lay->col[k];
        wField(w, c->name, c->dtype, c->ndim, c->shape);
        wU32(w, c->len);
    }
}

static int loadVersion(ir_ploader *L, const char *what) {
    uint32_t v;
    if (rU32(L->r, &v)) return bad(L, "%s record runs past its end", what);
    if (v != IR_PERSIST_TRAJ_VERSION)
        return bad(L,
                   "%s record of version %u: this server reads version %u (a newer server "
                   "wrote it)",
                   what, v, IR_PERSIST_TRAJ_VERSION);
    return IR_PERSIST_OK;
}

/* A field or column: name (1..63 bytes, no NUL, not among the first n of
 * names), dtype and shape as REPLAY.STREAM takes them; its step bytes. */
static int loadField(ir_ploader *L, char *name, int *dtype, int *ndim, uint32_t *shape,
                     uint32_t *step_bytes) {
    ir_preader *r = L->r;
    uint32_t nl, dt, nd;
    if (rU32(r, &nl) || nl == 0 || nl >= IR_TRAJ_NAME_MAX || rRead(r, name, nl))
        return bad(L, "a field name is empty, too long or runs past the record");
    name[nl] = '\0';
    if (memchr(name, '\0', nl)) return bad(L, "a field name holds a NUL byte");
    if (rU32(r, &dt) || rU32(r, &nd) || dt >= IR_DT_COUNT || nd > IR_TRAJ_MAX_DIMS)
        return bad(L, "field '%s': unknown dtype or too many dimensions", name);
    uint64_t b = chunkDtypeSize((int)dt);
    for (uint32_t d = 0; d < nd; d++) {
        if (rU32(r, &shape[d]) || shape[d] == 0 || shape[d] > (1u << 30))
            return bad(L, "field '%s': a dimension out of range", name);
        if (b <= IR_TRAJ_MAX_STEP_BYTES) b *= shape[d];
    }
    if (b > IR_TRAJ_MAX_STEP_BYTES) return bad(L, "field '%s': too many bytes per step", name);
    *dtype = (int)dt;
    *ndim = (int)nd;
    *step_bytes = (uint32_t)b;
    return IR_PERSIST_OK;
}

static int isNomem(const char *err) { return strcmp(err, "out of memory") == 0; }

static int loadChunkStore(ir_ploader *L) {
    ir_preader *r = L->r;
    if (L->store_seen || L->chunks->nstreams || L->traj_seen)
        return bad(L, "CSTO record twice, or after streams or trajectory tables");
    int rc = loadVersion(L, "chunk store (CSTO)");
    if (rc) return rc;
    ir_chunk_store *cs = L->chunks;
    uint64_t steps, items, made, n;
    uint32_t used, cap, nfree;
    if (rU64(r, &steps) || rU64(r, &items) || rU64(r, &made) || rU32(r, &used) || rU32(r, &cap) ||
        rU32(r, &nfree) || nfree > rLeft(r) / 4)
        return bad(L, "chunk store header runs past the record");
    uint32_t *fl = malloc(((size_t)nfree + 1) * sizeof(uint32_t));
    if (!fl) return nomem(L, "the chunk free list");
    for (uint32_t i = 0; i < nfree && rc == IR_PERSIST_OK; i++)
        if (rU32(r, &fl[i])) rc = bad(L, "chunk free list runs past the record");
    if (rc == IR_PERSIST_OK && (rU64(r, &n) || n > rLeft(r) / 16))
        rc = bad(L, "chunk count runs past the record");
    if (rc == IR_PERSIST_OK && (used ? n + nfree != (uint64_t)used - 1 : n + nfree != 0))
        rc = bad(L, "%llu live and %u free chunk handles, %u used", (unsigned long long)n, nfree,
                 used);
    const char *err;
    if (rc == IR_PERSIST_OK && chunkLoadBegin(cs, used, cap, &err) != 0)
        rc = isNomem(err) ? nomem(L, "the chunk headers") : bad(L, "%s", err);
    if (rc == IR_PERSIST_OK && !(L->saved_refs = calloc((size_t)used + 1, sizeof(uint32_t))))
        rc = nomem(L, "the chunk headers");
    for (uint64_t i = 0; i < n && rc == IR_PERSIST_OK; i++) {
        uint32_t h, refs, bytes, raw;
        if (rU32(r, &h) || rU32(r, &refs) || rU32(r, &bytes) || rU32(r, &raw) || bytes > rLeft(r)) {
            rc = bad(L, "chunk %llu runs past the record", (unsigned long long)i);
            break;
        }
        char *d = chunkLoadChunk(cs, h, bytes, raw, &err);
        if (!d) rc = isNomem(err) ? nomem(L, "a chunk") : bad(L, "chunk %u: %s", h, err);
        else if (rRead(r, d, bytes)) rc = bad(L, "chunk %u runs past the record", h);
        else if (chunkLoadCheckFrame(cs, h) != 0)
            rc = bad(L, "chunk %u is not a zstd frame of %u bytes", h, raw);
        else if (refs == 0) rc = bad(L, "chunk %u has no references", h);
        else L->saved_refs[h] = refs;
    }
    if (rc == IR_PERSIST_OK && chunkLoadEnd(cs, fl, nfree, &err) != 0) rc = bad(L, "%s", err);
    free(fl);
    if (rc) return rc;
    cs->steps_appended = steps;
    cs->items_made = items;
    cs->chunks_made = made;
    L->store_seen = 1;
    return IR_PERSIST_OK;
}

static int loadStream(ir_ploader *L) {
    ir_preader *r = L->r;
    if (L->traj_seen) return bad(L, "TSTR record after a trajectory table");
    int rc = loadVersion(L, "stream (TSTR)");
    if (rc) return rc;
    uint32_t nl, chunk, history, zlevel, nf;
    uint64_t nsteps, episodes;
    if (rU32(r, &nl) || nl == 0 || nl > rLeft(r)) return bad(L, "stream name runs past the record");
    char *name = malloc((size_t)nl + 1);
    if (!name) return nomem(L, "a stream name");
    ir_field f[IR_TRAJ_MAX_FIELDS];
    uint32_t *held = NULL;
    memset(f, 0, sizeof(f));
    if (rRead(r, name, nl) || rU32(r, &chunk) || rU32(r, &history) || rU32(r, &zlevel) ||
        rU64(r, &nsteps) || rU64(r, &episodes) || rU32(r, &nf)) {
        rc = bad(L, "stream header runs past the record");
        goto out;
    }
    name[nl] = '\0';
    if (chunk == 0 || chunk > 65536 || history == 0 || history > (1u << 24) || zlevel > 19 ||
        nf == 0 || nf > IR_TRAJ_MAX_FIELDS || nsteps > (UINT64_MAX >> 2)) {
        rc = bad(L, "stream '%.64s': CHUNK, HISTORY, COMPRESS, fields or steps out of range", name);
        goto out;
    }
    for (uint32_t k = 0; k < nf && rc == IR_PERSIST_OK; k++) {
        rc = loadField(L, f[k].name, &f[k].dtype, &f[k].ndim, f[k].shape, &f[k].step_bytes);
        for (uint32_t j = 0; j < k && rc == IR_PERSIST_OK; j++)
            if (strcmp(f[j].name, f[k].name) == 0) rc = bad(L, "field '%s' twice", f[k].name);
        if (rc == IR_PERSIST_OK && (uint64_t)f[k].step_bytes * chunk > UINT32_MAX)
            rc = bad(L, "field '%s': a chunk over 4 GiB", f[k].name);
    }
    if (rc) goto out;
    uint64_t ring = (history + chunk - 1) / chunk + 1, nheld = ring * nf;
    if (nheld > IR_TRAJ_MAX_HELD || nheld > rLeft(r) / 4) {
        rc = bad(L, "stream '%.64s': held chunks out of range or past the record", name);
        goto out;
    }
    if (!(held = malloc(nheld * sizeof(uint32_t)))) {
        rc = nomem(L, "a stream");
        goto out;
    }
    for (uint64_t i = 0; i < nheld; i++)
        if (rU32(r, &held[i])) {
            rc = bad(L, "stream '%.64s': held chunks run past the record", name);
            goto out;
        }
    if (streamFind(L->chunks, name, nl)) {
        rc = bad(L, "stream '%.64s' twice", name);
        goto out;
    }
    if (zlevel && !chunkCanCompress()) {
        rc = bad(L,
                 "stream '%.64s' compresses its chunks and this server was built without "
                 "libzstd: install libzstd-dev and rebuild",
                 name);
        goto out;
    }
    ir_stream *st;
    const char *err;
    if (streamDeclare(L->chunks, name, nl, f, nf, chunk, history, (int)zlevel, &st, &err) != 0)
        rc = isNomem(err) ? nomem(L, "a stream") : bad(L, "stream '%.64s': %s", name, err);
    else if (streamLoadState(L->chunks, st, nsteps, episodes, held, &err) != 0)
        rc = bad(L, "stream '%.64s': %s", name, err);
out:
    free(held);
    free(name);
    return rc;
}

static int loadTraj(ir_ploader *L) {
    ir_preader *r = L->r;
    ir_table *t = L->last_table;
    if (!t || t->traj) return bad(L, "TTRJ record without a table before it");
    L->traj_seen = 1;
    int rc = loadVersion(L, "trajectory table (TTRJ)");
    if (rc) return rc;
    uint32_t ncols;
    if (rU32(r, &ncols) || ncols > IR_TRAJ_MAX_COLS)
        return bad(L, "table '%s': column count out of range", t->name);
    ir_traj_layout *lay = calloc(1, sizeof(*lay));
    if (!lay) return nomem(L, "a table's columns");
    for (uint32_t k = 0; k < ncols && rc == IR_PERSIST_OK; k++) {
        ir_traj_col *c = &lay->col[k];
        rc = loadField(L, c->name, &c->dtype, &c->ndim, c->shape, &c->step_bytes);
        for (uint32_t j = 0; j < k && rc == IR_PERSIST_OK; j++)
            if (strcmp(lay->col[j].name, c->name) == 0) rc = bad(L, "column '%s' twice", c->name);
        if (rc == IR_PERSIST_OK && (rU32(r, &c->len) || c->len == 0 || c->len > IR_TRAJ_MAX_LEN))
            rc = bad(L, "table '%s': column '%s' length out of range", t->name, c->name);
    }
    lay->ncols = ncols;
    uint64_t n = tableLive(t);
    const char *err;
    for (uint64_t i = 0; i < n && rc == IR_PERSIST_OK;
         i++) { /* check all, then take the references */
        uint64_t slot = t->general ? t->dense[i] : (t->oldest_id + i) % t->o.capacity;
        if (chunkItemCheck(L->chunks, t->arena + t->slots[slot].off, t->slots[slot].len, lay, &err))
            rc = bad(L, "table '%s': %s", t->name, err);
    }
    if (rc) {
        free(lay);
        return rc;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot = t->general ? t->dense[i] : (t->oldest_id + i) % t->o.capacity;
        chunkItemRetain(L->chunks, t->arena + t->slots[slot].off);
    }
    t->layout = lay;
    t->traj = L->chunks;
    return IR_PERSIST_OK;
}

int persistLoadEnd(ir_ploader *L) {
    const ir_chunk_store *cs = L->chunks;
    for (uint32_t h = 1; h < cs->used; h++)
        if (cs->c[h].data && cs->c[h].refs != L->saved_refs[h])
            return bad(L, "chunk %u: saved with %u references, its streams and items hold %u", h,
                       L->saved_refs[h], cs->c[h].refs);
    chunkStoreReverseStreams(L->chunks);         /* declared in saved order, each prepended */
    ir_table *prev = NULL, *t = L->tables->head; /* so are the tables */
    while (t) {
        ir_table *next = t->next;
        t->next = prev;
        prev = t;
        t = next;
    }
    L->tables->head = prev;
    return IR_PERSIST_OK;
}

/* ---- parameter tables ----------------------------------------------------------
 *   "PARM" a parameter table  u64 name length (1..512), name bytes, u32
 *                            optimizer (param.h's IR_OPT_*), u32 nesterov,
 *                            u32 SYNC k,
 *                            f64 lr, momentum, alpha, beta1, beta2, eps,
 *                            weight_decay, u64 size n, u64 step, u64 version,
 *                            then n float32 parameters and n float32 per state
 *                            array (paramStateArrays: 0, 1 or 2; s1 then s2)
 * The loader checks the options as PARAM.CREATE does and the record's length
 * against n and the state arrays the optimizer keeps. A SYNC round in progress
 * is not saved: its pushes are the waiting clients' and not applied yet. */
void persistSaveParam(ir_pwriter *w, const ir_param *p) {
    uint64_t k = (uint64_t)paramStateArrays(&p->o), arr = p->n * sizeof(float);
    wRecord(w, IR_PTAG_PARM, 8 + p->namelen + 4 + 4 + 4 + 7 * 8 + 3 * 8 + arr * (1 + k));
    wU64(w, p->namelen);
    wBytes(w, p->name, p->namelen);
    wU32(w, (uint32_t)p->o.opt);
    wU32(w, (uint32_t)p->o.nesterov);
    wU32(w, p->o.sync);
    const double hp[] = {p->o.lr,    p->o.momentum, p->o.alpha,       p->o.beta1,
                         p->o.beta2, p->o.eps,      p->o.weight_decay};
    for (int i = 0; i < 7; i++) wF64(w, hp[i]);
    wU64(w, p->n);
    wU64(w, p->step);
    wU64(w, p->version);
    wBytes(w, p->w, arr);
    if (k >= 1) wBytes(w, p->s1, arr);
    if (k >= 2) wBytes(w, p->s2, arr);
}

static int loadParam(ir_ploader *L) {
    ir_preader *r = L->r;
    if (!L->params) return bad(L, "a parameter table record, which this host does not keep");
    uint64_t len, n, step, version;
    uint32_t opt, nesterov, sync;
    char name[513];
    if (rU64(r, &len) || len == 0 || len > 512 || rRead(r, name, len))
        return bad(L, "parameter table name runs past the record or is not 1..512 bytes");
    name[len] = '\0';
    ir_param_opts o;
    double *hp[] = {&o.lr, &o.momentum, &o.alpha, &o.beta1, &o.beta2, &o.eps, &o.weight_decay};
    if (rU32(r, &opt) || rU32(r, &nesterov) || rU32(r, &sync))
        return bad(L, "parameter table '%s': cut short", name);
    for (int i = 0; i < 7; i++)
        if (rF64(r, hp[i])) return bad(L, "parameter table '%s': cut short", name);
    if (rU64(r, &n) || rU64(r, &step) || rU64(r, &version))
        return bad(L, "parameter table '%s': cut short", name);
    if (opt >= IR_OPT__COUNT || nesterov > 1)
        return bad(L, "parameter table '%s': unknown optimizer %u", name, opt);
    o.opt = (ir_optimizer)opt;
    o.nesterov = (int)nesterov;
    o.sync = sync;
    const char *why = paramOptsCheck(&o);
    if (why) return bad(L, "parameter table '%s': %s", name, why);
    uint64_t k = (uint64_t)paramStateArrays(&o);
    if (n == 0 || n > rLeft(r) / sizeof(float) || rLeft(r) != n * sizeof(float) * (1 + k))
        return bad(L, "parameter table '%s': %llu bytes left for SIZE %llu and %llu state arrays",
                   name, (unsigned long long)rLeft(r), (unsigned long long)n,
                   (unsigned long long)k);
    if (paramFind(L->params, name, len)) return bad(L, "parameter table '%s' twice", name);
    ir_param *p = paramCreate(L->params, name, len, n, &o, NULL);
    if (!p) return nomem(L, "a parameter table");
    if (rRead(r, p->w, n * sizeof(float)) || (k >= 1 && rRead(r, p->s1, n * sizeof(float))) ||
        (k >= 2 && rRead(r, p->s2, n * sizeof(float))))
        return bad(L, "parameter table '%s': arrays run past the record", name);
    p->step = step;
    p->version = version;
    return IR_PERSIST_OK;
}

void persistLoadInit(ir_ploader *L, ir_preader *r, ir_tables *tables, ir_chunk_store *chunks) {
    memset(L, 0, sizeof(*L));
    L->r = r;
    L->tables = tables;
    L->chunks = chunks;
}

int persistLoadRecord(ir_ploader *L, const char tag[4]) {
    /* TTRJ, TTMS and TLIM follow their TABL/TABG */
    if (memcmp(tag, IR_PTAG_TLIM, 4) && memcmp(tag, IR_PTAG_TTMS, 4) &&
        memcmp(tag, IR_PTAG_TTRJ, 4))
        L->last_table = NULL;
    if (!memcmp(tag, IR_PTAG_TABL, 4)) return loadTable(L, 0);
    if (!memcmp(tag, IR_PTAG_TABG, 4)) return loadTable(L, 1);
    if (!memcmp(tag, IR_PTAG_TTMS, 4)) return loadTimes(L);
    if (!memcmp(tag, IR_PTAG_TLIM, 4)) return loadLimiter(L);
    if (!memcmp(tag, IR_PTAG_CSTO, 4)) return loadChunkStore(L);
    if (!memcmp(tag, IR_PTAG_TSTR, 4)) return loadStream(L);
    if (!memcmp(tag, IR_PTAG_TTRJ, 4)) return loadTraj(L);
    if (!memcmp(tag, IR_PTAG_PARM, 4)) return loadParam(L);
    return IR_PERSIST_UNKNOWN;
}

void persistLoadFree(ir_ploader *L) {
    free(L->saved_refs);
    L->saved_refs = NULL;
}
