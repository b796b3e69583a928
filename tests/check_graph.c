/* The program: graph builders, autodiff, the memory plan and the executor, end to end.
 * Gradients of whole graphs are checked against finite differences in f64 (the same bound
 * as the kernel checks: gradcheck.h); the memory plan against its invariants on random graphs
 * and on a BERT-base-shaped graph. */
#include "runner.h"
#include <time.h>

#include "graph/program.h"
#include "harness.h"
#include "models.h"

static uint64_t rng_state = 2024;

static double uniform(double lo, double hi)
{
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return lo + (hi - lo) * (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* loss = Σ y ⊙ r for a fixed random r: a scalar whose gradient dy = r is dense and random,
 * built from matmul alone: [1, n] · [n, 1]. */
static int weighted_sum(struct tr_graph *g, int y, int *r_out)
{
    struct tr_dim n = tr_shape_numel(&g->values[y].shape);
    int flat = tr_reshape(g, y, 2, (struct tr_dim[]){tr_dim_const(1), n});
    int r = tr_input(g, "r", g->values[y].dtype, 2, (struct tr_dim[]){n, tr_dim_const(1)});
    *r_out = r;
    int s = tr_matmul(g, flat, r, 0, 0);
    return tr_reshape(g, s, 1, (struct tr_dim[]){tr_dim_const(1)});
}

START_TEST(mlp_gradients)
{
    struct harness h = {0};
    tr_graph_init(&h.g);
    struct tr_graph *g = &h.g;
    int x = tr_input(g, "x", TR_F64, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(5)});
    int y = tr_gelu(g, model_linear(g, TR_F64, "fc1", x, 5, 7), 0);
    y = tr_tanh(g, model_linear(g, TR_F64, "fc2", y, 7, 6));
    y = tr_add(g, y, tr_scale(g, tr_relu(g, y), 0.5f));   /* two paths into one value */
    y = model_linear(g, TR_F64, "fc3", y, 6, 3);
    int r;
    tr_graph_set_loss(g, weighted_sum(g, y, &r));
    harness_plan(&h, 4, 1, true);
    uint64_t seed = 5;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM)
            harness_fill(&h, v, &seed, -0.8, 0.8);
    harness_fill(&h, x, &seed, -1, 1);
    harness_fill(&h, r, &seed, -1, 1);
    double e = harness_gradcheck(&h, 4, 1);
    ck_assert_msg(e < 1e-6, "normwise error %g", e);
    /* a smaller micro-batch runs on the same plan */
    e = harness_gradcheck(&h, 2, 1);
    ck_assert_msg(e < 1e-6, "B=2: normwise error %g", e);
    harness_free(&h);
}
END_TEST

/* ZeRO 3's gather pass: every parameter read through copies the executor fills before their
 * first reader — here from the parameters region itself, as the ranks' parts would be — gives
 * the same loss and gradients, bit for bit, as the parameters read in place; each copy lives in
 * the arena only while its phase reads it, and the parameters themselves no node reads. */
static int fill_from_region(void *ctx, int copy, int param, void *dst, struct tr_diag *d)
{
    (void)d, (void)copy;
    struct harness *h = ctx;
    for (int v = 0, k = 0; v < h->g.nvalues; v++)
        if (h->g.values[v].kind == TR_PARAM && k++ == param) {
            size_t bytes = (size_t)tr_dim_eval(tr_shape_numel(&h->g.values[v].shape), 1, 1) * sizeof(double);
            memcpy(dst, h->x.base[TR_PARAM] + h->plan.offset[v], bytes);
            return 0;
        }
    return TR_EINVAL;
}

