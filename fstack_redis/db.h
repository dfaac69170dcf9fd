/* db.h - the keyspace: strings, lists, hashes and sets with expiry, in
 * `databases` numbered databases (SELECT). Replay tables are not in any of
 * them: they are global.
 *
 * Concurrency contract: owned by the server thread; no locking.
 */
#ifndef IR_DB_H
#define IR_DB_H

#include <stddef.h>
#include <stdint.h>

struct ir_db;
struct ir_server;

struct ir_db *dbNew(void);
void dbFree(struct ir_db *db);
uint64_t dbSize(const struct ir_db *db);    /* keys, expired ones not yet reaped included */
uint64_t dbExpires(const struct ir_db *db); /* keys with a TTL */
uint64_t dbBytes(const struct ir_db *db);   /* bytes held by keys and values */
void dbEmpty(struct ir_db *db);
/* Reap some expired keys, Redis-style (bounded work per call). */
void dbActiveExpire(struct ir_db *db, uint64_t now_ms);

/* Over every database of a server (database 0 is s->db, the others s->dbs[i]). */
int dbsCreate(struct ir_server *s); /* databases 1..N-1; 0 or -1 */
void dbsFree(struct ir_server *s);
struct ir_db *dbsAt(const struct ir_server *s, int id);
int dbsCount(const struct ir_server *s);
uint64_t dbsSize(const struct ir_server *s); /* keys in all databases */
uint64_t dbsBytes(const struct ir_server *s);
uint64_t dbsExpiredKeys(const struct ir_server *s);
/* Active expiry of every database, unless DEBUG SET-ACTIVE-EXPIRE 0 turned
 * it off (dbActiveExpireEnabled; lazy expiry on access always runs). */
void dbsActiveExpire(struct ir_server *s, uint64_t now_ms);
extern int dbActiveExpireEnabled;

#endif
