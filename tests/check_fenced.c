/* The fenced CPU backend (backend.h: tr_backend_cpu_fenced), the stand-in for a device the host
 * cannot see that tests/device.sh trains on: its regions refuse a direct touch (SIGSEGV), open
 * for copies, fills, kernels and the optimizer's passes, and give the plain CPU's bits; and the
 * plain CPU's memory and optimizer entries themselves. */
#include "runner.h"

#include <signal.h>
#include <string.h>

#include "backend/backend.h"
#include "recipe/optimizers.h"
#include "recipe/recipe.h"

static float *region(const struct tr_backend *be, size_t n)
{
    float *p = be->memory->alloc(n * sizeof *p, be->memory->ctx);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* A direct write into a fenced region is a crash: what would corrupt or fault on a GPU. */
START_TEST(direct_touch_crashes)
{
    float *p = region(tr_backend_cpu_fenced(), 16);
    p[3] = 1;   /* SIGSEGV here */
}
END_TEST

START_TEST(copies_and_fills_reach_it)
{
    const struct tr_backend *be = tr_backend_cpu_fenced();
    char error[TR_KERNEL_ERROR_MAX];
    float *p = region(be, 1000), in[1000], out[1000], zeros[1000] = {0};
    ck_assert(!be->host_visible);
    ck_assert_int_eq(be->copy(out, p, sizeof out, TR_COPY_TO_HOST, error), 0);
    ck_assert_mem_eq(out, zeros, sizeof out);   /* regions start zeroed */
    for (int i = 0; i < 1000; i++)
        in[i] = (float)i / 7;
    ck_assert_int_eq(be->copy(p, in, sizeof in, TR_COPY_TO_DEVICE, error), 0);
    ck_assert_int_eq(be->copy(p + 500, p, 100 * sizeof *p, TR_COPY_ON_DEVICE, error), 0);
    ck_assert_int_eq(be->copy(out, p, sizeof out, TR_COPY_TO_HOST, error), 0);
    ck_assert_mem_eq(out, in, 500 * sizeof *in);
    ck_assert_mem_eq(out + 500, in, 100 * sizeof *in);
    ck_assert_int_eq(be->fill(p, 0, 10 * sizeof *p, error), 0);
    ck_assert_int_eq(be->copy(out, p, sizeof out, TR_COPY_TO_HOST, error), 0);
    ck_assert_mem_eq(out, zeros, 10 * sizeof *out);
    ck_assert(out[10] == in[10]);
    be->memory->free(p, be->memory->ctx);
}
END_TEST

/* Copies ahead land at the join, not before, as a device's second queue promises nothing
 * sooner: a commit that skipped its join would read the old staging. synchronize lands them
 * too. The plain CPU has none: its inputs are written in place. */
START_TEST(copies_ahead_land_at_the_join)
{
    const struct tr_backend *be = tr_backend_cpu_fenced();
    char error[TR_KERNEL_ERROR_MAX];
    float *p = region(be, 8), in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8], zeros[8] = {0};
    ck_assert(tr_backend_cpu()->copy_ahead == NULL && tr_backend_cpu()->join == NULL);
    ck_assert_int_eq(be->copy_ahead(p, in, 4 * sizeof *in, error), 0);
    ck_assert_int_eq(be->copy_ahead(p + 4, in + 4, 4 * sizeof *in, error), 0);
    ck_assert_int_eq(be->copy(out, p, sizeof out, TR_COPY_TO_HOST, error), 0);
    ck_assert_mem_eq(out, zeros, sizeof out);
    ck_assert_int_eq(be->join(error), 0);
    ck_assert_int_eq(be->copy(out, p, sizeof out, TR_COPY_TO_HOST, error), 0);
    ck_assert_mem_eq(out, in, sizeof out);
    in[0] = 42;   /* the source as it is when the copy lands */
    ck_assert_int_eq(be->copy_ahead(p, in, sizeof *in, error), 0);
    ck_assert_int_eq(be->synchronize(error), 0);
    ck_assert_int_eq(be->copy(out, p, sizeof *out, TR_COPY_TO_HOST, error), 0);
    ck_assert(out[0] == 42);
    ck_assert_int_eq(be->join(error), 0);   /* nothing left: a no-op */
    be->memory->free(p, be->memory->ctx);
}
END_TEST

