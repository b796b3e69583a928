/* The pipeline's split (src/graph/stages.c) and a stage's memory plan (memplan.c, program.c): a
 * residual model of 4 blocks, pre-LN style (the gradient of its residual stream is one value every
 * block adds into, as GPT's is), dealt to 2 and 4 stages. Each node runs on one stage, values
 * travel forward in the forward and back in the backward, and a stage's slots keep each micro-
 * batch's stash apart from the others' and from what the parts share. Run stage by stage on one
 * process — each stage its own regions, the values that travel copied between them — 2 micro-
 * batches give the same gradients, to the bit, as the whole model's program. And the blocks are
 * dealt as evenly as their weights allow. */
#include "runner.h"

#include "graph/program.h"
#include "graph/stages.h"
#include "harness.h"
#include "models.h"

enum { BLOCKS = 4, D = 6 };

/* x [B, D] → 4 blocks of x + tanh(linear(layernorm(x))) → a linear head, summed: the loss. */
static void residual_model(struct tr_graph *g, int *x_out)
{
    int x = tr_input(g, "x", TR_F64, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(D)});
    *x_out = x;
    int h = tr_tanh(g, model_linear(g, TR_F64, "embed", x, D, D));
    for (int b = 0; b < BLOCKS; b++) {
        char p[16];
        tr_graph_block(g, b);
        snprintf(p, sizeof p, "b%d.ln", b);
        int n = tr_layernorm(g, h, model_param(g, TR_F64, p, "weight", 1, (int64_t[]){D}),
                             model_param(g, TR_F64, p, "bias", 1, (int64_t[]){D}), 1e-5f);
        snprintf(p, sizeof p, "b%d.fc", b);
        h = tr_add(g, h, tr_tanh(g, model_linear(g, TR_F64, p, n, D, D)));
        tr_graph_block(g, -1);
    }
    tr_graph_set_loss(g, tr_sum(g, model_linear(g, TR_F64, "head", h, D, 3), -1));
}

static uint64_t seed = 99;

static void fill(double *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        seed ^= seed >> 12, seed ^= seed << 25, seed ^= seed >> 27;
        d[i] = -1 + 2 * (double)((seed * 2685821657736338717ull) >> 11) / 9007199254740992.0;
    }
}

/* One stage, runnable: its program (slots 2) and regions. */
struct stage_run {
    struct tr_program p;
    struct tr_exec x;
    struct tr_allocator alloc;
};

