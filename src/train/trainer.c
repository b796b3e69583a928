/* The training loop (trainer.h). The training graph and the evaluation graph are built by the
 * same model builder, so their parameters (and batch-norm statistics) sit at the same offsets:
 * both programs run on one set of regions, each region as large as the larger plan needs. */
#include "train/trainer.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/exec.h"
#include "cli/exit.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/cache.h"
#include "data/loader.h"
#include "data/sha256.h"
#include "graph/program.h"
#include "models/models.h"
#include "plan/plan.h"
#include "recipe/schema.h"
#include "report/events.h"
#include "report/tensorboard.h"
#include "report/environment.h"
#include "report/index.h"
#include "report/run_report.h"
#include "train/checkpoint.h"
#include "train/record.h"
#include "train/init.h"
#include "train/optim.h"
#include "train/promote.h"
#include "train/runs.h"
#include "train/scaler.h"
#include "train/step.h"

/* Set by SIGINT/SIGTERM, read between steps: the one piece of global state a signal needs. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

struct side {                  /* one of the two programs: training or evaluation */
    struct tr_built b;         /* its graph, model and program (plan/build.c) */
    struct tr_exec x;
    int loss_scale;
    int lm;                    /* a language model: its targets are the next tokens */
};

struct run {
    const struct tr_recipe *r;
    const struct tr_train_options *opt;
    struct tr_diag *diag;
    struct tr_data data;
    struct side train, eval;
    struct tr_allocator alloc;
    struct tr_optim optim;
    struct tr_device dev;      /* recipe device: this host, calibrated, or a GPU, measured */
    const struct tr_backend *be;   /* the device's kernels and memory */
    struct tr_plan_job job;
    struct tr_plan plan;       /* the planner's choice: plan.cand[plan.chosen] */
    struct tr_rng_ctx rng;
    int64_t micro, accumulation, total_steps;
    int64_t seq;               /* text: the longest sequence of any split (the plans' S); else 1 */
    /* The training program's plans, as the planner chose them: one (micro, seq), or with
     * dynamic batching one per length bucket — all in one arena, the largest plan's. */
    struct tr_length_bucket buckets[TR_PLAN_MAX_BUCKETS];
    int nbuckets;
    bool dynamic;
    int64_t eval_batch;        /* rows an evaluation batch takes */
    FILE *log, *metrics;
    struct tr_events events;   /* report.tensorboard; fd −1 when off */
    char dir[4096];
    struct { double best; int64_t best_step, bad; int stopped; } early;   /* train.early_stop */
    int tty;                   /* stdout is a terminal: a progress bar, redrawn in place */
    double bar_drawn;          /* when the bar was last drawn */
    char init_summary[1024];   /* model.init: what was loaded, ignored, drawn; said once the log is open */
    enum tr_dtype amp;         /* the activations' precision: TR_F32, or TR_BF16 / TR_F16 (optimize.amp) */
    struct tr_scaler scaler;   /* fp16's loss scale */
    /* optimize.checkpointing: mode (enum tr_remat_mode) in the first `blocks` of the model's
     * `of`, which made `nodes` recompute nodes */
    struct { int mode, blocks, of, nodes; } remat;
    struct tr_timer timer;     /* where the time went since the last logged line */
    int64_t timer_step;        /* the last step whose line carried the time */
    struct tr_leak leak;       /* memory at each step's start, after warm-up */
    json_t *record;            /* run.json */
    json_t *warm_start;        /* model.init.from_run: what this run started from, for run.json */
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A line for people: on stdout unless quiet, and always in log.txt. */
static void say(struct run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(struct run *run, const char *fmt, ...)
{
    va_list ap;
    if (!run->opt->quiet) {
        if (run->tty)
            fputs("\r\033[K", stdout);   /* the progress bar's line, cleared for the text */
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        fflush(stdout);
    }
    if (run->log) {
        va_start(ap, fmt);
        vfprintf(run->log, fmt, ap);
        va_end(ap);
        fflush(run->log);
    }
}

static int fail(struct run *run, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct run *run, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tr_diag_vadd(run->diag, (struct tr_where){0}, fmt, ap);
    va_end(ap);
    return status;
}

/* ---- building ------------------------------------------------------------------------------ */

static const char *arch_name(int arch)
{
    return tr_keys[tr_key_find("model.arch")].names[arch];
}

/* The chosen plan's program, training or evaluation, and an executor over its regions. */
static int build_side(struct run *run, struct side *s, int training)
{
    char err[300];
    if (tr_build(&s->b, &run->job, &run->plan.cand[run->plan.chosen].k, training, err, sizeof err))
        return fail(run, TR_EXIT_USAGE, "%s", err);
    s->lm = run->data.kind == TR_DATA_TEXT_LM;
    s->loss_scale = s->b.loss_scale;
    s->x = (struct tr_exec){.g = &s->b.g, .schedule = s->b.p.schedule, .n = s->b.p.n,
                            .plan = &s->b.p.plans[s->b.p.nbuckets - 1], .be = run->be, .rng = &run->rng};
    return 0;
}

/* Both programs on one set of regions (each the larger of the two), plus the optimizer state,
 * all from the allocator under the recipe's memory budget. */
static int allocate(struct run *run)
{
    size_t bytes[TR_NKINDS], work = run->train.b.p.workspace_bytes;
    for (int k = 0; k < TR_NKINDS; k++)
        bytes[k] = run->train.b.p.region_bytes[k] > run->eval.b.p.region_bytes[k] ? run->train.b.p.region_bytes[k]
                                                                                  : run->eval.b.p.region_bytes[k];
    if (run->eval.b.p.workspace_bytes > work)
        work = run->eval.b.p.workspace_bytes;
    if (run->train.b.p.region_bytes[TR_PARAM] != run->eval.b.p.region_bytes[TR_PARAM])
        return fail(run, TR_EXIT_FAILURE, "internal: training and evaluation lay parameters out differently");
    tr_alloc_init(&run->alloc, run->be->memory);
    /* the regions may take what the budget leaves once everything outside them is counted */
    const struct tr_candidate *c = &run->plan.cand[run->plan.chosen];
    tr_alloc_set_limit(&run->alloc, run->plan.budget - (c->footprint - c->peak));
    if (tr_exec_alloc(&run->train.x, &run->alloc, bytes, work))
        return fail(run, TR_EXIT_NO_FIT, "memory budget: %s", run->train.x.error);
    memcpy(run->eval.x.base, run->train.x.base, sizeof run->eval.x.base);
    memcpy(run->eval.x.region_bytes, run->train.x.region_bytes, sizeof run->eval.x.region_bytes);
    run->eval.x.workspace = run->train.x.workspace;
    size_t state = tr_plan_optimizer_bytes(run->r, &run->train.b.g);
    void *p = NULL;
    if (tr_alloc_region(&run->alloc, TR_REGION_OPTIMIZER, state, &p))
        return fail(run, TR_EXIT_NO_FIT, "memory budget: %s", tr_alloc_error(&run->alloc));
    tr_optim_init(&run->optim, run->r, &run->train.b.g, run->train.x.plan, run->be, run->train.x.base[TR_PARAM],
                  run->train.x.base[TR_GRAD], p);
    return 0;
}

/* The plan: searched for this host and the budget, or replayed from --plan FILE (a resumed
 * run replays its own plan.json); its knobs become the run's. */
static int make_plan(struct run *run)
{
    char err[1024], saved[4300] = "";
    if (run->opt->plan_file)
        snprintf(saved, sizeof saved, "%s", run->opt->plan_file);
    else if (run->opt->resume_dir)
        snprintf(saved, sizeof saved, "%s/plan.json", run->opt->resume_dir);
    struct tr_diag why = {0};
    int no_device = tr_plan_device_named(&run->dev, run->r->device, &why);
    snprintf(err, sizeof err, "%s", tr_diag_last(&why));
    tr_diag_free(&why);
    if (no_device || !(run->be = tr_backend_for(run->dev.kind, err, sizeof err)))
        return fail(run, TR_EXIT_FAILURE, "%s", err);
    if (tr_plan_job_init(&run->job, run->r, &run->data, &run->dev, run->diag))
        return TR_EXIT_USAGE;
    int rc;
    if (*saved && (run->opt->plan_file || access(saved, F_OK) == 0)) {
        struct tr_knobs k;
        int unread = tr_plan_read_knobs(saved, &k, &why);
        snprintf(err, sizeof err, "%s", tr_diag_last(&why));
        tr_diag_free(&why);
        if (unread)
            return fail(run, TR_EXIT_USAGE, "%s: %s", run->opt->plan_file ? "--plan" : "resume", err);
        rc = tr_plan_replay(&run->plan, &run->job, &k, run->diag);
    } else {
        rc = tr_plan_search(&run->plan, &run->job, run->diag);
    }
    if (rc)
        return TR_EXIT_USAGE;
    if (run->plan.chosen < 0)
        return fail(run, TR_EXIT_NO_FIT, "memory budget: %s", run->plan.reason);
    const struct tr_knobs *k = &run->plan.cand[run->plan.chosen].k;
    static const enum tr_dtype precisions[] = {[TR_PREC_FP32] = TR_F32, [TR_PREC_BF16] = TR_BF16,
                                               [TR_PREC_FP16] = TR_F16};
    run->amp = precisions[k->precision];
    run->micro = k->micro, run->accumulation = k->accumulation, run->eval_batch = k->eval_batch;
    run->dynamic = k->dynamic, run->nbuckets = k->nbuckets;
    memcpy(run->buckets, k->buckets, (size_t)k->nbuckets * sizeof *k->buckets);
    run->seq = run->job.seq;
    run->remat.mode = k->remat_mode, run->remat.blocks = k->remat_blocks, run->remat.of = run->plan.blocks;
    return 0;
}

/* ---- initial weights ------------------------------------------------------------------------- */

/* This recipe's runs folder, report.dir/NAME: a resumed run's is the parent of its folder. */
static void recipe_folder(const struct run *run, char *out, size_t size)
{
    if (run->opt->resume_dir)
        tr_runs_parent(run->opt->resume_dir, out, size);
    else
        snprintf(out, size, "%s/%s", run->r->report.dir, run->r->name);
}

/* The run folder before run_dir in its recipe folder (what `latest` named when it started), or "". */
static void previous_run(const char *run_dir, char *out, size_t size)
{
    char dir[4200];
    const char *me = strrchr(run_dir, '/') ? strrchr(run_dir, '/') + 1 : run_dir;
    tr_runs_parent(run_dir, dir, sizeof dir);
    char **names = tr_runs_list(dir);
    *out = '\0';
    for (int i = 0; names && names[i] && strcmp(names[i], me); i++)
        snprintf(out, size, "%s", names[i]);
    tr_runs_free_list(names);
}

/* model.init.from_run: the newest whole checkpoint of this recipe's promoted or latest run,
 * looked up before this run's folder becomes `latest`. A resumed run takes the file its first
 * part recorded in run.json (the links may have moved since); *said gets what to log. */
static int warm_start_source(struct run *run, char *path, size_t size, char *said, size_t saidsize)
{
    const char *link = run->r->model.init.from_run == TR_FROM_RUN_PROMOTED ? "promoted" : "latest";
    char dir[4200], target[256], checkpoints[4600], warn[1024], err[4800];
    if (run->opt->resume_dir) {
        snprintf(checkpoints, sizeof checkpoints, "%s/run.json", run->opt->resume_dir);
        json_t *record = json_load_file(checkpoints, 0, NULL);
        const char *recorded = json_string_value(json_object_get(json_object_get(record, "warm_start"), "checkpoint"));
        if (recorded)
            snprintf(path, size, "%s", recorded);
        json_decref(record);
        if (recorded) {
            snprintf(said, saidsize, "model.init: the warm start this run began from, %.900s\n", path);
            return 0;
        }
    }
    recipe_folder(run, dir, sizeof dir);
    if (run->opt->resume_dir && run->r->model.init.from_run == TR_FROM_RUN_LATEST)
        previous_run(run->opt->resume_dir, target, sizeof target);   /* killed before run.json said */
    else if (tr_runs_link_target(dir, link, target, sizeof target))
        *target = '\0';
    if (!*target)
        return fail(run, TR_EXIT_DATA, "model.init.from_run: %s/%s does not point to a run folder: this recipe "
                    "has no %s run yet; train it once without model.init.from_run", dir, link, link);
    snprintf(checkpoints, sizeof checkpoints, "%s/%s/checkpoints", dir, target);
    if (tr_checkpoint_newest(checkpoints, path, size, warn, sizeof warn, err, sizeof err))
        return fail(run, TR_EXIT_DATA, "model.init.from_run: the %s run %s: %s", link, target, err);
    snprintf(said, saidsize, "model.init: warm start from the %s run %s%s%.500s\n", link, target,
             *warn ? "; passed over damaged checkpoints: " : "", *warn ? warn : "");
    run->warm_start = json_pack("{ss ss ss}", "from_run", link, "run", target, "checkpoint", path);
    return 0;
}

static int init_weights(struct run *run)
{
    int text = run->data.kind != TR_DATA_FEATURES;
    struct tr_init_target t = {.g = &run->train.b.g, .x = &run->train.x, .seed = (uint64_t)run->r->seed,
                               .vocab = text ? run->data.vocab : 0, .vocab_file = run->data.tokenizer_files[0],
                               .max_len = text ? run->r->model.max_len : 0};
    const char *path = run->r->model.init.path;
    char source[4600], warm[1024] = "";
    if (run->r->model.init.from_run != TR_FROM_RUN_NONE) {
        int rc = warm_start_source(run, source, sizeof source, warm, sizeof warm);
        if (rc)
            return rc;
        path = source;
    }
    if (!path)
        return tr_init_random(&t) ? fail(run, TR_EXIT_FAILURE, "initialising the weights: %s", t.x->error) : 0;
    struct tr_init_info info;
    char err[1024];
    if (tr_init_load(&t, path, &info, err, sizeof err))
        return fail(run, TR_EXIT_DATA, "model.init: %s", err);
    size_t n = (size_t)snprintf(run->init_summary, sizeof run->init_summary, "%s", warm);
    if (n < sizeof run->init_summary)
        tr_init_summary(&info, path, run->init_summary + n, sizeof run->init_summary - n);
    return 0;
}

/* ---- running --------------------------------------------------------------------------------- */

/* Adds up where each row's true class ranks among its logits: top-1 and top-5 hits; rows whose
 * truth is negative (no target) are skipped. Returns the rows counted. */
static int64_t rank_truth(const float *logits, const int32_t *truth, int64_t rows, int64_t classes,
                          int64_t *correct, int64_t *in_top5)
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

/* Mean loss, accuracy and top-5 accuracy over a split, in batches of the evaluation program
 * (for language models: per token, over every next-token target). */
static int evaluate_split(struct run *run, const struct tr_split *split, double *loss, double *accuracy,
                          double *top5)
{
    int64_t f = split->tokens ? 0 : tr_split_features(split), correct = 0, in_top5 = 0, counted = 0;
    int64_t classes = run->data.nclasses;
    int64_t cap = run->eval_batch * run->seq;
    int32_t *tokens = NULL, *targets = NULL, *labels = NULL;
    uint8_t *mask = NULL;
    int64_t *ids = tr_xmalloc((size_t)run->eval_batch * sizeof(int64_t));
    /* the logits (f32) or the fused head's ranks (i32) of a batch, read back from the device */
    void *scores = tr_xmalloc((size_t)(run->eval_batch * (classes > run->seq ? classes : run->seq)) * 4);
    if (split->tokens) {
        tokens = tr_xmalloc((size_t)cap * sizeof(int32_t));
        targets = tr_xmalloc((size_t)cap * sizeof(int32_t));
        labels = tr_xmalloc((size_t)run->eval_batch * sizeof(int32_t));
        mask = tr_xmalloc((size_t)cap);
    }
    double sum = 0;
    int status = 0;
    int64_t n_eval = run->r->train.eval_samples && run->r->train.eval_samples < split->n ? run->r->train.eval_samples
                                                                                         : split->n;
    for (int64_t start = 0; start < n_eval && !status; start += run->eval_batch) {
        int64_t rows = n_eval - start < run->eval_batch ? n_eval - start : run->eval_batch;
        struct tr_batch b = {.n = rows, .S = 1, .ids = ids};
        for (int64_t i = 0; i < rows; i++)
            ids[i] = start + i;
        if (split->tokens) {
            b.S = tr_text_batch(split, ids, rows, tokens, targets, mask, labels);
            b.tokens = tokens, b.mask = mask;
            if (run->data.kind == TR_DATA_TEXT_LM)
                b.targets = targets;
            else
                b.y = labels;
        } else {
            b.x = split->x + start * f, b.y = split->y + start;
        }
        run->rng.sample_ids = ids;
        struct tr_exec *x = &run->eval.x;
        const struct tr_model *m = &run->eval.b.m;
        float part;
        size_t bytes = m->logits >= 0 ? (size_t)(rows * classes) * sizeof(float) : (size_t)(rows * b.S) * sizeof(int32_t);
        if (tr_feed(x, m, run->eval.lm, &b, f) || tr_exec_run(x, rows, b.S) ||
            tr_exec_read(x, m->logits >= 0 ? m->logits : m->rank, scores, bytes) ||
            tr_exec_read(x, m->loss, &part, sizeof part)) {
            status = fail(run, TR_EXIT_FAILURE, "evaluation: %s", x->error);
            break;
        }
        int64_t n = m->logits >= 0 ? rank_truth(scores, b.y, rows, classes, &correct, &in_top5)
                                   : count_ranks(scores, rows * b.S, &correct, &in_top5);
        sum += (double)part * (double)n;
        counted += n;
    }
    free(ids), free(tokens), free(targets), free(labels), free(mask), free(scores);
    *loss = counted ? sum / (double)counted : NAN;
    *accuracy = counted ? (double)correct / (double)counted : NAN;
    *top5 = counted ? (double)in_top5 / (double)counted : NAN;
    return status;
}

static int evaluate(struct run *run, const struct tr_split *split, double *loss, double *accuracy, double *top5)
{
    double began = now();
    int status = evaluate_split(run, split, loss, accuracy, top5);
    run->timer.spent[TR_TIME_EVAL] += now() - began;
    return status;
}

/* The update after a step's gradients: fp16's unscaling (an overflow skips the step), clipping,
 * the optimizer. */
static int update(struct run *run, int64_t t, double *grad_norm, bool *skipped)
{
    struct side *s = &run->train;
    if (run->scaler.on) {   /* fp16: unscaled and checked in one pass; an overflow skips the step */
        run->optim.error[0] = '\0';
        bool finite = tr_grad_unscale(&run->optim, (float)(1 / run->scaler.scale));
        if (run->optim.error[0])
            return fail(run, TR_EXIT_FAILURE, "step %lld: unscaling the gradients: %s", (long long)t,
                        run->optim.error);
        double scale = run->scaler.scale;
        switch (tr_scaler_update(&run->scaler, !finite)) {
        case TR_SCALER_STEP:
            break;
        case TR_SCALER_SKIP:
            say(run, "step %lld: fp16 gradients overflowed at loss scale %g; step skipped, scale now %g\n",
                (long long)t, scale, run->scaler.scale);
            *skipped = true;
            return 0;
        case TR_SCALER_COLLAPSED:
            return fail(run, TR_EXIT_DIVERGED, "step %lld: fp16 gradients overflow even at loss scale %g, "
                        "below optimize.loss_scale.min %g: the model's values outgrow fp16; use "
                        "optimize.amp=bf16, lower train.optimizer.lr or set train.grad_clip", (long long)t,
                        scale, run->scaler.min);
        }
    }
    /* One pass over the gradients: their norm (clipping them) is NaN or Inf exactly when one of
     * them is; only then is the culprit looked for. */
    run->optim.error[0] = '\0';
    *grad_norm = tr_grad_clip(&run->optim, run->r->train.grad_clip);
    if (run->optim.error[0])   /* the device failed, not the gradients */
        return fail(run, TR_EXIT_FAILURE, "step %lld: the gradients' norm: %s", (long long)t, run->optim.error);
    if (!isfinite(*grad_norm)) {
        int bad = tr_grad_first_nonfinite(&run->optim);
        return fail(run, TR_EXIT_DIVERGED, "step %lld: the gradient of %s holds NaN or Inf",
                    (long long)t, bad >= 0 ? s->b.g.values[bad].name : "a parameter");
    }
    if (tr_optim_step(&run->optim, tr_schedule_lr(run->r, t, run->total_steps)) ||
        run->train.x.be->synchronize(run->optim.error))   /* the step's faults surface in the step */
        return fail(run, TR_EXIT_FAILURE, "step %lld: the optimizer: %s", (long long)t, run->optim.error);
    return 0;
}

/* One optimizer step: the loader's micro-batches, forward and backward, each loss weighted by
 * its share of the step's real count of samples or target tokens (step.h) and by fp16's loss
 * scale, then the update. */
static int train_step(struct run *run, const struct tr_step *st, const struct tr_step *next, int64_t t,
                      double *loss, double *grad_norm, bool *skipped)
{
    struct side *s = &run->train;
    struct tr_step_runner runner = {.x = &s->x, .p = &s->b.p, .m = &s->b.m, .loss_scale = s->loss_scale, .lm = s->lm,
                                    .features = tr_split_features(&run->data.train), .rng = &run->rng};
    if (tr_step_gradients(&runner, st, next, (uint64_t)t, run->scaler.scale, loss))
        return fail(run, TR_EXIT_FAILURE, "step %lld: %s", (long long)t, s->x.error);
    if (!isfinite(*loss))
        return fail(run, TR_EXIT_DIVERGED, "step %lld: the loss is %s; lower train.optimizer.lr or "
                    "set train.grad_clip", (long long)t, isnan(*loss) ? "NaN" : "infinite");
    double began = now();
    int status = update(run, t, grad_norm, skipped);
    run->timer.spent[TR_TIME_OPTIMIZER] += now() - began;
    return status;
}

/* ---- the run folder -------------------------------------------------------------------------- */

static int reopen_run_dir(struct run *run)
{
    char path[4200];
    snprintf(run->dir, sizeof run->dir, "%s", run->opt->resume_dir);
    snprintf(path, sizeof path, "%s/log.txt", run->dir);
    run->log = fopen(path, "a");
    snprintf(path, sizeof path, "%s/metrics.jsonl", run->dir);
    run->metrics = fopen(path, "a");
    if (!run->log || !run->metrics)
        return fail(run, TR_EXIT_FAILURE, "cannot write in %s: %s", run->dir, strerror(errno));
    return 0;
}

static int open_run_dir(struct run *run)
{
    if (run->opt->resume_dir)
        return reopen_run_dir(run);
    time_t now_s = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime(&now_s));
    snprintf(run->dir, sizeof run->dir, "%s/%s/%s", run->r->report.dir, run->r->name, stamp);
    for (int n = 2; access(run->dir, F_OK) == 0 && n < 100; n++)   /* two runs in one second */
        snprintf(run->dir, sizeof run->dir, "%s/%s/%s-%d", run->r->report.dir, run->r->name, stamp, n);
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoints", run->dir);
    int err = tr_make_folders(path);
    if (err)
        return fail(run, TR_EXIT_FAILURE, "cannot create %s: %s", path, strerror(err));
    snprintf(path, sizeof path, "%s/recipe.yaml", run->dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return fail(run, TR_EXIT_FAILURE, "cannot write %s: %s", path, strerror(errno));
    tr_recipe_write_yaml(run->r, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/log.txt", run->dir);
    run->log = fopen(path, "w");
    snprintf(path, sizeof path, "%s/metrics.jsonl", run->dir);
    run->metrics = fopen(path, "w");
    if (!run->log || !run->metrics)
        return fail(run, TR_EXIT_FAILURE, "cannot write in %s: %s", run->dir, strerror(errno));
    char runs[4200];
    recipe_folder(run, runs, sizeof runs);
    if (tr_runs_link_set(runs, "latest", strrchr(run->dir, '/') + 1))
        say(run, "warning: cannot point %s/latest at the new run: %s\n", runs, strerror(errno));
    return 0;
}

/* One line of metrics.jsonl, {"step": n, "tag": value, …}, and the same values as TensorBoard
 * scalars under the same tags. */
/* Copies a file whole (a vocabulary: a few megabytes at most); 0 or −1 with errno. */
static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    if (in && ferror(in))
        rc = -1;
    if (out && fclose(out))
        rc = -1;
    if (in)
        fclose(in);
    return rc;
}

/* What `trainrun sample` and later inference need besides the recipe and the weights: the
 * tokenizer's files in tokenizer/ (vocab.txt, encoder.json + vocab.bpe, or chars.txt) and the
 * class names, one a line, in labels.txt. */
static int keep_data_files(struct run *run)
{
    char path[4300];
    if (tr_data_sources_write(&run->data, run->dir, run->diag))   /* for --if-data-changed */
        return TR_EXIT_FAILURE;
    if (run->data.class_names && run->data.kind != TR_DATA_TEXT_LM) {
        snprintf(path, sizeof path, "%s/labels.txt", run->dir);
        FILE *f = fopen(path, "w");
        for (int i = 0; f && run->data.class_names[i]; i++)
            fprintf(f, "%s\n", run->data.class_names[i]);
        if (!f || fclose(f))
            return fail(run, TR_EXIT_FAILURE, "cannot write %s: %s", path, strerror(errno));
    }
    static const char *const names[][2] = {
        [TR_TOK_WORDPIECE] = {"vocab.txt", NULL}, [TR_TOK_GPT2_BPE] = {"encoder.json", "vocab.bpe"},
        [TR_TOK_CHARS] = {"chars.txt", NULL},
    };
    int kind = run->data.tokenizer_kind;
    if (kind != TR_TOK_WORDPIECE && kind != TR_TOK_GPT2_BPE && kind != TR_TOK_CHARS)
        return 0;
    snprintf(path, sizeof path, "%s/tokenizer", run->dir);
    if (mkdir(path, 0777) && errno != EEXIST)
        return fail(run, TR_EXIT_FAILURE, "cannot create %s: %s", path, strerror(errno));
    for (int i = 0; i < 2; i++) {
        if (!names[kind][i] || !run->data.tokenizer_files[i])
            continue;
        snprintf(path, sizeof path, "%s/tokenizer/%s", run->dir, names[kind][i]);
        if (copy_file(run->data.tokenizer_files[i], path))
            return fail(run, TR_EXIT_FAILURE, "cannot copy %s to %s: %s", run->data.tokenizer_files[i], path,
                        strerror(errno));
    }
    return 0;
}

static void metric_to(struct run *run, json_t *line, bool events)
{
    char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fprintf(run->metrics, "%s\n", text);
    fflush(run->metrics);
    free(text);
    if (!events) {
        json_decref(line);
        return;
    }
    int64_t step = json_integer_value(json_object_get(line, "step"));
    const char *tag;
    json_t *value;
    json_object_foreach(line, tag, value)
        if (strcmp(tag, "step") && json_is_number(value))
            tr_events_scalar(&run->events, tag, step, json_number_value(value));
    tr_events_tick(&run->events);
    json_decref(line);
}

static void metric(struct run *run, json_t *line)
{
    metric_to(run, line, true);
}

/* The checkpointing the plan applies, in words. */
static void remat_words(const struct run *run, char *out, size_t size)
{
    if (run->remat.mode == TR_REMAT_NONE || run->remat.blocks == 0)
        snprintf(out, size, "no gradient checkpointing");
    else if (run->remat.mode == TR_REMAT_SELECTIVE && run->remat.nodes == 0)
        snprintf(out, size, "selective recomputation (nothing in this model is cheap to recompute)");
    else if (run->remat.mode == TR_REMAT_SELECTIVE)
        snprintf(out, size, "selective recomputation in all %d blocks", run->remat.of);
    else if (run->remat.blocks == run->remat.of)
        snprintf(out, size, "full recomputation of all %d blocks", run->remat.of);
    else if (run->remat.blocks == 1)
        snprintf(out, size, "full recomputation of block 0 of %d", run->remat.of);
    else
        snprintf(out, size, "full recomputation of blocks 0–%d of %d", run->remat.blocks - 1, run->remat.of);
}

/* The plan, for people (TensorBoard's text): the decision, then each region and what lives
 * outside them. */
static char *plan_markdown(struct run *run)
{
    const struct tr_candidate *c = &run->plan.cand[run->plan.chosen];
    char *md = NULL, size[32], remat[96];
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    if (!f)
        return NULL;
    remat_words(run, remat, sizeof remat);
    fprintf(f, "Plan: %s, %s, ",
            run->amp == TR_F32 ? "fp32" : run->amp == TR_BF16 ? "bf16 mixed precision" : "fp16 mixed precision",
            remat);
    if (run->dynamic)
        fprintf(f, "dynamic batching in %d length buckets up to %lld tokens", run->nbuckets, (long long)run->seq);
    else
        fprintf(f, "%lld micro-batch%s of %lld per step", (long long)run->accumulation,
                run->accumulation > 1 ? "es" : "", (long long)run->micro);
    fprintf(f, " (batch %lld).\n\nThe planner: %s.\n\n| memory | bytes |\n| --- | ---: |\n",
            (long long)run->r->train.batch_size, run->plan.reason);
    for (int r = 0; r < TR_NREGIONS; r++) {
        tr_format_bytes(c->regions[r], size);
        fprintf(f, "| region: %s | %s |\n", tr_region_name(r), size);
    }
    tr_format_bytes(c->peak, size);
    fprintf(f, "| **predicted peak of the regions** | **%s** |\n", size);
    for (int i = 0; i < TR_NOUTSIDE; i++) {
        tr_format_bytes(c->outside[i], size);
        fprintf(f, "| outside: %s | %s |\n", tr_outside_words(i), size);
    }
    tr_format_bytes(c->footprint, size);
    fprintf(f, "| **predicted footprint** | **%s** |\n", size);
    fclose(f);
    return md;
}

/* The memory plan in one line: the activation arena and, with dynamic batching, the buckets. */
static void say_plan(struct run *run)
{
    char arena[32], buckets[TR_PLAN_MAX_BUCKETS * 24] = "";
    tr_format_bytes(run->train.b.p.region_bytes[TR_ACT], arena);
    for (int b = 0, at = 0; run->dynamic && b < run->nbuckets && at < (int)sizeof buckets; b++)
        at += snprintf(buckets + at, sizeof buckets - (size_t)at, "%s%lld×%lld", b ? ", " : "",
                       (long long)run->buckets[b].rows, (long long)run->buckets[b].len);
    if (run->data.kind == TR_DATA_TEXT_CLASSES) {   /* what padding costs: how long the texts are */
        const struct tr_split *t = &run->data.train;
        say(run, "text: %lld tokens in %lld sequences; lengths p50 %lld, p90 %lld, p99 %lld, longest %lld\n",
            (long long)t->ntokens, (long long)t->n, (long long)tr_text_percentile(t, 0.5),
            (long long)tr_text_percentile(t, 0.9), (long long)tr_text_percentile(t, 0.99),
            (long long)tr_text_longest(t));
    }
    const struct tr_candidate *c = &run->plan.cand[run->plan.chosen];
    char peak[32], foot[32], budget[32];
    tr_format_bytes(c->peak, peak), tr_format_bytes(c->footprint, foot), tr_format_bytes(run->plan.budget, budget);
    say(run, "planner: %s\n", run->plan.reason);
    say(run, "memory: regions %s (exact), footprint %s predicted, budget %s\n", peak, foot, budget);
    if (run->dynamic)
        say(run, "plan: dynamic batching, micro-batches of %s (rows × tokens); activation arena %s\n", buckets,
            arena);
    else if (run->data.kind == TR_DATA_FEATURES)
        say(run, "plan: %lld micro-batch%s of %lld samples a step; activation arena %s\n",
            (long long)run->accumulation, run->accumulation > 1 ? "es" : "", (long long)run->micro, arena);
    else
        say(run, "plan: %lld micro-batch%s of %lld × %lld tokens a step; activation arena %s\n",
            (long long)run->accumulation, run->accumulation > 1 ? "es" : "", (long long)run->micro,
            (long long)run->seq, arena);
}

enum { TIMELINE_POINTS = 200 };   /* plan.json's memory timeline of one step: at most this many */

/* The footprint the budget bounds, as measured: the process's peak resident set on the CPU, the
 * device memory in use on a GPU (the regions never grow, so after a step it is the peak). */
static int64_t footprint(const struct run *run)
{
    return run->dev.kind == TR_DEVICE_CUDA ? tr_device_in_use(&run->dev) : tr_process_peak_rss();
}

/* plan.json in the run folder: the plan as `trainrun plan --json` prints it, and once the run
 * is over what the allocator and the OS measured, with a warning for each prediction missed
 * (regions off by more than 1 %, a footprint above its prediction). Written whole, then renamed
 * over the old one. */
static int write_plan(struct run *run, bool measured, int64_t step)
{
    char *recipe = tr_recipe_to_json(run->r), hash[65], path[4300], tmp[4400];
    tr_sha256_of(recipe, strlen(recipe), hash);
    free(recipe);
    char *text = tr_plan_to_json(&run->plan, true, hash);
    json_t *j = json_loads(text, 0, NULL), *warnings = json_array();
    free(text);
    const struct tr_split *train = &run->data.train;
    double mean_len = train->offsets && train->n ? (double)(train->offsets[train->n] - train->offsets[0]) / (double)train->n
                    : train->tokens ? (double)train->window : 1.0;
    json_object_set_new(j, "data", json_pack("{sI sI sf}", "train_samples", (json_int_t)train->n, "max_len",
                                             (json_int_t)run->seq, "mean_len", mean_len));
    json_object_set_new(j, "timeline", tr_plan_timeline_json(&run->train.b, TIMELINE_POINTS));
    if (measured) {
        const struct tr_candidate *c = &run->plan.cand[run->plan.chosen];
        struct tr_alloc_stats st;
        tr_alloc_stats(&run->alloc, &st);
        int64_t foot = footprint(run);
        json_t *regions = json_object();
        for (int r = 0; r < TR_NREGIONS; r++)
            json_object_set_new(regions, tr_region_name(r), json_integer((json_int_t)st.region[r].peak));
        json_object_set_new(j, "measured_peak_bytes", json_integer((json_int_t)st.peak));
        json_object_set_new(j, "measured_regions", regions);
        json_object_set_new(j, "measured_footprint_bytes", json_integer(foot));
        char line[300], rp[32], rq[32], fp[32], fq[32];
        tr_format_bytes(st.peak, rp), tr_format_bytes(c->peak, rq);
        tr_format_bytes(foot > 0 ? (uint64_t)foot : 0, fp), tr_format_bytes(c->footprint, fq);
        say(run, "memory: regions peaked at %s (predicted %s); footprint %s (predicted %s)\n", rp, rq, fp, fq);
        if (fabs((double)st.peak - (double)c->peak) > 0.01 * (double)c->peak) {
            snprintf(line, sizeof line, "memory: the regions peaked at %s, predicted %s (%+.1f%%)", rp, rq,
                     100.0 * ((double)st.peak - (double)c->peak) / (double)c->peak);
            json_array_append_new(warnings, json_string(line));
        }
        if (foot > 0 && (uint64_t)foot > c->footprint) {
            snprintf(line, sizeof line, "memory: the footprint (%s) reached %s, above the predicted %s",
                     run->dev.kind == TR_DEVICE_CUDA ? "device memory in use" : "peak resident set", fp, fq);
            json_array_append_new(warnings, json_string(line));
        }
        metric(run, json_pack("{sIsfsf}", "step", (json_int_t)step, "memory/measured_peak", (double)st.peak,
                              "memory/measured_footprint", (double)foot));
    }
    size_t i;
    json_t *w;
    json_array_foreach(warnings, i, w) {
        say(run, "warning: %s\n", json_string_value(w));
        tr_events_text(&run->events, "warnings", step, json_string_value(w));
    }
    json_object_set_new(j, "warnings", warnings);
    snprintf(path, sizeof path, "%s/plan.json", run->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = json_dump_file(j, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || rename(tmp, path);
    json_decref(j);
    if (rc)
        return fail(run, TR_EXIT_FAILURE, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* report.tensorboard: a new event file in the run folder. A fresh run opens with the recipe,
 * the plan, its HParams session and the graph; a resumed one with SessionLog START at the first
 * step it logs again, so TensorBoard drops what the interrupted session logged after its last
 * checkpoint and the curves continue as one. */
static int open_events(struct run *run, int64_t start)
{
    if (!run->r->report.tensorboard)
        return 0;
    struct tr_diag why = {0};
    int unopened = tr_events_open(&run->events, run->dir, start + 1, run->r->report.flush_every, &why);
    char err[600];
    snprintf(err, sizeof err, "%s", tr_diag_last(&why));
    tr_diag_free(&why);
    if (unopened)
        return fail(run, TR_EXIT_FAILURE, "tensorboard: %s", err);
    if (start == 0) {
        char *plan = plan_markdown(run);
        tr_tb_session_start(&run->events, run->r, plan ? plan : "", &run->train.b.g, run->micro, (double)time(NULL));
        free(plan);
    }
    return 0;
}

/* report.histograms_every: each parameter's values and gradient after the step's backward. */
static int histograms(struct run *run, int64_t t)
{
    const struct tr_graph *g = &run->train.b.g;
    float *host = NULL;
    int status = 0;
    for (int v = 0; v < g->nvalues && !status; v++) {
        const struct tr_value *val = &g->values[v];
        if (val->kind != TR_PARAM)
            continue;
        int64_t n = tr_dim_eval(tr_shape_numel(&val->shape), 1, 1);
        char tag[sizeof val->name + 16];
        host = tr_xrealloc(host, (size_t)(n ? n : 1) * sizeof *host);
        const int of[2] = {v, val->grad};
        for (int i = 0; i < 2 && !status; i++) {
            if (tr_exec_read(&run->train.x, of[i], host, (size_t)n * sizeof *host))
                status = fail(run, TR_EXIT_FAILURE, "histograms: %s", run->train.x.error);
            snprintf(tag, sizeof tag, "%s/%s", i ? "grads" : "weights", val->name);
            if (!status)
                tr_events_histogram(&run->events, tag, t, host, n);
        }
    }
    free(host);
    tr_events_tick(&run->events);
    return status;
}

static int checkpoint(struct run *run, int64_t step)
{
    double began = now();
    char dir[4200], err[512];
    snprintf(dir, sizeof dir, "%s/checkpoints", run->dir);
    char state[256], scaler[128];
    tr_scaler_format(&run->scaler, scaler, sizeof scaler);
    snprintf(state, sizeof state, "early_stop best=%.17g best_step=%lld bad=%lld stopped=%d %s", run->early.best,
             (long long)run->early.best_step, (long long)run->early.bad, run->early.stopped, scaler);
    if (tr_checkpoint_write(dir, &run->train.x, &run->optim, step, run->r->name, state, err, sizeof err))
        return fail(run, TR_EXIT_FAILURE, "checkpoint: %s", err);
    tr_events_flush(&run->events, 1);   /* what TensorBoard shows is never behind a checkpoint */
    run->timer.spent[TR_TIME_CHECKPOINT] += now() - began;
    return 0;
}

/* The newest checkpoint that verifies; the loader is moved to where that step left it. */
static int resume(struct run *run, int64_t *start)
{
    char dir[4200], warn[1024], err[512], state[256];
    snprintf(dir, sizeof dir, "%s/checkpoints", run->dir);
    if (tr_checkpoint_resume(dir, &run->train.x, &run->optim, start, state, sizeof state, warn, sizeof warn,
                             err, sizeof err))
        return fail(run, TR_EXIT_FAILURE, "resume: %s", err);
    long long best_step, bad;
    int stopped;
    if (*start && sscanf(state, "early_stop best=%lf best_step=%lld bad=%lld stopped=%d", &run->early.best,
                         &best_step, &bad, &stopped) == 4) {
        run->early.best_step = best_step, run->early.bad = bad, run->early.stopped = stopped;
        if (stopped)   /* the run had ended early: it is finished where it stopped */
            run->total_steps = *start;
    }
    if (*start && run->scaler.on && tr_scaler_parse(&run->scaler, state))
        say(run, "warning: the checkpoint keeps no fp16 loss scale; starting again from %g\n", run->scaler.scale);
    if (*warn)
        say(run, "warning: skipped damaged checkpoints: %s\n", warn);
    say(run, "resuming %s at step %lld of %lld\n", run->dir, (long long)*start, (long long)run->total_steps);
    return 0;
}

/* The leak check's verdict in the log; growth is a warning. */
static void say_leak(struct run *run, const json_t *leak)
{
    const char *verdict = json_string_value(json_object_get(leak, "verdict"));
    long long from = (long long)json_integer_value(json_object_get(leak, "baseline_step"));
    long long to = (long long)json_integer_value(json_object_get(leak, "last_step"));
    if (!strcmp(verdict, "too short")) {
        say(run, "leak check: not done, the run ended during warm-up (step %lld)\n",
            (long long)run->leak.warmup);
        return;
    }
    if (!strcmp(verdict, "constant")) {
        say(run, "leak check: allocated bytes, heap and resident set constant from step %lld to %lld\n", from, to);
        return;
    }
    for (int i = 0; i < TR_NGAUGES; i++) {
        json_t *g = json_object_get(leak, tr_gauge_name(i));
        if (json_is_null(json_object_get(g, "first_grew_step")))
            continue;
        char base[32], at[32], last[32];
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "baseline")), base);
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "first_grew_value")), at);
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "last")), last);
        say(run, "warning: leak check: %s grew at step %lld: %s, from %s at step %lld (%s at step %lld)\n",
            tr_gauge_name(i), (long long)json_integer_value(json_object_get(g, "first_grew_step")), at, base,
            from, last, to);
    }
}

