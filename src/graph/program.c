/* Planning a program over its length buckets (program.h). */
#include "graph/program.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static void begin(struct tr_program *p, struct tr_graph *g, const struct tr_bucket *buckets, int nbuckets)
{
    memset(p, 0, sizeof *p);
    p->graph = g;
    p->nbuckets = nbuckets;
    p->buckets = tr_xmalloc((size_t)nbuckets * sizeof *p->buckets);
    memcpy(p->buckets, buckets, (size_t)nbuckets * sizeof *buckets);
    p->plans = tr_xcalloc((size_t)nbuckets, sizeof *p->plans);
}

/* The program's regions and workspace: the most its buckets' plans need. */
static void regions(struct tr_program *p)
{
    for (int b = 0; b < p->nbuckets; b++) {
        for (int k = 0; k < TR_NKINDS; k++)
            if (p->plans[b].region_bytes[k] > p->region_bytes[k])
                p->region_bytes[k] = p->plans[b].region_bytes[k];
        if (p->plans[b].workspace_bytes > p->workspace_bytes)
            p->workspace_bytes = p->plans[b].workspace_bytes;
    }
}

int tr_program_plan(struct tr_program *p, struct tr_graph *g, const struct tr_bucket *buckets,
                    int nbuckets, const int *keep, int nkeep, tr_workspace_fn workspace, bool grads_in_arena)
{
    if (g->error || nbuckets < 1)
        return memset(p, 0, sizeof *p), TR_EINVAL;
    begin(p, g, buckets, nbuckets);
    p->n = g->nnodes;
    p->schedule = tr_xmalloc((size_t)(p->n ? p->n : 1) * sizeof *p->schedule);
    for (int i = 0; i < p->n; i++)   /* creation order: forward, then backward in reverse */
        p->schedule[i] = i;
    for (int b = 0; b < nbuckets; b++)
        tr_memplan_build(&p->plans[b], g, p->schedule, p->n, buckets[b].B, buckets[b].S, keep, nkeep, workspace,
                         grads_in_arena);
    regions(p);
    return 0;
}

/* Each bucket's plan once per slot, the stash moved to the slot's place: after the largest
 * bucket's other activations, one largest stash apart. */
static void slot_plans(struct tr_program *p)
{
    int64_t at = 0;
    for (int b = 0; b < p->nbuckets; b++) {
        at = p->plans[b].stash_at > at ? p->plans[b].stash_at : at;
        p->stash_bytes = p->plans[b].stash_bytes > p->stash_bytes ? p->plans[b].stash_bytes : p->stash_bytes;
    }
    p->slotted = tr_xcalloc((size_t)(p->nbuckets * p->slots), sizeof *p->slotted);
    for (int b = 0; b < p->nbuckets; b++)
        for (int slot = 0; slot < p->slots; slot++) {
            const struct tr_memplan *base = &p->plans[b];
            struct tr_memplan *one = &p->slotted[b * p->slots + slot];
            *one = *base;
            one->offset = tr_xmalloc((size_t)(base->nvalues ? base->nvalues : 1) * sizeof *one->offset);
            for (int v = 0; v < base->nvalues; v++) {
                int root = tr_storage_of(p->graph, v);
                one->offset[v] = base->offset[v];
                if (base->stash[root] && base->offset[v] >= 0)
                    one->offset[v] += at - base->stash_at + (int64_t)((size_t)slot * p->stash_bytes);
            }
            one->region_bytes[TR_ACT] = (size_t)at + (size_t)p->slots * p->stash_bytes;
        }
    p->region_bytes[TR_ACT] = (size_t)at + (size_t)p->slots * p->stash_bytes;
}

int tr_program_plan_stage(struct tr_program *p, struct tr_graph *g, const struct tr_stages *st, int stage, int slots,
                          const struct tr_bucket *buckets, int nbuckets, const int *keep, int nkeep,
                          tr_workspace_fn workspace)
{
    if (g->error || nbuckets < 1 || stage < 0 || stage >= st->count || slots < 1)
        return memset(p, 0, sizeof *p), TR_EINVAL;
    begin(p, g, buckets, nbuckets);
    const struct tr_stage *own = &st->stage[stage];
    p->n = own->n, p->split = own->split, p->slots = slots;
    p->schedule = tr_xmalloc((size_t)(p->n ? p->n : 1) * sizeof *p->schedule);
    memcpy(p->schedule, own->schedule, (size_t)p->n * sizeof *p->schedule);
    for (int b = 0; b < nbuckets; b++)   /* a forward alone: no stash, one slot as good as any */
        tr_memplan_build_stage(&p->plans[b], g, p->schedule, p->n, p->split, stage,
                               st->transfers, st->ntransfers, buckets[b].B, buckets[b].S, keep, nkeep, workspace);
    regions(p);
    if (p->split < p->n)
        slot_plans(p);
    return 0;
}

const struct tr_memplan *tr_program_slot_plan(const struct tr_program *p, int64_t B, int64_t S, int slot)
{
    const struct tr_memplan *base = tr_program_plan_for(p, B, S);
    if (!base || !p->slotted || slot < 0 || slot >= p->slots)
        return base;
    return &p->slotted[(base - p->plans) * p->slots + slot];
}

const struct tr_memplan *tr_program_plan_for(const struct tr_program *p, int64_t B, int64_t S)
{
    const struct tr_memplan *best = NULL;
    for (int b = 0; b < p->nbuckets; b++)
        if (p->buckets[b].B >= B && p->buckets[b].S >= S &&
            (!best || p->plans[b].region_bytes[TR_ACT] < best->region_bytes[TR_ACT]))
            best = &p->plans[b];
    return best;
}

void tr_program_free(struct tr_program *p)
{
    for (int i = 0; p->slotted && i < p->nbuckets * p->slots; i++)
        free(p->slotted[i].offset);   /* the rest is the bucket's plan's */
    free(p->slotted);
    for (int b = 0; b < p->nbuckets; b++)
        tr_memplan_free(&p->plans[b]);
    free(p->plans), free(p->buckets), free(p->schedule);
    memset(p, 0, sizeof *p);
}
