/* SOFTMAX, LOG_SOFTMAX, CROSS_ENTROPY and LINEAR_CROSS_ENTROPY (a classifier and the loss in
 * one) on the CPU, forward and backward, over the last dim: every row is reduced serially
 * (max, then Σ exp(x − max)), rows run in parallel. The body is softmax.inc, built for f32 and
 * f64. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

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
 * output with a long inner dimension V, in small ones so every thread gets some. */
#define LCE_TILE_M 256
#define LCE_TILE_N 512
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
