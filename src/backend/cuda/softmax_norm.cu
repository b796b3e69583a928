/* Row kernels on the GPU: SOFTMAX, LOG_SOFTMAX and CROSS_ENTROPY (one block a row: the max,
 * then Σ exp(x − max), each a fixed tree of warp shuffles), LAYERNORM with its backward, and
 * EMBEDDING with its backward. No float sum depends on scheduling: rows reduce in fixed trees,
 * columns (dgamma, dbeta) in fixed chunks added in order, and the embedding gradient sums each
 * table row's positions in position order, as the CPU does. */
#include "backend/cuda/internal.h"

#include <math.h>

#define ROW CUDA_ROW_THREADS


/* m = max_c x_c and s = Σ_c exp(x_c − m) of the row starting at element off, every thread. */
__device__ void row_max_sumexp(const void *x, int tx, int64_t off, int64_t cols, float *shared, float *m, float *s)
{
    float v = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float e = cuda_load(x, tx, off + c);
        v = e > v ? e : v;
    }
    *m = cuda_block_reduce(v, cuda_max(), shared);
    float sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        sum += expf(cuda_load(x, tx, off + c) - *m);
    *s = cuda_block_reduce(sum, cuda_sum(), shared);
}

/* ---- softmax and log-softmax ----------------------------------------------------------------- */

/* softmax: y = exp(x − m)/s;  log-softmax: y = (x − m) − log s (x − m first, as the CPU) */
__global__ void softmax_kernel(const void *x, int tx, void *y, int ty, int64_t cols, int acc, int log_form)
{
    __shared__ float shared[32];
    int64_t off = blockIdx.x * cols;
    float m, s;
    row_max_sumexp(x, tx, off, cols, shared, &m, &s);
    float log_s = logf(s);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = cuda_load(x, tx, off + c);
        cuda_put(y, ty, off + c, log_form ? (v - m) - log_s : expf(v - m) / s, acc);
    }
}

/* softmax: dx = y ⊙ (dy − Σ dy⊙y);  log-softmax: dx = dy − exp(y)·Σ dy */
__global__ void softmax_bwd_kernel(const void *dy, int tdy, const void *y, int ty, void *dx, int tdx, int64_t cols,
                                   int acc, int log_form)
{
    __shared__ float shared[32];
    int64_t off = blockIdx.x * cols;
    float part = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = cuda_load(dy, tdy, off + c);
        part += log_form ? d : d * cuda_load(y, ty, off + c);
    }
    float total = cuda_block_reduce(part, cuda_sum(), shared);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = cuda_load(dy, tdy, off + c), v = cuda_load(y, ty, off + c);
        cuda_put(dx, tdx, off + c, log_form ? d - expf(v) * total : v * (d - total), acc);
    }
}

static int softmax_forward(const struct tr_kernel_args *a, int log_form)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    int64_t rows = cuda_rows(x), cols = cuda_cols(x);
    if (rows == 0 || cols == 0)
        return 0;
    softmax_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(x->data, x->dtype, y->data, y->dtype, cols,
                                                            a->node->accumulate, log_form);
    return cuda_launched(a, log_form ? "log_softmax" : "softmax");
}

static int softmax_backward(const struct tr_kernel_args *a, int log_form)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *dy = &a->in[0], *y = &a->in[1], *dx = &a->out[0];
    int64_t rows = cuda_rows(dy), cols = cuda_cols(dy);
    if (rows == 0 || cols == 0)
        return 0;
    softmax_bwd_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(dy->data, dy->dtype, y->data, y->dtype, dx->data,
                                                                dx->dtype, cols, a->node->accumulate, log_form);
    return cuda_launched(a, log_form ? "log_softmax_bwd" : "softmax_bwd");
}

int tr_cuda_softmax(const struct tr_kernel_args *a) { return softmax_forward(a, 0); }
int tr_cuda_log_softmax(const struct tr_kernel_args *a) { return softmax_forward(a, 1); }
int tr_cuda_softmax_bwd(const struct tr_kernel_args *a) { return softmax_backward(a, 0); }
int tr_cuda_log_softmax_bwd(const struct tr_kernel_args *a) { return softmax_backward(a, 1); }

/* ---- cross-entropy ------------------------------------------------------------------------------ */

