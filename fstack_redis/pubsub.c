/* pubsub.c - SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH,
 * PUBSUB (Redis 7.0).
 *
 * The server keeps channel -> subscribers (a chained hash table) and the
 * list of patterns with their subscribers; each client keeps what it is
 * subscribed to, so unsubscribing all and disconnecting are linear in the
 * client's own subscriptions. Messages are RESP3 push messages (RESP2:
 * arrays); their bytes are copied into the subscriber's reply buffer, never
 * referenced, since the publisher's arguments are gone once PUBLISH
 * returns. A subscriber whose pending output passes the pubsub class of
 * client-output-buffer-limit (hard, or soft for longer than its seconds) is
 * disconnected, as in Redis.
 *
 * Concurrency contract: server thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "pubsub.h"

/* A channel or a pattern and the clients subscribed to it, in order. */
typedef struct subs {
    struct subs *next; /* channels: bucket chain */
    uint64_t h;
    client **cl;
    int ncl, capcl;
    size_t len;
    char name[];
} subs;

struct ir_pubsub {
    subs **b;
    size_t size, nchannels;
    subs **pat; /* patterns, in order of first subscription */
    size_t npat, cappat;
    uint64_t npatsubs; /* (client, pattern) pairs: PUBSUB NUMPAT */
    subs **sh;         /* shard channels (SSUBSCRIBE), in order of first subscription */
    size_t nsh, capsh;
};

struct pubsubState {
    subs **ch, **pat, **sch;
    int nch, capch, npat, cappat, nsch, capsch;
    uint64_t soft_since_ms; /* over the soft output limit since, 0 = not */
};

static struct ir_pubsub *psOf(ir_server *s) {
    if (!s->pubsub) {
        s->pubsub = ir_xrealloc(NULL, sizeof(*s->pubsub));
        memset(s->pubsub, 0, sizeof(*s->pubsub));
        s->pubsub->size = 16;
        s->pubsub->b = ir_xrealloc(NULL, 16 * sizeof(subs *));
        memset(s->pubsub->b, 0, 16 * sizeof(subs *));
    }
    return s->pubsub;
}

static struct pubsubState *cstateOf(client *c) {
    if (!c->pubsub) {
        c->pubsub = ir_xrealloc(NULL, sizeof(*c->pubsub));
        memset(c->pubsub, 0, sizeof(*c->pubsub));
    }
    return c->pubsub;
}

static uint64_t nameHash(const char *p, size_t len) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h ^ (h >> 31);
}

static subs *subsNew(const char *name, size_t len, uint64_t h) {
    subs *e = ir_xrealloc(NULL, sizeof(*e) + len + 1);
    memset(e, 0, sizeof(*e));
    e->h = h;
    e->len = len;
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    return e;
}

static void subsAdd(subs *e, client *c) {
    if (e->ncl == e->capcl) {
        e->capcl = e->capcl ? e->capcl * 2 : 2;
        e->cl = ir_xrealloc(e->cl, (size_t)e->capcl * sizeof(*e->cl));
    }
    e->cl[e->ncl++] = c;
}

static void subsDel(subs *e, client *c) {
    for (int i = 0; i < e->ncl; i++) {
        if (e->cl[i] == c) { /* keep the order: delivery follows subscription */
            memmove(e->cl + i, e->cl + i + 1, (size_t)(e->ncl - i - 1) * sizeof(*e->cl));
            e->ncl--;
            return;
        }
    }
}

static subs *channelFind(struct ir_pubsub *ps, const char *name, size_t len, uint64_t h) {
    for (subs *e = ps->b[h & (ps->size - 1)]; e; e = e->next)
        if (e->h == h && e->len == len && memcmp(e->name, name, len) == 0) return e;
    return NULL;
}

static void channelsGrow(struct ir_pubsub *ps) {
    size_t size = ps->size * 2;
    subs **b = calloc(size, sizeof(*b));
    if (!b) return;
    for (size_t i = 0; i < ps->size; i++) {
        for (subs *e = ps->b[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->h & (size - 1)];
            b[e->h & (size - 1)] = e;
        }
    }
    free(ps->b);
    ps->b = b;
    ps->size = size;
}

static void channelRemove(struct ir_pubsub *ps, subs *e) {
    subs **pp = &ps->b[e->h & (ps->size - 1)];
    while (*pp != e) pp = &(*pp)->next;
    *pp = e->next;
    ps->nchannels--;
    free(e->cl);
    free(e);
}