/* run.json opened: when and where the run (or this part of a resumed one) started. */
static int begin_record(struct run *run, int64_t start)
{
    char *recipe = tr_recipe_to_json(run->r), hash[65], err[4400];
    tr_sha256_of(recipe, strlen(recipe), hash);
    free(recipe);
    if (tr_run_record_begin(&run->record, run->dir, tr_environment(hash), start, err, sizeof err))
        return fail(run, TR_EXIT_FAILURE, "%s", err);
    if (run->warm_start) {
        json_t *warm = run->warm_start;
        run->warm_start = NULL;
        if (tr_run_record_note(run->record, run->dir, "warm_start", warm, err, sizeof err))
            return fail(run, TR_EXIT_FAILURE, "%s", err);
    }
    return 0;
}

/* ---- nightly runs: promotion and retention ---------------------------------------------------- */

/* report.promote: a finished run against the promoted one; worse is a regression, exit 6. No
 * metric named: no gate. */
static int promote(struct run *run)
{
    if (!run->r->report.promote.metric)
        return 0;
    char dir[4200], err[4400];
    struct tr_promotion p;
    tr_runs_parent(run->dir, dir, sizeof dir);
    if (tr_promote(run->r, dir, run->dir, &p, err, sizeof err))
        return fail(run, TR_EXIT_FAILURE, "%s", err);
    say(run, "%s\n", p.reason);
    if (tr_run_record_note(run->record, run->dir, "promotion", tr_promotion_json(&p), err, sizeof err))
        say(run, "warning: %s\n", err);
    if (p.decision == TR_PROMOTION_REGRESSION)
        return fail(run, TR_EXIT_REGRESSION, "%s", p.reason);
    return 0;
}

