/* commands.c - the command table (data), and connection/server commands. */
#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "blocked.h"
#include "commands.h"
#include "db.h"
#include "db_internal.h"
#include "replay.h"
#include "snapshot.h"

/* name, handler, arity, flags, first key, last key, key step, Redis flag words */
static ir_command commands[] = {
    {"ping", pingCommand, -1, CMD_FAST, 0, 0, 0, "fast", 0},
    {"echo", echoCommand, 2, CMD_FAST, 0, 0, 0, "fast", 0},
    {"quit", quitCommand, -1, CMD_FAST | CMD_NOAUTH, 0, 0, 0, "noscript loading stale fast no_auth", 0},
    {"select", selectCommand, 2, CMD_FAST, 0, 0, 0, "loading stale fast", 0},
    {"auth", authCommand, -2, CMD_FAST | CMD_NOAUTH, 0, 0, 0, "noscript loading stale fast no_auth", 0},
    {"hello", helloCommand, -1, CMD_FAST | CMD_NOAUTH, 0, 0, 0, "noscript loading stale fast no_auth", 0},
    {"client", clientCommand, -2, 0, 0, 0, 0, "noscript loading stale", 0},
    {"command", commandCommand, -1, 0, 0, 0, 0, "loading stale", 0},
    {"config", configCommand, -2, CMD_ADMIN, 0, 0, 0, "admin noscript loading stale", 0},
    {"info", infoCommand, -1, 0, 0, 0, 0, "loading stale", 0},
    {"shutdown", shutdownCommand, -1, CMD_ADMIN, 0, 0, 0, "admin noscript loading stale", 0},
    {"time", timeCommand, 1, CMD_FAST, 0, 0, 0, "loading stale fast", 0},
    {"save", saveCommand, 1, CMD_ADMIN, 0, 0, 0, "admin noscript no_async_loading no_multi", 0},
    {"bgsave", bgsaveCommand, -1, CMD_ADMIN, 0, 0, 0, "admin noscript no_async_loading", 0},
    {"lastsave", lastsaveCommand, 1, CMD_FAST, 0, 0, 0, "loading stale fast", 0},
    {"dbsize", dbsizeCommand, 1, CMD_READONLY | CMD_FAST, 0, 0, 0, "readonly fast", 0},
    {"flushdb", flushdbCommand, -1, CMD_WRITE, 0, 0, 0, "write", 0},
    {"flushall", flushallCommand, -1, CMD_WRITE, 0, 0, 0, "write", 0},
    {"del", delCommand, -2, CMD_WRITE, 1, -1, 1, "write", 0},
    {"exists", existsCommand, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, "readonly fast", 0},
    {"expire", expireCommand, -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"pexpire", pexpireCommand, -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"ttl", ttlCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"pttl", pttlCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"persist", persistCommand, 2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"type", typeCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"keys", keysCommand, 2, CMD_READONLY, 0, 0, 0, "readonly", 0},
    {"unlink", unlinkCommand, -2, CMD_WRITE | CMD_FAST, 1, -1, 1, "write fast", 0},
    {"touch", touchCommand, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, "readonly fast", 0},
    {"expireat", expireatCommand, -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"pexpireat", pexpireatCommand, -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"expiretime", expiretimeCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"pexpiretime", pexpiretimeCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"rename", renameCommand, 3, CMD_WRITE, 1, 2, 1, "write", 0},
    {"renamenx", renamenxCommand, 3, CMD_WRITE | CMD_FAST, 1, 2, 1, "write fast", 0},
    {"copy", copyCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, 2, 1, "write denyoom", 0},
    {"move", moveCommand, 3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"swapdb", swapdbCommand, 3, CMD_WRITE | CMD_FAST, 0, 0, 0, "write fast", 0},
    {"randomkey", randomkeyCommand, 1, CMD_READONLY, 0, 0, 0, "readonly", 0},
    {"scan", scanCommand, -2, CMD_READONLY, 0, 0, 0, "readonly", 0},
    {"object", objectCommand, -2, CMD_READONLY, 2, 2, 1, "readonly", 0},
    {"get", getCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"set", setCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom", 0},
    {"mget", mgetCommand, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, "readonly fast", 0},
    {"mset", msetCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 2, "write denyoom", 0},
    {"incr", incrCommand, 2, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"decr", decrCommand, 2, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"incrby", incrbyCommand, 3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"decrby", decrbyCommand, 3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"strlen", strlenCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"getex", getexCommand, -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"setex", setexCommand, 4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom", 0},
    {"psetex", psetexCommand, 4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom", 0},
    {"setnx", setnxCommand, 3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"getset", getsetCommand, 3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"getdel", getdelCommand, 2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"append", appendCommand, 3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"getrange", getrangeCommand, 4, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"substr", getrangeCommand, 4, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"setrange", setrangeCommand, 4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom", 0},
    {"msetnx", msetnxCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 2, "write denyoom", 0},
    {"setbit", setbitCommand, 4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom", 0},
    {"getbit", getbitCommand, 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"lcs", lcsCommand, -3, CMD_READONLY, 1, 2, 1, "readonly", 0},
    {"incrbyfloat", incrbyfloatCommand, 3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"lpush", lpushCommand, -3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"rpush", rpushCommand, -3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"lpop", lpopCommand, -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"rpop", rpopCommand, -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"llen", llenCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"lrange", lrangeCommand, 4, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"lpushx", lpushxCommand, -3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"rpushx", rpushxCommand, -3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"lindex", lindexCommand, 3, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"lset", lsetCommand, 4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom", 0},
    {"lrem", lremCommand, 4, CMD_WRITE, 1, 1, 1, "write", 0},
    {"ltrim", ltrimCommand, 4, CMD_WRITE, 1, 1, 1, "write", 0},
    {"linsert", linsertCommand, 5, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom", 0},
    {"lpos", lposCommand, -3, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"lmove", lmoveCommand, 5, CMD_WRITE | CMD_DENYOOM, 1, 2, 1, "write denyoom", 0},
    {"rpoplpush", rpoplpushCommand, 3, CMD_WRITE | CMD_DENYOOM, 1, 2, 1, "write denyoom", 0},
    {"lmpop", lmpopCommand, -4, CMD_WRITE, 0, 0, 0, "write movablekeys", 0},
    {"blpop", blpopCommand, -3, CMD_WRITE, 1, -2, 1, "write noscript blocking", 0},
    {"brpop", brpopCommand, -3, CMD_WRITE, 1, -2, 1, "write noscript blocking", 0},
    {"blmove", blmoveCommand, 6, CMD_WRITE | CMD_DENYOOM, 1, 2, 1, "write denyoom noscript blocking", 0},
    {"brpoplpush", brpoplpushCommand, 4, CMD_WRITE | CMD_DENYOOM, 1, 2, 1, "write denyoom noscript blocking", 0},
    {"blmpop", blmpopCommand, -5, CMD_WRITE, 0, 0, 0, "write blocking movablekeys", 0},
    {"hset", hsetCommand, -4, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"hmset", hmsetCommand, -4, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"hsetnx", hsetnxCommand, 4, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"hget", hgetCommand, 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"hmget", hmgetCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"hdel", hdelCommand, -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"hlen", hlenCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"hexists", hexistsCommand, 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"hstrlen", hstrlenCommand, 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"hgetall", hgetallCommand, 2, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"hkeys", hkeysCommand, 2, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"hvals", hvalsCommand, 2, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"hincrby", hincrbyCommand, 4, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"hincrbyfloat", hincrbyfloatCommand, 4, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"hrandfield", hrandfieldCommand, -2, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"hscan", hscanCommand, -3, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"sadd", saddCommand, -3, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom fast", 0},
    {"srem", sremCommand, -3, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"smembers", smembersCommand, 2, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"sismember", sismemberCommand, 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"smismember", smismemberCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"scard", scardCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "readonly fast", 0},
    {"spop", spopCommand, -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "write fast", 0},
    {"srandmember", srandmemberCommand, -2, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"smove", smoveCommand, 4, CMD_WRITE | CMD_FAST, 1, 2, 1, "write fast", 0},
    {"sinter", sinterCommand, -2, CMD_READONLY, 1, -1, 1, "readonly", 0},
    {"sintercard", sintercardCommand, -3, CMD_READONLY, 0, 0, 0, "readonly", 0},
    {"sinterstore", sinterstoreCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 1, "write denyoom", 0},
    {"sunion", sunionCommand, -2, CMD_READONLY, 1, -1, 1, "readonly", 0},
    {"sunionstore", sunionstoreCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 1, "write denyoom", 0},
    {"sdiff", sdiffCommand, -2, CMD_READONLY, 1, -1, 1, "readonly", 0},
    {"sdiffstore", sdiffstoreCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 1, "write denyoom", 0},
    {"sscan", sscanCommand, -3, CMD_READONLY, 1, 1, 1, "readonly", 0},
    {"replay.create", replayCreateCommand, -4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "write denyoom module", 0},
    {"replay.add", replayAddCommand, -4, CMD_WRITE | CMD_FAST | CMD_DENYOOM, 1, 1, 1, "write denyoom module", 0},
    {"replay.sample", replaySampleCommand, -3, CMD_READONLY, 1, 1, 1, "readonly module", 0},
    {"replay.update", replayUpdateCommand, 4, CMD_WRITE, 1, 1, 1, "write module", 0},
    {"replay.info", replayInfoCommand, 2, CMD_READONLY, 1, 1, 1, "readonly module", 0},
    {"replay.drop", replayDropCommand, 2, CMD_WRITE, 1, 1, 1, "write module", 0},
    {"replay.list", replayListCommand, 1, CMD_READONLY, 0, 0, 0, "readonly module", 0},
    {"replay.shards", replayShardsCommand, 1, CMD_READONLY | CMD_FAST, 0, 0, 0, "readonly fast module", 0},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Open-addressing index over the table, built on first lookup. */
#define CMD_INDEX_SIZE 256
static unsigned char cmd_index[CMD_INDEX_SIZE]; /* 1-based positions, 0 = empty */

static uint32_t nameHash(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint32_t)tolower((unsigned char)s[i])) * 16777619u;
    return h;
}

static void buildIndex(void) {
    for (size_t i = 0; i < NCOMMANDS; i++) {
        uint32_t h = nameHash(commands[i].name, strlen(commands[i].name)) % CMD_INDEX_SIZE;
        while (cmd_index[h]) h = (h + 1) % CMD_INDEX_SIZE;
        cmd_index[h] = (unsigned char)(i + 1);
    }
}

ir_command *lookupCommand(const char *name, size_t len) {
    if (!cmd_index[nameHash("ping", 4) % CMD_INDEX_SIZE] && NCOMMANDS) buildIndex();
    uint32_t h = nameHash(name, len) % CMD_INDEX_SIZE;
    while (cmd_index[h]) {
        ir_command *c = &commands[cmd_index[h] - 1];
        if (strlen(c->name) == len && strncasecmp(c->name, name, len) == 0) return c;
        h = (h + 1) % CMD_INDEX_SIZE;
    }
    return NULL;
}

const ir_command *commandTable(size_t *n) {
    *n = NCOMMANDS;
    return commands;
}

/* ---- connection commands -------------------------------------------------- */

/* PING [message] */
void pingCommand(client *c) {
    if (c->argc > 2) {
        addReplyErrorArity(c);
        return;
    }
    if (c->argc == 1) addReplyStr(c, shared.pong);
    else addReplyBulk(c, c->argv[1].ptr, c->argv[1].len);
}

/* ECHO message */
void echoCommand(client *c) { addReplyBulk(c, c->argv[1].ptr, c->argv[1].len); }

/* QUIT */
void quitCommand(client *c) {
    addReplyStr(c, shared.ok);
    c->flags |= CLIENT_CLOSE_AFTER_REPLY;
}

/* SELECT index: 0 .. databases-1. */
void selectCommand(client *c) {
    int id;
    if (getIntFromArg(c, 1, &id, NULL) != 0) return;
    if (id < 0 || id >= dbsCount(c->srv)) {
        addReplyError(c, "DB index is out of range");
        return;
    }
    c->db = id;
    addReplyStr(c, shared.ok);
}

/* Compare in time that depends only on the lengths, not on where bytes differ. */
static int secretEq(const char *a, size_t alen, const char *b, size_t blen) {
    unsigned char diff = alen != blen;
    size_t n = alen < blen ? alen : blen;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* The one user is "default"; its password is requirepass (none: any password). */
static int checkCredentials(client *c, const ir_arg *user, const ir_arg *pass) {
    const char *rp = c->srv->cfg.requirepass;
    if (user && !(user->len == 7 && memcmp(user->ptr, "default", 7) == 0)) return 0;
    if (!rp || !rp[0]) return 1;
    return secretEq(pass->ptr, pass->len, rp, strlen(rp));
}

/* AUTH [username] password */
void authCommand(client *c) {
    if (c->argc > 3) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    const char *rp = c->srv->cfg.requirepass;
    if (c->argc == 2 && (!rp || !rp[0])) {
        addReplyError(c, "AUTH <password> called without any password configured for the default "
                         "user. Are you sure your configuration is correct?");
        return;
    }
    const ir_arg *user = c->argc == 3 ? &c->argv[1] : NULL;
    if (!checkCredentials(c, user, &c->argv[c->argc - 1])) {
        addReplyError(c, "-WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    c->authenticated = 1;
    addReplyStr(c, shared.ok);
}

static int validClientName(const ir_arg *a) {
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] < '!' || a->ptr[i] > '~') return 0;
    return 1;
}

/* HELLO [protover [AUTH username password] [SETNAME clientname]]: protover 2
 * (RESP2) or 3 (RESP3); without one the protocol stays as it is. */
void helloCommand(client *c) {
    long long ver = 0; /* 0: keep the connection's protocol */
    if (c->argc >= 2) {
        if (!string2ll(c->argv[1].ptr, c->argv[1].len, &ver)) {
            addReplyError(c, "Protocol version is not an integer or out of range");
            return;
        }
        if (ver < 2 || ver > 3) {
            addReplyError(c, "-NOPROTO unsupported protocol version");
            return;
        }
    }
    int authed_here = 0;
    const ir_arg *name = NULL;
    for (int j = 2; j < c->argc; j++) {
        int more = c->argc - j - 1;
        if (argEq(c, j, "auth") && more >= 2) {
            if (!checkCredentials(c, &c->argv[j + 1], &c->argv[j + 2])) {
                addReplyError(c, "-WRONGPASS invalid username-password pair or user is disabled.");
                return;
            }
            authed_here = 1;
            j += 2;
        } else if (argEq(c, j, "setname") && more >= 1) {
            name = &c->argv[++j];
        } else {
            addReplyErrorFormat(c, "Syntax error in HELLO option '%.128s'", c->argv[j].ptr);
            return;
        }
    }
    if (authed_here) c->authenticated = 1;
    if (authRequired(c)) {
        addReplyError(c, "-NOAUTH HELLO must be called with the client already authenticated, "
                         "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                         "authenticate the client and select the RESP protocol version at the "
                         "same time");
        return;
    }
    if (name) { /* as CLIENT SETNAME, once authenticated */
        if (!validClientName(name)) {
            addReplyError(c, "Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        size_t n = name->len < sizeof(c->name) - 1 ? name->len : sizeof(c->name) - 1;
        memcpy(c->name, name->ptr, n);
        c->name[n] = '\0';
    }
    if (ver) c->resp = (int)ver; /* this reply already speaks the new protocol, as in Redis */
    addReplyMapLen(c, 7);
    addReplyBulkCString(c, "server");
    addReplyBulkCString(c, "redis");
    addReplyBulkCString(c, "version");
    addReplyBulkCString(c, IR_REDIS_VERSION);
    addReplyBulkCString(c, "proto");
    addReplyLongLong(c, c->resp);
    addReplyBulkCString(c, "id");
    addReplyLongLong(c, (long long)c->id);
    addReplyBulkCString(c, "mode");
    addReplyBulkCString(c, "standalone");
    addReplyBulkCString(c, "role");
    addReplyBulkCString(c, "master");
    addReplyBulkCString(c, "modules");
    addReplyArrayLen(c, 0);
}

typedef struct infobuf {
    char *p;
    size_t len, cap;
} infobuf;

static void infoCat(infobuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void infoCat(infobuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) return;
        b->p = p;
        b->cap = cap;
    }
}

/* Send a built text as one bulk (copied: the buffer is freed right after). */
static void addReplyInfobuf(client *c, infobuf *b) {
    memcpy(addReplyBulkReserve(c, b->len), b->p, b->len);
    free(b->p);
}

static void clientInfoLine(client *c, const client *o, char *buf, size_t len) {
    const ir_server *s = c->srv;
    snprintf(buf, len,
             "id=%llu addr=%s laddr=? fd=-1 name=%s age=%llu idle=%llu flags=N db=0 sub=0 psub=0 "
             "ssub=0 multi=-1 qbuf=%zu qbuf-free=%zu argv-mem=%zu multi-mem=0 obl=0 oll=%d "
             "omem=%zu tot-mem=0 events=r cmd=client|list user=default redir=-1 resp=2 "
             "lib-name=%s lib-ver=%s\n",
             (unsigned long long)o->id, o->addr, o->name,
             (unsigned long long)((s->now_ms - o->ctime_ms) / 1000),
             (unsigned long long)((s->now_ms - o->last_ms) / 1000), o->qlen - o->qpos,
             o->qcap - o->qlen, o->arglen, o->nsegs, o->olen, o->lib_name, o->lib_ver);
}

/* CLIENT ID | GETNAME | SETNAME name | SETINFO attr value | LIST | INFO | HELP */
void clientCommand(client *c) {
    if (argEq(c, 1, "id") && c->argc == 2) {
        addReplyLongLong(c, (long long)c->id);
    } else if (argEq(c, 1, "getname") && c->argc == 2) {
        addReplyBulkCString(c, c->name[0] ? c->name : NULL);
    } else if (argEq(c, 1, "setname") && c->argc == 3) {
        if (!validClientName(&c->argv[2])) {
            addReplyError(c, "Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        size_t n = c->argv[2].len < sizeof(c->name) - 1 ? c->argv[2].len : sizeof(c->name) - 1;
        memcpy(c->name, c->argv[2].ptr, n);
        c->name[n] = '\0';
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "setinfo") && c->argc == 4) {
        char *dst;
        size_t cap;
        if (argEq(c, 2, "lib-name")) dst = c->lib_name, cap = sizeof(c->lib_name);
        else if (argEq(c, 2, "lib-ver")) dst = c->lib_ver, cap = sizeof(c->lib_ver);
        else {
            addReplyErrorFormat(c, "Unrecognized option '%.64s'", c->argv[2].ptr);
            return;
        }
        if (!validClientName(&c->argv[3])) {
            addReplyErrorFormat(c, "%s cannot contain spaces, newlines or special characters.",
                                argEq(c, 2, "lib-name") ? "lib-name" : "lib-ver");
            return;
        }
        size_t n = c->argv[3].len < cap - 1 ? c->argv[3].len : cap - 1;
        memcpy(dst, c->argv[3].ptr, n);
        dst[n] = '\0';
        addReplyStr(c, shared.ok);
    } else if ((argEq(c, 1, "list") && c->argc == 2) || (argEq(c, 1, "info") && c->argc == 2)) {
        /* Each line is formatted once: the reply itself changes this
         * client's omem, so a second pass would not match the first. */
        char line[1024];
        infobuf b = {malloc(1024), 0, 1024};
        if (!b.p) {
            addReplyError(c, "out of memory");
            return;
        }
        int all = argEq(c, 1, "list");
        for (client *o = c->srv->clients; o; o = o->next) {
            if (!all && o != c) continue;
            clientInfoLine(c, o, line, sizeof(line));
            infoCat(&b, "%s", line);
        }
        addReplyInfobuf(c, &b);
    } else if (argEq(c, 1, "help")) {
        static const char *help[] = {
            "CLIENT <subcommand> [<arg> ...]. Subcommands are:",
            "GETNAME", "    Return the name of the current connection.",
            "ID", "    Return the ID of the current connection.",
            "INFO", "    Return information about the current client connection.",
            "LIST", "    Return information about client connections.",
            "SETINFO <option> <value>", "    Set client meta attr (lib-name, lib-ver).",
            "SETNAME <name>", "    Assign the name <name> to the current connection.",
        };
        addReplyArrayLen(c, (long)(sizeof(help) / sizeof(help[0])));
        for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++) addReplyStatus(c, help[i]);
    } else if (argEq(c, 1, "id") || argEq(c, 1, "getname") || argEq(c, 1, "setname") ||
               argEq(c, 1, "setinfo") || argEq(c, 1, "list") || argEq(c, 1, "info")) {
        addReplySubcommandArity(c, "client");
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try CLIENT HELP.", c->argv[1].ptr);
    }
}

static void addReplyCommandInfo(client *c, const ir_command *cmd) {
    addReplyArrayLen(c, 10);
    addReplyBulkCString(c, cmd->name);
    addReplyLongLong(c, cmd->arity);
    char flags[128];
    snprintf(flags, sizeof(flags), "%s", cmd->sflags);
    long nflags = 0;
    for (char *tok = strtok(flags, " "); tok; tok = strtok(NULL, " ")) nflags++;
    addReplyArrayLen(c, nflags);
    snprintf(flags, sizeof(flags), "%s", cmd->sflags);
    for (char *tok = strtok(flags, " "); tok; tok = strtok(NULL, " ")) addReplyStatus(c, tok);
    addReplyLongLong(c, cmd->firstkey);
    addReplyLongLong(c, cmd->lastkey);
    addReplyLongLong(c, cmd->keystep);
    addReplyArrayLen(c, 0); /* ACL categories */
    addReplyArrayLen(c, 0); /* tips */
    addReplyArrayLen(c, 0); /* key specs */
    addReplyArrayLen(c, 0); /* subcommands */
}

/* COMMAND [COUNT | INFO name... | LIST | DOCS [name...]] */
void commandCommand(client *c) {
    if (c->argc == 1) {
        addReplyArrayLen(c, (long)NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++) addReplyCommandInfo(c, &commands[i]);
    } else if (argEq(c, 1, "count") && c->argc == 2) {
        addReplyLongLong(c, (long long)NCOMMANDS);
    } else if (argEq(c, 1, "list") && c->argc == 2) {
        addReplyArrayLen(c, (long)NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++) addReplyBulkCString(c, commands[i].name);
    } else if (argEq(c, 1, "info")) {
        addReplyArrayLen(c, c->argc - 2);
        for (int i = 2; i < c->argc; i++) {
            const ir_command *cmd = lookupCommand(c->argv[i].ptr, c->argv[i].len);
            if (cmd) addReplyCommandInfo(c, cmd);
            else addReplyStr(c, shared.nullarray);
        }
    } else if (argEq(c, 1, "docs")) {
        addReplyArrayLen(c, 0); /* no docs: redis-cli falls back to its own hints */
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try COMMAND HELP.", c->argv[1].ptr);
    }
}

/* ---- CONFIG ------------------------------------------------------------- */

static void configValue(const ir_server *s, const char *name, char *buf, size_t len) {
    const ir_config *cfg = &s->cfg;
    if (!strcmp(name, "port")) snprintf(buf, len, "%d", s->tp ? s->tp->bound_port : cfg->port);
    else if (!strcmp(name, "bind")) snprintf(buf, len, "%s", cfg->bind);
    else if (!strcmp(name, "maxclients")) snprintf(buf, len, "%d", cfg->maxclients);
    else if (!strcmp(name, "proto-max-bulk-len"))
        snprintf(buf, len, "%llu", (unsigned long long)cfg->proto_max_bulk_len);
    else if (!strcmp(name, "client-query-buffer-limit"))
        snprintf(buf, len, "%llu", (unsigned long long)cfg->client_query_buffer_limit);
    else if (!strcmp(name, "tcp-backlog")) snprintf(buf, len, "%d", cfg->tcp_backlog);
    else if (!strcmp(name, "databases")) snprintf(buf, len, "%d", dbsCount(s));
    else if (!strcmp(name, "appendonly")) snprintf(buf, len, "no");
    else if (!strcmp(name, "protected-mode"))
        snprintf(buf, len, "%s", cfg->requirepass && cfg->requirepass[0] ? "no" : "yes");
    else if (!strcmp(name, "maxmemory"))
        snprintf(buf, len, "%llu", (unsigned long long)cfg->maxmemory);
    else if (!strcmp(name, "timeout")) snprintf(buf, len, "%d", cfg->timeout);
    else if (!strcmp(name, "tcp-keepalive")) snprintf(buf, len, "%d", cfg->tcp_keepalive);
    else if (!strcmp(name, "dir")) snprintf(buf, len, "%s", cfg->dir ? cfg->dir : ".");
    else if (!strcmp(name, "requirepass")) snprintf(buf, len, "%s", ""); /* never disclosed */
    else buf[0] = '\0'; /* save: no automatic snapshots */
}

static const char *config_names[] = {
    "port", "bind", "maxclients", "proto-max-bulk-len", "client-query-buffer-limit",
    "tcp-backlog", "databases", "appendonly", "save", "maxmemory", "timeout", "protected-mode",
    "tcp-keepalive", "dir", "requirepass",
};
#define NCONFIG (sizeof(config_names) / sizeof(config_names[0]))

/* CONFIG GET pattern [pattern ...] | SET parameter value | RESETSTAT */
void configCommand(client *c) {
    ir_server *s = c->srv;
    if (argEq(c, 1, "get") && c->argc >= 3) {
        int matched[NCONFIG] = {0};
        long n = 0;
        for (int i = 2; i < c->argc; i++)
            for (size_t k = 0; k < NCONFIG; k++)
                if (!matched[k] && fnmatch(c->argv[i].ptr, config_names[k], FNM_CASEFOLD) == 0)
                    matched[k] = 1, n++;
        addReplyMapLen(c, n);
        char val[4096]; /* dir is a path */
        for (size_t k = 0; k < NCONFIG; k++) {
            if (!matched[k]) continue;
            configValue(s, config_names[k], val, sizeof(val));
            addReplyBulkCString(c, config_names[k]);
            addReplyBulkCString(c, val);
        }
    } else if (argEq(c, 1, "set") && c->argc == 4) {
        long long v;
        if (argEq(c, 2, "maxclients") || argEq(c, 2, "proto-max-bulk-len")) {
            if (!string2ll(c->argv[3].ptr, c->argv[3].len, &v) || v < 1) {
                addReplyErrorFormat(c, "CONFIG SET failed (possibly related to argument '%s') - "
                                       "argument must be a positive integer", c->argv[2].ptr);
                return;
            }
            if (argEq(c, 2, "maxclients")) s->cfg.maxclients = (int)(v > 1000000 ? 1000000 : v);
            else s->cfg.proto_max_bulk_len = (uint64_t)v;
            addReplyStr(c, shared.ok);
        } else if (argEq(c, 2, "dir")) {
            char why[256];
            if (snapshotSetDir(s, c->argv[3].ptr, why, sizeof(why)) != 0) {
                addReplyErrorFormat(c, "CONFIG SET failed (possibly related to argument '%s') - %s",
                                    c->argv[2].ptr, why);
                return;
            }
            serverLog("Snapshot directory is now %s", s->cfg.dir);
            addReplyStr(c, shared.ok);
        } else if (argEq(c, 2, "maxmemory")) {
            if (!string2ll(c->argv[3].ptr, c->argv[3].len, &v) || v < 0) {
                addReplyErrorFormat(c, "CONFIG SET failed (possibly related to argument '%s') - "
                                       "argument must be a memory value", c->argv[2].ptr);
                return;
            }
            s->cfg.maxmemory = (uint64_t)v;
            addReplyStr(c, shared.ok);
        } else {
            addReplyErrorFormat(c, "Unknown option or number of arguments for CONFIG SET - '%.128s'",
                                c->argv[2].ptr);
        }
    } else if (argEq(c, 1, "resetstat") && c->argc == 2) {
        s->total_commands = s->total_connections = s->rejected_connections = 0;
        s->net_input_bytes = s->net_output_bytes = 0;
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "get") || argEq(c, 1, "set") || argEq(c, 1, "resetstat")) {
        addReplySubcommandArity(c, "config");
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try CONFIG HELP.", c->argv[1].ptr);
    }
}

/* ---- INFO --------------------------------------------------------------- */

static void bytesHuman(char *buf, size_t len, uint64_t n) {
    const char *u = "BKMGT";
    double d = (double)n;
    while (d >= 1024 && u[1]) d /= 1024, u++;
    if (*u == 'B') snprintf(buf, len, "%lluB", (unsigned long long)n);
    else snprintf(buf, len, "%.2f%c", d, *u);
}

static int wantSection(client *c, const char *name, int is_default) {
    if (c->argc == 1) return is_default;
    for (int i = 1; i < c->argc; i++) {
        if (argEq(c, i, name) || argEq(c, i, "all") || argEq(c, i, "everything")) return 1;
        if (argEq(c, i, "default") && is_default) return 1;
    }
    return 0;
}

/* INFO [section ...] */
void infoCommand(client *c) {
    ir_server *s = c->srv;
    infobuf b = {malloc(4096), 0, 4096};
    if (!b.p) {
        addReplyError(c, "out of memory");
        return;
    }
    b.p[0] = '\0';
    int sections = 0;
    uint64_t up = (s->now_ms - s->start_ms) / 1000;
    if (wantSection(c, "server", 1)) {
        struct utsname un;
        uname(&un);
        infoCat(&b, "%s# Server\r\nredis_version:%s\r\ninreplay_version:%s\r\nredis_mode:standalone\r\n"
                    "os:%s %s %s\r\narch_bits:64\r\nprocess_id:%ld\r\nrun_id:%s\r\ntcp_port:%d\r\n"
                    "stack:%s\r\nstack_build:%s\r\nevent_loop:%s\r\n"
                    "uptime_in_seconds:%llu\r\nuptime_in_days:%llu\r\n",
                sections++ ? "\r\n" : "", IR_REDIS_VERSION, IR_VERSION_STR, un.sysname, un.release,
                un.machine, (long)getpid(), s->run_id, s->tp ? s->tp->bound_port : s->cfg.port,
                s->tp ? s->tp->ops->name : "none", s->tp && s->tp->build ? s->tp->build : "",
                s->loop_mode ? s->loop_mode : "", (unsigned long long)up,
                (unsigned long long)(up / 86400));
    }
    if (wantSection(c, "clients", 1)) {
        ir_blocked_stats bst;
        blockedStats(s, &bst);
        infoCat(&b, "%s# Clients\r\nconnected_clients:%llu\r\nmaxclients:%d\r\nblocked_clients:%llu\r\n"
                    "total_blocking_keys:%llu\r\n",
                sections++ ? "\r\n" : "", (unsigned long long)s->nclients, s->cfg.maxclients,
                (unsigned long long)bst.blocked_clients, (unsigned long long)bst.blocked_keys);
    }
    if (wantSection(c, "memory", 1)) {
        char h[32];
        uint64_t used = serverUsedMemory(s);
        bytesHuman(h, sizeof(h), used);
        infoCat(&b, "%s# Memory\r\nused_memory:%llu\r\nused_memory_human:%s\r\n"
                    "used_memory_rss:%llu\r\nused_memory_dataset:%llu\r\n"
                    "used_memory_replay:%llu\r\nused_memory_replay_items:%llu\r\n"
                    "used_memory_pinned_detached:%llu\r\npinned_buffers:%llu\r\n"
                    "maxmemory:%llu\r\nmaxmemory_policy:noeviction\r\n"
                    "oom_rejections:%llu\r\n",
                sections++ ? "\r\n" : "", (unsigned long long)used, h,
                (unsigned long long)ir_rss_bytes(), (unsigned long long)dbsBytes(s),
                (unsigned long long)tablesMemory(s->tables),
                (unsigned long long)tablesBytes(s->tables),
                (unsigned long long)s->pins.detached_bytes, (unsigned long long)s->pins.nused,
                (unsigned long long)s->cfg.maxmemory, (unsigned long long)s->oom_rejections);
    }
    if (wantSection(c, "persistence", 1)) {
        char pbuf[8192];
        snapshotInfo(s, pbuf, sizeof(pbuf));
        infoCat(&b, "%s%s", sections++ ? "\r\n" : "", pbuf);
    }
    if (wantSection(c, "stats", 1)) {
        infoCat(&b, "%s# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
                    "total_net_input_bytes:%llu\r\ntotal_net_output_bytes:%llu\r\n"
                    "rejected_connections:%llu\r\neventloop_cycles:%llu\r\n",
                sections++ ? "\r\n" : "", (unsigned long long)s->total_connections,
                (unsigned long long)s->total_commands, (unsigned long long)s->net_input_bytes,
                (unsigned long long)s->net_output_bytes,
                (unsigned long long)s->rejected_connections,
                (unsigned long long)s->eventloop_cycles);
        ir_blocked_stats bst; /* blocked.c: how waits ended */
        blockedStats(s, &bst);
        infoCat(&b, "total_blocked_clients:%llu\r\nblocked_timeouts:%llu\r\n"
                    "blocked_disconnects:%llu\r\nblocked_dropped:%llu\r\n",
                (unsigned long long)bst.total_blocked, (unsigned long long)bst.timeouts,
                (unsigned long long)bst.disconnects, (unsigned long long)bst.dropped);
    }
    if (wantSection(c, "keyspace", 1)) {
        infoCat(&b, "%s# Keyspace\r\n", sections++ ? "\r\n" : "");
        for (int i = 0; i < dbsCount(s); i++)
            if (dbSize(dbsAt(s, i)))
                infoCat(&b, "db%d:keys=%llu,expires=%llu,avg_ttl=0\r\n", i,
                        (unsigned long long)dbSize(dbsAt(s, i)),
                        (unsigned long long)dbExpires(dbsAt(s, i)));
    }
    if (wantSection(c, "replay", 1)) {
        infoCat(&b, "%s# Replay\r\nreplay_tables:%zu\r\n", sections++ ? "\r\n" : "",
                s->tables->count);
        for (ir_table *t = s->tables->head; t; t = t->next) {
            infoCat(&b, "table:name=%s,size=%llu,capacity=%llu,inserts=%llu,samples=%llu,"
                        "updates=%llu,stale_updates=%llu,bytes_used=%llu\r\n",
                    t->name, (unsigned long long)tableSize(t), (unsigned long long)t->o.capacity,
                    (unsigned long long)t->inserts, (unsigned long long)t->samples,
                    (unsigned long long)t->updates, (unsigned long long)t->stale_updates,
                    (unsigned long long)t->bytes_used);
        }
    }
    if (wantSection(c, "commandstats", 0)) {
        infoCat(&b, "%s# Commandstats\r\n", sections++ ? "\r\n" : "");
        for (size_t i = 0; i < NCOMMANDS; i++)
            if (commands[i].calls)
                infoCat(&b, "cmdstat_%s:calls=%llu\r\n", commands[i].name,
                        (unsigned long long)commands[i].calls);
    }
    addReplyInfobuf(c, &b);
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], as Redis 7.0 without
 * replicas: the save (SAVE, or save-on-shutdown without NOSAVE) runs here, so
 * that a failed one answers an error and the server keeps running (FORCE:
 * exits anyway). On success there is no reply: the connection closes and the
 * loop ends (run.c). ABORT cancels a shutdown a signal asked for that the
 * loop has not carried out yet (see run.c). NOW does nothing here: there are
 * no replicas to wait for. */
void shutdownCommand(client *c) {
    ir_server *s = c->srv;
    int nosave = 0, save = 0, force = 0, abort_ = 0, flags = 0;
    for (int i = 1; i < c->argc; i++) {
        if (argEq(c, i, "nosave")) nosave = 1;
        else if (argEq(c, i, "save")) save = 1;
        else if (argEq(c, i, "now")) (void)0;
        else if (argEq(c, i, "force")) force = 1;
        else if (argEq(c, i, "abort")) abort_ = 1;
        else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
        if (!argEq(c, i, "abort")) flags = 1;
    }
    if ((abort_ && flags) || (nosave && save)) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    if (abort_) { /* a signal's shutdown not yet carried out; SHUTDOWN's is certain */
        if (s->shutdown_asap != SHUTDOWN_SAVE_PER_CONFIG) {
            addReplyError(c, "No shutdown in progress.");
            return;
        }
        s->shutdown_asap = 0;
        serverLog("Shutdown manually aborted.");
        addReplyStr(c, shared.ok);
        return;
    }
    serverLog("User requested shutdown...");
    if (save || (s->cfg.save_on_shutdown && !nosave)) {
        char msg[1024];
        serverLog("Saving the final snapshot before exiting.");
        if (snapshotSave(s, msg, sizeof(msg)) != IR_OK) {
            if (!force) {
                serverLog("Errors trying to shut down the server. Check the logs for more "
                          "information.");
                addReplyError(c, "Errors trying to SHUTDOWN. Check logs.");
                return;
            }
            serverLog("Error trying to save the DB, but ignoring due to FORCE");
        }
    }
    s->shutdown_asap = SHUTDOWN_DONE;
    c->flags |= CLIENT_CLOSE_ASAP; /* like Redis: no reply, the connection closes */
}

/* TIME */
void timeCommand(client *c) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    addReplyArrayLen(c, 2);
    addReplyBulkLongLong(c, (long long)ts.tv_sec);
    addReplyBulkLongLong(c, (long long)ts.tv_nsec / 1000);
}
