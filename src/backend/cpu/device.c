/* The CPU backend's memory and optimizer entries (backend.h): the regions are the host's, so
 * copies are memcpy; the optimizer walks every parameter with OpenMP, each kind's update as
 * its formula reads (recipe/optimizers.h lists the kinds). The fenced backend (fenced.c)
 * wraps these. */
#include "backend/cpu/cpu.h"

#include <math.h>
#include <string.h>

#include "recipe/recipe.h"

int tr_cpu_copy(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
                struct tr_diag *d)
{
    (void)be, (void)direction, (void)d;
    if (bytes)
        memmove(dst, src, bytes);
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
    float step = (float)(a->lr / c1), root_c2 = (float)sqrt(c2), eps = (float)a->eps;
    int64_t n = sp->numel;
#pragma omp parallel for schedule(static) if (n >= TR_CPU_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        p[i] *= decay;
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        s[i] = b2 * s[i] + (1 - b2) * g[i] * g[i];
        p[i] -= step * m[i] / (sqrtf(s[i]) / root_c2 + eps);
    }
}

/* SGD (PyTorch's torch.optim.SGD, dampening 0):
 *   g ← g + wd·p;  b ← μ·b + g (b = g at the first step);  d = nesterov ? g + μ·b : b;  p ← p − lr·d */
static void sgd(const struct tr_optim_args *a, const struct tr_param_span *sp)
{
    float *p = param_of(a, sp), *g = grad_of(a, sp), *buf = state_of(a, 0, sp);
    float wd = sp->decay ? (float)a->weight_decay : 0, mu = (float)a->momentum, rate = (float)a->lr;
    int first = a->step == 1, nesterov = a->nesterov;
    int64_t n = sp->numel;
#pragma omp parallel for schedule(static) if (n >= TR_CPU_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
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
    float rate = (float)a->lr;
    int64_t n = sp->numel;
#pragma omp parallel for schedule(static) if (n >= TR_CPU_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        float c = b1 * m[i] + (1 - b1) * g[i];
        p[i] *= decay;
        p[i] -= rate * (c > 0 ? 1.0f : c < 0 ? -1.0f : c);
        m[i] = b2 * m[i] + (1 - b2) * g[i];
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

int tr_cpu_grad_sumsq(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq)
{
    (void)be;
    double sum = 0;
    for (int k = 0; k < a->nspans; k++) {
        const float *g = grad_of(a, &a->spans[k]);
        double part = 0;   /* each parameter summed in order: the same bits on any thread count */
        for (int64_t i = 0; i < a->spans[k].numel; i++)
            part += (double)g[i] * g[i];
        sum += part;
    }
    *sumsq = sum;
    return 0;
}

int tr_cpu_grad_scale(const struct tr_backend *be, const struct tr_optim_args *a, float factor, bool *finite)
{
    (void)be;
    bool all = true;
    for (int k = 0; k < a->nspans; k++) {
        float *g = grad_of(a, &a->spans[k]), bad = 0;
        for (int64_t i = 0, n = a->spans[k].numel; i < n; i++) {
            g[i] *= factor;
            bad += g[i] - g[i];   /* 0 for every finite value, NaN once one is not */
        }
        all &= bad == 0;
    }
    *finite = all;
    return 0;
}
