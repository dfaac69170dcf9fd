/* lwip_glue.c - the lwIP side of the DPDK backend: a netif over the DPDK port,
 * ARP, and the TCP listener that implements ir_transport's connection
 * operations with lwIP's raw API.
 *
 * Why this shape
 *   lwIP is either built here from Debian's source package with
 *   dataplane/lwip/lwipopts.h (NO_SYS=1, 2 MB receive window with window
 *   scaling, 4 MB send buffer, SACK, MSS following the MTU up to jumbo
 *   frames) or, as a fallback, the system's liblwip (Debian's build: NO_SYS=0,
 *   core locking, 64 KB windows). irl_build() says which. With either, we do
 *   not start tcpip_thread: lwip_init() and sys_check_timeouts() are called
 *   from the polling thread, so the whole lwIP core -- input, timers,
 *   callbacks, tcp_write/output/close -- runs on one thread. With Debian's
 *   build lwip_tcpip_thread_id stays 0, so LWIP_ASSERT_CORE_LOCKED()
 *   (sys_check_core_locking) accepts the calls.
 *
 * Concurrency contract
 *   Only the thread that polls (the EAL main lcore, which runs ir_run's loop)
 *   enters lwIP, and it owns the lwIP core for the life of the stack; no lwIP
 *   core lock is taken because no other thread exists that could take it
 *   (no tcpip_thread, no netconn/socket API). The telemetry thread never
 *   touches lwIP: dpdk.c publishes counters for it.
 *
 * Events are queued, upcalls are deferred
 *   lwIP callbacks (accept/recv/sent/err, from irl_input or irl_timers) never
 *   call the server. They only record what happened on the connection (pbufs
 *   appended to its RX queue, eof, writable, dead) and put it on the pending
 *   list. irl_dispatch(), called once per poll iteration after the RX burst
 *   and the timers, walks a snapshot of that list and makes the upcalls
 *   (irs_accept, irs_data, irs_writable, irs_closed) outside any lwIP
 *   callback, so the server may writev/close from inside an upcall without
 *   re-entering lwIP. Output written by the upcalls is pushed with one
 *   tcp_output() per connection at the end of the dispatch.
 *
 * Receive path (zero copy)
 *   Each RX mbuf carries a struct pbuf_custom in its private area (the pool is
 *   created with irl_rx_priv_size() bytes of it). The frame becomes a PBUF_REF
 *   custom pbuf pointing at the mbuf's data (pbuf_alloced_custom), so lwIP
 *   parses the frame in place and irs_data gets a pointer into the mbuf; the
 *   mbuf returns to its pool when lwIP (or the RX queue here) frees the pbuf.
 *   No copy and no allocation per received frame on this side.
 *   Delivered bytes are tcp_recved() after the upcalls; while the server has
 *   input turned off (want_readable 0) the pbufs stay queued and the window
 *   closes, as with the kernel backend.
 *
 * Send path
 *   writev copies into lwIP (tcp_write with TCP_WRITE_FLAG_COPY, MORE between
 *   pieces) as much as the send buffer allows (pcb->snd_buf: tcp_sndbuf()
 *   is capped at 64 KB - 1 for the 16-bit API, the buffer is 4 MB) and
 *   returns the byte count, 0 when the send buffer is full. The sent callback turns into irs_writable when
 *   the server asked for it. linkoutput copies each frame into a TX mbuf
 *   (lwIP keeps its pbufs for retransmission, so they cannot be handed over).
 *
 * Lifetime
 *   ops->close detaches the pcb from its connection (callbacks and arg reset),
 *   acknowledges everything received, and tcp_close()s it (FIN after the data
 *   already written; tcp_abort only if lwIP has no memory to close). The
 *   ir_conn is freed after the current dispatch, once no list refers to it.
 *   A peer FIN (after the queued data is delivered) or an error (RST, timeout:
 *   lwIP's err callback, pcb already freed) becomes exactly one irs_closed,
 *   and never after the server called ops->close.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lwip/etharp.h"
#include "lwip/init.h"
#include "lwip/ip4_addr.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/sys.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "netif/ethernet.h"

#include "siphash.h"
#ifdef LWIP_HOOK_TCP_ISN /* our lwipopts.h (the source build); Debian's liblwip has none */
#include "ir_lwip_hooks.h"
#endif
#include "lwip_glue.h"
#include "transport.h"

