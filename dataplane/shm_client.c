/* shm_client.c - the client's side of the same-host transport (shm.c).
 *
 * pyctl's ShmSocket (pyctl/_shm.py) calls these through cffi; they release
 * the GIL while they copy and wait. A connection is used by one thread at a
 * time (as a redis-py Connection is).
 *
 * Waiting: spin on the ring for spin_us (20 by default: the reply to a small
 * request from a polling server comes back in a few microseconds, well before a
 * sleeping process could be woken, 25-35 us on the 2-core VM; longer spins took
 * the core the server and the other processes needed there), then sleep in poll(2) on the client's eventfd
 * and the set-up socket, whose hang-up says the server has gone. Bytes the
 * server wrote before it went are still read first.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "inreplay.h"
#include "shm_ring.h"
#include "transport.h" /* ir_set_error: the library's one ir_last_error */

#define DEFAULT_SPIN_US 20

struct ir_shm_client {
    int fd, doorbell, efd;
    ir_shm_header *h;
    char *req, *rep;
    uint64_t req_size, rep_size;
    uint64_t req_head; /* ours, published after each move */
    uint64_t rep_read; /* reply bytes read (or leased: ir_shm_peek) */
    uint64_t rep_tail; /* reply bytes given back to the server: rep_read, or a lease's start */
    int leased;        /* bytes from rep_tail to rep_read are in a caller's views */
    size_t map_len;    /* the header and the request ring, mapped once */
    char *rep_map;     /* the reply ring, mapped twice in a row: any run of it is contiguous */
    int refs;          /* the connection, plus one per live view (ir_shm_ref) */
    uint64_t want;     /* ir_shm_peek: bytes it waits for; ir_shm_writev: room it waits for */
    long spin_us;
    int gone;       /* the server hung up */
    int epfd;       /* the eventfd and the socket, for callers that poll (ir_shm_poll_fd) */
    int idle_armed; /* cli_waiting left raised between calls for a poller */
    int poll_mode;  /* someone polls epfd: re-arm after every call (ir_shm_poll_fd) */
};

static uint64_t nowUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int isPow2(uint64_t x) { return x && !(x & (x - 1)); }

int ir_shm_connect(const char *path, ir_shm_client **out, char *run_id, size_t run_id_len) {
    *out = NULL;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) > sizeof(sa.sun_path) - 1) {
        ir_set_error("shm socket path too long: %s", path);
        return IR_EINVAL;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        ir_set_error_errno(e, "cannot connect to the shm socket %s: %s", path, strerror(e));
        return IR_ENET;
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ir_shm_hello hello;
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {&hello, sizeof(hello)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n;
    do n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    while (n < 0 && errno == EINTR);
    int fds[3] = {-1, -1, -1};
    int nfds = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            if (nfds > 3) nfds = 3;
            memcpy(fds, CMSG_DATA(cm), (size_t)nfds * sizeof(int));
        }
    int rc = IR_ENET;
    if (n != (ssize_t)sizeof(hello) || hello.magic != IR_SHM_MAGIC) {
        ir_set_error("%s did not answer as an inreplay shm socket%s", path,
                     n < 0 ? " (timed out)" : "");
        goto fail;
    }
    if (hello.version != IR_SHM_VERSION) {
        ir_set_error("%s speaks shm version %u, this client %u: use the same inreplay release",
                     path, hello.version, IR_SHM_VERSION);
        goto fail;
    }
    hello.err[sizeof(hello.err) - 1] = '\0';
    hello.run_id[sizeof(hello.run_id) - 1] = '\0';
    if (hello.status != 0) {
        ir_set_error("the server refused the shm connection: %s", hello.err);
        goto fail;
    }
    if (nfds != 3 || !isPow2(hello.req_size) || !isPow2(hello.rep_size)) {
        ir_set_error("%s sent a malformed shm hello", path);
        goto fail;
    }
    size_t len = (size_t)(IR_SHM_HEADER_BYTES + hello.req_size);
    size_t rep = (size_t)hello.rep_size;
    struct stat st;
    if (fstat(fds[0], &st) != 0 || (size_t)st.st_size < len + rep) {
        ir_set_error("%s: the shared segment is smaller than its rings", path);
        goto fail;
    }
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    /* the reply ring twice, back to back (a reply that wraps is still one run of
     * memory: a sample's items can be viewed where they lie) */
    char *mirror = mmap(NULL, 2 * rep, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int mapped = map != MAP_FAILED && mirror != MAP_FAILED;
    for (int half = 0; mapped && half < 2; half++)
        mapped = mmap(mirror + half * rep, rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                      fds[0], (off_t)len) != MAP_FAILED;
    ir_shm_client *c = mapped ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        int e = mapped ? ENOMEM : errno;
        if (map != MAP_FAILED) munmap(map, len);
        if (mirror != MAP_FAILED) munmap(mirror, 2 * rep);
        ir_set_error_errno(e, "cannot map the shm segment: %s", strerror(e));
        rc = IR_ENOMEM;
        goto fail;
    }
    close(fds[0]);
    c->fd = fd;
    c->doorbell = fds[1];
    c->efd = fds[2];
    c->h = map;
    c->map_len = len;
    c->req_size = hello.req_size;
    c->rep_size = hello.rep_size;
    c->req = (char *)map + IR_SHM_REQ_OFFSET;
    c->rep_map = mirror;
    c->rep = mirror;
    c->refs = 1;
    c->req_head = IR_SHM_LOAD(&c->h->req_head);
    c->rep_tail = c->rep_read = IR_SHM_LOAD(&c->h->rep_tail);
    c->spin_us = DEFAULT_SPIN_US;
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (c->epfd >= 0) {
        struct epoll_event e1 = {.events = EPOLLIN}, e2 = {.events = EPOLLIN};
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->efd, &e1);
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->fd, &e2);
    }
    if (run_id && run_id_len) snprintf(run_id, run_id_len, "%s", hello.run_id);
    *out = c;
    return IR_OK;
