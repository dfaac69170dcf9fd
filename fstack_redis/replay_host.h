/* replay_host.h - everything the REPLAY.* handlers (t_replay.c, t_traj.c)
 * need from the host they run in, and nothing more. Those two files are the
 * one implementation of REPLAY.* (argument parsing, checks, replies); they
 * include this header and the engine's (replay/), never the server's.
 *
 * Two hosts implement it:
 *   the native server (replay_host_native.h): static inline wrappers over its
 *     reply layer, client, config and blocked clients, so the hot path costs
 *     what it cost before the interface;
 *   a Redis module for stock redis-server (module/host_module.c, built with
 *     -DIR_HOST_MODULE): the same calls over the RedisModule API.
 *
 * Replies are written in call order. A call that returns a buffer (a reserved
 * bulk, a bulk begun in parts, raw protocol) hands out bytes the caller must
 * fill before its next reply call. Pinned bytes (an item in a table's arena,
 * whose owner holds a pin: pin.h) may be sent by reference by a host with
 * zero-copy replies; another host copies them at once.
 */
#ifndef IR_REPLAY_HOST_H
#define IR_REPLAY_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "chunks.h"
#include "pin.h"
#include "replay.h"
#include "replay_err.h"
#include "strconv.h"

#ifndef IR_HOST_MODULE
#include "replay_host_native.h"
#else

/* ---- the module host (module/host_module.c) ------------------------------ */

/* The host writes no raw protocol: addSampledSmallItems's one reservation
 * for many small items (native) becomes a bulk per item. */
#define IR_HOST_RAW_REPLIES 0

/* arguments: argv[0] is the command's name; hostArgEq is case-insensitive */
int hostArgc(const client *c);
const ir_arg *hostArg(const client *c, int i);
int hostArgEq(const client *c, int i, const char *lit);
uint64_t hostClientId(const client *c);

/* the host's tables and chunk store, and the options a new table starts from
 * (the host's MAXBYTES, fanout, seed) */
ir_tables *hostTables(client *c);
ir_chunk_store *hostChunks(client *c);
ir_table_opts hostTableOpts(client *c);
/* REPLAY.SHARDS: the replay group ("host:port,..." or NULL) and this shard's place */
const char *hostShardGroup(const client *c);
int hostShardIndex(const client *c);

/* limits: proto-max-bulk-len, the client output buffer limit (0: none),
 * maxmemory (0: none) and the memory used; a write refused under maxmemory */
uint64_t hostProtoMaxBulkLen(const client *c);
uint64_t hostOutputBufferLimit(const client *c);
uint64_t hostMaxmemory(const client *c);
uint64_t hostUsedMemory(const client *c);
void hostOomRejected(client *c);
void hostLog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* replies: errors are one line; hostReplyError's text gets "ERR " unless it
 * starts with '-' (its own code); replyReplayError (replay_err.h) writes a
 * REPLAY error code */
void hostReplyOk(client *c);
void hostReplySyntaxError(client *c);
void hostReplyArityError(client *c);
void hostReplyError(client *c, const char *msg);
void hostReplyErrorFormat(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hostReplyLongLong(client *c, long long v);
void hostReplyDouble(client *c, double d); /* RESP2: a bulk (double2text); RESP3: a double */
void hostReplyCString(client *c, const char *s);
void hostReplyBulk(client *c, const void *p, size_t len); /* copied */
void hostReplyArrayLen(client *c, long n);
void hostReplyMapLen(client *c, long pairs); /* RESP2: an array of 2 x pairs */
/* A bulk of len bytes the caller fills (all of them) before its next reply call. */
char *hostReplyBulkReserve(client *c, size_t len);
/* A bulk of total bytes written in parts: head bytes to fill now, then parts
 * (copied, or pinned: sent by reference or copied), then hostReplyBulkEnd
 * once the parts add up to total. */
char *hostReplyBulkBegin(client *c, size_t total, size_t head);
void hostReplyBulkPart(client *c, const void *p, size_t len);
void hostReplyBulkPartPinned(client *c, const void *p, size_t len, struct ir_pin **holder);
void hostReplyBulkEnd(client *c);
/* One bulk of pinned bytes (by reference or copied). */
void hostReplyBulkPinned(client *c, const void *p, size_t len, struct ir_pin **holder);
/* len bytes of raw protocol to fill; only where IR_HOST_RAW_REPLIES (else NULL). */
char *hostReplyRawReserve(client *c, size_t len);

/* blocking (REPLAY.* TIMEOUT, the rate limiter's waiters): parse a TIMEOUT
 * in seconds at argv[i] into a deadline (ms, 0 = forever), or reply an error
 * and return -1; may the call wait; is it a waiter re-run (at its turn or
 * its deadline); the waiters on a table's queue (0: samplers, 1: inserters)
 * ahead of c, and in all; wait there; the queue may now serve its head. */
int hostBlockingTimeout(client *c, int i, uint64_t *deadline);
int hostBlockingAllowed(const client *c);
int hostClientBlocked(const client *c);
size_t hostTableAhead(const client *c, const ir_table *t, int which);
size_t hostTableWaiting(const ir_table *t, int which);
void hostBlockForTable(client *c, ir_table *t, int which, uint64_t deadline);
void hostTableReady(client *c, ir_table *t, int which);

#endif /* IR_HOST_MODULE */
#endif
