/* replication.h - the master side of Redis replication: SYNC/PSYNC (always a
 * full resynchronization from an RDB image built in memory, see rdb.h),
 * REPLCONF, and the stream of write commands fed to every replica.
 *
 * Propagation follows Redis: a command that changed the dataset (a write hook
 * in notify.c marks it) goes to the replicas as it was called, unless it
 * rewrote itself (replRewrite: EXPIRE -> PEXPIREAT, BLPOP -> LPOP ...) or
 * asked for other commands (replAlso); a SELECT precedes a command of another
 * database; when one top-level command (EXEC, SPOP with a count) propagates
 * more than one command they are wrapped in MULTI/EXEC. Keys deleted because
 * they expired go out at once as DEL (UNLINK with lazyfree-lazy-expire), on
 * their own. Replay tables (REPLAY.*) are neither in the RDB nor propagated.
 *
 * The same stream goes to the append-only file (aof.c) while it is on, with a
 * SELECT of its own. While neither is there the only cost on the command path
 * is the test of replActive in call().
 *
 * Concurrency contract: server thread only.
 */
#ifndef IR_REPLICATION_H
#define IR_REPLICATION_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

struct ir_db;

/* A client that sent SYNC/PSYNC: it receives the stream and no replies. */
#define CLIENT_SLAVE (1 << 20)

extern int repl_nslaves;               /* replicas attached */
extern int repl_aof;                   /* the AOF takes the stream too (aof.c) */
extern int repl_loading;               /* an AOF is being loaded: nothing is propagated */
extern int repl_cmd_dirty;             /* the running command changed the dataset */
extern long long repl_ping_period;     /* repl-ping-replica-period (config.c) */
extern long long repl_lazy_expire;     /* lazyfree-lazy-expire (config.c) */
extern long long repl_lazy_server_del; /* lazyfree-lazy-server-del (config.c) */
/* client-output-buffer-limit's replica class: hard, soft bytes, soft seconds (config.c) */
extern unsigned long long obl_slave[3];

/* Does the stream go anywhere (a replica, the AOF)? */
static inline int replActive(void) { return (repl_nslaves || repl_aof) && !repl_loading; }
/* notify.c: a client's command changed a key or a database. */
static inline void replMarkDirty(void) { repl_cmd_dirty = 1; }

/* What call() keeps across a (possibly nested) command. */
typedef struct replFrame {
    int dirty, prevent;
    size_t ownbase;
} replFrame;
/* Big arguments stay the client's during the command (argSteal copies
 * them), so that the command can still be propagated as it was called. */
void replCallBegin(client *c, replFrame *f);
void replCallEnd(client *c, const ir_command *cmd, replFrame *f);

/* The running command propagates argv[0..argc) (in c's database) instead
 * of itself. Outside a command (a blocked client served) it goes at once. */
void replRewrite(client *c, int argc, const ir_str *argv);
static inline ir_str replArg(const client *c, int i) {
    return (ir_str){c->argv[i].ptr, c->argv[i].len};
}
/* The common rewrites: SET key value PXAT when (key and value from argv[1], argv[vi]);
 * PEXPIREAT key when [argv[first..] (the options of EXPIRE), first 0 = none];
 * DEL key (UNLINK when lazy). */
void replRewriteSetPxat(client *c, int vi, long long when);
void replRewritePexpireat(client *c, long long when, int first);
void replRewriteDel(client *c, int lazy);
/* The running command propagates argv too (after what came before). */
void replAlso(client *c, int argc, const ir_str *argv);
/* The running command is not propagated itself. */
void replPrevent(client *c);
/* A key of db expired and was deleted (lazily or by the cron). */
void replPropagateExpired(struct ir_db *db, const char *key, size_t len);

void syncCommand(client *c); /* SYNC and PSYNC */
/* What a replica may still run (without a reply): REPLCONF, PING, SYNC/PSYNC. */
int replAcceptsFromReplica(const ir_command *cmd);
void replconfCommand(client *c);
void waitCommand(client *c);    /* WAIT numreplicas timeout */
void replFreeClient(client *c); /* freeClient of a replica */
void replCron(ir_server *s);    /* server_tick: PING every repl-ping-replica-period */
/* INFO replication's body (from role: on) and ROLE's reply. */
char *replInfo(const ir_server *s); /* malloc'd */
void replRoleReply(client *c);

#endif /* IR_REPLICATION_H */
