/* t_sample_reply.h - the shared parts of a REPLAY.SAMPLE reply
 * (t_sample_reply.c). */
#ifndef IR_T_SAMPLE_REPLY_H
#define IR_T_SAMPLE_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"
#include "replay_host.h"

/* WITHSTATS (24 + 8n bytes) and WITHINFO (8 + 20n bytes) of the last sample
 * of n, as parts of the bulk string the caller began. */
void addSampleStats(client *c, ir_table *t, size_t n);
void addSampleInfo(client *c, ir_table *t, size_t n);
/* 0 if a sample of n items whose largest reply string is `bulk` bytes and
 * whose copied bytes total `total` (UINT64_MAX: overflowed) fits
 * proto-max-bulk-len, the client-output-buffer-limit (when `exact`: total is
 * the whole reply) and maxmemory's headroom; else -1 with the call's
 * one-line error replied (nothing was sampled). */
int sampleReplyFits(client *c, size_t n, uint64_t bulk, uint64_t total, int exact);
/* saturating arithmetic for reply sizes */
static inline uint64_t satMul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline uint64_t satAdd(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

#endif
