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
 * each usable as the sampler and as the remover; each is one file in
 * selectors/ behind selector.h's interface.
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
#include "limiter.h"
#include "options.h"
#include "pin.h"

/* A replay table and a server's set of them: opaque to hosts, which read
 * and change them only through the functions below. Their storage is
 * table.h's, the engine's own (only fstack_redis/replay/ includes it), so the
 * compiler holds every host to these functions. */
typedef struct ir_table ir_table;
typedef struct ir_tables ir_tables;
struct ir_chunk_store;
struct ir_traj_layout;

/* "prioritized", ... for a selector; NULL for none. */
const char *tableSelectorName(int sel);
/* The selector named by s (case-insensitive), or 0 for none. */
int tableSelectorParse(const char *s, size_t len);
/* Every selector's name, "prioritized, uniform, ... or maxheap". */
const char *tableSelectorList(void);

/* What an insert carries: a raw priority, or use_max for "the table's max". */
typedef struct ir_item_in {
    const char *data;
    size_t len;
    double raw; /* ignored when use_max */
    int use_max;
} ir_item_in;

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

/* ---- a table, for hosts ----------------------------------------------------
 * ir_table is opaque outside the engine (its storage is table.h's, the
 * engine's own): hosts read and change a table through these functions. */

/* The live items. */
uint64_t tableSize(const ir_table *t);
/* The name (NUL-terminated; tableNameLen bytes). */
const char *tableName(const ir_table *t);
size_t tableNameLen(const ir_table *t);
/* The options in force (sampler and remover never IR_SEL_DEFAULT). */
const ir_table_opts *tableOpts(const ir_table *t);
/* The sampler in force (never IR_SEL_DEFAULT). */
int tableSampler(const ir_table *t);
/* The host's state of the table (NULL until set; see ir_engine_host). */
void *tableHost(const ir_table *t);
void tableSetHost(ir_table *t, void *host);
/* Where a reply that points into the table's items registers (pin.h). */
struct ir_pin **tablePin(ir_table *t);
/* 1 if the table holds trajectory items (REPLAY.CREATE ... TRAJECTORY). */
int tableHoldsTrajectories(const ir_table *t);
/* Make a new, empty table a TRAJECTORY table: its items are reference
 * records into store (chunks.h), released when they leave the table, with
 * columns the first item fixes. 0, or -1 on no memory (nothing changed). */
int tableMakeTrajectories(ir_table *t, struct ir_chunk_store *store);
/* A TRAJECTORY table's chunk store and columns (NULL for other tables). */
struct ir_chunk_store *tableTrajStore(const ir_table *t);
struct ir_traj_layout *tableTrajLayout(const ir_table *t);
/* Point an empty TRAJECTORY table at another chunk store (a snapshot's
 * store replacing the server's). */
void tableSetTrajStore(ir_table *t, struct ir_chunk_store *store);
/* The tables of ts in order: the first, and the one after t (NULL: none). */
ir_table *tablesFirst(ir_tables *ts);
ir_table *tableNext(const ir_table *t);
/* 1 the first time MAXBYTES holds fewer items than CAPACITY (the log says
 * so once), else 0. */
int tableCapacityWarnOnce(ir_table *t);
/* 1 and *len when every live item is known to have one length without a
 * scan (O(1)); 0 when that would take a look at every item. */
int tableOneSizeKnown(const ir_table *t, uint32_t *len);

/* REPLAY.INFO's view of a table (besides its options and limiter). */
typedef struct ir_table_info {
    uint64_t size, inserts, samples, sample_calls, updates, stale_updates, evictions, consumed;
    uint64_t bytes_used, next_id, capacity_fits, compactions;
    double total_priority, max_priority, min_priority; /* min: +inf with no positive one */
    unsigned fanout;
    int general; /* storage: 1 general, 0 ring */
} ir_table_info;
void tableInfo(const ir_table *t, ir_table_info *info);
/* The slot of a live id, or UINT64_MAX if the id is not live. */
uint64_t tableSlotOf(const ir_table *t, uint64_t id);

/* How many items fit: the capacity, or fewer when MAXBYTES cannot hold capacity
 * items of the current mean stored size (the arena evicts the oldest first). */
uint64_t tableCapacityFits(const ir_table *t);

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

/* One item in place in the table's arena: valid until the table's next
 * insert (a reply that sends it later pins it: tablePin). */
typedef struct ir_item_span {
    const char *data;
    size_t len;
} ir_item_span;

/* The last sample of n, read in place (nothing copied): the caller's struct
 * gets pointers into the table's scratch, valid until its next call. */
typedef struct ir_sample_view {
    size_t n;
    const uint64_t *ids;       /* the drawn ids */
    const float *weights;      /* their importance weights */
    const ir_item_span *items; /* their bytes */
    const uint32_t *times;     /* times sampled, this draw included */
    const double *prob;        /* each draw's probability (after tableSampleProb) */
    const double *stored;      /* its stored priority (after tableSampleProb) */
    uint64_t size0;            /* the table's size when the sample began */
} ir_sample_view;
void tableSampleView(const ir_table *t, size_t n, ir_sample_view *v);
/* The shard's side of exact sampling across a group (WITHSTATS) for the
 * last sample of n: *total and *min (the minimum positive stored priority, 0
 * for none), *live, and each draw's probability inside the shard (returned:
 * n values in the table's scratch). A uniform sampler reports mass 1 per
 * item (total = size, minimum 1). */
const double *tableSampleShardStats(ir_table *t, size_t n, double *total, double *min,
                                    uint64_t *live);
/* Apply raw float32 priorities to ids; stale ids (evicted) are counted and
 * skipped. Returns the number applied, or -1 with *err. */
long tableUpdate(ir_table *t, const uint64_t *ids, const float *raw, size_t n, const char **err);
/* The same from REPLAY.UPDATE's wire arguments: n little-endian int64 ids
 * and n float32 priorities, with no alignment promise (copied out first). */
long tableUpdateWire(ir_table *t, const char *ids_le, const char *prios_le, size_t n,
                     const char **err);
/* Make sure scratch holds at least n entries. */
int tableScratch(ir_table *t, size_t n);
/* REPLAY.ADD's batch scratch, kept in ts and grown on demand: 0 with *items
 * and *ids holding at least n entries (valid until the next call), or -1 on
 * no memory. */
int tablesAddScratch(ir_tables *ts, size_t n, ir_item_in **items, uint64_t **ids);
/* How many tables ts has. */
size_t tablesCount(const ir_tables *ts);
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
