/* The CUDA backend's table (cuda.h): the kernels of each file by op, each op's workspace, and an
 * instance's opening and closing; what the kernels share is context.cu's. */
#include "backend/cuda/internal.h"

#include <stdlib.h>

static size_t cuda_workspace_bytes(const struct tr_node *node, const struct tr_tensor *in,
                                   const struct tr_tensor *out)
{
    switch (node->op) {
    case TR_OP_MATMUL:
        return tr_cuda_matmul_workspace(node, in, out);
    case TR_OP_BIAS_GRAD:
        return tr_cuda_bias_grad_workspace(node, in, out);
    case TR_OP_LAYERNORM_BWD:
        return tr_cuda_layernorm_bwd_workspace(node, in, out);
    case TR_OP_EMBEDDING_BWD:
    case TR_OP_GATHER_BWD:   /* the same sort keys */
        return tr_cuda_embedding_bwd_workspace(node, in, out);
    case TR_OP_CROSS_ENTROPY:
        return tr_cuda_cross_entropy_workspace(node, in, out);
    case TR_OP_ATTENTION:
    case TR_OP_ATTENTION_BWD:
        return tr_cuda_attention_workspace(node, in, out);
    case TR_OP_CONV2D:
    case TR_OP_CONV2D_BWD_DATA:
    case TR_OP_CONV2D_BWD_FILTER:
        return tr_cuda_conv2d_workspace(node, in, out);
    case TR_OP_BATCHNORM:
    case TR_OP_BATCHNORM_BWD:
        return tr_cuda_batchnorm_workspace(node, in, out);
    case TR_OP_LINEAR_CROSS_ENTROPY:
    case TR_OP_LINEAR_CROSS_ENTROPY_BWD:
        return tr_cuda_linear_cross_entropy_workspace(node, in, out);
    default:
        return 0;
    }
}

static int cuda_open(struct tr_backend *be, struct tr_diag *d)
{
    (void)d;
    struct cuda_state *s = (struct cuda_state *)tr_xcalloc(1, sizeof *s);
    s->device = be->device;
    cuda_memory_init(s);
    be->state = s;
    be->memory = &s->device_memory, be->host_memory = &s->pinned_memory;
    return 0;
}

/* The cuDNN handle first: it works on the context's stream. */
static void cuda_close(struct tr_backend *be)
{
    struct cuda_state *s = cuda_state_of(be);
    if (s->started > 0)
        cudaStreamSynchronize(s->ctx.stream);
    cuda_dnn_release(&s->ctx);
    cuda_context_release(s);
    free(s->why);
    free(s);
    be->state = NULL;
}

/* The kernels by op: filled in a constant expression, so the table is read-only data. */
struct cuda_kernel_table {
    tr_kernel_fn k[TR_NOPS];
};

