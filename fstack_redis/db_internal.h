/* db_internal.h - the keyspace's internals, shared by db.c, t_string.c,
 * t_list.c and the C unit test (tests/c/test_db.c). Not a public API.
 *
 * Layout:
 *   dict      a chained hash table keyed by a keyed SipHash-1-3 of the key,
 *             power-of-two bucket arrays, incremental rehash between two
 *             tables (grow at load factor 1, shrink below 10% fill), like
 *             Redis's dict.c.
 *   dbEntry   one allocation per key: chain link, cached hash, expiry, the
 *             value header and the key bytes (NUL-terminated). Short string
 *             values created with the key are embedded after the key.
 *   ir_db     the dict, a dense array of the entries that have a TTL (O(1)
 *             uniform sampling for active expiry, O(1) removal by swap), the
 *             byte counter, and a list of buffers whose free must wait until
 *             the current command's reply has been flushed.
 *
 * Concurrency contract: everything here belongs to the server thread.
 */
#ifndef IR_DB_INTERNAL_H
#define IR_DB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "server.h"
#include "siphash.h"

/* ---- values ------------------------------------------------------------ */

#define OBJ_STRING 0
#define OBJ_LIST 1
#define OBJ_SET 2 /* Redis's type numbers */
#define OBJ_ZSET 3
#define OBJ_HASH 4
#define OBJ_STREAM 6

/* Entry flags. */
#define DBE_EMBEDDED (1 << 0) /* v.str.ptr points into the entry itself */
#define DBE_ENC_RAW (1 << 1)  /* OBJECT ENCODING says "raw" (APPEND, SETRANGE wrote it) */
#define DBE_ENC_STR (1 << 2)  /* never "int" (INCRBYFLOAT's result, as Redis keeps it) */

/* Rough allocator overhead charged per malloc'd block in dbBytes(). */
#define DB_MALLOC_OVERHEAD 16
/* String values up to this many bytes are embedded in a new entry. */
#define DB_EMBED_MAX 64
/* Capacity reserved for a string holding a 64-bit integer (INCR & co). */
#define DB_INT_CAP 24

/* One list element: a malloc'd, NUL-terminated buffer of len bytes. */
typedef struct lelem {
    char *p;
    size_t len;
} lelem;

/* A list: a circular array of element pointers (a deque), cap a power of two. */
typedef struct dbList {
    lelem *a;
    size_t cap, head, len;
} dbList;

struct dbColl;
struct stream;

typedef struct dbEntry {
    struct dbEntry *next; /* bucket chain */
    uint64_t hash;        /* cached: rehashing never recomputes it */
    int64_t expire;       /* absolute unix time in ms, -1 = no TTL */
    uint32_t klen;        /* keys and fields are shorter than 4 GB (dbAdd checks) */
    uint32_t vidx;        /* slot in db->vol when expire != -1 */
    uint32_t lru;         /* last access, unix seconds (OBJECT IDLETIME): lookups set it */
    uint8_t type;         /* OBJ_STRING, OBJ_LIST */
    uint8_t flags;        /* DBE_* */
    uint8_t ecap;         /* bytes reserved after the key for an embedded value */
    union {
        struct {
            char *ptr; /* NUL-terminated; NULL only while being built */
            size_t len, cap;
            struct ir_pin *pin; /* replies point into ptr (see server.h): never
                                   rewritten or freed while set, but detached */
        } str;
        dbList list;
        struct dbColl *coll;   /* OBJ_HASH, OBJ_SET, OBJ_ZSET */
        struct stream *stream; /* OBJ_STREAM (t_stream.c) */
    } v;
    char key[]; /* klen bytes + NUL, then any embedded value */
} dbEntry;

/* ---- the hash table ------------------------------------------------------ */

#define DICT_HT_INITIAL_SIZE 4
#define DICT_MIN_FILL 10 /* shrink when fewer than 10% of buckets are used */

typedef struct dictht {
    dbEntry **table;
    size_t size; /* 0 or a power of two */
    size_t used;
} dictht;

typedef struct dict {
    dictht ht[2];
    long rehashidx;   /* -1: not rehashing; else next ht[0] bucket to move */
    uint8_t seed[16]; /* SipHash key */
} dict;

