/* t_stream.c - the stream commands (XADD, XRANGE, XREVRANGE, XLEN, XDEL,
 * XTRIM, XREAD, XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM,
 * XINFO, XSETID) with Redis 7.0's replies, errors and propagation.
 *
 * Layout (one `stream` per key, see db_internal.h):
 *   entries   a deque of the live entries in ID order (e[eh .. eh+en)):
 *             appends at the tail, trims at the head are O(1); XDEL of an
 *             entry in the middle moves the ones after it. Lookups by ID are
 *             binary searches. Each entry is one allocation holding its
 *             field/value pairs (u32 length + bytes each).
 *   nodes     the radix-tree nodes Redis would have (listpacks of at most
 *             stream-node-max-entries = 100 entries, ~4096 bytes): kept as
 *             counters only (live, total incl. deleted, last ID, estimated
 *             bytes), so that `~` trimming removes exactly the whole nodes
 *             Redis removes, and XINFO's radix-tree-keys matches.
 *   groups    sorted by name (as Redis's rax); each has its pending entries
 *             list (PEL) as an array sorted by ID and its consumers sorted
 *             by name. A consumer's own PEL is the group PEL filtered by
 *             consumer (it keeps a count).
 *
 * Blocking XREAD/XREADGROUP use blocked.c's re-run model: `$` is rewritten
 * to the stream's last ID when the client blocks, so a re-run reads what was
 * added after it; a re-run XREADGROUP whose key or group went answers
 * -UNBLOCKED / -NOGROUP as Redis 7.0. Served after blocking, a read with
 * several streams answers every stream that has new entries by then (Redis
 * 7.0 answers the one whose write woke it).
 *
 * Propagation as Redis 7.0: XADD's generated ID and `~` trimming are
 * rewritten to exact arguments (LIMIT dropped); XREADGROUP, XCLAIM and
 * XAUTOCLAIM propagate XCLAIM ... FORCE JUSTID LASTID and XGROUP SETID /
 * CREATECONSUMER instead of themselves; XGROUP's changes go as they came.
 *
 * Persistence: DUMP and a replica's RDB image write Redis's own encoding
 * (streamPutRedisRDB: RDB_TYPE_STREAM_LISTPACKS_2, one listpack per node);
 * RESTORE reads types 15 and 19 (dump.c, with the streamLoad* helpers).
 * Snapshots use the project's own record (streamSerialize).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aof.h"
#include "blocked.h"
#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "rdb.h"
#include "replication.h"
#include "server.h"

#define ENTRIES_READ_INVALID (-1LL)
#define XREAD_BLOCKED_DEFAULT_COUNT 1000

/* ---- IDs ---------------------------------------------------------------- */

static int idCmp(const streamID *a, const streamID *b) {
    if (a->ms != b->ms) return a->ms < b->ms ? -1 : 1;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return 0;
}

static int idIsZero(const streamID *a) { return a->ms == 0 && a->seq == 0; }

static int idIncr(streamID *id) {
    if (id->seq == UINT64_MAX) {
        if (id->ms == UINT64_MAX) return -1;
        id->ms++;
        id->seq = 0;
    } else {
        id->seq++;
    }
    return 0;
}

static int idDecr(streamID *id) {
    if (id->seq == 0) {
        if (id->ms == 0) return -1;
        id->ms--;
        id->seq = UINT64_MAX;
    } else {
        id->seq--;
    }
    return 0;
}

int streamFormatID(char *buf, size_t n, const streamID *id) {
    return snprintf(buf, n, "%llu-%llu", (unsigned long long)id->ms, (unsigned long long)id->seq);
}

static void addReplyStreamID(client *c, const streamID *id) {
    char buf[48];
    int n = streamFormatID(buf, sizeof(buf), id);
    addReplyBulk(c, buf, (size_t)n);
}

