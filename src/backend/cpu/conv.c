/* CONV2D and its two backwards on the CPU (DESIGN.md §3): one image at a time, im2col into the
 * workspace the memory plan sized, then a GEMM (OpenBLAS sgemm; dgemm in the f64 test build).
 * Images run in order, so the filter gradient's sum over the batch has one order. Threads take
 * fixed tiles of each GEMM's output, one single-threaded BLAS call each, rather than OpenBLAS's
 * own threads: those split the output by the thread count and its edge kernels round
 * differently (OpenBLAS 0.3.21 dgemm 32×72×400: 3 threads differ from 1 in the last bits). */
#include <cblas.h>
#include <string.h>

#include "backend/cpu/cpu.h"

/* One convolution's sizes: x [N, C, H, W], w [O, C, kh, kw], y [N, O, Ho, Wo]. */
struct conv_geom {
    int64_t N, C, H, W, O, kh, kw, Ho, Wo;
    int64_t stride, pad;
};

/* Reads the sizes from whichever of x, w, y are the op's inputs and which its output. */
static struct conv_geom conv_geom_of(const struct tr_node *node, const struct tr_tensor *in,
                                     const struct tr_tensor *out)
{
    const struct tr_tensor *x = &in[0], *w = &in[1], *y = &out[0];
    if (node->op == TR_OP_CONV2D_BWD_DATA)
        y = &in[0], w = &in[1], x = &out[0];
    else if (node->op == TR_OP_CONV2D_BWD_FILTER)
        y = &in[0], x = &in[1], w = &out[0];
    return (struct conv_geom){x->dim[0], x->dim[1], x->dim[2], x->dim[3], w->dim[0], w->dim[2],
                              w->dim[3], y->dim[2], y->dim[3], node->attrs.conv.stride,
                              node->attrs.conv.pad};
}

/* The im2col buffer of one image: [C·kh·kw, Ho·Wo] elements of the op's dtype. */
size_t tr_cpu_conv2d_workspace(const struct tr_node *node, const struct tr_tensor *in,
                               const struct tr_tensor *out)
{
    struct conv_geom g = conv_geom_of(node, in, out);
    return (size_t)(g.C * g.kh * g.kw * g.Ho * g.Wo) * tr_dtype_size(in[0].dtype);
}

static int conv_check_workspace(const struct tr_kernel_args *a)
{
    size_t need = tr_cpu_conv2d_workspace(a->node, a->in, a->out);
    if (a->workspace_bytes < need || (!a->workspace && need))
        return tr_cpu_fail(a, "%s: the workspace holds %zu bytes but the im2col buffer needs %zu",
                           tr_op_name(a->node->op), a->workspace ? a->workspace_bytes : 0, need);
    return 0;
}

/* A 1×1, stride-1, unpadded convolution's columns are the image itself: no copy needed. */
static int conv_is_pointwise(const struct conv_geom *g)
{
    return g->kh == 1 && g->kw == 1 && g->stride == 1 && g->pad == 0;
}

/* GEMM output tiles: a fixed size, so where a sum is split never depends on the thread count;
 * 32×128 still cuts a late ResNet layer ([512, 49] per image) into 16 tiles, while packing
 * copies only 160 values per 8192 flops of a tile. */
#define GEMM_TILE_M 32
#define GEMM_TILE_N 128

struct gemm_tile {
    int64_t row, col, rows, cols;
};

static int64_t gemm_tile_count(int64_t M, int64_t N)
{
    return ((M + GEMM_TILE_M - 1) / GEMM_TILE_M) * ((N + GEMM_TILE_N - 1) / GEMM_TILE_N);
}

static struct gemm_tile gemm_tile_of(int64_t t, int64_t M, int64_t N)
{
    int64_t across = (N + GEMM_TILE_N - 1) / GEMM_TILE_N;
    struct gemm_tile g = {t / across * GEMM_TILE_M, t % across * GEMM_TILE_N, 0, 0};
    g.rows = M - g.row < GEMM_TILE_M ? M - g.row : GEMM_TILE_M;
    g.cols = N - g.col < GEMM_TILE_N ? N - g.col : GEMM_TILE_N;
    return g;
}

#define TR_KERNEL_BODY "backend/cpu/conv.inc"
#include "backend/cpu/instantiate.h"

TR_CPU_DISPATCH(conv2d)
TR_CPU_DISPATCH(conv2d_bwd_data)
TR_CPU_DISPATCH(conv2d_bwd_filter)