void dictInit(dict *d, const uint8_t seed[16]);
/* Frees the bucket arrays only; the caller frees the entries first. */
void dictReleaseTables(dict *d);
uint64_t dictHashKey(const dict *d, const void *key, size_t len);
dbEntry *dictFind(dict *d, const void *key, size_t len, uint64_t h);
/* Link e (e->hash set, key not present). */
void dictLink(dict *d, dbEntry *e);
/* Unlink e (which must be in d). */
void dictUnlink(dict *d, dbEntry *e);
/* Move up to n buckets to the new table. Returns 1 while more remain. */
int dictRehash(dict *d, int n);
/* Rehash for about us microseconds. Returns buckets moved. */
long dictRehashMicroseconds(dict *d, uint64_t us);
static inline size_t dictSize(const dict *d) { return d->ht[0].used + d->ht[1].used; }
static inline size_t dictBuckets(const dict *d) { return d->ht[0].size + d->ht[1].size; }
static inline int dictIsRehashing(const dict *d) { return d->rehashidx != -1; }

/* ---- hashes and sets ------------------------------------------------------
 * A hash or a set is a dict of its own whose entries are dbEntry records:
 * the key is the field (member), and for a hash v.str holds the value in a
 * malloc'd buffer (sets leave v.str.ptr NULL). Entries of a collection never
 * have a TTL. `big` records the encoding Redis would report once it left
 * its compact one (listpack/intset): like Redis, never back. */

typedef struct dbColl {
    dict d;
    /* While compact, the entries in the order Redis's encoding keeps them
     * (ord[fe->vidx] == fe; a collection's entries have no TTL, so vidx is
     * free): a hash's listpack in insertion order, a set's intset ascending.
     * 8 bytes per field (16 at most, the array grows by doubling) and 16
     * per collection (dbColl is 96 bytes, was 80); measured: 100k hashes of
     * 10 fields take 16.0 MB more (16 bytes per field), HGETALL's rate is
     * unchanged within noise. No allocation on a read. Freed when the collection becomes big: then the
     * order is the table's, as Redis's (collAdd/collDelete drop it if `big`
     * was set directly; readers ignore it once `big` is set). */
    dbEntry **ord;
    uint32_t nord, ordcap;
    uint8_t big;
    uint8_t order;         /* COLL_ORD_* */
    struct zskiplist *zsl; /* a sorted set's order (t_zset.c), else NULL */
} dbColl;

#define COLL_ORD_NONE 0   /* table order */
#define COLL_ORD_INSERT 1 /* a listpack hash */
#define COLL_ORD_INT 2    /* an intset: ascending integers */

/* An empty collection of type OBJ_HASH, OBJ_SET or OBJ_ZSET. */
void collInit(dbColl *co, const uint8_t seed[16], int type);
/* Redis's conversion to hashtable: sets big and frees the order, for good. */
void collSetBig(struct ir_db *db, dbColl *co);
/* Whether co's entries are kept in its compact encoding's order. */
static inline int collOrdered(const dbColl *co) { return co->order != COLL_ORD_NONE && !co->big; }

/* Walks co's entries in the order Redis replies with them: the compact
 * encoding's order, else the table's. co must not change meanwhile. */
typedef struct collIter {
    const dbColl *co;
    size_t pos;        /* ordered: next index; else bucket index */
    int t;             /* table */
    const dbEntry *fe; /* next in the current chain */
} collIter;
void collIterInit(collIter *it, const dbColl *co);
const dbEntry *collNext(collIter *it); /* NULL at the end */

/* The thresholds of the compact encodings OBJECT ENCODING reports, with
 * Redis 7.0's names and built-in defaults (512, 64, 512): CONFIG SET may change them. */
typedef struct ir_encoding_limits {
    long long hash_max_listpack_entries;
    long long hash_max_listpack_value;
    long long set_max_intset_entries;
    long long zset_max_listpack_entries;
    long long zset_max_listpack_value;
    long long stream_node_max_bytes;   /* a stream node's listpack size (t_stream.c) */
    long long stream_node_max_entries; /* and entries, deleted ones included */
    long long hll_sparse_max_bytes;    /* a sparse HyperLogLog goes dense beyond (t_hll.c) */
} ir_encoding_limits;
extern ir_encoding_limits encodingLimits;

