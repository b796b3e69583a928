/* What the CUDA backend's files (the .cu files of src/backend/cuda) share, C++ only: an instance's
 * context (one stream, one cuBLASLt handle, a cuDNN handle and its algorithm choices, a few device
 * words for input checks), the sentences every failure becomes, element loads and stores of f32/bf16/f16 with f32
 * arithmetic, block reductions, and each file's kernels as backend.cu's table names them. */
#ifndef TR_CUDA_INTERNAL_H
#define TR_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "backend/backend.h"
#include "backend/cuda/cuda.h"
#include "core/error.h"
}

struct cuda_conv_cache;   /* cudnn.cu's kept algorithm choices */

/* An instance's context, made on first use (cuda_context) on the instance's device: kernels run
 * on its stream in order, so the executor needs no synchronisation between nodes. */
struct cuda_context {
    cudaStream_t stream;
    cudaStream_t ahead;          /* copies ahead (device.cu): the next inputs, beside the kernels */
    cudaEvent_t queued, arrived; /* the stream's point a copy ahead starts after; its last copy's end */
    cudaEvent_t timer[2];        /* the profiler's marks around a node (timing events), made on first use */
    cublasLtHandle_t lt;
    unsigned long long *check;   /* device: [0] first bad position, [1] count (cuda_check_ids) */
    int64_t *ids, *ids_host;     /* dropout's sample ids: device, and the host copy they came from */
    int64_t ids_rows;            /* rows in ids now; 0: none yet */
    void *spans, *spans_host;    /* the optimizer's table of parameters (device.cu), both sides */
    double *partial;             /* the optimizer's per-block sums, its total, its overflow word */
    struct cudnnContext *dnn;    /* cudnnHandle_t, on the stream; made by cudnn.cu's first call */
    struct cuda_conv_cache *convs;   /* the convolutions' algorithm choices (cudnn.cu), made with dnn */
};

/* An instance's state (backend.h: tr_backend.state): its context, started by the first entry
 * that needs it on the thread that drives the instance, its device made current there; a
 * failure is kept and repeated to every later call, so the first sentence is the one seen. */
struct cuda_state {
    struct cuda_context ctx;
    int device;
    int started;                 /* 0: not yet; 1: the context is up; -1: it cannot start (why) */
    char *why;
    struct tr_memory_ops device_memory, pinned_memory;   /* ctx: this state */
};

/* An instance's state (context.cu), and the release of what its context made (the cuDNN handle
 * apart: cuda_dnn_release). */
struct cuda_state *cuda_state_of(const struct tr_backend *be);
void cuda_context_release(struct cuda_state *s);
/* The state's memory (device.cu): regions from cudaMalloc on its device, page-locked host
 * buffers for the loader. */
void cuda_memory_init(struct cuda_state *s);
/* Releases the cuDNN handle and the algorithm choices (cudnn.cu). */
void cuda_dnn_release(struct cuda_context *ctx);

/* The context's fixed buffers (allocated with it: a few MiB, part of the measured context). */
#define CUDA_MAX_SAMPLE_ROWS 65536   /* rows of dropout's sample ids in one micro-batch */
#define CUDA_MAX_SPANS 16384         /* parameters the optimizer updates */
#define CUDA_OPTIM_BLOCKS 1024       /* blocks of the optimizer's passes (fixed: fixed sums) */
#define CUDA_OPTIM_THREADS 256
#define CUDA_OPTIM_CHUNK 4096        /* elements a block takes of a parameter at a time */
#define CUDA_SPAN_BYTES 64           /* device.cu's struct span, at most */

/* The memory and optimizer entries of the table (device.cu). */
int cuda_copy(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
              struct tr_diag *d);
int cuda_fill(const struct tr_backend *be, void *dst, int byte, size_t bytes, struct tr_diag *d);
int cuda_synchronize(const struct tr_backend *be, struct tr_diag *d);
int cuda_timer_start(const struct tr_backend *be, struct tr_diag *d);
int cuda_timer_stop(const struct tr_backend *be, double *seconds, struct tr_diag *d);
int cuda_copy_ahead(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
                    struct tr_diag *d);
