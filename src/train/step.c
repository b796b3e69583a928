/* An optimizer step's micro-batches, forward and backward (step.h). */
#include "train/step.h"

#include "core/clock.h"
#include "train/optim.h"
#include "train/ranks.h"

#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "dist/comm.h"

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
    if (m->x >= 0 || !tr_exec_holds(x, m->positions))   /* a pipeline stage past the embeddings: none */
        return 0;
    int64_t n = b->n, S = b->S;
    int32_t *pos = tr_exec_host(x, m->positions);   /* the host's view of the inputs: made there */
    for (int64_t i = 0; i < n * S; i++)
        pos[i] = (int32_t)(i % S);
    size_t cells = (size_t)(n * S);
    int rc = tr_exec_write(x, m->positions, pos, cells * sizeof(int32_t), d);
    return rc ? rc : tr_exec_holds(x, m->segments) ? tr_exec_fill(x, m->segments, 0, cells * sizeof(int32_t), d) : 0;
}

bool tr_exec_holds(const struct tr_exec *x, int v)
{
    return v >= 0 && x->plan->offset[tr_storage_of(x->g, v)] >= 0;
}

int tr_feed(struct tr_exec *x, const struct tr_model *m, int lm, const struct tr_batch *b, int64_t features,
            struct tr_diag *d)
{
    struct loaded in[3];
    int count = loaded_inputs(m, lm, b, features, in), rc;
    for (int i = 0; i < count; i++)   /* a pipeline stage's: those its nodes read */
        if (tr_exec_holds(x, in[i].v) && (rc = tr_exec_write(x, in[i].v, in[i].host, in[i].bytes, d)))
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

/* ---- pipelined: 1F1B through the stages -------------------------------------------------------- */

void tr_pipe_init(struct tr_pipe *pp, const struct tr_comm *comm, const struct tr_stages *st, int stage, int slots)
{
    *pp = (struct tr_pipe){.comm = comm, .st = st, .stage = stage, .slots = slots};
    for (int i = 0; i < st->ntransfers; i++)
        pp->nforward += st->transfers[i].from == stage && st->transfers[i].part == TR_PART_FORWARD;
    pp->sent = tr_xcalloc((size_t)(slots * pp->nforward + 1), sizeof *pp->sent);
    pp->copies = tr_xcalloc((size_t)(slots * pp->nforward + 1), sizeof *pp->copies);
    pp->copy_bytes = tr_xcalloc((size_t)(slots * pp->nforward + 1), sizeof *pp->copy_bytes);
}

void tr_pipe_free(struct tr_pipe *pp)
{
    for (int i = 0; pp->copies && i < pp->slots * pp->nforward; i++)
        free(pp->copies[i]);
    free(pp->sent), free(pp->copies), free(pp->copy_bytes), free(pp->parts);
    memset(pp, 0, sizeof *pp);
}

/* A wait for the neighbours since began: counted, and a span in the trace while one records. */
static void waited(struct tr_pipe *pp, const char *what, double began)
{
    double now = tr_now();
    pp->waited += now - began;
    if (pp->profile)
        tr_exec_profile_span(pp->profile, what, pp->step, began, now);
}

/* A transfer's bytes at (B, S): its value's, exactly (both ends count them alike). */
static size_t transfer_bytes(const struct tr_exec *x, int v, int64_t B, int64_t S)
{
    const struct tr_value *val = &x->g->values[v];
    return (size_t)tr_dim_eval(tr_shape_numel(&val->shape), B, S) * tr_dtype_size(val->dtype);
}

/* What this stage receives in part, into its slots (a host-visible backend's memory itself). */
static int receive(struct tr_pipe *pp, struct tr_exec *x, int part, int64_t B, int64_t S, struct tr_diag *d)
{
    double began = tr_now();
    int rc = 0;
    for (int i = 0; i < pp->st->ntransfers && !rc; i++) {
        const struct tr_transfer *t = &pp->st->transfers[i];
        if (t->to == pp->stage && t->part == part)
            rc = tr_comm_recv(pp->comm, tr_exec_data(x, t->value), transfer_bytes(x, t->value, B, S), t->from, i,
                              part == TR_PART_FORWARD ? "receiving activations from the stage before"
                                                      : "receiving gradients from the stage after", d);
    }
    waited(pp, part == TR_PART_FORWARD ? "pipeline: receive activations" : "pipeline: receive gradients", began);
    return rc;
}

/* What this stage sends in part: the forward's left in flight in slot's requests (its values
 * stay in the stash until the slot's backward), the backward's waited for (the next part may
 * write over them). */
static int send(struct tr_pipe *pp, struct tr_exec *x, int part, int slot, int64_t B, int64_t S, struct tr_diag *d)
{
    int rc = 0;
    for (int i = 0, k = 0; i < pp->st->ntransfers && !rc; i++) {
        const struct tr_transfer *t = &pp->st->transfers[i];
        if (t->from != pp->stage || t->part != part)
            continue;
        struct tr_comm_request one, *r = part == TR_PART_FORWARD ? &pp->sent[slot * pp->nforward + k++] : &one;
        size_t bytes = transfer_bytes(x, t->value, B, S);
        rc = tr_comm_send(pp->comm, tr_exec_data(x, t->value), bytes, t->to, i, r, d);
        pp->sent_bytes += (double)bytes;
        if (!rc && part == TR_PART_BACKWARD) {
            double began = tr_now();
            rc = tr_comm_sent(pp->comm, r, d);
            waited(pp, "pipeline: send gradients", began);
        }
    }
    return rc;
}

/* The forward's sends of slot, done: before its backward writes over them. */
static int sends_done(struct tr_pipe *pp, int slot, struct tr_diag *d)
{
    double began = tr_now();
    int rc = 0;
    for (int k = 0; k < pp->nforward && !rc; k++)
        rc = tr_comm_sent(pp->comm, &pp->sent[slot * pp->nforward + k], d);
    waited(pp, "pipeline: send activations", began);
    return rc;
}

static int run_part(struct tr_pipe *pp, struct tr_exec *x, int64_t B, int64_t S, int from, int to, struct tr_diag *d)
{
    double began = tr_now();
    int rc = tr_exec_run_part(x, B, S, from, to, d);
    pp->ran += tr_now() - began;
    return rc;
}

int tr_pipe_forward(struct tr_pipe *pp, struct tr_exec *x, int64_t B, int64_t S, struct tr_diag *d)
{
    int rc = receive(pp, x, TR_PART_FORWARD, B, S, d);
    if (!rc)
        rc = run_part(pp, x, B, S, 0, x->n, d);
    int turn = pp->turn++ % 2;
    if (!rc)   /* the sends of two batches ago are done: their copies take this batch's */
        rc = sends_done(pp, turn, d);
    for (int i = 0, k = 0; i < pp->st->ntransfers && !rc; i++) {
        const struct tr_transfer *t = &pp->st->transfers[i];
        if (t->from != pp->stage || t->part != TR_PART_FORWARD)
            continue;
        size_t bytes = transfer_bytes(x, t->value, B, S), at = (size_t)(turn * pp->nforward + k++);
        if (pp->copy_bytes[at] < bytes) {
            free(pp->copies[at]);
            pp->copies[at] = tr_xmalloc(bytes);
            pp->copy_bytes[at] = bytes;
        }
        rc = tr_exec_read(x, t->value, pp->copies[at], bytes, d);
        if (!rc)
            rc = tr_comm_send(pp->comm, pp->copies[at], bytes, t->to, i, &pp->sent[at], d);
        pp->sent_bytes += (double)bytes;
    }
    return rc;
}

int tr_pipe_drain(struct tr_pipe *pp, struct tr_diag *d)
{
    int rc = 0;
    for (int turn = 0; turn < 2 && !rc && pp->copies; turn++)
        rc = sends_done(pp, turn, d);
    return rc;
}

/* Micro-batch b's forward on this stage, in slot: its inputs, what it receives, its nodes, its
 * loss (the last stage's) weighted by share, what it sends. */
static int pipe_forward(const struct tr_step_runner *r, const struct tr_batch *b, int slot, float scaled, double share,
                        double *loss, struct tr_diag *d)
{
    struct tr_exec *x = r->x;
    struct tr_pipe *pp = r->pipe;
    x->plan = tr_program_slot_plan(r->p, b->n, b->S, slot);
    if (!x->plan)
        return tr_fail(d, TR_EINVAL, "no plan holds a micro-batch of %lld × %lld", (long long)b->n, (long long)b->S);
    r->rng->sample_ids = b->ids;
    int rc = tr_feed(x, r->m, r->lm, b, r->features, d);
    if (!rc && tr_exec_holds(x, r->loss_scale))
        rc = tr_exec_write(x, r->loss_scale, &scaled, sizeof scaled, d);
    if (!rc)
        rc = receive(pp, x, TR_PART_FORWARD, b->n, b->S, d);
    if (!rc)
        rc = run_part(pp, x, b->n, b->S, 0, r->p->split, d);
    float part = 0;
    if (!rc && tr_exec_holds(x, r->m->loss) && !(rc = tr_exec_read(x, r->m->loss, &part, sizeof part, d)))
        *loss += share * part;
    if (!rc)
        rc = send(pp, x, TR_PART_FORWARD, slot, b->n, b->S, d);
    if (++pp->in_flight > pp->in_flight_peak)
        pp->in_flight_peak = pp->in_flight;
    return rc;
}

/* Micro-batch b's backward on this stage, from slot. */
static int pipe_backward(const struct tr_step_runner *r, const struct tr_batch *b, int slot, struct tr_diag *d)
{
    struct tr_exec *x = r->x;
    struct tr_pipe *pp = r->pipe;
    x->plan = tr_program_slot_plan(r->p, b->n, b->S, slot);
    r->rng->sample_ids = b->ids;   /* recomputation draws the forward's dropout masks again */
    int rc = sends_done(pp, slot, d);
    if (!rc)
        rc = receive(pp, x, TR_PART_BACKWARD, b->n, b->S, d);
    if (!rc)
        rc = run_part(pp, x, b->n, b->S, r->p->split, r->p->n, d);
    if (!rc)
        rc = send(pp, x, TR_PART_BACKWARD, slot, b->n, b->S, d);
    pp->in_flight--;
    return rc;
}

/* The gradients of weights several stages read (GPT's tied embedding), a piece at a time
 * (TR_PIPE_PIECE floats): each holder's piece sent to the others, and every holder left with the
 * pieces summed in stage order (the same bits on each). */
static int shared_sums(const struct tr_step_runner *r, struct tr_diag *d)
{
    struct tr_pipe *pp = r->pipe;
    struct tr_exec *x = r->x;
    int rc = 0;
    for (int i = 0; i < pp->st->nshared && !rc; i++) {
        uint64_t on = pp->st->shared_on[i];
        if (!(on >> pp->stage & 1))
            continue;
        int grad = x->g->values[pp->st->shared[i]].grad, holders = __builtin_popcountll(on), tag = pp->st->ntransfers;
        size_t n = (size_t)tr_dim_eval(tr_shape_numel(&x->g->values[grad].shape), 1, 1);
        float *mine = tr_exec_data(x, grad);
        if (pp->nparts < holders) {
            free(pp->parts);
            pp->parts = tr_xmalloc((size_t)holders * TR_PIPE_PIECE * sizeof *pp->parts);
            pp->nparts = holders;
        }
        struct tr_comm_request sent[TR_MAX_STAGES];
        for (size_t at = 0; at < n && !rc; at += TR_PIPE_PIECE) {
            size_t m = n - at < TR_PIPE_PIECE ? n - at : TR_PIPE_PIECE;
            int k = 0, nsent = 0;
            for (int h = 0; h < pp->st->count && !rc; h++)
                if (on >> h & 1 && h != pp->stage)
                    rc = tr_comm_send(pp->comm, mine + at, m * sizeof *mine, h, tag, &sent[nsent++], d);
            for (int h = 0; h < pp->st->count && !rc; h++) {
                if (!(on >> h & 1))
                    continue;
                float *part = pp->parts + (size_t)k++ * TR_PIPE_PIECE;
                if (h == pp->stage)
                    memcpy(part, mine + at, m * sizeof *mine);
                else
                    rc = tr_comm_recv(pp->comm, part, m * sizeof *mine, h, tag, "summing a shared weight's gradient", d);
            }
            for (int j = 0; j < nsent; j++)   /* before the sums write over what they send */
                rc = rc ? rc : tr_comm_sent(pp->comm, &sent[j], d);
            for (size_t e = 0; !rc && e < m; e++) {
                float sum = pp->parts[e];
                for (int h = 1; h < holders; h++)
                    sum += pp->parts[(size_t)h * TR_PIPE_PIECE + e];
                mine[at + e] = sum;
            }
        }
    }
    return rc;
}

static int forward_of(const struct tr_step_runner *r, const struct tr_step *st, int i, int slot, double scale,
                      int64_t total, double *loss, struct tr_diag *d)
{
    const struct tr_batch *mb = &st->micro[i];
    double share = (double)tr_batch_targets(mb, r->lm) / (double)total;
    return pipe_forward(r, mb, slot, (float)(share * scale), share, loss, d);
}

/* The step's micro-batches 1F1B: the first stage P − 1 forwards ahead (the last none), then one
 * forward and one backward by turns, then the backwards left. */
static int pipelined(const struct tr_step_runner *r, const struct tr_step *st, int lo, int hi, double scale,
                     int64_t total, double *loss, bool *ran, struct tr_diag *d)
{
    int *list = tr_xmalloc((size_t)(hi - lo + 1) * sizeof *list), m = 0;
    for (int i = runnable(st, lo, hi, r->lm); i < hi; i = runnable(st, i + 1, hi, r->lm))
        list[m++] = i;
    *ran = m > 0;
    struct tr_pipe *pp = r->pipe;
    pp->step = (int64_t)r->rng->step;
    int slots = r->p->slots, ahead = pp->st->count - pp->stage - 1, rc = 0;
    ahead = ahead < m ? ahead : m;
    int f = 0, b = 0;
    for (; f < ahead && f < slots && !rc; f++)
        rc = forward_of(r, st, list[f], f % slots, scale, total, loss, d);
    while (b < m && !rc) {
        if (f < m && f - b < slots) {
            rc = forward_of(r, st, list[f], f % slots, scale, total, loss, d);
            f++;
        }
        if (!rc) {
            rc = pipe_backward(r, &st->micro[list[b]], b % slots, d);
            b++;
        }
    }
    free(list);
    return rc ? rc : shared_sums(r, d);
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
    if (r->pipe) {
        rc = pipelined(r, st, lo, hi, scale, total, loss, ran, d);
        return !rc && r->sequence ? tr_ranks_sum_partial(r->sequence, x, d) : rc;
    }
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
        if (!rc && after >= hi && r->offload)
            rc = tr_optim_arm(r->offload, d);
        if (!rc)
            rc = tr_exec_run(x, b->n, b->S, d);
        if (!rc && after >= hi && r->offload)
            rc = tr_optim_sent(r->offload, d);
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
    return !rc && r->sequence ? tr_ranks_sum_partial(r->sequence, x, d) : rc;
}
