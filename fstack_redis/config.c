/* config.c - the one table of configuration parameters (see config.h).
 *
 * A row says everything about a parameter: Redis's name and alias, type,
 * default (as CONFIG SET takes it), bounds, flags, where the value lives and
 * a one-line doc. ir_config_init, CONFIG GET, CONFIG SET and pyctl (through
 * ir_config_params_json) all read it; nothing else lists parameters.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "acl.h"
#include "aof.h"
#include "commands.h"
#include "config.h"
#include "db.h"
#include "db_internal.h"
#include "notify.h"
#include "replay.h"
#include "replication.h"
#include "script.h"
#include "slowlog.h"
#include "snapshot.h"

enum { CT_BOOL, CT_INT, CT_MEM, CT_ENUM, CT_STRING, CT_DOUBLE, CT_SPECIAL };
static const char *const typeNames[] = {"bool",   "int",    "memory", "enum",
                                        "string", "double", "special"};

#define CF_IMMUTABLE 1 /* set at start only: CONFIG SET answers "can't set immutable config" */
#define CF_SENSITIVE \
    2 /* a credential: SLOWLOG and MONITOR redact its value (requirepass's get hook also hides it) */
#define CF_SAME_ONLY 4  /* mutable in Redis, fixed here: only the current value is accepted */
#define CF_HIDDEN 8     /* inreplay's own start-up setting: not matched by a glob, only by name */
#define CF_NOOP 16      /* accepted and stored for Redis's clients; no behaviour here */
#define CF_PROTECTED 32 /* CONFIG SET only as enable-protected-configs allows ("dir") */
#define CF_OCTAL 64     /* an int written in octal (unixsocketperm), as Redis's OCTAL_CONFIG */

/* the C type of an ir_config field */
enum { FT_NONE, FT_INT, FT_UINT, FT_U64, FT_DOUBLE, FT_STR };

/* A checked value, applied only once every pair of a CONFIG SET is valid. */
typedef struct cfgval {
    long long i; /* bool, int, memory (bit pattern of an unsigned value), enum index */
    double d;
    const char *s; /* string: the argument (NUL-terminated by the parser) */
    size_t slen;
    unsigned long long obl[3][3]; /* client-output-buffer-limit: normal, slave, pubsub */
    int obl_set[3];
} cfgval;

typedef struct cfgparam {
    const char *name, *alias;
    int type, flags;
    long long min;
    unsigned long long max;
    const char *def;    /* default, as CONFIG SET takes it */
    const char *values; /* CT_ENUM: comma-separated, Redis's order */
    const char *field;  /* the ir_config member it initialises, or NULL */
    size_t off;
    int ft;
    long long *var; /* or a server variable (CONFIG SET changes it) */
    const char *doc;
    void (*get)(const ir_server *s, char *buf, size_t len);
    int (*check)(const ir_server *s, const ir_arg *v, cfgval *out, char *err, size_t errlen);
    void (*apply)(ir_server *s, const cfgval *v);
} cfgparam;

/* ---- special parameters ------------------------------------------------- */

/* client-output-buffer-limit's replica class: hard, soft, soft seconds
 * (replication.c applies it to the stream). */
unsigned long long obl_slave[3];

static void portGet(const ir_server *s, char *buf, size_t len) {
    snprintf(buf, len, "%d", s->tp ? s->tp->bound_port : s->cfg.port);
}

static void databasesGet(const ir_server *s, char *buf, size_t len) {
    snprintf(buf, len, "%d", dbsCount(s));
}

static void emptyGet(const ir_server *s, char *buf, size_t len) {
    (void)s;
    if (len) buf[0] = '\0';
}

static void oblGet(const ir_server *s, char *buf, size_t len) {
    snprintf(buf, len, "normal %llu 0 0 slave %llu %llu %llu pubsub %llu %llu %llu",
             (unsigned long long)s->cfg.client_output_buffer_limit, obl_slave[0], obl_slave[1],
             obl_slave[2], (unsigned long long)s->pubsub_obl_hard,
             (unsigned long long)s->pubsub_obl_soft, (unsigned long long)s->pubsub_obl_secs);
}

static int oblCheck(const ir_server *s, const ir_arg *v, cfgval *n, char *err, size_t errlen) {
    (void)s;
    char buf[512];
    if (v->len >= sizeof(buf)) {
        snprintf(err, errlen, "Wrong number of arguments in buffer limit configuration.");
        return -1;
    }
    memcpy(buf, v->ptr, v->len);
    buf[v->len] = '\0';
    char *w[64], *save;
    int nw = 0;
    for (char *t = strtok_r(buf, " ", &save); t && nw < 64; t = strtok_r(NULL, " ", &save))
        w[nw++] = t;
    if (nw % 4 != 0) {
        snprintf(err, errlen, "Wrong number of arguments in buffer limit configuration.");
        return -1;
    }
    for (int i = 0; i < nw; i += 4) {
        int cls;
        if (!strcasecmp(w[i], "normal")) cls = 0;
        else if (!strcasecmp(w[i], "slave") || !strcasecmp(w[i], "replica")) cls = 1;
        else if (!strcasecmp(w[i], "pubsub")) cls = 2;
        else {
            snprintf(err, errlen, "Invalid client class specified in buffer limit configuration.");
            return -1;
        }
        unsigned long long hard, soft;
        long long secs;
        if (!ir_parse_memory(w[i + 1], strlen(w[i + 1]), &hard) ||
            !ir_parse_memory(w[i + 2], strlen(w[i + 2]), &soft) ||
            !string2ll(w[i + 3], strlen(w[i + 3]), &secs) || secs < 0) {
            snprintf(err, errlen,
                     "Error in hard, soft or soft_seconds setting in buffer limit configuration.");
            return -1;
        }
        if (cls == 0 && soft) {
            snprintf(err, errlen, "a soft limit for the normal class is not supported");
            return -1;
        }
        n->obl[cls][0] = hard;
        n->obl[cls][1] = soft;
        n->obl[cls][2] = (unsigned long long)secs;
        n->obl_set[cls] = 1;
    }
    return 0;
}

static void oblApply(ir_server *s, const cfgval *n) {
    if (n->obl_set[0]) s->cfg.client_output_buffer_limit = n->obl[0][0];
    if (n->obl_set[1]) memcpy(obl_slave, n->obl[1], sizeof(obl_slave));
    if (n->obl_set[2]) {
        s->pubsub_obl_hard = n->obl[2][0];
        s->pubsub_obl_soft = n->obl[2][1];
        s->pubsub_obl_secs = n->obl[2][2];
    }
}

/* save: "" or pairs of "seconds changes", checked as Redis checks them. Each
 * pair is a rule of the automatic BGSAVE (snapshotTick runs it): a background
 * save starts when at least `changes` write commands ran and `seconds` passed
 * since the last successful save. */
#define SAVE_PARAMS_MAX 32
static ir_saveparam saveparams[SAVE_PARAMS_MAX];
static int nsaveparams;

const ir_saveparam *configSaveParams(int *n) {
    *n = nsaveparams;
    return saveparams;
}

