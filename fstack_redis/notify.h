/* notify.h - keyspace change hooks (see notify.c). Server thread only. */
#ifndef IR_NOTIFY_H
#define IR_NOTIFY_H

#include <stddef.h>

#include "server.h"

struct ir_db;

/* c: the client whose command made the change (NULL for expiry by the cron). */
void signalModifiedKey(client *c, struct ir_db *db, const char *key, size_t len);
void signalKeyAsReady(struct ir_db *db, const char *key, size_t len);
void signalFlushedDb(struct ir_db *db);

#endif
