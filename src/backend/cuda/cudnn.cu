/* CONV2D, CONV2D_BWD_DATA, CONV2D_BWD_FILTER, BATCHNORM and BATCHNORM_BWD on the GPU through
 * cuDNN 9 (src/backend/cpu/conv.inc and batchnorm.inc are the reference), by the legacy
 * descriptor API cuDNN 9 still ships and marks deprecated (warned of only under
 * CUDNN_WARN_DEPRECATED; the graph API of cudnn_graph.h is its successor). Eval-mode batch
 * norm is two small kernels of our own, the CPU's operations in its order. */
#include "backend/cuda/internal.h"

#include <cudnn.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the handle and cuDNN's sentences ---------------------------------------------------------- */

/* "conv2d: cudnnConvolutionForward failed: CUDNN_STATUS_…: cuDNN's last words" */
static int dnn_status(const struct tr_kernel_args *a, cudnnStatus_t s, const char *call)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    char detail[160] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    return cuda_fail(a, "%.*s failed: %s%s%s", (int)strcspn(call, "("), call, cudnnGetErrorString(s),
                     detail[0] ? ": " : "", detail);
}

#define DNN(call)                                        \
    do {                                                 \
        int dnn_rc_ = dnn_status(a, (call), #call);      \
        if (dnn_rc_)                                     \
            return dnn_rc_;                              \
    } while (0)

static struct cuda_conv_cache *new_conv_cache(void);

/* The context's cuDNN handle, and its table of algorithm choices, made on first use (cudnnCreate
 * loads cuDNN's sub-libraries and takes a while: a run without convolutions never pays it). One
 * host thread drives an instance (cuda.h), so no lock; a failure is tried again by the next call. */
static cudnnHandle_t dnn_handle(const struct tr_kernel_args *a, struct cuda_context *ctx)
{
    if (ctx->dnn)
        return ctx->dnn;
    cudnnHandle_t h = NULL;
    if (dnn_status(a, cudnnCreate(&h), "cudnnCreate"))
        return NULL;
    if (dnn_status(a, cudnnSetStream(h, ctx->stream), "cudnnSetStream")) {
        cudnnDestroy(h);
        return NULL;
    }
    ctx->convs = new_conv_cache();
    return ctx->dnn = h;
}

static cudnnDataType_t dnn_type(enum tr_dtype t)
{
    return t == TR_BF16 ? CUDNN_DATA_BFLOAT16 : t == TR_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* ---- staging: the f32 copies cuDNN needs ------------------------------------------------------
 * cuDNN takes one dtype for x, w and y (and batch norm's statistics and parameters in f32), where
 * a node may mix f32 with 16-bit tensors (backend.h). Such tensors get f32 copies in the
 * workspace — widened exactly before the call when it reads them (an accumulated output too),
 * rounded to nearest even after it when it writes them — as the CPU does (widen.c). */

enum { READ = 1, WRITE = 2 };

/* Slot k is in[k] for k < nin, out[k − nin] after. */
struct staging {
    int n;
    const struct tr_tensor *t[TR_MAX_IN + TR_MAX_OUT];
    uint8_t use[TR_MAX_IN + TR_MAX_OUT];   /* READ | WRITE; 0: the call does not touch it */
    bool widen[TR_MAX_IN + TR_MAX_OUT];
};

static struct staging staging_of(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct staging st;
    memset(&st, 0, sizeof st);
    st.n = node->nin + node->nout;
    for (int k = 0; k < st.n; k++) {
        st.t[k] = k < node->nin ? &in[k] : &out[k - node->nin];
        st.use[k] = k < node->nin ? READ : WRITE | (node->accumulate ? READ : 0);
    }
    return st;
}

static size_t copy_bytes(const struct tr_tensor *t) { return cuda_aligned((size_t)tr_tensor_numel(t) * sizeof(float)); }

static size_t staging_bytes(const struct staging *st)
{
    size_t bytes = 0;
    for (int k = 0; k < st->n; k++)
        bytes += st->use[k] && st->widen[k] ? copy_bytes(st->t[k]) : 0;
    return bytes;
}

/* p[k] = slot k's data or its copy (carved from the workspace in slot order); the copies the
 * call reads are widened. The caller has checked the workspace holds staging_bytes. */
static int stage_in(const struct tr_kernel_args *a, cudaStream_t stream, const struct staging *st, void **p)
{
    char *at = (char *)a->workspace;
    bool launched = false;
    for (int k = 0; k < st->n; k++) {
        p[k] = st->t[k]->data;
        if (!st->use[k] || !st->widen[k])
            continue;
        p[k] = at, at += copy_bytes(st->t[k]);
        if (st->use[k] & READ)
            cuda_convert(stream, st->t[k]->data, st->t[k]->dtype, p[k], TR_F32, tr_tensor_numel(st->t[k]), 0),
                launched = true;
    }
    return launched ? cuda_launched(a, "the widening of 16-bit tensors to f32") : 0;
}

/* The written copies back into their tensors, rounded once (an accumulated one already holds
 * old + new in f32). */
static int stage_out(const struct tr_kernel_args *a, cudaStream_t stream, const struct staging *st, void *const *p)
{
    bool launched = false;
    for (int k = 0; k < st->n; k++)
        if ((st->use[k] & WRITE) && st->widen[k])
            cuda_convert(stream, p[k], TR_F32, st->t[k]->data, st->t[k]->dtype, tr_tensor_numel(st->t[k]), 0),
                launched = true;
    return launched ? cuda_launched(a, "the rounding of f32 results to 16 bits") : 0;
}

static int need_workspace(const struct tr_kernel_args *a, size_t need)
{
    size_t have = a->workspace ? a->workspace_bytes : 0;
    if (have < need)
        return cuda_fail(a, "needs at least %zu bytes of workspace, has %zu", need, have);
    return 0;
}

/* ---- convolutions --------------------------------------------------------------------------------
 * Precision: f32 convolutions may use TF32 tensor cores (CUDNN_DEFAULT_MATH permits them on
 * Ampere and later: 10-bit mantissa products, f32 sums, about 1e-3 relative — PyTorch's default
 * for convolutions, torch.backends.cudnn.allow_tf32). bf16 and f16 ones run cuDNN's
 * PSEUDO_BFLOAT16/PSEUDO_HALF configurations: products of the 16-bit values, f32 accumulation.
 * x, w and y of one dtype run as they are; a mix is widened to f32 (staging).
 *
 * Algorithms and workspace: results must not depend on scheduling, so only deterministic
 * algorithms run — cuDNN's heuristics (cudnnGet…Algorithm_v7) rank them, their perf results
 * say which are deterministic, and the documented atomics users (backward data ALGO_0, backward
 * filter ALGO_0 and ALGO_3) are refused by name besides. The workspace must be sized at planning,
 * where no device may be touched, so the choice cannot come first: workspace_bytes gives, after
 * the f32 copies, a budget that is a pure function of the shapes — the im2col matrix of the
 * whole batch in f32 (N·C·kh·kw·Ho·Wo·4 bytes: what an explicit-GEMM algorithm holds), at least
 * CONV_SCRATCH_MIN and at most CONV_SCRATCH_MAX — and at run time the best-ranked deterministic
 * algorithm whose own workspace (cudnnGet…WorkspaceSize) fits in what the node was given runs.
 * When none fits, the node fails with a sentence naming the smallest need. The choice is asked
 * for on every call (microseconds of host time; a cache keyed by shapes is a later speed-up),
 * and may differ between GPUs and cuDNN versions, as cuBLASLt's does. */

/* The workspace is one region for the whole plan, sized by its hungriest node (memplan.c):
 * 32 MiB is what a MATMUL's cuBLASLt scratch takes already, so a network with a linear layer
 * pays nothing for the floor; the ceiling keeps a large batch from growing the plan unbounded
 * (the implicit-GEMM algorithms need little or nothing). */
#define CONV_SCRATCH_MIN ((size_t)32 << 20)
#define CONV_SCRATCH_MAX ((size_t)256 << 20)

/* x [N, C, H, W], w [O, C, kh, kw], y [N, O, Ho, Wo]: which are the op's inputs and which its
 * output (conv.c's reading). */
struct conv_roles {
    const struct tr_tensor *x, *w, *y;
};

static struct conv_roles conv_roles_of(enum tr_op op, const struct tr_tensor *in, const struct tr_tensor *out)
{
    if (op == TR_OP_CONV2D_BWD_DATA)
        return {&out[0], &in[1], &in[0]};
    if (op == TR_OP_CONV2D_BWD_FILTER)
        return {&in[1], &out[0], &in[0]};
    return {&in[0], &in[1], &out[0]};
}

/* x, w and y of one dtype run as they are; otherwise every tensor not f32 is widened. */
static bool conv_native(const struct conv_roles *r)
{
    return r->x->dtype == r->w->dtype && r->x->dtype == r->y->dtype;
}

static struct staging conv_staging(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct staging st = staging_of(node, in, out);
    struct conv_roles r = conv_roles_of(node->op, in, out);
    for (int k = 0; k < st.n; k++)
        st.widen[k] = !conv_native(&r) && st.t[k]->dtype != TR_F32;
    return st;
}

static size_t conv_scratch_budget(const struct conv_roles *r)
{
    double im2col = (double)r->x->dim[0] * (double)r->w->dim[1] * (double)r->w->dim[2] * (double)r->w->dim[3] *
                    (double)r->y->dim[2] * (double)r->y->dim[3] * sizeof(float);
    if (im2col <= (double)CONV_SCRATCH_MIN)
        return CONV_SCRATCH_MIN;
    return im2col >= (double)CONV_SCRATCH_MAX ? CONV_SCRATCH_MAX : cuda_aligned((size_t)im2col);
}

size_t tr_cuda_conv2d_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct staging st = conv_staging(node, in, out);
    struct conv_roles r = conv_roles_of(node->op, in, out);
    return staging_bytes(&st) + conv_scratch_budget(&r);
}

/* One call's descriptors, released whatever happens. */
struct conv_descs {
    cudnnTensorDescriptor_t x = NULL, y = NULL;
    cudnnFilterDescriptor_t w = NULL;
    cudnnConvolutionDescriptor_t conv = NULL;
    ~conv_descs()
    {
        if (conv)
            cudnnDestroyConvolutionDescriptor(conv);
        if (w)
            cudnnDestroyFilterDescriptor(w);
        if (y)
            cudnnDestroyTensorDescriptor(y);
        if (x)
            cudnnDestroyTensorDescriptor(x);
    }
};

/* NCHW descriptors of x, w, y in dtype t, cross-correlation (what the CPU computes) with the
 * node's stride and padding, f32 accumulation, and the math type allowing tensor cores. */
static int conv_describe(const struct tr_kernel_args *a, const struct conv_roles *r, enum tr_dtype t,
                         struct conv_descs *d)
{
    const struct tr_tensor *x = r->x, *w = r->w, *y = r->y;
    for (int i = 0; i < 4; i++)
        if (!fits_int(x->dim[i]) || !fits_int(w->dim[i]) || !fits_int(y->dim[i]))
            return cuda_fail(a, "a dimension beyond %d is more than cuDNN's descriptors hold", INT_MAX);
    int stride = a->node->attrs.conv.stride, pad = a->node->attrs.conv.pad;
    if (stride < 1 || pad < 0)
        return cuda_fail(a, "stride %d, pad %d: a convolution needs stride ≥ 1, pad ≥ 0", stride, pad);
    cudnnDataType_t type = dnn_type(t);
    DNN(cudnnCreateTensorDescriptor(&d->x));
    DNN(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, type, (int)x->dim[0], (int)x->dim[1], (int)x->dim[2],
                                   (int)x->dim[3]));
    DNN(cudnnCreateTensorDescriptor(&d->y));
    DNN(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, type, (int)y->dim[0], (int)y->dim[1], (int)y->dim[2],
                                   (int)y->dim[3]));
    DNN(cudnnCreateFilterDescriptor(&d->w));
    DNN(cudnnSetFilter4dDescriptor(d->w, type, CUDNN_TENSOR_NCHW, (int)w->dim[0], (int)w->dim[1], (int)w->dim[2],
                                   (int)w->dim[3]));
    DNN(cudnnCreateConvolutionDescriptor(&d->conv));
    DNN(cudnnSetConvolution2dDescriptor(d->conv, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionMathType(d->conv, t == TR_F32 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH));
    return 0;
}

/* The algorithms cuDNN's documentation ("Reproducibility") names as using atomics. */
static bool uses_atomics(enum tr_op op, int algo)
{
    if (op == TR_OP_CONV2D_BWD_DATA)
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    if (op == TR_OP_CONV2D_BWD_FILTER)
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
    return false;
}

/* cuDNN's choice for one convolution, kept in the instance's context: its heuristics and the
 * workspace query of each candidate cost tens of microseconds a call, now paid once a shape.
 * The key is everything the choice reads: the direction, the type cuDNN computes in, the
 * shapes, stride and padding, and the workspace left. One host thread drives an instance
 * (cuda.h): no lock. A full table chooses again at each call of a shape it does not hold. */
struct conv_key {
    int op, dtype, stride, pad;
    int64_t x[4], w[4], y[4];
    size_t room;
};

struct conv_choice {
    struct conv_key key;
    int algo;
    cudnnMathType_t math;
    size_t bytes;
};

enum { CONV_CHOICES = 512 };
struct cuda_conv_cache {
    struct conv_choice choices[CONV_CHOICES];
    int n;
};

static struct cuda_conv_cache *new_conv_cache(void)
{
    return (struct cuda_conv_cache *)tr_xcalloc(1, sizeof(struct cuda_conv_cache));
}

void cuda_dnn_release(struct cuda_context *ctx)
{
    if (ctx->dnn)
        cudnnDestroy(ctx->dnn);
    free(ctx->convs);
    ctx->dnn = NULL, ctx->convs = NULL;
}

/* The choices of the instance running the kernel (made with its cuDNN handle, before any call). */
static struct cuda_conv_cache *conv_cache_of(const struct tr_kernel_args *a)
{
    return cuda_state_of(a->be)->ctx.convs;
}

static struct conv_key conv_key_of(const struct tr_kernel_args *a, const struct conv_roles *r, enum tr_dtype t,
                                   size_t room)
{
    struct conv_key k;
    memset(&k, 0, sizeof k);   /* compared with memcmp: no stray padding bytes */
    k.op = a->node->op, k.dtype = t, k.stride = a->node->attrs.conv.stride, k.pad = a->node->attrs.conv.pad;
    for (int d = 0; d < 4; d++)
        k.x[d] = r->x->dim[d], k.w[d] = r->w->dim[d], k.y[d] = r->y->dim[d];
    k.room = room;
    return k;
}

static const struct conv_choice *recalled(const struct cuda_conv_cache *c, const struct conv_key *k)
{
    for (int i = 0; i < c->n; i++)
        if (!memcmp(&c->choices[i].key, k, sizeof *k))
            return &c->choices[i];
    return NULL;
}

static void remember(struct cuda_conv_cache *c, const struct conv_key *k, int algo, cudnnMathType_t math,
                     size_t bytes)
{
    if (c->n < CONV_CHOICES)
        c->choices[c->n++] = {*k, algo, math, bytes};
}

/* The choice kept for key k, else the first of the ranked algorithms that is deterministic
 * and whose workspace fits in k->room bytes, kept: into *chosen (its algo and math type) and
 * *bytes; the descriptor gets its math type. rank(count, &found, perf) asks cuDNN's heuristics
 * (named rank_call in a failure), size(algo, &bytes) the workspace. The three directions' perf
 * structs share their fields' names. */
template <class Perf, int Count, class Rank, class Size>
static int choose_algo(const struct tr_kernel_args *a, const struct conv_key *k, cudnnConvolutionDescriptor_t conv,
                       Rank rank, const char *rank_call, Size size, Perf *chosen, size_t *bytes)
{
    struct cuda_conv_cache *cache = conv_cache_of(a);
    const struct conv_choice *c = recalled(cache, k);
    if (c) {
        DNN(cudnnSetConvolutionMathType(conv, c->math));
        chosen->algo = (decltype(chosen->algo))c->algo, chosen->mathType = c->math, *bytes = c->bytes;
        return 0;
    }
    size_t room = k->room;
    Perf perf[Count];
    int found = 0;
    memset(perf, 0, sizeof perf);
    int rc = dnn_status(a, rank(Count, &found, perf), rank_call);
    if (rc)
        return rc;
    size_t smallest = SIZE_MAX;
    for (int i = 0; i < found && i < Count; i++) {
        const Perf &p = perf[i];
        if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC ||
            uses_atomics(a->node->op, (int)p.algo) || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
            continue;
        DNN(cudnnSetConvolutionMathType(conv, p.mathType));
        size_t need = 0;
        if (size(p.algo, &need) != CUDNN_STATUS_SUCCESS)
            continue;
        if (need <= room) {
            *chosen = p, *bytes = need;
            remember(cache, k, (int)p.algo, p.mathType, need);
            return 0;
        }
        smallest = need < smallest ? need : smallest;
    }
    if (smallest == SIZE_MAX)
        return cuda_fail(a, "cuDNN offers no deterministic algorithm for this convolution (%d ranked)", found);
    return cuda_fail(a, "the smallest deterministic cuDNN algorithm needs %zu bytes of workspace, %zu are left", smallest,
                     room);
}

/* Runs the node's direction with the chosen algorithm, out = 1·op(in0, in1) + beta·out (beta 1
 * when the node accumulates): forward in0 = x, in1 = w; backward data in0 = dy, in1 = w;
 * backward filter in0 = dy, in1 = x. */
static int conv_call(const struct tr_kernel_args *a, cudnnHandle_t h, const struct conv_descs *d,
                     const struct conv_key *key, const void *in0, const void *in1, void *out, void *scratch)
{
    float one = 1, beta = a->node->accumulate ? 1.0f : 0.0f;
    size_t bytes = 0;
    int rc;
    switch (a->node->op) {
    case TR_OP_CONV2D_BWD_DATA: {   /* out = dx */
        cudnnConvolutionBwdDataAlgoPerf_t p = {};
        rc = choose_algo<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
            a, key, d->conv,
            [&](int n, int *found, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
                return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x, n, found, perf);
            },
            "cudnnGetConvolutionBackwardDataAlgorithm_v7",
            [&](cudnnConvolutionBwdDataAlgo_t algo, size_t *need) {
                return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d->w, d->y, d->conv, d->x, algo, need);
            },
            &p, &bytes);
        if (rc)
            return rc;
        DNN(cudnnConvolutionBackwardData(h, &one, d->w, in1, d->y, in0, d->conv, p.algo, scratch, bytes, &beta, d->x, out));
        return 0;
    }
    case TR_OP_CONV2D_BWD_FILTER: {   /* out = dw */
        cudnnConvolutionBwdFilterAlgoPerf_t p = {};
        rc = choose_algo<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
            a, key, d->conv,
            [&](int n, int *found, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
                return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w, n, found, perf);
            },
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
            [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t *need) {
                return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->x, d->y, d->conv, d->w, algo, need);
            },
            &p, &bytes);
        if (rc)
            return rc;
        DNN(cudnnConvolutionBackwardFilter(h, &one, d->x, in1, d->y, in0, d->conv, p.algo, scratch, bytes, &beta, d->w,
                                           out));
        return 0;
    }
    default: {   /* out = y */
        cudnnConvolutionFwdAlgoPerf_t p = {};
        rc = choose_algo<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
            a, key, d->conv,
            [&](int n, int *found, cudnnConvolutionFwdAlgoPerf_t *perf) {
                return cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, n, found, perf);
            },
            "cudnnGetConvolutionForwardAlgorithm_v7",
            [&](cudnnConvolutionFwdAlgo_t algo, size_t *need) {
                return cudnnGetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y, algo, need);
            },
            &p, &bytes);
        if (rc)
            return rc;
        DNN(cudnnConvolutionForward(h, &one, d->x, in0, d->w, in1, d->conv, p.algo, scratch, bytes, &beta, d->y, out));
        return 0;
    }
    }
}

