/* CPU convolution, batch-norm and pooling kernels: finite-difference gradient checks in f64
 * (gradcheck.h says why the tolerance is what it is), forward values against direct loops
 * written here, the running statistics and eval mode, accumulation (+=), f32 agreeing with f64,
 * the filter gradient's independence of the thread count, and a workspace that is too small.
 * GC_VERBOSE=1 in the environment prints each gradient check's error. */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>

#define D(t) ((double *)(t).data)

/* gc_assert, printing the error too when GC_VERBOSE is set: the margin under GC_TOL shows. */
#define check_grad(fwd, input, weights, analytic)                                               \
    do {                                                                                        \
        double e_ = gc_error((fwd), (input), (weights), (analytic));                            \
        if (getenv("GC_VERBOSE"))                                                               \
            printf("%-14s input %d: normwise FD error %.2e\n", tr_op_name((fwd)->node->op),     \
                   (input), e_);                                                                \
        ck_assert_msg(e_ <= GC_TOL, "%s: gradient of input %d: normwise error %.3g > %.0e",     \
                      tr_op_name((fwd)->node->op), (input), e_, GC_TOL);                        \
    } while (0)

/* A tensor of the given dims filled uniformly in [lo, hi). */
static struct tr_tensor filled(struct tr_tensor t, uint64_t *seed, double lo, double hi)
{
    gc_fill(&t, seed, lo, hi);
    return t;
}
#define gc_random(seed, lo, hi, ...) filled(gc_make(TR_F64, __VA_ARGS__), (seed), (lo), (hi))

/* Distinct values 0.01 apart, shuffled and centred on 0: every max is unique by far more than
 * the FD step, and many windows hold only negatives (where a zero from padding would win). */
static void fill_distinct(struct tr_tensor *t, uint64_t *seed)
{
    int64_t n = tr_tensor_numel(t);
    double *x = t->data;
    for (int64_t i = 0; i < n; i++)
        x[i] = 0.01 * (double)(i - n / 2);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)gc_uniform(seed, 0, (double)(i + 1));
        double v = x[i];
        x[i] = x[j], x[j] = v;
    }
}

/* Binds a node's tensors plus the workspace the CPU backend asks for (freed by unbind). */
static struct tr_kernel_args bind(const struct tr_node *node, int nin, const struct tr_tensor *in,
                                  int nout, const struct tr_tensor *out)
{
    struct tr_kernel_args a = {.node = node, .nin = nin, .nout = nout};
    memcpy(a.in, in, sizeof(*in) * (size_t)nin);
    memcpy(a.out, out, sizeof(*out) * (size_t)nout);
    a.workspace_bytes = tr_cpu_ops.workspace_bytes(node, a.in, a.out);
    a.workspace = a.workspace_bytes ? malloc(a.workspace_bytes) : NULL;
    return a;
}
#define BIND(node, ins, outs) \
    bind((node), (int)(sizeof(ins) / sizeof((ins)[0])), (ins), (int)(sizeof(outs) / sizeof((outs)[0])), (outs))

static void unbind(struct tr_kernel_args *a)
{
    free(a->workspace);
    a->workspace = NULL;
}

static void free_all(struct tr_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        gc_free(&t[i]);
}

/* ---- conv2d ---------------------------------------------------------------------------- */

/* The three conv kernels, in the order the tables below bind their tensors. */
static const enum tr_op conv_ops[3] = {TR_OP_CONV2D, TR_OP_CONV2D_BWD_DATA, TR_OP_CONV2D_BWD_FILTER};

struct conv_case {
    int64_t N, C, H, W, O, kh, kw;
    int stride, pad;
};

/* y[n][o][oh][ow] = Σ_c,i,j w[o][c][i][j]·x[n][c][oh·s − p + i][ow·s − p + j], zero outside */
static double direct_conv_at(const struct conv_case *k, const double *x, const double *w,
                             int64_t n, int64_t o, int64_t oh, int64_t ow)
{
    double sum = 0;
    for (int64_t c = 0; c < k->C; c++)
        for (int64_t i = 0; i < k->kh; i++)
            for (int64_t j = 0; j < k->kw; j++) {
                int64_t h = oh * k->stride - k->pad + i, v = ow * k->stride - k->pad + j;
                if (h >= 0 && h < k->H && v >= 0 && v < k->W)
                    sum += w[((o * k->C + c) * k->kh + i) * k->kw + j] *
                           x[((n * k->C + c) * k->H + h) * k->W + v];
            }
    return sum;
}

static void assert_direct_conv(const struct conv_case *k, const struct tr_tensor *x,
                               const struct tr_tensor *w, const struct tr_tensor *y)
{
    const double *out = y->data;
    int64_t Ho = y->dim[2], Wo = y->dim[3];
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t o = 0; o < k->O; o++)
            for (int64_t p = 0; p < Ho * Wo; p++) {
                double want = direct_conv_at(k, x->data, w->data, n, o, p / Wo, p % Wo);
                ck_assert_double_eq_tol(out[(n * k->O + o) * Ho * Wo + p], want, 1e-12);
            }
}

/* Forward against the direct loops, then dL/dx by CONV2D_BWD_DATA and dL/dw by
 * CONV2D_BWD_FILTER against central differences. */
static void check_conv(struct conv_case k, uint64_t seed)
{
    int64_t Ho = (k.H + 2 * k.pad - k.kh) / k.stride + 1, Wo = (k.W + 2 * k.pad - k.kw) / k.stride + 1;
    struct tr_tensor t[] = {gc_random(&seed, -1, 1, k.N, k.C, k.H, k.W),
                            gc_random(&seed, -1, 1, k.O, k.C, k.kh, k.kw),
                            gc_make(TR_F64, k.N, k.O, Ho, Wo), gc_random(&seed, -1, 1, k.N, k.O, Ho, Wo),
                            gc_make(TR_F64, k.N, k.C, k.H, k.W), gc_make(TR_F64, k.O, k.C, k.kh, k.kw)};
    struct tr_tensor x = t[0], w = t[1], y = t[2], dy = t[3], dx = t[4], dw = t[5];
    struct tr_node f = {.op = TR_OP_CONV2D, .attrs.conv = {k.stride, k.pad}};
    struct tr_node bd = {.op = TR_OP_CONV2D_BWD_DATA, .attrs = f.attrs};
    struct tr_node bf = {.op = TR_OP_CONV2D_BWD_FILTER, .attrs = f.attrs};
    struct tr_kernel_args fa = BIND(&f, ((struct tr_tensor[]){x, w}), ((struct tr_tensor[]){y}));
    struct tr_kernel_args da = BIND(&bd, ((struct tr_tensor[]){dy, w}), ((struct tr_tensor[]){dx}));
    struct tr_kernel_args wa = BIND(&bf, ((struct tr_tensor[]){dy, x}), ((struct tr_tensor[]){dw}));
    gc_run(&fa), gc_run(&da), gc_run(&wa);
    assert_direct_conv(&k, &x, &w, &y);
    struct tr_tensor weights[1] = {dy};
    check_grad(&fa, 0, weights, &dx);
    check_grad(&fa, 1, weights, &dw);
    unbind(&fa), unbind(&da), unbind(&wa);
    free_all(t, 6);
}

