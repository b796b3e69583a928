/* MATMUL on the GPU through cuBLASLt: y[p] (+)= op(a[p])·op(b[p]), batched over leading dims
 * with strided batches, or b shared ([K, N] for every batch). cuBLASLt is column-major and our
 * tensors row-major: a row-major [M, N] is a column-major [N, M], so it computes
 * yᵀ = op(b)ᵀ·op(a)ᵀ, b as its first operand and a as its second, with no copies. A shared b
 * without trans_a is one GEMM over the flattened batches; with trans_a, one GEMM a batch.
 *
 * Precision: f32 operands use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32: products of
 * 10-bit mantissas, f32 sums; about 1e-3 relative where the CPU's sgemm gives 1e-6 — PyTorch's
 * own choice for convolutions, and what makes f32 training on Ampere+ fast). bf16 and f16
 * operands (both the same type) accumulate in f32 (CUBLAS_COMPUTE_32F) and write f32 or their
 * own type as y says. cuBLASLt has no mixed a/b types and no f32 → 16-bit output, so such a
 * node widens its 16-bit tensors to f32 copies in the workspace (exactly: TF32 holds bf16 and
 * f16 mantissas whole) and rounds y back, as the CPU does. accumulate is beta = 1. */
#include "backend/cuda/internal.h"

#include <string.h>

struct gemm : cuda_gemm {
    bool native;   /* the dtypes cuBLASLt takes as they are */
};

/* The CPU's reading of the shapes (matmul.inc): a shared b without trans_a is one GEMM of
 * [P·M, K]·[K, N]. */
static struct gemm gemm_of(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    const struct tr_tensor *a = &in[0], *b = &in[1], *y = &out[0];
    struct gemm g;
    g.ta = node->attrs.matmul.trans_a, g.tb = node->attrs.matmul.trans_b;
    g.M = y->dim[y->rank - 2], g.N = y->dim[y->rank - 1];
    g.K = g.ta ? a->dim[a->rank - 2] : a->dim[a->rank - 1];
    g.P = g.M && g.N ? tr_tensor_numel(y) / (g.M * g.N) : 0;
    g.a_stride = g.M * g.K;
    g.b_stride = b->rank == 2 ? 0 : g.K * g.N;
    if (!g.ta && g.b_stride == 0)
        g.M *= g.P, g.P = 1;
    g.native = a->dtype == b->dtype && (y->dtype == a->dtype || y->dtype == TR_F32);
    return g;
}

/* The f32 copies a non-native node needs, in order a, b, y (0 for a tensor already f32). */
static void copies_of(const struct tr_tensor *in, const struct tr_tensor *out, const struct gemm *g, size_t bytes[3])
{
    const struct tr_tensor *t[3] = {&in[0], &in[1], &out[0]};
    for (int i = 0; i < 3; i++)
        bytes[i] = !g->native && t[i]->dtype != TR_F32 ? cuda_aligned((size_t)tr_tensor_numel(t[i]) * sizeof(float)) : 0;
}

size_t tr_cuda_matmul_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct gemm g = gemm_of(node, in, out);
    size_t copies[3];
    copies_of(in, out, &g, copies);
    return copies[0] + copies[1] + copies[2] + CUDA_LT_WORKSPACE;
}

static cudaDataType_t lt_type(enum tr_dtype t)
{
    return t == TR_BF16 ? CUDA_R_16BF : t == TR_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* The largest power of two up to 256 dividing the address and the batch stride in bytes:
 * what cuBLASLt's heuristic may assume (it assumes 256 unless told). */
static uint32_t alignment_of(const void *p, int64_t stride_bytes)
{
    uint32_t a = 256;
    while (a > 1 && (((uintptr_t)p % a) || (stride_bytes % a)))
        a /= 2;
    return a;
}

/* The descriptors of one call, released whatever happens. */
struct lt_call {
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t first = NULL, second = NULL, out = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    ~lt_call()
    {
        if (pref)
            cublasLtMatmulPreferenceDestroy(pref);
        if (out)
            cublasLtMatrixLayoutDestroy(out);
        if (second)
            cublasLtMatrixLayoutDestroy(second);
        if (first)
            cublasLtMatrixLayoutDestroy(first);
        if (desc)
            cublasLtMatmulDescDestroy(desc);
    }
};

/* "matmul: cublasLtMatmul failed: CUBLAS_STATUS_…": the call's name, without its arguments. */
static int lt_status(const struct tr_kernel_args *a, cublasStatus_t s, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    return cuda_fail(a, "%.*s failed: %s", (int)strcspn(call, "("), call, cublasLtGetStatusString(s));
}

#define LT(call)                                         \
    do {                                                 \
        int lt_rc_ = lt_status(a, (call), #call);        \
        if (lt_rc_)                                      \
            return lt_rc_;                               \
    } while (0)

/* A column-major rows × cols matrix (leading dimension rows) of type t, in `batch` batches
 * stride elements apart. */
static int lt_layout(const struct tr_kernel_args *a, cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows,
                     int64_t cols, int64_t batch, int64_t stride)
{
    LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, rows));
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return 0;
}

