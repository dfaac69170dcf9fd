/* replay.c - prioritized replay tables (see replay.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "replay.h"
#include "server.h"

#define EMPTY_ID UINT64_MAX
#define ITEM_ALIGN 8

/* Bytes an item takes in the arena: at least one aligned unit, so that a
 * zero-length item still has a distinct place in the ring. */
static inline uint64_t reserveLen(size_t len) {
    uint64_t r = ((uint64_t)len + ITEM_ALIGN - 1) & ~(uint64_t)(ITEM_ALIGN - 1);
    return r ? r : ITEM_ALIGN;
}

/* Keep the newest run of equal lengths (see ir_table.run_start). */
static inline void noteItemLen(ir_table *t, uint64_t id, uint32_t len) {
    if (len != t->run_len) {
        t->run_start = id;
        t->run_len = len;
    }
}

int tableItemsOneSize(const ir_table *t, uint32_t *a, uint32_t *b) {
    if (t->run_start <= t->oldest_id) return 1;
    *a = t->slot_len[(t->run_start - 1) % t->o.capacity]; /* live: >= oldest_id */
    *b = t->run_len;
    return 0;
}

/* The reads of a sample are random: at 2M items each drawn slot's slot_off
 * and its item miss the TLB on 4 KB pages (a page walk per access, on top of
 * the cache miss). Transparent huge pages cover the arena and the slot arrays
 * with a few hundred TLB entries; madvise is what this VM's THP mode
 * ("madvise") asks for. Best effort: where THP is off it changes nothing. */
static void adviseHugePages(void *p, size_t len) {
    if (!p || len < (2u << 20)) return;
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
    uintptr_t e = ((uintptr_t)p + len) & ~(uintptr_t)4095;
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
}

ir_tables *tablesNew(void) { return calloc(1, sizeof(ir_tables)); }

static void tableFree(ir_table *t) {
    if (!t) return;
    if ((t->waiters[0].n || t->waiters[1].n || t->waiters[0].ready || t->waiters[1].ready) &&
        g_server)
        blockedTableGone(g_server, t); /* REPLAY.DROP, FLUSHALL: waiters get an error */
    ir_sampler_free(t->sampler);
    free(t->slot_id);
    free(t->slot_off);
    free(t->slot_len);
    if (t->arena && t->pin) /* replies still read it: unmapped after the last one */
        pinDetach(t->pin, t->arena, t->o.maxbytes, t->bytes_used);
    else if (t->arena)
        munmap(t->arena, t->o.maxbytes);
    free(t->scratch_slots);
    free(t->scratch_ids);
    free(t->scratch_prio);
    free(t->scratch_weights);
    free(t->scratch_evicted);
    free(t->name);
    free(t);
}

void tablesFlush(ir_tables *ts) {
    ir_table *t = ts->head;
    while (t) {
        ir_table *n = t->next;
        tableFree(t);
        t = n;
    }
    ts->head = NULL;
    ts->count = 0;
}

void tablesFree(ir_tables *ts) {
    if (!ts) return;
    tablesFlush(ts);
    free(ts->add_items);
    free(ts->add_ids);
    free(ts);
}

int tablesAddScratch(ir_tables *ts, size_t n) {
    if (n <= ts->add_cap) return 0;
    size_t cap = ts->add_cap ? ts->add_cap : 64;
    while (cap < n) cap *= 2;
    ir_item_in *it = realloc(ts->add_items, cap * sizeof(*it));
    if (it) ts->add_items = it;
    uint64_t *id = realloc(ts->add_ids, cap * sizeof(*id));
    if (id) ts->add_ids = id;
    if (!it || !id) return -1;
    ts->add_cap = cap;
    return 0;
}

ir_table *tableFind(ir_tables *ts, const char *name, size_t len) {
    for (ir_table *t = ts->head; t; t = t->next)
        if (t->namelen == len && memcmp(t->name, name, len) == 0) return t;
    return NULL;
}

