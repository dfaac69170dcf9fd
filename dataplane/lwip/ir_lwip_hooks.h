/* ir_lwip_hooks.h - lwIP's hooks (LWIP_HOOK_FILENAME in lwipopts.h): included by
 * lwIP's own sources once its types are known. */
#ifndef IR_LWIP_HOOKS_H
#define IR_LWIP_HOOKS_H

#include "lwip/ip_addr.h"

/* RFC 6528 initial sequence numbers: a 4-microsecond clock plus a keyed hash of
 * the connection's addresses and ports (dataplane/lwip_glue.c). */
u32_t irl_tcp_isn(const ip_addr_t *local_ip, u16_t local_port, const ip_addr_t *remote_ip,
                  u16_t remote_port);

#endif /* IR_LWIP_HOOKS_H */