/* internal.h's GEMM, in cuBLASLt's terms: b its first operand, a its second (the file's top). */
int cuda_lt_matmul(const struct tr_kernel_args *a, struct cuda_context *ctx, const struct cuda_gemm *g, const void *A,
                   enum tr_dtype at, const void *B, enum tr_dtype bt, void *Y, enum tr_dtype yt, float alpha,
                   float beta, void *lt_workspace)
{
    if (g->P > INT32_MAX)
        return cuda_fail(a, "%lld batches are more than cuBLASLt takes", (long long)g->P);
    struct lt_call c;
    cublasComputeType_t compute = at == TR_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LT(cublasLtMatmulDescCreate(&c.desc, compute, CUDA_R_32F));
    cublasOperation_t op_first = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
    LT(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
    /* first = b: row-major [K, N] is column-major N × K; transposed, [N, K] is K × N */
    int rc = lt_layout(a, &c.first, lt_type(bt), g->tb ? g->K : g->N, g->tb ? g->N : g->K, g->P, g->b_stride);
    /* second = a: row-major [M, K] is column-major K × M; transposed, [K, M] is M × K */
    if (!rc)
        rc = lt_layout(a, &c.second, lt_type(at), g->ta ? g->M : g->K, g->ta ? g->K : g->M, g->P, g->a_stride);
    if (!rc)
        rc = lt_layout(a, &c.out, lt_type(yt), g->N, g->M, g->P, g->M * g->N);
    if (rc)
        return rc;
    LT(cublasLtMatmulPreferenceCreate(&c.pref));
    uint64_t ws = CUDA_LT_WORKSPACE;
    LT(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int64_t batched = g->P > 1;   /* batch strides bind only where there are batches */
    uint32_t align_first = alignment_of(B, batched * g->b_stride * (int64_t)tr_dtype_size(bt));
    uint32_t align_second = alignment_of(A, batched * g->a_stride * (int64_t)tr_dtype_size(at));
    uint32_t align_out = alignment_of(Y, batched * g->M * g->N * (int64_t)tr_dtype_size(yt));
    LT(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first,
                                            sizeof align_first));
    LT(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second,
                                            sizeof align_second));
    LT(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out,
                                            sizeof align_out));
    LT(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out,
                                            sizeof align_out));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    memset(&h, 0, sizeof h);
    LT(cublasLtMatmulAlgoGetHeuristic(ctx->lt, c.desc, c.first, c.second, c.out, c.out, c.pref, 1, &h, &found));
    if (found == 0)
        return cuda_fail(a, "cuBLASLt has no algorithm for %s·%s → %s, M %lld N %lld K %lld, %lld batches",
                         tr_dtype_name(at), tr_dtype_name(bt), tr_dtype_name(yt), (long long)g->M, (long long)g->N,
                         (long long)g->K, (long long)g->P);
    LT(cublasLtMatmul(ctx->lt, c.desc, &alpha, B, c.first, A, c.second, &beta, Y, c.out, Y, c.out, &h.algo,
                      lt_workspace, CUDA_LT_WORKSPACE, ctx->stream));
    return 0;
}

