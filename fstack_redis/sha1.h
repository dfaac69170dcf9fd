/* sha1.h - SHA-1 of a buffer (the script cache's keys, redis.sha1hex). */
#ifndef IR_SHA1_H
#define IR_SHA1_H

#include <stddef.h>

void ir_sha1(unsigned char out[20], const void *data, size_t len);
/* 40 lower-case hex digits and a NUL, as Redis's sha1hex. */
void ir_sha1hex(char out[41], const void *data, size_t len);

#endif /* IR_SHA1_H */
