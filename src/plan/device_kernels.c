/* The kernels' calibration (device.h), the part of `trainrun calibrate` the time model reads:
 * small probe graphs of its own — a transformer layer with its heads, a convolutional stack,
 * a two-layer perceptron, GEMMs of each shape class — differentiated and run in f32, bf16 and
 * fp16 through the CPU backend's kernel table by the executor, every node timed, at two or
 * three sizes each; the optimizer's passes run on a flat buffer. A round runs every probe once
 * and the optimizer's passes; the last rounds must agree (the stability rule). Each node's time
 * is the median of the rounds, the optimizer's the median of the last. Whatever the kernels are
 * today is what is measured: nothing here knows their speed. */
#include "plan/device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/onednn.h"
#include "backend/exec.h"
#include "graph/memplan.h"
#include "graph/ops.h"
#include "plan/plan.h"
#include "recipe/recipe.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the stability rule ------------------------------------------------------------------- */

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The window of rounds nearest the median (the value the curves take: each node's median)
 * must agree: a round that a busy spell slowed is dropped by the median and so does not
 * unsettle it, while rounds strewn over a range, with no window of them together, do. */
bool tr_calibration_stable(const double *series, int n, const struct tr_calibration_rule *rule, double *spread)
{
    *spread = INFINITY;
    if (rule->window < 2 || n < rule->window || n > 64)
        return false;
    double v[64];
    memcpy(v, series, (size_t)n * sizeof *v);
    double mid = median(v, n);   /* v sorted */
    if (!(mid > 0))
        return false;
    int lo = 0, w = rule->window;   /* the w sorted values nearest mid: v[lo .. lo + w − 1] */
    while (lo + w < n && mid - v[lo] > v[lo + w] - mid)
        lo++;
    *spread = (v[lo + w - 1] - v[lo]) / mid;
    return *spread <= rule->tolerance;
}

struct tr_calibration_rule tr_calibration_rule_from_env(void)
{
    struct tr_calibration_rule r = TR_CALIBRATION_RULE_DEFAULT;
    const char *tol = getenv("TRAINRUN_CALIBRATE_TOLERANCE"), *rounds = getenv("TRAINRUN_CALIBRATE_ROUNDS");
    if (tol && atof(tol) > 0)
        r.tolerance = atof(tol) / 100;
    if (rounds && atoi(rounds) >= r.window)
        r.max_rounds = atoi(rounds);
    return r;
}

/* ---- curves ------------------------------------------------------------------------------- */

/* A measured point into the curve, kept rising in work; points within 5 % of each other's work
 * are one point (the least of their seconds: the same computation, the one least disturbed);
 * past TR_COST_POINTS the nearest neighbours merge (their mean). */
static void curve_add(struct tr_cost_curve *c, double work, double seconds, int *weight)
{
    for (int i = 0; i < c->n; i++)
        if (fabs(c->work[i] - work) <= 0.05 * fmax(c->work[i], work)) {
            c->seconds[i] = fmin(c->seconds[i], seconds);
            weight[i]++;
            return;
        }
    if (c->n == TR_COST_POINTS) {   /* merge the closest pair in log(work) to make room */
        int best = 1;
        for (int i = 2; i < c->n; i++)
            if (c->work[i] / c->work[i - 1] < c->work[best] / c->work[best - 1])
                best = i;
        int a = best - 1, wa = weight[a], wb = weight[best];
        c->work[a] = (c->work[a] * wa + c->work[best] * wb) / (wa + wb);
        c->seconds[a] = (c->seconds[a] * wa + c->seconds[best] * wb) / (wa + wb);
        weight[a] = wa + wb;
        memmove(c->work + best, c->work + best + 1, (size_t)(c->n - best - 1) * sizeof *c->work);
        memmove(c->seconds + best, c->seconds + best + 1, (size_t)(c->n - best - 1) * sizeof *c->seconds);
        memmove(weight + best, weight + best + 1, (size_t)(c->n - best - 1) * sizeof *weight);
        c->n--;
    }
    int at = c->n;
    while (at > 0 && c->work[at - 1] > work)
        at--;
    memmove(c->work + at + 1, c->work + at, (size_t)(c->n - at) * sizeof *c->work);
    memmove(c->seconds + at + 1, c->seconds + at, (size_t)(c->n - at) * sizeof *c->seconds);
    memmove(weight + at + 1, weight + at, (size_t)(c->n - at) * sizeof *weight);
    c->work[at] = work, c->seconds[at] = seconds, weight[at] = 1;
    c->n++;
}

/* ---- the probes ----------------------------------------------------------------------------- */

#define D(k) ((struct tr_dim){(k), 0, 0, 0})
#define DB(k) ((struct tr_dim){(k), 1, 0, 0})                /* k·B */
#define DBS(k) ((struct tr_dim){(k), 1, 1, 0})              /* k·B·S */

/* One probe: a graph builder and the sizes (B, S) it is run at. */
struct probe {
    const char *name;
    void (*build)(struct tr_graph *g, const int *dims);
    int dims[4];              /* the builder's widths */
    int64_t size[3][2];       /* (B, S), up to three; {0, 0} ends */
};

static int param(struct tr_graph *g, int rank, struct tr_dim a, struct tr_dim b)
{
    struct tr_dim d[2] = {a, b};
    return tr_param(g, "p", TR_F32, rank, d);
}

/* A transformer layer over [B, S, D] tokens: embedding, layer norm, attention (padded, and
 * causal), the feed-forward with GELU, dropout, residuals, a vocabulary head with the fused
 * classifier + loss, and a pooled classifier with a plain cross-entropy. dims: D, heads, vocab. */
static void build_transformer(struct tr_graph *g, const int *dims)
{
    int64_t Dm = dims[0], H = dims[1], V = dims[2], F = 4 * Dm;
    struct tr_dim tok[2] = {DB(1), {1, 0, 1, 0}}, mask_d[2] = {DB(1), {1, 0, 1, 0}};
    int ids = tr_input(g, "ids", TR_I32, 2, tok), mask = tr_input(g, "mask", TR_U8, 2, mask_d);
    int x = tr_embedding(g, param(g, 2, D(V), D(Dm)), ids);
    tr_graph_block(g, 0);
    int h = tr_layernorm(g, x, param(g, 1, D(Dm), D(0)), param(g, 1, D(Dm), D(0)), 1e-5f);
    int qkv[3];
    struct tr_dim heads[4] = {DB(1), {1, 0, 1, 0}, D(H), D(Dm / H)};
    static const int to_heads[4] = {0, 2, 1, 3};
    for (int i = 0; i < 3; i++) {
        int y = tr_linear(g, h, param(g, 2, D(Dm), D(Dm)), param(g, 1, D(Dm), D(0)));
        qkv[i] = tr_permute(g, tr_reshape(g, y, 4, heads), to_heads);
    }
    int o = tr_add(g, tr_attention(g, qkv[0], qkv[1], qkv[2], mask, 0), tr_attention(g, qkv[0], qkv[1], qkv[2], -1, 1));
    struct tr_dim flat[3] = {DB(1), {1, 0, 1, 0}, D(Dm)};
    o = tr_reshape(g, tr_permute(g, o, to_heads), 3, flat);
    o = tr_dropout(g, tr_linear(g, o, param(g, 2, D(Dm), D(Dm)), param(g, 1, D(Dm), D(0))), 0.1f, 1);
    x = tr_layernorm(g, tr_add(g, x, o), param(g, 1, D(Dm), D(0)), param(g, 1, D(Dm), D(0)), 1e-5f);
    int f = tr_gelu(g, tr_linear(g, x, param(g, 2, D(F), D(Dm)), param(g, 1, D(F), D(0))), 0);
    f = tr_dropout(g, tr_linear(g, f, param(g, 2, D(Dm), D(F)), param(g, 1, D(Dm), D(0))), 0.1f, 2);
    x = tr_add(g, x, f);
    tr_graph_block(g, -1);
    struct tr_dim rows[2] = {DBS(1), D(Dm)}, trows[1] = {DBS(1)}, cls[1] = {DB(1)};
    int lm = tr_linear_cross_entropy(g, tr_reshape(g, x, 2, rows), param(g, 2, D(V), D(Dm)),
                                     tr_input(g, "targets", TR_I32, 1, trows), -100, NULL, NULL);
    struct tr_dim pooled_d[2] = {DB(1), D(Dm)};
    int pooled = tr_reshape(g, tr_slice(g, x, 1, 0, 1), 2, pooled_d);
    pooled = tr_tanh(g, tr_linear(g, pooled, param(g, 2, D(Dm), D(Dm)), param(g, 1, D(Dm), D(0))));
    int logits = tr_linear(g, pooled, param(g, 2, D(8), D(Dm)), param(g, 1, D(8), D(0)));
    int ce = tr_cross_entropy(g, logits, tr_input(g, "labels", TR_I32, 1, cls), -100);
    tr_graph_set_loss(g, tr_add(g, lm, ce));
}

static int batchnorm(struct tr_graph *g, int x, int64_t C)
{
    struct tr_dim c[1] = {D(C)};
    return tr_batchnorm(g, x, param(g, 1, D(C), D(0)), param(g, 1, D(C), D(0)), tr_state(g, "m", TR_F32, 1, c),
                        tr_state(g, "v", TR_F32, 1, c), 1e-5f, 0.1f, 1);
}

/* A residual convolutional stack over [B, W, W, C] images (channels last, as tr_build lays a
 * model's images out on the CPU): 3×3 convolutions with batch norm and ReLU, a strided one,
 * global average pooling and a classifier. dims: C, W. */
static void build_conv(struct tr_graph *g, const int *dims)
{
    tr_graph_layout(g, TR_NHWC);
    int64_t C = dims[0], W = dims[1];
    struct tr_dim img[4] = {DB(1), D(W), D(W), D(1)}, lab[1] = {DB(1)};
    struct tr_dim w1[4] = {D(C), D(1), D(3), D(3)}, w2[4] = {D(C), D(C), D(3), D(3)},
                  w3[4] = {D(2 * C), D(C), D(3), D(3)}, w4[4] = {D(2 * C), D(2 * C), D(3), D(3)};
    int x = tr_input(g, "x", TR_F32, 4, img);
    x = tr_relu(g, batchnorm(g, tr_conv2d(g, x, tr_param(g, "w1", TR_F32, 4, w1), 1, 1), C));
    tr_graph_block(g, 0);
    int y = tr_relu(g, batchnorm(g, tr_conv2d(g, x, tr_param(g, "w2", TR_F32, 4, w2), 1, 1), C));
    y = batchnorm(g, tr_conv2d(g, y, tr_param(g, "w2b", TR_F32, 4, w2), 1, 1), C);
    x = tr_relu(g, tr_add(g, x, y));
    tr_graph_block(g, 1);
    x = tr_relu(g, batchnorm(g, tr_conv2d(g, x, tr_param(g, "w3", TR_F32, 4, w3), 2, 1), 2 * C));
    x = tr_relu(g, batchnorm(g, tr_conv2d(g, x, tr_param(g, "w4", TR_F32, 4, w4), 1, 1), 2 * C));
    tr_graph_block(g, -1);
    x = tr_global_avgpool(g, x);
    int logits = tr_linear(g, x, param(g, 2, D(10), D(2 * C)), param(g, 1, D(10), D(0)));
    tr_graph_set_loss(g, tr_cross_entropy(g, logits, tr_input(g, "y", TR_I32, 1, lab), -100));
}

/* A perceptron [B, in] → hidden → classes, ReLU between: small GEMMs, per-call costs. dims:
 * in, hidden, classes. */
static void build_mlp(struct tr_graph *g, const int *dims)
{
    struct tr_dim x_d[2] = {DB(1), D(dims[0])}, lab[1] = {DB(1)};
    int x = tr_input(g, "x", TR_F32, 2, x_d);
    x = tr_relu(g, tr_linear(g, x, param(g, 2, D(dims[1]), D(dims[0])), param(g, 1, D(dims[1]), D(0))));
    x = tr_linear(g, x, param(g, 2, D(dims[2]), D(dims[1])), param(g, 1, D(dims[2]), D(0)));
    tr_graph_set_loss(g, tr_cross_entropy(g, x, tr_input(g, "y", TR_I32, 1, lab), -100));
}

/* Two GEMMs over rows [B·S, K]: by a weight [N, K] and back by one [K, N], forward a·bᵀ; the
 * backward's a·b (the gradient of the hidden rows) and aᵀ·b (the weights'). dims: K, N. */
static void build_gemm(struct tr_graph *g, const int *dims)
{
    struct tr_dim x_d[2] = {DBS(1), D(dims[0])};
    int x = tr_input(g, "x", TR_F32, 2, x_d);
    int h = tr_matmul(g, x, param(g, 2, D(dims[1]), D(dims[0])), 0, 1);
    int y = tr_matmul(g, h, param(g, 2, D(dims[0]), D(dims[1])), 0, 1);
    tr_graph_set_loss(g, tr_sum(g, y, -1));
}

/* Sizes around what the shipped recipes run (hidden 256, 28×28 images, 784 inputs; GEMMs up
 * to 768) and either side, so that the curves are read between points, not beyond them. No
 * transformer layer at hidden 768: its parameters, gradients and AdamW state at two sizes and
 * two precisions held 540 MiB at once, and the planner's calibration runs inside the job's
 * memory limit (tests/limits-cgroup.sh plans in a 256 MiB cgroup); the 768-wide GEMMs are
 * measured by gemm-768, and the rest of a BERT-base layer reads the per-byte curves. */
static const struct probe probes[] = {
    {"transformer-256", build_transformer, {256, 4, 16384}, {{2, 64}, {8, 128}}},
    {"conv", build_conv, {16, 28}, {{8, 1}, {64, 1}}},
    {"mlp", build_mlp, {784, 256, 10}, {{32, 1}, {256, 1}}},
    {"gemm-64", build_gemm, {64, 64}, {{256, 1}, {4096, 1}}},
    {"gemm-256", build_gemm, {256, 1024}, {{128, 1}, {1024, 1}}},
    {"gemm-768", build_gemm, {768, 768}, {{256, 1}, {1024, 1}}},
};
#define NPROBES ((int)(sizeof probes / sizeof probes[0]))
/* fp32 and bf16 are measured; fp16 nodes read bf16's curves (cost.c) where both are 16-bit
 * storage through the same widened kernels, and fp32's plus the widening where bf16 computes
 * natively (oneDNN 2.6.3 has no f16 kernels for a CPU); measuring fp16 too would add half again
 * to the calibration's time and memory */
#define MEASURED_PRECISIONS 2
static const enum tr_dtype low_of[MEASURED_PRECISIONS] = {TR_F32, TR_BF16};

/* One probe at one precision and size, ready to run. */
struct probe_run {
    struct tr_graph g;
    int *schedule, n, loss_scale;
    struct tr_memplan plan;
    struct tr_exec x;
    struct tr_rng_ctx rng;
    struct tr_allocator alloc;
    int64_t B, S;
    int precision;
    double *node_seconds;     /* this run's, by schedule step */
    double started;
    double **rounds;          /* [round][step] */
    double *wall;             /* [round]: the whole pass */
    bool held;                /* the regions are allocated (probe_hold) */
};

static int timed_before(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    (void)x, (void)step, (void)node, (void)d;
    ((struct probe_run *)ctx)->started = now();
    return 0;
}

static int timed_after(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    (void)x, (void)node, (void)d;
    struct probe_run *r = ctx;
    r->node_seconds[step] = now() - r->started;
    return 0;
}

/* Builds, plans and allocates probe p at precision and size (B, S), its inputs valid: ids and
 * targets 0, masks all real tokens, the loss scale 1, the rest zeros. */
static int probe_open(struct probe_run *r, const struct probe *p, int precision, int64_t B, int64_t S,
                      struct tr_diag *d)
{
    memset(r, 0, sizeof *r);
    r->B = B, r->S = S, r->precision = precision;
    tr_graph_init(&r->g);
    p->build(&r->g, p->dims);
    if (!r->g.error && precision != TR_PREC_FP32)
        tr_amp(&r->g, low_of[precision], NULL, 0, low_of[precision] == TR_BF16 && tr_onednn_computes_bf16());
    if (!r->g.error)
        r->loss_scale = tr_autodiff(&r->g);
    if (r->g.error)
        return tr_fail(d, TR_EINVAL, "calibration probe %s: %s", p->name, r->g.message);
    r->n = r->g.nnodes;
    r->schedule = tr_xmalloc((size_t)r->n * sizeof *r->schedule);
    for (int i = 0; i < r->n; i++)
        r->schedule[i] = i;
    int keep = r->g.loss;
    if (tr_memplan_build(&r->plan, &r->g, r->schedule, r->n, B, S, &keep, 1, tr_cpu_ops.workspace_bytes, false))
        return tr_fail(d, TR_EINVAL, "calibration probe %s: planning failed", p->name);
    r->node_seconds = tr_xcalloc((size_t)r->n, sizeof *r->node_seconds);
    return 0;
}

/* The probe's regions and workspace, held only while it runs (probe_pass): the probes' memory
 * together was 330 MiB, and the planner's calibration runs inside the job's own limit
 * (tests/limits-cgroup.sh plans in a 256 MiB cgroup); one at a time, the largest is 48 MiB. */
static int probe_hold(struct probe_run *r, const struct tr_backend *be, struct tr_diag *d)
{
    r->x = (struct tr_exec){.g = &r->g, .schedule = r->schedule, .n = r->n, .plan = &r->plan, .be = be,
                            .rng = &r->rng};
    r->rng = (struct tr_rng_ctx){.seed = 1, .step = 1};
    tr_alloc_init(&r->alloc, NULL);
    int rc = tr_exec_alloc(&r->x, &r->alloc, r->plan.region_bytes, r->plan.workspace_bytes, d);
    if (rc)
        return rc;
    for (int k = 0; k < TR_NKINDS; k++)
        if (r->x.base[k] && r->plan.region_bytes[k])
            memset(r->x.base[k], 0, r->plan.region_bytes[k]);
    for (int v = 0; v < r->g.nvalues; v++)
        if (r->g.values[v].kind == TR_INPUT && r->g.values[v].dtype == TR_U8)
            memset(tr_exec_data(&r->x, v), 1, r->plan.bytes[v]);
    *(float *)tr_exec_data(&r->x, r->loss_scale) = 1.0f;
    r->x.hook = (struct tr_exec_hook){timed_before, timed_after, r};
    r->held = true;
    return 0;
}

static void probe_release(struct probe_run *r)
{
    if (!r->held)
        return;
    tr_alloc_destroy(&r->alloc);
    tr_exec_free(&r->x);
    r->held = false;
}

static void probe_close(struct probe_run *r, int rounds)
{
    for (int i = 0; i < rounds && r->rounds; i++)
        free(r->rounds[i]);
    free(r->rounds), free(r->wall), free(r->node_seconds);
    probe_release(r);
    tr_memplan_free(&r->plan);
    free(r->schedule);
    tr_graph_free(&r->g);
}

/* One pass of a held probe, every node's time into round `round`. */
static int probe_pass(struct probe_run *r, int round, struct tr_diag *d)
{
    if (r->plan.region_bytes[TR_GRAD])
        memset(r->x.base[TR_GRAD], 0, r->plan.region_bytes[TR_GRAD]);
    double t0 = now();
    int rc = tr_exec_run(&r->x, r->B, r->S, d);
    double wall = now() - t0;
    if (rc)
        return rc;
    r->wall[round] = wall;
    r->rounds[round] = tr_xmalloc((size_t)r->n * sizeof **r->rounds);
    memcpy(r->rounds[round], r->node_seconds, (size_t)r->n * sizeof **r->rounds);
    return 0;
}

/* One round of a probe, in memory held for it alone: a warm pass first (first touches, caches),
 * then the timed one. The backend instance was prepared for it as a training's is (its oneDNN
 * primitives made first: the kernels a run takes, not the stateless instance's OpenBLAS and
 * im2col). */
static int probe_round(struct probe_run *r, const struct tr_backend *be, int round, struct tr_diag *d)
{
    int rc = probe_hold(r, be, d);
    if (!rc)
        rc = tr_exec_run(&r->x, r->B, r->S, d);
    if (!rc)
        rc = probe_pass(r, round, d);
    probe_release(r);
    return rc;
}

/* ---- the optimizer's passes ------------------------------------------------------------------- */

/* 8,000,000 f32 parameters: 128 MB touched, past the caches. Not 2²³: at a power of two the
 * parameters, gradients and AdamW's two moments (state + k·total) sit on the same cache sets and
 * the update measured 0.42 ns a byte against 0.13–0.16 at any other count (and a BERT-base step's
 * 0.15), forecasting its optimizer at 2.5× (AMD EPYC Zen 4, 2 threads). */
#define OPT_PARAMS ((int64_t)8000000)

/* Seconds of the update (nstate state tensors: AdamW's two, SGD's momentum), the gradients'
 * sum of squares and their zeroing, over OPT_PARAMS parameters, into out[0..3]. */
static int time_optimizer(double out[4], struct tr_diag *d)
{
    const struct tr_backend *be = tr_backend_cpu();
    size_t bytes = (size_t)OPT_PARAMS * sizeof(float);
    char *params = tr_xcalloc(1, bytes), *grads = tr_xcalloc(1, bytes);
    float *state = tr_xcalloc(2, bytes);
    /* every page written once before the clock (a training's tensors are long since mapped), with
     * values a training has: a zero page the compiler or the kernel may keep unmapped */
    for (int64_t i = 0; i < OPT_PARAMS; i++)
        ((float *)params)[i] = 1, ((float *)grads)[i] = 1e-3f, state[i] = 1e-4f, state[OPT_PARAMS + i] = 1e-6f;
    struct tr_param_span span = {.param = 0, .grad = 0, .state = 0, .numel = OPT_PARAMS, .decay = 1};
    struct tr_optim_args a = {.params = params, .grads = grads, .state = state, .total = OPT_PARAMS,
                              .spans = &span, .nspans = 1, .lr = 1e-3, .weight_decay = 0.01, .beta1 = 0.9,
                              .beta2 = 0.999, .eps = 1e-8, .momentum = 0.9, .step = 1, .diag = d};
    int rc = 0;
    double t0, sum;
    a.kind = TR_OPT_SGD, a.nstate = 1;
    t0 = now(), rc = rc ? rc : tr_backend_optim_step(be, &a), out[0] = now() - t0;
    a.kind = TR_OPT_ADAMW, a.nstate = 2;
    t0 = now(), rc = rc ? rc : tr_backend_optim_step(be, &a), out[1] = now() - t0;
    t0 = now(), rc = rc ? rc : tr_backend_grad_sumsq(be, &a, &sum), out[2] = now() - t0;
    t0 = now(), rc = rc ? rc : tr_backend_fill(be, grads, 0, bytes, d), out[3] = now() - t0;
    free(params), free(grads), free(state);
    return rc;
}

/* ---- the rounds ------------------------------------------------------------------------------- */

struct calibration {
    struct probe_run *runs;
    int nruns, rounds;
    double (*opt)[4];
};

static int open_runs(struct calibration *c, int max_rounds, struct tr_diag *d)
{
    int cap = NPROBES * 3 * MEASURED_PRECISIONS;
    c->runs = tr_xcalloc((size_t)cap, sizeof *c->runs);
    c->opt = tr_xcalloc((size_t)max_rounds, sizeof *c->opt);
    for (int p = 0; p < NPROBES; p++)
        for (int prec = 0; prec < MEASURED_PRECISIONS; prec++)
            for (int s = 0; s < 3 && probes[p].size[s][0]; s++) {
                struct probe_run *r = &c->runs[c->nruns++];
                int rc = probe_open(r, &probes[p], prec, probes[p].size[s][0], probes[p].size[s][1], d);
                if (rc)
                    return rc;
                r->rounds = tr_xcalloc((size_t)max_rounds, sizeof *r->rounds);
                r->wall = tr_xcalloc((size_t)max_rounds, sizeof *r->wall);
            }
    return 0;
}

/* Whether the rounds settled, and the larger spread of the two series the rule watches: a
 * round's probes together, and its optimizer passes together. Not each probe alone: one of a
 * millisecond moves by a scheduler's tick, and its nodes' times are the least of the rounds. */
static bool settled(const struct calibration *c, const struct tr_calibration_rule *rule, double *worst)
{
    double together[64], optimizer[64], a, b;
    int n = c->rounds < 64 ? c->rounds : 64;
    for (int r = 0; r < n; r++) {
        together[r] = optimizer[r] = 0;
        for (int i = 0; i < c->nruns; i++)
            together[r] += c->runs[i].wall[c->rounds - n + r];
        for (int k = 0; k < 4; k++)
            optimizer[r] += c->opt[c->rounds - n + r][k];
    }
    bool stable = tr_calibration_stable(together, n, rule, &a) & tr_calibration_stable(optimizer, n, rule, &b);
    *worst = fmax(a, b);
    return stable;
}

/* The least of the rounds of each node into its class's curve; the executor's own
 * cost a node from the walls against the nodes' sum; the optimizer's rates. */
static void summarise(const struct calibration *c, int window, struct tr_kernel_costs *k)
{
    int (*weight)[TR_NPRECISIONS][TR_COST_POINTS] = tr_xcalloc(TR_COST_CLASSES, sizeof *weight);
    memset(k, 0, sizeof *k);
    int from = c->rounds - window, nodes = 0;
    double v[64], overhead = 0;
    for (int i = 0; i < c->nruns; i++) {
        const struct probe_run *r = &c->runs[i];
        int kernels = 0;
        for (int step = 0; step < r->n; step++) {
            const struct tr_node *n = &r->g.nodes[r->schedule[step]];
            if (tr_op_is_view(n->op))
                continue;
            /* the median of the rounds: a training's step meets the machine as the rounds did
             * (a time slice lost to another process now and then), and the least of them
             * forecast steps 20-30% short on a shared 2-vCPU host (bench/README.md) */
            double s, work;
            for (int j = 0; j < c->rounds; j++)
                v[j] = r->rounds[j][step];
            s = median(v, c->rounds < 64 ? c->rounds : 64);
            struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
            tr_bind_shapes(&r->g, n, r->B, r->S, in, out);
            int cls = tr_cost_class(n, in, out, &work), prec = tr_cost_precision(in, n->nin);
            curve_add(&k->curve[cls][prec], work, s, weight[cls][prec]);
            kernels++;
        }
        /* the executor's own time: a round's wall beyond its nodes' (their waits are theirs), the least */
        double least = INFINITY;
        for (int j = from; j < c->rounds; j++) {
            double in_nodes = 0;
            for (int step = 0; step < r->n; step++)
                in_nodes += r->rounds[j][step];
            least = fmin(least, fmax(0, r->wall[j] - in_nodes));
        }
        overhead += least, nodes += kernels;
    }
    free(weight);
    k->exec_node_seconds = nodes ? overhead / nodes : 0;
    double bytes = (double)OPT_PARAMS * sizeof(float), rate[4];
    for (int q = 0; q < 4; q++) {
        for (int j = 0; j < window; j++)
            v[j] = c->opt[from + j][q];
        rate[q] = median(v, window) / bytes;
    }
    k->optimizer_byte_seconds[0] = rate[0], k->optimizer_byte_seconds[1] = rate[1];
    k->sumsq_byte_seconds = rate[2], k->fill_byte_seconds = rate[3];
    k->measured = true;
}

int tr_device_measure_kernels(struct tr_device *d, const struct tr_calibration_rule *rule, struct tr_diag *diag)
{
    struct calibration c = {0};
    struct tr_backend *be = NULL;
    int rc = open_runs(&c, rule->max_rounds, diag);
    if (!rc)
        rc = tr_backend_open_ops(&tr_cpu_ops, 0, &be, diag);
    bool stable = false;
    double worst = INFINITY;
    /* every probe once a round, then the optimizer's passes; every round is taken, and the last
     * `window` must agree. Not each probe's rounds in a row: a disturbance of the machine a few
     * hundred milliseconds long then fell on every round of one probe, and the only point of a
     * class came out twice its time (bf16 GEMMs of 768 in one calibration of three, AMD EPYC Zen
     * 4); spread over the rounds, it lands in one round of each probe, which the median drops. */
    for (int i = 0; i < c.nruns && !rc; i++)
        rc = tr_backend_prepare_program(be, &c.runs[i].g, c.runs[i].schedule, c.runs[i].n, &c.runs[i].B,
                                        &c.runs[i].S, 1, diag);
    for (int round = 0; round < rule->max_rounds && !rc; round++) {
        for (int i = 0; i < c.nruns && !rc; i++)
            rc = probe_round(&c.runs[i], be, round, diag);
        if (!rc)
            rc = time_optimizer(c.opt[round], diag);
    }
    if (!rc)
        c.rounds = rule->max_rounds, stable = settled(&c, rule, &worst);
    if (!rc)
        summarise(&c, c.rounds < rule->window ? c.rounds : rule->window, &d->kernels);
    d->stable = !rc && stable, d->spread = worst;
    for (int i = 0; i < c.nruns; i++)
        probe_close(&c.runs[i], rule->max_rounds);   /* rounds a failure left half-taken too */
    tr_backend_close(be);   /* after the probes: its primitives are keyed by their nodes */
    free(c.runs), free(c.opt);
    return rc;
}

int tr_kernel_classes_measured(const struct tr_kernel_costs *k)
{
    int n = 0;
    for (int cls = 0; cls < TR_COST_CLASSES; cls++)
        for (int p = 0; p < TR_NPRECISIONS; p++)
            n += k->curve[cls][p].n > 0;
    return n;
}

double tr_kernel_peak_rate(const struct tr_kernel_costs *k, int op, int precision)
{
    int from = op == TR_OP_MATMUL ? TR_NOPS : op, to = op == TR_OP_MATMUL ? TR_COST_CLASSES : op + 1;
    double best = 0;
    for (int cls = from; cls < to && precision >= 0 && precision < TR_NPRECISIONS; cls++) {
        const struct tr_cost_curve *c = &k->curve[cls][precision];
        for (int i = 0; i < c->n; i++)
            if (c->seconds[i] > 0)
                best = fmax(best, c->work[i] / c->seconds[i]);
    }
    return best;
}

/* ---- the cache's form ------------------------------------------------------------------------- */

static const char *const precision_key[TR_NPRECISIONS] = {"fp32", "bf16", "fp16"};
static const char *const variant_key[TR_GEMM_VARIANTS] = {"nn", "nt", "tn"};
static const char *const shape_key[TR_GEMM_SHAPES] = {"small", "medium", "large"};

/* "layernorm.fp32", "matmul.nt.large.bf16" */
static void class_key(int cls, int prec, char *out, size_t size)
{
    if (cls < TR_NOPS)
        snprintf(out, size, "%s.%s", tr_ops[cls].name, precision_key[prec]);
    else
        snprintf(out, size, "matmul.%s.%s.%s", variant_key[(cls - TR_NOPS) / TR_GEMM_SHAPES],
                 shape_key[(cls - TR_NOPS) % TR_GEMM_SHAPES], precision_key[prec]);
}

json_t *tr_kernel_costs_json(const struct tr_kernel_costs *k)
{
    json_t *curves = json_object();
    for (int cls = 0; cls < TR_COST_CLASSES; cls++)
        for (int p = 0; p < TR_NPRECISIONS; p++) {
            const struct tr_cost_curve *c = &k->curve[cls][p];
            if (!c->n)
                continue;
            json_t *points = json_array();
            for (int i = 0; i < c->n; i++)
                json_array_append_new(points, json_pack("[ff]", c->work[i], c->seconds[i]));
            char key[96];
            class_key(cls, p, key, sizeof key);
            json_object_set_new(curves, key, points);
        }
    return json_pack("{so sf s[ff] sf sf}", "curves", curves, "exec_node_seconds", k->exec_node_seconds,
                     "optimizer_byte_seconds", k->optimizer_byte_seconds[0], k->optimizer_byte_seconds[1],
                     "sumsq_byte_seconds", k->sumsq_byte_seconds, "fill_byte_seconds", k->fill_byte_seconds);
}

int tr_kernel_costs_from_json(json_t *j, struct tr_kernel_costs *k)
{
    memset(k, 0, sizeof *k);
    json_t *curves = NULL;
    if (!j || json_unpack(j, "{so sF s[FF] sF sF}", "curves", &curves, "exec_node_seconds", &k->exec_node_seconds,
                          "optimizer_byte_seconds", &k->optimizer_byte_seconds[0], &k->optimizer_byte_seconds[1],
                          "sumsq_byte_seconds", &k->sumsq_byte_seconds, "fill_byte_seconds", &k->fill_byte_seconds) ||
        !json_is_object(curves))
        return -1;
    for (int cls = 0; cls < TR_COST_CLASSES; cls++)
        for (int p = 0; p < TR_NPRECISIONS; p++) {
            char key[96];
            class_key(cls, p, key, sizeof key);
            json_t *points = json_object_get(curves, key), *pt;
            struct tr_cost_curve *c = &k->curve[cls][p];
            size_t i;
            if (points && (!json_is_array(points) || json_array_size(points) > TR_COST_POINTS))
                return -1;
            json_array_foreach(points, i, pt) {
                double w, s;
                if (json_unpack(pt, "[FF]", &w, &s) || !(w >= 0) || !(s > 0) || (i && w <= c->work[i - 1]))
                    return -1;
                c->work[i] = w, c->seconds[i] = s, c->n++;
            }
        }
    k->measured = true;
    return 0;
}
