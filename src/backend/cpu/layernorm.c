/* LAYERNORM and LAYERNORM_BWD on the CPU: the transformer blocks' normalisation over the last
 * dim, written once in layernorm.inc and built for f32 and f64. Threads split rows for y and
 * dx, and columns for dgamma and dbeta, so every sum is taken in one order whatever the
 * thread count. */
#include <math.h>

#include "backend/cpu/cpu.h"

/* Columns per task of the dgamma/dbeta sums: a task walks every row once for its block, its
 * 64 partial sums staying in L1 (D = 768 makes 12 tasks). */
#define LN_COL_BLOCK 64
/* Running sums of a row's mean, variance and backward dot products (layernorm.inc). */
#define LN_LANES 16

#define TR_KERNEL_BODY "backend/cpu/layernorm.inc"
#define TR_KERNEL_BF16   /* bf16 activations as stored too, beside f32 gamma, beta and stats */
#include "backend/cpu/instantiate.h"

int tr_cpu_layernorm(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, layernorm); }
int tr_cpu_layernorm_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, layernorm_bwd); }
