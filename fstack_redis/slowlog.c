/* slowlog.c - SLOWLOG and LATENCY, as Redis 7.0 has them.
 *
 * The slow log: call() times every command; one that took at least
 * slowlog-log-slower-than µs becomes an entry (id, unix time, duration, its
 * arguments - at most 32, each cut at 128 bytes with Redis's markers - the
 * client's address and name), newest first, at most slowlog-max-len of them.
 * An entry is one allocation, made only for a logged command; the check in
 * slowlogAfterCall (slowlog.h) comes first.
 *
 * The latency monitor: a command that took at least latency-monitor-threshold
 * ms adds a sample to the "command" event ("fast-command" for a command
 * flagged fast), as Redis's call() does. Each event keeps the last 160
 * samples, one per second (the largest of that second), and its all-time
 * maximum, in a fixed table: no allocation at all.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "commands.h"
#include "config.h"
#include "slowlog.h"

long long slowlogSlowerThan = 10000, slowlogMaxLen = 128, latencyMonitorThreshold = 0;
long long latencyTracking = 1;

/* ---- the slow log ------------------------------------------------------- */

typedef struct slowEntry {
    struct slowEntry *next, *prev; /* next = older */
    long long id, time, duration;
    int argc;
    size_t peerlen, namelen;
    const char *peer, *name;
    struct {
        const char *p;
        size_t len;
    } argv[]; /* then the bytes */
} slowEntry;

static slowEntry *newest, *oldest;
size_t slowlogLen;
static long long nextId;

static void entryFree(slowEntry *e) { free(e); }

void slowlogTrim(void) {
    while ((long long)slowlogLen > slowlogMaxLen && oldest) {
        slowEntry *e = oldest;
        oldest = e->prev;
        if (oldest) oldest->next = NULL;
        else newest = NULL;
        slowlogLen--;
        entryFree(e);
    }
}

static void slowlogReset(void) {
    while (newest) {
        slowEntry *e = newest;
        newest = e->next;
        entryFree(e);
    }
    oldest = NULL;
    slowlogLen = 0;
}

#define REDACTED "(redacted)"

/* Argument j as it was called: the saved copy when the command took it over
 * (its ptr is then NULL); *full is its whole length. */
static const char *argAsCalled(const client *c, const slowlogSaved *sv, int j, size_t *full) {
    for (unsigned k = 0; k < sv->n; k++)
        if (sv->idx[k] == j && !c->argv[j].ptr) {
            *full = sv->len[k];
            return sv->head[k];
        }
    *full = c->argv[j].len;
    return c->argv[j].ptr;
}

void slowlogPush(client *c, const ir_command *cmd, uint64_t usec, const slowlogSaved *sv) {
    int argc = c->argc, slargc = argc > SLOWLOG_ENTRY_MAX_ARGC ? SLOWLOG_ENTRY_MAX_ARGC : argc;
    char more[64];
    /* sizes first: one allocation for the entry, its argv and its bytes */
    size_t bytes = 0;
    for (int j = 0; j < slargc; j++) {
        if (slargc != argc && j == slargc - 1) {
            bytes +=
                (size_t)snprintf(more, sizeof(more), "... (%d more arguments)", argc - slargc + 1);
        } else if (argRedacted(c, j)) {
            bytes += sizeof(REDACTED) - 1;
        } else {
            size_t full;
            argAsCalled(c, sv, j, &full);
            bytes += full <= SLOWLOG_ENTRY_MAX_STRING
                         ? full
                         : SLOWLOG_ENTRY_MAX_STRING +
                               (size_t)snprintf(more, sizeof(more), "... (%zu more bytes)",
                                                full - SLOWLOG_ENTRY_MAX_STRING);
        }
    }
    /* Redis's script client has no connection: its peer id is "?:0" */
    const char *peer = c->flags & CLIENT_SCRIPT ? "?:0" : c->addr;
    size_t peerlen = strlen(peer), namelen = c->clientname ? strlen(c->clientname) : 0;
    size_t head = sizeof(slowEntry) + (size_t)slargc * sizeof(((slowEntry *)0)->argv[0]);
    slowEntry *e = malloc(head + bytes + peerlen + namelen + 1);
    if (!e) return; /* out of memory: the command is not logged */
    char *p = (char *)e + head;
    e->argc = slargc;
    for (int j = 0; j < slargc; j++) {
        size_t n, full;
        const char *a = slargc != argc && j == slargc - 1 ? NULL : argAsCalled(c, sv, j, &full);
        e->argv[j].p = p;
        if (slargc != argc && j == slargc - 1) {
            n = (size_t)snprintf(more, sizeof(more), "... (%d more arguments)", argc - slargc + 1);
            memcpy(p, more, n);
        } else if (argRedacted(c, j)) {
            n = sizeof(REDACTED) - 1;
            memcpy(p, REDACTED, n);
        } else if (full > SLOWLOG_ENTRY_MAX_STRING) {
            memcpy(p, a, SLOWLOG_ENTRY_MAX_STRING);
            n = SLOWLOG_ENTRY_MAX_STRING + (size_t)snprintf(more, sizeof(more),
                                                            "... (%zu more bytes)",
                                                            full - SLOWLOG_ENTRY_MAX_STRING);
            memcpy(p + SLOWLOG_ENTRY_MAX_STRING, more, n - SLOWLOG_ENTRY_MAX_STRING);
        } else {
            n = full;
            if (n) memcpy(p, a, n);
        }
        e->argv[j].len = n;
        p += n;
    }
    e->peer = p;
    e->peerlen = peerlen;
    memcpy(p, peer, peerlen);
    p += peerlen;
    e->name = p;
    e->namelen = namelen;
    if (namelen) memcpy(p, c->clientname, namelen);
    e->id = nextId++;
    e->time = (long long)time(NULL);
    e->duration = (long long)usec;
    e->prev = NULL;
    e->next = newest;
    if (newest) newest->prev = e;
    else oldest = e;
    newest = e;
    slowlogLen++;
    slowlogTrim();
}

