/* CPU kernels that move data (src/backend/cpu/shape.c) and look rows up (embedding.c):
 * permute, slice, concat, gather, masked_fill, cast and embedding. Finite-difference gradient
 * checks in f64 through the backward the graph uses, values against index arithmetic done
 * here, every dtype pair of cast with exact 16-bit values, out-of-range ids, accumulate (+=),
 * and scatter-adds that give the same bits on 1 thread and on 2. */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>

#define U8(t) ((uint8_t *)(t).data)
#define U16(t) ((uint16_t *)(t).data)

static void check_gradient(enum tr_op op, union tr_attrs at, int nin, const struct tr_tensor *in,
                           struct tr_tensor out, int input, struct tr_tensor w, struct tr_tensor analytic)
{
    struct tr_node f = {.op = op, .attrs = at};
    struct tr_kernel_args fa = {.node = &f, .nin = nin, .nout = 1, .out = {out}};
    for (int i = 0; i < nin; i++)
        fa.in[i] = in[i];
    gc_run(&fa);
    gc_assert(&fa, input, (struct tr_tensor[]){w}, &analytic);
}

/* Element k of each tensor of any dtype holds the pattern k·37 + 11 in all its bytes' worth:
 * a value that tells where an element came from whatever the element size. */
static void fill_pattern(struct tr_tensor t, int64_t offset)
{
    size_t es = tr_dtype_size(t.dtype);
    for (int64_t k = 0; k < tr_tensor_numel(&t); k++) {
        uint64_t v = (uint64_t)(k + offset) * 37 + 11;
        memcpy((char *)t.data + (size_t)k * es, &v, es);
    }
}

static void expect_bytes_equal(const struct tr_tensor *got, const void *expect, const char *what)
{
    ck_assert_msg(memcmp(got->data, expect, tr_tensor_bytes(got)) == 0, "%s: wrong elements", what);
}

/* ---- permute ---------------------------------------------------------------------------- */

static union tr_attrs perm_attrs(int rank, const int *perm)
{
    union tr_attrs at = {0};
    for (int i = 0; i < rank; i++)
        at.permute.perm[i] = perm[i];
    return at;
}

/* The permuted copy computed here, one element at a time, from y's index back to x's. */
static void permute_expected(const struct tr_tensor *x, const int *perm, const int64_t *ydims, char *expect)
{
    size_t es = tr_dtype_size(x->dtype);
    int64_t n = tr_tensor_numel(x), xstride[TR_MAX_RANK], s = 1;
    for (int i = x->rank - 1; i >= 0; i--)
        xstride[i] = s, s *= x->dim[i];
    for (int64_t q = 0; q < n; q++) {
        int64_t rest = q, from = 0;
        for (int i = x->rank - 1; i >= 0; i--)
            from += rest % ydims[i] * xstride[perm[i]], rest /= ydims[i];
        memcpy(expect + q * (int64_t)es, (const char *)x->data + from * (int64_t)es, es);
    }
}

/* Every rank to 5, perms that keep trailing axes (moved as runs) and ones that do not, and
 * every element size. */
START_TEST(permute_values)
{
    static const struct {
        int rank;
        int64_t dims[TR_MAX_RANK];
        int perm[TR_MAX_RANK];
    } cases[] = {
        {1, {7}, {0}},
        {2, {3, 5}, {1, 0}},
        {3, {2, 3, 4}, {2, 0, 1}},
        {3, {2, 3, 4}, {1, 0, 2}},
        {4, {2, 3, 4, 5}, {0, 2, 1, 3}},
        {4, {2, 3, 4, 5}, {3, 2, 1, 0}},
        {5, {2, 3, 1, 4, 2}, {4, 2, 0, 3, 1}},
        {5, {2, 3, 2, 2, 3}, {1, 0, 2, 3, 4}},
        {5, {2, 3, 2, 2, 3}, {0, 1, 2, 3, 4}},
    };
    static const enum tr_dtype dtypes[] = {TR_F32, TR_F64, TR_BF16, TR_F16, TR_I32, TR_U8};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            int64_t ydims[TR_MAX_RANK];
            for (int i = 0; i < cases[c].rank; i++)
                ydims[i] = cases[c].dims[cases[c].perm[i]];
            struct tr_tensor x = gc_tensor(dtypes[d], cases[c].rank, cases[c].dims),
                             y = gc_tensor(dtypes[d], cases[c].rank, ydims);
            fill_pattern(x, 0);
            char *expect = malloc(tr_tensor_bytes(&x));
            ck_assert_ptr_nonnull(expect);
            permute_expected(&x, cases[c].perm, ydims, expect);
            run_node(TR_OP_PERMUTE, perm_attrs(cases[c].rank, cases[c].perm), 0, 1, &x, y);
            expect_bytes_equal(&y, expect, "permute");
            free(expect), gc_free(&x), gc_free(&y);
        }
}
END_TEST

