/* fuzz_resp.c - libFuzzer harness: the RESP2 parser and command dispatch.
 *
 * In the style of the OSS-Fuzz harnesses: one server for the process, a fresh
 * client (or two) for every input, driven through an in-memory transport the
 * way tests/c/test_resp.c drives it: irs_accept, irs_data in chunks,
 * irs_writable while the server asks for it, irs_closed when the harness
 * hangs up. Between inputs the keyspace and every replay table are emptied,
 * so memory does not grow across runs and leaks are detectable. SAVE/BGSAVE
 * write into a private scratch directory (/dev/shm or /tmp, removed at exit);
 * a BGSAVE child is killed and reaped at the end of each input.
 *
 * Input layout (so the fuzzer explores how a stream is split, too):
 *
 *   byte 0  ctl   bits 0-2  n: number of split points that follow
 *                 bit  3    partial writes: the transport takes at most L bytes
 *                           per writev, and irs_writable runs between chunks
 *                 bit  4    server_tick() between chunks (active expiry, rehash)
 *                 bit  5    two clients: chunks alternate between them (the
 *                           second connects when its first chunk comes)
 *                 bits 6-7  with bit 3: L = 1, 13, 512 or 8192 bytes; without:
 *                           the second client's address: [::1], [::ffff:127.0.0.2],
 *                           10.0.0.2 (in the client subnet 10.0.0.0/30), 10.0.0.9
 *   byte 1  opt   bits 0-2  sum tree fanout: default, 2, 4, 8, 16, 32, default, default
 *                 bit  3    IR_SUMTREE_NO_AVX2 (portable kernels)
 *                 bit  4    requirepass "foobared": clients start unauthenticated
 *                 bit  5    maxmemory 1 byte: every denyoom command gets -OOM
 *                 bit  6    client-output-buffer-limit 16 KiB
 *                 bit  7    sampler seed 2 instead of 1
 *   then    n little-endian uint16 split points (taken modulo the payload length)
 *   rest    the request stream, as a client would send it
 *
 * A seed that is a plain request stream starts with the two bytes "\0\0".
 *
 * Oracles besides ASan/UBSan/LSan: every byte the server writes must be
 * well-formed RESP2 (and complete once drained, unless the server closed the
 * connection); the transport contract (no call for a closed connection, no
 * close after irs_closed); split-equivalence (a one-client input with split
 * points is also run fed whole, and must get the same bytes and the same
 * close, unless it used a command whose answer depends on the clock, client
 * ids or flush timing); REPLAY.ADD/UPDATE store what they say they stored;
 * a snapshot written by SAVE loads back (snapshotRestore) into a keyspace and
 * tables that pass the invariant checks; and, after every input, the invariants of the
 * keyspace (dict links, hashes, TTL index, byte accounting) and of every
 * replay table (live window, slot ids, arena ranges inside MAXBYTES and
 * disjoint, bytes_used, dead slots carry no priority, live slots carry one,
 * sum tree exactly rebuildable, min tree, max). A violation aborts, which
 * libFuzzer reports as a crash with the input.
 *
 * Harness-only limits. These keep single inputs from exhausting the fuzzer's
 * RSS/time budget with legitimate commands; each is a known denial-of-service
 * surface of the server, reported separately, not something hidden here:
 *   - REPLAY.CREATE: at most FUZZ_SLOT_BUDGET slots created per input
 *     (the server accepts CAPACITY up to 2^32 and commits ~18 B/slot at once);
 *   - REPLAY.SAMPLE: at most FUZZ_SAMPLE_BUDGET items sampled per input
 *     (n up to 2^20 turns a 25-byte request into a ~19 MB reply);
 *   - CONFIG SET cannot raise proto-max-bulk-len above FUZZ_MAX_BULK;
 *   - DEBUG SLEEP sleeps at most FUZZ_MAX_SLEEP seconds (it blocks the server
 *     on purpose), and DEBUG SET-ACTIVE-EXPIRE is turned back on between inputs
 *     (so are keyspace notifications turned off);
 *   - PFSELFTEST (ten million HLL additions, seconds under the sanitizers)
 *     always answers the harness's error.
 * Beyond them those commands answer "-ERR fuzz harness: ...".
 *
 * FUZZ_RESP_SKIP="name,..." skips the named invariant checks (the [name] in
 * their messages; "client-list-length" stubs CLIENT LIST/INFO), so that a long
 * run can look past known, reported bugs. The seed corpus is always replayed
 * with every check on (tests/test_fuzz_corpus.py).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "acl.h"
#include "aof.h"
#include "selector.h"
#include "chunks.h"
#include "commands.h"
#include "db.h"
#include "db_internal.h"
#include "notify.h"
#include "replay.h"
#include "server.h"
#include "snapshot.h"

#define FUZZ_MAX_BULK (1ULL << 20)      /* cfg.proto_max_bulk_len */
#define FUZZ_QUERY_LIMIT (4ULL << 20)   /* cfg.client_query_buffer_limit */
#define FUZZ_SLOT_BUDGET (1ULL << 20)   /* replay slots created per input */
#define FUZZ_SAMPLE_BUDGET (1ULL << 18) /* items sampled per input */
#define FUZZ_MAX_SPLITS 7
#define FUZZ_MAX_SLEEP 0.001     /* DEBUG SLEEP, seconds */
#define FUZZ_EMPTY_ID UINT64_MAX /* replay.c's EMPTY_ID */

/* FUZZ_RESP_SKIP="name,name": invariant checks to skip (known, reported bugs), so a
 * long run can look for new ones. The names are the first argument of CHECK_INV. */
