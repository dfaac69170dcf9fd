/* param.c - parameter tables and their optimizer steps (param.h).
 *
 * torch.optim's update, float32, in torch's evaluation order. torch's CPU
 * optimizers take the single-tensor path (foreach and fused are for CUDA
 * tensors by default; the math is the same), which evaluates per element:
 *
 *   sgd       g += wd*w;                                   w += -lr*g
 *   momentum  g += wd*w; b = step==1 ? g : b*mu + g;
 *             g = nesterov ? g + mu*b : b;                 w += -lr*g
 *   rmsprop   g += wd*w; s = s*alpha + ((1-alpha)*g)*g; a = sqrt(s) + eps;
 *             momentum: b = b*mu + g/a, w += -lr*b;  else  w += (-lr*g)/a
 *   adam      g += wd*w (adamw: w *= 1 - lr*wd first); m = lerp(m, g, 1-beta1);
 *             v = v*beta2 + ((1-beta2)*g)*g;
 *             d = sqrt(v)/sqrt(1-beta2^t) + eps;           w += (-lr/(1-beta1^t)*m)/d
 *   adagrad   g += wd*w; s = s + g*g; d = sqrt(s) + eps;   w += (-lr*g)/d
 *
 * where the scalar factors ((1-alpha), the bias corrections, the step size)
 * are computed in double as Python computes them and then rounded to
 * float32, as torch rounds a Python scalar for a float32 tensor. torch's
 * AVX2 kernels fuse some multiply-adds (lerp's vectorized form is an FMA)
 * where this code rounds twice, so the two may differ by an ulp per step;
 * tests/test_param.py states the bound it checks.
 *
 * Each step is one loop over the arrays (gradient read, parameters and state
 * read and written once), restrict-qualified so the compiler vectorizes it;
 * the gradient is read through memcpy, so it may sit at any alignment (a
 * client's bulk argument). The build compiles this with -fno-math-errno so
 * sqrtf vectorizes.
 */
#include "param.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pin.h"

static const char *const names[IR_OPT__COUNT] = {
    [IR_OPT_SGD] = "sgd",   [IR_OPT_MOMENTUM] = "momentum", [IR_OPT_RMSPROP] = "rmsprop",
    [IR_OPT_ADAM] = "adam", [IR_OPT_ADAMW] = "adamw",       [IR_OPT_ADAGRAD] = "adagrad",
};

int paramOptimizerParse(const char *s, size_t len) {
    for (int i = 0; i < IR_OPT__COUNT; i++)
        if (strlen(names[i]) == len && strncasecmp(s, names[i], len) == 0) return i;
    return -1;
}

const char *paramOptimizerName(ir_optimizer o) { return o < IR_OPT__COUNT ? names[o] : "?"; }

ir_param_opts paramOptsDefault(ir_optimizer opt) {
    ir_param_opts o = {opt, 0.01, 0, 0.99, 0.9, 0.999, 1e-8, 0, 0, 1};
    if (opt == IR_OPT_MOMENTUM) o.momentum = 0.9;
    if (opt == IR_OPT_ADAM || opt == IR_OPT_ADAMW) o.lr = 1e-3;
    if (opt == IR_OPT_ADAMW) o.weight_decay = 1e-2;
    if (opt == IR_OPT_ADAGRAD) o.eps = 1e-10;
    return o;
}

