/* t_param.c - PARAM.* commands: parameter tables (replay/param.h) on the
 * native host. Workers push gradients, the table applies one optimizer step
 * per push (torch.optim's math in float32) and actors pull the parameters.
 *
 *   PARAM.CREATE <name> SIZE <n> OPTIMIZER sgd|momentum|rmsprop|adam|adamw|adagrad
 *       [LR x] [MOMENTUM x] [ALPHA x] [BETA1 x] [BETA2 x] [EPS x] [WEIGHT_DECAY x]
 *       [NESTEROV] [SYNC k] [INIT <n float32>]                         -> OK
 *   PARAM.PUSH <name> <n float32> [SCALE s] [BASE <version> [MAXSTALE k]]
 *       [TIMEOUT seconds]                                  -> the new version
 *   (a SYNC k table: the version of the step that applied the mean of this
 *   push and k - 1 others; TIMEOUT bounds the wait, 0 or none: forever)
 *   PARAM.PULL <name> [IFNEWER <version>]  -> [version, parameters] (the
 *       parameters a null bulk when version <= IFNEWER's)
 *   PARAM.SET <name> <n float32>           -> the new version (state kept)
 *   PARAM.INFO <name>                      -> a map of settings and counters
 *   PARAM.DROP <name>                      -> OK
 *
 * Blobs are little-endian float32, exactly 4 x SIZE bytes. Every step and
 * SET publishes the new version (decimal) on channel "__param__:<name>".
 * A refused command (wrong length, a non-finite gradient element, a stale
 * BASE, an option out of range) replies one error line and changes nothing.
 * Parameter tables are their own namespace beside the replay tables and, like
 * them, outside the databases: FLUSHALL drops them, DEL and FLUSHDB do not.
 *
 * PULL sends the parameters by reference (pin.h): a later step or SET first
 * copies what unsent replies still read (pinOverwrite).
 */
#include "t_param.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocked.h"
#include "param.h"
#include "pubsub.h"
#include "replay_err.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the PARAM.* wire format is little-endian float32; add byte swapping for this host"
#endif

static ir_param *lookupParamOrReply(client *c) {
    ir_param *p = paramFind(c->srv->params, c->argv[1].ptr, c->argv[1].len);
    if (!p) replyReplayError(c, IR_ERR_NOTABLE, "no such parameter table '%.128s'", c->argv[1].ptr);
    return p;
}

static int argU64(client *c, int i, const char *what, uint64_t *out) {
    long long ll;
    if (!string2ll(c->argv[i].ptr, c->argv[i].len, &ll) || ll < 0) {
        addReplyErrorFormat(c, "%s must be a non-negative integer", what);
        return -1;
    }
    *out = (uint64_t)ll;
    return 0;
}

static int blobLenOk(client *c, const ir_param *p, int i, const char *what) {
    if (c->argv[i].len == p->n * sizeof(float)) return 1;
    addReplyErrorFormat(c,
                        "%s of %zu bytes for parameter table '%.128s' of %llu float32 (%llu "
                        "bytes): nothing applied",
                        what, c->argv[i].len, p->name, (unsigned long long)p->n,
                        (unsigned long long)(p->n * sizeof(float)));
    return 0;
}

static void publishVersion(client *c, const ir_param *p) {
    char ch[16 + 512], msg[24];
    if (p->namelen > 500) return; /* no channel name that long */
    int chlen = snprintf(ch, sizeof(ch), "__param__:%.*s", (int)p->namelen, p->name);
    int mlen = snprintf(msg, sizeof(msg), "%llu", (unsigned long long)p->version);
    pubsubPublishMessage(c->srv, c, ch, (size_t)chlen, msg, (size_t)mlen, 0);
}