/* A 5×7 input, a 3×2 kernel: W = 7 at stride 2 leaves the last column out of every window. */
START_TEST(conv2d_gradients)
{
    for (int stride = 1; stride <= 2; stride++)
        for (int pad = 0; pad <= 1; pad++)
            check_conv((struct conv_case){2, 2, 5, 7, 3, 3, 2, stride, pad}, 10 + (uint64_t)(stride * 2 + pad));
}
END_TEST

/* 1×1 kernels: stride 1 unpadded reads the image in place (no im2col); stride 2 does not. */
START_TEST(conv2d_pointwise_gradients)
{
    check_conv((struct conv_case){2, 3, 4, 5, 2, 1, 1, 1, 0}, 20);
    check_conv((struct conv_case){2, 3, 4, 5, 2, 1, 1, 2, 0}, 21);
    check_conv((struct conv_case){1, 2, 3, 3, 4, 3, 3, 1, 1}, 22);   /* N = 1, square */
}
END_TEST

/* All of a run's outputs, concatenated into one allocation (for memcmp). */
static char *outputs_copy(const struct tr_kernel_args *a, size_t *bytes)
{
    *bytes = 0;
    for (int i = 0; i < a->nout; i++)
        *bytes += tr_tensor_bytes(&a->out[i]);
    char *copy = malloc(*bytes), *at = copy;
    for (int i = 0; i < a->nout; i++)
        at = (char *)memcpy(at, a->out[i].data, tr_tensor_bytes(&a->out[i])) + tr_tensor_bytes(&a->out[i]);
    return copy;
}

/* The workspace is one image's columns, C·kh·kw·Ho·Wo values, for each thread that takes
 * images (one per image at most), and for the filter gradient one partial O·C·kh·kw per run of
 * images (min(N, 8) runs) besides. Less than one thread's share is refused with a sentence by
 * all three kernels, and so is no workspace at all; a workspace sized for more threads than
 * run, or fewer, gives the same bits. */
START_TEST(conv2d_workspace)
{
    uint64_t seed = 30;
    struct tr_tensor t[] = {gc_random(&seed, -1, 1, 2, 3, 6, 5), gc_random(&seed, -1, 1, 4, 3, 3, 2),
                            gc_make(TR_F64, 2, 4, 3, 3)};   /* stride 2, pad 1: Ho = 3, Wo = 3 */
    struct tr_tensor x = t[0], w = t[1], y = t[2];
    const struct tr_tensor ins[3][2] = {{x, w}, {y, w}, {y, x}}, outs[3] = {y, x, w};
    const size_t col = 3 * 3 * 2 * 3 * 3 * sizeof(double), partials = 2 * 4 * 3 * 3 * 2 * sizeof(double);
    for (int k = 0; k < 3; k++) {
        struct tr_node node = {.op = conv_ops[k], .attrs.conv = {2, 1}};
        size_t extra = conv_ops[k] == TR_OP_CONV2D_BWD_FILTER ? partials : 0;
        omp_set_num_threads(3);   /* N = 2 images: two threads' columns */
        struct tr_kernel_args a = bind(&node, 2, ins[k], 1, &outs[k]);
        ck_assert_uint_eq(a.workspace_bytes, 2 * col + extra);
        gc_run(&a);
        size_t bytes, other;
        char *wide = outputs_copy(&a, &bytes);
        omp_set_num_threads(1);
        ck_assert_uint_eq(tr_cpu_ops.workspace_bytes(&node, ins[k], &outs[k]), col + extra);
        a.workspace_bytes = col + extra;   /* room for one thread only, while 3 may run */
        omp_set_num_threads(3);
        gc_run(&a);
        char *narrow = outputs_copy(&a, &other);
        ck_assert_msg(memcmp(wide, narrow, bytes) == 0, "%s: the result depends on the workspace",
                      tr_op_name(conv_ops[k]));
        free(wide), free(narrow);
        char error[GC_ERROR_MAX] = "";
        a.workspace_bytes = col + extra - 1;
        ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &a, error), TR_EINVAL);
        ck_assert_msg(strstr(error, "workspace") && strstr(error, tr_op_name(conv_ops[k])), "%s", error);
        void *ws = a.workspace;
        a.workspace = NULL, a.workspace_bytes = 0, error[0] = 0;
        ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &a, error), TR_EINVAL);
        ck_assert_str_ne(error, "");
        a.workspace = ws;
        unbind(&a);
    }
    omp_set_num_threads(1);
    struct tr_tensor x32 = {.dtype = TR_F32, .rank = 4, .dim = {2, 3, 6, 5}};
    struct tr_node node = {.op = TR_OP_CONV2D, .attrs.conv = {2, 1}};
    ck_assert_uint_eq(tr_cpu_ops.workspace_bytes(&node, (struct tr_tensor[]){x32, w}, &y),
                      col / 2);
    free_all(t, 3);
}
END_TEST

/* One conv kernel on x [4, 8, 20, 20], w [48, 8, 3, 3], stride 1, pad 1 run on some threads:
 * the 48×72×400 filter GEMM is one whose bits OpenBLAS's own threads would change. */
static char *conv_on_threads(int op, enum tr_dtype type, int64_t N, int threads, size_t *bytes)
{
    uint64_t seed = 40;
    struct tr_tensor t[] = {gc_tensor(type, 4, GC_DIMS(N, 8, 20, 20)), gc_tensor(type, 4, GC_DIMS(48, 8, 3, 3)),
                            gc_tensor(type, 4, GC_DIMS(N, 48, 20, 20))};
    for (int i = 0; i < 3; i++)
        gc_fill(&t[i], &seed, -1, 1);
    const struct tr_tensor ins[3][2] = {{t[0], t[1]}, {t[2], t[1]}, {t[2], t[0]}}, outs[3] = {t[2], t[0], t[1]};
    struct tr_node node = {.op = conv_ops[op], .attrs.conv = {1, 1}};
    omp_set_num_threads(threads);   /* before bind: the workspace holds a copy per thread */
    struct tr_kernel_args a = bind(&node, 2, ins[op], 1, &outs[op]);
    gc_run(&a);
    char *copy = outputs_copy(&a, bytes);
    unbind(&a);
    free_all(t, 3);
    return copy;
}