/* report.keep: the oldest run folders beyond it go; never this one, `latest`'s or `promoted`'s. */
static void retain(struct run *run)
{
    if (run->r->report.keep <= 0)
        return;
    char dir[4200], deleted[2048];
    tr_runs_parent(run->dir, dir, sizeof dir);
    int n = tr_runs_retain(dir, run->r->report.keep, strrchr(run->dir, '/') + 1, deleted, sizeof deleted);
    if (n < 0)
        say(run, "warning: report.keep: cannot read %s: %s\n", dir, strerror(errno));
    else if (n > 0)
        say(run, "report.keep %lld: deleted %d old run folder%s: %s\n", (long long)run->r->report.keep, n,
            n == 1 ? "" : "s", deleted);
}

/* The run's end: the time not yet logged, run.json closed with the leak check's verdict, the
 * reports and the index of all runs. */
static void end_record(struct run *run, int status, double seconds, int64_t steps)
{
    char err[4400];
    if (run->record) {
        if (run->timer.since > 0) {   /* the loop ran: the last interval, and what followed it */
            json_t *line = json_pack("{sI}", "step", (json_int_t)steps);
            tr_timer_line(&run->timer, line, now(), run->timer.wait_seen);
            /* TensorBoard keeps one point a step: a run that stopped at a step whose line
             * carried the time already (early stopping) has the rest in metrics.jsonl only. */
            metric_to(run, line, steps > run->timer_step);
        }
        json_t *leak = tr_leak_json(&run->leak);
        say_leak(run, leak);
        if (tr_run_record_end(run->record, run->dir, status, seconds, steps, leak, err, sizeof err))
            say(run, "warning: %s\n", err);
    }
    struct tr_run_outcome outcome = {.exit_code = status, .seconds = seconds};
    struct tr_diag why = {0};
    if (tr_run_report_render(run->dir, &outcome, &why))
        say(run, "warning: report: %s\n", tr_diag_last(&why));
    char runs[4200];
    snprintf(runs, sizeof runs, "%s", run->r->report.dir);
    if (tr_runs_index_write(runs, &why))
        say(run, "warning: runs index: %s\n", tr_diag_last(&why));
    tr_diag_free(&why);
}

