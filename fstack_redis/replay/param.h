/* param.h - parameter tables: a float32 parameter vector and its optimizer
 * state, to which gradients are applied one optimizer step at a time (the
 * parameter-server pattern: workers push gradients, the table applies them).
 *
 * Each optimizer computes torch.optim's update for the same hyper-parameters
 * in float32, in the order torch's single-tensor CPU path evaluates it (see
 * param.c). A step streams each array once, in one loop the compiler
 * vectorizes, and allocates nothing.
 *
 * Part of the replay engine (no server header); a table belongs to the thread
 * that runs its host. The parameter vector may be lent to replies by
 * reference (pin.h): a step first calls pinOverwrite, a drop pinDetach.
 */
#ifndef IR_PARAM_H
#define IR_PARAM_H

#include <stddef.h>
#include <stdint.h>

struct ir_pin;

typedef enum {
    IR_OPT_SGD = 0,
    IR_OPT_MOMENTUM, /* torch SGD with momentum > 0 (dampening 0), optionally nesterov */
    IR_OPT_RMSPROP,  /* not centered; MOMENTUM > 0 adds torch's momentum buffer */
    IR_OPT_ADAM,
    IR_OPT_ADAMW, /* Adam with decoupled weight decay (torch.optim.AdamW) */
    IR_OPT_ADAGRAD,
    IR_OPT__COUNT
} ir_optimizer;

typedef struct ir_param_opts {
    ir_optimizer opt;
    double lr, momentum, alpha, beta1, beta2, eps, weight_decay;
    int nesterov;
    uint32_t sync; /* SYNC k: a step applies the mean of k pushes (1: every push steps) */
} ir_param_opts;

/* The most pushes a SYNC round may sum (each waits as a blocked client). */
#define IR_PARAM_SYNC_MAX 4096

typedef struct ir_param {
    char *name;
    size_t namelen;
    uint64_t n;       /* parameters */
    float *w;         /* the parameters (malloc'd: pinDetach frees it) */
    float *s1, *s2;   /* optimizer state: momentum buffer / square_avg / exp_avg / sum */
    float *acc;       /* SYNC > 1: the round's sum, then its mean (n float32) */
    uint64_t step;    /* optimizer steps taken (torch's state['step']) */
    uint64_t version; /* bumped by every step and every SET */
    ir_param_opts o;
    struct ir_pin *pin; /* replies reading w by reference (pin.h) */
    void *host;         /* the host's state (a SYNC round's waiting pushers), or NULL */
    struct ir_param *next;
} ir_param;

typedef struct ir_params {
    ir_param *head;
    uint64_t count;
    /* called before a table with host state is freed (dropped, flushed, replaced
     * by a snapshot's): the host answers its waiters and frees p->host */
    void (*host_gone)(ir_param *p);
} ir_params;

/* "sgd" ... "adagrad" (case-insensitive); -1 if unknown. */
int paramOptimizerParse(const char *s, size_t len);
const char *paramOptimizerName(ir_optimizer o);
/* torch.optim's defaults for opt (lr, momentum 0.9 for momentum, alpha 0.99,
 * betas 0.9/0.999, eps 1e-8, or 1e-10 for adagrad, weight_decay 0, AdamW's 0.01);
 * sync 1. */
ir_param_opts paramOptsDefault(ir_optimizer opt);
/* NULL if o is valid, else the reason (a static string, Redis's words). */
const char *paramOptsCheck(const ir_param_opts *o);
/* The number of float32 state arrays opt keeps (0, 1 or 2). */
int paramStateArrays(const ir_param_opts *o);

ir_params *paramsNew(void);
void paramsFree(ir_params *ps);
void paramsFlush(ir_params *ps); /* drop every table */
ir_param *paramFind(ir_params *ps, const char *name, size_t len);
/* A new table of n zeros (init NULL) or n float32 read from init (any
 * alignment); NULL when out of memory. o must have passed paramOptsCheck. */
ir_param *paramCreate(ir_params *ps, const char *name, size_t len, uint64_t n,
                      const ir_param_opts *o, const void *init);
int paramDrop(ir_params *ps, const char *name, size_t len); /* 0, or -1 if absent */
/* Bytes a table holds (parameters and state). */
uint64_t paramBytes(const ir_param *p);
/* Bytes every table of ps holds (counted in the host's used memory). */
uint64_t paramsMemory(const ir_params *ps);

/* 1 if every g[i] * scale (n float32 at any alignment) is finite, else 0 and
 * *bad the first index that is not. */
int paramGradFinite(const void *g, uint64_t n, float scale, uint64_t *bad);
/* One optimizer step with gradient g * scale (n float32 at any alignment,
 * already checked finite); bumps step and version. */
void paramStep(ir_param *p, const void *g, float scale);
/* Replace the parameters (n float32 at any alignment); the optimizer state
 * stays. Bumps version. */
void paramSet(ir_param *p, const void *w);

/* SYNC rounds (o.sync > 1): acc = g * scale (first) or acc += g * scale, in
 * the order the pushes arrived (float32, as a sum of tensors in that order). */
void paramAccumulate(ir_param *p, const void *g, float scale, int first);
/* Divide acc by k (float32: the mean of the round's k gradients), then, if
 * every element is finite, take one step with it and return 1; else return 0
 * with *bad the first element that is not (the step is not taken; a sum of
 * finite gradients can overflow). */
int paramSyncStep(ir_param *p, uint32_t k, uint64_t *bad);

#endif
