/* The optimizer step, the schedule and gradient clipping (optim.h). */
#include "train/optim.h"

#include "plan/plan.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "dist/ahead.h"
#include "plan/shard.h"
#include "recipe/optimizers.h"

static int64_t numel(const struct tr_graph *g, int v)
{
    return tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
}

static void shard_init(struct tr_optim *o, const struct tr_comm *c, size_t bucket, int stage);

void tr_optim_init(struct tr_optim *o, const struct tr_recipe *r, const struct tr_graph *g,
                   const struct tr_memplan *plan, const struct tr_backend *be, char *params, char *grads,
                   float *state, const struct tr_comm *shard, int stage)
{
    *o = (struct tr_optim){.g = g, .plan = plan, .be = be, .params = params, .grads = grads, .state = state,
                           .kind = r->train.optimizer.name,
                           .weight_decay = r->train.optimizer.weight_decay,
                           .beta1 = r->train.optimizer.betas.v[0], .beta2 = r->train.optimizer.betas.v[1],
                           .eps = r->train.optimizer.eps, .momentum = r->train.optimizer.momentum,
                           .nesterov = r->train.optimizer.nesterov, .grad_factor = 1};
    o->nstate = tr_optimizer_nstate(r);
    o->state_bytes = tr_plan_optimizer_bytes_held(r, g, plan);
    for (int v = 0; v < g->nvalues; v++)   /* a pipeline stage's plan holds its own alone */
        o->nspans += g->values[v].kind == TR_PARAM && plan->offset[v] >= 0;
    o->spans = tr_xcalloc((size_t)(o->nspans ? o->nspans : 1), sizeof *o->spans);
    for (int v = 0, i = 0; v < g->nvalues; v++) {
        if (g->values[v].kind != TR_PARAM || plan->offset[v] < 0)
            continue;
        o->spans[i++] = (struct tr_param_span){.param = plan->offset[v], .grad = plan->offset[g->values[v].grad],
                                               .state = o->total, .numel = numel(g, v),
                                               .decay = !g->values[v].no_decay};
        o->total += numel(g, v);
    }
    if (shard)
        shard_init(o, shard, r->distributed.bucket, stage);
}

/* This rank's part: its spans, every rank's counts, the norm's pieces, the gathering buffer. */
static void shard_init(struct tr_optim *o, const struct tr_comm *c, size_t bucket, int stage)
{
    int64_t *numel = tr_xmalloc((size_t)(o->nspans + 1) * sizeof *numel);
    int64_t *first = tr_xmalloc((size_t)(c->world + 1) * sizeof *first);
    for (int i = 0; i < o->nspans; i++) {
        numel[i] = o->spans[i].numel;
        o->npieces += (numel[i] + TR_SUMSQ_PIECE - 1) / TR_SUMSQ_PIECE;
    }
    tr_shard_cut(numel, o->nspans, c->world, first);
    o->comm = c;
    o->lo = first[c->rank], o->own = first[c->rank + 1] - first[c->rank];
    o->counts = tr_xmalloc((size_t)c->world * sizeof *o->counts);
    o->displs = tr_xmalloc((size_t)c->world * sizeof *o->displs);
    for (int k = 0; k < c->world; k++)   /* int counts: MPI's (a model of 2^31 elements is not sharded yet) */
        o->counts[k] = (int)(first[k + 1] - first[k]), o->displs[k] = (int)first[k];
    o->shard_spans = tr_xcalloc((size_t)(o->nspans ? o->nspans : 1), sizeof *o->shard_spans);
    o->nshard = tr_shard_spans(o->spans, o->nspans, o->lo, o->lo + o->own, o->shard_spans);
    o->stage = stage >= 2 ? stage : 1;
    for (int i = 0; o->stage >= 2 && i < o->nshard; i++)   /* the shard's gradients, end to end */
        o->shard_spans[i].grad = o->shard_spans[i].state * (int64_t)sizeof(float);
    for (int i = 0; o->stage == 3 && i < o->nshard; i++)   /* and its parameters */
        o->shard_spans[i].param = o->shard_spans[i].state * (int64_t)sizeof(float);
    o->pieces = tr_xcalloc((size_t)(o->npieces ? o->npieces : 1), sizeof *o->pieces);
    int64_t cap = (int64_t)(bucket / sizeof(float));
    o->gather_elems = cap < o->total ? (cap > 0 ? cap : 1) : (o->total ? o->total : 1);
    o->gather = tr_xmalloc((size_t)o->gather_elems * sizeof *o->gather);
    o->gather_counts = tr_xmalloc((size_t)c->world * 2 * sizeof *o->gather_counts);
    o->state_bytes = o->state_bytes / (size_t)(o->total ? o->total : 1) * (size_t)o->own;
    free(numel), free(first);
}