/* The gradient of PERMUTE is PERMUTE of the weights by the inverse perm. */
START_TEST(permute_gradient)
{
    static const int perm[4] = {2, 0, 3, 1};
    int inverse[4];
    for (int i = 0; i < 4; i++)
        inverse[perm[i]] = i;
    uint64_t seed = 3;
    struct tr_tensor x = gc_make(TR_F64, 2, 3, 4, 2), y = gc_make(TR_F64, 4, 2, 2, 3),
                     w = gc_make(TR_F64, 4, 2, 2, 3), dx = gc_make(TR_F64, 2, 3, 4, 2);
    gc_fill(&x, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
    run_node(TR_OP_PERMUTE, perm_attrs(4, inverse), 0, 1, &w, dx);
    check_gradient(TR_OP_PERMUTE, perm_attrs(4, perm), 1, &x, y, 0, w, dx);
    gc_free(&x), gc_free(&y), gc_free(&w), gc_free(&dx);
}
END_TEST

/* ---- slice ------------------------------------------------------------------------------- */

static union tr_attrs slice_attrs(int axis, int64_t start)
{
    return (union tr_attrs){.slice = {axis, start}};
}

/* x [3, 5, 2] sliced to [1, 4) on axis 1: y[a, j, c] = x[a, 1 + j, c]; SLICE_BWD puts dy back
 * there and zeros the rest, and is SLICE's gradient. */
START_TEST(slice_values_and_gradient)
{
    uint64_t seed = 12;
    struct tr_tensor x = gc_make(TR_F64, 3, 5, 2), y = gc_make(TR_F64, 3, 3, 2), w = gc_make(TR_F64, 3, 3, 2),
                     dx = gc_make(TR_F64, 3, 5, 2);
    gc_fill(&x, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
    for (int i = 0; i < 30; i++)
        F64(dx)[i] = NAN;   /* SLICE_BWD must write every element */
    run_node(TR_OP_SLICE, slice_attrs(1, 1), 0, 1, &x, y);
    run_node(TR_OP_SLICE_BWD, slice_attrs(1, 1), 0, 1, &w, dx);
    for (int a = 0; a < 3; a++)
        for (int j = 0; j < 5; j++)
            for (int c = 0; c < 2; c++) {
                int inside = j >= 1 && j < 4;
                if (inside)
                    ck_assert(F64(y)[(a * 3 + j - 1) * 2 + c] == F64(x)[(a * 5 + j) * 2 + c]);
                ck_assert(F64(dx)[(a * 5 + j) * 2 + c] == (inside ? F64(w)[(a * 3 + j - 1) * 2 + c] : 0));
            }
    check_gradient(TR_OP_SLICE, slice_attrs(1, 1), 1, &x, y, 0, w, dx);
    gc_free(&x), gc_free(&y), gc_free(&w), gc_free(&dx);
}
END_TEST

/* Under accumulate SLICE_BWD adds dy into its range and leaves the rest of dx alone. */
START_TEST(slice_bwd_accumulates_only_its_range)
{
    struct tr_tensor dy = gc_make(TR_F64, 2, 2), dx = gc_make(TR_F64, 2, 5);
    for (int i = 0; i < 4; i++)
        F64(dy)[i] = i + 1;
    for (int i = 0; i < 10; i++)
        F64(dx)[i] = 100;
    run_node(TR_OP_SLICE_BWD, slice_attrs(1, 3), 1, 1, &dy, dx);
    static const double expect[10] = {100, 100, 100, 101, 102, 100, 100, 100, 103, 104};
    for (int i = 0; i < 10; i++)
        ck_assert_double_eq(F64(dx)[i], expect[i]);
    gc_free(&dy), gc_free(&dx);
}
END_TEST

/* ---- concat ------------------------------------------------------------------------------ */

static union tr_attrs axis_attrs(int axis)
{
    return (union tr_attrs){.axis = {axis}};
}

/* [2, 1, 3] ‖ [2, 2, 3] ‖ [2, 3, 3] on axis 1; each input's gradient is the SLICE of the weights
 * at its offset, which is how autodiff splits it. */
START_TEST(concat_values_and_gradient)
{
    uint64_t seed = 44;
    struct tr_tensor xs[3] = {gc_make(TR_F64, 2, 1, 3), gc_make(TR_F64, 2, 2, 3), gc_make(TR_F64, 2, 3, 3)};
    struct tr_tensor y = gc_make(TR_F64, 2, 6, 3), w = gc_make(TR_F64, 2, 6, 3);
    for (int k = 0; k < 3; k++)
        gc_fill(&xs[k], &seed, -1, 1);
    gc_fill(&w, &seed, -1, 1);
    run_node(TR_OP_CONCAT, axis_attrs(1), 0, 3, xs, y);
    for (int a = 0; a < 2; a++)
        for (int j = 0, k = 0, base = 0; j < 6; j++) {
            if (j - base == xs[k].dim[1])
                base += (int)xs[k++].dim[1];
            for (int c = 0; c < 3; c++)
                ck_assert(F64(y)[(a * 6 + j) * 3 + c] == F64(xs[k])[(a * xs[k].dim[1] + j - base) * 3 + c]);
        }
    for (int k = 0, offset = 0; k < 3; offset += (int)xs[k++].dim[1]) {
        struct tr_tensor dk = gc_tensor(TR_F64, 3, xs[k].dim);
        run_node(TR_OP_SLICE, slice_attrs(1, offset), 0, 1, &w, dk);
        check_gradient(TR_OP_CONCAT, axis_attrs(1), 3, xs, y, k, w, dk);
        gc_free(&dk);
    }
    for (int k = 0; k < 3; k++)
        gc_free(&xs[k]);
    gc_free(&y), gc_free(&w);
}
END_TEST

/* Eight inputs (the most a node has), of i32, on axis 0: the rows follow one another. */
START_TEST(concat_eight_inputs)
{
    struct tr_tensor xs[TR_MAX_IN], y = gc_make(TR_I32, 36, 2);
    int rows = 0;
    for (int k = 0; k < TR_MAX_IN; k++) {
        xs[k] = gc_make(TR_I32, k + 1, 2);
        for (int i = 0; i < 2 * (k + 1); i++)
            I32(xs[k])[i] = 100 * k + i;
        rows += k + 1;
    }
    ck_assert_int_eq(rows, 36);
    run_node(TR_OP_CONCAT, axis_attrs(0), 0, TR_MAX_IN, xs, y);
    for (int k = 0, at = 0; k < TR_MAX_IN; k++)
        for (int i = 0; i < 2 * (k + 1); i++)
            ck_assert_int_eq(I32(y)[at++], 100 * k + i);
    for (int k = 0; k < TR_MAX_IN; k++)
        gc_free(&xs[k]);
    gc_free(&y);
}
END_TEST

/* ---- gather and embedding ---------------------------------------------------------------- */

static union tr_attrs gather_attrs(int64_t rows)
{
    return (union tr_attrs){.gather = {rows}};
}

/* y[p] = table[ids[p]] for ids of any shape; the backward scatter-adds, repeats included. */
static void check_lookup(enum tr_op op, enum tr_op bwd_op, int id_rank, const int64_t *id_dims)
{
    uint64_t seed = 61;
    const int64_t V = 7, D = 40;   /* D > 32: more than one column block in the scatter-add */
    struct tr_tensor table = gc_make(TR_F64, V, D), ids = gc_tensor(TR_I32, id_rank, id_dims);
    int64_t n = tr_tensor_numel(&ids), ydims[TR_MAX_RANK];
    memcpy(ydims, id_dims, (size_t)id_rank * sizeof(int64_t));
    ydims[id_rank] = D;
    struct tr_tensor y = gc_tensor(TR_F64, id_rank + 1, ydims), w = gc_tensor(TR_F64, id_rank + 1, ydims),
                     dtable = gc_make(TR_F64, V, D);
    gc_fill(&table, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
    for (int64_t p = 0; p < n; p++)
        I32(ids)[p] = (int32_t)((p * 5 + 3) % V);   /* n > V: rows repeat */
    union tr_attrs at = gather_attrs(V);
    run_node(op, at, 0, 2, (struct tr_tensor[]){table, ids}, y);
    for (int64_t p = 0; p < n; p++)
        ck_assert(memcmp(F64(y) + p * D, F64(table) + I32(ids)[p] * D, (size_t)D * sizeof(double)) == 0);
    run_node(bwd_op, at, 0, 2, (struct tr_tensor[]){w, ids}, dtable);
    check_gradient(op, at, 2, (struct tr_tensor[]){table, ids}, y, 0, w, dtable);
    check_accumulates(bwd_op, at, 2, (struct tr_tensor[]){w, ids}, dtable);
    check_accumulates(op, at, 2, (struct tr_tensor[]){table, ids}, y);
    gc_free(&table), gc_free(&ids), gc_free(&y), gc_free(&w), gc_free(&dtable);
}

START_TEST(embedding_values_and_gradient)
{
    check_lookup(TR_OP_EMBEDDING, TR_OP_EMBEDDING_BWD, 2, (const int64_t[]){3, 5});
    check_lookup(TR_OP_EMBEDDING, TR_OP_EMBEDDING_BWD, 1, (const int64_t[]){4});
}
END_TEST

START_TEST(gather_values_and_gradient)
{
    check_lookup(TR_OP_GATHER, TR_OP_GATHER_BWD, 1, (const int64_t[]){11});
}
END_TEST

START_TEST(ids_out_of_range)
{
    struct tr_tensor table = gc_make(TR_F64, 7, 3), ids = gc_make(TR_I32, 6), y = gc_make(TR_F64, 6, 3);
    I32(ids)[4] = 7;
    expect_error(TR_OP_EMBEDDING, (union tr_attrs){0}, 2, (struct tr_tensor[]){table, ids}, y,
                 "embedding: id 7 at position 4 is outside the vocabulary of 7");
    expect_error(TR_OP_EMBEDDING_BWD, (union tr_attrs){0}, 2, (struct tr_tensor[]){y, ids}, table,
                 "embedding_bwd: id 7 at position 4 is outside the vocabulary of 7");
    I32(ids)[4] = 0, I32(ids)[2] = -1;
    expect_error(TR_OP_EMBEDDING, (union tr_attrs){0}, 2, (struct tr_tensor[]){table, ids}, y,
                 "embedding: id -1 at position 2 is outside the vocabulary of 7");
    expect_error(TR_OP_GATHER, gather_attrs(7), 2, (struct tr_tensor[]){table, ids}, y,
                 "gather: id -1 at position 2 is outside the 7 rows of x");
    expect_error(TR_OP_GATHER_BWD, gather_attrs(7), 2, (struct tr_tensor[]){y, ids}, table,
                 "gather_bwd: id -1 at position 2 is outside the 7 rows of x");
    gc_free(&table), gc_free(&ids), gc_free(&y);
}
END_TEST

/* Runs a node on 1 thread and on 2 (f32, where another order of the sums would change the
 * bits) and asserts the two outputs are the same to the bit. */
static void check_thread_independent(enum tr_op op, int nin, const struct tr_tensor *in, struct tr_tensor out)
{
    size_t bytes = tr_tensor_bytes(&out);
    void *one_thread = malloc(bytes);
    ck_assert_ptr_nonnull(one_thread);
    omp_set_num_threads(1);
    run_node(op, gather_attrs(out.dim[0]), 0, nin, in, out);
    memcpy(one_thread, out.data, bytes);
    omp_set_num_threads(2);
    run_node(op, gather_attrs(out.dim[0]), 0, nin, in, out);
    ck_assert_msg(memcmp(one_thread, out.data, bytes) == 0, "%s: 1 and 2 threads differ", tr_op_name(op));
    free(one_thread);
}

/* 5000 positions onto 50 rows: each row of the table sums ~100 gradient rows. */
START_TEST(scatter_add_independent_of_threads)
{
    uint64_t seed = 2024;
    struct tr_tensor dy = gc_make(TR_F32, 5000, 200), ids = gc_make(TR_I32, 5000),
                     dtable = gc_make(TR_F32, 50, 200);
    gc_fill(&dy, &seed, -1, 1), gc_fill(&ids, &seed, 0, 50);
    check_thread_independent(TR_OP_EMBEDDING_BWD, 2, (struct tr_tensor[]){dy, ids}, dtable);
    check_thread_independent(TR_OP_GATHER_BWD, 2, (struct tr_tensor[]){dy, ids}, dtable);
    gc_free(&dy), gc_free(&ids), gc_free(&dtable);
}
END_TEST

/* ---- masked_fill --------------------------------------------------------------------------- */

/* x [2, 3, 4] with a mask over the first two dims and over the first alone; the gradient is
 * MASKED_FILL of the weights with 0. */
START_TEST(masked_fill_values_and_gradient)
{
    uint64_t seed = 71;
    struct tr_tensor x = gc_make(TR_F64, 2, 3, 4), y = gc_make(TR_F64, 2, 3, 4), w = gc_make(TR_F64, 2, 3, 4),
                     dx = gc_make(TR_F64, 2, 3, 4), masks[2] = {gc_make(TR_U8, 2, 3), gc_make(TR_U8, 2)};
    gc_fill(&x, &seed, -1, 1), gc_fill(&w, &seed, -1, 1);
    static const uint8_t m6[6] = {1, 0, 0, 1, 1, 0}, m2[2] = {0, 1};
    memcpy(masks[0].data, m6, 6), memcpy(masks[1].data, m2, 2);
    for (int k = 0; k < 2; k++) {
        int64_t inner = 24 / tr_tensor_numel(&masks[k]);
        struct tr_tensor x_mask[2] = {x, masks[k]}, w_mask[2] = {w, masks[k]};
        run_node(TR_OP_MASKED_FILL, (union tr_attrs){.fill = {-1e9f}}, 0, 2, x_mask, y);
        for (int i = 0; i < 24; i++)
            ck_assert(F64(y)[i] == (U8(masks[k])[i / inner] ? (double)-1e9f : F64(x)[i]));
        run_node(TR_OP_MASKED_FILL, (union tr_attrs){.fill = {0}}, 0, 2, w_mask, dx);
        /* a fill of −1e9 would put 1e9 in the loss and its rounding (1e-16·1e9/h) in the check */
        check_gradient(TR_OP_MASKED_FILL, (union tr_attrs){.fill = {-3}}, 2, x_mask, y, 0, w, dx);
    }
    gc_free(&x), gc_free(&y), gc_free(&w), gc_free(&dx), gc_free(&masks[0]), gc_free(&masks[1]);
}
END_TEST

/* ---- cast ----------------------------------------------------------------------------------- */

static const enum tr_dtype all_dtypes[] = {TR_F32, TR_BF16, TR_F16, TR_F64, TR_I32, TR_U8};

/* Element i as a double, decoded here independently of the kernel. */
static double decode(const struct tr_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TR_F32: return F32(*t)[i];
    case TR_BF16: return tr_bf16_to_f32(U16(*t)[i]);
    case TR_F16: return tr_f16_to_f32(U16(*t)[i]);
    case TR_I32: return I32(*t)[i];
    case TR_U8: return U8(*t)[i];
    case TR_F64: case TR_NDTYPES:
    default: return F64(*t)[i];
    }
}

static void cast(struct tr_tensor x, struct tr_tensor y)
{
    run_node(TR_OP_CAST, (union tr_attrs){0}, 0, 1, &x, y);
}

/* 0..255 is exact in every dtype: a → b holds the same numbers, and b → a gives a's bytes back. */
START_TEST(cast_every_pair_round_trips)
{
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 6; j++) {
            struct tr_tensor a = gc_make(all_dtypes[i], 256), b = gc_make(all_dtypes[j], 256),
                             back = gc_make(all_dtypes[i], 256), u8 = gc_make(TR_U8, 256);
            for (int k = 0; k < 256; k++)
                U8(u8)[k] = (uint8_t)(255 - k);
            cast(u8, a);
            cast(a, b);
            cast(b, back);
            for (int k = 0; k < 256; k++)
                ck_assert_msg(decode(&b, k) == 255 - k, "%s → %s: element %d is %g",
                              tr_dtype_name(all_dtypes[i]), tr_dtype_name(all_dtypes[j]), k, decode(&b, k));
            ck_assert_msg(memcmp(a.data, back.data, tr_tensor_bytes(&a)) == 0, "%s → %s and back",
                          tr_dtype_name(all_dtypes[i]), tr_dtype_name(all_dtypes[j]));
            gc_free(&a), gc_free(&b), gc_free(&back), gc_free(&u8);
        }
}
END_TEST

/* Any value of a narrower float comes back exactly from a wider one. */
START_TEST(cast_float_round_trips)
{
    uint64_t seed = 5;
    static const enum tr_dtype narrow[] = {TR_BF16, TR_F16, TR_F32}, wide[] = {TR_F32, TR_F32, TR_F64};
    for (int k = 0; k < 3; k++) {
        struct tr_tensor src = gc_make(TR_F64, 1000), a = gc_make(narrow[k], 1000),
                         b = gc_make(wide[k], 1000), back = gc_make(narrow[k], 1000);
        gc_fill(&src, &seed, -300, 300);
        cast(src, a);
        cast(a, b);
        cast(b, back);
        ck_assert(memcmp(a.data, back.data, tr_tensor_bytes(&a)) == 0);
        gc_free(&src), gc_free(&a), gc_free(&b), gc_free(&back);
    }
}
END_TEST

/* Exact 16-bit patterns (the f16 ones agree with Python's struct.pack('e')): ties to even in
 * both formats, overflow to inf, f16 subnormals and their ties. */
START_TEST(cast_16_bit_values)
{
    const uint32_t in[] = {0x3f800000 /* 1 */, 0x40490fdb /* π */, 0x3f808000 /* 1 + 2⁻⁸ */,
                           0x3f818000 /* 1 + 3·2⁻⁸ */, 0x3f801000 /* 1 + 2⁻¹¹ */,
                           0x3f803000 /* 1 + 3·2⁻¹¹ */,
                           0xc0200000 /* −2.5 */, 0x3dcccccd /* 0.1 */, 0x477fe000 /* 65504 */,
                           0x47c35000 /* 1e5 */, 0x33800000 /* 2⁻²⁴ */, 0x33000000 /* 2⁻²⁵ */,
                           0x33c00000 /* 3·2⁻²⁵ */, 0x7f800000 /* inf */};
    static const uint16_t bf16[] = {0x3f80, 0x4049, 0x3f80, 0x3f82, 0x3f80, 0x3f80, 0xc020,
                                    0x3dcd, 0x4780, 0x47c3, 0x3380, 0x3300, 0x33c0, 0x7f80};
    static const uint16_t f16[] = {0x3c00, 0x4248, 0x3c04, 0x3c0c, 0x3c00, 0x3c02, 0xc100,
                                   0x2e66, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x0002, 0x7c00};
    const int n = (int)(sizeof in / sizeof in[0]);
    struct tr_tensor x = gc_make(TR_F32, n), b = gc_make(TR_BF16, n), h = gc_make(TR_F16, n);
    memcpy(x.data, in, sizeof in);
    cast(x, b);
    cast(x, h);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(U16(b)[i] == bf16[i], "bf16(%#010x) = %#06x, not %#06x", in[i], U16(b)[i], bf16[i]);
        ck_assert_msg(U16(h)[i] == f16[i], "f16(%#010x) = %#06x, not %#06x", in[i], U16(h)[i], f16[i]);
    }
    gc_free(&x), gc_free(&b), gc_free(&h);
}
END_TEST

