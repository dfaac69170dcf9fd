/* minheap.c - the minheap selector: the live item of the lowest stored
 * priority, ties to the older item (Reverb's MinHeap).
 *
 * What: a heap of slots keyed by the sum tree's stored priority (heap.c) in
 * both storage modes, re-keyed when REPLAY.UPDATE changes priorities.
 * Why a heap of its own: the sum tree answers "draw in proportion", not
 * "the smallest", and a ring table has no order by priority.
 */
#include "../selector.h"

static int minBefore(const ir_table *t, uint32_t a, uint32_t b) {
    double pa = ir_sampler_get(t->sampler, a), pb = ir_sampler_get(t->sampler, b);
    if (pa != pb) return pa < pb;
    return t->slot_id[a] < t->slot_id[b];
}

static void *minNew(const ir_table *t) { return heapStateNew(t, minBefore, 1); }

static uint64_t minPick(ir_table *t, void *st, double *prob, double beta, float *w) {
    (void)t, (void)beta;
    if (w) *w = 1.0f;
    *prob = 1.0;
    return heapTop(st);
}

const ir_selector ir_sel_minheap = {
    .name = "minheap",
    .state_modes = IR_SEL_STATE_RING | IR_SEL_STATE_GENERAL,
    .slot_bytes = 8,
    .state_new = minNew,
    .state_free = heapStateFree,
    .insert = heapInsert,
    .remove = heapRemoveSlot,
    .rekey_begin = heapRekeyBegin,
    .rekey_end = heapRekeyEnd,
    .pick = minPick,
};
