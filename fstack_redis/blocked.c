/* blocked.c - clients that wait, as Redis's blocked.c: BLPOP and the other
 * blocking list commands, and REPLAY.SAMPLE/ADD/ITEM held by a table's rate
 * limiter (t_replay.c's replayLimiterGate).
 *
 * A command that cannot run yet calls blockForKeys or blockForTable: the
 * client gets CLIENT_BLOCKED, keeps its argv, and its reply is deferred; its
 * further input stays unparsed in the query buffer (resp.c). It waits in
 * arrival order in one queue per thing it waits on (a key of a database, or
 * one of a table's two queues: samplers and inserters).
 *
 * Serving re-runs the command (as Redis 7.2 re-processes it): when a key
 * gains elements (signalKeyAsReady) or a table's limiter state changes, the
 * queue is marked ready, and after the command that did it the head's
 * command runs again. If it can now run it replies and the client is
 * unblocked; if it would block again it keeps its place, and serving that
 * queue stops there (later waiters are not served ahead of it). So one LPUSH
 * of three elements serves three waiters in arrival order, and a BLMOVE that
 * pushes makes its destination ready in turn.
 *
 * The other ways out: the deadline (lists answer a null array, as Redis; a
 * limiter wait re-runs with blocking denied, so it runs if it now may, else
 * answers the -RATELIMITED error naming the limit that held it), a
 * disconnect (freed and counted), the table going (REPLAY.DROP, FLUSHALL: an
 * error), and shutdown (an error, written before exit). An unblocked client
 * then resumes its pipelined input.
 *
 * Nothing allocates per request once a client has blocked once: a client's
 * queue places are kept with it; only a key's first waiter allocates the key,
 * and a table's first waiter the table's two queues (tableQueues below).
 */
#include "blocked.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "db_internal.h"
#include "replay.h"
#include "replay_err.h"
#include "slowlog.h"

typedef struct bkey {
    struct bkey *hnext;
    struct ir_db *db;
    uint64_t h;
    int serving; /* its queue is being served: not freed under us */
    bqueue q;
    size_t len;
    char key[];
} bkey;

typedef struct blockState {
    int kind;              /* BLOCKED_* */
    const ir_command *cmd; /* re-run when served */
    uint64_t deadline;     /* absolute ms, 0 = forever */
    uint64_t since_us;
    int deny;  /* being re-run with blocking denied (deadline) */
    int again; /* the re-run asked to block again */
    bwait *w;  /* its places in queues */
    int nw, wcap;
    struct ir_table *table;
    client *prev, *next; /* every blocked client */
    client *unext;       /* unblocked, input to resume */
    int resume;
} blockState;

typedef struct ir_blocked {
    bkey **buckets;
    size_t nbuckets;
    bqueue *ready_head, *ready_tail;
    client *all;
    client *resume_head, *resume_tail;
    uint64_t next_deadline; /* at most the nearest deadline; 0 = none */
    int handling;
    ir_blocked_stats st;
} ir_blocked;

static void oom(void) {
    serverLog("out of memory blocking a client");
    abort();
}

/* ---- tables: the server's host state in the replay engine ------------------
 * The engine (replay/) knows nothing of clients: a table's two queues live in
 * its opaque host state (ir_table.host), made by the first client that waits
 * on the table. When the table goes the engine calls the hook below, which
 * answers the waiters (blockedTableGone) and frees the queues. */
typedef struct tableQueues {
    bqueue q[2]; /* 0: samplers, 1: inserters */
} tableQueues;

static void tableGoneHook(struct ir_table *t) {
    tableQueues *tq = tableHost(t);
    if ((tq->q[0].n || tq->q[1].n || tq->q[0].ready || tq->q[1].ready) && g_server)
        blockedTableGone(g_server, t);
    free(tq);
    tableSetHost(t, NULL);
}

static const ir_engine_host engineHost = {.table_gone = tableGoneHook};

/* t's queue `which`, made (with the hook set) when create and not there yet;
 * NULL when nobody ever waited on t and !create. */
