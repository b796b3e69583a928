/* LINEAR_CROSS_ENTROPY and its backward on the GPU: the classifier x·wᵀ and the cross-entropy
 * in one node, whose logits exist only a chunk of rows at a time, in f32 in the workspace. Per
 * chunk the forward takes the logits from cuBLASLt (cuda_gemm), then one block a row finds the
 * max, Σ exp, the target's logit and its rank; the backward makes the chunk's logits again,
 * turns them into dlogits in place and adds their share of dx and dw by two more GEMMs. */
#include "backend/cuda/internal.h"

#include <math.h>
#include <string.h>

#define ROW CUDA_ROW_THREADS

/* The backend's chunk (attrs chunk 0): the rows whose f32 logits fit in LCE_LOGITS_BYTES. Every
 * chunk reads all of w (the backward also reads and writes all of dw), so a chunk must be tall
 * enough for its GEMMs to wait on arithmetic rather than on those bytes: R rows do 2·R flops a
 * w element, 2·R/4 a byte of f32, where an H200 does ~100 dense TF32 flops a byte of HBM (an
 * H100 ~150) — R ≳ 200–300, and twice that for dw's 8 bytes (read and written). 128 MiB gives
 * GPT-2's 50,257 classes 667 rows and a 128k vocabulary 261; the CPU's 32 MiB would give 166
 * and 65. Beside cuBLASLt's 32 MiB and the arena, 128 MiB is small on any training GPU. */
#define LCE_LOGITS_BYTES ((int64_t)128 << 20)

/* One node's shapes and workspace pieces, in the order they are carved (0 bytes: unused). */
struct lce_plan {
    int64_t N, D, C, R;   /* rows, features, classes, rows a chunk */
    bool widen_x, widen_w;
    size_t lt, logits, row_loss, x32, w32, dx32, dw32;
};

/* The forward takes x and w as they are when they share a type (f32 in TF32, 16-bit ones with
 * exact products and f32 sums); mixed types, and every 16-bit operand of the backward (whose
 * dlogits are f32), are widened to f32 — x a chunk at a time, w whole. 16-bit dx and dw get f32
 * scratch (dx a chunk, dw whole: it sums over every chunk) and are rounded once, as the CPU's. */
static struct lce_plan plan_of(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    bool bwd = node->op == TR_OP_LINEAR_CROSS_ENTROPY_BWD;
    const struct tr_tensor *x = &in[bwd ? 1 : 0], *w = x + 1;
    struct lce_plan p;
    memset(&p, 0, sizeof p);
    p.N = cuda_rows(x), p.D = cuda_cols(x), p.C = w->dim[0];
    if (p.N == 0)
        return p;
    int64_t R = node->attrs.cross_entropy.chunk;
    if (R <= 0)
        R = p.C > 0 ? LCE_LOGITS_BYTES / (p.C * (int64_t)sizeof(float)) : p.N;
    p.R = R < 1 ? 1 : R > p.N ? p.N : R;
    bool widen = bwd || x->dtype != w->dtype;
    p.widen_x = widen && x->dtype != TR_F32;
    p.widen_w = widen && w->dtype != TR_F32;
    size_t f = sizeof(float);
    p.lt = CUDA_LT_WORKSPACE;
    p.logits = cuda_aligned((size_t)(p.R * p.C) * f);
    p.row_loss = bwd ? 0 : cuda_aligned((size_t)p.N * f);
    p.x32 = p.widen_x ? cuda_aligned((size_t)(p.R * p.D) * f) : 0;
    p.w32 = p.widen_w ? cuda_aligned((size_t)(p.C * p.D) * f) : 0;
    p.dx32 = bwd && out[0].dtype != TR_F32 ? cuda_aligned((size_t)(p.R * p.D) * f) : 0;
    p.dw32 = bwd && out[1].dtype != TR_F32 ? cuda_aligned((size_t)(p.C * p.D) * f) : 0;
    return p;
}

