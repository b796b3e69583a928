/* Generation (src/models/gpt_decode.c) against the training graph: the tiny GPT-2 of
 * tests/fixtures/transformers.safetensors (V 50, D 16, H 2, FF 32, L 2, P 16; weights
 * "gpt.param.<name>", two 7-token sequences "gpt.input.ids") run by the real builder and executor
 * for a whole window, and by the key/value-cached decoder one token at a time, must give the same
 * logits at every position within 1e-5 normwise (‖got − want‖ ≤ 1e-5·‖want‖), for each
 * activation; fed in batches, after a reset, the same. Then the sampler: temperature 0 is the
 * argmax, top-k draws only among the k best, the draws follow softmax(logit / T), and a seed
 * gives one sequence of tokens, always. */
#include "runner.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "core/safetensors.h"
#include "graph/program.h"
#include "models/gpt_decode.h"
#include "models/models.h"

#define TOLERANCE 1e-5
enum { B = 2, S = 7, V = 50 };

static struct tr_safetensors fx;

static const struct tr_st_tensor *fixture(const char *name)
{
    const struct tr_st_tensor *t = tr_st_find(&fx, name);
    ck_assert_msg(t != NULL, "fixture %s is missing", name);
    return t;
}

static void tiny_gpt(struct tr_recipe *r, int activation)
{
    tr_recipe_init(r);
    r->model.arch = TR_ARCH_GPT;
    r->model.layers = 2, r->model.hidden = 16, r->model.heads = 2, r->model.ffn = 32, r->model.max_len = 16;
    r->model.dropout = 0;
    r->model.activation = activation;
}

/* The evaluation graph's logits [B, S, V] for the fixture's weights and ids, as the trainer
 * builds and runs it. */
static void graph_logits(const struct tr_recipe *r, float *out)
{
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    tr_model_build(&g, r, 0, NULL, 0, V, 0, &m);
    tr_model_logits(&g, &m);   /* fused with the loss otherwise */
    ck_assert_msg(!g.error, "%s", g.message);
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
    for (int v = 0; v < g.nvalues; v++)
        if (g.values[v].kind == TR_PARAM) {
            char name[160];
            snprintf(name, sizeof name, "gpt.param.%s", g.values[v].name);
            const struct tr_st_tensor *t = fixture(name);
            memcpy(tr_exec_data(&x, v), t->data, t->bytes);
        }
    memcpy(tr_exec_data(&x, m.ids), fixture("gpt.input.ids")->data, fixture("gpt.input.ids")->bytes);
    memcpy(tr_exec_data(&x, m.positions), fixture("gpt.input.positions")->data,
           fixture("gpt.input.positions")->bytes);
    memcpy(tr_exec_data(&x, m.mask), fixture("gpt.input.mask")->data, fixture("gpt.input.mask")->bytes);
    memcpy(tr_exec_data(&x, m.y), fixture("gpt.input.y")->data, fixture("gpt.input.y")->bytes);
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_run(&x, B, S, &why) == 0, "%s", tr_diag_last(&why));
    memcpy(out, tr_exec_data(&x, m.logits), sizeof(float) * B * S * V);
    for (int k = 0; k < TR_NKINDS; k++)
        free(x.base[k]);
    free(x.workspace);
    tr_exec_free(&x);
    tr_program_free(&p);
    tr_graph_free(&g);
}

static const int32_t *ids_of(int b)
{
    return (const int32_t *)fixture("gpt.input.ids")->data + b * S;
}

