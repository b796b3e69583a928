/* trainrun resume RUN_DIR [--quiet]: continue an interrupted run in its own folder, from its
 * newest checkpoint that verifies, with the recipe it recorded (RUN_DIR/recipe.yaml, already
 * resolved: conf files are not read again, so a changed conf cannot change a run halfway).
 * It holds the recipe's lock as a run does; `trainrun RECIPE --resume auto` comes here too. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "recipe/recipe.h"
#include "dist/comm.h"
#include "train/run_folder.h"
#include "train/runs.h"

static const char usage[] = "usage: trainrun resume RUN_DIR [optimize.parallel.KEY=VALUE ...] [--quiet]\n";

/* The overrides a resume takes: the ranks' layout alone (optimize.parallel.*), which changes how
 * the run trains, not what — its checkpoints hold whole tensors, the same on any layout. */
static bool layout_only(const struct tr_args *a)
{
    static const char prefix[] = "optimize.parallel";
    for (int i = 0; i < a->noverrides; i++) {
        const char *o = a->overrides[i] + (a->overrides[i][0] == '~');
        if (strncmp(o, prefix, sizeof prefix - 1) || (o[sizeof prefix - 1] != '.' && o[sizeof prefix - 1] != '='))
            return false;
    }
    return true;
}

int tr_cli_resume_dir(struct tr_comm *comm, const char *dir, const struct tr_args *a, struct tr_diag *diag)
{
    char *path = tr_strdup_printf("%s/recipe.yaml", dir);
    struct tr_recipe recipe;
    struct tr_recipe_sources src = {.recipe = path};
    int rc;
    if (access(path, R_OK)) {
        fprintf(stderr, "trainrun: %s is not a run folder: it has no readable recipe.yaml\n", dir);
        free(path);
        return TR_EXIT_USAGE;
    }
    if (tr_recipe_load(&recipe, &src, diag) || tr_run_folder_check_recipe(dir, &recipe, diag)) {
        tr_diag_print(diag, stderr);   /* an edited recipe.yaml: refused before anything is touched */
        rc = TR_EXIT_USAGE;
    } else if (a->noverrides && (tr_recipe_free(&recipe), src.overrides = a->overrides, src.noverrides = a->noverrides,
                                 tr_recipe_load(&recipe, &src, diag))) {
        tr_diag_print(diag, stderr);   /* the layout's overrides (tr_cmd_resume let no other through) */
        rc = TR_EXIT_USAGE;
    } else {
        tr_cli_watch_ranks(comm, &recipe);   /* its distributed.timeout, unless the caller's recipe set one */
        rc = tr_cli_train(comm, &recipe, a, dir, diag);
    }
    tr_recipe_free(&recipe);
    free(path);
    return rc;
}

/* RUN_DIR as the run folder itself, so that the run knows its own name (promotion and retention
 * go by names): `runs/mlp/latest` is the folder the link names, `runs/mlp/x/` is `runs/mlp/x`,
 * and `.` is the absolute path of the folder. */
static int run_folder(const char *given, struct tr_path *out, struct tr_diag *d)
{
    struct stat st;
    struct tr_path target, parent;
    ssize_t n;
    int rc = tr_path_set(out, d, "%s", given);
    for (size_t len = strlen(out->s); len > 1 && out->s[len - 1] == '/'; len--)
        out->s[len - 1] = '\0';
    if (!rc && lstat(out->s, &st) == 0 && S_ISLNK(st.st_mode) &&
        (n = readlink(out->s, target.s, sizeof target.s - 1)) > 0) {
        target.s[n] = '\0';
        rc = tr_runs_parent(out->s, &parent, d);
        if (!rc)
            rc = target.s[0] == '/' ? tr_path_set(out, d, "%s", target.s)
                                    : tr_path_set(out, d, "%s/%s", parent.s, target.s);
    }
    const char *base = strrchr(out->s, '/') ? strrchr(out->s, '/') + 1 : out->s;
    char *real = rc || tr_runs_is_run_name(base) ? NULL : realpath(out->s, NULL);
    if (real)
        rc = tr_path_set(out, d, "%s", real);
    free(real);
    return rc;
}

/* A run folder whose setting up failed (a full disk) or was killed before training began: it
 * holds some of a run's first files, but no run.json. */
static bool never_started(const char *dir)
{
    static const char *const firsts[] = {"recipe.yaml", "checkpoints", "log.txt", "plan.json", NULL};
    struct stat st;
    bool some = false;
    for (int i = 0; firsts[i] && !some; i++) {
        char *path = tr_strdup_printf("%s/%s", dir, firsts[i]);
        some = lstat(path, &st) == 0;
        free(path);
    }
    return some && tr_runs_state(dir) == TR_RUN_NEVER_STARTED;
}

int tr_cmd_resume(int argc, char **argv)
{
    static const char *const flags[] = {"--quiet", "-q", "--help", "-h", NULL};
    struct tr_args args;
    int rc = tr_args_start(argc, argv, flags, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    if (!layout_only(&args)) {
        fprintf(stderr, "trainrun: resume continues a run as it was recorded; it takes no overrides but the ranks' "
                "layout (optimize.parallel.*)\n%s", usage);
        tr_args_free(&args);
        return TR_EXIT_USAGE;
    }
    struct tr_path dir, runs, path;
    struct tr_diag diag = {0};
    rc = run_folder(args.recipe, &dir, &diag);
    if (!rc)
        rc = tr_path_set(&path, &diag, "%s/recipe.yaml", dir.s);
    if (!rc)
        rc = tr_runs_parent(dir.s, &runs, &diag);
    bool unborn = !rc && never_started(dir.s);
    if (rc) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&diag));
    } else if (!unborn && access(path.s, R_OK)) {   /* before the lock: a wrong folder gets no .lock beside it */
        fprintf(stderr, "trainrun: %s is not a run folder: it has no readable recipe.yaml\n", args.recipe);
        rc = TR_EINVAL;
    }
    struct tr_runs_lock lock = {.fd = -1};
    struct tr_comm comm = {.world = 1};
    rc = tr_exit_status(rc);
    if (rc == TR_EXIT_OK)
        rc = tr_cli_open_ranks(&comm);
    if (rc == TR_EXIT_OK && comm.rank == 0)   /* one lock for all ranks: rank 0's */
        rc = tr_cli_lock(runs.s, &lock);
    if (comm.world > 1)
        rc = tr_comm_agree(&comm, rc, "taking the recipe's lock", &diag);
    if (rc == TR_EXIT_OK && unborn) {   /* after the lock: a run still setting this folder up holds it (75) */
        if (comm.rank == 0)
            fprintf(stderr, "trainrun: %s never started: it has no run.json (setting it up failed, or was cut "
                    "short, before training began), so there is nothing to resume; start a new run of its "
                    "recipe instead\n", args.recipe);
        rc = TR_EXIT_USAGE;
    }
    if (rc == TR_EXIT_OK)
        rc = tr_cli_resume_dir(&comm, dir.s, &args, &diag);
    tr_runs_unlock(&lock);
    tr_comm_close(&comm);
    tr_diag_free(&diag);
    tr_args_free(&args);
    return rc;
}
