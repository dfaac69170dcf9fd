/* commands.c - the command table (data), and connection/server commands. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "acl.h"
#include "blocked.h"
#include "commands.h"
#include "config.h"
#include "db.h"
#include "db_internal.h"
#include "debug.h"
#include "memory.h"
#include "multi.h"
#include "pubsub.h"
#include "replay.h"
#include "replication.h"
#include "functions.h"
#include "script.h"
#include "slowlog.h"
#include "snapshot.h"
#include "aof.h"
#include "t_param.h"
#include "t_replay.h"
#include "t_traj.h"

/* ---- the command table -------------------------------------------------------
 * One description, fstack_redis/commands.json (as Redis 7.0's src/commands/ JSON
 * files), generated into the arrays below by gen_commands.py at build time;
 * nothing else lists commands. Per command: name, handler, arity, first key,
 * last key, key step, Redis's flag words (parsed into CMD_* bits once, when the
 * index is built), its ACL categories beyond those its flags imply (acl.c derives
 * @write, @read, @admin, @dangerous, @pubsub, @fast, @slow and @blocking from the
 * flag words, as Redis does), then the parsed bits, the call counter, the
 * category bits and the ACL id (set when the index is built); its docs (COMMAND
 * DOCS) at the same index of command_docs[]. */

/* The subcommands of the container commands, for COMMAND and the statistics
 * ("client|list"); their docs at the same index of subcommand_docs[]. */
typedef struct subcmd {
    ir_command_proc *container;
    const char *cname, *name;
    int arity;
    const char *sflags;
    const char *acl; /* ACL categories beyond the derived ones, as ir_command.acl */
} subcmd;

typedef struct cmddoc {
    const char *summary, *since, *group, *complexity; /* complexity: "" when not given */
} cmddoc;

/* Key specs: where a command's keys are and what it does with them, as Redis
 * 7.0's key specs say (COMMAND INFO, COMMAND GETKEYS and GETKEYSANDFLAGS read
 * them): from argument `begin`, either a range (lastkey: >= 0 relative to begin,
 * < 0 from the end; keystep; limit) or a key count (keynumidx relative to begin,
 * then firstkey and keystep relative to it). One row per spec, a command's rows
 * together; "container|sub" for a subcommand. The replay commands are
 * inreplay's own: one key at 1 (a table, or REPLAY.STREAM's and REPLAY.APPEND's
 * trajectory stream, so that ACL key patterns confine a user to its
 * experiment's names). */
enum {
    KS_RANGE,
    KS_KEYNUM,
    KS_UNKNOWN,
    KS_KEYWORD_RANGE
}; /* unknown: where the keys are
    depends on the arguments (SORT's BY/GET/STORE); keyword range: see searchKeyword */

typedef struct keyspec {
    const char *cmd, *flags;
    int begin, kind, a, b,
        c; /* range: lastkey, keystep, limit; keynum: keynumidx, firstkey, keystep */
} keyspec;

/* KS_KEYWORD_RANGE: a range found after a keyword searched for from index `begin`
 * (XREAD's STREAMS): the command's keyword, in the order of its keyword specs. */
typedef struct keyword_spec {
    const char *cmd, *keyword;
} keyword_spec;

#include "commands_table.inc"
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Open-addressing index over the table, built on first lookup: at most half
 * full, so a probe always reaches an empty slot (a full index looped forever on
 * an unknown name; positions were bytes, 255 commands at the most). */
#define CMD_INDEX_SIZE 1024
static uint16_t cmd_index[CMD_INDEX_SIZE]; /* 1-based positions, 0 = empty */
_Static_assert(sizeof(commands) / sizeof(commands[0]) <= CMD_INDEX_SIZE / 2,
               "the command index must stay at most half full: raise CMD_INDEX_SIZE");

static uint32_t nameHash(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint32_t)tolower((unsigned char)s[i])) * 16777619u;
    return h;
}

/* The flag words the server acts on; the others are for COMMAND's output only. */
static const struct {
    const char *word;
    int bit;
} flag_bits[] = {
    {"write", CMD_WRITE},
    {"readonly", CMD_READONLY},
    {"fast", CMD_FAST},
    {"no_auth", CMD_NOAUTH},
    {"admin", CMD_ADMIN},
    {"denyoom", CMD_DENYOOM},
    {"no_multi", CMD_NO_MULTI},
    {"skip_monitor", CMD_SKIP_MONITOR},
    {"skip_slowlog", CMD_SKIP_SLOWLOG},
    {"allow_busy", CMD_ALLOW_BUSY},
    {"no_mandatory_keys", CMD_NO_MANDATORY_KEYS},
    {"protected", CMD_PROTECTED},
};

static int parseFlagWords(const char *words) {
    int bits = 0;
    for (const char *p = words; *p;) {
        size_t n = strcspn(p, " ");
        for (size_t k = 0; k < sizeof(flag_bits) / sizeof(flag_bits[0]); k++)
            if (strlen(flag_bits[k].word) == n && !strncmp(p, flag_bits[k].word, n))
                bits |= flag_bits[k].bit;
        p += n;
        p += strspn(p, " ");
    }
    return bits;
}

static void buildSubIndex(void);

static void buildIndex(void) {
    for (size_t i = 0; i < NCOMMANDS; i++) {
        commands[i].flags = parseFlagWords(commands[i].sflags);
        uint64_t explicit = aclCategoryWords(commands[i].acl);
        commands[i].cats =
            explicit |
            aclCategoriesOfFlags(commands[i].sflags,
                                 !!(explicit & (1ull << aclCategoryIndex("scripting", 9))));
        commands[i].id = (int)i;
        uint32_t h = nameHash(commands[i].name, strlen(commands[i].name)) % CMD_INDEX_SIZE;
        while (cmd_index[h]) h = (h + 1) % CMD_INDEX_SIZE;
        cmd_index[h] = (uint16_t)(i + 1);
    }
    buildSubIndex();
}

static void ensureIndex(void) {
    if (!cmd_index[nameHash("ping", 4) % CMD_INDEX_SIZE] && NCOMMANDS) buildIndex();
}

