/* The op table (ops.h): one row per op of graph.h's enum, in enum order, and the time
 * model's per-op rules it points to. The gradient rules are autodiff.c's; the shape rules
 * are the builders' in graph.c (one per op, named tr_<name>). */
#include "graph/ops.h"

double tr_cost_none(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    return 0;
}

double tr_node_bytes(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    double b = 0;
    for (int i = 0; i < n->nin; i++)
        b += (double)tr_tensor_numel(&in[i]) * (double)tr_dtype_size(in[i].dtype);
    for (int i = 0; i < n->nout; i++)
        b += (double)tr_tensor_numel(&out[i]) * (double)tr_dtype_size(out[i].dtype) * (n->accumulate ? 2 : 1);
    return b;
}

/* ---- FLOPs of the GEMM-like ops (2 per multiply-add); the others' hides behind their bytes */

static double flops_matmul(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    int r = in[0].rank;   /* out [.., M, N], inner K from a [.., M, K] or [.., K, M] */
    return 2.0 * (double)tr_tensor_numel(&out[0]) * (double)in[0].dim[n->attrs.matmul.trans_a ? r - 2 : r - 1];
}

static double flops_linear_cross_entropy(const struct tr_node *n, const struct tr_tensor *in,
                                         const struct tr_tensor *out)
{
    return 2.0 * (double)in[0].dim[0] * (double)in[0].dim[1] * (double)in[1].dim[0];   /* x [N, D] · w [C, D]ᵀ */
}

static double flops_linear_cross_entropy_bwd(const struct tr_node *n, const struct tr_tensor *in,
                                             const struct tr_tensor *out)
{
    /* the logits again, then dx and dw */
    return 6.0 * (double)tr_tensor_numel(&out[0]) * (double)(out[1].rank ? out[1].dim[0] : 1);
}

static double flops_attention(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    return 4.0 * (double)tr_tensor_numel(&in[0]) * (double)in[0].dim[2];   /* q·kᵀ and p·v over [B, H, S, D] */
}

static double flops_attention_bwd(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    return 10.0 * (double)tr_tensor_numel(&in[1]) * (double)in[2].dim[2];   /* p again, then dv, dp, dq, dk */
}

/* 2 per multiply-add of a convolution whose output (or output gradient) is y and filter w. */
static double conv_flops(const struct tr_tensor *y, const struct tr_tensor *w)
{
    return 2.0 * (double)tr_tensor_numel(y) * (double)(w->dim[1] * w->dim[2] * w->dim[3]);
}

static double flops_conv2d(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    return conv_flops(&out[0], &in[1]);   /* out [N, O, H', W'] from w [O, C, kh, kw] */
}

static double flops_conv2d_bwd_data(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    return conv_flops(&in[0], &in[1]);   /* as the forward: dx from dy and w */
}

static double flops_conv2d_bwd_filter(const struct tr_node *n, const struct tr_tensor *in,
                                      const struct tr_tensor *out)
{
    return conv_flops(&in[0], &out[0]);   /* dw from dy and x */
}

/* ---- evaluations of exp, erf or a hash: what such ops cost beyond their bytes on a CPU --- */

static double specials_per_output(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    return (double)tr_tensor_numel(&out[0]);
}

static double specials_per_logit(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    return (double)tr_tensor_numel(&in[0]);
}

static double specials_linear_cross_entropy(const struct tr_node *n, const struct tr_tensor *in,
                                            const struct tr_tensor *out)
{
    return (double)in[0].dim[0] * (double)in[1].dim[0];   /* every logit's exp: x [N, D], w [C, D] */
}

static double specials_linear_cross_entropy_bwd(const struct tr_node *n, const struct tr_tensor *in,
                                                const struct tr_tensor *out)
{
    return (double)in[1].dim[0] * (double)in[2].dim[0];   /* the logits again: dy, x, w, … */
}

static double specials_attention(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    /* the probabilities, S per query: q, k [B, H, S, D] */
    return (double)tr_tensor_numel(&in[0]) / (double)in[0].dim[3] * (double)in[1].dim[2];
}

static double specials_attention_bwd(const struct tr_node *n, const struct tr_tensor *in,
                                     const struct tr_tensor *out)
{
    /* the probabilities again: dy, q, k, … */
    return (double)tr_tensor_numel(&in[1]) / (double)in[1].dim[3] * (double)in[2].dim[2];
}

/* ---- the table ------------------------------------------------------------------------------
 * Unsized, so that its length is its last row's index + 1: a table that stops before the last
 * op fails the assertion below (and conflicts with ops.h's declaration); a row missing in the
 * middle leaves a NULL name, which tests/check_ops.c refuses. */
