/* t_traj.h - trajectory commands (t_traj.c) and what they share with t_replay.c. */
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
/* t_replay.c's sample trailers, shared with trajSample */
void addSampleStats(client *c, ir_table *t, size_t n);
void addSampleInfo(client *c, ir_table *t, size_t n);
/* Before a sample draws: 0 if a reply whose largest bulk string is `bulk`
 * bytes and whose copied bytes total `total` (UINT64_MAX: overflowed) fits
 * proto-max-bulk-len, the client-output-buffer-limit (when `exact`: total is
 * the reply's size, not a bound) and maxmemory's headroom; else -1 with a
 * one-line error replied (nothing was sampled). */
int sampleReplyFits(client *c, size_t n, uint64_t bulk, uint64_t total, int exact);
/* a * b, or UINT64_MAX when it overflows */
static inline uint64_t satMul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline uint64_t satAdd(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* REPLAY.INFO's 4 extra fields of a TRAJECTORY table (name/value pairs). */
void trajInfoFields(client *c, ir_table *t);
long trajInfoFieldCount(void); /* how many fields trajInfoFields adds */

void replayStreamCommand(client *c);
void replayAppendCommand(client *c);
void replayItemCommand(client *c);
void replayColumnsCommand(client *c);
void replayChunksCommand(client *c);

#endif
