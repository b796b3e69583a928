/* MATMUL through oneDNN (src/backend/cpu/onednn.c) against the OpenBLAS path: f32 (TR_CPU_GEMM=
 * onednn) within a stated bound, every transpose, batched and shared B, accumulation; the same
 * bits on 1, 2 and 3 threads; a program prepared for its buckets making no primitive in its
 * steps, at micro-batches smaller than the buckets too; bf16 and f16 where this CPU has no
 * 16-bit kernel: the widened path's bits exactly; the fused classifier and loss in bf16 (softmax.c)
 * against its widened path, attention in bf16 (attention.c) too. Runs under any ONEDNN_MAX_CPU_ISA
 * (tests/isa.sh); a CPU below the ISA forced simply caps oneDNN lower. */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/onednn.h"
#include "backend/exec.h"
#include "config.h"
#include "graph/program.h"

#ifdef HAVE_ONEDNN
#include <dnnl.h>
#endif

#ifdef HAVE_ONEDNN   /* the f32 path, which only oneDNN has */
/* f32 on oneDNN and on OpenBLAS: each within K·2^-24·Σ|a||b| of the exact product (both
 * accumulate K terms in f32), so they differ by at most twice that. Shapes of several tiles
 * with partial edge tiles both ways, of one tile, batched and shared B, each transpose, and
 * accumulation into y. */
START_TEST(f32_agrees_with_openblas)
{
    setenv("TR_CPU_GEMM", "onednn", 1);
    struct tr_backend *be = gc_open_cpu();
    const int64_t shapes[3][4] = {{2, 300, 200, 700}, {1, 32, 400, 72}, {3, 17, 5, 9}};   /* P, M, K, N */
    for (int s = 0; s < 3; s++)
        for (int form = 0; form < 6; form++) {
            const int64_t P = shapes[s][0], M = shapes[s][1], K = shapes[s][2], N = shapes[s][3];
            int ta = form & 1, tb = form >> 1 & 1, batched = form >= 4;
            uint64_t seed = 7;
            struct tr_tensor a = ta ? gc_make(TR_F32, P, K, M) : gc_make(TR_F32, P, M, K);
            struct tr_tensor b = batched ? (tb ? gc_make(TR_F32, P, N, K) : gc_make(TR_F32, P, K, N))
                                         : (tb ? gc_make(TR_F32, N, K) : gc_make(TR_F32, K, N));
            struct tr_tensor y = gc_make(TR_F32, P, M, N), ref = gc_make(TR_F32, P, M, N), first = gc_make(TR_F32, P, M, N);
            gc_fill(&a, &seed, -1, 1), gc_fill(&b, &seed, -1, 1), gc_fill(&first, &seed, -1, 1);
            struct tr_node mm = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1, .attrs.matmul = {(uint8_t)ta, (uint8_t)tb},
                                 .accumulate = (uint8_t)(form == 3 || form == 5)};
            size_t bytes = tr_tensor_bytes(&y);
            memcpy(y.data, first.data, bytes), memcpy(ref.data, first.data, bytes);
            struct tr_kernel_args on = {.node = &mm, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
            struct tr_kernel_args blas = {.node = &mm, .in = {a, b}, .out = {ref}, .nin = 2, .nout = 1};
            int64_t made = tr_cpu_onednn_counts(be).primitives;
            gc_run_planned(be, &on);
            gc_run_planned(tr_backend_cpu(), &blas);
            ck_assert_msg(tr_cpu_onednn_counts(be).primitives > made || made > 0, "oneDNN made no primitive");
            const float *A = a.data, *B = b.data, *Y = y.data, *R = ref.data;
            for (int64_t p = 0; p < P; p++)
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) {
                        double mass = 0;
                        for (int64_t k = 0; k < K; k++) {
                            double x = ta ? A[p * K * M + k * M + i] : A[p * M * K + i * K + k];
                            int64_t bp = batched ? p * K * N : 0;
                            double w = tb ? B[bp + j * K + k] : B[bp + k * N + j];
                            mass += fabs(x * w);
                        }
                        int64_t at = p * M * N + i * N + j;
                        double bound = 2 * (double)(K + 1) * 0x1p-24 * (mass + fabs(((float *)first.data)[at]));
                        ck_assert_msg(fabs(Y[at] - R[at]) <= bound,
                                      "ta=%d tb=%d batched=%d acc=%d [%ld,%ld,%ld]: oneDNN %.9g OpenBLAS %.9g (bound %g)",
                                      ta, tb, batched, mm.accumulate, (long)p, (long)i, (long)j, Y[at], R[at], bound);
                    }
            gc_free(&a), gc_free(&b), gc_free(&y), gc_free(&ref), gc_free(&first);
        }
    struct tr_onednn_counts c = tr_cpu_onednn_counts(be);
    ck_assert_int_gt(c.native_nodes + c.primitives, 0);
    tr_backend_close(be);
    unsetenv("TR_CPU_GEMM");
}
END_TEST

