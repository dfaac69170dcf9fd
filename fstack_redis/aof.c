/* aof.c - the append-only file (see aof.h). */
#include "aof.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acl.h"
#include "db.h"
#include "db_internal.h"
#include "functions.h"
#include "notify.h"
#include "rdb.h"
#include "replication.h"

long long aof_fsync = AOF_FSYNC_EVERYSEC, aof_use_rdb_preamble = 1, aof_load_truncated = 1,
          aof_rewrite_perc = 100, aof_rewrite_min_size = 64 << 20, aof_timestamp_enabled;

enum { AOF_OFF, AOF_ON, AOF_WAIT_REWRITE };

#define AOF_NAME_MAX 256

typedef struct aofFile {
    char name[AOF_NAME_MAX];
    long long seq;
} aofFile;

static struct {
    int state;
    int fd;       /* the last incr file, open for appending; -1 = none */
    int seldb;    /* the database the incr file is in, -1 = none yet */
    ir_bytes out; /* the stream not yet written */
    int need_fsync;
    uint64_t last_fsync_ms;
    int known;    /* the manifest was read (or written) */
    aofFile base; /* has_base: the manifest's base */
    int has_base;
    aofFile *incr; /* the manifest's incr files, in order (and one being made) */
    int nincr, capincr;
    long long base_seq, incr_seq; /* the highest sequence numbers used */
    int wait_keep;                /* AOF_WAIT_REWRITE: the incr opened when it started, -1 = none */
    pid_t child;                  /* rewrite child, 0 = none */
    int child_keep;               /* incr files from this index on stay after the rewrite */
    int child_rdb;                /* its base is an RDB image (else commands) */
    char child_tmp[PATH_MAX];
    uint64_t child_start_ms, retry_ms;
    int last_rw_ok, last_write_ok, write_errno;
    long long last_rw_sec, rewrites, rw_failures;
    uint64_t base_size, cur_size;
} A = {
    .fd = -1, .seldb = -1, .wait_keep = -1, .last_rw_ok = 1, .last_write_ok = 1, .last_rw_sec = -1};

/* ---- names and paths ----------------------------------------------------------- */

static const char *fileName(const ir_server *s) {
    return s->cfg.appendfilename && s->cfg.appendfilename[0] ? s->cfg.appendfilename
                                                             : "appendonly.aof";
}

static const char *dirName(const ir_server *s) {
    return s->cfg.appenddirname && s->cfg.appenddirname[0] ? s->cfg.appenddirname : "appendonlydir";
}

