/* The run report (src/report/run_report.c, report_pages.c) on a real mlp run's folder,
 * tests/fixtures/run-mlp: report.json's documented fields and values, the Markdown checklist,
 * a self-contained HTML page with its text escaped, and the warnings a person must not miss
 * (loss spikes, data-bound steps, skipped fp16 steps, memory) raised exactly when due. */
#include "runner.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/monitor.h"
#include "report/prometheus.h"
#include "report/run_report.h"
#include "report/svg.h"

static const char *const fixture_files[] = {"recipe.yaml", "metrics.jsonl", "plan.json", "log.txt", "run.json"};

static char *slurp(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = 0;
    fclose(f);
    return text;
}

static void put(const char *dir, const char *name, const char *text, const char *mode)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, mode);
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A scratch copy of the fixture run folder (all of it, or with no metrics when bare). */
static void make_run(char dir[64], int bare)
{
    snprintf(dir, 64, "/tmp/check_report_run.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *srcdir = getenv("srcdir");
    char from[4200];
    snprintf(from, sizeof from, "%s/tests/fixtures/run-mlp", srcdir ? srcdir : ".");
    for (size_t i = 0; i < sizeof fixture_files / sizeof fixture_files[0]; i++) {
        if (bare && !strcmp(fixture_files[i], "metrics.jsonl"))
            continue;
        char *text = slurp(from, fixture_files[i]);
        ck_assert_msg(text != NULL, "fixture %s/%s", from, fixture_files[i]);
        put(dir, fixture_files[i], text, "w");
        free(text);
    }
}

static void remove_run(const char *dir)
{
    static const char *const names[] = {"recipe.yaml", "metrics.jsonl", "plan.json", "log.txt", "run.json",
                                        "report.json", "report.md", "report.html"};
    char path[4200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    ck_assert_int_eq(rmdir(dir), 0);
}

static void render(const char *dir, const struct tr_run_outcome *outcome)
{
    struct tr_diag err = {0};
    ck_assert_msg(tr_run_report_render(dir, outcome, &err) == 0, "%s", tr_diag_last(&err));
    tr_diag_free(&err);
}

static json_t *report_json(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/report.json", dir);
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    ck_assert_msg(j != NULL, "report.json: %s", jerr.text);
    return j;
}

/* The kinds of report.json's warnings, comma-joined. */
static void warning_kinds(const char *dir, char *out, size_t size)
{
    json_t *j = report_json(dir), *w;
    size_t i;
    *out = 0;
    json_array_foreach(json_object_get(j, "warnings"), i, w)
        snprintf(out + strlen(out), size - strlen(out), "%s,", json_string_value(json_object_get(w, "kind")));
    json_decref(j);
}

START_TEST(json_fields)
{
    char dir[64];
    make_run(dir, 0);
    render(dir, &(struct tr_run_outcome){.exit_code = 0, .seconds = 12.5});
    json_t *j = report_json(dir), *plan = json_object_get(j, "plan");
    static const char *const fields[] = {"schema_version", "run", "name", "arch", "dataset", "status",
                                         "exit_code", "duration_seconds", "started", "steps", "key_metric", "final",
                                         "best", "throughput", "plan", "checklist", "time", "leak",
                                         "memory_timeline", "environment", "warnings", "series"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        ck_assert_msg(json_object_get(j, fields[i]) != NULL, "report.json has no %s", fields[i]);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "schema_version")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "mlp");
    ck_assert_str_eq(json_string_value(json_object_get(j, "dataset")), "digits");
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "finished");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 0);
    ck_assert_double_eq(json_number_value(json_object_get(j, "duration_seconds")), 12.5);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "steps")), 200);
    json_t *final = json_object_get(j, "final"), *best = json_object_get(json_object_get(j, "best"), "eval/accuracy");
    ck_assert_double_eq_tol(json_number_value(json_object_get(final, "test/accuracy")), 0.95543175487465182, 1e-15);
    ck_assert_double_eq_tol(json_number_value(json_object_get(final, "train/loss")), 0.10215412825345993, 1e-15);
    ck_assert_double_eq_tol(json_number_value(json_object_get(best, "value")), 0.97222222222222221, 1e-15);
    ck_assert_int_eq(json_integer_value(json_object_get(best, "step")), 200);
    best = json_object_get(json_object_get(j, "best"), "eval/loss");
    ck_assert_double_eq_tol(json_number_value(json_object_get(best, "value")), 0.19724751975801255, 1e-15);
    ck_assert_str_eq(json_string_value(json_object_get(plan, "precision")), "fp32");
    ck_assert_str_eq(json_string_value(json_object_get(plan, "amp")), "off");
    ck_assert_int_eq(json_integer_value(json_object_get(plan, "micro")), 64);
    ck_assert_int_eq(json_integer_value(json_object_get(plan, "accumulation")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(plan, "data_workers")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(plan, "budget_bytes")), 536870912);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(plan, "checkpointing"), "mode")), "none");
    ck_assert_uint_eq(json_array_size(json_object_get(j, "checklist")), 9);   /* + the environment */
    ck_assert_uint_eq(json_array_size(json_object_get(j, "warnings")), 0);
    /* Version 2: the key metric, the data the planner saw, where the time went, the leak
     * check, one step's memory, the environment and every series. */
    json_t *key = json_object_get(j, "key_metric");
    ck_assert_str_eq(json_string_value(json_object_get(key, "name")), "test/accuracy");
    ck_assert_str_eq(json_string_value(json_object_get(key, "better")), "higher");
    ck_assert_double_eq_tol(json_number_value(json_object_get(key, "value")), 0.95543175487465182, 1e-15);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(plan, "data"), "train_samples")), 1258);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(plan, "device"), "name")), "cpu");
    json_t *time = json_object_get(j, "time");
    double wall = json_number_value(json_object_get(time, "wall")), parts = 0;
    static const char *const causes[] = {"data", "forward", "backward", "recompute", "optimizer", "evaluation",
                                         "checkpointing", "other"};
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++) {
        ck_assert_msg(json_is_number(json_object_get(time, causes[i])), "time.%s", causes[i]);
        ck_assert_double_ge(json_number_value(json_object_get(time, causes[i])), 0);
        parts += json_number_value(json_object_get(time, causes[i]));
    }
    ck_assert_double_gt(json_number_value(json_object_get(time, "forward")), 0);
    ck_assert_double_eq_tol(parts, wall, 1e-9 * wall + 1e-12);   /* other is what the rest leave */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "leak"), "verdict")), "constant");
    json_t *tl = json_object_get(j, "memory_timeline");
    ck_assert_int_gt(json_integer_value(json_object_get(tl, "nodes")), 0);
    ck_assert_int_gt(json_integer_value(json_object_get(tl, "peak_bytes")), 0);
    ck_assert_uint_gt(json_array_size(json_object_get(tl, "largest")), 0);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(json_object_get(j, "environment"), "host")));
    json_t *loss = json_object_get(json_object_get(j, "series"), "train/loss");
    ck_assert_uint_eq(json_array_size(loss), 20);
    ck_assert_double_eq(json_number_value(json_array_get(json_array_get(loss, 19), 0)), 200);
    ck_assert_double_eq_tol(json_number_value(json_array_get(json_array_get(loss, 19), 1)), 0.10215412825345993, 1e-15);
    json_decref(j);
    remove_run(dir);
}
END_TEST

