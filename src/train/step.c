/* An optimizer step's micro-batches, forward and backward (step.h). */
#include "train/step.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The arrays the loader made, by the input each fills: features and labels, or token ids, the
 * padding mask and the labels or next-token targets. */
struct loaded {
    int v;
    const void *host;
    size_t bytes;
};

static int loaded_inputs(const struct tr_model *m, int lm, const struct tr_batch *b, int64_t features,
                         struct loaded in[3])
{
    size_t n = (size_t)b->n, cells = (size_t)(b->n * b->S);
    if (m->x >= 0) {
        in[0] = (struct loaded){m->x, b->x, n * (size_t)features * sizeof(float)};
        in[1] = (struct loaded){m->y, b->y, n * sizeof(int32_t)};
        return 2;
    }
    in[0] = (struct loaded){m->ids, b->tokens, cells * sizeof(int32_t)};
    in[1] = (struct loaded){m->mask, b->mask, cells};
    in[2] = lm ? (struct loaded){m->y, b->targets, cells * sizeof(int32_t)} : (struct loaded){m->y, b->y, n * sizeof(int32_t)};
    return 3;
}

/* The inputs made here, not by the loader: positions 0, 1, … and segment 0 (text). */
static int made_inputs(struct tr_exec *x, const struct tr_model *m, const struct tr_batch *b, struct tr_diag *d)
{
    if (m->x >= 0)
        return 0;
    int64_t n = b->n, S = b->S;
    int32_t *pos = tr_exec_host(x, m->positions);   /* the host's view of the inputs: made there */
    for (int64_t i = 0; i < n * S; i++)
        pos[i] = (int32_t)(i % S);
    size_t cells = (size_t)(n * S);
    int rc = tr_exec_write(x, m->positions, pos, cells * sizeof(int32_t), d);
    return rc ? rc : m->segments >= 0 ? tr_exec_fill(x, m->segments, 0, cells * sizeof(int32_t), d) : 0;
}

int tr_feed(struct tr_exec *x, const struct tr_model *m, int lm, const struct tr_batch *b, int64_t features,
            struct tr_diag *d)
{
    struct loaded in[3];
    int count = loaded_inputs(m, lm, b, features, in), rc;
    for (int i = 0; i < count; i++)
        if ((rc = tr_exec_write(x, in[i].v, in[i].host, in[i].bytes, d)))
            return rc;
    return made_inputs(x, m, b, d);
}

/* Stages what the loader made of micro-batch b for the plan it will run under (exec.h), so that
 * on a device it travels while the micro-batch before it runs. No plan holds it: nothing is
 * staged, and the micro-batch says so when its turn comes. */
static int stage(const struct tr_step_runner *r, const struct tr_batch *b, struct tr_diag *d)
{
    const struct tr_memplan *plan = tr_program_plan_for(r->p, b->n, b->S);
    if (!plan)
        return 0;
    struct loaded in[3];
    int count = loaded_inputs(r->m, r->lm, b, r->features, in);
    int rc = 0;
    for (int i = 0; i < count && !rc; i++)
        rc = tr_exec_stage(r->x, plan, in[i].v, in[i].host, in[i].bytes, d);
    return rc;
}

int64_t tr_batch_targets(const struct tr_batch *b, int lm)
{
    const int32_t *t = lm ? b->targets : b->y;
    int64_t n = lm ? b->n * b->S : b->n, count = 0;
    for (int64_t i = 0; i < n; i++)
        count += t[i] != -100;   /* models.c: the loss ignores −100 */
    return count;
}

/* Whether a micro-batch has a target at all (tr_batch_targets > 0), stopping at the first. */
static bool has_targets(const struct tr_batch *b, int lm)
{
    const int32_t *t = lm ? b->targets : b->y;
    for (int64_t i = 0, n = lm ? b->n * b->S : b->n; i < n; i++)
        if (t[i] != -100)
            return true;
    return false;
}

/* This rank's micro-batches of st: [*lo, *hi), its share of them in order (all when alone). */
static void share_of(const struct tr_step_runner *r, const struct tr_step *st, int *lo, int *hi)
{
    int world = r->world > 1 ? r->world : 1;
    *lo = (int)((int64_t)st->nmicro * r->rank / world);
    *hi = (int)((int64_t)st->nmicro * (r->rank + 1) / world);
}

