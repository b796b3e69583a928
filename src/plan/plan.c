/* The search (plan.h): for every precision × checkpointing × batching the recipe leaves open,
 * the largest micro-batch (per length bucket) whose footprint fits the budget, found by
 * bisection since memory grows with the micro-batch; then the fastest of those, near-ties
 * broken in the checklist's order of risk. */
#include "plan/plan.h"
#include "core/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "core/tensor.h"
#include "recipe/optimizers.h"
#include "recipe/schema.h"

#define NEAR_TIE 0.03                       /* candidates within 3 % of the fastest tie */
#define RESERVE_FRACTION 0.02               /* the footprint's stated reserve … */
#define RESERVE_MIN ((uint64_t)16 << 20)    /* … and its floor */
#define MAX_CANDIDATES 1024

/* The training split's sequence lengths: count[L] samples of L tokens, L ≤ max. */
struct lengths {
    double *count;
    int64_t max;
    double n;
};

/* A program's memory plan at one size, kept: the candidates of a pair (each batching, sharding
 * and optimizer offload) probe many of the same sizes, and the plan is the same. */
struct sized {
    int64_t B, S;
    bool grads_in_arena;
    size_t regions[TR_NREGIONS];   /* take_max's of it alone */
    size_t host;                   /* its offloaded activations' ring */
};

/* A program's plans by size, as planned so far. */
struct plans {
    struct sized *at;
    int n, cap;
};

/* One (precision, checkpointing) pair: its two programs, planned again for each batching. */
struct pair {
    const struct tr_plan_job *job;
    struct tr_built train, eval;
    int *schedule_train, *schedule_eval;
    size_t params;            /* the parameters' bytes (f32) */
    size_t optimizer;
    size_t optimizer_shard;   /* the job's rank's shard of it (ZeRO stage 1) */
    int64_t shard_elements;   /* the parameters' elements in that shard (stage 2: its gradients) */
    int64_t min_micro;        /* batch norm keeps its statistics meaningful */
    double optimizer_seconds, optimizer_shard_seconds;   /* the update's passes, whole or the rank's part */
    double gather_copy_seconds;   /* ZeRO 1 and 2's updated parameters through the host buffer */
    double host_optimizer_seconds;   /* offloaded: the update on the host's CPU, at its memory's rate */
    struct plans train_plans, eval_plans;   /* each program's plans by size (planned_at) */
    double pass_kernels, pass_link;   /* the last pass timed (pass_seconds), one micro-batch's: its
                                       * kernels' seconds and its activations' on the host link */
    int first_block[TR_MAX_STAGES + 1];   /* pipelined: the stages' blocks (balanced by time) */
    size_t params_most;       /* pipelined: the largest stage's parameters' bytes */
};

static const struct { const char *key, *words; } outside_names[TR_NOUTSIDE] = {
    {"base", "process (binary, libraries, data)"}, {"threads", "BLAS and OpenMP threads"},
    {"loader", "loader's ring"}, {"evaluation", "evaluation buffers"}, {"library", "library workspaces"},
    {"ranks", "the ranks' buffers"}, {"reserve", "reserve"},
};

const char *tr_outside_key(int i)
{
    return outside_names[i].key;
}

const char *tr_outside_words(int i)
{
    return outside_names[i].words;
}

const char *tr_precision_name(int precision)
{
    return precision == TR_PREC_BF16 ? "bf16" : precision == TR_PREC_FP16 ? "fp16" : "fp32";
}

void tr_knobs_remat_words(const struct tr_knobs *k, int blocks, char *out, size_t size)
{
    if (k->remat_mode == TR_REMAT_NONE || k->remat_blocks == 0)
        snprintf(out, size, "none");
    else if (k->remat_mode == TR_REMAT_SELECTIVE)
        snprintf(out, size, "selective");
    else
        snprintf(out, size, "full %d/%d", k->remat_blocks, blocks);
}

bool tr_knobs_saved_some(const struct tr_knobs *k, int blocks)
{
    return (k->offload & TR_OFFLOAD_SAVED) && ((k->saved_blocks > 0 && k->saved_blocks < blocks) ||
                                               (k->saved_largest > 0 && k->saved_largest < 100));
}

void tr_knobs_offload_words(const struct tr_knobs *k, int blocks, bool brief, char *out, size_t size)
{
    const char *state = !(k->offload & TR_OFFLOAD_STATE) ? "" : brief ? "optimizer" : "optimizer state";
    const char *and = (k->offload & TR_OFFLOAD_STATE) && (k->offload & TR_OFFLOAD_SAVED) ? (brief ? " + " : " and ") : "";
    char saved[96] = "";
    if ((k->offload & TR_OFFLOAD_SAVED) && k->saved_largest > 0 && k->saved_largest < 100)
        snprintf(saved, sizeof saved, brief ? "activations largest %d%%" : "the largest activations (%d%% of their bytes)",
                 k->saved_largest);
    else if (tr_knobs_saved_some(k, blocks))
        snprintf(saved, sizeof saved, brief ? "activations %d/%d" : "the first %d of %d blocks' activations",
                 k->saved_blocks, blocks);
    else if (k->offload & TR_OFFLOAD_SAVED)
        snprintf(saved, sizeof saved, "activations");
    snprintf(out, size, "%s%s%s", state, and, saved);
}

/* ---- the data's lengths ------------------------------------------------------------------- */

static void lengths_of(const struct tr_plan_job *job, struct lengths *h)
{
    const struct tr_split *s = &job->data->train;
    h->max = job->seq;
    h->count = tr_xcalloc((size_t)h->max + 1, sizeof *h->count);
    h->n = 0;
    if (job->data->kind != TR_DATA_TEXT_CLASSES) {   /* every sample as long as the window (or 1) */
        h->count[h->max] = 1, h->n = 1;
        return;
    }
    for (int64_t i = 0; i < s->n; i++) {
        int64_t L = tr_text_length(s, i);
        h->count[L < h->max ? L : h->max] += 1;
    }
    h->n = (double)s->n;
}

/* The share of samples with lo < length ≤ hi. */
static double share(const struct lengths *h, int64_t lo, int64_t hi)
{
    double c = 0;
    for (int64_t L = lo + 1; L <= hi && L <= h->max; L++)
        c += h->count[L];
    return h->n > 0 ? c / h->n : 0;
}

/* The expected longest of m samples drawn from those with lo < length ≤ hi: what a
 * micro-batch padded to its own longest sequence holds. Σ L·(F(L)^m − F(L−1)^m). */
static double expected_longest(const struct lengths *h, int64_t lo, int64_t hi, int64_t m)
{
    double total = share(h, lo, hi) * h->n, below = 0, e = 0, prev = 0;
    if (total <= 0)
        return (double)hi;
    for (int64_t L = lo + 1; L <= hi && L <= h->max; L++) {
        below += h->count[L];
        double now = pow(below / total, (double)m);
        e += (double)L * (now - prev);
        prev = now;
    }
    return e;
}

/* The mean length of the samples with lo < length ≤ hi. */
static double mean_length(const struct lengths *h, int64_t lo, int64_t hi)
{
    double c = 0, sum = 0;
    for (int64_t L = lo + 1; L <= hi && L <= h->max; L++)
        c += h->count[L], sum += h->count[L] * (double)L;
    return c > 0 ? sum / c : (double)hi;
}

/* ---- one candidate's memory --------------------------------------------------------------- */

static int *creation_order(int n)
{
    int *s = tr_xmalloc((size_t)(n ? n : 1) * sizeof *s);
    for (int i = 0; i < n; i++)
        s[i] = i;
    return s;
}

static void plan_one(struct tr_memplan *mp, const struct tr_built *b, const int *schedule, int64_t B, int64_t S,
                     const struct tr_device *dev, bool grads_in_arena)
{
    int keep[2] = {b->m.loss, b->m.logits >= 0 ? b->m.logits : b->m.rank};
    tr_memplan_build(mp, &b->g, schedule, b->g.nnodes, B, S, keep, 2, tr_plan_workspace(dev), grads_in_arena);
}

