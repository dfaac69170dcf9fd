/* sort.c - SORT and SORT_RO over lists and sets (Redis 7.0's semantics; sorted
 * sets are out of scope).
 *
 *   SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]]
 *            [ASC | DESC] [ALPHA] [STORE destination]
 *
 * A pattern's first '*' is replaced by an element to name another key: a
 * string's value, or with "->field" a hash field's. "#" is the element
 * itself. BY without '*' does not sort. Numeric sorting reads each weight as
 * a double ("One or more scores can't be converted into double" otherwise)
 * and orders equal weights by the elements' bytes; ALPHA compares bytes. A
 * set sorted into STORE without a sort order is sorted ALPHA, as Redis does,
 * so the stored list does not depend on the set's internal order.
 *
 * SORT is not a hot path: it allocates its vector per call, as Redis does.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "commands.h"
#include "db_internal.h"
#include "notify.h"

typedef struct sortItem {
    const char *p; /* the element */
    size_t len;
    double score;
    const char *cmp; /* ALPHA BY: the weight's bytes (NULL: no weight key) */
    size_t cmplen;
} sortItem;

typedef struct sortOpts {
    int desc, alpha, bypattern;
} sortOpts;

static sortOpts sort_opts; /* for the qsort comparator (server thread only) */

static int bytesCmp(const char *a, size_t alen, const char *b, size_t blen) {
    int r = memcmp(a, b, alen < blen ? alen : blen);
    if (r) return r;
    return alen < blen ? -1 : alen > blen;
}

static int sortCompare(const void *x, const void *y) {
    const sortItem *a = x, *b = y;
    int cmp;
    if (!sort_opts.alpha) {
        if (a->score > b->score) cmp = 1;
        else if (a->score < b->score) cmp = -1;
        else cmp = bytesCmp(a->p, a->len, b->p, b->len); /* equal weights: by the elements */
    } else if (sort_opts.bypattern) {
        if (!a->cmp || !b->cmp) cmp = a->cmp == b->cmp ? 0 : (a->cmp ? 1 : -1);
        else cmp = bytesCmp(a->cmp, a->cmplen, b->cmp, b->cmplen);
    } else {
        cmp = bytesCmp(a->p, a->len, b->p, b->len);
    }
    return sort_opts.desc ? -cmp : cmp;
}

/* The value the pattern names for element (p, len) in out and outlen; 1 if found.
 * "#" is the element; no '*' names nothing; "...*...->field" a hash field. */
static int lookupByPattern(ir_db *db, const ir_arg *pat, const char *p, size_t len,
                           const char **out, size_t *outlen) {
    if (pat->len == 1 && pat->ptr[0] == '#') {
        *out = p, *outlen = len;
        return 1;
    }
    const char *star = memchr(pat->ptr, '*', pat->len);
    if (!star) return 0;
    const char *end = pat->ptr + pat->len, *field = NULL;
    for (const char *f = star + 1; f + 2 < end; f++) {
        if (f[0] == '-' && f[1] == '>') {
            field = f + 2;
            break;
        }
    }
    size_t prefix = (size_t)(star - pat->ptr);
    size_t postfix = (size_t)((field ? field - 2 : end) - (star + 1));
    size_t klen = prefix + len + postfix;
    char small[256];
    char *k = klen <= sizeof(small) ? small : dbMalloc(klen);
    memcpy(k, pat->ptr, prefix);
    memcpy(k + prefix, p, len);
    memcpy(k + prefix + len, star + 1, postfix);
    dbkey key = dbKey(db, k, klen);
    dbEntry *e = lookupKey(db, &key);
    if (k != small) free(k);
    if (!e) return 0;
    if (field) {
        if (e->type != OBJ_HASH) return 0;
        dbEntry *fe = collFind(e->v.coll, field, (size_t)(end - field));
        if (!fe) return 0;
        *out = fe->v.str.ptr, *outlen = fe->v.str.len;
        return 1;
    }
    if (e->type != OBJ_STRING) return 0;
    *out = e->v.str.ptr, *outlen = e->v.str.len;
    return 1;
}

