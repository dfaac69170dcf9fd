/* server.c - clients, dispatch and the server object. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acl.h"
#include "aof.h"
#include "blocked.h"
#include "chunks.h"
#include "commands.h"
#include "config.h"
#include "db.h"
#include "multi.h"
#include "pubsub.h"
#include "param.h"
#include "replay.h"
#include "replication.h"
#include "functions.h"
#include "script.h"
#include "slowlog.h"

ir_server *g_server;

/* lock-free, so setting it is async-signal-safe */
static atomic_int stop_requested;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "ir_stop must be async-signal-safe");

void ir_stop(void) { atomic_store_explicit(&stop_requested, 1, memory_order_release); }

void serverDropStopRequest(void) {
    atomic_store_explicit(&stop_requested, 0, memory_order_release);
}

int serverTakeStopRequest(ir_server *s) {
    if (!atomic_exchange_explicit(&stop_requested, 0, memory_order_acq_rel)) return 0;
    s->shutdown_asap = SHUTDOWN_SAVE_PER_CONFIG;
    return 1;
}

/* ir_config_init is config.c's: the parameter table holds the defaults. */

ir_server *server_new(const ir_config *cfg) {
    ir_server *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->cfg = *cfg;
    s->db = dbNew();
    s->tables = tablesNew();
    s->chunks = chunkStoreNew();
    s->params = paramsNew();
    if (!s->db || !s->tables || !s->chunks || !s->params || dbsCreate(s) != 0) {
        server_free(s);
        return NULL;
    }
    s->start_ms = s->now_ms = ir_mstime();
    s->next_client_id = 1;
    s->pins.srv = s;
    aclInit(s); /* the default user; requirepass is its password */
    if (aclLoadConfiguredFile(s) != 0) {
        server_free(s);
        return NULL;
    }
    configServerInit(s); /* the parameters kept outside ir_config, at their defaults */
    if (cfg->client_subnet && cfg->client_subnet[0])
        s->has_subnet = ir_parse_subnet(cfg->client_subnet, &s->subnet_family, s->subnet_addr,
                                        &s->subnet_prefix) == 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    for (int i = 0; i < 40; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        s->run_id[i] = "0123456789abcdef"[x & 15];
    }
    return s;
}

void server_free(ir_server *s) {
    if (!s) return;
    blockedShutdown(s); /* waiting clients are answered before they close */
    while (s->clients) freeClient(s->clients);
    blockedFree(s);
    if (s->db) dbFree(s->db);
    dbsFree(s);
    tablesFree(s->tables); /* before the chunks its items reference */
    chunkStoreFree(s->chunks);
    paramsFree(s->params); /* before the pins: a pinned vector is detached into them */
    pinsFree(&s->pins);
    pubsubFree(s);
    slowlogFreeAll();
    functionsFree(s);
    scriptingFree(s);
    free(s->monitors);
    free(s->requirepass);
    aclFree(s);
    free(s);
}

/* "A.B.C.D/NN" or "x::y/NN" -> family, address bytes, prefix; 0 or -1. */
int ir_parse_subnet(const char *text, int *family, unsigned char addr[16], int *prefix) {
    char buf[64];
    const char *slash = strchr(text, '/');
    size_t n = slash ? (size_t)(slash - text) : strlen(text);
    if (n >= sizeof(buf)) return -1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    *family = ir_parse_ip(buf, n, addr);
    if (!*family) return -1;
    int max = *family == 4 ? 32 : 128;
    long long p = max;
    if (slash && (!string2ll(slash + 1, strlen(slash + 1), &p) || p < 0 || p > max)) return -1;
    *prefix = (int)p;
    return 0;
}

static int prefixMatch(const unsigned char *a, const unsigned char *b, int bits) {
    int bytes = bits / 8, rem = bits % 8;
    if (memcmp(a, b, (size_t)bytes) != 0) return 0;
    if (!rem) return 1;
    unsigned char mask = (unsigned char)(0xff << (8 - rem));
    return (a[bytes] & mask) == (b[bytes] & mask);
}

/* The address of a peer, from the transport's "ip:port" / "[ip]:port": 4 or 6
 * with its bytes in a (an IPv4-mapped IPv6 address as 4), 0 if unreadable. */
