/* The plan for people (plan.h): the candidates in a table, the decision in a sentence, and on
 * request the memory timeline of one step and the largest tensors live at its peak; for a run,
 * the plan it trains with, in its log and in TensorBoard's text. */
#include "plan/plan.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#define TIMELINE_COLUMNS 64
#define TIMELINE_ROWS 8
#define LARGEST 10


static void batching_words(const struct tr_candidate *c, char *out, size_t size)
{
    if (!c->k.dynamic) {
        snprintf(out, size, "%lld × %lld", (long long)c->k.accumulation, (long long)c->k.micro);
        return;
    }
    int at = snprintf(out, size, "dyn");
    for (int b = 0; b < c->k.nbuckets && at < (int)size; b++)
        at += snprintf(out + at, size - (size_t)at, "%s%lld", b ? "/" : " ", (long long)c->k.buckets[b].rows);
}

/* Offloaded: what the host holds, and what crosses the host link a step. */
static void print_host(const struct tr_plan *p, const struct tr_candidate *c, FILE *out)
{
    char size[32], budget[32], moved[32];
    fputs("  host (exact):", out);
    for (int r = 0, n = 0; r < TR_NREGIONS; r++)
        if (c->host[r]) {
            tr_format_bytes(c->host[r], size);
            fprintf(out, "%s %s %s", n++ ? "," : "", r == TR_REGION_ARENA ? "activations" : tr_region_name(r), size);
        }
    tr_format_bytes(c->host_bytes, size), tr_format_bytes(p->host_budget, budget);
    tr_format_bytes((uint64_t)c->link_bytes, moved);
    fprintf(out, "; total %s of the host budget %s\n  host link: %s a step out and back, %.3g s at %.3g GB/s "
            "(%.3g s of it not hidden behind the kernels)\n", size, budget, moved, c->link_seconds,
            tr_device_host_link(&p->dev) / 1e9, c->link_exposed);
}

static void print_breakdown(const struct tr_plan *p, const struct tr_candidate *c, FILE *out)
{
    char size[32];
    fputs("  regions (exact):", out);
    for (int r = 0; r < TR_NREGIONS; r++) {
        tr_format_bytes(c->regions[r], size);
        fprintf(out, "%s %s %s", r ? "," : "", tr_region_name(r), size);
        if (r == TR_REGION_GRADS && tr_knobs_grads_in_arena(&c->k))
            fputs(" (in the arena: one micro-batch a step)", out);
    }
    tr_format_bytes(c->peak, size);
    fprintf(out, "; total %s\n  outside (modelled):", size);
    for (int i = 0; i < TR_NOUTSIDE; i++) {
        tr_format_bytes(c->outside[i], size);
        fprintf(out, "%s %s %s", i ? "," : "", tr_outside_words(i), size);
    }
    tr_format_bytes(c->footprint, size);
    fprintf(out, "; footprint %s\n", size);
    if (c->k.offload)
        print_host(p, c, out);
}

static void print_table(const struct tr_plan *p, FILE *out)
{
    fprintf(out, "%4s  %-9s %-13s %-24s %12s %12s %10s  %s\n", "#", "precision", "checkpointing", "batching",
            "regions", "footprint", "step (s)", "fits");
    for (int i = 0; i < p->ncand; i++) {
        const struct tr_candidate *c = &p->cand[i];
        char remat[32], batching[160], peak[32], foot[32];
        tr_knobs_remat_words(&c->k, p->blocks, remat, sizeof remat);
        batching_words(c, batching, sizeof batching);
        tr_format_bytes(c->peak, peak);
        tr_format_bytes(c->k.pipeline > 1 ? c->worst_footprint : c->footprint, foot);   /* pipelined: the largest stage's */
        char split[96] = "";
        for (int s = 0, used = 0; c->k.pipeline > 1 && s < c->k.pipeline && used < (int)sizeof split; s++)
            used += snprintf(split + used, sizeof split - (size_t)used, "%s%d–%d", s ? " | " : "  stages ",
                             c->k.first_block[s], c->k.first_block[s + 1] - 1);
        char host[160] = "";
        if (c->k.offload) {   /* what the host holds; the seconds the link adds to the step */
            char held[32], what[64];
            tr_format_bytes(c->host_bytes, held);
            tr_knobs_offload_words(&c->k, p->blocks, true, what, sizeof what);
            snprintf(host, sizeof host, "  offload %s: host %s, link %.3g s", what, held, c->link_exposed);
        }
        fprintf(out, "%4d  %-9s %-13s %-24s %12s %12s %10.4f  %s%s%s%s%s\n", i + 1, tr_precision_name(c->k.precision),
                remat, batching, peak, foot, c->step_seconds, c->fits ? "yes" : "no", split,
                c->k.sequence ? "  sequence parallel" : "", host, i == p->chosen ? "  <- chosen" : "");
    }
}

