/* CONV2D, CONV2D_BWD_DATA and CONV2D_BWD_FILTER through oneDNN (src/backend/cpu/onednn_conv.c)
 * against the im2col path (conv.c): within a stated bound at strides 1 and 2, padding 0 and 1,
 * 1×1 and 3×3 kernels, odd sizes and accumulation; TR_CPU_CONV=im2col giving im2col's bits; the
 * same bits on 1, 2 and 3 threads; a ResNet prepared for two batch sizes making no primitive in
 * its steps, at smaller micro-batches too. Runs under any ONEDNN_MAX_CPU_ISA (tests/isa.sh). */
#include "runner.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/exec.h"
#include "config.h"
#include "graph/program.h"
#include "models/models.h"
#include "recipe/recipe.h"

/* One case: x [N, C, H, W], w [O, C, k, k], stride, pad. */
struct conv_case {
    int64_t N, C, H, W, O, k, stride, pad;
};

static const struct conv_case cases[] = {
    {19, 3, 11, 9, 5, 3, 1, 1},    /* odd everything, a group and a binary remainder (16 + 2 + 1) */
    {5, 8, 13, 13, 16, 3, 2, 1},   /* stride 2, padded */
    {17, 16, 7, 10, 8, 1, 1, 0},   /* 1×1 */
    {3, 4, 9, 9, 8, 1, 2, 0},      /* 1×1 stride 2: the downsampling shortcut */
    {2, 3, 6, 5, 4, 3, 2, 0},      /* 3×3 stride 2 unpadded: windows leave the edge out */
    {33, 1, 8, 8, 16, 3, 1, 1},    /* one input channel: the stem */
};

/* The three ops' tensors for a case: in[0], in[1] and out, as backend.h orders them. */
struct conv_tensors {
    struct tr_tensor x, w, y;
};

static struct conv_tensors make_tensors(const struct conv_case *c, uint64_t *seed)
{
    int64_t Ho = (c->H + 2 * c->pad - c->k) / c->stride + 1, Wo = (c->W + 2 * c->pad - c->k) / c->stride + 1;
    struct conv_tensors t = {gc_make(TR_F32, c->N, c->C, c->H, c->W), gc_make(TR_F32, c->O, c->C, c->k, c->k),
                             gc_make(TR_F32, c->N, c->O, Ho, Wo)};
    gc_fill(&t.x, seed, -1, 1), gc_fill(&t.w, seed, -1, 1), gc_fill(&t.y, seed, -1, 1);
    return t;
}

/* Σ|a·b| over the terms of each output value of op (0 forward, 1 backward data, 2 backward
 * filter), in double: the scale of each value's f32 rounding. */
static double *term_mass(const struct conv_case *c, const struct conv_tensors *t, int op, int64_t values)
{
    double *mass = calloc((size_t)values, sizeof *mass);
    const float *x = t->x.data, *w = t->w.data, *y = t->y.data;
    int64_t Ho = t->y.dim[2], Wo = t->y.dim[3], C = c->C, H = c->H, W = c->W, k = c->k;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t ch = 0; ch < C; ch++)
                for (int64_t oh = 0; oh < Ho; oh++)
                    for (int64_t ow = 0; ow < Wo; ow++)
                        for (int64_t i = 0; i < k; i++)
                            for (int64_t j = 0; j < k; j++) {
                                int64_t h = oh * c->stride - c->pad + i, v = ow * c->stride - c->pad + j;
                                if (h < 0 || h >= H || v < 0 || v >= W)
                                    continue;
                                int64_t xi = ((n * C + ch) * H + h) * W + v, wi = ((o * C + ch) * k + i) * k + j;
                                int64_t yi = ((n * c->O + o) * Ho + oh) * Wo + ow;
                                double a = fabs(op == 0 ? x[xi] : y[yi]), b = fabs(op == 2 ? x[xi] : w[wi]);
                                mass[op == 0 ? yi : op == 1 ? xi : wi] += a * b;
                            }
    return mass;
}

/* The node and its arguments for op on t, writing into out. */
static struct tr_kernel_args args_of(struct tr_node *node, int op, const struct conv_tensors *t, struct tr_tensor out)
{
    static const enum tr_op ops[3] = {TR_OP_CONV2D, TR_OP_CONV2D_BWD_DATA, TR_OP_CONV2D_BWD_FILTER};
    node->op = ops[op], node->nin = 2, node->nout = 1;
    struct tr_kernel_args a = {.node = node, .out = {out}, .nin = 2, .nout = 1};
    a.in[0] = op == 0 ? t->x : t->y;
    a.in[1] = op == 2 ? t->x : t->w;
    return a;
}

