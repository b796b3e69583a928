/* The plan and program-build stages (session.h). The training graph and the evaluation graph are
 * built by the same model builder, so their parameters (and batch-norm statistics) sit at the
 * same offsets: both programs run on one set of regions, each as large as the larger plan needs. */
#include "train/session.h"
#include "train/ranks.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The layout's numbers for P stages of T tensor ranks among the ranks (session.h), checked; no
 * communicators yet. */
static int layout_for(struct tr_session *s, const struct tr_recipe *r, int P, int T, struct tr_diag *d)
{
    int world = s->comm ? s->comm->world : 1, rank = s->comm ? s->comm->rank : 0;
    if ((P > 1 || T > 1) && r->optimize.parallel.mode == TR_PARALLEL_DATA)
        return tr_fail(d, TR_EINVAL, "optimize.parallel: data keeps the whole model on every rank, but pipeline is %d "
                       "and tensor %d", P, T);
    char spread[64];
    if (T > 1 && P > 1)
        snprintf(spread, sizeof spread, "pipeline %d × tensor %d", P, T);
    else
        snprintf(spread, sizeof spread, "%s %d", T > 1 ? "tensor" : "pipeline", T > 1 ? T : P);
    if (P < 1 || T < 1 || world % (P * T))
        return tr_fail(d, TR_EINVAL, "optimize.parallel.%s does not divide the %d rank%s: start a multiple of %d "
                       "(mpirun -np %d)", spread, world, world == 1 ? "" : "s", P * T, P * T);
    s->layout = (struct tr_rank_layout){.data = world / (P * T), .pipeline = P, .tensor = T,
                                        .data_rank = rank / (P * T), .stage = rank / T % P, .tensor_rank = rank % T};
    return 0;
}

int tr_session_lay_out(struct tr_session *s, const struct tr_recipe *r, int stages, int tensors, struct tr_diag *d)
{
    int rc = layout_for(s, r, stages, tensors, d);
    if (rc || !s->comm) {
        s->data_comm = (struct tr_comm){.world = 1, .local_world = 1};
        return rc;
    }
    const struct tr_rank_layout *l = &s->layout;
    rc = tr_comm_split(s->comm, l->stage * l->tensor + l->tensor_rank, l->data_rank, &s->data_comm, d);
    if (!rc && stages > 1)
        rc = tr_comm_split(s->comm, l->data_rank * l->tensor + l->tensor_rank, l->stage, &s->pipe_comm, d);
    if (!rc && tensors > 1)
        rc = tr_comm_split(s->comm, l->data_rank * l->pipeline + l->stage, l->tensor_rank, &s->tensor_comm, d);
    return rc;
}

/* The ranks r pins the model's spread over (optimize.parallel.pipeline, .tensor), else 1: the
 * layout train's share of the batch was cut for (cli/train.c). */
static int pinned_stages(const struct tr_recipe *r)
{
    return r->optimize.parallel.pipeline > 1 ? (int)r->optimize.parallel.pipeline : 1;
}

static int pinned_tensors(const struct tr_recipe *r)
{
    return r->optimize.parallel.tensor > 1 ? (int)r->optimize.parallel.tensor : 1;
}

/* This rank's share of the batch under the layout (s->recipe, which the job reads). */
static int share_for_layout(struct tr_session *s, const struct tr_recipe *whole, struct tr_diag *d)
{
    s->recipe = *whole;
    if (whole->train.batch_size % s->layout.data)
        return tr_fail(d, TR_EINVAL, "train.batch_size %lld does not split evenly over %d data ranks",
                       (long long)whole->train.batch_size, s->layout.data);
    s->recipe.train.batch_size = whole->train.batch_size / s->layout.data;
    s->job.r = &s->recipe;
    s->job.stages = s->layout.pipeline, s->job.stage = s->layout.stage;
    s->job.tensors = s->layout.tensor, s->job.tensor = s->layout.tensor_rank;
    tr_plan_job_round_seq(&s->job);
    s->job.world = s->layout.data, s->job.rank = s->layout.data_rank;
    return 0;
}

