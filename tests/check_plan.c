/* The planner (src/plan/): on a tiny BERT classifier over texts of unequal lengths and an MLP
 * over feature vectors, with a hand-made device so that nothing depends on this host. What is
 * checked is what the issue promises: every candidate's regions are those of the program the
 * trainer will build, nothing chosen is over the budget, the micro-batch chosen is the largest
 * that fits, pinned knobs are obeyed, nothing-fits names the smallest budget, a saved plan
 * replays exactly and is refused one byte below its footprint, and plan.json round-trips. */
#include "runner.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/plan.h"
#include "plan/shard.h"

enum { N = 96, MAXLEN = 48, VOCAB = 60, CLASSES = 3, FEATURES = 20 };

struct fixture {
    struct tr_recipe r;
    struct tr_data data;
    struct tr_device dev;
    struct tr_plan_job job;
    struct tr_diag diag;
};

static void device(struct tr_device *d)
{
    *d = (struct tr_device){.name = "test", .description = "a made-up CPU", .kind = TR_DEVICE_CPU,
                            .memory = (uint64_t)64 << 30, .supports = {true, true, true},
                            .gemm_flops = {1e11, 1e11, 1e11}, .bandwidth = 1e10, .node_seconds = 2e-6,
                            .widen_16bit = 1, .thread_bytes = 1 << 20, .threads = 2, .source = "test"};
}

/* Texts of 4 … MAXLEN tokens (mostly short, as real text is), three classes. */
static void text_data(struct tr_data *d)
{
    memset(d, 0, sizeof *d);
    d->kind = TR_DATA_TEXT_CLASSES, d->vocab = VOCAB, d->nclasses = CLASSES;
    snprintf(d->name, sizeof d->name, "texts");
    struct tr_split *s = &d->train;
    s->n = N;
    s->offsets = calloc(N + 1, sizeof *s->offsets);
    for (int i = 0; i < N; i++)
        s->offsets[i + 1] = s->offsets[i] + (i % 8 == 0 ? MAXLEN : 4 + (i * 7) % 20);
    s->ntokens = s->offsets[N];
    s->tokens = calloc((size_t)s->ntokens, sizeof *s->tokens);
    s->y = calloc(N, sizeof *s->y);
    for (int64_t t = 0; t < s->ntokens; t++)
        s->tokens[t] = (int32_t)(t % VOCAB);
}

static void feature_data(struct tr_data *d)
{
    memset(d, 0, sizeof *d);
    d->kind = TR_DATA_FEATURES, d->nclasses = CLASSES;
    snprintf(d->name, sizeof d->name, "features");
    d->train.n = N, d->train.rank = 1, d->train.dims[0] = FEATURES;
    d->train.x = calloc((size_t)N * FEATURES, sizeof(float));
    d->train.y = calloc(N, sizeof(int32_t));
}

static void free_data(struct tr_data *d)
{
    free(d->train.offsets), free(d->train.tokens), free(d->train.y), free(d->train.x);
}

static void start(struct fixture *f, const char *yaml, bool text)
{
    memset(f, 0, sizeof *f);
    ck_assert_int_eq(tr_recipe_load_string(&f->r, yaml, strlen(yaml), "t.yaml", NULL, 0, &f->diag), 0);
    if (text)
        text_data(&f->data);
    else
        feature_data(&f->data);
    device(&f->dev);
    ck_assert_int_eq(tr_plan_job_init(&f->job, &f->r, &f->data, &f->dev, &f->diag), 0);
    f->job.base_bytes = (uint64_t)20 << 20;
    f->job.prior_peak = 0;   /* the search's arithmetic, not this test process's history (ASan's peak) */
}

static void finish(struct fixture *f)
{
    free_data(&f->data);
    tr_recipe_free(&f->r);
    tr_diag_free(&f->diag);
}

static const char bert[] =
    "model: {arch: bert, layers: 2, hidden: 32, heads: 2, ffn: 64, max_len: 64, dropout: 0.1}\n"
    "train: {batch_size: 32, steps: 10}\ndata: {dataset: texts, tokenizer: bytes, num_workers: 1, prefetch_factor: 2}\n";
