/* The amp pass (DESIGN.md §3): mixed precision by the op table's per-op policy. It runs on the
 * forward graph, before autodiff, and rewrites it in place: activations become 16-bit (bf16 or
 * f16) where the op table says so, and a CAST node is put before each op that computes in 16 bits
 * for every f32 operand it reads (a parameter's cast is its 16-bit working copy, made once per
 * micro-batch from the f32 master weights the optimizer updates, when working_copies: what
 * 16-bit GEMM hardware needs; the CPU kernels compute in f32 and read the master weights as
 * they are, so there a copy would only cost memory and time). Autodiff then gives every
 * 16-bit value a 16-bit gradient and every parameter its f32 one, through the casts' backward.
 *
 * The table (ops.c, .amp): GEMMs, convolutions and attention compute in 16 bits (their kernels accumulate in
 * f32); softmax, the losses and the reductions compute and answer in f32; everything else keeps
 * the precision of what it reads, so the activations saved for the backward are 16-bit.
 * Statistics (layer and batch norm's, attention's lse) stay f32, as do embedding tables, norm
 * weights and biases, which kernels read in f32 beside 16-bit data. The values the caller keeps
 * in f32 (the logits) are computed in f32 back to the GEMM that makes them. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"
#include "graph/ops.h"

/* Whether out[0] follows its inputs' precision (TR_AMP_FOLLOW: the first; _ALL: every one). */
static bool follows(enum tr_amp_policy p)
{
    return p == TR_AMP_FOLLOW || p == TR_AMP_FOLLOW_ALL;
}

/* The inputs whose precision out[0] follows: x alone for ops whose other inputs are weights,
 * statistics or masks (bias_add's bias, layernorm's gamma and beta, …); every input for ADD,
 * MUL and CONCAT. */
static int followed_inputs(const struct tr_node *n)
{
    return tr_ops[n->op].amp == TR_AMP_FOLLOW_ALL ? n->nin : 1;
}

/* Values that must stay f32 (the caller's, and back through FOLLOW producers to the op that
 * computes them), marked in f32[]. */
static void mark_f32(const struct tr_graph *g, const int *keep, int nkeep, bool *f32)
{
    for (int i = 0; i < nkeep; i++)
        for (int v = keep[i]; v >= 0 && !f32[v];) {
            f32[v] = true;
            int p = g->values[v].producer;
            if (p < 0 || !follows(tr_ops[g->nodes[p].op].amp) || g->nodes[p].out[0] != v)
                break;
            v = g->nodes[p].in[0];
        }
}

int tr_amp(struct tr_graph *g, enum tr_dtype low, const int *keep_f32, int nkeep, bool working_copies)
{
    if (g->error)
        return g->error;
    if (low != TR_BF16 && low != TR_F16) {
        snprintf(g->message, sizeof g->message, "amp: %s is not a 16-bit float type", tr_dtype_name(low));
        return g->error = TR_EINVAL;
    }
    int nold = g->nnodes, nvalues = g->nvalues;
    struct tr_node *old = g->nodes;
    bool *f32 = tr_xcalloc((size_t)nvalues, sizeof *f32);
    int *cast = tr_xmalloc((size_t)nvalues * sizeof *cast);   /* a value's 16-bit copy, or -1 */
    for (int v = 0; v < nvalues; v++)
        cast[v] = -1;
    mark_f32(g, keep_f32, nkeep, f32);
    g->nodes = NULL, g->nnodes = g->cap_nodes = 0;   /* the nodes again, casts put in */
    int saved_block = g->block;
    for (int i = 0; i < nold; i++) {
        struct tr_node n = old[i];
        enum tr_amp_policy p = tr_ops[n.op].amp;
        int y = n.out[0];
        if (p == TR_AMP_LOW)
            for (int j = 0; j < n.nin; j++) {
                int v = n.in[j];
                if (v < 0 || g->values[v].dtype != TR_F32 ||
                    (!working_copies && g->values[v].kind == TR_PARAM))
                    continue;
                if (cast[v] < 0) {   /* made where first needed, in that node's block */
                    g->block = n.block;
                    cast[v] = tr_value_add(g, TR_ACT, low, &g->values[v].shape, NULL);
                    tr_node_add(g, TR_OP_CAST, &v, 1, &cast[v], 1, NULL);
                }
                n.in[j] = cast[v];
            }
        bool narrow = p == TR_AMP_LOW || p == TR_AMP_START;
        for (int j = 0; follows(p) && j < followed_inputs(&n); j++)
            narrow |= n.in[j] >= 0 && tr_dtype_is_16bit(g->values[n.in[j]].dtype);
        if (p != TR_AMP_KEEP && (g->values[y].dtype == TR_F32 || tr_dtype_is_16bit(g->values[y].dtype)))
            g->values[y].dtype = narrow && !f32[y] ? low : TR_F32;
        g->block = n.block;
        int k = tr_node_add(g, n.op, n.in, n.nin, n.out, n.nout, &n.attrs);
        g->nodes[k] = n;   /* phase, block, accumulate as they were; the new inputs */
    }
    g->block = saved_block;
    for (int v = 0; v < g->nvalues; v++)   /* producers by the new node numbers */
        if (g->values[v].kind == TR_ACT)
            g->values[v].producer = -1;
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].nout; j++) {
            struct tr_value *val = &g->values[g->nodes[i].out[j]];
            if (val->kind == TR_ACT && val->producer < 0)
                val->producer = i;
        }
    for (int v = 0; v < nvalues; v++)   /* a view has its storage's precision */
        if (g->values[v].view_of >= 0)
            g->values[v].dtype = g->values[g->values[v].view_of].dtype;
    free(old), free(f32), free(cast);
    return 0;
}