static void take_max(size_t *regions, const struct tr_memplan *mp)
{
    static const struct { int kind, region; } map[] = {
        {TR_PARAM, TR_REGION_PARAMS}, {TR_GRAD, TR_REGION_GRADS}, {TR_INPUT, TR_REGION_DATA}, {TR_ACT, TR_REGION_ARENA},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (mp->region_bytes[map[i].kind] > regions[map[i].region])
            regions[map[i].region] = mp->region_bytes[map[i].kind];
    if (mp->workspace_bytes > regions[TR_REGION_WORKSPACE])
        regions[TR_REGION_WORKSPACE] = mp->workspace_bytes;
}

/* The loader options the trainer will open the stream with for knobs k. */
static struct tr_loader_options loader_options(const struct tr_plan_job *job, const struct tr_knobs *k)
{
    const struct tr_recipe *r = job->r;
    return (struct tr_loader_options){.batch = r->train.batch_size, .micro = k->micro,
                                      .buckets = k->dynamic ? k->buckets : NULL,
                                      .nbuckets = k->dynamic ? k->nbuckets : 0,
                                      .pool = r->optimize.dynamic_batching.pool, .seed = (uint64_t)r->seed,
                                      .shuffle = r->data.shuffle, .num_workers = (int)tr_recipe_num_workers(r, 0),
                                      .prefetch = (int)r->data.prefetch_factor,
                                      .hold = tr_plan_backend(job->dev) && tr_plan_backend(job->dev)->copy_ahead ? 2 : 1,
                                      .seq_multiple = tr_knobs_seq_multiple(k)};
}

/* What lives outside the regions: the process (or context), threads, loader, evaluation's
 * buffers, library workspaces, and the reserve over all of it. */
static void outside(const struct tr_plan_job *job, struct tr_candidate *c, uint64_t ranks)
{
    const struct tr_device *dev = job->dev;
    bool host = dev->kind == TR_DEVICE_CPU;   /* the loader and evaluation buffers live here */
    memset(c->outside, 0, sizeof c->outside);
    c->outside[TR_OUT_RANKS] = ranks;
    c->outside[TR_OUT_BASE] = job->base_bytes + dev->context_bytes;
    c->outside[TR_OUT_THREADS] = dev->thread_bytes;
    if (host) {
        struct tr_loader_options o = loader_options(job, &c->k);
        c->outside[TR_OUT_LOADER] = tr_loader_memory_bytes(&job->data->train, &o);
        uint64_t rows = (uint64_t)c->k.eval_batch, cells = rows * (uint64_t)job->seq;
        c->outside[TR_OUT_EVAL] = rows * sizeof(int64_t) +
                                  (job->data->kind != TR_DATA_FEATURES ? cells * 9 + rows * 4 : 0) +
                                  (job->data->train.pixels ? rows * (uint64_t)tr_split_features(&job->data->train) * 4 : 0);
    }
    /* a backend for the device sizes its libraries' workspaces in the regions (the CUDA
     * backend's cuBLASLt and cuDNN ones); only a build without one counts the profile's */
    c->outside[TR_OUT_LIBRARY] = tr_plan_backend(dev) ? 0 : dev->library_workspace;
    uint64_t sum = c->peak;
    for (int i = 0; i < TR_OUT_RESERVE; i++)
        sum += c->outside[i];
    uint64_t reserve = (uint64_t)((double)sum * RESERVE_FRACTION);
    c->outside[TR_OUT_RESERVE] = reserve > RESERVE_MIN ? reserve : RESERVE_MIN;
    c->footprint = sum + c->outside[TR_OUT_RESERVE];
    if (job->prior_peak > c->footprint) {   /* the process already held more while loading */
        c->outside[TR_OUT_BASE] += job->prior_peak - c->footprint;
        c->footprint = job->prior_peak;
    }
}

/* Across ranks, beside the regions. On the host: MPI's temporary for a bucket's collective (as
 * large as the bucket: on Open MPI 4.1, 2 ranks of bert-small held 27 MiB more with 25 MiB
 * buckets than with 4 MiB ones), the host buffer the gradients go through where they are not
 * summed in place (in the arena: one micro-batch a step, ZeRO 2 and 3), the one ZeRO 1 and 2
 * gather the updated parameters through, and on rank 0 of a sharded plan what each checkpoint
 * gathers whole (the optimizer's state; ZeRO 3's parameters, a view and a flat copy). On a
 * GPU: NCCL's buffers (NCCL_BUFFSIZE, 4 MiB, sending and receiving, on each of 2 channels). */
static uint64_t ranks_bytes(const struct pair *p, const struct tr_candidate *c, int stage)
{
    const struct tr_plan_job *job = p->job;
    uint64_t piped = 0;   /* pipelined: rank 0's piece of a checkpoint as it passes (whole.h), and the
                           * copies of an evaluation batch's sends, two batches' (step.h) */
    for (int i = 0; p->eval.pipelined && i < p->eval.stages.ntransfers; i++) {
        const struct tr_transfer *t = &p->eval.stages.transfers[i];
        const struct tr_value *v = &p->eval.g.values[t->value];
        if (t->from == stage)
            piped += 2 * (uint64_t)tr_dim_eval(tr_shape_numel(&v->shape), c->k.eval_batch, job->seq) * tr_dtype_size(v->dtype);
    }
    bool spread = c->k.pipeline > 1 || c->k.tensor > 1;
    bool writer = stage == 0 && job->rank == 0 && job->tensor == 0;   /* of data rank 0, the one writing */
    piped += spread && writer ? (uint64_t)TR_ST_PIECE : 0;
    uint64_t sliced = 0;   /* tensor parallel: rank 0 puts the largest sliced tensor together whole, a slice
                            * at a time (whole.h); every rank sums a 16-bit all-reduce's piece on its stack */
    for (int v = 0; c->k.tensor > 1 && writer && v < p->train.g.nvalues; v++)
        if (p->train.g.values[v].kind == TR_PARAM && p->train.g.values[v].split_axis >= 0) {
            uint64_t part = (uint64_t)tr_dim_eval(tr_shape_numel(&p->train.g.values[v].shape), 1, 1) * sizeof(float);
            sliced = part * (uint64_t)(c->k.tensor + 1) > sliced ? part * (uint64_t)(c->k.tensor + 1) : sliced;
        }
    piped += sliced;
    for (int i = 0; p->train.pipelined && i < p->train.stages.nshared; i++)   /* a shared weight's gradient: its
                                                                                * holders' pieces (step.c) */
        if (p->train.stages.shared_on[i] >> stage & 1)
            piped += (uint64_t)__builtin_popcountll(p->train.stages.shared_on[i]) * TR_PIPE_PIECE * sizeof(float);
    if (job->world < 2)
        return piped;
    if (job->dev->kind != TR_DEVICE_CPU)
        return ((uint64_t)16 << 20) + piped;
    uint64_t params = p->params;
    uint64_t bucket = job->r->distributed.bucket < params ? job->r->distributed.bucket : params;
    uint64_t bytes = bucket;
    if (tr_knobs_grads_in_arena(&c->k))
        bytes += bucket;
    if (c->k.shard == 1 || c->k.shard == 2)
        bytes += bucket;
    if (c->k.shard && job->rank == 0)
        bytes += p->optimizer + (c->k.shard == 3 ? 2 * params : 0);
    return bytes + piped;
}

static void take_program(size_t *regions, const struct tr_program *prog)
{
    struct tr_memplan whole = {.workspace_bytes = prog->workspace_bytes};
    memcpy(whole.region_bytes, prog->region_bytes, sizeof whole.region_bytes);
    take_max(regions, &whole);
}

/* Offloaded: the optimizer's state leaves the device for the host, with a host copy of the
 * parameters and of their gradients (train/optim.h); the activations' ring is measured with
 * the plans. c->host_bytes: the host's total. */
static void offloaded(const struct pair *p, struct tr_candidate *c)
{
    if (c->k.offload & TR_OFFLOAD_STATE) {
        c->host[TR_REGION_OPTIMIZER] = c->regions[TR_REGION_OPTIMIZER];
        c->host[TR_REGION_PARAMS] = c->regions[TR_REGION_PARAMS];
        c->host[TR_REGION_GRADS] = p->params;
        c->regions[TR_REGION_OPTIMIZER] = 0;
    }
    c->host_bytes = 0;
    for (int r = 0; r < TR_NREGIONS; r++)
        c->host_bytes += c->host[r];
}

/* The bytes one micro-batch at (B, S) sends to the host and brings back: its TR_HOST values'. */
static double host_bytes_at(const struct tr_graph *g, int64_t B, int64_t S)
{
    double bytes = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_HOST)
            bytes += (double)tr_dim_eval(tr_shape_numel(&g->values[v].shape), B, S) * (double)tr_dtype_size(g->values[v].dtype);
    return bytes;
}

/* Pipelined: every stage's regions (its program's, its micro-batches in flight, its parameters'
 * optimizer state) and footprint; the candidate's are the job's stage's, and it fits when the
 * largest stage does. */
static void measure_stages(struct pair *p, struct tr_candidate *c)
{
    const struct tr_plan_job *job = p->job;
    struct tr_bucket train[TR_PLAN_MAX_BUCKETS], eval = {c->k.eval_batch, job->seq};
    for (int b = 0; b < c->k.nbuckets; b++)
        train[b] = (struct tr_bucket){c->k.buckets[b].rows, c->k.buckets[b].len};
    int keep[2] = {p->train.m.loss, p->train.m.logits >= 0 ? p->train.m.logits : p->train.m.rank};
    int keep_eval[2] = {p->eval.m.loss, p->eval.m.logits >= 0 ? p->eval.m.logits : p->eval.m.rank};
    size_t own[TR_NREGIONS] = {0};
    c->worst_footprint = 0;
    for (int s = c->k.pipeline - 1; s >= 0; s--) {   /* the job's stage last: its numbers stay */
        struct tr_plan_job one = *job;
        one.stage = s;
        struct tr_program prog;
        memset(c->regions, 0, sizeof c->regions);
        tr_program_plan_stage(&prog, &p->train.g, &p->train.stages, s, tr_plan_slots(&one, &c->k), train,
                              c->k.nbuckets, keep, 2, tr_plan_workspace(job->dev));
        take_program(c->regions, &prog);
        c->regions[TR_REGION_OPTIMIZER] = tr_plan_optimizer_bytes_held(job->r, &p->train.g, &prog.plans[0]);
        tr_program_free(&prog);
        tr_program_plan_stage(&prog, &p->eval.g, &p->eval.stages, s, 1, &eval, 1, keep_eval, 2,
                              tr_plan_workspace(job->dev));
        take_program(c->regions, &prog);
        tr_program_free(&prog);
        c->peak = 0;
        for (int r = 0; r < TR_NREGIONS; r++)
            c->peak += c->regions[r];
        outside(job, c, ranks_bytes(p, c, s));
        c->stage[s].peak = c->peak, c->stage[s].footprint = c->footprint;
        if (c->footprint > c->worst_footprint)
            c->worst_footprint = c->footprint;
        if (s == job->stage)
            memcpy(own, c->regions, sizeof own);
    }
    memcpy(c->regions, own, sizeof own);
    c->peak = c->stage[job->stage].peak, c->footprint = c->stage[job->stage].footprint;
    outside(job, c, ranks_bytes(p, c, job->stage));
    c->fits = c->worst_footprint <= job->budget;
    c->remat_nodes = p->train.remat_nodes;
}

