/* t_zset.c - sorted sets: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE,
 * ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT, ZRANGE (BYSCORE|BYLEX REV LIMIT
 * WITHSCORES), ZRANGESTORE, ZREVRANGE, Z[REV]RANGEBYSCORE, Z[REV]RANGEBYLEX,
 * ZREMRANGEBYRANK/SCORE/LEX, ZPOPMIN, ZPOPMAX, ZMPOP, the blocking BZPOPMIN,
 * BZPOPMAX and BZMPOP (blocked.c), ZRANDMEMBER, ZSCAN,
 * ZUNION[STORE], ZINTER[STORE], ZDIFF[STORE], ZINTERCARD.
 *
 * A sorted set is a dbColl (its dict maps member -> member entry, as a set's)
 * plus a skiplist ordered by (score, member bytes) with spans, so rank and
 * range lookups are O(log n). Each member entry owns its skiplist node as
 * its value buffer (v.str.ptr, never embedded): deleting the entry with
 * collDelete frees the node, and MEMORY USAGE counts it. The node points
 * back at the entry for the member's bytes. Reads allocate nothing.
 *
 * OBJECT ENCODING reports listpack while the set was created small enough
 * and never grew past zset-max-listpack-entries/value, then skiplist, as
 * Redis 7.0 does (store commands pick the encoding from the result).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blocked.h"
#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "replication.h"
#include "server.h"

#define ZSL_MAXLEVEL 32
#define ZSL_P 0.25

typedef struct zskiplistNode {
    double score;
    dbEntry *fe; /* the member's entry in the dict (fe->key, fe->klen) */
    struct zskiplistNode *backward;
    struct zskiplistLevel {
        struct zskiplistNode *forward;
        unsigned long span;
    } level[];
} zskiplistNode;

typedef struct zskiplist {
    zskiplistNode *tail;
    unsigned long length;
    int level;
    zskiplistNode header; /* ZSL_MAXLEVEL levels follow */
} zskiplist;

static inline zskiplistNode *nodeOf(const dbEntry *fe) { return (zskiplistNode *)fe->v.str.ptr; }

static zskiplist *zslOf(dbColl *co) {
    if (!co->zsl) {
        zskiplist *zsl = dbMalloc(sizeof(zskiplist) + ZSL_MAXLEVEL * sizeof(struct zskiplistLevel));
        zsl->tail = NULL;
        zsl->length = 0;
        zsl->level = 1;
        zsl->header.score = 0;
        zsl->header.fe = NULL;
        zsl->header.backward = NULL;
        for (int i = 0; i < ZSL_MAXLEVEL; i++) {
            zsl->header.level[i].forward = NULL;
            zsl->header.level[i].span = 0;
        }
        co->zsl = zsl;
    }
    return co->zsl;
}

static inline unsigned long zsetLen(const dbColl *co) { return (unsigned long)dictSize(&co->d); }

/* Compare member bytes as Redis's sdscmp. */
static int memberCmp(const char *a, size_t al, const char *b, size_t bl) {
    int r = memcmp(a, b, al < bl ? al : bl);
    if (r) return r;
    return al < bl ? -1 : al > bl;
}

/* <0 when node x orders before (score, member). */
static int nodeCmp(const zskiplistNode *x, double score, const char *m, size_t ml) {
    if (x->score < score) return -1;
    if (x->score > score) return 1;
    return memberCmp(x->fe->key, x->fe->klen, m, ml);
}

/* A node's level: geometric with p = ZSL_P (1/4), drawn from the member's keyed
 * hash rather than a random stream, so the same commands build the same
 * skiplist (a range over members of different scores BYLEX walks the levels:
 * the fuzzer's split-equivalence check found replies that differed run to run).
 * The hash is SipHash under the process's secret seed: no client can choose
 * members that all land high or low. */
static int memberLevel(const dbEntry *fe) {
    uint64_t h = fe->hash;
    h ^= h >> 31; /* the low bits pick the dict bucket: use all of them, mixed */
    h *= 0x9E3779B97F4A7C15ULL;
    int level = 1;
    while (level < ZSL_MAXLEVEL && (h & 3) == 0) { /* P(two zero bits) = 1/4 = ZSL_P */
        level++;
        h >>= 2;
    }
    return level;
}

/* Link node (score set, fe set, its level count `lvl`) into zsl. */
static void zslLink(zskiplist *zsl, zskiplistNode *x, int lvl) {
    zskiplistNode *update[ZSL_MAXLEVEL], *n = &zsl->header;
    unsigned long rank[ZSL_MAXLEVEL];
    for (int i = zsl->level - 1; i >= 0; i--) {
        rank[i] = i == zsl->level - 1 ? 0 : rank[i + 1];
        while (n->level[i].forward &&
               nodeCmp(n->level[i].forward, x->score, x->fe->key, x->fe->klen) < 0) {
            rank[i] += n->level[i].span;
            n = n->level[i].forward;
        }
        update[i] = n;
    }
    if (lvl > zsl->level) {
        for (int i = zsl->level; i < lvl; i++) {
            rank[i] = 0;
            update[i] = &zsl->header;
            update[i]->level[i].span = zsl->length;
        }
        zsl->level = lvl;
    }
    for (int i = 0; i < lvl; i++) {
        x->level[i].forward = update[i]->level[i].forward;
        update[i]->level[i].forward = x;
        x->level[i].span = update[i]->level[i].span - (rank[0] - rank[i]);
        update[i]->level[i].span = (rank[0] - rank[i]) + 1;
    }
    for (int i = lvl; i < zsl->level; i++) update[i]->level[i].span++;
    x->backward = update[0] == &zsl->header ? NULL : update[0];
    if (x->level[0].forward) x->level[0].forward->backward = x;
    else zsl->tail = x;
    zsl->length++;
}

static int nodeLevels(const dbEntry *fe) {
    return (int)((fe->v.str.cap - sizeof(zskiplistNode)) / sizeof(struct zskiplistLevel));
}

static void zslUnlink(zskiplist *zsl, zskiplistNode *x) {
    zskiplistNode *update[ZSL_MAXLEVEL], *n = &zsl->header;
    for (int i = zsl->level - 1; i >= 0; i--) {
        while (n->level[i].forward && n->level[i].forward != x &&
               nodeCmp(n->level[i].forward, x->score, x->fe->key, x->fe->klen) < 0)
            n = n->level[i].forward;
        update[i] = n;
    }
    for (int i = 0; i < zsl->level; i++) {
        if (update[i]->level[i].forward == x) {
            update[i]->level[i].span += x->level[i].span - 1;
            update[i]->level[i].forward = x->level[i].forward;
        } else {
            update[i]->level[i].span -= 1;
        }
    }
    if (x->level[0].forward) x->level[0].forward->backward = x->backward;
    else zsl->tail = x->backward;
    while (zsl->level > 1 && zsl->header.level[zsl->level - 1].forward == NULL) zsl->level--;
    zsl->length--;
}

/* 1-based rank of x, walking from the header. */
static unsigned long zslRank(zskiplist *zsl, const zskiplistNode *x) {
    unsigned long rank = 0;
    const zskiplistNode *n = &zsl->header;
    for (int i = zsl->level - 1; i >= 0; i--) {
        while (n->level[i].forward &&
               nodeCmp(n->level[i].forward, x->score, x->fe->key, x->fe->klen) <= 0) {
            rank += n->level[i].span;
            n = n->level[i].forward;
        }
        if (n == x) return rank;
    }
    return 0;
}

/* The node at 1-based rank (NULL past the end). */
static zskiplistNode *zslByRank(zskiplist *zsl, unsigned long rank) {
    unsigned long traversed = 0;
    zskiplistNode *n = &zsl->header;
    for (int i = zsl->level - 1; i >= 0; i--) {
        while (n->level[i].forward && traversed + n->level[i].span <= rank) {
            traversed += n->level[i].span;
            n = n->level[i].forward;
        }
        if (traversed == rank) return n;
    }
    return NULL;
}

