/* dpdk.c - the DPDK side of the kernel-bypass transport: EAL, one Ethernet
 * port, the mbuf pool, RX bursts into lwIP and buffered TX out of it.
 *
 * Why this shape
 *   The server already runs one event loop on one thread (the daemon's,
 *   daemon/daemon.c, calls ops->poll repeatedly). With DPDK that thread is the EAL main lcore and
 *   poll is one busy-poll iteration, as in DPDK's l2fwd main loop:
 *     rx burst (32) -> each frame into lwIP (zero copy, see lwip_glue.c)
 *     -> lwIP timers (checked every ms) -> queued events become server
 *     upcalls and TCP output -> TX drain.
 *   poll ignores its timeout: the thread spins (rte_pause when idle), which
 *   is the point of a poll-mode driver; the daemon's 100 ms tick still runs
 *   because poll returns after every iteration.
 *
 *   TX frames go through an rte_eth_dev_tx_buffer (bursts of 32). The buffer
 *   is flushed at the end of every iteration that received frames or made
 *   upcalls -- so the replies to one RX burst leave in one tx_burst and a
 *   request/response round trip never waits for a timer -- and otherwise by a
 *   100 us drain timer (frames from lwIP's timers: retransmissions, delayed
 *   ACKs, window updates). Frames the TX ring refuses are retried a few times
 *   before they are dropped (TCP would only recover them after an RTO).
 *
 *   Init follows DPDK's examples in order: EAL (from cfg->eal_args), our own
 *   arguments (cfg->ip, port), the mbuf pool sized from the config, port
 *   configure with one RX and one TX queue, queue setup, TX buffer, start,
 *   link status; then lwIP and the listener. One RX/TX queue pair: the
 *   system lwIP keeps global state, so there is one stack on one lcore.
 *   Promiscuous mode is not enabled: the netif uses the port's own MAC, and
 *   broadcast ARP is received anyway.
 *
 *   Nothing here calls rte_exit: this code runs inside a library that Python
 *   may have loaded, so every failure unwinds what was set up, sets
 *   ir_set_error() in rte_exit's style ("rte_eth_dev_configure: err=-22,
 *   port=0") and returns NULL with an IR_* code (ir_dpdk_last_code()).
 *   Teardown closes the listener, gives FINs and written data up to 300 ms
 *   to leave, resets what is left, stops and closes the port, frees the pool
 *   and calls rte_eal_cleanup(); EAL runs with --huge-unlink so no hugepage
 *   file is left even after a crash. A net_af_packet vdev gets a 16384-frame
 *   ring unless eal_args set framecnt (see AF_PACKET_FRAMECNT).
 *
 *   Where the time goes (af_packet on a veth, 2-core VM): lwIP plus the RESP
 *   server use ~1-2% of the polling thread; the PMD's TX sendto() runs the
 *   peer namespace's whole kernel receive path (veth -> TCP -> wake-up)
 *   synchronously and takes 40-75% of it under load. The rest is spinning.
 *
 * Concurrency contract
 *   The thread that called ir_dpdk_transport_new (rte_eal_init makes it the
 *   main lcore) is the only one that touches the port, the pool and lwIP:
 *   it holds the lwIP core for the stack's lifetime (no tcpip_thread exists,
 *   see lwip_glue.c). The only other thread involved is DPDK's telemetry
 *   thread: /inreplay/stats and ir_dpdk_get_stats read a snapshot that the
 *   polling thread publishes every 100 ms under a spinlock.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#include <rte_spinlock.h>
#include <rte_telemetry.h>
#include <rte_version.h>

#include "dpdk.h"
#include "lwip_glue.h"
#include "transport.h"

#define MAX_PKT_BURST 32
#define BURST_TX_DRAIN_US 100 /* TX drain timer, as in l2fwd */
#define LWIP_TIMER_US 1000    /* how often lwIP's timer list is checked */
#define STATS_PERIOD_MS 100   /* snapshot for telemetry */
#define RX_DESC_DEFAULT 1024
#define TX_DESC_DEFAULT 1024
#define MEMPOOL_CACHE_SIZE 256
#define MBUFS_PER_CONN 48  /* a full 64 KB receive window of 1460 B frames */
#define CONN_ALLOWANCE 256 /* connections the pool is sized for */
#define TX_RETRIES 8
#define LINK_CHECK_INTERVAL_MS 100
#define LINK_CHECK_MAX 30 /* 3 s */
#define LINGER_MS 300     /* at teardown: time to deliver FINs / data */
#define MAX_EAL_ARGS 64
/* net_af_packet's default ring is 512 frames: concurrent uploads overflow it,
 * and lost segments cost lwIP 2.1 (no SACK, 500 ms RTO ticks) whole seconds
 * (200 clients x 3 x 1 MB SET: 22-30 s with 512 frames, 5.8 s with 16384). */
#define AF_PACKET_FRAMECNT 16384
/* Jumbo frames (--mtu above 1500): af_packet's 2048-byte ring frames and
 * DPDK's 2 KB mbufs cannot hold a 9000-byte frame. Ring frames grow to a
 * multiple of 1 KB, four to a block of whole pages, and the ring keeps about the
 * same bytes; mbufs grow to the ring frame (the PMD copies a ring frame
 * into one mbuf), so a frame stays one segment. */
#define AF_PACKET_RING_BYTES (AF_PACKET_FRAMECNT * 2048)
#define AF_PACKET_FRAME_OVERHEAD 64 /* tpacket2 header + sockaddr_ll, aligned */
#define AF_PACKET_FRAMES_PER_BLOCK 4
#define ETH_FRAME_OVERHEAD (RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 2 * RTE_VLAN_HLEN)

/* Per-lcore state, cache aligned (one lcore is used: the main one). */
struct lcore_queue_conf {
    uint16_t port;
    uint16_t rxq, txq;
    struct rte_mempool *pool;
    struct rte_eth_dev_tx_buffer *tx_buffer;
    uint64_t prev_drain_tsc, prev_timer_tsc, prev_stats_tsc;
    uint64_t tx_dropped;  /* refused by the TX ring after retries */
    uint64_t rx_multiseg; /* multi-segment frames (never expected) */
    uint64_t rx_martians; /* IPv4/ARP from 127/8 or our own address: spoofed */
    uint32_t ip_be;       /* the port's own address, for that check */
    uint64_t work_iters, cyc_rx, cyc_stack, cyc_dispatch, cyc_tx; /* per-stage breakdown */
    uint64_t cyc_tx_inner; /* TX bursts made from inside lwIP's output (full buffer) */
    int tx_zerocopy;       /* see ird_tx_zerocopy */
    uint64_t tx_zc_segs;   /* TX segments sent from lwIP's buffers without a copy */
} __rte_cache_aligned;