/* Redis's string2ull: digits only (a leading '-' reads as a signed value). */
static int parseULL(const char *p, size_t len, unsigned long long *out) {
    if (len == 0 || len > 20) return 0;
    if (p[0] == '-') {
        long long v;
        if (!string2ll(p, len, &v)) return 0;
        *out = (unsigned long long)v;
        return 1;
    }
    unsigned long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (ULLONG_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

#define ID_INVALID_MSG "Invalid stream ID specified as stream command argument"

/* Parse "ms-seq", "ms" (seq = missing_seq), "-", "+" (unless strict) and, when
 * seq_given is set, "ms-*" (*seq_given = 0). Replies the error when c is set. */
static int parseID(client *c, const char *p, size_t len, streamID *id, uint64_t missing_seq,
                   int strict, int *seq_given) {
    if (len > 127) goto invalid;
    if (strict && len == 1 && (p[0] == '-' || p[0] == '+')) goto invalid;
    if (seq_given) *seq_given = 1;
    if (len == 1 && p[0] == '-') {
        id->ms = id->seq = 0;
        return 0;
    }
    if (len == 1 && p[0] == '+') {
        id->ms = id->seq = UINT64_MAX;
        return 0;
    }
    const char *dash = memchr(p, '-', len);
    /* Redis cuts at the first '-' ("-5" is an empty ms part: invalid) */
    unsigned long long ms, seq;
    size_t mslen = dash ? (size_t)(dash - p) : len;
    if (!parseULL(p, mslen, &ms)) goto invalid;
    if (dash) {
        const char *s = dash + 1;
        size_t slen = len - mslen - 1;
        if (seq_given && slen == 1 && s[0] == '*') {
            seq = 0;
            *seq_given = 0;
        } else if (!parseULL(s, slen, &seq)) {
            goto invalid;
        }
    } else {
        seq = missing_seq;
    }
    id->ms = ms;
    id->seq = seq;
    return 0;
invalid:
    if (c) addReplyError(c, ID_INVALID_MSG);
    return -1;
}

static int parseArgID(client *c, int i, streamID *id, uint64_t missing_seq, int strict) {
    return parseID(c, c->argv[i].ptr, c->argv[i].len, id, missing_seq, strict, NULL);
}

/* The same without a reply (the IDs were checked already, or a failure is not an error). */
static int parseArgIDQuiet(client *c, int i, streamID *id) {
    return parseID(NULL, c->argv[i].ptr, c->argv[i].len, id, 0, 1, NULL);
}

/* An interval bound: "(" makes it exclusive (then strict parsing). */
static int parseIntervalID(client *c, int i, streamID *id, int *exclude, uint64_t missing_seq) {
    const ir_arg *a = &c->argv[i];
    *exclude = a->len > 1 && a->ptr[0] == '(';
    if (*exclude) return parseID(c, a->ptr + 1, a->len - 1, id, missing_seq, 1, NULL);
    return parseID(c, a->ptr, a->len, id, missing_seq, 0, NULL);
}

/* ---- the structure -------------------------------------------------------- */

stream *streamNew(ir_db *db) {
    stream *s = dbMalloc(sizeof(*s));
    memset(s, 0, sizeof(*s));
    s->bytes = sizeof(*s) + DB_MALLOC_OVERHEAD;
    if (db) db->bytes += s->bytes;
    return s;
}

static void consumerFree(sconsumer *cn) {
    free(cn->name);
    free(cn);
}

static void groupFree(sgroup *g) {
    for (size_t i = 0; i < g->ncons; i++) consumerFree(g->cons[i]);
    free(g->cons);
    free(g->pelbuf);
    free(g->name);
    free(g);
}

void streamFree(ir_db *db, stream *s) {
    for (size_t i = 0; i < s->en; i++) free(s->e[s->eh + i].buf);
    free(s->e);
    free(s->nodes);
    for (size_t i = 0; i < s->ngroups; i++) groupFree(s->groups[i]);
    free(s->groups);
    if (db) db->bytes -= s->bytes;
    free(s);
}

uint64_t streamBytes(const stream *s) { return s->bytes; }

static void account(ir_db *db, stream *s, int64_t delta) {
    s->bytes += (uint64_t)delta;
    if (db) db->bytes += (uint64_t)delta;
}

static sentry *entryAt(const stream *s, size_t i) { return &s->e[s->eh + i]; }

/* Index of the first entry with id >= `id` (en if none). */
static size_t lowerBound(const stream *s, const streamID *id) {
    size_t lo = 0, hi = s->en;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idCmp(&entryAt(s, mid)->id, id) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Index of the first entry with id > `id`. */
static size_t upperBound(const stream *s, const streamID *id) {
    size_t lo = 0, hi = s->en;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idCmp(&entryAt(s, mid)->id, id) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static sentry *findEntry(const stream *s, const streamID *id) {
    size_t i = lowerBound(s, id);
    if (i < s->en && idCmp(&entryAt(s, i)->id, id) == 0) return entryAt(s, i);
    return NULL;
}

streamID streamFirstID(const stream *s) {
    streamID z = {0, 0};
    return s->en ? entryAt(s, 0)->id : z;
}

static streamID lastValidID(const stream *s) {
    streamID z = {0, 0};
    return s->en ? entryAt(s, s->en - 1)->id : z;
}

static snode *nodeAt(const stream *s, size_t i) { return &s->nodes[s->nh + i]; }

static size_t nodeIndex(const stream *s, uint64_t seq) {
    size_t lo = 0, hi = s->nn;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (nodeAt(s, mid)->seq < seq) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void nodeRemoveAt(stream *s, size_t i) {
    if (i == 0) {
        s->nh++;
    } else {
        memmove(nodeAt(s, i), nodeAt(s, i + 1), (s->nn - i - 1) * sizeof(snode));
    }
    s->nn--;
    if (!s->nn) s->nh = 0;
}

/* ---- the listpack sizes Redis's nodes would have --------------------------------------
 * Redis opens a new node when the tail's listpack plus the new entry's field
 * and value bytes reach stream-node-max-bytes, so the exact listpack size is
 * kept per node: `rest` (every element but the live and deleted counters,
 * which change size as they grow), the master entry's ID and a hash of its
 * field names (an entry with the master's fields is written without them:
 * Redis's SAMEFIELDS). */

static uint32_t backlenBytes(size_t l) {
    return l <= 127 ? 1 : l < 16383 ? 2 : l < 2097151 ? 3 : l < 268435455 ? 4 : 5;
}

static uint32_t lpIntBytes(int64_t v) {
    uint32_t enc = v >= 0 && v <= 127                 ? 1
                   : v >= -4096 && v <= 4095          ? 2
                   : v >= INT16_MIN && v <= INT16_MAX ? 3
                   : v >= -8388608 && v <= 8388607    ? 4
                   : v >= INT32_MIN && v <= INT32_MAX ? 5
                                                      : 9;
    return enc + 1;
}

/* A string element (one that reads as an integer is stored as one). */
static uint32_t lpStrBytes(const char *p, size_t len) {
    long long v;
    if (len && len <= 20 && string2ll(p, len, &v)) return lpIntBytes(v);
    size_t enc = len < 64 ? 1 + len : len < 4096 ? 2 + len : 5 + len;
    return (uint32_t)(enc + backlenBytes(enc));
}

static uint64_t fieldsHash(const char *buf, uint32_t nf) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over each field's length and bytes */
    const char *q = buf;
    for (uint32_t f = 0; f < nf; f++) {
        uint32_t l;
        memcpy(&l, q, 4);
        for (int i = 0; i < 4 + (int)l; i++) h = (h ^ (unsigned char)q[i]) * 1099511628211ULL;
        q += 4 + l;
        memcpy(&l, q, 4); /* skip the value */
        q += 4 + l;
    }
    return h;
}

static uint64_t nodeLpBytes(const snode *n) {
    return n->rest + lpIntBytes(n->live) + lpIntBytes((int64_t)(n->total - n->live));
}

/* A new node whose master entry is e. */
static void nodeInit(snode *n, const sentry *e) {
    n->live = n->total = 0;
    n->master = e->id;
    n->last = e->id;
    n->mnf = e->nf;
    n->mhash = fieldsHash(e->buf, e->nf);
    n->rest = 7 + lpIntBytes(e->nf) + lpIntBytes(0); /* header, end; master: fields, 0 */
    const char *q = e->buf;
    for (uint32_t f = 0; f < e->nf; f++) {
        uint32_t l;
        memcpy(&l, q, 4);
        n->rest += lpStrBytes(q + 4, l);
        q += 4 + l;
        memcpy(&l, q, 4);
        q += 4 + l;
    }
}

/* Entry e appended to node n, as Redis lays it out. */
static void nodeAppend(snode *n, const sentry *e) {
    int same = e->nf == n->mnf && fieldsHash(e->buf, e->nf) == n->mhash;
    uint64_t b = lpIntBytes(same ? 2 : 0) + lpIntBytes((int64_t)(e->id.ms - n->master.ms)) +
                 lpIntBytes((int64_t)(e->id.seq - n->master.seq));
    if (!same) b += lpIntBytes(e->nf);
    const char *q = e->buf;
    for (uint32_t f = 0; f < e->nf * 2; f++) {
        uint32_t l;
        memcpy(&l, q, 4);
        if (!same || (f & 1)) b += lpStrBytes(q + 4, l);
        q += 4 + l;
    }
    b += lpIntBytes(same ? (int64_t)e->nf + 3 : (int64_t)e->nf * 2 + 4);
    n->rest += b;
    n->live++;
    n->total++;
    if (idCmp(&e->id, &n->last) > 0) n->last = e->id;
}

static int64_t appendEntry(ir_db *db, stream *s, const streamID *id, client *c, int first, int nf) {
    size_t size = 0, totelelen = 0;
    for (int j = 0; j < nf * 2; j++) {
        size += 4 + c->argv[first + j].len;
        totelelen += c->argv[first + j].len;
    }
    if (s->eh + s->en == s->ecap) {
        if (s->eh && s->eh >= s->en) {
            memmove(s->e, entryAt(s, 0), s->en * sizeof(sentry));
            s->eh = 0;
        } else {
            size_t nc = s->ecap ? s->ecap * 2 : 8;
            s->e = ir_xrealloc(s->e, nc * sizeof(sentry));
            account(db, s, (int64_t)((nc - s->ecap) * sizeof(sentry)));
            s->ecap = nc;
        }
    }
    sentry *e = &s->e[s->eh + s->en];
    e->id = *id;
    e->nf = (uint32_t)nf;
    e->size = (uint32_t)size;
    e->buf = dbMalloc(size ? size : 1);
    char *w = e->buf;
    for (int j = 0; j < nf * 2; j++) {
        uint32_t l = (uint32_t)c->argv[first + j].len;
        memcpy(w, &l, 4);
        memcpy(w + 4, c->argv[first + j].ptr, l);
        w += 4 + l;
    }
    snode *tail = s->nn ? nodeAt(s, s->nn - 1) : NULL;
    long long max_bytes = encodingLimits.stream_node_max_bytes;
    if (max_bytes <= 0 || max_bytes > (1LL << 30)) max_bytes = 1LL << 30;
    long long max_entries = encodingLimits.stream_node_max_entries;
    if (!tail || (long long)(nodeLpBytes(tail) + totelelen) >= max_bytes ||
        (max_entries && tail->total >= (unsigned long long)max_entries)) {
        if (s->nh + s->nn == s->ncap) {
            if (s->nh) {
                memmove(s->nodes, nodeAt(s, 0), s->nn * sizeof(snode));
                s->nh = 0;
            } else {
                size_t nc = s->ncap ? s->ncap * 2 : 4;
                s->nodes = ir_xrealloc(s->nodes, nc * sizeof(snode));
                account(db, s, (int64_t)((nc - s->ncap) * sizeof(snode)));
                s->ncap = nc;
            }
        }
        tail = &s->nodes[s->nh + s->nn++];
        tail->seq = s->next_node_seq++;
        nodeInit(tail, e);
    }
    nodeAppend(tail, e);
    e->node = tail->seq;
    s->en++;
    account(db, s, (int64_t)dbBufBytes(size));
    s->last_id = *id;
    s->entries_added++;
    return 0;
}

/* Remove the entry at index i (its node's counters follow). */
static void removeEntryAt(ir_db *db, stream *s, size_t i, int drop_empty_node) {
    sentry *e = entryAt(s, i);
    size_t ni = nodeIndex(s, e->node);
    if (ni < s->nn && nodeAt(s, ni)->seq == e->node) {
        snode *n = nodeAt(s, ni);
        n->live--;
        if (!n->live && drop_empty_node) nodeRemoveAt(s, ni);
    }
    account(db, s, -(int64_t)dbBufBytes(e->size));
    free(e->buf);
    if (i == 0) {
        s->eh++;
    } else {
        memmove(entryAt(s, i), entryAt(s, i + 1), (s->en - i - 1) * sizeof(sentry));
    }
    s->en--;
    if (!s->en) s->eh = 0;
}

/* Walk an entry's fields. */
typedef struct fieldIter {
    const char *p;
} fieldIter;

static void fieldNext(fieldIter *it, const char **f, uint32_t *flen) {
    memcpy(flen, it->p, 4);
    *f = it->p + 4;
    it->p += 4 + *flen;
}

static void addReplyEntryFields(client *c, const sentry *e) {
    addReplyArrayLen(c, (long)e->nf * 2);
    fieldIter it = {e->buf};
    for (uint32_t j = 0; j < e->nf * 2; j++) {
        const char *f;
        uint32_t l;
        fieldNext(&it, &f, &l);
        addReplyBulk(c, f, l);
    }
}

static void addReplyEntry(client *c, const sentry *e) {
    addReplyArrayLen(c, 2);
    addReplyStreamID(c, &e->id);
    addReplyEntryFields(c, e);
}

/* ---- trimming -------------------------------------------------------------- */

enum { TRIM_NONE, TRIM_MAXLEN, TRIM_MINID };

typedef struct trimArgs {
    int strategy, approx, nomkstream, id_given, seq_given;
    long long maxlen, limit;
    streamID minid, id;
    int strategy_idx; /* argv index of the threshold */
    int limit_idx;    /* argv index of LIMIT's keyword, 0 = none */
} trimArgs;

static int64_t streamTrim(ir_db *db, stream *s, const trimArgs *a) {
    int64_t deleted = 0;
    if (a->strategy == TRIM_NONE) return 0;
    while (s->nn) {
        if (a->strategy == TRIM_MAXLEN && s->en <= (uint64_t)a->maxlen) break;
        snode *n = nodeAt(s, 0);
        int64_t entries = n->live;
        if (a->limit && deleted + entries > a->limit) break;
        int remove_node = a->strategy == TRIM_MAXLEN
                              ? (long long)(s->en - (uint64_t)entries) >= a->maxlen
                              : idCmp(&n->last, &a->minid) < 0;
        if (remove_node) {
            for (int64_t k = 0; k < entries; k++) removeEntryAt(db, s, 0, 0);
            if (s->nn && nodeAt(s, 0) == n) nodeRemoveAt(s, 0);
            deleted += entries;
            continue;
        }
        if (a->approx) break;
        uint64_t seq = n->seq;
        while (s->en && entryAt(s, 0)->node == seq) {
            int stop = a->strategy == TRIM_MAXLEN ? s->en <= (uint64_t)a->maxlen
                                                  : idCmp(&entryAt(s, 0)->id, &a->minid) >= 0;
            if (stop) break;
            removeEntryAt(db, s, 0, 0); /* a node whose entries are all marked deleted stays */
            deleted++;
        }
        break;
    }
    return deleted;
}

/* XADD/XTRIM options; returns the ID's index for XADD (or argc), -1 after an error reply. */
static int parseAddTrimArgs(client *c, trimArgs *a, int xadd) {
    memset(a, 0, sizeof(*a));
    int i = 2, limit_given = 0;
    for (; i < c->argc; i++) {
        int more = c->argc - 1 - i;
        const ir_arg *o = &c->argv[i];
        if (xadd && o->len == 1 && o->ptr[0] == '*') break;
        if ((argEq(c, i, "maxlen") || argEq(c, i, "minid")) && more) {
            int maxlen = argEq(c, i, "maxlen");
            if (a->strategy != TRIM_NONE) {
                addReplyError(
                    c,
                    "syntax error, MAXLEN and MINID options at the same time are not compatible");
                return -1;
            }
            a->approx = 0;
            const ir_arg *nx = &c->argv[i + 1];
            if (more >= 2 && nx->len == 1 && nx->ptr[0] == '~') {
                a->approx = 1;
                i++;
            } else if (more >= 2 && nx->len == 1 && nx->ptr[0] == '=') {
                i++;
            }
            if (maxlen) {
                if (getLongLongFromArg(c, i + 1, &a->maxlen) != 0) return -1;
                if (a->maxlen < 0) {
                    addReplyError(c, "The MAXLEN argument must be >= 0.");
                    return -1;
                }
            } else if (parseArgID(c, i + 1, &a->minid, 0, 1) != 0) {
                return -1;
            }
            i++;
            a->strategy = maxlen ? TRIM_MAXLEN : TRIM_MINID;
            a->strategy_idx = i;
        } else if (argEq(c, i, "limit") && more) {
            if (getLongLongFromArg(c, i + 1, &a->limit) != 0) return -1;
            if (a->limit < 0) {
                addReplyError(c, "The LIMIT argument must be >= 0.");
                return -1;
            }
            limit_given = 1;
            a->limit_idx = i;
            i++;
        } else if (xadd && argEq(c, i, "nomkstream")) {
            a->nomkstream = 1;
        } else if (xadd) {
            if (parseID(c, o->ptr, o->len, &a->id, 0, 1, &a->seq_given) != 0) return -1;
            a->id_given = 1;
            break;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return -1;
        }
    }
    if (a->limit && a->strategy == TRIM_NONE) {
        addReplyError(c,
                      "syntax error, LIMIT cannot be used without specifying a trimming strategy");
        return -1;
    }
    if (!xadd && a->strategy == TRIM_NONE) {
        addReplyError(c, "syntax error, XTRIM must be called with a trimming strategy");
        return -1;
    }
    if (limit_given) {
        if (!a->approx) {
            addReplyError(c, "syntax error, LIMIT cannot be used without the special ~ option");
            return -1;
        }
    } else {
        a->limit = 0;
        if (a->approx) { /* at most 100 nodes' worth, as Redis */
            a->limit = 100 * encodingLimits.stream_node_max_entries;
            if (a->limit <= 0) a->limit = 10000;
            if (a->limit > 1000000) a->limit = 1000000;
        }
    }
    return i;
}

/* ---- propagation ------------------------------------------------------------ */

static ir_str *pargv;
static size_t pargcap;

static ir_str *propArgs(size_t n) {
    if (n > pargcap) {
        pargcap = n < 32 ? 32 : n;
        pargv = ir_xrealloc(pargv, pargcap * sizeof(*pargv));
    }
    return pargv;
}

/* XADD/XTRIM as the replica must run it: the generated ID, and `~` trimming
 * as `=` with the resulting length or first ID (LIMIT dropped). */
static void propagateAddTrim(client *c, stream *s, const trimArgs *a, int idpos, const streamID *id,
                             int rewrite_id) {
    if (!replActive()) return;
    int rewrite_trim = a->approx && a->strategy != TRIM_NONE;
    if (!rewrite_id && !rewrite_trim) return;
    ir_str *v = propArgs((size_t)c->argc);
    char idbuf[48], thr[48];
    int n = 0;
    for (int i = 0; i < c->argc; i++) {
        if (a->limit_idx && (i == a->limit_idx || i == a->limit_idx + 1) && rewrite_trim) continue;
        if (rewrite_trim && i == a->strategy_idx - 1 && c->argv[i].len == 1 &&
            c->argv[i].ptr[0] == '~') {
            v[n++] = (ir_str)IR_STR("=");
        } else if (rewrite_trim && i == a->strategy_idx) {
            int l;
            if (a->strategy == TRIM_MAXLEN) {
                l = ll2string(thr, sizeof(thr), (long long)s->en);
            } else {
                streamID f = streamFirstID(s);
                l = streamFormatID(thr, sizeof(thr), &f);
            }
            v[n++] = (ir_str){thr, (size_t)l};
        } else if (rewrite_id && i == idpos) {
            int l = streamFormatID(idbuf, sizeof(idbuf), id);
            v[n++] = (ir_str){idbuf, (size_t)l};
        } else {
            v[n++] = replArg(c, i);
        }
    }
    replRewrite(c, n, v);
}

/* ---- XADD, XRANGE, XLEN, XDEL, XTRIM ----------------------------------------- */

static dbEntry *lookupStreamWrite(client *c, ir_db *db, dbkey *k, int *wrong) {
    dbEntry *e = lookupKey(db, k);
    *wrong = 0;
    if (e && e->type != OBJ_STREAM) {
        addReplyStr(c, shared.wrongtypeerr);
        *wrong = 1;
        return NULL;
    }
    return e;
}

static dbEntry *streamCreateKey(ir_db *db, const dbkey *k) {
    dbEntry *e = dbAdd(db, k, OBJ_STREAM, 0);
    e->v.stream = streamNew(db);
    return e;
}

/* XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...] */
void xaddCommand(client *c) {
    ir_db *db = dbFor(c);
    trimArgs a;
    int idpos = parseAddTrimArgs(c, &a, 1);
    if (idpos < 0) return;
    int fpos = idpos + 1;
    if (c->argc - fpos < 2 || (c->argc - fpos) % 2 == 1) {
        addReplyErrorArity(c);
        return;
    }
    if (a.id_given && a.seq_given && a.id.ms == 0 && a.id.seq == 0) {
        addReplyError(c, "The ID specified in XADD must be greater than 0-0");
        return;
    }
    dbkey k = argKey(db, c, 1);
    int wrong;
    dbEntry *e = lookupStreamWrite(c, db, &k, &wrong);
    if (wrong) return;
    if (!e) {
        if (a.nomkstream) {
            addReplyNull(c);
            return;
        }
        e = streamCreateKey(db, &k);
    }
    stream *s = e->v.stream;
    if (s->last_id.ms == UINT64_MAX && s->last_id.seq == UINT64_MAX) {
        addReplyError(c, "The stream has exhausted the last possible ID, unable to add more items");
        return;
    }
    streamID id;
    int edom = 0;
    if (a.id_given) {
        if (a.seq_given) {
            id = a.id;
        } else if (s->last_id.ms == a.id.ms) {
            if (s->last_id.seq == UINT64_MAX) edom = 1;
            id = s->last_id;
            id.seq++;
        } else {
            id = a.id;
        }
    } else {
        uint64_t ms = ir_mstime();
        if (ms > s->last_id.ms) {
            id.ms = ms;
            id.seq = 0;
        } else {
            id = s->last_id;
            idIncr(&id);
        }
    }
    if (edom || idCmp(&id, &s->last_id) <= 0) {
        addReplyError(
            c, "The ID specified in XADD is equal or smaller than the target stream top item");
        return;
    }
    appendEntry(db, s, &id, c, fpos, (c->argc - fpos) / 2);
    addReplyStreamID(c, &id);
    signalModifiedKey(c, db, k.p, k.len);
    notifyKeyspaceEvent(NOTIFY_STREAM, "xadd", k.p, k.len, db->id);
    if (a.strategy != TRIM_NONE && streamTrim(db, s, &a))
        notifyKeyspaceEvent(NOTIFY_STREAM, "xtrim", k.p, k.len, db->id);
    propagateAddTrim(c, s, &a, idpos, &id, !a.id_given || !a.seq_given);
    signalKeyAsReady(db, k.p, k.len);
}

/* Entries [lo, hi) of the range start..end, in index terms. */
static void rangeIndexes(const stream *s, const streamID *start, const streamID *end, size_t *lo,
                         size_t *hi) {
    *lo = lowerBound(s, start);
    *hi = upperBound(s, end);
    if (*hi < *lo) *hi = *lo;
}

static void xrangeGeneric(client *c, int rev) {
    streamID start, end;
    int sx, ex;
    long long count = -1;
    int si = rev ? 3 : 2, ei = rev ? 2 : 3;
    if (parseIntervalID(c, si, &start, &sx, 0) != 0) return;
    if (sx && idIncr(&start) != 0) {
        addReplyError(c, "invalid start ID for the interval");
        return;
    }
    if (parseIntervalID(c, ei, &end, &ex, UINT64_MAX) != 0) return;
    if (ex && idDecr(&end) != 0) {
        addReplyError(c, "invalid end ID for the interval");
        return;
    }
    for (int j = 4; j < c->argc; j++) {
        if (argEq(c, j, "count") && c->argc - j - 1 >= 1) {
            if (getLongLongFromArg(c, j + 1, &count) != 0) return;
            if (count < 0) count = 0;
            j++;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.emptyarray, OBJ_STREAM);
    if (!e) return;
    if (count == 0) {
        addReplyNullArray(c);
        return;
    }
    stream *s = e->v.stream;
    size_t lo, hi;
    rangeIndexes(s, &start, &end, &lo, &hi);
    size_t n = hi - lo;
    if (count > 0 && (unsigned long long)count < n) n = (size_t)count;
    addReplyArrayLen(c, (long)n);
    for (size_t i = 0; i < n; i++) addReplyEntry(c, entryAt(s, rev ? hi - 1 - i : lo + i));
}

void xrangeCommand(client *c) { xrangeGeneric(c, 0); }
void xrevrangeCommand(client *c) { xrangeGeneric(c, 1); }

/* XLEN key */
void xlenCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_STREAM);
    if (!e) return;
    addReplyLongLong(c, (long long)e->v.stream->en);
}

/* XDEL key id [id ...] */
void xdelCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    int wrong;
    dbEntry *e = lookupStreamWrite(c, db, &k, &wrong);
    if (wrong) return;
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    streamID id;
    for (int j = 2; j < c->argc; j++) /* every ID valid before anything goes */
        if (parseArgID(c, j, &id, 0, 1) != 0) return;
    stream *s = e->v.stream;
    long long deleted = 0;
    for (int j = 2; j < c->argc; j++) {
        parseArgIDQuiet(c, j, &id);
        size_t i = lowerBound(s, &id);
        if (i >= s->en || idCmp(&entryAt(s, i)->id, &id) != 0) continue;
        removeEntryAt(db, s, i, 1);
        if (idCmp(&id, &s->max_deleted) > 0) s->max_deleted = id;
        deleted++;
    }
    if (deleted) {
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_STREAM, "xdel", k.p, k.len, db->id);
    }
    addReplyLongLong(c, deleted);
}

/* XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count] */
void xtrimCommand(client *c) {
    ir_db *db = dbFor(c);
    trimArgs a;
    if (parseAddTrimArgs(c, &a, 0) < 0) return;
    dbkey k = argKey(db, c, 1);
    int wrong;
    dbEntry *e = lookupStreamWrite(c, db, &k, &wrong);
    if (wrong) return;
    if (!e) {
        addReplyStr(c, shared.czero);
        return;
    }
    stream *s = e->v.stream;
    int64_t deleted = streamTrim(db, s, &a);
    if (deleted) {
        notifyKeyspaceEvent(NOTIFY_STREAM, "xtrim", k.p, k.len, db->id);
        propagateAddTrim(c, s, &a, -1, NULL, 0);
        signalModifiedKey(c, db, k.p, k.len);
    }
    addReplyLongLong(c, deleted);
}

/* ---- groups and consumers ------------------------------------------------------ */

static int nameCmp(const char *a, size_t al, const char *b, size_t bl) {
    int r = memcmp(a, b, al < bl ? al : bl);
    if (r) return r;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

static size_t groupIndex(const stream *s, const char *name, size_t len, int *found) {
    size_t lo = 0, hi = s->ngroups;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = nameCmp(s->groups[mid]->name, s->groups[mid]->nlen, name, len);
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = lo < s->ngroups && nameCmp(s->groups[lo]->name, s->groups[lo]->nlen, name, len) == 0;
    return lo;
}

static sgroup *lookupGroup(const stream *s, const char *name, size_t len) {
    int found;
    size_t i = groupIndex(s, name, len, &found);
    return found ? s->groups[i] : NULL;
}

static sgroup *groupCreate(ir_db *db, stream *s, const char *name, size_t len, const streamID *id,
                           long long entries_read) {
    int found;
    size_t i = groupIndex(s, name, len, &found);
    if (found) return NULL;
    sgroup *g = dbMalloc(sizeof(*g));
    memset(g, 0, sizeof(*g));
    g->name = dbMalloc(len + 1);
    memcpy(g->name, name, len);
    g->name[len] = '\0';
    g->nlen = len;
    g->last_id = *id;
    g->entries_read = entries_read;
    if (s->ngroups == s->gcap) {
        s->gcap = s->gcap ? s->gcap * 2 : 4;
        s->groups = ir_xrealloc(s->groups, s->gcap * sizeof(*s->groups));
    }
    memmove(&s->groups[i + 1], &s->groups[i], (s->ngroups - i) * sizeof(*s->groups));
    s->groups[i] = g;
    s->ngroups++;
    account(db, s, (int64_t)(sizeof(*g) + len + 2 * DB_MALLOC_OVERHEAD));
    return g;
}

static size_t consumerIndex(const sgroup *g, const char *name, size_t len, int *found) {
    size_t lo = 0, hi = g->ncons;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = nameCmp(g->cons[mid]->name, g->cons[mid]->nlen, name, len);
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = lo < g->ncons && nameCmp(g->cons[lo]->name, g->cons[lo]->nlen, name, len) == 0;
    return lo;
}

static sconsumer *lookupConsumer(const sgroup *g, const char *name, size_t len, int refresh) {
    int found;
    size_t i = consumerIndex(g, name, len, &found);
    if (!found) return NULL;
    if (refresh) g->cons[i]->seen_time = (int64_t)ir_mstime();
    return g->cons[i];
}

/* Add a consumer (NULL if it exists). */
static sconsumer *consumerCreate(ir_db *db, stream *s, sgroup *g, const char *name, size_t len,
                                 int64_t seen) {
    int found;
    size_t i = consumerIndex(g, name, len, &found);
    if (found) return NULL;
    sconsumer *cn = dbMalloc(sizeof(*cn));
    cn->name = dbMalloc(len + 1);
    memcpy(cn->name, name, len);
    cn->name[len] = '\0';
    cn->nlen = len;
    cn->seen_time = seen;
    cn->npending = 0;
    if (g->ncons == g->conscap) {
        g->conscap = g->conscap ? g->conscap * 2 : 4;
        g->cons = ir_xrealloc(g->cons, g->conscap * sizeof(*g->cons));
    }
    memmove(&g->cons[i + 1], &g->cons[i], (g->ncons - i) * sizeof(*g->cons));
    g->cons[i] = cn;
    g->ncons++;
    account(db, s, (int64_t)(sizeof(*cn) + len + 2 * DB_MALLOC_OVERHEAD));
    return cn;
}

static sconsumer *consumerCreateNotify(client *c, ir_db *db, stream *s, sgroup *g, int key_arg,
                                       const char *name, size_t len) {
    sconsumer *cn = consumerCreate(db, s, g, name, len, (int64_t)ir_mstime());
    if (cn) {
        replMarkDirty();
        notifyKeyspaceEvent(NOTIFY_STREAM, "xgroup-createconsumer", c->argv[key_arg].ptr,
                            c->argv[key_arg].len, db->id);
    }
    return cn;
}

/* Index of the first PEL entry with id >= `id`. */
static size_t pelLower(const sgroup *g, const streamID *id) {
    size_t lo = 0, hi = g->npel;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idCmp(&g->pel[mid].id, id) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static spending *pelFind(const sgroup *g, const streamID *id) {
    size_t i = pelLower(g, id);
    return i < g->npel && idCmp(&g->pel[i].id, id) == 0 ? &g->pel[i] : NULL;
}

static spending *pelInsert(ir_db *db, stream *s, sgroup *g, const streamID *id) {
    size_t i = pelLower(g, id);
    size_t off = g->npel ? (size_t)(g->pel - g->pelbuf) : 0;
    if (off + g->npel == g->pelcap) {
        if (off) { /* acknowledged entries left room at the front */
            memmove(g->pelbuf, g->pel, g->npel * sizeof(*g->pel));
        } else {
            size_t nc = g->pelcap ? g->pelcap * 2 : 8;
            g->pelbuf = ir_xrealloc(g->pelbuf, nc * sizeof(*g->pel));
            account(db, s, (int64_t)((nc - g->pelcap) * sizeof(*g->pel)));
            g->pelcap = nc;
        }
        g->pel = g->pelbuf;
    } else if (!g->npel) {
        g->pel = g->pelbuf;
    }
    memmove(&g->pel[i + 1], &g->pel[i], (g->npel - i) * sizeof(*g->pel));
    g->npel++;
    spending *p = &g->pel[i];
    p->id = *id;
    p->consumer = NULL;
    p->delivery_count = 1;
    p->delivery_time = (int64_t)ir_mstime();
    return p;
}

static void pelRemoveAt(sgroup *g, size_t i) {
    if (g->pel[i].consumer) g->pel[i].consumer->npending--;
    if (i < g->npel / 2) { /* the shorter side moves: acks in order cost O(1) */
        memmove(&g->pel[1], &g->pel[0], i * sizeof(*g->pel));
        g->pel++;
    } else {
        memmove(&g->pel[i], &g->pel[i + 1], (g->npel - i - 1) * sizeof(*g->pel));
    }
    g->npel--;
}

static void pelSetConsumer(spending *p, sconsumer *cn) {
    if (p->consumer == cn) return;
    if (p->consumer) p->consumer->npending--;
    p->consumer = cn;
    if (cn) cn->npending++;
}

static void consumerDelete(ir_db *db, stream *s, sgroup *g, sconsumer *cn) {
    size_t w = 0;
    for (size_t r = 0; r < g->npel; r++)
        if (g->pel[r].consumer != cn) g->pel[w++] = g->pel[r];
    g->npel = w;
    int found;
    size_t i = consumerIndex(g, cn->name, cn->nlen, &found);
    memmove(&g->cons[i], &g->cons[i + 1], (g->ncons - i - 1) * sizeof(*g->cons));
    g->ncons--;
    account(db, s, -(int64_t)(sizeof(*cn) + cn->nlen + 2 * DB_MALLOC_OVERHEAD));
    consumerFree(cn);
}

static int rangeHasTombstones(const stream *s, const streamID *start) {
    if (!s->en || idIsZero(&s->max_deleted)) return 0;
    streamID first = streamFirstID(s);
    if (idCmp(&first, &s->max_deleted) > 0) return 0;
    streamID st = {0, 0};
    if (start) st = *start;
    return idCmp(&st, &s->max_deleted) <= 0;
}

static long long estimateDistance(const stream *s, const streamID *id) {
    if (!s->entries_added) return 0;
    if (!s->en && idCmp(id, &s->last_id) < 1) return (long long)s->entries_added;
    int cl = idCmp(id, &s->last_id);
    if (cl == 0) return (long long)s->entries_added;
    if (cl > 0) return ENTRIES_READ_INVALID;
    streamID first = streamFirstID(s);
    int cf = idCmp(id, &first);
    if (idIsZero(&s->max_deleted) || idCmp(&s->max_deleted, &first) < 0) {
        if (cf < 0) return (long long)(s->entries_added - s->en);
        if (cf == 0) return (long long)(s->entries_added - s->en + 1);
    }
    return ENTRIES_READ_INVALID;
}

static void addReplyLag(client *c, const stream *s, const sgroup *g) {
    if (!s->entries_added) {
        addReplyLongLong(c, 0);
    } else if (g->entries_read != ENTRIES_READ_INVALID && !rangeHasTombstones(s, &g->last_id)) {
        addReplyLongLong(c, (long long)s->entries_added - g->entries_read);
    } else {
        long long r = estimateDistance(s, &g->last_id);
        if (r != ENTRIES_READ_INVALID) addReplyLongLong(c, (long long)s->entries_added - r);
        else addReplyNull(c);
    }
}

/* XCLAIM key group consumer 0 id TIME t RETRYCOUNT n FORCE JUSTID LASTID last, as Redis 7.0 sends it. */
static void propagateXclaim(client *c, ir_db *db, int key_arg, const sgroup *g, const streamID *id,
                            const spending *p) {
    (void)db;
    if (!replActive()) return;
    char idb[48], tb[24], rb[24], lb[48];
    int il = streamFormatID(idb, sizeof(idb), id);
    int tl = ll2string(tb, sizeof(tb), p->delivery_time);
    int rl = ll2string(rb, sizeof(rb), (long long)p->delivery_count);
    int ll = streamFormatID(lb, sizeof(lb), &g->last_id);
    ir_str v[14] = {IR_STR("XCLAIM"),     replArg(c, key_arg),
                    {g->name, g->nlen},   {p->consumer->name, p->consumer->nlen},
                    IR_STR("0"),          {idb, (size_t)il},
                    IR_STR("TIME"),       {tb, (size_t)tl},
                    IR_STR("RETRYCOUNT"), {rb, (size_t)rl},
                    IR_STR("FORCE"),      IR_STR("JUSTID"),
                    IR_STR("LASTID"),     {lb, (size_t)ll}};
    replAlso(c, 14, v);
}

static void propagateGroupID(client *c, int key_arg, const sgroup *g) {
    if (!replActive()) return;
    char lb[48], eb[24];
    int ll = streamFormatID(lb, sizeof(lb), &g->last_id);
    int el = ll2string(eb, sizeof(eb), g->entries_read);
    ir_str v[7] = {IR_STR("XGROUP"), IR_STR("SETID"),       replArg(c, key_arg), {g->name, g->nlen},
                   {lb, (size_t)ll}, IR_STR("ENTRIESREAD"), {eb, (size_t)el}};
    replAlso(c, 7, v);
}

static void propagateConsumerCreation(client *c, int key_arg, const sgroup *g,
                                      const sconsumer *cn) {
    if (!replActive()) return;
    ir_str v[5] = {IR_STR("XGROUP"),
                   IR_STR("CREATECONSUMER"),
                   replArg(c, key_arg),
                   {g->name, g->nlen},
                   {cn->name, cn->nlen}};
    replAlso(c, 5, v);
}

/* ---- XREAD / XREADGROUP --------------------------------------------------------- */

static streamID *xids;
static size_t xidcap;

/* Serve entries after `after` to a group consumer (or plain XREAD when g is NULL). */
static void serveNew(client *c, ir_db *db, stream *s, int key_arg, const streamID *after,
                     long long count, sgroup *g, sconsumer *cn, int noack) {
    size_t lo = upperBound(s, after), n = s->en - lo;
    if (count > 0 && (unsigned long long)count < n) n = (size_t)count;
    addReplyArrayLen(c, (long)n);
    int propagate_last = 0;
    for (size_t i = 0; i < n; i++) {
        sentry *e = entryAt(s, lo + i);
        if (g && idCmp(&e->id, &g->last_id) > 0) {
            if (g->entries_read != ENTRIES_READ_INVALID && !rangeHasTombstones(s, &e->id))
                g->entries_read++;
            else if (s->entries_added) g->entries_read = estimateDistance(s, &e->id);
            g->last_id = e->id;
            if (noack) propagate_last = 1;
        }
        addReplyEntry(c, e);
        if (g && !noack) {
            spending *p = pelFind(g, &e->id);
            if (!p) p = pelInsert(db, s, g, &e->id);
            pelSetConsumer(p, cn);
            p->delivery_time = (int64_t)ir_mstime();
            p->delivery_count = 1;
            propagateXclaim(c, db, key_arg, g, &e->id, p);
        }
    }
    if (g && propagate_last) propagateGroupID(c, key_arg, g);
}

/* A consumer's history: its pending entries from `start` on. */
static void serveHistory(client *c, stream *s, sgroup *g, sconsumer *cn, const streamID *start,
                         long long count) {
    size_t from = pelLower(g, start), n = 0;
    for (size_t i = from; i < g->npel && (count <= 0 || (long long)n < count); i++)
        if (g->pel[i].consumer == cn) n++;
    addReplyArrayLen(c, (long)n);
    size_t done = 0;
    int64_t now = (int64_t)ir_mstime();
    for (size_t i = from; i < g->npel && done < n; i++) {
        spending *p = &g->pel[i];
        if (p->consumer != cn) continue;
        sentry *e = findEntry(s, &p->id);
        if (e) {
            addReplyEntry(c, e);
            p->delivery_time = now;
            p->delivery_count++;
        } else {
            addReplyArrayLen(c, 2);
            addReplyStreamID(c, &p->id);
            addReplyNullArray(c);
        }
        done++;
    }
}

/* Replace argv[i] with the text of id (a blocked XREAD's `$`). */
static void rewriteArgID(client *c, int i, const streamID *id) {
    char buf[48];
    int n = streamFormatID(buf, sizeof(buf), id);
    if (c->argv[i].owned) free(c->argv[i].ptr);
    char *p = dbMalloc((size_t)n + 1);
    memcpy(p, buf, (size_t)n + 1);
    c->argv[i].ptr = p;
    c->argv[i].len = (size_t)n;
    c->argv[i].owned = 1;
}

static void xreadGeneric(client *c, int group_mode) {
    ir_db *db = dbFor(c);
    long long timeout = -1, count = 0;
    int streams_arg = 0, nstreams = 0, noack = 0, gname = 0, cname = 0;
    for (int i = 1; i < c->argc; i++) {
        int more = c->argc - i - 1;
        if (argEq(c, i, "block") && more) {
            if (c->flags & CLIENT_SCRIPT) { /* as Redis: BLOCK makes no sense inside a script */
                addReplyErrorFormat(c,
                                    "%.64s command is not allowed with BLOCK option from scripts",
                                    c->argv[0].ptr);
                return;
            }
            i++;
            long long t;
            if (!string2ll(c->argv[i].ptr, c->argv[i].len, &t)) {
                addReplyError(c, "timeout is not an integer or out of range");
                return;
            }
            if (t < 0) {
                addReplyError(c, "timeout is negative");
                return;
            }
            timeout = t;
        } else if (argEq(c, i, "count") && more) {
            i++;
            if (getLongLongFromArg(c, i, &count) != 0) return;
            if (count < 0) count = 0;
        } else if (argEq(c, i, "streams") && more) {
            streams_arg = i + 1;
            nstreams = c->argc - streams_arg;
            if (nstreams % 2) {
                addReplyError(c, "Unbalanced XREAD list of streams: for each stream key an ID or "
                                 "'$' must be specified.");
                return;
            }
            nstreams /= 2;
            break;
        } else if (argEq(c, i, "group") && more >= 2) {
            if (!group_mode) {
                addReplyError(
                    c,
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.");
                return;
            }
            gname = i + 1;
            cname = i + 2;
            i += 2;
        } else if (argEq(c, i, "noack")) {
            if (!group_mode) {
                addReplyError(
                    c,
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
                return;
            }
            noack = 1;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (!streams_arg) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    if (group_mode && !gname) {
        addReplyError(c, "Missing GROUP option for XREADGROUP");
        return;
    }
    uint64_t deadline = 0;
    if (timeout > 0) {
        uint64_t now = ir_mstime();
        if ((unsigned long long)timeout > (unsigned long long)LLONG_MAX - now) {
            addReplyError(c, "timeout is out of range");
            return;
        }
        deadline = now + (uint64_t)timeout;
    }
    if ((size_t)nstreams > xidcap) {
        xidcap = (size_t)nstreams;
        xids = ir_xrealloc(xids, xidcap * sizeof(*xids));
    }
    /* resolve keys, groups and IDs; errors before anything is served */
    for (int j = 0; j < nstreams; j++) {
        int ka = streams_arg + j, ia = streams_arg + nstreams + j;
        dbkey k = argKey(db, c, ka);
        dbEntry *e = lookupKey(db, &k);
        if (group_mode && (c->flags & CLIENT_BLOCKED)) { /* woken: what it waited on may be gone */
            if (!e || e->type != OBJ_STREAM) {
                addReplyError(c, "-UNBLOCKED the stream key no longer exists");
                return;
            }
            if (!lookupGroup(e->v.stream, c->argv[gname].ptr, c->argv[gname].len)) {
                addReplyError(
                    c, "-NOGROUP the consumer group this client was blocked on no longer exists");
                return;
            }
        }
        if (e && e->type != OBJ_STREAM) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
        if (group_mode &&
            (!e || !lookupGroup(e->v.stream, c->argv[gname].ptr, c->argv[gname].len))) {
            addReplyErrorFormat(
                c,
                "-NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with GROUP option",
                c->argv[ka].ptr, c->argv[gname].ptr);
            return;
        }
        const ir_arg *ida = &c->argv[ia];
        if (ida->len == 1 && ida->ptr[0] == '$') {
            if (group_mode) {
                addReplyError(
                    c, "The $ ID is meaningless in the context of XREADGROUP: you want to read the "
                       "history of this consumer by specifying a proper ID, or use the > ID to get "
                       "new messages. The $ ID would just return an empty result set.");
                return;
            }
            streamID z = {0, 0};
            xids[j] = e ? e->v.stream->last_id : z;
            continue;
        }
        if (ida->len == 1 && ida->ptr[0] == '>') {
            if (!group_mode) {
                addReplyError(c, "The > ID can be specified only when calling XREADGROUP using the "
                                 "GROUP <group> <consumer> option.");
                return;
            }
            xids[j].ms = xids[j].seq = UINT64_MAX;
            continue;
        }
        if (parseArgID(c, ia, &xids[j], 0, 1) != 0) return;
    }
    if (count == 0 && (c->flags & CLIENT_BLOCKED)) count = XREAD_BLOCKED_DEFAULT_COUNT;
    /* which streams answer now */
    long nserve = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (!nserve) break;
            if (c->resp == 2) addReplyArrayLen(c, nserve);
            else addReplyMapLen(c, nserve);
        }
        for (int j = 0; j < nstreams; j++) {
            int ka = streams_arg + j;
            dbkey k = argKey(db, c, ka);
            /* Redis looks each key up twice (hits, misses and keymiss events count both) */
            dbEntry *e = pass == 0 ? lookupKey(db, &k) : lookupKeyNoStats(db, &k);
            if (!e) continue;
            stream *s = e->v.stream;
            sgroup *g = group_mode ? lookupGroup(s, c->argv[gname].ptr, c->argv[gname].len) : NULL;
            int history = 0, serve = 0;
            if (g) {
                if (xids[j].ms != UINT64_MAX || xids[j].seq != UINT64_MAX) {
                    serve = history = 1;
                } else if (s->en) {
                    streamID maxid = lastValidID(s);
                    serve = idCmp(&maxid, &g->last_id) > 0;
                }
            } else if (s->en) {
                streamID maxid = lastValidID(s);
                serve = idCmp(&maxid, &xids[j]) > 0;
            }
            if (!serve) continue;
            if (pass == 0) {
                nserve++;
                continue;
            }
            if (c->resp == 2) addReplyArrayLen(c, 2);
            addReplyBulk(c, c->argv[ka].ptr, c->argv[ka].len);
            sconsumer *cn = NULL;
            if (g) {
                cn = lookupConsumer(g, c->argv[cname].ptr, c->argv[cname].len, 1);
                if (!cn) {
                    cn = consumerCreateNotify(c, db, s, g, ka, c->argv[cname].ptr,
                                              c->argv[cname].len);
                    if (noack) propagateConsumerCreation(c, ka, g, cn);
                }
                replMarkDirty();
            }
            if (history) {
                streamID from = xids[j]; /* entries after the one given */
                idIncr(&from);
                serveHistory(c, s, g, cn, &from, count);
            }
            if (!history) serveNew(c, db, s, ka, g ? &g->last_id : &xids[j], count, g, cn, noack);
        }
    }
    replPrevent(c);
    if (nserve) return;
    if (timeout != -1) {
        if (!blockingAllowed(c)) {
            addReplyNullArray(c);
            return;
        }
        for (int j = 0; j < nstreams; j++) { /* `$` means what is last now */
            const ir_arg *ida = &c->argv[streams_arg + nstreams + j];
            if (ida->len == 1 && ida->ptr[0] == '$')
                rewriteArgID(c, streams_arg + nstreams + j, &xids[j]);
        }
        blockForKeys(c, db, streams_arg, nstreams, 1, deadline);
        return;
    }
    addReplyNullArray(c);
}

/* XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...] */
void xreadCommand(client *c) { xreadGeneric(c, 0); }
/* XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS key [key ...] id [id ...] */
void xreadgroupCommand(client *c) { xreadGeneric(c, 1); }

/* ---- XGROUP, XSETID ------------------------------------------------------------------ */

static void subcommandSyntaxError(client *c, const char *cmd) {
    addReplyErrorFormat(
        c, "unknown subcommand or wrong number of arguments for '%.128s'. Try %s HELP.",
        c->argv[1].ptr, cmd);
}

static void replyHelp(client *c, const char *cmd, const char *const *lines) {
    long n = 0;
    while (lines[n]) n++;
    addReplyArrayLen(c, n + 3);
    char head[128];
    snprintf(head, sizeof(head),
             "%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", cmd);
    addReplyStatus(c, head);
    for (long i = 0; i < n; i++) addReplyStatus(c, lines[i]);
    addReplyStatus(c, "HELP");
    addReplyStatus(c, "    Prints this help.");
}

static int subArity(client *c, const char *container, int arity) {
    if ((arity > 0 && c->argc != arity) || (arity < 0 && c->argc < -arity)) {
        addReplySubcommandArity(c, container);
        return -1;
    }
    return 0;
}

/* XGROUP is a container without the write flag (its subcommands have it):
 * a change goes to replicas as the command itself. */
static void propagateVerbatim(client *c) {
    if (!replActive()) return;
    ir_str *v = propArgs((size_t)c->argc);
    for (int i = 0; i < c->argc; i++) v[i] = replArg(c, i);
    replRewrite(c, c->argc, v);
}

/* XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP ... */
void xgroupCommand(client *c) {
    ir_db *db = dbFor(c);
    static const struct {
        const char *name;
        int arity;
    } subs[] = {{"create", -5},        {"setid", -5},      {"destroy", 4},
                {"createconsumer", 5}, {"delconsumer", 5}, {"help", 2}};
    int sub = -1;
    for (int i = 0; i < 6; i++)
        if (argEq(c, 1, subs[i].name)) sub = i;
    if (sub < 0) {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try XGROUP HELP.", c->argv[1].ptr);
        return;
    }
    if (subArity(c, "xgroup", subs[sub].arity) != 0) return;
    if (sub == 5) {
        static const char *const help[] = {
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            NULL};
        replyHelp(c, "XGROUP", help);
        return;
    }
    int create = sub == 0, setid = sub == 1, mkstream = 0;
    long long entries_read = ENTRIES_READ_INVALID;
    for (int i = 5; i < c->argc;) {
        if (create && argEq(c, i, "mkstream")) {
            mkstream = 1;
            i++;
        } else if ((create || setid) && argEq(c, i, "entriesread") && i + 1 < c->argc) {
            if (getLongLongFromArg(c, i + 1, &entries_read) != 0) return;
            if (entries_read < 0 && entries_read != ENTRIES_READ_INVALID) {
                addReplyError(c, "value for ENTRIESREAD must be positive or -1");
                return;
            }
            i += 2;
        } else {
            subcommandSyntaxError(c, "XGROUP");
            return;
        }
    }
    dbkey k = argKey(db, c, 2);
    /* a write's lookup (no hit, miss or keymiss), as Redis's lookupKeyWrite: the
     * container itself carries no write flag for lookupKey to see */
    dbEntry *e = lookupKeyNoStats(db, &k);
    if (e && e->type != OBJ_STREAM) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    stream *s = e ? e->v.stream : NULL;
    const char *gn = c->argv[3].ptr;
    size_t gl = c->argv[3].len;
    sgroup *g = NULL;
    if (!mkstream) {
        if (!s) {
            addReplyError(
                c, "The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
                   "want to use the MKSTREAM option to create an empty stream automatically.");
            return;
        }
        g = lookupGroup(s, gn, gl);
        if (!g && (setid || sub == 3 || sub == 4)) {
            addReplyErrorFormat(c, "-NOGROUP No such consumer group '%s' for key name '%s'", gn,
                                k.p);
            return;
        }
    }
    if (create) {
        if (c->argc > 8) {
            subcommandSyntaxError(c, "XGROUP");
            return;
        }
        streamID id;
        if (c->argv[4].len == 1 && c->argv[4].ptr[0] == '$') {
            streamID z = {0, 0};
            id = s ? s->last_id : z;
        } else if (parseArgID(c, 4, &id, 0, 1) != 0) {
            return;
        }
        if (!s) {
            e = streamCreateKey(db, &k);
            s = e->v.stream;
            signalModifiedKey(c, db, k.p, k.len);
        }
        if (groupCreate(db, s, gn, gl, &id, entries_read)) {
            addReplyStr(c, shared.ok);
            replMarkDirty();
            propagateVerbatim(c);
            notifyKeyspaceEvent(NOTIFY_STREAM, "xgroup-create", k.p, k.len, db->id);
        } else {
            addReplyError(c, "-BUSYGROUP Consumer Group name already exists");
        }
    } else if (setid) {
        if (c->argc != 5 && c->argc != 7) {
            subcommandSyntaxError(c, "XGROUP");
            return;
        }
        streamID id;
        if (c->argv[4].len == 1 && c->argv[4].ptr[0] == '$') id = s->last_id;
        else if (parseArgID(c, 4, &id, 0, 0) != 0) return;
        g->last_id = id;
        g->entries_read = entries_read;
        addReplyStr(c, shared.ok);
        replMarkDirty();
        propagateVerbatim(c);
        notifyKeyspaceEvent(NOTIFY_STREAM, "xgroup-setid", k.p, k.len, db->id);
    } else if (sub == 2) { /* DESTROY */
        if (g) {
            int found;
            size_t i = groupIndex(s, gn, gl, &found);
            memmove(&s->groups[i], &s->groups[i + 1], (s->ngroups - i - 1) * sizeof(*s->groups));
            s->ngroups--;
            account(db, s, -(int64_t)(sizeof(*g) + g->nlen + 2 * DB_MALLOC_OVERHEAD));
            for (size_t j = 0; j < g->ncons; j++)
                account(db, s,
                        -(int64_t)(sizeof(sconsumer) + g->cons[j]->nlen + 2 * DB_MALLOC_OVERHEAD));
            account(db, s, -(int64_t)(g->pelcap * sizeof(*g->pel)));
            groupFree(g);
            addReplyStr(c, shared.cone);
            replMarkDirty();
            propagateVerbatim(c);
            notifyKeyspaceEvent(NOTIFY_STREAM, "xgroup-destroy", k.p, k.len, db->id);
            signalKeyAsReady(db, k.p, k.len);
        } else {
            addReplyStr(c, shared.czero);
        }
    } else if (sub == 3) { /* CREATECONSUMER */
        sconsumer *cn = consumerCreateNotify(c, db, s, g, 2, c->argv[4].ptr, c->argv[4].len);
        if (cn) propagateVerbatim(c);
        addReplyLongLong(c, cn ? 1 : 0);
    } else { /* DELCONSUMER */
        long long pending = 0;
        sconsumer *cn = lookupConsumer(g, c->argv[4].ptr, c->argv[4].len, 0);
        if (cn) {
            pending = (long long)cn->npending;
            consumerDelete(db, s, g, cn);
            replMarkDirty();
            propagateVerbatim(c);
            notifyKeyspaceEvent(NOTIFY_STREAM, "xgroup-delconsumer", k.p, k.len, db->id);
        }
        addReplyLongLong(c, pending);
    }
}

/* XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id] */
void xsetidCommand(client *c) {
    ir_db *db = dbFor(c);
    streamID id, maxdel = {0, 0};
    long long entries_added = -1;
    if (parseArgID(c, 2, &id, 0, 1) != 0) return;
    for (int i = 3; i < c->argc;) {
        int more = c->argc - 1 - i;
        if (argEq(c, i, "entriesadded") && more) {
            if (getLongLongFromArg(c, i + 1, &entries_added) != 0) return;
            if (entries_added < 0) {
                addReplyError(c, "entries_added must be positive");
                return;
            }
            i += 2;
        } else if (argEq(c, i, "maxdeletedid") && more) {
            if (parseArgID(c, i + 1, &maxdel, 0, 1) != 0) return;
            if (idCmp(&id, &maxdel) < 0) {
                addReplyError(
                    c,
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
                return;
            }
            i += 2;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.nokeyerr, OBJ_STREAM);
    if (!e) return;
    stream *s = e->v.stream;
    if (s->en > 0) {
        streamID maxid = lastValidID(s);
        if (idCmp(&id, &maxid) < 0) {
            addReplyError(c,
                          "The ID specified in XSETID is smaller than the target stream top item");
            return;
        }
        if (entries_added != -1 && s->en > (uint64_t)entries_added) {
            addReplyError(
                c,
                "The entries_added specified in XSETID is smaller than the target stream length");
            return;
        }
    }
    s->last_id = id;
    if (entries_added != -1) s->entries_added = (uint64_t)entries_added;
    if (!idIsZero(&maxdel)) s->max_deleted = maxdel;
    addReplyStr(c, shared.ok);
    signalModifiedKey(c, db, c->argv[1].ptr, c->argv[1].len);
    notifyKeyspaceEvent(NOTIFY_STREAM, "xsetid", c->argv[1].ptr, c->argv[1].len, db->id);
}

/* ---- XACK, XPENDING, XCLAIM, XAUTOCLAIM ---------------------------------------------- */

/* XACK key group id [id ...] */
void xackCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    int wrong;
    dbEntry *e = lookupStreamWrite(c, db, &k, &wrong);
    if (wrong) return;
    sgroup *g = e ? lookupGroup(e->v.stream, c->argv[2].ptr, c->argv[2].len) : NULL;
    if (!g) {
        addReplyStr(c, shared.czero);
        return;
    }
    streamID id;
    for (int j = 3; j < c->argc; j++)
        if (parseArgID(c, j, &id, 0, 1) != 0) return;
    long long acked = 0;
    for (int j = 3; j < c->argc; j++) {
        parseArgIDQuiet(c, j, &id);
        size_t i = pelLower(g, &id);
        if (i < g->npel && idCmp(&g->pel[i].id, &id) == 0) {
            pelRemoveAt(g, i);
            acked++;
        }
    }
    if (acked) replMarkDirty();
    addReplyLongLong(c, acked);
}

/* XPENDING key group [[IDLE min-idle] start end count [consumer]] */
void xpendingCommand(client *c) {
    int justinfo = c->argc == 3;
    streamID start = {0, 0}, end = {0, 0};
    long long count = 0, minidle = 0;
    int consumer_arg = 0;
    if (c->argc != 3 && (c->argc < 6 || c->argc > 9)) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    if (c->argc >= 6) {
        int si = 3;
        if (argEq(c, 3, "idle")) {
            if (getLongLongFromArg(c, 4, &minidle) != 0) return;
            if (c->argc < 8) {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
            si += 2;
        }
        if (getLongLongFromArg(c, si + 2, &count) != 0) return;
        if (count < 0) count = 0;
        int sx, ex;
        if (parseIntervalID(c, si, &start, &sx, 0) != 0) return;
        if (sx && idIncr(&start) != 0) {
            addReplyError(c, "invalid start ID for the interval");
            return;
        }
        if (parseIntervalID(c, si + 1, &end, &ex, UINT64_MAX) != 0) return;
        if (ex && idDecr(&end) != 0) {
            addReplyError(c, "invalid end ID for the interval");
            return;
        }
        if (si + 3 < c->argc) consumer_arg = si + 3;
    }
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_STREAM) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    sgroup *g = e ? lookupGroup(e->v.stream, c->argv[2].ptr, c->argv[2].len) : NULL;
    if (!g) {
        addReplyErrorFormat(c, "-NOGROUP No such key '%s' or consumer group '%s'", c->argv[1].ptr,
                            c->argv[2].ptr);
        return;
    }
    if (justinfo) {
        addReplyArrayLen(c, 4);
        addReplyLongLong(c, (long long)g->npel);
        if (!g->npel) {
            addReplyNull(c);
            addReplyNull(c);
            addReplyNullArray(c);
            return;
        }
        addReplyStreamID(c, &g->pel[0].id);
        addReplyStreamID(c, &g->pel[g->npel - 1].id);
        long n = 0;
        for (size_t i = 0; i < g->ncons; i++) n += g->cons[i]->npending != 0;
        addReplyArrayLen(c, n);
        for (size_t i = 0; i < g->ncons; i++) {
            if (!g->cons[i]->npending) continue;
            addReplyArrayLen(c, 2);
            addReplyBulk(c, g->cons[i]->name, g->cons[i]->nlen);
            addReplyBulkLongLong(c, (long long)g->cons[i]->npending);
        }
        return;
    }
    sconsumer *cn = NULL;
    if (consumer_arg) {
        cn = lookupConsumer(g, c->argv[consumer_arg].ptr, c->argv[consumer_arg].len, 0);
        if (!cn) {
            addReplyArrayLen(c, 0);
            return;
        }
    }
    int64_t now = (int64_t)ir_mstime();
    for (int pass = 0; pass < 2; pass++) {
        long n = 0;
        for (size_t i = pelLower(g, &start); i < g->npel && n < count; i++) {
            spending *p = &g->pel[i];
            if (idCmp(&p->id, &end) > 0) break;
            if (cn && p->consumer != cn) continue;
            if (minidle && now - p->delivery_time < minidle) continue;
            n++;
            if (pass == 0) continue;
            addReplyArrayLen(c, 4);
            addReplyStreamID(c, &p->id);
            addReplyBulk(c, p->consumer->name, p->consumer->nlen);
            long long idle = now - p->delivery_time;
            addReplyLongLong(c, idle < 0 ? 0 : idle);
            addReplyLongLong(c, (long long)p->delivery_count);
        }
        if (pass == 0) addReplyArrayLen(c, n);
    }
}

/* Collected results of XCLAIM/XAUTOCLAIM (reused). */
static streamID *claimed;
static size_t claimcap;

static void claimedPush(size_t *n, const streamID *id) {
    if (*n == claimcap) {
        claimcap = claimcap ? claimcap * 2 : 64;
        claimed = ir_xrealloc(claimed, claimcap * sizeof(*claimed));
    }
    claimed[(*n)++] = *id;
}

/* XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id] */
void xclaimCommand(client *c) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_STREAM) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    sgroup *g = e ? lookupGroup(e->v.stream, c->argv[2].ptr, c->argv[2].len) : NULL;
    if (!g) {
        addReplyErrorFormat(c, "-NOGROUP No such key '%s' or consumer group '%s'", c->argv[1].ptr,
                            c->argv[2].ptr);
        return;
    }
    stream *s = e->v.stream;
    long long minidle, retrycount = -1, deliverytime = -1;
    int force = 0, justid = 0;
    if (!string2ll(c->argv[4].ptr, c->argv[4].len, &minidle)) {
        addReplyError(c, "Invalid min-idle-time argument for XCLAIM");
        return;
    }
    if (minidle < 0) minidle = 0;
    int j;
    streamID id, lastid = {0, 0};
    for (j = 5; j < c->argc; j++)
        if (parseArgIDQuiet(c, j, &id) != 0) break;
    int last_id_arg = j - 1;
    int64_t now = (int64_t)ir_mstime();
    for (; j < c->argc; j++) {
        int more = c->argc - 1 - j;
        if (argEq(c, j, "force")) {
            force = 1;
        } else if (argEq(c, j, "justid")) {
            justid = 1;
        } else if ((argEq(c, j, "idle") || argEq(c, j, "time") || argEq(c, j, "retrycount")) &&
                   more) {
            const char *what = argEq(c, j, "idle")   ? "IDLE"
                               : argEq(c, j, "time") ? "TIME"
                                                     : "RETRYCOUNT";
            long long v;
            j++;
            if (!string2ll(c->argv[j].ptr, c->argv[j].len, &v)) {
                addReplyErrorFormat(c, "Invalid %s option argument for XCLAIM", what);
                return;
            }
            if (what[0] == 'I') deliverytime = now - v;
            else if (what[0] == 'T') deliverytime = v;
            else retrycount = v;
        } else if (argEq(c, j, "lastid") && more) {
            j++;
            if (parseArgID(c, j, &lastid, 0, 1) != 0) return;
        } else {
            addReplyErrorFormat(c, "Unrecognized XCLAIM option '%s'", c->argv[j].ptr);
            return;
        }
    }
    int propagate_last = 0;
    if (idCmp(&lastid, &g->last_id) > 0) {
        g->last_id = lastid;
        propagate_last = 1;
    }
    if (deliverytime != -1) {
        if (deliverytime < 0 || deliverytime > now) deliverytime = now;
    } else {
        deliverytime = now;
    }
    replPrevent(c);
    sconsumer *cn = NULL;
    size_t n = 0;
    for (j = 5; j <= last_id_arg; j++) {
        parseArgIDQuiet(c, j, &id);
        spending *p = pelFind(g, &id);
        if (!findEntry(s, &id)) {
            if (p) { /* the entry is gone: drop it from the PEL */
                propagateXclaim(c, db, 1, g, &id, p);
                propagate_last = 0;
                replMarkDirty();
                pelRemoveAt(g, (size_t)(p - g->pel));
            }
            continue;
        }
        if (force && !p) p = pelInsert(db, s, g, &id);
        if (!p) continue;
        if (p->consumer && minidle && now - p->delivery_time < minidle) continue;
        if (!cn) {
            cn = lookupConsumer(g, c->argv[3].ptr, c->argv[3].len, 1);
            if (!cn) cn = consumerCreateNotify(c, db, s, g, 1, c->argv[3].ptr, c->argv[3].len);
        }
        pelSetConsumer(p, cn);
        p->delivery_time = deliverytime;
        if (retrycount >= 0) p->delivery_count = (uint64_t)retrycount;
        else if (!justid) p->delivery_count++;
        claimedPush(&n, &id);
        propagateXclaim(c, db, 1, g, &id, p);
        propagate_last = 0;
        replMarkDirty();
    }
    if (propagate_last) {
        propagateGroupID(c, 1, g);
        replMarkDirty();
    }
    addReplyArrayLen(c, (long)n);
    for (size_t i = 0; i < n; i++) {
        if (justid) addReplyStreamID(c, &claimed[i]);
        else addReplyEntry(c, findEntry(s, &claimed[i]));
    }
}

/* XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID] */
void xautoclaimCommand(client *c) {
    ir_db *db = dbFor(c);
    long long minidle, count = 100;
    streamID start;
    int sx, justid = 0;
    if (!string2ll(c->argv[4].ptr, c->argv[4].len, &minidle)) {
        addReplyError(c, "Invalid min-idle-time argument for XAUTOCLAIM");
        return;
    }
    if (minidle < 0) minidle = 0;
    if (parseIntervalID(c, 5, &start, &sx, 0) != 0) return;
    if (sx && idIncr(&start) != 0) {
        addReplyError(c, "invalid start ID for the interval");
        return;
    }
    for (int j = 6; j < c->argc; j++) {
        int more = c->argc - 1 - j;
        if (argEq(c, j, "count") && more) {
            long long v;
            long long max_count = LONG_MAX / 16;
            if (!string2ll(c->argv[j + 1].ptr, c->argv[j + 1].len, &v) || v < 1 || v > max_count) {
                addReplyError(c, "COUNT must be > 0");
                return;
            }
            count = v;
            j++;
        } else if (argEq(c, j, "justid")) {
            justid = 1;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_STREAM) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    sgroup *g = e ? lookupGroup(e->v.stream, c->argv[2].ptr, c->argv[2].len) : NULL;
    if (!g) {
        addReplyErrorFormat(c, "-NOGROUP No such key '%s' or consumer group '%s'", c->argv[1].ptr,
                            c->argv[2].ptr);
        return;
    }
    stream *s = e->v.stream;
    replPrevent(c);
    long long attempts = count * 10;
    int64_t now = (int64_t)ir_mstime();
    sconsumer *cn = NULL;
    size_t nclaimed = 0, ndeleted = 0;
    /* claimed IDs fill `claimed` from the front; deleted ones are collected after them */
    size_t i = pelLower(g, &start);
    static streamID *delbuf;
    static size_t delbufcap;
    while (attempts-- && count && i < g->npel) {
        spending *p = &g->pel[i];
        streamID id = p->id;
        if (!findEntry(s, &id)) {
            propagateXclaim(c, db, 1, g, &id, p);
            replMarkDirty();
            pelRemoveAt(g, i);
            if (ndeleted == delbufcap) {
                delbufcap = delbufcap ? delbufcap * 2 : 16;
                delbuf = ir_xrealloc(delbuf, delbufcap * sizeof(*delbuf));
            }
            delbuf[ndeleted++] = id;
            count--;
            continue;
        }
        if (minidle && now - p->delivery_time < minidle) {
            i++;
            continue;
        }
        if (!cn) {
            cn = lookupConsumer(g, c->argv[3].ptr, c->argv[3].len, 1);
            if (!cn) {
                cn = consumerCreateNotify(c, db, s, g, 1, c->argv[3].ptr, c->argv[3].len);
                p = &g->pel[i];
            }
        }
        pelSetConsumer(p, cn);
        p->delivery_time = now;
        if (!justid) p->delivery_count++;
        claimedPush(&nclaimed, &id);
        count--;
        propagateXclaim(c, db, 1, g, &id, p);
        replMarkDirty();
        i++;
    }
    streamID endid = {0, 0};
    if (i < g->npel) endid = g->pel[i].id;
    addReplyArrayLen(c, 3);
    addReplyStreamID(c, &endid);
    addReplyArrayLen(c, (long)nclaimed);
    for (size_t x = 0; x < nclaimed; x++) {
        if (justid) addReplyStreamID(c, &claimed[x]);
        else addReplyEntry(c, findEntry(s, &claimed[x]));
    }
    addReplyArrayLen(c, (long)ndeleted);
    for (size_t x = 0; x < ndeleted; x++) addReplyStreamID(c, &delbuf[x]);
}

/* ---- XINFO ------------------------------------------------------------------------------ */

static void xinfoStream(client *c, stream *s) {
    int full = 0;
    long long count = 10;
    int optc = c->argc - 3;
    if (optc) {
        if ((optc != 1 && optc != 3) || !argEq(c, 3, "full") ||
            (optc == 3 && !argEq(c, 4, "count"))) {
            subcommandSyntaxError(c, "XINFO");
            return;
        }
        full = 1;
        if (optc == 3) {
            if (getLongLongFromArg(c, 5, &count) != 0) return;
            if (count < 0) count = 10;
        }
    }
    addReplyMapLen(c, full ? 9 : 10);
    addReplyBulkCString(c, "length");
    addReplyLongLong(c, (long long)s->en);
    addReplyBulkCString(c, "radix-tree-keys");
    addReplyLongLong(c, (long long)s->nn);
    addReplyBulkCString(c, "radix-tree-nodes");
    addReplyLongLong(c, (long long)(s->nn ? 2 * s->nn : 1)); /* a rax's internal nodes: not kept */
    addReplyBulkCString(c, "last-generated-id");
    addReplyStreamID(c, &s->last_id);
    addReplyBulkCString(c, "max-deleted-entry-id");
    addReplyStreamID(c, &s->max_deleted);
    addReplyBulkCString(c, "entries-added");
    addReplyLongLong(c, (long long)s->entries_added);
    addReplyBulkCString(c, "recorded-first-entry-id");
    streamID first = streamFirstID(s);
    addReplyStreamID(c, &first);
    if (!full) {
        addReplyBulkCString(c, "groups");
        addReplyLongLong(c, (long long)s->ngroups);
        addReplyBulkCString(c, "first-entry");
        if (s->en) addReplyEntry(c, entryAt(s, 0));
        else addReplyNull(c);
        addReplyBulkCString(c, "last-entry");
        if (s->en) addReplyEntry(c, entryAt(s, s->en - 1));
        else addReplyNull(c);
        return;
    }
    addReplyBulkCString(c, "entries");
    size_t n = s->en;
    if (count && (unsigned long long)count < n) n = (size_t)count;
    addReplyArrayLen(c, (long)n);
    for (size_t i = 0; i < n; i++) addReplyEntry(c, entryAt(s, i));
    addReplyBulkCString(c, "groups");
    addReplyArrayLen(c, (long)s->ngroups);
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        sgroup *g = s->groups[gi];
        addReplyMapLen(c, 7);
        addReplyBulkCString(c, "name");
        addReplyBulk(c, g->name, g->nlen);
        addReplyBulkCString(c, "last-delivered-id");
        addReplyStreamID(c, &g->last_id);
        addReplyBulkCString(c, "entries-read");
        if (g->entries_read != ENTRIES_READ_INVALID) addReplyLongLong(c, g->entries_read);
        else addReplyNull(c);
        addReplyBulkCString(c, "lag");
        addReplyLag(c, s, g);
        addReplyBulkCString(c, "pel-count");
        addReplyLongLong(c, (long long)g->npel);
        addReplyBulkCString(c, "pending");
        size_t pn = g->npel;
        if (count && (unsigned long long)count < pn) pn = (size_t)count;
        addReplyArrayLen(c, (long)pn);
        for (size_t i = 0; i < pn; i++) {
            addReplyArrayLen(c, 4);
            addReplyStreamID(c, &g->pel[i].id);
            addReplyBulk(c, g->pel[i].consumer->name, g->pel[i].consumer->nlen);
            addReplyLongLong(c, g->pel[i].delivery_time);
            addReplyLongLong(c, (long long)g->pel[i].delivery_count);
        }
        addReplyBulkCString(c, "consumers");
        addReplyArrayLen(c, (long)g->ncons);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            sconsumer *cn = g->cons[ci];
            addReplyMapLen(c, 4);
            addReplyBulkCString(c, "name");
            addReplyBulk(c, cn->name, cn->nlen);
            addReplyBulkCString(c, "seen-time");
            addReplyLongLong(c, cn->seen_time);
            addReplyBulkCString(c, "pel-count");
            addReplyLongLong(c, (long long)cn->npending);
            addReplyBulkCString(c, "pending");
            size_t cp = cn->npending;
            if (count && (unsigned long long)count < cp) cp = (size_t)count;
            addReplyArrayLen(c, (long)cp);
            size_t done = 0;
            for (size_t i = 0; i < g->npel && done < cp; i++) {
                if (g->pel[i].consumer != cn) continue;
                addReplyArrayLen(c, 3);
                addReplyStreamID(c, &g->pel[i].id);
                addReplyLongLong(c, g->pel[i].delivery_time);
                addReplyLongLong(c, (long long)g->pel[i].delivery_count);
                done++;
            }
        }
    }
}

/* XINFO STREAM key [FULL [COUNT n]] | GROUPS key | CONSUMERS key group | HELP */
void xinfoCommand(client *c) {
    static const struct {
        const char *name;
        int arity;
    } subs[] = {{"stream", -3}, {"groups", 3}, {"consumers", 4}, {"help", 2}};
    int sub = -1;
    for (int i = 0; i < 4; i++)
        if (argEq(c, 1, subs[i].name)) sub = i;
    if (sub < 0) {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try XINFO HELP.", c->argv[1].ptr);
        return;
    }
    if (subArity(c, "xinfo", subs[sub].arity) != 0) return;
    if (sub == 3) {
        static const char *const help[] = {"CONSUMERS <key> <groupname>",
                                           "    Show consumers of <groupname>.",
                                           "GROUPS <key>",
                                           "    Show the stream consumer groups.",
                                           "STREAM <key> [FULL [COUNT <count>]",
                                           "    Show information about the stream.",
                                           NULL};
        replyHelp(c, "XINFO", help);
        return;
    }
    dbEntry *e = lookupKeyOrReply(c, 2, shared.nokeyerr, OBJ_STREAM);
    if (!e) return;
    stream *s = e->v.stream;
    if (sub == 2) {
        sgroup *g = lookupGroup(s, c->argv[3].ptr, c->argv[3].len);
        if (!g) {
            addReplyErrorFormat(c, "-NOGROUP No such consumer group '%s' for key name '%s'",
                                c->argv[3].ptr, c->argv[2].ptr);
            return;
        }
        addReplyArrayLen(c, (long)g->ncons);
        int64_t now = (int64_t)ir_mstime();
        for (size_t i = 0; i < g->ncons; i++) {
            sconsumer *cn = g->cons[i];
            long long idle = now - cn->seen_time;
            addReplyMapLen(c, 3);
            addReplyBulkCString(c, "name");
            addReplyBulk(c, cn->name, cn->nlen);
            addReplyBulkCString(c, "pending");
            addReplyLongLong(c, (long long)cn->npending);
            addReplyBulkCString(c, "idle");
            addReplyLongLong(c, idle < 0 ? 0 : idle);
        }
    } else if (sub == 1) {
        addReplyArrayLen(c, (long)s->ngroups);
        for (size_t i = 0; i < s->ngroups; i++) {
            sgroup *g = s->groups[i];
            addReplyMapLen(c, 6);
            addReplyBulkCString(c, "name");
            addReplyBulk(c, g->name, g->nlen);
            addReplyBulkCString(c, "consumers");
            addReplyLongLong(c, (long long)g->ncons);
            addReplyBulkCString(c, "pending");
            addReplyLongLong(c, (long long)g->npel);
            addReplyBulkCString(c, "last-delivered-id");
            addReplyStreamID(c, &g->last_id);
            addReplyBulkCString(c, "entries-read");
            if (g->entries_read != ENTRIES_READ_INVALID) addReplyLongLong(c, g->entries_read);
            else addReplyNull(c);
            addReplyBulkCString(c, "lag");
            addReplyLag(c, s, g);
        }
    } else {
        xinfoStream(c, s);
    }
}

/* ---- copies and serialization (COPY, snapshots, DUMP/RESTORE) -------------------------- */

stream *streamDup(ir_db *db, const stream *src) {
    stream *s = streamNew(db);
    /* entries keep their node membership: copy nodes and entries wholesale */
    if (src->nn) {
        s->nodes = dbMalloc(src->nn * sizeof(snode));
        memcpy(s->nodes, nodeAt(src, 0), src->nn * sizeof(snode));
        s->nn = s->ncap = src->nn;
        account(db, s, (int64_t)(s->ncap * sizeof(snode)));
    }
    s->next_node_seq = src->next_node_seq;
    if (src->en) {
        s->e = dbMalloc(src->en * sizeof(sentry));
        s->ecap = src->en;
        account(db, s, (int64_t)(s->ecap * sizeof(sentry)));
        for (size_t i = 0; i < src->en; i++) {
            const sentry *x = entryAt(src, i);
            sentry *y = &s->e[i];
            *y = *x;
            y->buf = dbMalloc(x->size ? x->size : 1);
            memcpy(y->buf, x->buf, x->size);
            account(db, s, (int64_t)dbBufBytes(x->size));
        }
        s->en = src->en;
    }
    s->last_id = src->last_id;
    s->max_deleted = src->max_deleted;
    s->entries_added = src->entries_added;
    for (size_t gi = 0; gi < src->ngroups; gi++) {
        const sgroup *sg = src->groups[gi];
        sgroup *g = groupCreate(db, s, sg->name, sg->nlen, &sg->last_id, sg->entries_read);
        for (size_t ci = 0; ci < sg->ncons; ci++)
            consumerCreate(db, s, g, sg->cons[ci]->name, sg->cons[ci]->nlen,
                           sg->cons[ci]->seen_time);
        for (size_t pi = 0; pi < sg->npel; pi++) {
            const spending *sp = &sg->pel[pi];
            spending *p = pelInsert(db, s, g, &sp->id);
            p->delivery_time = sp->delivery_time;
            p->delivery_count = sp->delivery_count;
            if (sp->consumer)
                pelSetConsumer(p, lookupConsumer(g, sp->consumer->name, sp->consumer->nlen, 0));
        }
    }
    return s;
}

/* The project's record of a stream (snapshots; DUMP writes Redis's encoding), little-endian:
 *   u64 last ms, seq; u64 max-deleted ms, seq; u64 entries-added;
 *   u64 node count; per node: u64 entries (live) then that many entries:
 *     u64 ms, seq; u32 pairs; per string: u32 length, bytes
 *   u64 group count; per group: u32 name length, name; u64 last ms, seq;
 *     i64 entries-read; u64 consumers; per consumer: u32 len, name, i64 seen-time;
 *     u64 pending; per pending: u64 ms, seq; i64 delivery time; u64 count;
 *     u32 consumer index (UINT32_MAX: none)
 * Node boundaries are kept (the nodes with no live entry are dropped). */
static void put64(rdbBuf *b, uint64_t v) { rdbPutLE(b, v, 8); }
static void put32(rdbBuf *b, uint32_t v) { rdbPutLE(b, v, 4); }

void streamSerialize(rdbBuf *b, const stream *s) {
    put64(b, s->last_id.ms);
    put64(b, s->last_id.seq);
    put64(b, s->max_deleted.ms);
    put64(b, s->max_deleted.seq);
    put64(b, s->entries_added);
    uint64_t nodes = 0;
    for (size_t i = 0; i < s->nn; i++) nodes += nodeAt(s, i)->live != 0;
    put64(b, nodes);
    size_t ei = 0;
    for (size_t i = 0; i < s->nn; i++) {
        const snode *n = nodeAt(s, i);
        if (!n->live) continue;
        put64(b, n->live);
        for (uint32_t k = 0; k < n->live; k++, ei++) {
            const sentry *e = entryAt(s, ei);
            put64(b, e->id.ms);
            put64(b, e->id.seq);
            put32(b, e->nf);
            rdbPut(b, e->buf, e->size);
        }
    }
    put64(b, s->ngroups);
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        const sgroup *g = s->groups[gi];
        put32(b, (uint32_t)g->nlen);
        rdbPut(b, g->name, g->nlen);
        put64(b, g->last_id.ms);
        put64(b, g->last_id.seq);
        put64(b, (uint64_t)g->entries_read);
        put64(b, g->ncons);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            put32(b, (uint32_t)g->cons[ci]->nlen);
            rdbPut(b, g->cons[ci]->name, g->cons[ci]->nlen);
            put64(b, (uint64_t)g->cons[ci]->seen_time);
        }
        put64(b, g->npel);
        for (size_t pi = 0; pi < g->npel; pi++) {
            const spending *p = &g->pel[pi];
            put64(b, p->id.ms);
            put64(b, p->id.seq);
            put64(b, (uint64_t)p->delivery_time);
            put64(b, p->delivery_count);
            uint32_t ci = UINT32_MAX;
            if (p->consumer) {
                int found;
                ci = (uint32_t)consumerIndex(g, p->consumer->name, p->consumer->nlen, &found);
            }
            put32(b, ci);
        }
    }
}

typedef struct rd {
    const unsigned char *p;
    size_t len, off;
    int bad;
} rd;

static uint64_t get(rd *r, int bytes) {
    if (r->bad || r->len - r->off < (size_t)bytes) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->off + (size_t)i] << (8 * i);
    r->off += (size_t)bytes;
    return v;
}

