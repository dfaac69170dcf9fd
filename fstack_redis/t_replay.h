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
#include "t_shard_group.h" /* shardGroupMembers, for the daemon's start-up checks */

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
