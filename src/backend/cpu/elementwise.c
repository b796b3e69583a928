/* Elementwise kernels on the CPU: arithmetic, activations, bias, accumulation. */
#include <math.h>

#include "backend/cpu/cpu.h"

#define TR_KERNEL_BODY "backend/cpu/elementwise.inc"
#include "backend/cpu/instantiate.h"

TR_CPU_DISPATCH(add)
TR_CPU_DISPATCH(mul)
TR_CPU_DISPATCH(scale)
TR_CPU_DISPATCH(accumulate)
TR_CPU_DISPATCH(bias_add)
TR_CPU_DISPATCH(bias_grad)
TR_CPU_DISPATCH(relu)
TR_CPU_DISPATCH(relu_bwd)
TR_CPU_DISPATCH(tanh)
TR_CPU_DISPATCH(tanh_bwd)
TR_CPU_DISPATCH(gelu)
TR_CPU_DISPATCH(gelu_bwd)
