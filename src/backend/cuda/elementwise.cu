/* Elementwise kernels on the GPU: arithmetic, activations and their derivatives, CAST among
 * f32/bf16/f16, DROPOUT with the CPU's counter-based mask, and the bias pair. Each element is
 * loaded as f32 whatever its storage, computed on in f32 and stored rounded to nearest even:
 * the CPU's widen-compute-round, without the copies. */
#include "backend/cuda/internal.h"

extern "C" {
#include "core/rng.h"
}

/* ---- pointwise math: y = f(a, b), forward and backward side by side -------------------------- */

enum pointwise {
    PW_ADD, PW_MUL, PW_SCALE, PW_RELU, PW_RELU_BWD, PW_TANH, PW_TANH_BWD,
    PW_GELU, PW_GELU_TANH, PW_GELU_BWD, PW_GELU_TANH_BWD, PW_COPY
};

#define GELU_C 0.7978845608028654f       /* √(2/π) */
#define GELU_K 0.044715f
#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT2PI 0.3989422804014327f

/* GELU, exact: y = ½x(1 + erf(x/√2)); dy/dx = Φ(x) + x·φ(x).
 * Tanh form: y = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³);
 * dy/dx = ½(1 + tanh u) + ½x(1 − tanh²u)·√(2/π)(1 + 3·0.044715x²). (elementwise.inc's math.) */
template <int OP>
__device__ __forceinline__ float pointwise(float a, float b, float alpha)
{
    switch (OP) {
    case PW_ADD: return a + b;
    case PW_MUL: return a * b;
    case PW_SCALE: return alpha * a;
    case PW_RELU: return a > 0 ? a : 0;
    case PW_RELU_BWD: return b > 0 ? a : 0;                 /* a = dy, b = y */
    case PW_TANH: return tanhf(a);
    case PW_TANH_BWD: return a * (1 - b * b);               /* a = dy, b = y */
    case PW_GELU: return 0.5f * a * (1 + erff(a * INV_SQRT2));
    case PW_GELU_TANH: return 0.5f * a * (1 + tanhf(GELU_C * (a + GELU_K * a * a * a)));
    case PW_GELU_BWD:                                      /* a = dy, b = x */
        return a * (0.5f * (1 + erff(b * INV_SQRT2)) + b * INV_SQRT2PI * expf(-0.5f * b * b));
    case PW_GELU_TANH_BWD: {
        float t = tanhf(GELU_C * (b + GELU_K * b * b * b));
        return a * (0.5f * (1 + t) + 0.5f * b * (1 - t * t) * GELU_C * (1 + 3 * GELU_K * b * b));
    }
    default: return a;                                     /* PW_COPY: cast, dropout at p = 0 */
    }
}

struct pointwise_args {
    const void *a, *b;
    void *y;
    int ta, tb, ty, acc;
    int64_t n;
    float alpha;
};

template <int OP>
__global__ void pointwise_kernel(struct pointwise_args p)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n; i += (int64_t)gridDim.x * blockDim.x) {
        float a = cuda_load(p.a, p.ta, i), b = p.b ? cuda_load(p.b, p.tb, i) : 0;
        cuda_put(p.y, p.ty, i, pointwise<OP>(a, b, p.alpha), p.acc);
    }
}

/* in[0] (and in[1] for the binary ops and backwards) → out[0], over out[0]'s elements. */
template <int OP>
static int run_pointwise(const struct tr_kernel_args *a, const char *what)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    struct pointwise_args p = {a->in[0].data, a->nin > 1 ? a->in[1].data : NULL, a->out[0].data,
                               (int)a->in[0].dtype, a->nin > 1 ? (int)a->in[1].dtype : 0, (int)a->out[0].dtype,
                               a->node->accumulate, tr_tensor_numel(&a->out[0]), 0};
    if (OP == PW_SCALE)
        p.alpha = a->node->attrs.scale.alpha;
    if (p.n == 0)
        return 0;
    pointwise_kernel<OP><<<cuda_blocks(p.n, 256), 256, 0, ctx->stream>>>(p);
    return cuda_launched(a, what);
}

int tr_cuda_add(const struct tr_kernel_args *a) { return run_pointwise<PW_ADD>(a, "add"); }
int tr_cuda_mul(const struct tr_kernel_args *a) { return run_pointwise<PW_MUL>(a, "mul"); }
int tr_cuda_scale(const struct tr_kernel_args *a) { return run_pointwise<PW_SCALE>(a, "scale"); }
int tr_cuda_relu(const struct tr_kernel_args *a) { return run_pointwise<PW_RELU>(a, "relu"); }
int tr_cuda_relu_bwd(const struct tr_kernel_args *a) { return run_pointwise<PW_RELU_BWD>(a, "relu_bwd"); }
int tr_cuda_tanh(const struct tr_kernel_args *a) { return run_pointwise<PW_TANH>(a, "tanh"); }
int tr_cuda_tanh_bwd(const struct tr_kernel_args *a) { return run_pointwise<PW_TANH_BWD>(a, "tanh_bwd"); }

