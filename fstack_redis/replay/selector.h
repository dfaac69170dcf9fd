/* selector.h - the interface every selector implements (engine-internal).
 *
 * What: a selector decides which item a table's sampler draws and which one
 * its remover takes out (Reverb's ItemSelector). Each is one file in
 * selectors/ exposing one `const ir_selector`, and ir_selectors[] (in
 * selectors/selectors.c) maps the IR_SEL_* numbers (replay.h, also the
 * snapshot's encoding) to them. A table picks its sampler's and remover's
 * selectors once, at tableCreate, and from then on calls them only through
 * these pointers.
 *
 * Why: the table (replay.c) owns storage (slots, arena, the id window or
 * the id hash, the dense list of live slots, the sum tree of priorities that
 * every table keeps), and a selector owns only the order it draws in. Adding
 * a selector is its file, a line in ir_selectors[] (and an IR_SEL_* number)
 * and a test in tests/c/selectors/; nothing in replay.c or the hosts.
 *
 * Storage modes (replay.c's head comment): in ring mode the remover is
 * always fifo on the id window and only the sampler is consulted; in general
 * mode both are. A selector says in which modes it keeps per-slot state
 * (state_modes); a stateless selector reads the table's own storage (the
 * window, the dense list, the sum tree). Hooks a stateless selector does not
 * need are NULL, and the table calls insert/remove/rekey only on the states
 * that exist (none on the default prioritized/fifo ring table: its hot paths
 * make no indirect call per item).
 *
 * A table whose sampler and remover are the same stateful selector keeps
 * one state for both (one heap, not two).
 */
#ifndef IR_SELECTOR_H
#define IR_SELECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

#define IR_SEL_STATE_RING 1    /* keeps state in ring mode */
#define IR_SEL_STATE_GENERAL 2 /* keeps state in general mode */

/* sample_batch's answer when it does not apply: draw one at a time */
#define IR_SEL_ONE_AT_A_TIME 1

typedef struct ir_selector {
    const char *name;     /* REPLAY.CREATE's SAMPLER/REMOVER word */
    unsigned state_modes; /* IR_SEL_STATE_* */
    unsigned slot_bytes;  /* state bytes per slot when it keeps state (memory accounting) */
    /* The state, for a table of t->o.capacity slots: NULL on no memory. */
    void *(*state_new)(const ir_table *t);
    void (*state_free)(void *st);
    /* A live slot came (its id and priority already set) or goes. */
    void (*insert)(const ir_table *t, void *st, uint32_t slot);
    void (*remove)(const ir_table *t, void *st, uint32_t slot);
    /* The stored priorities of slots[0..n) are about to change (begin) and
     * have changed (end): selectors ordered by priority re-key them. */
    void (*rekey_begin)(const ir_table *t, void *st, const uint64_t *slots, size_t n);
    void (*rekey_end)(const ir_table *t, void *st, const uint64_t *slots, size_t n);
    /* One draw from a non-empty table: the slot, *prob its probability and,
     * when w is not NULL, its importance weight under beta (1 unless the
     * selector weighs draws). st is NULL in a mode without state. */
    uint64_t (*pick)(ir_table *t, void *st, double *prob, double beta, float *w);
    /* Optional: a whole sample of n (no MAX_TIMES_SAMPLED) into the table's
     * scratch (slots, ids, weights, times; prob_valid), faster than n picks;
     * IR_SEL_ONE_AT_A_TIME when it does not apply to the table as it is. */
    int (*sample_batch)(ir_table *t, size_t n, double beta);
} ir_selector;

extern const ir_selector *const ir_selectors[IR_SEL_COUNT];

extern const ir_selector ir_sel_prioritized, ir_sel_uniform, ir_sel_fifo, ir_sel_lifo,
    ir_sel_minheap, ir_sel_maxheap;

/* xorshift128+ on the table's rng, for the uniform selector and removers */
static inline uint64_t selRand(ir_table *t) {
    uint64_t s1 = t->rng[0];
    const uint64_t s0 = t->rng[1];
    t->rng[0] = s0;
    s1 ^= s1 << 23;
    t->rng[1] = s1 ^ s0 ^ (s1 >> 18) ^ (s0 >> 5);
    return t->rng[1] + s0;
}

static inline uint64_t selRandBelow(ir_table *t, uint64_t n) {
    uint64_t k = (uint64_t)((double)(selRand(t) >> 11) * 0x1.0p-53 * (double)n);
    return k < n ? k : n - 1;
}

/* ---- the binary heap of slots (selectors/heap.c) shared by fifo, lifo,
 * minheap and maxheap: each gives its order as `before`. */
typedef int (*ir_heap_before)(const ir_table *t, uint32_t a, uint32_t b);
void *heapStateNew(const ir_table *t, ir_heap_before before, int keyed);
void heapStateFree(void *st);
void heapInsert(const ir_table *t, void *st, uint32_t slot);
void heapRemoveSlot(const ir_table *t, void *st, uint32_t slot);
/* 0 if the heap holds exactly `live` slots in order at their positions, else -1
 * with what is wrong in why (checked by the fuzzer after every input). */
int heapCheck(const ir_table *t, const void *st, uint64_t live, char *why, size_t len);
void heapRekeyBegin(const ir_table *t, void *st, const uint64_t *slots, size_t n);
void heapRekeyEnd(const ir_table *t, void *st, const uint64_t *slots, size_t n);
uint32_t heapTop(const void *st);

#endif
