/* config.h - the one table of configuration parameters.
 *
 * Every parameter the server knows is one row of config.c's table: its Redis
 * name and alias, type, default, bounds, mutability, where its value lives
 * (a field of ir_config, a server variable, or the table's own storage for
 * parameters Redis's clients set but inreplay has no behaviour for) and a
 * one-line doc. The table drives ir_config_init's defaults, CONFIG GET and
 * CONFIG SET, and the Python side (ir_config_params_json, through cffi).
 */
#ifndef CONFIG_H
#define CONFIG_H

#include "server.h"

/* The server starts: the table's stored values go back to their defaults
 * (a process runs one server at a time, possibly several in a row). */
void configServerInit(ir_server *s);

/* The automatic BGSAVE rules of CONFIG SET save (snapshotTick applies them). */
typedef struct ir_saveparam {
    long long seconds, changes;
} ir_saveparam;
const ir_saveparam *configSaveParams(int *n);
/* CONFIG GET pattern [pattern ...] */
void configGetCommand(client *c);
/* CONFIG SET parameter value [parameter value ...]: all or nothing. */
void configSetCommand(client *c);

/* Is this parameter (name or alias) one whose value is never shown
 * (requirepass, masterauth)? The slow log redacts it. */
int configIsSensitive(const char *name, size_t len);

#endif /* CONFIG_H */
