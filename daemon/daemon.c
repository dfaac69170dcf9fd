/* daemon.c - ir_run: the daemon's life cycle. The start-up checks, the
 * server, the start-up table, snapshots and the AOF, the shard group's check,
 * the stacks, the main loop and its idle rule, the counters other threads read,
 * and the teardown (configuration defaults live in fstack_redis/config.c's
 * parameter table).
 *
 * Why a folder of its own. This is the composition root: the one file that
 * knows both the server (fstack_redis/: clients, commands, snapshots, AOF,
 * replay tables) and the concrete stacks (dataplane/: kernel, DPDK+lwIP,
 * shared memory). In dataplane/ it made the stacks' library depend on
 * snapshots and the AOF, and dpdk.c called up into it for its telemetry; in
 * fstack_redis/ it would make the server name the DPDK stack (IR_HAVE_DPDK,
 * its constructor). Here the dependencies form one direction: the daemon ->
 * the server and the stacks; the stacks -> transport.h only (the ops table,
 * the constructors, the upcalls the server implements, its log, and
 * ir_stats_source, through which the daemon's counters reach DPDK's
 * telemetry); the server never includes a stack. tests/test_layers.py holds
 * the tree to it.
 *
 * Init order: check the configuration, the server (keyspace and tables), the
 * transport, then the loop; teardown runs in reverse. Signals belong to the
 * host process: its handler calls ir_stop(), which only sets a flag that the
 * loop takes (serverTakeStopRequest), as DPDK's examples' force_quit.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "aof.h"
#include "blocked.h"
#include "db.h"
#include "replay.h"
#include "server.h"
#include "snapshot.h"
#include "t_replay.h"
#include "transport.h"

#define TICK_MS 100
#define UNIX_SIDE_EVERY 16

/* The idle rule, one for both stacks. A loop that polls (DPDK by default;
 * the kernel stack with busy_poll) keeps polling without waiting for SPIN_US
 * after the last event, so back-to-back requests never meet a sleeping
 * server. After that it waits for the next event: a transport that can sleep
 * until one arrives (epoll; af_packet's socket under DPDK, as l3fwd-power
 * sleeps on RX interrupts) waits up to a tick and is woken by the event. One
 * that cannot backs off in proportion to the empty polls, as l3fwd-power does
 * between its polls: the k-th empty poll naps k x NAP_STEP_US, up to
 * NAP_MAX_US, and after IDLE_SLEEP_MS without events a whole tick (capped by
 * the transport). A co-located appliance under light load so costs little
 * more than a sleeping server, and under load it never waits.
 *   busy_poll on DPDK: never wait (the lowest latency; 100% of the core).
 *   kernel stack without busy_poll: always wait in epoll (a sleeping server). */
#define SPIN_US 100
#define NAP_STEP_US 20
#define NAP_MAX_US 1000
#define IDLE_SLEEP_MS 100

enum idle_mode { IDLE_SPIN, IDLE_ADAPTIVE, IDLE_SLEEP };

typedef struct idle_state {
    enum idle_mode mode;
    int can_wait; /* the transport sleeps until an event */
    uint64_t last_event_us;
    unsigned empty; /* empty polls since the spin window ended */
} idle_state;

static uint64_t monoUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* How long the next poll may wait. */
static long idleWait(idle_state *st) {
    if (st->mode == IDLE_SPIN) return 0;
    if (st->mode == IDLE_SLEEP) return TICK_MS * 1000L;
    uint64_t idle = monoUs() - st->last_event_us;
    if (idle < SPIN_US) return 0;
    if (st->can_wait || idle >= IDLE_SLEEP_MS * 1000ULL) return TICK_MS * 1000L;
    long w = (long)++st->empty * NAP_STEP_US;
    return w < NAP_MAX_US ? w : NAP_MAX_US;
}

static void idleSawEvents(idle_state *st) {
    st->empty = 0;
    if (st->mode == IDLE_ADAPTIVE) st->last_event_us = monoUs();
}

static volatile int running;
static ir_stats published;

/* Table counters for other threads (DPDK telemetry, pyctl): copied under a
 * mutex by the loop thread every tick. */
#define MAX_PUBLISHED_TABLES 64
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static ir_table_stats published_tables[MAX_PUBLISHED_TABLES];
static int published_ntables;
static uint64_t cps_last_ms, cps_last_commands;

