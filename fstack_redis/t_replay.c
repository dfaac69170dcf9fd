/* t_replay.c - REPLAY.* commands: prioritized replay tables over RESP.
 *
 * Wire formats (all little-endian):
 *   ids        one bulk string of n int64
 *   weights    one bulk string of n float32
 *   priorities one bulk string of n float32 (REPLAY.UPDATE)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "replay.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the REPLAY.* wire format is little-endian; add byte swapping for this host"
#endif

static ir_table *lookupTableOrReply(client *c, int i) {
    ir_table *t = tableFind(c->srv->tables, c->argv[i].ptr, c->argv[i].len);
    if (!t) addReplyErrorFormat(c, "no such table '%.128s'", c->argv[i].ptr);
    return t;
}

/* REPLAY.CREATE <table> CAPACITY <n> [ALPHA <a>] [BETA <b>] [EPSILON <e>] [MAXBYTES <bytes>] */
void replayCreateCommand(client *c) {
    const ir_config *cfg = &c->srv->cfg;
    ir_table_opts o = {
        .capacity = 0,
        .alpha = 0.6,
        .beta = 0.4,
        .epsilon = 1e-6,
        .maxbytes = cfg->default_maxbytes,
        .fanout = cfg->fanout,
        .seed = cfg->seed ? cfg->seed + c->srv->tables->count : ir_mstime() ^ c->id,
        .id_base = (uint64_t)cfg->shard_index << IR_SHARD_ID_BITS,
    };
    if ((c->argc - 2) % 2 != 0) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    for (int i = 2; i < c->argc; i += 2) {
        long long ll;
        double d;
        if (argEq(c, i, "capacity") || argEq(c, i, "maxbytes")) {
            if (!string2ll(c->argv[i + 1].ptr, c->argv[i + 1].len, &ll) || ll <= 0) {
                addReplyErrorFormat(c, "%s must be a positive integer",
                                    argEq(c, i, "capacity") ? "CAPACITY" : "MAXBYTES");
                return;
            }
            if (argEq(c, i, "capacity")) o.capacity = (uint64_t)ll;
            else o.maxbytes = (uint64_t)ll;
        } else if (argEq(c, i, "alpha") || argEq(c, i, "beta") || argEq(c, i, "epsilon")) {
            if (!string2d(c->argv[i + 1].ptr, c->argv[i + 1].len, &d) || !(d >= 0) || !isfinite(d)) {
                addReplyErrorFormat(c, "%s must be a finite number >= 0", c->argv[i].ptr);
                return;
            }
            if (argEq(c, i, "alpha")) o.alpha = d;
            else if (argEq(c, i, "beta")) o.beta = d;
            else o.epsilon = d;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (o.capacity == 0) {
        addReplyError(c, "CAPACITY is required: REPLAY.CREATE <table> CAPACITY <n>");
        return;
    }
    /* The slots and trees are allocated now: charge them before allocating,
     * so one command cannot commit gigabytes past maxmemory. */
    if (cfg->maxmemory && o.capacity <= (1ULL << 32) &&
        serverUsedMemory(c->srv) + o.capacity * tableSlotBytes() > cfg->maxmemory) {
        c->srv->oom_rejections++;
        addReplyError(c, "-OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    const char *err;
    if (tableCreate(c->srv->tables, c->argv[1].ptr, c->argv[1].len, &o, NULL, &err) != 0) {
        addReplyErrorFormat(c, "%s", err);
        return;
    }
    addReplyStr(c, shared.ok);
}

/* REPLAY.ADD <table> <priority> <item> [<priority> <item> ...] */
void replayAddCommand(client *c) {
    if ((c->argc - 2) % 2 != 0) {
        addReplyErrorArity(c);
        return;
    }
    ir_table *t = lookupTableOrReply(c, 1);
    if (!t) return;
    size_t n = (size_t)(c->argc - 2) / 2;
    /* Every (priority, item) pair is checked before anything is inserted. */
    if (tablesAddScratch(c->srv->tables, n) != 0) {
        addReplyError(c, "out of memory");
        return;
    }
    ir_item_in *items = c->srv->tables->add_items;
    uint64_t *ids = c->srv->tables->add_ids;
    for (size_t k = 0; k < n; k++) {
        const ir_arg *p = &c->argv[2 + 2 * k], *v = &c->argv[3 + 2 * k];
        items[k].data = v->ptr;
        items[k].len = v->len;
        items[k].use_max = p->len == 3 && strncasecmp(p->ptr, "max", 3) == 0;
        items[k].raw = 0;
        if (!items[k].use_max &&
            (!string2d(p->ptr, p->len, &items[k].raw) || !tablePriorityValid(t, items[k].raw))) {
            addReplyErrorFormat(c, "invalid priority '%.64s': use a finite number >= 0 or MAX",
                                p->ptr);
            return;
        }
    }
    const char *err;
    if (tableAdd(t, items, n, ids, &err) != 0) {
        addReplyErrorFormat(c, "%s", err);
        return;
    }
    addReplyArrayLen(c, (long)n);
    for (size_t k = 0; k < n; k++) addReplyLongLong(c, (long long)ids[k]);
}

/* The shard's side of exact sampling across a group (WITHSTATS): its total
 * and minimum positive stored priority (float64), its live size (int64), and
 * each drawn item's probability inside the shard (n float64): 24 + 8n bytes.
 * A client that knows every shard's total computes each draw's global
 * probability and importance weight from these (pyctl/sharded.py). */
static void addSampleStats(client *c, ir_table *t, size_t n) {
    double total = ir_sampler_total(t->sampler), mn = ir_sampler_min(t->sampler);
    uint64_t live = tableSize(t);
    if (!isfinite(mn)) mn = 0; /* no positive priority: sampling is uniform */
    char head[24];
    memcpy(head, &total, 8);
    memcpy(head + 8, &mn, 8);
    memcpy(head + 16, &live, 8);
    addReplyProto(c, head, sizeof(head));
    double *p = t->scratch_prio; /* unused by sampling; holds n entries */
    for (size_t i = 0; i < n; i++)
        p[i] = total > 0 ? ir_sampler_get(t->sampler, t->scratch_slots[i]) / total
                         : 1.0 / (double)live;
    addReplyProto(c, (const char *)p, 8 * n);
}

/* REPLAY.SAMPLE <table> <n> [BETA <b>] [PACKED] [WITHSTATS]
 *
 * Without PACKED: [ids, weights, [item, ...]]. With PACKED, for tables whose
 * items all have one size: one bulk string of n int64 ids, n float32 weights
 * and the n items back to back (item i at offset 12n + i * itemsize).
 * WITHSTATS appends sampleStats's 24 + 8n bytes: as a fourth element, or
 * after the items in the PACKED bulk. */
void replaySampleCommand(client *c) {
    ir_table *t = lookupTableOrReply(c, 1);
    if (!t) return;
    long long n;
    if (!string2ll(c->argv[2].ptr, c->argv[2].len, &n) || n <= 0 || n > IR_MAX_SAMPLE) {
        addReplyErrorFormat(c, "sample size must be an integer between 1 and %d", IR_MAX_SAMPLE);
        return;
    }
    double beta = t->o.beta;
    int packed = 0, has_beta = 0, withstats = 0;
    for (int i = 3; i < c->argc; i++) {
        if (argEq(c, i, "packed") && !packed) {
            packed = 1;
        } else if (argEq(c, i, "withstats") && !withstats) {
            withstats = 1;
        } else if (argEq(c, i, "beta") && !has_beta && i + 1 < c->argc) {
            has_beta = 1;
            i++;
            if (!string2d(c->argv[i].ptr, c->argv[i].len, &beta) || !(beta >= 0) ||
                !isfinite(beta)) {
                addReplyError(c, "BETA must be a finite number >= 0");
                return;
            }
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    uint32_t la, lb;
    if (packed && !tableItemsOneSize(t, &la, &lb)) {
        addReplyErrorFormat(c, "PACKED needs items of one size (table '%.128s' holds items of "
                               "%u and %u bytes): sample without PACKED", t->name, la, lb);
        return;
    }
    int rc = tableSample(t, (size_t)n, beta);
    if (rc == IR_EEMPTY) {
        addReplyErrorFormat(c, "table '%.128s' is empty", t->name);
        return;
    }
    if (rc != IR_OK) {
        addReplyError(c, "out of memory");
        return;
    }
    size_t nn = (size_t)n;
    if (packed) {
        size_t itemsize = t->run_len, head = nn * 12, tail = withstats ? 24 + 8 * nn : 0;
        char *h = addReplyBulkBegin(c, head + nn * itemsize + tail, head);
        memcpy(h, t->scratch_ids, nn * 8);
        memcpy(h + nn * 8, t->scratch_weights, nn * 4);
        for (size_t i = 0; i < nn; i++) {
            uint64_t slot = t->scratch_slots[i];
            addReplyRefPinned(c, t->arena + t->slot_off[slot], itemsize, &t->pin);
        }
        if (withstats) addSampleStats(c, t, nn);
        addReplyProto(c, "\r\n", 2);
        return;
    }
    addReplyArrayLen(c, withstats ? 4 : 3);
    memcpy(addReplyBulkReserve(c, nn * 8), t->scratch_ids, nn * 8);
    memcpy(addReplyBulkReserve(c, nn * 4), t->scratch_weights, nn * 4);
    addReplyArrayLen(c, (long)n);
    /* Items go out straight from the arena (by reference when large, pinned:
     * see ir_table.pin). */
    for (size_t i = 0; i < nn; i++) {
        uint64_t slot = t->scratch_slots[i];
        addReplyBulkPinned(c, t->arena + t->slot_off[slot], t->slot_len[slot], &t->pin);
    }
    if (withstats) {
        addReplyBulkBegin(c, 24 + 8 * nn, 0);
        addSampleStats(c, t, nn);
        addReplyProto(c, "\r\n", 2);
    }
}

/* REPLAY.UPDATE <table> <ids: n x int64 LE> <priorities: n x float32 LE> */
void replayUpdateCommand(client *c) {
    ir_table *t = lookupTableOrReply(c, 1);
    if (!t) return;
    const ir_arg *ids = &c->argv[2], *pr = &c->argv[3];
    if (ids->len % 8 || pr->len % 4 || ids->len / 8 != pr->len / 4) {
        addReplyError(c, "ids must be n little-endian int64 and priorities n little-endian float32");
        return;
    }
    size_t n = ids->len / 8;
    if (tableScratch(t, n) != 0) {
        addReplyError(c, "out of memory");
        return;
    }
    /* Arguments are byte strings with no alignment promise: copy out. */
    uint64_t *idv = t->scratch_ids;
    float *prv = t->scratch_weights;
    memcpy(idv, ids->ptr, n * 8);
    memcpy(prv, pr->ptr, n * 4);
    const char *err;
    long applied = tableUpdate(t, idv, prv, n, &err);
    if (applied < 0) {
        addReplyErrorFormat(c, "%s", err);
        return;
    }
    addReplyLongLong(c, applied);
}

static void addField(client *c, const char *name) { addReplyBulkCString(c, name); }

/* REPLAY.INFO <table> */
void replayInfoCommand(client *c) {
    ir_table *t = lookupTableOrReply(c, 1);
    if (!t) return;
    double minp = ir_sampler_min(t->sampler);
    addReplyArrayLen(c, 2 * 19);
    addField(c, "name");            addReplyBulk(c, t->name, t->namelen);
    addField(c, "size");            addReplyLongLong(c, (long long)tableSize(t));
    addField(c, "capacity");        addReplyLongLong(c, (long long)t->o.capacity);
    addField(c, "inserts");         addReplyLongLong(c, (long long)t->inserts);
    addField(c, "samples");         addReplyLongLong(c, (long long)t->samples);
    addField(c, "sample_calls");    addReplyLongLong(c, (long long)t->sample_calls);
    addField(c, "updates");         addReplyLongLong(c, (long long)t->updates);
    addField(c, "stale_updates");   addReplyLongLong(c, (long long)t->stale_updates);
    addField(c, "evictions");       addReplyLongLong(c, (long long)t->evictions);
    addField(c, "total_priority");  addReplyDouble(c, ir_sampler_total(t->sampler));
    addField(c, "max_priority");    addReplyDouble(c, ir_sampler_max(t->sampler));
    addField(c, "min_priority");    addReplyDouble(c, isinf(minp) ? 0.0 : minp);
    addField(c, "alpha");           addReplyDouble(c, t->o.alpha);
    addField(c, "beta");            addReplyDouble(c, t->o.beta);
    addField(c, "epsilon");         addReplyDouble(c, t->o.epsilon);
    addField(c, "bytes_used");      addReplyLongLong(c, (long long)t->bytes_used);
    addField(c, "maxbytes");        addReplyLongLong(c, (long long)t->o.maxbytes);
    addField(c, "next_id");         addReplyLongLong(c, (long long)t->next_id);
    addField(c, "fanout");          addReplyLongLong(c, (long long)ir_sampler_fanout(t->sampler));
}

/* REPLAY.DROP <table> */
void replayDropCommand(client *c) {
    if (tableDrop(c->srv->tables, c->argv[1].ptr, c->argv[1].len) != 0) {
        addReplyErrorFormat(c, "no such table '%.128s'", c->argv[1].ptr);
        return;
    }
    addReplyStr(c, shared.ok);
}

/* REPLAY.LIST */
void replayListCommand(client *c) {
    addReplyArrayLen(c, (long)c->srv->tables->count);
    for (ir_table *t = c->srv->tables->head; t; t = t->next) addReplyBulk(c, t->name, t->namelen);
}

/* ---- replay groups ------------------------------------------------------- */

int shardGroupMembers(const char *group, const char **start, size_t *len, int max,
                      const char **err) {
    int n = 0;
    const char *p = group;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        const char *colon = memrchr(p, ':', l);
        long long port;
        if (!colon || colon == p || !string2ll(colon + 1, l - (size_t)(colon + 1 - p), &port) ||
            port < 1 || port > 65535) {
            *err = "every member of a shard group must be host:port (port 1-65535)";
            return -1;
        }
        if (n < max) {
            start[n] = p;
            len[n] = l;
        }
        n++;
        p += l;
        if (*p == ',') p++;
    }
    if (n > IR_MAX_SHARDS) {
        *err = "a shard group has at most 1024 members";
        return -1;
    }
    return n;
}

/* REPLAY.SHARDS: where this server stands in its replay group, as a map:
 * index (this shard's place) and shards (every member's host:port, in shard
 * order; empty for a standalone server, which is a group of one). A client
 * needs one address to find the rest (ShardedReplayClient.from_seed). */
void replayShardsCommand(client *c) {
    const ir_config *cfg = &c->srv->cfg;
    const char *start[IR_MAX_SHARDS];
    size_t len[IR_MAX_SHARDS];
    const char *err = NULL;
    int n = cfg->shard_group ? shardGroupMembers(cfg->shard_group, start, len, IR_MAX_SHARDS, &err)
                             : 0;
    if (n < 0) n = 0; /* checked at start: cannot happen */
    addReplyMapLen(c, 2);
    addReplyBulkCString(c, "index");
    addReplyLongLong(c, cfg->shard_index);
    addReplyBulkCString(c, "shards");
    addReplyArrayLen(c, n);
    for (int i = 0; i < n; i++) addReplyBulk(c, start[i], len[i]);
}