/* The training (or evaluation) program's plan at (B, S): planned once, then kept in the pair. */
static const struct sized *planned_at(struct pair *p, bool training, int64_t B, int64_t S, bool grads_in_arena)
{
    struct plans *l = training ? &p->train_plans : &p->eval_plans;
    for (int i = 0; i < l->n; i++)
        if (l->at[i].B == B && l->at[i].S == S && l->at[i].grads_in_arena == grads_in_arena)
            return &l->at[i];
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->at = tr_xrealloc(l->at, (size_t)l->cap * sizeof *l->at);
    }
    struct sized *t = &l->at[l->n++];
    *t = (struct sized){.B = B, .S = S, .grads_in_arena = grads_in_arena};
    struct tr_memplan mp;
    plan_one(&mp, training ? &p->train : &p->eval, training ? p->schedule_train : p->schedule_eval, B, S, p->job->dev,
             grads_in_arena);
    take_max(t->regions, &mp);
    t->host = mp.region_bytes[TR_HOST];
    tr_memplan_free(&mp);
    return t;
}

/* Regions and footprint of knobs k on the pair's programs. */
static void measure(struct pair *p, struct tr_candidate *c)
{
    const struct tr_plan_job *job = p->job;
    if (p->train.pipelined) {
        measure_stages(p, c);
        return;
    }
    memset(c->regions, 0, sizeof c->regions);
    memset(c->host, 0, sizeof c->host);
    for (int b = 0; b < c->k.nbuckets; b++) {
        const struct sized *t = planned_at(p, true, c->k.buckets[b].rows, c->k.buckets[b].len,
                                           tr_knobs_grads_in_arena(&c->k));
        for (int r = 0; r < TR_NREGIONS; r++)
            c->regions[r] = t->regions[r] > c->regions[r] ? t->regions[r] : c->regions[r];
        if (t->host > c->host[TR_REGION_ARENA])   /* the offloaded activations' ring */
            c->host[TR_REGION_ARENA] = t->host;
    }
    const struct sized *e = planned_at(p, false, c->k.eval_batch, job->seq, false);
    for (int r = 0; r < TR_NREGIONS; r++)
        if (r != TR_REGION_OPTIMIZER && e->regions[r] > c->regions[r])
            c->regions[r] = e->regions[r];
    c->regions[TR_REGION_OPTIMIZER] = c->k.shard ? p->optimizer_shard : p->optimizer;
    offloaded(p, c);
    if (c->k.shard >= 2)   /* the summed gradients of the rank's shard; each run's are in the arena */
        c->regions[TR_REGION_GRADS] = (size_t)p->shard_elements * sizeof(float);
    if (c->k.shard == 3)   /* its parameters; the copies gathered whole are in the arena */
        c->regions[TR_REGION_PARAMS] = (size_t)p->shard_elements * sizeof(float);
    /* a device's inputs region holds a second copy: the next micro-batch's, copied ahead */
    c->regions[TR_REGION_DATA] = tr_exec_inputs_bytes(tr_plan_backend(job->dev), c->regions[TR_REGION_DATA]);
    c->peak = 0;
    for (int r = 0; r < TR_NREGIONS; r++)
        c->peak += c->regions[r];
    outside(job, c, ranks_bytes(p, c, job->stage));
    c->fits = c->footprint <= job->budget && (!job->host_budget || c->host_bytes <= job->host_budget);
    c->remat_nodes = p->train.remat_nodes;
}

/* ---- one candidate's time ----------------------------------------------------------------- */

static double pass_seconds(struct pair *p, int64_t B, double S, struct tr_candidate *c, double times)
{
    int64_t s = (int64_t)ceil(S) < 1 ? 1 : (int64_t)ceil(S);
    double f, b, t = tr_plan_step_seconds(&p->train.g, B, s, p->job->dev, &f, &b);
    c->flops += f * times, c->bytes_moved += b * times;
    p->pass_kernels = t, p->pass_link = 0;
    int T = c->k.tensor;
    if (T > 1) {   /* a ring all-reduce moves 2 (T − 1) / T of what it sums in and out of each rank, an
                    * all-gather or reduce-scatter (T − 1) / T, and each pays the messages' latency */
        int sums;
        double moved, summed = tr_plan_collective_bytes(&p->train.g, B, s, &sums, &moved);
        double seconds = p->job->bus_rate > 0 ? (double)(T - 1) / T * moved / p->job->bus_rate : 0;
        seconds += sums * p->job->bus_latency;
        c->tensor_bytes += summed * times, c->tensor_seconds += seconds * times;
        t += seconds;
    }
    if (p->train.offloaded) {   /* each offloaded activation out and back at the host link's rate: beside
                                 * the kernels on a GPU's copy engine, on top of them on a CPU */
        double moved = 2 * host_bytes_at(&p->train.g, B, s), link = moved / tr_device_host_link(p->job->dev);
        double exposed = p->job->dev->kind == TR_DEVICE_CUDA ? (link > t ? link - t : 0) : link;
        c->link_bytes += moved * times, c->link_seconds += link * times, c->link_exposed += exposed * times;
        p->pass_link = link;
        t += exposed;
    }
    return t * times;
}

/* Pipelined: the step is 1F1B's — each stage's micro-batches one after another, the stages'
 * work on one micro-batch ahead of the first and behind the last. With T_s a stage's time for one
 * micro-batch (forward and backward), m micro-batches and P stages, the step takes
 * Σ_s T_s + (m − 1) · max_s T_s, the stages idle 1 − m Σ_s T_s / (P · that) of it (the bubble:
 * (P − 1) / (m + P − 1) when balanced). Scaled from the whole model's forecast (timing's, at
 * each bucket's sizes) by the stages' shares at the largest bucket; the update over the largest
 * stage's parameters; each micro-batch's activations and gradients between stages at the bus
 * rate, the busiest stage's. */
static void timing_stages(struct pair *p, struct tr_candidate *c)
{
    const struct tr_plan_job *job = p->job;
    const struct tr_length_bucket *big = &c->k.buckets[c->k.nbuckets - 1];
    int P = c->k.pipeline, world = job->world > 1 ? job->world : 1;
    double sum = 0, most = 0, busiest = 0, params_most = 0;
    for (int s = 0; s < P; s++) {
        const struct tr_stage *st = &p->train.stages.stage[s];
        c->stage[s].seconds = tr_plan_nodes_seconds(&p->train.g, st->schedule, st->n, big->rows, big->len, job->dev,
                                                    NULL, NULL);
        c->stage[s].sent_bytes = 0;
        for (int i = 0; i < p->train.stages.ntransfers; i++) {
            const struct tr_transfer *t = &p->train.stages.transfers[i];
            const struct tr_value *v = &p->train.g.values[t->value];
            if (t->from == s || t->to == s)
                c->stage[s].sent_bytes += (double)tr_dim_eval(tr_shape_numel(&v->shape), big->rows, big->len) *
                                          (double)tr_dtype_size(v->dtype);
        }
        sum += c->stage[s].seconds;
        most = c->stage[s].seconds > most ? c->stage[s].seconds : most;
        busiest = c->stage[s].sent_bytes > busiest ? c->stage[s].sent_bytes : busiest;
    }
    params_most = (double)p->params_most;
    double m = ceil(c->micro_steps / world), compute = c->step_seconds - c->comm_seconds - p->optimizer_seconds;
    double share = sum > 0 ? most / sum : 1;
    double piped = compute * (1 / m + (m - 1) / m * share);
    c->bubble = sum > 0 ? 1 - m * sum / (P * (sum + (m - 1) * most)) : 0;
    double transfers = job->bus_rate > 0 ? m * busiest / job->bus_rate : 0;
    c->comm_seconds += transfers;
    c->step_seconds = piped + p->optimizer_seconds * (p->params ? params_most / (double)p->params : 1) +
                      c->comm_seconds;
}

/* Fixed batching: ⌈batch / micro⌉ micro-steps, each padded to its own longest sequence.
 * Dynamic: per bucket, its share of the batch in micro-batches of its rows (pools sorted by
 * length, so a micro-batch is about as long as its bucket's mean). Plus the optimizer's pass. */
