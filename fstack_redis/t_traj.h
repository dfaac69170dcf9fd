/* t_traj.h - trajectory commands (t_traj.c) and what t_replay.c calls of them. */
#ifndef IR_T_TRAJ_H
#define IR_T_TRAJ_H

#include <stddef.h>

#include "replay.h"
#include "chunks.h"
#include "replay_host.h"

/* Make t (just created) a TRAJECTORY table over the host's chunk store. 0,
 * or -1 (out of memory). */
int trajTableInit(ir_chunk_store *store, ir_table *t);
/* REPLAY.SAMPLE on a TRAJECTORY table, after the limiter let it run. */
void trajSample(client *c, ir_table *t, size_t n, double beta, int withstats, int withinfo);
/* REPLAY.INFO's 4 extra fields of a TRAJECTORY table (name/value pairs). */
void trajInfoFields(client *c, ir_table *t);
long trajInfoFieldCount(void); /* how many fields trajInfoFields adds */

void replayStreamCommand(client *c);
void replayAppendCommand(client *c);
void replayItemCommand(client *c);
void replayColumnsCommand(client *c);
void replayChunksCommand(client *c);

#endif
