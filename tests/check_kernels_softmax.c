/* CPU kernels of the softmax family, the fused classifier + cross-entropy and the reductions
 * (src/backend/cpu/softmax.c, reduce.c):
 * finite-difference gradient checks in f64 (gradcheck.h says why the tolerance is what it is),
 * values against hand-computed and independently computed ones, accumulate (+=), f32 agreeing
 * with f64, and reductions whose result does not depend on the thread count. */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>


/* An f32 copy of an f64 tensor; the f64 one is rounded to the same values, so both kernels see
 * identical inputs. */
static struct tr_tensor f32_twin(struct tr_tensor x64)
{
    struct tr_tensor x32 = gc_tensor(TR_F32, x64.rank, x64.dim);
    for (int64_t i = 0; i < tr_tensor_numel(&x64); i++)
        F32(x32)[i] = (float)F64(x64)[i], F64(x64)[i] = F32(x32)[i];
    return x32;
}

/* Element i of an f32 or f64 tensor, read or written as a double. */
static double at(struct tr_tensor t, int64_t i)
{
    return t.dtype == TR_F32 ? F32(t)[i] : F64(t)[i];
}

static void put(struct tr_tensor t, int64_t i, double v)
{
    if (t.dtype == TR_F32)
        F32(t)[i] = (float)v;
    else
        F64(t)[i] = v;
}

/* ‖a − b‖ / ‖b‖, both f64 */
static double normwise_diff64(struct tr_tensor a, struct tr_tensor b)
{
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < tr_tensor_numel(&b); i++)
        diff += (F64(a)[i] - F64(b)[i]) * (F64(a)[i] - F64(b)[i]), norm += F64(b)[i] * F64(b)[i];
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