static void timing(struct pair *p, const struct lengths *h, struct tr_candidate *c)
{
    int64_t batch = p->job->r->train.batch_size;
    double slots = 0, tokens = mean_length(h, 0, h->max) * (double)batch;
    c->flops = c->bytes_moved = 0, c->step_seconds = 0, c->micro_steps = 0;
    c->tensor_seconds = c->tensor_bytes = 0;
    c->link_bytes = c->link_seconds = c->link_exposed = 0;
    if (!c->k.dynamic) {
        int64_t last = batch - (c->k.accumulation - 1) * c->k.micro;
        double s_full = expected_longest(h, 0, h->max, c->k.micro), s_last = expected_longest(h, 0, h->max, last);
        c->step_seconds = pass_seconds(p, c->k.micro, s_full, c, (double)(c->k.accumulation - 1)) +
                          pass_seconds(p, last, s_last, c, 1);
        c->micro_steps = (double)c->k.accumulation;
        slots = s_full * (double)(batch - last) + s_last * (double)last;
    } else {
        int64_t pool = p->job->r->optimize.dynamic_batching.pool > 0 ? p->job->r->optimize.dynamic_batching.pool : 1;
        for (int b = 0; b < c->k.nbuckets; b++) {
            int64_t lo = b ? c->k.buckets[b - 1].len : 0, hi = c->k.buckets[b].len;
            double samples = share(h, lo, hi) * (double)(batch * pool), S = mean_length(h, lo, hi);
            if (samples <= 0)
                continue;
            double micro = ceil(samples / (double)c->k.buckets[b].rows) / (double)pool;
            double rows = samples / (double)pool / micro;
            c->step_seconds += pass_seconds(p, (int64_t)ceil(rows), S, c, micro);
            c->micro_steps += micro;
            slots += ceil(S) * rows * micro;
        }
        /* the micro-batch a step boundary cuts runs in two pieces: one more pass's fixed costs */
        c->micro_steps += 1;
        c->step_seconds += (double)p->train.g.nnodes * p->job->dev->node_seconds;
    }
    c->padding = tokens > 0 && h->max > 1 ? (slots - tokens) / tokens : 0;
    c->step_seconds += !c->k.shard ? p->optimizer_seconds
                       : p->optimizer_shard_seconds + (c->k.shard < 3 ? p->gather_copy_seconds : 0);
    if (c->k.offload & TR_OFFLOAD_STATE) {
        /* the gradients down as the last micro-batch's backward writes them: on a GPU beside its
         * kernels (the backward's two thirds of the pass, less the activations' reloads on the
         * same link), only the rest exposed; on a CPU all of it. The parameters back after the
         * host's update, before the next forward: not hidden. */
        double down = (double)p->params / tr_device_host_link(p->job->dev);
        double room = 2.0 / 3 * p->pass_kernels - p->pass_link / 2;
        double exposed = p->job->dev->kind != TR_DEVICE_CUDA ? down : down > room ? down - (room > 0 ? room : 0) : 0;
        c->link_bytes += 2 * (double)p->params, c->link_seconds += 2 * down, c->link_exposed += exposed + down;
        c->step_seconds += exposed + down + p->host_optimizer_seconds - p->optimizer_seconds;
    }
    /* across ranks, at the measured bus rate: a ring's reduce-scatter and all-gather each move
     * (N − 1) / N of the gradients in and out of a rank (sharded, the all-gather the parameters:
     * as many bytes); stage 2 reduce-scatters every micro-batch's, each packed through the host
     * buffer first (written, read, and added into the shard); stage 3 all-gathers the parameters
     * twice a micro-batch instead (its forward's copies and its backward's), none after the update */
    const struct tr_plan_job *job = p->job;
    double bytes = (double)p->params, part = (double)(job->world - 1) / job->world;
    double rounds = ceil(c->micro_steps);
    double sums = c->k.shard == 3 ? 3 * rounds : c->k.shard == 2 ? rounds + 1 : 2;
    c->comm_seconds = job->world > 1 && job->bus_rate > 0 ? sums * part * bytes / job->bus_rate : 0;
    if (c->k.shard >= 2)
        c->step_seconds += rounds * 3 * bytes / job->dev->bandwidth;
    c->step_seconds += c->comm_seconds;
    if (p->train.pipelined)
        timing_stages(p, c);
}

/* ---- the search ----------------------------------------------------------------------------- */

/* Pipelined: the blocks dealt to k's stages — as k says (a saved plan), else balanced by the
 * time model at the longest sequence — and both programs split there. */
static int split_pair(struct pair *p, const struct tr_plan_job *job, const struct tr_knobs *k, bool by_memory,
                      struct tr_diag *d)
{
    int blocks = tr_graph_blocks(&p->train.g);
    if (k->pipeline > blocks)
        return tr_fail(d, TR_EINVAL, "optimize.parallel.pipeline %d: the model has %d block%s to deal to its stages",
                       k->pipeline, blocks, blocks == 1 ? "" : "s");
    if (k->first_block[k->pipeline] == blocks)
        memcpy(p->first_block, k->first_block, sizeof p->first_block);
    else if (by_memory)
        tr_plan_balance_memory(&p->train.g, k->pipeline, tr_optimizer_nstate(job->r), p->first_block);
    else
        tr_plan_balance(&p->train.g, k->pipeline, 1, job->seq, job->dev, p->first_block);
    for (int i = 0; i < 2; i++) {
        struct tr_built *b = i ? &p->eval : &p->train;
        if (tr_stages_split(&b->stages, &b->g, NULL, b->g.nnodes, k->pipeline, p->first_block))
            return tr_fail(d, TR_EINVAL, "model: %s", b->g.message);
        b->pipelined = true;
    }
    for (int s = 0; s < k->pipeline; s++) {   /* the largest stage's parameters (its update's time) */
        struct tr_memplan mp;
        const struct tr_stage *st = &p->train.stages.stage[s];
        tr_memplan_build_stage(&mp, &p->train.g, st->schedule, st->n, st->split, s, p->train.stages.transfers,
                               p->train.stages.ntransfers, 1, 1, NULL, 0, NULL);
        size_t held = tr_plan_param_bytes_held(&p->train.g, &mp);
        p->params_most = held > p->params_most ? held : p->params_most;
        tr_memplan_free(&mp);
    }
    return 0;
}

static int open_pair(struct pair *p, const struct tr_plan_job *job, const struct tr_knobs *k, bool by_memory,
                     struct tr_diag *d)
{
    memset(p, 0, sizeof *p);
    p->job = job;
    struct tr_knobs probe = *k;   /* any sizes: the pair re-plans each batching itself */
    probe.nbuckets = 1, probe.buckets[0] = (struct tr_length_bucket){job->seq, 1}, probe.eval_batch = 1;
    probe.pipeline = 1;   /* pipelined: the whole model, split below */
    int rc = tr_build(&p->train, job, &probe, true, d);
    if (!rc)
        rc = tr_build(&p->eval, job, &probe, false, d);
    if (!rc && k->pipeline > 1)
        rc = split_pair(p, job, k, by_memory, d);
    if (rc)
        return rc;
    p->schedule_train = creation_order(p->train.g.nnodes);
    p->schedule_eval = creation_order(p->eval.g.nnodes);
    p->optimizer = tr_plan_optimizer_bytes(job->r, &p->train.g);
    int64_t batch = job->r->train.batch_size;
    p->min_micro = 1;
    for (int i = 0; i < p->train.g.nnodes; i++)
        if (p->train.g.nodes[i].op == TR_OP_BATCHNORM)
            p->min_micro = batch < TR_PLAN_BN_MIN_MICRO ? batch : TR_PLAN_BN_MIN_MICRO;
    p->params = tr_plan_param_bytes(&p->train.g);
    double params = (double)p->params;
    p->optimizer_seconds = tr_plan_optimizer_seconds(job->dev, tr_optimizer_nstate(job->r), params, params,
                                                     (double)p->optimizer);
    struct tr_device host = *job->dev;   /* a GPU's host: its link's rate stands for its memory's */
    if (host.kind == TR_DEVICE_CUDA)
        host.bandwidth = 2 * tr_device_host_link(job->dev), host.kernels.measured = false;
    p->host_optimizer_seconds = tr_plan_optimizer_seconds(&host, tr_optimizer_nstate(job->r), params, params,
                                                          (double)p->optimizer);
    /* sharded: the update and the norm over the rank's part, the gradients zeroed whole; ZeRO 1
     * and 2 gather the parameters through a host buffer: this rank's part copied in, all of them
     * out (read and written at the host's bandwidth; the collective itself is the communication's) */
    p->optimizer_shard = tr_plan_optimizer_shard_bytes(job->r, &p->train.g, job->world, job->rank);
    p->shard_elements = tr_plan_shard_elements(&p->train.g, job->world, job->rank);
    double own = p->optimizer ? params * (double)p->optimizer_shard / (double)p->optimizer : params / job->world;
    p->gather_copy_seconds = 2 * (own + params) / job->dev->bandwidth;
    p->optimizer_shard_seconds = tr_plan_optimizer_seconds(job->dev, tr_optimizer_nstate(job->r), own, params,
                                                           (double)p->optimizer_shard);
    return 0;
}

static void close_pair(struct pair *p)
{
    tr_built_free(&p->train);
    tr_built_free(&p->eval);
    free(p->schedule_train), free(p->schedule_eval), free(p->train_plans.at), free(p->eval_plans.at);
}

/* What bisection probes: a candidate at one size, for the whole step (fixed batching) or for
 * one length bucket alone (dynamic). */
struct probe {
    struct pair *p;
    struct tr_candidate *c;
    int bucket;               /* dynamic: which bucket's rows are probed */
    struct tr_length_bucket all[TR_PLAN_MAX_BUCKETS];
    int64_t eval_batch;       /* dynamic: 0 while the last bucket is probed (it sets it) */
};

/* Fixed batching at micro-batch m: the knobs and their footprint. */
static void fixed_at(struct probe *pr, int64_t m)
{
    struct tr_candidate *c = pr->c;
    int64_t batch = pr->p->job->r->train.batch_size;
    c->k.dynamic = false;
    c->k.accumulation = (batch + m - 1) / m;
    c->k.micro = (batch + c->k.accumulation - 1) / c->k.accumulation;   /* as even as the count allows */
    c->k.nbuckets = 1;
    c->k.buckets[0] = (struct tr_length_bucket){pr->p->job->seq, c->k.micro};
    c->k.eval_batch = c->k.micro;
    measure(pr->p, c);
}

/* Dynamic batching with bucket pr->bucket alone at m rows. */
static void bucket_at(struct probe *pr, int64_t m)
{
    struct tr_candidate *c = pr->c;
    c->k.dynamic = true;
    c->k.nbuckets = 1;
    c->k.buckets[0] = (struct tr_length_bucket){pr->all[pr->bucket].len, m};
    c->k.eval_batch = pr->eval_batch ? pr->eval_batch : m;
    measure(pr->p, c);
}

