/* shm_ring.h - the segment a same-host client shares with the server (shm.c
 * serves it, shm_client.c is the client's side).
 *
 * One memfd per connection: a header page, then the request ring (the client
 * writes, the server reads) and the reply ring (the server writes, the client
 * reads). Each ring is a byte stream of RESP, exactly what a socket would
 * carry, with a head (bytes written so far) and a tail (bytes consumed so
 * far), both 64-bit counters that never wrap; a ring holds head - tail bytes
 * at offsets taken modulo its size. Each counter has one writer and sits on
 * its own cache line.
 *
 * Sleeping without losing a wake-up (the same store, fence, load on both
 * sides): a side about to sleep stores its *_waiting flag, fences, and looks
 * at the ring once more; a side that has just moved a counter fences and
 * looks at the other's flag, and if it is set writes the other's eventfd
 * (the server's doorbell, or the client's own eventfd). Either the sleeper
 * sees the new bytes or the writer sees the flag.
 *
 * The server maps the request ring twice, back to back, so that what lies
 * between tail and head is one run of memory even where it wraps (shm.c); the
 * client maps its reply ring so (shm_client.c). The segment's layout is the
 * same either way: the mirrors are only in each side's address space.
 *
 * Neither side trusts the other's counters: the server keeps the ring sizes
 * and its own counters privately and closes a connection whose client moves
 * a counter outside what is possible (shm.c); it reads only the bytes
 * between tail and head, and hands them to the parser, which copies bytes
 * before it looks at them (resp.c), so a client changing them meanwhile can
 * corrupt only its own request.
 */
#ifndef IR_SHM_RING_H
#define IR_SHM_RING_H

#include <stdint.h>

#define IR_SHM_MAGIC 0x49525348u /* "IRSH" */
#define IR_SHM_VERSION 1u
#define IR_SHM_HEADER_BYTES 4096u
#define IR_SHM_RING_MIN (64u * 1024u)
#define IR_SHM_RING_MAX (1024u * 1024u * 1024u)

typedef struct ir_shm_header {
    uint32_t magic, version;
    uint64_t req_size, rep_size;       /* as the server made them (it never reads them back) */
    _Alignas(64) uint64_t req_head;    /* client: request bytes written */
    _Alignas(64) uint64_t req_tail;    /* server: request bytes consumed */
    _Alignas(64) uint64_t rep_head;    /* server: reply bytes written */
    _Alignas(64) uint64_t rep_tail;    /* client: reply bytes consumed */
    _Alignas(64) uint32_t srv_waiting; /* the server may sleep: ring its doorbell */
    _Alignas(64) uint32_t cli_waiting; /* the client sleeps: write its eventfd */
} ir_shm_header;

/* What the server sends on the Unix socket when it accepts a connection,
 * with SCM_RIGHTS: the segment's memfd, the server's doorbell eventfd and the
 * client's eventfd (status 0), or nothing (status != 0, err says why). */
typedef struct ir_shm_hello {
    uint32_t magic, version;
    int32_t status;
    uint32_t reserved;
    uint64_t req_size, rep_size;
    char run_id[48]; /* the server's run_id (INFO server), NUL-terminated */
    char err[192];
} ir_shm_hello;

/* the ring bytes follow the header page: request ring, then reply ring */
#define IR_SHM_REQ_OFFSET ((uint64_t)IR_SHM_HEADER_BYTES)
#define IR_SHM_REP_OFFSET(req_size) ((uint64_t)IR_SHM_HEADER_BYTES + (req_size))

#define IR_SHM_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define IR_SHM_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define IR_SHM_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#endif /* IR_SHM_RING_H */
