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

/* ---- bf16 as stored: the tiles' products on oneDNN's bf16 GEMMs ------------------------------ */

/* Where the CPU computes bf16 (onednn.h), ATTENTION and its backward on bf16 q, k, v (amp's
 * nodes) skip the widened f32 copies: each tile's products are oneDNN bf16 GEMMs with f32
 * accumulation, one single-threaded primitive a tile shape, made at prepare; the scores, the
 * online softmax and lse stay f32; the probabilities (and ds) are rounded to bf16 before their
 * products, as PyTorch's autocast rounds softmax's output before its bmm; o, dq, dk and dv are
 * summed in f32 and rounded once. Tiles are those of the f32 kernel, their rows and keys rounded
 * up to ATTN16_GRAIN (a tile reaching past a head's last row reads a zeroed copy of its rows), so
 * that a bounded set of shapes — every one up to the bucket's S where S varies — serves every
 * sequence length with no primitive made in a step. A node whose shapes prepare did not see
 * takes the widened path (nothing written first). The same bits on any thread count: a unit is
 * the same single-threaded calls whichever thread runs it. */
#define ATTN16_GRAIN 16
#define ATTN16_MP (ATTN_TILE_Q / ATTN16_GRAIN)
#define ATTN16_NP (ATTN_TILE_K / ATTN16_GRAIN)

/* The three GEMM shapes of a tile of mp rows × np keys: scores = q·kᵀ (and dp = do·vᵀ);
 * probabilities·v (and dq += ds·k); dv += pᵀ·do (and dk += dsᵀ·q). */
enum attn16_kind { ATTN16_SCORES, ATTN16_PROBS_V, ATTN16_GRAD_KV, ATTN16_KINDS };

static int64_t attn16_up(int64_t x) { return (x + ATTN16_GRAIN - 1) / ATTN16_GRAIN * ATTN16_GRAIN; }

static struct tr_onednn_gemm attn16_gemm(enum attn16_kind kind, int64_t mp, int64_t np, int64_t D)
{
    struct tr_onednn_gemm g = {.at = TR_BF16, .bt = TR_BF16, .yt = TR_F32};
    if (kind == ATTN16_SCORES)
        g.tb = 1, g.M = mp, g.N = np, g.K = D;
    else if (kind == ATTN16_PROBS_V)
        g.acc = 1, g.M = mp, g.N = D, g.K = np;
    else
        g.ta = 1, g.acc = 1, g.M = np, g.N = D, g.K = mp;
    g.tm = g.M, g.tn = g.N;
    return g;
}

/* The node on bf16 as stored: its shape, and whether it is the backward. */
struct attn16 {
    struct attn_shape sh;
    bool bwd, causal, accumulate;
    int64_t tq, tk, TQ, TK, SP;   /* tiles, tiles rounded up, S rounded up */
    const uint8_t *mask;
};

static bool attn16_of(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                      struct attn16 *at)
{
    if ((node->op != TR_OP_ATTENTION && node->op != TR_OP_ATTENTION_BWD) || !tr_onednn_computes_bf16())
        return false;
    bool bwd = node->op == TR_OP_ATTENTION_BWD;
    int nin = bwd ? 6 : 3;   /* the mask after them */
    for (int i = 0; i < nin; i++)
        if (in[i].dtype != (bwd && i == 5 ? TR_F32 : TR_BF16))
            return false;
    for (int i = 0; i < (bwd ? 3 : 2); i++)
        if (out[i].dtype != (!bwd && i == 1 ? TR_F32 : TR_BF16))
            return false;
    struct attn_shape sh = attn_shape_of(&in[bwd ? 1 : 0]);
    if (sh.B * sh.H <= 0 || sh.S <= 0 || sh.D <= 0)
        return false;
    *at = (struct attn16){.sh = sh, .bwd = bwd, .causal = node->attrs.attention.causal,
                          .accumulate = node->accumulate};
    at->tq = sh.S < ATTN_TILE_Q ? sh.S : ATTN_TILE_Q, at->tk = sh.S < ATTN_TILE_K ? sh.S : ATTN_TILE_K;
    at->TQ = attn16_up(at->tq), at->TK = attn16_up(at->tk), at->SP = attn16_up(sh.S);
    return true;
}

