/* functions.h - Redis 7.0 functions (FUNCTION, FCALL, FCALL_RO): the
 * libraries FUNCTION LOAD keeps; the Lua side is script.c's. */
#ifndef IR_FUNCTIONS_H
#define IR_FUNCTIONS_H

#include <stddef.h>

#include "server.h"

struct rdbBuf;

void functionCommand(client *c);
void fcallCommand(client *c);
void fcallRoCommand(client *c);

/* The libraries as an RDB image holds them (opcode 245 and the code, each). */
void functionsRdbPut(const ir_server *s, struct rdbBuf *b);
/* Library i's code (shebang included): 1, or 0 past the last (snapshots). */
int functionsLibraryCode(const ir_server *s, size_t i, const char **code, size_t *len);
/* Load one library's code, replacing one of its name (snapshot loading): 0,
 * or -1 with the error in err. */
int functionsLoadRecord(ir_server *s, const char *code, size_t len, char *err, size_t errlen);
/* server_free: the libraries (before scriptingFree, which takes the Lua state). */
void functionsFree(ir_server *s);

#endif /* IR_FUNCTIONS_H */
