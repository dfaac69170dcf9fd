/* replication.c - the master side of replication (see replication.h).
 *
 * A replica connects as a client and sends SYNC, or PSYNC <id> <offset>
 * (answered +FULLRESYNC <replid> <offset>: there is no backlog, so every
 * synchronization is a full one). The RDB image of the keyspace is built in
 * memory on the spot (rdbBuild: the server thread walks the keyspace, no
 * fork) and sent as "$<len>\r\n<payload>"; from then on the client is a
 * replica: every write command reaches it as a RESP array, through the normal
 * client output path, and it gets no replies to what it sends (REPLCONF ACK).
 *
 * The stream is encoded once per command into a buffer of this file; small
 * commands are copied into each replica's output, big ones (>= IR_REF_MIN)
 * are shared: one copy that every replica's output refers to (a pin, see
 * server.h). The replication offset counts the bytes of the stream, as
 * Redis's master_repl_offset does.
 */
#include "replication.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aof.h"
#include "blocked.h"
#include "db_internal.h"
#include "rdb.h"

int repl_nslaves;
int repl_aof;
int repl_loading;
int repl_cmd_dirty;
long long repl_ping_period = 10;
long long repl_lazy_expire;
long long repl_lazy_server_del;

typedef struct slave {
    client *c;
    long long port;   /* REPLCONF listening-port */
    char ip[64];      /* REPLCONF ip-address, else the peer's address */
    uint64_t ack_off; /* REPLCONF ACK */
    uint64_t ack_ms;
    uint64_t start_off;     /* the stream's offset when it synchronized */
    uint64_t soft_since_ms; /* over the soft output limit since, 0 = not over */
} slave;

typedef struct pendop {
    int db;
    size_t off, len;
} pendop;

static struct {
    slave *slaves;
    int cap;
    char replid[41];
    uint64_t offset; /* bytes of stream so far */
    int seldb;       /* the database the stream is in, -1 = none yet */
    int depth;       /* call() nesting while replicas are attached */
    int prevent;     /* the running command is not propagated itself */
    ir_bytes pend;   /* the pending commands of the top-level command, encoded */
    pendop *ops;
    int nops, opcap;
    ir_bytes enc; /* one command being encoded */
    uint64_t last_ping_ms;
    ir_arg **own; /* big arguments lent to running commands (replCallBegin) */
    size_t nown, owncap;
} R = {.seldb = -1};

static bqueue waitq = {.kind = BLOCKED_WAIT}; /* the clients in WAIT */

static void replidInit(const ir_server *s) {
    if (R.replid[0]) return;
    for (int i = 0; i < 40; i++) R.replid[i] = s->run_id[39 - i]; /* as INFO has always shown it */
    R.replid[40] = '\0';
}

/* ---- encoding ------------------------------------------------------------- */

static void ebufPut(const char *p, size_t n) { irBytesPut(&R.enc, p, n, 256); }

static void ebufHeader(char type, size_t n) {
    char h[32];
    int k = snprintf(h, sizeof(h), "%c%zu\r\n", type, n);
    ebufPut(h, (size_t)k);
}

static void ebufBulk(const char *p, size_t n) {
    ebufHeader('$', n);
    ebufPut(p, n);
    ebufPut("\r\n", 2);
}

/* ---- feeding the replicas -------------------------------------------------- */

/* Bytes of stream to every replica. A big chunk (a parameter blob) is copied
 * once into memory a pin owns, and every replica's output refers to it; the
 * last replica to write it frees it. */
static void sendAll(const char *p, size_t n) {
    R.offset += n;
    if (n >= IR_REF_MIN && repl_nslaves) {
        char *mem = ir_xrealloc(NULL, n);
        memcpy(mem, p, n);
        ir_pin *holder = NULL;
        ir_pin *pin = pinAcquire(&R.slaves[0].c->srv->pins, &holder);
        pin->refs++; /* ours, until the memory is the pin's */
        for (int i = 0; i < repl_nslaves; i++) {
            client *c = R.slaves[i].c;
            if (!(c->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSED)))
                addReplyRefPinned(c, mem, n, &holder);
        }
        pinDetach(pin, mem, 0, n);
        pinRelease(pin); /* frees it now if no replica took it */
        return;
    }
    for (int i = 0; i < repl_nslaves; i++) {
        client *c = R.slaves[i].c;
        if (c->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSED)) continue;
        addReplyProto(c, p, n);
    }
}

/* client-output-buffer-limit's replica class, over the stream bytes still
 * pending (not the RDB image queued before them). 1 if over it. */
