/* bench/onednn_matmul: the CPU backend's MATMUL on OpenBLAS (the shared instance) against oneDNN
 * (an opened instance under TR_CPU_GEMM=onednn), f32, on the linear layers of BERT-small
 * (hidden 256, FFN 1024, 32 × 64 tokens) and BERT-base (768, 3072, 2 × 512), per op class:
 * forward y = x·Wᵀ, backward data dx = dy·W, backward weights dW = dyᵀ·x. Rounds interleave the
 * two; prints the median GFLOP/s of each.
 *   bench/onednn_matmul ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct tr_tensor matrix(int64_t r, int64_t c)
{
    struct tr_tensor t = {.dtype = TR_F32, .rank = 2, .dim = {r, c}};
    t.data = malloc((size_t)(r * c) * sizeof(float));
    for (int64_t i = 0; i < r * c; i++)
        ((float *)t.data)[i] = (float)(i % 13) * 0.01f - 0.06f;
    return t;
}

/* Seconds for one MATMUL of y [M, N] = op(a)·op(b) on be. */
static double time_one(const struct tr_backend *be, int ta, int tb, struct tr_tensor a, struct tr_tensor b,
                       struct tr_tensor y)
{
    struct tr_node mm = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1, .attrs.matmul = {(uint8_t)ta, (uint8_t)tb}};
    struct tr_kernel_args args = {.node = &mm, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
    size_t need = tr_cpu_ops.workspace_bytes(&mm, args.in, args.out);
    args.workspace = need ? malloc(need) : NULL, args.workspace_bytes = need;
    tr_backend_run(be, &args);   /* the first call makes oneDNN's primitive */
    double t = now();
    tr_backend_run(be, &args);
    t = now() - t;
    free(args.workspace);
    return t;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    setenv("TR_CPU_GEMM", "onednn", 1);
    struct tr_backend *dnnl = NULL;
    struct tr_diag why = {0};
    if (tr_backend_open_ops(&tr_cpu_ops, 0, &dnnl, &why)) {
        fprintf(stderr, "%s\n", tr_diag_last(&why));
        return 1;
    }
    static const struct { const char *model; int64_t T, D, F; } models[] = {{"bert-small", 2048, 256, 1024},
                                                                             {"bert-base", 1024, 768, 3072}};
    static const char *const classes[] = {"forward x·Wᵀ", "backward data dy·W", "backward weights dyᵀ·x"};
    printf("| model | layer (in → out) | op class | OpenBLAS GFLOP/s | oneDNN GFLOP/s | oneDNN/OpenBLAS |\n"
           "| --- | --- | --- | ---: | ---: | ---: |\n");
    for (int m = 0; m < 2; m++)
        for (int layer = 0; layer < 2; layer++) {
            int64_t T = models[m].T, in = layer ? models[m].F : models[m].D, out = layer ? models[m].D : models[m].F;
            struct tr_tensor x = matrix(T, in), w = matrix(out, in), y = matrix(T, out), dx = matrix(T, in),
                             dw = matrix(out, in);
            for (int c = 0; c < 3; c++) {
                double t[2][64];
                for (int r = 0; r < rounds && r < 64; r++)
                    for (int side = 0; side < 2; side++) {
                        const struct tr_backend *be = side ? dnnl : tr_backend_cpu();
                        t[side][r] = c == 0 ? time_one(be, 0, 1, x, w, y)
                                   : c == 1 ? time_one(be, 0, 0, y, w, dx)
                                            : time_one(be, 1, 0, y, x, dw);
                    }
                double flops = 2.0 * (double)T * (double)in * (double)out, rate[2];
                for (int side = 0; side < 2; side++) {
                    qsort(t[side], (size_t)rounds, sizeof(double), cmp_double);
                    rate[side] = flops / t[side][rounds / 2] / 1e9;
                }
                printf("| %s | %ld → %ld | %s | %.1f | %.1f | %.2f |\n", models[m].model, (long)in, (long)out,
                       classes[c], rate[0], rate[1], rate[1] / rate[0]);
            }
            free(x.data), free(w.data), free(y.data), free(dx.data), free(dw.data);
        }
    tr_backend_close(dnnl);
    return 0;
}
