/* object.c - MEMORY: what the keyspace, the replay tables and the clients
 * hold, from inreplay's own byte accounting (db.c's dbBytes, the tables'
 * tablesMemory, each client's buffers), in the shape Redis 7.0 answers.
 *
 * The allocator is libc's malloc: there are no allocator statistics, so the
 * allocator.* fields of MEMORY STATS are derived as Redis derives them when
 * its allocator has none (allocated = used memory, active = resident = RSS).
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "db.h"
#include "db_internal.h"
#include "memory.h"
#include "replay.h"

/* MEMORY USAGE's default number of sampled elements, as Redis. */
#define MEMORY_USAGE_SAMPLES 5
/* Below this much used memory MEMORY DOCTOR has nothing to say (Redis's 5 MB). */
#define DOCTOR_MIN_USED (5ULL * 1024 * 1024)

static uint64_t peak_used; /* the largest used memory MEMORY has seen */

static uint64_t usedNow(const ir_server *s) {
    uint64_t used = serverUsedMemory(s);
    if (used > peak_used) peak_used = used;
    return used;
}

/* Client buffers, counted as serverUsedMemory counts them. */
static uint64_t clientsMemory(const ir_server *s) {
    uint64_t b = 0;
    for (const client *c = s->clients; c; c = c->next) {
        b += c->qcap + c->ocap + c->argcap + (uint64_t)c->segcap * sizeof(ir_seg) +
             (uint64_t)c->argv_cap * (sizeof(ir_arg) + sizeof(size_t)) + sizeof(*c);
        for (int i = 0; i < c->argc; i++)
            if (c->argv[i].owned) b += c->argv[i].len + 2;
        if (c->big_arg) b += c->argv[c->argc].len + 2;
    }
    return b;
}

/* A database's own overhead: its bucket arrays and the array of keys with a TTL. */
static uint64_t dbMainOverhead(const ir_db *db) { return dictBuckets(&db->d) * sizeof(dbEntry *); }
static uint64_t dbExpiresOverhead(const ir_db *db) { return db->volcap * sizeof(dbEntry *); }

/* MEMORY USAGE key [SAMPLES count] */
static void memoryUsage(client *c) {
    long long samples = MEMORY_USAGE_SAMPLES;
    for (int j = 3; j < c->argc; j++) {
        if (argEq(c, j, "samples") && j + 1 < c->argc) {
            if (getLongLongFromArg(c, j + 1, &samples) != 0) return;
            if (samples < 0) {
                addReplyStr(c, shared.syntaxerr);
                return;
            }
            if (samples == 0) samples = -1; /* all of them */
            j++;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 2);
    /* as Redis's dbFind: no expiry, no keyspace hit */
    const dbEntry *e = dictFind(&db->d, k.p, k.len, k.h);
    if (!e) {
        addReplyNull(c);
        return;
    }
    addReplyLongLong(c, (long long)dbEntryMemoryUsage(e, samples));
}

static void memoryStats(client *c) {
    ir_server *s = c->srv;
    uint64_t used = usedNow(s), rss = ir_rss_bytes(), clients = clientsMemory(s);
    uint64_t startup = 0, keys = 0, overhead = startup + clients;
    long ndb = 0;
    for (int i = 0; i < dbsCount(s); i++) {
        const ir_db *db = dbsAt(s, i);
        if (!dictSize(&db->d)) continue;
        ndb++;
        keys += dictSize(&db->d);
        overhead += dbMainOverhead(db) + dbExpiresOverhead(db);
    }
    if (overhead > used) overhead = used;
    uint64_t net = used - startup, dataset = used - overhead;
    uint64_t allocated = used, active = rss, resident = rss;
    addReplyMapLen(c, 27 + ndb);
    addReplyBulkCString(c, "peak.allocated");
    addReplyLongLong(c, (long long)peak_used);
    addReplyBulkCString(c, "total.allocated");
    addReplyLongLong(c, (long long)used);
    addReplyBulkCString(c, "startup.allocated");
    addReplyLongLong(c, (long long)startup);
    static const char *const zero[] = {"replication.backlog", "clients.slaves"};
    for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++) {
        addReplyBulkCString(c, zero[i]);
        addReplyLongLong(c, 0);
    }
    addReplyBulkCString(c, "clients.normal");
    addReplyLongLong(c, (long long)clients);
    static const char *const none[] = {"cluster.links", "aof.buffer", "lua.caches",
                                       "functions.caches"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        addReplyBulkCString(c, none[i]);
        addReplyLongLong(c, 0);
    }
    for (int i = 0; i < dbsCount(s); i++) {
        const ir_db *db = dbsAt(s, i);
        if (!dictSize(&db->d)) continue;
        char name[32];
        snprintf(name, sizeof(name), "db.%d", i);
        addReplyBulkCString(c, name);
        addReplyMapLen(c, 3);
        addReplyBulkCString(c, "overhead.hashtable.main");
        addReplyLongLong(c, (long long)dbMainOverhead(db));
        addReplyBulkCString(c, "overhead.hashtable.expires");
        addReplyLongLong(c, (long long)dbExpiresOverhead(db));
        addReplyBulkCString(c, "overhead.hashtable.slot-to-keys");
        addReplyLongLong(c, 0);
    }
    addReplyBulkCString(c, "overhead.total");
    addReplyLongLong(c, (long long)overhead);
    addReplyBulkCString(c, "keys.count");
    addReplyLongLong(c, (long long)keys);
    addReplyBulkCString(c, "keys.bytes-per-key");
    addReplyLongLong(c, keys ? (long long)(net / keys) : 0);
    addReplyBulkCString(c, "dataset.bytes");
    addReplyLongLong(c, (long long)dataset);
    addReplyBulkCString(c, "dataset.percentage");
    addReplyDouble(c, net ? 100.0 * (double)dataset / (double)net : 0.0);
    addReplyBulkCString(c, "peak.percentage");
    addReplyDouble(c, peak_used ? 100.0 * (double)used / (double)peak_used : 0.0);
    addReplyBulkCString(c, "allocator.allocated");
    addReplyLongLong(c, (long long)allocated);
    addReplyBulkCString(c, "allocator.active");
    addReplyLongLong(c, (long long)active);
    addReplyBulkCString(c, "allocator.resident");
    addReplyLongLong(c, (long long)resident);
    addReplyBulkCString(c, "allocator-fragmentation.ratio");
    addReplyDouble(c, allocated ? (double)active / (double)allocated : 0.0);
    addReplyBulkCString(c, "allocator-fragmentation.bytes");
    addReplyLongLong(c, (long long)active - (long long)allocated);
    addReplyBulkCString(c, "allocator-rss.ratio");
    addReplyDouble(c, active ? (double)resident / (double)active : 0.0);
    addReplyBulkCString(c, "allocator-rss.bytes");
    addReplyLongLong(c, (long long)resident - (long long)active);
    addReplyBulkCString(c, "rss-overhead.ratio");
    addReplyDouble(c, resident ? (double)rss / (double)resident : 0.0);
    addReplyBulkCString(c, "rss-overhead.bytes");
    addReplyLongLong(c, (long long)rss - (long long)resident);
    addReplyBulkCString(c, "fragmentation");
    addReplyDouble(c, used ? (double)rss / (double)used : 0.0);
    addReplyBulkCString(c, "fragmentation.bytes");
    addReplyLongLong(c, (long long)rss - (long long)used);
}

