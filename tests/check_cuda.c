/* The CUDA backend (src/backend/cuda) against the CPU's, kernel by kernel. For every op the
 * CUDA table has: random inputs (fixed seeds), odd shapes (1, 3, 257 columns; batched GEMMs
 * with b shared and every transpose), in all-f32 and with the activations in bf16 and in f16,
 * overwriting and accumulating; the node runs on the device through tr_backend_run on copies
 * of the inputs, and its outputs are compared with the CPU backend's on the same inputs:
 *  - f32 outputs within 1e-5 normwise relative (‖gpu − cpu‖/‖cpu‖), except MATMUL with an f32
 *    operand and every convolution, which run in TF32 (cuda.h; cuDNN's FFT and Winograd
 *    algorithms round their transforms too): 2e-3;
 *  - 16-bit outputs within 2 units in the last place of the CPU's value, plus 1e-4 of the
 *    tensor's largest magnitude (elements that are differences of larger numbers); TF32
 *    matmuls and convolutions within 4 unit roundoffs normwise;
 *  - inputs a node writes in place (batch norm's running statistics) as outputs;
 *  - DROPOUT, CAST, EMBEDDING and EMBEDDING_BWD bit for bit (the same Philox draws, the same
 *    rounding, the same additions in the same order);
 *  - ATTENTION and ATTENTION_BWD (ATTN) within 8 unit roundoffs normwise, of TF32 (2⁻¹¹) in the
 *    f32 runs and of the 16-bit type otherwise, every output: a chain of up to three GEMMs, and
 *    P and dS rounded to the operands' type (attention.cu); −∞ (lse of a row that sees no key)
 *    must be −∞ on both sides;
 *  - LINEAR_CROSS_ENTROPY(_BWD) with TF32's tolerances (its GEMMs are MATMUL's), on x and w
 *    drawn from a grid (on_grid) that makes the logits exact in TF32 and in any summation
 *    order: the ranks (i32) then compare bit for bit, ties included; the backward's error is
 *    TF32's rounding of the dlogits in the dx and dw GEMMs (≤ 2^-10 relative each).
 * Bad ids and targets fail with the CPU's sentence. Without a GPU only the table is checked
 * (it touches no device); the program then says so and exits 77, which make check counts as
 * a skip. */
#include "runner.h"
#include "gradcheck.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/probe.h"
#include "graph/ops.h"
#include "recipe/optimizers.h"
#include "recipe/recipe.h"

/* ---- the table: runs everywhere, no device touched ------------------------------------------ */

/* The CUDA instance the tests share: opened once (the tests run in one process on a GPU), which
 * touches no device. */
static const struct tr_backend *cuda(void)
{
    static struct tr_backend *be;
    struct tr_diag why = {0};
    if (!be)
        ck_assert_msg(tr_backend_open_ops(&tr_cuda_ops, 0, &be, &why) == 0, "%s", tr_diag_last(&why));
    return be;
}

START_TEST(table_names_its_ops)
{
    const struct tr_backend_ops *be = cuda()->ops, *cpu = tr_backend_cpu()->ops;
    ck_assert_str_eq(be->name, "cuda");
    ck_assert_ptr_nonnull(be->workspace_bytes);
    ck_assert_ptr_eq(cuda()->ops, &tr_cuda_ops);
    for (int op = 0; op < TR_NOPS; op++) {   /* every op the CPU runs, the GPU runs */
        ck_assert_msg((be->kernels[op] != NULL) == (cpu->kernels[op] != NULL), "%s: kernel %s",
                      tr_op_name((enum tr_op)op), be->kernels[op] ? "present, not on the CPU" : "missing");
        ck_assert_msg((be->kernels[op] != NULL) == (tr_ops[op].runs_on == TR_OP_RUNS_ON_DEVICE),
                      "%s: a CUDA kernel exactly when the op table says a device runs it", tr_ops[op].name);
    }
    ck_assert(!be->host_visible);
    ck_assert(cuda()->memory && cuda()->host_memory && be->copy && be->fill && be->synchronize);
    ck_assert(be->copy_ahead && be->join);
    ck_assert(be->optim_step && be->grad_sumsq && be->grad_scale);
}
END_TEST

/* An op without a kernel (a slot a later backend leaves NULL) fails with a sentence naming the
 * op and the backend, before anything reaches a device. */
START_TEST(missing_op_says_so)
{
    struct tr_backend_ops ops = tr_cuda_ops;
    tr_kernel_fn kernels[TR_NOPS];
    memcpy(kernels, ops.kernels, sizeof kernels);
    kernels[TR_OP_CONV2D] = NULL;
    ops.kernels = kernels;
    struct tr_backend partial = *cuda();
    partial.ops = &ops;
    struct tr_node n = {.op = TR_OP_CONV2D, .nin = 2, .nout = 1};
    char error[GC_ERROR_MAX] = "";
    struct tr_kernel_args a = {.node = &n, .nin = 2, .nout = 1};
    ck_assert_int_eq(gc_kernel(&partial, &a, error), TR_EINVAL);
    ck_assert_str_eq(error, "op conv2d has no CUDA kernel yet");
}
END_TEST

/* f64 (the CPU's gradient-check type) is refused by its dtype, before the device is touched. */
START_TEST(f64_refused)
{
    struct tr_node n = {.op = TR_OP_ADD, .nin = 2, .nout = 1};
    struct tr_tensor t = {.dtype = TR_F64, .rank = 1, .dim = {4}, .data = NULL};
    char error[GC_ERROR_MAX] = "";
    struct tr_kernel_args a = {.node = &n, .in = {t, t}, .out = {t}, .nin = 2, .nout = 1};
    ck_assert_int_eq(gc_kernel(cuda(), &a, error), TR_EINVAL);
    ck_assert_msg(strstr(error, "add: f64 tensors have no CUDA kernels") == error, "%s", error);
}
END_TEST

/* Workspace is arithmetic on shapes: cuBLASLt's 32 MiB for a GEMM, plus f32 copies of the
 * 16-bit tensors when the operand types differ; the sort keys of the embedding gradient. */
START_TEST(workspace_sizes)
{
    const struct tr_backend_ops *be = cuda()->ops;
    struct tr_node mm = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1};
    struct tr_tensor a = {.dtype = TR_BF16, .rank = 2, .dim = {7, 13}}, b = {.dtype = TR_BF16, .rank = 2, .dim = {13, 9}},
                     y = {.dtype = TR_BF16, .rank = 2, .dim = {7, 9}};
    struct tr_tensor in[2] = {a, b}, out[1] = {y};
    size_t lt = (size_t)32 << 20;
    ck_assert_uint_eq(be->workspace_bytes(&mm, in, out), lt);
    in[1].dtype = TR_F32;   /* a widened (7·13·4 = 364 → 512 bytes), y too (7·9·4 = 252 → 256) */
    ck_assert_uint_eq(be->workspace_bytes(&mm, in, out), lt + 512 + 256);
    struct tr_node eb = {.op = TR_OP_EMBEDDING_BWD, .nin = 2, .nout = 1};
    struct tr_tensor dy = {.dtype = TR_F32, .rank = 2, .dim = {300, 8}}, ids = {.dtype = TR_I32, .rank = 1, .dim = {300}},
                     table = {.dtype = TR_F32, .rank = 2, .dim = {7, 8}};
    struct tr_tensor ein[2] = {dy, ids}, eout[1] = {table};
    ck_assert_uint_eq(be->workspace_bytes(&eb, ein, eout), 512 * 8);   /* 300 keys padded to 512 */
    eb.op = TR_OP_GATHER_BWD;   /* the same sort */
    ck_assert_uint_eq(be->workspace_bytes(&eb, ein, eout), 512 * 8);
    /* linear_cross_entropy: cuBLASLt's 32 MiB, the f32 logits of a chunk (3 rows · 257 · 4 =
     * 3084 → 3328), the row losses (10 · 4 → 256) */
    struct tr_node lce = {.op = TR_OP_LINEAR_CROSS_ENTROPY, .attrs.cross_entropy = {-100, 3, 0}, .nin = 3, .nout = 3};
    struct tr_tensor x = {.dtype = TR_F32, .rank = 2, .dim = {10, 33}},
                     w = {.dtype = TR_F32, .rank = 2, .dim = {257, 33}},
                     t = {.dtype = TR_I32, .rank = 1, .dim = {10}}, loss = {.dtype = TR_F32, .rank = 1, .dim = {1}},
                     lse = {.dtype = TR_F32, .rank = 1, .dim = {10}}, rank = {.dtype = TR_I32, .rank = 1, .dim = {10}};
    struct tr_tensor lin[3] = {x, w, t}, lout[3] = {loss, lse, rank};
    ck_assert_uint_eq(be->workspace_bytes(&lce, lin, lout), lt + 3328 + 256);
    lin[0].dtype = TR_BF16;   /* mixed: x widened a chunk at a time (3 · 33 · 4 = 396 → 512) */
    ck_assert_uint_eq(be->workspace_bytes(&lce, lin, lout), lt + 3328 + 256 + 512);
    lin[1].dtype = TR_BF16;   /* one 16-bit type: taken as it is */
    ck_assert_uint_eq(be->workspace_bytes(&lce, lin, lout), lt + 3328 + 256);
    /* the backward widens every 16-bit operand: x a chunk, w whole (257 · 33 · 4 = 33924 →
     * 34048), a 16-bit dx a chunk, a 16-bit dw whole */
    struct tr_node bwd = {.op = TR_OP_LINEAR_CROSS_ENTROPY_BWD, .attrs.cross_entropy = {-100, 3, 1}, .nin = 5,
                          .nout = 2};
    struct tr_tensor bin[5] = {loss, lin[0], lin[1], t, lse}, bout[2] = {lin[0], lin[1]};
    ck_assert_uint_eq(be->workspace_bytes(&bwd, bin, bout), lt + 3328 + 512 + 34048 + 512 + 34048);
    bin[1].dtype = bin[2].dtype = bout[0].dtype = bout[1].dtype = TR_F32;
    ck_assert_uint_eq(be->workspace_bytes(&bwd, bin, bout), lt + 3328);
    /* the backend's chunk: 128 MiB of f32 logits, GPT-2's 50,257 classes → 667 rows */
    lce.attrs.cross_entropy.chunk = 0;
    lin[0].dim[0] = 16384, lin[1].dim[0] = 50257, lin[0].dtype = lin[1].dtype = TR_F32;
    ck_assert_uint_eq(be->workspace_bytes(&lce, lin, lout), lt + (667 * 50257 * 4 + 255) / 256 * 256 + 16384 * 4);
    lin[0].dim[0] = 0;   /* no rows, nothing to hold */
    ck_assert_uint_eq(be->workspace_bytes(&lce, lin, lout), 0);
}
END_TEST

/* Attention's workspace: cuBLASLt's 32 MiB, f32 scores [group, S, S] (and dP backward), P in
 * the operands' type when 16-bit, f32 copies when the types mix; pairs grouped under 64 MiB. */
START_TEST(attention_workspace_in_groups)
{
    const struct tr_backend_ops *be = cuda()->ops;
    size_t lt = (size_t)32 << 20, mib = (size_t)1 << 20;
    struct tr_node fwd = {.op = TR_OP_ATTENTION, .nin = 3, .nout = 2};
    struct tr_node bwd = {.op = TR_OP_ATTENTION_BWD, .nin = 6, .nout = 3};
    struct tr_tensor x = {.dtype = TR_BF16, .rank = 4, .dim = {2, 3, 7, 8}};
    struct tr_tensor lse = {.dtype = TR_F32, .rank = 3, .dim = {2, 3, 7}};
    struct tr_tensor in[6] = {x, x, x, x, x, lse}, out[3] = {x, lse, x};
    /* 6 pairs of 7·7: scores 1176 → 1280 bytes, P in bf16 588 → 768 */
    ck_assert_uint_eq(be->workspace_bytes(&fwd, in, out), lt + 1280 + 768);
    out[2] = x;
    ck_assert_uint_eq(be->workspace_bytes(&bwd, in, out), lt + 2 * 1280 + 768);
    for (int i = 0; i < 6; i++)
        in[i].dtype = TR_F32;
    out[0].dtype = out[2].dtype = TR_F32;
    ck_assert_uint_eq(be->workspace_bytes(&bwd, in, out), lt + 2 * 1280);   /* f32: P in place */
    in[2].dtype = TR_F16;   /* mixed: k widened, 336 floats → 1536 bytes */
    ck_assert_uint_eq(be->workspace_bytes(&fwd, in, out), lt + 1536 + 1280);
    /* S 2048 in bf16: 24 MiB a pair (16 f32 + 8 bf16), so two pairs a step of eight */
    struct tr_tensor big = {.dtype = TR_BF16, .rank = 4, .dim = {1, 8, 2048, 64}},
                     big_lse = {.dtype = TR_F32, .rank = 3, .dim = {1, 8, 2048}};
    struct tr_tensor bin[3] = {big, big, big}, bout[2] = {big, big_lse};
    ck_assert_uint_eq(be->workspace_bytes(&fwd, bin, bout), lt + 32 * mib + 16 * mib);
    /* S 4096 backward in f32: 128 MiB a pair, over the cap, yet one pair a step */
    big.dtype = TR_F32, big.dim[2] = 4096, big_lse.dim[2] = 4096;
    struct tr_tensor b6[6] = {big, big, big, big, big, big_lse}, b3[3] = {big, big, big};
    ck_assert_uint_eq(be->workspace_bytes(&bwd, b6, b3), lt + 2 * 64 * mib);
    big.dim[2] = 0;   /* nothing to do, no workspace */
    struct tr_tensor e3[3] = {big, big, big}, e2[2] = {big, big_lse};
    ck_assert_uint_eq(be->workspace_bytes(&fwd, e3, e2), 0);
}
END_TEST

