/* dpdk.h - the kernel-bypass transport: DPDK poll-mode drivers + lwIP.
 *
 * Built only when libdpdk and lwip are found (IR_HAVE_DPDK=1); the daemon
 * (daemon/daemon.c) creates it for cfg->stack == "dpdk" through
 * ir_dpdk_transport_new, declared in transport.h with the other stacks'
 * constructors. This header is the stack's own (dpdk.c and its telemetry);
 * no DPDK or lwIP type appears here.
 *
 * Configuration (ir_config):
 *   eal_args  EAL arguments as one space-separated string, e.g.
 *             "-l 0 --no-pci --vdev=net_af_packet0,iface=veth-ir0
 *              --file-prefix=inreplay --huge-dir=/dev/hugepages".
 *             --huge-unlink is added unless the string already has
 *             --huge-unlink, --in-memory or --no-huge, so no hugepage file
 *             outlives the process. A net_af_packet vdev without framecnt=
 *             gets framecnt=16384 (the PMD's 512-frame ring drops under
 *             concurrent uploads). The first Ethernet port found is used.
 *   ip        "a.b.c.d/prefix": the stack's IPv4 address (static; ARP via lwIP).
 *   port      TCP port to listen on (0 = any; bound_port tells which).
 *   maxclients sizes the mbuf pool.
 *
 * DPDK's EAL can be initialized once per process: after the transport is
 * destroyed (which calls rte_eal_cleanup), a second dpdk transport in the same
 * process fails with a message saying so.
 */
#ifndef IR_DPDK_H
#define IR_DPDK_H

#include <stdint.h>

/* Port and stack counters, refreshed by the polling thread every ~100 ms. */
typedef struct ir_dpdk_stats {
    int active; /* a dpdk transport is running */
    uint16_t port_id;
    int link_up;
    uint32_t link_speed_mbps;
    uint64_t rx_packets, tx_packets, rx_bytes, tx_bytes;
    uint64_t imissed, ierrors, oerrors, rx_nombuf;
    uint64_t tx_dropped;       /* frames the TX ring refused after retries */
    uint64_t tx_nomem;         /* frames lwIP could not send: mbuf pool empty */
    uint64_t tx_zerocopy_segs; /* payload segments sent from lwIP's buffers, no copy */
    uint64_t idle_waits;       /* idle sleeps on the af_packet socket (woken by frames) */
    uint64_t rx_dropped;       /* frames dropped before lwIP (not IPv4/ARP) */
    uint64_t rx_martians;      /* IPv4/ARP from 127/8 or the port's own address: dropped */
    uint64_t connections;      /* open TCP connections */
    uint64_t accepted;         /* TCP connections accepted since start */
    /* TSC cycles of loop iterations that did work, by stage */
    uint64_t tsc_hz, work_iterations;
    uint64_t cycles_rx, cycles_stack, cycles_dispatch, cycles_tx;
} ir_dpdk_stats;

/* Copy the latest snapshot (any thread). Returns 0, or -1 when no dpdk
 * transport is running (out->active == 0; the counters are the last ones). */
int ir_dpdk_get_stats(ir_dpdk_stats *out);

#endif /* IR_DPDK_H */