uint64_t tablesBytes(const ir_tables *ts) {
    uint64_t b = 0;
    for (const ir_table *t = ts->head; t; t = t->next) b += t->bytes_used;
    return b;
}

/* Per slot: id, offset, length (20 B) and about two tree nodes of 8 B. */
#define SLOT_OVERHEAD 36

uint64_t tableSlotBytes(void) { return SLOT_OVERHEAD; }

uint64_t tablesMemory(const ir_tables *ts) {
    uint64_t b = 0;
    for (const ir_table *t = ts->head; t; t = t->next)
        b += t->bytes_used + t->o.capacity * SLOT_OVERHEAD + t->scratch_cap * 36;
    return b;
}

int tableCreate(ir_tables *ts, const char *name, size_t len, const ir_table_opts *o,
                ir_table **out, const char **err) {
    if (len == 0 || len > IR_TABLE_NAME_MAX) {
        *err = "table name must be 1 to 200 bytes";
        return -1;
    }
    if (tableFind(ts, name, len)) {
        *err = "table already exists";
        return -1;
    }
    if (o->capacity == 0 || o->capacity > (1ULL << 32)) {
        *err = "CAPACITY must be between 1 and 4294967296";
        return -1;
    }
    if (!(o->alpha >= 0 && isfinite(o->alpha)) || !(o->beta >= 0 && isfinite(o->beta)) ||
        !(o->epsilon >= 0 && isfinite(o->epsilon))) {
        *err = "ALPHA, BETA and EPSILON must be finite and >= 0";
        return -1;
    }
    if (o->maxbytes < ITEM_ALIGN) {
        *err = "MAXBYTES must be at least 8";
        return -1;
    }
    ir_table *t = calloc(1, sizeof(*t));
    if (!t) goto nomem;
    t->o = *o;
    t->waiters[0].owner = t->waiters[1].owner = t;
    t->waiters[0].kind = t->waiters[1].kind = BLOCKED_REPLAY;
    t->name = malloc(len + 1);
    t->sampler = ir_sampler_new(o->capacity, o->fanout, o->alpha, o->epsilon, o->seed);
    t->slot_id = malloc(o->capacity * sizeof(uint64_t));
    t->slot_off = calloc(o->capacity, sizeof(uint64_t));
    t->slot_len = calloc(o->capacity, sizeof(uint32_t));
    /* The arena is reserved up front and committed by the kernel as it fills. */
    t->arena = mmap(NULL, o->maxbytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->arena == MAP_FAILED) t->arena = NULL;
    adviseHugePages(t->arena, o->maxbytes);
    adviseHugePages(t->slot_id, o->capacity * sizeof(uint64_t));
    adviseHugePages(t->slot_off, o->capacity * sizeof(uint64_t));
    adviseHugePages(t->slot_len, o->capacity * sizeof(uint32_t));
    if (!t->name || !t->sampler || !t->slot_id || !t->slot_off || !t->slot_len || !t->arena) {
        tableFree(t);
        goto nomem;
    }
    memcpy(t->name, name, len);
    t->name[len] = '\0';
    t->namelen = len;
    for (uint64_t i = 0; i < o->capacity; i++) t->slot_id[i] = EMPTY_ID;
    t->next_id = t->oldest_id = t->run_start = o->id_base;
    t->next = ts->head;
    ts->head = t;
    ts->count++;
    if (out) *out = t;
    return 0;
nomem:
    *err = "not enough memory for a table of this CAPACITY and MAXBYTES";
    return -1;
}

int tableLimiterCheck(const ir_limiter_opts *o, uint64_t capacity, const char **err) {
    if (o->min_size > capacity) {
        *err = "MIN_SIZE must be at most CAPACITY";
        return -1;
    }
    if (!(o->samples_per_insert >= 0 && isfinite(o->samples_per_insert))) {
        *err = "SAMPLES_PER_INSERT must be a finite number >= 0";
        return -1;
    }
    if (o->samples_per_insert == 0 && o->error_buffer != 0) {
        *err = "ERROR_BUFFER needs SAMPLES_PER_INSERT";
        return -1;
    }
    if (o->samples_per_insert > 0 &&
        !(o->error_buffer >= tableDefaultErrorBuffer(o->samples_per_insert) &&
          isfinite(o->error_buffer))) {
        *err = "ERROR_BUFFER must be finite and at least max(1, SAMPLES_PER_INSERT)";
        return -1;
    }
    return 0;
}