/* ‖a32 − a64‖ / ‖a64‖ */
static double normwise_diff(struct tr_tensor a32, struct tr_tensor a64)
{
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < tr_tensor_numel(&a64); i++) {
        double d = F32(a32)[i] - F64(a64)[i];
        diff += d * d, norm += F64(a64)[i] * F64(a64)[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static const union tr_attrs no_attrs;

static union tr_attrs ce_attrs(int32_t ignore)
{
    return (union tr_attrs){.cross_entropy = {ignore}};
}

static union tr_attrs axis_attrs(int axis)
{
    return (union tr_attrs){.axis = {axis, 0}};
}

/* SUM_BWD as MEAN's backward: ÷ the reduced size */
static union tr_attrs mean_attrs(int axis)
{
    return (union tr_attrs){.axis = {axis, 1}};
}

/* ---- softmax and log_softmax ------------------------------------------------------------- */

/* dL/dx through the backward kernel (dy, y). The weights are random: with equal weights the
 * softmax gradient is zero (Σ y = 1) and the check would prove nothing. */
static void check_softmax_gradient(enum tr_op fwd_op, enum tr_op bwd_op)
{
    uint64_t seed = 5;
    struct tr_tensor x = gc_make(TR_F64, 2, 3, 7), y = gc_make(TR_F64, 2, 3, 7),
                     w = gc_make(TR_F64, 2, 3, 7), dx = gc_make(TR_F64, 2, 3, 7);
    gc_fill(&x, &seed, -4, 4), gc_fill(&w, &seed, -1, 1);
    struct tr_node f = {.op = fwd_op};
    struct tr_kernel_args fa = {.node = &f, .in = {x}, .out = {y}, .nin = 1, .nout = 1};
    gc_run(&fa);
    run_node(bwd_op, no_attrs, 0, 2, (struct tr_tensor[]){w, y}, dx);
    gc_assert(&fa, 0, (struct tr_tensor[]){w}, &dx);
    gc_free(&x), gc_free(&y), gc_free(&w), gc_free(&dx);
}

START_TEST(softmax_gradient) { check_softmax_gradient(TR_OP_SOFTMAX, TR_OP_SOFTMAX_BWD); }
END_TEST
START_TEST(log_softmax_gradient) { check_softmax_gradient(TR_OP_LOG_SOFTMAX, TR_OP_LOG_SOFTMAX_BWD); }
END_TEST

/* softmax([1, 2, 3]) and log_softmax by hand (e^k / (e + e² + e³)); the row shifted by 1000
 * must give the same: without the max subtracted, exp(1001) overflows to inf. */
START_TEST(softmax_values)
{
    static const double x[] = {1, 2, 3, 1001, 1002, 1003, -1000, 0, 1000};
    static const double soft[] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748219};
    static const double logsoft[] = {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806};
    for (int t = 0; t < 2; t++) {
        enum tr_dtype dtype = t ? TR_F32 : TR_F64;
        double tol = t ? 1e-6 : 1e-15;
        struct tr_tensor in = gc_make(dtype, 3, 3), y = gc_make(dtype, 3, 3), ly = gc_make(dtype, 3, 3);
        for (int i = 0; i < 9; i++)
            put(in, i, x[i]);
        run_node(TR_OP_SOFTMAX, no_attrs, 0, 1, &in, y);
        run_node(TR_OP_LOG_SOFTMAX, no_attrs, 0, 1, &in, ly);
        for (int i = 0; i < 6; i++) {
            ck_assert_double_eq_tol(at(y, i), soft[i % 3], tol);
            ck_assert_double_eq_tol(at(ly, i), logsoft[i % 3], tol);
        }
        /* [-1000, 0, 1000]: all the mass on the last, the others underflow to 0, nothing is NaN */
        ck_assert_double_eq(at(y, 6), 0);
        ck_assert_double_eq(at(y, 8), 1);
        ck_assert_double_eq_tol(at(ly, 6), -2000, 1e-9);
        gc_free(&in), gc_free(&y), gc_free(&ly);
    }
}
END_TEST

START_TEST(softmax_rows_sum_to_one)
{
    uint64_t seed = 77;
    struct tr_tensor x = gc_make(TR_F64, 4, 5, 33), y = gc_make(TR_F64, 4, 5, 33);
    gc_fill(&x, &seed, -20, 20);
    run_node(TR_OP_SOFTMAX, no_attrs, 0, 1, &x, y);
    for (int r = 0; r < 20; r++) {
        double s = 0;
        for (int c = 0; c < 33; c++)
            s += F64(y)[r * 33 + c];
        ck_assert_double_eq_tol(s, 1, 1e-14);
    }
    gc_free(&x), gc_free(&y);
}
END_TEST

/* ---- cross entropy --------------------------------------------------------------------------- */

/* The loss straight from its definition, for logits small enough not to need the max. */
static double naive_cross_entropy(const double *x, const int32_t *t, int rows, int cols, int32_t ignore)
{
    double total = 0;
    int count = 0;
    for (int r = 0; r < rows; r++) {
        if (t[r] == ignore)
            continue;
        double s = 0;
        for (int c = 0; c < cols; c++)
            s += exp(x[r * cols + c]);
        total += log(s) - x[r * cols + t[r]], count++;
    }
    return count ? total / count : 0;
}

/* dL/dlogits with loss weight 1.7 (not 1, so a dropped dloss factor shows), two ignored rows */
START_TEST(cross_entropy_gradient)
{
    uint64_t seed = 21;
    static const int32_t targets[] = {1, -100, 4, 0, -100, 2};
    struct tr_tensor x = gc_make(TR_F64, 6, 5), t = gc_make(TR_I32, 6), loss = gc_make(TR_F64, 1),
                     w = gc_make(TR_F64, 1), dx = gc_make(TR_F64, 6, 5);
    gc_fill(&x, &seed, -3, 3);
    memcpy(t.data, targets, sizeof targets);
    F64(w)[0] = 1.7;
    struct tr_node f = {.op = TR_OP_CROSS_ENTROPY, .attrs = ce_attrs(-100)};
    struct tr_kernel_args fa = {.node = &f, .in = {x, t}, .out = {loss}, .nin = 2, .nout = 1};
    gc_run(&fa);
    run_node(TR_OP_CROSS_ENTROPY_BWD, ce_attrs(-100), 0, 3, (struct tr_tensor[]){w, x, t}, dx);
    gc_assert(&fa, 0, (struct tr_tensor[]){w}, &dx);
    for (int c = 0; c < 5; c++)   /* ignored rows get exactly nothing */
        ck_assert(F64(dx)[1 * 5 + c] == 0 && F64(dx)[4 * 5 + c] == 0);
    gc_free(&x), gc_free(&t), gc_free(&loss), gc_free(&w), gc_free(&dx);
}
END_TEST

/* [[1, 2, 3], [1, 1, 1]] with targets [2, 0]: (log(e + e² + e³) − 3 + log 3)/2 by hand. */
START_TEST(cross_entropy_values)
{
    static const double x[] = {1, 2, 3, 1, 1, 1};
    struct tr_tensor in = gc_make(TR_F64, 2, 3), t = gc_make(TR_I32, 2), loss = gc_make(TR_F64, 1);
    memcpy(in.data, x, sizeof x);
    I32(t)[0] = 2, I32(t)[1] = 0;
    run_node(TR_OP_CROSS_ENTROPY, ce_attrs(-100), 0, 2, (struct tr_tensor[]){in, t}, loss);
    ck_assert_double_eq_tol(F64(loss)[0], (0.4076059644443806 + 1.0986122886681098) / 2, 1e-15);
    I32(t)[1] = -100;   /* row 1 ignored: the mean is over row 0 alone */
    run_node(TR_OP_CROSS_ENTROPY, ce_attrs(-100), 0, 2, (struct tr_tensor[]){in, t}, loss);
    ck_assert_double_eq_tol(F64(loss)[0], 0.4076059644443806, 1e-15);
    I32(t)[1] = 0;      /* ignore_index may be a real class: rows with target 2 drop out */
    run_node(TR_OP_CROSS_ENTROPY, ce_attrs(2), 0, 2, (struct tr_tensor[]){in, t}, loss);
    ck_assert_double_eq_tol(F64(loss)[0], 1.0986122886681098, 1e-15);
    gc_free(&in), gc_free(&t), gc_free(&loss);
}
END_TEST

START_TEST(cross_entropy_against_definition)
{
    uint64_t seed = 31;
    const int rows = 9, cols = 11;
    struct tr_tensor x = gc_make(TR_F64, rows, cols), t = gc_make(TR_I32, rows), loss = gc_make(TR_F64, 1);
    gc_fill(&x, &seed, -5, 5);
    gc_fill(&t, &seed, -1, cols);   /* −1 is the ignore_index here */
    run_node(TR_OP_CROSS_ENTROPY, ce_attrs(-1), 0, 2, (struct tr_tensor[]){x, t}, loss);
    ck_assert_double_eq_tol(F64(loss)[0], naive_cross_entropy(F64(x), I32(t), rows, cols, -1), 1e-13);
    gc_free(&x), gc_free(&t), gc_free(&loss);
}
END_TEST

/* Logits near 1000 in f32: exp would overflow without the max; log-sum-exp keeps the digits. */
START_TEST(cross_entropy_large_logits)
{
    struct tr_tensor x = gc_make(TR_F32, 1, 3), t = gc_make(TR_I32, 1), loss = gc_make(TR_F32, 1);
    F32(x)[0] = 1000, F32(x)[1] = 1001, F32(x)[2] = 1002;
    run_node(TR_OP_CROSS_ENTROPY, ce_attrs(-100), 0, 2, (struct tr_tensor[]){x, t}, loss);
    ck_assert_double_eq_tol(F32(loss)[0], 2.4076059644443806, 1e-6);
    gc_free(&x), gc_free(&t), gc_free(&loss);
}
END_TEST

/* Every row ignored: the loss is 0 (not 0/0) and so is every gradient. */
START_TEST(cross_entropy_all_ignored)
{
    uint64_t seed = 8;
    struct tr_tensor x = gc_make(TR_F64, 3, 4), t = gc_make(TR_I32, 3), loss = gc_make(TR_F64, 1),
                     dloss = gc_make(TR_F64, 1), dx = gc_make(TR_F64, 3, 4);
    gc_fill(&x, &seed, -2, 2);
    for (int r = 0; r < 3; r++)
        I32(t)[r] = -100;
    F64(loss)[0] = NAN, F64(dloss)[0] = 1;
    for (int i = 0; i < 12; i++)
        F64(dx)[i] = NAN;
    run_node(TR_OP_CROSS_ENTROPY, ce_attrs(-100), 0, 2, (struct tr_tensor[]){x, t}, loss);
    ck_assert(F64(loss)[0] == 0);
    run_node(TR_OP_CROSS_ENTROPY_BWD, ce_attrs(-100), 0, 3, (struct tr_tensor[]){dloss, x, t}, dx);
    for (int i = 0; i < 12; i++)
        ck_assert(F64(dx)[i] == 0);
    gc_free(&x), gc_free(&t), gc_free(&loss), gc_free(&dloss), gc_free(&dx);
}
END_TEST

START_TEST(cross_entropy_target_out_of_range)
{
    struct tr_tensor x = gc_make(TR_F64, 2, 3), t = gc_make(TR_I32, 2), loss = gc_make(TR_F64, 1),
                     dloss = gc_make(TR_F64, 1), dx = gc_make(TR_F64, 2, 3);
    I32(t)[0] = 3;
    expect_error(TR_OP_CROSS_ENTROPY, ce_attrs(-100), 2, (struct tr_tensor[]){x, t}, loss,
                 "cross_entropy: target 3 at row 0 is outside the 3 classes");
    expect_error(TR_OP_CROSS_ENTROPY_BWD, ce_attrs(-100), 3, (struct tr_tensor[]){dloss, x, t}, dx,
                 "cross_entropy_bwd: target 3 at row 0 is outside the 3 classes");
    I32(t)[0] = 0, I32(t)[1] = -1;   /* negative but not the ignore_index */
    expect_error(TR_OP_CROSS_ENTROPY, ce_attrs(-100), 2, (struct tr_tensor[]){x, t}, loss,
                 "cross_entropy: target -1 at row 1 is outside the 3 classes");
    gc_free(&x), gc_free(&t), gc_free(&loss), gc_free(&dloss), gc_free(&dx);
}
END_TEST

/* ---- sum, mean, sum_bwd, argmax ------------------------------------------------------------ */

static const int64_t rdims[3] = {2, 3, 4};

/* The output index of x [2, 3, 4]'s flat index i once axis is summed out (−1: everything). */
static int64_t reduced_index(int64_t i, int axis)
{
    int64_t idx[3] = {i / 12, i / 4 % 3, i % 4}, out = 0;
    if (axis < 0)
        return 0;
    for (int d = 0; d < 3; d++)
        if (d != axis)
            out = out * rdims[d] + idx[d];
    return out;
}

/* The reduced output for axis: [1] for −1, else x's dims without axis. */
static struct tr_tensor reduced_tensor(int axis)
{
    int64_t dims[2];
    int rank = 0;
    for (int d = 0; d < 3 && axis >= 0; d++)
        if (d != axis)
            dims[rank++] = rdims[d];
    return axis < 0 ? gc_make(TR_F64, 1) : gc_tensor(TR_F64, rank, dims);
}

START_TEST(sum_mean_values)
{
    uint64_t seed = 13;
    struct tr_tensor x = gc_tensor(TR_F64, 3, rdims);
    gc_fill(&x, &seed, -1, 1);
    for (int axis = -1; axis < 3; axis++) {
        struct tr_tensor s = reduced_tensor(axis), m = reduced_tensor(axis);
        double expect[12] = {0}, n = axis < 0 ? 24 : (double)rdims[axis];
        for (int64_t i = 0; i < 24; i++)
            expect[reduced_index(i, axis)] += F64(x)[i];
        run_node(TR_OP_SUM, axis_attrs(axis), 0, 1, &x, s);
        run_node(TR_OP_MEAN, axis_attrs(axis), 0, 1, &x, m);
        for (int64_t i = 0; i < tr_tensor_numel(&s); i++) {
            ck_assert_double_eq_tol(F64(s)[i], expect[i], 1e-14);
            ck_assert_double_eq_tol(F64(m)[i], expect[i] / n, 1e-14);
        }
        gc_free(&s), gc_free(&m);
    }
    gc_free(&x);
}
END_TEST

/* SUM's gradient is SUM_BWD of the weights, MEAN's SUM_BWD with attrs.axis.mean (÷ n), for
 * every axis and for −1. */
START_TEST(sum_mean_gradients)
{
    uint64_t seed = 17;
    for (int axis = -1; axis < 3; axis++) {
        struct tr_tensor x = gc_tensor(TR_F64, 3, rdims), dsum = gc_tensor(TR_F64, 3, rdims),
                         dmean = gc_tensor(TR_F64, 3, rdims), y = reduced_tensor(axis),
                         w = reduced_tensor(axis);
        gc_fill(&x, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
        run_node(TR_OP_SUM_BWD, axis_attrs(axis), 0, 1, &w, dsum);
        run_node(TR_OP_SUM_BWD, mean_attrs(axis), 0, 1, &w, dmean);
        struct tr_node fs = {.op = TR_OP_SUM, .attrs = axis_attrs(axis)};
        struct tr_node fm = {.op = TR_OP_MEAN, .attrs = axis_attrs(axis)};
        struct tr_kernel_args sa = {.node = &fs, .in = {x}, .out = {y}, .nin = 1, .nout = 1};
        struct tr_kernel_args ma = {.node = &fm, .in = {x}, .out = {y}, .nin = 1, .nout = 1};
        gc_run(&sa);
        gc_assert(&sa, 0, (struct tr_tensor[]){w}, &dsum);
        gc_run(&ma);
        gc_assert(&ma, 0, (struct tr_tensor[]){w}, &dmean);
        gc_free(&x), gc_free(&dsum), gc_free(&dmean), gc_free(&y), gc_free(&w);
    }
}
END_TEST

START_TEST(sum_bwd_values)
{
    struct tr_tensor dy = reduced_tensor(1), dx = gc_tensor(TR_F64, 3, rdims);
    for (int i = 0; i < 8; i++)
        F64(dy)[i] = i + 1;
    run_node(TR_OP_SUM_BWD, axis_attrs(1), 0, 1, &dy, dx);
    for (int64_t i = 0; i < 24; i++)
        ck_assert_double_eq(F64(dx)[i], F64(dy)[reduced_index(i, 1)]);
    struct tr_tensor one = gc_make(TR_F64, 1);
    F64(one)[0] = -2.5;
    run_node(TR_OP_SUM_BWD, axis_attrs(-1), 0, 1, &one, dx);
    for (int64_t i = 0; i < 24; i++)
        ck_assert_double_eq(F64(dx)[i], -2.5);
    run_node(TR_OP_SUM_BWD, mean_attrs(-1), 0, 1, &one, dx);
    for (int64_t i = 0; i < 24; i++)
        ck_assert_double_eq(F64(dx)[i], -2.5 / 24);
    run_node(TR_OP_SUM_BWD, mean_attrs(1), 0, 1, &dy, dx);
    for (int64_t i = 0; i < 24; i++)
        ck_assert_double_eq(F64(dx)[i], F64(dy)[reduced_index(i, 1)] / 3);
    gc_free(&dy), gc_free(&dx), gc_free(&one);
}
END_TEST

/* The first index of the maximum, ties included; f32 and f64; output i32 without the last dim. */
START_TEST(argmax_values)
{
    static const double x[] = {1, 3, 3, 2, 5, 5, 5, 5, -1, -2, -3, -0.5, -7, 4, 4.5, 4.25};
    static const int32_t expect[] = {1, 0, 3, 2};
    for (int t = 0; t < 2; t++) {
        struct tr_tensor in = gc_make(t ? TR_F32 : TR_F64, 2, 2, 4), y = gc_make(TR_I32, 2, 2);
        for (int i = 0; i < 16; i++)
            put(in, i, x[i]);
        run_node(TR_OP_ARGMAX, axis_attrs(2), 0, 1, &in, y);
        for (int r = 0; r < 4; r++)
            ck_assert_int_eq(I32(y)[r], expect[r]);
        gc_free(&in), gc_free(&y);
    }
}
END_TEST

/* ---- accumulate, precision, threads ---------------------------------------------------------- */

START_TEST(accumulate_flag)
{
    uint64_t seed = 99;
    struct tr_tensor x = gc_make(TR_F64, 4, 6), w = gc_make(TR_F64, 4, 6), out = gc_make(TR_F64, 4, 6),
                     t = gc_make(TR_I32, 4), one = gc_make(TR_F64, 1), row = gc_make(TR_F64, 6);
    gc_fill(&x, &seed, -2, 2), gc_fill(&w, &seed, -1, 1);
    I32(t)[0] = 5, I32(t)[1] = -100, I32(t)[2] = 0, I32(t)[3] = 3;
    F64(one)[0] = 0.5;
    check_accumulates(TR_OP_SOFTMAX, no_attrs, 1, &x, out);
    check_accumulates(TR_OP_LOG_SOFTMAX, no_attrs, 1, &x, out);
    check_accumulates(TR_OP_SOFTMAX_BWD, no_attrs, 2, (struct tr_tensor[]){w, x}, out);
    check_accumulates(TR_OP_LOG_SOFTMAX_BWD, no_attrs, 2, (struct tr_tensor[]){w, x}, out);
    check_accumulates(TR_OP_CROSS_ENTROPY, ce_attrs(-100), 2, (struct tr_tensor[]){x, t}, one);
    check_accumulates(TR_OP_CROSS_ENTROPY_BWD, ce_attrs(-100), 3, (struct tr_tensor[]){one, x, t}, out);
    check_accumulates(TR_OP_SUM, axis_attrs(0), 1, &x, row);
    check_accumulates(TR_OP_MEAN, axis_attrs(-1), 1, &x, one);
    check_accumulates(TR_OP_SUM_BWD, axis_attrs(0), 1, &row, out);
    check_accumulates(TR_OP_SUM_BWD, mean_attrs(0), 1, &row, out);
    gc_free(&x), gc_free(&w), gc_free(&out), gc_free(&t), gc_free(&one), gc_free(&row);
}
END_TEST

/* Each kernel in f32 computes what it does in f64, to f32 precision. */
START_TEST(f32_agrees_with_f64)
{
    uint64_t seed = 123;
    const int64_t rows = 13, cols = 17;
    struct tr_tensor x64 = gc_make(TR_F64, rows, cols), w64 = gc_make(TR_F64, rows, cols),
                     dl64 = gc_make(TR_F64, 1), t = gc_make(TR_I32, rows);
    gc_fill(&x64, &seed, -6, 6), gc_fill(&w64, &seed, -1, 1), gc_fill(&t, &seed, -1, cols);
    F64(dl64)[0] = 0.75;
    struct tr_tensor x32 = f32_twin(x64), w32 = f32_twin(w64), dl32 = f32_twin(dl64);
    struct {
        enum tr_op op;
        union tr_attrs at;
        int nin;
        struct tr_tensor in64[3], in32[3];
        int64_t out_rank, out_dims[2];
    } cases[] = {
        {TR_OP_SOFTMAX, no_attrs, 1, {x64}, {x32}, 2, {rows, cols}},
        {TR_OP_LOG_SOFTMAX, no_attrs, 1, {x64}, {x32}, 2, {rows, cols}},
        {TR_OP_SOFTMAX_BWD, no_attrs, 2, {w64, x64}, {w32, x32}, 2, {rows, cols}},
        {TR_OP_LOG_SOFTMAX_BWD, no_attrs, 2, {w64, x64}, {w32, x32}, 2, {rows, cols}},
        {TR_OP_CROSS_ENTROPY, ce_attrs(-1), 2, {x64, t}, {x32, t}, 1, {1}},
        {TR_OP_CROSS_ENTROPY_BWD, ce_attrs(-1), 3, {dl64, x64, t}, {dl32, x32, t}, 2, {rows, cols}},
        {TR_OP_SUM, axis_attrs(0), 1, {x64}, {x32}, 1, {cols}},
        {TR_OP_MEAN, axis_attrs(-1), 1, {x64}, {x32}, 1, {1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct tr_tensor y64 = gc_tensor(TR_F64, (int)cases[k].out_rank, cases[k].out_dims);
        struct tr_tensor y32 = gc_tensor(TR_F32, (int)cases[k].out_rank, cases[k].out_dims);
        run_node(cases[k].op, cases[k].at, 0, cases[k].nin, cases[k].in64, y64);
        run_node(cases[k].op, cases[k].at, 0, cases[k].nin, cases[k].in32, y32);
        double d = normwise_diff(y32, y64);
        ck_assert_msg(d < 1e-6, "%s: f32 differs from f64 by %g", tr_op_name(cases[k].op), d);
        gc_free(&y64), gc_free(&y32);
    }
    gc_free(&x64), gc_free(&w64), gc_free(&dl64), gc_free(&t), gc_free(&x32), gc_free(&w32), gc_free(&dl32);
}
END_TEST

/* ---- the classifier and cross-entropy fused ------------------------------------------------ */

static union tr_attrs lce_attrs(int32_t ignore, int32_t chunk)
{
    return (union tr_attrs){.cross_entropy = {ignore, chunk}};
}

/* Runs LINEAR_CROSS_ENTROPY (nin 3: x, w, targets → loss, lse, rank) or its backward (nin 5:
 * dloss, x, w, targets, lse → dx, dw) with the workspace the backend asks for. */
static void lce_run(enum tr_op op, union tr_attrs at, int acc, const struct tr_tensor *in, struct tr_tensor *out)
{
    struct tr_node node = {.op = op, .attrs = at, .accumulate = (uint8_t)acc};
    int fwd = op == TR_OP_LINEAR_CROSS_ENTROPY;
    struct tr_kernel_args a = {.node = &node, .nin = fwd ? 3 : 5, .nout = fwd ? 3 : 2};
    for (int i = 0; i < a.nin; i++)
        a.in[i] = in[i];
    for (int i = 0; i < a.nout; i++)
        a.out[i] = out[i];
    a.workspace_bytes = tr_cpu_ops.workspace_bytes(&node, a.in, a.out);
    a.workspace = malloc(a.workspace_bytes + 1);
    ck_assert_ptr_nonnull(a.workspace);
    gc_run(&a);
    free(a.workspace);
}

/* Rows 7 in chunks of 3 (the last one short), an ignored row; the loss weighted 1.7 so that a
 * dropped dloss factor shows: dx and dw against central differences of the forward. */
START_TEST(linear_cross_entropy_gradient)
{
    uint64_t seed = 77;
    static const int32_t targets[] = {1, 5, -100, 0, 3, 2, 4};
    struct tr_tensor x = gc_make(TR_F64, 7, 4), w = gc_make(TR_F64, 6, 4), t = gc_make(TR_I32, 7),
                     loss = gc_make(TR_F64, 1), lse = gc_make(TR_F64, 7), rank = gc_make(TR_I32, 7),
                     dl = gc_make(TR_F64, 1), dx = gc_make(TR_F64, 7, 4), dw = gc_make(TR_F64, 6, 4);
    gc_fill(&x, &seed, -2, 2), gc_fill(&w, &seed, -2, 2);
    memcpy(t.data, targets, sizeof targets);
    F64(dl)[0] = 1.7;
    union tr_attrs at = lce_attrs(-100, 3);
    struct tr_node f = {.op = TR_OP_LINEAR_CROSS_ENTROPY, .attrs = at};
    double scratch[3 * 6];
    struct tr_kernel_args fa = {.node = &f, .in = {x, w, t}, .out = {loss, lse, rank}, .nin = 3, .nout = 3,
                                .workspace = scratch, .workspace_bytes = sizeof scratch};
    gc_run(&fa);
    lce_run(TR_OP_LINEAR_CROSS_ENTROPY_BWD, at, 0, (struct tr_tensor[]){dl, x, w, t, lse},
            (struct tr_tensor[]){dx, dw});
    gc_assert(&fa, 0, (struct tr_tensor[3]){dl}, &dx);   /* lse and rank unweighted */
    gc_assert(&fa, 1, (struct tr_tensor[3]){dl}, &dw);
    for (int c = 0; c < 4; c++)   /* the ignored row gets exactly nothing */
        ck_assert(F64(dx)[2 * 4 + c] == 0);
    gc_free(&x), gc_free(&w), gc_free(&t), gc_free(&loss), gc_free(&lse), gc_free(&rank), gc_free(&dl),
        gc_free(&dx), gc_free(&dw);
}
END_TEST

/* The loss, lse and ranks equal what the unfused path (MATMUL, then CROSS_ENTROPY) and the
 * definitions give, whatever the chunk: 1 row, 4 (not dividing 13), all of them at once, the
 * backend's own; the gradients equal CROSS_ENTROPY_BWD's pushed through the matmul. */
START_TEST(linear_cross_entropy_matches_unfused)
{
    uint64_t seed = 5;
    const int N = 13, D = 6, V = 17;
    struct tr_tensor x = gc_make(TR_F64, N, D), w = gc_make(TR_F64, V, D), t = gc_make(TR_I32, N),
                     logits = gc_make(TR_F64, N, V), want = gc_make(TR_F64, 1), dl = gc_make(TR_F64, 1),
                     dlogits = gc_make(TR_F64, N, V), dx_want = gc_make(TR_F64, N, D),
                     dw_want = gc_make(TR_F64, V, D);
    gc_fill(&x, &seed, -3, 3), gc_fill(&w, &seed, -1, 1), gc_fill(&t, &seed, -1, V);   /* −1: ignored */
    F64(dl)[0] = 0.8;
    run_node(TR_OP_MATMUL, (union tr_attrs){.matmul = {0, 1}}, 0, 2, (struct tr_tensor[]){x, w}, logits);
    run_node(TR_OP_CROSS_ENTROPY, ce_attrs(-1), 0, 2, (struct tr_tensor[]){logits, t}, want);
    run_node(TR_OP_CROSS_ENTROPY_BWD, ce_attrs(-1), 0, 3, (struct tr_tensor[]){dl, logits, t}, dlogits);
    run_node(TR_OP_MATMUL, (union tr_attrs){.matmul = {0, 0}}, 0, 2, (struct tr_tensor[]){dlogits, w}, dx_want);
    run_node(TR_OP_MATMUL, (union tr_attrs){.matmul = {1, 0}}, 0, 2, (struct tr_tensor[]){dlogits, x}, dw_want);
    static const int chunks[] = {1, 4, 13, 0};
    for (int k = 0; k < 4; k++) {
        struct tr_tensor loss = gc_make(TR_F64, 1), lse = gc_make(TR_F64, N), rank = gc_make(TR_I32, N),
                         dx = gc_make(TR_F64, N, D), dw = gc_make(TR_F64, V, D);
        union tr_attrs at = lce_attrs(-1, chunks[k]);
        lce_run(TR_OP_LINEAR_CROSS_ENTROPY, at, 0, (struct tr_tensor[]){x, w, t},
                (struct tr_tensor[]){loss, lse, rank});
        ck_assert_msg(fabs(F64(loss)[0] - F64(want)[0]) <= 1e-13, "chunk %d: loss %.17g, unfused %.17g",
                      chunks[k], F64(loss)[0], F64(want)[0]);
        for (int r = 0; r < N; r++) {
            const double *row = F64(logits) + r * V;
            if (I32(t)[r] < 0) {
                ck_assert(I32(rank)[r] == -1 && F64(lse)[r] == 0);
                continue;
            }
            double s = 0;
            int above = 0;
            for (int c = 0; c < V; c++) {
                s += exp(row[c]);
                above += row[c] > row[I32(t)[r]];
            }
            ck_assert_double_eq_tol(F64(lse)[r], log(s), 1e-13);
            ck_assert_int_eq(I32(rank)[r], above);
        }
        lce_run(TR_OP_LINEAR_CROSS_ENTROPY_BWD, at, 0, (struct tr_tensor[]){dl, x, w, t, lse},
                (struct tr_tensor[]){dx, dw});
        ck_assert_msg(normwise_diff64(dx, dx_want) < 1e-13, "chunk %d: dx", chunks[k]);
        ck_assert_msg(normwise_diff64(dw, dw_want) < 1e-13, "chunk %d: dw", chunks[k]);
        lce_run(TR_OP_LINEAR_CROSS_ENTROPY_BWD, at, 1, (struct tr_tensor[]){dl, x, w, t, lse},
                (struct tr_tensor[]){dx, dw});   /* accumulate: both outputs doubled */
        for (int i = 0; i < N * D; i++)
            ck_assert_double_eq_tol(F64(dx)[i], 2 * F64(dx_want)[i], 1e-12);
        for (int i = 0; i < V * D; i++)
            ck_assert_double_eq_tol(F64(dw)[i], 2 * F64(dw_want)[i], 1e-12);
        union tr_attrs add = at;   /* add_dw: dw added into, dx overwritten */
        add.cross_entropy.add_dw = 1;
        lce_run(TR_OP_LINEAR_CROSS_ENTROPY_BWD, add, 0, (struct tr_tensor[]){dl, x, w, t, lse},
                (struct tr_tensor[]){dx, dw});
        for (int i = 0; i < N * D; i++)
            ck_assert_double_eq_tol(F64(dx)[i], F64(dx_want)[i], 1e-12);
        for (int i = 0; i < V * D; i++)
            ck_assert_double_eq_tol(F64(dw)[i], 3 * F64(dw_want)[i], 1e-12);
        gc_free(&loss), gc_free(&lse), gc_free(&rank), gc_free(&dx), gc_free(&dw);
    }
    gc_free(&x), gc_free(&w), gc_free(&t), gc_free(&logits), gc_free(&want), gc_free(&dl),
        gc_free(&dlogits), gc_free(&dx_want), gc_free(&dw_want);
}
END_TEST

/* Ties rank by index: equal logits put the lower class first. Every row ignored: loss 0 and
 * zero gradients (dw overwritten, not left as it was). A target out of range: the sentence. */
START_TEST(linear_cross_entropy_edges)
{
    struct tr_tensor x = gc_make(TR_F64, 2, 2), w = gc_make(TR_F64, 3, 2), t = gc_make(TR_I32, 2),
                     loss = gc_make(TR_F64, 1), lse = gc_make(TR_F64, 2), rank = gc_make(TR_I32, 2),
                     dl = gc_make(TR_F64, 1), dx = gc_make(TR_F64, 2, 2), dw = gc_make(TR_F64, 3, 2);
    for (int i = 0; i < 6; i++)
        F64(w)[i] = 1;                       /* every class scores the same */
    F64(x)[0] = 1, F64(x)[3] = 2;
    I32(t)[0] = 0, I32(t)[1] = 2;
    lce_run(TR_OP_LINEAR_CROSS_ENTROPY, lce_attrs(-100, 0), 0, (struct tr_tensor[]){x, w, t},
            (struct tr_tensor[]){loss, lse, rank});
    ck_assert_int_eq(I32(rank)[0], 0);
    ck_assert_int_eq(I32(rank)[1], 2);
    ck_assert_double_eq_tol(F64(loss)[0], log(3.0), 1e-15);
    I32(t)[0] = I32(t)[1] = -100;
    F64(dl)[0] = 1;
    for (int i = 0; i < 6; i++)
        F64(dw)[i] = NAN;
    lce_run(TR_OP_LINEAR_CROSS_ENTROPY, lce_attrs(-100, 1), 0, (struct tr_tensor[]){x, w, t},
            (struct tr_tensor[]){loss, lse, rank});
    ck_assert(F64(loss)[0] == 0);
    lce_run(TR_OP_LINEAR_CROSS_ENTROPY_BWD, lce_attrs(-100, 1), 0, (struct tr_tensor[]){dl, x, w, t, lse},
            (struct tr_tensor[]){dx, dw});
    for (int i = 0; i < 6; i++)
        ck_assert(F64(dw)[i] == 0 && (i >= 4 || F64(dx)[i] == 0));
    I32(t)[1] = 3;
    struct tr_node node = {.op = TR_OP_LINEAR_CROSS_ENTROPY, .attrs = lce_attrs(-100, 0)};
    char error[GC_ERROR_MAX] = "", scratch[64];
    struct tr_kernel_args a = {.node = &node, .in = {x, w, t}, .out = {loss, lse, rank}, .nin = 3, .nout = 3,
                               .workspace = scratch, .workspace_bytes = sizeof scratch};
    ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &a, error), TR_EINVAL);
    ck_assert_str_eq(error, "linear_cross_entropy: target 3 at row 1 is outside the 3 classes");
    gc_free(&x), gc_free(&w), gc_free(&t), gc_free(&loss), gc_free(&lse), gc_free(&rank), gc_free(&dl),
        gc_free(&dx), gc_free(&dw);
}
END_TEST

/* f32, 3 chunks: the same bits for loss, lse, rank, dx and dw on 1 thread and on 3. */
START_TEST(linear_cross_entropy_independent_of_threads)
{
    uint64_t seed = 99;
    const int N = 300, D = 70, V = 1001;
    struct tr_tensor x = gc_make(TR_F32, N, D), w = gc_make(TR_F32, V, D), t = gc_make(TR_I32, N),
                     dl = gc_make(TR_F32, 1);
    gc_fill(&x, &seed, -1, 1), gc_fill(&w, &seed, -1, 1), gc_fill(&t, &seed, -1, V);
    F32(dl)[0] = 1;
    struct tr_tensor out[2][5];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run ? 3 : 1);
        struct tr_tensor *o = out[run];
        o[0] = gc_make(TR_F32, 1), o[1] = gc_make(TR_F32, N), o[2] = gc_make(TR_I32, N);
        o[3] = gc_make(TR_F32, N, D), o[4] = gc_make(TR_F32, V, D);
        lce_run(TR_OP_LINEAR_CROSS_ENTROPY, lce_attrs(-1, 128), 0, (struct tr_tensor[]){x, w, t}, o);
        lce_run(TR_OP_LINEAR_CROSS_ENTROPY_BWD, lce_attrs(-1, 128), 0, (struct tr_tensor[]){dl, x, w, t, o[1]},
                o + 3);
    }
    omp_set_num_threads(2);
    for (int k = 0; k < 5; k++) {
        ck_assert_msg(memcmp(out[0][k].data, out[1][k].data, tr_tensor_bytes(&out[0][k])) == 0,
                      "output %d differs between 1 and 3 threads", k);
        gc_free(&out[0][k]), gc_free(&out[1][k]);
    }
    gc_free(&x), gc_free(&w), gc_free(&t), gc_free(&dl);
}
END_TEST