/* Pieces of fixed shapes, one single-threaded primitive each: 1, 2 and 3 threads give the
 * same bits (oneDNN's own threads would split the reduction). */
START_TEST(same_bits_on_any_thread_count)
{
    setenv("TR_CPU_GEMM", "onednn", 1);
    struct tr_backend *be = gc_open_cpu();
    for (int form = 0; form < 6; form++) {
        const int64_t P = 2, M = 600, K = 300, N = 1100;
        int ta = form & 1, tb = form >> 1 & 1, batched = form >= 4;
        uint64_t seed = 11;
        struct tr_tensor a = ta ? gc_make(TR_F32, P, K, M) : gc_make(TR_F32, P, M, K);
        struct tr_tensor b = batched ? (tb ? gc_make(TR_F32, P, N, K) : gc_make(TR_F32, P, K, N))
                                     : (tb ? gc_make(TR_F32, N, K) : gc_make(TR_F32, K, N));
        struct tr_tensor y = gc_make(TR_F32, P, M, N), first = gc_make(TR_F32, P, M, N);
        gc_fill(&a, &seed, -1, 1), gc_fill(&b, &seed, -1, 1), gc_fill(&first, &seed, -1, 1);
        struct tr_node mm = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1, .attrs.matmul = {(uint8_t)ta, (uint8_t)tb},
                             .accumulate = (uint8_t)(form == 3)};
        struct tr_kernel_args args = {.node = &mm, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
        size_t bytes = tr_tensor_bytes(&y);
        char *result[3];
        for (int threads = 1; threads <= 3; threads++) {
            memcpy(y.data, first.data, bytes);
            omp_set_num_threads(threads);
            gc_run_planned(be, &args);
            result[threads - 1] = memcpy(malloc(bytes), y.data, bytes);
        }
        omp_set_num_threads(1);
        for (int i = 1; i < 3; i++)
            ck_assert_msg(memcmp(result[0], result[i], bytes) == 0, "ta=%d tb=%d batched=%d: 1 and %d threads differ",
                          ta, tb, batched, i + 1);
        for (int i = 0; i < 3; i++)
            free(result[i]);
        gc_free(&a), gc_free(&b), gc_free(&y), gc_free(&first);
    }
    ck_assert_int_gt(tr_cpu_onednn_counts(be).native_nodes + tr_cpu_onednn_counts(be).primitives, 0);
    tr_backend_close(be);
    unsetenv("TR_CPU_GEMM");
}
END_TEST

/* A two-layer model over x [B, S, 48], differentiated (its weight gradients reduce over B·S),
 * planned for two buckets and prepared: steps at the buckets and at smaller micro-batches make
 * no primitive, and their loss matches OpenBLAS's. */
static double run_program(const struct tr_backend *be, struct tr_graph *g, struct tr_program *prog, int64_t B,
                          int64_t S)
{
    char *base[TR_NKINDS];
    for (int k = 0; k < TR_NKINDS; k++)
        base[k] = calloc(prog->region_bytes[k] + 64, 1);
    const struct tr_memplan *plan = tr_program_plan_for(prog, B, S);
    ck_assert_ptr_nonnull(plan);
    struct tr_exec x = {.g = g, .schedule = prog->schedule, .n = prog->n, .plan = plan, .be = be};
    memcpy(x.base, base, sizeof base);
    x.workspace = prog->workspace_bytes ? malloc(prog->workspace_bytes) : NULL;
    uint64_t seed = 5;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM || g->values[v].kind == TR_INPUT) {
            float *d = tr_exec_data(&x, v);
            size_t n = plan->bytes[v] / sizeof(float);
            for (size_t i = 0; i < n; i++)
                d[i] = (float)gc_uniform(&seed, -1, 1);
        }
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_run(&x, B, S, &why) == 0, "%s", tr_diag_last(&why));
    double loss = *(float *)tr_exec_data(&x, g->loss);
    free(x.workspace);
    for (int k = 0; k < TR_NKINDS; k++)
        free(base[k]);
    return loss;
}

