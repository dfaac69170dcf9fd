/* host_param.c - the module host's part of PARAM.* (param_host.h): the
 * parameter tables of this redis-server, their version messages (Redis's
 * PUBLISH), and SYNC rounds' waiting pushers as Redis blocked clients. The
 * commands are t_param.c, compiled for this host.
 *
 * A waiting pusher is RedisModule_BlockClient'ed with its arguments held
 * (RedisModule_HoldString: its gradient stays in Redis's string) in its
 * table's list, in arrival order. The round's k-th push sums them, steps, and
 * unblocks each with the round's result, which Redis then replies from its
 * reply callback. A waiter's TIMEOUT is Redis's blocked-client timeout (its
 * timeout callback answers -SYNCTIMEOUT and withdraws the push; Redis checks
 * timeouts on its hz tick, so an answer may come up to 1/hz late); a
 * disconnect withdraws it too (the disconnect callback); a table that goes
 * answers its waiters -NOTABLE. */
#include "host_param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "param_host.h"
#include "replay_err.h"
#include "t_param.h"

typedef struct pwaiter {
    RedisModuleBlockedClient *bc;
    RedisModuleString **held;
    ir_arg *args; /* the held strings' bytes, as the handlers read arguments */
    int argc;
    struct pwaiter *prev, *next;
} pwaiter;

typedef struct pwaits {
    pwaiter *head, *tail;
    uint32_t n;
} pwaits;

/* what a waiter's reply callback answers */
typedef struct presult {
    int ok;
    uint64_t version;
    char error[512]; /* !ok: the error line, its code first */
} presult;

static ir_params *params;

/* ---- param_host.h ------------------------------------------------------------ */

ir_params *hostParams(client *c) { return params; }

void hostParamPublish(client *c, const char *ch, size_t chlen, const char *msg, size_t mlen) {
    RedisModuleCtx *ctx = moduleClientCtx(c);
    RedisModuleString *a = RedisModule_CreateString(ctx, ch, chlen);
    RedisModuleString *b = RedisModule_CreateString(ctx, msg, mlen);
    RedisModule_PublishMessage(ctx, a, b);
    RedisModule_FreeString(ctx, a);
    RedisModule_FreeString(ctx, b);
}

void hostReplyNull(client *c) { RedisModule_ReplyWithNull(moduleClientCtx(c)); }

static void waiterFree(pwaiter *w) {
    for (int i = 0; i < w->argc; i++) RedisModule_FreeString(NULL, w->held[i]);
    free(w->held);
    free(w->args);
    free(w);
}

static void waiterUnlink(pwaits *ws, pwaiter *w) {
    if (w->prev) w->prev->next = w->next;
    else ws->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else ws->tail = w->prev;
    ws->n--;
}

/* Unblock w with res (its reply callback answers it; freeResult frees res). */
static void waiterAnswer(pwaits *ws, pwaiter *w, presult *res) {
    waiterUnlink(ws, w);
    RedisModule_UnblockClient(w->bc, res);
    waiterFree(w);
}

static void paramGone(ir_param *p) {
    pwaits *ws = p->host;
    while (ws->head) {
        presult *res = calloc(1, sizeof(*res));
        if (res)
            snprintf(res->error, sizeof(res->error),
                     "%s parameter table '%.128s' was dropped while the client waited",
                     replayErrorName(IR_ERR_NOTABLE), p->name);
        waiterAnswer(ws, ws->head, res);
    }
    free(ws);
    p->host = NULL;
}

static int replyResult(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    presult *res = RedisModule_GetBlockedClientPrivateData(ctx);
    if (!res) return RedisModule_ReplyWithError(ctx, "ERR out of memory answering a SYNC push");
    if (res->ok) return RedisModule_ReplyWithLongLong(ctx, (long long)res->version);
    return RedisModule_ReplyWithError(ctx, res->error);
}

static void freeResult(RedisModuleCtx *ctx, void *priv) { free(priv); }

/* The waiter of bc, and its table; NULL when it has none (it was answered). */
static pwaiter *waiterOf(RedisModuleBlockedClient *bc, ir_param **pp) {
    for (ir_param *p = params ? params->head : NULL; p; p = p->next) {
        pwaits *ws = p->host;
        for (pwaiter *w = ws ? ws->head : NULL; w; w = w->next)
            if (w->bc == bc) {
                *pp = p;
                return w;
            }
    }
    return NULL;
}

