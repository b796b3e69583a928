/* trainrun report RUN_DIR: writes a run's report.json, report.md and report.html again from
 * its folder (recipe.yaml, metrics.jsonl, plan.json), as the trainer wrote them at the run's
 * end; the status, exit code and duration come back from the old report.json. */
#include <stdio.h>

#include "cli/cli.h"
#include "core/exit.h"
#include "report/run_report.h"

static const char usage[] = "usage: trainrun report RUN_DIR\n";

int tr_cmd_report(int argc, char **argv)
{
    static const char *const flags[] = {"--help", "-h", NULL};
    struct tr_args args;
    int rc = tr_args_start(argc, argv, flags, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    if (args.noverrides) {
        fprintf(stderr, "trainrun: report takes one run folder and no overrides\n%s", usage);
        tr_args_free(&args);
        return TR_EXIT_USAGE;
    }
    char err[4400];
    struct tr_run_report rep;
    rc = tr_run_report_load(args.recipe, NULL, &rep, err, sizeof err);
    if (rc) {
        fprintf(stderr, "trainrun: %s\n", err);
        rc = TR_EXIT_USAGE;
    } else if (tr_run_report_write(&rep, err, sizeof err)) {
        fprintf(stderr, "trainrun: %s\n", err);
        rc = TR_EXIT_FAILURE;
    } else
        printf("%s/report.md\n%s/report.html\n%s/report.json\n", rep.dir, rep.dir, rep.dir);
    tr_run_report_free(&rep);
    tr_args_free(&args);
    return rc;
}