int tableDrop(ir_tables *ts, const char *name, size_t len) {
    for (ir_table **pp = &ts->head; *pp; pp = &(*pp)->next) {
        ir_table *t = *pp;
        if (t->namelen == len && memcmp(t->name, name, len) == 0) {
            *pp = t->next;
            tableFree(t);
            ts->count--;
            return 0;
        }
    }
    return -1;
}

int tableScratch(ir_table *t, size_t n) {
    if (n <= t->scratch_cap) return 0;
    size_t cap = t->scratch_cap ? t->scratch_cap : 64;
    while (cap < n) cap *= 2;
    uint64_t *s = realloc(t->scratch_slots, cap * sizeof(uint64_t));
    if (s) t->scratch_slots = s;
    uint64_t *i = realloc(t->scratch_ids, cap * sizeof(uint64_t));
    if (i) t->scratch_ids = i;
    double *p = realloc(t->scratch_prio, cap * sizeof(double));
    if (p) t->scratch_prio = p;
    float *w = realloc(t->scratch_weights, cap * sizeof(float));
    if (w) t->scratch_weights = w;
    if (!s || !i || !p || !w) return -1;
    t->scratch_cap = cap;
    return 0;
}

int tablePriorityValid(const ir_table *t, double raw) { return ir_sampler_valid(t->sampler, raw); }

/* Remove the oldest item; its slot is remembered so the caller can clear
 * its priority once the whole batch is placed. */
static int evictOldest(ir_table *t, size_t *nevicted) {
    uint64_t slot = t->oldest_id % t->o.capacity;
    if (*nevicted == t->evicted_cap) {
        size_t cap = t->evicted_cap ? t->evicted_cap * 2 : 64;
        uint64_t *e = realloc(t->scratch_evicted, cap * sizeof(uint64_t));
        if (!e) return -1;
        t->scratch_evicted = e;
        t->evicted_cap = cap;
    }
    t->scratch_evicted[(*nevicted)++] = slot;
    t->bytes_used -= reserveLen(t->slot_len[slot]);
    t->slot_id[slot] = EMPTY_ID;
    t->oldest_id++;
    t->evictions++;
    return 0;
}

/* Find room for need bytes, evicting the oldest items as required. */
static int arenaPlace(ir_table *t, uint64_t need, uint64_t *off, size_t *nevicted) {
    for (;;) {
        if (tableSize(t) == 0) {
            *off = 0;
            return 0;
        }
        uint64_t head = t->slot_off[t->oldest_id % t->o.capacity];
        if (t->tail > head) { /* live bytes are [head, tail) */
            if (t->o.maxbytes - t->tail >= need) {
                *off = t->tail;
                return 0;
            }
            if (head >= need) { /* wrap to the front */
                *off = 0;
                return 0;
            }
        } else if (head - t->tail >= need) { /* wrapped: free bytes are [tail, head) */
            *off = t->tail;
            return 0;
        }
        if (evictOldest(t, nevicted) != 0) return -1;
    }
}