static bqueue *tableQueue(struct ir_table *t, int which, int create) {
    if (!tableHost(t)) {
        if (!create) return NULL;
        tableQueues *tq = calloc(1, sizeof(*tq));
        if (!tq) oom();
        for (int i = 0; i < 2; i++) {
            tq->q[i].owner = t;
            tq->q[i].kind = BLOCKED_REPLAY;
        }
        engineSetHost(&engineHost);
        tableSetHost(t, tq);
    }
    return &((tableQueues *)tableHost(t))->q[which];
}

size_t blockedTableWaiting(const struct ir_table *t, int which) {
    const tableQueues *tq = tableHost(t);
    return tq ? tq->q[which].n : 0;
}

static uint64_t monoUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static ir_blocked *blockedGet(ir_server *s) {
    if (!s->blocked) {
        s->blocked = calloc(1, sizeof(ir_blocked));
        if (!s->blocked) oom();
    }
    return s->blocked;
}

/* ---- keys ------------------------------------------------------------------- */

static uint64_t keyHash(const struct ir_db *db, const char *p, size_t len) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uintptr_t)db;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static bkey **keySlot(ir_blocked *b, const struct ir_db *db, const char *p, size_t len,
                      uint64_t h) {
    bkey **pp = &b->buckets[h & (b->nbuckets - 1)];
    while (*pp && !((*pp)->h == h && (*pp)->db == db && (*pp)->len == len &&
                    memcmp((*pp)->key, p, len) == 0))
        pp = &(*pp)->hnext;
    return pp;
}

static bkey *keyFind(ir_blocked *b, const struct ir_db *db, const char *p, size_t len) {
    if (!b->nbuckets || !b->st.blocked_keys) return NULL;
    return *keySlot(b, db, p, len, keyHash(db, p, len));
}

static void keysGrow(ir_blocked *b) {
    size_t n = b->nbuckets ? b->nbuckets * 2 : 16;
    bkey **nb = calloc(n, sizeof(*nb));
    if (!nb) oom();
    for (size_t i = 0; i < b->nbuckets; i++) {
        for (bkey *k = b->buckets[i], *next; k; k = next) {
            next = k->hnext;
            k->hnext = nb[k->h & (n - 1)];
            nb[k->h & (n - 1)] = k;
        }
    }
    free(b->buckets);
    b->buckets = nb;
    b->nbuckets = n;
}

static bkey *keyGet(ir_blocked *b, struct ir_db *db, const char *p, size_t len) {
    if (b->st.blocked_keys >= b->nbuckets) keysGrow(b);
    uint64_t h = keyHash(db, p, len);
    bkey **pp = keySlot(b, db, p, len, h);
    if (*pp) return *pp;
    bkey *k = calloc(1, sizeof(*k) + len + 1);
    if (!k) oom();
    k->db = db;
    k->h = h;
    k->len = len;
    memcpy(k->key, p, len);
    k->q.owner = k;
    k->q.kind = BLOCKED_LIST;
    *pp = k;
    b->st.blocked_keys++;
    return k;
}

/* A key whose queue emptied goes, unless it is queued as ready or being served. */
static void keyMaybeFree(ir_blocked *b, bkey *k) {
    if (k->q.n || k->q.ready || k->serving) return;
    bkey **pp = keySlot(b, k->db, k->key, k->len, k->h);
    *pp = k->hnext;
    b->st.blocked_keys--;
    free(k);
}

/* ---- queues ----------------------------------------------------------------- */

static void queueLink(bqueue *q, bwait *w) {
    w->q = q;
    w->next = NULL;
    w->prev = q->tail;
    if (q->tail) q->tail->next = w;
    else q->head = w;
    q->tail = w;
    q->n++;
}

static void queueUnlink(bwait *w) {
    bqueue *q = w->q;
    if (!q) return;
    if (w->prev) w->prev->next = w->next;
    else q->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else q->tail = w->prev;
    q->n--;
    w->q = NULL;
    w->prev = w->next = NULL;
}

