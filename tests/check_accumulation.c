/* Gradient accumulation (src/train/step.c) with dropout on: a step of 32 samples cut into
 * micro-batches — 4 of 8, or 5 + 11 + 16 sorted by length so that each is padded to another
 * length and runs on another plan of the program — must give the gradients of one batch of 32,
 * for a tiny BERT classifier (losses normalised by samples) and a tiny GPT language model with
 * sequences of unequal lengths (normalised by target tokens: a mean per micro-batch weighted by
 * its share of samples would be off by far more). Dropout masks are keyed by the sample's id
 * (core/rng.h), so they are the same however the step is cut; what is left is f32 summation
 * order, bounded by 1e-6 normwise. The executor runs in debug mode: on every plan, no kernel
 * writes outside its outputs. */
#include "runner.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "graph/program.h"
#include "models/models.h"
#include "train/init.h"
#include "train/step.h"

#define TOLERANCE 1e-6
enum { N = 32, MAXLEN = 16, V = 50, CLASSES = 3 };

struct harness {
    struct tr_recipe r;
    struct tr_graph g;
    struct tr_model m;
    struct tr_program p;
    struct tr_exec x;
    struct tr_rng_ctx rng;
    struct tr_step_runner runner;
    int lm;
    int64_t len[N];                 /* sample i: len[i] tokens */
    int32_t tokens[N][MAXLEN + 1];  /* and, for the language model, one more: the last target */
    int32_t label[N];
};

/* Buckets (B, S): one for the whole batch, and smaller ones the micro-batches fit. */
static const struct tr_bucket buckets[] = {{N, MAXLEN}, {16, MAXLEN}, {8, MAXLEN}, {8, 6}};

static void setup(struct harness *h, enum tr_arch arch)
{
    memset(h, 0, sizeof *h);
    tr_recipe_init(&h->r);
    h->r.model.arch = arch;
    h->r.model.layers = 2, h->r.model.hidden = 16, h->r.model.heads = 2, h->r.model.ffn = 32;
    h->r.model.max_len = MAXLEN, h->r.model.dropout = 0.1;
    h->lm = arch == TR_ARCH_GPT;
    tr_graph_init(&h->g);
    tr_model_build(&h->g, &h->r, 0, NULL, CLASSES, V, 1, &h->m);
    ck_assert_msg(!h->g.error, "%s", h->g.message);
    int scale = tr_autodiff(&h->g);
    ck_assert_msg(scale >= 0, "%s", h->g.message);
    int keep[2] = {h->m.loss, h->m.logits >= 0 ? h->m.logits : h->m.rank};
    ck_assert_int_eq(tr_program_plan(&h->p, &h->g, buckets, 4, keep, 2, tr_cpu_ops.workspace_bytes, false), 0);
    h->rng = (struct tr_rng_ctx){.seed = 42};
    h->x = (struct tr_exec){.g = &h->g, .schedule = h->p.schedule, .n = h->p.n, .plan = &h->p.plans[0],
                            .be = tr_backend_cpu(), .rng = &h->rng, .debug = true};
    for (int k = 0; k < TR_NKINDS; k++)
        h->x.base[k] = calloc(h->p.region_bytes[k] + 64, 1);
    h->x.workspace = calloc(h->p.workspace_bytes + 64, 1);
    tr_init_random(&(struct tr_init_target){.g = &h->g, .x = &h->x, .seed = 7, .vocab = V, .max_len = MAXLEN},
                   &(struct tr_diag){0});
    h->runner = (struct tr_step_runner){.x = &h->x, .p = &h->p, .m = &h->m, .loss_scale = scale, .lm = h->lm,
                                        .rng = &h->rng};
    uint32_t state = 12345;
    for (int i = 0; i < N; i++) {
        h->len[i] = 3 + (i * 5) % (MAXLEN - 2);   /* 3 … 16, every length about twice */
        for (int j = 0; j <= MAXLEN; j++) {
            state = state * 1664525u + 1013904223u;
            h->tokens[i][j] = 1 + (int32_t)((state >> 8) % (V - 1));
        }
        h->label[i] = (int32_t)(i % CLASSES);
    }
}

static void teardown(struct harness *h)
{
    for (int k = 0; k < TR_NKINDS; k++)
        free(h->x.base[k]);
    free(h->x.workspace);
    free(h->x.shadow);
    tr_program_free(&h->p);
    tr_graph_free(&h->g);
    tr_recipe_free(&h->r);
}

