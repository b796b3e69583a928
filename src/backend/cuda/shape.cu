/* Data movement and reductions on the GPU: ACCUMULATE, PERMUTE, SLICE(_BWD), CONCAT,
 * MASKED_FILL, GATHER(_BWD), SUM, MEAN, SUM_BWD and ARGMAX, each a grid-stride loop over its
 * output (src/backend/cpu/shape.c, reduce.inc and embedding.inc are the reference).
 *
 * The moving ops copy elements as they are (bit for bit, NaN payloads included) when source and
 * destination share a dtype and nothing is added; a float output under accumulate gets old +
 * new in f32, rounded once; mixed float dtypes go through f32 (the CPU's widen-move-round). An
 * integer output (i32 ids, u8 masks) is always overwritten. Reductions are one thread an output,
 * summed in double in the CPU's order: the CPU's bits. */
#include "backend/cuda/internal.h"

#include <math.h>
#include <string.h>

__device__ __forceinline__ bool cuda_is_float(int t) { return t == TR_F32 || t == TR_BF16 || t == TR_F16; }

/* dst[j] = src[i]: raw bytes when the dtypes agree and nothing is added, else through f32 (+=
 * when acc and dst is a float). */
__device__ __forceinline__ void move_elem(const void *src, int ts, int64_t i, void *dst, int td, int64_t j, int acc)
{
    bool add = acc && cuda_is_float(td);
    if (ts == td && !add) {
        switch (td) {
        case TR_F32: case TR_I32: ((uint32_t *)dst)[j] = ((const uint32_t *)src)[i]; break;
        case TR_BF16: case TR_F16: ((uint16_t *)dst)[j] = ((const uint16_t *)src)[i]; break;
        default: ((uint8_t *)dst)[j] = ((const uint8_t *)src)[i]; break;
        }
        return;
    }
    cuda_put(dst, td, j, cuda_load(src, ts, i), add);
}

/* dst[j] = 0 (all-zero bytes are 0 in every dtype) */
__device__ __forceinline__ void zero_elem(void *dst, int td, int64_t j)
{
    switch (td) {
    case TR_F32: case TR_I32: ((uint32_t *)dst)[j] = 0; break;
    case TR_BF16: case TR_F16: ((uint16_t *)dst)[j] = 0; break;
    default: ((uint8_t *)dst)[j] = 0; break;
    }
}

/* Moving between these dtypes is something the kernels can do: the same dtype, or two floats. */
static int check_move(const struct tr_kernel_args *a, enum tr_dtype from, enum tr_dtype to)
{
    bool fl = (from == TR_F32 || tr_dtype_is_16bit(from)) && (to == TR_F32 || tr_dtype_is_16bit(to));
    if (from == to || fl)
        return 0;
    return cuda_fail(a, "%s → %s has no CUDA kernel (the same dtype, or f32/bf16/f16)", tr_dtype_name(from),
                     tr_dtype_name(to));
}

/* The tensor seen as [outer, n, inner] around axis (shape.c's split_at_axis). */
static void split_at_axis(const struct tr_tensor *t, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= t->dim[i];
    for (int i = axis + 1; i < t->rank; i++)
        *inner *= t->dim[i];
    *n = t->dim[axis];
}

#define GRID(n) cuda_blocks(n, 256), 256, 0, ctx->stream

/* ---- ACCUMULATE: y += x ------------------------------------------------------------------------ */

int tr_cuda_accumulate(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    int rc = check_move(a, a->in[0].dtype, a->out[0].dtype);
    if (rc)
        return rc;
    if (!tr_dtype_is_float(a->out[0].dtype))
        return cuda_fail(a, "y must be a float tensor, not %s", tr_dtype_name(a->out[0].dtype));
    cuda_convert(ctx->stream, a->in[0].data, a->in[0].dtype, a->out[0].data, a->out[0].dtype,
                 tr_tensor_numel(&a->out[0]), 1);
    return cuda_launched(a, "accumulate");
}

/* ---- PERMUTE: y's axis i is x's axis perm[i] ------------------------------------------------- */

struct permute_args {
    const void *x;
    void *y;
    int tx, ty, acc, rank;
    int64_t n;
    int64_t ydim[TR_MAX_RANK], xstride[TR_MAX_RANK];   /* xstride[i]: x's stride of axis perm[i] */
};

