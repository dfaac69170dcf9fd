/* debug.h - the DEBUG command: the subcommands Redis's own test suite uses
 * (see debug.c). */
#ifndef IR_DEBUG_H
#define IR_DEBUG_H

#include "server.h"

/* DEBUG <subcommand> [arg ...] (an admin command, as in Redis) */
void debugCommand(client *c);

#endif