void tr_optim_pipelined(struct tr_optim *o, const struct tr_comm *pipe, const struct tr_stages *st, int stage)
{
    o->pipe = pipe;
    o->piece_at = tr_xcalloc((size_t)(o->nspans + 1), sizeof *o->piece_at);
    o->counted = tr_xcalloc((size_t)(o->nspans + 1), 1);
    o->npieces = 0;
    for (int v = 0, i = 0; v < o->g->nvalues; v++) {
        if (o->g->values[v].kind != TR_PARAM)
            continue;
        int64_t pieces = (numel(o->g, v) + TR_SUMSQ_PIECE - 1) / TR_SUMSQ_PIECE;
        if (o->plan->offset[v] >= 0) {   /* a shared weight's gradient counts once: on its first stage */
            uint64_t on = 0;
            for (int k = 0; k < st->nshared; k++)
                on = st->shared[k] == v ? st->shared_on[k] : on;
            o->counted[i] = !on || __builtin_ctzll(on) == stage;
            o->piece_at[i++] = o->npieces;
        }
        o->npieces += pieces;
    }
    o->pieces = tr_xcalloc((size_t)(o->npieces ? o->npieces : 1), sizeof *o->pieces);
}

void tr_optim_tensor(struct tr_optim *o, const struct tr_comm *tensor)
{
    o->tensor = tensor;
    o->norm_spans = tr_xcalloc((size_t)(o->nspans + 1), sizeof *o->norm_spans);
    for (int v = 0, i = 0; v < o->g->nvalues; v++) {
        if (o->g->values[v].kind != TR_PARAM || o->plan->offset[v] < 0)
            continue;
        bool counts = o->g->values[v].split_axis >= 0 || tensor->rank == 0;
        if (counts)
            o->norm_spans[o->nnorm++] = o->spans[i];
        if (o->counted)   /* pipelined too: the stage's pieces, a whole weight's on tensor rank 0 alone */
            o->counted[i] = o->counted[i] && counts;
        i++;
    }
}

void tr_optim_offload(struct tr_optim *o, char *host_params, float *host_grads)
{
    o->host_params = host_params, o->host_grads = host_grads, o->stale = true;
    o->host_spans = tr_xcalloc((size_t)(o->nspans ? o->nspans : 1), sizeof *o->host_spans);
    for (int i = 0; i < o->nspans; i++) {
        o->host_spans[i] = o->spans[i];
        o->host_spans[i].grad = o->spans[i].state * (int64_t)sizeof(float);
    }
}

static void down_free(struct tr_optim *o);

void tr_optim_free(struct tr_optim *o)
{
    down_free(o);
    free(o->host_spans);
    o->host_spans = NULL;
    free(o->norm_spans);
    o->norm_spans = NULL;
    free(o->spans), free(o->piece_at), free(o->counted);
    o->piece_at = NULL, o->counted = NULL;
    if (o->host_state != o->state)
        free(o->host_state);
    tr_ahead_stop(o->ahead);
    o->ahead = NULL;
    free(o->ahead_counts);
    o->ahead_counts = NULL;
    free(o->counts), free(o->displs), free(o->shard_spans), free(o->pieces), free(o->gather), free(o->gather_counts);
    o->spans = o->shard_spans = NULL, o->host_state = o->gather = NULL, o->counts = o->displs = NULL;
    o->pieces = NULL, o->gather_counts = NULL;
}

