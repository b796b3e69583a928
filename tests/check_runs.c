/* A recipe's runs folder (src/train/runs.c): run folder names and their order, the links moved
 * atomically, how a run ended as --resume auto reads it, retention that never deletes the
 * protected runs, and the lock: held, named, released, and tidied away after a refused run. */
#include "runner.h"
#include "unit.h"

#include <jansson.h>

#include "train/runs.h"

static void make_run(const char *root, const char *name, const char *record)
{
    char path[8500];
    snprintf(path, sizeof path, "%s/%s", root, name);
    ck_assert_int_eq(mkdir(path, 0777), 0);
    if (record) {
        snprintf(path, sizeof path, "%s/%s/run.json", root, name);
        unit_write(path, record);
    }
}

static int exists(const char *root, const char *name)
{
    char path[8500];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", root, name);
    return lstat(path, &st) == 0;
}

START_TEST(run_names)
{
    ck_assert(tr_runs_is_run_name("20261129-195246"));
    ck_assert(tr_runs_is_run_name("20261129-195246-2"));
    ck_assert(tr_runs_is_run_name("20261129-195246-10"));
    ck_assert(!tr_runs_is_run_name("latest"));
    ck_assert(!tr_runs_is_run_name("promoted"));
    ck_assert(!tr_runs_is_run_name("20261129-19524"));
    ck_assert(!tr_runs_is_run_name("20261129-195246-"));
    ck_assert(!tr_runs_is_run_name("20261129-195246x"));
    ck_assert(!tr_runs_is_run_name(".deleting-20261129-195246"));
    struct tr_path parent;
    struct tr_diag d = {0};
    tr_runs_parent("runs/mlp/20261129-195246", &parent, &d);
    ck_assert_str_eq(parent.s, "runs/mlp");
    tr_runs_parent("runs/mlp/latest/", &parent, &d);
    ck_assert_str_eq(parent.s, "runs/mlp");
    tr_runs_parent("20261129-195246", &parent, &d);
    ck_assert_str_eq(parent.s, ".");
    tr_diag_free(&d);
}
END_TEST

START_TEST(list_oldest_first)
{
    char *root = unit_mkdtemp();
    make_run(root, "20261129-120000-10", NULL);
    make_run(root, "20261129-120000", NULL);
    make_run(root, "20261129-120000-2", NULL);
    make_run(root, "20261128-235959", NULL);
    make_run(root, "notes", NULL);
    char path[4200];
    snprintf(path, sizeof path, "%s/20261130-000000", root);
    unit_write(path, "a file, not a run folder");
    ck_assert_int_eq(tr_runs_link_set(root, "latest", "20261129-120000-10"), 0);
    char **names = tr_runs_list(root);
    ck_assert_ptr_nonnull(names);
    static const char *const want[] = {"20261128-235959", "20261129-120000", "20261129-120000-2",
                                       "20261129-120000-10", NULL};
    for (int i = 0; want[i]; i++) {
        ck_assert_ptr_nonnull(names[i]);
        ck_assert_str_eq(names[i], want[i]);
    }
    ck_assert_ptr_null(names[4]);
    tr_runs_free_list(names);
    unit_rmtree(root);
    free(root);
}
END_TEST

START_TEST(links_move_atomically)
{
    char *root = unit_mkdtemp(), target[256];
    make_run(root, "20261129-120000", NULL);
    make_run(root, "20261129-130000", NULL);
    ck_assert_int_eq(tr_runs_link_target(root, "promoted", target, sizeof target), -1);
    ck_assert_int_eq(tr_runs_link_set(root, "promoted", "20261129-120000"), 0);
    ck_assert_int_eq(tr_runs_link_target(root, "promoted", target, sizeof target), 0);
    ck_assert_str_eq(target, "20261129-120000");
    ck_assert_int_eq(tr_runs_link_set(root, "promoted", "20261129-130000"), 0);   /* over the old one */
    ck_assert_int_eq(tr_runs_link_target(root, "promoted", target, sizeof target), 0);
    ck_assert_str_eq(target, "20261129-130000");
    char path[4200];
    snprintf(path, sizeof path, "%s/.promoted.tmp.%ld", root, (long)getpid());
    ck_assert(access(path, F_OK) != 0);
    /* A link to a run folder that is gone points nowhere. */
    ck_assert_int_eq(tr_runs_link_set(root, "latest", "20261129-140000"), 0);
    ck_assert_int_eq(tr_runs_link_target(root, "latest", target, sizeof target), -1);
    unit_rmtree(root);
    free(root);
}
END_TEST

