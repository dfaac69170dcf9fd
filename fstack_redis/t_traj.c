/* t_traj.c - trajectories stored once: the commands over
 * chunks.c's streams and chunks and TRAJECTORY tables.
 *
 *   REPLAY.STREAM <s> FIELDS <n> <name> <dtype> <shape> ... [CHUNK <steps>] [HISTORY <steps>]
 *                 [COMPRESS <zstd level>]
 *   REPLAY.STREAM <s> END | DROP
 *   REPLAY.APPEND <s> <nsteps> <field bulk> ...       (one bulk per field: nsteps x step bytes)
 *   REPLAY.ITEM <t> <priority> <ncols> <column> <stream> <field> <first> <len> ... [<priority> ...]
 *               [TIMEOUT <seconds>]   (the table's rate limiter, as REPLAY.ADD's)
 *   REPLAY.COLUMNS <t>, REPLAY.CHUNKS
 *
 * Every command checks all of its input before it changes anything. A
 * TRAJECTORY table's columns (name, dtype, shape, length) are fixed by its
 * first item, so a sample packs each column of n items into one bulk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chunks.h"
#include "replay_err.h"
#include "replay_host.h"
#include "t_limiter_gate.h"
#include "t_sample_reply.h"
#include "t_traj.h"

/* scratch of one REPLAY.ITEM, grown on demand and kept */
static ir_colref *g_cols;
static size_t g_cols_cap;
static char *g_recs;
static size_t g_recs_cap;

static int growCols(size_t n) {
    if (n <= g_cols_cap) return 0;
    size_t cap = g_cols_cap ? g_cols_cap : 256;
    while (cap < n) cap *= 2;
    ir_colref *p = realloc(g_cols, cap * sizeof(*p));
    if (!p) return -1;
    g_cols = p;
    g_cols_cap = cap;
    return 0;
}

static int growRecs(size_t n) {
    if (n <= g_recs_cap) return 0;
    size_t cap = g_recs_cap ? g_recs_cap : 16384;
    while (cap < n) cap *= 2;
    char *p = realloc(g_recs, cap);
    if (!p) return -1;
    g_recs = p;
    g_recs_cap = cap;
    return 0;
}

int trajTableInit(ir_chunk_store *store, ir_table *t) { return tableMakeTrajectories(t, store); }

static int parseU64(const ir_arg *a, uint64_t max, uint64_t *out) {
    long long v;
    if (!string2ll(a->ptr, a->len, &v) || v < 0 || (uint64_t)v > max) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* "84,84" (or "" for a scalar) */
static int parseShape(const ir_arg *a, ir_field *f) {
    f->ndim = 0;
    size_t i = 0;
    if (a->len == 0 || (a->len == 2 && memcmp(a->ptr, "()", 2) == 0)) return 0;
    while (i <= a->len) {
        size_t j = i;
        while (j < a->len && a->ptr[j] != ',') j++;
        long long v;
        if (f->ndim == IR_TRAJ_MAX_DIMS || !string2ll(a->ptr + i, j - i, &v) || v <= 0 ||
            v > (1 << 30))
            return -1;
        f->shape[f->ndim++] = (uint32_t)v;
        i = j + 1;
    }
    return 0;
}

static void fmtShape(char *buf, size_t len, const uint32_t *shape, int ndim) {
    size_t o = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, d ? ",%u" : "%u", shape[d]);
}

/* ---- REPLAY.STREAM -------------------------------------------------------- */

