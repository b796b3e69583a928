/* trainrun [run] RECIPE [key=value ...] [--plan FILE] [--resume auto] [--if-data-changed] [--quiet]:
 * the default subcommand. Loads the recipe, takes its lock (one run per recipe at a time), then
 * runs the stages (tr_cli_train, train.c: the whole run in one screen, which `trainrun resume`
 * calls too) and exits with the status of how it ended. --resume auto
 * (cron) first continues the recipe's newest run when that one was interrupted;
 * --if-data-changed stops before training when no data source changed since the recipe's last
 * good run (data_changed.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "core/stop.h"
#include "dist/comm.h"
#include "recipe/recipe.h"
#include "report/notify.h"
#include "train/finish.h"
#include "train/loop.h"
#include "train/run_folder.h"
#include "train/runs.h"
#include "train/session.h"
#include "train/weights.h"

static const char usage[] =
    "usage: trainrun [run] RECIPE [key=value | ~key ...] [--plan FILE] [--resume auto] [--if-data-changed]\n"
    "                [--quiet]\n";

/* Is the run folder dir's recorded recipe the one given now? A recipe edited since (or other
 * overrides) makes a new run rather than finishing the old job. */
static int same_recipe(const char *dir, const struct tr_recipe *now)
{
    char *path = tr_strdup_printf("%s/recipe.yaml", dir);
    struct tr_recipe then;
    struct tr_diag diag = {0};
    struct tr_recipe_sources src = {.recipe = path};
    int same = 0;
    if (tr_recipe_load(&then, &src, &diag) == 0) {   /* the values, not where each came from */
        char *a = tr_recipe_to_json(&then), *b = tr_recipe_to_json(now);
        json_t *x = json_loads(a, 0, NULL), *y = json_loads(b, 0, NULL);
        same = json_equal(json_object_get(x, "recipe"), json_object_get(y, "recipe"));
        json_decref(x), json_decref(y);
        free(a), free(b);
    }
    tr_diag_free(&diag);
    tr_recipe_free(&then);
    free(path);
    return same;
}

/* --resume auto: the newest run folder of the recipe in runs when it was interrupted (killed,
 * or stopped by a signal: run.json's last part has no exit code, or 130; a folder without
 * run.json never started, and is passed by), recorded this recipe
 * and its data has not changed since, into dir; 0 when a new run should start (none, it
 * finished, it failed, or it would read other data than it began with). */
static int interrupted_run(const char *runs, const struct tr_recipe *r, int quiet, struct tr_path *dir)
{
    char **names = tr_runs_list(runs);
    int n = 0;
    while (names && names[n])
        n++;
    if (n == 0) {
        tr_runs_free_list(names);
        return 0;
    }
    struct tr_diag diag = {0};
    int too_long = tr_path_set(dir, &diag, "%s/%s", runs, names[n - 1]);
    tr_diag_free(&diag);
    tr_runs_free_list(names);
    if (too_long)   /* runs itself fitted: a name of 15–18 characters cannot be the problem */
        return 0;
    enum tr_run_state state = tr_runs_state(dir->s);
    const char *why = NULL, *detail = NULL;
    char changed[1024];
    if (state == TR_RUN_NEVER_STARTED)
        why = "never started (its setting up failed or was cut short)";
    else if (state == TR_RUN_FINISHED)
        why = "finished";
    else if (state == TR_RUN_FAILED)
        why = "failed (a failed run is not resumed)";
    else if (!same_recipe(dir->s, r))
        why = "was interrupted, but recorded another recipe";
    else if (tr_cli_data_moved_on(r, dir->s, changed, sizeof changed))
        why = "was interrupted, but its data changed since it began", detail = changed;
    if (!quiet)
        printf("--resume auto: %s %s%s%s%s; %s\n", dir->s, why ? why : "was interrupted", detail ? " (" : "",
               detail ? detail : "", detail ? ")" : "", why ? "starting a new run" : "continuing it");
    return why == NULL;
}

/* Across ranks: rank 0's finding (whether to resume, and which folder) given to the others. */
static int follow_rank0(const struct tr_comm *comm, int *resumed, struct tr_path *dir, struct tr_diag *d)
{
    struct { int resumed; struct tr_path dir; } found = {*resumed, *dir};
    int rc = tr_comm_broadcast(comm, &found, sizeof found, d);
    *resumed = found.resumed, *dir = found.dir;
    return tr_exit_status(rc);
}

int tr_cmd_run(int argc, char **argv)
{
    static const char *const flags[] = {"--quiet", "-q", "--if-data-changed", "--help", "-h", NULL};
    static const char *const valued[] = {"--plan", "--resume", NULL};
    struct tr_args args;
    int rc = tr_args_start_valued(argc, argv, flags, valued, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    const char *resume = tr_args_value(&args, "--resume");
    if (resume && strcmp(resume, "auto")) {
        fprintf(stderr, "trainrun: --resume takes 'auto'; to continue one run folder: trainrun resume RUN_DIR\n%s",
                usage);
        tr_args_free(&args);
        return TR_EXIT_USAGE;
    }
    int quiet = tr_args_has(&args, "--quiet") || tr_args_has(&args, "-q");
    struct tr_recipe recipe;
    struct tr_diag diag = {0};
    rc = tr_cli_load_recipe(&args, &recipe, &diag);
    struct tr_runs_lock lock = {.fd = -1};
    struct tr_path runs, dir;
    struct tr_comm comm = {.world = 1};
    if (rc == TR_EXIT_OK && tr_path_set(&runs, &diag, "%s/%s", recipe.report.dir, recipe.name)) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&diag));
        rc = TR_EXIT_USAGE;
    }
    if (rc == TR_EXIT_OK)
        rc = tr_cli_open_ranks(&comm);
    if (rc == TR_EXIT_OK)
        tr_cli_watch_ranks(&comm, &recipe);
    if (rc == TR_EXIT_OK && comm.rank == 0)   /* one lock for all ranks: rank 0's */
        rc = tr_cli_lock(runs.s, &lock);
    if (comm.world > 1)
        rc = tr_comm_agree(&comm, rc, "taking the recipe's lock", &diag);
    if (rc == TR_EXIT_OK)
        tr_stop_catch_always();   /* a signal during a refresh below ends the run with 130 too */
    /* rank 0 looks at the runs and the data; the others go where it goes */
    int resumed = rc == TR_EXIT_OK && resume && comm.rank == 0 && interrupted_run(runs.s, &recipe, quiet, &dir);
    if (rc == TR_EXIT_OK && comm.world > 1)
        rc = follow_rank0(&comm, &resumed, &dir, &diag);
    if (resumed)   /* an interrupted run goes on as it began, data and all */
        rc = tr_cli_resume_dir(&comm, dir.s, &args, &diag);
    if (!resumed && rc == TR_EXIT_OK && tr_args_has(&args, "--if-data-changed") && comm.rank == 0)
        rc = tr_cli_data_unchanged(&recipe, &diag);   /* 7: unchanged, 4: the refresh failed */
    if (!resumed && comm.world > 1 && tr_args_has(&args, "--if-data-changed"))
        rc = tr_comm_agree(&comm, rc, "looking at the data sources", &diag);
    if (!resumed && rc == TR_EXIT_OK)
        rc = tr_cli_train(&comm, &recipe, &args, NULL, &diag);
    tr_runs_unlock(&lock);
    tr_comm_close(&comm);
    tr_diag_free(&diag);
    tr_recipe_free(&recipe);
    tr_args_free(&args);
    return rc;
}
