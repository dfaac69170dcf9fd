/* rdb.h - an RDB writer (the format Redis 7.0 loads) for the full
 * synchronization of a replica (replication.c).
 *
 * What it holds: every database's strings, lists, sets and hashes with their
 * expiry times, as RDB version 10 with a CRC64 (Jones) trailer. Replay tables
 * (REPLAY.*) are not part of it: a replica of inreplay gets the keyspace only.
 *
 * Concurrency contract: server thread only; the keyspace is read, not changed.
 */
#ifndef IR_RDB_H
#define IR_RDB_H

#include <stddef.h>
#include <stdint.h>

struct ir_server;

/* The whole keyspace as an RDB image in a malloc'd buffer (*len bytes), or
 * NULL when out of memory. Keys already expired are left out. repl_id and
 * repl_offset go into the image's aux fields as Redis writes them. */
char *rdbBuild(const struct ir_server *s, const char *repl_id, uint64_t repl_offset, size_t *len);

/* Redis's CRC64 (Jones polynomial, reflected, no final xor) over p[0..len),
 * continuing from crc (0 to start). */
uint64_t crc64Jones(uint64_t crc, const void *p, size_t len);

#endif /* IR_RDB_H */
