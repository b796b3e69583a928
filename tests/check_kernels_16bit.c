/* CPU kernels on 16-bit storage (src/backend/cpu/widen.c): nodes mixing bf16/f16 tensors with
 * f32 ones, as the amp pass makes them. For each op of a table, in bf16 and f16, overwriting and
 * accumulating: the result is bit for bit the f32 kernel's on the exactly widened inputs with
 * the 16-bit outputs rounded to nearest even (the scalar conversions of core/tensor.h are the
 * reference, so the vector paths are checked too), and within 16-bit precision of the all-f32
 * result on the unrounded inputs; the node runs in exactly workspace_bytes (ASan watches the
 * end in the _san build), which is the f32 kernel's own plus the 64-byte-aligned f32 copies.
 * Also: the element-moving ops take 16-bit data without copies, f64 never mixes with 16-bit,
 * the same bits on 1 and 3 threads, and CAST among f32, bf16 and f16 against the double path. */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>

#define U16(t) ((uint16_t *)(t).data)

/* What a tensor of a case is: f32 (parameters, gradients, statistics, the loss), the 16-bit
 * type under test (activations), i32 (ids, targets, argmax), u8 (masks). */
enum kind { F, H, I, U };

struct spec {
    enum kind kind;
    int rank;
    int64_t dim[TR_MAX_RANK];
    double lo, hi;   /* filled uniformly from [lo, hi); integers: its floor */
};

#define T(kind, lo, hi, ...) {kind, GC_RANK(__VA_ARGS__), {__VA_ARGS__}, lo, hi}

/* The tensors of one run: the unrounded f32 values, or their 16-bit rounding (widened back to
 * f32, or stored in 16 bits). */
struct set {
    struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
};

struct op_case {
    const char *name;
    enum tr_op op;
    union tr_attrs at;
    int nin, nout;
    struct spec in[TR_MAX_IN], out[TR_MAX_OUT];
    /* Makes f32 inputs consistent with each other (statistics a backward reads, say). */
    void (*prepare)(struct set *s);
    int native;   /* MOVES: the op moves 16-bit elements itself, BF16_BODY: it has a bf16 body
                   * (batchnorm.c) that takes all-bf16 tensors as stored; either: no workspace */
};
enum { WIDENS, MOVES, BF16_BODY };

/* The 16-bit result against all-f32 on the unrounded inputs, normwise, in units of the 16-bit
 * type's unit roundoff u: the inputs' rounding (u each) carried through the op, plus the output's
 * (u). Measured over the table: at most 1.5 u (attention_bwd, batchnorm_bwd's dbeta). */
#define TOL_U 4

/* ---- helpers ------------------------------------------------------------------------------ */

static uint16_t to16(enum tr_dtype t, float x)
{
    return t == TR_BF16 ? tr_f32_to_bf16(x) : tr_f32_to_f16(x);
}

static float from16(enum tr_dtype t, uint16_t h)
{
    return t == TR_BF16 ? tr_bf16_to_f32(h) : tr_f16_to_f32(h);
}

/* The unit roundoff: half an ulp relative, 2⁻⁸ for bf16's 8 bits, 2⁻¹¹ for f16's 11. */
static double unit_roundoff(enum tr_dtype t)
{
    return t == TR_BF16 ? 0x1p-8 : 0x1p-11;
}

static enum tr_dtype storage(enum kind k, enum tr_dtype half)
{
    return k == H ? half : k == F ? TR_F32 : k == I ? TR_I32 : TR_U8;
}

static struct tr_tensor make(enum tr_dtype t, const struct spec *s)
{
    return gc_tensor(t, s->rank, s->dim);
}

static void round_in_place(struct tr_tensor *t, enum tr_dtype half)
{
    for (int64_t i = 0; i < tr_tensor_numel(t); i++)
        F32(*t)[i] = from16(half, to16(half, F32(*t)[i]));
}

/* dst (f32, or 16-bit when half_dst) = src (f32), rounded to 16 bits when the spec says H. */
static struct tr_tensor derive(const struct tr_tensor *src, const struct spec *s, enum tr_dtype half, bool half_dst)
{
    enum tr_dtype t = s->kind == H && half_dst ? half : src->dtype;
    struct tr_tensor d = make(t, s);
    int64_t n = tr_tensor_numel(src);
    if (t == half)
        for (int64_t i = 0; i < n; i++)
            U16(d)[i] = to16(half, F32(*src)[i]);
    else
        memcpy(d.data, src->data, tr_tensor_bytes(src));
    if (s->kind == H && !half_dst)
        round_in_place(&d, half);
    return d;
}

static void set_free(struct set *s, const struct op_case *c)
{
    for (int i = 0; i < c->nin; i++)
        gc_free(&s->in[i]);
    for (int i = 0; i < c->nout; i++)
        gc_free(&s->out[i]);
}

static struct tr_node node_of(const struct op_case *c, int acc)
{
    return (struct tr_node){.op = c->op, .attrs = c->at, .nin = c->nin, .nout = c->nout,
                            .accumulate = (uint8_t)acc};
}

/* Runs the node in a workspace of exactly `bytes` (none when 0); the kernel's return code. */
static int run_with(const struct tr_node *node, struct set *s, size_t bytes, char *error)
{
    struct tr_kernel_args a = {.node = node, .nin = node->nin, .nout = node->nout};
    memcpy(a.in, s->in, sizeof a.in);
    memcpy(a.out, s->out, sizeof a.out);
    a.workspace = bytes ? malloc(bytes) : NULL;
    a.workspace_bytes = bytes;
    int rc = gc_kernel(tr_backend_cpu(), &a, error);
    free(a.workspace);
    return rc;
}

