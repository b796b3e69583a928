/* The optimizer step, the schedule and gradient clipping (optim.h). */
#include "train/optim.h"

#include "plan/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "recipe/optimizers.h"

static int64_t numel(const struct tr_graph *g, int v)
{
    return tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
}

void tr_optim_init(struct tr_optim *o, const struct tr_recipe *r, const struct tr_graph *g,
                   const struct tr_memplan *plan, const struct tr_backend *be, char *params, char *grads,
                   float *state)
{
    *o = (struct tr_optim){.g = g, .plan = plan, .be = be, .params = params, .grads = grads, .state = state,
                           .kind = r->train.optimizer.name,
                           .weight_decay = r->train.optimizer.weight_decay,
                           .beta1 = r->train.optimizer.betas.v[0], .beta2 = r->train.optimizer.betas.v[1],
                           .eps = r->train.optimizer.eps, .momentum = r->train.optimizer.momentum,
                           .nesterov = r->train.optimizer.nesterov, .grad_factor = 1};
    o->nstate = tr_optimizer_nstate(r);
    o->state_bytes = tr_plan_optimizer_bytes(r, g);
    for (int v = 0; v < g->nvalues; v++)
        o->nspans += g->values[v].kind == TR_PARAM;
    o->spans = tr_xcalloc((size_t)(o->nspans ? o->nspans : 1), sizeof *o->spans);
    for (int v = 0, i = 0; v < g->nvalues; v++) {
        if (g->values[v].kind != TR_PARAM)
            continue;
        o->spans[i++] = (struct tr_param_span){.param = plan->offset[v], .grad = plan->offset[g->values[v].grad],
                                               .state = o->total, .numel = numel(g, v),
                                               .decay = !g->values[v].no_decay};
        o->total += numel(g, v);
    }
}

void tr_optim_free(struct tr_optim *o)
{
    free(o->spans);
    if (o->host_state != o->state)
        free(o->host_state);
    o->spans = NULL, o->host_state = NULL;
}

float *tr_optim_host_state(struct tr_optim *o)
{
    if (!o->host_state)
        o->host_state = o->be->ops->host_visible ? o->state : tr_xcalloc(o->state_bytes / sizeof(float) + 1, sizeof(float));
    return o->host_state;
}

static int state_copy(struct tr_optim *o, enum tr_copy direction, struct tr_diag *d)
{
    float *host = tr_optim_host_state(o);
    if (host == o->state || !o->state_bytes)
        return 0;
    return tr_backend_copy(o->be, direction == TR_COPY_TO_HOST ? host : o->state,
                           direction == TR_COPY_TO_HOST ? o->state : host, o->state_bytes, direction, d);
}

int tr_optim_pull(struct tr_optim *o, struct tr_diag *d) { return state_copy(o, TR_COPY_TO_HOST, d); }
int tr_optim_push(struct tr_optim *o, struct tr_diag *d) { return state_copy(o, TR_COPY_TO_DEVICE, d); }

/* The backend's view of the optimizer, for one pass. */
static struct tr_optim_args args_of(struct tr_optim *o, double lr, struct tr_diag *d)
{
    return (struct tr_optim_args){.params = o->params, .grads = o->grads,
                                  .state = o->nstate ? o->state : NULL,
                                  .nstate = o->nstate, .total = o->total,
                                  .spans = o->spans, .nspans = o->nspans, .kind = o->kind, .lr = lr,
                                  .weight_decay = o->weight_decay, .beta1 = o->beta1, .beta2 = o->beta2,
                                  .eps = o->eps, .momentum = o->momentum, .nesterov = o->nesterov,
                                  .step = o->step, .grad_factor = o->grad_factor, .diag = d};
}

int tr_optim_step(struct tr_optim *o, double lr, struct tr_diag *d)
{
    o->step++;
    struct tr_optim_args a = args_of(o, lr, d);
    o->grad_factor = 1;   /* a factor is for the step after the clipping that set it */
    return tr_backend_optim_step(o->be, &a);
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

double tr_grad_clip(struct tr_optim *o, double clip, struct tr_diag *d)
{
    struct tr_optim_args a = args_of(o, 0, d);
    double sum = 0;
    if (tr_backend_grad_sumsq(o->be, &a, &sum))
        return NAN;
    double norm = sqrt(sum);
    o->grad_factor = 1;
    if (clip > 0 && norm > clip && isfinite(norm))   /* PyTorch's clip_grad_norm_, in the update's pass */
        o->grad_factor = (float)(clip / (norm + 1e-6));
    return norm;
}

bool tr_grad_unscale(struct tr_optim *o, float inv, struct tr_diag *d)
{
    struct tr_optim_args a = args_of(o, 0, d);
    bool finite = false;
    return !tr_backend_grad_scale(o->be, &a, inv, &finite) && finite;
}

int tr_grad_first_nonfinite(const struct tr_optim *o)
{
    int found = -1;
    float *g = NULL;
    for (int v = 0, i = 0; v < o->g->nvalues && found < 0; v++) {
        if (o->g->values[v].kind != TR_PARAM)
            continue;
        const struct tr_param_span *s = &o->spans[i++];
        struct tr_diag ignored = {0};   /* a device that cannot copy: no culprit named */
        g = tr_xrealloc(g, (size_t)(s->numel ? s->numel : 1) * sizeof *g);
        int rc = tr_backend_copy(o->be, g, o->grads + s->grad, (size_t)s->numel * sizeof *g, TR_COPY_TO_HOST, &ignored);
        tr_diag_free(&ignored);
        if (rc)
            break;
        for (int64_t k = 0; k < s->numel && found < 0; k++)
            if (!isfinite(g[k]))
                found = v;
    }
    free(g);
    return found;
}
