/* bench/attention: the CPU's ATTENTION and ATTENTION_BWD kernels alone on one shape, f32, each
 * in the workspace the backend asks for; medians of ITERS runs (one untimed first).
 *   bench/attention B H S D CAUSAL ITERS   → "attention B=… … fwd_ms=… bwd_ms=…"
 *   bench/attention B H S D CAUSAL ITERS bf16 → bf16 q, k, v as amp makes them, run as training
 * runs them (a CPU instance, the nodes prepared: oneDNN's bf16 tiles where the CPU computes bf16)
 * and on the widened f32 path (the instance without oneDNN), in turn every iteration.
 * Built with -DATTN_AB and linked with another attention.o (main's, or other tile sizes) whose
 * two kernels are renamed old_attention and old_attention_bwd, it times those too, each beside
 * this build's in turn every iteration (the machine's speed drifts), and says how far the two
 * agree (bench/README.md has the commands). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu.h"

#ifdef ATTN_AB
int old_attention(const struct tr_kernel_args *a);
int old_attention_bwd(const struct tr_kernel_args *a);
#define NKERNELS 2
#else
#define NKERNELS 1
#endif

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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static struct tr_tensor tensor(int rank, const int64_t *dim, unsigned *seed)
{
    struct tr_tensor t = {TR_F32, rank, {0}, NULL};
    memcpy(t.dim, dim, sizeof(int64_t) * (size_t)rank);
    size_t n = (size_t)tr_tensor_numel(&t);
    t.data = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    for (size_t i = 0; i < n; i++)
        ((float *)t.data)[i] = (float)rand_r(seed) / (float)RAND_MAX * 2 - 1;
    return t;
}

/* The node's arguments with the workspace the CPU backend asks for, times `spare`. */
static struct tr_kernel_args bind(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                                  size_t spare)
{
    struct tr_kernel_args a = {.node = node, .nin = node->nin, .nout = node->nout};
    memcpy(a.in, in, sizeof *in * (size_t)node->nin);
    memcpy(a.out, out, sizeof *out * (size_t)node->nout);
    a.workspace_bytes = tr_cpu_ops.workspace_bytes(node, a.in, a.out) * spare;
    a.workspace = a.workspace_bytes ? aligned_alloc(64, (a.workspace_bytes + 63) / 64 * 64) : NULL;
    return a;
}

#ifdef ATTN_AB
/* max |x − y| / max |y| over two tensors of one shape. */
static double rel_diff(const struct tr_tensor *x, const struct tr_tensor *y)
{
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < tr_tensor_numel(x); i++) {
        double a = ((float *)x->data)[i], b = ((float *)y->data)[i];
        diff = fmax(diff, fabs(a - b)), norm = fmax(norm, fabs(b));
    }
    return norm > 0 ? diff / norm : diff;
}
#endif

/* bf16: the prepared instance's path against the widened one, medians of each. */
static int bench_bf16(int64_t B, int64_t H, int64_t S, int64_t D, int causal, int iters)
{
    struct tr_backend *be = NULL;
    struct tr_diag why = {0};
    if (tr_backend_open_ops(&tr_cpu_ops, 0, &be, &why))
        return fprintf(stderr, "attention: %s\n", tr_diag_last(&why)), 1;
    const struct tr_backend *on[2] = {be, tr_backend_cpu()};
    unsigned seed = 7;
    int64_t bhsd[4] = {B, H, S, D}, bhs[3] = {B, H, S};
    struct tr_tensor t[10];   /* q k v dout o lse dq dk dv, f32 then narrowed */
    for (int i = 0; i < 9; i++) {
        t[i] = tensor(i == 5 ? 3 : 4, i == 5 ? bhs : bhsd, &seed);
        if (i != 5) {
            uint16_t *h = t[i].data;
            for (int64_t j = 0; j < tr_tensor_numel(&t[i]); j++)
                h[j] = tr_f32_to_bf16(((float *)t[i].data)[j]);
            t[i].dtype = TR_BF16;
        }
    }
    struct tr_node fwd = {.op = TR_OP_ATTENTION, .attrs.attention = {(uint8_t)causal, 0, 0}, .nin = 3, .nout = 2};
    struct tr_node bwd = {.op = TR_OP_ATTENTION_BWD, .attrs.attention = fwd.attrs.attention, .nin = 6, .nout = 3};
    struct tr_kernel_args fa = bind(&fwd, (struct tr_tensor[]){t[0], t[1], t[2]}, (struct tr_tensor[]){t[4], t[5]}, 1);
    struct tr_kernel_args ba = bind(&bwd, (struct tr_tensor[]){t[3], t[0], t[1], t[2], t[4], t[5]},
                                    (struct tr_tensor[]){t[6], t[7], t[8]}, 1);
    if (be->ops->prepare(be, NULL, &fwd, fa.in, fa.out, &why) || be->ops->prepare(be, NULL, &bwd, ba.in, ba.out, &why))
        return fprintf(stderr, "attention: %s\n", tr_diag_last(&why)), 1;
    double *ms[2][2];
    for (int n = 0; n < 2; n++)
        ms[n][0] = calloc((size_t)iters, sizeof(double)), ms[n][1] = calloc((size_t)iters, sizeof(double));
    for (int i = -1; i < iters; i++)
        for (int n = 0; n < 2; n++)
            for (int pass = 0; pass < 2; pass++) {
                struct tr_kernel_args *a = pass ? &ba : &fa;
                double t0 = now_ms();
                if (tr_backend_run(on[n], a))
                    return fprintf(stderr, "attention: %s failed\n", tr_op_name(a->node->op)), 1;
                if (i >= 0)
                    ms[n][pass][i] = now_ms() - t0;
            }
    printf("attention bf16 B=%lld H=%lld S=%lld D=%lld causal=%d threads=%d onednn_bf16=%d fwd_ms=%.3f bwd_ms=%.3f "
           "widened_fwd_ms=%.3f widened_bwd_ms=%.3f\n",
           (long long)B, (long long)H, (long long)S, (long long)D, causal, omp_get_max_threads(),
           (int)tr_onednn_computes_bf16(), median(ms[0][0], iters), median(ms[0][1], iters), median(ms[1][0], iters),
           median(ms[1][1], iters));
    tr_backend_close(be);
    return 0;
}

