/* A pipelined run's whole model on rank 0 (whole.h). */
#include "train/whole.h"

#include <stdlib.h>
#include <string.h>

enum { TAG = 7 };   /* the tensors' messages: in the graph's order, between two ranks */

void tr_whole_open(struct tr_whole *w, const struct tr_session *s)
{
    const struct tr_graph *g = &s->train.b.g;
    memset(w, 0, sizeof *w);
    tr_memplan_build(&w->plan, g, NULL, 0, 1, 1, NULL, 0, NULL, false);
    w->params = tr_xcalloc(w->plan.region_bytes[TR_PARAM] + 1, 1);
    w->x = (struct tr_exec){.g = g, .plan = &w->plan, .be = s->be};
    w->x.base[TR_PARAM] = (char *)w->params;
    w->x.region_bytes[TR_PARAM] = w->plan.region_bytes[TR_PARAM];
    int64_t total = (int64_t)(tr_plan_param_bytes(g) / sizeof(float));
    w->state = tr_xcalloc((size_t)(s->optim.nstate * total) + 1, sizeof *w->state);
    w->o = (struct tr_optim){.g = g, .plan = &w->plan, .be = s->be, .state = w->state, .host_state = w->state,
                             .nstate = s->optim.nstate, .total = total, .kind = s->optim.kind, .step = s->optim.step,
                             .state_bytes = (size_t)(s->optim.nstate * total) * sizeof(float)};
}

void tr_whole_close(struct tr_whole *w)
{
    tr_memplan_free(&w->plan);
    free(w->params), free(w->state);
    memset(w, 0, sizeof *w);
}

static int64_t numel(const struct tr_graph *g, int v)
{
    return tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
}

/* Where a weight's parts are: its values in a view of the parameters, and state k's at
 * state + k · total + at (the optimizer's layout: its parameters in the graph's order). */
struct part {
    float *values, *state;
    int64_t total, at, n;
    int nstate;
};

/* Weight v's parts in this stage's executor and optimizer (host views), where it holds v. */
static bool own_part(struct tr_session *s, int v, int64_t at, struct part *p)
{
    if (!tr_exec_holds(&s->train.x, v))
        return false;
    *p = (struct part){.values = tr_exec_host(&s->train.x, v), .state = tr_optim_host_state(&s->optim),
                       .total = s->optim.total, .at = at, .n = numel(&s->train.b.g, v), .nstate = s->optim.nstate};
    if (s->train.b.g.values[v].kind != TR_PARAM)
        p->nstate = 0;
    return true;
}

static struct part whole_part(struct tr_whole *w, int v, int64_t at)
{
    const struct tr_graph *g = w->x.g;
    return (struct part){.values = tr_exec_host(&w->x, v), .state = w->state, .total = w->o.total, .at = at,
                         .n = numel(g, v), .nstate = g->values[v].kind == TR_PARAM ? w->o.nstate : 0};
}

static void copy_part(struct part *to, const struct part *from)
{
    memcpy(to->values, from->values, (size_t)from->n * sizeof(float));
    for (int k = 0; k < from->nstate; k++)
        memcpy(to->state + k * to->total + to->at, from->state + k * from->total + from->at, (size_t)from->n * sizeof(float));
}

static int send_part(const struct tr_comm *c, const struct part *p, int to, struct tr_diag *d)
{
    int rc = 0;
    for (int k = -1; k < p->nstate && !rc; k++) {
        struct tr_comm_request r;
        const float *data = k < 0 ? p->values : p->state + k * p->total + p->at;
        rc = tr_comm_send(c, data, (size_t)p->n * sizeof(float), to, TAG, &r, d);
        rc = rc ? rc : tr_comm_sent(c, &r, d);
    }
    return rc;
}

static int recv_part(const struct tr_comm *c, struct part *p, int from, struct tr_diag *d)
{
    int rc = 0;
    for (int k = -1; k < p->nstate && !rc; k++)
        rc = tr_comm_recv(c, k < 0 ? p->values : p->state + k * p->total + p->at, (size_t)p->n * sizeof(float), from,
                          TAG, "passing the model's tensors between stages", d);
    return rc;
}

int tr_whole_gather(struct tr_session *s, struct tr_whole *w, struct tr_diag *d)
{
    if (s->layout.data_rank != 0)
        return 0;
    struct tr_diag why = {0};
    if (tr_exec_pull(&s->train.x, TR_PARAM, &why) || tr_optim_pull(&s->optim, &why))
        return tr_fail_because(d, TR_EFAIL, &why, "a checkpoint's tensors");
    const struct tr_graph *g = &s->train.b.g;
    const struct tr_stages *st = &s->train.b.stages;
    int rc = 0;
    int64_t whole_at = 0, own_at = 0;
    for (int v = 0; v < g->nvalues && !rc; v++) {
        enum tr_value_kind kind = g->values[v].kind;
        if (kind != TR_PARAM && kind != TR_STATE)
            continue;
        int from = tr_stages_holder(st, g, v);   /* the first stage that holds it */
        struct part mine;
        bool held = own_part(s, v, own_at, &mine);
        if (s->layout.stage == 0) {
            struct part into = whole_part(w, v, whole_at);
            if (from == 0)
                copy_part(&into, &mine);
            else
                rc = recv_part(&s->pipe_comm, &into, from, d);
        } else if (from == s->layout.stage) {
            rc = send_part(&s->pipe_comm, &mine, 0, d);
        }
        if (kind == TR_PARAM) {
            whole_at += numel(g, v);
            own_at += held ? numel(g, v) : 0;
        }
    }
    w->o.step = s->optim.step;
    return rc;
}

int tr_whole_scatter(struct tr_session *s, struct tr_whole *w, struct tr_diag *d)
{
    const struct tr_graph *g = &s->train.b.g;
    const struct tr_stages *st = &s->train.b.stages;
    const struct tr_comm *c = s->comm;
    int P = s->layout.pipeline, rc = 0;
    for (int to = 0; to < c->world && !rc; to++) {   /* rank 0 to each rank in turn; each its own */
        if (c->rank != 0 && c->rank != to)
            continue;
        int64_t whole_at = 0, own_at = 0;
        for (int v = 0; v < g->nvalues && !rc; v++) {
            enum tr_value_kind kind = g->values[v].kind;
            if (kind != TR_PARAM && kind != TR_STATE)
                continue;
            bool theirs = tr_stages_holds(st, g, to % P, v);
            struct part mine;
            bool held = c->rank == to && own_part(s, v, own_at, &mine);
            if (theirs && c->rank == 0 && to == 0) {
                struct part from = whole_part(w, v, whole_at);
                copy_part(&mine, &from);
            } else if (theirs && c->rank == 0) {
                struct part from = whole_part(w, v, whole_at);
                rc = send_part(c, &from, to, d);
            } else if (held) {
                rc = recv_part(c, &mine, 0, d);
            }
            if (kind == TR_PARAM) {
                whole_at += numel(g, v);
                own_at += held ? numel(g, v) : 0;
            }
        }
    }
    long long step = c->rank == 0 ? w->o.step : 0;
    if (!rc)
        rc = tr_comm_broadcast(c, &step, sizeof step, d);
    s->optim.step = step;
    struct tr_diag why = {0};
    if (!rc && (tr_exec_push(&s->train.x, TR_PARAM, &why) || tr_optim_push(&s->optim, &why)))
        rc = tr_fail_because(d, TR_EFAIL, &why, "a resumed checkpoint's tensors");
    return rc;
}