/* A bulk copied into the output: an entry may be trimmed before the reply
 * goes out (the SLOWLOG GET itself can be logged, and trim it). */
static void addReplyBulkCopy(client *c, const char *p, size_t len) {
    char *dst = addReplyBulkReserve(c, len);
    if (len) memcpy(dst, p, len);
}

static void addReplyHelpLines(client *c, const char *name, const char *const *lines, size_t n) {
    char head[128];
    snprintf(head, sizeof(head),
             "%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", name);
    addReplyArrayLen(c, (long)n + 3);
    addReplyStatus(c, head);
    for (size_t i = 0; i < n; i++) addReplyStatus(c, lines[i]);
    addReplyStatus(c, "HELP");
    addReplyStatus(c, "    Prints this help.");
}

/* The container's subcommand lookup and arity check, with Redis's errors
 * (the arities are Redis 7.0's, as commands.c's subcommand table lists them). */
typedef struct subdef {
    const char *name;
    int arity;
} subdef;

static int findSubOrReply(client *c, const char *cname, const char *upper, const subdef *subs,
                          size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!argEq(c, 1, subs[i].name)) continue;
        int ar = subs[i].arity;
        if ((ar > 0 && c->argc != ar) || (ar < 0 && c->argc < -ar)) {
            addReplySubcommandArity(c, cname);
            return -1;
        }
        return (int)i;
    }
    addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try %s HELP.", c->argv[1].ptr, upper);
    return -1;
}

/* SLOWLOG GET [count] | LEN | RESET | HELP */
void slowlogCommand(client *c) {
    static const subdef subs[] = {{"get", -2}, {"len", 2}, {"reset", 2}, {"help", 2}};
    int k = findSubOrReply(c, "slowlog", "SLOWLOG", subs, sizeof(subs) / sizeof(subs[0]));
    if (k < 0) return;
    if (k == 0) {
        if (c->argc > 3) { /* Redis's own check, after the table's arity */
            addReplyErrorFormat(c,
                                "unknown subcommand or wrong number of arguments for '%.128s'. "
                                "Try SLOWLOG HELP.",
                                c->argv[1].ptr);
            return;
        }
        long long count = 10;
        if (c->argc == 3) {
            if (!string2ll(c->argv[2].ptr, c->argv[2].len, &count) || count < -1 ||
                count > LONG_MAX) {
                addReplyError(c, "count should be greater than or equal to -1");
                return;
            }
            if (count == -1) count = (long long)slowlogLen;
        }
        if (count > (long long)slowlogLen) count = (long long)slowlogLen;
        addReplyArrayLen(c, (long)count);
        for (const slowEntry *e = newest; e && count--; e = e->next) {
            addReplyArrayLen(c, 6);
            addReplyLongLong(c, e->id);
            addReplyLongLong(c, e->time);
            addReplyLongLong(c, e->duration);
            addReplyArrayLen(c, e->argc);
            for (int j = 0; j < e->argc; j++) addReplyBulkCopy(c, e->argv[j].p, e->argv[j].len);
            addReplyBulkCopy(c, e->peer, e->peerlen);
            addReplyBulkCopy(c, e->name, e->namelen);
        }
    } else if (k == 1) {
        addReplyLongLong(c, (long long)slowlogLen);
    } else if (k == 2) {
        slowlogReset();
        addReplyStr(c, shared.ok);
    } else {
        static const char *const help[] = {
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        };
        addReplyHelpLines(c, "SLOWLOG", help, sizeof(help) / sizeof(help[0]));
    }
}