/* loss_r = log s_r − (x[r, t_r] − m_r) for counted rows, 0 for ignored ones (scratch, f32) */
__global__ void cross_entropy_rows_kernel(const void *x, int tx, const int32_t *t, int32_t ignore, int64_t cols,
                                          float *row_loss)
{
    __shared__ float shared[32];
    int64_t r = blockIdx.x, off = r * cols;
    int32_t target = t[r];
    if (target == ignore) {   /* the whole block leaves together: no barrier is skipped */
        if (threadIdx.x == 0)
            row_loss[r] = 0;
        return;
    }
    float m, s;
    row_max_sumexp(x, tx, off, cols, shared, &m, &s);
    if (threadIdx.x == 0)
        row_loss[r] = logf(s) - (cuda_load(x, tx, off + target) - m);
}

/* loss (+)= Σ_r loss_r / count in double, one block: thread i takes rows i, i + ROW, .., then a
 * fixed tree; 0 when no row counts. */
__global__ void cross_entropy_mean_kernel(const float *row_loss, int64_t rows, int64_t count, void *loss, int tl,
                                          int acc)
{
    __shared__ double part[ROW];
    double s = 0;
    for (int64_t r = threadIdx.x; r < rows; r += ROW)
        s += row_loss[r];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int half = ROW / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        cuda_put(loss, tl, 0, count ? (float)(part[0] / (double)count) : 0.0f, acc);
}

void cuda_mean_of_rows(cudaStream_t stream, const float *row_loss, int64_t rows, int64_t count, void *loss, int tl,
                       int acc)
{
    cross_entropy_mean_kernel<<<1, ROW, 0, stream>>>(row_loss, rows, count, loss, tl, acc);
}

size_t tr_cuda_cross_entropy_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                       const struct tr_tensor *out)
{
    (void)node, (void)out;
    return cuda_aligned((size_t)cuda_rows(&in[0]) * sizeof(float));
}

static int targets_are_i32(const struct tr_kernel_args *a, const struct tr_tensor *t)
{
    if (t->dtype != TR_I32)
        return cuda_fail(a, "targets must be i32, not %s", tr_dtype_name(t->dtype));
    return 0;
}

/* in logits [N, C], targets i32 [N]; out loss [1]: the mean over targets ≠ ignore_index, 0 if
 * none. The targets are checked first (a wait on the stream): one outside [0, C) fails. */
int tr_cuda_cross_entropy(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *t = &a->in[1], *loss = &a->out[0];
    int32_t ignore = a->node->attrs.cross_entropy.ignore_index;
    int64_t rows = cuda_rows(x), cols = cuda_cols(x), count = 0;
    int rc;
    if ((rc = targets_are_i32(a, t)) || (rc = cuda_check_ids(a, ctx, (const int32_t *)t->data, rows, cols, true,
                                                              ignore, &count)))
        return rc;
    size_t need = tr_cuda_cross_entropy_workspace(a->node, a->in, a->out);
    if (need && (!a->workspace || a->workspace_bytes < need))
        return cuda_fail(a, "needs %zu bytes of workspace, has %zu", need, a->workspace ? a->workspace_bytes : 0);
    float *row_loss = (float *)a->workspace;
    if (rows > 0 && cols > 0)
        cross_entropy_rows_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(x->data, x->dtype,
                                                                           (const int32_t *)t->data, ignore, cols,
                                                                           row_loss);
    cuda_mean_of_rows(ctx->stream, row_loss, cols > 0 ? rows : 0, count, loss->data, loss->dtype,
                      a->node->accumulate);
    return cuda_launched(a, "cross_entropy");
}

/* dx[r] = dloss·(softmax(x[r]) − onehot(t_r))/count for counted rows, 0 for ignored ones */
__global__ void cross_entropy_bwd_kernel(const void *dloss, int tdl, const void *x, int tx, const int32_t *t,
                                         int32_t ignore, int64_t cols, int64_t count, void *dx, int tdx, int acc)
{
    __shared__ float shared[32];
    int64_t r = blockIdx.x, off = r * cols;
    int32_t target = t[r];
    if (target == ignore) {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
            cuda_put(dx, tdx, off + c, 0, acc);
        return;
    }
    float scale = count ? cuda_load(dloss, tdl, 0) / (float)count : 0;
    float m, s;
    row_max_sumexp(x, tx, off, cols, shared, &m, &s);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        cuda_put(dx, tdx, off + c, scale * (expf(cuda_load(x, tx, off + c) - m) / s - (c == target)), acc);
}

