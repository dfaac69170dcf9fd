/* impair: an L2 impairment bridge between two interfaces (netem without sch_netem).
 *
 * Forwards every frame received on --a out of --b and every frame received on
 * --b out of --a (raw AF_PACKET sockets, ETH_P_ALL, PACKET_IGNORE_OUTGOING), and on
 * the way drops, delays (fixed + jitter), reorders and duplicates frames with the
 * probabilities of a spec, per direction, reproducibly from --seed:
 *
 *   impair --a IF_A --b IF_B [--seed N] [--spec SPEC] [--spec-file FILE]
 *          [--stats FILE] [--pidfile FILE] [--slots N] [--daemon]
 *
 *   SPEC  = item[,item...]; item = [ab.|ba.]key=value (no prefix: both directions)
 *   loss=5%             drop each frame with probability 5%
 *   delay=20ms±5ms      hold each frame 20 ms ± up to 5 ms (uniform; "+-" also works);
 *                       jitter never reorders: a direction's frames leave in order
 *   reorder=25%[/2ms]   hold a frame back an extra 2 ms (default 1 ms) beyond its
 *                       delay, out of the FIFO, so later frames overtake it
 *   duplicate=1%        send the frame twice
 *   burst=30%/2s        loss rate and length of a burst (SIGUSR1 starts one)
 *   drop=3+7            drop exactly the 3rd and the 7th TCP segment that takes
 *                       sequence space (data, SYN or FIN; IPv4), counted from when
 *                       the spec was loaded (up to 16 numbers): a deterministic
 *                       loss, e.g. the SYN-ACK, a reply segment or a retransmission
 *
 * Direction "ab" is frames received on --a and sent on --b; "ba" the reverse.
 * Signals: SIGUSR1 starts a loss burst (in each direction with a burst set);
 * SIGHUP re-reads --spec-file (the counters go on); SIGUSR2 writes the counters
 * to --stats; SIGTERM/SIGINT write them to --stats and stdout as JSON, exit 0.
 *
 * Every decision draws the same number of values from the direction's own
 * xoshiro256** generator (seeded by splitmix64 from --seed and the direction),
 * so the same frames in the same order meet the same fate in every run. Frames
 * live in a preallocated pool of slots (64 KB each, lazily backed by the
 * kernel's zero pages: MAP_NORESERVE) and wait in a binary min-heap keyed by
 * their CLOCK_MONOTONIC due time; no allocation happens per frame.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define SLOT_BYTES 65536u /* receive buffer per frame: anything the kernel hands us */
#define DEFAULT_SLOTS 8192u
#define RX_BATCH 64

enum { AB = 0, BA = 1, NDIR = 2 };
static const char *const dir_name[NDIR] = {"ab", "ba"};

struct params {
    double loss, reorder, duplicate; /* probabilities 0..1 */
    int64_t delay_ns, jitter_ns, reorder_ns;
    double burst_loss;
    int64_t burst_ns;
    uint32_t drop[16]; /* drop=N+M...: the sequence-space segments to drop, 1-based, ascending */
    unsigned ndrop;
};

struct counters {
    uint64_t received, forwarded, dropped, burst_dropped, delayed, reordered, duplicated;
    uint64_t overflow, tx_errors, bytes;
};

struct dir {
    struct params p;
    struct counters c;
    uint64_t rng[4];
    int64_t fifo_due;    /* due time of the last in-order frame (keeps jitter from reordering) */
    int64_t burst_until; /* monotonic ns; 0: no burst */
    bool burst_on;       /* burst with no end (burst=P%/0s toggles) */
    uint64_t data_segs;  /* TCP data/SYN/FIN segments seen since the spec was loaded (drop=) */
};

struct slot {
    uint32_t len;
    uint8_t dir;
    uint8_t copies;
};

struct heap_ent {
    int64_t due;
    uint64_t seq;
    uint32_t slot;
};