static size_t plan_bytes(const struct lce_plan *p)
{
    return p->lt + p->logits + p->row_loss + p->x32 + p->w32 + p->dx32 + p->dw32;
}

size_t tr_cuda_linear_cross_entropy_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                              const struct tr_tensor *out)
{
    struct lce_plan p = plan_of(node, in, out);
    return plan_bytes(&p);
}

struct lce_scratch {
    void *lt;
    float *logits, *row_loss, *x32, *w32, *dx32, *dw32;
};

static float *piece(char **at, size_t bytes)
{
    float *p = bytes ? (float *)*at : NULL;
    *at += bytes;
    return p;
}

static struct lce_scratch carve(const struct lce_plan *p, void *workspace)
{
    char *at = (char *)workspace;
    struct lce_scratch s;
    s.lt = piece(&at, p->lt);
    s.logits = piece(&at, p->logits), s.row_loss = piece(&at, p->row_loss);
    s.x32 = piece(&at, p->x32), s.w32 = piece(&at, p->w32);
    s.dx32 = piece(&at, p->dx32), s.dw32 = piece(&at, p->dw32);
    return s;
}

/* What both directions start with: the context; the targets (in[t]) i32 and in range, counted
 * (a wait on the stream: the count is needed here), as the CPU before anything is written;
 * the plan and its workspace. */
static int lce_begin(const struct tr_kernel_args *a, int t, struct cuda_context **ctx, struct lce_plan *p,
                     struct lce_scratch *s, int64_t *count)
{
    if (!(*ctx = cuda_begin(a)))
        return TR_EINVAL;
    const struct tr_tensor *targets = &a->in[t];
    if (targets->dtype != TR_I32)
        return cuda_fail(a, "targets must be i32, not %s", tr_dtype_name(targets->dtype));
    *p = plan_of(a->node, a->in, a->out);
    int rc = cuda_check_ids(a, *ctx, (const int32_t *)targets->data, p->N, p->C, true,
                            a->node->attrs.cross_entropy.ignore_index, count);
    if (rc)
        return rc;
    size_t need = plan_bytes(p);
    if (need && (!a->workspace || a->workspace_bytes < need))
        return cuda_fail(a, "needs %zu bytes of workspace, has %zu", need, a->workspace ? a->workspace_bytes : 0);
    *s = carve(p, a->workspace);
    return 0;
}

/* w as the GEMMs take it: as it is, or widened to f32 in the workspace (once a call). */
static const void *gemm_w(const struct lce_plan *p, const struct lce_scratch *s, cudaStream_t stream,
                          const struct tr_tensor *w, enum tr_dtype *type)
{
    *type = p->widen_w ? TR_F32 : w->dtype;
    if (!p->widen_w)
        return w->data;
    cuda_convert(stream, w->data, w->dtype, s->w32, TR_F32, p->C * p->D, 0);
    return s->w32;
}

/* Rows [r0, r0 + rows) of x as the GEMMs take them: in place, or widened to f32. */
static const void *gemm_x(const struct lce_plan *p, const struct lce_scratch *s, cudaStream_t stream,
                          const struct tr_tensor *x, int64_t r0, int64_t rows, enum tr_dtype *type)
{
    const void *X = (const char *)x->data + (size_t)(r0 * p->D) * tr_dtype_size(x->dtype);
    *type = p->widen_x ? TR_F32 : x->dtype;
    if (!p->widen_x)
        return X;
    cuda_convert(stream, X, x->dtype, s->x32, TR_F32, rows * p->D, 0);
    return s->x32;
}

/* Σ v over the block in ints (the rank's count; any order gives the same sum). `shared` holds
 * 32 ints; the call ends with a barrier. */
__device__ int block_count(int v, int *shared)
{
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0)
        shared[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0;
    for (int w = 0; w < (int)blockDim.x / 32; w++)
        v += shared[w];
    __syncthreads();
    return v;
}