int tr_cuda_cross_entropy_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *dloss = &a->in[0], *x = &a->in[1], *t = &a->in[2], *dx = &a->out[0];
    int32_t ignore = a->node->attrs.cross_entropy.ignore_index;
    int64_t rows = cuda_rows(x), cols = cuda_cols(x), count = 0;
    int rc;
    if ((rc = targets_are_i32(a, t)) || (rc = cuda_check_ids(a, ctx, (const int32_t *)t->data, rows, cols, true,
                                                              ignore, &count)))
        return rc;
    if (rows == 0 || cols == 0)
        return 0;
    cross_entropy_bwd_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(
        dloss->data, dloss->dtype, x->data, x->dtype, (const int32_t *)t->data, ignore, cols, count, dx->data,
        dx->dtype, a->node->accumulate);
    return cuda_launched(a, "cross_entropy_bwd");
}

/* ---- layer norm ---------------------------------------------------------------------------------- */

/* mean = Σx/D; var = Σ(x − mean)²/D (two passes, never negative); rstd = 1/√(var + eps);
 * y = (x − mean)·rstd·gamma + beta; stats [r] = (mean, rstd), always overwritten. */
__global__ void layernorm_kernel(const void *x, int tx, const void *gamma, int tg, const void *beta, int tb,
                                 float eps, int64_t D, void *y, int ty, void *stats, int ts, int acc)
{
    __shared__ float shared[32];
    int64_t r = blockIdx.x, off = r * D;
    float sum = 0;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
        sum += cuda_load(x, tx, off + c);
    float mean = cuda_block_reduce(sum, cuda_sum(), shared) / (float)D;
    float squares = 0;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
        float d = cuda_load(x, tx, off + c) - mean;
        squares += d * d;
    }
    float rstd = 1.0f / sqrtf(cuda_block_reduce(squares, cuda_sum(), shared) / (float)D + eps);
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
        cuda_put(y, ty, off + c,
                 (cuda_load(x, tx, off + c) - mean) * rstd * cuda_load(gamma, tg, c) + cuda_load(beta, tb, c), acc);
    if (threadIdx.x == 0) {
        cuda_store(stats, ts, 2 * r, mean);
        cuda_store(stats, ts, 2 * r + 1, rstd);
    }
}

int tr_cuda_layernorm(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *g = &a->in[1], *b = &a->in[2], *y = &a->out[0], *st = &a->out[1];
    int64_t rows = cuda_rows(x), D = cuda_cols(x);
    if (rows == 0 || D == 0)
        return 0;
    layernorm_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(x->data, x->dtype, g->data, g->dtype, b->data, b->dtype,
                                                              a->node->attrs.norm.eps, D, y->data, y->dtype, st->data,
                                                              st->dtype, a->node->accumulate);
    return cuda_launched(a, "layernorm");
}

/* x̂ = (x − mean)·rstd, g = dy ⊙ gamma:  dx = rstd·(g − mean(g) − x̂·mean(g ⊙ x̂)) */
__global__ void layernorm_dx_kernel(const void *dy, int tdy, const void *x, int tx, const void *gamma, int tg,
                                    const void *stats, int ts, int64_t D, void *dx, int tdx, int acc)
{
    __shared__ float shared[32];
    int64_t r = blockIdx.x, off = r * D;
    float mean = cuda_load(stats, ts, 2 * r), rstd = cuda_load(stats, ts, 2 * r + 1), sum_g = 0, sum_gx = 0;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
        float g = cuda_load(dy, tdy, off + c) * cuda_load(gamma, tg, c);
        sum_g += g;
        sum_gx += g * (cuda_load(x, tx, off + c) - mean) * rstd;
    }
    float mean_g = cuda_block_reduce(sum_g, cuda_sum(), shared) / (float)D;
    float mean_gx = cuda_block_reduce(sum_gx, cuda_sum(), shared) / (float)D;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
        float g = cuda_load(dy, tdy, off + c) * cuda_load(gamma, tg, c);
        cuda_put(dx, tdx, off + c, rstd * (g - mean_g - (cuda_load(x, tx, off + c) - mean) * rstd * mean_gx), acc);
    }
}

/* The chunk partials of dgamma = Σ_rows dy ⊙ x̂ and dbeta = Σ_rows dy: a thread a column, its
 * chunk's rows top to bottom (cuda_finish_columns adds the chunks in order). */
