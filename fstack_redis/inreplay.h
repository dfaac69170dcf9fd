/* inreplay.h - the public C API of libinreplay.
 *
 * Two parts:
 *   1. the prioritized sampler (K-ary sum tree + min tree + priority transform),
 *      usable on its own: the server's replay tables use it, and so does the
 *      learner-side baseline through cffi;
 *   2. the daemon: a configuration struct, run (blocking), stop and stats.
 *
 * pyctl reads the declarations between the CFFI markers below with cffi's
 * cdef(), so that block must stay plain C: no macros other than integer
 * constants, no inline functions, no includes.
 */
#ifndef INREPLAY_H
#define INREPLAY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CFFI-BEGIN */

/* Error codes: every int-returning call returns 0 or one of these. */
#define IR_OK 0
#define IR_EINVAL -1   /* bad argument: negative/NaN/inf priority, bad index ... */
#define IR_ENOMEM -2   /* allocation failed */
#define IR_EEMPTY -3   /* sampling an empty table */
#define IR_ECONFIG -4  /* invalid configuration value */
#define IR_ENET -5     /* socket/bind/listen failure (see ir_last_error) */
#define IR_ENOSTACK -6 /* requested network stack is not built in */
#define IR_ERUNNING -7 /* a server is already running in this process */

/* Human-readable text for an error code (static string). */
const char *ir_strerror(int code);
/* Details of the last error in this thread (e.g. "bind 127.0.0.1:6379: Address in use"). */
const char *ir_last_error(void);
/* The system error number (errno, or DPDK's rte_errno) behind the last error in this
 * thread, 0 if it had none: what a caller tests, never the text above. */
int ir_last_errno(void);

/* ---- the prioritized sampler ------------------------------------------- */

/* Concurrency contract: a sampler is not thread-safe; one thread (the lcore
 * that owns the table) calls everything. Reads of ir_sampler_total/min/max
 * from another thread are not supported. */
typedef struct ir_sampler ir_sampler;

/* capacity: number of slots (leaves); fanout: K in {2,4,8,16,32}, 0 = the
 * built-in default (IR_DEFAULT_FANOUT); alpha >= 0, epsilon >= 0; seed for
 * the sampler's own RNG. Returns NULL on bad arguments or no memory. */
ir_sampler *ir_sampler_new(uint64_t capacity, unsigned fanout, double alpha, double epsilon,
                           uint64_t seed);
void ir_sampler_free(ir_sampler *s);

uint64_t ir_sampler_capacity(const ir_sampler *s);
unsigned ir_sampler_fanout(const ir_sampler *s);
/* 1 if this sampler runs the AVX2 kernels (chosen at construction by CPU and
 * IR_SUMTREE_NO_AVX2), 0 for the portable ones. */
int ir_sampler_uses_avx2(const ir_sampler *s);
double ir_sampler_alpha(const ir_sampler *s);
double ir_sampler_epsilon(const ir_sampler *s);
void ir_sampler_seed(ir_sampler *s, uint64_t seed);

/* Set raw priorities (|TD error|) of n slots; each is stored as
 * (p + epsilon)^alpha. All n values are checked first: if any is negative,
 * NaN or infinite, or any slot >= capacity, nothing changes and IR_EINVAL
 * is returned. A slot may appear more than once; the last value wins. */
int ir_sampler_update(ir_sampler *s, const uint64_t *slots, const double *raw, size_t n);
/* 1 if ir_sampler_update would accept this raw priority: finite, >= 0, and
 * (raw + epsilon)^alpha small enough that no sum in the tree can overflow. */
int ir_sampler_valid(const ir_sampler *s, double raw);
/* Same, with float32 raw priorities (the REPLAY.UPDATE wire format). */
int ir_sampler_update_f32(ir_sampler *s, const uint64_t *slots, const float *raw, size_t n);
/* Set already-transformed (stored) priorities, e.g. the current maximum. */
int ir_sampler_set_stored(ir_sampler *s, const uint64_t *slots, const double *stored, size_t n);
/* Mark n slots empty (stored priority 0, excluded from the minimum). */
int ir_sampler_clear(ir_sampler *s, const uint64_t *slots, size_t n);