static void decoder(struct tr_gpt_decoder *d, const struct tr_recipe *r)
{
    struct tr_diag err = {0};
    ck_assert_msg(tr_gpt_decoder_init(d, r, &fx, "gpt.param.", &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(d->vocab, V);
    tr_diag_free(&err);
}

/* Feeds ids[from, to) of sequence b in one batch; the logits must be the graph's at to − 1. */
static double feed_and_compare(struct tr_gpt_decoder *d, const float *want, int b, int from, int to)
{
    struct tr_diag err = {0};
    ck_assert_msg(tr_gpt_decoder_feed(d, ids_of(b) + from, to - from, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(d->t, to);
    double e = unit_normwise(d->logits, want + ((int64_t)b * S + to - 1) * V, V);
    ck_assert_msg(e <= TOLERANCE, "sequence %d, position %d (fed %d..%d): logits differ by %.3g normwise", b,
                  to - 1, from, to - 1, e);
    tr_diag_free(&err);
    return e;
}

static void check_against_graph(int activation)
{
    struct tr_recipe r;
    tiny_gpt(&r, activation);
    float *want = malloc(sizeof(float) * B * S * V);
    graph_logits(&r, want);
    struct tr_gpt_decoder d;
    decoder(&d, &r);
    double worst = 0;
    for (int b = 0; b < B; b++) {
        tr_gpt_decoder_reset(&d);
        for (int t = 0; t < S; t++)   /* one token at a time: every position */
            worst = fmax(worst, feed_and_compare(&d, want, b, t, t + 1));
        tr_gpt_decoder_reset(&d);   /* a batch of 4 then single steps: the cache joins them */
        worst = fmax(worst, feed_and_compare(&d, want, b, 0, 4));
        for (int t = 4; t < S; t++)
            worst = fmax(worst, feed_and_compare(&d, want, b, t, t + 1));
        tr_gpt_decoder_reset(&d);   /* the whole window at once */
        worst = fmax(worst, feed_and_compare(&d, want, b, 0, S));
    }
    printf("activation %d: decoder logits within %.2g normwise of the graph's at all %d positions\n", activation,
           worst, B * S);
    tr_gpt_decoder_free(&d);
    tr_recipe_free(&r);
    free(want);
}

START_TEST(decoder_matches_graph)
{
    check_against_graph(TR_ACT_AUTO);
}
END_TEST

START_TEST(decoder_matches_graph_other_activations)
{
    check_against_graph(TR_ACT_GELU);
    check_against_graph(TR_ACT_RELU);
}
END_TEST

/* The graph is checked against PyTorch in check_transformers.c; here only the decoder's last
 * position against PyTorch's directly, as a second witness. */
START_TEST(decoder_matches_pytorch)
{
    struct tr_recipe r;
    tiny_gpt(&r, TR_ACT_AUTO);
    struct tr_gpt_decoder d;
    decoder(&d, &r);
    const float *torch = fixture("gpt.logits")->data;
    struct tr_diag err = {0};
    for (int b = 0; b < B; b++) {
        tr_gpt_decoder_reset(&d);
        ck_assert_int_eq(tr_gpt_decoder_feed(&d, ids_of(b), S, &err), 0);
        double e = unit_normwise(d.logits, torch + ((int64_t)b * S + S - 1) * V, V);
        ck_assert_msg(e <= 1e-4, "sequence %d: %.3g normwise from PyTorch", b, e);
    }
    tr_gpt_decoder_free(&d);
    tr_recipe_free(&r);
    tr_diag_free(&err);
}
END_TEST

START_TEST(decoder_refuses_what_does_not_fit)
{
    struct tr_recipe r;
    tiny_gpt(&r, TR_ACT_AUTO);
    struct tr_gpt_decoder d;
    decoder(&d, &r);
    struct tr_diag err = {0};
    int32_t ids[17] = {0};
    ck_assert_int_eq(tr_gpt_decoder_feed(&d, ids, 17, &err), TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&err), "context of 16"), "%s", tr_diag_last(&err));
    ck_assert_int_eq(tr_gpt_decoder_feed(&d, ids, 16, &err), 0);
    ck_assert_int_eq(tr_gpt_decoder_feed(&d, ids, 1, &err), TR_EINVAL);   /* the window is full */
    tr_gpt_decoder_reset(&d);
    ids[3] = V;
    ck_assert_int_eq(tr_gpt_decoder_feed(&d, ids, 4, &err), TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&err), "token id 50"), "%s", tr_diag_last(&err));
    ids[3] = -1;
    ck_assert_int_eq(tr_gpt_decoder_feed(&d, ids, 4, &err), TR_EINVAL);
    tr_gpt_decoder_free(&d);

    r.model.hidden = 32;   /* another shape than the weights: named, nothing kept */
    ck_assert_int_eq(tr_gpt_decoder_init(&d, &r, &fx, "gpt.param.", &err), TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&err), "gpt.param.transformer.wte.weight is F32 [50, 16]; the recipe's model needs F32 "
                          "[50, 32]"), "%s", tr_diag_last(&err));
    r.model.hidden = 16, r.model.layers = 3;
    ck_assert_int_eq(tr_gpt_decoder_init(&d, &r, &fx, "gpt.param.", &err), TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&err), "gpt.param.transformer.h.2.ln_1.weight is missing"), "%s", tr_diag_last(&err));
    r.model.layers = 2;
    ck_assert_int_eq(tr_gpt_decoder_init(&d, &r, &fx, "", &err), TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&err), "transformer.wte.weight is missing"), "%s", tr_diag_last(&err));
    tr_recipe_free(&r);
    tr_diag_free(&err);
}
END_TEST

