/* A spread run's checkpoints, a tensor at a time (whole.h). */
#include "train/whole.h"

#include <stdlib.h>
#include <string.h>

enum { TAG = 7 };   /* the tensors' messages: in the file's name order, between two ranks */

struct tr_checkpoint_layout tr_whole_layout(const struct tr_session *s)
{
    return (struct tr_checkpoint_layout){.g = &s->train.b.g, .optimizer = s->optim.kind, .nstate = s->optim.nstate};
}

/* The rank of data rank 0's stage `stage`, tensor rank `t` (session.h's layout). */
static int rank_of(const struct tr_session *s, int stage, int t)
{
    return stage * s->layout.tensor + t;
}

static bool sliced(const struct tr_session *s, int v)
{
    return s->train.b.g.values[v].split_axis >= 0;
}

/* Whether stage holds value v (without a pipeline: the one stage holds everything). */
static bool holds(const struct tr_session *s, int stage, int v)
{
    return !s->train.b.pipelined || tr_stages_holds(&s->train.b.stages, &s->train.b.g, stage, v);
}

/* This rank's memory of the tensors: each held parameter's place among its optimizer's (own[v],
 * −1 where not held), the host views pulled from the device. */
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
        bool weight = kind == TR_PARAM || kind == TR_STATE;
        w->first[v] = !weight ? -1 : s->train.b.pipelined ? tr_stages_holder(&s->train.b.stages, g, v) : 0;
        bool held = g->values[v].kind == TR_PARAM && tr_exec_holds(&s->train.x, v);
        w->own[v] = held ? at : -1;
        at += held ? (int)tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1) : 0;
    }
    struct tr_diag why = {0};
    if (pull && (tr_exec_pull(&s->train.x, TR_PARAM, &why) || tr_optim_pull(&s->optim, &why)))
        return tr_fail_because(d, TR_EFAIL, &why, "a checkpoint's tensors");
    return 0;
}

/* Where tensor t is in this rank's memory (it holds its value; sliced, its slice). */
static void *place(const struct stage_view *w, const struct tr_checkpoint_tensor *t)
{
    if (t->state < 0)
        return tr_exec_host(&w->s->train.x, t->value);
    return tr_optim_host_state(&w->s->optim) + t->state * w->s->optim.total + w->own[t->value];
}

/* The bytes of this rank's part of tensor t: a slice of a sliced one, else all of it. */
static size_t part_bytes(const struct tr_session *s, const struct tr_checkpoint_tensor *t)
{
    return sliced(s, t->value) ? t->t.bytes / (size_t)s->layout.tensor : t->t.bytes;
}

/* The bytes of one element of tensor t (a parameter's f32, or its optimizer state's dtype). */
static size_t element_bytes(const struct tr_session *s, const struct tr_checkpoint_tensor *t)
{
    return part_bytes(s, t) / (size_t)tr_dim_eval(tr_shape_numel(&s->train.b.g.values[t->value].shape), 1, 1);
}

struct gathering {
    struct stage_view view;
    const struct tr_checkpoint_tensor *t;   /* the tensors, in the file's order */
    int filled;         /* the tensors whose pieces all came */
    size_t partial;     /* of the next one, the bytes that came */
    char *whole;        /* tensor parallel: the sliced tensor being written, put together … */
    int assembled;      /* … its index (−1: none yet) */
};

/* Sliced tensor t whole on rank 0: each tensor rank's slice of it put in place. */
static int assemble(struct gathering *g, const struct tr_checkpoint_tensor *t, struct tr_diag *d)
{
    struct tr_session *s = g->view.s;
    size_t slice = part_bytes(s, t), size = element_bytes(s, t);
    int from = g->view.first[t->value], rc = 0;
    g->whole = tr_xmalloc(t->t.bytes);
    g->assembled = (int)(t - g->t);
    char *part = tr_xmalloc(slice);
    for (int k = 0; k < s->layout.tensor && !rc; k++) {
        int src = rank_of(s, from, k);
        if (src == 0)
            memcpy(part, place(&g->view, t), slice);
        else
            rc = tr_comm_recv(s->comm, part, slice, src, TAG, "receiving the checkpoint's tensors", d);
        if (!rc)
            tr_value_slice(&s->train.b.g, t->value, k, g->whole, part, size, false);
    }
    free(part);
    return rc;
}

static int fill(void *ctx, const struct tr_checkpoint_tensor *t, size_t at, void *buf, size_t bytes, struct tr_diag *d)
{
    struct gathering *g = ctx;
    struct tr_session *s = g->view.s;
    int from = g->view.first[t->value], rc = 0;   /* the first stage that holds it */
    bool last = at + bytes >= t->t.bytes;
    g->filled += last;
    g->partial = last ? 0 : at + bytes;
    if (sliced(s, t->value)) {
        if (at == 0)
            rc = assemble(g, t, d);
        if (!rc)
            memcpy(buf, g->whole + at, bytes);
        if (last || rc)
            free(g->whole), g->whole = NULL;
        return rc;
    }
    if (from == 0) {
        memcpy(buf, (char *)place(&g->view, t) + at, bytes);
        return 0;
    }
    return tr_comm_recv(s->comm, buf, bytes, rank_of(s, from, 0), TAG, "receiving the checkpoint's tensors", d);
}

