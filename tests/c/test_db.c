/* test_db.c - the keyspace's hash table, expiry, lists, byte accounting and
 * glob matching (db.c, t_string.c, t_list.c through db_internal.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"
#include "check.h"
#include "server.h"

/* Many checks in a loop count once (as "bad_ == 0"), so the totals stay readable. */
#define CHECK_ALL(what, cond) \
    do { \
        if (!(cond)) { \
            if (!bad_) fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, what, #cond); \
            bad_++; \
        } \
    } while (0)

static int keyname(char *buf, size_t cap, const char *prefix, long i) {
    return snprintf(buf, cap, "%s:%ld", prefix, i);
}

static dbEntry *setStr(ir_db *db, const void *k, size_t klen, const void *v, size_t vlen) {
    dbkey key = dbKey(db, k, klen);
    dbEntry *e = lookupKey(db, &key);
    if (!e) e = dbAdd(db, &key, OBJ_STRING, vlen + 1 <= DB_EMBED_MAX ? vlen + 1 : 0);
    strSetValue(db, e, v, vlen, 0);
    return e;
}

static dbEntry *get(ir_db *db, const void *k, size_t klen) {
    dbkey key = dbKey(db, k, klen);
    return lookupKey(db, &key);
}

static void testSiphash(void) {
    uint8_t k[16], msg[64];
    for (int i = 0; i < 16; i++) k[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
    /* SipHash-2-4 reference vectors (key 00..0f, message 00..len-1). */
    CHECK(siphash24(msg, 0, k) == 0x726fdb47dd0e0e31ULL);
    CHECK(siphash24(msg, 15, k) == 0xa129ca6149be45e5ULL);
    /* SipHash-1-3 with a zero key is CPython's bytes hash under PYTHONHASHSEED=0. */
    uint8_t z[16] = {0};
    CHECK(siphash13("abc", 3, z) == (uint64_t)-4594863902769663758LL);
    CHECK(siphash13("hello world, this is a longer key!", 34, z) == 2013633222233385450ULL);
    CHECK(siphash13("\x00\x01", 2, z) == 75343234424780393ULL);
}

static void testDict(void) {
    ir_db *db = dbNew();
    const long N = 100000;
    char kb[64], vb[64];
    int bad_ = 0;

    CHECK(dbSize(db) == 0 && dbBytes(db) == 0);
    for (long i = 0; i < N; i++) {
        int kl = keyname(kb, sizeof(kb), "key", i), vl = keyname(vb, sizeof(vb), "val", i);
        setStr(db, kb, (size_t)kl, vb, (size_t)vl);
        /* Every key stays findable while the table grows incrementally. */
        if ((i & 1023) == 0) {
            for (long j = 0; j <= i; j += 97) {
                kl = keyname(kb, sizeof(kb), "key", j);
                CHECK_ALL("lookup during growth", get(db, kb, (size_t)kl) != NULL);
            }
        }
    }
    CHECK(bad_ == 0);
    CHECK(dbSize(db) == (uint64_t)N);
    size_t buckets = dictBuckets(&db->d);
    CHECK(buckets >= (size_t)N);
    while (dictRehash(&db->d, 1000)) {}
    CHECK((db->d.ht[0].size & (db->d.ht[0].size - 1)) == 0);
    CHECK(db->d.ht[0].size >= (size_t)N && db->d.ht[0].size <= 4 * (size_t)N);

    bad_ = 0;
    for (long i = 0; i < N; i++) {
        int kl = keyname(kb, sizeof(kb), "key", i), vl = keyname(vb, sizeof(vb), "val", i);
        dbEntry *e = get(db, kb, (size_t)kl);
        CHECK_ALL("lookup", e && e->type == OBJ_STRING && e->v.str.len == (size_t)vl &&
                                memcmp(e->v.str.ptr, vb, (size_t)vl) == 0 &&
                                e->v.str.ptr[vl] == '\0');
    }
    CHECK(bad_ == 0);
    CHECK(get(db, "key:-1", 6) == NULL);
    CHECK(get(db, "key:1000000", 11) == NULL);

    /* Overwrite in place and with longer values. */
    dbEntry *e = setStr(db, "key:7", 5, "x", 1);
    CHECK(e->v.str.len == 1 && e->v.str.ptr[0] == 'x');
    char big[300];
    memset(big, 'b', sizeof(big));
    e = setStr(db, "key:7", 5, big, sizeof(big));
    CHECK(e->v.str.len == sizeof(big) && memcmp(e->v.str.ptr, big, sizeof(big)) == 0);
    CHECK(get(db, "key:7", 5) == e && dbSize(db) == (uint64_t)N);

    /* Mass deletion shrinks the table. */
    bad_ = 0;
    for (long i = 0; i < N - 100; i++) {
        int kl = keyname(kb, sizeof(kb), "key", i);
        dbkey k = dbKey(db, kb, (size_t)kl);
        CHECK_ALL("delete", dbDelete(db, &k) == 1);
        CHECK_ALL("delete twice", dbDelete(db, &k) == 0);
    }
    CHECK(bad_ == 0);
    CHECK(dbSize(db) == 100);
    while (dictRehash(&db->d, 1000)) {}
    CHECK(dictBuckets(&db->d) <= 256);
    bad_ = 0;
    for (long i = N - 100; i < N; i++) {
        int kl = keyname(kb, sizeof(kb), "key", i);
        CHECK_ALL("survivor", get(db, kb, (size_t)kl) != NULL);
    }
    CHECK(bad_ == 0);
    for (long i = N - 100; i < N; i++) {
        int kl = keyname(kb, sizeof(kb), "key", i);
        dbkey k = dbKey(db, kb, (size_t)kl);
        dbDelete(db, &k);
    }
    CHECK(dbSize(db) == 0);
    CHECK(dbBytes(db) == 0); /* the accounting balances */
    while (dictRehash(&db->d, 1000)) {}
    CHECK(dictBuckets(&db->d) == DICT_HT_INITIAL_SIZE);

    /* Binary keys: NULs, high bytes, the empty key, prefixes of each other. */
    const char k1[] = {'a', 0, 'b'}, k2[] = {'a', 0, 'c'}, k3[] = {'a', 0};
    const char k4[] = {(char)0xff, (char)0x80, 0, 0};
    setStr(db, k1, 3, "one", 3);
    setStr(db, k2, 3, "two", 3);
    setStr(db, k3, 2, "three", 5);
    setStr(db, k4, 4, "four", 4);
    setStr(db, "", 0, "empty", 5);
    setStr(db, "a", 1, "\0\0\0", 3);
    CHECK(dbSize(db) == 6);
    e = get(db, k1, 3);
    CHECK(e && e->v.str.len == 3 && memcmp(e->v.str.ptr, "one", 3) == 0);
    e = get(db, k2, 3);
    CHECK(e && memcmp(e->v.str.ptr, "two", 3) == 0);
    e = get(db, k3, 2);
    CHECK(e && memcmp(e->v.str.ptr, "three", 5) == 0);
    e = get(db, k4, 4);
    CHECK(e && memcmp(e->v.str.ptr, "four", 4) == 0);
    CHECK(get(db, k4, 3) == NULL && get(db, k4, 2) == NULL);
    e = get(db, "", 0);
    CHECK(e && e->klen == 0 && memcmp(e->v.str.ptr, "empty", 5) == 0);
    e = get(db, "a", 1);
    CHECK(e && e->v.str.len == 3 && memcmp(e->v.str.ptr, "\0\0\0", 3) == 0);
    CHECK(get(db, "a\0", 2) != NULL && get(db, "a\0b", 3) != NULL && get(db, "a\0d", 3) == NULL);

    dbEmpty(db);
    CHECK(dbSize(db) == 0 && dbBytes(db) == 0 && dbExpires(db) == 0);
    dbFree(db);
}

/* Keys whose hashes collide in the low bits still work (long chains). */
static void testCollisions(void) {
    ir_db *db = dbNew();
    char kb[32];
    int bad_ = 0;
    /* Zero the seed (so hashes are known) and keep keys that share the low 4 bits. */
    memset(db->d.seed, 0, sizeof(db->d.seed));
    long found = 0;
    for (long i = 0; found < 200; i++) {
        int kl = keyname(kb, sizeof(kb), "c", i);
        if ((dictHashKey(&db->d, kb, (size_t)kl) & 15) != 3) continue;
        setStr(db, kb, (size_t)kl, "v", 1);
        found++;
    }
    found = 0;
    for (long i = 0; found < 200; i++) {
        int kl = keyname(kb, sizeof(kb), "c", i);
        if ((dictHashKey(&db->d, kb, (size_t)kl) & 15) != 3) continue;
        CHECK_ALL("colliding key", get(db, kb, (size_t)kl) != NULL);
        found++;
    }
    CHECK(bad_ == 0);
    CHECK(dbSize(db) == 200);
    dbFree(db);
}

static void testExpire(void) {
    ir_db *db = dbNew();
    char kb[32];
    const long N = 20000;
    int64_t now = dbNow(db);
    int bad_ = 0;

    for (long i = 0; i < N; i++) {
        int kl = keyname(kb, sizeof(kb), "e", i);
        dbEntry *e = setStr(db, kb, (size_t)kl, "v", 1);
        if (i % 2 == 0) setExpire(db, e, now - 1000);         /* already past */
        else if (i % 4 == 1) setExpire(db, e, now + 3600000); /* an hour away */
    }
    CHECK(dbExpires(db) == (uint64_t)(N / 2 + N / 4));
    CHECK(dbSize(db) == (uint64_t)N);

    /* Lazy expiry on access. */
    CHECK(get(db, "e:0", 3) == NULL);
    CHECK(dbSize(db) == (uint64_t)N - 1);
    CHECK(get(db, "e:1", 3) != NULL && get(db, "e:3", 3) != NULL);

    /* Active expiry reaps the past ones (the last stragglers take many ticks,
     * as in Redis: a round stops once under 25% of its sample was stale). */
    for (int t = 0; t < 100000 && dbSize(db) > (uint64_t)(N / 2); t++)
        dbActiveExpire(db, (uint64_t)now);
    CHECK(dbSize(db) == (uint64_t)(N / 2));
    CHECK(dbExpires(db) == (uint64_t)(N / 4));
    for (long i = 0; i < N; i++) {
        int kl = keyname(kb, sizeof(kb), "e", i);
        dbEntry *e = get(db, kb, (size_t)kl);
        CHECK_ALL("expire survivors", (i % 2 == 0) ? e == NULL : e != NULL);
    }
    CHECK(bad_ == 0);

    /* removeExpire / setExpire bookkeeping. */
    dbEntry *e = get(db, "e:1", 3);
    CHECK(e && e->expire != -1);
    CHECK(removeExpire(db, e) == 1 && removeExpire(db, e) == 0);
    CHECK(dbExpires(db) == (uint64_t)(N / 4) - 1);
    setExpire(db, e, now + 5);
    setExpire(db, e, now + 50);
    CHECK(dbExpires(db) == (uint64_t)(N / 4) && e->expire == now + 50);

    /* A tick far in the future expires the rest of the volatile keys. */
    for (int t = 0; t < 100000 && dbExpires(db); t++) dbActiveExpire(db, (uint64_t)now + 7200000);
    CHECK(dbExpires(db) == 0);
    CHECK(dbSize(db) == (uint64_t)(N / 4));
    dbFree(db);
}

static void testLists(void) {
    ir_db *db = dbNew();
    dbkey k = dbKey(db, "list", 4);
    dbEntry *e = dbAdd(db, &k, OBJ_LIST, 0);
    dbList *l = &e->v.list;
    /* Reference model: a plain array with room on both sides. */
    enum { M = 200000 };
    long *model = malloc(sizeof(long) * M);
    long lo = M / 2, hi = M / 2; /* [lo, hi) */
    uint64_t r = 88172645463325252ULL;
    long next = 0;
    int bad_ = 0;

    for (int step = 0; step < 60000; step++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        int op = (int)(r % 5);
        if (op <= 2 || hi == lo) { /* push (biased so it grows, then drains) */
            int head = (r >> 8) & 1;
            char buf[32];
            int n = snprintf(buf, sizeof(buf), "%ld", next);
            char *p = dbMalloc((size_t)n + 1);
            memcpy(p, buf, (size_t)n + 1);
            listPush(db, l, p, (size_t)n, head);
            if (head) model[--lo] = next;
            else model[hi++] = next;
            next++;
        } else {
            int head = (r >> 8) & 1;
            lelem x = listPop(db, l, head);
            long want = head ? model[lo++] : model[--hi];
            CHECK_ALL("pop order", strtol(x.p, NULL, 10) == want);
            free(x.p);
        }
        CHECK_ALL("length", l->len == (size_t)(hi - lo));
        if (step % 5000 == 0) {
            for (long i = 0; i < hi - lo; i++)
                CHECK_ALL("index", strtol(listAt(l, (size_t)i)->p, NULL, 10) == model[lo + i]);
        }
    }
    CHECK(bad_ == 0);
    CHECK((l->cap & (l->cap - 1)) == 0 && l->cap >= l->len);
    /* Drain: the array shrinks back. */
    while (l->len) free(listPop(db, l, 1).p);
    CHECK(l->cap <= 128);
    for (int i = 0; i < 10; i++) listPush(db, l, dbMalloc(1), 0, i & 1);
    dbDeleteEntry(db, e);
    CHECK(dbSize(db) == 0 && dbBytes(db) == 0);

    /* A list replaced by a string. */
    e = dbAdd(db, &k, OBJ_LIST, 0);
    listPush(db, &e->v.list, dbMalloc(1), 0, 1);
    dbMakeString(db, e);
    strSetValue(db, e, "str", 3, 0);
    CHECK(e->type == OBJ_STRING && e->v.str.len == 3);
    dbEmpty(db);
    CHECK(dbBytes(db) == 0);
    free(model);
    dbFree(db);
}

/* A pinned value (a reply still points into it) is never rewritten or freed:
 * overwrite, delete and flush detach the buffer, and the last release frees
 * it; the bytes count until then. */
static void testPinnedValues(void) {
    ir_db *db = dbNew();
    ir_pins pool = {0};
    size_t big = IR_REF_MIN * 2;
    char *val = dbMalloc(big);
    memset(val, 'z', big);

    /* overwrite with a value that would fit in place */
    dbEntry *e = setStr(db, "k", 1, val, big);
    uint64_t bytes0 = db->bytes;
    char *old = e->v.str.ptr;
    ir_pin *pin = pinAcquire(&pool, &e->v.str.pin);
    CHECK(pin && e->v.str.pin == pin && pinAcquire(&pool, &e->v.str.pin) == pin);
    pin->refs += 2; /* two reply segments */
    memset(val, 'y', big);
    strSetValue(db, e, val, big, 0);
    CHECK(e->v.str.ptr != old && e->v.str.pin == NULL && old[0] == 'z' && old[big - 1] == 'z');
    CHECK(e->v.str.ptr[0] == 'y');
    CHECK(pool.ndetached == 1 && pool.detached_bytes == dbBufBytes(big + 1));
    CHECK(db->bytes == bytes0); /* the new buffer; the old one counts in the pool */
    pinRelease(pin);
    CHECK(pool.ndetached == 1 && old[5] == 'z');
    pinRelease(pin); /* frees old (ASan would see a leak or a double free) */
    CHECK(pool.ndetached == 0 && pool.detached_bytes == 0 && pool.nused == 0);

    /* a release while attached just unpins */
    pin = pinAcquire(&pool, &e->v.str.pin);
    pin->refs++;
    pinRelease(pin);
    CHECK(e->v.str.pin == NULL && pool.nused == 0 && pool.nalloc == 1);

    /* a small overwrite (embedded or not) and an INCR-sized one */
    pin = pinAcquire(&pool, &e->v.str.pin);
    pin->refs++;
    old = e->v.str.ptr;
    strSetValue(db, e, "1", 1, 0);
    CHECK(e->v.str.ptr != old && old[0] == 'y' && pool.ndetached == 1);
    pinRelease(pin);
    CHECK(pool.ndetached == 0);

    /* delete and flush while pinned */
    dbEntry *d = setStr(db, "d", 1, val, big);
    pin = pinAcquire(&pool, &d->v.str.pin);
    pin->refs++;
    old = d->v.str.ptr;
    dbkey dk = dbKey(db, "d", 1);
    CHECK(dbDelete(db, &dk) == 1 && pool.ndetached == 1 && old[0] == 'y');
    dbEntry *f = setStr(db, "f", 1, val, big);
    ir_pin *pin2 = pinAcquire(&pool, &f->v.str.pin);
    pin2->refs++;
    char *old2 = f->v.str.ptr;
    dbEmpty(db);
    CHECK(db->bytes == 0 && pool.ndetached == 2 && old2[big - 1] == 'y');
    CHECK(pool.detached_bytes == 2 * dbBufBytes(big + 1));
    pinRelease(pin2);
    pinRelease(pin);
    CHECK(pool.ndetached == 0 && pool.detached_bytes == 0 && pool.nused == 0);

    /* snapshot loading adopts a buffer over a pinned one */
    e = setStr(db, "k", 1, val, big);
    pin = pinAcquire(&pool, &e->v.str.pin);
    pin->refs++;
    old = e->v.str.ptr;
    char *adopt = dbMalloc(8);
    memcpy(adopt, "adopted", 8);
    dbStrAdopt(db, e, adopt, 7);
    CHECK(e->v.str.ptr == adopt && old[0] == 'y' && pool.ndetached == 1);
    pinRelease(pin);
    CHECK(pool.ndetached == 0);

    pinsFree(&pool);
    CHECK(pool.nalloc == 0);
    free(val);
    dbFree(db);
}

struct globcase {
    const char *pat, *str;
    int match;
};

static void testGlob(void) {
    /* Expected answers checked against redis-server 7.0.15's KEYS. */
    static const struct globcase cases[] = {
        {"*", "anything", 1},
        {"*", "", 0},
        {"", "", 1},
        {"", "a", 0},
        {"a", "", 0},
        {"hello", "hello", 1},
        {"hello", "hell", 0},
        {"hell", "hello", 0},
        {"h?llo", "hello", 1},
        {"h?llo", "hllo", 0},
        {"h*llo", "hllo", 1},
        {"h*llo", "heeeello", 1},
        {"h[ae]llo", "hello", 1},
        {"h[ae]llo", "hallo", 1},
        {"h[ae]llo", "hillo", 0},
        {"h[^e]llo", "hallo", 1},
        {"h[^e]llo", "hello", 0},
        {"h[a-b]llo", "hbllo", 1},
        {"h[a-b]llo", "hcllo", 0},
        {"h[b-a]llo", "hallo", 1},
        {"*o", "hello", 1},
        {"*x", "hello", 0},
        {"a*b*c", "aXXbYYc", 1},
        {"a*b*c", "aXXbYY", 0},
        {"a**", "a", 1},
        {"a*", "a", 1},
        {"**", "", 0},
        {"?", "", 0},
        {"?", "ab", 0},
        {"\\*", "*", 1},
        {"\\*", "a", 0},
        {"a\\", "a\\", 1},
        {"a\\", "a", 0},
        {"[\\]]", "]", 1},
        {"[a-]", "-", 0},
        {"[a-]", "a", 1},
        {"[abc", "a", 1},
        {"[abc", "c", 1},
        {"[abc", "d", 0},
        {"[", "a", 0},
        {"[^", "a", 1},
        {"[]", "a", 0},
        {"[]]", "]", 0},
        {"[!a]", "b", 0},
        {"[!a]", "!", 1},
        {"user:*:name", "user:42:name", 1},
        {"user:*:name", "user:42:mail", 0},
        {"*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0},
        {"[a-c]*", "cat", 1},
        {"[\\a-c]", "b", 0},
        {"a?c", "a\nc", 1},
    };
    int bad_ = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct globcase *g = &cases[i];
        int got = stringmatchlen(g->pat, strlen(g->pat), g->str, strlen(g->str), 0);
        if (got != g->match)
            fprintf(stderr, "glob %zu: '%s' vs '%s': got %d want %d\n", i, g->pat, g->str, got,
                    g->match);
        CHECK_ALL("glob", got == g->match);
    }
    CHECK(bad_ == 0);
    /* Binary safety: NULs inside pattern and subject. */
    CHECK(stringmatchlen("a\0*", 3, "a\0xyz", 5, 0) == 1);
    CHECK(stringmatchlen("a\0*", 3, "a\1xyz", 5, 0) == 0);
    CHECK(stringmatchlen("?\0?", 3, "x\0y", 3, 0) == 1);
    /* nocase (for SCAN-style users) */
    CHECK(stringmatchlen("HeLLo*", 6, "hello world", 11, 1) == 1);
    CHECK(stringmatchlen("h[A-C]t", 7, "hbt", 3, 1) == 1);
    /* An abusive pattern returns quickly (no exponential backtracking). */
    char pat[4001], str[4000];
    for (int i = 0; i < 4000; i += 2) pat[i] = 'a', pat[i + 1] = '*';
    pat[3999] = 'b';
    pat[4000] = 0;
    memset(str, 'a', sizeof(str));
    CHECK(stringmatchlen(pat, 4000, str, sizeof(str), 0) == 0);
}

int main(void) {
    testSiphash();
    testDict();
    testCollisions();
    testExpire();
    testLists();
    testPinnedValues();
    testGlob();
    return checkSummary();
}
