/* The run-folder stage alone (src/train/run_folder.c): a fresh folder with its recipe, log,
 * metrics and plan.json, `latest` pointed at it once its record begins, a second run in the same second beside it, and
 * a resumed run appending to the first; and evaluation's ranking of the truth among logits. */
#include "runner.h"
#include "unit.h"

#include <jansson.h>

#include "recipe/recipe.h"
#include "train/evaluate.h"
#include "train/run_folder.h"
#include "train/runs.h"

static char *read_all(const char *dir, const char *name)
{
    char *path = tr_strdup_printf("%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&text, &cap, '\0', f);
    fclose(f);
    free(path);
    if (n < 0) {
        free(text);
        return tr_strdup("");
    }
    return text;
}

static void load_recipe(struct tr_recipe *r, const char *root)
{
    char *yaml = tr_strdup_printf("model: {arch: mlp}\ndata: {dataset: digits}\nreport: {dir: %s}\n", root);
    struct tr_diag diag = {0};
    ck_assert_int_eq(tr_recipe_load_string(r, yaml, strlen(yaml), "folder.yaml", NULL, 0, &diag), 0);
    tr_diag_free(&diag);
    free(yaml);
}

START_TEST(fresh_folder_writes_its_files)
{
    char *root = unit_mkdtemp();
    struct tr_recipe r;
    load_recipe(&r, root);
    struct tr_diag d = {0};
    struct tr_run_folder f;
    tr_run_folder_init(&f, true);
    ck_assert_int_eq(tr_run_folder_open(&f, &r, NULL, &d), 0);
    char *recipe_dir = tr_strdup_printf("%s/%s", root, r.name);
    ck_assert_msg(strncmp(f.dir.s, recipe_dir, strlen(recipe_dir)) == 0, "%s not under %s", f.dir.s, recipe_dir);
    const char *name = strrchr(f.dir.s, '/') + 1;
    ck_assert(tr_runs_is_run_name(name));
    char target[256];   /* latest names a run once it has begun (run.json), never one whose set-up failed */
    ck_assert_int_eq(tr_runs_link_target(recipe_dir, "latest", target, sizeof target), -1);
    ck_assert_int_eq(tr_runs_state(f.dir.s), TR_RUN_NEVER_STARTED);
    ck_assert_int_eq(tr_run_folder_begin_record(&f, &r, 0, NULL, &d), 0);
    ck_assert_int_eq(tr_runs_link_target(recipe_dir, "latest", target, sizeof target), 0);
    ck_assert_str_eq(target, name);
    ck_assert_int_eq(tr_runs_state(f.dir.s), TR_RUN_INTERRUPTED);

    tr_run_folder_say(&f, "hello %d\n", 42);
    tr_run_folder_metric(&f, json_pack("{sIsf}", "step", (json_int_t)3, "train/loss", 0.5), true);
    tr_run_folder_log_errors(&f, &(struct tr_diag){0});
    json_t *warnings = json_array();
    json_array_append_new(warnings, json_string("memory: a test warning"));
    ck_assert_int_eq(tr_run_folder_write_plan(&f, json_pack("{ss}", "chosen", "the test's"), warnings, 3, &d), 0);
    ck_assert_int_eq(tr_run_folder_sync(&f, &d), 0);

    char *log = read_all(f.dir.s, "log.txt"), *metrics = read_all(f.dir.s, "metrics.jsonl");
    char *yaml = read_all(f.dir.s, "recipe.yaml"), *plan = read_all(f.dir.s, "plan.json");
    ck_assert_str_eq(log, "hello 42\nwarning: memory: a test warning\n");
    ck_assert_str_eq(metrics, "{\"step\":3,\"train/loss\":0.5}\n");
    ck_assert_msg(strstr(yaml, "arch: mlp") != NULL, "recipe.yaml: %s", yaml);
    json_t *j = json_loads(plan, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "chosen")), "the test's");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "warnings"), 0)), "memory: a test warning");
    json_decref(j);
    free(log), free(metrics), free(yaml), free(plan);
    struct stat st;
    char *checkpoints = tr_strdup_printf("%s/checkpoints", f.dir.s);
    ck_assert(stat(checkpoints, &st) == 0 && S_ISDIR(st.st_mode));
    free(checkpoints);

    /* A second run in the same second gets its own folder beside the first. */
    struct tr_run_folder g;
    tr_run_folder_init(&g, true);
    ck_assert_int_eq(tr_run_folder_open(&g, &r, NULL, &d), 0);
    ck_assert_str_ne(g.dir.s, f.dir.s);
    tr_run_folder_close(&g);

    /* Resumed: the same folder, its log appended to. */
    char *first = tr_strdup(f.dir.s);
    tr_run_folder_close(&f);
    tr_run_folder_init(&f, true);
    ck_assert_int_eq(tr_run_folder_open(&f, &r, first, &d), 0);
    ck_assert_str_eq(f.dir.s, first);
    struct tr_diag failed = {0};
    tr_fail(&failed, TR_EIO, "disk full");
    tr_run_folder_log_errors(&f, &failed);
    tr_run_folder_close(&f);
    log = read_all(first, "log.txt");
    ck_assert_str_eq(log, "hello 42\nwarning: memory: a test warning\nerror: disk full\n");
    free(log);
    ck_assert_int_eq(d.n, 0);

    tr_diag_free(&failed);
    tr_diag_free(&d);
    free(first);
    free(recipe_dir);
    tr_recipe_free(&r);
    unit_rmtree(root);
    free(root);
}
END_TEST

/* A run folder that cannot be made is a sentence and TR_EIO, not a crash. */
START_TEST(unwritable_report_dir_fails)
{
    char *root = unit_mkdtemp();
    char *blocked = unit_write_in(root, "file", "not a folder\n");
    struct tr_recipe r;
    load_recipe(&r, blocked);
    struct tr_diag d = {0};
    struct tr_run_folder f;
    tr_run_folder_init(&f, true);
    ck_assert_int_eq(tr_run_folder_open(&f, &r, NULL, &d), TR_EIO);
    ck_assert_msg(strstr(tr_diag_last(&d), "cannot create") != NULL, "%s", tr_diag_last(&d));
    tr_run_folder_close(&f);
    tr_diag_free(&d);
    tr_recipe_free(&r);
    free(blocked);
    unit_rmtree(root);
    free(root);
}
END_TEST

START_TEST(evaluation_ranks_the_truth)
{
    /* three rows of four classes: truth ranked first, third, and skipped (no target) */
    const float logits[] = {0.9f, 0.1f, 0.0f, 0.0f, 0.5f, 0.4f, 0.3f, 0.6f, 1, 2, 3, 4};
    const int32_t truth[] = {0, 2, -1};
    int64_t correct = 0, in_top5 = 0;
    ck_assert_int_eq(tr_rank_truth(logits, truth, 3, 4, &correct, &in_top5), 2);
    ck_assert_int_eq(correct, 1);
    ck_assert_int_eq(in_top5, 2);
    /* ties rank the lower class first */
    const float tied[] = {1, 1, 1, 1, 1, 1};
    const int32_t last[] = {5};
    correct = in_top5 = 0;
    ck_assert_int_eq(tr_rank_truth(tied, last, 1, 6, &correct, &in_top5), 1);
    ck_assert_int_eq(correct, 0);
    ck_assert_int_eq(in_top5, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_folder");
    TCase *tc = tcase_create("run_folder");
    tcase_add_test(tc, fresh_folder_writes_its_files);
    tcase_add_test(tc, unwritable_report_dir_fails);
    tcase_add_test(tc, evaluation_ranks_the_truth);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
