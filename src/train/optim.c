/* AdamW, SGD, the schedule and gradient clipping (optim.h). */
#include "train/optim.h"

#include "plan/plan.h"

#include <math.h>
#include <string.h>

static int64_t numel(const struct tr_graph *g, int v)
{
    return tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
}

static float *param_of(const struct tr_optim *o, int v)
{
    return (float *)(o->params + o->plan->offset[v]);
}

static float *grad_of(const struct tr_optim *o, int v)
{
    return (float *)(o->grads + o->plan->offset[o->g->values[v].grad]);
}

void tr_optim_init(struct tr_optim *o, const struct tr_recipe *r, const struct tr_graph *g,
                   const struct tr_memplan *plan, char *params, char *grads, float *state)
{
    *o = (struct tr_optim){.g = g, .plan = plan, .params = params, .grads = grads, .state = state,
                           .kind = r->train.optimizer.name,
                           .weight_decay = r->train.optimizer.weight_decay,
                           .beta1 = r->train.optimizer.betas.v[0], .beta2 = r->train.optimizer.betas.v[1],
                           .eps = r->train.optimizer.eps, .momentum = r->train.optimizer.momentum,
                           .nesterov = r->train.optimizer.nesterov};
    o->state_bytes = tr_plan_optimizer_bytes(r, g);
}

/* AdamW (Loshchilov & Hutter; PyTorch's torch.optim.AdamW):
 *   p ← p·(1 − lr·wd);  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g²;
 *   p ← p − lr·(m/(1 − β1ᵗ)) / (√(v/(1 − β2ᵗ)) + ε) */
static void adamw(struct tr_optim *o, int v, float *m, float *s, double lr)
{
    float *p = param_of(o, v), *g = grad_of(o, v);
    int64_t n = numel(o->g, v);
    double wd = o->g->values[v].no_decay ? 0 : o->weight_decay;
    double c1 = 1 - pow(o->beta1, (double)o->step), c2 = 1 - pow(o->beta2, (double)o->step);
    float decay = (float)(1 - lr * wd), b1 = (float)o->beta1, b2 = (float)o->beta2;
    float step = (float)(lr / c1), root_c2 = (float)sqrt(c2), eps = (float)o->eps;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        p[i] *= decay;
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        s[i] = b2 * s[i] + (1 - b2) * g[i] * g[i];
        p[i] -= step * m[i] / (sqrtf(s[i]) / root_c2 + eps);
    }
}

/* SGD (PyTorch's torch.optim.SGD, dampening 0):
 *   g ← g + wd·p;  b ← μ·b + g (b = g at the first step);  d = nesterov ? g + μ·b : b;  p ← p − lr·d */
static void sgd(struct tr_optim *o, int v, float *buf, double lr)
{
    float *p = param_of(o, v), *g = grad_of(o, v);
    int64_t n = numel(o->g, v);
    float wd = o->g->values[v].no_decay ? 0 : (float)o->weight_decay, mu = (float)o->momentum;
    float rate = (float)lr;
    int first = o->step == 1;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        if (buf) {
            buf[i] = first ? d : mu * buf[i] + d;
            d = o->nesterov ? d + mu * buf[i] : buf[i];
        }
        p[i] -= rate * d;
    }
}

void tr_optim_step(struct tr_optim *o, double lr)
{
    o->step++;
    int64_t offset = 0, total = 0;
    for (int v = 0; v < o->g->nvalues; v++)
        if (o->g->values[v].kind == TR_PARAM)
            total += numel(o->g, v);
    for (int v = 0; v < o->g->nvalues; v++) {
        if (o->g->values[v].kind != TR_PARAM)
            continue;
        int64_t n = numel(o->g, v);
        if (o->kind == TR_OPT_ADAMW)
            adamw(o, v, o->state + offset, o->state + total + offset, lr);
        else
            sgd(o, v, o->state_bytes ? o->state + offset : NULL, lr);
        offset += n;
    }
}

double tr_schedule_lr(const struct tr_recipe *r, int64_t t, int64_t total)
{
    double peak = r->train.optimizer.lr;
    const struct tr_warmup *w = &r->train.schedule.warmup;
    int64_t warm = w->is_steps ? w->steps : (int64_t)floor(w->fraction * (double)total);
    if (t <= warm)
        return peak * (double)t / (double)warm;
    double progress = total > warm ? (double)(t - warm) / (double)(total - warm) : 1;
    switch (r->train.schedule.name) {
    case TR_SCHED_LINEAR: return peak * (1 - progress);
    case TR_SCHED_COSINE: return peak * 0.5 * (1 + cos(M_PI * progress));
    default:              return peak;
    }
}

double tr_grad_clip(struct tr_optim *o, double clip)
{
    double sum = 0;
    for (int v = 0; v < o->g->nvalues; v++) {
        if (o->g->values[v].kind != TR_PARAM)
            continue;
        const float *g = grad_of(o, v);
        int64_t n = numel(o->g, v);
        double part = 0;   /* each parameter summed in order: the same bits on any thread count */
        for (int64_t i = 0; i < n; i++)
            part += (double)g[i] * g[i];
        sum += part;
    }
    double norm = sqrt(sum);
    if (clip > 0 && norm > clip && isfinite(norm)) {
        float scale = (float)(clip / (norm + 1e-6));   /* PyTorch's clip_grad_norm_ */
        for (int v = 0; v < o->g->nvalues; v++)
            if (o->g->values[v].kind == TR_PARAM) {
                float *g = grad_of(o, v);
                for (int64_t i = 0, n = numel(o->g, v); i < n; i++)
                    g[i] *= scale;
            }
    }
    return norm;
}

bool tr_grad_unscale(struct tr_optim *o, float inv)
{
    bool finite = true;
    for (int v = 0; v < o->g->nvalues; v++) {
        if (o->g->values[v].kind != TR_PARAM)
            continue;
        float *g = grad_of(o, v), bad = 0;
        for (int64_t i = 0, n = numel(o->g, v); i < n; i++) {
            g[i] *= inv;
            bad += g[i] - g[i];   /* 0 for every finite value, NaN once one is not */
        }
        finite &= bad == 0;
    }
    return finite;
}

int tr_grad_first_nonfinite(const struct tr_optim *o)
{
    for (int v = 0; v < o->g->nvalues; v++) {
        if (o->g->values[v].kind != TR_PARAM)
            continue;
        const float *g = grad_of(o, v);
        for (int64_t i = 0, n = numel(o->g, v); i < n; i++)
            if (!isfinite(g[i]))
                return v;
    }
    return -1;
}
