/* t_replay.c - REPLAY.* commands: prioritized replay tables over RESP, the
 * one implementation of the commands over the replay engine (replay/replay.h:
 * the tables, sum tree and limiter state), for either host (replay_host.h:
 * the native server, or the Redis module in module/; the clients waiting on
 * a limiter are the host's).
 *
 * Wire formats (all little-endian):
 *   ids        one bulk string of n int64
 *   weights    one bulk string of n float32
 *   priorities one bulk string of n float32 (REPLAY.UPDATE)
 *
 * The rate limiter (REPLAY.CREATE ... MIN_SIZE n SAMPLES_PER_INSERT r
 * ERROR_BUFFER e) is Reverb's SampleToInsertRatio; its decisions are the
 * engine's (replay/limiter.h, with their C tests), and this file only turns
 * them into waits and -RATELIMITED errors. It counts items: a SAMPLE
 * of n items counts n samples, an ADD of k items k inserts (Reverb counts one
 * per sampled or inserted item too); on a TRAJECTORY table REPLAY.ITEM is the
 * insert (t_traj.c), through the same gate (replayLimiterGate). With
 *     error = samples - r x (inserts - MIN_SIZE)
 * (Reverb's diff centred on r x MIN_SIZE, so the first MIN_SIZE inserts do
 * not license a burst of r x MIN_SIZE samples):
 *   a SAMPLE may run when the table holds at least MIN_SIZE items (and at
 *     least one) and, with r > 0, error <= e;
 *   an ADD may run while the table holds fewer than MIN_SIZE items, or
 *     error >= -e.
 * Both are checked before the call and the call then counts whole, so one
 * call may overshoot the buffer by its own size but can never deadlock the
 * other side. Without TIMEOUT a call that may not run fails at once with
 * -RATELIMITED naming the limit; with TIMEOUT it waits as a blocked client
 * (the host's: blocked.c natively, Redis's on the module host) behind the
 * calls of its kind already waiting, and runs as soon as it may.
 * ERROR_BUFFER defaults to max(1, r), the smallest Reverb accepts.
 *
 * QUEUE n and STACK n are Reverb's Queue(n)/Stack(n) limiters (with fifo
 * resp. lifo sampler and remover and MAX_TIMES_SAMPLED 1): an ADD of k items
 * may run while the table holds at most n - k items, a SAMPLE of k when it
 * holds at least k. On any table with MAX_TIMES_SAMPLED m, a SAMPLE of k
 * also waits until the live items allow k more draws (sum of m - times
 * sampled), since each draw may remove what it drew.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "replay.h"
#include "replay_err.h"
#include "replay_host.h"
#include "t_limiter_gate.h"
#include "t_replay.h"
#include "t_sample_reply.h"
#include "t_shard_group.h"
#include "t_traj.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the REPLAY.* wire format is little-endian; add byte swapping for this host"
#endif

static ir_table *lookupTableOrReply(client *c, int i) {
    ir_table *t = tableFind(hostTables(c), hostArg(c, i)->ptr, hostArg(c, i)->len);
    if (!t) replyReplayError(c, IR_ERR_NOTABLE, "no such table '%.128s'", hostArg(c, i)->ptr);
    return t;
}

/* The machine's physical memory (0 if unknown): what bounds a table's
 * up-front allocation when no maxmemory does. The same on both hosts. */
static uint64_t physicalMemory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/* REPLAY.CREATE <table> CAPACITY <n> [ALPHA <a>] [BETA <b>] [EPSILON <e>] [MAXBYTES <bytes>]
 *               [MIN_SIZE <n>] [SAMPLES_PER_INSERT <r>] [ERROR_BUFFER <e>]
 *               [SAMPLER <selector>] [REMOVER <selector>] [MAX_TIMES_SAMPLED <k>]
 * REPLAY.CREATE <table> QUEUE <n> | STACK <n> [ALPHA ...] [MAXBYTES ...] */
