/* shm.c - the same-host transport: RESP through shared-memory rings.
 *
 * A client on the appliance's own machine pays, on loopback TCP, two trips
 * through the kernel's TCP/IP stack per request and a system call for every
 * read and write on both sides; at 28 KB items that was most of a learner's
 * time (cpprb's in-process buffer sampled 3x and inserted 17-20x faster).
 * Here the bytes go through a segment both processes map (shm_ring.h): the
 * client writes its request into the request ring and the server hands the
 * bytes straight from there to the parser. The server maps its request ring
 * twice, back to back, so whatever the ring holds is one run of memory even
 * where it wraps around the ring's end: everything a client has written goes
 * to the parser in one piece each poll, and a batch's big body is read where
 * it lies (by reference, resp.c) instead of being cut at the ring's end and
 * copied. A client can have at most a ring's worth pending, so one poll's
 * delivery per client is bounded by its ring. The server writes its reply into
 * the reply ring, which the client reads. While both sides are busy no
 * system call is made at all; a side that goes to sleep says so in the
 * header, and only then does the other write its eventfd.
 *
 * Set-up is a Unix socket (shm-socket): the server accepts, makes the
 * segment (a sealed memfd: the client can neither shrink it under the
 * server nor grow it), and sends it with SCM_RIGHTS together with the
 * eventfds and its run_id. The socket then stays open and carries nothing:
 * its hang-up is how each side learns the other has gone. Who may connect is
 * the socket file's mode (shm-socketperm), as for unixsocket; a connection
 * is local for protected mode, as a Unix-socket one is. After that it is an
 * ordinary client: AUTH, ACLs, every command unchanged.
 *
 * This transport never waits: the run loop polls it beside the network
 * transport (kernel epoll or DPDK) and, before that one sleeps, arms it
 * (ir_shm_arm): every connection's srv_waiting flag is raised and the rings
 * looked at once more; the doorbell eventfd and the listening socket are in
 * the network transport's wait set (watch_fd), so a request or a new client
 * ends the sleep on either stack. Hang-ups and new clients are looked for
 * at least every SLOW_PATH_US while the loop is busy.
 *
 * Measured (bench/latency.py, bench/peers.py; the README has the table):
 * see docs for the run of the committed code.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"
#include "shm_ring.h"

#define SLOW_PATH_US 1000 /* accept and hang-up checks at least this often */
/* A reply is published (head stored, a sleeping client woken) every this many bytes
 * while it is written, not only at its end: a client reading a 14.5 MB sample into
 * its own array (sample(out=)) then copies on its core while the server still writes
 * on its own, instead of one copy after the other. */
#define REPLY_PUBLISH_BYTES (256u << 10)
#define ACCEPT_BACKLOG 128

struct ir_conn {
    int fd;      /* the Unix socket: carries nothing after the hello; its hang-up ends us */
    int cli_efd; /* the client's eventfd: written when it sleeps */
    ir_shm_header *h;
    char *req; /* the request ring, mapped twice in a row (connMap) */
    char *rep;
    uint64_t req_size, rep_size; /* private: never read back from the segment */
    uint64_t req_tail, rep_head, rep_tail;
    size_t map_len; /* the whole mapping: header, request ring twice, reply ring */
    int readable, want_w;
    int busy;   /* its bytes are being delivered (a nested poll skips it) */
    int failed; /* hung up or broke the ring's rules: reported by the next poll */
    int closed;
    struct client *cl;
    struct ir_conn *next, *prev; /* live list */
    struct ir_conn *next_dead;
};

typedef struct shm_transport {
    ir_transport base;
    int lfd;
    int doorbell;
    char *path;
    uint64_t ring_size;
    char run_id[48]; /* the server's, for each client's hello */
    ir_conn *conns;
    ir_conn *dead;
    int depth;
    uint64_t last_slow_us;
    unsigned polls;
    struct pollfd *pfds;
    ir_conn **pconns;
    size_t pcap;
    size_t nconns;
} shm_transport;

