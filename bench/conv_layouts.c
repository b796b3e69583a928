/* bench/conv_layouts: oneDNN 2.6.3's convolutions on the recipes' ResNet shapes (16 images, the
 * piece src/backend/cpu/onednn_conv.c runs on one thread), activations in oneDNN's blocked
 * layout (format_tag_any) against nhwc (channels last, the graph's on the CPU), forward,
 * backward data and backward weights; every forward kernel oneDNN lists for nhwc but its
 * reference one; and the reorder the blocked layout costs per input (NCHW → nChw16c). Best of 12
 * runs after 3, on warm caches: the kernels' own speed, not the step's.
 *   OMP_NUM_THREADS=1 bench/conv_layouts [f32|bf16] [IMAGES]   (bf16 needs AVX-512 BF16 or AMX) */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void check(dnnl_status_t st, const char *what)
{
    if (st != dnnl_success) {
        fprintf(stderr, "conv_layouts: %s failed (oneDNN status %d)\n", what, (int)st);
        exit(1);
    }
}

/* A memory object of md's size, filled with small repeating bytes (finite in f32 and bf16). */
static dnnl_memory_t filled(const dnnl_memory_desc_t *md)
{
    dnnl_memory_t m;
    check(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE), "dnnl_memory_create");
    unsigned char *p;
    dnnl_memory_get_data_handle(m, (void **)&p);
    for (size_t i = 0, n = dnnl_memory_desc_get_size(md); i < n; i++)
        p[i] = (unsigned char)(i * 7 % 64);
    return m;
}

/* Best milliseconds of pd's primitive; op 0 forward, 1 backward data, 2 backward weights. */
static double best_ms(const_dnnl_primitive_desc_t pd, int op)
{
    dnnl_query_t q[4] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md, dnnl_query_scratchpad_md};
    int arg[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    if (op == 1)
        q[0] = dnnl_query_diff_src_md, q[2] = dnnl_query_diff_dst_md, arg[0] = DNNL_ARG_DIFF_SRC, arg[2] = DNNL_ARG_DIFF_DST;
    if (op == 2)
        q[1] = dnnl_query_diff_weights_md, q[2] = dnnl_query_diff_dst_md, arg[1] = DNNL_ARG_DIFF_WEIGHTS,
        arg[2] = DNNL_ARG_DIFF_DST;
    dnnl_primitive_t prim;
    check(dnnl_primitive_create(&prim, pd), "dnnl_primitive_create");
    dnnl_exec_arg_t args[4];
    for (int i = 0; i < 4; i++)
        args[i] = (dnnl_exec_arg_t){arg[i], filled(dnnl_primitive_desc_query_md(pd, q[i], 0))};
    double best = 1e30;
    for (int it = 0; it < 15; it++) {
        double t = now_ms();
        check(dnnl_primitive_execute(prim, stream, 4, args), "dnnl_primitive_execute");
        dnnl_stream_wait(stream);
        t = now_ms() - t;
        best = it >= 3 && t < best ? t : best;
    }
    for (int i = 0; i < 4; i++)
        dnnl_memory_destroy(args[i].memory);
    dnnl_primitive_destroy(prim);
    return best;
}

static const char *impl_of(const_dnnl_primitive_desc_t pd)
{
    const char *name = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
    return name;
}

