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

/* keep[j] = uniform4(seed, step, sample, position, group, stream)[j] ≥ p for the features
 * 4·group + j: one Philox call draws four features (rng.h). */
static inline void dropout_keeps4(const struct dropout_key *k, int64_t row, int64_t position, int64_t group,
                                  bool keep[4])
{
    uint64_t sample = k->sample_ids ? (uint64_t)k->sample_ids[row] : (uint64_t)row;
    float u[4];
    tr_rng_uniform4(k->seed, k->step, sample, (uint32_t)position, (uint32_t)group, k->stream, u);
    for (int j = 0; j < 4; j++)
        keep[j] = u[j] >= k->p;
}

#define TR_KERNEL_BODY "backend/cpu/dropout.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_dropout(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, dropout); }