/* The largest m in [lo, hi] at which the probe fits, by bisection after trying hi (the whole
 * batch often fits); lo − 1 when even lo does not. */
static int64_t bisect(struct probe *pr, int64_t lo, int64_t hi, void (*at)(struct probe *, int64_t))
{
    at(pr, hi);
    if (pr->c->fits)
        return hi;
    hi--;
    int64_t good = lo - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        at(pr, mid);
        if (pr->c->fits)
            good = mid, lo = mid + 1;
        else
            hi = mid - 1;
    }
    return good;
}

static void search_fixed(struct pair *p, const struct lengths *h, struct tr_candidate *c)
{
    const struct tr_recipe *r = p->job->r;
    int64_t batch = r->train.batch_size, lo = p->min_micro, hi = batch;
    if (r->optimize.accumulation.name < 0)   /* pinned: that many micro-steps */
        lo = hi = (batch + r->optimize.accumulation.n - 1) / r->optimize.accumulation.n;
    struct probe pr = {.p = p, .c = c};
    int64_t m = bisect(&pr, lo, hi, fixed_at);
    fixed_at(&pr, m >= lo ? m : lo);
    /* best-fit packing is not perfectly monotone: step down until the even split fits */
    while (m >= lo && !c->fits && c->k.micro > lo)
        fixed_at(&pr, c->k.micro - 1);
    timing(p, h, c);
    /* pipelined: fewer rows a micro-batch keep more stages busy (the bubble is (P − 1) / (m + P − 1)):
     * m = P, 2P and 4P micro-batches tried beside the largest that fits, the fastest kept */
    for (int times = 1; p->train.pipelined && r->optimize.accumulation.name >= 0 && times <= 4; times *= 2) {
        int64_t micro = (batch + times * c->k.pipeline - 1) / (times * c->k.pipeline);
        if (micro < lo || micro >= c->k.micro)
            continue;
        struct tr_candidate kept = *c;
        fixed_at(&pr, micro);
        timing(p, h, c);
        if (!c->fits || (kept.fits && kept.step_seconds <= c->step_seconds))
            *c = kept;
    }
}

/* Dynamic batching's bucket bounds: the recipe's, or powers of two from 16 below the longest
 * sequence, then the longest itself; tensor parallel, each rounded up to a multiple of the ranks. */
static int bucket_bounds(const struct tr_plan_job *job, struct tr_length_bucket *b)
{
    const struct tr_ints *given = &job->r->optimize.dynamic_batching.buckets;
    int64_t T = job->tensors > 1 ? job->tensors : 1;   /* tensor parallel: each a multiple of T, as job->seq
                                                        * is, which a padded micro-batch then stays within */
    int n = 0;
    for (int i = 0; n < TR_PLAN_MAX_BUCKETS - 1 && (given->n ? i < given->n : ((int64_t)16 << i) < job->seq); i++) {
        int64_t len = (given->n ? given->v[i] : (int64_t)16 << i) + T - 1;
        len -= len % T;
        if (len < job->seq && (n == 0 || len > b[n - 1].len))
            b[n++].len = len;
    }
    b[n++].len = job->seq;
    return n;
}

/* Each bucket's rows: the most that fit (the longest bucket first, since evaluation batches
 * take its rows), or what optimize.dynamic_batching.tokens pins; then all of them together. */
static void search_dynamic(struct pair *p, const struct lengths *h, struct tr_candidate *c)
{
    const struct tr_recipe *r = p->job->r;
    int64_t batch = r->train.batch_size, tokens = r->optimize.dynamic_batching.tokens;
    struct probe pr = {.p = p, .c = c};
    int n = bucket_bounds(p->job, pr.all);
    for (int b = n - 1; b >= 0; b--) {
        pr.bucket = b;
        int64_t rows;
        if (tokens) {
            rows = tokens / pr.all[b].len;
            rows = rows < p->min_micro ? p->min_micro : rows > batch ? batch : rows;
        } else {   /* a shorter bucket holds at least the rows of the next longer one */
            int64_t lo = b < n - 1 && pr.all[b + 1].rows > p->min_micro ? pr.all[b + 1].rows : p->min_micro;
            rows = bisect(&pr, lo, batch, bucket_at);
            rows = rows < lo ? lo : rows;
        }
        pr.all[b].rows = rows;
        if (b == n - 1)
            pr.eval_batch = rows;
    }
    c->k.dynamic = true;
    c->k.nbuckets = n;
    memcpy(c->k.buckets, pr.all, (size_t)n * sizeof *pr.all);
    c->k.eval_batch = pr.eval_batch;
    c->k.micro = pr.all[n - 1].rows;
    c->k.accumulation = 0;   /* varies with the step's lengths */
    measure(p, c);
    timing(p, h, c);
}

/* ---- what the recipe leaves open ------------------------------------------------------------ */

struct space {
    int precisions[TR_NPRECISIONS], nprecisions;
    struct { int mode, blocks; } remat[TR_PLAN_MAX_BUCKETS * 4];
    int nremat;
    bool batching[2];         /* [0] fixed, [1] dynamic */
    bool shard[4];            /* ZeRO's stages searched: [0] none, [1] optimizer state, [2] gradients,
                               * [3] parameters */
    bool offload[4];          /* the offloads searched, by their TR_OFFLOAD_* bits: [0] none */
};

/* optimize.offload: auto searches the host's memory where the device is not the host's (a
 * backend the host cannot see: a GPU, the fenced CPU), one device alone; pinned, that alone. */
static int offload_space(const struct tr_plan_job *job, struct space *sp, struct tr_diag *diag)
{
    static const int pins[] = {[TR_OFFLOAD_OFF] = 0, [TR_OFFLOAD_OPTIMIZER] = TR_OFFLOAD_STATE,
                               [TR_OFFLOAD_ACTIVATIONS] = TR_OFFLOAD_SAVED,
                               [TR_OFFLOAD_BOTH] = TR_OFFLOAD_STATE | TR_OFFLOAD_SAVED};
    int want = job->r->optimize.offload;
    bool alone = job->world < 2 && job->stages < 2 && job->tensors < 2;
    const struct tr_backend_ops *be = tr_plan_backend(job->dev);
    if (want == TR_OFFLOAD_AUTO) {
        for (int m = 0; m < 4; m++)
            sp->offload[m] = m == 0 || (alone && be && !be->host_visible);
        return 0;
    }
    if (pins[want] && !alone)
        return tr_fail(diag, TR_EINVAL, "optimize.offload: %s offloads one device's memory; across ranks not yet "
                       "(optimize.offload=off)", tr_keys[tr_key_find("optimize.offload")].names[want]);
    sp->offload[pins[want]] = true;
    return 0;
}

/* ZeRO stage 1 across ranks: the gradients are summed where the host sees them (a device's go
 * through host copies, summed whole: not sharded yet). Alone there is nothing to share. */
static int shard_space(const struct tr_plan_job *job, struct space *sp, struct tr_diag *diag)
{
    int want = job->r->optimize.shard;
    bool can = job->world > 1 && tr_plan_backend(job->dev) && tr_plan_backend(job->dev)->host_visible;
    if (want == TR_SHARD_OPTIMIZER && job->world > 1 && !can) {
        tr_diag_add(diag, (struct tr_where){0}, "optimize.shard: optimizer needs gradients the host sees; %s's "
                    "travel through host copies and are summed whole (optimize.shard=off)", job->dev->name);
        return TR_EINVAL;
    }
    if (want == TR_SHARD_GRADIENTS && job->world > 1 && !can) {
        tr_diag_add(diag, (struct tr_where){0}, "optimize.shard: gradients needs gradients the host sees; %s's "
                    "travel through host copies and are summed whole (optimize.shard=off)", job->dev->name);
        return TR_EINVAL;
    }
    if (want == TR_SHARD_PARAMETERS && job->world > 1 && !can) {
        tr_diag_add(diag, (struct tr_where){0}, "optimize.shard: parameters needs gradients the host sees; %s's "
                    "travel through host copies and are summed whole (optimize.shard=off)", job->dev->name);
        return TR_EINVAL;
    }
    sp->shard[0] = want == TR_SHARD_AUTO || want == TR_SHARD_OFF || !can;
    sp->shard[1] = (want == TR_SHARD_AUTO || want == TR_SHARD_OPTIMIZER) && can;
    sp->shard[2] = (want == TR_SHARD_AUTO || want == TR_SHARD_GRADIENTS) && can;
    sp->shard[3] = (want == TR_SHARD_AUTO || want == TR_SHARD_PARAMETERS) && can;
    return 0;
}