/* Find a field (NULL if absent). */
dbEntry *collFind(dbColl *co, const void *f, size_t len);
/* Add a field that is absent; a hash's value is copied in (val may be NULL for sets). */
dbEntry *collAdd(struct ir_db *db, dbColl *co, const void *f, size_t len, const void *val,
                 size_t vlen);
/* Replace a hash field's value. */
void collSetValue(struct ir_db *db, dbEntry *fe, const void *val, size_t vlen);
void collDelete(struct ir_db *db, dbColl *co, dbEntry *fe);
/* A uniformly random bucket's random entry (Redis's dictGetFairRandomKey
 * is no more uniform); NULL when empty. */
dbEntry *collRandom(struct ir_db *db, dbColl *co);
/* A random 64-bit number from db's generator. */
uint64_t dbRand(struct ir_db *db);
/* db's reusable array of entry pointers, with room for n (valid until the
 * next call; the current command's only). */
dbEntry **dbScratch(struct ir_db *db, size_t n);
/* min(count, size) distinct random entries of co into dbScratch(db)[0..],
 * in a listpack hash's order (as Redis picks a few from a listpack). */
size_t collSample(struct ir_db *db, dbColl *co, size_t count);
/* The entries into out[] (cap >= dictSize) in collIter's order; returns the count. */
size_t collAll(dbColl *co, dbEntry **out);
/* Redis's reverse-binary cursor over d's buckets (both tables during a
 * rehash): call fn on each entry of the buckets visited until about `count`
 * entries were seen; returns the next cursor (0: done). fn must not change d. */
uint64_t dictScan(dict *d, uint64_t cursor, long count, void (*fn)(dbEntry *e, void *arg),
                  void *arg);

/* ---- sorted sets (t_zset.c) ----------------------------------------------
 * A sorted set is a dbColl whose member entries each own a skiplist node
 * (v.str.ptr, v.str.cap its size) holding the score. */

/* Free the skiplist header (collFree, before the members). */
void zsetFreeSkiplist(dbColl *co);
/* Add src's members to the empty dst (COPY). */
void zsetCopy(struct ir_db *to, dbColl *dst, dbColl *src);
/* Each member in (score, member) order (RDB, DUMP, DEBUG DIGEST-VALUE). */
void zsetForEach(const dbColl *co, void (*fn)(const char *m, size_t len, double score, void *arg),
                 void *arg);
void zsetForEachRev(const dbColl *co,
                    void (*fn)(const char *m, size_t len, double score, void *arg), void *arg);
/* RESTORE: add a member; 0 if it was already there. */
int zsetLoadAdd(struct ir_db *db, dbColl *co, const char *m, size_t len, double score);
double zsetEntryScore(const dbEntry *fe);
/* The member entries in order into out[] (cap >= the size); returns the count. */
size_t zsetAll(dbColl *co, dbEntry **out);
/* NULL when the skiplist's invariants hold, else what is wrong (fuzz harness). */
const char *zsetVerify(const dbColl *co);
/* ZSCAN's text for a member's score. */
int zsetScanScore(const dbColl *co, const dbEntry *fe, char *buf, size_t n);

/* GEO (geo.c): ZADD as called with c's (rewritten) arguments; each member with
 * min <= score < max in order until fn returns nonzero; make key argv[keyarg]
 * a sorted set of the n members (or delete it when n is 0), replying the count. */
void zaddGeo(client *c);
void zsetScoreRange(dbColl *co, double min, double max,
                    int (*fn)(const dbEntry *fe, double score, void *arg), void *arg);
void zsetStoreMembers(client *c, int keyarg, size_t n, const char *const *m, const size_t *len,
                      const double *scores, const char *event);

/* ---- streams (t_stream.c) --------------------------------------------------
 * A stream: its live entries in ID order (a deque), the counters of the
 * radix-tree nodes Redis would hold them in, and its consumer groups. */

typedef struct streamID {
    uint64_t ms, seq;
} streamID;

typedef struct sentry {
    streamID id;
    uint64_t node; /* the seq of its node */
    uint32_t nf;   /* field/value pairs */
    uint32_t size; /* bytes of buf */
    char *buf;     /* per string: u32 length (host order), bytes */
} sentry;