static struct tr_tensor output_like(const struct conv_tensors *t, int op)
{
    const struct tr_tensor *o = op == 0 ? &t->y : op == 1 ? &t->x : &t->w;
    struct tr_tensor r = gc_tensor(TR_F32, o->rank, o->dim);
    return r;
}

/* Runs op on t through be (oneDNN) into got and through the stateless instance (im2col) into
 * want; whether be has made a primitive, now or for an earlier case. */
static bool run_both(struct tr_backend *be, const struct conv_case *c, int op, int acc, const struct conv_tensors *t,
                     struct tr_tensor got, struct tr_tensor want)
{
    struct tr_node node = {.attrs.conv = {.stride = (int)c->stride, .pad = (int)c->pad}, .accumulate = (uint8_t)acc};
    struct tr_kernel_args on = args_of(&node, op, t, got), ref = args_of(&node, op, t, want);
    int64_t made = tr_cpu_onednn_counts(be).primitives;
    gc_run_planned(be, &on);
    gc_run_planned(tr_backend_cpu(), &ref);
    return tr_cpu_onednn_counts(be).primitives > made || made > 0;
}

/* The terms summed into each output value of op. */
static int64_t terms_of(const struct conv_case *c, const struct conv_tensors *t, int op)
{
    return op == 0 ? c->C * c->k * c->k : op == 1 ? c->O * c->k * c->k : c->N * t->y.dim[2] * t->y.dim[3];
}

/* Both paths sum each value's terms in f32, so each lies within terms·2^-24·Σ|a·b| of the exact
 * value (and accumulation adds one rounding of |first|): they differ by at most twice that. */
START_TEST(agrees_with_im2col)
{
    struct tr_backend *be = gc_open_cpu();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int op = 0; op < 3; op++)
            for (int acc = 0; acc < 2; acc++) {
                const struct conv_case *c = &cases[ci];
                if (op == 1 && c->C == 1)
                    continue;   /* the stem's input takes no gradient */
                uint64_t seed = 7 + ci;
                struct conv_tensors t = make_tensors(c, &seed);
                struct tr_tensor got = output_like(&t, op), want = output_like(&t, op), first = output_like(&t, op);
                gc_fill(&first, &seed, -1, 1);
                size_t bytes = tr_tensor_bytes(&got);
                memcpy(got.data, first.data, bytes), memcpy(want.data, first.data, bytes);
                ck_assert_msg(run_both(be, c, op, acc, &t, got, want), "oneDNN made no primitive");
                int64_t values = tr_tensor_numel(&got);
                double *mass = term_mass(c, &t, op, values);
                int64_t terms = terms_of(c, &t, op);
                const float *G = got.data, *R = want.data, *F = first.data;
                for (int64_t i = 0; i < values; i++) {
                    double bound = 2 * (double)(terms + 1) * 0x1p-24 * (mass[i] + (acc ? fabs(F[i]) : 0));
                    ck_assert_msg(fabs(G[i] - R[i]) <= bound, "case %zu op %d acc %d [%ld]: oneDNN %.9g im2col %.9g (bound %g)",
                                  ci, op, acc, (long)i, G[i], R[i], bound);
                }
                /* TR_CPU_CONV=im2col: the instance takes conv.c's path, bits and all */
                setenv("TR_CPU_CONV", "im2col", 1);
                memcpy(got.data, first.data, bytes);
                struct tr_node node = {.attrs.conv = {.stride = (int)c->stride, .pad = (int)c->pad},
                                       .accumulate = (uint8_t)acc};
                struct tr_kernel_args on = args_of(&node, op, &t, got);
                gc_run_planned(be, &on);
                unsetenv("TR_CPU_CONV");
                ck_assert_msg(memcmp(got.data, want.data, bytes) == 0, "case %zu op %d: TR_CPU_CONV=im2col is not im2col",
                              ci, op);
                free(mass);
                gc_free(&t.x), gc_free(&t.w), gc_free(&t.y), gc_free(&got), gc_free(&want), gc_free(&first);
            }
    struct tr_onednn_counts n = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(n.fallback_nodes, 0);
    tr_backend_close(be);
}
END_TEST

/* A bf16 copy of an f32 tensor, and back. */
static struct tr_tensor to_bf16(const struct tr_tensor *f)
{
    struct tr_tensor h = gc_tensor(TR_BF16, f->rank, f->dim);
    for (int64_t i = 0; i < tr_tensor_numel(f); i++)
        ((uint16_t *)h.data)[i] = tr_f32_to_bf16(((const float *)f->data)[i]);
    return h;
}