/* One MATMUL through the fenced table: the kernel reads and writes fenced memory. */
START_TEST(kernels_run_inside)
{
    const struct tr_backend *be = tr_backend_cpu_fenced();
    char error[TR_KERNEL_ERROR_MAX] = "";
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, y[4];
    float *da = region(be, 6), *db = region(be, 6), *dy = region(be, 4);
    be->copy(da, a, sizeof a, TR_COPY_TO_DEVICE, error), be->copy(db, b, sizeof b, TR_COPY_TO_DEVICE, error);
    struct tr_node n = {.op = TR_OP_MATMUL, .nin = 2, .nout = 1};
    struct tr_kernel_args k = {.node = &n, .nin = 2, .nout = 1, .error = error};
    k.in[0] = (struct tr_tensor){.dtype = TR_F32, .rank = 2, .dim = {2, 3}, .data = da};
    k.in[1] = (struct tr_tensor){.dtype = TR_F32, .rank = 2, .dim = {3, 2}, .data = db};
    k.out[0] = (struct tr_tensor){.dtype = TR_F32, .rank = 2, .dim = {2, 2}, .data = dy};
    ck_assert_msg(tr_backend_run(be, &k) == 0, "%s", error);
    be->copy(y, dy, sizeof y, TR_COPY_TO_HOST, error);
    float want[4] = {1 + 3, 2 + 3, 4 + 6, 5 + 6};
    ck_assert_mem_eq(y, want, sizeof want);
    be->memory->free(da, NULL), be->memory->free(db, NULL), be->memory->free(dy, NULL);
}
END_TEST

/* Two parameters (one without decay), AdamW and SGD with Nesterov momentum, three steps, the sum
 * of squares and the fp16 unscale: fenced and plain give the same bits. */
static void optimize(const struct tr_backend *be, int kind, float *params_out, double *sumsq, bool *finite)
{
    enum { N = 37 + 5 };
    char error[TR_KERNEL_ERROR_MAX];
    float *params = region(be, N), *grads = region(be, N), *state = region(be, 2 * N), host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)(i % 7) / 3 - 1;
    be->copy(params, host, sizeof host, TR_COPY_TO_DEVICE, error);
    struct tr_param_span spans[2] = {{0, 0, 0, 37, 1}, {37 * 4, 37 * 4, 37, 5, 0}};
    struct tr_optim_args a = {.params = (char *)params, .grads = (char *)grads, .state = state,
                              .nstate = tr_optimizers[kind].nstate, .total = N,
                              .spans = spans, .nspans = 2, .kind = kind, .lr = 1e-2, .weight_decay = 0.1,
                              .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .momentum = 0.9, .nesterov = 1,
                              .error = error};
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < N; i++)
            host[i] = (float)((i * t) % 11) / 5 - 1;
        be->copy(grads, host, sizeof host, TR_COPY_TO_DEVICE, error);
        ck_assert_int_eq(be->grad_scale(&a, 0.5f, finite), 0);
        ck_assert(*finite);
        a.step = t;
        ck_assert_int_eq(be->optim_step(&a), 0);
    }
    ck_assert_int_eq(be->grad_sumsq(&a, sumsq), 0);
    float inf = 1.0f / 0.0f;
    be->copy(grads + 40, &inf, sizeof inf, TR_COPY_TO_DEVICE, error);
    ck_assert_int_eq(be->grad_scale(&a, 0.5f, finite), 0);
    be->copy(params_out, params, N * sizeof *params, TR_COPY_TO_HOST, error);
    be->memory->free(params, NULL), be->memory->free(grads, NULL), be->memory->free(state, NULL);
}

START_TEST(optimizer_as_the_cpu)
{
    for (int kind = 0; kind < TR_OPT_COUNT; kind++) {
        float plain[42], fenced[42];
        double s_plain, s_fenced;
        bool f_plain, f_fenced;
        optimize(tr_backend_cpu(), kind, plain, &s_plain, &f_plain);
        optimize(tr_backend_cpu_fenced(), kind, fenced, &s_fenced, &f_fenced);
        ck_assert_mem_eq(plain, fenced, sizeof plain);
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
    suite_add_tcase(s, t);
    return unit_run(s);
}