START_TEST(markdown_checklist)
{
    char dir[64];
    make_run(dir, 0);
    render(dir, &(struct tr_run_outcome){.exit_code = 0, .seconds = 1});
    char *md = slurp(dir, "report.md");
    static const char *const rows[] = {"| AMP | off (fp32) |", "| Data loader | 1 worker, prefetch 2, pin_memory off | ", "; data.pin_memory: auto, the CPU trains from the batches where they are: nothing to pin |",
                                       "| Environment | 2 threads, BLAS kernels not recorded, 0 GPUs visible | this run's run.json "
                                       "records no settings |",
                                       "| Checkpointing | off | optimize.checkpointing: auto, off: the footprint 181.33 MiB fits the "
                                       "budget 512.00 MiB without recomputing; checkpointing would bring it to 181.26 MiB but "
                                       "cost 0.000834 s a step instead of 0.000784 s |", "| Dynamic batching | off |",
                                       "| Accumulation | 64 × 1 |", "| Memory | regions 1.63 MiB predicted",
                                       "| Step time | 0.000784 s predicted, 0.0019 s measured | the measured median step is +142% off",
                                       "# mlp: finished", "exit code 0", "| test/accuracy | 95.54 % |", "| eval/accuracy | 97.22 % | 97.22 % at step 200 |",
                                       "| Leak check | constant after warm-up |", "## Time", "| forward |",
                                       "## Memory over one step", "^ backward from node", "## Environment",
                                       "Key metric: test/accuracy 95.54 % (higher is better)", "No warnings."};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        ck_assert_msg(strstr(md, rows[i]) != NULL, "report.md lacks '%s':\n%s", rows[i], md);
    free(md);
    remove_run(dir);
}
END_TEST

