/* LAYERNORM and LAYERNORM_BWD on the CPU: the transformer blocks' normalisation over the last
 * dim, written once in layernorm.inc and built for f32 and f64. Threads split rows for y and
 * dx, and columns for dgamma and dbeta, so every sum is taken in one order whatever the
 * thread count. */
#include <math.h>

#include "backend/cpu/cpu.h"

/* Columns per task of the dgamma/dbeta sums: a task walks every row once for its block, its
 * 64 partial sums staying in L1 (D = 768 makes 12 tasks). */
#define LN_COL_BLOCK 64

#define TR_KERNEL_BODY "backend/cpu/layernorm.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_layernorm(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "layernorm", layernorm_f32, layernorm_f64);
}

int tr_cpu_layernorm_bwd(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "layernorm_bwd", layernorm_bwd_f32, layernorm_bwd_f64);
}