/* The loop's clock: the coarse clock costs a few ns where a precise read
 * was a fifth of a busy-poll iteration. Commands that need exact time
 * (expiry) read ir_mstime() themselves. */
static uint64_t loopClockMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The stacks compiled into this library (pyctl status/drivers/start read it). */
const char *ir_stacks(void) {
#ifdef IR_HAVE_DPDK
    return "kernel dpdk";
#else
    return "kernel";
#endif
}

static int checkConfig(const ir_config *cfg) {
    if (!cfg->stack || (strcmp(cfg->stack, "kernel") && strcmp(cfg->stack, "dpdk"))) {
        ir_set_error("stack must be 'kernel' or 'dpdk', not '%s'", cfg->stack ? cfg->stack : "");
        return IR_ECONFIG;
    }
#ifndef IR_HAVE_DPDK
    if (!strcmp(cfg->stack, "dpdk")) {
        ir_set_error("this build has no DPDK stack (libdpdk-dev and lwIP were not found when it "
                     "was compiled): use --stack kernel, or rebuild with them");
        return IR_ENOSTACK;
    }
#endif
    if (cfg->unixsocketperm > 0777) {
        ir_set_error("unixsocketperm must be 0-777 (octal), not %o", cfg->unixsocketperm);
        return IR_ECONFIG;
    }
    if (cfg->port < 0 || cfg->port > 65535) {
        ir_set_error("port must be 0-65535, not %d", cfg->port);
        return IR_ECONFIG;
    }
    if (cfg->maxclients < 1 || cfg->tcp_backlog < 1 || cfg->proto_max_bulk_len < 1 ||
        cfg->client_query_buffer_limit < 1024 || cfg->default_maxbytes < 8) {
        ir_set_error("maxclients, tcp_backlog, proto_max_bulk_len, client_query_buffer_limit "
                     "and default_maxbytes must be positive");
        return IR_ECONFIG;
    }
    const char *err = NULL;
    int members = cfg->shard_group && cfg->shard_group[0]
                      ? shardGroupMembers(cfg->shard_group, NULL, NULL, 0, &err)
                      : 1;
    if (members < 0) {
        ir_set_error("shard group '%s': %s", cfg->shard_group, err);
        return IR_ECONFIG;
    }
    if (cfg->shard_index < 0 || cfg->shard_index >= members) {
        ir_set_error("shard index %d is outside the group of %d shard%s", cfg->shard_index, members,
                     members == 1 ? "" : "s");
        return IR_ECONFIG;
    }
    if (cfg->databases < 1 || cfg->databases > 1000000) {
        ir_set_error("databases must be 1-1000000, not %d", cfg->databases);
        return IR_ECONFIG;
    }
    return IR_OK;
}

static void publishStats(const ir_server *s) {
    __atomic_store_n(&published.port, s->tp ? s->tp->bound_port : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&published.uptime_ms, s->now_ms - s->start_ms, __ATOMIC_RELAXED);
    __atomic_store_n(&published.connected_clients, s->nclients, __ATOMIC_RELAXED);
    __atomic_store_n(&published.total_connections, s->total_connections, __ATOMIC_RELAXED);
    __atomic_store_n(&published.total_commands, s->total_commands, __ATOMIC_RELAXED);
    __atomic_store_n(&published.tables, (uint64_t)tablesCount(s->tables), __ATOMIC_RELAXED);
    __atomic_store_n(&published.keys, dbsSize(s), __ATOMIC_RELAXED);
    __atomic_store_n(&published.cycles_input, s->cycles_input, __ATOMIC_RELAXED);
    __atomic_store_n(&published.cycles_execute, s->cycles_execute, __ATOMIC_RELAXED);
    __atomic_store_n(&published.cycles_reply, s->cycles_reply, __ATOMIC_RELAXED);
    __atomic_store_n(&published.used_memory, serverUsedMemory(s), __ATOMIC_RELAXED);
    if (s->now_ms - cps_last_ms >= 1000) {
        uint64_t dt = s->now_ms - cps_last_ms;
        uint64_t cps = cps_last_ms ? (s->total_commands - cps_last_commands) * 1000 / dt : 0;
        __atomic_store_n(&published.commands_per_sec, cps, __ATOMIC_RELAXED);
        cps_last_ms = s->now_ms;
        cps_last_commands = s->total_commands;
    }
    pthread_mutex_lock(&tables_lock);
    int n = 0;
    for (const ir_table *t = tablesFirst(s->tables); t && n < MAX_PUBLISHED_TABLES;
         t = tableNext(t), n++) {
        ir_table_stats *o = &published_tables[n];
        ir_table_info in;
        tableInfo(t, &in);
        snprintf(o->name, sizeof(o->name), "%s", tableName(t));
        o->size = in.size;
        o->capacity = tableOpts(t)->capacity;
        o->inserts = in.inserts;
        o->samples = in.samples;
        o->updates = in.updates;
        o->stale_updates = in.stale_updates;
        o->bytes_used = in.bytes_used;
    }
    published_ntables = n;
    pthread_mutex_unlock(&tables_lock);
}

