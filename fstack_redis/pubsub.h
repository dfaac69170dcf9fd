/* pubsub.h - channels and patterns (pubsub.c). Server thread only. */
#ifndef IR_PUBSUB_H
#define IR_PUBSUB_H

#include <stdint.h>

#include "server.h"

/* RESP2 subscribed mode: the commands a subscribed client may still send. */
int pubsubAllowedInContext(const ir_command *cmd);
/* (P)(UN)SUBSCRIBE: every reply is a push, sent even under CLIENT REPLY OFF. */
int pubsubRepliesArePushes(const ir_command *cmd);
/* CLIENT LIST sub= psub=, INFO stats pubsub_channels / pubsub_patterns. */
void pubsubClientCounts(const client *c, int *channels, int *patterns);
void pubsubServerCounts(const ir_server *s, uint64_t *channels, uint64_t *patterns);
/* PUBLISH's delivery, also used by keyspace notifications (publisher NULL
 * when no client caused it); free_now: free subscribers over their output
 * limit at once, else only mark them. Returns the receivers. */
long long pubsubPublishMessage(ir_server *s, client *publisher, const char *ch, size_t chlen,
                               const char *msg, size_t msglen, int free_now);
/* ACL: the i-th channel c is subscribed to (kind 0), pattern (1) or shard channel (2); 0 past the last. */
int pubsubClientSub(const client *c, int pattern, int i, const char **name, size_t *len);
int pubsubClientShards(const client *c); /* CLIENT LIST ssub= */
void pubsubReset(client *c);             /* RESET: unsubscribe from everything, no replies */
void pubsubFreeClient(client *c);        /* freeClient */
void pubsubFree(ir_server *s);           /* server_free, after every client */

#endif
