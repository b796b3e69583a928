/* bench/block: one BERT-style transformer block, forward + backward, timed on the CPU
 * backend — the engine's side of bench/run-block.sh (PyTorch's side: bench/block.py).
 *   bench/block D H F B S ITERS      → prints "trainrun block D=… ms=<median>"
 *   bench/block gemm16 M K N ITERS   → the 16-bit GEMM path (widen, sgemm, narrow) vs sgemm
 *   bench/block ops16 D H F B S ITERS → a block's matmul, layernorm, gelu and attention, forward
 *                                       and backward, with bf16 activations vs all f32 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "backend/exec.h"
#include "backend/profile.h"
#include "graph/program.h"
#include "../tests/models.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(float *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = ((float)rand_r(seed) / (float)RAND_MAX - 0.5f) * 0.2f;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

static int block(int64_t D, int64_t H, int64_t Fd, int64_t B, int64_t S, int iters)
{
    struct tr_graph g;
    tr_graph_init(&g);
    int x = tr_input(&g, "x", TR_F32, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(D)});
    int mask = tr_input(&g, "mask", TR_U8, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1)});
    int y = model_bert_block(&g, TR_F32, 0, x, mask, D, H, Fd, 0.0f);
    /* loss = Σ y ⊙ w: [1, B·S·D]·[B·S·D, 1] */
    struct tr_dim n = tr_shape_numel(&g.values[y].shape);
    int w = tr_input(&g, "w", TR_F32, 2, (struct tr_dim[]){n, tr_dim_const(1)});
    int flat = tr_reshape(&g, y, 2, (struct tr_dim[]){tr_dim_const(1), n});
    tr_graph_set_loss(&g, tr_matmul(&g, flat, w, 0, 0));
    int scale = tr_autodiff(&g);
    if (scale < 0) {
        fprintf(stderr, "block: %s\n", g.message);
        return 1;
    }
    struct tr_program p;
    struct tr_bucket bucket = {B, S};
    tr_program_plan(&p, &g, &bucket, 1, &g.loss, 1, tr_cpu_ops.workspace_bytes, false);
    struct tr_exec ex = {.g = &g, .schedule = p.schedule, .n = p.n, .plan = &p.plans[0], .be = tr_backend_cpu()};
    for (int k = 0; k < TR_NKINDS; k++)
        ex.base[k] = aligned_alloc(64, (p.region_bytes[k] + 127) / 64 * 64);
    ex.workspace = aligned_alloc(64, (p.workspace_bytes + 127) / 64 * 64);
    unsigned seed = 1;
    for (int v = 0; v < g.nvalues; v++)
        if ((g.values[v].kind == TR_PARAM || g.values[v].kind == TR_INPUT) && g.values[v].dtype == TR_F32)
            fill(tr_exec_data(&ex, v), p.plans[0].bytes[v] / sizeof(float), &seed);
    memset(tr_exec_data(&ex, mask), 1, p.plans[0].bytes[mask]);
    *(float *)tr_exec_data(&ex, scale) = 1;
    double *t = calloc((size_t)iters, sizeof *t);
    struct tr_exec_profile profile = {.per_op = getenv("TR_PROFILE") != NULL};
    if (profile.per_op)
        ex.hook = tr_exec_profiler(&profile);
    struct tr_diag why = {0};
    for (int i = -1; i < iters; i++) {   /* one warm-up run */
        double t0 = now_ms();
        if (tr_exec_run(&ex, B, S, &why)) {
            fprintf(stderr, "block: %s\n", tr_diag_last(&why));
            return 1;
        }
        if (i >= 0)
            t[i] = now_ms() - t0;
    }
    tr_exec_profile_print(stderr, &profile, iters + 1, "run");
    printf("trainrun block D=%lld H=%lld F=%lld B=%lld S=%lld ms=%.2f arena_mib=%.1f\n", (long long)D,
           (long long)H, (long long)Fd, (long long)B, (long long)S, median(t, iters),
           (double)p.region_bytes[TR_ACT] / 1048576.0);
    return 0;
}

/* [M, K]·[K, N] in f32, and the same operands stored in bf16 and f16 through the 16-bit path.
 * The three run in turn, iteration by iteration, so drifts in the machine's speed hit all alike. */
