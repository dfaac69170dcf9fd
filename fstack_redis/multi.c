/* multi.c - transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis 7.0).
 *
 * A client in MULTI has its commands queued (processCommand calls
 * multiQueue) and answered +QUEUED; a command refused while queueing
 * (unknown, wrong arity, NOAUTH, OOM) marks the transaction
 * CLIENT_DIRTY_EXEC and EXEC answers EXECABORT. EXEC runs the queue with
 * nothing in between, as one reply array.
 *
 * WATCH: the server keeps one index of watched keys over every database,
 * (db, key) -> the clients watching it. signalModifiedKey and
 * signalFlushedDb (notify.c) mark those clients CLIENT_DIRTY_CAS, and EXEC
 * of a dirty client answers a null array. While nobody watches, the index
 * does not exist and the hooks return at the first test. A key that expires
 * after WATCH (even if nobody has deleted it yet) also fails the EXEC, as
 * in Redis 7.0.
 *
 * Concurrency contract: server thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "commands.h"
#include "db_internal.h"
#include "multi.h"

/* One watched key of one database and the clients watching it. */
typedef struct wkey {
    struct wkey *next; /* bucket chain */
    struct ir_db *db;
    uint64_t h;
    client **cl;
    int ncl, capcl;
    size_t len;
    char key[];
} wkey;

struct ir_watchidx {
    wkey **b;
    size_t size, used; /* size: a power of two */
};

/* A queued command: its arguments are owned copies (owned = 1, so a
 * handler may take them over as it does big bulks). */
typedef struct mcmd {
    const ir_command *cmd;
    int argc;
    ir_arg *argv;
} mcmd;

/* A watched key as the client sees it. */
typedef struct cwatch {
    wkey *wk;
    int expired; /* already expired when WATCHed */
} cwatch;

struct multiState {
    mcmd *q;
    int n, cap;
    size_t bytes; /* memory of queued arguments (CLIENT LIST multi-mem) */
    cwatch *w;
    int nw, capw;
};

static struct multiState *mstateOf(client *c) {
    if (!c->mstate) {
        c->mstate = ir_xrealloc(NULL, sizeof(*c->mstate));
        memset(c->mstate, 0, sizeof(*c->mstate));
    }
    return c->mstate;
}

/* ---- the watched-keys index ---------------------------------------------- */

static uint64_t keyHash(const struct ir_db *db, const char *key, size_t len) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uintptr_t)db;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static wkey *widxFind(struct ir_watchidx *w, struct ir_db *db, const char *key, size_t len,
                      uint64_t h) {
    for (wkey *k = w->b[h & (w->size - 1)]; k; k = k->next)
        if (k->h == h && k->db == db && k->len == len && memcmp(k->key, key, len) == 0) return k;
    return NULL;
}

static void widxGrow(struct ir_watchidx *w) {
    size_t size = w->size * 2;
    wkey **b = calloc(size, sizeof(*b));
    if (!b) return; /* stay at this size: chains get longer, nothing breaks */
    for (size_t i = 0; i < w->size; i++) {
        for (wkey *k = w->b[i], *next; k; k = next) {
            next = k->next;
            k->next = b[k->h & (size - 1)];
            b[k->h & (size - 1)] = k;
        }
    }
    free(w->b);
    w->b = b;
    w->size = size;
}

static void widxRemove(ir_server *s, wkey *k) {
    struct ir_watchidx *w = s->watched;
    wkey **pp = &w->b[k->h & (w->size - 1)];
    while (*pp != k) pp = &(*pp)->next;
    *pp = k->next;
    free(k->cl);
    free(k);
    if (--w->used == 0) { /* nobody watches: the hooks cost nothing again */
        free(w->b);
        free(w);
        s->watched = NULL;
    }
}

