/* Element types, symbolic sizes and 16-bit float conversions. */
#include "core/tensor.h"

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

size_t tr_dtype_size(enum tr_dtype t)
{
    static const size_t sizes[TR_NDTYPES] = {4, 2, 2, 4, 1, 8};
    return t < TR_NDTYPES ? sizes[t] : 0;
}

const char *tr_dtype_name(enum tr_dtype t)
{
    static const char *const names[TR_NDTYPES] = {"f32", "bf16", "f16", "i32", "u8", "f64"};
    return t < TR_NDTYPES ? names[t] : "?";
}

int64_t tr_dim_eval(struct tr_dim d, int64_t B, int64_t S)
{
    int64_t n = d.k;
    for (int i = 0; i < d.b; i++)
        n *= B;
    for (int i = 0; i < d.s; i++)
        n *= S;
    return d.div > 1 ? n / d.div : n;
}

bool tr_dim_equal(struct tr_dim a, struct tr_dim b)
{
    return a.k == b.k && a.b == b.b && a.s == b.s && (a.div > 1 ? a.div : 1) == (b.div > 1 ? b.div : 1);
}

struct tr_dim tr_dim_mul(struct tr_dim a, struct tr_dim b)
{
    int div = (a.div > 1 ? a.div : 1) * (b.div > 1 ? b.div : 1);
    return (struct tr_dim){a.k * b.k, (uint8_t)(a.b + b.b), (uint8_t)(a.s + b.s), (uint8_t)(div > 1 ? div : 0)};
}

struct tr_shape tr_shape_make(int rank, const struct tr_dim *dims)
{
    struct tr_shape s = {.rank = rank};
    for (int i = 0; i < rank; i++)
        s.dim[i] = dims[i];
    return s;
}

struct tr_dim tr_shape_numel(const struct tr_shape *s)
{
    struct tr_dim n = tr_dim_const(1);
    for (int i = 0; i < s->rank; i++)
        n = tr_dim_mul(n, s->dim[i]);
    return n;
}

bool tr_shape_equal(const struct tr_shape *a, const struct tr_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (!tr_dim_equal(a->dim[i], b->dim[i]))
            return false;
    return true;
}

static int format_dim(struct tr_dim d, char *out, size_t n)
{
    char buf[48];
    int len = 0;
    if (d.k != 1 || (!d.b && !d.s))
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%lld", (long long)d.k);
    for (int i = 0; i < d.b; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%sB", len ? "·" : "");
    for (int i = 0; i < d.s; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%sS", len ? "·" : "");
    if (d.div > 1)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "/%d", d.div);
    return snprintf(out, n, "%s", buf);
}

void tr_shape_format(const struct tr_shape *s, char *out, size_t n)
{
    size_t len = (size_t)snprintf(out, n, "[");
    for (int i = 0; i < s->rank && len < n; i++) {
        if (i)
            len += (size_t)snprintf(out + len, n - len, ", ");
        if (len < n)
            len += (size_t)format_dim(s->dim[i], out + len, n - len);
    }
    if (len < n)
        snprintf(out + len, n - len, "]");
}

int64_t tr_tensor_numel(const struct tr_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dim[i];
    return n;
}

size_t tr_tensor_bytes(const struct tr_tensor *t)
{
    return (size_t)tr_tensor_numel(t) * tr_dtype_size(t->dtype);
}

/* IEEE binary16 by bit manipulation, so results do not depend on the CPU having F16C;
 * the CPU backend uses F16C where it has it and the tests compare the two. */
uint16_t tr_f32_to_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);                    /* NaN */
    if (a >= 0x477ff000u)                                      /* rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {                                     /* subnormal or zero */
        float f;
        memcpy(&f, &a, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(f * 16777216.0f));   /* 2^24 ulps */
    }
    uint32_t mant = a & 0x7fffffu, exp = (a >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float tr_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    float x;
    if (exp == 0) {
        x = ldexpf((float)mant, -24);
        uint32_t u;
        memcpy(&u, &x, 4);
        u |= sign;
        memcpy(&x, &u, 4);
        return x;
    }
    uint32_t u = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                           : (sign | ((exp + 112) << 23) | (mant << 13));
    memcpy(&x, &u, 4);
    return x;
}

/* F16C converts 8 at a time with the same round-to-nearest-even and subnormal handling as the
 * scalar code above; tests/check_tensor.c compares the two over every half and many floats. */
__attribute__((target("f16c,avx"))) static void widen_f16c(const uint16_t *in, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    for (; i < n; i++)
        out[i] = tr_f16_to_f32(in[i]);
}

__attribute__((target("f16c,avx"))) static void narrow_f16c(const float *in, uint16_t *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++)
        out[i] = tr_f32_to_f16(in[i]);
}

/* A property of the machine, read from the CPU model libgcc fills at start-up: a load, no state.
 * clang before 16 knows no "f16c" there (the fuzz harnesses are built with clang 14), so it asks
 * CPUID, and XGETBV for the OS saving the AVX registers, as libgcc does. */
static int has_f16c(void)
{
#if defined(__clang__) && __clang_major__ < 16
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C) || !(c & bit_AVX) || !(c & bit_OSXSAVE))
        return 0;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
#else
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#endif
}

void tr_f16_widen(const uint16_t *in, float *out, int64_t n)
{
    if (has_f16c()) {
        widen_f16c(in, out, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = tr_f16_to_f32(in[i]);
}

void tr_f16_narrow(const float *in, uint16_t *out, int64_t n)
{
    if (has_f16c()) {
        narrow_f16c(in, out, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = tr_f32_to_f16(in[i]);
}
