/* Argument splitting shared by the subcommands that take a recipe and overrides, and the recipe
 * they name loaded over the conf files; the run itself is run.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "core/error.h"
#include "recipe/recipe.h"

/* The entry of valued that arg names, as "--name" or "--name=value" (*inline_value then points
 * after the '='), or NULL. */
static const char *valued_option(const char *arg, const char *const *valued, const char **inline_value)
{
    *inline_value = NULL;
    for (int v = 0; valued && valued[v]; v++) {
        size_t len = strlen(valued[v]);
        if (!strncmp(arg, valued[v], len) && (arg[len] == '\0' || arg[len] == '=')) {
            if (arg[len] == '=')
                *inline_value = arg + len + 1;
            return valued[v];
        }
    }
    return NULL;
}

static int parse(int argc, char **argv, const char *const *flags, const char *const *valued, const char *usage,
                 struct tr_args *a)
{
    memset(a, 0, sizeof *a);
    a->overrides = tr_xcalloc((size_t)argc + 1, sizeof *a->overrides);
    bool options_done = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *value, *name;
        if (!options_done && !strcmp(arg, "--")) {
            options_done = true;
        } else if (!options_done && (name = valued_option(arg, valued, &value))) {
            if (!value && i + 1 == argc) {
                fprintf(stderr, "trainrun: option '%s' needs a value\n%s", name, usage);
                return TR_EXIT_USAGE;
            }
            if (!value)
                value = argv[++i];
            int slot = 0;   /* one per name: a repeated option replaces its value */
            while (slot < a->nvalues && strcmp(a->value_names[slot], name))
                slot++;
            if (slot < 8) {
                a->value_names[slot] = name;
                a->values[slot] = value;
                a->nvalues += slot == a->nvalues;
            }
        } else if (!options_done && arg[0] == '-' && arg[1]) {
            int known = 0;
            for (int f = 0; flags[f] && !known; f++)
                known = !strcmp(arg, flags[f]);
            if (!known) {
                fprintf(stderr, "trainrun: unknown option '%s'\n%s", arg, usage);
                return TR_EXIT_USAGE;
            }
            if (a->nflags < 8)
                a->flags_seen[a->nflags++] = arg;
        } else if (!a->recipe && !strchr(arg, '=') && arg[0] != '~') {
            a->recipe = arg;
        } else if (strchr(arg, '=') || arg[0] == '~') {
            a->overrides[a->noverrides++] = argv[i];
        } else {
            fprintf(stderr, "trainrun: unexpected argument '%s': after the recipe come overrides "
                    "(key=value or ~key)\n%s", arg, usage);
            return TR_EXIT_USAGE;
        }
    }
    if (!a->recipe && !tr_args_has(a, "--help") && !tr_args_has(a, "-h")) {
        fprintf(stderr, "trainrun: no recipe file given\n%s", usage);
        return TR_EXIT_USAGE;
    }
    return TR_EXIT_OK;
}

int tr_args_parse(int argc, char **argv, const char *const *flags, const char *usage, struct tr_args *a)
{
    return parse(argc, argv, flags, NULL, usage, a);
}

int tr_args_start(int argc, char **argv, const char *const *flags, const char *usage, struct tr_args *a)
{
    return tr_args_start_valued(argc, argv, flags, NULL, usage, a);
}

int tr_args_start_valued(int argc, char **argv, const char *const *flags, const char *const *valued,
                         const char *usage, struct tr_args *a)
{
    int rc = parse(argc, argv, flags, valued, usage, a);
    if (!rc && !tr_args_has(a, "--help") && !tr_args_has(a, "-h"))
        return 0;
    if (!rc)
        fputs(usage, stdout);
    tr_args_free(a);
    return rc ? rc : -1;
}

int tr_args_has(const struct tr_args *a, const char *flag)
{
    for (int i = 0; i < a->nflags; i++)
        if (!strcmp(a->flags_seen[i], flag))
            return 1;
    return 0;
}

const char *tr_args_value(const struct tr_args *a, const char *name)
{
    for (int i = 0; i < a->nvalues; i++)
        if (!strcmp(a->value_names[i], name))
            return a->values[i];
    return NULL;
}

void tr_args_free(struct tr_args *a)
{
    free(a->overrides);
    a->overrides = NULL;
}

int tr_cli_load_recipe(const struct tr_args *a, struct tr_recipe *r, struct tr_diag *diag)
{
    struct tr_path system_conf, user_conf;
    struct tr_recipe_sources src;
    int rc = tr_recipe_default_sources(&src, &system_conf, &user_conf, diag);
    src.recipe = a->recipe;
    src.overrides = a->overrides;
    src.noverrides = a->noverrides;
    if (rc)
        tr_recipe_init(r);   /* the caller frees it whatever happens */
    else if (tr_recipe_load(r, &src, diag) == 0)
        return TR_EXIT_OK;
    tr_diag_print(diag, stderr);
    fprintf(stderr, "trainrun: %s: %d error%s; nothing was run\n", a->recipe, diag->n,
            diag->n == 1 ? "" : "s");
    return TR_EXIT_USAGE;
}

const char *tr_cli_datasets_dir(void)
{
    const char *env = getenv("TRAINRUN_DATASETS");
    if (env && *env)
        return env;
    return access("datasets", F_OK) == 0 ? "datasets" : PKGDATADIR "/datasets";
}

void tr_cli_print_diag(const struct tr_diag *diag)
{
    for (int i = 0; i < diag->n; i++) {
        char *line = tr_diag_line(diag, i);
        fprintf(stderr, "trainrun: %s\n", line);
        free(line);
    }
}

int tr_cli_on_recipe(struct tr_args *a, int (*fn)(const struct tr_recipe *r, const struct tr_args *a,
                                                  struct tr_diag *diag))
{
    struct tr_recipe recipe;
    struct tr_diag diag = {0};
    int rc = tr_cli_load_recipe(a, &recipe, &diag);
    if (rc == TR_EXIT_OK) {   /* a recipe that did not load has had its sentences printed */
        rc = fn(&recipe, a, &diag);
        tr_cli_print_diag(&diag);
    }
    tr_diag_free(&diag);
    tr_recipe_free(&recipe);
    tr_args_free(a);
    if (fflush(stdout) || ferror(stdout)) {
        perror("trainrun: writing the output");
        return TR_EXIT_FAILURE;
    }
    return rc;
}