static void gathered_mlp(struct harness *h, bool gathered, bool ahead, int *x, int *r)
{
    tr_graph_init(&h->g);
    struct tr_graph *g = &h->g;
    *x = tr_input(g, "x", TR_F64, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(5)});
    int w = model_param(g, TR_F64, "", "w0", 2, (int64_t[]){5, 5});
    tr_graph_block(g, 0);   /* three blocks: the copies of one travel while the block before runs */
    int y = tr_gelu(g, tr_matmul(g, *x, tr_transpose(g, w), 0, 0), 0);   /* a view of a parameter */
    tr_graph_block(g, 1);
    y = tr_tanh(g, model_linear(g, TR_F64, "fc1", y, 5, 7));
    tr_graph_block(g, 2);
    y = model_linear(g, TR_F64, "fc2", y, 7, 3);
    tr_graph_block(g, -1);
    tr_graph_set_loss(g, weighted_sum(g, y, r));
    ck_assert(!g->error);
    h->loss_scale = tr_autodiff(g);
    if (gathered)
        tr_gather_params(g, ahead);
    h->n = g->nnodes;
    h->schedule = malloc((size_t)h->n * sizeof(int));
    for (int i = 0; i < h->n; i++)
        h->schedule[i] = i;
    tr_memplan_build(&h->plan, g, h->schedule, h->n, 4, 1, &g->loss, 1, tr_cpu_ops.workspace_bytes, false);
    h->x = (struct tr_exec){.g = g, .schedule = h->schedule, .n = h->n, .plan = &h->plan, .be = tr_backend_cpu(),
                            .rng = &h->rng, .debug = true};
    tr_alloc_init(&h->alloc, NULL);
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_alloc(&h->x, &h->alloc, h->plan.region_bytes, h->plan.workspace_bytes, &why) == 0,
                  "%s", tr_diag_last(&why));
    uint64_t seed = 11;
    for (int v = 0; v < g->nvalues; v++)   /* the same values in both: filled before the shard is set */
        if (g->values[v].kind == TR_PARAM || v == *x || v == *r)
            harness_fill(h, v, &seed, -0.9, 0.9);
    *harness_f64(h, h->loss_scale) = 1;
    if (gathered)
        h->x.shard = (struct tr_exec_shard){.fill = fill_from_region, .ctx = h};
}

START_TEST(gather_pass)
{
    struct harness plain = {0}, gathered = {0};
    int x, r;
    bool ahead = _i;   /* the copies a block ahead: each gathered where the block before's are */
    gathered_mlp(&plain, false, false, &x, &r);
    gathered_mlp(&gathered, true, ahead, &x, &r);
    const struct tr_graph *g = &gathered.g;
    int params = 0, copies = 0;
    for (int v = 0; v < g->nvalues; v++) {
        params += g->values[v].kind == TR_PARAM;
        if (g->values[v].gathers < 0)
            continue;
        copies++;
        ck_assert(tr_memplan_in_arena(&gathered.plan, v));
        ck_assert_int_eq(gathered.plan.first[v] >= 0, 1);
    }
    for (int i = 0; i < g->nnodes; i++)   /* no node reads a parameter */
        for (int j = 0; j < g->nodes[i].nin; j++)
            ck_assert(g->nodes[i].in[j] < 0 || g->values[g->nodes[i].in[j]].kind != TR_PARAM);
    int fc1[2], n = 0;   /* fc1.weight (the second parameter): its forward copy dies before its backward's */
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].gathers == 1 && n < 2)
            fc1[n++] = v;
    ck_assert_int_eq(n, 2);
    ck_assert_int_lt(gathered.plan.last[fc1[0]], gathered.plan.first[fc1[1]]);
    int early = 0;
    for (int v = 0; v < g->nvalues; v++)   /* each copy begins where its block's do, or the block before's */
        if (g->values[v].gathers >= 0) {
            int reader = -1;
            for (int i = 0; i < g->nnodes && reader < 0; i++)
                for (int j = 0; j < g->nodes[i].nin; j++)
                    if (g->nodes[i].in[j] >= 0 && tr_storage_of(g, g->nodes[i].in[j]) == v)
                        reader = i;
            ck_assert_int_le(gathered.plan.first[v], reader);
            if (!ahead)
                ck_assert_int_eq(gathered.plan.first[v], reader);
            early += gathered.plan.first[v] < reader;
            ck_assert_int_ge(gathered.plan.gather_at[v], 0);
        }
    ck_assert(ahead ? early > 0 : early == 0);
    ck_assert_int_eq(params, 5);   /* w0, fc1 and fc2's weights and biases */
    ck_assert_int_eq(gathered.plan.ngather, copies);
    ck_assert_int_gt(copies, params);   /* the weights are read by the backward too */
    ck_assert_int_le(copies, 2 * params);
    for (int c = 1; c < gathered.plan.ngather; c++)   /* listed by first step */
        ck_assert_int_le(gathered.plan.first[gathered.plan.gather[c - 1]], gathered.plan.first[gathered.plan.gather[c]]);
    struct tr_diag why = {0};
    for (int round = 0; round < 2; round++) {   /* a second run over the same arena */
        memset(plain.x.base[TR_GRAD], 0, plain.plan.region_bytes[TR_GRAD]);
        memset(gathered.x.base[TR_GRAD], 0, gathered.plan.region_bytes[TR_GRAD]);
        ck_assert_msg(tr_exec_run(&plain.x, 4, 1, &why) == 0, "%s", tr_diag_last(&why));
        ck_assert_msg(tr_exec_run(&gathered.x, 4, 1, &why) == 0, "%s", tr_diag_last(&why));
        ck_assert(*harness_f64(&plain, plain.g.loss) == *harness_f64(&gathered, gathered.g.loss));
        ck_assert_int_eq(plain.plan.region_bytes[TR_GRAD], gathered.plan.region_bytes[TR_GRAD]);
        ck_assert(!memcmp(plain.x.base[TR_GRAD], gathered.x.base[TR_GRAD], plain.plan.region_bytes[TR_GRAD]));
    }
    ck_assert_ptr_null(tr_exec_data(&gathered.x, 1));   /* a parameter: whole only in its copies */
    ck_assert_int_eq(tr_exec_gathers(&gathered.x, &why), 0);   /* a round with no micro-batch */
    harness_free(&plain);
    harness_free(&gathered);
}
END_TEST

