/* chunks.c - episode streams and reference-counted chunks (see chunks.h).
 *
 * Record layout (little-endian uint32 words, in the table's arena):
 *   ncols, col_off[ncols] (word index of each column), then per column
 *   step_bytes, len, offset (in the first chunk), chunk_steps, nchunks,
 *   handle[nchunks].
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_store.h"
#include "chunks.h"

#ifdef IR_HAVE_ZSTD
#include <zstd.h>
#endif

int chunkCanCompress(void) {
#ifdef IR_HAVE_ZSTD
    return 1;
#else
    return 0;
#endif
}

static const char *const dt_names[IR_DT_COUNT] = {"bool",  "uint8",   "int8",    "uint16",
                                                  "int16", "uint32",  "int32",   "uint64",
                                                  "int64", "float16", "float32", "float64"};
static const uint8_t dt_sizes[IR_DT_COUNT] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8};

int chunkDtypeParse(const char *s, size_t len) {
    for (int i = 0; i < IR_DT_COUNT; i++)
        if (strlen(dt_names[i]) == len && memcmp(dt_names[i], s, len) == 0) return i;
    return -1;
}
const char *chunkDtypeName(int dt) { return dt >= 0 && dt < IR_DT_COUNT ? dt_names[dt] : NULL; }
size_t chunkDtypeSize(int dt) { return dt >= 0 && dt < IR_DT_COUNT ? dt_sizes[dt] : 0; }

ir_chunk_store *chunkStoreNew(void) { return calloc(1, sizeof(ir_chunk_store)); }

/* ---- chunks --------------------------------------------------------------- */

static uint32_t chunkAlloc(ir_chunk_store *s, uint32_t bytes) {
    uint32_t h = s->free_head;
    if (!h) {
        if (s->used == UINT32_MAX) return 0;
        if (s->used == 0) s->used = 1; /* handle 0 is "none" */
        if (s->used >= s->cap) {
            uint32_t cap = s->cap ? (s->cap > UINT32_MAX / 2 ? UINT32_MAX : s->cap * 2) : 1024;
            ir_chunk *c = realloc(s->c, (size_t)cap * sizeof(*c));
            if (!c) return 0;
            s->c = c;
            s->cap = cap;
        }
        h = s->used;
    }
    char *d = malloc(bytes ? bytes : 1);
    if (!d) return 0;
    if (h == s->free_head) s->free_head = s->c[h].next_free;
    else s->used++;
    s->c[h] = (ir_chunk){.refs = 1, .bytes = bytes, .data = d};
    s->chunks++;
    s->chunks_made++;
    s->chunk_bytes += bytes;
    return h;
}

static void chunkFree(ir_chunk_store *s, uint32_t h) {
    if (s->raw_h == h) s->raw_h = 0;
    if (s->c[h].raw) {
        s->chunks_compressed--;
        s->raw_bytes_compressed -= s->c[h].raw;
    }
    free(s->c[h].data);
    s->chunk_bytes -= s->c[h].bytes;
    s->chunks--;
    s->c[h] = (ir_chunk){.next_free = s->free_head};
    s->free_head = h;
}

static void chunkUnref(ir_chunk_store *s, uint32_t h) {
    if (--s->c[h].refs) return;
    if (!s->defer) {
        chunkFree(s, h);
        return;
    }
    /* chunkDeferBegin reserved a place for every chunk live then, and none
     * is made while deferring: each reaches 0 once */
    s->pending[s->npending++] = h;
}

int chunkDeferBegin(ir_chunk_store *s) {
    if (s->chunks > s->pending_cap) {
        size_t cap = s->pending_cap ? s->pending_cap : 256;
        while (cap < s->chunks) cap *= 2;
        uint32_t *p = realloc(s->pending, cap * sizeof(*p));
        if (!p) return -1;
        s->pending = p;
        s->pending_cap = cap;
    }
    s->npending = 0;
    s->defer = 1;
    return 0;
}

void chunkCollect(ir_chunk_store *s) {
    for (size_t i = 0; i < s->npending; i++) chunkFree(s, s->pending[i]);
    s->npending = 0;
    s->defer = 0;
}

uint64_t chunkStoreMemory(const ir_chunk_store *s) {
    return s->chunk_bytes + (uint64_t)s->cap * sizeof(ir_chunk) + s->stream_bytes;
}