void replayStreamCommand(client *c) {
    ir_chunk_store *s = hostChunks(c);
    const ir_arg *name = hostArg(c, 1);
    if (hostArgc(c) == 3 && (hostArgEq(c, 2, "end") || hostArgEq(c, 2, "drop"))) {
        ir_stream *st = streamFind(s, name->ptr, name->len);
        if (!st) {
            replyReplayError(c, IR_ERR_NOSTREAM,
                             "no such stream '%.128s': declare it with REPLAY.STREAM <stream> "
                             "FIELDS ...",
                             name->ptr);
            return;
        }
        if (hostArgEq(c, 2, "end")) streamEndEpisode(s, st);
        else streamDrop(s, name->ptr, name->len);
        hostReplyOk(c);
        return;
    }
    if (hostArgc(c) < 4 || !hostArgEq(c, 2, "fields")) {
        hostReplyError(c,
                       "syntax error: REPLAY.STREAM <stream> FIELDS <n> <name> <dtype> <shape> ... "
                       "[CHUNK <steps>] [HISTORY <steps>], or REPLAY.STREAM <stream> END|DROP");
        return;
    }
    uint64_t nf;
    if (parseU64(hostArg(c, 3), IR_TRAJ_MAX_FIELDS, &nf) != 0 || nf == 0) {
        hostReplyErrorFormat(c, "FIELDS needs a count between 1 and %d", IR_TRAJ_MAX_FIELDS);
        return;
    }
    if ((uint64_t)hostArgc(c) < 4 + 3 * nf) {
        hostReplyErrorFormat(c, "FIELDS %llu needs %llu arguments (name dtype shape each)",
                             (unsigned long long)nf, (unsigned long long)(3 * nf));
        return;
    }
    ir_field f[IR_TRAJ_MAX_FIELDS];
    memset(f, 0, sizeof(f));
    for (uint64_t k = 0; k < nf; k++) {
        const ir_arg *fn = hostArg(c, 4 + 3 * k), *dt = hostArg(c, 5 + 3 * k),
                     *sh = hostArg(c, 6 + 3 * k);
        if (fn->len == 0 || fn->len >= IR_TRAJ_NAME_MAX) {
            hostReplyErrorFormat(c, "field name must be 1 to %d bytes", IR_TRAJ_NAME_MAX - 1);
            return;
        }
        memcpy(f[k].name, fn->ptr, fn->len);
        for (uint64_t j = 0; j < k; j++)
            if (strcmp(f[j].name, f[k].name) == 0) {
                hostReplyErrorFormat(c, "field '%s' is given twice", f[k].name);
                return;
            }
        f[k].dtype = chunkDtypeParse(dt->ptr, dt->len);
        if (f[k].dtype < 0) {
            hostReplyErrorFormat(c,
                                 "unknown dtype '%.32s' for field '%s': use bool, uint8, int8, "
                                 "uint16, int16, uint32, int32, uint64, int64, float16, float32 "
                                 "or float64",
                                 dt->ptr, f[k].name);
            return;
        }
        uint64_t b = chunkDtypeSize(f[k].dtype);
        if (parseShape(sh, &f[k]) != 0) {
            hostReplyErrorFormat(c,
                                 "invalid shape '%.64s' for field '%s': use dimensions like "
                                 "84,84 (at most %d), or \"\" for a scalar",
                                 sh->ptr, f[k].name, IR_TRAJ_MAX_DIMS);
            return;
        }
        for (int d = 0; d < f[k].ndim && b <= IR_TRAJ_MAX_STEP_BYTES; d++) b *= f[k].shape[d];
        if (b > IR_TRAJ_MAX_STEP_BYTES) {
            hostReplyErrorFormat(c, "field '%s' is larger than %u bytes per step", f[k].name,
                                 IR_TRAJ_MAX_STEP_BYTES);
            return;
        }
        f[k].step_bytes = (uint32_t)b;
    }
    uint64_t chunk = IR_TRAJ_DEFAULT_CHUNK, history = IR_TRAJ_DEFAULT_HISTORY, zlevel = 0;
    int seen_c = 0, seen_h = 0, seen_z = 0;
    for (int i = 4 + 3 * (int)nf; i < hostArgc(c); i += 2) {
        int isc = hostArgEq(c, i, "chunk"), ish = hostArgEq(c, i, "history");
        if (hostArgEq(c, i, "compress") && i + 1 < hostArgc(c) && !seen_z) {
            seen_z = 1;
            if (parseU64(hostArg(c, i + 1), 19, &zlevel) != 0 || zlevel == 0) {
                hostReplyError(c, "COMPRESS must be a zstd level between 1 and 19");
                return;
            }
            continue;
        }
        if ((!isc && !ish) || i + 1 >= hostArgc(c) || (isc && seen_c) || (ish && seen_h)) {
            hostReplySyntaxError(c);
            return;
        }
        uint64_t *dst = isc ? &chunk : &history;
        if (parseU64(hostArg(c, i + 1), isc ? 65536 : (1u << 24), dst) != 0 || *dst == 0) {
            hostReplyErrorFormat(c, "%s must be an integer between 1 and %u",
                                 isc ? "CHUNK" : "HISTORY", isc ? 65536u : (1u << 24));
            return;
        }
        seen_c |= isc;
        seen_h |= ish;
    }
    if (((history + chunk - 1) / chunk + 1) * nf > IR_TRAJ_MAX_HELD) {
        hostReplyErrorFormat(c,
                             "HISTORY %llu with CHUNK %llu holds more than %u chunks over %llu "
                             "fields: use a larger CHUNK or a smaller HISTORY",
                             (unsigned long long)history, (unsigned long long)chunk,
                             IR_TRAJ_MAX_HELD, (unsigned long long)nf);
        return;
    }
    for (uint64_t k = 0; k < nf; k++)
        if ((uint64_t)f[k].step_bytes * chunk > UINT32_MAX) {
            hostReplyErrorFormat(c,
                                 "CHUNK %llu steps of field '%s' exceed 4 GiB: use a smaller CHUNK",
                                 (unsigned long long)chunk, f[k].name);
            return;
        }
    ir_stream *st;
    const char *err;
    if (streamDeclare(s, name->ptr, name->len, f, (uint32_t)nf, (uint32_t)chunk, (uint32_t)history,
                      (int)zlevel, &st, &err) != 0) {
        hostReplyErrorFormat(c, "%s", err);
        return;
    }
    hostReplyOk(c);
}