/* Gradients add up across runs until zeroed: that is gradient accumulation. */
START_TEST(gradients_accumulate)
{
    struct harness h = {0};
    tr_graph_init(&h.g);
    int x = tr_input(&h.g, "x", TR_F64, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(3)});
    int r, y = model_linear(&h.g, TR_F64, "fc", x, 3, 2);
    tr_graph_set_loss(&h.g, weighted_sum(&h.g, y, &r));
    harness_plan(&h, 2, 1, false);
    uint64_t seed = 8;
    for (int v = 0; v < h.g.nvalues; v++)
        if (h.g.values[v].kind == TR_PARAM || h.g.values[v].kind == TR_INPUT)
            harness_fill(&h, v, &seed, -1, 1);
    harness_run(&h, 2, 1);
    size_t n = h.plan.region_bytes[TR_GRAD];
    double *once = malloc(n);
    memcpy(once, h.x.base[TR_GRAD], n);
    ck_assert_int_eq(tr_exec_run(&h.x, 2, 1, &(struct tr_diag){0}), 0);   /* again, without zeroing */
    double *twice = (double *)h.x.base[TR_GRAD];
    for (size_t i = 0; i < n / sizeof(double); i++)
        ck_assert_double_eq_tol(twice[i], 2 * once[i], 1e-12);
    free(once);
    harness_free(&h);
}
END_TEST

/* A random graph of the ops whose kernels are elementwise or GEMM, with fan-out and views. */
static void random_graph(struct tr_graph *g, int nops, int *r_out)
{
    int pool[64], npool = 0;
    pool[npool++] = tr_input(g, "x", TR_F64, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(6)});
    for (int i = 0; i < nops && npool < 64; i++) {
        int a = pool[(int)uniform(0, npool)], b = pool[(int)uniform(0, npool)], y;
        switch ((int)uniform(0, 7)) {
        case 0: y = tr_add(g, a, b); break;
        case 1: y = tr_mul(g, a, b); break;
        case 2: y = tr_tanh(g, a); break;
        case 3: y = tr_gelu(g, a, 1); break;
        case 4: y = tr_scale(g, a, (float)uniform(-1, 1)); break;
        case 5: {
            char name[16];
            snprintf(name, sizeof name, "w%d", i);
            y = model_linear(g, TR_F64, name, a, 6, 6);
            break;
        }
        default:   /* a round trip through a view */
            y = tr_reshape(g, a, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(2), tr_dim_const(3)});
            y = tr_reshape(g, tr_relu(g, y), 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(6)});
        }
        pool[npool++] = y;
    }
    tr_graph_set_loss(g, weighted_sum(g, pool[npool - 1], r_out));
}

