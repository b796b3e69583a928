/* CPU kernels for layer norm, dropout and attention: finite-difference gradient checks in f64
 * (gradcheck.h says why the tolerance is what it is), forward values against naive formulas
 * written here, accumulation (+=), f32 agreeing with f64, results that do not depend on the
 * thread count, and dropout masks that depend on the sample, never on its micro-batch.
 * GC_VERBOSE=1 prints each gradient check's error. */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>

#include "backend/cpu/cpu.h"
#include "core/error.h"
#include "core/rng.h"

#define F64(t) ((double *)(t).data)
#define F32(t) ((float *)(t).data)

/* gc_error, asserted, and printed under GC_VERBOSE. */
static void grad_check(struct tr_kernel_args *fwd, int input, const struct tr_tensor *weights,
                       const struct tr_tensor *analytic, const char *what)
{
    double e = gc_error(fwd, input, weights, analytic);
    if (getenv("GC_VERBOSE"))
        printf("%-34s d/d(in %d): %.3g\n", what, input, e);
    ck_assert_msg(e <= GC_TOL, "%s: gradient of input %d: normwise error %.3g > %.0e", what, input, e, GC_TOL);
}

/* An f32 copy of an f64 tensor, and the f64 one rounded to the same values, so that both kernels
 * see identical inputs. */
static struct tr_tensor to_f32(struct tr_tensor *t64)
{
    struct tr_tensor t32 = gc_tensor(TR_F32, t64->rank, t64->dim);
    for (int64_t i = 0; i < tr_tensor_numel(t64); i++)
        F32(t32)[i] = (float)F64(*t64)[i], F64(*t64)[i] = F32(t32)[i];
    return t32;
}

/* ‖a32 − a64‖ / ‖a64‖; −∞ must match −∞ exactly and is left out of the norms. */
static double f32_error(const struct tr_tensor *a32, const struct tr_tensor *a64)
{
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < tr_tensor_numel(a64); i++) {
        double x = F32(*a32)[i], y = F64(*a64)[i];
        if (isinf(y) || isinf(x)) {
            if (x != y)
                return INFINITY;
            continue;
        }
        diff += (x - y) * (x - y), norm += y * y;
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static void assert_finite(const struct tr_tensor *t, const char *what)
{
    for (int64_t i = 0; i < tr_tensor_numel(t); i++)
        ck_assert_msg(isfinite(F64(*t)[i]), "%s[%lld] = %g", what, (long long)i, F64(*t)[i]);
}

static void assert_same_bits(const struct tr_tensor *a, const struct tr_tensor *b, const char *what)
{
    ck_assert_msg(memcmp(a->data, b->data, tr_tensor_bytes(a)) == 0, "%s differs", what);
}

/* ---- layer norm ------------------------------------------------------------------------- */

#define LN_EPS 1e-5f

/* Layer norm's forward and backward on one x, their tensors allocated. */
struct ln_case {
    struct tr_node fwd, bwd;
    struct tr_tensor x, gamma, beta, y, stats, dy, dx, dgamma, dbeta;
    struct tr_kernel_args fa, ba;
};

static void ln_setup(struct ln_case *c, enum tr_dtype t, int64_t rows, int64_t D, uint64_t seed)
{
    c->fwd = (struct tr_node){.op = TR_OP_LAYERNORM, .attrs.norm = {LN_EPS}};
    c->bwd = (struct tr_node){.op = TR_OP_LAYERNORM_BWD, .attrs.norm = {LN_EPS}};
    c->x = gc_make(t, rows, D), c->y = gc_make(t, rows, D), c->dy = gc_make(t, rows, D);
    c->dx = gc_make(t, rows, D), c->stats = gc_make(t, rows, 2);
    c->gamma = gc_make(t, D), c->beta = gc_make(t, D), c->dgamma = gc_make(t, D), c->dbeta = gc_make(t, D);
    gc_fill(&c->x, &seed, -2, 3), gc_fill(&c->dy, &seed, -1, 1);
    gc_fill(&c->gamma, &seed, 0.5, 1.5), gc_fill(&c->beta, &seed, -1, 1);
    c->fa = (struct tr_kernel_args){.node = &c->fwd, .in = {c->x, c->gamma, c->beta},
                                    .out = {c->y, c->stats}, .nin = 3, .nout = 2};
    c->ba = (struct tr_kernel_args){.node = &c->bwd, .in = {c->dy, c->x, c->gamma, c->stats},
                                    .out = {c->dx, c->dgamma, c->dbeta}, .nin = 4, .nout = 3};
}

static void ln_free(struct ln_case *c)
{
    struct tr_tensor *all[] = {&c->x, &c->gamma, &c->beta, &c->y, &c->stats, &c->dy, &c->dx, &c->dgamma, &c->dbeta};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gc_free(all[i]);
}

/* y, mean and rstd by the textbook formulas (biased variance, like PyTorch). */
START_TEST(layernorm_values)
{
    struct ln_case c;
    ln_setup(&c, TR_F64, 6, 7, 1);
    for (int d = 0; d < 7; d++)   /* row 1 far from 0: its variance must not cancel */
        F64(c.x)[7 + d] += 1000;
    gc_run(&c.fa);
    for (int64_t r = 0; r < 6; r++) {
        const double *x = F64(c.x) + r * 7;
        double mean = 0, var = 0;
        for (int d = 0; d < 7; d++)
            mean += x[d] / 7;
        for (int d = 0; d < 7; d++)
            var += (x[d] - mean) * (x[d] - mean) / 7;
        double rstd = 1 / sqrt(var + (double)LN_EPS);
        ck_assert_double_eq_tol(F64(c.stats)[2 * r], mean, 1e-12 * (1 + fabs(mean)));
        ck_assert_double_eq_tol(F64(c.stats)[2 * r + 1], rstd, 1e-10 * rstd);
        for (int d = 0; d < 7; d++)
            ck_assert_double_eq_tol(F64(c.y)[r * 7 + d], (x[d] - mean) * rstd * F64(c.gamma)[d] + F64(c.beta)[d], 1e-9);
    }
    ln_free(&c);
}
END_TEST

/* dL/dx, dL/dgamma, dL/dbeta with L = Σ w ⊙ y (the stats get no weight); D = 70 spans two of
 * the backward's column blocks. */
static void check_layernorm_gradients(int64_t rows, int64_t D, uint64_t seed)
{
    struct ln_case c;
    ln_setup(&c, TR_F64, rows, D, seed);
    gc_run(&c.fa), gc_run(&c.ba);
    struct tr_tensor weights[2] = {c.dy, {0}};
    grad_check(&c.fa, 0, weights, &c.dx, "layernorm");
    grad_check(&c.fa, 1, weights, &c.dgamma, "layernorm");
    grad_check(&c.fa, 2, weights, &c.dbeta, "layernorm");
    ln_free(&c);
}

START_TEST(layernorm_gradients)
{
    check_layernorm_gradients(6, 7, 2);
    check_layernorm_gradients(5, 70, 3);
    check_layernorm_gradients(1, 1, 4);   /* D = 1: y = beta, dx = 0 */
}
END_TEST

/* accumulate adds into y, dx, dgamma, dbeta; the stats are this call's, not a sum. */
START_TEST(layernorm_accumulate)
{
    struct ln_case c;
    ln_setup(&c, TR_F64, 4, 9, 5);
    gc_run(&c.fa), gc_run(&c.ba);
    struct tr_tensor once[5] = {gc_make(TR_F64, 4, 9), gc_make(TR_F64, 4, 2), gc_make(TR_F64, 4, 9),
                                gc_make(TR_F64, 9), gc_make(TR_F64, 9)};
    const struct tr_tensor *now[5] = {&c.y, &c.stats, &c.dx, &c.dgamma, &c.dbeta};
    for (int k = 0; k < 5; k++)
        memcpy(once[k].data, now[k]->data, tr_tensor_bytes(now[k]));
    c.fwd.accumulate = c.bwd.accumulate = 1;
    gc_run(&c.fa), gc_run(&c.ba);
    for (int k = 0; k < 5; k++)
        for (int64_t i = 0; i < tr_tensor_numel(now[k]); i++)
            ck_assert_double_eq(F64(*now[k])[i], (k == 1 ? 1 : 2) * F64(once[k])[i]);
    for (int k = 0; k < 5; k++)
        gc_free(&once[k]);
    ln_free(&c);
}
END_TEST

/* Every output bit for bit the same on 1, 2 and 3 threads (dgamma and dbeta are reductions over
 * rows: threads must split columns, not rows). */
START_TEST(layernorm_threads)
{
    struct ln_case c;
    ln_setup(&c, TR_F32, 301, 200, 6);
    struct tr_tensor first[5];
    const struct tr_tensor *outs[5] = {&c.y, &c.stats, &c.dx, &c.dgamma, &c.dbeta};
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        gc_run(&c.fa), gc_run(&c.ba);
        for (int k = 0; k < 5; k++) {
            if (threads == 1) {
                first[k] = gc_tensor(TR_F32, outs[k]->rank, outs[k]->dim);
                memcpy(first[k].data, outs[k]->data, tr_tensor_bytes(outs[k]));
            } else {
                assert_same_bits(outs[k], &first[k], "layernorm output with more threads");
            }
        }
    }
    for (int k = 0; k < 5; k++)
        gc_free(&first[k]);
    ln_free(&c);
}
END_TEST