/* ---- the whole run ----------------------------------------------------------------------------- */

/* On a terminal: one line redrawn in place, at most ten times a second — step, a bar, the
 * loss, throughput and the time left. Cron and pipes get only the periodic lines. */
static void progress(struct run *run, int64_t t, double loss, double began, int64_t start)
{
    double now_s = now();
    if (!run->tty || run->opt->quiet || (now_s - run->bar_drawn < 0.1 && t < run->total_steps))
        return;
    run->bar_drawn = now_s;
    double done = (double)(t - start), rate = done / (now_s - began + 1e-9);
    double left = rate > 0 ? (double)(run->total_steps - t) / rate : 0;
    char bar[21];
    int filled = (int)(20 * t / run->total_steps);
    for (int i = 0; i < 20; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[20] = '\0';
    printf("\r\033[Kstep %lld/%lld [%s] loss %.4f  %.0f samples/s  ETA %d:%02d", (long long)t,
           (long long)run->total_steps, bar, loss, rate * (double)(run->micro * run->accumulation),
           (int)(left / 60), (int)left % 60);
    fflush(stdout);
}

/* train.early_stop: after an evaluation, has the metric gone `patience` evaluations without
 * improving by more than min_delta? */
static int should_stop(struct run *run, int64_t t, const struct tr_train_result *res)
{
    const struct tr_recipe *r = run->r;
    if (r->train.early_stop.metric == TR_STOP_NONE)
        return 0;
    int accuracy = r->train.early_stop.metric == TR_STOP_EVAL_ACCURACY;
    double v = accuracy ? res->valid_accuracy : res->valid_loss;
    int maximise = r->train.early_stop.mode == TR_STOP_MAX || (r->train.early_stop.mode == TR_STOP_AUTO && accuracy);
    double delta = r->train.early_stop.min_delta;
    if (run->early.best_step == 0 || (maximise ? v > run->early.best + delta : v < run->early.best - delta)) {
        run->early.best = v, run->early.best_step = t, run->early.bad = 0;
        return 0;
    }
    if (++run->early.bad < r->train.early_stop.patience)
        return 0;
    say(run, "early stop at step %lld: %s has not improved for %lld evaluations (best %.4f at step %lld)\n",
        (long long)t, accuracy ? "eval/accuracy" : "eval/loss", (long long)run->early.bad, run->early.best,
        (long long)run->early.best_step);
    run->early.stopped = 1;
    return 1;
}

/* The leak check's warm-up: until the first logged line, evaluation and checkpoint have each
 * happened once (each allocates what it keeps), and at least TR_LEAK_MIN_WARMUP steps. */
static int64_t warmup(const struct run *run, int64_t start, int64_t log_every)
{
    const struct tr_recipe *r = run->r;
    int64_t every[3] = {log_every, run->data.valid.n ? r->train.eval_every : 0, r->train.checkpoint_every};
    int64_t last = start + TR_LEAK_MIN_WARMUP;
    for (int i = 0; i < 3; i++)
        if (every[i] > 0) {
            int64_t first = (start / every[i] + 1) * every[i];
            if (first < run->total_steps && first > last)
                last = first;
        }
    return last;
}

static int loop(struct run *run, int64_t start, struct tr_train_result *res)
{
    const struct tr_recipe *r = run->r;
    const struct tr_split *train = &run->data.train;
    struct tr_loader *loader;
    /* a device copies the next step's first inputs while this step's last micro-batch runs:
     * the loader holds two steps, and the next is taken before this one trains */
    bool ahead = run->be->copy_ahead != NULL;
    struct tr_loader_options o = {.batch = r->train.batch_size, .micro = run->micro,
                                  .buckets = run->dynamic ? run->buckets : NULL,
                                  .nbuckets = run->dynamic ? run->nbuckets : 0,
                                  .pool = r->optimize.dynamic_batching.pool, .seed = (uint64_t)r->seed,
                                  .shuffle = r->data.shuffle, .num_workers = (int)r->data.num_workers,
                                  .prefetch = (int)r->data.prefetch_factor, .memory = run->be->host_memory,
                                  .hold = ahead ? 2 : 1};
    if (tr_loader_open(&loader, train, &o, run->diag))
        return TR_EXIT_DATA;
    int64_t per_epoch = tr_loader_steps_per_epoch(loader);
    if (start)
        tr_loader_seek(loader, start / per_epoch, start % per_epoch);
    res->steps = start;
    int64_t log_every = r->report.log_every ? r->report.log_every
                                            : run->total_steps / 20 > 0 ? run->total_steps / 20 : 1;
    double began = now(), last = began, waited = 0;
    struct { int64_t samples, tokens, slots, micro, steps; } since = {0};   /* the last logged line */
    tr_timer_start(&run->timer, began, tr_loader_wait_seconds(loader));
    run->train.x.phase_seconds = run->timer.phase;
    tr_leak_init(&run->leak, warmup(run, start, log_every));
    int status = 0;
    struct tr_step next;
    for (int64_t t = start + 1; t <= run->total_steps && !status; t++) {
        double loss = NAN, grad_norm = NAN;
        bool skipped = false;
        struct tr_step st;
        struct tr_alloc_stats held;
        int64_t gauge[TR_NGAUGES];
        tr_alloc_stats(&run->alloc, &held);
        tr_leak_sample(&run->leak, t, (int64_t)held.current, gauge);
        if (ahead && t > start + 1)
            st = next;
        else
            tr_loader_next(loader, &st);
        if (ahead && t < run->total_steps)
            tr_loader_next(loader, &next);
        status = train_step(run, &st, ahead && t < run->total_steps ? &next : NULL, t, &loss, &grad_norm, &skipped);
        if (!status && r->report.histograms_every && t % r->report.histograms_every == 0)
            status = histograms(run, t);
        since.samples += st.n, since.tokens += st.tokens, since.slots += st.slots;
        since.micro += st.nmicro, since.steps++;
        res->train_loss = loss;
        if (!status)
            progress(run, t, loss, began, start);
        if (!status && (t % log_every == 0 || t == run->total_steps)) {
            double lr = tr_schedule_lr(r, t, run->total_steps), elapsed = now() - last;
            double wait = tr_loader_wait_seconds(loader) - waited;
            struct tr_alloc_stats mem;
            tr_alloc_stats(&run->alloc, &mem);
            say(run, "step %lld/%lld  loss %.4f  lr %.3g  %.0f samples/s\n", (long long)t,
                (long long)run->total_steps, loss, lr, (double)since.samples / elapsed);
            json_t *line = json_pack("{sIsfsf}", "step", (json_int_t)t, "train/loss", loss, "train/lr", lr);
            if (!skipped)   /* a skipped step's gradients overflowed: it has no norm */
                json_object_set_new(line, "train/grad_norm", json_real(grad_norm));
            json_object_set_new(line, "train/samples_per_s", json_real((double)since.samples / elapsed));
            json_object_set_new(line, "train/micro_steps", json_real((double)since.micro / (double)since.steps));
            if (since.tokens) {   /* text: real tokens, and the padding they were batched with */
                json_object_set_new(line, "train/tokens_per_s", json_real((double)since.tokens / elapsed));
                json_object_set_new(line, "data/padding_fraction",
                                    json_real((double)(since.slots - since.tokens) / (double)since.tokens));
            }
            json_object_set_new(line, "data/wait_fraction", json_real(elapsed > 0 ? wait / elapsed : 0.0));
            json_object_set_new(line, "memory/allocated", json_real((double)mem.current));
            json_object_set_new(line, "memory/heap", json_real((double)gauge[TR_GAUGE_HEAP]));
            json_object_set_new(line, "memory/rss", json_real((double)gauge[TR_GAUGE_RSS]));
            json_object_set_new(line, "memory/peak", json_real((double)footprint(run)));
            json_object_set_new(line, "memory/predicted_peak", json_real((double)run->plan.cand[run->plan.chosen].peak));
            json_object_set_new(line, "memory/predicted_footprint",
                                json_real((double)run->plan.cand[run->plan.chosen].footprint));
            if (run->scaler.on) {
                json_object_set_new(line, "train/loss_scale", json_real(run->scaler.scale));
                json_object_set_new(line, "train/skipped_steps", json_real((double)run->scaler.skipped));
            }
            if (t < run->total_steps) {   /* the last step's time goes out with what follows it */
                tr_timer_line(&run->timer, line, now(), tr_loader_wait_seconds(loader));
                run->timer_step = t;
            }
            metric(run, line);
            memset(&since, 0, sizeof since);
            waited += wait;
            last = now();
        }
        if (!status && ((r->train.eval_every && t % r->train.eval_every == 0) || t == run->total_steps) &&
            run->data.valid.n) {
            status = evaluate(run, &run->data.valid, &res->valid_loss, &res->valid_accuracy, &res->valid_top5);
            if (!status) {
                say(run, "step %lld  eval loss %.4f  accuracy %.4f\n", (long long)t, res->valid_loss,
                    res->valid_accuracy);
                metric(run, json_pack("{sIsfsfsfsf}", "step", (json_int_t)t, "eval/loss", res->valid_loss,
                                      "eval/accuracy", res->valid_accuracy, "eval/top5_accuracy",
                                      res->valid_top5, "eval/perplexity", exp(res->valid_loss)));
                if (should_stop(run, t, res)) {
                    res->steps = t;
                    break;
                }
            }
        }
        res->steps = t;
        if (!status && r->train.checkpoint_every && t % r->train.checkpoint_every == 0 && t < run->total_steps)
            status = checkpoint(run, t);
        if (!status && stop_signal && t < run->total_steps) {
            status = checkpoint(run, t);
            if (!status) {
                say(run, "stopped by signal %d after step %lld; 'trainrun resume %s' continues\n",
                    (int)stop_signal, (long long)t, run->dir);
                status = fail(run, TR_EXIT_INTERRUPTED, "stopped by signal %d after step %lld (checkpointed)",
                              (int)stop_signal, (long long)t);
            }
        }
    }
    /* a copy ahead of a step never trained (an early stop) may still read the ring */
    char error[TR_KERNEL_ERROR_MAX];
    if (run->be->synchronize(error) && !status)
        status = fail(run, TR_EXIT_FAILURE, "after step %lld: %s", (long long)res->steps, error);
    res->data_wait_seconds = tr_loader_wait_seconds(loader);
    run->timer.spent[TR_TIME_DATA] += res->data_wait_seconds - run->timer.wait_seen;
    run->timer.wait_seen = res->data_wait_seconds;
    tr_loader_close(loader);
    res->seconds = now() - began;
    return status;
}

static void release(struct run *run)
{
    json_decref(run->record);
    json_decref(run->warm_start);
    tr_alloc_destroy(&run->alloc);
    tr_optim_free(&run->optim);
    for (int i = 0; i < 2; i++) {
        struct side *s = i ? &run->eval : &run->train;
        tr_exec_free(&s->x);
        tr_built_free(&s->b);
    }
    tr_plan_free(&run->plan);
    tr_data_free(&run->data);
    if (run->log)
        fclose(run->log);
    if (run->metrics)
        fclose(run->metrics);
}

/* A resumed run reads the data it began with, or it would not end as an uninterrupted one.
 * 1 with the reason in diag when the data changed since. */
static int data_changed(const struct tr_data *data, const char *dir, struct tr_diag *diag)
{
    char what[1024];
    if (!tr_data_changed_since(data, dir, what, sizeof what))
        return 0;
    tr_diag_add(diag, (struct tr_where){0},
                "resume: the data changed since this run began (%.900s differs from %.2000s/data-sources.json); "
                "a resumed run must read the data it began with: start a new run instead", what, dir);
    return 1;
}

int tr_train(const struct tr_recipe *r, const struct tr_train_options *opt, struct tr_train_result *res,
             struct tr_diag *diag)
{
    struct run run = {.r = r, .opt = opt, .diag = diag, .rng = {.seed = (uint64_t)r->seed},
                      .tty = isatty(STDOUT_FILENO), .events = {.fd = -1}};
    double started = now();
    memset(res, 0, sizeof *res);
    if (tr_data_load(r, opt->datasets_dir, &run.data, diag))
        return TR_EXIT_DATA;
    if (opt->resume_dir && data_changed(&run.data, opt->resume_dir, diag)) {
        tr_data_free(&run.data);
        return TR_EXIT_DATA;
    }
    tr_data_print_warnings(&run.data, stderr);   /* before the run folder and its log exist */
    int64_t per_epoch = (run.data.train.n + r->train.batch_size - 1) / r->train.batch_size;
    run.total_steps = r->train.steps ? r->train.steps : r->train.epochs * per_epoch;
    int status = make_plan(&run);
    if (!status)
        tr_scaler_init(&run.scaler, r, run.amp == TR_F16);
    if (!status)
        status = build_side(&run, &run.train, 1);
    if (!status)
        status = build_side(&run, &run.eval, 0);
    if (!status)
        run.remat.nodes = run.train.b.remat_nodes;
    if (!status)
        status = allocate(&run);
    if (!status)
        status = init_weights(&run);
    if (!status)
        status = open_run_dir(&run);
    int64_t start = 0;
    if (!status && opt->resume_dir)
        status = resume(&run, &start);
    if (!status && !opt->resume_dir)
        status = keep_data_files(&run);
    if (!status && !opt->resume_dir)
        status = write_plan(&run, false, 0);
    if (!status)
        status = open_events(&run, start);
    if (!status)
        status = begin_record(&run, start);
    if (!status) {
        snprintf(res->run_dir, sizeof res->run_dir, "%s", run.dir);
        say(&run, "%s: %s on %s (%lld train, %lld valid, %lld test), %lld steps of %lld, run folder %s\n",
            r->name, arch_name(r->model.arch), run.data.name,
            (long long)run.data.train.n, (long long)run.data.valid.n, (long long)run.data.test.n,
            (long long)run.total_steps, (long long)r->train.batch_size, run.dir);
        if (*run.init_summary)
            say(&run, "%s", run.init_summary);
        say_plan(&run);
        struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
        sigemptyset(&sa.sa_mask);
        stop_signal = 0;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        status = loop(&run, start, res);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    if (!status && run.data.test.n)
        status = evaluate(&run, &run.data.test, &res->test_loss, &res->test_accuracy, &res->test_top5);
    if (!status)
        status = checkpoint(&run, res->steps);
    if (!status && !run.data.test.n) {
        res->test_loss = res->test_accuracy = res->test_top5 = NAN;
        say(&run, "done: %lld steps in %.1f s (data wait %.1f%%); no test split\n", (long long)res->steps,
            res->seconds, 100 * res->data_wait_seconds / (res->seconds > 0 ? res->seconds : 1));
    } else if (!status) {
        say(&run, "done: %lld steps in %.1f s (data wait %.1f%%); test loss %.4f, test accuracy %.4f\n",
            (long long)res->steps, res->seconds, 100 * res->data_wait_seconds / (res->seconds > 0 ? res->seconds : 1),
            res->test_loss, res->test_accuracy);
        metric(&run, json_pack("{sIsfsfsfsf}", "step", (json_int_t)res->steps, "test/loss", res->test_loss,
                               "test/accuracy", res->test_accuracy, "test/top5_accuracy", res->test_top5,
                               "test/perplexity", exp(res->test_loss)));
    } else if (run.log) {
        for (int i = 0; i < diag->n; i++)
            fprintf(run.log, "error: %s\n", diag->items[i].message);
    }
    struct tr_alloc_stats held;
    tr_alloc_stats(&run.alloc, &held);
    if (run.log && run.plan.chosen >= 0 && held.allocs) {   /* what the plan met */
        int rc = write_plan(&run, true, res->steps);
        status = status ? status : rc;
    }
    if (!status && run.record)
        status = promote(&run);
    if (run.record && status != TR_EXIT_INTERRUPTED)
        retain(&run);
    if (run.log)   /* the report is for people: failing to write it does not fail the run */
        end_record(&run, status, now() - started, res->steps);
    if (run.events.fd >= 0 && status != TR_EXIT_INTERRUPTED)   /* interrupted: the session goes on */
        tr_events_session_end(&run.events, status && status != TR_EXIT_REGRESSION ? TR_SESSION_FAILURE : TR_SESSION_SUCCESS, (double)time(NULL));
    if (tr_events_close(&run.events) && run.log)
        say(&run, "warning: TensorBoard events: %s\n", tr_events_error(&run.events));
    release(&run);
    return status;
}
