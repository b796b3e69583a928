/* The CUDA backend's memory and optimizer entries (backend.h): regions from cudaMalloc, the
 * loader's buffers page-locked (cudaHostAlloc), copies and fills queued on the backend's stream,
 * and the optimizer's passes over every parameter in one launch each (multi-tensor): each
 * optimizer kind's update (recipe/optimizers.h lists them), the sum of squares for clipping,
 * and the fp16 unscale fused with the overflow check. */
#include "backend/cuda/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "recipe/optimizers.h"
#include "recipe/recipe.h"
}

/* ---- memory ----------------------------------------------------------------------------------- */

/* Zeroed, as tr_memory_ops promises; cudaMalloc aligns to 256 bytes at least. On the
 * instance's device (ctx: its state). */
static void *device_alloc(size_t bytes, void *ctx)
{
    const struct cuda_state *s = (const struct cuda_state *)ctx;
    void *p = NULL;
    if (cudaSetDevice(s->device) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess || cudaMemset(p, 0, bytes) != cudaSuccess) {
        cudaGetLastError();
        if (p)
            cudaFree(p);
        return NULL;
    }
    return p;
}

static void device_free(void *p, void *ctx)
{
    (void)ctx;
    cudaFree(p);
}

/* Page-locked: the DMA engine reads it directly, at full speed and without a staging copy. */
static void *pinned_alloc(size_t bytes, void *ctx)
{
    (void)ctx;
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void pinned_free(void *p, void *ctx)
{
    (void)ctx;
    cudaFreeHost(p);
}

void cuda_memory_init(struct cuda_state *s)
{
    s->device_memory = {device_alloc, device_free, s, "cuda"};
    s->pinned_memory = {pinned_alloc, pinned_free, s, "cuda-pinned"};
}

/* ---- copies --------------------------------------------------------------------------------- */

static int said(struct tr_diag *d, cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 0;
    int rc = tr_fail(d, TR_EFAIL, "%s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
    cudaGetLastError();
    return rc;
}

int cuda_copy(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
              struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    if (!bytes)
        return 0;
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
    /* From pageable memory the call returns once the source is staged; from page-locked memory
     * at once, the DMA reading it later: the loader's slot is not reused before the step's end,
     * which waits for the stream. To the host: waited for, the bytes are there on return. */
    if (said(d, cudaMemcpyAsync(dst, src, bytes, kinds[direction], ctx->stream), "cudaMemcpyAsync"))
        return TR_EFAIL;
    return direction == TR_COPY_TO_HOST ? said(d, cudaStreamSynchronize(ctx->stream), "a kernel before a copy") : 0;
}

/* The next micro-batch's inputs, from the loader's page-locked ring into the staging half of
 * the inputs region, on the second stream: after what the kernels' stream holds now (the
 * commit that last read the staging), beside what it will hold next (this micro-batch). To the
 * host (an activation offloaded into the page-locked host ring): the same stream, so a later
 * copy back of those bytes finds them there. */
int cuda_copy_ahead(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
                    struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    if (!bytes)
        return 0;
    cudaMemcpyKind kind = direction == TR_COPY_TO_HOST ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    return said(d, cudaEventRecord(ctx->queued, ctx->stream), "cudaEventRecord on the stream") ||
                   said(d, cudaStreamWaitEvent(ctx->ahead, ctx->queued, 0), "cudaStreamWaitEvent of the copies ahead") ||
                   said(d, cudaMemcpyAsync(dst, src, bytes, kind, ctx->ahead), "cudaMemcpyAsync ahead") ||
                   said(d, cudaEventRecord(ctx->arrived, ctx->ahead), "cudaEventRecord on the copy stream")
               ? TR_EFAIL
               : 0;
}

/* The copy stream runs in order: its last copy's end is every copy's. */
int cuda_join(const struct tr_backend *be, struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    return said(d, cudaStreamWaitEvent(ctx->stream, ctx->arrived, 0), "cudaStreamWaitEvent of the kernels");
}

int cuda_fill(const struct tr_backend *be, void *dst, int byte, size_t bytes, struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    return bytes ? said(d, cudaMemsetAsync(dst, byte, bytes, ctx->stream), "cudaMemsetAsync") : 0;
}

/* Dropout's sample ids arrive in host memory (the loader's); a copy on the stream, made only
 * when they changed since the last one (every dropout of a micro-batch shares them). The
 * device buffer is rewritten in stream order, after the kernels that read the old ids. */
const int64_t *cuda_sample_ids(const struct tr_kernel_args *a, struct cuda_context *ctx, const int64_t *ids,
                               int64_t rows)
{
    if (!ids)
        return NULL;
    if (rows > CUDA_MAX_SAMPLE_ROWS) {
        cuda_fail(a, "%lld rows of sample ids, more than the %d the context holds", (long long)rows,
                  CUDA_MAX_SAMPLE_ROWS);
        return NULL;
    }
    size_t bytes = (size_t)rows * sizeof *ids;
    if (rows != ctx->ids_rows || memcmp(ctx->ids_host, ids, bytes)) {
        memcpy(ctx->ids_host, ids, bytes);   /* the source stays as the DMA reads it */
        if (cuda_status(a, cudaMemcpyAsync(ctx->ids, ctx->ids_host, bytes, cudaMemcpyHostToDevice, ctx->stream),
                        "cudaMemcpyAsync of the sample ids"))
            return NULL;
        ctx->ids_rows = rows;
    }
    return ctx->ids;
}

/* ---- the optimizer: every parameter in one launch ------------------------------------------- */

/* A span as the device reads it, with the first of its blocks of CUDA_OPTIM_CHUNK elements. */
struct span {
    int64_t param, grad, state, numel;
    int64_t first_chunk;
    int decay;
};

struct optim_hyper {
    char *params, *grads;
    float *state[TR_OPT_MAX_STATES];   /* state k of every parameter (NULL: not kept) */
    const struct span *spans;
    int nspans;
    int64_t chunks;
    int nesterov, first;
    float lr, weight_decay, b1, b2, eps, momentum, step_size, root_c2;
    float decay;                   /* AdamW: 1 − lr·wd, rounded from double as the CPU's */
    float grad_factor;             /* clipping's, fused: each gradient times it as read */
};

/* The span holding chunk c: the last whose first chunk is ≤ c (binary search). */
__device__ int span_of(const struct span *s, int n, int64_t c)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s[mid].first_chunk <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The elements [begin, end) of span s that chunk c covers. */
__device__ void chunk_range(const struct span *s, int64_t c, int64_t *begin, int64_t *end)
{
    *begin = (c - s->first_chunk) * CUDA_OPTIM_CHUNK;
    *end = *begin + CUDA_OPTIM_CHUNK < s->numel ? *begin + CUDA_OPTIM_CHUNK : s->numel;
}

/* AdamW: p ← p·(1 − lr·wd); m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²;
 *        p ← p − (lr/(1 − β1ᵗ))·m / (√v/√(1 − β2ᵗ) + ε) */
__device__ void adamw_update(const struct optim_hyper &h, const struct span &s, float *p, int64_t i, float gi,
                             float wd, float decay)
{
    (void)wd;
    float *m = h.state[0] + s.state, *v = h.state[1] + s.state;
    float pi = p[i] * decay;
    float mi = h.b1 * m[i] + (1 - h.b1) * gi, vi = h.b2 * v[i] + (1 - h.b2) * gi * gi;
    m[i] = mi, v[i] = vi;
    p[i] = pi - h.step_size * mi / (sqrtf(vi) / h.root_c2 + h.eps);
}

/* SGD: d = g + wd·p; b ← μ·b + d (b = d at the first step); d′ = nesterov ? d + μ·b : b;
 *      p ← p − lr·d′ */
__device__ void sgd_update(const struct optim_hyper &h, const struct span &s, float *p, int64_t i, float gi,
                           float wd, float decay)
{
    (void)decay;
    float d = gi + wd * p[i];
    if (h.state[0]) {
        float *b = h.state[0] + s.state;
        b[i] = h.first ? d : h.momentum * b[i] + d;
        d = h.nesterov ? d + h.momentum * b[i] : b[i];
    }
    p[i] -= h.lr * d;
}

/* Lion (Chen et al. 2023): p ← p·(1 − lr·wd); c = β1·m + (1 − β1)·g; p ← p − lr·sign(c);
 *       m ← β2·m + (1 − β2)·g, with sign(0) = 0 and sign(NaN) = NaN as torch.sign */
__device__ void lion_update(const struct optim_hyper &h, const struct span &s, float *p, int64_t i, float gi,
                            float wd, float decay)
{
    (void)wd;
    float *m = h.state[0] + s.state;
    float c = h.b1 * m[i] + (1 - h.b1) * gi;
    float pi = p[i] * decay;
    p[i] = pi - h.lr * (c > 0 ? 1.0f : c < 0 ? -1.0f : c);
    m[i] = h.b2 * m[i] + (1 - h.b2) * gi;
}

/* An optimizer kind's update over every parameter, a chunk per block at a time. */
template <void (*update)(const struct optim_hyper &, const struct span &, float *, int64_t, float, float, float)>
__global__ void optim_kernel(struct optim_hyper h)
{
    for (int64_t c = blockIdx.x; c < h.chunks; c += gridDim.x) {
        const struct span s = h.spans[span_of(h.spans, h.nspans, c)];
        int64_t begin, end;
        chunk_range(&s, c, &begin, &end);
        float *p = (float *)(h.params + s.param), *g = (float *)(h.grads + s.grad);
        float wd = s.decay ? h.weight_decay : 0, decay = s.decay ? h.decay : 1;
        for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
            update(h, s, p, i, g[i] * h.grad_factor, wd, decay);
    }
}

/* Each block sums its chunks (c ≡ block mod grid) in order into partial[block], in double, a
 * fixed tree within each chunk; then one block adds the partials in order: the same bits on
 * every run (not the CPU's, which sums fixed pieces of 16,384 values in 8 lanes each). */
__global__ void sumsq_kernel(struct optim_hyper h, double *partial)
{
    __shared__ double lane[CUDA_OPTIM_THREADS];
    double mine = 0;
    for (int64_t c = blockIdx.x; c < h.chunks; c += gridDim.x) {
        const struct span s = h.spans[span_of(h.spans, h.nspans, c)];
        int64_t begin, end;
        chunk_range(&s, c, &begin, &end);
        const float *g = (const float *)(h.grads + s.grad);
        for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
            mine += (double)g[i] * g[i];
    }
    lane[threadIdx.x] = mine;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            lane[threadIdx.x] += lane[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = lane[0];
}

__global__ void sum_partials_kernel(const double *partial, int n, double *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += partial[i];
        *out = s;
    }
}

/* g ← factor·g; *bad counts the blocks that met a NaN or Inf (an integer: order-free). */
__global__ void scale_kernel(struct optim_hyper h, float factor, unsigned *bad)
{
    bool seen = false;
    for (int64_t c = blockIdx.x; c < h.chunks; c += gridDim.x) {
        const struct span s = h.spans[span_of(h.spans, h.nspans, c)];
        int64_t begin, end;
        chunk_range(&s, c, &begin, &end);
        float *g = (float *)(h.grads + s.grad);
        for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
            float v = g[i] * factor;
            g[i] = v;
            seen |= !isfinite(v);
        }
    }
    if (__syncthreads_or(seen) && threadIdx.x == 0)
        atomicAdd(bad, 1u);
}

/* The spans with their chunk numbers, into the context's table on the device; the launch's
 * constants from the step's hyperparameters. */
static int prepare(const struct tr_backend *be, const struct tr_optim_args *a, struct cuda_context **ctxp,
                   struct optim_hyper *h)
{
    struct cuda_context *ctx = cuda_context_for(be, a->diag);
    if (!ctx)
        return TR_EFAIL;
    if (a->nspans > CUDA_MAX_SPANS)
        return tr_fail(a->diag, TR_EINVAL, "the optimizer: %d parameters, more than the %d the CUDA context holds",
                       a->nspans, CUDA_MAX_SPANS);
    struct span *host = (struct span *)ctx->spans_host;
    int64_t chunks = 0;
    for (int i = 0; i < a->nspans; i++) {
        const struct tr_param_span *s = &a->spans[i];
        host[i] = (struct span){s->param, s->grad, s->state, s->numel, chunks, s->decay};
        chunks += (s->numel + CUDA_OPTIM_CHUNK - 1) / CUDA_OPTIM_CHUNK;
    }
    /* from the context's own host copy: the DMA may read it after this returns */
    if (said(a->diag, cudaMemcpyAsync(ctx->spans, host, (size_t)a->nspans * sizeof *host, cudaMemcpyHostToDevice,
                                      ctx->stream), "cudaMemcpyAsync of the optimizer's table"))
        return TR_EFAIL;
    double c1 = 1 - pow(a->beta1, (double)a->step), c2 = 1 - pow(a->beta2, (double)a->step);
    *h = (struct optim_hyper){};
    h->params = a->params, h->grads = a->grads;
    for (int k = 0; k < a->nstate && k < TR_OPT_MAX_STATES; k++)
        h->state[k] = a->state + k * a->total;
    h->spans = (const struct span *)ctx->spans, h->nspans = a->nspans, h->chunks = chunks;
    h->nesterov = a->nesterov, h->first = a->step == 1;
    h->lr = (float)a->lr, h->weight_decay = (float)a->weight_decay, h->b1 = (float)a->beta1, h->b2 = (float)a->beta2;
    h->eps = (float)a->eps, h->momentum = (float)a->momentum;
    h->step_size = (float)(a->lr / c1), h->root_c2 = (float)sqrt(c2);
    h->decay = (float)(1 - a->lr * a->weight_decay);
    h->grad_factor = tr_optim_grad_factor(a);
    *ctxp = ctx;
    return 0;
}

static unsigned grid_of(int64_t chunks)
{
    return (unsigned)(chunks < 1 ? 1 : chunks < CUDA_OPTIM_BLOCKS ? chunks : CUDA_OPTIM_BLOCKS);
}

int cuda_optim_step(const struct tr_backend *be, const struct tr_optim_args *a)
{
    struct cuda_context *ctx;
    struct optim_hyper h;
    int rc = prepare(be, a, &ctx, &h);
    unsigned grid = rc || !h.chunks ? 0 : grid_of(h.chunks);
    if (!grid)   /* failed, or nothing to update */
        return rc;
    switch ((enum tr_optimizer)a->kind) {   /* each kind's update; no default: -Wswitch-enum names a new one */
    case TR_OPT_ADAMW: optim_kernel<adamw_update><<<grid, CUDA_OPTIM_THREADS, 0, ctx->stream>>>(h); break;
    case TR_OPT_SGD:   optim_kernel<sgd_update><<<grid, CUDA_OPTIM_THREADS, 0, ctx->stream>>>(h); break;
    case TR_OPT_LION:  optim_kernel<lion_update><<<grid, CUDA_OPTIM_THREADS, 0, ctx->stream>>>(h); break;
    }
    return said(a->diag, cudaGetLastError(), "the optimizer's kernel");
}

int cuda_grad_sumsq(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq)
{
    struct cuda_context *ctx;
    struct optim_hyper h;
    *sumsq = 0;
    int rc = prepare(be, a, &ctx, &h);
    if (rc || !h.chunks)   /* failed, or nothing to update */
        return rc;
    unsigned grid = grid_of(h.chunks);
    sumsq_kernel<<<grid, CUDA_OPTIM_THREADS, 0, ctx->stream>>>(h, ctx->partial);
    sum_partials_kernel<<<1, 32, 0, ctx->stream>>>(ctx->partial, (int)grid, ctx->partial + CUDA_OPTIM_BLOCKS);
    if (said(a->diag, cudaGetLastError(), "the gradients' sum of squares") ||
        said(a->diag, cudaMemcpyAsync(sumsq, ctx->partial + CUDA_OPTIM_BLOCKS, sizeof *sumsq, cudaMemcpyDeviceToHost,
                                      ctx->stream), "cudaMemcpyAsync of the sum of squares"))
        return TR_EFAIL;
    return said(a->diag, cudaStreamSynchronize(ctx->stream), "the gradients' sum of squares");
}

int cuda_grad_scale(const struct tr_backend *be, const struct tr_optim_args *a, float factor, bool *finite)
{
    struct cuda_context *ctx;
    struct optim_hyper h;
    *finite = false;
    int rc = prepare(be, a, &ctx, &h);
    if (rc)
        return rc;
    unsigned bad = 0;
    if (h.chunks) {
        unsigned *word = (unsigned *)(ctx->partial + CUDA_OPTIM_BLOCKS + 1);
        if (said(a->diag, cudaMemsetAsync(word, 0, sizeof *word, ctx->stream), "cudaMemsetAsync"))
            return TR_EFAIL;
        scale_kernel<<<grid_of(h.chunks), CUDA_OPTIM_THREADS, 0, ctx->stream>>>(h, factor, word);
        if (said(a->diag, cudaGetLastError(), "the gradients' scaling") ||
            said(a->diag, cudaMemcpyAsync(&bad, word, sizeof bad, cudaMemcpyDeviceToHost, ctx->stream),
                 "cudaMemcpyAsync of the overflow flag") ||
            said(a->diag, cudaStreamSynchronize(ctx->stream), "the gradients' scaling"))
            return TR_EFAIL;
    }
    *finite = bad == 0;
    return 0;
}