/* Stored priority of one slot (0 if empty). */
double ir_sampler_get(const ir_sampler *s, uint64_t slot);
/* Sum of stored priorities (the root). */
double ir_sampler_total(const ir_sampler *s);
/* Smallest positive stored priority, +inf when there is none. */
double ir_sampler_min(const ir_sampler *s);
/* Largest stored priority ever set (never decreases; 1.0 before any set):
 * the priority REPLAY.ADD ... MAX gives a new item. */
double ir_sampler_max(const ir_sampler *s);

/* Draw n slots, stratified: the total mass is split into n equal strata and
 * one point is drawn uniformly in each. Slots with stored priority 0 are never
 * drawn. If the total is 0, slots are drawn uniformly from the live window
 * [first, first + live) modulo capacity. weights (may be NULL) receive the
 * importance weights w_i = (N * P(i))^-beta / max_j w_j over the whole table,
 * i.e. (min_p / p_i)^beta, so the largest possible weight is 1. Output
 * order follows the strata (ascending cumulative mass).
 * Returns IR_EEMPTY if live == 0, IR_EINVAL for bad arguments. */
int ir_sampler_sample(ir_sampler *s, size_t n, double beta, uint64_t first, uint64_t live,
                      uint64_t *slots, float *weights);

/* Lower-level: the same descent with caller-supplied points u[i] in [0,1)
 * (stratum i gets (i + u[i]) * total / n). For tests and benchmarks. */
int ir_sampler_sample_at(const ir_sampler *s, size_t n, const double *u, uint64_t *slots);

/* Recompute every inner node from the leaves; returns the largest absolute
 * difference found at the root (0 when the tree was exact). */
double ir_sampler_rebuild(ir_sampler *s);

/* ---- the daemon -------------------------------------------------------- */

/* The server's settings. Defaults, bounds and Redis names are those of the
 * parameter table in fstack_redis/config.c (ir_config_init applies it; CONFIG
 * GET/SET and pyctl read it): the comments here say what a field means, not
 * its default. */
typedef struct ir_config {
    const char *stack;                  /* "kernel" or "dpdk" */
    const char *bind;                   /* listen address (bind) */
    int port;                           /* listen port (port); 0 = any */
    uint64_t proto_max_bulk_len;        /* largest bulk string (proto-max-bulk-len) */
    uint64_t client_query_buffer_limit; /* per-client unparsed input */
    int maxclients;                     /* connections beyond get an error */
    int tcp_backlog;                    /* listen() backlog */
    unsigned fanout;                    /* sum tree K, 0 = default */
    uint64_t seed;                      /* sampler RNG seed, 0 = from the clock */
    uint64_t default_maxbytes; /* arena size for tables created without MAXBYTES (maxbytes) */
    /* a table created at start-up, or NULL */
    const char *table;
    uint64_t table_capacity;
    double table_alpha, table_beta, table_epsilon;
    uint64_t table_maxbytes;
    /* its rate limiter (REPLAY.CREATE's MIN_SIZE, SAMPLES_PER_INSERT,
     * ERROR_BUFFER; 0 = none, error buffer 0 = max(1, rate)) */
    uint64_t table_min_size;
    double table_samples_per_insert, table_error_buffer;
    int verbose; /* log connections to stderr */
    /* security and limits (Redis's names) */
    const char *requirepass;   /* NULL/"" = no password: protected mode applies */
    const char *client_subnet; /* "A.B.C.D/NN" also allowed without a password, or NULL */
    /* protected mode (Redis's): while the default user needs no password, only
     * local clients (kernel stack: loopback, the Unix socket) and client_subnet
     * may connect; a DPDK port has no loopback, so there only client_subnet.
     * 0 = every client (--protected-mode no) */
    int protected_mode;
    const char *aclfile; /* ACL users loaded at start, ACL SAVE/LOAD's file, or NULL */
    /* who may run DEBUG / CONFIG SET the protected configs (dir): "no" (Redis 7's
     * default), "yes", or "local" (loopback clients of the kernel stack) */
    const char *enable_debug_command;
    const char *enable_protected_configs;
    uint64_t maxmemory;                  /* bytes, 0 = no limit; writes beyond get -OOM */
    uint64_t client_output_buffer_limit; /* bytes pending for one client, 0 = no limit */
    int timeout;                         /* close clients idle this many seconds, 0 = never */
    int request_timeout_ms; /* a started request must complete within this, 0 = never */
    int tcp_keepalive;      /* seconds, 0 = off */
    /* snapshots */
    const char *dir;     /* where SAVE/BGSAVE write snapshots; must exist and be
                                   writable (else IR_ECONFIG at start) */
    const char *restore; /* load the newest complete snapshot in this directory at start, or NULL;
                                   none there: refuse to start (IR_ECONFIG) */
    int restore_if_present; /* with restore: start empty when it holds no snapshot (a corrupt one
                                   still refuses) */
    int save_on_shutdown;   /* SAVE before exiting on SIGTERM/SIGINT/SHUTDOWN; failing, ir_run
                                   returns an error after a signal, SHUTDOWN answers one */
    /* DPDK stack: EAL arguments as one string, ip/prefix */
    const char *eal_args;
    const char *ip;
    int dpdk_port;       /* ethdev port id, -1 = the first available */
    unsigned dpdk_mbufs; /* mbuf pool size, 0 = sized from maxclients */
    int busy_poll;       /* dpdk: never nap; kernel: poll under load (daemon/daemon.c) */
    int mtu;             /* dpdk: IP MTU of the port (IR_MTU_*), 0 = the interface's */
    /* a replay group of shards (REPLAY.SHARDS): every member's "host:port",
     * comma-separated in shard order, and this server's place in it */
    const char *shard_group; /* NULL or "" = a standalone server (one shard) */
    int shard_index;         /* 0 .. shards - 1 */
    int databases;           /* numbered databases (SELECT 0..N-1) */
    /* the append-only file (Redis 7.0's multi-part AOF in <dir>/<appenddirname>) */
    int appendonly;             /* on at start: loaded if there, else created */
    const char *appendfilename; /* the files' name prefix (appendonly.aof) */
    const char *appenddirname;  /* its directory under dir (appendonlydir) */
    /* a Unix domain socket served beside the TCP port (either stack) */
    const char *unixsocket;  /* its path, or NULL/"" = none */
    unsigned unixsocketperm; /* the socket file's mode (chmod), 0 = as the umask leaves it */
    /* the same-host transport (shared-memory rings, both stacks) */
    const char *shm_socket;  /* its set-up socket's path, or NULL/"" = none */
    unsigned shm_socketperm; /* that file's mode, 0 = as the umask leaves it */
    uint64_t shm_ring_size;  /* bytes per ring (request, reply), a power of two */
} ir_config;

