/* replay.h - replay tables: fixed capacity, a sampler and a remover.
 *
 * Every inserted item gets the next 64-bit id. A table is in one of two
 * storage modes (replay.c's head comment has the design and its numbers):
 *
 * ring mode (REMOVER fifo and no MAX_TIMES_SAMPLED; every table before
 *   selectors existed): an item's slot is id % capacity, items are kept in
 *   one preallocated arena (a ring of maxbytes bytes), and when the arena or
 *   the slots are full the oldest items go. Live ids are always the window
 *   [oldest_id, next_id).
 * general mode (any other remover, or MAX_TIMES_SAMPLED): any live item may
 *   be removed, so slots come from a free list, ids map to slots through an
 *   open-addressing hash (exact stale-id detection), and the arena is a
 *   bump allocator over 1.25 x maxbytes that compacts when it reaches the end.
 *
 * Selectors (Reverb's): prioritized (the K-ary sum tree), uniform, fifo,
 * lifo, minheap and maxheap (by stored priority, ties to the older item),
 * each usable as the sampler and as the remover.
 *
 * Concurrency contract: a table belongs to the thread that runs its host (the
 * server); nothing here locks.
 *
 * This is the replay engine's public header (with chunks.h and pin.h, beside
 * it in fstack_redis/replay/, and ../inreplay.h, the sampler's public API). The
 * engine includes no server, reply or transport header: what it needs from
 * the host that embeds it is the host hook below and pin.h's two calls.
 */
#ifndef IR_REPLAY_H
#define IR_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "../inreplay.h"
#include "pin.h"

#define IR_TABLE_NAME_MAX 200
#define IR_MAX_SAMPLE (1 << 20)
#define IR_TABLE_PF 16 /* prefetch distance of the loops over drawn slots (random: cache misses) */

/* Selectors. 0 in ir_table_opts means the default (prioritized sampler,
 * fifo remover). */
enum {
    IR_SEL_DEFAULT = 0,
    IR_SEL_PRIORITIZED,
    IR_SEL_UNIFORM,
    IR_SEL_FIFO,
    IR_SEL_LIFO,
    IR_SEL_MINHEAP,
    IR_SEL_MAXHEAP,
    IR_SEL_COUNT
};
/* "prioritized", ... for a selector; NULL for none. */
const char *tableSelectorName(int sel);
/* The selector named by s (case-insensitive), or 0 for none. */
int tableSelectorParse(const char *s, size_t len);

/* Every table's defaults: REPLAY.CREATE without the argument, and the start-up
 * table's flags (config.c's table takes its default texts from these). */
#define IR_TABLE_ALPHA 0.6
#define IR_TABLE_BETA 0.4
#define IR_TABLE_EPSILON 1e-6
#define IR_TABLE_XSTR_(x) #x
#define IR_TABLE_XSTR(x) IR_TABLE_XSTR_(x) /* a default as config.c's text */

typedef struct ir_table_opts {
    uint64_t capacity;
    double alpha, beta, epsilon;
    uint64_t maxbytes;
    unsigned fanout;
    uint64_t seed;
    uint64_t id_base;           /* the first id: shard index << IR_SHARD_ID_BITS */
    int sampler, remover;       /* IR_SEL_*, 0 for the defaults */
    uint32_t max_times_sampled; /* 0: no limit */
} ir_table_opts;

/* The rate limiter, Reverb's SampleToInsertRatio (see t_replay.c): sampling
 * waits until the table holds min_size items; with samples_per_insert > 0,
 * sampled items may run at most error_buffer ahead of samples_per_insert x
 * (inserted items - min_size), and inserts at most error_buffer behind.
 * All 0: no limit. Set once, after tableCreate (tableLimiterCheck first). */
typedef struct ir_limiter_opts {
    uint64_t min_size;
    double samples_per_insert;
    double error_buffer;
    /* Reverb's Queue(n)/Stack(n): an insert waits while the table holds n
     * items, a sample while it holds none (set by REPLAY.CREATE ... QUEUE n
     * or STACK n, which also set the selectors and MAX_TIMES_SAMPLED 1). */
    uint64_t queue;
} ir_limiter_opts;