/* Tensor t's pieces (TR_ST_PIECE) from byte `skip` on, from rank `from` to rank 0: sent (data) or
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
            rc = tr_comm_send(s->comm, data + at, bytes, 0, TAG, &r, d);
            rc = rc ? rc : tr_comm_sent(s->comm, &r, d);
        } else {
            rc = tr_comm_recv(s->comm, scratch, bytes, from, TAG, "receiving the checkpoint's tensors", d);
        }
    }
    free(scratch);
    return rc;
}

/* A sliced tensor's part from this rank to rank 0 (data), or rank 0 taking one from `from` and
 * dropping it (NULL). */
static int slice_to_writer(struct tr_session *s, const struct tr_checkpoint_tensor *t, const char *data, int from,
                           struct tr_diag *d)
{
    size_t bytes = part_bytes(s, t);
    struct tr_comm_request r;
    if (data)
        return tr_comm_send(s->comm, data, bytes, 0, TAG, &r, d) || tr_comm_sent(s->comm, &r, d) ? TR_EFAIL : 0;
    void *scratch = tr_xmalloc(bytes);
    int rc = tr_comm_recv(s->comm, scratch, bytes, from, TAG, "receiving the checkpoint's tensors", d);
    free(scratch);
    return rc;
}

int tr_whole_write(struct tr_session *s, const char *dir, int64_t step, const char *recipe_name,
                   const char *trainer_state, struct tr_diag *d)
{
    if (s->layout.data_rank != 0)
        return 0;
    struct tr_checkpoint_layout l = tr_whole_layout(s);
    struct gathering g = {.assembled = -1};
    int rc = view_open(&g.view, s, true, d);
    struct tr_checkpoint_tensor *t;
    int n = tr_checkpoint_tensors(&l, &t), me = s->comm->rank, T = s->layout.tensor;
    g.t = t;
    if (me == 0 && dir && !rc)
        rc = tr_checkpoint_write_each(dir, &l, step, s->optim.step, recipe_name, trainer_state, fill, &g, d);
    free(g.whole);
    for (int i = me == 0 ? g.filled : 0; i < n; i++) {   /* rank 0: what a failure left; the others: theirs */
        int from = g.view.first[t[i].value];
        struct tr_diag unused = {0};
        if (me == 0 && sliced(s, t[i].value) && i != g.assembled) {
            for (int k = 0; k < T; k++)
                if (rank_of(s, from, k) != 0)
                    slice_to_writer(s, &t[i], NULL, rank_of(s, from, k), &unused);
        } else if (me == 0 && !sliced(s, t[i].value) && from != 0) {
            pieces(s, &t[i], NULL, rank_of(s, from, 0), i == g.filled ? g.partial : 0, &unused);
        } else if (me != 0 && from == s->layout.stage && sliced(s, t[i].value)) {
            int sent = slice_to_writer(s, &t[i], place(&g.view, &t[i]), 0, d);
            rc = rc ? rc : sent;
        } else if (me != 0 && from == s->layout.stage && s->layout.tensor_rank == 0) {
            int sent = pieces(s, &t[i], place(&g.view, &t[i]), 0, 0, d);
            rc = rc ? rc : sent;
        }
        tr_diag_free(&unused);
    }
    if (me == 0 && !dir && !rc)
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
    int n = tr_checkpoint_tensors(&l, &t), P = s->layout.pipeline, T = s->layout.tensor;
    for (int i = 0; i < n && !rc; i++) {
        const struct tr_st_tensor *from = comm->rank == 0 ? tr_st_find(&c->st, t[i].t.name) : NULL;
        if (comm->rank == 0 && !from) {
            rc = tr_fail(d, TR_EFAIL, "the checkpoint has no tensor '%s'", t[i].t.name);
            break;
        }
        size_t bytes = part_bytes(s, &t[i]);
        char *slice = comm->rank == 0 && sliced(s, t[i].value) ? tr_xmalloc(bytes) : NULL;
        size_t size = element_bytes(s, &t[i]);
        for (int to = 0; to < comm->world && !rc; to++) {   /* each rank whose stage holds it, in turn */
            if ((comm->rank != 0 && comm->rank != to) || !holds(s, to / T % P, t[i].value))
                continue;
            const void *part = from ? from->data : NULL;
            if (slice) {   /* tensor parallel: that rank's slice */
                tr_value_slice(&s->train.b.g, t[i].value, to % T, (void *)from->data, slice, size, true);
                part = slice;
            }
            struct tr_comm_request r;
            if (comm->rank == 0 && to == 0)
                memcpy(place(&w, &t[i]), part, bytes);
            else if (comm->rank == 0)
                rc = tr_comm_send(comm, part, bytes, to, TAG, &r, d) || tr_comm_sent(comm, &r, d) ? TR_EFAIL : 0;
            else
                rc = tr_comm_recv(comm, place(&w, &t[i]), bytes, 0, TAG, "receiving the resumed tensors", d);
        }
        free(slice);
    }
    tr_checkpoint_tensors_free(t, n);
    free(w.own), free(w.first);
    struct tr_diag why = {0};
    if (!rc && (tr_exec_push(&s->train.x, TR_PARAM, &why) || tr_optim_push(&s->optim, &why)))
        rc = tr_fail_because(d, TR_EFAIL, &why, "a resumed checkpoint's tensors");
    return rc;
}
