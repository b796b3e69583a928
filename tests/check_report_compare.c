/* A run compared with the one before it (src/report/compare.c) on hand-written report.json
 * pairs: deltas and the worse direction of higher- and lower-is-better metrics, limits met
 * exactly and passed, the plan's changes and the reasons found for them, report.json files
 * that lack fields, hold nulls or are schema_version 1, the previous run among its siblings,
 * the limits read back from a run's recipe.yaml, and the rendered sections. */
#include "runner.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/compare.h"
#include "report/svg.h"

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    ck_assert_msg(j != NULL, "test JSON line %d: %s", err.line, err.text);
    return j;
}

static json_t *compare_texts(const char *prev, const char *cur, struct tr_regression_limits lim)
{
    json_t *a = parse(prev), *b = parse(cur);
    json_t *cmp = tr_report_compare(a, b, &lim);
    ck_assert_ptr_nonnull(cmp);
    json_decref(a), json_decref(b);
    return cmp;
}

static double number(const json_t *cmp, const char *object, const char *key)
{
    json_t *v = json_object_get(json_object_get(cmp, object), key);
    ck_assert_msg(json_is_number(v), "%s.%s is not a number", object, key);
    return json_number_value(v);
}

static int worse(const json_t *obj)
{
    return json_is_true(json_object_get(obj, "worse"));
}

/* The regressions joined by newlines, for strstr. */
static char *regressions(const json_t *cmp)
{
    char *text = calloc(1, 4096);
    ck_assert_ptr_nonnull(text);
    size_t i;
    json_t *line;
    json_array_foreach(json_object_get(cmp, "regressions"), i, line)
        snprintf(text + strlen(text), 4096 - strlen(text), "%s\n", json_string_value(line));
    return text;
}

static char *render(void (*write)(FILE *, const json_t *), const json_t *cmp)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    write(f, cmp);
    ck_assert_int_eq(fclose(f), 0);
    return text;
}

static const struct tr_regression_limits defaults = TR_REGRESSION_DEFAULTS;

#define METRIC(name, value, better) \
    "{\"run\": \"r\", \"key_metric\": {\"name\": \"" name "\", \"value\": " value ", \"better\": \"" better "\"}}"

START_TEST(metric_deltas_and_directions)
{
    /* Accuracy down 3.3 %: past 2 %. */
    json_t *cmp = compare_texts(METRIC("test/accuracy", "0.7247", "higher"),
                                METRIC("test/accuracy", "0.7010", "higher"), defaults);
    json_t *m = json_object_get(cmp, "metric");
    ck_assert_str_eq(json_string_value(json_object_get(m, "name")), "test/accuracy");
    ck_assert_double_eq_tol(number(cmp, "metric", "delta"), -0.0237, 1e-12);
    ck_assert_double_eq_tol(number(cmp, "metric", "relative"), -0.0237 / 0.7247, 1e-12);
    ck_assert(worse(m));
    char *text = regressions(cmp);
    ck_assert_ptr_nonnull(strstr(text, "test/accuracy 0.7247 → 0.701 (\xe2\x88\x92" "3.3 %), past the 2 % limit"));
    free(text);
    json_decref(cmp);
    /* Accuracy up: better, never a regression. */
    cmp = compare_texts(METRIC("eval/accuracy", "0.5", "higher"), METRIC("eval/accuracy", "0.9", "higher"), defaults);
    ck_assert(!worse(json_object_get(cmp, "metric")));
    ck_assert_int_eq(json_array_size(json_object_get(cmp, "regressions")), 0);
    json_decref(cmp);
    /* A loss up 10 %: worse; down: better. */
    cmp = compare_texts(METRIC("eval/loss", "2.0", "lower"), METRIC("eval/loss", "2.2", "lower"), defaults);
    ck_assert(worse(json_object_get(cmp, "metric")));
    json_decref(cmp);
    cmp = compare_texts(METRIC("eval/loss", "2.0", "lower"), METRIC("eval/loss", "1.0", "lower"), defaults);
    ck_assert(!worse(json_object_get(cmp, "metric")));
    ck_assert_double_eq_tol(number(cmp, "metric", "relative"), -0.5, 1e-12);
    json_decref(cmp);
    /* Different key metrics are not compared. */
    cmp = compare_texts(METRIC("eval/loss", "2.0", "lower"), METRIC("test/accuracy", "0.1", "higher"), defaults);
    ck_assert(json_is_null(json_object_get(cmp, "metric")));
    json_decref(cmp);
}
END_TEST

