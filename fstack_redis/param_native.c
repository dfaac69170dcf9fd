/* param_native.c - the native server as the PARAM.* handlers' host
 * (param_host.h): its parameter tables, pub/sub, and SYNC rounds' waiting
 * pushers as blocked clients (blocked.c).
 *
 * A table's waiters are one WAIT-kind queue (every waiter re-runs when the
 * queue is ready), kept in the table's host state, made by its first waiter.
 * When a round completes its waiters are at the queue's head: `served` counts
 * them and the queue is made ready; each re-runs PARAM.PUSH, which comes to
 * hostParamRerun and answers the round's result. A waiter re-run otherwise
 * (its deadline, CLIENT UNBLOCK) answers -SYNCTIMEOUT and leaves the queue;
 * a disconnect unqueues it (blockedClientFree). A table that goes answers its
 * waiters -NOTABLE (the engine's host_gone hook). Served waiters re-run right
 * after the command that completed their round, before any other input. */
#include <stdio.h>
#include <stdlib.h>

#include "blocked.h"
#include "param_host.h"
#include "pubsub.h"
#include "server.h"

typedef struct paramWaits {
    bqueue q;        /* the waiting pushers, in arrival order */
    uint32_t served; /* waiters at the queue's head whose round completed */
    ir_param_round r;
} paramWaits;

ir_params *hostParams(client *c) { return c->srv->params; }

void hostParamPublish(client *c, const char *ch, size_t chlen, const char *msg, size_t mlen) {
    pubsubPublishMessage(c->srv, c, ch, chlen, msg, mlen, 0);
}

void hostReplyNull(client *c) { addReplyNull(c); }

static void paramGone(ir_param *p) {
    paramWaits *w = p->host;
    if (w->q.n && g_server) {
        char what[32 + 128];
        snprintf(what, sizeof(what), "parameter table '%.128s'", p->name);
        blockedQueueGone(g_server, &w->q, what);
    }
    free(w);
    p->host = NULL;
}

uint32_t hostParamPending(const ir_param *p) {
    const paramWaits *w = p->host;
    return w ? (uint32_t)(w->q.n - w->served) : 0;
}

int hostParamWait(client *c, ir_param *p, uint64_t deadline) {
    if (!p->host) {
        paramWaits *w = calloc(1, sizeof(*w));
        if (!w) {
            addReplyError(c, "out of memory waiting for the SYNC round");
            return -1;
        }
        w->q.kind = BLOCKED_WAIT;
        w->q.owner = p;
        p->host = w;
        c->srv->params->host_gone = paramGone;
    }
    blockForWait(c, &((paramWaits *)p->host)->q, deadline);
    return 0;
}

void hostParamEachWaiter(ir_param *p, ir_param_waiter_fn fn, void *ctx) {
    paramWaits *w = p->host;
    if (!w) return;
    uint32_t skip = w->served;
    for (bwait *x = w->q.head; x; x = x->next) {
        if (skip) {
            skip--;
            continue;
        }
        fn(ctx, x->c->argc, x->c->argv);
    }
}

void hostParamRoundDone(client *c, ir_param *p, const ir_param_round *r) {
    paramWaits *w = p->host;
    if (!w) return;
    w->served = (uint32_t)w->q.n;
    w->r = *r;
    blockedQueueReady(c->srv, &w->q);
}

int hostParamRerun(client *c, ir_param *p) {
    paramWaits *w = p->host;
    if (!(c->flags & CLIENT_BLOCKED) || !w) return 0;
    if (w->served) {
        w->served--;
        paramReplyRound(c, p, &w->r);
    } else if (!blockingAllowed(c)) { /* its deadline, or CLIENT UNBLOCK */
        char buf[400];
        paramSyncTimeoutText(buf, sizeof(buf), p, hostParamPending(p));
        replyReplayError(c, IR_ERR_SYNCTIMEOUT, "%s", buf);
    } else {
        blockForWait(c, &w->q, 0); /* not its round yet: it keeps its place and deadline */
    }
    return 1;
}
