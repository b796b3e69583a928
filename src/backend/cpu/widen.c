/* 16-bit storage on the CPU (DESIGN.md §3): bf16 and f16 tensors are stored in 16 bits and
 * computed on in f32. tr_backend_run sends every node through tr_cpu_run_widened: a node whose
 * float tensors include 16-bit ones runs its f32 kernel on f32 copies in the workspace — each
 * 16-bit input widened (exactly), each 16-bit output given f32 scratch and rounded back to
 * nearest even afterwards — unless the op only moves elements and can take 16-bit data as is. */
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"

/* Whole tensors convert in chunks of this many elements, shared out among threads: each
 * element converts on its own, so the chunks only split the work, never change a bit. */
#define CONVERT_CHUNK 4096
/* Each f32 copy starts on a cache line of its own. */
#define SCRATCH_ALIGN 64

/* bf16 is the top half of an f32: shifts and a rounding add that vectorise. Built for AVX2 and
 * AVX-512 too (TR_CPU_SIMD), picked at load time: in cache, narrowing took 0.83 ns an element
 * with SSE2 (which lacks a 32 → 16-bit pack) and 0.37 with AVX2; widening 0.18 and 0.09. */
TR_CPU_SIMD static void bf16_widen(const uint16_t *h, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = tr_bf16_to_f32(h[i]);
}

TR_CPU_SIMD static void bf16_narrow(const float *src, uint16_t *h, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        h[i] = tr_f32_to_bf16(src[i]);
}

void tr_cpu_widen_run(const void *src, enum tr_dtype t, float *dst, int64_t n)
{
    if (t == TR_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t == TR_BF16) {
        bf16_widen(src, dst, n);
    } else if (t == TR_F16) {
        tr_f16_widen(src, dst, n);
    }
}

void tr_cpu_narrow_run(const float *src, void *dst, enum tr_dtype t, int64_t n)
{
    if (t == TR_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t == TR_BF16) {
        bf16_narrow(src, dst, n);
    } else if (t == TR_F16) {
        tr_f16_narrow(src, dst, n);
    }
}

static void widen_tensor(const struct tr_tensor *t, float *dst)
{
    const uint16_t *h = t->data;
    int64_t n = tr_tensor_numel(t);
#pragma omp parallel for schedule(static) if (n > CONVERT_CHUNK)
    for (int64_t c = 0; c < n; c += CONVERT_CHUNK)
        tr_cpu_widen_run(h + c, t->dtype, dst + c, n - c < CONVERT_CHUNK ? n - c : CONVERT_CHUNK);
}

static void narrow_tensor(const float *src, const struct tr_tensor *t)
{
    uint16_t *h = t->data;
    int64_t n = tr_tensor_numel(t);
#pragma omp parallel for schedule(static) if (n > CONVERT_CHUNK)
    for (int64_t c = 0; c < n; c += CONVERT_CHUNK)
        tr_cpu_narrow_run(src + c, h + c, t->dtype, n - c < CONVERT_CHUNK ? n - c : CONVERT_CHUNK);
}

/* The one place that says how an op meets 16-bit data. The ops of shape.c move elements and
 * are written over every dtype, so they run on 16-bit storage directly (no copies: half the
 * bytes moved) — as long as their float tensors share one dtype; CAST converts between any
 * two itself. The pointwise ops, dropout, bias_add, bias_grad, layer and batch norm have bf16
 * bodies (instantiate.h) that widen each value as they read it: a node of the dtypes they take
 * runs there, with the bits of the widened run. Every other op, and those at other dtypes (f16
 * always), computes on f32 copies — GATHER too: it shares EMBEDDING's typed body
 * (embedding.inc). */
