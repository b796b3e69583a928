/* ATTENTION and ATTENTION_BWD on the GPU, composed from cuBLASLt GEMMs (cuda_lt_matmul) and two
 * fused row kernels, with the CPU's semantics (attention.inc): per (batch, head) pair the scores
 * scale·q·kᵀ go to an f32 buffer in the workspace, one kernel masks them (causal, padding) and
 * takes the row softmax (P and lse), then o = P·v; the backward recomputes P from q, k and lse.
 * Pairs run in groups whose score buffers stay under ATTN_SCORES_CAP: one strided batched GEMM a
 * step for a whole group. A flash kernel of our own (or cuDNN's) is the later speed-up.
 *
 * Precision: f32 operands run in TF32 (as MATMUL), the scores, P, dP and lse in f32. 16-bit
 * operands (q, k, v and do of one type) multiply exactly with f32 sums; the scores, lse and dP
 * stay f32, but P and dS are rounded to the operands' type for the GEMMs that read them (P·v,
 * Pᵀ·do, dS·k, dSᵀ·q — cuBLASLt takes one type for both operands; FlashAttention rounds P so
 * too): o, dq, dk and dv carry about one 16-bit rounding more than the CPU's f32 result on the
 * widened inputs. Mixed operand types (bf16 beside f16 or f32, or a 16-bit output of f32
 * operands) widen the 16-bit tensors to f32 copies in the workspace, as MATMUL does. */
#include "backend/cuda/internal.h"

#include <math.h>
#include <string.h>

/* The score buffers of one group (scores, dP, and P in 16 bits) stay under this, but hold at
 * least one pair: 64 MiB is 2048² f32 scores and their gradient, a pair at a time. */
#define ATTN_SCORES_CAP ((size_t)64 << 20)
#define ATTN_MAX_OPERANDS 7

/* What workspace_bytes and the kernels both read: the shapes, the GEMMs' operand type, the
 * float operands (q, k, v then o forward; do, q, k, v then dq, dk, dv backward) and the
 * workspace's pieces, in this order: the f32 copies, scores, dprobs, probs, cuBLASLt's. */
struct attn_plan {
    int64_t B, H, S, D, pairs, group;   /* group: pairs a step */
    bool bwd, empty;                    /* empty: nothing to compute, no workspace */
    enum tr_dtype t;                    /* every GEMM operand's type, P and dS included */
    int nin_ops, nops;
    const struct tr_tensor *ops[ATTN_MAX_OPERANDS];
    size_t copy[ATTN_MAX_OPERANDS];     /* f32 copy of a 16-bit operand when the types mix; 0: none */
    size_t scores, dprobs, probs;       /* f32 [group, S, S]; dP (backward); P or dS in t if 16-bit */
};

static size_t plan_total(const struct attn_plan *p)
{
    if (p->empty)
        return 0;
    size_t bytes = p->scores + p->dprobs + p->probs + CUDA_LT_WORKSPACE;
    for (int i = 0; i < p->nops; i++)
        bytes += p->copy[i];
    return bytes;
}

static struct attn_plan plan_of(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct attn_plan p;
    memset(&p, 0, sizeof p);
    p.bwd = node->op == TR_OP_ATTENTION_BWD;
    p.nin_ops = p.bwd ? 4 : 3;
    p.nops = p.nin_ops + (p.bwd ? 3 : 1);
    for (int i = 0; i < p.nops; i++)
        p.ops[i] = i < p.nin_ops ? &in[i] : &out[i - p.nin_ops];
    const struct tr_tensor *q = p.ops[p.nin_ops - 3];
    p.B = q->dim[0], p.H = q->dim[1], p.S = q->dim[2], p.D = q->dim[3];
    p.pairs = p.B * p.H;
    p.empty = p.pairs == 0 || p.S == 0 || (p.bwd && p.D == 0);
    /* native: the inputs share one type, each output is of it or f32 (cuBLASLt writes f32 from
     * 16-bit operands, never 16 bits from f32 ones) */
    bool native = true;
    p.t = p.ops[0]->dtype;
    for (int i = 0; i < p.nops; i++)
        native = native && (p.ops[i]->dtype == p.t || (i >= p.nin_ops && p.ops[i]->dtype == TR_F32));
    if (!native)
        p.t = TR_F32;
    for (int i = 0; i < p.nops; i++)
        p.copy[i] = !native && p.ops[i]->dtype != TR_F32
                        ? cuda_aligned((size_t)tr_tensor_numel(p.ops[i]) * sizeof(float))
                        : 0;
    size_t square = (size_t)(p.S * p.S);
    size_t per_pair = square * (sizeof(float) * (p.bwd ? 2 : 1) + (p.t == TR_F32 ? 0 : 2));
    int64_t fit = per_pair ? (int64_t)(ATTN_SCORES_CAP / per_pair) : p.pairs;
    p.group = fit < 1 ? 1 : fit > p.pairs ? p.pairs : fit;
    p.scores = cuda_aligned((size_t)p.group * square * sizeof(float));
    p.dprobs = p.bwd ? p.scores : 0;
    p.probs = p.t == TR_F32 ? 0 : cuda_aligned((size_t)p.group * square * 2);
    return p;
}