static struct lcore_queue_conf lcore_queue_conf[RTE_MAX_LCORE];

typedef struct dpdk_transport {
    ir_transport base;
    irl_stack *stack;
    struct lcore_queue_conf *qconf;
    struct rte_mempool *pool;
    uint16_t port;
    int port_configured, port_started;
    uint64_t drain_tsc, timer_tsc, stats_tsc;
    char carrier_path[128]; /* af_packet: the kernel interface's carrier, else "" */
    int rx_fd;              /* af_packet: the PMD's socket, to sleep on when idle */
    uint64_t waits;         /* idle sleeps on rx_fd */
    int watch[4];           /* watch_fd's fds: a wait ends when one is readable */
    int nwatch;
    char build[448]; /* INFO stack_build */
} dpdk_transport;

/* EAL can be initialized once per process. */
enum { EAL_NONE, EAL_UP, EAL_DONE };
static int eal_state = EAL_NONE;
static char *eal_argbuf;
static char *eal_argv[MAX_EAL_ARGS + 3];
static char *eal_fixed[MAX_EAL_ARGS]; /* tokens we rewrote */

static _Thread_local int last_code;

/* The telemetry snapshot. */
static rte_spinlock_t pub_lock = RTE_SPINLOCK_INITIALIZER;
static ir_dpdk_stats pub;
static int telemetry_registered;
/* The daemon's counters beside ours (the one source handed to
 * ir_dpdk_transport_new; the daemon's functions, so it outlives the port). */
static const ir_stats_source *daemon_stats;

int ir_dpdk_last_code(void) { return last_code; }

int ir_dpdk_get_stats(ir_dpdk_stats *out) {
    rte_spinlock_lock(&pub_lock);
    *out = pub;
    rte_spinlock_unlock(&pub_lock);
    return out->active ? 0 : -1;
}

/* ---- the side lwip_glue.c calls -------------------------------------------- */

void *ird_tx_alloc(void *dev, uint16_t len, void **data) {
    struct lcore_queue_conf *q = dev;
    struct rte_mbuf *m = rte_pktmbuf_alloc(q->pool);
    if (!m) return NULL;
    char *p = rte_pktmbuf_append(m, len);
    if (!p) {
        rte_pktmbuf_free(m);
        return NULL;
    }
    *data = p;
    return m;
}

void ird_tx_send(void *dev, void *mbuf) {
    struct lcore_queue_conf *q = dev;
    if (q->tx_buffer->length + 1 < q->tx_buffer->size) {
        rte_eth_tx_buffer(q->port, q->txq, q->tx_buffer, mbuf);
        return;
    }
    /* this one fills the buffer: the driver's TX burst runs inside lwIP's
     * output, and the breakdown counts it as TX, not as the stage around it */
    uint64_t t0 = rte_rdtsc();
    rte_eth_tx_buffer(q->port, q->txq, q->tx_buffer, mbuf);
    q->cyc_tx_inner += rte_rdtsc() - t0;
}

void ird_rx_free(void *mbuf) { rte_pktmbuf_free(mbuf); }

void ird_tx_free(void *mbuf) { rte_pktmbuf_free(mbuf); }

int ird_tx_zerocopy(void *dev) { return ((struct lcore_queue_conf *)dev)->tx_zerocopy; }

/* The segment's rte_mbuf_ext_shared_info lives in its own private area (the
 * area an RX mbuf uses for lwIP's pbuf): it is freed with the segment. */
int ird_tx_attach(void *dev, void *mbuf, void *addr, uint16_t len,
                  void (*free_cb)(void *addr, void *opaque), void *opaque) {
    struct lcore_queue_conf *q = dev;
    struct rte_mbuf *head = mbuf;
    struct rte_mbuf *seg = rte_pktmbuf_alloc(q->pool);
    if (!seg) return -1;
    struct rte_mbuf_ext_shared_info *sh = rte_mbuf_to_priv(seg);
    sh->free_cb = free_cb;
    sh->fcb_opaque = opaque;
    rte_mbuf_ext_refcnt_set(sh, 1);
    rte_pktmbuf_attach_extbuf(seg, addr, RTE_BAD_IOVA, len, sh);
    seg->data_len = len;
    seg->pkt_len = len;
    if (rte_pktmbuf_chain(head, seg) != 0) {
        sh->free_cb = NULL; /* not attached: the caller keeps its buffer */
        rte_pktmbuf_detach_extbuf(seg);
        rte_pktmbuf_free(seg);
        return -1;
    }
    q->tx_zc_segs++;
    return 0;
}

/* TX buffer error callback: retry, then drop and count. */
static void txRetry(struct rte_mbuf **pkts, uint16_t unsent, void *userdata) {
    struct lcore_queue_conf *q = userdata;
    uint16_t sent = 0;
    for (int i = 0; i < TX_RETRIES && sent < unsent; i++)
        sent += rte_eth_tx_burst(q->port, q->txq, pkts + sent, (uint16_t)(unsent - sent));
    if (sent < unsent) {
        q->tx_dropped += (uint64_t)(unsent - sent);
        rte_pktmbuf_free_bulk(pkts + sent, (unsigned)(unsent - sent));
    }
}

/* ---- stats -------------------------------------------------------------- */

static void publishStats(dpdk_transport *d, int active) {
    ir_dpdk_stats s;
    memset(&s, 0, sizeof(s));
    s.active = active;
    s.port_id = d->port;
    if (d->port_started) {
        struct rte_eth_stats es;
        if (rte_eth_stats_get(d->port, &es) == 0) {
            s.rx_packets = es.ipackets;
            s.tx_packets = es.opackets;
            s.rx_bytes = es.ibytes;
            s.tx_bytes = es.obytes;
            s.imissed = es.imissed;
            s.ierrors = es.ierrors;
            s.oerrors = es.oerrors;
            s.rx_nombuf = es.rx_nombuf;
        }
        struct rte_eth_link link;
        if (rte_eth_link_get_nowait(d->port, &link) == 0) {
            s.link_up = link.link_status == RTE_ETH_LINK_UP;
            s.link_speed_mbps = link.link_speed;
        }
        /* af_packet reports its link up from start to stop: the interface it
         * sits on knows better (a veth loses carrier when its peer goes down) */
        if (d->carrier_path[0]) {
            FILE *f = fopen(d->carrier_path, "r");
            if (f) {
                s.link_up = fgetc(f) == '1';
                fclose(f);
            }
        }
    }
    if (d->qconf) {
        s.tx_dropped = d->qconf->tx_dropped;
        s.rx_martians = d->qconf->rx_martians;
        s.tx_zerocopy_segs = d->qconf->tx_zc_segs;
        s.idle_waits = d->waits;
        s.tsc_hz = rte_get_tsc_hz();
        s.work_iterations = d->qconf->work_iters;
        s.cycles_rx = d->qconf->cyc_rx;
        s.cycles_stack = d->qconf->cyc_stack;
        s.cycles_dispatch = d->qconf->cyc_dispatch;
        s.cycles_tx = d->qconf->cyc_tx;
    }
    if (d->stack) {
        irl_counters c;
        irl_get_counters(d->stack, &c);
        s.connections = c.connections;
        s.accepted = c.accepted;
        s.tx_nomem = c.tx_nomem;
        s.rx_dropped = c.rx_dropped + (d->qconf ? d->qconf->rx_multiseg : 0);
    }
    rte_spinlock_lock(&pub_lock);
    pub = s;
    rte_spinlock_unlock(&pub_lock);
}