/* <dir>/<appenddirname>[/<file>]; -1 when too long. */
static int aofPath(const ir_server *s, char *out, size_t n, const char *file) {
    const char *dir = s->cfg.dir && s->cfg.dir[0] ? s->cfg.dir : ".";
    int k = file ? snprintf(out, n, "%s/%s/%s", dir, dirName(s), file)
                 : snprintf(out, n, "%s/%s", dir, dirName(s));
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

static void fsyncDir(const ir_server *s) {
    char d[PATH_MAX];
    if (aofPath(s, d, sizeof(d), NULL) != 0) return;
    int fd = open(d, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

static int ensureDir(const ir_server *s, char *err, size_t errlen) {
    char d[PATH_MAX];
    if (aofPath(s, d, sizeof(d), NULL) != 0) {
        snprintf(err, errlen, "the append only file directory path is too long");
        return -1;
    }
    struct stat st;
    if (mkdir(d, 0700) != 0 && (errno != EEXIST || stat(d, &st) != 0 || !S_ISDIR(st.st_mode))) {
        int e = errno == EEXIST ? ENOTDIR : errno;
        snprintf(err, errlen, "Can't open or create append-only dir %s: %s", d, strerror(e));
        return -1;
    }
    return 0;
}

/* ---- the manifest ----------------------------------------------------------- */

static void incrPush(const aofFile *f) {
    if (A.nincr == A.capincr) {
        A.capincr = A.capincr ? A.capincr * 2 : 4;
        A.incr = ir_xrealloc(A.incr, (size_t)A.capincr * sizeof(*A.incr));
    }
    A.incr[A.nincr++] = *f;
}

/* Write the manifest of base (NULL: none) and incr[0..n), atomically (a
 * temporary file renamed over it). 0, or -1 with err. */
static int writeManifest(const ir_server *s, const aofFile *base, const aofFile *incr, int n,
                         char *err, size_t errlen) {
    size_t cap = 128 + (size_t)(n + 1) * (AOF_NAME_MAX + 64), len = 0;
    char *b = ir_xrealloc(NULL, cap);
    if (base)
        len += (size_t)snprintf(b + len, cap - len, "file %s seq %lld type b\n", base->name,
                                base->seq);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(b + len, cap - len, "file %s seq %lld type i\n", incr[i].name,
                                incr[i].seq);
    char tmpname[AOF_NAME_MAX + 16], tmp[PATH_MAX], path[PATH_MAX], name[AOF_NAME_MAX + 16];
    snprintf(tmpname, sizeof(tmpname), "temp-%s.manifest", fileName(s));
    snprintf(name, sizeof(name), "%s.manifest", fileName(s));
    int rc = -1;
    if (aofPath(s, tmp, sizeof(tmp), tmpname) != 0 || aofPath(s, path, sizeof(path), name) != 0) {
        snprintf(err, errlen, "the append only file path is too long");
        goto out;
    }
    int fd = ir_create_private(tmp);
    if (fd < 0) {
        snprintf(err, errlen, "Can't open the AOF manifest file %s: %s", tmp, strerror(errno));
        goto out;
    }
    ssize_t w = write(fd, b, len);
    int e = errno;
    if (w != (ssize_t)len || fsync(fd) != 0) {
        if (w >= 0) e = errno ? errno : EIO;
        close(fd);
        unlink(tmp);
        snprintf(err, errlen, "Error writing the AOF manifest file: %s", strerror(e));
        goto out;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "Error trying to rename the temporary AOF manifest file: %s",
                 strerror(errno));
        unlink(tmp);
        goto out;
    }
    fsyncDir(s);
    A.known = 1;
    rc = 0;
out:
    free(b);
    return rc;
}

/* Sequence number of a name <appendfilename>.<seq>.<kind>..., or -1. */
static long long seqOf(const char *name) {
    const char *p = strrchr(name, '.');
    while (p && p > name) { /* the number before ".base.rdb" / ".incr.aof" */
        const char *q = p - 1;
        while (q > name && *q >= '0' && *q <= '9') q--;
        if (*q == '.' && q + 1 < p) return strtoll(q + 1, NULL, 10);
        p = q > name ? memrchr(name, '.', (size_t)(p - name)) : NULL;
    }
    return -1;
}

/* Read the manifest. 1 read, 0 none, -1 malformed (err). */
static int readManifest(const ir_server *s, char *err, size_t errlen) {
    char name[AOF_NAME_MAX + 16], path[PATH_MAX];
    snprintf(name, sizeof(name), "%s.manifest", fileName(s));
    if (aofPath(s, path, sizeof(path), name) != 0) {
        snprintf(err, errlen, "the append only file path is too long");
        return -1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) {
            A.known = 1;
            return 0;
        }
        snprintf(err, errlen, "Can't open the AOF manifest file %s: %s", path, strerror(errno));
        return -1;
    }
    aofFile base = {{0}, 0};
    int has_base = 0, ok = 1;
    int nincr = 0;
    aofFile *incr = NULL;
    char line[1100];
    while (ok && fgets(line, sizeof(line), f)) {
        if (!strchr(line, '\n') && !feof(f)) {
            ok = 0; /* a line too long */
            break;
        }
        if (line[0] == '#' || line[0] == '\n' || (line[0] == '\r' && line[1] == '\n')) continue;
        char *w[16], *save;
        int nw = 0;
        for (char *t = strtok_r(line, " \r\n", &save); t && nw < 16;
             t = strtok_r(NULL, " \r\n", &save))
            w[nw++] = t;
        if (nw < 6 || nw % 2) {
            ok = 0;
            break;
        }
        aofFile af = {{0}, -1};
        char type = 0;
        for (int i = 0; i < nw; i += 2) {
            if (!strcmp(w[i], "file")) {
                if (strlen(w[i + 1]) >= AOF_NAME_MAX || strchr(w[i + 1], '/')) ok = 0;
                else snprintf(af.name, sizeof(af.name), "%s", w[i + 1]);
            } else if (!strcmp(w[i], "seq")) {
                char *end;
                af.seq = strtoll(w[i + 1], &end, 10);
                if (*end || af.seq < 0) ok = 0;
            } else if (!strcmp(w[i], "type")) {
                type = w[i + 1][1] ? 0 : w[i + 1][0];
            }
        }
        if (!ok || !af.name[0] || af.seq < 0 || !type) {
            ok = 0;
            break;
        }
        if (type == 'b') {
            if (has_base) ok = 0;
            base = af;
            has_base = 1;
        } else if (type == 'i') {
            if (nincr && af.seq <= incr[nincr - 1].seq) ok = 0;
            incr = ir_xrealloc(incr, (size_t)(nincr + 1) * sizeof(*incr));
            incr[nincr++] = af;
        } else if (type != 'h') {
            ok = 0;
        }
    }
    fclose(f);
    if (!ok || (!has_base && !nincr)) {
        free(incr);
        snprintf(err, errlen, "Invalid AOF manifest file format");
        return -1;
    }
    A.base = base;
    A.has_base = has_base;
    A.nincr = 0;
    for (int i = 0; i < nincr; i++) incrPush(&incr[i]);
    free(incr);
    A.base_seq = has_base ? base.seq : 0;
    A.incr_seq = nincr ? A.incr[nincr - 1].seq : 0;
    long long bs = has_base ? seqOf(base.name) : -1;
    if (bs > A.base_seq) A.base_seq = bs;
    A.known = 1;
    return 1;
}

static uint64_t fileSize(const ir_server *s, const char *name) {
    char path[PATH_MAX];
    struct stat st;
    if (aofPath(s, path, sizeof(path), name) != 0 || stat(path, &st) != 0) return 0;
    return (uint64_t)st.st_size;
}

/* ---- writing ----------------------------------------------------------------- */

static void bufPut(const char *p, size_t n) { irBytesPut(&A.out, p, n, 4096); }

void aofFeed(int db, const char *p, size_t n) {
    if (A.fd < 0) return;
    if (db >= 0 && db != A.seldb) {
        char num[16], sel[64];
        int k = snprintf(num, sizeof(num), "%d", db);
        int m = snprintf(sel, sizeof(sel), "*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n", k, num);
        bufPut(sel, (size_t)m);
        A.seldb = db;
    }
    bufPut(p, n);
}

int aof_write_failed;

static void setWriteOk(int ok) {
    A.last_write_ok = ok;
    aof_write_failed = !ok && A.state != AOF_OFF;
}

/* Write what is pending. A failed write (a full disk) keeps it for the next
 * try (the cron's), a partial one is cut off the file first, as Redis does;
 * meanwhile write commands get -MISCONF (aofWriteDenied). */
void aofFlush(void) {
    if (!A.out.len || A.fd < 0) return;
    size_t off = 0;
    while (off < A.out.len) {
        ssize_t w = write(A.fd, A.out.p + off, A.out.len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            A.write_errno = w < 0 ? errno : ENOSPC;
            if (A.last_write_ok)
                serverLog("Error writing to the AOF file: %s", strerror(A.write_errno));
            setWriteOk(0);
            break;
        }
        off += (size_t)w;
    }
    if (off < A.out.len) {
        off_t end = lseek(A.fd, 0, SEEK_END);
        if (off && end >= (off_t)off && ftruncate(A.fd, end - (off_t)off) == 0) off = 0;
        memmove(A.out.p, A.out.p + off, A.out.len - off);
        A.out.len -= off;
        A.cur_size += off;
        return;
    }
    if (!A.last_write_ok) {
        serverLog("AOF write error looks solved, Redis can write again.");
        setWriteOk(1);
    }
    A.cur_size += off;
    A.out.len = 0;
    if (aof_fsync == AOF_FSYNC_ALWAYS) {
        if (fdatasync(A.fd) != 0) {
            A.write_errno = errno;
            serverLog("Can't persist the AOF on disk (fsync): %s", strerror(errno));
            setWriteOk(0);
        }
        A.last_fsync_ms = ir_mstime();
    } else {
        A.need_fsync = 1;
    }
}

static void closeIncr(void) {
    if (A.fd < 0) return;
    aofFlush();
    if (aof_fsync != AOF_FSYNC_NO) fsync(A.fd);
    close(A.fd);
    A.fd = -1;
    A.need_fsync = 0;
}

/* Open the next incr file for what comes (persist: the manifest lists it at
 * once, as while the AOF is on). 0, or -1 with err. */
static int openNewIncr(ir_server *s, int persist, char *err, size_t errlen) {
    aofFile f;
    f.seq = A.incr_seq + 1;
    snprintf(f.name, sizeof(f.name), "%s.%lld.incr.aof", fileName(s), f.seq);
    char path[PATH_MAX];
    if (aofPath(s, path, sizeof(path), f.name) != 0) {
        snprintf(err, errlen, "the append only file path is too long");
        return -1;
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "Can't open the append-only file %s: %s", path, strerror(errno));
        return -1;
    }
    if (persist) {
        incrPush(&f);
        if (writeManifest(s, A.has_base ? &A.base : NULL, A.incr, A.nincr, err, errlen) != 0) {
            A.nincr--;
            close(fd);
            unlink(path);
            return -1;
        }
    } else {
        incrPush(&f);
    }
    closeIncr();
    A.fd = fd;
    A.seldb = -1;
    A.incr_seq = f.seq;
    return 0;
}