int cuda_join(const struct tr_backend *be, struct tr_diag *d);
int cuda_optim_step(const struct tr_backend *be, const struct tr_optim_args *a);
int cuda_grad_sumsq(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq);
/* NCCL across GPU ranks (nccl.cu). */
int cuda_collective_id(void *id, size_t size, struct tr_diag *d);
int cuda_collective_open(const struct tr_backend *be, const void *id, int world, int rank, struct tr_diag *d);
int cuda_collective_sum(const struct tr_backend *be, float *data, size_t n, struct tr_diag *d);
void cuda_collective_close(const struct tr_backend *be);
int cuda_grad_scale(const struct tr_backend *be, const struct tr_optim_args *a, float factor, bool *finite);
/* Dropout's sample ids (host memory) on the device, copied when they changed; NULL for none,
 * or with a sentence in a->diag. */
const int64_t *cuda_sample_ids(const struct tr_kernel_args *a, struct cuda_context *ctx, const int64_t *ids,
                               int64_t rows);

/* The kernel's instance's context (a->be), creating it on the first call; NULL with a sentence
 * in a->diag when the device cannot be used (no GPU, no driver, out of memory). */
struct cuda_context *cuda_context(const struct tr_kernel_args *a);
/* The same for the entries without kernel args (copies, the optimizer): the sentence in d. */
struct cuda_context *cuda_context_for(const struct tr_backend *be, struct tr_diag *d);

/* Adds the sentence to a->diag (the op's name first) and returns TR_EINVAL. */
int cuda_fail(const struct tr_kernel_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0 when e is cudaSuccess; else the sentence "<op>: <call> failed: <CUDA's words>" (TR_EFAIL). */
int cuda_status(const struct tr_kernel_args *a, cudaError_t e, const char *call);
/* After kernel launches: a launch error (bad configuration, no kernel image for this GPU). */
int cuda_launched(const struct tr_kernel_args *a, const char *kernel);

/* Every kernel's start: its float types are ones the kernels load and store (f32, bf16, f16;
 * f64, the CPU's gradient-check type, has no CUDA kernels — refused before any device is
 * touched), then the context. NULL with the sentence in a->diag. */
struct cuda_context *cuda_begin(const struct tr_kernel_args *a);

/* Checks ids (i32, n of them) against [0, limit) on the device, skipping `ignore` when
 * has_ignore, and returns in *count how many were checked and in range. A bad id fails with
 * the CPU's sentence (`what` names the range: "the vocabulary of", "the classes"). Waits for
 * the stream: the answer is needed on the host. */
int cuda_check_ids(const struct tr_kernel_args *a, struct cuda_context *ctx, const int32_t *ids, int64_t n,
                   int64_t limit, bool has_ignore, int32_t ignore, int64_t *count);

/* Workspace is carved in pieces aligned to 256 bytes (cuBLASLt's and coalescing's liking). */
#define CUDA_ALIGN 256
static inline size_t cuda_aligned(size_t bytes) { return (bytes + CUDA_ALIGN - 1) / CUDA_ALIGN * CUDA_ALIGN; }

/* Rows and the last dim of a tensor seen as a matrix (as the CPU's tr_cpu_rows/cols). */
static inline int64_t cuda_cols(const struct tr_tensor *t) { return t->rank ? t->dim[t->rank - 1] : 1; }
static inline int64_t cuda_rows(const struct tr_tensor *t)
{
    int64_t c = cuda_cols(t);
    return c ? tr_tensor_numel(t) / c : 0;
}

/* Grid size for a grid-stride loop over n elements with `threads` a block. */
static inline unsigned cuda_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

/* ---- elements: f32, bf16 and f16 storage, f32 arithmetic ---------------------------------
 * The conversions are core/tensor.h's and tensor.c's, bit for bit (NaN included), rather than
 * cuda_bf16.h's, whose NaN differs: a cast or a 16-bit output then matches the CPU exactly. */

__device__ __forceinline__ uint16_t cuda_f32_to_bf16(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__device__ __forceinline__ float cuda_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t cuda_f32_to_f16(float x)
{
    uint32_t u = __float_as_uint(x);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u)   /* subnormal or zero: 2^24 ulps, rounded to nearest even like lrintf */
        return (uint16_t)(sign | (uint32_t)__float2int_rn(__uint_as_float(a) * 16777216.0f));
    uint32_t mant = a & 0x7fffffu, exp = (a >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

__device__ __forceinline__ float cuda_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0)
        return __uint_as_float(__float_as_uint((float)mant * 5.9604644775390625e-8f) | sign);   /* 2^-24 */
    return __uint_as_float(exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13)));
}