/* y (+)= conv(x, w);  dx (+)= conv_transpose(dy, w);  dw (+)= Σ_n dy[n] ⋆ x[n]:
 * the three directions share everything but the cuDNN call. */
static int conv_run(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    if (a->node->attrs.conv.channels_last)
        return cuda_fail(a, "images channels last are not supported on the GPU yet: [N, C, H, W] only (tr_build lays them out so)");
    const struct tr_tensor *out = &a->out[0];
    if (tr_tensor_numel(out) == 0)
        return 0;
    if (tr_tensor_numel(&a->in[0]) == 0 || tr_tensor_numel(&a->in[1]) == 0) {   /* an empty sum: 0 */
        if (a->node->accumulate)
            return 0;
        return cuda_status(a, cudaMemsetAsync(out->data, 0, tr_tensor_bytes(out), ctx->stream), "cudaMemsetAsync");
    }
    struct conv_roles r = conv_roles_of(a->node->op, a->in, a->out);
    struct staging st = conv_staging(a->node, a->in, a->out);
    size_t copies = staging_bytes(&st);
    int rc = need_workspace(a, copies);
    if (rc)
        return rc;
    struct conv_descs d;
    enum tr_dtype type = conv_native(&r) ? r.x->dtype : TR_F32;
    if ((rc = conv_describe(a, &r, type, &d)))
        return rc;
    cudnnHandle_t h = dnn_handle(a, ctx);
    if (!h)
        return TR_EINVAL;
    void *p[TR_MAX_IN + TR_MAX_OUT];
    if ((rc = stage_in(a, ctx->stream, &st, p)))
        return rc;
    size_t room = (a->workspace ? a->workspace_bytes : 0) - copies;   /* need_workspace: ≥ copies */
    struct conv_key key = conv_key_of(a, &r, type, room);
    rc = conv_call(a, h, &d, &key, p[0], p[1], p[2], room ? (char *)a->workspace + copies : NULL);
    return rc ? rc : stage_out(a, ctx->stream, &st, p);
}