/* Row r = r0 + blockIdx.x of the chunk's logits l: lse_r = m + log Σ_c exp(l_c − m), m the max;
 * rank_r = #{c : l_c > l_t, or l_c = l_t and c < t}; row_loss_r = lse_r − l_t. Ignored rows:
 * lse 0, rank −1, loss 0. */
__global__ void lce_rows_kernel(const float *logits, int64_t C, const int32_t *t, int32_t ignore, int64_t r0,
                                void *lse, int tlse, int32_t *rank, float *row_loss)
{
    __shared__ float shared[32];
    __shared__ int counts[32];
    int64_t r = r0 + blockIdx.x;
    const float *l = logits + blockIdx.x * C;
    int32_t target = t[r];
    if (target == ignore) {   /* the whole block leaves together: no barrier is skipped */
        if (threadIdx.x == 0)
            cuda_store(lse, tlse, r, 0), rank[r] = -1, row_loss[r] = 0;
        return;
    }
    float lt = l[target], v = -INFINITY;
    int above = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float e = l[c];
        v = e > v ? e : v;
        above += e > lt || (e == lt && c < target);
    }
    float m = cuda_block_reduce(v, cuda_max(), shared);
    int k = block_count(above, counts);
    float sum = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        sum += expf(l[c] - m);
    float s = cuda_block_reduce(sum, cuda_sum(), shared);
    if (threadIdx.x == 0) {
        float e = m + logf(s);
        cuda_store(lse, tlse, r, e), rank[r] = k, row_loss[r] = e - lt;
    }
}

/* in x [N, D], w [C, D], targets i32 [N]; out loss [1] (the mean of lse − l_t over the counted
 * rows, 0 when none; overwritten, as the CPU's), lse [N], rank i32 [N] (saved: overwritten). */
int tr_cuda_linear_cross_entropy(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx;
    struct lce_plan p;
    struct lce_scratch s;
    int64_t count = 0;
    int rc = lce_begin(a, 2, &ctx, &p, &s, &count);
    if (rc)
        return rc;
    const struct tr_tensor *x = &a->in[0], *w = &a->in[1], *loss = &a->out[0], *lse = &a->out[1];
    const int32_t *t = (const int32_t *)a->in[2].data;
    int32_t ignore = a->node->attrs.cross_entropy.ignore_index;
    enum tr_dtype wt, xt;
    const void *W = p.N ? gemm_w(&p, &s, ctx->stream, w, &wt) : NULL;
    for (int64_t r0 = 0; r0 < p.N && !rc; r0 += p.R) {
        int64_t rows = p.N - r0 < p.R ? p.N - r0 : p.R;
        const void *X = gemm_x(&p, &s, ctx->stream, x, r0, rows, &xt);
        rc = cuda_gemm(a, ctx, 0, 1, rows, p.C, p.D, X, xt, W, wt, 0, s.logits, TR_F32, s.lt);
        if (rc)
            break;
        lce_rows_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(s.logits, p.C, t, ignore, r0, lse->data, lse->dtype,
                                                                 (int32_t *)a->out[2].data, s.row_loss);
        rc = cuda_launched(a, "the rows of linear_cross_entropy");
    }
    if (rc)
        return rc;
    cuda_mean_of_rows(ctx->stream, s.row_loss, p.N, count, loss->data, loss->dtype, 0);
    return cuda_launched(a, "the mean of linear_cross_entropy");
}

/* The chunk's logits l become g = dloss·(softmax(l) − onehot(t))/count in place, 0 in ignored
 * rows: g_c = scale·exp(l_c − lse_r), then g_t −= scale (the CPU's two steps and roundings). */