/* The plan's invariants: values live at the same step never share bytes; the arena is at
 * least the live peak and at most the sum; the allocator's peak is the planned one; debug execution (dead slots poisoned, writes
 * outside a node's outputs refused) gives the same loss and gradients as a plain run. */
START_TEST(memplan_random_graphs)
{
    for (int trial = 0; trial < 40; trial++) {
        struct harness h = {0}, plain = {0};
        tr_graph_init(&h.g);
        tr_graph_init(&plain.g);
        uint64_t keep_state = rng_state;
        int r, r2;
        random_graph(&h.g, 6 + trial % 20, &r);
        rng_state = keep_state;
        random_graph(&plain.g, 6 + trial % 20, &r2);
        int B = 1 + trial % 4;
        harness_plan(&h, B, 1, true);
        harness_plan(&plain, B, 1, false);
        const struct tr_memplan *p = &h.plan;
        for (int u = 0; u < h.g.nvalues; u++)
            for (int v = u + 1; v < h.g.nvalues; v++) {
                if (h.g.values[u].kind != TR_ACT || h.g.values[v].kind != TR_ACT ||
                    h.g.values[u].view_of >= 0 || h.g.values[v].view_of >= 0 || p->first[u] < 0 ||
                    p->first[v] < 0)
                    continue;
                bool overlap_time = p->first[u] < p->last[v] && p->first[v] < p->last[u];
                bool overlap_space = p->offset[u] < p->offset[v] + (int64_t)p->bytes[v] &&
                                     p->offset[v] < p->offset[u] + (int64_t)p->bytes[u];
                ck_assert_msg(!(overlap_time && overlap_space), "trial %d: values %d and %d overlap", trial, u, v);
            }
        ck_assert_uint_ge(p->region_bytes[TR_ACT], p->arena_live_peak);
        ck_assert_uint_le(p->region_bytes[TR_ACT], p->arena_sum);
        /* the allocator's high-water marks are the plan's numbers, exactly */
        struct tr_alloc_stats st;
        tr_alloc_stats(&h.alloc, &st);
        ck_assert_uint_eq(st.region[TR_REGION_ARENA].peak, p->region_bytes[TR_ACT]);
        ck_assert_uint_eq(st.peak, p->region_bytes[TR_PARAM] + p->region_bytes[TR_GRAD] +
                                       p->region_bytes[TR_INPUT] + p->region_bytes[TR_ACT] +
                                       p->workspace_bytes);
        uint64_t seed = 77;
        for (int v = 0; v < h.g.nvalues; v++)
            if (h.g.values[v].kind == TR_PARAM || h.g.values[v].kind == TR_INPUT) {
                uint64_t s2 = seed;
                harness_fill(&h, v, &seed, -1, 1);
                harness_fill(&plain, v, &s2, -1, 1);
            }
        double a = harness_run(&h, B, 1), b = harness_run(&plain, B, 1);
        ck_assert_msg(isfinite(a) && a == b, "trial %d: loss %g (debug) vs %g", trial, a, b);
        if (h.plan.region_bytes[TR_GRAD])
            ck_assert_int_eq(memcmp(h.x.base[TR_GRAD], plain.x.base[TR_GRAD], h.plan.region_bytes[TR_GRAD]), 0);
        harness_free(&h);
        harness_free(&plain);
    }
}
END_TEST

/* BERT-base shape: 12 layers, hidden 768, 12 heads, ffn 3072, seq 512, micro-batch 8. The plan
 * must reuse memory (the arena far below the sum of all activations) and be quick to make. */
