/* Kernel-level gradient checks for the Check tests (tests/check_kernels_*.c): tensors in f64,
 * a forward kernel, and central differences of the loss L = Σ_k Σ w_k ⊙ out_k compared with the
 * analytic gradient a backward kernel gives for dy_k = w_k.
 *
 * Tolerance: in f64 with h = 1e-6 the central difference carries a truncation error of order
 * h²·|f'''| ≈ 1e-12 and a rounding error of order ε·|L|/h ≈ 1e-16·10/1e-6 = 1e-9; a normwise
 * relative error ‖fd − an‖/‖fd‖ below 1e-6 therefore means the backward is right, while any
 * wrong term (a missing factor, a sign, a dropped row) shows as an error of order 1e-2 or more.
 * Inputs of non-smooth ops (relu, max) are kept away from their kinks by more than h. */
#ifndef TR_TESTS_GRADCHECK_H
#define TR_TESTS_GRADCHECK_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"

#define GC_TOL 1e-6
#define GC_STEP 1e-6

/* A zeroed tensor of the given dtype and dims, allocated. */
static inline struct tr_tensor gc_tensor(enum tr_dtype t, int rank, const int64_t *dims)
{
    struct tr_tensor x = {.dtype = t, .rank = rank};
    for (int i = 0; i < rank; i++)
        x.dim[i] = dims[i];
    x.data = calloc((size_t)tr_tensor_numel(&x) ? (size_t)tr_tensor_numel(&x) : 1, tr_dtype_size(t));
    ck_assert_ptr_nonnull(x.data);
    return x;
}

#define GC_DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define GC_RANK(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* gc_make(TR_F64, 2, 3) → a [2, 3] tensor */
#define gc_make(type, ...) gc_tensor(type, GC_RANK(__VA_ARGS__), GC_DIMS(__VA_ARGS__))

/* A small deterministic generator (xorshift64*), so failures reproduce. */
static inline double gc_uniform(uint64_t *s, double lo, double hi)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return lo + (hi - lo) * (double)((*s * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

static inline void gc_fill(struct tr_tensor *t, uint64_t *s, double lo, double hi)
{
    int64_t n = tr_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = gc_uniform(s, lo, hi);
        if (t->dtype == TR_F64)
            ((double *)t->data)[i] = v;
        else if (t->dtype == TR_F32)
            ((float *)t->data)[i] = (float)v;
        else if (t->dtype == TR_I32)
            ((int32_t *)t->data)[i] = (int32_t)floor(v);
        else if (t->dtype == TR_U8)
            ((uint8_t *)t->data)[i] = (uint8_t)floor(v);
    }
}

static inline void gc_free(struct tr_tensor *t)
{
    free(t->data);
    t->data = NULL;
}

/* Images of any dtype between [N, C, H, W] and channels last [N, H, W, C]: back 0 copies nchw's
 * values into nhwc, back 1 copies nhwc's into nchw. Both tensors exist; nchw's dims name them. */
static inline void gc_permute_images(struct tr_tensor *nchw, struct tr_tensor *nhwc, int back)
{
    size_t e = tr_dtype_size(nchw->dtype);
    int64_t N = nchw->dim[0], C = nchw->dim[1], HW = nchw->dim[2] * nchw->dim[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++) {
                char *a = (char *)nchw->data + ((n * C + c) * HW + p) * e;
                char *b = (char *)nhwc->data + ((n * HW + p) * C + c) * e;
                memcpy(back ? a : b, back ? b : a, e);
            }
}

/* A channels-last copy of images t [N, C, H, W], allocated. */
static inline struct tr_tensor gc_nhwc(const struct tr_tensor *t)
{
    struct tr_tensor h = gc_make(t->dtype, t->dim[0], t->dim[2], t->dim[3], t->dim[1]);
    gc_permute_images((struct tr_tensor *)t, &h, 0);
    return h;
}

/* The longest sentence the tests keep of a kernel's failure. */
#define GC_ERROR_MAX 256

/* Runs a node on be, the kernel's sentence when it fails copied into error (GC_ERROR_MAX bytes;
 * NULL: dropped), so that a test compares it as a string. */
static inline int gc_kernel(const struct tr_backend *be, struct tr_kernel_args *a, char *error)
{
    struct tr_diag why = {0};
    a->diag = &why;
    int rc = tr_backend_run(be, a);
    if (error)
        snprintf(error, GC_ERROR_MAX, "%s", tr_diag_last(&why));
    tr_diag_free(&why);
    a->diag = NULL;
    return rc;
}

/* A CPU backend instance of the test's own: unlike tr_backend_cpu()'s shared one, it keeps
 * state (oneDNN's primitive cache). */
static inline struct tr_backend *gc_open_cpu(void)
{
    struct tr_backend *be = NULL;
    struct tr_diag why = {0};
    ck_assert_msg(tr_backend_open_ops(&tr_cpu_ops, 0, &be, &why) == 0, "%s", tr_diag_last(&why));
    return be;
}

/* Runs a node on be with a workspace of the size the planner would give it. */
static inline void gc_run_planned(const struct tr_backend *be, struct tr_kernel_args *a)
{
    size_t need = tr_cpu_ops.workspace_bytes(a->node, a->in, a->out);
    a->workspace = need ? malloc(need) : NULL, a->workspace_bytes = need;
    char error[GC_ERROR_MAX];
    ck_assert_msg(gc_kernel(be, a, error) == 0, "%s", error);
    free(a->workspace);
    a->workspace = NULL, a->workspace_bytes = 0;
}

/* Runs a node on bound tensors; fails the test with the kernel's sentence on error. */
static inline void gc_run(struct tr_kernel_args *a)
{
    struct tr_diag why = {0};
    a->diag = &why;
    int rc = tr_backend_run(tr_backend_cpu(), a);
    ck_assert_msg(rc == 0, "%s failed: %s", tr_op_name(a->node->op), tr_diag_last(&why));
    a->diag = NULL;
}

/* L = Σ_k Σ w_k ⊙ out_k over the outputs that have a weight tensor (f64). */
static inline double gc_loss(const struct tr_kernel_args *fwd, const struct tr_tensor *weights)
{
    double L = 0;
    for (int k = 0; k < fwd->nout; k++) {
        if (!weights[k].data)
            continue;
        const double *o = fwd->out[k].data, *w = weights[k].data;
        for (int64_t i = 0, n = tr_tensor_numel(&fwd->out[k]); i < n; i++)
            L += w[i] * o[i];
    }
    return L;
}

/* ‖fd − analytic‖ / max(‖fd‖, ‖analytic‖) for dL/d(fwd->in[input]); the input is restored. */
static inline double gc_error(struct tr_kernel_args *fwd, int input, const struct tr_tensor *weights,
                              const struct tr_tensor *analytic)
{
    double *x = fwd->in[input].data;
    const double *an = analytic->data;
    int64_t n = tr_tensor_numel(&fwd->in[input]);
    ck_assert_int_eq(n, tr_tensor_numel(analytic));
    double diff = 0, norm_fd = 0, norm_an = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], h = GC_STEP * (fabs(v) > 1 ? fabs(v) : 1);
        x[i] = v + h;
        gc_run(fwd);
        double plus = gc_loss(fwd, weights);
        x[i] = v - h;
        gc_run(fwd);
        double minus = gc_loss(fwd, weights);
        x[i] = v;
        double fd = (plus - minus) / (2 * h);
        diff += (fd - an[i]) * (fd - an[i]);
        norm_fd += fd * fd;
        norm_an += an[i] * an[i];
    }
    gc_run(fwd);   /* leave the outputs as they were for the unperturbed input */
    double scale = sqrt(norm_fd > norm_an ? norm_fd : norm_an);
    return scale > 0 ? sqrt(diff) / scale : sqrt(diff);
}

