/* persist.h - the replay engine's records: every table (options, state,
 * items, selectors, rate limiter, TRAJECTORY columns) and the chunk store
 * with its streams, encoded through a host's writer and decoded through its
 * reader, so that every host persists tables the same way (the native
 * server's snapshot files, snapshot.c; the module host's RDB aux data,
 * module/host_module.c).
 *
 * A record is a 4-byte tag and a body whose length in bytes is known before
 * it is written (u32 = 4, u64 and f64 = 8, bytes as many as they are). The
 * writer decides what a tag, a length and each value become (the snapshot:
 * little-endian bytes; the RDB: RedisModule_SaveUnsigned and friends); the
 * reader gives them back and says how many bytes of the current record are
 * left, which bounds every count the loader trusts. The bodies are the ones
 * snapshot.c's head comment lists (TABL, TABG, TTMS, TLIM; CSTO, TSTR, TTRJ
 * in persist.c).
 *
 * Saving only reads the tables and the store (a forked child may run it).
 * Loading builds into the given fresh table set and store; the host swaps
 * them in once every record loaded and persistLoadEnd agreed.
 */
#ifndef IR_PERSIST_H
#define IR_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "chunks.h"
#include "param.h"
#include "replay.h"

#define IR_PTAG_TABL "TABL"        /* a table with the default selectors */
#define IR_PTAG_TABG "TABG"        /* a table with other selectors */
#define IR_PTAG_TTMS "TTMS"        /* times sampled of the TABL before it */
#define IR_PTAG_TLIM "TLIM"        /* the rate limiter of the table before it */
#define IR_PTAG_CSTO "CSTO"        /* the chunk store */
#define IR_PTAG_TSTR "TSTR"        /* an episode stream */
#define IR_PTAG_TTRJ "TTRJ"        /* a TRAJECTORY table's columns */
#define IR_PTAG_PARM "PARM"        /* a parameter table (param.h) and its optimizer state */
#define IR_PERSIST_TRAJ_VERSION 1u /* of the CSTO, TSTR and TTRJ bodies */

typedef struct ir_pwriter ir_pwriter;
struct ir_pwriter {
    void (*record)(ir_pwriter *w, const char tag[4], uint64_t len); /* a record's head */
    void (*bytes)(ir_pwriter *w, const void *p, size_t n);
    void (*u32)(ir_pwriter *w, uint32_t v);
    void (*u64)(ir_pwriter *w, uint64_t v);
    void (*f64)(ir_pwriter *w, double d);
    int err; /* set by the host at its first failure (an errno): the engine stops writing */
};

typedef struct ir_preader ir_preader;
struct ir_preader {
    /* Each returns 0, or -1 when the value runs past the current record or
     * cannot be read (the host keeps why). */
    int (*bytes)(ir_preader *r, void *dst, uint64_t n);
    int (*u32)(ir_preader *r, uint32_t *v);
    int (*u64)(ir_preader *r, uint64_t *v);
    int (*f64)(ir_preader *r, double *d);
    uint64_t (*left)(const ir_preader *r); /* bytes of the current record not read yet */
};

/* The chunk store and its streams (nothing for a store never used): before
 * the tables, whose items reference its chunks. */
void persistSaveChunkStore(ir_pwriter *w, const ir_chunk_store *cs);
/* A table's records: TABL or TABG, then TTRJ, TTMS, TLIM as it needs them. */
void persistSaveTable(ir_pwriter *w, const ir_table *t);
/* A parameter table's PARM record: name, optimizer and hyper-parameters, step,
 * version, the parameters and every state array (little-endian float32). */
void persistSaveParam(ir_pwriter *w, const ir_param *p);

#define IR_PERSIST_OK 0
#define IR_PERSIST_CORRUPT -1
#define IR_PERSIST_NOMEM -2
#define IR_PERSIST_UNKNOWN 1 /* not one of the engine's tags: the host's record */

typedef struct ir_ploader {
    ir_preader *r;
    ir_tables *tables;      /* fresh, filled by the records (the caller owns it) */
    ir_chunk_store *chunks; /* fresh, filled by CSTO and TSTR (the caller owns it) */
    ir_params *params;      /* fresh, filled by PARM (the caller sets and owns it; NULL:
                               a PARM record is refused) */
    uint64_t ntables;       /* TABL and TABG records loaded */
    /* internal */
    ir_table_loader tl;
    ir_table *last_table;      /* the table of the last TABL/TABG record */
    uint32_t *saved_refs;      /* each chunk's reference count as saved */
    int store_seen, traj_seen; /* a CSTO record; a TTRJ record */
    char why[200];             /* what was wrong (without the record's place) */
} ir_ploader;

void persistLoadInit(ir_ploader *L, ir_preader *r, ir_tables *tables, ir_chunk_store *chunks);
/* Load the body of one record whose tag was just read (its length bounds the
 * reader). IR_PERSIST_OK; IR_PERSIST_UNKNOWN for a tag that is not the
 * engine's (nothing read); or IR_PERSIST_CORRUPT / IR_PERSIST_NOMEM with
 * L->why. The host checks afterwards that the whole body was read. */
int persistLoadRecord(ir_ploader *L, const char tag[4]);
/* After the last record: every chunk is referenced as often as saved; the
 * tables and streams go back to their saved order. IR_PERSIST_OK or
 * IR_PERSIST_CORRUPT with L->why. */
int persistLoadEnd(ir_ploader *L);
/* Free the loader's own memory (not the tables and store). */
void persistLoadFree(ir_ploader *L);

#endif
