/* Tensor parallelism in the graph (graph.h: tr_allreduce, tr_tensor_in, tr_param_split): a slice
 * of a whole tensor is the rank's blocks of each part, and goes back in place; a residual block
 * split Megatron-style over 2 ranks — a column-split GEMM, tanh, a row-split GEMM summed by an
 * all-reduce, the bias after it — run by two threads, each its own graph and regions, their
 * all-reduces summed between them, gives the whole block's loss and gradients (each rank its slice
 * of a split weight's, a whole weight's entire) over 2 micro-batches — no MPI needed. With
 * sequence parallelism beside it (tr_seq_slice, tr_seq_gather, tr_seq_scatter), a LayerNorm and
 * a dropout over each rank's part of the sequence: the same loss, the one device's dropout mask,
 * and the norm's and bias's gradients, summed over the ranks (tr_ranks_find_partial names them),
 * the whole block's. */
#include "runner.h"

#include <pthread.h>

#include "harness.h"
#include "models.h"
#include "train/ranks.h"

enum { D = 4, F = 6, T = 2, B = 3, S = 4 };

START_TEST(slices_by_parts)
{
    struct tr_graph g;
    tr_graph_init(&g);
    g.tensor = T;
    int p = tr_param(&g, "w", TR_F64, 2, (struct tr_dim[]){tr_dim_const(2), tr_dim_const(3)});   /* [2, 6/T] */
    tr_param_split(&g, p, 1, 3);   /* 3 parts (Q, K, V) of 2 columns each, one a rank */
    struct tr_shape whole = tr_value_whole_shape(&g, p);
    ck_assert(whole.rank == 2 && whole.dim[0].k == 2 && whole.dim[1].k == 6);
    double all[12], part[6], back[12] = {0};
    for (int i = 0; i < 12; i++)
        all[i] = i;
    for (int r = 0; r < T; r++) {
        tr_value_slice(&g, p, r, all, part, sizeof(double), true);
        for (int row = 0; row < 2; row++)
            for (int q = 0; q < 3; q++)   /* part q's column r of each row */
                ck_assert(part[row * 3 + q] == all[row * 6 + q * 2 + r]);
        tr_value_slice(&g, p, r, back, part, sizeof(double), false);
    }
    ck_assert(!memcmp(all, back, sizeof all));
    tr_graph_free(&g);
}
END_TEST

/* The split halves on in: u = tanh(in·W1ᵀ + b1), W1 [F, D] and b1 split by rows (the columns of
 * the product); u·W2ᵀ, W2 [D, F] split by columns (the rows of its GEMM): each rank's partial
 * product, to be summed; the whole bias b2 [D] into *b2. */
static int split_halves(struct tr_graph *g, int in, int *b2)
{
    int w1 = model_param(g, TR_F64, "fc1", "weight", 2, (int64_t[]){F / g->tensor, D});
    int b1 = model_param(g, TR_F64, "fc1", "bias", 1, (int64_t[]){F / g->tensor});
    tr_param_split(g, w1, 0, 1), tr_param_split(g, b1, 0, 1);
    int u = tr_tanh(g, tr_linear(g, in, w1, b1));
    int w2 = model_param(g, TR_F64, "fc2", "weight", 2, (int64_t[]){D, F / g->tensor});
    *b2 = model_param(g, TR_F64, "fc2", "bias", 1, (int64_t[]){D});
    tr_param_split(g, w2, 1, 1);
    return tr_matmul(g, u, w2, 0, 1);
}

/* x [B, D] → e = tanh(embed(x)) → h = e + the halves' sum + b2 → Σ head(h). */
static void block(struct tr_graph *g)
{
    int x = tr_input(g, "x", TR_F64, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(D)});
    x = tr_tanh(g, model_linear(g, TR_F64, "embed", x, D, D));   /* whole on every rank: its gradient summed */
    int b2, v = split_halves(g, g->tensor > 1 ? tr_tensor_in(g, x) : x, &b2);
    if (g->tensor > 1)
        v = tr_allreduce(g, v);
    int h = tr_add(g, x, tr_bias_add(g, v, b2));
    tr_graph_set_loss(g, tr_sum(g, model_linear(g, TR_F64, "head", h, D, 2), -1));
}

/* The same block over a sequence, [B, S, D]: with g->sequence the LayerNorm, the residual add and
 * the dropout after the row-split GEMM work on each rank's part of the sequence. */
