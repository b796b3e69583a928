/* A pipelined run's checkpoints, a tensor at a time (whole.h). */
#include "train/whole.h"

#include <stdlib.h>
#include <string.h>

enum { TAG = 7 };   /* the tensors' messages: in the file's name order, between two ranks */

struct tr_checkpoint_layout tr_whole_layout(const struct tr_session *s)
{
    return (struct tr_checkpoint_layout){.g = &s->train.b.g, .optimizer = s->optim.kind, .nstate = s->optim.nstate};
}

/* This stage's memory of the stages' tensors: each held parameter's place among its optimizer's
 * (own[v], −1 where not held), the host views pulled from the device. */
struct stage_view {
    struct tr_session *s;
    int64_t *own;
    int *first;        /* each weight's first stage that holds it (−1: none; not a weight) */
};

static int view_open(struct stage_view *w, struct tr_session *s, bool pull, struct tr_diag *d)
{
    const struct tr_graph *g = &s->train.b.g;
    *w = (struct stage_view){.s = s, .own = tr_xmalloc((size_t)(g->nvalues + 1) * sizeof *w->own),
                             .first = tr_xmalloc((size_t)(g->nvalues + 1) * sizeof *w->first)};
    for (int v = 0, at = 0; v < g->nvalues; v++) {
        enum tr_value_kind kind = g->values[v].kind;
        w->first[v] = kind == TR_PARAM || kind == TR_STATE ? tr_stages_holder(&s->train.b.stages, g, v) : -1;
        bool held = g->values[v].kind == TR_PARAM && tr_exec_holds(&s->train.x, v);
        w->own[v] = held ? at : -1;
        at += held ? (int)tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1) : 0;
    }
    struct tr_diag why = {0};
    if (pull && (tr_exec_pull(&s->train.x, TR_PARAM, &why) || tr_optim_pull(&s->optim, &why)))
        return tr_fail_because(d, TR_EFAIL, &why, "a checkpoint's tensors");
    return 0;
}

/* Where tensor t is in this stage's memory (it holds its value). */
static void *place(const struct stage_view *w, const struct tr_checkpoint_tensor *t)
{
    if (t->state < 0)
        return tr_exec_host(&w->s->train.x, t->value);
    return tr_optim_host_state(&w->s->optim) + t->state * w->s->optim.total + w->own[t->value];
}

struct gathering {
    struct stage_view view;
    int filled;         /* the tensors whose pieces all came */
    size_t partial;     /* of the next one, the bytes that came */
};

static int fill(void *ctx, const struct tr_checkpoint_tensor *t, size_t at, void *buf, size_t bytes, struct tr_diag *d)
{
    struct gathering *g = ctx;
    struct tr_session *s = g->view.s;
    int from = g->view.first[t->value];   /* the first stage that holds it */
    bool last = at + bytes >= t->t.bytes;
    g->filled += last;
    g->partial = last ? 0 : at + bytes;
    if (from == 0) {
        memcpy(buf, (char *)place(&g->view, t) + at, bytes);
        return 0;
    }
    return tr_comm_recv(&s->pipe_comm, buf, bytes, from, TAG, "receiving the checkpoint's tensors", d);
}

/* Tensor t's pieces (TR_ST_PIECE) from byte `skip` on, from stage `from` to rank 0: sent (data) or
 * taken and dropped (NULL). */
static int pieces(struct tr_session *s, const struct tr_checkpoint_tensor *t, const char *data, int from, size_t skip,
                  struct tr_diag *d)
{
    int rc = 0;
    void *scratch = data ? NULL : tr_xmalloc(TR_ST_PIECE);
    for (size_t at = skip; at < t->t.bytes && !rc; at += TR_ST_PIECE) {
        size_t bytes = t->t.bytes - at < TR_ST_PIECE ? t->t.bytes - at : TR_ST_PIECE;
        struct tr_comm_request r;
        if (data) {
            rc = tr_comm_send(&s->pipe_comm, data + at, bytes, 0, TAG, &r, d);
            rc = rc ? rc : tr_comm_sent(&s->pipe_comm, &r, d);
        } else {
            rc = tr_comm_recv(&s->pipe_comm, scratch, bytes, from, TAG, "receiving the checkpoint's tensors", d);
        }
    }
    free(scratch);
    return rc;
}