/* A convolution's: its f32 copies (when x, w, y differ in dtype), then cuDNN's budget — the
 * batch's im2col in f32, within [32 MiB, 256 MiB]. Batch norm's: the f32 copies alone (16-bit
 * x and y run as they are in f16, through f32 in bf16). No device is touched. */
START_TEST(workspace_sizes_cudnn)
{
    const struct tr_backend_ops *be = cuda()->ops;
    size_t mib = (size_t)1 << 20;
    struct tr_node conv = {.op = TR_OP_CONV2D, .attrs.conv = {1, 1}, .nin = 2, .nout = 1};
    struct tr_tensor x = {.dtype = TR_F32, .rank = 4, .dim = {2, 3, 9, 11}}, w = {.dtype = TR_F32, .rank = 4, .dim = {5, 3, 3, 3}},
                     y = {.dtype = TR_F32, .rank = 4, .dim = {2, 5, 9, 11}};
    struct tr_tensor in[5] = {x, w}, out[2] = {y};
    ck_assert_uint_eq(be->workspace_bytes(&conv, in, out), 32 * mib);   /* im2col 2·27·99·4 bytes: the floor */
    in[0].dtype = out[0].dtype = TR_BF16;   /* x (594·4 → 2560 bytes) and y (990·4 → 4096) widened */
    ck_assert_uint_eq(be->workspace_bytes(&conv, in, out), 32 * mib + 2560 + 4096);
    in[1].dtype = TR_BF16;   /* one dtype: no copies */
    ck_assert_uint_eq(be->workspace_bytes(&conv, in, out), 32 * mib);
    conv.op = TR_OP_CONV2D_BWD_FILTER;   /* dy [2, 5, 9, 11] bf16, x bf16 → dw f32: dy and x widened */
    struct tr_tensor bin[2] = {out[0], in[0]}, bout[1] = {w};
    ck_assert_uint_eq(be->workspace_bytes(&conv, bin, bout), 32 * mib + 4096 + 2560);
    conv.op = TR_OP_CONV2D;
    struct tr_tensor mx = {.dtype = TR_F32, .rank = 4, .dim = {8, 64, 56, 56}},
                     mw = {.dtype = TR_F32, .rank = 4, .dim = {64, 64, 3, 3}};
    struct tr_tensor big_in[2] = {mx, mw}, big_out[1] = {mx};
    ck_assert_uint_eq(be->workspace_bytes(&conv, big_in, big_out), (size_t)8 * 576 * 3136 * 4);   /* 55 MiB: im2col */
    big_in[0].dim[0] = big_out[0].dim[0] = 256;
    ck_assert_uint_eq(be->workspace_bytes(&conv, big_in, big_out), 256 * mib);   /* 1.7 GiB of im2col: the ceiling */
    struct tr_node bn = {.op = TR_OP_BATCHNORM, .attrs.batchnorm = {1e-5f, 0.1f, 1}, .nin = 5, .nout = 2};
    struct tr_tensor c = {.dtype = TR_F32, .rank = 1, .dim = {3}}, saved = {.dtype = TR_F32, .rank = 2, .dim = {2, 3}};
    struct tr_tensor bnin[5] = {x, c, c, c, c}, bnout[2] = {x, saved};
    ck_assert_uint_eq(be->workspace_bytes(&bn, bnin, bnout), 0);
    bnin[0].dtype = bnout[0].dtype = TR_F16;   /* cuDNN's half batch norm: as it is */
    ck_assert_uint_eq(be->workspace_bytes(&bn, bnin, bnout), 0);
    bnin[0].dtype = bnout[0].dtype = TR_BF16;   /* bf16: x and y through f32 */
    ck_assert_uint_eq(be->workspace_bytes(&bn, bnin, bnout), 2560 + 2560);
    bn.attrs.batchnorm.training = 0;   /* eval: our kernels read bf16 themselves */
    ck_assert_uint_eq(be->workspace_bytes(&bn, bnin, bnout), 0);
    struct tr_node bwd = {.op = TR_OP_BATCHNORM_BWD, .attrs.batchnorm = {1e-5f, 0.1f, 1}, .nin = 4, .nout = 3};
    struct tr_tensor bwin[4] = {bnin[0], bnin[0], c, saved}, bwout[3] = {bnin[0], c, c};
    ck_assert_uint_eq(be->workspace_bytes(&bwd, bwin, bwout), 3 * 2560);   /* dy, x, dx */
}
END_TEST

/* ---- the ops on a GPU, against the CPU -------------------------------------------------------- */

/* A tensor of a case: f32 always (F), the type under test (H: f32, bf16 or f16), the other
 * 16-bit type (O: f16 beside bf16, bf16 beside f16, f32 beside f32), i32 (I), u8 (U: masks). */
enum kind { F, H, O, I, U };

struct spec {
    enum kind kind;
    int rank;
    int64_t dim[TR_MAX_RANK];
    double lo, hi;   /* filled uniformly from [lo, hi); i32: its floor */
};

#define T(kind, lo, hi, ...) {kind, GC_RANK(__VA_ARGS__), {__VA_ARGS__}, lo, hi}

struct set {
    struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
};

enum compare { NEAR, TF32, EXACT, ATTN };

struct op_case {
    const char *name;
    enum tr_op op;
    union tr_attrs at;
    int nin, nout;
    struct spec in[TR_MAX_IN], out[TR_MAX_OUT];
    void (*prepare)(struct set *s);   /* inputs that must agree with each other, on the host */
    enum compare compare;
    bool sample_ids;                  /* dropout: rows are samples 1000 + 7r */
};

static enum tr_dtype storage(enum kind k, enum tr_dtype half)
{
    switch (k) {
    case F: return TR_F32;
    case H: return half;
    case O: return half == TR_BF16 ? TR_F16 : half == TR_F16 ? TR_BF16 : TR_F32;
    case U: return TR_U8;
    case I:
    default: return TR_I32;
    }
}

static float get(const struct tr_tensor *t, int64_t i)
{
    if (t->dtype == TR_F32)
        return ((const float *)t->data)[i];
    uint16_t h = ((const uint16_t *)t->data)[i];
    return t->dtype == TR_BF16 ? tr_bf16_to_f32(h) : tr_f16_to_f32(h);
}

static void set(struct tr_tensor *t, int64_t i, float v)
{
    if (t->dtype == TR_F32)
        ((float *)t->data)[i] = v;
    else
        ((uint16_t *)t->data)[i] = t->dtype == TR_BF16 ? tr_f32_to_bf16(v) : tr_f32_to_f16(v);
}

static struct tr_tensor make(const struct spec *s, enum tr_dtype half, uint64_t *seed, bool fill)
{
    struct tr_tensor t = gc_tensor(storage(s->kind, half), s->rank, s->dim);
    for (int64_t i = 0; fill && i < tr_tensor_numel(&t); i++) {
        double v = gc_uniform(seed, s->lo, s->hi);
        if (t.dtype == TR_I32)
            ((int32_t *)t.data)[i] = (int32_t)floor(v);
        else if (t.dtype == TR_U8)
            ((uint8_t *)t.data)[i] = (uint8_t)floor(v);
        else
            set(&t, i, (float)v);
    }
    return t;
}

static struct tr_tensor clone(const struct tr_tensor *t)
{
    struct tr_tensor c = gc_tensor(t->dtype, t->rank, t->dim);
    memcpy(c.data, t->data, tr_tensor_bytes(t));
    return c;
}

/* Runs a node on the CPU in the workspace it asks for; fails the test on an error. */
static void cpu_run(const struct tr_node *node, struct tr_tensor *in, struct tr_tensor *out, const struct tr_rng_ctx *rng)
{
    char error[GC_ERROR_MAX] = "";
    struct tr_kernel_args a = {.node = node, .nin = node->nin, .nout = node->nout, .rng = rng};
    memcpy(a.in, in, (size_t)node->nin * sizeof *in);
    memcpy(a.out, out, (size_t)node->nout * sizeof *out);
    a.workspace_bytes = tr_cpu_ops.workspace_bytes(node, a.in, a.out);
    a.workspace = a.workspace_bytes ? malloc(a.workspace_bytes) : NULL;
    int rc = gc_kernel(tr_backend_cpu(), &a, error);
    free(a.workspace);
    ck_assert_msg(rc == 0, "cpu %s: %s", tr_op_name(node->op), error);
}

/* ---- preparations --------------------------------------------------------------------------- */

/* layernorm_bwd (dy, x, gamma, stats): the stats of x, by the CPU */
static void ln_stats(struct set *s)
{
    struct tr_tensor y = gc_tensor(TR_F32, s->in[1].rank, s->in[1].dim), beta = gc_make(TR_F32, s->in[2].dim[0]);
    struct tr_node n = {.op = TR_OP_LAYERNORM, .attrs.norm = {1e-5f}, .nin = 3, .nout = 2};
    struct tr_tensor in[3] = {s->in[1], s->in[2], beta}, out[2] = {y, s->in[3]};
    cpu_run(&n, in, out, NULL);
    gc_free(&y), gc_free(&beta);
}

/* softmax_bwd / log_softmax_bwd (dy, y): y a real (log-)softmax of random logits */
static void softmax_of(struct set *s, enum tr_op op)
{
    struct tr_tensor x = gc_tensor(TR_F32, s->in[1].rank, s->in[1].dim);
    uint64_t seed = 77;
    gc_fill(&x, &seed, -3, 3);
    struct tr_node n = {.op = op, .nin = 1, .nout = 1};
    cpu_run(&n, &x, &s->in[1], NULL);
    gc_free(&x);
}
static void softmax_y(struct set *s) { softmax_of(s, TR_OP_SOFTMAX); }
static void log_softmax_y(struct set *s) { softmax_of(s, TR_OP_LOG_SOFTMAX); }

/* tanh_bwd (dy, y): y in (−1, 1) is what the spec's range gives; relu_bwd: some y exactly 0 */
static void relu_zeros(struct set *s)
{
    for (int64_t i = 0; i < tr_tensor_numel(&s->in[1]); i += 3)
        set(&s->in[1], i, 0);
}

/* cross-entropy: every third target ignored (−100); the targets are in[1] forward, in[2] back */
static void ignore_some(struct tr_tensor *t)
{
    for (int64_t i = 0; i < tr_tensor_numel(t); i += 3)
        ((int32_t *)t->data)[i] = -100;
}
static void ce_ignore(struct set *s) { ignore_some(&s->in[1]); }
static void ce_bwd_ignore(struct set *s) { ignore_some(&s->in[2]); }
static void ignore_all(struct tr_tensor *t)
{
    for (int64_t i = 0; i < tr_tensor_numel(t); i++)
        ((int32_t *)t->data)[i] = -100;
}
static void ce_ignore_all(struct set *s) { ignore_all(&s->in[1]); }

/* linear_cross_entropy: x and w on a grid of 1/8 in [−1, 1] — exact in bf16, f16 and TF32, and
 * every partial sum of a logit (a multiple of 1/64 under D) exact in f32 — so the GPU's logits
 * are the CPU's bit for bit in any order of summation, and the ranks compare exactly, ties
 * (broken by index; the grid makes them common) included. With TF32's ~1e-3 error in a logit
 * the rank of a target with a near-tie could differ by one. */
static void on_grid(struct tr_tensor *t)
{
    for (int64_t i = 0; i < tr_tensor_numel(t); i++)
        set(t, i, roundf(get(t, i) * 8) / 8);
}
static void lce_grid(struct set *s) { on_grid(&s->in[0]), on_grid(&s->in[1]); }
static void lce_grid_ignore(struct set *s) { lce_grid(s), ignore_some(&s->in[2]); }
static void lce_grid_ignore_all(struct set *s) { lce_grid(s), ignore_all(&s->in[2]); }