/* ---- REPLAY.APPEND -------------------------------------------------------- */

void replayAppendCommand(client *c) {
    ir_chunk_store *s = hostChunks(c);
    ir_stream *st = streamFind(s, hostArg(c, 1)->ptr, hostArg(c, 1)->len);
    if (!st) {
        replyReplayError(c, IR_ERR_NOSTREAM,
                         "no such stream '%.128s': declare it with REPLAY.STREAM <stream> "
                         "FIELDS ...",
                         hostArg(c, 1)->ptr);
        return;
    }
    uint64_t n;
    if (parseU64(hostArg(c, 2), 1u << 24, &n) != 0 || n == 0) {
        hostReplyError(c, "nsteps must be an integer between 1 and 16777216");
        return;
    }
    uint32_t nf = streamFieldCount(st);
    if ((uint32_t)hostArgc(c) != 3 + nf) {
        hostReplyErrorFormat(c,
                             "stream '%.128s' has %u fields: give one bulk per field, in the "
                             "declared order",
                             streamName(st), nf);
        return;
    }
    const char *data[IR_TRAJ_MAX_FIELDS];
    for (uint32_t f = 0; f < nf; f++) {
        const ir_arg *a = hostArg(c, 3 + f);
        const ir_field *fd = streamField(st, f);
        if ((uint64_t)a->len != n * fd->step_bytes) {
            char sh[96];
            fmtShape(sh, sizeof(sh), fd->shape, fd->ndim);
            hostReplyErrorFormat(c,
                                 "field '%s' of stream '%.128s' must be %llu steps of %s [%s] "
                                 "(%llu bytes), got %zu bytes",
                                 fd->name, streamName(st), (unsigned long long)n,
                                 chunkDtypeName(fd->dtype), sh,
                                 (unsigned long long)(n * fd->step_bytes), a->len);
            return;
        }
        data[f] = a->ptr;
    }
    if (streamAppend(s, st, n, data) != 0) {
        hostReplyError(c, "out of memory");
        return;
    }
    hostReplyLongLong(c, (long long)streamSteps(st));
}