static const char *getBytes(rd *r, size_t n) {
    if (r->bad || r->len - r->off < n) {
        r->bad = 1;
        return NULL;
    }
    const char *p = (const char *)r->p + r->off;
    r->off += n;
    return p;
}

stream *streamDeserialize(ir_db *db, const void *buf, size_t len, size_t *used, const char **err) {
    rd r = {buf, len, 0, 0};
    stream *s = streamNew(db);
    *err = NULL;
    streamID last = {get(&r, 8), get(&r, 8)};
    s->max_deleted.ms = get(&r, 8);
    s->max_deleted.seq = get(&r, 8);
    s->entries_added = get(&r, 8);
    uint64_t nodes = get(&r, 8);
    streamID prev = {0, 0};
    int any = 0;
    for (uint64_t ni = 0; ni < nodes && !r.bad && !*err; ni++) {
        uint64_t live = get(&r, 8);
        if (live == 0 || live > len) {
            *err = "a stream node without entries";
            break;
        }
        for (uint64_t k = 0; k < live && !r.bad && !*err; k++) {
            streamID id = {get(&r, 8), get(&r, 8)};
            uint64_t nf = get(&r, 4);
            size_t start = r.off;
            /* each field and value takes at least its 4-byte length: a count the
             * record cannot hold is refused before the loop (its bound wrapped) */
            if (nf > (len - r.off) / 8) {
                *err = "a stream entry with more fields than its record holds";
                break;
            }
            for (uint64_t f = 0; f < nf * 2 && !r.bad; f++) getBytes(&r, get(&r, 4));
            if (r.bad) break;
            if (nf == 0 || (any && idCmp(&id, &prev) <= 0)) {
                *err = "stream entries out of order or empty";
                break;
            }
            prev = id;
            any = 1;
            /* one node per record node: append, then close the node */
            if (s->eh + s->en == s->ecap) {
                size_t nc = s->ecap ? s->ecap * 2 : 8;
                s->e = ir_xrealloc(s->e, nc * sizeof(sentry));
                account(db, s, (int64_t)((nc - s->ecap) * sizeof(sentry)));
                s->ecap = nc;
            }
            if (k == 0) {
                if (s->nn == s->ncap) {
                    size_t nc = s->ncap ? s->ncap * 2 : 4;
                    s->nodes = ir_xrealloc(s->nodes, nc * sizeof(snode));
                    account(db, s, (int64_t)((nc - s->ncap) * sizeof(snode)));
                    s->ncap = nc;
                }
                s->nodes[s->nn++].seq = s->next_node_seq++;
            }
            snode *n = &s->nodes[s->nn - 1];
            sentry *e = &s->e[s->en++];
            e->id = id;
            e->node = n->seq;
            e->nf = (uint32_t)nf;
            e->size = (uint32_t)(r.off - start);
            e->buf = dbMalloc(e->size ? e->size : 1);
            memcpy(e->buf, (const char *)buf + start, e->size);
            account(db, s, (int64_t)dbBufBytes(e->size));
            if (k == 0)
                nodeInit(n, e); /* sizes as if appended anew (deleted entries are not kept) */
            nodeAppend(n, e);
        }
    }
    if (!r.bad && !*err && any && idCmp(&prev, &last) > 0)
        *err = "a stream entry after its last ID";
    s->last_id = last;
    uint64_t ngroups = r.bad || *err ? 0 : get(&r, 8);
    for (uint64_t gi = 0; gi < ngroups && !r.bad && !*err; gi++) {
        uint32_t nl = (uint32_t)get(&r, 4);
        const char *name = getBytes(&r, nl);
        streamID gl = {get(&r, 8), get(&r, 8)};
        long long er = (long long)get(&r, 8);
        if (r.bad) break;
        sgroup *g = groupCreate(db, s, name, nl, &gl, er);
        if (!g) {
            *err = "a duplicate consumer group";
            break;
        }
        uint64_t ncons = get(&r, 8);
        for (uint64_t ci = 0; ci < ncons && !r.bad; ci++) {
            uint32_t cl = (uint32_t)get(&r, 4);
            const char *cname = getBytes(&r, cl);
            int64_t seen = (int64_t)get(&r, 8);
            if (r.bad) break;
            if (!consumerCreate(db, s, g, cname, cl, seen)) *err = "a duplicate consumer";
        }
        uint64_t npel = r.bad || *err ? 0 : get(&r, 8);
        for (uint64_t pi = 0; pi < npel && !r.bad && !*err; pi++) {
            streamID id = {get(&r, 8), get(&r, 8)};
            int64_t dt = (int64_t)get(&r, 8);
            uint64_t dc = get(&r, 8);
            uint32_t ci = (uint32_t)get(&r, 4);
            if (r.bad) break;
            if (pelFind(g, &id) || (ci != UINT32_MAX && ci >= g->ncons)) {
                *err = "a bad pending entry";
                break;
            }
            spending *p = pelInsert(db, s, g, &id);
            p->delivery_time = dt;
            p->delivery_count = dc;
            if (ci != UINT32_MAX) pelSetConsumer(p, g->cons[ci]);
        }
    }
    if (r.bad && !*err) *err = "a truncated stream";
    /* as RESTORE checks (dump.c): a pending entry belongs to a consumer */
    if (!*err && streamLoadCheck(s)) *err = "a pending entry without a consumer";
    if (*err) {
        streamFree(db, s);
        return NULL;
    }
    *used = r.off;
    return s;
}