static struct dir dirs[NDIR];
static struct slot *slots;
static uint8_t *slot_mem;
static uint32_t nslots;
static uint32_t *free_list;
static uint32_t nfree;
static struct heap_ent *heap;
static uint32_t heap_len;
static uint64_t heap_seq;
static int sock[NDIR]; /* sock[AB] receives on --a; frames of AB are sent on sock[BA] */
static const char *ifname[NDIR];
static const char *stats_path, *spec_file;
static uint64_t seed;

static volatile sig_atomic_t sig_term, sig_usr1, sig_usr2, sig_hup;

static void on_signal(int sig) {
    switch (sig) {
    case SIGTERM:
    case SIGINT: sig_term = 1; break;
    case SIGUSR1: sig_usr1 = 1; break;
    case SIGUSR2: sig_usr2 = 1; break;
    case SIGHUP: sig_hup = 1; break;
    default: break;
    }
}

static void die(const char *what) {
    fprintf(stderr, "impair: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- PRNG: splitmix64 seeds xoshiro256** ------------------------------------ */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static double uniform(uint64_t s[4]) { return (double)(xoshiro(s) >> 11) * 0x1.0p-53; }

/* ---- the spec ---------------------------------------------------------------- */

static int parse_percent(const char *v, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || (*end != '%' && *end != '\0' && *end != '/') || x < 0 || x > 100) return -1;
    *out = x / 100.0;
    return 0;
}

/* "20ms", "1.5s", "500us", "0": nanoseconds; *end after the unit */
static int parse_time(const char *v, int64_t *out, const char **endp) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || x < 0) return -1;
    double mult = 1e6; /* default ms */
    if (strncmp(end, "ms", 2) == 0) {
        end += 2;
    } else if (strncmp(end, "us", 2) == 0) {
        mult = 1e3;
        end += 2;
    } else if (strncmp(end, "ns", 2) == 0) {
        mult = 1;
        end += 2;
    } else if (*end == 's') {
        mult = 1e9;
        end += 1;
    }
    *out = (int64_t)(x * mult + 0.5);
    if (endp) *endp = end;
    return 0;
}

static int parse_item(struct params *p, const char *key, const char *v) {
    const char *end;
    if (strcmp(key, "loss") == 0) return parse_percent(v, &p->loss);
    if (strcmp(key, "duplicate") == 0 || strcmp(key, "dup") == 0)
        return parse_percent(v, &p->duplicate);
    if (strcmp(key, "reorder") == 0) {
        if (parse_percent(v, &p->reorder)) return -1;
        const char *slash = strchr(v, '/');
        p->reorder_ns = 1000000;
        return slash ? parse_time(slash + 1, &p->reorder_ns, NULL) : 0;
    }
    if (strcmp(key, "delay") == 0) {
        if (parse_time(v, &p->delay_ns, &end)) return -1;
        p->jitter_ns = 0;
        if (strncmp(end, "\xc2\xb1", 2) == 0) /* ± in UTF-8 */
            end += 2;
        else if (strncmp(end, "+-", 2) == 0) end += 2;
        else if (*end == '~') end += 1;
        else return *end ? -1 : 0;
        return parse_time(end, &p->jitter_ns, &end) || *end ? -1 : 0;
    }
    if (strcmp(key, "drop") == 0) {
        p->ndrop = 0;
        for (const char *c = v; *c;) {
            char *e;
            unsigned long n = strtoul(c, &e, 10);
            if (e == c || n == 0 || n > UINT32_MAX || p->ndrop == 16 ||
                (p->ndrop && n <= p->drop[p->ndrop - 1]) || (*e && (*e != '+' || !e[1])))
                return -1;
            p->drop[p->ndrop++] = (uint32_t)n;
            c = *e ? e + 1 : e;
        }
        return p->ndrop ? 0 : -1;
    }
    if (strcmp(key, "burst") == 0) {
        if (parse_percent(v, &p->burst_loss)) return -1;
        const char *slash = strchr(v, '/');
        p->burst_ns = 2000000000;
        return slash ? parse_time(slash + 1, &p->burst_ns, NULL) : 0;
    }
    return -1;
}

