/* Traces (src/report/trace.c): the profile: schedule is torch.profiler.schedule's rule, and a
 * written trace has PyTorch's header, one line with "rank": N, its events by start with each
 * op inside its step, an op's graph node, shapes, dtypes, FLOPs and bytes, and the file name
 * tensorboard_trace_handler gives. tests/trace.sh has a real reader open a run's. */
#include "runner.h"
#include "unit.h"

#include <dirent.h>
#include <jansson.h>
#include <string.h>

#include "graph/graph.h"
#include "report/trace.h"

static enum tr_trace_action at(struct tr_trace_schedule s, int64_t i)
{
    return tr_trace_action(&s, i);
}

/* skip_first 2, wait 1, warmup 1, active 2, repeat 2, step by step as torch.profiler.schedule
 * gives it; active 3 alone: three steps and one file; repeat 0: cycles without end; active 0:
 * nothing, whatever else is set. */
START_TEST(schedule_rule)
{
    enum { N = TR_TRACE_NONE, W = TR_TRACE_WARMUP, R = TR_TRACE_RECORD, S = TR_TRACE_RECORD_AND_SAVE };
    static const int want[] = {N, N, N, W, R, S, N, W, R, S, N, N, N};
    struct tr_trace_schedule s = {2, 1, 1, 2, 2};
    for (int i = 0; i < (int)(sizeof want / sizeof want[0]); i++)
        ck_assert_msg((int)at(s, i) == want[i], "step %d: %d, want %d", i, at(s, i), want[i]);
    struct tr_trace_schedule three = {0, 0, 0, 3, 1};
    ck_assert_int_eq(at(three, 0), R);
    ck_assert_int_eq(at(three, 2), S);
    ck_assert_int_eq(at(three, 3), N);
    ck_assert_int_eq(at(three, 1000), N);
    struct tr_trace_schedule forever = {0, 1, 0, 1, 0};
    ck_assert_int_eq(at(forever, 1000), N);
    ck_assert_int_eq(at(forever, 1001), S);
    struct tr_trace_schedule off = {0, 1, 1, 0, 0};
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(at(off, i), N);
}
END_TEST

/* The only file in dir, as JSON; its name into name. */
static json_t *only_trace(const char *dir, char *name, size_t size)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            snprintf(name, size, "%s", e->d_name), files++;
    closedir(d);
    ck_assert_int_eq(files, 1);
    char *path = tr_strdup_printf("%s/%s", dir, name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", path, je.text);
    FILE *f = fopen(path, "r");
    char line[512];
    bool rank_line = false;
    while (fgets(line, sizeof line, f))
        rank_line |= strstr(line, "\"rank\": 3,") != NULL;
    fclose(f);
    ck_assert_msg(rank_line, "no line with \"rank\": 3 (HTA reads a file's rank by it)");
    free(path);
    return j;
}

/* x [B, 8] · w [16, 8]ᵀ then ReLU: two ops in a step, a data wait before them; written out of
 * order, read back in order with the step first. */
