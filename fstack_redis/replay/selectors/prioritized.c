/* prioritized.c - the prioritized selector: P(i) = p_i / sum_k p_k over the
 * stored (transformed) priorities, with importance weights (Reverb's
 * Prioritized; Schaul et al.).
 *
 * What: draws from the K-ary sum tree every table keeps (sumtree.c, whose
 * head comment has the measured design), so no state of its own. Two ways:
 *   - sample_batch, a whole sample of n (the default table's path, and
 *     every table's before selectors existed): one stratified batch
 *     descent, then the drawn slots' ids and times-sampled counters;
 *   - pick, one draw at a time (MAX_TIMES_SAMPLED, where each draw may
 *     remove what it drew, and as a remover).
 * When no live item has mass it draws uniformly, as the sum tree does.
 */
#include "../replay.h"
#include "../selector.h"

uint64_t selUniformPick(ir_table *t, void *st, double *prob, double beta, float *w);

static uint64_t prioPick(ir_table *t, void *st, double *prob, double beta, float *w) {
    double total = ir_sampler_total(t->sampler);
    if (total > 0) {
        uint64_t slot;
        if (w) *w = 1.0f;
        ir_sampler_sample(t->sampler, 1, beta, 0, tableLive(t), &slot, w);
        *prob = ir_sampler_get(t->sampler, slot) / total;
        return slot;
    }
    return selUniformPick(t, st, prob, beta, w);
}

static int prioBatch(ir_table *t, size_t n, double beta) {
    uint64_t live = tableLive(t);
    if (t->general && !(ir_sampler_total(t->sampler) > 0)) return IR_SEL_ONE_AT_A_TIME;
    int rc = ir_sampler_sample(t->sampler, n, beta, t->oldest_id % t->o.capacity, live,
                               t->scratch_slots, t->scratch_weights);
    if (rc != IR_OK) return rc;
    /* On a ring table the live ids [oldest_id, next_id) sit at slot
     * id % capacity: a drawn slot's id follows from the slot, with no read of
     * slot_id (a cache miss per item at 2M items, as costly as the descent).
     * The slot's record (its off and len, what the reply's item spans come
     * from, and the times counter, in one cache line) is prefetched
     * IR_TABLE_PF ahead, so the misses overlap. */
    const uint64_t *sl = t->scratch_slots, cap = t->o.capacity, first = t->oldest_id % cap;
    for (size_t i = 0; i < n; i++) {
        if (i + IR_TABLE_PF < n) __builtin_prefetch(&t->slots[sl[i + IR_TABLE_PF]], 1);
        uint64_t slot = sl[i];
        t->scratch_ids[i] =
            t->general ? t->slot_id[slot]
                       : t->oldest_id + (slot >= first ? slot - first : slot + cap - first);
        ir_slot *r = &t->slots[slot]; /* the line prefetched above */
        t->scratch_times[i] = ++r->times;
        t->scratch_spans[i] = (ir_item_span){t->arena + r->off, r->len};
    }
    t->prob_valid = 0;
    return IR_OK;
}

const ir_selector ir_sel_prioritized = {
    .name = "prioritized",
    .pick = prioPick,
    .sample_batch = prioBatch,
};