#define CONN_CACHE_MAX 256 /* closed ir_conns kept for reuse */
/* Like the kernel's sk_stream_wspace test: report writable only once a good
 * part of the send buffer is free, so a large reply moves in big writes
 * rather than one small write per ACK. */
#define WRITABLE_MIN_ROOM (TCP_SND_BUF / 4)
/* The send buffer's free bytes: tcp_sndbuf() saturates at 0xFFFF. */
#define SNDBUF_FREE(pcb) ((size_t)(pcb)->snd_buf)
#define ETHTYPE_IPV4_BE 0x0008 /* 0x0800 as it sits in the frame, read as LE u16 */
#define ETHTYPE_ARP_BE 0x0608

/* The per-mbuf private area: lwIP's pbuf_custom plus the mbuf it wraps. */
typedef struct rx_pbuf {
    struct pbuf_custom pc;
    void *mbuf;
} rx_pbuf;

struct ir_conn {
    irl_stack *st;
    struct tcp_pcb *pcb; /* NULL once closed or once lwIP freed it */
    struct client *cl;
    struct pbuf *rx_head, *rx_tail; /* received, not yet delivered */
    uint32_t rx_unacked;            /* delivered, not yet tcp_recved */
    ir_conn *next_pend, *next_out, *next_dead;
    ir_conn *live_prev, *live_next; /* every unreleased connection */
    uint8_t on_pend, on_out;        /* linked on the pending / output list */
    uint8_t accepted;               /* irs_accept was called */
    uint8_t closed;                 /* released: no more upcalls, no more lwIP */
    uint8_t dead;                   /* lwIP reported an error; pcb is gone */
    uint8_t eof;                    /* the peer sent FIN */
    uint8_t readable;               /* server wants input */
    uint8_t want_wr;                /* server wants irs_writable */
    uint8_t ev_writable;            /* send buffer space was freed */
    char peer[48];
};

struct irl_stack {
    ir_transport *tp;
    void *dev;
    struct netif netif;
    struct tcp_pcb *listener;
    ir_conn *pend_head, *pend_tail; /* connections with events to deliver */
    ir_conn *out_head;              /* connections with output to push */
    ir_conn *live;                  /* unreleased connections */
    ir_conn *dead;                  /* released, not yet freed */
    ir_conn *cache;                 /* freed, for reuse */
    int ncache;
    int netif_added;
    int keepalive_s;
    int zerocopy; /* ird_tx_zerocopy(dev) */
    uint8_t mac[6];
    uint16_t mtu;
    irl_counters cnt;
};

static int lwip_ready; /* lwip_init() ran: it may run only once per process */