static int peerIp(const char *addr, unsigned char a[16]) {
    char host[64];
    const char *start = addr, *end;
    if (*start == '[') {
        start++;
        end = strchr(start, ']');
    } else {
        end = strrchr(start, ':');
    }
    if (!end || (size_t)(end - start) >= sizeof(host)) return 0;
    memcpy(host, start, (size_t)(end - start));
    host[end - start] = '\0';
    memset(a, 0, 16);
    int fam = ir_parse_ip(host, (size_t)(end - start), a);
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (fam == 6 && memcmp(a, v4mapped, 12) == 0) {
        memmove(a, a + 12, 4);
        fam = 4;
    }
    return fam == 4 || fam == 6 ? fam : 0;
}

static int peerIsLoopback(const char *addr) {
    static const unsigned char loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    unsigned char a[16];
    int fam = peerIp(addr, a);
    return (fam == 4 && a[0] == 127) || (fam == 6 && memcmp(a, loop6, 16) == 0);
}

static int stackIsKernel(const ir_server *s) {
    return s->tp && !strcmp(s->tp->ops->name, "kernel");
}

static int stackIsDpdk(const ir_server *s) { return s->tp && !strcmp(s->tp->ops->name, "dpdk"); }

/* Protected mode: while the default user needs no password only loopback and
 * the configured client subnet may talk; an address we cannot read is not
 * trusted. A DPDK port has no loopback: a 127/8 source there came off the
 * wire (and the port drops it), so only the client subnet. */
static int peerAllowed(const ir_server *s, const char *addr) {
    if (!stackIsDpdk(s) && peerIsLoopback(addr)) return 1;
    unsigned char a[16];
    int fam = peerIp(addr, a);
    return fam && s->has_subnet && fam == s->subnet_family &&
           prefixMatch(a, s->subnet_addr, s->subnet_prefix);
}

int protectedActionAllowed(const client *c, const char *setting) {
    if (setting && !strcmp(setting, "yes")) return 1;
    if (!setting || strcmp(setting, "local") != 0) return 0;
    /* local: the Unix socket, or loopback on the kernel stack (a DPDK port
     * has no loopback: a 127/8 source there came off the wire) */
    if (c->flags & CLIENT_UNIX_SOCKET) return 1;
    if (!stackIsKernel(c->srv)) return 0;
    return peerIsLoopback(c->addr);
}

void serverLogOpenedProtections(const ir_server *s) {
    static const struct {
        const char *name, *what;
    } opened[] = {{"enable-debug-command", "DEBUG (SLEEP, RELOAD, SET-ACTIVE-EXPIRE, ...)"},
                  {"enable-protected-configs", "CONFIG SET dir"}};
    const char *val[] = {s->cfg.enable_debug_command, s->cfg.enable_protected_configs};
    for (size_t i = 0; i < sizeof(opened) / sizeof(opened[0]); i++)
        if (val[i] && (!strcmp(val[i], "yes") || !strcmp(val[i], "local")))
            serverLog("Notice: %s %s: %s is open to %s clients (Redis's default: no)",
                      opened[i].name, val[i], opened[i].what,
                      !strcmp(val[i], "yes") ? "all" : "loopback");
    if (!aclDefaultIsNopass(s)) return; /* a password: protected mode does not apply */
    if (!s->cfg.protected_mode)
        serverLog("Notice: protected-mode no: the default user needs no password and every "
                  "client may connect (Redis's default: yes)");
    else if (stackIsDpdk(s))
        serverLog("Notice: protected mode: the default user needs no password and a DPDK port "
                  "has no loopback, so %s; set --requirepass, or --protected-mode no",
                  s->has_subnet ? "only --client-subnet may connect" : "every client is refused");
}

int authRequired(const client *c) { return !c->authenticated; }

void redactArg(client *c, int j) {
    if (j < 0 || j >= c->argc) return;
    if (c->redacted_n < 0) return; /* already every argument */
    if (!c->redacted) {
        c->redacted = calloc((size_t)c->argc, 1);
        if (!c->redacted) { /* out of memory: every argument rather than a secret */
            c->redacted_n = -1;
            return;
        }
        c->redacted_n = c->argc;
    }
    if (j < c->redacted_n) c->redacted[j] = 1;
}