START_TEST(html_self_contained)
{
    char dir[64];
    make_run(dir, 0);
    render(dir, &(struct tr_run_outcome){.exit_code = 0, .seconds = 1});
    char *html = slurp(dir, "report.html");
    int plots = 0;
    for (const char *p = html; (p = strstr(p, "<svg")); p++)
        plots++;
    ck_assert_int_ge(plots, 4);   /* loss, learning rate, throughput, memory; no loss scale in fp32 */
    ck_assert_ptr_null(strstr(html, "http"));
    ck_assert_ptr_null(strstr(html, "src="));
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_nonnull(strstr(html, "<meta name=\"viewport\""));
    ck_assert_ptr_nonnull(strstr(html, "<polyline"));
    ck_assert_ptr_nonnull(strstr(html, ">eval</text>"));   /* the loss plot's legend */
    free(html);
    remove_run(dir);
}
END_TEST

START_TEST(html_escapes_text)
{
    char dir[64];
    make_run(dir, 0);
    put(dir, "recipe.yaml", "name: \"a<b>&'c\"  # override\n", "w");
    render(dir, NULL);
    char *html = slurp(dir, "report.html");
    ck_assert_ptr_nonnull(strstr(html, "a&lt;b&gt;&amp;&#39;c"));
    ck_assert_ptr_null(strstr(html, "a<b>"));
    free(html);
    char buf[64] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    tr_html_escape(f, "<x a=\"1\">&");
    fclose(f);
    ck_assert_str_eq(buf, "&lt;x a=&quot;1&quot;&gt;&amp;");
    remove_run(dir);
}
END_TEST

/* Metrics of n steady train lines (loss 1, the given wait), then the line extra. */
static void steady_metrics(const char *dir, int n, double wait, const char *extra)
{
    put(dir, "metrics.jsonl", "", "w");
    char line[200];
    for (int i = 1; i <= n; i++) {
        snprintf(line, sizeof line, "{\"step\":%d,\"train/loss\":%g,\"data/wait_fraction\":%g}\n", 10 * i,
                 1.0 + 0.01 * (i % 3), wait);
        put(dir, "metrics.jsonl", line, "a");
    }
    put(dir, "metrics.jsonl", extra, "a");
}

START_TEST(loss_spike_flagged)
{
    char dir[64], kinds[200];
    make_run(dir, 0);
    steady_metrics(dir, 30, 0.05, "{\"step\":310,\"train/loss\":2.9}\n");   /* under 3 × the median */
    render(dir, NULL);
    warning_kinds(dir, kinds, sizeof kinds);
    ck_assert_str_eq(kinds, "");
    steady_metrics(dir, 30, 0.05, "{\"step\":310,\"train/loss\":4.5}\n{\"step\":320,\"train/loss\":1.0}\n");
    render(dir, NULL);
    warning_kinds(dir, kinds, sizeof kinds);
    ck_assert_str_eq(kinds, "loss-spike,");
    char *md = slurp(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "at step 310"));
    free(md);
    remove_run(dir);
}
END_TEST

START_TEST(data_bound_flagged)
{
    char dir[64], kinds[200];
    make_run(dir, 0);
    steady_metrics(dir, 10, 0.19, "");
    render(dir, NULL);
    warning_kinds(dir, kinds, sizeof kinds);
    ck_assert_str_eq(kinds, "");
    steady_metrics(dir, 10, 0.35, "");
    render(dir, NULL);
    warning_kinds(dir, kinds, sizeof kinds);
    ck_assert_str_eq(kinds, "data-bound,");
    char *html = slurp(dir, "report.html");
    ck_assert_ptr_nonnull(strstr(html, "data-bound: the steps waited for data 35%"));
    free(html);
    remove_run(dir);
}
END_TEST

