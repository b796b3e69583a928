/* DROPOUT on the CPU, forward and backward (the backward is this kernel applied to dy with the
 * same attributes and rng context): the mask is a Philox draw keyed by what it masks (rng.h,
 * ENGINE.md "Randomness"), so the micro-batch a sample lands in never changes it. */
#include <stdbool.h>

#include "backend/cpu/cpu.h"
#include "core/rng.h"

/* Everything one node's mask is a function of, besides the element's coordinates. */
struct dropout_key {
    uint64_t seed, step;
    const int64_t *sample_ids;   /* NULL: the row number is the sample id */
    uint32_t stream;
    float p;
};

/* x seen as [rows, positions, features]: rows = dim 0, positions = dim 1 when rank ≥ 3 (else 1),
 * features = everything after (backend.h's key layout). */
struct dropout_layout {
    int64_t rows, positions, features;
};

static struct dropout_key dropout_key_of(const struct tr_kernel_args *a)
{
    const struct tr_rng_ctx none = {0, 0, NULL}, *rng = a->rng ? a->rng : &none;
    return (struct dropout_key){rng->seed, rng->step, rng->sample_ids, a->node->attrs.dropout.stream,
                                a->node->attrs.dropout.p};
}

/* Only called with at least one element, so the divisions are by non-zero sizes. */
static struct dropout_layout dropout_layout_of(const struct tr_tensor *x)
{
    struct dropout_layout l = {x->rank ? x->dim[0] : 1, x->rank >= 3 ? x->dim[1] : 1, 1};
    l.features = tr_tensor_numel(x) / (l.rows * l.positions);
    return l;
}

/* Philox for DROPOUT_LANES consecutive groups at once: the same ten rounds as rng.h's
 * tr_philox4x32, written across lanes so that the compiler runs the lanes in vector registers
 * (vpmuludq takes four 32 × 32 → 64-bit products at a time); one call per group cost as much
 * as the rest of the step's elementwise work. words[w][l] is word w of the call whose counter
 * holds group g0 + l; check_kernels compares it with tr_rng_uniform4 bit for bit. */
#define DROPOUT_LANES 16

struct dropout_lanes {
    uint32_t words[4][DROPOUT_LANES];
};

static inline void dropout_philox_lanes(const struct dropout_key *k, uint64_t sample, uint32_t position,
                                        uint32_t g0, struct dropout_lanes *out)
{
    uint32_t x0[DROPOUT_LANES], x1[DROPOUT_LANES], x2[DROPOUT_LANES], x3[DROPOUT_LANES];
    uint32_t c3 = (uint32_t)(sample >> 32) ^ ((uint32_t)k->step << 16) ^ (uint32_t)(k->step >> 16);
    uint32_t k0 = (uint32_t)k->seed ^ k->stream * 0x85EBCA6Bu, k1 = (uint32_t)(k->seed >> 32) ^ (uint32_t)k->step;
    for (int l = 0; l < DROPOUT_LANES; l++)
        x0[l] = g0 + (uint32_t)l, x1[l] = position, x2[l] = (uint32_t)sample, x3[l] = c3;
    for (int round = 0; round < 10; round++) {
        for (int l = 0; l < DROPOUT_LANES; l++) {
            uint64_t p0 = (uint64_t)TR_PHILOX_M0 * x0[l], p1 = (uint64_t)TR_PHILOX_M1 * x2[l];
            uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1[l] ^ k0, y1 = (uint32_t)p1;
            uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3[l] ^ k1, y3 = (uint32_t)p0;
            x0[l] = y0, x1[l] = y1, x2[l] = y2, x3[l] = y3;
        }
        k0 += TR_PHILOX_W0, k1 += TR_PHILOX_W1;
    }
    for (int l = 0; l < DROPOUT_LANES; l++)
        out->words[0][l] = x0[l], out->words[1][l] = x1[l], out->words[2][l] = x2[l], out->words[3][l] = x3[l];
}

/* keep: the word's uniform (its top 24 bits, as rng.h makes it) ≥ p. */
static inline bool dropout_keeps_word(uint32_t word, float p)
{
    return (float)(word >> 8) * (1.0f / 16777216.0f) >= p;
}

#define TR_KERNEL_BODY "backend/cpu/dropout.inc"
#define TR_KERNEL_BF16   /* bf16 as stored too: widen.c hands it an all-bf16 node */
#include "backend/cpu/instantiate.h"

int tr_cpu_dropout(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE16(a, dropout); }
