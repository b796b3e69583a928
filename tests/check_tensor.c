/* Unit tests of src/core/tensor.c and src/core/rng.c: symbolic sizes, 16-bit float
 * conversions, and the Philox generator against its published known-answer vectors. */
#include "runner.h"
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/tensor.h"

START_TEST(symbolic_sizes)
{
    /* attention scores [B, 12, S, S]: 12·B·S² elements */
    struct tr_shape s = tr_shape_make(4, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(12), tr_dim_S(1), tr_dim_S(1)});
    struct tr_dim n = tr_shape_numel(&s);
    ck_assert(tr_dim_equal(n, (struct tr_dim){12, 1, 2}));
    ck_assert_int_eq(tr_dim_eval(n, 8, 128), 12 * 8 * 128 * 128);
    char buf[96];
    tr_shape_format(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, "[B, 12, S, S]");
}
END_TEST

static float bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

START_TEST(bf16_rounds_to_nearest_even)
{
    ck_assert_uint_eq(tr_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(tr_f32_to_bf16(bits_to_float(0x3f808000)), 0x3f80);   /* tie → even */
    ck_assert_uint_eq(tr_f32_to_bf16(bits_to_float(0x3f818000)), 0x3f82);   /* tie → even (up) */
    ck_assert_uint_eq(tr_f32_to_bf16(bits_to_float(0x3f808001)), 0x3f81);   /* above the tie */
    ck_assert(isnan(tr_bf16_to_f32(tr_f32_to_bf16(NAN))));
    ck_assert(isinf(tr_bf16_to_f32(tr_f32_to_bf16(INFINITY))));
    ck_assert_float_eq(tr_bf16_to_f32(tr_f32_to_bf16(-2.5f)), -2.5f);
}
END_TEST

START_TEST(f16_matches_ieee)
{
    ck_assert_uint_eq(tr_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(tr_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(tr_f32_to_f16(65520.0f), 0x7c00);           /* rounds to inf */
    ck_assert_uint_eq(tr_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(tr_f32_to_f16(ldexpf(1, -24)), 0x0001);     /* smallest subnormal */
    ck_assert_uint_eq(tr_f32_to_f16(ldexpf(1, -26)), 0x0000);     /* below half of it */
    ck_assert_uint_eq(tr_f32_to_f16(-0.0f), 0x8000);
    ck_assert_uint_eq(tr_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);   /* tie → even */
    ck_assert_uint_eq(tr_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
    /* every finite half survives a round trip through f32 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        ck_assert_uint_eq(tr_f32_to_f16(tr_f16_to_f32((uint16_t)h)), h);
    }
}
END_TEST

/* The array conversions (F16C where present) give the scalar code's bits: every half, and
 * floats across the whole range including ties, subnormals, overflow and NaN. */
START_TEST(f16_arrays_match_scalar)
{
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    float *f = malloc(N * sizeof *f);
    for (uint32_t i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    tr_f16_widen(h, f, N);
    for (uint32_t i = 0; i < N; i++) {
        float want = tr_f16_to_f32(h[i]);
        ck_assert_msg(memcmp(&f[i], &want, 4) == 0 || (isnan(f[i]) && isnan(want)), "widen %04x", i);
    }
    uint32_t state = 12345;
    for (uint32_t i = 0; i < N; i++) {
        state = state * 1664525u + 1013904223u;
        uint32_t bits = i < 1024 ? (0x38000000u + (i << 13)) | 0x1000u : state;   /* ties first */
        memcpy(&f[i], &bits, 4);
    }
    tr_f16_narrow(f, back, N);
    for (uint32_t i = 0; i < N; i++) {
        uint16_t want = tr_f32_to_f16(f[i]);
        ck_assert_msg(back[i] == want || (isnan(f[i]) && (back[i] & 0x7c00) == 0x7c00 && (back[i] & 0x3ff)),
                      "narrow %a: %04x != %04x", f[i], back[i], want);
    }
    free(h), free(back), free(f);
}
END_TEST

/* Known-answer vectors of Philox4x32-10 from Random123 (kat_vectors). */
START_TEST(philox_known_answers)
{
    static const struct { uint32_t c[4], k[2], out[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        struct tr_philox r = tr_philox4x32(kat[i].c, kat[i].k);
        for (int j = 0; j < 4; j++)
            ck_assert_msg(r.v[j] == kat[i].out[j], "vector %zu word %d: %08x != %08x", i, j,
                          r.v[j], kat[i].out[j]);
    }
}
END_TEST

/* Dropout's uniforms: in [0, 1), mean ½, and each key field changes the draw. */
START_TEST(dropout_uniforms)
{
    double sum = 0;
    int n = 100000;
    for (int i = 0; i < n; i++) {
        float u = tr_rng_uniform(1234, 7, (uint64_t)i, 3, 5, 1);
        ck_assert(u >= 0 && u < 1);
        sum += u;
    }
    ck_assert_msg(fabs(sum / n - 0.5) < 0.005, "mean %g", sum / n);
    float base = tr_rng_uniform(1, 2, 3, 4, 5, 6);
    ck_assert_float_eq(base, tr_rng_uniform(1, 2, 3, 4, 5, 6));
    ck_assert_float_ne(base, tr_rng_uniform(9, 2, 3, 4, 5, 6));
    ck_assert_float_ne(base, tr_rng_uniform(1, 9, 3, 4, 5, 6));
    ck_assert_float_ne(base, tr_rng_uniform(1, 2, 9, 4, 5, 6));
    ck_assert_float_ne(base, tr_rng_uniform(1, 2, 3, 9, 5, 6));
    ck_assert_float_ne(base, tr_rng_uniform(1, 2, 3, 4, 9, 6));
    ck_assert_float_ne(base, tr_rng_uniform(1, 2, 3, 4, 5, 9));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, symbolic_sizes);
    tcase_add_test(tc, bf16_rounds_to_nearest_even);
    tcase_add_test(tc, f16_matches_ieee);
    tcase_add_test(tc, f16_arrays_match_scalar);
    tcase_add_test(tc, philox_known_answers);
    tcase_add_test(tc, dropout_uniforms);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
