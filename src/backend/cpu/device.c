/* The CPU backend's memory and optimizer entries (backend.h): the regions are the host's, so
 * copies are memcpy; the optimizer walks every parameter with OpenMP, each kind's update as
 * its formula reads (recipe/optimizers.h lists the kinds). The fenced backend (fenced.c)
 * wraps these. */
#include "backend/cpu/cpu.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/vmath.h"
#include "recipe/recipe.h"

/* A copy of a few MiB or more goes in pieces over the threads: one thread's memcpy reaches about
 * half of what calibration measures every thread's reaching, the rate the host link's forecast
 * takes (plan/device.h: tr_device_host_link). */
#define COPY_PIECE ((size_t)1 << 20)

int tr_cpu_copy(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
                struct tr_diag *d)
{
    (void)be, (void)direction, (void)d;
    char *to = dst;
    const char *from = src;
    if (bytes < 4 * COPY_PIECE || (to < from + bytes && from < to + bytes)) {   /* small, or overlapping */
        if (bytes)
            memmove(dst, src, bytes);
        return 0;
    }
    long pieces = (long)((bytes + COPY_PIECE - 1) / COPY_PIECE);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < pieces; i++) {
        size_t at = (size_t)i * COPY_PIECE;
        memcpy(to + at, from + at, bytes - at < COPY_PIECE ? bytes - at : COPY_PIECE);
    }
    return 0;
}

int tr_cpu_fill(const struct tr_backend *be, void *dst, int byte, size_t bytes, struct tr_diag *d)
{
    (void)be, (void)d;
    if (bytes)
        memset(dst, byte, bytes);
    return 0;
}

int tr_cpu_synchronize(const struct tr_backend *be, struct tr_diag *d)
{
    (void)be, (void)d;
    return 0;
}

static float *param_of(const struct tr_optim_args *a, const struct tr_param_span *s)
{
    return (float *)(a->params + s->param);
}

static float *grad_of(const struct tr_optim_args *a, const struct tr_param_span *s)
{
    return (float *)(a->grads + s->grad);
}

/* The parameter's words in state tensor k, NULL when the optimizer keeps fewer. */
static float *state_of(const struct tr_optim_args *a, int k, const struct tr_param_span *s)
{
    return k < a->nstate ? a->state + k * a->total + s->state : NULL;
}

/* AdamW (Loshchilov & Hutter; PyTorch's torch.optim.AdamW):
 *   p ← p·(1 − lr·wd);  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g²;
 *   p ← p − lr·(m/(1 − β1ᵗ)) / (√(v/(1 − β2ᵗ)) + ε) */
static void adamw(const struct tr_optim_args *a, const struct tr_param_span *sp)
{
    float *p = param_of(a, sp), *g = grad_of(a, sp), *m = state_of(a, 0, sp), *s = state_of(a, 1, sp);
    double c1 = 1 - pow(a->beta1, (double)a->step), c2 = 1 - pow(a->beta2, (double)a->step);
    float decay = (float)(1 - a->lr * (sp->decay ? a->weight_decay : 0)), b1 = (float)a->beta1, b2 = (float)a->beta2;
    float step = (float)(a->lr / c1), root_c2 = (float)sqrt(c2), eps = (float)a->eps, f = tr_optim_grad_factor(a);
    int64_t n = sp->numel;
#pragma omp parallel for schedule(static) if (n >= TR_CPU_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * f;
        p[i] *= decay;
        m[i] = b1 * m[i] + (1 - b1) * gi;
        s[i] = b2 * s[i] + (1 - b2) * gi * gi;
        p[i] -= step * m[i] / (sqrtf(s[i]) / root_c2 + eps);
    }
}

/* SGD (PyTorch's torch.optim.SGD, dampening 0):
 *   g ← g + wd·p;  b ← μ·b + g (b = g at the first step);  d = nesterov ? g + μ·b : b;  p ← p − lr·d */
static void sgd(const struct tr_optim_args *a, const struct tr_param_span *sp)
{
    float *p = param_of(a, sp), *g = grad_of(a, sp), *buf = state_of(a, 0, sp);
    float wd = sp->decay ? (float)a->weight_decay : 0, mu = (float)a->momentum, rate = (float)a->lr;
    float f = tr_optim_grad_factor(a);
    int first = a->step == 1, nesterov = a->nesterov;
    int64_t n = sp->numel;
#pragma omp parallel for schedule(static) if (n >= TR_CPU_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] * f + wd * p[i];
        if (buf) {
            buf[i] = first ? d : mu * buf[i] + d;
            d = nesterov ? d + mu * buf[i] : buf[i];
        }
        p[i] -= rate * d;
    }
}

/* Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"; lion-pytorch):
 *   p ← p·(1 − lr·wd);  c = β1·m + (1 − β1)·g;  p ← p − lr·sign(c);  m ← β2·m + (1 − β2)·g
 * with sign(0) = 0 and sign(NaN) = NaN, as torch.sign. */
static void lion(const struct tr_optim_args *a, const struct tr_param_span *sp)
{
    float *p = param_of(a, sp), *g = grad_of(a, sp), *m = state_of(a, 0, sp);
    float decay = (float)(1 - a->lr * (sp->decay ? a->weight_decay : 0)), b1 = (float)a->beta1, b2 = (float)a->beta2;
    float rate = (float)a->lr, f = tr_optim_grad_factor(a);
    int64_t n = sp->numel;
#pragma omp parallel for schedule(static) if (n >= TR_CPU_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * f;
        float c = b1 * m[i] + (1 - b1) * gi;
        p[i] *= decay;
        p[i] -= rate * (c > 0 ? 1.0f : c < 0 ? -1.0f : c);
        m[i] = b2 * m[i] + (1 - b2) * gi;
    }
}

/* Each optimizer's update, by enum tr_optimizer. */
static void (*const update_of[])(const struct tr_optim_args *a, const struct tr_param_span *sp) = {
    [TR_OPT_ADAMW] = adamw,
    [TR_OPT_SGD] = sgd,
    [TR_OPT_LION] = lion,
};
_Static_assert(sizeof update_of / sizeof update_of[0] == TR_OPT_COUNT, "an optimizer without a CPU update");

int tr_cpu_optim_step(const struct tr_backend *be, const struct tr_optim_args *a)
{
    (void)be;
    void (*update)(const struct tr_optim_args *, const struct tr_param_span *) = update_of[a->kind];
    for (int i = 0; i < a->nspans; i++)
        update(a, &a->spans[i]);
    return 0;
}

/* The sum of squares in fixed pieces: SUMSQ_PIECE values each (a parameter's last piece
 * shorter), a piece summed in 8 lanes of double (value j into lane j mod 8) that are then
 * added as a fixed tree, the pieces' sums added one after the other in the parameters' order.
 * The pieces, not the threads, fix the order: the same bits on any thread count and ISA
 * (TR_CPU_SIMD's builds, -ffp-contract=off). Was one serial chain of adds, 4 GB/s. */
#define SUMSQ_PIECE TR_SUMSQ_PIECE   /* backend.h: the pieces are part of the contract */
#define SUMSQ_BATCH 256   /* pieces a parallel region takes */

TR_CPU_SIMD static double sumsq_piece(const float *g, int64_t n)
{
    double lane[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            lane[j] += (double)g[i + j] * g[i + j];
    for (int j = 0; i < n; i++, j++)
        lane[j] += (double)g[i] * g[i];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* Adds the sums of pieces [0, n) to *sum, in order. */
static void sumsq_batch(const float *const *at, const int64_t *len, int n, double *sum)
{
    double part[SUMSQ_BATCH];
    int64_t values = 0;
    for (int j = 0; j < n; j++)
        values += len[j];
#pragma omp parallel for schedule(static) if (values >= TR_CPU_GRAIN)
    for (int j = 0; j < n; j++)
        part[j] = sumsq_piece(at[j], len[j]);
    for (int j = 0; j < n; j++)
        *sum += part[j];
}

int tr_cpu_grad_sumsq(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq)
{
    (void)be;
    const float *at[SUMSQ_BATCH];
    int64_t len[SUMSQ_BATCH];
    int n = 0;
    double sum = 0;
    for (int k = 0; k < a->nspans; k++) {
        const float *g = grad_of(a, &a->spans[k]);
        for (int64_t i = 0, numel = a->spans[k].numel; i < numel; i += SUMSQ_PIECE) {
            at[n] = g + i, len[n] = numel - i < SUMSQ_PIECE ? numel - i : SUMSQ_PIECE;
            if (++n == SUMSQ_BATCH)
                sumsq_batch(at, len, n, &sum), n = 0;
        }
    }
    sumsq_batch(at, len, n, &sum);
    *sumsq = sum;
    return 0;
}

int tr_cpu_grad_scale(const struct tr_backend *be, const struct tr_optim_args *a, float factor, bool *finite)
{
    (void)be;
    int bad = 0;   /* an OR of flags: the same answer in any order */
    for (int k = 0; k < a->nspans; k++) {
        float *g = grad_of(a, &a->spans[k]);
        int64_t n = a->spans[k].numel;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= TR_CPU_GRAIN)
        for (int64_t i = 0; i < n; i++) {
            g[i] *= factor;
            bad |= !(g[i] - g[i] == 0);   /* 0 for every finite value, NaN once one is not */
        }
    }
    *finite = !bad;
    return 0;
}
