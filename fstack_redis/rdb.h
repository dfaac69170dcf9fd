/* rdb.h - Redis's RDB serialization (the format Redis 7.0 loads), written
 * once for its two users: the full synchronization of a replica
 * (replication.c, rdbBuild) and the DUMP payloads (dump.c, rdbPutValue).
 *
 * What the image holds: every database's strings, lists, sets, hashes,
 * sorted sets and streams with their expiry times, as RDB version 10 with a CRC64 (Jones) trailer.
 * Replay tables (REPLAY.*) are not part of it: a replica of inreplay gets the
 * keyspace only. The reader side (RESTORE) lives in dump.c: only it reads.
 *
 * Concurrency contract: server thread only; the keyspace is read, not changed.
 */
#ifndef IR_RDB_H
#define IR_RDB_H

#include <stddef.h>
#include <stdint.h>

struct ir_server;
struct dbEntry;

#define RDB_VERSION 10 /* Redis 7.0's: the image's "REDIS0010", DUMP's trailer */
/* value types: the plain encodings every Redis since 2.x loads */
#define RDB_TYPE_STRING 0
#define RDB_TYPE_LIST 1
#define RDB_TYPE_SET 2
#define RDB_TYPE_HASH 4
#define RDB_TYPE_ZSET_2 5 /* members with binary double scores */
/* Streams in Redis's listpack encoding (t_stream.c writes, dump.c reads):
 * 15 is Redis 5/6's, 19 Redis 7.0's (first ID, max deleted ID, entries
 * added, each group's entries read). */
#define RDB_TYPE_STREAM_LISTPACKS 15
#define RDB_TYPE_STREAM_LISTPACKS_2 19
/* special string encodings: a length byte 11xxxxxx, xxxxxx one of these */
#define RDB_ENC_INT8 0
#define RDB_ENC_INT16 1
#define RDB_ENC_INT32 2
#define RDB_ENC_LZF 3

/* An output buffer that grows; a failed allocation sets oom and makes every
 * later write a no-op, so a writer checks once, at the end (the image may be
 * large, and replication gives up on it rather than abort the server). */
typedef struct rdbBuf {
    char *p;
    size_t len, cap;
    int oom;
} rdbBuf;

void rdbPut(rdbBuf *b, const void *p, size_t n);
void rdbPutByte(rdbBuf *b, unsigned v);
/* v as a little-endian integer of `bytes` bytes (1 to 8). */
void rdbPutLE(rdbBuf *b, uint64_t v, int bytes);
/* A length: 00xxxxxx (< 64), 01xxxxxx xxxxxxxx (< 16384), 0x80 + u32 BE,
 * 0x81 + u64 BE. */
void rdbPutLen(rdbBuf *b, uint64_t n);

/* Flags of rdbPutString and rdbPutValue. */
#define RDB_RAW_STRINGS 1 /* every string as length + bytes: no integer encoding */

/* A string; without RDB_RAW_STRINGS one that reads back as the same integer
 * of 32 bits goes in 1, 2 or 4 bytes, as Redis writes it. */
void rdbPutString(rdbBuf *b, const char *p, size_t len, int flags);

/* One value of e as Redis serializes an object: its type byte, then the
 * value. With RDB_WITH_KEY e's key goes between the two, as an image's
 * records lay it out; DUMP's payload has no key. The expiry time is the
 * caller's (an image writes it before the type byte). */
#define RDB_WITH_KEY 2

void rdbPutValue(rdbBuf *b, const struct dbEntry *e, int flags);

/* The whole keyspace as an RDB image in a malloc'd buffer (*len bytes), or
 * NULL when out of memory. Keys already expired are left out. repl_id and
 * repl_offset go into the image's aux fields as Redis writes them. */
char *rdbBuild(const struct ir_server *s, const char *repl_id, uint64_t repl_offset, size_t *len);

/* One RDB string at *p (raw, integer or LZF encoded, as Redis writes them),
 * not past end: a malloc'd copy with a NUL after it in *out, *p moved past
 * it. -1 when malformed (dump.c). */
int rdbReadString(const unsigned char **p, const unsigned char *end, char **out, size_t *len);

/* Load an RDB image (p[0..len), as rdbBuild writes it, or Redis 7.0 does with
 * the plain encodings dump.c reads) into s's databases, which must not hold
 * its keys; its functions replace s's. *used gets the image's length (an old
 * AOF goes on with commands after it). 0, or -1 with Redis's words in err;
 * keys loaded before an error stay (the caller loads into fresh databases). */
int rdbLoadImage(struct ir_server *s, const unsigned char *p, size_t len, size_t *used, char *err,
                 size_t errlen);

/* Redis's CRC64 (Jones polynomial, reflected, no final xor) over p[0..len),
 * continuing from crc (0 to start). */
uint64_t crc64Jones(uint64_t crc, const void *p, size_t len);

#endif /* IR_RDB_H */
