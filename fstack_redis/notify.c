/* notify.c - what a write tells the rest of the server: the hooks every
 * command that changes the keyspace calls, as Redis's signalModifiedKey and
 * signalKeyAsReady.
 *
 *   signalModifiedKey   a key's value changed, was deleted or expired:
 *                       WATCH (multi.c) marks the clients watching it dirty.
 *   signalKeyAsReady    a list gained elements: clients blocked on the key
 *                       (blocked.c) are served after the current command.
 *   signalFlushedDb     a database was emptied or swapped (FLUSHDB, FLUSHALL,
 *                       SWAPDB): every watched key in it counts as modified.
 *
 * Each hook forwards to its subsystem; this file keeps the one list of them.
 * While nobody WATCHes, signalModifiedKey and signalFlushedDb cost one test.
 */
#include "notify.h"

#include "blocked.h"
#include "multi.h"
#include "replication.h"

void signalModifiedKey(client *c, struct ir_db *db, const char *key, size_t len) {
    ir_server *s = c ? c->srv : g_server;
    if (c) replMarkDirty(); /* a command wrote: replicas get it (expiry propagates itself) */
    if (s && s->watched) multiTouchKey(s, db, key, len);
}

void signalKeyAsReady(struct ir_db *db, const char *key, size_t len) {
    if (g_server && g_server->blocked) blockedKeyReady(g_server, db, key, len);
}

void signalFlushedDb(struct ir_db *db) {
    replMarkDirty();
    if (g_server && g_server->watched) multiTouchDb(g_server, db);
}