void blockedTableReady(ir_server *s, struct ir_table *t, int which) {
    bqueue *q = tableQueue(t, which, 0);
    if (q) blockedQueueReady(s, q);
}

void blockedQueueReady(ir_server *s, bqueue *q) {
    if (!q->n || q->ready) return;
    ir_blocked *b = blockedGet(s);
    q->ready = 1;
    q->next_ready = NULL;
    if (b->ready_tail) b->ready_tail->next_ready = q;
    else b->ready_head = q;
    b->ready_tail = q;
}

static void readyRemove(ir_blocked *b, bqueue *q) {
    if (!q->ready) return;
    bqueue *prev = NULL;
    for (bqueue *x = b->ready_head; x; prev = x, x = x->next_ready) {
        if (x != q) continue;
        if (prev) prev->next_ready = x->next_ready;
        else b->ready_head = x->next_ready;
        if (b->ready_tail == x) b->ready_tail = prev;
        break;
    }
    q->ready = 0;
}

void blockedKeyReady(ir_server *s, struct ir_db *db, const char *key, size_t len) {
    if (!s || !s->blocked) return;
    bkey *k = keyFind(s->blocked, db, key, len);
    if (k) blockedQueueReady(s, &k->q);
}

void blockedDbReady(ir_server *s, struct ir_db *db) {
    ir_blocked *b = s ? s->blocked : NULL;
    if (!b || !b->st.blocked_keys) return;
    for (size_t i = 0; i < b->nbuckets; i++)
        for (bkey *k = b->buckets[i]; k; k = k->hnext)
            if (k->db == db) blockedQueueReady(s, &k->q);
}

/* ---- blocking and unblocking -------------------------------------------------- */

static blockState *stateFor(client *c, int nw) {
    blockState *bs = c->bstate;
    if (!bs) {
        bs = c->bstate = calloc(1, sizeof(*bs));
        if (!bs) oom();
    }
    if (nw > bs->wcap) {
        bwait *w = realloc(bs->w, (size_t)nw * sizeof(*w));
        if (!w) oom();
        bs->w = w;
        bs->wcap = nw;
    }
    return bs;
}

/* Common part: c is queued already; mark it blocked. */
static void blockCommon(client *c, blockState *bs, int kind, uint64_t timeout_ms) {
    ir_server *s = c->srv;
    ir_blocked *b = blockedGet(s);
    bs->kind = kind;
    bs->cmd = c->cmd;
    bs->deadline = timeout_ms;
    bs->since_us = monoUs();
    bs->deny = bs->again = 0;
    bs->prev = NULL;
    bs->next = b->all;
    if (b->all) b->all->bstate->prev = c;
    b->all = c;
    c->flags |= CLIENT_BLOCKED;
    b->st.blocked_clients++;
    b->st.total_blocked++;
    if (timeout_ms && (!b->next_deadline || timeout_ms < b->next_deadline))
        b->next_deadline = timeout_ms;
}

void blockForKeys(client *c, struct ir_db *db, int first, int n, int step, uint64_t timeout_ms) {
    if (c->flags & CLIENT_BLOCKED) {
        c->bstate->again = 1;
        return;
    }
    blockState *bs = stateFor(c, n);
    ir_blocked *b = blockedGet(c->srv);
    bs->nw = 0;
    bs->table = NULL;
    for (int i = 0; i < n; i++) {
        const ir_arg *a = &c->argv[first + i * step];
        bkey *k = keyGet(b, db, a->ptr, a->len);
        int dup = 0;
        for (int j = 0; j < bs->nw; j++) dup |= bs->w[j].q == &k->q;
        if (dup) continue; /* BLPOP k k 0 waits once on k */
        bwait *w = &bs->w[bs->nw++];
        w->c = c;
        queueLink(&k->q, w);
    }
    blockCommon(c, bs, BLOCKED_LIST, timeout_ms);
}

