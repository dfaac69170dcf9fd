/* test_param.c - unit tests of parameter tables (fstack_redis/replay/param.c):
 * each optimizer against closed forms (constant gradients) and a double
 * precision reference of torch's formulas on random gradients, gradients at
 * odd alignments, the finite check, option checks and the registry. The
 * comparison with torch itself is tests/test_param.py. */
#include "check.h"
#include "../../fstack_redis/replay/param.h"
#include "../../fstack_redis/replay/persist.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 42;
static double unit(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* torch's update in double, the reference the float32 kernels must track */
typedef struct ref {
    double *w, *s1, *s2;
    uint64_t step;
} ref;

static void refStep(ref *r, const ir_param_opts *o, const float *g, uint64_t n) {
    r->step++;
    double t = (double)r->step;
    for (uint64_t i = 0; i < n; i++) {
        double gi = g[i], w = r->w[i];
        if (o->opt == IR_OPT_ADAMW) w *= 1 - o->lr * o->weight_decay;
        else gi += o->weight_decay * w;
        switch (o->opt) {
        case IR_OPT_SGD: w -= o->lr * gi; break;
        case IR_OPT_MOMENTUM:
            r->s1[i] = r->step == 1 ? gi : r->s1[i] * o->momentum + gi;
            w -= o->lr * (o->nesterov ? gi + o->momentum * r->s1[i] : r->s1[i]);
            break;
        case IR_OPT_RMSPROP: {
            r->s1[i] = r->s1[i] * o->alpha + (1 - o->alpha) * gi * gi;
            double a = sqrt(r->s1[i]) + o->eps;
            if (o->momentum > 0) {
                r->s2[i] = r->s2[i] * o->momentum + gi / a;
                w -= o->lr * r->s2[i];
            } else w -= o->lr * gi / a;
            break;
        }
        case IR_OPT_ADAM:
        case IR_OPT_ADAMW:
            r->s1[i] += (1 - o->beta1) * (gi - r->s1[i]);
            r->s2[i] = r->s2[i] * o->beta2 + (1 - o->beta2) * gi * gi;
            w -= o->lr / (1 - pow(o->beta1, t)) * r->s1[i] /
                 (sqrt(r->s2[i]) / sqrt(1 - pow(o->beta2, t)) + o->eps);
            break;
        case IR_OPT_ADAGRAD:
            r->s1[i] += gi * gi;
            w -= o->lr * gi / (sqrt(r->s1[i]) + o->eps);
            break;
        default: break;
        }
        r->w[i] = w;
    }
}

/* 100 random steps of n parameters (n odd: the vector loops' tails run), the
 * gradient at byte offset 1 of its buffer: float32 within 1e-4 of the double
 * reference, relative to the largest parameter (float32 drift over 100 steps
 * is ~100 x 6e-8 of each update's size). */
static void test_against_reference(ir_params *ps, ir_param_opts o, const char *what) {
    const uint64_t n = 1027;
    ir_param *p = paramCreate(ps, what, strlen(what), n, &o, NULL);
    CHECK(p != NULL);
    if (!p) return;
    ref r = {calloc(n, 8), calloc(n, 8), calloc(n, 8), 0};
    float *init = malloc(n * 4), *g = malloc(n * 4);
    unsigned char *buf = malloc(n * 4 + 1);
    for (uint64_t i = 0; i < n; i++) init[i] = (float)(unit() * 2 - 1), r.w[i] = init[i];
    paramSet(p, init);
    for (int s = 0; s < 100; s++) {
        for (uint64_t i = 0; i < n; i++) g[i] = (float)(unit() * 2 - 1) * 0.5f;
        memcpy(buf + 1, g, n * 4);
        paramStep(p, buf + 1, 1.0f);
        refStep(&r, &o, g, n);
    }
    double maxdiff = 0, maxw = 0;
    for (uint64_t i = 0; i < n; i++) {
        maxdiff = fmax(maxdiff, fabs(p->w[i] - r.w[i]));
        maxw = fmax(maxw, fabs(r.w[i]));
    }
    CHECKF(maxdiff <= 1e-4 * maxw, "%s: max |float32 - double| %g, max |w| %g", what, maxdiff,
           maxw);
    CHECK(p->step == 100 && p->version == 101);
    free(r.w), free(r.s1), free(r.s2), free(init), free(g), free(buf);
}

static void test_closed_forms(ir_params *ps) {
    float g[3] = {1.0f, -2.0f, 0.5f};
    /* sgd: one step is w - lr*g exactly (lr a power of two) */
    ir_param_opts o = paramOptsDefault(IR_OPT_SGD);
    o.lr = 0.25;
    ir_param *p = paramCreate(ps, "sgd1", 4, 3, &o, NULL);
    paramStep(p, g, 1.0f);
    CHECK(p->w[0] == -0.25f && p->w[1] == 0.5f && p->w[2] == -0.125f);
    paramStep(p, g, 2.0f); /* SCALE 2 */
    CHECK(p->w[0] == -0.75f && p->w[1] == 1.5f && p->w[2] == -0.375f);
    /* momentum with a constant gradient: b_t = g (1 - mu^t) / (1 - mu) */
    o = paramOptsDefault(IR_OPT_MOMENTUM);
    p = paramCreate(ps, "mom1", 4, 3, &o, NULL);
    double sum = 0;
    for (int t = 1; t <= 20; t++) {
        paramStep(p, g, 1.0f);
        sum += (1 - pow(0.9, t)) / 0.1;
    }
    CHECKF(fabs(p->w[1] - 0.01 * 2 * sum) < 1e-5, "momentum %g vs %g", p->w[1], 0.02 * sum);
    /* adam's first step moves each parameter by lr against its gradient's sign */
    o = paramOptsDefault(IR_OPT_ADAM);
    p = paramCreate(ps, "adam1", 5, 3, &o, NULL);
    paramStep(p, g, 1.0f);
    CHECKF(fabs(p->w[0] + 1e-3) < 1e-8 && fabs(p->w[1] - 1e-3) < 1e-8, "adam %g %g", p->w[0],
           p->w[1]);
    /* adagrad, constant gradient: w_t = -lr sign(g) sum_k 1/sqrt(k) */
    o = paramOptsDefault(IR_OPT_ADAGRAD);
    p = paramCreate(ps, "adagrad1", 8, 3, &o, NULL);
    sum = 0;
    for (int t = 1; t <= 50; t++) paramStep(p, g, 1.0f), sum += 1 / sqrt(t);
    CHECKF(fabs(p->w[2] + 0.01 * sum) < 1e-5, "adagrad %g vs %g", p->w[2], -0.01 * sum);
    /* rmsprop, constant gradient: s_t = (1 - alpha^t) g^2 */
    o = paramOptsDefault(IR_OPT_RMSPROP);
    p = paramCreate(ps, "rms1", 4, 3, &o, NULL);
    for (int t = 1; t <= 10; t++) paramStep(p, g, 1.0f);
    CHECKF(fabs(p->s1[1] - (1 - pow(0.99, 10)) * 4) < 1e-5, "rmsprop s %g", p->s1[1]);
    CHECK(p->s2 == NULL);
}

static void test_checks(void) {
    float g[4] = {1, 2, 3, 4};
    uint64_t bad = 99;
    CHECK(paramGradFinite(g, 4, 1.0f, &bad) == 1);
    g[2] = NAN;
    CHECK(paramGradFinite(g, 4, 1.0f, &bad) == 0 && bad == 2);
    g[2] = INFINITY;
    CHECK(paramGradFinite(g, 4, 1.0f, &bad) == 0 && bad == 2);
    g[2] = 3e38f; /* finite, but not once scaled */
    CHECK(paramGradFinite(g, 4, 1.0f, &bad) == 1);
    CHECK(paramGradFinite(g, 4, 10.0f, &bad) == 0 && bad == 2);
    CHECK(paramOptimizerParse("ADAM", 4) == IR_OPT_ADAM);
    CHECK(paramOptimizerParse("adamw", 5) == IR_OPT_ADAMW);
    CHECK(paramOptimizerParse("lbfgs", 5) == -1);
    ir_param_opts o = paramOptsDefault(IR_OPT_ADAM);
    CHECK(paramOptsCheck(&o) == NULL);
    o.beta1 = 1.0;
    CHECK(paramOptsCheck(&o) != NULL);
    o = paramOptsDefault(IR_OPT_SGD);
    o.lr = -1;
    CHECK(paramOptsCheck(&o) != NULL);
    o.lr = NAN;
    CHECK(paramOptsCheck(&o) != NULL);
    o = paramOptsDefault(IR_OPT_MOMENTUM);
    o.momentum = 0;
    CHECK(paramOptsCheck(&o) != NULL);
    o = paramOptsDefault(IR_OPT_SGD);
    o.nesterov = 1;
    CHECK(paramOptsCheck(&o) != NULL);
}

/* ---- PARM records through an in-memory writer and reader ---------------- */

typedef struct memw {
    ir_pwriter pw;
    unsigned char buf[1 << 16];
    size_t len;
} memw;
static void mwBytes(ir_pwriter *w, const void *p, size_t n) {
    memw *m = (memw *)w;
    memcpy(m->buf + m->len, p, n);
    m->len += n;
}
static void mwRecord(ir_pwriter *w, const char tag[4], uint64_t len) {
    mwBytes(w, tag, 4);
    mwBytes(w, &len, 8);
}
static void mwU32(ir_pwriter *w, uint32_t v) { mwBytes(w, &v, 4); }
static void mwU64(ir_pwriter *w, uint64_t v) { mwBytes(w, &v, 8); }
static void mwF64(ir_pwriter *w, double d) { mwBytes(w, &d, 8); }

typedef struct memr {
    ir_preader pr;
    const unsigned char *p;
    uint64_t off, end;
} memr;
static int mrBytes(ir_preader *r, void *dst, uint64_t n) {
    memr *m = (memr *)r;
    if (n > m->end - m->off) return -1;
    memcpy(dst, m->p + m->off, n);
    m->off += n;
    return 0;
}
static int mrU32(ir_preader *r, uint32_t *v) { return mrBytes(r, v, 4); }
static int mrU64(ir_preader *r, uint64_t *v) { return mrBytes(r, v, 8); }
static int mrF64(ir_preader *r, double *d) { return mrBytes(r, d, 8); }
static uint64_t mrLeft(const ir_preader *r) {
    const memr *m = (const memr *)r;
    return m->end - m->off;
}

/* Load the one record in buf[0..len) (cut to body bytes when smaller) into ps. */
static int loadOne(ir_params *ps, const unsigned char *buf, uint64_t body, char *why) {
    memr m = {{mrBytes, mrU32, mrU64, mrF64, mrLeft}, buf, 12, 12 + body};
    ir_ploader L;
    persistLoadInit(&L, &m.pr, NULL, NULL);
    L.params = ps;
    int rc = persistLoadRecord(&L, (const char *)buf);
    if (rc == IR_PERSIST_OK && m.off != m.end) rc = IR_PERSIST_CORRUPT;
    memcpy(why, L.why, sizeof(L.why));
    persistLoadFree(&L);
    return rc;
}

static void test_persist(void) {
    ir_params *ps = paramsNew();
    ir_param_opts o = paramOptsDefault(IR_OPT_ADAM);
    o.weight_decay = 0.01;
    ir_param *p = paramCreate(ps, "net", 3, 100, &o, NULL);
    float g[100];
    for (int i = 0; i < 100; i++) g[i] = (float)(unit() - 0.5);
    for (int s = 0; s < 7; s++) paramStep(p, g, 1.0f);
    static memw w;
    w.pw = (ir_pwriter){mwRecord, mwBytes, mwU32, mwU64, mwF64, 0};
    w.len = 0;
    persistSaveParam(&w.pw, p);
    uint64_t body;
    memcpy(&body, w.buf + 4, 8);
    CHECK(memcmp(w.buf, IR_PTAG_PARM, 4) == 0 && body == w.len - 12);
    ir_params *back = paramsNew();
    char why[200];
    CHECKF(loadOne(back, w.buf, body, why) == IR_PERSIST_OK, "%s", why);
    ir_param *q = paramFind(back, "net", 3);
    CHECK(q && q->n == 100 && q->step == 7 && q->version == 7 && q->o.opt == IR_OPT_ADAM &&
          q->o.weight_decay == 0.01);
    if (q) {
        CHECK(memcmp(q->w, p->w, 400) == 0 && memcmp(q->s1, p->s1, 400) == 0 &&
              memcmp(q->s2, p->s2, 400) == 0);
        paramStep(p, g, 1.0f);
        paramStep(q, g, 1.0f);
        CHECK(memcmp(q->w, p->w, 400) == 0); /* the same state takes the same step */
    }
    /* refused: the same name twice, a record cut short, an option out of range */
    CHECK(loadOne(back, w.buf, body, why) == IR_PERSIST_CORRUPT && strstr(why, "twice"));
    ir_params *empty = paramsNew();
    CHECK(loadOne(empty, w.buf, body - 4, why) == IR_PERSIST_CORRUPT && empty->count == 0);
    double beta1 = 1.5;
    /* after name, opt, nesterov, sync, lr, mom, alpha */
    memcpy(w.buf + 12 + 8 + 3 + 12 + 3 * 8, &beta1, 8);
    CHECK(loadOne(empty, w.buf, body, why) == IR_PERSIST_CORRUPT && strstr(why, "BETA1"));
    CHECK(empty->count == 0);
    paramsFree(empty);
    paramsFree(back);
    paramsFree(ps);
}

/* SYNC k: the mean of k gradients (summed in order, divided by k), then one step,
 * bit for bit the step of a plain table given that mean; SYNC kept by a record. */
static void test_sync(void) {
    ir_params *ps = paramsNew();
    ir_param_opts o = paramOptsDefault(IR_OPT_ADAM), plain = o;
    o.sync = 3;
    CHECK(paramOptsCheck(&o) == NULL);
    ir_param *p = paramCreate(ps, "s", 1, 37, &o, NULL);
    ir_param *q = paramCreate(ps, "q", 1, 37, &plain, NULL);
    CHECK(p && q && p->acc && !q->acc && paramBytes(p) == 37 * 4 * 4);
    float g[3][37], mean[37];
    for (int r = 0; r < 5; r++) {
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 37; i++) g[k][i] = (float)(unit() - 0.5);
        for (int i = 0; i < 37; i++) mean[i] = ((g[0][i] * 2.0f + g[1][i]) + g[2][i]) / 3.0f;
        paramAccumulate(p, g[0], 2.0f, 1);
        paramAccumulate(p, g[1], 1.0f, 0);
        paramAccumulate(p, g[2], 1.0f, 0);
        uint64_t bad = 99;
        CHECK(paramSyncStep(p, 3, &bad) == 1);
        paramStep(q, mean, 1.0f);
    }
    CHECK(p->step == 5 && p->version == 5 && memcmp(p->w, q->w, sizeof(mean)) == 0);
    float big[37];
    for (int i = 0; i < 37; i++) big[i] = 3e38f;
    paramAccumulate(p, big, 1.0f, 1);
    paramAccumulate(p, big, 1.0f, 0);
    uint64_t bad = 99;
    CHECK(paramSyncStep(p, 2, &bad) == 0 && bad == 0 && p->step == 5); /* overflow: no step */
    static memw w;
    w.pw = (ir_pwriter){mwRecord, mwBytes, mwU32, mwU64, mwF64, 0};
    w.len = 0;
    persistSaveParam(&w.pw, p);
    uint64_t body;
    memcpy(&body, w.buf + 4, 8);
    ir_params *back = paramsNew();
    char why[200];
    CHECKF(loadOne(back, w.buf, body, why) == IR_PERSIST_OK, "%s", why);
    ir_param *b = paramFind(back, "s", 1);
    CHECK(b && b->o.sync == 3 && b->acc);
    o.sync = 0;
    CHECK(paramOptsCheck(&o) != NULL);
    o.sync = IR_PARAM_SYNC_MAX + 1;
    CHECK(paramOptsCheck(&o) != NULL);
    paramsFree(back);
    paramsFree(ps);
}