static int telemetryStats(const char *cmd, const char *params, struct rte_tel_data *t) {
    (void)cmd;
    (void)params;
    ir_dpdk_stats s;
    ir_dpdk_get_stats(&s);
    rte_tel_data_start_dict(t);
    rte_tel_data_add_dict_int(t, "active", s.active);
    rte_tel_data_add_dict_int(t, "port_id", s.port_id);
    rte_tel_data_add_dict_int(t, "link_up", s.link_up);
    rte_tel_data_add_dict_u64(t, "link_speed_mbps", s.link_speed_mbps);
    rte_tel_data_add_dict_u64(t, "rx_packets", s.rx_packets);
    rte_tel_data_add_dict_u64(t, "tx_packets", s.tx_packets);
    rte_tel_data_add_dict_u64(t, "rx_bytes", s.rx_bytes);
    rte_tel_data_add_dict_u64(t, "tx_bytes", s.tx_bytes);
    rte_tel_data_add_dict_u64(t, "imissed", s.imissed);
    rte_tel_data_add_dict_u64(t, "ierrors", s.ierrors);
    rte_tel_data_add_dict_u64(t, "oerrors", s.oerrors);
    rte_tel_data_add_dict_u64(t, "rx_nombuf", s.rx_nombuf);
    rte_tel_data_add_dict_u64(t, "tx_dropped", s.tx_dropped);
    rte_tel_data_add_dict_u64(t, "tx_nomem", s.tx_nomem);
    rte_tel_data_add_dict_u64(t, "tx_zerocopy_segs", s.tx_zerocopy_segs);
    rte_tel_data_add_dict_u64(t, "idle_waits", s.idle_waits);
    rte_tel_data_add_dict_u64(t, "rx_dropped", s.rx_dropped);
    rte_tel_data_add_dict_u64(t, "rx_martians", s.rx_martians);
    rte_tel_data_add_dict_u64(t, "connections", s.connections);
    rte_tel_data_add_dict_u64(t, "accepted", s.accepted);
    ir_stats st = {0};
    const ir_stats_source *src = __atomic_load_n(&daemon_stats, __ATOMIC_ACQUIRE);
    if (src && src->stats) src->stats(&st);
    rte_tel_data_add_dict_u64(t, "clients", st.connected_clients);
    rte_tel_data_add_dict_u64(t, "commands", st.total_commands);
    rte_tel_data_add_dict_u64(t, "commands_per_sec", st.commands_per_sec);
    rte_tel_data_add_dict_u64(t, "keys", st.keys);
    rte_tel_data_add_dict_u64(t, "tables", st.tables);
    rte_tel_data_add_dict_u64(t, "used_memory", st.used_memory);
    /* the per-stage breakdown: cycles of loop iterations that did work */
    rte_tel_data_add_dict_u64(t, "tsc_hz", s.tsc_hz);
    rte_tel_data_add_dict_u64(t, "work_iterations", s.work_iterations);
    rte_tel_data_add_dict_u64(t, "cycles_rx", s.cycles_rx);
    rte_tel_data_add_dict_u64(t, "cycles_stack", s.cycles_stack);
    rte_tel_data_add_dict_u64(t, "cycles_dispatch", s.cycles_dispatch);
    rte_tel_data_add_dict_u64(t, "cycles_tx", s.cycles_tx);
    rte_tel_data_add_dict_u64(t, "cycles_input", st.cycles_input);
    rte_tel_data_add_dict_u64(t, "cycles_execute", st.cycles_execute);
    rte_tel_data_add_dict_u64(t, "cycles_reply", st.cycles_reply);
    return 0;
}

/* /inreplay/tables: {name: {size, capacity, inserts, samples, updates, ...}} */
static int telemetryTables(const char *cmd, const char *params, struct rte_tel_data *t) {
    (void)cmd;
    (void)params;
    static ir_table_stats ts[64]; /* telemetry callbacks run on one thread */
    const ir_stats_source *src = __atomic_load_n(&daemon_stats, __ATOMIC_ACQUIRE);
    int n = src && src->tables ? src->tables(ts, 64) : 0;
    rte_tel_data_start_dict(t);
    for (int i = 0; i < n; i++) {
        struct rte_tel_data *d = rte_tel_data_alloc();
        if (!d) return -ENOMEM;
        rte_tel_data_start_dict(d);
        rte_tel_data_add_dict_u64(d, "size", ts[i].size);
        rte_tel_data_add_dict_u64(d, "capacity", ts[i].capacity);
        rte_tel_data_add_dict_u64(d, "inserts", ts[i].inserts);
        rte_tel_data_add_dict_u64(d, "samples", ts[i].samples);
        rte_tel_data_add_dict_u64(d, "updates", ts[i].updates);
        rte_tel_data_add_dict_u64(d, "stale_updates", ts[i].stale_updates);
        rte_tel_data_add_dict_u64(d, "bytes_used", ts[i].bytes_used);
        rte_tel_data_add_dict_container(t, ts[i].name, d, 0);
    }
    return 0;
}

/* ---- the poll loop --------------------------------------------------------- */

/* A frame no wire may carry: IPv4, or ARP's sender, from 127.0.0.0/8 (a DPDK
 * port has no loopback) or from the port's own address. Such sources are
 * spoofed, to pass for a local client or to talk to ourselves (RFC 1122
 * 3.2.1.3 calls them martians); they never reach lwIP. */
