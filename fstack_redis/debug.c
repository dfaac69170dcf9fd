/* debug.c - DEBUG: the subcommands Redis's own test suite relies on, with
 * Redis 7.0's replies and errors.
 *
 *   SLEEP <seconds>                 blocks the whole server, then +OK
 *   SET-ACTIVE-EXPIRE 0|1           active expiry off/on (lazy expiry stays)
 *   SET-DISABLE-DENY-SCRIPTS 0|1    1: scripts may call DEBUG (PROTOCOL ...)
 *   RELOAD [MERGE|NOSAVE]           save a snapshot into `dir` and load it back
 *   LOG <message>                   "DEBUG LOG: <message>" in the server log
 *   QUICKLIST-PACKED-THRESHOLD <n>  checked and accepted (no quicklists here)
 *   PROTOCOL <type>                 one reply of that RESP3 type
 *   OBJECT <key>                    a "Value at:..." line like Redis's
 *   DIGEST / DIGEST-VALUE key...    40 hex digits over the dataset / a value
 *   CHANGE-REPL-ID                  accepted (no replication)
 *
 * The digests are inreplay's own (SipHash based, not Redis's SHA-1 mix):
 * equal datasets give equal digests, an empty dataset or a missing key gives
 * 40 zeros, as in Redis; the hex strings themselves differ from Redis's.
 * They cover the keyspace, not the replay tables.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "db.h"
#include "db_internal.h"
#include "debug.h"
#include "script.h"
#include "notify.h"
#include "snapshot.h"
#include "aof.h"

/* ---- digests ------------------------------------------------------------- */

#define DIGEST_LEN 20

/* d = H(d, p): three SipHash-2-4 values keyed by the current digest. */
static void mixDigest(uint8_t d[DIGEST_LEN], const void *p, size_t len) {
    uint8_t out[24];
    for (int i = 0; i < 3; i++) {
        uint8_t k[16];
        memcpy(k, d, 16);
        for (int j = 0; j < 4; j++) k[j] ^= d[16 + j];
        k[15] ^= (uint8_t)(0x5a + i);
        uint64_t h = siphash24(p, len, k);
        memcpy(out + 8 * i, &h, 8);
    }
    memcpy(d, out, DIGEST_LEN);
}

static void xorDigest(uint8_t d[DIGEST_LEN], const uint8_t x[DIGEST_LEN]) {
    for (int i = 0; i < DIGEST_LEN; i++) d[i] ^= x[i];
}

/* An order-independent digest of a hash's, set's or sorted set's members (and
 * values or scores). */
static void collDigest(uint8_t d[DIGEST_LEN], const dbEntry *e) {
    uint8_t acc[DIGEST_LEN] = {0};
    const dict *dd = &e->v.coll->d;
    for (int t = 0; t <= 1; t++) {
        for (size_t b = 0; b < dd->ht[t].size; b++) {
            for (const dbEntry *f = dd->ht[t].table[b]; f; f = f->next) {
                uint8_t fd[DIGEST_LEN] = {0};
                mixDigest(fd, f->key, f->klen);
                if (e->type == OBJ_HASH) mixDigest(fd, f->v.str.ptr, f->v.str.len);
                if (e->type == OBJ_ZSET) { /* the score as Redis prints it, %.17g */
                    char sb[64];
                    int sn = snprintf(sb, sizeof(sb), "%.17g", zsetEntryScore(f));
                    mixDigest(fd, sb, (size_t)sn);
                }
                xorDigest(acc, fd);
            }
        }
    }
    mixDigest(d, acc, DIGEST_LEN);
}

static void streamMix(void *arg, const void *p, size_t len) { mixDigest(arg, p, len); }

/* The digest of a value: its type, contents and whether it has a TTL (as
 * Redis's, which marks a TTL without its time). Keys of equal values have
 * equal digests (DIGEST-VALUE after COPY). */
static void valueDigest(uint8_t d[DIGEST_LEN], const dbEntry *e) {
    uint8_t type = e->type;
    mixDigest(d, &type, 1);
    switch (e->type) {
    case OBJ_STRING: mixDigest(d, e->v.str.ptr, e->v.str.len); break;
    case OBJ_LIST:
        for (size_t i = 0; i < e->v.list.len; i++) {
            const lelem *el = listAt(&e->v.list, i);
            mixDigest(d, el->p, el->len);
        }
        break;
    case OBJ_STREAM: streamDigest(e->v.stream, streamMix, d); break;
    default: collDigest(d, e); break;
    }
    if (e->expire != -1) mixDigest(d, "!!expire!!", 10);
}