START_TEST(no_primitive_made_in_a_step)
{
    setenv("TR_CPU_GEMM", "onednn", 1);
    struct tr_graph g;
    tr_graph_init(&g);
    int x = tr_input(&g, "x", TR_F32, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(48)});
    int w1 = tr_param(&g, "w1", TR_F32, 2, (struct tr_dim[]){tr_dim_const(80), tr_dim_const(48)});
    int w2 = tr_param(&g, "w2", TR_F32, 2, (struct tr_dim[]){tr_dim_const(600), tr_dim_const(80)});
    int h = tr_gelu(&g, tr_linear(&g, x, w1, -1), 0);
    tr_graph_set_loss(&g, tr_sum(&g, tr_linear(&g, h, w2, -1), -1));
    ck_assert_int_ge(tr_autodiff(&g), 0);
    const struct tr_bucket buckets[2] = {{8, 40}, {2, 300}};
    struct tr_program prog;
    ck_assert_int_eq(tr_program_plan(&prog, &g, buckets, 2, &g.loss, 1, tr_cpu_ops.workspace_bytes, false), 0);
    struct tr_backend *be = gc_open_cpu();
    int64_t B[2] = {8, 2}, S[2] = {40, 300};
    struct tr_diag why = {0};
    ck_assert_int_eq(tr_backend_prepare_program(be, &g, prog.schedule, prog.n, B, S, 2, &why), 0);
    struct tr_onednn_counts prepared = tr_cpu_onednn_counts(be);
    ck_assert_int_gt(prepared.native_nodes, 2);   /* the forward and backward GEMMs */
    ck_assert_int_eq(prepared.made_in_kernels, 0);
    const int64_t steps[6][2] = {{8, 40}, {2, 300}, {7, 33}, {1, 299}, {3, 1}, {2, 129}};
    for (int i = 0; i < 6; i++) {
        double on = run_program(be, &g, &prog, steps[i][0], steps[i][1]);
        double blas = run_program(tr_backend_cpu(), &g, &prog, steps[i][0], steps[i][1]);
        ck_assert_msg(fabs(on - blas) <= 1e-4 * (1 + fabs(blas)), "B=%ld S=%ld: oneDNN %.7g OpenBLAS %.7g",
                      (long)steps[i][0], (long)steps[i][1], on, blas);
    }
    struct tr_onednn_counts after = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(after.made_in_kernels, 0);
    ck_assert_int_eq(after.primitives, prepared.primitives);
    tr_backend_close(be);
    tr_program_free(&prog);
    tr_graph_free(&g);
    unsetenv("TR_CPU_GEMM");
}
END_TEST

#endif

/* bf16 and f16 operands: where oneDNN has no 16-bit kernel on this CPU (2.6.3: bf16 below
 * AVX-512 BF16, f16 everywhere) the node stays on the widened path, decided when it is first
 * met — the same bits as the instance without oneDNN; where it has one, within bf16's
 * rounding of it (f32 accumulation, one rounding at the end: 2^-8 relative, with K·2^-24
 * of accumulation besides). */