/* ---- the base's two forms ------------------------------------------------------ */

void aofPutArray(rdbBuf *b, long n) {
    char h[32];
    int k = snprintf(h, sizeof(h), "*%ld\r\n", n);
    rdbPut(b, h, (size_t)k);
}

void aofPutBulk(rdbBuf *b, const char *p, size_t n) {
    char h[32];
    int k = snprintf(h, sizeof(h), "$%zu\r\n", n);
    rdbPut(b, h, (size_t)k);
    rdbPut(b, p, n);
    rdbPut(b, "\r\n", 2);
}

#define ITEMS_PER_CMD 64 /* Redis's AOF_REWRITE_ITEMS_PER_CMD */

typedef struct rwWalk {
    rdbBuf *b;
    int64_t now;
    const dbEntry *key; /* the key whose members are being batched */
    size_t left, batch; /* members still to write, members in this command */
    const char *cmd;
} rwWalk;

/* Start a batch command (RPUSH key ...) when the last one is full. */
static void batchItem(rwWalk *w, int per) {
    if (w->batch == 0) {
        size_t n = w->left < ITEMS_PER_CMD ? w->left : ITEMS_PER_CMD;
        aofPutArray(w->b, 2 + (long)(n * (size_t)per));
        aofPutBulk(w->b, w->cmd, strlen(w->cmd));
        aofPutBulk(w->b, w->key->key, w->key->klen);
        w->batch = n;
    }
    w->batch--;
    w->left--;
}

static void rwZsetMember(const char *m, size_t len, double score, void *arg) {
    rwWalk *w = arg;
    char num[40];
    batchItem(w, 2);
    aofPutBulk(w->b, num, (size_t)snprintf(num, sizeof(num), "%.17g", score));
    aofPutBulk(w->b, m, len);
}

/* One key as Redis's rewriteAppendOnlyFileRio writes it: its value's
 * commands, then PEXPIREAT. */
static int rwEntry(const dbEntry *e, void *arg) {
    rwWalk *w = arg;
    if (keyIsExpired(e, w->now)) return 0;
    w->key = e;
    w->batch = 0;
    switch (e->type) {
    case OBJ_STRING:
        aofPutArray(w->b, 3);
        aofPutBulk(w->b, "SET", 3);
        aofPutBulk(w->b, e->key, e->klen);
        aofPutBulk(w->b, e->v.str.ptr, e->v.str.len);
        break;
    case OBJ_LIST:
        w->cmd = "RPUSH";
        w->left = e->v.list.len;
        for (size_t i = 0; i < e->v.list.len; i++) {
            const lelem *l = listAt(&e->v.list, i);
            batchItem(w, 1);
            aofPutBulk(w->b, l->p, l->len);
        }
        break;
    case OBJ_SET:
    case OBJ_HASH: {
        int hash = e->type == OBJ_HASH;
        w->cmd = hash ? "HMSET" : "SADD";
        w->left = dictSize(&e->v.coll->d);
        collIter it;
        collIterInit(&it, e->v.coll);
        for (const dbEntry *fe; (fe = collNext(&it));) {
            batchItem(w, hash ? 2 : 1);
            aofPutBulk(w->b, fe->key, fe->klen);
            if (hash) aofPutBulk(w->b, fe->v.str.ptr, fe->v.str.len);
        }
        break;
    }
    case OBJ_ZSET:
        w->cmd = "ZADD";
        w->left = dictSize(&e->v.coll->d);
        zsetForEach(e->v.coll, rwZsetMember, w);
        break;
    case OBJ_STREAM: streamPutAofCommands(w->b, e->key, e->klen, e->v.stream); break;
    }
    if (e->expire != -1) {
        char num[24];
        aofPutArray(w->b, 3);
        aofPutBulk(w->b, "PEXPIREAT", 9);
        aofPutBulk(w->b, e->key, e->klen);
        aofPutBulk(w->b, num, (size_t)ll2string(num, sizeof(num), e->expire));
    }
    return w->b->oom;
}

