/* db.h - the keyspace: strings and lists with expiry (one database, like SELECT 0).
 *
 * Concurrency contract: owned by the server thread; no locking.
 */
#ifndef IR_DB_H
#define IR_DB_H

#include <stddef.h>
#include <stdint.h>

struct ir_db;

struct ir_db *dbNew(void);
void dbFree(struct ir_db *db);
uint64_t dbSize(const struct ir_db *db);        /* keys, expired ones not yet reaped included */
uint64_t dbExpires(const struct ir_db *db);     /* keys with a TTL */
uint64_t dbBytes(const struct ir_db *db);       /* bytes held by keys and values */
void dbEmpty(struct ir_db *db);
/* Reap some expired keys, Redis-style (bounded work per call). */
void dbActiveExpire(struct ir_db *db, uint64_t now_ms);

#endif