/* ---- the value ------------------------------------------------------------- */

static int overListpack(unsigned long n, size_t maxlen) {
    return (long long)n > encodingLimits.zset_max_listpack_entries ||
           (long long)maxlen > encodingLimits.zset_max_listpack_value;
}

/* Add an absent member with score. */
static dbEntry *zsetInsert(ir_db *db, dbColl *co, const char *m, size_t len, double score) {
    if (!co->big && !overListpack(zsetLen(co) + 1, len) && score == 0)
        score = 0.0; /* a listpack keeps -0 as the integer 0 */
    dbEntry *fe = collAdd(db, co, m, len, NULL, 0);
    int lvl = memberLevel(fe);
    size_t cap = sizeof(zskiplistNode) + (size_t)lvl * sizeof(struct zskiplistLevel);
    zskiplistNode *x = dbMalloc(cap);
    x->score = score;
    x->fe = fe;
    fe->v.str.ptr = (char *)x;
    fe->v.str.len = 0;
    fe->v.str.cap = cap;
    db->bytes += dbBufBytes(cap);
    zslLink(zslOf(co), x, lvl);
    if (overListpack(zsetLen(co), len)) co->big = 1;
    return fe;
}

static void zsetUpdate(dbColl *co, dbEntry *fe, double score) {
    if (!co->big && score == 0) score = 0.0; /* as a listpack keeps it */
    zskiplistNode *x = nodeOf(fe);
    zskiplist *zsl = zslOf(co);
    /* still in place: just rewrite the score */
    if ((x->backward == NULL || nodeCmp(x->backward, score, fe->key, fe->klen) < 0) &&
        (x->level[0].forward == NULL ||
         nodeCmp(x->level[0].forward, score, fe->key, fe->klen) > 0)) {
        x->score = score;
        return;
    }
    zslUnlink(zsl, x);
    x->score = score;
    zslLink(zsl, x, nodeLevels(fe));
}

static void zsetRemove(ir_db *db, dbColl *co, dbEntry *fe) {
    zslUnlink(zslOf(co), nodeOf(fe));
    collDelete(db, co, fe);
}

void zsetFreeSkiplist(dbColl *co) {
    free(co->zsl);
    co->zsl = NULL;
}

void zsetCopy(ir_db *to, dbColl *dst, dbColl *src) {
    if (!src->zsl) return;
    for (zskiplistNode *x = src->zsl->header.level[0].forward; x; x = x->level[0].forward)
        zsetInsert(to, dst, x->fe->key, x->fe->klen, x->score);
    dst->big = src->big;
}

/* For RDB/DUMP: call fn on each member in order. */
void zsetForEach(const dbColl *co, void (*fn)(const char *m, size_t len, double score, void *arg),
                 void *arg) {
    if (!co->zsl) return;
    for (zskiplistNode *x = co->zsl->header.level[0].forward; x; x = x->level[0].forward)
        fn(x->fe->key, x->fe->klen, x->score, arg);
}

void zsetForEachRev(const dbColl *co,
                    void (*fn)(const char *m, size_t len, double score, void *arg), void *arg) {
    if (!co->zsl) return;
    for (zskiplistNode *x = co->zsl->tail; x; x = x->backward)
        fn(x->fe->key, x->fe->klen, x->score, arg);
}

/* RESTORE: add a member; 0 if it was already there. */
int zsetLoadAdd(ir_db *db, dbColl *co, const char *m, size_t len, double score) {
    dbEntry *fe = collFind(co, m, len);
    if (fe) return 0;
    zsetInsert(db, co, m, len, score);
    return 1;
}

/* The skiplist's invariants (the fuzz harness checks them after every input):
 * NULL when they hold, else what is wrong. */
const char *zsetVerify(const dbColl *co) {
    const zskiplist *zsl = co->zsl;
    if (!zsl) return dictSize(&co->d) ? "members without a skiplist" : NULL;
    if (zsl->length != dictSize(&co->d)) return "skiplist length differs from the dict's size";
    const zskiplistNode *prev = NULL;
    unsigned long n = 0;
    for (const zskiplistNode *x = zsl->header.level[0].forward; x; x = x->level[0].forward) {
        n++;
        if (isnan(x->score)) return "a NaN score";
        if (nodeOf(x->fe) != x) return "a member's node is not its own";
        if (x->backward != prev) return "a backward link is wrong";
        if (prev && nodeCmp(prev, x->score, x->fe->key, x->fe->klen) >= 0) return "out of order";
        prev = x;
    }
    if (n != zsl->length || zsl->tail != prev) return "length or tail is wrong";
    for (int i = 0; i < zsl->level; i++) { /* spans add up to the ranks */
        unsigned long rank = 0;
        for (const zskiplistNode *x = &zsl->header; x->level[i].forward; x = x->level[i].forward) {
            rank += x->level[i].span;
            if (rank != zslRank((zskiplist *)zsl, x->level[i].forward)) return "a span is wrong";
        }
    }
    return NULL;
}

size_t zsetAll(dbColl *co, dbEntry **out) {
    size_t n = 0;
    if (co->zsl)
        for (zskiplistNode *x = co->zsl->header.level[0].forward; x; x = x->level[0].forward)
            out[n++] = x->fe;
    return n;
}

double zsetEntryScore(const dbEntry *fe) { return nodeOf(fe)->score; }

/* ---- replies --------------------------------------------------------------- */

/* Redis 7.0's score text: %.17g, inf and -inf. */
static int fmtScore(char *buf, size_t n, double d) {
    if (isinf(d)) return snprintf(buf, n, "%s", d > 0 ? "inf" : "-inf");
    return snprintf(buf, n, "%.17g", d);
}

static void addReplyScore(client *c, double d) {
    char buf[64];
    int n = fmtScore(buf, sizeof(buf), d);
    addReplyDoubleText(c, buf, (size_t)n);
}

/* A result of n members: WITHSCORES is a flat array in RESP2, pairs in RESP3. */
static void addReplyRangeLen(client *c, long n, int withscores) {
    addReplyArrayLen(c, withscores && c->resp < 3 ? 2 * n : n);
}

static void addReplyRangeItem(client *c, const zskiplistNode *x, int withscores) {
    if (withscores && c->resp >= 3) addReplyArrayLen(c, 2);
    addReplyBulk(c, x->fe->key, x->fe->klen);
    if (withscores) addReplyScore(c, x->score);
}

/* ---- ranges ---------------------------------------------------------------- */

typedef struct {
    double min, max;
    int minex, maxex;
} zrangespec;

typedef struct {
    const char *min, *max; /* NULL with *inf set: - and + */
    size_t minlen, maxlen;
    int minex, maxex, mininf, maxinf; /* mininf: "-" (or "+", empty) */
} zlexrangespec;

static int parseScoreBound(const ir_arg *a, double *v, int *ex) {
    const char *p = a->ptr;
    *ex = 0;
    if (a->len && p[0] == '(') {
        *ex = 1;
        p++;
    }
    char *end;
    *v = strtod(p, &end);
    if (end[0] != '\0' || isnan(*v)) return -1;
    return 0;
}

static int parseRange(client *c, int imin, int imax, zrangespec *r) {
    if (parseScoreBound(&c->argv[imin], &r->min, &r->minex) != 0 ||
        parseScoreBound(&c->argv[imax], &r->max, &r->maxex) != 0)
        return -1;
    return 0;
}

static int valueGteMin(double v, const zrangespec *r) {
    return r->minex ? v > r->min : v >= r->min;
}
static int valueLteMax(double v, const zrangespec *r) {
    return r->maxex ? v < r->max : v <= r->max;
}

