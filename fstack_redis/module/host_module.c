/* host_module.c - REPLAY.* as a module for stock redis-server: the module
 * host of replay_host.h over the RedisModule API. The commands themselves are
 * t_replay.c and t_traj.c, compiled a second time for this host
 * (-DIR_HOST_MODULE); this file only answers what they ask of a host.
 *
 *   redis-server --loadmodule inreplay_module.so [SEED <n>] [FANOUT <k>] [MAXBYTES <bytes>]
 *                [SHARD_GROUP <host:port,...> SHARD_INDEX <k>]
 *
 * These are the native server's --seed, --fanout, --maxbytes, --shard-group
 * and --shard-index: the same seed gives both hosts the same draws; a replay
 * group's member k issues ids from k << 48, and must be on Redis's port.
 *
 * Redis replies are whole values, so the bulks the handlers build in place
 * or in parts (reserved, begun, pinned) are gathered in one buffer kept
 * across commands and replied when complete; pinned memory is copied (this
 * host never pins). Tables live in one registry per server, as the native
 * server's; FLUSHALL drops them. A call the rate limiter holds with TIMEOUT
 * waits as a Redis blocked client (below). maxmemory, proto-max-bulk-len and
 * the client output buffer limit are Redis's, read at load and on CONFIG SET;
 * the tables live outside Redis's allocator, so this host adds them to
 * Redis's used memory itself (deny-oom, a new table's slots, a sample's
 * reply; INFO inreplay_memory). The tables persist in the RDB as the aux
 * data of a module data type (SAVE, BGSAVE, DEBUG RELOAD, a restart: below;
 * Redis empties its data, FLUSHALL's event, before it loads them). Not here
 * yet: zero-copy replies.
 *
 * PARAM.* (t_param.c, the parameter tables) run here too; their own host part
 * is host_param.c (tables, version messages, SYNC waiters), which this file
 * only keeps: at load, FLUSHALL, in the RDB and in used memory.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

#include "redismodule.h"

#include "chunks.h"
#include "host_param.h"
#include "persist.h"
#include "replay.h"
#include "replay_err.h"
#include "replay_host.h"
#include "t_param.h"
#include "t_replay.h"
#include "t_shard_group.h"
#include "t_traj.h"

struct waiter;

struct client {
    RedisModuleCtx *ctx;
    int argc;
    ir_arg *argv;
    RedisModuleString **rargv; /* Redis's own argv, kept by a client that waits */
    const struct module_command *cmd;
    uint64_t id;
    struct waiter *waiter; /* a waiter re-run (at its turn, or at its deadline) */
    int deny_block;        /* re-run at its deadline: answer, do not wait again */
    int reblocked;         /* the re-run waits on: it keeps its place */
    /* the bulk being gathered (module.buf): reserved (replied at the next
     * reply call) or in parts (replied at hostReplyBulkEnd) */
    int bulk_open, bulk_parts;
    size_t bulk_len, bulk_fill;
};

static struct {
    ir_tables *tables;
    ir_chunk_store *chunks;
    uint64_t seed, maxbytes;
    unsigned fanout;
    char *shard_group; /* SHARD_GROUP "host:port,...": NULL for a standalone server */
    int shard_index;
    ir_arg *argv; /* the current command's arguments, grown on demand */
    int argv_cap;
    char *buf; /* the bulk being gathered, grown on demand and kept */
    size_t buf_cap;
    /* redis-server's limits, read at load and again after every CONFIG SET */
    uint64_t maxmemory, proto_max_bulk, obl;
} module;

typedef void (*module_handler)(client *c);
typedef struct module_command {
    const char *name;
    module_handler handler;
    const char *flags;
    int arity, first, last, step;
    const char *summary, *since, *complexity;
    int nspecs;
    uint64_t spec_flags;
    int spec_begin, spec_lastkey, spec_step, spec_limit;
} module_command;

#include "module_commands.inc"

#define NCOMMANDS (sizeof(module_commands) / sizeof(module_commands[0]))

static unsigned char deny_oom[NCOMMANDS]; /* the command's flags say deny-oom */

static uint64_t mstime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the bulk being gathered ---------------------------------------------- */

static char *bulkBuffer(size_t len) {
    if (len > module.buf_cap) {
        size_t cap = module.buf_cap ? module.buf_cap : 4096;
        while (cap < len) cap *= 2;
        char *p = realloc(module.buf, cap);
        if (!p) return NULL;
        module.buf = p;
        module.buf_cap = cap;
    }
    return module.buf;
}

/* A reserved bulk is complete once the next reply call comes. */
static void flushBulk(client *c) {
    if (!c->bulk_open) return;
    RedisModule_ReplyWithStringBuffer(c->ctx, module.buf, c->bulk_len);
    c->bulk_open = c->bulk_parts = 0;
}

/* Out of memory for a bulk: the caller still fills len bytes somewhere. */
static char *bulkOrScratch(client *c, size_t len) {
    char *p = bulkBuffer(len ? len : 1);
    if (p) return p;
    RedisModule_Log(c->ctx, "warning", "inreplay: out of memory for a reply of %zu bytes", len);
    abort();
}

/* ---- replay_host.h -------------------------------------------------------- */

RedisModuleCtx *moduleClientCtx(client *c) { return c->ctx; }
RedisModuleString *moduleClientArg(client *c, int i) { return c->rargv[i]; }

int hostArgc(const client *c) { return c->argc; }
const ir_arg *hostArg(const client *c, int i) { return &c->argv[i]; }
int hostArgEq(const client *c, int i, const char *lit) {
    return strlen(lit) == c->argv[i].len && strcasecmp(c->argv[i].ptr, lit) == 0;
}
uint64_t hostClientId(const client *c) { return c->id; }

ir_tables *hostTables(client *c) { return module.tables; }
ir_chunk_store *hostChunks(client *c) { return module.chunks; }

