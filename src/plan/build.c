/* Building a candidate's program (plan.h): the model builder, then the passes in DESIGN.md §3's
 * order — amp, autodiff, remat, and for ZeRO 3 the gather pass — then one memory plan per length bucket. The planner builds
 * every candidate this way; the trainer builds the chosen one the same way. */
#include "plan/plan.h"
#include "plan/shard.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/onednn.h"
#include "recipe/optimizers.h"

/* The remat pass for the knobs: mode in the first remat_blocks blocks, the rest kept. The
 * first k, not the last: their saved activations wait longest for their backward, and by the
 * time it reaches them the later, kept blocks have been freed, so the peak is one block's
 * activations lower than with the last k. */
static void checkpoint_blocks(struct tr_built *b, const struct tr_knobs *k)
{
    int of = tr_graph_blocks(&b->g), blocks = k->remat_blocks < of ? k->remat_blocks : of;
    if (k->remat_mode == TR_REMAT_NONE || blocks <= 0)
        return;
    uint8_t *modes = tr_xcalloc((size_t)of, 1);
    memset(modes, k->remat_mode, (size_t)blocks);
    tr_remat(&b->g, modes, of);
    free(modes);
    for (int i = 0; i < b->g.nnodes; i++)
        b->remat_nodes += b->g.nodes[i].phase == TR_RECOMPUTE;
}

int tr_build(struct tr_built *b, const struct tr_plan_job *job, const struct tr_knobs *k, bool training,
             struct tr_diag *d)
{
    const struct tr_split *split = &job->data->train;
    static const enum tr_dtype low[] = {[TR_PREC_FP32] = TR_F32, [TR_PREC_BF16] = TR_BF16, [TR_PREC_FP16] = TR_F16};
    memset(b, 0, sizeof *b);
    b->loss_scale = -1;
    tr_graph_init(&b->g);
    /* images channels last on the CPU, where oneDNN's convolutions take them with no reorder
     * (onednn_conv.c); [N, C, H, W] on the GPU, whose kernels have not been measured otherwise */
    tr_graph_layout(&b->g, job->dev->kind == TR_DEVICE_CPU ? TR_NHWC : TR_NCHW);
    b->g.tensor = k->tensor > 1 ? k->tensor : 1;   /* tensor parallel: this rank's slice of each block */
    b->g.tensor_rank = k->tensor > 1 ? job->tensor : 0;
    b->g.sequence = k->tensor > 1 && k->sequence;
    tr_model_build(&b->g, job->r, split->rank, split->dims, job->data->nclasses, job->data->vocab, training, &b->m);
    /* 16-bit working copies of the weights are what 16-bit GEMM hardware reads: a GPU's, and a
     * CPU's bf16 on oneDNN (AVX-512 BF16, AMX); elsewhere the CPU's kernels would widen them
     * back to f32, so there the weights stay f32 (amp.c) */
    bool copies = job->dev->kind == TR_DEVICE_CUDA ||
                  (job->dev->kind == TR_DEVICE_CPU && k->precision == TR_PREC_BF16 && tr_onednn_computes_bf16());
    if (!b->g.error && k->precision != TR_PREC_FP32)
        tr_amp(&b->g, low[k->precision], &b->m.logits, b->m.logits >= 0, copies);
    if (training && !b->g.error)
        b->loss_scale = tr_autodiff(&b->g);
    if (training && !b->g.error)
        checkpoint_blocks(b, k);
    if (k->shard == 3 && !b->g.error)   /* ZeRO 3: every rank keeps its shard, reads copies gathered whole */
        tr_gather_params(&b->g, job->gather_ahead);
    int keep[2] = {b->m.loss, b->m.logits >= 0 ? b->m.logits : b->m.rank};
    if (training && (k->offload & TR_OFFLOAD_SAVED) && !b->g.error)   /* saved activations to the host */
        b->offloaded = tr_offload(&b->g, keep, 2, (struct tr_offload_grain){k->saved_blocks, k->saved_largest, job->seq});
    if (k->pipeline > 1 && !b->g.error)   /* pipelined: this rank's stage of the model */
        b->g.error = tr_stages_split(&b->stages, &b->g, NULL, b->g.nnodes, k->pipeline, k->first_block);
    b->pipelined = k->pipeline > 1 && !b->g.error;
    if (b->g.error)
        return tr_fail(d, TR_EINVAL, "model: %s", b->g.message);
    struct tr_bucket buckets[TR_PLAN_MAX_BUCKETS];
    int n = training ? k->nbuckets : 1;
    for (int i = 0; i < n; i++)
        buckets[i] = training ? (struct tr_bucket){k->buckets[i].rows, k->buckets[i].len}
                              : (struct tr_bucket){k->eval_batch, job->seq};
    /* a profile's workspaces are its libraries', counted outside the regions */
    if (b->pipelined ? tr_program_plan_stage(&b->p, &b->g, &b->stages, job->stage, training ? tr_plan_slots(job, k) : 1,
                                             buckets, n, keep, 2, tr_plan_workspace(job->dev))
                     : tr_program_plan(&b->p, &b->g, buckets, n, keep, 2, tr_plan_workspace(job->dev),
                                       training && tr_knobs_grads_in_arena(k)))
        return tr_fail(d, TR_EINVAL, "planning the %s program failed", training ? "training" : "evaluation");
    return 0;
}