void blockForTable(client *c, struct ir_table *t, int which, uint64_t timeout_ms) {
    if (c->flags & CLIENT_BLOCKED) {
        c->bstate->again = 1;
        return;
    }
    blockState *bs = stateFor(c, 1);
    bs->nw = 1;
    bs->table = t;
    bs->w[0].c = c;
    queueLink(tableQueue(t, which, 1), &bs->w[0]);
    blockCommon(c, bs, BLOCKED_REPLAY, timeout_ms);
}

void blockForWait(client *c, bqueue *q, uint64_t timeout_ms) {
    if (c->flags & CLIENT_BLOCKED) {
        c->bstate->again = 1;
        return;
    }
    blockState *bs = stateFor(c, 1);
    bs->nw = 1;
    bs->table = NULL;
    bs->w[0].c = c;
    queueLink(q, &bs->w[0]);
    blockCommon(c, bs, BLOCKED_WAIT, timeout_ms);
}

int blockingAllowed(const client *c) {
    if (c->flags & (CLIENT_MULTI | CLIENT_SCRIPT)) return 0; /* as Redis's CLIENT_DENY_BLOCKING */
    return !(c->bstate && (c->flags & CLIENT_BLOCKED) && c->bstate->deny);
}

size_t blockedTableAhead(const client *c, const struct ir_table *t, int which) {
    if (c->flags & CLIENT_BLOCKED) return 0; /* re-run: it is the head */
    return blockedTableWaiting(t, which);
}

/* Take c out of every queue; it may run its further input (resume). */
static void unblock(ir_server *s, client *c, int resume) {
    ir_blocked *b = s->blocked;
    blockState *bs = c->bstate;
    for (int i = 0; i < bs->nw; i++) {
        bqueue *q = bs->w[i].q;
        queueUnlink(&bs->w[i]);
        if (q && q->kind == BLOCKED_LIST) keyMaybeFree(b, q->owner);
    }
    bs->nw = 0;
    if (bs->table) {
        limiterWaited(bs->table, monoUs() - bs->since_us);
        bs->table = NULL;
    }
    if (bs->prev) bs->prev->bstate->next = bs->next;
    else b->all = bs->next;
    if (bs->next) bs->next->bstate->prev = bs->prev;
    bs->prev = bs->next = NULL;
    bs->kind = BLOCKED_NONE;
    bs->deny = bs->again = 0;
    c->flags &= ~CLIENT_BLOCKED;
    b->st.blocked_clients--;
    if (resume && !bs->resume) {
        bs->resume = 1;
        bs->unext = NULL;
        if (b->resume_tail) b->resume_tail->bstate->unext = c;
        else b->resume_head = c;
        b->resume_tail = c;
    }
}

/* Run c's command again. 1 if it finished (c is unblocked), 0 if it waits on. */
static int rerun(ir_server *s, client *c, int deny) {
    blockState *bs = c->bstate;
    bs->again = 0;
    bs->deny = deny;
    c->cmd = bs->cmd;
    size_t before = c->olen;
    uint64_t t0 = monoUs();
    bs->cmd->proc(c);
    uint64_t usec = monoUs() - t0;
    c->cmd = NULL;
    if (c->olen > before && c->obuf[before] == '-') { /* INFO errorstats, as call() counts */
        errorStatsCount(s, c->obuf + before + 1, c->olen - before - 1);
        commandStatsUnblocked(c, bs->cmd, 1);
    }
    if (c->has_refs) clientFlush(c); /* as processCommand: references go now */
    if (bs->again && !deny) {
        bs->again = 0;
        return 0;
    }
    slowlogUnblocked(c, bs->cmd, usec); /* as Redis: logged when served, with its arguments */
    unblock(s, c, 1);
    resetClientArgs(c);
    return 1;
}

/* A key made ready is served only if it still holds a list when its turn comes:
 * LPUSH then DEL and SET in one transaction leaves a string, and the clients stay
 * blocked (Redis's rule), rather than being answered WRONGTYPE. */