/* linear_cross_entropy_bwd (dloss, x, w, targets, lse): x and w on the grid too (what is left of
 * TF32 is its rounding of the dlogits in the dx and dw GEMMs), lse by the CPU's forward */
static void lce_lse(struct set *s)
{
    on_grid(&s->in[1]), on_grid(&s->in[2]);
    struct tr_tensor loss = gc_make(TR_F32, 1), rank = gc_tensor(TR_I32, 1, s->in[4].dim);
    struct tr_node n = {.op = TR_OP_LINEAR_CROSS_ENTROPY, .attrs.cross_entropy = {-100, 0, 0}, .nin = 3, .nout = 3};
    struct tr_tensor out[3] = {loss, s->in[4], rank};
    cpu_run(&n, &s->in[1], out, NULL);
    gc_free(&loss), gc_free(&rank);
}
static void lce_bwd_ignore(struct set *s) { ignore_some(&s->in[3]), lce_lse(s); }
static void lce_bwd_ignore_all(struct set *s) { ignore_all(&s->in[3]), lce_lse(s); }

/* argmax: ties (the first index wins) in every other row, the row's maximum repeated */
static void argmax_ties(struct set *s)
{
    int64_t cols = s->in[0].dim[s->in[0].rank - 1], rows = tr_tensor_numel(&s->in[0]) / cols;
    for (int64_t r = 0; r < rows; r += 2) {
        set(&s->in[0], r * cols + 2, 5);
        set(&s->in[0], r * cols + cols - 1, 5);
    }
}

/* maxpool_bwd (dy, argmax): the argmax of a random x [.., H, W] by the CPU's maxpool, its H and
 * W those of the case's dx */
static void maxpool_argmax(struct set *s)
{
    const struct tr_tensor *dy = &s->in[0];
    int64_t dims[4] = {dy->dim[0], dy->dim[1], s->out[0].dim[2], s->out[0].dim[3]};
    struct tr_tensor x = gc_tensor(TR_F32, 4, dims), y = gc_tensor(TR_F32, 4, dy->dim);
    uint64_t seed = 78;
    gc_fill(&x, &seed, -3, 3);
    struct tr_node n = {.op = TR_OP_MAXPOOL, .attrs.pool = {3, 2, 1}, .nin = 1, .nout = 2};
    struct tr_tensor out[2] = {y, s->in[1]};
    cpu_run(&n, &x, out, NULL);
    gc_free(&x), gc_free(&y);
}

/* attention's padding mask [B, S] (random 0/1): batch row 1 all padding, so its rows see no key */
static void attn_pad_row(struct tr_tensor *mask)
{
    memset((uint8_t *)mask->data + mask->dim[1], 0, (size_t)mask->dim[1]);
}
static void attn_padded(struct set *s) { attn_pad_row(&s->in[3]); }

/* attention_bwd (do, q, k, v, o, lse (+ mask)): o and lse of q, k, v by the CPU's forward */
static void attn_forward(struct set *s, int causal)
{
    struct tr_node n = {.op = TR_OP_ATTENTION, .attrs.attention = {(uint8_t)causal, s->in[6].data != NULL, 0},
                        .nin = s->in[6].data ? 4 : 3, .nout = 2};
    if (s->in[6].data)
        attn_pad_row(&s->in[6]);
    struct tr_tensor in[4] = {s->in[1], s->in[2], s->in[3], s->in[6]}, out[2] = {s->in[4], s->in[5]};
    cpu_run(&n, in, out, NULL);
}
static void attn_o(struct set *s) { attn_forward(s, 0); }
static void attn_o_causal(struct set *s) { attn_forward(s, 1); }
/* batchnorm_bwd (dy, x, gamma, saved): the training statistics of x, by the CPU's forward */
static void bn_saved(struct set *s)
{
    int64_t C = s->in[2].dim[0];
    struct tr_tensor y = gc_tensor(TR_F32, s->in[1].rank, s->in[1].dim), beta = gc_make(TR_F32, C),
                     mean = gc_make(TR_F32, C), var = gc_make(TR_F32, C);
    struct tr_node n = {.op = TR_OP_BATCHNORM, .attrs.batchnorm = {1e-5f, 0, 1}, .nin = 5, .nout = 2};
    struct tr_tensor in[5] = {s->in[1], s->in[2], beta, mean, var}, out[2] = {y, s->in[3]};
    cpu_run(&n, in, out, NULL);
    gc_free(&y), gc_free(&beta), gc_free(&mean), gc_free(&var);
}

/* ---- the cases ------------------------------------------------------------------------------ */