static void seq_block(struct tr_graph *g)
{
    bool sp = g->tensor > 1 && g->sequence;
    int x = tr_input(g, "x", TR_F64, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(D)});
    x = tr_tanh(g, model_linear(g, TR_F64, "embed", x, D, D));
    if (sp)
        x = tr_seq_slice(g, x);
    int gamma = model_param(g, TR_F64, "norm", "weight", 1, (int64_t[]){D});
    int beta = model_param(g, TR_F64, "norm", "bias", 1, (int64_t[]){D});
    int n = tr_layernorm(g, x, gamma, beta, 1e-5f);
    int in = sp ? tr_seq_gather(g, n, true) : g->tensor > 1 ? tr_tensor_in(g, n) : n;
    int b2, v = split_halves(g, in, &b2);
    v = sp ? tr_seq_scatter(g, v) : g->tensor > 1 ? tr_allreduce(g, v) : v;
    int h = tr_add(g, x, tr_dropout(g, tr_bias_add(g, v, b2), 0.5f, 3));
    if (sp)
        h = tr_seq_gather(g, h, false);
    tr_graph_set_loss(g, tr_sum(g, model_linear(g, TR_F64, "head", h, D, 2), -1));
}

/* Two ranks' collectives: each publishes its input; an all-reduce sums the two in the same
 * order; along axis 1 of [B, L, D] (L the whole sequence), a gather puts the parts together, a
 * scatter sums this rank's part, a slice takes it. */
struct pair {
    pthread_barrier_t met;
    const double *in[T];
};

struct rank_run {
    struct pair *pair;
    int rank;
    bool seq;   /* the block over a sequence (seq_block) */
    struct harness h;
    double loss;
};

static int pair_sum(void *ctx, const struct tr_kernel_args *a)
{
    struct rank_run *r = ctx;
    enum tr_op op = a->node->op;
    const struct tr_tensor *whole = op == TR_OP_SEQ_GATHER ? &a->out[0] : &a->in[0];
    int64_t n = tr_tensor_numel(&a->out[0]), L = whole->rank > 1 ? whole->dim[1] : 1, part = L / T;
    int64_t inner = whole->rank > 2 ? whole->dim[2] : 1;
    double *y = malloc((size_t)n * sizeof *y);
    r->pair->in[r->rank] = a->in[0].data;
    if (op != TR_OP_SEQ_SLICE)
        pthread_barrier_wait(&r->pair->met);
    for (int64_t i = 0; i < n; i++) {
        int64_t d = i % inner, s = i / inner % (op == TR_OP_SEQ_GATHER ? L : part), b = i / inner / (op == TR_OP_SEQ_GATHER ? L : part);
        if (op == TR_OP_ALLREDUCE)
            y[i] = r->pair->in[0][i] + r->pair->in[1][i];
        else if (op == TR_OP_SEQ_GATHER)   /* position s of the whole: part s / part's */
            y[i] = r->pair->in[s / part][(b * part + s % part) * inner + d];
        else if (op == TR_OP_SEQ_SCATTER)
            y[i] = r->pair->in[0][(b * L + r->rank * part + s) * inner + d] +
                   r->pair->in[1][(b * L + r->rank * part + s) * inner + d];
        else
            y[i] = ((const double *)a->in[0].data)[(b * L + r->rank * part + s) * inner + d];
    }
    if (op != TR_OP_SEQ_SLICE)
        pthread_barrier_wait(&r->pair->met);   /* both read both before either writes its output */
    memcpy(a->out[0].data, y, (size_t)n * sizeof *y);
    free(y);
    return 0;
}

/* Two micro-batches, gradients added across them. */
static void *two_micro(void *arg)
{
    struct rank_run *r = arg;
    struct harness *h = &r->h;
    memset(h->x.base[TR_GRAD], 0, h->plan.region_bytes[TR_GRAD]);
    r->loss = 0;
    int64_t len = r->seq ? S : 1;
    for (int m = 0; m < 2; m++) {
        double *x = harness_f64(h, 0);
        for (int i = 0; i < B * len * D; i++)
            x[i] = sin(1.0 + i + 7.0 * m);
        *harness_f64(h, h->loss_scale) = 1;
        struct tr_diag why = {0};
        ck_assert_msg(tr_exec_run(&h->x, B, len, &why) == 0, "%s", tr_diag_last(&why));
        r->loss += *harness_f64(h, h->g.loss);
    }
    return NULL;
}

static int named(const struct tr_graph *g, const char *name)
{
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM && !strcmp(g->values[v].name, name))
            return v;
    return -1;
}

/* The block split over T threads against the whole one; sequence: seq_block with sequence
 * parallelism, the partial gradients summed over the ranks after the two micro-batches. */