/* Parses SPEC into np[] (starting from all zeros); -1 and a message on error. */
static int parse_spec(const char *spec, struct params np[NDIR]) {
    memset(np, 0, sizeof(struct params) * NDIR);
    for (int d = 0; d < NDIR; d++) {
        np[d].reorder_ns = 1000000;
        np[d].burst_loss = 0; /* no burst unless the spec sets one */
        np[d].burst_ns = 2000000000;
    }
    char buf[1024];
    if (strlen(spec) >= sizeof buf) {
        fprintf(stderr, "impair: spec too long\n");
        return -1;
    }
    strcpy(buf, spec);
    char *save = NULL;
    for (char *it = strtok_r(buf, ", \t\n", &save); it; it = strtok_r(NULL, ", \t\n", &save)) {
        int from = 0, to = NDIR;
        char *key = it;
        if (strncmp(key, "ab.", 3) == 0) {
            from = AB, to = AB + 1, key += 3;
        } else if (strncmp(key, "ba.", 3) == 0) {
            from = BA, to = BA + 1, key += 3;
        }
        char *eq = strchr(key, '=');
        if (!eq) {
            fprintf(stderr, "impair: spec item '%s': want key=value\n", it);
            return -1;
        }
        *eq = '\0';
        for (int d = from; d < to; d++) {
            if (parse_item(&np[d], key, eq + 1)) {
                fprintf(stderr, "impair: spec item '%s=%s': bad key or value\n", key, eq + 1);
                return -1;
            }
        }
    }
    return 0;
}

static int load_spec_file(struct params np[NDIR]) {
    char buf[1024];
    FILE *f = fopen(spec_file, "r");
    if (!f) {
        fprintf(stderr, "impair: %s: %s\n", spec_file, strerror(errno));
        return -1;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return parse_spec(buf, np);
}

/* ---- counters as JSON ---------------------------------------------------------- */

static void write_json(FILE *f) {
    fprintf(f, "{\"seed\": %" PRIu64 ", \"a\": \"%s\", \"b\": \"%s\"", seed, ifname[AB],
            ifname[BA]);
    for (int d = 0; d < NDIR; d++) {
        const struct counters *c = &dirs[d].c;
        const struct params *p = &dirs[d].p;
        fprintf(f,
                ", \"%s\": {\"received\": %" PRIu64 ", \"forwarded\": %" PRIu64
                ", \"dropped\": %" PRIu64 ", \"burst_dropped\": %" PRIu64 ", \"delayed\": %" PRIu64
                ", \"reordered\": %" PRIu64 ", \"duplicated\": %" PRIu64 ", \"overflow\": %" PRIu64
                ", \"tx_errors\": %" PRIu64 ", \"bytes\": %" PRIu64
                ", \"params\": {\"loss\": %g, \"delay_ms\": %g, \"jitter_ms\": %g, \"reorder\": %g"
                ", \"reorder_ms\": %g, \"duplicate\": %g, \"burst_loss\": %g, \"burst_s\": %g}}",
                dir_name[d], c->received, c->forwarded, c->dropped, c->burst_dropped, c->delayed,
                c->reordered, c->duplicated, c->overflow, c->tx_errors, c->bytes, p->loss * 100,
                (double)p->delay_ns / 1e6, (double)p->jitter_ns / 1e6, p->reorder * 100,
                (double)p->reorder_ns / 1e6, p->duplicate * 100, p->burst_loss * 100,
                (double)p->burst_ns / 1e9);
    }
    fprintf(f, ", \"in_flight\": %" PRIu32 "}\n", heap_len);
}

static void write_stats(void) {
    if (!stats_path) return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "impair: %s: %s\n", tmp, strerror(errno));
        return;
    }
    write_json(f);
    if (fclose(f) == 0) rename(tmp, stats_path);
}

/* ---- the timer heap --------------------------------------------------------------- */

static bool heap_less(const struct heap_ent *x, const struct heap_ent *y) {
    return x->due < y->due || (x->due == y->due && x->seq < y->seq);
}

