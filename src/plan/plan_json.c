/* plan.json (plan.h): the decision and what it rests on, for `trainrun plan --json`, the run
 * folder and the report; and the chosen knobs read back for `--plan FILE`. */
#include "plan/plan.h"

#include <jansson.h>
#include <string.h>

#include "core/input.h"

static const char *const remat_names[] = {"none", "selective", "full"};

static const char *const offload_names[] = {"off", "optimizer", "activations", "both"};   /* by TR_OFFLOAD_* bits */

/* What the candidate keeps in the host's memory, by region, and moves over the host link. */
static json_t *host_json(const struct tr_plan *p, const struct tr_candidate *c)
{
    json_t *regions = json_object();
    for (int r = 0; r < TR_NREGIONS; r++)
        if (c->host[r])
            json_object_set_new(regions, tr_region_name(r), json_integer((json_int_t)c->host[r]));
    return json_pack("{sI sI so sf sf sf}", "predicted_bytes", (json_int_t)c->host_bytes, "budget_bytes",
                     (json_int_t)p->host_budget, "regions", regions, "link_bytes_per_step", c->link_bytes,
                     "predicted_link_seconds", c->link_seconds, "predicted_link_exposed_seconds", c->link_exposed);
}

static json_t *candidate_json(const struct tr_plan *p, const struct tr_candidate *c)
{
    json_t *buckets = json_array(), *regions = json_object(), *out = json_object();
    for (int b = 0; b < c->k.nbuckets; b++)
        json_array_append_new(buckets, json_pack("{sIsI}", "max_len", (json_int_t)c->k.buckets[b].len, "rows",
                                                 (json_int_t)c->k.buckets[b].rows));
    for (int r = 0; r < TR_NREGIONS; r++)
        json_object_set_new(regions, tr_region_name(r), json_integer((json_int_t)c->regions[r]));
    for (int i = 0; i < TR_NOUTSIDE; i++)
        json_object_set_new(out, tr_outside_key(i), json_integer((json_int_t)c->outside[i]));
    json_t *j = json_pack("{ss s{sssisi} sb so sI sI sI ss sI sI sI sb sf sf sf sf sf sf so so}",
                     "precision", tr_precision_name(c->k.precision),
                     "checkpointing", "mode", remat_names[c->k.remat_mode], "blocks", c->k.remat_blocks, "of",
                     p->blocks,
                     "dynamic_batching", c->k.dynamic, "micro_batch", buckets,
                     "micro", (json_int_t)c->k.micro, "accumulation", (json_int_t)c->k.accumulation,
                     "eval_batch", (json_int_t)c->k.eval_batch, "shard", tr_shard_name(c->k.shard),
                     "predicted_peak_bytes", (json_int_t)c->peak, "predicted_footprint_bytes",
                     (json_int_t)c->footprint, "budget_bytes", (json_int_t)p->budget, "fits", c->fits,
                     "predicted_step_seconds", c->step_seconds, "predicted_comm_seconds", c->comm_seconds,
                     "micro_steps", c->micro_steps,
                     "padding_fraction", c->padding, "flops", c->flops, "bytes_moved", c->bytes_moved,
                     "regions", regions, "outside", out);
    json_object_set_new(j, "offload", json_string(offload_names[c->k.offload & 3]));
    if (c->k.offload & TR_OFFLOAD_SAVED) {   /* the blocks whose activations go, every one: the model's; and
                                              * the share of their bytes the largest make, all: 100 */
        bool some = c->k.saved_blocks > 0 && c->k.saved_blocks < p->blocks;
        json_object_set_new(j, "offload_blocks", json_integer(some ? c->k.saved_blocks : p->blocks));
        some = c->k.saved_largest > 0 && c->k.saved_largest < 100;
        json_object_set_new(j, "offload_largest", json_integer(some ? c->k.saved_largest : 100));
    }
    json_object_set_new(j, "host", host_json(p, c));
    return j;
}

/* Pipelined: the layout, each stage's blocks, regions and time, the bubble. */
static void pipeline_json(json_t *j, const struct tr_candidate *c)
{
    if (c->k.pipeline < 2)
        return;
    json_t *stages = json_array();
    for (int s = 0; s < c->k.pipeline; s++)
        json_array_append_new(stages, json_pack("{sisisIsIsfsf}", "first_block", c->k.first_block[s], "blocks",
                                                c->k.first_block[s + 1] - c->k.first_block[s], "predicted_peak_bytes",
                                                (json_int_t)c->stage[s].peak, "predicted_footprint_bytes",
                                                (json_int_t)c->stage[s].footprint, "predicted_micro_seconds",
                                                c->stage[s].seconds, "sent_bytes_per_micro", c->stage[s].sent_bytes));
    json_object_set_new(j, "pipeline", json_pack("{sisosfsI}", "stages", c->k.pipeline, "stage", stages,
                                                 "predicted_bubble", c->bubble, "worst_footprint_bytes",
                                                 (json_int_t)c->worst_footprint));
}