static int open_space(const struct tr_plan_job *job, int blocks, struct space *sp, struct tr_diag *diag)
{
    const struct tr_recipe *r = job->r;
    memset(sp, 0, sizeof *sp);
    static const int amp_pins[] = {[TR_AMP_OFF] = TR_PREC_FP32, [TR_AMP_BF16] = TR_PREC_BF16,
                                   [TR_AMP_FP16] = TR_PREC_FP16};
    for (int prec = 0; prec < TR_NPRECISIONS; prec++)
        if (r->optimize.amp == TR_AMP_AUTO ? job->dev->supports[prec] : amp_pins[r->optimize.amp] == prec)
            sp->precisions[sp->nprecisions++] = prec;
    if (!sp->nprecisions || !job->dev->supports[sp->precisions[0]]) {
        tr_diag_add(diag, (struct tr_where){0}, "optimize.amp: %s is not supported by %s",
                    tr_precision_name(amp_pins[r->optimize.amp]), job->dev->name);
        return TR_EINVAL;
    }
    const struct tr_choice *ck = &r->optimize.checkpointing;
    int limit = blocks < (int)(sizeof sp->remat / sizeof sp->remat[0]) - 2 ? blocks
                                                                           : (int)(sizeof sp->remat / sizeof sp->remat[0]) - 2;
    if (ck->name == TR_CKPT_AUTO || ck->name == TR_CKPT_OFF)
        sp->remat[sp->nremat++].mode = TR_REMAT_NONE;
    if ((ck->name == TR_CKPT_AUTO || ck->name == TR_CKPT_SELECTIVE) && blocks > 0)
        sp->remat[sp->nremat].mode = TR_REMAT_SELECTIVE, sp->remat[sp->nremat++].blocks = blocks;
    for (int k = 1; ck->name == TR_CKPT_AUTO && k <= limit; k++)
        sp->remat[sp->nremat].mode = TR_REMAT_FULL, sp->remat[sp->nremat++].blocks = k;
    if (ck->name == TR_CKPT_FULL || ck->name < 0) {
        int k = ck->name < 0 && ck->n < blocks ? (int)ck->n : blocks;
        sp->remat[sp->nremat].mode = k > 0 ? TR_REMAT_FULL : TR_REMAT_NONE, sp->remat[sp->nremat++].blocks = k;
    }
    if (ck->name == TR_CKPT_SELECTIVE && blocks == 0)   /* nothing to recompute in a model without blocks */
        sp->remat[sp->nremat++].mode = TR_REMAT_NONE;
    int mode = r->optimize.dynamic_batching.mode;
    bool text = job->data->kind == TR_DATA_TEXT_CLASSES;
    if (mode == TR_ON && job->data->kind == TR_DATA_FEATURES) {
        tr_diag_add(diag, (struct tr_where){0}, "optimize.dynamic_batching: on batches text by length; data set %s "
                    "holds feature vectors", job->data->name);
        return TR_EINVAL;
    }
    sp->batching[0] = mode != TR_ON;
    /* language modelling windows are all one length: buckets would hold nothing but the last */
    sp->batching[1] = mode == TR_ON || (mode == TR_AUTO && text && r->optimize.accumulation.name >= 0);
    return offload_space(job, sp, diag) ? TR_EINVAL : shard_space(job, sp, diag);
}

/* ---- the choice ----------------------------------------------------------------------------- */

/* The checklist's order of risk, the seed's decision tree read from its end: AMP is the first
 * thing to try (the least risky knob), then checkpointing, then dynamic batching, and
 * accumulation the last resort. So among near-ties the knob compared first is the riskiest:
 * fewer micro-steps first, then fixed over dynamic batching, then less checkpointing, and
 * only then less precision lost — a plan that needs AMP alone beats one that needs any other
 * knob, and fp32 beats bf16 only when nothing else differs (then AMP would buy nothing the
 * budget needs, and a 16-bit copy rounds). Negative when a is the safer. */
static int risk_order(const struct tr_candidate *a, const struct tr_candidate *b)
{
    double ma = round(a->micro_steps * 100), mb = round(b->micro_steps * 100);
    if (ma != mb)
        return ma < mb ? -1 : 1;
    if (a->k.dynamic != b->k.dynamic)
        return a->k.dynamic ? 1 : -1;
    int ra = a->k.remat_mode == TR_REMAT_NONE ? 0 : a->k.remat_mode == TR_REMAT_SELECTIVE ? 1 : 1 + a->k.remat_blocks;
    int rb = b->k.remat_mode == TR_REMAT_NONE ? 0 : b->k.remat_mode == TR_REMAT_SELECTIVE ? 1 : 1 + b->k.remat_blocks;
    if (ra != rb)
        return ra < rb ? -1 : 1;
    if (a->k.precision != b->k.precision)
        return a->k.precision - b->k.precision;
    if (a->k.shard != b->k.shard)
        return a->k.shard - b->k.shard;   /* sharding changes no bit, but is one more moving part */
    return __builtin_popcount((unsigned)a->k.offload) - __builtin_popcount((unsigned)b->k.offload);   /* as offloading */
}

static void describe(const struct tr_plan *p, const struct tr_candidate *c, char *out, size_t size)
{
    char remat[32];
    tr_knobs_remat_words(&c->k, p->blocks, remat, sizeof remat);
    const char *shard = c->k.shard == 3 ? ", optimizer state, gradients and parameters sharded"
                        : c->k.shard == 2 ? ", optimizer state and gradients sharded"
                        : c->k.shard ? ", optimizer state sharded" : "";
    char piped[224] = "";
    if (c->k.pipeline > 1)
        snprintf(piped, sizeof piped, ", %d pipeline stages", c->k.pipeline);
    if (c->k.sequence)
        snprintf(piped + strlen(piped), sizeof piped - strlen(piped), ", sequence parallel");
    char sent[96];
    tr_knobs_offload_words(&c->k, p->blocks, false, sent, sizeof sent);
    if (c->k.offload)
        snprintf(piped + strlen(piped), sizeof piped - strlen(piped), ", %s offloaded to the host", sent);
    if (c->k.dynamic)
        snprintf(out, size, "%s, checkpointing %s, dynamic batching in %d buckets (%.1f micro-steps a step)%s%s",
                 tr_precision_name(c->k.precision), remat, c->k.nbuckets, c->micro_steps, shard, piped);
    else
        snprintf(out, size, "%s, checkpointing %s, %lld × %lld%s%s", tr_precision_name(c->k.precision), remat,
                 (long long)c->k.accumulation, (long long)c->k.micro, shard, piped);
}

/* What must fit of a candidate: its footprint, pipelined its largest stage's. */
static uint64_t needs(const struct tr_candidate *c)
{
    return c->k.pipeline > 1 ? c->worst_footprint : c->footprint;
}

static void choose(struct tr_plan *p)
{
    p->chosen = p->smallest = -1;
    for (int i = 0; i < p->ncand; i++) {
        const struct tr_candidate *c = &p->cand[i];
        if (p->smallest < 0 || needs(c) < needs(&p->cand[p->smallest]))
            p->smallest = i;
        if (c->fits && (p->chosen < 0 || c->step_seconds < p->cand[p->chosen].step_seconds))
            p->chosen = i;
    }
    char what[320], size[32], budget[32];
    tr_format_bytes(p->budget, budget);
    if (p->chosen < 0) {
        if (p->smallest < 0) {
            snprintf(p->reason, sizeof p->reason, "no candidate could be built");
            return;
        }
        describe(p, &p->cand[p->smallest], what, sizeof what);
        tr_format_bytes(needs(&p->cand[p->smallest]), size);
        char raise[512] = "";
        if (p->ceiling.kind != TR_CEILING_NONE)
            tr_plan_ceiling_refusal(&p->ceiling, needs(&p->cand[p->smallest]), raise, sizeof raise);
        const struct tr_candidate *small = &p->cand[p->smallest];
        if (needs(small) <= p->budget && small->host_bytes > p->host_budget) {   /* the host's budget refused it */
            char host[32], spare[32];
            tr_format_bytes(small->host_bytes, host), tr_format_bytes(p->host_budget, spare);
            snprintf(p->reason, sizeof p->reason, "nothing fits in %s with %s of the host's memory: offloading fits "
                     "the device (%s, footprint %s) but holds %s in the host's memory; budget.host_memory=%llu or "
                     "more would fit", budget, spare, what, size, host, (unsigned long long)small->host_bytes);
        } else if (p->ceiling.kind == TR_CEILING_SPACE)
            snprintf(p->reason, sizeof p->reason, "%s (the smallest footprint is %s: %s)", raise, size, what);
        else if (*raise)
            snprintf(p->reason, sizeof p->reason, "nothing fits in %s, the %s of this process's cgroup: the smallest "
                     "footprint is %s (%s); %s", budget, p->ceiling.name, size, what, raise);
        else
            snprintf(p->reason, sizeof p->reason, "nothing fits in %s%s: the smallest footprint is %s (%s); "
                     "budget.memory=%llu or more would fit", budget, p->cand[p->smallest].k.pipeline > 1 ?
                     " on each rank" : "", size, what, (unsigned long long)needs(&p->cand[p->smallest]));
        return;
    }
    double fastest = p->cand[p->chosen].step_seconds;
    int tie = p->chosen, fit = 0;
    for (int i = 0; i < p->ncand; i++) {
        const struct tr_candidate *c = &p->cand[i];
        fit += c->fits;
        if (c->fits && c->step_seconds <= fastest * (1 + NEAR_TIE) && risk_order(c, &p->cand[tie]) < 0)
            tie = i;
    }
    describe(p, &p->cand[tie], what, sizeof what);
    tr_format_bytes(p->cand[tie].footprint, size);
    if (tie == p->chosen)
        snprintf(p->reason, sizeof p->reason, "%s: the fastest of the %d candidates that fit %s "
                 "(predicted %.3g s a step, footprint %s)", what, fit, budget, p->cand[tie].step_seconds, size);
    else
        snprintf(p->reason, sizeof p->reason, "%s: within %.0f%% of the fastest of the %d candidates that fit %s "
                 "and lower in the checklist's order of risk (AMP the least risky knob, then checkpointing, "
                 "dynamic batching, accumulation the last resort) (predicted %.3g s a step, footprint %s)", what,
                 NEAR_TIE * 100, fit, budget, p->cand[tie].step_seconds, size);
    p->chosen = tie;
}

/* ---- entry points ---------------------------------------------------------------------------- */