const char *serverRequirePass(const ir_server *s, size_t *len) {
    if (s->requirepass) {
        *len = s->requirepass_len;
        return s->requirepass;
    }
    *len = s->cfg.requirepass ? strlen(s->cfg.requirepass) : 0;
    return s->cfg.requirepass;
}

uint64_t serverUsedMemory(const ir_server *s) {
    /* detached pinned memory (an overwritten value, a dropped table's arena)
     * counts until the last reply that points into it is written */
    uint64_t b = dbsBytes(s) + tablesMemory(s->tables) + s->pins.detached_bytes +
                 (s->chunks ? chunkStoreMemory(s->chunks) : 0) +
                 (s->params ? paramsMemory(s->params) : 0);
    for (const client *c = s->clients; c; c = c->next) {
        b += c->qcap + c->ocap + c->argcap + (uint64_t)c->segcap * sizeof(ir_seg) +
             (uint64_t)c->argv_cap * (sizeof(ir_arg) + sizeof(size_t)) + sizeof(*c);
        for (int i = 0; i < c->argc; i++) /* big bulks have buffers of their own */
            if (c->argv[i].owned) b += c->argv[i].len + 2;
        if (c->big_arg) b += c->argv[c->argc].len + 2; /* one still arriving */
    }
    return b;
}

/* Close a client now, saying why in the log. */
static void closeClientFor(client *c, const char *why) {
    serverLog("Closing client %s (id %llu): %s", c->addr, (unsigned long long)c->id, why);
    freeClient(c);
}

void server_tick(ir_server *s) {
    s->now_ms = ir_mstime();
    if (latencyMonitorThreshold > 0) { /* as Redis: the active expire cycle is an event */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        dbsActiveExpire(s, s->now_ms);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        uint64_t ms = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000u +
                      (uint64_t)((t1.tv_nsec - t0.tv_nsec) / 1000000);
        if ((long long)ms >= latencyMonitorThreshold) latencyAddSample("expire-cycle", ms);
    } else {
        dbsActiveExpire(s, s->now_ms);
    }
    replCron(s);
    aofCron(s);
    const ir_config *cfg = &s->cfg;
    if (!cfg->timeout && !cfg->request_timeout_ms) return;
    for (client *c = s->clients, *next; c; c = next) {
        next = c->next;
        if (c->flags & CLIENT_BLOCKED) continue; /* waiting is not idling (blocked.c) */
        if (cfg->request_timeout_ms && c->req_start_ms &&
            s->now_ms - c->req_start_ms > (uint64_t)cfg->request_timeout_ms) {
            s->timedout_clients++;
            closeClientFor(c, "request not completed within request-timeout-ms");
        } else if (cfg->timeout && !c->pending_bytes &&
                   s->now_ms - c->last_ms > (uint64_t)cfg->timeout * 1000) {
            s->timedout_clients++;
            closeClientFor(c, "idle longer than timeout");
        }
    }
}

/* ---- clients ------------------------------------------------------------ */

/* Redis 7.0's words (networking.c acceptCommonHandler), its typo included. */
#define PROTECTED_MODE_DENIED \
    "-DENIED Redis is running in protected mode because protected mode is enabled and no " \
    "password is set for the default user. In this mode connections are only accepted from " \
    "the loopback interface. If you want to connect from external computers to Redis you may " \
    "adopt one of the following solutions: 1) Just disable protected mode sending the command " \
    "'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from " \
    "the same host the server is running, however MAKE SURE Redis is not publicly accessible " \
    "from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) " \
    "Alternatively you can just disable the protected mode by editing the Redis configuration " \
    "file, and setting the protected mode option to 'no', and then restarting the server. 3) " \
    "If you started the server manually just for testing, restart it with the '--protected-mode " \
    "no' option. 4) Setup a an authentication password for the default user. NOTE: You only " \
    "need to do one of the above things in order for the server to start accepting " \
    "connections from the outside.\r\n"

/* Answer a connection we will not serve, before any client exists for it. */
static client *refuse(ir_server *s, ir_transport *t, ir_conn *conn, ir_str err) {
    struct iovec iov = {(void *)err.p, err.len};
    t->ops->writev(t, conn, &iov, 1);
    s->rejected_connections++;
    return NULL;
}