fail:
    for (int i = 0; i < nfds; i++) close(fds[i]);
    close(fd);
    return rc;
}

void ir_shm_set_spin(ir_shm_client *c, long spin_us) { c->spin_us = spin_us < 0 ? 0 : spin_us; }

uint64_t ir_shm_ring_size(const ir_shm_client *c) { return c->rep_size; }

/* After moving a counter: ring the server's doorbell if it sleeps. */
static void wakeServer(ir_shm_client *c) {
    IR_SHM_FENCE();
    if (IR_SHM_LOAD(&c->h->srv_waiting)) {
        uint64_t one = 1;
        ssize_t r = write(c->doorbell, &one, sizeof(one));
        (void)r;
    }
}

/* Wait until ready(c) or timeout_ms (-1: forever). 1 ready, 0 timed out,
 * -1 the server has gone. */
static int waitFor(ir_shm_client *c, int (*ready)(ir_shm_client *), long timeout_ms) {
    if (ready(c)) return 1;
    uint64_t start = nowUs();
    if (c->spin_us) {
        /* spin; past the first few microseconds, yield between looks, so that on a
         * machine with more runnable threads than cores (the server among them) the
         * spinning does not take the core the reply needs */
        uint64_t until = start + (uint64_t)c->spin_us, yield_after = start + 5;
        uint64_t now = start;
        do {
            for (int i = 0; i < 64; i++) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
                if (ready(c)) return 1;
            }
            now = nowUs();
            if (now > yield_after) sched_yield();
        } while (now < until);
    }
    for (;;) {
        if (c->gone) return ready(c) ? 1 : -1;
        IR_SHM_STORE(&c->h->cli_waiting, 1);
        IR_SHM_FENCE();
        if (ready(c)) {
            IR_SHM_STORE(&c->h->cli_waiting, 0);
            return 1;
        }
        int ms = -1;
        if (timeout_ms >= 0) {
            uint64_t spent = (nowUs() - start) / 1000;
            if (spent >= (uint64_t)timeout_ms) {
                IR_SHM_STORE(&c->h->cli_waiting, 0);
                return ready(c) ? 1 : 0;
            }
            ms = (int)((uint64_t)timeout_ms - spent);
        }
        struct pollfd p[2] = {{.fd = c->efd, .events = POLLIN}, {.fd = c->fd, .events = POLLIN}};
        int r = poll(p, 2, ms);
        IR_SHM_STORE(&c->h->cli_waiting, 0);
        if (r < 0 && errno != EINTR) return -1;
        if (r > 0 && p[0].revents) {
            uint64_t v;
            ssize_t got = read(c->efd, &v, sizeof(v));
            (void)got;
        }
        if (r > 0 && p[1].revents) c->gone = 1; /* it sends nothing: any event is its end */
        if (ready(c)) return 1;
    }
}

static int replyReady(ir_shm_client *c) { return IR_SHM_LOAD(&c->h->rep_head) != c->rep_read; }