/* Parse "" or "s c s c ..." into out (NULL: only check); the pair count, or -1. */
static int parseSave(const char *p, size_t len, ir_saveparam *out) {
    char buf[512];
    if (len >= sizeof(buf)) return -1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    int words = 0;
    long long pair[2];
    char *save;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        long long x;
        if (!string2ll(t, strlen(t), &x) || x < 0 || x > INT_MAX) return -1;
        pair[words % 2] = x;
        if (words % 2 && words / 2 >= SAVE_PARAMS_MAX) return -1;
        if (words % 2 && out) {
            out[words / 2].seconds = pair[0];
            out[words / 2].changes = pair[1];
        }
        words++;
    }
    return words % 2 ? -1 : words / 2;
}

static int saveCheck(const ir_server *s, const ir_arg *v, cfgval *n, char *err, size_t errlen) {
    (void)s;
    if (parseSave(v->ptr, v->len, NULL) < 0) {
        snprintf(err, errlen, "Invalid save parameters");
        return -1;
    }
    n->s = v->ptr;
    n->slen = v->len;
    return 0;
}

static void saveApply(ir_server *s, const cfgval *n) {
    (void)s;
    nsaveparams = parseSave(n->s, n->slen, saveparams);
}

static void saveGet(const ir_server *s, char *buf, size_t len) {
    (void)s;
    size_t off = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < nsaveparams && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld %lld", i ? " " : "",
                                saveparams[i].seconds, saveparams[i].changes);
}

/* appendonly: CONFIG SET yes starts the AOF with a background rewrite, no stops it. */
static int appendonlyCheck(const ir_server *s, const ir_arg *v, cfgval *n, char *err,
                           size_t errlen) {
    (void)v;
    if (n->i && !s->cfg.appendonly && aofCanEnable(s, err, errlen) != 0) {
        serverLog("CONFIG SET appendonly yes: %s", err);
        snprintf(err, errlen, "Unable to turn on AOF. Check server logs.");
        return -1;
    }
    return 0;
}

static void appendonlyApply(ir_server *s, const cfgval *v) {
    char err[512];
    if (aofSetEnabled(s, (int)v->i, err, sizeof(err)) != 0) {
        serverLog("CONFIG SET appendonly yes: %s", err);
        return;
    }
    s->cfg.appendonly = (int)v->i;
}

static int policyCheck(const ir_server *s, const ir_arg *v, cfgval *n, char *err, size_t errlen) {
    (void)s, (void)v;
    if (n->i != 7) { /* the index of noeviction */
        snprintf(err, errlen, "inreplay never evicts keys: only noeviction is supported");
        return -1;
    }
    return 0;
}

/* notify-keyspace-events: Redis's event classes (notify.c), shown in its canonical order. */
static int notifyCheck(const ir_server *s, const ir_arg *v, cfgval *n, char *err, size_t errlen) {
    (void)s;
    n->i = notifyFlagsFromString(v->ptr, v->len);
    if (n->i < 0) {
        snprintf(err, errlen, "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.");
        return -1;
    }
    return 0;
}

static void notifyGet(const ir_server *s, char *buf, size_t len) {
    (void)s;
    notifyFlagsToString(notifyKeyspaceFlags, buf, len);
}

static int dirCheck(const ir_server *s, const ir_arg *v, cfgval *n, char *err, size_t errlen) {
    (void)n;
    char path[4096];
    if (v->len >= sizeof(path) || memchr(v->ptr, '\0', v->len)) {
        snprintf(err, errlen, "No such file or directory");
        return -1;
    }
    memcpy(path, v->ptr, v->len);
    path[v->len] = '\0';
    char full[8192];
    if (path[0] && path[0] != '/' && s->cfg.dir) /* relative to the snapshot directory */
        snprintf(full, sizeof(full), "%s/%s", s->cfg.dir, path);
    else snprintf(full, sizeof(full), "%s", path);
    return snapshotCheckDir(full, err, errlen);
}

static void dirApply(ir_server *s, const cfgval *v) {
    char why[256]; /* checked by dirCheck: this fails only if it vanished since */
    if (snapshotSetDir(s, v->s, why, sizeof(why)) == 0)
        serverLog("Snapshot directory is now %s", s->cfg.dir);
    else serverLog("CONFIG SET dir %s: %s", v->s, why);
}

static void requirepassApply(ir_server *s, const cfgval *v) {
    char *p = malloc(v->slen + 1);
    if (!p) return;
    memcpy(p, v->s, v->slen);
    p[v->slen] = '\0';
    free(s->requirepass);
    s->requirepass = p;
    s->requirepass_len = v->slen;
    aclSetDefaultPassword(s, p, v->slen); /* as Redis 7.0: the default user's password */
}

static void backlogApply(ir_server *s, const cfgval *v);

/* maxmemory-clients: bytes or a percentage of maxmemory (stored negative), as Redis. */
static int clientsMemCheck(const ir_server *s, const ir_arg *v, cfgval *n, char *err,
                           size_t errlen) {
    (void)s;
    long long pct;
    unsigned long long bytes = 0;
    if (v->len && v->ptr[v->len - 1] == '%') {
        if (!string2ll(v->ptr, v->len - 1, &pct) || pct < 0) {
            snprintf(err, errlen, "argument must be a memory or percent value");
            return -1;
        }
        if (pct > 100) {
            snprintf(err, errlen, "percentage argument must be less or equal to 100");
            return -1;
        }
        n->i = -pct;
        return 0;
    }
    if (v->len &&
        (!ir_parse_memory(v->ptr, v->len, &bytes) || bytes > (unsigned long long)LLONG_MAX)) {
        snprintf(err, errlen, "argument must be a memory or percent value");
        return -1;
    }
    n->i = (long long)bytes;
    return 0;
}

static void clientsMemGet(const ir_server *s, char *buf, size_t len);
static void clientsMemApply(ir_server *s, const cfgval *v);

/* ---- the table ---------------------------------------------------------- */

#define F(member, ft) #member, offsetof(ir_config, member), ft
#define NOF NULL, 0, FT_NONE
#define NOHOOK NULL, NULL, NULL
#define NOOP_DOC(what) "accepted and stored for Redis clients; " what
#define LMAX ((unsigned long long)LLONG_MAX)
#define IMAX ((unsigned long long)INT_MAX)

