/* The remat pass (src/graph/remat.c): gradient checkpointing must not change a bit. Small
 * BERT, GPT, MLP and ResNet models built by the real builders, with dropout on, run one
 * training step under no checkpointing and under every setting (selective, full, a subset of
 * blocks, a mix); every parameter gradient and the loss must be the same bytes (memcmp), the
 * arena must be smaller and recompute nodes must exist. The executor runs in debug mode, which
 * poisons every value once it is dead: a copy that read a freed original would give NaN.
 * Gradients planned in the arena (memplan.h, one micro-batch a step) likewise: the same bytes,
 * from an arena that starts as NaN bytes, and less memory than the arena and their region. */
#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "graph/program.h"
#include "models/models.h"

#define B 3
#define S 7
#define VOCAB 50
#define MAX_BLOCKS 16

/* What one training step left behind. */
struct outcome {
    char *grads;          /* every parameter's gradient, in value order */
    size_t grad_bytes;
    char *state;          /* batch-norm running statistics after the step */
    size_t state_bytes;
    float loss;
    size_t arena;         /* the plan's activation arena */
    size_t grads_region;  /* the plan's gradients' region */
    int recompute;        /* nodes in phase TR_RECOMPUTE */
};

static void outcome_free(struct outcome *o)
{
    free(o->grads), free(o->state);
    memset(o, 0, sizeof *o);
}