/* The micro-batch of samples ids[0..n), padded to its longest: the language model's targets
 * are the next tokens, −100 (none) on the padding. */
static struct tr_batch make_batch(const struct harness *h, const int64_t *ids, int64_t n)
{
    int64_t S = 1;
    for (int64_t i = 0; i < n; i++)
        S = h->len[ids[i]] > S ? h->len[ids[i]] : S;
    struct tr_batch b = {.n = n, .S = S, .ids = malloc((size_t)n * sizeof(int64_t)),
                         .y = malloc((size_t)n * sizeof(int32_t)),
                         .tokens = calloc((size_t)(n * S), sizeof(int32_t)),
                         .targets = malloc((size_t)(n * S) * sizeof(int32_t)), .mask = calloc((size_t)(n * S), 1)};
    memcpy(b.ids, ids, (size_t)n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        b.y[i] = h->label[id];
        for (int64_t j = 0; j < S; j++) {
            int real = j < h->len[id];
            b.tokens[i * S + j] = real ? h->tokens[id][j] : 0;
            b.targets[i * S + j] = real ? h->tokens[id][j + 1] : -100;
            b.mask[i * S + j] = (uint8_t)real;
        }
    }
    return b;
}

static void free_batch(struct tr_batch *b)
{
    free(b->ids), free(b->y), free(b->tokens), free(b->targets), free(b->mask);
}

/* The step's gradients (a copy of the region) and loss, the samples order[0..N) cut into
 * micro-batches of sizes[0..nmicro); *ran (when not NULL): whether the runner's rank ran any. */
static float *gradients_ran(struct harness *h, const int64_t *order, const int64_t *sizes, int nmicro, double *loss,
                            bool *ran)
{
    struct tr_batch micro[N];
    int64_t at = 0;
    for (int i = 0; i < nmicro; i++) {
        micro[i] = make_batch(h, order + at, sizes[i]);
        at += sizes[i];
    }
    ck_assert_int_eq(at, N);
    struct tr_step st = {.n = N, .nmicro = nmicro, .micro = micro};
    struct tr_diag why = {0};
    bool mine = false;
    ck_assert_msg(tr_step_gradients(&h->runner, &st, NULL, 3, 1.0, loss, &mine, &why) == 0, "%s",
                  tr_diag_last(&why));
    if (ran)
        *ran = mine;
    for (int i = 0; i < nmicro; i++)
        free_batch(&micro[i]);
    float *g = malloc(h->p.region_bytes[TR_GRAD]);
    memcpy(g, h->x.base[TR_GRAD], h->p.region_bytes[TR_GRAD]);
    return g;
}

static float *gradients(struct harness *h, const int64_t *order, const int64_t *sizes, int nmicro, double *loss)
{
    return gradients_ran(h, order, sizes, nmicro, loss, NULL);
}

static int64_t sort_len[N];   /* qsort has no context argument: the lengths to sort by */

static int shorter(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return sort_len[x] != sort_len[y] ? (sort_len[x] > sort_len[y]) - (sort_len[x] < sort_len[y])
                                      : (x > y) - (x < y);
}

static void check_accumulation(enum tr_arch arch, const char *name)
{
    struct harness h;
    setup(&h, arch);
    int64_t order[N], sorted[N];
    for (int i = 0; i < N; i++)
        order[i] = sorted[i] = i;
    memcpy(sort_len, h.len, sizeof sort_len);
    qsort(sorted, N, sizeof *sorted, shorter);
    double want_loss, loss;
    float *want = gradients(&h, order, (int64_t[]){N}, 1, &want_loss);
    size_t n = h.p.region_bytes[TR_GRAD] / sizeof(float);
    ck_assert(isfinite(want_loss) && want_loss > 0);

    float *got = gradients(&h, order, (int64_t[]){8, 8, 8, 8}, 4, &loss);
    double e = unit_normwise(got, want, n);
    ck_assert_msg(e <= TOLERANCE, "%s: 4 × 8 differs from 1 × 32 by %.3g normwise", name, e);
    ck_assert_msg(fabs(loss - want_loss) <= TOLERANCE * want_loss, "%s: loss %.9g, one batch %.9g", name, loss,
                  want_loss);
    free(got);

    got = gradients(&h, sorted, (int64_t[]){5, 11, 16}, 3, &loss);
    double e2 = unit_normwise(got, want, n);
    ck_assert_msg(e2 <= TOLERANCE, "%s: 5 + 11 + 16 by length differs from 1 × 32 by %.3g normwise", name, e2);
    ck_assert_msg(fabs(loss - want_loss) <= TOLERANCE * want_loss, "%s: loss %.9g, one batch %.9g", name, loss,
                  want_loss);
    free(got);
    printf("%s: 4 × 8 within %.2g, 5 + 11 + 16 of lengths ≤ %lld, %lld, %lld within %.2g of 1 × 32 (dropout 0.1)\n",
           name, e, (long long)h.len[sorted[4]], (long long)h.len[sorted[15]], (long long)h.len[sorted[31]], e2);
    free(want);
    teardown(&h);
}