START_TEST(skipped_steps_and_memory_flagged)
{
    char dir[64], kinds[200];
    make_run(dir, 0);
    steady_metrics(dir, 3, 0, "{\"step\":40,\"train/loss\":1,\"train/loss_scale\":32768,\"train/skipped_steps\":2}\n");
    char *plan = slurp(dir, "plan.json");
    char *at = strstr(plan, "\"warnings\": []");
    ck_assert_ptr_nonnull(at);
    *at = 0;
    put(dir, "plan.json", plan, "w");
    put(dir, "plan.json", "\"warnings\": [\"memory: the regions peaked at 2 MiB, predicted 1 MiB (+100.0%)\"]\n}\n", "a");
    free(plan);
    render(dir, NULL);
    warning_kinds(dir, kinds, sizeof kinds);
    ck_assert_str_eq(kinds, "skipped-steps,memory,");
    char *html = slurp(dir, "report.html");
    ck_assert_ptr_nonnull(strstr(html, "<title>Loss scale</title>"));
    free(html);
    remove_run(dir);
}
END_TEST

/* The status comes from run.json; a run.json whose last part never ended is a killed run;
 * without run.json (older runs) re-rendering keeps the last report's status, and without
 * that the files decide. */
START_TEST(status_read_back_or_inferred)
{
    char dir[64], path[200];
    make_run(dir, 0);
    render(dir, NULL);
    json_t *j = report_json(dir), *rec = json_load_file(strcat(strcpy(path, dir), "/run.json"), 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "finished");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 0);
    ck_assert_double_eq(json_number_value(json_object_get(j, "duration_seconds")),
                        json_number_value(json_object_get(rec, "seconds")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "started")),
                     json_string_value(json_object_get(rec, "started")));
    json_decref(j);
    json_decref(rec);
    put(dir, "run.json", "{\"started\": \"2026-11-29T01:00:00Z\", \"segments\": [{\"started\": "
        "\"2026-11-29T01:00:00Z\", \"ended\": null, \"exit_code\": null}]}\n", "w");
    render(dir, NULL);
    j = report_json(dir);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "killed");
    json_decref(j);
    char *md = slurp(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "# mlp: killed"));
    free(md);
    unlink(path);   /* an older run: no run.json */
    char old[200];
    snprintf(old, sizeof old, "%s/report.json", dir);
    unlink(old);
    render(dir, NULL);
    j = report_json(dir);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "finished");
    ck_assert(json_is_null(json_object_get(j, "exit_code")));
    ck_assert(json_is_null(json_object_get(j, "duration_seconds")));
    json_decref(j);
    render(dir, &(struct tr_run_outcome){.exit_code = 5, .seconds = 3});
    char *before = slurp(dir, "report.html");
    render(dir, NULL);
    char *after = slurp(dir, "report.html");
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    j = report_json(dir);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "failed");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 5);
    json_decref(j);
    unlink(old);
    steady_metrics(dir, 3, 0, "");   /* no test line: killed, or still running */
    render(dir, NULL);
    j = report_json(dir);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "unknown");
    json_decref(j);
    remove_run(dir);
}
END_TEST

/* A leak check that found growth is a warning and the checklist says where. */
START_TEST(leak_flagged)
{
    char dir[64], kinds[200];
    make_run(dir, 0);
    put(dir, "run.json", "{\"started\": \"2026-11-29T01:00:00Z\", \"segments\": [{\"exit_code\": 0, "
        "\"seconds\": 2}], \"exit_code\": 0, \"seconds\": 2, \"leak\": {\"checked\": true, \"warmup_steps\": 100, "
        "\"baseline_step\": 101, \"last_step\": 200, \"verdict\": \"grew\", "
        "\"allocated\": {\"baseline\": 1000, \"last\": 1000, \"tolerance\": 0, \"first_grew_step\": null}, "
        "\"heap\": {\"baseline\": 8388608, \"last\": 41943040, \"tolerance\": 1048576, \"first_grew_step\": 137, "
        "\"first_grew_value\": 10485760}, "
        "\"rss\": {\"baseline\": 104857600, \"last\": 106954752, \"tolerance\": 8388608, \"first_grew_step\": null}}}\n",
        "w");
    render(dir, NULL);
    warning_kinds(dir, kinds, sizeof kinds);
    ck_assert_str_eq(kinds, "leak,");
    char *md = slurp(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "| Leak check | grew |"));
    ck_assert_ptr_nonnull(strstr(md, "heap in use 8.00 MiB → 40.00 MiB (grew at step 137)"));
    ck_assert_ptr_nonnull(strstr(md, "leak: the heap in use grew at step 137"));
    free(md);
    remove_run(dir);
}
END_TEST

/* NVML's readings in run.json's monitor: a GPU held back by heat is a warning with its reasons in
 * words, one that ran hot without being held back another, a cool one none. */