static int stillAList(const bkey *k) {
    ir_db *db = (ir_db *)k->db;
    /* an expired key is deleted here (DEL to replicas), as Redis's lookup when
     * it serves blocked clients; its clients stay blocked */
    dbkey dk = dbKey(db, k->key, k->len);
    dbEntry *e = lookupKeyNoStats(db, &dk);
    return e && (e->type == OBJ_LIST || e->type == OBJ_ZSET || e->type == OBJ_STREAM) ? e->type
                                                                                      : -1;
}

/* The type c waits for: a sorted set (BZPOPMIN, BZPOPMAX, BZMPOP), a stream
 * (XREAD, XREADGROUP) or a list. */
static int waitsForType(const client *c) {
    const char *n = c->bstate->cmd->name;
    if (n[0] == 'x' || n[0] == 'X') return OBJ_STREAM;
    return (n[0] == 'b' || n[0] == 'B') && (n[1] == 'z' || n[1] == 'Z') ? OBJ_ZSET : OBJ_LIST;
}

static int waitsForGroup(const client *c) {
    return strcasecmp(c->bstate->cmd->name, "xreadgroup") == 0;
}

static void serveQueue(ir_server *s, bqueue *q) {
    bkey *k = q->kind == BLOCKED_LIST ? q->owner : NULL;
    int type = k ? stillAList(k) : -1;
    if (k && type != OBJ_STREAM) {
        /* the stream was deleted or overwritten: its XREADGROUP waiters get
         * Redis's -UNBLOCKED error (their command, re-run, answers it) */
        k->serving = 1;
        for (bwait *w = q->head, *nw; w; w = nw) {
            nw = w->next;
            if (waitsForGroup(w->c)) rerun(s, w->c, 0);
        }
        k->serving = 0;
        if (type < 0) {
            keyMaybeFree(s->blocked, k);
            return;
        }
    }
    if (q->kind == BLOCKED_WAIT) { /* WAIT: each waiter wants its own offset and count */
        for (bwait *w = q->head, *nw; w; w = nw) {
            nw = w->next;
            rerun(s, w->c, 0);
        }
        return;
    }
    if (k) k->serving = 1;
    while (q->head) {
        /* the head waits for the other type: it stays blocked (in its place) */
        if (k && waitsForType(q->head->c) != type) break;
        if (!rerun(s, q->head->c, 0)) break;
    }
    if (k) {
        k->serving = 0;
        keyMaybeFree(s->blocked, k);
    }
}

void blockedHandle(ir_server *s) {
    ir_blocked *b = s->blocked;
    if (!b || b->handling) return;
    b->handling = 1;
    for (;;) {
        if (b->ready_head) {
            bqueue *q = b->ready_head;
            b->ready_head = q->next_ready;
            if (!b->ready_head) b->ready_tail = NULL;
            q->ready = 0;
            serveQueue(s, q);
        } else if (b->resume_head) {
            client *c = b->resume_head;
            b->resume_head = c->bstate->unext;
            if (!b->resume_head) b->resume_tail = NULL;
            c->bstate->resume = 0;
            clientUnblocked(c); /* may free c */
        } else {
            break;
        }
    }
    b->handling = 0;
}

void blockedHandleTimeouts(ir_server *s) {
    ir_blocked *b = s->blocked;
    if (!b || !b->next_deadline) return;
    uint64_t now = ir_mstime();
    if (now < b->next_deadline) return;
    uint64_t next = 0;
    for (client *c = b->all, *nc; c; c = nc) {
        nc = c->bstate->next;
        uint64_t d = c->bstate->deadline;
        if (!d) continue;
        if (d <= now) {
            b->st.timeouts++;
            if (c->bstate->kind == BLOCKED_LIST) {
                /* as Redis: a null array, whatever the keys hold now (a key
                 * that became a string is not an error for the waiter) */
                addReplyNullArray(c);
                unblock(s, c, 1);
                resetClientArgs(c);
            } else {
                rerun(s, c, 1); /* the limiter's error names the limit that held it */
            }
        } else if (!next || d < next) {
            next = d;
        }
    }
    b->next_deadline = next;
    blockedHandle(s);
}