int tableAdd(ir_table *t, const ir_item_in *items, size_t n, uint64_t *ids_out, const char **err) {
    for (size_t k = 0; k < n; k++) {
        if (reserveLen(items[k].len) > t->o.maxbytes || items[k].len > UINT32_MAX) {
            *err = "item is larger than the table's MAXBYTES";
            return -1;
        }
    }
    if (tableScratch(t, n) != 0) goto nomem;
    size_t nevicted = 0;
    /* Place every item first (offsets in scratch_ids), so that bytes pending
     * replies still have to send can be copied out before any is rewritten. */
    uint64_t *offs = t->scratch_ids;
    size_t placed = n;
    for (size_t k = 0; k < n; k++) {
        uint64_t need = reserveLen(items[k].len), off;
        if ((tableSize(t) == t->o.capacity && evictOldest(t, &nevicted) != 0) ||
            arenaPlace(t, need, &off, &nevicted) != 0) {
            placed = k; /* out of memory: the items placed so far still get their bytes */
            break;
        }
        uint64_t id = t->next_id++;
        uint64_t slot = id % t->o.capacity;
        offs[k] = off;
        t->slot_id[slot] = id;
        t->slot_off[slot] = off;
        t->slot_len[slot] = (uint32_t)items[k].len;
        noteItemLen(t, id, (uint32_t)items[k].len);
        t->tail = off + need;
        t->bytes_used += need;
        t->scratch_slots[k] = slot;
        t->scratch_prio[k] = items[k].raw;
        ids_out[k] = id;
    }
    if (t->pin) { /* the written ranges, merged into runs of adjacent items */
        uint64_t lo = 0, hi = 0;
        for (size_t k = 0; k <= placed && t->pin; k++) {
            if (k < placed && k > 0 && offs[k] == hi) {
                hi += reserveLen(items[k].len);
                continue;
            }
            if (k > 0) pinOverwrite(t->pin, t->arena + lo, t->arena + hi);
            if (k < placed) {
                lo = offs[k];
                hi = lo + reserveLen(items[k].len);
            }
        }
    }
    for (size_t k = 0; k < placed; k++) memcpy(t->arena + offs[k], items[k].data, items[k].len);
    if (placed < n) goto nomem;
    t->inserts += n;
    /* Clear evicted slots first: a slot evicted and refilled in this batch
     * then gets its new priority from the updates below. */
    if (nevicted) ir_sampler_clear(t->sampler, t->scratch_evicted, nevicted);
    /* Raw priorities and MAX ones (already stored values) go in separately. */
    /* Only items still live get a priority: a batch larger than the table,
     * or one that outgrows MAXBYTES, evicts its own first items. */
    size_t nraw = 0, nmax = 0;
    for (size_t k = 0; k < n; k++) {
        if (items[k].use_max || ids_out[k] < t->oldest_id) continue;
        t->scratch_ids[nraw] = t->scratch_slots[k];
        t->scratch_prio[nraw++] = t->scratch_prio[k];
    }
    if (nraw) ir_sampler_update(t->sampler, t->scratch_ids, t->scratch_prio, nraw);
    double maxp = ir_sampler_max(t->sampler);
    for (size_t k = 0; k < n; k++) {
        if (!items[k].use_max || ids_out[k] < t->oldest_id) continue;
        t->scratch_ids[nmax] = t->scratch_slots[k];
        t->scratch_prio[nmax++] = maxp;
    }
    if (nmax) ir_sampler_set_stored(t->sampler, t->scratch_ids, t->scratch_prio, nmax);
    return 0;
nomem:
    *err = "out of memory";
    return -1;
}

int tableSample(ir_table *t, size_t n, double beta) {
    if (tableScratch(t, n) != 0) return IR_ENOMEM;
    uint64_t live = tableSize(t);
    int rc = ir_sampler_sample(t->sampler, n, beta, t->oldest_id % t->o.capacity, live,
                               t->scratch_slots, t->scratch_weights);
    if (rc != IR_OK) return rc;
    /* Only live slots are drawn, and the live ids [oldest_id, next_id) sit at
     * slot id % capacity, at most capacity of them: a drawn slot's id follows
     * from the slot, with no read of slot_id (a cache miss per item at 2M
     * items, as costly as the descent). The slot_off / slot_len the reply
     * reads next are prefetched IR_TABLE_PF ahead, so their misses overlap. */
    const uint64_t *sl = t->scratch_slots, cap = t->o.capacity, first = t->oldest_id % cap;
    for (size_t i = 0; i < n; i++) {
        if (i + IR_TABLE_PF < n) {
            __builtin_prefetch(&t->slot_off[sl[i + IR_TABLE_PF]]);
            __builtin_prefetch(&t->slot_len[sl[i + IR_TABLE_PF]]);
        }
        t->scratch_ids[i] = t->oldest_id + (sl[i] >= first ? sl[i] - first : sl[i] + cap - first);
    }
    t->samples += n;
    t->sample_calls++;
    return IR_OK;
}