static const cfgparam params[] = {
    /* Redis's parameters that change what inreplay does */
    {"port", NULL, CT_INT, CF_SAME_ONLY, 0, 65535, "6379", NULL, F(port, FT_INT), NULL,
     "TCP port clients connect to (0 = any free port)", portGet, NULL, NULL},
    {"bind", NULL, CT_STRING, CF_SAME_ONLY, 0, 0, "127.0.0.1", NULL, F(bind, FT_STR), NULL,
     "address to listen on", NULL, NULL, NULL},
    {"unixsocket", NULL, CT_STRING, CF_IMMUTABLE, 0, 0, "", NULL, F(unixsocket, FT_STR), NULL,
     "path of a Unix domain socket to accept clients on beside the TCP port (a stale socket "
     "file there is replaced at start, removed at shutdown; on the DPDK stack the kernel's, "
     "served in the same loop); \"\" = none",
     NOHOOK},
    {"unixsocketperm", NULL, CT_INT, CF_IMMUTABLE | CF_OCTAL, 0, 0777, "0", NULL,
     F(unixsocketperm, FT_UINT), NULL,
     "mode of the unix socket file in octal, e.g. 700 (0 = as the umask leaves it)", NOHOOK},
    {"shm-socket", NULL, CT_STRING, CF_IMMUTABLE | CF_HIDDEN, 0, 0, "", NULL, F(shm_socket, FT_STR),
     NULL,
     "path of the Unix socket that sets up same-host clients' shared-memory rings (RESP "
     "without TCP; either stack; a stale file there is replaced at start, removed at "
     "shutdown); \"\" = none",
     NOHOOK},
    {"shm-socketperm", NULL, CT_INT, CF_IMMUTABLE | CF_OCTAL | CF_HIDDEN, 0, 0777, "0", NULL,
     F(shm_socketperm, FT_UINT), NULL,
     "mode of the shm socket file in octal, e.g. 700 (0 = as the umask leaves it): who may "
     "connect",
     NOHOOK},
    {"shm-ring-size", NULL, CT_MEM, CF_IMMUTABLE | CF_HIDDEN, 64 * 1024, 1024 * 1024 * 1024, "16mb",
     NULL, F(shm_ring_size, FT_U64), NULL,
     "bytes in each of a shm connection's two rings (a power of two; a reply larger than "
     "the ring is streamed through it)",
     NOHOOK},
    {"maxclients", NULL, CT_INT, 0, 1, 4294967295ULL, "10000", NULL, F(maxclients, FT_INT), NULL,
     "connections beyond this get -ERR max number of clients reached", NULL, NULL, NULL},
    {"proto-max-bulk-len", NULL, CT_MEM, 0, 1024 * 1024, LMAX, "512mb", NULL,
     F(proto_max_bulk_len, FT_U64), NULL, "largest bulk string a client may send, in bytes",
     NOHOOK},
    {"client-query-buffer-limit", NULL, CT_MEM, 0, 1024 * 1024, LMAX, "1gb", NULL,
     F(client_query_buffer_limit, FT_U64), NULL, "largest unparsed input of one client, in bytes",
     NOHOOK},
    {"tcp-backlog", NULL, CT_INT, CF_IMMUTABLE, 0, IMAX, "511", NULL, F(tcp_backlog, FT_INT), NULL,
     "listen() backlog", NOHOOK},
    {"databases", NULL, CT_INT, CF_IMMUTABLE, 1, IMAX, "16", NULL, F(databases, FT_INT), NULL,
     "numbered databases (SELECT 0..N-1); replay tables are global", databasesGet, NULL, NULL},
    {"maxmemory", NULL, CT_MEM, 0, 0, ULLONG_MAX, "0", NULL, F(maxmemory, FT_U64), NULL,
     "bytes; beyond it writes get -OOM and reads keep working (0 = no limit)", NOHOOK},
    {"maxmemory-policy", NULL, CT_ENUM, 0, 0, 0, "noeviction",
     "volatile-lru,volatile-lfu,volatile-random,volatile-ttl,allkeys-lru,allkeys-lfu,"
     "allkeys-random,noeviction",
     NOF, NULL, "what happens at maxmemory: inreplay never evicts, so only noeviction is accepted",
     NULL, policyCheck, NULL},
    {"timeout", NULL, CT_INT, 0, 0, IMAX, "0", NULL, F(timeout, FT_INT), NULL,
     "close clients idle this many seconds (0 = never)", NOHOOK},
    {"tcp-keepalive", NULL, CT_INT, 0, 0, IMAX, "300", NULL, F(tcp_keepalive, FT_INT), NULL,
     "TCP keepalive interval in seconds, so half-open connections are reclaimed (0 = off)", NOHOOK},
    {"protected-mode", NULL, CT_BOOL, CF_SAME_ONLY, 0, 0, "yes", NULL, F(protected_mode, FT_INT),
     NULL,
     "while the default user needs no password, only loopback, the Unix socket and the client "
     "subnet may connect (DPDK: only the client subnet; there is no loopback); no = anyone",
     NOHOOK},
    {"requirepass", NULL, CT_STRING, CF_SENSITIVE, 0, 0, "", NULL, F(requirepass, FT_STR), NULL,
     "password of the default user (binary-safe; never shown); none: protected mode", emptyGet,
     NULL, requirepassApply},
    {"aclfile", NULL, CT_STRING, CF_IMMUTABLE, 0, 0, "", NULL, F(aclfile, FT_STR), NULL,
     "ACL users loaded at start; ACL SAVE writes them there, ACL LOAD reads them back", NOHOOK},
    {"acllog-max-len", NULL, CT_INT, 0, 0, LMAX, "128", NULL, NOF, &aclLogMaxLen,
     "ACL LOG: entries kept (the oldest go first)", NOHOOK},
    {"enable-debug-command", NULL, CT_ENUM, CF_IMMUTABLE, 0, 0, "no", "no,yes,local",
     F(enable_debug_command, FT_STR), NULL,
     "who may run DEBUG: no one (no), every client (yes), or loopback clients of the kernel "
     "stack (local)",
     NOHOOK},
    {"enable-protected-configs", NULL, CT_ENUM, CF_IMMUTABLE, 0, 0, "no", "no,yes,local",
     F(enable_protected_configs, FT_STR), NULL,
     "who may CONFIG SET dir: no one (no), every client (yes), or loopback clients of the "
     "kernel stack (local)",
     NOHOOK},
    {"dir", NULL, CT_STRING, CF_PROTECTED, 0, 0, ".", NULL, F(dir, FT_STR), NULL,
     "where SAVE and BGSAVE write snapshots; must exist and be writable", NULL, dirCheck, dirApply},
    {"client-output-buffer-limit", NULL, CT_SPECIAL, 0, 0, 0,
     "normal 1gb 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60", NULL,
     F(client_output_buffer_limit, FT_U64), NULL,
     "reply bytes pending per class before a client is dropped (normal: hard limit only; slave: "
     "the replication stream to a replica)",
     oblGet, oblCheck, oblApply},
    {"set-max-intset-entries", NULL, CT_INT, 0, 0, LMAX, "512", NULL, NOF,
     &encodingLimits.set_max_intset_entries,
     "a set of integers reports intset up to this many members (OBJECT ENCODING)", NOHOOK},
    {"hash-max-listpack-entries", "hash-max-ziplist-entries", CT_INT, 0, 0, LMAX, "512", NULL, NOF,
     &encodingLimits.hash_max_listpack_entries,
     "a hash reports listpack up to this many fields (OBJECT ENCODING)", NOHOOK},
    {"hash-max-listpack-value", "hash-max-ziplist-value", CT_MEM, 0, 0, LMAX, "64", NULL, NOF,
     &encodingLimits.hash_max_listpack_value,
     "a hash reports listpack while fields and values are at most this long", NOHOOK},
    {"zset-max-listpack-entries", "zset-max-ziplist-entries", CT_INT, 0, 0, LMAX, "128", NULL, NOF,
     &encodingLimits.zset_max_listpack_entries,
     "a sorted set reports listpack up to this many members (OBJECT ENCODING)", NOHOOK},
    {"zset-max-listpack-value", "zset-max-ziplist-value", CT_MEM, 0, 0, LMAX, "64", NULL, NOF,
     &encodingLimits.zset_max_listpack_value,
     "a sorted set reports listpack while members are at most this long", NOHOOK},
    {"busy-reply-threshold", "lua-time-limit", CT_INT, 0, 0, LMAX, "5000", NULL, NOF,
     &scriptTimeLimitMs,
     "ms a Lua script may run before it is stopped with an error, unless it has written (no other "
     "client is served meanwhile, so there is no BUSY state); 0 = never",
     NOHOOK},
    {"notify-keyspace-events", NULL, CT_SPECIAL, 0, 0, 0, "", NULL, NOF, &notifyKeyspaceFlags,
     "keyspace notifications: classes K E g $ l s h z x m n A (e t d accepted, never sent)",
     notifyGet, notifyCheck, NULL},
    /* Redis's parameters that Redis's clients and test suite set: stored, no behaviour */
    {"save", NULL, CT_SPECIAL, 0, 0, 0, "", NULL, NOF, NULL,
     "automatic BGSAVE: pairs of \"seconds changes\" (that many write commands within that "
     "many seconds of the last save); \"\" = none",
     saveGet, saveCheck, saveApply},
    {"appendonly", NULL, CT_BOOL, 0, 0, 0, "no", NULL, F(appendonly, FT_INT), NULL,
     "the AOF: every write command is appended to it (Redis 7.0's layout: a manifest, a base "
     "and incr files in dir/appenddirname); loaded at start; replay tables are not in it "
     "(snapshots only)",
     NULL, appendonlyCheck, appendonlyApply},
    {"appendfilename", NULL, CT_STRING, CF_IMMUTABLE, 0, 0, "appendonly.aof", NULL,
     F(appendfilename, FT_STR), NULL, "name prefix of the AOF's files and manifest", NOHOOK},
    {"appenddirname", NULL, CT_STRING, CF_IMMUTABLE, 0, 0, "appendonlydir", NULL,
     F(appenddirname, FT_STR), NULL, "directory of the AOF's files, under dir", NOHOOK},
    {"appendfsync", NULL, CT_ENUM, 0, 0, 0, "everysec", "everysec,always,no", NOF, &aof_fsync,
     "fsync of the AOF: always (before the reply), everysec (once a second), no (the OS decides)",
     NOHOOK},
    {"aof-use-rdb-preamble", NULL, CT_BOOL, 0, 0, 0, "yes", NULL, NOF, &aof_use_rdb_preamble,
     "an AOF rewrite writes its base as an RDB image (no: as commands, a .base.aof)", NOHOOK},
    {"aof-load-truncated", NULL, CT_BOOL, 0, 0, 0, "yes", NULL, NOF, &aof_load_truncated,
     "an AOF whose last file ends in a partial command is loaded and cut there (no: refused)",
     NOHOOK},
    {"aof-timestamp-enabled", NULL, CT_BOOL, CF_NOOP, 0, 0, "no", NULL, NOF, &aof_timestamp_enabled,
     NOOP_DOC("no timestamp annotations are written (they are read)"), NOHOOK},
    {"auto-aof-rewrite-percentage", NULL, CT_INT, 0, 0, IMAX, "100", NULL, NOF, &aof_rewrite_perc,
     "rewrite the AOF when it grew this many percent over its base (0 = never)", NOHOOK},
    {"auto-aof-rewrite-min-size", NULL, CT_MEM, 0, 0, LMAX, "64mb", NULL, NOF,
     &aof_rewrite_min_size, "no automatic AOF rewrite below this size", NOHOOK},
    {"list-max-listpack-size", "list-max-ziplist-size", CT_INT, CF_NOOP, INT_MIN, IMAX, "-2", NULL,
     NOF, NULL, NOOP_DOC("lists report quicklist or listpack by inreplay's own rule"), NOHOOK},
    {"list-compress-depth", NULL, CT_INT, CF_NOOP, 0, IMAX, "0", NULL, NOF, NULL,
     NOOP_DOC("lists are never compressed"), NOHOOK},
    {"stream-node-max-bytes", NULL, CT_MEM, 0, 0, LMAX, "4096", NULL, NOF,
     &encodingLimits.stream_node_max_bytes,
     "a stream node (a listpack in Redis) takes entries up to about this many bytes; `~` trims "
     "whole nodes",
     NOHOOK},
    {"stream-node-max-entries", NULL, CT_INT, 0, 0, LMAX, "100", NULL, NOF,
     &encodingLimits.stream_node_max_entries,
     "a stream node takes up to this many entries (deleted ones included); `~` trims whole nodes",
     NOHOOK},
    {"hll-sparse-max-bytes", NULL, CT_MEM, 0, 0, LMAX, "3000", NULL, NOF,
     &encodingLimits.hll_sparse_max_bytes,
     "a HyperLogLog's sparse form (header included) goes dense beyond this many bytes", NOHOOK},
    {"lazyfree-lazy-eviction", NULL, CT_BOOL, CF_NOOP, 0, 0, "no", NULL, NOF, NULL,
     NOOP_DOC("nothing is evicted"), NOHOOK},
    {"lazyfree-lazy-expire", NULL, CT_BOOL, CF_NOOP, 0, 0, "no", NULL, NOF, &repl_lazy_expire,
     NOOP_DOC("expired keys are freed at once; replicas get UNLINK instead of DEL"), NOHOOK},
    {"lazyfree-lazy-server-del", NULL, CT_BOOL, CF_NOOP, 0, 0, "no", NULL, NOF,
     &repl_lazy_server_del, NOOP_DOC("overwritten values are freed at once"), NOHOOK},
    {"lazyfree-lazy-user-del", NULL, CT_BOOL, CF_NOOP, 0, 0, "no", NULL, NOF, NULL,
     NOOP_DOC("DEL and UNLINK free at once"), NOHOOK},
    {"lazyfree-lazy-user-flush", NULL, CT_BOOL, CF_NOOP, 0, 0, "no", NULL, NOF, NULL,
     NOOP_DOC("FLUSHDB and FLUSHALL free at once"), NOHOOK},
    {"activerehashing", NULL, CT_BOOL, CF_NOOP, 0, 0, "yes", NULL, NOF, NULL,
     NOOP_DOC("dicts rehash incrementally regardless"), NOHOOK},
    {"latency-tracking", NULL, CT_BOOL, 0, 0, 0, "yes", NULL, NOF, &latencyTracking,
     "LATENCY HISTOGRAM: record each command's duration by power of two", NOHOOK},
    {"repl-backlog-size", NULL, CT_MEM, CF_NOOP, 1, LMAX, "1mb", NULL, NOF, NULL,
     NOOP_DOC("there is no replication; at least 16384 bytes, as in Redis"), NULL, NULL,
     backlogApply},
    {"repl-ping-replica-period", "repl-ping-slave-period", CT_INT, 0, 1, IMAX, "10", NULL, NOF,
     &repl_ping_period, "seconds between the PINGs sent to replicas", NOHOOK},
    {"replica-serve-stale-data", "slave-serve-stale-data", CT_BOOL, CF_NOOP, 0, 0, "yes", NULL, NOF,
     NULL, NOOP_DOC("there is no replication"), NOHOOK},
    {"replica-read-only", "slave-read-only", CT_BOOL, CF_NOOP, 0, 0, "yes", NULL, NOF, NULL,
     NOOP_DOC("there is no replication"), NOHOOK},
    {"min-replicas-to-write", "min-slaves-to-write", CT_INT, CF_NOOP, 0, IMAX, "0", NULL, NOF, NULL,
     NOOP_DOC("there is no replication"), NOHOOK},
    {"slowlog-log-slower-than", NULL, CT_INT, 0, -1, LMAX, "10000", NULL, NOF, &slowlogSlowerThan,
     "SLOWLOG: log commands that take at least this many microseconds; 0 = every command, "
     "-1 = none",
     NOHOOK},
    {"slowlog-max-len", NULL, CT_INT, 0, 0, LMAX, "128", NULL, NOF, &slowlogMaxLen,
     "SLOWLOG: entries kept (the oldest go first)", NOHOOK},
    {"latency-monitor-threshold", NULL, CT_INT, 0, 0, LMAX, "0", NULL, NOF,
     &latencyMonitorThreshold,
     "LATENCY: a command taking at least this many milliseconds is a sample of the command "
     "(fast-command) event; 0 = off",
     NOHOOK},
    {"loglevel", NULL, CT_ENUM, CF_NOOP, 0, 0, "notice", "debug,verbose,notice,warning", NOF, NULL,
     NOOP_DOC("the log has one level (pyctl start --verbose adds connections)"), NOHOOK},
    {"sanitize-dump-payload", NULL, CT_ENUM, CF_NOOP, 0, 0, "no", "no,yes,clients", NOF, NULL,
     NOOP_DOC("there is no RESTORE"), NOHOOK},
    {"maxmemory-clients", NULL, CT_SPECIAL, CF_NOOP, 0, 0, "0", NULL, NOF, NULL,
     NOOP_DOC("clients are never evicted (bytes or a percentage of maxmemory)"), clientsMemGet,
     clientsMemCheck, clientsMemApply},
    {"maxmemory-samples", NULL, CT_INT, CF_NOOP, 1, IMAX, "5", NULL, NOF, NULL,
     NOOP_DOC("nothing is evicted"), NOHOOK},
    {"maxmemory-eviction-tenacity", NULL, CT_INT, CF_NOOP, 0, 100, "10", NULL, NOF, NULL,
     NOOP_DOC("nothing is evicted"), NOHOOK},
    {"masterauth", NULL, CT_STRING, CF_SENSITIVE | CF_NOOP, 0, 0, "", NULL, NOF, NULL,
     NOOP_DOC("inreplay is never a replica (redacted in SLOWLOG and MONITOR)"), NOHOOK},
    {"masteruser", NULL, CT_STRING, CF_SENSITIVE | CF_NOOP, 0, 0, "", NULL, NOF, NULL,
     NOOP_DOC("inreplay is never a replica (redacted in SLOWLOG and MONITOR)"), NOHOOK},
    {"replicaof", "slaveof", CT_SPECIAL, CF_IMMUTABLE | CF_NOOP, 0, 0, "", NULL, NOF, NULL,
     "always empty: inreplay is a master without replication", emptyGet, NULL, NULL},
    {"key-load-delay", NULL, CT_INT, CF_HIDDEN | CF_NOOP, INT_MIN, IMAX, "0", NULL, NOF, NULL,
     NOOP_DOC("Redis's hidden test knob; loading is never delayed"), NOHOOK},
    {"rdb-key-save-delay", NULL, CT_INT, CF_HIDDEN | CF_NOOP, INT_MIN, IMAX, "0", NULL, NOF, NULL,
     NOOP_DOC("Redis's hidden test knob; snapshots are never delayed"), NOHOOK},
    {"daemonize", NULL, CT_BOOL, CF_IMMUTABLE | CF_NOOP, 0, 0, "no", NULL, NOF, NULL,
     "pyctl start --daemon detaches; the server itself never does", NOHOOK},
    /* inreplay's own start-up settings (pyctl's flags): shown only when named */
    {"stack", NULL, CT_ENUM, CF_IMMUTABLE | CF_HIDDEN, 0, 0, "kernel", "kernel,dpdk",
     F(stack, FT_STR), NULL, "network stack: kernel sockets or DPDK with lwIP", NOHOOK},
    {"verbose", NULL, CT_BOOL, CF_IMMUTABLE | CF_HIDDEN, 0, 0, "no", NULL, F(verbose, FT_INT), NULL,
     "log every connection and protocol error", NOHOOK},
    {"fanout", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, 0, 32, "0", NULL, F(fanout, FT_UINT), NULL,
     "sum-tree fanout K (2, 4, 8, 16 or 32); 0 = the measured default", NOHOOK},
    {"seed", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, 0, LMAX, "0", NULL, F(seed, FT_U64), NULL,
     "seed of the samplers' random numbers; 0 = from the clock", NOHOOK},
    {"maxbytes", NULL, CT_MEM, CF_IMMUTABLE | CF_HIDDEN, 1, LMAX, "1gb", NULL,
     F(default_maxbytes, FT_U64), NULL,
     "arena bytes of the start-up table and of tables created without MAXBYTES", NOHOOK},
    {"alpha", NULL, CT_DOUBLE, CF_IMMUTABLE | CF_HIDDEN, 0, 0, IR_TABLE_XSTR(IR_TABLE_ALPHA), NULL,
     F(table_alpha, FT_DOUBLE), NULL,
     "priority exponent of the start-up table: stored priority = (p + epsilon) ** alpha", NOHOOK},
    {"beta", NULL, CT_DOUBLE, CF_IMMUTABLE | CF_HIDDEN, 0, 0, IR_TABLE_XSTR(IR_TABLE_BETA), NULL,
     F(table_beta, FT_DOUBLE), NULL, "importance-sampling exponent of the start-up table", NOHOOK},
    {"epsilon", NULL, CT_DOUBLE, CF_IMMUTABLE | CF_HIDDEN, 0, 0, IR_TABLE_XSTR(IR_TABLE_EPSILON),
     NULL, F(table_epsilon, FT_DOUBLE), NULL,
     "added to every raw priority of the start-up table before the exponent", NOHOOK},
    {"min-size", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, 0, LMAX, "0", NULL,
     F(table_min_size, FT_U64), NULL,
     "rate limiter: sampling waits until the start-up table holds this many items", NOHOOK},
    {"samples-per-insert", NULL, CT_DOUBLE, CF_IMMUTABLE | CF_HIDDEN, 0, 0, "0", NULL,
     F(table_samples_per_insert, FT_DOUBLE), NULL,
     "rate limiter: sampled items per inserted item, as Reverb's (0 = no ratio limit)", NOHOOK},
    {"error-buffer", NULL, CT_DOUBLE, CF_IMMUTABLE | CF_HIDDEN, 0, 0, "0", NULL,
     F(table_error_buffer, FT_DOUBLE), NULL,
     "rate limiter: how far samples may run ahead of or behind the ratio (0 = max(1, rate))",
     NOHOOK},
    {"request-timeout-ms", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, 0, IMAX, "30000", NULL,
     F(request_timeout_ms, FT_INT), NULL,
     "a request that has started arriving must complete within this many ms (0 = never)", NOHOOK},
    {"client-subnet", NULL, CT_STRING, CF_IMMUTABLE | CF_HIDDEN, 0, 0, "", NULL,
     F(client_subnet, FT_STR), NULL,
     "A.B.C.D/NN of clients allowed without a password (protected mode), e.g. the actors'", NOHOOK},
    {"dpdk-port", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, -1, IMAX, "-1", NULL,
     F(dpdk_port, FT_INT), NULL, "DPDK ethdev port id; -1 = the first probed", NOHOOK},
    {"dpdk-mbufs", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, 0, 4294967295ULL, "0", NULL,
     F(dpdk_mbufs, FT_UINT), NULL, "DPDK mbuf pool size; 0 = sized from maxclients", NOHOOK},
    {"mtu", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, 0, IR_MTU_MAX, "0", NULL, F(mtu, FT_INT), NULL,
     "DPDK: IP MTU of the port, " IR_TABLE_XSTR(IR_MTU_MIN) "-" IR_TABLE_XSTR(
         IR_MTU_MAX) " (1500 Ethernet, 9000 jumbo frames); 0 = the interface's",
     NOHOOK},
    {"busy-poll", NULL, CT_BOOL, CF_IMMUTABLE | CF_HIDDEN, 0, 0, "no", NULL, F(busy_poll, FT_INT),
     NULL,
     "DPDK: never nap when idle (lowest latency, 100% of the network core); kernel stack: poll "
     "epoll without sleeping while traffic flows",
     NOHOOK},
    {"shard-index", NULL, CT_INT, CF_IMMUTABLE | CF_HIDDEN, 0, 1023, "0", NULL,
     F(shard_index, FT_INT), NULL,
     "this server's place in its replay group (0-based); its ids start at index << 48", NOHOOK},
};
#define NPARAMS (sizeof(params) / sizeof(params[0]))