#if NO_SYS
/* lwIP's clock for its timers (NO_SYS=1 leaves it to the port). */
u32_t sys_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (u32_t)((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}
#endif

int irl_window_scale(void) { return LWIP_WND_SCALE ? TCP_RCV_SCALE : 0; }

#ifdef LWIP_HOOK_TCP_ISN
/* RFC 6528: ISN = M + F(localip, localport, remoteip, remoteport, secretkey), M a
 * timer ticking every 4 microseconds, F SipHash-2-4 (siphash.h) under a key from
 * getrandom() taken when the stack is created (irl_create). */
static uint8_t isn_key[16];
static int isn_keyed;

static int isnKeyInit(void) {
    size_t got = 0;
    while (got < sizeof(isn_key)) {
        ssize_t n = getrandom(isn_key + got, sizeof(isn_key) - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    isn_keyed = 1;
    return 0;
}

u32_t irl_tcp_isn(const ip_addr_t *local_ip, u16_t local_port, const ip_addr_t *remote_ip,
                  u16_t remote_port) {
    unsigned char in[12];
    u32_t l = ip4_addr_get_u32(ip_2_ip4(local_ip)), r = ip4_addr_get_u32(ip_2_ip4(remote_ip));
    memcpy(in, &l, 4);
    memcpy(in + 4, &r, 4);
    memcpy(in + 8, &local_port, 2);
    memcpy(in + 10, &remote_port, 2);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t m = ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000) / 4;
    return (u32_t)(m + siphash24(in, sizeof(in), isn_key));
}
#endif

#ifdef IR_LWIP_SOURCE_BUILD
#define LWIP_BUILD_KIND "source build with dataplane/lwip/lwipopts.h"
#else
#define LWIP_BUILD_KIND "Debian's liblwip"
#endif

#ifndef IR_LWIP_PATCHES /* dataplane/meson.build: the patch series applied */
#define IR_LWIP_PATCHES ""
#endif

const char *irl_build(void) {
    static char buf[320];
    if (!buf[0])
        snprintf(buf, sizeof(buf),
                 "lwIP %s (%s): NO_SYS %d; window %lu B; send buffer %lu B; wscale %d; "
                 "SACK %s; MSS up to %d; patches %s",
                 LWIP_VERSION_STRING, LWIP_BUILD_KIND, NO_SYS, (unsigned long)TCP_WND,
                 (unsigned long)TCP_SND_BUF, irl_window_scale(), LWIP_TCP_SACK_OUT ? "on" : "off",
                 TCP_MSS, IR_LWIP_PATCHES[0] ? IR_LWIP_PATCHES : "none");
    return buf;
}

/* ---- lists ------------------------------------------------------------- */

static void pendPush(irl_stack *st, ir_conn *c) {
    if (c->on_pend || c->closed) return;
    c->on_pend = 1;
    c->next_pend = NULL;
    if (st->pend_tail) st->pend_tail->next_pend = c;
    else st->pend_head = c;
    st->pend_tail = c;
}

static void outPush(irl_stack *st, ir_conn *c) {
    if (c->on_out) return;
    c->on_out = 1;
    c->next_out = st->out_head;
    st->out_head = c;
}

static ir_conn *connAlloc(irl_stack *st) {
    ir_conn *c = st->cache;
    if (c) {
        st->cache = c->next_dead;
        st->ncache--;
        memset(c, 0, sizeof(*c));
    } else {
        c = calloc(1, sizeof(*c));
        if (!c) return NULL;
    }
    c->st = st;
    c->readable = 1;
    return c;
}

static void connFree(irl_stack *st, ir_conn *c) {
    if (st->ncache < CONN_CACHE_MAX) {
        c->next_dead = st->cache;
        st->cache = c;
        st->ncache++;
    } else {
        free(c);
    }
}

/* Free released connections that no list refers to any more. */
static void reapDead(irl_stack *st) {
    ir_conn **pp = &st->dead;
    while (*pp) {
        ir_conn *c = *pp;
        if (c->on_pend || c->on_out) {
            pp = &c->next_dead;
            continue;
        }
        *pp = c->next_dead;
        connFree(st, c);
    }
}

/* ---- receive queue --------------------------------------------------------- */

/* Free the undelivered pbufs; returns their byte count. */
static uint32_t rxDrop(ir_conn *c) {
    uint32_t n = 0;
    while (c->rx_head) {
        struct pbuf *q = c->rx_head;
        c->rx_head = q->next;
        q->next = NULL;
        n += q->len;
        pbuf_free(q);
    }
    c->rx_tail = NULL;
    return n;
}

/* Open the receive window by n bytes (tcp_recved takes at most 64 KB - 1). */
static void rxAck(struct tcp_pcb *pcb, uint32_t n) {
    while (n) {
        u16_t k = n > 0xFFFF ? 0xFFFF : (u16_t)n;
        tcp_recved(pcb, k);
        n -= k;
    }
}

/* ---- release ------------------------------------------------------------- */

/* Stop all upcalls for c and let go of its pcb (graceful close). */
static void connRelease(irl_stack *st, ir_conn *c) {
    if (c->closed) return;
    c->closed = 1;
    c->cl = NULL;
    uint32_t unacked = c->rx_unacked + rxDrop(c);
    c->rx_unacked = 0;
    struct tcp_pcb *pcb = c->pcb;
    c->pcb = NULL;
    if (pcb) {
        tcp_arg(pcb, NULL);
        tcp_recv(pcb, NULL); /* lwIP's tcp_recv_null takes what still arrives */
        tcp_sent(pcb, NULL);
        tcp_err(pcb, NULL);
        /* everything received counts as read: tcp_close would RST otherwise */
        rxAck(pcb, unacked);
        if (tcp_close(pcb) != ERR_OK) tcp_abort(pcb);
    }
    if (c->live_prev) c->live_prev->live_next = c->live_next;
    else st->live = c->live_next;
    if (c->live_next) c->live_next->live_prev = c->live_prev;
    c->live_prev = c->live_next = NULL;
    if (st->cnt.connections) st->cnt.connections--;
    c->next_dead = st->dead;
    st->dead = c;
}

/* ---- lwIP callbacks: record, never upcall ---------------------------------- */

static err_t onRecv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err) {
    ir_conn *c = arg;
    if (!c) { /* not ours any more */
        if (p) {
            tcp_recved(pcb, p->tot_len);
            pbuf_free(p);
        }
        return ERR_OK;
    }
    if (!p) {
        c->eof = 1;
    } else if (err != ERR_OK) {
        pbuf_free(p);
        return ERR_OK;
    } else {
        struct pbuf *last = p;
        while (last->next) last = last->next;
        if (c->rx_tail) c->rx_tail->next = p;
        else c->rx_head = p;
        c->rx_tail = last;
    }
    pendPush(c->st, c);
    return ERR_OK;
}

/* Enough send-buffer room (and segment slots) to report writable. */
static int hasRoom(const struct tcp_pcb *pcb) {
    return SNDBUF_FREE(pcb) >= WRITABLE_MIN_ROOM && tcp_sndqueuelen(pcb) < TCP_SND_QUEUELEN / 2;
}

static err_t onSent(void *arg, struct tcp_pcb *pcb, u16_t len) {
    (void)len;
    ir_conn *c = arg;
    if (c && c->want_wr && hasRoom(pcb)) {
        c->ev_writable = 1;
        pendPush(c->st, c);
    }
    return ERR_OK;
}

static void onErr(void *arg, err_t err) {
    (void)err;
    ir_conn *c = arg;
    if (!c) return;
    c->pcb = NULL; /* lwIP has freed it */
    c->dead = 1;
    pendPush(c->st, c);
}

static err_t onAccept(void *arg, struct tcp_pcb *pcb, err_t err) {
    irl_stack *st = arg;
    if (err != ERR_OK || !pcb) return ERR_VAL;
    ir_conn *c = connAlloc(st);
    if (!c) return ERR_MEM; /* lwIP aborts the pcb */
    c->pcb = pcb;
    char ip[IP4ADDR_STRLEN_MAX];
    if (!ip4addr_ntoa_r(ip_2_ip4(&pcb->remote_ip), ip, sizeof(ip))) strcpy(ip, "?");
    snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, (unsigned)pcb->remote_port);
    tcp_arg(pcb, c);
    tcp_recv(pcb, onRecv);
    tcp_sent(pcb, onSent);
    tcp_err(pcb, onErr);
    tcp_nagle_disable(pcb); /* like TCP_NODELAY on the kernel side */
    if (st->keepalive_s > 0) {
        /* as the kernel side: probe after keepalive_s, then every third of
         * it, three times, so a silent peer's connection is reclaimed */
        ip_set_option(pcb, SOF_KEEPALIVE);
        pcb->keep_idle = (u32_t)st->keepalive_s * 1000;
        pcb->keep_intvl = (u32_t)(st->keepalive_s / 3 ? st->keepalive_s / 3 : 1) * 1000;
        pcb->keep_cnt = 3;
    }
    c->live_next = st->live;
    if (st->live) st->live->live_prev = c;
    st->live = c;
    st->cnt.connections++;
    st->cnt.accepted++;
    pendPush(st, c);
    return ERR_OK;
}