/* To integers: truncated toward zero, saturated at the type's ends, NaN → 0. */
START_TEST(cast_to_integers)
{
    const double in[] = {2.7, -2.7, 1e10, -1e10, NAN, 0.5, 254.9, 300, -5};
    static const int32_t i32[] = {2, -2, INT32_MAX, INT32_MIN, 0, 0, 254, 300, -5};
    static const uint8_t u8[] = {2, 0, 255, 0, 0, 0, 254, 255, 0};
    struct tr_tensor x = gc_make(TR_F64, 9), a = gc_make(TR_I32, 9), b = gc_make(TR_U8, 9),
                     c = gc_make(TR_U8, 9);
    memcpy(x.data, in, sizeof in);
    cast(x, a);
    cast(x, b);
    cast(a, c);   /* i32 → u8 saturates too: 300 → 255, −5 → 0 */
    for (int i = 0; i < 9; i++) {
        ck_assert_int_eq(I32(a)[i], i32[i]);
        ck_assert_int_eq(U8(b)[i], u8[i]);
        ck_assert_int_eq(U8(c)[i], u8[i]);
    }
    gc_free(&x), gc_free(&a), gc_free(&b), gc_free(&c);
}
END_TEST

/* ---- accumulate, precision --------------------------------------------------------------- */