static constexpr cuda_kernel_table make_kernels()
{
    cuda_kernel_table t{};
    tr_kernel_fn *k = t.k;
    k[TR_OP_MATMUL] = tr_cuda_matmul;
    k[TR_OP_BIAS_ADD] = tr_cuda_bias_add;
    k[TR_OP_BIAS_GRAD] = tr_cuda_bias_grad;
    k[TR_OP_ADD] = tr_cuda_add;
    k[TR_OP_MUL] = tr_cuda_mul;
    k[TR_OP_SCALE] = tr_cuda_scale;
    k[TR_OP_RELU] = tr_cuda_relu;
    k[TR_OP_RELU_BWD] = tr_cuda_relu_bwd;
    k[TR_OP_TANH] = tr_cuda_tanh;
    k[TR_OP_TANH_BWD] = tr_cuda_tanh_bwd;
    k[TR_OP_GELU] = tr_cuda_gelu;
    k[TR_OP_GELU_BWD] = tr_cuda_gelu_bwd;
    k[TR_OP_CAST] = tr_cuda_cast;
    k[TR_OP_DROPOUT] = tr_cuda_dropout;
    k[TR_OP_SOFTMAX] = tr_cuda_softmax;
    k[TR_OP_SOFTMAX_BWD] = tr_cuda_softmax_bwd;
    k[TR_OP_LOG_SOFTMAX] = tr_cuda_log_softmax;
    k[TR_OP_LOG_SOFTMAX_BWD] = tr_cuda_log_softmax_bwd;
    k[TR_OP_LAYERNORM] = tr_cuda_layernorm;
    k[TR_OP_LAYERNORM_BWD] = tr_cuda_layernorm_bwd;
    k[TR_OP_EMBEDDING] = tr_cuda_embedding;
    k[TR_OP_EMBEDDING_BWD] = tr_cuda_embedding_bwd;
    k[TR_OP_CROSS_ENTROPY] = tr_cuda_cross_entropy;
    k[TR_OP_CROSS_ENTROPY_BWD] = tr_cuda_cross_entropy_bwd;
    k[TR_OP_ACCUMULATE] = tr_cuda_accumulate;
    k[TR_OP_PERMUTE] = tr_cuda_permute;
    k[TR_OP_SLICE] = tr_cuda_slice;
    k[TR_OP_SLICE_BWD] = tr_cuda_slice_bwd;
    k[TR_OP_CONCAT] = tr_cuda_concat;
    k[TR_OP_MASKED_FILL] = tr_cuda_masked_fill;
    k[TR_OP_GATHER] = tr_cuda_gather;
    k[TR_OP_GATHER_BWD] = tr_cuda_gather_bwd;
    k[TR_OP_SUM] = tr_cuda_sum;
    k[TR_OP_MEAN] = tr_cuda_mean;
    k[TR_OP_SUM_BWD] = tr_cuda_sum_bwd;
    k[TR_OP_ARGMAX] = tr_cuda_argmax;
    k[TR_OP_MAXPOOL] = tr_cuda_maxpool;
    k[TR_OP_MAXPOOL_BWD] = tr_cuda_maxpool_bwd;
    k[TR_OP_AVGPOOL] = tr_cuda_avgpool;
    k[TR_OP_AVGPOOL_BWD] = tr_cuda_avgpool_bwd;
    k[TR_OP_GLOBAL_AVGPOOL] = tr_cuda_global_avgpool;
    k[TR_OP_GLOBAL_AVGPOOL_BWD] = tr_cuda_global_avgpool_bwd;
    k[TR_OP_ATTENTION] = tr_cuda_attention;
    k[TR_OP_ATTENTION_BWD] = tr_cuda_attention_bwd;
    k[TR_OP_CONV2D] = tr_cuda_conv2d;
    k[TR_OP_CONV2D_BWD_DATA] = tr_cuda_conv2d_bwd_data;
    k[TR_OP_CONV2D_BWD_FILTER] = tr_cuda_conv2d_bwd_filter;
    k[TR_OP_BATCHNORM] = tr_cuda_batchnorm;
    k[TR_OP_BATCHNORM_BWD] = tr_cuda_batchnorm_bwd;
    k[TR_OP_LINEAR_CROSS_ENTROPY] = tr_cuda_linear_cross_entropy;
    k[TR_OP_LINEAR_CROSS_ENTROPY_BWD] = tr_cuda_linear_cross_entropy_bwd;
    return t;
}

static constexpr cuda_kernel_table cuda_kernels = make_kernels();

static constexpr struct tr_backend_ops make_ops()
{
    struct tr_backend_ops o{};
    o.name = "cuda";
    o.kernels = cuda_kernels.k;
    o.run = NULL;   /* every kernel queues its own work */
    o.workspace_bytes = cuda_workspace_bytes;
    o.host_visible = false;
    o.open = cuda_open, o.close = cuda_close;
    o.copy = cuda_copy, o.fill = cuda_fill, o.synchronize = cuda_synchronize;
    o.copy_ahead = cuda_copy_ahead, o.join = cuda_join;
    o.timer_start = cuda_timer_start, o.timer_stop = cuda_timer_stop;
    o.optim_step = cuda_optim_step, o.grad_sumsq = cuda_grad_sumsq, o.grad_scale = cuda_grad_scale;
    o.collective_id = cuda_collective_id, o.collective_open = cuda_collective_open;
    o.collective_sum = cuda_collective_sum, o.collective_close = cuda_collective_close;
    return o;
}

extern "C" const struct tr_backend_ops tr_cuda_ops = make_ops();