static int isMartian(const struct lcore_queue_conf *q, const struct rte_mbuf *m) {
    const unsigned char *f = rte_pktmbuf_mtod(m, const unsigned char *);
    uint32_t len = rte_pktmbuf_data_len(m);
    uint32_t src_be;
    if (len < RTE_ETHER_HDR_LEN) return 0;
    uint16_t type = (uint16_t)(f[12] << 8 | f[13]);
    if (type == RTE_ETHER_TYPE_IPV4 && len >= RTE_ETHER_HDR_LEN + 20)
        memcpy(&src_be, f + RTE_ETHER_HDR_LEN + 12, 4); /* ip_src */
    else if (type == RTE_ETHER_TYPE_ARP && len >= RTE_ETHER_HDR_LEN + 28)
        memcpy(&src_be, f + RTE_ETHER_HDR_LEN + 14, 4); /* arp_sip */
    else return 0;
    return (ntohl(src_be) >> 24) == 127 || src_be == q->ip_be;
}

/* One iteration; returns the frames received plus the connections that had
 * events (0: nothing happened). */
static int pollOnce(dpdk_transport *d) {
    struct lcore_queue_conf *q = d->qconf;
    struct rte_mbuf *pkts[MAX_PKT_BURST];
    uint64_t t0 = rte_rdtsc();
    uint16_t nb = rte_eth_rx_burst(q->port, q->rxq, pkts, MAX_PKT_BURST);
    uint64_t t1 = rte_rdtsc();
    uint64_t inner0 = q->cyc_tx_inner;
    for (uint16_t i = 0; i < nb; i++) {
        struct rte_mbuf *m = pkts[i];
        if (i + 1 < nb) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
        if (unlikely(m->nb_segs != 1)) { /* no scatter configured: not expected */
            q->rx_multiseg++;
            rte_pktmbuf_free(m);
            continue;
        }
        if (unlikely(isMartian(q, m))) {
            q->rx_martians++;
            rte_pktmbuf_free(m);
            continue;
        }
        irl_input(d->stack, rte_mbuf_to_priv(m), rte_pktmbuf_mtod(m, void *),
                  rte_pktmbuf_data_len(m), m);
    }
    uint64_t now = rte_rdtsc();
    if (now - q->prev_timer_tsc >= d->timer_tsc) {
        irl_timers(d->stack);
        q->prev_timer_tsc = now;
    }
    uint64_t t2 = rte_rdtsc();
    uint64_t inner1 = q->cyc_tx_inner;
    int ev = irl_dispatch(d->stack);
    uint64_t t3 = rte_rdtsc();
    uint64_t inner2 = q->cyc_tx_inner;
    if (q->tx_buffer->length == 0) {
        q->prev_drain_tsc = now;
    } else if (nb || ev || now - q->prev_drain_tsc >= d->drain_tsc) {
        rte_eth_tx_buffer_flush(q->port, q->txq, q->tx_buffer);
        q->prev_drain_tsc = now;
    }
    if (nb || ev) { /* the breakdown counts iterations that did work */
        uint64_t t4 = rte_rdtsc();
        q->cyc_rx += t1 - t0;
        q->cyc_stack += t2 - t1 - (inner1 - inner0);
        q->cyc_dispatch += t3 - t2 - (inner2 - inner1);
        q->cyc_tx += t4 - t3 + (inner2 - inner0);
        q->work_iters++;
    }
    if (unlikely(now - q->prev_stats_tsc >= d->stats_tsc)) {
        publishStats(d, 1);
        q->prev_stats_tsc = now;
    }
    return nb + ev;
}

/* One iteration, then back to the daemon's loop, whose idle rule says how long to wait
 * when the iteration found nothing (0 under load or with --busy-poll). On
 * af_packet the wait sleeps in ppoll() on the PMD's packet socket, which the
 * kernel wakes when a frame lands in the RX ring (DPDK 22.11's af_packet has
 * no RX interrupts for rte_eth_dev_rx_intr_*; l3fwd-power sleeps on those the
 * same way); it wakes at least every MAX_WAIT_US for lwIP's timers, and
 * every TCP timer tick while connections exist (irl_max_sleep_us). Other
 * drivers cannot be woken, so the nap is capped at MAX_NAP_US. */
#define MAX_NAP_US 1000
#define MAX_WAIT_US 100000
static int dpdkPoll(ir_transport *t, long timeout_us) {
    dpdk_transport *d = (dpdk_transport *)t;
    int n = pollOnce(d);
    if (n) return n;
    if (timeout_us <= 0) {
        rte_pause();
    } else if (d->rx_fd >= 0) {
        struct lcore_queue_conf *q = d->qconf;
        if (q->tx_buffer->length) rte_eth_tx_buffer_flush(q->port, q->txq, q->tx_buffer);
        long cap = irl_max_sleep_us(d->stack);
        long us = RTE_MIN(timeout_us, cap > 0 ? cap : (long)MAX_WAIT_US);
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000};
        struct pollfd pfd[1 + RTE_DIM(d->watch)] = {{.fd = d->rx_fd, .events = POLLIN}};
        for (int i = 0; i < d->nwatch; i++)
            pfd[1 + i] = (struct pollfd){.fd = d->watch[i], .events = POLLIN};
        int r = ppoll(pfd, 1 + (nfds_t)d->nwatch, &ts, NULL);
        d->waits++;
        /* the interface went away (its namespace was deleted, the device
         * removed): the socket reports an error at once, every time, so nap
         * instead of spinning on it */
        if (r > 0 && (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)))
            rte_delay_us_sleep(MAX_NAP_US);
    } else if (d->nwatch) { /* no socket to sleep on: nap, but wake for the watched fds */
        struct pollfd pfd[RTE_DIM(d->watch)];
        for (int i = 0; i < d->nwatch; i++)
            pfd[i] = (struct pollfd){.fd = d->watch[i], .events = POLLIN};
        long us = RTE_MIN(timeout_us, (long)MAX_NAP_US);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
        ppoll(pfd, (nfds_t)d->nwatch, &ts, NULL);
    } else {
        rte_delay_us_sleep((unsigned)RTE_MIN(timeout_us, (long)MAX_NAP_US));
    }
    return 0;
}

/* The af_packet PMD's packet socket for `iface` (it keeps its fds private):
 * the open socket of this process that /proc/net/packet lists on that
 * interface. -1 if there is none (another driver) or it cannot be told. */
static int afPacketSocket(const char *iface) {
    unsigned ifindex = iface[0] ? if_nametoindex(iface) : 0;
    if (!ifindex) return -1;
    FILE *f = fopen("/proc/net/packet", "r");
    if (!f) return -1;
    unsigned long inodes[16];
    int ninodes = 0;
    char line[256];
    while (fgets(line, sizeof(line), f) && ninodes < 16) {
        unsigned long inode;
        unsigned idx;
        /* sk RefCnt Type Proto Iface R Rmem User Inode */
        if (sscanf(line, "%*s %*s %*s %*s %u %*s %*s %*s %lu", &idx, &inode) == 2 && idx == ifindex)
            inodes[ninodes++] = inode;
    }
    fclose(f);
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) return -1;
    int found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(dir))) {
        char path[300], link[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        unsigned long inode;
        if (sscanf(link, "socket:[%lu]", &inode) != 1) continue;
        for (int i = 0; i < ninodes; i++)
            if (inodes[i] == inode) found = atoi(e->d_name);
    }
    closedir(dir);
    return found;
}

