/* chunk_store.h - the storage of chunks.h's chunk store, its streams and a
 * trajectory table's columns, for the engine's own files: chunks.c, replay.c
 * and persist.c (which saves and loads them as they are).
 *
 * What and why apart from chunks.h: chunks.h is the API hosts call (the
 * REPLAY.STREAM/APPEND/ITEM commands, the sampler's reply); this is what the
 * engine's parts share to implement it. Hosts see these types as forward
 * declarations only, so they read them through chunks.h's functions.
 */
#ifndef IR_CHUNK_STORE_H
#define IR_CHUNK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "chunks.h"

typedef struct ir_chunk {
    uint32_t refs; /* 0: on the free list */
    uint32_t next_free;
    uint32_t bytes; /* data bytes allocated (chunk_steps x step size, or compressed) */
    uint32_t raw;   /* compressed: the raw size; 0: data is raw */
    char *data;
} ir_chunk;

struct ir_stream {
    char *name;
    size_t namelen;
    uint32_t nfields;
    ir_field fields[IR_TRAJ_MAX_FIELDS];
    uint32_t chunk_steps, history;
    int zlevel;        /* COMPRESS: zstd level full chunks are compressed at; 0 none */
    uint32_t ring;     /* chunks held per field: ceil(history / chunk_steps) + 1 */
    uint32_t *held;    /* [field * ring + chunk number % ring]: handle, 0 none */
    uint64_t nsteps;   /* steps of the current episode */
    uint64_t episodes; /* episodes ended */
    struct ir_stream *next;
};

struct ir_chunk_store {
    ir_chunk *c;        /* c[0] unused: handle 0 means none */
    uint32_t cap, used; /* headers allocated, highest handle used + 1 */
    uint32_t free_head;
    ir_stream *streams;
    uint64_t nstreams;
    uint64_t chunks, chunk_bytes, references; /* live chunks, their data bytes, item refs */
    uint64_t steps_appended, items_made, chunks_made;
    uint64_t stream_bytes; /* the streams' own memory (names, held-chunk rings) */
    /* while set (chunkDeferBegin), chunks that reach 0 wait on `pending`
     * until chunkCollect (a sample reads the items it just removed); room for
     * every live chunk is reserved first, so deferring never allocates */
    int defer;
    uint32_t *pending;
    size_t npending, pending_cap;
    uint32_t *scratch; /* an append's new chunks, grown on demand and kept */
    size_t scratch_cap;
    /* zstd (IR_HAVE_ZSTD): contexts and buffers kept across requests; rawbuf
     * holds the last chunk decompressed (raw_h), sized at REPLAY.STREAM for
     * the largest chunk of a compressing stream, so a sample never allocates */
    void *cctx, *dctx;
    char *zbuf, *rawbuf;
    size_t zbuf_cap, rawbuf_cap;
    uint32_t raw_h;
    uint64_t chunks_compressed, raw_bytes_compressed; /* live compressed chunks, their raw size */
};

/* A trajectory table's columns, fixed by its first item. */
struct ir_traj_layout {
    uint32_t ncols; /* 0: no item yet */
    ir_traj_col col[IR_TRAJ_MAX_COLS];
};

#endif