/* ERROR_BUFFER when none is given: the smallest Reverb accepts, max(1, rate). */
static inline double tableDefaultErrorBuffer(double samples_per_insert) {
    return samples_per_insert > 1 ? samples_per_insert : 1;
}
/* Check limiter options against a table's capacity: 0 or -1 with *err. */
int tableLimiterCheck(const ir_limiter_opts *l, uint64_t capacity, const char **err);

/* A binary heap of slots with each slot's position (UINT32_MAX: absent). */
typedef struct ir_heap {
    int kind; /* IR_SEL_FIFO, _LIFO, _MINHEAP, _MAXHEAP */
    uint64_t n;
    uint32_t *h, *pos;
} ir_heap;

/* A slot's record: 16 bytes, so that a sample's one random read per drawn
 * slot (a cache miss at 2M items) gets the item's place, its length and its
 * times-sampled counter together (three arrays were three misses). */
typedef struct ir_slot {
    uint64_t off;   /* the item's bytes: arena + off */
    uint32_t len;   /* its length */
    uint32_t times; /* times sampled */
} ir_slot;

typedef struct ir_table {
    char *name;
    size_t namelen;
    ir_table_opts o;
    ir_sampler *sampler;
    /* per slot: which id lives there, and its record (where its bytes are,
     * times sampled) */
    uint64_t *slot_id;
    ir_slot *slots;
    /* the arena ring */
    char *arena;
    /* Pending replies point into the arena (pin.h; the server's ir_pin): an ADD
     * that rewrites bytes they still have to send first has those reply
     * segments copied (pinOverwrite), and dropping the table leaves the
     * arena mapped until the last of them is written (pinDetach). */
    struct ir_pin *pin;
    uint64_t tail;       /* where the next item goes */
    uint64_t bytes_used; /* bytes of live items (rounded as stored) */
    uint64_t next_id, oldest_id;
    /* The newest run of items of one length: ids [run_start, next_id) are all
     * run_len bytes long, so every live item is iff run_start <= oldest_id. */
    uint64_t run_start;
    uint32_t run_len;
    /* counters (consumed: items removed for reaching max_times_sampled) */
    uint64_t inserts, samples, sample_calls, updates, stale_updates, evictions, consumed;
    /* ---- selectors (see replay.c) ---- */
    int general;         /* general storage mode (see the top of this file) */
    uint64_t draws_left; /* with max_times_sampled k: sum over live items of k - times */
    ir_heap heap[2];     /* heaps of the fifo/lifo/min/max selectors in use */
    int nheap, heap_of_sampler, heap_of_remover; /* -1: none */
    uint64_t rng[2]; /* the uniform selector's and the remover's draws */
    /* general mode only */
    uint64_t gsize;              /* live items */
    uint32_t *dense, *dense_pos; /* the live slots, dense (uniform draws) */
    uint32_t *free_slots;
    uint64_t nfree;
    uint64_t *hkey; /* id -> slot, linear probing, UINT64_MAX empty */
    uint32_t *hval;
    uint64_t hmask;
    uint64_t arena_len; /* bytes mapped: maxbytes + maxbytes / 4 */
    uint64_t compactions;
    uint64_t run_count; /* live items of run_len bytes */
    /* per draw of the last tableSample on the non-default paths */
    double *scratch_prob, *scratch_stored;
    uint32_t *scratch_times;
    int prob_valid;
    uint64_t sample_size0; /* the table's size when the last sample began */
    int capacity_warned;   /* the log said once that MAXBYTES holds fewer than CAPACITY */
    /* the rate limiter's options and state: items inserted and sampled
     * while it was configured, and the time clients waited in total (the
     * host keeps the waiting clients, in its own state below) */
    ir_limiter_opts lim;
    uint64_t limiter_inserts, limiter_samples;
    uint64_t waited_us;
    /* The host's per-table state (the server's clients waiting on the
     * limiter, blocked.c), NULL until the host sets it. The engine never
     * reads it: when the table goes, the host's table_gone releases it. */
    void *host;
    /* scratch for one request, grown on demand and kept */
    uint64_t *scratch_slots, *scratch_ids, *scratch_evicted;
    double *scratch_prio;
    float *scratch_weights;
    size_t scratch_cap, evicted_cap;
    /* TRAJECTORY tables (chunks.h): items are reference records into this
     * store, released when they leave the table; columns fixed by the first */
    struct ir_chunk_store *traj;
    struct ir_traj_layout *layout;
    struct ir_table *next;
} ir_table;

