/* chunks.h - trajectories stored once: episode streams of
 * steps, kept in reference-counted chunks, and the reference records that
 * trajectory tables store as their items.
 *
 * A stream (one per writer key) has a signature declared once: named fields
 * of fixed dtype and shape. Steps are appended in batches and numbered from 0
 * in each episode. Each field's steps live in chunks of chunk_steps steps of
 * that field alone (column-major: a range of one field is contiguous inside a
 * chunk). A chunk carries a reference count: one for the stream while it may
 * still be referenced by new items (the last `history` steps), one per item
 * reference. It is freed when the count reaches 0.
 *
 * An item is a reference record (ir_chunk_item_*): per column, the field's
 * step size, the range length, its offset in the first chunk, the chunk size
 * and the handles of the chunks the range spans. A trajectory table stores
 * these records as its items; replay.c calls chunkItemRelease for every item
 * that leaves the table (eviction, removal, drop, flush).
 *
 * Chunk headers live in one array indexed by handle (grown by doubling, with
 * a free list), so records hold 32-bit handles, never pointers. Nothing is
 * allocated per request besides a new chunk's data.
 *
 * No server headers here: the commands are in t_traj.c. The store's,
 * a stream's and a layout's storage is chunk_store.h's, the engine's own.
 */
#ifndef IR_CHUNKS_H
#define IR_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#define IR_TRAJ_MAX_FIELDS 32
#define IR_TRAJ_MAX_COLS 32
#define IR_TRAJ_MAX_DIMS 6
#define IR_TRAJ_NAME_MAX 64
#define IR_TRAJ_MAX_STREAMS 65536
#define IR_TRAJ_DEFAULT_CHUNK 16
#define IR_TRAJ_DEFAULT_HISTORY 1024
#define IR_TRAJ_MAX_STEP_BYTES (64u << 20)
#define IR_TRAJ_MAX_LEN 65536       /* steps per column */
#define IR_TRAJ_MAX_HELD (1u << 20) /* chunks a stream may hold: fields x (HISTORY / CHUNK + 1) */

enum {
    IR_DT_BOOL,
    IR_DT_U8,
    IR_DT_I8,
    IR_DT_U16,
    IR_DT_I16,
    IR_DT_U32,
    IR_DT_I32,
    IR_DT_U64,
    IR_DT_I64,
    IR_DT_F16,
    IR_DT_F32,
    IR_DT_F64,
    IR_DT_COUNT
};
/* NumPy's names: "uint8", "float32", ... (-1: unknown) */
int chunkDtypeParse(const char *s, size_t len);
const char *chunkDtypeName(int dt);
size_t chunkDtypeSize(int dt);

/* The store, a stream and a trajectory table's columns: opaque outside the
 * engine (chunk_store.h is their storage, the engine's own); hosts read them
 * through the functions below. */
typedef struct ir_chunk_store ir_chunk_store;
typedef struct ir_stream ir_stream;
typedef struct ir_traj_layout ir_traj_layout;

typedef struct ir_field {
    char name[IR_TRAJ_NAME_MAX];
    int dtype;
    int ndim;
    uint32_t shape[IR_TRAJ_MAX_DIMS];
    uint32_t step_bytes;
} ir_field;

/* A column of a trajectory table (its columns are fixed by its first item). */
typedef struct ir_traj_col {
    char name[IR_TRAJ_NAME_MAX];
    int dtype, ndim;
    uint32_t shape[IR_TRAJ_MAX_DIMS];
    uint32_t step_bytes, len;
} ir_traj_col;

ir_chunk_store *chunkStoreNew(void);
void chunkStoreFree(ir_chunk_store *s);
/* Drop every stream (their holds); chunks items still reference stay. */
void chunkStoreFlushStreams(ir_chunk_store *s);
/* Start deferring frees (before a sample's draws): 0, or -1 (out of memory
 * reserving `pending`; nothing deferred, nothing may be drawn). */
int chunkDeferBegin(ir_chunk_store *s);
/* Free the deferred chunks and stop deferring. */
void chunkCollect(ir_chunk_store *s);
/* Header array + data bytes + the streams' own memory. */
uint64_t chunkStoreMemory(const ir_chunk_store *s);
/* The store's counters (REPLAY.CHUNKS, INFO). */
typedef struct ir_chunk_stats {
    uint64_t streams, chunks, chunk_bytes, references; /* live chunks, their bytes, item refs */
    uint64_t memory;                                   /* chunkStoreMemory */
    uint64_t steps_appended, chunks_made, items_made;
    uint64_t chunks_compressed, raw_bytes_compressed; /* live compressed chunks, their raw size */
} ir_chunk_stats;
void chunkStoreStats(const ir_chunk_store *s, ir_chunk_stats *out);

ir_stream *streamFind(ir_chunk_store *s, const char *name, size_t len);
/* Declare a stream: fields already parsed. An existing stream with the same
 * signature: 0 and *out it, unchanged; a different one: -1 with *err. */
