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
 *
 * Keyspace notifications (notify-keyspace-events), as Redis 7.0 sends them:
 * the commands call notifyKeyspaceEvent with Redis's event name and class
 * where Redis does, after the change and only when something changed; the
 * message goes through PUBLISH's delivery (pubsub.c) to
 * __keyspace@<db>__:<key> and/or __keyevent@<db>__:<event>. The channel name
 * is built on the stack (a heap buffer only for keys longer than 200 bytes).
 * Replay tables (REPLAY.*) are outside the keyspace and send none.
 */
#include "notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocked.h"
#include "multi.h"
#include "pubsub.h"

long long notifyKeyspaceFlags;
int notifyNoNewKey;
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

/* ---- keyspace notifications ---------------------------------------------- */

long long notifyFlagsFromString(const char *s, size_t len) {
    long long flags = 0;
    for (size_t i = 0; i < len && s[i]; i++) { /* Redis reads a C string: a NUL ends it */
        switch (s[i]) {
        case 'A': flags |= NOTIFY_ALL; break;
        case 'g': flags |= NOTIFY_GENERIC; break;
        case '$': flags |= NOTIFY_STRING; break;
        case 'l': flags |= NOTIFY_LIST; break;
        case 's': flags |= NOTIFY_SET; break;
        case 'h': flags |= NOTIFY_HASH; break;
        case 'z': flags |= NOTIFY_ZSET; break;
        case 'x': flags |= NOTIFY_EXPIRED; break;
        case 'e': flags |= NOTIFY_EVICTED; break;
        case 'K': flags |= NOTIFY_KEYSPACE; break;
        case 'E': flags |= NOTIFY_KEYEVENT; break;
        case 't': flags |= NOTIFY_STREAM; break;
        case 'm': flags |= NOTIFY_KEY_MISS; break;
        case 'd': flags |= NOTIFY_MODULE; break;
        case 'n': flags |= NOTIFY_NEW; break;
        default: return -1;
        }
    }
    return flags;
}

void notifyFlagsToString(long long flags, char *buf, size_t len) {
    static const struct {
        long long bit;
        char ch;
    } classes[] = {{NOTIFY_GENERIC, 'g'}, {NOTIFY_STRING, '$'},  {NOTIFY_LIST, 'l'},
                   {NOTIFY_SET, 's'},     {NOTIFY_HASH, 'h'},    {NOTIFY_ZSET, 'z'},
                   {NOTIFY_EXPIRED, 'x'}, {NOTIFY_EVICTED, 'e'}, {NOTIFY_STREAM, 't'},
                   {NOTIFY_MODULE, 'd'},  {NOTIFY_NEW, 'n'}};
    char out[32];
    size_t n = 0;
    if ((flags & NOTIFY_ALL) == NOTIFY_ALL) { /* as Redis 7.0: n is then not shown */
        out[n++] = 'A';
    } else {
        for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
            if (flags & classes[i].bit) out[n++] = classes[i].ch;
    }
    if (flags & NOTIFY_KEYSPACE) out[n++] = 'K';
    if (flags & NOTIFY_KEYEVENT) out[n++] = 'E';
    if (flags & NOTIFY_KEY_MISS) out[n++] = 'm';
    if (!len) return;
    if (n >= len) n = len - 1;
    memcpy(buf, out, n);
    buf[n] = '\0';
}

void notifyKeyspaceEventSend(int type, const char *event, const char *key, size_t klen, int dbid) {
    (void)type;
    ir_server *s = g_server;
    if (!s || !s->pubsub) return; /* nobody has ever subscribed */
    size_t elen = strlen(event);
    char stackbuf[256], prefix[48];
    int plen = snprintf(prefix, sizeof(prefix), "__keyspace@%d__:", dbid);
    if (notifyKeyspaceFlags & NOTIFY_KEYSPACE) {
        size_t need = (size_t)plen + klen;
        char *ch = need <= sizeof(stackbuf) ? stackbuf : ir_xrealloc(NULL, need);
        memcpy(ch, prefix, (size_t)plen);
        memcpy(ch + plen, key, klen);
        pubsubPublishMessage(s, NULL, ch, need, event, elen, 0);
        if (ch != stackbuf) free(ch);
    }
    if (notifyKeyspaceFlags & NOTIFY_KEYEVENT) {
        memcpy(prefix + 5, "event", 5); /* __keyspace@ -> __keyevent@ */
        memcpy(stackbuf, prefix, (size_t)plen);
        memcpy(stackbuf + plen, event, elen); /* event names are short */
        pubsubPublishMessage(s, NULL, stackbuf, (size_t)plen + elen, key, klen, 0);
    }
}
