/* The training loop (loop.h): the loader's steps through forward, backward and the update
 * (fp16's unscaling, clipping, the optimizer), and around each step what the recipe asks — a
 * metrics line, an evaluation, a checkpoint, early stopping — and a signal's clean stop. */
#include "train/loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/stop.h"
#include "data/loader.h"
#include "graph/memplan.h"
#include "graph/ops.h"
#include "plan/device.h"
#include "plan/plan.h"
#include "recipe/schema.h"
#include "train/checkpoint.h"
#include "train/step.h"
#include "train/trim.h"
#include "train/whole.h"

void tr_loop_init(struct tr_loop *l, const struct tr_recipe *r, const struct tr_data *data, double started,
                  const struct tr_comm *comm)
{
    int64_t per_epoch = (data->train.n + r->train.batch_size - 1) / r->train.batch_size;
    *l = (struct tr_loop){.total_steps = r->train.steps ? r->train.steps : r->train.epochs * per_epoch,
                          .deadline = r->budget.time > 0 ? started + r->budget.time : 0, .checkpointed = -1,
                          .comm = comm};
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

/* The trainer's state in a checkpoint: early stopping's, fp16's loss scale, and EVAL_PENDING
 * when a signal cut the validation after its step short (a resume does it first). */
enum { STATE_SIZE = 320 };
#define EVAL_PENDING "eval_pending"

/* Rank 0's part of a checkpoint (or the only process's): the files. */
static int write_checkpoint(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f,
                            const struct tr_recipe *r, const char *dir, int64_t step, int rc, struct tr_diag *d)
{
    char state[STATE_SIZE], scaler[128];
    tr_scaler_format(&s->scaler, scaler, sizeof scaler);
    snprintf(state, sizeof state, "early_stop best=%.17g best_step=%lld bad=%lld stopped=%d %s%s", l->early.best,
             (long long)l->early.best_step, (long long)l->early.bad, l->early.stopped, scaler,
             l->eval_pending ? " " EVAL_PENDING : "");
    /* What the checkpoint says happened is on disk before it is: the log, metrics.jsonl and
     * the events up to this step are synced first, so a crash between the two never leaves a
     * checkpoint ahead of them (a resume cuts them back to its step: tr_resume_trim). */
    rc = rc ? rc : tr_run_folder_sync(f, d);
    if (!rc && f->record)   /* how long they were: a resume from this checkpoint cuts them back */
        tr_run_folder_note(f, "checkpointed", tr_trim_mark(f, step));
    struct tr_diag why = {0};
    if (tr_session_spread(s)) {   /* a tensor at a time from the ranks; after a failure here, taken and dropped */
        int wrote = tr_whole_write(s, rc ? NULL : dir, step, r->name, state, rc ? &why : d);
        rc = rc ? rc : wrote;
    } else if (!rc && tr_checkpoint_write(dir, &s->train.x, &s->optim, step, r->name, state, &why))
        rc = tr_fail_because(d, TR_EFAIL, &why, "checkpoint");
    tr_diag_free(&why);
    return rc;
}

int tr_loop_checkpoint(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, const struct tr_recipe *r,
                       int64_t step, struct tr_diag *d)
{
    double began = tr_now();
    struct tr_path dir;
    if (tr_path_set(&dir, d, "%s/checkpoints", f->dir.s))
        return TR_EINVAL;
    /* across ranks: every rank holds the same parameters, rank 0 writes them, all learn how it went */
    int rc = tr_ranks_same_params(&s->data_comm, &s->train.x, step, d);   /* pipelined: a stage's */
    if (!rc)   /* sharded: the optimizer's state (ZeRO 3: and the parameters) whole on rank 0, for the file */
        rc = tr_optim_gather(&s->optim, d);
    if (!f->silent)
        rc = write_checkpoint(l, s, f, r, dir.s, step, rc, d);
    else if (!rc && tr_session_spread(s))   /* the other ranks of data rank 0: their tensors to it */
        rc = tr_whole_write(s, NULL, step, NULL, NULL, d);
    tr_optim_release(&s->optim);
    if (l->comm->world > 1)
        rc = tr_comm_agree(l->comm, rc, "writing the checkpoint", d);
    if (!rc)
        l->checkpointed = step;
    l->timer.spent[TR_TIME_CHECKPOINT] += tr_now() - began;
    return rc;
}

int tr_loop_last_checkpoint(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, const struct tr_recipe *r,
                            int64_t step, struct tr_diag *d)
{
    return step == l->checkpointed ? 0 : tr_loop_checkpoint(l, s, f, r, step, d);
}

int tr_loop_resume(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, int64_t *start,
                   struct tr_diag *d)
{
    struct tr_path dir;
    char warn[1024], state[STATE_SIZE];
    if (tr_path_set(&dir, d, "%s/checkpoints", f->dir.s))
        return TR_EINVAL;
    struct tr_diag why = {0};
    struct tr_checkpoint_layout whole = tr_whole_layout(s);   /* pipelined: left open, dealt to the stages
                                                               * tensor by tensor (tr_loop_share_resume) */
    if (tr_session_spread(s) ? tr_checkpoint_resume_open(dir.s, &whole, &l->resumed, start, &s->optim.step, state,
                                                         sizeof state, warn, sizeof warn, &why)
                             : tr_checkpoint_resume(dir.s, &s->train.x, &s->optim, start, state, sizeof state, warn,
                                                    sizeof warn, &why))
        return tr_fail_because(d, why.code == TR_EINVAL ? TR_EINVAL : TR_EFAIL, &why, "resume");   /* refused: 2 */
    long long best_step, bad;
    int stopped;
    if (*start && sscanf(state, "early_stop best=%lf best_step=%lld bad=%lld stopped=%d", &l->early.best,
                         &best_step, &bad, &stopped) == 4) {
        l->early.best_step = best_step, l->early.bad = bad, l->early.stopped = stopped;
        if (stopped)   /* the run had ended early: it is finished where it stopped */
            l->total_steps = *start;
    }
    l->eval_pending = *start && strstr(state, " " EVAL_PENDING) != NULL;
    if (*start)
        l->checkpointed = *start;
    if (*start && s->scaler.on && tr_scaler_parse(&s->scaler, state))
        tr_run_folder_say(f, "warning: the checkpoint keeps no fp16 loss scale; starting again from %g\n",
                          s->scaler.scale);
    if (*warn)
        tr_run_folder_say(f, "warning: skipped damaged checkpoints: %s\n", warn);
    if (tr_trim_after(f, *start, &why))   /* what the interrupted process logged past its checkpoint */
        tr_run_folder_say(f, "warning: %s; steps after %lld may be logged twice\n", tr_diag_last(&why),
                          (long long)*start);
    tr_diag_free(&why);
    tr_run_folder_say(f, "resuming %s at step %lld of %lld\n", f->dir.s, (long long)*start, (long long)l->total_steps);
    return 0;
}

int tr_loop_share_resume(struct tr_loop *l, struct tr_session *s, int64_t *start, struct tr_diag *d)
{
    const struct tr_comm *c = l->comm;
    if (c->world == 1)
        return 0;
    struct shared {
        int64_t start, total_steps, checkpointed, optimizer_steps;
        bool eval_pending;
        struct { double best; int64_t best_step, bad; int stopped; } early;
        struct tr_scaler scaler;
    } state = {*start, l->total_steps, l->checkpointed, s->optim.step, l->eval_pending,
               {l->early.best, l->early.best_step, l->early.bad, l->early.stopped}, s->scaler};
    int rc = tr_comm_broadcast(c, &state, sizeof state, d);
    if (tr_session_spread(s)) {   /* each rank what its stage holds (its slice) of rank 0's checkpoint */
        if (!rc && state.start)
            rc = tr_whole_scatter(s, &l->resumed, d);
        tr_checkpoint_close(&l->resumed);
    } else if (!rc && state.start) {
        /* rank 0's parameters to every rank (ZeRO 3: its own part of them, in the share below) */
        if (!s->train.x.shard.fill)
            rc = tr_ranks_broadcast_region(c, s->be, s->train.x.base[TR_PARAM], s->train.x.region_bytes[TR_PARAM], d);
        if (!rc && s->optim.comm) {   /* sharded: each rank keeps its part of rank 0's (ZeRO 3: of its
                                       * parameters too) */
            rc = tr_optim_share(&s->optim, d);
            tr_optim_release(&s->optim);
        } else if (!rc) {
            rc = tr_ranks_broadcast_region(c, s->be, (char *)s->optim.state, s->optim.state_bytes, d);
        }
    }
    if (rc || c->rank == 0)
        return rc;
    *start = state.start;
    l->total_steps = state.total_steps, l->checkpointed = state.checkpointed, l->eval_pending = state.eval_pending;
    l->early.best = state.early.best, l->early.best_step = state.early.best_step, l->early.bad = state.early.bad;
    l->early.stopped = state.early.stopped;
    s->optim.step = state.optimizer_steps;
    s->scaler = state.scaler;
    return 0;
}

/* ---- one step ------------------------------------------------------------------------------------ */

struct step_outcome {
    double loss, grad_norm;
    bool skipped;              /* fp16's gradients overflowed: no update, no norm */
};

/* fp16: the gradients unscaled and checked in one pass; an overflow skips the step. */
static int unscale(struct tr_session *s, struct tr_run_folder *f, int64_t t, struct step_outcome *o,
                   struct tr_diag *d)
{
    struct tr_diag why = {0};
    bool finite = tr_grad_unscale(&s->optim, (float)(1 / s->scaler.scale), &why);
    if (why.n)
        return tr_fail_because(d, TR_EFAIL, &why, "step %lld: unscaling the gradients", (long long)t);
    double scale = s->scaler.scale;
    switch (tr_scaler_update(&s->scaler, !finite)) {
    case TR_SCALER_STEP:
        break;
    case TR_SCALER_SKIP:
        tr_run_folder_say(f, "step %lld: fp16 gradients overflowed at loss scale %g; step skipped, scale now %g\n",
                          (long long)t, scale, s->scaler.scale);
        o->skipped = true;
        break;
    case TR_SCALER_COLLAPSED:
        return tr_fail(d, TR_EDIVERGED, "step %lld: fp16 gradients overflow even at loss scale %g, "
                       "below optimize.loss_scale.min %g: the model's values outgrow fp16; use "
                       "optimize.amp=bf16, lower train.optimizer.lr or set train.grad_clip", (long long)t,
                       scale, s->scaler.min);
    }
    return 0;
}

/* The update after a step's gradients: fp16's unscaling, clipping, the optimizer. */
static int update(struct tr_session *s, struct tr_run_folder *f, const struct tr_recipe *r, int64_t t,
                  int64_t total, struct step_outcome *o, struct tr_diag *d)
{
    int rc = s->scaler.on ? unscale(s, f, t, o, d) : 0;
    if (rc || o->skipped)
        return rc;
    /* One pass over the gradients: their norm (clipping them) is NaN or Inf exactly when one of
     * them is; only then is the culprit looked for. */
    struct tr_diag why = {0};
    o->grad_norm = tr_grad_clip(&s->optim, r->train.grad_clip, &why);
    if (why.n)   /* the device failed, not the gradients */
        return tr_fail_because(d, TR_EFAIL, &why, "step %lld: the gradients' norm", (long long)t);
    if (!isfinite(o->grad_norm)) {
        int bad = tr_grad_first_nonfinite(&s->optim);
        return tr_fail(d, TR_EDIVERGED, "step %lld: the gradient of %s holds NaN or Inf", (long long)t,
                       bad >= 0 ? s->train.b.g.values[bad].name : "a parameter");
    }
    if (tr_optim_step(&s->optim, tr_schedule_lr(r, t, total), &why) ||
        tr_backend_synchronize(s->train.x.be, &why))   /* the step's faults surface in the step */
        return tr_fail_because(d, TR_EFAIL, &why, "step %lld: the optimizer", (long long)t);
    return 0;
}

#define ALL_REDUCE "all-reduce gradients"   /* the span of a step's collectives in the trace */

/* What the steps of one tr_loop_run share. */
struct loop_run {
    struct tr_loop *l;
    struct tr_session *s;
    struct tr_run_folder *f;
    const struct tr_recipe *r;
    const struct tr_data *data;
    struct tr_train_result *res;
    struct tr_diag *d;
    struct tr_loader *loader;
    int64_t start, log_every;
    double began, last, waited;
    struct { int64_t samples, tokens, slots, micro, steps; } since;   /* since the last logged line */
};

/* ---- traces (the recipe's profile: section; report/trace.h) --------------------------------------- */

/* A span of step t from began to now, kept while the step is traced. */
static void span(struct loop_run *c, const char *name, int64_t t, double began)
{
    tr_exec_profile_span(&c->l->profile, name, t, began, tr_now());
}

/* Whether step t is traced: the executor's hook keeps its nodes from here. */
static enum tr_trace_action trace_begin(struct loop_run *c, int64_t t)
{
    enum tr_trace_action a = tr_trace_action(&c->l->trace.schedule, t - c->start - 1);
    struct tr_exec_profile *p = &c->l->profile;
    if (a != TR_TRACE_NONE && !p->recording)
        c->l->trace.first = t;
    p->recording = a != TR_TRACE_NONE;
    return a;
}

/* Across ranks, for the report's critical path: each rank's seconds in the kept steps running
 * nodes and in the gradients' all-reduce (its wait for the slowest rank included), gathered;
 * *ranks: [{rank, compute_seconds, all_reduce_seconds}], NULL alone. */
static int rank_times(struct loop_run *c, json_t **ranks)
{
    const struct tr_comm *comm = c->l->comm;
    const struct tr_exec_profile *p = &c->l->profile;
    *ranks = NULL;
    if (comm->world == 1)
        return 0;
    double mine[2] = {0, 0}, *all = tr_xcalloc((size_t)comm->world * 2, sizeof *all);
    for (int64_t i = 0; i < p->nevents; i++)
        if (p->events[i].node >= 0)
            mine[0] += p->events[i].seconds;
        else if (p->events[i].node == TR_EVENT_SPAN && !strcmp(p->events[i].name, ALL_REDUCE))
            mine[1] += p->events[i].seconds;
    int rc = tr_comm_gather_doubles(comm, mine, 2, all, c->d);
    if (!rc) {
        *ranks = json_array();
        for (int r = 0; r < comm->world; r++)
            json_array_append_new(*ranks, json_pack("{si sf sf}", "rank", r, "compute_seconds", all[2 * r],
                                                    "all_reduce_seconds", all[2 * r + 1]));
    }
    free(all);
    return rc;
}

/* The kept steps into a file of the run folder's traces/, and run.json's "traces" gets its
 * name, steps and each op's count and time (what a reader of the file must find). */
static int trace_save(struct loop_run *c, int64_t last)
{
    struct tr_exec_profile *p = &c->l->profile;
    struct tr_path dir, file;
    struct tr_diag why = {0};
    double began = tr_now();
    json_t *ranks = NULL;
    int rc = rank_times(c, &ranks);   /* every rank, before any may fail to write */
    if (!rc)
        rc = tr_path_set(&dir, c->d, "%s/traces", c->f->dir.s);
    c->l->trace.info.comm_tid = c->l->reducer.comm_tid;   /* its thread started before any step */
    if (!rc && tr_trace_write(dir.s, &c->l->trace.info, p->events, p->nevents, &file, &why))
        rc = tr_fail_because(c->d, TR_EIO, &why, "profile");
    tr_diag_free(&why);
    if (rc) {
        json_decref(ranks);
        return rc;
    }
    /* per op: its runs, their time and work (FLOPs where the op table has them, else bytes), and
     * the best rate the calibration measured for its kernels at the precision it ran in */
    double seconds[TR_NOPS] = {0}, work[TR_NOPS] = {0}, peak[TR_NOPS] = {0};
    json_int_t count[TR_NOPS] = {0};
    const struct tr_graph *g = c->l->trace.info.g;
    for (int64_t i = 0; i < p->nevents; i++)
        if (p->events[i].node >= 0) {
            const struct tr_node *n = &g->nodes[p->events[i].node];
            struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
            tr_bind_shapes(g, n, p->events[i].B, p->events[i].S, in, out);
            double f = tr_ops[n->op].flops(n, in, out);
            seconds[n->op] += p->events[i].seconds, count[n->op]++;
            work[n->op] += f > 0 ? f : tr_node_bytes(n, in, out);
            peak[n->op] = fmax(peak[n->op], tr_kernel_peak_rate(&c->s->dev.kernels, n->op, tr_cost_precision(in, n->nin)));
        }
    json_t *ops = json_object();
    for (int op = 0; op < TR_NOPS; op++)
        if (count[op])
            json_object_set_new(ops, tr_op_name(op),
                                json_pack("{sI sf sf ss sf}", "count", count[op], "seconds", seconds[op], "work", work[op],
                                          "work_unit", tr_ops[op].flops != tr_cost_none ? "flop" : "byte",
                                          "calibrated_rate", peak[op]));
    const char *name = strrchr(file.s, '/');
    json_t *written = json_pack("{ss s[II] sI sf so}", "file", name ? name + 1 : file.s, "steps",
                                (json_int_t)c->l->trace.first, (json_int_t)last, "events", (json_int_t)p->nevents,
                                "write_seconds", tr_now() - began, "ops", ops);
    if (ranks)
        json_object_set_new(written, "ranks", ranks);
    json_array_append_new(c->l->trace.written, written);
    tr_run_folder_note(c->f, "traces", json_incref(c->l->trace.written));
    tr_exec_profile_clear(p);
    return 0;
}

/* After step t (what it did since began is its ProfilerStep#t): a warm-up step's events are
 * dropped, a cycle's last step writes its file. */
static int trace_end(struct loop_run *c, int64_t t, enum tr_trace_action a, double began)
{
    span(c, "ProfilerStep#", t, began);
    struct tr_alloc_stats held;
    tr_alloc_stats(&c->s->alloc, &held);
    tr_exec_profile_counter(&c->l->profile, "resident set bytes", tr_now(), tr_process_rss());
    tr_exec_profile_counter(&c->l->profile, "regions bytes", tr_now(), (int64_t)held.current);
    if (a == TR_TRACE_WARMUP) {
        tr_exec_profile_clear(&c->l->profile);
        c->l->trace.first = t + 1;
    }
    return a == TR_TRACE_RECORD_AND_SAVE ? trace_save(c, t) : 0;
}

/* One optimizer step: the loader's micro-batches, forward and backward, each loss weighted by
 * its share of the step's real count of samples or target tokens (step.h) and by fp16's loss
 * scale, then the update. */
static int train_step(struct loop_run *c, const struct tr_step *st, const struct tr_step *next, int64_t t,
                      struct step_outcome *o)
{
    struct tr_side *side = &c->s->train;
    tr_comm_watch_step(c->l->comm, t);   /* for what the watchdog says */
    struct tr_step_runner runner = {.x = &side->x, .p = &side->b.p, .m = &side->b.m, .loss_scale = side->loss_scale,
                                    .lm = side->lm, .features = tr_split_features(&c->data->train),
                                    .rng = &c->s->rng, .rank = c->s->data_comm.rank, .world = c->s->data_comm.world,
                                    .reducer = &c->l->reducer, .offload = c->s->optim.down ? &c->s->optim : NULL,
                                    .pipe = side->b.pipelined ? &c->s->pipe : NULL,
                                    .sequence = c->s->tensor_sums[0].npartial ? &c->s->tensor_sums[0] : NULL};
    struct tr_diag why = {0}, across = {0};
    bool ran = false;
    int failed = tr_step_gradients(&runner, st, next, (uint64_t)t, c->s->scaler.scale, &o->loss, &ran, &why);
    /* across ranks: the step's gradients and loss, whether any rank failed or would stop after it
     * (a rank that failed still takes part, with zeros, so that none waits for it) */
    struct tr_ranks_step *agreed = &c->l->agreed;
    /* tensor parallel: every tensor rank has the whole loss, counted once (tensor rank 0's) */
    bool counts = c->s->layout.tensor_rank == 0;
    *agreed = (struct tr_ranks_step){failed || !counts ? 0 : o->loss, tr_stop_requested() != 0,
                                     c->l->deadline && t < c->l->total_steps && tr_now() >= c->l->deadline,
                                     failed != 0};
    double reduce_began = tr_now();
    c->l->reducer.step = t;
    int reduced = tr_ranks_after_backward(&c->l->reducer, c->l->comm, c->s->optim.grads, ran && !failed, agreed, &across);
    if (c->l->comm->world > 1)   /* in the trace: the collectives, and the wait for the slower rank in them */
        span(c, ALL_REDUCE, t, reduce_began);
    if (failed) {
        tr_diag_free(&across);
        return tr_fail_because(c->d, TR_EFAIL, &why, "step %lld", (long long)t);
    }
    if (reduced || agreed->failed) {
        int rc = tr_fail_because(c->d, TR_EFAIL, &across, "step %lld: %s", (long long)t,
                                 reduced ? "the gradients across ranks" : "another rank failed (its own output says why)");
        return rc;
    }
    o->loss = agreed->loss;
    if (!isfinite(o->loss))
        return tr_fail(c->d, TR_EDIVERGED, "step %lld: the loss is %s; lower train.optimizer.lr or "
                       "set train.grad_clip", (long long)t, isnan(o->loss) ? "NaN" : "infinite");
    double began = tr_now();
    int rc = update(c->s, c->f, c->r, t, c->l->total_steps, o, c->d);
    if (!rc && tr_state_average(&c->l->reducer, c->s->train.x.base[TR_PARAM], &why))
        rc = tr_fail_because(c->d, TR_EFAIL, &why, "step %lld: batch norm's statistics across ranks", (long long)t);
    c->l->timer.spent[TR_TIME_OPTIMIZER] += tr_now() - began;
    span(c, "optimizer", t, began);
    return rc;
}

/* report.histograms_every: each parameter's values and gradient after the step's backward. */
static int histograms(struct loop_run *c, int64_t t)
{
    const struct tr_graph *g = &c->s->train.b.g;
    float *host = NULL;
    int rc = 0;
    for (int v = 0; v < g->nvalues && !rc; v++) {
        const struct tr_value *val = &g->values[v];
        if (val->kind != TR_PARAM)
            continue;
        int64_t n = tr_dim_eval(tr_shape_numel(&val->shape), 1, 1);
        char tag[sizeof val->name + 16];
        host = tr_xrealloc(host, (size_t)(n ? n : 1) * sizeof *host);
        const int of[2] = {v, val->grad};
        /* sharded (ZeRO 1, 2), a rank holds the summed gradients of its own part only: weights
         * alone; ZeRO 3, its own part of the weights too: neither */
        int kinds = c->s->train.x.shard.fill ? 0 : c->s->optim.comm ? 1 : 2;
        for (int i = 0; i < kinds && !rc; i++) {
            struct tr_diag why = {0};
            if (tr_exec_read(&c->s->train.x, of[i], host, (size_t)n * sizeof *host, &why))
                rc = tr_fail_because(c->d, TR_EFAIL, &why, "histograms");
            snprintf(tag, sizeof tag, "%s/%s", i ? "grads" : "weights", val->name);
            if (!rc)
                tr_events_histogram(&c->f->events, tag, t, host, n);
        }
    }
    free(host);
    tr_events_tick(&c->f->events);
    return rc;
}

/* ---- around each step -------------------------------------------------------------------------- */

/* On a terminal: one line redrawn in place, at most ten times a second — step, a bar, the
 * loss, throughput and the time left. Cron and pipes get only the periodic lines. */
static void progress(struct loop_run *c, int64_t t, double loss)
{
    double now_s = tr_now();
    int64_t total = c->l->total_steps;
    if (!c->f->tty || c->f->quiet || (now_s - c->l->bar_drawn < 0.1 && t < total))
        return;
    c->l->bar_drawn = now_s;
    double done = (double)(t - c->start), rate = done / (now_s - c->began + 1e-9);
    double left = rate > 0 ? (double)(total - t) / rate : 0;
    char bar[21];
    int filled = (int)(20 * t / total);
    for (int i = 0; i < 20; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[20] = '\0';
    printf("\r\033[Kstep %lld/%lld [%s] loss %.4f  %.0f samples/s  ETA %d:%02d", (long long)t, (long long)total, bar,
           loss, rate * (double)(c->s->k.micro * c->s->k.accumulation), (int)(left / 60), (int)left % 60);
    fflush(stdout);
}

static void set_real(json_t *line, const char *key, double value)
{
    json_object_set_new(line, key, json_real(value));
}

/* The sampler's means since the last line (report.monitor_every), as monitor/… metrics. */
static void monitor_metrics(struct tr_monitor *m, json_t *line)
{
    struct tr_monitor_means s;
    tr_monitor_take(m, &s);
    if (!s.n)
        return;
    set_real(line, "monitor/cpu_utilization", s.cpu_utilization);
    set_real(line, "monitor/process_cores", s.process_cores);
    set_real(line, "monitor/cpu_mhz", s.cpu_mhz);
    set_real(line, "monitor/rss", s.rss);
    static const char *const names[5] = {"utilization", "memory_used", "power", "temperature", "sm_clock"};
    for (int d = 0; d < s.gpus; d++) {
        double v[5] = {s.gpu[d].utilization, s.gpu[d].memory_used, s.gpu[d].power, s.gpu[d].temperature,
                       s.gpu[d].sm_clock};
        for (int i = 0; i < 5; i++) {
            char tag[48];
            snprintf(tag, sizeof tag, "monitor/gpu%d/%s", d, names[i]);
            set_real(line, tag, v[i]);
        }
    }
}

/* The periodic line: the log's words and metrics.jsonl's values (loss, throughput, padding,
 * memory, the loss scale, where the time went, and the sampler's readings). */
static void log_line(struct loop_run *c, int64_t t, const struct step_outcome *o, const int64_t gauge[TR_NGAUGES])
{
    int64_t total = c->l->total_steps;
    double lr = tr_schedule_lr(c->r, t, total), elapsed = tr_now() - c->last;
    double wait = tr_loader_wait_seconds(c->loader) - c->waited;
    struct tr_alloc_stats mem;
    tr_alloc_stats(&c->s->alloc, &mem);
    tr_run_folder_say(c->f, "step %lld/%lld  loss %.4f  lr %.3g  %.0f samples/s\n", (long long)t, (long long)total,
                      o->loss, lr, (double)c->since.samples / elapsed);
    json_t *line = json_pack("{sIsfsf}", "step", (json_int_t)t, "train/loss", o->loss, "train/lr", lr);
    if (!o->skipped)   /* a skipped step's gradients overflowed: it has no norm */
        set_real(line, "train/grad_norm", o->grad_norm);
    set_real(line, "train/samples_per_s", (double)c->since.samples / elapsed);
    set_real(line, "train/micro_steps", (double)c->since.micro / (double)c->since.steps);
    if (c->since.tokens) {   /* text: real tokens, and the padding they were batched with */
        set_real(line, "train/tokens_per_s", (double)c->since.tokens / elapsed);
        set_real(line, "data/padding_fraction", (double)(c->since.slots - c->since.tokens) / (double)c->since.tokens);
    }
    set_real(line, "data/wait_fraction", elapsed > 0 ? wait / elapsed : 0.0);
    set_real(line, "memory/allocated", (double)mem.current);
    set_real(line, "memory/heap", (double)gauge[TR_GAUGE_HEAP]);
    set_real(line, "memory/rss", (double)gauge[TR_GAUGE_RSS]);
    set_real(line, "memory/peak", (double)tr_session_footprint(c->s));
    set_real(line, "memory/predicted_peak", (double)tr_session_chosen(c->s)->peak);
    set_real(line, "memory/predicted_footprint", (double)tr_session_chosen(c->s)->footprint);
    if (c->s->scaler.on) {
        set_real(line, "train/loss_scale", c->s->scaler.scale);
        set_real(line, "train/skipped_steps", (double)c->s->scaler.skipped);
    }
    monitor_metrics(c->l->monitor, line);
    if (t < total) {   /* the last step's time goes out with what follows it */
        tr_timer_line(&c->l->timer, line, tr_now(), tr_loader_wait_seconds(c->loader));
        c->l->timer_step = t;
    }
    tr_run_folder_metric(c->f, line, true);
    memset(&c->since, 0, sizeof c->since);
    c->waited += wait;
    c->last = tr_now();
}

/* train.early_stop: after an evaluation, has the metric gone `patience` evaluations without
 * improving by more than min_delta? */
static bool should_stop(struct loop_run *c, int64_t t)
{
    const struct tr_recipe *r = c->r;
    struct tr_loop *l = c->l;
    if (r->train.early_stop.metric == TR_STOP_NONE)
        return false;
    int accuracy = r->train.early_stop.metric == TR_STOP_EVAL_ACCURACY;
    double v = accuracy ? c->res->valid.accuracy : c->res->valid.loss;
    int maximise = r->train.early_stop.mode == TR_STOP_MAX || (r->train.early_stop.mode == TR_STOP_AUTO && accuracy);
    double delta = r->train.early_stop.min_delta;
    if (l->early.best_step == 0 || (maximise ? v > l->early.best + delta : v < l->early.best - delta)) {
        l->early.best = v, l->early.best_step = t, l->early.bad = 0;
        return false;
    }
    if (++l->early.bad < r->train.early_stop.patience)
        return false;
    tr_run_folder_say(c->f, "early stop at step %lld: %s has not improved for %lld evaluations (best %.4f at step "
                      "%lld)\n", (long long)t, accuracy ? "eval/accuracy" : "eval/loss", (long long)l->early.bad,
                      l->early.best, (long long)l->early.best_step);
    l->early.stopped = 1;
    return true;
}

/* The validation split's evaluation after step t, logged; *stop when early stopping ends the
 * run (stop NULL: an evaluation early stopping does not count, budget.time's last one). */
static int validate(struct loop_run *c, int64_t t, bool *stop)
{
    struct tr_eval *v = &c->res->valid;
    int rc = tr_loop_evaluate(c->l, c->s, c->r, c->data, &c->data->valid, v, c->d);
    if (rc)
        return rc;
    tr_run_folder_say(c->f, "step %lld  eval loss %.4f  accuracy %.4f\n", (long long)t, v->loss, v->accuracy);
    tr_run_folder_metric(c->f, json_pack("{sIsfsfsfsf}", "step", (json_int_t)t, "eval/loss", v->loss, "eval/accuracy",
                                         v->accuracy, "eval/top5_accuracy", v->top5, "eval/perplexity", exp(v->loss)),
                         true);
    if (stop)
        *stop = should_stop(c, t);
    return 0;
}

/* A signal (SIGINT, SIGTERM, SIGHUP) after step t, or during its validation (rc
 * TR_EINTERRUPTED already, and a resume evaluates it again first): step t is checkpointed and
 * the run ends, to be resumed. */
static int stop_for_signal(struct loop_run *c, int64_t t, bool during_validation)
{
    c->l->eval_pending = during_validation;
    int rc = tr_loop_checkpoint(c->l, c->s, c->f, c->r, t, c->d);
    c->l->eval_pending = false;
    if (rc)
        return rc;
    if (during_validation)
        return TR_EINTERRUPTED;
    return tr_fail(c->d, TR_EINTERRUPTED, "stopped by %s after step %lld (checkpointed)",
                   tr_stop_signal_name(tr_stop_requested()), (long long)t);
}

/* budget.time is up after step t: checkpointed, and the validation split evaluated at t when
 * it was not just now (early stopping does not count it: a resumed run ends as an
 * uninterrupted one would); the run then evaluates its test split and reports (train.c). */
static int stop_for_time(struct loop_run *c, int64_t t, bool validated)
{
    int rc = tr_loop_checkpoint(c->l, c->s, c->f, c->r, t, c->d);
    if (!rc && !validated && c->data->valid.n)
        rc = validate(c, t, NULL);
    if (rc)
        return rc;
    return tr_fail(c->d, TR_ETIMEUP, "stopped by budget.time (%g s) after step %lld of %lld (checkpointed)",
                   c->r->budget.time, (long long)t, (long long)c->l->total_steps);
}

/* Before the first step: a signal during the start (nothing trained since the checkpoint it
 * resumed from, if any), or the validation a signal cut short before the resumed step. */
static int before_steps(struct loop_run *c, bool *stop)
{
    if (c->l->comm->world == 1 && tr_stop_requested())   /* ranks: the first step's agreement */
        return tr_fail(c->d, TR_EINTERRUPTED, "stopped by %s before step %lld",
                       tr_stop_signal_name(tr_stop_requested()), (long long)c->start + 1);
    if (!c->l->eval_pending || !c->data->valid.n)
        return 0;
    c->l->eval_pending = false;
    if (c->start < c->l->total_steps)   /* early stopping's state moves on from the checkpoint's */
        c->l->checkpointed = -1;
    int rc = validate(c, c->start, stop);
    return rc == TR_EINTERRUPTED ? stop_for_signal(c, c->start, true) : rc;
}

static void trace_open(struct loop_run *c)
{
    const struct tr_recipe *r = c->r;
    struct tr_loop *l = c->l;
    l->trace.schedule = (struct tr_trace_schedule){r->profile.skip_first, r->profile.wait, r->profile.warmup,
                                                   r->profile.active, r->profile.repeat};
    l->trace.info = (struct tr_trace_info){.g = c->s->train.x.g, .rank = l->comm->rank, .world_size = l->comm->world,
                                           .backend = l->comm->world > 1 ? "mpi" : "none",
                                           .name = r->name, .pid = (int)getpid(), .tid = (int)syscall(SYS_gettid),
                                           .device = c->s->train.x.be->device};
    tr_trace_origin(&l->trace.info);
    l->trace.written = json_array();
}

/* ---- the loop -------------------------------------------------------------------------------------- */

/* Alone, rc; across ranks, rc if every rank's is 0, else the first failing one's (a rank that
 * failed leaves the loop, so every rank leaves it after the same step). */
static int agreed(const struct loop_run *c, int rc, const char *what)
{
    return c->l->comm->world > 1 ? tr_comm_agree(c->l->comm, rc, what, c->d) : rc;
}

/* Whether the run stops after this step for a signal, or for budget.time: this process's own
 * view alone, else what the ranks agreed after the step's backward (every rank stops after the
 * same step, or one would wait for the others' gradients for ever). */
static bool signalled(const struct loop_run *c)
{
    return c->l->comm->world > 1 ? c->l->agreed.signal : tr_stop_requested() != 0;
}

static bool time_up(const struct loop_run *c)
{
    return c->l->comm->world > 1 ? c->l->agreed.time_up : c->l->deadline && tr_now() >= c->l->deadline;
}

static int run_steps(struct loop_run *c)
{
    const struct tr_recipe *r = c->r;
    int64_t total = c->l->total_steps;
    /* a device copies the next step's first inputs while this step's last micro-batch runs:
     * the loader holds two steps, and the next is taken before this one trains */
    bool ahead = tr_backend_copies_ahead(c->s->be);
    bool stop = false;
    int rc = before_steps(c, &stop);
    struct tr_step st, next;
    for (int64_t t = c->start + 1; t <= total && !rc && !stop; t++) {
        struct step_outcome o = {.loss = NAN, .grad_norm = NAN};
        struct tr_alloc_stats held;
        int64_t gauge[TR_NGAUGES];
        double step_began = tr_now();
        enum tr_trace_action traced = trace_begin(c, t);
        tr_alloc_stats(&c->s->alloc, &held);
        tr_leak_sample(&c->l->leak, t, (int64_t)held.current, gauge);
        if (ahead && t > c->start + 1)
            st = next;
        else
            tr_loader_next(c->loader, &st);
        bool has_next = ahead && t < total;
        if (has_next)
            tr_loader_next(c->loader, &next);
        span(c, "data wait", t, step_began);
        rc = train_step(c, &st, has_next ? &next : NULL, t, &o);
        tr_step_times_add(&c->l->step_times, tr_now() - step_began);
        if (!rc && r->report.histograms_every && t % r->report.histograms_every == 0 && !c->f->silent)
            rc = histograms(c, t);
        c->since.samples += st.n, c->since.tokens += st.tokens, c->since.slots += st.slots;
        c->since.micro += st.nmicro, c->since.steps++;
        c->res->train_loss = o.loss;
        if (!rc)
            progress(c, t, o.loss);
        if (!rc && (t % c->log_every == 0 || t == total))
            log_line(c, t, &o, gauge);
        bool validated = !rc && ((r->train.eval_every && t % r->train.eval_every == 0) || t == total) &&
                         c->data->valid.n;
        double eval_began = tr_now();
        if (validated)
            rc = validate(c, t, &stop);
        if (validated)
            span(c, "evaluation", t, eval_began);
        if (!rc || rc == TR_EINTERRUPTED)
            c->res->steps = t;
        if (rc == TR_EINTERRUPTED)
            rc = stop_for_signal(c, t, true);
        rc = agreed(c, rc, "logging or evaluating");   /* before the checkpoint all ranks write */
        if (stop)
            break;
        double checkpoint_began = tr_now();
        if (!rc && r->train.checkpoint_every && t % r->train.checkpoint_every == 0 && t < total) {
            rc = tr_loop_checkpoint(c->l, c->s, c->f, r, t, c->d);
            span(c, "checkpoint", t, checkpoint_began);
        }
        if (!rc)
            rc = trace_end(c, t, traced, step_began);
        rc = agreed(c, rc, "writing its trace");
        if (!rc && signalled(c) && t < total)
            rc = stop_for_signal(c, t, false);
        else if (!rc && time_up(c) && t < total)
            rc = stop_for_time(c, t, validated);
    }
    return rc;
}

/* The leak check's warm-up: until the first logged line, evaluation and checkpoint have each
 * happened once (each allocates what it keeps), and at least TR_LEAK_MIN_WARMUP steps. */
static int64_t warmup(const struct loop_run *c)
{
    const struct tr_recipe *r = c->r;
    int64_t every[3] = {c->log_every, c->data->valid.n ? r->train.eval_every : 0, r->train.checkpoint_every};
    int64_t last = c->start + TR_LEAK_MIN_WARMUP;
    for (int i = 0; i < 3; i++)
        if (every[i] > 0) {
            int64_t first = (c->start / every[i] + 1) * every[i];
            if (first < c->l->total_steps && first > last)
                last = first;
        }
    return last;
}

static int open_loader(struct loop_run *c)
{
    const struct tr_recipe *r = c->r;
    const struct tr_knobs *k = &c->s->k;
    struct tr_loader_options o = {.batch = r->train.batch_size, .micro = k->micro,
                                  .buckets = k->dynamic ? k->buckets : NULL, .nbuckets = k->dynamic ? k->nbuckets : 0,
                                  .pool = r->optimize.dynamic_batching.pool, .seed = (uint64_t)r->seed,
                                  .shuffle = r->data.shuffle, .num_workers = (int)tr_recipe_num_workers(r, 0),
                                  .prefetch = (int)r->data.prefetch_factor, .memory = c->s->be->host_memory,
                                  .hold = tr_backend_copies_ahead(c->s->be) ? 2 : 1,
                                  .seq_multiple = tr_knobs_seq_multiple(k)};
    int err = tr_loader_open(&c->loader, &c->data->train, &o, c->d);
    if (err)   /* out of memory is the host's failure (1), not the data's (4) */
        return err == TR_ENOMEM ? TR_ENOMEM : TR_EDATA;
    int64_t per_epoch = tr_loader_steps_per_epoch(c->loader);
    if (c->start)
        tr_loader_seek(c->loader, c->start / per_epoch, c->start % per_epoch);
    return 0;
}

/* Across ranks, run.json's "ranks": who they were and, for each, its peak resident set, median
 * step, seconds in the gradients' collectives (waits included), the part of them the trainer
 * waited for after the backward (all of them without overlap), in gathering the parameters
 * (ZeRO stage 1) and waiting for data, and its regions predicted and measured (sharded, they
 * differ by rank) — gathered, every rank taking part, rank 0 writing. */
enum { RANK_TIMES = 6, RANK_PIPE = RANK_TIMES + 2 * TR_NREGIONS, RANK_TENSOR = RANK_PIPE + 7,
       RANK_FIELDS = RANK_TENSOR + 4 };
static void note_ranks(struct loop_run *c)
{
    const struct tr_comm *comm = c->l->comm;
    if (comm->world == 1)
        return;
    const struct tr_grad_reducer *red = &c->l->reducer;
    double mine[RANK_FIELDS] = {(double)tr_process_peak_rss(), c->res->step_seconds, red->seconds, red->exposed,
                                tr_optim_gather_seconds(&c->s->optim), c->res->data_wait_seconds};
    struct tr_alloc_stats held;
    tr_alloc_stats(&c->s->alloc, &held);
    const struct tr_candidate *chosen = tr_session_chosen(c->s);
    for (int k = 0; k < TR_NREGIONS; k++) {
        mine[RANK_TIMES + k] = (double)chosen->regions[k];
        mine[RANK_TIMES + TR_NREGIONS + k] = (double)held.region[k].peak;
    }
    const struct tr_pipe *pp = &c->s->pipe;   /* pipelined: its stage, the micro-batches it kept, its waits */
    const struct tr_program *prog = &c->s->train.b.p;
    if (c->s->train.b.pipelined) {
        double in_use = (double)prog->region_bytes[TR_ACT] - (double)(prog->slots - pp->in_flight_peak) * (double)prog->stash_bytes;
        double pipe[7] = {c->s->layout.stage, pp->in_flight_peak, prog->slots, (double)prog->stash_bytes, in_use,
                          pp->waited, pp->ran};
        memcpy(mine + RANK_PIPE, pipe, sizeof pipe);
    }
    const struct tr_tensor_sums *sums = &c->s->tensor_sums[0];   /* tensor parallel: the training's all-reduces */
    double tensor[4] = {c->s->layout.tensor_rank, (double)sums->count, sums->bytes, sums->seconds};
    memcpy(mine + RANK_TENSOR, tensor, sizeof tensor);
    double *all = tr_xcalloc((size_t)comm->world * RANK_FIELDS, sizeof *all);
    struct tr_diag why = {0};
    if (!tr_comm_gather_doubles(comm, mine, RANK_FIELDS, all, &why)) {
        json_t *each = json_array();
        for (int k = 0; k < comm->world; k++) {
            const double *a = all + RANK_FIELDS * k;
            json_t *predicted = json_object(), *measured = json_object();
            for (int g = 0; g < TR_NREGIONS; g++) {
                json_object_set_new(predicted, tr_region_name(g), json_integer((json_int_t)a[RANK_TIMES + g]));
                json_object_set_new(measured, tr_region_name(g),
                                    json_integer((json_int_t)a[RANK_TIMES + TR_NREGIONS + g]));
            }
            json_t *one = json_pack("{si sI sf sf sf sf sf so so}", "rank", k, "peak_resident_bytes",
                                    (json_int_t)a[0], "step_seconds", a[1], "reduce_seconds", a[2],
                                    "reduce_exposed_seconds", a[3], "gather_seconds", a[4], "data_wait_seconds", a[5],
                                    "predicted_regions", predicted, "measured_regions", measured);
            const double *p = a + RANK_PIPE;
            if (c->s->train.b.pipelined)   /* the arena in use at its peak: the rest, and the stash of each
                                            * micro-batch in flight at once (1F1B: min(stages − stage, m)) */
                json_object_set_new(one, "pipeline", json_pack("{si si si sI sI sf sf sf}", "stage", (int)p[0],
                                                               "in_flight_peak", (int)p[1], "slots", (int)p[2],
                                                               "stash_bytes", (json_int_t)p[3],
                                                               "arena_in_use_peak_bytes", (json_int_t)p[4],
                                                               "waited_seconds", p[5], "ran_seconds", p[6],
                                                               "bubble", p[5] + p[6] > 0 ? p[5] / (p[5] + p[6]) : 0.0));
            const double *t = a + RANK_TENSOR;
            double steps = (double)(c->res->steps - c->start);   /* this process's */
            if (c->s->layout.tensor > 1)   /* the all-reduces of its blocks, against the forecast */
                json_object_set_new(one, "tensor", json_pack("{si sI sf sf sf sf sf}", "rank", (int)t[0], "allreduces",
                                                             (json_int_t)t[1], "allreduce_bytes", t[2],
                                                             "allreduce_seconds", t[3], "allreduce_seconds_per_step",
                                                             steps > 0 ? t[3] / steps : 0.0,
                                                             "predicted_allreduce_seconds_per_step",
                                                             tr_session_chosen(c->s)->tensor_seconds,
                                                             "predicted_allreduce_bytes_per_step",
                                                             tr_session_chosen(c->s)->tensor_bytes));
            json_array_append_new(each, one);
        }
        tr_run_folder_note(c->f, "ranks", json_pack("{si ss sI sb ss so}", "world", comm->world, "launcher",
                                                     comm->launcher, "bucket_bytes",
                                                     (json_int_t)c->r->distributed.bucket, "overlap",
                                                     red->overlap != NULL, "shard",
                                                     tr_shard_name(c->s->k.shard), "each", each));
    } else
        tr_run_folder_say(c->f, "warning: the ranks' times not gathered: %s\n", tr_diag_last(&why));
    tr_diag_free(&why);
    free(all);
}

int tr_loop_run(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, const struct tr_recipe *r,
                const struct tr_data *data, int64_t start, struct tr_train_result *res, struct tr_diag *d)
{
    struct loop_run c = {.l = l, .s = s, .f = f, .r = r, .data = data, .res = res, .d = d, .start = start};
    int rc = open_loader(&c);
    if (rc)
        return rc;
    res->steps = start;
    c.log_every = r->report.log_every ? r->report.log_every : l->total_steps / 20 > 0 ? l->total_steps / 20 : 1;
    c.began = c.last = tr_now();
    tr_timer_start(&l->timer, c.began, tr_loader_wait_seconds(c.loader));
    l->profile = (struct tr_exec_profile){.per_op = getenv("TR_PROFILE") != NULL, .phase_seconds = l->timer.phase};
    s->train.x.hook = tr_exec_profiler(&l->profile);
    /* offloaded: the gradients leave for the host as the backward writes them */
    if (tr_optim_overlap(&s->optim, &s->train.b.g, s->train.b.p.schedule, s->train.b.p.n, r->distributed.bucket))
        s->train.x.hook = tr_optim_hook(&s->optim, s->train.x.hook);
    tr_grad_reducer_init(&l->reducer, &s->data_comm, s->be, s->optim.spans, s->optim.nspans, &s->train.b.g,
                         &s->train.b.p.plans[0], r->distributed.bucket, s->k.shard);
    l->reducer.profile = &l->profile;
    s->pipe.profile = &l->profile;   /* pipelined: each wait for the stages beside a span in the traces */
    struct tr_diag why = {0};
    if (tr_grad_reducer_device(&l->reducer, &why))   /* GPU ranks: NCCL, else through host copies */
        tr_run_folder_say(f, "warning: %s\n", tr_diag_last(&why));
    else if (l->reducer.on_device)
        tr_run_folder_say(f, "ranks: the GPUs sum their gradients over NCCL\n");
    tr_diag_free(&why);
    if (tr_plan_overlap(r, l->comm->local_world, s->dev.threads) && !tr_session_spread(s)) {
        if (tr_grad_reducer_overlap(&l->reducer, &s->train.b.g, s->train.b.p.schedule, s->train.b.p.n,
                                    &s->train.b.p.plans[0]))
            s->train.x.hook = tr_grad_reducer_hook(&l->reducer, s->train.x.hook);
        else if (r->distributed.overlap == TR_SWITCH_ON)
            tr_run_folder_say(f, "distributed.overlap: the gradients are summed after the backward: %s\n",
                              !l->reducer.in_place ? "they are not in a region of their own the host sees (one "
                              "micro-batch a step keeps them in the arena; ZeRO 2; a device)"
                                                   : "MPI lets no other thread call it");
    }
    if (s->k.shard == 3 && l->comm->world > 1)
        tr_run_folder_say(f, "ZeRO 3: each parameter gathered whole %s\n", s->optim.ahead
                          ? "a block ahead of its readers, on a thread of its own (distributed.overlap)"
                          : "as its first reader is next (distributed.overlap off, or no core to spare for a thread ahead)");
    tr_leak_init(&l->leak, warmup(&c));
    trace_open(&c);
    l->monitor = tr_monitor_start(r->report.monitor_every);
    rc = run_steps(&c);
    json_t *monitored = tr_monitor_stop(l->monitor);
    l->monitor = NULL;
    if (monitored)
        tr_run_folder_note(f, "monitor", monitored);
    if (!rc && l->profile.recording && l->profile.nevents)   /* a cycle the run's end cut short */
        rc = trace_save(&c, res->steps);
    l->profile.recording = false;
    tr_exec_profile_free(&l->profile);
    json_decref(l->trace.written);
    l->trace.written = NULL;
    /* a copy ahead of a step never trained (an early stop) may still read the ring */
    if (tr_backend_synchronize(s->be, &why) && !rc)
        rc = tr_fail_because(d, TR_EFAIL, &why, "after step %lld", (long long)res->steps);
    tr_diag_free(&why);
    res->data_wait_seconds = tr_loader_wait_seconds(c.loader);
    l->timer.spent[TR_TIME_DATA] += res->data_wait_seconds - l->timer.wait_seen;
    l->timer.wait_seen = res->data_wait_seconds;
    tr_loader_close(c.loader);
    res->seconds = tr_now() - c.began;
    res->step_seconds = tr_step_times_median(&l->step_times, &res->timed_steps);
    note_ranks(&c);
    tr_grad_reducer_free(&l->reducer);
    if (l->profile.per_op)
        tr_exec_profile_print(stderr, &l->profile, res->steps - start, "step");
    return rc;
}

int tr_loop_evaluate(struct tr_loop *l, struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data,
                     const struct tr_split *split, struct tr_eval *out, struct tr_diag *d)
{
    double began = tr_now();
    const char *what = split == &data->test ? "evaluation (test split)" : "evaluation (validation split)";
    int rc = tr_evaluate(s, data, split, what, l->comm->world == 1, r->train.eval_samples, out, d);
    l->timer.spent[TR_TIME_EVAL] += tr_now() - began;
    return rc;
}

/* ---- the run's first and last lines -------------------------------------------------------------- */

void tr_loop_say_start(const struct tr_loop *l, const struct tr_session *s, struct tr_run_folder *f,
                       const struct tr_recipe *r, const struct tr_data *data, const char *init_summary)
{
    tr_run_folder_say(f, "%s: %s on %s (%lld train, %lld valid, %lld test), %lld steps of %lld, run folder %s\n",
                      r->name, tr_keys[tr_key_find("model.arch")].names[r->model.arch], data->name,
                      (long long)data->train.n, (long long)data->valid.n, (long long)data->test.n,
                      (long long)l->total_steps, (long long)r->train.batch_size, f->dir.s);
    if (*init_summary)
        tr_run_folder_say(f, "%s", init_summary);
    if (data->kind == TR_DATA_TEXT_CLASSES) {   /* what padding costs: how long the texts are */
        const struct tr_split *t = &data->train;
        tr_run_folder_say(f, "text: %lld tokens in %lld sequences; lengths p50 %lld, p90 %lld, p99 %lld, longest "
                          "%lld\n", (long long)t->ntokens, (long long)t->n, (long long)tr_text_percentile(t, 0.5),
                          (long long)tr_text_percentile(t, 0.9), (long long)tr_text_percentile(t, 0.99),
                          (long long)tr_text_longest(t));
    }
    char *lines = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&lines, &len);
    if (out) {
        tr_plan_print_run(&s->plan, &s->job, s->train.b.p.region_bytes[TR_ACT], out);
        fclose(out);
        tr_run_folder_say(f, "%s", lines);
    }
    free(lines);
    if (l->comm->world > 1 && s->layout.tensor > 1) {
        const struct tr_candidate *c = tr_session_chosen(s);
        char stages[64] = "", moved[32];
        if (s->layout.pipeline > 1)
            snprintf(stages, sizeof stages, " × %d pipeline stages", s->layout.pipeline);
        tr_format_bytes((uint64_t)c->tensor_bytes, moved);
        const char *how = c->k.sequence ? "sequence parallel: the residual stream, norms and dropouts a part of the "
                                          "sequence each, gathered before each half and reduce-scattered after it, "
                                          "forward and backward"
                                        : "an all-reduce after each half, forward and backward";
        tr_run_folder_say(f, "ranks: %d (started by %s) = %d data%s × %d tensor ranks (each block's heads and "
                          "feed-forward split over them; %s: %s a step, %.3g s of it predicted) for %lld samples a "
                          "data rank\n", l->comm->world, l->comm->launcher, s->layout.data, stages, s->layout.tensor,
                          how, moved, c->tensor_seconds, (long long)(r->train.batch_size / s->layout.data));
    } else if (l->comm->world > 1 && s->layout.pipeline > 1) {
        const struct tr_candidate *c = tr_session_chosen(s);
        char blocks[256] = "";
        for (int k = 0, used = 0; k < s->layout.pipeline && used < (int)sizeof blocks; k++)
            used += snprintf(blocks + used, sizeof blocks - (size_t)used, "%s%d–%d", k ? ", " : "", c->k.first_block[k],
                             c->k.first_block[k + 1] - 1);
        tr_run_folder_say(f, "ranks: %d (started by %s) = %d data × %d pipeline stages (blocks %s), each pipeline "
                          "running 1F1B over its share of a step's micro-batches as planned above for %lld samples; "
                          "predicted bubble %.0f%%\n", l->comm->world, l->comm->launcher, s->layout.data,
                          s->layout.pipeline, blocks, (long long)(r->train.batch_size / s->layout.data),
                          100 * c->bubble);
    } else if (l->comm->world > 1) {
        char bucket[32];
        tr_format_bytes(r->distributed.bucket, bucket);
        tr_run_folder_say(f, "ranks: %d (started by %s), each running its share of a step's micro-batches as "
                          "planned above for %lld samples; gradients summed over MPI in buckets of %s\n",
                          l->comm->world, l->comm->launcher, (long long)(r->train.batch_size / l->comm->world),
                          bucket);
    }
}

/* The leak check's verdict in the log; growth is a warning. */
static void say_leak(struct tr_run_folder *f, const struct tr_leak *leak, const json_t *verdict_json)
{
    const char *verdict = json_string_value(json_object_get(verdict_json, "verdict"));
    long long from = (long long)json_integer_value(json_object_get(verdict_json, "baseline_step"));
    long long to = (long long)json_integer_value(json_object_get(verdict_json, "last_step"));
    if (!strcmp(verdict, "too short")) {
        tr_run_folder_say(f, "leak check: not done, the run ended during warm-up (step %lld)\n",
                          (long long)leak->warmup);
        return;
    }
    if (!strcmp(verdict, "constant")) {
        tr_run_folder_say(f, "leak check: allocated bytes, heap and resident set constant from step %lld to %lld\n",
                          from, to);
        return;
    }
    for (int i = 0; i < TR_NGAUGES; i++) {
        json_t *g = json_object_get(verdict_json, tr_gauge_name(i));
        if (json_is_null(json_object_get(g, "first_grew_step")))
            continue;
        char base[32], at[32], last[32];
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "baseline")), base);
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "first_grew_value")), at);
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "last")), last);
        tr_run_folder_say(f, "warning: leak check: %s grew at step %lld: %s, from %s at step %lld (%s at step %lld)\n",
                          tr_gauge_name(i), (long long)json_integer_value(json_object_get(g, "first_grew_step")), at,
                          base, from, last, to);
    }
}

json_t *tr_loop_end(struct tr_loop *l, struct tr_run_folder *f, int64_t steps)
{
    if (!f->record)
        return NULL;
    if (l->timer.since > 0) {   /* the loop ran: the last interval, and what followed it */
        json_t *line = json_pack("{sI}", "step", (json_int_t)steps);
        tr_timer_line(&l->timer, line, tr_now(), l->timer.wait_seen);
        /* TensorBoard keeps one point a step: a run that stopped at a step whose line carried
         * the time already (early stopping) has the rest in metrics.jsonl only. */
        tr_run_folder_metric(f, line, steps > l->timer_step);
    }
    json_t *leak = tr_leak_json(&l->leak);
    say_leak(f, &l->leak, leak);
    return leak;
}
