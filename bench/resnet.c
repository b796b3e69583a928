/* bench/resnet: the recipes' small ResNet (src/models/resnet.c, widths 16/32/64, 2 basic blocks
 * per stage) on 28×28 grey images, one training step's forward + backward timed on the CPU
 * backend — the engine's side of bench/run-resnet.sh (PyTorch's side: bench/resnet.py).
 *   bench/resnet B ITERS   → prints "trainrun resnet B=… ms=<median>"; with TR_PROFILE set,
 *                            the time per op goes to stderr
 *   bench/resnet B ITERS ab → the convolutions on im2col + OpenBLAS and on oneDNN
 *                            (TR_CPU_CONV), alternating step by step: one line and one
 *                            profile each. Runs on a prepared CPU instance, as a training does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "backend/exec.h"
#include "backend/profile.h"
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

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

static void fill(float *p, size_t n, float scale, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = ((float)rand_r(seed) / (float)RAND_MAX - 0.5f) * scale;
}

/* Parameters and inputs get small random values, batch-norm scales 1 and the running variance
 * 1 (as the builder would initialise them), labels one of the 10 classes. */
static void fill_values(const struct tr_graph *g, struct tr_exec *ex, const struct tr_model *m)
{
    unsigned seed = 1;
    for (int v = 0; v < g->nvalues; v++) {
        const struct tr_value *val = &g->values[v];
        size_t n = ex->plan->bytes[v] / sizeof(float);
        if (v == m->y) {
            int32_t *y = tr_exec_data(ex, v);
            for (size_t i = 0; i < ex->plan->bytes[v] / sizeof *y; i++)
                y[i] = rand_r(&seed) % 10;
        } else if ((val->kind == TR_PARAM || val->kind == TR_INPUT || val->kind == TR_STATE) &&
                   val->dtype == TR_F32) {
            float *p = tr_exec_data(ex, v);
            int ones = strstr(val->name, "running_var") || strstr(val->name, "bn.weight") ||
                       strstr(val->name, "bn1.weight") || strstr(val->name, "bn2.weight");
            if (ones)
                for (size_t i = 0; i < n; i++)
                    p[i] = 1;
            else
                fill(p, n, v == m->x ? 2.0f : 0.2f, &seed);
        }
    }
}

static int resnet(int64_t B, int iters, bool ab)
{
    static const char yaml[] = "model: {arch: resnet, layers: 2, hidden: 16}\ndata: {dataset: x}\n";
    struct tr_recipe r;
    struct tr_diag diag = {0};
    if (tr_recipe_load_string(&r, yaml, strlen(yaml), "bench.yaml", NULL, 0, &diag)) {
        fprintf(stderr, "resnet: the bench recipe does not load\n");
        return 1;
    }
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    tr_model_build(&g, &r, 3, (const int64_t[]){1, 28, 28}, 10, 0, 1, &m);
    int scale = tr_autodiff(&g);
    if (g.error || scale < 0) {
        fprintf(stderr, "resnet: %s\n", g.message);
        return 1;
    }
    struct tr_program p;
    struct tr_bucket bucket = {B, 1};
    if (tr_program_plan(&p, &g, &bucket, 1, &m.loss, 1, tr_cpu_ops.workspace_bytes, false)) {
        fprintf(stderr, "resnet: planning failed\n");
        return 1;
    }
    struct tr_backend *be = NULL;
    struct tr_diag why = {0};
    if (tr_backend_open_ops(&tr_cpu_ops, 0, &be, &why) ||
        tr_backend_prepare_program(be, &g, p.schedule, p.n, &B, (const int64_t[]){1}, 1, &why)) {
        fprintf(stderr, "resnet: %s\n", tr_diag_last(&why));
        return 1;
    }
    struct tr_exec ex = {.g = &g, .schedule = p.schedule, .n = p.n, .plan = &p.plans[0], .be = be};
    for (int k = 0; k < TR_NKINDS; k++)
        ex.base[k] = aligned_alloc(64, (p.region_bytes[k] + 127) / 64 * 64);
    ex.workspace = aligned_alloc(64, (p.workspace_bytes + 127) / 64 * 64);
    fill_values(&g, &ex, &m);
    *(float *)tr_exec_data(&ex, scale) = 1;
    int sides = ab ? 2 : 1;
    static const char *const conv[2] = {"im2col", "onednn"};
    double *t[2] = {calloc((size_t)iters, sizeof(double)), calloc((size_t)iters, sizeof(double))};
    struct tr_exec_profile profile[2] = {{.per_op = getenv("TR_PROFILE") != NULL}, {.per_op = getenv("TR_PROFILE") != NULL}};
    int64_t made = tr_cpu_onednn_counts(be).made_in_kernels;
    for (int i = -1; i < iters; i++)   /* one warm-up run */
        for (int side = 0; side < sides; side++) {
            if (ab)
                setenv("TR_CPU_CONV", conv[side], 1);
            ex.hook = profile[side].per_op ? tr_exec_profiler(&profile[side]) : (struct tr_exec_hook){0};
            double t0 = now_ms();
            if (tr_exec_run(&ex, B, 1, &why)) {
                fprintf(stderr, "resnet: %s\n", tr_diag_last(&why));
                return 1;
            }
            if (i >= 0)
                t[side][i] = now_ms() - t0;
        }
    for (int side = 0; side < sides; side++) {
        if (profile[side].per_op)
            fprintf(stderr, "%s%s\n", ab ? "convolutions on " : "", ab ? conv[side] : "");
        tr_exec_profile_print(stderr, &profile[side], iters + 1, "run");
        printf("trainrun resnet B=%lld%s%s ms=%.2f loss=%.4f workspace_kib=%.0f arena_mib=%.1f\n", (long long)B,
               ab ? " conv=" : "", ab ? conv[side] : "", median(t[side], iters), *(float *)tr_exec_data(&ex, m.loss),
               (double)p.workspace_bytes / 1024.0, (double)p.region_bytes[TR_ACT] / 1048576.0);
    }
    struct tr_onednn_counts c = tr_cpu_onednn_counts(be);
    fprintf(stderr, "oneDNN: %lld nodes native, %lld fallback, %lld primitives\n", (long long)c.native_nodes,
            (long long)c.fallback_nodes, (long long)c.primitives);
    if (tr_cpu_onednn_counts(be).made_in_kernels != made)
        fprintf(stderr, "resnet: oneDNN made %lld primitives in the steps\n",
                (long long)(tr_cpu_onednn_counts(be).made_in_kernels - made));
    for (int k = 0; k < TR_NKINDS; k++)
        free(ex.base[k]);
    free(ex.workspace), free(t[0]), free(t[1]);
    tr_backend_close(be);
    tr_program_free(&p);
    tr_graph_free(&g);
    tr_recipe_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    tr_cpu_blas_pick_core(argv);   /* the kernels trainrun runs (blas.c) */
    if (argc == 3 || (argc == 4 && !strcmp(argv[3], "ab")))
        return resnet(atoll(argv[1]), atoi(argv[2]), argc == 4);
    fprintf(stderr, "usage: bench/resnet B ITERS [ab]\n");
    return 2;
}
