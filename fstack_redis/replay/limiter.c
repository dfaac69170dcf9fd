/* limiter.c - a table's rate limiter (limiter.h has the rules and why they
 * live in the engine). Every function is O(1) and reads only the table's
 * size, its draws left and the limiter's counters.
 */
#include <math.h>

#include "limiter.h"
#include "table.h"

int tableLimiterCheck(const ir_limiter_opts *o, uint64_t capacity, const char **err) {
    if (o->queue && (o->queue != capacity || o->min_size || o->samples_per_insert > 0)) {
        *err = "QUEUE/STACK take no MIN_SIZE or SAMPLES_PER_INSERT and set CAPACITY themselves";
        return -1;
    }
    if (o->min_size > capacity) {
        *err = "MIN_SIZE must be at most CAPACITY";
        return -1;
    }
    if (!(o->samples_per_insert >= 0 && isfinite(o->samples_per_insert))) {
        *err = "SAMPLES_PER_INSERT must be a finite number >= 0";
        return -1;
    }
    if (o->samples_per_insert == 0 && o->error_buffer != 0) {
        *err = "ERROR_BUFFER needs SAMPLES_PER_INSERT";
        return -1;
    }
    if (o->samples_per_insert > 0 &&
        !(o->error_buffer >= tableDefaultErrorBuffer(o->samples_per_insert) &&
          isfinite(o->error_buffer))) {
        *err = "ERROR_BUFFER must be finite and at least max(1, SAMPLES_PER_INSERT)";
        return -1;
    }
    return 0;
}

int tableLimiterSet(ir_table *t, const ir_limiter_opts *l, const char **err) {
    if (tableLimiterCheck(l, t->o.capacity, err) != 0) return -1;
    t->lim = *l;
    return 0;
}

const ir_limiter_opts *limiterOpts(const ir_table *t) { return &t->lim; }

int limiterActive(const ir_table *t) {
    return t->lim.min_size || t->lim.samples_per_insert > 0 || t->lim.queue ||
           t->o.max_times_sampled;
}

double limiterError(const ir_table *t) {
    if (!limiterActive(t)) return 0.0;
    return (double)t->limiter_samples -
           t->lim.samples_per_insert * ((double)t->limiter_inserts - (double)t->lim.min_size);
}

uint64_t limiterMinSize(const ir_table *t) { return t->lim.min_size ? t->lim.min_size : 1; }

int limiterHoldsSample(const ir_table *t, size_t n) {
    if (!limiterActive(t)) return IR_LIMIT_NONE;
    if (t->lim.queue && t->draws_left < n) return IR_LIMIT_QUEUE;
    if (tableLive(t) < limiterMinSize(t)) return IR_LIMIT_MIN_SIZE;
    if (t->lim.samples_per_insert > 0 && limiterError(t) > t->lim.error_buffer)
        return IR_LIMIT_RATIO;
    if (t->o.max_times_sampled && t->draws_left < n) return IR_LIMIT_DRAWS;
    return IR_LIMIT_NONE;
}

int limiterHoldsInsert(const ir_table *t, size_t n) {
    if (t->lim.queue) return tableLive(t) + n > t->lim.queue ? IR_LIMIT_QUEUE : IR_LIMIT_NONE;
    if (t->lim.samples_per_insert <= 0 || tableLive(t) < t->lim.min_size) return IR_LIMIT_NONE;
    return limiterError(t) < -t->lim.error_buffer ? IR_LIMIT_RATIO : IR_LIMIT_NONE;
}

int limiterBatchTooLarge(const ir_table *t, size_t n) { return t->lim.queue && n > t->lim.queue; }

void limiterRan(ir_table *t, size_t n, int sample) {
    if (!limiterActive(t)) return;
    if (sample) t->limiter_samples += n;
    else t->limiter_inserts += n;
}

uint64_t limiterDrawsLeft(const ir_table *t) { return t->draws_left; }

void limiterWaited(ir_table *t, uint64_t us) { t->waited_us += us; }

void limiterState(const ir_table *t, ir_limiter_state *st) {
    st->inserts = t->limiter_inserts;
    st->samples = t->limiter_samples;
    st->waited_us = t->waited_us;
}