/* ---- dropout ---------------------------------------------------------------------------- */

static struct tr_node dropout_node(float p, uint32_t stream)
{
    return (struct tr_node){.op = TR_OP_DROPOUT, .attrs.dropout = {p, stream}};
}

static void run_dropout(const struct tr_node *n, const struct tr_rng_ctx *rng, struct tr_tensor x,
                        struct tr_tensor y)
{
    struct tr_kernel_args a = {.node = n, .in = {x}, .out = {y}, .nin = 1, .nout = 1, .rng = rng};
    gc_run(&a);
}

/* Each element against the key backend.h gives, drawn here with tr_rng_uniform4 directly:
 * rank 3 [rows, positions, features], rank 2 [rows, features], rank 4 [rows, positions, a, b];
 * wide rows take the kernel's batched Philox (dropout.c), narrow ones its one-call path. */
static void check_dropout_key(int rank, const int64_t *dims)
{
    uint64_t seed = 21;
    const int64_t ids[] = {40, 7, 1000000007};
    const struct tr_rng_ctx rng = {0xfeedfacecafeull, 12, ids};
    const float p = 0.4f;
    struct tr_node n = dropout_node(p, 5);
    struct tr_tensor x = gc_tensor(TR_F64, rank, dims), y = gc_tensor(TR_F64, rank, dims);
    gc_fill(&x, &seed, 0.5, 1.5);
    run_dropout(&n, &rng, x, y);
    int64_t positions = rank >= 3 ? dims[1] : 1, features = tr_tensor_numel(&x) / dims[0] / positions;
    for (int64_t i = 0; i < tr_tensor_numel(&x); i++) {
        int64_t r = i / (positions * features), pos = i / features % positions, f = i % features;
        float u[4];
        tr_rng_uniform4(rng.seed, rng.step, (uint64_t)ids[r], (uint32_t)pos, (uint32_t)(f / 4), 5, u);
        int keep = u[f % 4] >= p;
        ck_assert_double_eq(F64(y)[i], keep ? F64(x)[i] / (1 - (double)p) : 0);
    }
    gc_free(&x), gc_free(&y);
}

START_TEST(dropout_key_layout)
{
    check_dropout_key(3, GC_DIMS(3, 4, 5));
    check_dropout_key(2, GC_DIMS(3, 9));
    check_dropout_key(4, GC_DIMS(2, 3, 2, 2));
    /* features past one batch of 16 Philox lanes (64 features), with a ragged rest */
    check_dropout_key(3, GC_DIMS(2, 3, 133));
    check_dropout_key(2, GC_DIMS(3, 256));
}
END_TEST

