/* snapshot.c - SAVE, BGSAVE, LASTSAVE, saving on shutdown and loading at
 * start: point-in-time snapshots of the keyspace and every replay table
 * (see snapshot.h for the API and the directory layout).
 *
 * ---- File format, version 1 ----------------------------------------------
 *
 * Every integer is little-endian with the width given (u8/u32/u64, i64 two's
 * complement); f64 is the IEEE-754 binary64 bit pattern as a u64, so stored
 * priorities come back bit for bit. Nothing is a struct dump.
 *
 *   header   8   magic "INREPLAY"
 *            u32 version (1)
 *            u32 flags (0; a reader rejects bits it does not know)
 *            u64 created, unix time in ms
 *   records, each:
 *            4   tag (ASCII)
 *            u64 body length L (bytes after this field)
 *            L   body
 *   the last record is DONE; nothing follows it.
 *
 *   "KSTR" a string key      i64 expire (absolute unix ms, -1 = no TTL)
 *                            u64 key length, key bytes
 *                            u64 value length, value bytes
 *   "KLST" a list key        i64 expire, u64 key length, key bytes
 *                            u64 element count, then per element
 *                            u64 length, bytes (head to tail)
 *   The replay engine writes and reads the table and trajectory records
 *   (TABL to TTRJ; replay/persist.h), for the module host's RDB as well.
 *   "TABL" a replay table    u64 name length (1..200), name bytes
 *                            options: u64 capacity, u32 fanout K, u64 maxbytes,
 *                              f64 alpha, f64 beta, f64 epsilon, u64 seed
 *                            state: u64 next_id, u64 oldest_id, u64 arena tail,
 *                              f64 the sampler's max priority
 *                            counters: u64 inserts, samples, sample_calls,
 *                              updates, stale_updates, evictions
 *                            then the next_id - oldest_id live items, oldest
 *                            first (FIFO order), each: u64 id, f64 stored
 *                            priority, u64 arena offset, u32 length, bytes
 *   "TABG" a table with selectors: as TABL up to the counters, then
 *                            u64 consumed, u32 sampler, u32 remover (replay.h's
 *                            IR_SEL_*), u32 MAX_TIMES_SAMPLED, u64 QUEUE/STACK
 *                            size, u64 item count n, then n items in id
 *                            order, each: u64 id, f64 stored priority, u64
 *                            arena offset (ring mode; ignored in general
 *                            mode, which packs the arena anew), u32 times
 *                            sampled, u32 length, bytes. Written for every
 *                            table whose sampler, remover, MAX_TIMES_SAMPLED
 *                            or QUEUE is not the default; TABL for the rest.
 *   "TTMS" times sampled of the TABL just before it (only when an item was
 *                            sampled): u64 n, n x u32 in the TABL's order
 *   "TLIM" (L = 48)          the rate limiter of the TABL record just before
 *                            it (only for a table that has one): u64
 *                            MIN_SIZE, f64 SAMPLES_PER_INSERT, f64
 *                            ERROR_BUFFER, u64 limiter inserts, u64 limiter
 *                            samples, u64 microseconds waited in total
 *   "PARM" a parameter table with its optimizer state (PARAM.*): see
 *                            replay/persist.c; not counted in DONE's tables
 *   "CSTO", "TSTR", "TTRJ"   trajectory chunks, streams and a TRAJECTORY
 *                            table's columns (after its TABL/TABG, before its
 *                            TTMS/TLIM): see replay/persist.c
 *   "FUNC" a library          u64 code length, the code as FUNCTION LOAD got it
 *                            (FUNCTION DUMP's content); the libraries of a
 *                            snapshot replace the server's when it loads
 *   "DONE" (L = 28)          u64 keys, u64 tables (records written above)
 *                            u64 length of the whole file
 *                            u32 CRC-32 (zlib's crc32) of every byte of the
 *                              file before this field
 *
 * Keys whose TTL has passed when the save starts are left out. Records come
 * in no particular order (keys in hash-table order, then the chunk store and
 * its streams, then the tables in REPLAY.LIST order). Items keep their arena offsets, so a restored table is
 * the same ring: later ADDs evict exactly what they would have evicted.
 *
 * Writing streams through one 1 MB buffer; bodies of 256 KB or more (a
 * 13 MB parameter blob) go to write() straight from the keyspace or arena.
 * Lengths are known before a record is written (one extra pass over a list's
 * elements or a table's items), so nothing is seeked back and patched.
 *
 * Reading is two passes. The first checks the file as a whole before
 * anything is parsed: size, header, the DONE record at exactly the end, its
 * file length, and the CRC over the entire file - a truncated file has no
 * DONE record at the end, a flipped bit fails the CRC. The second parses
 * into a fresh keyspace and table set and checks every length against what
 * is left of its record and every record against what is left of the file,
 * so even a crafted file with a valid CRC cannot make the loader read out of
 * bounds or allocate more than the file holds (tables allocate by capacity
 * and maxbytes, bounded as in REPLAY.CREATE; the items themselves must be
 * in the file). Table contents are checked against the invariants of
 * tableAdd (replay.c). Only a snapshot that parsed completely is swapped in.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "chunks.h"
#include "config.h"
#include "db_internal.h"
#include "rdb.h"
#include "replay.h"
#include "server.h"
#include "functions.h"
#include "persist.h"
#include "snapshot.h"

#define SNAP_MAGIC "INREPLAY"
#define SNAP_VERSION 1u
#define SNAP_HEADER_LEN 24
#define SNAP_REC_HDR 12 /* tag + u64 length */
#define SNAP_DONE_BODY 28
#define SNAP_DONE_LEN (SNAP_REC_HDR + SNAP_DONE_BODY) /* the whole DONE record */
#define SNAP_BUF (1u << 20)
#define SNAP_DIRECT (SNAP_BUF / 4)
#define SNAP_CHUNK (1u << 30) /* largest single read/write/crc32 call */

#define TAG_KSTR "KSTR"
#define TAG_KLST "KLST"
#define TAG_KHSH "KHSH" /* hashes and sets: see the end of this file */
#define TAG_KSET "KSET"
#define TAG_KZST "KZST" /* sorted sets: as KSET, each member followed by its score */
#define TAG_KSTM \
    "KSTM" /* a stream key: i64 expire, u64 key length, key, u64 length, t_stream.c's record */
#define TAG_KSEL "KSEL" /* the keys that follow are in another database */
#define TAG_DONE "DONE"
#define TAG_FUNC "FUNC" /* a FUNCTION LOAD library: u64 code length, the code (shebang included) */

/* ---- process-wide state ------------------------------------------------- */

static struct {
    const ir_server *srv; /* the server this state belongs to */
    uint64_t srv_start_ms;
    pid_t child;       /* BGSAVE child, 0 = none */
    int child_pipe;    /* its report: "ok <bytes>" or "err <why>" */
    uint64_t child_ms; /* the name it writes */
    uint64_t child_start_ms;
    char child_dir[PATH_MAX];
    uint64_t last_name_ms; /* the last <ms> handed out */
    uint64_t lastsave_ms;  /* last successful save (the start before any) */
    int last_ok;           /* outcome of the last save */
    int64_t last_bg_sec;   /* duration of the last BGSAVE, -1 = none yet */
    uint64_t saves;
    uint64_t last_bytes;
    uint64_t loaded_keys, loaded_tables, loaded_expired;
    char last_file[PATH_MAX];
    char last_error[PATH_MAX + 160]; /* why the last save failed ("" after a success) */
    uint64_t dirty_saved;            /* s->dirty when the last saved snapshot was taken */
    uint64_t child_dirty;            /* s->dirty when the BGSAVE child forked */
    char dir[PATH_MAX];              /* the absolute snapshot directory (s->cfg.dir points here) */
    int loaded;                      /* snapshotRestore loaded a snapshot */
} snap;

void snapshotInit(ir_server *s) {
    memset(&snap, 0, sizeof(snap));
    snap.srv = s;
    snap.srv_start_ms = s->start_ms;
    snap.child_pipe = -1;
    snap.lastsave_ms = s->start_ms;
    snap.last_ok = 1;
    snap.last_bg_sec = -1;
}

static void ensureInit(ir_server *s) {
    if (snap.srv != s || snap.srv_start_ms != s->start_ms) snapshotInit(s);
}

int snapshotInProgress(void) { return snap.child > 0; }

int snapshotLoaded(void) { return snap.loaded; }

static const char *snapDir(const ir_server *s) {
    return s->cfg.dir && s->cfg.dir[0] ? s->cfg.dir : ".";
}