int tr_session_plan(struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data,
                    const char *plan_file, const char *resume_dir, const struct tr_knobs *given,
                    struct tr_diag *d)
{
    struct tr_path own;
    const char *saved = plan_file;
    if (!plan_file && resume_dir && tr_path_set(&own, d, "%s/plan.json", resume_dir))
        return TR_EINVAL;
    if (!plan_file && resume_dir)
        saved = own.s;
    /* across ranks, device auto: one GPU a rank on each host, by its local rank */
    char device[32];
    snprintf(device, sizeof device, "%s", r->device);
    if (!strcmp(r->device, "auto") && s->comm && s->comm->world > 1 && tr_device_cuda_seen())
        snprintf(device, sizeof device, "cuda:%d", s->comm->local_rank);
    if (tr_plan_device_named(&s->dev, device, d))
        return TR_EFAIL;   /* exit 1, whatever the device said */
    if (tr_backend_open(s->dev.kind, s->dev.index, &s->be, d))
        return TR_EFAIL;
    if (tr_plan_job_init(&s->job, r, data, &s->dev, d))
        return TR_EINVAL;
    int world = s->comm ? s->comm->world : 1;
    struct tr_recipe whole = *r;   /* r is the share of the layout cli/train.c cut it for */
    int spread = pinned_stages(r) * pinned_tensors(r);
    whole.train.batch_size = r->train.batch_size * (world % spread ? world : world / spread);
    if (s->comm) {
        s->job.bus_rate = s->bus_rate, s->job.bus_latency = s->bus_latency;
        s->job.gather_ahead = world > 1 && s->comm->multiple && tr_plan_overlap(r, s->comm->local_world, s->dev.threads);
    }
    struct tr_knobs k;
    bool replay = saved && (plan_file || access(saved, F_OK) == 0);
    if (replay) {
        struct tr_diag why = {0};
        if (tr_plan_read_knobs(saved, &k, &why))
            return tr_fail_because(d, TR_EINVAL, &why, "%s", plan_file ? "--plan" : "resume");
    }
    int rc, P = given ? (given->pipeline > 1 ? given->pipeline : 1) : pinned_stages(r);
    int T = given ? (given->tensor > 1 ? given->tensor : 1) : pinned_tensors(r);
    if (!given && replay && r->optimize.parallel.mode == TR_PARALLEL_AUTO && !r->optimize.parallel.pipeline &&
        !r->optimize.parallel.tensor && (k.pipeline > 1 || k.tensor > 1) &&
        world % ((k.pipeline > 1 ? k.pipeline : 1) * (k.tensor > 1 ? k.tensor : 1)) == 0)
        P = k.pipeline > 1 ? k.pipeline : 1, T = k.tensor > 1 ? k.tensor : 1;   /* a saved plan's layout the
                                                                                  * planner chose, where these
                                                                                  * ranks can take it */
    if (!given && !replay && world > 1) {   /* the layouts searched: the model spread last */
        rc = tr_plan_search_layouts(&s->plan, &s->job, &s->recipe, &whole, world, d);
        if (!rc)
            rc = layout_for(s, r, s->job.stages, s->job.tensors, d);
        if (!rc)
            rc = share_for_layout(s, &whole, d);
    } else {
        rc = s->layout.pipeline ? 0 : layout_for(s, r, P, T, d);   /* ranks other than 0: laid out already */
        if (!rc)
            rc = share_for_layout(s, &whole, d);
        if (rc) {
        } else if (given) {
            rc = tr_plan_replay(&s->plan, &s->job, given, d);
        } else if (replay) {
            /* a run resumed on more ranks than it began on: each rank's share of the batch is
             * smaller than the micro-batch it planned, so the share is planned again (the step's
             * gradient is the same sum whatever its micro-batches) */
            bool regrown = !plan_file && !k.dynamic && k.micro > s->recipe.train.batch_size;
            /* another layout (a resume's optimize.parallel, --plan of another run): the same
             * micro-batches, precision and checkpointing on this run's stages, balanced again (a
             * checkpoint holds whole tensors: any stage takes its own) */
            if ((k.pipeline > 1 ? k.pipeline : 1) != s->job.stages) {
                k.pipeline = s->job.stages;
                memset(k.first_block, 0, sizeof k.first_block);
            }
            k.tensor = s->job.tensors;
            rc = regrown ? tr_plan_search(&s->plan, &s->job, d) : tr_plan_replay(&s->plan, &s->job, &k, d);
        } else {
            rc = tr_plan_search(&s->plan, &s->job, d);
        }
    }
    if (rc)
        return TR_EINVAL;
    if (s->plan.chosen < 0)
        return tr_fail(d, TR_ENOFIT, "memory budget: %s", s->plan.reason);
    s->k = s->plan.cand[s->plan.chosen].k;
    static const enum tr_dtype precisions[] = {[TR_PREC_FP32] = TR_F32, [TR_PREC_BF16] = TR_BF16,
                                               [TR_PREC_FP16] = TR_F16};
    s->amp = precisions[s->k.precision];
    return 0;
}

/* The backend's preparation for every bucket's shapes (the CPU's oneDNN primitives), before
 * the first step: the step makes none. */