/* Values of parameters that live in neither ir_config nor a server variable;
 * a string set by CONFIG SET is a copy this file owns (storedOwned). */
static cfgval stored[NPARAMS];
static char *storedOwned[NPARAMS];

static void storeValue(size_t k, const cfgval *v) {
    stored[k] = *v;
    if (params[k].type != CT_STRING) return;
    char *p = ir_xrealloc(NULL, v->slen + 1);
    memcpy(p, v->s, v->slen);
    p[v->slen] = '\0';
    free(storedOwned[k]);
    storedOwned[k] = p;
    stored[k].s = p;
}

static void backlogApply(ir_server *s, const cfgval *v) {
    (void)s;
    for (size_t k = 0; k < NPARAMS; k++)
        if (params[k].apply == backlogApply) stored[k].i = v->i < 16384 ? 16384 : v->i;
}

static void clientsMemGet(const ir_server *s, char *buf, size_t len) {
    (void)s;
    for (size_t k = 0; k < NPARAMS; k++) {
        if (params[k].get != clientsMemGet) continue;
        long long v = stored[k].i;
        if (v < 0) snprintf(buf, len, "%lld%%", -v);
        else snprintf(buf, len, "%lld", v);
    }
}

static void clientsMemApply(ir_server *s, const cfgval *v) {
    (void)s;
    for (size_t k = 0; k < NPARAMS; k++)
        if (params[k].apply == clientsMemApply) stored[k].i = v->i;
}