static void msgf(char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void msgf(char *msg, size_t msglen, const char *fmt, ...) {
    if (!msg || !msglen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
}

/* ---- little-endian encoding ---------------------------------------------- */

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t f64bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static double bitsf64(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

static uint32_t crcUpdate(uint32_t crc, const void *p, size_t n) {
    const unsigned char *c = p;
    while (n) {
        uInt k = (uInt)(n > SNAP_CHUNK ? SNAP_CHUNK : n);
        crc = (uint32_t)crc32(crc, c, k);
        c += k;
        n -= k;
    }
    return crc;
}

/* ---- the buffered writer -------------------------------------------------- */

typedef struct snapWriter {
    ir_pwriter pw; /* first: the engine's records go through it; pw.err: errno of the first
                    * failure */
    int fd;
    unsigned char *buf;
    size_t len;
    uint32_t crc;   /* of every byte flushed so far */
    uint64_t total; /* bytes handed over so far */
} snapWriter;

static void wRaw(snapWriter *w, const void *p, size_t n) {
    const char *c = p;
    while (n && !w->pw.err) {
        ssize_t k = write(w->fd, c, n > SNAP_CHUNK ? SNAP_CHUNK : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            w->pw.err = errno;
        } else if (k == 0) {
            w->pw.err = EIO;
        } else {
            c += k;
            n -= (size_t)k;
        }
    }
}

/* The CRC is taken over whole buffers (and big bodies), not field by field. */
static void wFlush(snapWriter *w) {
    w->crc = crcUpdate(w->crc, w->buf, w->len);
    wRaw(w, w->buf, w->len);
    w->len = 0;
}

static void wBytes(snapWriter *w, const void *p, size_t n) {
    if (w->pw.err || n == 0) return;
    w->total += n;
    if (n >= SNAP_DIRECT) { /* big bodies go out from where they are */
        wFlush(w);
        w->crc = crcUpdate(w->crc, p, n);
        wRaw(w, p, n);
        return;
    }
    if (w->len + n > SNAP_BUF) wFlush(w);
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void wU32(snapWriter *w, uint32_t v) {
    unsigned char b[4];
    put32(b, v);
    wBytes(w, b, 4);
}

static void wU64(snapWriter *w, uint64_t v) {
    unsigned char b[8];
    put64(b, v);
    wBytes(w, b, 8);
}

static void wF64(snapWriter *w, double d) { wU64(w, f64bits(d)); }

static void wRecord(snapWriter *w, const char *tag, uint64_t len) {
    wBytes(w, tag, 4);
    wU64(w, len);
}

/* The engine's records (persist.h) in the same encoding. */
static void pwRecord(ir_pwriter *w, const char tag[4], uint64_t len) {
    wRecord((snapWriter *)w, tag, len);
}
static void pwBytes(ir_pwriter *w, const void *p, size_t n) { wBytes((snapWriter *)w, p, n); }
static void pwU32(ir_pwriter *w, uint32_t v) { wU32((snapWriter *)w, v); }
static void pwU64(ir_pwriter *w, uint64_t v) { wU64((snapWriter *)w, v); }
static void pwF64(ir_pwriter *w, double d) { wF64((snapWriter *)w, d); }

/* ---- writing a snapshot ----------------------------------------------------- */

struct snapWriter;
static void saveCollection(struct snapWriter *w, const dbEntry *e);
struct saveCtx;
static void saveOtherDbs(const ir_server *s, struct saveCtx *sc);

typedef struct saveCtx {
    snapWriter *w;
    int64_t now;
    uint64_t keys;
} saveCtx;

static int saveEntry(const dbEntry *e, void *arg) {
    saveCtx *sc = arg;
    snapWriter *w = sc->w;
    if (keyIsExpired(e, sc->now)) return 0;
    if (e->type == OBJ_HASH || e->type == OBJ_SET || e->type == OBJ_ZSET) {
        saveCollection(w, e);
    } else if (e->type == OBJ_STREAM) {
        rdbBuf b = {0};
        streamSerialize(&b, e->v.stream);
        if (b.oom) abort(); /* as ir_xrealloc */
        wRecord(w, TAG_KSTM, 24 + (uint64_t)e->klen + b.len);
        wU64(w, (uint64_t)e->expire);
        wU64(w, e->klen);
        wBytes(w, e->key, e->klen);
        wU64(w, b.len);
        wBytes(w, b.p, b.len);
        free(b.p);
    } else if (e->type == OBJ_STRING) {
        wRecord(w, TAG_KSTR, 24 + (uint64_t)e->klen + e->v.str.len);
        wU64(w, (uint64_t)e->expire);
        wU64(w, e->klen);
        wBytes(w, e->key, e->klen);
        wU64(w, e->v.str.len);
        wBytes(w, e->v.str.ptr, e->v.str.len);
    } else {
        const dbList *l = &e->v.list;
        if (l->len == 0) return 0; /* never kept, but never saved either */
        uint64_t body = 24 + (uint64_t)e->klen;
        for (size_t i = 0; i < l->len; i++) body += 8 + (uint64_t)listAt(l, i)->len;
        wRecord(w, TAG_KLST, body);
        wU64(w, (uint64_t)e->expire);
        wU64(w, e->klen);
        wBytes(w, e->key, e->klen);
        wU64(w, l->len);
        for (size_t i = 0; i < l->len; i++) {
            const lelem *x = listAt(l, i);
            wU64(w, x->len);
            wBytes(w, x->p, x->len);
        }
    }
    sc->keys++;
    return w->pw.err ? -1 : 0;
}

/* Write the whole snapshot to fd, as of the clock's now. Returns 0 or an errno. */
static int writeSnapshot(const ir_server *s, int fd, uint64_t *bytes, uint64_t *nkeys,
                         uint64_t *ntables) {
    uint64_t now = ir_mstime();
    snapWriter w = {
        .pw = {.record = pwRecord, .bytes = pwBytes, .u32 = pwU32, .u64 = pwU64, .f64 = pwF64},
        .fd = fd,
        .buf = malloc(SNAP_BUF)};
    if (!w.buf) return ENOMEM;
    w.crc = (uint32_t)crc32(0L, Z_NULL, 0);
    unsigned char h[SNAP_HEADER_LEN];
    memcpy(h, SNAP_MAGIC, 8);
    put32(h + 8, SNAP_VERSION);
    put32(h + 12, 0);
    put64(h + 16, now);
    wBytes(&w, h, sizeof(h));

    saveCtx sc = {&w, (int64_t)now, 0};
    dbForEach(s->db, saveEntry, &sc);
    saveOtherDbs(s, &sc);                    /* databases 1..N-1 (see the end of this file) */
    persistSaveChunkStore(&w.pw, s->chunks); /* before the tables whose items reference it */
    uint64_t tables = 0;
    for (const ir_table *t = tablesFirst(s->tables); t && !w.pw.err; t = tableNext(t), tables++)
        persistSaveTable(&w.pw, t);
    for (const ir_param *p = s->params->head; p && !w.pw.err; p = p->next)
        persistSaveParam(&w.pw, p);

    const char *code;
    size_t clen;
    for (size_t i = 0; !w.pw.err && functionsLibraryCode(s, i, &code, &clen); i++) {
        wRecord(&w, TAG_FUNC, 8 + (uint64_t)clen);
        wU64(&w, clen);
        wBytes(&w, code, clen);
    }

    wRecord(&w, TAG_DONE, SNAP_DONE_BODY);
    wU64(&w, sc.keys);
    wU64(&w, tables);
    wU64(&w, w.total + 8 + 4); /* this field and the CRC are all that is left */
    wFlush(&w);
    unsigned char c[4];
    put32(c, w.crc); /* covers everything before it, so it is not added to itself */
    wRaw(&w, c, 4);
    w.total += 4;
    free(w.buf);
    *bytes = w.total;
    *nkeys = sc.keys;
    *ntables = tables;
    return w.pw.err;
}

/* ---- the directory ------------------------------------------------------ */

/* "inreplay-<ms>.snap" (tmp = 0) or ".inreplay-<ms>.snap.tmp" (tmp = 1). */
static int parseName(const char *name, int *tmp, uint64_t *ms) {
    const char *p = name;
    *tmp = 0;
    if (*p == '.') {
        *tmp = 1;
        p++;
    }
    if (strncmp(p, "inreplay-", 9) != 0) return 0;
    p += 9;
    if (p[0] == '0' && p[1] >= '0' && p[1] <= '9') return 0; /* one spelling per name */
    uint64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (digits == 0) return 0;
    if (strcmp(p, *tmp ? ".snap.tmp" : ".snap") != 0) return 0;
    *ms = v;
    return 1;
}

static int cmpDesc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The <ms> of dir's snapshots, newest first; *maxtmp gets the largest <ms>
 * of a temporary file (0 if none). Returns 0 or an errno. */
static int listSnapshots(const char *dir, uint64_t **out, size_t *n, uint64_t *maxtmp) {
    *out = NULL;
    *n = 0;
    if (maxtmp) *maxtmp = 0;
    DIR *d = opendir(dir);
    if (!d) return errno;
    size_t cap = 0;
    struct dirent *de;
    int err = 0;
    while ((de = readdir(d)) != NULL) {
        int tmp;
        uint64_t ms;
        if (!parseName(de->d_name, &tmp, &ms)) continue;
        if (tmp) {
            if (maxtmp && ms > *maxtmp) *maxtmp = ms;
            continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *p = realloc(*out, cap * sizeof(uint64_t));
            if (!p) {
                err = ENOMEM;
                break;
            }
            *out = p;
        }
        (*out)[(*n)++] = ms;
    }
    closedir(d);
    if (err) {
        free(*out);
        *out = NULL;
        *n = 0;
        return err;
    }
    if (*n) qsort(*out, *n, sizeof(uint64_t), cmpDesc);
    return 0;
}

static int snapPath(char *buf, size_t len, const char *dir, int tmp, uint64_t ms) {
    int n = snprintf(buf, len, tmp ? "%s/.inreplay-%llu.snap.tmp" : "%s/inreplay-%llu.snap", dir,
                     (unsigned long long)ms);
    return n > 0 && (size_t)n < len ? 0 : ENAMETOOLONG;
}

/* A name newer than the clock's last one and every file already there. */
static uint64_t nextSnapshotMs(const char *dir) {
    uint64_t ms = ir_mstime(), maxtmp = 0, *list;
    size_t n;
    if (ms <= snap.last_name_ms) ms = snap.last_name_ms + 1;
    if (listSnapshots(dir, &list, &n, &maxtmp) == 0) {
        if (n && ms <= list[0]) ms = list[0] + 1;
        if (ms <= maxtmp) ms = maxtmp + 1;
        free(list);
    }
    snap.last_name_ms = ms;
    return ms;
}

static void fsyncDir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    /* Some filesystems cannot fsync a directory; the rename stands anyway. */
    if (fsync(fd) != 0 && errno != EINVAL && errno != EBADF && errno != ENOTSUP)
        serverLog("fsync of snapshot directory %s: %s", dir, strerror(errno));
    close(fd);
}

/* After a successful save of `saved`: keep the newest IR_SNAPSHOT_KEEP
 * snapshots, and remove temporary files older than it (left by saves that
 * died half way). */
static void pruneSnapshots(const char *dir, uint64_t saved) {
    uint64_t *list, maxtmp;
    size_t n;
    char path[PATH_MAX];
    if (listSnapshots(dir, &list, &n, &maxtmp) != 0) return;
    for (size_t i = IR_SNAPSHOT_KEEP; i < n; i++) {
        if (snapPath(path, sizeof(path), dir, 0, list[i]) == 0 && unlink(path) == 0)
            serverLog("Removed old snapshot %s", path);
    }
    free(list);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int tmp;
        uint64_t ms;
        if (parseName(de->d_name, &tmp, &ms) && tmp && ms < saved &&
            snapPath(path, sizeof(path), dir, 1, ms) == 0)
            unlink(path);
    }
    closedir(d);
}

/* Write dir/inreplay-<ms>.snap atomically. Returns 0, or an errno with msg. */
static int saveToDir(const ir_server *s, const char *dir, uint64_t ms, uint64_t *bytes, char *msg,
                     size_t msglen) {
    char tmp[PATH_MAX], final[PATH_MAX];
    uint64_t keys = 0, tables = 0;
    *bytes = 0;
    int err = snapPath(tmp, sizeof(tmp), dir, 1, ms);
    if (!err) err = snapPath(final, sizeof(final), dir, 0, ms);
    if (err) {
        msgf(msg, msglen, "snapshot directory path too long: %s", dir);
        return err;
    }
    int fd = ir_create_private(tmp);
    if (fd < 0) {
        err = errno;
        msgf(msg, msglen, "cannot create %s: %s", tmp, strerror(err));
        return err;
    }
    err = writeSnapshot(s, fd, bytes, &keys, &tables);
    if (!err && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (err) {
        msgf(msg, msglen, "writing %s: %s", tmp, strerror(err));
        unlink(tmp);
        return err;
    }
    if (rename(tmp, final) != 0) {
        err = errno;
        msgf(msg, msglen, "rename %s to %s: %s", tmp, final, strerror(err));
        unlink(tmp);
        return err;
    }
    fsyncDir(dir);
    msgf(msg, msglen, "%s: %llu keys, %llu tables, %llu bytes", final, (unsigned long long)keys,
         (unsigned long long)tables, (unsigned long long)*bytes);
    return 0;
}

static void recordSave(const char *dir, uint64_t ms, uint64_t bytes) {
    snap.lastsave_ms = ir_mstime();
    snap.last_ok = 1;
    snap.last_error[0] = '\0';
    snap.saves++;
    snap.last_bytes = bytes;
    if (snapPath(snap.last_file, sizeof(snap.last_file), dir, 0, ms) != 0) snap.last_file[0] = '\0';
    pruneSnapshots(dir, ms);
}

/* ---- SAVE, BGSAVE and the child ------------------------------------------ */

static void reapChild(int killit) {
    if (snap.child <= 0) return;
    if (killit) kill(snap.child, SIGKILL);
    int status;
    while (waitpid(snap.child, &status, 0) < 0 && errno == EINTR) {}
    char tmp[PATH_MAX];
    if (snapPath(tmp, sizeof(tmp), snap.child_dir, 1, snap.child_ms) == 0) unlink(tmp);
    if (snap.child_pipe >= 0) close(snap.child_pipe);
    snap.child_pipe = -1;
    snap.child = 0;
}

void snapshotShutdown(ir_server *s) {
    ensureInit(s);
    if (snap.child <= 0) return;
    serverLog("Killing the background save child (pid %ld)", (long)snap.child);
    reapChild(1);
}

int snapshotSave(ir_server *s, char *msg, size_t msglen) {
    ensureInit(s);
    if (snap.child > 0) {
        serverLog("Killing the background save child (pid %ld): a foreground save replaces it",
                  (long)snap.child);
        reapChild(1);
    }
    const char *dir = snapDir(s);
    uint64_t ms = nextSnapshotMs(dir), bytes;
    uint64_t t0 = ir_mstime();
    char why[PATH_MAX + 128];
    int err = saveToDir(s, dir, ms, &bytes, why, sizeof(why));
    if (err) {
        snap.last_ok = 0;
        msgf(snap.last_error, sizeof(snap.last_error), "%s", why);
        serverLog("Snapshot failed: %s", why);
        msgf(msg, msglen, "snapshot failed: %s", why);
        return err == ENOMEM ? IR_ENOMEM : IR_ECONFIG;
    }
    recordSave(dir, ms, bytes);
    snap.dirty_saved = s->dirty; /* nothing ran while it was written */
    serverLog("DB saved on disk: %s in %llu ms", why, (unsigned long long)(ir_mstime() - t0));
    msgf(msg, msglen, "saved %s", why);
    return IR_OK;
}

static void childMain(const ir_server *s, const char *dir, uint64_t ms, int report)
    __attribute__((noreturn));
static void childMain(const ir_server *s, const char *dir, uint64_t ms, int report) {
    forkedChildBegin(report);
    char why[PATH_MAX + 128], line[PATH_MAX + 160];
    uint64_t bytes = 0;
    int err = saveToDir(s, dir, ms, &bytes, why, sizeof(why));
    int n = err ? snprintf(line, sizeof(line), "err %s", why)
                : snprintf(line, sizeof(line), "ok %llu", (unsigned long long)bytes);
    if (n > 0) {
        ssize_t k = write(report, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
        (void)k;
    }
    _exit(err ? 1 : 0);
}

int snapshotBackground(ir_server *s, char *msg, size_t msglen) {
    ensureInit(s);
    if (snap.child > 0) {
        msgf(msg, msglen, "Background save already in progress");
        return IR_ERUNNING;
    }
    const char *dir = snapDir(s);
    if (strlen(dir) >= sizeof(snap.child_dir)) {
        msgf(msg, msglen, "snapshot directory path too long");
        return IR_ECONFIG;
    }
    uint64_t ms = nextSnapshotMs(dir);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        msgf(msg, msglen, "pipe: %s", strerror(errno));
        return IR_ECONFIG;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        childMain(s, dir, ms, p[1]);
    }
    close(p[1]);
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        snap.last_ok = 0;
        msgf(snap.last_error, sizeof(snap.last_error), "fork: %s", strerror(e));
        serverLog("Can't save in background: fork: %s", strerror(e));
        msgf(msg, msglen, "Can't save in background: fork: %s", strerror(e));
        return IR_ECONFIG;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    snap.child = pid;
    snap.child_pipe = p[0];
    snap.child_ms = ms;
    snap.child_start_ms = ir_mstime();
    snap.child_dirty = s->dirty; /* what the child's image holds */
    memcpy(snap.child_dir, dir, strlen(dir) + 1);
    serverLog("Background saving started by pid %ld", (long)pid);
    msgf(msg, msglen, "Background saving started");
    return IR_OK;
}

/* CONFIG SET save's rules, as Redis's serverCron: a BGSAVE when some rule's
 * changes and seconds have both passed since the last successful save; after
 * a failed one, not again for 5 seconds. */
static void autoSave(ir_server *s) {
    static uint64_t last_try_ms;
    static int try_failed; /* the last automatic BGSAVE could not start */
    int n;
    const ir_saveparam *sp = configSaveParams(&n);
    if (!n) return;
    uint64_t now = ir_mstime(), changes = s->dirty - snap.dirty_saved;
    if ((!snap.last_ok || try_failed) && now - last_try_ms < 5000) return;
    for (int i = 0; i < n; i++) {
        if (changes < (uint64_t)sp[i].changes ||
            now - snap.lastsave_ms <= (uint64_t)sp[i].seconds * 1000)
            continue;
        char msg[PATH_MAX + 160];
        serverLog("%llu changes in %lld seconds. Saving...", (unsigned long long)changes,
                  sp[i].seconds);
        last_try_ms = now;
        try_failed = snapshotBackground(s, msg, sizeof(msg)) != IR_OK;
        if (try_failed) serverLog("Automatic BGSAVE: %s", msg);
        return;
    }
}

void snapshotTick(ir_server *s) {
    ensureInit(s);
    if (snap.child <= 0) {
        autoSave(s);
        return;
    }
    int status = 0;
    pid_t r = waitpid(snap.child, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) return;
    /* The child's report (it wrote it before exiting; <= PIPE_BUF bytes). */
    char line[PATH_MAX + 160];
    ssize_t n = read(snap.child_pipe, line, sizeof(line) - 1);
    line[n > 0 ? n : 0] = '\0';
    int reported_ok = strncmp(line, "ok ", 3) == 0;
    /* r < 0 (ECHILD): someone else reaped it; its report is all there is. */
    int ok = reported_ok && (r < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
    uint64_t ms = snap.child_ms;
    snap.last_bg_sec = (int64_t)((ir_mstime() - snap.child_start_ms + 500) / 1000);
    char dir[PATH_MAX];
    memcpy(dir, snap.child_dir, sizeof(dir));
    close(snap.child_pipe);
    snap.child_pipe = -1;
    snap.child = 0;
    if (ok) {
        uint64_t bytes = strtoull(line + 3, NULL, 10);
        recordSave(dir, ms, bytes);
        snap.dirty_saved = snap.child_dirty;
        serverLog("Background saving terminated with success (%s, %llu bytes)", snap.last_file,
                  (unsigned long long)bytes);
        return;
    }
    char tmp[PATH_MAX];
    if (snapPath(tmp, sizeof(tmp), dir, 1, ms) == 0) unlink(tmp);
    snap.last_ok = 0;
    if (strncmp(line, "err ", 4) == 0)
        msgf(snap.last_error, sizeof(snap.last_error), "%s", line + 4);
    else if (r > 0 && WIFSIGNALED(status))
        msgf(snap.last_error, sizeof(snap.last_error),
             "the background save child was killed "
             "by signal %d",
             WTERMSIG(status));
    else
        msgf(snap.last_error, sizeof(snap.last_error),
             "the background save child exited with "
             "code %d",
             r > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    serverLog("Background saving error: %s", snap.last_error);
}

/* ---- the reader ------------------------------------------------------------- */

typedef struct snapReader {
    ir_preader pr; /* first: the engine's records read through it */
    int fd;
    unsigned char *buf;
    size_t pos, len; /* unread buffered bytes: buf[pos, len) */
    uint64_t off;    /* file offset of buf[pos] */
    uint64_t end;    /* reads stop here (the current record's end) */
    int ioerr;       /* errno of a failed read */
} snapReader;

static int rRead(snapReader *r, void *dst, uint64_t n) {
    if (n > r->end - r->off) return -1;
    unsigned char *d = dst;
    while (n) {
        size_t avail = r->len - r->pos;
        if (avail) {
            size_t k = avail < n ? avail : (size_t)n;
            memcpy(d, r->buf + r->pos, k);
            r->pos += k;
            r->off += k;
            d += k;
            n -= k;
            continue;
        }
        int direct = n >= SNAP_DIRECT;
        size_t want = direct ? (n > SNAP_CHUNK ? SNAP_CHUNK : (size_t)n) : SNAP_BUF;
        ssize_t k = read(r->fd, direct ? (void *)d : (void *)r->buf, want);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            r->ioerr = k < 0 ? errno : EIO; /* EOF: the file shrank under us */
            return -1;
        }
        if (direct) {
            r->off += (uint64_t)k;
            d += k;
            n -= (uint64_t)k;
        } else {
            r->pos = 0;
            r->len = (size_t)k;
        }
    }
    return 0;
}

static int rSkip(snapReader *r, uint64_t n) {
    if (n > r->end - r->off) return -1;
    size_t avail = r->len - r->pos;
    if (n <= avail) {
        r->pos += (size_t)n;
        r->off += n;
        return 0;
    }
    n -= avail;
    r->pos = r->len = 0;
    r->off += avail;
    if (lseek(r->fd, (off_t)n, SEEK_CUR) < 0) { /* n < the file size: fits off_t */
        r->ioerr = errno;
        return -1;
    }
    r->off += n;
    return 0;
}

static int rU32(snapReader *r, uint32_t *v) {
    unsigned char b[4];
    if (rRead(r, b, 4)) return -1;
    *v = get32(b);
    return 0;
}

static int rU64(snapReader *r, uint64_t *v) {
    unsigned char b[8];
    if (rRead(r, b, 8)) return -1;
    *v = get64(b);
    return 0;
}

static int rF64(snapReader *r, double *d) {
    uint64_t u;
    if (rU64(r, &u)) return -1;
    *d = bitsf64(u);
    return 0;
}

static uint64_t rLeft(const snapReader *r) { return r->end - r->off; }

static int prBytes(ir_preader *r, void *dst, uint64_t n) { return rRead((snapReader *)r, dst, n); }
static int prU32(ir_preader *r, uint32_t *v) { return rU32((snapReader *)r, v); }
static int prU64(ir_preader *r, uint64_t *v) { return rU64((snapReader *)r, v); }
static int prF64(ir_preader *r, double *d) { return rF64((snapReader *)r, d); }
static uint64_t prLeft(const ir_preader *r) { return rLeft((const snapReader *)r); }

/* ---- pass 1: the file as a whole ------------------------------------------ */

#define LOAD_OK 0
#define LOAD_CORRUPT -1 /* try the next older snapshot */
#define LOAD_NOMEM -2   /* stop: nothing older is loaded either */
#define LOAD_REFUSED -3 /* stop: the server holds what the snapshot cannot replace */

typedef struct snapDone {
    uint64_t keys, tables;
} snapDone;

static int verifyFile(int fd, uint64_t size, unsigned char *buf, snapDone *done, char *why,
                      size_t whylen) {
    unsigned char h[SNAP_HEADER_LEN], d[SNAP_DONE_LEN];
    errno = 0;
    if (size < SNAP_HEADER_LEN + SNAP_DONE_LEN) {
        msgf(why, whylen, "truncated: %llu bytes, too short for a header and a DONE record",
             (unsigned long long)size);
        return LOAD_CORRUPT;
    }
    if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
        pread(fd, d, sizeof(d), (off_t)(size - SNAP_DONE_LEN)) != (ssize_t)sizeof(d)) {
        msgf(why, whylen, "read error: %s", strerror(errno ? errno : EIO));
        return LOAD_CORRUPT;
    }
    if (memcmp(h, SNAP_MAGIC, 8) != 0) {
        msgf(why, whylen, "not an inreplay snapshot: bad magic");
        return LOAD_CORRUPT;
    }
    if (get32(h + 8) != SNAP_VERSION || get32(h + 12) != 0) {
        msgf(why, whylen, "unsupported format version %u flags %#x", get32(h + 8), get32(h + 12));
        return LOAD_CORRUPT;
    }
    if (memcmp(d, TAG_DONE, 4) != 0 || get64(d + 4) != SNAP_DONE_BODY) {
        msgf(why, whylen, "truncated or incomplete: no DONE record at the end of its %llu bytes",
             (unsigned long long)size);
        return LOAD_CORRUPT;
    }
    uint64_t flen = get64(d + 28);
    if (flen != size) {
        msgf(why, whylen,
             "truncated or extended: the DONE record says %llu bytes, the file has %llu",
             (unsigned long long)flen, (unsigned long long)size);
        return LOAD_CORRUPT;
    }
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    uint64_t off = 0, upto = size - 4;
    while (off < upto) {
        size_t want = upto - off < SNAP_BUF ? (size_t)(upto - off) : SNAP_BUF;
        ssize_t k = pread(fd, buf, want, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            msgf(why, whylen, "read error at offset %llu: %s", (unsigned long long)off,
                 k < 0 ? strerror(errno) : "unexpected end of file");
            return LOAD_CORRUPT;
        }
        crc = crcUpdate(crc, buf, (size_t)k);
        off += (uint64_t)k;
    }
    uint32_t stored = get32(d + 36);
    if (crc != stored) {
        msgf(why, whylen, "checksum mismatch: stored %08x, computed %08x", stored, crc);
        return LOAD_CORRUPT;
    }
    done->keys = get64(d + 12);
    done->tables = get64(d + 20);
    return LOAD_OK;
}

/* ---- pass 2: parse into fresh structures ------------------------------------ */

typedef struct snapLoader {
    snapReader r;
    ir_db *db;
    ir_ploader pl; /* the tables, streams and chunks (persist.h) */
    int64_t now;
    uint64_t keys, expired;
    char *key; /* the key being read */
    size_t keycap;
    int ndbs;             /* databases of the server loading (KSEL) */
    ir_db *db0, **others; /* after a KSEL: database 0 and the others loaded */
    uint64_t rec;         /* offset of the record being parsed */
    char **funcs;         /* the FUNC records' code (compiled once all is read) */
    size_t *funclens, nfuncs, funccap;
    char why[256];
} snapLoader;

static int bad(snapLoader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int loadCollection(snapLoader *L, int type);
static int loadSelect(snapLoader *L);
static void swapInOthers(ir_server *s, snapLoader *L, int ok);
static int bad(snapLoader *L, const char *fmt, ...) {
    char text[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (L->r.ioerr)
        msgf(L->why, sizeof(L->why), "record at offset %llu: read error: %s",
             (unsigned long long)L->rec, strerror(L->r.ioerr));
    else
        msgf(L->why, sizeof(L->why), "record at offset %llu: %s", (unsigned long long)L->rec, text);
    return LOAD_CORRUPT;
}

/* An engine record's failure (rc IR_PERSIST_CORRUPT or _NOMEM, L->pl.why). */
static int badRecord(snapLoader *L, int rc) {
    if (rc == IR_PERSIST_NOMEM) {
        msgf(L->why, sizeof(L->why), "record at offset %llu: %s", (unsigned long long)L->rec,
             L->pl.why);
        return LOAD_NOMEM;
    }
    return bad(L, "%s", L->pl.why);
}

static int nomem(snapLoader *L, const char *what) {
    msgf(L->why, sizeof(L->why), "record at offset %llu: out of memory for %s",
         (unsigned long long)L->rec, what);
    return LOAD_NOMEM;
}

/* expire, key length and key of a KSTR/KLST record. */
static int loadKeyHead(snapLoader *L, int64_t *expire, uint64_t *klen) {
    uint64_t e;
    if (rU64(&L->r, &e) || rU64(&L->r, klen)) return bad(L, "key header runs past the record");
    *expire = (int64_t)e;
    if (*expire < -1) return bad(L, "bad expire time %lld", (long long)*expire);
    if (*klen > rLeft(&L->r))
        return bad(L, "key length %llu runs past the record", (unsigned long long)*klen);
    if (*klen + 1 > L->keycap) {
        char *k = realloc(L->key, *klen + 1);
        if (!k) return nomem(L, "a key");
        L->key = k;
        L->keycap = *klen + 1;
    }
    if (rRead(&L->r, L->key, *klen)) return bad(L, "key runs past the record");
    return LOAD_OK;
}

static int keyExpired(const snapLoader *L, int64_t expire) {
    return expire != -1 && L->now > expire;
}

static int loadStreamKey(snapLoader *L) {
    int64_t expire;
    uint64_t klen, vlen;
    int rc = loadKeyHead(L, &expire, &klen);
    if (rc) return rc;
    if (rU64(&L->r, &vlen) || vlen != rLeft(&L->r))
        return bad(L, "stream length runs past the record");
    if (keyExpired(L, expire)) {
        L->expired++;
        return rSkip(&L->r, vlen) ? bad(L, "value runs past the record") : LOAD_OK;
    }
    dbkey k = dbKey(L->db, L->key, (size_t)klen);
    if (dictFind(&L->db->d, k.p, k.len, k.h)) return bad(L, "duplicate key");
    char *p = malloc(vlen ? (size_t)vlen : 1);
    if (!p) return nomem(L, "a stream");
    if (rRead(&L->r, p, vlen)) {
        free(p);
        return bad(L, "value runs past the record");
    }
    size_t used;
    const char *err;
    stream *st = streamDeserialize(L->db, p, (size_t)vlen, &used, &err);
    free(p);
    if (!st) return bad(L, "a bad stream: %s", err);
    if (used != vlen) {
        streamFree(L->db, st);
        return bad(L, "a stream record with trailing bytes");
    }
    dbEntry *e = dbAdd(L->db, &k, OBJ_STREAM, 0);
    e->v.stream = st;
    if (expire != -1) setExpire(L->db, e, expire);
    L->keys++;
    return LOAD_OK;
}

static int loadString(snapLoader *L) {
    int64_t expire;
    uint64_t klen, vlen;
    int rc = loadKeyHead(L, &expire, &klen);
    if (rc) return rc;
    if (rU64(&L->r, &vlen)) return bad(L, "value length runs past the record");
    if (vlen > rLeft(&L->r))
        return bad(L, "value length %llu runs past the record", (unsigned long long)vlen);
    if (keyExpired(L, expire)) {
        L->expired++;
        return rSkip(&L->r, vlen) ? bad(L, "value runs past the record") : LOAD_OK;
    }
    dbkey k = dbKey(L->db, L->key, (size_t)klen);
    if (dictFind(&L->db->d, k.p, k.len, k.h)) return bad(L, "duplicate key");
    dbEntry *e;
    if (vlen + 1 <= DB_EMBED_MAX) { /* embedded in the entry, as SET does */
        char v[DB_EMBED_MAX];
        if (rRead(&L->r, v, vlen)) return bad(L, "value runs past the record");
        e = dbAdd(L->db, &k, OBJ_STRING, ((size_t)vlen + 1 + 7) & ~(size_t)7);
        strSetValue(L->db, e, v, (size_t)vlen, 0);
    } else { /* read straight into the value's own buffer */
        char *p = malloc((size_t)vlen + 1);
        if (!p) return nomem(L, "a value");
        if (rRead(&L->r, p, vlen)) {
            free(p);
            return bad(L, "value runs past the record");
        }
        p[vlen] = '\0';
        e = dbAdd(L->db, &k, OBJ_STRING, 0);
        dbStrAdopt(L->db, e, p, (size_t)vlen);
    }
    if (expire != -1) setExpire(L->db, e, expire);
    L->keys++;
    return LOAD_OK;
}

static int loadList(snapLoader *L) {
    int64_t expire;
    uint64_t klen, count;
    int rc = loadKeyHead(L, &expire, &klen);
    if (rc) return rc;
    if (rU64(&L->r, &count)) return bad(L, "element count runs past the record");
    if (count > rLeft(&L->r) / 8)
        return bad(L, "element count %llu larger than the record holds", (unsigned long long)count);
    if (keyExpired(L, expire)) {
        L->expired++;
        return rSkip(&L->r, rLeft(&L->r)) ? bad(L, "list runs past the record") : LOAD_OK;
    }
    if (count == 0) return LOAD_OK; /* an empty list is no key */
    dbkey k = dbKey(L->db, L->key, (size_t)klen);
    if (dictFind(&L->db->d, k.p, k.len, k.h)) return bad(L, "duplicate key");
    dbEntry *e = dbAdd(L->db, &k, OBJ_LIST, 0);
    if (expire != -1) setExpire(L->db, e, expire);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t len;
        if (rU64(&L->r, &len))
            return bad(L, "list element %llu runs past the record", (unsigned long long)i);
        if (len > rLeft(&L->r))
            return bad(L, "list element length %llu runs past the record", (unsigned long long)len);
        char *p = malloc((size_t)len + 1);
        if (!p) return nomem(L, "a list element");
        if (rRead(&L->r, p, len)) {
            free(p);
            return bad(L, "list element runs past the record");
        }
        p[len] = '\0';
        listPush(L->db, &e->v.list, p, (size_t)len, 0);
    }
    L->keys++;
    return LOAD_OK;
}

static int loadFunc(snapLoader *L) {
    uint64_t len;
    if (rU64(&L->r, &len) || len > rLeft(&L->r)) return bad(L, "library code runs past its record");
    if (L->nfuncs == L->funccap) {
        size_t cap = L->funccap ? L->funccap * 2 : 8;
        char **f = realloc(L->funcs, cap * sizeof(*f));
        if (!f) return nomem(L, "a library");
        L->funcs = f;
        size_t *l = realloc(L->funclens, cap * sizeof(*l));
        if (!l) return nomem(L, "a library");
        L->funclens = l;
        L->funccap = cap;
    }
    char *code = malloc(len ? len : 1);
    if (!code) return nomem(L, "a library");
    if (rRead(&L->r, code, len)) {
        free(code);
        return bad(L, "library code runs past its record");
    }
    L->funcs[L->nfuncs] = code;
    L->funclens[L->nfuncs++] = len;
    return LOAD_OK;
}

static int parseFile(snapLoader *L, uint64_t size, const snapDone *done) {
    snapReader *r = &L->r;
    const uint64_t data_end = size - SNAP_DONE_LEN;
    if (lseek(r->fd, SNAP_HEADER_LEN, SEEK_SET) < 0) {
        msgf(L->why, sizeof(L->why), "seek: %s", strerror(errno));
        return LOAD_CORRUPT;
    }
    r->off = SNAP_HEADER_LEN;
    while (r->off < data_end) {
        L->rec = r->off;
        r->end = data_end;
        char tag[4];
        uint64_t blen;
        if (rRead(r, tag, 4) || rU64(r, &blen)) return bad(L, "record header runs past the end");
        if (blen > rLeft(r))
            return bad(L, "length %llu runs past the end of the file", (unsigned long long)blen);
        r->end = r->off + blen;
        int rc;
        rc = persistLoadRecord(&L->pl, tag); /* the tables, streams and chunks */
        if (rc != IR_PERSIST_UNKNOWN) rc = rc ? badRecord(L, rc) : LOAD_OK;
        else if (!memcmp(tag, TAG_KSTR, 4)) rc = loadString(L);
        else if (!memcmp(tag, TAG_KHSH, 4)) rc = loadCollection(L, OBJ_HASH);
        else if (!memcmp(tag, TAG_KSEL, 4)) rc = loadSelect(L);
        else if (!memcmp(tag, TAG_KSET, 4)) rc = loadCollection(L, OBJ_SET);
        else if (!memcmp(tag, TAG_KZST, 4)) rc = loadCollection(L, OBJ_ZSET);
        else if (!memcmp(tag, TAG_KLST, 4)) rc = loadList(L);
        else if (!memcmp(tag, TAG_KSTM, 4)) rc = loadStreamKey(L);
        else if (!memcmp(tag, TAG_FUNC, 4)) rc = loadFunc(L);
        else
            return bad(L, "unknown record type %02x%02x%02x%02x", (unsigned char)tag[0],
                       (unsigned char)tag[1], (unsigned char)tag[2], (unsigned char)tag[3]);
        if (rc) return rc;
        if (r->off != r->end)
            return bad(L, "%llu bytes of the record not used (bad length)",
                       (unsigned long long)(r->end - r->off));
    }
    L->rec = data_end;
    int rc = persistLoadEnd(&L->pl);
    if (rc) return badRecord(L, rc);
    if (L->keys + L->expired != done->keys || L->pl.ntables != done->tables)
        return bad(L, "DONE counts %llu keys and %llu tables, the file holds %llu and %llu",
                   (unsigned long long)done->keys, (unsigned long long)done->tables,
                   (unsigned long long)(L->keys + L->expired), (unsigned long long)L->pl.ntables);
    return LOAD_OK;
}

/* Put the loaded keyspace and tables in place of s's. */
static void swapIn(ir_server *s, ir_db *db, ir_tables *tables, ir_chunk_store *chunks,
                   ir_params *params) {
    ir_table *t;                          /* (in the saved, REPLAY.LIST order: persistLoadEnd) */
    tablesMoveMissing(tables, s->tables); /* e.g. a start-up table the snapshot lacks */
    for (t = tablesFirst(tables); t; t = tableNext(t)) /* (loadFile: those hold no items) */
        if (tableHoldsTrajectories(t)) tableSetTrajStore(t, chunks);
    tablesFree(s->tables); /* releases their references into the old store */
    s->tables = tables;
    chunkStoreFree(s->chunks);
    s->chunks = chunks;
    paramsFree(s->params); /* the snapshot's parameter tables replace the server's */
    s->params = params;
    dbFree(s->db);
    s->db = db;
}

/* Load one file. LOAD_OK (s now holds it), LOAD_CORRUPT or LOAD_NOMEM with why. */
static int loadFile(ir_server *s, const char *path, unsigned char *buf, uint64_t *nkeys,
                    uint64_t *ntables, uint64_t *nexpired, uint64_t *fsize, char *why,
                    size_t whylen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        msgf(why, whylen, "cannot open: %s", strerror(errno));
        return LOAD_CORRUPT;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        msgf(why, whylen, "not a regular file");
        close(fd);
        return LOAD_CORRUPT;
    }
    uint64_t size = (uint64_t)sb.st_size;
    *fsize = size;
    snapDone done;
    int rc = verifyFile(fd, size, buf, &done, why, whylen);
    if (rc != LOAD_OK) {
        close(fd);
        return rc;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    snapLoader *L = calloc(1, sizeof(*L));
    if (!L) {
        close(fd);
        msgf(why, whylen, "out of memory");
        return LOAD_NOMEM;
    }
    L->r.fd = fd;
    L->r.buf = buf;
    L->db = dbNew();
    persistLoadInit(&L->pl, &L->r.pr, tablesNew(), NULL);
    L->now = (int64_t)ir_mstime();
    L->ndbs = dbsCount(s);
    L->pl.chunks = chunkStoreNew();
    L->pl.params = paramsNew();
    L->r.pr =
        (ir_preader){.bytes = prBytes, .u32 = prU32, .u64 = prU64, .f64 = prF64, .left = prLeft};
    if (!L->pl.tables || !L->pl.chunks || !L->pl.params) rc = nomem(L, "the table set");
    else rc = parseFile(L, size, &done);
    /* the loaded chunk store replaces the server's: a TRAJECTORY table the
     * snapshot does not replace must hold no references into the old one */
    for (const ir_table *t = tablesFirst(s->tables); rc == LOAD_OK && t; t = tableNext(t))
        if (tableHoldsTrajectories(t) && tableSize(t) &&
            !tableFind(L->pl.tables, tableName(t), tableNameLen(t))) {
            msgf(L->why, sizeof(L->why),
                 "TRAJECTORY table '%s' holds items and is not in the "
                 "snapshot: drop it (REPLAY.DROP) before loading",
                 tableName(t));
            rc = LOAD_REFUSED;
        }
    struct ir_functions *fns = NULL;
    if (rc == LOAD_OK) {
        char ferr[512];
        fns = functionsPrepare(s, L->funcs, L->funclens, L->nfuncs, ferr, sizeof(ferr));
        if (!fns) {
            msgf(L->why, sizeof(L->why), "a library does not load: %s", ferr);
            rc = LOAD_CORRUPT;
        }
    }
    for (size_t i = 0; i < L->nfuncs; i++) free(L->funcs[i]);
    free(L->funcs);
    free(L->funclens);
    swapInOthers(s, L, rc == LOAD_OK); /* L->db is database 0 again */
    if (rc == LOAD_OK) {
        swapIn(s, L->db, L->pl.tables, L->pl.chunks, L->pl.params);
        functionsInstall(s, fns);
        *nkeys = L->keys;
        *ntables = L->pl.ntables;
        *nexpired = L->expired;
    } else {
        msgf(why, whylen, "%s", L->why);
        dbFree(L->db);
        tablesFree(L->pl.tables); /* releases the references its items took */
        chunkStoreFree(L->pl.chunks);
        paramsFree(L->pl.params);
    }
    persistLoadFree(&L->pl);
    free(L->key);
    free(L);
    close(fd);
    return rc;
}

int snapshotRestore(ir_server *s, const char *dir, char *msg, size_t msglen) {
    ensureInit(s);
    if (!dir) dir = s->cfg.restore;
    if (!dir || !dir[0]) {
        msgf(msg, msglen, "no snapshot directory given: nothing to restore");
        return 0;
    }
    uint64_t *list;
    size_t n;
    int err = listSnapshots(dir, &list, &n, NULL);
    if (err == ENOENT) {
        msgf(msg, msglen, "no snapshot directory %s: nothing to restore", dir);
        return 0;
    }
    if (err) {
        msgf(msg, msglen, "cannot read snapshot directory %s: %s", dir, strerror(err));
        return err == ENOMEM ? IR_ENOMEM : IR_ECONFIG;
    }
    if (n == 0) {
        msgf(msg, msglen, "no snapshot in %s: nothing to restore", dir);
        return 0;
    }
    unsigned char *buf = malloc(SNAP_BUF);
    if (!buf) {
        free(list);
        msgf(msg, msglen, "out of memory restoring from %s", dir);
        return IR_ENOMEM;
    }
    int ret = IR_EINVAL;
    size_t skipped = 0;
    uint64_t t0 = ir_mstime();
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX], why[300];
        uint64_t keys = 0, tables = 0, expired = 0, size = 0;
        if (snapPath(path, sizeof(path), dir, 0, list[i]) != 0) continue;
        int rc = loadFile(s, path, buf, &keys, &tables, &expired, &size, why, sizeof(why));
        if (rc == LOAD_OK) {
            snap.loaded_keys = keys;
            snap.loaded_tables = tables;
            snap.loaded_expired = expired;
            snap.dirty_saved = s->dirty;
            snap.loaded = 1;
            memcpy(snap.last_file, path, sizeof(path));
            msgf(msg, msglen,
                 "restored %llu keys and %llu tables from %s (%llu bytes, %llu expired keys "
                 "dropped, %llu ms)%s",
                 (unsigned long long)keys, (unsigned long long)tables, path,
                 (unsigned long long)size, (unsigned long long)expired,
                 (unsigned long long)(ir_mstime() - t0),
                 skipped ? "; newer snapshots were corrupt" : "");
            ret = keys + tables > INT_MAX ? INT_MAX : (int)(keys + tables);
            break;
        }
        if (rc == LOAD_NOMEM) {
            msgf(msg, msglen, "snapshot %s could not be loaded (%s): nothing restored", path, why);
            ret = IR_ENOMEM;
            break;
        }
        if (rc == LOAD_REFUSED) {
            msgf(msg, msglen, "snapshot %s not loaded: %s; nothing restored", path, why);
            serverLog("%s", msg);
            free(buf);
            free(list);
            return IR_EINVAL;
        }
        serverLog("snapshot %s is corrupt (%s), not loaded", path, why);
        skipped++;
    }
    if (ret == IR_EINVAL)
        msgf(msg, msglen, "no complete snapshot in %s (%zu corrupt): nothing restored", dir,
             skipped);
    free(buf);
    free(list);
    return ret;
}

/* ---- the snapshot directory ------------------------------------------------------ */

int snapshotCheckDir(const char *dir, char *msg, size_t msglen) {
    struct stat sb;
    if (!dir || !dir[0]) {
        msgf(msg, msglen, "%s", strerror(ENOENT));
        return ENOENT;
    }
    if (stat(dir, &sb) != 0) {
        int e = errno;
        msgf(msg, msglen, "%s", strerror(e));
        return e;
    }
    if (!S_ISDIR(sb.st_mode)) {
        msgf(msg, msglen, "%s", strerror(ENOTDIR));
        return ENOTDIR;
    }
    /* A file of our own, as a save creates one: access() says yes to root
     * on a read-only mount or in /proc, where no file can be created. */
    char probe[PATH_MAX];
    int n = snprintf(probe, sizeof(probe), "%s/.inreplay-probe-%ld", dir, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(probe)) {
        msgf(msg, msglen, "%s", strerror(ENAMETOOLONG));
        return ENAMETOOLONG;
    }
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && unlink(probe) == 0) /* left by a process of this pid */
        fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        msgf(msg, msglen, "cannot create files in it: %s", strerror(e));
        return e;
    }
    close(fd);
    unlink(probe);
    return 0;
}