__global__ void layernorm_param_partials_kernel(const void *dy, int tdy, const void *x, int tx, const void *stats,
                                                int ts, int64_t rows, int64_t D, float *partial_g, float *partial_b)
{
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, k = blockIdx.y;
    if (c >= D)
        return;
    int64_t r1 = (k + 1) * CUDA_COLUMN_CHUNK < rows ? (k + 1) * CUDA_COLUMN_CHUNK : rows;
    float dg = 0, db = 0;
    for (int64_t r = k * CUDA_COLUMN_CHUNK; r < r1; r++) {
        float d = cuda_load(dy, tdy, r * D + c);
        dg += d * (cuda_load(x, tx, r * D + c) - cuda_load(stats, ts, 2 * r)) * cuda_load(stats, ts, 2 * r + 1);
        db += d;
    }
    partial_g[k * D + c] = dg;
    partial_b[k * D + c] = db;
}

static size_t ln_partials_bytes(int64_t rows, int64_t D)
{
    return cuda_aligned((size_t)(cuda_column_chunks(rows) * D) * sizeof(float));
}

size_t tr_cuda_layernorm_bwd_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                       const struct tr_tensor *out)
{
    (void)node, (void)out;
    return 2 * ln_partials_bytes(cuda_rows(&in[1]), cuda_cols(&in[1]));
}

int tr_cuda_layernorm_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *dy = &a->in[0], *x = &a->in[1], *g = &a->in[2], *st = &a->in[3];
    const struct tr_tensor *dx = &a->out[0], *dg = &a->out[1], *db = &a->out[2];
    int64_t rows = cuda_rows(x), D = cuda_cols(x), chunks = cuda_column_chunks(rows);
    int acc = a->node->accumulate;
    if (D == 0)
        return 0;
    size_t part = ln_partials_bytes(rows, D), need = 2 * part;
    if (need && (!a->workspace || a->workspace_bytes < need))
        return cuda_fail(a, "needs %zu bytes of workspace, has %zu", need, a->workspace ? a->workspace_bytes : 0);
    if (chunks > 65535)
        return cuda_fail(a, "%lld rows are more than this kernel's %d", (long long)rows, 65535 * CUDA_COLUMN_CHUNK);
    float *partial_g = (float *)a->workspace, *partial_b = (float *)((char *)a->workspace + part);
    if (rows > 0) {
        layernorm_dx_kernel<<<(unsigned)rows, ROW, 0, ctx->stream>>>(dy->data, dy->dtype, x->data, x->dtype, g->data,
                                                                     g->dtype, st->data, st->dtype, D, dx->data,
                                                                     dx->dtype, acc);
        layernorm_param_partials_kernel<<<dim3((unsigned)((D + 255) / 256), (unsigned)chunks), 256, 0, ctx->stream>>>(
            dy->data, dy->dtype, x->data, x->dtype, st->data, st->dtype, rows, D, partial_g, partial_b);
    }
    cuda_finish_columns(ctx->stream, partial_g, chunks, D, dg->data, dg->dtype, acc);
    cuda_finish_columns(ctx->stream, partial_b, chunks, D, db->data, db->dtype, acc);
    return cuda_launched(a, "layernorm_bwd");
}

/* ---- embedding ------------------------------------------------------------------------------------ */

/* y[p, :] = table[ids[p], :] */
__global__ void embedding_kernel(const void *table, int tt, const int32_t *ids, int64_t n, int64_t D, void *y, int ty,
                                 int acc)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * D; i += (int64_t)gridDim.x * blockDim.x)
        cuda_put(y, ty, i, cuda_load(table, tt, (int64_t)ids[i / D] * D + i % D), acc);
}

int tr_cuda_embedding(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *table = &a->in[0], *ids = &a->in[1], *y = &a->out[0];
    int64_t V = table->dim[0], D = table->dim[1], n = tr_tensor_numel(ids), count;
    if (ids->dtype != TR_I32)
        return cuda_fail(a, "ids must be i32, not %s", tr_dtype_name(ids->dtype));
    int rc;
    if ((rc = cuda_check_ids(a, ctx, (const int32_t *)ids->data, n, V, false, 0, &count)))
        return rc;
    if (n == 0 || D == 0)
        return 0;
    embedding_kernel<<<cuda_blocks(n * D, 256), 256, 0, ctx->stream>>>(table->data, table->dtype,
                                                                       (const int32_t *)ids->data, n, D, y->data,
                                                                       y->dtype, a->node->accumulate);
    return cuda_launched(a, "embedding");
}