/* 4 images, and 1: a lone image's GEMM must not fall to OpenBLAS's own threads either. */
START_TEST(conv2d_thread_independent)
{
    for (int64_t N = 4; N >= 1; N -= 3)
        for (int op = 0; op < 3; op++)
            for (int f32 = 0; f32 <= 1; f32++) {
                size_t bytes, other;
                char *one = conv_on_threads(op, f32 ? TR_F32 : TR_F64, N, 1, &bytes);
                for (int threads = 2; threads <= 4; threads++) {
                    char *many = conv_on_threads(op, f32 ? TR_F32 : TR_F64, N, threads, &other);
                    ck_assert_msg(memcmp(one, many, bytes) == 0, "%s %s N=%lld: 1 and %d threads differ",
                                  tr_op_name(conv_ops[op]), f32 ? "f32" : "f64", (long long)N, threads);
                    free(many);
                }
                free(one);
            }
}
END_TEST

/* ---- batchnorm ----------------------------------------------------------------------------- */

#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f

/* x, gamma, beta, running mean, running var (positive) for x of the given rank. */
static void bn_inputs(struct tr_tensor *in, int rank4, int64_t N, int64_t C, uint64_t *seed)
{
    in[0] = rank4 ? gc_random(seed, -2, 3, N, C, 2, 3) : gc_random(seed, -2, 3, N, C);
    in[1] = gc_random(seed, 0.5, 1.5, C);
    in[2] = gc_random(seed, -1, 1, C);
    in[3] = gc_random(seed, -0.5, 0.5, C);
    in[4] = gc_random(seed, 0.5, 2, C);
}

/* Training: dL/dx, dL/dgamma, dL/dbeta by BATCHNORM_BWD against central differences. */
static void check_batchnorm_grad(int rank4, int64_t N, int64_t C, uint64_t seed)
{
    struct tr_tensor t[9];
    bn_inputs(t, rank4, N, C, &seed);
    t[5] = gc_tensor(TR_F64, t[0].rank, t[0].dim);               /* y */
    t[6] = gc_make(TR_F64, 2, C);                                  /* saved */
    t[7] = filled(gc_tensor(TR_F64, t[0].rank, t[0].dim), &seed, -1, 1);   /* dy */
    t[8] = gc_tensor(TR_F64, t[0].rank, t[0].dim);               /* dx */
    struct tr_tensor dgamma = gc_make(TR_F64, C), dbeta = gc_make(TR_F64, C);
    struct tr_node f = {.op = TR_OP_BATCHNORM, .attrs.batchnorm = {BN_EPS, BN_MOMENTUM, 1}};
    struct tr_node b = {.op = TR_OP_BATCHNORM_BWD, .attrs = f.attrs};
    struct tr_kernel_args fa = bind(&f, 5, t, 2, &t[5]);
    gc_run(&fa);
    struct tr_kernel_args ba = BIND(&b, ((struct tr_tensor[]){t[7], t[0], t[1], t[6]}),
                                    ((struct tr_tensor[]){t[8], dgamma, dbeta}));
    gc_run(&ba);
    struct tr_tensor weights[2] = {t[7], {0}};   /* saved is not part of the loss */
    check_grad(&fa, 0, weights, &t[8]);
    check_grad(&fa, 1, weights, &dgamma);
    check_grad(&fa, 2, weights, &dbeta);
    unbind(&fa), unbind(&ba);
    free_all(t, 9), gc_free(&dgamma), gc_free(&dbeta);
}

START_TEST(batchnorm_gradients)
{
    check_batchnorm_grad(1, 3, 2, 50);   /* [3, 2, 2, 3] */
    check_batchnorm_grad(0, 5, 3, 51);   /* [5, 3] */
    check_batchnorm_grad(0, 4, 1, 52);   /* one channel */
}
END_TEST

/* mean, biased and unbiased variance of channel c of x [N, C, S], written out directly. */
static void channel_stats(const struct tr_tensor *x, int64_t c, double *mean, double *var_b, double *var_u)
{
    int64_t N = x->dim[0], C = x->dim[1], S = tr_tensor_numel(x) / (N * C);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < N * S; i++)
        sum += D(*x)[(i / S * C + c) * S + i % S];
    *mean = sum / (double)(N * S);
    for (int64_t i = 0; i < N * S; i++) {
        double d = D(*x)[(i / S * C + c) * S + i % S] - *mean;
        sq += d * d;
    }
    *var_b = sq / (double)(N * S), *var_u = sq / (double)(N * S - 1);
}

/* y = gamma·(x − mean)·invstd + beta and saved = (mean, invstd), for every element. */
static void assert_normalised(const struct tr_tensor *t, int64_t c, double mean, double invstd)
{
    const struct tr_tensor *x = &t[0], *y = &t[5], *saved = &t[6];
    int64_t N = x->dim[0], C = x->dim[1], S = tr_tensor_numel(x) / (N * C);
    ck_assert_double_eq_tol(D(*saved)[c], mean, 1e-12);
    ck_assert_double_eq_tol(D(*saved)[C + c], invstd, 1e-9);
    for (int64_t i = 0; i < N * S; i++) {
        int64_t k = (i / S * C + c) * S + i % S;
        double want = D(t[1])[c] * (D(*x)[k] - mean) * invstd + D(t[2])[c];
        ck_assert_double_eq_tol(D(*y)[k], want, 1e-10);
    }
}

/* Training normalises with the batch's biased variance and moves the running statistics like
 * PyTorch: running = (1 − momentum)·running + momentum·batch, the variance unbiased. */
static void check_running_statistics(int rank4, int64_t N, uint64_t seed)
{
    struct tr_tensor t[7];
    bn_inputs(t, rank4, N, 3, &seed);
    t[5] = gc_tensor(TR_F64, t[0].rank, t[0].dim), t[6] = gc_make(TR_F64, 2, 3);
    double run_mean[3], run_var[3], mom = BN_MOMENTUM, eps = BN_EPS;
    memcpy(run_mean, t[3].data, sizeof run_mean), memcpy(run_var, t[4].data, sizeof run_var);
    struct tr_node f = {.op = TR_OP_BATCHNORM, .attrs.batchnorm = {BN_EPS, BN_MOMENTUM, 1}};
    struct tr_kernel_args fa = bind(&f, 5, t, 2, &t[5]);
    gc_run(&fa);
    for (int64_t c = 0; c < 3; c++) {
        double mean, var_b, var_u;
        channel_stats(&t[0], c, &mean, &var_b, &var_u);
        ck_assert_double_eq_tol(D(t[3])[c], (1 - mom) * run_mean[c] + mom * mean, 1e-12);
        ck_assert_double_eq_tol(D(t[4])[c], (1 - mom) * run_var[c] + mom * var_u, 1e-12);
        assert_normalised(t, c, mean, 1 / sqrt(var_b + eps));
    }
    unbind(&fa);
    free_all(t, 7);
}