static int gemm16(int64_t M, int64_t K, int64_t N, int iters)
{
    const enum tr_dtype types[3] = {TR_F32, TR_BF16, TR_F16};
    struct tr_kernel_args args[3];
    struct tr_node node = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1};
    double *t[3];
    unsigned seed = 2;
    for (int ti = 0; ti < 3; ti++) {
        size_t es = tr_dtype_size(types[ti]);
        struct tr_tensor a = {types[ti], 2, {M, K}, aligned_alloc(64, (size_t)(M * K) * es + 64)};
        struct tr_tensor b = {types[ti], 2, {K, N}, aligned_alloc(64, (size_t)(K * N) * es + 64)};
        struct tr_tensor y = {types[ti], 2, {M, N}, aligned_alloc(64, (size_t)(M * N) * es + 64)};
        memset(a.data, 0, (size_t)(M * K) * es), memset(b.data, 0, (size_t)(K * N) * es);
        if (ti == 0)
            fill(a.data, (size_t)(M * K), &seed), fill(b.data, (size_t)(K * N), &seed);
        args[ti] = (struct tr_kernel_args){.node = &node, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
        args[ti].workspace_bytes = tr_cpu_ops.workspace_bytes(&node, args[ti].in, args[ti].out);
        args[ti].workspace = malloc(args[ti].workspace_bytes + 64);
        t[ti] = calloc((size_t)iters, sizeof(double));
    }
    for (int i = -1; i < iters; i++)
        for (int ti = 0; ti < 3; ti++) {
            double t0 = now_ms();
            tr_backend_run(tr_backend_cpu(), &args[ti]);
            if (i >= 0)
                t[ti][i] = now_ms() - t0;
        }
    double ms[3];
    for (int ti = 0; ti < 3; ti++) {
        ms[ti] = median(t[ti], iters);
        free(t[ti]), free(args[ti].workspace), free(args[ti].in[0].data), free(args[ti].in[1].data);
        free(args[ti].out[0].data);
    }
    printf("gemm M=%lld K=%lld N=%lld f32_ms=%.3f bf16_ms=%.3f f16_ms=%.3f bf16_ratio=%.2f f16_ratio=%.2f\n",
           (long long)M, (long long)K, (long long)N, ms[0], ms[1], ms[2], ms[1] / ms[0], ms[2] / ms[0]);
    return 0;
}

/* ---- ops16 ------------------------------------------------------------------------------ */

/* The tensors of one block's ops, by role: x [B·S, D] → ffn1 [B·S, F] (matmul), layernorm over
 * D, gelu over F, attention over [B, H, S, D/H]; each forward's gradient beside it. 'h': an
 * activation, bf16 in the 16-bit run; 'f': f32 in both (parameters, gradients, statistics). */
enum { X, W1, Y1, DY1, DX, DW1, LN_G, LN_B, LN_Y, LN_S, LN_DY, LN_DX, LN_DG, LN_DB, G_Y, G_DY, G_DX,
       Q, K, V, O, LSE, DO, DQ, DK, DV, NROLES };

struct role {
    char kind;
    int rank;
    int64_t dim[4];
};

struct op16 {
    const char *name;
    enum tr_op op;
    union tr_attrs at;
    int nin, nout, in[8], out[4];
};

static void role_shapes(struct role *r, int64_t D, int64_t H, int64_t F, int64_t B, int64_t S)
{
    int64_t N = B * S;
    const struct role act_nd = {'h', 2, {N, D}}, act_nf = {'h', 2, {N, F}}, vec_d = {'f', 1, {D}},
                      bhsd = {'h', 4, {B, H, S, D / H}};
    r[X] = r[DX] = r[LN_Y] = r[LN_DY] = r[LN_DX] = act_nd;
    r[Y1] = r[DY1] = r[G_Y] = r[G_DY] = r[G_DX] = act_nf;
    r[W1] = (struct role){'h', 2, {D, F}};   /* the 16-bit working copy of the weight */
    r[DW1] = (struct role){'f', 2, {D, F}};  /* its gradient, accumulated in f32 */
    r[LN_G] = r[LN_B] = r[LN_DG] = r[LN_DB] = vec_d;
    r[LN_S] = (struct role){'f', 2, {N, 2}};
    r[Q] = r[K] = r[V] = r[O] = r[DO] = r[DQ] = r[DK] = r[DV] = bhsd;
    r[LSE] = (struct role){'f', 3, {B, H, S}};
}

static const struct op16 ops16_list[] = {
    {"matmul y = x W1", TR_OP_MATMUL, {.matmul = {0, 0}}, 2, 1, {X, W1}, {Y1}},
    {"matmul dx = dy W1^T", TR_OP_MATMUL, {.matmul = {0, 1}}, 2, 1, {DY1, W1}, {DX}},
    {"matmul dW1 = x^T dy", TR_OP_MATMUL, {.matmul = {1, 0}}, 2, 1, {X, DY1}, {DW1}},
    {"layernorm", TR_OP_LAYERNORM, {.norm = {1e-12f}}, 3, 2, {X, LN_G, LN_B}, {LN_Y, LN_S}},
    {"layernorm_bwd", TR_OP_LAYERNORM_BWD, {.norm = {1e-12f}}, 4, 3, {LN_DY, X, LN_G, LN_S}, {LN_DX, LN_DG, LN_DB}},
    {"gelu", TR_OP_GELU, {.gelu = {0}}, 1, 1, {Y1}, {G_Y}},
    {"gelu_bwd", TR_OP_GELU_BWD, {.gelu = {0}}, 2, 1, {G_DY, Y1}, {G_DX}},
    {"attention", TR_OP_ATTENTION, {.attention = {0, 0, 0}}, 3, 2, {Q, K, V}, {O, LSE}},
    {"attention_bwd", TR_OP_ATTENTION_BWD, {.attention = {0, 0, 0}}, 6, 3, {DO, Q, K, V, O, LSE}, {DQ, DK, DV}},
};

