/* util.c - number parsing, clock, errors, logging. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

/* ---- addresses ------------------------------------------------------------ */

/* One IPv4 dotted quad in s[0..len) into out[0..3]: 1, or 0 if it is not one. */
static int parseIPv4(const char *s, size_t len, unsigned char out[4]) {
    int octets = 0;
    size_t i = 0;
    while (octets < 4) {
        unsigned v = 0, digits = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && digits < 4) {
            v = v * 10 + (unsigned)(s[i++] - '0');
            digits++;
        }
        if (!digits || digits > 3 || v > 255 || (digits > 1 && s[i - digits] == '0')) return 0;
        out[octets++] = (unsigned char)v;
        if (octets < 4) {
            if (i >= len || s[i] != '.') return 0;
            i++;
        }
    }
    return i == len;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

int ir_parse_ip(const char *s, size_t len, unsigned char out[16]) {
    memset(out, 0, 16);
    if (parseIPv4(s, len, out)) return 4;
    /* IPv6 (RFC 4291 text): up to 8 groups of 1-4 hex digits, one "::" for a run of
     * zero groups, and an IPv4 dotted quad in place of the last two */
    unsigned char w[16];
    int n = 0, gap = -1;
    size_t i = 0;
    if (len >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        i = 2;
    } else if (len && s[0] == ':') {
        return 0;
    }
    while (i < len) {
        size_t j = i;
        unsigned v = 0;
        while (j < len && j - i < 5 && hexval(s[j]) >= 0) v = v * 16 + (unsigned)hexval(s[j++]);
        if (j < len && s[j] == '.') { /* the IPv4 tail */
            if (n > 12 || !parseIPv4(s + i, len - i, w + n)) return 0;
            n += 4;
            i = len;
            break;
        }
        if (j == i || j - i > 4 || n > 14) return 0;
        w[n++] = (unsigned char)(v >> 8);
        w[n++] = (unsigned char)v;
        i = j;
        if (i == len) break;
        if (s[i] != ':') return 0;
        i++;
        if (i < len && s[i] == ':') {
            if (gap >= 0) return 0;
            gap = n;
            i++;
        } else if (i == len) {
            return 0; /* a single trailing ':' */
        }
    }
    if (gap < 0) {
        if (n != 16) return 0;
        memcpy(out, w, 16);
    } else {
        if (n > 14) return 0;
        memcpy(out, w, (size_t)gap);
        memcpy(out + 16 - (n - gap), w + gap, (size_t)(n - gap));
    }
    return 6;
}

void irBytesPut(ir_bytes *b, const void *p, size_t n, size_t first) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : first;
        while (cap < b->len + n) cap *= 2;
        b->p = ir_xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
}

void *ir_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q) {
        serverLog("out of memory (%zu bytes)", n);
        abort();
    }
    return q;
}

/* ---- errors ------------------------------------------------------------ */

static _Thread_local char last_error[256];
static _Thread_local int last_errno;

const char *ir_strerror(int code) {
    switch (code) {
    case IR_OK: return "ok";
    case IR_EINVAL: return "invalid argument";
    case IR_ENOMEM: return "out of memory";
    case IR_EEMPTY: return "table is empty";
    case IR_ECONFIG: return "invalid configuration";
    case IR_ENET: return "network error";
    case IR_ENOSTACK: return "network stack not available in this build";
    case IR_ERUNNING: return "a server is already running in this process";
    default: return "unknown error";
    }
}

const char *ir_last_error(void) { return last_error; }

int ir_last_errno(void) { return last_errno; }

void ir_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    last_errno = 0;
}

void ir_set_error_errno(int err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    last_errno = err;
}

const char *ir_version(void) { return IR_VERSION_STR; }

/* ---- clock and memory -------------------------------------------------- */

uint64_t ir_mstime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Resident set size of the process (INFO used_memory_rss). */
uint64_t ir_rss_bytes(void) {
    unsigned long long pages_total, pages_rss;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    int ok = fscanf(f, "%llu %llu", &pages_total, &pages_rss) == 2;
    fclose(f);
    return ok ? pages_rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

void serverLog(const char *fmt, ...) {
    char buf[64];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    size_t off = strftime(buf, sizeof(buf), "%d %b %Y %H:%M:%S", &tm);
    snprintf(buf + off, sizeof(buf) - off, ".%03ld", ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "inreplay %s * ", buf);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- files ------------------------------------------------------------- */

int ir_create_private(const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) unlink(path);
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* ---- argument helpers -------------------------------------------------- */

int getLongLongFromArg(client *c, int i, long long *out) {
    if (!string2ll(c->argv[i].ptr, c->argv[i].len, out)) {
        addReplyStr(c, shared.notinteger);
        return -1;
    }
    return 0;
}

int getPositiveLongFromArg(client *c, int i, long long *out) {
    long long v;
    if (!string2ll(c->argv[i].ptr, c->argv[i].len, &v) || v < 0) {
        addReplyError(c, "value is out of range, must be positive");
        return -1;
    }
    *out = v;
    return 0;
}

int argEq(const client *c, int i, const char *lit) {
    size_t n = strlen(lit);
    return i < c->argc && c->argv[i].len == n && strncasecmp(c->argv[i].ptr, lit, n) == 0;
}

char *argSteal(client *c, int i, size_t *len) {
    ir_arg *a = &c->argv[i];
    *len = a->len;
    if (a->owned) {
        char *p = a->ptr;
        a->owned = 0;
        a->ptr = NULL; /* the arg is gone; handlers must not read it again */
        a->len = 0;
        return p;
    }
    char *p = malloc(a->len + 1);
    if (!p) return NULL;
    memcpy(p, a->ptr, a->len);
    p[a->len] = '\0';
    return p;
}

void forkedChildBegin(int keep) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the server went away: stop */
    if (keep < 3) keep = -1;
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 34)
    if (keep < 0 ? close_range(3, ~0u, 0) == 0
                 : (keep == 3 || close_range(3, (unsigned)keep - 1, 0) == 0) &&
                       close_range((unsigned)keep + 1, ~0u, 0) == 0)
        return;
#endif
#endif
    struct rlimit rl;
    int max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 65536)
        max = (int)rl.rlim_cur;
    for (int fd = 3; fd < max; fd++)
        if (fd != keep) close(fd);
}
