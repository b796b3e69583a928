/* MATMUL on the CPU: OpenBLAS sgemm (dgemm for the f64 test build), batched over leading dims.
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
#include <cblas.h>
#include <omp.h>

#include "backend/cpu/cpu.h"

#define MATMUL_TILE_M 256
#define MATMUL_TILE_N 512

#define TR_KERNEL_BODY "backend/cpu/matmul.inc"
#include "backend/cpu/instantiate.h"

/* 16-bit storage, f32 arithmetic: Debian's OpenBLAS has no sbgemm, so bf16/f16 operands are
 * widened into the workspace, multiplied with sgemm and the result narrowed back. The cost of
 * the conversions against a plain sgemm is measured in bench/ (gemm16). */
/* Conversions in chunks of 4096 elements, split among threads (each chunk independent). */
#define CHUNK 4096

static void widen(const struct tr_tensor *t, float *out)
{
    const uint16_t *h = t->data;
    int64_t n = tr_tensor_numel(t);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n; c += CHUNK) {
        int64_t len = n - c < CHUNK ? n - c : CHUNK;
        if (t->dtype == TR_F16)
            tr_f16_widen(h + c, out + c, len);
        else
            for (int64_t i = c; i < c + len; i++)
                out[i] = tr_bf16_to_f32(h[i]);
    }
}

static void narrow(const float *in, const struct tr_tensor *t)
{
    uint16_t *h = t->data;
    int64_t n = tr_tensor_numel(t);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n; c += CHUNK) {
        int64_t len = n - c < CHUNK ? n - c : CHUNK;
        if (t->dtype == TR_F16)
            tr_f16_narrow(in + c, h + c, len);
        else
            for (int64_t i = c; i < c + len; i++)
                h[i] = tr_f32_to_bf16(in[i]);
    }
}

size_t tr_cpu_matmul_workspace(const struct tr_node *node, const struct tr_tensor *in,
                               const struct tr_tensor *out)
{
    (void)node;
    if (in[0].dtype != TR_BF16 && in[0].dtype != TR_F16)
        return 0;
    return (size_t)(tr_tensor_numel(&in[0]) + tr_tensor_numel(&in[1]) + tr_tensor_numel(&out[0])) * sizeof(float);
}

static int matmul_16bit(const struct tr_kernel_args *a)
{
    if (a->in[1].dtype != a->in[0].dtype || a->out[0].dtype != a->in[0].dtype)
        return tr_cpu_fail(a, "matmul: operands must share one 16-bit dtype");
    size_t need = tr_cpu_matmul_workspace(a->node, a->in, a->out);
    if (a->workspace_bytes < need || !a->workspace)
        return tr_cpu_fail(a, "matmul: needs %zu bytes of workspace, has %zu", need, a->workspace_bytes);
    float *wa = a->workspace, *wb = wa + tr_tensor_numel(&a->in[0]), *wy = wb + tr_tensor_numel(&a->in[1]);
    struct tr_kernel_args wide = *a;
    wide.in[0].dtype = wide.in[1].dtype = wide.out[0].dtype = TR_F32;
    wide.in[0].data = wa, wide.in[1].data = wb, wide.out[0].data = wy;
    widen(&a->in[0], wa);
    widen(&a->in[1], wb);
    if (a->node->accumulate)
        widen(&a->out[0], wy);
    int rc = matmul_f32(&wide);
    if (rc == 0)
        narrow(wy, &a->out[0]);
    return rc;
}

int tr_cpu_matmul(const struct tr_kernel_args *a)
{
    switch (a->in[0].dtype) {
    case TR_F32:  return matmul_f32(a);
    case TR_F64:  return matmul_f64(a);
    case TR_BF16:
    case TR_F16:  return matmul_16bit(a);
    default:
        return tr_cpu_fail(a, "matmul: %s tensors are not supported", tr_dtype_name(a->in[0].dtype));
    }
}