START_TEST(memplan_bert_base)
{
    struct tr_graph g;
    tr_graph_init(&g);
    int x = tr_input(&g, "x", TR_F32, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(768)});
    int mask = tr_input(&g, "mask", TR_U8, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1)});
    for (int l = 0; l < 12; l++)
        x = model_bert_block(&g, TR_F32, l, x, mask, 768, 12, 3072, 0.1f);
    tr_graph_set_loss(&g, tr_sum(&g, x, -1));
    ck_assert_msg(!g.error, "%s", g.message);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_ge(tr_autodiff(&g), 0);
    int *schedule = malloc((size_t)g.nnodes * sizeof(int));
    for (int i = 0; i < g.nnodes; i++)
        schedule[i] = i;
    struct tr_memplan p;
    tr_memplan_build(&p, &g, schedule, g.nnodes, 8, 512, &g.loss, 1, tr_cpu_ops.workspace_bytes, false);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    double gib = 1073741824.0;
    printf("BERT-base (B=8, S=512): %d nodes, %d values; arena %.3f GiB, live peak %.3f GiB, "
           "sum of activations %.3f GiB, reuse factor %.2f; params %.1f MiB; autodiff + plan %.1f ms\n",
           g.nnodes, g.nvalues, (double)p.region_bytes[TR_ACT] / gib, (double)p.arena_live_peak / gib,
           (double)p.arena_sum / gib, (double)p.arena_sum / (double)p.region_bytes[TR_ACT],
           (double)p.region_bytes[TR_PARAM] / 1048576.0, ms);
    ck_assert_uint_ge(p.region_bytes[TR_ACT], p.arena_live_peak);
    ck_assert(p.region_bytes[TR_ACT] < p.arena_sum / 2);
    ck_assert(ms < 1000);
    for (int u = 0; u < g.nvalues; u++)   /* no two values live at once share a byte */
        for (int v = u + 1; v < g.nvalues; v++)
            if (g.values[u].kind == TR_ACT && g.values[v].kind == TR_ACT && g.values[u].view_of < 0 &&
                g.values[v].view_of < 0 && p.first[u] >= 0 && p.first[v] >= 0 &&
                p.first[u] < p.last[v] && p.first[v] < p.last[u])
                ck_assert_msg(p.offset[u] >= p.offset[v] + (int64_t)p.bytes[v] ||
                              p.offset[v] >= p.offset[u] + (int64_t)p.bytes[u], "values %d and %d overlap", u, v);
    /* the regions, taken from the allocator, peak at exactly the planned bytes */
    struct tr_allocator alloc;
    struct tr_exec ex = {.g = &g, .plan = &p};
    tr_alloc_init(&alloc, NULL);
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_alloc(&ex, &alloc, p.region_bytes, p.workspace_bytes, &why) == 0, "%s", tr_diag_last(&why));
    struct tr_alloc_stats st;
    tr_alloc_stats(&alloc, &st);
    ck_assert_uint_eq(st.region[TR_REGION_ARENA].peak, p.region_bytes[TR_ACT]);
    ck_assert_uint_eq(st.peak, p.region_bytes[TR_PARAM] + p.region_bytes[TR_GRAD] + p.region_bytes[TR_INPUT] +
                                   p.region_bytes[TR_ACT] + p.workspace_bytes);
    tr_alloc_destroy(&alloc);
    /* 12 layers of 7,087,872 parameters (q, k, v, o: 768·768 + 768; FFN: 768·3072 + 3072 and
     * 3072·768 + 768; two layer norms: 2·768 each), all sizes multiples of 64 bytes */
    ck_assert_uint_eq(p.region_bytes[TR_PARAM], 12u * 7087872u * 4u);
    tr_memplan_free(&p);
    free(schedule);
    tr_graph_free(&g);
}
END_TEST

/* Length buckets: one plan per (B, S), one arena as large as the largest plan; each bucket's
 * run on the shared regions gives the loss a program planned for that bucket alone gives. */
