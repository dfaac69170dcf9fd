/* t_shard_group.h - a replay group's member list (t_shard_group.c). */
#ifndef IR_T_SHARD_GROUP_H
#define IR_T_SHARD_GROUP_H

#include <stddef.h>

/* The members of a shard_group string ("host:port,host:port,..."): stores up
 * to max (start, length) pairs and returns how many members there are, or -1
 * with *err (a static message) if a member is not host:port. */
int shardGroupMembers(const char *group, const char **start, size_t *len, int max,
                      const char **err);

#endif