/* Across ranks (dist/gradients.h): each rank runs its share of the step's micro-batches, weighted
 * by the whole step's targets, so the ranks' gradients and losses add up to one process's; with
 * 4 ranks and 3 micro-batches rank 0 runs none (its gradients zeros, its loss 0, ran false). */
static void check_rank_shares(enum tr_arch arch, const char *name)
{
    struct harness h;
    setup(&h, arch);
    int64_t sorted[N];
    for (int i = 0; i < N; i++)
        sorted[i] = i;
    memcpy(sort_len, h.len, sizeof sort_len);
    qsort(sorted, N, sizeof *sorted, shorter);
    const int64_t sizes[3] = {5, 11, 16};
    double want_loss, loss;
    float *want = gradients(&h, sorted, sizes, 3, &want_loss);
    size_t n = h.p.region_bytes[TR_GRAD] / sizeof(float);
    for (int world = 2; world <= 4; world += 2) {
        float *sum = calloc(n, sizeof *sum);
        double loss_sum = 0;
        for (int rank = 0; rank < world; rank++) {
            h.runner.rank = rank, h.runner.world = world;
            bool ran = false;
            float *got = gradients_ran(&h, sorted, sizes, 3, &loss, &ran);
            ck_assert_msg(ran == !(world == 4 && rank == 0), "%s: rank %d of %d ran: %d", name, rank, world, ran);
            for (size_t i = 0; i < n; i++)
                sum[i] += got[i];
            loss_sum += loss;
            free(got);
        }
        double e = unit_normwise(sum, want, n);
        ck_assert_msg(e <= TOLERANCE, "%s: %d ranks' gradients differ from one process's by %.3g", name, world, e);
        ck_assert_msg(fabs(loss_sum - want_loss) <= TOLERANCE * want_loss, "%s: %d ranks' loss %.9g, one %.9g", name,
                      world, loss_sum, want_loss);
        printf("%s: %d ranks' shares of 5 + 11 + 16 add up to one process's within %.2g\n", name, world, e);
        free(sum);
    }
    h.runner.rank = 0, h.runner.world = 1;
    free(want);
    teardown(&h);
}

START_TEST(gpt_rank_shares_add_up)
{
    check_rank_shares(TR_ARCH_GPT, "gpt");
}
END_TEST

START_TEST(bert_micro_batches_match_one_batch)
{
    check_accumulation(TR_ARCH_BERT, "bert");
}
END_TEST

START_TEST(gpt_micro_batches_match_one_batch_by_tokens)
{
    check_accumulation(TR_ARCH_GPT, "gpt");
}
END_TEST

/* The weights are real counts: labels, or target tokens ≠ −100. */
START_TEST(targets_are_counted)
{
    int32_t y[4] = {1, -100, 0, 2}, targets[6] = {5, 6, -100, 7, -100, -100};
    struct tr_batch b = {.n = 4, .S = 1, .y = y};
    ck_assert_int_eq(tr_batch_targets(&b, 0), 3);
    b = (struct tr_batch){.n = 2, .S = 3, .targets = targets};
    ck_assert_int_eq(tr_batch_targets(&b, 1), 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("accumulation");
    TCase *tc = tcase_create("accumulation");
    tcase_add_test(tc, targets_are_counted);
    tcase_add_test(tc, bert_micro_batches_match_one_batch);
    tcase_add_test(tc, gpt_micro_batches_match_one_batch_by_tokens);
    tcase_add_test(tc, gpt_rank_shares_add_up);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