/* The tile shapes (rounded) that a head of S rows walks, marked in need[mp][np]. */
static void attn16_mark(bool need[ATTN16_MP][ATTN16_NP], int64_t S, bool causal)
{
    int64_t tq = S < ATTN_TILE_Q ? S : ATTN_TILE_Q, tk = S < ATTN_TILE_K ? S : ATTN_TILE_K;
    for (int64_t q0 = 0; q0 < S; q0 += tq) {
        int64_t m = S - q0 < tq ? S - q0 : tq, end = causal ? q0 + m : S;
        for (int64_t k0 = 0; k0 < end; k0 += tk) {
            int64_t n = end - k0 < tk ? end - k0 : tk;
            need[attn16_up(m) / ATTN16_GRAIN - 1][attn16_up(n) / ATTN16_GRAIN - 1] = true;
        }
    }
}

/* One thread's scratch, carved from base in order (base NULL: only counted). Forward: the
 * scores s [TQ, TK] (f32), the probabilities p16 [TQ, TK] (bf16), the output sums acc [TQ, D],
 * each row's running max and sum; backward: s holds the probabilities, dp [TQ, TK] then ds,
 * p16 and ds16, acc the query tile's dq, max its rows' do·o, and dk, dv [SP, D] the head's
 * sums. Then zeroed copies of rows for tiles reaching past S, and oneDNN's scratchpad. */
struct attn16_scratch {
    float *s, *dp, *acc, *max, *sum, *dk, *dv;
    uint16_t *p16, *ds16, *qpack, *dopack, *kpack, *vpack;
    void *onednn;
};

static void *attn16_take(char *base, size_t *at, size_t bytes)
{
    void *p = base ? base + *at : NULL;
    *at += (bytes + ATTN_ALIGN - 1) / ATTN_ALIGN * ATTN_ALIGN;
    return p;
}

/* The largest scratchpad of the node's primitives: those of its largest tiles (prepare keeps a
 * node off oneDNN whose smaller tiles would need more). */
static size_t attn16_onednn_scratch(const struct attn16 *at)
{
    size_t most = 0;
    for (int k = 0; k < ATTN16_KINDS; k++) {
        struct tr_onednn_gemm g = attn16_gemm(k, at->TQ, at->TK, at->sh.D);
        size_t b = tr_onednn_gemm_scratch(&g);
        most = b > most ? b : most;
    }
    return most;
}

static size_t attn16_carve(const struct attn16 *at, size_t onednn, char *base, struct attn16_scratch *sc)
{
    size_t off = 0, f = sizeof(float), h = sizeof(uint16_t);
    int64_t D = at->sh.D, tile = at->TQ * at->TK;
    *sc = (struct attn16_scratch){0};
    sc->s = attn16_take(base, &off, (size_t)tile * f);
    sc->p16 = attn16_take(base, &off, (size_t)tile * h);
    sc->acc = attn16_take(base, &off, (size_t)(at->TQ * D) * f);
    sc->max = attn16_take(base, &off, (size_t)at->TQ * f);
    sc->sum = attn16_take(base, &off, (size_t)at->TQ * f);
    sc->qpack = attn16_take(base, &off, (size_t)(at->TQ * D) * h);
    sc->kpack = attn16_take(base, &off, (size_t)(at->TK * D) * h);
    sc->vpack = attn16_take(base, &off, (size_t)(at->TK * D) * h);
    if (at->bwd) {
        sc->dp = attn16_take(base, &off, (size_t)tile * f);
        sc->ds16 = attn16_take(base, &off, (size_t)tile * h);
        sc->dopack = attn16_take(base, &off, (size_t)(at->TQ * D) * h);
        sc->dk = attn16_take(base, &off, (size_t)(at->SP * D) * f);
        sc->dv = attn16_take(base, &off, (size_t)(at->SP * D) * f);
    }
    sc->onednn = attn16_take(base, &off, onednn);
    return off;
}

static int64_t attn16_units(const struct attn16 *at)
{
    int64_t heads = at->sh.B * at->sh.H;
    return at->bwd ? heads : heads * ((at->sh.S + at->tq - 1) / at->tq);
}

/* Threads for the node's units: one per unit at most, as many as the workspace holds copies
 * of the scratch, and no more than oneDNN's streams. */