/* Runs a node on 1 thread and on 2 (f32, where a different order would change the bits) and
 * asserts the two outputs are the same to the bit. */
static void check_thread_independent(enum tr_op op, union tr_attrs at, int nin, const struct tr_tensor *in,
                                     struct tr_tensor out)
{
    size_t bytes = tr_tensor_bytes(&out);
    void *one_thread = malloc(bytes);
    ck_assert_ptr_nonnull(one_thread);
    omp_set_num_threads(1);
    run_node(op, at, 0, nin, in, out);
    memcpy(one_thread, out.data, bytes);
    omp_set_num_threads(2);
    run_node(op, at, 0, nin, in, out);
    ck_assert_msg(memcmp(one_thread, out.data, bytes) == 0, "%s: 1 and 2 threads differ", tr_op_name(op));
    free(one_thread);
}

START_TEST(reductions_independent_of_threads)
{
    uint64_t seed = 4242;
    struct tr_tensor x = gc_make(TR_F32, 100003), s = gc_make(TR_F32, 1);
    struct tr_tensor logits = gc_make(TR_F32, 777, 33), t = gc_make(TR_I32, 777), loss = gc_make(TR_F32, 1);
    gc_fill(&x, &seed, -1, 1), gc_fill(&logits, &seed, -8, 8), gc_fill(&t, &seed, -1, 33);
    check_thread_independent(TR_OP_SUM, axis_attrs(-1), 1, &x, s);
    check_thread_independent(TR_OP_MEAN, axis_attrs(-1), 1, &x, s);
    check_thread_independent(TR_OP_CROSS_ENTROPY, ce_attrs(-1), 2, (struct tr_tensor[]){logits, t}, loss);
    gc_free(&x), gc_free(&s), gc_free(&logits), gc_free(&t), gc_free(&loss);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels_softmax");
    TCase *tc = tcase_create("softmax, cross entropy and reductions");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, softmax_gradient);
    tcase_add_test(tc, log_softmax_gradient);
    tcase_add_test(tc, softmax_values);
    tcase_add_test(tc, softmax_rows_sum_to_one);
    tcase_add_test(tc, cross_entropy_gradient);
    tcase_add_test(tc, cross_entropy_values);
    tcase_add_test(tc, cross_entropy_against_definition);
    tcase_add_test(tc, cross_entropy_large_logits);
    tcase_add_test(tc, cross_entropy_all_ignored);
    tcase_add_test(tc, cross_entropy_target_out_of_range);
    tcase_add_test(tc, linear_cross_entropy_gradient);
    tcase_add_test(tc, linear_cross_entropy_matches_unfused);
    tcase_add_test(tc, linear_cross_entropy_edges);
    tcase_add_test(tc, linear_cross_entropy_independent_of_threads);
    tcase_add_test(tc, sum_mean_values);
    tcase_add_test(tc, sum_mean_gradients);
    tcase_add_test(tc, sum_bwd_values);
    tcase_add_test(tc, argmax_values);
    tcase_add_test(tc, accumulate_flag);
    tcase_add_test(tc, f32_agrees_with_f64);
    tcase_add_test(tc, reductions_independent_of_threads);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
