/* Builds a kernel body twice, for f32 and f64, and a third time for bf16 storage when the kernel
 * file defines TR_KERNEL_BF16: a kernel file defines TR_KERNEL_BODY (the path of its .inc) and
 * includes this header. Inside the body, REAL is the arithmetic's type, FN(name) names a function
 * for the build (template.h), and the math and BLAS names below pick the matching routine. DATA
 * is the tensors' element type: REAL, or uint16_t in the bf16 build, whose body reads each value
 * through LD (widened exactly) and writes it through TO (rounded to nearest even) and computes
 * in f32, so its bits are the f32 body's on widened copies (what widen.c would run). */
#ifndef TR_KERNEL_BODY
#error "define TR_KERNEL_BODY before including backend/cpu/instantiate.h"
#endif

#include "core/blas.h"
#include <math.h>

#include "backend/cpu/vmath.h"

/* The f64 forms of vmath.h's functions, from libm. */
static inline double tr_two_phi(double x) { return erfc(-x * 0.70710678118654752); }
static inline double tr_sigmoid(double x) { return 1 / (1 + exp(-x)); }

#define REAL float
#define DATA float
#define LD(v) (v)
#define TO(v) (v)
#define SFX f32
#define EXP expf
#define LOG logf
#define SQRT sqrtf
#define TANH tanhf
#define ERF erff
#define VEXP tr_vexpf
#define VTWO_PHI tr_vtwo_phif
#define VSIGMOID tr_vsigmoidf
#define GEMM tr_blas.sgemm
#define GEMV tr_blas.sgemv
#define GER tr_blas.sger
#include TR_KERNEL_BODY
#ifdef TR_KERNEL_BF16
#undef DATA
#undef LD
#undef TO
#undef SFX
#define DATA uint16_t
#define LD(v) tr_bf16_to_f32(v)
#define TO(v) tr_f32_to_bf16(v)
#define SFX bf16
#include TR_KERNEL_BODY
#endif
#undef REAL
#undef DATA
#undef LD
#undef TO
#undef SFX
#undef EXP
#undef LOG
#undef SQRT
#undef TANH
#undef ERF
#undef VEXP
#undef VTWO_PHI
#undef VSIGMOID
#undef GEMM
#undef GEMV
#undef GER

#define REAL double
#define DATA double
#define LD(v) (v)
#define TO(v) (v)
#define SFX f64
#define EXP exp
#define LOG log
#define SQRT sqrt
#define TANH tanh
#define ERF erf
#define VEXP exp
#define VTWO_PHI tr_two_phi
#define VSIGMOID tr_sigmoid
#define GEMM tr_blas.dgemm
#define GEMV tr_blas.dgemv
#define GER tr_blas.dger
#include TR_KERNEL_BODY
#undef REAL
#undef DATA
#undef LD
#undef TO
#undef SFX
#undef EXP
#undef LOG
#undef SQRT
#undef TANH
#undef ERF
#undef VEXP
#undef VTWO_PHI
#undef VSIGMOID
#undef GEMM
#undef GEMV
#undef GER
#undef TR_KERNEL_BODY
#undef TR_KERNEL_BF16