/* Past the draw grain (cpu.h: TR_CPU_DRAW_GRAIN) the rows split over threads: 1, 2 and 3 give
 * the same bits, rank 2 (the MLP recipe's [64, 256]) and rank 3. */
START_TEST(dropout_threads)
{
    static const int64_t shapes[2][3] = {{64, 256}, {8, 16, 40}};
    const struct tr_rng_ctx rng = {77, 3, NULL};
    struct tr_node n = dropout_node(0.1f, 2);
    uint64_t seed = 4;
    for (int s = 0; s < 2; s++) {
        int rank = s ? 3 : 2;
        struct tr_tensor x = gc_tensor(TR_F32, rank, shapes[s]), y = gc_tensor(TR_F32, rank, shapes[s]),
                         first = gc_tensor(TR_F32, rank, shapes[s]);
        ck_assert(tr_tensor_numel(&x) >= TR_CPU_DRAW_GRAIN && tr_tensor_numel(&x) < TR_CPU_GRAIN);
        gc_fill(&x, &seed, -1, 1);
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            run_dropout(&n, &rng, x, y);
            if (threads == 1)
                memcpy(first.data, y.data, tr_tensor_bytes(&y));
            else
                assert_same_bits(&y, &first, "dropout with more threads");
        }
        omp_set_num_threads(1);
        gc_free(&x), gc_free(&y), gc_free(&first);
    }
}
END_TEST

/* The backward (dropout of dy, same node and rng) keeps exactly the forward's elements, and
 * being linear it passes the finite-difference check. */
START_TEST(dropout_mask_forward_is_backward)
{
    uint64_t seed = 22;
    const int64_t ids[] = {10, 11, 12, 13};
    const struct tr_rng_ctx rng = {1234, 7, ids};
    struct tr_node n = dropout_node(0.3f, 2);
    struct tr_tensor x = gc_make(TR_F64, 4, 3, 5), y = gc_make(TR_F64, 4, 3, 5);
    struct tr_tensor dy = gc_make(TR_F64, 4, 3, 5), dx = gc_make(TR_F64, 4, 3, 5);
    gc_fill(&x, &seed, 0.5, 1.5), gc_fill(&dy, &seed, -1.5, -0.5);   /* no zeros */
    run_dropout(&n, &rng, x, y);
    run_dropout(&n, &rng, dy, dx);
    int kept = 0;
    for (int i = 0; i < 60; i++) {
        ck_assert_int_eq(F64(y)[i] != 0, F64(dx)[i] != 0);
        kept += F64(y)[i] != 0;
        if (F64(y)[i] != 0)
            ck_assert_double_eq(F64(dx)[i], F64(dy)[i] / (1 - (double)0.3f));
    }
    ck_assert(kept > 0 && kept < 60);
    struct tr_kernel_args fa = {.node = &n, .in = {x}, .out = {y}, .nin = 1, .nout = 1, .rng = &rng};
    struct tr_tensor weights[1] = {dy};
    grad_check(&fa, 0, weights, &dx, "dropout");
    gc_free(&x), gc_free(&y), gc_free(&dy), gc_free(&dx);
}
END_TEST

/* Rows 0..7 run as one tensor, rows 4..7 as their own micro-batch (sample ids 4..7), and rows 6
 * and 4 in that order: each row's output is the same, bit for bit. */
static void check_dropout_grouping(int rank, const int64_t *dims)
{
    uint64_t seed = 23;
    const struct tr_rng_ctx whole = {99, 3, NULL};
    struct tr_node n = dropout_node(0.5f, 1);
    struct tr_tensor x = gc_tensor(TR_F32, rank, dims), y = gc_tensor(TR_F32, rank, dims);
    gc_fill(&x, &seed, -1, 1);
    run_dropout(&n, &whole, x, y);
    int64_t row = tr_tensor_numel(&x) / dims[0];
    size_t row_bytes = (size_t)row * sizeof(float);

    const int64_t last4[] = {4, 5, 6, 7};
    const struct tr_rng_ctx part = {99, 3, last4};
    struct tr_tensor xs = x, ys = gc_tensor(TR_F32, rank, dims);
    xs.dim[0] = ys.dim[0] = 4;
    xs.data = F32(x) + 4 * row;
    run_dropout(&n, &part, xs, ys);
    ck_assert_msg(memcmp(ys.data, F32(y) + 4 * row, 4 * row_bytes) == 0, "rows 4..7 alone differ");

    const int64_t shuffled[] = {6, 4};
    const struct tr_rng_ctx pair = {99, 3, shuffled};
    xs = gc_tensor(TR_F32, rank, dims);
    xs.dim[0] = ys.dim[0] = 2;
    memcpy(F32(xs), F32(x) + 6 * row, row_bytes);
    memcpy(F32(xs) + row, F32(x) + 4 * row, row_bytes);
    run_dropout(&n, &pair, xs, ys);
    ck_assert(memcmp(F32(ys), F32(y) + 6 * row, row_bytes) == 0);
    ck_assert(memcmp(F32(ys) + row, F32(y) + 4 * row, row_bytes) == 0);
    gc_free(&x), gc_free(&y), gc_free(&xs), gc_free(&ys);
}

START_TEST(dropout_grouping)
{
    check_dropout_grouping(3, GC_DIMS(8, 6, 10));
    check_dropout_grouping(2, GC_DIMS(8, 33));
}
END_TEST

/* A different seed, step or stream draws a different mask; no rng context means seed 0, step 0,
 * rows as sample ids. */