START_TEST(limits_at_and_past)
{
    struct tr_regression_limits lim = {.metric = 0.02, .time = 0.10, .memory = 0.05};
    /* Exactly the limit is not past it, though 0.98 / 1 − 1 is a hair below −0.02 in doubles. */
    json_t *cmp = compare_texts(METRIC("a", "1.0", "higher"), METRIC("a", "0.98", "higher"), lim);
    ck_assert(!worse(json_object_get(cmp, "metric")));
    json_decref(cmp);
    cmp = compare_texts(METRIC("a", "1.0", "higher"), METRIC("a", "0.9799", "higher"), lim);
    ck_assert(worse(json_object_get(cmp, "metric")));
    json_decref(cmp);
    cmp = compare_texts(METRIC("a", "1.0", "lower"), METRIC("a", "1.02", "lower"), lim);
    ck_assert(!worse(json_object_get(cmp, "metric")));
    json_decref(cmp);
    /* Duration and throughput against lim.time. */
    const char *base = "{\"status\": \"finished\", \"duration_seconds\": 100,"
                       " \"throughput\": {\"samples_per_s\": 100, \"tokens_per_s\": null},"
                       " \"plan\": {\"measured_footprint_bytes\": 1000, \"measured_peak_bytes\": 1000}}";
    cmp = compare_texts(base, "{\"status\": \"finished\", \"duration_seconds\": 110,"
                              " \"throughput\": {\"samples_per_s\": 90},"
                              " \"plan\": {\"measured_footprint_bytes\": 1050, \"measured_peak_bytes\": 1050}}", lim);
    ck_assert(!worse(json_object_get(cmp, "duration")));
    ck_assert(!worse(json_object_get(cmp, "throughput")));
    ck_assert(!worse(json_object_get(json_object_get(cmp, "memory"), "footprint")));
    ck_assert_int_eq(json_array_size(json_object_get(cmp, "regressions")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cmp, "throughput"), "unit")), "samples/s");
    json_decref(cmp);
    cmp = compare_texts(base, "{\"status\": \"finished\", \"duration_seconds\": 110.1,"
                              " \"throughput\": {\"samples_per_s\": 89.9},"
                              " \"plan\": {\"measured_footprint_bytes\": 1051, \"measured_peak_bytes\": 900}}", lim);
    ck_assert(worse(json_object_get(cmp, "duration")));
    ck_assert(worse(json_object_get(cmp, "throughput")));
    json_t *memory = json_object_get(cmp, "memory");
    ck_assert(worse(json_object_get(memory, "footprint")));
    ck_assert(!worse(json_object_get(memory, "regions")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(memory, "footprint"), "delta")), 51);
    char *text = regressions(cmp);
    ck_assert_ptr_nonnull(strstr(text, "duration 100.0 s → 110.1 s (+10.1 %), past the 10 % limit"));
    ck_assert_ptr_nonnull(strstr(text, "throughput 100.0 samples/s → 89.9 samples/s"));
    ck_assert_ptr_nonnull(strstr(text, "memory footprint 1000 B → 1.03 KiB (+5.1 %), past the 5 % limit"));
    free(text);
    json_decref(cmp);
    /* A failed run is short: its duration is shown, not judged. */
    cmp = compare_texts("{\"status\": \"failed\", \"duration_seconds\": 10}",
                        "{\"status\": \"finished\", \"duration_seconds\": 1000}", lim);
    ck_assert_double_eq(number(cmp, "duration", "delta"), 990);
    ck_assert(!worse(json_object_get(cmp, "duration")));
    json_decref(cmp);
    /* Nor its memory or speed: it stopped before they settled. */
    cmp = compare_texts("{\"status\": \"failed\", \"throughput\": {\"samples_per_s\": 200},"
                        " \"plan\": {\"measured_footprint_bytes\": 500, \"measured_peak_bytes\": 400}}",
                        "{\"status\": \"finished\", \"throughput\": {\"samples_per_s\": 100},"
                        " \"plan\": {\"measured_footprint_bytes\": 1000, \"measured_peak_bytes\": 900}}", lim);
    ck_assert(!worse(json_object_get(cmp, "throughput")));
    ck_assert(!worse(json_object_get(json_object_get(cmp, "memory"), "footprint")));
    ck_assert(!worse(json_object_get(json_object_get(cmp, "memory"), "regions")));
    ck_assert_int_eq(json_array_size(json_object_get(cmp, "regressions")), 0);
    json_decref(cmp);
    /* Zero limits: any worsening counts; tokens a second when both have them. */
    struct tr_regression_limits zero = {0, 0, 0};
    cmp = compare_texts("{\"status\": \"finished\", \"throughput\": {\"samples_per_s\": 1, \"tokens_per_s\": 100}}",
                        "{\"status\": \"finished\", \"throughput\": {\"samples_per_s\": 2, \"tokens_per_s\": 99.99}}",
                        zero);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cmp, "throughput"), "unit")), "tokens/s");
    ck_assert(worse(json_object_get(cmp, "throughput")));
    json_decref(cmp);
}
END_TEST

