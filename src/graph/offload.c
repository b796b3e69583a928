/* The offload pass (graph.h: tr_offload): saved activations sent to the host's memory between
 * their forward and their backward. The schedule is creation order, so the node array is rebuilt
 * with the copies in place, as remat.c rebuilds it.
 *
 * A run is the nodes of one block in a row, the forward's apart from the backward's (and its
 * recomputation's, which comes with it). An activation is offloaded when at least one whole run
 * lies between its leaving and its coming back:
 *  - OFFLOAD after its last forward reader, into a TR_HOST value of its shape;
 *  - OFFLOAD_WAIT at the start of the next run: the copy travels beside the rest of the run,
 *    and the slot is held (the wait reads it) until it has left;
 *  - RELOAD at the start of the backward run before its first backward reader's (that run's
 *    kernels hide the copy), or of its reader's own run when it is the backward's first, into
 *    a new activation that every backward reader reads instead, and views of it made again for
 *    the views of the original the backward reads.
 * The grain (graph.h: tr_offload_grain) sends only some of them: those made before a block, or
 * the largest, the fewest that make a share of all their bytes. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"
#include "graph/ops.h"

struct sent {
    int v;        /* the activation: a storage root */
    int after;    /* its last forward reader: OFFLOAD after it */
    int wait;     /* OFFLOAD_WAIT before this node */
    int reload;   /* RELOAD before this node */
    int host;     /* its copy in the host's memory */
};

static int storage(const struct tr_graph *g, int v)
{
    return g->values[v].view_of >= 0 ? g->values[v].view_of : v;
}

static bool forward(const struct tr_node *n)
{
    return n->phase == TR_FORWARD;
}

/* run[i]: node i's run; start[r]: the first node of run r. Returns the number of runs. */
static int runs_of(const struct tr_graph *g, int *run, int *start)
{
    int r = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const struct tr_node *n = &g->nodes[i], *before = i ? &g->nodes[i - 1] : NULL;
        if (!before || n->block != before->block || forward(n) != forward(before))
            start[++r] = i;
        run[i] = r;
    }
    return r + 1;
}

/* One candidate's size, for the largest first: its bytes, and its place among them. */
struct sized {
    int64_t bytes;
    int at;
};

static int larger_first(const void *a, const void *b)
{
    const struct sized *x = a, *y = b;
    return x->bytes != y->bytes ? (x->bytes < y->bytes ? 1 : -1) : (x->at > y->at) - (x->at < y->at);
}

/* The grain's largest: s[0 … count) cut to the largest until they make `largest` percent of
 * all their bytes at one row of len tokens (the earlier among equals), in the order they were.
 * Returns the new count. */
static int largest_of(const struct tr_graph *g, struct sent *s, int count, int largest, int64_t len)
{
    struct sized *by = tr_xmalloc((size_t)(count + 1) * sizeof *by);
    int64_t total = 0, taken = 0;
    for (int i = 0; i < count; i++) {
        const struct tr_value *v = &g->values[s[i].v];
        by[i] = (struct sized){tr_dim_eval(tr_shape_numel(&v->shape), 1, len) * (int64_t)tr_dtype_size(v->dtype), i};
        total += by[i].bytes;
    }
    qsort(by, (size_t)count, sizeof *by, larger_first);
    bool *take = tr_xcalloc((size_t)count + 1, 1);
    for (int i = 0; i < count && taken * 100 < total * largest; i++)
        take[by[i].at] = true, taken += by[i].bytes;
    int n = 0;
    for (int i = 0; i < count; i++)
        if (take[i])
            s[n++] = s[i];
    free(by), free(take);
    return n;
}

/* Which activations go (the grain's), and where their copies are put: into s, their count
 * returned. */
static int choose(const struct tr_graph *g, const int *keep, int nkeep, struct tr_offload_grain grain, struct sent *s)
{
    int blocks = grain.blocks;
    int nv = g->nvalues, nn = g->nnodes, count = 0, limit = 0;
    while (blocks > 0 && limit < nn && !(forward(&g->nodes[limit]) && g->nodes[limit].block >= blocks))
        limit++;
    limit = blocks > 0 ? limit : nn;
    int *last_fwd = tr_xmalloc((size_t)(nv + 1) * sizeof(int)), *first_bwd = tr_xmalloc((size_t)(nv + 1) * sizeof(int));
    bool *no = tr_xcalloc((size_t)nv + 1, 1);
    int *run = tr_xmalloc((size_t)(nn + 1) * sizeof(int)), *start = tr_xmalloc((size_t)(nn + 1) * sizeof(int));
    int nruns = runs_of(g, run, start);
    for (int v = 0; v < nv; v++)
        last_fwd[v] = first_bwd[v] = -1;
    for (int i = 0; i < nkeep; i++)
        if (keep[i] >= 0)
            no[storage(g, keep[i])] = true;
    if (g->loss >= 0)
        no[storage(g, g->loss)] = true;
    for (int i = 0; i < nn; i++) {
        const struct tr_node *n = &g->nodes[i];
        for (int j = 0; j < n->nin; j++) {
            if (n->in[j] < 0)
                continue;
            int v = storage(g, n->in[j]);
            if (forward(n)) {
                last_fwd[v] = i;
                no[v] |= first_bwd[v] >= 0;   /* read forward after the backward began: not a saved one */
            } else if (first_bwd[v] < 0) {
                first_bwd[v] = i;
            }
        }
        for (int j = 0; j < n->nout && !tr_op_is_view(n->op); j++)   /* written again later: not a saved one */
            if (!forward(n))
                no[storage(g, n->out[j])] = true;
    }
    for (int v = 0; v < nv; v++) {
        const struct tr_value *val = &g->values[v];
        int p = val->producer;
        if (no[v] || val->kind != TR_ACT || val->view_of >= 0 || val->gathers >= 0 || p < 0 || p >= limit ||
            !forward(&g->nodes[p]) || first_bwd[v] < 0 || tr_shape_numel(&val->shape).b == 0)
            continue;
        int after = last_fwd[v] >= 0 ? last_fwd[v] : p;
        int wait_run = run[after] + 1, back_run = run[first_bwd[v]];
        if (back_run > 0 && !forward(&g->nodes[start[back_run - 1]]))
            back_run--;   /* a run ahead of its reader's */
        if (wait_run >= back_run || wait_run >= nruns)
            continue;   /* no whole run without it: nothing saved */
        s[count++] = (struct sent){.v = v, .after = after, .wait = start[wait_run], .reload = start[back_run]};
    }
    free(last_fwd), free(first_bwd), free(no), free(run), free(start);
    if (grain.largest > 0 && grain.largest < 100)
        count = largest_of(g, s, count, grain.largest, grain.len > 0 ? grain.len : 1);
    return count;
}

