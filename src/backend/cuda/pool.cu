/* Pooling on the GPU: MAXPOOL, AVGPOOL, GLOBAL_AVGPOOL and their backwards (src/backend/cpu/
 * pool.inc is the reference). x is seen as planes [N·C, H, W], y as [N·C, Ho, Wo], square
 * windows. Forwards take a thread an output; backwards a thread an input element, which adds
 * the windows holding it in increasing output order — the order of the CPU's scatter — in f32
 * from 0 (or its old value), rounded once: the CPU's bits, with no atomics. */
#include "backend/cuda/internal.h"

#include <math.h>

struct pool_geom {
    int64_t planes, H, W, Ho, Wo;
    int64_t kernel, stride, pad;
};

static struct pool_geom pool_geom_of(const struct tr_node *node, const struct tr_tensor *x, const struct tr_tensor *y)
{
    struct pool_geom g = {x->dim[0] * x->dim[1], x->dim[2], x->dim[3], y->dim[2], y->dim[3],
                          node->attrs.pool.kernel, node->attrs.pool.stride, node->attrs.pool.pad};
    return g;
}

/* The input rows (or columns) [lo, hi) that window o covers, clipped to the real ones. */
__device__ __forceinline__ void pool_span(const struct pool_geom &g, int64_t o, int64_t size, int64_t *lo,
                                          int64_t *hi)
{
    int64_t start = o * g.stride - g.pad;
    *lo = start > 0 ? start : 0;
    *hi = start + g.kernel < size ? start + g.kernel : size;
}

/* The windows [lo, hi) (clipped to [0, outs)) whose span holds input row (or column) i. */
__device__ __forceinline__ void windows_of(const struct pool_geom &g, int64_t i, int64_t outs, int64_t *lo,
                                           int64_t *hi)
{
    int64_t top = i + g.pad;   /* o·stride ≤ top < o·stride + kernel */
    int64_t first = top - g.kernel + 1 > 0 ? (top - g.kernel + 1 + g.stride - 1) / g.stride : 0;
    int64_t last = top / g.stride + 1;
    *lo = first;
    *hi = last < outs ? last : outs;
}

/* The host side's start, the same for the four windowed ops: the context, the geometry of the
 * pooled x and y, and its check. NULL (the sentence in args->diag) to stop. */
static struct cuda_context *pool_begin(const struct tr_kernel_args *a, const struct tr_tensor *x,
                                       const struct tr_tensor *y, struct pool_geom *g)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return NULL;
    *g = pool_geom_of(a->node, x, y);
    if (g->kernel < 1 || g->stride < 1 || g->pad < 0) {
        cuda_fail(a, "kernel %lld, stride %lld, pad %lld: a window needs kernel ≥ 1, stride ≥ 1, pad ≥ 0",
                  (long long)g->kernel, (long long)g->stride, (long long)g->pad);
        return NULL;
    }
    return ctx;
}

#define GRID(n) cuda_blocks(n, 256), 256, 0, ctx->stream
#define FOR_EACH(q, n) \
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < (n); q += (int64_t)gridDim.x * blockDim.x)

/* ---- MAXPOOL(_BWD) ------------------------------------------------------------------------------ */

/* y = the window's first maximum over real values (a NaN wins, padding never does), −∞ for a
 * window of padding alone; argmax = its flat index in the plane (−1 then), always overwritten */
__global__ void maxpool_kernel(struct pool_geom g, const void *x, int tx, void *y, int ty, int32_t *argmax, int acc)
{
    FOR_EACH(q, g.planes * g.Ho * g.Wo) {
        int64_t p = q / (g.Ho * g.Wo), o = q % (g.Ho * g.Wo), h0, h1, w0, w1, best = -1;
        pool_span(g, o / g.Wo, g.H, &h0, &h1);
        pool_span(g, o % g.Wo, g.W, &w0, &w1);
        float bv = 0;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) {
                float v = cuda_load(x, tx, p * g.H * g.W + h * g.W + w);
                if (best < 0 || v > bv || isnan(v))
                    best = h * g.W + w, bv = v;
            }
        cuda_put(y, ty, q, best >= 0 ? bv : -INFINITY, acc);
        argmax[q] = (int32_t)best;
    }
}