START_TEST(dropout_key_fields)
{
    const int64_t rows[] = {0, 1, 2, 3};
    const struct tr_rng_ctx base = {5, 1, NULL}, seed = {6, 1, NULL}, step = {5, 2, NULL};
    const struct tr_rng_ctx zero = {0, 0, rows};
    struct tr_node n = dropout_node(0.5f, 0), other = dropout_node(0.5f, 1);
    struct tr_tensor x = gc_make(TR_F32, 4, 64), a = gc_make(TR_F32, 4, 64), b = gc_make(TR_F32, 4, 64);
    for (int i = 0; i < 256; i++)
        F32(x)[i] = 1;
    run_dropout(&n, &base, x, a);
    run_dropout(&n, &seed, x, b);
    ck_assert(memcmp(a.data, b.data, tr_tensor_bytes(&a)) != 0);
    run_dropout(&n, &step, x, b);
    ck_assert(memcmp(a.data, b.data, tr_tensor_bytes(&a)) != 0);
    run_dropout(&other, &base, x, b);
    ck_assert(memcmp(a.data, b.data, tr_tensor_bytes(&a)) != 0);
    run_dropout(&n, NULL, x, a);
    run_dropout(&n, &zero, x, b);
    assert_same_bits(&a, &b, "dropout without an rng context");
    gc_free(&x), gc_free(&a), gc_free(&b);
}
END_TEST

/* The kept fraction is 1 − p within 5 standard deviations, and each kept element is 1/(1 − p). */
START_TEST(dropout_fraction)
{
    const float ps[] = {0.1f, 0.5f, 0.9f};
    const struct tr_rng_ctx rng = {77, 1000, NULL};
    struct tr_tensor x = gc_make(TR_F32, 64, 16, 256), y = gc_make(TR_F32, 64, 16, 256);
    int64_t n = tr_tensor_numel(&x);
    for (int64_t i = 0; i < n; i++)
        F32(x)[i] = 1;
    for (int k = 0; k < 3; k++) {
        struct tr_node node = dropout_node(ps[k], 3);
        run_dropout(&node, &rng, x, y);
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++) {
            ck_assert(F32(y)[i] == 0 || F32(y)[i] == 1 / (1 - ps[k]));
            kept += F32(y)[i] != 0;
        }
        double fraction = (double)kept / (double)n, sigma = sqrt(ps[k] * (1 - ps[k]) / (double)n);
        ck_assert_msg(fabs(fraction - (1 - ps[k])) < 5 * sigma, "p = %g: kept %g", ps[k], fraction);
    }
    gc_free(&x), gc_free(&y);
}
END_TEST

/* p = 0 copies; accumulate adds; f32 and f64 keep the same elements. */
START_TEST(dropout_copy_accumulate_f32)
{
    uint64_t seed = 24;
    const struct tr_rng_ctx rng = {3, 4, NULL};
    struct tr_tensor x = gc_make(TR_F64, 5, 3, 7), y = gc_make(TR_F64, 5, 3, 7), once = gc_make(TR_F64, 5, 3, 7);
    gc_fill(&x, &seed, -1, 1);
    struct tr_node n = dropout_node(0, 0);
    run_dropout(&n, &rng, x, y);
    assert_same_bits(&x, &y, "dropout with p = 0");
    n = dropout_node(0.25f, 9);
    run_dropout(&n, &rng, x, once);
    memcpy(y.data, once.data, tr_tensor_bytes(&y));
    n.accumulate = 1;
    run_dropout(&n, &rng, x, y);
    for (int i = 0; i < 105; i++)
        ck_assert_double_eq(F64(y)[i], 2 * F64(once)[i]);
    n.accumulate = 0;
    struct tr_tensor x32 = to_f32(&x), y32 = gc_make(TR_F32, 5, 3, 7);
    run_dropout(&n, &rng, x, once), run_dropout(&n, &rng, x32, y32);
    for (int i = 0; i < 105; i++)
        ck_assert_double_eq_tol(F32(y32)[i], F64(once)[i], 1e-6);
    gc_free(&x), gc_free(&y), gc_free(&once), gc_free(&x32), gc_free(&y32);
}
END_TEST

/* ---- attention -------------------------------------------------------------------------- */

enum { AB = 3, AH = 2, AS = 5, AD = 4 };

/* Batch 0 pads its last key, batch 1 keys 0 and 2 (with causal, its query 0 sees nothing), and
 * batch 2 is all padding: every one of its rows sees no key. */
static const uint8_t attn_mask_values[AB * AS] = {1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0};

struct attn_case {
    struct tr_node fwd, bwd;
    struct tr_tensor q, k, v, mask, o, lse, dout, dq, dk, dv;
    struct tr_kernel_args fa, ba;
};

/* (Re)binds the workspace the CPU backend asks for on the current thread count. */
static void attn_workspace(struct tr_kernel_args *a)
{
    free(a->workspace);
    a->workspace_bytes = tr_cpu_ops.workspace_bytes(a->node, a->in, a->out);
    a->workspace = a->workspace_bytes ? malloc(a->workspace_bytes) : NULL;
}

static void attn_setup(struct attn_case *c, enum tr_dtype t, int causal, int masked, int64_t B,
                       int64_t H, int64_t S, int64_t D, uint64_t seed)
{
    c->fwd = (struct tr_node){.op = TR_OP_ATTENTION, .attrs.attention = {(uint8_t)causal, (uint8_t)masked, 0}};
    c->bwd = (struct tr_node){.op = TR_OP_ATTENTION_BWD, .attrs.attention = c->fwd.attrs.attention};
    struct tr_tensor *bhsd[] = {&c->q, &c->k, &c->v, &c->o, &c->dout, &c->dq, &c->dk, &c->dv};
    for (size_t i = 0; i < sizeof bhsd / sizeof *bhsd; i++)
        *bhsd[i] = gc_make(t, B, H, S, D);
    c->lse = gc_make(t, B, H, S);
    c->mask = gc_make(TR_U8, B, S);
    gc_fill(&c->q, &seed, -1.5, 1.5), gc_fill(&c->k, &seed, -1.5, 1.5), gc_fill(&c->v, &seed, -1, 1);
    gc_fill(&c->dout, &seed, -1, 1);
    for (int64_t i = 0; i < B * S; i++)
        ((uint8_t *)c->mask.data)[i] = B == AB && S == AS ? attn_mask_values[i] : (uint8_t)(i % 7 != 3);
    int nmask = masked ? 1 : 0;
    c->fa = (struct tr_kernel_args){.node = &c->fwd, .in = {c->q, c->k, c->v, c->mask},
                                    .out = {c->o, c->lse}, .nin = 3 + nmask, .nout = 2};
    c->ba = (struct tr_kernel_args){.node = &c->bwd, .in = {c->dout, c->q, c->k, c->v, c->o, c->lse, c->mask},
                                    .out = {c->dq, c->dk, c->dv}, .nin = 6 + nmask, .nout = 3};
    c->fwd.nin = (uint8_t)c->fa.nin, c->fwd.nout = 2, c->bwd.nin = (uint8_t)c->ba.nin, c->bwd.nout = 3;
    attn_workspace(&c->fa), attn_workspace(&c->ba);
}