/* ---- dispatch ------------------------------------------------------------- */

static void deliver(ir_conn *c) {
    while (c->rx_head && c->readable && !c->closed) {
        struct pbuf *q = c->rx_head;
        c->rx_head = q->next;
        if (!c->rx_head) c->rx_tail = NULL;
        q->next = NULL;
        q->tot_len = q->len;
        c->rx_unacked += q->len;
        if (q->len) irs_data(c->cl, (const char *)q->payload, q->len);
        pbuf_free(q); /* the mbuf goes back to the pool */
    }
    if (!c->closed && c->pcb && c->rx_unacked) {
        rxAck(c->pcb, c->rx_unacked);
        c->rx_unacked = 0;
        outPush(c->st, c); /* a window update may be due */
    }
}

static void connEvents(irl_stack *st, ir_conn *c) {
    if (!c->accepted) {
        if (c->dead) { /* reset before the server ever saw it */
            connRelease(st, c);
            return;
        }
        c->accepted = 1;
        c->cl = irs_accept(st->tp->srv, st->tp, c);
        if (c->closed) return;
        if (!c->cl) {
            connRelease(st, c); /* the refusal written by irs_accept still goes out */
            return;
        }
    }
    deliver(c);
    if (c->closed) return;
    if (c->dead) {
        struct client *cl = c->cl;
        connRelease(st, c);
        irs_closed(cl);
        return;
    }
    if (c->ev_writable) {
        c->ev_writable = 0;
        if (c->want_wr) {
            irs_writable(c->cl);
            if (c->closed) return;
        }
    }
    if (c->eof && !c->rx_head) {
        struct client *cl = c->cl;
        connRelease(st, c);
        irs_closed(cl);
    }
}