int ir_get_table_stats(ir_table_stats *out, int max) {
    pthread_mutex_lock(&tables_lock);
    int n = published_ntables < max ? published_ntables : max;
    memcpy(out, published_tables, (size_t)(n > 0 ? n : 0) * sizeof(*out));
    pthread_mutex_unlock(&tables_lock);
    return n;
}

void ir_get_stats(ir_stats *out) {
    out->running = __atomic_load_n(&running, __ATOMIC_RELAXED);
    out->port = __atomic_load_n(&published.port, __ATOMIC_RELAXED);
    out->uptime_ms = __atomic_load_n(&published.uptime_ms, __ATOMIC_RELAXED);
    out->connected_clients = __atomic_load_n(&published.connected_clients, __ATOMIC_RELAXED);
    out->total_connections = __atomic_load_n(&published.total_connections, __ATOMIC_RELAXED);
    out->total_commands = __atomic_load_n(&published.total_commands, __ATOMIC_RELAXED);
    out->keys = __atomic_load_n(&published.keys, __ATOMIC_RELAXED);
    out->tables = __atomic_load_n(&published.tables, __ATOMIC_RELAXED);
    out->used_memory = __atomic_load_n(&published.used_memory, __ATOMIC_RELAXED);
    out->commands_per_sec = __atomic_load_n(&published.commands_per_sec, __ATOMIC_RELAXED);
    out->cycles_input = __atomic_load_n(&published.cycles_input, __ATOMIC_RELAXED);
    out->cycles_execute = __atomic_load_n(&published.cycles_execute, __ATOMIC_RELAXED);
    out->cycles_reply = __atomic_load_n(&published.cycles_reply, __ATOMIC_RELAXED);
}

#ifdef IR_HAVE_DPDK
/* The counters DPDK's telemetry (/inreplay/stats and /inreplay/tables) reads. */
static const ir_stats_source stats_source = {.stats = ir_get_stats, .tables = ir_get_table_stats};
#endif

static int createStartupTable(ir_server *s, const ir_config *cfg) {
    ir_table_opts o = replayTableOpts(s, 0); /* REPLAY.CREATE's, then the flags */
    o.capacity = cfg->table_capacity;
    o.alpha = cfg->table_alpha;
    o.beta = cfg->table_beta;
    o.epsilon = cfg->table_epsilon;
    if (cfg->table_maxbytes) o.maxbytes = cfg->table_maxbytes;
    ir_limiter_opts lim = {
        .min_size = cfg->table_min_size,
        .samples_per_insert = cfg->table_samples_per_insert,
        .error_buffer = cfg->table_error_buffer ? cfg->table_error_buffer
                        : cfg->table_samples_per_insert > 0
                            ? tableDefaultErrorBuffer(cfg->table_samples_per_insert)
                            : 0,
    };
    const char *err;
    ir_table *t;
    if (tableLimiterCheck(&lim, o.capacity, &err) != 0 ||
        tableCreate(s->tables, cfg->table, strlen(cfg->table), &o, &t, &err) != 0 ||
        tableLimiterSet(t, &lim, &err) != 0) {
        ir_set_error("table '%s': %s", cfg->table, err);
        return IR_ECONFIG;
    }
    return IR_OK;
}

