/* acl.c - ACL users: who may run which commands on which keys and channels.
 *
 * A user is a bitmap over command ids (commands.c numbers every command and
 * subcommand), a list of password hashes (SHA-256 in hex, as Redis keeps
 * them), key patterns with read/write flags and channel patterns. The check
 * before a command runs reads them and the command's key specs; it allocates
 * nothing. The default user with +@all ~* &* skips it altogether. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "acl.h"
#include "commands.h"
#include "db_internal.h"
#include "pubsub.h"

/* ---- categories --------------------------------------------------------- */

static const char *const cat_names[] = {
    "keyspace", "read",        "write",      "set",         "sortedset", "list",   "hash", "string",
    "bitmap",   "hyperloglog", "geo",        "stream",      "pubsub",    "admin",  "fast", "slow",
    "blocking", "dangerous",   "connection", "transaction", "scripting", "replay",
};
#define NCATS ((int)(sizeof(cat_names) / sizeof(cat_names[0])))
enum {
    C_READ = 1,
    C_WRITE = 2,
    C_PUBSUB = 12,
    C_ADMIN = 13,
    C_FAST = 14,
    C_SLOW = 15,
    C_BLOCKING = 16,
    C_DANGEROUS = 17
};

int aclCategoryIndex(const char *name, size_t len) {
    for (int i = 0; i < NCATS; i++)
        if (strlen(cat_names[i]) == len && strncasecmp(cat_names[i], name, len) == 0) return i;
    return -1;
}

const char *aclCategoryName(int i) { return i >= 0 && i < NCATS ? cat_names[i] : ""; }

uint64_t aclCategoryWords(const char *words) {
    uint64_t bits = 0;
    for (const char *p = words; *p;) {
        size_t n = strcspn(p, " ");
        int i = aclCategoryIndex(p, n);
        if (i >= 0) bits |= 1ull << i;
        p += n;
        p += strspn(p, " ");
    }
    return bits;
}

static int hasWord(const char *words, const char *w) {
    size_t wl = strlen(w);
    for (const char *p = words; *p;) {
        size_t n = strcspn(p, " ");
        if (n == wl && !strncmp(p, w, n)) return 1;
        p += n;
        p += strspn(p, " ");
    }
    return 0;
}

uint64_t aclCategoriesOfFlags(const char *sflags, int scripting) {
    uint64_t b = 0;
    if (hasWord(sflags, "write")) b |= 1ull << C_WRITE;
    if (hasWord(sflags, "readonly") && !scripting) b |= 1ull << C_READ;
    if (hasWord(sflags, "admin")) b |= 1ull << C_ADMIN | 1ull << C_DANGEROUS;
    if (hasWord(sflags, "pubsub")) b |= 1ull << C_PUBSUB;
    if (hasWord(sflags, "fast")) b |= 1ull << C_FAST;
    else b |= 1ull << C_SLOW;
    if (hasWord(sflags, "blocking")) b |= 1ull << C_BLOCKING;
    return b;
}

/* ---- SHA-256 (FIPS 180-4) ----------------------------------------------- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void shaBlock(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

/* hex: 64 lowercase hex digits and a NUL */
static void sha256Hex(const char *msg, size_t len, char hex[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t i = 0;
    for (; i + 64 <= len; i += 64) shaBlock(h, (const unsigned char *)msg + i);
    unsigned char tail[128] = {0};
    size_t rest = len - i;
    memcpy(tail, msg + i, rest);
    tail[rest] = 0x80;
    size_t tl = rest + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int j = 0; j < 8; j++) tail[tl - 1 - j] = (unsigned char)(bits >> (8 * j));
    shaBlock(h, tail);
    if (tl == 128) shaBlock(h, tail + 64);
    for (int j = 0; j < 8; j++) snprintf(hex + 8 * j, 9, "%08x", h[j]);
}

/* ---- users -------------------------------------------------------------- */

#define ACL_WORDS 16 /* command ids: 1024 */
#define U_ON 1
#define U_NOPASS 2
#define U_ALLKEYS 4
#define U_ALLCHANNELS 8
#define U_ALLCOMMANDS 16 /* +@all: commands added later are allowed too */
#define U_SANITIZE 32    /* sanitize-payload (RESTORE's check; shown, as Redis 7.0) */
#define U_SKIP_SANITIZE 64
#define K_READ 1
#define K_WRITE 2

typedef struct aclPat {
    char *p;
    size_t len;
    int flags; /* keys: K_READ | K_WRITE */
} aclPat;

typedef struct aclFirstArg {
    int id;
    char *arg;
} aclFirstArg;

typedef struct aclUser {
    char *name;
    int flags;
    uint64_t allowed[ACL_WORDS];
    char (*pass)[65];
    int npass;
    aclPat *keys;
    int nkeys;
    aclPat *chans;
    int nchans;
    aclFirstArg *fa;
    int nfa;
} aclUser;

typedef struct aclLogEntry {
    long long count;
    int reason, ctx;
    char *object, *username, *cinfo;
    uint64_t ctime_ms;
} aclLogEntry;

typedef struct ir_acl {
    aclUser **users; /* sorted by name; users[k] for the default user found by name */
    int nusers;
    aclUser *def;
    aclLogEntry *log; /* newest first */
    int nlog;
} ir_acl;

long long aclLogMaxLen = 128;

static ir_acl *aclOf(const ir_server *s) { return (ir_acl *)s->acl; }

static char *dupLen(const char *p, size_t len) {
    char *d = ir_xrealloc(NULL, len + 1);
    memcpy(d, p, len);
    d[len] = '\0';
    return d;
}

static aclUser *userNew(const char *name, size_t len) {
    aclUser *u = ir_xrealloc(NULL, sizeof(*u));
    memset(u, 0, sizeof(*u));
    u->name = dupLen(name, len);
    return u;
}

static void userClear(aclUser *u) {
    free(u->pass);
    for (int i = 0; i < u->nkeys; i++) free(u->keys[i].p);
    free(u->keys);
    for (int i = 0; i < u->nchans; i++) free(u->chans[i].p);
    free(u->chans);
    for (int i = 0; i < u->nfa; i++) free(u->fa[i].arg);
    free(u->fa);
    u->pass = NULL, u->keys = u->chans = NULL, u->fa = NULL;
    u->npass = u->nkeys = u->nchans = u->nfa = 0;
}

static void userFree(aclUser *u) {
    if (!u) return;
    userClear(u);
    free(u->name);
    free(u);
}