int tr_cuda_conv2d(const struct tr_kernel_args *a) { return conv_run(a); }
int tr_cuda_conv2d_bwd_data(const struct tr_kernel_args *a) { return conv_run(a); }
int tr_cuda_conv2d_bwd_filter(const struct tr_kernel_args *a) { return conv_run(a); }

/* ---- batch norm -----------------------------------------------------------------------------------
 * Training forward and the backward are cuDNN's spatial batch norm (CUDNN_BATCHNORM_SPATIAL, not
 * the _PERSISTENT variant, which may overflow on some inputs): x [N, C, S] is an N × C × S × 1
 * image, normalised per channel over N·S values. cuDNN keeps the running variance unbiased
 * (÷ (m − 1)), as PyTorch and the CPU, and reports 1/√(var + eps), which is saved's second row.
 * Statistics and parameters are f32 for cuDNN (x's dtype otherwise); x, y (dy, dx) run as they
 * are when they share f32 or f16, else through f32 copies (bf16 too: cuDNN's legacy batch norm
 * documents f16, not bf16). accumulate is cuDNN's blend: beta = 1 for y, and for dx and dgamma,
 * dbeta (betaDataDiff, betaParamDiff); saved and the running statistics are always written.
 * cuDNN's sums are f32 in its own fixed order where the CPU's are double: NEAR, not exact. */