/* ---- the latency monitor ------------------------------------------------ */

#define LATENCY_TS_LEN 160 /* samples kept per event, as Redis */
#define LATENCY_EVENTS_MAX 16

typedef struct latencySample {
    long long time; /* unix seconds, 0 = unused */
    uint64_t ms;
} latencySample;

typedef struct latencySeries {
    const char *event; /* NULL = free slot */
    int idx;           /* where the next sample goes */
    uint64_t max;      /* all-time maximum */
    latencySample samples[LATENCY_TS_LEN];
} latencySeries;

static latencySeries series[LATENCY_EVENTS_MAX];

static latencySeries *findSeries(const char *event, size_t len) {
    for (int i = 0; i < LATENCY_EVENTS_MAX; i++)
        if (series[i].event && strlen(series[i].event) == len &&
            !memcmp(series[i].event, event, len))
            return &series[i];
    return NULL;
}

void latencyAddSample(const char *event, uint64_t ms) {
    latencySeries *ts = findSeries(event, strlen(event));
    if (!ts) {
        for (int i = 0; i < LATENCY_EVENTS_MAX && !ts; i++)
            if (!series[i].event) ts = &series[i];
        if (!ts) return; /* cannot happen: the events are this file's few names */
        memset(ts, 0, sizeof(*ts));
        ts->event = event;
    }
    long long now = (long long)time(NULL);
    if (ms > ts->max) ts->max = ms;
    /* one sample per second: the largest */
    latencySample *prev = &ts->samples[(ts->idx + LATENCY_TS_LEN - 1) % LATENCY_TS_LEN];
    if (prev->time == now) {
        if (ms > prev->ms) prev->ms = ms;
        return;
    }
    ts->samples[ts->idx].time = now;
    ts->samples[ts->idx].ms = ms;
    ts->idx = (ts->idx + 1) % LATENCY_TS_LEN;
}

/* Reset one event (NULL: all); the number of events reset. */
static int latencyReset(const char *event, size_t len) {
    int n = 0;
    for (int i = 0; i < LATENCY_EVENTS_MAX; i++) {
        latencySeries *ts = &series[i];
        if (!ts->event) continue;
        if (event && (strlen(ts->event) != len || memcmp(ts->event, event, len))) continue;
        ts->event = NULL;
        n++;
    }
    return n;
}

static int nEvents(void) {
    int n = 0;
    for (int i = 0; i < LATENCY_EVENTS_MAX; i++) n += series[i].event != NULL;
    return n;
}

/* Figures over the kept samples of one series. */
typedef struct seriesStats {
    int samples;
    uint64_t min, max, sum, last;
    long long first_time, last_time;
    double mad; /* mean absolute deviation */
} seriesStats;

static seriesStats statsOf(const latencySeries *ts) {
    seriesStats st = {0};
    st.min = UINT64_MAX;
    for (int j = 0; j < LATENCY_TS_LEN; j++) {
        const latencySample *sm = &ts->samples[(ts->idx + j) % LATENCY_TS_LEN];
        if (!sm->time) continue;
        if (!st.samples) st.first_time = sm->time;
        st.samples++;
        st.sum += sm->ms;
        if (sm->ms < st.min) st.min = sm->ms;
        if (sm->ms > st.max) st.max = sm->ms;
        st.last = sm->ms;
        st.last_time = sm->time;
    }
    if (!st.samples) {
        st.min = 0;
        return st;
    }
    double mean = (double)st.sum / st.samples;
    for (int j = 0; j < LATENCY_TS_LEN; j++) {
        const latencySample *sm = &ts->samples[j];
        if (sm->time) st.mad += (sm->ms > mean ? sm->ms - mean : mean - sm->ms);
    }
    st.mad /= st.samples;
    return st;
}