static size_t workspace_of(const struct tr_node *node, const struct set *s)
{
    return tr_cpu_ops.workspace_bytes(node, s->in, s->out);
}

/* Runs the node in exactly the workspace it asks for; fails the test on an error. */
static void run(const struct op_case *c, const struct tr_node *node, struct set *s)
{
    char error[GC_ERROR_MAX] = "";
    int rc = run_with(node, s, workspace_of(node, s), error);
    ck_assert_msg(rc == 0, "%s: %s", c->name, error);
}

/* The f32 copies widen.c makes: 64-byte pieces, one per 16-bit tensor. */
static size_t copies_bytes(const struct set *s, const struct op_case *c, enum tr_dtype half)
{
    size_t bytes = 0;
    for (int i = 0; i < c->nin + c->nout; i++) {
        const struct tr_tensor *t = i < c->nin ? &s->in[i] : &s->out[i - c->nin];
        if (t->dtype == half)
            bytes += ((size_t)tr_tensor_numel(t) * 4 + 63) / 64 * 64;
    }
    return bytes;
}

/* ‖got − want‖ / ‖want‖ over finite values; non-finite ones must agree exactly. */
static double normwise(const struct tr_tensor *got, const struct tr_tensor *want, enum tr_dtype half)
{
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < tr_tensor_numel(want); i++) {
        double w = F32(*want)[i], g = got->dtype == half ? from16(half, U16(*got)[i]) : F32(*got)[i];
        if (!isfinite(w)) {
            ck_assert_msg(g == w || (isnan(g) && isnan(w)), "element %lld: %g, not %g", (long long)i, g, w);
            continue;
        }
        diff += (g - w) * (g - w), norm += w * w;
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

/* The three sets of a case: the unrounded f32 values (`orig`), their rounding widened back to
 * f32 (`wide`) and stored in 16 bits (`mixed`). Outputs start filled too (what accumulate adds
 * to; ACCUMULATE always adds). */
static void build(const struct op_case *c, enum tr_dtype half, uint64_t seed, struct set *orig,
                  struct set *wide, struct set *mixed)
{
    for (int i = 0; i < c->nin + c->nout; i++) {
        const struct spec *s = i < c->nin ? &c->in[i] : &c->out[i - c->nin];
        struct tr_tensor *t = i < c->nin ? &orig->in[i] : &orig->out[i - c->nin];
        *t = make(storage(s->kind, TR_F32), s);
        if (i < c->nin)
            gc_fill(t, &seed, s->lo, s->hi);
        else if (s->kind == F || s->kind == H)
            gc_fill(t, &seed, -1, 1);
        if (i >= c->nin && s->kind == H)   /* the sum starts from the same value everywhere */
            round_in_place(t, half);
    }
    if (c->prepare)
        c->prepare(orig);
    for (int i = 0; i < c->nin; i++) {
        wide->in[i] = derive(&orig->in[i], &c->in[i], half, false);
        mixed->in[i] = derive(&orig->in[i], &c->in[i], half, true);
    }
    for (int i = 0; i < c->nout; i++) {
        wide->out[i] = derive(&orig->out[i], &c->out[i], half, false);
        mixed->out[i] = derive(&orig->out[i], &c->out[i], half, true);
    }
}

/* Every tensor of `mixed` (inputs too: a kernel may write one, batch norm's running statistics)
 * against `wide` after both ran: 16-bit ones are wide's rounded, the rest the same bytes. */
static void expect_rounded(const struct op_case *c, const struct set *wide, const struct set *mixed,
                           enum tr_dtype half, const char *mode)
{
    for (int i = 0; i < c->nin + c->nout; i++) {
        const struct tr_tensor *w = i < c->nin ? &wide->in[i] : &wide->out[i - c->nin];
        const struct tr_tensor *m = i < c->nin ? &mixed->in[i] : &mixed->out[i - c->nin];
        const char *what = i < c->nin ? "input" : "output";
        int k = i < c->nin ? i : i - c->nin;
        if (m->dtype != half) {
            ck_assert_msg(memcmp(w->data, m->data, tr_tensor_bytes(w)) == 0, "%s %s %s: %s %d differs",
                          c->name, tr_dtype_name(half), mode, what, k);
            continue;
        }
        for (int64_t e = 0; e < tr_tensor_numel(w); e++)
            ck_assert_msg(U16(*m)[e] == to16(half, F32(*w)[e]),
                          "%s %s %s: %s %d element %lld is %#06x, the f32 kernel's %.9g rounds to %#06x",
                          c->name, tr_dtype_name(half), mode, what, k, (long long)e, U16(*m)[e],
                          (double)F32(*w)[e], to16(half, F32(*w)[e]));
    }
}

/* One case in one 16-bit type, overwriting or accumulating. */
static void check_case(const struct op_case *c, enum tr_dtype half, int acc)
{
    const char *mode = acc ? "accumulating" : "overwriting";
    struct set orig = {0}, wide = {0}, mixed = {0};
    build(c, half, 1000 + (uint64_t)c->op, &orig, &wide, &mixed);
    struct tr_node node = node_of(c, acc);
    size_t need = workspace_of(&node, &mixed), copies = copies_bytes(&mixed, c, half);
    if (c->native == MOVES || (c->native == BF16_BODY && half == TR_BF16))
        ck_assert_msg(need == 0, "%s: %zu bytes of workspace for an op that moves 16-bit data", c->name, need);
    else
        ck_assert_msg(need == copies + workspace_of(&node, &wide), "%s: workspace %zu, not %zu + %zu",
                      c->name, need, copies, workspace_of(&node, &wide));
    run(c, &node, &orig);
    run(c, &node, &wide);
    run(c, &node, &mixed);   /* in exactly `need` bytes */
    expect_rounded(c, &wide, &mixed, half, mode);
    double tol = TOL_U * unit_roundoff(half);
    for (int i = 0; i < c->nout; i++) {
        if (c->out[i].kind != F && c->out[i].kind != H)
            continue;
        double e = normwise(&mixed.out[i], &orig.out[i], half);
        ck_assert_msg(e <= tol, "%s %s %s: output %d is %.3g from all-f32 (normwise), over %.3g",
                      c->name, tr_dtype_name(half), mode, i, e, tol);
    }
    set_free(&orig, c), set_free(&wide, c), set_free(&mixed, c);
}

/* ---- preparations: the statistics a backward reads, from the f32 forward ------------------ */

/* Runs op on bound f32 tensors, for the preparations. */
static void run_op(enum tr_op op, union tr_attrs at, int nin, const struct tr_tensor *in, int nout,
                   const struct tr_tensor *out)
{
    struct tr_node node = {.op = op, .attrs = at, .nin = nin, .nout = nout};
    struct set s = {0};
    memcpy(s.in, in, (size_t)nin * sizeof *in);
    memcpy(s.out, out, (size_t)nout * sizeof *out);
    char error[GC_ERROR_MAX] = "";
    ck_assert_msg(run_with(&node, &s, workspace_of(&node, &s), error) == 0, "%s: %s", tr_op_name(op), error);
}

/* layernorm_bwd (dy, x, gamma, stats): the stats of x */
static void ln_stats(struct set *s)
{
    struct tr_tensor y = gc_tensor(TR_F32, s->in[1].rank, s->in[1].dim), beta = gc_make(TR_F32, s->in[2].dim[0]);
    run_op(TR_OP_LAYERNORM, (union tr_attrs){.norm = {1e-5f}}, 3, (struct tr_tensor[]){s->in[1], s->in[2], beta},
           2, (struct tr_tensor[]){y, s->in[3]});
    gc_free(&y), gc_free(&beta);
}

/* A key padding mask with holes but a real first key in every batch (causal rows see one). */
static void attn_mask_pattern(struct tr_tensor *mask)
{
    for (int64_t i = 0; i < tr_tensor_numel(mask); i++)
        ((uint8_t *)mask->data)[i] = i % mask->dim[1] == 0 || i % 5 != 3;
}

static void attn_fwd_mask(struct set *s)
{
    attn_mask_pattern(&s->in[3]);
}

/* attention_bwd (do, q, k, v, o, lse, mask): o and lse of q, k, v */
static void attn_saved(struct set *s)
{
    attn_mask_pattern(&s->in[6]);
    run_op(TR_OP_ATTENTION, (union tr_attrs){.attention = {1, 1, 0}}, 4,
           (struct tr_tensor[]){s->in[1], s->in[2], s->in[3], s->in[6]}, 2, (struct tr_tensor[]){s->in[4], s->in[5]});
}

/* linear_cross_entropy_bwd (dloss, x, w, targets, lse): the lse of x·wᵀ */
static void lce_lse(struct set *s)
{
    struct tr_tensor loss = gc_make(TR_F32, 1), rank = gc_make(TR_I32, s->in[1].dim[0]);
    run_op(TR_OP_LINEAR_CROSS_ENTROPY, (union tr_attrs){.cross_entropy = {-100, 3}}, 3,
           (struct tr_tensor[]){s->in[1], s->in[2], s->in[3]}, 3, (struct tr_tensor[]){loss, s->in[4], rank});
    gc_free(&loss), gc_free(&rank);
}

/* batchnorm_bwd (dy, x, gamma, saved): the batch statistics of x */
static void bn_saved(struct set *s)
{
    struct tr_tensor *x = &s->in[1];
    int64_t C = x->dim[1];
    struct tr_tensor y = gc_tensor(TR_F32, x->rank, x->dim), beta = gc_make(TR_F32, C), rm = gc_make(TR_F32, C),
                     rv = gc_make(TR_F32, C);
    run_op(TR_OP_BATCHNORM, (union tr_attrs){.batchnorm = {1e-5f, 0.1f, 1}}, 5,
           (struct tr_tensor[]){*x, s->in[2], beta, rm, rv}, 2, (struct tr_tensor[]){y, s->in[3]});
    gc_free(&y), gc_free(&beta), gc_free(&rm), gc_free(&rv);
}

/* ---- the table ------------------------------------------------------------------------------ */

static const struct op_case cases[] = {
    {"matmul a, b 16-bit, y f32 (logits)", TR_OP_MATMUL, {.matmul = {0, 0}}, 2, 1,
     {T(H, -1, 1, 2, 7, 13), T(H, -1, 1, 13, 9)}, {T(F, 0, 0, 2, 7, 9)}, NULL, false},
    {"matmul a 16-bit, b f32ᵀ", TR_OP_MATMUL, {.matmul = {0, 1}}, 2, 1,
     {T(H, -1, 1, 7, 13), T(F, -1, 1, 9, 13)}, {T(H, 0, 0, 7, 9)}, NULL, false},
    {"matmul aᵀ, all 16-bit", TR_OP_MATMUL, {.matmul = {1, 0}}, 2, 1,
     {T(H, -1, 1, 13, 7), T(H, -1, 1, 13, 9)}, {T(H, 0, 0, 7, 9)}, NULL, false},
    {"bias_add", TR_OP_BIAS_ADD, {0}, 2, 1, {T(H, -1, 1, 6, 10), T(F, -1, 1, 10)}, {T(H, 0, 0, 6, 10)},
     NULL, BF16_BODY},
    {"add", TR_OP_ADD, {0}, 2, 1, {T(H, -1, 1, 5, 8), T(H, -1, 1, 5, 8)}, {T(H, 0, 0, 5, 8)}, NULL, BF16_BODY},
    {"scale", TR_OP_SCALE, {.scale = {0.3f}}, 1, 1, {T(H, -1, 1, 5, 8)}, {T(H, 0, 0, 5, 8)}, NULL, BF16_BODY},
    {"accumulate (always adds)", TR_OP_ACCUMULATE, {0}, 1, 1, {T(H, -1, 1, 5, 8)}, {T(H, 0, 0, 5, 8)},
     NULL, BF16_BODY},
    {"layernorm", TR_OP_LAYERNORM, {.norm = {1e-5f}}, 3, 2,
     {T(H, -2, 2, 6, 32), T(F, 0.5, 1.5, 32), T(F, -1, 1, 32)}, {T(H, 0, 0, 6, 32), T(F, 0, 0, 6, 2)},
     NULL, BF16_BODY},
    {"layernorm, a row longer than the lanes and not a multiple", TR_OP_LAYERNORM, {.norm = {1e-5f}}, 3, 2,
     {T(H, -2, 2, 5, 75), T(F, 0.5, 1.5, 75), T(F, -1, 1, 75)}, {T(H, 0, 0, 5, 75), T(F, 0, 0, 5, 2)},
     NULL, BF16_BODY},
    {"layernorm, 16-bit gamma and beta (widened)", TR_OP_LAYERNORM, {.norm = {1e-5f}}, 3, 2,
     {T(H, -2, 2, 6, 32), T(H, 0.5, 1.5, 32), T(H, -1, 1, 32)}, {T(H, 0, 0, 6, 32), T(F, 0, 0, 6, 2)},
     NULL, false},
    {"layernorm_bwd", TR_OP_LAYERNORM_BWD, {.norm = {1e-5f}}, 4, 3,
     {T(H, -1, 1, 6, 32), T(H, -2, 2, 6, 32), T(F, 0.5, 1.5, 32), T(F, 0, 0, 6, 2)},
     {T(H, 0, 0, 6, 32), T(F, 0, 0, 32), T(F, 0, 0, 32)}, ln_stats, BF16_BODY},
    {"gelu", TR_OP_GELU, {0}, 1, 1, {T(H, -3, 3, 7, 33)}, {T(H, 0, 0, 7, 33)}, NULL, BF16_BODY},
    {"gelu, tanh form", TR_OP_GELU, {.gelu = {1}}, 1, 1, {T(H, -3, 3, 7, 33)}, {T(H, 0, 0, 7, 33)},
     NULL, BF16_BODY},
    {"gelu_bwd", TR_OP_GELU_BWD, {0}, 2, 1, {T(H, -1, 1, 7, 33), T(H, -3, 3, 7, 33)}, {T(H, 0, 0, 7, 33)},
     NULL, BF16_BODY},
    {"relu", TR_OP_RELU, {0}, 1, 1, {T(H, -1, 1, 4, 9)}, {T(H, 0, 0, 4, 9)}, NULL, BF16_BODY},
    {"tanh_bwd", TR_OP_TANH_BWD, {0}, 2, 1, {T(H, -1, 1, 4, 9), T(H, -0.9, 0.9, 4, 9)}, {T(H, 0, 0, 4, 9)},
     NULL, BF16_BODY},
    {"softmax", TR_OP_SOFTMAX, {0}, 1, 1, {T(H, -4, 4, 5, 17)}, {T(H, 0, 0, 5, 17)}, NULL, false},
    {"softmax_bwd", TR_OP_SOFTMAX_BWD, {0}, 2, 1, {T(H, -1, 1, 5, 17), T(H, 0, 0.2, 5, 17)}, {T(H, 0, 0, 5, 17)},
     NULL, false},
    {"log_softmax", TR_OP_LOG_SOFTMAX, {0}, 1, 1, {T(H, -4, 4, 5, 17)}, {T(H, 0, 0, 5, 17)}, NULL, false},
    {"dropout", TR_OP_DROPOUT, {.dropout = {0.25f, 7}}, 1, 1, {T(H, -1, 1, 3, 4, 10)}, {T(H, 0, 0, 3, 4, 10)},
     NULL, BF16_BODY},
    {"dropout, lanes and a short group", TR_OP_DROPOUT, {.dropout = {0.25f, 7}}, 1, 1, {T(H, -1, 1, 3, 2, 70)},
     {T(H, 0, 0, 3, 2, 70)}, NULL, BF16_BODY},
    {"attention", TR_OP_ATTENTION, {.attention = {1, 1, 0}}, 4, 2,
     {T(H, -1.5, 1.5, 2, 2, 6, 4), T(H, -1.5, 1.5, 2, 2, 6, 4), T(H, -1, 1, 2, 2, 6, 4), T(U, 0, 0, 2, 6)},
     {T(H, 0, 0, 2, 2, 6, 4), T(F, 0, 0, 2, 2, 6)}, attn_fwd_mask, false},
    {"attention_bwd", TR_OP_ATTENTION_BWD, {.attention = {1, 1, 0}}, 7, 3,
     {T(H, -1, 1, 2, 2, 6, 4), T(H, -1.5, 1.5, 2, 2, 6, 4), T(H, -1.5, 1.5, 2, 2, 6, 4), T(H, -1, 1, 2, 2, 6, 4),
      T(H, 0, 0, 2, 2, 6, 4), T(F, 0, 0, 2, 2, 6), T(U, 0, 0, 2, 6)},
     {T(H, 0, 0, 2, 2, 6, 4), T(H, 0, 0, 2, 2, 6, 4), T(H, 0, 0, 2, 2, 6, 4)}, attn_saved, false},
    {"cross_entropy on 16-bit logits", TR_OP_CROSS_ENTROPY, {.cross_entropy = {-100, 0}}, 2, 1,
     {T(H, -3, 3, 6, 11), T(I, 0, 11, 6)}, {T(F, 0, 0, 1)}, NULL, false},
    {"cross_entropy_bwd", TR_OP_CROSS_ENTROPY_BWD, {.cross_entropy = {-100, 0}}, 3, 1,
     {T(F, 0.5, 1.5, 1), T(H, -3, 3, 6, 11), T(I, 0, 11, 6)}, {T(H, 0, 0, 6, 11)}, NULL, false},
    {"linear_cross_entropy", TR_OP_LINEAR_CROSS_ENTROPY, {.cross_entropy = {-100, 3}}, 3, 3,
     {T(H, -1, 1, 7, 8), T(H, -1, 1, 11, 8), T(I, 0, 11, 7)}, {T(F, 0, 0, 1), T(F, 0, 0, 7), T(I, 0, 0, 7)},
     NULL, false},
    {"linear_cross_entropy_bwd", TR_OP_LINEAR_CROSS_ENTROPY_BWD, {.cross_entropy = {-100, 3}}, 5, 2,
     {T(F, 0.5, 1.5, 1), T(H, -1, 1, 7, 8), T(H, -1, 1, 11, 8), T(I, 0, 11, 7), T(F, 0, 0, 7)},
     {T(H, 0, 0, 7, 8), T(F, 0, 0, 11, 8)}, lce_lse, false},
    {"linear_cross_entropy_bwd, add_dw into a 16-bit dw", TR_OP_LINEAR_CROSS_ENTROPY_BWD,
     {.cross_entropy = {-100, 3, 1}}, 5, 2,
     {T(F, 0.5, 1.5, 1), T(H, -1, 1, 7, 8), T(H, -1, 1, 11, 8), T(I, 0, 11, 7), T(F, 0, 0, 7)},
     {T(H, 0, 0, 7, 8), T(H, 0, 0, 11, 8)}, lce_lse, false},
    {"embedding into 16-bit rows", TR_OP_EMBEDDING, {0}, 2, 1, {T(F, -1, 1, 10, 6), T(I, 0, 10, 5)},
     {T(H, 0, 0, 5, 6)}, NULL, false},
    {"embedding_bwd: 16-bit dy into an f32 table", TR_OP_EMBEDDING_BWD, {0}, 2, 1,
     {T(H, -1, 1, 9, 6), T(I, 0, 4, 9)}, {T(F, 0, 0, 10, 6)}, NULL, false},
    {"gather_bwd", TR_OP_GATHER_BWD, {.gather = {6}}, 2, 1, {T(H, -1, 1, 4, 5), T(I, 0, 6, 4)},
     {T(H, 0, 0, 6, 5)}, NULL, false},
    {"bias_grad: 16-bit dy, f32 dbias", TR_OP_BIAS_GRAD, {0}, 1, 1, {T(H, -1, 1, 9, 70)}, {T(F, 0, 0, 70)},
     NULL, BF16_BODY},
    /* a 16-bit bias or dbias: widened */
    {"bias_grad, all 16-bit", TR_OP_BIAS_GRAD, {0}, 1, 1, {T(H, -1, 1, 9, 70)}, {T(H, 0, 0, 70)}, NULL, false},
    {"bias_add, all 16-bit", TR_OP_BIAS_ADD, {0}, 2, 1, {T(H, -1, 1, 6, 10), T(H, -1, 1, 10)}, {T(H, 0, 0, 6, 10)},
     NULL, false},
    {"mul, all 16-bit", TR_OP_MUL, {0}, 2, 1, {T(H, -1, 1, 5, 8), T(H, -1, 1, 5, 8)}, {T(H, 0, 0, 5, 8)}, NULL,
     BF16_BODY},
    {"tanh, all 16-bit", TR_OP_TANH, {0}, 1, 1, {T(H, -2, 2, 4, 9)}, {T(H, 0, 0, 4, 9)}, NULL, BF16_BODY},
    {"relu_bwd, all 16-bit", TR_OP_RELU_BWD, {0}, 2, 1, {T(H, -1, 1, 4, 9), T(H, -1, 1, 4, 9)}, {T(H, 0, 0, 4, 9)},
     NULL, BF16_BODY},
    {"conv2d", TR_OP_CONV2D, {.conv = {1, 1}}, 2, 1, {T(H, -1, 1, 2, 3, 6, 5), T(H, -0.5, 0.5, 4, 3, 3, 3)},
     {T(H, 0, 0, 2, 4, 6, 5)}, NULL, false},
    {"conv2d_bwd_data", TR_OP_CONV2D_BWD_DATA, {.conv = {1, 1}}, 2, 1,
     {T(H, -1, 1, 2, 4, 6, 5), T(H, -0.5, 0.5, 4, 3, 3, 3)}, {T(H, 0, 0, 2, 3, 6, 5)}, NULL, false},
    {"conv2d_bwd_filter into f32", TR_OP_CONV2D_BWD_FILTER, {.conv = {2, 1}}, 2, 1,
     {T(H, -1, 1, 2, 4, 3, 3), T(H, -1, 1, 2, 3, 6, 5)}, {T(F, 0, 0, 4, 3, 3, 3)}, NULL, false},
    /* batch norm as amp makes it, 16-bit activations beside f32 per-channel tensors: bf16 on
     * batchnorm.c's own body (the bits of the widened f32 run all the same), f16 widened */
    {"batchnorm, f32 statistics", TR_OP_BATCHNORM, {.batchnorm = {1e-5f, 0.1f, 1}}, 5, 2,
     {T(H, -1, 2, 4, 3, 5, 7), T(F, 0.5, 1.5, 3), T(F, -1, 1, 3), T(F, -0.5, 0.5, 3), T(F, 0.5, 1.5, 3)},
     {T(H, 0, 0, 4, 3, 5, 7), T(F, 0, 0, 2, 3)}, NULL, BF16_BODY},
    {"batchnorm, f32 statistics, eval", TR_OP_BATCHNORM, {.batchnorm = {1e-5f, 0.1f, 0}}, 5, 2,
     {T(H, -1, 2, 4, 3, 5, 7), T(F, 0.5, 1.5, 3), T(F, -1, 1, 3), T(F, -0.5, 0.5, 3), T(F, 0.5, 1.5, 3)},
     {T(H, 0, 0, 4, 3, 5, 7), T(F, 0, 0, 2, 3)}, NULL, BF16_BODY},
    {"batchnorm, 16-bit running statistics (written in place)", TR_OP_BATCHNORM, {.batchnorm = {1e-5f, 0.1f, 1}},
     5, 2, {T(H, -1, 2, 4, 3, 5, 5), T(F, 0.5, 1.5, 3), T(F, -1, 1, 3), T(H, -0.5, 0.5, 3), T(H, 0.5, 1.5, 3)},
     {T(H, 0, 0, 4, 3, 5, 5), T(F, 0, 0, 2, 3)}, NULL, false},
    {"batchnorm_bwd", TR_OP_BATCHNORM_BWD, {.batchnorm = {1e-5f, 0.1f, 1}}, 4, 3,
     {T(H, -1, 1, 4, 3, 5, 7), T(H, -1, 2, 4, 3, 5, 7), T(F, 0.5, 1.5, 3), T(F, 0, 0, 2, 3)},
     {T(H, 0, 0, 4, 3, 5, 7), T(F, 0, 0, 3), T(F, 0, 0, 3)}, bn_saved, BF16_BODY},
    /* every tensor 16-bit: widened */
    {"batchnorm_bwd, all 16-bit", TR_OP_BATCHNORM_BWD, {.batchnorm = {1e-5f, 0.1f, 1}}, 4, 3,
     {T(H, -1, 1, 4, 3, 5, 7), T(H, -1, 2, 4, 3, 5, 7), T(H, 0.5, 1.5, 3), T(H, 0, 0, 2, 3)},
     {T(H, 0, 0, 4, 3, 5, 7), T(H, 0, 0, 3), T(H, 0, 0, 3)}, bn_saved, false},
    {"maxpool", TR_OP_MAXPOOL, {.pool = {2, 2, 0}}, 1, 2, {T(H, -1, 1, 2, 2, 6, 6)},
     {T(H, 0, 0, 2, 2, 3, 3), T(I, 0, 0, 2, 2, 3, 3)}, NULL, false},
    {"argmax", TR_OP_ARGMAX, {.axis = {1, 0}}, 1, 1, {T(H, -1, 1, 5, 7)}, {T(I, 0, 0, 5)}, NULL, false},
    {"permute", TR_OP_PERMUTE, {.permute = {{2, 0, 1}}}, 1, 1, {T(H, -1, 1, 2, 3, 4)}, {T(H, 0, 0, 4, 2, 3)},
     NULL, true},
    {"slice", TR_OP_SLICE, {.slice = {1, 1}}, 1, 1, {T(H, -1, 1, 2, 5, 3)}, {T(H, 0, 0, 2, 3, 3)},
     NULL, true},
    {"slice_bwd", TR_OP_SLICE_BWD, {.slice = {1, 1}}, 1, 1, {T(H, -1, 1, 2, 3, 3)}, {T(H, 0, 0, 2, 5, 3)},
     NULL, true},
    {"concat", TR_OP_CONCAT, {.axis = {1, 0}}, 2, 1, {T(H, -1, 1, 2, 2, 3), T(H, -1, 1, 2, 3, 3)},
     {T(H, 0, 0, 2, 5, 3)}, NULL, true},
    {"concat of 16-bit and f32 (widened)", TR_OP_CONCAT, {.axis = {1, 0}}, 2, 1,
     {T(H, -1, 1, 2, 2, 3), T(F, -1, 1, 2, 3, 3)}, {T(H, 0, 0, 2, 5, 3)}, NULL, false},
    {"masked_fill", TR_OP_MASKED_FILL, {.fill = {0.3f}}, 2, 1, {T(H, -1, 1, 2, 3, 4), T(U, 0, 2, 2, 3)},
     {T(H, 0, 0, 2, 3, 4)}, NULL, true},
    {"cast f32 → 16-bit", TR_OP_CAST, {0}, 1, 1, {T(F, -3, 3, 3, 7)}, {T(H, 0, 0, 3, 7)}, NULL, true},
    {"cast 16-bit → f32", TR_OP_CAST, {0}, 1, 1, {T(H, -3, 3, 3, 7)}, {T(F, 0, 0, 3, 7)}, NULL, true},
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(ops_in_16bit)
{
    enum tr_dtype half = _i % 2 ? TR_F16 : TR_BF16;
    const struct op_case *c = &cases[_i / 2];
    check_case(c, half, 0);
    check_case(c, half, 1);
}
END_TEST

/* ---- threads, refusals, workspace ----------------------------------------------------------- */

/* Cases large enough for several conversion chunks and several threads' rows. */
static const struct op_case large[] = {
    {"layernorm_bwd", TR_OP_LAYERNORM_BWD, {.norm = {1e-5f}}, 4, 3,
     {T(H, -1, 1, 300, 256), T(H, -2, 2, 300, 256), T(F, 0.5, 1.5, 256), T(F, 0, 0, 300, 2)},
     {T(H, 0, 0, 300, 256), T(F, 0, 0, 256), T(F, 0, 0, 256)}, ln_stats, BF16_BODY},
    {"matmul", TR_OP_MATMUL, {.matmul = {0, 1}}, 2, 1, {T(H, -1, 1, 300, 200), T(H, -1, 1, 700, 200)},
     {T(H, 0, 0, 300, 700)}, NULL, false},
    {"attention_bwd", TR_OP_ATTENTION_BWD, {.attention = {1, 1, 0}}, 7, 3,
     {T(H, -1, 1, 2, 2, 64, 32), T(H, -1.5, 1.5, 2, 2, 64, 32), T(H, -1.5, 1.5, 2, 2, 64, 32),
      T(H, -1, 1, 2, 2, 64, 32), T(H, 0, 0, 2, 2, 64, 32), T(F, 0, 0, 2, 2, 64), T(U, 0, 0, 2, 64)},
     {T(H, 0, 0, 2, 2, 64, 32), T(H, 0, 0, 2, 2, 64, 32), T(H, 0, 0, 2, 2, 64, 32)}, attn_saved, false},
    /* streamed (widen.c): chunks of whole rows, or of elements, and a last short one */
    {"bias_add", TR_OP_BIAS_ADD, {0}, 2, 1, {T(H, -1, 1, 301, 256), T(F, -1, 1, 256)}, {T(H, 0, 0, 301, 256)},
     NULL, BF16_BODY},
    {"bias_grad", TR_OP_BIAS_GRAD, {0}, 1, 1, {T(H, -1, 1, 301, 200)}, {T(F, 0, 0, 200)}, NULL, BF16_BODY},
    {"gelu_bwd", TR_OP_GELU_BWD, {0}, 2, 1, {T(H, -1, 1, 3, 33333), T(H, -3, 3, 3, 33333)}, {T(H, 0, 0, 3, 33333)},
     NULL, false},
    {"add of 16-bit and f32", TR_OP_ADD, {0}, 2, 1, {T(H, -1, 1, 7, 9999), T(F, -1, 1, 7, 9999)},
     {T(H, 0, 0, 7, 9999)}, NULL, false},
    /* batchnorm.c's bf16 body: channels shared out among threads, runs longer than the lanes */
    {"batchnorm_bwd", TR_OP_BATCHNORM_BWD, {.batchnorm = {1e-5f, 0.1f, 1}}, 4, 3,
     {T(H, -1, 1, 6, 13, 9, 11), T(H, -1, 2, 6, 13, 9, 11), T(F, 0.5, 1.5, 13), T(F, 0, 0, 2, 13)},
     {T(H, 0, 0, 6, 13, 9, 11), T(F, 0, 0, 13), T(F, 0, 0, 13)}, bn_saved, BF16_BODY},
};

/* The same bits on 1 and 3 threads, accumulating into 16-bit outputs. */
START_TEST(threads_bitwise)
{
    const struct op_case *c = &large[_i];
    struct set orig = {0}, wide = {0}, one = {0}, orig3 = {0}, wide3 = {0}, three = {0};
    build(c, TR_BF16, 77, &orig, &wide, &one);
    build(c, TR_BF16, 77, &orig3, &wide3, &three);
    struct tr_node node = node_of(c, 1);
    omp_set_num_threads(1);
    run(c, &node, &wide);
    run(c, &node, &one);
    omp_set_num_threads(3);
    run(c, &node, &three);
    omp_set_num_threads(1);
    for (int i = 0; i < c->nout; i++)
        ck_assert_msg(memcmp(one.out[i].data, three.out[i].data, tr_tensor_bytes(&one.out[i])) == 0,
                      "%s: output %d differs between 1 and 3 threads", c->name, i);
    expect_rounded(c, &wide, &three, TR_BF16, "on 3 threads");
    set_free(&orig, c), set_free(&wide, c), set_free(&one, c);
    set_free(&orig3, c), set_free(&wide3, c), set_free(&three, c);
}
END_TEST

/* f64 (the gradient checks' type) beside 16-bit data is refused with a sentence, whichever
 * tensor carries which. */
START_TEST(f64_never_mixes)
{
    struct tr_tensor a64 = gc_make(TR_F64, 3, 4), b16 = gc_make(TR_BF16, 4, 2), y64 = gc_make(TR_F64, 3, 2),
                     x16 = gc_make(TR_F16, 3, 4), bias64 = gc_make(TR_F64, 4), y16 = gc_make(TR_F16, 3, 4);
    struct tr_node mm = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1};
    struct set s = {.in = {a64, b16}, .out = {y64}};
    char error[GC_ERROR_MAX] = "";
    size_t need = workspace_of(&mm, &s);
    ck_assert_int_eq(run_with(&mm, &s, need, error), TR_EINVAL);
    ck_assert_str_eq(error, "matmul: f64 and bf16 tensors cannot be mixed (16-bit data computes in f32)");
    struct tr_node ba = {.op = TR_OP_BIAS_ADD, .nin = 2, .nout = 1};
    s = (struct set){.in = {x16, bias64}, .out = {y16}};
    ck_assert_int_eq(run_with(&ba, &s, workspace_of(&ba, &s), error), TR_EINVAL);
    ck_assert_str_eq(error, "bias_add: f64 and f16 tensors cannot be mixed (16-bit data computes in f32)");
    gc_free(&a64), gc_free(&b16), gc_free(&y64), gc_free(&x16), gc_free(&bias64), gc_free(&y16);
}
END_TEST

static const struct op_case *case_of(enum tr_op op)
{
    for (int i = 0; i < NCASES; i++)
        if (cases[i].op == op)
            return &cases[i];
    ck_abort_msg("no case of %s", tr_op_name(op));
    return NULL;
}

/* A workspace short of the f32 copies is refused before anything is written; one short of the
 * kernel's own scratch behind them, by the kernel. */
START_TEST(workspace_too_small)
{
    static const enum tr_op ops[] = {TR_OP_MATMUL, TR_OP_LINEAR_CROSS_ENTROPY, TR_OP_CONV2D};
    /* one thread: with more, oneDNN's kernels run on fewer threads when a slot is short, by design */
    omp_set_num_threads(1);
    for (size_t p = 0; p < sizeof ops / sizeof *ops; p++) {
        const struct op_case *c = case_of(ops[p]);
        struct set orig = {0}, wide = {0}, mixed = {0};
        build(c, TR_F16, 5, &orig, &wide, &mixed);
        struct tr_node node = node_of(c, 0);
        size_t need = workspace_of(&node, &mixed), copies = copies_bytes(&mixed, c, TR_F16);
        size_t out_bytes = tr_tensor_bytes(&mixed.out[0]);
        char *before = malloc(out_bytes), error[GC_ERROR_MAX] = "", expect[GC_ERROR_MAX];
        memcpy(before, mixed.out[0].data, out_bytes);
        ck_assert_int_eq(run_with(&node, &mixed, copies - 1, error), TR_EINVAL);
        snprintf(expect, sizeof expect, "%s: needs %zu bytes of workspace for its 16-bit tensors, has %zu",
                 tr_op_name(c->op), copies, copies - 1);
        ck_assert_str_eq(error, expect);
        ck_assert_msg(memcmp(before, mixed.out[0].data, out_bytes) == 0, "%s: written despite the refusal", c->name);
        if (need > copies) {   /* the kernel's own scratch */
            error[0] = '\0';
            ck_assert_int_eq(run_with(&node, &mixed, need - 1, error), TR_EINVAL);
            ck_assert_msg(strstr(error, "workspace"), "%s: %s", c->name, error);
        }
        free(before);
        set_free(&orig, c), set_free(&wide, c), set_free(&mixed, c);
    }
}
END_TEST

/* ---- cast ----------------------------------------------------------------------------------- */

static double load_any(const struct tr_tensor *t, int64_t i)
{
    if (t->dtype == TR_F32)
        return F32(*t)[i];
    return from16(t->dtype, U16(*t)[i]);
}

/* The double path's store (shape.c): through f32, rounded to nearest even. */
static void expect_stored(const struct tr_tensor *t, int64_t i, double v, const char *what)
{
    if (t->dtype == TR_F32) {
        float want = (float)v;
        ck_assert_msg(memcmp(&F32(*t)[i], &want, 4) == 0, "%s: element %lld", what, (long long)i);
    } else {
        ck_assert_msg(U16(*t)[i] == to16(t->dtype, (float)v), "%s: element %lld is %#06x, not %#06x", what,
                      (long long)i, U16(*t)[i], to16(t->dtype, (float)v));
    }
}

/* Every pair of f32, bf16, f16, overwriting and adding, on 3 threads and over a length that
 * ends in a partial run: the double path's bits. Values: ties of both 16-bit formats, f16
 * subnormals and overflow, infinities, NaN. */
START_TEST(cast_fast_path)
{
    static const enum tr_dtype types[] = {TR_F32, TR_BF16, TR_F16};
    static const uint32_t special[] = {0x3f808000, 0x3f818000, 0x3f801000, 0x3f803000, 0x33800000, 0x33000000,
                                       0x33c00000, 0x477fe000, 0x47c35000, 0x7f800000, 0xff800000, 0x7fc00000,
                                       0x80000000, 0x00000001};
    const int64_t n = 2500;
    omp_set_num_threads(3);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int acc = 0; acc < 2; acc++) {
                uint64_t seed = 11;
                struct tr_tensor src = gc_make(TR_F32, n), x = gc_make(types[a], n), y = gc_make(types[b], n),
                                 y0 = gc_make(types[b], n);
                gc_fill(&src, &seed, -70000, 70000);
                for (int64_t i = 0; i < n; i++) {
                    if (i % 3 == 0)
                        F32(src)[i] /= 60000;
                    if (i < (int64_t)(sizeof special / sizeof *special))
                        memcpy(&F32(src)[i], &special[i], 4);
                }
                run_node(TR_OP_CAST, (union tr_attrs){0}, 0, 1, &src, x);
                run_node(TR_OP_CAST, (union tr_attrs){0}, 0, 1, &src, y);
                memcpy(y0.data, y.data, tr_tensor_bytes(&y));
                run_node(TR_OP_CAST, (union tr_attrs){0}, acc, 1, &x, y);
                char what[64];
                snprintf(what, sizeof what, "%s → %s%s", tr_dtype_name(types[a]), tr_dtype_name(types[b]),
                         acc ? " (+=)" : "");
                for (int64_t i = 0; i < n; i++)
                    expect_stored(&y, i, acc ? load_any(&y0, i) + load_any(&x, i) : load_any(&x, i), what);
                gc_free(&src), gc_free(&x), gc_free(&y), gc_free(&y0);
            }
    omp_set_num_threads(1);
}
END_TEST

int main(void)
{
    /* The widened path against the f32 kernel it widens to: an f32 convolution may otherwise
     * take oneDNN (a workspace of its own, tests/check_onednn_conv.c), which 16-bit ones never do. */
    setenv("TR_CPU_CONV", "im2col", 1);
    setenv("TR_CPU_GEMM", "openblas", 1);
    Suite *s = suite_create("kernels_16bit");
    TCase *tc = tcase_create("16-bit storage");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, ops_in_16bit, 0, 2 * NCASES);
    tcase_add_loop_test(tc, threads_bitwise, 0, (int)(sizeof large / sizeof large[0]));
    tcase_add_test(tc, f64_never_mixes);
    tcase_add_test(tc, workspace_too_small);
    tcase_add_test(tc, cast_fast_path);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
