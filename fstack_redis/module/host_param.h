/* host_param.h - the module host's parameter tables (host_param.c): what
 * host_module.c calls to keep them (load, FLUSHALL, the RDB, used memory), and
 * the two things host_param.c asks of host_module.c's client. */
#ifndef IR_HOST_PARAM_H
#define IR_HOST_PARAM_H

#include <stdint.h>

#include "redismodule.h"

#include "param.h"
#include "persist.h"

typedef struct client client;

int moduleParamsInit(void); /* 0, or -1 out of memory */
void moduleParamsFree(void);
void moduleParamsFlush(void); /* FLUSHALL: every table goes, its waiters get -NOTABLE */
uint64_t moduleParamsMemory(void);
void moduleParamsSave(ir_pwriter *w); /* a PARM record per table */
/* The tables an RDB load made replace the registry's (whose waiters get -NOTABLE). */
void moduleParamsReplace(ir_params *ps);

/* host_module.c: the current command's context, and its Redis argument i */
RedisModuleCtx *moduleClientCtx(client *c);
RedisModuleString *moduleClientArg(client *c, int i);

#endif
