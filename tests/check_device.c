/* Device profiles (src/plan/device_profile.c): every profile shipped in etc/devices.yaml loads
 * with sane values, the names are listed, and broken files — a key missing or mistyped, a
 * profile that is not there, a file that is not there — give the sentence that says which. */
#include "runner.h"
#include "unit.h"

#include "plan/device.h"
#include "graph/graph.h"
#include "plan/plan.h"

static const char *const shipped[] = {"a100-40gb", "a100-80gb", "h100-80gb", "h200", "rtx3090",
                                       "rtx4090", "t4", "l4", "cpu"};
#define NSHIPPED ((int)(sizeof shipped / sizeof shipped[0]))

/* $srcdir/etc/devices.yaml ("." when srcdir is unset); caller frees. */
static char *shipped_path(void)
{
    const char *src = getenv("srcdir");
    return tr_strdup_printf("%s/etc/devices.yaml", src && *src ? src : ".");
}

static struct tr_device load_shipped(const char *name)
{
    char *path = shipped_path();
    struct tr_device d;
    struct tr_diag err = {0};
    int rc = tr_device_profile(path, name, &d, &err);
    ck_assert_msg(rc == 0, "%s: rc %d: %s", name, rc, tr_diag_last(&err));
    ck_assert_str_eq(d.path.s, path);
    free(path);
    tr_diag_free(&err);
    return d;
}

START_TEST(every_profile_sane)
{
    struct tr_device d = load_shipped(shipped[_i]);
    const char *n = shipped[_i];
    ck_assert_str_eq(d.name, n);
    ck_assert_msg(d.memory > ((uint64_t)1 << 30), "%s: memory %llu", n, (unsigned long long)d.memory);
    ck_assert_msg(d.supports[0] && d.gemm_flops[0] > 1e11, "%s: fp32 %g", n, d.gemm_flops[0]);
    for (int p = 1; p < TR_NPRECISIONS; p++)
        if (d.supports[p] && d.kind == TR_DEVICE_CUDA)
            ck_assert_msg(d.gemm_flops[p] >= d.gemm_flops[0], "%s: precision %d at %g below fp32 %g",
                          n, p, d.gemm_flops[p], d.gemm_flops[0]);
    /* Between a DDR4 desktop (~50 GB/s) and HBM3e (~5 TB/s); a launch is µs, not ms or ns. */
    ck_assert_msg(d.bandwidth >= 1e10 && d.bandwidth <= 1e13, "%s: bandwidth %g", n, d.bandwidth);
    ck_assert_msg(d.node_seconds >= 1e-7 && d.node_seconds <= 1e-4, "%s: node %g", n, d.node_seconds);
    ck_assert_msg(strlen(d.source) > 20, "%s: source '%s'", n, d.source);
    ck_assert_msg(strlen(d.description) > 0, "%s: no description", n);
    if (d.kind == TR_DEVICE_CUDA) {
        ck_assert_msg(d.context_bytes > 0 && d.context_bytes < d.memory / 8, "%s: context %llu", n,
                      (unsigned long long)d.context_bytes);
        ck_assert_msg(d.library_workspace > 0, "%s: workspace", n);
        ck_assert_msg(d.widen_16bit == 0 && d.threads == 0, "%s: a GPU widens nothing", n);
        /* every GPU's link cited: PCIe 3.0 to 5.0 ×16, below its own memory's rate */
        ck_assert_msg(d.host_link >= 10e9 && d.host_link <= 64e9 && d.host_link < d.bandwidth, "%s: host link %g",
                      n, d.host_link);
    } else {
        ck_assert_msg(d.widen_16bit == 1 && d.threads > 0 && d.thread_bytes > 0, "%s: cpu", n);
        ck_assert_msg(d.context_bytes == 0, "%s: cpu context is measured, not profiled", n);
    }
}
END_TEST