#define NOPS16 ((int)(sizeof ops16_list / sizeof ops16_list[0]))

static struct tr_kernel_args ops16_args(const struct op16 *o, struct tr_node *node, struct tr_tensor *t)
{
    *node = (struct tr_node){.op = o->op, .attrs = o->at, .nin = o->nin, .nout = o->nout};
    struct tr_kernel_args a = {.node = node, .nin = o->nin, .nout = o->nout};
    for (int i = 0; i < o->nin; i++)
        a.in[i] = t[o->in[i]];
    for (int i = 0; i < o->nout; i++)
        a.out[i] = t[o->out[i]];
    a.workspace_bytes = tr_cpu_ops.workspace_bytes(node, a.in, a.out);
    a.workspace = aligned_alloc(64, (a.workspace_bytes + 127) / 64 * 64);
    return a;
}

/* Each op in f32 and with bf16 activations in turn, iteration by iteration (the machine's speed
 * drifts); medians, and their ratio. The forwards run before the backwards, so the saved
 * statistics the backwards read are the real ones. */
static int ops16(int64_t D, int64_t H, int64_t F, int64_t B, int64_t S, int iters)
{
    struct role r[NROLES];
    struct tr_tensor t[2][NROLES];
    struct tr_node nodes[2][NOPS16];
    struct tr_kernel_args args[2][NOPS16];
    role_shapes(r, D, H, F, B, S);
    unsigned seed = 3;
    for (int k = 0; k < NROLES; k++) {
        for (int h = 0; h < 2; h++) {
            t[h][k] = (struct tr_tensor){h && r[k].kind == 'h' ? TR_BF16 : TR_F32, r[k].rank, {0}, NULL};
            memcpy(t[h][k].dim, r[k].dim, sizeof r[k].dim);
            t[h][k].data = aligned_alloc(64, (tr_tensor_bytes(&t[h][k]) + 63) / 64 * 64);
        }
        int64_t n = tr_tensor_numel(&t[0][k]);
        fill(t[0][k].data, (size_t)n, &seed);
        if (k == LN_G)
            for (int64_t i = 0; i < n; i++)
                ((float *)t[0][k].data)[i] += 1;
        for (int64_t i = 0; i < n; i++)
            if (t[1][k].dtype == TR_BF16)
                ((uint16_t *)t[1][k].data)[i] = tr_f32_to_bf16(((float *)t[0][k].data)[i]);
            else
                ((float *)t[1][k].data)[i] = ((float *)t[0][k].data)[i];
    }
    double *ms[2][NOPS16];
    for (int h = 0; h < 2; h++)
        for (int o = 0; o < NOPS16; o++) {
            args[h][o] = ops16_args(&ops16_list[o], &nodes[h][o], t[h]);
            ms[h][o] = calloc((size_t)iters, sizeof(double));
        }
    for (int i = -1; i < iters; i++)
        for (int o = 0; o < NOPS16; o++)
            for (int h = 0; h < 2; h++) {
                double t0 = now_ms();
                if (tr_backend_run(tr_backend_cpu(), &args[h][o])) {
                    fprintf(stderr, "ops16: %s failed\n", ops16_list[o].name);
                    return 1;
                }
                if (i >= 0)
                    ms[h][o][i] = now_ms() - t0;
            }
    printf("ops16 D=%lld H=%lld F=%lld B=%lld S=%lld (bf16 activations; f32 parameters' grads, statistics)\n",
           (long long)D, (long long)H, (long long)F, (long long)B, (long long)S);
    double sum[2] = {0, 0};
    for (int o = 0; o < NOPS16; o++) {
        double f = median(ms[0][o], iters), b = median(ms[1][o], iters);
        sum[0] += f, sum[1] += b;
        printf("  %-22s f32_ms=%8.3f bf16_ms=%8.3f ratio=%.2f workspace_bf16_kib=%zu\n", ops16_list[o].name, f, b,
               b / f, args[1][o].workspace_bytes / 1024);
    }
    printf("  %-22s f32_ms=%8.3f bf16_ms=%8.3f ratio=%.2f\n", "all", sum[0], sum[1], sum[1] / sum[0]);
    return 0;
}

int main(int argc, char **argv)
{
    tr_cpu_blas_pick_core(argv);   /* the kernels trainrun runs (blas.c) */
    if (argc == 6 && !strcmp(argv[1], "gemm16"))
        return gemm16(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), atoi(argv[5]));
    if (argc == 8 && !strcmp(argv[1], "ops16"))
        return ops16(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), atoll(argv[5]), atoll(argv[6]), atoi(argv[7]));
    if (argc == 7)
        return block(atoll(argv[1]), atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), atoll(argv[5]), atoi(argv[6]));
    fprintf(stderr, "usage: bench/block D H F B S ITERS | bench/block gemm16 M K N ITERS | "
                    "bench/block ops16 D H F B S ITERS\n");
    return 2;
}
