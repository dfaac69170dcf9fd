/* replay_host_native.h - the native server as the REPLAY.* handlers' host
 * (replay_host.h says what each call means): static inline wrappers over
 * the server's own functions, so t_replay.c and t_traj.c compile to what
 * they were before the interface. Included through replay_host.h only. */
#ifndef IR_REPLAY_HOST_NATIVE_H
#define IR_REPLAY_HOST_NATIVE_H

#include <stdarg.h>
#include <stdio.h>

#include "blocked.h"
#include "server.h"

/* the server writes raw protocol: small sampled items go in one reservation */
#define IR_HOST_RAW_REPLIES 1

static inline int hostArgc(const client *c) { return c->argc; }
static inline const ir_arg *hostArg(const client *c, int i) { return &c->argv[i]; }
static inline int hostArgEq(const client *c, int i, const char *lit) { return argEq(c, i, lit); }
static inline uint64_t hostClientId(const client *c) { return c->id; }

/* The options every table of server s starts from (REPLAY.CREATE and the
 * start-up table): the engine's defaults, then the server's MAXBYTES, fanout,
 * seed (--seed plus the number of tables, so each table draws its own stream;
 * the clock mixed with `salt` without --seed) and this shard's id range. */
static inline ir_table_opts replayTableOpts(const ir_server *s, uint64_t salt) {
    const ir_config *cfg = &s->cfg;
    ir_table_opts o = tableOptsDefault();
    o.maxbytes = cfg->default_maxbytes;
    o.fanout = cfg->fanout;
    o.seed = cfg->seed ? cfg->seed + tablesCount(s->tables) : ir_mstime() ^ salt;
    o.id_base = (uint64_t)cfg->shard_index << IR_SHARD_ID_BITS;
    return o;
}

static inline ir_tables *hostTables(client *c) { return c->srv->tables; }
static inline ir_chunk_store *hostChunks(client *c) { return c->srv->chunks; }
static inline ir_table_opts hostTableOpts(client *c) { return replayTableOpts(c->srv, c->id); }
static inline const char *hostShardGroup(const client *c) { return c->srv->cfg.shard_group; }
static inline int hostShardIndex(const client *c) { return c->srv->cfg.shard_index; }

static inline uint64_t hostProtoMaxBulkLen(const client *c) {
    return c->srv->cfg.proto_max_bulk_len;
}
static inline uint64_t hostOutputBufferLimit(const client *c) {
    return c->srv->cfg.client_output_buffer_limit;
}
static inline uint64_t hostMaxmemory(const client *c) { return c->srv->cfg.maxmemory; }
static inline uint64_t hostUsedMemory(const client *c) { return serverUsedMemory(c->srv); }
static inline void hostOomRejected(client *c) { c->srv->oom_rejections++; }
#define hostLog serverLog

static inline void hostReplyOk(client *c) { addReplyStr(c, shared.ok); }
static inline void hostReplySyntaxError(client *c) { addReplyStr(c, shared.syntaxerr); }
static inline void hostReplyArityError(client *c) { addReplyErrorArity(c); }
static inline void hostReplyError(client *c, const char *msg) { addReplyError(c, msg); }
#define hostReplyErrorFormat addReplyErrorFormat
static inline void hostReplyLongLong(client *c, long long v) { addReplyLongLong(c, v); }
static inline void hostReplyDouble(client *c, double d) { addReplyDouble(c, d); }
static inline void hostReplyCString(client *c, const char *s) { addReplyBulkCString(c, s); }
static inline void hostReplyBulk(client *c, const void *p, size_t len) { addReplyBulk(c, p, len); }
static inline void hostReplyArrayLen(client *c, long n) { addReplyArrayLen(c, n); }
static inline void hostReplyMapLen(client *c, long pairs) { addReplyMapLen(c, pairs); }
static inline char *hostReplyBulkReserve(client *c, size_t len) {
    return addReplyBulkReserve(c, len);
}
static inline char *hostReplyBulkBegin(client *c, size_t total, size_t head) {
    return addReplyBulkBegin(c, total, head);
}
static inline void hostReplyBulkPart(client *c, const void *p, size_t len) {
    addReplyProto(c, (const char *)p, len);
}
static inline void hostReplyBulkPartPinned(client *c, const void *p, size_t len, ir_pin **holder) {
    addReplyRefPinned(c, p, len, holder);
}
static inline void hostReplyBulkEnd(client *c) { addReplyProto(c, "\r\n", 2); }
static inline void hostReplyBulkPinned(client *c, const void *p, size_t len, ir_pin **holder) {
    addReplyBulkPinned(c, p, len, holder);
}
static inline char *hostReplyRawReserve(client *c, size_t len) { return addReplyReserve(c, len); }

static inline int hostBlockingTimeout(client *c, int i, uint64_t *deadline) {
    return getBlockingTimeoutFromArg(c, i, deadline);
}
static inline int hostBlockingAllowed(const client *c) { return blockingAllowed(c); }
static inline int hostClientBlocked(const client *c) { return (c->flags & CLIENT_BLOCKED) != 0; }
static inline size_t hostTableAhead(const client *c, const ir_table *t, int which) {
    return blockedTableAhead(c, t, which);
}
static inline size_t hostTableWaiting(const ir_table *t, int which) {
    return blockedTableWaiting(t, which);
}
static inline void hostBlockForTable(client *c, ir_table *t, int which, uint64_t deadline) {
    blockForTable(c, t, which, deadline);
}
static inline void hostTableReady(client *c, ir_table *t, int which) {
    blockedTableReady(c->srv, t, which);
}

#endif