/* A call begins: take back what ir_shm_poll_fd left raised. */
static void idleDisarm(ir_shm_client *c) {
    if (!c->idle_armed) return;
    c->idle_armed = 0;
    IR_SHM_STORE(&c->h->cli_waiting, 0);
    uint64_t v;
    ssize_t r = read(c->efd, &v, sizeof(v));
    (void)r;
}

/* Leave cli_waiting raised between calls, so that the server writes the
 * eventfd for every reply and epfd tells a poller the truth. */
static void idleArm(ir_shm_client *c) {
    /* first take any signal left over from a wait that found its bytes without
     * sleeping (the server may have seen the flag raised and written it anyway):
     * a poller must not be told of bytes that were read long ago */
    uint64_t v;
    ssize_t drained = read(c->efd, &v, sizeof(v));
    (void)drained;
    if (!c->idle_armed) {
        c->idle_armed = 1;
        IR_SHM_STORE(&c->h->cli_waiting, 1);
        IR_SHM_FENCE();
    }
    if (replyReady(c)) { /* already there: make the fd say so */
        uint64_t one = 1;
        ssize_t r = write(c->efd, &one, sizeof(one));
        (void)r;
    }
}

/* A call ends: a connection someone polls stays armed. */
static long callEnd(ir_shm_client *c, long rc) {
    if (c->poll_mode && c->fd >= 0) idleArm(c);
    return rc;
}

int ir_shm_poll_fd(ir_shm_client *c) {
    c->poll_mode = 1; /* from now on every call leaves it armed */
    idleArm(c);
    return c->epfd;
}

static int requestRoom(ir_shm_client *c) {
    return c->req_head - IR_SHM_LOAD(&c->h->req_tail) < c->req_size;
}

static int wholeRoom(ir_shm_client *c) {
    return c->req_size - (c->req_head - IR_SHM_LOAD(&c->h->req_tail)) >= c->want;
}

size_t ir_shm_pending(ir_shm_client *c) {
    return (size_t)(IR_SHM_LOAD(&c->h->rep_head) - c->rep_read);
}

/* Give the server back what has been read and is in no view. */
static void giveBack(ir_shm_client *c) {
    uint64_t tail = c->leased ? c->rep_tail : c->rep_read;
    if (tail == IR_SHM_LOAD(&c->h->rep_tail)) return;
    c->rep_tail = tail;
    IR_SHM_STORE(&c->h->rep_tail, tail);
    wakeServer(c); /* it may wait for room to write more */
}

/* Reply bytes written and not yet read; -1 if the server broke the ring. */
static int64_t unread(ir_shm_client *c) {
    uint64_t avail = IR_SHM_LOAD(&c->h->rep_head) - c->rep_read;
    if (avail > c->rep_size) {
        ir_set_error("the shm reply ring is corrupt");
        return -1;
    }
    return (int64_t)avail;
}

static long readImpl(ir_shm_client *c, void *buf, size_t len, long timeout_ms) {
    idleDisarm(c);
    if (!len) return 0;
    int w = waitFor(c, replyReady, timeout_ms);
    if (w == 0) return -2;
    if (w < 0) return 0; /* the server closed the connection: end of file */
    int64_t avail = unread(c);
    if (avail < 0) return -1;
    size_t n = (size_t)avail < len ? (size_t)avail : len;
    memcpy(buf, c->rep + (c->rep_read & (c->rep_size - 1)), n); /* the mirror: one run */
    c->rep_read += n;
    giveBack(c);
    return (long)n;
}

long ir_shm_read(ir_shm_client *c, void *buf, size_t len, long timeout_ms) {
    return callEnd(c, readImpl(c, buf, len, timeout_ms));
}

static long readLineImpl(ir_shm_client *c, char *buf, size_t cap, long timeout_ms) {
    idleDisarm(c);
    size_t got = 0;
    while (got < cap) {
        int w = waitFor(c, replyReady, timeout_ms);
        if (w == 0) return -2;
        if (w < 0) return 0;
        int64_t avail = unread(c);
        if (avail < 0) return -1;
        const char *p = c->rep + (c->rep_read & (c->rep_size - 1));
        size_t n = 0;
        while (n < (size_t)avail && got < cap) {
            char ch = p[n++];
            buf[got++] = ch;
            if (ch == '\n' && got >= 2 && buf[got - 2] == '\r') {
                c->rep_read += n;
                giveBack(c);
                return (long)got;
            }
        }
        c->rep_read += n;
        giveBack(c);
    }
    return (long)got; /* no end of line within cap */
}

long ir_shm_read_line(ir_shm_client *c, char *buf, size_t cap, long timeout_ms) {
    return callEnd(c, readLineImpl(c, buf, cap, timeout_ms));
}