float *tr_optim_host_state(struct tr_optim *o)
{
    if (!o->host_state && o->comm)   /* the whole state, as unsharded */
        o->host_state = tr_xcalloc((size_t)(o->nstate * o->total) + 1, sizeof(float));
    if (!o->host_state)   /* offloaded: the state is the host's already */
        o->host_state = o->be->ops->host_visible || o->host_params ? o->state
                                                                   : tr_xcalloc(o->state_bytes / sizeof(float) + 1, sizeof(float));
    return o->host_state;
}

static int state_copy(struct tr_optim *o, enum tr_copy direction, struct tr_diag *d)
{
    if (o->comm) {   /* sharded (the host's memory): gathered by tr_optim_gather; this rank's part back */
        for (int k = 0; direction == TR_COPY_TO_DEVICE && k < o->nstate; k++)
            memcpy(o->state + k * o->own, tr_optim_host_state(o) + k * o->total + o->lo, (size_t)o->own * sizeof(float));
        return 0;
    }
    float *host = tr_optim_host_state(o);
    if (host == o->state || !o->state_bytes)
        return 0;
    return tr_backend_copy(o->be, direction == TR_COPY_TO_HOST ? host : o->state,
                           direction == TR_COPY_TO_HOST ? o->state : host, o->state_bytes, direction, d);
}

int tr_optim_pull(struct tr_optim *o, struct tr_diag *d) { return state_copy(o, TR_COPY_TO_HOST, d); }
int tr_optim_push(struct tr_optim *o, struct tr_diag *d)
{
    o->stale = true;   /* the parameters were pushed with it (a resume): the host copy is taken again */
    return state_copy(o, TR_COPY_TO_DEVICE, d);
}

/* Each rank's part of the parameters' elements [from, to): world counts, then displacements from
 * `from` (0 for an empty part), in counts. */
static void parts_of(const struct tr_optim *o, int64_t from, int64_t to, int *counts)
{
    int world = o->comm->world, *displs = counts + world;
    for (int k = 0; k < world; k++) {
        int64_t lo = o->displs[k] > from ? o->displs[k] : from;
        int64_t hi = o->displs[k] + o->counts[k] < to ? o->displs[k] + o->counts[k] : to;
        counts[k] = hi > lo ? (int)(hi - lo) : 0, displs[k] = hi > lo ? (int)(lo - from) : 0;
    }
}

/* The parameters' elements [lo, hi) copied between their places in view (the whole, laid out as
 * the plan lays them out: the region, or stage 3's host view) and flat (element lo at 0). */
static void view_copy(const struct tr_optim *o, char *view, float *flat, int64_t lo, int64_t hi, bool to_view)
{
    for (int i = 0; i < o->nspans; i++) {
        int64_t a = o->spans[i].state > lo ? o->spans[i].state : lo;
        int64_t b = o->spans[i].state + o->spans[i].numel < hi ? o->spans[i].state + o->spans[i].numel : hi;
        if (a >= b)
            continue;
        float *at = (float *)(view + o->spans[i].param) + (a - o->spans[i].state);
        if (to_view)
            memcpy(at, flat + (a - lo), (size_t)(b - a) * sizeof *at);
        else
            memcpy(flat + (a - lo), at, (size_t)(b - a) * sizeof *at);
    }
}

int tr_optim_gather(struct tr_optim *o, struct tr_diag *d)
{
    float *all = o->comm && o->comm->rank == 0 ? tr_optim_host_state(o) : NULL;
    int rc = 0;
    for (int k = 0; o->comm && k < o->nstate && !rc; k++)
        rc = tr_comm_gather_floats(o->comm, o->state + k * o->own, all ? all + k * o->total : NULL, o->counts,
                                   o->displs, d);
    if (!rc && o->x) {   /* stage 3: the parameters whole into rank 0's view, through a flat copy */
        float *flat = all ? tr_xmalloc((size_t)(o->total ? o->total : 1) * sizeof *flat) : NULL;
        rc = tr_comm_gather_floats(o->comm, (const float *)o->params, flat, o->counts, o->displs, d);
        if (!rc && flat)
            view_copy(o, tr_exec_view(o->x, TR_PARAM), flat, 0, o->total, true);
        free(flat);
    }
    return rc;
}