enum on_16bit { WIDENED, AS_STORED, AS_STORED_IF_ONE_DTYPE, BF16_BODY };   /* WIDENED (0): every op not named */
static const enum on_16bit on_16bit[TR_NOPS] = {
    [TR_OP_CAST] = AS_STORED,
    [TR_OP_PERMUTE] = AS_STORED_IF_ONE_DTYPE,
    [TR_OP_SLICE] = AS_STORED_IF_ONE_DTYPE,
    [TR_OP_SLICE_BWD] = AS_STORED_IF_ONE_DTYPE,
    [TR_OP_CONCAT] = AS_STORED_IF_ONE_DTYPE,
    [TR_OP_MASKED_FILL] = AS_STORED_IF_ONE_DTYPE,
    [TR_OP_ADD] = BF16_BODY,
    [TR_OP_MUL] = BF16_BODY,
    [TR_OP_SCALE] = BF16_BODY,
    [TR_OP_ACCUMULATE] = BF16_BODY,
    [TR_OP_BIAS_ADD] = BF16_BODY,
    [TR_OP_BIAS_GRAD] = BF16_BODY,
    [TR_OP_RELU] = BF16_BODY,
    [TR_OP_RELU_BWD] = BF16_BODY,
    [TR_OP_TANH] = BF16_BODY,
    [TR_OP_TANH_BWD] = BF16_BODY,
    [TR_OP_GELU] = BF16_BODY,
    [TR_OP_GELU_BWD] = BF16_BODY,
    [TR_OP_DROPOUT] = BF16_BODY,
    [TR_OP_LAYERNORM] = BF16_BODY,
    [TR_OP_LAYERNORM_BWD] = BF16_BODY,
    [TR_OP_BATCHNORM] = BF16_BODY,
    [TR_OP_BATCHNORM_BWD] = BF16_BODY,
};

/* A BF16_BODY op's tensors that stay f32 beside its bf16 activations, as amp keeps them: bit i
 * of `in` (`out`) for input (output) i. Every other float tensor is bf16. */
static const struct {
    uint8_t in, out;
} f32_beside_bf16[TR_NOPS] = {
    [TR_OP_BIAS_ADD] = {0x2, 0},          /* the bias */
    [TR_OP_BIAS_GRAD] = {0, 0x1},         /* dbias */
    [TR_OP_LAYERNORM] = {0x6, 0x2},       /* gamma, beta; stats */
    [TR_OP_LAYERNORM_BWD] = {0xc, 0x6},   /* gamma, stats; dgamma, dbeta */
    [TR_OP_BATCHNORM] = {0x1e, 0x2},      /* gamma, beta, the running statistics; saved */
    [TR_OP_BATCHNORM_BWD] = {0xc, 0x6},   /* gamma, saved; dgamma, dbeta */
};

bool tr_cpu_bf16_body_takes(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    if (on_16bit[node->op] != BF16_BODY)
        return false;
    for (int i = 0; i < node->nin + node->nout; i++) {
        bool output = i >= node->nin;
        int k = output ? i - node->nin : i;
        enum tr_dtype t = output ? out[k].dtype : in[k].dtype;
        bool f32 = ((output ? f32_beside_bf16[node->op].out : f32_beside_bf16[node->op].in) >> k) & 1;
        if (tr_dtype_is_float(t) && t != (f32 ? TR_F32 : TR_BF16))
            return false;
    }
    return true;
}

static bool runs_on_16bit(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                          bool one_float_dtype)
{
    switch (on_16bit[node->op]) {
    case AS_STORED: return true;
    case AS_STORED_IF_ONE_DTYPE: return one_float_dtype;
    case BF16_BODY: return tr_cpu_bf16_body_takes(node, in, out);
    case WIDENED: break;
    }
    return false;
}

/* Whether the node's kernel must see f32 copies of its 16-bit tensors. */
static bool needs_widening(const struct tr_node *node, const struct tr_tensor *in, int nin,
                           const struct tr_tensor *out, int nout)
{
    bool any_16bit = false, one_float_dtype = true;
    enum tr_dtype first = TR_NDTYPES;
    for (int i = 0; i < nin + nout; i++) {
        enum tr_dtype t = i < nin ? in[i].dtype : out[i - nin].dtype;
        if (!tr_dtype_is_float(t))
            continue;
        any_16bit |= tr_dtype_is_16bit(t);
        if (first == TR_NDTYPES)
            first = t;
        one_float_dtype &= t == first;
    }
    return any_16bit && !runs_on_16bit(node, in, out, one_float_dtype);
}

/* Inputs the kernel writes in place, which must go back to their 16-bit storage too: batch
 * norm's running statistics, in training. */