/* A key of the dataset digest: its name, then its value. */
static int digestEntry(const dbEntry *e, void *arg) {
    uint8_t kd[DIGEST_LEN] = {0};
    mixDigest(kd, e->key, e->klen);
    valueDigest(kd, e);
    xorDigest(arg, kd);
    return 0;
}

static void addReplyDigest(client *c, const uint8_t d[DIGEST_LEN]) {
    char hex[2 * DIGEST_LEN + 1];
    for (int i = 0; i < DIGEST_LEN; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    addReplyStatus(c, hex);
}

/* DEBUG DIGEST: every database that holds keys, with its index. */
static void debugDigest(client *c) {
    uint8_t final[DIGEST_LEN] = {0};
    for (int i = 0; i < dbsCount(c->srv); i++) {
        ir_db *db = dbsAt(c->srv, i);
        if (dbSize(db) == 0) continue;
        uint8_t dbd[DIGEST_LEN] = {0};
        dbForEach(db, digestEntry, dbd);
        uint32_t id = (uint32_t)i;
        mixDigest(final, &id, sizeof(id));
        xorDigest(final, dbd);
    }
    addReplyDigest(c, final);
}

/* A key of the client's database as stored, logically expired or not (as
 * Redis's DEBUG subcommands see it). */
static dbEntry *findRaw(client *c, int i) {
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, i);
    return dictFind(&db->d, k.p, k.len, k.h);
}

/* DEBUG DIGEST-VALUE key ...: one digest per key (zeros for a missing one). */
static void debugDigestValue(client *c) {
    addReplyArrayLen(c, c->argc - 2);
    for (int j = 2; j < c->argc; j++) {
        uint8_t d[DIGEST_LEN] = {0};
        dbEntry *e = findRaw(c, j);
        if (e) valueDigest(d, e);
        addReplyDigest(c, d);
    }
}

/* ---- OBJECT ---------------------------------------------------------------- */

static size_t valueLength(const dbEntry *e) {
    size_t n = 0;
    switch (e->type) {
    case OBJ_STRING: return e->v.str.len;
    case OBJ_STREAM: return (size_t)streamLength(e->v.stream);
    case OBJ_LIST:
        for (size_t i = 0; i < e->v.list.len; i++) n += listAt(&e->v.list, i)->len;
        return n;
    default: {
        const dict *dd = &e->v.coll->d;
        for (int t = 0; t <= 1; t++)
            for (size_t b = 0; b < dd->ht[t].size; b++)
                for (const dbEntry *f = dd->ht[t].table[b]; f; f = f->next)
                    n += f->klen + (e->type == OBJ_HASH ? f->v.str.len : 0);
        return n;
    }
    }
}

/* DEBUG OBJECT key: Redis's line; lru is the key's access time in seconds cut
 * to Redis's 24-bit clock, and a list reports itself as one quicklist node. */
static void debugObject(client *c) {
    dbEntry *e = findRaw(c, 2);
    if (!e) {
        addReplyStr(c, shared.nokeyerr);
        return;
    }
    char extra[160] = "";
    if (e->type == OBJ_LIST) {
        size_t len = e->v.list.len, bytes = valueLength(e);
        snprintf(extra, sizeof(extra),
                 " ql_nodes:%d ql_avg_node:%.2f ql_listpack_max:-2 ql_compressed:0 "
                 "ql_uncompressed_size:%zu",
                 len ? 1 : 0, (double)len, bytes);
    }
    char line[320];
    snprintf(line, sizeof(line),
             "Value at:%p refcount:1 encoding:%s serializedlength:%zu lru:%u "
             "lru_seconds_idle:%llu%s",
             (void *)e, dbEncodingName(e), valueLength(e) + 1, (unsigned)(e->lru & 0xFFFFFF),
             (unsigned long long)dbEntryIdleSeconds(dbFor(c), e), extra);
    addReplyStatus(c, line);
}

/* ---- PROTOCOL -------------------------------------------------------------- */