static void attn_free(struct attn_case *c)
{
    struct tr_tensor *all[] = {&c->q, &c->k, &c->v, &c->mask, &c->o, &c->lse, &c->dout, &c->dq, &c->dk, &c->dv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gc_free(all[i]);
    free(c->fa.workspace), free(c->ba.workspace);
}

/* softmax written out, with the S × S matrix: P_ij = exp(s_ij)/Σ_j exp(s_ij) over the visible
 * keys, o = P·v, lse = log Σ_j exp(s_ij); no visible key: o = 0, lse = −∞. The backward by the
 * textbook rule: dP = do·vᵀ, dS = P∘(dP − rowsum(P∘dP)), dq = scale·dS·k, dk = scale·dSᵀ·q,
 * dv = Pᵀ·do (any of o, lse, dq, dk, dv may be NULL). */
static void attn_naive_all(const struct attn_case *c, int causal, int masked, double *o, double *lse, double *dq,
                           double *dk, double *dv)
{
    int64_t B = c->q.dim[0], H = c->q.dim[1], S = c->q.dim[2], D = c->q.dim[3];
    const uint8_t *mask = c->mask.data;
    float attr = c->fwd.attrs.attention.scale;   /* 0: 1/√D */
    double scale = attr ? (double)attr : 1 / sqrt((double)D);
    double *p = calloc((size_t)S, sizeof *p), *dp = calloc((size_t)S, sizeof *dp);
    for (int64_t i = 0; dk && i < B * H * S * D; i++)
        dk[i] = 0, dv[i] = 0;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t i = 0; i < S; i++) {
            const double *q = F64(c->q) + (bh * S + i) * D, *dout = F64(c->dout) + (bh * S + i) * D;
            double sum = 0, rowsum = 0;
            for (int64_t j = 0; j < S; j++) {
                p[j] = 0;
                if ((causal && j > i) || (masked && !mask[bh / H * S + j]))
                    continue;
                const double *k = F64(c->k) + (bh * S + j) * D;
                double s = 0;
                for (int64_t d = 0; d < D; d++)
                    s += q[d] * k[d] * scale;
                sum += p[j] = exp(s);
            }
            for (int64_t j = 0; j < S; j++) {
                p[j] = sum > 0 ? p[j] / sum : 0;
                dp[j] = 0;
                for (int64_t d = 0; d < D; d++)
                    dp[j] += dout[d] * F64(c->v)[(bh * S + j) * D + d];
                rowsum += p[j] * dp[j];
            }
            if (lse)
                lse[bh * S + i] = sum > 0 ? log(sum) : -INFINITY;
            for (int64_t d = 0; d < D; d++) {
                double acc = 0, grad = 0;
                for (int64_t j = 0; j < S; j++) {
                    acc += p[j] * F64(c->v)[(bh * S + j) * D + d];
                    grad += scale * p[j] * (dp[j] - rowsum) * F64(c->k)[(bh * S + j) * D + d];
                }
                if (o)
                    o[(bh * S + i) * D + d] = acc;
                if (dq)
                    dq[(bh * S + i) * D + d] = grad;
            }
            for (int64_t j = 0; dk && j < S; j++)
                for (int64_t d = 0; d < D; d++) {
                    dk[(bh * S + j) * D + d] += scale * p[j] * (dp[j] - rowsum) * q[d];
                    dv[(bh * S + j) * D + d] += p[j] * dout[d];
                }
        }
    free(p), free(dp);
}

static void attn_naive(const struct attn_case *c, int causal, int masked, double *o, double *lse)
{
    attn_naive_all(c, causal, masked, o, lse, NULL, NULL, NULL);
}

START_TEST(attention_values)
{
    for (int causal = 0; causal < 2; causal++)
        for (int masked = 0; masked < 2; masked++) {
            struct attn_case c;
            attn_setup(&c, TR_F64, causal, masked, AB, AH, AS, AD, 30 + (uint64_t)(2 * causal + masked));
            gc_run(&c.fa);
            double o[AB * AH * AS * AD], lse[AB * AH * AS];
            attn_naive(&c, causal, masked, o, lse);
            for (int i = 0; i < AB * AH * AS * AD; i++)
                ck_assert_double_eq_tol(F64(c.o)[i], o[i], 1e-12);
            for (int i = 0; i < AB * AH * AS; i++) {
                if (isinf(lse[i]))
                    ck_assert_msg(F64(c.lse)[i] == -INFINITY, "lse[%d] = %g, not -inf", i, F64(c.lse)[i]);
                else
                    ck_assert_double_eq_tol(F64(c.lse)[i], lse[i], 1e-12);
            }
            attn_free(&c);
        }
}
END_TEST

/* A scale of its own (attrs.attention.scale ≠ 0) replaces 1/√D, forward and backward, as the
 * CUDA backend's: values against the naive sums, gradients by finite differences. */
