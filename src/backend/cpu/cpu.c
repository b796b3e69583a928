/* The CPU backend's table: one kernel per op (cpu.h lists them), OpenBLAS for the GEMMs that
 * oneDNN does not take (onednn.h) and OpenMP for the rest, sharing one thread pool (configure
 * insists on OpenBLAS's OpenMP build). An instance's state is its oneDNN cache; the one const
 * instance that serves callers opening none (tr_backend_cpu) has none, and runs every GEMM on
 * OpenBLAS. */
#include "backend/cpu/cpu.h"

#include "backend/cpu/onednn.h"

/* The kernels that need scratch of their own, for the dtypes they are given (NULL: none). */
static const tr_cpu_workspace_fn kernel_workspace_of[TR_NOPS] = {
    [TR_OP_CONV2D] = tr_cpu_conv2d_workspace,
    [TR_OP_CONV2D_BWD_DATA] = tr_cpu_conv2d_workspace,
    [TR_OP_CONV2D_BWD_FILTER] = tr_cpu_conv2d_workspace,
    [TR_OP_BATCHNORM] = tr_cpu_batchnorm_workspace,
    [TR_OP_BATCHNORM_BWD] = tr_cpu_batchnorm_workspace,
    [TR_OP_LINEAR_CROSS_ENTROPY] = tr_cpu_linear_cross_entropy_workspace,
    [TR_OP_LINEAR_CROSS_ENTROPY_BWD] = tr_cpu_linear_cross_entropy_workspace,
    [TR_OP_ATTENTION] = tr_cpu_attention_workspace,
    [TR_OP_ATTENTION_BWD] = tr_cpu_attention_workspace,
};

static size_t kernel_workspace(const struct tr_node *node, const struct tr_tensor *in,
                               const struct tr_tensor *out)
{
    tr_cpu_workspace_fn fn = kernel_workspace_of[node->op];
    return fn ? fn(node, in, out) : 0;
}

/* Enough for either path a node may take — oneDNN's scratchpads, or the default path's
 * copies and scratch — since which one runs is known only at prepare (a kernel may be
 * missing), and the planner sizes workspaces before that. */
size_t tr_cpu_workspace_bytes(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    size_t plain = tr_cpu_widened_workspace(node, in, out, kernel_workspace);
    size_t onednn = tr_onednn_workspace(node, in, out), lce = tr_cpu_lce_onednn_workspace(node, in, out);
    size_t attention = tr_cpu_attention_onednn_workspace(node, in, out);
    onednn = lce > onednn ? lce : onednn;
    onednn = attention > onednn ? attention : onednn;
    return plain > onednn ? plain : onednn;
}

const tr_kernel_fn tr_cpu_kernels[TR_NOPS] = {
    [TR_OP_MATMUL] = tr_cpu_matmul,
    [TR_OP_BIAS_ADD] = tr_cpu_bias_add,
    [TR_OP_ADD] = tr_cpu_add,
    [TR_OP_MUL] = tr_cpu_mul,
    [TR_OP_SCALE] = tr_cpu_scale,
    [TR_OP_RELU] = tr_cpu_relu,
    [TR_OP_GELU] = tr_cpu_gelu,
    [TR_OP_TANH] = tr_cpu_tanh,
    [TR_OP_SOFTMAX] = tr_cpu_softmax,
    [TR_OP_LOG_SOFTMAX] = tr_cpu_log_softmax,
    [TR_OP_CROSS_ENTROPY] = tr_cpu_cross_entropy,
    [TR_OP_LINEAR_CROSS_ENTROPY] = tr_cpu_linear_cross_entropy,
    [TR_OP_LAYERNORM] = tr_cpu_layernorm,
    [TR_OP_EMBEDDING] = tr_cpu_embedding,
    [TR_OP_DROPOUT] = tr_cpu_dropout,
    [TR_OP_ATTENTION] = tr_cpu_attention,
    [TR_OP_CONV2D] = tr_cpu_conv2d,
    [TR_OP_BATCHNORM] = tr_cpu_batchnorm,
    [TR_OP_MAXPOOL] = tr_cpu_maxpool,
    [TR_OP_AVGPOOL] = tr_cpu_avgpool,
    [TR_OP_GLOBAL_AVGPOOL] = tr_cpu_global_avgpool,
    [TR_OP_PERMUTE] = tr_cpu_permute,
    [TR_OP_SLICE] = tr_cpu_slice,
    [TR_OP_CONCAT] = tr_cpu_concat,
    [TR_OP_GATHER] = tr_cpu_gather,
    [TR_OP_MASKED_FILL] = tr_cpu_masked_fill,
    [TR_OP_CAST] = tr_cpu_cast,
    [TR_OP_SUM] = tr_cpu_sum,
    [TR_OP_MEAN] = tr_cpu_mean,
    [TR_OP_ARGMAX] = tr_cpu_argmax,
    [TR_OP_BIAS_GRAD] = tr_cpu_bias_grad,
    [TR_OP_RELU_BWD] = tr_cpu_relu_bwd,
    [TR_OP_GELU_BWD] = tr_cpu_gelu_bwd,
    [TR_OP_TANH_BWD] = tr_cpu_tanh_bwd,
    [TR_OP_SOFTMAX_BWD] = tr_cpu_softmax_bwd,
    [TR_OP_LOG_SOFTMAX_BWD] = tr_cpu_log_softmax_bwd,
    [TR_OP_CROSS_ENTROPY_BWD] = tr_cpu_cross_entropy_bwd,
    [TR_OP_LINEAR_CROSS_ENTROPY_BWD] = tr_cpu_linear_cross_entropy_bwd,
    [TR_OP_LAYERNORM_BWD] = tr_cpu_layernorm_bwd,
    [TR_OP_EMBEDDING_BWD] = tr_cpu_embedding_bwd,
    [TR_OP_ATTENTION_BWD] = tr_cpu_attention_bwd,
    [TR_OP_CONV2D_BWD_DATA] = tr_cpu_conv2d_bwd_data,
    [TR_OP_CONV2D_BWD_FILTER] = tr_cpu_conv2d_bwd_filter,
    [TR_OP_BATCHNORM_BWD] = tr_cpu_batchnorm_bwd,
    [TR_OP_MAXPOOL_BWD] = tr_cpu_maxpool_bwd,
    [TR_OP_AVGPOOL_BWD] = tr_cpu_avgpool_bwd,
    [TR_OP_GLOBAL_AVGPOOL_BWD] = tr_cpu_global_avgpool_bwd,
    [TR_OP_SLICE_BWD] = tr_cpu_slice_bwd,
    [TR_OP_GATHER_BWD] = tr_cpu_gather_bwd,
    [TR_OP_SUM_BWD] = tr_cpu_sum_bwd,
    [TR_OP_ACCUMULATE] = tr_cpu_accumulate,
};

