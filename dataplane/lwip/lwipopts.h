/* lwipopts.h - lwIP built for the replay appliance's workload.
 *
 * Used when lwIP is built from Debian's own source package (see
 * fetch-source.sh and dataplane/meson.build); with Debian's binary liblwip
 * (the fallback) its own lwipopts.h applies: NO_SYS=0, a 64 KB window and
 * send buffer, MSS 1460.
 *
 * Why these values
 *   - NO_SYS=1: lwIP's core runs on the polling thread only (lwip_glue.c),
 *     so there is no tcpip_thread, no core lock and no sys_arch semaphores.
 *   - Windows: a 13 MB parameter pull or a 14 MB REPLAY.SAMPLE of Atari
 *     states moves in one round trip only if the sender may keep megabytes
 *     in flight. A 64 KB send buffer stops lwIP after 45 segments of 1460 B
 *     until the peer's ACKs come back, so every 64 KB costs a full round
 *     trip through the peer's wake-up. Receive window 2 MB (window scaling,
 *     shift 6), send buffer 4 MB per connection.
 *   - MSS 8960: the largest that fits a 9000-byte jumbo frame;
 *     TCP_CALCULATE_EFF_SEND_MSS lowers it to the netif's MTU - 40 (1460 at
 *     MTU 1500) for both the advertised and the sending MSS, so the MSS
 *     follows --mtu.
 *   - SACK: lwIP 2.1 offers the receiving side only (LWIP_TCP_SACK_OUT):
 *     our ACKs carry SACK blocks, so a peer's sender (the kernel's, on a
 *     13 MB SET) recovers a lost segment without resending the window.
 *   - TCP_OVERSIZE: tcp_write fills the previous segment's spare room
 *     before starting a new one, so a reply written in pieces (header,
 *     body, CRLF) still leaves in full-MSS segments.
 *   - Memory: segments and pcbs come from malloc (MEMP_MEM_MALLOC), the
 *     heap is libc's: a thousand idle connections cost nothing, and a
 *     connection's 4 MB send buffer is only memory while it is in use.
 *   - Checksums are computed while copying (LWIP_CHECKSUM_ON_COPY) and
 *     checked on receive: af_packet and veth offer no offload.
 */
#ifndef IR_LWIPOPTS_H
#define IR_LWIPOPTS_H

#define NO_SYS 1
#define SYS_LIGHTWEIGHT_PROT 0
#define LWIP_TIMERS 1
#define LWIP_NETCONN 0
#define LWIP_SOCKET 0
#define LWIP_RAW 0
#define LWIP_UDP 0
#define LWIP_DHCP 0
#define LWIP_AUTOIP 0
#define LWIP_IGMP 0
#define LWIP_DNS 0
#define LWIP_IPV4 1
#define LWIP_IPV6 0
#define LWIP_ICMP 1
#define LWIP_ARP 1
#define LWIP_ETHERNET 1
#define ARP_QUEUEING 1
#define ARP_QUEUE_LEN 64
#define ETH_PAD_SIZE 0
#define IP_REASSEMBLY 1
#define IP_FRAG 1
#define LWIP_STATS 0

/* memory */
#define MEM_LIBC_MALLOC 1
#define MEMP_MEM_MALLOC 1
#define MEM_ALIGNMENT 8
#define PBUF_POOL_SIZE 64

/* TCP */
#define LWIP_TCP 1
#define TCP_MSS 8960
#define TCP_CALCULATE_EFF_SEND_MSS 1
#define LWIP_WND_SCALE 1
#define TCP_RCV_SCALE 6
#define TCP_WND (2 * 1024 * 1024)
#define TCP_SND_BUF (4 * 1024 * 1024)
#define TCP_SND_QUEUELEN 16384
#define TCP_SNDQUEUELOWAT (TCP_SND_QUEUELEN / 2)
/* used by the netconn API only; lwIP wants it below a u16 */
#define TCP_SNDLOWAT (0xFFFF - 4 * TCP_MSS - 1)
#define TCP_OVERSIZE TCP_MSS
#define LWIP_TCP_SACK_OUT 1
#define LWIP_TCP_MAX_SACK_NUM 8
#define TCP_QUEUE_OOSEQ 1
#define TCP_LISTEN_BACKLOG 1
#define LWIP_TCP_KEEPALIVE 1
#define LWIP_TCP_TIMESTAMPS 0
#define SO_REUSE 1
#define LWIP_CHECKSUM_ON_COPY 1
#define LWIP_NETIF_TX_SINGLE_PBUF 0
#define LWIP_NOASSERT_ON_ERROR 1

/* TCP's timers tick every 10 ms (fast timer: delayed ACKs, 10 ms; slow timer:
 * RTO, persist, keepalive, 20 ms) instead of lwIP's 250/500 ms, which are
 * for radio links: with RTTs under one tick lwIP's RTO estimate bottoms out
 * at three slow ticks, so its minimum RTO drops from about 1.5 s to about
 * 60 ms. Measured through the impairment bridge at 1% loss (GET 13 MB
 * p50/p99): 7.3/9.3 s with 250 ms ticks, 2.8/3.4 s with 10 ms; 5 ms ticks
 * gave nothing more. lwIP's other timeouts are in ms and keep their meaning. */
#define TCP_TMR_INTERVAL 10

/* Retransmission timeout (dataplane/lwip/patches/0001): 1 s before any RTT
 * sample (RFC 6298), the first sample (the SYN-ACK's, on a passive open) sets
 * the estimate outright, and the estimate is floored at 60 ms: RTTs here are
 * below one 20 ms tick, so SRTT + 4 RTTVAR rounds to 0-3 ticks; 60 ms is the
 * floor the unpatched estimator reached after a dozen samples (see above), and
 * below Linux's 200 ms. Without the patch a fresh connection's RTO was 2.26 s
 * (the handshake sample averaged into the 3 s "no sample" value). */
#define TCP_RTO_INITIAL_MS 1000
#define TCP_RTO_MIN_MS 60

/* Initial sequence numbers as RFC 6528 has them: lwIP's own (a counter from
 * 6510 stepped by its tick count) lets a host on the segment guess the next one
 * and open a blind TCP session with a spoofed source. irl_tcp_isn (lwip_glue.c)
 * adds a 4-microsecond clock to SipHash-2-4 of the 4-tuple under a key drawn
 * from getrandom() at start. */
#define LWIP_HOOK_FILENAME "ir_lwip_hooks.h"
#define LWIP_HOOK_TCP_ISN(local_ip, local_port, remote_ip, remote_port) \
    irl_tcp_isn(local_ip, local_port, remote_ip, remote_port)

/* Compiled in, so the appliance can report and tests can check what it runs. */
#define IR_LWIP_SOURCE_BUILD 1

/* TIME_WAIT lasts 2 x TCP_MSL. lwIP's 60 s MSL kept a closed connection's PCB for
 * 2 minutes, and in TIME_WAIT lwIP answers a new SYN from the same address and port
 * with an ACK and ignores the client's RST (RFC 1337): a Linux client that reuses the
 * port could not connect until it expired (a connect timed out in a fresh clone's make
 * test). On the appliance's LAN, 2 s of TIME_WAIT keeps late duplicates out. */
#define TCP_MSL 1000UL

#endif /* IR_LWIPOPTS_H */
