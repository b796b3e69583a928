/* The engine against PyTorch 1.13: every op, a BERT-style transformer block and a residual
 * conv block, in f32, from the references tests/fixtures/make_fixtures.py computed in f64.
 * Each case builds its graph with the builders, adds loss = Σ_k out_k ⊙ w_k (so the gradient
 * reaching out_k is exactly w_k), differentiates, plans, runs, and compares outputs and every
 * parameter gradient normwise: ‖ours − ref‖ ≤ 1e-5·‖ref‖ + 1e-6·√n. f32 arithmetic in a
 * different order than the reference's accumulates a relative error of a few ε·√m (ε = 6e-8,
 * m ≤ a few hundred terms per sum here), far below the bound; a wrong term is ≥ 1e-3. The
 * absolute floor (1e-6 per element, for values of order 1) is for references that are zero in
 * exact arithmetic, such as the gradient of the key bias, which softmax cancels: there f32
 * leaves noise of order 1e-8 that no relative bound can accept. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "core/safetensors.h"
#include "graph/program.h"
#include "models.h"

#define RTOL 1e-5
#define ATOL 1e-6

struct fx {
    struct tr_graph g;
    struct tr_safetensors *st;
    const char *name;
    int leaves[32], nleaves;
    char leaf_names[32][40];
    int outs[4], nout;
    int64_t B, S;                  /* the bucket planned for (symbolic inputs) */
};

static struct tr_safetensors ops, blocks;

static const struct tr_st_tensor *ref(struct fx *c, const char *what)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", c->name, what);
    const struct tr_st_tensor *t = tr_st_find(c->st, full);
    ck_assert_msg(t != NULL, "fixture %s is missing", full);
    return t;
}

static int leaf(struct fx *c, enum tr_value_kind kind, const char *name)
{
    const struct tr_st_tensor *t = ref(c, name);
    ck_assert_int_lt(c->nleaves, 32);
    struct tr_dim d[TR_MAX_RANK];
    for (int i = 0; i < t->rank; i++)
        d[i] = tr_dim_const(t->shape[i]);
    struct tr_shape s = tr_shape_make(t->rank, d);
    int v = tr_value_add(&c->g, kind, t->dtype, &s, name);
    snprintf(c->leaf_names[c->nleaves], sizeof c->leaf_names[0], "%s", name);
    c->leaves[c->nleaves++] = v;
    return v;
}

static int param(struct fx *c, const char *name) { return leaf(c, TR_PARAM, name); }
static int input(struct fx *c, const char *name) { return leaf(c, TR_INPUT, name); }

/* A symbolic input [B, S, ...] filled from a fixture of shape [b, s, ...]. */
static int input_bs(struct fx *c, const char *name, int rank)
{
    const struct tr_st_tensor *t = ref(c, name);
    struct tr_dim d[TR_MAX_RANK] = {tr_dim_B(1), tr_dim_S(1)};
    for (int i = 2; i < rank; i++)
        d[i] = tr_dim_const(t->shape[i]);
    c->B = t->shape[0], c->S = t->shape[1];
    int v = tr_input(&c->g, name, t->dtype, rank, d);
    snprintf(c->leaf_names[c->nleaves], sizeof c->leaf_names[0], "%s", name);
    c->leaves[c->nleaves++] = v;
    return v;
}

static void output(struct fx *c, int v)
{
    c->outs[c->nout++] = v;
}

/* ‖got − want‖ / (1e-5·‖want‖ + 1e-6·√n): at most 1 passes. Also gives the plain normwise
 * relative error for the report, or −1 where the reference is ~0 (below 1e-4·√n) and a
 * relative error says nothing. */
static double error_ratio(const float *got, const float *want, int64_t n, double *relative)
{
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < n; i++) {
        diff += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        norm += (double)want[i] * want[i];
    }
    *relative = sqrt(norm) > 1e-4 * sqrt((double)n) ? sqrt(diff / norm) : -1;
    return sqrt(diff) / (RTOL * sqrt(norm) + ATOL * sqrt((double)n));
}