int streamDeclare(ir_chunk_store *s, const char *name, size_t len, const ir_field *f,
                  uint32_t nfields, uint32_t chunk_steps, uint32_t history, int zlevel,
                  ir_stream **out, const char **err);
/* 1 if this build compresses (libzstd), else 0. */
int chunkCanCompress(void);
int streamDrop(ir_chunk_store *s, const char *name, size_t len);
/* End the episode: the stream lets go of its chunks; steps restart at 0. */
void streamEndEpisode(ir_chunk_store *s, ir_stream *st);
/* Append n steps: data[f] holds n x step_bytes of field f (lengths checked
 * by the caller). Returns 0, or -1 (out of memory: nothing appended). */
int streamAppend(ir_chunk_store *s, ir_stream *st, uint64_t n, const char *const *data);
/* The oldest step of the current episode new items may reference. */
uint64_t streamOldestStep(const ir_stream *st);
/* The name (NUL-terminated; streamNameLen bytes). */
const char *streamName(const ir_stream *st);
size_t streamNameLen(const ir_stream *st);
/* The declared fields: how many, and field f (f < streamFieldCount). */
uint32_t streamFieldCount(const ir_stream *st);
const ir_field *streamField(const ir_stream *st, uint32_t f);
/* Steps of the current episode. */
uint64_t streamSteps(const ir_stream *st);

/* A trajectory table's columns (tableTrajLayout): how many (0 until its
 * first item), column k (k < trajLayoutCols), and all of them at once (the
 * first item's, checked by the caller). */
uint32_t trajLayoutCols(const ir_traj_layout *L);
const ir_traj_col *trajLayoutCol(const ir_traj_layout *L, uint32_t k);
void trajLayoutSet(ir_traj_layout *L, const ir_traj_col *cols, uint32_t ncols);

/* One column of an item: steps [first, first + len) of a stream's field. */
typedef struct ir_colref {
    ir_stream *st;
    uint32_t field;
    uint64_t first;
    uint32_t len;
} ir_colref;

/* Check a column against its stream: 0, or -1 with a message in err. */
int chunkColCheck(const ir_colref *c, char *err, size_t errlen);
/* Bytes of the record of these columns. */
size_t chunkItemSize(const ir_colref *cols, uint32_t ncols);
/* Write the record and take its references (columns checked). */
void chunkItemMake(ir_chunk_store *s, const ir_colref *cols, uint32_t ncols, char *rec);
/* Drop the references of a record (from replay.c when an item leaves). */
void chunkItemRelease(ir_chunk_store *s, const char *rec, uint32_t len);
/* Record layout readers. */
uint32_t chunkItemCols(const char *rec);
/* Column k of rec: its step size and length. */
void chunkItemCol(const char *rec, uint32_t k, uint32_t *step_bytes, uint32_t *len);
/* Column k's chunk handles (up to max into handles); returns how many it has. */
uint32_t chunkItemColChunks(const char *rec, uint32_t k, uint32_t *handles, uint32_t max);
/* Copy column k's bytes (len x step_bytes) to dst. */
void chunkItemCopy(ir_chunk_store *s, const char *rec, uint32_t k, char *dst);

/* ---- snapshots (persist.c) -----------------------------------------------
 * Saving reads the store's header array, its free list and the streams
 * directly (chunk_store.h). Loading rebuilds an empty store (chunkStoreNew)
 * with the same handles, so the items' reference records load as they were
 * saved:
 * chunkLoadBegin sizes the header array (cap headers, handles 1..used-1),
 * chunkLoadChunk makes handle h live with 0 references and returns where its
 * `bytes` go (raw: its size before zstd, 0: stored raw), chunkLoadEnd threads
 * the free list through the other handles in the order given. Streams are
 * made with streamDeclare and given their episode with streamLoadState;
 * items are checked with chunkItemCheck, then chunkItemRetain takes their
 * references. The references a load takes are then compared with the saved
 * counts by the caller. Every function checks what it is given and returns
 * -1 (NULL) with a static *err, changing nothing. */
int chunkLoadBegin(ir_chunk_store *s, uint32_t used, uint32_t cap, const char **err);
char *chunkLoadChunk(ir_chunk_store *s, uint32_t h, uint32_t bytes, uint32_t raw, const char **err);
/* 0 if live chunk h, when compressed, is a zstd frame of its raw size. */
int chunkLoadCheckFrame(const ir_chunk_store *s, uint32_t h);
int chunkLoadEnd(ir_chunk_store *s, const uint32_t *free_list, uint32_t nfree, const char **err);
/* held: nfields x ring handles, as st->held (ring from the signature) */
int streamLoadState(ir_chunk_store *s, ir_stream *st, uint64_t nsteps, uint64_t episodes,
                    const uint32_t *held, const char **err);
int chunkItemCheck(const ir_chunk_store *s, const char *rec, uint32_t len, const ir_traj_layout *L,
                   const char **err);
void chunkItemRetain(ir_chunk_store *s, const char *rec);
/* streamDeclare prepends: a load declares in saved order and reverses once */
void chunkStoreReverseStreams(ir_chunk_store *s);

#endif