static uint64_t draw(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static float uniform(uint64_t *s, float scale)
{
    return scale * (2.0f * (float)(draw(s) >> 40) / 16777216.0f - 1.0f);
}

static void fill_floats(void *data, int64_t n, uint64_t *s, float scale)
{
    for (int64_t i = 0; i < n; i++)
        ((float *)data)[i] = uniform(s, scale);
}

static int64_t numel(const struct tr_graph *g, int v)
{
    return tr_dim_eval(tr_shape_numel(&g->values[v].shape), B, S);
}

static struct tr_recipe recipe_for(enum tr_arch arch)
{
    struct tr_recipe r;
    tr_recipe_init(&r);
    r.model.arch = arch;
    r.model.layers = 3, r.model.hidden = 16, r.model.heads = 2, r.model.ffn = 32, r.model.max_len = 16;
    r.model.dropout = 0.1;
    if (arch == TR_ARCH_RESNET)
        r.model.layers = 1, r.model.hidden = 4;   /* 3 stages of one block */
    return r;
}

/* Inputs a step reads: token ids with padding in the last row (text), or features. */
static void feed(struct tr_exec *x, const struct tr_graph *g, const struct tr_model *m, uint64_t *s)
{
    if (m->x >= 0)
        fill_floats(tr_exec_data(x, m->x), numel(g, m->x), s, 1);
    if (m->ids >= 0) {
        int32_t *ids = tr_exec_data(x, m->ids), *pos = tr_exec_data(x, m->positions);
        uint8_t *mask = tr_exec_data(x, m->mask);
        for (int i = 0; i < B * S; i++) {
            ids[i] = (int32_t)(draw(s) % VOCAB);
            pos[i] = i % S;
            mask[i] = !(i / S == B - 1 && i % S >= S - 2);
        }
        if (m->segments >= 0)
            memset(tr_exec_data(x, m->segments), 0, (size_t)numel(g, m->segments) * 4);
    }
    int32_t *y = tr_exec_data(x, m->y);
    for (int64_t i = 0; i < numel(g, m->y); i++)
        y[i] = (int32_t)(draw(s) % 3);
    if (m->ids >= 0 && m->x < 0 && numel(g, m->y) == B * S)   /* gpt: no target on padding */
        for (int i = (B - 1) * S + S - 2; i < B * S; i++)
            y[i] = -100;
}

/* One training step of arch with activations in amp (TR_F32: none) and checkpointing mode[b]
 * for the first nmode blocks (NULL: none at all, the pass not run), the gradients in the arena
 * or in their region. */
static struct outcome step_planned(enum tr_arch arch, enum tr_dtype amp, const uint8_t *mode, int nmode,
                                   bool grads_in_arena)
{
    struct tr_recipe r = recipe_for(arch);
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    int64_t image[3] = {3, 8, 8}, features[1] = {12};
    bool features_in = arch == TR_ARCH_MLP || arch == TR_ARCH_RESNET;
    tr_model_build(&g, &r, arch == TR_ARCH_RESNET ? 3 : arch == TR_ARCH_MLP ? 1 : 0,
                   arch == TR_ARCH_RESNET ? image : features, 3, features_in ? 0 : VOCAB, 1, &m);
    if (amp != TR_F32)
        tr_amp(&g, amp, &m.logits, m.logits >= 0, true);
    int scale = tr_autodiff(&g);
    ck_assert_msg(scale >= 0, "%s", g.message);
    if (mode)
        ck_assert_msg(tr_remat(&g, mode, nmode) == 0, "%s", g.message);
    struct tr_program p;
    int keep[2] = {m.loss, m.logits >= 0 ? m.logits : m.rank};
    ck_assert_int_eq(tr_program_plan(&p, &g, &(struct tr_bucket){B, S}, 1, keep, 2, tr_cpu_ops.workspace_bytes, grads_in_arena), 0);
    struct tr_rng_ctx rng = {.seed = 7, .step = 3};
    struct tr_exec x = {.g = &g, .schedule = p.schedule, .n = p.n, .plan = &p.plans[0],
                        .be = tr_backend_cpu(), .rng = &rng, .debug = true};
    for (int k = 0; k < TR_NKINDS; k++)
        x.base[k] = calloc(p.region_bytes[k] + 64, 1);
    x.workspace = calloc(p.workspace_bytes + 64, 1);
    uint64_t seed = 0x5eed;
    for (int v = 0; v < g.nvalues; v++) {   /* the same values in every run: remat adds values after these */
        if (g.values[v].kind == TR_PARAM)
            fill_floats(tr_exec_data(&x, v), numel(&g, v), &seed, 0.3f);
        else if (g.values[v].kind == TR_STATE)
            for (int64_t i = 0; i < numel(&g, v); i++)
                ((float *)tr_exec_data(&x, v))[i] = g.values[v].init == TR_INIT_ONE ? 1.0f : 0.0f;
    }
    feed(&x, &g, &m, &seed);
    *(float *)tr_exec_data(&x, scale) = 1;
    if (grads_in_arena)   /* NaN bytes: a gradient the executor did not zero would show */
        memset(x.base[TR_ACT], 0xff, p.region_bytes[TR_ACT]);
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_run(&x, B, S, &why) == 0, "%s", tr_diag_last(&why));

    struct outcome o = {.arena = p.region_bytes[TR_ACT], .grads_region = p.region_bytes[TR_GRAD],
                        .loss = *(float *)tr_exec_data(&x, m.loss)};
    for (int pass = 0; pass < 2; pass++) {   /* sizes, then bytes */
        size_t at_grad = 0, at_state = 0;
        for (int v = 0; v < g.nvalues; v++) {
            bool param = g.values[v].kind == TR_PARAM, state = g.values[v].kind == TR_STATE;
            if (!param && !state)
                continue;
            int from = param ? g.values[v].grad : v;
            size_t bytes = (size_t)numel(&g, from) * tr_dtype_size(g.values[from].dtype);
            if (pass)
                memcpy((param ? o.grads + at_grad : o.state + at_state), tr_exec_data(&x, from), bytes);
            *(param ? &at_grad : &at_state) += bytes;
        }
        if (!pass)
            o.grads = malloc(at_grad + 1), o.state = malloc(at_state + 1);
        o.grad_bytes = at_grad, o.state_bytes = at_state;
    }
    for (int i = 0; i < g.nnodes; i++)
        o.recompute += g.nodes[i].phase == TR_RECOMPUTE;
    ck_assert_msg(o.loss == o.loss, "the loss is NaN: a dead value was read");
    for (int k = 0; k < TR_NKINDS; k++)
        free(x.base[k]);
    free(x.workspace);
    tr_exec_free(&x);
    tr_program_free(&p);
    tr_graph_free(&g);
    tr_recipe_free(&r);
    return o;
}

static struct outcome step(enum tr_arch arch, enum tr_dtype amp, const uint8_t *mode, int nmode)
{
    return step_planned(arch, amp, mode, nmode, false);
}