static int prepare(const struct tr_session *s, const struct tr_program *p, struct tr_diag *d)
{
    int64_t B[TR_PLAN_MAX_BUCKETS], S[TR_PLAN_MAX_BUCKETS];
    for (int i = 0; i < p->nbuckets && i < TR_PLAN_MAX_BUCKETS; i++)
        B[i] = p->buckets[i].B, S[i] = p->buckets[i].S;
    int n = p->nbuckets < TR_PLAN_MAX_BUCKETS ? p->nbuckets : TR_PLAN_MAX_BUCKETS;
    return tr_backend_prepare_program(s->be, p->graph, p->schedule, p->n, B, S, n, d) ? TR_EFAIL : 0;
}

/* The chosen plan's program, training or evaluation, and an executor over its regions. */
static int build_side(struct tr_session *s, struct tr_side *side, bool training, struct tr_diag *d)
{
    int rc = tr_build(&side->b, &s->job, &s->k, training, d);
    if (!rc)
        rc = prepare(s, &side->b.p, d);
    if (rc)
        return rc;
    side->lm = s->job.data->kind == TR_DATA_TEXT_LM;
    side->loss_scale = side->b.loss_scale;
    side->x = (struct tr_exec){.g = &side->b.g, .schedule = side->b.p.schedule, .n = side->b.p.n,
                               .plan = &side->b.p.plans[side->b.p.nbuckets - 1], .be = s->be, .rng = &s->rng};
    return 0;
}

static size_t larger(size_t a, size_t b)
{
    return a > b ? a : b;
}

static int allocate(struct tr_session *s, const struct tr_recipe *r, struct tr_diag *d)
{
    const struct tr_program *train = &s->train.b.p, *eval = &s->eval.b.p;
    size_t bytes[TR_NKINDS], work = larger(train->workspace_bytes, eval->workspace_bytes);
    for (int k = 0; k < TR_NKINDS; k++)
        bytes[k] = larger(train->region_bytes[k], eval->region_bytes[k]);
    if (train->region_bytes[TR_PARAM] != eval->region_bytes[TR_PARAM])
        return tr_fail(d, TR_EFAIL, "internal: training and evaluation lay parameters out differently");
    const struct tr_comm *data = s->comm ? &s->data_comm : NULL;
    size_t own = data ? (size_t)tr_plan_shard_elements(&s->train.b.g, data->world, data->rank) * sizeof(float) : 0;
    if (s->k.shard >= 2 && s->comm)   /* ZeRO 2: the summed gradients of this rank's shard alone */
        bytes[TR_GRAD] = own;
    if (s->k.shard == 3 && s->comm)   /* ZeRO 3: and its parameters */
        bytes[TR_PARAM] = own;
    tr_alloc_init(&s->alloc, s->be->memory);
    /* the regions may take what the budget leaves once everything outside them is counted */
    const struct tr_candidate *c = tr_session_chosen(s);
    tr_alloc_set_limit(&s->alloc, s->plan.budget - (c->footprint - c->peak));
    struct tr_diag why = {0};
    if (tr_exec_alloc(&s->train.x, &s->alloc, bytes, work, &why))
        return tr_fail_because(d, TR_ENOFIT, &why, "memory budget");
    /* offloaded: the host ring of activations, and the optimizer's state, the parameters' host
     * copy and the gradients' (their host regions: optimizer, params, grads) */
    bool state_out = s->k.offload & TR_OFFLOAD_STATE;
    tr_alloc_init(&s->host_alloc, s->be->host_memory);
    tr_alloc_set_limit(&s->host_alloc, s->plan.host_budget);
    void *host[3] = {NULL};
    size_t params = tr_plan_param_bytes(&s->train.b.g);
    if (tr_alloc_region(&s->host_alloc, TR_REGION_ARENA, bytes[TR_HOST], (void **)&s->train.x.base[TR_HOST]) ||
        (state_out && (tr_alloc_region(&s->host_alloc, TR_REGION_PARAMS, bytes[TR_PARAM], &host[0]) ||
                       tr_alloc_region(&s->host_alloc, TR_REGION_GRADS, params, &host[1]))))
        return tr_fail(d, TR_ENOFIT, "host memory budget: %s", tr_alloc_error(&s->host_alloc));
    s->train.x.region_bytes[TR_HOST] = bytes[TR_HOST];
    memcpy(s->eval.x.base, s->train.x.base, sizeof s->eval.x.base);
    memcpy(s->eval.x.region_bytes, s->train.x.region_bytes, sizeof s->eval.x.region_bytes);
    s->eval.x.workspace = s->train.x.workspace;
    const struct tr_comm *shard = s->k.shard ? data : NULL;   /* ZeRO: this rank's part */
    const struct tr_memplan *plan = s->train.x.plan;   /* the gradients' offsets are in the arena where it holds them */
    size_t state = shard ? tr_plan_optimizer_shard_bytes(r, &s->train.b.g, shard->world, shard->rank)
                         : tr_plan_optimizer_bytes_held(r, &s->train.b.g, plan);
    void *p = NULL;
    if (tr_alloc_region(state_out ? &s->host_alloc : &s->alloc, TR_REGION_OPTIMIZER, state, &p))
        return tr_fail(d, TR_ENOFIT, "%smemory budget: %s", state_out ? "host " : "",
                       tr_alloc_error(state_out ? &s->host_alloc : &s->alloc));
    bool arena = plan->grads_in_arena && s->k.shard < 2;   /* stage 2: the optimizer reads the shard's */
    tr_optim_init(&s->optim, r, &s->train.b.g, plan, s->be, s->train.x.base[TR_PARAM],
                  s->train.x.base[arena ? TR_ACT : TR_GRAD], p, shard, s->k.shard);
    if (state_out)
        tr_optim_offload(&s->optim, host[0], host[1]);
    if (s->k.shard == 3 && shard) {   /* both programs read copies gathered from the ranks' parts */
        tr_optim_serve(&s->optim, &s->train.x);
        tr_optim_serve(&s->optim, &s->eval.x);
    }
    if (s->train.b.pipelined) {   /* each program's stage among the stages; the norm is theirs together */
        tr_pipe_init(&s->pipe, &s->pipe_comm, &s->train.b.stages, s->layout.stage, s->train.b.p.slots);
        tr_pipe_init(&s->eval_pipe, &s->pipe_comm, &s->eval.b.stages, s->layout.stage, 2);
        tr_optim_pipelined(&s->optim, &s->pipe_comm, &s->train.b.stages, s->layout.stage);
    }
    if (s->layout.tensor > 1) {   /* both programs' all-reduces over this stage's tensor ranks; the norm theirs */
        for (int i = 0; i < 2; i++) {
            s->tensor_sums[i] = (struct tr_tensor_sums){.comm = &s->tensor_comm};
            (i ? &s->eval : &s->train)->x.collective =
                (struct tr_exec_collective){.run = tr_ranks_tensor_sum, .ctx = &s->tensor_sums[i]};
        }
        tr_optim_tensor(&s->optim, &s->tensor_comm);
        if (s->train.b.g.sequence)   /* the norms' and biases' gradients over a part of the sequence */
            tr_ranks_find_partial(&s->tensor_sums[0], &s->train.b.g);
    }
    return 0;
}