/* ---- --explain ------------------------------------------------------------------------------- */

/* Bytes of arena values live at each step of plan mp. */
static size_t *live_bytes(const struct tr_graph *g, const struct tr_memplan *mp, int n)
{
    size_t *live = tr_xcalloc((size_t)n, sizeof *live);
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_ACT && g->values[v].view_of < 0 && mp->first[v] >= 0)
            for (int s = mp->first[v]; s <= mp->last[v] && s < n; s++)
                live[s] += mp->bytes[v];
    return live;
}

static void print_timeline(const struct tr_graph *g, const int *schedule, const size_t *live, int n, FILE *out)
{
    size_t peak = 1, col[TIMELINE_COLUMNS] = {0};
    int backward = n;
    for (int s = 0; s < n; s++) {
        size_t *c = &col[(size_t)s * TIMELINE_COLUMNS / (size_t)n];
        if (live[s] > *c)
            *c = live[s];
        if (live[s] > peak)
            peak = live[s];
        if (g->nodes[schedule[s]].phase != TR_FORWARD && backward == n)
            backward = s;
    }
    char size[32];
    tr_format_bytes(peak, size);
    fprintf(out, "  activations live over one micro-step (%d nodes; each column the most of its nodes; top %s):\n",
            n, size);
    for (int row = TIMELINE_ROWS; row >= 1; row--) {
        fputs("    |", out);
        for (int c = 0; c < TIMELINE_COLUMNS; c++)
            fputc(col[c] * TIMELINE_ROWS >= peak * (size_t)row - peak / 2 ? '#' : ' ', out);
        fputs("|\n", out);
    }
    int mark = backward * TIMELINE_COLUMNS / (n ? n : 1);
    fprintf(out, "     %-*s^ backward from node %d\n", mark, "forward", backward);
}

/* The up to LARGEST largest arena values of plan mp live at its node step, largest first. */
static int largest_at(const struct tr_graph *g, const struct tr_memplan *mp, int step, int top[LARGEST])
{
    int ntop = 0;
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind != TR_ACT || g->values[v].view_of >= 0 || mp->first[v] < 0 || mp->first[v] > step ||
            mp->last[v] < step)
            continue;
        if (ntop == LARGEST && mp->bytes[top[LARGEST - 1]] >= mp->bytes[v])
            continue;   /* no larger than the smallest kept */
        int at = ntop < LARGEST ? ntop++ : LARGEST - 1;
        top[at] = v;
        for (; at > 0 && mp->bytes[top[at - 1]] < mp->bytes[top[at]]; at--) {
            int t = top[at];
            top[at] = top[at - 1], top[at - 1] = t;
        }
    }
    return ntop;
}

static const char *const phases[] = {"forward", "backward", "recompute", "optimizer"};

/* A value's shape at the plan's sizes, "[32, 128, 768]". */
static void shape_words(const struct tr_graph *g, const struct tr_memplan *mp, int v, char *shape, size_t size)
{
    int at = snprintf(shape, size, "[");
    for (int d = 0; d < g->values[v].shape.rank && at < (int)size; d++)
        at += snprintf(shape + at, size - (size_t)at, "%s%lld", d ? ", " : "",
                       (long long)tr_dim_eval(g->values[v].shape.dim[d], mp->B, mp->S));
    if (at < (int)size - 1)
        strcat(shape, "]");
}