int tr_optim_share(struct tr_optim *o, struct tr_diag *d)
{
    if (!o->comm)
        return 0;
    float *all = tr_optim_host_state(o);
    int rc = tr_comm_broadcast(o->comm, all, (size_t)(o->nstate * o->total) * sizeof *all, d);
    if (!rc && o->x)   /* stage 3: rank 0's parameters, each rank keeping its part */
        rc = tr_comm_broadcast(o->comm, tr_exec_view(o->x, TR_PARAM), o->x->plan->region_bytes[TR_PARAM], d);
    if (!rc && o->x)
        rc = tr_exec_push(o->x, TR_PARAM, d);
    return rc ? rc : tr_optim_push(o, d);
}

/* Stage 3: parameter i whole at dst, each rank's part of it from every rank, counts the caller's
 * (world counts, then displacements); on the copies' own communicator from the thread ahead. */
static int gather_param(struct tr_optim *o, int i, float *dst, int *counts, bool ahead, struct tr_diag *d)
{
    const struct tr_param_span *s = &o->spans[i];
    int *displs = counts + o->comm->world, me = o->comm->rank;
    parts_of(o, s->state, s->state + s->numel, counts);
    if (counts[me])
        memcpy(dst + displs[me], (const float *)o->params + (s->state + displs[me] - o->lo),
               (size_t)counts[me] * sizeof *dst);
    return ahead ? tr_comm_allgather_copy(o->comm, dst, counts, displs, d)
                 : tr_comm_allgather(o->comm, dst, counts, displs, d);
}

/* The thread ahead's job: parameter i's copy. */
static int gather_ahead(void *ctx, int i, void *dst, struct tr_diag *d)
{
    struct tr_optim *o = ctx;
    return gather_param(o, i, dst, o->ahead_counts, true, d);
}

/* The executor's fill (exec.h): copy `copy` of the run holds parameter i — queued for the thread
 * ahead where there is one, else gathered here. */
static int fill_param(void *ctx, int copy, int i, void *dst, struct tr_diag *d)
{
    struct tr_optim *o = ctx;
    if (o->ahead) {
        tr_ahead_queue(o->ahead, copy, i, dst);
        return 0;
    }
    double began = tr_now();
    int rc = gather_param(o, i, dst, o->gather_counts, false, d);
    o->gather_seconds += tr_now() - began;
    return rc;
}

static int copy_ready(void *ctx, int copy, struct tr_diag *d)
{
    struct tr_optim *o = ctx;
    return tr_ahead_wait(o->ahead, copy, d);
}

/* Stage 3: this rank's part of the whole parameters in view. */
static int keep_part(void *ctx, const char *view, struct tr_diag *d)
{
    (void)d;
    struct tr_optim *o = ctx;
    view_copy(o, (char *)view, (float *)o->params, o->lo, o->lo + o->own, false);
    return 0;
}

void tr_optim_serve(struct tr_optim *o, struct tr_exec *x)
{
    o->x = o->x ? o->x : x;   /* the training executor's view: the checkpoints' */
    if (x->g->gather_ahead && !o->ahead) {   /* a block ahead (where MPI allows it): on a thread of their own */
        o->ahead_counts = tr_xmalloc((size_t)o->comm->world * 2 * sizeof *o->ahead_counts);
        o->ahead = tr_ahead_start(gather_ahead, o, o->comm, "gathering the parameters' copies");
    }
    x->shard = (struct tr_exec_shard){.fill = fill_param, .ready = o->ahead ? copy_ready : NULL, .push = keep_part,
                                      .ctx = o};
}

double tr_optim_gather_seconds(const struct tr_optim *o)
{
    return o->gather_seconds + (o->ahead ? tr_ahead_seconds(o->ahead) : 0);
}

void tr_optim_release(struct tr_optim *o)
{
    if (o->comm) {
        free(o->host_state);
        o->host_state = NULL;
    }
    if (o->x)   /* stage 3: the whole parameters' view too */
        tr_exec_drop_host(o->x, TR_PARAM);
}