/* -1: "-" (below everything), 1: "+" (above everything), 0 a bound. */
static int parseLexBound(const ir_arg *a, const char **p, size_t *len, int *ex, int *inf) {
    *inf = 0;
    *ex = 0;
    *p = NULL;
    *len = 0;
    if (a->len == 0) return -1;
    switch (a->ptr[0]) {
    case '+':
        if (a->len != 1) return -1;
        *inf = 1;
        return 0;
    case '-':
        if (a->len != 1) return -1;
        *inf = -1;
        return 0;
    case '(': *ex = 1; /* fall through */
    case '[':
        *p = a->ptr + 1;
        *len = a->len - 1;
        return 0;
    default: return -1;
    }
}

static int parseLexRange(client *c, int imin, int imax, zlexrangespec *r) {
    if (parseLexBound(&c->argv[imin], &r->min, &r->minlen, &r->minex, &r->mininf) != 0 ||
        parseLexBound(&c->argv[imax], &r->max, &r->maxlen, &r->maxex, &r->maxinf) != 0)
        return -1;
    return 0;
}

static int lexGteMin(const dbEntry *fe, const zlexrangespec *r) {
    if (r->mininf) return r->mininf < 0;
    int cmp = memberCmp(fe->key, fe->klen, r->min, r->minlen);
    return r->minex ? cmp > 0 : cmp >= 0;
}

static int lexLteMax(const dbEntry *fe, const zlexrangespec *r) {
    if (r->maxinf) return r->maxinf > 0;
    int cmp = memberCmp(fe->key, fe->klen, r->max, r->maxlen);
    return r->maxex ? cmp < 0 : cmp <= 0;
}

/* First node >= min of the score range (NULL if none in range). */
static zskiplistNode *zslFirstInRange(zskiplist *zsl, const zrangespec *r) {
    zskiplistNode *n = &zsl->header;
    for (int i = zsl->level - 1; i >= 0; i--)
        while (n->level[i].forward && !valueGteMin(n->level[i].forward->score, r))
            n = n->level[i].forward;
    n = n->level[0].forward;
    if (!n || !valueLteMax(n->score, r)) return NULL;
    return n;
}

static zskiplistNode *zslLastInRange(zskiplist *zsl, const zrangespec *r) {
    zskiplistNode *n = &zsl->header;
    for (int i = zsl->level - 1; i >= 0; i--)
        while (n->level[i].forward && valueLteMax(n->level[i].forward->score, r))
            n = n->level[i].forward;
    if (n == &zsl->header || !valueGteMin(n->score, r)) return NULL;
    return n;
}

static zskiplistNode *zslFirstInLex(zskiplist *zsl, const zlexrangespec *r) {
    zskiplistNode *n = &zsl->header;
    for (int i = zsl->level - 1; i >= 0; i--)
        while (n->level[i].forward && !lexGteMin(n->level[i].forward->fe, r))
            n = n->level[i].forward;
    n = n->level[0].forward;
    if (!n || !lexLteMax(n->fe, r)) return NULL;
    return n;
}

static zskiplistNode *zslLastInLex(zskiplist *zsl, const zlexrangespec *r) {
    zskiplistNode *n = &zsl->header;
    for (int i = zsl->level - 1; i >= 0; i--)
        while (n->level[i].forward && lexLteMax(n->level[i].forward->fe, r))
            n = n->level[i].forward;
    if (n == &zsl->header || !lexGteMin(n->fe, r)) return NULL;
    return n;
}

/* ---- ZADD / ZINCRBY -------------------------------------------------------- */

#define ZADD_NX (1 << 0)
#define ZADD_XX (1 << 1)
#define ZADD_GT (1 << 2)
#define ZADD_LT (1 << 3)
#define ZADD_CH (1 << 4)
#define ZADD_INCR (1 << 5)

/* Redis's getDoubleFromObject on argv[i] (NUL-terminated, any length: a
 * score may be written out in full, as DBL_MAX's 309 digits). */
static int argDouble(const client *c, int i, double *out) {
    const char *p = c->argv[i].ptr;
    size_t len = c->argv[i].len;
    if (len == 0 || isspace((unsigned char)p[0])) return 0;
    char *end;
    errno = 0;
    double d = strtod(p, &end);
    if ((size_t)(end - p) != len ||
        (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO)) ||
        isnan(d))
        return 0;
    *out = d;
    return 1;
}

static const char nanerr[] = "resulting score is not a number (NaN)";

static void zaddGeneric(client *c, int flags) {
    int si = 2;
    for (; si < c->argc; si++) {
        if (argEq(c, si, "nx")) flags |= ZADD_NX;
        else if (argEq(c, si, "xx")) flags |= ZADD_XX;
        else if (argEq(c, si, "ch")) flags |= ZADD_CH;
        else if (argEq(c, si, "incr")) flags |= ZADD_INCR;
        else if (argEq(c, si, "gt")) flags |= ZADD_GT;
        else if (argEq(c, si, "lt")) flags |= ZADD_LT;
        else break;
    }
    int nx = flags & ZADD_NX, xx = flags & ZADD_XX, gt = flags & ZADD_GT, lt = flags & ZADD_LT,
        incr = flags & ZADD_INCR;
    int elements = c->argc - si;
    if (elements % 2 || !elements) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    elements /= 2;
    if (nx && xx) {
        addReplyError(c, "XX and NX options at the same time are not compatible");
        return;
    }
    if ((gt && nx) || (lt && nx) || (gt && lt)) {
        addReplyError(c, "GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if (incr && elements > 1) {
        addReplyError(c, "INCR option supports a single increment-element pair");
        return;
    }
    for (int j = 0; j < elements; j++) {
        double d;
        if (!argDouble(c, si + 2 * j, &d)) {
            addReplyError(c, "value is not a valid float");
            return;
        }
    }
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (e && e->type != OBJ_ZSET) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    long long added = 0, updated = 0, processed = 0;
    double score = 0;
    if (!e) {
        if (xx) goto reply;
        size_t maxlen = 0;
        for (int j = 0; j < elements; j++)
            if (c->argv[si + 2 * j + 1].len > maxlen) maxlen = c->argv[si + 2 * j + 1].len;
        e = dbAdd(db, &k, OBJ_ZSET, 0);
        e->v.coll->big = (uint8_t)overListpack((unsigned long)elements, maxlen);
        signalKeyAsReady(db, k.p, k.len); /* BZPOPMIN & co waiting for it */
    }
    dbColl *co = e->v.coll;
    for (int j = 0; j < elements; j++) {
        double s;
        argDouble(c, si + 2 * j, &s);
        const ir_arg *m = &c->argv[si + 2 * j + 1];
        dbEntry *fe = collFind(co, m->ptr, m->len);
        if (fe) {
            if (nx) continue;
            double cur = nodeOf(fe)->score;
            if (incr) {
                s += cur;
                if (isnan(s)) {
                    addReplyError(c, nanerr);
                    goto done;
                }
            }
            if ((lt && s >= cur) || (gt && s <= cur)) continue;
            processed++;
            score = s;
            if (s != cur) {
                zsetUpdate(co, fe, s);
                updated++;
            }
        } else if (!xx) {
            zsetInsert(db, co, m->ptr, m->len, s);
            added++;
            processed++;
            score = s;
        }
    }
reply:
    if (incr) {
        if (processed) addReplyScore(c, score);
        else addReplyNull(c);
    } else {
        addReplyLongLong(c, flags & ZADD_CH ? added + updated : added);
    }
done:
    if (added || updated) {
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_ZSET, incr ? "zincr" : "zadd", k.p, k.len, db->id);
    }
}

/* ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...] */
void zaddCommand(client *c) { zaddGeneric(c, 0); }

/* ZINCRBY key increment member */
void zincrbyCommand(client *c) { zaddGeneric(c, ZADD_INCR); }

