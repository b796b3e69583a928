/* Elementwise kernels on the CPU: arithmetic, activations, bias, accumulation. */
#include <math.h>

#include "backend/cpu/cpu.h"

#define TR_KERNEL_BODY "backend/cpu/elementwise.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_add(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, add); }
int tr_cpu_mul(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, mul); }
int tr_cpu_scale(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, scale); }
int tr_cpu_accumulate(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, accumulate); }
int tr_cpu_bias_add(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, bias_add); }
int tr_cpu_bias_grad(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, bias_grad); }
int tr_cpu_relu(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, relu); }
int tr_cpu_relu_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, relu_bwd); }
int tr_cpu_tanh(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, tanh); }
int tr_cpu_tanh_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, tanh_bwd); }
int tr_cpu_gelu(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, gelu); }
int tr_cpu_gelu_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, gelu_bwd); }