static const char plan_before[] =
    "{\"run\": \"20261129-183205\", \"status\": \"finished\", \"plan\": {\"precision\": \"fp32\","
    " \"checkpointing\": {\"mode\": \"none\", \"blocks\": 0, \"of\": 4}, \"dynamic_batching\": false, \"micro\": 32,"
    " \"accumulation\": 1, \"budget_bytes\": 4294967296, \"device\": {\"name\": \"cpu\", \"memory_bytes\": 1000},"
    " \"data\": {\"train_samples\": 9000, \"max_len\": 128, \"mean_len\": 14.2}},"
    " \"environment\": {\"recipe_sha256\": \"aa\", \"trainrun\": \"0.1.0\"}}";

START_TEST(plan_changes_and_why)
{
    const char *after =
        "{\"plan\": {\"precision\": \"bf16\", \"checkpointing\": {\"mode\": \"selective\", \"blocks\": 4, \"of\": 4},"
        " \"dynamic_batching\": true, \"micro\": 16, \"accumulation\": 2, \"budget_bytes\": 2147483648,"
        " \"device\": {\"name\": \"rtx3090\", \"memory_bytes\": 1000},"
        " \"data\": {\"train_samples\": 12000, \"max_len\": 512, \"mean_len\": 14.24}},"
        " \"environment\": {\"recipe_sha256\": \"bb\", \"trainrun\": \"0.1.0\"}}";
    json_t *cmp = compare_texts(plan_before, after, defaults);
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "previous")), "20261129-183205");
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "previous_status")), "finished");
    ck_assert(json_is_true(json_object_get(cmp, "plan_changed")));
    const char *changes[] = {"precision fp32 → bf16", "checkpointing none → selective 4 of 4",
                             "micro-batch 32 × 1 → 16 × 2", "dynamic batching off → on"};
    json_t *list = json_object_get(cmp, "plan_changes");
    ck_assert_int_eq(json_array_size(list), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(json_string_value(json_array_get(list, (size_t)i)), changes[i]);
    /* The mean length moved less than its printed precision; the device memory not at all. */
    const char *why[] = {"budget 4.00 GiB → 2.00 GiB", "device cpu → rtx3090",
                         "data: the longest sequence 128 → 512 tokens", "data: 9,000 → 12,000 training samples",
                         "the recipe changed (sha256 differs)"};
    list = json_object_get(cmp, "why");
    ck_assert_int_eq(json_array_size(list), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(json_string_value(json_array_get(list, (size_t)i)), why[i]);
    json_decref(cmp);
    /* The same inputs and another plan: said so, honestly. */
    json_t *a = parse(plan_before), *b = parse(plan_before);
    json_object_set_new(json_object_get(b, "plan"), "precision", json_string("bf16"));
    cmp = tr_report_compare(a, b, NULL);
    list = json_object_get(cmp, "why");
    ck_assert_int_eq(json_array_size(list), 1);
    const char *same = json_string_value(json_array_get(list, 0));
    ck_assert_ptr_nonnull(strstr(same, "the inputs the planner saw are the same"));
    json_decref(cmp);
    /* Nothing changed: nothing to explain. */
    cmp = tr_report_compare(a, a, NULL);
    ck_assert(json_is_false(json_object_get(cmp, "plan_changed")));
    ck_assert_int_eq(json_array_size(json_object_get(cmp, "why")), 0);
    ck_assert_int_eq(json_array_size(json_object_get(cmp, "plan_changes")), 0);
    json_decref(cmp);
    json_decref(a), json_decref(b);
}
END_TEST

START_TEST(missing_and_null_fields)
{
    const char *texts[] = {
        "{}",
        "{\"schema_version\": 1, \"name\": \"mlp\", \"status\": \"finished\", \"exit_code\": 0,"
        " \"duration_seconds\": 12.5, \"final\": {\"train/loss\": 0.3}, \"plan\": {\"amp\": \"auto\", \"precision\":"
        " \"fp32\", \"checkpointing\": {\"mode\": \"none\", \"blocks\": 0, \"of\": 2}, \"micro\": 8,"
        " \"accumulation\": 4, \"measured_footprint_bytes\": 500000000}}",
        "{\"schema_version\": 2, \"run\": null, \"status\": null, \"key_metric\": null, \"duration_seconds\": null,"
        " \"throughput\": {\"samples_per_s\": null, \"tokens_per_s\": null}, \"plan\": null, \"environment\": null,"
        " \"final\": null, \"series\": null}",
        "{\"key_metric\": {\"name\": 3, \"value\": \"high\"}, \"plan\": {\"checkpointing\": \"none\","
        " \"micro_batch\": {\"rows\": 1}, \"data\": [1, 2], \"device\": 7}, \"throughput\": [1],"
        " \"environment\": \"x\","
        " \"final\": {\"train/loss\": \"nan\"}, \"series\": {\"train/loss\": [1, [2], [\"a\", \"b\"], null]}}",
        "{\"key_metric\": {\"name\": \"eval/loss\", \"value\": 0, \"better\": \"sideways\"}, \"duration_seconds\": 0,"
        " \"plan\": {\"accumulation\": 0, \"micro_batch\": [{\"rows\": 8, \"max_len\": 64}, 5]}}",
    };
    int n = sizeof texts / sizeof texts[0];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            json_t *a = parse(texts[i]), *b = parse(texts[k]);
            json_t *cmp = tr_report_compare(a, b, &defaults);
            ck_assert_ptr_nonnull(cmp);
            ck_assert(json_is_array(json_object_get(cmp, "regressions")));
            ck_assert(json_is_array(json_object_get(cmp, "why")));
            free(render(tr_compare_write_md, cmp));
            free(render(tr_compare_write_html, cmp));
            char *page = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&page, &len);
            tr_compare_runs_md(f, a, b, cmp);
            tr_compare_runs_html(f, a, b, cmp);
            fclose(f);
            free(page);
            json_decref(cmp), json_decref(a), json_decref(b);
        }
    /* A non-object, and NULL limits (the defaults). */
    json_t *s = json_string("x"), *cmp = tr_report_compare(s, s, NULL);
    ck_assert(json_is_null(json_object_get(cmp, "metric")));
    ck_assert(json_is_null(json_object_get(cmp, "duration")));
    ck_assert_double_eq(json_number_value(json_object_get(json_object_get(cmp, "limits"), "time")), 0.10);
    json_decref(cmp), json_decref(s);
    /* A previous value of 0: no relative change, never worse. */
    cmp = compare_texts("{\"duration_seconds\": 0}", "{\"duration_seconds\": 50}", defaults);
    ck_assert(json_is_null(json_object_get(json_object_get(cmp, "duration"), "relative")));
    ck_assert(!worse(json_object_get(cmp, "duration")));
    json_decref(cmp);
}
END_TEST