START_TEST(accumulate_flag)
{
    uint64_t seed = 8;
    struct tr_tensor x = gc_make(TR_F64, 2, 3, 4), y = gc_make(TR_F64, 2, 3, 4), s = gc_make(TR_F64, 2, 1, 4),
                     cat = gc_make(TR_F64, 2, 6, 4), mask = gc_make(TR_U8, 2, 3),
                     p = gc_make(TR_F64, 4, 2, 3);
    gc_fill(&x, &seed, -1, 1), gc_fill(&mask, &seed, 0, 2);
    static const int perm[3] = {2, 0, 1};
    check_accumulates(TR_OP_PERMUTE, perm_attrs(3, perm), 1, &x, p);
    check_accumulates(TR_OP_SLICE, slice_attrs(1, 2), 1, &x, s);
    check_accumulates(TR_OP_SLICE_BWD, slice_attrs(1, 2), 1, &s, y);
    check_accumulates(TR_OP_CONCAT, axis_attrs(1), 2, (struct tr_tensor[]){x, x}, cat);
    check_accumulates(TR_OP_MASKED_FILL, (union tr_attrs){.fill = {0.25f}}, 2,
                      (struct tr_tensor[]){x, mask}, y);
    check_accumulates(TR_OP_CAST, (union tr_attrs){0}, 1, &x, y);
    gc_free(&x), gc_free(&y), gc_free(&s), gc_free(&cat), gc_free(&mask), gc_free(&p);
}
END_TEST