/* got has want's gradients, loss and running statistics, byte for byte. */
static void assert_same(const struct outcome *want, const struct outcome *got, const char *what)
{
    ck_assert_msg(got->grad_bytes == want->grad_bytes, "%s: %zu gradient bytes, %zu without", what,
                  got->grad_bytes, want->grad_bytes);
    size_t at = 0;
    while (at < want->grad_bytes && want->grads[at] == got->grads[at])
        at++;
    ck_assert_msg(at == want->grad_bytes, "%s: gradients differ from byte %zu (float %zu)", what, at, at / 4);
    ck_assert_msg(memcmp(&want->loss, &got->loss, sizeof got->loss) == 0, "%s: loss %.9g, %.9g without", what,
                  (double)got->loss, (double)want->loss);
    ck_assert_msg(got->state_bytes == want->state_bytes &&
                  memcmp(want->state, got->state, want->state_bytes) == 0,
                  "%s: the batch-norm running statistics differ", what);
}

/* Each setting against none: the same bits, a smaller arena, recompute nodes. */
static void check_settings(enum tr_arch arch, enum tr_dtype amp, const char *model)
{
    struct tr_recipe r = recipe_for(arch);
    int blocks = arch == TR_ARCH_RESNET ? 3 * (int)r.model.layers : (int)r.model.layers;
    bool transformer = arch == TR_ARCH_BERT || arch == TR_ARCH_GPT;
    tr_recipe_free(&r);
    uint8_t none[MAX_BLOCKS] = {0}, selective[MAX_BLOCKS], full[MAX_BLOCKS], subset[MAX_BLOCKS] = {0},
            mixed[MAX_BLOCKS];
    for (int b = 0; b < blocks; b++) {
        selective[b] = TR_REMAT_SELECTIVE, full[b] = TR_REMAT_FULL;
        mixed[b] = b % 2 ? TR_REMAT_FULL : TR_REMAT_SELECTIVE;
    }
    subset[0] = subset[2] = TR_REMAT_FULL;   /* blocks 0 and 2, not 1 */
    struct { const char *name; const uint8_t *mode; } settings[] = {
        {"none (the pass run)", none}, {"selective", selective}, {"full", full},
        {"blocks 0 and 2", subset}, {"selective and full mixed", mixed},
    };
    struct outcome base = step(arch, amp, NULL, 0);
    printf("%s%s: none: arena %zu bytes\n", model, amp == TR_BF16 ? " (bf16)" : "", base.arena);
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        struct outcome o = step(arch, amp, settings[i].mode, blocks);
        char what[96];
        snprintf(what, sizeof what, "%s, %s", model, settings[i].name);
        assert_same(&base, &o, what);
        printf("%s%s: %s: arena %zu bytes, %d recompute nodes, the same gradients\n", model,
               amp == TR_BF16 ? " (bf16)" : "", settings[i].name, o.arena, o.recompute);
        if (settings[i].mode == none || (settings[i].mode == selective && !transformer)) {
            /* MLP, ResNet: GEMMs, convolutions and batch norms are not cheap, each ReLU's output
             * is read by its own backward, and the dropout's is the block's output: selective
             * finds nothing to make again */
            ck_assert_int_eq(o.recompute, 0);
            ck_assert_uint_eq(o.arena, base.arena);
        } else {
            ck_assert_msg(o.recompute > 0, "%s: no recompute nodes", what);
            ck_assert_msg(o.arena < base.arena, "%s: arena %zu bytes, not below %zu", what, o.arena, base.arena);
        }
        outcome_free(&o);
    }
    outcome_free(&base);
}

START_TEST(bert_every_setting_same_gradients) { check_settings(TR_ARCH_BERT, TR_F32, "bert"); }
END_TEST

START_TEST(gpt_every_setting_same_gradients) { check_settings(TR_ARCH_GPT, TR_F32, "gpt"); }
END_TEST

/* amp then remat: bf16 activations (and their 16-bit weight copies) made again alike. */
START_TEST(bf16_every_setting_same_gradients)
{
    check_settings(TR_ARCH_BERT, TR_BF16, "bert");
    check_settings(TR_ARCH_GPT, TR_BF16, "gpt");
}
END_TEST

/* The MLP with dropout: full copies its GEMMs and ReLUs; the dropout is each block's output. */
START_TEST(mlp_every_setting_same_gradients) { check_settings(TR_ARCH_MLP, TR_F32, "mlp"); }
END_TEST

/* Batch norm's copy must not move the running statistics a second time (assert_same compares
 * them): the copy runs with momentum 0. */
START_TEST(resnet_batchnorm_statistics_move_once)
{
    check_settings(TR_ARCH_RESNET, TR_F32, "resnet");
}
END_TEST