static void heap_push(int64_t due, uint32_t s) {
    uint32_t i = heap_len++;
    struct heap_ent e = {due, heap_seq++, s};
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!heap_less(&e, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static struct heap_ent heap_pop(void) {
    struct heap_ent top = heap[0], last = heap[--heap_len];
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        const struct heap_ent *best = &last;
        if (l < heap_len && heap_less(&heap[l], best)) m = l, best = &heap[l];
        if (r < heap_len && heap_less(&heap[r], best)) m = r;
        if (m == i) break;
        heap[i] = heap[m];
        i = m;
    }
    if (heap_len) heap[i] = last;
    return top;
}

/* ---- forwarding ---------------------------------------------------------------------- */

static uint8_t *slot_data(uint32_t s) { return slot_mem + (size_t)s * SLOT_BYTES; }

static void transmit(uint32_t s) {
    struct slot *sl = &slots[s];
    struct dir *d = &dirs[sl->dir];
    int out = sock[sl->dir == AB ? BA : AB];
    for (unsigned k = 0; k < sl->copies; k++) {
        ssize_t n;
        do {
            n = send(out, slot_data(s), sl->len, 0);
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno == EAGAIN || errno == ENOBUFS) { /* wait for room once, then give up */
                struct pollfd pf = {.fd = out, .events = POLLOUT};
                poll(&pf, 1, 10);
                n = send(out, slot_data(s), sl->len, 0);
            }
            if (n < 0) {
                d->c.tx_errors++;
                continue;
            }
        }
        if (k == 0) d->c.forwarded++;
        else d->c.duplicated++;
        d->c.bytes += sl->len;
    }
    free_list[nfree++] = s;
}

static void run_due(void) {
    int64_t now = now_ns();
    while (heap_len && heap[0].due <= now) {
        struct heap_ent e = heap_pop();
        transmit(e.slot);
    }
}

static double loss_now(struct dir *d, int64_t now, bool *in_burst) {
    *in_burst = d->burst_on || (d->burst_until && now < d->burst_until);
    if (d->burst_until && now >= d->burst_until) d->burst_until = 0;
    return *in_burst && d->p.burst_loss > d->p.loss ? d->p.burst_loss : d->p.loss;
}

/* True if the frame is an IPv4 TCP segment (unfragmented) that takes sequence space:
 * data, SYN or FIN. */
static bool tcp_data(const uint8_t *f, uint32_t len) {
    if (len < 14 + 20 || f[12] != 0x08 || f[13] != 0x00) return false;
    const uint8_t *ip = f + 14;
    unsigned ihl = (unsigned)(ip[0] & 0x0f) * 4, tot = (unsigned)ip[2] << 8 | ip[3];
    if ((ip[0] >> 4) != 4 || ip[9] != 6 || ihl < 20 || (ip[6] & 0x1f) || ip[7] ||
        len < 14 + ihl + 20 || tot < ihl + 20)
        return false;
    unsigned doff = (unsigned)(ip[ihl + 12] >> 4) * 4, tflags = ip[ihl + 13];
    return tot > ihl + doff || (tflags & 0x03); /* payload, or SYN/FIN */
}

/* drop=: is this the direction's next listed data segment? */
static bool drop_listed(struct dir *d, uint32_t s) {
    if (!d->p.ndrop || !tcp_data(slot_data(s), slots[s].len)) return false;
    uint64_t k = ++d->data_segs;
    for (unsigned i = 0; i < d->p.ndrop; i++)
        if (d->p.drop[i] == k) return true;
    return false;
}

