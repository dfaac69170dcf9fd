/* t_shard_group.c - a replay group's member list ("host:port,host:port,...",
 * the shard_group setting), read by REPLAY.SHARDS (t_replay.c), the module
 * host (module/host_module.c) and the daemon's start-up checks.
 *
 * Why a file of its own: three callers on both hosts need the same parse,
 * and none of them should call another's file for it (no cycle).
 */
#include <string.h>

#include "inreplay.h"
#include "strconv.h"
#include "t_shard_group.h"

int shardGroupMembers(const char *group, const char **start, size_t *len, int max,
                      const char **err) {
    int n = 0;
    const char *p = group;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        const char *colon = memrchr(p, ':', l);
        long long port;
        if (!colon || colon == p || !string2ll(colon + 1, l - (size_t)(colon + 1 - p), &port) ||
            port < 1 || port > 65535) {
            *err = "every member of a shard group must be host:port (port 1-65535)";
            return -1;
        }
        if (n < max) {
            start[n] = p;
            len[n] = l;
        }
        n++;
        p += l;
        if (*p == ',') p++;
    }
    if (n > IR_MAX_SHARDS) {
        *err = "a shard group has at most 1024 members";
        return -1;
    }
    return n;
}
