/* Pooling on the CPU (DESIGN.md §3): max and average windows, global average, and their
 * backwards. Threads split the (n, c) planes; a backward scatters only within its own plane,
 * in one fixed order, so overlapping windows add up the same on any thread count. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

/* x seen as planes [N·C, H, W], y as [N·C, Ho, Wo]; square windows. */
struct pool_geom {
    int64_t planes, H, W, Ho, Wo;
    int64_t kernel, stride, pad;
};

static struct pool_geom pool_geom_of(const struct tr_node *node, const struct tr_tensor *x,
                                     const struct tr_tensor *y)
{
    return (struct pool_geom){x->dim[0] * x->dim[1], x->dim[2], x->dim[3], y->dim[2], y->dim[3],
                              node->attrs.pool.kernel, node->attrs.pool.stride,
                              node->attrs.pool.pad};
}

/* The input rows (or columns) [lo, hi) that window o covers, clipped to the real ones. */
static void pool_span(const struct pool_geom *g, int64_t o, int64_t size, int64_t *lo, int64_t *hi)
{
    int64_t start = o * g->stride - g->pad;
    *lo = start > 0 ? start : 0;
    *hi = start + g->kernel < size ? start + g->kernel : size;
}

#define TR_KERNEL_BODY "backend/cpu/pool.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_maxpool(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, maxpool); }
int tr_cpu_maxpool_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, maxpool_bwd); }
int tr_cpu_avgpool(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, avgpool); }
int tr_cpu_avgpool_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, avgpool_bwd); }
int tr_cpu_global_avgpool(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, global_avgpool); }
int tr_cpu_global_avgpool_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, global_avgpool_bwd); }
