/* uniform.c - the uniform selector: every live item equally likely
 * (Reverb's Uniform).
 *
 * What: one random offset into the id window (ring mode) or into the
 * table's dense list of live slots (general mode), O(1), no state of its
 * own. Why stateless: the table already keeps what a uniform draw needs
 * (the window, or the dense list it uses for its own walks).
 */
#include "../selector.h"

uint64_t selUniformPick(ir_table *t, void *st, double *prob, double beta, float *w);

uint64_t selUniformPick(ir_table *t, void *st, double *prob, double beta, float *w) {
    (void)st, (void)beta;
    uint64_t n = tableLive(t);
    if (w) *w = 1.0f;
    *prob = 1.0 / (double)n;
    if (t->general) return t->dense[selRandBelow(t, n)];
    return (t->oldest_id + selRandBelow(t, n)) % t->o.capacity;
}

const ir_selector ir_sel_uniform = {
    .name = "uniform",
    .pick = selUniformPick,
};