void replayCreateCommand(client *c) {
    ir_table_opts o = hostTableOpts(c);
    ir_limiter_opts lim = {0, 0, 0, 0};
    int has_eb = 0, preset = 0, has_sel = 0; /* preset: the QUEUE or STACK argument */
    int argc = hostArgc(c), traj = 0; /* a last TRAJECTORY: items reference chunks (t_traj.c) */
    if (argc > 2 && (argc - 2) % 2 == 1 && hostArgEq(c, argc - 1, "trajectory")) traj = 1, argc--;
    if ((argc - 2) % 2 != 0) {
        hostReplySyntaxError(c);
        return;
    }
    for (int i = 2; i < argc; i += 2) {
        long long ll;
        double d;
        if (hostArgEq(c, i, "capacity") || hostArgEq(c, i, "maxbytes")) {
            if (!string2ll(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &ll) || ll <= 0) {
                hostReplyErrorFormat(c, "%s must be a positive integer",
                                     hostArgEq(c, i, "capacity") ? "CAPACITY" : "MAXBYTES");
                return;
            }
            if (hostArgEq(c, i, "capacity")) o.capacity = (uint64_t)ll;
            else o.maxbytes = (uint64_t)ll;
        } else if (hostArgEq(c, i, "queue") || hostArgEq(c, i, "stack")) {
            if (!string2ll(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &ll) || ll <= 0 ||
                ll >= (1LL << 32) || preset) {
                hostReplyErrorFormat(c,
                                     "%s must be given once, a positive integer below 4294967296",
                                     hostArgEq(c, i, "queue") ? "QUEUE" : "STACK");
                return;
            }
            preset = i;
            lim.queue = o.capacity = (uint64_t)ll;
            o.sampler = o.remover = hostArgEq(c, i, "queue") ? IR_SEL_FIFO : IR_SEL_LIFO;
            o.max_times_sampled = 1;
        } else if (hostArgEq(c, i, "sampler") || hostArgEq(c, i, "remover")) {
            int sel = tableSelectorParse(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len);
            if (!sel) {
                hostReplyErrorFormat(
                    c, "unknown selector '%.64s' for %s: use %s", hostArg(c, i + 1)->ptr,
                    hostArgEq(c, i, "sampler") ? "SAMPLER" : "REMOVER", tableSelectorList());
                return;
            }
            if (hostArgEq(c, i, "sampler")) o.sampler = sel;
            else o.remover = sel;
            has_sel = i;
        } else if (hostArgEq(c, i, "max_times_sampled")) {
            if (!string2ll(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &ll) || ll <= 0 ||
                ll > UINT32_MAX) {
                hostReplyError(c, "MAX_TIMES_SAMPLED must be an integer between 1 and 4294967295");
                return;
            }
            o.max_times_sampled = (uint32_t)ll;
            has_sel = i;
        } else if (hostArgEq(c, i, "min_size")) {
            if (!string2ll(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &ll) || ll < 0) {
                hostReplyError(c, "MIN_SIZE must be an integer >= 0");
                return;
            }
            lim.min_size = (uint64_t)ll;
        } else if (hostArgEq(c, i, "samples_per_insert") || hostArgEq(c, i, "error_buffer")) {
            int spi = hostArgEq(c, i, "samples_per_insert");
            const ir_arg *v = hostArg(c, i + 1);
            if (!string2d(v->ptr, v->len, &d) || !(d >= 0) || !isfinite(d)) {
                hostReplyErrorFormat(c, "%s must be a finite number >= 0",
                                     spi ? "SAMPLES_PER_INSERT" : "ERROR_BUFFER");
                return;
            }
            if (spi) lim.samples_per_insert = d;
            else lim.error_buffer = d, has_eb = 1;
        } else if (hostArgEq(c, i, "alpha") || hostArgEq(c, i, "beta") ||
                   hostArgEq(c, i, "epsilon")) {
            if (!string2d(hostArg(c, i + 1)->ptr, hostArg(c, i + 1)->len, &d) || !(d >= 0) ||
                !isfinite(d)) {
                hostReplyErrorFormat(c, "%s must be a finite number >= 0", hostArg(c, i)->ptr);
                return;
            }
            if (hostArgEq(c, i, "alpha")) o.alpha = d;
            else if (hostArgEq(c, i, "beta")) o.beta = d;
            else o.epsilon = d;
        } else {
            hostReplySyntaxError(c);
            return;
        }
    }
    if (preset) {
        int other = has_sel;
        for (int i = 2; i < argc && !other; i += 2)
            if (hostArgEq(c, i, "capacity") || hostArgEq(c, i, "min_size") ||
                hostArgEq(c, i, "samples_per_insert") || hostArgEq(c, i, "error_buffer"))
                other = i;
        if (other) {
            hostReplyErrorFormat(c,
                                 "%s <n> is Reverb's %s (its own sampler, remover, "
                                 "MAX_TIMES_SAMPLED 1, CAPACITY n and limiter): drop %s",
                                 hostArg(c, preset)->ptr,
                                 hostArgEq(c, preset, "queue") ? "queue" : "stack",
                                 hostArg(c, other)->ptr);
            return;
        }
    }
    if (o.capacity == 0) {
        hostReplyError(c, "CAPACITY is required: REPLAY.CREATE <table> CAPACITY <n>");
        return;
    }
    if (!has_eb && lim.samples_per_insert > 0)
        lim.error_buffer = tableDefaultErrorBuffer(lim.samples_per_insert);
    const char *err;
    if (tableLimiterCheck(&lim, o.capacity, &err) != 0) {
        hostReplyErrorFormat(c, "%s", err);
        return;
    }
    /* The slots and trees are allocated now: charge them before allocating,
     * so one command cannot commit gigabytes past maxmemory. */
    uint64_t maxmemory = hostMaxmemory(c);
    if (maxmemory && o.capacity <= (1ULL << 32) &&
        hostUsedMemory(c) + o.capacity * tableSlotBytesFor(&o) > maxmemory) {
        hostOomRejected(c);
        hostReplyError(c, "-OOM " IR_OOM_MSG);
        return;
    }
    /* Without maxmemory, the machine bounds them: the slots, trees and heaps
     * are written now (CAPACITY 4294967296 wrote tens of GB before any insert
     * was refused), so they must fit in the physical memory the server does
     * not use yet. The arena is not charged: MAXBYTES is address space, mapped
     * without reserve and committed as items fill it, each insert charged as
     * it lands (a MAXBYTES past any memory, as a bound never reached, is
     * allowed; one past the address space fails to map, below). */
    uint64_t phys = maxmemory ? 0 : physicalMemory();
    if (phys && o.capacity <= (1ULL << 32)) {
        uint64_t slots = o.capacity * tableSlotBytesFor(&o), used = hostUsedMemory(c);
        uint64_t room = phys > used ? phys - used : 0;
        if (slots > room) {
            hostOomRejected(c);
            hostReplyErrorFormat(c,
                                 "-OOM table '%.128s' of CAPACITY %llu needs %llu bytes of slots "
                                 "and trees now, more than the %llu bytes of memory this machine "
                                 "has free: lower CAPACITY",
                                 hostArg(c, 1)->ptr, (unsigned long long)o.capacity,
                                 (unsigned long long)slots, (unsigned long long)room);
            return;
        }
    }
    ir_table *t;
    if (tableFind(hostTables(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len)) {
        replyReplayError(c, IR_ERR_BUSYTABLE,
                         "table '%.128s' already exists: drop it with "
                         "REPLAY.DROP or use another name",
                         hostArg(c, 1)->ptr);
        return;
    }
    if (tableCreate(hostTables(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len, &o, &t, &err) != 0) {
        hostReplyErrorFormat(c, "%s", err);
        return;
    }
    if (tableLimiterSet(t, &lim, &err) != 0) { /* checked above: cannot fail */
        tableDrop(hostTables(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len);
        hostReplyErrorFormat(c, "%s", err);
        return;
    }
    if (traj && trajTableInit(hostChunks(c), t) != 0) {
        tableDrop(hostTables(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len);
        hostReplyError(c, "out of memory");
        return;
    }
    hostReplyOk(c);
}

/* The checked batch in items (tablesAddScratch's) through the limiter into t: 0
 * with the ids in ids, or -1 when the call was answered (an error, or parked by
 * the limiter to run again). */
static int addItems(client *c, ir_table *t, const ir_item_in *items, uint64_t *ids, size_t n,
                    int timeout_arg, uint64_t deadline) {
    if (replayLimiterGate(c, t, n, 0, timeout_arg, deadline)) return -1;
    const char *err;
    if (tableAdd(t, items, n, ids, &err) != 0) {
        hostReplyErrorFormat(c, "%s", err);
        return -1;
    }
    replayLimiterRan(c, t, n, 0);
    if (tableCapacityWarnOnce(t)) {
        /* honest capacity: say once, in the log, what the arena really keeps */
        const ir_table_opts *o = tableOpts(t);
        ir_table_info in;
        tableInfo(t, &in);
        hostLog("table '%.128s': MAXBYTES %llu holds about %llu items of the mean size seen "
                "(%llu B), not its CAPACITY %llu: the oldest go first (REPLAY.INFO "
                "capacity_fits)",
                tableName(t), (unsigned long long)o->maxbytes, (unsigned long long)in.capacity_fits,
                (unsigned long long)(in.bytes_used / in.size), (unsigned long long)o->capacity);
    }
    return 0;
}

/* REPLAY.ADD's table: NULL (answered) if there is none or it holds trajectories. */
static ir_table *addTableOrReply(client *c) {
    ir_table *t = lookupTableOrReply(c, 1);
    if (t && tableHoldsTrajectories(t)) {
        replyReplayError(c, IR_ERR_WRONGKIND,
                         "table '%.128s' holds trajectories: append steps with REPLAY.APPEND "
                         "and create items with REPLAY.ITEM",
                         tableName(t));
        return NULL;
    }
    return t;
}

static void addPackedCommand(client *c);

/* REPLAY.ADD <table> <priority> <item> [<priority> <item> ...] [TIMEOUT <seconds>]
 * REPLAY.ADD <table> PACKED <n> <priorities|MAX> <items> [TIMEOUT <seconds>]
 * ("TIMEOUT" and "PACKED" are never priorities, so the options are told apart by
 * their place.) PACKED takes the batch as two bodies, no argument per item: n
 * float64 priorities (little-endian) or the word MAX for all, then n items of one
 * size back to back; it replies with the ids as one bulk string of n int64. */
void replayAddCommand(client *c) {
    if (hostArgc(c) >= 3 && hostArgEq(c, 2, "packed")) {
        addPackedCommand(c);
        return;
    }
    int nargs = hostArgc(c), timeout_arg = 0;
    if (hostArgc(c) >= 6 && hostArgEq(c, hostArgc(c) - 2, "timeout")) {
        nargs = hostArgc(c) - 2;
        timeout_arg = hostArgc(c) - 1;
    }
    if ((nargs - 2) % 2 != 0) {
        hostReplyArityError(c);
        return;
    }
    ir_table *t = addTableOrReply(c);
    if (!t) return;
    uint64_t deadline = 0;
    if (timeout_arg && hostBlockingTimeout(c, timeout_arg, &deadline) != 0) return;
    size_t n = (size_t)(nargs - 2) / 2;
    /* Every (priority, item) pair is checked before anything is inserted. */
    ir_item_in *items;
    uint64_t *ids;
    if (tablesAddScratch(hostTables(c), n, &items, &ids) != 0) {
        hostReplyError(c, "out of memory");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const ir_arg *p = hostArg(c, 2 + 2 * k), *v = hostArg(c, 3 + 2 * k);
        items[k].data = v->ptr;
        items[k].len = v->len;
        items[k].use_max = p->len == 3 && strncasecmp(p->ptr, "max", 3) == 0;
        items[k].raw = 0;
        if (!items[k].use_max &&
            (!string2d(p->ptr, p->len, &items[k].raw) || !tablePriorityValid(t, items[k].raw))) {
            replyReplayError(c, IR_ERR_BADPRIO,
                             "%zu invalid priority '%.64s': use a finite "
                             "number >= 0 or MAX",
                             k, p->ptr);
            return;
        }
    }
    if (addItems(c, t, items, ids, n, timeout_arg, deadline) != 0) return;
    hostReplyArrayLen(c, (long)n);
    for (size_t k = 0; k < n; k++) hostReplyLongLong(c, (long long)ids[k]);
}

static void addPackedCommand(client *c) {
    int argc = hostArgc(c), timeout_arg = 0;
    if (argc == 8 && hostArgEq(c, 6, "timeout")) timeout_arg = 7;
    else if (argc != 6) {
        hostReplySyntaxError(c);
        return;
    }
    ir_table *t = addTableOrReply(c);
    if (!t) return;
    const ir_arg *na = hostArg(c, 3), *pr = hostArg(c, 4), *body = hostArg(c, 5);
    long long nn;
    if (!string2ll(na->ptr, na->len, &nn) || nn < 1 || (uint64_t)nn > body->len + 1 ||
        (body->len && body->len % (uint64_t)nn)) {
        hostReplyErrorFormat(c,
                             "PACKED needs a count n >= 1 and n items of one size (got n '%.32s' "
                             "for %zu bytes of items)",
                             na->ptr, body->len);
        return;
    }
    size_t n = (size_t)nn, size = body->len / n;
    int use_max = pr->len == 3 && strncasecmp(pr->ptr, "max", 3) == 0;
    if (!use_max && pr->len != 8 * n) {
        hostReplyErrorFormat(c,
                             "PACKED priorities must be MAX or %zu little-endian float64 (8 "
                             "bytes each), got %zu bytes",
                             n, pr->len);
        return;
    }
    uint64_t deadline = 0;
    if (timeout_arg && hostBlockingTimeout(c, timeout_arg, &deadline) != 0) return;
    ir_item_in *items;
    uint64_t *ids;
    if (tablesAddScratch(hostTables(c), n, &items, &ids) != 0) {
        hostReplyError(c, "out of memory");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        items[k].data = body->ptr + k * size;
        items[k].len = size;
        items[k].use_max = use_max;
        items[k].raw = 0;
        if (use_max) continue;
        double p;
        memcpy(&p, pr->ptr + 8 * k, 8); /* a byte string: no alignment promise */
        if (!tablePriorityValid(t, p)) {
            replyReplayError(c, IR_ERR_BADPRIO,
                             "%zu invalid priority '%.17g': use a finite number >= 0 or MAX", k, p);
            return;
        }
        items[k].raw = p;
    }
    if (addItems(c, t, items, ids, n, timeout_arg, deadline) != 0) return;
    memcpy(hostReplyBulkReserve(c, n * 8), ids, n * 8);
}

/* The sampled items' reply without per-item bookkeeping. Items below
 * IR_REF_MIN are copied into the reply in any case (hostReplyBulkPartPinned), so
 * for them the reply is reserved once and filled here: no reply segment, pin
 * check or buffer check per item. The items sit at random places in the
 * arena (a cache miss or two each at 2M items), so each is prefetched
 * IR_TABLE_PF items ahead and the misses overlap. */
static void prefetchItem(const char *p, size_t len) {
    __builtin_prefetch(p);
    if (len > 64) __builtin_prefetch(p + 64);
    if (len > 128) __builtin_prefetch(p + 128);
    if (len > 192) __builtin_prefetch(p + len - 1);
}

/* PACKED: n items of itemsize bytes back to back at dst. */
static void copySampledItems(const ir_item_span *it, char *dst, size_t n, size_t itemsize) {
    for (size_t i = 0; i < n; i++) {
        if (i + IR_TABLE_PF < n) prefetchItem(it[i + IR_TABLE_PF].data, itemsize);
        memcpy(dst + i * itemsize, it[i].data, itemsize);
    }
}

static size_t decimalDigits(uint32_t v) { return v < 10 ? 1 : v < 100 ? 2 : v < 1000 ? 3 : 4; }

/* Plain: n bulk strings, as hostReplyBulkPinned writes them, in one raw
 * reservation; 0 (nothing added) if an item is IR_REF_MIN or longer (those
 * go by reference) or the host writes no raw protocol (IR_HOST_RAW_REPLIES:
 * then each item is its own bulk). */
static int addSampledSmallItems(client *c, const ir_item_span *it, size_t n) {
    if (!IR_HOST_RAW_REPLIES) return 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = it[i].len;
        if (len >= IR_REF_MIN) return 0;
        total += 5 + decimalDigits((uint32_t)len) + len; /* "$" len "\r\n" item "\r\n" */
    }
    char *d = hostReplyRawReserve(c, total);
    /* "$<len>\r\n", formatted again only when the length changes (items
     * mostly have one size: 512 ll2string calls were 11% of a SAMPLE 512) */
    char hdr[16];
    size_t hlen = 0;
    size_t hfor = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (i + IR_TABLE_PF < n) prefetchItem(it[i + IR_TABLE_PF].data, it[i + IR_TABLE_PF].len);
        size_t len = it[i].len;
        if (len != hfor) {
            hdr[0] = '$';
            hlen = 1 + (size_t)ll2string(hdr + 1, sizeof(hdr) - 3, (long long)len);
            memcpy(hdr + hlen, "\r\n", 2);
            hlen += 2;
            hfor = len;
        }
        memcpy(d, hdr, hlen);
        d += hlen;
        memcpy(d, it[i].data, len);
        memcpy(d + len, "\r\n", 2);
        d += len + 2;
    }
    return 1;
}

/* REPLAY.SAMPLE <table> <n> [BETA <b>] [PACKED] [WITHSTATS] [WITHINFO] [TIMEOUT <seconds>]
 *
 * Without PACKED: [ids, weights, [item, ...]]. With PACKED, for tables whose
 * items all have one size: one bulk string of n int64 ids, n float32 weights
 * and the n items back to back (item i at offset 12n + i * itemsize).
 * WITHSTATS appends sampleStats's 24 + 8n bytes: as a fourth element, or
 * after the items in the PACKED bulk. WITHINFO appends addSampleInfo's
 * 8 + 20n bytes the same way, after WITHSTATS's when both are asked. */
void replaySampleCommand(client *c) {
    ir_table *t = lookupTableOrReply(c, 1);
    if (!t) return;
    long long n;
    if (!string2ll(hostArg(c, 2)->ptr, hostArg(c, 2)->len, &n) || n <= 0 || n > IR_MAX_SAMPLE) {
        hostReplyErrorFormat(c, "sample size must be an integer between 1 and %d", IR_MAX_SAMPLE);
        return;
    }
    const ir_table_opts *o = tableOpts(t);
    double beta = o->beta;
    int packed = 0, has_beta = 0, withstats = 0, timeout_arg = 0, withinfo = 0;
    uint64_t deadline = 0;
    for (int i = 3; i < hostArgc(c); i++) {
        if (hostArgEq(c, i, "packed") && !packed) {
            packed = 1;
        } else if (hostArgEq(c, i, "withstats") && !withstats) {
            withstats = 1;
        } else if (hostArgEq(c, i, "withinfo") && !withinfo) {
            withinfo = 1;
        } else if (hostArgEq(c, i, "timeout") && !timeout_arg && i + 1 < hostArgc(c)) {
            timeout_arg = ++i;
            if (hostBlockingTimeout(c, i, &deadline) != 0) return;
        } else if (hostArgEq(c, i, "beta") && !has_beta && i + 1 < hostArgc(c)) {
            has_beta = 1;
            i++;
            if (!string2d(hostArg(c, i)->ptr, hostArg(c, i)->len, &beta) || !(beta >= 0) ||
                !isfinite(beta)) {
                hostReplyError(c, "BETA must be a finite number >= 0");
                return;
            }
        } else {
            hostReplySyntaxError(c);
            return;
        }
    }
    uint32_t la, lb;
    if (packed && tableHoldsTrajectories(t)) {
        replyReplayError(c, IR_ERR_WRONGKIND,
                         "table '%.128s' holds trajectories: its samples are packed per "
                         "column already, sample without PACKED",
                         tableName(t));
        return;
    }
    if (packed && !tableItemsOneSize(t, &la, &lb)) {
        replyReplayError(c, IR_ERR_MIXEDSIZE,
                         "PACKED needs items of one size (table '%.128s' holds items of "
                         "%u and %u bytes): sample without PACKED",
                         tableName(t), la, lb);
        return;
    }
    if (withstats && ((o->sampler != IR_SEL_PRIORITIZED && o->sampler != IR_SEL_UNIFORM) ||
                      o->max_times_sampled)) {
        /* the stats describe the table after the draws: with removal by
         * MAX_TIMES_SAMPLED or a deterministic sampler they are not the draws' */
        hostReplyErrorFormat(c,
                             "WITHSTATS needs a prioritized or uniform sampler without "
                             "MAX_TIMES_SAMPLED (table '%.128s' has the %s sampler%s): use "
                             "WITHINFO for each draw's probability",
                             tableName(t), tableSelectorName(o->sampler),
                             o->max_times_sampled ? " and MAX_TIMES_SAMPLED" : "");
        return;
    }
    if (o->max_times_sampled &&
        (uint64_t)n >
            (limiterOpts(t)->queue ? limiterOpts(t)->queue : o->capacity * o->max_times_sampled)) {
        hostReplyErrorFormat(c,
                             "a sample of %lld is more than table '%.128s' can ever hold "
                             "(%s): sample fewer",
                             n, tableName(t),
                             limiterOpts(t)->queue ? "its QUEUE/STACK size"
                                                   : "CAPACITY x MAX_TIMES_SAMPLED");
        return;
    }
    if (replayLimiterGate(c, t, (size_t)n, 1, timeout_arg, deadline)) return;
    if (tableHoldsTrajectories(t)) {
        trajSample(c, t, (size_t)n, beta, withstats, withinfo);
        return;
    }
    {
        /* the reply's size, refused before anything is drawn: PACKED copies
         * every item; plain copies items below IR_REF_MIN (the rest go by
         * reference) */
        uint64_t nn = (uint64_t)n,
                 trail = (withstats ? 24 + 8 * nn : 0) + (withinfo ? 8 + 20 * nn : 0);
        uint64_t bulk, total;
        /* one size known without a scan (tableItemsOneSize may look at every item) */
        uint32_t run_len;
        int one = tableOneSizeKnown(t, &run_len) || packed;
        if (packed) {
            bulk = total = satAdd(satMul(nn, 12 + (uint64_t)run_len), trail);
        } else {
            bulk = 12 * nn > trail ? 12 * nn : trail;
            total = satAdd(satMul(nn, 12 + 15 + (one ? (uint64_t)run_len : IR_REF_MIN)), trail);
        }
        if (sampleReplyFits(c, (size_t)n, bulk, total, one) != 0) return;
    }
    int rc = tableSample(t, (size_t)n, beta);
    if (rc == IR_EEMPTY) {
        replyReplayError(c, IR_ERR_EMPTY, "table '%.128s' is empty", tableName(t));
        return;
    }
    if (rc != IR_OK) {
        hostReplyError(c, "out of memory");
        return;
    }
    size_t nn = (size_t)n;
    replayLimiterRan(c, t, nn, 1);
    ir_sample_view v;
    tableSampleView(t, nn, &v);
    if (packed) {
        size_t itemsize = nn ? v.items[0].len : 0, head = nn * 12,
               tail = withstats ? 24 + 8 * nn : 0;
        if (withinfo) tail += 8 + 20 * nn;
        int small = itemsize < IR_REF_MIN; /* copied anyway: one reservation for them all */
        char *h =
            hostReplyBulkBegin(c, head + nn * itemsize + tail, head + (small ? nn * itemsize : 0));
        memcpy(h, v.ids, nn * 8);
        memcpy(h + nn * 8, v.weights, nn * 4);
        if (small) {
            copySampledItems(v.items, h + head, nn, itemsize);
        } else {
            for (size_t i = 0; i < nn; i++)
                hostReplyBulkPartPinned(c, v.items[i].data, itemsize, tablePin(t));
        }
        if (withstats) addSampleStats(c, t, nn);
        if (withinfo) addSampleInfo(c, t, nn);
        hostReplyBulkEnd(c);
        return;
    }
    hostReplyArrayLen(c, 3 + withstats + withinfo);
    memcpy(hostReplyBulkReserve(c, nn * 8), v.ids, nn * 8);
    memcpy(hostReplyBulkReserve(c, nn * 4), v.weights, nn * 4);
    hostReplyArrayLen(c, (long)n);
    /* Items go out straight from the arena (by reference when large, pinned:
     * see tablePin). */
    if (!addSampledSmallItems(c, v.items, nn)) {
        for (size_t i = 0; i < nn; i++)
            hostReplyBulkPinned(c, v.items[i].data, v.items[i].len, tablePin(t));
    }
    if (withstats) {
        hostReplyBulkBegin(c, 24 + 8 * nn, 0);
        addSampleStats(c, t, nn);
        hostReplyBulkEnd(c);
    }
    if (withinfo) {
        hostReplyBulkBegin(c, 8 + 20 * nn, 0);
        addSampleInfo(c, t, nn);
        hostReplyBulkEnd(c);
    }
}

/* REPLAY.UPDATE <table> <ids: n x int64 LE> <priorities: n x float32 LE> */
void replayUpdateCommand(client *c) {
    ir_table *t = lookupTableOrReply(c, 1);
    if (!t) return;
    const ir_arg *ids = hostArg(c, 2), *pr = hostArg(c, 3);
    if (ids->len % 8 || pr->len % 4 || ids->len / 8 != pr->len / 4) {
        hostReplyError(c,
                       "ids must be n little-endian int64 and priorities n little-endian float32");
        return;
    }
    size_t n = ids->len / 8;
    const char *err;
    long applied = tableUpdateWire(t, ids->ptr, pr->ptr, n, &err);
    if (applied < 0) {
        hostReplyErrorFormat(c, "%s", err);
        return;
    }
    hostReplyLongLong(c, applied);
}

static void addField(client *c, const char *name) { hostReplyCString(c, name); }

/* REPLAY.INFO's fields after "name", in order: (name, reply kind, value of table t).
 * The reply's length is counted from this list, never by hand. */
#define REPLAY_INFO_FIELDS(F) \
    F("size", LL, tableSize(t)) \
    F("capacity", LL, o->capacity) \
    F("inserts", LL, in.inserts) \
    F("samples", LL, in.samples) \
    F("sample_calls", LL, in.sample_calls) \
    F("updates", LL, in.updates) \
    F("stale_updates", LL, in.stale_updates) \
    F("evictions", LL, in.evictions) \
    F("total_priority", DBL, in.total_priority) \
    F("max_priority", DBL, in.max_priority) \
    F("min_priority", DBL, isinf(minp) ? 0.0 : minp) \
    F("alpha", DBL, o->alpha) \
    F("beta", DBL, o->beta) \
    F("epsilon", DBL, o->epsilon) \
    F("bytes_used", LL, in.bytes_used) \
    F("maxbytes", LL, o->maxbytes) \
    F("next_id", LL, in.next_id) \
    F("fanout", LL, in.fanout) \
    F("min_size", LL, lim->min_size) \
    F("samples_per_insert", DBL, lim->samples_per_insert) \
    F("error_buffer", DBL, lim->error_buffer) \
    F("limiter_inserts", LL, ls.inserts) \
    F("limiter_samples", LL, ls.samples) \
    F("limiter_error", DBL, limiterError(t)) \
    F("blocked_samplers", LL, hostTableWaiting(t, 0)) \
    F("blocked_inserters", LL, hostTableWaiting(t, 1)) \
    F("waited_seconds", DBL, (double)ls.waited_us / 1e6) \
    F("capacity_fits", LL, in.capacity_fits) \
    F("sampler", STR, tableSelectorName(o->sampler)) \
    F("remover", STR, tableSelectorName(o->remover)) \
    F("max_times_sampled", LL, o->max_times_sampled) \
    F("queue_size", LL, lim->queue) \
    F("consumed", LL, in.consumed) \
    F("storage", STR, in.general ? "general" : "ring") \
    F("compactions", LL, in.compactions)

#define INFO_COUNT(name, kind, value) +1
#define INFO_LL(c, v) hostReplyLongLong(c, (long long)(v))
#define INFO_DBL(c, v) hostReplyDouble(c, (double)(v))
#define INFO_STR(c, v) hostReplyCString(c, (v))
#define INFO_EMIT(name, kind, value) \
    addField(c, name); \
    INFO_##kind(c, value);
static const long replay_info_fields = 1 REPLAY_INFO_FIELDS(INFO_COUNT); /* + "name" */

/* REPLAY.INFO <table> */
void replayInfoCommand(client *c) {
    ir_table *t = lookupTableOrReply(c, 1);
    if (!t) return;
    const ir_table_opts *o = tableOpts(t);
    ir_table_info in;
    tableInfo(t, &in);
    double minp = in.min_priority;
    const ir_limiter_opts *lim = limiterOpts(t);
    ir_limiter_state ls;
    limiterState(t, &ls);
    hostReplyArrayLen(
        c, 2 * (replay_info_fields + (tableHoldsTrajectories(t) ? trajInfoFieldCount() : 0)));
    addField(c, "name");
    hostReplyBulk(c, tableName(t), tableNameLen(t));
    REPLAY_INFO_FIELDS(INFO_EMIT)
    if (tableHoldsTrajectories(t))
        trajInfoFields(c, t); /* the chunk store's chunks, bytes, references */
}

/* REPLAY.DROP <table> */
void replayDropCommand(client *c) {
    if (tableDrop(hostTables(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len) != 0) {
        replyReplayError(c, IR_ERR_NOTABLE, "no such table '%.128s'", hostArg(c, 1)->ptr);
        return;
    }
    hostReplyOk(c);
}

/* REPLAY.LIST */
void replayListCommand(client *c) {
    hostReplyArrayLen(c, (long)tablesCount(hostTables(c)));
    for (ir_table *t = tablesFirst(hostTables(c)); t; t = tableNext(t))
        hostReplyBulk(c, tableName(t), tableNameLen(t));
}

/* ---- replay groups ------------------------------------------------------- */

/* REPLAY.SHARDS: where this server stands in its replay group, as a map:
 * index (this shard's place) and shards (every member's host:port, in shard
 * order; empty for a standalone server, which is a group of one). A client
 * needs one address to find the rest (ShardedReplayClient.from_seed). */
void replayShardsCommand(client *c) {
    const char *group = hostShardGroup(c);
    const char *start[IR_MAX_SHARDS];
    size_t len[IR_MAX_SHARDS];
    const char *err = NULL;
    int n = group ? shardGroupMembers(group, start, len, IR_MAX_SHARDS, &err) : 0;
    if (n < 0) n = 0; /* checked at start: cannot happen */
    hostReplyMapLen(c, 2);
    hostReplyCString(c, "index");
    hostReplyLongLong(c, hostShardIndex(c));
    hostReplyCString(c, "shards");
    hostReplyArrayLen(c, n);
    for (int i = 0; i < n; i++) hostReplyBulk(c, start[i], len[i]);
}