/* Delete the key if the set became empty (with the "del" event). */
static void deleteIfEmpty(ir_db *db, dbEntry *e, const ir_arg *key) {
    if (zsetLen(e->v.coll)) return;
    dbDeleteEntry(db, e);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "del", key->ptr, key->len, db->id);
}

/* ZREM key member [member ...] */
void zremCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_ZSET);
    if (!e) return;
    ir_db *db = dbFor(c);
    long long deleted = 0;
    for (int j = 2; j < c->argc; j++) {
        dbEntry *fe = collFind(e->v.coll, c->argv[j].ptr, c->argv[j].len);
        if (!fe) continue;
        zsetRemove(db, e->v.coll, fe);
        deleted++;
        if (!zsetLen(e->v.coll)) break;
    }
    if (deleted) {
        notifyKeyspaceEvent(NOTIFY_ZSET, "zrem", c->argv[1].ptr, c->argv[1].len, db->id);
        signalModifiedKey(c, db, c->argv[1].ptr, c->argv[1].len);
        deleteIfEmpty(db, e, &c->argv[1]);
    }
    addReplyLongLong(c, deleted);
}

/* ZCARD key */
void zcardCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_ZSET);
    if (!e) return;
    addReplyLongLong(c, (long long)zsetLen(e->v.coll));
}

/* ZSCORE key member */
void zscoreCommand(client *c) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_ZSET, &missing);
    if (!e) {
        if (missing) addReplyNull(c);
        return;
    }
    dbEntry *fe = collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len);
    if (fe) addReplyScore(c, nodeOf(fe)->score);
    else addReplyNull(c);
}

/* ZMSCORE key member [member ...] */
void zmscoreCommand(client *c) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_ZSET, &missing);
    if (!e && !missing) return;
    addReplyArrayLen(c, c->argc - 2);
    for (int j = 2; j < c->argc; j++) {
        dbEntry *fe = e ? collFind(e->v.coll, c->argv[j].ptr, c->argv[j].len) : NULL;
        if (fe) addReplyScore(c, nodeOf(fe)->score);
        else addReplyNull(c);
    }
}

static void zrankGeneric(client *c, int reverse) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_ZSET, &missing);
    if (!e) {
        if (missing) addReplyNull(c);
        return;
    }
    dbEntry *fe = collFind(e->v.coll, c->argv[2].ptr, c->argv[2].len);
    if (!fe) {
        addReplyNull(c);
        return;
    }
    unsigned long rank = zslRank(zslOf(e->v.coll), nodeOf(fe));
    addReplyLongLong(c, (long long)(reverse ? zsetLen(e->v.coll) - rank : rank - 1));
}

/* ZRANK key member */
void zrankCommand(client *c) { zrankGeneric(c, 0); }
/* ZREVRANK key member */
void zrevrankCommand(client *c) { zrankGeneric(c, 1); }

/* ZCOUNT key min max */
void zcountCommand(client *c) {
    zrangespec r;
    if (parseRange(c, 2, 3, &r) != 0) {
        addReplyError(c, "min or max is not a float");
        return;
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_ZSET);
    if (!e) return;
    zskiplist *zsl = zslOf(e->v.coll);
    zskiplistNode *first = zslFirstInRange(zsl, &r);
    long long count = 0;
    if (first) {
        zskiplistNode *last = zslLastInRange(zsl, &r);
        count = (long long)(zslRank(zsl, last) - zslRank(zsl, first) + 1);
    }
    addReplyLongLong(c, count);
}

/* ZLEXCOUNT key min max */
void zlexcountCommand(client *c) {
    zlexrangespec r;
    if (parseLexRange(c, 2, 3, &r) != 0) {
        addReplyError(c, "min or max not valid string range item");
        return;
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_ZSET);
    if (!e) return;
    zskiplist *zsl = zslOf(e->v.coll);
    zskiplistNode *first = zslFirstInLex(zsl, &r);
    long long count = 0;
    if (first) {
        zskiplistNode *last = zslLastInLex(zsl, &r);
        if (last) count = (long long)(zslRank(zsl, last) - zslRank(zsl, first) + 1);
        if (count < 0) count = 0;
    }
    addReplyLongLong(c, count);
}

/* ---- for the GEO commands (geo.c) ---------------------------------------- */

void zaddGeo(client *c) { zaddGeneric(c, 0); }

void zsetScoreRange(dbColl *co, double min, double max,
                    int (*fn)(const dbEntry *fe, double score, void *arg), void *arg) {
    zrangespec r = {.min = min, .max = max, .minex = 0, .maxex = 1};
    for (zskiplistNode *x = zslFirstInRange(zslOf(co), &r); x && valueLteMax(x->score, &r);
         x = x->level[0].forward)
        if (fn(x->fe, x->score, arg)) break;
}

/* ---- ZRANGE and friends ---------------------------------------------------- */

enum { ZR_AUTO, ZR_RANK, ZR_SCORE, ZR_LEX };

/* The store target of ZRANGESTORE: a new zset built beside the keyspace. */
typedef struct {
    client *c;
    ir_db *db;
    int store;
    int withscores;
    dbColl tmp;
    long n;
} zrangeOut;

static void outBegin(zrangeOut *o, long n) {
    if (o->store) return;
    addReplyRangeLen(o->c, n, o->withscores);
}

static void outItem(zrangeOut *o, const zskiplistNode *x) {
    o->n++;
    if (o->store) zsetInsert(o->db, &o->tmp, x->fe->key, x->fe->klen, x->score);
    else addReplyRangeItem(o->c, x, o->withscores);
}

/* Free a temporary set built beside the keyspace. */
static void zsetFreeTemp(ir_db *db, dbColl *t) {
    if (t->zsl) {
        zskiplistNode *x = t->zsl->header.level[0].forward;
        while (x) {
            zskiplistNode *next = x->level[0].forward;
            collDelete(db, t, x->fe);
            x = next;
        }
        zsetFreeSkiplist(t);
    }
    dictReleaseTables(&t->d);
}

/* Make key argv[i] hold tmp (or delete it when tmp is empty); replies the count. */
static void storeResult(client *c, ir_db *db, int i, dbColl *tmp, const char *event) {
    dbkey k = argKey(db, c, i);
    unsigned long n = zsetLen(tmp);
    dbEntry *old = lookupKey(db, &k);
    if (old) dbDeleteEntry(db, old);
    if (n) {
        notifyNoNewKey = old != NULL; /* Redis overwrites the destination: no "new" */
        dbEntry *ne = dbAdd(db, &k, OBJ_ZSET, 0);
        notifyNoNewKey = 0;
        dictReleaseTables(&ne->v.coll->d);
        *ne->v.coll = *tmp; /* the result becomes the value */
        signalKeyAsReady(db, k.p, k.len);
        signalModifiedKey(c, db, k.p, k.len);
        addReplyLongLong(c, (long long)n);
        notifyKeyspaceEvent(NOTIFY_ZSET, event, k.p, k.len, db->id);
    } else {
        zsetFreeTemp(db, tmp);
        addReplyStr(c, shared.czero);
        if (old) {
            signalModifiedKey(c, db, k.p, k.len);
            notifyKeyspaceEvent(NOTIFY_GENERIC, "del", k.p, k.len, db->id);
        }
    }
}

static void tmpInit(ir_db *db, dbColl *t) { collInit(t, db->d.seed, OBJ_ZSET); }

void zsetStoreMembers(client *c, int keyarg, size_t n, const char *const *m, const size_t *len,
                      const double *scores, const char *event) {
    ir_db *db = dbFor(c);
    dbColl tmp;
    tmpInit(db, &tmp);
    size_t maxlen = 0;
    for (size_t i = 0; i < n; i++) {
        if (len[i] > maxlen) maxlen = len[i];
        if (!collFind(&tmp, m[i], len[i])) zsetInsert(db, &tmp, m[i], len[i], scores[i]);
    }
    tmp.big = (uint8_t)overListpack((unsigned long)n, maxlen);
    storeResult(c, db, keyarg, &tmp, event);
}

