/* The trainer's arithmetic: AdamW and SGD against their definitions computed here in double, Lion
 * against steps worked by hand, the learning-rate schedule, gradient clipping, and the
 * non-finite gradient check. */
#include "runner.h"

#include <check.h>
#include <math.h>
#include <fcntl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "graph/memplan.h"
#include "recipe/recipe.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "train/scaler.h"

/* A graph of one parameter w [n] (and its gradient), planned, with regions from calloc. */
struct one_param {
    struct tr_graph g;
    struct tr_memplan plan;
    int w;
    char *params, *grads;
    float *state;
};

static void one_param(struct one_param *o, int64_t n, int no_decay)
{
    tr_graph_init(&o->g);
    o->w = tr_param(&o->g, "w", TR_F32, 1, (struct tr_dim[]){tr_dim_const(n)});
    tr_param_init(&o->g, o->w, TR_INIT_ZERO, 0, no_decay);
    tr_graph_set_loss(&o->g, tr_sum(&o->g, o->w, -1));
    ck_assert_int_ge(tr_autodiff(&o->g), 0);
    int *schedule = malloc((size_t)o->g.nnodes * sizeof(int));
    for (int i = 0; i < o->g.nnodes; i++)
        schedule[i] = i;
    tr_memplan_build(&o->plan, &o->g, schedule, o->g.nnodes, 1, 1, &o->g.loss, 1, NULL, false);
    free(schedule);
    o->params = calloc(o->plan.region_bytes[TR_PARAM] + 64, 1);
    o->grads = calloc(o->plan.region_bytes[TR_GRAD] + 64, 1);
    o->state = calloc((size_t)(3 * n + 16), sizeof(float));
}

static void one_param_free(struct one_param *o)
{
    free(o->params), free(o->grads), free(o->state);
    tr_memplan_free(&o->plan);
    tr_graph_free(&o->g);
}

static float *P(struct one_param *o) { return (float *)(o->params + o->plan.offset[o->w]); }
static float *G(struct one_param *o) { return (float *)(o->grads + o->plan.offset[o->g.values[o->w].grad]); }

static struct tr_recipe recipe_with(int optimizer, double wd, int nesterov)
{
    struct tr_recipe r;
    tr_recipe_init(&r);
    r.train.optimizer.name = optimizer;
    r.train.optimizer.lr = 0.01;
    r.train.optimizer.weight_decay = wd;
    r.train.optimizer.nesterov = nesterov;
    return r;
}

/* Three AdamW steps against the formulas in double: p ← p(1 − lr·wd), then the bias-corrected
 * moment step; f32 arithmetic keeps within a few ulps of it. */
START_TEST(adamw_matches_definition)
{
    for (int no_decay = 0; no_decay < 2; no_decay++) {
        struct one_param o;
        one_param(&o, 5, no_decay);
        struct tr_recipe r = recipe_with(TR_OPT_ADAMW, 0.1, 0);
        struct tr_optim opt;
        tr_optim_init(&opt, &r, &o.g, &o.plan, tr_backend_cpu(), o.params, o.grads, o.state, NULL, 0);
        ck_assert_uint_eq(opt.state_bytes, 2 * 5 * sizeof(float));
        double p[5], m[5] = {0}, v[5] = {0}, lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
        double wd = no_decay ? 0 : 0.1;
        for (int i = 0; i < 5; i++)
            p[i] = P(&o)[i] = (float)(0.5 - 0.3 * i);
        for (int t = 1; t <= 3; t++) {
            for (int i = 0; i < 5; i++) {
                G(&o)[i] = (float)(0.2 * i - 0.3 + 0.1 * t);
                double g = G(&o)[i];
                p[i] *= 1 - lr * wd;
                m[i] = b1 * m[i] + (1 - b1) * g;
                v[i] = b2 * v[i] + (1 - b2) * g * g;
                p[i] -= lr * (m[i] / (1 - pow(b1, t))) / (sqrt(v[i] / (1 - pow(b2, t))) + eps);
            }
            tr_optim_step(&opt, lr, &(struct tr_diag){0});
            for (int i = 0; i < 5; i++)
                ck_assert_msg(fabs(P(&o)[i] - p[i]) <= 1e-6 * (1 + fabs(p[i])), "step %d elem %d: %.9g vs %.9g",
                              t, i, P(&o)[i], p[i]);
        }
        tr_optim_free(&opt);
        tr_recipe_free(&r);
        one_param_free(&o);
    }
}
END_TEST