/* The dataset as commands (aof-use-rdb-preamble no): the functions, then
 * each database after its SELECT. NULL when out of memory. */
static char *rewriteCommands(const ir_server *s, size_t *len) {
    rdbBuf b = {0};
    for (size_t i = 0;; i++) {
        const char *code;
        size_t clen;
        if (!functionsLibraryCode(s, i, &code, &clen)) break;
        aofPutArray(&b, 3);
        aofPutBulk(&b, "FUNCTION", 8);
        aofPutBulk(&b, "LOAD", 4);
        aofPutBulk(&b, code, clen);
    }
    rwWalk w = {&b, (int64_t)ir_mstime(), NULL, 0, 0, NULL};
    for (int i = 0; i < dbsCount(s) && !b.oom; i++) {
        const ir_db *db = dbsAt(s, i);
        if (!dictSize(&db->d)) continue;
        char num[16];
        aofPutArray(&b, 2);
        aofPutBulk(&b, "SELECT", 6);
        aofPutBulk(&b, num, (size_t)snprintf(num, sizeof(num), "%d", i));
        dbForEach(db, rwEntry, &w);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (!b.p) b.p = ir_xrealloc(NULL, 1); /* an empty dataset: an empty base */
    *len = b.len;
    return b.p;
}

/* The base image of the dataset in the form aof-use-rdb-preamble asks for. */
static char *buildBase(const ir_server *s, int rdb, size_t *len) {
    return rdb ? rdbBuild(s, "0000000000000000000000000000000000000000", 0, len)
               : rewriteCommands(s, len);
}

static void baseName(const ir_server *s, aofFile *f, long long seq, int rdb) {
    f->seq = seq;
    snprintf(f->name, sizeof(f->name), "%s.%lld.base.%s", fileName(s), seq, rdb ? "rdb" : "aof");
}

/* ---- the rewrite child ------------------------------------------------------ */

static void childWrite(const ir_server *s, const char *tmp, int rdb) __attribute__((noreturn));
static void childWrite(const ir_server *s, const char *tmp, int rdb) {
    forkedChildBegin(-1);
    size_t len = 0;
    char *img = buildBase(s, rdb, &len);
    if (!img) _exit(2);
    int fd = ir_create_private(tmp);
    if (fd < 0) _exit(3);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, img + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(4);
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) _exit(5);
    _exit(0);
}

/* Start a rewrite: the incr file for what comes next, then the child that
 * writes the base. 0, or -1 with err (Redis's words). */
static int rewriteStart(ir_server *s, char *err, size_t errlen) {
    if (A.child > 0) {
        snprintf(err, errlen, "Background append only file rewriting already in progress");
        return -1;
    }
    char why[PATH_MAX + 128];
    if (ensureDir(s, why, sizeof(why)) != 0 ||
        (!A.known && readManifest(s, why, sizeof(why)) < 0)) {
        serverLog("Can't rewrite the append only file: %s", why);
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    int keep;
    if (A.state == AOF_ON) {
        if (openNewIncr(s, 1, why, sizeof(why)) != 0) {
            serverLog("Can't rewrite the append only file: %s", why);
            snprintf(err, errlen, "%s", why);
            return -1;
        }
        keep = A.nincr - 1;
    } else if (A.state == AOF_WAIT_REWRITE) {
        if (A.wait_keep < 0) {
            if (openNewIncr(s, 0, why, sizeof(why)) != 0) {
                serverLog("Can't rewrite the append only file: %s", why);
                snprintf(err, errlen, "%s", why);
                return -1;
            }
            A.wait_keep = A.nincr - 1;
        }
        keep = A.wait_keep;
    } else {
        keep = A.nincr; /* off: the new base alone */
    }
    char tmpname[64];
    snprintf(tmpname, sizeof(tmpname), "temp-rewriteaof-bg-%ld.aof", (long)getpid());
    if (aofPath(s, A.child_tmp, sizeof(A.child_tmp), tmpname) != 0) {
        snprintf(err, errlen, "the append only file path is too long");
        return -1;
    }
    aofFlush();
    A.child_rdb = aof_use_rdb_preamble != 0;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) childWrite(s, A.child_tmp, A.child_rdb);
    if (pid < 0) {
        serverLog("Can't rewrite append only file in background: fork: %s", strerror(errno));
        snprintf(err, errlen,
                 "Can't execute an AOF background rewriting. Please check the server "
                 "logs for more information.");
        A.last_rw_ok = 0;
        return -1;
    }
    A.child = pid;
    A.child_keep = keep;
    A.child_start_ms = ir_mstime();
    serverLog("Background append only file rewriting started by pid %ld", (long)pid);
    return 0;
}

static void deleteFile(const ir_server *s, const char *name) {
    char path[PATH_MAX];
    if (aofPath(s, path, sizeof(path), name) == 0 && unlink(path) == 0)
        serverLog("Removing the history file %s", name);
}

