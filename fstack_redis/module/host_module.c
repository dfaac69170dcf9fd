/* host_module.c - REPLAY.* as a module for stock redis-server: the module
 * host of replay_host.h over the RedisModule API. The commands themselves are
 * t_replay.c and t_traj.c, compiled a second time for this host
 * (-DIR_HOST_MODULE); this file only answers what they ask of a host.
 *
 *   redis-server --loadmodule inreplay_module.so [SEED <n>] [FANOUT <k>] [MAXBYTES <bytes>]
 *
 * SEED, FANOUT and MAXBYTES are the native server's --seed, --fanout and
 * --maxbytes: the same seed gives both hosts the same draws.
 *
 * Redis replies are whole values, so the bulks the handlers build in place
 * or in parts (reserved, begun, pinned) are gathered in one buffer kept
 * across commands and replied when complete; pinned memory is copied (this
 * host never pins). Tables live in one registry per server, as the native
 * server's. Not here yet: waiting (TIMEOUT answers an error), persistence in
 * the RDB, an INFO section, maxmemory headroom checks (Redis's own deny-oom
 * applies to the writes).
 */
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
#include "replay.h"
#include "replay_err.h"
#include "replay_host.h"
#include "t_replay.h"
#include "t_traj.h"

#define IR_MODULE_MAX_BULK (512ULL * 1024 * 1024) /* Redis's proto-max-bulk-len default */

struct client {
    RedisModuleCtx *ctx;
    int argc;
    ir_arg *argv;
    uint64_t id;
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
    ir_arg *argv; /* the current command's arguments, grown on demand */
    int argv_cap;
    char *buf; /* the bulk being gathered, grown on demand and kept */
    size_t buf_cap;
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

int hostArgc(const client *c) { return c->argc; }
const ir_arg *hostArg(const client *c, int i) { return &c->argv[i]; }
int hostArgEq(const client *c, int i, const char *lit) {
    return strlen(lit) == c->argv[i].len && strcasecmp(c->argv[i].ptr, lit) == 0;
}
uint64_t hostClientId(const client *c) { return c->id; }

ir_tables *hostTables(client *c) { return module.tables; }
ir_chunk_store *hostChunks(client *c) { return module.chunks; }

static uint64_t mstime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

ir_table_opts hostTableOpts(client *c) {
    ir_table_opts o = tableOptsDefault();
    o.maxbytes = module.maxbytes;
    o.fanout = module.fanout;
    o.seed = module.seed ? module.seed + module.tables->count : mstime() ^ c->id;
    o.id_base = 0;
    return o;
}
const char *hostShardGroup(const client *c) { return NULL; }
int hostShardIndex(const client *c) { return 0; }

uint64_t hostProtoMaxBulkLen(const client *c) { return IR_MODULE_MAX_BULK; }
uint64_t hostOutputBufferLimit(const client *c) { return 0; }
uint64_t hostMaxmemory(const client *c) { return 0; }
uint64_t hostUsedMemory(const client *c) { return 0; }
void hostOomRejected(client *c) {}

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

static const char *const error_codes[] = {
#define IR_ERR_NAME(code, when) #code,
    IR_REPLAY_ERRORS(IR_ERR_NAME)
#undef IR_ERR_NAME
};

void replyReplayError(client *c, ir_errcode code, const char *fmt, ...) {
    char buf[1024];
    int h = snprintf(buf, sizeof(buf), "%s ", error_codes[code]);
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

int hostBlockingTimeout(client *c, int i, uint64_t *deadline) {
    hostReplyError(c, "TIMEOUT waits as a blocked client, which the module host does not "
                      "do yet: call without TIMEOUT");
    return -1;
}
int hostBlockingAllowed(const client *c) { return 0; }
int hostClientBlocked(const client *c) { return 0; }
size_t hostTableAhead(const client *c, const ir_table *t, int which) { return 0; }
size_t hostTableWaiting(const ir_table *t, int which) { return 0; }
void hostBlockForTable(client *c, ir_table *t, int which, uint64_t deadline) {}
void hostTableReady(client *c, ir_table *t, int which) {}

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

/* Every REPLAY.* command comes here: find its row by name, check its arity as
 * the native server does, and run the one handler. */
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
    if (argvReserve(argc) != 0) return RedisModule_ReplyWithError(ctx, "ERR out of memory");
    for (int i = 0; i < argc; i++) {
        size_t l;
        module.argv[i].ptr = (char *)RedisModule_StringPtrLen(argv[i], &l);
        module.argv[i].len = l;
        module.argv[i].owned = 0;
    }
    client c = {.ctx = ctx, .argc = argc, .argv = module.argv, .id = RedisModule_GetClientId(ctx)};
    cmd->handler(&c);
    flushBulk(&c);
    return REDISMODULE_OK;
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

/* SEED <n>, FANOUT <k>, MAXBYTES <bytes> */
static int parseArgs(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc % 2) {
        RedisModule_Log(ctx, "warning",
                        "inreplay: arguments go in pairs: SEED n FANOUT k MAXBYTES b");
        return -1;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t l;
        const char *k = RedisModule_StringPtrLen(argv[i], &l);
        long long v;
        if (RedisModule_StringToLongLong(argv[i + 1], &v) != REDISMODULE_OK || v < 0) {
            RedisModule_Log(ctx, "warning", "inreplay: %s needs an integer >= 0", k);
            return -1;
        }
        if (!strcasecmp(k, "seed")) module.seed = (uint64_t)v;
        else if (!strcasecmp(k, "fanout") && v <= 32) module.fanout = (unsigned)v;
        else if (!strcasecmp(k, "maxbytes") && v > 0) module.maxbytes = (uint64_t)v;
        else {
            RedisModule_Log(ctx, "warning", "inreplay: unknown or out-of-range argument '%s'", k);
            return -1;
        }
    }
    return 0;
}

static void moduleFree(void) {
    if (module.tables) tablesFree(module.tables); /* before the chunks its items reference */
    if (module.chunks) chunkStoreFree(module.chunks);
    free(module.argv);
    free(module.buf);
    memset(&module, 0, sizeof(module));
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int RedisModule_OnUnload(RedisModuleCtx *ctx);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "inreplay", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    module.maxbytes = 1ULL << 30; /* the native server's MAXBYTES default (1gb) */
    if (parseArgs(ctx, argv, argc) != 0) return REDISMODULE_ERR;
    module.tables = tablesNew();
    module.chunks = chunkStoreNew();
    if (!module.tables || !module.chunks) {
        moduleFree();
        return REDISMODULE_ERR;
    }
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
