/* trainrun plan RECIPE [key=value ...] [--device-profile NAME] [--plan FILE] [--ranks N] [--json]
 * [--explain]: what the planner would do, before anything runs — the candidates, their regions,
 * footprints and predicted step times, and the decision in one sentence; with --ranks, each rank's
 * (planned for its share of the batch) and the gradients' sum a step. Exit 0 when a plan fits, 3
 * when none does (naming the smallest budget that would). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "core/alloc.h"
#include "data/dataset.h"
#include "data/sha256.h"
#include "plan/plan.h"
#include "recipe/schema.h"

static const char usage[] =
    "usage: trainrun plan RECIPE [key=value | ~key ...] [--device-profile NAME] [--plan FILE]\n"
    "                     [--ranks N] [--json] [--explain]\n";

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

/* --ranks N: the ranks the plan is for (1 without it); 0 with a sentence when N is not one. */
static int ranks_of(const struct tr_args *a, struct tr_diag *diag)
{
    const char *text = tr_args_value(a, "--ranks");
    if (!text)
        return 1;
    char *end;
    long n = strtol(text, &end, 10);
    if (*end || n < 1 || n > 65536) {
        tr_diag_add(diag, (struct tr_where){0}, "--ranks: a whole number from 1 to 65536, not '%s'", text);
        return 0;
    }
    return (int)n;
}

/* What the ranks add to the plan: each one's share, its regions (sharded: its parts, exact for
 * each rank), and what they move a step — a ring's reduce-scatter or all-gather moves (N − 1) / N
 * of the parameters' bytes in and out of each rank: unsharded and ZeRO 1 one of each a step,
 * ZeRO 2 a reduce-scatter a micro-batch round and the parameters' all-gather, ZeRO 3 a
 * reduce-scatter and two all-gathers (the forward's and the backward's copies) a round. Timed
 * at the bus rate the last run with as many ranks on this host measured (run.json's ranks). */
static void ranks_words(const struct tr_plan *plan, const struct tr_recipe *r, int world, json_t **json)
{
    const struct tr_candidate *c = plan->chosen >= 0 ? &plan->cand[plan->chosen] : NULL;
    if (!c || world == 1 || !plan->shard_elements)
        return;
    uint64_t bytes = 0;
    for (int k = 0; k < world; k++)
        bytes += (uint64_t)plan->shard_elements[k] * sizeof(float);
    double rounds = ceil(c->micro_steps), sums = c->k.shard == 3 ? 3 * rounds : c->k.shard == 2 ? rounds + 1 : 2;
    uint64_t moved = (uint64_t)(sums * (world - 1) / world * (double)bytes);
    static const char *const how[] = {"a reduce-scatter and an all-gather of the gradients",
                                      "a reduce-scatter of the gradients and an all-gather of the updated parameters",
                                      "a reduce-scatter of each round of micro-batches' gradients and an all-gather "
                                      "of the updated parameters",
                                      "two all-gathers of the parameters (the forward's copies and the backward's) "
                                      "and a reduce-scatter of the gradients each round of micro-batches"};
    json_t *each = json_array();
    if (!json) {
        printf("ranks: %d, each as planned above for %lld of the step's %lld samples (its regions exact); each "
               "step moves %.1f MiB in and out of each rank (%s; %.1f MiB of parameters), ", world,
               (long long)(r->train.batch_size / world), (long long)r->train.batch_size, (double)moved / 1048576,
               how[c->k.shard], (double)bytes / 1048576);
        if (c->comm_seconds > 0)
            printf("%.3f s a step at %.2f GB/s, the rate the last %d-rank run on this host measured (in the step "
                   "time above)\n", c->comm_seconds, plan->bus_rate / 1e9, world);
        else
            printf("which the step time above leaves out: no %d-rank run on this host has measured the rate yet "
                   "(a run measures it first)\n", world);
    }
    for (int k = 0; k < world; k++) {
        size_t state = c->k.shard && plan->shard_bytes ? plan->shard_bytes[k] : c->regions[TR_REGION_OPTIMIZER];
        size_t own = plan->shard_elements ? (size_t)plan->shard_elements[k] * sizeof(float) : 0;
        size_t grads = c->k.shard >= 2 && own ? own : c->regions[TR_REGION_GRADS];
        size_t params = c->k.shard == 3 && own ? own : c->regions[TR_REGION_PARAMS];
        json_array_append_new(each, json_pack("{si sI sI sI}", "rank", k, "optimizer_bytes", (json_int_t)state,
                                              "grads_bytes", (json_int_t)grads, "params_bytes", (json_int_t)params));
        if (!json)
            printf("  rank %d: parameters %zu bytes, optimizer state %zu bytes, gradients %zu bytes%s\n", k, params,
                   state, grads, c->k.shard == 3 ? " (its shards: ZeRO stage 3)" : c->k.shard == 2 ? " (its shards: ZeRO stage 2)"
                   : c->k.shard ? " (its shard: ZeRO stage 1)" : "");
    }
    if (json)
        *json = json_pack("{si sI sI sI ss sf sf so}", "world", world, "per_rank_batch",
                          (json_int_t)(r->train.batch_size / world), "gradient_bytes", (json_int_t)bytes,
                          "moved_bytes_per_rank", (json_int_t)moved, "shard", tr_shard_name(c->k.shard),
                          "bus_bytes_per_second", plan->bus_rate, "comm_seconds", c->comm_seconds, "each", each);
    else
        json_decref(each);
}

