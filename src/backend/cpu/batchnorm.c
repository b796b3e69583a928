/* BATCHNORM and its backward on the CPU (DESIGN.md §3): per-channel statistics over (N, H, W).
 * Threads split the channels and each channel's sums run in one fixed order, so any thread
 * count gives the same bits; channels last (and x [N, C]), threads split fixed runs of rows
 * instead (batchnorm.inc). Sums are kept in double: a channel of a batch of 224² images
 * holds millions of values, and an f32 running sum would keep only about 3 correct digits. */
#include <math.h>

#include "backend/cpu/cpu.h"


/* Every tensor shares x's type, or, beside bf16 activations (x, y, dy, dx), the per-channel
 * tensors are f32 (amp's; batchnorm.inc's bf16 body, which TR_CPU_BY_DTYPE16 reaches only with
 * the dtypes widen.c's table gives it). One of another type would be misread. */
static int bn_check_dtypes(const struct tr_kernel_args *a)
{
    enum tr_dtype t = a->in[0].dtype;
    if (t == TR_BF16)
        return 0;   /* checked by the dispatch */
    for (int i = 1; i < a->nin; i++)
        if (a->in[i].dtype != t)
            return tr_cpu_fail(a, "%s: input %d is %s but x is %s", tr_op_name(a->node->op), i,
                               tr_dtype_name(a->in[i].dtype), tr_dtype_name(t));
    for (int i = 0; i < a->nout; i++)
        if (a->out[i].dtype != t)
            return tr_cpu_fail(a, "%s: output %d is %s but x is %s", tr_op_name(a->node->op), i,
                               tr_dtype_name(a->out[i].dtype), tr_dtype_name(t));
    return 0;
}

/* Training needs two values per channel: the unbiased variance divides by m − 1 (PyTorch
 * refuses the same batch). With a symbolic batch size this shows only at run time. */
static int bn_check(const struct tr_kernel_args *a, const struct tr_bn_geom *g)
{
    if (a->node->attrs.batchnorm.training && g->N * g->S < 2)
        return tr_cpu_fail(a, "batchnorm: training needs more than one value per channel, "
                              "got a batch of %lld×%lld", (long long)g->N, (long long)g->S);
    return bn_check_dtypes(a);
}

/* Runs of rows the sums over x [M, C] (bn_geom's S = 1) are cut into: at most 32, at least 64
 * rows each, by M alone. */
static int64_t tr_bn_row_chunks(int64_t M)
{
    int64_t chunks = M / 64;
    return chunks < 1 ? 1 : chunks > 32 ? 32 : chunks;
}

/* Their double partials (two sums each) and p, q, r per channel, in doubles for any REAL. */
static size_t tr_bn_rows_workspace(const struct tr_bn_geom *g)
{
    return g->S == 1 ? (size_t)(2 * tr_bn_row_chunks(g->N) + 3) * (size_t)g->C * sizeof(double) : 0;
}

size_t tr_cpu_batchnorm_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    (void)out;
    struct tr_bn_geom g = tr_bn_geom_of(node, &in[node->op == TR_OP_BATCHNORM ? 0 : 1]);
    return tr_bn_rows_workspace(&g);
}

/* bf16 activations as stored too (instantiate.h), beside f32 per-channel tensors (amp's), so no
 * f32 copy of x or dy is made: widen.c sends such nodes here as they are. */
#define TR_KERNEL_BODY "backend/cpu/batchnorm.inc"
#define TR_KERNEL_BF16
#include "backend/cpu/instantiate.h"

int tr_cpu_batchnorm(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, batchnorm); }
int tr_cpu_batchnorm_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, batchnorm_bwd); }
