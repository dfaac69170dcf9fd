/* test_limiter.c - every rule of the rate limiter (fstack_redis/replay/
 * limiter.h: Reverb's MinSize, SampleToInsertRatio, Queue and Stack, and the
 * draws MAX_TIMES_SAMPLED allows) on real tables, driven through the engine:
 * inserts and samples really change the table's size and draws, and the
 * limiter's decisions are checked before each call as a host would ask.
 * Run by `meson test` (suite engine) and under ASan/UBSan by `make test-c`.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "replay.h"
#include "table.h" /* white box: the table's storage */

static ir_tables *ts;

static ir_table *mk(uint64_t cap, int sampler, int remover, uint32_t k, ir_limiter_opts lim) {
    ir_table_opts o = tableOptsDefault();
    o.capacity = cap;
    o.maxbytes = 1 << 16;
    o.sampler = sampler;
    o.remover = remover;
    o.max_times_sampled = k;
    ir_table *t;
    const char *err = NULL;
    tableDrop(ts, "l", 1);
    CHECK(tableCreate(ts, "l", 1, &o, &t, &err) == 0);
    CHECKF(tableLimiterSet(t, &lim, &err) == 0, "%s", err);
    return t;
}

/* an insert of n items the way a host runs one: ask, then count */
static void add(ir_table *t, size_t n) {
    ir_item_in it[64];
    uint64_t ids[64];
    const char *err;
    for (size_t i = 0; i < n; i++) it[i] = (ir_item_in){"x", 1, 1.0, 0};
    CHECK(tableAdd(t, it, n, ids, &err) == 0);
    limiterRan(t, n, 0);
}

static void sample(ir_table *t, size_t n) {
    CHECK(tableSample(t, n, 0.4) == IR_OK);
    limiterRan(t, n, 1);
}

static void testNone(void) {
    ir_table *t = mk(8, 0, 0, 0, (ir_limiter_opts){0});
    CHECK(!limiterActive(t));
    CHECK(limiterHoldsInsert(t, 100) == IR_LIMIT_NONE);
    add(t, 3);
    CHECK(limiterHoldsSample(t, 1000) == IR_LIMIT_NONE);
    sample(t, 5);
    ir_limiter_state st;
    limiterState(t, &st);
    CHECK(st.inserts == 0 && st.samples == 0); /* nothing counted without a limit */
    CHECK(limiterError(t) == 0.0);
}

/* MinSize(n) only gates sampling: a table of fewer than n items holds
 * samples, never inserts; with any limit a sample needs one item at least. */
static void testMinSize(void) {
    ir_table *t = mk(16, 0, 0, 0, (ir_limiter_opts){.min_size = 3});
    CHECK(limiterActive(t));
    CHECK(limiterMinSize(t) == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_MIN_SIZE);
        CHECK(limiterHoldsInsert(t, 1) == IR_LIMIT_NONE);
        add(t, 1);
    }
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_NONE);
    for (int i = 0; i < 20; i++) sample(t, 4); /* no ratio: samples never held */
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_NONE);
    CHECK(limiterHoldsInsert(t, 1) == IR_LIMIT_NONE);
    /* MIN_SIZE 0 with a ratio: the first item is still needed */
    t = mk(16, 0, 0, 0, (ir_limiter_opts){.samples_per_insert = 1, .error_buffer = 1});
    CHECK(limiterMinSize(t) == 1);
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_MIN_SIZE);
}

/* SampleToInsertRatio: error = samples - r (inserts - MIN_SIZE); a sample
 * runs while error <= e, an insert while size < MIN_SIZE or error >= -e;
 * checked before the call, which then counts whole. */
static void testRatio(void) {
    ir_table *t = mk(64, 0, 0, 0,
                     (ir_limiter_opts){.min_size = 2, .samples_per_insert = 2, .error_buffer = 3});
    add(t, 1);
    CHECK(limiterHoldsInsert(t, 1) == IR_LIMIT_NONE); /* below MIN_SIZE: never held */
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_MIN_SIZE);
    add(t, 1);                     /* inserts 2: error = 0 - 2 (2 - 2) = 0 */
    CHECK(limiterError(t) == 0.0); /* the first MIN_SIZE inserts license nothing */
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_NONE);
    sample(t, 3); /* error 3 = e: still allowed */
    CHECK(limiterError(t) == 3.0);
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_NONE);
    sample(t, 1); /* error 4 > e */
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_RATIO);
    CHECK(limiterHoldsInsert(t, 1) == IR_LIMIT_NONE);
    add(t, 1); /* error 4 - 2 = 2 */
    CHECK(limiterError(t) == 2.0);
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_NONE);
    /* inserts run ahead: error down to -e is allowed, below it is held */
    add(t, 2); /* error 2 - 4 = -2 */
    CHECK(limiterHoldsInsert(t, 1) == IR_LIMIT_NONE);
    add(t, 1); /* -4 < -3 */
    CHECK(limiterError(t) == -4.0);
    CHECK(limiterHoldsInsert(t, 1) == IR_LIMIT_RATIO);
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_NONE);
    /* one call overshoots by its own size: a sample of 50 checked at error
     * -4 runs whole and leaves the error far past e (no deadlock: inserts
     * now run) */
    sample(t, 50);
    CHECK(limiterError(t) == 46.0);
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_RATIO);
    CHECK(limiterHoldsInsert(t, 64) == IR_LIMIT_NONE);
    ir_limiter_state st;
    limiterState(t, &st);
    CHECK(st.inserts == 6 && st.samples == 54);
    limiterWaited(t, 1500);
    limiterWaited(t, 500);
    limiterState(t, &st);
    CHECK(st.waited_us == 2000);
}

