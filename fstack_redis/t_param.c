/* t_param.c - PARAM.* commands: parameter tables (replay/param.h) on the
 * native host. Workers push gradients, the table applies one optimizer step
 * per push (torch.optim's math in float32) and actors pull the parameters.
 *
 *   PARAM.CREATE <name> SIZE <n> OPTIMIZER sgd|momentum|rmsprop|adam|adamw|adagrad
 *       [LR x] [MOMENTUM x] [ALPHA x] [BETA1 x] [BETA2 x] [EPS x] [WEIGHT_DECAY x]
 *       [NESTEROV] [INIT <n float32>]                                  -> OK
 *   PARAM.PUSH <name> <n float32> [SCALE s] [BASE <version> [MAXSTALE k]]
 *                                                          -> the new version
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
#include <string.h>

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
    uint64_t bytes = n * sizeof(float) * (1 + (uint64_t)paramStateArrays(&o));
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

void paramPushCommand(client *c) {
    ir_param *p = lookupParamOrReply(c);
    if (!p) return;
    double scale = 1.0;
    uint64_t base = 0, maxstale = 0;
    int has_base = 0, has_stale = 0;
    for (int i = 3; i < c->argc; i += 2) {
        if (i + 1 >= c->argc) {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
        if (argEq(c, i, "scale")) {
            if (!string2d(c->argv[i + 1].ptr, c->argv[i + 1].len, &scale) || !isfinite(scale) ||
                !isfinite((float)scale)) {
                addReplyError(c, "SCALE is not a finite float32 number");
                return;
            }
        } else if (argEq(c, i, "base")) {
            if (argU64(c, i + 1, "BASE", &base) != 0) return;
            has_base = 1;
        } else if (argEq(c, i, "maxstale")) {
            if (argU64(c, i + 1, "MAXSTALE", &maxstale) != 0) return;
            has_stale = 1;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (has_stale && !has_base) {
        addReplyError(c,
                      "MAXSTALE needs BASE <version> (the version the gradient was computed at)");
        return;
    }
    if (has_base && base > p->version) {
        addReplyErrorFormat(c, "BASE %llu is newer than parameter table '%.128s' (version %llu)",
                            (unsigned long long)base, p->name, (unsigned long long)p->version);
        return;
    }
    if (has_stale && p->version - base > maxstale) {
        addReplyErrorFormat(c,
                            "stale gradient: computed at version %llu, %llu versions behind "
                            "'%.128s' (version %llu), MAXSTALE is %llu: not applied",
                            (unsigned long long)base, (unsigned long long)(p->version - base),
                            p->name, (unsigned long long)p->version, (unsigned long long)maxstale);
        return;
    }
    if (!blobLenOk(c, p, 2, "a gradient")) return;
    uint64_t bad = 0;
    if (!paramGradFinite(c->argv[2].ptr, p->n, (float)scale, &bad)) {
        addReplyErrorFormat(c,
                            "gradient element %llu is not finite (NaN or Inf%s): nothing applied",
                            (unsigned long long)bad, scale != 1.0 ? " once scaled" : "");
        return;
    }
    paramStep(p, c->argv[2].ptr, (float)scale);
    publishVersion(c, p);
    addReplyLongLong(c, (long long)p->version);
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
    addReplyMapLen(c, 15);
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
