/* test_sel_lifo.c - the lifo selector (fstack_redis/replay/selectors/lifo.c): the newest item first, in ring and general
 * mode; a drain in order, and every pairing against the model.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include "selector_model.h"
#include "selector.h"

int main(void) {
    /* the table of selectors names it, and REPLAY.CREATE's word parses back */
    CHECK(ir_selectors[IR_SEL_LIFO] == &ir_sel_lifo);
    CHECK(tableSelectorParse("LIFO", 4) == IR_SEL_LIFO);
    runSelectorCombos(IR_SEL_LIFO, 1500);
    checkDrainOrder(IR_SEL_LIFO, (const int[]){3, 2, 1, 0});
    return checkSummary();
}