size_t tr_cuda_attention_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct attn_plan p = plan_of(node, in, out);
    return plan_total(&p);
}

/* ---- the fused kernels ------------------------------------------------------------------------ */

/* Row r of a group is query i = r mod S of pair first + r / S; it sees key j when j ≤ i (causal)
 * and mask[b, j] ≠ 0 (b = pair / H), as the CPU's attn_scores. */
__device__ __forceinline__ bool attn_sees(const uint8_t *mask, int causal, int64_t S, int64_t H, int64_t pair,
                                          int64_t i, int64_t j)
{
    return (!causal || j <= i) && (!mask || mask[pair / H * S + j]);
}

/* m = max of the visible s_j, l = Σ exp(s_j − m); p_j = exp(s_j − m)/l (0 where not seen),
 * lse_i = m + log l; a row that sees no key: p = 0, lse = −∞ (the CPU's). One block a row. */
__global__ void attn_softmax_kernel(float *scores, void *probs, int pt, void *lse, int lt, const uint8_t *mask,
                                    int64_t rows, int64_t S, int64_t H, int64_t first, int causal)
{
    __shared__ float shared[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i = r % S, pair = first + r / S;
        const float *s = scores + r * S;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < S; j += blockDim.x)
            if (attn_sees(mask, causal, S, H, pair, i, j) && s[j] > m)
                m = s[j];
        m = cuda_block_reduce(m, cuda_max(), shared);
        float sum = 0;
        for (int64_t j = threadIdx.x; j < S && m != -INFINITY; j += blockDim.x)
            if (attn_sees(mask, causal, S, H, pair, i, j))
                sum += expf(s[j] - m);
        sum = cuda_block_reduce(sum, cuda_sum(), shared);
        /* every read of the row is behind the reductions' barriers: P may overwrite it (f32) */
        for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
            bool seen = m != -INFINITY && attn_sees(mask, causal, S, H, pair, i, j);
            cuda_store(probs, pt, r * S + j, seen ? expf(s[j] - m) / sum : 0.0f);
        }
        if (threadIdx.x == 0)
            cuda_store(lse, lt, first * S + r, m == -INFINITY ? -INFINITY : m + logf(sum));
    }
}

/* p_ij = exp(s_ij − lse_i) where key j is seen, else 0 (and on a row with lse = −∞): f32 in
 * place of the scores, and in probs (type pt) too when the GEMMs take 16 bits. */
__global__ void attn_probs_kernel(float *scores, void *probs, int pt, const void *lse, int lt, const uint8_t *mask,
                                  int64_t count, int64_t S, int64_t H, int64_t first, int causal)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / S, j = e % S, i = r % S, pair = first + r / S;
        float l = cuda_load(lse, lt, first * S + r);
        float p = l != -INFINITY && attn_sees(mask, causal, S, H, pair, i, j) ? expf(scores[e] - l) : 0.0f;
        scores[e] = p;
        if (pt != TR_F32)
            cuda_store(probs, pt, e, p);
    }
}

/* δ_i = Σ_d do_id·o_id;  ds_ij = p_ij·(dp_ij − δ_i), stored in type dt (in place of dP when f32).
 * One block a row; do and o are whole tensors, row first·S + r. */
__global__ void attn_dscores_kernel(const float *probs, const float *dprobs, void *ds, int dt, const void *dout,
                                    int tdo, const void *o, int to, int64_t rows, int64_t S, int64_t D, int64_t first)
{
    __shared__ float shared[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t row = (first * S + r) * D;
        float part = 0;
        for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
            part += cuda_load(dout, tdo, row + d) * cuda_load(o, to, row + d);
        float delta = cuda_block_reduce(part, cuda_sum(), shared);
        for (int64_t j = threadIdx.x; j < S; j += blockDim.x)
            cuda_store(ds, dt, r * S + j, probs[r * S + j] * (dprobs[r * S + j] - delta));
    }
}

/* ---- the runs ------------------------------------------------------------------------------------- */

/* A run's device pointers: each operand as the GEMMs see it (its f32 copy, or itself) and the
 * workspace's pieces. */