long blockedWaitBound(ir_server *s, long wait) {
    ir_blocked *b = s->blocked;
    if (!b || !b->next_deadline || wait == 0) return wait;
    uint64_t now = ir_mstime();
    if (now >= b->next_deadline) return 0;
    uint64_t until = (b->next_deadline - now) * 1000;
    return until < (uint64_t)wait ? (long)until : wait;
}

int blockedUnblock(ir_server *s, client *c, int error) {
    if (!(c->flags & CLIENT_BLOCKED) || !c->bstate) return 0;
    if (error) {
        addReplyError(c, "-UNBLOCKED client unblocked via CLIENT UNBLOCK");
        unblock(s, c, 1);
        resetClientArgs(c);
    } else if (c->bstate->kind == BLOCKED_LIST) {
        addReplyNullArray(c); /* as its timeout */
        unblock(s, c, 1);
        resetClientArgs(c);
    } else {
        rerun(s, c, 1); /* as its deadline: runs if it now may, else the limiter's error */
    }
    return 1;
}

void blockedTableGone(ir_server *s, struct ir_table *t) {
    ir_blocked *b = s->blocked;
    if (!b) return;
    for (int which = 0; which < 2; which++) {
        bqueue *q = tableQueue(t, which, 0);
        if (!q) return;
        readyRemove(b, q);
        while (q->head) {
            client *c = q->head->c;
            replyReplayError(c, IR_ERR_NOTABLE,
                             "table '%.128s' was dropped while the client waited", tableName(t));
            b->st.dropped++;
            unblock(s, c, 1);
            resetClientArgs(c);
        }
    }
}

void blockedQueueGone(ir_server *s, bqueue *q, const char *what) {
    ir_blocked *b = s->blocked;
    if (!b) return;
    readyRemove(b, q);
    while (q->head) {
        client *c = q->head->c;
        replyReplayError(c, IR_ERR_NOTABLE, "%s was dropped while the client waited", what);
        b->st.dropped++;
        unblock(s, c, 1);
        resetClientArgs(c);
    }
}

void blockedClientFree(client *c) {
    blockState *bs = c->bstate;
    if (!bs) return;
    ir_server *s = c->srv;
    ir_blocked *b = s->blocked;
    if (c->flags & CLIENT_BLOCKED) {
        b->st.disconnects++;
        unblock(s, c, 0);
    }
    if (bs->resume) {
        client *prev = NULL;
        for (client *x = b->resume_head; x; prev = x, x = x->bstate->unext) {
            if (x != c) continue;
            if (prev) prev->bstate->unext = bs->unext;
            else b->resume_head = bs->unext;
            if (b->resume_tail == c) b->resume_tail = prev;
            break;
        }
    }
    free(bs->w);
    free(bs);
    c->bstate = NULL;
}

void blockedShutdown(ir_server *s) {
    ir_blocked *b = s->blocked;
    if (!b) return;
    while (b->all) {
        client *c = b->all;
        addReplyError(c, "the server is shutting down");
        b->st.shutdown++;
        unblock(s, c, 0);
        resetClientArgs(c);
        clientFlush(c);
    }
}

void blockedStats(const ir_server *s, ir_blocked_stats *out) {
    if (s->blocked) *out = s->blocked->st;
    else memset(out, 0, sizeof(*out));
}

void blockedFree(ir_server *s) {
    ir_blocked *b = s->blocked;
    if (!b) return;
    for (size_t i = 0; i < b->nbuckets; i++) {
        for (bkey *k = b->buckets[i], *next; k; k = next) {
            next = k->hnext;
            free(k);
        }
    }
    free(b->buckets);
    free(b);
    s->blocked = NULL;
}

/* ---- arguments -------------------------------------------------------------- */

int getBlockingTimeoutFromArg(client *c, int i, uint64_t *deadline_ms) {
    const char *err =
        blockingTimeoutParse(c->argv[i].ptr, c->argv[i].len, ir_mstime(), deadline_ms);
    if (err) {
        addReplyError(c, err);
        return -1;
    }
    return 0;
}