/* A frame of direction `di` is in slot s: decide its fate. */
static void handle(int di, uint32_t s, int64_t now) {
    struct dir *d = &dirs[di];
    /* always four draws per frame, whatever happens: reproducible decisions */
    double u_loss = uniform(d->rng), u_dup = uniform(d->rng), u_reo = uniform(d->rng);
    double u_jit = uniform(d->rng);
    bool in_burst;
    double loss = loss_now(d, now, &in_burst);
    d->c.received++;
    if (drop_listed(d, s)) {
        d->c.dropped++;
        free_list[nfree++] = s;
        return;
    }
    if (u_loss < loss) {
        d->c.dropped++;
        if (in_burst && u_loss >= d->p.loss) d->c.burst_dropped++;
        free_list[nfree++] = s;
        return;
    }
    slots[s].dir = (uint8_t)di;
    slots[s].copies = u_dup < d->p.duplicate ? 2 : 1;
    int64_t delay = d->p.delay_ns;
    if (d->p.jitter_ns) delay += (int64_t)((2 * u_jit - 1) * (double)d->p.jitter_ns);
    if (delay < 0) delay = 0;
    int64_t due = now + delay;
    if (u_reo < d->p.reorder) {
        d->c.reordered++;
        due += d->p.reorder_ns; /* out of the FIFO: later frames overtake it */
    } else {
        if (due < d->fifo_due) due = d->fifo_due;
        d->fifo_due = due;
    }
    if (due <= now) {
        run_due(); /* the direction's earlier frames first */
        transmit(s);
        return;
    }
    if (due > now) d->c.delayed++;
    heap_push(due, s);
}

static void receive(int di) {
    struct dir *d = &dirs[di];
    for (int i = 0; i < RX_BATCH; i++) {
        if (nfree == 0) { /* pool full: read and drop (a full queue's tail drop) */
            static uint8_t scratch[SLOT_BYTES];
            ssize_t n = recv(sock[di], scratch, sizeof scratch, MSG_DONTWAIT);
            if (n < 0) return;
            d->c.received++;
            d->c.overflow++;
            continue;
        }
        uint32_t s = free_list[nfree - 1];
        struct sockaddr_ll from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(sock[di], slot_data(s), SLOT_BYTES, MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *)&from, &fl);
        if (n < 0) /* EAGAIN, or a socket error (link down) that this read cleared */
            return;
        if (from.sll_pkttype == PACKET_OUTGOING)
            continue; /* our own transmission (kernels without PACKET_IGNORE_OUTGOING) */
        if ((size_t)n > SLOT_BYTES) { /* cannot happen with offloads off; count it */
            d->c.received++;
            d->c.tx_errors++;
            continue;
        }
        nfree--;
        slots[s].len = (uint32_t)n;
        handle(di, s, now_ns());
    }
}

static int open_sock(const char *ifn) {
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0) die("socket(AF_PACKET) (needs root or CAP_NET_RAW)");
    unsigned idx = if_nametoindex(ifn);
    if (!idx) {
        fprintf(stderr, "impair: %s: no such interface\n", ifn);
        exit(1);
    }
    int one = 1, big = 16 << 20;
    if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0)
        fprintf(stderr, "impair: PACKET_IGNORE_OUTGOING unsupported; filtering by pkttype\n");
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    struct sockaddr_ll sll = {
        .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)idx};
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0) die("bind");
    struct packet_mreq mr = {.mr_ifindex = (int)idx, .mr_type = PACKET_MR_PROMISC};
    if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0)
        die("PACKET_MR_PROMISC");
    /* frames queued before the bind may belong to no interface filter: drain them */
    uint8_t junk[64];
    while (recv(fd, junk, sizeof junk, MSG_DONTWAIT | MSG_TRUNC) >= 0) {}
    return fd;
}