ir_table_opts hostTableOpts(client *c) {
    ir_table_opts o = tableOptsDefault();
    o.maxbytes = module.maxbytes;
    o.fanout = module.fanout;
    o.seed = module.seed ? module.seed + tablesCount(module.tables) : mstime() ^ c->id;
    o.id_base = (uint64_t)module.shard_index << IR_SHARD_ID_BITS;
    return o;
}
const char *hostShardGroup(const client *c) { return module.shard_group; }
int hostShardIndex(const client *c) { return module.shard_index; }

uint64_t hostProtoMaxBulkLen(const client *c) { return module.proto_max_bulk; }
uint64_t hostOutputBufferLimit(const client *c) { return module.obl; }
uint64_t hostMaxmemory(const client *c) { return module.maxmemory; }

/* What Redis counts against maxmemory (its allocator's bytes, as a ratio of
 * maxmemory) plus the module's tables and chunk store, which live outside
 * Redis's allocator: what the native server counts. Only asked with a
 * maxmemory set. */
static uint64_t usedMemory(void) {
    uint64_t b =
        tablesMemory(module.tables) + chunkStoreMemory(module.chunks) + moduleParamsMemory();
    if (module.maxmemory) b += (uint64_t)(RedisModule_GetUsedMemoryRatio() * module.maxmemory);
    return b;
}
uint64_t hostUsedMemory(const client *c) { return usedMemory(); }
void hostOomRejected(client *c) {} /* Redis's rejected_calls counts the error reply */

void hostLog(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    RedisModule_Log(NULL, "notice", "inreplay: %s", buf);
}

void hostReplyOk(client *c) {
    flushBulk(c);
    RedisModule_ReplyWithSimpleString(c->ctx, "OK");
}
void hostReplySyntaxError(client *c) {
    flushBulk(c);
    RedisModule_ReplyWithError(c->ctx, "ERR syntax error");
}
void hostReplyArityError(client *c) {
    flushBulk(c);
    RedisModule_WrongArity(c->ctx);
}
void hostReplyError(client *c, const char *msg) {
    char buf[1100];
    flushBulk(c);
    if (msg[0] == '-') snprintf(buf, sizeof(buf), "%s", msg + 1);
    else snprintf(buf, sizeof(buf), "ERR %s", msg);
    RedisModule_ReplyWithError(c->ctx, buf);
}
void hostReplyErrorFormat(client *c, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    hostReplyError(c, buf);
}

void replyReplayError(client *c, ir_errcode code, const char *fmt, ...) {
    char buf[1024];
    int h = snprintf(buf, sizeof(buf), "%s ", replayErrorName(code));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + h, sizeof(buf) - (size_t)h, fmt, ap);
    va_end(ap);
    flushBulk(c);
    RedisModule_ReplyWithError(c->ctx, buf);
}

void hostReplyLongLong(client *c, long long v) {
    flushBulk(c);
    RedisModule_ReplyWithLongLong(c->ctx, v);
}
void hostReplyDouble(client *c, double d) {
    flushBulk(c);
    if (RedisModule_GetContextFlags(c->ctx) & REDISMODULE_CTX_FLAGS_RESP3) {
        RedisModule_ReplyWithDouble(c->ctx, d);
        return;
    }
    char buf[64];
    int n = double2text(buf, sizeof(buf), d);
    RedisModule_ReplyWithStringBuffer(c->ctx, buf, (size_t)n);
}
void hostReplyCString(client *c, const char *s) {
    flushBulk(c);
    RedisModule_ReplyWithStringBuffer(c->ctx, s, strlen(s));
}
void hostReplyBulk(client *c, const void *p, size_t len) {
    flushBulk(c);
    RedisModule_ReplyWithStringBuffer(c->ctx, p, len);
}
void hostReplyArrayLen(client *c, long n) {
    flushBulk(c);
    RedisModule_ReplyWithArray(c->ctx, n);
}
void hostReplyMapLen(client *c, long pairs) {
    flushBulk(c);
    RedisModule_ReplyWithMap(c->ctx, pairs);
}

char *hostReplyBulkReserve(client *c, size_t len) {
    flushBulk(c);
    char *p = bulkOrScratch(c, len);
    c->bulk_open = 1;
    c->bulk_parts = 0;
    c->bulk_len = c->bulk_fill = len;
    return p;
}
char *hostReplyBulkBegin(client *c, size_t total, size_t head) {
    flushBulk(c);
    char *p = bulkOrScratch(c, total);
    c->bulk_open = 1;
    c->bulk_parts = 1;
    c->bulk_len = total;
    c->bulk_fill = head;
    return p;
}
void hostReplyBulkPart(client *c, const void *p, size_t len) {
    if (!c->bulk_open || !c->bulk_parts || len > c->bulk_len - c->bulk_fill) {
        RedisModule_Log(c->ctx, "warning", "inreplay: a bulk part past the bulk's length");
        abort(); /* a handler's bug: never reply a torn bulk */
    }
    memcpy(module.buf + c->bulk_fill, p, len);
    c->bulk_fill += len;
}
void hostReplyBulkPartPinned(client *c, const void *p, size_t len, struct ir_pin **holder) {
    hostReplyBulkPart(c, p, len);
}
void hostReplyBulkEnd(client *c) {
    if (c->bulk_fill != c->bulk_len) {
        RedisModule_Log(c->ctx, "warning", "inreplay: a bulk ended short of its length");
        abort();
    }
    flushBulk(c);
}
void hostReplyBulkPinned(client *c, const void *p, size_t len, struct ir_pin **holder) {
    hostReplyBulk(c, p, len);
}
char *hostReplyRawReserve(client *c, size_t len) { return NULL; }

