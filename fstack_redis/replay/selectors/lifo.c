/* lifo.c - the lifo selector: the newest live item (Reverb's Lifo).
 *
 * What: in ring mode the newest item is the window's last id, O(1) and no
 * state; in general mode a heap of slots ordered by id, largest first
 * (heap.c). Why: as fifo.c, a general-mode table removes from anywhere.
 */
#include "../selector.h"

static int lifoBefore(const ir_table *t, uint32_t a, uint32_t b) {
    return t->slot_id[a] > t->slot_id[b];
}

static void *lifoNew(const ir_table *t) { return heapStateNew(t, lifoBefore, 0); }

static uint64_t lifoPick(ir_table *t, void *st, double *prob, double beta, float *w) {
    (void)beta;
    if (w) *w = 1.0f;
    *prob = 1.0;
    if (!t->general) return (t->next_id - 1) % t->o.capacity;
    return heapTop(st);
}

const ir_selector ir_sel_lifo = {
    .name = "lifo",
    .state_modes = IR_SEL_STATE_GENERAL,
    .slot_bytes = 8,
    .state_new = lifoNew,
    .state_free = heapStateFree,
    .insert = heapInsert,
    .remove = heapRemoveSlot,
    .pick = lifoPick,
};
