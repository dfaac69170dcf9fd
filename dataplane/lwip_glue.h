/* lwip_glue.h - the seam between the DPDK side (dpdk.c) and the lwIP side
 * (lwip_glue.c) of the userspace stack.
 *
 * DPDK's and lwIP's headers cannot meet in one translation unit (both define
 * struct ip6_hdr, among others), so neither side's types cross this header:
 * mbufs, the device context and the per-mbuf private area are void pointers.
 *
 *   dpdk.c  --irl_*-->  lwip_glue.c     frames in, timers, event dispatch, the
 *                                        transport operations on connections
 *   dpdk.c  <--ird_*--  lwip_glue.c     frames out, RX mbufs back to the pool
 *
 * Everything here runs on the one thread that polls the port (the EAL main
 * lcore, which is also the server's thread): see the comments at the top of
 * both .c files.
 */
#ifndef IR_LWIP_GLUE_H
#define IR_LWIP_GLUE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "transport.h"

typedef struct irl_stack irl_stack;

typedef struct irl_params {
    ir_transport *tp; /* upcalls go to tp->srv with this transport */
    void *dev;        /* DPDK-side context, passed back to ird_tx_* */
    uint8_t mac[6];   /* the port's MAC address */
    uint16_t mtu;     /* IP MTU of the link */
    uint32_t ip_be;   /* IPv4 address, network byte order */
    int prefix;       /* prefix length, 1..32 */
    int port;         /* TCP port to listen on, 0 = any */
    int backlog;
    int keepalive_s; /* TCP keepalive interval in seconds, 0 = off */
} irl_params;

/* Counters for telemetry (read on the polling thread). */
typedef struct irl_counters {
    uint64_t connections; /* open connections the server knows of */
    uint64_t accepted;    /* connections accepted since start */
    uint64_t tx_nomem;    /* frames lwIP could not send: no mbuf */
    uint64_t rx_dropped;  /* frames not for IPv4/ARP, or lwIP refused */
} irl_counters;

/* ---- implemented by lwip_glue.c ----------------------------------------- */

/* "lwIP 2.1.3 (source build, NO_SYS=1, window ... B, ...)": which lwIP and
 * the options that matter for throughput. */
const char *irl_build(void);
/* The receive window's scale shift this lwIP advertises (0: no scaling). */
int irl_window_scale(void);
/* Bytes of mbuf private area every RX mbuf must carry (for its pbuf_custom). */
size_t irl_rx_priv_size(void);
/* Bring up lwIP (once per process), the netif and the listener. Returns NULL
 * and sets ir_set_error() / *code (an IR_* code) on failure. */
irl_stack *irl_create(const irl_params *p, int *bound_port, int *code);
/* One received frame. priv: the mbuf's private area (irl_rx_priv_size bytes);
 * data/len: the frame; mbuf goes back through ird_rx_free when lwIP is done. */
void irl_input(irl_stack *st, void *priv, void *data, uint16_t len, void *mbuf);
/* lwIP's timers (TCP fast/slow timers, ARP, reassembly). */
void irl_timers(irl_stack *st);
/* Deliver queued events as server upcalls, then push queued TCP output.
 * Returns the number of connections that had events. Also frees connections
 * closed since the last call. */
int irl_dispatch(irl_stack *st);
/* The longest an idle poll loop may sleep without slowing lwIP's TCP timers
 * (their clock counts tcp_tmr() calls): one TCP timer tick while any TCP
 * connection exists, else -1 (no limit). */
long irl_max_sleep_us(const irl_stack *st);
/* Nonzero while some connection still has unsent or unacknowledged data. */
int irl_busy(const irl_stack *st);
/* Teardown, step 1: close the listener and gracefully close (FIN, no
 * upcalls) connections the server has not closed. From here on irl_dispatch
 * makes no upcalls, so the server may already be gone. */
void irl_quiesce(irl_stack *st);
/* Step 2, after letting FINs out: abort every TCP connection (peers get RST) and close the listener; the RST
 * frames go out through ird_tx_send, so flush the TX buffer afterwards. */
void irl_shutdown(irl_stack *st);
/* Remove the netif and free everything (after irl_shutdown). */
void irl_destroy(irl_stack *st);
void irl_get_counters(const irl_stack *st, irl_counters *out);

/* The transport operations on a connection (see transport.h). */
ssize_t irl_writev(irl_stack *st, ir_conn *c, const struct iovec *iov, int iovcnt);
void irl_want_writable(irl_stack *st, ir_conn *c, int on);
void irl_want_readable(irl_stack *st, ir_conn *c, int on);
void irl_close(irl_stack *st, ir_conn *c);
void irl_peername(irl_stack *st, ir_conn *c, char *buf, size_t len);
void irl_sockname(irl_stack *st, ir_conn *c, char *buf, size_t len);
/* Is a TCP listener of this stack on port? (CONFIG SET port) */
int irl_port_in_use(irl_stack *st, int port);

/* ---- implemented by dpdk.c ---------------------------------------------- */

/* An mbuf with room for len bytes of frame at *data, or NULL (pool empty). */
void *ird_tx_alloc(void *dev, uint16_t len, void **data);
/* Queue a filled mbuf for transmission (buffered, see dpdk.c). */
void ird_tx_send(void *dev, void *mbuf);
/* Give a received mbuf back to its pool (lwIP freed the pbuf over it). */
void ird_rx_free(void *mbuf);
/* Zero-copy TX: nonzero when frames may carry segments that point into
 * lwIP's own buffers (the port copies frames as it sends them, as af_packet
 * does, and mbufs may carry external buffers). */
int ird_tx_zerocopy(void *dev);
/* Append len bytes at addr to the frame `mbuf` (from ird_tx_alloc) as an
 * external-buffer segment; free_cb(addr, opaque) runs once the port is done
 * with it. Returns 0, or -1 (no mbuf, too many segments: nothing attached). */
int ird_tx_attach(void *dev, void *mbuf, void *addr, uint16_t len,
                  void (*free_cb)(void *addr, void *opaque), void *opaque);
/* Free a frame that will not be sent (and every segment attached to it). */
void ird_tx_free(void *mbuf);

#endif /* IR_LWIP_GLUE_H */