static struct tr_candidate *add_candidate(struct tr_plan *p)
{
    p->cand = tr_xrealloc(p->cand, (size_t)(p->ncand + 1) * sizeof *p->cand);
    memset(&p->cand[p->ncand], 0, sizeof *p->cand);
    return &p->cand[p->ncand++];
}

static void start(struct tr_plan *p, const struct tr_plan_job *job)
{
    memset(p, 0, sizeof *p);
    p->dev = *job->dev;
    p->budget = job->budget;
    p->host_budget = job->host_budget;
    p->ceiling = job->ceiling;
    p->batch = job->r->train.batch_size;
    p->seq = job->seq;
    p->chosen = p->smallest = -1;
}

/* The blocks the model marks for checkpointing; across ranks, each rank's sharded optimizer
 * state into p (the parameters are the model's). */
static int model_blocks(struct tr_plan *p, const struct tr_plan_job *job)
{
    struct tr_graph g;
    struct tr_model m;
    const struct tr_split *s = &job->data->train;
    tr_graph_init(&g);
    tr_model_build(&g, job->r, s->rank, s->dims, job->data->nclasses, job->data->vocab, 1, &m);
    int blocks = g.error ? 0 : tr_graph_blocks(&g);
    for (int v = 0; v < g.nvalues; v++)
        p->stateful |= g.values[v].kind == TR_STATE;
    p->world = job->world;
    p->bus_rate = job->bus_rate;
    if (job->world > 1 && !g.error) {
        p->shard_bytes = tr_xcalloc((size_t)job->world, sizeof *p->shard_bytes);
        p->shard_elements = tr_xcalloc((size_t)job->world, sizeof *p->shard_elements);
        for (int k = 0; k < job->world; k++) {
            p->shard_bytes[k] = tr_plan_optimizer_shard_bytes(job->r, &g, job->world, k);
            p->shard_elements[k] = tr_plan_shard_elements(&g, job->world, k);
        }
    }
    tr_graph_free(&g);
    return blocks;
}

/* What no plan can do yet: pipelines and tensor parallelism on GPU ranks (and either with ZeRO:
 * the search skips those candidates). */
static int refused(const struct tr_plan_job *job, struct tr_diag *diag)
{
    if ((job->stages > 1 || job->tensors > 1) && job->dev->kind != TR_DEVICE_CPU)
        return tr_fail(diag, TR_EINVAL, "optimize.parallel: pipeline stages and tensor parallelism run on CPU ranks; "
                       "on GPU ranks (NCCL) not yet");
    return 0;
}

/* Why sequence parallelism cannot split this job's sequence over its tensor ranks, or NULL:
 * every micro-batch's length must be a multiple of them — a classifier's batches are padded to
 * one, which its positions must reach (model.max_len a multiple), a language model's windows
 * are as long as they are. */
static const char *sequence_refused(const struct tr_plan_job *job)
{
    int64_t T = job->tensors;
    if (T < 2)
        return "there are no tensor ranks to split the sequence over: run on 2 or more ranks with "
               "optimize.parallel.tensor 2 or more";
    if (job->r->model.max_len % T)
        return "model.max_len is not a multiple of optimize.parallel.tensor (each micro-batch's length is padded "
               "to one)";
    if (job->data->kind == TR_DATA_TEXT_LM && tr_text_longest(&job->data->train) % T)
        return "the language model's window is not a multiple of optimize.parallel.tensor";
    return NULL;
}

/* Whether the candidates from `from` on without any offloading (and unsharded) all fit the whole
 * batch in one micro-batch (dynamic: each length bucket's): the same knobs with activations
 * offloaded run the same kernels and add the link's time, so none of them could be faster or
 * taken among near-ties (offloading ranks after them in the order of risk). */
static bool whole_batch(const struct tr_plan *p, int from, int64_t batch)
{
    int n = 0;
    for (int i = from; i < p->ncand; i++) {
        const struct tr_candidate *c = &p->cand[i];
        if (c->k.offload || c->k.shard)
            continue;
        bool whole = c->k.dynamic || c->k.accumulation == 1;
        for (int b = 0; c->k.dynamic && b < c->k.nbuckets; b++)
            whole &= c->k.buckets[b].rows >= batch;
        if (!c->fits || !whole)
            return false;
        n++;
    }
    return n > 0;
}

int tr_plan_search(struct tr_plan *p, const struct tr_plan_job *job, struct tr_diag *diag)
{
    start(p, job);
    if (refused(job, diag))
        return TR_EINVAL;
    /* sequence parallelism, beside tensor parallelism: a memory knob searched like checkpointing */
    int seq_mode = job->r->optimize.parallel.sequence;
    const char *no_sequence = sequence_refused(job);
    if (seq_mode == TR_SWITCH_ON && no_sequence)
        return tr_fail(diag, TR_EINVAL, "optimize.parallel.sequence: on, but %s", no_sequence);
    int seq_first = seq_mode == TR_SWITCH_ON, seq_last = seq_mode != TR_SWITCH_OFF && !no_sequence;
    p->blocks = model_blocks(p, job);
    struct space sp;
    int rc = open_space(job, p->blocks, &sp, diag);
    if (rc)
        return rc;
    if (p->stateful && job->world > 1 && job->r->optimize.shard == TR_SHARD_PARAMETERS)
        return tr_fail(diag, TR_EINVAL, "optimize.shard: parameters shards no running statistics (batch norm's), "
                       "which every rank keeps and averages: this model has them; take gradients instead");
    struct lengths h;
    lengths_of(job, &h);
    int by_time[TR_MAX_STAGES + 1] = {0};   /* pipelined: the last split balanced by time */
    /* the activations' offload by grain (graph.h: tr_offload_grain): none (blocks −1), every
     * block's, then the first quarter's, half's and three quarters' of the blocks, and the largest
     * half of the bytes (each a program of its own, taken where it sends fewer than every
     * block's); optimize.offload_blocks or offload_largest pinned: that grain alone */
    struct tr_offload_grain grains[6] = {{-1, 0, 0}, {0, 0, 0}};
    int ngrains = 2;
    const struct tr_choice *pin = &job->r->optimize.offload_blocks, *pin_largest = &job->r->optimize.offload_largest;
    if (pin->name < 0 || pin_largest->name < 0) {
        grains[1].blocks = pin->name < 0 && pin->n < p->blocks ? (int)pin->n : 0;
        grains[1].largest = pin_largest->name < 0 && pin_largest->n < 100 ? (int)pin_largest->n : 0;
    } else {
        for (int q = 1; q <= 3; q++) {
            int n = (p->blocks * q + 3) / 4;
            if (n >= 1 && n < p->blocks && n != grains[ngrains - 1].blocks)
                grains[ngrains++] = (struct tr_offload_grain){n, 0, 0};
        }
        grains[ngrains++] = (struct tr_offload_grain){0, 50, 0};
    }
    for (int seq = seq_first; seq <= seq_last && !rc; seq++)   /* sequence parallel: off, then on */
        for (int a = 0; a < sp.nprecisions && !rc; a++)
            for (int k = 0; k < sp.nremat && !rc; k++)
                /* gathered 1: ZeRO 3's program, which is its own; 2: pipelined, the stages balanced by memory */
                for (int gathered = 0; gathered < 2 + (job->stages > 1) && !rc; gathered++)
                    /* saved: the activations offloaded (grain: which of them), a program of its own */
                    for (int grain = 0, every = 0, without = p->ncand; grain < ngrains && !rc; grain++) {
                        int saved = grains[grain].blocks < 0 ? 0 : TR_OFFLOAD_SAVED;
                        bool part = saved && (grains[grain].blocks > 0 || grains[grain].largest > 0);
                        if (gathered == 1 && (!sp.shard[3] || p->stateful || job->stages > 1 || job->tensors > 1))
                            continue;
                        if (!sp.offload[saved] && !sp.offload[saved | TR_OFFLOAD_STATE])
                            continue;
                        if (saved && whole_batch(p, without, job->r->train.batch_size))
                            break;   /* these knobs fit without it at their fastest: it only adds time */
                        bool by_memory = gathered == 2;
                        struct tr_knobs knobs = {.precision = sp.precisions[a], .remat_mode = sp.remat[k].mode,
                                                 .remat_blocks = sp.remat[k].blocks, .shard = gathered == 1 ? 3 : 0,
                                                 .pipeline = job->stages > 1 ? job->stages : 1,
                                                 .tensor = job->tensors > 1 ? job->tensors : 1, .sequence = seq,
                                                 .offload = saved, .saved_blocks = saved ? grains[grain].blocks : 0,
                                                 .saved_largest = grains[grain].largest};
                        struct pair pair;
                        if ((rc = open_pair(&pair, job, &knobs, by_memory, diag))) {
                            close_pair(&pair);
                            break;
                        }
                        if (saved && !part)
                            every = pair.train.offloaded;
                        if ((saved && !pair.train.offloaded && job->r->optimize.offload == TR_OFFLOAD_AUTO) ||
                            (part && (!pair.train.offloaded || pair.train.offloaded == every))) {
                            close_pair(&pair);   /* nothing worth sending, or no fewer: a program searched already */
                            continue;
                        }
                        /* selective recomputation that finds nothing cheap to recompute is no checkpointing:
                         * searched again only when the recipe pins it */
                        bool empty = knobs.remat_mode == TR_REMAT_SELECTIVE && pair.train.remat_nodes == 0 &&
                                     job->r->optimize.checkpointing.name == TR_CKPT_AUTO;
                        /* balanced by memory as by time: nothing new to try */
                        bool same_split = !memcmp(pair.first_block, by_time, sizeof by_time);
                        if (!by_memory)
                            memcpy(by_time, pair.first_block, sizeof by_time);
                        for (int dyn = 0; dyn < 2 && !empty && !(by_memory && same_split); dyn++)
                            for (int shard = gathered == 1 ? 3 : 0; shard < (gathered == 1 ? 4 : 3); shard++)
                                for (int state = 0; state <= TR_OFFLOAD_STATE; state += TR_OFFLOAD_STATE) {
                                    if (!sp.batching[dyn] || !sp.shard[shard] || p->ncand >= MAX_CANDIDATES ||
                                        (shard && (job->stages > 1 || job->tensors > 1)) ||   /* spread: no ZeRO yet */
                                        !sp.offload[saved | state] || (state && shard))
                                        continue;
                                    struct tr_candidate *c = add_candidate(p);
                                    c->k = knobs;
                                    c->k.shard = shard;
                                    c->k.offload = saved | state;
                                    memcpy(c->k.first_block, pair.first_block, sizeof c->k.first_block);
                                    if (dyn)
                                        search_dynamic(&pair, &h, c);
                                    else
                                        search_fixed(&pair, &h, c);
                                }
                        close_pair(&pair);
                    }
    free(h.count);
    if (!rc)
        choose(p);
    return rc;
}