/* Element i of a float tensor of dtype t, as f32. */
__device__ __forceinline__ float cuda_load(const void *p, int t, int64_t i)
{
    if (t == TR_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == TR_BF16 ? cuda_bf16_to_f32(h) : cuda_f16_to_f32(h);
}

/* Element i of a float tensor of dtype t = v, rounded to nearest even for 16-bit storage. */
__device__ __forceinline__ void cuda_store(void *p, int t, int64_t i, float v)
{
    if (t == TR_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = t == TR_BF16 ? cuda_f32_to_bf16(v) : cuda_f32_to_f16(v);
}

/* y[i] = v, or y[i] += v (in f32, rounded once) when acc: the accumulate convention. */
__device__ __forceinline__ void cuda_put(void *p, int t, int64_t i, float v, int acc)
{
    cuda_store(p, t, i, acc ? cuda_load(p, t, i) + v : v);
}

/* ---- block reductions: a fixed tree for a fixed block size, so the same bits every run ---- */

#define CUDA_ROW_THREADS 256   /* one block a row: softmax, layer norm, cross-entropy */

struct cuda_sum { __device__ float operator()(float a, float b) const { return a + b; } };
struct cuda_max { __device__ float operator()(float a, float b) const { return a > b ? a : b; } };

/* Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
 * result. `shared` holds 32 floats; the call ends with a barrier, so it can be reused. */
template <class Op>
__device__ float cuda_block_reduce(float v, Op op, float *shared)
{
    for (int off = 16; off > 0; off /= 2)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < warps; w++)
        v = op(v, shared[w]);
    __syncthreads();
    return v;
}

/* dst = src over n elements, f32/bf16/f16 to any of them (+= in f32 when acc), on the stream:
 * CAST's kernel, and MATMUL's widening of operands cuBLASLt cannot mix (elementwise.cu). */
void cuda_convert(cudaStream_t stream, const void *src, int ts, void *dst, int td, int64_t n, int acc);

/* ---- GEMMs through cuBLASLt (matmul.cu): MATMUL's, attention's, the fused classifier's ------
 * Row-major Y[p] = alpha·op(A[p])·op(B[p]) + beta·Y[p] for p < P batches: op(A) [M, K] (A [M, K],
 * or [K, M] when ta), op(B) [K, N] (B [K, N], or [N, K] when tb); A and B a_stride and b_stride
 * elements apart, Y M·N apart. f32 operands run in TF32, 16-bit ones (at = bt) with f32 sums;
 * Y is f32 or the operands' type. lt_workspace holds CUDA_LT_WORKSPACE bytes: cuBLASLt's own
 * scratch for its split-K and stream-K kernels, NVIDIA's suggestion on Hopper (the cuBLAS docs,
 * "cublasSetWorkspace"), which a GEMM node's workspace includes. */
#define CUDA_LT_WORKSPACE ((size_t)32 << 20)
struct cuda_gemm {
    int ta, tb;
    int64_t P, M, N, K, a_stride, b_stride;
};
int cuda_lt_matmul(const struct tr_kernel_args *a, struct cuda_context *ctx, const struct cuda_gemm *g, const void *A,
                   enum tr_dtype at, const void *B, enum tr_dtype bt, void *Y, enum tr_dtype yt, float alpha,
                   float beta, void *lt_workspace);
/* One plain GEMM, for the ops that hold one inside (LINEAR_CROSS_ENTROPY): Y[M, N] = op(A)·op(B) + beta·Y (beta 0 or 1), row-major and contiguous, queued on the stream:
 * A [M, K] ([K, M] with trans_a), B [K, N] ([N, K] with trans_b). The types cuBLASLt takes as
 * they are: A and B both f32 (TF32, as MATMUL) or both one 16-bit type (f32 sums); Y f32 or A's
 * type. lt_workspace: CUDA_LT_WORKSPACE bytes of the caller's workspace. K = 0 is an empty sum. */
int cuda_gemm(const struct tr_kernel_args *a, struct cuda_context *ctx, int trans_a, int trans_b, int64_t M,
              int64_t N, int64_t K, const void *A, enum tr_dtype at, const void *B, enum tr_dtype bt, float beta,
              void *Y, enum tr_dtype yt, void *lt_workspace);

/* loss (+)= Σ_r row_loss[r] / count (0 when count is 0) in double, summed in a fixed tree by one
 * block (softmax_norm.cu): the mean of CROSS_ENTROPY and LINEAR_CROSS_ENTROPY. */
void cuda_mean_of_rows(cudaStream_t stream, const float *row_loss, int64_t rows, int64_t count, void *loss, int tl,
                       int acc);

/* ---- the kernels of each file, as the table names them -------------------------------------- */

#define CUDA_KERNELS(X) \
    X(matmul) X(bias_add) X(bias_grad) \
    X(add) X(mul) X(scale) X(relu) X(relu_bwd) X(tanh) X(tanh_bwd) X(gelu) X(gelu_bwd) X(cast) X(dropout) \
    X(softmax) X(softmax_bwd) X(log_softmax) X(log_softmax_bwd) X(layernorm) X(layernorm_bwd) \
    X(embedding) X(embedding_bwd) X(cross_entropy) X(cross_entropy_bwd) \
    X(accumulate) X(permute) X(slice) X(slice_bwd) X(concat) X(masked_fill) X(gather) X(gather_bwd) \
    X(sum) X(mean) X(sum_bwd) X(argmax) \
    X(maxpool) X(maxpool_bwd) X(avgpool) X(avgpool_bwd) X(global_avgpool) X(global_avgpool_bwd) \
    X(attention) X(attention_bwd) \
    X(conv2d) X(conv2d_bwd_data) X(conv2d_bwd_filter) X(batchnorm) X(batchnorm_bwd) \
    X(linear_cross_entropy) X(linear_cross_entropy_bwd)

#define CUDA_DECLARE(name) int tr_cuda_##name(const struct tr_kernel_args *a);
CUDA_KERNELS(CUDA_DECLARE)
#undef CUDA_DECLARE

/* Workspace of the kernels that need scratch. */
size_t tr_cuda_matmul_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);
size_t tr_cuda_bias_grad_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);
size_t tr_cuda_layernorm_bwd_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                       const struct tr_tensor *out);
size_t tr_cuda_embedding_bwd_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                       const struct tr_tensor *out);
size_t tr_cuda_cross_entropy_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                       const struct tr_tensor *out);
size_t tr_cuda_attention_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);
/* The three convolution ops' (cudnn.cu says how the budget is chosen) and batch norm's two. */
size_t tr_cuda_conv2d_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);
size_t tr_cuda_batchnorm_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);
size_t tr_cuda_linear_cross_entropy_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                              const struct tr_tensor *out);

/* Column sums over rows in a fixed order, no atomics (elementwise.cu): partial [chunks, cols]
 * f32 holds in row k the sum of rows [k·CUDA_COLUMN_CHUNK, (k+1)·CUDA_COLUMN_CHUNK) of each
 * column, summed top to bottom; this launches the kernel that adds the chunks in order into
 * out[c] (dtype t; += when acc). Bias and layer-norm gradients share it. */
#define CUDA_COLUMN_CHUNK 64
static inline int64_t cuda_column_chunks(int64_t rows) { return (rows + CUDA_COLUMN_CHUNK - 1) / CUDA_COLUMN_CHUNK; }
void cuda_finish_columns(cudaStream_t stream, const float *partial, int64_t chunks, int64_t cols, void *out, int t,
                         int acc);

#endif