static ssize_t dpdkWritev(ir_transport *t, ir_conn *c, const struct iovec *iov, int iovcnt) {
    return irl_writev(((dpdk_transport *)t)->stack, c, iov, iovcnt);
}

static void dpdkWantWritable(ir_transport *t, ir_conn *c, int on) {
    irl_want_writable(((dpdk_transport *)t)->stack, c, on);
}

static void dpdkWantReadable(ir_transport *t, ir_conn *c, int on) {
    irl_want_readable(((dpdk_transport *)t)->stack, c, on);
}

static void dpdkClose(ir_transport *t, ir_conn *c) { irl_close(((dpdk_transport *)t)->stack, c); }

static void dpdkPeername(ir_transport *t, ir_conn *c, char *buf, size_t len) {
    irl_peername(((dpdk_transport *)t)->stack, c, buf, len);
}

static void dpdkSockname(ir_transport *t, ir_conn *c, char *buf, size_t len) {
    irl_sockname(((dpdk_transport *)t)->stack, c, buf, len);
}

static int dpdkPortInUse(ir_transport *t, int port) {
    return irl_port_in_use(((dpdk_transport *)t)->stack, port);
}

/* ---- teardown ----------------------------------------------------------- */

/* EAL leaves its runtime directory (config, memseg metadata, the telemetry
 * socket) behind after rte_eal_cleanup(); a primary that exits cleanly
 * removes it, so a stopped appliance leaves nothing in /var/run/dpdk. */
static void removeRuntimeDir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    rmdir(dir);
}

static void teardown(dpdk_transport *d) {
    struct lcore_queue_conf *q = d->qconf;
    if (d->stack) {
        /* no more accepts; connections nobody closed are closed quietly */
        irl_quiesce(d->stack);
        /* let FINs and written data go out for a moment, then reset the rest */
        uint64_t deadline = rte_rdtsc() + rte_get_tsc_hz() / 1000 * LINGER_MS;
        while (irl_busy(d->stack) && rte_rdtsc() < deadline)
            if (!pollOnce(d)) rte_pause();
        irl_shutdown(d->stack);
        rte_eth_tx_buffer_flush(q->port, q->txq, q->tx_buffer);
        publishStats(d, 0);
        serverLog("DPDK port %u: rx %llu tx %llu packets, imissed %llu, rx_nombuf %llu, "
                  "tx_dropped %llu; stopping",
                  (unsigned)d->port, (unsigned long long)pub.rx_packets,
                  (unsigned long long)pub.tx_packets, (unsigned long long)pub.imissed,
                  (unsigned long long)pub.rx_nombuf, (unsigned long long)pub.tx_dropped);
        irl_destroy(d->stack);
        d->stack = NULL;
    }
    if (d->port_started) {
        int ret = rte_eth_dev_stop(d->port);
        if (ret != 0) serverLog("rte_eth_dev_stop: err=%d, port=%u", ret, (unsigned)d->port);
        d->port_started = 0;
    }
    if (d->port_configured) {
        rte_eth_dev_close(d->port);
        d->port_configured = 0;
    }
    if (q) {
        rte_free(q->tx_buffer);
        memset(q, 0, sizeof(*q));
    }
    rte_spinlock_lock(&pub_lock);
    pub.active = 0; /* the counters stay: the last snapshot */
    rte_spinlock_unlock(&pub_lock);
    if (d->pool) rte_mempool_free(d->pool); /* after lwIP gave its pbufs back */
    if (eal_state == EAL_UP) {
        char rundir[PATH_MAX];
        snprintf(rundir, sizeof(rundir), "%s", rte_eal_get_runtime_dir());
        int ret = rte_eal_cleanup();
        if (ret != 0) serverLog("rte_eal_cleanup: err=%d", ret);
        eal_state = EAL_DONE;
        removeRuntimeDir(rundir);
    }
    free(d);
}

static void dpdkDestroy(ir_transport *t) { teardown((dpdk_transport *)t); }

static int dpdkWatchFd(ir_transport *t, int fd) {
    dpdk_transport *d = (dpdk_transport *)t;
    if (d->nwatch >= (int)RTE_DIM(d->watch)) return -1;
    d->watch[d->nwatch++] = fd;
    return 0;
}

static const ir_transport_ops dpdk_ops = {
    .name = "dpdk",
    .poll = dpdkPoll,
    .writev = dpdkWritev,
    .want_writable = dpdkWantWritable,
    .want_readable = dpdkWantReadable,
    .close = dpdkClose,
    .peername = dpdkPeername,
    .sockname = dpdkSockname,
    .watch_fd = dpdkWatchFd,
    .port_in_use = dpdkPortInUse,
    .destroy = dpdkDestroy,
};

/* ---- setup ---------------------------------------------------------------- */

static ir_transport *fail(dpdk_transport *d, int code) {
    last_code = code;
    if (d) teardown(d);
    return NULL;
}

/* "a.b.c.d/prefix" */
static int parseIp(const char *s, uint32_t *ip_be, int *prefix) {
    if (!s) return -1;
    const char *slash = strchr(s, '/');
    char addr[INET_ADDRSTRLEN];
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);
    if (alen == 0 || alen >= sizeof(addr)) return -1;
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    struct in_addr in;
    if (inet_pton(AF_INET, addr, &in) != 1) return -1;
    long pfx = 24;
    if (slash) {
        char *end;
        errno = 0;
        pfx = strtol(slash + 1, &end, 10);
        if (errno || end == slash + 1 || *end || pfx < 1 || pfx > 32) return -1;
    }
    *ip_be = in.s_addr;
    *prefix = (int)pfx;
    return 0;
}

static int hasArg(int argc, char **argv, const char *opt) {
    size_t n = strlen(opt);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], opt, n) && (argv[i][n] == '\0' || argv[i][n] == '=')) return 1;
    return 0;
}

/* af_packet ring frame size for an MTU (the PMD's default below jumbo). */
static unsigned afPacketFrameSize(int mtu) {
    if (mtu <= 1500) return 2048;
    /* the PMD walks its ring as if frames were contiguous, so a block must
     * hold a whole number of frames with no gap: 1 KB multiples, 4 a block */
    return RTE_ALIGN((unsigned)mtu + ETH_FRAME_OVERHEAD + AF_PACKET_FRAME_OVERHEAD, 1024U);
}

