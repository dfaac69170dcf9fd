/* test_sel_minheap.c - the minheap selector (fstack_redis/replay/selectors/minheap.c): the lowest stored priority first, ties to
 * the older item, re-keyed by updates; a drain in order, and every pairing
 * against the model.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include "selector_model.h"
#include "selector.h"

/* A QUEUE-like table (MAX_TIMES_SAMPLED 1, uniform remover) of items with
 * priorities 3, 1, 2, 1 drains in exactly this selector's order. */
static void drainOrder(int sel, const int *want) {
    ir_tables *ts = tablesNew();
    ir_table_opts o = tableOptsDefault();
    o.capacity = 8;
    o.maxbytes = 4096;
    o.alpha = 1.0;
    o.epsilon = 0;
    o.sampler = sel;
    o.remover = IR_SEL_UNIFORM;
    o.max_times_sampled = 1;
    ir_table *t;
    const char *err;
    CHECK(tableCreate(ts, "o", 1, &o, &t, &err) == 0);
    ir_item_in it[4] = {{"a", 1, 3, 0}, {"b", 1, 1, 0}, {"c", 1, 2, 0}, {"d", 1, 1, 0}};
    uint64_t ids[4];
    CHECK(tableAdd(t, it, 4, ids, &err) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK(tableSample(t, 1, 0.4) == IR_OK);
        CHECKF(t->scratch_ids[0] == ids[want[i]], "draw %d: id %llu, want %llu", i,
               (unsigned long long)t->scratch_ids[0], (unsigned long long)ids[want[i]]);
    }
    CHECK(tableSample(t, 1, 0.4) == IR_EEMPTY);
    tablesFree(ts);
}

int main(void) {
    /* the table of selectors names it, and REPLAY.CREATE's word parses back */
    CHECK(ir_selectors[IR_SEL_MINHEAP] == &ir_sel_minheap);
    CHECK(tableSelectorParse("MINHEAP", 7) == IR_SEL_MINHEAP);
    runSelectorCombos(IR_SEL_MINHEAP, 1500);
    drainOrder(IR_SEL_MINHEAP, (const int[]){1, 3, 2, 0});
    return checkSummary();
}