void paramCreateCommand(client *c) {
    if (paramFind(c->srv->params, c->argv[1].ptr, c->argv[1].len)) {
        addReplyErrorFormat(c, "parameter table '%.128s' exists", c->argv[1].ptr);
        return;
    }
    uint64_t n = 0;
    int opt = -1, nesterov = 0, init = 0;
    uint32_t sync = 1;
    struct {
        const char *name;
        double v;
        int given;
    } hp[] = {{"lr", 0, 0},    {"momentum", 0, 0}, {"alpha", 0, 0},       {"beta1", 0, 0},
              {"beta2", 0, 0}, {"eps", 0, 0},      {"weight_decay", 0, 0}};
    for (int i = 2; i < c->argc; i++) {
        if (argEq(c, i, "nesterov")) {
            nesterov = 1;
            continue;
        }
        if (i + 1 >= c->argc) {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
        if (argEq(c, i, "size")) {
            if (argU64(c, i + 1, "SIZE", &n) != 0) return;
            if (n == 0 || n * sizeof(float) > c->srv->cfg.proto_max_bulk_len) {
                addReplyErrorFormat(c, "SIZE must be positive and its 4 x SIZE bytes at most "
                                       "proto-max-bulk-len");
                return;
            }
        } else if (argEq(c, i, "optimizer")) {
            opt = paramOptimizerParse(c->argv[i + 1].ptr, c->argv[i + 1].len);
            if (opt < 0) {
                addReplyErrorFormat(c,
                                    "unknown optimizer '%.64s' (sgd, momentum, rmsprop, adam, "
                                    "adamw, adagrad)",
                                    c->argv[i + 1].ptr);
                return;
            }
        } else if (argEq(c, i, "init")) {
            init = i + 1;
        } else if (argEq(c, i, "sync")) {
            long long k;
            if (!string2ll(c->argv[i + 1].ptr, c->argv[i + 1].len, &k) || k < 1 ||
                k > IR_PARAM_SYNC_MAX) {
                addReplyError(c, "SYNC must be an integer in 1..4096");
                return;
            }
            sync = (uint32_t)k;
        } else {
            size_t k = 0;
            while (k < sizeof(hp) / sizeof(hp[0]) && !argEq(c, i, hp[k].name)) k++;
            if (k == sizeof(hp) / sizeof(hp[0])) {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
            if (!string2d(c->argv[i + 1].ptr, c->argv[i + 1].len, &hp[k].v) || !isfinite(hp[k].v)) {
                addReplyErrorFormat(c, "%s is not a finite number", c->argv[i].ptr);
                return;
            }
            hp[k].given = 1;
        }
        i++;
    }
    if (!n || opt < 0) {
        addReplyError(c, "PARAM.CREATE needs SIZE <n> and OPTIMIZER <name>");
        return;
    }
    ir_param_opts o = paramOptsDefault((ir_optimizer)opt);
    double *dst[] = {&o.lr, &o.momentum, &o.alpha, &o.beta1, &o.beta2, &o.eps, &o.weight_decay};
    for (size_t k = 0; k < sizeof(hp) / sizeof(hp[0]); k++)
        if (hp[k].given) *dst[k] = hp[k].v;
    o.nesterov = nesterov;
    o.sync = sync;
    const char *why = paramOptsCheck(&o);
    if (why) {
        addReplyErrorFormat(c, "%s", why);
        return;
    }
    if (init && c->argv[init].len != n * sizeof(float)) {
        addReplyErrorFormat(c, "INIT of %zu bytes for SIZE %llu (%llu bytes)", c->argv[init].len,
                            (unsigned long long)n, (unsigned long long)(n * sizeof(float)));
        return;
    }
    uint64_t bytes = n * sizeof(float) * (1 + (uint64_t)paramStateArrays(&o) + (sync > 1));
    if (c->srv->cfg.maxmemory && serverUsedMemory(c->srv) + bytes > c->srv->cfg.maxmemory) {
        addReplyError(c, "-OOM " IR_OOM_MSG);
        return;
    }
    if (!paramCreate(c->srv->params, c->argv[1].ptr, c->argv[1].len, n, &o,
                     init ? c->argv[init].ptr : NULL)) {
        addReplyError(c, "out of memory creating the parameter table");
        return;
    }
    addReplyStr(c, shared.ok);
}

/* PUSH's options after the gradient (argv[3..]): reply the error and return
 * -1 when reply, else just -1 (a waiter's arguments, parsed again when its
 * round completes, passed before). */
typedef struct pushArgs {
    double scale;
    uint64_t base, maxstale, deadline;
    int has_base, has_stale, has_timeout;
} pushArgs;

static int parsePushArgs(client *c, pushArgs *a, int reply) {
    *a = (pushArgs){.scale = 1.0};
    for (int i = 3; i < c->argc; i += 2) {
        if (i + 1 >= c->argc) {
            if (reply) addReplyStr(c, shared.syntaxerr);
            return -1;
        }
        if (argEq(c, i, "scale")) {
            if (!string2d(c->argv[i + 1].ptr, c->argv[i + 1].len, &a->scale) ||
                !isfinite(a->scale) || !isfinite((float)a->scale)) {
                if (reply) addReplyError(c, "SCALE is not a finite float32 number");
                return -1;
            }
        } else if (argEq(c, i, "base")) {
            if (reply ? argU64(c, i + 1, "BASE", &a->base) != 0 : 0) return -1;
            a->has_base = 1;
        } else if (argEq(c, i, "maxstale")) {
            if (reply ? argU64(c, i + 1, "MAXSTALE", &a->maxstale) != 0 : 0) return -1;
            a->has_stale = 1;
        } else if (argEq(c, i, "timeout")) {
            if (reply && getBlockingTimeoutFromArg(c, i + 1, &a->deadline) != 0) return -1;
            a->has_timeout = 1;
        } else {
            if (reply) addReplyStr(c, shared.syntaxerr);
            return -1;
        }
    }
    return 0;
}

/* ---- SYNC rounds -------------------------------------------------------------
 * A SYNC k table applies one step per k pushes: the mean of their gradients
 * (summed in arrival order, then divided by k). The first k - 1 pushes of a
 * round wait as blocked clients (blocked.c, a WAIT-kind queue: every waiter
 * re-runs when the queue is ready) and keep their argv, which holds their
 * gradient: nothing is copied until the round's k-th push sums the waiters'
 * gradients and its own into the table's accumulator and steps. Every pusher
 * of the round then gets the new version (or the round's one error, when the
 * mean overflowed and nothing was applied).
 *
 * A waiter that leaves before its round completes - its TIMEOUT came, CLIENT
 * UNBLOCK, a disconnect - leaves the queue, and so the round: its gradient was
 * never added to anything, so the partial round stays exactly the pushes still
 * waiting. A timed-out pusher gets -SYNCTIMEOUT (push it again to take part in
 * a later round); a dropped table answers its waiters -NOTABLE. */
typedef struct paramWaits {
    bqueue q;        /* the round's waiting pushers, in arrival order */
    uint32_t served; /* waiters at the queue's head whose round completed */
    int served_ok;   /* that round stepped (else its mean was not finite) */
    uint64_t served_version, served_bad;
} paramWaits;

static void paramGoneHook(ir_param *p) {
    paramWaits *w = p->host;
    if (w->q.n && g_server) {
        char what[16 + 512];
        snprintf(what, sizeof(what), "parameter table '%.128s'", p->name);
        blockedQueueGone(g_server, &w->q, what);
    }
    free(w);
    p->host = NULL;
}

static paramWaits *waitsOf(client *c, ir_param *p) {
    if (!p->host) {
        paramWaits *w = calloc(1, sizeof(*w));
        if (!w) return NULL;
        w->q.kind = BLOCKED_WAIT;
        w->q.owner = p;
        p->host = w;
        c->srv->params->host_gone = paramGoneHook;
    }
    return p->host;
}

static uint32_t syncPending(const ir_param *p) {
    const paramWaits *w = p->host;
    return w ? (uint32_t)(w->q.n - w->served) : 0;
}

static void replyRoundFailed(client *c, const ir_param *p, uint64_t bad) {
    addReplyErrorFormat(c,
                        "the mean of SYNC round's %u gradients for '%.128s' has element %llu "
                        "not finite (the sum overflowed float32): nothing applied",
                        p->o.sync, p->name, (unsigned long long)bad);
}

/* A waiting pusher re-run: its round completed (reply as the k-th push did),
 * or its deadline came (withdrawn: -SYNCTIMEOUT), or it waits on. */
static void syncRerun(client *c, ir_param *p) {
    paramWaits *w = p->host;
    if (w->served) {
        w->served--;
        if (w->served_ok) addReplyLongLong(c, (long long)w->served_version);
        else replyRoundFailed(c, p, w->served_bad);
        return;
    }
    if (!blockingAllowed(c)) {
        replyReplayError(c, IR_ERR_SYNCTIMEOUT,
                         "SYNC round of '%.128s' had %u of its %u pushes at the deadline: "
                         "this gradient was withdrawn, nothing of it applied",
                         p->name, syncPending(p), p->o.sync);
        return;
    }
    blockForWait(c, &w->q, 0); /* keeps its place and its deadline */
}

/* The k-th push of a round: sum the waiters' gradients (in arrival order) and
 * c's, step with their mean, and serve the waiters. */
static void syncComplete(client *c, ir_param *p, float scale) {
    paramWaits *w = p->host;
    int first = 1;
    uint32_t skip = w->served;
    for (bwait *x = w->q.head; x; x = x->next) {
        if (skip) {
            skip--;
            continue;
        }
        pushArgs a;
        parsePushArgs(x->c, &a, 0);
        paramAccumulate(p, x->c->argv[2].ptr, (float)a.scale, first);
        first = 0;
    }
    paramAccumulate(p, c->argv[2].ptr, scale, first);
    uint64_t bad = 0;
    int ok = paramSyncStep(p, p->o.sync, &bad);
    w->served = (uint32_t)(w->q.n - w->served);
    w->served_ok = ok;
    w->served_version = p->version;
    w->served_bad = bad;
    if (ok) {
        publishVersion(c, p);
        addReplyLongLong(c, (long long)p->version);
    } else {
        replyRoundFailed(c, p, bad);
    }
    blockedQueueReady(c->srv, &w->q);
}

void paramPushCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p) return;
    if ((c->flags & CLIENT_BLOCKED) && p->host) {
        syncRerun(c, p);
        return;
    }
    pushArgs a;
    if (parsePushArgs(c, &a, 1) != 0) return;
    if (a.has_stale && !a.has_base) {
        addReplyError(c,
                      "MAXSTALE needs BASE <version> (the version the gradient was computed at)");
        return;
    }
    if (a.has_base && a.base > p->version) {
        addReplyErrorFormat(c, "BASE %llu is newer than parameter table '%.128s' (version %llu)",
                            (unsigned long long)a.base, p->name, (unsigned long long)p->version);
        return;
    }
    if (a.has_stale && p->version - a.base > a.maxstale) {
        replyReplayError(c, IR_ERR_STALE,
                         "gradient computed at version %llu, %llu versions behind "
                         "'%.128s' (version %llu), MAXSTALE is %llu: not applied",
                         (unsigned long long)a.base, (unsigned long long)(p->version - a.base),
                         p->name, (unsigned long long)p->version, (unsigned long long)a.maxstale);
        return;
    }
    if (!blobLenOk(c, p, 2, "a gradient")) return;
    uint64_t bad = 0;
    if (!paramGradFinite(c->argv[2].ptr, p->n, (float)a.scale, &bad)) {
        addReplyErrorFormat(c,
                            "gradient element %llu is not finite (NaN or Inf%s): nothing applied",
                            (unsigned long long)bad, a.scale != 1.0 ? " once scaled" : "");
        return;
    }
    if (p->o.sync <= 1) {
        paramStep(p, c->argv[2].ptr, (float)a.scale);
        publishVersion(c, p);
        addReplyLongLong(c, (long long)p->version);
        return;
    }
    if (!waitsOf(c, p)) {
        addReplyError(c, "out of memory waiting for the SYNC round");
        return;
    }
    if (syncPending(p) + 1 < p->o.sync) {
        if (!blockingAllowed(c)) {
            addReplyErrorFormat(c,
                                "a SYNC push to '%.128s' waits for its round's other pushes, "
                                "which it cannot inside MULTI or a script: not added",
                                p->name);
            return;
        }
        blockForWait(c, &((paramWaits *)p->host)->q, a.deadline);
        return;
    }
    syncComplete(c, p, (float)a.scale);
}

void paramPullCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p) return;
    uint64_t since = 0;
    int ifnewer = 0;
    if (c->argc == 4 && argEq(c, 2, "ifnewer")) {
        if (argU64(c, 3, "IFNEWER", &since) != 0) return;
        ifnewer = 1;
    } else if (c->argc != 2) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    addReplyArrayLen(c, 2);
    addReplyLongLong(c, (long long)p->version);
    if (ifnewer && p->version <= since) addReplyNull(c);
    else addReplyBulkPinned(c, p->w, p->n * sizeof(float), &p->pin);
}

void paramSetCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p || !blobLenOk(c, p, 2, "parameters")) return;
    paramSet(p, c->argv[2].ptr);
    publishVersion(c, p);
    addReplyLongLong(c, (long long)p->version);
}

void paramInfoCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p) return;
    const ir_param_opts *o = &p->o;
    addReplyMapLen(c, 17);
    addReplyBulkCString(c, "name");
    addReplyBulk(c, p->name, p->namelen);
    addReplyBulkCString(c, "size");
    addReplyLongLong(c, (long long)p->n);
    addReplyBulkCString(c, "optimizer");
    addReplyBulkCString(c, paramOptimizerName(o->opt));
    const char *hn[] = {"lr", "momentum", "alpha", "beta1", "beta2", "eps", "weight_decay"};
    const double hv[] = {o->lr, o->momentum, o->alpha, o->beta1, o->beta2, o->eps, o->weight_decay};
    for (int k = 0; k < 7; k++) {
        addReplyBulkCString(c, hn[k]);
        addReplyDouble(c, hv[k]);
    }
    addReplyBulkCString(c, "nesterov");
    addReplyLongLong(c, o->nesterov);
    addReplyBulkCString(c, "sync");
    addReplyLongLong(c, o->sync);
    addReplyBulkCString(c, "sync_pending");
    addReplyLongLong(c, syncPending(p));
    addReplyBulkCString(c, "step");
    addReplyLongLong(c, (long long)p->step);
    addReplyBulkCString(c, "version");
    addReplyLongLong(c, (long long)p->version);
    addReplyBulkCString(c, "bytes");
    addReplyLongLong(c, (long long)paramBytes(p));
    addReplyBulkCString(c, "channel");
    char ch[16 + 512];
    int chlen = snprintf(ch, sizeof(ch), "__param__:%.*s",
                         (int)(p->namelen > 500 ? 500 : p->namelen), p->name);
    addReplyBulk(c, ch, (size_t)chlen);
}

void paramDropCommand(client *c) {
    if (paramDrop(c->srv->params, c->argv[1].ptr, c->argv[1].len) != 0) {
        replyReplayError(c, IR_ERR_NOTABLE, "no such parameter table '%.128s'", c->argv[1].ptr);
        return;
    }
    addReplyStr(c, shared.ok);
}
