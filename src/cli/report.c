/* trainrun report: RUN_DIR writes a run's report.json, report.md and report.html again from
 * its folder (recipe.yaml, metrics.jsonl, plan.json), as the trainer wrote them at the run's
 * end; RUNS_DIR (report.dir) does so for every run and writes the runs index; --compare A B
 * shows two runs side by side, B judged against A with B's report.regression limits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/error.h"
#include "cli/exit.h"
#include "report/compare.h"
#include "report/index.h"
#include "report/run_report.h"

static const char usage[] =
    "usage: trainrun report RUN_DIR\n"
    "       trainrun report RUNS_DIR\n"
    "       trainrun report --compare RUN_A RUN_B [--html FILE]\n";

static int report_run(const char *dir)
{
    struct tr_diag err = {0};
    struct tr_run_report rep;
    int rc = tr_run_report_load(dir, NULL, &rep, &err);
    if (rc) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&err));
        rc = TR_EXIT_USAGE;
    } else if (tr_run_report_write(&rep, &err)) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&err));
        rc = TR_EXIT_FAILURE;
    } else
        printf("%s/report.md\n%s/report.html\n%s/report.json\n", rep.dir.s, rep.dir.s, rep.dir.s);
    tr_diag_free(&err);
    tr_run_report_free(&rep);
    return rc;
}

/* Every run folder the trainer wrote into (metrics.jsonl or plan.json) is rendered again; one
 * that fails is a warning, and the index lists it as its report.json stands. */
static int report_runs(const char *dir)
{
    struct tr_diag err = {0};
    int nrecipes;
    char **recipes = tr_subfolders(dir, &nrecipes);
    for (int i = 0; i < nrecipes; i++) {
        char *recipe = tr_strdup_printf("%s/%s", dir, recipes[i]);
        int nruns;
        char **runs = tr_subfolders(recipe, &nruns);
        for (int k = 0; k < nruns; k++) {
            char *run = tr_strdup_printf("%s/%s", recipe, runs[k]);
            char *metrics = tr_strdup_printf("%s/metrics.jsonl", run), *plan = tr_strdup_printf("%s/plan.json", run);
            if ((!access(metrics, F_OK) || !access(plan, F_OK)) && tr_run_report_render(run, NULL, &err))
                fprintf(stderr, "trainrun: warning: %s\n", tr_diag_last(&err));
            free(run), free(metrics), free(plan);
        }
        tr_names_free(runs);
        free(recipe);
    }
    tr_names_free(recipes);
    int rc = tr_runs_index_write(dir, &err);
    if (rc)
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&err));
    tr_diag_free(&err);
    if (rc)
        return TR_EXIT_FAILURE;
    printf("%s/index.md\n%s/index.html\n", dir, dir);
    return TR_EXIT_OK;
}

static json_t *load_or_say(const char *dir)
{
    json_t *j = tr_report_json_load(dir);
    if (!j)
        fprintf(stderr, "trainrun: %s has no report.json that parses; `trainrun report %s` writes one\n", dir, dir);
    return j;
}

static int compare_runs(const char *dir_a, const char *dir_b, const char *html)
{
    json_t *a = load_or_say(dir_a), *b = a ? load_or_say(dir_b) : NULL;
    if (!a || !b) {
        json_decref(a);
        return TR_EXIT_USAGE;
    }
    struct tr_regression_limits lim;
    tr_regression_limits_read(dir_b, &lim);
    json_t *cmp = tr_report_compare(a, b, &lim);
    tr_compare_runs_md(stdout, a, b, cmp);
    int rc = TR_EXIT_OK;
    if (html) {
        errno = 0;
        FILE *out = fopen(html, "w");
        if (out)
            tr_compare_runs_html(out, a, b, cmp);
        if (!out || ferror(out) | fclose(out)) {
            fprintf(stderr, "trainrun: cannot write %s: %s\n", html, errno ? strerror(errno) : "write error");
            rc = TR_EXIT_FAILURE;
        }
    }
    json_decref(cmp), json_decref(a), json_decref(b);
    return rc;
}

static int report_folder(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "trainrun: %s is not a folder\n", dir);
        return TR_EXIT_USAGE;
    }
    switch (tr_folder_kind(dir)) {
    case TR_FOLDER_RUN:
        return report_run(dir);
    case TR_FOLDER_RUNS:
        return report_runs(dir);
    case TR_FOLDER_RECIPE:
        fprintf(stderr, "trainrun: %s holds the runs of one recipe: give one of its run folders, or the "
                "folder above it (report.dir) for the runs index\n", dir);
        return TR_EXIT_USAGE;
    case TR_FOLDER_OTHER:
    default:
        fprintf(stderr, "trainrun: %s is not a run folder (it has neither metrics.jsonl nor plan.json) nor a "
                "folder of runs (report.dir, with NAME/STAMP run folders below it)\n", dir);
        return TR_EXIT_USAGE;
    }
}

int tr_cmd_report(int argc, char **argv)
{
    static const char *const flags[] = {"--help", "-h", NULL};
    static const char *const valued[] = {"--compare", "--html", NULL};
    if (argc < 1) {   /* argv: what follows "report" */
        fprintf(stderr, "trainrun: report needs a run folder, a folder of runs, or --compare RUN_A RUN_B\n%s",
                usage);
        return TR_EXIT_USAGE;
    }
    struct tr_args args;
    int rc = tr_args_start_valued(argc, argv, flags, valued, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    const char *compare = tr_args_value(&args, "--compare"), *html = tr_args_value(&args, "--html");
    if (args.noverrides) {
        fprintf(stderr, "trainrun: report takes folders and no overrides\n%s", usage);
        rc = TR_EXIT_USAGE;
    } else if (html && !compare) {
        fprintf(stderr, "trainrun: --html goes with --compare\n%s", usage);
        rc = TR_EXIT_USAGE;
    } else
        rc = compare ? compare_runs(compare, args.recipe, html) : report_folder(args.recipe);
    tr_args_free(&args);
    return rc;
}