struct attn_run {
    struct attn_plan p;
    struct cuda_context *ctx;
    char *x[ATTN_MAX_OPERANDS];
    enum tr_dtype xt[ATTN_MAX_OPERANDS];
    float *scores, *dprobs;
    void *probs;   /* P (and dS backward) in p.t: probs, or the f32 buffer itself when p.t is f32 */
    void *lt;
    float scale;
    int causal;
};

/* Checks the workspace, carves it, widens the inputs that need f32 copies (and the outputs
 * the node adds into). */
static int attn_start(const struct tr_kernel_args *a, struct cuda_context *ctx, struct attn_run *run)
{
    struct attn_plan *p = &run->p;
    size_t need = plan_total(p);
    if (!a->workspace || a->workspace_bytes < need)
        return cuda_fail(a, "needs %zu bytes of workspace, has %zu", need, a->workspace ? a->workspace_bytes : 0);
    run->ctx = ctx;
    char *at = (char *)a->workspace;
    for (int i = 0; i < p->nops; i++) {
        const struct tr_tensor *t = p->ops[i];
        run->x[i] = (char *)t->data, run->xt[i] = t->dtype;
        if (!p->copy[i])
            continue;
        run->x[i] = at, run->xt[i] = TR_F32, at += p->copy[i];
        if (i < p->nin_ops || a->node->accumulate)
            cuda_convert(ctx->stream, t->data, t->dtype, run->x[i], TR_F32, tr_tensor_numel(t), 0);
    }
    run->scores = (float *)at, at += p->scores;
    run->dprobs = (float *)at, at += p->dprobs;
    run->probs = p->t == TR_F32 ? (void *)run->scores : (void *)at, at += p->probs;
    run->lt = at;
    float scale = a->node->attrs.attention.scale;
    run->scale = scale != 0 ? scale : 1 / sqrtf((float)p->D);
    run->causal = a->node->attrs.attention.causal;
    return cuda_launched(a, "the widening of 16-bit operands");
}

/* Rounds the outputs computed in f32 copies back into their tensors. */
static int attn_finish(const struct tr_kernel_args *a, struct attn_run *run)
{
    for (int i = run->p.nin_ops; i < run->p.nops; i++)
        if (run->p.copy[i])
            cuda_convert(run->ctx->stream, run->x[i], TR_F32, run->p.ops[i]->data, run->p.ops[i]->dtype,
                         tr_tensor_numel(run->p.ops[i]), 0);
    return cuda_launched(a, "the rounding of outputs to 16 bits");
}

/* Operand i of the pairs from `first` on: [S, D] matrices S·D elements apart. */
static char *attn_at(const struct attn_run *run, int i, int64_t first)
{
    return run->x[i] + (size_t)(first * run->p.S * run->p.D) * tr_dtype_size(run->xt[i]);
}

/* The GEMM of n pairs: op(A) [M, K]·op(B) [K, N], A and B a_stride and b_stride elements apart. */
static struct cuda_gemm attn_gemm(int ta, int tb, int64_t n, int64_t M, int64_t N, int64_t K, int64_t a_stride,
                                  int64_t b_stride)
{
    struct cuda_gemm g = {ta, tb, n, M, N, K, a_stride, b_stride};
    return g;
}

/* scores = scale·q·kᵀ of n pairs (q, k operands qi, qi + 1): [S, S] f32 each. */
static int attn_scores(const struct tr_kernel_args *a, struct attn_run *run, int qi, int64_t first, int64_t n)
{
    const struct attn_plan *p = &run->p;
    if (p->D == 0)   /* empty dot products (the CPU's GEMV adds nothing to its zeroed row) */
        return cuda_status(a,
                           cudaMemsetAsync(run->scores, 0, (size_t)(n * p->S * p->S) * sizeof(float), run->ctx->stream),
                           "cudaMemsetAsync of the scores");
    struct cuda_gemm g = attn_gemm(0, 1, n, p->S, p->S, p->D, p->S * p->D, p->S * p->D);
    return cuda_lt_matmul(a, run->ctx, &g, attn_at(run, qi, first), p->t, attn_at(run, qi + 1, first), p->t,
                          run->scores, TR_F32, run->scale, 0, run->lt);
}

static const uint8_t *attn_mask(const struct tr_kernel_args *a, int index)
{
    return a->nin > index ? (const uint8_t *)a->in[index].data : NULL;
}

