/* kernel.c - the kernel TCP transport: epoll, non-blocking sockets, TCP_NODELAY.
 *
 * With unixsocket set it listens on that Unix domain socket too, in the same
 * epoll set: a same-host client then skips the kernel's TCP/IP stack (two
 * trips through it per request on loopback). Its connections are the TCP
 * ones' in every way but the socket options and the addresses ("path:0").
 *
 * poll() waits in epoll_pwait2 for as long as the run loop's idle rule says
 * (daemon/daemon.c): by default the whole tick, so an idle server sleeps and each
 * request pays the kernel's wake-up of a sleeping thread (25-35 us on the
 * 2-core VM, most of stock Redis's cross-core GET latency). With busy_poll the
 * loop polls with a zero timeout while traffic flows, and the sockets ask the
 * kernel to busy-poll their device queue (SO_BUSY_POLL, SO_PREFER_BUSY_POLL;
 * without CAP_NET_ADMIN or on devices without NAPI ids, such as veth without
 * GRO, that part is a no-op and the zero-timeout loop is what remains).
 *
 * Level-triggered epoll; each readable connection is read until EAGAIN or
 * READS_PER_EVENT buffers, so one busy client cannot starve the others.
 * Connections closed during an event step are freed at its end, so an upcall
 * may close its own connection safely (see transport.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport.h"

#define READ_BUF (256 * 1024)
#define READS_PER_EVENT 16
#define MAX_EVENTS 128
#define BUSY_POLL_US 50 /* SO_BUSY_POLL: spin this long in the driver */
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69 /* Linux 5.11 */
#endif

struct ir_conn {
    int fd;
    unsigned events; /* current epoll interest */
    int closed;
    int unix_sock; /* accepted on the Unix socket */
    struct client *cl;
    struct ir_conn *next_dead;
};

typedef struct kernel_transport {
    ir_transport base;
    int epfd, lfd;
    char *rbuf;
    char *nested_rbuf; /* reads of a nested poll (see kernelPoll), made at its first */
    int depth;         /* kernelPoll calls in progress */
    ir_conn *dead;
    ir_conn listener; /* marker for the listening socket's events */
    int busy_poll;
    int ufd;           /* the Unix socket's listener, or -1 */
    ir_conn ulistener; /* marker for its events */
    ir_conn watched;   /* marker for watch_fd's fds: they only end a wait */
    char *unixsocket;  /* its path as configured (addresses show it), or NULL */
} kernel_transport;