/* ---- waiting: the rate limiter's blocked clients ---------------------------
 *
 * A call the limiter holds with TIMEOUT waits as a Redis blocked client
 * (RedisModule_BlockClient) in one FIFO of every waiter; a table's queue (0:
 * samplers, 1: inserters) is its waiters in that order. When a call ran,
 * the other side's queue is marked ready (hostTableReady) and served after
 * the command: its head re-runs with a thread-safe context of its blocked
 * client (the replies go to it), and either answers (it is unblocked, the
 * next may run) or waits on in its place. At its deadline (a module timer:
 * Redis's own blocked-client timeouts wait for its hz tick, up to 100 ms
 * late) a waiter re-runs with waiting denied (its -RATELIMITED says how long
 * it waited); a dropped table answers its waiters -NOTABLE (the engine's
 * table_gone hook). */

typedef struct waiter {
    RedisModuleBlockedClient *bc;
    const module_command *cmd;
    ir_table *t;
    int which;
    RedisModuleString **argv; /* held (RedisModule_HoldString) */
    int argc;
    uint64_t id, since_ms;
    RedisModuleTimerID timer; /* its deadline, if it has one */
    int has_timer;
    struct waiter *prev, *next;
} waiter;

typedef struct table_waits {
    int ready[2];
} table_waits;

static waiter *w_head, *w_tail;
static int ready_any, marked_any;
/* how waits ended (INFO inreplay: the native server's INFO stats fields) */
static uint64_t total_blocked, blocked_timeouts, blocked_disconnects, blocked_dropped;
static RedisModuleCtx *timer_ctx; /* a detached context: the module's timers */

static void runCommand(client *c);

static void waiterUnlink(waiter *w) {
    if (w->prev) w->prev->next = w->next;
    else w_head = w->next;
    if (w->next) w->next->prev = w->prev;
    else w_tail = w->prev;
    w->prev = w->next = NULL;
}

static void waiterFree(waiter *w) {
    if (w->has_timer) RedisModule_StopTimer(timer_ctx, w->timer, NULL);
    for (int i = 0; i < w->argc; i++) RedisModule_FreeString(NULL, w->argv[i]);
    free(w->argv);
    free(w);
}

static waiter *waiterOf(RedisModuleBlockedClient *bc) {
    for (waiter *w = w_head; w; w = w->next)
        if (w->bc == bc) return w;
    return NULL;
}

int hostBlockingTimeout(client *c, int i, uint64_t *deadline) {
    const char *err = blockingTimeoutParse(c->argv[i].ptr, c->argv[i].len, mstime(), deadline);
    if (err) {
        hostReplyError(c, err);
        return -1;
    }
    return 0;
}

int hostBlockingAllowed(const client *c) {
    if (c->deny_block) return 0;
    if (c->waiter) return 1; /* a re-run at its turn may wait on */
    int f = RedisModule_GetContextFlags(c->ctx);
    return !(f & (REDISMODULE_CTX_FLAGS_LUA | REDISMODULE_CTX_FLAGS_MULTI |
                  REDISMODULE_CTX_FLAGS_DENY_BLOCKING));
}
int hostClientBlocked(const client *c) { return c->waiter != NULL; }

size_t hostTableAhead(const client *c, const ir_table *t, int which) {
    size_t n = 0;
    for (waiter *w = w_head; w && w != c->waiter; w = w->next) n += w->t == t && w->which == which;
    return n;
}
size_t hostTableWaiting(const ir_table *t, int which) {
    size_t n = 0;
    for (waiter *w = w_head; w; w = w->next) n += w->t == t && w->which == which;
    return n;
}

static void deadlineReached(RedisModuleCtx *ctx, void *data);
static void disconnected(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc);

void hostBlockForTable(client *c, ir_table *t, int which, uint64_t deadline) {
    if (c->waiter) { /* its turn came, but it still may not run: it keeps its place */
        c->reblocked = 1;
        return;
    }
    if (!tableHost(t)) tableSetHost(t, calloc(1, sizeof(table_waits)));
    if (!tableHost(t)) {
        hostReplyError(c, "out of memory");
        return;
    }
    waiter *w = calloc(1, sizeof(*w));
    RedisModuleString **argv = calloc((size_t)c->argc, sizeof(*argv));
    if (!w || !argv) {
        free(w);
        free(argv);
        hostReplyError(c, "out of memory");
        return;
    }
    uint64_t now = mstime();
    long long ms = deadline ? (deadline > now ? (long long)(deadline - now) : 1) : 0;
    for (int i = 0; i < c->argc; i++) argv[i] = RedisModule_HoldString(NULL, c->rargv[i]);
    *w = (waiter){.cmd = c->cmd,
                  .t = t,
                  .which = which,
                  .argv = argv,
                  .argc = c->argc,
                  .id = c->id,
                  .since_ms = now,
                  .prev = w_tail};
    if (w_tail) w_tail->next = w;
    else w_head = w;
    w_tail = w;
    w->bc = RedisModule_BlockClient(c->ctx, NULL, NULL, NULL, 0);
    total_blocked++;
    RedisModule_SetDisconnectCallback(w->bc, disconnected);
    if (ms) {
        w->timer = RedisModule_CreateTimer(timer_ctx, ms, deadlineReached, w);
        w->has_timer = 1;
    }
}

void hostTableReady(client *c, ir_table *t, int which) {
    table_waits *h = tableHost(t);
    if (!h || h->ready[which]) return;
    h->ready[which] = 1;
    ready_any = marked_any = 1;
}

static void waiterEnd(waiter *w) {
    limiterWaited(w->t, (uint64_t)(mstime() - w->since_ms) * 1000);
    waiterUnlink(w);
    RedisModule_UnblockClient(w->bc, NULL);
    waiterFree(w);
}

/* Re-run waiter w at its turn: 1 if it answered, 0 if it waits on. */
static int waiterRerun(waiter *w) {
    RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(w->bc);
    client c = {
        .ctx = ctx, .argc = w->argc, .rargv = w->argv, .cmd = w->cmd, .id = w->id, .waiter = w};
    runCommand(&c);
    RedisModule_FreeThreadSafeContext(ctx);
    if (c.reblocked) return 0;
    waiterEnd(w);
    return 1;
}