static void print_largest(const struct tr_graph *g, const struct tr_memplan *mp, int node, int step, FILE *out)
{
    int top[LARGEST], ntop = largest_at(g, mp, step, top);
    fprintf(out, "  largest tensors live at the peak (node %d, %s, B=%lld S=%lld):\n", step,
            tr_op_name(g->nodes[node].op), (long long)mp->B, (long long)mp->S);
    for (int i = 0; i < ntop; i++) {
        int v = top[i], prod = g->values[v].producer;
        char size[32];
        tr_format_bytes(mp->bytes[v], size);
        const struct tr_node *n = prod >= 0 ? &g->nodes[prod] : NULL;
        char shape[96];
        shape_words(g, mp, v, shape, sizeof shape);
        fprintf(out, "    %10s  %-4s %-22s from %s (%s, block %d), live nodes %d–%d\n", size,
                tr_dtype_name(g->values[v].dtype), shape, n ? tr_op_name(n->op) : "input", n ? phases[n->phase] : "-",
                n ? n->block : -1, mp->first[v], mp->last[v]);
    }
}

/* The plan whose arena is the program's: the largest bucket's. */
static const struct tr_memplan *arena_plan(const struct tr_built *b)
{
    int worst = 0;
    for (int i = 1; i < b->p.nbuckets; i++)
        if (b->p.plans[i].region_bytes[TR_ACT] > b->p.plans[worst].region_bytes[TR_ACT])
            worst = i;
    return &b->p.plans[worst];
}

static int peak_of(const size_t *live, int n)
{
    int peak = 0;
    for (int s = 1; s < n; s++)
        if (live[s] > live[peak])
            peak = s;
    return peak;
}

json_t *tr_plan_timeline_json(const struct tr_built *b, int columns)
{
    const struct tr_graph *g = &b->g;
    const struct tr_memplan *mp = arena_plan(b);
    int n = b->p.n, backward = n;
    size_t *live = live_bytes(g, mp, n);
    int peak = peak_of(live, n);
    if (columns > n)
        columns = n;
    json_t *cols = json_array(), *largest = json_array();
    for (int c = 0; c < columns; c++) {   /* each column the most of its nodes */
        size_t most = 0;
        for (int s = (int)((int64_t)c * n / columns); s < (int)((int64_t)(c + 1) * n / columns); s++)
            most = live[s] > most ? live[s] : most;
        json_array_append_new(cols, json_integer((json_int_t)most));
    }
    for (int s = 0; s < n && backward == n; s++)
        if (g->nodes[b->p.schedule[s]].phase != TR_FORWARD)
            backward = s;
    int top[LARGEST], ntop = largest_at(g, mp, peak, top);
    for (int i = 0; i < ntop; i++) {
        int v = top[i], prod = g->values[v].producer;
        const struct tr_node *node = prod >= 0 ? &g->nodes[prod] : NULL;
        char shape[96];
        shape_words(g, mp, v, shape, sizeof shape);
        json_array_append_new(largest, json_pack("{sI ss ss ss ss si si si}", "bytes", (json_int_t)mp->bytes[v],
                                                 "dtype", tr_dtype_name(g->values[v].dtype), "shape", shape,
                                                 "op", node ? tr_op_name(node->op) : "input",
                                                 "phase", node ? phases[node->phase] : "-",
                                                 "block", node ? node->block : -1, "first_node", mp->first[v],
                                                 "last_node", mp->last[v]));
    }
    json_t *j = json_pack("{sI sI si si si sI ss so so}", "B", (json_int_t)mp->B, "S", (json_int_t)mp->S,
                          "nodes", n, "backward_from", backward, "peak_node", peak,
                          "peak_bytes", (json_int_t)live[peak], "peak_op", tr_op_name(g->nodes[b->p.schedule[peak]].op),
                          "live_bytes", cols, "largest", largest);
    free(live);
    return j;
}