void chunkStoreStats(const ir_chunk_store *s, ir_chunk_stats *out) {
    *out = (ir_chunk_stats){.streams = s->nstreams,
                            .chunks = s->chunks,
                            .chunk_bytes = s->chunk_bytes,
                            .references = s->references,
                            .memory = chunkStoreMemory(s),
                            .steps_appended = s->steps_appended,
                            .chunks_made = s->chunks_made,
                            .items_made = s->items_made,
                            .chunks_compressed = s->chunks_compressed,
                            .raw_bytes_compressed = s->raw_bytes_compressed};
}

/* Compress a full chunk in place when that saves bytes (kept raw otherwise,
 * or when anything fails: compression is an optimisation, never an error). */
static void chunkCompress(ir_chunk_store *s, uint32_t h, int level) {
#ifdef IR_HAVE_ZSTD
    ir_chunk *c = &s->c[h];
    if (c->raw) return;
    size_t bound = ZSTD_compressBound(c->bytes);
    if (!s->cctx && !(s->cctx = ZSTD_createCCtx())) return;
    if (bound > s->zbuf_cap) {
        char *p = realloc(s->zbuf, bound);
        if (!p) return;
        s->zbuf = p;
        s->zbuf_cap = bound;
    }
    size_t z = ZSTD_compressCCtx(s->cctx, s->zbuf, bound, c->data, c->bytes, level);
    if (ZSTD_isError(z) || z + 64 >= c->bytes) return;
    char *d = malloc(z);
    if (!d) return;
    memcpy(d, s->zbuf, z);
    free(c->data);
    s->chunk_bytes -= c->bytes - z;
    s->chunks_compressed++;
    s->raw_bytes_compressed += c->bytes;
    c->raw = c->bytes;
    c->bytes = (uint32_t)z;
    c->data = d;
#else
    (void)s, (void)h, (void)level;
#endif
}

/* A chunk's raw bytes: in place, or decompressed into rawbuf (kept for the
 * next read of the same chunk). */
static const char *chunkRaw(ir_chunk_store *s, uint32_t h) {
    const ir_chunk *c = &s->c[h];
    if (!c->raw) return c->data;
#ifdef IR_HAVE_ZSTD
    if (s->raw_h != h) {
        size_t n = ZSTD_decompressDCtx(s->dctx, s->rawbuf, s->rawbuf_cap, c->data, c->bytes);
        if (ZSTD_isError(n) || n != c->raw) { /* cannot happen to our own frames */
            memset(s->rawbuf, 0, c->raw);
            s->raw_h = 0;
            return s->rawbuf;
        }
        s->raw_h = h;
    }
    return s->rawbuf;
#else
    return c->data; /* never compressed without zstd */
#endif
}

/* ---- streams -------------------------------------------------------------- */

ir_stream *streamFind(ir_chunk_store *s, const char *name, size_t len) {
    for (ir_stream *st = s->streams; st; st = st->next)
        if (st->namelen == len && memcmp(st->name, name, len) == 0) return st;
    return NULL;
}

static int sameFields(const ir_stream *st, const ir_field *f, uint32_t n) {
    if (st->nfields != n) return 0;
    for (uint32_t i = 0; i < n; i++) {
        const ir_field *a = &st->fields[i], *b = &f[i];
        if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->ndim != b->ndim ||
            memcmp(a->shape, b->shape, sizeof(a->shape[0]) * (size_t)a->ndim) != 0)
            return 0;
    }
    return 1;
}