START_TEST(sixteen_bit_native_or_widened)
{
    struct tr_backend *be = gc_open_cpu();
    bool native_bf16 = false;
#ifdef HAVE_ONEDNN
    native_bf16 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
#endif
    const int64_t M = 300, K = 64, N = 520;
    for (int type = 0; type < 2; type++) {
        enum tr_dtype t = type ? TR_F16 : TR_BF16;
        uint16_t (*to16)(float) = type ? tr_f32_to_f16 : tr_f32_to_bf16;
        float (*from16)(uint16_t) = type ? tr_f16_to_f32 : tr_bf16_to_f32;
        uint64_t seed = 3;
        struct tr_tensor a = gc_make(t, M, K), b = gc_make(t, N, K), y = gc_make(t, M, N), ref = gc_make(t, M, N);
        for (int64_t i = 0; i < M * K; i++)
            ((uint16_t *)a.data)[i] = to16((float)gc_uniform(&seed, -2, 2));
        for (int64_t i = 0; i < N * K; i++)
            ((uint16_t *)b.data)[i] = to16((float)gc_uniform(&seed, -2, 2));
        struct tr_node mm = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1, .attrs.matmul = {0, 1}};
        struct tr_kernel_args on = {.node = &mm, .in = {a, b}, .out = {y}, .nin = 2, .nout = 1};
        struct tr_kernel_args widened = {.node = &mm, .in = {a, b}, .out = {ref}, .nin = 2, .nout = 1};
        int64_t before = tr_cpu_onednn_counts(be).primitives;
        gc_run_planned(be, &on);
        gc_run_planned(tr_backend_cpu(), &widened);
        bool native = t == TR_BF16 && native_bf16;
        if (!native) {
            ck_assert_int_eq(tr_cpu_onednn_counts(be).primitives, before);
            ck_assert_msg(memcmp(y.data, ref.data, tr_tensor_bytes(&y)) == 0, "%s: not the widened path's bits",
                          tr_dtype_name(t));
        } else {
            ck_assert_int_gt(tr_cpu_onednn_counts(be).primitives, before);
            for (int64_t i = 0; i < M * N; i++) {
                double got = from16(((uint16_t *)y.data)[i]), want = from16(((uint16_t *)ref.data)[i]);
                ck_assert_msg(fabs(got - want) <= 0x1p-7 * fabs(want) + K * 4 * 0x1p-20, "bf16 [%ld]: %g against %g",
                              (long)i, got, want);
            }
        }
        gc_free(&a), gc_free(&b), gc_free(&y), gc_free(&ref);
    }
    tr_backend_close(be);
}
END_TEST

/* LINEAR_CROSS_ENTROPY on bf16 x (w f32, GPT's tied embedding, or bf16) in chunks of 32 rows
 * (two full, one of 6): on a CPU that computes bf16, prepared, its three GEMMs on oneDNN's bf16
 * kernels — within bf16's rounding of w and of the logits' gradient (2^-9 relative each, a few
 * of them adding up: 2^-6 normwise) of the widened f32 path, the same bits on 1 and 3 threads,
 * and no primitive made by a run; elsewhere the widened path's bits exactly. */
static double normwise_f32(const float *got, const float *want, int64_t n)
{
    double d = 0, w = 0;
    for (int64_t i = 0; i < n; i++)
        d += (got[i] - want[i]) * (double)(got[i] - want[i]), w += (double)want[i] * want[i];
    return sqrt(d / (w > 0 ? w : 1));
}

static void widen16(const struct tr_tensor *t, float *dst)
{
    for (int64_t i = 0; i < tr_tensor_numel(t); i++)
        dst[i] = t->dtype == TR_BF16 ? tr_bf16_to_f32(((uint16_t *)t->data)[i]) : ((float *)t->data)[i];
}

