/* aof.h - the append-only file, as Redis 7.0 keeps it (multi-part AOF).
 *
 * In <dir>/<appenddirname> a manifest (<appendfilename>.manifest) lists one
 * base file (<appendfilename>.<seq>.base.rdb: an RDB image, rdb.c's; or with
 * aof-use-rdb-preamble no .base.aof: the commands Redis's rewrite writes) and
 * the incr files after it (<appendfilename>.<seq>.incr.aof: commands in RESP).
 * While appendonly is yes every write command goes to the last incr file in
 * the form the replication stream has (replication.c feeds it, with a SELECT
 * of its own), written before the command's reply and fsynced per
 * appendfsync: always (before the reply), everysec (by the cron), no.
 *
 * BGREWRITEAOF (and CONFIG SET appendonly yes) opens a new incr file for
 * what comes next and forks a child that writes the keyspace as a new base;
 * when it is done the manifest is replaced (written to a temporary file and
 * renamed) with the new base and the new incr, and the old files are
 * deleted. At start with appendonly yes the files of the manifest are
 * loaded (the base, then each incr, its commands run by a client without a
 * connection); DEBUG LOADAOF empties the keyspace and does the same.
 *
 * Replay tables (REPLAY.*) are not propagated, so they are not in the AOF:
 * they persist in snapshots only.
 *
 * Concurrency contract: server thread only; one server per process.
 */
#ifndef IR_AOF_H
#define IR_AOF_H

#include <stddef.h>

#include "server.h"

/* CONFIG parameters (config.c): appendfsync (0 everysec, 1 always, 2 no, the
 * table's order), aof-use-rdb-preamble, aof-load-truncated,
 * auto-aof-rewrite-percentage and -min-size, aof-timestamp-enabled. */
extern long long aof_fsync, aof_use_rdb_preamble, aof_load_truncated, aof_rewrite_perc,
    aof_rewrite_min_size, aof_timestamp_enabled;
#define AOF_FSYNC_EVERYSEC 0
#define AOF_FSYNC_ALWAYS 1
#define AOF_FSYNC_NO 2

/* At start, after the snapshot (if any) is loaded: with appendonly yes load
 * the AOF (its keys replace the keyspace; tables stay), or create it from
 * the dataset when there is none. 0, or -1 with why in msg. */
int aofStartup(ir_server *s, char *msg, size_t msglen);
/* When the server stops: a rewrite child is killed, the file synced. */
void aofShutdown(ir_server *s);
/* server_tick: reap a rewrite child, fsync everysec, automatic rewrites. */
void aofCron(ir_server *s);

/* May CONFIG SET appendonly yes start it (its directory exists or is made)? 0, or -1. */
int aofCanEnable(const ir_server *s, char *err, size_t errlen);
/* CONFIG SET appendonly: start (a rewrite makes the first base) or stop. */
int aofSetEnabled(ir_server *s, int on, char *err, size_t errlen);

/* The replication stream's bytes of one command (replication.c), after a
 * SELECT when db (>= 0) is not the file's; aofFlush writes them. */
void aofFeed(int db, const char *p, size_t n);
void aofFlush(void);
/* Set while the AOF is on and its last write (or fsync) failed: write
 * commands and PING are refused with Redis's -MISCONF error (aofMisconf)
 * until the cron's retry succeeds. */
extern int aof_write_failed;
void aofMisconf(char *msg, size_t len);

/* RESP for the command form of a rewritten base (aof-use-rdb-preamble no). */
struct rdbBuf;
void aofPutArray(struct rdbBuf *b, long n);
void aofPutBulk(struct rdbBuf *b, const char *p, size_t n);

void bgrewriteaofCommand(client *c);
void aofDebugLoad(client *c); /* DEBUG LOADAOF */
/* INFO persistence's aof_* lines (CRLF ends); the length written, as snprintf. */
size_t aofInfo(const ir_server *s, char *buf, size_t len);

#endif /* IR_AOF_H */