static const char *skip_list;
static int skipped(const char *name) {
    if (!skip_list) return 0;
    size_t n = strlen(name);
    for (const char *p = skip_list; (p = strstr(p, name)); p += n)
        if ((p == skip_list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}
#define CHECK_INV(name, cond, ...) \
    do { \
        if (!(cond) && !skipped(name)) die(__VA_ARGS__); \
    } while (0)

static void die(const char *what, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *what, ...) {
    va_list ap;
    va_start(ap, what);
    fprintf(stderr, "\nfuzz_resp: invariant violated: ");
    vfprintf(stderr, what, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* ---- a streaming RESP2/RESP3 reply checker ------------------------------- */

/* RESP3 (after HELLO 3): maps count two elements per entry; '=' and '!' are
 * bulks; '_', '#', ',' and '(' are lines like '+'; an attribute ('|', a map)
 * comes before a reply and is not an element itself (DEBUG PROTOCOL attrib). */
static int rcTextLine(char t) {
    return t == '+' || t == '-' || t == '_' || t == '#' || t == ',' || t == '(';
}

enum { RC_TYPE, RC_LINE, RC_LINE_LF, RC_BULK, RC_BULK_CR, RC_BULK_LF };

typedef struct respcheck {
    int state;
    char type;
    char num[24];
    size_t numlen;
    long long bulk_left;
    int depth;
    long long left[64]; /* elements still due in each open array */
    char attr[64];      /* that open aggregate is an attribute */
    uint64_t pos;       /* bytes checked */
    char head[5];       /* the first bytes of a top-level bulk */
    size_t headlen;
} respcheck;

static void rcFail(const respcheck *r, const char *why, unsigned char ch) {
    die("malformed reply at output byte %llu (0x%02x): %s", (unsigned long long)r->pos, ch, why);
}

static void rcElementDone(respcheck *r) {
    while (r->depth > 0) {
        if (--r->left[r->depth - 1] > 0) return;
        r->depth--; /* that array is complete: it counts as one element of its parent */
        if (r->attr[r->depth]) return; /* unless it was an attribute: its reply follows */
    }
}

static void rcHeader(respcheck *r, unsigned char ch) {
    long long v;
    if (!string2ll(r->num, r->numlen, &v)) rcFail(r, "bad number in a length or ':' line", ch);
    if ((r->type == '%' || r->type == '|') && v > 0) v *= 2;
    if (r->type == ':') {
        rcElementDone(r);
    } else if (r->type == '$' || r->type == '=' || r->type == '!') {
        if (v < -1) rcFail(r, "bulk length below -1", ch);
        if (v == -1) {
            rcElementDone(r);
        } else {
            r->bulk_left = v;
            r->state = v ? RC_BULK : RC_BULK_CR;
            return;
        }
    } else { /* '*', '~', '>', '%', '|' */
        if (v < -1) rcFail(r, "array length below -1", ch);
        if (v <= 0) {
            if (r->type != '|') rcElementDone(r);
        } else {
            if (r->depth == 64) rcFail(r, "arrays nested deeper than 64", ch);
            r->attr[r->depth] = r->type == '|';
            r->left[r->depth++] = v;
        }
    }
    r->state = RC_TYPE;
}

static void rcFeed(respcheck *r, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++, r->pos++) {
        unsigned char ch = p[i];
        switch (r->state) {
        case RC_TYPE:
            if (!strchr("+-:$*_#,(=!~>%|", ch) || ch == '\0') rcFail(r, "not a RESP type byte", ch);
            r->type = (char)ch;
            r->numlen = 0;
            r->headlen = 0;
            r->state = RC_LINE;
            break;
        case RC_LINE:
            if (ch == '\r') {
                r->state = RC_LINE_LF;
            } else if (ch == '\n') {
                rcFail(r, "LF inside a line", ch);
            } else if (!rcTextLine(r->type)) {
                if (r->numlen == sizeof(r->num)) rcFail(r, "number too long", ch);
                r->num[r->numlen++] = (char)ch;
            }
            break;
        case RC_LINE_LF:
            if (ch != '\n') rcFail(r, "CR not followed by LF", ch);
            if (rcTextLine(r->type)) {
                rcElementDone(r);
                r->state = RC_TYPE;
            } else {
                rcHeader(r, ch);
            }
            break;
        case RC_BULK: {
            size_t take = n - i;
            if ((unsigned long long)r->bulk_left < take) take = (size_t)r->bulk_left;
            for (size_t k = 0; r->depth == 0 && k < take && r->headlen < sizeof(r->head); k++)
                r->head[r->headlen++] = (char)p[i + k];
            r->bulk_left -= (long long)take;
            i += take - 1;
            r->pos += take - 1;
            if (r->bulk_left == 0) r->state = RC_BULK_CR;
            break;
        }
        case RC_BULK_CR:
            /* SYNC/PSYNC's RDB image: "$<len>\r\n<payload>" with no CRLF, and the
             * replication stream (RESP arrays) right after it */
            if (ch != '\r' && r->depth == 0 && r->headlen == 5 && !memcmp(r->head, "REDIS", 5)) {
                r->state = RC_TYPE;
                i--, r->pos--;
                break;
            }
            if (ch != '\r') rcFail(r, "bulk body longer than its length", ch);
            r->state = RC_BULK_LF;
            break;
        case RC_BULK_LF:
            if (ch != '\n') rcFail(r, "bulk not ended by CRLF", ch);
            rcElementDone(r);
            r->state = RC_TYPE;
            break;
        }
    }
}

/* ---- the in-memory transport --------------------------------------------- */

struct ir_conn {
    const char *peer;
    int closed;          /* the server called ops->close */
    int hung_up;         /* the harness reported irs_closed */
    int want_w;          /* the server asked for irs_writable */
    size_t accept_limit; /* bytes per writev, 0 = all */
    respcheck rc;
    uint64_t hash; /* FNV-1a of every byte taken, for the split-equivalence check */
};

static void checkOpen(const ir_conn *c, const char *op) {
    if (c->closed || c->hung_up)
        die("transport contract: %s on a connection that is already %s", op,
            c->closed ? "closed by the server" : "reported closed (irs_closed)");
}

static ssize_t tWritev(ir_transport *t, ir_conn *c, const struct iovec *iov, int n) {
    (void)t;
    checkOpen(c, "writev");
    if (n < 0 || n > IR_MAX_IOV) die("writev with %d iovecs", n);
    size_t took = 0;
    for (int i = 0; i < n; i++) {
        size_t l = iov[i].iov_len;
        if (c->accept_limit && took + l > c->accept_limit) l = c->accept_limit - took;
        rcFeed(&c->rc, iov[i].iov_base, l); /* reads every byte: ASan checks the iovecs */
        for (size_t j = 0; j < l; j++)
            c->hash = (c->hash ^ ((const unsigned char *)iov[i].iov_base)[j]) * 0x100000001b3ULL;
        took += l;
        if (c->accept_limit && took == c->accept_limit) break;
    }
    return (ssize_t)took;
}
static void tWantW(ir_transport *t, ir_conn *c, int on) {
    (void)t;
    checkOpen(c, "want_writable");
    c->want_w = on;
}
static void tWantR(ir_transport *t, ir_conn *c, int on) {
    (void)t, (void)on;
    checkOpen(c, "want_readable");
}
static void tClose(ir_transport *t, ir_conn *c) {
    (void)t;
    checkOpen(c, "close");
    c->closed = 1;
}
static void tPeer(ir_transport *t, ir_conn *c, char *b, size_t l) {
    (void)t;
    snprintf(b, l, "%s", c->peer);
}
static const ir_transport_ops fuzz_ops = {
    .name = "fuzz",
    .writev = tWritev,
    .want_writable = tWantW,
    .want_readable = tWantR,
    .close = tClose,
    .peername = tPeer,
};

static ir_server *srv;
static ir_transport tp = {.ops = &fuzz_ops};
static ir_config base_cfg;

/* ---- harness-only limits (wrappers around three command handlers) -------- */

static ir_command_proc *orig_create, *orig_sample, *orig_config, *orig_add, *orig_update,
    *orig_client, *orig_debug;
static uint64_t slots_left, samples_left;

static void fuzzReplayCreate(client *c) {
    long long cap = 0, v;
    for (int i = 2; i + 1 < c->argc; i += 2)
        if (argEq(c, i, "capacity") && string2ll(c->argv[i + 1].ptr, c->argv[i + 1].len, &v))
            cap = v;
    if (cap > 0 && (uint64_t)cap > slots_left) {
        addReplyError(c, "fuzz harness: CAPACITY over this input's slot budget");
        return;
    }
    if (cap > 0) slots_left -= (uint64_t)cap;
    orig_create(c);
}

static void fuzzReplaySample(client *c) {
    long long n;
    if (string2ll(c->argv[2].ptr, c->argv[2].len, &n) && n > 0 && n <= IR_MAX_SAMPLE) {
        if ((uint64_t)n > samples_left) {
            addReplyError(c, "fuzz harness: sample size over this input's budget");
            return;
        }
        samples_left -= (uint64_t)n;
    }
    orig_sample(c);
}

static int nondeterministic; /* see fuzzAny */

static void fuzzConfig(client *c) {
    orig_config(c);
    if (c->srv->cfg.proto_max_bulk_len > FUZZ_MAX_BULK)
        c->srv->cfg.proto_max_bulk_len = FUZZ_MAX_BULK;
    /* maxmemory compares with the process's RSS: only 0 and 1 answer the same every run */
    if (c->srv->cfg.maxmemory > 1) nondeterministic = 1;
}

/* What the sampler should store for a raw priority (sumtree.c's transform). */
static double storedFor(const ir_table *t, double raw) {
    double a = t->o.alpha, x = raw + t->o.epsilon;
    return a == 1.0 ? x : a == 0.0 ? 1.0 : pow(x, a);
}

/* REPLAY.ADD: when it answers with ids, every inserted item still live must
 * carry the priority it was given (MAX: the table's max before the batch). */
static void fuzzReplayAdd(client *c) {
    ir_table *t = tableFind(c->srv->tables, c->argv[1].ptr, c->argv[1].len);
    uint64_t inserts = t ? t->inserts : 0, first_id = t ? t->next_id : 0;
    orig_add(c);
    if (!t || t->inserts == inserts) return;
    /* PACKED <n> <priorities: n float64 | MAX> <items> */
    int packed = c->argc >= 6 && c->argv[2].len == 6 && !strncasecmp(c->argv[2].ptr, "packed", 6);
    size_t n = packed ? (size_t)(t->inserts - inserts) : (size_t)(c->argc - 2) / 2;
    for (size_t k = 0; k < n; k++) {
        uint64_t id = first_id + k, slot = tableSlotOf(t, id);
        if (slot == UINT64_MAX) continue; /* evicted within the batch */
        const ir_arg *p = &c->argv[packed ? 4 : 2 + 2 * (int)k];
        double raw, got = ir_sampler_get(t->sampler, slot);
        if (packed && p->len == 8 * n) {
            memcpy(&raw, p->ptr + 8 * k, 8);
            double want = storedFor(t, raw);
            CHECK_INV("add-priority", got == want,
                      "[add-priority] REPLAY.ADD PACKED '%s' answered ids, but id %llu "
                      "(priority %.17g) stored %.17g instead of %.17g",
                      t->name, (unsigned long long)id, raw, got, want);
        } else if (p->len == 3 && strncasecmp(p->ptr, "max", 3) == 0) {
            CHECK_INV("add-priority", got > 0.0,
                      "[add-priority] REPLAY.ADD '%s': MAX item id %llu stored %g", t->name,
                      (unsigned long long)id, got);
        } else if (string2d(p->ptr, p->len, &raw)) {
            double want = storedFor(t, raw);
            CHECK_INV("add-priority", got == want,
                      "[add-priority] REPLAY.ADD '%s' answered ids, but id %llu (priority %.17g) "
                      "stored %.17g instead of %.17g",
                      t->name, (unsigned long long)id, raw, got, want);
        }
    }
}

/* REPLAY.UPDATE: when it counts updates as applied, they must be in the tree. */
static void fuzzReplayUpdate(client *c) {
    ir_table *t = tableFind(c->srv->tables, c->argv[1].ptr, c->argv[1].len);
    uint64_t updates = t ? t->updates : 0;
    orig_update(c);
    if (!t || t->updates == updates) return;
    size_t n = c->argv[2].len / 8;
    for (size_t k = 0; k < n; k++) {
        uint64_t id;
        float raw;
        memcpy(&id, c->argv[2].ptr + 8 * k, 8);
        memcpy(&raw, c->argv[3].ptr + 4 * k, 4);
        int later = 0; /* a later entry for the same id wins */
        for (size_t j = k + 1; j < n && !later; j++)
            later = memcmp(c->argv[2].ptr + 8 * j, &id, 8) == 0;
        uint64_t slot = tableSlotOf(t, id);
        if (later || slot == UINT64_MAX) continue;
        double got = ir_sampler_get(t->sampler, slot), want = storedFor(t, raw);
        CHECK_INV("update-priority", got == want,
                  "[update-priority] REPLAY.UPDATE '%s' counted id %llu (priority %.9g) as "
                  "applied, but it stores %.17g instead of %.17g",
                  t->name, (unsigned long long)id, (double)raw, got, want);
    }
}

/* With FUZZ_RESP_SKIP=client-list-length, CLIENT LIST/INFO (known to answer a body
 * longer than the length it announced) answer a placeholder instead. */
static void fuzzClient(client *c) {
    if (c->argc == 2 && (argEq(c, 1, "list") || argEq(c, 1, "info")) &&
        skipped("client-list-length")) {
        addReplyBulkCString(c, "id=0 skipped\n");
        return;
    }
    orig_client(c);
}

static void fuzzDebug(client *c) {
    if (c->argc == 3 && argEq(c, 1, "sleep") && strtod(c->argv[2].ptr, NULL) > FUZZ_MAX_SLEEP) {
        addReplyError(c, "fuzz harness: DEBUG SLEEP over its limit");
        return;
    }
    orig_debug(c);
}

static void fuzzPfselftest(client *c) { addReplyError(c, "fuzz harness: PFSELFTEST is too slow"); }

/* Every command goes through here (after the wrappers above), to notice the
 * ones whose answers depend on the clock, client ids or flush timing: an input
 * that ran one of them is not checked for split-equivalence. */
#define FUZZ_MAX_COMMANDS 512
static ir_command_proc *orig_any[FUZZ_MAX_COMMANDS];
static const ir_command *cmd_base;

static int saved; /* this input ran SAVE */

static void fuzzAny(client *c) {
    static const char *const clocky[] = {
        "time",       "info",     "client",      "hello",      "shutdown",    "expire",
        "pexpire",    "ttl",      "pttl",        "persist",    "save",        "bgsave",
        "lastsave",   "spop",     "srandmember", "hrandfield", "zrandmember", "randomkey",
        "debug",      "monitor",  "sync",        "psync",      "xadd",        "xread",
        "xreadgroup", "xpending", "xclaim",      "xautoclaim", "xinfo",       "acl",
        "slowlog",    "latency"};
    /* MONITOR: lines carry the time of each command;
                                            ACL: GENPASS is random, LOG shows ages and client ids;
                                            SLOWLOG, LATENCY: which commands took long depends
                                            on the machine's load (under ASan, on a busy box, a
                                            FUNCTION DUMP can pass 10 ms in one run only);
                                            SYNC/PSYNC: the RDB image, the time and memory used;
                                            streams: `*` IDs, BLOCK, idle and delivery times */
    const char *name = c->cmd->name;
    if (!strcmp(name, "save")) saved = 1;
    for (size_t i = 0; i < sizeof(clocky) / sizeof(clocky[0]); i++)
        if (!strcmp(name, clocky[i])) nondeterministic = 1;
    if (dbExpires(c->srv->db)) nondeterministic = 1; /* lookups may expire keys */
    if (!strcmp(name, "dump") &&
        c->argc >= 2) { /* a stream's payload holds seen and delivery times */
        ir_db *db = dbByIndex(c->srv, c->db);
        const dbEntry *e = dictFind(&db->d, c->argv[1].ptr, c->argv[1].len,
                                    dictHashKey(&db->d, c->argv[1].ptr, c->argv[1].len));
        if (e && e->type == OBJ_STREAM) nondeterministic = 1;
    }
    orig_any[c->cmd - cmd_base](c);
    if (dbExpires(c->srv->db)) nondeterministic = 1;
}

static ir_command_proc *wrap(const char *name, ir_command_proc *with) {
    ir_command *cmd = lookupCommand(name, strlen(name));
    if (!cmd) {
        fprintf(stderr, "fuzz_resp: no command '%s'\n", name);
        abort();
    }
    ir_command_proc *orig = cmd->proc;
    cmd->proc = with;
    return orig;
}

/* SAVE/BGSAVE write here: a private directory, on tmpfs when there is one. */
static char snapdir[64];

/* The files of dir, and of the directories in it one level down (the AOF's). */
static void emptyDir(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return;
    char path[sizeof(snapdir) + 512];
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && depth > 0) {
            emptyDir(path, depth - 1);
            rmdir(path);
        }
    }
    closedir(d);
}

static void emptySnapdir(void) { emptyDir(snapdir, 1); }

static void removeSnapdir(void) {
    emptySnapdir();
    rmdir(snapdir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(snapdir, sizeof(snapdir), "%s/fuzz_resp.XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(snapdir)) {
        perror("fuzz_resp: mkdtemp");
        abort();
    }
    atexit(removeSnapdir);
    skip_list = getenv("FUZZ_RESP_SKIP");
    ir_config_init(&base_cfg);
    base_cfg.proto_max_bulk_len = FUZZ_MAX_BULK;
    base_cfg.client_query_buffer_limit = FUZZ_QUERY_LIMIT;
    base_cfg.seed = 1; /* reproducible sampling (0 would seed from the clock) */
    base_cfg.client_subnet = "10.0.0.0/30"; /* protected mode lets 10.0.0.0-3 in */
    /* the seeds drive DEBUG and CONFIG SET dir, as Redis's own tests open them */
    base_cfg.enable_debug_command = "yes";
    base_cfg.enable_protected_configs = "yes";
    base_cfg.dir = snapdir;
    srv = server_new(&base_cfg);
    if (!srv) abort();
    g_server = srv;
    tp.srv = srv;
    orig_create = wrap("replay.create", fuzzReplayCreate);
    orig_sample = wrap("replay.sample", fuzzReplaySample);
    orig_config = wrap("config", fuzzConfig);
    orig_add = wrap("replay.add", fuzzReplayAdd);
    orig_update = wrap("replay.update", fuzzReplayUpdate);
    orig_client = wrap("client", fuzzClient);
    orig_debug = wrap("debug", fuzzDebug);
    wrap("pfselftest", fuzzPfselftest);
    size_t ncmd;
    cmd_base = commandTable(&ncmd);
    if (ncmd > FUZZ_MAX_COMMANDS) abort();
    for (size_t i = 0; i < ncmd; i++) orig_any[i] = wrap(cmd_base[i].name, fuzzAny);
    return 0;
}

/* ---- invariants checked after every input ---------------------------------- */

static uint64_t reserveLen(uint64_t len) {
    uint64_t r = (len + 7) & ~(uint64_t)7;
    return r ? r : 8;
}

typedef struct range {
    uint64_t off, len, id;
} range;

static int rangeCmp(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Selector structures: every heap holds exactly the live slots in heap
 * order with true positions; general mode's dense list, free stack, hash
 * and draws_left agree with the slots. */
static void checkSelectors(ir_table *t, uint64_t live) {
    const uint64_t cap = t->o.capacity;
    for (int k = 0; k < t->nstate; k++) {
        const ir_selector *sel = t->state_sel[k];
        if (sel != &ir_sel_fifo && sel != &ir_sel_lifo && sel != &ir_sel_minheap &&
            sel != &ir_sel_maxheap)
            continue;
        char why[160];
        if (heapCheck(t, t->state[k], live, why, sizeof(why)) != 0)
            die("table '%s': heap %d (%s) %s", t->name, k, sel->name, why);
    }
    if (!t->general) return;
    uint64_t draws = 0;
    for (uint64_t i = 0; i < t->gsize; i++) {
        uint32_t s = t->dense[i];
        if (s >= cap || t->dense_pos[s] != i || t->slot_id[s] == FUZZ_EMPTY_ID)
            die("table '%s': dense entry %llu is not a live slot", t->name, (unsigned long long)i);
        if (t->o.max_times_sampled) {
            if (t->slots[s].times >= t->o.max_times_sampled)
                die("table '%s': slot %u sampled %u times, MAX_TIMES_SAMPLED %u, still live",
                    t->name, s, t->slots[s].times, t->o.max_times_sampled);
            draws += t->o.max_times_sampled - t->slots[s].times;
        }
    }
    if (draws != t->draws_left)
        die("table '%s': draws_left %llu, items allow %llu", t->name,
            (unsigned long long)t->draws_left, (unsigned long long)draws);
    if (t->nfree + t->gsize != cap)
        die("table '%s': %llu free + %llu live slots != CAPACITY", t->name,
            (unsigned long long)t->nfree, (unsigned long long)t->gsize);
    for (uint64_t i = 0; i < t->nfree; i++)
        if (t->slot_id[t->free_slots[i]] != FUZZ_EMPTY_ID)
            die("table '%s': free slot %u holds an id", t->name, t->free_slots[i]);
    uint64_t entries = 0;
    for (uint64_t i = 0; i <= t->hmask; i++) entries += t->hkey[i] != FUZZ_EMPTY_ID;
    if (entries != live)
        die("table '%s': the id hash holds %llu ids, %llu items live", t->name,
            (unsigned long long)entries, (unsigned long long)live);
}

/* General mode: live records inside [0, tail), counted, not overlapping. */
static void checkGeneralTable(ir_table *t) {
    const uint64_t cap = t->o.capacity;
    range *r = malloc((t->gsize ? t->gsize : 1) * sizeof(*r));
    if (!r) abort();
    uint64_t live = 0, bytes = 0;
    for (uint64_t slot = 0; slot < cap; slot++) {
        uint64_t id = t->slot_id[slot];
        if (id == FUZZ_EMPTY_ID) continue;
        if (id >= t->next_id || tableSlotOf(t, id) != slot)
            die("table '%s': slot %llu holds id %llu the hash does not map to it", t->name,
                (unsigned long long)slot, (unsigned long long)id);
        if (live == t->gsize) die("table '%s': more live slots than its size", t->name);
        r[live].off = t->slots[slot].off - 16;
        r[live].len = 16 + reserveLen(t->slots[slot].len);
        r[live].id = id;
        if (t->slots[slot].off < 16 || r[live].off > t->tail || r[live].len > t->tail - r[live].off)
            die("table '%s': item %llu outside the arena's [0, tail %llu)", t->name,
                (unsigned long long)id, (unsigned long long)t->tail);
        uint64_t hid;
        memcpy(&hid, t->arena + r[live].off, 8);
        if (hid != id)
            die("table '%s': item %llu's header says %llu", t->name, (unsigned long long)id,
                (unsigned long long)hid);
        bytes += r[live].len;
        live++;
    }
    if (live != t->gsize)
        die("table '%s': %llu live slots, size %llu", t->name, (unsigned long long)live,
            (unsigned long long)t->gsize);
    if (bytes != t->bytes_used || bytes > t->o.maxbytes || t->tail > t->arena_len)
        die("table '%s': bytes_used %llu, live records take %llu (MAXBYTES %llu)", t->name,
            (unsigned long long)t->bytes_used, (unsigned long long)bytes,
            (unsigned long long)t->o.maxbytes);
    qsort(r, live, sizeof(*r), rangeCmp);
    for (uint64_t k = 1; k < live; k++)
        if (r[k - 1].off + r[k - 1].len > r[k].off)
            die("table '%s': items %llu and %llu overlap in the arena", t->name,
                (unsigned long long)r[k - 1].id, (unsigned long long)r[k].id);
    free(r);
    checkSelectors(t, live);
}

static void checkTable(ir_table *t) {
    const uint64_t cap = t->o.capacity;
    if (t->general) checkGeneralTable(t);
    if (!t->general && (t->next_id < t->oldest_id || t->next_id - t->oldest_id > cap))
        die("table '%s': live window [%llu, %llu) larger than CAPACITY %llu", t->name,
            (unsigned long long)t->oldest_id, (unsigned long long)t->next_id,
            (unsigned long long)cap);
    if (ir_sampler_capacity(t->sampler) != cap) die("table '%s': sampler capacity", t->name);
    uint64_t live = t->general ? 0 : t->next_id - t->oldest_id; /* general: checked above */
    range *r = malloc((live ? live : 1) * sizeof(*r));
    if (!r) abort();
    uint64_t bytes = 0;
    for (uint64_t k = 0; k < live; k++) {
        uint64_t id = t->oldest_id + k, slot = id % cap;
        if (t->slot_id[slot] != id)
            die("table '%s': live id %llu not in its slot %llu (holds %llu)", t->name,
                (unsigned long long)id, (unsigned long long)slot,
                (unsigned long long)t->slot_id[slot]);
        r[k].off = t->slots[slot].off;
        r[k].len = reserveLen(t->slots[slot].len);
        r[k].id = id;
        if (r[k].off > t->o.maxbytes || r[k].len > t->o.maxbytes - r[k].off)
            die("table '%s': item %llu at [%llu, +%llu) outside MAXBYTES %llu", t->name,
                (unsigned long long)id, (unsigned long long)r[k].off, (unsigned long long)r[k].len,
                (unsigned long long)t->o.maxbytes);
        bytes += r[k].len;
    }
    if (!t->general && bytes != t->bytes_used)
        die("table '%s': bytes_used %llu, live items take %llu", t->name,
            (unsigned long long)t->bytes_used, (unsigned long long)bytes);
    qsort(r, live, sizeof(*r), rangeCmp);
    for (uint64_t k = 1; k < live; k++)
        if (r[k - 1].off + r[k - 1].len > r[k].off)
            die("table '%s': items %llu and %llu overlap in the arena", t->name,
                (unsigned long long)r[k - 1].id, (unsigned long long)r[k].id);
    free(r);
    if (!t->general) checkSelectors(t, live);

    /* Priorities: a dead slot must never be drawn; a live one must be drawable
     * whenever the transform cannot produce 0 ((0 + eps)^alpha > 0). */
    double floor = t->o.alpha == 0.0 ? 1.0 : pow(t->o.epsilon, t->o.alpha);
    double minp = INFINITY, maxp = ir_sampler_max(t->sampler);
    for (uint64_t slot = 0; slot < cap; slot++) {
        double p = ir_sampler_get(t->sampler, slot);
        uint64_t id = t->slot_id[slot];
        int is_live = id != FUZZ_EMPTY_ID && tableSlotOf(t, id) == slot;
        if (!is_live && id != FUZZ_EMPTY_ID)
            die("table '%s': slot %llu holds id %llu outside the live window [%llu, %llu)", t->name,
                (unsigned long long)slot, (unsigned long long)id, (unsigned long long)t->oldest_id,
                (unsigned long long)t->next_id);
        if (!(p >= 0.0) || !isfinite(p))
            die("table '%s': slot %llu has priority %g", t->name, (unsigned long long)slot, p);
        CHECK_INV("dead-slot-priority", is_live || p == 0.0,
                  "[dead-slot-priority] table '%s': slot %llu holds no live item but has "
                  "priority %g (it can be sampled)",
                  t->name, (unsigned long long)slot, p);
        CHECK_INV("live-slot-zero-priority", !is_live || floor == 0.0 || p > 0.0,
                  "[live-slot-zero-priority] table '%s': live id %llu in slot %llu has priority "
                  "0 although (0 + epsilon %g)^alpha %g > 0: its priority was dropped",
                  t->name, (unsigned long long)id, (unsigned long long)slot, t->o.epsilon,
                  t->o.alpha);
        if (p > 0.0 && p < minp) minp = p;
        if (p > maxp)
            die("table '%s': slot %llu priority %g above max %g", t->name, (unsigned long long)slot,
                p, maxp);
    }
    CHECK_INV("min-tree", ir_sampler_min(t->sampler) == minp,
              "[min-tree] table '%s': min tree says %g, leaves say %g", t->name,
              ir_sampler_min(t->sampler), minp);
    double total = ir_sampler_total(t->sampler);
    double diff = ir_sampler_rebuild(t->sampler);
    if (diff != 0.0)
        die("table '%s': sum tree drifted: total %.17g, rebuilt differs by %g", t->name, total,
            diff);
}

/* A hash's or set's dict (db_internal.h's dbColl); returns the bytes it counts. */
static uint64_t checkColl(const dbEntry *owner) {
    const dbColl *co = owner->v.coll;
    uint64_t bytes = sizeof(dbColl) + DB_MALLOC_OVERHEAD;
    size_t n = 0;
    for (int t = 0; t <= 1; t++) {
        const dictht *ht = &co->d.ht[t];
        if (ht->size & (ht->size - 1)) die("field dict table %d size %zu", t, ht->size);
        size_t used = 0;
        for (size_t i = 0; i < ht->size; i++) {
            for (const dbEntry *f = ht->table[i]; f; f = f->next) {
                used++;
                if (f->hash != dictHashKey(&co->d, f->key, f->klen)) die("stale field hash");
                if ((f->hash & (ht->size - 1)) != i) die("field in the wrong bucket");
                if (f->key[f->klen] != '\0') die("field not NUL-terminated");
                bytes += dbEntryBytes(f->klen, f->ecap);
                if (owner->type == OBJ_SET) {
                    if (f->v.str.ptr || f->ecap) die("set member with a value");
                    continue;
                }
                if (owner->type == OBJ_ZSET) { /* the member owns its skiplist node */
                    if (!f->v.str.ptr || f->ecap || (f->flags & DBE_EMBEDDED))
                        die("sorted set member without its node");
                    bytes += dbBufBytes(f->v.str.cap);
                    continue;
                }
                if (!f->v.str.ptr || f->v.str.len >= f->v.str.cap ||
                    f->v.str.ptr[f->v.str.len] != '\0')
                    die("hash value len %zu, cap %zu", f->v.str.len, f->v.str.cap);
                if (f->flags & DBE_EMBEDDED) {
                    if (f->v.str.ptr != f->key + f->klen + 1 || f->v.str.cap != f->ecap)
                        die("embedded hash value in the wrong place");
                } else {
                    bytes += dbBufBytes(f->v.str.cap);
                }
            }
        }
        if (used != ht->used) die("field dict table %d: used %zu, chained %zu", t, ht->used, used);
        n += used;
    }
    if (n == 0) die("empty %s kept in the keyspace", owner->type == OBJ_SET ? "set" : "hash");
    if (owner->type == OBJ_ZSET) {
        const char *err = zsetVerify(co);
        if (err) die("sorted set: %s", err);
    }
    /* the compact order (a listpack hash's insertion order, an intset's values) */
    if (co->ord) {
        bytes += dbBufBytes(co->ordcap * sizeof(dbEntry *));
        if (co->big || co->order == COLL_ORD_NONE) die("an order kept for an unordered collection");
    }
    if (collOrdered(co)) {
        if (co->nord != n || co->nord > co->ordcap)
            die("order holds %u of %zu entries", co->nord, n);
        for (uint32_t i = 0; i < co->nord; i++) {
            const dbEntry *f = co->ord[i];
            if (f->vidx != i || collFind((dbColl *)co, f->key, f->klen) != f)
                die("order entry %u is not the dict's", i);
            long long a, b;
            if (co->order == COLL_ORD_INT && i > 0 &&
                (!string2ll(co->ord[i - 1]->key, co->ord[i - 1]->klen, &a) ||
                 !string2ll(f->key, f->klen, &b) || a >= b))
                die("intset order not ascending at %u", i);
        }
    }
    return bytes;
}

static void checkDb(ir_db *db) {
    size_t n = 0, nttl = 0;
    uint64_t bytes = 0;
    for (int t = 0; t <= 1; t++) {
        const dictht *ht = &db->d.ht[t];
        if (ht->size & (ht->size - 1)) die("dict table %d size %zu", t, ht->size);
        size_t used = 0;
        for (size_t i = 0; i < ht->size; i++) {
            for (dbEntry *e = ht->table[i]; e; e = e->next) {
                used++;
                if (e->hash != dictHashKey(&db->d, e->key, e->klen)) die("stale key hash");
                if ((e->hash & (ht->size - 1)) != i) die("key in the wrong bucket");
                if (e->key[e->klen] != '\0') die("key not NUL-terminated");
                bytes += dbEntryBytes(e->klen, e->ecap);
                if (e->expire != -1) {
                    nttl++;
                    if (e->vidx >= db->nvol || db->vol[e->vidx] != e) die("TTL index out of sync");
                }
                if (e->type == OBJ_STRING) {
                    if (!e->v.str.ptr) die("string without a buffer");
                    if (e->v.str.len >= e->v.str.cap)
                        die("string len %zu, cap %zu", e->v.str.len, e->v.str.cap);
                    if (e->v.str.ptr[e->v.str.len] != '\0') die("string not NUL-terminated");
                    if (e->flags & DBE_EMBEDDED) {
                        if (e->v.str.ptr != e->key + e->klen + 1 || e->v.str.cap != e->ecap)
                            die("embedded string in the wrong place");
                    } else {
                        bytes += dbBufBytes(e->v.str.cap);
                    }
                } else if (e->type == OBJ_LIST) {
                    const dbList *l = &e->v.list;
                    if (l->len == 0) die("empty list kept in the keyspace");
                    if (l->len > l->cap || (l->cap & (l->cap - 1))) die("list len/cap");
                    bytes += l->cap * sizeof(lelem);
                    for (size_t k = 0; k < l->len; k++) {
                        const lelem *x = listAt(l, k);
                        if (x->p[x->len] != '\0') die("list element not NUL-terminated");
                        bytes += dbBufBytes(x->len + 1);
                    }
                } else if (e->type == OBJ_HASH || e->type == OBJ_SET || e->type == OBJ_ZSET) {
                    bytes += checkColl(e);
                } else if (e->type == OBJ_STREAM) {
                    uint64_t sb = 0;
                    const char *err = streamVerify(e->v.stream, &sb);
                    if (err) die("stream: %s", err);
                    bytes += sb;
                } else {
                    die("unknown value type %d", e->type);
                }
            }
        }
        if (used != ht->used) die("dict table %d: used %zu, chained %zu", t, ht->used, used);
        n += used;
    }
    if (nttl != db->nvol) die("TTL index holds %zu keys, %zu have a TTL", db->nvol, nttl);
    CHECK_INV("db-bytes", bytes == db->bytes,
              "[db-bytes] keyspace byte accounting: counter %llu, recomputed %llu",
              (unsigned long long)db->bytes, (unsigned long long)bytes);
    (void)n;
}

/* ---- one input ------------------------------------------------------------ */

static void configureFor(uint8_t opt) {
    static const unsigned fanouts[8] = {0, 2, 4, 8, 16, 32, 0, 0};
    srv->cfg = base_cfg;
    srv->cfg.fanout = fanouts[opt & 7];
    if (opt & 0x08) setenv("IR_SUMTREE_NO_AVX2", "1", 1);
    else unsetenv("IR_SUMTREE_NO_AVX2");
    if (opt & 0x10) srv->cfg.requirepass = "foobared";
    if (opt & 0x20) srv->cfg.maxmemory = 1;
    if (opt & 0x40) srv->cfg.client_output_buffer_limit = 16 * 1024;
    srv->cfg.seed = (opt & 0x80) ? 2 : 1;
    aclReset(srv); /* ACL SETUSER/DELUSER of the last input gone; requirepass as set here */
    slots_left = FUZZ_SLOT_BUDGET;
    samples_left = FUZZ_SAMPLE_BUDGET;
}

static int cmpSize(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Let a connection write what it has, as long as the server asks to. */
static void drain(ir_conn *conn, client *cl, int rounds) {
    for (int i = 0; i < rounds && cl && !conn->closed && conn->want_w; i++) irs_writable(cl);
}

/* Empty the keyspace and the tables (FLUSHALL), forget SHUTDOWN and CONFIG SET. */
static void resetServer(uint8_t opt) {
    snapshotShutdown(srv); /* kill and reap a BGSAVE child */
    aofShutdown(srv);      /* CONFIG SET appendonly yes: its rewrite child, its file */
    srv->cfg.appendonly = 0;
    if (saved) {
        /* What SAVE wrote must load back into a consistent keyspace. */
        saved = 0;
        dbEmpty(srv->db);
        tablesFlush(srv->tables);
        char msg[512];
        int n = snapshotRestore(srv, snapdir, msg, sizeof(msg));
        if (n < 0) die("SAVE wrote a snapshot that does not load: %s", msg);
        for (int i = 0; i < dbsCount(srv); i++) checkDb(dbsAt(srv, i));
        for (ir_table *t = srv->tables->head; t; t = t->next) checkTable(t);
    }
    emptySnapdir();
    dbActiveExpireEnabled = 1; /* DEBUG SET-ACTIVE-EXPIRE 0 */
    notifyKeyspaceFlags = 0;   /* CONFIG SET notify-keyspace-events */
    /* A new server: what one run leaves must not reach the next, and emptying
     * the keyspace is not all of it (FUNCTION LOAD's libraries, SCRIPT LOAD's
     * cache, the SLOWLOG, the ACL, counters). make test's fuzzing found an
     * input that DELETEd a library an earlier input had loaded, so its split
     * run DUMPed another set: corpus/bug_state_left_by_earlier_input_1 and _2,
     * run in that order by tests/test_fuzz_corpus.py. */
    server_free(srv);
    srv = server_new(&base_cfg);
    if (!srv) abort();
    snapshotInit(srv);
    g_server = srv;
    tp.srv = srv;
    configureFor(opt);
}

typedef struct session {
    uint64_t hash[2];
    int closed[2];
} session;

/* One connection (or two) fed the payload cut at cuts[]: chunk i goes to
 * client i % nconn. Checks the reply streams, hangs up, checks the invariants. */
static session runSession(const char *payload, const size_t *cuts, int ncuts, int nconn,
                          size_t limit, int tick, const char *peer2) {
    ir_conn conns[2] = {{.peer = "127.0.0.1:1", .accept_limit = limit},
                        {.peer = peer2, .accept_limit = limit}};
    client *cls[2] = {NULL, NULL};
    int accepted[2] = {0, 0};

    for (int i = 0; i + 1 < ncuts; i++) {
        size_t off = cuts[i], n = cuts[i + 1] - cuts[i];
        int k = i % nconn;
        if (!accepted[k]) { /* the second client connects when its first chunk comes */
            accepted[k] = 1;
            cls[k] = irs_accept(srv, &tp, &conns[k]);
            if (!cls[k]) conns[k].closed = 1; /* refused: the transport closes it */
        }
        if (n && cls[k] && !conns[k].closed) {
            /* each chunk in a buffer of its own size, so ASan sees over-reads */
            char *chunk = malloc(n);
            if (!chunk) abort();
            memcpy(chunk, payload + off, n);
            irs_data(cls[k], chunk, n);
            free(chunk);
        }
        for (int j = 0; j < nconn; j++)
            if (conns[j].closed) cls[j] = NULL;
        if (tick) {
            server_tick(srv);
            snapshotTick(srv); /* the server loop does both (daemon/daemon.c) */
            for (int j = 0; j < nconn; j++)
                if (conns[j].closed) cls[j] = NULL;
        }
        if (limit)
            for (int j = 0; j < nconn; j++) drain(&conns[j], cls[j], 2);
    }

    /* The peer reads everything now; then every reply must be complete. */
    for (int k = 0; k < nconn; k++) {
        if (!accepted[k]) continue;
        conns[k].accept_limit = 0;
        drain(&conns[k], cls[k], 4);
        if (conns[k].closed) continue;
        if (cls[k]->pending_bytes)
            die("client %d still has %zu bytes pending after draining", k, cls[k]->pending_bytes);
        const respcheck *rc = &conns[k].rc;
        int rdb_end = rc->state == RC_BULK_CR && rc->depth == 0 && rc->headlen == 5 &&
                      !memcmp(rc->head, "REDIS", 5); /* SYNC's image: no CRLF after it */
        if ((rc->state != RC_TYPE && !rdb_end) || rc->depth != 0)
            die("client %d: the reply stream ends inside a reply (state %d, depth %d)", k,
                conns[k].rc.state, conns[k].rc.depth);
    }
    for (int k = 0; k < nconn; k++) {
        if (!cls[k] || conns[k].closed) continue;
        conns[k].hung_up = 1;
        irs_closed(cls[k]); /* the peer hangs up: the server frees the client */
    }
    if (srv->nclients != 0 || srv->clients)
        die("%llu clients left after hang-up", (unsigned long long)srv->nclients);

    for (int i = 0; i < dbsCount(srv); i++) checkDb(dbsAt(srv, i));
    for (ir_table *t = srv->tables->head; t; t = t->next) checkTable(t);

    session r = {{conns[0].hash, conns[1].hash}, {conns[0].closed, conns[1].closed}};
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t limits[4] = {1, 13, 512, 8192};
    if (size < 2) return 0;
    uint8_t ctl = data[0], opt = data[1];
    int nsplit = ctl & 7;
    size_t hdr = 2 + 2 * (size_t)nsplit;
    if (size < hdr) return 0;
    const char *payload = (const char *)data + hdr;
    size_t len = size - hdr;

    size_t cuts[FUZZ_MAX_SPLITS + 2];
    int ncuts = 0;
    cuts[ncuts++] = 0;
    for (int i = 0; i < nsplit; i++) {
        size_t v = (size_t)data[2 + 2 * i] | (size_t)data[3 + 2 * i] << 8;
        cuts[ncuts++] = len ? v % (len + 1) : 0;
    }
    cuts[ncuts++] = len;
    qsort(cuts, (size_t)ncuts, sizeof(cuts[0]), cmpSize);

    int partial = (ctl & 0x08) != 0, tick = (ctl & 0x10) != 0, two = (ctl & 0x20) != 0;
    size_t limit = partial ? limits[ctl >> 6] : 0;

    /* Split-equivalence: one client fed the whole stream at once must get the
     * same bytes, and the same close, as when it is fed in the chunks below
     * (resp.c's promise). Only for inputs whose answers cannot depend on the
     * clock, client ids or flush timing, and that stay under the 64 KiB line
     * limit (beyond it, Redis's too-big-inline check depends on read sizes). */
    int differential = !two && !tick && !(opt & 0x40) && nsplit > 0 && len <= PROTO_INLINE_MAX_SIZE;
    session whole = {{0, 0}, {0, 0}};
    if (differential) {
        size_t all[2] = {0, len};
        configureFor(opt);
        nondeterministic = 0;
        whole = runSession(payload, all, 2, 1, 0, 0, NULL);
        if (srv->output_limit_disconnects) nondeterministic = 1; /* see below */
        resetServer(opt);
        differential = !nondeterministic;
    } else {
        configureFor(opt);
    }

    nondeterministic = 0;
    /* Without partial writes, bits 6-7 pick the second client's address:
     * protected mode lets loopback and the client subnet in, not others. */
    static const char *const peers2[4] = {"[::1]:2", "[::ffff:127.0.0.2]:2", "10.0.0.2:2",
                                          "10.0.0.9:2"};
    const char *peer2 = partial ? peers2[0] : peers2[ctl >> 6];
    session split = runSession(payload, cuts, ncuts, two ? 2 : 1, limit, tick, peer2);
    /* an output limit closed a client (an unauthenticated one holds at most 1 KB its
     * socket has not taken): where depends on how much each write took */
    if (srv->output_limit_disconnects) nondeterministic = 1;
    if (differential && !nondeterministic &&
        (whole.hash[0] != split.hash[0] || whole.closed[0] != split.closed[0]))
        die("split-equivalence: the stream fed whole and fed in %d chunks got different replies "
            "(hash %016llx vs %016llx) or close (%d vs %d)",
            ncuts - 1, (unsigned long long)whole.hash[0], (unsigned long long)split.hash[0],
            whole.closed[0], split.closed[0]);

    resetServer(opt);
    srv->cfg = base_cfg;
    return 0;
}
