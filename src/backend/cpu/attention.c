/* ATTENTION and ATTENTION_BWD on the CPU: softmax(q·kᵀ·scale)·v per (batch, head), written once
 * in attention.inc for f32 and f64. One query row at a time, so the scores never need more
 * than a row of S numbers on the stack and the kernel needs no workspace; the backward
 * recomputes the probabilities from q, k and the saved lse (flash-attention style). */
#include "core/blas.h"
#include <math.h>

#include "backend/cpu/cpu.h"

/* The longest sequence the kernels take: a row of scores (the backward: two) sits on each
 * OpenMP thread's stack — 32 KiB a row in f64, well inside libgomp's 2 MiB or more. */
#define ATTN_MAX_S 4096

struct attn_shape {
    int64_t B, H, S, D;
};

static int attn_shape_of(const struct tr_kernel_args *a, const struct tr_tensor *q, struct attn_shape *sh)
{
    *sh = (struct attn_shape){q->dim[0], q->dim[1], q->dim[2], q->dim[3]};
    if (sh->S > ATTN_MAX_S)
        return tr_cpu_fail(a, "%s: sequence length %lld is over the CPU kernel's limit of %d "
                              "(it keeps one row of scores on the stack)",
                           tr_op_name(a->node->op), (long long)sh->S, ATTN_MAX_S);
    return 0;
}

/* The key padding mask is the input after q, k, v (forward) or after lse (backward), when present. */
static const uint8_t *attn_mask(const struct tr_kernel_args *a, int index)
{
    return a->nin > index ? a->in[index].data : NULL;
}

#define TR_KERNEL_BODY "backend/cpu/attention.inc"
#include "backend/cpu/instantiate.h"

int tr_cpu_attention(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, attention); }
int tr_cpu_attention_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, attention_bwd); }
