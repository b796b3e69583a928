/* CONV2D and its two backwards on the CPU (DESIGN.md §3): im2col + GEMM, one image per GEMM.
 *
 * Threads take whole images. Each thread owns one copy of the im2col scratch in the workspace
 * and makes single-threaded BLAS calls (OpenBLAS runs single-threaded inside a parallel region),
 * so an image's result is the same call with the same sizes whichever thread runs it. OpenBLAS's
 * own threads would split an output by the thread count, and its edge kernels round differently
 * (OpenBLAS 0.3.21 dgemm 32×72×400: 3 threads differ from 1 in the last bits).
 *
 * The filter gradient sums over images. The batch is cut into CONV_CHUNKS fixed runs of images
 * (how many depends on N only); each run is summed in image order into its own partial, and the
 * partials are added in run order: the same bits on any number of threads. */
#include "core/blas.h"
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu.h"

/* One convolution's sizes: x [N, C, H, W], w [O, C, kh, kw], y [N, O, Ho, Wo]; channels last
 * (nhwc) x [N, H, W, C] and y [N, Ho, Wo, O], whose images are the transposes of the GEMMs'
 * operands, so the GEMMs transpose them instead (conv.inc). */
struct conv_geom {
    int64_t N, C, H, W, O, kh, kw, Ho, Wo;
    int64_t stride, pad;
    int nhwc;
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
    struct tr_image_axes a = tr_image_axes(node->attrs.conv.channels_last);
    return (struct conv_geom){x->dim[0], x->dim[a.c], x->dim[a.h], x->dim[a.w], w->dim[0], w->dim[2],
                              w->dim[3], y->dim[a.h], y->dim[a.w], node->attrs.conv.stride,
                              node->attrs.conv.pad, node->attrs.conv.channels_last == TR_NHWC};
}

/* A 1×1, stride-1, unpadded convolution's columns are the image itself (NCHW): no copy needed. */
static int conv_is_pointwise(const struct conv_geom *g)
{
    return g->kh == 1 && g->kw == 1 && g->stride == 1 && g->pad == 0 && !g->nhwc;
}

/* How far apart an image's neighbouring channels, rows and columns lie in x, in values. */
static void conv_steps(const struct conv_geom *g, int64_t *sc, int64_t *sh, int64_t *sw)
{
    *sc = g->nhwc ? 1 : g->H * g->W, *sh = g->nhwc ? g->W * g->C : g->W, *sw = g->nhwc ? g->C : 1;
}

/* The output columns ow whose input column ow·s − p + j lies inside [0, W): [*lo, *hi). */
static void conv_inside(const struct conv_geom *g, int64_t j, int64_t *lo, int64_t *hi)
{
    int64_t first = g->pad - j, end = g->W + g->pad - j;   /* ow·s must lie in [first, end) */
    *lo = first > 0 ? (first + g->stride - 1) / g->stride : 0;
    *hi = end > 0 ? (end + g->stride - 1) / g->stride : 0;
    *hi = *hi < g->Wo ? *hi : g->Wo;
    *lo = *lo < *hi ? *lo : *hi;
}

/* Runs of images the filter gradient sums separately: at most 8 threads share its work, and
 * the partials cost 8·O·C·kh·kw values of workspace. */
#define CONV_CHUNKS 8

static int64_t conv_chunks(const struct conv_geom *g)
{
    return g->N < CONV_CHUNKS ? g->N : CONV_CHUNKS;
}

/* The workspace, in values: `copies` im2col buffers of K·P (one per thread, none when the
 * columns are the image itself) after `chunks` filter-gradient partials of O·K. */
struct conv_layout {
    int64_t col, copies, partial, chunks;
};

static struct conv_layout conv_layout_of(const struct conv_geom *g, enum tr_op op, int64_t copies)
{
    int64_t K = g->C * g->kh * g->kw, P = g->Ho * g->Wo;
    int needs_col = op == TR_OP_CONV2D_BWD_DATA || !conv_is_pointwise(g);
    struct conv_layout l = {needs_col ? K * P : 0, copies, 0, 0};
    if (op == TR_OP_CONV2D_BWD_FILTER)
        l.partial = g->O * K, l.chunks = conv_chunks(g);
    return l;
}

/* Threads that may take images at once: one per image at most. */
static int64_t conv_threads(const struct conv_geom *g, enum tr_op op)
{
    int64_t items = op == TR_OP_CONV2D_BWD_FILTER ? conv_chunks(g) : g->N;
    int64_t threads = omp_get_max_threads();
    return items < threads ? (items > 0 ? items : 1) : threads;
}

/* The team a kernel starts for `threads` workers: at least two where OpenMP may use two, so the
 * region is active and OpenBLAS stays on one thread (matmul.c says why); extra threads idle. */
static int conv_team(int threads)
{
    return threads < 2 && omp_get_max_threads() > 1 ? 2 : threads;
}

/* The workspace for as many copies of the scratch as threads will run the op. */
size_t tr_cpu_conv2d_workspace(const struct tr_node *node, const struct tr_tensor *in,
                               const struct tr_tensor *out)
{
    struct conv_geom g = conv_geom_of(node, in, out);
    struct conv_layout l = conv_layout_of(&g, node->op, conv_threads(&g, node->op));
    return (size_t)(l.col * l.copies + l.partial * l.chunks) * tr_dtype_size(in[0].dtype);
}

/* Checks the workspace holds the partials and at least one copy of the columns; returns the
 * number of threads to run (as many as there are copies, up to conv_threads), or 0 on error. */
static int conv_plan_threads(const struct tr_kernel_args *a, struct conv_geom *g, struct conv_layout *l)
{
    *g = conv_geom_of(a->node, a->in, a->out);
    int64_t threads = conv_threads(g, a->node->op);
    *l = conv_layout_of(g, a->node->op, 1);
    size_t value = tr_dtype_size(a->in[0].dtype);
    size_t need = (size_t)(l->col + l->partial * l->chunks) * value;
    size_t have = a->workspace ? a->workspace_bytes : 0;
    if (have < need) {
        tr_cpu_fail(a, "%s: the workspace holds %zu bytes but one thread's scratch needs %zu",
                    tr_op_name(a->node->op), have, need);
        return 0;
    }
    if (l->col) {
        int64_t fit = (int64_t)((have / value - (size_t)(l->partial * l->chunks)) / (size_t)l->col);
        threads = fit < threads ? fit : threads;
    }
    l->copies = threads;
    return (int)threads;
}

#define TR_KERNEL_BODY "backend/cpu/conv.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_conv2d(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, conv2d); }
int tr_cpu_conv2d_bwd_data(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, conv2d_bwd_data); }
int tr_cpu_conv2d_bwd_filter(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, conv2d_bwd_filter); }