/* Accumulate into 16-bit floats adds in f32 and rounds once more; into integers it overwrites. */
START_TEST(accumulate_other_dtypes)
{
    struct tr_tensor x = gc_make(TR_F32, 3), h = gc_make(TR_BF16, 3), i = gc_make(TR_I32, 3);
    F32(x)[0] = 1.5f, F32(x)[1] = -0.25f, F32(x)[2] = 7;
    for (int k = 0; k < 3; k++)
        U16(h)[k] = tr_f32_to_bf16(2.0f), I32(i)[k] = 100;
    run_node(TR_OP_CAST, (union tr_attrs){0}, 1, 1, &x, h);
    run_node(TR_OP_CAST, (union tr_attrs){0}, 1, 1, &x, i);
    static const float hsum[3] = {3.5f, 1.75f, 9};
    static const int32_t ival[3] = {1, 0, 7};
    for (int k = 0; k < 3; k++) {
        ck_assert_float_eq(tr_bf16_to_f32(U16(h)[k]), hsum[k]);
        ck_assert_int_eq(I32(i)[k], ival[k]);
    }
    gc_free(&x), gc_free(&h), gc_free(&i);
}
END_TEST

/* The f32 kernels move the same values as the f64 ones; the scatter-add's sums agree to f32
 * precision. */