const char *paramOptsCheck(const ir_param_opts *o) {
    const double v[] = {o->lr, o->momentum, o->alpha, o->beta1, o->beta2, o->eps, o->weight_decay};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (!isfinite(v[i])) return "hyper-parameters must be finite numbers";
    if (o->lr < 0) return "LR must be >= 0";
    if (o->eps < 0) return "EPS must be >= 0";
    if (o->weight_decay < 0) return "WEIGHT_DECAY must be >= 0";
    if (o->momentum < 0 || o->momentum >= 1) return "MOMENTUM must be in [0, 1)";
    if (o->opt == IR_OPT_MOMENTUM && o->momentum == 0) return "MOMENTUM must be > 0 for momentum";
    if (o->alpha < 0 || o->alpha > 1) return "ALPHA must be in [0, 1]";
    if (o->beta1 < 0 || o->beta1 >= 1) return "BETA1 must be in [0, 1)";
    if (o->beta2 < 0 || o->beta2 >= 1) return "BETA2 must be in [0, 1)";
    if (o->nesterov && o->opt != IR_OPT_MOMENTUM) return "NESTEROV needs the momentum optimizer";
    if (o->sync < 1 || o->sync > IR_PARAM_SYNC_MAX) return "SYNC must be an integer in 1..4096";
    return NULL;
}

int paramStateArrays(const ir_param_opts *o) {
    switch (o->opt) {
    case IR_OPT_SGD: return 0;
    case IR_OPT_MOMENTUM: return 1;
    case IR_OPT_RMSPROP: return o->momentum > 0 ? 2 : 1;
    case IR_OPT_ADAM:
    case IR_OPT_ADAMW: return 2;
    case IR_OPT_ADAGRAD: return 1;
    default: return 0;
    }
}

ir_params *paramsNew(void) { return calloc(1, sizeof(ir_params)); }

static void paramFree(ir_params *ps, ir_param *p) {
    if (p->host && ps->host_gone) ps->host_gone(p);
    if (p->pin) pinDetach(p->pin, p->w, 0, p->n * sizeof(float)); /* free()d after the last reply */
    else free(p->w);
    free(p->s1);
    free(p->s2);
    free(p->acc);
    free(p->name);
    free(p);
}

void paramsFlush(ir_params *ps) {
    for (ir_param *p = ps->head, *next; p; p = next) {
        next = p->next;
        paramFree(ps, p);
    }
    ps->head = NULL;
    ps->count = 0;
}

void paramsFree(ir_params *ps) {
    if (!ps) return;
    paramsFlush(ps);
    free(ps);
}

ir_param *paramFind(ir_params *ps, const char *name, size_t len) {
    for (ir_param *p = ps->head; p; p = p->next)
        if (p->namelen == len && memcmp(p->name, name, len) == 0) return p;
    return NULL;
}

uint64_t paramBytes(const ir_param *p) {
    return p->n * sizeof(float) * (1 + (uint64_t)paramStateArrays(&p->o) + (p->o.sync > 1));
}

uint64_t paramsMemory(const ir_params *ps) {
    uint64_t b = 0;
    for (const ir_param *p = ps->head; p; p = p->next)
        b += paramBytes(p) + sizeof(*p) + p->namelen + 1;
    return b;
}

ir_param *paramCreate(ir_params *ps, const char *name, size_t len, uint64_t n,
                      const ir_param_opts *o, const void *init) {
    if (n == 0 || n > SIZE_MAX / sizeof(float)) return NULL;
    ir_param *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    int k = paramStateArrays(o);
    p->name = malloc(len + 1);
    p->w = init ? malloc(n * sizeof(float)) : calloc(n, sizeof(float));
    p->s1 = k >= 1 ? calloc(n, sizeof(float)) : NULL;
    p->s2 = k >= 2 ? calloc(n, sizeof(float)) : NULL;
    p->acc = o->sync > 1 ? malloc(n * sizeof(float)) : NULL;
    if (!p->name || !p->w || (k >= 1 && !p->s1) || (k >= 2 && !p->s2) || (o->sync > 1 && !p->acc)) {
        free(p->name), free(p->w), free(p->s1), free(p->s2), free(p->acc), free(p);
        return NULL;
    }
    memcpy(p->name, name, len);
    p->name[len] = '\0';
    p->namelen = len;
    p->n = n;
    p->o = *o;
    if (init) memcpy(p->w, init, n * sizeof(float));
    p->next = ps->head;
    ps->head = p;
    ps->count++;
    return p;
}

