/* script.h - Lua scripting (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT). */
#ifndef IR_SCRIPT_H
#define IR_SCRIPT_H

#include <stdint.h>

#include "server.h"

/* lua-time-limit (busy-reply-threshold), ms: a script that runs longer and has
 * not written is stopped with an error (see script.c); 0 = never. */
extern long long scriptTimeLimitMs;

/* DEBUG SET-DISABLE-DENY-SCRIPTS: 1 lets scripts call DEBUG (Redis's test suite
 * calls DEBUG PROTOCOL from scripts); the other noscript commands stay refused
 * (a nested EVAL or SCRIPT FLUSH would pull the running Lua state away). */
extern int scriptDisableDenyScript;

void evalCommand(client *c);
void evalShaCommand(client *c);
void evalRoCommand(client *c);
void evalShaRoCommand(client *c);
void scriptCommand(client *c);

/* When the running script started (ms, wall clock): its commands' clock for
 * expiry. 0 when no script runs. */
int64_t scriptStartMs(const ir_server *s);

/* The server's Lua engine and script cache (server_free). */
void scriptingFree(ir_server *s);
/* INFO memory: the Lua engine's bytes, the scripts cached and their bodies' bytes. */
void scriptingInfo(const ir_server *s, uint64_t *lua_bytes, uint64_t *nscripts,
                   uint64_t *script_bytes);

#endif /* IR_SCRIPT_H */
