/* t_param.c - PARAM.* commands: parameter tables (replay/param.h), the one
 * implementation for either host (param_host.h: the native server, or the
 * Redis module in module/, compiled a second time). Workers push gradients, the table applies one optimizer step
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
 * PULL sends the parameters by reference (pin.h) where the host can (the
 * native server): a later step or SET first copies what unsent replies still
 * read (pinOverwrite).
 */
#include "t_param.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "param.h"
#include "replay_err.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the PARAM.* wire format is little-endian float32; add byte swapping for this host"
#endif

static ir_param *lookupParamOrReply(client *c) {
    ir_param *p = paramFind(hostParams(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len);
    if (!p)
        replyReplayError(c, IR_ERR_NOTABLE, "no such parameter table '%.128s'", hostArg(c, 1)->ptr);
    return p;
}

static int argU64(client *c, int i, const char *what, uint64_t *out) {
    long long ll;
    if (!string2ll(hostArg(c, i)->ptr, hostArg(c, i)->len, &ll) || ll < 0) {
        hostReplyErrorFormat(c, "%s must be a non-negative integer", what);
        return -1;
    }
    *out = (uint64_t)ll;
    return 0;
}

static int blobLenOk(client *c, const ir_param *p, int i, const char *what) {
    if (hostArg(c, i)->len == p->n * sizeof(float)) return 1;
    hostReplyErrorFormat(c,
                         "%s of %zu bytes for parameter table '%.128s' of %llu float32 (%llu "
                         "bytes): nothing applied",
                         what, hostArg(c, i)->len, p->name, (unsigned long long)p->n,
                         (unsigned long long)(p->n * sizeof(float)));
    return 0;
}

static void publishVersion(client *c, const ir_param *p) {
    char ch[16 + 512], msg[24];
    if (p->namelen > 500) return; /* no channel name that long */
    int chlen = snprintf(ch, sizeof(ch), "__param__:%.*s", (int)p->namelen, p->name);
    int mlen = snprintf(msg, sizeof(msg), "%llu", (unsigned long long)p->version);
    hostParamPublish(c, ch, (size_t)chlen, msg, (size_t)mlen);
}

void paramCreateCommand(client *c) {
    if (paramFind(hostParams(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len)) {
        hostReplyErrorFormat(c, "parameter table '%.128s' exists", hostArg(c, 1)->ptr);
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
    for (int i = 2; i < hostArgc(c); i++) {
        if (hostArgEq(c, i, "nesterov")) {
            nesterov = 1;
            continue;
        }
        if (i + 1 >= hostArgc(c)) {
            hostReplySyntaxError(c);
            return;
        }
        if (hostArgEq(c, i, "size")) {
            if (argU64(c, i + 1, "SIZE", &n) != 0) return;
            if (n == 0 || n * sizeof(float) > hostProtoMaxBulkLen(c)) {
                hostReplyErrorFormat(c, "SIZE must be positive and its 4 x SIZE bytes at most "
                                        "proto-max-bulk-len");
                return;
            }
        } else if (hostArgEq(c, i, "optimizer")) {
            opt = paramOptimizerParse(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len);
            if (opt < 0) {
                hostReplyErrorFormat(c,
                                     "unknown optimizer '%.64s' (sgd, momentum, rmsprop, adam, "
                                     "adamw, adagrad)",
                                     hostArg(c, i + 1)->ptr);
                return;
            }
        } else if (hostArgEq(c, i, "init")) {
            init = i + 1;
        } else if (hostArgEq(c, i, "sync")) {
            long long k;
            if (!string2ll(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &k) || k < 1 ||
                k > IR_PARAM_SYNC_MAX) {
                hostReplyError(c, "SYNC must be an integer in 1..4096");
                return;
            }
            sync = (uint32_t)k;
        } else {
            size_t k = 0;
            while (k < sizeof(hp) / sizeof(hp[0]) && !hostArgEq(c, i, hp[k].name)) k++;
            if (k == sizeof(hp) / sizeof(hp[0])) {
                hostReplySyntaxError(c);
                return;
            }
            if (!string2d(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &hp[k].v) ||
                !isfinite(hp[k].v)) {
                hostReplyErrorFormat(c, "%s is not a finite number", hostArg(c, i)->ptr);
                return;
            }
            hp[k].given = 1;
        }
        i++;
    }
    if (!n || opt < 0) {
        hostReplyError(c, "PARAM.CREATE needs SIZE <n> and OPTIMIZER <name>");
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
        hostReplyErrorFormat(c, "%s", why);
        return;
    }
    if (init && hostArg(c, init)->len != n * sizeof(float)) {
        hostReplyErrorFormat(c, "INIT of %zu bytes for SIZE %llu (%llu bytes)",
                             hostArg(c, init)->len, (unsigned long long)n,
                             (unsigned long long)(n * sizeof(float)));
        return;
    }
    uint64_t bytes = n * sizeof(float) * (1 + (uint64_t)paramStateArrays(&o) + (sync > 1));
    if (hostMaxmemory(c) && hostUsedMemory(c) + bytes > hostMaxmemory(c)) {
        hostOomRejected(c);
        hostReplyError(c, "-OOM " IR_OOM_MSG);
        return;
    }
    if (!paramCreate(hostParams(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len, n, &o,
                     init ? hostArg(c, init)->ptr : NULL)) {
        hostReplyError(c, "out of memory creating the parameter table");
        return;
    }
    hostReplyOk(c);
}

/* PUSH's options after the gradient (argv[3..]); -1: refused (replied). */
typedef struct pushArgs {
    double scale;
    uint64_t base, maxstale, deadline;
    int has_base, has_stale, has_timeout;
} pushArgs;

static int parsePushArgs(client *c, pushArgs *a) {
    *a = (pushArgs){.scale = 1.0};
    for (int i = 3; i < hostArgc(c); i += 2) {
        if (i + 1 >= hostArgc(c)) {
            hostReplySyntaxError(c);
            return -1;
        }
        if (hostArgEq(c, i, "scale")) {
            if (!string2d(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &a->scale) ||
                !isfinite(a->scale) || !isfinite((float)a->scale)) {
                hostReplyError(c, "SCALE is not a finite float32 number");
                return -1;
            }
        } else if (hostArgEq(c, i, "base")) {
            if (argU64(c, i + 1, "BASE", &a->base) != 0) return -1;
            a->has_base = 1;
        } else if (hostArgEq(c, i, "maxstale")) {
            if (argU64(c, i + 1, "MAXSTALE", &a->maxstale) != 0) return -1;
            a->has_stale = 1;
        } else if (hostArgEq(c, i, "timeout")) {
            if (hostBlockingTimeout(c, i + 1, &a->deadline) != 0) return -1;
            a->has_timeout = 1;
        } else {
            hostReplySyntaxError(c);
            return -1;
        }
    }
    return 0;
}

/* ---- SYNC rounds -------------------------------------------------------------
 * A SYNC k table applies one step per k pushes: the mean of their gradients
 * (summed in arrival order, then divided by k). The first k - 1 pushes of a
 * round wait as the host's blocked clients (param_host.h) and keep their
 * request, which holds their gradient: nothing is copied until the round's
 * k-th push sums the waiters' gradients and its own into the table's
 * accumulator and steps. Every pusher
 * of the round then gets the new version (or the round's one error, when the
 * mean overflowed and nothing was applied).
 *
 * A waiter that leaves before its round completes - its TIMEOUT came, CLIENT
 * UNBLOCK, a disconnect - leaves the waiters, and so the round: its gradient was
 * never added to anything, so the partial round stays exactly the pushes still
 * waiting. A timed-out pusher gets -SYNCTIMEOUT (push it again to take part in
 * a later round); a dropped table answers its waiters -NOTABLE. */
void paramRoundErrorText(char *buf, size_t cap, const ir_param *p, uint64_t bad) {
    snprintf(buf, cap,
             "the mean of the SYNC round's %u gradients for '%.128s' has element %llu not "
             "finite (the sum overflowed float32): nothing applied",
             p->o.sync, p->name, (unsigned long long)bad);
}

void paramSyncTimeoutText(char *buf, size_t cap, const ir_param *p, uint32_t pending) {
    snprintf(buf, cap,
             "SYNC round of '%.128s' had %u of its %u pushes at the deadline: this gradient "
             "was withdrawn, nothing of it applied",
             p->name, pending, p->o.sync);
}

void paramReplyRound(client *c, const ir_param *p, const ir_param_round *r) {
    if (r->ok) {
        hostReplyLongLong(c, (long long)r->version);
        return;
    }
    char buf[400];
    paramRoundErrorText(buf, sizeof(buf), p, r->bad);
    hostReplyError(c, buf);
}

typedef struct roundSum {
    ir_param *p;
    int first;
} roundSum;

static void addWaiter(void *ctx, int argc, const ir_arg *argv) {
    roundSum *rs = ctx;
    double scale = 1.0;
    for (int i = 3; i + 1 < argc; i += 2)
        if (argv[i].len == 5 && strncasecmp(argv[i].ptr, "scale", 5) == 0)
            string2d(argv[i + 1].ptr, argv[i + 1].len, &scale); /* checked when it was pushed */
    paramAccumulate(rs->p, argv[2].ptr, (float)scale, rs->first);
    rs->first = 0;
}

/* The k-th push of a round: sum the waiters' gradients (in arrival order) and
 * c's, step with their mean, and serve the waiters. */
static void syncComplete(client *c, ir_param *p, float scale) {
    roundSum rs = {p, 1};
    hostParamEachWaiter(p, addWaiter, &rs);
    paramAccumulate(p, hostArg(c, 2)->ptr, scale, rs.first);
    ir_param_round r = {0, 0, 0};
    r.ok = paramSyncStep(p, p->o.sync, &r.bad);
    r.version = p->version;
    if (r.ok) publishVersion(c, p);
    paramReplyRound(c, p, &r);
    hostParamRoundDone(c, p, &r);
}

void paramPushCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p) return;
    if (hostParamRerun(c, p)) return; /* a waiting pusher re-run by its host */
    pushArgs a;
    if (parsePushArgs(c, &a) != 0) return;
    if (a.has_stale && !a.has_base) {
        hostReplyError(c,
                       "MAXSTALE needs BASE <version> (the version the gradient was computed at)");
        return;
    }
    if (a.has_base && a.base > p->version) {
        hostReplyErrorFormat(c, "BASE %llu is newer than parameter table '%.128s' (version %llu)",
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
    if (!paramGradFinite(hostArg(c, 2)->ptr, p->n, (float)a.scale, &bad)) {
        hostReplyErrorFormat(c,
                             "gradient element %llu is not finite (NaN or Inf%s): nothing applied",
                             (unsigned long long)bad, a.scale != 1.0 ? " once scaled" : "");
        return;
    }
    if (p->o.sync <= 1) {
        paramStep(p, hostArg(c, 2)->ptr, (float)a.scale);
        publishVersion(c, p);
        hostReplyLongLong(c, (long long)p->version);
        return;
    }
    if (hostParamPending(p) + 1 < p->o.sync) {
        if (!hostBlockingAllowed(c)) {
            hostReplyErrorFormat(c,
                                 "a SYNC push to '%.128s' waits for its round's other pushes, "
                                 "which it cannot inside MULTI or a script: not added",
                                 p->name);
            return;
        }
        hostParamWait(c, p, a.deadline);
        return;
    }
    syncComplete(c, p, (float)a.scale);
}

void paramPullCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p) return;
    uint64_t since = 0;
    int ifnewer = 0;
    if (hostArgc(c) == 4 && hostArgEq(c, 2, "ifnewer")) {
        if (argU64(c, 3, "IFNEWER", &since) != 0) return;
        ifnewer = 1;
    } else if (hostArgc(c) != 2) {
        hostReplySyntaxError(c);
        return;
    }
    hostReplyArrayLen(c, 2);
    hostReplyLongLong(c, (long long)p->version);
    if (ifnewer && p->version <= since) hostReplyNull(c);
    else hostReplyBulkPinned(c, p->w, p->n * sizeof(float), &p->pin);
}

void paramSetCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p || !blobLenOk(c, p, 2, "parameters")) return;
    paramSet(p, hostArg(c, 2)->ptr);
    publishVersion(c, p);
    hostReplyLongLong(c, (long long)p->version);
}

void paramInfoCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p) return;
    const ir_param_opts *o = &p->o;
    hostReplyMapLen(c, 17);
    hostReplyCString(c, "name");
    hostReplyBulk(c, p->name, p->namelen);
    hostReplyCString(c, "size");
    hostReplyLongLong(c, (long long)p->n);
    hostReplyCString(c, "optimizer");
    hostReplyCString(c, paramOptimizerName(o->opt));
    const char *hn[] = {"lr", "momentum", "alpha", "beta1", "beta2", "eps", "weight_decay"};
    const double hv[] = {o->lr, o->momentum, o->alpha, o->beta1, o->beta2, o->eps, o->weight_decay};
    for (int k = 0; k < 7; k++) {
        hostReplyCString(c, hn[k]);
        hostReplyDouble(c, hv[k]);
    }
    hostReplyCString(c, "nesterov");
    hostReplyLongLong(c, o->nesterov);
    hostReplyCString(c, "sync");
    hostReplyLongLong(c, o->sync);
    hostReplyCString(c, "sync_pending");
    hostReplyLongLong(c, hostParamPending(p));
    hostReplyCString(c, "step");
    hostReplyLongLong(c, (long long)p->step);
    hostReplyCString(c, "version");
    hostReplyLongLong(c, (long long)p->version);
    hostReplyCString(c, "bytes");
    hostReplyLongLong(c, (long long)paramBytes(p));
    hostReplyCString(c, "channel");
    char ch[16 + 512];
    int chlen = snprintf(ch, sizeof(ch), "__param__:%.*s",
                         (int)(p->namelen > 500 ? 500 : p->namelen), p->name);
    hostReplyBulk(c, ch, (size_t)chlen);
}

void paramDropCommand(client *c) {
    if (paramDrop(hostParams(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len) != 0) {
        replyReplayError(c, IR_ERR_NOTABLE, "no such parameter table '%.128s'", hostArg(c, 1)->ptr);
        return;
    }
    hostReplyOk(c);
}
