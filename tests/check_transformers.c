/* The transformer models of src/models/ (bert.c, gpt.c) against PyTorch: a tiny BERT classifier
 * and a tiny GPT-2 language model built by the real builders from a recipe, given the weights,
 * inputs and targets of tests/fixtures/make_transformer_fixtures.py (plain PyTorch with Hugging
 * Face's module structure and names, computed in f64), must give its logits, loss and every
 * parameter's gradient within 1e-4 normwise (‖got − want‖ ≤ 1e-4·‖want‖ + 1e-6·√n: the key
 * biases' gradients are zero in exact arithmetic, softmax ignoring what shifts a whole row, so
 * only an absolute bound says anything about them). Parameters are looked up by name, so a name
 * that differs from Hugging Face's fails here. */
#include "runner.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "core/safetensors.h"
#include "graph/program.h"
#include "models/models.h"

#define TOLERANCE 1e-4

static double tolerance = TOLERANCE;   /* the amp runs': 16-bit storage, looser */

static struct tr_safetensors fx;

static const struct tr_st_tensor *ref(const char *model, const char *what)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", model, what);
    const struct tr_st_tensor *t = tr_st_find(&fx, full);
    ck_assert_msg(t != NULL, "fixture %s is missing", full);
    return t;
}

/* The normwise relative error; *ok when within the bound above. */
static double normwise(const float *got, const float *want, int64_t n, int *ok)
{
    *ok = unit_distance(got, want, n) <= tolerance * unit_norm(want, n) + 1e-6 * sqrt((double)n);
    return unit_normwise(got, want, n);
}

static void feed(struct tr_exec *x, int v, const char *model, const char *name)
{
    const struct tr_st_tensor *t = ref(model, name);
    memcpy(tr_exec_data(x, v), t->data, t->bytes);
}

/* amp: TR_F32, or the 16-bit type the amp pass stores activations in. */
static void check_model(enum tr_arch arch, const char *model, enum tr_dtype amp)
{
    struct tr_recipe r;
    tr_recipe_init(&r);
    r.model.arch = arch;
    r.model.layers = 2, r.model.hidden = 16, r.model.heads = 2, r.model.ffn = 32, r.model.max_len = 16;
    r.model.dropout = 0;
    const int64_t B = 2, S = 7, V = 50;
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    tr_model_build(&g, &r, 0, NULL, 3, V, 1, &m);
    tr_model_logits(&g, &m);   /* gpt's, otherwise fused with the loss */
    if (amp != TR_F32)
        tr_amp(&g, amp, &m.logits, 1, true);   /* weights rounded too, as on 16-bit GEMM hardware */
    ck_assert_msg(!g.error, "%s: %s", model, g.message);
    int scale = tr_autodiff(&g);
    ck_assert_msg(scale >= 0, "%s: %s", model, g.message);
    struct tr_program p;
    int keep[2] = {m.loss, m.logits};
    struct tr_bucket bucket = {B, S};
    ck_assert_int_eq(tr_program_plan(&p, &g, &bucket, 1, keep, 2, tr_cpu_ops.workspace_bytes, false), 0);
    struct tr_rng_ctx rng = {.seed = 1, .step = 1};
    struct tr_exec x = {.g = &g, .schedule = p.schedule, .n = p.n, .plan = &p.plans[0],
                        .be = tr_backend_cpu(), .rng = &rng, .debug = true};
    for (int k = 0; k < TR_NKINDS; k++)
        x.base[k] = calloc(p.region_bytes[k] + 64, 1);
    x.workspace = calloc(p.workspace_bytes + 64, 1);
    int params = 0;
    for (int v = 0; v < g.nvalues; v++)
        if (g.values[v].kind == TR_PARAM) {
            char name[160];
            snprintf(name, sizeof name, "param.%s", g.values[v].name);
            const struct tr_st_tensor *t = ref(model, name);
            ck_assert_msg(t->bytes == (size_t)tr_dim_eval(tr_shape_numel(&g.values[v].shape), 1, 1) * 4,
                          "%s: %s has another shape than Hugging Face's", model, g.values[v].name);
            feed(&x, v, model, name);
            params++;
        }
    feed(&x, m.ids, model, "input.ids");
    feed(&x, m.positions, model, "input.positions");
    feed(&x, m.mask, model, "input.mask");
    feed(&x, m.y, model, "input.y");
    if (m.segments >= 0)
        feed(&x, m.segments, model, "input.segments");
    *(float *)tr_exec_data(&x, scale) = 1;
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_run(&x, B, S, &why) == 0, "%s: %s", model, tr_diag_last(&why));

    const struct tr_st_tensor *logits = ref(model, "logits"), *loss = ref(model, "loss");
    int ok;
    double e = normwise(tr_exec_data(&x, m.logits), logits->data, (int64_t)(logits->bytes / 4), &ok), worst = e;
    char worst_name[96] = "logits";
    ck_assert_msg(ok, "%s: logits differ by %.3g normwise", model, e);
    e = normwise(tr_exec_data(&x, m.loss), loss->data, 1, &ok);
    ck_assert_msg(ok, "%s: loss %.7f, PyTorch %.7f", model, *(float *)tr_exec_data(&x, m.loss),
                  *(const float *)loss->data);
    for (int v = 0; v < g.nvalues; v++)
        if (g.values[v].kind == TR_PARAM) {
            char name[160];
            snprintf(name, sizeof name, "grad.%s", g.values[v].name);
            const struct tr_st_tensor *want = ref(model, name);
            e = normwise(tr_exec_data(&x, g.values[v].grad), want->data, (int64_t)(want->bytes / 4), &ok);
            const char *key = strstr(name, "key.bias");
            if (key && amp != TR_F32) {   /* rounding noise around 0: judged against its neighbour's size */
                char value[160];
                snprintf(value, sizeof value, "%.*svalue.bias", (int)(key - name), name);
                const struct tr_st_tensor *near = ref(model, value);
                ok = unit_distance(tr_exec_data(&x, g.values[v].grad), want->data, (int64_t)(want->bytes / 4)) <=
                     tolerance * unit_norm(near->data, (int64_t)(near->bytes / 4));
            }
            ck_assert_msg(ok, "%s: the gradient of %s differs by %.3g normwise", model, g.values[v].name, e);
            if (!key && e > worst) {   /* key.bias: zero in exact arithmetic, no relative error */
                worst = e;
                snprintf(worst_name, sizeof worst_name, "%s", g.values[v].name);
            }
        }
    printf("%s%s: %d parameters, logits, loss and gradients within %.2g normwise of PyTorch (the worst: %s)\n",
           model, amp == TR_F32 ? "" : amp == TR_BF16 ? " (bf16 amp)" : " (fp16 amp)", params, worst, worst_name);
    for (int k = 0; k < TR_NKINDS; k++)
        free(x.base[k]);
    free(x.workspace);
    tr_exec_free(&x);
    tr_program_free(&p);
    tr_graph_free(&g);
    tr_recipe_free(&r);
}