static void debugProtocol(client *c) {
    static const char hello[] = "Hello World";
    static const char bignum[] = "1234567999999999999999999999999999999";
    if (argEq(c, 2, "string")) {
        addReplyBulkCString(c, hello);
    } else if (argEq(c, 2, "integer")) {
        addReplyLongLong(c, 12345);
    } else if (argEq(c, 2, "double")) {
        addReplyDouble(c, 3.141);
    } else if (argEq(c, 2, "bignum")) {
        if (c->resp >= 3) {
            addReplyProto(c, "(", 1);
            addReplyProto(c, bignum, sizeof(bignum) - 1);
            addReplyProto(c, "\r\n", 2);
        } else {
            addReplyBulk(c, bignum, sizeof(bignum) - 1);
        }
    } else if (argEq(c, 2, "null")) {
        addReplyNull(c);
    } else if (argEq(c, 2, "array") || argEq(c, 2, "set")) {
        if (argEq(c, 2, "set")) addReplySetLen(c, 3);
        else addReplyArrayLen(c, 3);
        for (int j = 0; j < 3; j++) addReplyLongLong(c, j);
    } else if (argEq(c, 2, "map")) {
        addReplyMapLen(c, 3);
        for (int j = 0; j < 3; j++) {
            addReplyLongLong(c, j);
            addReplyBool(c, j == 1);
        }
    } else if (argEq(c, 2, "attrib")) {
        if (c->resp >= 3) {
            addReplyProto(c, "|1\r\n", 4);
            addReplyBulkCString(c, "key-popularity");
            addReplyArrayLen(c, 2);
            addReplyBulkCString(c, "key:123");
            addReplyLongLong(c, 90);
        }
        addReplyBulkCString(c, "Some real reply following the attribute");
    } else if (argEq(c, 2, "push")) {
        if (c->resp < 3) {
            addReplyError(c, "RESP2 is not supported by this command");
            return;
        }
        addReplyPushLen(c, 2);
        addReplyBulkCString(c, "server-cpu-usage");
        addReplyLongLong(c, 42);
        addReplyBulkCString(c, "Some real reply following the push reply");
    } else if (argEq(c, 2, "true")) {
        addReplyBool(c, 1);
    } else if (argEq(c, 2, "false")) {
        addReplyBool(c, 0);
    } else if (argEq(c, 2, "verbatim")) {
        static const char txt[] = "This is a verbatim\nstring";
        addReplyVerbatim(c, txt, sizeof(txt) - 1, "txt");
    } else {
        addReplyError(c, "Wrong protocol type name. Please use one of the following: "
                         "string|integer|double|bignum|null|array|set|map|attrib|push|"
                         "verbatim|true|false");
    }
}

/* ---- RELOAD ---------------------------------------------------------------- */

/* DEBUG RELOAD [MERGE] [NOSAVE]: save a snapshot into `dir` (a real save, as
 * Redis's rdbSave: LASTSAVE moves) unless NOSAVE, empty every database and
 * load the newest snapshot back, TTLs included. The database structures stay
 * the same objects (their contents are swapped in), so WATCHed and blocked-on
 * keys keep pointing at live databases; WATCHers of the old contents are
 * touched, as a flush does. Replay tables are reloaded too. NOFLUSH (merging
 * into the live dataset) is not built. */