/* Tensor parallel: the ranks a block is split over, whether the sequence is too (sequence
 * parallelism), and what their collectives sum or gather a step. */
static void tensor_json(json_t *j, const struct tr_candidate *c)
{
    if (c->k.tensor < 2)
        return;
    json_object_set_new(j, "tensor", json_pack("{sisbsfsf}", "ranks", c->k.tensor, "sequence", c->k.sequence,
                                               "allreduce_bytes_per_step", c->tensor_bytes,
                                               "predicted_allreduce_seconds", c->tensor_seconds));
}

char *tr_plan_to_json(const struct tr_plan *p, bool all_candidates, const char *recipe_hash)
{
    int show = p->chosen >= 0 ? p->chosen : p->smallest;
    json_t *j = show >= 0 ? candidate_json(p, &p->cand[show]) : json_object();
    if (show >= 0)
        pipeline_json(j, &p->cand[show]), tensor_json(j, &p->cand[show]);
    if (show < 0)
        json_object_set_new(j, "fits", json_false());
    json_object_set_new(j, "budget_bytes", json_integer((json_int_t)p->budget));
    json_object_set_new(j, "reason", json_string(p->reason));
    json_object_set_new(j, "replayed", json_boolean(p->replayed));
    if (p->chosen < 0 && p->smallest >= 0)
        json_object_set_new(j, "minimum_budget_bytes", json_integer((json_int_t)p->cand[p->smallest].footprint));
    json_object_set_new(j, "device", json_pack("{ss ss sI sf ss ss}", "name", p->dev.name, "description",
                                               p->dev.description, "memory_bytes", (json_int_t)p->dev.memory,
                                               "host_link_bytes_per_second", tr_device_host_link(&p->dev),
                                               "source", p->dev.source, "calibration", p->dev.path.s));
    if (recipe_hash)
        json_object_set_new(j, "recipe_sha256", json_string(recipe_hash));
    json_object_set_new(j, "candidates_considered", json_integer(p->ncand));
    if (all_candidates) {
        json_t *all = json_array();
        for (int i = 0; i < p->ncand; i++)
            json_array_append_new(all, candidate_json(p, &p->cand[i]));
        json_object_set_new(j, "candidates", all);
    }
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    return s;
}

static int name_index(const char *name, const char *const *names, int n)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