START_TEST(batchnorm_running_statistics)
{
    check_running_statistics(1, 4, 60);   /* [4, 3, 2, 3] */
    check_running_statistics(0, 2, 62);   /* [2, 3]: two values, the fewest training allows */
}
END_TEST

/* Eval normalises with the running statistics and leaves them as they are; a batch of one is
 * fine there, while training refuses it (no unbiased variance) with a sentence. */
START_TEST(batchnorm_eval_mode)
{
    uint64_t seed = 61;
    struct tr_tensor t[7];
    bn_inputs(t, 1, 1, 3, &seed);
    t[5] = gc_tensor(TR_F64, 4, t[0].dim), t[6] = gc_make(TR_F64, 2, 3);
    double run_mean[3], run_var[3];
    memcpy(run_mean, t[3].data, sizeof run_mean), memcpy(run_var, t[4].data, sizeof run_var);
    struct tr_node f = {.op = TR_OP_BATCHNORM, .attrs.batchnorm = {BN_EPS, BN_MOMENTUM, 0}};
    struct tr_kernel_args fa = bind(&f, 5, t, 2, &t[5]);
    gc_run(&fa);
    ck_assert_mem_eq(t[3].data, run_mean, sizeof run_mean);
    ck_assert_mem_eq(t[4].data, run_var, sizeof run_var);
    for (int64_t c = 0; c < 3; c++)
        assert_normalised(t, c, run_mean[c], 1 / sqrt(run_var[c] + (double)BN_EPS));
    unbind(&fa);
    free_all(t, 7);

    bn_inputs(t, 0, 1, 3, &seed);   /* x [1, 3] in training */
    t[5] = gc_make(TR_F64, 1, 3), t[6] = gc_make(TR_F64, 2, 3);
    f.attrs.batchnorm.training = 1;
    fa = bind(&f, 5, t, 2, &t[5]);
    char error[GC_ERROR_MAX] = "";
    ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &fa, error), TR_EINVAL);
    ck_assert_msg(strstr(error, "more than one value"), "%s", error);
    unbind(&fa);
    free_all(t, 7);
}
END_TEST

/* ---- channels last ------------------------------------------------------------------------- */

static void assert_nhwc_close(const struct tr_tensor *h, const struct tr_tensor *t, double tol, const char *what)
{
    struct tr_tensor want = gc_nhwc(t);
    for (int64_t i = 0; i < tr_tensor_numel(&want); i++)
        ck_assert_msg(fabs(D(*h)[i] - D(want)[i]) <= tol * (1 + fabs(D(want)[i])), "%s [%lld]: channels last %.17g, NCHW %.17g",
                      what, (long long)i, D(*h)[i], D(want)[i]);
    gc_free(&want);
}

static void assert_close_vec(const struct tr_tensor *a, const struct tr_tensor *b, double tol, const char *what)
{
    for (int64_t i = 0; i < tr_tensor_numel(b); i++)
        ck_assert_msg(fabs(D(*a)[i] - D(*b)[i]) <= tol * (1 + fabs(D(*b)[i])), "%s [%lld]: channels last %.17g, NCHW %.17g",
                      what, (long long)i, D(*a)[i], D(*b)[i]);
}

/* Batch norm (training, evaluation, backward; accumulating too) and global average pooling on
 * images channels last compute what they do on [N, C, H, W]: the batch norm's sums run in
 * another order (fixed runs of rows), so within f64 rounding; the pooling's in the same order,
 * so the same bits. N·H·W = 288 rows: several runs. */
START_TEST(channels_last_matches)
{
    const int64_t N = 4, C = 5, H = 8, W = 9;
    for (int acc = 0; acc < 2; acc++)
        for (int training = 0; training < 2; training++) {
            uint64_t seed = 900 + (uint64_t)(2 * acc + training);
            struct tr_tensor in[5], last[5];
            bn_inputs(in, 1, N, C, &seed);
            gc_free(&in[0]);
            in[0] = gc_random(&seed, -2, 3, N, C, H, W);
            for (int i = 0; i < 5; i++)
                last[i] = i == 0 ? gc_nhwc(&in[0]) : gc_random(&seed, 0, 1, C);
            for (int i = 1; i < 5; i++)
                memcpy(last[i].data, in[i].data, tr_tensor_bytes(&in[i]));
            struct tr_tensor y = gc_random(&seed, -1, 1, N, C, H, W), saved = gc_make(TR_F64, 2, C);
            struct tr_tensor y_last = gc_nhwc(&y), saved_last = gc_make(TR_F64, 2, C);
            struct tr_node f = {.op = TR_OP_BATCHNORM, .attrs.batchnorm = {BN_EPS, BN_MOMENTUM, (uint8_t)training, 0},
                                .accumulate = (uint8_t)acc};
            struct tr_node fl = f;
            fl.attrs.batchnorm.channels_last = 1;
            struct tr_kernel_args a = bind(&f, 5, in, 2, (struct tr_tensor[]){y, saved});
            struct tr_kernel_args al = bind(&fl, 5, last, 2, (struct tr_tensor[]){y_last, saved_last});
            gc_run(&a), gc_run(&al);
            assert_nhwc_close(&y_last, &y, 1e-12, "batchnorm y");
            assert_close_vec(&saved_last, &saved, 1e-12, "batchnorm saved");
            assert_close_vec(&last[3], &in[3], 1e-12, "running mean");
            assert_close_vec(&last[4], &in[4], 1e-12, "running var");
            /* the backward from the saved statistics */
            struct tr_tensor dy = gc_random(&seed, -1, 1, N, C, H, W), dx = gc_random(&seed, -1, 1, N, C, H, W);
            struct tr_tensor dy_last = gc_nhwc(&dy), dx_last = gc_nhwc(&dx);
            struct tr_tensor dg = gc_random(&seed, -1, 1, C), db = gc_random(&seed, -1, 1, C);
            struct tr_tensor dg_last = gc_make(TR_F64, C), db_last = gc_make(TR_F64, C);
            memcpy(dg_last.data, dg.data, tr_tensor_bytes(&dg)), memcpy(db_last.data, db.data, tr_tensor_bytes(&db));
            struct tr_node b = {.op = TR_OP_BATCHNORM_BWD, .attrs = f.attrs, .accumulate = (uint8_t)acc}, bl = b;
            bl.attrs.batchnorm.channels_last = 1;
            struct tr_kernel_args ba = BIND(&b, ((struct tr_tensor[]){dy, in[0], in[1], saved}),
                                            ((struct tr_tensor[]){dx, dg, db}));
            struct tr_kernel_args bla = BIND(&bl, ((struct tr_tensor[]){dy_last, last[0], last[1], saved}),
                                             ((struct tr_tensor[]){dx_last, dg_last, db_last}));
            gc_run(&ba), gc_run(&bla);
            assert_nhwc_close(&dx_last, &dx, 1e-12, "batchnorm_bwd dx");
            assert_close_vec(&dg_last, &dg, 1e-12, "batchnorm_bwd dgamma");
            assert_close_vec(&db_last, &db, 1e-12, "batchnorm_bwd dbeta");
            /* global average pooling and its backward: the same bits */
            struct tr_tensor p = gc_random(&seed, -1, 1, N, C), p_last = gc_make(TR_F64, N, C);
            memcpy(p_last.data, p.data, tr_tensor_bytes(&p));
            struct tr_node g = {.op = TR_OP_GLOBAL_AVGPOOL, .accumulate = (uint8_t)acc}, gl = g;
            gl.attrs.pool.channels_last = 1;
            struct tr_kernel_args ga = bind(&g, 1, &in[0], 1, &p), gla = bind(&gl, 1, &last[0], 1, &p_last);
            gc_run(&ga), gc_run(&gla);
            ck_assert_mem_eq(p_last.data, p.data, tr_tensor_bytes(&p));
            struct tr_node gb = {.op = TR_OP_GLOBAL_AVGPOOL_BWD, .accumulate = (uint8_t)acc}, gbl = gb;
            gbl.attrs.pool.channels_last = 1;
            struct tr_kernel_args gba = bind(&gb, 1, &p, 1, &dx), gbla = bind(&gbl, 1, &p, 1, &dx_last);
            gc_run(&gba), gc_run(&gbla);
            assert_nhwc_close(&dx_last, &dx, acc ? 1e-12 : 0, "global_avgpool_bwd");   /* adds to the close dx above */
            unbind(&a), unbind(&al), unbind(&ba), unbind(&bla), unbind(&ga), unbind(&gla), unbind(&gba), unbind(&gbla);
            free_all(in, 5), free_all(last, 5);
            gc_free(&y), gc_free(&saved), gc_free(&y_last), gc_free(&saved_last), gc_free(&dy), gc_free(&dx);
            gc_free(&dy_last), gc_free(&dx_last), gc_free(&dg), gc_free(&db), gc_free(&dg_last), gc_free(&db_last);
            gc_free(&p), gc_free(&p_last);
        }
}
END_TEST