/* What an insert carries: a raw priority, or use_max for "the table's max". */
typedef struct ir_item_in {
    const char *data;
    size_t len;
    double raw; /* ignored when use_max */
    int use_max;
} ir_item_in;

typedef struct ir_tables {
    ir_table *head;
    size_t count;
    /* REPLAY.ADD's parsed batch, grown on demand and kept */
    ir_item_in *add_items;
    uint64_t *add_ids;
    size_t add_cap;
} ir_tables;

/* ---- the host -------------------------------------------------------------
 * What the engine calls in the program that embeds it. Set once, before the
 * first table with host state goes; NULL (the default) for none. */
typedef struct ir_engine_host {
    /* A table whose host state is set (t->host != NULL) goes (tableDrop,
     * tablesFlush, tablesFree): called first, while the table is intact
     * (its name and counters readable); it must release t->host. */
    void (*table_gone)(struct ir_table *t);
} ir_engine_host;
void engineSetHost(const ir_engine_host *h);

ir_tables *tablesNew(void);
void tablesFree(ir_tables *ts);
ir_table *tableFind(ir_tables *ts, const char *name, size_t len);
/* Returns 0, or -1 with *err set to a static message. */
/* The options of a table nobody said anything about (capacity 0: the caller's). */
ir_table_opts tableOptsDefault(void);
int tableCreate(ir_tables *ts, const char *name, size_t len, const ir_table_opts *o, ir_table **out,
                const char **err);
int tableDrop(ir_tables *ts, const char *name, size_t len);
void tablesFlush(ir_tables *ts);

static inline uint64_t tableSize(const ir_table *t) {
    return t->general ? t->gsize : t->next_id - t->oldest_id;
}
/* The sampler and remover in force (never IR_SEL_DEFAULT). */
static inline int tableSampler(const ir_table *t) { return t->o.sampler; }
static inline int tableRemover(const ir_table *t) { return t->o.remover; }
/* The slot of a live id, or UINT64_MAX if the id is not live. */
uint64_t tableSlotOf(const ir_table *t, uint64_t id);

/* How many items fit: the capacity, or fewer when MAXBYTES cannot hold capacity
 * items of the current mean stored size (the arena evicts the oldest first). */
static inline uint64_t tableCapacityFits(const ir_table *t) {
    uint64_t n = tableSize(t);
    if (!n || !t->bytes_used) return t->o.capacity;
    uint64_t fits = (uint64_t)((double)t->o.maxbytes / ((double)t->bytes_used / (double)n));
    return fits < t->o.capacity ? fits : t->o.capacity;
}

/* 1 if every live item has the same length (O(1)). Otherwise *a and *b get
 * two of the lengths the table holds. */
int tableItemsOneSize(const ir_table *t, uint32_t *a, uint32_t *b);

/* Check a raw priority the way the sampler will: finite, >= 0, and finite
 * once transformed. */
int tablePriorityValid(const ir_table *t, double raw);
/* Insert n items (already validated); ids are written to ids_out. Returns 0
 * or -1 with *err (an item larger than the arena). Nothing changes on error. */
int tableAdd(ir_table *t, const ir_item_in *items, size_t n, uint64_t *ids_out, const char **err);
/* Sample n items into the table's scratch (slots, ids, weights). A sample
 * of n is n successive draws of the sampler; with max_times_sampled k an
 * item drawn for the k-th time is removed at once (it is not drawn again in
 * the same batch; its bytes stay readable until the next insert), and the
 * call needs draws_left >= n (else IR_EEMPTY, nothing drawn). The default
 * path (prioritized sampler without k) draws the batch stratified, as
 * before. scratch_times gets each draw's times sampled (this one included);
 * scratch_prob each draw's probability when prob_valid (else see
 * tableSampleProb). */
int tableSample(ir_table *t, size_t n, double beta);
/* Fill scratch_prob for the last sample if tableSample did not. */
void tableSampleProb(ir_table *t, size_t n);
/* Apply raw float32 priorities to ids; stale ids (evicted) are counted and
 * skipped. Returns the number applied, or -1 with *err. */