/* After a command: serve the queues marked ready, head first, until none is. */
static void serveReady(void) {
    while (ready_any) {
        ready_any = 0;
        for (waiter *w = w_head; w;) {
            table_waits *h = tableHost(w->t);
            if (!h->ready[w->which]) {
                w = w->next;
                continue;
            }
            h->ready[w->which] = 0; /* the head's turn; if it answers, the next may run */
            int which = w->which;
            ir_table *t = w->t;
            if (waiterRerun(w)) {
                if (tableHost(t)) ((table_waits *)tableHost(t))->ready[which] = 1;
                ready_any = 1;
                break; /* the list changed: start over */
            }
            w = w->next;
        }
    }
    /* a queue marked ready with none of its waiters left: unmarked, so that
     * the next mark serves its next waiter */
    if (marked_any)
        for (ir_table *t = tablesFirst(module.tables); t; t = tableNext(t))
            if (tableHost(t)) memset(((table_waits *)tableHost(t))->ready, 0, sizeof(int) * 2);
    marked_any = 0;
}

/* Waiter w's deadline (its timer): it re-runs with waiting denied, its
 * -RATELIMITED (or its reply, if it now may run). */
static void deadlineReached(RedisModuleCtx *ctx, void *data) {
    waiter *w = data;
    w->has_timer = 0; /* fired: nothing to stop */
    blocked_timeouts++;
    RedisModuleCtx *tctx = RedisModule_GetThreadSafeContext(w->bc);
    client c = {.ctx = tctx,
                .argc = w->argc,
                .rargv = w->argv,
                .cmd = w->cmd,
                .id = w->id,
                .waiter = w,
                .deny_block = 1};
    runCommand(&c);
    RedisModule_FreeThreadSafeContext(tctx);
    waiterEnd(w);
    serveReady();
}

static void disconnected(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    waiter *w = waiterOf(bc);
    if (!w) return;
    blocked_disconnects++;
    waiterUnlink(w);
    RedisModule_UnblockClient(bc, NULL);
    waiterFree(w);
}

/* The engine's hook: table t goes (REPLAY.DROP) while clients wait on it. */
static void tableGone(ir_table *t) {
    for (waiter *w = w_head, *next; w; w = next) {
        next = w->next;
        if (w->t != t) continue;
        blocked_dropped++;
        RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(w->bc);
        client c = {.ctx = ctx};
        replyReplayError(&c, IR_ERR_NOTABLE, "table '%.128s' was dropped while the client waited",
                         tableName(t));
        RedisModule_FreeThreadSafeContext(ctx);
        waiterUnlink(w);
        RedisModule_UnblockClient(w->bc, NULL);
        waiterFree(w);
    }
    free(tableHost(t));
    tableSetHost(t, NULL);
}

static const ir_engine_host engine_host = {.table_gone = tableGone};

/* pin.h: this host copies every reply and never pins, so the engine never
 * calls these (its tables' pins stay NULL); they keep their contract anyway. */
void pinDetach(struct ir_pin *pin, void *mem, size_t maplen, uint64_t bytes) {
    if (maplen) munmap(mem, maplen);
    else free(mem);
}
void pinOverwrite(struct ir_pin *pin, const char *lo, const char *hi) {}

/* ---- commands ------------------------------------------------------------- */

static int argvReserve(int n) {
    if (n <= module.argv_cap) return 0;
    int cap = module.argv_cap ? module.argv_cap : 64;
    while (cap < n) cap *= 2;
    ir_arg *p = realloc(module.argv, (size_t)cap * sizeof(*p));
    if (!p) return -1;
    module.argv = p;
    module.argv_cap = cap;
    return 0;
}

/* Run c's command (c->cmd over c->rargv): its arguments as the handlers
 * read them, then the handler, then the last bulk out. */
static void runCommand(client *c) {
    if (argvReserve(c->argc) != 0) {
        RedisModule_ReplyWithError(c->ctx, "ERR out of memory");
        return;
    }
    for (int i = 0; i < c->argc; i++) {
        size_t l;
        module.argv[i].ptr = (char *)RedisModule_StringPtrLen(c->rargv[i], &l);
        module.argv[i].len = l;
        module.argv[i].owned = 0;
    }
    c->argv = module.argv;
    c->cmd->handler(c);
    flushBulk(c);
}

/* Every REPLAY.* command comes here: find its row by name, check its arity as
 * the native server does, run the one handler, then serve the waiters it
 * made ready. */
static int dispatch(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    size_t len;
    const char *name = RedisModule_StringPtrLen(argv[0], &len);
    const module_command *cmd = NULL;
    for (size_t k = 0; k < NCOMMANDS && !cmd; k++)
        if (strlen(module_commands[k].name) == len &&
            strcasecmp(module_commands[k].name, name) == 0)
            cmd = &module_commands[k];
    if (!cmd) return RedisModule_ReplyWithError(ctx, "ERR unknown REPLAY command");
    if ((cmd->arity > 0 && argc != cmd->arity) || (cmd->arity < 0 && argc < -cmd->arity))
        return RedisModule_WrongArity(ctx);
    /* Redis's own deny-oom check does not see the tables' memory (not its
     * allocator's): the native server's check, with it */
    if (module.maxmemory && deny_oom[cmd - module_commands] && usedMemory() > module.maxmemory)
        return RedisModule_ReplyWithError(ctx, "OOM " IR_OOM_MSG);
    client c = {
        .ctx = ctx, .argc = argc, .rargv = argv, .cmd = cmd, .id = RedisModule_GetClientId(ctx)};
    runCommand(&c);
    serveReady();
    return REDISMODULE_OK;
}

/* ---- redis-server's limits ------------------------------------------------
 *
 * maxmemory, proto-max-bulk-len and the normal class's hard
 * client-output-buffer-limit, as CONFIG GET says: read at load and after
 * every CONFIG SET (the config-change event), never on a command's path. */