int snapshotSetDir(ir_server *s, const char *dir, char *msg, size_t msglen) {
    ensureInit(s);
    char joined[PATH_MAX], real[PATH_MAX];
    if (dir[0] && dir[0] != '/' &&
        snap.dir[0]) { /* relative to the current one, as Redis's chdir */
        int n = snprintf(joined, sizeof(joined), "%s/%s", snap.dir, dir);
        if (n < 0 || (size_t)n >= sizeof(joined)) {
            msgf(msg, msglen, "%s", strerror(ENAMETOOLONG));
            return ENAMETOOLONG;
        }
        dir = joined;
    }
    int err = snapshotCheckDir(dir, msg, msglen);
    if (err) return err;
    if (!realpath(dir, real)) {
        err = errno;
        msgf(msg, msglen, "%s", strerror(err));
        return err;
    }
    memcpy(snap.dir, real, strlen(real) + 1);
    s->cfg.dir = snap.dir;
    return 0;
}

/* ---- INFO and commands -------------------------------------------------------- */

size_t snapshotInfo(ir_server *s, char *buf, size_t len) {
    ensureInit(s);
    char real[PATH_MAX];
    const char *dir = realpath(snapDir(s), real) ? real : snapDir(s);
    long long current =
        snap.child > 0 ? (long long)((ir_mstime() - snap.child_start_ms) / 1000) : -1;
    int n = snprintf(buf, len,
                     "# Persistence\r\n"
                     "loading:0\r\n"
                     "rdb_changes_since_last_save:%llu\r\n"
                     "rdb_bgsave_in_progress:%d\r\n"
                     "rdb_last_save_time:%llu\r\n"
                     "rdb_last_bgsave_status:%s\r\n"
                     "rdb_last_bgsave_time_sec:%lld\r\n"
                     "rdb_current_bgsave_time_sec:%lld\r\n"
                     "rdb_saves:%llu\r\n"
                     "rdb_last_save_bytes:%llu\r\n"
                     "rdb_last_load_keys_expired:%llu\r\n"
                     "rdb_last_load_keys_loaded:%llu\r\n"
                     "rdb_last_load_tables_loaded:%llu\r\n"
                     "snapshot_dir:%s\r\n"
                     "snapshot_last_file:%s\r\n"
                     "snapshot_keep:%d\r\n"
                     "snapshot_last_error:%s\r\n",
                     (unsigned long long)(s->dirty - snap.dirty_saved), snap.child > 0,
                     (unsigned long long)(snap.lastsave_ms / 1000), snap.last_ok ? "ok" : "err",
                     (long long)snap.last_bg_sec, current, (unsigned long long)snap.saves,
                     (unsigned long long)snap.last_bytes, (unsigned long long)snap.loaded_expired,
                     (unsigned long long)snap.loaded_keys, (unsigned long long)snap.loaded_tables,
                     dir, snap.last_file, IR_SNAPSHOT_KEEP, snap.last_error);
    return n < 0 ? 0 : (size_t)n;
}