long tableUpdate(ir_table *t, const uint64_t *ids, const float *raw, size_t n, const char **err);
/* Make sure scratch holds at least n entries. */
int tableScratch(ir_table *t, size_t n);
/* Make sure ts->add_items and ts->add_ids hold at least n entries. */
int tablesAddScratch(ir_tables *ts, size_t n);
uint64_t tablesBytes(const ir_tables *ts);          /* live item bytes */
uint64_t tablesMemory(const ir_tables *ts);         /* items + per-slot metadata and trees */
uint64_t tableSlotBytesFor(const ir_table_opts *o); /* memory per slot with o's selectors */

/* ---- persistence (persist.c, for the snapshots and the module host's RDB) ----
 * Saving reads a table through tableGetState and tableItem; restoring creates
 * an empty table with tableCreate and rebuilds it with tableLoadBegin, one
 * tableLoadItem per live item (oldest first) and tableLoadEnd. The loader
 * checks everything against the invariants tableAdd keeps (ids consecutive,
 * the arena a ring of non-overlapping items, stored priorities at most the
 * sampler's max), so a crafted snapshot cannot make an inconsistent table. */

/* Everything about a table besides its options and items. */
typedef struct ir_table_state {
    uint64_t next_id, oldest_id, tail;
    uint64_t inserts, samples, sample_calls, updates, stale_updates, evictions, consumed;
    double max_priority; /* the sampler's max (what ADD ... MAX uses) */
} ir_table_state;

/* One live item, read in place. */
typedef struct ir_item_view {
    uint64_t id;
    double stored; /* stored (transformed) priority, exact */
    uint64_t off;  /* arena offset */
    const char *data;
    uint32_t len;
    uint32_t times; /* times sampled */
} ir_item_view;

void tableGetState(const ir_table *t, ir_table_state *st);
/* The live item with this id (oldest_id <= id < next_id). */
void tableItem(const ir_table *t, uint64_t id, ir_item_view *v);
/* General mode: the live items' ids, ascending, into out (tableSize
 * entries; the caller allocates). */
void tableGeneralIds(const ir_table *t, uint64_t *out);
/* Arena bytes an item of len bytes takes (what bytes_used counts). */
uint64_t tableItemReserve(size_t len);
/* 1 if an item of len bytes fits t's MAXBYTES (in general mode with its
 * 16-byte header): what tableAdd checks, for callers that check first. */
int tableItemFits(const ir_table *t, size_t len);

#define IR_TABLE_LOAD_BATCH 512

typedef struct ir_table_loader {
    ir_table *t;
    ir_table_state st;
    uint64_t head; /* arena offset of the oldest live item */
    int wrapped;   /* a later item went back to offset 0 */
    size_t nbatch; /* priorities not yet given to the sampler */
    uint64_t slots[IR_TABLE_LOAD_BATCH];
    double stored[IR_TABLE_LOAD_BATCH];
} ir_table_loader;

/* Start rebuilding t (just made by tableCreate, still empty) to state st.
 * Returns 0, or -1 with *err (a static message) if st cannot be a state of
 * a table with t's options. */
int tableLoadBegin(ir_table_loader *ld, ir_table *t, const ir_table_state *st, const char **err);
/* The next live item, oldest first: checks it and returns where its len
 * bytes go in the arena (the caller fills them), or NULL with *err. */
char *tableLoadItem(ir_table_loader *ld, uint64_t id, double stored, uint64_t off, uint64_t len,
                    const char **err);
/* After the last item: checks the count and the arena tail, gives the
 * priorities and the max to the sampler, sets the counters. Returns 0, or -1
 * with *err (then drop the table). */
int tableLoadEnd(ir_table_loader *ld, const char **err);
/* General mode loading (persist.c): tableLoadBegin, then per item in id
 * order tableLoadGeneral (returns where its len bytes go, or NULL with
 * *err), then tableLoadEnd. */
char *tableLoadGeneral(ir_table_loader *ld, uint64_t id, double stored, uint32_t times,
                       uint64_t len, const char **err);
/* Move every table of src whose name dst does not have to the end of dst. */
void tablesMoveMissing(ir_tables *dst, ir_tables *src);

#endif
