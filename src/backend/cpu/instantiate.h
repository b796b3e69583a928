/* Builds a kernel body twice, for f32 and f64: a kernel file defines TR_KERNEL_BODY (the path of
 * its .inc) and includes this header. Inside the body, REAL is the element type, FN(name) names
 * a function for it (template.h), and the math and BLAS names below pick the matching routine. */
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
#undef REAL
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