static void watchKey(client *c, struct ir_db *db, const char *key, size_t len) {
    ir_server *s = c->srv;
    struct multiState *m = mstateOf(c);
    uint64_t h = keyHash(db, key, len);
    if (!s->watched) {
        s->watched = calloc(1, sizeof(*s->watched));
        if (!s->watched) abort();
        s->watched->size = 16;
        s->watched->b = calloc(16, sizeof(wkey *));
        if (!s->watched->b) abort();
    }
    struct ir_watchidx *w = s->watched;
    wkey *k = widxFind(w, db, key, len, h);
    if (k) {
        for (int i = 0; i < m->nw; i++)
            if (m->w[i].wk == k) return; /* already watched by c */
    } else {
        k = calloc(1, sizeof(*k) + len + 1);
        if (!k) abort();
        k->db = db;
        k->h = h;
        k->len = len;
        memcpy(k->key, key, len);
        k->next = w->b[h & (w->size - 1)];
        w->b[h & (w->size - 1)] = k;
        if (++w->used > w->size) widxGrow(w);
    }
    if (k->ncl == k->capcl) {
        k->capcl = k->capcl ? k->capcl * 2 : 2;
        k->cl = ir_xrealloc(k->cl, (size_t)k->capcl * sizeof(*k->cl));
    }
    k->cl[k->ncl++] = c;
    if (m->nw == m->capw) {
        m->capw = m->capw ? m->capw * 2 : 4;
        m->w = ir_xrealloc(m->w, (size_t)m->capw * sizeof(*m->w));
    }
    ir_db *d = (ir_db *)db;
    dbEntry *e = dictFind(&d->d, key, len, dictHashKey(&d->d, key, len));
    m->w[m->nw].wk = k;
    m->w[m->nw].expired = e && keyIsExpired(e, (int64_t)ir_mstime());
    m->nw++;
}

static void unwatchAll(client *c) {
    struct multiState *m = c->mstate;
    if (!m) return;
    for (int i = 0; i < m->nw; i++) {
        wkey *k = m->w[i].wk;
        for (int j = 0; j < k->ncl; j++) {
            if (k->cl[j] == c) {
                k->cl[j] = k->cl[--k->ncl];
                break;
            }
        }
        if (k->ncl == 0) widxRemove(c->srv, k);
    }
    m->nw = 0;
}

/* Some watched key of c expired after it was watched (logically: the key
 * may still be in the table, waiting for lazy or active expiry). */
static int watchedKeyExpired(client *c) {
    struct multiState *m = c->mstate;
    int64_t now = (int64_t)ir_mstime();
    for (int i = 0; m && i < m->nw; i++) {
        if (m->w[i].expired) continue;
        wkey *k = m->w[i].wk;
        ir_db *d = (ir_db *)k->db;
        dbEntry *e = dictFind(&d->d, k->key, k->len, dictHashKey(&d->d, k->key, k->len));
        if (e && keyIsExpired(e, now)) return 1;
    }
    return 0;
}

/* c's watch of k, which c watches. */
static cwatch *watchOf(client *c, const wkey *k) {
    struct multiState *m = c->mstate;
    for (int i = 0; m && i < m->nw; i++)
        if (m->w[i].wk == k) return &m->w[i];
    return NULL;
}

void multiTouchKey(ir_server *s, struct ir_db *db, const char *key, size_t len) {
    struct ir_watchidx *w = s->watched;
    if (!w) return;
    wkey *k = widxFind(w, db, key, len, keyHash(db, key, len));
    if (!k) return;
    ir_db *d = (ir_db *)db;
    /* gone: absent, or still in the table but expired (the signal of its deletion) */
    dbEntry *e = dictFind(&d->d, key, len, dictHashKey(&d->d, key, len));
    int gone = !e || keyIsExpired(e, (int64_t)ir_mstime());
    for (int j = 0; j < k->ncl; j++) {
        cwatch *cw = watchOf(k->cl[j], k);
        if (cw && cw->expired && gone) {
            /* already expired when WATCHed, now deleted: logically no change (as
             * Redis 7.0); from here on the key counts as absent */
            cw->expired = 0;
            continue;
        }
        k->cl[j]->flags |= CLIENT_DIRTY_CAS;
    }
}

/* The watched keys of `emptied`, whose contents go (FLUSHDB, FLUSHALL) or are
 * replaced by those of `with` (SWAPDB), as Redis 7.0's touchAllWatchedKeysInDb:
 * a key that exists in neither is untouched; one that was already expired
 * when watched and is now gone (or replaced by another expired key) is no
 * logical change; an absent key replaced by an expired one counts from then
 * on as watched-while-expired. Every other watched key that existed on
 * either side marks its clients dirty. */
