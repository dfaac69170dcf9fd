/* t_limiter_gate.c - the rate limiter's gate for the REPLAY.* handlers:
 * REPLAY.ADD and REPLAY.SAMPLE (t_replay.c) and REPLAY.ITEM (t_traj.c).
 *
 * What: before a call runs, ask the engine's limiter (replay/limiter.h)
 * whether it may; if not, park the client on the host (a blocked client,
 * natively or in Redis) or word the one-line -RATELIMITED error; after it
 * ran, count it and wake the other side. Why a file of its own: both
 * handler files use it, and neither calls the other for it (no cycle).
 */
#include <math.h>
#include <stdio.h>

#include "replay.h"
#include "replay_err.h"
#include "replay_host.h"
#include "t_limiter_gate.h"

/* The rules are the engine's (replay/limiter.h); this host keeps the waiting. */

/* The one-line -RATELIMITED error: which limit held the call (why), and how it ended. */
static void replyRateLimited(client *c, const ir_table *t, int why, int sample, int timeout_arg) {
    const char *what = sample ? "sample" : "insert";
    const ir_limiter_opts *lim = limiterOpts(t);
    char tail[96], reason[256];
    if (timeout_arg)
        snprintf(tail, sizeof(tail), "%s timed out after TIMEOUT %.32s", what,
                 hostArg(c, timeout_arg)->ptr);
    else snprintf(tail, sizeof(tail), "%s waits (use TIMEOUT to wait)", what);
    if (why == IR_LIMIT_QUEUE)
        snprintf(reason, sizeof(reason), "%s %llu %s (%llu items)",
                 tableSampler(t) == IR_SEL_LIFO ? "STACK" : "QUEUE", (unsigned long long)lim->queue,
                 sample ? "has too few items" : "is full", (unsigned long long)tableSize(t));
    else if (why == IR_LIMIT_DRAWS)
        snprintf(reason, sizeof(reason), "allows %llu more draws under MAX_TIMES_SAMPLED %u",
                 (unsigned long long)limiterDrawsLeft(t), tableOpts(t)->max_times_sampled);
    else if (why == IR_LIMIT_MIN_SIZE)
        snprintf(reason, sizeof(reason), "has %llu items, MIN_SIZE is %llu",
                 (unsigned long long)tableSize(t), (unsigned long long)limiterMinSize(t));
    else
        snprintf(reason, sizeof(reason),
                 "is %.1f samples %s SAMPLES_PER_INSERT %g x inserts, ERROR_BUFFER is %g",
                 fabs(limiterError(t)), sample ? "ahead of" : "behind", lim->samples_per_insert,
                 lim->error_buffer);
    replyReplayError(c, IR_ERR_RATELIMITED, "table '%.128s' %s: %s", tableName(t), reason, tail);
}

/* The limiter's gate before a call of n items runs: an insert (sample = 0:
 * REPLAY.ADD, REPLAY.ITEM) or a SAMPLE (sample = 1), with its TIMEOUT argument
 * (0: none) and deadline. 0: it may run now. 1: the client waits (a blocked
 * client in the queue of its kind, re-run as soon as it may) or has its
 * -RATELIMITED error (no TIMEOUT, blocking denied, or its deadline came). An
 * insert batch larger than a QUEUE/STACK is refused here too (it never fits). */
int replayLimiterGate(client *c, ir_table *t, size_t n, int sample, int timeout_arg,
                      uint64_t deadline) {
    if (!sample && limiterBatchTooLarge(t, n)) {
        hostReplyErrorFormat(c,
                             "a batch of %zu items is larger than table '%.128s' (%s %llu): "
                             "add fewer at a time",
                             n, tableName(t), tableSampler(t) == IR_SEL_LIFO ? "STACK" : "QUEUE",
                             (unsigned long long)limiterOpts(t)->queue);
        return 1;
    }
    if (!limiterActive(t)) return 0;
    int why = sample ? limiterHoldsSample(t, n) : limiterHoldsInsert(t, n);
    if (why || (timeout_arg && hostTableAhead(c, t, !sample))) {
        if (timeout_arg && hostBlockingAllowed(c)) {
            hostBlockForTable(c, t, !sample, deadline);
            return 1;
        }
        if (why) {
            /* a waiter re-run at its deadline says how long it waited */
            int waited = hostClientBlocked(c) ? timeout_arg : 0;
            replyRateLimited(c, t, why, sample, waited);
            return 1;
        }
    }
    return 0;
}

/* After a call the gate let run: count its n items and wake the other side. */
void replayLimiterRan(client *c, ir_table *t, size_t n, int sample) {
    if (!limiterActive(t)) return;
    limiterRan(t, n, sample);
    hostTableReady(c, t, sample); /* inserters (1) or samplers (0) may run now */
}
