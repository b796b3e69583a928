/* The run's opening records for TensorBoard (tensorboard.h). */
#include "report/tensorboard.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/graphdef.h"

const char *const tr_tb_hparam_keys[] = {
    "seed", "model.arch", "model.layers", "model.hidden", "model.dropout", "data.dataset",
    "train.batch_size", "train.optimizer.name", "train.optimizer.lr", "train.optimizer.weight_decay",
    "train.optimizer.momentum", "train.schedule.name", "train.grad_clip", NULL,
};

/* The recipe's value at a dotted key in its JSON form, or NULL. */
static json_t *lookup(json_t *root, const char *dotted)
{
    char key[128];
    snprintf(key, sizeof key, "%s", dotted);
    json_t *at = root;
    for (char *part = strtok(key, "."); part && at; part = strtok(NULL, "."))
        at = json_is_object(at) ? json_object_get(at, part) : NULL;
    return at;
}

/* The planner's choice as five hyper-parameters after hp[0..n); the new count. words holds the
 * strings (checkpointing, the buckets' rows). */
static int plan_hparams(const struct tr_knobs *k, struct tr_hparam *hp, int n, char words[2][160])
{
    tr_knobs_remat_words(k, 0, words[0], sizeof words[0]);
    if (!strncmp(words[0], "full", 4))   /* the knobs do not know the model's block count: "full 3" */
        snprintf(words[0], sizeof words[0], "full %d", k->remat_blocks);
    *words[1] = 0;
    for (int b = 0; k->dynamic && b < k->nbuckets; b++)
        snprintf(words[1] + strlen(words[1]), sizeof words[1] - strlen(words[1]), "%s%lld", b ? "/" : "",
                 (long long)k->buckets[b].rows);
    hp[n++] = (struct tr_hparam){.name = "plan.precision", .kind = TR_HP_STRING, .string = tr_precision_name(k->precision)};
    hp[n++] = (struct tr_hparam){.name = "plan.checkpointing", .kind = TR_HP_STRING, .string = words[0]};
    hp[n++] = (struct tr_hparam){.name = "plan.batching", .kind = TR_HP_STRING, .string = k->dynamic ? "dynamic" : "fixed"};
    hp[n++] = k->dynamic ? (struct tr_hparam){.name = "plan.micro_batch", .kind = TR_HP_STRING, .string = words[1]}
                         : (struct tr_hparam){.name = "plan.micro_batch", .kind = TR_HP_NUMBER, .number = (double)k->micro};
    hp[n++] = k->dynamic ? (struct tr_hparam){.name = "plan.accumulation", .kind = TR_HP_STRING, .string = "by length"}
                         : (struct tr_hparam){.name = "plan.accumulation", .kind = TR_HP_NUMBER,
                                              .number = (double)k->accumulation};
    return n;
}

static void hparams(struct tr_events *ev, const struct tr_recipe *r, const struct tr_knobs *k, double start_secs)
{
    char *text = tr_recipe_to_json(r);
    json_t *root = json_loads(text, 0, NULL), *values = json_object_get(root, "recipe");
    struct tr_hparam hp[40];
    char *owned[32], words[2][160];
    int n = 0;
    for (int i = 0; tr_tb_hparam_keys[i] && n < 32; i++) {
        json_t *v = lookup(values ? values : root, tr_tb_hparam_keys[i]);
        struct tr_hparam *h = &hp[n];
        owned[n] = NULL;
        *h = (struct tr_hparam){.name = tr_tb_hparam_keys[i], .kind = TR_HP_STRING};
        if (json_is_number(v))
            h->kind = TR_HP_NUMBER, h->number = json_number_value(v);
        else if (json_is_boolean(v))
            h->kind = TR_HP_BOOL, h->flag = json_is_true(v);
        else if (json_is_string(v))
            h->string = json_string_value(v);
        else   /* null, or a structure (dynamic batching's buckets): as compact JSON text */
            h->string = owned[n] = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        if (!h->string && h->kind == TR_HP_STRING)
            h->string = "null";
        n++;
    }
    int nrecipe = n;
    n = plan_hparams(k, hp, n, words);
    tr_events_session_start(ev, hp, n, start_secs);
    for (int i = 0; i < nrecipe; i++)
        free(owned[i]);
    json_decref(root);
    free(text);
}

static void recipe_text(struct tr_events *ev, const struct tr_recipe *r)
{
    char *yaml = NULL, *md = NULL;
    size_t len = 0, mdlen = 0;
    FILE *f = open_memstream(&yaml, &len);
    if (!f)
        return;
    tr_recipe_write_yaml(r, f);
    fclose(f);
    FILE *m = open_memstream(&md, &mdlen);
    if (m) {   /* Markdown: four spaces of indent make a code block, kept as written */
        fputs("The resolved recipe, each value's origin in a comment:\n\n", m);
        for (char *line = yaml, *end; line && *line; line = end ? end + 1 : NULL) {
            end = strchr(line, '\n');
            fprintf(m, "    %.*s\n", (int)(end ? end - line : (long)strlen(line)), line);
        }
        fclose(m);
        tr_events_text(ev, "recipe", 0, md);
    }
    free(md);
    free(yaml);
}

void tr_tb_session_start(struct tr_events *ev, const struct tr_recipe *r, const char *plan_markdown,
                         const struct tr_graph *g, const struct tr_knobs *k, double start_secs)
{
    recipe_text(ev, r);
    tr_events_text(ev, "plan", 0, plan_markdown);
    hparams(ev, r, k, start_secs);
    struct tr_pb graph;
    tr_graphdef_build(g, k->micro, 1, &graph);
    tr_events_graph(ev, &graph);
    tr_pb_free(&graph);
    /* on disk at once: a crash before the first checkpoint would otherwise leave a file of
     * its first two records, and a resumed run's TensorBoard without recipe, plan or graph */
    tr_events_flush(ev, 1);
}