static int64_t attn16_threads(const struct tr_onednn *o, const struct attn16 *at, size_t per_thread, size_t have)
{
    int64_t threads = omp_get_max_threads(), units = attn16_units(at), fit = (int64_t)(have / per_thread);
    threads = units < threads ? units : threads;
    threads = fit < threads ? fit : threads;
    return o && tr_onednn_streams(o) < threads ? tr_onednn_streams(o) : threads;
}

size_t tr_cpu_attention_onednn_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                         const struct tr_tensor *out)
{
    struct attn16 at;
    struct attn16_scratch sc;
    if (!attn16_of(node, in, out, &at))
        return 0;
    size_t onednn = attn16_onednn_scratch(&at);
    int64_t units = attn16_units(&at), threads = omp_get_max_threads();
    return attn16_carve(&at, onednn, NULL, &sc) * (size_t)(units < threads ? units : threads);
}

int tr_cpu_attention_onednn_prepare(struct tr_onednn *o, const struct tr_graph *g, const struct tr_node *node,
                                    const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct attn16 at;
    if (!o || !attn16_of(node, in, out, &at))
        return 0;
    bool need[ATTN16_MP][ATTN16_NP] = {{false}};
    int q = node->op == TR_OP_ATTENTION ? 0 : 1;
    const struct tr_dim *seq = g ? &g->values[node->in[q]].shape.dim[2] : NULL;
    bool varies = seq && (seq->b || seq->s);   /* S varies with the micro-batch: every length up to it */
    for (int64_t S = varies ? 1 : at.sh.S; S <= at.sh.S; S++)
        attn16_mark(need, S, at.causal);
    for (int i = 0; i < ATTN16_MP; i++)
        for (int j = 0; j < ATTN16_NP; j++)
            for (int k = 0; need[i][j] && k < ATTN16_KINDS; k++) {
                if (k == ATTN16_GRAD_KV && !at.bwd)
                    continue;
                struct tr_onednn_gemm s = attn16_gemm(k, (i + 1) * ATTN16_GRAIN, (j + 1) * ATTN16_GRAIN, at.sh.D);
                if (tr_onednn_gemm_prepare(o, &s))
                    return 0;   /* oneDNN cannot: the widened path, as before */
            }
    return 0;
}

/* The primitives of the tile shapes a call walks (NULL where it walks none); false when one is
 * missing (prepare did not see these shapes) or needs more scratch than the workspace has. */
struct attn16_pieces {
    const struct tr_onednn_piece *p[ATTN16_KINDS][ATTN16_MP][ATTN16_NP];
};

static bool attn16_pieces_of(struct tr_onednn *o, const struct attn16 *at, size_t scratch, struct attn16_pieces *pc)
{
    bool need[ATTN16_MP][ATTN16_NP] = {{false}};
    attn16_mark(need, at->sh.S, at->causal);
    *pc = (struct attn16_pieces){0};
    for (int i = 0; i < ATTN16_MP; i++)
        for (int j = 0; j < ATTN16_NP; j++)
            for (int k = 0; need[i][j] && k < ATTN16_KINDS; k++) {
                if (k == ATTN16_GRAD_KV && !at->bwd)
                    continue;
                struct tr_onednn_gemm s = attn16_gemm(k, (i + 1) * ATTN16_GRAIN, (j + 1) * ATTN16_GRAIN, at->sh.D);
                pc->p[k][i][j] = tr_onednn_gemm_piece(o, &s);
                if (!pc->p[k][i][j] || tr_onednn_piece_scratch(pc->p[k][i][j]) > scratch)
                    return false;
            }
    return true;
}

/* One (b, h) as the bf16 kernels see it. */
struct attn16_head {
    const uint16_t *q, *k, *v, *dout, *o;
    const uint8_t *mask;
    int64_t S, D;
    float scale;
};

/* Rows [r0, r0 + np) of a head's [S, D] matrix x: x itself, or where they reach past S, a copy
 * of those up to S and zeros after (a finite 0 where the probabilities are 0). */
static const uint16_t *attn16_rows(const struct attn16_head *hd, const uint16_t *x, int64_t r0, int64_t np,
                                   uint16_t *pack)
{
    if (r0 + np <= hd->S)
        return x + r0 * hd->D;
    int64_t have = hd->S - r0;
    memcpy(pack, x + r0 * hd->D, (size_t)(have * hd->D) * sizeof *pack);
    memset(pack + have * hd->D, 0, (size_t)((np - have) * hd->D) * sizeof *pack);
    return pack;
}