/* DEBUG DIGEST-VALUE: each entry's ID and fields, then the groups. */
void streamDigest(const stream *s, void (*mix)(void *arg, const void *p, size_t len), void *arg) {
    char buf[48];
    for (size_t i = 0; i < s->en; i++) {
        const sentry *e = entryAt(s, i);
        int n = streamFormatID(buf, sizeof(buf), &e->id);
        mix(arg, buf, (size_t)n);
        mix(arg, e->buf, e->size);
    }
    int n = streamFormatID(buf, sizeof(buf), &s->last_id);
    mix(arg, buf, (size_t)n);
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        const sgroup *g = s->groups[gi];
        mix(arg, g->name, g->nlen);
        n = streamFormatID(buf, sizeof(buf), &g->last_id);
        mix(arg, buf, (size_t)n);
        for (size_t pi = 0; pi < g->npel; pi++) {
            n = streamFormatID(buf, sizeof(buf), &g->pel[pi].id);
            mix(arg, buf, (size_t)n);
        }
    }
}

uint64_t streamLength(const stream *s) { return s->en; }

/* ---- Redis's RDB encoding (RDB_TYPE_STREAM_LISTPACKS_2, Redis 7.0) -----------------------
 * For a replica's image: one listpack per node that has live entries (the
 * node's first live entry is its master ID), every entry written with its
 * own fields (flags 0, no SAMEFIELDS compression; Redis reads either), then
 * the stream's counters and the groups with their PELs and consumers. */

