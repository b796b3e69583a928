/* What every CUDA kernel file leans on (internal.h): an instance's context, made on first use on
 * its device, the sentences CUDA's errors become, the dtype check and the device check of ids
 * and targets. Below every kernel file and the table (backend.cu): they use it, it uses none
 * of them. */
#include "backend/cuda/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the context ---------------------------------------------------------------------------- */

struct cuda_state *cuda_state_of(const struct tr_backend *be) { return (struct cuda_state *)be->state; }

static int device_failed(const struct tr_kernel_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Made on the instance's device; on failure, the sentence (and 0 returned) — what was made is
 * released by close. */
static int make_context(struct cuda_state *s)
{
    struct cuda_context *ctx = &s->ctx;
    cudaError_t e;
    const char *call = "cudaSetDevice";
    if ((e = cudaSetDevice(s->device)) == cudaSuccess) {
        call = "cudaStreamCreate";
        /* A blocking stream: copies on the legacy default stream (cudaMemcpy) order after its kernels. */
        e = cudaStreamCreate(&ctx->stream);
    }
    if (e == cudaSuccess) {
        /* copies ahead: a stream that never waits for the legacy default one, and two events
         * without timing (the cheapest kind) to order it against the kernels' */
        call = "the copy stream and its events";
        if ((e = cudaStreamCreateWithFlags(&ctx->ahead, cudaStreamNonBlocking)) == cudaSuccess &&
            (e = cudaEventCreateWithFlags(&ctx->queued, cudaEventDisableTiming)) == cudaSuccess)
            e = cudaEventCreateWithFlags(&ctx->arrived, cudaEventDisableTiming);
    }
    if (e == cudaSuccess) {
        call = "cudaMalloc of the check words";
        e = cudaMalloc((void **)&ctx->check, 2 * sizeof(unsigned long long));
    }
    if (e == cudaSuccess) {
        call = "the context's buffers (sample ids, the optimizer's table)";
        size_t ids = CUDA_MAX_SAMPLE_ROWS * sizeof(int64_t), spans = CUDA_MAX_SPANS * CUDA_SPAN_BYTES;
        if ((e = cudaMalloc((void **)&ctx->ids, ids)) == cudaSuccess &&
            (e = cudaMalloc(&ctx->spans, spans)) == cudaSuccess &&
            (e = cudaMalloc((void **)&ctx->partial, (CUDA_OPTIM_BLOCKS + 2) * sizeof(double))) == cudaSuccess &&
            (e = cudaHostAlloc((void **)&ctx->ids_host, ids, cudaHostAllocDefault)) == cudaSuccess)
            e = cudaHostAlloc(&ctx->spans_host, spans, cudaHostAllocDefault);
    }
    if (e != cudaSuccess) {
        s->why = tr_strdup_printf("the CUDA backend cannot start: %s failed: %s", call, cudaGetErrorString(e));
        cudaGetLastError();   /* not sticky: the probe and later calls see a clean state */
        return 0;
    }
    cublasStatus_t b = cublasLtCreate(&ctx->lt);
    if (b != CUBLAS_STATUS_SUCCESS) {
        ctx->lt = NULL;
        s->why = tr_strdup_printf("the CUDA backend cannot start: cublasLtCreate failed: %s",
                                  cublasLtGetStatusString(b));
        return 0;
    }
    return 1;
}

/* The context, started once; NULL when it cannot be (the sentence in s->why). */
static struct cuda_context *started(struct cuda_state *s)
{
    if (!s->started)
        s->started = make_context(s) ? 1 : -1;
    return s->started > 0 ? &s->ctx : NULL;
}

struct cuda_context *cuda_context(const struct tr_kernel_args *a)
{
    struct cuda_state *s = cuda_state_of(a->be);
    struct cuda_context *ctx = started(s);
    if (!ctx)
        device_failed(a, "%s", s->why);
    return ctx;
}

struct cuda_context *cuda_context_for(const struct tr_backend *be, struct tr_diag *d)
{
    struct cuda_state *s = cuda_state_of(be);
    struct cuda_context *ctx = started(s);
    if (!ctx)
        tr_fail(d, TR_EFAIL, "%s", s->why);
    return ctx;
}

int cuda_synchronize(const struct tr_backend *be, struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->ahead);
    if (e == cudaSuccess)
        return 0;
    return tr_fail(d, TR_EFAIL, "a CUDA kernel failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The profiler's marks: timing events, made when first asked for (a run without traces makes none). */
int cuda_timer_start(const struct tr_backend *be, struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 2 && e == cudaSuccess; i++)
        if (!ctx->timer[i])
            e = cudaEventCreate(&ctx->timer[i]);
    if (e == cudaSuccess)
        e = cudaEventRecord(ctx->timer[0], ctx->stream);
    if (e == cudaSuccess)
        return 0;
    return tr_fail(d, TR_EFAIL, "the profiler's CUDA events: %s", cudaGetErrorString(e));
}

int cuda_timer_stop(const struct tr_backend *be, double *seconds, struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    float ms = 0;
    cudaError_t e = ctx->timer[0] && ctx->timer[1] ? cudaEventRecord(ctx->timer[1], ctx->stream) : cudaErrorNotReady;
    if (e == cudaSuccess)
        e = cudaEventSynchronize(ctx->timer[1]);
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(&ms, ctx->timer[0], ctx->timer[1]);
    if (e != cudaSuccess)
        return tr_fail(d, TR_EFAIL, "the profiler's CUDA events: %s", cudaGetErrorString(e));
    *seconds = ms * 1e-3;
    return 0;
}

/* What make_context made, whatever got made before a failure (the cuDNN handle is cudnn.cu's). */
void cuda_context_release(struct cuda_state *s)
{
    struct cuda_context *ctx = &s->ctx;
    if (!s->started)
        return;
    if (ctx->stream)
        cudaStreamSynchronize(ctx->stream);
    if (ctx->lt)
        cublasLtDestroy(ctx->lt);
    cudaFreeHost(ctx->spans_host), cudaFreeHost(ctx->ids_host);
    cudaFree(ctx->partial), cudaFree(ctx->spans), cudaFree(ctx->ids), cudaFree(ctx->check);
    for (int i = 0; i < 2; i++)
        if (ctx->timer[i])
            cudaEventDestroy(ctx->timer[i]);
    if (ctx->arrived)
        cudaEventDestroy(ctx->arrived);
    if (ctx->queued)
        cudaEventDestroy(ctx->queued);
    if (ctx->ahead)
        cudaStreamDestroy(ctx->ahead);
    if (ctx->stream)
        cudaStreamDestroy(ctx->stream);
    cudaGetLastError();
    s->started = 0;
}

/* ---- sentences ----------------------------------------------------------------------------- */

/* "<op>: <the sentence>" in a->diag, with code. */
static int op_failed(const struct tr_kernel_args *a, int code, const char *fmt, va_list ap)
{
    if (!a->diag)
        return code;
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    char *what = (char *)tr_xmalloc((size_t)(n > 0 ? n : 0) + 1);
    vsnprintf(what, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
    int rc = tr_fail(a->diag, code, "%s: %s", tr_op_name(a->node->op), what);
    free(what);
    return rc;
}

int cuda_fail(const struct tr_kernel_args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = op_failed(a, TR_EINVAL, fmt, ap);
    va_end(ap);
    return rc;
}

/* A call of CUDA's that failed: the device's failure, not the input's. */
static int device_failed(const struct tr_kernel_args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = op_failed(a, TR_EFAIL, fmt, ap);
    va_end(ap);
    return rc;
}

int cuda_status(const struct tr_kernel_args *a, cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 0;
    cudaGetLastError();   /* clear a non-sticky error, so the next op does not report it */
    return device_failed(a, "%s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

int cuda_launched(const struct tr_kernel_args *a, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    return device_failed(a, "launching %s failed: %s (%s)", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
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
