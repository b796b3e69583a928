/* bench/gemm: trainrun's GEMM path against oneDNN's matmul and OpenBLAS's sgemm, each called
 * directly, on BERT-base's shapes (M = 2 × 512 token rows; QKV 768 → 2304, attention output
 * 768 → 768, FFN1 768 → 3072, FFN2 3072 → 768), each layer's forward Y = X·Wᵀ and its two
 * backward GEMMs dX = dY·W and dW = dYᵀ·X, with the transposes autodiff gives them
 * (src/graph/graph.c's tr_linear, check_kernels' matmul gradients).
 *   trainrun: the CPU backend's MATMUL kernel through tr_backend_run on real tensors, on a CPU
 *             instance (tr_backend_open_ops) as training runs it — oneDNN's tiles where the
 *             CPU computes bf16 (their primitives made by the first, untimed, call), else the
 *             widening to f32 and OpenBLAS — so the tiling and the threads are in the time;
 *   oneDNN:   dnnl_matmul, the primitive made once per shape and dtype before timing, all
 *             threads (OpenMP's), its own scratchpad;
 *   OpenBLAS: sgemm on the whole matrix, multi-threaded (its own threads), f32 only (Debian's
 *             OpenBLAS has no sbgemm).
 * Each round times every engine once per case, the engines in turn (the machine's speed drifts);
 * a time is the median over the rounds of the best of REPS calls. Prints GFLOP/s (2·M·N·K per
 * call) and trainrun's fraction of oneDNN's speed; where oneDNN has no implementation of a
 * dtype on this CPU (bf16 without AVX-512: status 3, unimplemented) the line says so.
 *   bench/gemm [ROUNDS] [REPS] [f32|bf16|all]   (after `make bench/gemm`; threads: OMP_NUM_THREADS) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dnnl.h>
#include <omp.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "core/blas.h"
#include "core/tensor.h"

enum { TRAINRUN, ONEDNN, OPENBLAS, NENGINES };
static const char *const engine_name[NENGINES] = {"trainrun", "onednn", "openblas"};

struct gemm_case {
    const char *layer, *pass;
    int ta, tb;
    int64_t M, N, K;
};

static double now_s(void)
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

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41:               return "sse41";
    case dnnl_cpu_isa_avx:                 return "avx";
    case dnnl_cpu_isa_avx2:                return "avx2";
    case dnnl_cpu_isa_avx2_vnni:           return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:         return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:    return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:    return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:     return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_mic:          return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:     return "avx512_mic_4ops";
    case dnnl_cpu_isa_all:                 break;
    }
    return "all";
}

/* One case's operands in one dtype: A, B (as the transposes lay them out) and C, random. */
struct operands {
    enum tr_dtype dtype;
    void *a, *b, *c;
    struct tr_tensor ta, tb, tc;
    /* trainrun */
    struct tr_node node;
    void *workspace;
    size_t workspace_bytes;
    /* oneDNN */
    dnnl_primitive_t prim;
    dnnl_memory_t ma, mb, mc;
    char impl[128];
    dnnl_status_t status;
};

static void *random_matrix(enum tr_dtype t, int64_t n, unsigned *seed)
{
    size_t bytes = (size_t)n * tr_dtype_size(t);
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    for (int64_t i = 0; i < n; i++) {
        float x = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
        if (t == TR_BF16)
            ((uint16_t *)p)[i] = tr_f32_to_bf16(x);
        else
            ((float *)p)[i] = x;
    }
    return p;
}

static struct tr_tensor matrix(enum tr_dtype t, int64_t rows, int64_t cols, void *data)
{
    return (struct tr_tensor){.dtype = t, .rank = 2, .dim = {rows, cols}, .data = data};
}

/* A matrix [rows, cols] row-major, or its transpose stored [cols, rows], as oneDNN sees it. */
static dnnl_memory_desc_t md(int64_t rows, int64_t cols, int trans, dnnl_data_type_t dt)
{
    dnnl_memory_desc_t d;
    dnnl_dims_t dims = {rows, cols}, strides = {trans ? 1 : cols, trans ? rows : 1};
    dnnl_memory_desc_init_by_strides(&d, 2, dims, dt, strides);
    return d;
}

