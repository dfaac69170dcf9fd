/* check.h - the C unit tests' checks: count passes and failures, say where a
 * check failed, and end with the "N passed, M failed" line CI reads.
 *
 *   CHECK(cond)             a check; on failure prints the file, line and condition
 *   CHECKF(cond, fmt, ...)  the same, plus a message
 *   return checkSummary();  prints the totals; 1 if anything failed
 */
#ifndef IR_TESTS_CHECK_H
#define IR_TESTS_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECKF(cond, ...) \
    do { \
        if (cond) { \
            passed++; \
        } else { \
            failed++; \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__); \
            fputc('\n', stderr); \
        } \
    } while (0)

#define CHECK(cond) CHECKF(cond, "%s", "")

static inline int checkSummary(void) {
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#endif /* IR_TESTS_CHECK_H */
