/* The counter-based random generator (Philox 4×32-10, Salmon et al., SC'11): a random number
 * is a pure function of a counter and a key, so a dropout mask depends only on what it masks
 * (seed, step, sample, position, feature, stream), never on the micro-batch it ran in, the
 * thread that drew it, or whether it is a recompute — and the CUDA kernels draw the same.
 * Header-only: both are inline, and nvcc compiles them for the device too (TR_RNG_FN), so the
 * CUDA backend's dropout draws with this very code. */
#ifndef TR_RNG_H
#define TR_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define TR_RNG_FN __host__ __device__ static inline
#else
#define TR_RNG_FN static inline
#endif

struct tr_philox { uint32_t v[4]; };

#define TR_PHILOX_M0 0xD2511F53u
#define TR_PHILOX_M1 0xCD9E8D57u
#define TR_PHILOX_W0 0x9E3779B9u
#define TR_PHILOX_W1 0xBB67AE85u

/* Four 32-bit random words for counter c[0..3] under key k[0..1]. Inline: dropout draws one per
 * element, and a call per element cost more than the ten rounds. */
TR_RNG_FN struct tr_philox tr_philox4x32(const uint32_t c[4], const uint32_t k[2])
{
    uint32_t x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3], k0 = k[0], k1 = k[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)TR_PHILOX_M0 * x0, p1 = (uint64_t)TR_PHILOX_M1 * x2;
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, y1 = (uint32_t)p1;
        uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1, y3 = (uint32_t)p0;
        x0 = y0, x1 = y1, x2 = y2, x3 = y3;
        k0 += TR_PHILOX_W0, k1 += TR_PHILOX_W1;
    }
    struct tr_philox r = {{x0, x1, x2, x3}};   /* no compound literal: C++ (nvcc) reads this too */
    return r;
}

/* A uniform float in [0, 1) for one element of a dropout mask. Counter (feature, position,
 * sample low, sample high ^ step·2^16), key (seed ^ stream·c, seed high ^ step): every field of
 * the key reaches the output, and neighbouring elements differ in the counter. */
TR_RNG_FN float tr_rng_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint32_t position,
                               uint32_t feature, uint32_t stream)
{
    uint32_t c[4] = {feature, position, (uint32_t)sample,
                     (uint32_t)(sample >> 32) ^ ((uint32_t)step << 16) ^ (uint32_t)(step >> 16)};
    uint32_t k[2] = {(uint32_t)seed ^ stream * 0x85EBCA6Bu, (uint32_t)(seed >> 32) ^ (uint32_t)step};
    struct tr_philox r = tr_philox4x32(c, k);
    return (float)(r.v[0] >> 8) * (1.0f / 16777216.0f);   /* 24 bits: exact in a float */
}

/* The uniforms of features 4g … 4g + 3 from one Philox call (its four words), for dropout:
 * feature f's number is word f mod 4 of the call whose counter holds g = f / 4 where
 * tr_rng_uniform holds the feature. */
TR_RNG_FN void tr_rng_uniform4(uint64_t seed, uint64_t step, uint64_t sample, uint32_t position,
                               uint32_t group, uint32_t stream, float out[4])
{
    uint32_t c[4] = {group, position, (uint32_t)sample,
                     (uint32_t)(sample >> 32) ^ ((uint32_t)step << 16) ^ (uint32_t)(step >> 16)};
    uint32_t k[2] = {(uint32_t)seed ^ stream * 0x85EBCA6Bu, (uint32_t)(seed >> 32) ^ (uint32_t)step};
    struct tr_philox r = tr_philox4x32(c, k);
    for (int w = 0; w < 4; w++)
        out[w] = (float)(r.v[w] >> 8) * (1.0f / 16777216.0f);
}

#endif