START_TEST(written_as_pytorch_does)
{
    struct tr_graph g;
    tr_graph_init(&g);
    int x = tr_input(&g, "x", TR_BF16, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(8)});
    int w = tr_param(&g, "w", TR_BF16, 2, (struct tr_dim[]){tr_dim_const(16), tr_dim_const(8)});
    int y = tr_matmul(&g, x, w, 0, 1);
    tr_relu(&g, y);
    ck_assert_int_eq(g.error, 0);
    struct tr_trace_info info = {.g = &g, .rank = 3, .world_size = 4, .backend = "mpi", .name = "a \"b\"",
                                 .pid = 77, .tid = 78, .origin = 100.0, .origin_ns = 5000000000};
    struct tr_exec_event ev[] = {
        {100.000200, 0.000030, 0, NULL, 1, 4, 1, 0, 1024},            /* relu */
        {100.000010, 0.000300, 0, "ProfilerStep#", TR_EVENT_SPAN, 0, 0, 9, 0},
        {100.000100, 0.000100, 0, NULL, 0, 4, 1, 0, 1024},            /* matmul */
        {100.000010, 0.000050, 0, "data wait", TR_EVENT_SPAN, 0, 0, 9, 0},
        {100.000400, 0, 0, "resident set bytes", TR_EVENT_COUNTER, 0, 0, 0, 123456},
    };
    char *dir = unit_mkdtemp(), *traces = tr_strdup_printf("%s/traces", dir), name[256];
    struct tr_path written;
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_trace_write(traces, &info, ev, 5, &written, &err), 0);
    json_t *j = only_trace(traces, name, sizeof name);
    ck_assert_msg(strstr(name, "_77.") && strstr(name, ".pt.trace.json"),
                  "file name %s", name);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "schemaVersion")), 1);
    ck_assert(json_is_array(json_object_get(j, "deviceProperties")));
    json_t *dist = json_object_get(j, "distributedInfo");
    ck_assert_int_eq(json_integer_value(json_object_get(dist, "world_size")), 4);
    ck_assert_str_eq(json_string_value(json_object_get(dist, "backend")), "mpi");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "baseTimeNanoseconds")), 5000000000);
    json_t *events = json_object_get(j, "traceEvents"), *e;
    size_t i;
    const char *names[8];
    double ts[8], dur[8];
    int n = 0, arena = 0, rss = 0;
    json_array_foreach(events, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (!strcmp(ph, "C")) {   /* counters: the arena's where it changes, and the trainer's */
            const char *what = json_string_value(json_object_get(e, "name"));
            json_int_t bytes = json_integer_value(json_object_get(json_object_get(e, "args"), "bytes"));
            arena += !strcmp(what, "arena live bytes") && bytes == 1024;
            rss += !strcmp(what, "resident set bytes") && bytes == 123456;
        }
        if (strcmp(ph, "X"))   /* metadata (the names) and counters */
            continue;
        ck_assert_int_eq(json_integer_value(json_object_get(e, "pid")), 77);
        ck_assert_int_eq(json_integer_value(json_object_get(e, "tid")), 78);
        names[n] = json_string_value(json_object_get(e, "name"));
        ts[n] = json_real_value(json_object_get(e, "ts")), dur[n] = json_real_value(json_object_get(e, "dur"));
        n++;
    }
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(arena, 1);   /* 1024 at the matmul, and no second point at the same value */
    ck_assert_int_eq(rss, 1);
    static const char *const order[] = {"ProfilerStep#9", "data wait", "matmul", "relu"};
    for (int k = 0; k < 4; k++) {
        ck_assert_str_eq(names[k], order[k]);
        ck_assert(ts[k] >= ts[0] && ts[k] + dur[k] <= ts[0] + dur[0] + 1e-9);   /* inside the step */
    }
    ck_assert_double_eq_tol(ts[0], 10.0, 1e-6);
    ck_assert_double_eq_tol(dur[2], 100.0, 1e-6);
    json_t *mm = json_array_get(events, 3 + 2);   /* after 3 metadata events, the step and the wait */
    ck_assert_str_eq(json_string_value(json_object_get(mm, "cat")), "cpu_op");
    json_t *args = json_object_get(mm, "args");
    ck_assert_int_eq(json_integer_value(json_object_get(args, "node")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(args, "phase")), "forward");
    json_t *dims = json_object_get(args, "Input Dims");
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(dims, 0), 0)), 4);   /* B = 4 */
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(dims, 1), 0)), 16);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(args, "Input type"), 1)), "c10::BFloat16");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(args, "Output type"), 0)), "c10::BFloat16");
    ck_assert_double_eq(json_number_value(json_object_get(args, "flops")), 2.0 * 4 * 16 * 8);
    ck_assert_double_eq(json_number_value(json_object_get(args, "bytes")), 2 * (4 * 8 + 16 * 8 + 4 * 16));
    json_t *process = json_array_get(events, 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(process, "args"), "name")), "a \"b\"");
    json_decref(j);
    unit_rmtree(dir);
    free(dir), free(traces);
    tr_graph_free(&g);
}
END_TEST

/* A node that ran on a device: its cpu_op (the launch and the wait, on the host) and its kernel
 * (the device's own time, pid the device, tid its stream) with the same correlation, the kernel
 * ending where the host saw it end; a CPU node has none, and a trace without any names no GPU. */
