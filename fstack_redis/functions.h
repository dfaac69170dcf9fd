/* functions.h - Redis 7.0 functions (FUNCTION, FCALL, FCALL_RO): the
 * libraries FUNCTION LOAD keeps; the Lua side is script.c's. */
#ifndef IR_FUNCTIONS_H
#define IR_FUNCTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

struct rdbBuf;

void functionCommand(client *c);
void fcallCommand(client *c);
void fcallRoCommand(client *c);

/* The libraries as an RDB image holds them (opcode 245 and the code, each). */
void functionsRdbPut(const ir_server *s, struct rdbBuf *b);
/* Library i's code (shebang included): 1, or 0 past the last (snapshots). */
int functionsLibraryCode(const ir_server *s, size_t i, const char **code, size_t *len);
/* Snapshot loading: the libraries of a snapshot are compiled (functionsPrepare:
 * NULL with err when one does not load) before the snapshot replaces the
 * server's state, then take the place of the server's (functionsInstall) or
 * are dropped (functionsDiscard). */
struct ir_functions *functionsPrepare(ir_server *s, char *const *codes, const size_t *lens,
                                      size_t n, char *err, size_t errlen);
void functionsInstall(ir_server *s, struct ir_functions *set);
void functionsDiscard(ir_server *s, struct ir_functions *set);
/* INFO memory: functions and libraries loaded. */
void functionsInfo(const ir_server *s, uint64_t *nfuncs, uint64_t *nlibs);
/* server_free: the libraries (before scriptingFree, which takes the Lua state). */
void functionsFree(ir_server *s);

#endif /* IR_FUNCTIONS_H */