typedef struct lpw {
    rdbBuf *b;
    size_t start; /* offset of the listpack's header in b */
    uint32_t n;   /* elements */
} lpw;

/* One element: its encoding and data (enc, elen bytes), then its back length. */
static void lpElem(lpw *w, const unsigned char *enc, size_t elen, const void *data, size_t dlen) {
    rdbPut(w->b, enc, elen);
    if (dlen) rdbPut(w->b, data, dlen);
    size_t l = elen + dlen;
    unsigned char bl[5];
    int n;
    if (l <= 127) {
        bl[0] = (unsigned char)l;
        n = 1;
    } else if (l < 16383) {
        bl[0] = (unsigned char)(l >> 7);
        bl[1] = (unsigned char)((l & 127) | 128);
        n = 2;
    } else if (l < 2097151) {
        bl[0] = (unsigned char)(l >> 14);
        bl[1] = (unsigned char)(((l >> 7) & 127) | 128);
        bl[2] = (unsigned char)((l & 127) | 128);
        n = 3;
    } else if (l < 268435455) {
        bl[0] = (unsigned char)(l >> 21);
        bl[1] = (unsigned char)(((l >> 14) & 127) | 128);
        bl[2] = (unsigned char)(((l >> 7) & 127) | 128);
        bl[3] = (unsigned char)((l & 127) | 128);
        n = 4;
    } else {
        bl[0] = (unsigned char)(l >> 28);
        bl[1] = (unsigned char)(((l >> 21) & 127) | 128);
        bl[2] = (unsigned char)(((l >> 14) & 127) | 128);
        bl[3] = (unsigned char)(((l >> 7) & 127) | 128);
        bl[4] = (unsigned char)((l & 127) | 128);
        n = 5;
    }
    rdbPut(w->b, bl, (size_t)n);
    w->n++;
}