/* The slots cuDNN sees as data (x, y; dy, x, dx), the others being statistics and parameters. */
static bool bn_is_data(enum tr_op op, int slot)
{
    return op == TR_OP_BATCHNORM ? slot == 0 || slot == 5 : slot <= 1 || slot == 4;
}

/* Forward slots: x 0, gamma 1, beta 2, running_mean 3, running_var 4, y 5, saved 6. Backward:
 * dy 0, x 1, gamma 2, saved 3, dx 4, dgamma 5, dbeta 6. Eval runs our kernels, which read any
 * dtype: only saved needs an f32 copy there (the y kernel reads it back unrounded). */
static struct staging bn_staging(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct staging st = staging_of(node, in, out);
    bool fwd = node->op == TR_OP_BATCHNORM, training = fwd && node->attrs.batchnorm.training;
    if (fwd) {
        st.use[6] = WRITE;   /* saved: never accumulated */
        if (training && node->attrs.batchnorm.momentum != 0)
            st.use[3] = st.use[4] = READ | WRITE;   /* updated in place */
        else
            st.use[3] = st.use[4] = 0;              /* momentum 0 (remat's copy): left alone */
        if (!training)
            for (int k = 0; k < 6; k++)
                st.use[k] = 0;
    }
    enum tr_dtype t = st.t[fwd ? 0 : 1]->dtype;
    bool native = t == TR_F32 || t == TR_F16;
    for (int k = 0; k < st.n; k++)
        if (bn_is_data(node->op, k))
            native = native && st.t[k]->dtype == t;
    for (int k = 0; k < st.n; k++)
        st.widen[k] = st.t[k]->dtype != TR_F32 && (!bn_is_data(node->op, k) || !native);
    return st;
}