static void sortGeneric(client *c, int readonly) {
    ir_db *db = dbFor(c);
    sortOpts o = {0, 0, 0};
    int dontsort = 0, ngets = 0, store = 0;
    const ir_arg *by = NULL;
    long long limit_start = 0, limit_count = -1;
    for (int j = 2; j < c->argc; j++) {
        int left = c->argc - j - 1;
        if (argEq(c, j, "asc")) {
            o.desc = 0;
        } else if (argEq(c, j, "desc")) {
            o.desc = 1;
        } else if (argEq(c, j, "alpha")) {
            o.alpha = 1;
        } else if (argEq(c, j, "limit") && left >= 2) {
            if (getLongLongFromArg(c, j + 1, &limit_start) != 0 ||
                getLongLongFromArg(c, j + 2, &limit_count) != 0)
                return;
            j += 2;
        } else if (argEq(c, j, "store") && left >= 1 && !readonly) {
            store = j + 1;
            j++;
        } else if (argEq(c, j, "by") && left >= 1) {
            by = &c->argv[j + 1];
            if (!memchr(by->ptr, '*', by->len)) {
                dontsort = 1; /* BY nosort */
            } else if (!aclFullKeyRead(c)) {
                addReplyError(c, "BY option of SORT denied due to insufficient ACL permissions.");
                return;
            }
            j++;
        } else if (argEq(c, j, "get") && left >= 1) {
            if (!aclFullKeyRead(c)) {
                addReplyError(c, "GET option of SORT denied due to insufficient ACL permissions.");
                return;
            }
            ngets++;
            j++;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    dbkey k = argKey(db, c, 1);
    dbEntry *src = lookupKey(db, &k);
    if (src && src->type != OBJ_LIST && src->type != OBJ_SET && src->type != OBJ_ZSET) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    if (dontsort && src && src->type == OBJ_SET && (store || (c->flags & CLIENT_SCRIPT))) {
        dontsort = 0; /* a stored sort of a set, or one in a script, must not depend on its order */
        o.alpha = 1;
        by = NULL;
    }
    o.bypattern = by != NULL;

    size_t n = !src ? 0 : src->type == OBJ_LIST ? src->v.list.len : dictSize(&src->v.coll->d);
    sortItem *v = n ? dbMalloc(n * sizeof(*v)) : NULL;
    if (src && src->type == OBJ_LIST) {
        for (size_t i = 0; i < n; i++) {
            const lelem *x = listAt(&src->v.list, i);
            v[i] = (sortItem){x->p, x->len, 0, NULL, 0};
        }
    } else if (src) {
        dbEntry **all = dbScratch(db, n);
        if (src->type == OBJ_ZSET) zsetAll(src->v.coll, all); /* in score order */
        else collAll(src->v.coll, all);
        for (size_t i = 0; i < n; i++) v[i] = (sortItem){all[i]->key, all[i]->klen, 0, NULL, 0};
        if (src->type == OBJ_ZSET && dontsort && o.desc) /* BY nosort DESC: from the top */
            for (size_t i = 0; i < n / 2; i++) {
                sortItem t = v[i];
                v[i] = v[n - 1 - i];
                v[n - 1 - i] = t;
            }
    }

    long long start = limit_start < 0 ? 0 : limit_start;
    long long end = limit_count < 0 ? (long long)n - 1 : start + limit_count - 1;
    if (start >= (long long)n) {
        start = (long long)n - 1;
        end = (long long)n - 2;
    }
    if (end >= (long long)n) end = (long long)n - 1;

    if (!dontsort) {
        int conversion_error = 0;
        for (size_t i = 0; i < n; i++) {
            const char *w = v[i].p;
            size_t wlen = v[i].len;
            if (by && !lookupByPattern(db, by, v[i].p, v[i].len, &w, &wlen)) continue;
            if (o.alpha) {
                if (by) v[i].cmp = w, v[i].cmplen = wlen;
                continue;
            }
            char small[128];
            char *buf = wlen < sizeof(small) ? small : dbMalloc(wlen + 1);
            memcpy(buf, w, wlen);
            buf[wlen] = '\0';
            char *eptr;
            errno = 0;
            v[i].score = strtod(buf, &eptr);
            if (eptr != buf + wlen || errno == ERANGE || isnan(v[i].score)) conversion_error = 1;
            if (buf != small) free(buf);
        }
        if (conversion_error) {
            free(v);
            addReplyError(c, "One or more scores can't be converted into double");
            return;
        }
        sort_opts = o;
        if (n) qsort(v, n, sizeof(*v), sortCompare);
    }

    long long count = end - start + 1 > 0 ? end - start + 1 : 0;
    long long outlen = ngets ? (long long)ngets * count : count;
    /* the GET patterns, in order */
    int *gets = ngets ? dbMalloc((size_t)ngets * sizeof(int)) : NULL;
    for (int j = 2, g = 0; j < c->argc; j++) {
        if (argEq(c, j, "limit")) j += 2;
        else if (argEq(c, j, "by") || argEq(c, j, "store")) j++;
        else if (argEq(c, j, "get")) gets[g++] = ++j;
    }
    if (!store) {
        addReplyArrayLen(c, (long)outlen);
        for (long long i = start; i <= end; i++) {
            if (!ngets) addReplyBulk(c, v[i].p, v[i].len);
            for (int g = 0; g < ngets; g++) {
                const char *val;
                size_t vlen;
                if (lookupByPattern(db, &c->argv[gets[g]], v[i].p, v[i].len, &val, &vlen))
                    addReplyBulk(c, val, vlen);
                else addReplyNull(c);
            }
        }
        free(gets);
        free(v);
        return;
    }

    /* STORE: copy the results first (the destination may be the source) */
    lelem *out = outlen ? dbMalloc((size_t)outlen * sizeof(*out)) : NULL;
    size_t m = 0;
    for (long long i = start; i <= end; i++) {
        for (int g = 0; g < (ngets ? ngets : 1); g++) {
            const char *val = v[i].p;
            size_t vlen = v[i].len;
            if (ngets && !lookupByPattern(db, &c->argv[gets[g]], v[i].p, v[i].len, &val, &vlen))
                val = "", vlen = 0; /* a missing GET value is stored empty */
            char *p = dbMalloc(vlen + 1);
            memcpy(p, val, vlen);
            p[vlen] = '\0';
            out[m++] = (lelem){p, vlen};
        }
    }
    free(gets);
    free(v);
    dbkey dk = argKey(db, c, store);
    dbEntry *old = lookupKey(db, &dk);
    if (outlen) {
        if (old) dbDeleteEntry(db, old);
        dbEntry *dst = dbAdd(db, &dk, OBJ_LIST, 0);
        for (size_t i = 0; i < m; i++) listPush(db, &dst->v.list, out[i].p, out[i].len, 0);
        signalModifiedKey(c, db, dk.p, dk.len);
        signalKeyAsReady(db, dk.p, dk.len);
    } else if (old) {
        dbDeleteEntry(db, old);
        signalModifiedKey(c, db, dk.p, dk.len);
    }
    free(out);
    addReplyLongLong(c, outlen);
}

/* SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
 * [STORE destination] */
void sortCommand(client *c) { sortGeneric(c, 0); }

/* SORT_RO: the same without STORE */
void sortroCommand(client *c) { sortGeneric(c, 1); }