/* Plans (or replays) r on this host or the profile; prints; the exit status. */
static int plan_recipe(const struct tr_recipe *whole, const struct tr_args *a, struct tr_diag *diag)
{
    int world = ranks_of(a, diag);
    struct tr_recipe share;   /* what one rank plans for */
    if (!world || tr_cli_rank_share(world, whole, &share, diag))
        return TR_EXIT_USAGE;
    const struct tr_recipe *r = &share;
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
    } else {
        job.world = world;   /* rank 0's regions; the others' below */
        job.gather_ahead = world > 1 && tr_plan_overlap(r, world, dev.threads);   /* on one host, Open MPI's */
        job.bus_rate = world > 1 ? tr_plan_bus_rate_cached(world, &job.bus_latency) : 0;   /* the last such run's */
    }
    tr_diag_free(&err);
    double began = seconds_now(CLOCK_MONOTONIC), began_cpu = seconds_now(CLOCK_PROCESS_CPUTIME_ID);
    struct tr_recipe layout_share;   /* across ranks: the share of the layout searched */
    if (!rc && (saved ? tr_plan_replay(&plan, &job, &knobs, diag)
                : world > 1 ? tr_plan_search_layouts(&plan, &job, &layout_share, whole, world, diag)
                            : tr_plan_search(&plan, &job, diag)))
        rc = TR_EXIT_USAGE;
    double took = seconds_now(CLOCK_MONOTONIC) - began, cpu = seconds_now(CLOCK_PROCESS_CPUTIME_ID) - began_cpu;
    if (!rc) {
        char *json = tr_recipe_to_json(r), hash[65];
        tr_sha256_of(json, strlen(json), hash);
        free(json);
        if (tr_args_has(a, "--json")) {
            char *out = tr_plan_to_json(&plan, true, hash);
            json_t *j = json_loads(out, 0, NULL), *ranks = NULL;
            ranks_words(&plan, whole, world, &ranks);
            if (j && ranks)
                json_object_set_new(j, "ranks", ranks);
            char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
            printf("%s\n", text ? text : out);
            free(text), free(out);
            json_decref(j);
        } else {
            printf("%s: %s on %s\n", r->name, tr_keys[tr_key_find("model.arch")].names[r->model.arch], data.name);
            tr_plan_print(&plan, &job, tr_args_has(a, "--explain"), stdout);
            ranks_words(&plan, whole, world, NULL);
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
    static const char *const valued[] = {"--device-profile", "--plan", "--ranks", NULL};
    struct tr_args args;
    int rc = tr_args_start_valued(argc, argv, flags, valued, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    return tr_cli_on_recipe(&args, plan_recipe);
}