static const struct op_case cases[] = {
    /* MATMUL: every transpose, batches with b shared and not, odd sizes, the dtype mixes */
    {"matmul, b shared", TR_OP_MATMUL, {.matmul = {0, 0}}, 2, 1, {T(H, -1, 1, 2, 7, 13), T(H, -1, 1, 13, 9)},
     {T(H, -1, 1, 2, 7, 9)}, NULL, TF32, false},
    {"matmul aᵀ, b shared (a GEMM a batch)", TR_OP_MATMUL, {.matmul = {1, 0}}, 2, 1,
     {T(H, -1, 1, 3, 13, 7), T(H, -1, 1, 13, 9)}, {T(H, -1, 1, 3, 7, 9)}, NULL, TF32, false},
    {"matmul aᵀ, bᵀ shared", TR_OP_MATMUL, {.matmul = {1, 1}}, 2, 1, {T(H, -1, 1, 2, 13, 7), T(H, -1, 1, 9, 13)},
     {T(H, -1, 1, 2, 7, 9)}, NULL, TF32, false},
    {"matmul bᵀ batched, K 257", TR_OP_MATMUL, {.matmul = {0, 1}}, 2, 1, {T(H, -1, 1, 2, 5, 257), T(H, -1, 1, 2, 3, 257)},
     {T(H, -1, 1, 2, 5, 3)}, NULL, TF32, false},
    {"matmul aᵀ bᵀ batched", TR_OP_MATMUL, {.matmul = {1, 1}}, 2, 1, {T(H, -1, 1, 2, 257, 5), T(H, -1, 1, 2, 3, 257)},
     {T(H, -1, 1, 2, 5, 3)}, NULL, TF32, false},
    {"matmul batched over two dims", TR_OP_MATMUL, {.matmul = {0, 0}}, 2, 1,
     {T(H, -1, 1, 2, 3, 4, 6), T(H, -1, 1, 2, 3, 6, 5)}, {T(H, -1, 1, 2, 3, 4, 5)}, NULL, TF32, false},
    {"matmul 1×3·3×1", TR_OP_MATMUL, {.matmul = {0, 0}}, 2, 1, {T(H, -1, 1, 1, 3), T(H, -1, 1, 3, 1)},
     {T(H, -1, 1, 1, 1)}, NULL, TF32, false},
    {"matmul 257 wide", TR_OP_MATMUL, {.matmul = {0, 1}}, 2, 1, {T(H, -1, 1, 33, 64), T(H, -1, 1, 257, 64)},
     {T(H, -1, 1, 33, 257)}, NULL, TF32, false},
    {"matmul 16-bit a, b → f32 y (logits)", TR_OP_MATMUL, {.matmul = {0, 1}}, 2, 1,
     {T(H, -1, 1, 2, 7, 13), T(H, -1, 1, 9, 13)}, {T(F, -1, 1, 2, 7, 9)}, NULL, TF32, false},
    {"matmul 16-bit a, f32 bᵀ (widened)", TR_OP_MATMUL, {.matmul = {0, 1}}, 2, 1,
     {T(H, -1, 1, 7, 13), T(F, -1, 1, 9, 13)}, {T(H, -1, 1, 7, 9)}, NULL, TF32, false},
    {"matmul f32 a, b → 16-bit y (widened)", TR_OP_MATMUL, {.matmul = {1, 0}}, 2, 1,
     {T(F, -1, 1, 13, 7), T(F, -1, 1, 13, 9)}, {T(H, -1, 1, 7, 9)}, NULL, TF32, false},
    {"matmul bf16 · f16 (widened)", TR_OP_MATMUL, {.matmul = {0, 0}}, 2, 1,
     {T(H, -1, 1, 5, 11), T(O, -1, 1, 11, 3)}, {T(F, -1, 1, 5, 3)}, NULL, TF32, false},
    /* bias */
    {"bias_add", TR_OP_BIAS_ADD, {0}, 2, 1, {T(H, -1, 1, 6, 257), T(F, -1, 1, 257)}, {T(H, -1, 1, 6, 257)}, NULL,
     NEAR, false},
    {"bias_grad, 130 rows (3 chunks)", TR_OP_BIAS_GRAD, {0}, 1, 1, {T(H, -1, 1, 130, 257)}, {T(F, -1, 1, 257)}, NULL,
     NEAR, false},
    {"bias_grad into 16 bits, 1 column", TR_OP_BIAS_GRAD, {0}, 1, 1, {T(H, -1, 1, 3, 1)}, {T(H, -1, 1, 1)}, NULL,
     NEAR, false},
    /* pointwise */
    {"add", TR_OP_ADD, {0}, 2, 1, {T(H, -1, 1, 5, 257), T(H, -1, 1, 5, 257)}, {T(H, -1, 1, 5, 257)}, NULL, NEAR, false},
    {"add of f32 into 16 bits", TR_OP_ADD, {0}, 2, 1, {T(H, -1, 1, 3), T(F, -1, 1, 3)}, {T(H, -1, 1, 3)}, NULL, NEAR,
     false},
    {"mul", TR_OP_MUL, {0}, 2, 1, {T(H, -2, 2, 7, 33), T(H, -2, 2, 7, 33)}, {T(H, -1, 1, 7, 33)}, NULL, NEAR, false},
    {"scale", TR_OP_SCALE, {.scale = {-0.3f}}, 1, 1, {T(H, -2, 2, 1)}, {T(H, -1, 1, 1)}, NULL, NEAR, false},
    {"relu", TR_OP_RELU, {0}, 1, 1, {T(H, -1, 1, 4, 257)}, {T(H, -1, 1, 4, 257)}, NULL, NEAR, false},
    {"relu_bwd", TR_OP_RELU_BWD, {0}, 2, 1, {T(H, -1, 1, 4, 9), T(H, -1, 1, 4, 9)}, {T(H, -1, 1, 4, 9)}, relu_zeros,
     NEAR, false},
    {"tanh", TR_OP_TANH, {0}, 1, 1, {T(H, -4, 4, 3, 257)}, {T(H, -1, 1, 3, 257)}, NULL, NEAR, false},
    {"tanh_bwd", TR_OP_TANH_BWD, {0}, 2, 1, {T(H, -1, 1, 4, 9), T(H, -0.99, 0.99, 4, 9)}, {T(H, -1, 1, 4, 9)}, NULL,
     NEAR, false},
    {"gelu", TR_OP_GELU, {.gelu = {0}}, 1, 1, {T(H, -4, 4, 7, 257)}, {T(H, -1, 1, 7, 257)}, NULL, NEAR, false},
    {"gelu, tanh form", TR_OP_GELU, {.gelu = {1}}, 1, 1, {T(H, -4, 4, 7, 257)}, {T(H, -1, 1, 7, 257)}, NULL, NEAR,
     false},
    {"gelu_bwd", TR_OP_GELU_BWD, {.gelu = {0}}, 2, 1, {T(H, -1, 1, 7, 33), T(H, -4, 4, 7, 33)}, {T(H, -1, 1, 7, 33)},
     NULL, NEAR, false},
    {"gelu_bwd, tanh form", TR_OP_GELU_BWD, {.gelu = {1}}, 2, 1, {T(H, -1, 1, 7, 33), T(H, -4, 4, 7, 33)},
     {T(H, -1, 1, 7, 33)}, NULL, NEAR, false},
    /* cast: any of f32, bf16, f16 to any, bit for bit */
    {"cast f32 → H", TR_OP_CAST, {0}, 1, 1, {T(F, -70000, 70000, 3, 257)}, {T(H, -1, 1, 3, 257)}, NULL, EXACT, false},
    {"cast small f32 → H (subnormals)", TR_OP_CAST, {0}, 1, 1, {T(F, -1e-6, 1e-6, 257)}, {T(H, -1e-6, 1e-6, 257)},
     NULL, EXACT, false},
    {"cast H → f32", TR_OP_CAST, {0}, 1, 1, {T(H, -3, 3, 3, 7)}, {T(F, -1, 1, 3, 7)}, NULL, EXACT, false},
    {"cast H → the other 16-bit type", TR_OP_CAST, {0}, 1, 1, {T(H, -3, 3, 257)}, {T(O, -1, 1, 257)}, NULL, EXACT,
     false},
    /* dropout: the CPU's mask, bit for bit */
    {"dropout [rows, positions, features]", TR_OP_DROPOUT, {.dropout = {0.25f, 7}}, 1, 1, {T(H, -1, 1, 3, 4, 10)},
     {T(H, -1, 1, 3, 4, 10)}, NULL, EXACT, false},
    {"dropout with sample ids, 257 features", TR_OP_DROPOUT, {.dropout = {0.5f, 3}}, 1, 1, {T(H, -1, 1, 5, 257)},
     {T(H, -1, 1, 5, 257)}, NULL, EXACT, true},
    {"dropout rank 4 with sample ids", TR_OP_DROPOUT, {.dropout = {0.1f, 11}}, 1, 1, {T(H, -1, 1, 2, 3, 2, 5)},
     {T(H, -1, 1, 2, 3, 2, 5)}, NULL, EXACT, true},
    {"dropout p = 0 (a copy)", TR_OP_DROPOUT, {.dropout = {0, 1}}, 1, 1, {T(H, -1, 1, 3, 5)}, {T(H, -1, 1, 3, 5)}, NULL,
     EXACT, false},
    /* softmax family */
    {"softmax", TR_OP_SOFTMAX, {0}, 1, 1, {T(H, -4, 4, 5, 17)}, {T(H, -1, 1, 5, 17)}, NULL, NEAR, false},
    {"softmax, 257 and 1 columns", TR_OP_SOFTMAX, {0}, 1, 1, {T(H, -4, 4, 3, 257)}, {T(H, -1, 1, 3, 257)}, NULL, NEAR,
     false},
    {"softmax, 1 column", TR_OP_SOFTMAX, {0}, 1, 1, {T(H, -4, 4, 4, 1)}, {T(H, -1, 1, 4, 1)}, NULL, NEAR, false},
    {"softmax, 2000 columns into f32", TR_OP_SOFTMAX, {0}, 1, 1, {T(H, -4, 4, 2, 2000)}, {T(F, -1, 1, 2, 2000)}, NULL,
     NEAR, false},
    {"softmax_bwd", TR_OP_SOFTMAX_BWD, {0}, 2, 1, {T(H, -1, 1, 5, 257), T(H, 0, 1, 5, 257)}, {T(H, -1, 1, 5, 257)},
     softmax_y, NEAR, false},
    {"log_softmax", TR_OP_LOG_SOFTMAX, {0}, 1, 1, {T(H, -4, 4, 3, 257)}, {T(H, -1, 1, 3, 257)}, NULL, NEAR, false},
    {"log_softmax_bwd", TR_OP_LOG_SOFTMAX_BWD, {0}, 2, 1, {T(H, -1, 1, 3, 257), T(H, -1, 0, 3, 257)},
     {T(H, -1, 1, 3, 257)}, log_softmax_y, NEAR, false},
    /* attention: odd S and D, causal or not, a padding mask with a batch row all padding */
    {"attention", TR_OP_ATTENTION, {.attention = {0, 0, 0}}, 3, 2,
     {T(H, -1, 1, 2, 3, 7, 8), T(H, -1, 1, 2, 3, 7, 8), T(H, -1, 1, 2, 3, 7, 8)},
     {T(H, -1, 1, 2, 3, 7, 8), T(F, 0, 1, 2, 3, 7)}, NULL, ATTN, false},
    {"attention, causal, S 33, D 64", TR_OP_ATTENTION, {.attention = {1, 0, 0}}, 3, 2,
     {T(H, -1, 1, 1, 2, 33, 64), T(H, -1, 1, 1, 2, 33, 64), T(H, -1, 1, 1, 2, 33, 64)},
     {T(H, -1, 1, 1, 2, 33, 64), T(F, 0, 1, 1, 2, 33)}, NULL, ATTN, false},
    {"attention, padding mask", TR_OP_ATTENTION, {.attention = {0, 1, 0}}, 4, 2,
     {T(H, -1, 1, 3, 2, 7, 8), T(H, -1, 1, 3, 2, 7, 8), T(H, -1, 1, 3, 2, 7, 8), T(U, 0, 2, 3, 7)},
     {T(H, -1, 1, 3, 2, 7, 8), T(F, 0, 1, 3, 2, 7)}, attn_padded, ATTN, false},
    {"attention, causal and padding mask, S 33", TR_OP_ATTENTION, {.attention = {1, 1, 0}}, 4, 2,
     {T(H, -2, 2, 2, 2, 33, 64), T(H, -2, 2, 2, 2, 33, 64), T(H, -1, 1, 2, 2, 33, 64), T(U, 0, 2, 2, 33)},
     {T(H, -1, 1, 2, 2, 33, 64), T(F, 0, 1, 2, 2, 33)}, attn_padded, ATTN, false},
    {"attention, scale 0.5 given (1/√4), D 4, o in f32", TR_OP_ATTENTION, {.attention = {0, 0, 0.5f}}, 3, 2,
     {T(H, -1, 1, 1, 2, 7, 4), T(H, -1, 1, 1, 2, 7, 4), T(H, -1, 1, 1, 2, 7, 4)},
     {T(F, -1, 1, 1, 2, 7, 4), T(F, 0, 1, 1, 2, 7)}, NULL, ATTN, false},
    {"attention, v in the other type (widened)", TR_OP_ATTENTION, {.attention = {1, 0, 0}}, 3, 2,
     {T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8), T(O, -1, 1, 1, 2, 7, 8)},
     {T(H, -1, 1, 1, 2, 7, 8), T(F, 0, 1, 1, 2, 7)}, NULL, ATTN, false},
    {"attention_bwd", TR_OP_ATTENTION_BWD, {.attention = {0, 0, 0}}, 6, 3,
     {T(H, -1, 1, 2, 3, 7, 8), T(H, -1, 1, 2, 3, 7, 8), T(H, -1, 1, 2, 3, 7, 8), T(H, -1, 1, 2, 3, 7, 8),
      T(H, 0, 0, 2, 3, 7, 8), T(F, 0, 0, 2, 3, 7)},
     {T(H, -1, 1, 2, 3, 7, 8), T(H, -1, 1, 2, 3, 7, 8), T(H, -1, 1, 2, 3, 7, 8)}, attn_o, ATTN, false},
    {"attention_bwd, causal, S 33, D 64", TR_OP_ATTENTION_BWD, {.attention = {1, 0, 0}}, 6, 3,
     {T(H, -1, 1, 1, 2, 33, 64), T(H, -1, 1, 1, 2, 33, 64), T(H, -1, 1, 1, 2, 33, 64), T(H, -1, 1, 1, 2, 33, 64),
      T(H, 0, 0, 1, 2, 33, 64), T(F, 0, 0, 1, 2, 33)},
     {T(H, -1, 1, 1, 2, 33, 64), T(H, -1, 1, 1, 2, 33, 64), T(H, -1, 1, 1, 2, 33, 64)}, attn_o_causal, ATTN, false},
    {"attention_bwd, padding mask", TR_OP_ATTENTION_BWD, {.attention = {0, 1, 0}}, 7, 3,
     {T(H, -1, 1, 3, 2, 7, 8), T(H, -1, 1, 3, 2, 7, 8), T(H, -1, 1, 3, 2, 7, 8), T(H, -1, 1, 3, 2, 7, 8),
      T(H, 0, 0, 3, 2, 7, 8), T(F, 0, 0, 3, 2, 7), T(U, 0, 2, 3, 7)},
     {T(H, -1, 1, 3, 2, 7, 8), T(H, -1, 1, 3, 2, 7, 8), T(H, -1, 1, 3, 2, 7, 8)}, attn_o, ATTN, false},
    {"attention_bwd, causal and padding mask, S 33", TR_OP_ATTENTION_BWD, {.attention = {1, 1, 0}}, 7, 3,
     {T(H, -1, 1, 2, 2, 33, 64), T(H, -2, 2, 2, 2, 33, 64), T(H, -2, 2, 2, 2, 33, 64), T(H, -1, 1, 2, 2, 33, 64),
      T(H, 0, 0, 2, 2, 33, 64), T(F, 0, 0, 2, 2, 33), T(U, 0, 2, 2, 33)},
     {T(H, -1, 1, 2, 2, 33, 64), T(H, -1, 1, 2, 2, 33, 64), T(H, -1, 1, 2, 2, 33, 64)}, attn_o_causal, ATTN, false},
    {"attention_bwd, f32 gradients", TR_OP_ATTENTION_BWD, {.attention = {1, 0, 0}}, 6, 3,
     {T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8),
      T(H, 0, 0, 1, 2, 7, 8), T(F, 0, 0, 1, 2, 7)},
     {T(F, -1, 1, 1, 2, 7, 8), T(F, -1, 1, 1, 2, 7, 8), T(F, -1, 1, 1, 2, 7, 8)}, attn_o_causal, ATTN, false},
    {"attention_bwd, f32 do (widened)", TR_OP_ATTENTION_BWD, {.attention = {0, 0, 0}}, 6, 3,
     {T(F, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8),
      T(H, 0, 0, 1, 2, 7, 8), T(F, 0, 0, 1, 2, 7)},
     {T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8), T(H, -1, 1, 1, 2, 7, 8)}, attn_o, ATTN, false},
    /* layer norm */
    {"layernorm", TR_OP_LAYERNORM, {.norm = {1e-5f}}, 3, 2, {T(H, -2, 2, 6, 257), T(F, 0.5, 1.5, 257), T(F, -1, 1, 257)},
     {T(H, -1, 1, 6, 257), T(F, 0, 1, 6, 2)}, NULL, NEAR, false},
    {"layernorm, 3 columns", TR_OP_LAYERNORM, {.norm = {1e-5f}}, 3, 2, {T(H, -2, 2, 1, 3), T(F, 0.5, 1.5, 3),
     T(F, -1, 1, 3)}, {T(H, -1, 1, 1, 3), T(F, 0, 1, 1, 2)}, NULL, NEAR, false},
    {"layernorm_bwd, 130 rows", TR_OP_LAYERNORM_BWD, {.norm = {1e-5f}}, 4, 3,
     {T(H, -1, 1, 130, 33), T(H, -2, 2, 130, 33), T(F, 0.5, 1.5, 33), T(F, 0, 0, 130, 2)},
     {T(H, -1, 1, 130, 33), T(F, -1, 1, 33), T(F, -1, 1, 33)}, ln_stats, NEAR, false},
    {"layernorm_bwd, 257 columns", TR_OP_LAYERNORM_BWD, {.norm = {1e-5f}}, 4, 3,
     {T(H, -1, 1, 3, 257), T(H, -2, 2, 3, 257), T(F, 0.5, 1.5, 257), T(F, 0, 0, 3, 2)},
     {T(H, -1, 1, 3, 257), T(F, -1, 1, 257), T(F, -1, 1, 257)}, ln_stats, NEAR, false},
    /* embedding: a copy forward, the CPU's additions in the CPU's order backward */
    {"embedding", TR_OP_EMBEDDING, {0}, 2, 1, {T(F, -1, 1, 10, 6), T(I, 0, 10, 2, 5)}, {T(H, -1, 1, 2, 5, 6)}, NULL,
     EXACT, false},
    {"embedding of a 16-bit table", TR_OP_EMBEDDING, {0}, 2, 1, {T(H, -1, 1, 7, 257), T(I, 0, 7, 3)},
     {T(H, -1, 1, 3, 257)}, NULL, EXACT, false},
    {"embedding_bwd, repeated ids", TR_OP_EMBEDDING_BWD, {0}, 2, 1, {T(H, -1, 1, 9, 6), T(I, 0, 4, 9)},
     {T(F, -1, 1, 10, 6)}, NULL, EXACT, false},
    {"embedding_bwd, 300 positions, 257 columns", TR_OP_EMBEDDING_BWD, {0}, 2, 1,
     {T(H, -1, 1, 3, 100, 257), T(I, 0, 7, 3, 100)}, {T(H, -1, 1, 7, 257)}, NULL, EXACT, false},
    /* cross-entropy: mean over targets ≠ −100, 0 when none */
    {"cross_entropy", TR_OP_CROSS_ENTROPY, {.cross_entropy = {-100, 0}}, 2, 1, {T(H, -3, 3, 6, 11), T(I, 0, 11, 6)},
     {T(F, -1, 1, 1)}, NULL, NEAR, false},
    {"cross_entropy with ignored rows, 257 classes", TR_OP_CROSS_ENTROPY, {.cross_entropy = {-100, 0}}, 2, 1,
     {T(H, -3, 3, 130, 257), T(I, 0, 257, 130)}, {T(F, -1, 1, 1)}, ce_ignore, NEAR, false},
    {"cross_entropy, every row ignored", TR_OP_CROSS_ENTROPY, {.cross_entropy = {-100, 0}}, 2, 1,
     {T(H, -3, 3, 4, 5), T(I, 0, 5, 4)}, {T(F, -1, 1, 1)}, ce_ignore_all, NEAR, false},
    {"cross_entropy_bwd", TR_OP_CROSS_ENTROPY_BWD, {.cross_entropy = {-100, 0}}, 3, 1,
     {T(F, 0.5, 1.5, 1), T(H, -3, 3, 130, 257), T(I, 0, 257, 130)}, {T(H, -1, 1, 130, 257)}, ce_bwd_ignore, NEAR,
     false},
    /* linear cross-entropy (x·wᵀ and the loss in one node, a chunk of rows at a time): odd D and
     * C, 3-row chunks of 10 rows, ignored rows, the f32 w of AMP beside 16-bit x, add_dw; x and w
     * on a grid (lce_grid), TF32's tolerance for what the GEMMs round (the dlogits) */
    {"linear_cross_entropy, 3-row chunks, ignored rows, 257 classes", TR_OP_LINEAR_CROSS_ENTROPY,
     {.cross_entropy = {-100, 3, 0}}, 3, 3, {T(H, -1, 1, 10, 33), T(H, -1, 1, 257, 33), T(I, 0, 257, 10)},
     {T(F, -1, 1, 1), T(F, -1, 1, 10), T(I, 0, 1, 10)}, lce_grid_ignore, TF32, false},
    {"linear_cross_entropy, f32 w, 257 features, the backend's chunk", TR_OP_LINEAR_CROSS_ENTROPY,
     {.cross_entropy = {-100, 0, 0}}, 3, 3, {T(H, -1, 1, 7, 257), T(F, -1, 1, 33, 257), T(I, 0, 33, 7)},
     {T(F, -1, 1, 1), T(F, -1, 1, 7), T(I, 0, 1, 7)}, lce_grid, TF32, false},
    {"linear_cross_entropy, every row ignored", TR_OP_LINEAR_CROSS_ENTROPY, {.cross_entropy = {-100, 3, 0}}, 3, 3,
     {T(H, -1, 1, 4, 5), T(H, -1, 1, 3, 5), T(I, 0, 3, 4)}, {T(F, -1, 1, 1), T(F, -1, 1, 4), T(I, 0, 1, 4)},
     lce_grid_ignore_all, TF32, false},
    {"linear_cross_entropy_bwd, 3-row chunks, ignored rows", TR_OP_LINEAR_CROSS_ENTROPY_BWD,
     {.cross_entropy = {-100, 3, 0}}, 5, 2,
     {T(F, 0.5, 1.5, 1), T(H, -1, 1, 10, 33), T(H, -1, 1, 257, 33), T(I, 0, 257, 10), T(F, 0, 0, 10)},
     {T(H, -1, 1, 10, 33), T(H, -1, 1, 257, 33)}, lce_bwd_ignore, TF32, false},
    {"linear_cross_entropy_bwd, add_dw into 16 bits, 3-row chunks", TR_OP_LINEAR_CROSS_ENTROPY_BWD,
     {.cross_entropy = {-100, 3, 1}}, 5, 2,
     {T(F, 0.5, 1.5, 1), T(H, -1, 1, 10, 33), T(H, -1, 1, 257, 33), T(I, 0, 257, 10), T(F, 0, 0, 10)},
     {T(H, -1, 1, 10, 33), T(H, -1, 1, 257, 33)}, lce_bwd_ignore, TF32, false},
    {"linear_cross_entropy_bwd, add_dw into f32 w's, 257 features", TR_OP_LINEAR_CROSS_ENTROPY_BWD,
     {.cross_entropy = {-100, 0, 1}}, 5, 2,
     {T(F, 0.5, 1.5, 1), T(H, -1, 1, 7, 257), T(F, -1, 1, 33, 257), T(I, 0, 33, 7), T(F, 0, 0, 7)},
     {T(H, -1, 1, 7, 257), T(F, -1, 1, 33, 257)}, lce_lse, TF32, false},
    {"linear_cross_entropy_bwd, every row ignored", TR_OP_LINEAR_CROSS_ENTROPY_BWD, {.cross_entropy = {-100, 3, 0}},
     5, 2, {T(F, 0.5, 1.5, 1), T(H, -1, 1, 4, 5), T(H, -1, 1, 3, 5), T(I, 0, 3, 4), T(F, 0, 0, 4)},
     {T(H, -1, 1, 4, 5), T(F, -1, 1, 3, 5)}, lce_bwd_ignore_all, TF32, false},
    /* data movement: bit for bit (the same dtype moves as it is; mixed floats round once) */
    {"accumulate", TR_OP_ACCUMULATE, {0}, 1, 1, {T(H, -1, 1, 3, 257)}, {T(H, -1, 1, 3, 257)}, NULL, EXACT, false},
    {"accumulate 16-bit into f32", TR_OP_ACCUMULATE, {0}, 1, 1, {T(H, -1, 1, 5, 7)}, {T(F, -1, 1, 5, 7)}, NULL, EXACT,
     false},
    {"permute (0 2 1 3)", TR_OP_PERMUTE, {.permute = {{0, 2, 1, 3}}}, 1, 1, {T(H, -1, 1, 2, 3, 5, 7)},
     {T(H, -1, 1, 2, 5, 3, 7)}, NULL, EXACT, false},
    {"permute (2 0 1)", TR_OP_PERMUTE, {.permute = {{2, 0, 1}}}, 1, 1, {T(H, -1, 1, 3, 5, 257)},
     {T(H, -1, 1, 257, 3, 5)}, NULL, EXACT, false},
    {"permute (1 0) f32 → 16-bit", TR_OP_PERMUTE, {.permute = {{1, 0}}}, 1, 1, {T(F, -1, 1, 33, 7)},
     {T(H, -1, 1, 7, 33)}, NULL, EXACT, false},
    {"permute of ids", TR_OP_PERMUTE, {.permute = {{1, 0}}}, 1, 1, {T(I, -50, 50, 3, 5)}, {T(I, 0, 1, 5, 3)}, NULL,
     EXACT, false},
    {"slice axis 0", TR_OP_SLICE, {.slice = {0, 1}}, 1, 1, {T(H, -1, 1, 5, 3, 7)}, {T(H, -1, 1, 3, 3, 7)}, NULL,
     EXACT, false},
    {"slice axis 1", TR_OP_SLICE, {.slice = {1, 2}}, 1, 1, {T(H, -1, 1, 3, 5, 7)}, {T(H, -1, 1, 3, 2, 7)}, NULL,
     EXACT, false},
    {"slice axis 2, 257 wide", TR_OP_SLICE, {.slice = {2, 100}}, 1, 1, {T(H, -1, 1, 3, 2, 257)},
     {T(H, -1, 1, 3, 2, 157)}, NULL, EXACT, false},
    {"slice 16-bit → f32", TR_OP_SLICE, {.slice = {1, 0}}, 1, 1, {T(H, -1, 1, 3, 5)}, {T(F, -1, 1, 3, 4)}, NULL,
     EXACT, false},
    {"slice of ids", TR_OP_SLICE, {.slice = {0, 2}}, 1, 1, {T(I, -50, 50, 5, 3)}, {T(I, 0, 1, 2, 3)}, NULL, EXACT,
     false},
    {"slice_bwd axis 0", TR_OP_SLICE_BWD, {.slice = {0, 1}}, 1, 1, {T(H, -1, 1, 3, 3, 7)}, {T(H, -1, 1, 5, 3, 7)},
     NULL, EXACT, false},
    {"slice_bwd axis 1", TR_OP_SLICE_BWD, {.slice = {1, 3}}, 1, 1, {T(H, -1, 1, 3, 2, 7)}, {T(H, -1, 1, 3, 5, 7)},
     NULL, EXACT, false},
    {"slice_bwd axis 2, into f32", TR_OP_SLICE_BWD, {.slice = {2, 0}}, 1, 1, {T(H, -1, 1, 3, 2, 100)},
     {T(F, -1, 1, 3, 2, 257)}, NULL, EXACT, false},
    {"concat axis 0, three inputs", TR_OP_CONCAT, {.axis = {0, 0}}, 3, 1,
     {T(H, -1, 1, 2, 3, 7), T(H, -1, 1, 1, 3, 7), T(H, -1, 1, 4, 3, 7)}, {T(H, -1, 1, 7, 3, 7)}, NULL, EXACT, false},
    {"concat axis 1", TR_OP_CONCAT, {.axis = {1, 0}}, 2, 1, {T(H, -1, 1, 3, 2, 7), T(H, -1, 1, 3, 5, 7)},
     {T(H, -1, 1, 3, 7, 7)}, NULL, EXACT, false},
    {"concat axis 2, mixed dtypes", TR_OP_CONCAT, {.axis = {2, 0}}, 3, 1,
     {T(H, -1, 1, 3, 2, 100), T(F, -1, 1, 3, 2, 157), T(H, -1, 1, 3, 2, 1)}, {T(H, -1, 1, 3, 2, 258)}, NULL, EXACT,
     false},
    {"concat of ids", TR_OP_CONCAT, {.axis = {1, 0}}, 2, 1, {T(I, -50, 50, 3, 2), T(I, -50, 50, 3, 5)},
     {T(I, 0, 1, 3, 7)}, NULL, EXACT, false},
    {"masked_fill, a row mask", TR_OP_MASKED_FILL, {.fill = {-1e4f}}, 2, 1, {T(H, -1, 1, 5, 257), T(U, 0, 2, 5)},
     {T(H, -1, 1, 5, 257)}, NULL, EXACT, false},
    {"masked_fill, a [B, S] mask", TR_OP_MASKED_FILL, {.fill = {0.1f}}, 2, 1, {T(H, -1, 1, 3, 7, 5), T(U, 0, 2, 3, 7)},
     {T(H, -1, 1, 3, 7, 5)}, NULL, EXACT, false},
    {"masked_fill with 0, every element", TR_OP_MASKED_FILL, {.fill = {0}}, 2, 1, {T(H, -1, 1, 3, 7), T(U, 0, 2, 3, 7)},
     {T(H, -1, 1, 3, 7)}, NULL, EXACT, false},
    {"gather", TR_OP_GATHER, {0}, 2, 1, {T(H, -1, 1, 10, 257), T(I, 0, 10, 13)}, {T(H, -1, 1, 13, 257)}, NULL, EXACT,
     false},
    {"gather_bwd, repeated ids", TR_OP_GATHER_BWD, {.gather = {11}}, 2, 1, {T(H, -1, 1, 300, 7), T(I, 0, 11, 300)},
     {T(H, -1, 1, 11, 7)}, NULL, EXACT, false},
    /* reductions: double sums in the CPU's order, so bit for bit too */
    {"sum axis 0", TR_OP_SUM, {.axis = {0, 0}}, 1, 1, {T(H, -1, 1, 130, 3, 7)}, {T(H, -1, 1, 1, 3, 7)}, NULL, EXACT,
     false},
    {"sum axis 1", TR_OP_SUM, {.axis = {1, 0}}, 1, 1, {T(H, -1, 1, 3, 257, 5)}, {T(F, -1, 1, 3, 1, 5)}, NULL, EXACT,
     false},
    {"sum axis 2", TR_OP_SUM, {.axis = {2, 0}}, 1, 1, {T(H, -1, 1, 3, 5, 257)}, {T(H, -1, 1, 3, 5, 1)}, NULL, EXACT,
     false},
    {"sum of all", TR_OP_SUM, {.axis = {-1, 0}}, 1, 1, {T(H, -1, 1, 7, 1001)}, {T(F, -1, 1, 1)}, NULL, EXACT, false},
    {"sum of all, 5 elements (empty chunks)", TR_OP_SUM, {.axis = {-1, 0}}, 1, 1, {T(H, -1, 1, 5)}, {T(H, -1, 1, 1)},
     NULL, EXACT, false},
    {"mean axis 1", TR_OP_MEAN, {.axis = {1, 0}}, 1, 1, {T(H, -1, 1, 3, 257, 5)}, {T(H, -1, 1, 3, 1, 5)}, NULL, EXACT,
     false},
    {"mean of all", TR_OP_MEAN, {.axis = {-1, 0}}, 1, 1, {T(H, -1, 1, 3, 333)}, {T(F, -1, 1, 1)}, NULL, EXACT, false},
    {"sum_bwd axis 0", TR_OP_SUM_BWD, {.axis = {0, 0}}, 1, 1, {T(H, -1, 1, 1, 3, 7)}, {T(H, -1, 1, 5, 3, 7)}, NULL,
     EXACT, false},
    {"sum_bwd axis 2, mean", TR_OP_SUM_BWD, {.axis = {2, 1}}, 1, 1, {T(F, -1, 1, 3, 5, 1)}, {T(H, -1, 1, 3, 5, 7)},
     NULL, EXACT, false},
    {"sum_bwd of all, mean", TR_OP_SUM_BWD, {.axis = {-1, 1}}, 1, 1, {T(F, -1, 1, 1)}, {T(H, -1, 1, 3, 257)}, NULL,
     EXACT, false},
    {"argmax with ties", TR_OP_ARGMAX, {0}, 1, 1, {T(H, -1, 1, 6, 257)}, {T(I, 0, 1, 6)}, argmax_ties, EXACT, false},
    {"argmax, 1 column", TR_OP_ARGMAX, {0}, 1, 1, {T(H, -1, 1, 2, 3, 1)}, {T(I, 0, 1, 2, 3)}, NULL, EXACT, false},
    /* pooling: backwards gather their windows in the CPU's scatter order, bit for bit */
    {"maxpool 3/2/1", TR_OP_MAXPOOL, {.pool = {3, 2, 1}}, 1, 2, {T(H, -3, 3, 2, 3, 9, 11)},
     {T(H, -1, 1, 2, 3, 5, 6), T(I, 0, 1, 2, 3, 5, 6)}, NULL, EXACT, false},
    {"maxpool 2/2/0", TR_OP_MAXPOOL, {.pool = {2, 2, 0}}, 1, 2, {T(H, -3, 3, 1, 2, 7, 7)},
     {T(F, -1, 1, 1, 2, 3, 3), T(I, 0, 1, 1, 2, 3, 3)}, NULL, EXACT, false},
    {"maxpool_bwd 3/2/1 (overlapping windows)", TR_OP_MAXPOOL_BWD, {.pool = {3, 2, 1}}, 2, 1,
     {T(H, -1, 1, 2, 3, 5, 6), T(I, 0, 1, 2, 3, 5, 6)}, {T(H, -1, 1, 2, 3, 9, 11)}, maxpool_argmax, EXACT, false},
    {"avgpool 3/2/1", TR_OP_AVGPOOL, {.pool = {3, 2, 1}}, 1, 1, {T(H, -3, 3, 2, 3, 9, 11)}, {T(H, -1, 1, 2, 3, 5, 6)},
     NULL, EXACT, false},
    {"avgpool 2/2/0 into f32", TR_OP_AVGPOOL, {.pool = {2, 2, 0}}, 1, 1, {T(H, -3, 3, 1, 2, 7, 7)},
     {T(F, -1, 1, 1, 2, 3, 3)}, NULL, EXACT, false},
    {"avgpool_bwd 3/2/1", TR_OP_AVGPOOL_BWD, {.pool = {3, 2, 1}}, 1, 1, {T(H, -1, 1, 2, 3, 5, 6)},
     {T(H, -1, 1, 2, 3, 9, 11)}, NULL, EXACT, false},
    {"avgpool_bwd 3/1/1", TR_OP_AVGPOOL_BWD, {.pool = {3, 1, 1}}, 1, 1, {T(F, -1, 1, 1, 2, 7, 5)},
     {T(H, -1, 1, 1, 2, 7, 5)}, NULL, EXACT, false},
    {"global_avgpool", TR_OP_GLOBAL_AVGPOOL, {0}, 1, 1, {T(H, -3, 3, 2, 3, 17, 15)}, {T(H, -1, 1, 2, 3)}, NULL, EXACT,
     false},
    {"global_avgpool_bwd", TR_OP_GLOBAL_AVGPOOL_BWD, {0}, 1, 1, {T(H, -1, 1, 2, 3)}, {T(F, -1, 1, 2, 3, 5, 7)}, NULL,
     EXACT, false},
    /* convolutions through cuDNN: x [2, 3, 9, 11], w [5, 3, k, k]; f32 weights beside 16-bit
     * activations (AMP: widened to f32) or all of one dtype (cuDNN's own 16-bit path); TF32 */
    {"conv2d 3×3/1/1", TR_OP_CONV2D, {.conv = {1, 1}}, 2, 1, {T(H, -1, 1, 2, 3, 9, 11), T(F, -1, 1, 5, 3, 3, 3)},
     {T(H, -1, 1, 2, 5, 9, 11)}, NULL, TF32, false},
    {"conv2d 3×3/2/0", TR_OP_CONV2D, {.conv = {2, 0}}, 2, 1, {T(H, -1, 1, 2, 3, 9, 11), T(F, -1, 1, 5, 3, 3, 3)},
     {T(H, -1, 1, 2, 5, 4, 5)}, NULL, TF32, false},
    {"conv2d 3×3/2/1 into f32", TR_OP_CONV2D, {.conv = {2, 1}}, 2, 1,
     {T(H, -1, 1, 2, 3, 9, 11), T(F, -1, 1, 5, 3, 3, 3)}, {T(F, -1, 1, 2, 5, 5, 6)}, NULL, TF32, false},
    {"conv2d 1×1/1/0, one dtype", TR_OP_CONV2D, {.conv = {1, 0}}, 2, 1,
     {T(H, -1, 1, 2, 3, 9, 11), T(H, -1, 1, 5, 3, 1, 1)}, {T(H, -1, 1, 2, 5, 9, 11)}, NULL, TF32, false},
    {"conv2d 1×1/2/0", TR_OP_CONV2D, {.conv = {2, 0}}, 2, 1, {T(H, -1, 1, 2, 3, 9, 11), T(F, -1, 1, 5, 3, 1, 1)},
     {T(H, -1, 1, 2, 5, 5, 6)}, NULL, TF32, false},
    {"conv2d_bwd_data 3×3/1/1", TR_OP_CONV2D_BWD_DATA, {.conv = {1, 1}}, 2, 1,
     {T(H, -1, 1, 2, 5, 9, 11), T(F, -1, 1, 5, 3, 3, 3)}, {T(H, -1, 1, 2, 3, 9, 11)}, NULL, TF32, false},
    {"conv2d_bwd_data 3×3/2/1", TR_OP_CONV2D_BWD_DATA, {.conv = {2, 1}}, 2, 1,
     {T(H, -1, 1, 2, 5, 5, 6), T(F, -1, 1, 5, 3, 3, 3)}, {T(H, -1, 1, 2, 3, 9, 11)}, NULL, TF32, false},
    {"conv2d_bwd_data 3×3/2/0 into f32", TR_OP_CONV2D_BWD_DATA, {.conv = {2, 0}}, 2, 1,
     {T(H, -1, 1, 2, 5, 4, 5), T(F, -1, 1, 5, 3, 3, 3)}, {T(F, -1, 1, 2, 3, 9, 11)}, NULL, TF32, false},
    {"conv2d_bwd_data 1×1/2/0, one dtype", TR_OP_CONV2D_BWD_DATA, {.conv = {2, 0}}, 2, 1,
     {T(H, -1, 1, 2, 5, 5, 6), T(H, -1, 1, 5, 3, 1, 1)}, {T(H, -1, 1, 2, 3, 9, 11)}, NULL, TF32, false},
    {"conv2d_bwd_filter 3×3/1/1", TR_OP_CONV2D_BWD_FILTER, {.conv = {1, 1}}, 2, 1,
     {T(H, -1, 1, 2, 5, 9, 11), T(H, -1, 1, 2, 3, 9, 11)}, {T(F, -1, 1, 5, 3, 3, 3)}, NULL, TF32, false},
    {"conv2d_bwd_filter 3×3/2/0", TR_OP_CONV2D_BWD_FILTER, {.conv = {2, 0}}, 2, 1,
     {T(H, -1, 1, 2, 5, 4, 5), T(H, -1, 1, 2, 3, 9, 11)}, {T(F, -1, 1, 5, 3, 3, 3)}, NULL, TF32, false},
    {"conv2d_bwd_filter 3×3/2/1", TR_OP_CONV2D_BWD_FILTER, {.conv = {2, 1}}, 2, 1,
     {T(H, -1, 1, 2, 5, 5, 6), T(H, -1, 1, 2, 3, 9, 11)}, {T(F, -1, 1, 5, 3, 3, 3)}, NULL, TF32, false},
    {"conv2d_bwd_filter 1×1/2/0, one dtype", TR_OP_CONV2D_BWD_FILTER, {.conv = {2, 0}}, 2, 1,
     {T(H, -1, 1, 2, 5, 5, 6), T(H, -1, 1, 2, 3, 9, 11)}, {T(H, -1, 1, 5, 3, 1, 1)}, NULL, TF32, false},
    /* batch norm: cuDNN's f32 sums against the CPU's double ones; the running statistics (inputs
     * 3 and 4, updated in place in training) compared too; eval is our kernels */
    {"batchnorm training [2, 3, 9, 11]", TR_OP_BATCHNORM, {.batchnorm = {1e-5f, 0.1f, 1}}, 5, 2,
     {T(H, -2, 2, 2, 3, 9, 11), T(F, 0.5, 1.5, 3), T(F, -1, 1, 3), T(F, -0.5, 0.5, 3), T(F, 0.5, 1.5, 3)},
     {T(H, -1, 1, 2, 3, 9, 11), T(F, 0, 1, 2, 3)}, NULL, NEAR, false},
    {"batchnorm training [13, 5]", TR_OP_BATCHNORM, {.batchnorm = {1e-3f, 0.3f, 1}}, 5, 2,
     {T(H, 1, 3, 13, 5), T(F, 0.5, 1.5, 5), T(F, -1, 1, 5), T(F, -0.5, 0.5, 5), T(F, 0.5, 1.5, 5)},
     {T(F, -1, 1, 13, 5), T(F, 0, 1, 2, 5)}, NULL, NEAR, false},
    {"batchnorm training, momentum 0 (running statistics kept)", TR_OP_BATCHNORM, {.batchnorm = {1e-5f, 0, 1}}, 5, 2,
     {T(H, -2, 2, 2, 3, 9, 11), T(F, 0.5, 1.5, 3), T(F, -1, 1, 3), T(F, -0.5, 0.5, 3), T(F, 0.5, 1.5, 3)},
     {T(H, -1, 1, 2, 3, 9, 11), T(F, 0, 1, 2, 3)}, NULL, NEAR, false},
    {"batchnorm eval [2, 3, 9, 11]", TR_OP_BATCHNORM, {.batchnorm = {1e-5f, 0.1f, 0}}, 5, 2,
     {T(H, -2, 2, 2, 3, 9, 11), T(F, 0.5, 1.5, 3), T(F, -1, 1, 3), T(F, -0.5, 0.5, 3), T(F, 0.5, 1.5, 3)},
     {T(H, -1, 1, 2, 3, 9, 11), T(F, 0, 1, 2, 3)}, NULL, NEAR, false},
    {"batchnorm eval [13, 5], 16-bit running statistics", TR_OP_BATCHNORM, {.batchnorm = {1e-5f, 0.1f, 0}}, 5, 2,
     {T(H, -2, 2, 13, 5), T(F, 0.5, 1.5, 5), T(F, -1, 1, 5), T(H, -0.5, 0.5, 5), T(H, 0.5, 1.5, 5)},
     {T(H, -1, 1, 13, 5), T(F, 0, 1, 2, 5)}, NULL, NEAR, false},
    {"batchnorm_bwd [2, 3, 9, 11]", TR_OP_BATCHNORM_BWD, {.batchnorm = {1e-5f, 0.1f, 1}}, 4, 3,
     {T(H, -1, 1, 2, 3, 9, 11), T(H, -2, 2, 2, 3, 9, 11), T(F, 0.5, 1.5, 3), T(F, 0, 0, 2, 3)},
     {T(H, -1, 1, 2, 3, 9, 11), T(F, -1, 1, 3), T(F, -1, 1, 3)}, bn_saved, NEAR, false},
    {"batchnorm_bwd [13, 5]", TR_OP_BATCHNORM_BWD, {.batchnorm = {1e-5f, 0.1f, 1}}, 4, 3,
     {T(H, -1, 1, 13, 5), T(H, 1, 3, 13, 5), T(F, 0.5, 1.5, 5), T(F, 0, 0, 2, 5)},
     {T(F, -1, 1, 13, 5), T(F, -1, 1, 5), T(F, -1, 1, 5)}, bn_saved, NEAR, false},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- running and comparing ---------------------------------------------------------------------- */