ir_command *lookupCommand(const char *name, size_t len) {
    ensureIndex();
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
    if ((c->flags & CLIENT_PUBSUB) && c->resp == 2) { /* subscribed: ["pong", message] */
        addReplyArrayLen(c, 2);
        addReplyBulkCString(c, "pong");
        if (c->argc == 1) addReplyBulkCString(c, "");
        else addReplyBulk(c, c->argv[1].ptr, c->argv[1].len);
    } else if (c->argc == 1) {
        addReplyStr(c, shared.pong);
    } else {
        addReplyBulk(c, c->argv[1].ptr, c->argv[1].len);
    }
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

/* AUTH [username] password */
void authCommand(client *c) {
    if (c->argc > 3) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    /* as Redis: the password, and the user's name with it */
    redactArg(c, 1);
    if (c->argc == 3) redactArg(c, 2);
    if (c->argc == 2 && aclDefaultIsNopass(c->srv)) {
        addReplyError(c, "AUTH <password> called without any password configured for the default "
                         "user. Are you sure your configuration is correct?");
        return;
    }
    const ir_arg *user = c->argc == 3 ? &c->argv[1] : NULL;
    if (!aclAuthenticate(c, user, &c->argv[c->argc - 1])) {
        addReplyError(c, "-WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    addReplyStr(c, shared.ok);
}

static int validClientName(const ir_arg *a);

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
    /* the options in order, as Redis 7.0: each AUTH authenticates (its user and
     * password redacted first), a bad name or a failed AUTH ends the command
     * there (what follows is neither read nor redacted) */
    const ir_arg *setname = NULL;
    for (int j = 2; j < c->argc; j++) {
        int more = c->argc - j - 1;
        if (argEq(c, j, "auth") && more >= 2) {
            redactArg(c, j + 1);
            redactArg(c, j + 2);
            if (!aclAuthenticate(c, &c->argv[j + 1], &c->argv[j + 2])) {
                addReplyError(c, "-WRONGPASS invalid username-password pair or user is disabled.");
                return;
            }
            j += 2;
        } else if (argEq(c, j, "setname") && more >= 1) {
            setname = &c->argv[++j]; /* set as CLIENT SETNAME does, once authenticated */
            if (!validClientName(setname)) {
                addReplyError(
                    c, "Client names cannot contain spaces, newlines or special characters.");
                return;
            }
        } else {
            addReplyErrorFormat(c, "Syntax error in HELLO option '%.128s'", c->argv[j].ptr);
            return;
        }
    }
    if (setname && !authRequired(c) && clientSetName(c, setname) != 0) return;
    if (authRequired(c)) {
        addReplyError(c, "-NOAUTH HELLO must be called with the client already authenticated, "
                         "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                         "authenticate the client and select the RESP protocol version at the "
                         "same time");
        return;
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

/* Client names: printable ASCII without spaces, any length (Redis's rule,
 * the same for CLIENT SETNAME and HELLO ... SETNAME). */
static int validClientName(const ir_arg *a) {
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] < '!' || a->ptr[i] > '~') return 0;
    return 1;
}

int clientSetName(client *c, const ir_arg *a) {
    if (!validClientName(a)) {
        addReplyError(c, "Client names cannot contain spaces, newlines or special characters.");
        return -1;
    }
    free(c->clientname);
    c->clientname = NULL;
    if (a->len) {
        c->clientname = malloc(a->len + 1);
        if (!c->clientname) {
            addReplyError(c, "out of memory");
            return -1;
        }
        memcpy(c->clientname, a->ptr, a->len);
        c->clientname[a->len] = '\0';
    }
    return 0;
}

typedef struct infobuf {
    char *p;
    size_t len, cap;
} infobuf;

/* This boot of the kernel's id (the same in every namespace and container
 * on the machine), "" if it cannot be read. */
static const char *bootId(void) {
    static char id[40];
    static int done;
    if (!done) {
        done = 1;
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (f) {
            if (!fgets(id, sizeof(id), f)) id[0] = '\0';
            fclose(f);
            id[strcspn(id, "\r\n")] = '\0';
        }
    }
    return id;
}

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

/* ---- subcommands, command and error statistics ----------------------------- */

#define NSUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static uint64_t sub_cats[NSUBCOMMANDS];
static int sub_parent[NSUBCOMMANDS];
static void buildSpecIndex(void);

static void buildSubIndex(void) {
    uint64_t scripting = 1ull << aclCategoryIndex("scripting", 9);
    for (size_t k = 0; k < NSUBCOMMANDS; k++) {
        uint64_t explicit = aclCategoryWords(subcommands[k].acl);
        sub_cats[k] =
            explicit | aclCategoriesOfFlags(subcommands[k].sflags, !!(explicit & scripting));
        sub_parent[k] = -1;
        for (size_t i = 0; i < NCOMMANDS; i++)
            if (commands[i].proc == subcommands[k].container &&
                !strcmp(commands[i].name, subcommands[k].cname))
                sub_parent[k] = (int)i;
    }
    buildSpecIndex();
}

/* LATENCY HISTOGRAM: Redis records each call's duration in ns (at least 1 µs,
 * at most 1 s) in an HdrHistogram of 2 significant digits and reports it by
 * powers of two from 1024 ns; the counts per power of two are all it shows, so
 * they are all that is kept: bucket k holds the calls whose duration is at
 * most hdrLevelTop(10 + k) ns. */
#define LAT_LEVELS 21 /* 2^10 .. 2^30 ns */

static const ir_command *lookupFullName(const ir_arg *a, const subcmd **sub);

typedef struct cmdstat {
    uint64_t calls, ns, rejected, failed; /* ns: the calls' time (INFO shows usec) */
    uint64_t hcalls, hist[LAT_LEVELS];
} cmdstat;

static cmdstat cmdstats[NCOMMANDS], substats[NSUBCOMMANDS];

#define ERRSTAT_MAX 128 /* distinct error codes tracked, as Redis */
static struct {
    char code[32];
    uint64_t count;
} errstats[ERRSTAT_MAX];
static size_t nerrstats;

static int isContainer(const ir_command *cmd) {
    return cmd->proc == clientCommand || cmd->proc == commandCommand ||
           cmd->proc == configCommand || cmd->proc == pubsubCommand || cmd->proc == memoryCommand ||
           cmd->proc == objectCommand || cmd->proc == clusterCommand ||
           cmd->proc == scriptCommand || cmd->proc == xgroupCommand || cmd->proc == xinfoCommand ||
           cmd->proc == slowlogCommand || cmd->proc == latencyCommand ||
           cmd->proc == functionCommand || cmd->proc == aclCommand;
}

static const subcmd *findSub(const ir_command *cmd, const char *name, size_t len) {
    for (size_t i = 0; i < NSUBCOMMANDS; i++)
        if (subcommands[i].container == cmd->proc && strlen(subcommands[i].name) == len &&
            strncasecmp(subcommands[i].name, name, len) == 0)
            return &subcommands[i];
    return NULL;
}

const char *commandSubName(const ir_command *cmd, const client *c) {
    if (!isContainer(cmd) || c->argc < 2) return NULL;
    const subcmd *sc = findSub(cmd, c->argv[1].ptr, c->argv[1].len);
    return sc ? sc->name : NULL;
}

const char *commandSubFlags(const ir_command *cmd, const client *c) {
    if (!isContainer(cmd) || c->argc < 2) return NULL;
    const subcmd *sc = findSub(cmd, c->argv[1].ptr, c->argv[1].len);
    return sc ? sc->sflags : NULL;
}

int commandAllowedBusy(const ir_command *cmd, const client *c) {
    if (cmd->flags & CMD_ALLOW_BUSY) return 1;
    const char *f = commandSubFlags(cmd, c);
    return f && strstr(f, "allow_busy") != NULL;
}

static cmdstat *statFor(const client *c, const ir_command *cmd) {
    if (c->lastsub && isContainer(cmd)) {
        const subcmd *sc = findSub(cmd, c->lastsub, strlen(c->lastsub));
        if (sc) return &substats[sc - subcommands];
    }
    return &cmdstats[cmd - commands];
}

/* instantaneous_ops_per_sec: the mean of the last 16 rates, each over at
 * least 100 ms, sampled as commands run (INFO is one). */
#define OPS_SAMPLES 16
static uint64_t ops_samples[OPS_SAMPLES], ops_last_ms, ops_last_total;
static unsigned ops_idx;

static void opsSample(const ir_server *s) {
    uint64_t dt = s->now_ms - ops_last_ms;
    if (dt < 100) return;
    uint64_t rate = (s->total_commands - ops_last_total) * 1000 / dt;
    if (dt > 100 * OPS_SAMPLES || !ops_last_ms) /* idle since: the old rates are stale */
        for (int i = 0; i < OPS_SAMPLES; i++) ops_samples[i] = rate;
    ops_samples[ops_idx++ % OPS_SAMPLES] = rate;
    ops_last_ms = s->now_ms;
    ops_last_total = s->total_commands;
}

static uint64_t opsPerSec(void) {
    uint64_t sum = 0;
    for (int i = 0; i < OPS_SAMPLES; i++) sum += ops_samples[i];
    return sum / OPS_SAMPLES;
}

static void latencyRecord(cmdstat *st, uint64_t ns);

void commandStatsCall(const client *c, const ir_command *cmd, uint64_t ns, int failed) {
    cmdstat *st = statFor(c, cmd);
    /* LATENCY HISTOGRAM, as Redis: not for a command that blocked */
    if (latencyTracking && !(c->flags & CLIENT_BLOCKED)) latencyRecord(st, ns);
    if (c->srv->now_ms - ops_last_ms >= 100) opsSample(c->srv);
    st->calls++;
    st->ns += ns;
    st->failed += failed != 0;
    commands[cmd - commands].calls++;
}

void commandStatsRejected(const client *c, const ir_command *cmd) { statFor(c, cmd)->rejected++; }

void commandStatsUnblocked(const client *c, const ir_command *cmd, int failed) {
    statFor(c, cmd)->failed += failed != 0;
}

/* The highest value HdrHistogram (2 significant digits: 128 sub-buckets per
 * half) counts at the reporting level 2^m; the top level is cut at the
 * histogram's end (1 s is trackable, 2^30 - 1 its last value). */
static uint64_t hdrLevelTop(int m) {
    if (m >= 30) return (1ull << 30) - 1;
    return (1ull << m) + (1ull << (m - 7)) - 1;
}

static void latencyRecord(cmdstat *st, uint64_t ns) {
    ns = ns < 1000 ? 1000 : ns > 1000000000ull ? 1000000000ull : ns;
    int m = 64 - __builtin_clzll(ns - 1);        /* the smallest m with 2^m >= ns */
    if (m > 10 && ns <= hdrLevelTop(m - 1)) m--; /* within 2^(m-1)'s equivalent range */
    if (m < 10) m = 10;
    if (m > 30) m = 30;
    st->hcalls++;
    st->hist[m - 10]++;
}

static void addReplyLatencyCDF(client *c, const char *fullname, const cmdstat *st) {
    addReplyBulkCString(c, fullname);
    addReplyMapLen(c, 2);
    addReplyBulkCString(c, "calls");
    addReplyLongLong(c, (long long)st->hcalls);
    addReplyBulkCString(c, "histogram_usec");
    long n = 0;
    for (int k = 0; k < LAT_LEVELS; k++) n += st->hist[k] != 0;
    addReplyMapLen(c, n);
    uint64_t cum = 0;
    for (int k = 0; k < LAT_LEVELS; k++) {
        if (!st->hist[k]) continue;
        cum += st->hist[k];
        addReplyLongLong(c, (long long)(hdrLevelTop(10 + k) / 1000));
        addReplyLongLong(c, (long long)cum);
    }
}

/* The command's (or subcommand's) histogram and those of its subcommands, as
 * Redis lists them for LATENCY HISTOGRAM name; the count of replies added
 * (when reply is 0, only counted). */
static long latencyCDFOf(client *c, const ir_command *cmd, const subcmd *only, int reply) {
    long n = 0;
    char full[64];
    if (only) {
        const cmdstat *st = &substats[only - subcommands];
        if (st->hcalls) {
            n++;
            snprintf(full, sizeof(full), "%s|%s", only->cname, only->name);
            if (reply) addReplyLatencyCDF(c, full, st);
        }
        return n;
    }
    const cmdstat *st = &cmdstats[cmd - commands];
    if (st->hcalls) {
        n++;
        if (reply) addReplyLatencyCDF(c, cmd->name, st);
    }
    for (size_t k = 0; k < NSUBCOMMANDS; k++) {
        if (subcommands[k].container != cmd->proc || !substats[k].hcalls) continue;
        n++;
        snprintf(full, sizeof(full), "%s|%s", subcommands[k].cname, subcommands[k].name);
        if (reply) addReplyLatencyCDF(c, full, &substats[k]);
    }
    return n;
}

/* LATENCY HISTOGRAM [command ...] */
void latencyHistogramCommand(client *c) {
    long n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) addReplyMapLen(c, n);
        if (c->argc == 2) {
            for (size_t i = 0; i < NCOMMANDS; i++)
                n += latencyCDFOf(c, &commands[i], NULL, pass) * !pass;
            continue;
        }
        for (int j = 2; j < c->argc; j++) {
            const subcmd *sc;
            const ir_command *cmd = lookupFullName(&c->argv[j], &sc);
            if (cmd) n += latencyCDFOf(c, cmd, sc, pass) * !pass;
        }
    }
}

void errorStatsCount(ir_server *s, const char *reply, size_t len) {
    size_t n = 0;
    while (n < len && n < sizeof(errstats[0].code) - 1 && reply[n] != ' ' && reply[n] != '\r') n++;
    s->total_error_replies++;
    for (size_t i = 0; i < nerrstats; i++) {
        if (strlen(errstats[i].code) == n && memcmp(errstats[i].code, reply, n) == 0) {
            errstats[i].count++;
            return;
        }
    }
    if (nerrstats == ERRSTAT_MAX) return; /* Redis stops tracking new codes too */
    memcpy(errstats[nerrstats].code, reply, n);
    errstats[nerrstats].code[n] = '\0';
    errstats[nerrstats++].count = 1;
}

/* ---- CLIENT ---------------------------------------------------------------- */

static uint64_t clientMemory(const client *o) {
    uint64_t b = o->qcap + o->ocap + o->argcap + (uint64_t)o->segcap * sizeof(ir_seg) +
                 (uint64_t)o->argv_cap * (sizeof(ir_arg) + sizeof(size_t)) + sizeof(*o) +
                 multiQueueBytes(o);
    for (int i = 0; i < o->argc; i++)
        if (o->argv[i].owned) b += o->argv[i].len + 2;
    return b;
}