/* SGD with momentum, plain and Nesterov, with weight decay as an L2 term (PyTorch's rule). */
START_TEST(sgd_matches_definition)
{
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        struct one_param o;
        one_param(&o, 4, 0);
        struct tr_recipe r = recipe_with(TR_OPT_SGD, 0.05, nesterov);
        struct tr_optim opt;
        tr_optim_init(&opt, &r, &o.g, &o.plan, tr_backend_cpu(), o.params, o.grads, o.state, NULL, 0);
        double p[4], buf[4] = {0}, lr = 0.01, mu = 0.9, wd = 0.05;
        for (int i = 0; i < 4; i++)
            p[i] = P(&o)[i] = (float)(1.0 - 0.5 * i);
        for (int t = 1; t <= 3; t++) {
            for (int i = 0; i < 4; i++) {
                G(&o)[i] = (float)(0.1 * i * t - 0.2);
                double d = G(&o)[i] + wd * p[i];
                buf[i] = t == 1 ? d : mu * buf[i] + d;
                d = nesterov ? d + mu * buf[i] : buf[i];
                p[i] -= lr * d;
            }
            tr_optim_step(&opt, lr, &(struct tr_diag){0});
            for (int i = 0; i < 4; i++)
                ck_assert_msg(fabs(P(&o)[i] - p[i]) <= 1e-6 * (1 + fabs(p[i])), "nesterov %d step %d elem %d",
                              nesterov, t, i);
        }
        tr_optim_free(&opt);
        tr_recipe_free(&r);
        one_param_free(&o);
    }
}
END_TEST

/* Three Lion steps against values worked by hand from its definition (Chen et al. 2023):
 *   p ← p·(1 − lr·wd);  c = β1·m + (1 − β1)·g;  p ← p − lr·sign(c);  m ← β2·m + (1 − β2)·g
 * with lr 0.1, wd 0.5 (so the decay factor is 0.95), β = (0.9, 0.99), sign(0) = 0; the middle
 * element's gradient is 0 throughout, so only the decay moves it. */
START_TEST(lion_matches_hand_computed_steps)
{
    struct one_param o;
    one_param(&o, 3, 0);
    struct tr_recipe r = recipe_with(TR_OPT_LION, 0.5, 0);
    r.train.optimizer.betas.v[0] = 0.9, r.train.optimizer.betas.v[1] = 0.99;
    struct tr_optim opt;
    tr_optim_init(&opt, &r, &o.g, &o.plan, tr_backend_cpu(), o.params, o.grads, o.state, NULL, 0);
    ck_assert_uint_eq(opt.state_bytes, 1 * 3 * sizeof(float));   /* one state tensor: m */
    static const float start[3] = {1.0f, -0.5f, 0.25f};
    static const float grads[3][3] = {{0.5f, 0, -2}, {-0.01f, 0, 1}, {-0.1f, 0, 0}};
    /* step 1: c = 0.1·g = (0.05, 0, −0.2), sign (1, 0, −1); m = 0.01·g = (0.005, 0, −0.02)
     * step 2: c = (0.0045 − 0.001, 0, −0.018 + 0.1) = (0.0035, 0, 0.082), sign (1, 0, 1);
     *         m = (0.00495 − 0.0001, 0, −0.0198 + 0.01) = (0.00485, 0, −0.0098)
     * step 3: c = (0.004365 − 0.01, 0, −0.00882) = (−0.005635, 0, −0.00882), sign (−1, 0, −1);
     *         m = (0.0048015 − 0.001, 0, −0.009702) = (0.0038015, 0, −0.009702) */
    static const double params[3][3] = {{0.95 - 0.1, -0.475, 0.2375 + 0.1},
                                        {0.85 * 0.95 - 0.1, -0.45125, 0.3375 * 0.95 - 0.1},
                                        {0.7075 * 0.95 + 0.1, -0.4286875, 0.220625 * 0.95 + 0.1}};
    static const double moments[3][3] = {{0.005, 0, -0.02}, {0.00485, 0, -0.0098}, {0.0038015, 0, -0.009702}};
    memcpy(P(&o), start, sizeof start);
    for (int t = 0; t < 3; t++) {
        memcpy(G(&o), grads[t], sizeof grads[t]);
        ck_assert_int_eq(tr_optim_step(&opt, 0.1, &(struct tr_diag){0}), 0);
        for (int i = 0; i < 3; i++) {
            ck_assert_msg(fabs(P(&o)[i] - params[t][i]) <= 1e-6, "step %d elem %d: p %.9g, by hand %.9g", t + 1, i,
                          P(&o)[i], params[t][i]);
            ck_assert_msg(fabs(o.state[i] - moments[t][i]) <= 1e-7, "step %d elem %d: m %.9g, by hand %.9g", t + 1, i,
                          o.state[i], moments[t][i]);
        }
    }
    tr_optim_free(&opt);
    tr_recipe_free(&r);
    one_param_free(&o);
}
END_TEST

