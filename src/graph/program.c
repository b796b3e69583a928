/* Planning a program over its length buckets (program.h). */
#include "graph/program.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int tr_program_plan(struct tr_program *p, struct tr_graph *g, const struct tr_bucket *buckets,
                    int nbuckets, const int *keep, int nkeep, tr_workspace_fn workspace, bool grads_in_arena)
{
    memset(p, 0, sizeof *p);
    if (g->error || nbuckets < 1)
        return TR_EINVAL;
    p->graph = g;
    p->n = g->nnodes;
    p->schedule = tr_xmalloc((size_t)p->n * sizeof *p->schedule);
    for (int i = 0; i < p->n; i++)   /* creation order: forward, then backward in reverse */
        p->schedule[i] = i;
    p->nbuckets = nbuckets;
    p->buckets = tr_xmalloc((size_t)nbuckets * sizeof *p->buckets);
    memcpy(p->buckets, buckets, (size_t)nbuckets * sizeof *buckets);
    p->plans = tr_xcalloc((size_t)nbuckets, sizeof *p->plans);
    for (int b = 0; b < nbuckets; b++) {
        tr_memplan_build(&p->plans[b], g, p->schedule, p->n, buckets[b].B, buckets[b].S, keep, nkeep, workspace,
                         grads_in_arena);
        for (int k = 0; k < TR_NKINDS; k++)
            if (p->plans[b].region_bytes[k] > p->region_bytes[k])
                p->region_bytes[k] = p->plans[b].region_bytes[k];
        if (p->plans[b].workspace_bytes > p->workspace_bytes)
            p->workspace_bytes = p->plans[b].workspace_bytes;
    }
    return 0;
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
    for (int b = 0; b < p->nbuckets; b++)
        tr_memplan_free(&p->plans[b]);
    free(p->plans), free(p->buckets), free(p->schedule);
    memset(p, 0, sizeof *p);
}
