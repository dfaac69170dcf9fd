/* server.h - the RESP2/RESP3 server: clients, command table, replies.
 *
 * The bottom of the server's layers (tests/test_layers.py): protocol and
 * replies. It includes only the shared leaf headers and the engine's pin.h;
 * the replay engine (replay/) never includes it.
 *
 * Everything here runs on the one thread that polls the transport (see
 * transport.h for the contract). Command handlers are `void xxxCommand(client *c)`
 * as in Redis; they read c->argv[0..argc-1] and reply with the addReply* calls.
 */
#ifndef IR_SERVER_H
#define IR_SERVER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "inreplay.h"
#include "pin.h"
#include "replay_err.h"
#include "strconv.h"
#include "transport.h"

/* IR_VERSION_STR: meson.build's project version (a -D of the build) */
#define IR_REDIS_VERSION "7.0.15" /* the Redis version we answer like */

#define PROTO_INLINE_MAX_SIZE (1024 * 64) /* max inline request / count line */
#define PROTO_MBULK_BIG_ARG (1024 * 32)   /* bulks this big get their own buffer */
#define PROTO_REPLY_CHUNK_BYTES (16 * 1024)
#define IR_MAX_IOV 1024

/* A cheap cycle counter for the per-stage breakdown (TSC on x86). */
static inline uint64_t ir_cycles(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* A counted string literal. */
typedef struct ir_str {
    const char *p;
    size_t len;
} ir_str;
#define IR_STR(lit) ((ir_str){(lit), sizeof(lit) - 1})

/* A reference count on memory that pending replies point into: a stored
 * string value's buffer or a replay table's arena. The owner (the value or
 * the table) points at its pin through *holder while it holds one. An owner
 * that would free or rewrite pinned memory detaches it instead (pinDetach):
 * the pin then owns the memory and frees it when the last reply segment
 * referencing it has been written or dropped. Pins come from a per-server
 * free list, so pinning allocates nothing in the steady state. */
typedef struct ir_pin {
    uint32_t refs;          /* reply segments pointing into the memory */
    struct ir_pin **holder; /* the owner's pointer to this pin; NULL once detached */
    void *mem;              /* detached: the memory, freed at the last release */
    size_t maplen;          /* detached: munmap length, 0 = free() */
    uint64_t bytes;         /* detached: what it still counts in used memory */
    struct ir_pins *pool;
    struct ir_pin *next; /* free list */
} ir_pin;

typedef struct ir_pins {
    struct ir_server *srv; /* whose clients' replies may hold pins */
    ir_pin *free;
    uint64_t nalloc, nused, ndetached;
    uint64_t detached_bytes; /* memory of detached pins (counted in used memory) */
} ir_pins;

/* One segment of pending output. */
typedef struct ir_seg {
    const char *ref; /* NULL: bytes live in c->obuf at [off, off+len) */
    size_t off, len;
    ir_pin *pin; /* with ref: keeps the memory alive; NULL: copied before the
                          command returns if not yet written */
} ir_seg;

#define CLIENT_CLOSE_AFTER_REPLY (1 << 0)
#define CLIENT_CLOSE_ASAP (1 << 1)
#define CLIENT_PROTOCOL_ERROR (1 << 2)
#define CLIENT_IN_HANDLER (1 << 3)
#define CLIENT_CLOSED (1 << 4)
#define CLIENT_MULTI (1 << 5)      /* inside MULTI: commands are queued (multi.c) */
#define CLIENT_DIRTY_CAS (1 << 6)  /* a WATCHed key changed: EXEC fails */
#define CLIENT_DIRTY_EXEC (1 << 7) /* a queued command was refused: EXECABORT */
#define CLIENT_BLOCKED (1 << 8)    /* waiting (blocked.c): input is not processed */
#define CLIENT_PUBSUB (1 << 9)     /* subscribed to a channel or pattern (pubsub.c) */
#define CLIENT_MONITOR (1 << 10)   /* MONITOR: sees every command run (commands.c) */
#define CLIENT_MUTED (1 << 11)     /* while its command runs, its replies go nowhere (a replica) */
#define CLIENT_SCRIPT \
    (1 << 12) /* the client Lua scripts run commands through (script.c): never blocks */
#define CLIENT_PROTECTED (1 << 13)   /* its busy script runs (script.c): no input; freed after it */
#define CLIENT_UNIX_SOCKET (1 << 14) /* connected over the Unix socket (unixsocket): local */

/* CLIENT REPLY: replies are sent (ON), dropped (OFF), dropped for this
 * command (SKIP, set by CLIENT REPLY SKIP) and then for the next one. */
#define CLIENT_REPLY_ON 0
#define CLIENT_REPLY_OFF 1
#define CLIENT_REPLY_SKIP 2
#define CLIENT_REPLY_SKIP_NEXT 3

#define PROTO_REQ_NONE 0
#define PROTO_REQ_INLINE 1
#define PROTO_REQ_MULTIBULK 2

typedef struct client {
    uint64_t id;
    struct ir_server *srv;
    ir_transport *tp;
    ir_conn *conn;
    int flags;
    int authenticated;            /* AUTH passed, or the default user is nopass */
    void *user;                   /* its ACL user (acl.c); NULL once the user was deleted */
    int resp;                     /* protocol version: 2, or 3 after HELLO 3 */
    int db;                       /* the SELECTed database */
    const struct ir_command *cmd; /* the command being executed */
    uint64_t req_start_ms;        /* when the unfinished request began arriving, 0 = none */
    uint64_t ctime_ms, last_ms;
    char *clientname; /* CLIENT SETNAME, NULL = none (any length; set it
                                 with clientSetName, the one validation) */
    char lib_name[64], lib_ver[32];
    char addr[128];

    /* input: unparsed bytes (bounded by client_query_buffer_limit) */
    char *qbuf;
    size_t qlen, qcap, qpos;
    /* parser state (see resp.c) */
    int reqtype;
    long multibulklen; /* args still to read in this multibulk */
    long long bulklen; /* length of the bulk being read, -1 = header next */
    /* the command being assembled / executed */
    int argc, argv_cap;
    ir_arg *argv;
    char *argbuf; /* storage for small args */
    size_t arglen, argcap;
    size_t *argoff; /* offsets of small args in argbuf */
    int big_arg;    /* argv[argc] is being filled in place */
    int qborrowed;  /* qbuf is the transport's buffer, parsed where it lies (resp.c) */
    int holding;    /* blocked with its input left in a transport that keeps it */
    size_t held_in; /* of that input, the bytes the blocked command parsed: skipped */
    int borrow_cmd; /* this request's command takes bodies by reference: 0 not known yet,
                       1 yes, -1 no */
    size_t big_have;
    /* the arguments the running command asked to hide (redactArg): a flag per
     * argument, NULL = none; SLOWLOG and MONITOR show them as "(redacted)" */
    unsigned char *redacted;
    int redacted_n; /* its length (argc when the first one was redacted); -1:
                       all but the name (no memory for the flags) */

    /* output */
    char *obuf;
    size_t olen, ocap;
    ir_seg *segs;
    int nsegs, segcap;
    size_t sent;          /* bytes of segs[0] already written */
    size_t pending_bytes; /* total not yet written */
    uint64_t writes;      /* writev calls that took bytes: call() drops a reply only if none */
    int has_refs;

    uint64_t woff;             /* the replication offset after its last propagated write (WAIT) */
    struct blockState *bstate; /* blocked.c: what it waits on; NULL until it first blocks */
    struct client *next, *prev;

    /* transactions, pub/sub and admin state (multi.c, pubsub.c, commands.c) */
    struct multiState *mstate;        /* MULTI queue and WATCHed keys, NULL = none */
    struct pubsubState *pubsub;       /* channels and patterns, NULL = none */
    const struct ir_command *lastcmd; /* CLIENT LIST cmd= */
    const char *lastsub;              /* its subcommand ("list"), NULL = none */
    int reply_mode;                   /* CLIENT_REPLY_* */
    char laddr[128];                  /* "ip:port" of our end */
} client;

typedef struct ir_command ir_command;
typedef void ir_command_proc(client *c);

/* Bits of the flag words the server acts on (parsed from ir_command.sflags). */
#define CMD_WRITE (1 << 0)
#define CMD_READONLY (1 << 1)
#define CMD_FAST (1 << 2)
#define CMD_NOAUTH (1 << 3) /* allowed before AUTH */
#define CMD_ADMIN (1 << 4)
#define CMD_DENYOOM (1 << 5)      /* refused when used memory > maxmemory */
#define CMD_NO_MULTI (1 << 6)     /* refused inside MULTI (SAVE, SHUTDOWN) */
#define CMD_SKIP_MONITOR (1 << 7) /* MONITOR sees it before it runs (EVAL: then its commands) */
#define CMD_SKIP_SLOWLOG (1 << 8) /* not in the slow log (EXEC: its commands are) */
#define CMD_ALLOW_BUSY (1 << 9)   /* served while a script is busy (see script.h) */
#define CMD_NO_MANDATORY_KEYS (1 << 10) /* may have no key (EVAL ... 0): GETKEYS answers [] */
#define CMD_PROTECTED (1 << 11)         /* DEBUG: only as enable-debug-command allows */

struct ir_command {
    const char *name; /* lower case, as Redis reports it */
    ir_command_proc *proc;
    int arity; /* n = exactly n args (incl. name), -n = at least n */
    int firstkey, lastkey, keystep;
    const char *sflags; /* Redis's flag words, as COMMAND shows them */
    const char *acl;    /* its ACL categories beyond those the flags imply
                                 (acl.c derives @write, @read, @fast, ... from sflags) */
    int flags;          /* CMD_* bits, parsed from sflags once (commands.c) */
    uint64_t calls;
    uint64_t cats;    /* ACL category bits: acl's words and the derived ones */
    int id;           /* its ACL command id (its index in the table) */
    int by_reference; /* commands.json "bodies_by_reference": its big arguments may point
                         into the transport's input (resp.c), which it only copies from */
};

struct ir_db;
struct ir_tables;
struct ir_chunk_store;

typedef struct ir_server {
    ir_config cfg;
    ir_transport *tp;        /* the network stack (kernel or DPDK) */
    ir_transport *local;     /* same-host clients' shared-memory rings (shm-socket), or NULL */
    ir_transport *unix_side; /* the kernel's Unix socket beside the DPDK stack, or NULL */
    client *clients;         /* doubly linked */
    uint64_t next_client_id;
    uint64_t nclients;
    uint64_t now_ms, start_ms;
    uint64_t total_connections, total_commands, rejected_connections;
    uint64_t net_input_bytes, net_output_bytes;
    volatile int shutdown_asap; /* SHUTDOWN_*: the loop ends; see daemon/daemon.c */
    struct ir_db *db;           /* database 0 */
    struct ir_db **dbs;         /* dbs[1..ndbs-1]: the others (SELECT); dbs[0] unused */
    int ndbs;
    struct ir_tables *tables;
    struct ir_chunk_store *chunks; /* trajectory streams and chunks (chunks.h) */
    struct ir_params *params;      /* parameter tables (replay/param.h, t_param.c) */
    uint64_t rng[4];
    char run_id[41];
    /* protected mode: who may talk without a password */
    int has_subnet;
    int subnet_family;
    unsigned char subnet_addr[16];
    int subnet_prefix;
    uint64_t timedout_clients, oom_rejections, output_limit_disconnects;
    /* big bodies of a bodies_by_reference command copied after all (INFO stats
     * by_reference_bodies_copied; resp.c): it arrived in pieces, or its request
     * outlived the read */
    uint64_t by_ref_copied;
    uint64_t cycles_input, cycles_execute, cycles_reply; /* see ir_stats */
    ir_pins pins;              /* reference counts of memory that replies point into */
    uint64_t eventloop_cycles; /* loop iterations (INFO stats), as Redis 7.2 counts them */
    const char *loop_mode;     /* "busy-poll", "adaptive" or "sleep" (the daemon's idle rule) */
    uint64_t dirty;            /* write commands run (rdb_changes_since_last_save) */
    /* What the running write command adds to `dirty`: -1 (the default, set by
     * call()) counts 1; a command that knows how many changes it made (SETBIT,
     * BITFIELD, PFADD: 0 when nothing changed, as Redis) sets it. */
    long long cmd_changes;
    struct ir_blocked *blocked; /* blocked clients (blocked.c); NULL until one blocks */

    /* transactions, pub/sub and admin state (multi.c, pubsub.c, commands.c) */
    struct ir_watchidx *watched; /* WATCHed keys of every database, NULL = nobody watches */
    struct ir_pubsub *pubsub;    /* channel and pattern subscribers, NULL = none yet */
    char *requirepass;           /* CONFIG SET requirepass: owned, binary-safe */
    size_t requirepass_len;
    struct ir_acl *acl; /* ACL users and the ACL LOG (acl.c) */
    uint64_t pubsub_obl_hard, pubsub_obl_soft,
        pubsub_obl_secs; /* client-output-buffer-limit pubsub */
    uint64_t total_error_replies, keyspace_hits, keyspace_misses;
    struct client **monitors; /* MONITOR clients, in order */
    int nmonitors, capmonitors;
    struct ir_scripting
        *scripting; /* Lua engine and script cache (script.c), NULL until first used */
    struct ir_functions
        *functions;       /* FUNCTION LOAD's libraries (functions.c), NULL until first used */
    int error_stats_skip; /* the running command's error reply was counted already (a
                                    script's error from redis.call): not in errorstats again */
} ir_server;

/* s->shutdown_asap: 0 = keep running; SHUTDOWN_SAVE_PER_CONFIG = stop and
 * save first if save_on_shutdown (SIGTERM/SIGINT; pending until the loop
 * checks, SHUTDOWN ABORT cancels it); SHUTDOWN_DONE = stop, the SHUTDOWN
 * command already saved or was told not to. */
#define SHUTDOWN_SAVE_PER_CONFIG 1
#define SHUTDOWN_DONE 2

/* ir_stop() (any thread, or the host's signal handler) only sets a flag; the
 * loop, and SHUTDOWN before it decides anything, turn it into shutdown_asap =
 * SHUTDOWN_SAVE_PER_CONFIG. A request made before the loop starts is kept for
 * it, and each request is taken once. */
int serverTakeStopRequest(ir_server *s);
/* At the end of ir_run: a request made during the teardown (a second Ctrl-C) is
 * for the run that ends, not for the next one in this process. */
void serverDropStopRequest(void);

/* ---- replies ----------------------------------------------------------- */
void addReplyProto(client *c, const char *s, size_t len);
void addReplyStr(client *c, ir_str s);
void addReplyStatus(client *c, const char *status);
/* A HELP reply: an array of the n lines as status replies (addReplyHelpOf: of
 * a static array of lines). */
void addReplyHelp(client *c, const char *const *lines, size_t n);
#define addReplyHelpOf(c, lines) addReplyHelp((c), (lines), sizeof(lines) / sizeof((lines)[0]))
void addReplyError(client *c, const char *err); /* adds "-ERR " unless err starts with '-' */
void addReplyErrorFormat(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void addReplyLongLong(client *c, long long ll);
void addReplyDouble(client *c, double d); /* RESP2: a bulk string; RESP3: ",d" */
/* A double already formatted (a command with its own format, e.g. ZSCORE's %.17g) */
void addReplyDoubleText(client *c, const char *text, size_t len);
void addReplyBulk(client *c, const void *p, size_t len); /* copied, whatever its size */
void addReplyBulkCString(client *c, const char *s);      /* NULL -> null bulk */
void addReplyNull(client *c);                            /* RESP2 $-1, RESP3 _ */
void addReplyNullArray(client *c);                       /* RESP2 *-1, RESP3 _ */
void addReplyArrayLen(client *c, long len);
void addReplyMapLen(client *c, long pairs); /* RESP2: array of 2*pairs */
void addReplySetLen(client *c, long len);   /* RESP2: array */
void addReplyPushLen(client *c, long len);  /* RESP2: array (pub/sub messages) */
void addReplyBool(client *c, int b);        /* RESP2: :1 / :0 */
void addReplyBulkLongLong(client *c, long long ll);
/* RESP3: a verbatim string "=len\r\next:txt" (ext is 3 bytes, "txt"); RESP2: a bulk. */
void addReplyVerbatim(client *c, const char *txt, size_t len, const char *ext);
/* A bulk whose body the caller writes: returns a pointer to len bytes of
 * reply buffer to fill (valid until the next addReply call). */
char *addReplyBulkReserve(client *c, size_t len);
/* len bytes of raw protocol at the end of the output, for the caller to fill
 * (all of them); a closing or muted client's go nowhere. */
char *addReplyReserve(client *c, size_t len);
/* A bulk of total bytes built in parts: "$total\r\n" and head bytes of reply
 * buffer for the caller to fill (valid until the next addReply call); the
 * caller then adds the other total - head bytes (addReplyRefPinned, addReplyProto)
 * and the closing "\r\n" itself. */
char *addReplyBulkBegin(client *c, size_t total, size_t head);
/* Bytes sent by reference when len >= IR_REF_MIN (else copied), for memory
 * whose owner holds a pin slot (*holder, NULL when not pinned yet): the
 * reference is counted on the pin, so it may outlive the command and is
 * never copied. Nothing else is ever referenced (reply.c). */
void addReplyRefPinned(client *c, const void *p, size_t len, ir_pin **holder);
void addReplyBulkPinned(client *c, const void *p, size_t len, ir_pin **holder);

/* ---- pins (reply.c) ---------------------------------------------------- */
/* The pin in *holder, or a new one from the pool stored there. */
ir_pin *pinAcquire(ir_pins *pool, ir_pin **holder);
/* Drop one reference taken with pin->refs++; the last one frees detached memory. */
void pinRelease(ir_pin *pin);
/* pinDetach, pinOverwrite: pin.h */
void pinsFree(ir_pins *pool); /* the free list; every pin must be released */
/* Drop a client's pending output, releasing its pins. */
void clientDiscardReply(client *c);

/* Canned replies. */
extern const struct ir_shared_replies {
    ir_str ok, pong, czero, cone, cnegone, nullbulk, nullarray, emptyarray, wrongtypeerr, syntaxerr,
        notinteger, outofrange, nokeyerr;
} shared;

/* Errors with Redis's texts. */
void addReplyErrorArity(client *c);
/* "wrong number of arguments for 'client|setname' command": argv[1] in lower case. */
void addReplySubcommandArity(client *c, const char *container);
void rejectCommandFormat(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- argument helpers (reply with the Redis error and return -1 on failure) ---- */
int getLongLongFromArg(client *c, int i,
                       long long *out); /* "value is not an integer or out of range" */
int getPositiveLongFromArg(client *c, int i,
                           long long *out);         /* "value is out of range, must be positive" */
int argEq(const client *c, int i, const char *lit); /* case-insensitive */
/* Take ownership of argv[i] as a malloc'd, NUL-terminated buffer (steals big bulks). */
char *argSteal(client *c, int i, size_t *len);

/* ---- server plumbing --------------------------------------------------- */
ir_server *server_new(const ir_config *cfg);
void server_free(ir_server *s);
void server_tick(ir_server *s); /* ~10 Hz: expiry, stats */
void freeClient(client *c);
void clientFlush(client *c); /* write what the transport takes */
/* As Redis 7.0.15 (CVE-2025-21605): a client that has not authenticated
 * while a password is required may keep at most 1024 bytes of output the
 * socket has not taken; over that (after a write) it is to be closed. */
#define UNAUTH_OUTPUT_LIMIT 1024
int clientUnauthOutputOver(client *c);
void processInputBuffer(client *c); /* parse and run complete commands (resp.c) */
void clientResumeInput(client *c);  /* an unblocked client's waiting input (resp.c) */
int processCommand(client *c);      /* dispatch argv; 0 = keep going */
/* Run c->cmd on c->argv now, with its statistics (processCommand and EXEC). */
void call(client *c, const ir_command *cmd);
/* Command statistics (commands.c): a call of cmd took usec; failed: it replied
 * an error. Subcommands (c->lastsub) are counted apart, as "client|list". */
void commandStatsCall(const client *c, const ir_command *cmd, uint64_t ns, int failed);
void commandStatsRejected(const client *c, const ir_command *cmd);
/* A blocked command answered when served (its call was counted when it blocked):
 * a failure counts in failed_calls, as Redis's updateStatsOnUnblock. */
void commandStatsUnblocked(const client *c, const ir_command *cmd, int failed);
/* The subcommand name argv[1] selects in a container command (CONFIG GET:
 * "get"), as a static string; NULL for other commands. */
const char *commandSubName(const ir_command *cmd, const client *c);
/* The flag words of that subcommand (SCRIPT LOAD: "noscript stale"), NULL for
 * other commands or an unknown subcommand. */
const char *commandSubFlags(const ir_command *cmd, const client *c);
/* Is c's command (cmd, or its subcommand) served while a script is busy? */
int commandAllowedBusy(const ir_command *cmd, const client *c);
/* Count an error reply by its code ("ERR", "WRONGTYPE", ...) for INFO errorstats. */
void errorStatsCount(ir_server *s, const char *reply, size_t len);
/* MONITOR: the line for c's command, formatted before it runs (it may take
 * its arguments over), sent to every monitor once it ran (and freed). *args
 * is where its arguments begin. monitorAfterCall rewrites the line once the
 * command ran if it redacted arguments (redactArg: shown as "(redacted)", as
 * Redis shows them) or changed the database (Redis shows the one it left); it
 * frees line (NULL when out of memory). */
char *monitorFormat(const client *c, size_t *len, size_t *args);
char *monitorAfterCall(const client *c, char *line, size_t *len, size_t args);
void monitorSend(client *c, char *line, size_t len);
void monitorRemove(client *c);
/* The password AUTH compares against (binary-safe); len 0 = none. */
const char *serverRequirePass(const ir_server *s, size_t *len);
void resetClientArgs(client *c);
ir_command *lookupCommand(const char *name, size_t len);
const ir_command *commandTable(size_t *n);
/* ACL's view of the table: ids 0..count-1 are the commands, then the subcommands. */
int commandIdCount(void);
int commandIdParent(int id); /* the container's id for a subcommand, else -1 */
int commandIdIsContainer(int id);
uint64_t commandIdCats(int id);
const char *commandIdName(int id, char *buf, size_t len); /* "get", "client|kill" */
int commandIdByName(const char *name, size_t len);        /* "get" or "client|kill"; -1 unknown */
/* The id a call checks: the subcommand's if argv[1] names one of cmd's, else cmd's. */
int commandIdOfCall(const ir_command *cmd, const ir_arg *argv, int argc);
/* A call's keys by the command's key specs (as COMMAND GETKEYSANDFLAGS): positions
 * and spec flag words, up to max; returns the count (0 when there are none). */
long commandKeysOf(const ir_command *cmd, const ir_arg *argv, int argc, int *pos,
                   const char **flags, long max);
uint64_t ir_mstime(void);
uint64_t ir_rss_bytes(void);
/* What the server holds, counted like Redis's used_memory: the keyspace, replay
 * items and slot metadata, and client buffers. maxmemory compares against it. */
uint64_t serverUsedMemory(const ir_server *s);
int authRequired(const client *c);
/* May c do what a Redis 7 "enable-*" setting guards ("no", "yes", "local")? */
int protectedActionAllowed(const client *c, const char *setting);
/* At start, one line for each of those settings an operator opened. */
void serverLogOpenedProtections(const ir_server *s);
/* Show argument j of the running command as "(redacted)" in SLOWLOG and
 * MONITOR (Redis's redactClientCommandArgument): AUTH, HELLO ... AUTH, ACL
 * SETUSER and CONFIG SET of a sensitive parameter call it. */
void redactArg(client *c, int j);
static inline int argRedacted(const client *c, int j) {
    if (c->redacted_n < 0) return j > 0;
    return j >= 0 && j < c->redacted_n && c->redacted[j];
}
int ir_parse_subnet(const char *text, int *family, unsigned char addr[16], int *prefix);
/* An IP address in text (s[0..len)): 4 with the address in out[0..3], 6 with the 16
 * bytes of an IPv6 address, 0 if it is neither (util.c: the server reads addresses
 * itself, without the socket headers). */
int ir_parse_ip(const char *s, size_t len, unsigned char out[16]);
extern ir_server *g_server;

/* First steps of a forked child that writes a file (BGSAVE, BGREWRITEAOF):
 * SIGINT/SIGTERM back to their defaults, SIGPIPE ignored, killed when the
 * server dies, and every inherited descriptor above stderr closed but keep
 * (-1: none), so that no client socket stays open in the child (util.c). */
void forkedChildBegin(int keep);

/* A new file at path for writing, mode 0600, that no one else has prepared: opened
 * O_CREAT | O_EXCL | O_NOFOLLOW, after removing a stale one of ours (a regular
 * file this user owns, left by a crash). Anything else there (a symlink, another
 * user's file) is left alone and the open fails with EEXIST, so nothing planted
 * at a temporary file's path is written through. Returns the descriptor (close
 * on exec), or -1 with errno (util.c). */
int ir_create_private(const char *path);

/* realloc that logs and aborts when memory runs out (for state whose loss would
 * corrupt the server: transactions, subscriptions), like Redis's zrealloc. */
void *ir_xrealloc(void *p, size_t n);

/* A growable byte buffer: len bytes at p, room for cap. irBytesPut appends,
 * doubling the room as needed (at least `first` bytes the first time); out of
 * memory aborts, as in ir_xrealloc. Used for the AOF's and the replication
 * stream's encodings. */
typedef struct ir_bytes {
    char *p;
    size_t len, cap;
} ir_bytes;
void irBytesPut(ir_bytes *b, const void *p, size_t n, size_t first);

/* serverLog, ir_set_error and ir_set_error_errno: transport.h (every stack logs too). */
size_t clientFeed(client *c, const char *buf, size_t len); /* the bytes taken */

#endif /* IR_SERVER_H */