int main(int argc, char **argv)
{
    tr_cpu_blas_pick_core(argv);   /* the kernels trainrun runs (blas.c) */
    if (argc != 7 && !(argc == 8 && !strcmp(argv[7], "bf16"))) {
        fprintf(stderr, "usage: bench/attention B H S D CAUSAL ITERS [bf16]\n");
        return 2;
    }
    int64_t B = atoll(argv[1]), H = atoll(argv[2]), S = atoll(argv[3]), D = atoll(argv[4]);
    int causal = atoi(argv[5]), iters = atoi(argv[6]);
    if (B < 1 || H < 1 || S < 1 || D < 1 || iters < 1)
        return fprintf(stderr, "attention: B, H, S, D and ITERS must be positive\n"), 2;
    if (argc == 8)
        return bench_bf16(B, H, S, D, causal, iters);
    unsigned seed = 7;
    int64_t bhsd[4] = {B, H, S, D}, bhs[3] = {B, H, S};
    struct tr_tensor q = tensor(4, bhsd, &seed), k = tensor(4, bhsd, &seed), v = tensor(4, bhsd, &seed),
                     dout = tensor(4, bhsd, &seed);
    struct tr_tensor o[NKERNELS], lse[NKERNELS], dq[NKERNELS], dk[NKERNELS], dv[NKERNELS];
    struct tr_node fwd = {.op = TR_OP_ATTENTION, .attrs.attention = {(uint8_t)causal, 0, 0}, .nin = 3, .nout = 2};
    struct tr_node bwd = {.op = TR_OP_ATTENTION_BWD, .attrs.attention = fwd.attrs.attention, .nin = 6, .nout = 3};
    struct tr_kernel_args fa[NKERNELS], ba[NKERNELS];
    tr_kernel_fn kernels[NKERNELS][2] = {{tr_cpu_attention, tr_cpu_attention_bwd},
#ifdef ATTN_AB
                                         {old_attention, old_attention_bwd},
#endif
    };
    double *ms[NKERNELS][2];
    for (int n = 0; n < NKERNELS; n++) {
        o[n] = tensor(4, bhsd, &seed), dq[n] = tensor(4, bhsd, &seed), dk[n] = tensor(4, bhsd, &seed);
        dv[n] = tensor(4, bhsd, &seed), lse[n] = tensor(3, bhs, &seed);
        size_t spare = n ? 4 : 1;   /* the other build may cut larger tiles (up to 4× the scratch) */
        fa[n] = bind(&fwd, (struct tr_tensor[]){q, k, v}, (struct tr_tensor[]){o[n], lse[n]}, spare);
        ba[n] = bind(&bwd, (struct tr_tensor[]){dout, q, k, v, o[n], lse[n]}, (struct tr_tensor[]){dq[n], dk[n], dv[n]},
                     spare);
        ms[n][0] = calloc((size_t)iters, sizeof(double)), ms[n][1] = calloc((size_t)iters, sizeof(double));
    }
    for (int i = -1; i < iters; i++)
        for (int n = 0; n < NKERNELS; n++)
            for (int pass = 0; pass < 2; pass++) {
                double t0 = now_ms();
                struct tr_kernel_args *a = pass ? &ba[n] : &fa[n];
                if (kernels[n][pass](a))
                    return fprintf(stderr, "attention: %s failed\n", tr_op_name(a->node->op)), 1;
                if (i >= 0)
                    ms[n][pass][i] = now_ms() - t0;
            }
    printf("attention B=%lld H=%lld S=%lld D=%lld causal=%d threads=%d workspace_kib=%zu fwd_ms=%.3f bwd_ms=%.3f",
           (long long)B, (long long)H, (long long)S, (long long)D, causal, omp_get_max_threads(),
           (fa[0].workspace_bytes > ba[0].workspace_bytes ? fa[0].workspace_bytes : ba[0].workspace_bytes) / 1024,
           median(ms[0][0], iters), median(ms[0][1], iters));
#ifdef ATTN_AB
    printf(" old_fwd_ms=%.3f old_bwd_ms=%.3f max_rel_diff o=%.2g dq=%.2g dk=%.2g dv=%.2g",
           median(ms[1][0], iters), median(ms[1][1], iters), rel_diff(&o[0], &o[1]), rel_diff(&dq[0], &dq[1]),
           rel_diff(&dk[0], &dk[1]), rel_diff(&dv[0], &dv[1]));
#endif
    printf("\n");
    return 0;
}
