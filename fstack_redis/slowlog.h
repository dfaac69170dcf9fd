/* slowlog.h - SLOWLOG and LATENCY: the slow log and the latency monitor, as
 * Redis 7.0 has them (see slowlog.c). */
#ifndef IR_SLOWLOG_H
#define IR_SLOWLOG_H

#include <string.h>

#include "server.h"

/* The configuration (config.c's table points at these):
 * slowlog-log-slower-than (µs; < 0 disables, 0 logs everything),
 * slowlog-max-len, latency-monitor-threshold (ms; 0 = off). */
extern long long slowlogSlowerThan, slowlogMaxLen, latencyMonitorThreshold;

void slowlogCommand(client *c);
/* LATENCY HISTOGRAM (commands.c, where the per-command statistics are: call()'s
 * commandStatsCall records each duration while latency-tracking is on). */
extern long long latencyTracking;
void latencyHistogramCommand(client *c);
void latencyCommand(client *c);

/* Arguments a command may take over (argSteal: big bulks, a transaction's
 * queued copies): their first bytes and length, kept by call() on its stack
 * before the command runs so that the entry still shows them. */
#define SLOWLOG_ENTRY_MAX_ARGC 32
#define SLOWLOG_ENTRY_MAX_STRING 128
typedef struct slowlogSaved {
    unsigned n; /* 0: no owned argument */
    unsigned char idx[SLOWLOG_ENTRY_MAX_ARGC];
    size_t len[SLOWLOG_ENTRY_MAX_ARGC];
    char head[SLOWLOG_ENTRY_MAX_ARGC][SLOWLOG_ENTRY_MAX_STRING];
} slowlogSaved;

static inline void slowlogBeforeCall(const client *c, slowlogSaved *sv) {
    sv->n = 0;
    if (slowlogSlowerThan < 0) return;
    for (int j = 0; j < c->argc && j < SLOWLOG_ENTRY_MAX_ARGC; j++) {
        if (!c->argv[j].owned) continue;
        size_t n = c->argv[j].len;
        sv->idx[sv->n] = (unsigned char)j;
        sv->len[sv->n] = n;
        memcpy(sv->head[sv->n], c->argv[j].ptr,
               n < SLOWLOG_ENTRY_MAX_STRING ? n : SLOWLOG_ENTRY_MAX_STRING);
        sv->n++;
    }
}

/* The slow part of slowlogAfterCall: log the command (and trim). */
void slowlogPush(client *c, const ir_command *cmd, uint64_t usec, const slowlogSaved *sv);
/* Drop the oldest entries beyond slowlog-max-len. */
void slowlogTrim(void);
extern size_t slowlogLen;
/* Add a sample of `ms` milliseconds to the named event (a static string). */
void latencyAddSample(const char *event, uint64_t ms);

/* call(): after each command, with its duration. Nothing is allocated unless
 * the command is logged. As Redis: commands flagged skip_slowlog are not
 * logged; the trim runs whenever the slow log is on. */
static inline void slowlogAfterCall(client *c, const ir_command *cmd, uint64_t usec,
                                    const slowlogSaved *sv) {
    if (slowlogSlowerThan >= 0 && !(cmd->flags & CMD_SKIP_SLOWLOG)) {
        if ((long long)usec >= slowlogSlowerThan) slowlogPush(c, cmd, usec, sv);
        else if ((long long)slowlogLen > slowlogMaxLen) slowlogTrim();
    }
    if (latencyMonitorThreshold > 0 && (long long)(usec / 1000) >= latencyMonitorThreshold)
        latencyAddSample(cmd->flags & CMD_FAST ? "fast-command" : "command", usec / 1000);
}

/* A blocked command was served (or timed out): the slow log entry Redis
 * makes then (the time of the serving run; the wait is not counted) and a
 * sample of the command-unblocking event. */
static inline void slowlogUnblocked(client *c, const ir_command *cmd, uint64_t usec) {
    if (slowlogSlowerThan >= 0 && !(cmd->flags & CMD_SKIP_SLOWLOG)) {
        if ((long long)usec >= slowlogSlowerThan) {
            slowlogSaved none = {0};
            slowlogPush(c, cmd, usec, &none);
        } else if ((long long)slowlogLen > slowlogMaxLen) {
            slowlogTrim();
        }
    }
    if (latencyMonitorThreshold > 0 && (long long)(usec / 1000) >= latencyMonitorThreshold)
        latencyAddSample("command-unblocking", usec / 1000);
}

/* Free the entries, forget the samples, ids from 0 again (server_free: a
 * process may run several servers in a row). */
void slowlogFreeAll(void);

#endif
