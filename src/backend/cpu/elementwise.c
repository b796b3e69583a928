/* Elementwise kernels on the CPU: arithmetic, activations, bias, accumulation; in f32, f64 and on
 * bf16 as stored (instantiate.h), which widen.c hands nodes whose float tensors are all bf16. */
#include <math.h>

#include "backend/cpu/cpu.h"

#define TR_KERNEL_BODY "backend/cpu/elementwise.inc"
#define TR_KERNEL_BF16
#include "backend/cpu/instantiate.h"

int tr_cpu_add(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, add); }
int tr_cpu_mul(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, mul); }
int tr_cpu_scale(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, scale); }
int tr_cpu_accumulate(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, accumulate); }
int tr_cpu_bias_add(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, bias_add); }
int tr_cpu_bias_grad(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, bias_grad); }
int tr_cpu_relu(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, relu); }
int tr_cpu_relu_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, relu_bwd); }
int tr_cpu_tanh(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, tanh); }
int tr_cpu_tanh_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, tanh_bwd); }
int tr_cpu_gelu(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, gelu); }
int tr_cpu_gelu_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, gelu_bwd); }