/* dst (cleared) := a deep copy of src's rules, keeping dst's name */
static void userCopy(aclUser *dst, const aclUser *src) {
    dst->flags = src->flags;
    memcpy(dst->allowed, src->allowed, sizeof(dst->allowed));
    if (src->npass) {
        dst->pass = ir_xrealloc(NULL, (size_t)src->npass * sizeof(*dst->pass));
        memcpy(dst->pass, src->pass, (size_t)src->npass * sizeof(*dst->pass));
    }
    dst->npass = src->npass;
    if (src->nkeys) dst->keys = ir_xrealloc(NULL, (size_t)src->nkeys * sizeof(aclPat));
    for (int i = 0; i < src->nkeys; i++) {
        dst->keys[i] = src->keys[i];
        dst->keys[i].p = dupLen(src->keys[i].p, src->keys[i].len);
    }
    dst->nkeys = src->nkeys;
    if (src->nchans) dst->chans = ir_xrealloc(NULL, (size_t)src->nchans * sizeof(aclPat));
    for (int i = 0; i < src->nchans; i++) {
        dst->chans[i] = src->chans[i];
        dst->chans[i].p = dupLen(src->chans[i].p, src->chans[i].len);
    }
    dst->nchans = src->nchans;
    if (src->nfa) dst->fa = ir_xrealloc(NULL, (size_t)src->nfa * sizeof(aclFirstArg));
    for (int i = 0; i < src->nfa; i++) {
        dst->fa[i].id = src->fa[i].id;
        dst->fa[i].arg = dupLen(src->fa[i].arg, strlen(src->fa[i].arg));
    }
    dst->nfa = src->nfa;
}

static aclUser *userFind(const ir_acl *a, const char *name, size_t len, int *at) {
    int lo = 0, hi = a->nusers;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const char *n = a->users[mid]->name;
        size_t nl = strlen(n);
        int cmp = memcmp(n, name, nl < len ? nl : len);
        if (!cmp) cmp = nl < len ? -1 : nl > len;
        if (!cmp) {
            if (at) *at = mid;
            return a->users[mid];
        }
        if (cmp < 0) lo = mid + 1;
        else hi = mid;
    }
    if (at) *at = lo;
    return NULL;
}

static void userInsert(ir_acl *a, aclUser *u, int at) {
    a->users = ir_xrealloc(a->users, (size_t)(a->nusers + 1) * sizeof(*a->users));
    memmove(a->users + at + 1, a->users + at, (size_t)(a->nusers - at) * sizeof(*a->users));
    a->users[at] = u;
    a->nusers++;
}

/* ---- command bits ------------------------------------------------------- */

static int bitGet(const aclUser *u, int id) { return (int)(u->allowed[id / 64] >> (id % 64)) & 1; }

static void bitSet(aclUser *u, int id, int on) {
    if (on) u->allowed[id / 64] |= 1ull << (id % 64);
    else u->allowed[id / 64] &= ~(1ull << (id % 64));
}

static void firstArgsReset(aclUser *u, int id) {
    int k = 0;
    for (int i = 0; i < u->nfa; i++) {
        if (u->fa[i].id == id) free(u->fa[i].arg);
        else u->fa[k++] = u->fa[i];
    }
    u->nfa = k;
}

/* a command (and, for a container, its subcommands) on or off */
static void permSet(aclUser *u, int id, int on) {
    bitSet(u, id, on);
    firstArgsReset(u, id);
    int n = commandIdCount();
    for (int j = 0; j < n; j++)
        if (commandIdParent(j) == id) bitSet(u, j, on);
}

static void categorySet(aclUser *u, int cat, int on) {
    int n = commandIdCount();
    for (int j = 0; j < n; j++)
        if (commandIdCats(j) & (1ull << cat)) permSet(u, j, on);
}

/* ---- rules (ACL SETUSER) ------------------------------------------------ */