/* Whether layout a (its plan; the model spread over as many ranks as b's or more) beats b: the
 * seed's decision tree spreads the model last — over more ranks only when b's fits nothing
 * (bench/README.md: on this host's ranks the measured bubble outgrows the forecast with many small
 * micro-batches, so "faster" is not trusted to move a model that fits: pin optimize.parallel for
 * that); over as many (pipeline or tensor), the faster by forecast when both fit; between layouts
 * that fit nothing, the smaller largest footprint. */
static bool better_layout(const struct tr_plan *a, int a_spread, const struct tr_plan *b, int b_spread)
{
    if (b->ncand == 0)
        return a->ncand > 0;
    if (a->chosen >= 0 && b->chosen >= 0)
        return a_spread == b_spread && a->cand[a->chosen].step_seconds < b->cand[b->chosen].step_seconds;
    if (b->chosen >= 0 || a->chosen >= 0)
        return a->chosen >= 0;
    const struct tr_candidate *x = &a->cand[a->smallest], *y = &b->cand[b->smallest];
    uint64_t fx = x->k.pipeline > 1 ? x->worst_footprint : x->footprint;
    uint64_t fy = y->k.pipeline > 1 ? y->worst_footprint : y->footprint;
    return fx < fy;
}

int tr_plan_search_layouts(struct tr_plan *p, struct tr_plan_job *job, struct tr_recipe *share,
                           const struct tr_recipe *whole, int ranks, struct tr_diag *diag)
{
    const struct tr_recipe *r = whole;
    int pinned_p = r->optimize.parallel.pipeline > 0 ? (int)r->optimize.parallel.pipeline : 0;
    int pinned_t = r->optimize.parallel.tensor > 0 ? (int)r->optimize.parallel.tensor : 0;
    bool data_only = r->optimize.parallel.mode == TR_PARALLEL_DATA;
    memset(p, 0, sizeof *p);
    int want_p = pinned_p ? pinned_p : 1, want_t = pinned_t ? pinned_t : 1;
    if (data_only && want_p * want_t > 1)
        return tr_fail(diag, TR_EINVAL, "optimize.parallel: data keeps the whole model on every rank, but pipeline is %d "
                       "and tensor %d", want_p, want_t);
    if (ranks % (want_p * want_t) && want_t == 1)
        return tr_fail(diag, TR_EINVAL, "optimize.parallel.pipeline %d does not divide the %d ranks", want_p, ranks);
    if (ranks % (want_p * want_t))
        return tr_fail(diag, TR_EINVAL, "optimize.parallel.tensor %d%s%.0d does not divide the %d ranks", want_t,
                       want_p > 1 ? " × pipeline " : "", want_p > 1 ? want_p : 0, ranks);
    int best_p = 0, best_t = 0, rc = 0;
    char whole_model[160] = "";   /* how the layout with the whole model on each rank did */
    /* by the ranks a model is spread over, fewest first; at each, the pipelines then the tensor splits */
    for (int spread = 1; spread <= ranks && !rc; spread++)
        for (int P = 1; P <= spread && P <= TR_MAX_STAGES && !rc; P++) {
            int T = spread / P;
            if (spread % P || (pinned_p && P != pinned_p) || (pinned_t && T != pinned_t) ||
                (data_only && spread > 1) || (r->optimize.parallel.sequence == TR_SWITCH_ON && T < 2 && !pinned_t))
                continue;   /* sequence parallelism pinned on: only layouts with tensor ranks */
            bool named = spread == 1 || (P == (pinned_p ? pinned_p : 1) && T == (pinned_t ? pinned_t : 1));
            int64_t data = ranks / spread;
            if (ranks % spread || r->train.batch_size % data) {   /* a layout the ranks or the batch cannot take */
                if (named && !(ranks % spread))
                    rc = tr_fail(diag, TR_EINVAL, "train.batch_size %lld does not split evenly over %lld data ranks",
                                 (long long)r->train.batch_size, (long long)data);
                continue;
            }
            struct tr_recipe one = *whole;
            one.train.batch_size = r->train.batch_size / data;
            struct tr_plan_job at = *job;
            at.r = &one, at.world = (int)data, at.rank = 0, at.stages = P, at.stage = 0, at.tensors = T, at.tensor = 0;
            tr_plan_job_round_seq(&at);
            struct tr_plan plan;
            struct tr_diag why = {0};
            int failed = tr_plan_search(&plan, &at, &why);
            if (!failed && spread == 1 && plan.smallest >= 0)
                snprintf(whole_model, sizeof whole_model, "with the whole model on each rank nothing fits (the "
                         "smallest footprint is %.0f MiB)", (double)plan.cand[plan.smallest].footprint / 1048576);
            if (failed && named) {   /* the model itself refused */
                rc = tr_fail_because(diag, failed, &why, "planning");
            } else if (!failed && better_layout(&plan, spread, p, best_p * best_t)) {
                tr_plan_free(p);
                *p = plan;
                best_p = P, best_t = T;
                *share = one;
            } else {
                tr_plan_free(&plan);
            }
            tr_diag_free(&why);
        }
    if (rc || !best_p)
        return rc ? rc : tr_fail(diag, TR_EINVAL, "no layout of %d ranks could be planned", ranks);
    job->r = share, job->world = ranks / (best_p * best_t), job->rank = 0;
    job->stages = best_p, job->stage = 0, job->tensors = best_t, job->tensor = 0;
    tr_plan_job_round_seq(job);
    snprintf(p->layout_why, sizeof p->layout_why, "%s", pinned_p > 1 || pinned_t > 1 ? "optimize.parallel pins it"
             : best_p * best_t == 1 ? "the whole model fits each rank" : whole_model);
    return 0;
}

int tr_plan_replay(struct tr_plan *p, const struct tr_plan_job *job, const struct tr_knobs *k,
                   struct tr_diag *diag)
{
    /* a fixed micro-batch's count follows the batch: a plan saved for another train.batch_size
     * (another rank count's share of it) cuts this batch into as many as it takes */
    struct tr_knobs kept = *k;
    int64_t batch = job->r->train.batch_size;
    if (!kept.dynamic && (kept.micro < 1 || kept.micro > batch))
        return tr_fail(diag, TR_EINVAL, "the saved plan's micro-batch of %lld samples does not fit train.batch_size "
                       "%lld", (long long)kept.micro, (long long)batch);
    if (!kept.dynamic)
        kept.accumulation = (batch + kept.micro - 1) / kept.micro;
    /* a sharded plan resumed alone (or where the gradients are not the host's) holds it all */
    if (job->world == 1 || !tr_plan_backend(job->dev) || !tr_plan_backend(job->dev)->host_visible)
        kept.shard = 0;
    k = &kept;
    start(p, job);
    if (refused(job, diag))
        return TR_EINVAL;
    p->blocks = model_blocks(p, job);
    p->replayed = true;
    struct pair pair;
    struct tr_diag why = {0};
    if (open_pair(&pair, job, k, false, &why)) {
        close_pair(&pair);
        return tr_fail_because(diag, TR_EINVAL, &why, "the saved plan");
    }
    struct lengths h;
    lengths_of(job, &h);
    struct tr_candidate *c = add_candidate(p);
    c->k = *k;
    if (k->pipeline > 1)
        memcpy(c->k.first_block, pair.first_block, sizeof c->k.first_block);
    measure(&pair, c);
    timing(&pair, &h, c);
    if (k->pipeline > 1)   /* rank 0 chose it for every stage; here this rank's stage must fit its own process */
        c->fits = c->footprint <= job->budget;
    free(h.count);
    close_pair(&pair);
    char what[320], need[32], budget[32];
    describe(p, c, what, sizeof what);
    tr_format_bytes(c->footprint, need);
    tr_format_bytes(p->budget, budget);
    p->smallest = 0;
    p->chosen = c->fits ? 0 : -1;
    if (c->fits)
        snprintf(p->reason, sizeof p->reason, "%s: replayed from the saved plan (footprint %s within %s)", what,
                 need, budget);
    else
        snprintf(p->reason, sizeof p->reason, "the saved plan (%s) no longer fits: its footprint is %s, over "
                 "the budget of %s by %llu bytes", what, need, budget,
                 (unsigned long long)(c->footprint - p->budget));
    return 0;
}

void tr_plan_free(struct tr_plan *p)
{
    free(p->cand), free(p->shard_bytes), free(p->shard_elements);
    memset(p, 0, sizeof *p);
}