static double bf16_at(const struct tr_tensor *h, int64_t i)
{
    return tr_bf16_to_f32(((const uint16_t *)h->data)[i]);
}

static void from_bf16(const struct tr_tensor *h, struct tr_tensor *f)
{
    for (int64_t i = 0; i < tr_tensor_numel(f); i++)
        F32(*f)[i] = (float)bf16_at(h, i);
}

/* bf16 convolutions on a CPU that computes them (AVX-512 BF16, AMX): oneDNN's kernels against the
 * widened im2col path. Both sum exact bf16 products in f32 (the f32 bound above) and round to bf16
 * (half a unit in the last place, 2^-8 relative, each), oneDNN's accumulation rounding once more;
 * a wrong layout or offset is off by the terms' mass. Elsewhere bf16 stays widened: no
 * primitive is made. */
START_TEST(bf16_agrees_with_widened)
{
    struct tr_backend *be = gc_open_cpu();
    bool native = tr_onednn_computes_bf16();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int op = 0; op < 3; op++)
            for (int acc = 0; acc < 2; acc++) {
                const struct conv_case *c = &cases[ci];
                if (op == 1 && c->C == 1)
                    continue;
                uint64_t seed = 23 + ci;
                struct conv_tensors f = make_tensors(c, &seed);
                struct tr_tensor first32 = output_like(&f, op);
                gc_fill(&first32, &seed, -1, 1);
                struct conv_tensors t = {to_bf16(&f.x), to_bf16(&f.w), to_bf16(&f.y)};
                from_bf16(&t.x, &f.x), from_bf16(&t.w, &f.w), from_bf16(&t.y, &f.y);   /* the rounded values' mass */
                struct tr_tensor first = to_bf16(&first32), got = to_bf16(&first32), want = to_bf16(&first32);
                int64_t before = tr_cpu_onednn_counts(be).primitives;
                bool made = run_both(be, c, op, acc, &t, got, want);
                if (native)
                    ck_assert_msg(made, "oneDNN made no bf16 primitive");
                else
                    ck_assert_int_eq(tr_cpu_onednn_counts(be).primitives, before);
                int64_t values = tr_tensor_numel(&got);
                double *mass = term_mass(c, &f, op, values);
                int64_t terms = terms_of(c, &t, op);
                for (int64_t i = 0; i < values; i++) {
                    double G = bf16_at(&got, i), R = bf16_at(&want, i), F = acc ? fabs(bf16_at(&first, i)) : 0;
                    double bound = 2 * (double)(terms + 1) * 0x1p-24 * (mass[i] + F) + 0x1p-7 * (fabs(R) + F) +
                                   0x1p-8 * mass[i];
                    ck_assert_msg(fabs(G - R) <= bound, "bf16 case %zu op %d acc %d [%ld]: oneDNN %.6g widened %.6g (bound %g)",
                                  ci, op, acc, (long)i, G, R, bound);
                }
                free(mass);
                gc_free(&f.x), gc_free(&f.w), gc_free(&f.y), gc_free(&first32);
                gc_free(&t.x), gc_free(&t.w), gc_free(&t.y), gc_free(&got), gc_free(&want), gc_free(&first);
            }
    ck_assert_int_eq(tr_cpu_onednn_counts(be).fallback_nodes, 0);
    tr_backend_close(be);
}
END_TEST

/* Fixed image groups, one single-threaded primitive each, the filter gradient's partials added
 * in group order: 1, 2 and 3 threads give the same bits (37 images: 16, 16, 4, 1). */
/* Channels last (attrs.conv.channels_last): oneDNN's nhwc kernels and im2col's transposed GEMMs
 * against im2col on the same images [N, C, H, W], within the bound above, accumulating too. */