int tr_cuda_maxpool(const struct tr_kernel_args *a)
{
    struct pool_geom g;
    struct cuda_context *ctx = pool_begin(a, &a->in[0], &a->out[0], &g);
    if (!ctx)
        return TR_EINVAL;
    if (a->out[1].dtype != TR_I32)
        return cuda_fail(a, "argmax must be i32, not %s", tr_dtype_name(a->out[1].dtype));
    int64_t n = g.planes * g.Ho * g.Wo;
    if (n == 0)
        return 0;
    maxpool_kernel<<<GRID(n)>>>(g, a->in[0].data, a->in[0].dtype, a->out[0].data, a->out[0].dtype,
                                (int32_t *)a->out[1].data, a->node->accumulate);
    return cuda_launched(a, "maxpool");
}

/* check[1] += the argmax indices outside [−1, plane) */
__global__ void count_bad_argmax_kernel(const int32_t *argmax, int64_t n, int64_t plane, unsigned long long *check)
{
    FOR_EACH(i, n) {
        int32_t at = argmax[i];
        if (at < -1 || at >= plane)
            atomicAdd(&check[1], 1ull);   /* a count: the same whatever the order */
    }
}

/* dx[h, w] = Σ dy over the windows whose argmax is (h, w), in output order */
__global__ void maxpool_bwd_kernel(struct pool_geom g, const void *dy, int tdy, const int32_t *argmax, void *dx,
                                   int tdx, int acc)
{
    FOR_EACH(q, g.planes * g.H * g.W) {
        int64_t p = q / (g.H * g.W), at = q % (g.H * g.W), h = at / g.W, w = at % g.W, oh0, oh1, ow0, ow1;
        windows_of(g, h, g.Ho, &oh0, &oh1);
        windows_of(g, w, g.Wo, &ow0, &ow1);
        float s = acc ? cuda_load(dx, tdx, q) : 0;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                int64_t o = (p * g.Ho + oh) * g.Wo + ow;
                if (argmax[o] == at)
                    s += cuda_load(dy, tdy, o);
            }
        cuda_store(dx, tdx, q, s);
    }
}

int tr_cuda_maxpool_bwd(const struct tr_kernel_args *a)
{
    struct pool_geom g;
    struct cuda_context *ctx = pool_begin(a, &a->out[0], &a->in[0], &g);
    if (!ctx)
        return TR_EINVAL;
    if (a->in[1].dtype != TR_I32)
        return cuda_fail(a, "argmax must be i32, not %s", tr_dtype_name(a->in[1].dtype));
    int64_t outs = g.planes * g.Ho * g.Wo, n = g.planes * g.H * g.W;
    const int32_t *argmax = (const int32_t *)a->in[1].data;
    if (outs > 0) {   /* the CPU's check, counted on the device and read back (a sync per call) */
        int rc;
        unsigned long long init[2] = {0, 0}, got[2];
        if ((rc = cuda_status(a, cudaMemcpyAsync(ctx->check, init, sizeof init, cudaMemcpyHostToDevice, ctx->stream),
                              "cudaMemcpyAsync of the check words")))
            return rc;
        count_bad_argmax_kernel<<<GRID(outs)>>>(argmax, outs, g.H * g.W, ctx->check);
        if ((rc = cuda_launched(a, "the argmax check")))
            return rc;
        if ((rc = cuda_status(a, cudaMemcpyAsync(got, ctx->check, sizeof got, cudaMemcpyDeviceToHost, ctx->stream),
                              "cudaMemcpyAsync of the check words")) ||
            (rc = cuda_status(a, cudaStreamSynchronize(ctx->stream), "cudaStreamSynchronize after the argmax check")))
            return rc;
        if (got[1])
            return cuda_fail(a, "%llu argmax indices fall outside the %lld×%lld plane", got[1], (long long)g.H,
                             (long long)g.W);
    }
    if (n == 0)
        return 0;
    maxpool_bwd_kernel<<<GRID(n)>>>(g, a->in[0].data, a->in[0].dtype, argmax, a->out[0].data, a->out[0].dtype,
                                    a->node->accumulate);
    return cuda_launched(a, "maxpool_bwd");
}

/* ---- AVGPOOL(_BWD): padding counted in the divisor (kernel², PyTorch's default) --------------- */

__global__ void avgpool_kernel(struct pool_geom g, const void *x, int tx, void *y, int ty, float inv, int acc)
{
    FOR_EACH(q, g.planes * g.Ho * g.Wo) {
        int64_t p = q / (g.Ho * g.Wo), o = q % (g.Ho * g.Wo), h0, h1, w0, w1;
        pool_span(g, o / g.Wo, g.H, &h0, &h1);
        pool_span(g, o % g.Wo, g.W, &w0, &w1);
        float sum = 0;
        for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++)
                sum += cuda_load(x, tx, (p * g.H + h) * g.W + w);
        cuda_put(y, ty, q, __fmul_rn(sum, inv), acc);
    }
}

