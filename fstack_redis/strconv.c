/* strconv.c - number conversions shared by the server and the REPLAY.* hosts
 * (strconv.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strconv.h"

/* ---- numbers (same acceptance rules as Redis's util.c) ----------------- */

/* Strict: no spaces, no '+', no leading zeros, fits a long long. */
int string2ll(const char *s, size_t slen, long long *value) {
    const char *p = s;
    size_t plen = 0;
    int negative = 0;
    unsigned long long v;

    if (plen == slen || slen >= 21) return 0;
    if (slen == 1 && p[0] == '0') {
        if (value) *value = 0;
        return 1;
    }
    if (p[0] == '-') {
        negative = 1;
        p++;
        plen++;
        if (plen == slen) return 0;
    }
    if (p[0] >= '1' && p[0] <= '9') {
        v = (unsigned long long)(p[0] - '0');
        p++;
        plen++;
    } else {
        return 0;
    }
    while (plen < slen && p[0] >= '0' && p[0] <= '9') {
        if (v > (ULLONG_MAX / 10)) return 0;
        v *= 10;
        if (v > (ULLONG_MAX - (unsigned long long)(p[0] - '0'))) return 0;
        v += (unsigned long long)(p[0] - '0');
        p++;
        plen++;
    }
    if (plen < slen) return 0;
    if (negative) {
        if (v > ((unsigned long long)(-(LLONG_MIN + 1)) + 1)) return 0;
        if (value) *value = (v == (unsigned long long)LLONG_MAX + 1) ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX) return 0;
        if (value) *value = (long long)v;
    }
    return 1;
}

/* A finite or infinite double with no trailing junk and no leading space. */
int string2d(const char *s, size_t slen, double *value) {
    char buf[128];
    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';
    if (buf[0] == ' ' || buf[0] == '\t' || buf[0] == '\n') return 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (end != buf + slen || (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || d == 0)) ||
        isnan(d))
        return 0;
    *value = d;
    return 1;
}

/* Digits by hand, two at a time (as Redis's ull2string): every reply header
 * ("$64\r\n", "*512\r\n") goes through here, and snprintf's "%lld" cost about
 * 700 instructions of a GET's 2,700 on the server (callgrind). Returns the
 * length without the NUL, 0 if dst is too small (as before). */
int ll2string(char *dst, size_t dstlen, long long v) {
    static const char pairs[201] = "0001020304050607080910111213141516171819"
                                   "2021222324252627282930313233343536373839"
                                   "4041424344454647484950515253545556575859"
                                   "6061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    char tmp[24];
    size_t i = sizeof(tmp);
    while (u >= 100) {
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        tmp[--i] = pairs[d + 1];
        tmp[--i] = pairs[d];
    }
    if (u >= 10) {
        tmp[--i] = pairs[u * 2 + 1];
        tmp[--i] = pairs[u * 2];
    } else {
        tmp[--i] = (char)('0' + u);
    }
    if (v < 0) tmp[--i] = '-';
    size_t n = sizeof(tmp) - i;
    if (n >= dstlen) return 0;
    memcpy(dst, tmp + i, n);
    dst[n] = '\0';
    return (int)n;
}

int double2text(char *buf, size_t len, double d) {
    int n;
    if (isinf(d)) return snprintf(buf, len, "%s", d > 0 ? "inf" : "-inf");
    /* the shortest form that reads back as the same double */
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, len, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    return n;
}

const char *blockingTimeoutParse(const char *p, size_t len, uint64_t now, uint64_t *deadline_ms) {
    char *end;
    errno = 0;
    long double v = len ? strtold(p, &end) : 0;
    if (!len || len > 5000 ||
        (p[0] == ' ' || p[0] == '\t' || p[0] == '\n' || p[0] == '\r' || p[0] == '\v' ||
         p[0] == '\f') ||
        (size_t)(end - p) != len || errno == ERANGE || isnan(v))
        return "timeout is not a float or out of range";
    long double ms = v * 1000.0L;
    /* Redis truncates to whole ms first (-0.5 ms is 0: forever); a value past
     * the range of long long converts to LLONG_MIN on x86, so Redis calls it
     * negative, and so do we */
    if (ms <= -1.0L || ms >= 9223372036854775808.0L) return "timeout is negative";
    if (ms >= (long double)(LLONG_MAX - (long long)now)) return "timeout is out of range";
    /* rounded up, as Redis 7.0.15: 0.001 s is a 1 ms wait, not 0 (forever)
     * because 0.001 * 1000 falls just short of 1 */
    long long t = (long long)ceill(ms);
    *deadline_ms = t > 0 ? now + (uint64_t)t : 0;
    return NULL;
}
