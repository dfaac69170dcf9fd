/* script.h - Lua scripting (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT). */
#ifndef IR_SCRIPT_H
#define IR_SCRIPT_H

#include <stdint.h>

#include "server.h"

/* lua-time-limit (busy-reply-threshold), ms: a script that runs longer and has
 * not written is stopped with an error (see script.c); 0 = never. */
extern long long scriptTimeLimitMs;

/* Script flags: EVAL's shebang (#!lua flags=...) and FUNCTION's
 * redis.register_function{flags={...}}, as Redis 7.0 names them. */
#define SF_NO_WRITES (1 << 0)
#define SF_ALLOW_OOM (1 << 1)
#define SF_ALLOW_STALE (1 << 2)
#define SF_NO_CLUSTER (1 << 3)
#define SF_ALLOW_CROSS_SLOT (1 << 4)
#define SF_EVAL_COMPAT (1 << 5) /* no shebang: Redis's pre-7.0 rules */
/* The flag of one name (case-insensitive, as Redis compares them), 0 if none. */
int scriptFlagByName(const char *name, size_t len);
/* Its name (bit one of the SF_* above but SF_EVAL_COMPAT). */
const char *scriptFlagName(int bit);

/* DEBUG SET-DISABLE-DENY-SCRIPTS: 1 lets scripts call DEBUG (Redis's test suite
 * calls DEBUG PROTOCOL from scripts); the other noscript commands stay refused
 * (a nested EVAL or SCRIPT FLUSH would pull the running Lua state away). */
extern int scriptDisableDenyScript;

void evalCommand(client *c);
void evalShaCommand(client *c);
void evalRoCommand(client *c);
void evalShaRoCommand(client *c);
void scriptCommand(client *c);

/* Busy scripts: a script that runs past lua-time-limit (busy-reply-threshold)
 * lets the transport serve the other clients (a poll nested in its command,
 * when the transport allows it: poll_reentrant), which get BUSY for all but
 * the allow_busy commands (SCRIPT KILL, FUNCTION KILL, FUNCTION STATS,
 * SHUTDOWN NOSAVE ...). Its own client sends nothing meanwhile. */
int scriptBusy(const ir_server *s);
int scriptBusyIsEval(const ir_server *s); /* the busy script is an EVAL (not an FCALL) */
/* -BUSY, in the words for an EVAL (SCRIPT KILL) or a function (FUNCTION KILL). */
void addReplyBusyScript(client *c, int is_eval);
/* The BUSY error's text, without the leading '-' (EXECABORT quotes it). */
const char *scriptBusyText(int is_eval);
/* FUNCTION KILL. */
void functionKill(client *c);
/* The busy script's name, caller and run time so far (FUNCTION STATS): 1, or 0
 * when no script is busy. */
int scriptRunningFunction(const ir_server *s, const char **name, const client **caller,
                          long long *ms);

/* When the running script started (ms, wall clock): its commands' clock for
 * expiry. 0 when no script runs. */
int64_t scriptStartMs(const ir_server *s);

/* The server's Lua engine and script cache (server_free). */
void scriptingFree(ir_server *s);
/* INFO memory: the Lua engine's bytes, the scripts cached and their bodies' bytes. */
void scriptingInfo(const ir_server *s, uint64_t *lua_bytes, uint64_t *nscripts,
                   uint64_t *script_bytes);

/* ---- functions: the Lua side of FUNCTION LOAD and FCALL (functions.c keeps
 * the libraries). Functions live in their own Lua state, apart from EVAL's
 * (SCRIPT FLUSH leaves them), with EVAL's sandbox when they run; the code a
 * library runs at load time sees only redis.register_function, redis.log and
 * the version fields. */

/* redis.register_function's callback: a function named name (len bytes), desc
 * (NULL: none), flags SF_*, its Lua reference ref. NULL when taken (the
 * reference is then the callee's, see scriptFnUnref), else the error message. */
typedef const char *(*scriptFnRegister)(void *arg, const char *name, size_t len, const char *desc,
                                        size_t dlen, int flags, int ref);
/* Run a library's code (without its shebang line; the newline after it stays)
 * so that it registers its functions through cb. timeout_ms bounds the run (0:
 * none). 0, or -1 with the error (Redis's words, no ERR prefix) in err. */
int scriptFnLoad(ir_server *s, const char *code, size_t len, long long timeout_ms,
                 scriptFnRegister cb, void *arg, char *err, size_t errlen);
/* Drop a registered function's reference. */
void scriptFnUnref(ir_server *s, int ref);
/* FCALL/FCALL_RO: run function ref (name: for errors) with c's argv[3..] as
 * numkeys KEYS then ARGV, replying to c. */
void scriptFnCall(client *c, int ref, const char *name, int flags, int ro, int numkeys);
/* The functions' Lua state's bytes (0 before the first FUNCTION LOAD). */
uint64_t scriptFnMemory(const ir_server *s);

#endif /* IR_SCRIPT_H */
