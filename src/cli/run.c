/* trainrun [run] RECIPE [key=value ...] [--plan FILE] [--quiet] [--if-data-changed]: the default
 * subcommand. Loads the recipe (with --if-data-changed, stops there when no data source changed
 * since its last good run: data_changed.c), trains it (src/train/trainer.c) with the planner's
 * choice or the saved plan FILE into a run folder, and exits with the trainer's status. */
#include <stdio.h>

#include "cli/cli.h"
#include "core/exit.h"
#include "recipe/recipe.h"

static const char usage[] = "usage: trainrun [run] RECIPE [key=value | ~key ...] [--plan FILE] [--quiet]\n"
                            "                [--if-data-changed]\n";

int tr_cmd_run(int argc, char **argv)
{
    static const char *const flags[] = {"--quiet", "-q", "--if-data-changed", "--help", "-h", NULL};
    static const char *const valued[] = {"--plan", NULL};
    struct tr_args args;
    int rc = tr_args_start_valued(argc, argv, flags, valued, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    struct tr_recipe recipe;
    struct tr_diag diag = {0};
    rc = tr_cli_load_recipe(&args, &recipe, &diag);
    if (rc == TR_EXIT_OK && tr_args_has(&args, "--if-data-changed"))
        rc = tr_cli_data_unchanged(&recipe, &diag);
    if (rc == TR_EXIT_OK)
        rc = tr_cli_train(&recipe, &args, NULL, &diag);
    tr_diag_free(&diag);
    tr_recipe_free(&recipe);
    tr_args_free(&args);
    return rc;
}