static uint64_t nowUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void wake(int efd) {
    uint64_t one = 1;
    ssize_t r = write(efd, &one, sizeof(one)); /* EAGAIN: it is awake to come anyway */
    (void)r;
}

/* After moving a counter: wake the client if it sleeps (see shm_ring.h). */
static void wakeClient(ir_conn *c) {
    IR_SHM_FENCE();
    if (IR_SHM_LOAD(&c->h->cli_waiting)) wake(c->cli_efd);
}

static void connRelease(shm_transport *st, ir_conn *c) {
    if (c->closed) return;
    c->closed = 1;
    c->cl = NULL;
    close(c->fd); /* the client sees the hang-up after the bytes already in its ring */
    c->next_dead = st->dead;
    st->dead = c;
}

static void freeDead(shm_transport *st) {
    while (st->dead) {
        ir_conn *c = st->dead;
        st->dead = c->next_dead;
        if (c->prev) c->prev->next = c->next;
        else st->conns = c->next;
        if (c->next) c->next->prev = c->prev;
        st->nconns--;
        close(c->cli_efd);
        munmap(c->h, c->map_len);
        free(c);
    }
}

/* The connection broke the ring's rules or hung up: close it at the next
 * poll (an upcall may be running for it now). */
static void connFail(ir_conn *c, const char *why) {
    if (!c->failed && why) serverLog("shm client %d: %s; closing it", c->fd, why);
    c->failed = 1;
}

/* ---- set-up ---------------------------------------------------------------- */

static int sendHello(int fd, const ir_shm_hello *hello, const int *fds, int nfds) {
    struct iovec iov = {(void *)hello, sizeof(*hello)};
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
    }
    /* a new socket's buffer is empty: the hello always fits */
    return sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(*hello) ? 0 : -1;
}

static void refuseHello(int fd, const char *fmt, const char *what) {
    ir_shm_hello hello = {.magic = IR_SHM_MAGIC, .version = IR_SHM_VERSION, .status = -1};
    snprintf(hello.err, sizeof(hello.err), fmt, what);
    sendHello(fd, &hello, NULL, 0);
    close(fd);
}

/* Map the segment (header, request ring, reply ring) with the request ring twice,
 * back to back: header | request | request again | reply, in one reserved region of
 * len + rs bytes. Returns the region, or MAP_FAILED (errno set). */
static char *connMap(int mfd, uint64_t rs, size_t len) {
    size_t span = len + (size_t)rs;
    char *base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return MAP_FAILED;
    const struct {
        size_t at, len;
        off_t off;
    } parts[3] = {
        {0, (size_t)IR_SHM_REP_OFFSET(rs), 0}, /* the header and the request ring */
        {(size_t)IR_SHM_REP_OFFSET(rs), (size_t)rs, (off_t)IR_SHM_REQ_OFFSET}, /* again */
        {(size_t)IR_SHM_REP_OFFSET(rs) + (size_t)rs, (size_t)rs, (off_t)IR_SHM_REP_OFFSET(rs)},
    };
    for (int i = 0; i < 3; i++)
        if (mmap(base + parts[i].at, parts[i].len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                 mfd, parts[i].off) == MAP_FAILED) {
            int e = errno;
            munmap(base, span);
            errno = e;
            return MAP_FAILED;
        }
    return base;
}