static void explain(const struct tr_plan *p, const struct tr_plan_job *job, FILE *out)
{
    const struct tr_candidate *c = &p->cand[p->chosen >= 0 ? p->chosen : p->smallest];
    struct tr_built b;
    struct tr_diag why = {0};
    if (tr_build(&b, job, &c->k, true, &why)) {
        fprintf(out, "  (cannot explain: %s)\n", tr_diag_last(&why));
        tr_diag_free(&why);
        tr_built_free(&b);
        return;
    }
    const struct tr_memplan *mp = arena_plan(&b);
    size_t *live = live_bytes(&b.g, mp, b.p.n);
    int peak = peak_of(live, b.p.n);
    fprintf(out, "\nmemory over one step of the %s plan:\n", p->chosen >= 0 ? "chosen" : "smallest");
    print_breakdown(p, c, out);
    print_timeline(&b.g, b.p.schedule, live, b.p.n, out);
    print_largest(&b.g, mp, b.p.schedule[peak], peak, out);
    free(live);
    tr_built_free(&b);
}

/* Stage s's micro-batches in flight under c (build.c: tr_plan_slots). */
static int in_flight(const struct tr_plan_job *job, const struct tr_candidate *c, int s)
{
    struct tr_plan_job at = *job;
    at.stage = s;
    return tr_plan_slots(&at, &c->k);
}

/* Pipelined: the layout, each stage's blocks, regions, footprint and time, the bubble, what
 * travels between stages, and why the model is spread. */
static void print_layout(const struct tr_plan *p, const struct tr_plan_job *job, const struct tr_candidate *c, FILE *out)
{
    int T = c->k.tensor > 1 ? c->k.tensor : 1, P = c->k.pipeline > 1 ? c->k.pipeline : 1;
    if (P * T < 2)
        return;
    fprintf(out, "\nlayout: %d ranks = %d data", job->world * P * T, job->world);
    if (P > 1)
        fprintf(out, " × %d pipeline stages (1F1B)", P);
    if (T > 1)
        fprintf(out, " × %d tensor ranks (Megatron-LM: each block's heads and feed-forward split over them%s)", T,
                c->k.sequence ? "; sequence parallel: its norms, dropouts and residual stream a part of the sequence "
                                "each" : "");
    fprintf(out, "\n");
    if (T > 1) {
        char moved[32], regions[32], foot[32];
        tr_format_bytes((uint64_t)c->tensor_bytes, moved);
        tr_format_bytes(c->peak, regions);
        tr_format_bytes(P > 1 ? c->worst_footprint : c->footprint, foot);
        fprintf(out, "  each tensor rank: regions %s, footprint %s%s; its %s %s a step, %.3g s at the bus rate and "
                "latency\n", regions, foot, P > 1 ? " (the largest stage)" : "",
                c->k.sequence ? "all-gathers and reduce-scatters (4 forward, 4 backward a block a micro-batch) take"
                              : "all-reduces (2 forward, 2 backward a block a micro-batch) sum", moved, c->tensor_seconds);
    }
    if (P < 2) {
        if (*p->layout_why)
            fprintf(out, "  why: %s\n", p->layout_why);
        return;
    }
    double sent = 0;
    for (int s = 0; s < c->k.pipeline; s++) {
        char peak[32], foot[32], bytes[32];
        tr_format_bytes(c->stage[s].peak, peak);
        tr_format_bytes(c->stage[s].footprint, foot);
        tr_format_bytes((uint64_t)c->stage[s].sent_bytes, bytes);
        fprintf(out, "  stage %d: blocks %d–%d%s%s, regions %s, footprint %s, %.1f ms a micro-batch, %s in and out "
                "a micro-batch, %d micro-batch%s in flight\n", s, c->k.first_block[s], c->k.first_block[s + 1] - 1,
                s == 0 ? " and the embeddings" : "", s == c->k.pipeline - 1 ? " and the head" : "", peak, foot,
                1e3 * c->stage[s].seconds, bytes, in_flight(job, c, s), in_flight(job, c, s) == 1 ? "" : "es");
        sent += c->stage[s].sent_bytes;
    }
    char moved[32];
    tr_format_bytes((uint64_t)(sent / 2 * ceil(c->micro_steps / (job->world > 1 ? job->world : 1))), moved);
    fprintf(out, "  bubble %.0f%% of the step predicted; %s between stages a step (%.3g s of it at the bus rate)\n",
            100 * c->bubble, moved, c->comm_seconds);
    if (*p->layout_why)
        fprintf(out, "  why: %s\n", p->layout_why);
}