/* The IP MTU range of the DPDK port (ir_config.mtu) and of the test veth
 * (pyctl netns): IPv4's minimum, and the largest frame the af_packet ring
 * frames, the mbufs and lwIP's MSS are sized for (dpdk.c, lwipopts.h). */
#define IR_MTU_MIN 576
#define IR_MTU_MAX 9600

/* Ids of shard k's tables start at k << IR_SHARD_ID_BITS, so that an id names
 * its shard and ids are unique across a group (2^48 ids per shard). */
#define IR_SHARD_ID_BITS 48
#define IR_MAX_SHARDS 1024

typedef struct ir_stats {
    int running;
    int port; /* the port actually bound */
    uint64_t uptime_ms;
    uint64_t connected_clients;
    uint64_t total_connections;
    uint64_t total_commands;
    uint64_t keys;
    uint64_t tables;
    uint64_t used_memory;
    uint64_t commands_per_sec; /* over the last second */
    /* time spent, in CPU cycles (see ir_cycles in server.h): handling input
     * (irs_data: parse, execute, reply), executing commands, flushing replies */
    uint64_t cycles_input, cycles_execute, cycles_reply;
} ir_stats;

typedef struct ir_table_stats {
    char name[64];
    uint64_t size, capacity, inserts, samples, updates, stale_updates, bytes_used;
} ir_table_stats;

/* Fill cfg with defaults: those of the parameter table (fstack_redis/config.c),
 * the one place that lists the server's parameters. */
void ir_config_init(ir_config *cfg);
/* That table as a JSON array (static, built on first call), one object per
 * parameter: name, alias, type (bool int memory enum string double special),
 * default (as CONFIG SET takes it), min, max, values (enum), field (the
 * ir_config member it sets, or null), mutable, hidden, sensitive, noop
 * (stored only), fixed (only the current value accepted), octal (an int
 * written in base 8, as unixsocketperm), doc. pyctl takes
 * its defaults and bounds from here. */
const char *ir_config_params_json(void);
/* Run the server on the calling thread until SHUTDOWN or ir_stop().
 * Returns IR_OK after a clean stop, or an error code (ir_last_error says
 * why). Only one server per process. The library installs no signal
 * handlers: signals belong to the host, whose SIGINT/SIGTERM handler calls
 * ir_stop() (pyctl's main thread does). */