static void rangeByRank(zrangeOut *o, dbColl *co, long start, long end, int reverse) {
    long llen = (long)zsetLen(co);
    if (start < 0) start = llen + start;
    if (end < 0) end = llen + end;
    if (start < 0) start = 0;
    if (start > end || start >= llen) {
        outBegin(o, 0);
        return;
    }
    if (end >= llen) end = llen - 1;
    long n = end - start + 1;
    outBegin(o, n);
    zskiplist *zsl = zslOf(co);
    zskiplistNode *x = reverse ? zslByRank(zsl, (unsigned long)(llen - start))
                               : zslByRank(zsl, (unsigned long)(start + 1));
    while (n--) {
        outItem(o, x);
        x = reverse ? x->backward : x->level[0].forward;
    }
}

/* Score and lex ranges: the count is unknown up front; collect into the
 * db's scratch array, then reply. */
static void emitCollected(zrangeOut *o, size_t n) {
    dbEntry **s = dbScratch(o->db, 0);
    outBegin(o, (long)n);
    for (size_t i = 0; i < n; i++) outItem(o, nodeOf(s[i]));
}

static void rangeByScore(zrangeOut *o, dbColl *co, const zrangespec *r, int reverse, long offset,
                         long limit) {
    zskiplist *zsl = zslOf(co);
    zskiplistNode *x = reverse ? zslLastInRange(zsl, r) : zslFirstInRange(zsl, r);
    while (x && offset--) x = reverse ? x->backward : x->level[0].forward;
    size_t n = 0;
    while (x && limit--) {
        if (reverse ? !valueGteMin(x->score, r) : !valueLteMax(x->score, r)) break;
        dbScratch(o->db, n + 1)[n] = x->fe;
        n++;
        x = reverse ? x->backward : x->level[0].forward;
    }
    emitCollected(o, n);
}

static void rangeByLex(zrangeOut *o, dbColl *co, const zlexrangespec *r, int reverse, long offset,
                       long limit) {
    zskiplist *zsl = zslOf(co);
    zskiplistNode *x = reverse ? zslLastInLex(zsl, r) : zslFirstInLex(zsl, r);
    while (x && offset--) x = reverse ? x->backward : x->level[0].forward;
    size_t n = 0;
    while (x && limit--) {
        if (reverse ? !lexGteMin(x->fe, r) : !lexLteMax(x->fe, r)) break;
        dbScratch(o->db, n + 1)[n] = x->fe;
        n++;
        x = reverse ? x->backward : x->level[0].forward;
    }
    emitCollected(o, n);
}

static int getLongArg(client *c, int i, long *out) {
    long long v;
    if (getLongLongFromArg(c, i, &v) != 0) return -1;
    *out = (long)v;
    return 0;
}

/* Redis's zrangeGenericCommand: argv[first] is the source key, then min max
 * and the options; store: argv[1] is ZRANGESTORE's destination. */
