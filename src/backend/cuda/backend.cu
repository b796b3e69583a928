/* The CUDA backend's table (cuda.h) and what every kernel file leans on: the per-process
 * context made on first use, the sentences CUDA's errors become, the dtype check, the device
 * check of ids and targets, and each op's workspace. */
#include "backend/cuda/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- the context ---------------------------------------------------------------------------- */

struct context_slot {
    struct cuda_context ctx;
    int ok;
    char error[TR_KERNEL_ERROR_MAX];
};

/* Made once (C++ runs a function's static initialiser exactly once, thread-safe); a failure is
 * kept and repeated to every later call, so the first sentence is the one that is seen. */
static struct context_slot make_context(void)
{
    struct context_slot s;
    memset(&s, 0, sizeof s);
    cudaError_t e;
    const char *call = "cudaStreamCreate";
    /* A blocking stream: copies on the legacy default stream (cudaMemcpy) order after its kernels. */
    if ((e = cudaStreamCreate(&s.ctx.stream)) == cudaSuccess) {
        /* copies ahead: a stream that never waits for the legacy default one, and two events
         * without timing (the cheapest kind) to order it against the kernels' */
        call = "the copy stream and its events";
        if ((e = cudaStreamCreateWithFlags(&s.ctx.ahead, cudaStreamNonBlocking)) == cudaSuccess &&
            (e = cudaEventCreateWithFlags(&s.ctx.queued, cudaEventDisableTiming)) == cudaSuccess)
            e = cudaEventCreateWithFlags(&s.ctx.arrived, cudaEventDisableTiming);
    }
    if (e == cudaSuccess) {
        call = "cudaMalloc of the check words";
        e = cudaMalloc((void **)&s.ctx.check, 2 * sizeof(unsigned long long));
    }
    if (e == cudaSuccess) {
        call = "the context's buffers (sample ids, the optimizer's table)";
        size_t ids = CUDA_MAX_SAMPLE_ROWS * sizeof(int64_t), spans = CUDA_MAX_SPANS * CUDA_SPAN_BYTES;
        if ((e = cudaMalloc((void **)&s.ctx.ids, ids)) == cudaSuccess &&
            (e = cudaMalloc(&s.ctx.spans, spans)) == cudaSuccess &&
            (e = cudaMalloc((void **)&s.ctx.partial, (CUDA_OPTIM_BLOCKS + 2) * sizeof(double))) == cudaSuccess &&
            (e = cudaHostAlloc((void **)&s.ctx.ids_host, ids, cudaHostAllocDefault)) == cudaSuccess)
            e = cudaHostAlloc(&s.ctx.spans_host, spans, cudaHostAllocDefault);
    }
    if (e != cudaSuccess) {
        snprintf(s.error, sizeof s.error, "the CUDA backend cannot start: %s failed: %s", call,
                 cudaGetErrorString(e));
        cudaGetLastError();   /* not sticky: the probe and later calls see a clean state */
        return s;
    }
    cublasStatus_t b = cublasLtCreate(&s.ctx.lt);
    if (b != CUBLAS_STATUS_SUCCESS) {
        snprintf(s.error, sizeof s.error, "the CUDA backend cannot start: cublasLtCreate failed: %s",
                 cublasLtGetStatusString(b));
        return s;
    }
    s.ok = 1;
    return s;
}

static struct context_slot *context_slot(void)
{
    static struct context_slot slot = make_context();
    return &slot;
}

struct cuda_context *cuda_context(const struct tr_kernel_args *a)
{
    struct context_slot *s = context_slot();
    if (s->ok)
        return &s->ctx;
    cuda_fail(a, "%s", s->error);
    return NULL;
}

struct cuda_context *cuda_context_for(char *error)
{
    struct context_slot *s = context_slot();
    if (s->ok)
        return &s->ctx;
    snprintf(error, TR_KERNEL_ERROR_MAX, "%s", s->error);
    return NULL;
}