static int timedOut(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    ir_param *p = NULL;
    pwaiter *w = waiterOf(RedisModule_GetBlockedClientHandle(ctx), &p);
    if (!w) return RedisModule_ReplyWithError(ctx, "ERR the SYNC push's round ended");
    char text[400], line[512];
    paramSyncTimeoutText(text, sizeof(text), p, hostParamPending(p));
    snprintf(line, sizeof(line), "%s %s", replayErrorName(IR_ERR_SYNCTIMEOUT), text);
    waiterUnlink(p->host, w); /* withdrawn; Redis unblocks the client itself */
    waiterFree(w);
    return RedisModule_ReplyWithError(ctx, line);
}

static void disconnected(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    ir_param *p = NULL;
    pwaiter *w = waiterOf(bc, &p);
    if (!w) return;
    waiterUnlink(p->host, w); /* withdrawn from its round */
    waiterFree(w);
}

uint32_t hostParamPending(const ir_param *p) {
    const pwaits *ws = p->host;
    return ws ? ws->n : 0;
}

int hostParamWait(client *c, ir_param *p, uint64_t deadline) {
    if (!p->host && !(p->host = calloc(1, sizeof(pwaits)))) {
        hostReplyError(c, "out of memory waiting for the SYNC round");
        return -1;
    }
    params->host_gone = paramGone;
    int argc = hostArgc(c);
    pwaiter *w = calloc(1, sizeof(*w));
    RedisModuleString **held = calloc((size_t)argc, sizeof(*held));
    ir_arg *args = calloc((size_t)argc, sizeof(*args));
    if (!w || !held || !args) {
        free(w), free(held), free(args);
        hostReplyError(c, "out of memory waiting for the SYNC round");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        size_t len;
        held[i] = RedisModule_HoldString(NULL, moduleClientArg(c, i));
        args[i].ptr = (char *)RedisModule_StringPtrLen(held[i], &len);
        args[i].len = len;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* the clock hostBlockingTimeout's deadline is on */
    uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    long long ms = deadline ? (deadline > now ? (long long)(deadline - now) : 1) : 0;
    *w = (pwaiter){.held = held, .args = args, .argc = argc};
    pwaits *ws = p->host;
    w->prev = ws->tail;
    if (ws->tail) ws->tail->next = w;
    else ws->head = w;
    ws->tail = w;
    ws->n++;
    w->bc = RedisModule_BlockClient(moduleClientCtx(c), replyResult, timedOut, freeResult, ms);
    RedisModule_SetDisconnectCallback(w->bc, disconnected);
    return 0;
}

void hostParamEachWaiter(ir_param *p, ir_param_waiter_fn fn, void *ctx) {
    pwaits *ws = p->host;
    for (pwaiter *w = ws ? ws->head : NULL; w; w = w->next) fn(ctx, w->argc, w->args);
}

void hostParamRoundDone(client *c, ir_param *p, const ir_param_round *r) {
    pwaits *ws = p->host;
    while (ws && ws->head) {
        presult *res = calloc(1, sizeof(*res));
        if (res) {
            res->ok = r->ok;
            res->version = r->version;
            if (!r->ok) {
                char text[400];
                paramRoundErrorText(text, sizeof(text), p, r->bad);
                snprintf(res->error, sizeof(res->error), "ERR %s", text);
            }
        }
        waiterAnswer(ws, ws->head, res);
    }
}

int hostParamRerun(client *c, ir_param *p) { return 0; } /* waiters are answered, never re-run */

/* ---- host_param.h ------------------------------------------------------------ */

int moduleParamsInit(void) {
    params = paramsNew();
    return params ? 0 : -1;
}

void moduleParamsFree(void) {
    paramsFree(params);
    params = NULL;
}

void moduleParamsFlush(void) {
    if (params) paramsFlush(params);
}

uint64_t moduleParamsMemory(void) { return params ? paramsMemory(params) : 0; }

void moduleParamsSave(ir_pwriter *w) {
    for (const ir_param *p = params ? params->head : NULL; p && !w->err; p = p->next)
        persistSaveParam(w, p);
}

void moduleParamsReplace(ir_params *ps) {
    paramsFree(params);
    params = ps;
}