/* Adds the loss, runs, compares; returns the worst normwise error seen. */
static double run_case(struct fx *c)
{
    struct tr_graph *g = &c->g;
    int loss = -1, w[4];
    for (int k = 0; k < c->nout; k++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", k);
        struct tr_dim n = tr_shape_numel(&g->values[c->outs[k]].shape);
        int flat = tr_reshape(g, c->outs[k], 2, (struct tr_dim[]){tr_dim_const(1), n});
        w[k] = tr_input(g, name, TR_F32, 2, (struct tr_dim[]){n, tr_dim_const(1)});
        int part = tr_matmul(g, flat, w[k], 0, 0);
        loss = loss < 0 ? part : tr_add(g, loss, part);
    }
    tr_graph_set_loss(g, tr_reshape(g, loss, 1, (struct tr_dim[]){tr_dim_const(1)}));
    int scale = tr_autodiff(g);
    ck_assert_msg(scale >= 0, "%s: %s", c->name, g->message);
    struct tr_program p;
    int keep[5] = {g->loss};
    memcpy(keep + 1, c->outs, (size_t)c->nout * sizeof(int));
    struct tr_bucket bucket = {c->B, c->S};
    ck_assert_int_eq(tr_program_plan(&p, g, &bucket, 1, keep, 1 + c->nout, tr_cpu_ops.workspace_bytes, false), 0);
    struct tr_exec x = {.g = g, .schedule = p.schedule, .n = p.n, .plan = &p.plans[0],
                        .be = tr_backend_cpu(), .debug = true};
    for (int k = 0; k < TR_NKINDS; k++)
        x.base[k] = calloc(p.region_bytes[k] + 64, 1);
    x.workspace = calloc(p.workspace_bytes + 64, 1);
    for (int i = 0; i < c->nleaves; i++)
        memcpy(tr_exec_data(&x, c->leaves[i]), ref(c, c->leaf_names[i])->data, ref(c, c->leaf_names[i])->bytes);
    for (int k = 0; k < c->nout; k++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", k);
        memcpy(tr_exec_data(&x, w[k]), ref(c, name)->data, ref(c, name)->bytes);
    }
    *(float *)tr_exec_data(&x, scale) = 1;
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_run(&x, c->B, c->S, &why) == 0, "%s: %s", c->name, tr_diag_last(&why));
    double worst = 0;
    for (int k = 0; k < c->nout; k++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", k);
        const struct tr_st_tensor *want = ref(c, name);
        double e, ratio = error_ratio(tr_exec_data(&x, c->outs[k]), want->data, (int64_t)(want->bytes / 4), &e);
        ck_assert_msg(ratio <= 1, "%s: output %d: normwise error %.3g", c->name, k, e);
        worst = e > worst ? e : worst;
    }
    for (int i = 0; i < c->nleaves; i++) {
        int v = c->leaves[i];
        if (g->values[v].kind != TR_PARAM)
            continue;
        char name[64];
        snprintf(name, sizeof name, "grad.%s", c->leaf_names[i]);
        const struct tr_st_tensor *want = ref(c, name);
        double e, ratio = error_ratio(tr_exec_data(&x, g->values[v].grad), want->data, (int64_t)(want->bytes / 4), &e);
        ck_assert_msg(ratio <= 1, "%s: gradient of %s: normwise error %.3g (bound ratio %.3g)",
                      c->name, c->leaf_names[i], e, ratio);
        worst = e > worst ? e : worst;
    }
    if (!strcmp(c->name, "batchnorm")) {   /* the running statistics PyTorch updated */
        for (int i = 0; i < 2; i++) {
            const char *stat = i ? "running_var" : "running_mean";
            char after[40];
            snprintf(after, sizeof after, "%s_after", stat);
            int v = -1;
            for (int j = 0; j < c->nleaves; j++)
                if (!strcmp(c->leaf_names[j], stat))
                    v = c->leaves[j];
            double e, ratio = error_ratio(tr_exec_data(&x, v), ref(c, after)->data, 3, &e);
            ck_assert_msg(ratio <= 1, "batchnorm: %s: normwise error %.3g", stat, e);
        }
    }
    for (int k = 0; k < TR_NKINDS; k++)
        free(x.base[k]);
    free(x.workspace);
    tr_exec_free(&x);
    tr_program_free(&p);
    return worst;
}

/* ---- the cases: each builds its op from fixture-shaped leaves ------------------------------- */