/* One profile checked number by number: the units are converted (TFLOP/s, GB/s, µs, GiB). */
START_TEST(rtx3090_units)
{
    struct tr_device d = load_shipped("rtx3090");
    ck_assert_int_eq(d.kind, TR_DEVICE_CUDA);
    ck_assert_uint_eq(d.memory, 25769803776u);
    ck_assert_double_eq_tol(d.gemm_flops[0], 24.92e12, 1e6);
    ck_assert_double_eq_tol(d.gemm_flops[1], 49.7e12, 1e6);
    ck_assert_double_eq_tol(d.gemm_flops[2], 49.7e12, 1e6);
    ck_assert_double_eq_tol(d.bandwidth, 936e9, 1);
    ck_assert_double_eq_tol(d.node_seconds, 5e-6, 1e-12);
    ck_assert_uint_eq(d.context_bytes, 512u << 20);
    ck_assert_uint_eq(d.library_workspace, 32u << 20);
    ck_assert(d.supports[1] && d.supports[2]);
}
END_TEST

START_TEST(t4_has_no_bf16)
{
    struct tr_device d = load_shipped("t4");
    ck_assert(!d.supports[1] && d.supports[2]);
    ck_assert_double_eq(d.gemm_flops[1], 0);
}
END_TEST

START_TEST(names_listed)
{
    char *path = shipped_path();
    char names[512];
    ck_assert_int_eq(tr_device_profile_names(path, names, sizeof names), 0);
    ck_assert_str_eq(names, "a100-40gb, a100-80gb, h100-80gb, h200, rtx3090, rtx4090, t4, l4, cpu");
    char small[16];
    ck_assert_int_eq(tr_device_profile_names(path, small, sizeof small), TR_EINVAL);
    ck_assert_msg(strncmp(small, "a100-40gb", 9) == 0 && strlen(small) < sizeof small, "'%s'", small);
    free(path);
}
END_TEST

START_TEST(unknown_name_lists_names)
{
    char *path = shipped_path();
    struct tr_device d = {.memory = 7};
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_device_profile(path, "v100", &d, &err), TR_EINVAL);
    char *want = tr_strdup_printf("no device profile 'v100' in %s; there are: a100-40gb, a100-80gb, "
                                  "h100-80gb, h200, rtx3090, rtx4090, t4, l4, cpu", path);
    ck_assert_str_eq(tr_diag_last(&err), want);
    ck_assert_uint_eq(d.memory, 7);   /* untouched on error */
    free(want);
    free(path);
    tr_diag_free(&err);
}
END_TEST

START_TEST(missing_file_is_eio)
{
    struct tr_diag err = {0};
    struct tr_device d;
    ck_assert_int_eq(tr_device_profile("/nonexistent/devices.yaml", "t4", &d, &err), TR_EIO);
    ck_assert_str_eq(tr_diag_last(&err), "cannot read /nonexistent/devices.yaml: No such file or directory");
    char names[64];
    ck_assert_int_eq(tr_device_profile_names("/nonexistent/devices.yaml", names, sizeof names), TR_EIO);
    ck_assert_str_eq(names, "");
    /* A folder opens, but is no file (libyaml would say only "input error"). */
    ck_assert_int_eq(tr_device_profile("/", "t4", &d, &err), TR_EIO);
    ck_assert_str_eq(tr_diag_last(&err), "cannot read /: not a regular file (a directory)");
    tr_diag_free(&err);
}
END_TEST

/* A valid profile, line by line; each broken case replaces one line (or drops it: ""). */
static const char *const good[] = {
    "gpu:",
    "  kind: cuda",
    "  description: a test GPU",
    "  memory: 8GiB",
    "  supports: {fp32: true, bf16: true, fp16: true}",
    "  gemm_tflops:",
    "    fp32: 10",
    "    bf16: 100",
    "    fp16: 100",
    "  bandwidth_gbs: 500",
    "  node_us: 5",
    "  context: 512MiB",
    "  library_workspace: 32MiB",
    "  widen_16bit: 0",
    "  source: made up for a test",
};
#define NGOOD ((int)(sizeof good / sizeof good[0]))

struct broken {
    int line;              /* 0-based index into good[] replaced; -1: the whole text */
    const char *text;      /* the replacement */
    const char *name;      /* the profile asked for */
    const char *want;      /* in the message */
};