/* The rows' batch norm gives the same bits on 1, 2 and 3 threads, f32 (its sums' runs depend on
 * the rows alone). */
START_TEST(channels_last_thread_independent)
{
    const int64_t N = 3, H = 10, W = 11, C = 24;   /* 330 rows: 5 runs */
    uint64_t seed = 950;
    struct tr_tensor x = gc_make(TR_F32, N, H, W, C), dy = gc_make(TR_F32, N, H, W, C);
    gc_fill(&x, &seed, -2, 3), gc_fill(&dy, &seed, -1, 1);
    struct tr_tensor gamma = gc_make(TR_F32, C), beta = gc_make(TR_F32, C), mean = gc_make(TR_F32, C),
                     var = gc_make(TR_F32, C);
    gc_fill(&gamma, &seed, 0.5, 1.5), gc_fill(&beta, &seed, -1, 1), gc_fill(&mean, &seed, 0, 0), gc_fill(&var, &seed, 1, 1);
    struct tr_node f = {.op = TR_OP_BATCHNORM, .attrs.batchnorm = {BN_EPS, BN_MOMENTUM, 1, 1}};
    struct tr_node b = {.op = TR_OP_BATCHNORM_BWD, .attrs = f.attrs};
    char *runs[3];
    size_t bytes = 0;
    for (int threads = 1; threads <= 3; threads++) {
        struct tr_tensor y = gc_make(TR_F32, N, H, W, C), saved = gc_make(TR_F32, 2, C), dx = gc_make(TR_F32, N, H, W, C),
                         dg = gc_make(TR_F32, C), db = gc_make(TR_F32, C);
        omp_set_num_threads(threads);
        struct tr_kernel_args a = BIND(&f, ((struct tr_tensor[]){x, gamma, beta, mean, var}), ((struct tr_tensor[]){y, saved}));
        gc_run(&a);
        struct tr_kernel_args ba = BIND(&b, ((struct tr_tensor[]){dy, x, gamma, saved}), ((struct tr_tensor[]){dx, dg, db}));
        gc_run(&ba);
        struct tr_tensor all[5] = {y, saved, dx, dg, db};
        bytes = 0;
        for (int i = 0; i < 5; i++)
            bytes += tr_tensor_bytes(&all[i]);
        runs[threads - 1] = malloc(bytes);
        for (int i = 0, at = 0; i < 5; at += (int)tr_tensor_bytes(&all[i]), i++)
            memcpy(runs[threads - 1] + at, all[i].data, tr_tensor_bytes(&all[i]));
        unbind(&a), unbind(&ba);
        free_all(all, 5);
    }
    omp_set_num_threads(1);
    ck_assert_mem_eq(runs[0], runs[1], bytes);
    ck_assert_mem_eq(runs[0], runs[2], bytes);
    for (int i = 0; i < 3; i++)
        free(runs[i]);
    gc_free(&x), gc_free(&dy), gc_free(&gamma), gc_free(&beta), gc_free(&mean), gc_free(&var);
}
END_TEST

/* ---- pooling ------------------------------------------------------------------------------- */

struct pool_case {
    int kernel, stride, pad;
};

static const struct pool_case pool_cases[] = {{2, 2, 0}, {3, 1, 1}, {3, 2, 1}, {2, 1, 1}};
#define NPOOL_CASES ((int)(sizeof pool_cases / sizeof pool_cases[0]))

static int64_t pool_out(int64_t in, struct pool_case k) { return (in + 2 * k.pad - k.kernel) / k.stride + 1; }

/* y and argmax against a direct scan of every window's real values; max: 1, mean (÷ k²): 0 */
static void assert_pool_values(const struct tr_tensor *x, const struct tr_tensor *y,
                               const int32_t *argmax, struct pool_case k)
{
    int64_t H = x->dim[2], W = x->dim[3], Ho = y->dim[2], Wo = y->dim[3];
    for (int64_t o = 0; o < tr_tensor_numel(y); o++) {
        int64_t p = o / (Ho * Wo), oh = o / Wo % Ho, ow = o % Wo, best = -1;
        double sum = 0;
        for (int64_t h = oh * k.stride - k.pad; h < oh * k.stride - k.pad + k.kernel; h++)
            for (int64_t w = ow * k.stride - k.pad; w < ow * k.stride - k.pad + k.kernel; w++) {
                if (h < 0 || h >= H || w < 0 || w >= W)
                    continue;
                double v = D(*x)[p * H * W + h * W + w];
                sum += v;
                if (best < 0 || v > D(*x)[p * H * W + best])
                    best = h * W + w;
            }
        if (argmax) {
            ck_assert_int_eq(argmax[o], best);
            ck_assert_double_eq(D(*y)[o], D(*x)[p * H * W + best]);
        } else {
            ck_assert_double_eq_tol(D(*y)[o], sum / (k.kernel * k.kernel), 1e-14);
        }
    }
}