static void build(struct fx *c)
{
    struct tr_graph *g = &c->g;
    const char *n = c->name;
    if (!strcmp(n, "matmul") || !strcmp(n, "bmm"))
        output(c, tr_matmul(g, param(c, "a"), param(c, "b"), 0, 0));
    else if (!strcmp(n, "matmul_tb"))
        output(c, tr_matmul(g, param(c, "a"), param(c, "b"), 0, 1));
    else if (!strcmp(n, "bias_add"))
        output(c, tr_bias_add(g, param(c, "x"), param(c, "bias")));
    else if (!strcmp(n, "add"))
        output(c, tr_add(g, param(c, "a"), param(c, "b")));
    else if (!strcmp(n, "mul"))
        output(c, tr_mul(g, param(c, "a"), param(c, "b")));
    else if (!strcmp(n, "scale"))
        output(c, tr_scale(g, param(c, "x"), 0.37f));
    else if (!strcmp(n, "relu"))
        output(c, tr_relu(g, param(c, "x")));
    else if (!strcmp(n, "tanh"))
        output(c, tr_tanh(g, param(c, "x")));
    else if (!strcmp(n, "gelu") || !strcmp(n, "gelu_tanh"))
        output(c, tr_gelu(g, param(c, "x"), !strcmp(n, "gelu_tanh")));
    else if (!strcmp(n, "softmax"))
        output(c, tr_softmax(g, param(c, "x")));
    else if (!strcmp(n, "log_softmax"))
        output(c, tr_log_softmax(g, param(c, "x")));
    else if (!strcmp(n, "cross_entropy"))
        output(c, tr_cross_entropy(g, param(c, "x"), input(c, "t"), -100));
    else if (!strcmp(n, "layernorm"))
        output(c, tr_layernorm(g, param(c, "x"), param(c, "gamma"), param(c, "beta"), 1e-5f));
    else if (!strcmp(n, "embedding"))
        output(c, tr_embedding(g, param(c, "table"), input(c, "ids")));
    else if (!strncmp(n, "attention", 9))
        output(c, tr_attention(g, param(c, "q"), param(c, "k"), param(c, "v"), input(c, "mask"),
                               !strcmp(n, "attention_causal")));
    else if (!strcmp(n, "conv2d"))
        output(c, tr_conv2d(g, param(c, "x"), param(c, "w"), 2, 1));
    else if (!strcmp(n, "maxpool"))
        output(c, tr_maxpool(g, param(c, "x"), 3, 2, 1));
    else if (!strcmp(n, "avgpool"))
        output(c, tr_avgpool(g, param(c, "x"), 2, 2, 0));
    else if (!strcmp(n, "global_avgpool"))
        output(c, tr_global_avgpool(g, param(c, "x")));
    else if (!strcmp(n, "batchnorm")) {
        int x = param(c, "x"), gamma = param(c, "gamma"), beta = param(c, "beta");
        int mean = leaf(c, TR_STATE, "running_mean"), var = leaf(c, TR_STATE, "running_var");
        output(c, tr_batchnorm(g, x, gamma, beta, mean, var, 1e-5f, 0.1f, 1));
    } else if (!strcmp(n, "permute"))
        output(c, tr_permute(g, param(c, "x"), (int[]){2, 0, 1}));
    else if (!strcmp(n, "slice"))
        output(c, tr_slice(g, param(c, "x"), 1, 2, 3));
    else if (!strcmp(n, "concat"))
        output(c, tr_concat(g, (int[]){param(c, "a"), param(c, "b")}, 2, 1));
    else if (!strcmp(n, "gather"))
        output(c, tr_gather(g, param(c, "x"), input(c, "ids")));
    else if (!strcmp(n, "masked_fill"))
        output(c, tr_masked_fill(g, param(c, "x"), input(c, "mask"), -7.0f));
    else if (!strcmp(n, "sum_axis"))
        output(c, tr_sum(g, param(c, "x"), 1));
    else if (!strcmp(n, "mean_axis"))
        output(c, tr_mean(g, param(c, "x"), 0));
    else if (!strcmp(n, "sum_all"))
        output(c, tr_sum(g, param(c, "x"), -1));
    else
        ck_abort_msg("no builder for case %s", n);
}

static const char *const op_names[] = {
    "matmul", "matmul_tb", "bmm", "bias_add", "add", "mul", "scale", "relu", "tanh", "gelu",
    "gelu_tanh", "softmax", "log_softmax", "cross_entropy", "layernorm", "embedding", "attention",
    "attention_causal", "conv2d", "maxpool", "avgpool", "global_avgpool", "batchnorm", "permute",
    "slice", "concat", "gather", "masked_fill", "sum_axis", "mean_axis", "sum_all",
};

START_TEST(op_matches_pytorch)
{
    struct fx c = {.st = &ops, .name = op_names[_i], .B = 1, .S = 1};
    tr_graph_init(&c.g);
    build(&c);
    ck_assert_msg(!c.g.error, "%s: %s", c.name, c.g.message);
    double e = run_case(&c);
    printf("%-18s worst normwise error %.2e\n", c.name, e);
    tr_graph_free(&c.g);
}
END_TEST

