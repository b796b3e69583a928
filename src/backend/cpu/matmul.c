/* MATMUL on the CPU: OpenBLAS sgemm (dgemm for the f64 test build), batched over leading dims.
 * Debian's OpenBLAS has no sbgemm: bf16/f16 operands reach sgemm as f32 copies (widen.c).
 *
 * The same bits on any thread count: OpenBLAS's own threads split an output by the thread count
 * and its edge kernels round differently (0.3.21 dgemm 32×72×400: 3 threads differ from 1 in the
 * last bits). So the output is cut into tiles of a fixed size, and threads take whole tiles, one
 * single-threaded BLAS call each (OpenBLAS runs single-threaded inside a parallel region): a
 * tile is the same call on any thread. 256 × 512 tiles keep packing to a few percent of a
 * tile's time and still give a BERT-base layer's GEMMs 12 to 24 tiles; a GEMM of one tile (the
 * MLP's) runs on one thread.
 *
 * The parallel region must be active (two threads or more) even for one tile: inside an
 * inactive one OpenBLAS starts a nested team of its own threads for every call, which made the
 * MLP recipe 7× slower on 2 threads. */
#include "core/blas.h"
#include <omp.h>

#include "backend/cpu/cpu.h"

#define MATMUL_TILE_M 256
#define MATMUL_TILE_N 512

#define TR_KERNEL_BODY "backend/cpu/matmul.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_matmul(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, matmul); }