extern "C" int tr_cuda_synchronize(char *error, unsigned long size)
{
    struct context_slot *s = context_slot();
    if (!s->ok) {
        snprintf(error, size, "%s", s->error);
        return TR_EINVAL;
    }
    cudaError_t e = cudaStreamSynchronize(s->ctx.stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->ctx.ahead);
    if (e == cudaSuccess)
        return 0;
    snprintf(error, size, "a CUDA kernel failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return TR_EINVAL;
}

/* ---- sentences ----------------------------------------------------------------------------- */

int cuda_fail(const struct tr_kernel_args *a, const char *fmt, ...)
{
    if (a->error) {
        int n = snprintf(a->error, TR_KERNEL_ERROR_MAX, "%s: ", tr_op_name(a->node->op));
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(a->error + n, TR_KERNEL_ERROR_MAX - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return TR_EINVAL;
}

int cuda_status(const struct tr_kernel_args *a, cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 0;
    cudaGetLastError();   /* clear a non-sticky error, so the next op does not report it */
    return cuda_fail(a, "%s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

int cuda_launched(const struct tr_kernel_args *a, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    return cuda_fail(a, "launching %s failed: %s (%s)", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
}

struct cuda_context *cuda_begin(const struct tr_kernel_args *a)
{
    for (int i = 0; i < a->nin + a->nout; i++) {
        enum tr_dtype t = i < a->nin ? a->in[i].dtype : a->out[i - a->nin].dtype;
        if (t == TR_F64) {
            cuda_fail(a, "f64 tensors have no CUDA kernels (f64 is the CPU's gradient-check type)");
            return NULL;
        }
    }
    return cuda_context(a);
}

/* ---- ids and targets in range ------------------------------------------------------------------ */

/* check[0] = the first position whose id is out of range (n when none): atomicMin of an index,
 * the same answer whatever the order; check[1] = the ids in range, not ignored. */
__global__ void check_ids_kernel(const int32_t *ids, int64_t n, int64_t limit, int has_ignore, int32_t ignore,
                                 unsigned long long *check)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int32_t v = ids[i];
        if (has_ignore && v == ignore)
            continue;
        if (v < 0 || v >= limit)
            atomicMin(&check[0], (unsigned long long)i);
        else
            atomicAdd(&check[1], 1ull);
    }
}

int cuda_check_ids(const struct tr_kernel_args *a, struct cuda_context *ctx, const int32_t *ids, int64_t n,
                   int64_t limit, bool has_ignore, int32_t ignore, int64_t *count)
{
    unsigned long long init[2] = {(unsigned long long)n, 0}, got[2];
    int rc = cuda_status(a, cudaMemcpyAsync(ctx->check, init, sizeof init, cudaMemcpyHostToDevice, ctx->stream),
                         "cudaMemcpyAsync of the check words");
    if (rc)
        return rc;
    if (n > 0) {
        check_ids_kernel<<<cuda_blocks(n, 256), 256, 0, ctx->stream>>>(ids, n, limit, has_ignore, ignore, ctx->check);
        if ((rc = cuda_launched(a, "the id check")))
            return rc;
    }
    rc = cuda_status(a, cudaMemcpyAsync(got, ctx->check, sizeof got, cudaMemcpyDeviceToHost, ctx->stream),
                     "cudaMemcpyAsync of the check words");
    if (!rc)
        rc = cuda_status(a, cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize after the id check");
    if (rc)
        return rc;
    *count = (int64_t)got[1];
    if (got[0] >= (unsigned long long)n)
        return 0;
    int32_t bad = 0;
    rc = cuda_status(a, cudaMemcpy(&bad, ids + got[0], sizeof bad, cudaMemcpyDeviceToHost), "cudaMemcpy of a bad id");
    if (rc)
        return rc;
    enum tr_op op = a->node->op;
    if (op == TR_OP_CROSS_ENTROPY || op == TR_OP_CROSS_ENTROPY_BWD || op == TR_OP_LINEAR_CROSS_ENTROPY ||
        op == TR_OP_LINEAR_CROSS_ENTROPY_BWD)
        return cuda_fail(a, "target %d at row %lld is outside the %lld classes", bad, (long long)got[0],
                         (long long)limit);
    if (op == TR_OP_GATHER || op == TR_OP_GATHER_BWD)
        return cuda_fail(a, "id %d at position %lld is outside the %lld rows of x", bad, (long long)got[0],
                         (long long)limit);
    return cuda_fail(a, "id %d at position %lld is outside the vocabulary of %lld", bad, (long long)got[0],
                     (long long)limit);
}

/* ---- the table ---------------------------------------------------------------------------------- */

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

static struct tr_backend cuda_backend;

static void fill_table(struct tr_backend *be)
{
    be->name = "cuda";
    be->workspace_bytes = cuda_workspace_bytes;
    tr_kernel_fn *k = be->kernels;
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
    be->memory = cuda_device_memory(), be->host_memory = cuda_pinned_memory(), be->host_visible = false;
    be->copy = cuda_copy, be->fill = cuda_fill, be->synchronize = cuda_synchronize;
    be->copy_ahead = cuda_copy_ahead, be->join = cuda_join;
    be->optim_step = cuda_optim_step, be->grad_sumsq = cuda_grad_sumsq, be->grad_scale = cuda_grad_scale;
    k[TR_OP_ATTENTION] = tr_cuda_attention;
    k[TR_OP_ATTENTION_BWD] = tr_cuda_attention_bwd;
    k[TR_OP_CONV2D] = tr_cuda_conv2d;
    k[TR_OP_CONV2D_BWD_DATA] = tr_cuda_conv2d_bwd_data;
    k[TR_OP_CONV2D_BWD_FILTER] = tr_cuda_conv2d_bwd_filter;
    k[TR_OP_BATCHNORM] = tr_cuda_batchnorm;
    k[TR_OP_BATCHNORM_BWD] = tr_cuda_batchnorm_bwd;
    k[TR_OP_LINEAR_CROSS_ENTROPY] = tr_cuda_linear_cross_entropy;
    k[TR_OP_LINEAR_CROSS_ENTROPY_BWD] = tr_cuda_linear_cross_entropy_bwd;
}

extern "C" const struct tr_backend *tr_backend_cuda(void)
{
    static int filled = (fill_table(&cuda_backend), 1);   /* once, thread-safe; touches no device */
    (void)filled;
    return &cuda_backend;
}