static bool input_is_written(const struct tr_node *node, int i)
{
    return node->op == TR_OP_BATCHNORM && node->attrs.batchnorm.training && (i == 3 || i == 4);
}

/* Outputs the kernel adds into, whose f32 copies must start from their values: every output
 * when the node accumulates (ACCUMULATE always), and LINEAR_CROSS_ENTROPY_BWD's dw under
 * add_dw (a parameter's gradient). */
static bool output_is_read(const struct tr_node *node, int i)
{
    if (node->accumulate || node->op == TR_OP_ACCUMULATE)
        return true;
    return node->op == TR_OP_LINEAR_CROSS_ENTROPY_BWD && node->attrs.cross_entropy.add_dw && i == 1;
}

/* The bytes the f32 copy of a 16-bit tensor takes: a whole number of cache lines. */
static size_t copy_bytes(const struct tr_tensor *t)
{
    size_t bytes = (size_t)tr_tensor_numel(t) * sizeof(float);
    return (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

/* The bytes of the f32 copies of the 16-bit tensors of ts[0:n]. */
static size_t copies_bytes(const struct tr_tensor *ts, int n)
{
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        if (tr_dtype_is_16bit(ts[i].dtype))
            bytes += copy_bytes(&ts[i]);
    return bytes;
}

/* Turns the 16-bit tensors of ts[0:n] into f32 views placed one after another from base on
 * (NULL: shapes only, for sizing the kernel's own workspace). */
static void place_f32_views(struct tr_tensor *ts, int n, char *base)
{
    for (int i = 0; i < n; i++) {
        if (!tr_dtype_is_16bit(ts[i].dtype))
            continue;
        size_t bytes = copy_bytes(&ts[i]);
        ts[i].dtype = TR_F32;
        ts[i].data = base;
        base = base ? base + bytes : NULL;
    }
}

/* ---- streamed: pointwise ops widened a chunk at a time ------------------------------------------ *
 * An op whose every output element depends on the same element of its inputs (or, BIAS_ADD, on
 * its row and a whole bias) need not widen whole tensors: each thread widens a chunk of its
 * 16-bit tensors into a slot of the workspace that stays in cache, runs the f32 kernel on the
 * chunk (one thread: the kernel's own region is nested, so inactive) and narrows the chunk's
 * output back. One pass over memory instead of three, and a workspace of a few chunks. Each
 * element is computed by the same f32 code as before; the chunks are fixed by the shape, so the
 * bits do not depend on the threads. */
enum streamed { WHOLE, POINTWISE, ROWS };   /* ROWS: in[0] and out[0] by whole rows, in[1] whole */
static const enum streamed streamed_ops[TR_NOPS] = {
    [TR_OP_ADD] = POINTWISE, [TR_OP_MUL] = POINTWISE, [TR_OP_SCALE] = POINTWISE, [TR_OP_RELU] = POINTWISE,
    [TR_OP_GELU] = POINTWISE, [TR_OP_TANH] = POINTWISE, [TR_OP_RELU_BWD] = POINTWISE,
    [TR_OP_GELU_BWD] = POINTWISE, [TR_OP_TANH_BWD] = POINTWISE, [TR_OP_ACCUMULATE] = POINTWISE,
    [TR_OP_BIAS_ADD] = ROWS,
};
#define STREAM_CHUNK 16384   /* elements of each tensor a thread holds at once: 64 KiB in f32 */

/* How the node streams (WHOLE: it does not): every tensor of one size, or BIAS_ADD's rows by an
 * f32 bias. */
static enum streamed stream_kind(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    enum streamed k = streamed_ops[node->op];
    if (k == WHOLE || node->nout != 1 || out[0].rank < 1 || (k == ROWS && tr_dtype_is_16bit(in[1].dtype)))
        return WHOLE;
    int64_t n = tr_tensor_numel(&out[0]);
    for (int i = 0; i < node->nin; i++)
        if (!(k == ROWS && i == 1) && tr_tensor_numel(&in[i]) != n)
            return WHOLE;
    return n > 0 ? k : WHOLE;
}

/* Elements of a chunk of n: whole rows of `unit` values, about STREAM_CHUNK, n at most. */
static int64_t stream_chunk(int64_t n, int64_t unit)
{
    int64_t c = unit >= STREAM_CHUNK ? unit : STREAM_CHUNK / unit * unit;
    return c < n ? c : n;
}

/* Threads that take chunks: one per chunk at most. */
static int stream_slots(int64_t n, int64_t chunk)
{
    int64_t t = omp_get_max_threads(), chunks = (n + chunk - 1) / chunk;
    return (int)(chunks < t ? chunks : t > 1 ? t : 1);
}

/* One f32 chunk's buffer: whole cache lines. */
static size_t stream_buffer_bytes(int64_t chunk)
{
    return ((size_t)chunk * sizeof(float) + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

/* One slot's bytes: an f32 chunk for each 16-bit tensor that is cut into chunks. */
static size_t stream_slot_bytes(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                                enum streamed k, int64_t chunk)
{
    size_t bytes = 0, one = stream_buffer_bytes(chunk);
    for (int i = 0; i < node->nin; i++)
        bytes += tr_dtype_is_16bit(in[i].dtype) && !(k == ROWS && i == 1) ? one : 0;
    return bytes + (tr_dtype_is_16bit(out[0].dtype) ? one : 0);
}

/* A chunk's view of tensor t: elements [at, at + len), rank 1, or rows of `unit` (ROWS). */
static struct tr_tensor chunk_view(const struct tr_tensor *t, int64_t at, int64_t len, int64_t unit, enum streamed k)
{
    struct tr_tensor v = *t;
    v.data = (char *)t->data + (size_t)at * tr_dtype_size(t->dtype);
    if (k == ROWS)
        v.rank = 2, v.dim[0] = len / unit, v.dim[1] = unit;
    else
        v.rank = 1, v.dim[0] = len;
    return v;
}

static int run_streamed(tr_kernel_fn kernel, const struct tr_kernel_args *a, enum streamed k)
{
    int64_t n = tr_tensor_numel(&a->out[0]);
    int64_t unit = k == ROWS ? a->out[0].dim[a->out[0].rank - 1] : 1, chunk = stream_chunk(n, unit);
    int slots = stream_slots(n, chunk);
    size_t slot = stream_slot_bytes(a->node, a->in, a->out, k, chunk), have = a->workspace ? a->workspace_bytes : 0;
    if (have < (size_t)slots * slot)
        return tr_cpu_fail(a, "%s: needs %zu bytes of workspace for its 16-bit tensors, has %zu",
                           tr_op_name(a->node->op), (size_t)slots * slot, have);
    int64_t chunks = (n + chunk - 1) / chunk;
    int failed = 0;
    bool read_out = output_is_read(a->node, 0);
#pragma omp parallel for schedule(static) num_threads(slots) reduction(| : failed) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t at = c * chunk, len = n - at < chunk ? n - at : chunk;
        char *buf = (char *)a->workspace + (size_t)omp_get_thread_num() * slot;
        size_t one = stream_buffer_bytes(chunk);
        struct tr_kernel_args v = *a;
        v.workspace = NULL, v.workspace_bytes = 0;
        for (int i = 0; i < a->nin; i++) {
            if (k == ROWS && i == 1)
                continue;   /* the bias, whole (f32: BIAS_ADD's bias stays f32 under amp) */
            v.in[i] = chunk_view(&a->in[i], at, len, unit, k);
            if (tr_dtype_is_16bit(a->in[i].dtype)) {
                tr_cpu_widen_run(v.in[i].data, a->in[i].dtype, (float *)buf, len);
                v.in[i].data = buf, v.in[i].dtype = TR_F32, buf += one;
            }
        }
        v.out[0] = chunk_view(&a->out[0], at, len, unit, k);
        if (tr_dtype_is_16bit(a->out[0].dtype)) {
            if (read_out)
                tr_cpu_widen_run(v.out[0].data, a->out[0].dtype, (float *)buf, len);
            v.out[0].data = buf, v.out[0].dtype = TR_F32;
        }
        failed |= kernel(&v) != 0;
        if (!failed && tr_dtype_is_16bit(a->out[0].dtype))
            tr_cpu_narrow_run((const float *)buf, (char *)a->out[0].data + (size_t)at * 2, a->out[0].dtype, len);
    }
    return failed ? tr_cpu_fail(a, "%s: a chunk failed", tr_op_name(a->node->op)) : 0;
}

size_t tr_cpu_widened_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                const struct tr_tensor *out, tr_cpu_workspace_fn kernel_workspace)
{
    if (!needs_widening(node, in, node->nin, out, node->nout))
        return kernel_workspace(node, in, out);
    enum streamed k = stream_kind(node, in, out);
    if (k != WHOLE) {
        int64_t n = tr_tensor_numel(&out[0]), unit = k == ROWS ? out[0].dim[out[0].rank - 1] : 1;
        int64_t chunk = stream_chunk(n, unit);
        return (size_t)stream_slots(n, chunk) * stream_slot_bytes(node, in, out, k, chunk);
    }
    struct tr_tensor in32[TR_MAX_IN] = {{0}}, out32[TR_MAX_OUT] = {{0}};
    memcpy(in32, in, (size_t)node->nin * sizeof *in);
    memcpy(out32, out, (size_t)node->nout * sizeof *out);
    place_f32_views(in32, node->nin, NULL);
    place_f32_views(out32, node->nout, NULL);
    return copies_bytes(in, node->nin) + copies_bytes(out, node->nout) + kernel_workspace(node, in32, out32);
}

/* f64 (the gradient tests' type) has no business beside 16-bit data: widening would hand the
 * f64 kernel f32 copies, or the f32 kernel f64 data. */
static int refuse_f64(const struct tr_kernel_args *a)
{
    enum tr_dtype half = TR_NDTYPES;
    bool f64 = false;
    for (int i = 0; i < a->nin + a->nout; i++) {
        enum tr_dtype t = i < a->nin ? a->in[i].dtype : a->out[i - a->nin].dtype;
        f64 |= t == TR_F64;
        if (tr_dtype_is_16bit(t))
            half = t;
    }
    if (!f64)
        return 0;
    return tr_cpu_fail(a, "%s: f64 and %s tensors cannot be mixed (16-bit data computes in f32)",
                       tr_op_name(a->node->op), tr_dtype_name(half));
}

int tr_cpu_run_widened(tr_kernel_fn kernel, const struct tr_kernel_args *a)
{
    if (!needs_widening(a->node, a->in, a->nin, a->out, a->nout))
        return kernel(a);
    int rc = refuse_f64(a);
    if (rc)
        return rc;
    enum streamed k = stream_kind(a->node, a->in, a->out);
    if (k != WHOLE)
        return run_streamed(kernel, a, k);
    size_t scratch = copies_bytes(a->in, a->nin) + copies_bytes(a->out, a->nout);
    size_t have = a->workspace ? a->workspace_bytes : 0;
    if (have < scratch)
        return tr_cpu_fail(a, "%s: needs %zu bytes of workspace for its 16-bit tensors, has %zu",
                           tr_op_name(a->node->op), scratch, have);
    struct tr_kernel_args wide = *a;   /* the same node on f32 views: the kernel's workspace follows them */
    char *base = a->workspace;
    place_f32_views(wide.in, a->nin, base);
    place_f32_views(wide.out, a->nout, base ? base + copies_bytes(a->in, a->nin) : NULL);
    wide.workspace = base ? base + scratch : NULL;
    wide.workspace_bytes = have - scratch;
    for (int i = 0; i < a->nin; i++)
        if (tr_dtype_is_16bit(a->in[i].dtype))
            widen_tensor(&a->in[i], wide.in[i].data);
    for (int i = 0; i < a->nout; i++)
        if (tr_dtype_is_16bit(a->out[i].dtype) && output_is_read(a->node, i))
            widen_tensor(&a->out[i], wide.out[i].data);
    rc = kernel(&wide);
    if (rc)
        return rc;
    for (int i = 0; i < a->nout; i++)
        if (tr_dtype_is_16bit(a->out[i].dtype))
            narrow_tensor(wide.out[i].data, &a->out[i]);
    for (int i = 0; i < a->nin; i++)
        if (tr_dtype_is_16bit(a->in[i].dtype) && input_is_written(a->node, i))
            narrow_tensor(wide.in[i].data, &a->in[i]);
    return 0;
}