/* RELOAD of s into a new activation, views of it for the original's views the backward reads
 * (made by the forward: the backward's own views follow their input), map[] set for them. */
static void emit_reload(struct tr_graph *g, const struct tr_node *old, const struct sent *s, int *map, int nvalues,
                        int block)
{
    struct tr_value like = g->values[s->v];   /* tr_value_add may move the values */
    int back = tr_value_add(g, TR_ACT, like.dtype, &like.shape, NULL);
    g->block = block;
    int k = tr_node_add(g, TR_OP_RELOAD, &s->host, 1, &back, 1, NULL);
    g->nodes[k].phase = TR_BACKWARD;
    map[s->v] = back;
    for (int u = 0; u < nvalues; u++) {
        if (g->values[u].view_of != s->v || g->values[u].producer < 0 || !forward(&old[g->values[u].producer]))
            continue;
        struct tr_value view = g->values[u];
        int copy = tr_value_add(g, TR_ACT, view.dtype, &view.shape, NULL);
        k = tr_node_add(g, TR_OP_RESHAPE, &back, 1, &copy, 1, NULL);
        g->nodes[k].phase = TR_BACKWARD;
        map[u] = copy;
    }
}

int tr_offload(struct tr_graph *g, const int *keep, int nkeep, struct tr_offload_grain grain)
{
    if (g->error)
        return -1;
    int nv = g->nvalues, nold = g->nnodes;
    struct sent *s = tr_xmalloc((size_t)(nv + 1) * sizeof *s);
    int count = choose(g, keep, nkeep, grain, s);
    if (!count) {
        free(s);
        return 0;
    }
    for (int i = 0; i < count; i++) {
        struct tr_value like = g->values[s[i].v];
        s[i].host = tr_value_add(g, TR_HOST, like.dtype, &like.shape, NULL);
    }
    int *map = tr_xmalloc((size_t)g->nvalues * 2 * sizeof *map + sizeof *map);
    for (int v = 0; v < 2 * g->nvalues; v++)
        map[v] = -1;
    int *renumbered = tr_xmalloc((size_t)(nold + 1) * sizeof *renumbered);
    struct tr_node *old = g->nodes;
    g->nodes = NULL, g->nnodes = g->cap_nodes = 0;   /* the nodes again, the copies put in */
    int saved_block = g->block;
    for (int i = 0; i < nold; i++) {
        struct tr_node n = old[i];
        for (int k = 0; k < count; k++)
            if (s[k].wait == i) {
                g->block = old[s[k].after].block;
                tr_node_add(g, TR_OP_OFFLOAD_WAIT, &s[k].v, 1, (int[]){-1}, 0, NULL);
            }
        for (int k = 0; k < count; k++)
            if (s[k].reload == i)
                emit_reload(g, old, &s[k], map, nv, n.block);
        for (int j = 0; !forward(&n) && j < n.nin; j++)
            if (n.in[j] >= 0 && n.in[j] < nv && map[n.in[j]] >= 0)
                n.in[j] = map[n.in[j]];
        g->block = n.block;
        renumbered[i] = tr_node_add(g, n.op, n.in, n.nin, n.out, n.nout, &n.attrs);
        g->nodes[renumbered[i]] = n;   /* phase, block, accumulate, origin as they were; the new inputs */
        for (int k = 0; k < count; k++)
            if (s[k].after == i)
                tr_node_add(g, TR_OP_OFFLOAD, &s[k].v, 1, &s[k].host, 1, NULL);
    }
    for (int i = 0; i < g->nnodes; i++)   /* the backward's forward nodes by their new numbers */
        if (g->nodes[i].origin >= 0 && g->nodes[i].origin < nold)
            g->nodes[i].origin = renumbered[g->nodes[i].origin];
    g->block = saved_block;
    tr_graph_relink(g);
    free(old), free(map), free(renumbered), free(s);
    return count;
}