START_TEST(buckets_share_one_arena)
{
    static const struct tr_bucket buckets[] = {{8, 4}, {4, 8}, {2, 16}};
    struct harness alone[3];
    memset(alone, 0, sizeof alone);
    struct tr_graph g;
    int r[4];
    for (int i = 0; i <= 3; i++) {
        struct tr_graph *gi = i < 3 ? &alone[i].g : &g;
        tr_graph_init(gi);
        int x = tr_input(gi, "x", TR_F64, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(6)});
        int y = tr_gelu(gi, model_linear(gi, TR_F64, "fc1", x, 6, 12), 1);
        tr_graph_set_loss(gi, weighted_sum(gi, model_linear(gi, TR_F64, "fc2", y, 12, 6), &r[i]));
    }
    ck_assert_int_ge(tr_autodiff(&g), 0);
    struct tr_program prog;
    ck_assert_int_eq(tr_program_plan(&prog, &g, buckets, 3, &g.loss, 1, tr_cpu_ops.workspace_bytes, false), 0);
    size_t biggest = 0;
    for (int b = 0; b < 3; b++)
        if (prog.plans[b].region_bytes[TR_ACT] > biggest)
            biggest = prog.plans[b].region_bytes[TR_ACT];
    ck_assert_uint_eq(prog.region_bytes[TR_ACT], biggest);
    ck_assert_ptr_eq(tr_program_plan_for(&prog, 3, 5), &prog.plans[1]);   /* (4, 8) holds it */
    ck_assert_ptr_null(tr_program_plan_for(&prog, 9, 1));
    char *base[TR_NKINDS];
    for (int k = 0; k < TR_NKINDS; k++)
        base[k] = calloc(prog.region_bytes[k] + 64, 1);
    for (int b = 0; b < 3; b++) {
        struct harness *h = &alone[b];
        harness_plan(h, buckets[b].B, buckets[b].S, false);
        uint64_t seed = 99;
        for (int v = 0; v < h->g.nvalues; v++)
            if (h->g.values[v].kind == TR_PARAM || h->g.values[v].kind == TR_INPUT)
                harness_fill(h, v, &seed, -1, 1);
        double expected = harness_run(h, buckets[b].B, buckets[b].S);
        struct tr_exec x = {.g = &g, .schedule = prog.schedule, .n = prog.n, .plan = &prog.plans[b],
                            .be = tr_backend_cpu(), .debug = true};
        memcpy(x.base, base, sizeof base);
        for (int v = 0; v < g.nvalues; v++)   /* the same values, at this plan's offsets */
            if (g.values[v].kind == TR_PARAM || g.values[v].kind == TR_INPUT)
                memcpy(tr_exec_data(&x, v), harness_f64(h, v), h->plan.bytes[v]);
        memset(base[TR_GRAD], 0, prog.region_bytes[TR_GRAD]);
        ck_assert_int_eq(tr_exec_run(&x, buckets[b].B, buckets[b].S, &(struct tr_diag){0}), 0);
        ck_assert_double_eq(*(double *)tr_exec_data(&x, g.loss), expected);
        tr_exec_free(&x);
        harness_free(h);
    }
    for (int k = 0; k < TR_NKINDS; k++)
        free(base[k]);
    tr_program_free(&prog);
    tr_graph_free(&g);
}
END_TEST

/* Builders refuse shapes that do not fit, with a sentence, and later builders pass -1 on. */
START_TEST(builder_errors)
{
    struct tr_graph g;
    tr_graph_init(&g);
    int a = tr_input(&g, "a", TR_F32, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(4)});
    int w = tr_param(&g, "w", TR_F32, 2, (struct tr_dim[]){tr_dim_const(5), tr_dim_const(3)});
    int y = tr_matmul(&g, a, w, 0, 0);
    ck_assert_int_eq(y, -1);
    ck_assert_str_eq(g.message, "matmul: shapes [B, 4] and [5, 3] do not multiply");
    ck_assert_int_eq(tr_relu(&g, y), -1);
    ck_assert_str_eq(g.message, "matmul: shapes [B, 4] and [5, 3] do not multiply");
    tr_graph_free(&g);
    tr_graph_init(&g);
    ck_assert_int_eq(tr_param(&g, "p", TR_F32, 1, (struct tr_dim[]){tr_dim_B(2)}), -1);
    ck_assert_str_eq(g.message, "p: a parameter's size cannot depend on B or S");
    tr_graph_free(&g);
    tr_graph_init(&g);
    ck_assert_int_eq(tr_autodiff(&g), -1);
    ck_assert_str_eq(g.message, "autodiff: no loss was set");
    tr_graph_free(&g);
}
END_TEST

/* Images channels last (tr_graph_layout): convolutions, batch norms and the global pool read
 * [N, H, W, C], record the layout, and pass it to their gradients; windowed pools refuse it. */