static int overLimit(slave *sl) {
    client *c = sl->c;
    uint64_t fed = R.offset - sl->start_off;
    uint64_t pending = c->pending_bytes < fed ? c->pending_bytes : fed;
    if (obl_slave[0] && pending > obl_slave[0]) return 1;
    if (!obl_slave[1] || pending <= obl_slave[1]) {
        sl->soft_since_ms = 0;
        return 0;
    }
    uint64_t now = ir_mstime();
    if (!sl->soft_since_ms) sl->soft_since_ms = now;
    return now - sl->soft_since_ms >= obl_slave[2] * 1000;
}

static void flushAll(void) {
    for (int i = 0; i < repl_nslaves; i++) {
        slave *sl = &R.slaves[i];
        client *c = sl->c;
        if (c->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSED)) continue;
        if (c->pending_bytes) clientFlush(c);
        if (!(c->flags & CLIENT_CLOSE_ASAP) && overLimit(sl)) {
            serverLog("Client %s (id %llu) scheduled to be closed ASAP for overcoming of output "
                      "buffer limits (replica).",
                      c->addr, (unsigned long long)c->id);
            c->srv->output_limit_disconnects++;
            c->flags |= CLIENT_CLOSE_ASAP;
        }
    }
}

/* One encoded command to every replica, after a SELECT if db (>= 0) is not
 * the stream's database. */
static void feedReplicas(int db, const char *p, size_t n) {
    if (!repl_nslaves) return;
    if (db >= 0 && db != R.seldb) {
        char num[16], sel[64];
        int k = snprintf(num, sizeof(num), "%d", db);
        int m = snprintf(sel, sizeof(sel), "*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n", k, num);
        sendAll(sel, (size_t)m);
        R.seldb = db;
    }
    sendAll(p, n);
}

/* ... and to the AOF (which selects its database itself). */
static void feed(int db, const char *p, size_t n) {
    feedReplicas(db, p, n);
    if (repl_aof) aofFeed(db, p, n);
}

/* The end of a top-level command's stream: the replicas' output goes out,
 * the AOF is written (before any reply is). */
static void flushOut(void) {
    if (repl_nslaves) flushAll();
    if (repl_aof) aofFlush();
}

static void pendAdd(int db) {
    if (R.nops == R.opcap) {
        R.opcap = R.opcap ? R.opcap * 2 : 8;
        R.ops = ir_xrealloc(R.ops, (size_t)R.opcap * sizeof(*R.ops));
    }
    R.ops[R.nops++] = (pendop){db, R.pend.len, R.enc.len};
    irBytesPut(&R.pend, R.enc.p, R.enc.len, 1024);
}

/* The encoded command in ebuf: pending while a command runs, else at once. */
static void propagateEncoded(int db) {
    if (!replActive()) return;
    if (R.depth > 0) {
        pendAdd(db);
    } else {
        feed(db, R.enc.p, R.enc.len);
        flushOut();
    }
}

static void flushPending(void) {
    static const char multi[] = "*1\r\n$5\r\nMULTI\r\n", exec[] = "*1\r\n$4\r\nEXEC\r\n";
    if (R.nops && replActive()) {
        int wrap = R.nops > 1;
        if (wrap) feed(R.ops[0].db, multi, sizeof(multi) - 1);
        for (int i = 0; i < R.nops; i++) feed(R.ops[i].db, R.pend.p + R.ops[i].off, R.ops[i].len);
        if (wrap) feed(-1, exec, sizeof(exec) - 1);
        flushOut();
    }
    R.nops = 0;
    R.pend.len = 0;
}

static void encodeStrs(int argc, const ir_str *argv) {
    R.enc.len = 0;
    ebufHeader('*', (size_t)argc);
    for (int i = 0; i < argc; i++) ebufBulk(argv[i].p, argv[i].len);
}

void replAlso(client *c, int argc, const ir_str *argv) {
    if (!replActive()) return;
    encodeStrs(argc, argv);
    propagateEncoded(c->db);
}

void replRewrite(client *c, int argc, const ir_str *argv) {
    if (!replActive()) return;
    R.prevent = 1;
    replAlso(c, argc, argv);
}

void replRewriteSetPxat(client *c, int vi, long long when) {
    if (!replActive()) return;
    char num[24];
    int n = ll2string(num, sizeof(num), when);
    ir_str argv[5] = {
        IR_STR("SET"), replArg(c, 1), replArg(c, vi), IR_STR("PXAT"), {num, (size_t)n}};
    replRewrite(c, 5, argv);
}