/* Queue(n)/Stack(n): an insert of k waits while the table holds more than
 * n - k items, a sample of k while fewer than k draws are left; a batch
 * larger than n never fits. */
static void testQueue(int sel) {
    ir_table *t = mk(4, sel, sel, 1, (ir_limiter_opts){.queue = 4});
    CHECK(limiterActive(t));
    CHECK(limiterBatchTooLarge(t, 5) && !limiterBatchTooLarge(t, 4));
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_QUEUE);
    add(t, 3);
    CHECK(limiterHoldsInsert(t, 1) == IR_LIMIT_NONE);
    CHECK(limiterHoldsInsert(t, 2) == IR_LIMIT_QUEUE);
    CHECK(limiterHoldsSample(t, 3) == IR_LIMIT_NONE);
    CHECK(limiterHoldsSample(t, 4) == IR_LIMIT_QUEUE);
    sample(t, 2); /* MAX_TIMES_SAMPLED 1: the two drawn items are gone */
    CHECK(tableSize(t) == 1);
    CHECK(limiterHoldsInsert(t, 3) == IR_LIMIT_NONE);
    CHECK(limiterHoldsSample(t, 2) == IR_LIMIT_QUEUE);
    /* the queue's order: fifo drains the oldest, lifo the newest */
    add(t, 3);
    uint64_t first = t->next_id - 4, last = t->next_id - 1;
    sample(t, 1);
    CHECK(t->scratch_ids[0] == (sel == IR_SEL_FIFO ? first : last));
}

/* MAX_TIMES_SAMPLED k without a queue: a sample of n waits until the live
 * items allow n more draws (sum of k - times sampled). */
static void testDraws(void) {
    ir_table *t = mk(8, IR_SEL_UNIFORM, IR_SEL_FIFO, 2, (ir_limiter_opts){0});
    CHECK(limiterActive(t)); /* MAX_TIMES_SAMPLED alone makes the table limited */
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_MIN_SIZE);
    add(t, 2); /* 4 draws */
    CHECK(limiterHoldsSample(t, 4) == IR_LIMIT_NONE);
    CHECK(limiterHoldsSample(t, 5) == IR_LIMIT_DRAWS);
    sample(t, 3);
    CHECK(limiterHoldsSample(t, 1) == IR_LIMIT_NONE);
    CHECK(limiterHoldsSample(t, 2) == IR_LIMIT_DRAWS);
    CHECK(limiterHoldsInsert(t, 8) == IR_LIMIT_NONE); /* draws never hold inserts */
}

/* The options a limiter accepts, and Reverb's smallest error buffer. */
static void testOptions(void) {
    const char *err;
    CHECK(tableDefaultErrorBuffer(0.5) == 1 && tableDefaultErrorBuffer(4) == 4);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){0}, 10, &err) == 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.min_size = 11}, 10, &err) != 0);
    CHECK(strstr(err, "MIN_SIZE") != NULL);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.samples_per_insert = -1}, 10, &err) != 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.samples_per_insert = NAN}, 10, &err) != 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.error_buffer = 1}, 10, &err) != 0);
    CHECK(strstr(err, "needs SAMPLES_PER_INSERT") != NULL);
    /* the range [min·r − e, min·r + e] must be at least 2 max(1, r) wide */
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.samples_per_insert = 4, .error_buffer = 3.9}, 10,
                            &err) != 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.samples_per_insert = 4, .error_buffer = 4}, 10,
                            &err) == 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.samples_per_insert = 0.5, .error_buffer = 0.9}, 10,
                            &err) != 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.samples_per_insert = 1, .error_buffer = INFINITY},
                            10, &err) != 0);
    /* QUEUE/STACK: its own capacity, no other limit */
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.queue = 10}, 10, &err) == 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.queue = 9}, 10, &err) != 0);
    CHECK(tableLimiterCheck(&(ir_limiter_opts){.queue = 10, .min_size = 1}, 10, &err) != 0);
    /* a table refuses a bad limiter and keeps none */
    ir_table *t = mk(8, 0, 0, 0, (ir_limiter_opts){0});
    CHECK(tableLimiterSet(t, &(ir_limiter_opts){.min_size = 9}, &err) != 0);
    CHECK(!limiterActive(t) && limiterOpts(t)->min_size == 0);
}

int main(void) {
    ts = tablesNew();
    testNone();
    testMinSize();
    testRatio();
    testQueue(IR_SEL_FIFO);
    testQueue(IR_SEL_LIFO);
    testDraws();
    testOptions();
    tablesFree(ts);
    return checkSummary();
}