/* ---- folders ----------------------------------------------------------------------------- */

static void mkdirs(const char *root, const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void remove_tree(const char *root)
{
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    ck_assert_int_eq(system(command), 0);
}

static void expect_previous(const char *root, const char *run, const char *want)
{
    char dir[512];
    struct tr_path found_dir;
    snprintf(dir, sizeof dir, "%s/%s", root, run);
    int found = tr_report_find_previous(dir, &found_dir);
    const char *out = found_dir.s;
    if (!want) {
        ck_assert_msg(!found, "%s: found %s", run, out);
        return;
    }
    char expect[512];
    snprintf(expect, sizeof expect, "%s/%s", root, want);
    ck_assert_msg(found, "%s: none found, expected %s", run, want);
    ck_assert_str_eq(out, expect);
}

START_TEST(find_previous_sibling)
{
    char root[] = "/tmp/check_report_compare.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    mkdirs(root, "r");
    const char *runs[] = {"r/20261101-100000", "r/20261102-100000", "r/20261102-100000-2", "r/20261102-100000-10",
                          "r/20261103-100000", "r/20261104-100000"};
    for (int i = 0; i < 6; i++)
        mkdirs(root, runs[i]);
    put(root, "r/20261101-100000/report.json", "{}");
    put(root, "r/20261102-100000-2/report.json", "{}");
    put(root, "r/20261102-100000-10/report.json", "{}");
    put(root, "r/20261104-100000/report.json", "{}");
    /* 20261103 has no report.json (killed); latest links to the newest. */
    char link[512];
    snprintf(link, sizeof link, "%s/r/latest", root);
    ck_assert_int_eq(symlink("20261104-100000", link), 0);
    put(root, "r/notes.txt", "not a folder");

    expect_previous(root, "r/20261104-100000", "r/20261102-100000-10");   /* -10 after -2, 1103 skipped */
    expect_previous(root, "r/20261102-100000-10", "r/20261102-100000-2");
    expect_previous(root, "r/20261102-100000-2", "r/20261101-100000");    /* the plain one has no report */
    expect_previous(root, "r/20261101-100000", NULL);
    expect_previous(root, "r/20261103-100000", "r/20261102-100000-10");
    /* The latest link's previous run is the one before the run it points at. */
    expect_previous(root, "r/latest", "r/20261102-100000-10");
    expect_previous(root, "r/20261104-100000/", "r/20261102-100000-10");
    struct tr_path out;
    ck_assert_int_eq(tr_report_find_previous("/nonexistent/x/y", &out), 0);
    remove_tree(root);
}
END_TEST

START_TEST(limits_from_recipe_yaml)
{
    char root[] = "/tmp/check_report_compare.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    struct tr_regression_limits lim;
    tr_regression_limits_read(root, &lim);   /* no recipe.yaml */
    ck_assert_double_eq(lim.metric, 0.02);
    ck_assert_double_eq(lim.time, 0.10);
    ck_assert_double_eq(lim.memory, 0.05);
    put(root, "recipe.yaml",
        "name: x                                     # default\n"
        "train:\n  regression:\n    metric: 0.9\n"   /* another section's key of the same name */
        "report:\n"
        "  dir: runs                                 # default\n"
        "  notify:\n    timeout: 1e+01s\n"
        "  regression:\n"
        "    metric: 0.01                            # override metric=0.01\n"
        "    time: 2.5e-01                           # default\n"
        "    memory: -1                              # not a fraction: ignored\n"
        "seed: 1\n");
    tr_regression_limits_read(root, &lim);
    ck_assert_double_eq(lim.metric, 0.01);
    ck_assert_double_eq(lim.time, 0.25);
    ck_assert_double_eq(lim.memory, 0.05);
    remove_tree(root);
}
END_TEST

START_TEST(report_json_load_names_the_run)
{
    char root[] = "/tmp/check_report_compare.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    mkdirs(root, "20261101-100000");
    mkdirs(root, "b");
    mkdirs(root, "c");
    put(root, "20261101-100000/report.json", "{\"schema_version\": 1}");
    put(root, "b/report.json", "{\"run\": \"given\"}");
    put(root, "c/report.json", "{\"truncated\": ");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/20261101-100000/", root);
    json_t *j = tr_report_json_load(dir);
    ck_assert_str_eq(json_string_value(json_object_get(j, "run")), "20261101-100000");
    json_decref(j);
    snprintf(dir, sizeof dir, "%s/b", root);
    j = tr_report_json_load(dir);
    ck_assert_str_eq(json_string_value(json_object_get(j, "run")), "given");
    json_decref(j);
    snprintf(dir, sizeof dir, "%s/c", root);
    ck_assert_ptr_null(tr_report_json_load(dir));
    ck_assert_ptr_null(tr_report_json_load(root));
    remove_tree(root);
}
END_TEST

/* ---- rendering --------------------------------------------------------------------------- */

START_TEST(sections_call_out_regressions_first)
{
    json_t *a = parse(plan_before), *b = parse(plan_before);
    json_object_set_new(a, "run", json_string("<b>old</b>"));
    json_object_set_new(a, "key_metric", parse(
        "{\"name\": \"test/accuracy\", \"value\": 0.8, \"better\": \"higher\"}"));
    json_object_set_new(b, "key_metric", parse(
        "{\"name\": \"test/accuracy\", \"value\": 0.7, \"better\": \"higher\"}"));
    json_object_set_new(json_object_get(b, "plan"), "precision", json_string("bf16"));
    json_t *cmp = tr_report_compare(a, b, &defaults);
    char *md = render(tr_compare_write_md, cmp);
    ck_assert_ptr_nonnull(strstr(md, "## Compared with <b>old</b> (finished)\n"));
    char *reg = strstr(md, "**1 regression** past the limits (metric 2 %, time 10 %, memory 5 %)");
    char *table = strstr(md, "| quantity | previous | this run | change |");
    ck_assert_ptr_nonnull(reg);
    ck_assert_ptr_nonnull(table);
    ck_assert(reg < table);
    ck_assert_ptr_nonnull(strstr(md, "| test/accuracy (higher is better) | 0.8 | 0.7 | "));
    ck_assert_ptr_nonnull(strstr(md, ", a regression |"));
    ck_assert_ptr_nonnull(strstr(md, "- precision fp32 → bf16\n"));
    char *html = render(tr_compare_write_html, cmp);
    ck_assert_ptr_nonnull(strstr(html, "<h2>Compared with &lt;b&gt;old&lt;/b&gt; (finished)</h2>"));
    ck_assert_ptr_null(strstr(html, "<b>old"));
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_nonnull(strstr(html, "class=\"regressions\""));
    ck_assert_ptr_nonnull(strstr(html, "<table class=\"compare\">"));
    free(md), free(html);
    json_decref(cmp);
    /* No regressions: said in one line. */
    cmp = tr_report_compare(a, a, &defaults);
    md = render(tr_compare_write_md, cmp);
    ck_assert_ptr_nonnull(strstr(md, "No regressions past the limits"));
    ck_assert_ptr_nonnull(strstr(md, "The plan is the same."));
    free(md);
    json_decref(cmp), json_decref(a), json_decref(b);
}
END_TEST

START_TEST(words)
{
    char out[160];
    tr_format_count(12000, out);
    ck_assert_str_eq(out, "12,000");
    tr_format_count(999, out);
    ck_assert_str_eq(out, "999");
    tr_format_count(-1234567, out);
    ck_assert_str_eq(out, "-1,234,567");
    tr_format_elapsed(42, out);
    ck_assert_str_eq(out, "42.0 s");
    tr_format_elapsed(1365.2, out);
    ck_assert_str_eq(out, "22.8 min");
    tr_format_elapsed(NAN, out);
    ck_assert_str_eq(out, "unknown");
    tr_format_percent(-0.033, out);
    ck_assert_str_eq(out, "\xe2\x88\x92" "3.3 %");
    tr_format_change(2, 2, out);
    ck_assert_str_eq(out, "same");
    tr_format_change(NAN, 2, out);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(sparkline)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    const double y[] = {0.5, NAN, 0.7, 0.6};
    const char *colours[] = {"#1a7f37", NULL, "#b3261e", NULL};
    ck_assert_int_eq(tr_svg_sparkline(f, "a <trend>", y, colours, 4), 3);
    ck_assert_int_eq(tr_svg_sparkline(f, "one", y, NULL, 1), 0);   /* one point is no trend */
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "<svg class=\"trend\""));
    ck_assert_ptr_nonnull(strstr(text, "<title>a &lt;trend&gt;</title>"));
    ck_assert_ptr_nonnull(strstr(text, "fill=\"#b3261e\""));
    ck_assert_ptr_nonnull(strstr(text, "fill=\"#444\""));
    int circles = 0;
    for (const char *p = text; (p = strstr(p, "<circle")); p++)
        circles++;
    ck_assert_int_eq(circles, 3);
    ck_assert_ptr_null(strstr(text, "title>one"));
    free(text);
}
END_TEST