/* The child is done (ok): the new base goes into the manifest. */
static void rewriteDone(ir_server *s, int ok) {
    A.child = 0;
    if (A.child_keep > A.nincr) A.child_keep = A.nincr;
    A.last_rw_sec = (long long)((ir_mstime() - A.child_start_ms + 500) / 1000);
    char err[PATH_MAX + 128];
    aofFile nb;
    baseName(s, &nb, A.base_seq + 1, A.child_rdb);
    char path[PATH_MAX];
    if (ok && (aofPath(s, path, sizeof(path), nb.name) != 0 || rename(A.child_tmp, path) != 0)) {
        serverLog("Error trying to rename the temporary AOF base file: %s", strerror(errno));
        ok = 0;
    }
    if (ok) {
        fsyncDir(s);
        if (writeManifest(s, &nb, A.incr + A.child_keep, A.nincr - A.child_keep, err,
                          sizeof(err)) != 0) {
            serverLog("Can't install the rewritten AOF: %s", err);
            unlink(path);
            ok = 0;
        }
    } else {
        unlink(A.child_tmp);
    }
    if (!ok) {
        A.last_rw_ok = 0;
        A.rw_failures++;
        A.retry_ms = ir_mstime() + 5000; /* AOF_WAIT_REWRITE tries again (aofCron) */
        serverLog("Background AOF rewrite failed");
        return;
    }
    if (A.has_base && strcmp(A.base.name, nb.name) != 0) deleteFile(s, A.base.name);
    for (int i = 0; i < A.child_keep; i++) deleteFile(s, A.incr[i].name);
    memmove(A.incr, A.incr + A.child_keep, (size_t)(A.nincr - A.child_keep) * sizeof(*A.incr));
    A.nincr -= A.child_keep;
    A.base = nb;
    A.has_base = 1;
    A.base_seq = nb.seq;
    A.wait_keep = -1;
    A.base_size = fileSize(s, nb.name);
    A.cur_size = A.base_size;
    for (int i = 0; i < A.nincr; i++) A.cur_size += fileSize(s, A.incr[i].name);
    A.last_rw_ok = 1;
    A.rw_failures = 0;
    A.rewrites++;
    if (A.state == AOF_WAIT_REWRITE) {
        A.state = AOF_ON;
        serverLog("Background AOF rewrite finished successfully: the AOF is on");
    } else {
        serverLog("Background AOF rewrite finished successfully");
    }
}

static void killChild(void) {
    if (A.child <= 0) return;
    kill(A.child, SIGKILL);
    int st;
    while (waitpid(A.child, &st, 0) < 0 && errno == EINTR) {}
    unlink(A.child_tmp);
    A.child = 0;
}

void aofMisconf(char *msg, size_t len) {
    snprintf(msg, len, "-MISCONF Errors writing to the AOF file: %s", strerror(A.write_errno));
}