/* ---- values ------------------------------------------------------------- */

static int enumIndex(const char *values, const char *p, size_t len) {
    int idx = 0;
    for (const char *w = values; *w; idx++) {
        size_t n = strcspn(w, ",");
        if (n == len && strncasecmp(w, p, len) == 0) return idx;
        w += n;
        if (*w == ',') w++;
    }
    return -1;
}

static void enumName(const char *values, long long idx, char *buf, size_t len) {
    const char *w = values;
    for (long long i = 0; i < idx && *w; i++) {
        w += strcspn(w, ",");
        if (*w == ',') w++;
    }
    snprintf(buf, len, "%.*s", (int)strcspn(w, ","), w);
}

/* Parse text for p (no special hooks); Redis's error texts. 0 or -1. */
static int parseValue(const cfgparam *p, const char *ptr, size_t len, cfgval *out, char *err,
                      size_t errlen) {
    switch (p->type) {
    case CT_BOOL:
        if (len == 3 && strncasecmp(ptr, "yes", 3) == 0) out->i = 1;
        else if (len == 2 && strncasecmp(ptr, "no", 2) == 0) out->i = 0;
        else {
            snprintf(err, errlen, "argument must be 'yes' or 'no'");
            return -1;
        }
        return 0;
    case CT_INT: {
        long long x;
        if (p->flags & CF_OCTAL) { /* Redis: strtoll base 8, the whole text */
            char buf[32], *end;
            errno = 0;
            if (len == 0 || len >= sizeof(buf)) {
                snprintf(err, errlen, "argument couldn't be parsed as an octal number");
                return -1;
            }
            memcpy(buf, ptr, len);
            buf[len] = '\0';
            x = strtoll(buf, &end, 8);
            if (errno || *end) {
                snprintf(err, errlen, "argument couldn't be parsed as an octal number");
                return -1;
            }
        } else if (!string2ll(ptr, len, &x)) {
            snprintf(err, errlen, "argument couldn't be parsed into an integer");
            return -1;
        }
        if (x < p->min || (x > 0 && (unsigned long long)x > p->max)) {
            snprintf(err, errlen, "argument must be between %lld and %llu inclusive", p->min,
                     p->max);
            return -1;
        }
        out->i = x;
        return 0;
    }
    case CT_MEM: {
        unsigned long long x = 0; /* "" is 0, as in Redis */
        if (len && !ir_parse_memory(ptr, len, &x)) {
            snprintf(err, errlen, "argument must be a memory value");
            return -1;
        }
        if ((long long)x < p->min && p->min > 0) {
            snprintf(err, errlen, "argument must be between %lld and %llu inclusive", p->min,
                     p->max);
            return -1;
        }
        if (x > p->max) {
            snprintf(err, errlen, "argument must be between %lld and %llu inclusive", p->min,
                     p->max);
            return -1;
        }
        out->i = (long long)x;
        return 0;
    }
    case CT_ENUM: {
        int idx = enumIndex(p->values, ptr, len);
        if (idx < 0) {
            char list[160];
            size_t o = 0;
            for (const char *w = p->values; *w && o < sizeof(list) - 1;) {
                size_t n = strcspn(w, ",");
                o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%.*s", o ? ", " : "", (int)n,
                                      w);
                w += n;
                if (*w == ',') w++;
            }
            snprintf(err, errlen, "argument(s) must be one of the following: %s", list);
            return -1;
        }
        out->i = idx;
        return 0;
    }
    case CT_DOUBLE: {
        char buf[64];
        char *end;
        if (len == 0 || len >= sizeof(buf)) {
            snprintf(err, errlen, "argument couldn't be parsed into a number");
            return -1;
        }
        memcpy(buf, ptr, len);
        buf[len] = '\0';
        out->d = strtod(buf, &end);
        if (*end || !isfinite(out->d) || out->d < (double)p->min) {
            snprintf(err, errlen, "argument must be a finite number >= %lld", p->min);
            return -1;
        }
        return 0;
    }
    default: /* CT_STRING, CT_SPECIAL */
        out->s = ptr;
        out->slen = len;
        return 0;
    }
}