int ir_run(const ir_config *cfg);
/* Ask the server to stop as a signal would (saving first with
 * save_on_shutdown; SHUTDOWN ABORT may still cancel it). Async-signal-safe
 * and callable from any thread; a request made before ir_run's loop starts
 * stops it at once. Each request stops one run; one made while a run
 * shuts down is dropped with it. */
void ir_stop(void);
/* Snapshot of counters; safe from any thread while ir_run runs. */
void ir_get_stats(ir_stats *out);
/* Up to max tables' counters (refreshed every 100 ms); returns how many. Any thread. */
int ir_get_table_stats(ir_table_stats *out, int max);
/* Library version string. */
const char *ir_version(void);
/* The network stacks compiled into this library, space-separated: "kernel" or
 * "kernel dpdk" (DPDK + lwIP are built in when their development files are found). */
const char *ir_stacks(void);

/* The client's side of the same-host transport (shm-socket; dataplane/shm.c):
 * RESP bytes through shared-memory rings instead of a socket. One thread at
 * a time per connection. */
typedef struct ir_shm_client ir_shm_client;
/* Connect to the server's shm socket at path; run_id receives the server's
 * run_id (INFO server), so a caller can check it reached the server it
 * meant. IR_OK and *out, or IR_ENET/IR_ENOMEM/IR_EINVAL (ir_last_error). */
int ir_shm_connect(const char *path, ir_shm_client **out, char *run_id, size_t run_id_len);
/* Write every byte of the buffers (waiting for room up to timeout_ms, -1 =
 * forever): the total, -1 the server has gone, -2 timed out. */
long ir_shm_writev(ir_shm_client *c, const void *const *bufs, const size_t *lens, int n,
                   long timeout_ms);
long ir_shm_write(ir_shm_client *c, const void *buf, size_t len, long timeout_ms);
/* Read up to len reply bytes, waiting up to timeout_ms (-1 = forever) for the
 * first: how many (> 0), 0 the server closed the connection and everything it
 * sent has been read, -1 an error, -2 timed out. */
long ir_shm_read(ir_shm_client *c, void *buf, size_t len, long timeout_ms);
/* Read one line of reply (up to and including CRLF, never past it) into buf:
 * its length, 0 the server has gone, -1 an error, -2 timed out; cap bytes
 * without CRLF return cap. */
long ir_shm_read_line(ir_shm_client *c, char *buf, size_t cap, long timeout_ms);
/* The next len reply bytes where they lie in the ring (*out), waiting for all
 * of them: they stay the caller's (the server does not write over them) until
 * ir_shm_release or the next request on the connection, which give back every
 * such run. len, 0 the server has gone, -1 an error, -2 timed out, -3 len
 * cannot fit in the ring beside what is held (read it with ir_shm_read). */
long ir_shm_peek(ir_shm_client *c, size_t len, long timeout_ms, const void **out);
void ir_shm_release(ir_shm_client *c);
/* The mapping lives while references do: the connection holds one (dropped
 * by ir_shm_close), each view of its memory should hold another. */
void ir_shm_ref(ir_shm_client *c);
void ir_shm_unref(ir_shm_client *c);
/* Reply bytes that can be read now without waiting. */
size_t ir_shm_pending(ir_shm_client *c);
/* Spin this long on the ring before sleeping (default 20 us; 0 = sleep at once). */
void ir_shm_set_spin(ir_shm_client *c, long spin_us);
uint64_t ir_shm_ring_size(const ir_shm_client *c);
/* The set-up socket (readable or hung up once the server has gone). */
int ir_shm_fileno(const ir_shm_client *c);
/* An fd that poll(2) finds readable when reply bytes are there or the server
 * has gone (for select/poll loops: pub/sub with a timeout); until the next
 * read or write, the server writes an eventfd for every reply it adds. */
int ir_shm_poll_fd(ir_shm_client *c);
/* The server's process id (SO_PEERCRED), -1 if it cannot be told. */
long ir_shm_peer_pid(const ir_shm_client *c);
void ir_shm_close(ir_shm_client *c);

/* CFFI-END */

#define IR_DEFAULT_FANOUT 8

#ifdef __cplusplus
}
#endif
#endif /* INREPLAY_H */