static void touchDb(ir_server *s, struct ir_db *emptied, struct ir_db *with) {
    struct ir_watchidx *w = s->watched;
    if (!w) return;
    int64_t now = (int64_t)ir_mstime();
    for (size_t i = 0; i < w->size; i++) {
        for (wkey *k = w->b[i]; k; k = k->next) {
            if (k->db != emptied) continue;
            ir_db *d = (ir_db *)emptied, *r = (ir_db *)with;
            int in_emptied =
                dictFind(&d->d, k->key, k->len, dictHashKey(&d->d, k->key, k->len)) != NULL;
            dbEntry *re =
                r ? dictFind(&r->d, k->key, k->len, dictHashKey(&r->d, k->key, k->len)) : NULL;
            if (!in_emptied && !re) continue;
            for (int j = 0; j < k->ncl; j++) {
                cwatch *cw = watchOf(k->cl[j], k);
                if (cw && cw->expired) {
                    if (!re) {
                        cw->expired = 0; /* the expired key is gone: no change */
                        continue;
                    }
                    if (keyIsExpired(re, now)) continue; /* expired stays expired */
                } else if (cw && !in_emptied && keyIsExpired(re, now)) {
                    cw->expired = 1; /* no key replaced by an expired one */
                    continue;
                }
                k->cl[j]->flags |= CLIENT_DIRTY_CAS;
            }
        }
    }
}

void multiTouchDb(ir_server *s, struct ir_db *db) { touchDb(s, db, NULL); }

void multiTouchSwappedDbs(ir_server *s, struct ir_db *a, struct ir_db *b) {
    touchDb(s, a, b);
    touchDb(s, b, a);
}

/* ---- the queue ------------------------------------------------------------ */

static void discardQueue(client *c) {
    struct multiState *m = c->mstate;
    if (m) {
        for (int i = 0; i < m->n; i++) {
            for (int j = 0; j < m->q[i].argc; j++)
                if (m->q[i].argv[j].owned) free(m->q[i].argv[j].ptr);
            free(m->q[i].argv);
        }
        m->n = 0;
        m->bytes = 0;
    }
    c->flags &= ~(CLIENT_MULTI | CLIENT_DIRTY_CAS | CLIENT_DIRTY_EXEC);
}

int multiQueueCount(const client *c) { return c->mstate ? c->mstate->n : -1; }
size_t multiQueueBytes(const client *c) { return c->mstate ? c->mstate->bytes : 0; }

void multiFlagTransaction(client *c) {
    if (c->flags & CLIENT_MULTI) c->flags |= CLIENT_DIRTY_EXEC;
}

int multiIsTxCommand(const ir_command *cmd) {
    return cmd->proc == execCommand || cmd->proc == discardCommand || cmd->proc == multiCommand ||
           cmd->proc == watchCommand || cmd->proc == quitCommand || cmd->proc == resetCommand;
}

void multiQueue(client *c, const ir_command *cmd) {
    struct multiState *m = mstateOf(c);
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 8;
        m->q = ir_xrealloc(m->q, (size_t)m->cap * sizeof(*m->q));
    }
    mcmd *q = &m->q[m->n++];
    q->cmd = cmd;
    q->argc = c->argc;
    q->argv = ir_xrealloc(NULL, (size_t)c->argc * sizeof(ir_arg));
    for (int i = 0; i < c->argc; i++) {
        ir_arg *a = &c->argv[i];
        char *p;
        if (a->owned) { /* a big bulk: take its buffer rather than copy it */
            p = a->ptr;
            a->owned = 0;
            a->ptr = NULL;
        } else {
            p = ir_xrealloc(NULL, a->len + 1);
            memcpy(p, a->ptr, a->len);
            p[a->len] = '\0';
        }
        q->argv[i] = (ir_arg){p, c->argv[i].len, 1};
        m->bytes += c->argv[i].len + 1;
    }
    addReplyStatus(c, "QUEUED");
}

void multiFreeClient(client *c) {
    if (!c->mstate) return;
    unwatchAll(c);
    discardQueue(c);
    free(c->mstate->q);
    free(c->mstate->w);
    free(c->mstate);
    c->mstate = NULL;
}

/* Back to no transaction and no WATCH (RESET). */
void multiReset(client *c) {
    unwatchAll(c);
    discardQueue(c);
}