static const struct broken cases[] = {
    {3, "", "gpu", ":2: device profile 'gpu': key 'memory' is missing"},
    {3, "  memory: lots", "gpu", ":4: device profile 'gpu': key 'memory' must be a size"},
    {3, "  memory: {total: 8GiB}", "gpu", ":4: device profile 'gpu': key 'memory' must be a single value"},
    {3, "  memory: 0", "gpu", "key 'memory' must be above 0"},
    {1, "  kind: gpu", "gpu", ":2: device profile 'gpu': key 'kind' must be cuda or cpu, not 'gpu'"},
    {2, "", "gpu", "key 'description' is missing"},
    {4, "  supports: {fp32: true, bf16: maybe, fp16: true}", "gpu",
     ":5: device profile 'gpu': key 'supports.bf16' must be true or false, not 'maybe'"},
    {4, "  supports: {fp32: false, bf16: true, fp16: true}", "gpu", "key 'supports.fp32' must be true"},
    {4, "  supports: yes", "gpu", ":5: device profile 'gpu': key 'supports' must be a mapping"},
    {4, "", "gpu", "key 'supports' is missing"},
    {7, "", "gpu", ":7: device profile 'gpu': key 'gemm_tflops.bf16' is missing"},
    {7, "    bf16: fast", "gpu", ":8: device profile 'gpu': key 'gemm_tflops.bf16' must be a number"},
    {7, "    bf16: -3", "gpu", "key 'gemm_tflops.bf16' must be a number ≥ 0, not '-3'"},
    {7, "    bf16: 0", "gpu", "key 'gemm_tflops.bf16' must be above 0 when supports.bf16 is true"},
    {9, "  bandwidth_gbs: 1e999", "gpu", "key 'bandwidth_gbs' must be a number"},
    {9, "", "gpu", "key 'bandwidth_gbs' is missing"},
    {9, "  bandwidth_gbs: 500\n  host_link_gbs: 0", "gpu", ":11: device profile 'gpu': key 'host_link_gbs' must be above 0"},
    {9, "  bandwidth_gbs: 500\n  host_link_gbs: fast", "gpu", "key 'host_link_gbs' must be a number ≥ 0, not 'fast'"},
    {9, "  bandwidth_gbs: 500\n  host_link_gbs: {up: 3}", "gpu", "key 'host_link_gbs' must be a single value"},
    {10, "  node_us: [5]", "gpu", "key 'node_us' must be a single value, not a list"},
    {13, "  widen_16bit: 2", "gpu", "key 'widen_16bit' must be 0 or 1"},
    {11, "  context: 1.5", "gpu", "key 'context' must be a size"},
    {14, "", "gpu", "key 'source' is missing"},
    {14, "  source: \"\"", "gpu", "key 'source' must be a non-empty string"},
    {1, "  kind: cpu", "gpu", "key 'threads' is missing"},
    {0, "gpu: 12\nother:", "gpu", ":1: device profile 'gpu' must be a mapping of keys"},
    {-1, "- a\n- b\n", "gpu", ":1: device profiles must be a mapping of names to profiles"},
    {-1, "gpu: {kind: cuda\n", "gpu", ":2:"},
    {-1, "", "gpu", "device profiles must be a mapping"},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static char *broken_text(const struct broken *c)
{
    if (c->line < 0)
        return tr_strdup(c->text);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < NGOOD; i++) {
        const char *line = i == c->line ? c->text : good[i];
        if (*line)
            fprintf(f, "%s\n", line);
    }
    fclose(f);
    return text;
}