int ir_run(const ir_config *cfg) {
    if (__atomic_exchange_n(&running, 1, __ATOMIC_ACQ_REL)) {
        ir_set_error("a server is already running in this process");
        return IR_ERUNNING;
    }
    int rc = checkConfig(cfg);
    if (rc != IR_OK) goto out;

    ir_server *s = server_new(cfg);
    if (!s) {
        ir_set_error("out of memory creating the server");
        rc = IR_ENOMEM;
        goto out;
    }
    g_server = s;
    if (cfg->table && cfg->table[0] && (rc = createStartupTable(s, cfg)) != IR_OK) goto server;
    snapshotInit(s);
    {
        /* like Redis with a bad dir: refuse to start rather than fail at the first save */
        char why[256];
        const char *dir = cfg->dir && cfg->dir[0] ? cfg->dir : ".";
        if (snapshotSetDir(s, dir, why, sizeof(why)) != 0) {
            ir_set_error("snapshot directory (--dir) %s: %s", dir, why);
            rc = IR_ECONFIG;
            goto server;
        }
    }
    if (cfg->restore && cfg->restore[0]) {
        /* like Redis with a bad RDB: if every snapshot there is corrupt,
         * refuse to start rather than silently start empty; with
         * restore_if_present, no snapshot at all means starting empty */
        char msg[1024];
        int n = snapshotRestore(s, cfg->restore, msg, sizeof(msg));
        if (n >= 0 && !snapshotLoaded() && !cfg->restore_if_present) {
            ir_set_error("--restore %s: no snapshot to restore, refusing to start empty "
                         "(--restore-if-present starts empty when there is none)",
                         cfg->restore);
            rc = IR_ECONFIG;
            goto server;
        }
        if (n < 0) {
            ir_set_error("%s", msg);
            rc = IR_ECONFIG;
            goto server;
        }
        serverLog("%s", msg);
    }
    {
        char msg[4608];
        if (aofStartup(s, msg, sizeof(msg)) != 0) {
            ir_set_error("%s", msg);
            rc = IR_ECONFIG;
            goto server;
        }
    }

#ifdef IR_HAVE_DPDK
    if (!strcmp(cfg->stack, "dpdk")) {
        s->tp = ir_dpdk_transport_new(s, cfg, &stats_source);
        if (!s->tp) {
            rc = ir_dpdk_last_code();
            goto server;
        }
    } else
#endif
        s->tp = ir_kernel_transport_new(s, cfg->bind, cfg->port, cfg->tcp_backlog, cfg->busy_poll,
                                        cfg->unixsocket, cfg->unixsocketperm);
    if (!s->tp) {
        rc = IR_ENET;
        goto server;
    }
    if (strcmp(cfg->stack, "kernel") != 0 && cfg->unixsocket && cfg->unixsocket[0]) {
        /* lwIP has no Unix sockets: the kernel's, served in this loop beside the port */
        s->unix_side = ir_kernel_transport_new(s, NULL, 0, cfg->tcp_backlog, 0, cfg->unixsocket,
                                               cfg->unixsocketperm);
        if (!s->unix_side || !s->tp->ops->watch_fd ||
            s->tp->ops->watch_fd(s->tp, ir_kernel_transport_fd(s->unix_side)) != 0) {
            if (s->unix_side)
                ir_set_error("the %s stack cannot wait for the Unix socket's events",
                             s->tp->ops->name);
            rc = IR_ENET;
            goto server;
        }
    }
    if (cfg->shm_socket && cfg->shm_socket[0]) {
        s->local = ir_shm_transport_new(s, cfg->shm_socket, cfg->shm_socketperm, cfg->shm_ring_size,
                                        s->run_id);
        int fds[2];
        int nfds = s->local ? ir_shm_wait_fds(s->local, fds) : 0;
        for (int i = 0; i < nfds; i++)
            if (!s->tp->ops->watch_fd || s->tp->ops->watch_fd(s->tp, fds[i]) != 0) {
                ir_set_error("the %s stack cannot wait for the shm socket's events",
                             s->tp->ops->name);
                s->local->ops->destroy(s->local);
                s->local = NULL;
                break;
            }
        if (!s->local) {
            rc = IR_ENET;
            goto server;
        }
    }
    idle_state idle = {
        .mode = s->tp->polling ? (cfg->busy_poll ? IDLE_SPIN : IDLE_ADAPTIVE)
                               : (cfg->busy_poll ? IDLE_ADAPTIVE : IDLE_SLEEP),
        .can_wait = s->tp->can_wait,
        .last_event_us = monoUs(),
    };
    serverLog("Ready to accept connections on %s:%d (%s stack: %s; %s)", cfg->bind,
              s->tp->bound_port, s->tp->ops->name, s->tp->build ? s->tp->build : "",
              idle.mode == IDLE_SPIN    ? "polls without pause"
              : idle.mode == IDLE_SLEEP ? "sleeps until events"
              : idle.can_wait           ? "polls under load, sleeps until events when idle"
                                        : "polls under load, backs off when idle");
    if (cfg->unixsocket && cfg->unixsocket[0])
        serverLog("The server is now ready to accept connections at %s", cfg->unixsocket);
    if (s->local)
        serverLog("Same-host clients connect through shared memory at %s (%llu-byte rings)",
                  cfg->shm_socket, (unsigned long long)cfg->shm_ring_size);
    serverLog("Snapshot directory %s", s->cfg.dir);
    serverLogOpenedProtections(s);
    s->loop_mode = idle.mode == IDLE_SPIN    ? "busy-poll"
                   : idle.mode == IDLE_SLEEP ? "sleep"
                                             : "adaptive";
    publishStats(s);

    uint64_t last_tick = s->now_ms;
    unsigned unix_polls = 0;
    while (!serverTakeStopRequest(s) && !s->shutdown_asap) {
        /* shm clients follow the same idle rule as TCP ones: a server polling for them
         * on a machine with few cores took the CPU their own work needed (measured:
         * 2-4x the server CPU per queued 128 B item of kernel TCP, on 2 cores), so a
         * sleeping server sleeps; --busy-poll makes it poll, as for TCP */
        long wait = idleWait(&idle);
        if (s->blocked) wait = blockedWaitBound(s, wait); /* wake for the nearest timeout */
        int armed = 0, lev = 0;
        if (s->local) {
            lev = s->local->ops->poll(s->local, 0);
            if (lev) {
                wait = 0;
            } else if (wait > 0) { /* sleep only if no ring has work (shm_ring.h) */
                armed = 1;
                if (ir_shm_arm(s->local)) wait = 0;
            }
        }
        int ev = s->tp->ops->poll(s->tp, wait);
        if (armed) ir_shm_disarm(s->local);
        /* the Unix socket beside DPDK: after a wait, else every UNIX_SIDE_EVERY
         * polls (a system call each time; DPDK's iterations make none) */
        if (s->unix_side && (wait > 0 || ++unix_polls % UNIX_SIDE_EVERY == 0))
            ev += s->unix_side->ops->poll(s->unix_side, 0);
        if (ev < 0) {
            ir_set_error("transport poll failed");
            rc = IR_ENET;
            break;
        }
        ev += lev;
        s->eventloop_cycles++;
        if (ev > 0) idleSawEvents(&idle);
        s->now_ms = loopClockMs();
        if (s->blocked) blockedHandleTimeouts(s);
        if (s->now_ms - last_tick >= TICK_MS) {
            server_tick(s);
            snapshotTick(s);
            publishStats(s);
            last_tick = s->now_ms;
        }
    }
    serverLog("%s, closing %llu client(s)",
              s->shutdown_asap == SHUTDOWN_SAVE_PER_CONFIG ? "Received SIGINT/SIGTERM (ir_stop)"
                                                           : "Shutdown",
              (unsigned long long)s->nclients);
    snapshotShutdown(s);
    aofShutdown(s);
    /* SHUTDOWN saved already (or was told not to); a signal saves here, and
     * a save that fails makes ir_run fail: the data is not on disk. */
    if (cfg->save_on_shutdown && s->shutdown_asap != SHUTDOWN_DONE) {
        char msg[1024];
        int src = snapshotSave(s, msg, sizeof(msg)); /* msg says what happened either way */
        serverLog("%s", msg);
        if (src != IR_OK && rc == IR_OK) {
            ir_set_error("the snapshot on shutdown failed, the data is NOT saved: %s",
                         msg + (strncmp(msg, "snapshot failed: ", 17) ? 0 : 17));
            rc = src;
        }
    }
server:
    g_server = NULL;
    serverDropStopRequest();
    {
        ir_transport *tp = s->tp, *local = s->local, *unix_side = s->unix_side;
        server_free(s); /* closes every client through its transport */
        if (local) local->ops->destroy(local);
        if (unix_side) unix_side->ops->destroy(unix_side);
        if (tp) tp->ops->destroy(tp);
    }
out:
    memset(&published, 0, sizeof(published));
    pthread_mutex_lock(&tables_lock);
    published_ntables = 0;
    pthread_mutex_unlock(&tables_lock);
    cps_last_ms = cps_last_commands = 0;
    __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
    return rc;
}
