/* bench/remat: gradient checkpointing on a BERT-base-shaped classifier (12 post-LN layers,
 * hidden 768, 12 heads, FFN 3072, 30,522 tokens, 2 classes, dropout 0.1) — the engine's side of
 * bench/run-remat.sh (PyTorch's side: bench/remat.py, with torch.utils.checkpoint).
 *   bench/remat plan B S           → the activation arena, exact, under every setting
 *   bench/remat MODE B S ITERS     → one setting's training step (forward + backward) timed:
 *       "trainrun remat=MODE B=… S=… arena_mib=… ms=<median> peak_rss_mib=… recompute_nodes=…"
 * MODE: none, selective, full, or a number k (full recompute of the first k blocks, as the
 * trainer does for optimize.checkpointing: k). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "backend/exec.h"
#include "core/alloc.h"
#include "graph/program.h"
#include "models/models.h"

#define LAYERS 12
#define VOCAB 30522
#define CLASSES 2

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

/* The training graph of BERT-base under MODE, planned at (B, S); its recipe in *r. */
static int build(struct tr_graph *g, struct tr_model *m, struct tr_program *p, struct tr_recipe *r,
                 const char *mode, int64_t B, int64_t S, int *scale)
{
    const char *yaml = "model: {arch: bert, layers: 12, hidden: 768, heads: 12, ffn: 3072, max_len: 512, "
                       "dropout: 0.1}\ndata: {dataset: x, tokenizer: {kind: bytes}}\n";
    struct tr_diag diag = {0};
    if (tr_recipe_load_string(r, yaml, strlen(yaml), "bench.yaml", NULL, 0, &diag))
        return fprintf(stderr, "remat: the bench recipe does not load\n"), 1;
    tr_graph_init(g);
    tr_model_build(g, r, 0, NULL, CLASSES, VOCAB, 1, m);
    *scale = tr_autodiff(g);
    uint8_t modes[LAYERS] = {0};
    int k = !strcmp(mode, "none") ? 0 : !strcmp(mode, "selective") || !strcmp(mode, "full") ? LAYERS : atoi(mode);
    if (k < 0 || k > LAYERS || (k == 0 && strcmp(mode, "none") && strcmp(mode, "0")))
        return fprintf(stderr, "remat: %s is not none, selective, full or 0..%d\n", mode, LAYERS), 1;
    memset(modes, !strcmp(mode, "selective") ? TR_REMAT_SELECTIVE : TR_REMAT_FULL, (size_t)k);
    tr_remat(g, modes, LAYERS);
    if (g->error || *scale < 0)
        return fprintf(stderr, "remat: %s\n", g->message), 1;
    if (tr_program_plan(p, g, &(struct tr_bucket){B, S}, 1, &m->loss, 1, tr_cpu_ops.workspace_bytes, false))
        return fprintf(stderr, "remat: planning failed\n"), 1;
    return 0;
}

static int recompute_nodes(const struct tr_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        n += g->nodes[i].phase == TR_RECOMPUTE;
    return n;
}

static void release(struct tr_graph *g, struct tr_program *p, struct tr_recipe *r)
{
    tr_program_free(p);
    tr_graph_free(g);
    tr_recipe_free(r);
}

static int plan_table(int64_t B, int64_t S)
{
    static const char *const modes[] = {"none", "selective", "full", "6", "1"};
    size_t none = 0;
    printf("BERT-base, B=%lld S=%lld: the activation arena\n| checkpointing | arena | vs none | recompute "
           "nodes |\n| --- | ---: | ---: | ---: |\n", (long long)B, (long long)S);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        struct tr_graph g;
        struct tr_model m;
        struct tr_program p;
        struct tr_recipe r;
        int scale;
        if (build(&g, &m, &p, &r, modes[i], B, S, &scale))
            return 1;
        size_t arena = p.region_bytes[TR_ACT];
        if (i == 0)
            none = arena;
        printf("| %s%s | %.1f MiB (%zu bytes) | %+.1f%% | %d |\n", atoi(modes[i]) ? "the first " : "", modes[i],
               (double)arena / 1048576.0, arena, 100.0 * ((double)arena / (double)none - 1), recompute_nodes(&g));
        release(&g, &p, &r);
    }
    return 0;
}

