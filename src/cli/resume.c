/* trainrun resume RUN_DIR [--quiet]: continue an interrupted run in its own folder, from its
 * newest checkpoint that verifies, with the recipe it recorded (RUN_DIR/recipe.yaml, already
 * resolved: conf files are not read again, so a changed conf cannot change a run halfway).
 * It holds the recipe's lock as a run does; `trainrun RECIPE --resume auto` comes here too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "recipe/recipe.h"
#include "train/runs.h"

static const char usage[] = "usage: trainrun resume RUN_DIR [--quiet]\n";

int tr_cli_resume_dir(const char *dir, const struct tr_args *a, struct tr_diag *diag)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/recipe.yaml", dir);
    if (access(path, R_OK)) {
        fprintf(stderr, "trainrun: %s is not a run folder: it has no readable recipe.yaml\n", dir);
        return TR_EXIT_USAGE;
    }
    struct tr_recipe recipe;
    struct tr_recipe_sources src = {.recipe = path};
    int rc;
    if (tr_recipe_load(&recipe, &src, diag)) {
        tr_diag_print(diag, stderr);
        rc = TR_EXIT_USAGE;
    } else {
        rc = tr_cli_train(&recipe, a, dir, diag);
    }
    tr_recipe_free(&recipe);
    return rc;
}

/* RUN_DIR as the run folder itself, so that the run knows its own name (promotion and retention
 * go by names): `runs/mlp/latest` is the folder the link names, `runs/mlp/x/` is `runs/mlp/x`,
 * and `.` is the absolute path of the folder. */
static void run_folder(const char *given, char *out, size_t size)
{
    struct stat st;
    char target[2048], parent[2048];
    ssize_t n;
    snprintf(out, size, "%s", given);
    for (size_t len = strlen(out); len > 1 && out[len - 1] == '/'; len--)
        out[len - 1] = '\0';
    if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode) && (n = readlink(out, target, sizeof target - 1)) > 0) {
        target[n] = '\0';
        tr_runs_parent(out, parent, sizeof parent);
        if (target[0] == '/')
            snprintf(out, size, "%s", target);
        else
            snprintf(out, size, "%s/%s", parent, target);
    }
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    char *real = tr_runs_is_run_name(base) ? NULL : realpath(out, NULL);
    if (real)
        snprintf(out, size, "%s", real);
    free(real);
}

int tr_cmd_resume(int argc, char **argv)
{
    static const char *const flags[] = {"--quiet", "-q", "--help", "-h", NULL};
    struct tr_args args;
    int rc = tr_args_start(argc, argv, flags, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    if (args.noverrides) {
        fprintf(stderr, "trainrun: resume continues a run as it was recorded; it takes no overrides\n%s", usage);
        tr_args_free(&args);
        return TR_EXIT_USAGE;
    }
    char dir[4200], runs[4200], path[4300];
    run_folder(args.recipe, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/recipe.yaml", dir);
    if (access(path, R_OK)) {   /* before the lock: a wrong folder gets no .lock beside it */
        fprintf(stderr, "trainrun: %s is not a run folder: it has no readable recipe.yaml\n", args.recipe);
        tr_args_free(&args);
        return TR_EXIT_USAGE;
    }
    tr_runs_parent(dir, runs, sizeof runs);
    struct tr_runs_lock lock;
    struct tr_diag diag = {0};
    rc = tr_cli_lock(runs, &lock);
    if (rc == TR_EXIT_OK) {
        rc = tr_cli_resume_dir(dir, &args, &diag);
        tr_runs_unlock(&lock);
    }
    tr_diag_free(&diag);
    tr_args_free(&args);
    return rc;
}
