/* The fenced CPU backend (backend.h: tr_cpu_fenced_ops), the stand-in for a device the host
 * cannot see that tests/device.sh trains on: its regions refuse a direct touch (SIGSEGV), open
 * for copies, fills, kernels and the optimizer's passes, and give the plain CPU's bits; the
 * plain CPU's memory and optimizer entries themselves; and two instances in one process, each
 * with its own regions and copies held back (one per device). */
#include "runner.h"

#include <signal.h>
#include <string.h>

#include "backend/backend.h"
#include "recipe/optimizers.h"
#include "recipe/recipe.h"

/* A fenced instance of its own; tr_backend_close releases it. */
static struct tr_backend *fenced(void)
{
    struct tr_backend *be = NULL;
    struct tr_diag why = {0};
    ck_assert_msg(tr_backend_open_ops(&tr_cpu_fenced_ops, 0, &be, &why) == 0, "%s", tr_diag_last(&why));
    return be;
}

static float *region(const struct tr_backend *be, size_t n)
{
    float *p = be->memory->alloc(n * sizeof *p, be->memory->ctx);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* A direct write into a fenced region is a crash: what would corrupt or fault on a GPU. */
START_TEST(direct_touch_crashes)
{
    float *p = region(fenced(), 16);
    p[3] = 1;   /* SIGSEGV here */
}
END_TEST

START_TEST(copies_and_fills_reach_it)
{
    struct tr_backend *be = fenced();
    struct tr_diag error = {0};
    float *p = region(be, 1000), in[1000], out[1000], zeros[1000] = {0};
    ck_assert(!be->ops->host_visible);
    ck_assert_int_eq(tr_backend_copy(be, out, p, sizeof out, TR_COPY_TO_HOST, &error), 0);
    ck_assert_mem_eq(out, zeros, sizeof out);   /* regions start zeroed */
    for (int i = 0; i < 1000; i++)
        in[i] = (float)i / 7;
    ck_assert_int_eq(tr_backend_copy(be, p, in, sizeof in, TR_COPY_TO_DEVICE, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, p + 500, p, 100 * sizeof *p, TR_COPY_ON_DEVICE, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, out, p, sizeof out, TR_COPY_TO_HOST, &error), 0);
    ck_assert_mem_eq(out, in, 500 * sizeof *in);
    ck_assert_mem_eq(out + 500, in, 100 * sizeof *in);
    ck_assert_int_eq(tr_backend_fill(be, p, 0, 10 * sizeof *p, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, out, p, sizeof out, TR_COPY_TO_HOST, &error), 0);
    ck_assert_mem_eq(out, zeros, 10 * sizeof *out);
    ck_assert(out[10] == in[10]);
    be->memory->free(p, be->memory->ctx);
    tr_backend_close(be);
}
END_TEST

/* Copies ahead land at the join, not before, as a device's second queue promises nothing
 * sooner: a commit that skipped its join would read the old staging. synchronize lands them
 * too. The plain CPU has none: its inputs are written in place. */
START_TEST(copies_ahead_land_at_the_join)
{
    struct tr_backend *be = fenced();
    struct tr_diag error = {0};
    float *p = region(be, 8), in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8], zeros[8] = {0};
    ck_assert(!tr_backend_copies_ahead(tr_backend_cpu()) && tr_cpu_ops.join == NULL);
    ck_assert_int_eq(tr_backend_copy_ahead(be, p, in, 4 * sizeof *in, &error), 0);
    ck_assert_int_eq(tr_backend_copy_ahead(be, p + 4, in + 4, 4 * sizeof *in, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, out, p, sizeof out, TR_COPY_TO_HOST, &error), 0);
    ck_assert_mem_eq(out, zeros, sizeof out);
    ck_assert_int_eq(tr_backend_join(be, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, out, p, sizeof out, TR_COPY_TO_HOST, &error), 0);
    ck_assert_mem_eq(out, in, sizeof out);
    in[0] = 42;   /* the source as it is when the copy lands */
    ck_assert_int_eq(tr_backend_copy_ahead(be, p, in, sizeof *in, &error), 0);
    ck_assert_int_eq(tr_backend_synchronize(be, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, out, p, sizeof *out, TR_COPY_TO_HOST, &error), 0);
    ck_assert(out[0] == 42);
    ck_assert_int_eq(tr_backend_join(be, &error), 0);   /* nothing left: a no-op */
    be->memory->free(p, be->memory->ctx);
    tr_backend_close(be);
}
END_TEST