int tr_cuda_gelu(const struct tr_kernel_args *a)
{
    return a->node->attrs.gelu.tanh_approx ? run_pointwise<PW_GELU_TANH>(a, "gelu (tanh form)")
                                           : run_pointwise<PW_GELU>(a, "gelu");
}

int tr_cuda_gelu_bwd(const struct tr_kernel_args *a)
{
    return a->node->attrs.gelu.tanh_approx ? run_pointwise<PW_GELU_TANH_BWD>(a, "gelu_bwd (tanh form)")
                                           : run_pointwise<PW_GELU_BWD>(a, "gelu_bwd");
}

void cuda_convert(cudaStream_t stream, const void *src, int ts, void *dst, int td, int64_t n, int acc)
{
    struct pointwise_args p = {src, NULL, dst, ts, 0, td, acc, n, 0};
    if (n > 0)
        pointwise_kernel<PW_COPY><<<cuda_blocks(n, 256), 256, 0, stream>>>(p);
}

/* y = x in y's dtype (f32, bf16, f16 any to any): widened exactly, rounded to nearest even —
 * bit for bit the CPU's cast_via_f32, accumulate included (old + x in f32, rounded once). The
 * integer casts (truncation, saturation) have no CUDA kernel yet. */
int tr_cuda_cast(const struct tr_kernel_args *a)
{
    enum tr_dtype from = a->in[0].dtype, to = a->out[0].dtype;
    bool ok = (from == TR_F32 || tr_dtype_is_16bit(from)) && (to == TR_F32 || tr_dtype_is_16bit(to));
    if (!ok)
        return cuda_fail(a, "%s → %s has no CUDA kernel yet (f32, bf16 and f16 only)", tr_dtype_name(from),
                         tr_dtype_name(to));
    return run_pointwise<PW_COPY>(a, "cast");
}

/* ---- dropout ----------------------------------------------------------------------------------- */

/* x seen as [rows, positions, features] (dropout.c's layout); one thread draws one Philox
 * call — rng.h's own tr_rng_uniform4, compiled for the device — for the four features 4g..4g+3
 * of one (row, position): y = keep ? x/(1 − p) : 0, keep = uniform ≥ p. The same division as
 * the CPU's (IEEE, nvcc's default -prec-div=true), so the bits match. */
struct dropout_args {
    const void *x;
    void *y;
    int tx, ty, acc;
    int64_t rows, positions, features, groups;
    const int64_t *sample_ids;   /* device (cuda_sample_ids); NULL: the row number */
    uint64_t seed, step;
    uint32_t stream;
    float p;
    int64_t first;               /* sequence parallel: this rank's part's first position (graph.h) */
};

__global__ void dropout_kernel(struct dropout_args d)
{
    int64_t total = d.rows * d.positions * d.groups;
    float keep_prob = 1 - d.p;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = t % d.groups, pos = t / d.groups % d.positions, r = t / (d.groups * d.positions);
        uint64_t sample = d.sample_ids ? (uint64_t)d.sample_ids[r] : (uint64_t)r;
        float u[4];
        tr_rng_uniform4(d.seed, d.step, sample, (uint32_t)(d.first + pos), (uint32_t)g, d.stream, u);
#pragma unroll
        for (int w = 0; w < 4; w++) {   /* unrolled: u stays in registers */
            int64_t f = 4 * g + w, i = (r * d.positions + pos) * d.features + f;
            if (f < d.features)
                cuda_put(d.y, d.ty, i, u[w] >= d.p ? cuda_load(d.x, d.tx, i) / keep_prob : 0, d.acc);
        }
    }
}

