/* Evaluation (evaluate.h): batches of a split fed to the evaluation program, its logits (or the
 * fused head's ranks) read back and ranked against the truth on the host. */
#include "train/evaluate.h"

#include <math.h>
#include <stdlib.h>

#include "core/progress.h"
#include "core/stop.h"
#include "data/loader.h"
#include "train/step.h"

int64_t tr_rank_truth(const float *logits, const int32_t *truth, int64_t rows, int64_t classes, int64_t *correct,
                      int64_t *in_top5)
{
    int64_t counted = 0;
    for (int64_t i = 0; i < rows; i++) {
        if (truth[i] < 0)
            continue;
        const float *row = logits + i * classes;
        int64_t t = truth[i], above = 0;   /* classes ranked over the true one */
        for (int64_t c = 0; c < classes; c++)
            above += row[c] > row[t] || (row[c] == row[t] && c < t);
        *correct += above == 0;
        *in_top5 += above < 5;
        counted++;
    }
    return counted;
}

/* The same from ranks the fused head and loss computed (models.h: tr_model.rank). */
static int64_t count_ranks(const int32_t *rank, int64_t rows, int64_t *correct, int64_t *in_top5)
{
    int64_t counted = 0;
    for (int64_t i = 0; i < rows; i++)
        if (rank[i] >= 0) {
            *correct += rank[i] == 0;
            *in_top5 += rank[i] < 5;
            counted++;
        }
    return counted;
}

/* One evaluation batch's host buffers: its sample ids, for text its tokens, targets, labels and
 * mask, and the scores read back. */
struct eval_buffers {
    int64_t *ids;
    int32_t *tokens, *targets, *labels;
    uint8_t *mask;
    float *x;                  /* images kept as bytes: the batch's normalised features */
    void *scores;              /* the logits (f32) or the fused head's ranks (i32) of a batch */
};

static void buffers_alloc(struct eval_buffers *e, int64_t batch, int64_t seq, int64_t classes, bool text,
                          int64_t pixel_features)
{
    int64_t cap = batch * seq;
    *e = (struct eval_buffers){0};
    e->ids = tr_xmalloc((size_t)batch * sizeof(int64_t));
    if (pixel_features)
        e->x = tr_xmalloc((size_t)(batch * pixel_features) * sizeof(float));
    e->scores = tr_xmalloc((size_t)(batch * (classes > seq ? classes : seq)) * 4);
    if (text) {
        e->tokens = tr_xmalloc((size_t)cap * sizeof(int32_t));
        e->targets = tr_xmalloc((size_t)cap * sizeof(int32_t));
        e->labels = tr_xmalloc((size_t)batch * sizeof(int32_t));
        e->mask = tr_xmalloc((size_t)cap);
    }
}

static void buffers_free(struct eval_buffers *e)
{
    free(e->ids), free(e->tokens), free(e->targets), free(e->labels), free(e->mask), free(e->scores), free(e->x);
}

/* Rows [start, start + rows) of split as a batch. */
static struct tr_batch batch_of(const struct tr_split *split, int lm, int64_t start, int64_t rows, int64_t f,
                                int64_t multiple, struct eval_buffers *e)
{
    struct tr_batch b = {.n = rows, .S = 1, .ids = e->ids};
    for (int64_t i = 0; i < rows; i++)
        e->ids[i] = start + i;
    if (split->tokens) {
        b.S = tr_text_batch(split, e->ids, rows, multiple, e->tokens, e->targets, e->mask, e->labels);
        b.tokens = e->tokens, b.mask = e->mask;
        if (lm)
            b.targets = e->targets;
        else
            b.y = e->labels;
    } else if (split->x) {
        b.x = split->x + start * f, b.y = split->y + start;
    } else {
        tr_split_rows(split, e->ids, rows, e->x);
        b.x = e->x, b.y = split->y + start;
    }
    return b;
}