START_TEST(fused_head_in_bf16)
{
    struct tr_backend *be = gc_open_cpu();
    bool native = tr_onednn_computes_bf16();
    const int64_t N = 70, D = 40, V = 300;
    enum tr_dtype wt = _i ? TR_BF16 : TR_F32;
    uint64_t seed = 9;
    struct tr_tensor x = gc_make(TR_BF16, N, D), w = gc_make(wt, V, D), t = gc_make(TR_I32, N);
    for (int64_t i = 0; i < N * D; i++)
        ((uint16_t *)x.data)[i] = tr_f32_to_bf16((float)gc_uniform(&seed, -2, 2));
    for (int64_t i = 0; i < V * D; i++) {
        float v = (float)gc_uniform(&seed, -1, 1);
        if (wt == TR_BF16)
            ((uint16_t *)w.data)[i] = tr_f32_to_bf16(v);
        else
            ((float *)w.data)[i] = v;
    }
    for (int64_t r = 0; r < N; r++)
        ((int32_t *)t.data)[r] = r == 5 ? -100 : (int32_t)((r * 37) % V);
    struct tr_node fwd = {.op = TR_OP_LINEAR_CROSS_ENTROPY, .nin = 3, .nout = 3, .attrs.cross_entropy = {-100, 32}};
    struct tr_node bwd = {.op = TR_OP_LINEAR_CROSS_ENTROPY_BWD, .nin = 5, .nout = 2, .attrs.cross_entropy = {-100, 32}};
    struct tr_tensor loss[2], lse[2], rank[2], dloss = gc_make(TR_F32, 1), dx[2], dw[2];
    ((float *)dloss.data)[0] = 1.5f;
    for (int k = 0; k < 2; k++) {
        loss[k] = gc_make(TR_F32, 1), lse[k] = gc_make(TR_F32, N), rank[k] = gc_make(TR_I32, N);
        dx[k] = gc_make(TR_BF16, N, D), dw[k] = gc_make(TR_F32, V, D);
    }
    struct tr_diag why = {0};
    struct tr_tensor fin[3] = {x, w, t}, fout[3] = {loss[0], lse[0], rank[0]};
    struct tr_tensor bin[5] = {dloss, x, w, t, lse[0]}, bout[2] = {dx[0], dw[0]};
    ck_assert_int_eq(be->ops->prepare(be, NULL, &fwd, fin, fout, &why), 0);
    ck_assert_int_eq(be->ops->prepare(be, NULL, &bwd, bin, bout, &why), 0);
    struct tr_onednn_counts prepared = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(prepared.made_in_kernels, 0);
    char *first[2] = {NULL, NULL};
    for (int threads = 1; threads <= 3; threads += 2) {   /* on oneDNN (k 0), 1 and 3 threads */
        omp_set_num_threads(threads);
        struct tr_kernel_args f = {.node = &fwd, .in = {x, w, t}, .out = {loss[0], lse[0], rank[0]}, .nin = 3, .nout = 3};
        gc_run_planned(be, &f);
        struct tr_kernel_args b = {.node = &bwd, .in = {dloss, x, w, t, lse[0]}, .out = {dx[0], dw[0]}, .nin = 5,
                                   .nout = 2};
        gc_run_planned(be, &b);
        size_t bytes = tr_tensor_bytes(&dw[0]);
        if (threads == 1) {
            first[0] = memcpy(malloc(bytes), dw[0].data, bytes);
            first[1] = memcpy(malloc(tr_tensor_bytes(&dx[0])), dx[0].data, tr_tensor_bytes(&dx[0]));
        } else {
            ck_assert_msg(memcmp(first[0], dw[0].data, bytes) == 0, "dw differs between 1 and 3 threads");
            ck_assert_msg(memcmp(first[1], dx[0].data, tr_tensor_bytes(&dx[0])) == 0, "dx differs between 1 and 3 threads");
        }
    }
    omp_set_num_threads(1);
    free(first[0]), free(first[1]);
    struct tr_onednn_counts after = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(after.made_in_kernels, 0);
    ck_assert_int_eq(after.primitives, prepared.primitives);
    /* the widened path (k 1), on the instance without oneDNN's primitives */
    struct tr_kernel_args f = {.node = &fwd, .in = {x, w, t}, .out = {loss[1], lse[1], rank[1]}, .nin = 3, .nout = 3};
    gc_run_planned(tr_backend_cpu(), &f);
    struct tr_kernel_args b = {.node = &bwd, .in = {dloss, x, w, t, lse[1]}, .out = {dx[1], dw[1]}, .nin = 5, .nout = 2};
    gc_run_planned(tr_backend_cpu(), &b);
    float *g[2] = {malloc((size_t)(N * D) * 4), malloc((size_t)(N * D) * 4)};
    widen16(&dx[0], g[0]), widen16(&dx[1], g[1]);
    double e_loss = fabs(((float *)loss[0].data)[0] - ((float *)loss[1].data)[0]) / fabs(((float *)loss[1].data)[0]);
    double e_lse = normwise_f32(lse[0].data, lse[1].data, N), e_dx = normwise_f32(g[0], g[1], N * D);
    double e_dw = normwise_f32(dw[0].data, dw[1].data, V * D);
    if (native) {
        ck_assert_int_gt(prepared.primitives, 0);
        ck_assert_msg(e_loss <= 0x1p-7 && e_lse <= 0x1p-7 && e_dx <= 0x1p-6 && e_dw <= 0x1p-6,
                      "w %s: loss %.3g, lse %.3g, dx %.3g, dw %.3g from the widened path", tr_dtype_name(wt), e_loss,
                      e_lse, e_dx, e_dw);
        ck_assert_msg(e_dw > 0 || wt == TR_BF16 || e_lse > 0, "w f32: oneDNN's path gave the widened bits");
    } else {
        ck_assert_int_eq(prepared.primitives, 0);
        ck_assert_msg(e_loss == 0 && e_lse == 0 && e_dx == 0 && e_dw == 0, "not the widened path's bits");
    }
    free(g[0]), free(g[1]);
    for (int k = 0; k < 2; k++)
        gc_free(&loss[k]), gc_free(&lse[k]), gc_free(&rank[k]), gc_free(&dx[k]), gc_free(&dw[k]);
    gc_free(&x), gc_free(&w), gc_free(&t), gc_free(&dloss);
    tr_backend_close(be);
}
END_TEST