/* ---- commands ------------------------------------------------------------- */

/* MULTI */
void multiCommand(client *c) {
    if (c->flags & CLIENT_MULTI) {
        addReplyError(c, "MULTI calls can not be nested");
        return;
    }
    mstateOf(c);
    c->flags |= CLIENT_MULTI;
    addReplyStr(c, shared.ok);
}

/* DISCARD */
void discardCommand(client *c) {
    if (!(c->flags & CLIENT_MULTI)) {
        addReplyError(c, "DISCARD without MULTI");
        return;
    }
    discardQueue(c);
    unwatchAll(c);
    addReplyStr(c, shared.ok);
}

/* WATCH key [key ...] */
void watchCommand(client *c) {
    if (c->flags & CLIENT_MULTI) {
        addReplyError(c, "WATCH inside MULTI is not allowed");
        return;
    }
    /* A client already dirty need not watch more: EXEC fails anyway. */
    if (!(c->flags & CLIENT_DIRTY_CAS)) {
        ir_db *db = dbFor(c);
        for (int i = 1; i < c->argc; i++) watchKey(c, db, c->argv[i].ptr, c->argv[i].len);
    }
    addReplyStr(c, shared.ok);
}

/* UNWATCH */
void unwatchCommand(client *c) {
    unwatchAll(c);
    c->flags &= ~CLIENT_DIRTY_CAS;
    addReplyStr(c, shared.ok);
}

/* A queued command is denyoom and used memory is over maxmemory. */
static int execOverMaxmemory(client *c) {
    ir_server *s = c->srv;
    struct multiState *m = c->mstate;
    if (!s->cfg.maxmemory || !m) return 0;
    int denyoom = 0;
    for (int i = 0; i < m->n; i++) denyoom |= (m->q[i].cmd->flags & CMD_DENYOOM) != 0;
    return denyoom && serverUsedMemory(s) > s->cfg.maxmemory;
}

void execAbort(client *c, const char *reason) {
    addReplyErrorFormat(c, "-EXECABORT Transaction discarded because of: %s", reason);
    discardQueue(c);
    unwatchAll(c);
}

/* EXEC */
void execCommand(client *c) {
    if (!(c->flags & CLIENT_MULTI)) {
        addReplyError(c, "EXEC without MULTI");
        return;
    }
    if (c->flags & CLIENT_DIRTY_EXEC) {
        addReplyError(c, "-EXECABORT Transaction discarded because of previous errors.");
        discardQueue(c);
        unwatchAll(c);
        return;
    }
    if (execOverMaxmemory(c)) {
        /* as Redis: EXEC of a transaction with a command that may use
         * memory is refused while used memory is over maxmemory */
        c->srv->oom_rejections++;
        execAbort(c, "OOM " IR_OOM_MSG);
        return;
    }
    if ((c->flags & CLIENT_DIRTY_CAS) || watchedKeyExpired(c)) {
        addReplyNullArray(c);
        discardQueue(c);
        unwatchAll(c);
        return;
    }
    unwatchAll(c); /* as Redis: before running, so our own writes do not matter */
    struct multiState *m = c->mstate;
    int saved_argc = c->argc;
    ir_arg *saved_argv = c->argv;
    const ir_command *saved_cmd = c->cmd;
    /* CLIENT_MULTI stays set while the queue runs, as in Redis: a blocking
     * command sees it and answers as its non-blocking form */
    addReplyArrayLen(c, m->n);
    for (int i = 0; i < m->n && !(c->flags & CLIENT_CLOSE_ASAP); i++) {
        mcmd *q = &m->q[i];
        c->argc = q->argc;
        c->argv = q->argv;
        /* the user's permissions may have changed since it was queued */
        int acl_pos, acl_r = aclCheck(c, q->cmd, ACL_CTX_MULTI, &acl_pos);
        if (acl_r != ACL_OK) {
            aclReplyDeniedInExec(c, q->cmd, acl_r);
            continue;
        }
        call(c, q->cmd);
        /* references into the queued arguments go before they are freed */
        if (c->has_refs) clientFlush(c);
    }
    c->argc = saved_argc;
    c->argv = saved_argv;
    c->cmd = saved_cmd;
    discardQueue(c);
}
