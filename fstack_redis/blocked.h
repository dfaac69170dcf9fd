/* blocked.h - clients that wait: the blocking list commands and the replay
 * rate limiter share this machinery (see blocked.c). Server thread only.
 */
#ifndef IR_BLOCKED_H
#define IR_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

struct ir_db;
struct ir_table;

#define BLOCKED_NONE 0
#define BLOCKED_LIST 1   /* BLPOP & co: waits for a key to get elements */
#define BLOCKED_REPLAY 2 /* REPLAY.SAMPLE / REPLAY.ADD: waits for the rate limiter */
#define BLOCKED_WAIT 3   /* WAIT: waits for replicas' acknowledgements (replication.c) */

/* One place in a queue of waiting clients (arrival order). */
typedef struct bwait {
    client *c;
    struct bqueue *q;
    struct bwait *prev, *next;
} bwait;

/* A queue of waiters: the clients blocked on one key, or one table's
 * samplers or inserters (kept in the table's host state, ir_table.host, which
 * blocked.c makes when a client first waits there and frees when the table
 * goes: the replay engine never sees a client). A queue that may now serve
 * its head is "ready". */
typedef struct bqueue {
    bwait *head, *tail;
    size_t n;
    int ready;
    struct bqueue *next_ready;
    void *owner; /* the bkey or the ir_table (blocked.c) */
    int kind;    /* BLOCKED_LIST or BLOCKED_REPLAY */
} bqueue;

/* Counters for INFO (see blocked.c). */
typedef struct ir_blocked_stats {
    uint64_t blocked_clients; /* now */
    uint64_t blocked_keys;    /* keys with waiters now */
    uint64_t total_blocked;   /* clients that ever waited */
    uint64_t timeouts;        /* answered at their timeout */
    uint64_t disconnects;     /* freed while waiting */
    uint64_t dropped;         /* answered because their table went */
    uint64_t shutdown;        /* answered because the server stopped */
} ir_blocked_stats;

/* Block c (its command's reply is deferred; its argv stays). timeout_ms is
 * absolute (ir_mstime), 0 = forever. A client already blocked (its command
 * is being re-run because its queue is ready) keeps its place: nothing
 * changes. Keys: n keys argv[first], argv[first + step], ... in db. */
void blockForKeys(client *c, struct ir_db *db, int first, int n, int step, uint64_t timeout_ms);
/* WAIT: wait in q (kind BLOCKED_WAIT); every waiter re-runs when q is ready;
 * at the deadline the command re-runs with blocking denied. */
void blockForWait(client *c, bqueue *q, uint64_t timeout_ms);
/* Wait on one of a table's queues (0: samplers, 1: inserters). */
void blockForTable(client *c, struct ir_table *t, int which, uint64_t timeout_ms);

/* May the current command block? Not inside MULTI, not when re-run at its
 * deadline (then it answers as its non-blocking form or with its timeout
 * error). */
int blockingAllowed(const client *c);
/* The waiters on one of a table's queues (0: samplers, 1: inserters) ahead of
 * c (0 when c is the one re-run). */
size_t blockedTableAhead(const client *c, const struct ir_table *t, int which);
/* How many clients wait on one of a table's queues. */
size_t blockedTableWaiting(const struct ir_table *t, int which);

/* The key (db, key) gained elements: its waiters are served after the
 * current command (notify.c's signalKeyAsReady). */
void blockedKeyReady(ir_server *s, struct ir_db *db, const char *key, size_t len);
/* Every key some client waits on in db may now hold a list (SWAPDB brought
 * another database's contents in): each is served after the current command
 * if it does, as Redis's scanDatabaseForReadyKeys. */
void blockedDbReady(ir_server *s, struct ir_db *db);
/* A key's queue may now serve its head. */
void blockedQueueReady(ir_server *s, bqueue *q);
/* One of a table's queues (0: samplers, 1: inserters) may now serve its head. */
void blockedTableReady(ir_server *s, struct ir_table *t, int which);
/* CLIENT UNBLOCK: answer blocked client c as its timeout would (error 0) or
 * with -UNBLOCKED (error 1); 0 if c is not blocked. */
int blockedUnblock(ir_server *s, client *c, int error);
/* A table goes (REPLAY.DROP, FLUSHALL): its waiters get an error. Reached
 * through the engine's host hook (replay.h's ir_engine_host), which blocked.c
 * sets when a client first waits on a table; it frees the table's host state. */
void blockedTableGone(ir_server *s, struct ir_table *t);
/* The thing a WAIT-kind queue waits on goes (a parameter table dropped while
 * SYNC pushers wait): each waiter gets -NOTABLE naming `what` and is
 * unblocked; q is then empty and may be freed. */
void blockedQueueGone(ir_server *s, bqueue *q, const char *what);

/* Serve ready queues and resume the input of unblocked clients (after a
 * command; after the loop's timeouts). */
void blockedHandle(ir_server *s);
/* Answer clients whose deadline passed. */
void blockedHandleTimeouts(ir_server *s);
/* How long the loop may wait (µs), at most `wait`, given the nearest deadline. */
long blockedWaitBound(ir_server *s, long wait);
/* Free c's blocked state (freeClient): a waiting client is counted and unqueued. */
void blockedClientFree(client *c);
/* Before exit: every waiting client gets an error, written out. */
void blockedShutdown(ir_server *s);
/* server.c: an unblocked client resumes its pipelined input, then flushes
 * or closes as after any input (may free c). */
void clientUnblocked(client *c);
void blockedStats(const ir_server *s, ir_blocked_stats *out);
void blockedFree(ir_server *s);

/* Parse a BLPOP-style timeout (decimal seconds) at argv[i] into an absolute
 * deadline in ms (0 = forever). Replies Redis's error and returns -1. */
int getBlockingTimeoutFromArg(client *c, int i, uint64_t *deadline_ms);

#endif