static void formatValue(const cfgparam *p, const cfgval *v, char *buf, size_t len) {
    switch (p->type) {
    case CT_BOOL: snprintf(buf, len, "%s", v->i ? "yes" : "no"); break;
    case CT_INT:
        if (p->flags & CF_OCTAL) snprintf(buf, len, "%llo", (unsigned long long)v->i);
        else snprintf(buf, len, "%lld", v->i);
        break;
    case CT_MEM: snprintf(buf, len, "%llu", (unsigned long long)v->i); break;
    case CT_ENUM: enumName(p->values, v->i, buf, len); break;
    case CT_DOUBLE: /* the shortest of %.15g and %.17g that reads back the same */
        snprintf(buf, len, "%.15g", v->d);
        if (strtod(buf, NULL) != v->d) snprintf(buf, len, "%.17g", v->d);
        break;
    default: snprintf(buf, len, "%.*s", (int)v->slen, v->s ? v->s : ""); break;
    }
}

/* The current value of p (from ir_config, a variable or the table's storage). */
static void currentValue(const ir_server *s, const cfgparam *p, cfgval *v) {
    memset(v, 0, sizeof(*v));
    if (p->var) {
        v->i = *p->var;
        return;
    }
    if (p->ft == FT_NONE) {
        *v = stored[p - params];
        return;
    }
    const char *f = (const char *)&s->cfg + p->off;
    switch (p->ft) {
    case FT_INT: v->i = *(const int *)f; break;
    case FT_UINT: v->i = *(const unsigned *)f; break;
    case FT_U64: v->i = (long long)*(const uint64_t *)f; break;
    case FT_DOUBLE: v->d = *(const double *)f; break;
    case FT_STR: {
        const char *str = *(const char *const *)f;
        if (p->type == CT_ENUM) v->i = enumIndex(p->values, str ? str : "", str ? strlen(str) : 0);
        v->s = str ? str : "";
        v->slen = strlen(v->s);
        break;
    }
    }
}