/* A file whose tensors are not 4-byte aligned (safetensors.h allows it) gives the same logits:
 * the fixture parsed from one byte into a buffer. */
START_TEST(unaligned_weights_are_copied)
{
    const char *srcdir = getenv("srcdir");
    char path[4096];
    struct tr_diag err = {0};
    snprintf(path, sizeof path, "%s/tests/fixtures/transformers.safetensors", srcdir ? srcdir : ".");
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = malloc(1 << 20);
    size_t len = fread(buf + 1, 1, (1 << 20) - 1, f);
    fclose(f);
    ck_assert(len > 0 && len < (1 << 20) - 1);
    struct tr_safetensors odd;
    ck_assert_msg(tr_st_parse(&odd, buf + 1, len, "odd", &err) == 0, "%s", tr_diag_last(&err));
    struct tr_recipe r;
    tiny_gpt(&r, TR_ACT_AUTO);
    struct tr_gpt_decoder aligned, copied;
    decoder(&aligned, &r);
    ck_assert_msg(tr_gpt_decoder_init(&copied, &r, &odd, "gpt.param.", &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_gt(copied.ncopies, 0);
    ck_assert_int_eq(tr_gpt_decoder_feed(&aligned, ids_of(0), S, &err), 0);
    ck_assert_int_eq(tr_gpt_decoder_feed(&copied, ids_of(0), S, &err), 0);
    ck_assert_mem_eq(aligned.logits, copied.logits, sizeof(float) * V);
    tr_gpt_decoder_free(&aligned);
    tr_gpt_decoder_free(&copied);
    tr_st_close(&odd);
    tr_recipe_free(&r);
    free(buf);
    tr_diag_free(&err);
}
END_TEST

/* Temperature 0 takes the likeliest token, at every position of the decoded sequences. */
START_TEST(greedy_is_argmax)
{
    struct tr_recipe r;
    tiny_gpt(&r, TR_ACT_AUTO);
    struct tr_gpt_decoder d;
    decoder(&d, &r);
    struct tr_sampler greedy, top1;
    tr_sampler_init(&greedy, V, 0, 40, 7);
    tr_sampler_init(&top1, V, 1.0, 1, 7);   /* top-1 at any temperature is greedy too */
    struct tr_diag err = {0};
    for (int b = 0; b < B; b++) {
        tr_gpt_decoder_reset(&d);
        for (int t = 0; t < S; t++) {
            ck_assert_int_eq(tr_gpt_decoder_feed(&d, ids_of(b) + t, 1, &err), 0);
            int best = 0;
            for (int i = 1; i < V; i++)
                best = d.logits[i] > d.logits[best] ? i : best;
            ck_assert_int_eq(tr_sampler_next(&greedy, d.logits), best);
            ck_assert_int_eq(tr_sampler_next(&top1, d.logits), best);
        }
    }
    float ties[V] = {0};
    ties[7] = ties[3] = ties[40] = 2;   /* equals: the lowest id */
    ck_assert_int_eq(tr_sampler_next(&greedy, ties), 3);
    ck_assert_int_eq(tr_sampler_next(&top1, ties), 3);
    tr_sampler_free(&greedy);
    tr_sampler_free(&top1);
    tr_gpt_decoder_free(&d);
    tr_recipe_free(&r);
    tr_diag_free(&err);
}
END_TEST

/* Draws follow softmax(logit / T) over the top k and never leave them: 40000 draws against the
 * expected counts (each within 5 standard deviations). */
static void check_distribution(double temperature, int64_t k)
{
    enum { DRAWS = 40000 };
    float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = (float)((i * 37) % V) / 10.0f;   /* distinct values, not in id order */
    double p[V] = {0}, total = 0, threshold;
    float sorted[V];
    memcpy(sorted, logits, sizeof sorted);
    for (int i = 0; i < V; i++)   /* the k-th largest logit */
        for (int j = i + 1; j < V; j++)
            if (sorted[j] > sorted[i]) {
                float swap = sorted[i];
                sorted[i] = sorted[j], sorted[j] = swap;
            }
    threshold = sorted[(k > 0 && k < V ? k : V) - 1];
    for (int i = 0; i < V; i++)
        if (logits[i] >= threshold)
            total += p[i] = exp((logits[i] - sorted[0]) / temperature);
    struct tr_sampler s;
    tr_sampler_init(&s, V, temperature, k, 12345);
    int count[V] = {0};
    for (int n = 0; n < DRAWS; n++) {
        int32_t id = tr_sampler_next(&s, logits);
        ck_assert(id >= 0 && id < V);
        count[id]++;
    }
    for (int i = 0; i < V; i++) {
        double expected = DRAWS * p[i] / total, sd = sqrt(expected * (1 - p[i] / total));
        if (p[i] == 0)
            ck_assert_msg(count[i] == 0, "T %g, top-%lld: token %d outside the top k drawn %d times", temperature,
                          (long long)k, i, count[i]);
        else
            ck_assert_msg(fabs(count[i] - expected) <= 5 * sd + 1, "T %g, top-%lld: token %d drawn %d times, "
                          "expected %.1f", temperature, (long long)k, i, count[i], expected);
    }
    tr_sampler_free(&s);
}

START_TEST(draws_follow_the_distribution)
{
    check_distribution(1.0, 0);
    check_distribution(1.0, 5);
    check_distribution(0.5, 10);
    check_distribution(3.0, 0);
    check_distribution(1.0, V + 10);   /* more than the vocabulary: all */
}
END_TEST

START_TEST(a_seed_is_one_sequence)
{
    float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = (float)sin(i);
    int32_t first[64], again[64], other[64];
    struct tr_sampler a, b, c;
    tr_sampler_init(&a, V, 1.0, 0, 42);
    tr_sampler_init(&b, V, 1.0, 0, 42);
    tr_sampler_init(&c, V, 1.0, 0, 43);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        first[i] = tr_sampler_next(&a, logits);
        again[i] = tr_sampler_next(&b, logits);
        other[i] = tr_sampler_next(&c, logits);
        ck_assert_int_eq(first[i], again[i]);
        differ += first[i] != other[i];
    }
    ck_assert_msg(differ > 32, "seeds 42 and 43 agree on %d of 64 draws", 64 - differ);
    struct tr_sampler all, k_is_v;   /* top-k 0 and top-k V are one distribution, drawn alike */
    tr_sampler_init(&all, V, 1.0, 0, 9);
    tr_sampler_init(&k_is_v, V, 1.0, V, 9);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(tr_sampler_next(&all, logits), tr_sampler_next(&k_is_v, logits));
    tr_sampler_free(&a), tr_sampler_free(&b), tr_sampler_free(&c);
    tr_sampler_free(&all), tr_sampler_free(&k_is_v);
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
    Suite *s = suite_create("sample");
    TCase *decode = tcase_create("decoder");
    tcase_add_test(decode, decoder_matches_graph);
    tcase_add_test(decode, decoder_matches_graph_other_activations);
    tcase_add_test(decode, decoder_matches_pytorch);
    tcase_add_test(decode, decoder_refuses_what_does_not_fit);
    tcase_add_test(decode, unaligned_weights_are_copied);
    suite_add_tcase(s, decode);
    TCase *sampler = tcase_create("sampler");
    tcase_add_test(sampler, greedy_is_argmax);
    tcase_add_test(sampler, draws_follow_the_distribution);
    tcase_add_test(sampler, a_seed_is_one_sequence);
    suite_add_tcase(s, sampler);
    int rc = unit_run(s);
    tr_st_close(&fx);
    tr_diag_free(&err);
    return rc;
}
