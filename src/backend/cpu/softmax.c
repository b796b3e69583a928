/* SOFTMAX, LOG_SOFTMAX, CROSS_ENTROPY and LINEAR_CROSS_ENTROPY (a classifier and the loss in
 * one) on the CPU, forward and backward, over the last dim: every row is reduced serially
 * (max, then Σ exp(x − max)), rows run in parallel. The body is softmax.inc, built for f32 and
 * f64; LINEAR_CROSS_ENTROPY on bf16 x and w runs its GEMMs on oneDNN's bf16 kernels where the
 * CPU has them (the end of this file). */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/onednn.h"

/* Row losses are summed in this many fixed chunks, whatever the thread count, so the mean is
 * taken in the same order on 1 thread or 64 (backend.h: results independent of threads). */
#define CE_CHUNKS 64

/* Counts the rows that take part in the loss; a target outside [0, C) other than ignore_index
 * is an error, found before any output is written. */
static int count_targets(const struct tr_kernel_args *a, const int32_t *targets, int64_t rows,
                         int64_t classes, int32_t ignore, int64_t *count)
{
    *count = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (targets[r] == ignore)
            continue;
        if (targets[r] < 0 || targets[r] >= classes)
            return tr_cpu_fail(a, "%s: target %d at row %lld is outside the %lld classes",
                               tr_op_name(a->node->op), targets[r], (long long)r, (long long)classes);
        (*count)++;
    }
    return 0;
}

/* LINEAR_CROSS_ENTROPY holds the logits of this many rows at a time: about LCE_CHUNK_BYTES
 * of scratch (GPT-2's 50,257 classes: 166 rows, 32 MiB, where all of a 16 × 1024 batch's
 * logits take 3.1 GiB), or attrs.cross_entropy.chunk rows when set (the tests). A function of
 * the shapes only, so the bits never depend on the thread count. */
#define LCE_CHUNK_BYTES ((int64_t)32 << 20)
/* Its GEMM tiles: the logits [rows, V] and dw [V, D] in matmul's tiles; dx [rows, D], a small
 * output with a long inner dimension V, in tiles of LCE_TILE_DX_M × LCE_TILE_DX_N on OpenBLAS
 * (each tile packs its rows of g and its columns of w over all of V: at 64 × 64, GPT-2's 166-row
 * chunk made 12 tiles that packed 307 MB between them and ran at 66 GFLOP/s on 2 Zen 3 threads;
 * 192 × 128 makes 2 (hidden 256) and runs at 113, bench/README.md), in LCE_TILE_DX on oneDNN's
 * bf16 path (as measured on AVX-512 BF16). */
#define LCE_TILE_M 256
#define LCE_TILE_N 512
#define LCE_TILE_DX_M 192
#define LCE_TILE_DX_N 128
#define LCE_TILE_DX 64
#define LCE_LANES 16

static int64_t lce_rows(const struct tr_node *node, int64_t rows, int64_t classes, size_t elem)
{
    int64_t r = node->attrs.cross_entropy.chunk;
    if (r <= 0)
        r = LCE_CHUNK_BYTES / (classes * (int64_t)elem);
    r = r < rows ? r : rows;
    return r > 0 ? r : 1;
}

size_t tr_cpu_linear_cross_entropy_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                             const struct tr_tensor *out)
{
    (void)out;
    const struct tr_tensor *x = &in[node->op == TR_OP_LINEAR_CROSS_ENTROPY ? 0 : 1], *w = x + 1;
    int64_t rows = tr_cpu_rows(x), classes = w->dim[0];
    size_t elem = tr_dtype_size(x->dtype);
    return rows && classes ? (size_t)(lce_rows(node, rows, classes, elem) * classes) * elem : 0;
}

#define TR_KERNEL_BODY "backend/cpu/softmax.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_softmax(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, softmax); }
int tr_cpu_log_softmax(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, log_softmax); }
int tr_cpu_softmax_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, softmax_bwd); }
int tr_cpu_log_softmax_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, log_softmax_bwd); }
int tr_cpu_cross_entropy(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, cross_entropy); }
int tr_cpu_linear_cross_entropy(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, linear_cross_entropy); }

/* Picks by the logits (in[1]), not by dloss (in[0]): the loss is f32 even for 16-bit logits,
 * so in[0] would hand bf16 logits to the f32 kernel. */
