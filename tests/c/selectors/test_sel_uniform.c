/* test_sel_uniform.c - the uniform selector (fstack_redis/replay/selectors/uniform.c): every live item equally likely; 10^6 draws
 * against the exact distribution, and every pairing against the model.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include "selector_model.h"
#include "selector.h"

int main(void) {
    /* the table of selectors names it, and REPLAY.CREATE's word parses back */
    CHECK(ir_selectors[IR_SEL_UNIFORM] == &ir_sel_uniform);
    CHECK(tableSelectorParse("UNIFORM", 7) == IR_SEL_UNIFORM);
    runSelectorCombos(IR_SEL_UNIFORM, 1500);
    distribution(IR_SEL_UNIFORM);
    return checkSummary();
}
