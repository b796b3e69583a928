/* CPU kernels, elementwise and GEMM: finite-difference gradient checks in f64 (gradcheck.h
 * says why the tolerance is what it is), accumulation (+=), and f32 agreeing with f64. */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

static struct tr_node node_of(enum tr_op op)
{
    return (struct tr_node){.op = op};
}

/* dL/dx of a unary op through its backward kernel: in (dy, saved) where saved is the forward's
 * input (use_input) or output. */
static void check_unary(enum tr_op fwd_op, enum tr_op bwd_op, int use_input, union tr_attrs at,
                        double lo, double hi)
{
    uint64_t seed = 42;
    struct tr_node f = node_of(fwd_op), b = node_of(bwd_op);
    f.attrs = b.attrs = at;
    struct tr_tensor x = gc_make(TR_F64, 3, 7), y = gc_make(TR_F64, 3, 7), w = gc_make(TR_F64, 3, 7),
                     dx = gc_make(TR_F64, 3, 7);
    gc_fill(&x, &seed, lo, hi);
    for (int i = 0; i < 21; i++)   /* keep away from kinks at 0 by more than the step */
        if (fabs(((double *)x.data)[i]) < 1e-3)
            ((double *)x.data)[i] = 0.5;
    gc_fill(&w, &seed, -1, 1);
    struct tr_kernel_args fa = {.node = &f, .in = {x}, .out = {y}, .nin = 1, .nout = 1};
    gc_run(&fa);
    struct tr_kernel_args ba = {.node = &b, .in = {w, use_input ? x : y}, .out = {dx}, .nin = 2, .nout = 1};
    gc_run(&ba);
    struct tr_tensor weights[1] = {w};
    gc_assert(&fa, 0, weights, &dx);
    gc_free(&x), gc_free(&y), gc_free(&w), gc_free(&dx);
}

START_TEST(relu_gradient) { check_unary(TR_OP_RELU, TR_OP_RELU_BWD, 0, (union tr_attrs){0}, -2, 2); }
END_TEST
START_TEST(tanh_gradient) { check_unary(TR_OP_TANH, TR_OP_TANH_BWD, 0, (union tr_attrs){0}, -3, 3); }
END_TEST
START_TEST(gelu_erf_gradient) { check_unary(TR_OP_GELU, TR_OP_GELU_BWD, 1, (union tr_attrs){.gelu = {0}}, -4, 4); }
END_TEST
START_TEST(gelu_tanh_gradient) { check_unary(TR_OP_GELU, TR_OP_GELU_BWD, 1, (union tr_attrs){.gelu = {1}}, -4, 4); }
END_TEST

/* GELU against reference values: PyTorch 1.13's F.gelu(x) and F.gelu(x, approximate='tanh'). */
START_TEST(gelu_values)
{
    static const double x[] = {-3, -1, -0.5, 0, 0.5, 1, 3};
    static const double erf_ref[] = {-0.0040496597, -0.15865526, -0.15426877, 0, 0.34573123, 0.84134474, 2.9959503};
    static const double tanh_ref[] = {-0.0036373201, -0.15880801, -0.15428599, 0, 0.34571401, 0.84119199, 2.9963627};
    for (int approx = 0; approx < 2; approx++) {
        struct tr_node f = {.op = TR_OP_GELU, .attrs.gelu = {(uint8_t)approx}};
        struct tr_tensor in = gc_make(TR_F64, 7), out = gc_make(TR_F64, 7);
        memcpy(in.data, x, sizeof x);
        struct tr_kernel_args a = {.node = &f, .in = {in}, .out = {out}, .nin = 1, .nout = 1};
        gc_run(&a);
        for (int i = 0; i < 7; i++)
            ck_assert_double_eq_tol(((double *)out.data)[i], approx ? tanh_ref[i] : erf_ref[i], 1e-7);
        gc_free(&in), gc_free(&out);
    }
}
END_TEST

/* The f32 GELU (vmath.h's branch-free exp and erfc, vectorised) against the f64 kernel (libm)
 * over [−12, 12] on a fine grid: relative error within 3e-6 for |x| ≤ 5 and 2e-5 beyond, down to
 * |y| = 1e-30 — the negative tail included, where 1 + erf cancels in the naive form (the rounding
 * of z² inside exp(−z²) is what grows there); the backward relative to max(|dx|, 0.1), the size of its two terms, as it
 * crosses zero near −0.75. In place and accumulating as well. */
