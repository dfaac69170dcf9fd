/* acl.h - ACL users (acl.c): passwords, command categories and commands, key
 * and channel patterns, the permission check before a command runs, and the
 * ACL command. The categories of a command come from its row of the command
 * table (commands.c): the explicit ones there plus those its flags imply. */
#ifndef IR_ACL_H
#define IR_ACL_H

#include "server.h"

#define ACL_CTX_TOPLEVEL 0
#define ACL_CTX_MULTI 1
#define ACL_CTX_LUA 2

#define ACL_OK 0
#define ACL_DENIED_CMD 1
#define ACL_DENIED_KEY 2
#define ACL_DENIED_CHANNEL 3

/* Category bit of a name ("string", "@string" not accepted): -1 if unknown. */
int aclCategoryIndex(const char *name, size_t len);
/* The bits of space-separated category words ("string keyspace"). */
uint64_t aclCategoryWords(const char *words);
const char *aclCategoryName(int i); /* "" past the last */
/* The categories Redis derives from a command's flag words (write, readonly,
 * admin, pubsub, fast, blocking); scripting: the explicit ones have @scripting. */
uint64_t aclCategoriesOfFlags(const char *sflags, int scripting);

extern long long aclLogMaxLen; /* acllog-max-len */

void aclInit(ir_server *s);
void aclFree(ir_server *s);
/* Back to the start: only the default user (requirepass its password), an empty
 * log; connected clients run as the default user (test harnesses, between runs). */
void aclReset(ir_server *s);
/* A new or RESET connection: the default user; authenticated if it is on and nopass. */
void aclInitClient(client *c);
/* requirepass: the default user's password ("" = nopass), as Redis 7.0. */
void aclSetDefaultPassword(ir_server *s, const char *p, size_t len);
/* AUTH / HELLO AUTH: 1 and c is that user now, or 0 (logged in ACL LOG). */
int aclAuthenticate(client *c, const ir_arg *user, const ir_arg *pass);
/* The check before cmd runs with c->argv (ctx ACL_CTX_*): ACL_OK, or the denial,
 * logged, with *errpos the argument of the key or channel. */
int aclCheck(client *c, const ir_command *cmd, int ctx, int *errpos);
/* The same check, not logged (redis.acl_check_cmd): ACL_OK or the denial. */
int aclPermits(client *c, const ir_command *cmd, int *errpos);
/* May c's user read every key (allkeys, ~* or %R~*)? SORT's BY and GET read
 * keys no argument names, so Redis allows them only then. */
int aclFullKeyRead(const client *c);
/* Reply Redis's NOPERM error for a denial. */
void aclReplyDenied(client *c, const ir_command *cmd, int result);
/* The same as one reply of EXEC's array (a queued command refused when EXEC runs). */
void aclReplyDeniedInExec(client *c, const ir_command *cmd, int result);
/* The script's error text for a denial ("The user executing the script can't ..."). */
const char *aclScriptDeniedMessage(int result);
const char *aclClientUserName(const client *c);
/* aclfile at startup: 0, or -1 with the reason in ir_set_error. */
int aclLoadConfiguredFile(ir_server *s);
/* CLIENT KILL USER name: does c run as that user? */
int aclClientIsUser(const client *c, const char *name, size_t len);
int aclDefaultIsNopass(const ir_server *s);
int aclUserExists(const ir_server *s, const char *name, size_t len);

#endif