__global__ void permute_kernel(struct permute_args p)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < p.n; q += (int64_t)gridDim.x * blockDim.x) {
        int64_t rest = q, from = 0;
        for (int i = p.rank - 1; i >= 0; i--) {
            from += rest % p.ydim[i] * p.xstride[i];
            rest /= p.ydim[i];
        }
        move_elem(p.x, p.tx, from, p.y, p.ty, q, p.acc);
    }
}

int tr_cuda_permute(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    int rc = check_move(a, x->dtype, y->dtype);
    if (rc)
        return rc;
    const int *perm = a->node->attrs.permute.perm;
    struct permute_args p;
    memset(&p, 0, sizeof p);
    p.x = x->data, p.y = y->data, p.tx = x->dtype, p.ty = y->dtype, p.acc = a->node->accumulate;
    p.rank = x->rank, p.n = tr_tensor_numel(y);
    int64_t stride[TR_MAX_RANK], s = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        stride[i] = s;
        s *= x->dim[i];
    }
    for (int i = 0; i < x->rank; i++) {
        if (perm[i] < 0 || perm[i] >= x->rank)
            return cuda_fail(a, "perm[%d] = %d is outside the %d axes", i, perm[i], x->rank);
        p.ydim[i] = y->dim[i];
        p.xstride[i] = stride[perm[i]];
    }
    if (p.n == 0)
        return 0;
    permute_kernel<<<GRID(p.n)>>>(p);
    return cuda_launched(a, "permute");
}

/* ---- SLICE and SLICE_BWD ------------------------------------------------------------------------ */

/* y[o, j, i] = x[o, start + j, i], j < len */
__global__ void slice_kernel(const void *x, int tx, void *y, int ty, int64_t total, int64_t n, int64_t len,
                             int64_t inner, int64_t start, int acc)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = q % inner, j = q / inner % len, o = q / inner / len;
        move_elem(x, tx, (o * n + start + j) * inner + i, y, ty, q, acc);
    }
}

/* dx[o, k, i] = dy[o, k − start, i] inside the slice, 0 outside (left alone when accumulating) */
__global__ void slice_bwd_kernel(const void *dy, int tdy, void *dx, int tdx, int64_t total, int64_t n, int64_t len,
                                 int64_t inner, int64_t start, int acc)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = q % inner, k = q / inner % n, o = q / inner / n;
        if (k >= start && k < start + len)
            move_elem(dy, tdy, (o * len + k - start) * inner + i, dx, tdx, q, acc);
        else if (!acc)
            zero_elem(dx, tdx, q);
    }
}

static int run_slice(const struct tr_kernel_args *a, bool bwd)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *in = &a->in[0], *out = &a->out[0];
    int rc = check_move(a, in->dtype, out->dtype);
    if (rc)
        return rc;
    const struct tr_tensor *whole = bwd ? out : in, *part = bwd ? in : out;
    int axis = a->node->attrs.slice.axis, acc = a->node->accumulate;
    if (axis < 0 || axis >= whole->rank)
        return cuda_fail(a, "axis %d is outside the %d axes", axis, whole->rank);
    int64_t start = a->node->attrs.slice.start, outer, n, inner, len = part->dim[axis];
    split_at_axis(whole, axis, &outer, &n, &inner);
    if (start < 0 || start + len > n)
        return cuda_fail(a, "[%lld, %lld) is outside the %lld of axis %d", (long long)start, (long long)(start + len),
                         (long long)n, axis);
    int64_t total = tr_tensor_numel(out);
    if (total == 0)
        return 0;
    if (bwd)
        slice_bwd_kernel<<<GRID(total)>>>(in->data, in->dtype, out->data, out->dtype, total, n, len, inner, start, acc);
    else
        slice_kernel<<<GRID(total)>>>(in->data, in->dtype, out->data, out->dtype, total, n, len, inner, start, acc);
    return cuda_launched(a, bwd ? "slice_bwd" : "slice");
}

int tr_cuda_slice(const struct tr_kernel_args *a) { return run_slice(a, false); }
int tr_cuda_slice_bwd(const struct tr_kernel_args *a) { return run_slice(a, true); }

/* ---- CONCAT: y = x0 ‖ x1 ‖ .. along axis --------------------------------------------------------- */

struct concat_args {
    const void *x[TR_MAX_IN];
    int tx[TR_MAX_IN];
    int64_t end[TR_MAX_IN];   /* the inputs' cumulative extents on the axis */
    int nx, ty, acc;
    void *y;
    int64_t total, n, inner;
};