static void lpInt(lpw *w, int64_t v) {
    unsigned char e[9];
    if (v >= 0 && v <= 127) {
        e[0] = (unsigned char)v;
        lpElem(w, e, 1, NULL, 0);
    } else if (v >= -4096 && v <= 4095) {
        uint64_t u = (uint64_t)v & 0x1FFF;
        e[0] = (unsigned char)(0xC0 | (u >> 8));
        e[1] = (unsigned char)(u & 0xFF);
        lpElem(w, e, 2, NULL, 0);
    } else {
        int bytes = v >= INT16_MIN && v <= INT16_MAX   ? 2
                    : v >= -8388608 && v <= 8388607    ? 3
                    : v >= INT32_MIN && v <= INT32_MAX ? 4
                                                       : 8;
        e[0] = bytes == 2 ? 0xF1 : bytes == 3 ? 0xF2 : bytes == 4 ? 0xF3 : 0xF4;
        for (int i = 0; i < bytes; i++) e[1 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        lpElem(w, e, (size_t)bytes + 1, NULL, 0);
    }
}

static void lpStr(lpw *w, const char *p, size_t len) {
    unsigned char e[5];
    if (len < 64) {
        e[0] = (unsigned char)(0x80 | len);
        lpElem(w, e, 1, p, len);
    } else if (len < 4096) {
        e[0] = (unsigned char)(0xE0 | (len >> 8));
        e[1] = (unsigned char)(len & 0xFF);
        lpElem(w, e, 2, p, len);
    } else {
        e[0] = 0xF0;
        for (int i = 0; i < 4; i++) e[1 + i] = (unsigned char)(len >> (8 * i));
        lpElem(w, e, 5, p, len);
    }
}

static void encodeRawID(unsigned char k[16], const streamID *id) { /* big-endian, as rax keys */
    for (int i = 0; i < 8; i++) {
        k[i] = (unsigned char)(id->ms >> (56 - 8 * i));
        k[8 + i] = (unsigned char)(id->seq >> (56 - 8 * i));
    }
}

static void putRawID(rdbBuf *b, const streamID *id) {
    unsigned char k[16];
    encodeRawID(k, id);
    rdbPut(b, k, 16);
}

void streamPutRedisRDB(rdbBuf *b, const stream *s) {
    uint64_t nodes = 0;
    for (size_t i = 0; i < s->nn; i++) nodes += nodeAt(s, i)->live != 0;
    rdbPutLen(b, nodes);
    size_t ei = 0;
    rdbBuf lp = {0};
    for (size_t i = 0; i < s->nn; i++) {
        const snode *n = nodeAt(s, i);
        if (!n->live) continue;
        const sentry *first = entryAt(s, ei);
        streamID master = first->id;
        lp.len = 0;
        rdbPut(&lp, "\0\0\0\0\0\0", 6); /* total bytes and element count, set below */
        lpw w = {&lp, 0, 0};
        lpInt(&w, n->live); /* master entry: count, deleted, fields, 0 */
        lpInt(&w, 0);
        lpInt(&w, first->nf);
        fieldIter it = {first->buf};
        for (uint32_t f = 0; f < first->nf; f++) {
            const char *p;
            uint32_t l;
            fieldNext(&it, &p, &l);
            lpStr(&w, p, l);
            fieldNext(&it, &p, &l); /* its value */
        }
        lpInt(&w, 0);
        for (uint32_t k = 0; k < n->live; k++, ei++) {
            const sentry *e = entryAt(s, ei);
            lpInt(&w, 0); /* flags */
            lpInt(&w, (int64_t)(e->id.ms - master.ms));
            lpInt(&w, (int64_t)(e->id.seq - master.seq));
            lpInt(&w, e->nf);
            fieldIter fi = {e->buf};
            for (uint32_t f = 0; f < e->nf * 2; f++) {
                const char *p;
                uint32_t l;
                fieldNext(&fi, &p, &l);
                lpStr(&w, p, l);
            }
            lpInt(&w, (int64_t)e->nf * 2 + 4); /* lp-count */
        }
        rdbPutByte(&lp, 0xFF);
        if (lp.oom) {
            b->oom = 1;
            break;
        }
        for (int x = 0; x < 4; x++) lp.p[x] = (char)(unsigned char)(lp.len >> (8 * x));
        uint32_t ne = w.n < 65535 ? w.n : 65535;
        lp.p[4] = (char)(unsigned char)(ne & 0xFF);
        lp.p[5] = (char)(unsigned char)(ne >> 8);
        unsigned char key[16];
        encodeRawID(key, &master);
        rdbPutLen(b, 16);
        rdbPut(b, key, 16);
        rdbPutLen(b, lp.len);
        rdbPut(b, lp.p, lp.len);
    }
    free(lp.p);
    streamID firstid = streamFirstID(s);
    rdbPutLen(b, s->en);
    rdbPutLen(b, s->last_id.ms);
    rdbPutLen(b, s->last_id.seq);
    rdbPutLen(b, firstid.ms);
    rdbPutLen(b, firstid.seq);
    rdbPutLen(b, s->max_deleted.ms);
    rdbPutLen(b, s->max_deleted.seq);
    rdbPutLen(b, s->entries_added);
    rdbPutLen(b, s->ngroups);
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        const sgroup *g = s->groups[gi];
        rdbPutLen(b, g->nlen);
        rdbPut(b, g->name, g->nlen);
        rdbPutLen(b, g->last_id.ms);
        rdbPutLen(b, g->last_id.seq);
        rdbPutLen(b, (uint64_t)g->entries_read);
        rdbPutLen(b, g->npel);
        for (size_t pi = 0; pi < g->npel; pi++) {
            putRawID(b, &g->pel[pi].id);
            rdbPutLE(b, (uint64_t)g->pel[pi].delivery_time, 8);
            rdbPutLen(b, g->pel[pi].delivery_count);
        }
        rdbPutLen(b, g->ncons);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            const sconsumer *cn = g->cons[ci];
            rdbPutLen(b, cn->nlen);
            rdbPut(b, cn->name, cn->nlen);
            rdbPutLE(b, (uint64_t)cn->seen_time, 8);
            rdbPutLen(b, cn->npending);
            for (size_t pi = 0; pi < g->npel; pi++)
                if (g->pel[pi].consumer == cn) putRawID(b, &g->pel[pi].id);
        }
    }
}