int tr_cuda_avgpool(const struct tr_kernel_args *a)
{
    struct pool_geom g;
    struct cuda_context *ctx = pool_begin(a, &a->in[0], &a->out[0], &g);
    if (!ctx)
        return TR_EINVAL;
    int64_t n = g.planes * g.Ho * g.Wo;
    if (n == 0)
        return 0;
    avgpool_kernel<<<GRID(n)>>>(g, a->in[0].data, a->in[0].dtype, a->out[0].data, a->out[0].dtype,
                                1.0f / (float)(g.kernel * g.kernel), a->node->accumulate);
    return cuda_launched(a, "avgpool");
}

/* dx[h, w] = Σ dy·inv over the windows holding (h, w), in output order */
__global__ void avgpool_bwd_kernel(struct pool_geom g, const void *dy, int tdy, void *dx, int tdx, float inv, int acc)
{
    FOR_EACH(q, g.planes * g.H * g.W) {
        int64_t p = q / (g.H * g.W), h = q % (g.H * g.W) / g.W, w = q % g.W, oh0, oh1, ow0, ow1;
        windows_of(g, h, g.Ho, &oh0, &oh1);
        windows_of(g, w, g.Wo, &ow0, &ow1);
        float s = acc ? cuda_load(dx, tdx, q) : 0;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++)
                s += __fmul_rn(cuda_load(dy, tdy, (p * g.Ho + oh) * g.Wo + ow), inv);   /* no fused multiply-add */
        cuda_store(dx, tdx, q, s);
    }
}

int tr_cuda_avgpool_bwd(const struct tr_kernel_args *a)
{
    struct pool_geom g;
    struct cuda_context *ctx = pool_begin(a, &a->out[0], &a->in[0], &g);
    if (!ctx)
        return TR_EINVAL;
    int64_t n = g.planes * g.H * g.W;
    if (n == 0)
        return 0;
    avgpool_bwd_kernel<<<GRID(n)>>>(g, a->in[0].data, a->in[0].dtype, a->out[0].data, a->out[0].dtype,
                                    1.0f / (float)(g.kernel * g.kernel), a->node->accumulate);
    return cuda_launched(a, "avgpool_bwd");
}

/* ---- GLOBAL_AVGPOOL(_BWD) ----------------------------------------------------------------------- */

/* y[p] = Σ plane / size, summed in order in f32 */
__global__ void global_avgpool_kernel(const void *x, int tx, int64_t planes, int64_t size, void *y, int ty, int acc)
{
    FOR_EACH(p, planes) {
        float sum = 0;
        for (int64_t i = 0; i < size; i++)
            sum += cuda_load(x, tx, p * size + i);
        cuda_put(y, ty, p, sum / (float)size, acc);
    }
}

int tr_cuda_global_avgpool(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    if (a->node->attrs.pool.channels_last)
        return cuda_fail(a, "images channels last are not supported on the GPU yet: [N, C, H, W] only (tr_build lays them out so)");
    const struct tr_tensor *x = &a->in[0];
    int64_t planes = x->dim[0] * x->dim[1], size = x->dim[2] * x->dim[3];
    if (planes == 0)
        return 0;
    global_avgpool_kernel<<<GRID(planes)>>>(x->data, x->dtype, planes, size, a->out[0].data, a->out[0].dtype,
                                            a->node->accumulate);
    return cuda_launched(a, "global_avgpool");
}

/* dx[p, i] = dy[p] / size */
__global__ void global_avgpool_bwd_kernel(const void *dy, int tdy, int64_t planes, int64_t size, void *dx, int tdx,
                                          int acc)
{
    FOR_EACH(q, planes * size)
        cuda_put(dx, tdx, q, cuda_load(dy, tdy, q / size) / (float)size, acc);
}

int tr_cuda_global_avgpool_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    if (a->node->attrs.pool.channels_last)
        return cuda_fail(a, "images channels last are not supported on the GPU yet: [N, C, H, W] only (tr_build lays them out so)");
    const struct tr_tensor *dx = &a->out[0];
    int64_t planes = dx->dim[0] * dx->dim[1], size = dx->dim[2] * dx->dim[3];
    if (planes * size == 0)
        return 0;
    global_avgpool_bwd_kernel<<<GRID(planes * size)>>>(a->in[0].data, a->in[0].dtype, planes, size, dx->data,
                                                       dx->dtype, a->node->accumulate);
    return cuda_launched(a, "global_avgpool_bwd");
}