static int cpu_open(struct tr_backend *be, struct tr_diag *d)
{
    be->memory = be->host_memory = &tr_cpu_memory;
    struct tr_onednn *o = NULL;
    int rc = tr_onednn_open(&o, d);
    be->state = o;
    return rc;
}

static void cpu_close(struct tr_backend *be)
{
    tr_onednn_close(be->state);
    be->state = NULL;
}

static int cpu_prepare(const struct tr_backend *be, const struct tr_graph *g, const struct tr_node *node,
                       const struct tr_tensor *in, const struct tr_tensor *out, struct tr_diag *d)
{
    if (node->op == TR_OP_LINEAR_CROSS_ENTROPY || node->op == TR_OP_LINEAR_CROSS_ENTROPY_BWD)
        return tr_cpu_lce_onednn_prepare(be->state, node, in, out);
    if (node->op == TR_OP_ATTENTION || node->op == TR_OP_ATTENTION_BWD)
        return tr_cpu_attention_onednn_prepare(be->state, g, node, in, out);
    return tr_onednn_prepare(be->state, g, node, in, out, tr_cpu_workspace_bytes(node, in, out), d);
}

/* A MATMUL goes to oneDNN when its node is one oneDNN takes (16-bit tensors as they are), a
 * convolution too, and the fused classifier and loss (softmax.c) and attention (attention.c) on
 * bf16; everything else,
 * 16-bit tensors through widen.c. */
static int cpu_run(tr_kernel_fn kernel, const struct tr_kernel_args *a)
{
    bool ran = false;
    enum tr_op op = a->node->op;
    int rc = 0;
    if (op == TR_OP_MATMUL)
        rc = tr_onednn_matmul(a->be->state, a, &ran);
    else if (op == TR_OP_CONV2D || op == TR_OP_CONV2D_BWD_DATA || op == TR_OP_CONV2D_BWD_FILTER)
        rc = tr_onednn_conv(a->be->state, a, &ran);
    else if (op == TR_OP_LINEAR_CROSS_ENTROPY || op == TR_OP_LINEAR_CROSS_ENTROPY_BWD)
        rc = tr_cpu_lce_onednn(a->be->state, a, &ran);
    else if (op == TR_OP_ATTENTION || op == TR_OP_ATTENTION_BWD)
        rc = tr_cpu_attention_onednn(a->be->state, a, &ran);
    return ran ? rc : tr_cpu_run_widened(kernel, a);
}

struct tr_onednn_counts tr_cpu_onednn_counts(const struct tr_backend *be)
{
    return tr_onednn_counts_of(be->ops == &tr_cpu_ops ? be->state : NULL);
}

const struct tr_backend_ops tr_cpu_ops = {
    .name = "cpu",
    .kernels = tr_cpu_kernels,
    .run = cpu_run,
    .workspace_bytes = tr_cpu_workspace_bytes,
    .prepare = cpu_prepare,
    .host_visible = true,
    .open = cpu_open,
    .close = cpu_close,
    .copy = tr_cpu_copy,
    .fill = tr_cpu_fill,
    .synchronize = tr_cpu_synchronize,
    .copy_ahead = NULL,   /* the host sees the regions: inputs are written in place */
    .join = NULL,
    .optim_step = tr_cpu_optim_step,
    .grad_sumsq = tr_cpu_grad_sumsq,
    .grad_scale = tr_cpu_grad_scale,
};

static const struct tr_backend cpu_instance = {
    .ops = &tr_cpu_ops, .device = 0, .memory = &tr_cpu_memory, .host_memory = &tr_cpu_memory, .state = NULL,
};

const struct tr_backend *tr_backend_cpu(void) { return &cpu_instance; }