size_t tr_cuda_batchnorm_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct staging st = bn_staging(node, in, out);
    return staging_bytes(&st);
}

/* The data descriptor (N × C × S × 1, dtype t) and the statistics' (1 × C × 1 × 1, f32). */
struct bn_descs {
    cudnnTensorDescriptor_t data = NULL, stats = NULL;
    ~bn_descs()
    {
        if (stats)
            cudnnDestroyTensorDescriptor(stats);
        if (data)
            cudnnDestroyTensorDescriptor(data);
    }
};

static int bn_describe(const struct tr_kernel_args *a, const struct tr_bn_geom *g, enum tr_dtype t, struct bn_descs *d)
{
    if (!fits_int(g->N) || !fits_int(g->C) || !fits_int(g->S))
        return cuda_fail(a, "x seen as [%lld, %lld, %lld] has a dimension beyond cuDNN's %d", (long long)g->N,
                         (long long)g->C, (long long)g->S, INT_MAX);
    DNN(cudnnCreateTensorDescriptor(&d->data));
    DNN(cudnnSetTensor4dDescriptor(d->data, CUDNN_TENSOR_NCHW, dnn_type(t), (int)g->N, (int)g->C, (int)g->S, 1));
    DNN(cudnnCreateTensorDescriptor(&d->stats));
    DNN(cudnnSetTensor4dDescriptor(d->stats, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, (int)g->C, 1, 1));
    return 0;
}

