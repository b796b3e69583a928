/* The counter-based random generator (Philox 4×32-10, Salmon et al., SC'11): a random number
 * is a pure function of a counter and a key, so a dropout mask depends only on what it masks
 * (seed, step, sample, position, feature, stream), never on the micro-batch it ran in, the
 * thread that drew it, or whether it is a recompute — and the CUDA kernels draw the same. */
#ifndef TR_RNG_H
#define TR_RNG_H

#include <stdint.h>

struct tr_philox { uint32_t v[4]; };

/* Four 32-bit random words for counter c[0..3] under key k[0..1]. */
struct tr_philox tr_philox4x32(const uint32_t c[4], const uint32_t k[2]);

/* A uniform float in [0, 1) for one element of a dropout mask. */
float tr_rng_uniform(uint64_t seed, uint64_t step, uint64_t sample, uint32_t position,
                     uint32_t feature, uint32_t stream);

#endif