static void debugReload(client *c) {
    ir_server *s = c->srv;
    int save = 1;
    for (int j = 2; j < c->argc; j++) {
        if (argEq(c, j, "merge")) {
            continue; /* with a flush there is nothing to merge into */
        } else if (argEq(c, j, "nosave")) {
            save = 0;
        } else if (argEq(c, j, "noflush")) {
            addReplyError(c, "DEBUG RELOAD NOFLUSH is not supported by inreplay");
            return;
        } else {
            addReplyError(c, "DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
            return;
        }
    }
    char msg[512];
    if (save && snapshotSave(s, msg, sizeof(msg)) != IR_OK) {
        addReplyErrorFormat(c, "Error trying to save the DB: %s", msg);
        return;
    }
    int n = dbsCount(s);
    ir_db **old = malloc((size_t)n * sizeof(*old));
    if (!old) {
        addReplyError(c, "Error trying to load the RDB dump: out of memory");
        return;
    }
    /* the loader frees what the server holds: hand it empty databases */
    for (int i = 0; i < n; i++) {
        old[i] = dbsAt(s, i);
        signalFlushedDb(old[i]);
        ir_db *fresh = (ir_db *)dbNew();
        fresh->id = i;
        if (i == 0) s->db = fresh;
        else s->dbs[i] = fresh;
    }
    notifyNoNewKey = 1; /* loaded keys are not new (Redis's dbAddRDBLoad) */
    int rc = snapshotRestore(s, s->cfg.dir, msg, sizeof(msg));
    notifyNoNewKey = 0;
    for (int i = 0; i < n; i++) {
        ir_db *loaded = dbsAt(s, i), *keep = old[i];
        ir_db t = *keep;
        *keep = *loaded;
        *loaded = t;
        keep->id = i;
        keep->expired_keys = t.expired_keys; /* a statistic, not data */
        if (i == 0) s->db = keep;
        else s->dbs[i] = keep;
        dbFree(loaded); /* the old contents */
    }
    free(old);
    if (rc < 0 || (rc == 0 && !snapshotLoaded())) {
        addReplyErrorFormat(c, "Error trying to load the RDB dump: %s", msg);
        return;
    }
    serverLog("DB reloaded by DEBUG RELOAD");
    addReplyStr(c, shared.ok);
}

/* ---- the command ----------------------------------------------------------- */

static void debugHelp(client *c) {
    static const char *help[] = {
        "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANGE-REPL-ID",
        "    Accepted; inreplay has no replication.",
        "DIGEST",
        "    Output a hex signature representing the current DB content.",
        "DIGEST-VALUE <key> [<key> ...]",
        "    Output a hex signature of the values of all the specified keys.",
        "LOADAOF",
        "    Flush the AOF buffers on disk and reload the AOF in memory.",
        "LOG <message>",
        "    Write <message> to the server log.",
        "OBJECT <key>",
        "    Show low level info about the <key> and associated value.",
        "PROTOCOL <type>",
        "    Reply with a test value of the specified type. <type> can be: string,",
        "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
        "    true, false.",
        "QUICKLIST-PACKED-THRESHOLD <size>",
        "    Checked and accepted; inreplay's lists are not quicklists.",
        "RELOAD [option ...]",
        "    Save the dataset into a snapshot, empty it and load the snapshot back.",
        "    Options: MERGE (no effect), NOSAVE (load the newest snapshot).",
        "SET-ACTIVE-EXPIRE <0|1>",
        "    Setting it to 0 disables expiring keys in background when they are not",
        "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
        "    default.",
        "SET-DISABLE-DENY-SCRIPTS <0|1>",
        "    Setting it to 1 lets scripts call DEBUG, which is normally denied in",
        "    scripts (for tests). Setting it to 0 reenables the default.",
        "SLEEP <seconds>",
        "    Stop the server for <seconds>. Decimals allowed.",
        "HELP",
        "    Prints this help.",
    };
    addReplyHelpOf(c, help);
}

void debugCommand(client *c) {
    if (c->argc == 2 && argEq(c, 1, "help")) {
        debugHelp(c);
    } else if (argEq(c, 1, "log") && c->argc == 3) {
        serverLog("DEBUG LOG: %s", c->argv[2].ptr);
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "reload")) {
        debugReload(c);
    } else if (argEq(c, 1, "loadaof") && c->argc == 2) {
        aofDebugLoad(c);
    } else if (argEq(c, 1, "object") && c->argc == 3) {
        debugObject(c);
    } else if (argEq(c, 1, "digest") && c->argc == 2) {
        debugDigest(c);
    } else if (argEq(c, 1, "digest-value")) {
        debugDigestValue(c);
    } else if (argEq(c, 1, "protocol") && c->argc == 3) {
        debugProtocol(c);
    } else if (argEq(c, 1, "sleep") && c->argc == 3) {
        /* as Redis: strtod's reading of the argument, no error for junk */
        double secs = strtod(c->argv[2].ptr, NULL);
        long long us = secs * 1000000 > 0 ? (long long)(secs * 1000000) : 0;
        struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "set-disable-deny-scripts") && c->argc == 3) {
        scriptDisableDenyScript = atoi(c->argv[2].ptr);
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "set-active-expire") && c->argc == 3) {
        dbActiveExpireEnabled = atoi(c->argv[2].ptr);
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "quicklist-packed-threshold") && c->argc == 3) {
        unsigned long long sz;
        if (!ir_parse_memory(c->argv[2].ptr, c->argv[2].len, &sz) ||
            sz > (1ULL << 32) - (1ULL << 20)) {
            addReplyError(c, "argument must be a memory value bigger than 1 and smaller than 4gb");
            return;
        }
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "change-repl-id") && c->argc == 2) {
        serverLog("Changing replication IDs after receiving DEBUG change-repl-id");
        addReplyStr(c, shared.ok);
    } else {
        addReplyErrorFormat(c,
                            "unknown subcommand or wrong number of arguments for '%.128s'. "
                            "Try DEBUG HELP.",
                            c->argv[1].ptr);
    }
}