void aofCron(ir_server *s) {
    if (!A.last_write_ok) { /* try again */
        if (A.out.len) {
            aofFlush();
        } else if (A.fd < 0 || fdatasync(A.fd) == 0) {
            serverLog("AOF write error looks solved, Redis can write again.");
            setWriteOk(1);
        }
    }
    if (A.child > 0) {
        int st;
        pid_t r = waitpid(A.child, &st, WNOHANG);
        if (r == A.child || (r < 0 && errno == ECHILD))
            rewriteDone(s, r == A.child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    if (A.state == AOF_WAIT_REWRITE && A.child <= 0 && ir_mstime() >= A.retry_ms) {
        char err[256];
        if (rewriteStart(s, err, sizeof(err)) != 0) A.retry_ms = ir_mstime() + 5000;
    }
    if (A.fd >= 0 && A.need_fsync && aof_fsync == AOF_FSYNC_EVERYSEC &&
        ir_mstime() - A.last_fsync_ms >= 1000) {
        aofFlush();
        fdatasync(A.fd);
        A.need_fsync = 0;
        A.last_fsync_ms = ir_mstime();
    }
    if (A.state == AOF_ON && A.child <= 0 && aof_rewrite_perc &&
        A.cur_size > (uint64_t)aof_rewrite_min_size && ir_mstime() >= A.retry_ms) {
        uint64_t base = A.base_size ? A.base_size : 1;
        if ((A.cur_size * 100 / base) - 100 >= (uint64_t)aof_rewrite_perc) {
            char err[256];
            serverLog("Starting automatic rewriting of AOF on %llu%% growth",
                      (unsigned long long)((A.cur_size * 100 / base) - 100));
            if (rewriteStart(s, err, sizeof(err)) != 0) A.retry_ms = ir_mstime() + 5000;
        }
    }
}

/* ---- loading ----------------------------------------------------------------- */

static client *fakeClient(ir_server *s) {
    client *f = calloc(1, sizeof(*f));
    if (!f) return NULL;
    f->srv = s;
    f->resp = 2;
    aclInitClient(f);
    f->authenticated = 1;
    f->bulklen = -1;
    f->flags = CLIENT_SCRIPT; /* never blocks */
    f->id = UINT64_MAX - 1;
    snprintf(f->addr, sizeof(f->addr), "aof");
    snprintf(f->laddr, sizeof(f->laddr), "aof");
    return f;
}

static void fakeFree(client *f) {
    clientDiscardReply(f);
    free(f->obuf);
    free(f->segs);
    free(f);
}

/* One loaded command on the fake client; its reply is dropped. */
static void runLoaded(client *f, const ir_command *cmd, int argc, ir_arg *argv) {
    f->argc = argc;
    f->argv = argv;
    f->cmd = cmd;
    f->lastcmd = cmd;
    f->lastsub = commandSubName(cmd, f);
    cmd->proc(f);
    clientDiscardReply(f);
    f->argc = 0;
    f->argv = NULL;
    f->cmd = NULL;
}

/* A decimal number ending in "\r\n" at p (not past end): its value, p moved
 * past it; -1 truncated, -2 malformed. */
static int readNum(char **pp, char *end, long long *v) {
    char *p = *pp;
    char *cr = memchr(p, '\r', (size_t)(end - p));
    if (!cr || cr + 1 >= end) return -1;
    if (cr[1] != '\n' || !string2ll(p, (size_t)(cr - p), v)) return -2;
    *pp = cr + 2;
    return 0;
}

/* Load one file of the AOF (its commands, after an RDB image if it starts
 * with one). last: the last file, whose truncated tail may be cut
 * (aof-load-truncated). 0, or -1 with err. */
static int loadFile(ir_server *s, const char *name, int last, char *err, size_t errlen) {
    char path[PATH_MAX];
    if (aofPath(s, path, sizeof(path), name) != 0) {
        snprintf(err, errlen, "the append only file path is too long");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "Fatal error: can't open the append log file %s for reading: %s",
                 name, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "Unable to stat the AOF file %s: %s", name, strerror(errno));
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *data = malloc(size + 1);
    if (!data) {
        close(fd);
        snprintf(err, errlen, "out of memory reading the AOF file %s", name);
        return -1;
    }
    while (got < size) {
        ssize_t r = read(fd, data + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    size = got;
    data[size] = '\0';
    char *p = data, *end = data + size;
    int rc = -1;
    if (size >= 5 && memcmp(data, "REDIS", 5) == 0) {
        size_t used;
        char why[256];
        if (rdbLoadImage(s, (const unsigned char *)data, size, &used, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "Error reading the RDB base file %s, AOF loading aborted: %s",
                     name, why);
            free(data);
            return -1;
        }
        p += used;
    }
    client *f = fakeClient(s);
    if (!f) {
        free(data);
        snprintf(err, errlen, "out of memory loading the AOF");
        return -1;
    }
    ir_arg *argv = NULL;
    long long argcap = 0;
    struct {
        const ir_command *cmd;
        int argc;
    } *q = NULL; /* the commands of an open MULTI, their arguments in qargs */
    size_t nq = 0, qcap = 0, nqargs = 0, qargcap = 0;
    ir_arg *qargs = NULL;
    char *valid = p; /* the end of the last whole command (before an open MULTI) */
    int in_multi = 0;
    while (p < end) {
        if (*p == '#') { /* an annotation (aof-timestamp-enabled) */
            char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl) goto truncated;
            p = nl + 1;
            if (!in_multi) valid = p;
            continue;
        }
        if (*p != '*') goto bad;
        p++;
        long long argc;
        int k = readNum(&p, end, &argc);
        if (k == -1) goto truncated;
        if (k < 0 || argc < 1 || argc > INT_MAX / 2) goto bad;
        if (argc > argcap) {
            argv = ir_xrealloc(argv, (size_t)argc * sizeof(*argv));
            argcap = argc;
        }
        for (long long i = 0; i < argc; i++) {
            if (p >= end) goto truncated;
            if (*p != '$') goto bad;
            p++;
            long long len;
            k = readNum(&p, end, &len);
            if (k == -1) goto truncated;
            if (k < 0 || len < 0) goto bad;
            if ((long long)(end - p) < len + 2) goto truncated;
            if (p[len] != '\r' || p[len + 1] != '\n') goto bad;
            p[len] = '\0'; /* the argument, NUL-terminated in place */
            argv[i] = (ir_arg){p, (size_t)len, 0};
            p += len + 2;
        }
        const ir_command *cmd = lookupCommand(argv[0].ptr, argv[0].len);
        if (!cmd) {
            snprintf(err, errlen, "Unknown command '%.64s' reading the append only file %s",
                     argv[0].ptr, name);
            goto out;
        }
        if ((cmd->arity > 0 && cmd->arity != argc) || argc < -cmd->arity) goto bad;
        if (!strcmp(cmd->name, "multi")) {
            in_multi = 1;
            nq = 0;
            continue;
        }
        if (!strcmp(cmd->name, "exec")) { /* the transaction runs now, whole */
            for (size_t i = 0, at = 0; i < nq; at += (size_t)q[i].argc, i++)
                runLoaded(f, q[i].cmd, q[i].argc, qargs + at);
            in_multi = 0;
            nq = nqargs = 0;
            valid = p;
            continue;
        }
        if (in_multi) { /* queued: a transaction the file cuts short never runs */
            if (nq == qcap) {
                qcap = qcap ? qcap * 2 : 16;
                q = ir_xrealloc(q, qcap * sizeof(*q));
            }
            if (nqargs + (size_t)argc > qargcap) {
                while (nqargs + (size_t)argc > qargcap) qargcap = qargcap ? qargcap * 2 : 64;
                qargs = ir_xrealloc(qargs, qargcap * sizeof(*qargs));
            }
            q[nq].cmd = cmd;
            q[nq++].argc = (int)argc;
            memcpy(qargs + nqargs, argv, (size_t)argc * sizeof(*argv));
            nqargs += (size_t)argc;
            continue;
        }
        runLoaded(f, cmd, (int)argc, argv);
        valid = p;
    }
    if (in_multi) goto truncated;
    rc = 0;
    goto out;
truncated:
    if (last && aof_load_truncated) {
        serverLog("!!! Warning: short read while loading the AOF file %s!!!", name);
        serverLog("!!! Truncating the AOF %s at offset %lld !!!", name, (long long)(valid - data));
        if (truncate(path, (off_t)(valid - data)) != 0)
            serverLog("Error truncating the AOF file %s: %s", name, strerror(errno));
        rc = 0; /* a transaction cut short was never run */
    } else {
        snprintf(err, errlen,
                 "Unexpected end of file reading the append only file %s. You can: 1) Make a "
                 "backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. "
                 "2) Alternatively you can set the 'aof-load-truncated' configuration option to "
                 "yes and restart the server.",
                 name);
    }
    goto out;
bad:
    snprintf(err, errlen,
             "Bad file format reading the append only file %s: make a backup of your AOF file, "
             "then use ./redis-check-aof --fix <filename.manifest>",
             name);
out:
    f->argc = 0;
    f->argv = NULL;
    fakeFree(f);
    free(argv);
    free(q);
    free(qargs);
    free(data);
    return rc;
}

/* Every file of the manifest, into s's (empty) databases. */
static int loadAll(ir_server *s, char *err, size_t errlen) {
    repl_loading = 1;
    int rc = 0;
    int total = (A.has_base ? 1 : 0) + A.nincr;
    int i = 0;
    if (A.has_base) rc = loadFile(s, A.base.name, ++i == total, err, errlen);
    for (int k = 0; rc == 0 && k < A.nincr; k++)
        rc = loadFile(s, A.incr[k].name, ++i == total, err, errlen);
    repl_loading = 0;
    if (rc == 0) {
        A.base_size = A.has_base ? fileSize(s, A.base.name) : 0;
        A.cur_size = A.base_size;
        for (int k = 0; k < A.nincr; k++) A.cur_size += fileSize(s, A.incr[k].name);
    }
    return rc;
}

/* Load the AOF into fresh databases: on success they replace the keyspace's
 * contents (the database objects stay, as DEBUG RELOAD keeps them), else the
 * keyspace is left as it was. */
static int loadReplacing(ir_server *s, char *err, size_t errlen) {
    int n = dbsCount(s);
    ir_db **old = malloc((size_t)n * sizeof(*old));
    if (!old) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        old[i] = dbsAt(s, i);
        ir_db *fresh = (ir_db *)dbNew();
        fresh->id = i;
        if (i == 0) s->db = fresh;
        else s->dbs[i] = fresh;
    }
    notifyNoNewKey = 1; /* loaded keys are not new */
    int rc = loadAll(s, err, errlen);
    notifyNoNewKey = 0;
    for (int i = 0; i < n; i++) {
        ir_db *loaded = dbsAt(s, i), *keep = old[i];
        if (rc == 0) {
            signalFlushedDb(keep);
            ir_db t = *keep;
            *keep = *loaded;
            *loaded = t;
            keep->id = i;
            keep->expired_keys = t.expired_keys;
        }
        if (i == 0) s->db = keep;
        else s->dbs[i] = keep;
        dbFree(loaded); /* the old contents, or what a failed load made */
    }
    free(old);
    return rc;
}

/* ---- on / off ------------------------------------------------------------------ */

static void setOn(int state) {
    A.state = state;
    repl_aof = state != AOF_OFF;
    if (state == AOF_OFF) { /* what could not be written is gone with it */
        A.out.len = 0;
        setWriteOk(1);
    }
}

/* A synchronous rewrite at start (no AOF yet): base, incr, manifest. */
static int createNow(ir_server *s, char *err, size_t errlen) {
    size_t len = 0;
    int rdb = aof_use_rdb_preamble != 0;
    char *img = buildBase(s, rdb, &len);
    if (!img) {
        snprintf(err, errlen, "out of memory building the AOF base");
        return -1;
    }
    aofFile nb;
    baseName(s, &nb, A.base_seq + 1, rdb);
    char path[PATH_MAX];
    int fd = -1;
    if (aofPath(s, path, sizeof(path), nb.name) == 0)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, img, len) != (ssize_t)len || fsync(fd) != 0) {
        snprintf(err, errlen, "Can't write the AOF base file %s: %s", nb.name, strerror(errno));
        if (fd >= 0) close(fd);
        free(img);
        return -1;
    }
    close(fd);
    free(img);
    A.base = nb;
    A.has_base = 1;
    A.base_seq = nb.seq;
    A.nincr = 0;
    A.base_size = A.cur_size = len;
    return 0;
}