int tr_cpu_cross_entropy_bwd(const struct tr_kernel_args *a)
{
    switch (a->in[1].dtype) {
    case TR_F32: return cross_entropy_bwd_f32(a);
    case TR_F64: return cross_entropy_bwd_f64(a);
    case TR_BF16: case TR_F16: case TR_I32: case TR_U8: case TR_NDTYPES:
    default:
        return tr_cpu_fail(a, "cross_entropy_bwd: %s logits are not supported on the CPU",
                           tr_dtype_name(a->in[1].dtype));
    }
}

/* By x (in[1]): dloss is f32 whatever x is, as above. */
int tr_cpu_linear_cross_entropy_bwd(const struct tr_kernel_args *a)
{
    switch (a->in[1].dtype) {
    case TR_F32: return linear_cross_entropy_bwd_f32(a);
    case TR_F64: return linear_cross_entropy_bwd_f64(a);
    case TR_BF16: case TR_F16: case TR_I32: case TR_U8: case TR_NDTYPES:
    default:
        return tr_cpu_fail(a, "linear_cross_entropy_bwd: %s inputs are not supported on the CPU",
                           tr_dtype_name(a->in[1].dtype));
    }
}

/* ---- LINEAR_CROSS_ENTROPY on oneDNN's bf16 GEMMs -------------------------------------------------
 * x bf16 (amp's last hidden states) and w bf16 or f32 (GPT's tied embedding stays f32: then a
 * bf16 copy of it is made in the workspace each call, 2·V·D bytes, as amp's working copies
 * are), where the CPU computes bf16 (onednn.h): the f32 body's chunks and row functions, with its three GEMMs in
 * bf16 with f32 accumulation — the logits [rows, V] in f32, the backward's g = ∂loss/∂logits
 * rounded to bf16 for dx = g·w and dw (+)= gᵀ·x (as PyTorch's autocast does it). The chunks and
 * tiles are fixed by the shapes, so the bits do not depend on the threads; they differ from the
 * widened path's, which stays where this one cannot run (no oneDNN instance, shapes prepare did
 * not see, other dtypes). The primitives are made at prepare, never here. */

struct lce16 {
    int64_t N, D, V, R;
    int bwd, w_copy;   /* w_copy: w is f32, read through a bf16 copy */
};

/* The node's shapes when this path takes its dtypes; false when it does not. */
static bool lce16_of(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                     struct lce16 *l)
{
    int bwd = node->op == TR_OP_LINEAR_CROSS_ENTROPY_BWD;
    if (node->op != TR_OP_LINEAR_CROSS_ENTROPY && !bwd)
        return false;
    const struct tr_tensor *x = &in[bwd], *w = x + 1;
    if (x->dtype != TR_BF16 || (w->dtype != TR_BF16 && w->dtype != TR_F32) || x->rank < 1 || w->rank != 2)
        return false;
    if (bwd && (in[0].dtype != TR_F32 || in[4].dtype != TR_F32 || (out[0].dtype != TR_BF16 && out[0].dtype != TR_F32) ||
                (out[1].dtype != TR_BF16 && out[1].dtype != TR_F32)))
        return false;
    if (!bwd && (out[0].dtype != TR_F32 || out[1].dtype != TR_F32))
        return false;
    *l = (struct lce16){tr_cpu_rows(x), tr_cpu_cols(x), w->dim[0], 0, bwd, w->dtype == TR_F32};
    if (l->N <= 0 || l->D <= 0 || l->V <= 0)
        return false;
    l->R = lce_rows(node, l->N, l->V, sizeof(float));
    return true;
}

/* The GEMMs of a chunk of `rows`: logits = x·wᵀ, dx (+)= g·w, dw (+)= gᵀ·x. */
static struct tr_onednn_gemm lce16_logits(const struct lce16 *l, int64_t rows)
{
    return (struct tr_onednn_gemm){0, 1, 0, rows, l->V, l->D, LCE_TILE_M, LCE_TILE_N, TR_BF16, TR_BF16, TR_F32};
}

static struct tr_onednn_gemm lce16_dx(const struct lce16 *l, int64_t rows, int acc, enum tr_dtype t)
{
    return (struct tr_onednn_gemm){0, 0, acc, rows, l->D, l->V, LCE_TILE_DX, LCE_TILE_DX, TR_BF16, TR_BF16, t};
}

