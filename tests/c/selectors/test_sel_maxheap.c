/* test_sel_maxheap.c - the maxheap selector (fstack_redis/replay/selectors/maxheap.c): the highest stored priority first, ties to
 * the older item, re-keyed by updates; a drain in order, and every pairing
 * against the model.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include "selector_model.h"
#include "selector.h"

int main(void) {
    /* the table of selectors names it, and REPLAY.CREATE's word parses back */
    CHECK(ir_selectors[IR_SEL_MAXHEAP] == &ir_sel_maxheap);
    CHECK(tableSelectorParse("MAXHEAP", 7) == IR_SEL_MAXHEAP);
    runSelectorCombos(IR_SEL_MAXHEAP, 1500);
    checkDrainOrder(IR_SEL_MAXHEAP, (const int[]){0, 2, 1, 3});
    return checkSummary();
}
