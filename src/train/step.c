/* An optimizer step's micro-batches, forward and backward (step.h). */
#include "train/step.h"

#include <stdio.h>
#include <string.h>

int tr_feed(struct tr_exec *x, const struct tr_model *m, int lm, const struct tr_batch *b, int64_t features)
{
    int64_t n = b->n, S = b->S;
    if (m->x >= 0)
        return tr_exec_write(x, m->x, b->x, (size_t)(n * features) * sizeof(float)) ||
               tr_exec_write(x, m->y, b->y, (size_t)n * sizeof(int32_t)) ? TR_EINVAL : 0;
    int32_t *pos = tr_exec_host(x, m->positions);   /* the host's view of the inputs: made there */
    for (int64_t i = 0; i < n * S; i++)
        pos[i] = (int32_t)(i % S);
    size_t cells = (size_t)(n * S);
    int rc = tr_exec_write(x, m->ids, b->tokens, cells * sizeof(int32_t)) ||
             tr_exec_write(x, m->mask, b->mask, cells) || tr_exec_write(x, m->positions, pos, cells * sizeof(int32_t)) ||
             (m->segments >= 0 && tr_exec_fill(x, m->segments, 0, cells * sizeof(int32_t)));
    if (!rc)   /* next-token targets [B, S]; classification labels [B] */
        rc = lm ? tr_exec_write(x, m->y, b->targets, cells * sizeof(int32_t))
                : tr_exec_write(x, m->y, b->y, (size_t)n * sizeof(int32_t));
    return rc ? TR_EINVAL : 0;
}

int64_t tr_batch_targets(const struct tr_batch *b, int lm)
{
    const int32_t *t = lm ? b->targets : b->y;
    int64_t n = lm ? b->n * b->S : b->n, count = 0;
    for (int64_t i = 0; i < n; i++)
        count += t[i] != -100;   /* models.c: the loss ignores −100 */
    return count;
}

int tr_step_gradients(const struct tr_step_runner *r, const struct tr_step *st, uint64_t step, double scale,
                      double *loss)
{
    struct tr_exec *x = r->x;
    int64_t total = 0;   /* counted again below: a pass over ids, nothing beside the forward */
    for (int i = 0; i < st->nmicro; i++)
        total += tr_batch_targets(&st->micro[i], r->lm);
    char error[TR_KERNEL_ERROR_MAX];
    if (x->be->fill(x->base[TR_GRAD], 0, r->p->region_bytes[TR_GRAD], error))
        return snprintf(x->error, sizeof x->error, "zeroing the gradients: %s", error), TR_EINVAL;
    *loss = 0;
    r->rng->step = step;
    for (int i = 0; i < st->nmicro; i++) {
        const struct tr_batch *b = &st->micro[i];
        int64_t count = tr_batch_targets(b, r->lm);
        if (!count)
            continue;
        x->plan = tr_program_plan_for(r->p, b->n, b->S);
        if (!x->plan) {
            snprintf(x->error, sizeof x->error, "no plan holds a micro-batch of %lld × %lld", (long long)b->n,
                     (long long)b->S);
            return TR_EINVAL;
        }
        r->rng->sample_ids = b->ids;
        double share = (double)count / (double)total;
        float scaled = (float)(share * scale), part;
        int rc = tr_feed(x, r->m, r->lm, b, r->features);
        if (!rc)
            rc = tr_exec_write(x, r->loss_scale, &scaled, sizeof scaled);
        if (!rc)
            rc = tr_exec_run(x, b->n, b->S);
        if (!rc)
            rc = tr_exec_read(x, r->m->loss, &part, sizeof part);
        if (rc)
            return rc;
        *loss += share * part;
    }
    return 0;
}
