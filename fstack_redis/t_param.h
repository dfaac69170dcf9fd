/* t_param.h - PARAM.* commands (t_param.c): parameter tables, on either host
 * (param_host.h). */
#ifndef IR_T_PARAM_H
#define IR_T_PARAM_H

#include "param_host.h"

void paramCreateCommand(client *c);
void paramPushCommand(client *c);
void paramPullCommand(client *c);
void paramSetCommand(client *c);
void paramInfoCommand(client *c);
void paramDropCommand(client *c);

#endif
