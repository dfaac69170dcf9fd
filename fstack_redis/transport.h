/* transport.h - the narrow interface between the RESP server and a network stack.
 *
 * A transport owns the sockets (kernel epoll in dataplane/kernel.c, lwIP PCBs
 * on DPDK in dataplane/lwip_glue.c); the server owns clients, parsing,
 * commands and replies. The shape is an event loop's (accept / read / writev /
 * close plus a poll step), so another stack plugs in without touching command
 * code.
 *
 * Concurrency contract: a transport and the server it drives run on one thread
 * (one lcore). Every upcall (irs_*) happens from inside ops->poll() on that
 * thread (with poll_reentrant, possibly a poll nested in an upcall). The
 * server calls ops->writev / want_writable / close only from inside an upcall
 * or between polls on the same thread. After ops->close(c) the
 * transport makes no further upcall for c; after irs_closed(cl) the server
 * makes no further call with cl's connection.
 */
#ifndef IR_TRANSPORT_H
#define IR_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "inreplay.h"

typedef struct ir_conn ir_conn; /* opaque, transport-owned */
typedef struct ir_transport ir_transport;
struct ir_server;
struct client;

typedef struct ir_transport_ops {
    const char *name; /* "kernel", "dpdk" ... */
    /* One event step: wait at most timeout_us (0 = look once, never wait)
     * for network events and deliver them as upcalls. A transport that can
     * sleep until an event arrives (can_wait) does so; one that cannot
     * polls once and, if it found nothing, naps for timeout_us (capped by the
     * transport). Returns the number of events handled (0 = none), or -1 on
     * a fatal error. How long to wait is the daemon's idle rule
     * (daemon/daemon.c). */
    int (*poll)(ir_transport *t, long timeout_us);
    /* Take as many of the bytes as the stack accepts now, without blocking.
     * Returns the number taken (possibly 0), or -1 if the connection is dead
     * (the transport will report irs_closed). */
    ssize_t (*writev)(ir_transport *t, ir_conn *c, const struct iovec *iov, int iovcnt);
    /* Ask for (on != 0) or stop (on == 0) irs_writable upcalls. */
    void (*want_writable)(ir_transport *t, ir_conn *c, int on);
    /* Stop (on == 0) or resume (on != 0) delivering input for c. */
    void (*want_readable)(ir_transport *t, ir_conn *c, int on);
    /* Close c now; bytes already taken by writev are still delivered. */
    void (*close)(ir_transport *t, ir_conn *c);
    /* "ip:port" of the peer, for CLIENT LIST and logs. */
    void (*peername)(ir_transport *t, ir_conn *c, char *buf, size_t len);
    /* "ip:port" of our end of c (CLIENT LIST laddr=). A Unix-socket
     * connection's ends are both "path:0", as Redis shows them. */
    void (*sockname)(ir_transport *t, ir_conn *c, char *buf, size_t len);
    /* Optional: 1 if c came in over the Unix socket (local: protected mode
     * lets it in, CLIENT LIST flags U), else 0. NULL: never. */
    int (*is_unix)(ir_transport *t, ir_conn *c);
    /* Optional: also end a wait in poll() when fd becomes readable (the
     * same-host transport's doorbell and listening socket, shm.c); nothing
     * is delivered for it. 0, or -1 if this stack cannot watch fds. */
    int (*watch_fd)(ir_transport *t, int fd);
    /* Would listening on `port` (on the address we listen on) fail because
     * something holds it? 1 yes, 0 no (CONFIG SET port answers as Redis). */
    int (*port_in_use)(ir_transport *t, int port);
    /* Release everything (listening socket, connections). */
    void (*destroy)(ir_transport *t);
} ir_transport_ops;

struct ir_transport {
    const ir_transport_ops *ops;
    struct ir_server *srv;
    int bound_port; /* the port actually listened on */
    int polling;    /* a poll-mode stack: polls by default (DPDK) */
    int can_wait;   /* poll() can sleep until an event arrives */
    /* poll(t, 0) may be called from inside an upcall (one level deep): a
     * script running past busy-reply-threshold serves the other clients that
     * way, with BUSY replies (script.c). A stack that cannot (lwIP) leaves 0:
     * such a script is stopped at the threshold instead. */
    int poll_reentrant;
    /* The bytes irs_data did not take stay where they lie and are delivered again,
     * from the first one not taken, once input for the connection is wanted
     * (want_readable(c, 1)): the same-host rings, whose bytes are the client's
     * until the server moves the ring's tail. A stack that reuses its buffer (a
     * socket read, an mbuf) leaves 0, and the server then takes every byte. */
    int keeps_input;
    const char *build; /* one line for INFO/pyctl: what this stack is */
};

