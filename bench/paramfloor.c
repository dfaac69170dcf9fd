/* paramfloor.c - the memory floor of a parameter table's optimizer step, and
 * the engine's step itself, on this machine in this run (bench/params.py).
 *
 * An Adam step over n float32 reads the gradient, the parameters and both
 * moments and writes the last three; RMSprop (not centered, no momentum)
 * reads the gradient, the parameters and the square average and writes the
 * last two. The floor is one loop over exactly those arrays doing the least
 * arithmetic that keeps every load and store (w += g, m += g, v += g): no
 * implementation of the step streams less. The step is param.c's paramStep
 * (with the finite check PARAM.PUSH makes first) on arrays of the same size.
 * Each figure is the median of --reps passes (after one warm-up pass).
 *
 *     paramfloor [--n N] [--reps R]
 *
 * prints one JSON object: {"n", "reps", "adam_floor_ms", "rmsprop_floor_ms",
 * "adam_step_ms", "rmsprop_step_ms", "adam_bytes", "rmsprop_bytes"}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "param.h"
#include "pin.h"

/* pin.h: nothing here lends the vectors to replies, so nothing is ever pinned */
void pinDetach(struct ir_pin *pin, void *mem, size_t maplen, uint64_t bytes) { free(mem); }
void pinOverwrite(struct ir_pin *pin, const char *lo, const char *hi) {}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static float *array(uint64_t n, float v) {
    float *a = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (!a) {
        fprintf(stderr, "paramfloor: out of memory\n");
        exit(1);
    }
    for (uint64_t i = 0; i < n; i++) a[i] = v;
    return a;
}

static void floor3(float *restrict w, float *restrict m, float *restrict v, const float *restrict g,
                   uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        float gi = g[i];
        w[i] = w[i] + gi;
        m[i] = m[i] + gi;
        v[i] = v[i] + gi;
    }
}

static void floor2(float *restrict w, float *restrict s, const float *restrict g, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        float gi = g[i];
        w[i] = w[i] + gi;
        s[i] = s[i] + gi;
    }
}

int main(int argc, char **argv) {
    uint64_t n = 3400000;
    int reps = 21;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n")) n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (n == 0 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: paramfloor [--n N] [--reps R (1..1000)]\n");
        return 2;
    }
    double *t = calloc((size_t)reps, sizeof(double)), res[4];
    float *g = array(n, 1e-7f), *w = array(n, 0.5f), *m = array(n, 0.f), *v = array(n, 0.f);
    for (int k = -1; k < reps; k++) { /* k = -1: warm-up */
        double t0 = now_ms();
        floor3(w, m, v, g, n);
        if (k >= 0) t[k] = now_ms() - t0;
    }
    res[0] = median(t, reps);
    for (int k = -1; k < reps; k++) {
        double t0 = now_ms();
        floor2(w, m, g, n);
        if (k >= 0) t[k] = now_ms() - t0;
    }
    res[1] = median(t, reps);
    free(w), free(m), free(v);
    ir_params *ps = paramsNew();
    const ir_optimizer opts[2] = {IR_OPT_ADAM, IR_OPT_RMSPROP};
    for (int o = 0; o < 2; o++) {
        ir_param_opts po = paramOptsDefault(opts[o]);
        ir_param *p = paramCreate(ps, o ? "r" : "a", 1, n, &po, NULL);
        if (!p) {
            fprintf(stderr, "paramfloor: out of memory\n");
            return 1;
        }
        for (int k = -1; k < reps; k++) {
            double t0 = now_ms();
            uint64_t bad;
            if (paramGradFinite(g, n, 1.0f, &bad)) paramStep(p, g, 1.0f);
            if (k >= 0) t[k] = now_ms() - t0;
        }
        res[2 + o] = median(t, reps);
    }
    paramsFree(ps);
    free(g);
    free(t);
    printf("{\"n\": %llu, \"reps\": %d, \"adam_floor_ms\": %.4f, \"rmsprop_floor_ms\": %.4f, "
           "\"adam_step_ms\": %.4f, \"rmsprop_step_ms\": %.4f, \"adam_bytes\": %llu, "
           "\"rmsprop_bytes\": %llu}\n",
           (unsigned long long)n, reps, res[0], res[1], res[2], res[3],
           (unsigned long long)(7 * n * sizeof(float)),
           (unsigned long long)(5 * n * sizeof(float)));
    return 0;
}
