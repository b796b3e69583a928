/* trainrun plan RECIPE [key=value ...] [--device-profile NAME] [--plan FILE] [--json] [--explain]:
 * what the planner would do, before anything runs — the candidates, their regions, footprints
 * and predicted step times, and the decision in one sentence. Exit 0 when a plan fits, 3 when
 * none does (naming the smallest budget that would). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "data/dataset.h"
#include "data/sha256.h"
#include "plan/plan.h"
#include "recipe/schema.h"

static const char usage[] =
    "usage: trainrun plan RECIPE [key=value | ~key ...] [--device-profile NAME] [--plan FILE]\n"
    "                     [--json] [--explain]\n";

static double seconds_now(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The data set, its warnings on stderr. */
static int load_data(const struct tr_recipe *r, struct tr_data *data, struct tr_diag *diag)
{
    int err = tr_data_load(r, tr_cli_datasets_dir(), data, diag);
    if (err)   /* out of memory is the host's failure (1), not the data's (4): trainrun(1) */
        return err == TR_ENOMEM ? TR_EXIT_FAILURE : TR_EXIT_DATA;
    tr_data_print_warnings(data, stderr);
    return 0;
}

/* Plans (or replays) r on this host or the profile; prints; the exit status. */
static int plan_recipe(const struct tr_recipe *r, const struct tr_args *a, struct tr_diag *diag)
{
    struct tr_data data;
    int rc = load_data(r, &data, diag);
    if (rc)
        return rc;
    struct tr_device dev;
    struct tr_plan_job job;
    struct tr_plan plan = {0};
    struct tr_diag err = {0};
    const char *profile = tr_args_value(a, "--device-profile"), *saved = tr_args_value(a, "--plan");
    struct tr_knobs knobs;
    /* the plan file first: a bad one is refused before the device is measured (seconds) */
    if (saved && tr_plan_read_knobs(saved, &knobs, &err)) {
        tr_diag_add(diag, (struct tr_where){0}, "--plan: %s", tr_diag_last(&err));
        rc = TR_EXIT_USAGE;
    } else if (profile ? tr_plan_device(&dev, profile, false, diag)   /* a machine one does not have */
                       : tr_plan_device_named(&dev, r->device, diag)) {    /* the recipe's own device */
        rc = profile ? TR_EXIT_USAGE : TR_EXIT_FAILURE;
    } else if (tr_plan_job_init(&job, r, &data, &dev, diag)) {
        rc = TR_EXIT_USAGE;
    }
    tr_diag_free(&err);
    double began = seconds_now(CLOCK_MONOTONIC), began_cpu = seconds_now(CLOCK_PROCESS_CPUTIME_ID);
    if (!rc && (saved ? tr_plan_replay(&plan, &job, &knobs, diag) : tr_plan_search(&plan, &job, diag)))
        rc = TR_EXIT_USAGE;
    double took = seconds_now(CLOCK_MONOTONIC) - began, cpu = seconds_now(CLOCK_PROCESS_CPUTIME_ID) - began_cpu;
    if (!rc) {
        char *json = tr_recipe_to_json(r), hash[65];
        tr_sha256_of(json, strlen(json), hash);
        free(json);
        if (tr_args_has(a, "--json")) {
            char *out = tr_plan_to_json(&plan, true, hash);
            printf("%s\n", out);
            free(out);
        } else {
            printf("%s: %s on %s\n", r->name, tr_keys[tr_key_find("model.arch")].names[r->model.arch], data.name);
            tr_plan_print(&plan, &job, tr_args_has(a, "--explain"), stdout);
            printf("\nplanned %d candidate%s in %.3f s (%.3f s of CPU)\n", plan.ncand, plan.ncand == 1 ? "" : "s",
                   took, cpu);
        }
        rc = plan.chosen >= 0 ? TR_EXIT_OK : TR_EXIT_NO_FIT;
        if (rc)
            fprintf(stderr, "trainrun: %s\n", plan.reason);
    }
    tr_plan_free(&plan);
    tr_data_free(&data);
    return rc;
}

int tr_cmd_plan(int argc, char **argv)
{
    static const char *const flags[] = {"--json", "--explain", "--help", "-h", NULL};
    static const char *const valued[] = {"--device-profile", "--plan", NULL};
    struct tr_args args;
    int rc = tr_args_start_valued(argc, argv, flags, valued, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    return tr_cli_on_recipe(&args, plan_recipe);
}