void tr_plan_print(const struct tr_plan *p, const struct tr_plan_job *job, bool explain_it, FILE *out)
{
    char budget[32], mem[32];
    tr_format_bytes(p->budget, budget);
    tr_format_bytes(p->dev.memory, mem);
    fprintf(out, "device: %s, %s of memory\n  numbers: %s%s%s\n", p->dev.description, mem, p->dev.source,
            *p->dev.path.s ? "\n  from: " : "", p->dev.path.s);
    fprintf(out, "budget: %s for the footprint (regions + what lives outside them + a reserve of 2%%, at least "
            "16 MiB)\n", budget);
    if (p->ceiling.kind != TR_CEILING_NONE)
        fprintf(out, "  %s\n", p->ceiling.said);
    fprintf(out, "job: batch %lld, %s %lld; %d checkpointable blocks\n\n", (long long)p->batch,
            job->data->kind == TR_DATA_FEATURES ? "feature rows of" : "sequences up to", (long long)p->seq,
            p->blocks);
    print_table(p, out);
    fprintf(out, "\n%s: %s\n", p->chosen >= 0 ? "decision" : "no plan", p->reason);
    if (p->chosen >= 0 || p->smallest >= 0)
        print_layout(p, job, &p->cand[p->chosen >= 0 ? p->chosen : p->smallest], out);
    if (p->chosen >= 0 && !explain_it)
        print_breakdown(p, &p->cand[p->chosen], out);
    if (explain_it && (p->chosen >= 0 || p->smallest >= 0))
        explain(p, job, out);
}

/* ---- a run's plan, for its log and TensorBoard -------------------------------------------------- */

/* The checkpointing the plan applies, in words; remat_nodes: the recompute nodes it made. */
static void remat_sentence(const struct tr_knobs *k, int blocks, int remat_nodes, char *out, size_t size)
{
    if (k->remat_mode == TR_REMAT_NONE || k->remat_blocks == 0)
        snprintf(out, size, "no gradient checkpointing");
    else if (k->remat_mode == TR_REMAT_SELECTIVE && remat_nodes == 0)
        snprintf(out, size, "selective recomputation (nothing in this model is cheap to recompute)");
    else if (k->remat_mode == TR_REMAT_SELECTIVE)
        snprintf(out, size, "selective recomputation in all %d blocks", blocks);
    else if (k->remat_blocks == blocks)
        snprintf(out, size, "full recomputation of all %d blocks", blocks);
    else if (k->remat_blocks == 1)
        snprintf(out, size, "full recomputation of block 0 of %d", blocks);
    else
        snprintf(out, size, "full recomputation of blocks 0–%d of %d", k->remat_blocks - 1, blocks);
}