int paramDrop(ir_params *ps, const char *name, size_t len) {
    for (ir_param **pp = &ps->head; *pp; pp = &(*pp)->next) {
        ir_param *p = *pp;
        if (p->namelen == len && memcmp(p->name, name, len) == 0) {
            *pp = p->next;
            ps->count--;
            paramFree(ps, p);
            return 0;
        }
    }
    return -1;
}

/* The kernels are built twice, for AVX2 and for the baseline, and the loader
 * picks one for this CPU (GCC's target_clones, an ifunc): eight lanes where
 * AVX2 is present. Both round each operation as IEEE float32 does (no FMA
 * contraction under -std=c11), so either gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define IR_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define IR_KERNEL
#endif

static inline float ld(const unsigned char *g, uint64_t i) {
    float f;
    memcpy(&f, g + 4 * i, sizeof(f));
    return f;
}

IR_KERNEL int paramGradFinite(const void *gv, uint64_t n, float scale, uint64_t *bad) {
    const unsigned char *g = gv;
    /* an integer OR over the exponent test vectorizes (a float reduction would not) */
    uint32_t any = 0;
    for (uint64_t i = 0; i < n; i++) {
        float v = ld(g, i) * scale;
        uint32_t u;
        memcpy(&u, &v, sizeof(u));
        any |= (u & 0x7f800000u) == 0x7f800000u;
    }
    if (!any) return 1;
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(ld(g, i) * scale)) {
            if (bad) *bad = i;
            break;
        }
    return 0;
}

/* ---- the kernels: one pass each; flags are loop-invariant (unswitched) ---- */

IR_KERNEL static void stepSgd(float *restrict w, const unsigned char *restrict g, uint64_t n,
                              float scale, float neglr, float wd) {
    int decay = wd != 0;
    for (uint64_t i = 0; i < n; i++) {
        float gi = ld(g, i) * scale;
        if (decay) gi = gi + wd * w[i];
        w[i] = w[i] + neglr * gi;
    }
}

IR_KERNEL static void stepMomentum(float *restrict w, float *restrict b,
                                   const unsigned char *restrict g, uint64_t n, float scale,
                                   float neglr, float wd, float mu, int first, int nesterov) {
    int decay = wd != 0;
    for (uint64_t i = 0; i < n; i++) {
        float gi = ld(g, i) * scale;
        if (decay) gi = gi + wd * w[i];
        float bi = first ? gi : b[i] * mu + gi;
        b[i] = bi;
        if (nesterov) gi = gi + mu * bi;
        else gi = bi;
        w[i] = w[i] + neglr * gi;
    }
}

IR_KERNEL static void stepRmsprop(float *restrict w, float *restrict s, float *restrict b,
                                  const unsigned char *restrict g, uint64_t n, float scale,
                                  float neglr, float wd, float alpha, float omalpha, float eps,
                                  float mu) {
    int decay = wd != 0;
    if (b) {
        for (uint64_t i = 0; i < n; i++) {
            float gi = ld(g, i) * scale;
            if (decay) gi = gi + wd * w[i];
            float si = s[i] * alpha + omalpha * gi * gi;
            s[i] = si;
            float a = sqrtf(si) + eps;
            float bi = b[i] * mu + gi / a;
            b[i] = bi;
            w[i] = w[i] + neglr * bi;
        }
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        float gi = ld(g, i) * scale;
        if (decay) gi = gi + wd * w[i];
        float si = s[i] * alpha + omalpha * gi * gi;
        s[i] = si;
        float a = sqrtf(si) + eps;
        w[i] = w[i] + neglr * gi / a;
    }
}

IR_KERNEL static void stepAdam(float *restrict w, float *restrict m, float *restrict v,
                               const unsigned char *restrict g, uint64_t n, float scale, float wd,
                               float shrink, float w1, int small, float beta2, float ombeta2,
                               float bc2s, float eps, float negss) {
    int decay = wd != 0, decoupled = shrink != 1.0f;
    float omw1 = 1.0f - w1; /* lerp's large-weight form */
    for (uint64_t i = 0; i < n; i++) {
        float gi = ld(g, i) * scale;
        float wi = w[i];
        if (decoupled) wi = wi * shrink;
        if (decay) gi = gi + wd * wi;
        float mi = m[i];
        mi = small ? mi + w1 * (gi - mi) : gi - (gi - mi) * omw1;
        m[i] = mi;
        float vi = v[i] * beta2 + ombeta2 * gi * gi;
        v[i] = vi;
        float d = sqrtf(vi) / bc2s + eps;
        w[i] = wi + negss * mi / d;
    }
}