int tr_cuda_matmul(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    int rc;
    const struct tr_tensor *ta = &a->in[0], *tb = &a->in[1], *ty = &a->out[0];
    struct gemm g = gemm_of(a->node, a->in, a->out);
    if (g.P == 0 || g.M == 0 || g.N == 0)
        return 0;
    if (g.K == 0) {   /* an empty sum: y = 0, or y unchanged */
        if (a->node->accumulate)
            return 0;
        return cuda_status(a, cudaMemsetAsync(ty->data, 0, tr_tensor_bytes(ty), ctx->stream), "cudaMemsetAsync");
    }
    size_t copies[3], need = tr_cuda_matmul_workspace(a->node, a->in, a->out);
    copies_of(a->in, a->out, &g, copies);
    if (!a->workspace || a->workspace_bytes < need)
        return cuda_fail(a, "needs %zu bytes of workspace, has %zu", need, a->workspace ? a->workspace_bytes : 0);
    char *at = (char *)a->workspace;
    const void *A = ta->data, *B = tb->data;
    void *Y = ty->data;
    enum tr_dtype a_type = ta->dtype, b_type = tb->dtype, y_type = ty->dtype;
    if (!g.native) {   /* widen the 16-bit tensors; y only when the node adds into it */
        if (copies[0])
            cuda_convert(ctx->stream, ta->data, ta->dtype, at, TR_F32, tr_tensor_numel(ta), 0), A = at;
        if (copies[1])
            cuda_convert(ctx->stream, tb->data, tb->dtype, at + copies[0], TR_F32, tr_tensor_numel(tb), 0),
                B = at + copies[0];
        if (copies[2]) {
            Y = at + copies[0] + copies[1];
            if (a->node->accumulate)
                cuda_convert(ctx->stream, ty->data, ty->dtype, Y, TR_F32, tr_tensor_numel(ty), 0);
        }
        a_type = b_type = y_type = TR_F32;
        if ((rc = cuda_launched(a, "the widening of 16-bit operands")))
            return rc;
    }
    void *lt_workspace = at + copies[0] + copies[1] + copies[2];
    float beta = a->node->accumulate ? 1.0f : 0.0f;
    if (g.b_stride == 0 && g.P > 1) {
        /* b shared under trans_a: one GEMM a batch, rather than trusting cuBLASLt with a batch
         * stride of 0 (not promised by its documentation); autodiff rarely makes this shape */
        struct gemm one = g;
        one.P = 1;
        size_t a_step = (size_t)g.a_stride * tr_dtype_size(a_type), y_step = (size_t)(g.M * g.N) * tr_dtype_size(y_type);
        for (int64_t p = 0; p < g.P && !rc; p++)
            rc = cuda_lt_matmul(a, ctx, &one, (const char *)A + p * a_step, a_type, B, b_type, (char *)Y + p * y_step,
                                y_type, 1, beta, lt_workspace);
    } else {
        rc = cuda_lt_matmul(a, ctx, &g, A, a_type, B, b_type, Y, y_type, 1, beta, lt_workspace);
    }
    if (rc)
        return rc;
    if (!g.native && copies[2]) {
        cuda_convert(ctx->stream, Y, TR_F32, ty->data, ty->dtype, tr_tensor_numel(ty), 0);
        return cuda_launched(a, "the rounding of y to 16 bits");
    }
    return 0;
}

int cuda_gemm(const struct tr_kernel_args *a, struct cuda_context *ctx, int trans_a, int trans_b, int64_t M,
              int64_t N, int64_t K, const void *A, enum tr_dtype at, const void *B, enum tr_dtype bt, float beta,
              void *Y, enum tr_dtype yt, void *lt_workspace)
{
    if (M == 0 || N == 0)
        return 0;
    if (K == 0)   /* an empty sum: Y = 0, or Y unchanged */
        return beta != 0 ? 0
                         : cuda_status(a, cudaMemsetAsync(Y, 0, (size_t)(M * N) * tr_dtype_size(yt), ctx->stream),
                                       "cudaMemsetAsync");
    struct cuda_gemm g = {trans_a, trans_b, 1, M, N, K, 0, 0};
    return cuda_lt_matmul(a, ctx, &g, A, at, B, bt, Y, yt, 1, beta, lt_workspace);
}

/* ---- BIAS_ADD and BIAS_GRAD are kernels of elementwise.cu; cuBLASLt's bias epilogues
 * (CUBLASLT_EPILOGUE_BIAS, _BGRADB) can fold them into the GEMM later. */