/* Parameters small and uniform, norms 1, random tokens and labels, every token real. */
static void fill_values(const struct tr_graph *g, struct tr_exec *ex, const struct tr_model *m, int64_t B,
                        int64_t S)
{
    unsigned seed = 1;
    for (int v = 0; v < g->nvalues; v++) {
        const struct tr_value *val = &g->values[v];
        if (val->kind != TR_PARAM)
            continue;
        float *p = tr_exec_data(ex, v);
        size_t n = (size_t)tr_dim_eval(tr_shape_numel(&val->shape), 1, 1);
        int one = strstr(val->name, "LayerNorm.weight") != NULL;
        for (size_t i = 0; i < n; i++)
            p[i] = one ? 1 : ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f) * 0.07f;
    }
    int32_t *ids = tr_exec_data(ex, m->ids), *pos = tr_exec_data(ex, m->positions), *y = tr_exec_data(ex, m->y);
    for (int64_t i = 0; i < B * S; i++)
        ids[i] = rand_r(&seed) % VOCAB, pos[i] = (int32_t)(i % S);
    memset(tr_exec_data(ex, m->mask), 1, (size_t)(B * S));
    memset(tr_exec_data(ex, m->segments), 0, (size_t)(B * S) * sizeof(int32_t));
    for (int64_t i = 0; i < B; i++)
        y[i] = rand_r(&seed) % CLASSES;
}

static int timed(const char *mode, int64_t B, int64_t S, int iters)
{
    struct tr_graph g;
    struct tr_model m;
    struct tr_program p;
    struct tr_recipe r;
    int scale;
    if (build(&g, &m, &p, &r, mode, B, S, &scale))
        return 1;
    struct tr_rng_ctx rng = {.seed = 1, .step = 1};
    struct tr_exec ex = {.g = &g, .schedule = p.schedule, .n = p.n, .plan = &p.plans[0], .be = tr_backend_cpu(),
                         .rng = &rng};
    for (int k = 0; k < TR_NKINDS; k++)
        ex.base[k] = aligned_alloc(64, (p.region_bytes[k] + 127) / 64 * 64);
    ex.workspace = aligned_alloc(64, (p.workspace_bytes + 127) / 64 * 64);
    fill_values(&g, &ex, &m, B, S);
    *(float *)tr_exec_data(&ex, scale) = 1;
    double *t = calloc((size_t)iters, sizeof *t);
    struct tr_diag why = {0};
    for (int i = -1; i < iters; i++) {   /* one warm-up run: the arena's pages touched once */
        double t0 = now_ms();
        if (tr_exec_run(&ex, B, S, &why))
            return fprintf(stderr, "remat: %s\n", tr_diag_last(&why)), 1;
        if (i >= 0)
            t[i] = now_ms() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    printf("trainrun remat=%s B=%lld S=%lld arena_mib=%.1f ms=%.1f loss=%.6f peak_rss_mib=%.1f recompute_nodes=%d\n",
           mode, (long long)B, (long long)S, (double)p.region_bytes[TR_ACT] / 1048576.0, t[iters / 2],
           *(float *)tr_exec_data(&ex, m.loss), (double)tr_process_peak_rss() / 1048576.0, recompute_nodes(&g));
    for (int k = 0; k < TR_NKINDS; k++)
        free(ex.base[k]);
    free(ex.workspace), free(t);
    release(&g, &p, &r);
    return 0;
}

int main(int argc, char **argv)
{
    tr_cpu_blas_pick_core(argv);   /* the kernels trainrun runs (blas.c) */
    if (argc == 4 && !strcmp(argv[1], "plan"))
        return plan_table(atoll(argv[2]), atoll(argv[3]));
    if (argc == 5 && atoi(argv[4]) > 0)
        return timed(argv[1], atoll(argv[2]), atoll(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: bench/remat plan B S\n       bench/remat none|selective|full|K B S ITERS\n");
    return 2;
}