static void clientInfoLine(client *c, const client *o, char *buf, size_t len) {
    const ir_server *s = c->srv;
    char flags[16], *f = flags;
    int sub, psub;
    pubsubClientCounts(o, &sub, &psub);
    if (o->flags & CLIENT_PUBSUB) *f++ = 'P';
    if (o->flags & CLIENT_MULTI) *f++ = 'x';
    if (o->flags & CLIENT_BLOCKED) *f++ = 'b';
    if (o->flags & CLIENT_DIRTY_CAS) *f++ = 'd';
    if (o->flags & CLIENT_CLOSE_AFTER_REPLY) *f++ = 'c';
    if (o->flags & CLIENT_CLOSE_ASAP) *f++ = 'A';
    if (o->flags & CLIENT_UNIX_SOCKET) *f++ = 'U';
    if (f == flags) *f++ = 'N';
    *f = '\0';
    size_t argvmem = 0;
    for (int i = 0; i < o->argc; i++) argvmem += o->argv[i].len;
    size_t obl = 0; /* copied bytes not yet written (of the first segment, its unsent part) */
    for (int i = 0; i < o->nsegs; i++)
        if (!o->segs[i].ref) obl += o->segs[i].len - (i == 0 ? o->sent : 0);
    char cmd[64];
    if (o->lastcmd)
        snprintf(cmd, sizeof(cmd), "%s%s%s", o->lastcmd->name, o->lastsub ? "|" : "",
                 o->lastsub ? o->lastsub : "");
    else snprintf(cmd, sizeof(cmd), "NULL");
    /* qbuf: the query buffer as read, the commands of this read being run
     * included (Redis trims it after them too) */
    snprintf(buf, len,
             "id=%llu addr=%s laddr=%s fd=-1 name=%s age=%llu idle=%llu flags=%s db=%d sub=%d "
             "psub=%d ssub=%d multi=%d qbuf=%zu qbuf-free=%zu argv-mem=%zu multi-mem=%zu rbs=%zu "
             "rbp=%zu obl=%zu oll=%d omem=%zu tot-mem=%llu events=r%s cmd=%s user=%s "
             "redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
             (unsigned long long)o->id, o->addr, o->laddr, o->clientname ? o->clientname : "",
             (unsigned long long)((s->now_ms - o->ctime_ms) / 1000),
             (unsigned long long)((s->now_ms - o->last_ms) / 1000), flags, o->db, sub, psub,
             pubsubClientShards(o), (o->flags & CLIENT_MULTI) ? multiQueueCount(o) : -1, o->qlen,
             o->qcap - o->qlen, argvmem, multiQueueBytes(o), o->ocap, o->ocap, obl, o->nsegs,
             o->pending_bytes - obl, (unsigned long long)clientMemory(o),
             o->pending_bytes ? "w" : "", cmd, aclClientUserName(o), o->resp, o->lib_name,
             o->lib_ver);
}

/* CLIENT LIST's and KILL's TYPE: normal, master, replica (slave), pubsub. */
static int clientTypeByName(const ir_arg *a) {
    static const char *names[] = {"normal", "slave", "replica", "pubsub", "master"};
    for (int i = 0; i < 5; i++)
        if (a->len == strlen(names[i]) && strncasecmp(a->ptr, names[i], a->len) == 0)
            return i == 2 ? 1 : i;
    return -1;
}

static int clientType(const client *o) { return (o->flags & CLIENT_PUBSUB) ? 3 : 0; }