#define F64(t) ((double *)(t).data)
#define F32(t) ((float *)(t).data)
#define I32(t) ((int32_t *)(t).data)

/* Runs one node on bound tensors; fails the test with the kernel's sentence. */
static inline void run_node(enum tr_op op, union tr_attrs at, int acc, int nin, const struct tr_tensor *in,
                     struct tr_tensor out)
{
    struct tr_node node = {.op = op, .attrs = at, .accumulate = (uint8_t)acc};
    struct tr_kernel_args a = {.node = &node, .nin = nin, .nout = 1, .out = {out}};
    for (int i = 0; i < nin; i++)
        a.in[i] = in[i];
    gc_run(&a);
}

/* A run that must fail with TR_EINVAL and exactly this sentence. */
static inline void expect_error(enum tr_op op, union tr_attrs at, int nin, const struct tr_tensor *in,
                         struct tr_tensor out, const char *sentence)
{
    struct tr_node node = {.op = op, .attrs = at};
    struct tr_diag why = {0};
    struct tr_kernel_args a = {.node = &node, .nin = nin, .nout = 1, .out = {out}, .diag = &why};
    for (int i = 0; i < nin; i++)
        a.in[i] = in[i];
    ck_assert_int_eq(tr_backend_run(tr_backend_cpu(), &a), TR_EINVAL);
    ck_assert_str_eq(tr_diag_last(&why), sentence);
    tr_diag_free(&why);
}

/* Running a node a second time with accumulate set doubles its (f64) output. */
static inline void check_accumulates(enum tr_op op, union tr_attrs at, int nin, const struct tr_tensor *in,
                              struct tr_tensor out)
{
    int64_t n = tr_tensor_numel(&out);
    run_node(op, at, 0, nin, in, out);
    double *first = malloc((size_t)n * sizeof(double));
    ck_assert_ptr_nonnull(first);
    memcpy(first, out.data, (size_t)n * sizeof(double));
    run_node(op, at, 1, nin, in, out);
    for (int64_t i = 0; i < n; i++)   /* a scatter-add's second pass adds in another order */
        ck_assert_msg(fabs(F64(out)[i] - 2 * first[i]) <= 1e-14 * (1 + fabs(first[i])),
                      "%s: accumulate: element %lld is %.17g, not 2·%.17g", tr_op_name(op), (long long)i,
                      F64(out)[i], first[i]);
    free(first);
}

/* The forward's gradient for input `input` is `analytic`, for loss weights w on its output. */

/* Asserts the check passes, naming the op and the input. */
#define gc_assert(fwd, input, weights, analytic)                                               \
    do {                                                                                       \
        double gc_e = gc_error((fwd), (input), (weights), (analytic));                         \
        ck_assert_msg(gc_e <= GC_TOL, "%s: gradient of input %d: normwise error %.3g > %.0e", \
                      tr_op_name((fwd)->node->op), (input), gc_e, GC_TOL);                    \
    } while (0)

#endif