START_TEST(schedules)
{
    struct tr_recipe r;
    tr_recipe_init(&r);
    r.train.optimizer.lr = 1.0;
    r.train.schedule.warmup = (struct tr_warmup){.fraction = 0.1};
    r.train.schedule.name = TR_SCHED_LINEAR;
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 5, 100), 0.5, 1e-12);    /* warm-up: 5/10 */
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 10, 100), 1.0, 1e-12);
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 55, 100), 0.5, 1e-12);   /* halfway down */
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 100, 100), 0.0, 1e-12);
    r.train.schedule.name = TR_SCHED_COSINE;
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 55, 100), 0.5, 1e-12);
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 32.5 + 0.5, 100), 0.5 * (1 + cos(M_PI * 23.0 / 90)), 1e-12);
    r.train.schedule.name = TR_SCHED_CONSTANT;
    r.train.schedule.warmup = (struct tr_warmup){.is_steps = true, .steps = 4};
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 1, 100), 0.25, 1e-12);
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 80, 100), 1.0, 1e-12);
    r.train.schedule.warmup = (struct tr_warmup){.is_steps = true, .steps = 0};
    ck_assert_double_eq_tol(tr_schedule_lr(&r, 1, 100), 1.0, 1e-12);     /* no warm-up, no 0/0 */
    tr_recipe_free(&r);
}
END_TEST

/* Clipping: the norm before it; past the bound the next update reads the gradients scaled to
 * it — the bits of an update on gradients scaled in memory — while memory keeps them as they
 * are; the factor holds for one update only. */
START_TEST(clipping_and_nonfinite)
{
    struct one_param o, ref;
    one_param(&o, 2, 0), one_param(&ref, 2, 0);
    struct tr_recipe r = recipe_with(TR_OPT_ADAMW, 0.1, 0);
    struct tr_optim opt, opt_ref;
    tr_optim_init(&opt, &r, &o.g, &o.plan, tr_backend_cpu(), o.params, o.grads, o.state, NULL, 0);
    tr_optim_init(&opt_ref, &r, &ref.g, &ref.plan, tr_backend_cpu(), ref.params, ref.grads, ref.state, NULL, 0);
    G(&o)[0] = 3, G(&o)[1] = 4;
    ck_assert_double_eq_tol(tr_grad_clip(&opt, 10, &(struct tr_diag){0}), 5, 1e-12);   /* under the bound */
    ck_assert_float_eq(opt.grad_factor, 1);
    ck_assert_double_eq_tol(tr_grad_clip(&opt, 1, &(struct tr_diag){0}), 5, 1e-12);
    ck_assert_float_eq(opt.grad_factor, (float)(1 / (5 + 1e-6)));
    for (int t = 1; t <= 2; t++) {   /* step 1 clipped, step 2 (no clip asked) not */
        for (int i = 0; i < 2; i++)
            G(&ref)[i] = t == 1 ? G(&o)[i] * opt.grad_factor : G(&o)[i];
        ck_assert_int_eq(tr_optim_step(&opt, 0.01, &(struct tr_diag){0}), 0);
        ck_assert_int_eq(tr_optim_step(&opt_ref, 0.01, &(struct tr_diag){0}), 0);
        ck_assert(G(&o)[0] == 3 && G(&o)[1] == 4);   /* memory as it was */
        ck_assert_float_eq(opt.grad_factor, 1);
        ck_assert_mem_eq(P(&o), P(&ref), 2 * sizeof(float));
        ck_assert_mem_eq(o.state, ref.state, 4 * sizeof(float));
    }
    ck_assert_int_eq(tr_grad_first_nonfinite(&opt), -1);
    G(&o)[1] = NAN;
    ck_assert_int_eq(tr_grad_first_nonfinite(&opt), o.w);
    ck_assert(isnan(tr_grad_clip(&opt, 1, &(struct tr_diag){0})));
    ck_assert_float_eq(opt.grad_factor, 1);   /* a NaN norm scales nothing: the caller stops the run */
    G(&o)[1] = INFINITY;
    ck_assert(isinf(tr_grad_clip(&opt, 1, &(struct tr_diag){0})));
    tr_optim_free(&opt), tr_optim_free(&opt_ref);
    tr_recipe_free(&r);
    one_param_free(&o), one_param_free(&ref);
}
END_TEST