/* The commands that build s again under key, as Redis's AOF rewrite writes
 * them: an XADD per entry (or XADD MAXLEN 0 for an empty stream), XSETID with
 * the stream's counters, then each group (XGROUP CREATE ... ENTRIESREAD), its
 * pending entries (XCLAIM ... TIME RETRYCOUNT JUSTID FORCE, which makes their
 * consumers) and its consumers without any (XGROUP CREATECONSUMER). */
void streamPutAofCommands(rdbBuf *b, const char *key, size_t klen, const stream *s) {
    char id[48], id2[48], num[24], num2[24];
    for (size_t i = 0; i < s->en; i++) {
        const sentry *e = entryAt(s, i);
        aofPutArray(b, 3 + (long)e->nf * 2);
        aofPutBulk(b, "XADD", 4);
        aofPutBulk(b, key, klen);
        aofPutBulk(b, id, (size_t)streamFormatID(id, sizeof(id), &e->id));
        fieldIter fi = {e->buf};
        for (uint32_t f = 0; f < e->nf * 2; f++) {
            const char *p;
            uint32_t l;
            fieldNext(&fi, &p, &l);
            aofPutBulk(b, p, l);
        }
    }
    if (!s->en) { /* an empty stream: made by XADD MAXLEN 0, as Redis does */
        aofPutArray(b, 7);
        aofPutBulk(b, "XADD", 4);
        aofPutBulk(b, key, klen);
        aofPutBulk(b, "MAXLEN", 6);
        aofPutBulk(b, "0", 1);
        aofPutBulk(b, "0-1", 3);
        aofPutBulk(b, "x", 1);
        aofPutBulk(b, "y", 1);
    }
    aofPutArray(b, 7);
    aofPutBulk(b, "XSETID", 6);
    aofPutBulk(b, key, klen);
    aofPutBulk(b, id, (size_t)streamFormatID(id, sizeof(id), &s->last_id));
    aofPutBulk(b, "ENTRIESADDED", 12);
    aofPutBulk(b, num, (size_t)ll2string(num, sizeof(num), (long long)s->entries_added));
    aofPutBulk(b, "MAXDELETEDID", 12);
    aofPutBulk(b, id, (size_t)streamFormatID(id, sizeof(id), &s->max_deleted));
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        const sgroup *g = s->groups[gi];
        aofPutArray(b, 7);
        aofPutBulk(b, "XGROUP", 6);
        aofPutBulk(b, "CREATE", 6);
        aofPutBulk(b, key, klen);
        aofPutBulk(b, g->name, g->nlen);
        aofPutBulk(b, id, (size_t)streamFormatID(id, sizeof(id), &g->last_id));
        aofPutBulk(b, "ENTRIESREAD", 11);
        aofPutBulk(b, num, (size_t)ll2string(num, sizeof(num), g->entries_read));
        for (size_t pi = 0; pi < g->npel; pi++) {
            const spending *pe = &g->pel[pi];
            if (!pe->consumer) continue;
            aofPutArray(b, 12);
            aofPutBulk(b, "XCLAIM", 6);
            aofPutBulk(b, key, klen);
            aofPutBulk(b, g->name, g->nlen);
            aofPutBulk(b, pe->consumer->name, pe->consumer->nlen);
            aofPutBulk(b, "0", 1);
            aofPutBulk(b, id2, (size_t)streamFormatID(id2, sizeof(id2), &pe->id));
            aofPutBulk(b, "TIME", 4);
            aofPutBulk(b, num, (size_t)ll2string(num, sizeof(num), pe->delivery_time));
            aofPutBulk(b, "RETRYCOUNT", 10);
            aofPutBulk(b, num2,
                       (size_t)ll2string(num2, sizeof(num2), (long long)pe->delivery_count));
            aofPutBulk(b, "JUSTID", 6);
            aofPutBulk(b, "FORCE", 5);
        }
        for (size_t ci = 0; ci < g->ncons; ci++) {
            const sconsumer *cn = g->cons[ci];
            if (cn->npending) continue; /* XCLAIM made it */
            aofPutArray(b, 5);
            aofPutBulk(b, "XGROUP", 6);
            aofPutBulk(b, "CREATECONSUMER", 14);
            aofPutBulk(b, key, klen);
            aofPutBulk(b, g->name, g->nlen);
            aofPutBulk(b, cn->name, cn->nlen);
        }
    }
}

