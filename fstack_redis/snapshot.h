/* snapshot.h - point-in-time snapshots of the keyspace and every replay
 * table: SAVE, BGSAVE, LASTSAVE, INFO's "# Persistence" section, saving on
 * shutdown and loading the newest complete snapshot at start. The file
 * format is described at the top of snapshot.c.
 *
 * Files live in one directory (ir_config.dir): a save writes
 * `.inreplay-<ms>.snap.tmp`, fsyncs it, renames it to `inreplay-<ms>.snap`
 * and fsyncs the directory, then deletes all but the newest
 * IR_SNAPSHOT_KEEP snapshots. <ms> is the unix time in milliseconds, made
 * larger than every name already in the directory, so names order by age.
 *
 * Concurrency contract: everything here runs on the server thread. BGSAVE
 * fork()s; the child writes the snapshot from its copy-on-write image of the
 * keyspace and tables and _exit()s, and snapshotTick reaps it. The state
 * (the child, the last save, counters) is per process, like the server:
 * one server per process.
 */
#ifndef IR_SNAPSHOT_H
#define IR_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

#define IR_SNAPSHOT_KEEP 3 /* complete snapshots left in the directory after a save */

/* Reset the snapshot state for a new server (after server_new). Calling it
 * is optional: every entry point below does it for a server it has not seen. */
void snapshotInit(ir_server *s);

/* Can dir hold snapshots? It must exist, be a directory, and take a new
 * file (a probe file is created and removed: access() says yes to root even
 * where nothing can be created). Returns 0, or an errno with msg saying why
 * in Redis's words where Redis has them ("No such file or directory", "Not a
 * directory"). */
int snapshotCheckDir(const char *dir, char *msg, size_t msglen);

/* Make dir, checked as above, the snapshot directory of s (at start and for
 * CONFIG SET dir): stored as an absolute path, s->cfg.dir points at it. A
 * relative dir is taken relative to the current snapshot directory, as
 * Redis's chdir does (at start, when there is none yet, to the process's
 * working directory). Returns 0, or an errno with msg as above; nothing
 * changes then. A BGSAVE in progress finishes in the directory it began in. */
int snapshotSetDir(ir_server *s, const char *dir, char *msg, size_t msglen);

/* Load the newest complete snapshot of dir (NULL: s->cfg.restore) into s.
 * Each candidate, newest first, is checked whole (header, DONE record,
 * length, CRC-32) before it is parsed into a fresh keyspace and table set,
 * and only a snapshot that parsed completely replaces s's keyspace (tables
 * of the same name are replaced; other existing tables stay) and its
 * trajectory streams and chunks (all of them: an old snapshot has none). A corrupt or
 * truncated snapshot is logged in one line ("snapshot P is corrupt (why), not
 * loaded") and the next older one is tried. Returns the number of keys plus
 * tables loaded (0 when dir has no snapshot or does not exist), or IR_EINVAL (snapshots exist
 * but none is complete, or s has a TRAJECTORY table with items that the
 * newest complete snapshot lacks: its chunks would not survive the load), IR_ENOMEM (one did not fit in memory; nothing older
 * is tried), IR_ECONFIG (dir cannot be read). msg gets one line saying what
 * happened, for the caller to log. */
int snapshotRestore(ir_server *s, const char *dir, char *msg, size_t msglen);

/* Save synchronously into s->cfg.dir (SAVE, and on shutdown). A BGSAVE in
 * progress is killed first. Returns IR_OK, or IR_ECONFIG (the file could not
 * be written: msg says why) or IR_ENOMEM. */
int snapshotSave(ir_server *s, char *msg, size_t msglen);

/* Start a background save (BGSAVE). Returns IR_OK, IR_ERUNNING if one is in
 * progress ("Background save already in progress" in msg), or IR_ECONFIG
 * (fork failed). */
int snapshotBackground(ir_server *s, char *msg, size_t msglen);

/* Call about every 100 ms: reaps a finished BGSAVE child (waitpid WNOHANG),
 * records the outcome, prunes old snapshots. */
void snapshotTick(ir_server *s);

/* Call when the server stops: kills and reaps a BGSAVE child still running
 * and removes its temporary file. (Call it before snapshotSave on shutdown,
 * or let snapshotSave do it.) */
void snapshotShutdown(ir_server *s);

/* 1 while a BGSAVE child runs. */
int snapshotInProgress(void);

/* 1 once snapshotRestore has loaded a snapshot (even one of no keys and no
 * tables, when it returns 0). */
int snapshotLoaded(void);

/* Write INFO's "# Persistence" section (title line included, CRLF line
 * ends, NUL-terminated) into buf; returns the length it needs, like
 * snprintf. */
size_t snapshotInfo(ir_server *s, char *buf, size_t len);

/* Commands. */
void saveCommand(client *c);     /* SAVE */
void bgsaveCommand(client *c);   /* BGSAVE [SCHEDULE] */
void lastsaveCommand(client *c); /* LASTSAVE */

#endif