/* The backend's view of the optimizer, for one pass: this rank's part when sharded. */
static struct tr_optim_args args_of(struct tr_optim *o, double lr, struct tr_diag *d)
{
    return (struct tr_optim_args){.params = o->params, .grads = o->grads,
                                  .state = o->nstate ? o->state : NULL,
                                  .nstate = o->nstate, .total = o->comm ? o->own : o->total,
                                  .spans = o->comm ? o->shard_spans : o->spans,
                                  .nspans = o->comm ? o->nshard : o->nspans, .kind = o->kind, .lr = lr,
                                  .weight_decay = o->weight_decay, .beta1 = o->beta1, .beta2 = o->beta2,
                                  .eps = o->eps, .momentum = o->momentum, .nesterov = o->nesterov,
                                  .step = o->step, .grad_factor = o->grad_factor, .diag = d};
}

/* Sharded: every rank's updated part into every rank's parameters, gather_elems of the
 * parameters' elements (end to end) at a time through the host buffer. */
static int gather_params(struct tr_optim *o, struct tr_diag *d)
{
    double began = tr_now();
    int world = o->comm->world, rc = 0;
    int *counts = o->gather_counts, *displs = counts + world;   /* made once: no allocation a step */
    for (int64_t from = 0; from < o->total && !rc; from += o->gather_elems) {
        int64_t to = from + o->gather_elems < o->total ? from + o->gather_elems : o->total;
        int64_t lo = o->lo > from ? o->lo : from, hi = o->lo + o->own < to ? o->lo + o->own : to;
        parts_of(o, from, to, counts);
        if (lo < hi)   /* this rank's part in, */
            view_copy(o, o->params, o->gather + (lo - from), lo, hi, false);
        rc = tr_comm_allgather(o->comm, o->gather, counts, displs, d);
        if (!rc)   /* then every part out */
            view_copy(o, o->params, o->gather, from, to, true);
    }
    o->gather_seconds += tr_now() - began;
    return rc;
}