/* The gradients' sum of squares: within 1e-13 of a long double sum, the same bits on 1, 2 and 3
 * threads, over parameters of sizes around the pieces' (16,384 values) and its batches'. */
START_TEST(sumsq_same_bits_on_any_threads)
{
    const int64_t sizes[] = {5, 16383, 16384, 16385, 1, 4200000, 77};
    enum { N = sizeof sizes / sizeof sizes[0] };
    struct tr_param_span spans[N];
    int64_t total = 0;
    for (int k = 0; k < N; k++)
        spans[k] = (struct tr_param_span){.grad = (size_t)total * sizeof(float), .numel = sizes[k]}, total += sizes[k];
    float *g = malloc((size_t)total * sizeof *g);
    long double want = 0;
    uint32_t x = 12345;
    for (int64_t i = 0; i < total; i++) {
        x = x * 1664525u + 1013904223u;
        g[i] = (float)((double)(x >> 8) / (1 << 24) - 0.5) * (i % 7 == 0 ? 1e3f : 1e-2f);
        want += (long double)g[i] * g[i];
    }
    struct tr_optim_args a = {.grads = (char *)g, .spans = spans, .nspans = N, .total = total};
    double first = 0;
    int threads = omp_get_max_threads();
    for (int t = 1; t <= 3; t++) {
        double sum = -1;
        omp_set_num_threads(t);
        ck_assert_int_eq(tr_backend_grad_sumsq(tr_backend_cpu(), &a, &sum), 0);
        ck_assert_msg(fabsl(sum - want) <= 1e-13L * want, "%.17g vs %.17Lg", sum, want);
        if (t == 1)
            first = sum;
        ck_assert_mem_eq(&sum, &first, sizeof sum);
    }
    omp_set_num_threads(threads);
    free(g);
}
END_TEST

/* Unscaling multiplies every gradient and says whether all are finite, in one pass. */
START_TEST(unscale_checks_overflow)
{
    struct one_param o;
    one_param(&o, 3, 0);
    struct tr_recipe r = recipe_with(TR_OPT_SGD, 0, 0);
    struct tr_optim opt;
    tr_optim_init(&opt, &r, &o.g, &o.plan, tr_backend_cpu(), o.params, o.grads, o.state, NULL, 0);
    G(&o)[0] = 1024, G(&o)[1] = -512, G(&o)[2] = 2;
    ck_assert(tr_grad_unscale(&opt, 1.0f / 1024, &(struct tr_diag){0}));
    ck_assert(G(&o)[0] == 1 && G(&o)[1] == -0.5f && G(&o)[2] == 1.0f / 512);
    G(&o)[2] = INFINITY;
    ck_assert(!tr_grad_unscale(&opt, 0.5f, &(struct tr_diag){0}));
    G(&o)[2] = NAN;
    ck_assert(!tr_grad_unscale(&opt, 0.5f, &(struct tr_diag){0}));
    tr_optim_free(&opt);
    tr_recipe_free(&r);
    one_param_free(&o);
}
END_TEST

/* PyTorch's GradScaler rules with DeepSpeed's hysteresis and minimum: growth after `interval`
 * clean steps, an overflow skips and (after `hysteresis` in a row) backs off; below the
 * minimum the scaler gives up. The state survives a checkpoint's line. */
