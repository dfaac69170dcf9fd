/* selectors.c - the table of selectors: IR_SEL_* (replay.h) -> its
 * implementation (selector.h). Adding a selector: its file in this folder,
 * its IR_SEL_* number before IR_SEL_COUNT, its line here, and its test in
 * tests/c/selectors/. The numbers are also the snapshot's encoding of a
 * table's sampler and remover: never renumber them.
 */
#include "../selector.h"

const ir_selector *const ir_selectors[IR_SEL_COUNT] = {
    [IR_SEL_PRIORITIZED] = &ir_sel_prioritized,
    [IR_SEL_UNIFORM] = &ir_sel_uniform,
    [IR_SEL_FIFO] = &ir_sel_fifo,
    [IR_SEL_LIFO] = &ir_sel_lifo,
    [IR_SEL_MINHEAP] = &ir_sel_minheap,
    [IR_SEL_MAXHEAP] = &ir_sel_maxheap,
};