__global__ void concat_kernel(struct concat_args p)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < p.total; q += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = q % p.inner, j = q / p.inner % p.n, o = q / p.inner / p.n;
        int k = 0;
        while (k < p.nx - 1 && j >= p.end[k])
            k++;
        int64_t begin = k ? p.end[k - 1] : 0, len = p.end[k] - begin;
        move_elem(p.x[k], p.tx[k], (o * len + j - begin) * p.inner + i, p.y, p.ty, q, p.acc);
    }
}

int tr_cuda_concat(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *y = &a->out[0];
    int axis = a->node->attrs.axis.axis;
    if (axis < 0 || axis >= y->rank)
        return cuda_fail(a, "axis %d is outside the %d axes", axis, y->rank);
    struct concat_args p;
    memset(&p, 0, sizeof p);
    int64_t outer, end = 0;
    split_at_axis(y, axis, &outer, &p.n, &p.inner);
    for (int k = 0; k < a->nin; k++) {
        int rc = check_move(a, a->in[k].dtype, y->dtype);
        if (rc)
            return rc;
        p.x[k] = a->in[k].data, p.tx[k] = a->in[k].dtype;
        p.end[k] = end += a->in[k].dim[axis];
    }
    if (end != p.n)
        return cuda_fail(a, "the inputs' %lld on axis %d are not y's %lld", (long long)end, axis, (long long)p.n);
    p.nx = a->nin, p.ty = y->dtype, p.acc = a->node->accumulate, p.y = y->data, p.total = tr_tensor_numel(y);
    if (p.total == 0)
        return 0;
    concat_kernel<<<GRID(p.total)>>>(p);
    return cuda_launched(a, "concat");
}

/* ---- MASKED_FILL: y = mask ? value : x, the u8 mask over a prefix of x's dims ------------------- */

/* v stored as shape.c's store_elem does: floats through f32, integers truncated and saturated */
__device__ void store_value(void *dst, int td, int64_t j, double v)
{
    if (cuda_is_float(td)) {
        cuda_store(dst, td, j, (float)v);
        return;
    }
    double lo = td == TR_I32 ? -2147483648.0 : 0, hi = td == TR_I32 ? 2147483647.0 : 255;
    v = isnan(v) ? 0 : trunc(v);
    v = v < lo ? lo : v > hi ? hi : v;
    if (td == TR_I32)
        ((int32_t *)dst)[j] = (int32_t)v;
    else
        ((uint8_t *)dst)[j] = (uint8_t)v;
}

__global__ void masked_fill_kernel(const void *x, int tx, const uint8_t *mask, int64_t inner, void *y, int ty,
                                   int64_t total, double value, int acc)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        if (!mask[q / inner])
            move_elem(x, tx, q, y, ty, q, acc);
        else if (acc && cuda_is_float(ty))   /* the CPU's old + value, in double, rounded once */
            store_value(y, ty, q, (double)cuda_load(y, ty, q) + value);
        else
            store_value(y, ty, q, value);
    }
}

int tr_cuda_masked_fill(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *mask = &a->in[1], *y = &a->out[0];
    int rc = check_move(a, x->dtype, y->dtype);
    if (rc)
        return rc;
    if (mask->dtype != TR_U8)
        return cuda_fail(a, "the mask must be u8, not %s", tr_dtype_name(mask->dtype));
    int64_t masks = tr_tensor_numel(mask), total = tr_tensor_numel(y);
    if (masks == 0 || total == 0)
        return 0;
    masked_fill_kernel<<<GRID(total)>>>(x->data, x->dtype, (const uint8_t *)mask->data, total / masks, y->data,
                                        y->dtype, total, (double)a->node->attrs.fill.value, a->node->accumulate);
    return cuda_launched(a, "masked_fill");
}

/* ---- GATHER and GATHER_BWD: EMBEDDING's lookup and its sort-based, deterministic scatter-add --- */

int tr_cuda_gather(const struct tr_kernel_args *a) { return tr_cuda_embedding(a); }
int tr_cuda_gather_bwd(const struct tr_kernel_args *a) { return tr_cuda_embedding_bwd(a); }

/* ---- SUM, MEAN and SUM_BWD ---------------------------------------------------------------------- */

/* y[o, i] = (Σ_j x[o, j, i]) / divisor, j ascending in double (reduce.inc's reduce_axis) */
__global__ void reduce_axis_kernel(const void *x, int tx, void *y, int ty, int64_t outer, int64_t n, int64_t inner,
                                   double divisor, int acc)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < outer * inner;
         q += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = q / inner, i = q % inner;
        double s = 0;
        for (int64_t j = 0; j < n; j++)
            s += cuda_load(x, tx, (o * n + j) * inner + i);
        cuda_put(y, ty, q, (float)(s / divisor), acc);
    }
}