IR_KERNEL static void stepAdagrad(float *restrict w, float *restrict s,
                                  const unsigned char *restrict g, uint64_t n, float scale,
                                  float neglr, float wd, float eps) {
    int decay = wd != 0;
    for (uint64_t i = 0; i < n; i++) {
        float gi = ld(g, i) * scale;
        if (decay) gi = gi + wd * w[i];
        float si = s[i] + gi * gi;
        s[i] = si;
        float d = sqrtf(si) + eps;
        w[i] = w[i] + neglr * gi / d;
    }
}

void paramStep(ir_param *p, const void *gv, float scale) {
    const unsigned char *g = gv;
    const ir_param_opts *o = &p->o;
    if (p->pin) pinOverwrite(p->pin, (const char *)p->w, (const char *)(p->w + p->n));
    p->step++;
    float neglr = (float)-o->lr, wd = (float)o->weight_decay;
    double t = (double)p->step;
    switch (o->opt) {
    case IR_OPT_SGD: stepSgd(p->w, g, p->n, scale, neglr, wd); break;
    case IR_OPT_MOMENTUM:
        stepMomentum(p->w, p->s1, g, p->n, scale, neglr, wd, (float)o->momentum, p->step == 1,
                     o->nesterov);
        break;
    case IR_OPT_RMSPROP:
        stepRmsprop(p->w, p->s1, p->s2, g, p->n, scale, neglr, wd, (float)o->alpha,
                    (float)(1.0 - o->alpha), (float)o->eps, (float)o->momentum);
        break;
    case IR_OPT_ADAM:
    case IR_OPT_ADAMW: {
        int decoupled = o->opt == IR_OPT_ADAMW;
        double w1 = 1.0 - o->beta1;
        double bc1 = 1.0 - pow(o->beta1, t), bc2 = 1.0 - pow(o->beta2, t);
        stepAdam(p->w, p->s1, p->s2, g, p->n, scale, decoupled ? 0.0f : wd,
                 decoupled ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f, (float)w1,
                 fabs(w1) < 0.5, (float)o->beta2, (float)(1.0 - o->beta2), (float)sqrt(bc2),
                 (float)o->eps, (float)-(o->lr / bc1));
        break;
    }
    case IR_OPT_ADAGRAD: stepAdagrad(p->w, p->s1, g, p->n, scale, neglr, wd, (float)o->eps); break;
    default: break;
    }
    p->version++;
}

void paramSet(ir_param *p, const void *w) {
    if (p->pin) pinOverwrite(p->pin, (const char *)p->w, (const char *)(p->w + p->n));
    memcpy(p->w, w, p->n * sizeof(float));
    p->version++;
}

IR_KERNEL void paramAccumulate(ir_param *p, const void *gv, float scale, int first) {
    const unsigned char *restrict g = gv;
    float *restrict a = p->acc;
    uint64_t n = p->n;
    if (first)
        for (uint64_t i = 0; i < n; i++) a[i] = ld(g, i) * scale;
    else
        for (uint64_t i = 0; i < n; i++) a[i] = a[i] + ld(g, i) * scale;
}

IR_KERNEL int paramSyncStep(ir_param *p, uint32_t k, uint64_t *bad) {
    float *restrict a = p->acc;
    float fk = (float)k;
    for (uint64_t i = 0; i < p->n; i++) a[i] = a[i] / fk;
    if (!paramGradFinite(a, p->n, 1.0f, bad)) return 0;
    paramStep(p, a, 1.0f);
    return 1;
}
