/* PERMUTE, SLICE and SLICE_BWD, CONCAT, MASKED_FILL and CAST on the CPU. They move elements
 * (CAST also converts them), so they are written once over the dtype rather than per REAL
 * type, and work for every dtype. Under node->accumulate a float output is added into (+=);
 * an integer output carries no gradient and is always overwritten. GATHER and GATHER_BWD live
 * in embedding.c: they are EMBEDDING's row lookup and scatter-add. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"

/* Element i of a buffer of any dtype, as a double (exact for every dtype). */
static double load_elem(const void *p, int64_t i, enum tr_dtype t)
{
    switch (t) {
    case TR_F32: return ((const float *)p)[i];
    case TR_BF16: return tr_bf16_to_f32(((const uint16_t *)p)[i]);
    case TR_F16: return tr_f16_to_f32(((const uint16_t *)p)[i]);
    case TR_I32: return ((const int32_t *)p)[i];
    case TR_U8: return ((const uint8_t *)p)[i];
    case TR_F64: return ((const double *)p)[i];
    case TR_NDTYPES:
    default: return 0;
    }
}

/* v as an integer in [lo, hi]: truncated toward zero like C and PyTorch, but saturated and
 * NaN → 0 where C leaves the conversion undefined. */
static double to_integer(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    v = trunc(v);
    return v < lo ? lo : v > hi ? hi : v;
}

/* Stores v as element i. 16-bit floats round through f32, as PyTorch's do from f64. An f32
 * sum done in double and stored this way is the f32 sum: double holds ≥ 2·24 + 2 bits, so
 * rounding twice cannot differ from rounding once. */
static void store_elem(void *p, int64_t i, enum tr_dtype t, double v)
{
    switch (t) {
    case TR_F32: ((float *)p)[i] = (float)v; break;
    case TR_BF16: ((uint16_t *)p)[i] = tr_f32_to_bf16((float)v); break;
    case TR_F16: ((uint16_t *)p)[i] = tr_f32_to_f16((float)v); break;
    case TR_I32: ((int32_t *)p)[i] = (int32_t)to_integer(v, INT32_MIN, INT32_MAX); break;
    case TR_U8: ((uint8_t *)p)[i] = (uint8_t)to_integer(v, 0, UINT8_MAX); break;
    case TR_F64: ((double *)p)[i] = v; break;
    case TR_NDTYPES:
    default: break;
    }
}

/* dst[0:n] = src[0:n], or += when accumulating into a float dtype */
static void move_run(void *dst, const void *src, int64_t n, enum tr_dtype t, int acc)
{
    if (!acc || !tr_dtype_is_float(t)) {
        memcpy(dst, src, (size_t)n * tr_dtype_size(t));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        store_elem(dst, i, t, load_elem(dst, i, t) + load_elem(src, i, t));
}

/* dst[0:n] = value, or += when accumulating into a float dtype */
static void fill_run(void *dst, int64_t n, enum tr_dtype t, double value, int acc)
{
    int add = acc && tr_dtype_is_float(t);
    for (int64_t i = 0; i < n; i++)
        store_elem(dst, i, t, add ? load_elem(dst, i, t) + value : value);
}

/* The tensor seen as [outer, n, inner] around axis. */
static void split_at_axis(const struct tr_tensor *t, int axis, int64_t *outer, int64_t *n,
                          int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= t->dim[i];
    for (int i = axis + 1; i < t->rank; i++)
        *inner *= t->dim[i];
    *n = t->dim[axis];
}

/* y[i0, .., ir] = x at index i_k on axis perm[k]. y is walked in order and x by strides; the
 * trailing axes perm leaves in place stay contiguous and move as one run (the attention
 * transpose [B, S, H, D] → [B, H, S, D] moves rows of D). */
int tr_cpu_permute(const struct tr_kernel_args *a)
{
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    const int *perm = a->node->attrs.permute.perm;
    size_t es = tr_dtype_size(x->dtype);
    int acc = a->node->accumulate, moved = x->rank;
    int64_t x_stride[TR_MAX_RANK], stride = 1, run = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        x_stride[i] = stride;
        stride *= x->dim[i];
    }
    while (moved > 0 && perm[moved - 1] == moved - 1)
        run *= y->dim[--moved];
    int64_t runs = tr_tensor_numel(y) / run;
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < runs; q++) {
        int64_t rest = q, from = 0;
        for (int i = moved - 1; i >= 0; i--) {
            from += rest % y->dim[i] * x_stride[perm[i]];
            rest /= y->dim[i];
        }
        move_run((char *)y->data + q * run * es, (const char *)x->data + from * es, run, x->dtype, acc);
    }
    return 0;
}

/* y[o, j, i] = x[o, start + j, i] for j < len(y): one run of len·inner elements per o */
int tr_cpu_slice(const struct tr_kernel_args *a)
{
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    int axis = a->node->attrs.slice.axis, acc = a->node->accumulate;
    int64_t start = a->node->attrs.slice.start, outer, n, inner, len = y->dim[axis];
    size_t es = tr_dtype_size(x->dtype);
    split_at_axis(x, axis, &outer, &n, &inner);
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++)
        move_run((char *)y->data + o * len * inner * es,
                 (const char *)x->data + (o * n + start) * inner * es, len * inner, x->dtype, acc);
    return 0;
}