/* The scores of rows [q0, q0 + m) × keys [k0, k0 + n) in s [mp, np], scaled, −∞ where a key is
 * hidden (causal, padding, or past the tile) and in the rounding rows. */
static void attn16_mask(const struct attn16 *at, const struct attn16_head *hd, struct attn_tile t, int64_t mp,
                        int64_t np, float *s)
{
    for (int64_t r = 0; r < mp; r++) {
        float *row = s + r * np;
        int64_t visible = r >= t.m ? 0 : at->causal ? t.q0 + r + 1 - t.k0 : t.n;
        visible = visible < 0 ? 0 : visible > t.n ? t.n : visible;
        for (int64_t c = 0; c < visible; c++)
            row[c] = hd->mask && !hd->mask[t.k0 + c] ? -INFINITY : row[c] * hd->scale;
        for (int64_t c = visible; c < np; c++)
            row[c] = -INFINITY;
    }
}

static bool attn16_all_padding(const struct attn16_head *hd, int64_t k0, int64_t n)
{
    for (int64_t j = 0; hd->mask && j < n; j++)
        if (hd->mask[k0 + j])
            return false;
    return hd->mask != NULL;
}

static int attn16_gemm_run(struct tr_onednn *o, const struct attn16_pieces *pc, enum attn16_kind k, int64_t mp,
                           int64_t np, const void *A, const void *B, void *C, const struct attn16_scratch *sc, int slot)
{
    return tr_onednn_piece_run(o, pc->p[k][mp / ATTN16_GRAIN - 1][np / ATTN16_GRAIN - 1], A, B, C, sc->onednn, slot);
}

/* Forward, query rows [q0, q0 + m): the f32 kernel's online softmax over tiles, p rounded to bf16
 * for p·v; o_i (+)= acc_i / L rounded once, lse_i = M + log L. */
static int attn16_fwd_tile(struct tr_onednn *o, const struct attn16 *at, const struct attn16_pieces *pc,
                           const struct attn16_head *hd, int64_t q0, uint16_t *out, float *lse,
                           const struct attn16_scratch *sc, int slot)
{
    int64_t D = hd->D, m = hd->S - q0 < at->tq ? hd->S - q0 : at->tq, mp = attn16_up(m);
    int64_t end = at->causal ? q0 + m : hd->S;
    const uint16_t *q = attn16_rows(hd, hd->q, q0, mp, sc->qpack);
    for (int64_t r = 0; r < m; r++)
        sc->max[r] = -INFINITY, sc->sum[r] = 0;
    memset(sc->acc, 0, (size_t)(mp * D) * sizeof(float));
    int failed = 0;
    for (int64_t k0 = 0; k0 < end && !failed; k0 += at->tk) {
        struct attn_tile t = {q0, m, k0, end - k0 < at->tk ? end - k0 : at->tk};
        int64_t np = attn16_up(t.n);
        if (attn16_all_padding(hd, k0, t.n))
            continue;
        const uint16_t *k = attn16_rows(hd, hd->k, k0, np, sc->kpack), *v = attn16_rows(hd, hd->v, k0, np, sc->vpack);
        failed |= attn16_gemm_run(o, pc, ATTN16_SCORES, mp, np, q, k, sc->s, sc, slot);
        attn16_mask(at, hd, t, mp, np, sc->s);
        for (int64_t r = 0; r < mp; r++) {
            float *row = sc->s + r * np, new_max = r < m ? attn_row_max_f32(row, np, sc->max[r]) : -INFINITY;
            if (new_max == -INFINITY) {
                memset(sc->p16 + r * np, 0, (size_t)np * sizeof(uint16_t));
                continue;
            }
            attn_exp_shift_f32(row, np, new_max);
            float tile_sum = attn_row_sum_f32(row, np);
            if (new_max != sc->max[r]) {
                float rescale = expf(sc->max[r] - new_max);
                for (int64_t d = 0; d < D; d++)
                    sc->acc[r * D + d] *= rescale;
                sc->sum[r] *= rescale;
            }
            sc->sum[r] += tile_sum, sc->max[r] = new_max;
            tr_cpu_narrow_run(row, sc->p16 + r * np, TR_BF16, np);
        }
        failed |= attn16_gemm_run(o, pc, ATTN16_PROBS_V, mp, np, sc->p16, v, sc->acc, sc, slot);
    }
    for (int64_t r = 0; r < m; r++) {
        uint16_t *o_i = out + (q0 + r) * D;
        float inv = sc->max[r] == -INFINITY ? 0 : 1 / sc->sum[r];
        for (int64_t d = 0; d < D; d++)
            o_i[d] = tr_f32_to_bf16((at->accumulate ? tr_bf16_to_f32(o_i[d]) : 0) + sc->acc[r * D + d] * inv);
        lse[q0 + r] = sc->max[r] == -INFINITY ? -INFINITY : sc->max[r] + logf(sc->sum[r]);
    }
    return failed;
}