static const char mlp[] = "model: {arch: mlp, layers: 2, hidden: 64}\ntrain: {batch_size: 64, steps: 10}\n"
                         "data: {dataset: features}\n";

static int search(struct fixture *f, struct tr_plan *p, uint64_t budget)
{
    f->job.budget = budget;
    ck_assert_msg(tr_plan_search(p, &f->job, &f->diag) == 0, "search failed");
    return p->chosen;
}

/* A candidate's regions are the program's: rebuilt as the trainer builds it. */
static void expect_regions_of_program(struct fixture *f, const struct tr_candidate *c)
{
    struct tr_built train, eval;
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_build(&train, &f->job, &c->k, true, &err), 0);
    ck_assert_int_eq(tr_build(&eval, &f->job, &c->k, false, &err), 0);
    size_t arena = train.p.region_bytes[TR_ACT] > eval.p.region_bytes[TR_ACT] ? train.p.region_bytes[TR_ACT]
                                                                               : eval.p.region_bytes[TR_ACT];
    ck_assert_uint_eq(c->regions[TR_REGION_ARENA], arena);
    ck_assert_uint_eq(c->regions[TR_REGION_PARAMS], train.p.region_bytes[TR_PARAM]);
    ck_assert_uint_eq(c->regions[TR_REGION_GRADS], train.p.region_bytes[TR_GRAD]);
    ck_assert_uint_eq(c->regions[TR_REGION_OPTIMIZER], tr_plan_optimizer_bytes(&f->r, &train.g));
    uint64_t sum = 0;
    for (int r = 0; r < TR_NREGIONS; r++)
        sum += c->regions[r];
    ck_assert_uint_eq(c->peak, sum);
    ck_assert_uint_ge(c->footprint, c->peak + ((uint64_t)16 << 20));   /* the reserve's floor, at least */
    tr_built_free(&train);
    tr_built_free(&eval);
}

/* The optimizer region holds the state tensors the optimizer's descriptor keeps, each as large
 * as the parameters: AdamW two (m, v), Lion one (m), SGD one with momentum and none without. */
