/* Branch-free f32 math for the CPU's elementwise loops: glibc's expf and erff are calls the
 * compiler cannot vectorise (GELU and its backward were 15% of bert-small's step, one libm call
 * per element), these are plain arithmetic it can. Each keeps its relative error near 1e-7
 * across the range, the tails included (where x·Φ(x) is small, an absolute-error erf would
 * lose every digit). The f64 kernels keep libm (instantiate.h): they exist for the gradient
 * tests, which want the last digit.
 *
 * TR_CPU_SIMD marks a function built once per ISA level — baseline x86-64 (SSE2), AVX2 + FMA
 * (x86-64-v3) and AVX-512 (x86-64-v4) — and picked at load time for the CPU it runs on. The
 * builds give the same bits: configure's -ffp-contract=off keeps a·b + c two roundings in all
 * three, and the lanes of every sum are fixed in the code, not by the vector width.
 * Only leaf functions carry it: GCC clones after OpenMP has outlined its regions, so a
 * parallel region calls a clone, never contains one. */
#ifndef TR_CPU_VMATH_H
#define TR_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && \
    !defined(__SANITIZE_ADDRESS__)
#define TR_CPU_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TR_CPU_SIMD
#endif

/* e^x: x = n·ln2 + r, |r| ≤ ln2/2, e^r by Cephes's degree-6 polynomial, 2^n into the exponent
 * bits. n is rounded by adding 1.5·2^23 (round to nearest in the default mode, no rint call).
 * Below −87.3 the result is 0 (exp(−∞) = 0, as the masks need); above 88.7 it saturates at
 * e^88.7 ≈ 3.3e38 rather than overflow, which is what the sigmoid below wants. */
static inline float tr_vexpf(float x)
{
    const float big = 12582912.0f;   /* 1.5·2^23 */
    float xc = x > 88.7f ? 88.7f : x < -87.3f ? -87.3f : x;
    float n = (xc * 1.44269504088896341f + big) - big;
    float r = xc - n * 0.693359375f;         /* ln2 in two parts (Cody–Waite) */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.3f ? 0.0f : p * scale;
}

/* erfc(z) for z ≥ 0 with relative error below 1.2e-7 everywhere (the Chebyshev fit of
 * Numerical Recipes' erfcc): t·exp(−z² + P(t)), t = 1/(1 + z/2). */
static inline float tr_verfcf(float z)
{
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * tr_vexpf(-z * z + p);
}

/* Φ(x)·2 = 1 + erf(x/√2), from erfc of |x|/√2 on the side where nothing cancels. */
static inline float tr_vtwo_phif(float x)
{
    float c = tr_verfcf((x < 0 ? -x : x) * 0.70710678118654752f);
    return x < 0 ? c : 2.0f - c;
}

/* 1/(1 + e^−x): never 1 − something small, so accurate in both tails. */
static inline float tr_vsigmoidf(float x) { return 1.0f / (1.0f + tr_vexpf(-x)); }

#endif
