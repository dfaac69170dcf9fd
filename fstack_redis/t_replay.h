/* t_replay.h - what the REPLAY.* commands (t_replay.c), the server's host over
 * the replay engine (replay/replay.h), give the run loop (dataplane/run.c). */
#ifndef IR_T_REPLAY_H
#define IR_T_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"
#include "server.h"

/* The options each new table of server s starts from: REPLAY.CREATE's and the
 * start-up table's; salt varies the clock seed when --seed is 0. */
ir_table_opts replayTableOpts(const ir_server *s, uint64_t salt);

/* The members of a shard_group string ("host:port,host:port,..."): stores up
 * to max (start, length) pairs and returns how many members there are, or -1
 * with *err (a static message) if a member is not host:port. */
int shardGroupMembers(const char *group, const char **start, size_t *len, int max,
                      const char **err);

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