static void connOpen(shm_transport *st, int fd) {
    uint64_t rs = st->ring_size;
    size_t len = (size_t)(IR_SHM_HEADER_BYTES + 2 * rs);
    int mfd = memfd_create("inreplay-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0) {
        refuseHello(fd, "the server cannot make a shared segment: %s", strerror(errno));
        return;
    }
    if (ftruncate(mfd, (off_t)len) != 0 ||
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int e = errno;
        close(mfd);
        refuseHello(fd, "the server cannot size its shared segment: %s", strerror(e));
        return;
    }
    size_t span = len + (size_t)rs;
    char *map = connMap(mfd, rs, len);
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ir_conn *c = calloc(1, sizeof(*c));
    if (map == MAP_FAILED || efd < 0 || !c) {
        int e = map == MAP_FAILED || efd < 0 ? errno : ENOMEM;
        if (map != MAP_FAILED) munmap(map, span);
        if (efd >= 0) close(efd);
        free(c);
        close(mfd);
        refuseHello(fd, "the server cannot map a shared segment: %s", strerror(e));
        return;
    }
    c->fd = fd;
    c->cli_efd = efd;
    c->h = (ir_shm_header *)map;
    c->map_len = span;
    c->req_size = c->rep_size = rs;
    c->req = map + IR_SHM_REQ_OFFSET;
    c->rep = map + IR_SHM_REP_OFFSET(rs) + rs;
    c->readable = 1;
    c->h->magic = IR_SHM_MAGIC;
    c->h->version = IR_SHM_VERSION;
    c->h->req_size = c->h->rep_size = rs;

    ir_shm_hello hello = {
        .magic = IR_SHM_MAGIC, .version = IR_SHM_VERSION, .req_size = rs, .rep_size = rs};
    snprintf(hello.run_id, sizeof(hello.run_id), "%s", st->run_id);
    int fds[3] = {mfd, st->doorbell, efd};
    int sent = sendHello(fd, &hello, fds, 3);
    close(mfd); /* the mapping holds the segment */
    if (sent != 0) {
        close(efd);
        munmap(map, span);
        free(c);
        close(fd);
        return;
    }
    c->next = st->conns;
    if (st->conns) st->conns->prev = c;
    st->conns = c;
    st->nconns++;
    c->cl = irs_accept(st->base.srv, &st->base, c);
    if (!c->cl) connRelease(st, c);
}

static int acceptErrorIsPerConnection(int e) {
    return e == EINTR || e == ECONNABORTED || e == EPROTO;
}

static void acceptAll(shm_transport *st) {
    for (int skipped = 0;;) {
        int fd = accept4(st->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (acceptErrorIsPerConnection(errno) && ++skipped < 1000) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                serverLog("shm accept: %s", strerror(errno));
            return;
        }
        connOpen(st, fd);
    }
}

/* One poll(2) over every connection's socket: a client that went away
 * (exited, killed, closed) shows as a hang-up or end of file. */