START_TEST(loss_scaler)
{
    struct tr_recipe r;
    tr_recipe_init(&r);
    r.optimize.loss_scale.init = 1024, r.optimize.loss_scale.interval = 3, r.optimize.loss_scale.hysteresis = 2;
    r.optimize.loss_scale.min = 200;
    struct tr_scaler s;
    tr_scaler_init(&s, &r, false);
    ck_assert(s.scale == 1 && tr_scaler_update(&s, true) == TR_SCALER_STEP);   /* off: never skips */
    tr_scaler_init(&s, &r, true);
    ck_assert(s.scale == 1024);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(tr_scaler_update(&s, false), TR_SCALER_STEP);
    ck_assert(s.scale == 1024);
    ck_assert_int_eq(tr_scaler_update(&s, false), TR_SCALER_STEP);
    ck_assert(s.scale == 2048);                                  /* ×2 after 3 clean steps */
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);
    ck_assert(s.scale == 2048);                                  /* hysteresis 2: not yet */
    ck_assert_int_eq(tr_scaler_update(&s, false), TR_SCALER_STEP);   /* a clean step resets it */
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);
    ck_assert(s.scale == 1024 && s.skipped == 3);
    char line[128];
    tr_scaler_format(&s, line, sizeof line);
    struct tr_scaler back;
    tr_scaler_init(&back, &r, true);
    back.scale = 1;
    ck_assert_int_eq(tr_scaler_parse(&back, line), 0);
    ck_assert(back.scale == s.scale && back.skipped == 3 && back.clean == s.clean && back.overflows == s.overflows);
    ck_assert_int_eq(tr_scaler_parse(&back, "early_stop best=1"), -1);
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);      /* 512 */
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);      /* 256 */
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_SKIP);
    ck_assert_int_eq(tr_scaler_update(&s, true), TR_SCALER_COLLAPSED); /* 128 < 200 */
    tr_recipe_free(&r);
}
END_TEST

/* The checkpoint reader lists every file of the folder: 5,001 of them (the reader once stopped
 * at 4,096, and a warm start loaded an older step), newest first, and only names trainrun
 * writes ("step-N.safetensors", N in decimal without sign or leading zero). Empty files: each
 * is tried and passed over, which is what the count and the order show. */
START_TEST(checkpoint_reader_lists_every_file)
{
    char dir[] = "/tmp/trainrun-check-train.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    for (int step = 1; step <= 5001; step++) {
        snprintf(path, sizeof path, "%s/step-%d.safetensors", dir, step);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        ck_assert_int_ge(fd, 0);
        close(fd);
    }
    static const char *const not_ours[] = {"step-007.safetensors", "step-+9000.safetensors", "step--5.safetensors",
                                           "step-9000.safetensors.damaged", "step-.safetensors", "step-9000.json"};
    for (size_t i = 0; i < sizeof not_ours / sizeof *not_ours; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, not_ours[i]);
        close(open(path, O_WRONLY | O_CREAT | O_EXCL, 0666));
    }
    struct tr_checkpoint c;
    struct tr_diag skipped = {0}, d = {0};
    ck_assert_int_eq(tr_checkpoint_open_newest(dir, NULL, &c, &skipped, &d), 0);
    ck_assert(!c.found);
    ck_assert_int_eq(c.files, 5001);
    ck_assert_int_eq(skipped.n, 5001);
    snprintf(path, sizeof path, "%s/step-5001.safetensors", dir);
    ck_assert_msg(strstr(skipped.items[0].message, path), "first tried: %s", skipped.items[0].message);
    snprintf(path, sizeof path, "%s/step-1.safetensors", dir);
    ck_assert_msg(strstr(skipped.items[5000].message, path), "last tried: %s", skipped.items[5000].message);
    tr_checkpoint_close(&c);
    tr_diag_free(&skipped), tr_diag_free(&d);
    char *rm = tr_strdup_printf("rm -rf '%s'", dir);
    ck_assert_int_eq(system(rm), 0);
    free(rm);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("optimizer");
    tcase_add_test(tc, adamw_matches_definition);
    tcase_add_test(tc, sgd_matches_definition);
    tcase_add_test(tc, lion_matches_hand_computed_steps);
    tcase_add_test(tc, schedules);
    tcase_add_test(tc, clipping_and_nonfinite);
    tcase_add_test(tc, sumsq_same_bits_on_any_threads);
    tcase_add_test(tc, unscale_checks_overflow);
    tcase_add_test(tc, loss_scaler);
    suite_add_tcase(s, tc);
    TCase *files = tcase_create("checkpoint files");
    tcase_add_test(files, checkpoint_reader_lists_every_file);
    suite_add_tcase(s, files);
    return unit_run(s);
}
