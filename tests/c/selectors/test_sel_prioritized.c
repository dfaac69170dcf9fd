/* test_sel_prioritized.c - the prioritized selector (fstack_redis/replay/selectors/prioritized.c): draws in proportion to the stored priorities, stratified in batches, one at a time under MAX_TIMES_SAMPLED;
 * 10^6 draws against the exact distribution (the sum tree itself has
 * test_sumtree.c), and every pairing against the model.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include "selector_model.h"
#include "selector.h"

int main(void) {
    /* the table of selectors names it, and REPLAY.CREATE's word parses back */
    CHECK(ir_selectors[IR_SEL_PRIORITIZED] == &ir_sel_prioritized);
    CHECK(tableSelectorParse("PRIORITIZED", 11) == IR_SEL_PRIORITIZED);
    runSelectorCombos(IR_SEL_PRIORITIZED, 1500);
    distribution(IR_SEL_PRIORITIZED);
    return checkSummary();
}