/* Upcalls the server implements. */
/* The keepalive interval for a new connection, in seconds (0 = off): the
 * server's tcp-keepalive, which CONFIG SET changes while the stack runs. */
int irs_tcp_keepalive(const struct ir_server *s);
/* A new connection: returns the client, or NULL to refuse (the transport closes c). */
struct client *irs_accept(struct ir_server *s, ir_transport *t, ir_conn *c);
/* Bytes arrived for cl. Returns how many of them the server took: all of them,
 * unless the transport keeps_input, where the server may leave the rest of a read
 * behind a blocked command in place (its bodies read by reference stay valid) and
 * stop input until the command is done. */
size_t irs_data(struct client *cl, const char *buf, size_t len);
/* cl can take more output. */
void irs_writable(struct client *cl);
/* The peer closed or the connection failed: the server frees cl. */
void irs_closed(struct client *cl);

/* What the server gives every stack besides the upcalls: its log (stderr
 * with a timestamp, as Redis's serverLog) and the error a failed constructor
 * leaves for ir_last_error (with the errno behind it for ir_last_errno). */
void serverLog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ir_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ir_set_error_errno(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The daemon's counters, for a stack that serves telemetry of its own (the
 * DPDK stack's /inreplay/stats and /inreplay/tables beside its port
 * counters). The daemon hands its functions to the stack when it creates it;
 * they are ir_get_stats and ir_get_table_stats's, safe from any thread, so a
 * stack never calls up into the daemon by name. */
typedef struct ir_stats_source {
    void (*stats)(ir_stats *out);
    int (*tables)(ir_table_stats *out, int max); /* returns how many it wrote */
} ir_stats_source;

/* Backends (dataplane/), created by the daemon (daemon/daemon.c). Each
 * returns NULL and sets ir_last_error on failure. */
/* busy_poll: connections ask the kernel to busy-poll their queue
 * (SO_BUSY_POLL, SO_PREFER_BUSY_POLL) where it allows. unixsocket (NULL or
 * "" = none): also listen on that Unix socket path in the same loop, as Redis
 * does (a stale file there is unlinked first; unixperm != 0 is chmod-ed onto
 * it; destroy removes it). */
ir_transport *ir_kernel_transport_new(struct ir_server *s, const char *bind, int port, int backlog,
                                      int busy_poll, const char *unixsocket, unsigned unixperm);
/* With bind NULL the kernel transport serves only the Unix socket: the DPDK
 * stack's run loop polls it beside its port (stock clients on the machine),
 * watching this fd (its epoll set) while it sleeps. */
int ir_kernel_transport_fd(ir_transport *t);

/* The same-host transport (dataplane/shm.c): RESP through shared-memory
 * rings, set up over the Unix socket at path (perm as unixsocketperm), each
 * ring ring_size bytes (a power of two); run_id is the server's (INFO
 * server), told to each client in its hello so that it knows whom it reached.
 * Its poll never waits; the run loop polls it beside the network transport,
 * which watches its two fds (ir_shm_wait_fds) and sleeps only after
 * ir_shm_arm said nothing is pending (then ir_shm_disarm, whatever arm
 * said). */
ir_transport *ir_shm_transport_new(struct ir_server *s, const char *path, unsigned perm,
                                   uint64_t ring_size, const char *run_id);
int ir_shm_arm(ir_transport *shm); /* 1: work is pending, do not sleep */
void ir_shm_disarm(ir_transport *shm);
int ir_shm_wait_fds(ir_transport *shm, int fds[2]); /* the fds to watch; returns 2 */

/* The kernel-bypass stack (dataplane/dpdk.c: DPDK poll-mode drivers + lwIP),
 * only in builds with IR_HAVE_DPDK; its options are cfg's (eal_args, ip,
 * port, mtu, dpdk_port, dpdk_mbufs; dataplane/dpdk.h says what each means).
 * stats (NULL = none) feeds its telemetry. On failure ir_last_error names the
 * failing call in rte_exit's style ("rte_eth_dev_configure: err=-22, port=0")
 * and ir_dpdk_last_code() gives the IR_* code. */
ir_transport *ir_dpdk_transport_new(struct ir_server *s, const ir_config *cfg,
                                    const ir_stats_source *stats);
int ir_dpdk_last_code(void); /* of the last failure on this thread */

#endif /* IR_TRANSPORT_H */