static int isHash(const char *p, size_t len) {
    if (len != 64) return 0;
    for (size_t i = 0; i < len; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return 0;
    return 1;
}

static void passAdd(aclUser *u, const char hex[65]) {
    for (int i = 0; i < u->npass; i++)
        if (!strcmp(u->pass[i], hex)) return;
    u->pass = ir_xrealloc(u->pass, (size_t)(u->npass + 1) * sizeof(*u->pass));
    memcpy(u->pass[u->npass++], hex, 65);
}

static int passDel(aclUser *u, const char hex[65]) {
    for (int i = 0; i < u->npass; i++) {
        if (strcmp(u->pass[i], hex)) continue;
        memmove(u->pass + i, u->pass + i + 1, (size_t)(u->npass - i - 1) * sizeof(*u->pass));
        u->npass--;
        return 1;
    }
    return 0;
}

static void patAdd(aclPat **v, int *n, const char *p, size_t len, int flags) {
    for (int i = 0; i < *n; i++)
        if ((*v)[i].len == len && !memcmp((*v)[i].p, p, len)) {
            (*v)[i].flags |= flags;
            return;
        }
    *v = ir_xrealloc(*v, (size_t)(*n + 1) * sizeof(aclPat));
    (*v)[*n].p = dupLen(p, len);
    (*v)[*n].len = len;
    (*v)[*n].flags = flags;
    (*n)++;
}

static void patsClear(aclPat **v, int *n) {
    for (int i = 0; i < *n; i++) free((*v)[i].p);
    free(*v);
    *v = NULL;
    *n = 0;
}

static void userResetChannels(aclUser *u) {
    patsClear(&u->chans, &u->nchans);
    u->flags &= ~U_ALLCHANNELS;
}

/* One rule; 0, or -1 with errno as Redis sets it (the reason's text follows from it). */
static int userApply(aclUser *u, const char *op, size_t len) {
    if (len == 2 && !strncasecmp(op, "on", 2)) u->flags |= U_ON;
    else if (len == 3 && !strncasecmp(op, "off", 3)) u->flags &= ~U_ON;
    else if (len == 6 && !strncasecmp(op, "nopass", 6)) {
        u->flags |= U_NOPASS;
        u->npass = 0;
    } else if (len == 9 && !strncasecmp(op, "resetpass", 9)) {
        u->flags &= ~U_NOPASS;
        u->npass = 0;
    } else if ((len == 7 && !strncasecmp(op, "allkeys", 7)) || (len == 2 && !memcmp(op, "~*", 2))) {
        patsClear(&u->keys, &u->nkeys);
        u->flags |= U_ALLKEYS;
    } else if (len == 9 && !strncasecmp(op, "resetkeys", 9)) {
        patsClear(&u->keys, &u->nkeys);
        u->flags &= ~U_ALLKEYS;
    } else if ((len == 11 && !strncasecmp(op, "allchannels", 11)) ||
               (len == 2 && !memcmp(op, "&*", 2))) {
        patsClear(&u->chans, &u->nchans);
        u->flags |= U_ALLCHANNELS;
    } else if (len == 13 && !strncasecmp(op, "resetchannels", 13)) {
        userResetChannels(u);
    } else if ((len == 11 && !strncasecmp(op, "allcommands", 11)) ||
               (len == 5 && !strncasecmp(op, "+@all", 5))) {
        memset(u->allowed, 0xff, sizeof(u->allowed));
        u->flags |= U_ALLCOMMANDS;
        for (int i = 0; i < u->nfa; i++) free(u->fa[i].arg);
        u->nfa = 0;
    } else if ((len == 10 && !strncasecmp(op, "nocommands", 10)) ||
               (len == 5 && !strncasecmp(op, "-@all", 5))) {
        memset(u->allowed, 0, sizeof(u->allowed));
        u->flags &= ~U_ALLCOMMANDS;
        for (int i = 0; i < u->nfa; i++) free(u->fa[i].arg);
        u->nfa = 0;
    } else if (len == 5 && !strncasecmp(op, "reset", 5)) {
        userClear(u);
        memset(u->allowed, 0, sizeof(u->allowed));
        u->flags = U_SANITIZE;
    } else if (len == 15 && !strncasecmp(op, "clearselectors", 15)) {
        /* no selectors here */
    } else if (len == 21 && !strncasecmp(op, "skip-sanitize-payload", 21)) {
        u->flags = (u->flags & ~U_SANITIZE) | U_SKIP_SANITIZE;
    } else if (len == 16 && !strncasecmp(op, "sanitize-payload", 16)) {
        u->flags = (u->flags & ~U_SKIP_SANITIZE) | U_SANITIZE;
    } else if (op[0] == '>' || op[0] == '#' || op[0] == '<' || op[0] == '!') {
        char hex[65];
        if (op[0] == '>' || op[0] == '<') {
            sha256Hex(op + 1, len - 1, hex);
        } else {
            if (!isHash(op + 1, len - 1)) {
                errno = EBADMSG;
                return -1;
            }
            memcpy(hex, op + 1, 64);
            hex[64] = '\0';
        }
        if (op[0] == '>' || op[0] == '#') {
            passAdd(u, hex);
            u->flags &= ~U_NOPASS;
        } else if (!passDel(u, hex)) {
            errno = ENODEV;
            return -1;
        }
    } else if (op[0] == '~' || op[0] == '%') {
        int flags = K_READ | K_WRITE;
        size_t off = 1;
        if (op[0] == '%') {
            flags = 0;
            for (; off < len && op[off] != '~'; off++) {
                if (toupper((unsigned char)op[off]) == 'R') flags |= K_READ;
                else if (toupper((unsigned char)op[off]) == 'W') flags |= K_WRITE;
                else {
                    errno = EINVAL;
                    return -1;
                }
            }
            if (off >= len || !flags) {
                errno = EINVAL;
                return -1;
            }
            off++;
        }
        if (u->flags & U_ALLKEYS) {
            errno = EEXIST;
            return -1;
        }
        if (len - off == 1 && op[off] == '*' && flags == (K_READ | K_WRITE)) {
            patsClear(&u->keys, &u->nkeys);
            u->flags |= U_ALLKEYS;
        } else {
            patAdd(&u->keys, &u->nkeys, op + off, len - off, flags);
        }
    } else if (op[0] == '&') {
        if (u->flags & U_ALLCHANNELS) {
            errno = EISDIR;
            return -1;
        }
        patAdd(&u->chans, &u->nchans, op + 1, len - 1, 0);
    } else if ((op[0] == '+' || op[0] == '-') && len > 1 && op[1] == '@') {
        int cat = aclCategoryIndex(op + 2, len - 2);
        if (cat < 0) {
            errno = ENOENT;
            return -1;
        }
        categorySet(u, cat, op[0] == '+');
    } else if (op[0] == '+' || op[0] == '-') {
        const char *name = op + 1, *bar = memchr(name, '|', len - 1);
        size_t nl = bar ? (size_t)(bar - name) : len - 1;
        int id = commandIdByName(name, nl);
        if (id < 0 || commandIdParent(id) >= 0) {
            errno = ENOENT;
            return -1;
        }
        if (!bar) {
            permSet(u, id, op[0] == '+');
            return 0;
        }
        const char *sub = bar + 1;
        size_t sl = len - 1 - nl - 1;
        if (commandIdIsContainer(id)) {
            const char *bar2 = memchr(sub, '|', sl);
            int sid = commandIdByName(op + 1, bar2 ? (size_t)(bar2 - op - 1) : len - 1);
            if (sid < 0) {
                errno = ENOENT;
                return -1;
            }
            if (bar2) {
                errno = ECHILD;
                return -1;
            }
            bitSet(u, sid, op[0] == '+');
            return 0;
        }
        /* +select|0: the command with that first argument only */
        if (op[0] == '-' || !sl || memchr(sub, '|', sl)) {
            errno = ENOENT;
            return -1;
        }
        if (bitGet(u, id)) return 0;
        for (int i = 0; i < u->nfa; i++)
            if (u->fa[i].id == id && strlen(u->fa[i].arg) == sl &&
                !strncasecmp(u->fa[i].arg, sub, sl))
                return 0;
        u->fa = ir_xrealloc(u->fa, (size_t)(u->nfa + 1) * sizeof(aclFirstArg));
        u->fa[u->nfa].id = id;
        u->fa[u->nfa].arg = dupLen(sub, sl);
        for (char *p = u->fa[u->nfa].arg; *p; p++) *p = (char)tolower((unsigned char)*p);
        u->nfa++;
    } else {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

static const char *ruleError(int err) {
    switch (err) {
    case ENOENT: return "Unknown command or category name in ACL";
    case EINVAL: return "Syntax error";
    case EEXIST:
        return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and "
               "does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
    case EISDIR:
        return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and "
               "does not have any effect. Try 'resetchannels' to start with an empty list of "
               "channels";
    case ENODEV: return "The password you are trying to remove from the user does not exist";
    case EBADMSG:
        return "The password hash must be exactly 64 characters and contain only lowercase "
               "hexadecimal characters";
    case EALREADY: return "Duplicate user found. A user can only be defined once in config files";
    case ECHILD: return "Allowing first-arg of a subcommand is not supported";
    default: return "Wrong format";
    }
}

/* ---- describing a user -------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void sbCat(sbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = ir_xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sbStr(sbuf *b, const char *s) { sbCat(b, s, strlen(s)); }

static void countCat(const aclUser *u, int cat, unsigned long *on, unsigned long *off) {
    *on = *off = 0;
    int n = commandIdCount();
    for (int j = 0; j < n; j++)
        if (commandIdCats(j) & (1ull << cat)) {
            if (bitGet(u, j)) (*on)++;
            else (*off)++;
        }
}

/* The command rules that rebuild u's bitmap: +@all or -@all, the categories
 * that fit best (each with more commands in common than different), then the
 * single commands that still differ. */
static void describeCommands(const aclUser *u, sbuf *b) {
    aclUser fake, temp;
    memset(&fake, 0, sizeof(fake));
    memset(&temp, 0, sizeof(temp));
    int additive = !(u->flags & U_ALLCOMMANDS);
    sbStr(b, additive ? "-@all " : "+@all ");
    if (!additive) memset(fake.allowed, 0xff, sizeof(fake.allowed));
    memcpy(temp.allowed, u->allowed, sizeof(temp.allowed));
    char applied[NCATS] = {0};
    for (;;) {
        int best = -1;
        unsigned long mindiff = (unsigned long)-1, maxsame = 0;
        for (int j = 0; j < NCATS; j++) {
            if (applied[j]) continue;
            unsigned long on, off;
            countCat(&temp, j, &on, &off);
            unsigned long diff = additive ? off : on, same = additive ? on : off;
            if (same > diff && (diff < mindiff || (diff == mindiff && same > maxsame))) {
                best = j;
                mindiff = diff;
                maxsame = same;
            }
        }
        if (best < 0) break;
        categorySet(&fake, best, additive);
        categorySet(&temp, best, !additive);
        sbStr(b, additive ? "+@" : "-@");
        sbStr(b, cat_names[best]);
        sbStr(b, " ");
        applied[best] = 1;
    }
    int n = commandIdCount();
    char name[96];
    for (int j = 0; j < n; j++) {
        if (commandIdParent(j) >= 0) continue;
        for (int pass = 0; pass < 2; pass++) {
            /* the command, then its subcommands */
            for (int k = pass ? 0 : j; pass ? k < n : k == j; k++) {
                if (pass && commandIdParent(k) != j) continue;
                int ub = bitGet(u, k), fb = bitGet(&fake, k);
                if (ub != fb) {
                    sbStr(b, ub ? "+" : "-");
                    sbStr(b, commandIdName(k, name, sizeof(name)));
                    sbStr(b, " ");
                    if (pass) bitSet(&fake, k, ub);
                    else permSet(&fake, k, ub);
                }
                if (!pass && !ub)
                    for (int f = 0; f < u->nfa; f++)
                        if (u->fa[f].id == j) {
                            sbStr(b, "+");
                            sbStr(b, commandIdName(j, name, sizeof(name)));
                            sbStr(b, "|");
                            sbStr(b, u->fa[f].arg);
                            sbStr(b, " ");
                        }
                if (!pass) break;
            }
        }
    }
    userClear(&fake);
    userClear(&temp);
    if (b->len && b->p[b->len - 1] == ' ') b->p[--b->len] = '\0';
}

static void describeKeys(const aclUser *u, sbuf *b) {
    if (u->flags & U_ALLKEYS) {
        sbStr(b, "~*");
        return;
    }
    for (int i = 0; i < u->nkeys; i++) {
        if (i) sbStr(b, " ");
        if (u->keys[i].flags == K_READ) sbStr(b, "%R~");
        else if (u->keys[i].flags == K_WRITE) sbStr(b, "%W~");
        else sbStr(b, "~");
        sbCat(b, u->keys[i].p, u->keys[i].len);
    }
}

static void describeChannels(const aclUser *u, sbuf *b) {
    if (u->flags & U_ALLCHANNELS) {
        sbStr(b, "&*");
        return;
    }
    for (int i = 0; i < u->nchans; i++) {
        if (i) sbStr(b, " ");
        sbStr(b, "&");
        sbCat(b, u->chans[i].p, u->chans[i].len);
    }
}

/* ACL LIST's line: "user name on nopass #hash ~keys resetchannels &ch +@all" */
static void describeUser(const aclUser *u, sbuf *b) {
    sbStr(b, "user ");
    sbStr(b, u->name);
    sbStr(b, u->flags & U_ON ? " on" : " off");
    if (u->flags & U_NOPASS) sbStr(b, " nopass");
    if (u->flags & U_SKIP_SANITIZE) sbStr(b, " skip-sanitize-payload");
    if (u->flags & U_SANITIZE) sbStr(b, " sanitize-payload");
    for (int i = 0; i < u->npass; i++) {
        sbStr(b, " #");
        sbStr(b, u->pass[i]);
    }
    if ((u->flags & U_ALLKEYS) || u->nkeys) {
        sbStr(b, " ");
        describeKeys(u, b);
    }
    if (u->flags & U_ALLCHANNELS) {
        sbStr(b, " &*");
    } else {
        sbStr(b, " resetchannels");
        if (u->nchans) {
            sbStr(b, " ");
            describeChannels(u, b);
        }
    }
    sbStr(b, " ");
    describeCommands(u, b);
}

/* ---- the server's users ------------------------------------------------- */

static aclUser *newDefaultUser(void) {
    aclUser *u = userNew("default", 7);
    userApply(u, "+@all", 5);
    userApply(u, "~*", 2);
    userApply(u, "&*", 2);
    userApply(u, "on", 2);
    userApply(u, "nopass", 6);
    return u;
}

void aclInit(ir_server *s) {
    ir_acl *a = ir_xrealloc(NULL, sizeof(*a));
    memset(a, 0, sizeof(*a));
    a->def = newDefaultUser();
    userInsert(a, a->def, 0);
    s->acl = a;
    const char *rp = s->cfg.requirepass;
    if (rp && rp[0]) aclSetDefaultPassword(s, rp, strlen(rp));
}

static void logClear(ir_acl *a) {
    for (int i = 0; i < a->nlog; i++) {
        free(a->log[i].object);
        free(a->log[i].username);
        free(a->log[i].cinfo);
    }
    free(a->log);
    a->log = NULL;
    a->nlog = 0;
}

void aclFree(ir_server *s) {
    ir_acl *a = aclOf(s);
    if (!a) return;
    for (int i = 0; i < a->nusers; i++) userFree(a->users[i]);
    free(a->users);
    logClear(a);
    free(a);
    s->acl = NULL;
}

void aclReset(ir_server *s) {
    ir_acl *a = aclOf(s);
    for (int i = 0; i < a->nusers; i++) userFree(a->users[i]);
    a->nusers = 0;
    logClear(a);
    a->def = newDefaultUser();
    userInsert(a, a->def, 0);
    size_t len;
    const char *rp = serverRequirePass(s, &len);
    if (len) aclSetDefaultPassword(s, rp, len);
    for (client *o = s->clients; o; o = o->next) o->user = a->def;
}

void aclInitClient(client *c) {
    ir_acl *a = aclOf(c->srv);
    c->user = a->def;
    c->authenticated = (a->def->flags & U_NOPASS) && (a->def->flags & U_ON);
}

void aclSetDefaultPassword(ir_server *s, const char *p, size_t len) {
    aclUser *d = aclOf(s)->def;
    userApply(d, "resetpass", 9);
    if (!len) {
        userApply(d, "nopass", 6);
        return;
    }
    char hex[65];
    sha256Hex(p, len, hex);
    passAdd(d, hex);
}

const char *aclClientUserName(const client *c) {
    return c->user ? ((const aclUser *)c->user)->name : "default";
}

int aclClientIsUser(const client *c, const char *name, size_t len) {
    const char *n = aclClientUserName(c);
    return strlen(n) == len && !memcmp(n, name, len);
}

int aclDefaultIsNopass(const ir_server *s) { return !!(aclOf(s)->def->flags & U_NOPASS); }

int aclUserExists(const ir_server *s, const char *name, size_t len) {
    return userFind(aclOf(s), name, len, NULL) != NULL;
}

/* ---- the log ------------------------------------------------------------ */

#define LOG_AUTH 4

static void clientInfoText(const client *c, sbuf *b) {
    char line[512];
    snprintf(line, sizeof(line), "id=%llu addr=%s laddr=%s name=%s db=%d user=%s resp=%d",
             (unsigned long long)c->id, c->addr, c->laddr, c->clientname ? c->clientname : "",
             c->db, aclClientUserName(c), c->resp);
    sbStr(b, line);
}

/* An entry like the newest within 60 s (same reason, context, object, user) is
 * counted on it and moves to the front. */
static void logAdd(client *c, int reason, int ctx, const char *object, size_t olen,
                   const char *username, size_t ulen) {
    ir_acl *a = aclOf(c->srv);
    uint64_t now = c->srv->now_ms ? c->srv->now_ms : ir_mstime();
    for (int i = 0; i < a->nlog; i++) {
        aclLogEntry *e = &a->log[i];
        if (e->reason != reason || e->ctx != ctx || strlen(e->object) != olen ||
            memcmp(e->object, object, olen) || strlen(e->username) != ulen ||
            memcmp(e->username, username, ulen) || now - e->ctime_ms > 60000)
            continue;
        aclLogEntry keep = *e;
        keep.count++;
        keep.ctime_ms = now;
        sbuf b = {0};
        clientInfoText(c, &b);
        free(keep.cinfo);
        keep.cinfo = b.p;
        memmove(a->log + 1, a->log, (size_t)i * sizeof(*a->log));
        a->log[0] = keep;
        return;
    }
    a->log = ir_xrealloc(a->log, (size_t)(a->nlog + 1) * sizeof(*a->log));
    memmove(a->log + 1, a->log, (size_t)a->nlog * sizeof(*a->log));
    a->nlog++;
    aclLogEntry *e = &a->log[0];
    e->count = 1;
    e->reason = reason;
    e->ctx = ctx;
    e->object = dupLen(object, olen);
    e->username = dupLen(username, ulen);
    sbuf b = {0};
    clientInfoText(c, &b);
    e->cinfo = b.p;
    e->ctime_ms = now;
    while (a->nlog > 0 && a->nlog > aclLogMaxLen) {
        aclLogEntry *old = &a->log[--a->nlog];
        free(old->object);
        free(old->username);
        free(old->cinfo);
    }
}

/* ---- authentication ----------------------------------------------------- */

static int passMatches(const aclUser *u, const ir_arg *pass) {
    if (u->flags & U_NOPASS) return 1;
    char hex[65];
    sha256Hex(pass->ptr, pass->len, hex);
    unsigned char hit = 0;
    for (int i = 0; i < u->npass; i++) {
        unsigned char diff = 0;
        for (int j = 0; j < 64; j++) diff |= (unsigned char)(hex[j] ^ u->pass[i][j]);
        hit |= diff == 0;
    }
    return hit;
}

int aclAuthenticate(client *c, const ir_arg *user, const ir_arg *pass) {
    ir_acl *a = aclOf(c->srv);
    aclUser *u = user ? userFind(a, user->ptr, user->len, NULL) : a->def;
    if (u && (u->flags & U_ON) && passMatches(u, pass)) {
        c->user = u;
        c->authenticated = 1;
        return 1;
    }
    const char *un = user ? user->ptr : "default";
    size_t ul = user ? user->len : 7;
    logAdd(c, LOG_AUTH, ACL_CTX_TOPLEVEL, "AUTH", 4, un, ul);
    return 0;
}

/* ---- the check ---------------------------------------------------------- */

/* -1: not a key (a shard channel in SPUBLISH's key spec) */
static int keyFlagsOf(const char *words) {
    int f = 0;
    if (hasWord(words, "not_key")) return -1;
    if (hasWord(words, "access")) f |= K_READ;
    if (hasWord(words, "insert") || hasWord(words, "delete") || hasWord(words, "update"))
        f |= K_WRITE;
    return f;
}

static int keyAllowed(const aclUser *u, const ir_arg *k, int need) {
    if (u->flags & U_ALLKEYS) return 1;
    for (int i = 0; i < u->nkeys; i++) {
        if ((u->keys[i].flags & need) != need) continue;
        if (stringmatchlen(u->keys[i].p, u->keys[i].len, k->ptr, k->len, 0)) return 1;
    }
    return 0;
}

static int channelAllowed(const aclUser *u, const ir_arg *ch, int is_pattern) {
    if (u->flags & U_ALLCHANNELS) return 1;
    for (int i = 0; i < u->nchans; i++) {
        if (is_pattern) {
            if (u->chans[i].len == ch->len && !memcmp(u->chans[i].p, ch->ptr, ch->len)) return 1;
        } else if (stringmatchlen(u->chans[i].p, u->chans[i].len, ch->ptr, ch->len, 0)) {
            return 1;
        }
    }
    return 0;
}

/* Key positions of a call with more than 64 keys: grown to the largest call
 * seen, so the check allocates nothing in the steady state. */
static int *big_pos;
static const char **big_flags;
static long big_cap;

static int userCheck(const aclUser *u, const ir_command *cmd, const ir_arg *argv, int argc,
                     int *errpos) {
    if (!u) return ACL_DENIED_CMD;
    int id = commandIdOfCall(cmd, argv, argc);
    if (!bitGet(u, id)) {
        int ok = 0;
        for (int i = 0; i < u->nfa && argc > 1; i++)
            if (u->fa[i].id == id && strlen(u->fa[i].arg) == argv[1].len &&
                !strncasecmp(u->fa[i].arg, argv[1].ptr, argv[1].len))
                ok = 1;
        if (!ok) return ACL_DENIED_CMD;
    }
    if (!(u->flags & U_ALLKEYS)) {
        int small_pos[64];
        const char *small_flags[64];
        int *pos = small_pos;
        const char **flags = small_flags;
        long n = commandKeysOf(cmd, argv, argc, pos, flags, 64);
        if (n > 64) {
            if (n > big_cap) {
                big_pos = ir_xrealloc(big_pos, (size_t)n * sizeof(*big_pos));
                big_flags = ir_xrealloc(big_flags, (size_t)n * sizeof(*big_flags));
                big_cap = n;
            }
            pos = big_pos;
            flags = big_flags;
            n = commandKeysOf(cmd, argv, argc, pos, flags, n);
        }
        for (long i = 0; i < n; i++) {
            int need = keyFlagsOf(flags[i]);
            if (need >= 0 && !keyAllowed(u, &argv[pos[i]], need)) {
                *errpos = pos[i];
                return ACL_DENIED_KEY;
            }
        }
    }
    if (!(u->flags & U_ALLCHANNELS)) {
        int from = 0, to = 0, pattern = 0;
        if (cmd->proc == publishCommand || cmd->proc == spublishCommand) from = to = 1;
        else if (cmd->proc == subscribeCommand || cmd->proc == ssubscribeCommand)
            from = 1, to = argc - 1;
        else if (cmd->proc == psubscribeCommand) from = 1, to = argc - 1, pattern = 1;
        for (int j = from; j && j <= to && j < argc; j++)
            if (!channelAllowed(u, &argv[j], pattern)) {
                *errpos = j;
                return ACL_DENIED_CHANNEL;
            }
    }
    return ACL_OK;
}

int aclFullKeyRead(const client *c) {
    const aclUser *u = c->user;
    if (!u || (u->flags & U_ALLKEYS)) return 1;
    for (int i = 0; i < u->nkeys; i++)
        if ((u->keys[i].flags & K_READ) && u->keys[i].len == 1 && u->keys[i].p[0] == '*') return 1;
    return 0;
}

int aclPermits(client *c, const ir_command *cmd, int *errpos) {
    const aclUser *u = c->user;
    *errpos = 0;
    if (u &&
        (u->flags & (U_ALLCOMMANDS | U_ALLKEYS | U_ALLCHANNELS)) ==
            (U_ALLCOMMANDS | U_ALLKEYS | U_ALLCHANNELS) &&
        !u->nfa) {
        int id = commandIdOfCall(cmd, c->argv, c->argc);
        if (bitGet(u, id)) return ACL_OK;
    }
    if (cmd->flags & CMD_NOAUTH) return ACL_OK; /* AUTH, HELLO, QUIT, RESET */
    return userCheck(u, cmd, c->argv, c->argc, errpos);
}

int aclCheck(client *c, const ir_command *cmd, int ctx, int *errpos) {
    int r = aclPermits(c, cmd, errpos);
    if (r == ACL_OK) return r;
    const aclUser *u = c->user;
    const char *un = u ? u->name : "default";
    if (r == ACL_DENIED_CMD) {
        char name[96];
        int id = commandIdOfCall(cmd, c->argv, c->argc);
        commandIdName(id, name, sizeof(name));
        logAdd(c, r, ctx, name, strlen(name), un, strlen(un));
    } else {
        const ir_arg *o = &c->argv[*errpos];
        logAdd(c, r, ctx, o->ptr, o->len, un, strlen(un));
    }
    return r;
}

/* The NOPERM error of a denied call, with its leading '-'. */
static const char *deniedText(client *c, const ir_command *cmd, int result, char *buf, size_t n) {
    if (result == ACL_DENIED_KEY)
        return "-NOPERM this user has no permissions to access one of the keys used as arguments";
    if (result != ACL_DENIED_CMD)
        return "-NOPERM this user has no permissions to access one of the channels used as "
               "arguments";
    char name[96];
    commandIdName(commandIdOfCall(cmd, c->argv, c->argc), name, sizeof(name));
    snprintf(buf, n, "-NOPERM this user has no permissions to run the '%s' command", name);
    return buf;
}

void aclReplyDenied(client *c, const ir_command *cmd, int result) {
    char buf[160];
    rejectCommandFormat(c, "%s", deniedText(c, cmd, result, buf, sizeof(buf)));
}

void aclReplyDeniedInExec(client *c, const ir_command *cmd, int result) {
    char buf[160];
    addReplyError(c, deniedText(c, cmd, result, buf, sizeof(buf)));
}

const char *aclScriptDeniedMessage(int result) {
    if (result == ACL_DENIED_CMD)
        return "The user executing the script can't run this command or subcommand";
    if (result == ACL_DENIED_KEY)
        return "The user executing the script can't access at least one of the keys mentioned in "
               "the command "
               "arguments";
    return "The user executing the script can't publish to the channel mentioned in the command";
}

/* ---- changes that touch clients ---------------------------------------- */

/* The client running the ACL command lost its user or a subscription's
 * permission: it closes once the reply is out. */
static int killSelf;

/* After u's channels changed: its subscribers to what it may no longer use go. */
static void killRevokedSubscribers(client *self, aclUser *u) {
    if (u->flags & U_ALLCHANNELS) return;
    for (client *o = self->srv->clients, *next; o; o = next) {
        next = o->next;
        if (o->user != u || !(o->flags & CLIENT_PUBSUB)) continue;
        int bad = 0;
        for (int kind = 0; kind < 3 && !bad; kind++) { /* channels, patterns, shard channels */
            const char *n;
            size_t l;
            for (int i = 0; !bad && pubsubClientSub(o, kind, i, &n, &l); i++) {
                ir_arg a = {(char *)n, l, 0};
                bad = !channelAllowed(u, &a, kind == 1);
            }
        }
        if (!bad) continue;
        if (o == self) killSelf = 1;
        else freeClient(o);
    }
}

static void killUsersOf(client *self, aclUser *u) {
    for (client *o = self->srv->clients, *next; o; o = next) {
        next = o->next;
        if (o->user != u) continue;
        o->user = NULL;
        o->authenticated = 0;
        if (o == self) killSelf = 1;
        else freeClient(o);
    }
}

/* SETUSER's work: rules[0..n) onto the user `name` (created if absent), all or
 * nothing. NULL, or the error text in err. */
static int setUser(client *self, ir_server *s, const char *name, size_t nl, const ir_arg *rules,
                   int n, char *err, size_t errlen) {
    ir_acl *a = aclOf(s);
    if (memchr(name, ' ', nl) || memchr(name, '\0', nl)) {
        snprintf(err, errlen, "Usernames can't contain spaces or null characters");
        return -1;
    }
    int at;
    aclUser *old = userFind(a, name, nl, &at);
    aclUser *u = userNew(name, nl);
    if (old) userCopy(u, old);
    for (int i = 0; i < n; i++) {
        if (userApply(u, rules[i].ptr, rules[i].len) != 0) {
            snprintf(err, errlen, "Error in ACL SETUSER modifier '%.128s': %s", rules[i].ptr,
                     ruleError(errno));
            userFree(u);
            return -1;
        }
    }
    if (old) { /* the clients keep their pointer: the rules move into the old struct */
        char *keep = old->name;
        userClear(old);
        *old = *u;
        free(old->name);
        old->name = keep;
        free(u);
        if (self) killRevokedSubscribers(self, old);
    } else {
        userInsert(a, u, at);
    }
    return 0;
}

/* ---- ACL file ----------------------------------------------------------- */

static int splitWords(char *line, ir_arg *w, int max) {
    int n = 0;
    for (char *p = line; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (!*p) break;
        char *e = p;
        while (*e && *e != ' ' && *e != '\t' && *e != '\r' && *e != '\n') e++;
        if (n < max) {
            w[n].ptr = p;
            w[n].len = (size_t)(e - p);
            w[n].owned = 0;
        }
        n++;
        if (*e) *e++ = '\0';
        p = e;
    }
    return n;
}

/* Load path into a new user set (replacing the current one only if every line
 * is right). 0, or -1 with the reason in err. */
static int loadFile(client *self, ir_server *s, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "Error loading ACLs, opening file '%s': %s", path, strerror(errno));
        return -1;
    }
    ir_acl *a = aclOf(s);
    ir_acl fresh;
    memset(&fresh, 0, sizeof(fresh));
    char line[8192];
    int lineno = 0, rc = 0;
    ir_arg w[256];
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        int n = splitWords(line, w, 256);
        if (!n || w[0].ptr[0] == '#') continue;
        if (n > 256 || w[0].len != 4 || strncmp(w[0].ptr, "user", 4) || n < 2) {
            snprintf(err, errlen, "/%s:%d should start with user keyword", path, lineno);
            rc = -1;
            break;
        }
        if (userFind(&fresh, w[1].ptr, w[1].len, NULL)) {
            snprintf(err, errlen, "%s:%d: Duplicate user '%s' found", path, lineno, w[1].ptr);
            rc = -1;
            break;
        }
        ir_acl saved = *a;
        *a = fresh; /* setUser works on the fresh set */
        char e2[512];
        int r = setUser(NULL, s, w[1].ptr, w[1].len, w + 2, n - 2, e2, sizeof(e2));
        fresh = *a;
        *a = saved;
        if (r != 0) {
            snprintf(err, errlen, "%s:%d: %s. ", path, lineno, e2);
            rc = -1;
            break;
        }
    }
    fclose(f);
    if (rc != 0) {
        for (int i = 0; i < fresh.nusers; i++) userFree(fresh.users[i]);
        free(fresh.users);
        return -1;
    }
    /* no default user in the file: the default one, as at start */
    int at;
    aclUser *d = userFind(&fresh, "default", 7, &at);
    if (!d) {
        d = newDefaultUser();
        userInsert(&fresh, d, at);
    }
    /* clients of users that no longer exist go; the others follow their user */
    for (client *o = s->clients; o; o = o->next) {
        const aclUser *ou = o->user;
        aclUser *nu = ou ? userFind(&fresh, ou->name, strlen(ou->name), NULL) : NULL;
        if (ou && !nu) {
            o->user = NULL;
            o->authenticated = 0;
            if (o == self) killSelf = 1;
            else o->flags |= CLIENT_CLOSE_ASAP;
        } else {
            o->user = nu;
        }
    }
    for (int i = 0; i < a->nusers; i++) userFree(a->users[i]);
    free(a->users);
    a->users = fresh.users;
    a->nusers = fresh.nusers;
    a->def = d;
    return 0;
}

