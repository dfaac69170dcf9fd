/* limiter.h - a table's rate limiter: Reverb's MinSize, SampleToInsertRatio,
 * Queue(n) and Stack(n) (reverb/cc/rate_limiter.cc), and the draws that
 * MAX_TIMES_SAMPLED allows.
 *
 * What: the decisions only. Before a call of n items the host asks
 * limiterHoldsSample / limiterHoldsInsert which limit, if any, holds it; a
 * call no limit holds runs, and the host then reports it with limiterRan.
 * A held call waits or fails: that is the host's (the native server's
 * blocked clients, Redis's on the module host), which parks the client and
 * asks again when limiterRan says the other side moved.
 *
 * Why in the engine: the rules are the table's semantics, the same on every
 * host, and here the engine's C tests reach every one of them
 * (tests/c/test_limiter.c); the hosts keep only the waiting.
 *
 * The rules (items counted, as Reverb counts each sampled or inserted item;
 * r = SAMPLES_PER_INSERT, e = ERROR_BUFFER):
 *     error = samples - r x (inserts - MIN_SIZE)
 * (Reverb's diff centred on r x MIN_SIZE, so the first MIN_SIZE inserts do
 * not license a burst of r x MIN_SIZE samples), counted from when the
 * limiter was set;
 *   a sample of n may run when the table holds at least MIN_SIZE items (and
 *     at least one) and, with r > 0, error <= e; under QUEUE/STACK n when at
 *     least n draws are left; under MAX_TIMES_SAMPLED when the live items
 *     allow n more draws;
 *   an insert of n may run while the table holds fewer than MIN_SIZE items,
 *     or when error >= -e (r > 0); MIN_SIZE alone never holds inserts;
 *     under QUEUE/STACK q while size + n <= q (a batch larger than q never
 *     fits: limiterBatchTooLarge).
 * Both are checked before the call and the call then counts whole, so one
 * call may overshoot the buffer by its own size but can never deadlock the
 * other side. ERROR_BUFFER must be at least max(1, r) (Reverb's range of
 * at least 2 max(1, r)); it defaults to that.
 */
#ifndef IR_LIMITER_H
#define IR_LIMITER_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

struct ir_table;

/* What holds a call (0: nothing; it may run). */
enum {
    IR_LIMIT_NONE = 0,
    IR_LIMIT_MIN_SIZE, /* fewer than MIN_SIZE (or no) items to sample */
    IR_LIMIT_RATIO,    /* SAMPLES_PER_INSERT: too far ahead (samples) or behind (inserts) */
    IR_LIMIT_QUEUE,    /* QUEUE/STACK: full (inserts) or too few draws (samples) */
    IR_LIMIT_DRAWS     /* MAX_TIMES_SAMPLED allows fewer draws than asked */
};

/* ERROR_BUFFER when none is given: the smallest Reverb accepts, max(1, rate). */
static inline double tableDefaultErrorBuffer(double samples_per_insert) {
    return samples_per_insert > 1 ? samples_per_insert : 1;
}
/* Check limiter options against a table's capacity: 0 or -1 with *err. */
int tableLimiterCheck(const ir_limiter_opts *l, uint64_t capacity, const char **err);
/* Check and set a table's limiter (after tableCreate, before any call):
 * 0, or -1 with *err and nothing set. */
int tableLimiterSet(struct ir_table *t, const ir_limiter_opts *l, const char **err);

/* The limiter's options (all 0: none). */
const ir_limiter_opts *limiterOpts(const struct ir_table *t);
/* 1 if any limit applies to the table (else every call runs and nothing is
 * counted). */
int limiterActive(const struct ir_table *t);
/* samples - r x (inserts - MIN_SIZE), as above (0 when no limit applies). */
double limiterError(const struct ir_table *t);
/* The size a sample needs: MIN_SIZE, at least 1. */
uint64_t limiterMinSize(const struct ir_table *t);
/* What holds a sample / an insert of n items now (IR_LIMIT_*). */
int limiterHoldsSample(const struct ir_table *t, size_t n);
int limiterHoldsInsert(const struct ir_table *t, size_t n);
/* 1 if an insert batch of n can never run (larger than QUEUE/STACK). */
int limiterBatchTooLarge(const struct ir_table *t, size_t n);
/* Draws the live items still allow under MAX_TIMES_SAMPLED (sum of
 * k - times sampled; 0 without it). */
uint64_t limiterDrawsLeft(const struct ir_table *t);
/* A call of n items ran: count them (sample 1: sampled, 0: inserted). */
void limiterRan(struct ir_table *t, size_t n, int sample);
/* A client the limiter held waited us microseconds (REPLAY.INFO's
 * waited_seconds). */
void limiterWaited(struct ir_table *t, uint64_t us);

/* The counters, for REPLAY.INFO and snapshots. */
typedef struct ir_limiter_state {
    uint64_t inserts, samples; /* items counted since the limiter was set */
    uint64_t waited_us;        /* time clients waited, in total */
} ir_limiter_state;
void limiterState(const struct ir_table *t, ir_limiter_state *st);

#endif