int tr_whole_write(struct tr_session *s, const char *dir, int64_t step, const char *recipe_name,
                   const char *trainer_state, struct tr_diag *d)
{
    if (s->layout.data_rank != 0)
        return 0;
    struct tr_checkpoint_layout l = tr_whole_layout(s);
    struct gathering g = {0};
    int rc = view_open(&g.view, s, true, d);
    struct tr_checkpoint_tensor *t;
    int n = tr_checkpoint_tensors(&l, &t);
    if (s->layout.stage == 0 && dir && !rc)
        rc = tr_checkpoint_write_each(dir, &l, step, s->optim.step, recipe_name, trainer_state, fill, &g, d);
    for (int i = s->layout.stage == 0 ? g.filled : 0; i < n; i++) {   /* rank 0: what a failure left; the others: theirs */
        int from = g.view.first[t[i].value];
        struct tr_diag unused = {0};
        if (s->layout.stage == 0 && from != 0) {
            pieces(s, &t[i], NULL, from, i == g.filled ? g.partial : 0, &unused);
        } else if (s->layout.stage != 0 && from == s->layout.stage) {
            int sent = pieces(s, &t[i], place(&g.view, &t[i]), 0, 0, d);
            rc = rc ? rc : sent;
        }
        tr_diag_free(&unused);
    }
    if (s->layout.stage == 0 && !dir && !rc)
        rc = TR_EFAIL;
    tr_checkpoint_tensors_free(t, n);
    free(g.view.own), free(g.view.first);
    return rc;
}

int tr_whole_scatter(struct tr_session *s, const struct tr_checkpoint *c, struct tr_diag *d)
{
    const struct tr_comm *comm = s->comm;
    struct tr_checkpoint_layout l = tr_whole_layout(s);
    struct stage_view w;
    int rc = view_open(&w, s, false, d);
    struct tr_checkpoint_tensor *t;
    int n = tr_checkpoint_tensors(&l, &t), P = s->layout.pipeline;
    for (int i = 0; i < n && !rc; i++) {
        const struct tr_st_tensor *from = comm->rank == 0 ? tr_st_find(&c->st, t[i].t.name) : NULL;
        if (comm->rank == 0 && !from) {
            rc = tr_fail(d, TR_EFAIL, "the checkpoint has no tensor '%s'", t[i].t.name);
            break;
        }
        for (int to = 0; to < comm->world && !rc; to++) {   /* each rank whose stage holds it, in turn */
            if ((comm->rank != 0 && comm->rank != to) || !tr_stages_holds(&s->train.b.stages, &s->train.b.g, to % P, t[i].value))
                continue;
            struct tr_comm_request r;
            if (comm->rank == 0 && to == 0)
                memcpy(place(&w, &t[i]), from->data, t[i].t.bytes);
            else if (comm->rank == 0)
                rc = tr_comm_send(comm, from->data, t[i].t.bytes, to, TAG, &r, d) || tr_comm_sent(comm, &r, d) ? TR_EFAIL : 0;
            else
                rc = tr_comm_recv(comm, place(&w, &t[i]), t[i].t.bytes, 0, TAG, "receiving the resumed tensors", d);
        }
    }
    tr_checkpoint_tensors_free(t, n);
    free(w.own), free(w.first);
    struct tr_diag why = {0};
    if (!rc && (tr_exec_push(&s->train.x, TR_PARAM, &why) || tr_optim_push(&s->optim, &why)))
        rc = tr_fail_because(d, TR_EFAIL, &why, "a resumed checkpoint's tensors");
    return rc;
}