START_TEST(gpu_throttling_flagged)
{
    char dir[64], kinds[200];
    make_run(dir, 0);
    put(dir, "run.json", "{\"started\": \"2026-11-29T01:00:00Z\", \"segments\": [{\"exit_code\": 0, "
        "\"seconds\": 2}], \"exit_code\": 0, \"seconds\": 2, \"monitor\": {\"samples\": 9, \"gpus\": ["
        "{\"peak_temperature_c\": 91, \"throttled\": true, \"throttle_reasons\": \"thermal slowdown (hardware)\"}, "
        "{\"peak_temperature_c\": 88, \"throttled\": false, \"throttle_reasons\": \"idle\"}, "
        "{\"peak_temperature_c\": 60, \"throttled\": false, \"throttle_reasons\": \"none\"}]}}\n", "w");
    render(dir, NULL);
    warning_kinds(dir, kinds, sizeof kinds);
    ck_assert_str_eq(kinds, "gpu-throttled,gpu-hot,");
    char *md = slurp(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "GPU 0 was held back: thermal slowdown (hardware) (peak 91 °C)"));
    ck_assert_ptr_nonnull(strstr(md, "GPU 1 reached 88 °C"));
    free(md);
    remove_run(dir);
    char words[128];
    tr_monitor_throttle_words(0x1 | 0x40, words, sizeof words);
    ck_assert_str_eq(words, "idle, thermal slowdown (hardware)");
    ck_assert(tr_monitor_throttled(0x40) && tr_monitor_throttled(0x4) && !tr_monitor_throttled(0x1 | 0x2));
    tr_monitor_throttle_words(0, words, sizeof words);
    ck_assert_str_eq(words, "none");
}
END_TEST

START_TEST(not_a_run_folder)
{
    char dir[64] = "/tmp/check_report_run.XXXXXX";
    struct tr_diag err = {0};
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(tr_run_report_render(dir, NULL, &err), -1);
    ck_assert_ptr_nonnull(strstr(tr_diag_last(&err), "is not a run folder"));
    ck_assert_int_eq(rmdir(dir), 0);
    /* plan.json alone (a run that failed before its first step) is a run. */
    make_run(dir, 1);
    render(dir, &(struct tr_run_outcome){.exit_code = 4, .seconds = 0.5});
    json_t *j = report_json(dir);
    ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "failed");
    json_decref(j);
    remove_run(dir);
    tr_diag_free(&err);
}
END_TEST

/* The Prometheus textfile: label values escaped as the format says (a recipe named with a quote,
 * a backslash and a newline), one status line per word, and a value the run did not reach left
 * out rather than written as NaN. */
START_TEST(prometheus_text)
{
    json_t *rep = json_pack("{ss si sf si s{ss sf} s{sf sn} s{sI}}", "status", "failed", "exit_code", 5,
                            "duration_seconds", 2.5, "steps", 7, "key_metric", "name", "eval/loss", "value", 0.25,
                            "throughput", "samples_per_s", 100.0, "tokens_per_s", "plan", "budget_bytes",
                            (json_int_t)1024);
    char *text = tr_prometheus_text(rep, "a\"b\\c\nd", 1e9);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "trainrun_last_run_success{recipe=\"a\\\"b\\\\c\\nd\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "status=\"failed\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "status=\"finished\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "trainrun_last_run_exit_code{recipe=\"a\\\"b\\\\c\\nd\"} 5\n"));
    ck_assert_ptr_nonnull(strstr(text, ",metric=\"eval/loss\"} 0.25\n"));
    ck_assert_ptr_nonnull(strstr(text, "} 1024\n"));
    ck_assert_ptr_null(strstr(text, "tokens_per_second{"));   /* null: left out */
    ck_assert_ptr_null(strstr(text, "nan"));
    ck_assert_ptr_null(strstr(text, "footprint_bytes{"));
    free(text);
    json_decref(rep);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("report_run");
    TCase *tc = tcase_create("run_report");
    tcase_add_test(tc, json_fields);
    tcase_add_test(tc, prometheus_text);
    tcase_add_test(tc, markdown_checklist);
    tcase_add_test(tc, html_self_contained);
    tcase_add_test(tc, html_escapes_text);
    tcase_add_test(tc, loss_spike_flagged);
    tcase_add_test(tc, data_bound_flagged);
    tcase_add_test(tc, skipped_steps_and_memory_flagged);
    tcase_add_test(tc, status_read_back_or_inferred);
    tcase_add_test(tc, leak_flagged);
    tcase_add_test(tc, gpu_throttling_flagged);
    tcase_add_test(tc, not_a_run_folder);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