START_TEST(pipelined_equals_whole)
{
    int counts[] = {2, 4};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int P = counts[c];
        const int64_t B = 3, M = 2;
        /* the whole model: the reference gradients over 2 micro-batches */
        struct harness h = {0};
        tr_graph_init(&h.g);
        int x;
        residual_model(&h.g, &x);
        harness_plan(&h, B, 1, false);
        double inputs[2][B * D];
        fill(&inputs[0][0], 2 * B * D);
        seed = 7;
        for (int v = 0; v < h.g.nvalues; v++)
            if (h.g.values[v].kind == TR_PARAM)
                harness_fill(&h, v, &seed, -0.5, 0.5);
        memset(h.x.base[TR_GRAD], 0, h.plan.region_bytes[TR_GRAD]);
        *harness_f64(&h, h.loss_scale) = 1;
        struct tr_diag why = {0};
        for (int m = 0; m < M; m++) {
            memcpy(harness_f64(&h, x), inputs[m], sizeof inputs[m]);
            ck_assert_msg(tr_exec_run(&h.x, B, 1, &why) == 0, "%s", tr_diag_last(&why));
        }

        /* the split: each node on one stage, transfers in their pass's direction */
        int first[TR_MAX_STAGES + 1];
        tr_stages_balance(NULL, BLOCKS, 0, 0, P, first);
        struct tr_stages st;
        ck_assert_msg(tr_stages_split(&st, &h.g, h.schedule, h.n, P, first) == 0, "%s", h.g.message);
        int *runs = calloc((size_t)h.g.nnodes, sizeof *runs);
        for (int s = 0; s < P; s++)
            for (int i = 0; i < st.stage[s].n; i++)
                runs[st.stage[s].schedule[i]]++;
        for (int i = 0; i < h.g.nnodes; i++)
            ck_assert_msg(runs[i] == 1, "node %d (%s) runs on %d stages", i, tr_op_name(h.g.nodes[i].op), runs[i]);
        free(runs);
        ck_assert_int_gt(st.ntransfers, 0);
        for (int i = 0; i < st.ntransfers; i++)
            ck_assert(st.transfers[i].part == TR_PART_FORWARD ? st.transfers[i].to > st.transfers[i].from
                                                             : st.transfers[i].to < st.transfers[i].from);

        /* each stage: slots apart, and the same gradients */
        struct stage_run *run = calloc((size_t)P, sizeof *run);
        struct tr_bucket bucket = {B, 1};
        for (int s = 0; s < P; s++) {
            struct stage_run *r = &run[s];
            ck_assert_int_eq(tr_program_plan_stage(&r->p, &h.g, &st, s, 2, &bucket, 1, &h.g.loss, 1, NULL), 0);
            ck_assert_uint_eq(r->p.region_bytes[TR_ACT], (size_t)r->p.plans[0].stash_at + 2 * r->p.stash_bytes);
            const struct tr_memplan *a = tr_program_slot_plan(&r->p, B, 1, 0), *b = tr_program_slot_plan(&r->p, B, 1, 1);
            for (int v = 0; v < h.g.nvalues; v++) {
                if (!a->stash || !a->stash[v] || a->offset[v] < 0)
                    continue;   /* kept between the parts: each slot's own, after what the parts share */
                ck_assert_int_ge(a->offset[v], r->p.plans[0].stash_at);
                ck_assert_int_eq(b->offset[v] - a->offset[v], (int64_t)r->p.stash_bytes);
                ck_assert_uint_le((size_t)b->offset[v] + b->bytes[v], r->p.region_bytes[TR_ACT]);
            }
            r->x = (struct tr_exec){.g = &h.g, .schedule = r->p.schedule, .n = r->p.n, .plan = a, .be = tr_backend_cpu(),
                                    .rng = &h.rng};
            tr_alloc_init(&r->alloc, NULL);
            ck_assert(tr_exec_alloc(&r->x, &r->alloc, r->p.region_bytes, r->p.workspace_bytes, &why) == 0);
            memset(r->x.base[TR_GRAD], 0, r->p.region_bytes[TR_GRAD]);
            for (int v = 0; v < h.g.nvalues; v++)   /* its parameters, the whole model's values */
                if (h.g.values[v].kind == TR_PARAM && r->p.plans[0].offset[v] >= 0)
                    memcpy(tr_exec_data(&r->x, v), harness_f64(&h, v), h.plan.bytes[v]);
        }
        /* GPipe's order on one process: every forward, then every backward (2 slots) */
        for (int pass = 0; pass < 2; pass++)
            for (int m = 0; m < M; m++)
                for (int k = 0; k < P; k++) {
                    int s = pass ? P - 1 - k : k;
                    struct stage_run *r = &run[s];
                    r->x.plan = tr_program_slot_plan(&r->p, B, 1, m);
                    if (!pass && tr_exec_data(&r->x, x))
                        memcpy(tr_exec_data(&r->x, x), inputs[m], sizeof inputs[m]);
                    if (pass && tr_exec_data(&r->x, h.loss_scale))
                        *(double *)tr_exec_data(&r->x, h.loss_scale) = 1;
                    for (int i = 0; i < st.ntransfers; i++)   /* what it receives, from its sender's slot */
                        if (st.transfers[i].to == s && st.transfers[i].part == pass) {
                            struct stage_run *from = &run[st.transfers[i].from];
                            from->x.plan = tr_program_slot_plan(&from->p, B, 1, m);
                            memcpy(tr_exec_data(&r->x, st.transfers[i].value), tr_exec_data(&from->x, st.transfers[i].value),
                                   (size_t)(B * D) * sizeof(double));
                        }
                    ck_assert_msg(tr_exec_run_part(&r->x, B, 1, pass ? r->p.split : 0, pass ? r->p.n : r->p.split,
                                                   &why) == 0, "%s", tr_diag_last(&why));
                }
        for (int v = 0; v < h.g.nvalues; v++) {
            if (h.g.values[v].kind != TR_PARAM)
                continue;
            int held = 0;
            for (int s = 0; s < P; s++)
                if (run[s].p.plans[0].offset[v] >= 0) {
                    held++;
                    ck_assert_msg(!memcmp(tr_exec_data(&run[s].x, h.g.values[v].grad),
                                          harness_f64(&h, h.g.values[v].grad), h.plan.bytes[h.g.values[v].grad]),
                                  "%d stages: the gradient of %s differs from the whole model's", P, h.g.values[v].name);
                }
            ck_assert_int_eq(held, 1);
        }
        for (int s = 0; s < P; s++) {
            tr_alloc_destroy(&run[s].alloc);
            tr_exec_free(&run[s].x);
            tr_program_free(&run[s].p);
        }
        free(run);
        tr_stages_free(&st);
        harness_free(&h);
    }
}
END_TEST

START_TEST(blocks_dealt_evenly)
{
    int first[TR_MAX_STAGES + 1];
    tr_stages_balance(NULL, 4, 0, 0, 2, first);
    ck_assert(first[0] == 0 && first[1] == 2 && first[2] == 4);
    tr_stages_balance((double[]){1, 1, 1, 1}, 4, 2, 0, 2, first);   /* heavy embeddings: fewer blocks first */
    ck_assert(first[1] == 1);
    tr_stages_balance((double[]){1, 1, 1, 1}, 4, 0, 2, 2, first);   /* a heavy head: fewer blocks last */
    ck_assert(first[1] == 3);
    tr_stages_balance((double[]){5, 1, 1, 1, 1, 1}, 6, 0, 0, 3, first);
    ck_assert(first[1] == 1 && (first[2] == 3 || first[2] == 4) && first[3] == 6);   /* 5 | 1 1 (1) | (1) 1 1: 5 at most */
    tr_stages_balance(NULL, 4, 0, 0, 4, first);   /* a block each */
    for (int s = 0; s <= 4; s++)
        ck_assert_int_eq(first[s], s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stages");
    TCase *tc = tcase_create("stages");
    tcase_add_test(tc, pipelined_equals_whole);
    tcase_add_test(tc, blocks_dealt_evenly);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