char *tr_plan_markdown(const struct tr_plan *p, const struct tr_plan_job *job, int remat_nodes)
{
    const struct tr_candidate *c = &p->cand[p->chosen];
    const struct tr_knobs *k = &c->k;
    char *md = NULL, size[32], remat[96];
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    if (!f)
        return NULL;
    remat_sentence(k, p->blocks, remat_nodes, remat, sizeof remat);
    fprintf(f, "Plan: %s, %s, ",
            k->precision == TR_PREC_FP32   ? "fp32"
            : k->precision == TR_PREC_BF16 ? "bf16 mixed precision"
                                           : "fp16 mixed precision",
            remat);
    if (k->dynamic)
        fprintf(f, "dynamic batching in %d length buckets up to %lld tokens", k->nbuckets, (long long)job->seq);
    else
        fprintf(f, "%lld micro-batch%s of %lld per step", (long long)k->accumulation, k->accumulation > 1 ? "es" : "",
                (long long)k->micro);
    fprintf(f, " (batch %lld).\n\nThe planner: %s.\n\n| memory | bytes |\n| --- | ---: |\n",
            (long long)job->r->train.batch_size, p->reason);
    for (int r = 0; r < TR_NREGIONS; r++) {
        tr_format_bytes(c->regions[r], size);
        fprintf(f, "| region: %s | %s |\n", tr_region_name(r), size);
    }
    tr_format_bytes(c->peak, size);
    fprintf(f, "| **predicted peak of the regions** | **%s** |\n", size);
    for (int i = 0; i < TR_NOUTSIDE; i++) {
        tr_format_bytes(c->outside[i], size);
        fprintf(f, "| outside: %s | %s |\n", tr_outside_words(i), size);
    }
    tr_format_bytes(c->footprint, size);
    fprintf(f, "| **predicted footprint** | **%s** |\n", size);
    fclose(f);
    return md;
}

void tr_plan_print_run(const struct tr_plan *p, const struct tr_plan_job *job, size_t arena_bytes, FILE *out)
{
    const struct tr_candidate *c = &p->cand[p->chosen];
    const struct tr_knobs *k = &c->k;
    char arena[32], buckets[TR_PLAN_MAX_BUCKETS * 24] = "";
    tr_format_bytes(arena_bytes, arena);
    for (int b = 0, at = 0; k->dynamic && b < k->nbuckets && at < (int)sizeof buckets; b++)
        at += snprintf(buckets + at, sizeof buckets - (size_t)at, "%s%lld×%lld", b ? ", " : "",
                       (long long)k->buckets[b].rows, (long long)k->buckets[b].len);
    char peak[32], foot[32], budget[32];
    tr_format_bytes(c->peak, peak), tr_format_bytes(c->footprint, foot), tr_format_bytes(p->budget, budget);
    fprintf(out, "planner: %s\n", p->reason);
    fprintf(out, "memory: regions %s (exact), footprint %s predicted, budget %s\n", peak, foot, budget);
    const char *es = k->accumulation > 1 ? "es" : "";
    if (k->dynamic)
        fprintf(out, "plan: dynamic batching, micro-batches of %s (rows × tokens); activation arena %s\n", buckets,
                arena);
    else if (job->data->kind == TR_DATA_FEATURES)
        fprintf(out, "plan: %lld micro-batch%s of %lld samples a step; activation arena %s\n",
                (long long)k->accumulation, es, (long long)k->micro, arena);
    else
        fprintf(out, "plan: %lld micro-batch%s of %lld × %lld tokens a step; activation arena %s\n",
                (long long)k->accumulation, es, (long long)k->micro, (long long)job->seq, arena);
    tr_plan_print_comm(p, c, out);
}

void tr_plan_print_comm(const struct tr_plan *p, const struct tr_candidate *c, FILE *out)
{
    if (p->world > 1 && c->comm_seconds > 0)
        fprintf(out, "ranks: %d, summing the gradients%s forecast at %.3f s a step (the ranks' measured bus rate, "
                "%.2f GB/s; not overlapped)%s\n", p->world, c->k.shard ? " and gathering the parameters" : "",
                c->comm_seconds, p->bus_rate / 1e9,
                c->k.shard == 3 ? "; optimizer state, gradients and parameters sharded (ZeRO stage 3)"
                : c->k.shard == 2 ? "; optimizer state and gradients sharded (ZeRO stage 2)"
                : c->k.shard ? "; optimizer state sharded (ZeRO stage 1)" : "");
}