/* A short report in Redis's manner: the empty-instance answer below 5 MB,
 * else what stands out (a peak far above the current use, RSS far above
 * what is allocated, big client buffers), else that nothing does. */
static void memoryDoctor(client *c) {
    ir_server *s = c->srv;
    uint64_t used = usedNow(s), rss = ir_rss_bytes(), clients = clientsMemory(s);
    char report[2048];
    size_t n = 0;
    if (used < DOCTOR_MIN_USED) {
        n = (size_t)snprintf(report, sizeof(report), "%s",
                             "Hi Sam, this instance is empty or is using very little memory, my "
                             "issues detector can't be used in these conditions. Please, leave for "
                             "your mission on Earth and fill it with some data. The new Sam and I "
                             "will be back to our programming as soon as I finished rebooting.\n");
        addReplyVerbatim(c, report, n, "txt");
        return;
    }
    int issues = 0;
    n += (size_t)snprintf(report + n, sizeof(report) - n,
                          "Sam, I detected a few issues in this Redis instance memory "
                          "implants:\n\n");
    if (peak_used > used + used / 2) {
        issues++;
        n += (size_t)snprintf(report + n, sizeof(report) - n,
                              " * Peak memory: at some point %llu bytes were used, more than 150%% "
                              "of the %llu used now: the RSS can stay near the peak.\n\n",
                              (unsigned long long)peak_used, (unsigned long long)used);
    }
    if (rss > used + used / 2 && rss - used > 10ULL * 1024 * 1024) {
        issues++;
        n += (size_t)snprintf(report + n, sizeof(report) - n,
                              " * High fragmentation: the RSS (%llu bytes) is more than 1.5 times "
                              "the memory in use (%llu); MEMORY PURGE returns free pages to the "
                              "system.\n\n",
                              (unsigned long long)rss, (unsigned long long)used);
    }
    if (s->nclients && clients / s->nclients > 200ULL * 1024) {
        issues++;
        n += (size_t)snprintf(report + n, sizeof(report) - n,
                              " * Big client buffers: the %llu clients hold %llu bytes, more than "
                              "200 KB each on average.\n\n",
                              (unsigned long long)s->nclients, (unsigned long long)clients);
    }
    if (!issues)
        n = (size_t)snprintf(report, sizeof(report), "%s",
                             "Hi Sam, I can't find any memory issue in your instance. I can only "
                             "account for what occurs on this base.\n");
    if (n >= sizeof(report)) n = sizeof(report) - 1;
    addReplyVerbatim(c, report, n, "txt");
}

/* MEMORY DOCTOR | MALLOC-STATS | PURGE | STATS | USAGE key [SAMPLES n] | HELP */
void memoryCommand(client *c) {
    static const struct {
        const char *name;
        int arity;
    } subs[] = {{"doctor", 2}, {"malloc-stats", 2}, {"purge", 2},
                {"stats", 2},  {"usage", -3},       {"help", 2}};
    int found = -1;
    for (int i = 0; i < (int)(sizeof(subs) / sizeof(subs[0])); i++)
        if (argEq(c, 1, subs[i].name)) found = i;
    if (found < 0) {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try MEMORY HELP.", c->argv[1].ptr);
        return;
    }
    int ar = subs[found].arity;
    if ((ar > 0 && c->argc != ar) || (ar < 0 && c->argc < -ar)) {
        addReplySubcommandArity(c, "memory");
        return;
    }
    if (argEq(c, 1, "usage")) {
        memoryUsage(c);
    } else if (argEq(c, 1, "stats")) {
        memoryStats(c);
    } else if (argEq(c, 1, "doctor")) {
        memoryDoctor(c);
    } else if (argEq(c, 1, "malloc-stats")) {
        addReplyBulkCString(c, "Stats not supported for the current allocator");
    } else if (argEq(c, 1, "purge")) {
        malloc_trim(0); /* glibc gives free pages back to the system */
        addReplyStr(c, shared.ok);
    } else {
        static const char *help[] = {
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
        };
        addReplyHelpOf(c, help);
    }
}
