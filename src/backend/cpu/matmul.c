/* MATMUL on the CPU: OpenBLAS sgemm (dgemm for the f64 test build), batched over leading dims. */
#include <cblas.h>

#include "backend/cpu/cpu.h"

#define REAL float
#define SFX f32
#define GEMM cblas_sgemm
#include "backend/cpu/matmul.inc"
#undef REAL
#undef SFX
#undef GEMM

#define REAL double
#define SFX f64
#define GEMM cblas_dgemm
#include "backend/cpu/matmul.inc"
#undef REAL
#undef SFX
#undef GEMM

TR_CPU_DISPATCH(matmul)