static void *device_bytes(const void *host, size_t bytes)
{
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes ? bytes : 1), cudaSuccess);
    if (bytes)
        ck_assert_int_eq(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void *device_copy(const struct tr_tensor *t)
{
    return device_bytes(t->data, tr_tensor_bytes(t));
}

/* Runs the node on the GPU on copies of in and out (out: what accumulate adds to); the outputs
 * come back into got, and the inputs it writes in place into got_in[i] where got_in[i].data is
 * set (got_in NULL: none). Returns the kernel's code, its sentence in error. */
static int gpu_run_inout(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                         struct tr_tensor *got, struct tr_tensor *got_in, const struct tr_rng_ctx *host_rng, char *error)
{
    struct tr_kernel_args a = {.node = node, .nin = node->nin, .nout = node->nout};
    for (int i = 0; i < node->nin; i++)
        a.in[i] = in[i], a.in[i].data = device_copy(&in[i]);
    for (int i = 0; i < node->nout; i++)
        a.out[i] = out[i], a.out[i].data = device_copy(&out[i]);
    a.workspace_bytes = tr_cuda_ops.workspace_bytes(node, a.in, a.out);
    if (a.workspace_bytes)
        ck_assert_int_eq(cudaMalloc(&a.workspace, a.workspace_bytes), cudaSuccess);
    a.rng = host_rng;   /* the sample ids are host memory (cuda.h): dropout copies them over */
    int rc = gc_kernel(cuda(), &a, error);
    struct tr_diag sync = {0};
    ck_assert_msg(tr_backend_synchronize(cuda(), &sync) == 0, "%s", tr_diag_last(&sync));
    for (int i = 0; i < node->nout; i++) {
        ck_assert_int_eq(cudaMemcpy(got[i].data, a.out[i].data, tr_tensor_bytes(&got[i]), cudaMemcpyDeviceToHost),
                         cudaSuccess);
        cudaFree(a.out[i].data);
    }
    for (int i = 0; i < node->nin; i++) {
        if (got_in && got_in[i].data)
            ck_assert_int_eq(cudaMemcpy(got_in[i].data, a.in[i].data, tr_tensor_bytes(&got_in[i]), cudaMemcpyDeviceToHost),
                             cudaSuccess);
        cudaFree(a.in[i].data);
    }
    cudaFree(a.workspace);
    return rc;
}

static int gpu_run(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                   struct tr_tensor *got, const struct tr_rng_ctx *host_rng, char *error)
{
    return gpu_run_inout(node, in, out, got, NULL, host_rng, error);
}

/* Inputs a node writes in place: batch norm's running statistics, in training. */
static bool input_is_written(const struct op_case *c, int i)
{
    return c->op == TR_OP_BATCHNORM && c->at.batchnorm.training && (i == 3 || i == 4);
}

/* The unit roundoff (half an ulp, relative) and one ulp of |w| in a 16-bit type. */
static double unit_roundoff(enum tr_dtype t) { return t == TR_BF16 ? 0x1p-8 : 0x1p-11; }
static double ulp16(enum tr_dtype t, double w)
{
    int e;
    frexp(w, &e);   /* |w| = m·2^e, m in [0.5, 1) */
    int bits = t == TR_BF16 ? 8 : 11, min_exp = t == TR_BF16 ? -125 : -13;
    return ldexp(1, (e > min_exp ? e : min_exp) - bits);
}

static void compare(const struct op_case *c, const char *variant, int k, const struct tr_tensor *got,
                    const struct tr_tensor *want, enum compare how, enum tr_dtype half)
{
    int64_t n = tr_tensor_numel(want);
    if (how == EXACT || want->dtype == TR_I32) {
        for (int64_t i = 0; i < n; i++) {
            size_t size = tr_dtype_size(want->dtype);
            ck_assert_msg(memcmp((char *)got->data + i * size, (char *)want->data + i * size, size) == 0,
                          "%s %s: output %d element %lld is %.9g, the CPU's %.9g (bit for bit expected)", c->name,
                          variant, k, (long long)i, want->dtype == TR_I32 ? 0 : get(got, i),
                          want->dtype == TR_I32 ? 0 : get(want, i));
        }
        return;
    }
    double diff = 0, norm = 0, maxabs = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = get(got, i), w = get(want, i);
        if (isinf(w) && g == w)   /* attention's lse of a row that sees no key: −∞ */
            continue;
        ck_assert_msg(isfinite(g) && isfinite(w), "%s %s: output %d element %lld: %g and %g", c->name, variant, k,
                      (long long)i, g, w);
        diff += (g - w) * (g - w), norm += w * w;
        maxabs = fabs(w) > maxabs ? fabs(w) : maxabs;
    }
    double normwise = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    if (want->dtype == TR_F32 || how == TF32 || how == ATTN) {
        double tol = how == ATTN              ? 8 * (half == TR_F32 ? 0x1p-11 : unit_roundoff(half))
                     : want->dtype == TR_F32 ? (how == TF32 ? 2e-3 : 1e-5)
                                             : 4 * unit_roundoff(want->dtype);
        ck_assert_msg(normwise <= tol, "%s %s: output %d is %.3g from the CPU's (normwise), over %.3g", c->name,
                      variant, k, normwise, tol);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double g = get(got, i), w = get(want, i), tol = 2 * ulp16(want->dtype, fabs(w)) + 1e-4 * maxabs;
        ck_assert_msg(fabs(g - w) <= tol, "%s %s: output %d element %lld is %.9g, the CPU's %.9g (tolerance %.3g)",
                      c->name, variant, k, (long long)i, g, w, tol);
    }
}