START_TEST(gelu_f32_accuracy)
{
    enum { N = 24001 };
    for (int approx = 0; approx < 2; approx++)
        for (int bwd = 0; bwd < 2; bwd++) {
            struct tr_node f = {.op = bwd ? TR_OP_GELU_BWD : TR_OP_GELU, .attrs.gelu = {(uint8_t)approx}};
            struct tr_tensor x32 = gc_make(TR_F32, N), y32 = gc_make(TR_F32, N), d32 = gc_make(TR_F32, N);
            struct tr_tensor x64 = gc_make(TR_F64, N), y64 = gc_make(TR_F64, N), d64 = gc_make(TR_F64, N);
            for (int i = 0; i < N; i++) {
                float v = (float)(-12 + 24.0 * i / (N - 1));
                ((float *)x32.data)[i] = v, ((double *)x64.data)[i] = v;
                ((float *)d32.data)[i] = 1, ((double *)d64.data)[i] = 1;
            }
            struct tr_kernel_args a32 = {.node = &f, .in = {bwd ? d32 : x32, x32}, .out = {y32}, .nin = 1 + bwd, .nout = 1};
            struct tr_kernel_args a64 = {.node = &f, .in = {bwd ? d64 : x64, x64}, .out = {y64}, .nin = 1 + bwd, .nout = 1};
            gc_run(&a32), gc_run(&a64);
            for (int i = 0; i < N; i++) {
                double got = ((float *)y32.data)[i], want = ((double *)y64.data)[i];
                double scale = bwd ? fmax(fabs(want), 0.1) : fabs(want);
                double tol = fabs(((double *)x64.data)[i]) <= 5 ? 3e-6 : 2e-5;
                if (scale > 1e-30)
                    ck_assert_msg(fabs(got - want) <= tol * scale, "gelu%s%s(%.6g) = %.9g, want %.9g",
                                  approx ? "_tanh" : "", bwd ? "_bwd" : "", ((double *)x64.data)[i], got, want);
            }
            if (!bwd) {   /* in place, then accumulating onto itself: 2·gelu(x) from gelu(x) */
                struct tr_tensor z = gc_make(TR_F32, N);
                memcpy(z.data, x32.data, N * sizeof(float));
                struct tr_kernel_args in_place = {.node = &f, .in = {z}, .out = {z}, .nin = 1, .nout = 1};
                gc_run(&in_place);
                ck_assert_mem_eq(z.data, y32.data, N * sizeof(float));
                struct tr_node facc = f;
                facc.accumulate = true;
                struct tr_kernel_args acc = {.node = &facc, .in = {x32}, .out = {z}, .nin = 1, .nout = 1};
                gc_run(&acc);
                for (int i = 0; i < N; i++)
                    ck_assert_float_eq(((float *)z.data)[i], 2 * ((float *)y32.data)[i]);
                gc_free(&z);
            }
            gc_free(&x32), gc_free(&y32), gc_free(&d32), gc_free(&x64), gc_free(&y64), gc_free(&d64);
        }
}
END_TEST