typedef struct snode {
    uint64_t seq;
    uint32_t live, total; /* entries; total counts deleted ones too */
    uint32_t mnf;         /* the master entry's field count */
    uint64_t rest;        /* Redis's listpack bytes but the two counters */
    uint64_t mhash;       /* a hash of the master entry's field names */
    streamID master;      /* the master entry's ID (the node's key in Redis) */
    streamID last;        /* the last ID added to it (deleted or not) */
} snode;

typedef struct sconsumer {
    char *name;
    size_t nlen;
    int64_t seen_time;
    size_t npending;
} sconsumer;

typedef struct spending {
    streamID id;
    int64_t delivery_time;
    uint64_t delivery_count;
    sconsumer *consumer; /* NULL only for XCLAIM FORCE's before it is given one */
} spending;

typedef struct sgroup {
    char *name;
    size_t nlen;
    streamID last_id;
    long long entries_read; /* -1: unknown */
    spending *pel;          /* pel[0 .. npel) sorted by ID, inside pelbuf */
    spending *pelbuf;       /* the allocation (pelcap entries): removals near
                               the front move the front up instead of the rest down */
    size_t npel, pelcap;
    sconsumer **cons; /* sorted by name */
    size_t ncons, conscap;
} sgroup;

typedef struct stream {
    sentry *e; /* live entries e[eh .. eh+en) */
    size_t eh, en, ecap;
    snode *nodes; /* nodes[nh .. nh+nn) */
    size_t nh, nn, ncap;
    uint64_t next_node_seq;
    streamID last_id, max_deleted;
    uint64_t entries_added;
    sgroup **groups; /* sorted by name */
    size_t ngroups, gcap;
    uint64_t bytes; /* counted in db->bytes */
} stream;

struct rdbBuf;
stream *streamNew(struct ir_db *db);
void streamFree(struct ir_db *db, stream *s);
stream *streamDup(struct ir_db *db, const stream *src);
uint64_t streamBytes(const stream *s);
uint64_t streamLength(const stream *s);
streamID streamFirstID(const stream *s);
int streamFormatID(char *buf, size_t n, const streamID *id);
/* The project's own record of a stream (snapshots, DUMP): see t_stream.c. */
void streamSerialize(struct rdbBuf *b, const stream *s);
/* NULL with *err set when the record is bad; *used: the bytes it took. */
stream *streamDeserialize(struct ir_db *db, const void *buf, size_t len, size_t *used,
                          const char **err);
/* Redis 7.0's RDB_TYPE_STREAM_LISTPACKS_2 value (a replica's image). */
void streamPutRedisRDB(struct rdbBuf *b, const stream *s);
/* The commands of an AOF rewrite that build s under key (aof.c). */
void streamPutAofCommands(struct rdbBuf *b, const char *key, size_t klen, const stream *s);
/* RESTORE of Redis's stream encodings (dump.c builds the stream with these). */
int streamLoadEntry(struct ir_db *db, stream *s, const streamID *id, uint32_t nf, const char *buf,
                    uint32_t size, int new_node);
void streamLoadNodeEnd(stream *s, const streamID *last, const streamID *master, uint64_t lpbytes,
                       uint32_t count, uint32_t deleted);
void streamLoadMeta(stream *s, const streamID *last, const streamID *maxdel, uint64_t added);
sgroup *streamLoadGroup(struct ir_db *db, stream *s, const char *name, size_t len,
                        const streamID *last, long long entries_read, int estimate);
int streamLoadPending(struct ir_db *db, stream *s, sgroup *g, const streamID *id, int64_t time,
                      uint64_t count);
sconsumer *streamLoadConsumer(struct ir_db *db, stream *s, sgroup *g, const char *name, size_t len,
                              int64_t seen);
int streamLoadOwn(sgroup *g, sconsumer *cn, const streamID *id);
int streamLoadCheck(const stream *s);
/* NULL when the stream's invariants hold (and *bytes its recomputed size),
 * else what is wrong (the fuzz harness). */
const char *streamVerify(const stream *s, uint64_t *bytes);
void streamDigest(const stream *s, void (*mix)(void *arg, const void *p, size_t len), void *arg);

/* ---- the database -------------------------------------------------------- */

