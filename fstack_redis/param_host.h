/* param_host.h - what the PARAM.* handlers (t_param.c) need from their host
 * beyond replay_host.h: the host's parameter tables, its pub/sub, a null
 * reply, and SYNC rounds' waiting pushers. t_param.c is the one
 * implementation of PARAM.* (parsing, checks, replies) for both hosts: the
 * native server (param_native.c, over blocked.c) and the Redis module
 * (module/host_param.c, over RedisModule_BlockClient).
 *
 * A SYNC round: the first k - 1 pushes of a round wait (hostParamWait) with
 * their request kept, which holds their gradient; the k-th push reads the
 * waiters' requests in arrival order (hostParamEachWaiter), steps, and hands
 * the round's result to every waiter (hostParamRoundDone). A waiter that
 * leaves first (its deadline, a disconnect) leaves the round: the host takes
 * it out of the waiters, and its deadline's reply is paramSyncTimeoutText's.
 */
#ifndef IR_PARAM_HOST_H
#define IR_PARAM_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "param.h"
#include "replay_host.h"

/* The result of a SYNC round, given to each of its pushers. */
typedef struct ir_param_round {
    int ok;           /* it stepped; else its mean was not finite and nothing applied */
    uint64_t version; /* the table's version after the step */
    uint64_t bad;     /* !ok: the first element of the mean that is not finite */
} ir_param_round;

ir_params *hostParams(client *c);
void hostParamPublish(client *c, const char *ch, size_t chlen, const char *msg, size_t mlen);
void hostReplyNull(client *c);

/* SYNC rounds: how many pushes of p's current round wait; make c wait for
 * the round (until deadline, ms, 0 = forever; -1: out of memory, replied);
 * call fn with each waiting push's arguments, in arrival order; the round
 * completed: every waiter gets r (as paramReplyRound would answer it). A
 * waiter re-run by the host (the native server re-runs its command) is
 * answered by hostParamRerun, which returns 1; 0 for a call that is no
 * re-run. */
uint32_t hostParamPending(const ir_param *p);
int hostParamWait(client *c, ir_param *p, uint64_t deadline);
typedef void (*ir_param_waiter_fn)(void *ctx, int argc, const ir_arg *argv);
void hostParamEachWaiter(ir_param *p, ir_param_waiter_fn fn, void *ctx);
void hostParamRoundDone(client *c, ir_param *p, const ir_param_round *r);
int hostParamRerun(client *c, ir_param *p);

/* t_param.c, for the hosts: answer a pusher of a completed round; the text
 * (after its code, SYNCTIMEOUT) of a waiter whose deadline came with pending
 * pushes in its round, and of a round whose mean was not finite. */
void paramReplyRound(client *c, const ir_param *p, const ir_param_round *r);
void paramSyncTimeoutText(char *buf, size_t cap, const ir_param *p, uint32_t pending);
void paramRoundErrorText(char *buf, size_t cap, const ir_param *p, uint64_t bad);

#endif
