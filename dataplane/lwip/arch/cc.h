/* arch/cc.h - lwIP's compiler/platform glue for the source build (Linux, gcc
 * or clang, NO_SYS=1). Only what lwIP 2.1 asks of a port. */
#ifndef IR_LWIP_ARCH_CC_H
#define IR_LWIP_ARCH_CC_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#define LWIP_ERRNO_STDINCLUDE 1
#define LWIP_TIMEVAL_PRIVATE 0
#define LWIP_DONT_PROVIDE_BYTEORDER_FUNCTIONS
#define LWIP_RAND() ((u32_t)random())
#define LWIP_PLATFORM_DIAG(x) \
    do { \
        printf x; \
    } while (0)
#define LWIP_PLATFORM_ASSERT(x) \
    do { \
        fprintf(stderr, "lwIP assertion \"%s\" failed at line %d in %s\n", x, __LINE__, __FILE__); \
        fflush(NULL); \
        abort(); \
    } while (0)

#endif /* IR_LWIP_ARCH_CC_H */