START_TEST(channels_last_shapes)
{
    struct tr_graph g;
    tr_graph_init(&g);
    tr_graph_layout(&g, TR_NHWC);
    int x = tr_input(&g, "x", TR_F32, 4, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(9), tr_dim_const(7), tr_dim_const(3)});
    int w = tr_param(&g, "w", TR_F32, 4, (struct tr_dim[]){tr_dim_const(8), tr_dim_const(3), tr_dim_const(3), tr_dim_const(3)});
    int y = tr_conv2d(&g, x, w, 2, 1);
    ck_assert_msg(y >= 0, "%s", g.message);
    const struct tr_shape *sy = &g.values[y].shape;
    ck_assert(sy->rank == 4 && sy->dim[1].k == 5 && sy->dim[2].k == 4 && sy->dim[3].k == 8);
    struct tr_dim c[1] = {tr_dim_const(8)};
    int bn = tr_batchnorm(&g, y, tr_param(&g, "g", TR_F32, 1, c), tr_param(&g, "b", TR_F32, 1, c),
                          tr_state(&g, "m", TR_F32, 1, c), tr_state(&g, "v", TR_F32, 1, c), 1e-5f, 0.1f, 1);
    ck_assert_msg(bn >= 0, "%s", g.message);
    int pooled = tr_global_avgpool(&g, tr_relu(&g, bn));
    ck_assert(g.values[pooled].shape.rank == 2 && g.values[pooled].shape.dim[1].k == 8);
    int t = tr_input(&g, "t", TR_I32, 1, (struct tr_dim[]){tr_dim_B(1)});
    tr_graph_set_loss(&g, tr_cross_entropy(&g, pooled, t, -100));
    ck_assert_int_ge(tr_autodiff(&g), 0);
    int marked = 0;
    for (int i = 0; i < g.nnodes; i++) {
        const struct tr_node *n = &g.nodes[i];
        enum tr_op op = n->op;
        if (op == TR_OP_CONV2D || op == TR_OP_CONV2D_BWD_DATA || op == TR_OP_CONV2D_BWD_FILTER)
            marked += n->attrs.conv.channels_last == TR_NHWC;
        else if (op == TR_OP_BATCHNORM || op == TR_OP_BATCHNORM_BWD)
            marked += n->attrs.batchnorm.channels_last;
        else if (op == TR_OP_GLOBAL_AVGPOOL || op == TR_OP_GLOBAL_AVGPOOL_BWD)
            marked += n->attrs.pool.channels_last == TR_NHWC;
    }
    ck_assert_int_eq(marked, 2 + 2 + 2);   /* conv and bwd_filter (x takes no gradient), bn, pool */
    ck_assert_int_eq(tr_maxpool(&g, y, 2, 2, 0), -1);
    ck_assert_str_eq(g.message, "maxpool: images channels last are not supported; [N, C, H, W] only");
    tr_graph_free(&g);
    tr_graph_init(&g);
    tr_graph_layout(&g, TR_NHWC);
    x = tr_input(&g, "x", TR_F32, 4, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(9), tr_dim_const(7), tr_dim_const(3)});
    w = tr_param(&g, "w", TR_F32, 4, (struct tr_dim[]){tr_dim_const(8), tr_dim_const(7), tr_dim_const(3), tr_dim_const(3)});
    ck_assert_int_eq(tr_conv2d(&g, x, w, 1, 1), -1);
    ck_assert_str_eq(g.message, "conv2d: x [B, 9, 7, 3] and w [8, 7, 3, 3]: expected [N, H, W, C] and [O, C, kh, kw]");
    tr_graph_free(&g);
}
END_TEST

/* Two BERT blocks and a classifier, planned for [8, 128]: arena bytes, built as f32 or through
 * the amp pass (bf16 activations, the logits kept f32). */