int tr_cuda_attention(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    struct attn_run run;
    memset(&run, 0, sizeof run);
    run.p = plan_of(a->node, a->in, a->out);
    const struct attn_plan *p = &run.p;
    if (p->empty)
        return 0;
    int rc = attn_start(a, ctx, &run);
    const struct tr_tensor *lse = &a->out[1];
    float beta = a->node->accumulate ? 1.0f : 0.0f;
    for (int64_t first = 0; first < p->pairs && !rc; first += p->group) {
        int64_t n = p->pairs - first < p->group ? p->pairs - first : p->group, rows = n * p->S;
        if ((rc = attn_scores(a, &run, 0, first, n)))
            break;
        attn_softmax_kernel<<<cuda_blocks(rows, 1), CUDA_ROW_THREADS, 0, ctx->stream>>>(
            run.scores, run.probs, p->t, lse->data, lse->dtype, attn_mask(a, 3), rows, p->S, p->H, first, run.causal);
        if ((rc = cuda_launched(a, "the masked softmax")) || p->D == 0)
            continue;
        /* o (+)= P·v */
        struct cuda_gemm g = attn_gemm(0, 0, n, p->S, p->D, p->S, p->S * p->S, p->S * p->D);
        rc = cuda_lt_matmul(a, ctx, &g, run.probs, p->t, attn_at(&run, 2, first), p->t, attn_at(&run, 3, first),
                            run.xt[3], 1, beta, run.lt);
    }
    return rc ? rc : attn_finish(a, &run);
}

/* One group of the backward: P again, dv (+)= Pᵀ·do, dP = do·vᵀ, dS = P⊙(dP − rowsum(do⊙o)),
 * dq (+)= scale·dS·k, dk (+)= scale·dSᵀ·q. Operands: 0 do, 1 q, 2 k, 3 v, 4 dq, 5 dk, 6 dv. */
static int attn_bwd_group(const struct tr_kernel_args *a, struct attn_run *run, int64_t first, int64_t n)
{
    const struct attn_plan *p = &run->p;
    cudaStream_t stream = run->ctx->stream;
    const struct tr_tensor *o = &a->in[4], *lse = &a->in[5];
    int64_t S = p->S, D = p->D, rows = n * S, count = rows * S;
    float beta = a->node->accumulate ? 1.0f : 0.0f;
    int rc = attn_scores(a, run, 1, first, n);
    if (rc)
        return rc;
    attn_probs_kernel<<<cuda_blocks(count, 256), 256, 0, stream>>>(run->scores, run->probs, p->t, lse->data, lse->dtype,
                                                                  attn_mask(a, 6), count, S, p->H, first, run->causal);
    if ((rc = cuda_launched(a, "the probabilities")))
        return rc;
    struct cuda_gemm pt_do = attn_gemm(1, 0, n, S, D, S, S * S, S * D);
    struct cuda_gemm do_vt = attn_gemm(0, 1, n, S, S, D, S * D, S * D);
    rc = cuda_lt_matmul(a, run->ctx, &pt_do, run->probs, p->t, attn_at(run, 0, first), p->t, attn_at(run, 6, first),
                        run->xt[6], 1, beta, run->lt);
    if (!rc)
        rc = cuda_lt_matmul(a, run->ctx, &do_vt, attn_at(run, 0, first), p->t, attn_at(run, 3, first), p->t,
                            run->dprobs, TR_F32, 1, 0, run->lt);
    if (rc)
        return rc;
    /* dS where P was (16-bit) or in place of dP (f32): the Pᵀ·do GEMM before it is done, in order */
    void *ds = p->t == TR_F32 ? (void *)run->dprobs : run->probs;
    attn_dscores_kernel<<<cuda_blocks(rows, 1), CUDA_ROW_THREADS, 0, stream>>>(
        run->scores, run->dprobs, ds, p->t, run->x[0], run->xt[0], o->data, o->dtype, rows, S, D, first);
    if ((rc = cuda_launched(a, "the score gradients")))
        return rc;
    struct cuda_gemm ds_k = attn_gemm(0, 0, n, S, D, S, S * S, S * D);
    struct cuda_gemm dst_q = attn_gemm(1, 0, n, S, D, S, S * S, S * D);
    rc = cuda_lt_matmul(a, run->ctx, &ds_k, ds, p->t, attn_at(run, 2, first), p->t, attn_at(run, 4, first), run->xt[4],
                        run->scale, beta, run->lt);
    if (!rc)
        rc = cuda_lt_matmul(a, run->ctx, &dst_q, ds, p->t, attn_at(run, 1, first), p->t, attn_at(run, 5, first),
                            run->xt[5], run->scale, beta, run->lt);
    return rc;
}

int tr_cuda_attention_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    struct attn_run run;
    memset(&run, 0, sizeof run);
    run.p = plan_of(a->node, a->in, a->out);
    const struct attn_plan *p = &run.p;
    if (p->empty)
        return 0;
    int rc = attn_start(a, ctx, &run);
    for (int64_t first = 0; first < p->pairs && !rc; first += p->group)
        rc = attn_bwd_group(a, &run, first, p->pairs - first < p->group ? p->pairs - first : p->group);
    return rc ? rc : attn_finish(a, &run);
}