int streamDeclare(ir_chunk_store *s, const char *name, size_t len, const ir_field *f,
                  uint32_t nfields, uint32_t chunk_steps, uint32_t history, int zlevel,
                  ir_stream **out, const char **err) {
    ir_stream *st = streamFind(s, name, len);
    if (st) {
        if (!sameFields(st, f, nfields) || st->chunk_steps != chunk_steps ||
            st->history != history || st->zlevel != zlevel) {
            *err = "stream exists with another signature: REPLAY.STREAM <stream> DROP first";
            return -1;
        }
        *out = st;
        return 0;
    }
    if (s->nstreams >= IR_TRAJ_MAX_STREAMS) {
        *err = "too many streams (65536): drop the ones no writer uses";
        return -1;
    }
    if (zlevel) { /* a sample decompresses into rawbuf: size it now */
#ifdef IR_HAVE_ZSTD
        size_t big = 0;
        for (uint32_t i = 0; i < nfields; i++)
            if ((size_t)f[i].step_bytes * chunk_steps > big)
                big = (size_t)f[i].step_bytes * chunk_steps;
        if (!s->dctx && !(s->dctx = ZSTD_createDCtx())) {
            *err = "out of memory";
            return -1;
        }
        if (big > s->rawbuf_cap) {
            char *p = realloc(s->rawbuf, big);
            if (!p) {
                *err = "out of memory";
                return -1;
            }
            s->rawbuf = p;
            s->rawbuf_cap = big;
            s->raw_h = 0;
        }
#else
        *err = "this server was built without libzstd: install libzstd-dev and rebuild, or "
               "leave COMPRESS out";
        return -1;
#endif
    }
    st = calloc(1, sizeof(*st));
    uint32_t ring = (history + chunk_steps - 1) / chunk_steps + 1;
    if (st) {
        st->name = malloc(len + 1);
        st->held = calloc((size_t)nfields * ring, sizeof(uint32_t));
    }
    if (!st || !st->name || !st->held) {
        if (st) {
            free(st->name);
            free(st->held);
        }
        free(st);
        *err = "out of memory";
        return -1;
    }
    memcpy(st->name, name, len);
    st->name[len] = '\0';
    st->namelen = len;
    st->nfields = nfields;
    memcpy(st->fields, f, nfields * sizeof(*f));
    st->chunk_steps = chunk_steps;
    st->history = history;
    st->ring = ring;
    st->zlevel = zlevel;
    s->stream_bytes += sizeof(*st) + len + 1 + (uint64_t)nfields * ring * sizeof(uint32_t);
    st->next = s->streams;
    s->streams = st;
    s->nstreams++;
    *out = st;
    return 0;
}