int irl_dispatch(irl_stack *st) {
    int n = 0;
    /* a snapshot: events raised by these upcalls wait for the next call */
    ir_conn *c = st->pend_head;
    st->pend_head = st->pend_tail = NULL;
    while (c) {
        ir_conn *next = c->next_pend;
        c->next_pend = NULL;
        c->on_pend = 0;
        if (!c->closed) {
            n++;
            connEvents(st, c);
        }
        c = next;
    }
    /* one tcp_output per connection that was written to */
    c = st->out_head;
    st->out_head = NULL;
    while (c) {
        ir_conn *next = c->next_out;
        c->next_out = NULL;
        c->on_out = 0;
        if (!c->closed && c->pcb) tcp_output(c->pcb);
        c = next;
    }
    if (st->dead) reapDead(st);
    return n;
}

/* ---- transport operations --------------------------------------------------- */

ssize_t irl_writev(irl_stack *st, ir_conn *c, const struct iovec *iov, int iovcnt) {
    if (c->closed || c->dead || !c->pcb) return -1;
    struct tcp_pcb *pcb = c->pcb;
    size_t total = 0, want = 0;
    for (int i = 0; i < iovcnt; i++) want += iov[i].iov_len;
    for (int i = 0; i < iovcnt; i++) {
        const char *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left) {
            size_t room = SNDBUF_FREE(pcb);
            if (room == 0) goto out;
            if (room > 0xFFFF) room = 0xFFFF; /* tcp_write takes a u16_t */
            u16_t n = (u16_t)(left < room ? left : room);
            u8_t flags = TCP_WRITE_FLAG_COPY;
            if (total + n < want) flags |= TCP_WRITE_FLAG_MORE;
            err_t e = tcp_write(pcb, p, n, flags);
            if (e == ERR_MEM) goto out; /* segment queue full: wait for ACKs */
            if (e != ERR_OK) {
                if (total) goto out;
                return -1;
            }
            total += n;
            p += n;
            left -= n;
        }
    }
out:
    if (total) outPush(st, c);
    return (ssize_t)total;
}