START_TEST(how_runs_ended)
{
    char *root = unit_mkdtemp(), dir[4200];
    static const struct { const char *record; enum tr_run_state state; } cases[] = {
        {NULL, TR_RUN_NEVER_STARTED},   /* set-up failed or was killed before run.json */
        {"{\"segments\": [{\"exit_code\": null}]}", TR_RUN_INTERRUPTED},
        {"{\"segments\": [{\"exit_code\": 130}]}", TR_RUN_INTERRUPTED},
        {"{\"segments\": [{\"exit_code\": 130}, {\"exit_code\": null}]}", TR_RUN_INTERRUPTED},
        {"{\"segments\": [{\"exit_code\": 130}, {\"exit_code\": 0}]}", TR_RUN_FINISHED},
        {"{\"segments\": [{\"exit_code\": 6}]}", TR_RUN_FINISHED},
        {"{\"segments\": [{\"exit_code\": 5}]}", TR_RUN_FAILED},
        {"{\"segments\": [{\"exit_code\": 4}]}", TR_RUN_FAILED},
        {"{\"segments\": [{\"exit_code\": 1}]}", TR_RUN_FAILED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "20261129-12000%zu", i);
        make_run(root, name, cases[i].record);
        snprintf(dir, sizeof dir, "%s/%s", root, name);
        ck_assert_msg(tr_runs_state(dir) == cases[i].state, "case %zu: %s", i,
                      cases[i].record ? cases[i].record : "no run.json");
    }
    unit_rmtree(root);
    free(root);
}
END_TEST

START_TEST(retention_keeps_the_protected)
{
    char *root = unit_mkdtemp(), deleted[256];
    static const char *const runs[] = {"20261129-010000", "20261129-020000", "20261129-030000",
                                       "20261129-040000", "20261129-050000", "20261129-060000"};
    for (int i = 0; i < 6; i++)
        make_run(root, runs[i], "{}");
    ck_assert_int_eq(tr_runs_link_set(root, "promoted", runs[0]), 0);
    ck_assert_int_eq(tr_runs_link_set(root, "latest", runs[2]), 0);
    ck_assert_int_eq(tr_runs_retain(root, 0, runs[5], deleted, sizeof deleted), 0);   /* 0: keep all */
    /* Beyond the newest 2: the promoted run, latest's and the current one stay; one goes. */
    ck_assert_int_eq(tr_runs_retain(root, 2, runs[3], deleted, sizeof deleted), 1);
    ck_assert_str_eq(deleted, "20261129-020000");
    ck_assert(exists(root, runs[0]));    /* promoted */
    ck_assert(!exists(root, runs[1]));
    ck_assert(exists(root, runs[2]));    /* latest's */
    ck_assert(exists(root, runs[3]));    /* the current run */
    ck_assert(exists(root, runs[4]) && exists(root, runs[5]));   /* the newest 2 */
    ck_assert(!exists(root, ".deleting-20261129-020000"));
    unit_rmtree(root);
    free(root);
}
END_TEST

START_TEST(lock_is_exclusive_and_named)
{
    char *root = unit_mkdtemp(), dir[4200], pid[32];
    struct tr_diag d = {0};
    snprintf(dir, sizeof dir, "%s/runs/mlp", root);
    struct tr_runs_lock first, second;
    ck_assert_int_eq(tr_runs_lock(dir, &first, &d), 0);
    /* flock belongs to the open file: a second open, even in this process, is refused */
    ck_assert_int_eq(tr_runs_lock(dir, &second, &d), TR_ELOCKED);
    const char *err = tr_diag_last(&d);
    snprintf(pid, sizeof pid, "pid %ld, started ", (long)getpid());
    ck_assert_msg(strstr(err, pid) != NULL, "the holder is not named: %s", err);
    ck_assert_msg(strstr(err, "/runs/mlp/.lock") != NULL, "the lock file is not named: %s", err);
    /* Refused before it made a run folder: nothing is left behind, report.dir included. */
    tr_runs_unlock(&first);
    ck_assert(!exists(root, "runs"));
    /* With a run folder in it, the folder and the lock file stay. */
    snprintf(dir, sizeof dir, "%s/runs/mlp", root);
    ck_assert_int_eq(tr_runs_lock(dir, &first, &d), 0);
    make_run(dir, "20261129-120000", NULL);
    tr_runs_unlock(&first);
    ck_assert(exists(dir, ".lock") && exists(dir, "20261129-120000"));
    ck_assert_int_eq(tr_runs_lock(dir, &second, &d), 0);   /* free again */
    tr_runs_unlock(&second);
    ck_assert(exists(dir, ".lock"));
    tr_diag_free(&d);
    unit_rmtree(root);
    free(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runs");
    TCase *tc = tcase_create("runs");
    tcase_add_test(tc, run_names);
    tcase_add_test(tc, list_oldest_first);
    tcase_add_test(tc, links_move_atomically);
    tcase_add_test(tc, how_runs_ended);
    tcase_add_test(tc, retention_keeps_the_protected);
    tcase_add_test(tc, lock_is_exclusive_and_named);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