/* y[0] = Σ x / divisor as reduce.inc's reduce_all: 64 chunks [n·k/64, n·(k+1)/64), each summed
 * in order in double by its thread, then the partial sums in order by thread 0. */
#define SUM_CHUNKS 64

__global__ void reduce_all_kernel(const void *x, int tx, int64_t n, void *y, int ty, int mean, int acc)
{
    __shared__ double partial[SUM_CHUNKS];
    int k = threadIdx.x;
    double s = 0;
    for (int64_t i = n * k / SUM_CHUNKS; i < n * (k + 1) / SUM_CHUNKS; i++)
        s += cuda_load(x, tx, i);
    partial[k] = s;
    __syncthreads();
    if (k == 0) {
        double total = 0;
        for (int c = 0; c < SUM_CHUNKS; c++)
            total += partial[c];
        cuda_put(y, ty, 0, (float)(mean ? total / (double)n : total), acc);
    }
}

static int run_reduce(const struct tr_kernel_args *a, int mean)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    int axis = a->node->attrs.axis.axis, acc = a->node->accumulate;
    const char *what = mean ? "mean" : "sum";
    if (axis < 0) {
        reduce_all_kernel<<<1, SUM_CHUNKS, 0, ctx->stream>>>(x->data, x->dtype, tr_tensor_numel(x), y->data, y->dtype,
                                                             mean, acc);
        return cuda_launched(a, what);
    }
    if (axis >= x->rank)
        return cuda_fail(a, "axis %d is outside the %d axes", axis, x->rank);
    int64_t outer, n, inner;
    split_at_axis(x, axis, &outer, &n, &inner);
    if (outer * inner == 0)
        return 0;
    reduce_axis_kernel<<<GRID(outer * inner)>>>(x->data, x->dtype, y->data, y->dtype, outer, n, inner,
                                               mean ? (double)n : 1, acc);
    return cuda_launched(a, what);
}

int tr_cuda_sum(const struct tr_kernel_args *a) { return run_reduce(a, 0); }
int tr_cuda_mean(const struct tr_kernel_args *a) { return run_reduce(a, 1); }

/* dx[o, j, i] = dy[o, i] / divisor (f32 division, as reduce.inc's REAL one) */
__global__ void sum_bwd_kernel(const void *dy, int tdy, void *dx, int tdx, int64_t total, int64_t n, int64_t inner,
                               float divisor, int acc)
{
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = q % inner, o = q / inner / n;
        cuda_put(dx, tdx, q, cuda_load(dy, tdy, o * inner + i) / divisor, acc);
    }
}

int tr_cuda_sum_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *dy = &a->in[0], *dx = &a->out[0];
    int axis = a->node->attrs.axis.axis;
    int64_t outer = 1, n = tr_tensor_numel(dx), inner = 1, total = n;
    if (axis >= dx->rank)
        return cuda_fail(a, "axis %d is outside the %d axes", axis, dx->rank);
    if (axis >= 0)
        split_at_axis(dx, axis, &outer, &n, &inner);
    (void)outer;
    if (total == 0)
        return 0;
    float divisor = a->node->attrs.axis.mean ? (float)n : 1;
    sum_bwd_kernel<<<GRID(total)>>>(dy->data, dy->dtype, dx->data, dx->dtype, total, n, inner, divisor,
                                    a->node->accumulate);
    return cuda_launched(a, "sum_bwd");
}

/* ---- ARGMAX: y[r] = the first c with the row's largest x (i32; never accumulated) ------------- */

__global__ void argmax_kernel(const void *x, int tx, int64_t rows, int64_t cols, int32_t *y)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        int64_t best = 0;
        float bv = cuda_load(x, tx, r * cols);
        for (int64_t c = 1; c < cols; c++) {
            float v = cuda_load(x, tx, r * cols + c);
            if (v > bv)   /* strict: ties (and a NaN first) keep the first index, as the CPU's */
                best = c, bv = v;
        }
        y[r] = (int32_t)best;
    }
}

int tr_cuda_argmax(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    if (y->dtype != TR_I32)
        return cuda_fail(a, "y must be i32, not %s", tr_dtype_name(y->dtype));
    int64_t rows = cuda_rows(x), cols = cuda_cols(x);
    if (rows == 0 || cols == 0)
        return 0;
    argmax_kernel<<<GRID(rows)>>>(x->data, x->dtype, rows, cols, (int32_t *)y->data);
    return cuda_launched(a, "argmax");
}