static void usage(void) {
    fprintf(stderr, "usage: impair --a IF --b IF [--seed N] [--spec SPEC] [--spec-file FILE]\n"
                    "              [--stats FILE] [--pidfile FILE] [--slots N] [--daemon]\n"
                    "       impair --check SPEC   (parse SPEC only: exit 0, or 2 with the reason)\n"
                    "SPEC: [ab.|ba.]loss=P%%,delay=Dms±Jms,reorder=P%%[/Xms],duplicate=P%%,"
                    "burst=P%%/Ts\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *spec = "", *pidfile = NULL;
    bool daemonize = false;
    nslots = DEFAULT_SLOTS;
    if (argc == 3 && strcmp(argv[1], "--check") == 0) {
        struct params np[NDIR];
        return parse_spec(argv[2], np) ? 2 : 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--daemon") == 0) {
            daemonize = true;
            continue;
        }
        if (!v) usage();
        i++;
        if (strcmp(a, "--a") == 0) ifname[AB] = v;
        else if (strcmp(a, "--b") == 0) ifname[BA] = v;
        else if (strcmp(a, "--seed") == 0) seed = strtoull(v, NULL, 0);
        else if (strcmp(a, "--spec") == 0) spec = v;
        else if (strcmp(a, "--spec-file") == 0) spec_file = v;
        else if (strcmp(a, "--stats") == 0) stats_path = v;
        else if (strcmp(a, "--pidfile") == 0) pidfile = v;
        else if (strcmp(a, "--slots") == 0) nslots = (uint32_t)strtoul(v, NULL, 0);
        else usage();
    }
    if (!ifname[AB] || !ifname[BA] || nslots < 16 || nslots > (1u << 20)) usage();
    struct params np[NDIR];
    if (spec_file ? load_spec_file(np) : parse_spec(spec, np)) return 2;
    for (int d = 0; d < NDIR; d++) {
        dirs[d].p = np[d];
        uint64_t x = seed ^ (0x5851f42d4c957f2dull * (uint64_t)(d + 1));
        for (int k = 0; k < 4; k++) dirs[d].rng[k] = splitmix64(&x);
    }

    slot_mem = mmap(NULL, (size_t)nslots * SLOT_BYTES, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (slot_mem == MAP_FAILED) die("mmap slots");
    slots = calloc(nslots, sizeof *slots);
    free_list = calloc(nslots, sizeof *free_list);
    heap = calloc(nslots, sizeof *heap);
    if (!slots || !free_list || !heap) die("calloc");
    for (uint32_t s = 0; s < nslots; s++) free_list[nfree++] = nslots - 1 - s;

    sock[AB] = open_sock(ifname[AB]);
    sock[BA] = open_sock(ifname[BA]);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0) die("timerfd_create");

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) sigaction(sigs[k], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (daemonize) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid > 0) { /* the parent records the child and returns to the caller */
            if (pidfile) {
                FILE *f = fopen(pidfile, "w");
                if (!f) die(pidfile);
                fprintf(f, "%d\n", (int)pid);
                fclose(f);
            }
            _exit(0);
        }
        setsid();
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            if (nul > 2) close(nul);
        }
    } else if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (!f) die(pidfile);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    write_stats();

    struct pollfd pfd[3] = {{.fd = sock[AB], .events = POLLIN},
                            {.fd = sock[BA], .events = POLLIN},
                            {.fd = tfd, .events = POLLIN}};
    int64_t armed = -1;
    while (!sig_term) {
        if (sig_usr1) {
            sig_usr1 = 0;
            int64_t now = now_ns();
            for (int d = 0; d < NDIR; d++) {
                if (dirs[d].p.burst_loss <= 0) continue;
                if (dirs[d].p.burst_ns == 0) dirs[d].burst_on = !dirs[d].burst_on;
                else dirs[d].burst_until = now + dirs[d].p.burst_ns;
            }
        }
        if (sig_hup) {
            sig_hup = 0;
            if (spec_file && load_spec_file(np) == 0)
                for (int d = 0; d < NDIR; d++) {
                    dirs[d].p = np[d];
                    dirs[d].data_segs = 0;
                }
        }
        if (sig_usr2) {
            sig_usr2 = 0;
            write_stats();
        }
        run_due();
        if (heap_len && heap[0].due != armed) {
            armed = heap[0].due;
            struct itimerspec its = {
                .it_value = {.tv_sec = armed / 1000000000, .tv_nsec = armed % 1000000000}};
            if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
        }
        int n = poll(pfd, 3, heap_len ? 1000 : 200);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if (pfd[2].revents & POLLIN) {
            uint64_t exp;
            if (read(tfd, &exp, sizeof exp) < 0 && errno != EAGAIN) die("read timerfd");
            armed = -1;
        }
        for (int d = 0; d < NDIR; d++)
            if (pfd[d].revents & (POLLIN | POLLERR)) receive(d);
        if ((pfd[0].revents | pfd[1].revents) & POLLNVAL) {
            fprintf(stderr, "impair: interface gone\n");
            break;
        }
    }
    write_stats();
    write_json(stdout);
    fflush(stdout);
    return 0;
}
