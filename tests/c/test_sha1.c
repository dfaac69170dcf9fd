/* test_sha1.c - ir_sha1hex (the script cache's keys, redis.sha1hex) against
 * coreutils' sha1sum for every length 0..300 (padding into one or two final
 * blocks, lengths around 55/56/64) and a 1 MB buffer, plus FIPS 180's "abc". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sha1.h"

/* sha1sum's digest of buf[0..len) through a temporary file. */
static int reference(const unsigned char *buf, size_t len, char out[41]) {
    char path[] = "/tmp/ir-test-sha1-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "wb");
    if (!f || (len && fwrite(buf, 1, len, f) != len)) return -1;
    fclose(f);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "sha1sum %s", path);
    FILE *p = popen(cmd, "r");
    int ok = p && fscanf(p, "%40s", out) == 1;
    if (p) pclose(p);
    remove(path);
    return ok ? 0 : -1;
}

int main(void) {
    char got[41], want[41];
    ir_sha1hex(got, "abc", 3);
    CHECKF(!strcmp(got, "a9993e364706816aba3e25717850c26c9cd0d89d"), "abc: %s", got);
    size_t big = 1u << 20;
    unsigned char *buf = malloc(big);
    CHECK(buf != NULL);
    if (!buf) return checkSummary();
    unsigned x = 12345;
    for (size_t i = 0; i < big; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    for (size_t len = 0; len <= 300; len++) {
        ir_sha1hex(got, buf, len);
        CHECKF(reference(buf, len, want) == 0, "sha1sum failed for %zu bytes", len);
        CHECKF(!strcmp(got, want), "%zu bytes: %s, sha1sum %s", len, got, want);
    }
    ir_sha1hex(got, buf, big);
    CHECK(reference(buf, big, want) == 0);
    CHECKF(!strcmp(got, want), "1 MB: %s, sha1sum %s", got, want);
    free(buf);
    return checkSummary();
}