/* The gradients in the arena, with no checkpointing and with full: the same bytes as in their
 * own region, none left there, and less memory for the two together (every model here frees
 * activations in its backward before its last gradient is written). */
static void check_grads_in_arena(enum tr_arch arch, enum tr_dtype amp, const char *model)
{
    struct tr_recipe r = recipe_for(arch);
    int blocks = arch == TR_ARCH_RESNET ? 3 * (int)r.model.layers : (int)r.model.layers;
    tr_recipe_free(&r);
    uint8_t full[MAX_BLOCKS];
    memset(full, TR_REMAT_FULL, sizeof full);
    for (int f = 0; f < 2; f++) {
        struct outcome own = step_planned(arch, amp, f ? full : NULL, blocks, false),
                       in = step_planned(arch, amp, f ? full : NULL, blocks, true);
        char what[96];
        snprintf(what, sizeof what, "%s%s%s, gradients in the arena", model, amp == TR_BF16 ? " (bf16)" : "",
                 f ? ", full" : "");
        assert_same(&own, &in, what);
        ck_assert_uint_gt(own.grads_region, 0);
        ck_assert_uint_eq(in.grads_region, 0);
        ck_assert_msg(in.arena < own.arena + own.grads_region, "%s: arena %zu bytes, not below %zu + %zu", what,
                      in.arena, own.arena, own.grads_region);
        printf("%s: arena %zu bytes, against %zu + %zu gradients; the same gradients\n", what, in.arena, own.arena,
               own.grads_region);
        outcome_free(&own), outcome_free(&in);
    }
}

START_TEST(gradients_in_the_arena)
{
    check_grads_in_arena(TR_ARCH_BERT, TR_F32, "bert");
    check_grads_in_arena(TR_ARCH_GPT, TR_F32, "gpt");
    check_grads_in_arena(TR_ARCH_BERT, TR_BF16, "bert");
    check_grads_in_arena(TR_ARCH_MLP, TR_F32, "mlp");
    check_grads_in_arena(TR_ARCH_RESNET, TR_F32, "resnet");
}
END_TEST

/* A full block keeps nothing of its own forward for the backward: every value the backward of
 * a checkpointed block reads from that block's forward is a copy. */
START_TEST(full_backward_reads_only_copies)
{
    struct tr_recipe r = recipe_for(TR_ARCH_BERT);
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    tr_model_build(&g, &r, 0, NULL, 3, VOCAB, 1, &m);
    ck_assert_int_ge(tr_autodiff(&g), 0);
    int blocks = tr_graph_blocks(&g);
    ck_assert_int_eq(blocks, 3);
    uint8_t full[3] = {TR_REMAT_FULL, TR_REMAT_FULL, TR_REMAT_FULL};
    ck_assert_int_eq(tr_remat(&g, full, blocks), 0);
    int reads = 0;
    for (int i = 0; i < g.nnodes; i++) {
        const struct tr_node *n = &g.nodes[i];
        if (n->phase != TR_BACKWARD || n->block < 0)
            continue;
        for (int j = 0; j < n->nin; j++) {
            int p = n->in[j] >= 0 ? g.values[n->in[j]].producer : -1;
            if (p < 0 || g.nodes[p].block != n->block || g.nodes[p].phase == TR_BACKWARD)
                continue;
            ck_assert_msg(g.nodes[p].phase == TR_RECOMPUTE, "block %d: %s reads the forward's %s", n->block,
                          tr_op_name(n->op), tr_op_name(g.nodes[p].op));
            ck_assert_msg(p < i, "a copy comes after its reader");
            reads++;
        }
    }
    ck_assert_int_gt(reads, 0);
    /* a second pass is refused: its copies would be copied */
    ck_assert_int_ne(tr_remat(&g, full, blocks), 0);
    ck_assert_msg(strstr(g.message, "already") != NULL, "%s", g.message);
    tr_graph_free(&g);
    tr_recipe_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remat");
    TCase *tc = tcase_create("checkpointing");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bert_every_setting_same_gradients);
    tcase_add_test(tc, gpt_every_setting_same_gradients);
    tcase_add_test(tc, bf16_every_setting_same_gradients);
    tcase_add_test(tc, mlp_every_setting_same_gradients);
    tcase_add_test(tc, resnet_batchnorm_statistics_move_once);
    tcase_add_test(tc, full_backward_reads_only_copies);
    tcase_add_test(tc, gradients_in_the_arena);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