int main(int argc, char **argv)
{
    dnnl_data_type_t dt = argc > 1 && !strcmp(argv[1], "bf16") ? dnnl_bf16 : dnnl_f32;
    int64_t N = argc > 2 ? atoll(argv[2]) : 16;
    check(dnnl_engine_create(&engine, dnnl_cpu, 0), "dnnl_engine_create");
    check(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "dnnl_stream_create");
    /* C, O, H, stride: the ResNet's 3×3 convolutions (padding 1) */
    static const int shapes[][4] = {{16, 16, 28, 1}, {16, 32, 28, 2}, {32, 32, 14, 1}, {32, 64, 14, 2}, {64, 64, 7, 1}};
    printf("%s, %lld images, one thread's primitive; ms forward / backward data / backward weights\n",
           dt == dnnl_f32 ? "f32" : "bf16", (long long)N);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t C = shapes[si][0], O = shapes[si][1], H = shapes[si][2], S = shapes[si][3], Ho = (H + 2 - 3) / S + 1;
        double gflop = 2.0 * (double)(N * Ho * Ho * O * C * 9) / 1e6;
        for (int layout = 0; layout < 2; layout++) {
            dnnl_format_tag_t act = layout ? dnnl_nhwc : dnnl_format_tag_any;
            dnnl_memory_desc_t x, y, w, dw;
            dnnl_memory_desc_init_by_tag(&x, 4, (dnnl_dims_t){N, C, H, H}, dt, act);
            dnnl_memory_desc_init_by_tag(&y, 4, (dnnl_dims_t){N, O, Ho, Ho}, dt, act);
            dnnl_memory_desc_init_by_tag(&w, 4, (dnnl_dims_t){O, C, 3, 3}, dt, dnnl_format_tag_any);
            dnnl_memory_desc_init_by_tag(&dw, 4, (dnnl_dims_t){O, C, 3, 3}, dnnl_f32, dnnl_format_tag_any);
            dnnl_dims_t strides = {S, S}, pad = {1, 1};
            dnnl_primitive_attr_t attr;
            dnnl_primitive_attr_create(&attr);
            dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
            dnnl_convolution_desc_t fd, bd, bw;
            dnnl_primitive_desc_t fwd, bwd_data, bwd_weights;
            check(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &x, &w, NULL,
                                                     &y, strides, pad, pad), "forward desc");
            check(dnnl_primitive_desc_create(&fwd, &fd, attr, engine, NULL), "forward");
            check(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &x, &w, &y, strides, pad, pad),
                  "backward data desc");
            check(dnnl_primitive_desc_create(&bwd_data, &bd, attr, engine, fwd), "backward data");
            check(dnnl_convolution_backward_weights_desc_init(&bw, dnnl_convolution_direct, &x, &dw, NULL, &y, strides,
                                                              pad, pad), "backward weights desc");
            check(dnnl_primitive_desc_create(&bwd_weights, &bw, attr, engine, fwd), "backward weights");
            double t[3] = {best_ms(fwd, 0), best_ms(bwd_data, 1), best_ms(bwd_weights, 2)};
            printf("C %2lld O %2lld %2lld×%-2lld s%lld %-7s %.3f / %.3f / %.3f  (GFLOP/s %.0f / %.0f / %.0f)  [%s | %s | %s]\n",
                   (long long)C, (long long)O, (long long)H, (long long)H, (long long)S, layout ? "nhwc" : "blocked",
                   t[0], t[1], t[2], gflop / t[0], gflop / t[1], gflop / t[2], impl_of(fwd), impl_of(bwd_data),
                   impl_of(bwd_weights));
            if (layout) {   /* every forward kernel oneDNN has for nhwc */
                dnnl_primitive_desc_iterator_t it;
                check(dnnl_primitive_desc_iterator_create(&it, &fd, attr, engine, NULL), "iterator");
                do {
                    dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
                    if (strncmp(impl_of(pd), "ref", 3))
                        printf("    nhwc forward on %-26s %.3f\n", impl_of(pd), best_ms(pd, 0));
                    dnnl_primitive_desc_destroy(pd);
                } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
                dnnl_primitive_desc_iterator_destroy(it);
            }
            dnnl_primitive_desc_destroy(fwd), dnnl_primitive_desc_destroy(bwd_data);
            dnnl_primitive_desc_destroy(bwd_weights), dnnl_primitive_attr_destroy(attr);
        }
        dnnl_memory_desc_t plain, blocked;
        dnnl_memory_desc_init_by_tag(&plain, 4, (dnnl_dims_t){N, C, H, H}, dt, dnnl_nchw);
        dnnl_memory_desc_init_by_tag(&blocked, 4, (dnnl_dims_t){N, C, H, H}, dt, dnnl_nChw16c);
        dnnl_primitive_desc_t rpd;
        check(dnnl_reorder_primitive_desc_create(&rpd, &plain, engine, &blocked, engine, NULL), "reorder");
        dnnl_primitive_t reorder;
        check(dnnl_primitive_create(&reorder, rpd), "reorder primitive");
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, filled(&plain)}, {DNNL_ARG_TO, filled(&blocked)}};
        double best = 1e30;
        for (int it = 0; it < 15; it++) {
            double t = now_ms();
            dnnl_primitive_execute(reorder, stream, 2, args);
            dnnl_stream_wait(stream);
            t = now_ms() - t;
            best = it >= 3 && t < best ? t : best;
        }
        printf("    blocked: the input's reorder NCHW → nChw16c %.3f\n", best);
        dnnl_memory_destroy(args[0].memory), dnnl_memory_destroy(args[1].memory);
        dnnl_primitive_destroy(reorder), dnnl_primitive_desc_destroy(rpd);
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return 0;
}