static size_t blocks_arena(enum tr_dtype low, bool copies, struct tr_graph *g)
{
    tr_graph_init(g);
    int x = tr_input(g, "x", TR_F32, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(64)});
    int mask = tr_input(g, "mask", TR_U8, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1)});
    for (int l = 0; l < 2; l++)
        x = model_bert_block(g, TR_F32, l, x, mask, 64, 4, 256, 0.1f);
    struct tr_dim rows = tr_dim_mul(tr_dim_B(1), tr_dim_S(1));
    int flat = tr_reshape(g, x, 2, (struct tr_dim[]){rows, tr_dim_const(64)});
    int logits = model_linear(g, TR_F32, "head", flat, 64, 5);
    int t = tr_input(g, "t", TR_I32, 1, &rows);
    tr_graph_set_loss(g, tr_cross_entropy(g, logits, t, -100));
    if (low != TR_F32)
        ck_assert_int_eq(tr_amp(g, low, &logits, 1, copies), 0);
    ck_assert_int_ge(tr_autodiff(g), 0);
    ck_assert_msg(!g->error, "%s", g->message);
    ck_assert(g->values[logits].dtype == TR_F32 && g->values[g->loss].dtype == TR_F32);
    int *schedule = malloc((size_t)g->nnodes * sizeof(int));
    for (int i = 0; i < g->nnodes; i++)
        schedule[i] = i;
    struct tr_memplan p;
    tr_memplan_build(&p, g, schedule, g->nnodes, 8, 128, &g->loss, 1, tr_cpu_ops.workspace_bytes, false);
    size_t arena = p.region_bytes[TR_ACT];
    tr_memplan_free(&p);
    free(schedule);
    return arena;
}

/* The amp pass: GEMMs and attention read 16-bit operands (parameters through casts, made
 * before their first use), activations are 16-bit, statistics, parameters, gradients and the
 * logits f32; every node's inputs are made before it; the arena shrinks to about half. */
START_TEST(amp_pass)
{
    struct tr_graph g32, g16, gcpu;
    size_t a32 = blocks_arena(TR_F32, false, &g32), a16 = blocks_arena(TR_BF16, true, &g16);
    size_t acpu = blocks_arena(TR_BF16, false, &gcpu);
    struct tr_graph *g = &g16;
    int casts = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const struct tr_node *n = &g->nodes[i];
        for (int j = 0; j < n->nin; j++) {
            int v = n->in[j];
            if (v >= 0 && g->values[v].kind == TR_ACT)
                ck_assert_msg(g->values[v].producer >= 0 && g->values[v].producer < i,
                              "node %d (%s) reads value %d before it is made", i, tr_op_name(n->op), v);
            if (n->phase == TR_FORWARD && (n->op == TR_OP_MATMUL || n->op == TR_OP_ATTENTION) && v >= 0 &&
                g->values[v].dtype != TR_U8)
                ck_assert_msg(g->values[v].dtype == TR_BF16, "node %d (%s) reads %s", i, tr_op_name(n->op),
                              tr_dtype_name(g->values[v].dtype));
        }
        if (n->op == TR_OP_CAST && n->phase == TR_FORWARD)
            casts += g->values[n->in[0]].kind == TR_PARAM;
        if (n->op == TR_OP_LAYERNORM || n->op == TR_OP_ATTENTION) {
            ck_assert(g->values[n->out[0]].dtype == TR_BF16);
            ck_assert(g->values[n->out[1]].dtype == TR_F32);   /* statistics */
        }
    }
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM || g->values[v].kind == TR_GRAD)
            ck_assert(g->values[v].dtype == TR_F32);
    ck_assert_int_eq(casts, 2 * 6 + 1);   /* q, k, v, o, ffn1, ffn2 weights a layer, the head's */
    printf("amp: arena %zu bytes in f32, %zu with bf16 activations and weight copies (%.2f×), %zu without "
           "the copies (%.2f×)\n", a32, a16, (double)a16 / (double)a32, acpu, (double)acpu / (double)a32);
    ck_assert(a16 <= 0.55 * (double)a32);
    ck_assert(acpu < a16);
    for (int i = 0; i < gcpu.nnodes; i++)   /* without copies, no parameter is cast */
        if (gcpu.nodes[i].op == TR_OP_CAST && gcpu.nodes[i].phase == TR_FORWARD)
            ck_assert(gcpu.values[gcpu.nodes[i].in[0]].kind != TR_PARAM);
    tr_graph_free(&g32), tr_graph_free(&g16), tr_graph_free(&gcpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("program");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, builder_errors);
    tcase_add_test(tc, channels_last_shapes);
    tcase_add_test(tc, amp_pass);
    tcase_add_test(tc, mlp_gradients);
    tcase_add_test(tc, gradients_accumulate);
    tcase_add_loop_test(tc, gather_pass, 0, 2);
    tcase_add_test(tc, memplan_random_graphs);
    tcase_add_test(tc, memplan_bert_base);
    tcase_add_test(tc, buckets_share_one_arena);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