static void prepare(struct operands *o, const struct gemm_case *c, enum tr_dtype t, dnnl_engine_t engine,
                    unsigned *seed)
{
    memset(o, 0, sizeof *o);
    o->dtype = t;
    o->a = random_matrix(t, c->M * c->K, seed);
    o->b = random_matrix(t, c->K * c->N, seed);
    o->c = random_matrix(t, c->M * c->N, seed);
    o->ta = c->ta ? matrix(t, c->K, c->M, o->a) : matrix(t, c->M, c->K, o->a);
    o->tb = c->tb ? matrix(t, c->N, c->K, o->b) : matrix(t, c->K, c->N, o->b);
    o->tc = matrix(t, c->M, c->N, o->c);
    o->node = (struct tr_node){.op = TR_OP_MATMUL, .nin = 2, .nout = 1,
                               .attrs.matmul = {(uint8_t)c->ta, (uint8_t)c->tb}};
    const struct tr_backend *be = tr_backend_cpu();
    struct tr_tensor in[2] = {o->ta, o->tb};
    o->workspace_bytes = be->ops->workspace_bytes ? be->ops->workspace_bytes(&o->node, in, &o->tc) : 0;
    o->workspace = o->workspace_bytes ? aligned_alloc(64, (o->workspace_bytes + 63) / 64 * 64) : NULL;

    dnnl_data_type_t dt = t == TR_BF16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t da = md(c->M, c->K, c->ta, dt), db = md(c->K, c->N, c->tb, dt), dc = md(c->M, c->N, 0, dt);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    o->status = dnnl_matmul_desc_init(&desc, &da, &db, NULL, &dc);
    if (o->status == dnnl_success)
        o->status = dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL);
    if (o->status != dnnl_success)
        return;
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(o->impl, sizeof o->impl, "%s", impl ? impl : "?");
    o->status = dnnl_primitive_create(&o->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (o->status == dnnl_success)
        o->status = dnnl_memory_create(&o->ma, &da, engine, o->a);
    if (o->status == dnnl_success)
        o->status = dnnl_memory_create(&o->mb, &db, engine, o->b);
    if (o->status == dnnl_success)
        o->status = dnnl_memory_create(&o->mc, &dc, engine, o->c);
}

/* The CPU instance trainrun's calls run on: oneDNN's primitives live in it (a stateless
 * tr_backend_cpu() would widen bf16 to f32 and take OpenBLAS). */
static struct tr_backend *instance;

static void release(struct operands *o)
{
    if (o->prim)
        dnnl_primitive_destroy(o->prim);
    if (o->ma)
        dnnl_memory_destroy(o->ma);
    if (o->mb)
        dnnl_memory_destroy(o->mb);
    if (o->mc)
        dnnl_memory_destroy(o->mc);
    free(o->a), free(o->b), free(o->c), free(o->workspace);
}

/* One call of an engine on the case; 0, or nonzero when it cannot run (the reason printed). */
static int call(int engine, struct operands *o, const struct gemm_case *c, dnnl_stream_t stream)
{
    if (engine == TRAINRUN) {
        struct tr_diag diag = {0};
        struct tr_kernel_args args = {.node = &o->node, .in = {o->ta, o->tb}, .out = {o->tc}, .nin = 2, .nout = 1,
                                      .workspace = o->workspace, .workspace_bytes = o->workspace_bytes,
                                      .diag = &diag};
        int err = tr_backend_run(instance, &args);
        if (err)
            fprintf(stderr, "gemm: %s\n", tr_diag_last(&diag));
        return err;
    }
    if (engine == ONEDNN) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, o->ma}, {DNNL_ARG_WEIGHTS, o->mb}, {DNNL_ARG_DST, o->mc}};
        if (dnnl_primitive_execute(o->prim, stream, 3, args) != dnnl_success)
            return 1;
        return dnnl_stream_wait(stream) != dnnl_success;
    }
    tr_blas.sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans, (int)c->M,
                  (int)c->N, (int)c->K, 1, o->a, c->ta ? (int)c->M : (int)c->K, o->b, c->tb ? (int)c->K : (int)c->N, 0,
                  o->c, (int)c->N);
    return 0;
}

static int available(int engine, const struct operands *o)
{
    if (engine == ONEDNN)
        return o->status == dnnl_success;
    if (engine == OPENBLAS)
        return o->dtype == TR_F32;
    return 1;
}