/* Pipelined: the last stage's counts, which alone it has, given to the stages before it. */
static int from_last_stage(struct tr_session *s, double *sum, int64_t *correct, int64_t *in_top5, int64_t *counted,
                           struct tr_diag *d)
{
    const struct tr_comm *c = &s->pipe_comm;
    int last = c->world - 1, tag = s->eval.b.stages.ntransfers + 1, rc = 0;
    double counts[4] = {*sum, (double)*correct, (double)*in_top5, (double)*counted};
    for (int k = 0; k < last && c->rank == last && !rc; k++) {
        struct tr_comm_request r;
        rc = tr_comm_send(c, counts, sizeof counts, k, tag, &r, d);
        rc = rc ? rc : tr_comm_sent(c, &r, d);
    }
    if (c->rank != last)
        rc = tr_comm_recv(c, counts, sizeof counts, last, tag, "receiving the evaluation from the last stage", d);
    *sum = counts[0], *correct = (int64_t)counts[1], *in_top5 = (int64_t)counts[2], *counted = (int64_t)counts[3];
    return rc;
}

int tr_evaluate(struct tr_session *s, const struct tr_data *data, const struct tr_split *split, const char *what,
                bool interruptible, int64_t eval_samples, struct tr_eval *out, struct tr_diag *d)
{
    int64_t f = split->tokens ? 0 : tr_split_features(split), correct = 0, in_top5 = 0, counted = 0;
    int64_t classes = data->nclasses, batch = s->k.eval_batch;
    struct eval_buffers e;
    buffers_alloc(&e, batch, s->job.seq, classes, split->tokens != NULL, split->pixels ? f : 0);
    double sum = 0;
    int rc = 0;
    int64_t n_eval = eval_samples && eval_samples < split->n ? eval_samples : split->n;
    struct tr_exec *x = &s->eval.x;
    const struct tr_model *m = &s->eval.b.m;
    bool piped = s->eval.b.pipelined;
    struct tr_progress shown;
    tr_progress_begin(&shown, what, n_eval, "samples");
    for (int64_t start = 0; start < n_eval && !rc; start += batch) {
        if (interruptible && (rc = tr_stop_check(d, what)))   /* a signal: the run ends without the rest */
            break;
        int64_t rows = n_eval - start < batch ? n_eval - start : batch;
        struct tr_batch b = batch_of(split, data->kind == TR_DATA_TEXT_LM, start, rows, f, tr_knobs_seq_multiple(&s->k), &e);
        s->rng.sample_ids = e.ids;
        float part;
        size_t bytes = m->logits >= 0 ? (size_t)(rows * classes) * sizeof(float) : (size_t)(rows * b.S) * sizeof(int32_t);
        struct tr_diag why = {0};
        x->plan = tr_program_plan_for(&s->eval.b.p, rows, b.S);
        if (tr_feed(x, m, s->eval.lm, &b, f, &why) ||
            (piped ? tr_pipe_forward(&s->eval_pipe, x, rows, b.S, &why) : tr_exec_run(x, rows, b.S, &why))) {
            rc = tr_fail_because(d, TR_EFAIL, &why, "evaluation");
            break;
        }
        if (!tr_exec_holds(x, m->loss)) {   /* a pipeline's stage before the last: its part done */
            tr_progress_update(&shown, start + rows);
            continue;
        }
        if (tr_exec_read(x, m->logits >= 0 ? m->logits : m->rank, e.scores, bytes, &why) ||
            tr_exec_read(x, m->loss, &part, sizeof part, &why)) {
            rc = tr_fail_because(d, TR_EFAIL, &why, "evaluation");
            break;
        }
        int64_t n = m->logits >= 0 ? tr_rank_truth(e.scores, b.y, rows, classes, &correct, &in_top5)
                                   : count_ranks(e.scores, rows * b.S, &correct, &in_top5);
        sum += (double)part * (double)n;
        counted += n;
        tr_progress_update(&shown, start + rows);
    }
    tr_progress_end(&shown);
    buffers_free(&e);
    if (piped) {   /* the last sends, then the last stage's counts */
        int drained = tr_pipe_drain(&s->eval_pipe, d);
        rc = rc ? rc : drained;
    }
    if (!rc && piped)
        rc = from_last_stage(s, &sum, &correct, &in_top5, &counted, d);
    out->loss = counted ? sum / (double)counted : NAN;
    out->accuracy = counted ? (double)correct / (double)counted : NAN;
    out->top5 = counted ? (double)in_top5 / (double)counted : NAN;
    return rc;
}