void saveCommand(client *c) {
    ensureInit(c->srv);
    if (snap.child > 0) {
        addReplyError(c, "Background save already in progress");
        return;
    }
    char msg[PATH_MAX + 200];
    if (snapshotSave(c->srv, msg, sizeof(msg)) != IR_OK) {
        addReplyErrorFormat(c, "%s", msg);
        return;
    }
    addReplyStr(c, shared.ok);
}

void bgsaveCommand(client *c) {
    /* SCHEDULE waits for another kind of child in Redis; there is none here. */
    if (c->argc > 2 || (c->argc == 2 && !argEq(c, 1, "schedule"))) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    char msg[PATH_MAX + 200];
    if (snapshotBackground(c->srv, msg, sizeof(msg)) != IR_OK) {
        addReplyErrorFormat(c, "%s", msg);
        return;
    }
    addReplyStatus(c, "Background saving started");
}

void lastsaveCommand(client *c) {
    ensureInit(c->srv);
    addReplyLongLong(c, (long long)(snap.lastsave_ms / 1000));
}

/* ---- hashes and sets (families) ------------------------------------------------
 *   "KHSH" a hash key        i64 expire, u64 key length, key bytes
 *                            u64 field count, then per field
 *                            u64 length, field bytes, u64 length, value bytes
 *   "KSET" a set key         i64 expire, u64 key length, key bytes
 *                            u64 member count, then per member u64 length, bytes
 *   "KZST" a sorted set key  as KSET, each member followed by its score (the
 *                            u64 of the double's bits)
 * The encoding OBJECT ENCODING reports is worked out again from the loaded
 * contents. */