/* A growing text (the doctor's report, the graph). */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void textf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void textf(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 1024;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *q = realloc(t->p, cap);
        if (!q) return;
        t->p = q;
        t->cap = cap;
    }
}

/* LATENCY DOCTOR: each event's figures and what to look at. */
static void latencyDoctor(client *c) {
    text t = {0};
    if (!latencyMonitorThreshold && !nEvents()) {
        textf(&t, "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this "
                  "server. You may use \"CONFIG SET latency-monitor-threshold "
                  "<milliseconds>.\" in order to enable it.\n");
    } else if (!nEvents()) {
        textf(&t,
              "Dave, no latency spike was observed during the lifetime of this server "
              "(threshold %lld ms), not in the slightest bit.\n",
              latencyMonitorThreshold);
    } else {
        textf(&t,
              "Dave, I have observed latency spikes in this server (threshold %lld ms). "
              "Here is what I found:\n\n",
              latencyMonitorThreshold);
        int k = 0, slowcmd = 0, fastcmd = 0;
        for (int i = 0; i < LATENCY_EVENTS_MAX; i++) {
            const latencySeries *ts = &series[i];
            if (!ts->event) continue;
            seriesStats st = statsOf(ts);
            long long now = (long long)time(NULL);
            textf(&t,
                  "%d. %s: %d latency spikes (average %llums, mean deviation %.0fms, period "
                  "%.2f sec). Worst all time event %llums. Latest %llums, %lld seconds ago.\n",
                  ++k, ts->event, st.samples,
                  (unsigned long long)(st.samples ? st.sum / (uint64_t)st.samples : 0), st.mad,
                  st.samples > 1 ? (double)(st.last_time - st.first_time) / (st.samples - 1) : 0.0,
                  (unsigned long long)ts->max, (unsigned long long)st.last, now - st.last_time);
            if (!strcmp(ts->event, "command")) slowcmd = 1;
            if (!strcmp(ts->event, "fast-command")) fastcmd = 1;
        }
        textf(&t, "\nI have a few advices for you:\n\n");
        if (slowcmd)
            textf(&t,
                  "- Check your slow log (SLOWLOG GET) for the commands that were slow: "
                  "with slowlog-log-slower-than at %lld us it logs the commands that take "
                  "that long. Avoid O(N) commands on big values (KEYS, SMEMBERS, LRANGE 0 "
                  "-1, HGETALL of large hashes) and split long scripts; every command runs "
                  "on the one server thread, so a slow one delays every other client.\n",
                  slowlogSlowerThan);
        if (fastcmd)
            textf(&t, "- Commands flagged fast (O(1) or O(log N)) were slow: that points at "
                      "the machine, not the data. Check that the server is not swapping, "
                      "that its core is not shared with other busy processes (this server "
                      "runs on one thread), and that huge pages / transparent huge pages are "
                      "not stalling memory allocation.\n");
        textf(&t, "- LATENCY HISTORY <event> gives the samples; LATENCY RESET clears them.\n");
    }
    if (t.p) addReplyVerbatim(c, t.p, t.len, "txt");
    else addReplyVerbatim(c, "", 0, "txt");
    free(t.p);
}

/* LATENCY GRAPH event: the samples as columns of '#' (latest on the right),
 * from the lowest to the highest sample, with each column's age below it. */
