/* test_sel_fifo.c - the fifo selector (fstack_redis/replay/selectors/fifo.c): the oldest item first, in ring and general
 * mode; a drain in order, and every pairing against the model.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include "selector_model.h"
#include "selector.h"

int main(void) {
    /* the table of selectors names it, and REPLAY.CREATE's word parses back */
    CHECK(ir_selectors[IR_SEL_FIFO] == &ir_sel_fifo);
    CHECK(tableSelectorParse("FIFO", 4) == IR_SEL_FIFO);
    runSelectorCombos(IR_SEL_FIFO, 1500);
    checkDrainOrder(IR_SEL_FIFO, (const int[]){0, 1, 2, 3});
    return checkSummary();
}