START_TEST(good_profile_loads)
{
    char *dir = unit_mkdtemp();
    struct broken none = {NGOOD, "", "gpu", ""};   /* replaces no line */
    char *text = broken_text(&none);
    char *path = unit_write_in(dir, "devices.yaml", text);
    struct tr_device d;
    struct tr_diag err = {0};
    ck_assert_msg(tr_device_profile(path, "gpu", &d, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_uint_eq(d.memory, (uint64_t)8 << 30);
    ck_assert_double_eq_tol(d.gemm_flops[1], 100e12, 1);
    ck_assert_str_eq(d.source, "made up for a test");
    ck_assert_double_eq(d.host_link, 0);   /* none in the profile: a GPU's PCIe 4.0 ×16 */
    ck_assert_double_eq_tol(tr_device_host_link(&d), 25e9, 1);
    free(text);
    free(path);
    /* host_link_gbs, where a profile has it, is the link's rate */
    struct broken link = {9, "  bandwidth_gbs: 500\n  host_link_gbs: 12.6", "gpu", ""};
    text = broken_text(&link);
    path = unit_write_in(dir, "devices.yaml", text);
    ck_assert_msg(tr_device_profile(path, "gpu", &d, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_double_eq_tol(tr_device_host_link(&d), 12.6e9, 1);
    free(text);
    free(path);
    unit_rmtree(dir);
    free(dir);
    tr_diag_free(&err);
}
END_TEST

START_TEST(broken_profile_named)
{
    const struct broken *c = &cases[_i];
    char *dir = unit_mkdtemp();
    char *text = broken_text(c);
    char *path = unit_write_in(dir, "devices.yaml", text);
    struct tr_device d;
    struct tr_diag err = {0};
    int rc = tr_device_profile(path, c->name, &d, &err);
    ck_assert_msg(rc == TR_EINVAL, "case %d: rc %d: %s\n%s", _i, rc, tr_diag_last(&err), text);
    ck_assert_msg(strncmp(tr_diag_last(&err), path, strlen(path)) == 0 && strstr(tr_diag_last(&err), c->want),
                  "case %d: got '%s', want '%s' after the path", _i, tr_diag_last(&err), c->want);
    free(text);
    free(path);
    unit_rmtree(dir);
    free(dir);
    tr_diag_free(&err);
}
END_TEST

/* The sentence is whole (no buffer to cut it); with no diag the code alone comes back. */
START_TEST(small_error_buffer)
{
    char *path = shipped_path();
    struct tr_device d;
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_device_profile(path, "v100", &d, &err), TR_EINVAL);
    ck_assert_int_eq(strncmp(tr_diag_last(&err), "no devi", 7), 0);
    ck_assert_int_eq(tr_device_profile(path, "v100", &d, NULL), TR_EINVAL);
    tr_diag_free(&err);
    free(path);
}
END_TEST

/* ---- the calibration's rule, curves and cache form (device_kernels.c) ---------------------- */

/* A series with three rounds together around its median settles, whatever busy spells slowed
 * the others (the median drops them); rounds strewn over a range, or too few, do not. */
START_TEST(stability_rule)
{
    struct tr_calibration_rule rule = {3, 8, 0.05};
    double spread;
    static const double settled[] = {2.0, 1.3, 1.00, 1.02, 1.01};   /* median 1.02: 1.00–1.02 */
    ck_assert(tr_calibration_stable(settled, 5, &rule, &spread));
    ck_assert_double_eq_tol(spread, 0.02 / 1.02, 1e-9);
    static const double spell[] = {1.00, 1.02, 1.01, 2.30, 1.00};   /* a busy spell in one round */
    ck_assert(tr_calibration_stable(spell, 5, &rule, &spread));
    ck_assert_double_eq_tol(spread, 0.01 / 1.01, 1e-9);
    static const double strewn[] = {1.00, 1.30, 1.10, 1.20, 1.40};   /* no three together */
    ck_assert(!tr_calibration_stable(strewn, 5, &rule, &spread));
    ck_assert_double_eq_tol(spread, 0.20 / 1.20, 1e-9);
    static const double split[] = {1.00, 1.50, 1.01, 1.52, 1.02, 1.51};   /* two machines' speeds */
    ck_assert(!tr_calibration_stable(split, 6, &rule, &spread));   /* median 1.26 between them */
    ck_assert(!tr_calibration_stable(settled, 2, &rule, &spread));   /* fewer rounds than the window */
    ck_assert(isinf(spread));
    static const double zeros[] = {0, 0, 0};   /* nothing measured is not a measurement */
    ck_assert(!tr_calibration_stable(zeros, 3, &rule, &spread));
    rule.tolerance = 0.5;   /* a wider tolerance takes the strewn rounds */
    ck_assert(tr_calibration_stable(strewn, 5, &rule, &spread));
}
END_TEST

/* A curve is read on the line between its points, the first segment's line below them (never
 * below a quarter of the first point) and the last point's rate above. */
START_TEST(curve_reading)
{
    struct tr_cost_curve c = {3, {100, 1000, 10000}, {2e-6, 5e-6, 40e-6}};
    ck_assert_double_eq_tol(tr_cost_curve_seconds(&c, 100), 2e-6, 1e-15);
    ck_assert_double_eq_tol(tr_cost_curve_seconds(&c, 550), 3.5e-6, 1e-15);
    ck_assert_double_eq_tol(tr_cost_curve_seconds(&c, 20000), 80e-6, 1e-15);
    ck_assert_double_eq_tol(tr_cost_curve_seconds(&c, 10), 2e-6 - 3e-6 * 90 / 900, 1e-15);
    ck_assert(tr_cost_curve_seconds(&c, 0) > 0);
    struct tr_cost_curve none = {0};
    ck_assert(tr_cost_curve_seconds(&none, 5) < 0);
}
END_TEST

/* The kernel costs survive the cache's JSON; a curve out of order or a point without time is
 * refused, so a damaged cache is measured again rather than believed. */
START_TEST(kernel_costs_round_trip)
{
    struct tr_kernel_costs k = {.measured = true, .exec_node_seconds = 1.5e-6, .optimizer_byte_seconds = {1e-9, 2e-9},
                                .sumsq_byte_seconds = 3e-10, .fill_byte_seconds = 4e-10};
    k.curve[TR_OP_LAYERNORM][1] = (struct tr_cost_curve){2, {1e5, 1e6}, {1e-5, 6e-5}};
    k.curve[TR_COST_CLASSES - 1][0] = (struct tr_cost_curve){3, {1e6, 1e8, 1e9}, {1e-5, 6e-4, 5e-3}};
    json_t *j = tr_kernel_costs_json(&k);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(j, "curves"), "layernorm.bf16"));
    ck_assert_ptr_nonnull(json_object_get(json_object_get(j, "curves"), "matmul.tn.large.fp32"));
    struct tr_kernel_costs back;
    ck_assert_int_eq(tr_kernel_costs_from_json(j, &back), 0);
    ck_assert(back.measured);
    ck_assert_int_eq(tr_kernel_classes_measured(&back), 2);
    ck_assert_mem_eq(&back.curve[TR_OP_LAYERNORM][1], &k.curve[TR_OP_LAYERNORM][1], sizeof(struct tr_cost_curve));
    ck_assert_mem_eq(&back.curve[TR_COST_CLASSES - 1][0], &k.curve[TR_COST_CLASSES - 1][0],
                     sizeof(struct tr_cost_curve));
    ck_assert_double_eq(back.optimizer_byte_seconds[1], 2e-9);
    ck_assert_double_eq(back.exec_node_seconds, 1.5e-6);
    json_t *points = json_object_get(json_object_get(j, "curves"), "layernorm.bf16");
    json_array_append_new(points, json_pack("[ff]", 10.0, 1e-6));   /* work falling */
    ck_assert_int_eq(tr_kernel_costs_from_json(j, &back), -1);
    json_array_remove(points, 2);
    json_array_set_new(points, 0, json_pack("[ff]", 1e5, 0.0));   /* no time */
    ck_assert_int_eq(tr_kernel_costs_from_json(j, &back), -1);
    ck_assert_int_eq(tr_kernel_costs_from_json(NULL, &back), -1);
    json_decref(j);
}
END_TEST

/* fp16 on a CPU that computes bf16 natively runs on widened f32 copies: its nodes cost fp32's
 * curves plus the copies, so it is never forecast as fast as bf16 (the planner chose fp16 for
 * BERT-base so, and its step ran at fp32's speed); where both are widened, fp16 reads bf16's. */
static double linear_step(enum tr_dtype low, const struct tr_device *dev)
{
    struct tr_graph g;
    tr_graph_init(&g);
    int x = tr_input(&g, "x", TR_F32, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(256)});
    int w = tr_param(&g, "w", TR_F32, 2, (struct tr_dim[]){tr_dim_const(256), tr_dim_const(256)});
    tr_graph_set_loss(&g, tr_sum(&g, tr_linear(&g, x, w, -1), -1));
    ck_assert_int_eq(low == TR_F32 ? 0 : tr_amp(&g, low, NULL, 0, false), 0);
    double s = tr_plan_step_seconds(&g, 512, 1, dev, NULL, NULL);
    tr_graph_free(&g);
    return s;
}