int aclLoadConfiguredFile(ir_server *s) {
    const char *path = s->cfg.aclfile;
    if (!path || !path[0]) return 0;
    char err[1024];
    if (loadFile(NULL, s, path, err, sizeof(err)) != 0) {
        ir_set_error("aclfile: %s", err);
        return -1;
    }
    return 0;
}

static int saveFile(ir_server *s, const char *path, char *err, size_t errlen) {
    ir_acl *a = aclOf(s);
    sbuf b = {0};
    for (int i = 0; i < a->nusers; i++) {
        describeUser(a->users[i], &b);
        sbStr(&b, "\n");
    }
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid());
    int fd = ir_create_private(tmp);
    int ok = fd >= 0;
    size_t off = 0;
    while (ok && off < b.len) {
        ssize_t w = write(fd, b.p + off, b.len - off);
        if (w <= 0) ok = 0;
        else off += (size_t)w;
    }
    if (ok && fsync(fd) != 0) ok = 0;
    if (fd >= 0) close(fd);
    if (ok && rename(tmp, path) != 0) ok = 0;
    free(b.p);
    if (!ok) {
        snprintf(err, errlen,
                 "There was an error trying to save the ACLs. Please check the server logs for "
                 "more information");
        serverLog("ACL SAVE to %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---- ACL command -------------------------------------------------------- */

static void replyUser(client *c, const aclUser *u) {
    addReplyMapLen(c, 6);
    addReplyBulkCString(c, "flags");
    addReplySetLen(c, 1 + !!(u->flags & U_NOPASS) + !!(u->flags & (U_SANITIZE | U_SKIP_SANITIZE)));
    addReplyBulkCString(c, u->flags & U_ON ? "on" : "off");
    if (u->flags & U_NOPASS) addReplyBulkCString(c, "nopass");
    if (u->flags & U_SKIP_SANITIZE) addReplyBulkCString(c, "skip-sanitize-payload");
    if (u->flags & U_SANITIZE) addReplyBulkCString(c, "sanitize-payload");
    addReplyBulkCString(c, "passwords");
    addReplyArrayLen(c, u->npass);
    for (int i = 0; i < u->npass; i++) addReplyBulkCString(c, u->pass[i]);
    sbuf b = {0};
    sbStr(&b, "");
    addReplyBulkCString(c, "commands");
    describeCommands(u, &b);
    addReplyBulk(c, b.p, b.len);
    b.len = 0;
    b.p[0] = '\0';
    addReplyBulkCString(c, "keys");
    describeKeys(u, &b);
    addReplyBulk(c, b.p, b.len);
    b.len = 0;
    b.p[0] = '\0';
    addReplyBulkCString(c, "channels");
    describeChannels(u, &b);
    addReplyBulk(c, b.p, b.len);
    free(b.p);
    addReplyBulkCString(c, "selectors");
    addReplyArrayLen(c, 0);
}

static const char *const ctx_names[] = {"toplevel", "multi", "lua"};
static const char *const reason_names[] = {"", "command", "key", "channel", "auth"};

static void aclLogCommand(client *c) {
    ir_acl *a = aclOf(c->srv);
    long long count = 10;
    if (c->argc == 3) {
        if (argEq(c, 2, "reset")) {
            logClear(a);
            addReplyStr(c, shared.ok);
            return;
        }
        if (!string2ll(c->argv[2].ptr, c->argv[2].len, &count) || count < 0) {
            addReplyError(c, "value is out of range, must be positive");
            return;
        }
    } else if (c->argc > 3) {
        addReplySubcommandArity(c, "acl");
        return;
    }
    long n = a->nlog < count ? a->nlog : (long)count;
    uint64_t now = c->srv->now_ms ? c->srv->now_ms : ir_mstime();
    addReplyArrayLen(c, n);
    for (long i = 0; i < n; i++) {
        const aclLogEntry *e = &a->log[i];
        addReplyMapLen(c, 7);
        addReplyBulkCString(c, "count");
        addReplyLongLong(c, e->count);
        addReplyBulkCString(c, "reason");
        addReplyBulkCString(c, reason_names[e->reason]);
        addReplyBulkCString(c, "context");
        addReplyBulkCString(c, ctx_names[e->ctx]);
        addReplyBulkCString(c, "object");
        addReplyBulkCString(c, e->object);
        addReplyBulkCString(c, "username");
        addReplyBulkCString(c, e->username);
        addReplyBulkCString(c, "age-seconds");
        addReplyDouble(c, (double)(now - e->ctime_ms) / 1000.0);
        addReplyBulkCString(c, "client-info");
        addReplyBulkCString(c, e->cinfo);
    }
}

static void aclDryRun(client *c) {
    ir_acl *a = aclOf(c->srv);
    aclUser *u = userFind(a, c->argv[2].ptr, c->argv[2].len, NULL);
    if (!u) {
        addReplyErrorFormat(c, "User '%s' not found", c->argv[2].ptr);
        return;
    }
    const ir_command *cmd = lookupCommand(c->argv[3].ptr, c->argv[3].len);
    if (!cmd) {
        addReplyErrorFormat(c, "Command '%s' not found", c->argv[3].ptr);
        return;
    }
    int argc = c->argc - 3;
    const ir_arg *argv = c->argv + 3;
    char name[96];
    commandIdName(commandIdOfCall(cmd, argv, argc), name, sizeof(name));
    if ((cmd->arity > 0 && cmd->arity != argc) || argc < -cmd->arity) {
        addReplyErrorFormat(c, "wrong number of arguments for '%s' command", name);
        return;
    }
    int pos = 0;
    int r = userCheck(u, cmd, argv, argc, &pos);
    char msg[512];
    if (r == ACL_OK) {
        addReplyStr(c, shared.ok);
        return;
    }
    if (r == ACL_DENIED_CMD)
        snprintf(msg, sizeof(msg), "This user has no permissions to run the '%s' command", name);
    else
        snprintf(msg, sizeof(msg), "This user has no permissions to access the '%.300s' %s",
                 argv[pos].ptr, r == ACL_DENIED_KEY ? "key" : "channel");
    addReplyBulkCString(c, msg);
}

static void aclCommandRun(client *c);

void aclCommand(client *c) {
    killSelf = 0;
    aclCommandRun(c);
    if (killSelf) c->flags |= CLIENT_CLOSE_AFTER_REPLY;
    killSelf = 0;
}

static void aclCommandRun(client *c) {
    ir_server *s = c->srv;
    ir_acl *a = aclOf(s);
    const char *sub = c->argv[1].ptr;
    char err[1024];
    if (!strcasecmp(sub, "setuser") && c->argc >= 3) {
        /* as Redis: the user's name and every rule are redacted */
        for (int j = 2; j < c->argc; j++) redactArg(c, j);
        if (setUser(c, s, c->argv[2].ptr, c->argv[2].len, c->argv + 3, c->argc - 3, err,
                    sizeof(err)) != 0) {
            addReplyError(c, err);
            return;
        }
        addReplyStr(c, shared.ok);
    } else if (!strcasecmp(sub, "deluser") && c->argc >= 3) {
        long long deleted = 0;
        for (int j = 2; j < c->argc; j++) {
            if (c->argv[j].len == 7 && !memcmp(c->argv[j].ptr, "default", 7)) {
                addReplyError(c, "The 'default' user cannot be removed");
                return;
            }
        }
        for (int j = 2; j < c->argc; j++) {
            int at;
            aclUser *u = userFind(a, c->argv[j].ptr, c->argv[j].len, &at);
            if (!u) continue;
            killUsersOf(c, u);
            memmove(a->users + at, a->users + at + 1,
                    (size_t)(a->nusers - at - 1) * sizeof(*a->users));
            a->nusers--;
            userFree(u);
            deleted++;
        }
        addReplyLongLong(c, deleted);
    } else if (!strcasecmp(sub, "getuser") && c->argc == 3) {
        aclUser *u = userFind(a, c->argv[2].ptr, c->argv[2].len, NULL);
        if (!u) addReplyNull(c);
        else replyUser(c, u);
    } else if ((!strcasecmp(sub, "list") || !strcasecmp(sub, "users")) && c->argc == 2) {
        int list = !strcasecmp(sub, "list");
        addReplyArrayLen(c, a->nusers);
        for (int i = 0; i < a->nusers; i++) {
            if (!list) {
                addReplyBulkCString(c, a->users[i]->name);
                continue;
            }
            sbuf b = {0};
            describeUser(a->users[i], &b);
            addReplyBulk(c, b.p, b.len);
            free(b.p);
        }
    } else if (!strcasecmp(sub, "whoami") && c->argc == 2) {
        addReplyBulkCString(c, aclClientUserName(c));
    } else if (!strcasecmp(sub, "cat") && c->argc <= 3) {
        if (c->argc == 2) { /* the categories with commands here (no @geo without GEO commands) */
            uint64_t used = 0;
            int n = commandIdCount();
            for (int j = 0; j < n; j++) used |= commandIdCats(j);
            long cnt = 0;
            for (int i = 0; i < NCATS; i++) cnt += (used >> i) & 1;
            addReplyArrayLen(c, cnt);
            for (int i = 0; i < NCATS; i++)
                if ((used >> i) & 1) addReplyBulkCString(c, cat_names[i]);
            return;
        }
        int cat = aclCategoryIndex(c->argv[2].ptr, c->argv[2].len);
        if (cat < 0) {
            addReplyErrorFormat(c, "Unknown category '%.128s'", c->argv[2].ptr);
            return;
        }
        int n = commandIdCount();
        long cnt = 0;
        for (int j = 0; j < n; j++) cnt += !!(commandIdCats(j) & (1ull << cat));
        addReplyArrayLen(c, cnt);
        char name[96];
        for (int j = 0; j < n; j++)
            if (commandIdCats(j) & (1ull << cat))
                addReplyBulkCString(c, commandIdName(j, name, sizeof(name)));
    } else if (!strcasecmp(sub, "genpass") && c->argc <= 3) {
        long long bits = 256;
        if (c->argc == 3 &&
            (!string2ll(c->argv[2].ptr, c->argv[2].len, &bits) || bits <= 0 || bits > 4096)) {
            addReplyError(
                c, "ACL GENPASS argument must be the number of bits for the output password, a "
                   "positive number up to 4096");
            return;
        }
        size_t chars = (size_t)(bits + 3) / 4;
        unsigned char raw[512];
        size_t nraw = (chars + 1) / 2;
        int fd = open("/dev/urandom", O_RDONLY);
        size_t got = 0;
        while (fd >= 0 && got < nraw) {
            ssize_t r = read(fd, raw + got, nraw - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (fd >= 0) close(fd);
        for (size_t i = got; i < nraw; i++) raw[i] = (unsigned char)rand();
        char out[1025];
        static const char hexd[] = "0123456789abcdef";
        for (size_t i = 0; i < chars; i++) out[i] = hexd[(raw[i / 2] >> (i % 2 ? 0 : 4)) & 15];
        addReplyBulk(c, out, chars);
    } else if (!strcasecmp(sub, "log") && c->argc <= 3) {
        aclLogCommand(c);
    } else if (!strcasecmp(sub, "dryrun") && c->argc >= 4) {
        aclDryRun(c);
    } else if (!strcasecmp(sub, "save") && c->argc == 2) {
        if (!s->cfg.aclfile || !s->cfg.aclfile[0]) {
            addReplyError(
                c, "This Redis instance is not configured to use an ACL file. You may want to "
                   "specify users via the ACL SETUSER command and then issue a CONFIG REWRITE "
                   "(assuming you have a Redis configuration file set) in order to store users "
                   "in the Redis configuration.");
            return;
        }
        if (saveFile(s, s->cfg.aclfile, err, sizeof(err)) != 0) addReplyError(c, err);
        else addReplyStr(c, shared.ok);
    } else if (!strcasecmp(sub, "load") && c->argc == 2) {
        if (!s->cfg.aclfile || !s->cfg.aclfile[0]) {
            addReplyError(
                c, "This Redis instance is not configured to use an ACL file. You may want to "
                   "specify users via the ACL SETUSER command and then issue a CONFIG REWRITE "
                   "(assuming you have a Redis configuration file set) in order to store users "
                   "in the Redis configuration.");
            return;
        }
        if (loadFile(c, s, s->cfg.aclfile, err, sizeof(err)) != 0) addReplyError(c, err);
        else addReplyStr(c, shared.ok);
    } else if (!strcasecmp(sub, "help") && c->argc == 2) {
        static const char *const help[] = {
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the "
            "command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Print this help.",
        };
        addReplyHelpOf(c, help);
    } else if (!strcasecmp(sub, "cat") || !strcasecmp(sub, "help") || !strcasecmp(sub, "whoami") ||
               !strcasecmp(sub, "list") || !strcasecmp(sub, "users") ||
               !strcasecmp(sub, "getuser") || !strcasecmp(sub, "setuser") ||
               !strcasecmp(sub, "deluser") || !strcasecmp(sub, "genpass") ||
               !strcasecmp(sub, "log") || !strcasecmp(sub, "dryrun") || !strcasecmp(sub, "save") ||
               !strcasecmp(sub, "load")) {
        if (!strcasecmp(sub, "cat"))
            addReplyErrorFormat(
                c, "unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.");
        else addReplySubcommandArity(c, "acl");
    } else {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try ACL HELP.", sub);
    }
}
