/* t_replay.h - what the REPLAY.* commands (t_replay.c), the handlers over the
 * replay engine (replay/replay.h) on either host (replay_host.h), give the run
 * loop (daemon/daemon.c) and the module host. The native server's table
 * options (replayTableOpts) are replay_host_native.h's. */
#ifndef IR_T_REPLAY_H
#define IR_T_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"
#include "replay_host.h"

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

/* the handlers (commands.json names them; each host's table calls them) */
void replayCreateCommand(client *c);
void replayAddCommand(client *c);
void replaySampleCommand(client *c);
void replayUpdateCommand(client *c);
void replayInfoCommand(client *c);
void replayDropCommand(client *c);
void replayListCommand(client *c);
void replayShardsCommand(client *c);

#endif