static int configGet(RedisModuleCtx *ctx, const char *name, char *out, size_t cap) {
    RedisModuleCallReply *r = RedisModule_Call(ctx, "CONFIG", "cc", "GET", name);
    int ok = -1;
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY &&
        RedisModule_CallReplyLength(r) == 2) {
        size_t l;
        const char *v = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(r, 1), &l);
        if (v && l < cap) {
            memcpy(out, v, l);
            out[l] = '\0';
            ok = 0;
        }
    }
    if (r) RedisModule_FreeCallReply(r);
    return ok;
}

static void readLimits(RedisModuleCtx *ctx) {
    char v[256];
    module.maxmemory = configGet(ctx, "maxmemory", v, sizeof(v)) == 0 ? strtoull(v, NULL, 10) : 0;
    module.proto_max_bulk = configGet(ctx, "proto-max-bulk-len", v, sizeof(v)) == 0
                                ? strtoull(v, NULL, 10)
                                : 512ULL * 1024 * 1024; /* Redis's default */
    module.obl = 0; /* "normal <hard> <soft> <seconds> replica ... pubsub ..." */
    if (configGet(ctx, "client-output-buffer-limit", v, sizeof(v)) == 0) {
        const char *p = strstr(v, "normal ");
        if (p) module.obl = strtoull(p + 7, NULL, 10);
    }
}

static void configChanged(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    readLimits(ctx);
}

/* FLUSHALL (every database: dbnum -1) drops every table and episode
 * stream, as on the native server; FLUSHDB leaves them. Redis also empties
 * every database this way before it loads a dataset (DEBUG RELOAD, a
 * replica's full sync). */
static void flushed(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    const RedisModuleFlushInfo *fi = data;
    if (sub != REDISMODULE_SUBEVENT_FLUSHDB_START || fi->dbnum != -1) return;
    tablesFlush(module.tables); /* the waiters on them get -NOTABLE (tableGone) */
    chunkStoreFlushStreams(module.chunks);
    moduleParamsFlush(); /* and the parameter tables (their waiters get -NOTABLE) */
}

/* INFO inreplay: the module's tables and chunk store (fields inreplay_*). */
static void infoFunc(RedisModuleInfoCtx *ctx, int for_crash_report) {
    uint64_t items = 0, bytes = 0, inserts = 0, samples = 0, waiting = 0;
    for (ir_table *t = tablesFirst(module.tables); t; t = tableNext(t)) {
        ir_table_info in;
        tableInfo(t, &in);
        items += in.size;
        bytes += in.bytes_used;
        inserts += in.inserts;
        samples += in.samples;
    }
    for (waiter *w = w_head; w; w = w->next) waiting++;
    RedisModule_InfoAddSection(ctx, "");
    RedisModule_InfoAddFieldULongLong(ctx, "tables", tablesCount(module.tables));
    RedisModule_InfoAddFieldULongLong(ctx, "items", items);
    RedisModule_InfoAddFieldULongLong(ctx, "item_bytes", bytes);
    RedisModule_InfoAddFieldULongLong(ctx, "inserts", inserts);
    RedisModule_InfoAddFieldULongLong(ctx, "samples", samples);
    RedisModule_InfoAddFieldULongLong(ctx, "blocked_clients", waiting);
    RedisModule_InfoAddFieldULongLong(ctx, "total_blocked_clients", total_blocked);
    RedisModule_InfoAddFieldULongLong(ctx, "blocked_timeouts", blocked_timeouts);
    RedisModule_InfoAddFieldULongLong(ctx, "blocked_disconnects", blocked_disconnects);
    RedisModule_InfoAddFieldULongLong(ctx, "blocked_dropped", blocked_dropped);
    ir_chunk_stats cs;
    chunkStoreStats(module.chunks, &cs);
    RedisModule_InfoAddFieldULongLong(ctx, "streams", cs.streams);
    RedisModule_InfoAddFieldULongLong(ctx, "chunks", cs.chunks);
    RedisModule_InfoAddFieldULongLong(ctx, "chunk_memory", cs.memory);
    /* the tables' and chunks' memory, which Redis's used_memory leaves out
     * (not its allocator's) and maxmemory's checks here add */
    RedisModule_InfoAddFieldULongLong(ctx, "memory",
                                      tablesMemory(module.tables) +
                                          chunkStoreMemory(module.chunks) + moduleParamsMemory());
}

/* ---- the tables in the RDB -------------------------------------------------
 * A module data type with no keys of its own, only aux data, saved after the
 * keyspace (REDISMODULE_AUX_AFTER_RDB): every table and the chunk store as
 * the engine's records (replay/persist.h), the same bodies as the native
 * server's snapshot files. Encoding version 1: records, each u64 tag (its 4
 * bytes little-endian), u64 body length (in the engine's bytes: it bounds
 * what the loader trusts), then the body's values: u32 and u64 with
 * SaveUnsigned, f64 with SaveDouble (bit for bit), bytes as string buffers of
 * at most RDB_PIECE bytes each; last a DONE record: u64 the table count.
 * Saving only reads (BGSAVE's child runs it). Loading builds a fresh table set
 * and store and replaces the registry's only once all of it loaded; a bad
 * payload fails the load (REDISMODULE_ERR) with one line saying why. */

#define RDB_TYPE_NAME "ir_tables" /* 9 characters, as Redis wants */
#define RDB_ENCVER 1
#define RDB_PIECE (1u << 20)
#define RDB_TAG_DONE "DONE"

static RedisModuleType *rdb_type;

typedef struct rdbWriter {
    ir_pwriter pw; /* first */
    RedisModuleIO *io;
} rdbWriter;

static uint64_t tagValue(const char tag[4]) {
    uint64_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint64_t)(unsigned char)tag[i] << (8 * i);
    return v;
}