START_TEST(channels_last_agrees)
{
    struct tr_backend *be = gc_open_cpu();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int op = 0; op < 3; op++)
            for (int acc = 0; acc < 2; acc++) {
                const struct conv_case *c = &cases[ci];
                if (op == 1 && c->C == 1)
                    continue;
                uint64_t seed = 41 + ci;
                struct conv_tensors t = make_tensors(c, &seed);
                struct tr_tensor want = output_like(&t, op), first = output_like(&t, op);
                gc_fill(&first, &seed, -1, 1);
                memcpy(want.data, first.data, tr_tensor_bytes(&want));
                struct tr_node node = {.attrs.conv = {.stride = (int)c->stride, .pad = (int)c->pad},
                                       .accumulate = (uint8_t)acc};
                struct tr_kernel_args ref = args_of(&node, op, &t, want);
                gc_run_planned(tr_backend_cpu(), &ref);
                struct conv_tensors last = {gc_nhwc(&t.x), t.w, gc_nhwc(&t.y)};
                double *mass = term_mass(c, &t, op, tr_tensor_numel(&want));
                int64_t terms = terms_of(c, &t, op);
                for (int path = 0; path < 2; path++) {   /* oneDNN, im2col */
                    struct tr_tensor got = op == 2 ? output_like(&t, op) : gc_nhwc(&first), back = output_like(&t, op);
                    if (op == 2)
                        memcpy(got.data, first.data, tr_tensor_bytes(&got));
                    struct tr_node nhwc = node;
                    nhwc.attrs.conv.channels_last = TR_NHWC;
                    struct tr_kernel_args a = args_of(&nhwc, op, &last, got);
                    gc_run_planned(path == 0 ? be : tr_backend_cpu(), &a);
                    if (op == 2)
                        memcpy(back.data, got.data, tr_tensor_bytes(&got));
                    else
                        gc_permute_images(&back, &got, 1);
                    for (int64_t i = 0; i < tr_tensor_numel(&want); i++) {
                        double bound = 2 * (double)(terms + 1) * 0x1p-24 * (mass[i] + (acc ? fabs(F32(first)[i]) : 0));
                        ck_assert_msg(fabs(F32(back)[i] - F32(want)[i]) <= bound,
                                      "case %zu op %d acc %d %s [%ld]: channels last %.9g, NCHW %.9g (bound %g)", ci, op,
                                      acc, path ? "im2col" : "oneDNN", (long)i, F32(back)[i], F32(want)[i], bound);
                    }
                    gc_free(&got), gc_free(&back);
                }
                free(mass);
                gc_free(&last.x), gc_free(&last.y);
                gc_free(&t.x), gc_free(&t.w), gc_free(&t.y), gc_free(&want), gc_free(&first);
            }
    ck_assert_int_eq(tr_cpu_onednn_counts(be).fallback_nodes, 0);
    tr_backend_close(be);
}
END_TEST

START_TEST(same_bits_on_any_thread_count)
{
    struct tr_backend *be = gc_open_cpu();
    const struct conv_case c = {37, 16, 14, 14, 16, 3, 1, 1};
    for (int op = 0; op < 6; op++) {   /* 3–5: the same, channels last */
        uint64_t seed = 11;
        struct conv_tensors t = make_tensors(&c, &seed);
        if (op >= 3) {
            struct conv_tensors nchw = t;
            t = (struct conv_tensors){gc_nhwc(&nchw.x), nchw.w, gc_nhwc(&nchw.y)};
            gc_free(&nchw.x), gc_free(&nchw.y);
        }
        struct tr_tensor out = output_like(&t, op % 3), first = output_like(&t, op % 3);
        gc_fill(&first, &seed, -1, 1);
        struct tr_node node = {.attrs.conv = {.stride = 1, .pad = 1, .channels_last = (uint8_t)(op >= 3)},
                               .accumulate = (uint8_t)(op % 3 == 2)};
        struct tr_kernel_args a = args_of(&node, op % 3, &t, out);
        size_t bytes = tr_tensor_bytes(&out);
        char *result[3];
        for (int threads = 1; threads <= 3; threads++) {
            memcpy(out.data, first.data, bytes);
            omp_set_num_threads(threads);
            gc_run_planned(be, &a);
            result[threads - 1] = memcpy(malloc(bytes), out.data, bytes);
        }
        omp_set_num_threads(1);
        for (int i = 1; i < 3; i++)
            ck_assert_msg(memcmp(result[0], result[i], bytes) == 0, "op %d: 1 and %d threads differ", op, i + 1);
        for (int i = 0; i < 3; i++)
            free(result[i]);
        gc_free(&t.x), gc_free(&t.w), gc_free(&t.y), gc_free(&out), gc_free(&first);
    }
    ck_assert_int_ge(tr_cpu_onednn_counts(be).native_nodes + tr_cpu_onednn_counts(be).primitives, 1);
    tr_backend_close(be);
}
END_TEST

/* The recipes' ResNet (one basic block per stage, widths 8/16/32) on 12×12 images: a step's
 * loss, every value filled from one seed (the labels small class indices). */
