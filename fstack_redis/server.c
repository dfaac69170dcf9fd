/* server.c - clients, dispatch and the server object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "db.h"
#include "replay.h"

ir_server *g_server;


void ir_config_init(ir_config *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->stack = "kernel";
    cfg->bind = "127.0.0.1";
    cfg->port = 6379;
    cfg->proto_max_bulk_len = 512ULL * 1024 * 1024;
    cfg->client_query_buffer_limit = 1024ULL * 1024 * 1024;
    cfg->maxclients = 10000;
    cfg->tcp_backlog = 511;
    cfg->default_maxbytes = 1024ULL * 1024 * 1024;
    cfg->table_alpha = 0.6;
    cfg->table_beta = 0.4;
    cfg->table_epsilon = 1e-6;
    cfg->request_timeout_ms = 30000;
    cfg->tcp_keepalive = 300;
    cfg->dir = ".";
}

ir_server *server_new(const ir_config *cfg) {
    ir_server *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->cfg = *cfg;
    s->db = dbNew();
    s->tables = tablesNew();
    if (!s->db || !s->tables) {
        server_free(s);
        return NULL;
    }
    s->start_ms = s->now_ms = ir_mstime();
    s->next_client_id = 1;
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
    while (s->clients) freeClient(s->clients);
    if (s->db) dbFree(s->db);
    tablesFree(s->tables);
    free(s);
}

void server_tick(ir_server *s) {
    s->now_ms = ir_mstime();
    dbActiveExpire(s->db, s->now_ms);
}

/* ---- clients ------------------------------------------------------------ */

client *irs_accept(ir_server *s, ir_transport *t, ir_conn *conn) {
    if (s->nclients >= (uint64_t)s->cfg.maxclients) {
        static const char err[] = "-ERR max number of clients reached\r\n";
        struct iovec iov = {(void *)err, sizeof(err) - 1};
        t->ops->writev(t, conn, &iov, 1);
        s->rejected_connections++;
        return NULL;
    }
    client *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->id = s->next_client_id++;
    c->srv = s;
    c->tp = t;
    c->conn = conn;
    c->bulklen = -1;
    c->ctime_ms = c->last_ms = s->now_ms;
    t->ops->peername(t, conn, c->addr, sizeof(c->addr));
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
    resetClientArgs(c);
    if (c->prev) c->prev->next = c->next;
    else s->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nclients--;
    free(c->qbuf);
    free(c->argv);
    free(c->argoff);
    free(c->argbuf);
    free(c->obuf);
    free(c->segs);
    free(c);
}

/* After input or output progress: close the client if it is done. */
static void clientAfterIO(client *c) {
    if (c->pending_bytes && !(c->flags & CLIENT_CLOSE_ASAP)) clientFlush(c);
    if ((c->flags & CLIENT_CLOSE_ASAP) ||
        ((c->flags & CLIENT_CLOSE_AFTER_REPLY) && c->pending_bytes == 0))
        freeClient(c);
}

void irs_data(client *c, const char *buf, size_t len) {
    c->srv->net_input_bytes += len;
    c->last_ms = c->srv->now_ms;
    clientFeed(c, buf, len);
    clientAfterIO(c);
}

void irs_writable(client *c) { clientAfterIO(c); }

void irs_closed(client *c) {
    c->flags |= CLIENT_CLOSED;
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

int processCommand(client *c) {
    ir_server *s = c->srv;
    ir_command *cmd = lookupCommand(c->argv[0].ptr, c->argv[0].len);
    if (!cmd) {
        rejectUnknown(c);
        return 0;
    }
    c->cmd = cmd;
    if ((cmd->arity > 0 && cmd->arity != c->argc) || (c->argc < -cmd->arity)) {
        addReplyErrorArity(c);
        c->cmd = NULL;
        return 0;
    }
    cmd->proc(c);
    c->cmd = NULL;
    cmd->calls++;
    s->total_commands++;
    /* Replies may point into values and arenas that the next command can
     * change: send them now (clientFlush copies whatever the socket refuses). */
    if (c->has_refs) clientFlush(c);
    return 0;
}