typedef struct ir_db {
    dict d;
    dbEntry **vol; /* entries with a TTL; vol[e->vidx] == e */
    size_t nvol, volcap;
    uint64_t bytes;
    dbEntry **scratch; /* KEYS collects matches here (reused) */
    size_t scratchcap;
    uint64_t rng;          /* xorshift state for sampling */
    uint64_t expired_keys; /* stats: keys removed because their TTL passed */
    int64_t now;           /* this command's clock (ms), 0 = not read yet */
    int id;                /* SELECT index */
} ir_db;

/* A key of the current command with its hash computed once. */
typedef struct dbkey {
    const char *p;
    size_t len;
    uint64_t h;
} dbkey;

static inline dbkey dbKey(ir_db *db, const void *p, size_t len) {
    dbkey k = {(const char *)p, len, dictHashKey(&db->d, p, len)};
    return k;
}

/* Current time in ms for expiry decisions: read once per command (the
 * first time a command needs it; dbFor() forgets it), like Redis 7.2's
 * command time snapshot, so a command sees one consistent clock. */
static inline int64_t dbNow(ir_db *db) {
    if (!db->now) db->now = (int64_t)ir_mstime();
    return db->now;
}

/* The database of c's server; also releases buffers kept alive for the
 * previous command's reply. Every keyspace handler starts with this. */
ir_db *dbFor(client *c);
dbkey argKey(ir_db *db, client *c, int i);
/* Database `id` of c's server (0 <= id < databases), released like dbFor. */
ir_db *dbByIndex(ir_server *s, int id);

/* Lookup with lazy expiry: an expired key is deleted and NULL returned.
 * Counts a keyspace hit or miss (INFO stats) when the command dbFor last
 * started reads keys as Redis's lookupKeyRead does; write commands'
 * lookups are not counted, as Redis's lookupKeyWrite. */
dbEntry *lookupKey(ir_db *db, const dbkey *k);
/* The same, leaving the key's access time alone (Redis's LOOKUP_NOTOUCH:
 * TTL, TYPE, EXISTS and OBJECT do not count as accesses). */
dbEntry *lookupKeyNoTouch(ir_db *db, const dbkey *k);
/* A lookup that deletes an expired key (as every lookup does) but counts no
 * hit or miss, sends no keymiss and leaves the access time: for the server's
 * own look, such as blocked clients checking a key made ready. */
dbEntry *lookupKeyNoStats(ir_db *db, const dbkey *k);
/* Seconds since e was last looked up (OBJECT IDLETIME, DEBUG OBJECT). */
uint64_t dbEntryIdleSeconds(ir_db *db, const dbEntry *e);
/* Redis's lookupKeyReadOrReply + checkType: the entry for argv[i] if it holds
 * `type`; otherwise reply `missing` (no key) or WRONGTYPE and return NULL. */
dbEntry *lookupKeyOrReply(client *c, int i, ir_str missing, int type);
/* Add a new key (must not exist) holding an empty value of the given type.
 * For strings, embed_cap > 0 (at most DB_EMBED_MAX) reserves that many bytes
 * inside the entry. Like Redis, running out of memory aborts. */
dbEntry *dbAdd(ir_db *db, const dbkey *k, int type, size_t embed_cap);
int dbDelete(ir_db *db, const dbkey *k); /* 1 if a key was removed */
void dbDeleteEntry(ir_db *db, dbEntry *e);
/* Turn e into an empty string (frees a list, hash or set, keeps a string's buffer). */
void dbMakeString(ir_db *db, dbEntry *e);
/* Free e's value (any type), leaving e without one. */
void dbFreeValue(ir_db *db, dbEntry *e);

static inline int keyIsExpired(const dbEntry *e, int64_t now) {
    return e->expire != -1 && now > e->expire;
}
void setExpire(ir_db *db, dbEntry *e, int64_t when);
int removeExpire(ir_db *db, dbEntry *e); /* 1 if there was a TTL */

void *dbMalloc(size_t n); /* aborts on OOM */

/* Byte accounting (dbBytes). */
static inline size_t dbEntryBytes(size_t klen, size_t embed_cap) {
    return sizeof(dbEntry) + klen + 1 + embed_cap + DB_MALLOC_OVERHEAD;
}
static inline size_t dbBufBytes(size_t cap) { return cap + DB_MALLOC_OVERHEAD; }

/* ---- string values (t_string.c) ---------------------------------------- */

/* Make e's string value a copy of (p, len), reusing the buffer when it fits
 * and no reply has it pinned; a pinned buffer is detached, not freed.
 * keep_old_big is no longer needed (replies pin what they reference) and
 * is ignored. */