START_TEST(binary_gradients)
{
    uint64_t seed = 7;
    struct tr_tensor a = gc_make(TR_F64, 4, 5), b = gc_make(TR_F64, 4, 5), y = gc_make(TR_F64, 4, 5),
                     w = gc_make(TR_F64, 4, 5);
    gc_fill(&a, &seed, -1, 1), gc_fill(&b, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
    struct tr_tensor weights[1] = {w};
    /* add: dL/da = dL/db = w;  mul: dL/da = w ⊙ b, dL/db = w ⊙ a (built by MUL itself) */
    struct tr_node add = node_of(TR_OP_ADD), mul = node_of(TR_OP_MUL);
    struct tr_kernel_args fa = {.node = &add, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
    gc_run(&fa);
    gc_assert(&fa, 0, weights, &w);
    gc_assert(&fa, 1, weights, &w);
    struct tr_tensor da = gc_make(TR_F64, 4, 5), db = gc_make(TR_F64, 4, 5);
    struct tr_kernel_args ga = {.node = &mul, .in = {w, b}, .out = {da}, .nin = 2, .nout = 1};
    struct tr_kernel_args gb = {.node = &mul, .in = {w, a}, .out = {db}, .nin = 2, .nout = 1};
    gc_run(&ga), gc_run(&gb);
    struct tr_kernel_args fm = {.node = &mul, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
    gc_run(&fm);
    gc_assert(&fm, 0, weights, &da);
    gc_assert(&fm, 1, weights, &db);
    /* scale: dL/dx = alpha·w */
    struct tr_node sc = {.op = TR_OP_SCALE, .attrs.scale = {-0.75f}};
    struct tr_kernel_args fs = {.node = &sc, .in = {a}, .out = {y}, .nin = 1, .nout = 1};
    struct tr_kernel_args gs = {.node = &sc, .in = {w}, .out = {da}, .nin = 1, .nout = 1};
    gc_run(&fs), gc_run(&gs);
    gc_assert(&fs, 0, weights, &da);
    gc_free(&a), gc_free(&b), gc_free(&y), gc_free(&w), gc_free(&da), gc_free(&db);
}
END_TEST

START_TEST(bias_gradients)
{
    uint64_t seed = 9;
    struct tr_tensor x = gc_make(TR_F64, 2, 3, 4), bias = gc_make(TR_F64, 4), y = gc_make(TR_F64, 2, 3, 4),
                     w = gc_make(TR_F64, 2, 3, 4), db = gc_make(TR_F64, 4);
    gc_fill(&x, &seed, -1, 1), gc_fill(&bias, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
    struct tr_node f = node_of(TR_OP_BIAS_ADD), b = node_of(TR_OP_BIAS_GRAD);
    struct tr_kernel_args fa = {.node = &f, .in = {x, bias}, .out = {y}, .nin = 2, .nout = 1};
    struct tr_kernel_args ba = {.node = &b, .in = {w}, .out = {db}, .nin = 1, .nout = 1};
    gc_run(&fa), gc_run(&ba);
    struct tr_tensor weights[1] = {w};
    gc_assert(&fa, 0, weights, &w);
    gc_assert(&fa, 1, weights, &db);
    gc_free(&x), gc_free(&bias), gc_free(&y), gc_free(&w), gc_free(&db);
}
END_TEST

/* y = op(a)·op(b) for every transpose pair, batched and shared b: dA = dY·op(b)ᵀ, dB = op(a)ᵀ·dY,
 * each computed by MATMUL itself with the transposes autodiff uses. */
static void check_matmul(int ta, int tb, int batched_b)
{
    uint64_t seed = 100 + (uint64_t)(ta * 4 + tb * 2 + batched_b);
    const int64_t P = 2, M = 3, K = 4, N = 5;
    struct tr_tensor a = ta ? gc_make(TR_F64, P, K, M) : gc_make(TR_F64, P, M, K);
    struct tr_tensor b = batched_b ? (tb ? gc_make(TR_F64, P, N, K) : gc_make(TR_F64, P, K, N))
                                   : (tb ? gc_make(TR_F64, N, K) : gc_make(TR_F64, K, N));
    struct tr_tensor y = gc_make(TR_F64, P, M, N), w = gc_make(TR_F64, P, M, N);
    gc_fill(&a, &seed, -1, 1), gc_fill(&b, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
    struct tr_node f = {.op = TR_OP_MATMUL, .attrs.matmul = {(uint8_t)ta, (uint8_t)tb}};
    struct tr_kernel_args fa = {.node = &f, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
    gc_run(&fa);
    struct tr_tensor weights[1] = {w};
    /* dA: ta ? op(b)·dYᵀ : dY·op(b)ᵀ */
    struct tr_tensor da = gc_tensor(TR_F64, a.rank, a.dim);
    struct tr_node nda = {.op = TR_OP_MATMUL};
    struct tr_kernel_args ga;
    if (!ta) {
        nda.attrs.matmul = (typeof(nda.attrs.matmul)){0, (uint8_t)!tb};
        ga = (struct tr_kernel_args){.node = &nda, .in = {w, b}, .out = {da}, .nin = 2, .nout = 1};
        gc_run(&ga);
    } else if (batched_b) {
        nda.attrs.matmul = (typeof(nda.attrs.matmul)){(uint8_t)tb, 1};
        ga = (struct tr_kernel_args){.node = &nda, .in = {b, w}, .out = {da}, .nin = 2, .nout = 1};
        gc_run(&ga);
    } else {   /* b shared and a transposed: per batch, dA_p = op(b)·dY_pᵀ */
        for (int64_t p = 0; p < P; p++) {
            struct tr_tensor wp = {TR_F64, 2, {M, N}, (double *)w.data + p * M * N};
            struct tr_tensor dap = {TR_F64, 2, {K, M}, (double *)da.data + p * K * M};
            nda.attrs.matmul = (typeof(nda.attrs.matmul)){(uint8_t)tb, 1};
            ga = (struct tr_kernel_args){.node = &nda, .in = {b, wp}, .out = {dap}, .nin = 2, .nout = 1};
            gc_run(&ga);
        }
    }
    gc_assert(&fa, 0, weights, &da);
    /* dB: batched: op(a)ᵀ·dY (tb: dYᵀ·op(a)); shared: the same summed over batches = one GEMM
     * of a flattened to [P·M, K] (only without ta) or a sum of per-batch GEMMs (accumulate). */
    struct tr_tensor dbt = gc_tensor(TR_F64, b.rank, b.dim);
    struct tr_node ndb = {.op = TR_OP_MATMUL};
    for (int64_t p = 0; p < (batched_b ? 1 : P); p++) {
        struct tr_tensor ap = a, wp = w;
        if (!batched_b) {
            ap = (struct tr_tensor){TR_F64, 2, {a.dim[1], a.dim[2]}, (double *)a.data + p * M * K};
            wp = (struct tr_tensor){TR_F64, 2, {M, N}, (double *)w.data + p * M * N};
            ndb.accumulate = p > 0;
        }
        struct tr_kernel_args gb;
        if (!tb) {
            ndb.attrs.matmul = (typeof(ndb.attrs.matmul)){(uint8_t)!ta, 0};
            gb = (struct tr_kernel_args){.node = &ndb, .in = {ap, wp}, .out = {dbt}, .nin = 2, .nout = 1};
        } else {
            ndb.attrs.matmul = (typeof(ndb.attrs.matmul)){1, (uint8_t)ta};
            gb = (struct tr_kernel_args){.node = &ndb, .in = {wp, ap}, .out = {dbt}, .nin = 2, .nout = 1};
        }
        gc_run(&gb);
    }
    gc_assert(&fa, 1, weights, &dbt);
    gc_free(&a), gc_free(&b), gc_free(&y), gc_free(&w), gc_free(&da), gc_free(&dbt);
}

START_TEST(matmul_gradients)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int batched = 0; batched < 2; batched++)
                check_matmul(ta, tb, batched);
}
END_TEST

/* accumulate: outputs are added into, for every op that honours the flag. */
START_TEST(accumulate_flag)
{
    uint64_t seed = 3;
    struct tr_tensor x = gc_make(TR_F64, 6), y = gc_make(TR_F64, 6), y2 = gc_make(TR_F64, 6);
    gc_fill(&x, &seed, -1, 1);
    struct tr_node r = node_of(TR_OP_RELU);
    struct tr_kernel_args a = {.node = &r, .in = {x}, .out = {y}, .nin = 1, .nout = 1};
    gc_run(&a);
    memcpy(y2.data, y.data, 6 * sizeof(double));
    r.accumulate = 1;
    gc_run(&a);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq(((double *)y.data)[i], 2 * ((double *)y2.data)[i]);
    struct tr_node acc = node_of(TR_OP_ACCUMULATE);
    struct tr_kernel_args b = {.node = &acc, .in = {y2}, .out = {y}, .nin = 1, .nout = 1};
    gc_run(&b);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq(((double *)y.data)[i], 3 * ((double *)y2.data)[i]);
    gc_free(&x), gc_free(&y), gc_free(&y2);
}
END_TEST

/* The f32 kernels compute what the f64 ones do, to f32 precision. */
START_TEST(f32_agrees_with_f64)
{
    uint64_t seed = 11;
    const int64_t M = 33, K = 17, N = 9;
    struct tr_tensor a64 = gc_make(TR_F64, M, K), b64 = gc_make(TR_F64, K, N), y64 = gc_make(TR_F64, M, N);
    struct tr_tensor a32 = gc_make(TR_F32, M, K), b32 = gc_make(TR_F32, K, N), y32 = gc_make(TR_F32, M, N);
    gc_fill(&a64, &seed, -1, 1), gc_fill(&b64, &seed, -1, 1);
    for (int64_t i = 0; i < M * K; i++)
        ((float *)a32.data)[i] = (float)((double *)a64.data)[i], ((double *)a64.data)[i] = ((float *)a32.data)[i];
    for (int64_t i = 0; i < K * N; i++)
        ((float *)b32.data)[i] = (float)((double *)b64.data)[i], ((double *)b64.data)[i] = ((float *)b32.data)[i];
    struct tr_node mm = node_of(TR_OP_MATMUL), ge = node_of(TR_OP_GELU);
    struct tr_kernel_args f64 = {.node = &mm, .in = {a64, b64}, .out = {y64}, .nin = 2, .nout = 1};
    struct tr_kernel_args f32 = {.node = &mm, .in = {a32, b32}, .out = {y32}, .nin = 2, .nout = 1};
    gc_run(&f64), gc_run(&f32);
    struct tr_tensor g64 = gc_make(TR_F64, M, N), g32 = gc_make(TR_F32, M, N);
    struct tr_kernel_args h64 = {.node = &ge, .in = {y64}, .out = {g64}, .nin = 1, .nout = 1};
    struct tr_kernel_args h32 = {.node = &ge, .in = {y32}, .out = {g32}, .nin = 1, .nout = 1};
    gc_run(&h64), gc_run(&h32);
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < M * N; i++) {
        double d = ((float *)g32.data)[i] - ((double *)g64.data)[i];
        diff += d * d, norm += ((double *)g64.data)[i] * ((double *)g64.data)[i];
    }
    ck_assert_msg(sqrt(diff / norm) < 1e-6, "normwise %g", sqrt(diff / norm));
    gc_free(&a64), gc_free(&b64), gc_free(&y64), gc_free(&a32), gc_free(&b32), gc_free(&y32);
    gc_free(&g64), gc_free(&g32);
}
END_TEST

/* 16-bit storage: operands widened into the workspace (64-byte pieces), multiplied in f32, the
 * result rounded once. With inputs exactly representable in the 16-bit type, the only error left is that
 * final rounding: at most half a unit in the last place, 2^-8 (bf16) or 2^-11 (f16) relative. */
START_TEST(matmul_16bit)
{
    const int64_t M = 19, K = 23, N = 11;
    for (int type = 0; type < 2; type++) {
        enum tr_dtype t = type ? TR_F16 : TR_BF16;
        uint16_t (*to16)(float) = type ? tr_f32_to_f16 : tr_f32_to_bf16;
        float (*from16)(uint16_t) = type ? tr_f16_to_f32 : tr_bf16_to_f32;
        uint64_t seed = 31;
        struct tr_tensor a = gc_make(t, M, K), b = gc_make(t, N, K), y = gc_make(t, M, N);
        double *ra = malloc(sizeof(double) * M * K), *rb = malloc(sizeof(double) * N * K);
        for (int64_t i = 0; i < M * K; i++)
            ((uint16_t *)a.data)[i] = to16((float)gc_uniform(&seed, -2, 2)), ra[i] = from16(((uint16_t *)a.data)[i]);
        for (int64_t i = 0; i < N * K; i++)
            ((uint16_t *)b.data)[i] = to16((float)gc_uniform(&seed, -2, 2)), rb[i] = from16(((uint16_t *)b.data)[i]);
        struct tr_node mm = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1, .attrs.matmul = {0, 1}};
        struct tr_kernel_args args = {.node = &mm, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
        char error[GC_ERROR_MAX];
        ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &args, error), TR_EINVAL);   /* no workspace */
        ck_assert_str_eq(error, "matmul: needs 3712 bytes of workspace for its 16-bit tensors, has 0");
        size_t need = tr_cpu_ops.workspace_bytes(&mm, args.in, args.out);
        args.workspace = malloc(need), args.workspace_bytes = need;
        gc_run(&args);
        double worst = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double exact = 0;
                for (int64_t k = 0; k < K; k++)
                    exact += ra[i * K + k] * rb[j * K + k];
                double got = from16(((uint16_t *)y.data)[i * N + j]);
                if (fabs(exact) > 1e-2 && fabs(got - exact) / fabs(exact) > worst)
                    worst = fabs(got - exact) / fabs(exact);
            }
        ck_assert_msg(worst <= (type ? 0x1p-11 : 0x1p-8) * 1.0001, "%s: worst relative error %g",
                      tr_dtype_name(t), worst);
        free(args.workspace), free(ra), free(rb);
        gc_free(&a), gc_free(&b), gc_free(&y);
    }
}
END_TEST

