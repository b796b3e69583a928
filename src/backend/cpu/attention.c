/* ATTENTION and ATTENTION_BWD on the CPU: softmax(q·kᵀ·scale)·v per (batch, head), written once
 * in attention.inc for f32 and f64, in the flash-attention scheme (Dao et al., 2022): query
 * tiles × key tiles, each tile's scores one GEMM, an online softmax (a running max and sum per
 * row) forward and the log-sum-exp saved; the backward computes each tile's probabilities again
 * from it. Nothing of size S × S is ever held: a thread's scratch is a tile of scores (two,
 * backward) and a tile of output, in the node's workspace.
 *
 * The same bits on any thread count: tiles have fixed sizes (ATTN_TILE_Q, ATTN_TILE_K, capped
 * by S), and each unit of work — a query tile of one (b, h) forward, a whole (b, h) backward,
 * whose dk and dv sum over its query tiles in order — is done by one thread with
 * single-threaded BLAS calls (OpenBLAS runs single-threaded inside an active parallel region;
 * matmul.c says why it must be active), so a unit is the same calls whichever thread runs it.
 *
 * The workspace holds one copy of the scratch per thread the plan expects (the threads OpenMP
 * offers when the plan is made, at most one per unit), as conv.c's im2col does: a run on more
 * threads than that uses as many as there are copies, one on fewer leaves copies unused. */
#include "core/blas.h"
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vmath.h"

/* 64 query rows × 256 keys: against 64 × 128 on BERT-base's shape (B 2, H 12, S 512, D 64, one
 * thread, AMD EPYC Zen 3), 8% faster forward and backward, and no slower causal; 128 × 128 was
 * 19% faster forward but 6–10% slower causal, its diagonal tiles wasting more (bench/README.md
 * has the table). At S ≤ 256 it is one key tile, as any larger one would be. */
#define ATTN_TILE_Q 64
#define ATTN_TILE_K 256
/* Each thread's scratch starts on a cache line of its own. */
#define ATTN_ALIGN 64

struct attn_shape {
    int64_t B, H, S, D;
};

/* One thread's scratch, in values: forward, the tile's scores (then probabilities) [tq, tk],
 * its output sums [tq, D] and each row's running max and sum; backward, probabilities and
 * their gradients [tq, tk] each, and do_i·o_i per row. `bytes`: one copy, a whole number of
 * cache lines. */
struct attn_layout {
    int64_t tq, tk;     /* tile sizes for this S */
    int64_t units;      /* forward: B·H·(query tiles); backward: B·H */
    size_t bytes;
};

/* One tile: query rows [q0, q0 + m) against keys [k0, k0 + n). */
struct attn_tile {
    int64_t q0, m, k0, n;
};

static struct attn_shape attn_shape_of(const struct tr_tensor *q)
{
    return (struct attn_shape){q->dim[0], q->dim[1], q->dim[2], q->dim[3]};
}

static struct attn_layout attn_layout_of(struct attn_shape sh, enum tr_op op, size_t value)
{
    struct attn_layout l = {sh.S < ATTN_TILE_Q ? sh.S : ATTN_TILE_Q, sh.S < ATTN_TILE_K ? sh.S : ATTN_TILE_K, 0, 0};
    int64_t values;
    if (op == TR_OP_ATTENTION) {
        l.units = l.tq ? sh.B * sh.H * ((sh.S + l.tq - 1) / l.tq) : 0;
        values = l.tq * l.tk + l.tq * sh.D + 2 * l.tq;
    } else {
        l.units = sh.S ? sh.B * sh.H : 0;
        values = 2 * l.tq * l.tk + l.tq;
    }
    l.bytes = ((size_t)values * value + ATTN_ALIGN - 1) / ATTN_ALIGN * ATTN_ALIGN;
    return l;
}

/* Threads that may take units at once: one per unit at most. */
static int64_t attn_threads(const struct attn_layout *l)
{
    int64_t threads = omp_get_max_threads();
    return l->units < threads ? (l->units > 0 ? l->units : 1) : threads;
}

/* The team a kernel starts for `threads` workers: two at least where OpenMP may use two, so the
 * region is active and OpenBLAS stays on one thread (matmul.c); the extra one idles. */
static int attn_team(int64_t threads)
{
    return threads < 2 && omp_get_max_threads() > 1 ? 2 : (int)threads;
}

/* The workspace for as many copies of the scratch as threads will run the op (q is the
 * forward's first input, the backward's second). */
size_t tr_cpu_attention_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                  const struct tr_tensor *out)
{
    (void)out;
    const struct tr_tensor *q = &in[node->op == TR_OP_ATTENTION ? 0 : 1];
    struct attn_layout l = attn_layout_of(attn_shape_of(q), node->op, tr_dtype_size(q->dtype));
    return l.units ? l.bytes * (size_t)attn_threads(&l) : 0;
}

/* The shape and layout of the call; the number of threads to run (as many as the workspace
 * holds copies of the scratch, up to attn_threads), or 0 when it holds none (an error). */
static int64_t attn_plan_threads(const struct tr_kernel_args *a, const struct tr_tensor *q, struct attn_shape *sh,
                                 struct attn_layout *l)
{
    *sh = attn_shape_of(q);
    *l = attn_layout_of(*sh, a->node->op, tr_dtype_size(q->dtype));
    if (!l->units)
        return 1;
    size_t have = a->workspace ? a->workspace_bytes : 0;
    if (have < l->bytes) {
        tr_cpu_fail(a, "%s: the workspace holds %zu bytes but one thread's scratch needs %zu",
                    tr_op_name(a->node->op), have, l->bytes);
        return 0;
    }
    int64_t threads = attn_threads(l), fit = (int64_t)(have / l->bytes);
    return fit < threads ? fit : threads;
}

/* x[c] = exp(x[c] − shift), c < n, through vmath.h's vectorised exp (glibc's expf is a call
 * per element: a fifth of forward + backward at S 512); hidden keys, −∞, give exactly 0. */
static TR_CPU_SIMD void attn_exp_shift_f32(float *x, int64_t n, float shift)
{
#pragma omp simd
    for (int64_t c = 0; c < n; c++)
        x[c] = tr_vexpf(x[c] - shift);
}

/* The f64 build (the gradient tests') keeps libm's exp: its checks want every digit. */
static void attn_exp_shift_f64(double *x, int64_t n, double shift)
{
    for (int64_t c = 0; c < n; c++)
        x[c] = exp(x[c] - shift);
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