static void zrangeGeneric(client *c, int first, int store, int rangetype, int reverse) {
    int minidx = first + 1, maxidx = first + 2;
    int withscores = 0, rev = reverse;
    long offset = 0, limit = -1;
    int dir_auto = reverse < 0;
    if (dir_auto) rev = 0;
    for (int j = first + 3; j < c->argc; j++) {
        int left = c->argc - j - 1;
        if (!store && argEq(c, j, "withscores")) {
            withscores = 1;
        } else if (argEq(c, j, "limit") && left >= 2) {
            if (getLongArg(c, j + 1, &offset) != 0 || getLongArg(c, j + 2, &limit) != 0) return;
            j += 2;
        } else if (dir_auto && argEq(c, j, "rev")) {
            rev = 1;
            dir_auto = 0;
        } else if (rangetype == ZR_AUTO && argEq(c, j, "bylex")) {
            rangetype = ZR_LEX;
        } else if (rangetype == ZR_AUTO && argEq(c, j, "byscore")) {
            rangetype = ZR_SCORE;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (rangetype == ZR_AUTO) rangetype = ZR_RANK;
    if (limit != -1 && rangetype == ZR_RANK) {
        addReplyError(c, "syntax error, LIMIT is only supported in combination with either "
                         "BYSCORE or BYLEX");
        return;
    }
    if (withscores && rangetype == ZR_LEX) {
        addReplyError(c, "syntax error, WITHSCORES not supported in combination with BYLEX");
        return;
    }
    if (rev && (rangetype == ZR_SCORE || rangetype == ZR_LEX)) {
        int t = minidx;
        minidx = maxidx;
        maxidx = t;
    }
    long start = 0, end = 0;
    zrangespec sr;
    zlexrangespec lr;
    if (rangetype == ZR_RANK) {
        if (getLongArg(c, minidx, &start) != 0 || getLongArg(c, maxidx, &end) != 0) return;
    } else if (rangetype == ZR_SCORE) {
        if (parseRange(c, minidx, maxidx, &sr) != 0) {
            addReplyError(c, "min or max is not a float");
            return;
        }
    } else if (parseLexRange(c, minidx, maxidx, &lr) != 0) {
        addReplyError(c, "min or max not valid string range item");
        return;
    }
    ir_db *db = dbFor(c);
    zrangeOut o;
    memset(&o, 0, sizeof(o));
    o.c = c;
    o.db = db;
    o.store = store;
    o.withscores = withscores;
    if (store) tmpInit(db, &o.tmp);
    int missing;
    dbEntry *e = lookupTyped(c, first, OBJ_ZSET, &missing);
    if (!e) {
        if (!missing) return;
        if (store) /* ZRANGESTORE reads its source as lookupKeyRead */
            notifyKeyspaceEvent(NOTIFY_KEY_MISS, "keymiss", c->argv[first].ptr, c->argv[first].len,
                                db->id);
        if (store) storeResult(c, db, 1, &o.tmp, "zrangestore");
        else addReplyStr(c, shared.emptyarray);
        return;
    }
    if (rangetype == ZR_RANK) rangeByRank(&o, e->v.coll, start, end, rev);
    else if (rangetype == ZR_SCORE) rangeByScore(&o, e->v.coll, &sr, rev, offset, limit);
    else rangeByLex(&o, e->v.coll, &lr, rev, offset, limit);
    if (store) {
        o.tmp.big = (uint8_t)overListpack(zsetLen(&o.tmp), 0) | o.tmp.big;
        storeResult(c, db, 1, &o.tmp, "zrangestore");
    }
}

/* ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES] */
void zrangeCommand(client *c) { zrangeGeneric(c, 1, 0, ZR_AUTO, -1); }
/* ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] */
void zrangestoreCommand(client *c) { zrangeGeneric(c, 2, 1, ZR_AUTO, -1); }
/* ZREVRANGE key start stop [WITHSCORES] */
void zrevrangeCommand(client *c) { zrangeGeneric(c, 1, 0, ZR_RANK, 1); }
/* ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count] */
void zrangebyscoreCommand(client *c) { zrangeGeneric(c, 1, 0, ZR_SCORE, 0); }
/* ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count] */
void zrevrangebyscoreCommand(client *c) { zrangeGeneric(c, 1, 0, ZR_SCORE, 1); }
/* ZRANGEBYLEX key min max [LIMIT offset count] */
void zrangebylexCommand(client *c) { zrangeGeneric(c, 1, 0, ZR_LEX, 0); }
/* ZREVRANGEBYLEX key max min [LIMIT offset count] */
void zrevrangebylexCommand(client *c) { zrangeGeneric(c, 1, 0, ZR_LEX, 1); }

/* ---- ZREMRANGEBY* ------------------------------------------------------------ */

static void zremrangeGeneric(client *c, int type) {
    long start = 0, end = 0;
    zrangespec sr;
    zlexrangespec lr;
    if (type == ZR_RANK) {
        if (getLongArg(c, 2, &start) != 0 || getLongArg(c, 3, &end) != 0) return;
    } else if (type == ZR_SCORE) {
        if (parseRange(c, 2, 3, &sr) != 0) {
            addReplyError(c, "min or max is not a float");
            return;
        }
    } else if (parseLexRange(c, 2, 3, &lr) != 0) {
        addReplyError(c, "min or max not valid string range item");
        return;
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_ZSET);
    if (!e) return;
    ir_db *db = dbFor(c);
    dbColl *co = e->v.coll;
    zskiplist *zsl = zslOf(co);
    zskiplistNode *x = NULL;
    long n = -1; /* rank: how many; else until out of range */
    if (type == ZR_RANK) {
        long llen = (long)zsetLen(co);
        if (start < 0) start = llen + start;
        if (end < 0) end = llen + end;
        if (start < 0) start = 0;
        if (start > end || start >= llen) {
            addReplyStr(c, shared.czero);
            return;
        }
        if (end >= llen) end = llen - 1;
        n = end - start + 1;
        x = zslByRank(zsl, (unsigned long)start + 1);
    } else if (type == ZR_SCORE) {
        x = zslFirstInRange(zsl, &sr);
    } else {
        x = zslFirstInLex(zsl, &lr);
    }
    long long deleted = 0;
    while (x) {
        if (n >= 0 && deleted >= n) break;
        if (type == ZR_SCORE && !valueLteMax(x->score, &sr)) break;
        if (type == ZR_LEX && !lexLteMax(x->fe, &lr)) break;
        zskiplistNode *next = x->level[0].forward;
        zsetRemove(db, co, x->fe);
        deleted++;
        x = next;
    }
    if (deleted) {
        static const char *const ev[] = {"", "zremrangebyrank", "zremrangebyscore",
                                         "zremrangebylex"};
        signalModifiedKey(c, db, c->argv[1].ptr, c->argv[1].len);
        notifyKeyspaceEvent(NOTIFY_ZSET, ev[type], c->argv[1].ptr, c->argv[1].len, db->id);
        deleteIfEmpty(db, e, &c->argv[1]);
    }
    addReplyLongLong(c, deleted);
}

/* ZREMRANGEBYRANK key start stop */
void zremrangebyrankCommand(client *c) { zremrangeGeneric(c, ZR_RANK); }
/* ZREMRANGEBYSCORE key min max */
void zremrangebyscoreCommand(client *c) { zremrangeGeneric(c, ZR_SCORE); }
/* ZREMRANGEBYLEX key min max */
void zremrangebylexCommand(client *c) { zremrangeGeneric(c, ZR_LEX); }

/* ---- ZPOPMIN / ZPOPMAX / ZMPOP ------------------------------------------------ */

/* Redis's genericZpopCommand for keys argv[k0 .. k0+nk). count -1: no count given. */
enum { REPL_ASIS, REPL_POPPED, REPL_KEY };

static void zpopGeneric(client *c, int k0, int nk, int max, int emitkey, long count, int nested,
                        int nil_when_empty, int repl) {
    ir_db *db = dbFor(c);
    dbEntry *e = NULL;
    int ki = 0;
    for (int i = 0; i < nk; i++) {
        dbkey k = argKey(db, c, k0 + i);
        e = lookupKey(db, &k);
        if (!e) continue;
        if (e->type != OBJ_ZSET) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
        ki = k0 + i;
        break;
    }
    if (!e) {
        if (nil_when_empty) addReplyNullArray(c);
        else addReplyStr(c, shared.emptyarray);
        return;
    }
    if (count == 0) {
        addReplyStr(c, shared.emptyarray);
        return;
    }
    long req = count == -1 ? 1 : count;
    dbColl *co = e->v.coll;
    long llen = (long)zsetLen(co);
    long n = req > llen ? llen : req;
    const ir_arg *key = &c->argv[ki];
    if (!nested && !emitkey) {
        addReplyArrayLen(c, n * 2);
    } else if (nested && !emitkey) {
        addReplyArrayLen(c, n);
    } else if (!nested) {
        addReplyArrayLen(c, n * 2 + 1);
        addReplyBulk(c, key->ptr, key->len);
    } else {
        addReplyArrayLen(c, 2);
        addReplyBulk(c, key->ptr, key->len);
        addReplyArrayLen(c, n);
    }
    zskiplist *zsl = zslOf(co);
    for (long i = 0; i < n; i++) {
        zskiplistNode *x = max ? zsl->tail : zsl->header.level[0].forward;
        if (nested) addReplyArrayLen(c, 2);
        addReplyBulk(c, x->fe->key, x->fe->klen);
        addReplyScore(c, x->score);
        zsetRemove(db, co, x->fe);
    }
    notifyKeyspaceEvent(NOTIFY_ZSET, max ? "zpopmax" : "zpopmin", key->ptr, key->len, db->id);
    signalModifiedKey(c, db, key->ptr, key->len);
    char num[32];
    /* replicas: ZMPOP as ZPOPMIN/ZPOPMAX key <popped>, BZPOPMIN as ZPOPMIN key,
     * BZMPOP the same, as Redis 7.0 */
    int nl = snprintf(num, sizeof(num), "%ld", n);
    ir_str k = {key->ptr, key->len};
    ir_str pop = max ? IR_STR("ZPOPMAX") : IR_STR("ZPOPMIN");
    if (repl == REPL_KEY) replRewrite(c, 2, (ir_str[]){pop, k});
    else if (repl != REPL_ASIS) replRewrite(c, 3, (ir_str[]){pop, k, {num, (size_t)nl}});
    deleteIfEmpty(db, e, key);
}

static void zpopMinMax(client *c, int max) {
    if (c->argc > 3) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    long long count = -1;
    if (c->argc == 3 && getPositiveLongFromArg(c, 2, &count) != 0) return;
    zpopGeneric(c, 1, 1, max, 0, (long)count, c->resp > 2 && count != -1, 0, REPL_ASIS);
}

/* ZPOPMIN key [count] */
void zpopminCommand(client *c) { zpopMinMax(c, 0); }
/* ZPOPMAX key [count] */
void zpopmaxCommand(client *c) { zpopMinMax(c, 1); }

/* A long in [lo, hi] or the error msg (also for a non-integer). */
static int getRangeLongArg(client *c, int i, long long lo, long long hi, long long *out,
                           const char *msg) {
    long long v;
    if (!string2ll(c->argv[i].ptr, c->argv[i].len, &v)) {
        if (msg) addReplyError(c, msg);
        else addReplyStr(c, shared.notinteger);
        return -1;
    }
    if (v < lo || v > hi) {
        if (msg) addReplyError(c, msg);
        else
            addReplyErrorFormat(c, "value is out of range, value must between %lld and %lld", lo,
                                hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* The blocking forms: pop from the first non-empty key of argv[k0 ..
 * k0+nk), or wait for one (null array at the deadline, inside MULTI, or
 * when blocking is denied). */
static void bzpopGeneric(client *c, int k0, int nk, int max, int ti, long count, int nested) {
    uint64_t deadline = 0;
    if (getBlockingTimeoutFromArg(c, ti, &deadline) != 0) return;
    ir_db *db = dbFor(c);
    for (int i = 0; i < nk; i++) {
        dbkey k = argKey(db, c, k0 + i);
        dbEntry *e = lookupKey(db, &k);
        if (!e) continue;
        if (e->type != OBJ_ZSET) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
        zpopGeneric(c, k0 + i, 1, max, 1, count, nested, nested,
                    count == -1 ? REPL_KEY : REPL_POPPED);
        return;
    }
    if (!blockingAllowed(c)) addReplyNullArray(c);
    else blockForKeys(c, db, k0, nk, 1, deadline);
}

/* BZPOPMIN key [key ...] timeout */
void bzpopminCommand(client *c) { bzpopGeneric(c, 1, c->argc - 2, 0, c->argc - 1, -1, 0); }
/* BZPOPMAX key [key ...] timeout */
void bzpopmaxCommand(client *c) { bzpopGeneric(c, 1, c->argc - 2, 1, c->argc - 1, -1, 0); }

/* [B]ZMPOP [timeout] numkeys key [key ...] MIN|MAX [COUNT count]; ni: numkeys' index */
static void zmpopGeneric(client *c, int ni, int blocking) {
    long long numkeys, count = -1;
    if (getRangeLongArg(c, ni, 1, LONG_MAX, &numkeys, "numkeys should be greater than 0") != 0)
        return;
    long long wi = ni + numkeys + 1;
    if (wi >= c->argc) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    int max;
    if (argEq(c, (int)wi, "min")) {
        max = 0;
    } else if (argEq(c, (int)wi, "max")) {
        max = 1;
    } else {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    for (int j = (int)wi + 1; j < c->argc; j++) {
        if (count == -1 && argEq(c, j, "count") && j + 1 < c->argc) {
            j++;
            if (getRangeLongArg(c, j, 1, LONG_MAX, &count, "count should be greater than 0") != 0)
                return;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (count == -1) count = 1;
    if (blocking) bzpopGeneric(c, ni + 1, (int)numkeys, max, 1, (long)count, 1);
    else zpopGeneric(c, ni + 1, (int)numkeys, max, 1, (long)count, 1, 1, REPL_POPPED);
}

/* ZMPOP numkeys key [key ...] MIN|MAX [COUNT count] */
void zmpopCommand(client *c) { zmpopGeneric(c, 1, 0); }
/* BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count] */
void bzmpopCommand(client *c) { zmpopGeneric(c, 2, 1); }

/* ---- ZRANDMEMBER ------------------------------------------------------------- */

/* ZRANDMEMBER key [count [WITHSCORES]] */
void zrandmemberCommand(client *c) {
    ir_db *db = dbFor(c);
    if (c->argc < 3) {
        int missing;
        dbEntry *e = lookupTyped(c, 1, OBJ_ZSET, &missing);
        if (!e) {
            if (missing) addReplyNull(c);
            return;
        }
        dbEntry *fe = collRandom(db, e->v.coll);
        addReplyBulk(c, fe->key, fe->klen);
        return;
    }
    long long l;
    int withscores = 0;
    if (getRangeLongArg(c, 2, -LONG_MAX, LONG_MAX, &l, NULL) != 0) return;
    if (c->argc > 4 || (c->argc == 4 && !argEq(c, 3, "withscores"))) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    if (c->argc == 4) {
        withscores = 1;
        if (l < -LONG_MAX / 2 || l > LONG_MAX / 2) {
            addReplyError(c, "value is out of range");
            return;
        }
    }
    dbEntry *e = lookupKeyOrReply(c, 1, shared.emptyarray, OBJ_ZSET);
    if (!e) return;
    dbColl *co = e->v.coll;
    unsigned long size = zsetLen(co);
    int uniq = l >= 0;
    unsigned long count = (unsigned long)(l >= 0 ? l : -l);
    if (count == 0) {
        addReplyStr(c, shared.emptyarray);
        return;
    }
    if (!uniq || count == 1) {
        addReplyRangeLen(c, (long)count, withscores);
        while (count--) addReplyRangeItem(c, nodeOf(collRandom(db, co)), withscores);
        return;
    }
    if (count >= size) {
        addReplyRangeLen(c, (long)size, withscores);
        for (zskiplistNode *x = zslOf(co)->header.level[0].forward; x; x = x->level[0].forward)
            addReplyRangeItem(c, x, withscores);
        return;
    }
    size_t n = collSample(db, co, count);
    dbEntry **s = dbScratch(db, n);
    addReplyRangeLen(c, (long)n, withscores);
    for (size_t i = 0; i < n; i++) addReplyRangeItem(c, nodeOf(s[i]), withscores);
}

/* ---- ZSCAN --------------------------------------------------------------------- */

/* ZSCAN key cursor [MATCH pattern] [COUNT count] */
void zscanCommand(client *c) {
    unsigned long long cursor;
    if (parseScanCursorOrReply(c, 2, &cursor) != 0) return;
    dbEntry *e = lookupKeyOrReply(c, 1, IR_STR("*2\r\n$1\r\n0\r\n*0\r\n"), OBJ_ZSET);
    if (!e) return;
    scanGenericCommand(c, e);
}

/* The score text ZSCAN replies with: a listpack's stored form (integers
 * as integers, else %.17g) or, for a skiplist, "%.17Lf" without trailing zeroes. */
int zsetScanScore(const dbColl *co, const dbEntry *fe, char *buf, size_t n) {
    double d = nodeOf(fe)->score;
    if (co->big) return ld2stringHuman(buf, n, (long double)d);
    if (isinf(d)) return snprintf(buf, n, "%s", d > 0 ? "inf" : "-inf");
    if (d == 0) return snprintf(buf, n, "%s", signbit(d) ? "-0" : "0");
    if (d > -4503599627370495.0 && d < 4503599627370496.0 && d == (double)(long long)d)
        return snprintf(buf, n, "%lld", (long long)d);
    return snprintf(buf, n, "%.17g", d);
}

/* ---- ZUNION / ZINTER / ZDIFF ---------------------------------------------------- */

enum { OP_UNION, OP_INTER, OP_DIFF };
enum { AGG_SUM, AGG_MIN, AGG_MAX };

typedef struct {
    dbEntry *e; /* NULL: missing key */
    double weight;
    unsigned long len;
} zsrc;

static unsigned long srcLen(const dbEntry *e) {
    return e ? (unsigned long)dictSize(&e->v.coll->d) : 0;
}

static int srcCmp(const void *a, const void *b) {
    unsigned long x = ((const zsrc *)a)->len, y = ((const zsrc *)b)->len;
    return x < y ? -1 : x > y;
}

/* Score of member in source s (1 for a set's members); 0 when absent. */
static int srcScore(const zsrc *s, const char *m, size_t len, double *score) {
    if (!s->e) return 0;
    dbEntry *fe = collFind(s->e->v.coll, m, len);
    if (!fe) return 0;
    *score = s->e->type == OBJ_ZSET ? nodeOf(fe)->score : 1.0;
    return 1;
}

static void aggregate(int agg, double *target, double val) {
    if (agg == AGG_SUM) {
        *target = *target + val;
        if (isnan(*target)) *target = 0.0;
    } else if (agg == AGG_MIN) {
        *target = val < *target ? val : *target;
    } else {
        *target = val > *target ? val : *target;
    }
}

static double weighted(const zsrc *s, double v) {
    double r = s->weight * v;
    return isnan(r) ? 0.0 : r;
}

/* Call fn on each element of source s. */
typedef void (*srcFn)(const char *m, size_t len, double score, void *arg);
static void srcEach(const zsrc *s, srcFn fn, void *arg) {
    if (!s->e) return;
    if (s->e->type == OBJ_ZSET) {
        zsetForEach(s->e->v.coll, fn, arg);
        return;
    }
    const dict *d = &s->e->v.coll->d;
    for (int t = 0; t <= 1; t++)
        for (size_t i = 0; i < d->ht[t].size; i++)
            for (const dbEntry *fe = d->ht[t].table[i]; fe; fe = fe->next)
                fn(fe->key, fe->klen, 1.0, arg);
}

typedef struct {
    ir_db *db;
    dbColl *out;
    zsrc *src;
    int nsrc, idx, agg, op;
    size_t maxlen;
    long long card, limit;
} setopCtx;

/* Collected scores live in the members' nodes of a dict-only temporary; the
 * skiplist is built once every score is final. */
static void unionEach(const char *m, size_t len, double score, void *arg) {
    setopCtx *x = arg;
    double v = weighted(&x->src[x->idx], score);
    dbEntry *fe = collFind(x->out, m, len);
    if (fe) {
        aggregate(x->agg, &nodeOf(fe)->score, v);
        return;
    }
    zsetInsert(x->db, x->out, m, len, v);
    if (len > x->maxlen) x->maxlen = len;
}

static void interEach(const char *m, size_t len, double score, void *arg) {
    setopCtx *x = arg;
    if (x->limit && x->card >= x->limit) return;
    double v = weighted(&x->src[0], score);
    for (int j = 1; j < x->nsrc; j++) {
        double o;
        if (x->src[j].e == x->src[0].e) {
            o = score;
        } else if (!srcScore(&x->src[j], m, len, &o)) {
            return;
        }
        aggregate(x->agg, &v, weighted(&x->src[j], o));
    }
    x->card++;
    if (!x->out) return;
    zsetInsert(x->db, x->out, m, len, v);
    if (len > x->maxlen) x->maxlen = len;
}

static void diffEach(const char *m, size_t len, double score, void *arg) {
    setopCtx *x = arg;
    for (int j = 1; j < x->nsrc; j++) {
        double o;
        if (srcScore(&x->src[j], m, len, &o)) return;
    }
    zsetInsert(x->db, x->out, m, len, score);
    if (len > x->maxlen) x->maxlen = len;
}

/* Rebuild the skiplist of a set whose nodes' scores were changed in place. */
static void relinkAll(ir_db *db, dbColl *co) {
    zskiplist *zsl = zslOf(co);
    size_t n = zsl->length;
    dbEntry **s = dbScratch(db, n);
    size_t i = 0;
    for (zskiplistNode *x = zsl->header.level[0].forward; x; x = x->level[0].forward)
        s[i++] = x->fe;
    zsl->tail = NULL;
    zsl->length = 0;
    zsl->level = 1;
    for (int l = 0; l < ZSL_MAXLEVEL; l++) {
        zsl->header.level[l].forward = NULL;
        zsl->header.level[l].span = 0;
    }
    for (i = 0; i < n; i++) zslLink(zsl, nodeOf(s[i]), nodeLevels(s[i]));
}

/* Redis's zunionInterDiffGenericCommand: dst is the destination's argv index
 * (0: reply instead), numkeys at argv[ki]. */
static void setopGeneric(client *c, int dst, int ki, int op, int cardonly) {
    long long setnum;
    if (getLongLongFromArg(c, ki, &setnum) != 0) return;
    if (setnum < 1) {
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(c->argv[0].len < 40 ? c->argv[0].len : 40),
                 c->argv[0].ptr);
        for (char *p = name; *p; p++) *p = (char)tolower((unsigned char)*p);
        addReplyErrorFormat(c, "at least 1 input key is needed for '%s' command", name);
        return;
    }
    if (setnum > c->argc - (ki + 1)) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    ir_db *db = dbFor(c);
    zsrc *src = (zsrc *)dbMalloc(sizeof(zsrc) * (size_t)setnum);
    int j = ki + 1;
    for (long long i = 0; i < setnum; i++, j++) {
        dbkey k = argKey(db, c, j);
        dbEntry *e = lookupKey(db, &k);
        if (e && e->type != OBJ_ZSET && e->type != OBJ_SET) {
            free(src);
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
        if (!e && dst) /* the STOREs read their sources as lookupKeyRead */
            notifyKeyspaceEvent(NOTIFY_KEY_MISS, "keymiss", k.p, k.len, db->id);
        src[i].e = e;
        src[i].weight = 1.0;
        src[i].len = srcLen(e);
    }
    int agg = AGG_SUM, withscores = 0;
    long long limit = 0;
    while (j < c->argc) {
        int remaining = c->argc - j;
        if (op != OP_DIFF && !cardonly && remaining >= setnum + 1 && argEq(c, j, "weights")) {
            j++;
            for (long long i = 0; i < setnum; i++, j++) {
                if (!argDouble(c, j, &src[i].weight)) {
                    free(src);
                    addReplyError(c, "weight value is not a float");
                    return;
                }
            }
        } else if (op != OP_DIFF && !cardonly && remaining >= 2 && argEq(c, j, "aggregate")) {
            j++;
            if (argEq(c, j, "sum")) agg = AGG_SUM;
            else if (argEq(c, j, "min")) agg = AGG_MIN;
            else if (argEq(c, j, "max")) agg = AGG_MAX;
            else {
                free(src);
                addReplyStr(c, shared.syntaxerr);
                return;
            }
            j++;
        } else if (!dst && !cardonly && argEq(c, j, "withscores")) {
            j++;
            withscores = 1;
        } else if (cardonly && remaining >= 2 && argEq(c, j, "limit")) {
            j++;
            long long v;
            if (!string2ll(c->argv[j].ptr, c->argv[j].len, &v) || v < 0) {
                free(src);
                addReplyError(c, "LIMIT can't be negative");
                return;
            }
            limit = v;
            j++;
        } else {
            free(src);
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (op != OP_DIFF) qsort(src, (size_t)setnum, sizeof(zsrc), srcCmp);
    dbColl out;
    tmpInit(db, &out);
    out.big = 1; /* built as Redis builds it: a skiplist (-0 stays -0) */
    setopCtx x = {db, cardonly ? NULL : &out, src, (int)setnum, 0, agg, op, 0, 0, limit};
    if (op == OP_UNION) {
        for (int i = 0; i < x.nsrc; i++) {
            x.idx = i;
            srcEach(&src[i], unionEach, &x);
        }
        if (out.zsl) relinkAll(db, &out);
    } else if (op == OP_INTER) {
        if (src[0].e) srcEach(&src[0], interEach, &x);
    } else if (src[0].e) {
        srcEach(&src[0], diffEach, &x);
    }
    free(src);
    if (cardonly) {
        addReplyLongLong(c, x.card);
        return;
    }
    if (dst) {
        out.big = (uint8_t)overListpack(zsetLen(&out), x.maxlen);
        static const char *const ev[] = {"zunionstore", "zinterstore", "zdiffstore"};
        storeResult(c, db, dst, &out, ev[op]);
        return;
    }
    addReplyRangeLen(c, (long)zsetLen(&out), withscores);
    if (out.zsl)
        for (zskiplistNode *n = out.zsl->header.level[0].forward; n; n = n->level[0].forward)
            addReplyRangeItem(c, n, withscores);
    zsetFreeTemp(db, &out);
}

/* ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] */
void zunionstoreCommand(client *c) { setopGeneric(c, 1, 2, OP_UNION, 0); }
/* ZINTERSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] */
void zinterstoreCommand(client *c) { setopGeneric(c, 1, 2, OP_INTER, 0); }
/* ZDIFFSTORE destination numkeys key [key ...] */
void zdiffstoreCommand(client *c) { setopGeneric(c, 1, 2, OP_DIFF, 0); }
/* ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES] */
void zunionCommand(client *c) { setopGeneric(c, 0, 1, OP_UNION, 0); }
/* ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES] */
void zinterCommand(client *c) { setopGeneric(c, 0, 1, OP_INTER, 0); }
/* ZDIFF numkeys key [key ...] [WITHSCORES] */
void zdiffCommand(client *c) { setopGeneric(c, 0, 1, OP_DIFF, 0); }
/* ZINTERCARD numkeys key [key ...] [LIMIT limit] */
void zintercardCommand(client *c) { setopGeneric(c, 0, 1, OP_INTER, 1); }