static void rwCheck(ir_pwriter *w) {
    if (RedisModule_IsIOError(((rdbWriter *)w)->io)) w->err = EIO;
}
static void rwRecord(ir_pwriter *w, const char tag[4], uint64_t len) {
    RedisModule_SaveUnsigned(((rdbWriter *)w)->io, tagValue(tag));
    RedisModule_SaveUnsigned(((rdbWriter *)w)->io, len);
    rwCheck(w);
}
static void rwBytes(ir_pwriter *w, const void *p, size_t n) {
    const char *c = p;
    for (size_t k; n; c += k, n -= k) {
        k = n < RDB_PIECE ? n : RDB_PIECE;
        RedisModule_SaveStringBuffer(((rdbWriter *)w)->io, c, k);
    }
    rwCheck(w);
}
static void rwU64(ir_pwriter *w, uint64_t v) {
    RedisModule_SaveUnsigned(((rdbWriter *)w)->io, v);
    rwCheck(w);
}
static void rwU32(ir_pwriter *w, uint32_t v) { rwU64(w, v); }
static void rwF64(ir_pwriter *w, double d) {
    RedisModule_SaveDouble(((rdbWriter *)w)->io, d);
    rwCheck(w);
}

static void rdbAuxSave(RedisModuleIO *io, int when) {
    rdbWriter w = {
        .pw = {.record = rwRecord, .bytes = rwBytes, .u32 = rwU32, .u64 = rwU64, .f64 = rwF64},
        .io = io};
    uint64_t n = 0;
    persistSaveChunkStore(&w.pw, module.chunks); /* before the tables that reference it */
    for (const ir_table *t = tablesFirst(module.tables); t && !w.pw.err; t = tableNext(t), n++)
        persistSaveTable(&w.pw, t);
    moduleParamsSave(&w.pw);  /* the parameter tables with their optimizer state */
    if (w.pw.err == ENOMEM) { /* as Redis's own allocator does when memory runs out */
        RedisModule_LogIOError(io, "warning", "inreplay: out of memory saving the tables");
        abort();
    }
    if (w.pw.err) return; /* Redis saw the write error and fails the save */
    rwRecord(&w.pw, RDB_TAG_DONE, 8);
    rwU64(&w.pw, n);
}

typedef struct rdbReader {
    ir_preader pr; /* first */
    RedisModuleIO *io;
    uint64_t left;      /* of the record being read */
    const char *failed; /* what went wrong below the engine's message */
} rdbReader;

static int rrTake(rdbReader *r, uint64_t n) {
    if (n > r->left) return -1; /* the engine says what ran past the record */
    r->left -= n;
    return 0;
}
static int rrFailed(rdbReader *r) {
    if (!RedisModule_IsIOError(r->io)) return 0;
    r->failed = "the RDB ends early or holds other data there";
    return -1;
}
static int rrU64(ir_preader *pr, uint64_t *v) {
    rdbReader *r = (rdbReader *)pr;
    if (rrTake(r, 8)) return -1;
    *v = RedisModule_LoadUnsigned(r->io);
    return rrFailed(r);
}
static int rrU32(ir_preader *pr, uint32_t *v) {
    rdbReader *r = (rdbReader *)pr;
    uint64_t u;
    if (rrTake(r, 4)) return -1;
    u = RedisModule_LoadUnsigned(r->io);
    if (rrFailed(r)) return -1;
    if (u > UINT32_MAX) {
        r->failed = "a 32-bit field holds a larger value";
        return -1;
    }
    *v = (uint32_t)u;
    return 0;
}
static int rrF64(ir_preader *pr, double *d) {
    rdbReader *r = (rdbReader *)pr;
    if (rrTake(r, 8)) return -1;
    *d = RedisModule_LoadDouble(r->io);
    return rrFailed(r);
}
static int rrBytes(ir_preader *pr, void *dst, uint64_t n) {
    rdbReader *r = (rdbReader *)pr;
    if (rrTake(r, n)) return -1;
    for (char *d = dst; n;) {
        size_t want = n < RDB_PIECE ? (size_t)n : RDB_PIECE, got = 0;
        char *p = RedisModule_LoadStringBuffer(r->io, &got);
        if (rrFailed(r) || !p) {
            if (p) RedisModule_Free(p);
            if (!r->failed) r->failed = "a string could not be read";
            return -1;
        }
        if (got != want) {
            RedisModule_Free(p);
            r->failed = "a piece of bytes has the wrong length";
            return -1;
        }
        memcpy(d, p, got);
        RedisModule_Free(p);
        d += got;
        n -= got;
    }
    return 0;
}
static uint64_t rrLeft(const ir_preader *pr) { return ((const rdbReader *)pr)->left; }

/* Read every record into L; IR_PERSIST_OK, or another code with why. */
static int rdbLoadRecords(rdbReader *r, ir_ploader *L, char *why, size_t whylen) {
    for (uint64_t rec = 0;; rec++) {
        uint64_t tagv = RedisModule_LoadUnsigned(r->io), len = RedisModule_LoadUnsigned(r->io);
        if (rrFailed(r)) {
            snprintf(why, whylen, "record %llu: %s", (unsigned long long)rec, r->failed);
            return IR_PERSIST_CORRUPT;
        }
        char tag[5] = {0};
        for (int i = 0; i < 4; i++) tag[i] = (char)(tagv >> (8 * i));
        if (tagv > UINT32_MAX) {
            snprintf(why, whylen, "record %llu: not a record tag", (unsigned long long)rec);
            return IR_PERSIST_CORRUPT;
        }
        r->left = len;
        if (!memcmp(tag, RDB_TAG_DONE, 4)) {
            uint64_t n;
            if (len != 8 || rrU64(&r->pr, &n) != 0 || n != L->ntables) {
                snprintf(why, whylen, "the DONE record does not count the %llu tables loaded%s%s",
                         (unsigned long long)L->ntables, r->failed ? ": " : "",
                         r->failed ? r->failed : "");
                return IR_PERSIST_CORRUPT;
            }
            int rc = persistLoadEnd(L);
            if (rc) snprintf(why, whylen, "%s", L->why);
            return rc;
        }
        int rc = persistLoadRecord(L, tag);
        if (rc == IR_PERSIST_UNKNOWN) {
            snprintf(why, whylen, "record %llu: unknown record type %02x%02x%02x%02x",
                     (unsigned long long)rec, (unsigned char)tag[0], (unsigned char)tag[1],
                     (unsigned char)tag[2], (unsigned char)tag[3]);
            return IR_PERSIST_CORRUPT;
        }
        if (rc) {
            snprintf(why, whylen, "record %llu (%s): %s%s%s", (unsigned long long)rec, tag, L->why,
                     r->failed ? ": " : "", r->failed ? r->failed : "");
            return rc;
        }
        if (r->left) {
            snprintf(why, whylen, "record %llu (%s): %llu bytes of it not used (bad length)",
                     (unsigned long long)rec, tag, (unsigned long long)r->left);
            return IR_PERSIST_CORRUPT;
        }
    }
}