static void checkHangups(shm_transport *st) {
    if (!st->nconns) return;
    if (st->nconns > st->pcap) {
        size_t cap = st->nconns * 2;
        struct pollfd *p = realloc(st->pfds, cap * sizeof(*p));
        if (p) st->pfds = p;
        ir_conn **pc = realloc(st->pconns, cap * sizeof(*pc));
        if (pc) st->pconns = pc;
        if (!p || !pc) return;
        st->pcap = cap;
    }
    size_t n = 0;
    for (ir_conn *c = st->conns; c; c = c->next) {
        if (c->closed || c->failed) continue;
        st->pfds[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        st->pconns[n++] = c;
    }
    if (!n || poll(st->pfds, n, 0) <= 0) return;
    for (size_t i = 0; i < n; i++)
        if (st->pfds[i].revents)
            connFail(st->pconns[i], NULL); /* it sends nothing: any event is its end */
}

static void slowPath(shm_transport *st) {
    st->last_slow_us = nowUs();
    acceptAll(st);
    checkHangups(st);
}

/* ---- the ops ------------------------------------------------------------------ */

/* Hand the connection's pending request bytes to the parser, straight from the
 * ring and in one piece: the ring is mapped twice in a row, so the run from the
 * tail is contiguous however it wraps, and it is at most a ring long. */
static int deliver(shm_transport *st, ir_conn *c) {
    uint64_t head = IR_SHM_LOAD(&c->h->req_head);
    uint64_t avail = head - c->req_tail;
    if (!avail) return 0;
    if (avail > c->req_size) {
        connFail(c, "request ring head out of range");
        return 1;
    }
    c->busy = 1;
    /* the parser takes all of it (parsed, or copied what waits), or leaves what a
     * blocked command still reads in place: the tail moves past what it took */
    c->req_tail += irs_data(c->cl, c->req + (c->req_tail & (c->req_size - 1)), (size_t)avail);
    c->busy = 0;
    IR_SHM_STORE(&c->h->req_tail, c->req_tail);
    wakeClient(c); /* it may wait for room to write more */
    (void)st;
    return 1;
}

static uint64_t replyRoom(ir_conn *c) {
    uint64_t tail = IR_SHM_LOAD(&c->h->rep_tail);
    /* the client may only move its tail forward, and not past our head */
    if (tail - c->rep_tail > c->rep_head - c->rep_tail) {
        connFail(c, "reply ring tail out of range");
        return 0;
    }
    c->rep_tail = tail;
    return c->rep_size - (c->rep_head - tail);
}

static int shmPoll(ir_transport *t, long timeout_us) {
    shm_transport *st = (shm_transport *)t;
    (void)timeout_us; /* never waits: the network transport does (ir_shm_arm) */
    if (st->depth > 1) return 0;
    st->depth++;
    if ((++st->polls & 63) == 0 && nowUs() - st->last_slow_us >= SLOW_PATH_US) slowPath(st);
    int n = 0;
    for (ir_conn *c = st->conns; c; c = c->next) {
        if (c->closed || c->busy) continue;
        if (c->failed) {
            struct client *cl = c->cl;
            connRelease(st, c);
            irs_closed(cl);
            n++;
            continue;
        }
        if (c->readable) n += deliver(st, c);
        if (!c->closed && !c->failed && c->want_w && replyRoom(c)) {
            irs_writable(c->cl);
            n++;
        }
    }
    if (--st->depth == 0) freeDead(st);
    return n;
}

static ssize_t shmWritev(ir_transport *t, ir_conn *c, const struct iovec *iov, int iovcnt) {
    (void)t;
    if (c->closed || c->failed) return -1;
    uint64_t room = replyRoom(c);
    if (c->failed) return -1;
    uint64_t taken = 0, published = c->rep_head;
    for (int i = 0; i < iovcnt && room; i++) {
        const char *p = iov[i].iov_base;
        uint64_t len = iov[i].iov_len < room ? iov[i].iov_len : room;
        while (len) {
            uint64_t off = c->rep_head & (c->rep_size - 1);
            uint64_t n = c->rep_size - off < len ? c->rep_size - off : len;
            if (n > REPLY_PUBLISH_BYTES) n = REPLY_PUBLISH_BYTES;
            memcpy(c->rep + off, p, (size_t)n);
            c->rep_head += n;
            p += n;
            len -= n;
            room -= n;
            taken += n;
            if (c->rep_head - published >= REPLY_PUBLISH_BYTES) {
                published = c->rep_head;
                IR_SHM_STORE(&c->h->rep_head, published);
                wakeClient(c);
            }
        }
    }
    if (c->rep_head != published) {
        IR_SHM_STORE(&c->h->rep_head, c->rep_head);
        wakeClient(c);
    }
    return (ssize_t)taken;
}

static void shmWantWritable(ir_transport *t, ir_conn *c, int on) {
    (void)t;
    c->want_w = on;
}

static void shmWantReadable(ir_transport *t, ir_conn *c, int on) {
    (void)t;
    c->readable = on;
}

static void shmClose(ir_transport *t, ir_conn *c) {
    shm_transport *st = (shm_transport *)t;
    connRelease(st, c);
    if (!st->depth) freeDead(st);
}

static void shmAddr(ir_transport *t, ir_conn *c, char *buf, size_t len) {
    (void)c;
    snprintf(buf, len, "%s:0", ((shm_transport *)t)->path);
}

static int shmIsUnix(ir_transport *t, ir_conn *c) {
    (void)t;
    (void)c;
    return 1;
}

static void shmDestroy(ir_transport *t) {
    shm_transport *st = (shm_transport *)t;
    for (ir_conn *c = st->conns; c; c = c->next) connRelease(st, c);
    freeDead(st);
    if (st->lfd >= 0) {
        close(st->lfd);
        if (unlink(st->path) != 0 && errno != ENOENT)
            serverLog("Error removing the shm socket file: %s", strerror(errno));
    }
    if (st->doorbell >= 0) close(st->doorbell);
    free(st->pfds);
    free(st->pconns);
    free(st->path);
    free(st);
}

static const ir_transport_ops shm_ops = {
    .name = "shm",
    .poll = shmPoll,
    .writev = shmWritev,
    .want_writable = shmWantWritable,
    .want_readable = shmWantReadable,
    .close = shmClose,
    .peername = shmAddr,
    .sockname = shmAddr,
    .is_unix = shmIsUnix,
    .destroy = shmDestroy,
};

/* ---- the run loop's part -------------------------------------------------- */

int ir_shm_arm(ir_transport *t) {
    shm_transport *st = (shm_transport *)t;
    for (ir_conn *c = st->conns; c; c = c->next)
        if (!c->closed) IR_SHM_STORE(&c->h->srv_waiting, 1);
    IR_SHM_FENCE();
    for (ir_conn *c = st->conns; c; c = c->next) {
        if (c->closed) continue;
        if (c->failed) return 1;
        if (c->readable && IR_SHM_LOAD(&c->h->req_head) != c->req_tail) return 1;
        if (c->want_w && replyRoom(c)) return 1;
    }
    return 0;
}

void ir_shm_disarm(ir_transport *t) {
    shm_transport *st = (shm_transport *)t;
    for (ir_conn *c = st->conns; c; c = c->next)
        if (!c->closed) IR_SHM_STORE(&c->h->srv_waiting, 0);
    uint64_t v;
    ssize_t r = read(st->doorbell, &v, sizeof(v)); /* EAGAIN: nobody rang */
    (void)r;
    slowPath(st);
}

int ir_shm_wait_fds(ir_transport *t, int fds[2]) {
    shm_transport *st = (shm_transport *)t;
    fds[0] = st->doorbell;
    fds[1] = st->lfd;
    return 2;
}

ir_transport *ir_shm_transport_new(struct ir_server *s, const char *path, unsigned perm,
                                   uint64_t ring_size, const char *run_id) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) > sizeof(sa.sun_path) - 1) {
        ir_set_error("shm-socket %s: the path is too long (%zu), must be under %zu", path,
                     strlen(path), sizeof(sa.sun_path));
        return NULL;
    }
    if (ring_size < IR_SHM_RING_MIN || ring_size > IR_SHM_RING_MAX ||
        (ring_size & (ring_size - 1))) {
        ir_set_error("shm-ring-size must be a power of two from 64kb to 1gb, not %llu",
                     (unsigned long long)ring_size);
        return NULL;
    }
    shm_transport *st = calloc(1, sizeof(*st));
    if (!st) return NULL;
    st->base.ops = &shm_ops;
    st->base.srv = s;
    st->base.poll_reentrant = 1;
    st->base.build = "shared-memory rings (same host)";
    st->base.keeps_input = 1; /* the ring's bytes are the client's until the tail moves */
    st->ring_size = ring_size;
    snprintf(st->run_id, sizeof(st->run_id), "%s", run_id ? run_id : "");
    st->lfd = st->doorbell = -1;
    st->path = strdup(path);
    st->doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!st->path || st->doorbell < 0) {
        ir_set_error("shm-socket: %s", strerror(errno ? errno : ENOMEM));
        shmDestroy(&st->base);
        return NULL;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    unlink(path); /* a stale socket of an earlier run, as unixsocket */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        (perm && chmod(path, (mode_t)perm) != 0) || listen(fd, ACCEPT_BACKLOG) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        ir_set_error_errno(e, "Failed opening the shm socket %s: %s", path, strerror(e));
        shmDestroy(&st->base);
        return NULL;
    }
    st->lfd = fd;
    st->last_slow_us = nowUs();
    return &st->base;
}
