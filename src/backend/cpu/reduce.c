/* SUM, MEAN, their backward SUM_BWD and ARGMAX on the CPU. Reductions over one axis give each
 * output to one thread, which sums in index order; the reduction over everything runs in fixed
 * chunks, so the result never depends on the thread count. The body is reduce.inc. */
#include "backend/cpu/cpu.h"

/* Partial sums of the all-elements reduction: fixed, not one per thread (see above). */
#define SUM_CHUNKS 64

/* The tensor seen as [outer, n, inner] around axis. */
static void split_at_axis(const struct tr_tensor *t, int axis, int64_t *outer, int64_t *n,
                          int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= t->dim[i];
    for (int i = axis + 1; i < t->rank; i++)
        *inner *= t->dim[i];
    *n = t->dim[axis];
}

#define TR_KERNEL_BODY "backend/cpu/reduce.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_sum(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, sum); }
int tr_cpu_mean(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, mean); }
int tr_cpu_sum_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, sum_bwd); }
int tr_cpu_argmax(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, argmax); }