/* The dtype cuDNN sees the data slots in: their own when none is widened, else f32. */
static enum tr_dtype bn_data_type(const struct staging *st, int slot)
{
    return st->widen[slot] ? TR_F32 : st->t[slot]->dtype;
}

#define GRID(n) cuda_blocks(n, 256), 256, 0, ctx->stream
#define FOR_EACH(q, n) \
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < (n); q += (int64_t)gridDim.x * blockDim.x)

/* eval: saved = (running_mean, 1/√(running_var + eps)), in double and rounded to f32 as the
 * CPU's (IEEE division and square root: the same bits) */
__global__ void bn_eval_stats_kernel(const void *mean, int tm, const void *var, int tv, double eps, float *saved,
                                     int64_t C)
{
    FOR_EACH(c, C) {
        saved[c] = cuda_load(mean, tm, c);
        saved[C + c] = (float)(1.0 / sqrt((double)cuda_load(var, tv, c) + eps));
    }
}

/* eval: y (+)= gamma·(x − mean)·invstd + beta in f32, each operation rounded on its own (no
 * fused multiply-add) in the CPU's order: the CPU's bits */
__global__ void bn_eval_kernel(struct tr_bn_geom g, const void *x, int tx, const void *gamma, int tg, const void *beta,
                               int tb, const float *saved, void *y, int ty, int acc)
{
    FOR_EACH(q, g.N * g.C * g.S) {
        int64_t c = q / g.S % g.C;
        float centred = __fsub_rn(cuda_load(x, tx, q), saved[c]);
        float v = __fmul_rn(__fmul_rn(cuda_load(gamma, tg, c), centred), saved[g.C + c]);
        cuda_put(y, ty, q, __fadd_rn(v, cuda_load(beta, tb, c)), acc);
    }
}