static struct tr_onednn_gemm lce16_dw(const struct lce16 *l, int64_t rows, int acc, enum tr_dtype t)
{
    return (struct tr_onednn_gemm){1, 0, acc, l->V, l->D, rows, LCE_TILE_M, LCE_TILE_N, TR_BF16, TR_BF16, t};
}

/* Every GEMM the node runs, into g (at most 8: two chunk sizes, four GEMMs each); their count. */
static int lce16_gemms(const struct tr_node *node, const struct tr_tensor *out, const struct lce16 *l,
                       struct tr_onednn_gemm *g)
{
    int n = 0, acc = node->accumulate, add_dw = acc || node->attrs.cross_entropy.add_dw;
    int64_t sizes[2] = {l->R, l->N % l->R};
    for (int k = 0; k < 2; k++) {
        if (sizes[k] == 0 || (k == 1 && l->N < l->R))
            continue;
        g[n++] = lce16_logits(l, sizes[k]);
        if (!l->bwd)
            continue;
        g[n++] = lce16_dx(l, sizes[k], acc, out[0].dtype);
        g[n++] = lce16_dw(l, sizes[k], 1, out[1].dtype);
        if (!add_dw)
            g[n++] = lce16_dw(l, sizes[k], 0, out[1].dtype);
    }
    return n;
}

/* Workspace: the chunk's f32 logits, its bf16 g (backward), w's bf16 copy (w f32), then the
 * GEMMs' scratchpads. */
static size_t lines(size_t bytes) { return (bytes + 63) / 64 * 64; }

static size_t lce16_logits_bytes(const struct lce16 *l) { return lines((size_t)(l->R * l->V) * sizeof(float)); }
static size_t lce16_g16_bytes(const struct lce16 *l) { return l->bwd ? lines((size_t)(l->R * l->V) * 2) : 0; }

static size_t lce16_own(const struct lce16 *l)
{
    return lce16_logits_bytes(l) + lce16_g16_bytes(l) + (l->w_copy ? lines((size_t)(l->V * l->D) * 2) : 0);
}

/* w as bf16: the input, or its copy rounded into the workspace. */
static const uint16_t *lce16_w(const struct tr_kernel_args *a, const struct lce16 *l)
{
    const struct tr_tensor *w = &a->in[1 + l->bwd];
    if (!l->w_copy)
        return w->data;
    uint16_t *copy = (uint16_t *)((char *)a->workspace + lce16_logits_bytes(l) + lce16_g16_bytes(l));
    int64_t n = l->V * l->D, step = 16384;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += step)
        tr_cpu_narrow_run((const float *)w->data + i, copy + i, TR_BF16, n - i < step ? n - i : step);
    return copy;
}

size_t tr_cpu_lce_onednn_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct lce16 l;
    struct tr_onednn_gemm g[8];
    if (!lce16_of(node, in, out, &l))
        return 0;
    int n = lce16_gemms(node, out, &l, g);
    size_t scratch = 0;
    for (int i = 0; i < n; i++) {
        if (!tr_onednn_gemm_available(&g[i]))
            return 0;
        size_t b = tr_onednn_gemm_workspace(&g[i]);
        scratch = b > scratch ? b : scratch;
    }
    return lce16_own(&l) + scratch;
}

int tr_cpu_lce_onednn_prepare(struct tr_onednn *o, const struct tr_node *node, const struct tr_tensor *in,
                              const struct tr_tensor *out)
{
    struct lce16 l;
    struct tr_onednn_gemm g[8];
    if (!o || !lce16_of(node, in, out, &l))
        return 0;
    int n = lce16_gemms(node, out, &l, g);
    for (int i = 0; i < n; i++)
        if (tr_onednn_gemm_prepare(o, &g[i]))
            return 0;   /* oneDNN cannot: the widened path, as before */
    return 0;
}

/* The GEMMs' workspace after the chunk buffers. */
static int lce16_gemm(struct tr_onednn *o, const struct tr_kernel_args *a, const struct lce16 *l,
                      const struct tr_onednn_gemm *g, const void *A, const void *B, void *C)
{
    size_t own = lce16_own(l);
    return tr_onednn_gemm_run(o, g, A, B, C, (char *)a->workspace + own, a->workspace_bytes - own);
}