static void clientList(client *c, int all) {
    /* CLIENT LIST [TYPE type] [ID id [id ...]] */
    int type = -1;
    int idstart = 0, idend = 0;
    if (all) {
        for (int i = 2; i < c->argc; i++) {
            if (argEq(c, i, "type") && i + 1 < c->argc) {
                type = clientTypeByName(&c->argv[i + 1]);
                if (type < 0) {
                    addReplyErrorFormat(c, "Unknown client type '%.128s'", c->argv[i + 1].ptr);
                    return;
                }
                i++;
            } else if (argEq(c, i, "id") && i + 1 < c->argc) {
                idstart = i + 1;
                for (i = idstart; i < c->argc; i++) {
                    long long id;
                    if (!string2ll(c->argv[i].ptr, c->argv[i].len, &id) || id <= 0) {
                        addReplyError(c, "Invalid client ID");
                        return;
                    }
                }
                idend = c->argc;
            } else {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
        }
    }
    /* Each line is formatted once: the reply itself changes this
     * client's omem, so a second pass would not match the first. */
    char line[1024];
    infobuf b = {malloc(1024), 0, 1024};
    if (!b.p) {
        addReplyError(c, "out of memory");
        return;
    }
    for (client *o = c->srv->clients; o; o = o->next) {
        if (!all && o != c) continue;
        if (type >= 0 && clientType(o) != type) continue;
        if (idstart) {
            int hit = 0;
            for (int i = idstart; i < idend && !hit; i++) {
                long long id;
                string2ll(c->argv[i].ptr, c->argv[i].len, &id);
                hit = (uint64_t)id == o->id;
            }
            if (!hit) continue;
        }
        clientInfoLine(c, o, line, sizeof(line));
        infoCat(&b, "%s", line);
    }
    if (c->resp >= 3 && !all) { /* CLIENT INFO is a verbatim string in RESP3 */
        char hdr[32];
        int n = snprintf(hdr, sizeof(hdr), "=%zu\r\ntxt:", b.len + 4);
        addReplyProto(c, hdr, (size_t)n);
        addReplyProto(c, b.p, b.len);
        addReplyProto(c, "\r\n", 2);
        free(b.p);
        return;
    }
    addReplyInfobuf(c, &b);
}

/* CLIENT KILL addr | CLIENT KILL [ID id] [TYPE t] [USER u] [ADDR a] [LADDR a] [SKIPME yes|no] */
static void clientKill(client *c) {
    ir_server *s = c->srv;
    if (c->argc == 3) { /* the old form */
        for (client *o = s->clients; o; o = o->next) {
            if (strlen(o->addr) == c->argv[2].len &&
                memcmp(o->addr, c->argv[2].ptr, c->argv[2].len) == 0) {
                addReplyStr(c, shared.ok);
                if (o == c) c->flags |= CLIENT_CLOSE_AFTER_REPLY;
                else freeClient(o);
                return;
            }
        }
        addReplyError(c, "No such client");
        return;
    }
    if (c->argc % 2 != 0) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    long long id = 0;
    int type = -1, skipme = 1;
    const ir_arg *addr = NULL, *laddr = NULL, *user = NULL;
    for (int i = 2; i < c->argc; i += 2) {
        const ir_arg *v = &c->argv[i + 1];
        if (argEq(c, i, "id")) {
            if (!string2ll(v->ptr, v->len, &id) || id <= 0) {
                addReplyError(c, "client-id should be greater than 0");
                return;
            }
        } else if (argEq(c, i, "type")) {
            type = clientTypeByName(v);
            if (type < 0) {
                addReplyErrorFormat(c, "Unknown client type '%.128s'", v->ptr);
                return;
            }
        } else if (argEq(c, i, "addr")) {
            addr = v;
        } else if (argEq(c, i, "laddr")) {
            laddr = v;
        } else if (argEq(c, i, "user")) {
            if (!aclUserExists(s, v->ptr, v->len)) {
                addReplyErrorFormat(c, "No such user '%.128s'", v->ptr);
                return;
            }
            user = v;
        } else if (argEq(c, i, "skipme")) {
            if (argEq(c, i + 1, "yes")) skipme = 1;
            else if (argEq(c, i + 1, "no")) skipme = 0;
            else {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    long long killed = 0;
    int self = 0;
    for (client *o = s->clients, *next; o; o = next) {
        next = o->next;
        if (id && o->id != (uint64_t)id) continue;
        if (type >= 0 && clientType(o) != type) continue;
        if (user && !aclClientIsUser(o, user->ptr, user->len)) continue;
        if (addr && !(strlen(o->addr) == addr->len && memcmp(o->addr, addr->ptr, addr->len) == 0))
            continue;
        if (laddr &&
            !(strlen(o->laddr) == laddr->len && memcmp(o->laddr, laddr->ptr, laddr->len) == 0))
            continue;
        if (o == c && skipme) continue;
        killed++;
        if (o == c) self = 1;
        else freeClient(o);
    }
    addReplyLongLong(c, killed);
    if (self) c->flags |= CLIENT_CLOSE_AFTER_REPLY;
}

/* CLIENT ID | GETNAME | SETNAME name | SETINFO attr value | LIST | INFO | KILL |
 * REPLY ON|OFF|SKIP | UNBLOCK id [TIMEOUT|ERROR] | NO-EVICT ON|OFF | HELP */
void clientCommand(client *c) {
    if (argEq(c, 1, "id") && c->argc == 2) {
        addReplyLongLong(c, (long long)c->id);
    } else if (argEq(c, 1, "getname") && c->argc == 2) {
        addReplyBulkCString(c, c->clientname);
    } else if (argEq(c, 1, "setname") && c->argc == 3) {
        if (clientSetName(c, &c->argv[2]) == 0) addReplyStr(c, shared.ok);
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
        if (c->argv[3].len >= cap) {
            addReplyErrorFormat(c, "%s is longer than %zu bytes",
                                argEq(c, 2, "lib-name") ? "lib-name" : "lib-ver", cap - 1);
            return;
        }
        memcpy(dst, c->argv[3].ptr, c->argv[3].len);
        dst[c->argv[3].len] = '\0';
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "list")) {
        clientList(c, 1);
    } else if (argEq(c, 1, "info") && c->argc == 2) {
        clientList(c, 0);
    } else if (argEq(c, 1, "kill") && c->argc >= 3) {
        clientKill(c);
    } else if (argEq(c, 1, "reply") && c->argc == 3) {
        if (argEq(c, 2, "on")) {
            c->reply_mode = CLIENT_REPLY_ON;
            addReplyStr(c, shared.ok);
        } else if (argEq(c, 2, "off")) {
            c->reply_mode = CLIENT_REPLY_OFF;
        } else if (argEq(c, 2, "skip")) {
            if (c->reply_mode == CLIENT_REPLY_ON) c->reply_mode = CLIENT_REPLY_SKIP;
        } else {
            addReplyStr(c, shared.syntaxerr);
        }
    } else if (argEq(c, 1, "unblock") && (c->argc == 3 || c->argc == 4)) {
        long long id;
        int err = c->argc == 4 && argEq(c, 3, "error");
        if (c->argc == 4 && !err && !argEq(c, 3, "timeout")) {
            addReplyError(c, "CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            return;
        }
        if (!string2ll(c->argv[2].ptr, c->argv[2].len, &id)) {
            addReplyStr(c, shared.notinteger);
            return;
        }
        client *o = c->srv->clients;
        while (o && o->id != (uint64_t)id) o = o->next;
        addReplyLongLong(c, o && o != c && blockedUnblock(c->srv, o, err));
    } else if (argEq(c, 1, "no-evict") && c->argc == 3) {
        if (argEq(c, 2, "on") || argEq(c, 2, "off")) addReplyStr(c, shared.ok);
        else addReplyStr(c, shared.syntaxerr);
    } else if (argEq(c, 1, "help") && c->argc == 2) {
        static const char *help[] = {
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * ID <client-id> [<client-id> ...]",
            "      Return clients of specified IDs only.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr (lib-name, lib-ver).",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "HELP",
            "    Print this help.",
        };
        addReplyHelpOf(c, help);
    } else if (findSub(c->cmd ? c->cmd : lookupCommand("client", 6), c->argv[1].ptr,
                       c->argv[1].len)) {
        addReplySubcommandArity(c, "client");
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try CLIENT HELP.", c->argv[1].ptr);
    }
}

/* ---- COMMAND ----------------------------------------------------------------- */

static void addReplyFlagWords(client *c, const char *sflags) {
    char flags[128];
    snprintf(flags, sizeof(flags), "%s", sflags);
    long nflags = 0;
    char *save;
    for (char *tok = strtok_r(flags, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) nflags++;
    addReplySetLen(c, nflags);
    snprintf(flags, sizeof(flags), "%s", sflags);
    for (char *tok = strtok_r(flags, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
        addReplyStatus(c, tok);
}

/* A command's ACL categories as COMMAND INFO shows them: "@read", ... */
static void addReplyCategories(client *c, uint64_t cats) {
    long n = 0;
    for (int i = 0; i < 64; i++) n += (cats >> i) & 1;
    addReplySetLen(c, n);
    char buf[40];
    for (int i = 0; i < 64; i++) {
        if (!((cats >> i) & 1)) continue;
        snprintf(buf, sizeof(buf), "@%s", aclCategoryName(i));
        addReplyStatus(c, buf);
    }
}

static const struct keyspec *specsFor(const char *name, int *n);
static void addReplyKeySpecs(client *c, const char *name);
static void legacyKeys(client *c, const struct keyspec *ks);

static void addReplySubcommandInfo(client *c, const subcmd *sc) {
    char full[64];
    snprintf(full, sizeof(full), "%s|%s", sc->cname, sc->name);
    addReplyArrayLen(c, 10);
    addReplyBulkCString(c, full);
    addReplyLongLong(c, sc->arity);
    addReplyFlagWords(c, sc->sflags);
    int nspec;
    const struct keyspec *ks = specsFor(full, &nspec);
    legacyKeys(c, nspec == 1 ? ks : NULL); /* memory|usage's one key at 2 */
    addReplyCategories(c, sub_cats[sc - subcommands]);
    addReplyArrayLen(c, 0); /* tips */
    addReplyKeySpecs(c, full);
    addReplyArrayLen(c, 0); /* subcommands */
}

static void addReplyCommandInfo(client *c, const ir_command *cmd) {
    addReplyArrayLen(c, 10);
    addReplyBulkCString(c, cmd->name);
    addReplyLongLong(c, cmd->arity);
    addReplyFlagWords(c, cmd->sflags);
    addReplyLongLong(c, cmd->firstkey);
    addReplyLongLong(c, cmd->lastkey);
    addReplyLongLong(c, cmd->keystep);
    addReplyCategories(c, cmd->cats);
    addReplyArrayLen(c, 0); /* tips */
    addReplyKeySpecs(c, cmd->name);
    long nsub = 0;
    for (size_t i = 0; i < NSUBCOMMANDS; i++) nsub += subcommands[i].container == cmd->proc;
    addReplyArrayLen(c, nsub);
    for (size_t i = 0; i < NSUBCOMMANDS; i++)
        if (subcommands[i].container == cmd->proc) addReplySubcommandInfo(c, &subcommands[i]);
}

/* "name" or "container|sub" -> the command (and *sub, NULL for a plain one). */
static const ir_command *lookupFullName(const ir_arg *a, const subcmd **sub) {
    *sub = NULL;
    const char *bar = memchr(a->ptr, '|', a->len);
    if (!bar) return lookupCommand(a->ptr, a->len);
    const ir_command *cmd = lookupCommand(a->ptr, (size_t)(bar - a->ptr));
    if (!cmd) return NULL;
    *sub = findSub(cmd, bar + 1, a->len - (size_t)(bar - a->ptr) - 1);
    return *sub ? cmd : NULL;
}

/* ---- key specs ------------------------------------------------------------ */

/* The keyword of the nth (from 0) keyword spec of cmd (GEORADIUS has two: STORE, STOREDIST). */
static const char *searchKeyword(const char *cmd, int nth) {
    for (size_t i = 0; i < sizeof(keyword_search) / sizeof(keyword_search[0]); i++)
        if (keyword_search[i].cmd && !strcmp(keyword_search[i].cmd, cmd) && nth-- == 0)
            return keyword_search[i].keyword;
    return NULL;
}

#define NKEYSPECS (sizeof(keyspecs) / sizeof(keyspecs[0]))

/* The first of the specs of `name` ("get", "memory|usage") and their count. */
static const keyspec *specsFor(const char *name, int *n) {
    *n = 0;
    const keyspec *first = NULL;
    for (size_t i = 0; i < NKEYSPECS; i++) {
        if (strcmp(keyspecs[i].cmd, name) != 0) continue;
        if (!first) first = &keyspecs[i];
        (*n)++;
    }
    return first;
}

static void addReplyKeySpec(client *c, const keyspec *ks, int nth_keyword) {
    addReplyMapLen(c, 3);
    addReplyBulkCString(c, "flags");
    addReplyFlagWords(c, ks->flags);
    if (ks->kind == KS_UNKNOWN) {
        for (int i = 0; i < 2; i++) {
            addReplyBulkCString(c, i ? "find_keys" : "begin_search");
            addReplyMapLen(c, 2);
            addReplyBulkCString(c, "type");
            addReplyBulkCString(c, "unknown");
            addReplyBulkCString(c, "spec");
            addReplyMapLen(c, 0);
        }
        return;
    }
    addReplyBulkCString(c, "begin_search");
    addReplyMapLen(c, 2);
    addReplyBulkCString(c, "type");
    const char *keyword = ks->kind == KS_KEYWORD_RANGE ? searchKeyword(ks->cmd, nth_keyword) : NULL;
    addReplyBulkCString(c, keyword ? "keyword" : "index");
    addReplyBulkCString(c, "spec");
    if (keyword) {
        addReplyMapLen(c, 2);
        addReplyBulkCString(c, "keyword");
        addReplyBulkCString(c, keyword);
        addReplyBulkCString(c, "startfrom");
    } else {
        addReplyMapLen(c, 1);
        addReplyBulkCString(c, "index");
    }
    addReplyLongLong(c, ks->begin);
    addReplyBulkCString(c, "find_keys");
    addReplyMapLen(c, 2);
    addReplyBulkCString(c, "type");
    int keynum = ks->kind == KS_KEYNUM;
    addReplyBulkCString(c, keynum ? "keynum" : "range");
    addReplyBulkCString(c, "spec");
    addReplyMapLen(c, 3);
    static const char *const names[2][3] = {{"lastkey", "keystep", "limit"},
                                            {"keynumidx", "firstkey", "keystep"}};
    const int v[3] = {ks->a, ks->b, ks->c};
    for (int i = 0; i < 3; i++) {
        addReplyBulkCString(c, names[keynum][i]);
        addReplyLongLong(c, v[i]);
    }
}

/* A subcommand's first/last/step from its one range spec of fixed length (0 0 0 if none). */
static void legacyKeys(client *c, const keyspec *ks) {
    int fixed = ks && ks->kind == KS_RANGE && ks->a >= 0;
    addReplyLongLong(c, fixed ? ks->begin : 0);
    addReplyLongLong(c, fixed ? ks->begin + ks->a : 0);
    addReplyLongLong(c, fixed ? ks->b : 0);
}

static void addReplyKeySpecs(client *c, const char *name) {
    int n;
    const keyspec *ks = specsFor(name, &n);
    addReplyArrayLen(c, n);
    for (int i = 0, kw = 0; i < n; i++) {
        addReplyKeySpec(c, &ks[i], kw);
        if (ks[i].kind == KS_KEYWORD_RANGE) kw++;
    }
}

#define GETKEYS_MAX 1024 /* positions found per spec walk before a bigger array is needed */

/* The keys of argv[0..argc) (argv[0] the command name, or the subcommand's
 * container) by the specs: positions into pos[], flags into flags[], up to
 * max; returns the count (which may exceed max: call again with room), or -1
 * when a key count is not a non-negative integer (Redis's invalid spec). */
static long keysBySpecs(const keyspec *ks, int nspec, const ir_arg *argv, int argc, int *pos,
                        const char **flags, long max) {
    long n = 0;
    for (int s = 0; s < nspec; s++) {
        int first = ks[s].begin, last, step;
        /* a keyword's keys (XREAD's STREAMS) are found by keysOf's own search */
        if (ks[s].kind == KS_UNKNOWN || ks[s].kind == KS_KEYWORD_RANGE || first >= argc) continue;
        if (ks[s].kind == KS_RANGE) {
            step = ks[s].b;
            if (ks[s].a >= 0) {
                last = first + ks[s].a;
            } else if (!ks[s].c) {
                last = argc + ks[s].a;
            } else {
                last = first + ((argc - first) / ks[s].c + ks[s].a);
            }
        } else {
            long long numkeys;
            if (first + ks[s].a >= argc) return -1;
            const ir_arg *a = &argv[first + ks[s].a];
            if (!string2ll(a->ptr, a->len, &numkeys) || numkeys < 0 || numkeys > INT_MAX) return -1;
            first += ks[s].a + ks[s].b;
            last = first + (int)numkeys - 1;
            step = ks[s].c;
        }
        for (int j = first; j <= last && step > 0; j += step) {
            if (j >= argc) continue; /* too few arguments: the command reports it */
            if (n < max) {
                pos[n] = j;
                flags[n] = ks[s].flags;
            }
            n++;
        }
    }
    return n;
}

/* ---- ACL's view of the table ---------------------------------------------
 * ids: commands[i] is i, subcommands[k] is NCOMMANDS + k. */

#define NIDS (NCOMMANDS + NSUBCOMMANDS)
static const keyspec *id_specs[NIDS];
static int id_nspec[NIDS];

static void buildSpecIndex(void) {
    char full[96];
    for (size_t i = 0; i < NIDS; i++) {
        id_specs[i] = specsFor(commandIdName((int)i, full, sizeof(full)), &id_nspec[i]);
    }
}

int commandIdCount(void) {
    ensureIndex();
    return (int)NIDS;
}

int commandIdParent(int id) {
    if (id < (int)NCOMMANDS) return -1;
    return sub_parent[id - (int)NCOMMANDS];
}

int commandIdIsContainer(int id) { return id < (int)NCOMMANDS && isContainer(&commands[id]); }

uint64_t commandIdCats(int id) {
    return id < (int)NCOMMANDS ? commands[id].cats : sub_cats[id - (int)NCOMMANDS];
}

const char *commandIdName(int id, char *buf, size_t len) {
    if (id < (int)NCOMMANDS) snprintf(buf, len, "%s", commands[id].name);
    else
        snprintf(buf, len, "%s|%s", subcommands[id - NCOMMANDS].cname,
                 subcommands[id - NCOMMANDS].name);
    return buf;
}

int commandIdByName(const char *name, size_t len) {
    const char *bar = memchr(name, '|', len);
    const ir_command *cmd = lookupCommand(name, bar ? (size_t)(bar - name) : len);
    if (!cmd) return -1;
    if (!bar) return cmd->id;
    if (!isContainer(cmd)) return -1;
    const subcmd *sc = findSub(cmd, bar + 1, len - (size_t)(bar - name) - 1);
    return sc ? (int)NCOMMANDS + (int)(sc - subcommands) : -1;
}

int commandIdOfCall(const ir_command *cmd, const ir_arg *argv, int argc) {
    if (argc >= 2 && isContainer(cmd)) {
        const subcmd *sc = findSub(cmd, argv[1].ptr, argv[1].len);
        if (sc) return (int)NCOMMANDS + (int)(sc - subcommands);
    }
    return cmd->id;
}

long commandKeysOf(const ir_command *cmd, const ir_arg *argv, int argc, int *pos,
                   const char **flags, long max) {
    int id = commandIdOfCall(cmd, argv, argc);
    if (!id_nspec[id]) return 0;
    long n = keysBySpecs(id_specs[id], id_nspec[id], argv, argc, pos, flags, max);
    if (n < 0) return 0;
    if (cmd->proc == sortCommand) {
        /* BY and GET patterns are not keys for ACL (Redis checks them as it
         * reads them); STORE's key is */
        for (int j = 2; j < argc; j++) {
            if (argv[j].len == 5 && strncasecmp(argv[j].ptr, "limit", 5) == 0) j += 2;
            else if ((argv[j].len == 3 && strncasecmp(argv[j].ptr, "get", 3) == 0) ||
                     (argv[j].len == 2 && strncasecmp(argv[j].ptr, "by", 2) == 0))
                j++;
            else if (argv[j].len == 5 && strncasecmp(argv[j].ptr, "store", 5) == 0 &&
                     j + 1 < argc && max > 1) {
                pos[1] = j + 1;
                flags[1] = "OW update";
                n = 2;
            }
        }
    }
    if (cmd->proc == xreadCommand || cmd->proc == xreadgroupCommand) {
        n = 0;
        for (int j = 1; j < argc; j++) {
            if (argv[j].len != 7 || strncasecmp(argv[j].ptr, "streams", 7) != 0) continue;
            long nk = (argc - j - 1) % 2 ? 0 : (argc - j - 1) / 2;
            for (long i = 0; i < nk && i < max; i++) {
                pos[i] = j + 1 + (int)i;
                flags[i] = cmd->proc == xreadgroupCommand ? "RW access update" : "RO access";
            }
            n = nk;
            break;
        }
    }
    if (cmd->proc == setCommand && n == 1) {
        flags[0] = "OW update";
        for (int j = 3; j < argc; j++)
            if (argv[j].len == 3 && strncasecmp(argv[j].ptr, "get", 3) == 0)
                flags[0] = "RW access update";
    }
    return n;
}

/* COMMAND GETKEYS command [arg ...], COMMAND GETKEYSANDFLAGS command [arg ...] */
static void commandGetKeys(client *c, int with_flags) {
    const ir_arg *argv = &c->argv[2];
    int argc = c->argc - 2;
    const ir_command *cmd = lookupCommand(argv[0].ptr, argv[0].len);
    if (!cmd) {
        addReplyError(c, "Invalid command specified");
        return;
    }
    char name[80];
    int arity = cmd->arity;
    snprintf(name, sizeof(name), "%s", cmd->name);
    if (isContainer(cmd) && argc >= 2) {
        const subcmd *sc = findSub(cmd, argv[1].ptr, argv[1].len);
        if (!sc) {
            addReplyError(c, "Invalid command specified");
            return;
        }
        snprintf(name, sizeof(name), "%s|%s", sc->cname, sc->name);
        arity = sc->arity;
    }
    int nspec;
    const keyspec *ks = specsFor(name, &nspec);
    if (!nspec) {
        addReplyError(c, "The command has no key arguments");
        return;
    }
    if ((arity > 0 && arity != argc) || argc < -arity) {
        addReplyError(c, "Invalid number of arguments specified for command");
        return;
    }
    int pos_small[64];
    const char *flags_small[64];
    int *pos = pos_small;
    const char **flags = flags_small;
    long n = keysBySpecs(ks, nspec, argv, argc, pos, flags, 64);
    if (cmd->proc == sortCommand && n == 1) {
        /* the last STORE's key, skipping LIMIT's, GET's and BY's arguments (Redis's sortGetKeys) */
        for (int j = 2; j < argc; j++) {
            if (argv[j].len == 5 && strncasecmp(argv[j].ptr, "limit", 5) == 0) j += 2;
            else if ((argv[j].len == 3 && strncasecmp(argv[j].ptr, "get", 3) == 0) ||
                     (argv[j].len == 2 && strncasecmp(argv[j].ptr, "by", 2) == 0))
                j++;
            else if (argv[j].len == 5 && strncasecmp(argv[j].ptr, "store", 5) == 0 &&
                     j + 1 < argc) {
                pos[1] = j + 1;
                flags[1] = "OW update";
                n = 2;
            }
        }
    }
    if ((cmd->proc == georadiusCommand || cmd->proc == georadiusbymemberCommand) && n == 1) {
        /* the last STORE/STOREDIST's key (Redis's georadiusGetKeys) */
        for (int j = 5; j < argc; j++) {
            if (((argv[j].len == 5 && strncasecmp(argv[j].ptr, "store", 5) == 0) ||
                 (argv[j].len == 9 && strncasecmp(argv[j].ptr, "storedist", 9) == 0)) &&
                j + 1 < argc) {
                pos[1] = ++j;
                flags[1] = "OW update";
                n = 2;
            }
        }
    }
    if (cmd->proc == xreadCommand || cmd->proc == xreadgroupCommand) {
        /* the keys are the first half of what follows STREAMS (Redis's keyword search) */
        n = 0;
        for (int j = 1; j < argc; j++) {
            if (argv[j].len != 7 || strncasecmp(argv[j].ptr, "streams", 7) != 0) continue;
            long nk = (argc - j - 1) % 2 ? 0 : (argc - j - 1) / 2;
            for (long i = 0; i < nk && i < 64; i++) {
                pos[i] = j + 1 + (int)i;
                flags[i] = "RO access"; /* both, as Redis's key specs say */
            }
            n = nk;
            break;
        }
        if (n > 64) n = 0; /* as a malformed call: not served here */
    }
    if (n > 64) { /* COMMAND GETKEYS only: no request path allocates here */
        pos = ir_xrealloc(NULL, (size_t)n * sizeof(*pos));
        flags = ir_xrealloc(NULL, (size_t)n * sizeof(*flags));
        keysBySpecs(ks, nspec, argv, argc, pos, flags, n);
    }
    if (n <= 0 && (cmd->flags & CMD_NO_MANDATORY_KEYS)) {
        addReplyArrayLen(c, 0); /* EVAL "..." 0: a call without keys, as Redis answers */
    } else if (n <= 0) {
        addReplyError(c, "Invalid arguments specified for command");
    } else {
        addReplyArrayLen(c, n);
        for (long i = 0; i < n; i++) {
            if (with_flags) addReplyArrayLen(c, 2);
            addReplyBulk(c, argv[pos[i]].ptr, argv[pos[i]].len);
            if (!with_flags) continue;
            const char *f = flags[i];
            if (cmd->proc == setCommand) { /* SET's flags depend on GET, as Redis's setGetKeys */
                f = "OW update";
                for (int j = 3; j < argc; j++)
                    if (argv[j].len == 3 && strncasecmp(argv[j].ptr, "get", 3) == 0)
                        f = "RW access update";
            }
            if (cmd->proc == bitfieldCommand) { /* read-only unless it writes (bitfieldGetKeys) */
                f = "RO access"; /* GETs and OVERFLOWs only; SET, INCRBY or a syntax error: RW */
                for (int j = 2; j < argc; j++) {
                    const ir_arg *a = &argv[j];
                    int rem = argc - j - 1;
                    if (a->len == 3 && strncasecmp(a->ptr, "get", 3) == 0 && rem >= 2) {
                        j += 2;
                    } else if (a->len == 8 && strncasecmp(a->ptr, "overflow", 8) == 0 && rem >= 1) {
                        j += 1;
                    } else {
                        f = "RW access update";
                        break;
                    }
                }
            }
            char words[64];
            snprintf(words, sizeof(words), "%s", f);
            char *end = strstr(words, " variable_flags");
            if (end) *end = '\0';
            addReplyFlagWords(c, words);
        }
    }
    if (pos != pos_small) {
        free(pos);
        free(flags);
    }
}

/* COMMAND [COUNT | INFO [name ...] | LIST [FILTERBY PATTERN p] | DOCS [name ...] | GETKEYS ... | HELP] */
/* COMMAND DOCS' map of a command or a subcommand, from commands.json: summary,
 * since, group, complexity when given, the module for inreplay's own (group
 * "module", as a module's commands are in Redis) and, for a container (parent
 * set), its subcommands' docs under their full names. */
static void addReplyDoc(client *c, const cmddoc *d, const ir_command *parent) {
    int module = !strcmp(d->group, "module"), subs = 0;
    for (size_t k = 0; parent && k < NSUBCOMMANDS; k++)
        subs += subcommands[k].container == parent->proc;
    addReplyMapLen(c, 3 + (d->complexity[0] != 0) + module + (subs > 0));
    addReplyBulkCString(c, "summary");
    addReplyBulkCString(c, d->summary);
    addReplyBulkCString(c, "since");
    addReplyBulkCString(c, d->since);
    addReplyBulkCString(c, "group");
    addReplyBulkCString(c, d->group);
    if (d->complexity[0]) {
        addReplyBulkCString(c, "complexity");
        addReplyBulkCString(c, d->complexity);
    }
    if (module) {
        addReplyBulkCString(c, "module");
        addReplyBulkCString(c, "inreplay");
    }
    if (!subs) return;
    addReplyBulkCString(c, "subcommands");
    addReplyMapLen(c, subs);
    char full[64];
    for (size_t k = 0; k < NSUBCOMMANDS; k++) {
        if (subcommands[k].container != parent->proc) continue;
        snprintf(full, sizeof(full), "%s|%s", subcommands[k].cname, subcommands[k].name);
        addReplyBulkCString(c, full);
        addReplyDoc(c, &subcommand_docs[k], NULL);
    }
}

static void addReplyCommandDocs(client *c, const ir_command *cmd, const subcmd *sc) {
    if (sc) addReplyDoc(c, &subcommand_docs[sc - subcommands], NULL);
    else addReplyDoc(c, &command_docs[cmd - commands], cmd);
}

void commandCommand(client *c) {
    if (c->argc == 1) {
        addReplyArrayLen(c, (long)NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++) addReplyCommandInfo(c, &commands[i]);
    } else if (argEq(c, 1, "count") && c->argc == 2) {
        addReplyLongLong(c, (long long)NCOMMANDS);
    } else if (argEq(c, 1, "list")) {
        /* [FILTERBY MODULE m | ACLCAT c | PATTERN p], as Redis: anything else,
         * or a FILTERBY without its two words, is a syntax error; the last
         * filter given wins. inreplay's own commands are module "inreplay"'s
         * (their group is "module", as COMMAND DOCS says). */
        const ir_arg *pat = NULL;
        int cat = -1, module = -1; /* -1: no such filter; cat -2: an unknown category */
        for (int i = 2; i < c->argc; i += 3) {
            if (!argEq(c, i, "filterby") || c->argc - 1 - i != 2) {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
            pat = NULL, cat = -1, module = -1;
            const ir_arg *v = &c->argv[i + 2];
            if (argEq(c, i + 1, "pattern")) {
                pat = v;
            } else if (argEq(c, i + 1, "aclcat")) {
                cat = aclCategoryIndex(v->ptr, v->len);
                if (cat < 0) cat = -2;
            } else if (argEq(c, i + 1, "module")) {
                module = v->len == 8 && !strncasecmp(v->ptr, "inreplay", 8);
            } else {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
        }
        char full[64];
        long n = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass) addReplyArrayLen(c, n);
            for (size_t i = 0; i < NCOMMANDS; i++) {
                const char *name = commands[i].name;
                int mod = !strcmp(command_docs[i].group, "module");
                if (module == 0 || (module == 1 && !mod)) continue; /* another module's: none */
                int keep = cat == -1 || (cat >= 0 && (commands[i].cats >> cat & 1));
                if (keep && (!pat || stringmatchlen(pat->ptr, pat->len, name, strlen(name), 1))) {
                    if (pass) addReplyBulkCString(c, name);
                    else n++;
                }
                for (size_t k = 0; k < NSUBCOMMANDS; k++) {
                    if (subcommands[k].container != commands[i].proc) continue;
                    if (cat == -2 || (cat >= 0 && !(sub_cats[k] >> cat & 1))) continue;
                    snprintf(full, sizeof(full), "%s|%s", subcommands[k].cname,
                             subcommands[k].name);
                    if (pat && !stringmatchlen(pat->ptr, pat->len, full, strlen(full), 1)) continue;
                    if (pass) addReplyBulkCString(c, full);
                    else n++;
                }
            }
        }
    } else if (argEq(c, 1, "info")) {
        if (c->argc == 2) {
            addReplyArrayLen(c, (long)NCOMMANDS);
            for (size_t i = 0; i < NCOMMANDS; i++) addReplyCommandInfo(c, &commands[i]);
            return;
        }
        addReplyArrayLen(c, c->argc - 2);
        for (int i = 2; i < c->argc; i++) {
            const subcmd *sc;
            const ir_command *cmd = lookupFullName(&c->argv[i], &sc);
            if (sc) addReplySubcommandInfo(c, sc);
            else if (cmd) addReplyCommandInfo(c, cmd);
            else addReplyNullArray(c);
        }
    } else if (argEq(c, 1, "docs")) {
        /* as Redis 7.0: every command, or the known ones of those named */
        long n = 0;
        if (c->argc == 2) n = (long)NCOMMANDS;
        for (int i = 2; i < c->argc; i++) {
            const subcmd *sc;
            n += lookupFullName(&c->argv[i], &sc) != NULL;
        }
        addReplyMapLen(c, n);
        for (size_t i = 0; c->argc == 2 && i < NCOMMANDS; i++) {
            addReplyBulkCString(c, commands[i].name);
            addReplyCommandDocs(c, &commands[i], NULL);
        }
        for (int i = 2; i < c->argc; i++) {
            const subcmd *sc;
            const ir_command *cmd = lookupFullName(&c->argv[i], &sc);
            if (!cmd) continue;
            char full[64];
            if (sc) snprintf(full, sizeof(full), "%s|%s", sc->cname, sc->name);
            else snprintf(full, sizeof(full), "%s", cmd->name);
            addReplyBulkCString(c, full);
            addReplyCommandDocs(c, cmd, sc);
        }
    } else if (argEq(c, 1, "getkeys") && c->argc >= 4) {
        commandGetKeys(c, 0);
    } else if (argEq(c, 1, "getkeysandflags") && c->argc >= 4) {
        commandGetKeys(c, 1);
    } else if (argEq(c, 1, "help") && c->argc == 2) {
        static const char *help[] = {
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
            "HELP",
            "    Print this help.",
        };
        addReplyHelpOf(c, help);
    } else if (findSub(lookupCommand("command", 7), c->argv[1].ptr, c->argv[1].len)) {
        addReplySubcommandArity(c, "command");
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try COMMAND HELP.", c->argv[1].ptr);
    }
}

/* ---- CONFIG ------------------------------------------------------------- */

/* Redis's memtoull: digits and an optional unit b, k, kb, m, mb, g, gb
 * (case-insensitive; k = 1000, kb = 1024). 1 if valid. */
int ir_parse_memory(const char *p, size_t len, unsigned long long *out) {
    static const struct {
        const char *u;
        unsigned long long mul;
    } units[] = {{"b", 1},
                 {"k", 1000},
                 {"kb", 1024},
                 {"m", 1000000},
                 {"mb", 1024 * 1024},
                 {"g", 1000000000ULL},
                 {"gb", 1024ULL * 1024 * 1024}};
    size_t digits = 0;
    while (digits < len && p[digits] >= '0' && p[digits] <= '9') digits++;
    if (digits == 0 || digits > 20) return 0;
    unsigned long long mul = 1;
    if (digits < len) {
        size_t ulen = len - digits;
        int found = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && !found; i++)
            if (strlen(units[i].u) == ulen && strncasecmp(units[i].u, p + digits, ulen) == 0)
                mul = units[i].mul, found = 1;
        if (!found) return 0;
    }
    unsigned long long v = 0;
    for (size_t i = 0; i < digits; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (ULLONG_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (mul > 1 && v > ULLONG_MAX / mul) return 0;
    *out = v * mul;
    return 1;
}

static void resetStats(ir_server *s) {
    s->total_commands = s->total_connections = s->rejected_connections = 0;
    s->net_input_bytes = s->net_output_bytes = 0;
    s->total_error_replies = s->keyspace_hits = s->keyspace_misses = 0;
    s->oom_rejections = s->output_limit_disconnects = s->timedout_clients = 0;
    for (int i = 0; i < dbsCount(s); i++) dbsAt(s, i)->expired_keys = 0;
    memset(cmdstats, 0, sizeof(cmdstats));
    memset(substats, 0, sizeof(substats));
    for (size_t i = 0; i < NCOMMANDS; i++) commands[i].calls = 0;
    nerrstats = 0;
}

/* CONFIG GET pattern [pattern ...] | SET parameter value [...] | RESETSTAT | HELP */
void configCommand(client *c) {
    ir_server *s = c->srv;
    if (argEq(c, 1, "get") && c->argc >= 3) {
        configGetCommand(c);
    } else if (argEq(c, 1, "set")) {
        configSetCommand(c);
    } else if (argEq(c, 1, "resetstat") && c->argc == 2) {
        resetStats(s);
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "rewrite") && c->argc == 2) {
        /* the server reads no config file (pyctl passes its settings in), so
         * there is none to rewrite: Redis's answer for that case */
        addReplyError(c, "The server is running without a config file");
    } else if (argEq(c, 1, "help") && c->argc == 2) {
        static const char *help[] = {
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Prints this help.",
        };
        addReplyHelpOf(c, help);
    } else if (findSub(lookupCommand("config", 6), c->argv[1].ptr, c->argv[1].len)) {
        addReplySubcommandArity(c, "config");
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try CONFIG HELP.", c->argv[1].ptr);
    }
}

/* CLUSTER <subcommand>: inreplay never runs in cluster mode (see "Scaling out"
 * for its own sharding), so every subcommand answers as a Redis started without
 * cluster-enabled does. Clients that probe for a cluster (CLUSTER INFO, SLOTS,
 * SHARDS) get the answer they know. */
void clusterCommand(client *c) {
    const subcmd *sc = findSub(lookupCommand("cluster", 7), c->argv[1].ptr, c->argv[1].len);
    if (!sc)
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try CLUSTER HELP.", c->argv[1].ptr);
    else if (sc->arity > 0 ? c->argc != sc->arity : c->argc < -sc->arity)
        addReplySubcommandArity(c, "cluster");
    else addReplyError(c, "This instance has cluster support disabled");
}

/* ---- INFO --------------------------------------------------------------- */

static void bytesHuman(char *buf, size_t len, uint64_t n) {
    const char *u = "BKMGTP";
    double d = (double)n;
    while (d >= 1024 && u[1]) d /= 1024, u++;
    if (*u == 'B') snprintf(buf, len, "%lluB", (unsigned long long)n);
    else snprintf(buf, len, "%.2f%c", d, *u);
}

static int wantSection(client *c, const char *name, int is_default) {
    if (c->argc == 1) return is_default;
    for (int i = 1; i < c->argc; i++) {
        if (argEq(c, i, name) || argEq(c, i, "everything")) return 1;
        if (argEq(c, i, "all") && strcmp(name, "modules") != 0) return 1;
        if (argEq(c, i, "default") && is_default) return 1;
    }
    return 0;
}

static uint64_t used_memory_peak; /* the largest used_memory INFO has seen */

static double tvSeconds(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

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
        /* shm_socket and boot_id: a client that sees this machine's boot id
         * is on the same host and may take the shm socket (pyctl/client.py) */
        struct utsname un;
        uname(&un);
        char exe[512] = "";
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        exe[n > 0 ? n : 0] = '\0';
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        infoCat(&b,
                "%s# Server\r\nredis_version:%s\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n"
                "redis_build_id:0\r\ninreplay_version:%s\r\nredis_mode:standalone\r\n"
                "os:%s %s %s\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\n"
                "multiplexing_api:%s\r\natomicvar_api:c11-builtin\r\ngcc_version:%d.%d.%d\r\n"
                "process_id:%ld\r\nprocess_supervised:no\r\nrun_id:%s\r\ntcp_port:%d\r\n"
                "server_time_usec:%llu\r\nuptime_in_seconds:%llu\r\nuptime_in_days:%llu\r\n"
                "hz:10\r\nconfigured_hz:10\r\nlru_clock:%llu\r\nexecutable:%s\r\nconfig_file:\r\n"
                "io_threads_active:0\r\nstack:%s\r\nstack_build:%s\r\nevent_loop:%s\r\n"
                "lua:%s\r\nshm_socket:%s\r\nboot_id:%s\r\n",
                sections++ ? "\r\n" : "", IR_REDIS_VERSION, IR_VERSION_STR, un.sysname, un.release,
                un.machine, s->tp && !strcmp(s->tp->ops->name, "kernel") ? "epoll" : "poll-mode",
#ifdef __GNUC__
                __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
#else
                0, 0, 0,
#endif
                (long)getpid(), s->run_id, s->tp ? s->tp->bound_port : s->cfg.port,
                (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000,
                (unsigned long long)up, (unsigned long long)(up / 86400),
                (unsigned long long)((s->now_ms / 1000) & ((1 << 24) - 1)), exe,
                s->tp ? s->tp->ops->name : "none", s->tp && s->tp->build ? s->tp->build : "",
                s->loop_mode ? s->loop_mode : "", IR_LUA_FROM,
                s->local && s->cfg.shm_socket ? s->cfg.shm_socket : "", bootId());
    }
    if (wantSection(c, "clients", 1)) {
        ir_blocked_stats bst;
        blockedStats(s, &bst);
        size_t maxin = 0, maxout = 0;
        unsigned long long shm_clients = 0;
        for (const client *o = s->clients; o; o = o->next) {
            if (o->qcap > maxin) maxin = o->qcap;
            if (o->pending_bytes > maxout) maxout = o->pending_bytes;
            if (s->local && o->tp == s->local) shm_clients++;
        }
        infoCat(
            &b,
            "%s# Clients\r\nconnected_clients:%llu\r\ncluster_connections:0\r\nmaxclients:%d\r\n"
            "client_recent_max_input_buffer:%zu\r\nclient_recent_max_output_buffer:%zu\r\n"
            "blocked_clients:%llu\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n"
            "total_blocking_keys:%llu\r\nconnected_shm_clients:%llu\r\n",
            sections++ ? "\r\n" : "", (unsigned long long)s->nclients, s->cfg.maxclients, maxin,
            maxout, (unsigned long long)bst.blocked_clients, (unsigned long long)bst.blocked_keys,
            shm_clients);
    }
    if (wantSection(c, "memory", 1)) {
        char h[32], rh[32], ph[32], mh[32], th[32];
        uint64_t used = serverUsedMemory(s);
        uint64_t rss = ir_rss_bytes();
        if (used > used_memory_peak) used_memory_peak = used;
        uint64_t total = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t dataset = dbBytes(s->db) + tablesMemory(s->tables);
        bytesHuman(h, sizeof(h), used);
        bytesHuman(rh, sizeof(rh), rss);
        bytesHuman(ph, sizeof(ph), used_memory_peak);
        bytesHuman(mh, sizeof(mh), s->cfg.maxmemory);
        bytesHuman(th, sizeof(th), total);
        uint64_t lua_bytes, nscripts, script_bytes;
        scriptingInfo(s, &lua_bytes, &nscripts, &script_bytes);
        uint64_t nfuncs, nlibs;
        functionsInfo(s, &nfuncs, &nlibs);
        infoCat(
            &b,
            "%s# Memory\r\nused_memory:%llu\r\nused_memory_human:%s\r\n"
            "used_memory_rss:%llu\r\nused_memory_rss_human:%s\r\n"
            "used_memory_peak:%llu\r\nused_memory_peak_human:%s\r\n"
            "used_memory_peak_perc:%.2f%%\r\nused_memory_overhead:%llu\r\n"
            "used_memory_dataset:%llu\r\nused_memory_dataset_perc:%.2f%%\r\n"
            "total_system_memory:%llu\r\ntotal_system_memory_human:%s\r\n"
            "used_memory_lua:%llu\r\nused_memory_vm_eval:%llu\r\n"
            "used_memory_scripts_eval:%llu\r\nnumber_of_cached_scripts:%llu\r\n"
            "number_of_functions:%llu\r\nnumber_of_libraries:%llu\r\n"
            "used_memory_vm_functions:%llu\r\n"
            "used_memory_replay:%llu\r\nused_memory_replay_items:%llu\r\n"
            "used_memory_pinned_detached:%llu\r\npinned_buffers:%llu\r\n"
            "maxmemory:%llu\r\nmaxmemory_human:%s\r\nmaxmemory_policy:noeviction\r\n"
            "mem_fragmentation_ratio:%.2f\r\nmem_allocator:libc\r\n"
            "oom_rejections:%llu\r\n",
            sections++ ? "\r\n" : "", (unsigned long long)used, h, (unsigned long long)rss, rh,
            (unsigned long long)used_memory_peak, ph,
            used_memory_peak ? 100.0 * (double)used / (double)used_memory_peak : 0.0,
            (unsigned long long)(used > dataset ? used - dataset : 0),
            (unsigned long long)dbsBytes(s), used ? 100.0 * (double)dataset / (double)used : 0.0,
            (unsigned long long)total, th, (unsigned long long)lua_bytes,
            (unsigned long long)lua_bytes, (unsigned long long)script_bytes,
            (unsigned long long)nscripts, (unsigned long long)nfuncs, (unsigned long long)nlibs,
            (unsigned long long)scriptFnMemory(s), (unsigned long long)tablesMemory(s->tables),
            (unsigned long long)tablesBytes(s->tables), (unsigned long long)s->pins.detached_bytes,
            (unsigned long long)s->pins.nused, (unsigned long long)s->cfg.maxmemory, mh,
            used ? (double)rss / (double)used : 0.0, (unsigned long long)s->oom_rejections);
    }
    if (wantSection(c, "persistence", 1)) {
        char pbuf[8192];
        size_t plen = snapshotInfo(s, pbuf, sizeof(pbuf));
        if (plen < sizeof(pbuf)) aofInfo(s, pbuf + plen, sizeof(pbuf) - plen);
        infoCat(&b, "%s%s", sections++ ? "\r\n" : "", pbuf);
    }
    if (wantSection(c, "stats", 1)) {
        uint64_t channels, patterns;
        pubsubServerCounts(s, &channels, &patterns);
        infoCat(&b,
                "%s# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
                "instantaneous_ops_per_sec:%llu\r\n"
                "total_net_input_bytes:%llu\r\ntotal_net_output_bytes:%llu\r\n"
                "total_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\n"
                "rejected_connections:%llu\r\nsync_full:0\r\nsync_partial_ok:0\r\n"
                "sync_partial_err:0\r\nexpired_keys:%llu\r\nevicted_keys:0\r\nevicted_clients:0\r\n"
                "keyspace_hits:%llu\r\nkeyspace_misses:%llu\r\npubsub_channels:%llu\r\n"
                "pubsub_patterns:%llu\r\npubsubshard_channels:0\r\nlatest_fork_usec:0\r\n"
                "total_forks:0\r\nmigrate_cached_sockets:0\r\nunexpected_error_replies:0\r\n"
                "total_error_replies:%llu\r\ntotal_reads_processed:0\r\n"
                "client_output_buffer_limit_disconnections:%llu\r\n"
                "client_query_buffer_limit_disconnections:0\r\n"
                "timedout_clients:%llu\r\neventloop_cycles:%llu\r\n"
                "by_reference_bodies_copied:%llu\r\n",
                sections++ ? "\r\n" : "", (unsigned long long)s->total_connections,
                (unsigned long long)s->total_commands, (unsigned long long)opsPerSec(),
                (unsigned long long)s->net_input_bytes, (unsigned long long)s->net_output_bytes,
                (unsigned long long)s->rejected_connections, (unsigned long long)dbsExpiredKeys(s),
                (unsigned long long)s->keyspace_hits, (unsigned long long)s->keyspace_misses,
                (unsigned long long)channels, (unsigned long long)patterns,
                (unsigned long long)s->total_error_replies,
                (unsigned long long)s->output_limit_disconnects,
                (unsigned long long)s->timedout_clients, (unsigned long long)s->eventloop_cycles,
                (unsigned long long)s->by_ref_copied);
        ir_blocked_stats bst; /* blocked.c: how waits ended */
        blockedStats(s, &bst);
        infoCat(&b,
                "total_blocked_clients:%llu\r\nblocked_timeouts:%llu\r\n"
                "blocked_disconnects:%llu\r\nblocked_dropped:%llu\r\n",
                (unsigned long long)bst.total_blocked, (unsigned long long)bst.timeouts,
                (unsigned long long)bst.disconnects, (unsigned long long)bst.dropped);
    }
    if (wantSection(c, "replication", 1)) {
        char *repl = replInfo(s); /* replication.c */
        infoCat(&b, "%s# Replication\r\n%s", sections++ ? "\r\n" : "", repl);
        free(repl);
    }
    if (wantSection(c, "cpu", 1)) {
        struct rusage self, children, thread;
        getrusage(RUSAGE_SELF, &self);
        getrusage(RUSAGE_CHILDREN, &children);
        getrusage(RUSAGE_THREAD, &thread);
        infoCat(&b,
                "%s# CPU\r\nused_cpu_sys:%.6f\r\nused_cpu_user:%.6f\r\n"
                "used_cpu_sys_children:%.6f\r\nused_cpu_user_children:%.6f\r\n"
                "used_cpu_sys_main_thread:%.6f\r\nused_cpu_user_main_thread:%.6f\r\n",
                sections++ ? "\r\n" : "", tvSeconds(self.ru_stime), tvSeconds(self.ru_utime),
                tvSeconds(children.ru_stime), tvSeconds(children.ru_utime),
                tvSeconds(thread.ru_stime), tvSeconds(thread.ru_utime));
    }
    if (wantSection(c, "modules", 1)) infoCat(&b, "%s# Modules\r\n", sections++ ? "\r\n" : "");
    if (wantSection(c, "commandstats", 0)) {
        infoCat(&b, "%s# Commandstats\r\n", sections++ ? "\r\n" : "");
        for (size_t i = 0; i < NCOMMANDS; i++) {
            const cmdstat *st = &cmdstats[i];
            if (st->calls || st->rejected || st->failed)
                infoCat(&b,
                        "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                        "failed_calls=%llu\r\n",
                        commands[i].name, (unsigned long long)st->calls,
                        (unsigned long long)(st->ns / 1000),
                        st->calls ? (double)st->ns / 1000.0 / (double)st->calls : 0.0,
                        (unsigned long long)st->rejected, (unsigned long long)st->failed);
            for (size_t k = 0; k < NSUBCOMMANDS; k++) {
                const cmdstat *ss = &substats[k];
                if (subcommands[k].container != commands[i].proc) continue;
                if (!ss->calls && !ss->rejected && !ss->failed) continue;
                infoCat(&b,
                        "cmdstat_%s|%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                        "failed_calls=%llu\r\n",
                        subcommands[k].cname, subcommands[k].name, (unsigned long long)ss->calls,
                        (unsigned long long)(ss->ns / 1000),
                        ss->calls ? (double)ss->ns / 1000.0 / (double)ss->calls : 0.0,
                        (unsigned long long)ss->rejected, (unsigned long long)ss->failed);
            }
        }
    }
    if (wantSection(c, "errorstats", 1)) {
        infoCat(&b, "%s# Errorstats\r\n", sections++ ? "\r\n" : "");
        for (size_t i = 0; i < nerrstats; i++)
            infoCat(&b, "errorstat_%s:count=%llu\r\n", errstats[i].code,
                    (unsigned long long)errstats[i].count);
    }
    if (wantSection(c, "cluster", 1))
        infoCat(&b, "%s# Cluster\r\ncluster_enabled:0\r\n", sections++ ? "\r\n" : "");
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
                tablesCount(s->tables));
        for (ir_table *t = tablesFirst(s->tables); t; t = tableNext(t)) {
            ir_table_info in;
            tableInfo(t, &in);
            infoCat(&b,
                    "table:name=%s,size=%llu,capacity=%llu,inserts=%llu,samples=%llu,"
                    "updates=%llu,stale_updates=%llu,bytes_used=%llu\r\n",
                    tableName(t), (unsigned long long)in.size,
                    (unsigned long long)tableOpts(t)->capacity, (unsigned long long)in.inserts,
                    (unsigned long long)in.samples, (unsigned long long)in.updates,
                    (unsigned long long)in.stale_updates, (unsigned long long)in.bytes_used);
        }
    }
    if (c->resp >= 3) { /* a verbatim string in RESP3 */
        char hdr[32];
        int n = snprintf(hdr, sizeof(hdr), "=%zu\r\ntxt:", b.len + 4);
        addReplyProto(c, hdr, (size_t)n);
        addReplyProto(c, b.p, b.len);
        addReplyProto(c, "\r\n", 2);
        free(b.p);
        return;
    }
    addReplyInfobuf(c, &b);
}

/* ---- MONITOR ------------------------------------------------------------ */

/* MONITOR */
void monitorCommand(client *c) {
    ir_server *s = c->srv;
    if (c->flags & CLIENT_MONITOR) return; /* already: no reply, as Redis */
    if (s->nmonitors == s->capmonitors) {
        int cap = s->capmonitors ? s->capmonitors * 2 : 4;
        client **m = realloc(s->monitors, (size_t)cap * sizeof(*m));
        if (!m) {
            addReplyError(c, "out of memory");
            return;
        }
        s->monitors = m;
        s->capmonitors = cap;
    }
    s->monitors[s->nmonitors++] = c;
    c->flags |= CLIENT_MONITOR;
    addReplyStr(c, shared.ok);
}

void monitorRemove(client *c) {
    ir_server *s = c->srv;
    for (int i = 0; i < s->nmonitors; i++) {
        if (s->monitors[i] == c) {
            memmove(s->monitors + i, s->monitors + i + 1,
                    (size_t)(s->nmonitors - i - 1) * sizeof(client *));
            s->nmonitors--;
            break;
        }
    }
    c->flags &= ~CLIENT_MONITOR;
}

/* Append a as Redis's sdscatrepr quotes it: "..." with \n \r \t \a \b
 * \" \\ and \xNN for other non-printable bytes. */
static void catRepr(infobuf *b, const char *p, size_t len) {
    infoCat(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        switch (ch) {
        case '\\': infoCat(b, "\\\\"); break;
        case '"': infoCat(b, "\\\""); break;
        case '\n': infoCat(b, "\\n"); break;
        case '\r': infoCat(b, "\\r"); break;
        case '\t': infoCat(b, "\\t"); break;
        case '\a': infoCat(b, "\\a"); break;
        case '\b': infoCat(b, "\\b"); break;
        default:
            if (ch >= 32 && ch < 127) infoCat(b, "%c", ch);
            else infoCat(b, "\\x%02x", ch);
        }
    }
    infoCat(b, "\"");
}

char *monitorFormat(const client *c, size_t *len, size_t *args) {
    int argc = c->argc;
    const ir_arg *argv = c->argv;
    infobuf b = {malloc(256), 0, 256};
    if (!b.p) return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (c->flags & CLIENT_UNIX_SOCKET) /* Redis: "unix:" and the socket's path */
        infoCat(&b, "+%lld.%06ld [%d unix:%s]", (long long)ts.tv_sec, ts.tv_nsec / 1000, c->db,
                c->srv->cfg.unixsocket);
    else
        infoCat(&b, "+%lld.%06ld [%d %s]", (long long)ts.tv_sec, ts.tv_nsec / 1000, c->db, c->addr);
    *args = b.len;
    for (int i = 0; i < argc; i++) {
        infoCat(&b, " ");
        catRepr(&b, argv[i].ptr, argv[i].len);
    }
    infoCat(&b, "\r\n");
    *len = b.len;
    return b.p;
}

char *monitorAfterCall(const client *c, char *line, size_t *len, size_t args) {
    static const char red[] = " \"(redacted)\"";
    infobuf b = {malloc(*len + 256), 0, *len + 256};
    if (!b.p) {
        free(line);
        return NULL; /* out of memory: no line rather than a secret */
    }
    /* the time as it was, the database as the command left it (SELECT's own) */
    const char *sp = memchr(line, ' ', args);
    size_t ts = sp ? (size_t)(sp - line) : 0;
    memcpy(b.p, line, ts);
    b.len = ts;
    infoCat(&b, " [%d %s]", c->db, c->addr);
    size_t i = args;
    /* each argument is ' "..."' as catRepr quoted it: a quote inside is \" */
    for (int j = 0; i < *len && line[i] == ' '; j++) {
        size_t k = i + 2; /* past ' "' */
        while (k < *len && line[k] != '"') k += line[k] == '\\' ? 2 : 1;
        k++; /* the closing quote */
        if (argRedacted(c, j)) infoCat(&b, "%s", red);
        else infoCat(&b, "%.*s", (int)(k - i), line + i);
        i = k;
    }
    infoCat(&b, "\r\n");
    free(line);
    *len = b.len;
    return b.p;
}

void monitorSend(client *c, char *line, size_t len) {
    ir_server *s = c->srv;
    for (int i = 0; i < s->nmonitors; i++) {
        client *m = s->monitors[i];
        if (m->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSED)) continue;
        addReplyProto(m, line, len);
        if (m != c) clientFlush(m);
    }
    free(line);
}

/* ROLE */
void roleCommand(client *c) { replRoleReply(c); }

/* RESET: the connection as new (no transaction, no WATCH, no subscriptions,
 * RESP2, database 0, not a MONITOR, no name, replies on, authenticated only
 * without a password). */
void resetCommand(client *c) {
    multiReset(c);
    pubsubReset(c);
    c->resp = 2;
    free(c->clientname);
    c->clientname = NULL;
    c->reply_mode = CLIENT_REPLY_ON;
    c->db = 0; /* Redis's RESET selects database 0 and ends MONITOR */
    if (c->flags & CLIENT_MONITOR) monitorRemove(c);
    aclInitClient(c);
    addReplyStatus(c, "RESET");
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], as Redis 7.0 without
 * replicas: the save (SAVE, or save-on-shutdown without NOSAVE) runs here, so
 * that a failed one answers an error and the server keeps running (FORCE:
 * exits anyway). On success there is no reply: the connection closes and the
 * loop ends (daemon/daemon.c). ABORT cancels a shutdown a signal asked for
 * that the loop has not carried out yet (see the daemon). NOW does nothing here: there are
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
    if (scriptBusy(s) && !nosave) { /* only SHUTDOWN NOSAVE ends a busy script */
        addReplyBusyScript(c, scriptBusyIsEval(s));
        return;
    }
    serverTakeStopRequest(s); /* a stop asked for meanwhile (ir_stop) is pending now */
    if (abort_) {             /* a signal's shutdown not yet carried out; SHUTDOWN's is certain */
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