int irs_tcp_keepalive(const ir_server *s) { return s->cfg.tcp_keepalive; }

client *irs_accept(ir_server *s, ir_transport *t, ir_conn *conn) {
    if (s->nclients >= (uint64_t)s->cfg.maxclients)
        return refuse(s, t, conn, IR_STR("-ERR max number of clients reached\r\n"));
    /* a Unix-socket client is local, as loopback is (Redis's islocalClient);
     * protected mode is judged by the default user, as Redis 7 does, so
     * `ACL SETUSER default nopass` opens it as an empty requirepass does */
    int unix_sock = t->ops->is_unix && t->ops->is_unix(t, conn);
    if (s->cfg.protected_mode && aclDefaultIsNopass(s) && !unix_sock) {
        char addr[64];
        t->ops->peername(t, conn, addr, sizeof(addr));
        if (!peerAllowed(s, addr)) {
            if (s->cfg.verbose) serverLog("Denied %s: protected mode", addr);
            return refuse(s, t, conn, IR_STR(PROTECTED_MODE_DENIED));
        }
    }
    client *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->id = s->next_client_id++;
    c->srv = s;
    c->resp = 2;
    c->tp = t;
    c->conn = conn;
    c->bulklen = -1;
    if (unix_sock) c->flags |= CLIENT_UNIX_SOCKET;
    c->ctime_ms = c->last_ms = s->now_ms;
    aclInitClient(c);
    t->ops->peername(t, conn, c->addr, sizeof(c->addr));
    if (t->ops->sockname) t->ops->sockname(t, conn, c->laddr, sizeof(c->laddr));
    else snprintf(c->laddr, sizeof(c->laddr), "?");
    c->next = s->clients;
    if (s->clients) s->clients->prev = c;
    s->clients = c;
    s->nclients++;
    s->total_connections++;
    if (s->cfg.verbose) serverLog("Accepted %s (id %llu)", c->addr, (unsigned long long)c->id);
    return c;
}

void freeClient(client *c) {
    ir_server *s = c->srv;
    if (!(c->flags & CLIENT_CLOSED)) {
        c->flags |= CLIENT_CLOSED;
        c->tp->ops->close(c->tp, c->conn);
    }
    if (s->cfg.verbose) serverLog("Client %s closed (id %llu)", c->addr, (unsigned long long)c->id);
    blockedClientFree(c);
    resetClientArgs(c);
    multiFreeClient(c);
    pubsubFreeClient(c);
    if (c->flags & CLIENT_MONITOR) monitorRemove(c);
    if (c->flags & CLIENT_SLAVE) replFreeClient(c);
    clientDiscardReply(c); /* releases the pins of what was never written */
    if (c->prev) c->prev->next = c->next;
    else s->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nclients--;
    if (!c->qborrowed) free(c->qbuf); /* else the transport's buffer, not ours */
    free(c->argv);
    free(c->argoff);
    free(c->argbuf);
    free(c->obuf);
    free(c->segs);
    free(c->clientname);
    free(c);
}

/* After input or output progress: close the client if it is done. */
static void clientAfterIO(client *c) {
    if (c->pending_bytes && !(c->flags & CLIENT_CLOSE_ASAP)) clientFlush(c);
    if (c->flags & CLIENT_PROTECTED) return; /* its busy script still runs: freed after it */
    if ((c->flags & CLIENT_CLOSE_ASAP) ||
        ((c->flags & CLIENT_CLOSE_AFTER_REPLY) && c->pending_bytes == 0))
        freeClient(c);
}

size_t irs_data(client *c, const char *buf, size_t len) {
    ir_server *s = c->srv;
    uint64_t t0 = ir_cycles();
    /* input delivered again after a held command (resp.c): its parsed part is done */
    size_t skip = c->held_in < len ? c->held_in : len;
    c->held_in -= skip;
    c->last_ms = s->now_ms;
    size_t took = skip + clientFeed(c, buf + skip, len - skip);
    s->net_input_bytes += took; /* a byte left in place counts when it is taken */
    clientAfterIO(c);           /* may free c */
    s->cycles_input += ir_cycles() - t0;
    return took;
}