START_TEST(device_kernels)
{
    struct tr_graph g;
    tr_graph_init(&g);
    int x = tr_input(&g, "x", TR_F32, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(8)});
    tr_relu(&g, x);
    ck_assert_int_eq(g.error, 0);
    struct tr_trace_info info = {.g = &g, .rank = 3, .world_size = 4, .pid = 77, .tid = 78, .device = 2, .origin = 100.0};
    struct tr_exec_event ev[] = {
        {100.000100, 0.000050, 0.000020, NULL, 0, 4, 1, 0, 0},   /* 50 µs on the host, 20 on the device */
        {100.000200, 0.000010, 0.000030, NULL, 0, 4, 1, 0, 0},   /* the device's longer: clamped to the host's */
    };
    for (int gpu = 1; gpu >= 0; gpu--) {
        char *dir = unit_mkdtemp(), name[256];
        struct tr_path written;
        struct tr_diag err = {0};
        if (!gpu)
            ev[0].device_seconds = ev[1].device_seconds = 0;
        ck_assert_int_eq(tr_trace_write(dir, &info, ev, 2, &written, &err), 0);
        json_t *j = only_trace(dir, name, sizeof name), *e, *launch[2] = {0};
        size_t i;
        int kernels = 0, gpu_names = 0;
        json_array_foreach(json_object_get(j, "traceEvents"), i, e) {
            const char *cat = json_string_value(json_object_get(e, "cat")), *ph = json_string_value(json_object_get(e, "ph"));
            json_t *args = json_object_get(e, "args");
            if (!strcmp(ph, "M"))
                gpu_names += json_integer_value(json_object_get(e, "pid")) == 2;
            if (cat && !strcmp(cat, "cpu_op"))
                launch[kernels] = e;
            if (!cat || strcmp(cat, "kernel"))
                continue;
            ck_assert_int_eq(json_integer_value(json_object_get(e, "pid")), 2);
            ck_assert_int_eq(json_integer_value(json_object_get(e, "tid")), 1);
            ck_assert_int_eq(json_integer_value(json_object_get(args, "device")), 2);
            json_t *host = launch[kernels];
            ck_assert_ptr_nonnull(host);
            ck_assert_int_eq(json_integer_value(json_object_get(args, "correlation")),
                             json_integer_value(json_object_get(json_object_get(host, "args"), "External id")));
            double ts = json_real_value(json_object_get(e, "ts")), dur = json_real_value(json_object_get(e, "dur"));
            double host_end = json_real_value(json_object_get(host, "ts")) + json_real_value(json_object_get(host, "dur"));
            ck_assert_double_eq_tol(dur, kernels ? 10.0 : 20.0, 1e-6);
            ck_assert_double_eq_tol(ts + dur, host_end, 1e-6);
            kernels++;
        }
        ck_assert_int_eq(kernels, gpu ? 2 : 0);
        ck_assert_int_eq(gpu_names, gpu ? 3 : 0);   /* process name and labels, the stream's name */
        json_decref(j);
        unit_rmtree(dir);
        free(dir);
    }
    tr_graph_free(&g);
}
END_TEST

/* A folder that cannot be made: TR_EIO and a sentence naming it. */
START_TEST(unwritable_folder)
{
    struct tr_graph g;
    tr_graph_init(&g);
    char *dir = unit_mkdtemp(), *file = tr_strdup_printf("%s/file", dir), *under = tr_strdup_printf("%s/traces", file);
    unit_write(file, "x");
    struct tr_trace_info info = {.g = &g, .world_size = 1, .pid = 1, .tid = 1};
    struct tr_path written;
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_trace_write(under, &info, NULL, 0, &written, &err), TR_EIO);
    ck_assert_ptr_nonnull(strstr(tr_diag_last(&err), under));
    tr_diag_free(&err);
    unit_rmtree(dir);
    free(dir), free(file), free(under);
    tr_graph_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, schedule_rule);
    tcase_add_test(tc, written_as_pytorch_does);
    tcase_add_test(tc, device_kernels);
    tcase_add_test(tc, unwritable_folder);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