/* ATTENTION and its backward on bf16 q, k, v (attention.c): on a CPU that computes bf16, the
 * tiles' GEMMs on oneDNN's bf16 kernels — within bf16's rounding of the probabilities, ds and the
 * outputs (2^-9 relative each, a few adding up: 2^-7 normwise; measured 1.6e-3 to 2.8e-3 on AVX-512 BF16) of the widened f32 path, lse within
 * f32's accumulation (1e-5), the same bits on 1 and 3 threads, and no primitive made by a run,
 * at the prepared S and, where S varies, at any S below it; elsewhere the widened path's bits.
 * S 300: two key tiles (the second of 44 keys, rounded to 48) and a last query tile of 44 rows
 * reaching past S (the zeroed copies). Cases: _i's bit 0 causal, bit 1 a key padding mask. */
struct attn_case {
    struct tr_tensor q, k, v, mask, o[2], lse[2], dout, d[2][3];
};

static void attn_case_make(struct attn_case *c, int64_t B, int64_t H, int64_t S, int64_t D, uint64_t seed)
{
    c->q = gc_make(TR_BF16, B, H, S, D), c->k = gc_make(TR_BF16, B, H, S, D), c->v = gc_make(TR_BF16, B, H, S, D);
    c->dout = gc_make(TR_BF16, B, H, S, D), c->mask = gc_make(TR_U8, B, S);
    struct tr_tensor *fill[4] = {&c->q, &c->k, &c->v, &c->dout};
    for (int t = 0; t < 4; t++)
        for (int64_t i = 0; i < B * H * S * D; i++)
            ((uint16_t *)fill[t]->data)[i] = tr_f32_to_bf16((float)gc_uniform(&seed, -2, 2));
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < S; j++)   /* batch 1: its last 23 keys padding, and one in the middle */
            ((uint8_t *)c->mask.data)[b * S + j] = !(b == 1 && (j >= S - 23 || j == S / 3));
    for (int k = 0; k < 2; k++) {
        c->o[k] = gc_make(TR_BF16, B, H, S, D), c->lse[k] = gc_make(TR_F32, B, H, S);
        for (int g = 0; g < 3; g++)
            c->d[k][g] = gc_make(TR_BF16, B, H, S, D);
    }
}

static void attn_case_free(struct attn_case *c)
{
    gc_free(&c->q), gc_free(&c->k), gc_free(&c->v), gc_free(&c->dout), gc_free(&c->mask);
    for (int k = 0; k < 2; k++) {
        gc_free(&c->o[k]), gc_free(&c->lse[k]);
        for (int g = 0; g < 3; g++)
            gc_free(&c->d[k][g]);
    }
}

/* Forward into o[k], lse[k], then the backward (from the widened path's o and lse, k 1, so the
 * backward's own error is measured) into d[k]. */