/* The transformer block of tests/models.h (dropout off) against PyTorch's. The block's input x
 * is data ([B, S, D], symbolic), so its gradient is not computed; every parameter's is. */
START_TEST(bert_block_matches_pytorch)
{
    struct fx c = {.st = &blocks, .name = "bert_block"};
    tr_graph_init(&c.g);
    int x = input_bs(&c, "x", 3), mask = input_bs(&c, "mask", 2);
    const char *pnames[] = {"l0.q.weight", "l0.q.bias", "l0.k.weight", "l0.k.bias", "l0.v.weight",
                            "l0.v.bias", "l0.o.weight", "l0.o.bias", "l0.ffn1.weight", "l0.ffn1.bias",
                            "l0.ffn2.weight", "l0.ffn2.bias", "l0.ln1.weight", "l0.ln1.bias",
                            "l0.ln2.weight", "l0.ln2.bias"};
    output(&c, model_bert_block(&c.g, TR_F32, 0, x, mask, 16, 2, 32, 0.0f));
    ck_assert_msg(!c.g.error, "%s", c.g.message);
    /* the builder made the parameters; register them as leaves so they are filled and checked */
    for (size_t i = 0; i < sizeof pnames / sizeof pnames[0]; i++)
        for (int v = 0; v < c.g.nvalues; v++)
            if (c.g.values[v].kind == TR_PARAM && !strcmp(c.g.values[v].name, pnames[i]) && c.nleaves < 32) {
                snprintf(c.leaf_names[c.nleaves], sizeof c.leaf_names[0], "%s", pnames[i]);
                c.leaves[c.nleaves++] = v;
            }
    ck_assert_int_eq(c.nleaves, 18);
    printf("%-18s worst normwise error %.2e\n", c.name, run_case(&c));
    tr_graph_free(&c.g);
}
END_TEST

/* conv3×3 → BN → ReLU → conv3×3 → BN → + x → ReLU, batch norm in training mode. */
START_TEST(conv_block_matches_pytorch)
{
    struct fx c = {.st = &blocks, .name = "conv_block", .B = 1, .S = 1};
    struct tr_graph *g = &c.g;
    tr_graph_init(g);
    int x = param(&c, "x");
    int y = x;
    for (int i = 1; i <= 2; i++) {
        char w[16], gw[16], gb[16], rm[16], rv[16];
        snprintf(w, sizeof w, "conv%d.weight", i);
        snprintf(gw, sizeof gw, "bn%d.weight", i);
        snprintf(gb, sizeof gb, "bn%d.bias", i);
        snprintf(rm, sizeof rm, "bn%d.mean", i);
        snprintf(rv, sizeof rv, "bn%d.var", i);
        int mean = tr_state(g, rm, TR_F32, 1, (struct tr_dim[]){tr_dim_const(4)});
        int var = tr_state(g, rv, TR_F32, 1, (struct tr_dim[]){tr_dim_const(4)});
        y = tr_batchnorm(g, tr_conv2d(g, y, param(&c, w), 1, 1), param(&c, gw), param(&c, gb), mean, var,
                         1e-5f, 0.1f, 1);
        y = i == 1 ? tr_relu(g, y) : tr_relu(g, tr_add(g, y, x));
    }
    output(&c, y);
    ck_assert_msg(!g->error, "%s", g->message);
    printf("%-18s worst normwise error %.2e\n", c.name, run_case(&c));
    tr_graph_free(g);
}
END_TEST

static void open_fixture(struct tr_safetensors *st, const char *file)
{
    const char *srcdir = getenv("srcdir");
    char path[4096];
    struct tr_diag err = {0};
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", srcdir ? srcdir : ".", file);
    if (tr_st_open(st, path, &err)) {
        fprintf(stderr, "%s\n", tr_diag_last(&err));
        exit(EXIT_FAILURE);
    }
    tr_diag_free(&err);
}

int main(void)
{
    open_fixture(&ops, "ops.safetensors");
    open_fixture(&blocks, "blocks.safetensors");
    Suite *s = suite_create("fixtures");
    TCase *tc = tcase_create("pytorch");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, op_matches_pytorch, 0, (int)(sizeof op_names / sizeof op_names[0]));
    tcase_add_test(tc, bert_block_matches_pytorch);
    tcase_add_test(tc, conv_block_matches_pytorch);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);   /* print each case's error in order */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tr_st_close(&ops);
    tr_st_close(&blocks);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