static double run_program(const struct tr_backend *be, struct tr_graph *g, struct tr_program *prog,
                          const struct tr_model *m, int64_t B)
{
    char *base[TR_NKINDS];
    for (int k = 0; k < TR_NKINDS; k++)
        base[k] = calloc(prog->region_bytes[k] + 64, 1);
    const struct tr_memplan *plan = tr_program_plan_for(prog, B, 1);
    ck_assert_ptr_nonnull(plan);
    struct tr_exec x = {.g = g, .schedule = prog->schedule, .n = prog->n, .plan = plan, .be = be};
    memcpy(x.base, base, sizeof base);
    x.workspace = prog->workspace_bytes ? malloc(prog->workspace_bytes) : NULL;
    uint64_t seed = 5;
    for (int v = 0; v < g->nvalues; v++) {
        enum tr_value_kind kind = g->values[v].kind;
        if (kind != TR_PARAM && kind != TR_INPUT && kind != TR_STATE)
            continue;
        size_t bytes = plan->bytes[v];
        if (v == m->y)
            for (size_t i = 0; i < bytes / sizeof(int32_t); i++)
                ((int32_t *)tr_exec_data(&x, v))[i] = (int32_t)(i % 10);
        else if (g->values[v].dtype == TR_F32)
            for (size_t i = 0; i < bytes / sizeof(float); i++)
                ((float *)tr_exec_data(&x, v))[i] = (float)gc_uniform(&seed, 0.1, 1);
    }
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_run(&x, B, 1, &why) == 0, "%s", tr_diag_last(&why));
    double loss = *(float *)tr_exec_data(&x, g->loss);
    free(x.workspace);
    for (int k = 0; k < TR_NKINDS; k++)
        free(base[k]);
    return loss;
}

START_TEST(no_primitive_made_in_a_step)
{
    enum tr_layout layout = (enum tr_layout)_i;   /* the loop's: NCHW, then channels last */
    static const char yaml[] = "model: {arch: resnet, layers: 1, hidden: 8}\ndata: {dataset: x}\n";
    struct tr_recipe r;
    struct tr_diag why = {0};
    ck_assert_msg(tr_recipe_load_string(&r, yaml, strlen(yaml), "test.yaml", NULL, 0, &why) == 0, "%s",
                  tr_diag_last(&why));
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    tr_graph_layout(&g, layout);
    ck_assert_int_eq(tr_model_build(&g, &r, 3, (const int64_t[]){1, 12, 12}, 10, 0, 1, &m), 0);
    ck_assert_int_ge(tr_autodiff(&g), 0);
    const struct tr_bucket buckets[2] = {{40, 1}, {9, 1}};
    struct tr_program prog;
    ck_assert_int_eq(tr_program_plan(&prog, &g, buckets, 2, &g.loss, 1, tr_cpu_ops.workspace_bytes, false), 0);
    struct tr_backend *be = gc_open_cpu();
    int64_t B[2] = {40, 9}, S[2] = {1, 1};
    ck_assert_int_eq(tr_backend_prepare_program(be, &g, prog.schedule, prog.n, B, S, 2, &why), 0);
    struct tr_onednn_counts prepared = tr_cpu_onednn_counts(be);
    ck_assert_int_ge(prepared.native_nodes, 3 * 3);   /* each stage's convolutions and their backwards */
    ck_assert_int_eq(prepared.fallback_nodes, 0);
    ck_assert_int_eq(prepared.made_in_kernels, 0);
    const int64_t steps[6] = {40, 9, 37, 16, 5, 1};
    for (int i = 0; i < 6; i++) {
        double on = run_program(be, &g, &prog, &m, steps[i]);
        double blas = run_program(tr_backend_cpu(), &g, &prog, &m, steps[i]);
        ck_assert_msg(fabs(on - blas) <= 1e-4 * (1 + fabs(blas)), "B=%ld: oneDNN %.7g im2col %.7g", (long)steps[i],
                      on, blas);
    }
    struct tr_onednn_counts after = tr_cpu_onednn_counts(be);
    ck_assert_int_eq(after.made_in_kernels, 0);
    ck_assert_int_eq(after.primitives, prepared.primitives);
    tr_backend_close(be);
    tr_program_free(&prog);
    tr_graph_free(&g);
    tr_recipe_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("onednn_conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 300);
#ifdef HAVE_ONEDNN
    tcase_add_test(tc, agrees_with_im2col);
    tcase_add_test(tc, bf16_agrees_with_widened);
    tcase_add_test(tc, channels_last_agrees);
    tcase_add_test(tc, same_bits_on_any_thread_count);
    tcase_add_loop_test(tc, no_primitive_made_in_a_step, TR_NCHW, TR_NHWC + 1);
#endif
    suite_add_tcase(s, tc);
    return unit_run(s);
}