/* GEMMs of several tiles, one edge tile partial in both directions (matmul.c), and of a single
 * tile give the same bits on 1, 2 and 3 threads: each transpose, a batched B, and accumulation
 * into y. OpenBLAS's own threads change the last bits of these shapes. */
START_TEST(matmul_thread_independent)
{
    const int64_t shapes[2][4] = {{2, 300, 200, 700}, {1, 32, 400, 72}};   /* P, M, K, N */
    for (int c = 0; c < 4; c++)
        for (int form = 0; form < 6; form++) {
            int s = c / 2, f32 = c % 2;
            const int64_t P = shapes[s][0], M = shapes[s][1], K = shapes[s][2], N = shapes[s][3];
            int ta = form & 1, tb = form >> 1 & 1, batched = form >= 4;
            enum tr_dtype t = f32 ? TR_F32 : TR_F64;
            uint64_t seed = 50;
            struct tr_tensor a = ta ? gc_make(t, P, K, M) : gc_make(t, P, M, K);
            struct tr_tensor b = batched ? (tb ? gc_make(t, P, N, K) : gc_make(t, P, K, N))
                                         : (tb ? gc_make(t, N, K) : gc_make(t, K, N));
            struct tr_tensor y = gc_make(t, P, M, N), first = gc_make(t, P, M, N);
            gc_fill(&a, &seed, -1, 1), gc_fill(&b, &seed, -1, 1), gc_fill(&first, &seed, -1, 1);
            struct tr_node mm = {.op = TR_OP_MATMUL, .attrs.matmul = {(uint8_t)ta, (uint8_t)tb},
                                 .accumulate = (uint8_t)(form == 3)};
            struct tr_kernel_args args = {.node = &mm, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
            size_t bytes = tr_tensor_bytes(&y);
            char *result[3];
            for (int threads = 1; threads <= 3; threads++) {
                memcpy(y.data, first.data, bytes);
                omp_set_num_threads(threads);
                gc_run(&args);
                result[threads - 1] = memcpy(malloc(bytes), y.data, bytes);
            }
            omp_set_num_threads(1);
            for (int i = 1; i < 3; i++)
                ck_assert_msg(memcmp(result[0], result[i], bytes) == 0,
                              "%s ta=%d tb=%d batched=%d accumulate=%d: 1 and %d threads differ",
                              tr_dtype_name(t), ta, tb, batched, mm.accumulate, i + 1);
            for (int i = 0; i < 3; i++)
                free(result[i]);
            gc_free(&a), gc_free(&b), gc_free(&y), gc_free(&first);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("elementwise and gemm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, relu_gradient);
    tcase_add_test(tc, tanh_gradient);
    tcase_add_test(tc, gelu_erf_gradient);
    tcase_add_test(tc, gelu_tanh_gradient);
    tcase_add_test(tc, gelu_values);
    tcase_add_test(tc, gelu_f32_accuracy);
    tcase_add_test(tc, binary_gradients);
    tcase_add_test(tc, bias_gradients);
    tcase_add_test(tc, matmul_gradients);
    tcase_add_test(tc, accumulate_flag);
    tcase_add_test(tc, f32_agrees_with_f64);
    tcase_add_test(tc, matmul_16bit);
    tcase_add_test(tc, matmul_thread_independent);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