/* Values, then dL/dx of MAXPOOL (max: 1) or AVGPOOL (0) against central differences. */
static void check_pool(int max, struct pool_case k, uint64_t seed)
{
    int64_t Ho = pool_out(5, k), Wo = pool_out(6, k);
    struct tr_tensor x = gc_make(TR_F64, 2, 2, 5, 6), y = gc_make(TR_F64, 2, 2, Ho, Wo),
                     argmax = gc_make(TR_I32, 2, 2, Ho, Wo), dy = gc_random(&seed, -1, 1, 2, 2, Ho, Wo),
                     dx = gc_make(TR_F64, 2, 2, 5, 6);
    fill_distinct(&x, &seed);
    struct tr_node f = {.op = max ? TR_OP_MAXPOOL : TR_OP_AVGPOOL, .attrs.pool = {k.kernel, k.stride, k.pad}};
    struct tr_node b = {.op = max ? TR_OP_MAXPOOL_BWD : TR_OP_AVGPOOL_BWD, .attrs = f.attrs};
    struct tr_kernel_args fa = BIND(&f, ((struct tr_tensor[]){x}), ((struct tr_tensor[]){y, argmax}));
    fa.nout = max ? 2 : 1;
    gc_run(&fa);
    assert_pool_values(&x, &y, max ? argmax.data : NULL, k);
    struct tr_kernel_args ba = BIND(&b, ((struct tr_tensor[]){dy, argmax}), ((struct tr_tensor[]){dx}));
    ba.nin = max ? 2 : 1;
    gc_run(&ba);
    struct tr_tensor weights[2] = {dy, {0}};   /* argmax is not part of the loss */
    check_grad(&fa, 0, weights, &dx);
    gc_free(&x), gc_free(&y), gc_free(&argmax), gc_free(&dy), gc_free(&dx);
}

START_TEST(maxpool_gradients)
{
    for (int i = 0; i < NPOOL_CASES; i++)
        check_pool(1, pool_cases[i], 70 + (uint64_t)i);
}
END_TEST

START_TEST(avgpool_gradients)
{
    for (int i = 0; i < NPOOL_CASES; i++)
        check_pool(0, pool_cases[i], 80 + (uint64_t)i);
}
END_TEST

/* An all-negative plane: the padding's zeros must not win the max, nor be an argmax. Ones
 * averaged with kernel 3, pad 1: a corner window holds 4 real values of 9, an edge 6. */
START_TEST(pool_padding)
{
    uint64_t seed = 90;
    struct pool_case k = {3, 1, 1};
    struct tr_tensor x = gc_random(&seed, -3, -1, 1, 1, 3, 4), y = gc_make(TR_F64, 1, 1, 3, 4),
                     argmax = gc_make(TR_I32, 1, 1, 3, 4);
    struct tr_node mp = {.op = TR_OP_MAXPOOL, .attrs.pool = {3, 1, 1}};
    struct tr_node ap = {.op = TR_OP_AVGPOOL, .attrs = mp.attrs};
    struct tr_kernel_args ma = {.node = &mp, .in = {x}, .out = {y, argmax}, .nin = 1, .nout = 2};
    gc_run(&ma);
    assert_pool_values(&x, &y, argmax.data, k);
    for (int i = 0; i < 12; i++)
        ck_assert_double_lt(D(y)[i], -0.5);
    for (int i = 0; i < 12; i++)
        D(x)[i] = 1;
    struct tr_kernel_args aa = {.node = &ap, .in = {x}, .out = {y}, .nin = 1, .nout = 1};
    gc_run(&aa);
    static const double want[12] = {4, 6, 6, 4, 6, 9, 9, 6, 4, 6, 6, 4};
    for (int i = 0; i < 12; i++)
        ck_assert_double_eq_tol(D(y)[i], want[i] / 9, 1e-15);
    gc_free(&x), gc_free(&y), gc_free(&argmax);
}
END_TEST

/* Overlapping windows (kernel 3, stride 1) route to a shared argmax: the gradients add. */
START_TEST(maxpool_bwd_overlap)
{
    struct tr_tensor dy = gc_make(TR_F64, 1, 1, 2, 2), argmax = gc_make(TR_I32, 1, 1, 2, 2),
                     dx = gc_make(TR_F64, 1, 1, 4, 4);
    for (int i = 0; i < 4; i++)
        D(dy)[i] = i + 1, ((int32_t *)argmax.data)[i] = i == 3 ? 0 : 5;
    D(dx)[0] = 100;   /* zeroed first when not accumulating */
    struct tr_node b = {.op = TR_OP_MAXPOOL_BWD, .attrs.pool = {3, 1, 0}};
    struct tr_kernel_args ba = {.node = &b, .in = {dy, argmax}, .out = {dx}, .nin = 2, .nout = 1};
    gc_run(&ba);
    ck_assert_double_eq(D(dx)[5], 1 + 2 + 3);
    ck_assert_double_eq(D(dx)[0], 4);
    ((int32_t *)argmax.data)[2] = 16;   /* past the 4×4 plane: refused, not written */
    char error[GC_ERROR_MAX] = "";
    ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &ba, error), TR_EINVAL);
    ck_assert_msg(strstr(error, "argmax"), "%s", error);
    gc_free(&dy), gc_free(&argmax), gc_free(&dx);
}
END_TEST

START_TEST(global_avgpool_gradients)
{
    uint64_t seed = 95;
    struct tr_tensor x = gc_random(&seed, -1, 1, 2, 3, 3, 4), y = gc_make(TR_F64, 2, 3),
                     dy = gc_random(&seed, -1, 1, 2, 3), dx = gc_make(TR_F64, 2, 3, 3, 4);
    struct tr_node f = {.op = TR_OP_GLOBAL_AVGPOOL}, b = {.op = TR_OP_GLOBAL_AVGPOOL_BWD};
    struct tr_kernel_args fa = {.node = &f, .in = {x}, .out = {y}, .nin = 1, .nout = 1};
    struct tr_kernel_args ba = {.node = &b, .in = {dy}, .out = {dx}, .nin = 1, .nout = 1};
    gc_run(&fa), gc_run(&ba);
    for (int p = 0; p < 6; p++) {
        double sum = 0;
        for (int i = 0; i < 12; i++)
            sum += D(x)[p * 12 + i];
        ck_assert_double_eq_tol(D(y)[p], sum / 12, 1e-15);
    }
    struct tr_tensor weights[1] = {dy};
    check_grad(&fa, 0, weights, &dx);
    gc_free(&x), gc_free(&y), gc_free(&dy), gc_free(&dx);
}
END_TEST

