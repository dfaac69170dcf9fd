/* pin.h - what the owners of pinned memory call: declared by the replay
 * engine, implemented by its host (the server's reply.c; a host without
 * zero-copy replies never pins, and its two calls are never reached).
 *
 * Replies may point into memory their owner keeps (a replay table's arena, a
 * string's value, a replication image) instead of copying it; the owner's
 * side of that contract is these two calls. Part of the engine's public
 * headers (fstack_redis/replay/), so the engine honours it without including
 * the server; the server's own owners (strings, replication) use it too.
 */
#ifndef IR_PIN_H
#define IR_PIN_H

#include <stddef.h>
#include <stdint.h>

struct ir_pin;

/* Reply chunks at least this long go by reference (pinned where their owner
 * holds a pin); shorter ones are copied. A host that copies every reply
 * still sizes replies by it, so both hosts refuse the same samples. */
#define IR_REF_MIN 4096

/* The owner lets go of pinned memory: it stays mapped (maplen bytes, or
 * free()d when maplen is 0) until the last reply segment into it is written;
 * bytes is what it counts toward used memory until then. */
void pinDetach(struct ir_pin *pin, void *mem, size_t maplen, uint64_t bytes);
/* Memory in [lo, hi) is about to be rewritten: every reply segment of the
 * pin's clients that still has unsent bytes there is copied into its
 * client's buffer first (copy on overwrite). */
void pinOverwrite(struct ir_pin *pin, const char *lo, const char *hi);

#endif