long tableUpdate(ir_table *t, const uint64_t *ids, const float *raw, size_t n, const char **err) {
    for (size_t k = 0; k < n; k++) {
        if (!tablePriorityValid(t, raw[k])) {
            *err = "priorities must be finite and >= 0";
            return -1;
        }
        if (ids[k] >= t->next_id) {
            *err = "id was never issued by this table";
            return -1;
        }
    }
    if (tableScratch(t, n) != 0) {
        *err = "out of memory";
        return -1;
    }
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < t->oldest_id) {
            t->stale_updates++;
            continue;
        }
        t->scratch_slots[m] = ids[k] % t->o.capacity;
        t->scratch_prio[m++] = raw[k];
    }
    if (m) ir_sampler_update(t->sampler, t->scratch_slots, t->scratch_prio, m);
    t->updates += m;
    return (long)m;
}

/* ---- snapshots (see replay.h) -------------------------------------------- */

uint64_t tableItemReserve(size_t len) { return reserveLen(len); }

void tableGetState(const ir_table *t, ir_table_state *st) {
    st->next_id = t->next_id;
    st->oldest_id = t->oldest_id;
    st->tail = t->tail;
    st->inserts = t->inserts;
    st->samples = t->samples;
    st->sample_calls = t->sample_calls;
    st->updates = t->updates;
    st->stale_updates = t->stale_updates;
    st->evictions = t->evictions;
    st->max_priority = ir_sampler_max(t->sampler);
}

void tableItem(const ir_table *t, uint64_t id, ir_item_view *v) {
    uint64_t slot = id % t->o.capacity;
    v->id = id;
    v->stored = ir_sampler_get(t->sampler, slot);
    v->off = t->slot_off[slot];
    v->data = t->arena + v->off;
    v->len = t->slot_len[slot];
}

int tableLoadBegin(ir_table_loader *ld, ir_table *t, const ir_table_state *st, const char **err) {
    memset(ld, 0, offsetof(ir_table_loader, slots));
    ld->t = t;
    ld->st = *st;
    if (t->next_id != 0 || tableSize(t) != 0) {
        *err = "table is not empty";
        return -1;
    }
    /* ids go out as int64 (REPLAY.ADD replies, REPLAY.UPDATE arguments) */
    if (st->oldest_id > st->next_id || st->next_id > (uint64_t)INT64_MAX ||
        st->next_id - st->oldest_id > t->o.capacity) {
        *err = "bad id window (oldest_id, next_id)";
        return -1;
    }
    if (st->tail > t->o.maxbytes || st->tail % ITEM_ALIGN) {
        *err = "arena tail out of range";
        return -1;
    }
    /* the sampler's max starts at 1 and never decreases */
    if (!(st->max_priority >= 1.0) || !isfinite(st->max_priority)) {
        *err = "bad max priority";
        return -1;
    }
    t->oldest_id = t->next_id = st->oldest_id;
    t->tail = 0;
    t->bytes_used = 0;
    return 0;
}

static int loadFlushPriorities(ir_table_loader *ld) {
    if (!ld->nbatch) return 0;
    int rc = ir_sampler_set_stored(ld->t->sampler, ld->slots, ld->stored, ld->nbatch);
    ld->nbatch = 0;
    return rc;
}