/* One case in one type, overwriting or accumulating. */
static void check_case(const struct op_case *c, enum tr_dtype half, int acc)
{
    char variant[64];
    snprintf(variant, sizeof variant, "%s, %s", tr_dtype_name(half), acc ? "accumulating" : "overwriting");
    uint64_t seed = 5000 + 31 * (uint64_t)(c - cases);
    struct set s = {0};
    for (int i = 0; i < c->nin; i++)
        s.in[i] = make(&c->in[i], half, &seed, true);
    for (int i = 0; i < c->nout; i++)
        s.out[i] = make(&c->out[i], half, &seed, true);   /* what accumulate adds to */
    if (c->prepare)
        c->prepare(&s);
    struct tr_node node = {.op = c->op, .attrs = c->at, .nin = c->nin, .nout = c->nout, .accumulate = (uint8_t)acc};
    int64_t sample_ids[64];
    for (int r = 0; r < 64; r++)
        sample_ids[r] = 1000 + 7 * r;
    struct tr_rng_ctx rng = {.seed = 1234, .step = 17, .sample_ids = c->sample_ids ? sample_ids : NULL};
    struct tr_tensor want[TR_MAX_OUT], got[TR_MAX_OUT], start[TR_MAX_OUT];
    for (int i = 0; i < c->nout; i++)
        want[i] = clone(&s.out[i]), got[i] = clone(&s.out[i]), start[i] = s.out[i];
    struct tr_tensor cpu_in[TR_MAX_IN], got_in[TR_MAX_IN] = {{0}};   /* in-place inputs: a copy each */
    for (int i = 0; i < c->nin; i++) {
        cpu_in[i] = input_is_written(c, i) ? clone(&s.in[i]) : s.in[i];
        if (input_is_written(c, i))
            got_in[i] = clone(&s.in[i]);
    }
    cpu_run(&node, cpu_in, want, &rng);
    char error[GC_ERROR_MAX] = "";
    int rc = gpu_run_inout(&node, s.in, start, got, got_in, &rng, error);
    ck_assert_msg(rc == 0, "%s %s: %s", c->name, variant, error);
    enum compare how = c->compare;
    if (how == TF32 && c->op == TR_OP_MATMUL && s.in[0].dtype != TR_F32 && s.in[1].dtype != TR_F32 &&
        s.in[0].dtype == s.in[1].dtype)
        how = NEAR;   /* two 16-bit operands: exact products, f32 sums */
    for (int i = 0; i < c->nout; i++) {
        compare(c, variant, i, &got[i], &want[i], how, half);
        gc_free(&want[i]), gc_free(&got[i]), gc_free(&s.out[i]);
    }
    for (int i = 0; i < c->nin; i++) {
        if (got_in[i].data) {
            char in_place[96];
            snprintf(in_place, sizeof in_place, "%s, input %d written in place", variant, i);
            compare(c, in_place, i, &got_in[i], &cpu_in[i], how, half);
            gc_free(&got_in[i]), gc_free(&cpu_in[i]);
        }
        gc_free(&s.in[i]);
    }
}

