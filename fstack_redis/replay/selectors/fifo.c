/* fifo.c - the fifo selector: the oldest live item (Reverb's Fifo).
 *
 * What: in ring mode the oldest item is the window's first id, O(1) and no
 * state; in general mode (items may leave from anywhere) a heap of slots
 * ordered by id (heap.c), O(log n) per insert and remove.
 * Why a heap and not a list: a general-mode table removes any item (a
 * consumed one, another selector's victim), which a heap with positions
 * does in O(log n) with 8 bytes per slot.
 */
#include "../selector.h"

static int fifoBefore(const ir_table *t, uint32_t a, uint32_t b) {
    return t->slot_id[a] < t->slot_id[b];
}

static void *fifoNew(const ir_table *t) { return heapStateNew(t, fifoBefore, 0); }

static uint64_t fifoPick(ir_table *t, void *st, double *prob, double beta, float *w) {
    (void)beta;
    if (w) *w = 1.0f;
    *prob = 1.0;
    if (!t->general) return t->oldest_id % t->o.capacity;
    return heapTop(st);
}

const ir_selector ir_sel_fifo = {
    .name = "fifo",
    .state_modes = IR_SEL_STATE_GENERAL,
    .slot_bytes = 8,
    .state_new = fifoNew,
    .state_free = heapStateFree,
    .insert = heapInsert,
    .remove = heapRemoveSlot,
    .pick = fifoPick,
};