void irl_want_writable(irl_stack *st, ir_conn *c, int on) {
    c->want_wr = on != 0;
    if (!on) {
        c->ev_writable = 0;
        return;
    }
    /* level-triggered like epoll: if there is room already, say so (on the
     * next dispatch, never from inside this call) */
    if (c->pcb && hasRoom(c->pcb)) {
        c->ev_writable = 1;
        pendPush(st, c);
    }
}

void irl_want_readable(irl_stack *st, ir_conn *c, int on) {
    c->readable = on != 0;
    if (on && (c->rx_head || c->eof)) pendPush(st, c);
}

void irl_close(irl_stack *st, ir_conn *c) { connRelease(st, c); }

void irl_peername(irl_stack *st, ir_conn *c, char *buf, size_t len) {
    (void)st;
    snprintf(buf, len, "%s", c->peer);
}

void irl_sockname(irl_stack *st, ir_conn *c, char *buf, size_t len) {
    (void)st;
    char ip[IP4ADDR_STRLEN_MAX] = "?";
    unsigned port = 0;
    if (c->pcb) {
        if (!ip4addr_ntoa_r(ip_2_ip4(&c->pcb->local_ip), ip, sizeof(ip))) strcpy(ip, "?");
        port = c->pcb->local_port;
    }
    snprintf(buf, len, "%s:%u", ip, port);
}

int irl_port_in_use(irl_stack *st, int port) {
    (void)st;
    for (struct tcp_pcb_listen *l = tcp_listen_pcbs.listen_pcbs; l; l = l->next)
        if (l->local_port == port) return 1;
    return 0;
}

/* ---- netif ------------------------------------------------------------------- */

/* Frames at least this long send their TCP payload from lwIP's buffers. */
#define ZEROCOPY_MIN_FRAME 1024

/* Ethernet + IPv4 + TCP header bytes at the front of the first pbuf, or 0. */
static uint16_t tcpHeaderLen(const struct pbuf *p) {
    const uint8_t *f = p->payload;
    if (p->len < SIZEOF_ETH_HDR + 20 + 20 || f[12] != 0x08 || f[13] != 0x00) return 0;
    const uint8_t *ip = f + SIZEOF_ETH_HDR;
    unsigned ihl = (ip[0] & 0x0Fu) * 4u;
    if ((ip[0] >> 4) != 4 || ip[9] != IP_PROTO_TCP || ihl < 20) return 0;
    unsigned hdr = SIZEOF_ETH_HDR + ihl + (unsigned)(ip[ihl + 12] >> 4) * 4u;
    return hdr <= p->len ? (uint16_t)hdr : 0;
}

static void txPbufFree(void *addr, void *opaque) {
    (void)addr;
    pbuf_free(opaque);
}

/* Headers are copied (lwIP rewrites them when it retransmits); the payload
 * goes as external-buffer segments holding a reference on its pbuf, which
 * lwIP never changes once written. Returns ERR_OK, or ERR_BUF to copy. */
static err_t linkOutputZeroCopy(irl_stack *st, struct pbuf *p, uint16_t hdr) {
    void *data;
    void *m = ird_tx_alloc(st->dev, hdr, &data);
    if (!m) return ERR_BUF;
    memcpy(data, p->payload, hdr);
    uint16_t off = hdr;
    for (struct pbuf *q = p; q; q = q->next, off = 0) {
        if (q->len <= off) continue;
        pbuf_ref(q);
        if (ird_tx_attach(st->dev, m, (char *)q->payload + off, (uint16_t)(q->len - off),
                          txPbufFree, q) != 0) {
            pbuf_free(q);
            ird_tx_free(m); /* releases what was attached so far */
            return ERR_BUF;
        }
    }
    ird_tx_send(st->dev, m);
    return ERR_OK;
}