static void attn_case_run(const struct tr_backend *be, struct attn_case *c, const struct tr_node *fwd,
                          const struct tr_node *bwd, int k, bool widened_first)
{
    struct tr_kernel_args f = {.node = fwd, .in = {c->q, c->k, c->v, c->mask}, .out = {c->o[k], c->lse[k]},
                               .nin = fwd->nin, .nout = 2};
    gc_run_planned(be, &f);
    int from = widened_first ? 1 : k;
    struct tr_kernel_args b = {.node = bwd, .in = {c->dout, c->q, c->k, c->v, c->o[from], c->lse[from], c->mask},
                               .out = {c->d[k][0], c->d[k][1], c->d[k][2]}, .nin = bwd->nin, .nout = 3};
    gc_run_planned(be, &b);
}

static double attn_normwise(const struct tr_tensor *got, const struct tr_tensor *want)
{
    int64_t n = tr_tensor_numel(got);
    float *g = malloc((size_t)n * 4), *w = malloc((size_t)n * 4);
    widen16(got, g), widen16(want, w);
    double e = normwise_f32(g, w, n);
    free(g), free(w);
    return e;
}

/* The node pair at this case's S: tensors re-viewed at S rows (a prefix of each [S_max] buffer is
 * not a prefix of a [B, H, S] tensor, so each S gets its own case). */
static void attn_compare(struct tr_backend *be, int64_t S, bool causal, bool masked, bool native)
{
    struct attn_case c;
    attn_case_make(&c, 2, 3, S, 40, 11 + (uint64_t)S);
    struct tr_node fwd = {.op = TR_OP_ATTENTION, .nin = masked ? 4 : 3, .nout = 2, .attrs.attention = {causal, masked, 0}};
    struct tr_node bwd = {.op = TR_OP_ATTENTION_BWD, .nin = masked ? 7 : 6, .nout = 3, .attrs.attention = {causal, masked, 0}};
    attn_case_run(tr_backend_cpu(), &c, &fwd, &bwd, 1, true);   /* the widened path */
    char *first[4] = {NULL};
    for (int threads = 1; threads <= 3; threads += 2) {
        omp_set_num_threads(threads);
        attn_case_run(be, &c, &fwd, &bwd, 0, true);
        const struct tr_tensor *out[4] = {&c.o[0], &c.d[0][0], &c.d[0][1], &c.d[0][2]};
        for (int t = 0; t < 4; t++) {
            size_t bytes = tr_tensor_bytes(out[t]);
            if (threads == 1)
                first[t] = memcpy(malloc(bytes), out[t]->data, bytes);
            else
                ck_assert_msg(memcmp(first[t], out[t]->data, bytes) == 0, "S %ld: output %d differs between 1 and 3 threads",
                              (long)S, t);
        }
    }
    omp_set_num_threads(1);
    for (int t = 0; t < 4; t++)
        free(first[t]);
    double e_o = attn_normwise(&c.o[0], &c.o[1]), e_dq = attn_normwise(&c.d[0][0], &c.d[1][0]);
    double e_dk = attn_normwise(&c.d[0][1], &c.d[1][1]), e_dv = attn_normwise(&c.d[0][2], &c.d[1][2]);
    double e_lse = 0, n_lse = 0;
    for (int64_t i = 0; i < tr_tensor_numel(&c.lse[0]); i++) {
        float a = ((float *)c.lse[0].data)[i], b = ((float *)c.lse[1].data)[i];
        ck_assert_msg(isinf(a) == isinf(b), "lse[%ld]: %g against %g", (long)i, a, b);
        if (!isinf(b))
            e_lse += (a - b) * (double)(a - b), n_lse += (double)b * b;
    }
    e_lse = sqrt(e_lse / (n_lse > 0 ? n_lse : 1));
    if (native) {
        ck_assert_msg(e_o <= 0x1p-7 && e_dq <= 0x1p-7 && e_dk <= 0x1p-7 && e_dv <= 0x1p-7 && e_lse <= 1e-5,
                      "S %ld causal %d mask %d: o %.3g, dq %.3g, dk %.3g, dv %.3g, lse %.3g from the widened path",
                      (long)S, causal, masked, e_o, e_dq, e_dk, e_dv, e_lse);
        ck_assert_msg(e_o > 0 || e_dq > 0, "S %ld: oneDNN's path gave the widened bits", (long)S);
    } else {
        ck_assert_msg(e_o == 0 && e_dq == 0 && e_dk == 0 && e_dv == 0 && e_lse == 0, "not the widened path's bits");
    }
    attn_case_free(&c);
}