static int rdbAuxLoad(RedisModuleIO *io, int encver, int when) {
    if (encver != RDB_ENCVER) {
        RedisModule_LogIOError(io, "warning",
                               "inreplay: the RDB's replay tables are of encoding version %d; "
                               "this module reads version %d (a newer module wrote them)",
                               encver, RDB_ENCVER);
        return REDISMODULE_ERR;
    }
    ir_tables *tables = tablesNew();
    ir_chunk_store *chunks = chunkStoreNew();
    rdbReader r = {
        .pr = {.bytes = rrBytes, .u32 = rrU32, .u64 = rrU64, .f64 = rrF64, .left = rrLeft},
        .io = io};
    ir_ploader L;
    persistLoadInit(&L, &r.pr, tables, chunks);
    L.params = paramsNew();
    char why[512];
    int rc = IR_PERSIST_NOMEM;
    if (!tables || !chunks || !L.params)
        snprintf(why, sizeof(why), "out of memory for the table set");
    else rc = rdbLoadRecords(&r, &L, why, sizeof(why));
    persistLoadFree(&L);
    if (rc != IR_PERSIST_OK) {
        RedisModule_LogIOError(io, "warning",
                               "inreplay: the replay tables in the RDB are not loaded: %s", why);
        tablesFree(tables); /* before the store its items reference */
        chunkStoreFree(chunks);
        paramsFree(L.params);
        return REDISMODULE_ERR;
    }
    for (waiter *w = w_head, *next; w; w = next) { /* clients the limiter holds */
        next = w->next;
        RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(w->bc);
        client c = {.ctx = ctx};
        replyReplayError(&c, IR_ERR_NOTABLE,
                         "table '%.128s' was replaced by the RDB loaded while the client waited",
                         tableName(w->t));
        RedisModule_FreeThreadSafeContext(ctx);
        waiterUnlink(w);
        RedisModule_UnblockClient(w->bc, NULL);
        waiterFree(w);
    }
    tablesFree(module.tables);
    chunkStoreFree(module.chunks);
    module.tables = tables;
    module.chunks = chunks;
    moduleParamsReplace(L.params);
    ir_chunk_stats cs;
    chunkStoreStats(chunks, &cs);
    RedisModule_LogIOError(io, "notice",
                           "inreplay: loaded %llu replay tables and %llu streams from the RDB",
                           (unsigned long long)L.ntables, (unsigned long long)cs.streams);
    return REDISMODULE_OK;
}

/* No key ever holds this type: it exists for its aux data. */
static void *rdbKeyLoad(RedisModuleIO *io, int encver) {
    RedisModule_LogIOError(io, "warning",
                           "inreplay: the RDB holds a key of type " RDB_TYPE_NAME
                           ", which this module never makes");
    return NULL;
}
static void rdbKeySave(RedisModuleIO *io, void *value) {}
static void rdbKeyFree(void *value) {}

static int registerRdbType(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods tm = {.version = REDISMODULE_TYPE_METHOD_VERSION,
                                 .rdb_load = rdbKeyLoad,
                                 .rdb_save = rdbKeySave,
                                 .free = rdbKeyFree,
                                 .aux_load = rdbAuxLoad,
                                 .aux_save = rdbAuxSave,
                                 .aux_save_triggers = REDISMODULE_AUX_AFTER_RDB};
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    rdb_type = RedisModule_CreateDataType(ctx, RDB_TYPE_NAME, RDB_ENCVER, &tm);
    return rdb_type ? 0 : -1;
}

static int registerCommand(RedisModuleCtx *ctx, const module_command *m) {
    if (RedisModule_CreateCommand(ctx, m->name, dispatch, m->flags, m->first, m->last, m->step) ==
        REDISMODULE_ERR)
        return -1;
    RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, m->name);
    if (!cmd) return -1;
    RedisModuleCommandKeySpec specs[2];
    memset(specs, 0, sizeof(specs));
    if (m->nspecs) {
        specs[0].flags = m->spec_flags;
        specs[0].begin_search_type = REDISMODULE_KSPEC_BS_INDEX;
        specs[0].bs.index.pos = m->spec_begin;
        specs[0].find_keys_type = REDISMODULE_KSPEC_FK_RANGE;
        specs[0].fk.range.lastkey = m->spec_lastkey;
        specs[0].fk.range.keystep = m->spec_step;
        specs[0].fk.range.limit = m->spec_limit;
    }
    RedisModuleCommandInfo info = {
        .version = &RedisModule_CurrentCommandInfoVersion,
        .summary = m->summary,
        .since = m->since[0] ? m->since : NULL,
        .complexity = m->complexity[0] ? m->complexity : NULL,
        .arity = m->arity,
        .key_specs = m->nspecs ? specs : NULL,
    };
    return RedisModule_SetCommandInfo(cmd, &info) == REDISMODULE_OK ? 0 : -1;
}