static void patternRemove(struct ir_pubsub *ps, subs *e) {
    for (size_t i = 0; i < ps->npat; i++) {
        if (ps->pat[i] == e) {
            memmove(ps->pat + i, ps->pat + i + 1, (ps->npat - i - 1) * sizeof(*ps->pat));
            ps->npat--;
            break;
        }
    }
    free(e->cl);
    free(e);
}

static int clientSubCount(const client *c) {
    return c->pubsub ? c->pubsub->nch + c->pubsub->npat : 0;
}

static int clientShardCount(const client *c) { return c->pubsub ? c->pubsub->nsch : 0; }

static void updateFlag(client *c) {
    if (clientSubCount(c) || clientShardCount(c)) c->flags |= CLIENT_PUBSUB;
    else c->flags &= ~CLIENT_PUBSUB;
}

/* ["kind", name or null, count] as a push message. */
static void replySubscription(client *c, const char *kind, const char *name, size_t len) {
    addReplyPushLen(c, 3);
    addReplyBulkCString(c, kind);
    if (name) memcpy(addReplyBulkReserve(c, len), name, len);
    else addReplyNull(c);
    int shard = !strcmp(kind, "ssubscribe") || !strcmp(kind, "sunsubscribe");
    addReplyLongLong(c, shard ? clientShardCount(c) : clientSubCount(c));
}

static int subscribeChannel(client *c, const char *name, size_t len) {
    struct ir_pubsub *ps = psOf(c->srv);
    struct pubsubState *st = cstateOf(c);
    uint64_t h = nameHash(name, len);
    subs *e = channelFind(ps, name, len, h);
    if (e) {
        for (int i = 0; i < st->nch; i++)
            if (st->ch[i] == e) return 0;
    } else {
        e = subsNew(name, len, h);
        e->next = ps->b[h & (ps->size - 1)];
        ps->b[h & (ps->size - 1)] = e;
        if (++ps->nchannels > ps->size) channelsGrow(ps);
    }
    subsAdd(e, c);
    if (st->nch == st->capch) {
        st->capch = st->capch ? st->capch * 2 : 4;
        st->ch = ir_xrealloc(st->ch, (size_t)st->capch * sizeof(*st->ch));
    }
    st->ch[st->nch++] = e;
    return 1;
}

/* Drop c's subscription at index i of its channel list. */
static void unsubscribeAt(client *c, int i) {
    struct pubsubState *st = c->pubsub;
    subs *e = st->ch[i];
    subsDel(e, c);
    memmove(st->ch + i, st->ch + i + 1, (size_t)(st->nch - i - 1) * sizeof(*st->ch));
    st->nch--;
    if (e->ncl == 0) channelRemove(c->srv->pubsub, e);
}

static int psubscribePattern(client *c, const char *pat, size_t len) {
    struct ir_pubsub *ps = psOf(c->srv);
    struct pubsubState *st = cstateOf(c);
    for (int i = 0; i < st->npat; i++)
        if (st->pat[i]->len == len && memcmp(st->pat[i]->name, pat, len) == 0) return 0;
    subs *e = NULL;
    for (size_t i = 0; i < ps->npat && !e; i++)
        if (ps->pat[i]->len == len && memcmp(ps->pat[i]->name, pat, len) == 0) e = ps->pat[i];
    if (!e) {
        e = subsNew(pat, len, 0);
        if (ps->npat == ps->cappat) {
            ps->cappat = ps->cappat ? ps->cappat * 2 : 4;
            ps->pat = ir_xrealloc(ps->pat, ps->cappat * sizeof(*ps->pat));
        }
        ps->pat[ps->npat++] = e;
    }
    subsAdd(e, c);
    ps->npatsubs++;
    if (st->npat == st->cappat) {
        st->cappat = st->cappat ? st->cappat * 2 : 4;
        st->pat = ir_xrealloc(st->pat, (size_t)st->cappat * sizeof(*st->pat));
    }
    st->pat[st->npat++] = e;
    return 1;
}

static void punsubscribeAt(client *c, int i) {
    struct pubsubState *st = c->pubsub;
    subs *e = st->pat[i];
    subsDel(e, c);
    c->srv->pubsub->npatsubs--;
    memmove(st->pat + i, st->pat + i + 1, (size_t)(st->npat - i - 1) * sizeof(*st->pat));
    st->npat--;
    if (e->ncl == 0) patternRemove(c->srv->pubsub, e);
}