static void latencyGraph(client *c, const latencySeries *ts) {
    enum { ROWS = 4 };
    seriesStats st = statsOf(ts);
    text t = {0};
    textf(&t, "%s - high %llu ms, low %llu ms (all time high %llu ms)\n", ts->event,
          (unsigned long long)st.max, (unsigned long long)st.min, (unsigned long long)ts->max);
    for (int i = 0; i < 80; i++) textf(&t, "-");
    textf(&t, "\n");
    int n = 0;
    const latencySample *col[LATENCY_TS_LEN];
    for (int j = 0; j < LATENCY_TS_LEN; j++) {
        const latencySample *sm = &ts->samples[(ts->idx + j) % LATENCY_TS_LEN];
        if (sm->time) col[n++] = sm;
    }
    if (n > 80) { /* the latest 80 */
        memmove(col, col + (n - 80), 80 * sizeof(col[0]));
        n = 80;
    }
    int height[LATENCY_TS_LEN];
    for (int i = 0; i < n; i++) {
        uint64_t span = st.max - st.min;
        height[i] = span ? 1 + (int)((col[i]->ms - st.min) * (ROWS - 1) / span) : ROWS;
    }
    for (int r = ROWS; r >= 1; r--) {
        for (int i = 0; i < n; i++) textf(&t, "%c", height[i] >= r ? '#' : ' ');
        textf(&t, "\n");
    }
    /* each column's age, written downwards: "12s", "3m", "2h", "1d" */
    long long now = (long long)time(NULL);
    char age[LATENCY_TS_LEN][24];
    size_t agelen = 0;
    for (int i = 0; i < n; i++) {
        long long a = now - col[i]->time;
        if (a < 0) a = 0;
        if (a < 60) snprintf(age[i], sizeof(age[i]), "%llds", a);
        else if (a < 3600) snprintf(age[i], sizeof(age[i]), "%lldm", a / 60);
        else if (a < 86400) snprintf(age[i], sizeof(age[i]), "%lldh", a / 3600);
        else snprintf(age[i], sizeof(age[i]), "%lldd", a / 86400);
        if (strlen(age[i]) > agelen) agelen = strlen(age[i]);
    }
    textf(&t, "\n");
    for (size_t r = 0; r < agelen; r++) {
        for (int i = 0; i < n; i++) textf(&t, "%c", r < strlen(age[i]) ? age[i][r] : ' ');
        textf(&t, "\n");
    }
    addReplyVerbatim(c, t.p, t.len, "txt");
    free(t.p);
}

/* LATENCY DOCTOR | GRAPH event | HISTORY event | LATEST | RESET [event ...] | HELP */
void latencyCommand(client *c) {
    static const subdef subs[] = {{"doctor", 2}, {"graph", 3}, {"history", 3},   {"latest", 2},
                                  {"reset", -2}, {"help", 2},  {"histogram", -2}};
    int k = findSubOrReply(c, "latency", "LATENCY", subs, sizeof(subs) / sizeof(subs[0]));
    if (k < 0) return;
    if (k == 0) {
        latencyDoctor(c);
    } else if (k == 1) {
        const latencySeries *ts = findSeries(c->argv[2].ptr, c->argv[2].len);
        if (!ts) addReplyErrorFormat(c, "No samples available for event '%s'", c->argv[2].ptr);
        else latencyGraph(c, ts);
    } else if (k == 2) {
        const latencySeries *ts = findSeries(c->argv[2].ptr, c->argv[2].len);
        if (!ts) {
            addReplyArrayLen(c, 0);
            return;
        }
        long n = 0;
        for (int j = 0; j < LATENCY_TS_LEN; j++) n += ts->samples[j].time != 0;
        addReplyArrayLen(c, n);
        for (int j = 0; j < LATENCY_TS_LEN; j++) {
            const latencySample *sm = &ts->samples[(ts->idx + j) % LATENCY_TS_LEN];
            if (!sm->time) continue;
            addReplyArrayLen(c, 2);
            addReplyLongLong(c, sm->time);
            addReplyLongLong(c, (long long)sm->ms);
        }
    } else if (k == 3) {
        addReplyArrayLen(c, nEvents());
        for (int i = 0; i < LATENCY_EVENTS_MAX; i++) {
            const latencySeries *ts = &series[i];
            if (!ts->event) continue;
            const latencySample *last =
                &ts->samples[(ts->idx + LATENCY_TS_LEN - 1) % LATENCY_TS_LEN];
            addReplyArrayLen(c, 4);
            addReplyBulkCString(c, ts->event);
            addReplyLongLong(c, last->time);
            addReplyLongLong(c, (long long)last->ms);
            addReplyLongLong(c, (long long)ts->max);
        }
    } else if (k == 4) {
        int n = 0;
        if (c->argc == 2) n = latencyReset(NULL, 0);
        for (int j = 2; j < c->argc; j++) n += latencyReset(c->argv[j].ptr, c->argv[j].len);
        addReplyLongLong(c, n);
    } else if (k == 6) {
        latencyHistogramCommand(c);
    } else {
        static const char *const help[] = {
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for "
            "the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        };
        addReplyHelpLines(c, "LATENCY", help, sizeof(help) / sizeof(help[0]));
    }
}

void slowlogFreeAll(void) {
    slowlogReset();
    nextId = 0;
    latencyReset(NULL, 0);
}