START_TEST(attention_in_bf16)
{
    bool causal = _i & 1, masked = _i & 2, native = tr_onednn_computes_bf16();
    /* S fixed: prepared at 300 alone */
    struct tr_backend *be = gc_open_cpu();
    struct attn_case c;
    attn_case_make(&c, 2, 3, 300, 40, 5);
    struct tr_node fwd = {.op = TR_OP_ATTENTION, .nin = masked ? 4 : 3, .nout = 2, .attrs.attention = {causal, masked, 0}};
    struct tr_node bwd = {.op = TR_OP_ATTENTION_BWD, .nin = masked ? 7 : 6, .nout = 3, .attrs.attention = {causal, masked, 0}};
    struct tr_diag why = {0};
    struct tr_tensor fin[4] = {c.q, c.k, c.v, c.mask}, fout[2] = {c.o[0], c.lse[0]};
    struct tr_tensor bin[7] = {c.dout, c.q, c.k, c.v, c.o[0], c.lse[0], c.mask}, bout[3] = {c.d[0][0], c.d[0][1], c.d[0][2]};
    ck_assert_int_eq(be->ops->prepare(be, NULL, &fwd, fin, fout, &why), 0);
    ck_assert_int_eq(be->ops->prepare(be, NULL, &bwd, bin, bout, &why), 0);
    attn_case_free(&c);
    struct tr_onednn_counts prepared = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(prepared.primitives > 0, native);
    attn_compare(be, 300, causal, masked, native);
    ck_assert_int_eq(tr_cpu_onednn_counts(be).primitives, prepared.primitives);
    tr_backend_close(be);

    /* S varying with the micro-batch: prepared at its bound, 300, it runs at 37 and 129 with no
     * primitive made */
    be = gc_open_cpu();
    struct tr_graph g;
    tr_graph_init(&g);
    int qv = tr_input(&g, "q", TR_BF16, 4,
                      (struct tr_dim[]){tr_dim_const(2), tr_dim_const(3), tr_dim_S(1), tr_dim_const(40)});
    attn_case_make(&c, 2, 3, 300, 40, 5);
    fwd.in[0] = qv, bwd.in[1] = qv;
    struct tr_tensor fin2[4] = {c.q, c.k, c.v, c.mask}, fout2[2] = {c.o[0], c.lse[0]};
    struct tr_tensor bin2[7] = {c.dout, c.q, c.k, c.v, c.o[0], c.lse[0], c.mask}, bout2[3] = {c.d[0][0], c.d[0][1], c.d[0][2]};
    ck_assert_int_eq(be->ops->prepare(be, &g, &fwd, fin2, fout2, &why), 0);
    ck_assert_int_eq(be->ops->prepare(be, &g, &bwd, bin2, bout2, &why), 0);
    attn_case_free(&c);
    prepared = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(prepared.made_in_kernels, 0);
    attn_compare(be, 37, causal, masked, native);
    attn_compare(be, 129, causal, masked, native);
    struct tr_onednn_counts after = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(after.primitives, prepared.primitives);
    ck_assert_int_eq(after.made_in_kernels, 0);
    tr_graph_free(&g);
    tr_backend_close(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("onednn");
    TCase *tc = tcase_create("matmul");
    tcase_set_timeout(tc, 300);
#ifdef HAVE_ONEDNN   /* without it, only the 16-bit case: every GEMM on the default path */
    tcase_add_test(tc, f32_agrees_with_openblas);
    tcase_add_test(tc, same_bits_on_any_thread_count);
    tcase_add_test(tc, no_primitive_made_in_a_step);
#endif
    tcase_add_test(tc, sixteen_bit_native_or_widened);
    tcase_add_loop_test(tc, fused_head_in_bf16, 0, 2);
    tcase_add_loop_test(tc, attention_in_bf16, 0, 4);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