/* training: y (+)= gamma·(x − mean)·invstd + beta with the batch's statistics, which are saved;
 *   running ← (1 − momentum)·running + momentum·batch (the variance unbiased; momentum 0: kept).
 * eval: the running statistics normalise, and are saved. */
int tr_cuda_batchnorm(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    if (a->node->attrs.batchnorm.channels_last)
        return cuda_fail(a, "images channels last are not supported on the GPU yet: [N, C, H, W] only (tr_build lays them out so)");
    struct tr_bn_geom g = tr_bn_geom_of(a->node, &a->in[0]);
    bool training = a->node->attrs.batchnorm.training;
    double eps = a->node->attrs.batchnorm.eps, momentum = a->node->attrs.batchnorm.momentum;
    if (training && g.N * g.S < 2)   /* the CPU's sentence: the unbiased variance divides by m − 1 */
        return cuda_fail(a, "training needs more than one value per channel, got a batch of %lld×%lld", (long long)g.N,
                         (long long)g.S);
    if (g.C == 0)
        return 0;
    struct staging st = bn_staging(a->node, a->in, a->out);
    int rc = need_workspace(a, staging_bytes(&st));
    if (rc)
        return rc;
    void *p[TR_MAX_IN + TR_MAX_OUT];
    if ((rc = stage_in(a, ctx->stream, &st, p)))
        return rc;
    float *saved = (float *)p[6];
    const struct tr_tensor *x = &a->in[0], *gamma = &a->in[1], *beta = &a->in[2], *y = &a->out[0];
    if (!training) {
        bn_eval_stats_kernel<<<GRID(g.C)>>>(a->in[3].data, a->in[3].dtype, a->in[4].data, a->in[4].dtype, eps, saved,
                                            g.C);
        if (tr_tensor_numel(x) > 0)
            bn_eval_kernel<<<GRID(tr_tensor_numel(x))>>>(g, x->data, x->dtype, gamma->data, gamma->dtype, beta->data,
                                                         beta->dtype, saved, y->data, y->dtype, a->node->accumulate);
        if ((rc = cuda_launched(a, "the eval-mode batch norm")))
            return rc;
        return stage_out(a, ctx->stream, &st, p);
    }
    struct bn_descs d;
    if ((rc = bn_describe(a, &g, bn_data_type(&st, 0), &d)))
        return rc;
    cudnnHandle_t h = dnn_handle(a, ctx);
    if (!h)
        return TR_EINVAL;
    float one = 1, blend = a->node->accumulate ? 1.0f : 0.0f;
    bool moves = momentum != 0;   /* both running pointers NULL: cuDNN leaves them */
    DNN(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &blend, d.data, p[0], d.data, p[5],
                                               d.stats, p[1], p[2], momentum, moves ? p[3] : NULL,
                                               moves ? p[4] : NULL, eps, saved, saved + g.C));
    return stage_out(a, ctx->stream, &st, p);
}