START_TEST(ops_match_the_cpu)
{
    static const enum tr_dtype types[] = {TR_F32, TR_BF16, TR_F16};
    const struct op_case *c = &cases[_i / 3];
    enum tr_dtype half = types[_i % 3];
    check_case(c, half, 0);
    check_case(c, half, 1);
}
END_TEST

/* An id or target out of range fails with the CPU's sentence, before any output is written. */
static void expect_refusals(enum tr_op op, int nin, struct tr_tensor *in, int nout, struct tr_tensor *out)
{
    struct tr_node node = {.op = op, .attrs.cross_entropy = {-100, 0}, .nin = nin, .nout = nout};
    char cpu_error[GC_ERROR_MAX] = "", gpu_error[GC_ERROR_MAX] = "";
    struct tr_kernel_args a = {.node = &node, .nin = nin, .nout = nout};
    memcpy(a.in, in, (size_t)nin * sizeof *in);
    memcpy(a.out, out, (size_t)nout * sizeof *out);
    ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &a, cpu_error), TR_EINVAL);
    struct tr_tensor got[TR_MAX_OUT];
    for (int i = 0; i < nout; i++)
        got[i] = clone(&out[i]);
    ck_assert_int_eq(gpu_run(&node, in, out, got, NULL, gpu_error), TR_EINVAL);
    ck_assert_str_eq(gpu_error, cpu_error);
    for (int i = 0; i < nout; i++) {
        ck_assert_int_eq(memcmp(got[i].data, out[i].data, tr_tensor_bytes(&got[i])), 0);
        gc_free(&got[i]);
    }
}
static void expect_refusal(enum tr_op op, int nin, struct tr_tensor *in, struct tr_tensor *out)
{
    expect_refusals(op, nin, in, 1, out);
}

START_TEST(bad_ids_refused)
{
    struct tr_tensor table = gc_make(TR_F32, 5, 3), ids = gc_make(TR_I32, 6), y = gc_make(TR_F32, 6, 3);
    int32_t values[6] = {0, 4, 2, 5, 1, -1};   /* position 3 is the first bad one */
    memcpy(ids.data, values, sizeof values);
    expect_refusal(TR_OP_EMBEDDING, 2, (struct tr_tensor[]){table, ids}, &y);
    struct tr_tensor dy = gc_make(TR_F32, 6, 3);
    expect_refusal(TR_OP_EMBEDDING_BWD, 2, (struct tr_tensor[]){dy, ids}, &table);
    expect_refusal(TR_OP_GATHER, 2, (struct tr_tensor[]){table, ids}, &y);   /* "outside the 5 rows of x" */
    expect_refusal(TR_OP_GATHER_BWD, 2, (struct tr_tensor[]){dy, ids}, &table);
    struct tr_tensor logits = gc_make(TR_F32, 6, 5), loss = gc_make(TR_F32, 1), dloss = gc_make(TR_F32, 1);
    values[3] = -100, values[5] = 7;   /* −100 is ignored; 7 at row 5 is outside the 5 classes */
    memcpy(ids.data, values, sizeof values);
    expect_refusal(TR_OP_CROSS_ENTROPY, 2, (struct tr_tensor[]){logits, ids}, &loss);
    struct tr_tensor dlogits = gc_make(TR_F32, 6, 5);
    expect_refusal(TR_OP_CROSS_ENTROPY_BWD, 3, (struct tr_tensor[]){dloss, logits, ids}, &dlogits);
    struct tr_tensor x = gc_make(TR_F32, 6, 3), w = gc_make(TR_F32, 5, 3), lse = gc_make(TR_F32, 6),
                     rank = gc_make(TR_I32, 6), dx = gc_make(TR_F32, 6, 3), dw = gc_make(TR_F32, 5, 3);
    expect_refusals(TR_OP_LINEAR_CROSS_ENTROPY, 3, (struct tr_tensor[]){x, w, ids}, 3,
                    (struct tr_tensor[]){loss, lse, rank});
    expect_refusals(TR_OP_LINEAR_CROSS_ENTROPY_BWD, 5, (struct tr_tensor[]){dloss, x, w, ids, lse}, 2,
                    (struct tr_tensor[]){dx, dw});
    gc_free(&table), gc_free(&ids), gc_free(&y), gc_free(&dy), gc_free(&logits), gc_free(&loss), gc_free(&dloss),
        gc_free(&dlogits);
    gc_free(&x), gc_free(&w), gc_free(&lse), gc_free(&rank), gc_free(&dx), gc_free(&dw);
}
END_TEST

/* maxpool_bwd's argmax indices outside [−1, H·W) are counted and refused with the CPU's sentence. */
START_TEST(bad_argmax_refused)
{
    struct tr_node node = {.op = TR_OP_MAXPOOL_BWD, .attrs.pool = {2, 2, 0}, .nin = 2, .nout = 1};
    struct tr_tensor dy = gc_make(TR_F32, 1, 1, 2, 2), argmax = gc_make(TR_I32, 1, 1, 2, 2),
                     dx = gc_make(TR_F32, 1, 1, 4, 4);
    int32_t values[4] = {0, -2, 16, -1};   /* −2 and 16 are bad; −1 is a window of padding alone */
    memcpy(argmax.data, values, sizeof values);
    char cpu_error[GC_ERROR_MAX] = "", gpu_error[GC_ERROR_MAX] = "";
    struct tr_kernel_args a = {.node = &node, .in = {dy, argmax}, .out = {dx}, .nin = 2, .nout = 1};
    ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &a, cpu_error), TR_EINVAL);
    ck_assert_str_eq(cpu_error, "maxpool_bwd: 2 argmax indices fall outside the 4×4 plane");
    struct tr_tensor got = clone(&dx);
    ck_assert_int_eq(gpu_run(&node, (struct tr_tensor[]){dy, argmax}, &dx, &got, NULL, gpu_error), TR_EINVAL);
    ck_assert_str_eq(gpu_error, cpu_error);
    gc_free(&dy), gc_free(&argmax), gc_free(&dx), gc_free(&got);
}
END_TEST