static void connSetEvents(kernel_transport *k, ir_conn *c, unsigned events) {
    if (c->closed || c->events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(k->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

static void connRelease(kernel_transport *k, ir_conn *c) {
    if (c->closed) return;
    epoll_ctl(k->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->closed = 1;
    c->cl = NULL;
    c->next_dead = k->dead;
    k->dead = c;
}

static void freeDead(kernel_transport *k) {
    while (k->dead) {
        ir_conn *c = k->dead;
        k->dead = c->next_dead;
        free(c);
    }
}

/* Probe a silent peer after `interval` s, then every interval/3 s, three
 * times (as Redis's anetKeepAlive), so half-open connections are reclaimed. */
static void setKeepalive(int fd, int interval) {
    if (interval <= 0) return;
    int one = 1, idle = interval, intvl = interval / 3 ? interval / 3 : 1, cnt = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* Accept every pending connection of listener lfd (unix_sock: the Unix socket's). */
/* accept(2)'s errors that belong to the one connection it tried to take (Linux
 * passes pending network errors up through accept): the next one may be fine.
 * Giving up on them let one peer starve the others (CVE-2025-48367). */
static int acceptErrorIsPerConnection(int e) {
    return e == EINTR || e == ECONNABORTED || e == EPROTO || e == ENOPROTOOPT || e == ENETDOWN ||
           e == EHOSTDOWN || e == ENONET || e == EHOSTUNREACH || e == EOPNOTSUPP ||
           e == ENETUNREACH;
}

static void acceptAll(kernel_transport *k, int lfd, int unix_sock) {
    for (int skipped = 0;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* bounded, so a storm of them cannot hold the loop */
            if (acceptErrorIsPerConnection(errno) && ++skipped < 1000) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) serverLog("accept: %s", strerror(errno));
            return;
        }
        if (!unix_sock) { /* TCP's options; a Unix socket has no Nagle, keepalive or NAPI */
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            setKeepalive(fd, irs_tcp_keepalive(k->base.srv));
            if (k->busy_poll) { /* best effort: see the top of this file */
                int us = BUSY_POLL_US;
                setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us));
                setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one));
            }
        }
        ir_conn *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->unix_sock = unix_sock;
        c->events = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(k->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->cl = irs_accept(k->base.srv, &k->base, c);
        if (!c->cl) connRelease(k, c);
    }
}

static int kernelPollOnce(kernel_transport *k, long timeout_us);

static void connReadable(kernel_transport *k, ir_conn *c) {
    char *buf = k->depth > 1 ? k->nested_rbuf : k->rbuf;
    for (int i = 0; i < READS_PER_EVENT && !c->closed; i++) {
        ssize_t n = read(c->fd, buf, READ_BUF);
        if (n > 0) {
            irs_data(c->cl, buf, (size_t)n);
            if ((size_t)n < READ_BUF) return;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        /* EOF or error: the peer is gone */
        struct client *cl = c->cl;
        connRelease(k, c);
        irs_closed(cl);
        return;
    }
}

/* Re-entrant (poll_reentrant): a busy script polls from inside a command,
 * that is from inside an outer poll's upcall. The nested poll reads into its
 * own buffer (the outer one's bytes may still be in use) and connections
 * released meanwhile are freed only when the outermost poll ends (the outer
 * one still holds them in its event list). Deeper nesting does not happen:
 * the server answers BUSY to every command that could start a script. */
static int kernelPoll(ir_transport *t, long timeout_us) {
    kernel_transport *k = (kernel_transport *)t;
    if (k->depth && !k->nested_rbuf && !(k->nested_rbuf = malloc(READ_BUF))) return 0;
    if (k->depth > 1) return 0;
    k->depth++;
    int n = kernelPollOnce(k, timeout_us);
    if (--k->depth == 0) freeDead(k);
    return n;
}

static int kernelPollOnce(kernel_transport *k, long timeout_us) {
    struct epoll_event evs[MAX_EVENTS];
    struct timespec ts = {.tv_sec = timeout_us / 1000000, .tv_nsec = timeout_us % 1000000 * 1000};
    int n = epoll_pwait2(k->epfd, evs, MAX_EVENTS, &ts, NULL);
    if (n < 0 && errno == ENOSYS) /* kernels before 5.11, and valgrind: ms resolution */
        n = epoll_wait(k->epfd, evs, MAX_EVENTS, (int)((timeout_us + 999) / 1000));
    if (n < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) {
        ir_conn *c = evs[i].data.ptr;
        if (c == &k->watched) continue; /* whoever watches it looks (shm.c) */
        if (c == &k->listener || c == &k->ulistener) {
            acceptAll(k, c == &k->listener ? k->lfd : k->ufd, c == &k->ulistener);
            continue;
        }
        if (c->closed) continue;
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            if (c->events & EPOLLIN) connReadable(k, c);
            else if (evs[i].events & (EPOLLHUP | EPOLLERR)) {
                struct client *cl = c->cl;
                connRelease(k, c);
                irs_closed(cl);
            }
        }
        if (!c->closed && (evs[i].events & EPOLLOUT)) irs_writable(c->cl);
    }
    return n;
}

static ssize_t kernelWritev(ir_transport *t, ir_conn *c, const struct iovec *iov, int iovcnt) {
    (void)t;
    if (c->closed) return -1;
    if (iovcnt > IOV_MAX) iovcnt = IOV_MAX;
    /* sendmsg with MSG_NOSIGNAL: a peer gone away is an error here, never a
     * SIGPIPE for the host process (signals are the host's) */
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    for (;;) {
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
    }
}

static void kernelWantWritable(ir_transport *t, ir_conn *c, int on) {
    unsigned ev = on ? (c->events | EPOLLOUT) : (c->events & ~(unsigned)EPOLLOUT);
    connSetEvents((kernel_transport *)t, c, ev);
}

static void kernelWantReadable(ir_transport *t, ir_conn *c, int on) {
    unsigned ev = on ? (c->events | EPOLLIN) : (c->events & ~(unsigned)EPOLLIN);
    connSetEvents((kernel_transport *)t, c, ev);
}

static void kernelClose(ir_transport *t, ir_conn *c) { connRelease((kernel_transport *)t, c); }

/* "ip:port" of either end (peer != 0: the peer's); "path:0" for either end
 * of a Unix-socket connection, as Redis (its peers are unnamed). */
static void kernelAddr(kernel_transport *k, ir_conn *c, int peer, char *buf, size_t len) {
    if (c->unix_sock) {
        snprintf(buf, len, "%s:0", k->unixsocket);
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    ss.ss_family = AF_UNSPEC;
    int r = peer ? getpeername(c->fd, (struct sockaddr *)&ss, &sl)
                 : getsockname(c->fd, (struct sockaddr *)&ss, &sl);
    if (r == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(buf, len, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
}

static void kernelPeername(ir_transport *t, ir_conn *c, char *buf, size_t len) {
    kernelAddr((kernel_transport *)t, c, 1, buf, len);
}

static void kernelSockname(ir_transport *t, ir_conn *c, char *buf, size_t len) {
    kernelAddr((kernel_transport *)t, c, 0, buf, len);
}

static int kernelIsUnix(ir_transport *t, ir_conn *c) {
    (void)t;
    return c->unix_sock;
}

static int kernelPortInUse(ir_transport *t, int port) {
    kernel_transport *k = (kernel_transport *)t;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (k->lfd < 0 || getsockname(k->lfd, (struct sockaddr *)&ss, &sl) != 0) return 0;
    if (ss.ss_family == AF_INET) ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
    else if (ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
    else return 0;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int taken = bind(fd, (struct sockaddr *)&ss, sl) != 0 && errno == EADDRINUSE;
    close(fd);
    return taken;
}

static int kernelWatchFd(ir_transport *t, int fd) {
    kernel_transport *k = (kernel_transport *)t;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &k->watched};
    return epoll_ctl(k->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -1;
}

int ir_kernel_transport_fd(ir_transport *t) { return ((kernel_transport *)t)->epfd; }

static void kernelDestroy(ir_transport *t) {
    kernel_transport *k = (kernel_transport *)t;
    if (k->lfd >= 0) close(k->lfd);
    if (k->ufd >= 0) { /* ours: remove the file, as Redis at shutdown */
        close(k->ufd);
        serverLog("Removing the unix socket file.");
        if (unlink(k->unixsocket) != 0)
            serverLog("Error removing the unix socket file: %s", strerror(errno));
    }
    if (k->epfd >= 0) close(k->epfd);
    freeDead(k);
    free(k->unixsocket);
    free(k->rbuf);
    free(k->nested_rbuf);
    free(k);
}

static const ir_transport_ops kernel_ops = {
    .name = "kernel",
    .poll = kernelPoll,
    .writev = kernelWritev,
    .want_writable = kernelWantWritable,
    .want_readable = kernelWantReadable,
    .close = kernelClose,
    .peername = kernelPeername,
    .sockname = kernelSockname,
    .is_unix = kernelIsUnix,
    .watch_fd = kernelWatchFd,
    .port_in_use = kernelPortInUse,
    .destroy = kernelDestroy,
};

static int listenOn(const char *bind_addr, int port, int backlog, int *bound_port) {
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    int rc = getaddrinfo(bind_addr, portstr, &hints, &res);
    if (rc != 0) {
        ir_set_error("bad listen address '%s': %s", bind_addr, gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        ir_set_error_errno(err, "cannot listen on %s:%d: %s", bind_addr, port, strerror(err));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* Listen on the Unix socket path as Redis does: a file already there (a
 * stale socket of an earlier run) is unlinked first, perm (if not 0) is
 * chmod-ed onto the new one. */
static int listenUnix(const char *path, unsigned perm, int backlog) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) > sizeof(sa.sun_path) - 1) {
        ir_set_error("Failed opening Unix socket: unix socket path too long (%zu), must be under "
                     "%zu",
                     strlen(path), sizeof(sa.sun_path));
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    unlink(path); /* as Redis: whether it fails does not matter, bind says */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ir_set_error_errno(errno, "Failed opening Unix socket: %s", strerror(errno));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        (perm && chmod(path, (mode_t)perm) != 0) || listen(fd, backlog) != 0) {
        int err = errno;
        close(fd);
        ir_set_error_errno(err, "Failed opening Unix socket %s: %s", path, strerror(err));
        return -1;
    }
    return fd;
}

ir_transport *ir_kernel_transport_new(struct ir_server *s, const char *bind_addr, int port,
                                      int backlog, int busy_poll, const char *unixsocket,
                                      unsigned unixperm) {
    kernel_transport *k = calloc(1, sizeof(*k));
    if (!k) return NULL;
    k->base.ops = &kernel_ops;
    k->base.srv = s;
    k->base.can_wait = 1;
    k->base.poll_reentrant = 1;
    k->base.build =
        busy_poll ? "Linux TCP/IP; epoll; busy polling (SO_BUSY_POLL)" : "Linux TCP/IP; epoll";
    k->busy_poll = busy_poll;
    k->epfd = k->lfd = k->ufd = -1;
    k->rbuf = malloc(READ_BUF);
    /* bind_addr NULL: the Unix socket alone (served beside the DPDK stack) */
    k->lfd = bind_addr ? listenOn(bind_addr, port, backlog, &k->base.bound_port) : -1;
    if ((k->lfd >= 0 || !bind_addr) && unixsocket && unixsocket[0]) { /* after TCP, as Redis */
        k->unixsocket = strdup(unixsocket);
        if (k->unixsocket) k->ufd = listenUnix(unixsocket, unixperm, backlog);
        else ir_set_error("Failed opening Unix socket: out of memory");
    }
    k->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!k->rbuf || (bind_addr && k->lfd < 0) || k->epfd < 0 ||
        (unixsocket && unixsocket[0] && k->ufd < 0) || (!bind_addr && k->ufd < 0)) {
        if (k->epfd < 0 && k->lfd >= 0) ir_set_error("epoll_create1: %s", strerror(errno));
        kernelDestroy(&k->base);
        return NULL;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &k->listener};
    if (k->lfd >= 0) epoll_ctl(k->epfd, EPOLL_CTL_ADD, k->lfd, &ev);
    if (k->ufd >= 0) {
        struct epoll_event uev = {.events = EPOLLIN, .data.ptr = &k->ulistener};
        epoll_ctl(k->epfd, EPOLL_CTL_ADD, k->ufd, &uev);
    }
    return &k->base;
}
