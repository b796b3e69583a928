/* BATCHNORM and its backward on the CPU (DESIGN.md §3): per-channel statistics over (N, H, W).
 * Threads split the channels and each channel's sums run in one fixed order, so any thread
 * count gives the same bits. Sums are kept in double: a channel of a batch of 224² images
 * holds millions of values, and an f32 running sum would keep only about 3 correct digits. */
#include <math.h>

#include "backend/cpu/cpu.h"


/* The activations (x, y, dy, dx) share x's type; the per-channel tensors are of that type too,
 * or f32 beside bf16 activations (amp's: batchnorm.inc's bf16 body). One of another type would
 * be misread. */
static bool bn_is_activation(enum tr_op op, bool output, int i)
{
    return i == 0 || (op == TR_OP_BATCHNORM_BWD && !output && i == 1);
}

/* The dtype tensor k (an output or an input) must have beside activations of type t. */
static enum tr_dtype bn_dtype_for(enum tr_op op, bool output, int k, enum tr_dtype t)
{
    return bn_is_activation(op, output, k) || t != TR_BF16 ? t : TR_F32;
}

bool tr_cpu_bn_takes_bf16(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    for (int i = 0; i < node->nin + node->nout; i++) {
        bool output = i >= node->nin;
        int k = output ? i - node->nin : i;
        if ((output ? out[k].dtype : in[k].dtype) != bn_dtype_for(node->op, output, k, TR_BF16))
            return false;
    }
    return true;
}

static int bn_check_dtypes(const struct tr_kernel_args *a)
{
    enum tr_dtype t = a->in[0].dtype;
    for (int i = 0; i < a->nin + a->nout; i++) {
        bool output = i >= a->nin;
        int k = output ? i - a->nin : i;
        enum tr_dtype want = bn_dtype_for(a->node->op, output, k, t);
        enum tr_dtype have = output ? a->out[k].dtype : a->in[k].dtype;
        if (have != want)
            return tr_cpu_fail(a, "%s: %s %d is %s but x is %s, so it must be %s", tr_op_name(a->node->op),
                               output ? "output" : "input", k, tr_dtype_name(have), tr_dtype_name(t),
                               tr_dtype_name(want));
    }
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

/* bf16 activations as stored too (instantiate.h), beside f32 per-channel tensors (amp's), so no
 * f32 copy of x or dy is made: widen.c sends such nodes here as they are. */
#define TR_KERNEL_BODY "backend/cpu/batchnorm.inc"
#define TR_KERNEL_BF16
#include "backend/cpu/instantiate.h"

static int by_dtype(const struct tr_kernel_args *a, const char *name, tr_kernel_fn f32, tr_kernel_fn f64,
                    tr_kernel_fn bf16)
{
    return a->in[0].dtype == TR_BF16 ? bf16(a) : tr_cpu_by_dtype(a, name, f32, f64);
}

int tr_cpu_batchnorm(const struct tr_kernel_args *a)
{
    return by_dtype(a, "batchnorm", batchnorm_f32, batchnorm_f64, batchnorm_bf16);
}

int tr_cpu_batchnorm_bwd(const struct tr_kernel_args *a)
{
    return by_dtype(a, "batchnorm_bwd", batchnorm_bwd_f32, batchnorm_bwd_f64, batchnorm_bwd_bf16);
}