const struct tr_op_info tr_ops[] = {
    [TR_OP_MATMUL] = {.name = "matmul", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_LOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = flops_matmul, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_BIAS_ADD] = {.name = "bias_add", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_ADD] = {.name = "add", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW_ALL,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_MUL] = {.name = "mul", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW_ALL,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_SCALE] = {.name = "scale", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_RELU] = {.name = "relu", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_GELU] = {.name = "gelu", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = specials_per_output, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_TANH] = {.name = "tanh", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = specials_per_output, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_SOFTMAX] = {.name = "softmax", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_WIDE,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = specials_per_output, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_LOG_SOFTMAX] = {.name = "log_softmax", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_WIDE,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = specials_per_output, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_CROSS_ENTROPY] = {.name = "cross_entropy", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_WIDE,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = specials_per_logit, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_LINEAR_CROSS_ENTROPY] = {.name = "linear_cross_entropy", .nin_min = 3, .nin_max = 3, .nout = 3, .amp = TR_AMP_WIDE,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = flops_linear_cross_entropy, .specials = specials_linear_cross_entropy, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_LAYERNORM] = {.name = "layernorm", .nin_min = 3, .nin_max = 3, .nout = 2, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_EMBEDDING] = {.name = "embedding", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_START,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_DROPOUT] = {.name = "dropout", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = specials_per_output, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_ATTENTION] = {.name = "attention", .nin_min = 3, .nin_max = 4, .nout = 2, .amp = TR_AMP_LOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = flops_attention, .specials = specials_attention, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_CONV2D] = {.name = "conv2d", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_LOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = flops_conv2d, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_BATCHNORM] = {.name = "batchnorm", .nin_min = 5, .nin_max = 5, .nout = 2, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_MAXPOOL] = {.name = "maxpool", .nin_min = 1, .nin_max = 1, .nout = 2, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_AVGPOOL] = {.name = "avgpool", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_GLOBAL_AVGPOOL] = {.name = "global_avgpool", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_RESHAPE] = {.name = "reshape", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_NOTHING},
    [TR_OP_PERMUTE] = {.name = "permute", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_SLICE] = {.name = "slice", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_CONCAT] = {.name = "concat", .nin_min = 1, .nin_max = TR_OP_VARIADIC, .nout = 1, .amp = TR_AMP_FOLLOW_ALL,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_GATHER] = {.name = "gather", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_MASKED_FILL] = {.name = "masked_fill", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_CAST] = {.name = "cast", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_KEEP,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_SUM] = {.name = "sum", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_WIDE,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_MEAN] = {.name = "mean", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_WIDE,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_ARGMAX] = {.name = "argmax", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_KEEP,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_NONE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_ALLREDUCE] = {.name = "allreduce", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_COLLECTIVE},
    [TR_OP_TENSOR_IN] = {.name = "tensor_in", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_NOTHING},
    [TR_OP_SEQ_GATHER] = {.name = "seq_gather", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_COLLECTIVE},
    [TR_OP_SEQ_SCATTER] = {.name = "seq_scatter", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_COLLECTIVE},
    [TR_OP_SEQ_SLICE] = {.name = "seq_slice", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_CHEAP, .grad_kind = TR_GRAD_RULE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_COLLECTIVE},
    [TR_OP_OFFLOAD] = {.name = "offload", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_NONE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_COPY},
    [TR_OP_OFFLOAD_WAIT] = {.name = "offload_wait", .nin_min = 1, .nin_max = 1, .nout = 0, .amp = TR_AMP_KEEP,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_NONE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_COPY},
    [TR_OP_RELOAD] = {.name = "reload", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_NONE,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_COPY},
    [TR_OP_BIAS_GRAD] = {.name = "bias_grad", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_RELU_BWD] = {.name = "relu_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_GELU_BWD] = {.name = "gelu_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = specials_per_output, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_TANH_BWD] = {.name = "tanh_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = true, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = specials_per_output, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_SOFTMAX_BWD] = {.name = "softmax_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_LOG_SOFTMAX_BWD] = {.name = "log_softmax_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_CROSS_ENTROPY_BWD] = {.name = "cross_entropy_bwd", .nin_min = 3, .nin_max = 3, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_LINEAR_CROSS_ENTROPY_BWD] = {.name = "linear_cross_entropy_bwd", .nin_min = 5, .nin_max = 5, .nout = 2, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = flops_linear_cross_entropy_bwd, .specials = specials_linear_cross_entropy_bwd, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_LAYERNORM_BWD] = {.name = "layernorm_bwd", .nin_min = 4, .nin_max = 4, .nout = 3, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_EMBEDDING_BWD] = {.name = "embedding_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_ATTENTION_BWD] = {.name = "attention_bwd", .nin_min = 6, .nin_max = 7, .nout = 3, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = flops_attention_bwd, .specials = specials_attention_bwd, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_CONV2D_BWD_DATA] = {.name = "conv2d_bwd_data", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = flops_conv2d_bwd_data, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_CONV2D_BWD_FILTER] = {.name = "conv2d_bwd_filter", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = flops_conv2d_bwd_filter, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_BATCHNORM_BWD] = {.name = "batchnorm_bwd", .nin_min = 4, .nin_max = 4, .nout = 3, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_MAXPOOL_BWD] = {.name = "maxpool_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_AVGPOOL_BWD] = {.name = "avgpool_bwd", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_GLOBAL_AVGPOOL_BWD] = {.name = "global_avgpool_bwd", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_SLICE_BWD] = {.name = "slice_bwd", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_GATHER_BWD] = {.name = "gather_bwd", .nin_min = 2, .nin_max = 2, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_SUM_BWD] = {.name = "sum_bwd", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
    [TR_OP_ACCUMULATE] = {.name = "accumulate", .nin_min = 1, .nin_max = 1, .nout = 1, .amp = TR_AMP_FOLLOW,
        .in_place = false, .remat = TR_REMAT_KEEP, .grad_kind = TR_GRAD_BACKWARD_OP,
        .flops = tr_cost_none, .specials = tr_cost_none, .runs_on = TR_OP_RUNS_ON_DEVICE},
};

_Static_assert(sizeof tr_ops / sizeof tr_ops[0] == TR_NOPS, "the op table has a row for every op of enum tr_op");