/* The af_packet vdev's interface in eal_args ("iface=NAME"), or "". */
static void afPacketIface(const char *eal_args, char *out, size_t len) {
    out[0] = '\0';
    const char *vdev = eal_args ? strstr(eal_args, "net_af_packet") : NULL;
    const char *iface = vdev ? strstr(vdev, "iface=") : NULL;
    if (iface) {
        iface += 6;
        snprintf(out, len, "%.*s", (int)strcspn(iface, ", \t"), iface);
    }
}

/* The af_packet vdev's kernel interface MTU, or 0 (no af_packet vdev). */
static int afPacketIfaceMtu(const char *eal_args) {
    char iface[64], path[128];
    afPacketIface(eal_args, iface, sizeof(iface));
    int mtu = 0;
    if (iface[0]) {
        snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", iface);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &mtu) != 1) mtu = 0;
            fclose(f);
        }
    }
    return mtu;
}

/* cfg->mtu, or the af_packet interface's MTU, or 1500. */
static int resolveMtu(const ir_config *cfg) {
    if (cfg->mtu > 0) return cfg->mtu;
    int mtu = afPacketIfaceMtu(cfg->eal_args);
    return mtu >= IR_MTU_MIN && mtu <= IR_MTU_MAX ? mtu : 1500;
}

static int ealInit(const char *args, int mtu, int verbose) {
    if (eal_state == EAL_UP) {
        ir_set_error("rte_eal_init: EAL is already running in this process (one dpdk "
                     "transport per process)");
        return IR_ERUNNING;
    }
    if (eal_state == EAL_DONE) {
        ir_set_error("rte_eal_init: EAL was initialized and cleaned up earlier in this "
                     "process and DPDK cannot initialize it again: start a new process");
        return IR_ENOSTACK;
    }
    free(eal_argbuf);
    eal_argbuf = strdup(args);
    if (!eal_argbuf) {
        ir_set_error("out of memory parsing eal_args");
        return IR_ENOMEM;
    }
    int argc = 0;
    eal_argv[argc++] = "inreplay";
    char *save = NULL;
    for (char *tok = strtok_r(eal_argbuf, " \t\n", &save); tok;
         tok = strtok_r(NULL, " \t\n", &save)) {
        if (argc >= MAX_EAL_ARGS) {
            ir_set_error("eal_args: more than %d arguments", MAX_EAL_ARGS - 1);
            return IR_ECONFIG;
        }
        eal_argv[argc++] = tok;
    }
    /* net_af_packet vdevs without framecnt get a ring that holds the receive
     * windows of a few hundred connections */
    for (int i = 1; i < argc; i++) {
        const char *dev = NULL;
        if (!strncmp(eal_argv[i], "--vdev=", 7)) dev = eal_argv[i] + 7;
        else if (i > 1 && !strcmp(eal_argv[i - 1], "--vdev")) dev = eal_argv[i];
        if (!dev || strncmp(dev, "net_af_packet", 13)) continue;
        int jumbo = mtu > 1500 && !strstr(dev, "framesz=") && !strstr(dev, "blocksz=");
        if (strstr(dev, "framecnt=") && !jumbo) continue;
        unsigned framesz = afPacketFrameSize(jumbo ? mtu : 1500);
        unsigned blocksz = framesz * AF_PACKET_FRAMES_PER_BLOCK;
        unsigned framecnt = RTE_ALIGN(AF_PACKET_RING_BYTES / framesz, AF_PACKET_FRAMES_PER_BLOCK);
        size_t n = strlen(eal_argv[i]) + 96;
        char *fixed = malloc(n);
        if (!fixed) {
            ir_set_error("out of memory parsing eal_args");
            return IR_ENOMEM;
        }
        int len = snprintf(fixed, n, "%s", eal_argv[i]);
        if (!strstr(dev, "framecnt="))
            len += snprintf(fixed + len, n - (size_t)len, ",framecnt=%u", framecnt);
        if (jumbo)
            snprintf(fixed + len, n - (size_t)len, ",framesz=%u,blocksz=%u", framesz, blocksz);
        free(eal_fixed[i]);
        eal_fixed[i] = eal_argv[i] = fixed;
        if (verbose)
            serverLog("eal_args: %s (af_packet ring sized for TCP windows and the MTU)", fixed);
    }
    if (!hasArg(argc, eal_argv, "--huge-unlink") && !hasArg(argc, eal_argv, "--in-memory") &&
        !hasArg(argc, eal_argv, "--no-huge"))
        eal_argv[argc++] = "--huge-unlink";
    eal_argv[argc] = NULL;
    int ret = rte_eal_init(argc, eal_argv);
    if (ret < 0) {
        int err = rte_errno;
        ir_set_error_errno(err, "rte_eal_init: err=%d (%s), eal_args='%s'", err, rte_strerror(err),
                           args);
        return err == EALREADY ? IR_ERUNNING
               : err == EINVAL ? IR_ECONFIG
               : err == ENOMEM ? IR_ENOMEM
                               : IR_ENET;
    }
    eal_state = EAL_UP;
    if (ret < argc - 1) {
        ir_set_error("eal_args: '%s' is not an EAL option", eal_argv[ret + 1]);
        return IR_ECONFIG;
    }
    return IR_OK;
}

static void checkLinkStatus(uint16_t port) {
    struct rte_eth_link link;
    memset(&link, 0, sizeof(link));
    for (int i = 0; i <= LINK_CHECK_MAX; i++) {
        int ret = rte_eth_link_get_nowait(port, &link);
        if (ret < 0) {
            serverLog("rte_eth_link_get_nowait: err=%d, port=%u", ret, (unsigned)port);
            return;
        }
        if (link.link_status == RTE_ETH_LINK_UP) break;
        rte_delay_ms(LINK_CHECK_INTERVAL_MS);
    }
    if (link.link_status == RTE_ETH_LINK_UP)
        serverLog("DPDK port %u: link up at %u Mbps, %s", (unsigned)port, link.link_speed,
                  link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? "full-duplex" : "half-duplex");
    else
        serverLog("DPDK port %u: link down after %d ms (continuing; traffic flows once it is up)",
                  (unsigned)port, LINK_CHECK_INTERVAL_MS * LINK_CHECK_MAX);
}

