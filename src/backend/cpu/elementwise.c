/* Elementwise kernels on the CPU: arithmetic, activations, bias, accumulation. */
#include <math.h>

#include "backend/cpu/cpu.h"

#define TR_KERNEL_BODY "backend/cpu/elementwise.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_add(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "add", add_f32, add_f64);
}

int tr_cpu_mul(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "mul", mul_f32, mul_f64);
}

int tr_cpu_scale(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "scale", scale_f32, scale_f64);
}

int tr_cpu_accumulate(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "accumulate", accumulate_f32, accumulate_f64);
}

int tr_cpu_bias_add(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "bias_add", bias_add_f32, bias_add_f64);
}

int tr_cpu_bias_grad(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "bias_grad", bias_grad_f32, bias_grad_f64);
}

int tr_cpu_relu(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "relu", relu_f32, relu_f64);
}

int tr_cpu_relu_bwd(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "relu_bwd", relu_bwd_f32, relu_bwd_f64);
}

int tr_cpu_tanh(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "tanh", tanh_f32, tanh_f64);
}

int tr_cpu_tanh_bwd(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "tanh_bwd", tanh_bwd_f32, tanh_bwd_f64);
}

int tr_cpu_gelu(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "gelu", gelu_f32, gelu_f64);
}

int tr_cpu_gelu_bwd(const struct tr_kernel_args *a)
{
    return tr_cpu_by_dtype(a, "gelu_bwd", gelu_bwd_f32, gelu_bwd_f64);
}
