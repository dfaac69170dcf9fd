/* table.h - the replay table's storage (struct ir_table) and a server's set
 * of tables (struct ir_tables), for the engine's own files: replay.c (the
 * table), the selectors (selectors/, selector.h), limiter.c and persist.c.
 *
 * What and why apart from replay.h: replay.h is the API hosts call, where
 * both types are declared only; this is what the engine's parts share to
 * implement it. No host includes it (tests/test_layers.py), so a host
 * cannot come to depend on a field. A selector reads the storage it draws
 * from here without the table's API depending on the selectors (replay.c ->
 * selector.h -> table.h, no cycle).
 */
#ifndef IR_TABLE_H
#define IR_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "../inreplay.h"
#include "options.h"

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
    /* the sampler's and remover's selectors (selector.h), chosen at create,
     * and their states (NULL: stateless in this mode; one state when both
     * are the same stateful selector) */
    const struct ir_selector *sel_sampler, *sel_remover;
    void *sel_sampler_st, *sel_remover_st;
    /* the distinct states that inserts, removals and re-keys go to */
    int nstate;
    const struct ir_selector *state_sel[2];
    void *state[2];
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
    struct ir_item_span *scratch_spans; /* the drawn items in place (tableSampleView) */
    size_t scratch_cap, evicted_cap;
    /* TRAJECTORY tables (chunks.h): items are reference records into this
     * store, released when they leave the table; columns fixed by the first */
    struct ir_chunk_store *traj;
    struct ir_traj_layout *layout;
    struct ir_table *next;
} ir_table;

/* A server's tables (replay.h's ir_tables). */
typedef struct ir_tables {
    ir_table *head;
    size_t count;
    /* REPLAY.ADD's parsed batch (replay.h's ir_item_in), grown on demand and
     * kept (tablesAddScratch) */
    struct ir_item_in *add_items;
    uint64_t *add_ids;
    size_t add_cap;
} ir_tables;

static inline uint64_t tableLive(const ir_table *t) {
    return t->general ? t->gsize : t->next_id - t->oldest_id;
}

#endif