START_TEST(fp16_widened_where_bf16_is_native)
{
    struct tr_device dev = {.kind = TR_DEVICE_CPU, .bandwidth = 1e10, .gemm_flops = {1e11, 1e11, 1e11},
                            .node_seconds = 1e-6, .widen_16bit = 1};
    dev.kernels.measured = true;
    for (int c = TR_NOPS; c < TR_COST_CLASSES; c++) {   /* every GEMM class: bf16 4× fp32's rate */
        dev.kernels.curve[c][0] = (struct tr_cost_curve){2, {1e6, 1e9}, {1e-5, 1e-2}};
        dev.kernels.curve[c][1] = (struct tr_cost_curve){2, {1e6, 1e9}, {0.25e-5, 0.25e-2}};
    }
    double bf16 = linear_step(TR_BF16, &dev), fp16 = linear_step(TR_F16, &dev);
    ck_assert_double_eq_tol(fp16, bf16, 1e-12);
    dev.fp16_widened = true;
    double widened = linear_step(TR_F16, &dev), fp32 = linear_step(TR_F32, &dev);
    ck_assert_msg(widened > fp32 && fp32 > 2 * bf16, "fp16 %g s, fp32 %g s, bf16 %g s", widened, fp32, bf16);
    ck_assert_double_eq_tol(linear_step(TR_BF16, &dev), bf16, 1e-12);
}
END_TEST