void irs_writable(client *c) { clientAfterIO(c); }

void clientUnblocked(client *c) {
    clientResumeInput(c);
    clientAfterIO(c); /* may free c */
}

void irs_closed(client *c) {
    c->flags |= CLIENT_CLOSED;
    if (c->flags & CLIENT_PROTECTED) { /* its script runs: freed when it is done */
        c->flags |= CLIENT_CLOSE_ASAP;
        return;
    }
    freeClient(c);
}

/* ---- dispatch ----------------------------------------------------------- */

static void rejectUnknown(client *c) {
    char args[256];
    size_t len = 0;
    args[0] = '\0';
    for (int i = 1; i < c->argc && len < 128; i++) {
        int n = snprintf(args + len, sizeof(args) - len, "'%.*s' ", 128 - (int)len, c->argv[i].ptr);
        if (n < 0) break;
        len += (size_t)n;
        if (len >= sizeof(args)) len = sizeof(args) - 1;
    }
    rejectCommandFormat(c, "unknown command '%.128s', with args beginning with: %s", c->argv[0].ptr,
                        args);
}

/* An error reply the command (or its rejection) added since output offset
 * `before`: counted in INFO errorstats. 1 if there was one. */
static int countErrorReply(client *c, size_t before) {
    if (c->olen <= before || c->obuf[before] != '-') return 0;
    if (c->srv->error_stats_skip) { /* a failed call all the same */
        c->srv->error_stats_skip = 0;
        return 1;
    }
    errorStatsCount(c->srv, c->obuf + before + 1, c->olen - before - 1);
    return 1;
}

/* A refused command: its error, and inside MULTI the transaction fails. */
static void rejected(client *c, const ir_command *cmd, size_t before) {
    multiFlagTransaction(c);
    countErrorReply(c, before);
    if (cmd) commandStatsRejected(c, cmd);
}