void streamEndEpisode(ir_chunk_store *s, ir_stream *st) {
    size_t n = (size_t)st->nfields * st->ring;
    uint64_t S = st->chunk_steps;
    if (st->zlevel && st->nsteps % S) {
        /* the episode's partly filled last chunk is written no more: compress it
         * like a full one if items still reference it (its tail is zeroed) */
        uint64_t k = (st->nsteps - 1) / S;
        for (uint32_t f = 0; f < st->nfields; f++) {
            uint32_t h = st->held[(size_t)f * st->ring + k % st->ring];
            if (h && s->c[h].refs > 1) chunkCompress(s, h, st->zlevel);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (st->held[i]) chunkUnref(s, st->held[i]);
        st->held[i] = 0;
    }
    if (st->nsteps) st->episodes++;
    st->nsteps = 0;
}

static void streamFree(ir_chunk_store *s, ir_stream *st) {
    streamEndEpisode(s, st);
    s->stream_bytes -=
        sizeof(*st) + st->namelen + 1 + (uint64_t)st->nfields * st->ring * sizeof(uint32_t);
    free(st->held);
    free(st->name);
    free(st);
}

int streamDrop(ir_chunk_store *s, const char *name, size_t len) {
    for (ir_stream **pp = &s->streams; *pp; pp = &(*pp)->next) {
        if ((*pp)->namelen == len && memcmp((*pp)->name, name, len) == 0) {
            ir_stream *st = *pp;
            *pp = st->next;
            streamFree(s, st);
            s->nstreams--;
            return 0;
        }
    }
    return -1;
}

void chunkStoreFlushStreams(ir_chunk_store *s) {
    while (s->streams) {
        ir_stream *st = s->streams;
        s->streams = st->next;
        streamFree(s, st);
    }
    s->nstreams = 0;
}

void chunkStoreFree(ir_chunk_store *s) {
    if (!s) return;
    chunkStoreFlushStreams(s);
    chunkCollect(s);
    for (uint32_t h = 1; h < s->used; h++) free(s->c[h].data); /* items' chunks of a dying server */
    free(s->c);
    free(s->pending);
    free(s->scratch);
#ifdef IR_HAVE_ZSTD
    ZSTD_freeCCtx(s->cctx);
    ZSTD_freeDCtx(s->dctx);
#endif
    free(s->zbuf);
    free(s->rawbuf);
    free(s);
}

uint64_t streamOldestStep(const ir_stream *st) {
    if (!st->nsteps) return 0;
    uint64_t last = (st->nsteps - 1) / st->chunk_steps;
    return last + 1 >= st->ring ? (last + 1 - st->ring) * st->chunk_steps : 0;
}

const char *streamName(const ir_stream *st) { return st->name; }
size_t streamNameLen(const ir_stream *st) { return st->namelen; }
uint32_t streamFieldCount(const ir_stream *st) { return st->nfields; }
const ir_field *streamField(const ir_stream *st, uint32_t f) { return &st->fields[f]; }
uint64_t streamSteps(const ir_stream *st) { return st->nsteps; }

uint32_t trajLayoutCols(const ir_traj_layout *L) { return L->ncols; }
const ir_traj_col *trajLayoutCol(const ir_traj_layout *L, uint32_t k) { return &L->col[k]; }
void trajLayoutSet(ir_traj_layout *L, const ir_traj_col *cols, uint32_t ncols) {
    if (cols != L->col) memmove(L->col, cols, (size_t)ncols * sizeof(*cols));
    L->ncols = ncols;
}

int streamAppend(ir_chunk_store *s, ir_stream *st, uint64_t n, const char *const *data) {
    uint32_t S = st->chunk_steps;
    /* new chunks first, so that running out of memory changes nothing */
    uint64_t first_new = (st->nsteps + S - 1) / S, end = (st->nsteps + n + S - 1) / S;
    uint64_t fresh = end - first_new;
    if (fresh > st->ring) { /* more steps than the stream keeps: only the last ring chunks */
        fresh = st->ring;
    }
    size_t need = (size_t)fresh * st->nfields;
    if (need > s->scratch_cap) {
        uint32_t *p = realloc(s->scratch, need * sizeof(*p));
        if (!p) return -1;
        s->scratch = p;
        s->scratch_cap = need;
    }
    for (size_t i = 0; i < need; i++) {
        uint32_t sb = st->fields[i % st->nfields].step_bytes;
        s->scratch[i] = chunkAlloc(s, S * sb);
        if (!s->scratch[i]) {
            for (size_t j = 0; j < i; j++) chunkFree(s, s->scratch[j]);
            return -1;
        }
    }
    for (uint64_t k = end - fresh, i = 0; k < end; k++) {
        for (uint32_t f = 0; f < st->nfields; f++, i++) {
            uint32_t *slot = &st->held[(size_t)f * st->ring + k % st->ring];
            if (*slot) chunkUnref(s, *slot);
            *slot = s->scratch[i];
            /* a new last chunk this append fills only in part: its tail is
             * zeroed once, so no chunk holds (and no snapshot saves) bytes
             * of freed memory */
            uint64_t tail = (st->nsteps + n) % S;
            if (k == end - 1 && tail) {
                uint32_t sb = st->fields[f].step_bytes;
                memset(s->c[*slot].data + tail * sb, 0, (size_t)(S - tail) * sb);
            }
        }
    }
    for (uint32_t f = 0; f < st->nfields; f++) {
        uint32_t sb = st->fields[f].step_bytes;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t step = st->nsteps + i, k = step / S;
            if (k + st->ring < end) continue; /* a chunk already dropped (a huge batch) */
            uint32_t h = st->held[(size_t)f * st->ring + k % st->ring];
            /* contiguous run to the end of this chunk */
            uint64_t run = S - step % S;
            if (run > n - i) run = n - i;
            memcpy(s->c[h].data + (step % S) * sb, data[f] + i * sb, run * sb);
            i += run - 1;
        }
    }
    if (st->zlevel) /* the chunks this append filled: nothing writes to them again */
        for (uint64_t k = st->nsteps / S; k < (st->nsteps + n) / S; k++) {
            if (k + st->ring < end) continue;
            for (uint32_t f = 0; f < st->nfields; f++)
                chunkCompress(s, st->held[(size_t)f * st->ring + k % st->ring], st->zlevel);
        }
    st->nsteps += n;
    s->steps_appended += n;
    return 0;
}

/* ---- item records --------------------------------------------------------- */

int chunkColCheck(const ir_colref *c, char *err, size_t errlen) {
    const ir_stream *st = c->st;
    if (c->len == 0 || c->len > IR_TRAJ_MAX_LEN) {
        snprintf(err, errlen, "length %u of stream '%.64s' field '%s': use 1 to %u steps", c->len,
                 st->name, st->fields[c->field].name, IR_TRAJ_MAX_LEN);
        return -1;
    }
    if (c->first + c->len > st->nsteps) {
        snprintf(err, errlen,
                 "steps %llu..%llu of stream '%.64s' are past the episode's end (%llu steps): "
                 "append them first",
                 (unsigned long long)c->first, (unsigned long long)(c->first + c->len - 1),
                 st->name, (unsigned long long)st->nsteps);
        return -1;
    }
    uint64_t oldest = streamOldestStep(st);
    if (c->first < oldest) {
        snprintf(err, errlen,
                 "step %llu of stream '%.64s' was freed (the stream keeps steps from %llu, "
                 "HISTORY %u): reference newer steps or declare a larger HISTORY",
                 (unsigned long long)c->first, st->name, (unsigned long long)oldest, st->history);
        return -1;
    }
    return 0;
}

