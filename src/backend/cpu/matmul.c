/* MATMUL on the CPU: OpenBLAS sgemm (dgemm for the f64 test build), batched over leading dims.
 * Debian's OpenBLAS has no sbgemm: bf16/f16 operands reach sgemm as f32 copies (widen.c).
 *
 * The same bits on any thread count: OpenBLAS's own threads split an output by the thread count
 * and its edge kernels round differently (0.3.21 dgemm 32×72×400: 3 threads differ from 1 in the
 * last bits). So the output is cut into tiles whose size depends on the shape alone, and threads
 * take whole tiles, one single-threaded BLAS call each (OpenBLAS runs single-threaded inside a
 * parallel region): a tile is the same call on any thread. Tiles of up to 256 × 512 keep packing
 * to a few percent of a tile's time (matmul_tiles below says how they are cut).
 *
 * The parallel region must be active (two threads or more) even for one tile: inside an
 * inactive one OpenBLAS starts a nested team of its own threads for every call, which made the
 * MLP recipe 7× slower on 2 threads. */
#include "core/blas.h"
#include <omp.h>

#include "backend/cpu/cpu.h"

/* Output tiles for P batches of an M × N product: at most 256 × 512, all of one size (a
 * 768-wide output is two tiles of 384, not 512 + 256, so two threads finish together), and
 * split further, down to 64 × 128, until there are MATMUL_MIN_TILES: a weight gradient
 * (256 × 256 summed over 2048 rows) used to be one tile, so one thread. The sizes are a
 * function of the shape alone, never of the thread count. */
#define MATMUL_MIN_TILES 8

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void matmul_tiles(int64_t P, int64_t M, int64_t N, int64_t *tm, int64_t *tn)
{
    int64_t rows = cdiv(M, 256), cols = cdiv(N, 512);
    while (P * rows * cols < MATMUL_MIN_TILES) {
        int rows_split = cdiv(M, 2 * rows) >= 64, cols_split = cdiv(N, 2 * cols) >= 128;
        if (cols_split && (!rows_split || cdiv(N, cols) >= 2 * cdiv(M, rows)))
            cols *= 2;   /* halve the longer side of the tile */
        else if (rows_split)
            rows *= 2;
        else
            break;
    }
    *tm = cdiv(cdiv(M, rows), 8) * 8;
    *tn = cdiv(cdiv(N, cols), 16) * 16;
}

#define TR_KERNEL_BODY "backend/cpu/matmul.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_matmul(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, matmul); }