/* ---- every op: accumulation and f32 ---------------------------------------------------------- */

/* One op bound to small random f64 tensors: x [2, 3, 5, 6]; conv w [4, 3, 3, 3] at stride 2,
 * pad 1 → [2, 4, 3, 3]; pools kernel 3, stride 2, pad 1 → [2, 3, 3, 3]. */
struct op_case {
    struct tr_node node;
    struct tr_kernel_args args;
};

static const enum tr_op case_ops[] = {
    TR_OP_CONV2D, TR_OP_CONV2D_BWD_DATA, TR_OP_CONV2D_BWD_FILTER, TR_OP_BATCHNORM,
    TR_OP_BATCHNORM_BWD, TR_OP_MAXPOOL, TR_OP_MAXPOOL_BWD, TR_OP_AVGPOOL, TR_OP_AVGPOOL_BWD,
    TR_OP_GLOBAL_AVGPOOL, TR_OP_GLOBAL_AVGPOOL_BWD};
#define NCASE_OPS ((int)(sizeof case_ops / sizeof case_ops[0]))

/* The inputs (first nin) then outputs of op, into t; returns nin, sets *nout. */
static int case_tensors(enum tr_op op, uint64_t *s, struct tr_tensor *t, int *nout)
{
    struct tr_tensor x = gc_random(s, -1, 1, 2, 3, 5, 6);
    switch (op) {
    case TR_OP_CONV2D:
        t[0] = x, t[1] = gc_random(s, -1, 1, 4, 3, 3, 3), t[2] = gc_make(TR_F64, 2, 4, 3, 3);
        *nout = 1;
        return 2;
    case TR_OP_CONV2D_BWD_DATA:
        t[0] = gc_random(s, -1, 1, 2, 4, 3, 3), t[1] = gc_random(s, -1, 1, 4, 3, 3, 3), t[2] = x;
        *nout = 1;
        return 2;
    case TR_OP_CONV2D_BWD_FILTER:
        t[0] = gc_random(s, -1, 1, 2, 4, 3, 3), t[1] = x, t[2] = gc_make(TR_F64, 4, 3, 3, 3);
        *nout = 1;
        return 2;
    case TR_OP_BATCHNORM:
        gc_free(&x), bn_inputs(t, 1, 2, 3, s);
        t[5] = gc_make(TR_F64, 2, 3, 2, 3), t[6] = gc_make(TR_F64, 2, 3);
        *nout = 2;
        return 5;
    case TR_OP_BATCHNORM_BWD:
        t[0] = gc_random(s, -1, 1, 2, 3, 5, 6), t[1] = x, t[2] = gc_random(s, 0.5, 1.5, 3);
        t[3] = gc_random(s, 0.5, 2, 2, 3);   /* saved: any mean, a positive invstd */
        t[4] = gc_make(TR_F64, 2, 3, 5, 6), t[5] = gc_make(TR_F64, 3), t[6] = gc_make(TR_F64, 3);
        *nout = 3;
        return 4;
    case TR_OP_MAXPOOL:
        fill_distinct(&x, s);
        t[0] = x, t[1] = gc_make(TR_F64, 2, 3, 3, 3), t[2] = gc_make(TR_I32, 2, 3, 3, 3);
        *nout = 2;
        return 1;
    case TR_OP_MAXPOOL_BWD:
        t[0] = gc_random(s, -1, 1, 2, 3, 3, 3), t[2] = x;
        t[1] = gc_make(TR_I32, 2, 3, 3, 3), gc_fill(&t[1], s, 0, 30);
        *nout = 1;
        return 2;
    case TR_OP_AVGPOOL:
        t[0] = x, t[1] = gc_make(TR_F64, 2, 3, 3, 3);
        *nout = 1;
        return 1;
    case TR_OP_AVGPOOL_BWD:
        t[0] = gc_random(s, -1, 1, 2, 3, 3, 3), t[1] = x;
        *nout = 1;
        return 1;
    case TR_OP_GLOBAL_AVGPOOL:
        t[0] = x, t[1] = gc_make(TR_F64, 2, 3);
        *nout = 1;
        return 1;
    case TR_OP_GLOBAL_AVGPOOL_BWD:
    /* not among case_ops: never asked for */
    case TR_OP_MATMUL: case TR_OP_BIAS_ADD: case TR_OP_ADD: case TR_OP_MUL: case TR_OP_SCALE:
    case TR_OP_RELU: case TR_OP_GELU: case TR_OP_TANH: case TR_OP_SOFTMAX: case TR_OP_LOG_SOFTMAX:
    case TR_OP_CROSS_ENTROPY: case TR_OP_LINEAR_CROSS_ENTROPY: case TR_OP_LAYERNORM:
    case TR_OP_EMBEDDING: case TR_OP_DROPOUT: case TR_OP_ATTENTION: case TR_OP_RESHAPE:
    case TR_OP_PERMUTE: case TR_OP_SLICE: case TR_OP_CONCAT: case TR_OP_GATHER:
    case TR_OP_MASKED_FILL: case TR_OP_CAST: case TR_OP_SUM: case TR_OP_MEAN: case TR_OP_ARGMAX:
    case TR_OP_BIAS_GRAD: case TR_OP_RELU_BWD: case TR_OP_GELU_BWD: case TR_OP_TANH_BWD:
    case TR_OP_SOFTMAX_BWD: case TR_OP_LOG_SOFTMAX_BWD: case TR_OP_CROSS_ENTROPY_BWD:
    case TR_OP_LINEAR_CROSS_ENTROPY_BWD: case TR_OP_LAYERNORM_BWD: case TR_OP_EMBEDDING_BWD:
    case TR_OP_ATTENTION_BWD: case TR_OP_SLICE_BWD:
    case TR_OP_GATHER_BWD: case TR_OP_SUM_BWD: case TR_OP_ACCUMULATE: case TR_NOPS:
        break;
    }
    t[0] = gc_random(s, -1, 1, 2, 3), t[1] = x;
    *nout = 1;
    return 1;
}