static uint32_t colChunks(const ir_colref *c) {
    uint32_t S = c->st->chunk_steps;
    return (uint32_t)((c->first + c->len - 1) / S - c->first / S + 1);
}

/* The record (an item of a TRAJECTORY table): a byte with the column count,
 * then per column four LEB128 varints (step bytes, length, chunk steps S,
 * offset of the first step in its chunk) and the handles of the chunks the
 * range spans, 4 bytes each (their count follows from the varints). About 5
 * bytes a column besides the handles: 47 B for an n-step Atari transition's 4
 * columns, where fixed 32-bit words took 121. */
static size_t vlen(uint32_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static size_t vput(char *p, uint32_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (char)v;
    return n;
}

/* Decodes a varint at rec[*pos] not past end; -1 if malformed. */
static int vget(const char *rec, size_t *pos, size_t end, uint32_t *v) {
    uint32_t x = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (*pos >= end) return -1;
        uint8_t b = (uint8_t)rec[(*pos)++];
        if (shift == 28 && b > 0x0f) return -1;
        x |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

typedef struct {
    uint32_t sb, len, S, off, nch;
    size_t handles; /* offset of the first handle in the record */
} colhdr;

/* Column header at rec[*pos] (bounded by end); advances *pos past its handles.
 * -1 if malformed (only records from a snapshot can be). */
static int colRead(const char *rec, size_t *pos, size_t end, colhdr *c) {
    if (vget(rec, pos, end, &c->sb) || vget(rec, pos, end, &c->len) || vget(rec, pos, end, &c->S) ||
        vget(rec, pos, end, &c->off) || c->S == 0 || c->len == 0 || c->off >= c->S)
        return -1;
    c->nch = (uint32_t)(((uint64_t)c->off + c->len - 1) / c->S + 1);
    c->handles = *pos;
    if ((uint64_t)c->nch * 4 > end - *pos) return -1;
    *pos += (size_t)c->nch * 4;
    return 0;
}

static uint32_t handleAt(const char *rec, const colhdr *c, uint32_t j) {
    uint32_t h;
    memcpy(&h, rec + c->handles + 4 * (size_t)j, 4);
    return h;
}

/* Column k of a record this store made (trusted: no bounds). */
static colhdr colAt(const char *rec, uint32_t k) {
    size_t pos = 1;
    colhdr c = {0};
    for (uint32_t i = 0; i <= k; i++) colRead(rec, &pos, SIZE_MAX, &c);
    return c;
}

size_t chunkItemSize(const ir_colref *cols, uint32_t ncols) {
    size_t n = 1;
    for (uint32_t k = 0; k < ncols; k++) {
        const ir_colref *c = &cols[k];
        uint32_t S = c->st->chunk_steps;
        n += vlen(c->st->fields[c->field].step_bytes) + vlen(c->len) + vlen(S) +
             vlen((uint32_t)(c->first % S)) + 4 * (size_t)colChunks(c);
    }
    return n;
}

void chunkItemMake(ir_chunk_store *s, const ir_colref *cols, uint32_t ncols, char *rec) {
    size_t pos = 0;
    rec[pos++] = (char)ncols;
    for (uint32_t k = 0; k < ncols; k++) {
        const ir_colref *c = &cols[k];
        const ir_stream *st = c->st;
        uint32_t S = st->chunk_steps, nch = colChunks(c);
        pos += vput(rec + pos, st->fields[c->field].step_bytes);
        pos += vput(rec + pos, c->len);
        pos += vput(rec + pos, S);
        pos += vput(rec + pos, (uint32_t)(c->first % S));
        uint64_t k0 = c->first / S;
        for (uint32_t j = 0; j < nch; j++) {
            uint32_t h = st->held[(size_t)c->field * st->ring + (k0 + j) % st->ring];
            s->c[h].refs++;
            s->references++;
            memcpy(rec + pos, &h, 4);
            pos += 4;
        }
    }
    s->items_made++;
}

void chunkItemRelease(ir_chunk_store *s, const char *rec, uint32_t len) {
    uint32_t ncols = (uint8_t)rec[0];
    size_t pos = 1;
    for (uint32_t k = 0; k < ncols; k++) {
        colhdr c;
        colRead(rec, &pos, len, &c);
        for (uint32_t j = 0; j < c.nch; j++) {
            chunkUnref(s, handleAt(rec, &c, j));
            s->references--;
        }
    }
}

uint32_t chunkItemCols(const char *rec) { return (uint8_t)rec[0]; }

void chunkItemCol(const char *rec, uint32_t k, uint32_t *step_bytes, uint32_t *len) {
    colhdr c = colAt(rec, k);
    *step_bytes = c.sb;
    *len = c.len;
}

uint32_t chunkItemColChunks(const char *rec, uint32_t k, uint32_t *handles, uint32_t max) {
    colhdr c = colAt(rec, k);
    for (uint32_t j = 0; j < c.nch && j < max; j++) handles[j] = handleAt(rec, &c, j);
    return c.nch;
}

void chunkItemCopy(ir_chunk_store *s, const char *rec, uint32_t k, char *dst) {
    colhdr c = colAt(rec, k);
    uint32_t len = c.len, off = c.off, j = 0;
    while (len) {
        uint32_t run = c.S - off < len ? c.S - off : len;
        memcpy(dst, chunkRaw(s, handleAt(rec, &c, j)) + (size_t)off * c.sb, (size_t)run * c.sb);
        dst += (size_t)run * c.sb;
        len -= run;
        off = 0;
        j++;
    }
}

/* ---- snapshots ------------------------------------------------------------ */

static uint64_t chunkRawSize(const ir_chunk *c) { return c->raw ? c->raw : c->bytes; }

int chunkLoadBegin(ir_chunk_store *s, uint32_t used, uint32_t cap, const char **err) {
    if (s->cap || s->used) {
        *err = "a second chunk store";
        return -1;
    }
    if ((used == 0) != (cap == 0) || used > cap ||
        cap > (used <= 1024 ? 1024u : 2 * (uint64_t)used)) {
        *err = "chunk handle counts out of range";
        return -1;
    }
    if (!cap) return 0;
    s->c = calloc(cap, sizeof(ir_chunk));
    if (!s->c) {
        *err = "out of memory";
        return -1;
    }
    s->cap = cap;
    s->used = used;
    return 0;
}

char *chunkLoadChunk(ir_chunk_store *s, uint32_t h, uint32_t bytes, uint32_t raw,
                     const char **err) {
    if (h == 0 || h >= s->used || s->c[h].data) {
        *err = "chunk handle out of range or given twice";
        return NULL;
    }
    if (bytes == 0 || (raw && raw <= bytes)) {
        *err = "chunk sizes out of range";
        return NULL;
    }
    if (raw) {
#ifdef IR_HAVE_ZSTD
        if (!s->dctx && !(s->dctx = ZSTD_createDCtx())) {
            *err = "out of memory";
            return NULL;
        }
        if (raw > s->rawbuf_cap) {
            char *p = realloc(s->rawbuf, raw);
            if (!p) {
                *err = "out of memory";
                return NULL;
            }
            s->rawbuf = p;
            s->rawbuf_cap = raw;
        }
#else
        *err = "it holds zstd-compressed chunks and this server was built without libzstd: "
               "install libzstd-dev and rebuild";
        return NULL;
#endif
    }
    char *d = malloc(bytes);
    if (!d) {
        *err = "out of memory";
        return NULL;
    }
    s->c[h] = (ir_chunk){.refs = 0, .bytes = bytes, .raw = raw, .data = d};
    s->chunks++;
    s->chunk_bytes += bytes;
    if (raw) {
        s->chunks_compressed++;
        s->raw_bytes_compressed += raw;
    }
    return d;
}

int chunkLoadCheckFrame(const ir_chunk_store *s, uint32_t h) {
    const ir_chunk *c = &s->c[h];
    if (!c->raw) return 0;
#ifdef IR_HAVE_ZSTD
    unsigned long long n = ZSTD_getFrameContentSize(c->data, c->bytes);
    return n == c->raw ? 0 : -1;
#else
    return -1;
#endif
}

int chunkLoadEnd(ir_chunk_store *s, const uint32_t *free_list, uint32_t nfree, const char **err) {
    if (s->used && s->chunks + nfree != (uint64_t)s->used - 1) {
        *err = "live and free chunk handles do not add up";
        return -1;
    }
    uint32_t prev = 0;
    for (uint32_t i = 0; i < nfree; i++) {
        uint32_t h = free_list[i];
        /* a free handle has no data and is not on the list yet (next_free
         * of a listed one is marked with the UINT32_MAX sentinel first) */
        if (h == 0 || h >= s->used || s->c[h].data || s->c[h].next_free) {
            *err = "free chunk handle out of range, live or listed twice";
            return -1;
        }
        s->c[h].next_free = UINT32_MAX;
        if (prev) s->c[prev].next_free = h;
        else s->free_head = h;
        prev = h;
    }
    if (prev) s->c[prev].next_free = 0;
    return 0;
}

int streamLoadState(ir_chunk_store *s, ir_stream *st, uint64_t nsteps, uint64_t episodes,
                    const uint32_t *held, const char **err) {
    uint32_t S = st->chunk_steps;
    size_t n = (size_t)st->nfields * st->ring;
    uint64_t last = nsteps ? (nsteps - 1) / S : 0;
    uint64_t lo = nsteps && last + 1 >= st->ring ? last + 1 - st->ring : 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t f = (uint32_t)(i / st->ring), slot = (uint32_t)(i % st->ring), h = held[i];
        /* the chunk number this slot holds when the stream holds one there */
        int want = 0;
        if (nsteps) {
            uint64_t k = last - ((last % st->ring) + st->ring - slot) % st->ring;
            want = k >= lo && k <= last;
        }
        if (!want) {
            if (h) {
                *err = "a stream holds a chunk outside its history";
                return -1;
            }
            continue;
        }
        if (!h || h >= s->used || !s->c[h].data || s->c[h].refs ||
            chunkRawSize(&s->c[h]) != (uint64_t)S * st->fields[f].step_bytes) {
            *err = "a stream's chunk is missing, held twice or of the wrong size";
            return -1;
        }
        uint64_t k = last - ((last % st->ring) + st->ring - slot) % st->ring;
        if (k == last && nsteps % S && s->c[h].raw) {
            *err = "a stream's partly filled chunk is compressed";
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        st->held[i] = held[i];
        if (held[i]) s->c[held[i]].refs++;
    }
    st->nsteps = nsteps;
    st->episodes = episodes;
    return 0;
}

int chunkItemCheck(const ir_chunk_store *s, const char *rec, uint32_t len, const ir_traj_layout *L,
                   const char **err) {
    if (len < 1 || (uint8_t)rec[0] != L->ncols || L->ncols == 0) {
        *err = "an item's reference record does not match the table's columns";
        return -1;
    }
    size_t pos = 1;
    for (uint32_t k = 0; k < L->ncols; k++) {
        colhdr c;
        if (colRead(rec, &pos, len, &c) || c.S > 65536) {
            *err = "an item's reference record is malformed";
            return -1;
        }
        if (c.sb != L->col[k].step_bytes || c.len != L->col[k].len) {
            *err = "an item's column does not match the table's columns or its chunks";
            return -1;
        }
        for (uint32_t j = 0; j < c.nch; j++) {
            uint32_t h = handleAt(rec, &c, j);
            if (h == 0 || h >= s->used || !s->c[h].data ||
                chunkRawSize(&s->c[h]) != (uint64_t)c.S * c.sb) {
                *err = "an item references a chunk the snapshot does not hold, or of another size";
                return -1;
            }
        }
    }
    if (pos != len) {
        *err = "an item's reference record has bytes past its columns";
        return -1;
    }
    return 0;
}

void chunkItemRetain(ir_chunk_store *s, const char *rec) {
    uint32_t ncols = (uint8_t)rec[0];
    size_t pos = 1;
    for (uint32_t k = 0; k < ncols; k++) {
        colhdr c;
        colRead(rec, &pos, SIZE_MAX, &c);
        for (uint32_t j = 0; j < c.nch; j++) {
            s->c[handleAt(rec, &c, j)].refs++;
            s->references++;
        }
    }
}

void chunkStoreReverseStreams(ir_chunk_store *s) {
    ir_stream *prev = NULL, *st = s->streams;
    while (st) {
        ir_stream *next = st->next;
        st->next = prev;
        prev = st;
        st = next;
    }
    s->streams = prev;
}