/* The first micro-batch of st at or after i, before end, that has targets (end when none). */
static int runnable(const struct tr_step *st, int i, int end, int lm)
{
    while (i < end && !has_targets(&st->micro[i], lm))
        i++;
    return i;
}

int tr_step_gradients(const struct tr_step_runner *r, const struct tr_step *st, const struct tr_step *next,
                      uint64_t step, double scale, double *loss, bool *ran, struct tr_diag *d)
{
    struct tr_exec *x = r->x;
    int64_t total = 0;   /* counted again below: a pass over ids, nothing beside the forward */
    for (int i = 0; i < st->nmicro; i++)
        total += tr_batch_targets(&st->micro[i], r->lm);
    struct tr_diag why = {0};
    /* the gradients' region; those in the arena (one micro-batch a step) the executor zeroes */
    int rc = r->p->region_bytes[TR_GRAD] ? tr_backend_fill(x->be, x->base[TR_GRAD], 0, r->p->region_bytes[TR_GRAD], &why) : 0;
    if (rc) {
        rc = tr_fail(d, rc, "zeroing the gradients: %s", tr_diag_last(&why));
        tr_diag_free(&why);
        return rc;
    }
    *loss = 0;
    r->rng->step = step;
    int lo, hi, next_lo = 0, next_hi = 0;
    share_of(r, st, &lo, &hi);
    if (r->reducer)   /* ZeRO 2: as many sums on every rank, the most micro-batches any rank runs */
        tr_grad_reducer_begin(r->reducer, x->base[TR_GRAD], (int)((st->nmicro + r->world - 1) / (r->world > 1 ? r->world : 1)));
    if (next)
        share_of(r, next, &next_lo, &next_hi);
    *ran = runnable(st, lo, hi, r->lm) < hi;
    for (int i = runnable(st, lo, hi, r->lm), after; i < hi; i = after) {
        after = runnable(st, i + 1, hi, r->lm);
        const struct tr_batch *b = &st->micro[i];
        int64_t count = tr_batch_targets(b, r->lm);
        /* this micro-batch's inputs were staged while the one before ran, unless it is the first */
        if (!x->nstaged && (rc = stage(r, b, d)))
            return rc;
        x->plan = tr_program_plan_for(r->p, b->n, b->S);
        if (!x->plan)
            return tr_fail(d, TR_EINVAL, "no plan holds a micro-batch of %lld × %lld", (long long)b->n,
                           (long long)b->S);
        r->rng->sample_ids = b->ids;
        double share = (double)count / (double)total;
        float scaled = (float)(share * scale), part;
        rc = tr_exec_commit(x, d);
        if (!rc)
            rc = made_inputs(x, r->m, b, d);
        if (!rc)
            rc = tr_exec_write(x, r->loss_scale, &scaled, sizeof scaled, d);
        if (!rc) {   /* the next micro-batch's inputs travel while this one runs */
            int first = 0;
            if (after < hi)
                rc = stage(r, &st->micro[after], d);
            else if (next && (first = runnable(next, next_lo, next_hi, r->lm)) < next_hi)
                rc = stage(r, &next->micro[first], d);
        }
        if (!rc && after >= hi && r->reducer)   /* the rank's last: its gradients final as written */
            tr_grad_reducer_arm(r->reducer, x->base[TR_GRAD]);
        if (!rc)
            rc = tr_exec_run(x, b->n, b->S, d);
        if (!rc)
            rc = tr_exec_read(x, r->m->loss, &part, sizeof part, d);
        if (!rc && r->reducer)   /* ZeRO 2: this micro-batch's gradients into the ranks' shards */
            rc = tr_grad_reduce_micro(r->reducer, x, d);
        if (rc)
            return rc;
        *loss += share * part;
    }
    /* ZeRO 3: a round this rank has no micro-batch for still gathers every parameter, as the
     * others' passes do, and sums zeros, in the order theirs come */
    while (!rc && x->shard.fill && r->reducer && tr_grad_reducer_owes(r->reducer))
        if (!(rc = tr_exec_gathers(x, d)))
            rc = tr_grad_reduce_micro(r->reducer, NULL, d);
    return rc;
}