int main(int argc, char **argv)
{
    tr_cpu_blas_pick_core(argv);   /* the kernels trainrun runs (blas.c), for the direct sgemm too */
    int rounds = argc > 1 ? atoi(argv[1]) : 5, reps = argc > 2 ? atoi(argv[2]) : 3;
    const char *which = argc > 3 ? argv[3] : "all";
    if (rounds < 1 || reps < 1 || (strcmp(which, "f32") && strcmp(which, "bf16") && strcmp(which, "all"))) {
        fprintf(stderr, "usage: bench/gemm [ROUNDS] [REPS] [f32|bf16|all]\n");
        return 2;
    }
    struct tr_diag diag = {0};
    if (tr_blas_load(&diag) || tr_backend_open_ops(&tr_cpu_ops, 0, &instance, &diag)) {
        fprintf(stderr, "gemm: %s\n", tr_diag_last(&diag));
        return 1;
    }
    const int64_t M = 2 * 512;
    static const struct { const char *name; int64_t in, out; } layers[] = {
        {"qkv", 768, 2304}, {"attn_out", 768, 768}, {"ffn1", 768, 3072}, {"ffn2", 3072, 768},
    };
    struct gemm_case cases[12];
    int ncases = 0;
    for (int l = 0; l < 4; l++) {
        int64_t in = layers[l].in, out = layers[l].out;
        cases[ncases++] = (struct gemm_case){layers[l].name, "fwd Y=X*W^T", 0, 1, M, out, in};
        cases[ncases++] = (struct gemm_case){layers[l].name, "bwd dX=dY*W", 0, 0, M, in, out};
        cases[ncases++] = (struct gemm_case){layers[l].name, "bwd dW=dY^T*X", 1, 0, out, in, M};
    }
    enum tr_dtype dtypes[2];
    int ndtypes = 0;
    if (strcmp(which, "bf16"))
        dtypes[ndtypes++] = TR_F32;
    if (strcmp(which, "f32"))
        dtypes[ndtypes++] = TR_BF16;

    dnnl_engine_t engine;
    dnnl_stream_t stream;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "gemm: oneDNN has no CPU engine\n");
        return 1;
    }
    const dnnl_version_t *v = dnnl_version();
    const char *max_isa = getenv("ONEDNN_MAX_CPU_ISA");
    printf("gemm: threads=%d rounds=%d reps=%d oneDNN %d.%d.%d isa=%s%s%s OpenBLAS %s\n", omp_get_max_threads(),
           rounds, reps, v->major, v->minor, v->patch, isa_name(dnnl_get_effective_cpu_isa()),
           max_isa ? " ONEDNN_MAX_CPU_ISA=" : "", max_isa ? max_isa : "", tr_cpu_blas_core());
    printf("%-5s %-9s %-13s %5s %5s %5s %10s %10s %10s %8s  %s\n", "dtype", "layer", "pass", "M", "N", "K",
           "trainrun", "onednn", "openblas", "tr/dnnl", "oneDNN implementation");
    unsigned seed = 1;
    for (int d = 0; d < ndtypes; d++) {
        struct operands *ops = calloc((size_t)ncases, sizeof *ops);
        double *t = calloc((size_t)(ncases * NENGINES * rounds), sizeof *t);
        for (int c = 0; c < ncases; c++)
            prepare(&ops[c], &cases[c], dtypes[d], engine, &seed);
        for (int c = 0; c < ncases; c++)   /* a warm-up call each: first touches, OpenMP teams */
            for (int e = 0; e < NENGINES; e++)
                if (available(e, &ops[c]) && call(e, &ops[c], &cases[c], stream)) {
                    fflush(stdout);
                    fprintf(stderr, "gemm: %s failed on %s %s\n", engine_name[e], cases[c].layer, cases[c].pass);
                    return 1;
                }
        for (int r = 0; r < rounds; r++)
            for (int c = 0; c < ncases; c++)
                for (int e0 = 0; e0 < NENGINES; e0++) {
                    int e = (e0 + r) % NENGINES;   /* rotate who goes first */
                    if (!available(e, &ops[c]))
                        continue;
                    double best = INFINITY;
                    for (int k = 0; k < reps; k++) {
                        double t0 = now_s();
                        call(e, &ops[c], &cases[c], stream);
                        double dt = now_s() - t0;
                        best = dt < best ? dt : best;
                    }
                    t[(c * NENGINES + e) * rounds + r] = best;
                }
        double sum_frac = 0;
        int nfrac = 0;
        for (int c = 0; c < ncases; c++) {
            const struct gemm_case *g = &cases[c];
            double gflops[NENGINES];
            char cell[NENGINES][16];
            for (int e = 0; e < NENGINES; e++) {
                double *s = &t[(c * NENGINES + e) * rounds];
                qsort(s, (size_t)rounds, sizeof *s, cmp_double);
                gflops[e] = available(e, &ops[c]) ? 2.0 * (double)(g->M * g->N * g->K) / s[rounds / 2] / 1e9 : 0;
                snprintf(cell[e], sizeof cell[e], available(e, &ops[c]) ? "%.1f" : "-", gflops[e]);
            }
            char frac[16] = "-";
            if (available(ONEDNN, &ops[c])) {
                snprintf(frac, sizeof frac, "%.2f", gflops[TRAINRUN] / gflops[ONEDNN]);
                sum_frac += log(gflops[TRAINRUN] / gflops[ONEDNN]), nfrac++;
            }
            char impl[160];
            if (ops[c].status == dnnl_success)
                snprintf(impl, sizeof impl, "%s", ops[c].impl);
            else
                snprintf(impl, sizeof impl, "unimplemented on %s (status %d)", isa_name(dnnl_get_effective_cpu_isa()),
                         (int)ops[c].status);
            printf("%-5s %-9s %-13s %5lld %5lld %5lld %10s %10s %10s %8s  %s\n", tr_dtype_name(dtypes[d]), g->layer,
                   g->pass, (long long)g->M, (long long)g->N, (long long)g->K, cell[TRAINRUN], cell[ONEDNN],
                   cell[OPENBLAS], frac, impl);
        }
        if (nfrac)
            printf("%-5s geometric mean of trainrun/oneDNN over %d GEMMs: %.2f\n", tr_dtype_name(dtypes[d]), nfrac,
                   exp(sum_frac / nfrac));
        else
            printf("%-5s oneDNN: unimplemented on %s, no fraction\n", tr_dtype_name(dtypes[d]),
                   isa_name(dnnl_get_effective_cpu_isa()));
        for (int c = 0; c < ncases; c++)
            release(&ops[c]);
        free(ops), free(t);
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    tr_backend_close(instance);
    return 0;
}
