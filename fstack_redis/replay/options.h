/* options.h - a replay table's options: what REPLAY.CREATE, the start-up
 * table's flags and a snapshot set (tableCreate's ir_table_opts, the rate
 * limiter's ir_limiter_opts) and the selector numbers they name.
 *
 * What and why a header of its own: the hosts fill these structs and the
 * engine's internal table header (table.h) keeps them, so they sit below
 * both; nothing here depends on how a table is stored.
 */
#ifndef IR_OPTIONS_H
#define IR_OPTIONS_H

#include <stdint.h>

#define IR_TABLE_NAME_MAX 200
#define IR_MAX_SAMPLE (1 << 20)
#define IR_TABLE_PF 16 /* prefetch distance of the loops over drawn items (random: cache misses) */
/* Selectors. 0 in ir_table_opts means the default (prioritized sampler,
 * fifo remover). */
enum {
    IR_SEL_DEFAULT = 0,
    IR_SEL_PRIORITIZED,
    IR_SEL_UNIFORM,
    IR_SEL_FIFO,
    IR_SEL_LIFO,
    IR_SEL_MINHEAP,
    IR_SEL_MAXHEAP,
    IR_SEL_COUNT
};
/* Every table's defaults: REPLAY.CREATE without the argument, and the start-up
 * table's flags (config.c's table takes its default texts from these). */
#define IR_TABLE_ALPHA 0.6
#define IR_TABLE_BETA 0.4
#define IR_TABLE_EPSILON 1e-6
#define IR_TABLE_XSTR_(x) #x
#define IR_TABLE_XSTR(x) IR_TABLE_XSTR_(x) /* a default as config.c's text */

typedef struct ir_table_opts {
    uint64_t capacity;
    double alpha, beta, epsilon;
    uint64_t maxbytes;
    unsigned fanout;
    uint64_t seed;
    uint64_t id_base;           /* the first id: shard index << IR_SHARD_ID_BITS */
    int sampler, remover;       /* IR_SEL_*, 0 for the defaults */
    uint32_t max_times_sampled; /* 0: no limit */
} ir_table_opts;

/* The rate limiter, Reverb's SampleToInsertRatio (limiter.h): sampling
 * waits until the table holds min_size items; with samples_per_insert > 0,
 * sampled items may run at most error_buffer ahead of samples_per_insert x
 * (inserted items - min_size), and inserts at most error_buffer behind.
 * All 0: no limit. Set once, after tableCreate, by tableLimiterSet
 * (limiter.h has the rules). */
typedef struct ir_limiter_opts {
    uint64_t min_size;
    double samples_per_insert;
    double error_buffer;
    /* Reverb's Queue(n)/Stack(n): an insert waits while the table holds n
     * items, a sample while it holds none (set by REPLAY.CREATE ... QUEUE n
     * or STACK n, which also set the selectors and MAX_TIMES_SAMPLED 1). */
    uint64_t queue;
} ir_limiter_opts;

#endif
