/* multi.h - transactions and WATCH (multi.c). Server thread only. */
#ifndef IR_MULTI_H
#define IR_MULTI_H

#include <stddef.h>

#include "server.h"

struct ir_db;

/* processCommand's hook: inside MULTI every command but the transaction
 * commands themselves is queued (multiIsTxCommand says which run at once). */
int multiIsTxCommand(const ir_command *cmd);
void multiQueue(client *c, const ir_command *cmd);
/* A command refused while c is in MULTI: EXEC will answer EXECABORT. */
void multiFlagTransaction(client *c);
/* EXEC refused: -EXECABORT with the reason (an error's text without its '-'),
 * the queue discarded and the keys unwatched; the client leaves MULTI. */
void execAbort(client *c, const char *reason);
/* notify.c's hooks: mark the clients watching the key (the watched keys of db
 * that a flush touches, as Redis 7.0) dirty. */
void multiTouchKey(ir_server *s, struct ir_db *db, const char *key, size_t len);
void multiTouchDb(ir_server *s, struct ir_db *db);
/* SWAPDB is about to exchange the contents of a and b (Redis 7.0's rules for
 * watched keys that were, or become, expired ones). */
void multiTouchSwappedDbs(ir_server *s, struct ir_db *a, struct ir_db *b);
/* CLIENT LIST: queued commands (-1 = not in MULTI's state), their bytes, watched keys. */
int multiQueueCount(const client *c);
size_t multiQueueBytes(const client *c);
void multiReset(client *c);      /* RESET: no transaction, nothing watched */
void multiFreeClient(client *c); /* freeClient */

#endif
