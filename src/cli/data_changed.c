/* --if-data-changed (run.c): refresh the data (fetch what changed, src/data/), then compare
 * what identifies every source with the data-sources.json of the newest successful run of this
 * recipe, report.dir/<name>/<stamp>/ with run.json's exit_code 0 (or report.json's status
 * "finished"). The same: exit 7, untrained. And for --resume auto: whether the data moved on
 * since an interrupted run began. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "data/dataset.h"
#include "recipe/recipe.h"

/* Run folders newest first: "YYYYmmdd-HHMMSS", then its "-N" for more runs in that second. */
static int newer_first(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int c = strncmp(y, x, 15);
    return c ? c : atoi(y[15] == '-' ? y + 16 : "1") - atoi(x[15] == '-' ? x + 16 : "1");
}

static json_t *load_in(const char *dir, const char *name)
{
    char *path = tr_strdup_printf("%s/%s", dir, name);
    json_t *j = json_load_file(path, 0, NULL);
    free(path);
    return j;
}

/* run.json's exit_code 0; or, where run.json says nothing, report.json's status "finished". */
static bool succeeded(const char *run_dir)
{
    json_t *run = load_in(run_dir, "run.json"), *code = json_object_get(run, "exit_code"), *report = NULL;
    bool ok;
    if (json_is_integer(code))
        ok = json_integer_value(code) == TR_EXIT_OK;
    else {
        report = load_in(run_dir, "report.json");
        const char *status = json_string_value(json_object_get(report, "status"));
        ok = status && !strcmp(status, "finished");
    }
    json_decref(run);
    json_decref(report);
    return ok;
}

/* The data-sources.json of the newest run of dir that succeeded, or NULL; *which names that run
 * (caller frees). */
static json_t *last_good_sources(const char *dir, char **which)
{
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (strlen(e->d_name) >= 15 && e->d_name[8] == '-' && strspn(e->d_name, "0123456789") == 8) {
            names = tr_xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = tr_strdup(e->d_name);
        }
    if (d)
        closedir(d);
    qsort(names, n, sizeof *names, newer_first);
    json_t *found = NULL;
    *which = NULL;
    for (size_t i = 0; i < n && !*which; i++) {
        char *run_dir = tr_strdup_printf("%s/%s", dir, names[i]);
        if (succeeded(run_dir)) {
            found = load_in(run_dir, "data-sources.json");
            *which = run_dir;
        } else
            free(run_dir);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return found;
}

int tr_cli_data_unchanged(const struct tr_recipe *r, struct tr_diag *diag)
{
    struct tr_data data;
    int err = tr_data_refresh(r, tr_cli_datasets_dir(), &data, diag);
    if (err) {
        tr_cli_print_diag(diag);
        return err == TR_EINTERRUPTED ? TR_EXIT_INTERRUPTED : TR_EXIT_DATA;
    }
    tr_data_print_warnings(&data, stderr);
    char *runs = tr_strdup_printf("%s/%s", r->report.dir, r->name), *which;
    json_t *now = tr_data_sources_json(&data), *then = last_good_sources(runs, &which);
    int rc = TR_EXIT_OK;
    if (then && tr_data_sources_same(now, then)) {
        printf("%s: no data source changed since %s (%d file%s); not training (--if-data-changed)\n", r->name,
               which, data.norigins, data.norigins == 1 ? "" : "s");
        rc = TR_EXIT_UNCHANGED;
    }
    json_decref(now);
    json_decref(then);
    free(which);
    free(runs);
    tr_data_free(&data);
    return rc;
}

const char *tr_cli_data_moved_on(const struct tr_recipe *r, const char *dir, char *what, size_t size)
{
    struct tr_diag quiet = {0};
    struct tr_data data;
    const char *changed = NULL;
    if (!tr_data_refresh(r, tr_cli_datasets_dir(), &data, &quiet)) {
        changed = tr_data_changed_since(&data, dir, what, size);
        tr_data_free(&data);
    }
    tr_diag_free(&quiet);
    return changed;
}