START_TEST(f32_agrees_with_f64)
{
    uint64_t seed = 19;
    struct tr_tensor dy64 = gc_make(TR_F64, 300, 37), dy32 = gc_make(TR_F32, 300, 37),
                     ids = gc_make(TR_I32, 300), t64 = gc_make(TR_F64, 9, 37), t32 = gc_make(TR_F32, 9, 37);
    gc_fill(&dy64, &seed, -1, 1), gc_fill(&ids, &seed, 0, 9);
    for (int k = 0; k < 300 * 37; k++)
        F32(dy32)[k] = (float)F64(dy64)[k], F64(dy64)[k] = F32(dy32)[k];
    run_node(TR_OP_EMBEDDING_BWD, (union tr_attrs){0}, 0, 2, (struct tr_tensor[]){dy64, ids}, t64);
    run_node(TR_OP_EMBEDDING_BWD, (union tr_attrs){0}, 0, 2, (struct tr_tensor[]){dy32, ids}, t32);
    double diff = 0, norm = 0;
    for (int k = 0; k < 9 * 37; k++) {
        double d = F32(t32)[k] - F64(t64)[k];
        diff += d * d, norm += F64(t64)[k] * F64(t64)[k];
    }
    ck_assert_msg(sqrt(diff / norm) < 1e-6, "normwise %g", sqrt(diff / norm));
    static const int perm[2] = {1, 0};
    struct tr_tensor p64 = gc_make(TR_F64, 37, 300), p32 = gc_make(TR_F32, 37, 300);
    run_node(TR_OP_PERMUTE, perm_attrs(2, perm), 0, 1, &dy64, p64);
    run_node(TR_OP_PERMUTE, perm_attrs(2, perm), 0, 1, &dy32, p32);
    for (int k = 0; k < 300 * 37; k++)
        ck_assert(F32(p32)[k] == F64(p64)[k]);
    gc_free(&dy64), gc_free(&dy32), gc_free(&ids), gc_free(&t64), gc_free(&t32), gc_free(&p64), gc_free(&p32);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels_shape");
    TCase *tc = tcase_create("data movement and lookups");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, permute_values);
    tcase_add_test(tc, permute_gradient);
    tcase_add_test(tc, slice_values_and_gradient);
    tcase_add_test(tc, slice_bwd_accumulates_only_its_range);
    tcase_add_test(tc, concat_values_and_gradient);
    tcase_add_test(tc, concat_eight_inputs);
    tcase_add_test(tc, embedding_values_and_gradient);
    tcase_add_test(tc, gather_values_and_gradient);
    tcase_add_test(tc, ids_out_of_range);
    tcase_add_test(tc, scatter_add_independent_of_threads);
    tcase_add_test(tc, masked_fill_values_and_gradient);
    tcase_add_test(tc, cast_every_pair_round_trips);
    tcase_add_test(tc, cast_float_round_trips);
    tcase_add_test(tc, cast_16_bit_values);
    tcase_add_test(tc, cast_to_integers);
    tcase_add_test(tc, accumulate_flag);
    tcase_add_test(tc, accumulate_other_dtypes);
    tcase_add_test(tc, f32_agrees_with_f64);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