int tr_cuda_dropout(const struct tr_kernel_args *a)
{
    const struct tr_tensor *x = &a->in[0];
    float p = a->node->attrs.dropout.p;
    int64_t n = tr_tensor_numel(x);
    if (p == 0 || n == 0)
        return run_pointwise<PW_COPY>(a, "dropout (p = 0: a copy)");
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_rng_ctx none = {0, 0, NULL}, *rng = a->rng ? a->rng : &none;
    int64_t rows = x->rank ? x->dim[0] : 1;
    const int64_t *ids = cuda_sample_ids(a, ctx, rng->sample_ids, rows);
    if (rng->sample_ids && !ids)
        return TR_EINVAL;
    struct dropout_args d = {x->data, a->out[0].data, (int)x->dtype, (int)a->out[0].dtype, a->node->accumulate,
                             rows, x->rank >= 3 ? x->dim[1] : 1, 1, 0, ids,
                             rng->seed, rng->step, a->node->attrs.dropout.stream, p, 0};
    d.features = n / (d.rows * d.positions);
    d.groups = (d.features + 3) / 4;
    d.first = (int64_t)a->node->attrs.dropout.seq_rank * d.positions;
    dropout_kernel<<<cuda_blocks(d.rows * d.positions * d.groups, 256), 256, 0, ctx->stream>>>(d);
    return cuda_launched(a, "dropout");
}

/* ---- bias ---------------------------------------------------------------------------------------- */

/* y = x + bias, bias broadcast over the rows */
__global__ void bias_add_kernel(const void *x, int tx, const void *bias, int tb, void *y, int ty, int64_t n,
                                int64_t cols, int acc)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        cuda_put(y, ty, i, cuda_load(x, tx, i) + cuda_load(bias, tb, i % cols), acc);
}

int tr_cuda_bias_add(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *x = &a->in[0], *b = &a->in[1], *y = &a->out[0];
    int64_t n = tr_tensor_numel(x), cols = cuda_cols(x);
    if (n == 0)
        return 0;
    bias_add_kernel<<<cuda_blocks(n, 256), 256, 0, ctx->stream>>>(x->data, x->dtype, b->data, b->dtype, y->data,
                                                                  y->dtype, n, cols, a->node->accumulate);
    return cuda_launched(a, "bias_add");
}

/* partial[k][c] = Σ dy[r][c] over the rows r of chunk k, top to bottom: a thread a column. */
__global__ void column_partials_kernel(const void *dy, int t, int64_t rows, int64_t cols, float *partial)
{
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, k = blockIdx.y;
    if (c >= cols)
        return;
    int64_t r1 = (k + 1) * CUDA_COLUMN_CHUNK < rows ? (k + 1) * CUDA_COLUMN_CHUNK : rows;
    float s = 0;
    for (int64_t r = k * CUDA_COLUMN_CHUNK; r < r1; r++)
        s += cuda_load(dy, t, r * cols + c);
    partial[k * cols + c] = s;
}

__global__ void finish_columns_kernel(const float *partial, int64_t chunks, int64_t cols, void *out, int t, int acc)
{
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    float s = 0;
    for (int64_t k = 0; k < chunks; k++)
        s += partial[k * cols + c];
    cuda_put(out, t, c, s, acc);
}

void cuda_finish_columns(cudaStream_t stream, const float *partial, int64_t chunks, int64_t cols, void *out, int t,
                         int acc)
{
    finish_columns_kernel<<<(unsigned)((cols + 255) / 256), 256, 0, stream>>>(partial, chunks, cols, out, t, acc);
}

size_t tr_cuda_bias_grad_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    (void)node, (void)out;
    return cuda_aligned((size_t)(cuda_column_chunks(cuda_rows(&in[0])) * cuda_cols(&in[0])) * sizeof(float));
}

/* dbias = Σ_rows dy: chunks of CUDA_COLUMN_CHUNK rows summed in parallel, then the chunks in
 * order: a fixed order whatever the GPU, though not the CPU's (which sums top to bottom). */
int tr_cuda_bias_grad(const struct tr_kernel_args *a)
{
    struct cuda_context *ctx = cuda_begin(a);
    if (!ctx)
        return TR_EINVAL;
    const struct tr_tensor *dy = &a->in[0], *db = &a->out[0];
    int64_t rows = cuda_rows(dy), cols = cuda_cols(dy), chunks = cuda_column_chunks(rows);
    size_t need = tr_cuda_bias_grad_workspace(a->node, a->in, a->out);
    if (cols == 0)
        return 0;
    if (need && (!a->workspace || a->workspace_bytes < need))
        return cuda_fail(a, "needs %zu bytes of workspace, has %zu", need, a->workspace ? a->workspace_bytes : 0);
    float *partial = (float *)a->workspace;
    if (chunks > 65535)
        return cuda_fail(a, "%lld rows are more than this kernel's %d", (long long)rows, 65535 * CUDA_COLUMN_CHUNK);
    if (chunks)
        column_partials_kernel<<<dim3((unsigned)((cols + 255) / 256), (unsigned)chunks), 256, 0, ctx->stream>>>(
            dy->data, dy->dtype, rows, cols, partial);
    cuda_finish_columns(ctx->stream, partial, chunks, cols, db->data, db->dtype, a->node->accumulate);
    return cuda_launched(a, "bias_grad");
}