char *tableLoadItem(ir_table_loader *ld, uint64_t id, double stored, uint64_t off, uint64_t len,
                    const char **err) {
    ir_table *t = ld->t;
    if (id != t->next_id || id >= ld->st.next_id) {
        *err = "item ids are not the live window in order";
        return NULL;
    }
    if (!(stored >= 0) || !(stored <= ld->st.max_priority)) { /* NaN fails both */
        *err = "stored priority out of range";
        return NULL;
    }
    if (len > UINT32_MAX || reserveLen((size_t)len) > t->o.maxbytes) {
        *err = "item larger than the table's MAXBYTES";
        return NULL;
    }
    uint64_t need = reserveLen((size_t)len);
    if (off % ITEM_ALIGN || off > t->o.maxbytes - need) {
        *err = "item outside the arena";
        return NULL;
    }
    /* Where tableAdd could have put it: anywhere for the oldest item; then
     * right after the previous one, or back at 0 once (the ring wraps), and
     * after the wrap never into the oldest item's bytes. */
    if (tableSize(t) == 0) {
        ld->head = off;
        ld->wrapped = 0;
    } else if (off == t->tail && (!ld->wrapped || off + need <= ld->head)) {
    } else if (off == 0 && !ld->wrapped && need <= ld->head) {
        ld->wrapped = 1;
    } else {
        *err = "items overlap in the arena";
        return NULL;
    }
    uint64_t slot = id % t->o.capacity;
    t->slot_id[slot] = id;
    t->slot_off[slot] = off;
    t->slot_len[slot] = (uint32_t)len;
    noteItemLen(t, id, (uint32_t)len);
    t->tail = off + need;
    t->bytes_used += need;
    t->next_id++;
    ld->slots[ld->nbatch] = slot;
    ld->stored[ld->nbatch++] = stored;
    if (ld->nbatch == IR_TABLE_LOAD_BATCH && loadFlushPriorities(ld) != IR_OK) {
        *err = "stored priority out of range";
        return NULL;
    }
    return t->arena + off;
}

int tableLoadEnd(ir_table_loader *ld, const char **err) {
    ir_table *t = ld->t;
    const ir_table_state *st = &ld->st;
    if (loadFlushPriorities(ld) != IR_OK) {
        *err = "stored priority out of range";
        return -1;
    }
    if (t->next_id != st->next_id) {
        *err = "fewer items than the id window holds";
        return -1;
    }
    if (tableSize(t) == 0) t->tail = st->tail; /* the next ADD starts at 0 anyway */
    else if (t->tail != st->tail) {
        *err = "arena tail does not follow the newest item";
        return -1;
    }
    /* The max may have come from an item that is gone: raise the sampler's
     * max through slot 0 and put slot 0 back (inner nodes are recomputed
     * from the leaves, so the sums come out exactly as before). */
    ir_sampler *sp = t->sampler;
    if (st->max_priority > ir_sampler_max(sp)) {
        uint64_t slot = 0;
        double prev = ir_sampler_get(sp, slot);
        if (ir_sampler_set_stored(sp, &slot, &st->max_priority, 1) != IR_OK) {
            *err = "max priority out of range";
            return -1;
        }
        if (prev > 0) ir_sampler_set_stored(sp, &slot, &prev, 1);
        else ir_sampler_clear(sp, &slot, 1);
    }
    if (ir_sampler_max(sp) != st->max_priority) {
        *err = "an item's stored priority exceeds the max";
        return -1;
    }
    t->inserts = st->inserts;
    t->samples = st->samples;
    t->sample_calls = st->sample_calls;
    t->updates = st->updates;
    t->stale_updates = st->stale_updates;
    t->evictions = st->evictions;
    return 0;
}

void tablesMoveMissing(ir_tables *dst, ir_tables *src) {
    ir_table **tailp = &dst->head;
    while (*tailp) tailp = &(*tailp)->next;
    for (ir_table **pp = &src->head; *pp;) {
        ir_table *t = *pp;
        if (tableFind(dst, t->name, t->namelen)) {
            pp = &t->next;
            continue;
        }
        *pp = t->next;
        src->count--;
        t->next = NULL;
        *tailp = t;
        tailp = &t->next;
        dst->count++;
    }
}