static void saveCollection(snapWriter *w, const dbEntry *e) {
    const dict *d = &e->v.coll->d;
    int hash = e->type == OBJ_HASH, zset = e->type == OBJ_ZSET;
    uint64_t body = 24 + (uint64_t)e->klen;
    for (int t = 0; t <= 1; t++)
        for (size_t i = 0; i < d->ht[t].size; i++)
            for (const dbEntry *f = d->ht[t].table[i]; f; f = f->next)
                body += 8 + f->klen + (hash ? 8 + f->v.str.len : 0) + (zset ? 8 : 0);
    wRecord(w, hash ? TAG_KHSH : zset ? TAG_KZST : TAG_KSET, body);
    wU64(w, (uint64_t)e->expire);
    wU64(w, e->klen);
    wBytes(w, e->key, e->klen);
    wU64(w, dictSize(d));
    collIter it; /* reply order, which the load rebuilds */
    collIterInit(&it, e->v.coll);
    for (const dbEntry *f; (f = collNext(&it));) {
        wU64(w, f->klen);
        wBytes(w, f->key, f->klen);
        if (hash) {
            wU64(w, f->v.str.len);
            wBytes(w, f->v.str.ptr, f->v.str.len);
        }
        if (zset) {
            double score = zsetEntryScore(f);
            uint64_t u;
            memcpy(&u, &score, 8);
            wU64(w, u);
        }
    }
}

