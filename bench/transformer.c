/* bench/transformer: recipes/bert-small.yaml's model (4 post-LN layers, hidden 256, 4 heads, FFN
 * 1024, BERT's 30,522-token vocabulary, 45 classes) or recipes/gpt-small.yaml's (the same size,
 * GPT-2's 50,257 tokens, tied head), one training step's forward + backward on random tokens,
 * timed on the CPU backend, with the process's peak resident memory — the engine's side of
 * bench/run-transformer.sh (PyTorch's side: bench/transformer.py).
 *   bench/transformer bert|gpt B S ITERS   → "trainrun bert B=… S=… ms=<median> peak_rss_mib=…" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "backend/exec.h"
#include "backend/profile.h"
#include "core/alloc.h"
#include "graph/program.h"
#include "models/models.h"

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

/* Parameters N(0, 0.02)-ish uniform, norms 1, random tokens and labels, every token real. */
static void fill_values(const struct tr_graph *g, struct tr_exec *ex, const struct tr_model *m, int64_t B,
                        int64_t S, int64_t vocab, int classes)
{
    unsigned seed = 1;
    for (int v = 0; v < g->nvalues; v++) {
        const struct tr_value *val = &g->values[v];
        if (val->kind != TR_PARAM)
            continue;
        float *p = tr_exec_data(ex, v);
        size_t n = (size_t)tr_dim_eval(tr_shape_numel(&val->shape), 1, 1);
        int one = strstr(val->name, "LayerNorm.weight") || strstr(val->name, "ln_") != NULL;
        for (size_t i = 0; i < n; i++)
            p[i] = one && strstr(val->name, ".weight") ? 1 : ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f) * 0.07f;
    }
    int32_t *ids = tr_exec_data(ex, m->ids), *pos = tr_exec_data(ex, m->positions), *y = tr_exec_data(ex, m->y);
    for (int64_t i = 0; i < B * S; i++)
        ids[i] = rand_r(&seed) % (int)vocab, pos[i] = (int32_t)(i % S);
    memset(tr_exec_data(ex, m->mask), 1, (size_t)(B * S));
    if (m->segments >= 0)
        memset(tr_exec_data(ex, m->segments), 0, (size_t)(B * S) * sizeof(int32_t));
    int64_t labels = m->segments >= 0 ? B : B * S;
    for (int64_t i = 0; i < labels; i++)
        y[i] = rand_r(&seed) % (m->segments >= 0 ? classes : (int)vocab);
}

static int bench(const char *arch, int64_t B, int64_t S, int iters, enum tr_dtype amp)
{
    int gpt = !strcmp(arch, "gpt");
    char yaml[256];
    snprintf(yaml, sizeof yaml, "model: {arch: %s, layers: 4, hidden: 256, heads: 4, ffn: 1024, max_len: 128, "
             "dropout: 0.1}\ndata: {dataset: x, tokenizer: {kind: bytes}}\n", gpt ? "gpt" : "bert");
    struct tr_recipe r;
    struct tr_diag diag = {0};
    if (tr_recipe_load_string(&r, yaml, strlen(yaml), "bench.yaml", NULL, 0, &diag))
        return fprintf(stderr, "transformer: the bench recipe does not load\n"), 1;
    int64_t vocab = gpt ? 50257 : 30522;
    int classes = 45;
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    tr_model_build(&g, &r, 0, NULL, classes, vocab, 1, &m);
    if (amp != TR_F32)
        tr_amp(&g, amp, &m.logits, m.logits >= 0, false);   /* as the trainer does on the CPU */
    int scale = tr_autodiff(&g);
    if (g.error || scale < 0)
        return fprintf(stderr, "transformer: %s\n", g.message), 1;
    struct tr_program p;
    struct tr_bucket bucket = {B, S};
    if (tr_program_plan(&p, &g, &bucket, 1, &m.loss, 1, tr_cpu_ops.workspace_bytes, false))
        return fprintf(stderr, "transformer: planning failed\n"), 1;
    struct tr_rng_ctx rng = {.seed = 1, .step = 1};
    struct tr_exec ex = {.g = &g, .schedule = p.schedule, .n = p.n, .plan = &p.plans[0], .be = tr_backend_cpu(),
                         .rng = &rng};
    int64_t *sample_ids = calloc((size_t)B, sizeof *sample_ids);
    for (int64_t i = 0; i < B; i++)
        sample_ids[i] = i;
    rng.sample_ids = sample_ids;
    for (int k = 0; k < TR_NKINDS; k++)
        ex.base[k] = aligned_alloc(64, (p.region_bytes[k] + 127) / 64 * 64);
    ex.workspace = aligned_alloc(64, (p.workspace_bytes + 127) / 64 * 64);
    fill_values(&g, &ex, &m, B, S, vocab, classes);
    *(float *)tr_exec_data(&ex, scale) = 1;
    double *t = calloc((size_t)iters, sizeof *t);
    struct tr_exec_profile profile = {.per_op = getenv("TR_PROFILE") != NULL};
    if (profile.per_op)
        ex.hook = tr_exec_profiler(&profile);
    struct tr_diag why = {0};
    for (int i = -1; i < iters; i++) {   /* one warm-up run */
        double t0 = now_ms();
        if (tr_exec_run(&ex, B, S, &why))
            return fprintf(stderr, "transformer: %s\n", tr_diag_last(&why)), 1;
        if (i >= 0)
            t[i] = now_ms() - t0;
    }
    tr_exec_profile_print(stderr, &profile, iters + 1, "run");
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    printf("trainrun %s %s B=%lld S=%lld ms=%.2f loss=%.4f peak_rss_mib=%.1f arena_mib=%.1f\n", arch,
           amp == TR_F32 ? "fp32" : tr_dtype_name(amp), (long long)B, (long long)S, t[iters / 2], *(float *)tr_exec_data(&ex, m.loss),
           (double)tr_process_peak_rss() / 1048576.0, (double)p.region_bytes[TR_ACT] / 1048576.0);
    for (int k = 0; k < TR_NKINDS; k++)
        free(ex.base[k]);
    free(ex.workspace), free(t), free(sample_ids);
    tr_program_free(&p);
    tr_graph_free(&g);
    tr_recipe_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    tr_cpu_blas_pick_core(argv);   /* the kernels trainrun runs (blas.c) */
    enum tr_dtype amp = argc < 6 || !strcmp(argv[5], "fp32") ? TR_F32 : !strcmp(argv[5], "bf16") ? TR_BF16
                      : !strcmp(argv[5], "fp16") ? TR_F16 : TR_I32;
    if ((argc == 5 || argc == 6) && (!strcmp(argv[1], "bert") || !strcmp(argv[1], "gpt")) && amp != TR_I32)
        return bench(argv[1], atoll(argv[2]), atoll(argv[3]), atoi(argv[4]), amp);
    fprintf(stderr, "usage: bench/transformer bert|gpt B S ITERS [fp32|bf16|fp16]\n");
    return 2;
}