__global__ void lce_dlogits_kernel(float *g, int64_t C, const int32_t *t, int32_t ignore, int64_t r0, const void *lse,
                                   int tlse, const void *dloss, int tdl, int64_t count)
{
    int64_t r = r0 + blockIdx.x;
    float *row = g + blockIdx.x * C;
    int32_t target = t[r];
    if (target == ignore) {
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            row[c] = 0;
        return;
    }
    float scale = count ? cuda_load(dloss, tdl, 0) / (float)count : 0, m = cuda_load(lse, tlse, r);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float v = scale * expf(row[c] - m);
        row[c] = c == target ? v - scale : v;
    }
}

/* in dloss [1], x [N, D], w [C, D], targets, lse [N]; out dx [N, D] (+= with accumulate), dw
 * [C, D] (+= with accumulate or attrs add_dw): per chunk dx_chunk = g·w and dw += gᵀ·x_chunk,
 * the first chunk overwriting dw unless it is added into. All GEMMs f32 in TF32. */
int tr_cuda_linear_cross_entropy_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx;
    struct lce_plan p;
    struct lce_scratch s;
    int64_t count = 0;
    int rc = lce_begin(a, 3, &ctx, &p, &s, &count);
    if (rc)
        return rc;
    const struct tr_tensor *dloss = &a->in[0], *x = &a->in[1], *w = &a->in[2], *lse = &a->in[4];
    const struct tr_tensor *dx = &a->out[0], *dw = &a->out[1];
    const int32_t *t = (const int32_t *)a->in[3].data;
    int32_t ignore = a->node->attrs.cross_entropy.ignore_index;
    int acc = a->node->accumulate, add_dw = acc || a->node->attrs.cross_entropy.add_dw;
    if (p.N == 0)   /* no rows: dw is a sum of nothing */
        return add_dw ? 0 : cuda_status(a, cudaMemsetAsync(dw->data, 0, tr_tensor_bytes(dw), ctx->stream),
                                        "cudaMemsetAsync");
    enum tr_dtype wt, xt;
    const void *W = gemm_w(&p, &s, ctx->stream, w, &wt);
    void *DW = s.dw32 ? (void *)s.dw32 : dw->data;
    if (s.dw32 && add_dw)
        cuda_convert(ctx->stream, dw->data, dw->dtype, s.dw32, TR_F32, p.C * p.D, 0);
    size_t dx_size = tr_dtype_size(dx->dtype);
    for (int64_t r0 = 0; r0 < p.N && !rc; r0 += p.R) {
        int64_t rows = p.N - r0 < p.R ? p.N - r0 : p.R;
        const void *X = gemm_x(&p, &s, ctx->stream, x, r0, rows, &xt);
        void *dx_rows = (char *)dx->data + (size_t)(r0 * p.D) * dx_size, *DX = s.dx32 ? (void *)s.dx32 : dx_rows;
        if ((rc = cuda_gemm(a, ctx, 0, 1, rows, p.C, p.D, X, xt, W, wt, 0, s.logits, TR_F32, s.lt)))
            break;
        lce_dlogits_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(s.logits, p.C, t, ignore, r0, lse->data, lse->dtype,
                                                                    dloss->data, dloss->dtype, count);
        if ((rc = cuda_launched(a, "the dlogits of linear_cross_entropy_bwd")))
            break;
        if ((rc = cuda_gemm(a, ctx, 0, 0, rows, p.D, p.C, s.logits, TR_F32, W, wt, !s.dx32 && acc ? 1 : 0, DX, TR_F32,
                            s.lt)))
            break;
        if (s.dx32)
            cuda_convert(ctx->stream, s.dx32, TR_F32, dx_rows, dx->dtype, rows * p.D, acc);
        rc = cuda_gemm(a, ctx, 1, 0, p.C, p.D, rows, s.logits, TR_F32, X, xt, add_dw || r0 ? 1 : 0, DW, TR_F32, s.lt);
    }
    if (rc)
        return rc;
    if (s.dw32)
        cuda_convert(ctx->stream, s.dw32, TR_F32, dw->data, dw->dtype, p.C * p.D, 0);
    return cuda_launched(a, "the widening and rounding of linear_cross_entropy_bwd's 16-bit tensors");
}