/* One MATMUL y = a·b on instance be, in its own regions: y's bits, to the host. */
static void matmul_on(const struct tr_backend *be, const float *a, const float *b, float *y)
{
    struct tr_diag error = {0};
    float *da = region(be, 6), *db = region(be, 6), *dy = region(be, 4);
    ck_assert_int_eq(tr_backend_copy(be, da, a, 6 * sizeof *a, TR_COPY_TO_DEVICE, &error), 0);
    ck_assert_int_eq(tr_backend_copy(be, db, b, 6 * sizeof *b, TR_COPY_TO_DEVICE, &error), 0);
    struct tr_node n = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1};
    struct tr_kernel_args k = {.node = &n, .nin = 2, .nout = 1, .diag = &error};
    k.in[0] = (struct tr_tensor){.dtype = TR_F32, .rank = 2, .dim = {2, 3}, .data = da};
    k.in[1] = (struct tr_tensor){.dtype = TR_F32, .rank = 2, .dim = {3, 2}, .data = db};
    k.out[0] = (struct tr_tensor){.dtype = TR_F32, .rank = 2, .dim = {2, 2}, .data = dy};
    ck_assert_msg(tr_backend_run(be, &k) == 0, "%s", tr_diag_last(&error));
    ck_assert_int_eq(tr_backend_copy(be, y, dy, 4 * sizeof *y, TR_COPY_TO_HOST, &error), 0);
    be->memory->free(da, be->memory->ctx), be->memory->free(db, be->memory->ctx), be->memory->free(dy, be->memory->ctx);
}

/* One MATMUL through the fenced table: the kernel reads and writes fenced memory. */
START_TEST(kernels_run_inside)
{
    struct tr_backend *be = fenced();
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, y[4];
    matmul_on(be, a, b, y);
    float want[4] = {1 + 3, 2 + 3, 4 + 6, 5 + 6};
    ck_assert_mem_eq(y, want, sizeof want);
    tr_backend_close(be);
}
END_TEST

/* One process holds two fenced instances and the CPU at once (a device each): each runs a
 * kernel in its own regions with the same bits; one's copies ahead wait for its own join, not
 * the other's; and one's fence stays shut while the other's kernels and copies run. */
START_TEST(two_instances_at_once)
{
    struct tr_backend *one = fenced(), *two = fenced();
    ck_assert_ptr_ne(one->state, two->state);
    ck_assert_ptr_ne(one->memory, two->memory);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, y1[4], y2[4], y0[4];
    matmul_on(one, a, b, y1);
    matmul_on(two, a, b, y2);
    matmul_on(tr_backend_cpu(), a, b, y0);
    float want[4] = {1 + 3, 2 + 3, 4 + 6, 5 + 6};
    ck_assert_mem_eq(y1, want, sizeof want);
    ck_assert_mem_eq(y2, want, sizeof want);
    ck_assert_mem_eq(y0, want, sizeof want);

    struct tr_diag error = {0};
    float *p1 = region(one, 4), *p2 = region(two, 4), in[4] = {7, 8, 9, 10}, out[4], zeros[4] = {0};
    ck_assert_int_eq(tr_backend_copy_ahead(one, p1, in, sizeof in, &error), 0);
    ck_assert_int_eq(tr_backend_join(two, &error), 0);   /* the other's join lands nothing of one's */
    ck_assert_int_eq(tr_backend_copy(one, out, p1, sizeof out, TR_COPY_TO_HOST, &error), 0);
    ck_assert_mem_eq(out, zeros, sizeof out);
    ck_assert_int_eq(tr_backend_join(one, &error), 0);
    ck_assert_int_eq(tr_backend_copy(one, out, p1, sizeof out, TR_COPY_TO_HOST, &error), 0);
    ck_assert_mem_eq(out, in, sizeof out);
    ck_assert_int_eq(tr_backend_copy(two, p2, in, sizeof in, TR_COPY_TO_DEVICE, &error), 0);
    ck_assert_int_eq(error.n, 0);
    one->memory->free(p1, one->memory->ctx), two->memory->free(p2, two->memory->ctx);
    tr_backend_close(one);
    tr_backend_close(two);
}
END_TEST

/* While one instance's kernel runs, another instance's regions stay fenced: a kernel that
 * reads them (an input of the wrong device) is a crash. */