void replRewritePexpireat(client *c, long long when, int first) {
    if (!replActive()) return;
    char num[24];
    int n = ll2string(num, sizeof(num), when);
    int argc = 3;
    R.enc.len = 0;
    if (first) argc += c->argc - first;
    ebufHeader('*', (size_t)argc);
    ebufBulk("PEXPIREAT", 9);
    ebufBulk(c->argv[1].ptr, c->argv[1].len);
    ebufBulk(num, (size_t)n);
    for (int i = first; first && i < c->argc; i++) ebufBulk(c->argv[i].ptr, c->argv[i].len);
    R.prevent = 1;
    propagateEncoded(c->db);
}

void replRewriteDel(client *c, int lazy) {
    if (!replActive()) return;
    ir_str argv[2] = {lazy ? IR_STR("UNLINK") : IR_STR("DEL"), replArg(c, 1)};
    replRewrite(c, 2, argv);
}

void replPrevent(client *c) {
    (void)c;
    R.prevent = 1;
}

void replPropagateExpired(struct ir_db *db, const char *key, size_t len) {
    if (!replActive()) return;
    ir_str argv[2] = {repl_lazy_expire ? IR_STR("UNLINK") : IR_STR("DEL"), {key, len}};
    encodeStrs(2, argv);
    feed(db->id, R.enc.p, R.enc.len); /* at once, never inside a MULTI */
    flushOut();
}

/* ---- call() ------------------------------------------------------------------ */

void replCallBegin(client *c, replFrame *f) {
    f->ownbase = R.nown;
    for (int i = 0; i < c->argc; i++) {
        if (!c->argv[i].owned) continue;
        if (R.nown == R.owncap) {
            R.owncap = R.owncap ? R.owncap * 2 : 16;
            R.own = ir_xrealloc(R.own, R.owncap * sizeof(*R.own));
        }
        R.own[R.nown++] = &c->argv[i];
        c->argv[i].owned = 0;
    }
    f->dirty = repl_cmd_dirty;
    f->prevent = R.prevent;
    repl_cmd_dirty = 0;
    R.prevent = 0;
    R.depth++;
}

/* Commands Redis propagates whether or not they changed a key. */
static int alwaysPropagated(const ir_command *cmd) {
    const char *n = cmd->name;
    return !strcmp(n, "publish") || !strcmp(n, "flushall") || !strcmp(n, "flushdb") ||
           !strcmp(n, "swapdb");
}

/* A write command, or a container's write subcommand (FUNCTION LOAD). */
static int isWrite(const ir_command *cmd, const client *c) {
    if (cmd->flags & CMD_WRITE) return 1;
    const char *f = commandSubFlags(cmd, c);
    for (const char *p = f; p && *p;) {
        size_t n = strcspn(p, " ");
        if (n == 5 && !strncmp(p, "write", 5)) return 1;
        p += n;
        p += strspn(p, " ");
    }
    return 0;
}

void replCallEnd(client *c, const ir_command *cmd, replFrame *f) {
    if (replActive() && !R.prevent && strncmp(cmd->name, "replay.", 7) != 0 &&
        ((repl_cmd_dirty && isWrite(cmd, c)) || alwaysPropagated(cmd))) {
        R.enc.len = 0;
        ebufHeader('*', (size_t)c->argc);
        for (int i = 0; i < c->argc; i++) ebufBulk(c->argv[i].ptr, c->argv[i].len);
        pendAdd(c->db);
    }
    while (R.nown > f->ownbase) R.own[--R.nown]->owned = 1;
    repl_cmd_dirty |= f->dirty;
    R.prevent = f->prevent;
    if (--R.depth == 0) {
        uint64_t before = R.offset;
        flushPending();
        if (R.offset != before) c->woff = R.offset; /* what WAIT waits for, as Redis's c->woff */
    }
}

/* ---- SYNC / PSYNC / REPLCONF --------------------------------------------------- */

int replAcceptsFromReplica(const ir_command *cmd) {
    return cmd->proc == replconfCommand || cmd->proc == syncCommand || !strcmp(cmd->name, "ping");
}

static slave *slaveOf(client *c) {
    for (int i = 0; i < repl_nslaves; i++)
        if (R.slaves[i].c == c) return &R.slaves[i];
    return NULL;
}

/* Before SYNC a replica's REPLCONF listening-port / ip-address are kept here,
 * by client id (the last HS_SLOTS clients that sent them). */
#define HS_SLOTS 16
typedef struct handshake {
    uint64_t id;
    long long port;
    char ip[64];
} handshake;
static handshake hss[HS_SLOTS];
static unsigned hs_next;