/* Shard channels: a namespace of their own (SSUBSCRIBE, SPUBLISH); without a
 * cluster there are few, so they are a list. */
static subs *shardFind(const struct ir_pubsub *ps, const char *name, size_t len) {
    for (size_t i = 0; ps && i < ps->nsh; i++)
        if (ps->sh[i]->len == len && memcmp(ps->sh[i]->name, name, len) == 0) return ps->sh[i];
    return NULL;
}

static void ssubscribeChannel(client *c, const char *name, size_t len) {
    struct ir_pubsub *ps = psOf(c->srv);
    struct pubsubState *st = cstateOf(c);
    for (int i = 0; i < st->nsch; i++)
        if (st->sch[i]->len == len && memcmp(st->sch[i]->name, name, len) == 0) return;
    subs *e = shardFind(ps, name, len);
    if (!e) {
        e = subsNew(name, len, 0);
        if (ps->nsh == ps->capsh) {
            ps->capsh = ps->capsh ? ps->capsh * 2 : 4;
            ps->sh = ir_xrealloc(ps->sh, ps->capsh * sizeof(*ps->sh));
        }
        ps->sh[ps->nsh++] = e;
    }
    subsAdd(e, c);
    if (st->nsch == st->capsch) {
        st->capsch = st->capsch ? st->capsch * 2 : 4;
        st->sch = ir_xrealloc(st->sch, (size_t)st->capsch * sizeof(*st->sch));
    }
    st->sch[st->nsch++] = e;
}

static void sunsubscribeAt(client *c, int i) {
    struct pubsubState *st = c->pubsub;
    struct ir_pubsub *ps = c->srv->pubsub;
    subs *e = st->sch[i];
    subsDel(e, c);
    memmove(st->sch + i, st->sch + i + 1, (size_t)(st->nsch - i - 1) * sizeof(*st->sch));
    st->nsch--;
    if (e->ncl) return;
    for (size_t k = 0; k < ps->nsh; k++)
        if (ps->sh[k] == e) {
            memmove(ps->sh + k, ps->sh + k + 1, (ps->nsh - k - 1) * sizeof(*ps->sh));
            ps->nsh--;
            break;
        }
    free(e->cl);
    free(e);
}

/* ---- commands ------------------------------------------------------------- */

/* SSUBSCRIBE shardchannel [shardchannel ...] */
void ssubscribeCommand(client *c) {
    for (int i = 1; i < c->argc; i++) {
        ssubscribeChannel(c, c->argv[i].ptr, c->argv[i].len);
        updateFlag(c);
        replySubscription(c, "ssubscribe", c->argv[i].ptr, c->argv[i].len);
    }
}

/* SUNSUBSCRIBE [shardchannel ...] */
void sunsubscribeCommand(client *c) {
    struct pubsubState *st = c->pubsub;
    if (c->argc == 1) {
        if (!st || st->nsch == 0) {
            replySubscription(c, "sunsubscribe", NULL, 0);
            return;
        }
        while (st->nsch) {
            subs *e = st->sch[0];
            size_t len = e->len;
            char *name = ir_xrealloc(NULL, len + 1);
            memcpy(name, e->name, len);
            sunsubscribeAt(c, 0);
            updateFlag(c);
            replySubscription(c, "sunsubscribe", name, len);
            free(name);
        }
        return;
    }
    for (int i = 1; i < c->argc; i++) {
        const ir_arg *a = &c->argv[i];
        for (int j = 0; st && j < st->nsch; j++) {
            if (st->sch[j]->len == a->len && memcmp(st->sch[j]->name, a->ptr, a->len) == 0) {
                sunsubscribeAt(c, j);
                break;
            }
        }
        updateFlag(c);
        replySubscription(c, "sunsubscribe", a->ptr, a->len);
    }
}

/* SUBSCRIBE channel [channel ...] */
void subscribeCommand(client *c) {
    for (int i = 1; i < c->argc; i++) {
        subscribeChannel(c, c->argv[i].ptr, c->argv[i].len);
        updateFlag(c);
        replySubscription(c, "subscribe", c->argv[i].ptr, c->argv[i].len);
    }
}