/* A node's precision by its first 16-bit input: a loss's backward takes the f32 dloss first. */
START_TEST(precision_by_the_16bit_input)
{
    struct tr_tensor in[3] = {{.dtype = TR_F32}, {.dtype = TR_BF16}, {.dtype = TR_F32}};
    ck_assert_int_eq(tr_cost_precision(in, 3), TR_PREC_BF16);
    in[1].dtype = TR_F16;
    ck_assert_int_eq(tr_cost_precision(in, 3), TR_PREC_FP16);
    in[1].dtype = TR_I32;
    ck_assert_int_eq(tr_cost_precision(in, 3), TR_PREC_FP32);
    ck_assert_int_eq(tr_cost_precision(in, 0), TR_PREC_FP32);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("profiles");
    tcase_add_loop_test(tc, every_profile_sane, 0, NSHIPPED);
    tcase_add_test(tc, rtx3090_units);
    tcase_add_test(tc, t4_has_no_bf16);
    tcase_add_test(tc, names_listed);
    tcase_add_test(tc, unknown_name_lists_names);
    tcase_add_test(tc, missing_file_is_eio);
    tcase_add_test(tc, good_profile_loads);
    tcase_add_loop_test(tc, broken_profile_named, 0, NCASES);
    tcase_add_test(tc, small_error_buffer);
    suite_add_tcase(s, tc);
    TCase *cal = tcase_create("calibration");
    tcase_add_test(cal, stability_rule);
    tcase_add_test(cal, curve_reading);
    tcase_add_test(cal, kernel_costs_round_trip);
    tcase_add_test(cal, fp16_widened_where_bf16_is_native);
    tcase_add_test(cal, precision_by_the_16bit_input);
    suite_add_tcase(s, cal);
    return unit_run(s);
}
