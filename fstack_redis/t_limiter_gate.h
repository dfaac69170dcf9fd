/* t_limiter_gate.h - the rate limiter's gate shared by the REPLAY.* handlers
 * (t_limiter_gate.c). */
#ifndef IR_T_LIMITER_GATE_H
#define IR_T_LIMITER_GATE_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"
#include "replay_host.h"

/* The rate limiter's gate, shared by REPLAY.ADD, REPLAY.ITEM (sample 0) and
 * REPLAY.SAMPLE (sample 1), after the call's input is checked and before it
 * applies anything: 0 if its n items may run now; 1 if the client now waits
 * (TIMEOUT: argv index of its seconds, 0 for none; deadline from
 * getBlockingTimeoutFromArg) or got its -RATELIMITED error. */
int replayLimiterGate(client *c, ir_table *t, size_t n, int sample, int timeout_arg,
                      uint64_t deadline);
/* After such a call ran: count its n items and wake the other side's waiters. */
void replayLimiterRan(client *c, ir_table *t, size_t n, int sample);

#endif