int main(void) {
    ir_params *ps = paramsNew();
    test_checks();
    test_persist();
    test_sync();
    test_closed_forms(ps);
    ir_param_opts o = paramOptsDefault(IR_OPT_SGD);
    o.weight_decay = 0.01;
    test_against_reference(ps, o, "sgd");
    o = paramOptsDefault(IR_OPT_MOMENTUM);
    test_against_reference(ps, o, "momentum");
    o.nesterov = 1, o.weight_decay = 0.001;
    test_against_reference(ps, o, "nesterov");
    o = paramOptsDefault(IR_OPT_RMSPROP);
    test_against_reference(ps, o, "rmsprop");
    o.momentum = 0.5;
    test_against_reference(ps, o, "rmsprop-momentum");
    o = paramOptsDefault(IR_OPT_ADAM);
    test_against_reference(ps, o, "adam");
    o.weight_decay = 0.01;
    test_against_reference(ps, o, "adam-wd");
    o = paramOptsDefault(IR_OPT_ADAMW);
    test_against_reference(ps, o, "adamw");
    o = paramOptsDefault(IR_OPT_ADAGRAD);
    test_against_reference(ps, o, "adagrad");
    /* the registry */
    CHECK(paramFind(ps, "adam", 4) != NULL && paramFind(ps, "ada", 3) == NULL);
    uint64_t before = ps->count;
    CHECK(paramDrop(ps, "adam", 4) == 0 && paramDrop(ps, "adam", 4) == -1);
    CHECK(ps->count == before - 1 && paramFind(ps, "adam", 4) == NULL);
    CHECK(paramsMemory(ps) >= (before - 1) * 1027 * 4);
    paramsFlush(ps);
    CHECK(ps->count == 0 && ps->head == NULL);
    paramsFree(ps);
    return checkSummary();
}