/* UNSUBSCRIBE [channel ...] */
void unsubscribeCommand(client *c) {
    struct pubsubState *st = c->pubsub;
    if (c->argc == 1) {
        if (!st || st->nch == 0) {
            replySubscription(c, "unsubscribe", NULL, 0);
            return;
        }
        while (st->nch) {
            subs *e = st->ch[0];
            /* the name outlives the removal: reply first, then count down */
            size_t len = e->len;
            char *name = ir_xrealloc(NULL, len + 1);
            memcpy(name, e->name, len);
            unsubscribeAt(c, 0);
            updateFlag(c);
            replySubscription(c, "unsubscribe", name, len);
            free(name);
        }
        return;
    }
    for (int i = 1; i < c->argc; i++) {
        const ir_arg *a = &c->argv[i];
        for (int j = 0; st && j < st->nch; j++) {
            if (st->ch[j]->len == a->len && memcmp(st->ch[j]->name, a->ptr, a->len) == 0) {
                unsubscribeAt(c, j);
                break;
            }
        }
        updateFlag(c);
        replySubscription(c, "unsubscribe", a->ptr, a->len);
    }
}

/* PSUBSCRIBE pattern [pattern ...] */
void psubscribeCommand(client *c) {
    for (int i = 1; i < c->argc; i++) {
        psubscribePattern(c, c->argv[i].ptr, c->argv[i].len);
        updateFlag(c);
        replySubscription(c, "psubscribe", c->argv[i].ptr, c->argv[i].len);
    }
}

/* PUNSUBSCRIBE [pattern ...] */
void punsubscribeCommand(client *c) {
    struct pubsubState *st = c->pubsub;
    if (c->argc == 1) {
        if (!st || st->npat == 0) {
            replySubscription(c, "punsubscribe", NULL, 0);
            return;
        }
        while (st->npat) {
            subs *e = st->pat[0];
            size_t len = e->len;
            char *name = ir_xrealloc(NULL, len + 1);
            memcpy(name, e->name, len);
            punsubscribeAt(c, 0);
            updateFlag(c);
            replySubscription(c, "punsubscribe", name, len);
            free(name);
        }
        return;
    }
    for (int i = 1; i < c->argc; i++) {
        const ir_arg *a = &c->argv[i];
        for (int j = 0; st && j < st->npat; j++) {
            if (st->pat[j]->len == a->len && memcmp(st->pat[j]->name, a->ptr, a->len) == 0) {
                punsubscribeAt(c, j);
                break;
            }
        }
        updateFlag(c);
        replySubscription(c, "punsubscribe", a->ptr, a->len);
    }
}

static void addReplyCopy(client *c, const char *p, size_t len) {
    memcpy(addReplyBulkReserve(c, len), p, len);
}

/* After a message: write it, and tell whether r is over its output limit
 * (the pubsub class of client-output-buffer-limit). */
static int overLimit(client *r) {
    ir_server *s = r->srv;
    if (r->pending_bytes) clientFlush(r);
    size_t pending = r->pending_bytes;
    if (s->pubsub_obl_hard && pending > s->pubsub_obl_hard) return 1;
    if (s->pubsub_obl_soft && pending > s->pubsub_obl_soft) {
        struct pubsubState *st = r->pubsub;
        uint64_t now = ir_mstime();
        if (!st->soft_since_ms) st->soft_since_ms = now;
        else if (now - st->soft_since_ms >= s->pubsub_obl_secs * 1000) return 1;
    } else if (r->pubsub) {
        r->pubsub->soft_since_ms = 0;
    }
    return 0;
}

/* Deliver (channel, message) to the channel's and the matching patterns'
 * subscribers; returns how many received it. Subscribers over the pubsub
 * output limit are marked to close; they are freed here when free_now
 * (PUBLISH), else by their next I/O (a keyspace notification may come from
 * deep inside a command, where freeing a client is not safe). */
