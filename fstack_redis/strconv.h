/* strconv.h - a command's arguments and the number conversions every host
 * of commands shares (strconv.c): the RESP server's parser and commands, and
 * the REPLAY.* handlers on either host (replay_host.h). A shared leaf: it
 * includes nothing of the server or the engine. */
#ifndef IR_STRCONV_H
#define IR_STRCONV_H

#include <stddef.h>
#include <stdint.h>

/* One argument of the current command. ptr[len] == '\0' always. */
typedef struct ir_arg {
    char *ptr;
    size_t len;
    int owned; /* ptr is a malloc'd buffer of its own (big bulk) */
} ir_arg;

/* Parse helpers shared by the parser and commands (no reply). */
int string2ll(const char *s, size_t slen, long long *value);
int string2d(const char *s, size_t slen, double *value);
int ll2string(char *dst, size_t dstlen, long long v);
/* d as a reply writes it: the shortest form that reads back as d ("inf",
 * "-inf" for infinities). Returns the length (buf holds at least 32 bytes). */
int double2text(char *buf, size_t len, double d);
/* A BLPOP-style timeout (decimal seconds, p[len] == '\0') from now (ms) into
 * an absolute deadline in ms (0 = forever): NULL, or Redis's error text. */
const char *blockingTimeoutParse(const char *p, size_t len, uint64_t now, uint64_t *deadline_ms);

#endif