static int lce16_forward(struct tr_onednn *o, const struct tr_kernel_args *a, const struct lce16 *l)
{
    const uint16_t *x = a->in[0].data, *w = lce16_w(a, l);
    const int32_t *t = a->in[2].data;
    float *lse = a->out[1].data, *lg = a->workspace;
    int32_t *rank = a->out[2].data, ignore = a->node->attrs.cross_entropy.ignore_index;
    int64_t count;
    int rc = count_targets(a, t, l->N, l->V, ignore, &count);
    double total = 0;
    for (int64_t r0 = 0; !rc && r0 < l->N; r0 += l->R) {
        int64_t rows = l->N - r0 < l->R ? l->N - r0 : l->R;
        struct tr_onednn_gemm g = lce16_logits(l, rows);
        if (lce16_gemm(o, a, l, &g, x + r0 * l->D, w, lg))
            return tr_cpu_fail(a, "linear_cross_entropy: a oneDNN matmul failed");
        total += lce_chunk_loss_f32(lg, r0, rows, l->V, t, ignore, lse, rank);
    }
    if (!rc)
        ((float *)a->out[0].data)[0] = count ? (float)(total / (double)count) : 0;
    return rc;
}

static int lce16_backward(struct tr_onednn *o, const struct tr_kernel_args *a, const struct lce16 *l)
{
    const float *dloss = a->in[0].data, *lse = a->in[4].data;
    const uint16_t *x = a->in[1].data, *w = lce16_w(a, l);
    const int32_t *t = a->in[3].data;
    int32_t ignore = a->node->attrs.cross_entropy.ignore_index;
    int acc = a->node->accumulate, add_dw = acc || a->node->attrs.cross_entropy.add_dw;
    size_t dx_size = tr_dtype_size(a->out[0].dtype);
    int64_t count;
    int rc = count_targets(a, t, l->N, l->V, ignore, &count);
    if (rc)
        return rc;
    float scale = count ? dloss[0] / (float)count : 0, *g = a->workspace;
    uint16_t *g16 = (uint16_t *)((char *)a->workspace + lce16_logits_bytes(l));
    for (int64_t r0 = 0; r0 < l->N; r0 += l->R) {
        int64_t rows = l->N - r0 < l->R ? l->N - r0 : l->R;
        struct tr_onednn_gemm lg = lce16_logits(l, rows), dx = lce16_dx(l, rows, acc, a->out[0].dtype),
                              dw = lce16_dw(l, rows, add_dw || r0 ? 1 : 0, a->out[1].dtype);
        if (lce16_gemm(o, a, l, &lg, x + r0 * l->D, w, g))
            return tr_cpu_fail(a, "linear_cross_entropy_bwd: a oneDNN matmul failed");
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < rows; i++) {   /* each row rounded to bf16 while in cache */
            lce_row_grad_f32(g + i * l->V, l->V, t[r0 + i], ignore, lse[r0 + i], scale);
            tr_cpu_narrow_run(g + i * l->V, g16 + i * l->V, TR_BF16, l->V);
        }
        if (lce16_gemm(o, a, l, &dx, g16, w, (char *)a->out[0].data + (size_t)(r0 * l->D) * dx_size) ||
            lce16_gemm(o, a, l, &dw, g16, x + r0 * l->D, a->out[1].data))
            return tr_cpu_fail(a, "linear_cross_entropy_bwd: a oneDNN matmul failed");
    }
    return 0;
}

int tr_cpu_lce_onednn(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran)
{
    struct lce16 l;
    struct tr_onednn_gemm g[8];
    *ran = false;
    if (!o || !lce16_of(a->node, a->in, a->out, &l) || !a->workspace ||
        a->workspace_bytes < tr_cpu_lce_onednn_workspace(a->node, a->in, a->out))
        return 0;
    int n = lce16_gemms(a->node, a->out, &l, g);
    for (int i = 0; i < n; i++)   /* every primitive there before anything is written */
        if (!tr_onednn_gemm_ready(o, &g[i]))
            return 0;
    *ran = true;
    return l.bwd ? lce16_backward(o, a, &l) : lce16_forward(o, a, &l);
}