/* ---- REPLAY.ITEM ---------------------------------------------------------- */

static int colMatches(const ir_traj_col *a, const ir_traj_col *b) {
    return strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->ndim == b->ndim &&
           a->len == b->len &&
           memcmp(a->shape, b->shape, sizeof(a->shape[0]) * (size_t)a->ndim) == 0;
}

static void colDescribe(char *buf, size_t len, const ir_traj_col *col) {
    char sh[96];
    fmtShape(sh, sizeof(sh), col->shape, col->ndim);
    snprintf(buf, len, "'%.*s' %u steps of %s [%s]", IR_TRAJ_NAME_MAX - 1, col->name, col->len,
             chunkDtypeName(col->dtype), sh);
}

void replayItemCommand(client *c) {
    ir_table *t = tableFind(hostTables(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len);
    if (!t) {
        replyReplayError(c, IR_ERR_NOTABLE, "no such table '%.128s'", hostArg(c, 1)->ptr);
        return;
    }
    if (!tableHoldsTrajectories(t)) {
        replyReplayError(c, IR_ERR_WRONGKIND,
                         "table '%.128s' holds opaque items: create it with TRAJECTORY for "
                         "REPLAY.ITEM, or use REPLAY.ADD",
                         tableName(t));
        return;
    }
    ir_chunk_store *s = tableTrajStore(t);
    /* pass 1: count and check everything. A last TIMEOUT <s> (never a
     * priority) waits while the rate limiter holds the items, as REPLAY.ADD. */
    size_t nitems = 0, ncols_total = 0;
    int argc = hostArgc(c), timeout_arg = 0;
    uint64_t deadline = 0;
    for (int i = 2; i < argc;) {
        uint64_t nc;
        if (nitems && i + 2 == argc && hostArgEq(c, i, "timeout")) {
            timeout_arg = i + 1;
            argc = i;
            if (hostBlockingTimeout(c, timeout_arg, &deadline) != 0) return;
            break;
        }
        if (i + 1 >= argc || parseU64(hostArg(c, i + 1), IR_TRAJ_MAX_COLS, &nc) != 0 || nc == 0) {
            hostReplyErrorFormat(c,
                                 "item %zu: <priority> <ncols> with ncols between 1 and %d, then "
                                 "<column> <stream> <field> <first> <len> per column",
                                 nitems, IR_TRAJ_MAX_COLS);
            return;
        }
        if ((uint64_t)(argc - i - 2) < 5 * nc) {
            hostReplyErrorFormat(c,
                                 "item %zu: %llu columns need %llu arguments (column stream "
                                 "field first len each)",
                                 nitems, (unsigned long long)nc, (unsigned long long)(5 * nc));
            return;
        }
        i += 2 + 5 * (int)nc;
        nitems++;
        ncols_total += nc;
    }
    ir_item_in *items;
    uint64_t *ids;
    if (tablesAddScratch(hostTables(c), nitems, &items, &ids) != 0 || growCols(ncols_total) != 0) {
        hostReplyError(c, "out of memory");
        return;
    }
    ir_traj_layout *layout = tableTrajLayout(t);
    /* the columns every item must have: the table's, or the first item's */
    uint32_t table_ncols = trajLayoutCols(layout), cand_ncols = table_ncols;
    ir_traj_col cand[IR_TRAJ_MAX_COLS];
    for (uint32_t k = 0; k < table_ncols; k++) cand[k] = *trajLayoutCol(layout, k);
    ir_stream *last = NULL;
    size_t recbytes = 0, ci = 0;
    char err[512];
    int i = 2;
    for (size_t k = 0; k < nitems; k++) {
        const ir_arg *p = hostArg(c, i);
        items[k].use_max = p->len == 3 && strncasecmp(p->ptr, "max", 3) == 0;
        items[k].raw = 0;
        if (!items[k].use_max &&
            (!string2d(p->ptr, p->len, &items[k].raw) || !tablePriorityValid(t, items[k].raw))) {
            replyReplayError(c, IR_ERR_BADPRIO,
                             "%zu invalid priority '%.64s': use a finite number "
                             ">= 0 or MAX",
                             k, p->ptr);
            return;
        }
        uint64_t nc = 0;
        parseU64(hostArg(c, i + 1), IR_TRAJ_MAX_COLS, &nc);
        if (cand_ncols && nc != cand_ncols) {
            hostReplyErrorFormat(c,
                                 "item %zu has %llu columns, table '%.128s' has %u: every item of "
                                 "a table has the same columns",
                                 k, (unsigned long long)nc, tableName(t), cand_ncols);
            return;
        }
        i += 2;
        ir_colref *cols = &g_cols[ci];
        for (uint64_t j = 0; j < nc; j++, i += 5) {
            const ir_arg *cn = hostArg(c, i), *sn = hostArg(c, i + 1), *fn = hostArg(c, i + 2);
            ir_stream *st = last && streamNameLen(last) == sn->len &&
                                    memcmp(streamName(last), sn->ptr, sn->len) == 0
                                ? last
                                : streamFind(s, sn->ptr, sn->len);
            if (!st) {
                replyReplayError(c, IR_ERR_NOSTREAM,
                                 "no such stream '%.128s': declare it with REPLAY.STREAM and "
                                 "append steps first",
                                 sn->ptr);
                return;
            }
            last = st;
            uint32_t f = 0, nf = streamFieldCount(st);
            while (f < nf && !(strlen(streamField(st, f)->name) == fn->len &&
                               memcmp(streamField(st, f)->name, fn->ptr, fn->len) == 0))
                f++;
            if (f == nf) {
                hostReplyErrorFormat(c, "stream '%.128s' has no field '%.64s'", streamName(st),
                                     fn->ptr);
                return;
            }
            uint64_t first, len;
            if (parseU64(hostArg(c, i + 3), UINT64_MAX >> 2, &first) != 0 ||
                parseU64(hostArg(c, i + 4), IR_TRAJ_MAX_LEN, &len) != 0) {
                hostReplyErrorFormat(c,
                                     "item %zu column %llu: first and len must be integers >= 0 "
                                     "(len at most %d)",
                                     k, (unsigned long long)j, IR_TRAJ_MAX_LEN);
                return;
            }
            if (cn->len == 0 || cn->len >= IR_TRAJ_NAME_MAX) {
                hostReplyErrorFormat(c, "column name must be 1 to %d bytes", IR_TRAJ_NAME_MAX - 1);
                return;
            }
            cols[j] = (ir_colref){st, f, first, (uint32_t)len};
            if (chunkColCheck(&cols[j], err, sizeof(err)) != 0) {
                hostReplyErrorFormat(c, "%s", err);
                return;
            }
            const ir_field *fd = streamField(st, f);
            ir_traj_col col = {.dtype = fd->dtype,
                               .ndim = fd->ndim,
                               .step_bytes = fd->step_bytes,
                               .len = (uint32_t)len};
            memcpy(col.name, cn->ptr, cn->len);
            memcpy(col.shape, fd->shape, sizeof(col.shape));
            if (!cand_ncols || (k == 0 && !table_ncols)) {
                for (uint64_t q = 0; q < j; q++)
                    if (strcmp(cand[q].name, col.name) == 0) {
                        hostReplyErrorFormat(c, "column '%s' is given twice", col.name);
                        return;
                    }
                cand[j] = col;
                if (j + 1 == nc) cand_ncols = (uint32_t)nc;
            } else if (!colMatches(&cand[j], &col)) {
                char want[256], got[256];
                colDescribe(want, sizeof(want), &cand[j]);
                colDescribe(got, sizeof(got), &col);
                hostReplyErrorFormat(c,
                                     "item %zu column %llu is %s, table '%.128s' has %s there: "
                                     "every item of a table has the same columns",
                                     k, (unsigned long long)j, got, tableName(t), want);
                return;
            }
        }
        size_t rb = chunkItemSize(cols, (uint32_t)nc);
        if (!tableItemFits(t, rb)) { /* what tableAdd checks: nothing half-added */
            hostReplyErrorFormat(c,
                                 "item %zu's reference record (%zu bytes) is larger than table "
                                 "'%.128s''s MAXBYTES",
                                 k, rb, tableName(t));
            return;
        }
        items[k].len = rb;
        recbytes += rb;
        ci += nc;
    }
    /* the limiter, as for REPLAY.ADD: a held ITEM applies nothing until it runs */
    if (replayLimiterGate(c, t, nitems, 0, timeout_arg, deadline)) return;
    if (growRecs(recbytes) != 0) {
        hostReplyError(c, "out of memory");
        return;
    }
    /* pass 2: apply. References are taken before the table may evict. */
    trajLayoutSet(layout, cand, cand_ncols);
    size_t off = 0;
    ci = 0;
    for (size_t k = 0; k < nitems; k++) {
        items[k].data = g_recs + off;
        chunkItemMake(s, &g_cols[ci], cand_ncols, g_recs + off);
        ci += cand_ncols;
        off += items[k].len;
    }
    const char *e;
    for (size_t k = 0; k < nitems; k++) {
        /* one at a time: an item the batch evicts again must be in the arena
         * when it leaves (its references are read there) */
        if (tableAdd(t, &items[k], 1, &ids[k], &e) != 0) {
            for (size_t j = k; j < nitems; j++)
                chunkItemRelease(s, items[j].data, (uint32_t)items[j].len);
            hostReplyErrorFormat(c, "%s", e);
            return;
        }
    }
    replayLimiterRan(c, t, nitems, 0);
    hostReplyArrayLen(c, (long)nitems);
    for (size_t k = 0; k < nitems; k++) hostReplyLongLong(c, (long long)ids[k]);
}

/* ---- REPLAY.SAMPLE on a TRAJECTORY table ----------------------------------- */

void trajSample(client *c, ir_table *t, size_t n, double beta, int withstats, int withinfo) {
    ir_chunk_store *s = tableTrajStore(t);
    const ir_traj_layout *L = tableTrajLayout(t);
    uint32_t ncols = trajLayoutCols(L);
    uint64_t bulk = 12 * (uint64_t)n, total = 12 * (uint64_t)n;
    total += (withstats ? 24 + 8 * (uint64_t)n : 0) + (withinfo ? 8 + 20 * (uint64_t)n : 0);
    for (uint32_t k = 0; k < ncols; k++) {
        const ir_traj_col *col_k = trajLayoutCol(L, k);
        uint64_t col = satMul(satMul(col_k->len, col_k->step_bytes), n);
        if (col > bulk) bulk = col;
        total = satAdd(total, col);
    }
    if (sampleReplyFits(c, n, bulk, total, 1) != 0) return;
    /* items a draw removes are read below: their chunks wait until then */
    if (chunkDeferBegin(s) != 0) {
        hostReplyError(c, "out of memory");
        return;
    }
    int rc = tableSample(t, n, beta);
    if (rc != IR_OK) {
        chunkCollect(s);
        if (rc == IR_EEMPTY)
            replyReplayError(c, IR_ERR_EMPTY, "table '%.128s' is empty", tableName(t));
        else hostReplyError(c, "out of memory");
        return;
    }
    replayLimiterRan(c, t, n, 1);
    hostReplyArrayLen(c, 3 + withstats + withinfo);
    ir_sample_view v;
    tableSampleView(t, n, &v);
    memcpy(hostReplyBulkReserve(c, n * 8), v.ids, n * 8);
    memcpy(hostReplyBulkReserve(c, n * 4), v.weights, n * 4);
    hostReplyArrayLen(c, (long)ncols);
    for (uint32_t k = 0; k < ncols; k++) {
        const ir_traj_col *col_k = trajLayoutCol(L, k);
        size_t per = (size_t)col_k->len * col_k->step_bytes;
        char *d = hostReplyBulkReserve(c, n * per);
        for (size_t i = 0; i < n; i++) chunkItemCopy(s, v.items[i].data, k, d + i * per);
    }
    chunkCollect(s);
    if (withstats) {
        hostReplyBulkBegin(c, 24 + 8 * n, 0);
        addSampleStats(c, t, n);
        hostReplyBulkEnd(c);
    }
    if (withinfo) {
        hostReplyBulkBegin(c, 8 + 20 * n, 0);
        addSampleInfo(c, t, n);
        hostReplyBulkEnd(c);
    }
}

/* ---- REPLAY.COLUMNS, REPLAY.CHUNKS ---------------------------------------- */

void replayColumnsCommand(client *c) {
    ir_table *t = tableFind(hostTables(c), hostArg(c, 1)->ptr, hostArg(c, 1)->len);
    if (!t) {
        replyReplayError(c, IR_ERR_NOTABLE, "no such table '%.128s'", hostArg(c, 1)->ptr);
        return;
    }
    if (!tableHoldsTrajectories(t)) {
        replyReplayError(c, IR_ERR_WRONGKIND,
                         "table '%.128s' holds opaque items: it has no columns", tableName(t));
        return;
    }
    const ir_traj_layout *L = tableTrajLayout(t);
    uint32_t ncols = trajLayoutCols(L);
    hostReplyArrayLen(c, (long)ncols);
    for (uint32_t k = 0; k < ncols; k++) {
        const ir_traj_col *col = trajLayoutCol(L, k);
        char sh[96];
        fmtShape(sh, sizeof(sh), col->shape, col->ndim);
        hostReplyArrayLen(c, 4);
        hostReplyCString(c, col->name);
        hostReplyCString(c, chunkDtypeName(col->dtype));
        hostReplyCString(c, sh);
        hostReplyLongLong(c, col->len);
    }
}

/* The fields REPLAY.INFO adds for a trajectory table: (name, value), with
 * st its store's counters. */
#define TRAJ_INFO_FIELDS(F) \
    F("columns", trajLayoutCols(tableTrajLayout(t))) \
    F("store_chunks", st.chunks) \
    F("store_chunk_bytes", st.chunk_bytes) \
    F("store_references", st.references)
#define TRAJ_INFO_COUNT(name, value) +1
#define TRAJ_INFO_EMIT(name, value) \
    hostReplyCString(c, name); \
    hostReplyLongLong(c, (long long)(value));

long trajInfoFieldCount(void) { return 0 TRAJ_INFO_FIELDS(TRAJ_INFO_COUNT); }

void trajInfoFields(client *c, ir_table *t) {
    ir_chunk_stats st;
    chunkStoreStats(tableTrajStore(t), &st);
    TRAJ_INFO_FIELDS(TRAJ_INFO_EMIT)
}

/* REPLAY.CHUNKS: the chunk store's counters, one list that writes the reply
 * and counts it. */
#define CHUNKS_FIELDS(F) \
    F("streams", st.streams) \
    F("chunks", st.chunks) \
    F("chunk_bytes", st.chunk_bytes) \
    F("references", st.references) \
    F("memory", st.memory) \
    F("steps_appended", st.steps_appended) \
    F("chunks_made", st.chunks_made) \
    F("items_made", st.items_made) \
    F("chunks_compressed", st.chunks_compressed) \
    F("raw_bytes_compressed", st.raw_bytes_compressed)

void replayChunksCommand(client *c) {
    ir_chunk_stats st;
    chunkStoreStats(hostChunks(c), &st);
    hostReplyMapLen(c, 0 CHUNKS_FIELDS(TRAJ_INFO_COUNT));
    CHUNKS_FIELDS(TRAJ_INFO_EMIT)
}