static int portInit(dpdk_transport *d, const ir_config *cfg, uint16_t port, int mtu) {
    struct lcore_queue_conf *q = d->qconf;
    struct rte_eth_conf port_conf;
    struct rte_eth_dev_info dev_info;
    uint16_t nb_rxd = RX_DESC_DEFAULT, nb_txd = TX_DESC_DEFAULT;
    int ret;

    /* mbuf pool: both rings, a burst, the cache, and room for the receive
     * windows lwIP may hold (each RX mbuf carries lwIP's pbuf in its
     * private area) */
    unsigned conns = (unsigned)RTE_MIN(cfg->maxclients > 0 ? cfg->maxclients : 1, CONN_ALLOWANCE);
    unsigned nb_mbufs = RTE_MAX(
        nb_rxd + nb_txd + MAX_PKT_BURST + MEMPOOL_CACHE_SIZE + MBUFS_PER_CONN * conns, 8192U);
    if (cfg->dpdk_mbufs) nb_mbufs = cfg->dpdk_mbufs;
    uint16_t priv = (uint16_t)RTE_ALIGN(irl_rx_priv_size(), RTE_MBUF_PRIV_ALIGN);
    unsigned frame = RTE_ALIGN(afPacketFrameSize(mtu), 1024U);
    uint16_t room = (uint16_t)RTE_MAX((unsigned)RTE_MBUF_DEFAULT_BUF_SIZE,
                                      (unsigned)RTE_PKTMBUF_HEADROOM + frame);
    d->pool = rte_pktmbuf_pool_create("ir_mbuf_pool", nb_mbufs, MEMPOOL_CACHE_SIZE, priv, room,
                                      (int)rte_socket_id());
    if (!d->pool) {
        ir_set_error("rte_pktmbuf_pool_create: err=%d (%s), n=%u mbufs of %u B (%u MB): "
                     "reserve more hugepages (--hugepages) or use fewer --mbufs",
                     rte_errno, rte_strerror(rte_errno), nb_mbufs, (unsigned)room,
                     (unsigned)((uint64_t)nb_mbufs * (room + priv + 128) >> 20));
        return IR_ENOMEM;
    }
    q->pool = d->pool;

    ret = rte_eth_dev_info_get(port, &dev_info);
    if (ret != 0) {
        ir_set_error("rte_eth_dev_info_get: err=%d, port=%u", ret, (unsigned)port);
        return IR_ENET;
    }
    memset(&port_conf, 0, sizeof(port_conf));
    port_conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
    port_conf.txmode.mq_mode = RTE_ETH_MQ_TX_NONE;
    /* Zero-copy TX segments (lwip_glue.c's linkOutput) point into lwIP's
     * malloc'd buffers, which have no IOVA a NIC could DMA from: only for
     * ports whose driver copies each frame as it sends it (af_packet). */
    q->tx_zerocopy = !strcmp(dev_info.driver_name, "net_af_packet") &&
                     priv >= sizeof(struct rte_mbuf_ext_shared_info);
    if (!q->tx_zerocopy && (dev_info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE))
        port_conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    if (q->tx_zerocopy && (dev_info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS))
        port_conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    ret = rte_eth_dev_configure(port, 1, 1, &port_conf);
    if (ret < 0) {
        ir_set_error("rte_eth_dev_configure: err=%d, port=%u", ret, (unsigned)port);
        return IR_ENET;
    }
    d->port_configured = 1;
    ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nb_rxd, &nb_txd);
    if (ret < 0) {
        ir_set_error("rte_eth_dev_adjust_nb_rx_tx_desc: err=%d, port=%u", ret, (unsigned)port);
        return IR_ENET;
    }
    int socket = rte_eth_dev_socket_id(port);
    if (socket < 0) socket = (int)rte_socket_id();

    struct rte_eth_rxconf rxq_conf = dev_info.default_rxconf;
    rxq_conf.offloads = port_conf.rxmode.offloads;
    ret = rte_eth_rx_queue_setup(port, 0, nb_rxd, (unsigned)socket, &rxq_conf, d->pool);
    if (ret < 0) {
        ir_set_error("rte_eth_rx_queue_setup: err=%d, port=%u", ret, (unsigned)port);
        return IR_ENET;
    }
    struct rte_eth_txconf txq_conf = dev_info.default_txconf;
    txq_conf.offloads = port_conf.txmode.offloads;
    ret = rte_eth_tx_queue_setup(port, 0, nb_txd, (unsigned)socket, &txq_conf);
    if (ret < 0) {
        ir_set_error("rte_eth_tx_queue_setup: err=%d, port=%u", ret, (unsigned)port);
        return IR_ENET;
    }

    q->tx_buffer =
        rte_zmalloc_socket("ir_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(MAX_PKT_BURST), 0, socket);
    if (!q->tx_buffer) {
        ir_set_error("rte_zmalloc_socket: cannot allocate the TX buffer, port=%u", (unsigned)port);
        return IR_ENOMEM;
    }
    rte_eth_tx_buffer_init(q->tx_buffer, MAX_PKT_BURST);
    ret = rte_eth_tx_buffer_set_err_callback(q->tx_buffer, txRetry, q);
    if (ret < 0) {
        ir_set_error("rte_eth_tx_buffer_set_err_callback: err=%d, port=%u", ret, (unsigned)port);
        return IR_ENET;
    }

    uint16_t cur = 0;
    if (rte_eth_dev_get_mtu(port, &cur) != 0 || cur != (uint16_t)mtu) {
        ret = rte_eth_dev_set_mtu(port, (uint16_t)mtu);
        /* DPDK 22.11's af_packet reports a 1518-byte max frame whatever the
         * ring holds: what limits it is the kernel interface's MTU and the
         * ring frame size (chosen for the MTU in ealInit) */
        int iface_mtu = afPacketIfaceMtu(cfg->eal_args);
        if (ret < 0 && iface_mtu >= mtu) {
            ret = 0;
        } else if (ret < 0 && iface_mtu > 0) {
            ir_set_error("rte_eth_dev_set_mtu: err=%d (%s), port=%u, mtu=%d: the af_packet "
                         "interface's MTU is %d; raise it (ip link set IFACE mtu %d) or "
                         "choose --mtu %d",
                         ret, rte_strerror(-ret), (unsigned)port, mtu, iface_mtu, mtu, iface_mtu);
            return IR_ECONFIG;
        } else if (ret < 0) {
            ir_set_error("rte_eth_dev_set_mtu: err=%d (%s), port=%u, mtu=%d: the port's "
                         "maximum frame is %u bytes; choose a smaller --mtu",
                         ret, rte_strerror(-ret), (unsigned)port, mtu,
                         (unsigned)dev_info.max_rx_pktlen);
            return IR_ECONFIG;
        }
    }

    ret = rte_eth_dev_start(port);
    if (ret < 0) {
        ir_set_error("rte_eth_dev_start: err=%d, port=%u", ret, (unsigned)port);
        return IR_ENET;
    }
    d->port_started = 1;
    checkLinkStatus(port);
    return IR_OK;
}