/* One u64-length-prefixed string of the record into *buf (grown as needed). */
static int loadBlob(snapLoader *L, char **buf, size_t *cap, uint64_t *len, const char *what) {
    if (rU64(&L->r, len) || *len > rLeft(&L->r)) return bad(L, "%s runs past the record", what);
    if (*len + 1 > *cap) {
        char *p = realloc(*buf, *len + 1);
        if (!p) return nomem(L, what);
        *buf = p;
        *cap = *len + 1;
    }
    if (rRead(&L->r, *buf, *len)) return bad(L, "%s runs past the record", what);
    return LOAD_OK;
}

static int loadCollection(snapLoader *L, int type) {
    int64_t expire;
    uint64_t klen, count;
    int rc = loadKeyHead(L, &expire, &klen);
    if (rc) return rc;
    if (rU64(&L->r, &count)) return bad(L, "element count runs past the record");
    if (count > rLeft(&L->r) / (type == OBJ_SET ? 8 : 16))
        return bad(L, "element count %llu larger than the record holds", (unsigned long long)count);
    if (keyExpired(L, expire)) {
        L->expired++;
        return rSkip(&L->r, rLeft(&L->r)) ? bad(L, "value runs past the record") : LOAD_OK;
    }
    if (count == 0)
        return bad(L, "an empty %s",
                   type == OBJ_HASH   ? "hash"
                   : type == OBJ_ZSET ? "sorted set"
                                      : "set");
    dbkey k = dbKey(L->db, L->key, (size_t)klen);
    if (dictFind(&L->db->d, k.p, k.len, k.h)) return bad(L, "duplicate key");
    dbEntry *e = dbAdd(L->db, &k, type, 0);
    if (expire != -1) setExpire(L->db, e, expire);
    L->keys++;
    dbColl *co = e->v.coll;
    char *f = NULL, *v = NULL;
    size_t fcap = 0, vcap = 0;
    const ir_encoding_limits *lim = &encodingLimits;
    int zbig = 0;
    for (uint64_t i = 0; i < count && rc == LOAD_OK; i++) {
        uint64_t flen, vlen = 0;
        long long ll;
        rc = loadBlob(L, &f, &fcap, &flen, type == OBJ_HASH ? "a field" : "a member");
        if (rc == LOAD_OK && type == OBJ_HASH) rc = loadBlob(L, &v, &vcap, &vlen, "a value");
        if (rc != LOAD_OK) break;
        if (type == OBJ_ZSET) {
            uint64_t u;
            double d;
            if (rU64(&L->r, &u)) {
                rc = bad(L, "a score runs past the record");
                break;
            }
            memcpy(&d, &u, 8);
            if (isnan(d) || !zsetLoadAdd(L->db, co, f, (size_t)flen, d)) {
                rc = bad(L, "a NaN score or a duplicate member");
                break;
            }
            if ((long long)flen > lim->zset_max_listpack_value) zbig = 1;
            continue;
        }
        if (collFind(co, f, flen)) {
            rc = bad(L, "duplicate %s", type == OBJ_HASH ? "field" : "member");
            break;
        }
        collAdd(L->db, co, f, (size_t)flen, type == OBJ_HASH ? v : NULL, (size_t)vlen);
        if (type == OBJ_HASH && ((long long)flen > lim->hash_max_listpack_value ||
                                 (long long)vlen > lim->hash_max_listpack_value))
            collSetBig(L->db, co);
        if (type == OBJ_SET && !string2ll(f, (size_t)flen, &ll)) collSetBig(L->db, co);
        /* per member: the compact order is not kept for a big one */
        long long n = (long long)dictSize(&co->d);
        if (!co->big &&
            n > (type == OBJ_HASH ? lim->hash_max_listpack_entries : lim->set_max_intset_entries))
            collSetBig(L->db, co);
    }
    free(f);
    free(v);
    if (type == OBJ_ZSET) /* hashes and sets were judged member by member above */
        co->big = (uint8_t)(zbig || (long long)dictSize(&co->d) > lim->zset_max_listpack_entries);
    return rc;
}

