/* The gather pass (graph.h): ZeRO stage 3's parameters, read through copies gathered whole. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/ops.h"

void tr_gather_params(struct tr_graph *g, bool ahead)
{
    g->gather_ahead = ahead;
    int nv = g->nvalues;
    int *copy = tr_xmalloc((size_t)(2 * nv + 1) * sizeof *copy);   /* [late][parameter]: its copy */
    int *order = tr_xmalloc((size_t)(nv + 1) * sizeof *order);      /* a parameter's place among them */
    for (int i = 0; i < 2 * nv; i++)
        copy[i] = -1;
    for (int v = 0, k = 0; v < nv; v++)
        order[v] = g->values[v].kind == TR_PARAM ? k++ : -1;
    for (int i = 0; i < g->nnodes; i++) {
        struct tr_node *n = &g->nodes[i];
        int late = n->phase != TR_FORWARD;   /* the backward's and its recomputation's copy */
        for (int j = 0; j < n->nin; j++) {
            int v = n->in[j];
            if (v < 0 || v >= nv || g->values[v].kind != TR_PARAM)
                continue;
            int *c = &copy[late * nv + v];
            if (*c < 0) {
                char name[sizeof g->values[v].name];   /* tr_value_add may move g->values */
                memcpy(name, g->values[v].name, sizeof name);
                *c = tr_value_add(g, TR_ACT, g->values[v].dtype, &g->values[v].shape, name);
                g->values[*c].gathers = order[v];
            }
            n->in[j] = *c;
            if (tr_op_is_view(n->op))   /* a view of the parameter is one of its copy */
                g->values[n->out[0]].view_of = *c;
        }
        /* a view of such a view: its storage is the copy too */
        if (tr_op_is_view(n->op) && n->in[0] >= 0 && g->values[n->in[0]].view_of >= 0 &&
            g->values[g->values[n->in[0]].view_of].gathers >= 0)
            g->values[n->out[0]].view_of = g->values[n->in[0]].view_of;
    }
    free(copy), free(order);
}
