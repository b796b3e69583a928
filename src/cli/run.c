/* trainrun [run] RECIPE [key=value ...]: the default subcommand. Training arrives with the
 * engine and trainer (DESIGN.md §2); until then a run validates the recipe and says plainly
 * that it did not train, with the usage exit status so no script mistakes it for success. */
#include <stdio.h>

#include "cli/cli.h"
#include "core/exit.h"
#include "recipe/recipe.h"

int tr_cmd_run(int argc, char **argv)
{
    static const char *const flags[] = {NULL};
    static const char usage[] = "usage: trainrun [run] RECIPE [key=value | ~key ...]\n";
    struct tr_args args;
    int rc = tr_args_parse(argc, argv, flags, usage, &args);
    if (rc)
        return rc;
    struct tr_recipe recipe;
    struct tr_diag diag = {0};
    if (tr_cli_load_recipe(&args, &recipe, &diag) == TR_EXIT_OK)
        fprintf(stderr, "trainrun: %s is a valid recipe, but this version of trainrun cannot "
                "train yet; 'trainrun check %s' shows what it means\n", args.recipe, args.recipe);
    tr_diag_free(&diag);
    tr_recipe_free(&recipe);
    tr_args_free(&args);
    return TR_EXIT_USAGE;
}