START_TEST(attention_scale)
{
    struct attn_case c;
    attn_setup(&c, TR_F64, 1, 1, AB, AH, AS, AD, 77);
    c.fwd.attrs.attention.scale = c.bwd.attrs.attention.scale = 0.3f;
    gc_run(&c.fa), gc_run(&c.ba);
    double o[AB * AH * AS * AD], lse[AB * AH * AS];
    attn_naive(&c, 1, 1, o, lse);
    for (int i = 0; i < AB * AH * AS * AD; i++)
        ck_assert_double_eq_tol(F64(c.o)[i], o[i], 1e-12);
    struct tr_tensor weights[2] = {c.dout, {0}};
    for (int input = 0; input < 3; input++)
        grad_check(&c.fa, input, weights, input == 0 ? &c.dq : input == 1 ? &c.dk : &c.dv, "attention scale 0.3");
    attn_free(&c);
}
END_TEST

/* dq, dk, dv by finite differences of L = Σ w ⊙ o (lse gets no weight), with and without causal
 * and mask; rows that see no key get exactly zero gradient, never NaN. */
START_TEST(attention_gradients)
{
    static const char *names[] = {"attention", "attention masked", "attention causal",
                                  "attention causal masked"};
    for (int causal = 0; causal < 2; causal++)
        for (int masked = 0; masked < 2; masked++) {
            struct attn_case c;
            attn_setup(&c, TR_F64, causal, masked, AB, AH, AS, AD, 40 + (uint64_t)(2 * causal + masked));
            gc_run(&c.fa), gc_run(&c.ba);
            assert_finite(&c.dq, "dq"), assert_finite(&c.dk, "dk"), assert_finite(&c.dv, "dv");
            struct tr_tensor weights[2] = {c.dout, {0}};
            for (int input = 0; input < 3; input++)
                grad_check(&c.fa, input, weights, input == 0 ? &c.dq : input == 1 ? &c.dk : &c.dv,
                           names[2 * causal + masked]);
            for (int i = 0; masked && i < AH * AS * AD; i++) {   /* batch 2: all padding */
                int64_t at = 2 * AH * AS * AD + i;
                ck_assert(F64(c.dq)[at] == 0 && F64(c.dk)[at] == 0 && F64(c.dv)[at] == 0);
                ck_assert(F64(c.o)[at] == 0);
            }
            attn_free(&c);
        }
}
END_TEST

/* accumulate adds into o, dq, dk, dv; lse is this call's. */
START_TEST(attention_accumulate)
{
    struct attn_case c;
    attn_setup(&c, TR_F64, 1, 1, AB, AH, AS, AD, 50);
    gc_run(&c.fa), gc_run(&c.ba);
    const struct tr_tensor *now[5] = {&c.o, &c.lse, &c.dq, &c.dk, &c.dv};
    struct tr_tensor once[5];
    for (int k = 0; k < 5; k++) {
        once[k] = gc_tensor(TR_F64, now[k]->rank, now[k]->dim);
        memcpy(once[k].data, now[k]->data, tr_tensor_bytes(now[k]));
    }
    c.fwd.accumulate = c.bwd.accumulate = 1;
    c.ba.in[4] = once[0];   /* the backward reads the forward's own o, not the doubled one */
    gc_run(&c.fa), gc_run(&c.ba);
    assert_same_bits(&c.lse, &once[1], "lse after an accumulating call");
    for (int k = 0; k < 5; k++)   /* BLAS adds into o, dk, dv term by term: not exactly 2× */
        for (int64_t i = 0; k != 1 && i < tr_tensor_numel(now[k]); i++)
            ck_assert_double_eq_tol(F64(*now[k])[i], 2 * F64(once[k])[i], 1e-12 * (1 + fabs(F64(once[k])[i])));
    for (int k = 0; k < 5; k++)
        gc_free(&once[k]);
    attn_free(&c);
}
END_TEST

/* Outputs bit for bit the same on 1, 2 and 3 threads, each with the workspace planned for its
 * thread count: one query tile and one key tile (S 67), and several with a ragged last one
 * (S 300: query tiles 4 × 64 and 44; key tiles 256 and 44); causal with padding, and neither. */
START_TEST(attention_threads)
{
    static const struct { int causal, masked; int64_t B, H, S, D; } shapes[] = {
        {1, 1, 2, 3, 67, 16}, {1, 1, 2, 2, 300, 64}, {0, 0, 1, 3, 300, 64}, {0, 1, 3, 1, 300, 8},
    };
    for (size_t at = 0; at < sizeof shapes / sizeof *shapes; at++) {
        struct attn_case c;
        attn_setup(&c, TR_F32, shapes[at].causal, shapes[at].masked, shapes[at].B, shapes[at].H, shapes[at].S,
                   shapes[at].D, 51 + at);
        const struct tr_tensor *outs[5] = {&c.o, &c.lse, &c.dq, &c.dk, &c.dv};
        struct tr_tensor first[5];
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            attn_workspace(&c.fa), attn_workspace(&c.ba);
            gc_run(&c.fa), gc_run(&c.ba);
            for (int k = 0; k < 5; k++) {
                if (threads == 1) {
                    first[k] = gc_tensor(TR_F32, outs[k]->rank, outs[k]->dim);
                    memcpy(first[k].data, outs[k]->data, tr_tensor_bytes(outs[k]));
                } else {
                    ck_assert_msg(memcmp(outs[k]->data, first[k].data, tr_tensor_bytes(outs[k])) == 0,
                                  "attention S %lld: output %d differs on %d threads", (long long)shapes[at].S, k,
                                  threads);
                }
            }
        }
        omp_set_num_threads(1);
        for (int k = 0; k < 5; k++)
            gc_free(&first[k]);
        attn_free(&c);
    }
}
END_TEST

/* Forward and backward against the naive sums with the S × S matrix, on shapes that cut into
 * tiles unevenly: S 1; S 63, 65 and 257 around the 64-row query tile and the 256-key tile;
 * BERT's S 512 with D 64 (8 query tiles × 2 key tiles); every combination of causal and padding
 * (the setup pads every seventh key, and a batch row all padding below). */