static void configValue(const ir_server *s, const cfgparam *p, char *buf, size_t len) {
    if (p->get) {
        p->get(s, buf, len);
        return;
    }
    cfgval v;
    currentValue(s, p, &v);
    formatValue(p, &v, buf, len);
}

/* Store v into an ir_config field (the default; strings point at static text). */
static void storeField(ir_config *cfg, const cfgparam *p, const cfgval *v) {
    char *f = (char *)cfg + p->off;
    switch (p->ft) {
    case FT_INT: *(int *)f = v->i > INT_MAX ? INT_MAX : (int)v->i; break;
    case FT_UINT: *(unsigned *)f = (unsigned)v->i; break;
    case FT_U64: *(uint64_t *)f = (uint64_t)v->i; break;
    case FT_DOUBLE: *(double *)f = v->d; break;
    case FT_STR: *(const char **)f = v->s; break;
    }
}

static void parseDefault(const cfgparam *p, cfgval *v) {
    char err[256];
    memset(v, 0, sizeof(*v));
    if (p->type == CT_SPECIAL) {
        if (p->check == oblCheck) {
            ir_arg a = {(char *)p->def, strlen(p->def), 0};
            oblCheck(NULL, &a, v, err, sizeof(err));
        }
        return;
    }
    if (parseValue(p, p->def, strlen(p->def), v, err, sizeof(err)) != 0) abort(); /* a bad row */
    if (p->type == CT_STRING || p->type == CT_ENUM) v->s = p->def, v->slen = strlen(p->def);
}

void ir_config_init(ir_config *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    for (size_t k = 0; k < NPARAMS; k++) {
        const cfgparam *p = &params[k];
        cfgval v;
        parseDefault(p, &v);
        if (p->ft != FT_NONE) storeField(cfg, p, &v);
        if (p->check == oblCheck) cfg->client_output_buffer_limit = v.obl[0][0];
    }
}

void configServerInit(ir_server *s) {
    for (size_t k = 0; k < NPARAMS; k++) {
        const cfgparam *p = &params[k];
        cfgval v;
        parseDefault(p, &v);
        if (p->var) *p->var = v.i;
        else if (p->ft == FT_NONE) stored[k] = v; /* specials: 0 */
        if (p->check == saveCheck) nsaveparams = parseSave(p->def, strlen(p->def), saveparams);
        if (p->check == oblCheck) { /* slave and pubsub; normal is cfg's */
            memcpy(obl_slave, v.obl[1], sizeof(obl_slave));
            s->pubsub_obl_hard = v.obl[2][0];
            s->pubsub_obl_soft = v.obl[2][1];
            s->pubsub_obl_secs = v.obl[2][2];
        }
    }
}

/* CONFIG SET port: would listening on the new port fail? Redis answers "Unable
 * to listen on this port. Check server logs." then, before anything else; so
 * does inreplay (which cannot move its listener while running either). The
 * transport knows what holds a port on its stack. */
static int portTaken(const ir_server *s, const cfgparam *p, const ir_arg *v) {
    long long port;
    if (strcmp(p->name, "port") != 0 || !s->tp || !s->tp->ops->port_in_use) return 0;
    if (!string2ll(v->ptr, v->len, &port) || port <= 0 || port > 65535) return 0;
    int taken = s->tp->ops->port_in_use(s->tp, (int)port);
    if (taken) serverLog("CONFIG SET port %lld: the port is in use", port);
    return taken;
}

/* ---- CONFIG GET / SET --------------------------------------------------- */

static const cfgparam *configFind(const char *name, size_t len) {
    for (size_t k = 0; k < NPARAMS; k++) {
        const cfgparam *p = &params[k];
        if (strlen(p->name) == len && strncasecmp(p->name, name, len) == 0) return p;
        if (p->alias && strlen(p->alias) == len && strncasecmp(p->alias, name, len) == 0) return p;
    }
    return NULL;
}

static int hasGlob(const ir_arg *a) {
    for (size_t i = 0; i < a->len; i++)
        if (strchr("*?[", a->ptr[i]) && a->ptr[i]) return 1; /* as Redis decides */
    return 0;
}

void configGetCommand(client *c) {
    /* one entry per name shown: (row, alias?) and the text to show */
    struct {
        const cfgparam *p;
        const char *name;
        size_t len;
    } out[2 * NPARAMS];
    unsigned char seen[NPARAMS][2];
    memset(seen, 0, sizeof(seen));
    long n = 0;
    for (int i = 2; i < c->argc; i++) {
        const ir_arg *a = &c->argv[i];
        if (!hasGlob(a)) { /* an exact name: hidden parameters too, shown as asked */
            const cfgparam *p = configFind(a->ptr, a->len);
            if (!p) continue;
            int which =
                strlen(p->name) == a->len && strncasecmp(p->name, a->ptr, a->len) == 0 ? 0 : 1;
            if (seen[p - params][which]) continue;
            seen[p - params][which] = 1;
            out[n].p = p, out[n].name = a->ptr, out[n].len = a->len, n++;
            continue;
        }
        for (size_t k = 0; k < NPARAMS; k++) {
            const cfgparam *p = &params[k];
            if (p->flags & CF_HIDDEN) continue;
            for (int which = 0; which < 2; which++) {
                const char *name = which ? p->alias : p->name;
                if (!name || seen[k][which] ||
                    !stringmatchlen(a->ptr, a->len, name, strlen(name), 1))
                    continue;
                seen[k][which] = 1;
                out[n].p = p, out[n].name = name, out[n].len = strlen(name), n++;
            }
        }
    }
    addReplyMapLen(c, n);
    char val[4096]; /* dir is a path */
    for (long i = 0; i < n; i++) {
        configValue(c->srv, out[i].p, val, sizeof(val));
        addReplyBulk(c, out[i].name, out[i].len);
        addReplyBulkCString(c, val);
    }
}