void call(client *c, const ir_command *cmd) {
    ir_server *s = c->srv;
    size_t before = c->olen, pend0 = c->pending_bytes;
    uint64_t writes0 = c->writes;
    int nsegs0 = c->nsegs;
    size_t last0 = nsegs0 ? c->segs[nsegs0 - 1].len : 0;
    int mode0 = c->reply_mode;
    /* EXEC runs other commands (and flushes between them): its own error
     * replies come only without MULTI or after a refused queued command */
    int plain =
        cmd->proc != execCommand || !(c->flags & CLIENT_MULTI) || (c->flags & CLIENT_DIRTY_EXEC);
    size_t monlen = 0, monargs = 0;
    int db0 = c->db;
    /* admin commands are not shown, a container's by its subcommand (CONFIG SET) */
    char *monline = s->nmonitors && !(cmd->flags & CMD_ADMIN) && cmd->proc != monitorCommand &&
                            !(commandIdCats(commandIdOfCall(cmd, c->argv, c->argc)) &
                              (1ull << aclCategoryIndex("admin", 5)))
                        ? monitorFormat(c, &monlen, &monargs)
                        : NULL;
    if (monline && (cmd->flags & CMD_SKIP_MONITOR)) { /* as Redis: EVAL before its commands */
        monitorSend(c, monline, monlen);
        monline = NULL;
    }
    /* a nested call (EXEC's commands, a script's) keeps the caller's redactions */
    unsigned char *redacted0 = c->redacted;
    int redacted_n0 = c->redacted_n;
    c->redacted = NULL;
    c->redacted_n = 0;
    slowlogSaved sv; /* what the command may take over (only owned arguments are copied) */
    slowlogBeforeCall(c, &sv);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t cyc = ir_cycles();
    c->cmd = cmd;
    c->lastsub = commandSubName(cmd, c);
    int slave = c->flags & CLIENT_SLAVE; /* a replica gets no replies */
    replFrame rf;
    int rp = replActive(); /* nothing else on this path while no replica is attached */
    if (rp) replCallBegin(c, &rf);
    /* a replica's own commands: only its REPLCONF and PING run (a write would
     * feed its own stream while its replies are being dropped) */
    long long changes0 = s->cmd_changes; /* call() nests (EXEC, scripts) */
    s->cmd_changes = -1;
    if (!slave) {
        cmd->proc(c);
    } else if (replAcceptsFromReplica(cmd)) {
        /* muted, not truncated afterwards: the stream it is fed (replCallEnd, a
         * MONITOR line) shares its output and must not be cut */
        c->flags |= CLIENT_MUTED;
        cmd->proc(c);
        c->flags &= ~CLIENT_MUTED;
    }
    if (rp) replCallEnd(c, cmd, &rf);
    s->cycles_execute += ir_cycles() - cyc;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* nanoseconds: a call's whole-microsecond difference was 0 for every
     * command under 1 us (GET showed 0.01 us per call) */
    uint64_t ns = (uint64_t)((int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 +
                             (int64_t)(t1.tv_nsec - t0.tv_nsec));
    uint64_t usec = ns / 1000;
    commandStatsCall(c, cmd, ns, plain && countErrorReply(c, before));
    /* as Redis: a command that blocked is not logged (a blocked client is
     * served later, outside call()) */
    if (!(c->flags & CLIENT_BLOCKED)) slowlogAfterCall(c, cmd, usec, &sv);
    s->error_stats_skip = 0;
    s->total_commands++;
    if (cmd->flags & CMD_WRITE) s->dirty += s->cmd_changes < 0 ? 1 : (uint64_t)s->cmd_changes;
    s->cmd_changes = changes0;
    if (monline && (c->redacted_n || c->db != db0))
        monline = monitorAfterCall(c, monline, &monlen, monargs);
    if (monline) monitorSend(c, monline, monlen); /* after it ran, unless sent before */
    free(c->redacted);
    c->redacted = redacted0;
    c->redacted_n = redacted_n0;
    /* CLIENT REPLY OFF / SKIP: drop what this command replied */
    int drop = 0;
    if (c->reply_mode == CLIENT_REPLY_SKIP) { /* CLIENT REPLY SKIP itself */
        drop = 1;
        c->reply_mode = CLIENT_REPLY_SKIP_NEXT;
    } else if (mode0 == CLIENT_REPLY_SKIP_NEXT && c->reply_mode == CLIENT_REPLY_SKIP_NEXT) {
        drop = 1; /* the command after SKIP (unless it was CLIENT REPLY ON/OFF) */
        c->reply_mode = CLIENT_REPLY_ON;
    } else if (c->reply_mode == CLIENT_REPLY_OFF) {
        drop = 1;
    }
    /* cut what the command appended, unless some of the output went out meanwhile
     * (a flush inside the command): then the snapshot no longer describes it */
    if (drop && plain && !slave && c->writes == writes0 && c->nsegs >= nsegs0 &&
        !pubsubRepliesArePushes(cmd)) {
        for (int i = nsegs0; i < c->nsegs; i++)
            if (c->segs[i].pin) pinRelease(c->segs[i].pin);
        c->nsegs = nsegs0;
        if (nsegs0) c->segs[nsegs0 - 1].len = last0;
        c->olen = before;
        c->pending_bytes = pend0;
    }
}

/* processCommand calls in progress: blocked clients are served after the
 * outermost one (a transaction that dispatched its queued commands through
 * here would otherwise serve them between its commands). */
static int dispatch_depth;

/* After every command, refused ones too (an unknown command's error is a reply
 * like any other): a client over client-output-buffer-limit, or an
 * unauthenticated one with more than 1 KB its socket has not taken, is closed. */
static void outputLimits(ir_server *s, client *c) {
    if (s->cfg.client_output_buffer_limit && c->pending_bytes > s->cfg.client_output_buffer_limit &&
        !(c->flags & CLIENT_CLOSE_ASAP)) {
        serverLog("Closing client %s (id %llu): output buffer of %zu bytes is over "
                  "client-output-buffer-limit",
                  c->addr, (unsigned long long)c->id, c->pending_bytes);
        s->output_limit_disconnects++;
        c->flags |= CLIENT_CLOSE_ASAP;
    }
    /* an unauthenticated client that does not read its replies (the flood of
     * NOAUTH errors would otherwise grow without bound): Redis's rule and words */
    if (clientUnauthOutputOver(c)) {
        serverLog("Client %s (id %llu) scheduled to be closed ASAP for overcoming of output "
                  "buffer limits.",
                  c->addr, (unsigned long long)c->id);
        s->output_limit_disconnects++;
        c->flags |= CLIENT_CLOSE_ASAP;
    }
}

int processCommand(client *c) {
    ir_server *s = c->srv;
    size_t before = c->olen;
    ir_command *cmd = lookupCommand(c->argv[0].ptr, c->argv[0].len);
    if (!cmd) {
        rejectUnknown(c);
        rejected(c, NULL, before);
        outputLimits(s, c);
        return 0;
    }
    c->cmd = cmd;
    c->lastcmd = cmd;
    c->lastsub = commandSubName(cmd, c);
    if ((cmd->arity > 0 && cmd->arity != c->argc) || (c->argc < -cmd->arity)) {
        addReplyErrorArity(c);
        rejected(c, cmd, before);
        c->cmd = NULL;
        outputLimits(s, c);
        return 0;
    }
    if ((cmd->flags & CMD_PROTECTED) && !protectedActionAllowed(c, s->cfg.enable_debug_command)) {
        addReplyError(c, "DEBUG command not allowed. If the enable-debug-command option is set to "
                         "\"local\", you can run it from a local connection, otherwise you need "
                         "to set this option in the configuration file, and then restart the "
                         "server.");
        rejected(c, cmd, before);
        c->cmd = NULL;
        outputLimits(s, c);
        return 0;
    }
    int acl_pos = 0, acl_r = ACL_OK;
    if (authRequired(c) && !(cmd->flags & CMD_NOAUTH)) {
        addReplyError(c, "-NOAUTH Authentication required.");
        rejected(c, cmd, before);
    } else if ((acl_r =
                    aclCheck(c, cmd, (c->flags & CLIENT_MULTI) ? ACL_CTX_MULTI : ACL_CTX_TOPLEVEL,
                             &acl_pos)) != ACL_OK) {
        aclReplyDenied(c, cmd, acl_r);
        rejected(c, cmd, before);
    } else if ((c->flags & CLIENT_MULTI) && (cmd->flags & CMD_NO_MULTI)) {
        rejectCommandFormat(c, "Command not allowed inside a transaction");
        rejected(c, cmd, before);
    } else if (s->cfg.maxmemory && (cmd->flags & CMD_DENYOOM) &&
               serverUsedMemory(s) > s->cfg.maxmemory) {
        s->oom_rejections++;
        addReplyError(c, "-OOM " IR_OOM_MSG);
        rejected(c, cmd, before);
    } else if (aof_write_failed && ((cmd->flags & CMD_WRITE) || !strcmp(cmd->name, "ping"))) {
        char misconf[160];
        aofMisconf(misconf, sizeof(misconf));
        addReplyError(c, misconf);
        rejected(c, cmd, before);
    } else if (scriptBusy(s) && !commandAllowedBusy(cmd, c)) {
        /* a script past busy-reply-threshold serves the others this way;
         * an EXEC gives up its transaction (none of it runs), as Redis's */
        if (cmd->proc == execCommand && (c->flags & CLIENT_MULTI))
            execAbort(c, scriptBusyText(scriptBusyIsEval(s)));
        else addReplyBusyScript(c, scriptBusyIsEval(s));
        rejected(c, cmd, before);
    } else if ((c->flags & CLIENT_PUBSUB) && c->resp == 2 && !pubsubAllowedInContext(cmd)) {
        rejectCommandFormat(c,
                            "Can't execute '%s%s%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / "
                            "PING / QUIT / RESET are allowed in this context",
                            cmd->name, c->lastsub ? "|" : "", c->lastsub ? c->lastsub : "");
        rejected(c, cmd, before);
    } else if ((c->flags & CLIENT_MULTI) && !multiIsTxCommand(cmd)) {
        multiQueue(c, cmd);
    } else {
        dispatch_depth++;
        call(c, cmd);
        dispatch_depth--;
    }
    c->cmd = NULL;
    /* Send what this command referenced now; clientFlush copies the unpinned
     * references the socket refuses (pinned ones stay until written). */
    if (c->has_refs) clientFlush(c);
    outputLimits(s, c);
    if (s->blocked && !dispatch_depth) blockedHandle(s); /* serve the clients it made ready */
    return 0;
}