START_TEST(attention_tiled_shapes)
{
    static const struct { int64_t B, H, S, D; } shapes[] = {
        {2, 2, 1, 3}, {1, 2, 63, 5}, {2, 1, 65, 64}, {2, 1, 257, 16}, {1, 1, 512, 64},
    };
    for (size_t at = 0; at < sizeof shapes / sizeof *shapes; at++)
        for (int causal = 0; causal < 2; causal++)
            for (int masked = 0; masked < 2; masked++) {
                int64_t B = shapes[at].B, H = shapes[at].H, S = shapes[at].S, D = shapes[at].D, n = B * H * S * D;
                struct attn_case c;
                attn_setup(&c, TR_F64, causal, masked, B, H, S, D, 90 + at);
                if (B > 1)   /* the last batch row all padding: its rows see no key */
                    memset((uint8_t *)c.mask.data + (B - 1) * S, 0, (size_t)S);
                gc_run(&c.fa), gc_run(&c.ba);
                double *want = malloc(sizeof(double) * (size_t)(4 * n + B * H * S));
                attn_naive_all(&c, causal, masked, want, want + 4 * n, want + n, want + 2 * n, want + 3 * n);
                const struct tr_tensor *got[4] = {&c.o, &c.dq, &c.dk, &c.dv};
                for (int k = 0; k < 4; k++)
                    for (int64_t i = 0; i < n; i++)
                        ck_assert_msg(fabs(F64(*got[k])[i] - want[k * n + i]) <= 1e-12 * (1 + fabs(want[k * n + i])),
                                      "S %lld D %lld causal %d masked %d: output %d [%lld] = %.17g, not %.17g",
                                      (long long)S, (long long)D, causal, masked, k, (long long)i,
                                      F64(*got[k])[i], want[k * n + i]);
                for (int64_t i = 0; i < B * H * S; i++) {
                    double l = want[4 * n + i];
                    ck_assert_msg(isinf(l) ? F64(c.lse)[i] == -INFINITY : fabs(F64(c.lse)[i] - l) <= 1e-12 * (1 + fabs(l)),
                                  "S %lld: lse[%lld] = %g, not %g", (long long)S, (long long)i, F64(c.lse)[i], l);
                }
                free(want);
                attn_free(&c);
            }
}
END_TEST

/* Finite differences over several tiles: S 257 (query tiles 4 × 64 and 1; key tiles 256 and 1),
 * the keys from 200 on padding (the second key tile is skipped whole): their dk and dv are 0. */
START_TEST(attention_gradients_tiled)
{
    for (int causal = 0; causal < 2; causal++) {
        struct attn_case c;
        attn_setup(&c, TR_F64, causal, 1, 1, 1, 257, 1, 95 + (uint64_t)causal);
        uint8_t *mask = c.mask.data;
        for (int64_t j = 0; j < 257; j++)
            mask[j] = j < 200 && j % 7 != 3;
        gc_run(&c.fa), gc_run(&c.ba);
        struct tr_tensor weights[2] = {c.dout, {0}};
        for (int input = 0; input < 3; input++)
            grad_check(&c.fa, input, weights, input == 0 ? &c.dq : input == 1 ? &c.dk : &c.dv,
                       causal ? "attention tiled causal" : "attention tiled");
        for (int64_t i = 200; i < 257; i++)
            ck_assert(F64(c.dk)[i] == 0 && F64(c.dv)[i] == 0);
        attn_free(&c);
    }
}
END_TEST

/* The workspace: per thread, tq·tk scores + tq·D output sums + 2·tq row statistics forward,
 * 2·tq·tk + tq backward (tiles 64 × 256, capped by S), in whole cache lines, for as many
 * threads as there are units (query tiles forward, heads backward) up to OpenMP's. One short of
 * a thread's scratch is refused with a sentence; a workspace for one thread gives the bits of
 * one for three. */
START_TEST(attention_workspace)
{
    struct attn_case c;
    attn_setup(&c, TR_F32, 1, 1, 1, 2, 300, 64, 53);
    size_t fwd_one = (64 * 256 + 64 * 64 + 2 * 64) * 4, bwd_one = (2 * 64 * 256 + 64) * 4;   /* 82432, 131328 */
    omp_set_num_threads(3);
    ck_assert_uint_eq(tr_cpu_ops.workspace_bytes(&c.fwd, c.fa.in, c.fa.out), 3 * fwd_one);   /* 10 units */
    ck_assert_uint_eq(tr_cpu_ops.workspace_bytes(&c.bwd, c.ba.in, c.ba.out), 2 * bwd_one);   /* 2 heads */
    c.fa.in[0].dim[2] = c.ba.in[1].dim[2] = 5;   /* S 5: 5 × 5 tiles; one unit backward per head */
    ck_assert_uint_eq(tr_cpu_ops.workspace_bytes(&c.fwd, c.fa.in, c.fa.out), 2 * 1472);   /* 355 floats: 1420 bytes */
    ck_assert_uint_eq(tr_cpu_ops.workspace_bytes(&c.bwd, c.ba.in, c.ba.out), 2 * 256);    /* 55 floats: 220 bytes */
    c.fa.in[0].dim[2] = c.ba.in[1].dim[2] = 300;
    attn_workspace(&c.fa), attn_workspace(&c.ba);
    gc_run(&c.fa), gc_run(&c.ba);
    const struct tr_tensor *outs[5] = {&c.o, &c.lse, &c.dq, &c.dk, &c.dv};
    struct tr_tensor three[5];
    for (int k = 0; k < 5; k++) {
        three[k] = gc_tensor(TR_F32, outs[k]->rank, outs[k]->dim);
        memcpy(three[k].data, outs[k]->data, tr_tensor_bytes(outs[k]));
    }
    c.fa.workspace_bytes = fwd_one, c.ba.workspace_bytes = bwd_one;   /* one thread's */
    gc_run(&c.fa), gc_run(&c.ba);
    for (int k = 0; k < 5; k++)
        assert_same_bits(outs[k], &three[k], "attention output in one thread's workspace");
    char error[GC_ERROR_MAX] = "";
    c.fa.workspace_bytes = fwd_one - 1;
    ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &c.fa, error), TR_EINVAL);
    ck_assert_str_eq(error, "attention: the workspace holds 82431 bytes but one thread's scratch needs 82432");
    void *bwd_workspace = c.ba.workspace;
    c.ba.workspace = NULL;
    ck_assert_int_eq(gc_kernel(tr_backend_cpu(), &c.ba, error), TR_EINVAL);
    ck_assert_str_eq(error, "attention_bwd: the workspace holds 0 bytes but one thread's scratch needs 131328");
    c.ba.workspace = bwd_workspace;
    omp_set_num_threads(1);
    for (int k = 0; k < 5; k++)
        gc_free(&three[k]);
    attn_free(&c);
}
END_TEST