static struct attn16_head attn16_head_at(const struct tr_kernel_args *a, const struct attn16 *at, int64_t bh)
{
    int q = at->bwd ? 1 : 0;
    int64_t off = bh * at->sh.S * at->sh.D;
    double scale = a->node->attrs.attention.scale;
    return (struct attn16_head){
        .q = (const uint16_t *)a->in[q].data + off, .k = (const uint16_t *)a->in[q + 1].data + off,
        .v = (const uint16_t *)a->in[q + 2].data + off,
        .dout = at->bwd ? (const uint16_t *)a->in[0].data + off : NULL,
        .o = at->bwd ? (const uint16_t *)a->in[4].data + off : NULL,
        .mask = at->mask ? at->mask + bh / at->sh.H * at->sh.S : NULL,
        .S = at->sh.S, .D = at->sh.D, .scale = scale ? (float)scale : 1 / sqrtf((float)at->sh.D),
    };
}

/* Backward, one tile: p = exp(s − lse_i) (f32), dp = do·vᵀ, ds = scale·p∘(dp − do_i·o_i); p and
 * ds rounded to bf16; dv += pᵀ·do, dq += ds·k, dk += dsᵀ·q, all in f32. */
static int attn16_bwd_tile(struct tr_onednn *o, const struct attn16 *at, const struct attn16_pieces *pc,
                           const struct attn16_head *hd, struct attn_tile t, const uint16_t *q, const uint16_t *dout,
                           const float *lse, const struct attn16_scratch *sc, int slot)
{
    int64_t mp = attn16_up(t.m), np = attn16_up(t.n), D = hd->D;
    const uint16_t *k = attn16_rows(hd, hd->k, t.k0, np, sc->kpack), *v = attn16_rows(hd, hd->v, t.k0, np, sc->vpack);
    int failed = attn16_gemm_run(o, pc, ATTN16_SCORES, mp, np, q, k, sc->s, sc, slot);
    failed |= attn16_gemm_run(o, pc, ATTN16_SCORES, mp, np, dout, v, sc->dp, sc, slot);
    attn16_mask(at, hd, t, mp, np, sc->s);
    for (int64_t r = 0; r < mp; r++) {
        float *p = sc->s + r * np, *dp = sc->dp + r * np, lse_i = r < t.m ? lse[t.q0 + r] : -INFINITY;
        if (lse_i != -INFINITY)
            attn_exp_shift_f32(p, np, lse_i);
        else
            memset(p, 0, (size_t)np * sizeof(float));
        for (int64_t c = 0; c < np; c++)
            dp[c] = hd->scale * p[c] * (dp[c] - sc->max[r]);
    }
    tr_cpu_narrow_run(sc->s, sc->p16, TR_BF16, mp * np);
    tr_cpu_narrow_run(sc->dp, sc->ds16, TR_BF16, mp * np);
    failed |= attn16_gemm_run(o, pc, ATTN16_GRAD_KV, mp, np, sc->p16, dout, sc->dv + t.k0 * D, sc, slot);
    failed |= attn16_gemm_run(o, pc, ATTN16_PROBS_V, mp, np, sc->ds16, k, sc->acc, sc, slot);
    failed |= attn16_gemm_run(o, pc, ATTN16_GRAD_KV, mp, np, sc->ds16, q, sc->dk + t.k0 * D, sc, slot);
    return failed;
}

/* y (+)= x rounded to bf16, n values. */
static void attn16_store(uint16_t *y, const float *x, int64_t n, bool accumulate)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = tr_f32_to_bf16((accumulate ? tr_bf16_to_f32(y[i]) : 0) + x[i]);
}