ir_transport *ir_dpdk_transport_new(struct ir_server *s, const ir_config *cfg,
                                    const ir_stats_source *stats) {
    last_code = IR_OK;
    uint32_t ip_be;
    int prefix, ret;
    if (parseIp(cfg->ip, &ip_be, &prefix) != 0) {
        ir_set_error("ip: the dpdk stack needs its IPv4 address as a.b.c.d/prefix "
                     "(e.g. 10.77.0.2/24), got '%s'",
                     cfg->ip ? cfg->ip : "");
        return fail(NULL, IR_ECONFIG);
    }
    if (!cfg->eal_args || !cfg->eal_args[strspn(cfg->eal_args, " \t\n")]) {
        ir_set_error("eal_args: the dpdk stack needs EAL arguments, e.g. \"-l 0 --no-pci "
                     "--vdev=net_af_packet0,iface=IFACE --file-prefix=inreplay\"");
        return fail(NULL, IR_ECONFIG);
    }
    if (cfg->port < 0 || cfg->port > 65535) {
        ir_set_error("port must be 0-65535, not %d", cfg->port);
        return fail(NULL, IR_ECONFIG);
    }

    dpdk_transport *d = calloc(1, sizeof(*d));
    if (!d) {
        ir_set_error("out of memory creating the dpdk transport");
        return fail(NULL, IR_ENOMEM);
    }
    d->base.ops = &dpdk_ops;
    d->base.srv = s;
    d->rx_fd = -1;

    /* 1. EAL */
    int mtu = resolveMtu(cfg);
    if (mtu < IR_MTU_MIN || mtu > IR_MTU_MAX) {
        ir_set_error("mtu must be %d-%d (1500: Ethernet, 9000: jumbo frames), not %d", IR_MTU_MIN,
                     IR_MTU_MAX, mtu);
        return fail(d, IR_ECONFIG);
    }
    if ((ret = ealInit(cfg->eal_args, mtu, cfg->verbose)) != IR_OK) return fail(d, ret);
    d->qconf = &lcore_queue_conf[rte_lcore_id()];
    memset(d->qconf, 0, sizeof(*d->qconf));

    /* 2. the port: cfg->dpdk_port, or the first one available */
    uint16_t port = RTE_MAX_ETHPORTS, pid;
    RTE_ETH_FOREACH_DEV(pid) {
        if (cfg->dpdk_port < 0 || pid == cfg->dpdk_port) {
            port = pid;
            break;
        }
    }
    if (port == RTE_MAX_ETHPORTS && cfg->dpdk_port >= 0) {
        ir_set_error("rte_eth_dev_is_valid_port: no port %d (%u probed): bind a NIC to a DPDK "
                     "driver or choose another --port",
                     cfg->dpdk_port, (unsigned)rte_eth_dev_count_avail());
        return fail(d, IR_ECONFIG);
    }
    if (port == RTE_MAX_ETHPORTS) {
        ir_set_error("rte_eth_dev_count_avail: no Ethernet ports, check eal_args (e.g. "
                     "--vdev=net_af_packet0,iface=IFACE): '%s'",
                     cfg->eal_args);
        return fail(d, IR_ENET);
    }
    d->port = port;
    d->qconf->port = port;
    d->qconf->rxq = d->qconf->txq = 0;
    d->qconf->ip_be = ip_be;

    /* 3. mbuf pool, configure, queues, TX buffer, start, link status */
    if ((ret = portInit(d, cfg, port, mtu)) != IR_OK) return fail(d, ret);

    /* 4. lwIP netif and the listener */
    struct rte_ether_addr mac;
    ret = rte_eth_macaddr_get(port, &mac);
    if (ret != 0) {
        ir_set_error("rte_eth_macaddr_get: err=%d, port=%u", ret, (unsigned)port);
        return fail(d, IR_ENET);
    }
    irl_params p = {
        .tp = &d->base,
        .dev = d->qconf,
        .mtu = (uint16_t)mtu,
        .ip_be = ip_be,
        .prefix = prefix,
        .port = cfg->port,
        .backlog = cfg->tcp_backlog,
        .keepalive_s = cfg->tcp_keepalive,
    };
    memcpy(p.mac, mac.addr_bytes, sizeof(p.mac));
    d->stack = irl_create(&p, &d->base.bound_port, &ret);
    if (!d->stack) return fail(d, ret);

    uint64_t hz = rte_get_tsc_hz();
    char iface[64];
    afPacketIface(cfg->eal_args, iface, sizeof(iface));
    if (iface[0])
        snprintf(d->carrier_path, sizeof(d->carrier_path), "/sys/class/net/%s/carrier", iface);
    d->rx_fd = afPacketSocket(iface);
    d->base.polling = 1;
    d->base.can_wait = d->rx_fd >= 0;
    snprintf(d->build, sizeof(d->build), "%s; %s; MTU %d", rte_version(), irl_build(), mtu);
    d->base.build = d->build;
    d->drain_tsc = (hz + US_PER_S - 1) / US_PER_S * BURST_TX_DRAIN_US;
    d->timer_tsc = (hz + US_PER_S - 1) / US_PER_S * LWIP_TIMER_US;
    d->stats_tsc = hz / 1000 * STATS_PERIOD_MS;
    d->qconf->prev_drain_tsc = d->qconf->prev_timer_tsc = d->qconf->prev_stats_tsc = rte_rdtsc();

    __atomic_store_n(&daemon_stats, stats, __ATOMIC_RELEASE);
    if (!telemetry_registered) {
        ret = rte_telemetry_register_cmd("/inreplay/stats", telemetryStats,
                                         "Returns inreplay's DPDK port counters and TCP "
                                         "connection counts. Takes no parameters.");
        if (ret == 0)
            ret = rte_telemetry_register_cmd("/inreplay/tables", telemetryTables,
                                             "Returns inreplay's replay tables: size, capacity "
                                             "and counters. Takes no parameters.");
        if (ret == 0) telemetry_registered = 1;
        else serverLog("rte_telemetry_register_cmd /inreplay/*: err=%d", ret);
    }
    publishStats(d, 1);
    char ip[INET_ADDRSTRLEN], name[RTE_ETH_NAME_MAX_LEN];
    inet_ntop(AF_INET, &ip_be, ip, sizeof(ip));
    if (rte_eth_dev_get_name_by_port(port, name) != 0) strcpy(name, "?");
    serverLog("DPDK port %u (%s) MAC " RTE_ETHER_ADDR_PRT_FMT ", lwIP %s/%d, TCP port %d",
              (unsigned)port, name, RTE_ETHER_ADDR_BYTES(&mac), ip, prefix, d->base.bound_port);
    return &d->base;
}