int tr_plan_read_knobs(const char *path, struct tr_knobs *k, struct tr_diag *diag)
{
    json_error_t je;
    struct tr_diag why = {0};
    FILE *in = tr_fopen_regular(path, &why);   /* a FIFO would block, /dev/zero never end */
    if (!in)
        return tr_fail_because(diag, TR_EIO, &why, "%s", path);
    json_t *j = json_loadf(in, 0, &je), *buckets = NULL;
    fclose(in);
    if (!j) {
        return tr_fail(diag, TR_EIO, "%s:%d: %s", path, je.line, je.text);
    }
    memset(k, 0, sizeof *k);
    const char *precision = NULL, *mode = NULL;
    int blocks = 0, dynamic = 0;
    json_int_t micro = 0, accumulation = 0, eval_batch = 0;
    static const char *const precisions[] = {"fp32", "bf16", "fp16"};
    int rc = json_unpack_ex(j, &je, 0, "{ss s{sssi} sb so sI sI sI}", "precision", &precision, "checkpointing",
                            "mode", &mode, "blocks", &blocks, "dynamic_batching", &dynamic, "micro_batch",
                            &buckets, "micro", &micro, "accumulation", &accumulation, "eval_batch", &eval_batch);
    if (rc) {
        rc = tr_fail(diag, TR_EINVAL, "%s: not a plan: %s", path, je.text);
    } else if ((k->precision = name_index(precision, precisions, 3)) < 0 ||
               (k->remat_mode = name_index(mode, remat_names, 3)) < 0) {
        rc = tr_fail(diag, TR_EINVAL, "%s: unknown precision '%s' or checkpointing '%s'", path, precision,
                     mode);
    } else if (!json_is_array(buckets) || json_array_size(buckets) < 1 ||
               json_array_size(buckets) > TR_PLAN_MAX_BUCKETS || micro < 1 || eval_batch < 1 || blocks < 0 ||
               (!dynamic && (accumulation < 1 || json_array_size(buckets) != 1))) {
        rc = tr_fail(diag, TR_EINVAL, "%s: the plan's micro-batches are out of range", path);
    }
    size_t i;
    json_t *b;
    json_array_foreach(rc ? NULL : buckets, i, b) {
        json_int_t len = 0, rows = 0;
        if (json_unpack(b, "{sIsI}", "max_len", &len, "rows", &rows) || len < 1 || rows < 1) {
            rc = tr_fail(diag, TR_EINVAL, "%s: micro_batch[%zu] needs max_len and rows ≥ 1", path, i);
            break;
        }
        k->buckets[i] = (struct tr_length_bucket){len, rows};
    }
    /* plans written before sharding have no "shard": off */
    const char *shard = json_string_value(json_object_get(j, "shard"));
    if (!rc && shard && (k->shard = name_index(shard, (const char *const[]){"off", "optimizer", "gradients", "parameters"}, 4)) < 0)
        rc = tr_fail(diag, TR_EINVAL, "%s: unknown shard '%s' (off, optimizer, gradients or parameters)", path, shard);
    /* pipelined: the stages and their blocks; plans written before pipelines have none */
    json_t *piped = json_object_get(json_object_get(j, "pipeline"), "stage");
    k->pipeline = 1;
    if (!rc && json_is_array(piped) && json_array_size(piped) >= 2 && json_array_size(piped) <= TR_MAX_STAGES) {
        k->pipeline = (int)json_array_size(piped);
        json_t *one;
        json_array_foreach(piped, i, one) {
            json_int_t first = -1, count = -1;
            if (json_unpack(one, "{sIsI}", "first_block", &first, "blocks", &count) || first < 0 || count < 1) {
                rc = tr_fail(diag, TR_EINVAL, "%s: pipeline stage %zu needs first_block ≥ 0 and blocks ≥ 1", path, i);
                break;
            }
            k->first_block[i] = (int)first, k->first_block[i + 1] = (int)(first + count);
        }
    }
    /* tensor parallel: the ranks a block is split over; plans written before it have none */
    json_t *tensor = json_object_get(json_object_get(j, "tensor"), "ranks");
    k->tensor = 1;
    if (!rc && tensor && (!json_is_integer(tensor) || json_integer_value(tensor) < 1 || json_integer_value(tensor) > 64))
        rc = tr_fail(diag, TR_EINVAL, "%s: tensor.ranks must be an integer from 1 to 64", path);
    else if (!rc && tensor)
        k->tensor = (int)json_integer_value(tensor);
    json_t *sequence = json_object_get(json_object_get(j, "tensor"), "sequence");   /* none before it: off */
    if (!rc && sequence && !json_is_boolean(sequence))
        rc = tr_fail(diag, TR_EINVAL, "%s: tensor.sequence must be true or false", path);
    k->sequence = !rc && k->tensor > 1 && json_is_true(sequence);
    const char *offload = json_string_value(json_object_get(j, "offload"));   /* none before it: off */
    if (!rc && offload && (k->offload = name_index(offload, offload_names, 4)) < 0)
        rc = tr_fail(diag, TR_EINVAL, "%s: unknown offload '%s' (off, optimizer, activations or both)", path, offload);
    json_t *saved = json_object_get(j, "offload_blocks");   /* none before it: every block's */
    if (!rc && saved && (!json_is_integer(saved) || json_integer_value(saved) < 0 || json_integer_value(saved) > 1 << 20))
        rc = tr_fail(diag, TR_EINVAL, "%s: offload_blocks must be a whole number of blocks", path);
    else if (!rc && saved)
        k->saved_blocks = (int)json_integer_value(saved);
    json_t *largest = json_object_get(j, "offload_largest");   /* none before it: all of them */
    if (!rc && largest && (!json_is_integer(largest) || json_integer_value(largest) < 1 || json_integer_value(largest) > 100))
        rc = tr_fail(diag, TR_EINVAL, "%s: offload_largest must be a percentage from 1 to 100", path);
    else if (!rc && largest)
        k->saved_largest = (int)json_integer_value(largest);
    if (!rc) {
        k->remat_blocks = blocks, k->dynamic = dynamic, k->nbuckets = (int)json_array_size(buckets);
        k->micro = micro, k->accumulation = accumulation, k->eval_batch = eval_batch;
    }
    json_decref(j);
    return rc ? TR_EINVAL : 0;
}