/* A plain name (no path), as Redis's isValidAOFfilename/dirname. */
static int plainName(const char *n) {
    return !n || !n[0] ||
           (!strchr(n, '/') && !strchr(n, '\\') && strcmp(n, ".") != 0 && strcmp(n, "..") != 0);
}

int aofCanEnable(const ir_server *s, char *err, size_t errlen) { return ensureDir(s, err, errlen); }

int aofStartup(ir_server *s, char *msg, size_t msglen) {
    if (!plainName(s->cfg.appendfilename) || !plainName(s->cfg.appenddirname)) {
        snprintf(msg, msglen, "appendfilename/appenddirname can't be a path, just a name");
        return -1;
    }
    if (!s->cfg.appendonly) return 0;
    char err[PATH_MAX + 256];
    if (ensureDir(s, err, sizeof(err)) != 0) goto fail;
    int r = readManifest(s, err, sizeof(err));
    if (r < 0) goto fail;
    if (r > 0) {
        uint64_t t0 = ir_mstime();
        if (loadReplacing(s, err, sizeof(err)) != 0) goto fail;
        serverLog("DB loaded from append only file: %.3f seconds",
                  (double)(ir_mstime() - t0) / 1000.0);
    } else if (createNow(s, err, sizeof(err)) != 0) {
        goto fail;
    }
    setOn(AOF_ON);
    /* appends go to the last incr file, or a new one */
    if (A.nincr) {
        char path[PATH_MAX];
        if (aofPath(s, path, sizeof(path), A.incr[A.nincr - 1].name) != 0) goto fail;
        /* the manifest's own file, wherever it leads (an operator may link it) */
        A.fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (A.fd < 0) {
            snprintf(err, sizeof(err), "Can't open the append-only file %s: %s", path,
                     strerror(errno));
            setOn(AOF_OFF);
            goto fail;
        }
        A.seldb = -1;
    } else if (openNewIncr(s, 1, err, sizeof(err)) != 0) {
        setOn(AOF_OFF);
        goto fail;
    }
    return 0;
fail:
    snprintf(msg, msglen, "appendonly: %s", err);
    return -1;
}