static err_t linkOutput(struct netif *nif, struct pbuf *p) {
    irl_stack *st = nif->state;
    if (st->zerocopy && p->tot_len >= ZEROCOPY_MIN_FRAME) {
        uint16_t hdr = tcpHeaderLen(p);
        if (hdr && linkOutputZeroCopy(st, p, hdr) == ERR_OK) return ERR_OK;
    }
    void *data;
    void *m = ird_tx_alloc(st->dev, p->tot_len, &data);
    if (!m) {
        st->cnt.tx_nomem++;
        return ERR_MEM;
    }
    pbuf_copy_partial(p, data, p->tot_len, 0);
    ird_tx_send(st->dev, m);
    return ERR_OK;
}

static err_t netifInit(struct netif *nif) {
    irl_stack *st = nif->state;
    nif->name[0] = 'd';
    nif->name[1] = 'p';
    nif->output = etharp_output;
    nif->linkoutput = linkOutput;
    nif->mtu = st->mtu;
    nif->hwaddr_len = ETH_HWADDR_LEN;
    memcpy(nif->hwaddr, st->mac, ETH_HWADDR_LEN);
    nif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET;
    return ERR_OK;
}

static void rxFree(struct pbuf *p) { ird_rx_free(((rx_pbuf *)(void *)p)->mbuf); }

size_t irl_rx_priv_size(void) { return (sizeof(rx_pbuf) + 7) & ~(size_t)7; }

void irl_input(irl_stack *st, void *priv, void *data, uint16_t len, void *mbuf) {
    /* IPv4 and ARP only: IPv6 is not configured on this netif */
    uint16_t type;
    if (len < SIZEOF_ETH_HDR) goto drop;
    memcpy(&type, (const char *)data + 12, sizeof(type));
    if (type != ETHTYPE_IPV4_BE && type != ETHTYPE_ARP_BE) goto drop;
    rx_pbuf *r = priv;
    r->pc.custom_free_function = rxFree;
    r->mbuf = mbuf;
    struct pbuf *p = pbuf_alloced_custom(PBUF_RAW, len, PBUF_REF, &r->pc, data, len);
    if (!p) goto drop;
    if (st->netif.input(p, &st->netif) != ERR_OK) {
        st->cnt.rx_dropped++;
        pbuf_free(p);
    }
    return;
drop:
    st->cnt.rx_dropped++;
    ird_rx_free(mbuf);
}

void irl_timers(irl_stack *st) {
    (void)st;
    sys_check_timeouts();
}

long irl_max_sleep_us(const irl_stack *st) {
    (void)st;
    /* lwIP's TCP clock advances one tick per tcp_tmr() call, not with the
     * wall clock: sleeping past a tick would slow every TCP timer (keepalive,
     * retransmission) for the connections that exist */
    if (tcp_active_pcbs || tcp_tw_pcbs) return (long)TCP_TMR_INTERVAL * 1000;
    return -1;
}

int irl_busy(const irl_stack *st) {
    (void)st;
    for (struct tcp_pcb *pcb = tcp_active_pcbs; pcb; pcb = pcb->next)
        if (pcb->unsent || pcb->unacked) return 1;
    return 0;
}

void irl_get_counters(const irl_stack *st, irl_counters *out) { *out = st->cnt; }

/* ---- setup and teardown --------------------------------------------------- */

