/* SOFTMAX, LOG_SOFTMAX and CROSS_ENTROPY on the CPU, forward and backward, over the last dim:
 * every row is reduced serially (max, then Σ exp(x − max)), rows run in parallel. The body is
 * softmax.inc, built for f32 and f64. */
#include <math.h>

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

#define TR_KERNEL_BODY "backend/cpu/softmax.inc"
#include "backend/cpu/instantiate.h"

TR_CPU_DISPATCH(softmax)
TR_CPU_DISPATCH(log_softmax)
TR_CPU_DISPATCH(softmax_bwd)
TR_CPU_DISPATCH(log_softmax_bwd)
TR_CPU_DISPATCH(cross_entropy)

/* Picks by the logits (in[1]), not by dloss (in[0]): the loss is f32 even for 16-bit logits,
 * so in[0] would hand bf16 logits to the f32 kernel. */
int tr_cpu_cross_entropy_bwd(const struct tr_kernel_args *a)
{
    switch (a->in[1].dtype) {
    case TR_F32: return cross_entropy_bwd_f32(a);
    case TR_F64: return cross_entropy_bwd_f64(a);
    default:
        return tr_cpu_fail(a, "cross_entropy_bwd: %s logits are not supported on the CPU",
                           tr_dtype_name(a->in[1].dtype));
    }
}