/* No limit on S: 4,097 keys (over the row-at-a-time kernel's old 4,096) give the naive values. */
START_TEST(attention_long)
{
    struct attn_case c;
    attn_setup(&c, TR_F64, 0, 1, 1, 1, 4097, 2, 52);
    gc_run(&c.fa);
    double *o = malloc(sizeof(double) * 4097 * 2), *lse = malloc(sizeof(double) * 4097);
    attn_naive(&c, 0, 1, o, lse);
    for (int64_t i = 0; i < 4097; i++) {
        ck_assert_double_eq_tol(F64(c.lse)[i], lse[i], 1e-11 * (1 + fabs(lse[i])));
        for (int d = 0; d < 2; d++)
            ck_assert_double_eq_tol(F64(c.o)[i * 2 + d], o[i * 2 + d], 1e-12);
    }
    free(o), free(lse);
    attn_free(&c);
}
END_TEST

/* ---- f32 against f64 -------------------------------------------------------------------- */

#define F32_TOL 1e-5   /* normwise; f32 rounding (6e-8) grown by the sums over D and S */

static void assert_f32_close(const struct tr_tensor *a32, const struct tr_tensor *a64, const char *what)
{
    double e = f32_error(a32, a64);
    if (getenv("GC_VERBOSE"))
        printf("%-34s f32 vs f64: %.3g\n", what, e);
    ck_assert_msg(e < F32_TOL, "%s: f32 vs f64 normwise %g", what, e);
}

START_TEST(layernorm_f32_agrees_with_f64)
{
    struct ln_case c64, c32;
    ln_setup(&c64, TR_F64, 17, 96, 60);
    ln_setup(&c32, TR_F32, 17, 96, 60);
    struct tr_tensor *t64[] = {&c64.x, &c64.gamma, &c64.beta, &c64.dy};
    struct tr_tensor *t32[] = {&c32.x, &c32.gamma, &c32.beta, &c32.dy};
    for (int k = 0; k < 4; k++) {
        struct tr_tensor r = to_f32(t64[k]);
        memcpy(t32[k]->data, r.data, tr_tensor_bytes(&r));
        gc_free(&r);
    }
    gc_run(&c64.fa), gc_run(&c64.ba), gc_run(&c32.fa), gc_run(&c32.ba);
    assert_f32_close(&c32.y, &c64.y, "layernorm y");
    assert_f32_close(&c32.stats, &c64.stats, "layernorm stats");
    assert_f32_close(&c32.dx, &c64.dx, "layernorm dx");
    assert_f32_close(&c32.dgamma, &c64.dgamma, "layernorm dgamma");
    assert_f32_close(&c32.dbeta, &c64.dbeta, "layernorm dbeta");
    ln_free(&c64), ln_free(&c32);
}
END_TEST

START_TEST(attention_f32_agrees_with_f64)
{
    struct attn_case c64, c32;
    attn_setup(&c64, TR_F64, 1, 1, 2, 2, 33, 8, 61);
    attn_setup(&c32, TR_F32, 1, 1, 2, 2, 33, 8, 61);
    struct tr_tensor *t64[] = {&c64.q, &c64.k, &c64.v, &c64.dout};
    struct tr_tensor *t32[] = {&c32.q, &c32.k, &c32.v, &c32.dout};
    for (int k = 0; k < 4; k++) {
        struct tr_tensor r = to_f32(t64[k]);
        memcpy(t32[k]->data, r.data, tr_tensor_bytes(&r));
        gc_free(&r);
    }
    gc_run(&c64.fa), gc_run(&c64.ba), gc_run(&c32.fa), gc_run(&c32.ba);
    assert_f32_close(&c32.o, &c64.o, "attention o");
    assert_f32_close(&c32.lse, &c64.lse, "attention lse");
    assert_f32_close(&c32.dq, &c64.dq, "attention dq");
    assert_f32_close(&c32.dk, &c64.dk, "attention dk");
    assert_f32_close(&c32.dv, &c64.dv, "attention dv");
    attn_free(&c64), attn_free(&c32);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels_norm");
    TCase *tc = tcase_create("layernorm, dropout, attention");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layernorm_values);
    tcase_add_test(tc, layernorm_gradients);
    tcase_add_test(tc, layernorm_accumulate);
    tcase_add_test(tc, layernorm_threads);
    tcase_add_test(tc, dropout_key_layout);
    tcase_add_test(tc, dropout_mask_forward_is_backward);
    tcase_add_test(tc, dropout_grouping);
    tcase_add_test(tc, dropout_threads);
    tcase_add_test(tc, dropout_key_fields);
    tcase_add_test(tc, dropout_fraction);
    tcase_add_test(tc, dropout_copy_accumulate_f32);
    tcase_add_test(tc, attention_values);
    tcase_add_test(tc, attention_gradients);
    tcase_add_test(tc, attention_scale);
    tcase_add_test(tc, attention_accumulate);
    tcase_add_test(tc, attention_threads);
    tcase_add_test(tc, attention_tiled_shapes);
    tcase_add_test(tc, attention_gradients_tiled);
    tcase_add_test(tc, attention_workspace);
    tcase_add_test(tc, attention_long);
    tcase_add_test(tc, layernorm_f32_agrees_with_f64);
    tcase_add_test(tc, attention_f32_agrees_with_f64);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
