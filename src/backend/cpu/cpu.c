/* The CPU backend's table: one kernel per op (cpu.h lists them), OpenBLAS for every GEMM and
 * OpenMP for the rest, sharing one thread pool (configure insists on OpenBLAS's OpenMP build). */
#include "backend/cpu/cpu.h"

#include <ctype.h>
#include <string.h>

int tr_cpu_fail(const struct tr_kernel_args *a, const char *fmt, ...)
{
    if (a->error) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(a->error, TR_KERNEL_ERROR_MAX, fmt, ap);
        va_end(ap);
    }
    return TR_EINVAL;
}

/* The kernels that need scratch of their own, for the dtypes they are given (NULL: none). */
static const tr_cpu_workspace_fn kernel_workspace_of[TR_NOPS] = {
    [TR_OP_CONV2D] = tr_cpu_conv2d_workspace,
    [TR_OP_CONV2D_BWD_DATA] = tr_cpu_conv2d_workspace,
    [TR_OP_CONV2D_BWD_FILTER] = tr_cpu_conv2d_workspace,
    [TR_OP_LINEAR_CROSS_ENTROPY] = tr_cpu_linear_cross_entropy_workspace,
    [TR_OP_LINEAR_CROSS_ENTROPY_BWD] = tr_cpu_linear_cross_entropy_workspace,
};

static size_t kernel_workspace(const struct tr_node *node, const struct tr_tensor *in,
                               const struct tr_tensor *out)
{
    tr_cpu_workspace_fn fn = kernel_workspace_of[node->op];
    return fn ? fn(node, in, out) : 0;
}

static size_t cpu_workspace_bytes(const struct tr_node *node, const struct tr_tensor *in,
                                  const struct tr_tensor *out)
{
    return tr_cpu_widened_workspace(node, in, out, kernel_workspace);
}

static struct tr_backend cpu_backend;

static void fill_table(struct tr_backend *be)
{
    be->name = "cpu";
    be->workspace_bytes = cpu_workspace_bytes;
    tr_kernel_fn *k = be->kernels;
    k[TR_OP_MATMUL] = tr_cpu_matmul;
    k[TR_OP_BIAS_ADD] = tr_cpu_bias_add;
    k[TR_OP_ADD] = tr_cpu_add;
    k[TR_OP_MUL] = tr_cpu_mul;
    k[TR_OP_SCALE] = tr_cpu_scale;
    k[TR_OP_RELU] = tr_cpu_relu;
    k[TR_OP_GELU] = tr_cpu_gelu;
    k[TR_OP_TANH] = tr_cpu_tanh;
    k[TR_OP_SOFTMAX] = tr_cpu_softmax;
    k[TR_OP_LOG_SOFTMAX] = tr_cpu_log_softmax;
    k[TR_OP_CROSS_ENTROPY] = tr_cpu_cross_entropy;
    k[TR_OP_LINEAR_CROSS_ENTROPY] = tr_cpu_linear_cross_entropy;
    k[TR_OP_LAYERNORM] = tr_cpu_layernorm;
    k[TR_OP_EMBEDDING] = tr_cpu_embedding;
    k[TR_OP_DROPOUT] = tr_cpu_dropout;
    k[TR_OP_ATTENTION] = tr_cpu_attention;
    k[TR_OP_CONV2D] = tr_cpu_conv2d;
    k[TR_OP_BATCHNORM] = tr_cpu_batchnorm;
    k[TR_OP_MAXPOOL] = tr_cpu_maxpool;
    k[TR_OP_AVGPOOL] = tr_cpu_avgpool;
    k[TR_OP_GLOBAL_AVGPOOL] = tr_cpu_global_avgpool;
    k[TR_OP_PERMUTE] = tr_cpu_permute;
    k[TR_OP_SLICE] = tr_cpu_slice;
    k[TR_OP_CONCAT] = tr_cpu_concat;
    k[TR_OP_GATHER] = tr_cpu_gather;
    k[TR_OP_MASKED_FILL] = tr_cpu_masked_fill;
    k[TR_OP_CAST] = tr_cpu_cast;
    k[TR_OP_SUM] = tr_cpu_sum;
    k[TR_OP_MEAN] = tr_cpu_mean;
    k[TR_OP_ARGMAX] = tr_cpu_argmax;
    k[TR_OP_BIAS_GRAD] = tr_cpu_bias_grad;
    k[TR_OP_RELU_BWD] = tr_cpu_relu_bwd;
    k[TR_OP_GELU_BWD] = tr_cpu_gelu_bwd;
    k[TR_OP_TANH_BWD] = tr_cpu_tanh_bwd;
    k[TR_OP_SOFTMAX_BWD] = tr_cpu_softmax_bwd;
    k[TR_OP_LOG_SOFTMAX_BWD] = tr_cpu_log_softmax_bwd;
    k[TR_OP_CROSS_ENTROPY_BWD] = tr_cpu_cross_entropy_bwd;
    k[TR_OP_LINEAR_CROSS_ENTROPY_BWD] = tr_cpu_linear_cross_entropy_bwd;
    k[TR_OP_LAYERNORM_BWD] = tr_cpu_layernorm_bwd;
    k[TR_OP_EMBEDDING_BWD] = tr_cpu_embedding_bwd;
    k[TR_OP_ATTENTION_BWD] = tr_cpu_attention_bwd;
    k[TR_OP_CONV2D_BWD_DATA] = tr_cpu_conv2d_bwd_data;
    k[TR_OP_CONV2D_BWD_FILTER] = tr_cpu_conv2d_bwd_filter;
    k[TR_OP_BATCHNORM_BWD] = tr_cpu_batchnorm_bwd;
    k[TR_OP_MAXPOOL_BWD] = tr_cpu_maxpool_bwd;
    k[TR_OP_AVGPOOL_BWD] = tr_cpu_avgpool_bwd;
    k[TR_OP_GLOBAL_AVGPOOL_BWD] = tr_cpu_global_avgpool_bwd;
    k[TR_OP_SLICE_BWD] = tr_cpu_slice_bwd;
    k[TR_OP_GATHER_BWD] = tr_cpu_gather_bwd;
    k[TR_OP_SUM_BWD] = tr_cpu_sum_bwd;
    k[TR_OP_ACCUMULATE] = tr_cpu_accumulate;
    be->memory = &tr_cpu_memory, be->host_memory = &tr_cpu_memory, be->host_visible = true;
    be->copy = tr_cpu_copy, be->fill = tr_cpu_fill, be->synchronize = tr_cpu_synchronize;
    be->copy_ahead = NULL, be->join = NULL;   /* the host sees the regions: inputs are written in place */
    be->optim_step = tr_cpu_optim_step, be->grad_sumsq = tr_cpu_grad_sumsq, be->grad_scale = tr_cpu_grad_scale;
}

const struct tr_backend *tr_backend_cpu(void)
{
    if (!cpu_backend.name)
        fill_table(&cpu_backend);   /* idempotent: the same table every time */
    return &cpu_backend;
}

int tr_backend_run(const struct tr_backend *be, struct tr_kernel_args *args)
{
    tr_kernel_fn fn = be->kernels[args->node->op];
    if (!fn) {   /* a backend still being written (the CUDA one): say which op, and whose */
        char who[16];
        size_t i = 0;
        for (; be->name[i] && i + 1 < sizeof who; i++)
            who[i] = (char)toupper((unsigned char)be->name[i]);
        who[i] = '\0';
        return tr_cpu_fail(args, "op %s has no %s kernel yet", tr_op_name(args->node->op), who);
    }
    return be == &cpu_backend ? tr_cpu_run_widened(fn, args) : fn(args);
}