/* SEED <n>, FANOUT <k>, MAXBYTES <bytes>, SHARD_GROUP <host:port,...>,
 * SHARD_INDEX <k> (the native server's --shard-group and --shard-index) */
static int parseArgs(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc % 2) {
        RedisModule_Log(ctx, "warning",
                        "inreplay: arguments go in pairs: SEED n FANOUT k MAXBYTES b "
                        "SHARD_GROUP host:port,... SHARD_INDEX k");
        return -1;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t l;
        const char *k = RedisModule_StringPtrLen(argv[i], &l);
        if (!strcasecmp(k, "shard_group")) {
            const char *g = RedisModule_StringPtrLen(argv[i + 1], &l);
            free(module.shard_group);
            if (!(module.shard_group = malloc(l + 1))) return -1;
            memcpy(module.shard_group, g, l);
            module.shard_group[l] = '\0';
            continue;
        }
        long long v;
        if (RedisModule_StringToLongLong(argv[i + 1], &v) != REDISMODULE_OK || v < 0) {
            RedisModule_Log(ctx, "warning", "inreplay: %s needs an integer >= 0", k);
            return -1;
        }
        if (!strcasecmp(k, "seed")) module.seed = (uint64_t)v;
        else if (!strcasecmp(k, "fanout") && v <= 32) module.fanout = (unsigned)v;
        else if (!strcasecmp(k, "maxbytes") && v > 0) module.maxbytes = (uint64_t)v;
        else if (!strcasecmp(k, "shard_index") && v < IR_MAX_SHARDS) module.shard_index = (int)v;
        else {
            RedisModule_Log(ctx, "warning", "inreplay: unknown or out-of-range argument '%s'", k);
            return -1;
        }
    }
    return 0;
}

/* A replay group's checks, as the native server's: every member host:port,
 * SHARD_INDEX one of them, and that member's port the one Redis listens on
 * (REPLAY.SHARDS advertises it). */
static int checkGroup(RedisModuleCtx *ctx) {
    if (!module.shard_group || !module.shard_group[0]) {
        if (module.shard_index) {
            RedisModule_Log(ctx, "warning", "inreplay: SHARD_INDEX needs SHARD_GROUP");
            return -1;
        }
        return 0;
    }
    const char *start[IR_MAX_SHARDS], *err = NULL;
    size_t len[IR_MAX_SHARDS];
    int n = shardGroupMembers(module.shard_group, start, len, IR_MAX_SHARDS, &err);
    if (n < 0) {
        RedisModule_Log(ctx, "warning", "inreplay: SHARD_GROUP: %s", err);
        return -1;
    }
    if (module.shard_index >= n) {
        RedisModule_Log(ctx, "warning", "inreplay: SHARD_INDEX %d is not a member of a group of %d",
                        module.shard_index, n);
        return -1;
    }
    char port[32] = "";
    const char *m = start[module.shard_index], *colon = NULL;
    for (const char *p = m; p < m + len[module.shard_index]; p++)
        if (*p == ':') colon = p;
    int plen = colon ? (int)(m + len[module.shard_index] - colon - 1) : 0;
    if (configGet(ctx, "port", port, sizeof(port)) != 0 || !colon || (size_t)plen != strlen(port) ||
        memcmp(colon + 1, port, (size_t)plen) != 0) {
        RedisModule_Log(ctx, "warning",
                        "inreplay: SHARD_INDEX %d is %.*s, but redis-server listens on port %s",
                        module.shard_index, (int)len[module.shard_index], m, port);
        return -1;
    }
    return 0;
}

static void moduleFree(void) {
    if (module.tables) tablesFree(module.tables); /* before the chunks its items reference */
    if (module.chunks) chunkStoreFree(module.chunks);
    moduleParamsFree();
    free(module.argv);
    free(module.buf);
    free(module.shard_group);
    if (timer_ctx) RedisModule_FreeThreadSafeContext(timer_ctx);
    timer_ctx = NULL;
    memset(&module, 0, sizeof(module));
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int RedisModule_OnUnload(RedisModuleCtx *ctx);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "inreplay", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    module.maxbytes = 1ULL << 30; /* the native server's MAXBYTES default (1gb) */
    if (parseArgs(ctx, argv, argc) != 0 || checkGroup(ctx) != 0) {
        moduleFree();
        return REDISMODULE_ERR;
    }
    module.tables = tablesNew();
    module.chunks = chunkStoreNew();
    timer_ctx = RedisModule_GetDetachedThreadSafeContext(ctx);
    if (!module.tables || !module.chunks || !timer_ctx || moduleParamsInit() != 0) {
        moduleFree();
        return REDISMODULE_ERR;
    }
    engineSetHost(&engine_host);
    readLimits(ctx);
    if (RedisModule_RegisterInfoFunc(ctx, infoFunc) == REDISMODULE_ERR ||
        RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_FlushDB, flushed) ==
            REDISMODULE_ERR ||
        RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_Config, configChanged) ==
            REDISMODULE_ERR) {
        moduleFree();
        return REDISMODULE_ERR;
    }
    if (registerRdbType(ctx) != 0) { /* the tables in the RDB (above) */
        RedisModule_Log(ctx, "warning", "inreplay: could not create the data type " RDB_TYPE_NAME);
        moduleFree();
        return REDISMODULE_ERR;
    }
    for (size_t k = 0; k < NCOMMANDS; k++)
        deny_oom[k] = strstr(module_commands[k].flags, "deny-oom") != NULL;
    for (size_t k = 0; k < NCOMMANDS; k++)
        if (registerCommand(ctx, &module_commands[k]) != 0) {
            RedisModule_Log(ctx, "warning", "inreplay: could not register %s",
                            module_commands[k].name);
            moduleFree();
            return REDISMODULE_ERR;
        }
    return REDISMODULE_OK;
}

int RedisModule_OnUnload(RedisModuleCtx *ctx) {
    moduleFree();
    return REDISMODULE_OK;
}