/* report --compare's plot: two runs' long labels. Every legend entry (its swatch, and its text
 * at 7 units a character, 11 high above a 2-unit descent) lies inside the viewBox and outside
 * the plot's frame, by the SVG's own coordinates. */
START_TEST(legend_clear_of_plot)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    double x[] = {1, 2, 3}, y[] = {0.5, 0.4, 0.3};
    struct tr_svg_line lines[2] = {
        {.label = "A runs/bert-small-with-a-long-name/20261201-225844", .x = x, .y = y, .n = 3},
        {.label = "B runs/bert-small-with-a-long-name/20261202-041500", .x = x, .y = y, .n = 3}};
    ck_assert_int_gt(tr_svg_plot(f, "eval/loss", "eval/loss", lines, 2), 0);
    fclose(f);
    double vw, vh, fx, fy, fw, fh;
    const char *box = strstr(text, "viewBox=\"");
    ck_assert_ptr_nonnull(box);
    ck_assert_int_eq(sscanf(box, "viewBox=\"0 0 %lf %lf\"", &vw, &vh), 2);
    const char *frame = strstr(text, "<rect x=");
    ck_assert_ptr_nonnull(frame);
    ck_assert_int_eq(sscanf(frame, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\" fill=\"none\"", &fx, &fy,
                            &fw, &fh), 4);
    int entries = 0;
    for (const char *p = text; (p = strstr(p, "height=\"8\"")); p++) {
        const char *r = p;
        while (r > text && strncmp(r, "<rect", 5))
            r--;
        double sx, sy, tx, ty;
        ck_assert_int_eq(sscanf(r, "<rect x=\"%lf\" y=\"%lf\"", &sx, &sy), 2);
        const char *t = strstr(p, "<text x=\"");
        ck_assert_int_eq(sscanf(t, "<text x=\"%lf\" y=\"%lf\">", &tx, &ty), 2);
        const char *label = strchr(t, '>') + 1;
        double chars = (double)(strstr(label, "</text>") - label);
        double left = sx, right = tx + 7 * chars, topmost = fmin(sy, ty - 11), bottom = fmax(sy + 8, ty + 2);
        ck_assert_msg(left >= 0 && right <= vw && topmost >= 0, "legend entry %d [%g, %g] outside the viewBox %g wide",
                      entries, left, right, vw);
        ck_assert_msg(bottom <= fy || topmost >= fy + fh || right <= fx || left >= fx + fw,
                      "legend entry %d (%g..%g × %g..%g) overlaps the plot (%g..%g × %g..%g)", entries, left, right,
                      topmost, bottom, fx, fx + fw, fy, fy + fh);
        entries++;
    }
    ck_assert_int_eq(entries, 2);
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("report_compare");
    TCase *tc = tcase_create("compare");
    tcase_add_test(tc, metric_deltas_and_directions);
    tcase_add_test(tc, limits_at_and_past);
    tcase_add_test(tc, plan_changes_and_why);
    tcase_add_test(tc, missing_and_null_fields);
    tcase_add_test(tc, find_previous_sibling);
    tcase_add_test(tc, limits_from_recipe_yaml);
    tcase_add_test(tc, report_json_load_names_the_run);
    tcase_add_test(tc, sections_call_out_regressions_first);
    tcase_add_test(tc, words);
    tcase_add_test(tc, sparkline);
    tcase_add_test(tc, legend_clear_of_plot);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