/* c's handshake record: found, or (create) a new one in the oldest slot. */
static handshake *handshakeOf(const client *c, int create) {
    for (int i = 0; i < HS_SLOTS; i++)
        if (hss[i].id == c->id) return &hss[i];
    if (!create) return NULL;
    handshake *h = &hss[hs_next++ % HS_SLOTS];
    memset(h, 0, sizeof(*h));
    h->id = c->id;
    return h;
}

/* SYNC, PSYNC <replid> <offset> */
void syncCommand(client *c) {
    ir_server *s = c->srv;
    if (c->flags & CLIENT_SLAVE) return; /* already a replica: ignored, as Redis */
    if (c->flags & CLIENT_MULTI) {
        addReplyError(c, "Command not allowed inside a transaction");
        return;
    }
    replidInit(s);
    if (argEq(c, 0, "psync")) {
        char line[96];
        int n = snprintf(line, sizeof(line), "+FULLRESYNC %s %llu\r\n", R.replid,
                         (unsigned long long)R.offset);
        addReplyProto(c, line, (size_t)n);
    }
    size_t len = 0;
    char *rdb = rdbBuild(s, R.replid, R.offset, &len);
    if (!rdb) {
        addReplyError(c, "out of memory building the RDB image for the replica");
        return;
    }
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", len);
    addReplyProto(c, hdr, (size_t)n);
    addReplyProto(c, rdb, len);
    free(rdb);
    if (repl_nslaves == R.cap) {
        R.cap = R.cap ? R.cap * 2 : 4;
        R.slaves = ir_xrealloc(R.slaves, (size_t)R.cap * sizeof(*R.slaves));
    }
    slave *sl = &R.slaves[repl_nslaves];
    memset(sl, 0, sizeof(*sl));
    sl->c = c;
    sl->ack_ms = s->now_ms;
    sl->start_off = R.offset;
    /* the peer's address without the port */
    const char *a = c->addr, *end = strrchr(a, ':');
    if (*a == '[') a++, end = strchr(a, ']');
    size_t alen = end ? (size_t)(end - a) : strlen(a);
    if (alen >= sizeof(sl->ip)) alen = sizeof(sl->ip) - 1;
    memcpy(sl->ip, a, alen);
    sl->ip[alen] = '\0';
    handshake *h = handshakeOf(c, 0);
    if (h) { /* what its handshake's REPLCONF said */
        sl->port = h->port;
        if (h->ip[0]) memcpy(sl->ip, h->ip, sizeof(sl->ip));
        h->id = 0;
    }
    repl_nslaves++;
    c->flags |= CLIENT_SLAVE;
    R.seldb = -1; /* the new replica learns the database from the next SELECT */
    R.last_ping_ms = s->now_ms;
    serverLog("Replica %s asks for synchronization: full resync with an RDB image of %zu bytes "
              "(the keyspace only: replay tables are not replicated)",
              c->addr, len);
}

/* REPLCONF <option> <value> [<option> <value> ...] */
void replconfCommand(client *c) {
    if (c->argc % 2 == 0) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    for (int j = 1; j < c->argc; j += 2) {
        const ir_arg *v = &c->argv[j + 1];
        if (argEq(c, j, "listening-port")) {
            long long port;
            if (getLongLongFromArg(c, j + 1, &port) != 0) return;
            handshakeOf(c, 1)->port = port;
            slave *sl = slaveOf(c);
            if (sl) sl->port = port;
        } else if (argEq(c, j, "ip-address")) {
            if (v->len >= sizeof(((handshake *)0)->ip)) {
                addReplyErrorFormat(c,
                                    "REPLCONF ip-address provided by replica instance is too "
                                    "long: %zu bytes",
                                    v->len);
                return;
            }
            memcpy(handshakeOf(c, 1)->ip, v->ptr, v->len + 1);
        } else if (argEq(c, j, "capa") || argEq(c, j, "rdb-only")) {
            /* eof, psync2: noted, the RDB is always sent with its length */
        } else if (argEq(c, j, "ack")) {
            slave *sl = slaveOf(c);
            long long off;
            if (!sl) return;
            if (string2ll(v->ptr, v->len, &off) && off >= 0 && (uint64_t)off > sl->ack_off)
                sl->ack_off = (uint64_t)off;
            sl->ack_ms = c->srv->now_ms;
            if (waitq.n) blockedQueueReady(c->srv, &waitq); /* WAIT's clients count again */
            return;                                         /* never answered */
        } else if (argEq(c, j, "getack")) {
            return; /* only a replica answers GETACK */
        } else {
            addReplyErrorFormat(c, "Unrecognized REPLCONF option: %s", c->argv[j].ptr);
            return;
        }
    }
    addReplyStr(c, shared.ok);
}