START_TEST(optimizer_region_per_optimizer)
{
    static const struct { const char *settings; int states; } cases[] = {
        {"{name: adamw}", 2}, {"{name: lion, betas: [0.9, 0.99]}", 1}, {"{name: sgd, momentum: 0.9}", 1},
        {"{name: sgd, momentum: 0}", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *yaml = tr_strdup_printf("model: {arch: mlp, layers: 2, hidden: 64}\ndata: {dataset: features}\n"
                                      "train: {batch_size: 64, steps: 10, optimizer: %s}\n", cases[i].settings);
        struct fixture f;
        start(&f, yaml, false);
        struct tr_plan p;
        ck_assert_int_ge(search(&f, &p, (uint64_t)8 << 30), 0);
        struct tr_built train;
        struct tr_diag err = {0};
        ck_assert_int_eq(tr_build(&train, &f.job, &p.cand[p.chosen].k, true, &err), 0);
        ck_assert_uint_eq(p.cand[p.chosen].regions[TR_REGION_OPTIMIZER],
                          (uint64_t)cases[i].states * tr_plan_param_bytes(&train.g));
        tr_built_free(&train);
        tr_plan_free(&p);
        finish(&f);
        free(yaml);
    }
}
END_TEST

START_TEST(every_candidate_is_its_program)
{
    struct fixture f;
    start(&f, bert, true);
    struct tr_plan p;
    ck_assert_int_ge(search(&f, &p, (uint64_t)8 << 30), 0);
    ck_assert_int_gt(p.ncand, 8);   /* 3 precisions × (none, selective, 1, 2 blocks) × 2 batchings */
    for (int i = 0; i < p.ncand; i++)
        expect_regions_of_program(&f, &p.cand[i]);
    /* unconstrained: the whole batch in one micro-step, no checkpointing, fp32 (16-bit widens) */
    const struct tr_candidate *c = &p.cand[p.chosen];
    ck_assert_int_eq(c->k.precision, TR_PREC_FP32);
    ck_assert_int_eq(c->k.remat_mode, TR_REMAT_NONE);
    if (!c->k.dynamic)
        ck_assert_int_eq(c->k.micro, 32);
    /* the table and --explain, read back: the chosen row marked, the largest tensors listed in
     * decreasing size (under the sanitizers too) */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    tr_plan_print(&p, &f.job, true, out);
    fclose(out);
    ck_assert_msg(strstr(text, "<- chosen") && strstr(text, "largest tensors live at the peak"), "%s", text);
    const char *at = strstr(text, "largest tensors live at the peak");
    double last = 1e30, size;
    char unit[8];
    int listed = 0;
    for (const char *line = strchr(at, '\n'); line && sscanf(line + 1, "%lf %7s", &size, unit) == 2;
         line = strchr(line + 1, '\n'), listed++) {
        double bytes = size * (unit[0] == 'M' ? 1 << 20 : unit[0] == 'K' ? 1 << 10 : 1);
        ck_assert_msg(bytes <= last, "not in decreasing size: %s", text);
        last = bytes;
    }
    ck_assert_int_eq(listed, 10);
    free(text);
    tr_plan_free(&p);
    finish(&f);
}
END_TEST

/* The largest micro-batch that fits: one more row would not. */
START_TEST(largest_micro_batch_that_fits)
{
    struct fixture f;
    start(&f, bert, true);
    struct tr_plan wide, p;
    search(&f, &wide, (uint64_t)8 << 30);
    const struct tr_candidate *fp32 = &wide.cand[0];   /* fp32, none, fixed: the widest footprint */
    ck_assert(!fp32->k.dynamic && fp32->k.precision == TR_PREC_FP32 && fp32->k.remat_mode == TR_REMAT_NONE);
    /* a budget between the footprints of micro 8 and micro 32 of that candidate */
    uint64_t budget = fp32->footprint - fp32->regions[TR_REGION_ARENA] / 2;
    ck_assert_int_ge(search(&f, &p, budget), 0);
    int checked = 0;
    for (int i = 0; i < p.ncand; i++) {
        const struct tr_candidate *c = &p.cand[i];
        ck_assert_msg(!c->fits || c->footprint <= budget, "candidate %d over the budget", i);
        if (!c->fits || c->k.dynamic || c->k.micro == 32)
            continue;
        struct tr_plan more;
        struct tr_knobs k = c->k;
        k.accumulation = c->k.accumulation - 1;   /* one micro-step fewer: the next larger micro-batch */
        k.micro = (32 + k.accumulation - 1) / k.accumulation;
        k.buckets[0].rows = k.micro, k.eval_batch = k.micro;
        if (k.micro <= c->k.micro)
            continue;
        ck_assert_int_eq(tr_plan_replay(&more, &f.job, &k, &f.diag), 0);
        ck_assert_msg(!more.cand[0].fits, "candidate %d: micro %lld fits too", i, (long long)k.micro);
        tr_plan_free(&more);
        checked++;
    }
    ck_assert_int_gt(checked, 2);   /* the budget did squeeze some candidates' micro-batches */
    const struct tr_candidate *chosen = &p.cand[p.chosen];
    ck_assert(chosen->fits && chosen->footprint <= budget);
    for (int i = 0; i < p.ncand; i++)   /* the fastest that fits, or a near-tie of it */
        ck_assert(!p.cand[i].fits || chosen->step_seconds <= p.cand[i].step_seconds * 1.03 + 1e-12);
    tr_plan_free(&p);
    tr_plan_free(&wide);
    finish(&f);
}
END_TEST

START_TEST(nothing_fits_names_the_minimum)
{
    struct fixture f;
    start(&f, bert, true);
    struct tr_plan p;
    ck_assert_int_eq(search(&f, &p, (uint64_t)1 << 20), -1);
    ck_assert_int_ge(p.smallest, 0);
    uint64_t least = p.cand[p.smallest].footprint;
    for (int i = 0; i < p.ncand; i++)
        ck_assert_uint_ge(p.cand[i].footprint, least);
    char want[64];
    snprintf(want, sizeof want, "budget.memory=%llu or more", (unsigned long long)least);
    ck_assert_msg(strstr(p.reason, want), "%s", p.reason);
    tr_plan_free(&p);
    struct tr_plan at;   /* and at that budget, something fits */
    ck_assert_int_ge(search(&f, &at, least), 0);
    ck_assert_uint_le(at.cand[at.chosen].footprint, least);
    tr_plan_free(&at);
    finish(&f);
}
END_TEST

START_TEST(pinned_knobs_are_obeyed)
{
    static const char pinned[] =
        "model: {arch: bert, layers: 2, hidden: 32, heads: 2, ffn: 64, max_len: 64}\n"
        "train: {batch_size: 32, steps: 10}\ndata: {dataset: texts, tokenizer: bytes}\n"
        "optimize: {amp: bf16, checkpointing: 1, accumulation: 4, dynamic_batching: off}\n";
    struct fixture f;
    start(&f, pinned, true);
    struct tr_plan p;
    ck_assert_int_ge(search(&f, &p, (uint64_t)8 << 30), 0);
    ck_assert_int_eq(p.ncand, 1);
    const struct tr_knobs *k = &p.cand[0].k;
    ck_assert_int_eq(k->precision, TR_PREC_BF16);
    ck_assert_int_eq(k->remat_mode, TR_REMAT_FULL);
    ck_assert_int_eq(k->remat_blocks, 1);
    ck_assert(!k->dynamic);
    ck_assert_int_eq(k->accumulation, 4);
    ck_assert_int_eq(k->micro, 8);
    tr_plan_free(&p);
    finish(&f);
}
END_TEST

/* A saved plan replays exactly at its footprint and is refused one byte below it. */
START_TEST(replay_and_one_byte_below)
{
    struct fixture f;
    start(&f, bert, true);
    struct tr_plan p, again, below;
    ck_assert_int_ge(search(&f, &p, (uint64_t)8 << 30), 0);
    char path[] = "/tmp/check_plan.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    char *json = tr_plan_to_json(&p, true, "0123");
    ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    free(json);
    struct tr_knobs k;
    struct tr_diag err = {0};
    ck_assert_msg(tr_plan_read_knobs(path, &k, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_mem_eq(&k, &p.cand[p.chosen].k, sizeof k);
    uint64_t footprint = p.cand[p.chosen].footprint;
    f.job.budget = footprint;
    ck_assert_int_eq(tr_plan_replay(&again, &f.job, &k, &f.diag), 0);
    ck_assert_int_eq(again.chosen, 0);
    ck_assert_uint_eq(again.cand[0].footprint, footprint);
    ck_assert_uint_eq(again.cand[0].peak, p.cand[p.chosen].peak);
    f.job.budget = footprint - 1;
    ck_assert_int_eq(tr_plan_replay(&below, &f.job, &k, &f.diag), 0);
    ck_assert_int_eq(below.chosen, -1);
    ck_assert_msg(strstr(below.reason, "no longer fits") && strstr(below.reason, "by 1 bytes"), "%s", below.reason);
    /* files that are not plans */
    FILE *bad = fopen(path, "w");
    fputs("{\"precision\": \"fp8\"}", bad);
    fclose(bad);
    ck_assert_int_eq(tr_plan_read_knobs(path, &k, &err), TR_EINVAL);
    unlink(path);
    ck_assert_int_eq(tr_plan_read_knobs(path, &k, &err), TR_EIO);
    tr_diag_free(&err);
    tr_plan_free(&p), tr_plan_free(&again), tr_plan_free(&below);
    finish(&f);
}
END_TEST

/* Feature vectors: no dynamic batching, and a pin of it is refused with the reason. */
START_TEST(features_batch_fixed)
{
    struct fixture f;
    start(&f, mlp, false);
    struct tr_plan p;
    ck_assert_int_ge(search(&f, &p, (uint64_t)1 << 30), 0);
    for (int i = 0; i < p.ncand; i++)
        ck_assert(!p.cand[i].k.dynamic);
    tr_plan_free(&p);
    finish(&f);
    static const char on[] = "model: {arch: mlp}\ntrain: {batch_size: 64, steps: 10}\ndata: {dataset: features}\n"
                             "optimize: {dynamic_batching: on}\n";
    start(&f, on, false);
    f.job.budget = (uint64_t)1 << 30;
    ck_assert_int_eq(tr_plan_search(&p, &f.job, &f.diag), TR_EINVAL);
    ck_assert_msg(f.diag.n && strstr(f.diag.items[0].message, "holds feature vectors"), "no reason");
    tr_plan_free(&p);
    finish(&f);
}
END_TEST

/* A model that cannot read the data is refused before any planning. */
START_TEST(model_data_mismatch)
{
    struct fixture f;
    memset(&f, 0, sizeof f);
    ck_assert_int_eq(tr_recipe_load_string(&f.r, bert, strlen(bert), "t.yaml", NULL, 0, &f.diag), 0);
    feature_data(&f.data);
    device(&f.dev);
    ck_assert_int_eq(tr_plan_job_init(&f.job, &f.r, &f.data, &f.dev, &f.diag), TR_EINVAL);
    ck_assert(strstr(f.diag.items[0].message, "model.arch bert reads labelled texts"));
    finish(&f);
}
END_TEST

/* The time model counts recomputation: full checkpointing of every block is slower, and
 * saves arena. */
START_TEST(recompute_costs_time_saves_memory)
{
    struct fixture f;
    start(&f, bert, true);
    struct tr_plan p;
    search(&f, &p, (uint64_t)8 << 30);
    const struct tr_candidate *none = NULL, *full = NULL;
    for (int i = 0; i < p.ncand; i++) {
        const struct tr_candidate *c = &p.cand[i];
        if (c->k.precision != TR_PREC_FP32 || c->k.dynamic)
            continue;
        if (c->k.remat_mode == TR_REMAT_NONE)
            none = c;
        if (c->k.remat_mode == TR_REMAT_FULL && c->k.remat_blocks == 2)
            full = c;
    }
    ck_assert(none && full);
    ck_assert_int_eq(none->k.micro, full->k.micro);
    ck_assert(full->flops > none->flops && full->step_seconds > none->step_seconds);
    ck_assert_uint_lt(full->regions[TR_REGION_ARENA], none->regions[TR_REGION_ARENA]);
    tr_plan_free(&p);
    finish(&f);
}
END_TEST
/* ZeRO's cut: every rank's part starts where a piece of the norm's sum begins (a parameter's
 * start plus whole TR_SUMSQ_PIECEs), the parts cover the elements once, in order, each within
 * a piece of a world-th; tr_shard_spans gives each element to exactly one rank. */
START_TEST(shard_cut_on_pieces)
{
    static const int64_t sizes[][5] = {{100000, 10, 70000, 3, 40000}, {16384, 16384, 16384, 16384, 1},
                                       {5, 6, 7, 8, 9}, {1000000, 1, 1, 1, 1}};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++)
        for (int world = 1; world <= 5; world++) {
            const int64_t *numel = sizes[c];
            int64_t first[6], total = 0;
            struct tr_param_span spans[5], part[5];
            for (int i = 0; i < 5; i++) {
                spans[i] = (struct tr_param_span){.param = total * 4 + 64 * i, .grad = total * 4 + 128 * i,
                                                  .state = total, .numel = numel[i], .decay = i % 2};
                total += numel[i];
            }
            tr_shard_cut(numel, 5, world, first);
            ck_assert_int_eq(first[0], 0);
            ck_assert_int_eq(first[world], total);
            int64_t owned = 0;
            char *seen = calloc((size_t)total, 1);
            for (int k = 0; k < world; k++) {
                ck_assert_int_le(first[k], first[k + 1]);
                ck_assert_int_eq(tr_shard_elements(numel, 5, world, k), first[k + 1] - first[k]);
                bool piece_start = first[k] == total;   /* a rank left nothing */
                for (int i = 0, at = 0; i < 5; at += (int)numel[i++])
                    piece_start |= first[k] >= at && first[k] < at + numel[i] && (first[k] - at) % TR_SUMSQ_PIECE == 0;
                ck_assert_msg(piece_start, "case %zu, %d ranks: rank %d starts at %lld, inside a piece", c, world, k,
                              (long long)first[k]);
                if (k > 0 && first[k] < total)   /* balanced: within a piece (or a parameter) of its share */
                    ck_assert_int_le(first[k] - total * k / world, TR_SUMSQ_PIECE);
                int n = tr_shard_spans(spans, 5, first[k], first[k + 1], part);
                for (int j = 0; j < n; j++) {
                    int64_t from = first[k] + part[j].state;
                    int i = 0;
                    while (!(from >= spans[i].state && from < spans[i].state + spans[i].numel))
                        i++;
                    ck_assert_int_eq(part[j].param, spans[i].param + (from - spans[i].state) * 4);
                    ck_assert_int_eq(part[j].grad, spans[i].grad + (from - spans[i].state) * 4);
                    ck_assert_int_eq(part[j].decay, spans[i].decay);
                    for (int64_t e = from; e < from + part[j].numel; e++)
                        ck_assert_int_eq(seen[e]++, 0);
                    owned += part[j].numel;
                }
            }
            ck_assert_int_eq(owned, total);
            free(seen);
        }
}
END_TEST

/* Across 2 ranks the planner adds ZeRO stage 1 to its search: under a budget one byte below the
 * smallest unsharded footprint, a sharded plan is chosen on the CPU (the gradients the host's)
 * on rank 1 — not on rank 0, whose footprint counts the whole state each checkpoint gathers —
 * each rank's optimizer region its part (the two adding up to the whole), the gradients out of
 * the arena; pinned off, or alone, it is never a candidate. */
START_TEST(shard_chosen_across_ranks)
{
    const char *yaml = "model: {arch: mlp, layers: 2, hidden: 512}\ndata: {dataset: features}\n"
                       "train: {batch_size: 64, steps: 10}\n";
    struct fixture f;
    start(&f, yaml, false);
    struct tr_plan p;
    f.job.world = 2, f.r.optimize.shard = TR_SHARD_OFF;
    ck_assert_int_ge(search(&f, &p, (uint64_t)8 << 30), 0);
    for (int i = 0; i < p.ncand; i++)
        ck_assert_int_eq(p.cand[i].k.shard, 0);
    uint64_t unsharded = p.cand[p.smallest].footprint;
    tr_plan_free(&p);
    f.r.optimize.shard = TR_SHARD_AUTO;
    size_t whole = 0, parts = 0;
    for (int rank = 0; rank < 2; rank++) {
        f.job.rank = rank;
        ck_assert_int_ge(search(&f, &p, unsharded - 1), 0);
        /* rank 0 gathers the whole state at each checkpoint: sharding lowers no footprint of its */
        const struct tr_candidate *c = NULL;
        for (int i = 0; i < p.ncand && !c; i++)
            if (p.cand[i].k.shard == 1)
                c = &p.cand[i];
        ck_assert_ptr_nonnull(c);
        if (rank == 0)
            ck_assert(p.chosen < 0 || p.cand[p.chosen].k.shard == 0);
        else {
            ck_assert_int_eq(p.cand[p.chosen].k.shard, 1);
            c = &p.cand[p.chosen];
        }
        ck_assert_uint_ge(c->outside[TR_OUT_RANKS], rank == 0 ? p.shard_bytes[0] * 2 : 0);
        ck_assert(!tr_knobs_grads_in_arena(&c->k));
        ck_assert_uint_gt(c->regions[TR_REGION_GRADS], 0);
        ck_assert_uint_eq(c->regions[TR_REGION_OPTIMIZER], p.shard_bytes[rank]);
        parts += c->regions[TR_REGION_OPTIMIZER];
        struct tr_built train;
        struct tr_diag err = {0};
        ck_assert_int_eq(tr_build(&train, &f.job, &c->k, true, &err), 0);
        whole = tr_plan_optimizer_bytes(&f.r, &train.g);
        tr_built_free(&train);
        tr_plan_free(&p);
    }
    ck_assert_uint_eq(parts, whole);
    f.job.world = 1, f.job.rank = 0;
    ck_assert_int_ge(search(&f, &p, (uint64_t)8 << 30), 0);
    for (int i = 0; i < p.ncand; i++)
        ck_assert_int_eq(p.cand[i].k.shard, 0);
    tr_plan_free(&p);
    finish(&f);
}
END_TEST

/* ZeRO 3 across ranks: where no other stage fits (rank 1; rank 0's checkpoints gather the whole),
 * the planner takes the parameters' shards too — each rank's parameters, gradients and optimizer
 * state its part, the copies gathered whole in the arena of the program the trainer builds for
 * those knobs. */
START_TEST(zero3_when_nothing_else_fits)
{
    const char *yaml = "model: {arch: mlp, layers: 4, hidden: 1024}\ndata: {dataset: features}\n"
                       "train: {batch_size: 64, steps: 10}\n";
    struct fixture f;
    start(&f, yaml, false);
    struct tr_plan p;
    f.job.world = 2, f.r.optimize.shard = TR_SHARD_AUTO;
    int64_t parts = 0;
    for (int rank = 0; rank < 2; rank++) {
        f.job.rank = rank;
        ck_assert_int_ge(search(&f, &p, (uint64_t)8 << 30), 0);
        uint64_t others = UINT64_MAX;   /* the least any stage below 3 takes on this rank */
        bool searched = false;
        for (int i = 0; i < p.ncand; i++) {
            searched |= p.cand[i].k.shard == 3;
            if (p.cand[i].k.shard < 3 && p.cand[i].footprint < others)
                others = p.cand[i].footprint;
        }
        ck_assert(searched);
        tr_plan_free(&p);
        ck_assert_int_ge(search(&f, &p, others - 1), 0);
        const struct tr_candidate *c = NULL;   /* rank 0: each checkpoint gathers the whole, as above */
        for (int i = 0; i < p.ncand && !c; i++)
            if (p.cand[i].k.shard == 3)
                c = &p.cand[i];
        ck_assert_ptr_nonnull(c);
        if (rank == 1) {
            ck_assert_int_eq(p.cand[p.chosen].k.shard, 3);
            c = &p.cand[p.chosen];
        }
        ck_assert_int_eq(c->k.shard, 3);
        ck_assert_str_eq(tr_shard_name(c->k.shard), "parameters");
        size_t own = (size_t)p.shard_elements[rank] * sizeof(float);
        ck_assert_uint_eq(c->regions[TR_REGION_PARAMS], own);
        ck_assert_uint_eq(c->regions[TR_REGION_GRADS], own);
        ck_assert_uint_eq(c->regions[TR_REGION_OPTIMIZER], p.shard_bytes[rank]);
        parts += p.shard_elements[rank];
        struct tr_built train;
        struct tr_diag err = {0};
        ck_assert_int_eq(tr_build(&train, &f.job, &c->k, true, &err), 0);
        int copies = 0;
        for (int v = 0; v < train.g.nvalues; v++)
            copies += train.g.values[v].gathers >= 0;
        ck_assert_int_gt(copies, 0);
        ck_assert_uint_eq(c->regions[TR_REGION_ARENA], train.p.region_bytes[TR_ACT]);
        ck_assert_int_eq(parts <= (int64_t)(tr_plan_param_bytes(&train.g) / sizeof(float)), 1);
        tr_built_free(&train);
        tr_plan_free(&p);
    }
    finish(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_candidate_is_its_program);
    tcase_add_test(tc, optimizer_region_per_optimizer);
    tcase_add_test(tc, largest_micro_batch_that_fits);
    tcase_add_test(tc, nothing_fits_names_the_minimum);
    tcase_add_test(tc, pinned_knobs_are_obeyed);
    tcase_add_test(tc, replay_and_one_byte_below);
    tcase_add_test(tc, features_batch_fixed);
    tcase_add_test(tc, model_data_mismatch);
    tcase_add_test(tc, recompute_costs_time_saves_memory);
    tcase_add_test(tc, shard_cut_on_pieces);
    tcase_add_test(tc, shard_chosen_across_ranks);
    tcase_add_test(tc, zero3_when_nothing_else_fits);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