void configSetCommand(client *c) {
    if (c->argc < 4) {
        addReplySubcommandArity(c, "config");
        return;
    }
    if (c->argc % 2) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    int npairs = (c->argc - 2) / 2;
    /* as Redis: every sensitive value is redacted (SLOWLOG, MONITOR) before
     * any of the parameters is checked, whatever error comes next */
    for (int i = 0; i < npairs; i++) {
        const ir_arg *name = &c->argv[2 + 2 * i];
        if (configIsSensitive(name->ptr, name->len)) redactArg(c, 3 + 2 * i);
    }
    const cfgparam *ps[64];
    cfgval vals[64];
    if (npairs > 64) {
        addReplyError(c, "CONFIG SET takes at most 64 parameters at once");
        return;
    }
    for (int i = 0; i < npairs; i++) {
        const ir_arg *name = &c->argv[2 + 2 * i];
        const cfgparam *p = configFind(name->ptr, name->len);
        if (!p) {
            addReplyErrorFormat(
                c, "Unknown option or number of arguments for CONFIG SET - '%.128s'", name->ptr);
            return;
        }
        if (p->flags & CF_IMMUTABLE) {
            addReplyErrorFormat(c,
                                "CONFIG SET failed (possibly related to argument '%.128s') - "
                                "can't set immutable config",
                                name->ptr);
            return;
        }
        if ((p->flags & CF_PROTECTED) &&
            !protectedActionAllowed(c, c->srv->cfg.enable_protected_configs)) {
            addReplyErrorFormat(c,
                                "CONFIG SET failed (possibly related to argument '%.128s') - "
                                "can't set protected config",
                                name->ptr);
            return;
        }
        for (int k = 0; k < i;
             k++) { /* the same name twice (a name and its alias may both be given) */
            const ir_arg *prev = &c->argv[2 + 2 * k];
            if (prev->len == name->len && strncasecmp(prev->ptr, name->ptr, name->len) == 0) {
                addReplyErrorFormat(c,
                                    "CONFIG SET failed (possibly related to argument '%.128s') - "
                                    "duplicate parameter",
                                    name->ptr);
                return;
            }
        }
        ps[i] = p;
    }
    for (int i = 0; i < npairs; i++) {
        const cfgparam *p = ps[i];
        const ir_arg *v = &c->argv[3 + 2 * i];
        char err[256];
        int rc;
        memset(&vals[i], 0, sizeof(vals[i]));
        if (p->flags & CF_SAME_ONLY) {
            char cur[256];
            configValue(c->srv, p, cur, sizeof(cur));
            rc = strlen(cur) == v->len && strncasecmp(cur, v->ptr, v->len) == 0 ? 0 : -1;
            if (rc && portTaken(c->srv, p, v))
                snprintf(err, sizeof(err), "Unable to listen on this port. Check server logs.");
            else if (rc)
                snprintf(err, sizeof(err),
                         "changing %s at runtime is not supported (restart with the new value)",
                         p->name);
        } else {
            rc = parseValue(p, v->ptr, v->len, &vals[i], err, sizeof(err));
            if (rc == 0 && p->check) rc = p->check(c->srv, v, &vals[i], err, sizeof(err));
        }
        if (rc != 0) {
            addReplyErrorFormat(c, "CONFIG SET failed (possibly related to argument '%.128s') - %s",
                                c->argv[2 + 2 * i].ptr, err);
            return;
        }
    }
    for (int i = 0; i < npairs; i++) {
        const cfgparam *p = ps[i];
        if (p->flags & CF_SAME_ONLY) continue;
        if (p->apply) p->apply(c->srv, &vals[i]);
        else if (p->var) *p->var = vals[i].i;
        else if (p->ft == FT_NONE) storeValue((size_t)(p - params), &vals[i]);
        else if (p->ft != FT_STR) storeField(&c->srv->cfg, p, &vals[i]);
        /* the remaining strings (bind) are SAME_ONLY */
    }
    addReplyStr(c, shared.ok);
}

/* ---- the table for pyctl ------------------------------------------------ */

static char *json;
static pthread_once_t json_once = PTHREAD_ONCE_INIT;

static void jsonAppend(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void jsonAppend(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (*buf && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return;
        }
        size_t ncap = (*cap ? *cap * 2 : 16384) + (size_t)n;
        char *nb = realloc(*buf, ncap);
        if (!nb) return;
        *buf = nb, *cap = ncap;
    }
}

static void jsonString(char **buf, size_t *len, size_t *cap, const char *s) {
    if (!s) {
        jsonAppend(buf, len, cap, "null");
        return;
    }
    jsonAppend(buf, len, cap, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') jsonAppend(buf, len, cap, "\\%c", *s);
        else jsonAppend(buf, len, cap, "%c", *s);
    }
    jsonAppend(buf, len, cap, "\"");
}

static void buildJson(void) {
    char *b = NULL;
    size_t len = 0, cap = 0;
    jsonAppend(&b, &len, &cap, "[");
    for (size_t k = 0; k < NPARAMS; k++) {
        const cfgparam *p = &params[k];
        jsonAppend(&b, &len, &cap, "%s{\"name\":", k ? "," : "");
        jsonString(&b, &len, &cap, p->name);
        jsonAppend(&b, &len, &cap, ",\"alias\":");
        jsonString(&b, &len, &cap, p->alias);
        jsonAppend(&b, &len, &cap, ",\"type\":\"%s\",\"default\":", typeNames[p->type]);
        jsonString(&b, &len, &cap, p->def);
        if (p->type == CT_INT || p->type == CT_MEM)
            jsonAppend(&b, &len, &cap, ",\"min\":%lld,\"max\":%llu", p->min, p->max);
        else if (p->type == CT_DOUBLE)
            jsonAppend(&b, &len, &cap, ",\"min\":%lld,\"max\":null", p->min);
        else jsonAppend(&b, &len, &cap, ",\"min\":null,\"max\":null");
        jsonAppend(&b, &len, &cap, ",\"values\":");
        jsonString(&b, &len, &cap, p->values);
        jsonAppend(&b, &len, &cap, ",\"field\":");
        jsonString(&b, &len, &cap, p->field);
        jsonAppend(
            &b, &len, &cap,
            ",\"mutable\":%s,\"hidden\":%s,\"sensitive\":%s,\"noop\":%s,\"fixed\":%s,"
            "\"octal\":%s,\"doc\":",
            p->flags & CF_IMMUTABLE ? "false" : "true", p->flags & CF_HIDDEN ? "true" : "false",
            p->flags & CF_SENSITIVE ? "true" : "false", p->flags & CF_NOOP ? "true" : "false",
            p->flags & CF_SAME_ONLY ? "true" : "false", p->flags & CF_OCTAL ? "true" : "false");
        jsonString(&b, &len, &cap, p->doc);
        jsonAppend(&b, &len, &cap, "}");
    }
    jsonAppend(&b, &len, &cap, "]");
    json = b;
}

const char *ir_config_params_json(void) {
    pthread_once(&json_once, buildJson);
    return json ? json : "[]";
}

int configIsSensitive(const char *name, size_t len) {
    const cfgparam *p = configFind(name, len);
    return p && (p->flags & CF_SENSITIVE) != 0;
}
