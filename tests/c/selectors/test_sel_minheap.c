/* test_sel_minheap.c - the minheap selector (fstack_redis/replay/selectors/minheap.c): the lowest stored priority first, ties to
 * the older item, re-keyed by updates; a drain in order, and every pairing
 * against the model.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include "selector_model.h"
#include "selector.h"

int main(void) {
    /* the table of selectors names it, and REPLAY.CREATE's word parses back */
    CHECK(ir_selectors[IR_SEL_MINHEAP] == &ir_sel_minheap);
    CHECK(tableSelectorParse("MINHEAP", 7) == IR_SEL_MINHEAP);
    runSelectorCombos(IR_SEL_MINHEAP, 1500);
    checkDrainOrder(IR_SEL_MINHEAP, (const int[]){1, 3, 2, 0});
    return checkSummary();
}