int tr_plan_slots(const struct tr_plan_job *job, const struct tr_knobs *k)
{
    int in_flight = k->pipeline - job->stage;   /* 1F1B: the first stage P micro-batches, the last one */
    int world = job->world > 1 ? job->world : 1;
    int64_t micro = k->dynamic ? in_flight : (k->accumulation + world - 1) / world;
    return (int)(micro < in_flight ? (micro > 0 ? micro : 1) : in_flight);
}

void tr_built_free(struct tr_built *b)
{
    tr_stages_free(&b->stages);
    tr_program_free(&b->p);
    tr_graph_free(&b->g);
}

size_t tr_plan_param_bytes(const struct tr_graph *g)
{
    return tr_plan_param_bytes_held(g, NULL);
}

size_t tr_plan_param_bytes_held(const struct tr_graph *g, const struct tr_memplan *held)
{
    size_t params = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM && (!held || held->offset[v] >= 0))
            params += (size_t)tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1) * sizeof(float);
    return params;
}

static size_t state_bytes(const struct tr_recipe *r, size_t elements);

size_t tr_plan_optimizer_bytes(const struct tr_recipe *r, const struct tr_graph *g)
{
    return state_bytes(r, tr_plan_param_bytes(g) / sizeof(float));
}

size_t tr_plan_optimizer_bytes_held(const struct tr_recipe *r, const struct tr_graph *g, const struct tr_memplan *held)
{
    return state_bytes(r, tr_plan_param_bytes_held(g, held) / sizeof(float));
}

int64_t tr_plan_shard_elements(const struct tr_graph *g, int world, int rank)
{
    int n = 0;
    int64_t *numel = tr_xmalloc((size_t)(g->nvalues + 1) * sizeof *numel);
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM)
            numel[n++] = tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
    int64_t own = tr_shard_elements(numel, n, world, rank);
    free(numel);
    return own;
}

size_t tr_plan_optimizer_shard_bytes(const struct tr_recipe *r, const struct tr_graph *g, int world, int rank)
{
    return state_bytes(r, (size_t)tr_plan_shard_elements(g, world, rank));
}

static size_t state_bytes(const struct tr_recipe *r, size_t elements)
{
    size_t bytes = 0;
    const struct tr_optimizer_desc *o = &tr_optimizers[r->train.optimizer.name];
    for (int k = 0; k < tr_optimizer_nstate(r); k++)
        bytes += elements * tr_dtype_size(o->state[k].dtype);
    return bytes;
}
