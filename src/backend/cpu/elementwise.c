/* Elementwise kernels on the CPU: arithmetic, activations, bias, accumulation. */
#include <math.h>

#include "backend/cpu/cpu.h"

#define REAL float
#define SFX f32
#define TANH tanhf
#define ERF erff
#define EXP expf
#include "backend/cpu/elementwise.inc"
#undef REAL
#undef SFX
#undef TANH
#undef ERF
#undef EXP

#define REAL double
#define SFX f64
#define TANH tanh
#define ERF erf
#define EXP exp
#include "backend/cpu/elementwise.inc"
#undef REAL
#undef SFX
#undef TANH
#undef ERF
#undef EXP

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