/* ---- building a stream from Redis's encoding (RESTORE, dump.c) ------------------------- */

/* Append an entry whose pairs are already in t_stream's layout (buf, size
 * bytes); new_node starts a node. -1 if its ID is not above the last one. */
int streamLoadEntry(ir_db *db, stream *s, const streamID *id, uint32_t nf, const char *buf,
                    uint32_t size, int new_node) {
    if (s->en && idCmp(id, &entryAt(s, s->en - 1)->id) <= 0) return -1;
    if (new_node || !s->nn) {
        if (s->nh + s->nn == s->ncap) {
            size_t nc = s->ncap ? s->ncap * 2 : 4;
            s->nodes = ir_xrealloc(s->nodes, nc * sizeof(snode));
            account(db, s, (int64_t)((nc - s->ncap) * sizeof(snode)));
            s->ncap = nc;
        }
        s->nodes[s->nh + s->nn++].seq = s->next_node_seq++;
    }
    if (s->eh + s->en == s->ecap) {
        size_t nc = s->ecap ? s->ecap * 2 : 8;
        s->e = ir_xrealloc(s->e, nc * sizeof(sentry));
        account(db, s, (int64_t)((nc - s->ecap) * sizeof(sentry)));
        s->ecap = nc;
    }
    snode *n = nodeAt(s, s->nn - 1);
    sentry *e = &s->e[s->eh + s->en++];
    e->id = *id;
    e->node = n->seq;
    e->nf = nf;
    e->size = size;
    e->buf = dbMalloc(size ? size : 1);
    memcpy(e->buf, buf, size);
    account(db, s, (int64_t)dbBufBytes(size));
    if (new_node || !n->live) nodeInit(n, e);
    nodeAppend(n, e);
    return 0;
}

/* The node just loaded is Redis's listpack of lpbytes bytes keyed by master,
 * with count live and deleted deleted entries, the last of them `last`. */
void streamLoadNodeEnd(stream *s, const streamID *last, const streamID *master, uint64_t lpbytes,
                       uint32_t count, uint32_t deleted) {
    if (!s->nn) return;
    snode *n = nodeAt(s, s->nn - 1);
    if (idCmp(last, &n->last) > 0) n->last = *last;
    n->master = *master;
    n->total = count + deleted;
    uint64_t counters = lpIntBytes(count) + lpIntBytes(deleted);
    if (lpbytes > counters) n->rest = lpbytes - counters;
}

void streamLoadMeta(stream *s, const streamID *last, const streamID *maxdel, uint64_t added) {
    s->last_id = *last;
    s->max_deleted = *maxdel;
    s->entries_added = added;
}

sgroup *streamLoadGroup(ir_db *db, stream *s, const char *name, size_t len, const streamID *last,
                        long long entries_read, int estimate) {
    if (estimate) entries_read = estimateDistance(s, last);
    return groupCreate(db, s, name, len, last, entries_read);
}

/* A PEL entry of g; -1 if it is there already. */
int streamLoadPending(ir_db *db, stream *s, sgroup *g, const streamID *id, int64_t time,
                      uint64_t count) {
    if (pelFind(g, id)) return -1;
    spending *p = pelInsert(db, s, g, id);
    p->delivery_time = time;
    p->delivery_count = count;
    return 0;
}

sconsumer *streamLoadConsumer(ir_db *db, stream *s, sgroup *g, const char *name, size_t len,
                              int64_t seen) {
    return consumerCreate(db, s, g, name, len, seen);
}

/* Give a group's pending entry to consumer cn; -1 if the group has no such
 * entry or it has an owner already. */
int streamLoadOwn(sgroup *g, sconsumer *cn, const streamID *id) {
    spending *p = pelFind(g, id);
    if (!p || p->consumer) return -1;
    pelSetConsumer(p, cn);
    return 0;
}

/* Every pending entry has an owner (Redis refuses a PEL entry without one). */
int streamLoadCheck(const stream *s) {
    for (size_t gi = 0; gi < s->ngroups; gi++)
        for (size_t pi = 0; pi < s->groups[gi]->npel; pi++)
            if (!s->groups[gi]->pel[pi].consumer) return -1;
    return 0;
}

/* ---- invariants (the fuzz harness) -------------------------------------------------------- */

const char *streamVerify(const stream *s, uint64_t *bytes) {
    uint64_t b =
        sizeof(*s) + DB_MALLOC_OVERHEAD + s->ecap * sizeof(sentry) + s->ncap * sizeof(snode);
    if (s->eh + s->en > s->ecap || s->nh + s->nn > s->ncap) return "deque out of its array";
    uint64_t live = 0;
    for (size_t i = 0; i < s->nn; i++) {
        const snode *n = nodeAt(s, i);
        if (i && n->seq <= nodeAt(s, i - 1)->seq) return "nodes out of order";
        if (n->live > n->total) return "a node with more live entries than entries";
        if (n->seq >= s->next_node_seq) return "a node from the future";
        live += n->live;
    }
    if (live != s->en) return "node counts do not add up to the length";
    size_t ni = 0;
    for (size_t i = 0; i < s->en; i++) {
        const sentry *e = entryAt(s, i);
        if (i && idCmp(&entryAt(s, i - 1)->id, &e->id) >= 0) return "entries out of order";
        if (idCmp(&e->id, &s->last_id) > 0) return "an entry above the last ID";
        while (ni < s->nn && nodeAt(s, ni)->seq < e->node) ni++;
        if (ni == s->nn || nodeAt(s, ni)->seq != e->node) return "an entry of no node";
        if (idCmp(&e->id, &nodeAt(s, ni)->last) > 0) return "an entry above its node's last ID";
        if (e->nf == 0) return "an entry without fields";
        fieldIter it = {e->buf};
        for (uint32_t f = 0; f < e->nf * 2; f++) {
            const char *p;
            uint32_t l;
            if ((size_t)(it.p - e->buf) + 4 > e->size) return "an entry's fields overrun it";
            fieldNext(&it, &p, &l);
            if ((size_t)(it.p - e->buf) > e->size) return "an entry's fields overrun it";
        }
        if ((size_t)(it.p - e->buf) != e->size) return "an entry's size is not its fields'";
        b += dbBufBytes(e->size);
    }
    if (s->en > s->entries_added) return "fewer entries added than there are";
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        const sgroup *g = s->groups[gi];
        if (gi && nameCmp(s->groups[gi - 1]->name, s->groups[gi - 1]->nlen, g->name, g->nlen) >= 0)
            return "groups out of order";
        b += sizeof(*g) + g->nlen + 2 * DB_MALLOC_OVERHEAD + g->pelcap * sizeof(spending);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            const sconsumer *cn = g->cons[ci];
            if (ci &&
                nameCmp(g->cons[ci - 1]->name, g->cons[ci - 1]->nlen, cn->name, cn->nlen) >= 0)
                return "consumers out of order";
            size_t own = 0;
            for (size_t pi = 0; pi < g->npel; pi++) own += g->pel[pi].consumer == cn;
            if (own != cn->npending) return "a consumer's pending count is wrong";
            b += sizeof(*cn) + cn->nlen + 2 * DB_MALLOC_OVERHEAD;
        }
        for (size_t pi = 0; pi < g->npel; pi++) {
            const spending *p = &g->pel[pi];
            if (pi && idCmp(&g->pel[pi - 1].id, &p->id) >= 0) return "a PEL out of order";
            if (!p->consumer) return "a pending entry without a consumer";
            int found;
            consumerIndex(g, p->consumer->name, p->consumer->nlen, &found);
            if (!found) return "a pending entry of a consumer not in its group";
        }
    }
    if (b != s->bytes) return "the stream's byte count is not its parts'";
    *bytes = b;
    return NULL;
}