int aofSetEnabled(ir_server *s, int on, char *err, size_t errlen) {
    if (!on) {
        if (A.state == AOF_OFF) return 0;
        killChild();
        closeIncr();
        A.wait_keep = -1;
        setOn(AOF_OFF);
        serverLog("Append only file disabled");
        return 0;
    }
    if (A.state != AOF_OFF) return 0;
    setOn(AOF_WAIT_REWRITE);
    A.wait_keep = -1;
    if (A.child > 0) killChild(); /* a rewrite of the AOF that was off: start again */
    if (rewriteStart(s, err, errlen) != 0) {
        closeIncr();
        if (A.wait_keep >= 0) {
            deleteFile(s, A.incr[A.wait_keep].name);
            A.nincr = A.wait_keep;
            A.wait_keep = -1;
        }
        setOn(AOF_OFF);
        serverLog("Redis needs to enable the AOF but can't trigger a background AOF rewrite "
                  "operation. Check the above logs for more info about the error.");
        return -1;
    }
    serverLog("Append only file enabled: a rewrite makes its base");
    return 0;
}

void aofShutdown(ir_server *s) {
    (void)s;
    if (A.child > 0) {
        serverLog("There is a child rewriting the AOF. Killing it!");
        killChild();
    }
    if (A.fd >= 0) {
        serverLog("Calling fsync() on the AOF file.");
        closeIncr();
    }
    setOn(AOF_OFF);
}

/* ---- commands and INFO ------------------------------------------------------------ */

void bgrewriteaofCommand(client *c) {
    char err[PATH_MAX + 256];
    if (A.child > 0) {
        addReplyError(c, "Background append only file rewriting already in progress");
        return;
    }
    if (rewriteStart(c->srv, err, sizeof(err)) != 0) {
        addReplyErrorFormat(c, "%s", err);
        return;
    }
    addReplyStatus(c, "Background append only file rewriting started");
}

void aofDebugLoad(client *c) {
    ir_server *s = c->srv;
    char err[PATH_MAX + 512];
    if (A.state == AOF_WAIT_REWRITE) { /* its first base is not written yet */
        addReplyError(c, "Error loading the AOF: the rewrite that turns the AOF on is still in "
                         "progress");
        return;
    }
    if (A.state == AOF_ON) {
        aofFlush();
        if (A.fd >= 0) fsync(A.fd);
    }
    /* on: the files are those the manifest lists (it is written with each change) */
    int r = A.state == AOF_ON && A.known ? 1 : readManifest(s, err, sizeof(err));
    if (r == 0) {
        addReplyError(c, "Error loading the AOF: there is no AOF manifest");
        return;
    }
    if (r < 0) {
        addReplyErrorFormat(c, "Error loading the AOF: %s", err);
        return;
    }
    struct ir_functions *none = functionsPrepare(s, NULL, NULL, 0, err, sizeof(err));
    if (none) functionsInstall(s, none); /* functions come from the AOF too */
    if (loadReplacing(s, err, sizeof(err)) != 0) {
        serverLog("DEBUG LOADAOF failed: %s", err);
        addReplyErrorFormat(c, "Error loading the AOF: %s", err);
        return;
    }
    serverLog("Append Only File loaded by DEBUG LOADAOF");
    addReplyStr(c, shared.ok);
}

size_t aofInfo(const ir_server *s, char *buf, size_t len) {
    (void)s;
    long long cur = A.child > 0 ? (long long)((ir_mstime() - A.child_start_ms) / 1000) : -1;
    int n =
        snprintf(buf, len,
                 "aof_enabled:%d\r\naof_rewrite_in_progress:%d\r\naof_rewrite_scheduled:0\r\n"
                 "aof_last_rewrite_time_sec:%lld\r\naof_current_rewrite_time_sec:%lld\r\n"
                 "aof_last_bgrewrite_status:%s\r\naof_rewrites:%lld\r\n"
                 "aof_rewrites_consecutive_failures:%lld\r\naof_last_write_status:%s\r\n"
                 "aof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\n"
                 "module_fork_last_cow_size:0\r\n",
                 A.state != AOF_OFF, A.child > 0, A.last_rw_sec, cur, A.last_rw_ok ? "ok" : "err",
                 A.rewrites, A.rw_failures, A.last_write_ok ? "ok" : "err");
    if (n < 0) return 0;
    if (A.state != AOF_OFF && (size_t)n < len) {
        int m =
            snprintf(buf + n, len - (size_t)n,
                     "aof_current_size:%llu\r\naof_base_size:%llu\r\naof_pending_rewrite:0\r\n"
                     "aof_buffer_length:%zu\r\naof_pending_bio_fsync:0\r\n"
                     "aof_delayed_fsync:0\r\n",
                     (unsigned long long)A.cur_size, (unsigned long long)A.base_size, A.out.len);
        if (m > 0) n += m;
    }
    return (size_t)n;
}