irl_stack *irl_create(const irl_params *p, int *bound_port, int *code) {
    irl_stack *st = calloc(1, sizeof(*st));
    if (!st) {
        ir_set_error("out of memory creating the lwIP stack");
        *code = IR_ENOMEM;
        return NULL;
    }
    st->tp = p->tp;
    st->dev = p->dev;
    st->mtu = p->mtu;
    st->zerocopy = ird_tx_zerocopy(p->dev);
    memcpy(st->mac, p->mac, sizeof(st->mac));
#ifdef LWIP_HOOK_TCP_ISN
    if (!isn_keyed && isnKeyInit() != 0) {
        ir_set_error("getrandom for the TCP sequence-number key: %s", strerror(errno));
        *code = IR_ENET;
        free(st);
        return NULL;
    }
#endif
    if (!lwip_ready) {
        lwip_init(); /* no tcpip_init: this thread is the only lwIP thread */
        lwip_ready = 1;
    }

    ip4_addr_t ip, mask, gw;
    ip4_addr_set_u32(&ip, p->ip_be);
    ip4_addr_set_u32(&mask,
                     lwip_htonl(p->prefix >= 32 ? 0xFFFFFFFFu : ~(0xFFFFFFFFu >> p->prefix)));
    ip4_addr_set_zero(&gw);
    if (!netif_add(&st->netif, &ip, &mask, &gw, st, netifInit, ethernet_input)) {
        ir_set_error("lwIP netif_add failed");
        *code = IR_ENET;
        free(st);
        return NULL;
    }
    st->netif_added = 1;
    netif_set_default(&st->netif);
    netif_set_up(&st->netif);
    netif_set_link_up(&st->netif);

    struct tcp_pcb *pcb = tcp_new_ip_type(IPADDR_TYPE_V4);
    if (!pcb) {
        ir_set_error("lwIP tcp_new: out of memory");
        *code = IR_ENOMEM;
        irl_destroy(st);
        return NULL;
    }
    ip_set_option(pcb, SOF_REUSEADDR);
    err_t e = tcp_bind(pcb, IP4_ADDR_ANY, (u16_t)p->port);
    if (e != ERR_OK) {
        ir_set_error("lwIP tcp_bind port %d: %s", p->port, lwip_strerr(e));
        *code = IR_ENET;
        tcp_abort(pcb);
        irl_destroy(st);
        return NULL;
    }
    st->keepalive_s = p->keepalive_s;
    int backlog = p->backlog > 255 ? 255 : p->backlog < 1 ? 1 : p->backlog;
    struct tcp_pcb *lpcb = tcp_listen_with_backlog_and_err(pcb, (u8_t)backlog, &e);
    if (!lpcb) {
        ir_set_error("lwIP tcp_listen port %d: %s", p->port, lwip_strerr(e));
        *code = IR_ENET;
        tcp_abort(pcb);
        irl_destroy(st);
        return NULL;
    }
    st->listener = lpcb;
    tcp_arg(lpcb, st);
    tcp_accept(lpcb, onAccept);
    *bound_port = lpcb->local_port;
    return st;
}

static void closeListener(irl_stack *st) {
    if (!st->listener) return;
    tcp_arg(st->listener, NULL);
    tcp_accept(st->listener, NULL);
    tcp_close(st->listener);
    st->listener = NULL;
}

void irl_quiesce(irl_stack *st) {
    closeListener(st);
    /* normally only connections lwIP accepted but the server never saw */
    while (st->live) connRelease(st, st->live);
}

void irl_shutdown(irl_stack *st) {
    closeListener(st);
    /* Connections the server never closed (normally only ones accepted by
     * lwIP but not yet dispatched: server_free closed the rest) are detached
     * without upcalls and reset. */
    while (st->live) {
        ir_conn *c = st->live;
        struct tcp_pcb *pcb = c->pcb;
        c->pcb = NULL;
        if (pcb) {
            tcp_arg(pcb, NULL);
            tcp_err(pcb, NULL);
        }
        connRelease(st, c);
        if (pcb) tcp_abort(pcb);
    }
    /* every pcb still lingering after a close (FIN_WAIT, LAST_ACK, TIME_WAIT):
     * RST now, the process is going away */
    while (tcp_active_pcbs) tcp_abort(tcp_active_pcbs);
    while (tcp_tw_pcbs) tcp_abort(tcp_tw_pcbs);
}

void irl_destroy(irl_stack *st) {
    if (!st) return;
    if (st->live || st->listener) irl_shutdown(st);
    st->pend_head = st->pend_tail = st->out_head = NULL;
    while (st->dead) {
        ir_conn *c = st->dead;
        st->dead = c->next_dead;
        free(c);
    }
    while (st->cache) {
        ir_conn *c = st->cache;
        st->cache = c->next_dead;
        free(c);
    }
    if (st->netif_added) {
        etharp_cleanup_netif(&st->netif);
        netif_set_link_down(&st->netif);
        netif_set_down(&st->netif);
        netif_remove(&st->netif);
    }
    free(st);
}