/* The backward, deterministic and sort-based: the keys id·2³² + position are sorted (a bitonic
 * sort over a power of two of them: unique keys, so any correct sort gives one order), which
 * lists each table row's positions in increasing order; the first key of each run of one id
 * then sums that run's dy rows in order, a thread a column, onto the row (0 or, accumulating,
 * its old value). The same additions in the same order as the CPU's scatter-add: bit for bit. */
static int64_t pow2_at_least(int64_t n)
{
    int64_t p = 1;
    while (p < n)
        p *= 2;
    return p;
}

size_t tr_cuda_embedding_bwd_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                       const struct tr_tensor *out)
{
    (void)node, (void)out;
    int64_t n = tr_tensor_numel(&in[1]);
    return n ? cuda_aligned((size_t)pow2_at_least(n) * sizeof(uint64_t)) : 0;
}

__global__ void sort_keys_kernel(const int32_t *ids, int64_t n, int64_t padded, unsigned long long *keys)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < padded; i += (int64_t)gridDim.x * blockDim.x)
        keys[i] = i < n ? ((unsigned long long)(uint32_t)ids[i] << 32) | (unsigned long long)i : ~0ull;
}

/* One compare-exchange pass of the bitonic network (stage k, distance j). */
__global__ void bitonic_pass_kernel(unsigned long long *keys, int64_t padded, int64_t j, int64_t k)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < padded; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t l = i ^ j;
        if (l <= i)
            continue;
        unsigned long long x = keys[i], y = keys[l];
        bool up = (i & k) == 0;
        if ((x > y) == up) {
            keys[i] = y;
            keys[l] = x;
        }
    }
}

/* Block (run start i, column block): the run of id v at sorted i.. adds its dy rows to row v. */
__global__ void scatter_runs_kernel(const unsigned long long *keys, int64_t n, const void *dy, int tdy, int64_t D,
                                    void *table, int tt)
{
    int64_t i = blockIdx.x, c = blockIdx.y * (int64_t)blockDim.x + threadIdx.x;
    unsigned long long v = keys[i] >> 32;
    if (c >= D || (i > 0 && keys[i - 1] >> 32 == v))
        return;
    float s = cuda_load(table, tt, (int64_t)v * D + c);
    for (int64_t j = i; j < n && keys[j] >> 32 == v; j++)
        s += cuda_load(dy, tdy, (int64_t)(keys[j] & 0xffffffffull) * D + c);
    cuda_store(table, tt, (int64_t)v * D + c, s);
}

int tr_cuda_embedding_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *dy = &a->in[0], *ids = &a->in[1], *table = &a->out[0];
    int64_t V = table->dim[0], D = table->dim[1], n = tr_tensor_numel(ids), count;
    if (ids->dtype != TR_I32)
        return cuda_fail(a, "ids must be i32, not %s", tr_dtype_name(ids->dtype));
    if (n > INT32_MAX)
        return cuda_fail(a, "%lld positions are more than this kernel's 2^31", (long long)n);
    int rc;
    if ((rc = cuda_check_ids(a, ctx, (const int32_t *)ids->data, n, V, false, 0, &count)))
        return rc;
    size_t need = tr_cuda_embedding_bwd_workspace(a->node, a->in, a->out);
    if (need && (!a->workspace || a->workspace_bytes < need))   /* before anything is written */
        return cuda_fail(a, "needs %zu bytes of workspace, has %zu", need, a->workspace ? a->workspace_bytes : 0);
    if (!a->node->accumulate &&
        (rc = cuda_status(a, cudaMemsetAsync(table->data, 0, tr_tensor_bytes(table), ctx->stream), "cudaMemsetAsync")))
        return rc;
    if (n == 0 || D == 0)
        return 0;
    unsigned long long *keys = (unsigned long long *)a->workspace;
    int64_t padded = pow2_at_least(n);
    unsigned blocks = cuda_blocks(padded, 256);
    sort_keys_kernel<<<blocks, 256, 0, ctx->stream>>>((const int32_t *)ids->data, n, padded, keys);
    for (int64_t k = 2; k <= padded; k *= 2)
        for (int64_t j = k / 2; j > 0; j /= 2)
            bitonic_pass_kernel<<<blocks, 256, 0, ctx->stream>>>(keys, padded, j, k);
    scatter_runs_kernel<<<dim3((unsigned)n, (unsigned)((D + 127) / 128)), 128, 0, ctx->stream>>>(
        keys, n, dy->data, dy->dtype, D, table->data, table->dtype);
    return cuda_launched(a, "embedding_bwd");
}