/* A slot's bytes in a region: the memory plan's 64-byte alignment (memplan.c). */
static int64_t align64(int64_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

/* ---- offloaded: the gradients down as the backward writes them ---------------------------------- */

/* A bucket of gradients end to end, at grad in the gradients' memory and host in host_grads,
 * final after the schedule's node `ready` (−1: before any). */
struct down_bucket {
    int64_t grad, host;
    size_t bytes;
    int ready;
};

struct tr_grads_down {
    struct down_bucket *buckets;   /* in the order they are sent: by ready, then by place */
    int n, sent;
    bool armed;                    /* the step's last micro-batch runs */
    bool queued;                   /* every bucket on the queue, joined; the host has not waited yet */
    bool here;                     /* this step's gradients are in host_grads */
    struct tr_exec_hook inner;     /* the hook it chains (the profiler's) */
};

static void down_free(struct tr_optim *o)
{
    if (o->down)
        free(o->down->buckets);
    free(o->down);
    o->down = NULL;
}

static int by_ready(const void *a, const void *b)
{
    const struct down_bucket *x = a, *y = b;
    return x->ready != y->ready ? (x->ready > y->ready) - (x->ready < y->ready) : (x->grad > y->grad) - (x->grad < y->grad);
}

bool tr_optim_overlap(struct tr_optim *o, const struct tr_graph *g, const int *schedule, int n, size_t bucket_bytes)
{
    if (!o->host_params || !tr_backend_copies_ahead(o->be) || o->down || !o->nspans)
        return false;
    int *last = tr_last_touch(g, schedule, n, TR_GRAD);
    struct tr_grads_down *w = tr_xcalloc(1, sizeof *w);
    w->buckets = tr_xcalloc((size_t)o->nspans, sizeof *w->buckets);
    for (int i = 0; i < o->nspans; i++) {   /* spans in the bucket while end to end and within its size */
        const struct tr_param_span *on = &o->spans[i];
        size_t bytes = (size_t)on->numel * sizeof(float);
        struct down_bucket *b = w->n ? &w->buckets[w->n - 1] : NULL;
        if (!b || on->grad != b->grad + (int64_t)b->bytes || b->bytes + bytes > bucket_bytes)
            b = &w->buckets[w->n++], *b = (struct down_bucket){.grad = on->grad, .host = o->host_spans[i].grad, .ready = -1};
        b->bytes += bytes;
    }
    for (int v = 0; v < g->nvalues; v++) {   /* each bucket final after its gradients' last toucher */
        if (g->values[v].kind != TR_GRAD || o->plan->offset[v] < 0)
            continue;
        int64_t lo = o->plan->offset[v], hi = lo + numel(g, v) * (int64_t)sizeof(float);
        for (int b = 0; b < w->n; b++)
            if (lo < w->buckets[b].grad + (int64_t)w->buckets[b].bytes && hi > w->buckets[b].grad &&
                last[v] > w->buckets[b].ready)
                w->buckets[b].ready = last[v];
    }
    free(last);
    qsort(w->buckets, (size_t)w->n, sizeof *w->buckets, by_ready);
    o->down = w;
    return true;
}

/* Every bucket final after the schedule's node `step` (all: INT_MAX) on the queue. */
static int send_ready(struct tr_optim *o, int step, struct tr_diag *d)
{
    struct tr_grads_down *w = o->down;
    double began = tr_now();
    int rc = 0;
    for (; !rc && w->sent < w->n && w->buckets[w->sent].ready <= step; w->sent++) {
        const struct down_bucket *b = &w->buckets[w->sent];
        rc = tr_backend_copy_behind(o->be, (char *)o->host_grads + b->host, o->grads + b->grad, b->bytes, d);
        o->moved.down += b->bytes;
        o->moved.early += step < INT_MAX ? b->bytes : 0;
    }
    o->moved.seconds += tr_now() - began;
    return rc;
}

static int down_before(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    const struct tr_exec_hook *inner = &((struct tr_optim *)ctx)->down->inner;
    return inner->before ? inner->before(inner->ctx, x, step, node, d) : 0;
}

static int down_after(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    struct tr_optim *o = ctx;
    const struct tr_exec_hook *inner = &o->down->inner;
    int rc = inner->after ? inner->after(inner->ctx, x, step, node, d) : 0;
    return !rc && o->down->armed ? send_ready(o, step, d) : rc;
}

struct tr_exec_hook tr_optim_hook(struct tr_optim *o, struct tr_exec_hook inner)
{
    if (!o->down)
        return inner;
    o->down->inner = inner;
    return (struct tr_exec_hook){.before = inner.before ? down_before : NULL, .after = down_after, .ctx = o};
}

int tr_optim_arm(struct tr_optim *o, struct tr_diag *d)
{
    if (!o->down)
        return 0;
    o->down->armed = true, o->down->sent = 0, o->down->queued = o->down->here = false;
    return send_ready(o, -1, d);   /* what no node writes: its zeros */
}

int tr_optim_sent(struct tr_optim *o, struct tr_diag *d)
{
    struct tr_grads_down *w = o->down;
    if (!w || !w->armed)
        return 0;
    int rc = send_ready(o, INT_MAX, d);
    double began = tr_now();
    if (!rc)
        rc = tr_backend_join(o->be, d);
    o->moved.seconds += tr_now() - began;
    w->armed = false, w->queued = rc == 0;
    return rc;
}

/* The host's wait for the gradients sent during the backward, at its first read of them. */
static int grads_here(struct tr_optim *o, struct tr_diag *d)
{
    struct tr_grads_down *w = o->down;
    if (!w || !w->queued)
        return 0;
    double began = tr_now();
    int rc = tr_backend_synchronize(o->be, d);
    o->moved.seconds += tr_now() - began;
    w->queued = false, w->here = rc == 0;
    return rc;
}

/* ---- offloaded: the step ------------------------------------------------------------------------- */

/* Offloaded (tr_optim_offload), in runs of parameters whose bytes lie end to end: a run's
 * gradients down in one copy (unless they came down during the backward), the CPU's update of
 * each parameter's host copy, and each run of parameters back in one copy on the queue (their
 * slots' padding with them: the host copy holds the device's) while the next are updated. */
static int offloaded_step(struct tr_optim *o, struct tr_optim_args *a, struct tr_diag *d)
{
    const struct tr_backend *be = o->be;
    bool queue = tr_backend_copies_ahead(be);
    int rc = grads_here(o, d);
    bool early = o->down && o->down->here;
    double began = tr_now(), update = 0;
    if (o->stale && !rc) {
        rc = tr_backend_copy(be, o->host_params, o->params, o->plan->region_bytes[TR_PARAM], TR_COPY_TO_HOST, d);
        o->stale = rc != 0;
    }
    a->params = o->host_params, a->grads = (char *)o->host_grads;
    for (int i = 0, down = early ? o->nspans : 0, up = 0; i < o->nspans && !rc; i++) {
        const struct tr_param_span *on = &o->spans[i];
        if (i == down) {   /* a run of gradients end to end, down at once */
            int last = i;
            while (last + 1 < o->nspans && o->spans[last + 1].grad == o->spans[last].grad + o->spans[last].numel * 4)
                last++;
            size_t bytes = (size_t)(o->spans[last].grad - on->grad) + (size_t)o->spans[last].numel * sizeof(float);
            rc = tr_backend_copy(be, (char *)o->host_grads + o->host_spans[i].grad, o->grads + on->grad, bytes,
                                 TR_COPY_TO_HOST, d);
            o->moved.down += bytes, down = last + 1;
        }
        double t = tr_now();
        a->spans = &o->host_spans[i], a->nspans = 1;
        if (!rc)
            rc = tr_backend_optim_step(tr_backend_cpu(), a);
        update += tr_now() - t;
        bool ends = i + 1 == o->nspans || o->spans[i + 1].param != o->spans[i].param + align64(on->numel * 4);
        if (!rc && ends) {   /* a run of parameters in adjacent slots, back at once */
            size_t bytes = (size_t)(on->param - o->spans[up].param) + (size_t)on->numel * sizeof(float);
            char *to = o->params + o->spans[up].param, *from = o->host_params + o->spans[up].param;
            rc = queue ? tr_backend_copy_ahead(be, to, from, bytes, d)
                       : tr_backend_copy(be, to, from, bytes, TR_COPY_TO_DEVICE, d);
            o->moved.up += bytes, up = i + 1;
        }
    }
    if (queue) {   /* every parameter back before the next forward reads it */
        int joined = tr_backend_join(be, d);
        rc = rc ? rc : joined;
    }
    if (o->down)
        o->down->here = false;
    o->moved.update_seconds += update;
    o->moved.seconds += tr_now() - began - update;
    return rc;
}

int tr_optim_step(struct tr_optim *o, double lr, struct tr_diag *d)
{
    o->step++, o->moved.steps++;
    struct tr_optim_args a = args_of(o, lr, d);
    o->grad_factor = 1;   /* a factor is for the step after the clipping that set it */
    if (o->host_params)
        return offloaded_step(o, &a, d);
    int rc = tr_backend_optim_step(o->be, &a);
    return rc || !o->comm || o->stage == 3 ? rc : gather_params(o, d);
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

/* Sharded: this rank's pieces of the sum of squares, every rank's summed into all of them (a
 * piece is one rank's: the others add zeros, exactly), added in order as unsharded. */
static int sumsq_shared(struct tr_optim *o, double *sum, struct tr_diag *d)
{
    memset(o->pieces, 0, (size_t)o->npieces * sizeof *o->pieces);
    int64_t index = 0;
    int rc = 0;
    for (int i = 0; i < o->nspans && !rc; i++)
        for (int64_t at = 0; at < o->spans[i].numel && !rc; at += TR_SUMSQ_PIECE, index++) {
            int64_t first = o->spans[i].state + at;
            if (first < o->lo || first >= o->lo + o->own)
                continue;
            struct tr_param_span piece = o->spans[i];
            piece.param += at * (int64_t)sizeof(float), piece.grad += at * (int64_t)sizeof(float);
            if (o->stage >= 2)
                piece.grad = (first - o->lo) * (int64_t)sizeof(float);
            if (o->stage == 3)
                piece.param = (first - o->lo) * (int64_t)sizeof(float);
            piece.numel = o->spans[i].numel - at < TR_SUMSQ_PIECE ? o->spans[i].numel - at : TR_SUMSQ_PIECE;
            struct tr_optim_args a = args_of(o, 0, d);
            a.spans = &piece, a.nspans = 1;
            rc = tr_backend_grad_sumsq(o->be, &a, &o->pieces[index]) ? TR_EFAIL : 0;
        }
    if (!rc)
        rc = tr_comm_sum_doubles(o->comm, o->pieces, (size_t)o->npieces, d);
    *sum = 0;
    for (int64_t j = 0; j < o->npieces; j++)
        *sum += o->pieces[j];
    return rc;
}

/* Pipelined: each stage's pieces at their places among all the model's, summed across the
 * stages, then added in order — the same bits as one device's. */
static int sumsq_pipelined(struct tr_optim *o, double *sum, struct tr_diag *d)
{
    memset(o->pieces, 0, (size_t)o->npieces * sizeof *o->pieces);
    int rc = 0;
    for (int i = 0; i < o->nspans && !rc; i++)
        for (int64_t at = 0, k = 0; o->counted[i] && at < o->spans[i].numel && !rc; at += TR_SUMSQ_PIECE, k++) {
            struct tr_param_span piece = o->spans[i];
            piece.param += at * (int64_t)sizeof(float), piece.grad += at * (int64_t)sizeof(float);
            piece.numel = o->spans[i].numel - at < TR_SUMSQ_PIECE ? o->spans[i].numel - at : TR_SUMSQ_PIECE;
            struct tr_optim_args a = args_of(o, 0, d);
            a.spans = &piece, a.nspans = 1;
            rc = tr_backend_grad_sumsq(o->be, &a, &o->pieces[o->piece_at[i] + k]) ? TR_EFAIL : 0;
        }
    if (!rc)
        rc = tr_comm_sum_doubles(o->pipe, o->pieces, (size_t)o->npieces, d);
    *sum = 0;
    for (int64_t j = 0; j < o->npieces; j++)
        *sum += o->pieces[j];
    return rc;
}

double tr_grad_clip(struct tr_optim *o, double clip, struct tr_diag *d)
{
    struct tr_optim_args a = args_of(o, 0, d);
    double sum = 0;
    if (o->tensor)   /* this rank's part of the sum, then the tensor ranks' together */
        a.spans = o->norm_spans, a.nspans = o->nnorm;
    if (o->pipe ? sumsq_pipelined(o, &sum, d) : o->comm ? sumsq_shared(o, &sum, d) : tr_backend_grad_sumsq(o->be, &a, &sum))
        return NAN;
    if (o->tensor && tr_comm_sum_doubles(o->tensor, &sum, 1, d))
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
    bool finite = false, copy = true;
    if (tr_backend_grad_scale(o->be, &a, inv, &finite))
        return false;
    if (o->down && (o->down->queued || o->down->here)) {   /* offloaded: the host's, sent before, the same */
        struct tr_optim_args h = a;
        h.params = o->host_params, h.grads = (char *)o->host_grads, h.spans = o->host_spans;
        if (grads_here(o, d) || tr_backend_grad_scale(tr_backend_cpu(), &h, inv, &copy))
            return false;
    }
    double overflowed = !finite;   /* sharded: whether any rank's part did; pipelined, any stage's */
    if (o->comm && tr_comm_sum_doubles(o->comm, &overflowed, 1, d))
        return false;
    if (o->pipe && tr_comm_sum_doubles(o->pipe, &overflowed, 1, d))
        return false;
    if (o->tensor && tr_comm_sum_doubles(o->tensor, &overflowed, 1, d))
        return false;
    return overflowed == 0;
}

int tr_grad_first_nonfinite(const struct tr_optim *o)
{
    int found = -1;
    float *g = NULL;
    for (int v = 0, i = 0; v < o->g->nvalues && found < 0; v++) {
        if (o->g->values[v].kind != TR_PARAM)
            continue;
        struct tr_param_span part = o->spans[i++], *s = &part;
        if (o->comm) {   /* sharded: this rank's part holds the summed gradients, the rest is stale */
            int64_t lo = s->state > o->lo ? s->state : o->lo;
            int64_t hi = s->state + s->numel < o->lo + o->own ? s->state + s->numel : o->lo + o->own;
            if (lo >= hi)
                continue;
            part.grad = o->stage >= 2 ? (lo - o->lo) * (int64_t)sizeof(float)
                                      : s->grad + (lo - s->state) * (int64_t)sizeof(float);
            part.numel = hi - lo;
        }
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