long long pubsubPublishMessage(ir_server *s, client *publisher, const char *chp, size_t chlen,
                               const char *msgp, size_t msglen, int free_now) {
    struct ir_pubsub *ps = s->pubsub;
    const ir_arg chv = {(char *)chp, chlen, 0}, msgv = {(char *)msgp, msglen, 0};
    const ir_arg *ch = &chv, *msg = &msgv;
    client *c = publisher;
    long long receivers = 0;
    client *victims[64];
    int nvictims = 0;
    if (ps) {
        subs *e = channelFind(ps, ch->ptr, ch->len, nameHash(ch->ptr, ch->len));
        for (int i = 0; e && i < e->ncl; i++) {
            client *r = e->cl[i];
            if (r->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSED)) continue;
            addReplyPushLen(r, 3);
            addReplyBulkCString(r, "message");
            addReplyCopy(r, ch->ptr, ch->len);
            addReplyCopy(r, msg->ptr, msg->len);
            receivers++;
            if (r != c && overLimit(r) && nvictims < 64) victims[nvictims++] = r;
        }
        for (size_t p = 0; p < ps->npat; p++) {
            subs *pe = ps->pat[p];
            if (!stringmatchlen(pe->name, pe->len, ch->ptr, ch->len, 0)) continue;
            for (int i = 0; i < pe->ncl; i++) {
                client *r = pe->cl[i];
                if (r->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSED)) continue;
                addReplyPushLen(r, 4);
                addReplyBulkCString(r, "pmessage");
                addReplyCopy(r, pe->name, pe->len);
                addReplyCopy(r, ch->ptr, ch->len);
                addReplyCopy(r, msg->ptr, msg->len);
                receivers++;
                if (r != c && overLimit(r) && nvictims < 64) victims[nvictims++] = r;
            }
        }
    }
    for (int i = 0; i < nvictims; i++) {
        client *r = victims[i];
        if (r->flags & CLIENT_CLOSE_ASAP) continue; /* listed twice (channel and pattern) */
        serverLog("Client %s (id %llu) scheduled to be closed ASAP for overcoming of output "
                  "buffer limits (pubsub).",
                  r->addr, (unsigned long long)r->id);
        s->output_limit_disconnects++;
        r->flags |= CLIENT_CLOSE_ASAP;
    }
    for (int i = 0; free_now && i < nvictims; i++) /* freed once: the flag check above ran first */
        if (!(victims[i]->flags & CLIENT_CLOSED)) freeClient(victims[i]);
    return receivers;
}

/* SPUBLISH shardchannel message: to the shard channel's subscribers, as "smessage" */
void spublishCommand(client *c) {
    const ir_arg *ch = &c->argv[1], *msg = &c->argv[2];
    subs *e = shardFind(c->srv->pubsub, ch->ptr, ch->len);
    long long receivers = 0;
    client *victims[64];
    int nvictims = 0;
    for (int i = 0; e && i < e->ncl; i++) {
        client *r = e->cl[i];
        if (r->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSED)) continue;
        addReplyPushLen(r, 3);
        addReplyBulkCString(r, "smessage");
        addReplyCopy(r, ch->ptr, ch->len);
        addReplyCopy(r, msg->ptr, msg->len);
        receivers++;
        if (r != c && overLimit(r) && nvictims < 64) victims[nvictims++] = r;
    }
    for (int i = 0; i < nvictims; i++) {
        c->srv->output_limit_disconnects++;
        freeClient(victims[i]);
    }
    addReplyLongLong(c, receivers);
}

/* PUBLISH channel message */
void publishCommand(client *c) {
    const ir_arg *ch = &c->argv[1], *msg = &c->argv[2];
    addReplyLongLong(c, pubsubPublishMessage(c->srv, c, ch->ptr, ch->len, msg->ptr, msg->len, 1));
}

/* PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT | SHARDCHANNELS | SHARDNUMSUB | HELP */
void pubsubCommand(client *c) {
    struct ir_pubsub *ps = c->srv->pubsub;
    if (argEq(c, 1, "channels") && c->argc <= 3) {
        long n = 0;
        const ir_arg *pat = c->argc == 3 ? &c->argv[2] : NULL;
        for (size_t i = 0; ps && i < ps->size; i++)
            for (subs *e = ps->b[i]; e; e = e->next)
                if (!pat || stringmatchlen(pat->ptr, pat->len, e->name, e->len, 0)) n++;
        addReplyArrayLen(c, n);
        for (size_t i = 0; ps && i < ps->size; i++)
            for (subs *e = ps->b[i]; e; e = e->next)
                if (!pat || stringmatchlen(pat->ptr, pat->len, e->name, e->len, 0))
                    addReplyCopy(c, e->name, e->len);
    } else if (argEq(c, 1, "numsub")) {
        addReplyArrayLen(c, 2L * (c->argc - 2)); /* an array in RESP3 too, as Redis 7.0 */
        for (int i = 2; i < c->argc; i++) {
            const ir_arg *a = &c->argv[i];
            subs *e = ps ? channelFind(ps, a->ptr, a->len, nameHash(a->ptr, a->len)) : NULL;
            addReplyCopy(c, a->ptr, a->len);
            addReplyLongLong(c, e ? e->ncl : 0);
        }
    } else if (argEq(c, 1, "numpat") && c->argc == 2) {
        addReplyLongLong(c, ps ? (long long)ps->npat : 0);
    } else if (argEq(c, 1, "shardchannels") && c->argc <= 3) {
        const ir_arg *pat = c->argc == 3 ? &c->argv[2] : NULL;
        long n = 0;
        for (size_t i = 0; ps && i < ps->nsh; i++)
            n += !pat || stringmatchlen(pat->ptr, pat->len, ps->sh[i]->name, ps->sh[i]->len, 0);
        addReplyArrayLen(c, n);
        for (size_t i = 0; ps && i < ps->nsh; i++)
            if (!pat || stringmatchlen(pat->ptr, pat->len, ps->sh[i]->name, ps->sh[i]->len, 0))
                addReplyCopy(c, ps->sh[i]->name, ps->sh[i]->len);
    } else if (argEq(c, 1, "shardnumsub")) {
        addReplyArrayLen(c, 2L * (c->argc - 2)); /* an array in RESP3 too, as Redis 7.0 */
        for (int i = 2; i < c->argc; i++) {
            subs *e = shardFind(ps, c->argv[i].ptr, c->argv[i].len);
            addReplyCopy(c, c->argv[i].ptr, c->argv[i].len);
            addReplyLongLong(c, e ? e->ncl : 0);
        }
    } else if (argEq(c, 1, "help") && c->argc == 2) {
        static const char *help[] = {
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: "
            "'*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        };
        addReplyHelpOf(c, help);
    } else if (argEq(c, 1, "channels") || argEq(c, 1, "numpat") || argEq(c, 1, "shardchannels") ||
               argEq(c, 1, "help")) {
        addReplySubcommandArity(c, "pubsub");
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try PUBSUB HELP.", c->argv[1].ptr);
    }
}

/* ---- the rest of the server ------------------------------------------------ */

int pubsubAllowedInContext(const ir_command *cmd) {
    return cmd->proc == subscribeCommand || cmd->proc == unsubscribeCommand ||
           cmd->proc == psubscribeCommand || cmd->proc == punsubscribeCommand ||
           cmd->proc == ssubscribeCommand || cmd->proc == sunsubscribeCommand ||
           cmd->proc == pingCommand || cmd->proc == quitCommand || cmd->proc == resetCommand;
}

int pubsubRepliesArePushes(const ir_command *cmd) {
    return cmd->proc == subscribeCommand || cmd->proc == unsubscribeCommand ||
           cmd->proc == psubscribeCommand || cmd->proc == punsubscribeCommand ||
           cmd->proc == ssubscribeCommand || cmd->proc == sunsubscribeCommand;
}

void pubsubClientCounts(const client *c, int *channels, int *patterns) {
    *channels = c->pubsub ? c->pubsub->nch : 0;
    *patterns = c->pubsub ? c->pubsub->npat : 0;
}

void pubsubServerCounts(const ir_server *s, uint64_t *channels, uint64_t *patterns) {
    *channels = s->pubsub ? s->pubsub->nchannels : 0;
    *patterns = s->pubsub ? s->pubsub->npat : 0;
}

void pubsubReset(client *c) {
    struct pubsubState *st = c->pubsub;
    if (!st) return;
    while (st->nch) unsubscribeAt(c, st->nch - 1);
    while (st->npat) punsubscribeAt(c, st->npat - 1);
    while (st->nsch) sunsubscribeAt(c, st->nsch - 1);
    updateFlag(c);
}

void pubsubFreeClient(client *c) {
    if (!c->pubsub) return;
    pubsubReset(c);
    free(c->pubsub->ch);
    free(c->pubsub->pat);
    free(c->pubsub->sch);
    free(c->pubsub);
    c->pubsub = NULL;
}

void pubsubFree(ir_server *s) {
    struct ir_pubsub *ps = s->pubsub;
    if (!ps) return;
    free(ps->b); /* every client was freed first, so every channel and pattern is gone */
    free(ps->pat);
    free(ps->sh);
    free(ps);
    s->pubsub = NULL;
}

int pubsubClientShards(const client *c) { return clientShardCount(c); }

int pubsubClientSub(const client *c, int pattern, int i, const char **name, size_t *len) {
    const struct pubsubState *st = c->pubsub;
    if (!st || i < 0 || i >= (pattern == 1 ? st->npat : pattern == 2 ? st->nsch : st->nch))
        return 0;
    const subs *x = pattern == 1 ? st->pat[i] : pattern == 2 ? st->sch[i] : st->ch[i];
    *name = x->name;
    *len = x->len;
    return 1;
}
