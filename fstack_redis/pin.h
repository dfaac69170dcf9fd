/* pin.h - what the owners of pinned memory call (implemented in reply.c).
 *
 * Replies may point into memory their owner keeps (a replay table's arena, a
 * string's value, a replication image) instead of copying it; the owner's
 * side of that contract is these two calls. Kept apart from server.h so the
 * replay engine can honour it without including the server.
 */
#ifndef IR_PIN_H
#define IR_PIN_H

#include <stddef.h>
#include <stdint.h>

struct ir_pin;

/* The owner lets go of pinned memory: it stays mapped (maplen bytes, or
 * free()d when maplen is 0) until the last reply segment into it is written;
 * bytes is what it counts toward used memory until then. */
void pinDetach(struct ir_pin *pin, void *mem, size_t maplen, uint64_t bytes);
/* Memory in [lo, hi) is about to be rewritten: every reply segment of the
 * pin's clients that still has unsent bytes there is copied into its
 * client's buffer first (copy on overwrite). */
void pinOverwrite(struct ir_pin *pin, const char *lo, const char *hi);

#endif