START_TEST(bert_matches_pytorch) { check_model(TR_ARCH_BERT, "bert", TR_F32); }
END_TEST

START_TEST(gpt_matches_pytorch) { check_model(TR_ARCH_GPT, "gpt", TR_F32); }
END_TEST

/* One step's logits, loss and gradients with 16-bit activations agree with PyTorch's f64 to
 * the 16-bit type's precision: bf16 keeps 8 significant bits (unit roundoff 2^-8 ≈ 3.9e-3),
 * f16 11 (4.9e-4). The worst are bias gradients, sums over every token of 16-bit terms that
 * partly cancel (bf16: layer 0's output.dense.bias, 0.039, 10 units): the bound is 13 units. */
START_TEST(amp_bf16_matches_pytorch)
{
    tolerance = 5e-2;
    check_model(TR_ARCH_BERT, "bert", TR_BF16);
    check_model(TR_ARCH_GPT, "gpt", TR_BF16);
    tolerance = TOLERANCE;
}
END_TEST

START_TEST(amp_fp16_matches_pytorch)
{
    tolerance = 6.5e-3;
    check_model(TR_ARCH_BERT, "bert", TR_F16);
    check_model(TR_ARCH_GPT, "gpt", TR_F16);
    tolerance = TOLERANCE;
}
END_TEST

int main(void)
{
    const char *srcdir = getenv("srcdir");
    char path[4096];
    struct tr_diag err = {0};
    snprintf(path, sizeof path, "%s/tests/fixtures/transformers.safetensors", srcdir ? srcdir : ".");
    if (tr_st_open(&fx, path, &err)) {
        fprintf(stderr, "%s\n", tr_diag_last(&err));
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("transformers");
    TCase *tc = tcase_create("against pytorch");
    tcase_add_test(tc, bert_matches_pytorch);
    tcase_add_test(tc, gpt_matches_pytorch);
    tcase_add_test(tc, amp_bf16_matches_pytorch);
    tcase_add_test(tc, amp_fp16_matches_pytorch);
    suite_add_tcase(s, tc);
    int rc = unit_run(s);
    tr_st_close(&fx);
    tr_diag_free(&err);
    return rc;
}