int tr_session_build(struct tr_session *s, const struct tr_recipe *r, struct tr_diag *d)
{
    s->rng = (struct tr_rng_ctx){.seed = (uint64_t)r->seed};
    tr_scaler_init(&s->scaler, r, s->amp == TR_F16);
    int rc = build_side(s, &s->train, true, d);
    if (!rc)
        rc = build_side(s, &s->eval, false, d);
    return rc ? rc : allocate(s, r, d);
}

void tr_session_free(struct tr_session *s)
{
    tr_pipe_free(&s->pipe), tr_pipe_free(&s->eval_pipe);
    tr_comm_close(&s->data_comm), tr_comm_close(&s->pipe_comm), tr_comm_close(&s->tensor_comm);
    free(s->tensor_sums[0].partial);
    s->tensor_sums[0].partial = NULL;
    tr_alloc_destroy(&s->alloc);
    tr_alloc_destroy(&s->host_alloc);
    tr_optim_free(&s->optim);
    for (int i = 0; i < 2; i++) {
        struct tr_side *side = i ? &s->eval : &s->train;
        tr_exec_free(&side->x);
        tr_built_free(&side->b);
    }
    tr_plan_free(&s->plan);
    tr_backend_close(s->be);   /* after the regions it made */
    s->be = NULL;
}

int64_t tr_session_footprint(const struct tr_session *s)
{
    if (s->dev.kind == TR_DEVICE_CUDA)
        return tr_device_in_use(&s->dev);
    /* offloaded on the CPU (the fenced stand-in for a device): the host's regions are in the same
     * resident set, and the device's footprint is the rest */
    struct tr_alloc_stats host;
    tr_alloc_stats(&s->host_alloc, &host);
    int64_t rss = tr_process_peak_rss();
    return rss > 0 && (uint64_t)rss > host.peak ? rss - (int64_t)host.peak : rss;
}

const struct tr_candidate *tr_session_chosen(const struct tr_session *s)
{
    return &s->plan.cand[s->plan.chosen];
}