static void split_equals_whole(bool sequence)
{
    struct rank_run whole = {.rank = 0, .seq = sequence}, ranks[T];
    void (*build)(struct tr_graph *) = sequence ? seq_block : block;
    tr_graph_init(&whole.h.g);
    build(&whole.h.g);
    harness_plan(&whole.h, B, sequence ? S : 1, false);
    uint64_t seed = 7;
    for (int v = 0; v < whole.h.g.nvalues; v++)
        if (whole.h.g.values[v].kind == TR_PARAM)
            harness_fill(&whole.h, v, &seed, -1, 1);
    two_micro(&whole);
    struct pair pair;
    pthread_barrier_init(&pair.met, NULL, T);
    pthread_t threads[T];
    for (int r = 0; r < T; r++) {
        ranks[r] = (struct rank_run){.pair = &pair, .rank = r, .seq = sequence};
        struct harness *h = &ranks[r].h;
        tr_graph_init(&h->g);
        h->g.tensor = T, h->g.tensor_rank = r, h->g.sequence = sequence;
        build(&h->g);
        harness_plan(h, B, sequence ? S : 1, true);   /* debug: each kernel writes its outputs alone */
        h->x.collective = (struct tr_exec_collective){.run = pair_sum, .ctx = &ranks[r]};
        for (int v = 0; v < h->g.nvalues; v++) {   /* the whole weights, each rank its slice */
            int w = named(&whole.h.g, h->g.values[v].name);
            if (h->g.values[v].kind != TR_PARAM)
                continue;
            if (h->g.values[v].split_axis >= 0)
                tr_value_slice(&h->g, v, r, harness_f64(&whole.h, w), harness_f64(h, v), sizeof(double), true);
            else
                memcpy(harness_f64(h, v), harness_f64(&whole.h, w), h->plan.bytes[v]);
        }
        ck_assert(pthread_create(&threads[r], NULL, two_micro, &ranks[r]) == 0);
    }
    for (int r = 0; r < T; r++)
        pthread_join(threads[r], NULL);
    pthread_barrier_destroy(&pair.met);
    struct tr_tensor_sums partial = {0};   /* sequence parallel: the norm's and fc2's bias's */
    tr_ranks_find_partial(&partial, &ranks[0].h.g);
    ck_assert_int_eq(partial.npartial, sequence ? 3 : 0);
    for (int i = 0; i < partial.npartial; i++) {
        int v = partial.partial[i];
        int64_t n = tr_dim_eval(tr_shape_numel(&ranks[0].h.g.values[v].shape), 1, 1);
        double *a = harness_f64(&ranks[0].h, v), *b = harness_f64(&ranks[1].h, v);
        for (int64_t k = 0; k < n; k++)
            a[k] = b[k] = a[k] + b[k];
    }
    free(partial.partial);
    for (int r = 0; r < T; r++) {
        struct harness *h = &ranks[r].h;
        ck_assert_msg(fabs(ranks[r].loss - whole.loss) <= 1e-12 * fabs(whole.loss), "rank %d: loss %.17g, whole %.17g",
                      r, ranks[r].loss, whole.loss);
        for (int v = 0; v < h->g.nvalues; v++) {
            if (h->g.values[v].kind != TR_PARAM)
                continue;
            const struct tr_value *val = &whole.h.g.values[named(&whole.h.g, h->g.values[v].name)];
            const double *want = harness_f64(&whole.h, val->grad), *got = harness_f64(h, h->g.values[v].grad);
            int64_t n = tr_dim_eval(tr_shape_numel(&h->g.values[v].shape), 1, 1);
            double *slice = malloc((size_t)n * sizeof *slice);
            if (h->g.values[v].split_axis >= 0)
                tr_value_slice(&h->g, v, r, (void *)want, slice, sizeof(double), true);
            else
                memcpy(slice, want, (size_t)n * sizeof *slice);
            for (int64_t i = 0; i < n; i++)
                ck_assert_msg(fabs(got[i] - slice[i]) <= 1e-12 * (1 + fabs(slice[i])), "rank %d, %s[%lld]: %.17g, whole %.17g",
                              r, h->g.values[v].name, (long long)i, got[i], slice[i]);
            free(slice);
        }
        int sums = 0, parts = 0;
        for (int i = 0; i < h->g.nnodes; i++) {
            sums += h->g.nodes[i].op == TR_OP_ALLREDUCE;
            parts += h->g.nodes[i].op == TR_OP_SEQ_GATHER || h->g.nodes[i].op == TR_OP_SEQ_SCATTER ||
                     h->g.nodes[i].op == TR_OP_SEQ_SLICE;
        }
        /* one forward (after the row-split GEMM), one backward (x's); sequence parallel none,
         * but a slice, 2 gathers and a scatter forward and as many backward */
        ck_assert_int_eq(sums, sequence ? 0 : 2);
        ck_assert_int_eq(parts, sequence ? 8 : 0);
        harness_free(h);
    }
    harness_free(&whole.h);
}

START_TEST(split_block_equals_whole)
{
    split_equals_whole(false);
}
END_TEST

START_TEST(sequence_parallel_block_equals_whole)
{
    split_equals_whole(true);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("split");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, slices_by_parts);
    tcase_add_test(tc, split_block_equals_whole);
    tcase_add_test(tc, sequence_parallel_block_equals_whole);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
