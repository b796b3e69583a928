/* trainrun resume RUN_DIR [--quiet]: continue an interrupted run in its own folder, from its
 * newest checkpoint that verifies, with the recipe it recorded (RUN_DIR/recipe.yaml, already
 * resolved: conf files are not read again, so a changed conf cannot change a run halfway). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/exit.h"
#include "recipe/recipe.h"

static const char usage[] = "usage: trainrun resume RUN_DIR [--quiet]\n";

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
    char path[4200];
    snprintf(path, sizeof path, "%s/recipe.yaml", args.recipe);
    if (access(path, R_OK)) {
        fprintf(stderr, "trainrun: %s is not a run folder: it has no readable recipe.yaml\n", args.recipe);
        tr_args_free(&args);
        return TR_EXIT_USAGE;
    }
    struct tr_recipe recipe;
    struct tr_diag diag = {0};
    struct tr_recipe_sources src = {.recipe = path};
    if (tr_recipe_load(&recipe, &src, &diag)) {
        tr_diag_print(&diag, stderr);
        rc = TR_EXIT_USAGE;
    } else {
        rc = tr_cli_train(&recipe, &args, args.recipe, &diag);
    }
    tr_diag_free(&diag);
    tr_recipe_free(&recipe);
    tr_args_free(&args);
    return rc;
}
