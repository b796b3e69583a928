/* trainrun check RECIPE [key=value ...] [--json]: load and validate a recipe (and its inline
 * data's formats, fields and options, as the data stage would before reading a file), print it
 * resolved with each value's origin. Runs nothing; exit 0 when valid, 2 otherwise. */
#include <jansson.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "data/dataset.h"
#include "recipe/recipe.h"

static const char usage[] =
    "usage: trainrun check RECIPE [key=value | ~key ...] [--json]\n";

static void print_errors_json(const struct tr_diag *diag)
{
    json_t *errors = json_array();
    for (int i = 0; i < diag->n; i++) {
        const struct tr_where *w = &diag->items[i].where;
        char *line = tr_diag_line(diag, i);
        json_t *e = json_pack("{ss ss}", "message", diag->items[i].message, "text", line);
        if (w->arg)
            json_object_set_new(e, "argument", json_string(w->arg));
        if (w->file)
            json_object_set_new(e, "file", json_string(w->file));
        if (w->line)
            json_object_set_new(e, "line", json_integer(w->line)),
            json_object_set_new(e, "col", json_integer(w->col));
        json_array_append_new(errors, e);
        free(line);
    }
    json_t *doc = json_pack("{sbso}", "ok", 0, "errors", errors);
    json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    putchar('\n');
    json_decref(doc);
}

int tr_cmd_check(int argc, char **argv)
{
    static const char *const flags[] = {"--json", "--help", "-h", NULL};
    struct tr_args args;
    int rc = tr_args_start(argc, argv, flags, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    struct tr_recipe recipe;
    struct tr_diag diag = {0};
    bool json = tr_args_has(&args, "--json");
    rc = tr_cli_load_recipe(&args, &recipe, &diag);
    if (!rc && tr_data_check_inline(&recipe, &diag)) {
        if (!json) {
            tr_diag_print(&diag, stderr);
            fprintf(stderr, "trainrun: %s: %d error%s; nothing was run\n", args.recipe, diag.n, diag.n == 1 ? "" : "s");
        }
        rc = TR_EXIT_USAGE;
    }
    if (rc) {
        if (json)
            print_errors_json(&diag);
    } else if (json) {
        char *text = tr_recipe_to_json(&recipe);
        puts(text);
        free(text);
    } else {
        printf("# %s resolved by trainrun check: defaults < conf files < recipe < overrides.\n"
               "# Each comment says where the value came from. This output is a valid recipe.\n",
               args.recipe);
        tr_recipe_write_yaml(&recipe, stdout);
    }
    tr_diag_free(&diag);
    tr_recipe_free(&recipe);
    tr_args_free(&args);
    if (fflush(stdout) || ferror(stdout)) {
        perror("trainrun: writing the output");
        return TR_EXIT_FAILURE;
    }
    return rc;
}
