/* memory.h - the MEMORY command (object.c). */
#ifndef IR_MEMORY_H
#define IR_MEMORY_H

#include "server.h"

/* MEMORY DOCTOR | MALLOC-STATS | PURGE | STATS | USAGE key [SAMPLES n] | HELP */
void memoryCommand(client *c);

#endif