START_TEST(other_fence_stays_shut)
{
    struct tr_backend *one = fenced(), *two = fenced();
    float *mine = region(one, 4), *theirs = region(two, 4);
    struct tr_diag error = {0};
    struct tr_node n = {.op = TR_OP_ADD, .nin = 2, .nout = 1};
    struct tr_tensor t = {.dtype = TR_F32, .rank = 1, .dim = {4}};
    struct tr_kernel_args k = {.node = &n, .nin = 2, .nout = 1, .diag = &error};
    k.in[0] = t, k.in[1] = t, k.out[0] = t;
    k.in[0].data = mine, k.in[1].data = theirs, k.out[0].data = mine;
    tr_backend_run(one, &k);   /* SIGSEGV here: theirs is two's */
}
END_TEST
END_TEST

/* Two parameters (one without decay), AdamW and SGD with Nesterov momentum, three steps, the sum
 * of squares and the fp16 unscale: fenced and plain give the same bits. */
static void optimize(const struct tr_backend *be, int kind, float *params_out, double *sumsq, bool *finite)
{
    enum { N = 37 + 5 };
    struct tr_diag error = {0};
    float *params = region(be, N), *grads = region(be, N), *state = region(be, 2 * N), host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)(i % 7) / 3 - 1;
    tr_backend_copy(be, params, host, sizeof host, TR_COPY_TO_DEVICE, &error);
    struct tr_param_span spans[2] = {{0, 0, 0, 37, 1}, {37 * 4, 37 * 4, 37, 5, 0}};
    struct tr_optim_args a = {.params = (char *)params, .grads = (char *)grads, .state = state,
                              .nstate = tr_optimizers[kind].nstate, .total = N,
                              .spans = spans, .nspans = 2, .kind = kind, .lr = 1e-2, .weight_decay = 0.1,
                              .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .momentum = 0.9, .nesterov = 1,
                              .diag = &error};
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < N; i++)
            host[i] = (float)((i * t) % 11) / 5 - 1;
        tr_backend_copy(be, grads, host, sizeof host, TR_COPY_TO_DEVICE, &error);
        ck_assert_int_eq(tr_backend_grad_scale(be, &a, 0.5f, finite), 0);
        ck_assert(*finite);
        a.step = t;
        ck_assert_int_eq(tr_backend_optim_step(be, &a), 0);
    }
    ck_assert_int_eq(tr_backend_grad_sumsq(be, &a, sumsq), 0);
    float inf = 1.0f / 0.0f;
    tr_backend_copy(be, grads + 40, &inf, sizeof inf, TR_COPY_TO_DEVICE, &error);
    ck_assert_int_eq(tr_backend_grad_scale(be, &a, 0.5f, finite), 0);
    tr_backend_copy(be, params_out, params, N * sizeof *params, TR_COPY_TO_HOST, &error);
    be->memory->free(params, be->memory->ctx), be->memory->free(grads, be->memory->ctx);
    be->memory->free(state, be->memory->ctx);
}

START_TEST(optimizer_as_the_cpu)
{
    for (int kind = 0; kind < TR_OPT_COUNT; kind++) {
        float plain[42], on_fence[42];
        double s_plain, s_fenced;
        bool f_plain, f_fenced;
        optimize(tr_backend_cpu(), kind, plain, &s_plain, &f_plain);
        struct tr_backend *be = fenced();
        optimize(be, kind, on_fence, &s_fenced, &f_fenced);
        tr_backend_close(be);
        ck_assert_mem_eq(plain, on_fence, sizeof plain);
        ck_assert(s_plain == s_fenced && s_plain > 0);
        ck_assert(!f_plain && !f_fenced);   /* the Inf was seen */
        ck_assert(plain[0] != (float)(0 % 7) / 3 - 1);   /* the parameters moved */
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fenced");
    TCase *t = tcase_create("fenced");
    tcase_add_test_raise_signal(t, direct_touch_crashes, SIGSEGV);
    tcase_add_test(t, copies_and_fills_reach_it);
    tcase_add_test(t, copies_ahead_land_at_the_join);
    tcase_add_test(t, kernels_run_inside);
    tcase_add_test(t, optimizer_as_the_cpu);
    tcase_add_test(t, two_instances_at_once);
    tcase_add_test_raise_signal(t, other_fence_stays_shut, SIGSEGV);
    suite_add_tcase(s, t);
    return unit_run(s);
}
