/* pin_stub.c - the host side of pin.h for the engine's tests, which run the
 * engine without the server: no reply ever points into a table's arena, so a
 * table's pin stays NULL and these are never reached. */
#include <stdlib.h>

#include "pin.h"

void pinDetach(struct ir_pin *pin, void *mem, size_t maplen, uint64_t bytes) {
    (void)pin, (void)mem, (void)maplen, (void)bytes;
    abort();
}

void pinOverwrite(struct ir_pin *pin, const char *lo, const char *hi) {
    (void)pin, (void)lo, (void)hi;
    abort();
}