static int runReady(ir_shm_client *c) {
    return IR_SHM_LOAD(&c->h->rep_head) - c->rep_read >= c->want;
}

static long peekImpl(ir_shm_client *c, size_t len, long timeout_ms, const void **out) {
    idleDisarm(c);
    *out = NULL;
    uint64_t held = c->leased ? c->rep_read - c->rep_tail : 0;
    if (len > c->rep_size - held) return -3; /* cannot all be in the ring at once */
    c->want = len;
    int w = waitFor(c, runReady, timeout_ms);
    if (w == 0) return -2;
    if (w < 0) return 0;
    if (unread(c) < 0) return -1;
    if (!c->leased) {
        c->leased = 1;
        c->rep_tail = c->rep_read;
    }
    *out = c->rep + (c->rep_read & (c->rep_size - 1));
    c->rep_read += len;
    return (long)len;
}

long ir_shm_peek(ir_shm_client *c, size_t len, long timeout_ms, const void **out) {
    return callEnd(c, peekImpl(c, len, timeout_ms, out));
}

void ir_shm_release(ir_shm_client *c) {
    if (!c->leased) return;
    c->leased = 0;
    giveBack(c);
}

static long writevImpl(ir_shm_client *c, const void *const *bufs, const size_t *lens, int n,
                       long timeout_ms) {
    idleDisarm(c);
    /* a new request ends the last reply's views (what they show may now change): a
     * view held across requests would keep its bytes from the server and, the ring
     * being FIFO, everything after them */
    if (c->leased) {
        c->leased = 0;
        giveBack(c);
    }
    /* a request that fits the ring is written whole once there is room for all of
     * it, and published once: the server then sees it in one piece and parses its
     * big bodies where they lie instead of copying the part it got (shm.c) */
    uint64_t whole = 0;
    for (int i = 0; i < n; i++) whole += lens[i];
    if (whole <= c->req_size) {
        c->want = whole;
        int w = waitFor(c, wholeRoom, timeout_ms);
        if (w <= 0) {
            ir_set_error(w == 0 ? "timed out writing to the server"
                                : "the server closed the connection");
            return w == 0 ? -2 : -1;
        }
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const char *p = bufs[i];
        size_t left = lens[i];
        while (left) {
            if (!requestRoom(c)) {
                IR_SHM_STORE(&c->h->req_head, c->req_head);
                wakeServer(c);
                int w = waitFor(c, requestRoom, timeout_ms);
                if (w <= 0) {
                    ir_set_error(w == 0 ? "timed out writing to the server"
                                        : "the server closed the connection");
                    return w == 0 ? -2 : -1;
                }
            }
            uint64_t room = c->req_size - (c->req_head - IR_SHM_LOAD(&c->h->req_tail));
            uint64_t off = c->req_head & (c->req_size - 1);
            uint64_t k = c->req_size - off;
            if (k > room) k = room;
            if (k > left) k = left;
            memcpy(c->req + off, p, (size_t)k);
            c->req_head += k;
            p += k;
            left -= (size_t)k;
            total += (size_t)k;
        }
    }
    IR_SHM_STORE(&c->h->req_head, c->req_head);
    wakeServer(c);
    if (c->gone) {
        ir_set_error("the server closed the connection");
        return -1;
    }
    return (long)total;
}

long ir_shm_writev(ir_shm_client *c, const void *const *bufs, const size_t *lens, int n,
                   long timeout_ms) {
    return callEnd(c, writevImpl(c, bufs, lens, n, timeout_ms));
}

long ir_shm_write(ir_shm_client *c, const void *buf, size_t len, long timeout_ms) {
    return ir_shm_writev(c, &buf, &len, 1, timeout_ms);
}

int ir_shm_fileno(const ir_shm_client *c) { return c->fd; }

long ir_shm_peer_pid(const ir_shm_client *c) {
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 ? (long)cr.pid : -1;
}

void ir_shm_ref(ir_shm_client *c) { __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); }

void ir_shm_unref(ir_shm_client *c) {
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL)) return;
    munmap(c->h, c->map_len);
    munmap(c->rep_map, 2 * (size_t)c->rep_size);
    free(c);
}

void ir_shm_close(ir_shm_client *c) {
    if (!c || c->fd < 0) return;
    close(c->fd);
    close(c->doorbell);
    close(c->efd);
    if (c->epfd >= 0) close(c->epfd);
    c->fd = c->doorbell = c->efd = c->epfd = -1;
    ir_shm_unref(c); /* the mapping stays while views of it live */
}