/* One (b, h), in one thread: query tiles in order, each over its key tiles in order. */
static int attn16_bwd_head(struct tr_onednn *o, const struct attn16 *at, const struct attn16_pieces *pc,
                           const struct attn16_head *hd, const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
                           const struct attn16_scratch *sc, int slot)
{
    int64_t D = hd->D;
    int failed = 0;
    memset(sc->dk, 0, (size_t)(at->SP * D) * sizeof(float));
    memset(sc->dv, 0, (size_t)(at->SP * D) * sizeof(float));
    for (int64_t q0 = 0; q0 < hd->S && !failed; q0 += at->tq) {
        int64_t m = hd->S - q0 < at->tq ? hd->S - q0 : at->tq, mp = attn16_up(m);
        int64_t end = at->causal ? q0 + m : hd->S;
        const uint16_t *q = attn16_rows(hd, hd->q, q0, mp, sc->qpack);
        const uint16_t *dout = attn16_rows(hd, hd->dout, q0, mp, sc->dopack);
        for (int64_t r = 0; r < mp; r++) {   /* do_i·o_i; 0 in the rounding rows */
            float dot = 0;
            for (int64_t d = 0; r < m && d < D; d++)
                dot += tr_bf16_to_f32(dout[r * D + d]) * tr_bf16_to_f32(hd->o[(q0 + r) * D + d]);
            sc->max[r] = dot;
        }
        memset(sc->acc, 0, (size_t)(mp * D) * sizeof(float));
        for (int64_t k0 = 0; k0 < end && !failed; k0 += at->tk) {
            struct attn_tile t = {q0, m, k0, end - k0 < at->tk ? end - k0 : at->tk};
            if (!attn16_all_padding(hd, k0, t.n))
                failed |= attn16_bwd_tile(o, at, pc, hd, t, q, dout, lse, sc, slot);
        }
        attn16_store(dq + q0 * D, sc->acc, m * D, at->accumulate);
    }
    attn16_store(dk, sc->dk, hd->S * D, at->accumulate);
    attn16_store(dv, sc->dv, hd->S * D, at->accumulate);
    return failed;
}

int tr_cpu_attention_onednn(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran)
{
    struct attn16 at;
    struct attn16_pieces pc;
    struct attn16_scratch probe;
    *ran = false;
    if (!o || !attn16_of(a->node, a->in, a->out, &at) || !a->workspace)
        return 0;
    size_t onednn = attn16_onednn_scratch(&at), per_thread = attn16_carve(&at, onednn, NULL, &probe);
    if (a->workspace_bytes < per_thread || !attn16_pieces_of(o, &at, onednn, &pc))
        return 0;
    *ran = true;
    at.mask = attn_mask(a, at.bwd ? 6 : 3);
    int64_t threads = attn16_threads(o, &at, per_thread, a->workspace_bytes), units = attn16_units(&at);
    int64_t heads = at.sh.B * at.sh.H, tiles = units / heads, next = 0, SD = at.sh.S * at.sh.D;
    int failed = 0;
#pragma omp parallel num_threads(attn_team(threads)) reduction(| : failed)
    {
        int tid = omp_get_thread_num();
        struct attn16_scratch sc;
        attn16_carve(&at, onednn, (char *)a->workspace + per_thread * (size_t)tid, &sc);
        while (tid < threads && !failed) {
            int64_t u;
#pragma omp atomic capture
            u = next++;
            if (u >= units)
                break;
            if (at.bwd) {
                struct attn16_head hd = attn16_head_at(a, &at, u);
                failed |= attn16_bwd_head(o, &at, &pc, &hd, (const float *)a->in[5].data + u * at.sh.S,
                                          (uint16_t *)a->out[0].data + u * SD, (uint16_t *)a->out[1].data + u * SD,
                                          (uint16_t *)a->out[2].data + u * SD, &sc, tid);
            } else {   /* the last query tiles of every head first: causal ones are the longest */
                int64_t bh = u % heads, qt = tiles - 1 - u / heads;
                struct attn16_head hd = attn16_head_at(a, &at, bh);
                failed |= attn16_fwd_tile(o, &at, &pc, &hd, qt * at.tq, (uint16_t *)a->out[0].data + bh * SD,
                                          (float *)a->out[1].data + bh * at.sh.S, &sc, tid);
            }
        }
    }
    return failed ? tr_cpu_fail(a, "%s: a oneDNN matmul failed", tr_op_name(a->node->op)) : 0;
}