/* xhat = (x − mean)·invstd;  dbeta (+)= Σ dy,  dgamma (+)= Σ dy·xhat,
 * dx (+)= gamma·invstd·(dy − dbeta/m − xhat·dgamma/m), mean and invstd from saved */
int tr_cuda_batchnorm_bwd(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    if (a->node->attrs.batchnorm.channels_last)
        return cuda_fail(a, "images channels last are not supported on the GPU yet: [N, C, H, W] only (tr_build lays them out so)");
    struct tr_bn_geom g = tr_bn_geom_of(a->node, &a->in[1]);
    if (g.C == 0)
        return 0;
    if (g.N * g.S == 0) {   /* no values: empty sums, dgamma = dbeta = 0 */
        if (a->node->accumulate)
            return 0;
        for (int k = 1; k < 3; k++) {
            int rc = cuda_status(a, cudaMemsetAsync(a->out[k].data, 0, tr_tensor_bytes(&a->out[k]), ctx->stream),
                                 "cudaMemsetAsync");
            if (rc)
                return rc;
        }
        return 0;
    }
    struct staging st = bn_staging(a->node, a->in, a->out);
    int rc = need_workspace(a, staging_bytes(&st));
    if (rc)
        return rc;
    struct bn_descs d;
    if ((rc = bn_describe(a, &g, bn_data_type(&st, 1), &d)))
        return rc;
    cudnnHandle_t h = dnn_handle(a, ctx);
    if (!h)
        return TR_EINVAL;
    void *p[TR_MAX_IN + TR_MAX_OUT];
    if ((rc = stage_in(a, ctx->stream, &st, p)))
        return rc;
    const float *saved = (const float *)p[3];
    float one = 1, blend = a->node->accumulate ? 1.0f : 0.0f;
    double eps = a->node->attrs.batchnorm.eps;   /* unused with saved statistics; cuDNN wants it ≥ 0 */
    DNN(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &blend, &one, &blend, d.data, p[1], d.data,
                                        p[0], d.data, p[4], d.stats, p[2], p[5], p[6], eps > 0 ? eps : 0, saved,
                                        saved + g.C));
    return stage_out(a, ctx->stream, &st, p);
}
