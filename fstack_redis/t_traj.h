/* t_traj.h - trajectory commands (t_traj.c) and what they share with t_replay.c. */
#ifndef IR_T_TRAJ_H
#define IR_T_TRAJ_H

#include <stddef.h>

#include "replay.h"
#include "server.h"

/* Make t (just created) a TRAJECTORY table. 0, or -1 (out of memory). */
int trajTableInit(ir_server *s, ir_table *t);
/* REPLAY.SAMPLE on a TRAJECTORY table, after the limiter let it run. */
void trajSample(client *c, ir_table *t, size_t n, double beta, int withstats, int withinfo,
                int limited);
/* t_replay.c's sample trailers, shared with trajSample */
void addSampleStats(client *c, ir_table *t, size_t n);
void addSampleInfo(client *c, ir_table *t, size_t n);

/* REPLAY.INFO's 4 extra fields of a TRAJECTORY table (name/value pairs). */
void trajInfoFields(client *c, ir_table *t);

void replayStreamCommand(client *c);
void replayAppendCommand(client *c);
void replayItemCommand(client *c);
void replayColumnsCommand(client *c);
void replayChunksCommand(client *c);

#endif