void strSetValue(ir_db *db, dbEntry *e, const void *p, size_t len, int keep_old_big);
/* Make e's string value argv[i], taking over big argument buffers (the old
 * buffer is freed, or detached if pinned). */
void strSetFromArg(ir_db *db, dbEntry *e, client *c, int i, int keep_old_big);
void strFreeValue(ir_db *db, dbEntry *e);
/* Make e's value newlen bytes long (zeroes past the old end) in a buffer of
 * its own that no reply reads (a pinned one is copied first). */
void strResize(ir_db *db, dbEntry *e, size_t newlen);
/* The same for in-place edits (bit and HyperLogLog commands): e's value is
 * len bytes long, writable, with room for len + room bytes and the NUL;
 * OBJECT ENCODING says raw from then on. Returns the buffer. */
char *strWritable(ir_db *db, dbEntry *e, size_t len, size_t room);
/* Make buf (from dbMalloc, cap >= len + 1 bytes) e's value, taken over. */
void strTakeBuffer(ir_db *db, dbEntry *e, char *buf, size_t len, size_t cap);
/* Redis's string2ld (strict: no spaces, no nan) and LD_STR_HUMAN formatting
 * ("%.17Lf" without trailing zeroes), as INCRBYFLOAT/HINCRBYFLOAT use them. */
int string2ld(const char *s, size_t slen, long double *dp);
int ld2stringHuman(char *buf, size_t len, long double value);

/* ---- list values (t_list.c) -------------------------------------------- */

void listInit(dbList *l);
void listPush(ir_db *db, dbList *l, char *p, size_t len, int head); /* takes p */
lelem listPop(ir_db *db, dbList *l, int head);
static inline lelem *listAt(const dbList *l, size_t i) {
    return &l->a[(l->head + i) & (l->cap - 1)];
}
void listFreeAll(ir_db *db, dbList *l);

/* ---- keyspace helpers (db.c) ------------------------------------------------ */

/* SCAN's body; owner is the hash or set for HSCAN/SSCAN, NULL for SCAN. */
void scanGenericCommand(client *c, dbEntry *owner);
int parseScanCursorOrReply(client *c, int i, unsigned long long *cursor);
/* The entry for argv[i] if it holds `type`, NULL with *missing = 1 if there
 * is none (nothing replied), NULL with WRONGTYPE replied otherwise. */
dbEntry *lookupTyped(client *c, int i, int type, int *missing);
/* An int argument with getIntFromObjectOrReply's errors (msg NULL: the usual one). */
int getIntFromArg(client *c, int i, int *out, const char *msg);

/* Give e (in db `from`) the key nk in db `to` (nk absent there): a new entry
 * takes over the value, TTL included; returns it (RENAME, MOVE, RESTORE). */
dbEntry *dbRekey(ir_db *from, dbEntry *e, ir_db *to, const dbkey *nk);
/* MEMORY USAGE: bytes held by e (entry, key and value), sampling up to
 * `samples` elements of a list, hash or set (<= 0: all of them). */
uint64_t dbEntryMemoryUsage(const dbEntry *e, long long samples);

/* ---- glob matching (db.c) ------------------------------------------------ */

/* Redis's KEYS/SCAN glob: * ? [abc] [^a-z] and \ escapes; binary-safe. */
int stringmatchlen(const char *pattern, size_t plen, const char *string, size_t slen, int nocase);

/* ---- snapshots (db.c, used by snapshot.c) ------------------------------- */

/* OBJECT ENCODING's name for e's value ("int", "embstr", "quicklist", ...). */
const char *dbEncodingName(const dbEntry *e);

/* Call fn on every entry, expired ones included, until it returns non-zero;
 * returns that value (0 when every entry was visited). fn must not add or
 * delete keys. No rehash step is taken, so the table is only read (a
 * BGSAVE child walks it in memory it shares copy-on-write). */
int dbForEach(const ir_db *db, int (*fn)(const dbEntry *e, void *arg), void *arg);
/* Make e's string value the malloc'd buffer p holding len bytes and a NUL
 * (taken over, not copied). e must be a string that is not embedded. */
void dbStrAdopt(ir_db *db, dbEntry *e, char *p, size_t len);

#endif