static void case_make(struct op_case *c, enum tr_op op, uint64_t seed)
{
    struct tr_tensor t[TR_MAX_IN + TR_MAX_OUT];
    int nout, nin = case_tensors(op, &seed, t, &nout);
    memset(&c->node, 0, sizeof c->node);
    c->node.op = op;
    if (op == TR_OP_CONV2D || op == TR_OP_CONV2D_BWD_DATA || op == TR_OP_CONV2D_BWD_FILTER)
        c->node.attrs.conv.stride = 2, c->node.attrs.conv.pad = 1;
    else if (op == TR_OP_BATCHNORM || op == TR_OP_BATCHNORM_BWD)
        c->node.attrs.batchnorm = (typeof(c->node.attrs.batchnorm)){BN_EPS, BN_MOMENTUM, 1, 0};
    else
        c->node.attrs.pool = (typeof(c->node.attrs.pool)){3, 2, 1, 0};
    c->args = bind(&c->node, nin, t, nout, &t[nin]);
}

static void case_free(struct op_case *c)
{
    free_all(c->args.in, c->args.nin), free_all(c->args.out, c->args.nout);
    unbind(&c->args);
}

/* Run twice, the second time accumulating: every float output (bar batchnorm's statistics)
 * doubles; argmax and the saved statistics are written, not added. */
START_TEST(accumulate_flag)
{
    for (int k = 0; k < NCASE_OPS; k++) {
        struct op_case c;
        case_make(&c, case_ops[k], 100 + (uint64_t)k);
        int nacc = case_ops[k] == TR_OP_BATCHNORM || case_ops[k] == TR_OP_MAXPOOL ? 1 : c.args.nout;
        gc_run(&c.args);
        double *first[TR_MAX_OUT];
        for (int i = 0; i < nacc; i++) {
            first[i] = malloc(tr_tensor_bytes(&c.args.out[i]));
            memcpy(first[i], c.args.out[i].data, tr_tensor_bytes(&c.args.out[i]));
        }
        c.node.accumulate = 1;
        gc_run(&c.args);
        for (int i = 0; i < nacc; i++) {
            for (int64_t j = 0; j < tr_tensor_numel(&c.args.out[i]); j++)
                ck_assert_msg(fabs(D(c.args.out[i])[j] - 2 * first[i][j]) <= 1e-12 * (1 + fabs(first[i][j])),
                              "%s output %d [%lld]: %g, not twice %g", tr_op_name(case_ops[k]), i,
                              (long long)j, D(c.args.out[i])[j], first[i][j]);
            free(first[i]);
        }
        case_free(&c);
    }
}
END_TEST

/* Every kernel of the small cases gives the same bits on 1 and on 3 threads. */
START_TEST(thread_count_independent)
{
    for (int k = 0; k < NCASE_OPS; k++) {
        char *runs[2];
        size_t bytes[2];
        for (int r = 0; r < 2; r++) {
            struct op_case c;
            case_make(&c, case_ops[k], 300 + (uint64_t)k);
            omp_set_num_threads(r ? 3 : 1);
            gc_run(&c.args);
            runs[r] = outputs_copy(&c.args, &bytes[r]);
            case_free(&c);
        }
        ck_assert_msg(memcmp(runs[0], runs[1], bytes[0]) == 0, "%s: 1 and 3 threads differ",
                      tr_op_name(case_ops[k]));
        free(runs[0]), free(runs[1]);
    }
}
END_TEST

/* A copy of t in f32 (i32 as is); t itself is rounded to f32 so both runs see one input. */
static struct tr_tensor to_f32(struct tr_tensor *t)
{
    struct tr_tensor c = gc_tensor(t->dtype == TR_F64 ? TR_F32 : t->dtype, t->rank, t->dim);
    for (int64_t i = 0; t->dtype == TR_F64 && i < tr_tensor_numel(t); i++)
        D(*t)[i] = ((float *)c.data)[i] = (float)D(*t)[i];
    if (t->dtype != TR_F64)
        memcpy(c.data, t->data, tr_tensor_bytes(t));
    return c;
}

/* ‖a32 − a64‖ / ‖a64‖ under 1e-5 (f32 rounding plus short sums), ints equal. */
static void assert_close(const struct tr_tensor *a32, const struct tr_tensor *a64, const char *what)
{
    if (a64->dtype != TR_F64) {
        ck_assert_mem_eq(a32->data, a64->data, tr_tensor_bytes(a64));
        return;
    }
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < tr_tensor_numel(a64); i++) {
        double d = ((float *)a32->data)[i] - D(*a64)[i];
        diff += d * d, norm += D(*a64)[i] * D(*a64)[i];
    }
    ck_assert_msg(sqrt(diff) <= 1e-5 * sqrt(norm), "%s: f32 vs f64 normwise %g", what, sqrt(diff / norm));
}

/* The f32 build of every kernel computes what the f64 one does, outputs and in-place inputs
 * (batchnorm's running statistics) alike. */
START_TEST(f32_agrees_with_f64)
{
    for (int k = 0; k < NCASE_OPS; k++) {
        struct op_case c;
        case_make(&c, case_ops[k], 200 + (uint64_t)k);
        struct tr_tensor t32[TR_MAX_IN + TR_MAX_OUT];
        int nin = c.args.nin, nout = c.args.nout;
        for (int i = 0; i < nin; i++)
            t32[i] = to_f32(&c.args.in[i]);
        for (int i = 0; i < nout; i++)
            t32[nin + i] = to_f32(&c.args.out[i]);
        struct tr_kernel_args a32 = bind(&c.node, nin, t32, nout, &t32[nin]);
        gc_run(&c.args), gc_run(&a32);
        char what[64];
        for (int i = 0; i < nin + nout; i++) {
            snprintf(what, sizeof what, "%s %s %d", tr_op_name(case_ops[k]), i < nin ? "input" : "output",
                     i < nin ? i : i - nin);
            assert_close(&t32[i], i < nin ? &c.args.in[i] : &c.args.out[i - nin], what);
        }
        free_all(t32, nin + nout), unbind(&a32);
        case_free(&c);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels_conv");
    TCase *tc = tcase_create("conv, batchnorm, pooling");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, conv2d_gradients);
    tcase_add_test(tc, conv2d_pointwise_gradients);
    tcase_add_test(tc, conv2d_workspace);
    tcase_add_test(tc, conv2d_thread_independent);
    tcase_add_test(tc, batchnorm_gradients);
    tcase_add_test(tc, batchnorm_running_statistics);
    tcase_add_test(tc, batchnorm_eval_mode);
    tcase_add_test(tc, channels_last_matches);
    tcase_add_test(tc, channels_last_thread_independent);
    tcase_add_test(tc, maxpool_gradients);
    tcase_add_test(tc, avgpool_gradients);
    tcase_add_test(tc, pool_padding);
    tcase_add_test(tc, maxpool_bwd_overlap);
    tcase_add_test(tc, global_avgpool_gradients);
    tcase_add_test(tc, accumulate_flag);
    tcase_add_test(tc, thread_count_independent);
    tcase_add_test(tc, f32_agrees_with_f64);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