/* The replicas that acknowledged offset off or more. */
static long long acksFor(uint64_t off) {
    long long n = 0;
    for (int i = 0; i < repl_nslaves; i++)
        if (R.slaves[i].ack_off >= off) n++;
    return n;
}

/* WAIT numreplicas timeout: the number of replicas that acknowledged the
 * client's last write, once numreplicas did or after timeout ms (0: no
 * limit); the replicas are asked for their offset (REPLCONF GETACK *) when
 * the client starts waiting, as Redis does before it sleeps. */
void waitCommand(client *c) {
    long long want, ms;
    if (getLongLongFromArg(c, 1, &want) != 0) return;
    if (!string2ll(c->argv[2].ptr, c->argv[2].len, &ms)) {
        addReplyError(c, "timeout is not an integer or out of range");
        return;
    }
    if (ms < 0) {
        addReplyError(c, "timeout is negative");
        return;
    }
    uint64_t now = ir_mstime();
    if (ms > 0 && ms > LLONG_MAX - (long long)now) {
        addReplyError(c, "timeout is out of range");
        return;
    }
    long long acks = acksFor(c->woff);
    if (acks >= want || !blockingAllowed(c)) {
        addReplyLongLong(c, acks);
        return;
    }
    int first = !(c->flags & CLIENT_BLOCKED);
    blockForWait(c, &waitq, ms > 0 ? now + (uint64_t)ms : 0);
    if (first && repl_nslaves) {
        static const char getack[] = "*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
        feedReplicas(-1, getack, sizeof(getack) - 1);
        flushAll();
    }
}

void replFreeClient(client *c) {
    for (int i = 0; i < repl_nslaves; i++) {
        if (R.slaves[i].c != c) continue;
        serverLog("Connection with replica %s lost", c->addr);
        R.slaves[i] = R.slaves[repl_nslaves - 1];
        repl_nslaves--;
        break;
    }
    if (!replActive()) {
        R.nops = 0;
        R.pend.len = 0;
    }
}

void replCron(ir_server *s) {
    /* replicas over their output limit go now, even if their socket never drains */
    for (int i = repl_nslaves - 1; i >= 0; i--)
        if (R.slaves[i].c->flags & CLIENT_CLOSE_ASAP) freeClient(R.slaves[i].c);
    if (!repl_nslaves) return;
    if (s->now_ms - R.last_ping_ms >= (uint64_t)repl_ping_period * 1000) {
        R.last_ping_ms = s->now_ms;
        feedReplicas(-1, "*1\r\n$4\r\nping\r\n", 14); /* lower case, as Redis */
        flushAll();
    }
}

/* ---- INFO replication, ROLE ------------------------------------------------------- */

char *replInfo(const ir_server *s) {
    replidInit(s);
    size_t cap = 512 + (size_t)repl_nslaves * 160;
    char *b = ir_xrealloc(NULL, cap);
    size_t len = (size_t)snprintf(b, cap, "role:master\r\nconnected_slaves:%d\r\n", repl_nslaves);
    for (int i = 0; i < repl_nslaves; i++) {
        const slave *sl = &R.slaves[i];
        uint64_t lag = (s->now_ms - sl->ack_ms) / 1000;
        len += (size_t)snprintf(
            b + len, cap - len, "slave%d:ip=%s,port=%lld,state=online,offset=%llu,lag=%llu\r\n", i,
            sl->ip, sl->port, (unsigned long long)sl->ack_off, (unsigned long long)lag);
    }
    snprintf(b + len, cap - len,
             "master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
             "master_replid2:0000000000000000000000000000000000000000\r\n"
             "master_repl_offset:%llu\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
             "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\n"
             "repl_backlog_histlen:0\r\n",
             R.replid, (unsigned long long)R.offset);
    return b;
}

void replRoleReply(client *c) {
    addReplyArrayLen(c, 3);
    addReplyBulkCString(c, "master");
    addReplyLongLong(c, (long long)R.offset);
    addReplyArrayLen(c, repl_nslaves);
    for (int i = 0; i < repl_nslaves; i++) {
        const slave *sl = &R.slaves[i];
        char port[24], off[24];
        snprintf(port, sizeof(port), "%lld", sl->port);
        snprintf(off, sizeof(off), "%llu", (unsigned long long)sl->ack_off);
        addReplyArrayLen(c, 3);
        addReplyBulkCString(c, sl->ip);
        addReplyBulkCString(c, port);
        addReplyBulkCString(c, off);
    }
}