/* dx[o, start + j, i] = dy[o, j, i], zeros elsewhere. Under accumulate only the slice's range
 * is added into: the zeros would add nothing. */
int tr_cpu_slice_bwd(const struct tr_kernel_args *a)
{
    const struct tr_tensor *dy = &a->in[0], *dx = &a->out[0];
    int axis = a->node->attrs.slice.axis, acc = a->node->accumulate;
    int64_t start = a->node->attrs.slice.start, outer, n, inner, len = dy->dim[axis];
    size_t es = tr_dtype_size(dx->dtype);
    split_at_axis(dx, axis, &outer, &n, &inner);
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        char *row = (char *)dx->data + o * n * inner * es;
        if (!acc) {   /* all-zero bytes are 0 in every dtype */
            memset(row, 0, (size_t)(start * inner) * es);
            memset(row + (start + len) * inner * es, 0, (size_t)((n - start - len) * inner) * es);
        }
        move_run(row + start * inner * es, (const char *)dy->data + o * len * inner * es,
                 len * inner, dx->dtype, acc);
    }
    return 0;
}

/* y = x0 ‖ x1 ‖ .. along axis: per outer index o, each input's run for o in turn */
int tr_cpu_concat(const struct tr_kernel_args *a)
{
    const struct tr_tensor *y = &a->out[0];
    int axis = a->node->attrs.axis.axis, acc = a->node->accumulate;
    int64_t outer, n, inner;
    size_t es = tr_dtype_size(y->dtype);
    split_at_axis(y, axis, &outer, &n, &inner);
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        char *dst = (char *)y->data + o * n * inner * es;
        for (int k = 0; k < a->nin; k++) {
            int64_t run = a->in[k].dim[axis] * inner;
            move_run(dst, (const char *)a->in[k].data + o * run * es, run, y->dtype, acc);
            dst += run * es;
        }
    }
    return 0;
}

/* y = mask ? value : x, the u8 mask over a prefix of x's dims: one run of the remaining dims
 * per mask element */
int tr_cpu_masked_fill(const struct tr_kernel_args *a)
{
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    const uint8_t *mask = a->in[1].data;
    int acc = a->node->accumulate;
    int64_t masks = tr_tensor_numel(&a->in[1]), inner = tr_tensor_numel(x) / masks;
    size_t es = tr_dtype_size(x->dtype);
    double value = a->node->attrs.fill.value;
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < masks; m++) {
        char *dst = (char *)y->data + m * inner * es;
        if (mask[m])
            fill_run(dst, inner, x->dtype, value, acc);
        else
            move_run(dst, (const char *)x->data + m * inner * es, inner, x->dtype, acc);
    }
    return 0;
}

/* Casts among f32, bf16 and f16 (AMP's, of every parameter every step) go in runs of f32:
 * x widened, y's values added when accumulating, the sum narrowed into y. The same bits as the
 * double path: f32 holds every 16-bit value, and a sum of two f32 rounded in f32 is their sum
 * in double rounded to f32 (store_elem). A run's two buffers sit on the thread's stack.
 * GPT-2's [50257, 768] table f32 → bf16 on one core: 190 ms element by element through
 * double (5 ms a million), 25–30 ms here; with accumulate 260–330 ms and 40 ms. */
#define CAST_RUN 1024

static bool is_f32_or_16bit(enum tr_dtype t)
{
    return t == TR_F32 || tr_dtype_is_16bit(t);
}

static void cast_via_f32(const struct tr_tensor *x, const struct tr_tensor *y, int add)
{
    size_t xs = tr_dtype_size(x->dtype), ys = tr_dtype_size(y->dtype);
    int64_t n = tr_tensor_numel(x);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n; c += CAST_RUN) {
        float v[CAST_RUN], old[CAST_RUN];
        int64_t len = n - c < CAST_RUN ? n - c : CAST_RUN;
        void *dst = (char *)y->data + c * (int64_t)ys;
        tr_cpu_widen_run((const char *)x->data + c * (int64_t)xs, x->dtype, v, len);
        if (add) {
            tr_cpu_widen_run(dst, y->dtype, old, len);
            for (int64_t i = 0; i < len; i++)
                v[i] = old[i] + v[i];
        }
        tr_cpu_narrow_run(v, dst, y->dtype, len);
    }
}

/* y = x in y's dtype; to an integer: truncated toward zero, saturated, NaN → 0. Any pair of
 * dtypes goes through double, which holds every value of every dtype exactly. Accumulate adds
 * into a float output; an integer output is overwritten (no gradient reaches it). */
int tr_cpu_cast(const struct tr_kernel_args *a)
{
    const struct tr_tensor *x = &a->in[0], *y = &a->out[0];
    int add = a->node->accumulate && tr_dtype_is_float(y->dtype);
    if (is_f32_or_16bit(x->dtype) && is_f32_or_16bit(y->dtype)) {
        cast_via_f32(x, y, add);
        return 0;
    }
    int64_t n = tr_tensor_numel(x);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        double v = load_elem(x->data, i, x->dtype);
        store_elem(y->data, i, y->dtype, add ? load_elem(y->data, i, y->dtype) + v : v);
    }
    return 0;
}