/* A workspace smaller than workspace_bytes says so, and nothing runs. */
START_TEST(short_workspace_refused)
{
    struct tr_node n = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1};
    struct tr_tensor a = {.dtype = TR_F32, .rank = 2, .dim = {4, 3}}, b = {.dtype = TR_F32, .rank = 2, .dim = {3, 5}},
                     y = {.dtype = TR_F32, .rank = 2, .dim = {4, 5}};
    char error[GC_ERROR_MAX] = "";
    struct tr_kernel_args k = {.node = &n, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
    ck_assert_int_eq(gc_kernel(cuda(), &k, error), TR_EINVAL);
    ck_assert_str_eq(error, "matmul: needs 33554432 bytes of workspace, has 0");
}
END_TEST

/* ---- the memory and optimizer entries ------------------------------------------------------ */

static void *device_region(const struct tr_backend *be, size_t bytes)
{
    void *p = be->memory->alloc(bytes, be->memory->ctx);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Regions start zeroed; copies in the three directions and fills keep the stream's order; a
 * copy ahead starts after what the stream held when it was queued (a fill of its destination
 * before it does not land on top of it; a commit reading the staging before it reads the old
 * bytes) and join orders what follows after it. The loader's memory is page-locked. */
START_TEST(memory_entries)
{
    const struct tr_backend *be = cuda();
    struct tr_diag error = {0};
    enum { N = 1 << 20 };
    float *host = be->host_memory->alloc(N * sizeof *host, be->host_memory->ctx), *out = malloc(N * sizeof *out);
    ck_assert_ptr_nonnull(host);
    struct cudaPointerAttributes attr;
    ck_assert_int_eq(cudaPointerGetAttributes(&attr, host), cudaSuccess);
    ck_assert_int_eq(attr.type, cudaMemoryTypeHost);
    float *stage = device_region(be, N * sizeof *stage), *target = device_region(be, N * sizeof *target);
    ck_assert_int_eq(tr_backend_copy(be, out, target, N * sizeof *out, TR_COPY_TO_HOST, &error), 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(out[i] == 0, "element %d of a new region is %g", i, out[i]);
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    ck_assert_int_eq(tr_backend_fill(be, stage, 0xff, N * sizeof *stage, &error), 0);
    ck_assert_msg(tr_backend_copy_ahead(be, stage, host, N * sizeof *host, &error) == 0, "%s", tr_diag_last(&error));
    ck_assert_msg(tr_backend_join(be, &error) == 0, "%s", tr_diag_last(&error));
    ck_assert_int_eq(tr_backend_copy(be, target, stage, N * sizeof *target, TR_COPY_ON_DEVICE, &error), 0);
    ck_assert_int_eq(tr_backend_synchronize(be, &error), 0);
    for (int i = 0; i < N; i++)   /* the next batch ahead, while the commit above is done */
        host[i] = (float)-i;
    ck_assert_int_eq(tr_backend_copy_ahead(be, stage, host, N * sizeof *host, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, out, target, N * sizeof *out, TR_COPY_TO_HOST, &error), 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(out[i] == (float)i, "committed element %d is %g", i, out[i]);
    ck_assert_int_eq(tr_backend_join(be, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, target, stage, N * sizeof *target, TR_COPY_ON_DEVICE, &error), 0);
    ck_assert_int_eq(tr_backend_fill(be, target, 0, 16 * sizeof *target, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, out, target, N * sizeof *out, TR_COPY_TO_HOST, &error), 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(out[i] == (i < 16 ? 0.0f : (float)-i), "element %d is %g", i, out[i]);
    ck_assert_int_eq(tr_backend_synchronize(be, &error), 0);
    be->memory->free(stage, be->memory->ctx), be->memory->free(target, be->memory->ctx);
    be->host_memory->free(host, be->host_memory->ctx);
    free(out);
}
END_TEST

/* Three steps of AdamW and of SGD with Nesterov momentum over three parameters (one without
 * decay; one spanning many of the kernel's chunks), the gradients unscaled on the way, then
 * the sum of squares and an unscale that meets an Inf: the CPU's numbers. The update's
 * arithmetic is the CPU's, but nvcc may fuse a multiply and an add: 4 ulps (of the parameter,
 * or of the three updates' size where it ends near 0). Σ g² in double in
 * another order: 1e-12. Scaling by ½ is exact. */
static void optimize(const struct tr_backend *be, int kind, float *params_out, double *sumsq, bool *finite)
{
    enum { A = 37, B = 5, C = 3 * 4096 + 11, N = A + B + C };
    struct tr_diag error = {0};
    float *params = device_region(be, N * 4), *grads = device_region(be, N * 4), *state = device_region(be, 2 * N * 4);
    float *host = malloc(N * sizeof *host);
    for (int i = 0; i < N; i++)
        host[i] = (float)(i % 7) / 3 - 1;
    tr_backend_copy(be, params, host, N * 4, TR_COPY_TO_DEVICE, &error);
    struct tr_param_span spans[3] = {{0, 0, 0, A, 1}, {A * 4, A * 4, A, B, 0}, {(A + B) * 4, (A + B) * 4, A + B, C, 1}};
    struct tr_optim_args a = {.params = (char *)params, .grads = (char *)grads, .state = state,
                              .nstate = tr_optimizers[kind].nstate, .total = N,
                              .spans = spans, .nspans = 3, .kind = kind, .lr = 1e-2, .weight_decay = 0.1,
                              .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .momentum = 0.9, .nesterov = 1,
                              .diag = &error};
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < N; i++)
            host[i] = (float)((i * t) % 11) / 5 - 1;
        tr_backend_copy(be, grads, host, N * 4, TR_COPY_TO_DEVICE, &error);
        ck_assert_msg(tr_backend_grad_scale(be, &a, 0.5f, finite) == 0, "%s", tr_diag_last(&error));
        ck_assert(*finite);
        a.step = t;
        ck_assert_msg(tr_backend_optim_step(be, &a) == 0, "%s", tr_diag_last(&error));
    }
    ck_assert_msg(tr_backend_grad_sumsq(be, &a, sumsq) == 0, "%s", tr_diag_last(&error));
    float inf = 1.0f / 0.0f;
    tr_backend_copy(be, grads + A + 2, &inf, sizeof inf, TR_COPY_TO_DEVICE, &error);
    ck_assert_msg(tr_backend_grad_scale(be, &a, 0.5f, finite) == 0, "%s", tr_diag_last(&error));
    tr_backend_copy(be, params_out, params, N * 4, TR_COPY_TO_HOST, &error);
    ck_assert_int_eq(tr_backend_synchronize(be, &error), 0);
    be->memory->free(params, be->memory->ctx), be->memory->free(grads, be->memory->ctx);
    be->memory->free(state, be->memory->ctx);
    free(host);
}

START_TEST(optimizer_as_the_cpu)
{
    enum { N = 37 + 5 + 3 * 4096 + 11 };
    static float cpu[N], gpu[N];
    for (int kind = 0; kind < TR_OPT_COUNT; kind++) {
        double s_cpu, s_gpu;
        bool f_cpu, f_gpu;
        optimize(tr_backend_cpu(), kind, cpu, &s_cpu, &f_cpu);
        optimize(cuda(), kind, gpu, &s_gpu, &f_gpu);
        for (int i = 0; i < N; i++)
            ck_assert_msg(fabsf(gpu[i] - cpu[i]) <= 4 * 0x1p-24f * (fabsf(cpu[i]) + 0.1f),   /* 0.1: the updates' size */
                          "%s: parameter element %d: %.9g on the GPU, %.9g on the CPU",
                          tr_optimizer_names[kind], i, gpu[i], cpu[i]);
        ck_assert_msg(fabs(s_gpu - s_cpu) <= 1e-12 * s_cpu, "sum of squares %.17g, CPU %.17g", s_gpu, s_cpu);
        ck_assert(!f_cpu && !f_gpu);   /* the Inf was seen */
    }
}
END_TEST

static const struct op_case *find_case(const char *name)
{
    for (int i = 0; i < NCASES; i++)
        if (strcmp(cases[i].name, name) == 0)
            return &cases[i];
    ck_abort_msg("no case %s", name);
    return NULL;
}

/* The same node twice gives the same bits: no sum depends on how the GPU scheduled it. */
START_TEST(repeatable)
{
    static const char *const picks[] = {"bias_grad, 130 rows (3 chunks)", "layernorm_bwd, 130 rows",
                                        "embedding_bwd, 300 positions, 257 columns",
                                        "cross_entropy with ignored rows, 257 classes", "sum of all",
                                        "gather_bwd, repeated ids", "maxpool_bwd 3/2/1 (overlapping windows)",
                                        "attention_bwd, causal and padding mask, S 33",
                                        "conv2d_bwd_filter 3×3/1/1", "conv2d_bwd_data 3×3/2/1",
                                        "batchnorm training [2, 3, 9, 11]", "batchnorm_bwd [2, 3, 9, 11]",
                                        "linear_cross_entropy, 3-row chunks, ignored rows, 257 classes",
                                        "linear_cross_entropy_bwd, add_dw into 16 bits, 3-row chunks"};
    for (int p = 0; p < (int)(sizeof picks / sizeof picks[0]); p++) {
        const struct op_case *c = find_case(picks[p]);
        uint64_t seed = 99;
        struct set s = {0};
        for (int i = 0; i < c->nin; i++)
            s.in[i] = make(&c->in[i], TR_F32, &seed, true);
        for (int i = 0; i < c->nout; i++)
            s.out[i] = make(&c->out[i], TR_F32, &seed, true);
        if (c->prepare)
            c->prepare(&s);
        struct tr_node node = {.op = c->op, .attrs = c->at, .nin = c->nin, .nout = c->nout};
        struct tr_tensor first[TR_MAX_OUT], second[TR_MAX_OUT];
        char error[GC_ERROR_MAX] = "";
        for (int i = 0; i < c->nout; i++)
            first[i] = clone(&s.out[i]), second[i] = clone(&s.out[i]);
        ck_assert_msg(gpu_run(&node, s.in, s.out, first, NULL, error) == 0, "%s", error);
        ck_assert_msg(gpu_run(&node, s.in, s.out, second, NULL, error) == 0, "%s", error);
        for (int i = 0; i < c->nout; i++) {
            ck_assert_msg(memcmp(first[i].data, second[i].data, tr_tensor_bytes(&first[i])) == 0, "%s: output %d",
                          c->name, i);
            gc_free(&first[i]), gc_free(&second[i]), gc_free(&s.out[i]);
        }
        for (int i = 0; i < c->nin; i++)
            gc_free(&s.in[i]);
    }
}
END_TEST

int main(void)
{
    struct tr_cuda_info info;
    tr_cuda_probe(&info);
    Suite *s = suite_create("cuda");
    TCase *table = tcase_create("table");
    tcase_add_test(table, table_names_its_ops);
    tcase_add_test(table, missing_op_says_so);
    tcase_add_test(table, f64_refused);
    tcase_add_test(table, workspace_sizes);
    tcase_add_test(table, attention_workspace_in_groups);
    tcase_add_test(table, workspace_sizes_cudnn);
    suite_add_tcase(s, table);
    if (info.devices > 0) {
        /* The probe has started CUDA in this process, and a forked child cannot use it: the
         * tests run in this process (a failed assertion still ends only its test). */
        setenv("CK_FORK", "no", 1);
        TCase *gpu = tcase_create("gpu");
        tcase_set_timeout(gpu, 600);
        tcase_add_loop_test(gpu, ops_match_the_cpu, 0, 3 * NCASES);
        tcase_add_test(gpu, bad_ids_refused);
        tcase_add_test(gpu, bad_argmax_refused);
        tcase_add_test(gpu, short_workspace_refused);
        tcase_add_test(gpu, repeatable);
        tcase_add_test(gpu, memory_entries);
        tcase_add_test(gpu, optimizer_as_the_cpu);
        suite_add_tcase(s, gpu);
        printf("GPU: %s\n", info.first_name);
    }
    int rc = unit_run(s);
    if (rc == EXIT_SUCCESS && info.devices == 0) {
        printf("SKIP: no GPU visible (the CUDA table was checked; its kernels need a GPU)\n");
        return 77;
    }
    return rc;
}
