/* notify.h - keyspace change hooks and keyspace notifications (see notify.c).
 * Server thread only. */
#ifndef IR_NOTIFY_H
#define IR_NOTIFY_H

#include <stddef.h>

#include "server.h"

struct ir_db;

/* c: the client whose command made the change (NULL for expiry by the cron). */
void signalModifiedKey(client *c, struct ir_db *db, const char *key, size_t len);
void signalKeyAsReady(struct ir_db *db, const char *key, size_t len);
void signalFlushedDb(struct ir_db *db);

/* ---- keyspace notifications (notify-keyspace-events) ------------------- */

/* The classes of notify-keyspace-events, Redis 7.0's bits and letters. */
#define NOTIFY_KEYSPACE (1 << 0)  /* K: __keyspace@<db>__:<key> <event> */
#define NOTIFY_KEYEVENT (1 << 1)  /* E: __keyevent@<db>__:<event> <key> */
#define NOTIFY_GENERIC (1 << 2)   /* g: del, expire, rename_from, ... */
#define NOTIFY_STRING (1 << 3)    /* $ */
#define NOTIFY_LIST (1 << 4)      /* l */
#define NOTIFY_SET (1 << 5)       /* s */
#define NOTIFY_HASH (1 << 6)      /* h */
#define NOTIFY_ZSET (1 << 7)      /* z */
#define NOTIFY_EXPIRED (1 << 8)   /* x */
#define NOTIFY_EVICTED (1 << 9)   /* e (nothing is evicted: never sent) */
#define NOTIFY_STREAM (1 << 10)   /* t: xadd, xtrim, xdel, xgroup-*, xsetid */
#define NOTIFY_KEY_MISS (1 << 11) /* m: keymiss, not part of A */
#define NOTIFY_MODULE (1 << 13)   /* d (no modules: never sent) */
#define NOTIFY_NEW (1 << 14)      /* n: new, not part of A */
#define NOTIFY_ALL \
    (NOTIFY_GENERIC | NOTIFY_STRING | NOTIFY_LIST | NOTIFY_SET | NOTIFY_HASH | NOTIFY_ZSET | \
     NOTIFY_EXPIRED | NOTIFY_EVICTED | NOTIFY_STREAM | NOTIFY_MODULE) /* A */

/* The current notify-keyspace-events as bits (config.c sets it). */
extern long long notifyKeyspaceFlags;

/* "KEA" and the like into bits; -1 for a character that is no class. */
long long notifyFlagsFromString(const char *s, size_t len);
/* Bits into Redis's canonical string (CONFIG GET): buf of at least 16 bytes. */
void notifyFlagsToString(long long flags, char *buf, size_t len);

void notifyKeyspaceEventSend(int type, const char *event, const char *key, size_t klen, int dbid);

/* Publish `event` for key in database dbid, if its class is enabled: on
 * __keyspace@<dbid>__:<key> (message: the event) with K, and on
 * __keyevent@<dbid>__:<event> (message: the key) with E. While
 * notify-keyspace-events is "" this is one test. */
static inline void notifyKeyspaceEvent(int type, const char *event, const char *key, size_t klen,
                                       int dbid) {
    if (notifyKeyspaceFlags & type) notifyKeyspaceEventSend(type, event, key, klen, dbid);
}

/* dbAdd sends "new" unless this is set: a STORE that replaces its
 * destination (Redis overwrites it, which is not a new key), or DEBUG RELOAD
 * reading keys back (Redis's loader sends nothing). */
extern int notifyNoNewKey;

#endif