/* ---- databases other than 0 (families) ----------------------------------------
 *   "KSEL" (L = 8)           u64 database index, 1..databases-1: the key
 *                            records that follow (up to the next KSEL or the
 *                            first TABL) belong to that database
 * A file without KSEL holds database 0 only. A snapshot of more databases
 * than the server has does not load (corrupt, with the reason). */

struct saveCtx;

static void saveOtherDbs(const ir_server *s, struct saveCtx *sc) {
    saveCtx *c = (saveCtx *)sc;
    for (int i = 1; i < dbsCount(s) && !c->w->pw.err; i++) {
        if (dbSize(dbsAt(s, i)) == 0) continue;
        wRecord(c->w, TAG_KSEL, 8);
        wU64(c->w, (uint64_t)i);
        dbForEach(dbsAt(s, i), saveEntry, c);
    }
}

static int loadSelect(snapLoader *L) {
    uint64_t id;
    if (rU64(&L->r, &id)) return bad(L, "database index runs past the record");
    if (id < 1 || id >= (uint64_t)L->ndbs)
        return bad(L, "database %llu, but the server has %d (databases)", (unsigned long long)id,
                   L->ndbs);
    if (!L->others) {
        L->others = calloc((size_t)L->ndbs, sizeof(*L->others));
        if (!L->others) return nomem(L, "the databases");
        L->db0 = L->db;
    }
    if (!L->others[id]) {
        L->others[id] = dbNew();
        L->others[id]->id = (int)id;
    }
    L->db = L->others[id];
    return LOAD_OK;
}

/* After parsing: L->db is database 0 again; with ok the loaded databases
 * replace the server's (those the file does not mention become empty). */
static void swapInOthers(ir_server *s, snapLoader *L, int ok) {
    if (L->db0) L->db = L->db0;
    for (int i = 1; i < L->ndbs; i++) {
        ir_db *d = L->others ? L->others[i] : NULL;
        if (!ok) {
            if (d) dbFree(d);
            continue;
        }
        if (!d) {
            dbEmpty(s->dbs[i]);
            continue;
        }
        dbFree(s->dbs[i]);
        s->dbs[i] = d;
    }
    free(L->others);
    L->others = NULL;
}
