/* Reverse-mode automatic differentiation over the forward graph (DESIGN.md §3). Forward nodes
 * are visited last to first; each op's rule appends the backward nodes that turn its output
 * gradient into its inputs' gradients. A gradient reaches a value in one of three ways:
 *  - a parameter's: added (+=) into its persistent TR_GRAD value, so micro-batches accumulate;
 *  - the first contribution to any other value: a new value (or, for pass-through ops like
 *    add, the output gradient itself, shared without a copy);
 *  - later contributions: added into that value in place.
 * Every contribution to a value comes from its consumers, which all come after it in the
 * forward order; so by the time its producer's rule reads the gradient, it is complete. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "graph/ops.h"
#include "core/error.h"

struct tr_autodiff {
    struct tr_graph *g;
    int *grad;          /* per value: the value holding its gradient, or -1 */
    bool *needs;        /* per value: depends on a parameter through differentiable ops */
    bool *shared;       /* per value: already handed out as another value's gradient */
};

static struct tr_shape shape_of(const struct tr_autodiff *ad, int v)
{
    return ad->g->values[v].shape;
}

static int new_act(struct tr_autodiff *ad, int like)
{
    struct tr_shape s = shape_of(ad, like);
    return tr_value_add(ad->g, TR_ACT, ad->g->values[like].dtype, &s, NULL);
}

static int backward_node(struct tr_autodiff *ad, enum tr_op op, const int *in, int nin, const int *out,
                         int nout, const union tr_attrs *attrs, bool accumulate)
{
    int n = tr_node_add(ad->g, op, in, nin, out, nout, attrs);
    ad->g->nodes[n].phase = TR_BACKWARD;
    ad->g->nodes[n].accumulate = accumulate;
    return n;
}

/* Where the next gradient contribution for v goes: *acc says whether it must be added. */
static int destination(struct tr_autodiff *ad, int v, bool *acc)
{
    struct tr_value *val = &ad->g->values[v];
    if (val->kind == TR_PARAM) {
        *acc = true;
        return val->grad;
    }
    if (ad->grad[v] >= 0) {
        *acc = true;
        return ad->grad[v];
    }
    *acc = false;
    return ad->grad[v] = new_act(ad, v);
}

/* One backward node whose outputs are the gradients of the forward values for[0..nout-1]
 * (−1: an output nobody needs, written to scratch). A single output is written straight into
 * its destination, adding when it must; with several outputs, those that must be added go
 * through a fresh value and an ACCUMULATE each, since a kernel's accumulate flag is all or none. */
static void emit(struct tr_autodiff *ad, enum tr_op op, const int *in, int nin, const int *for_values,
                 int nout, const union tr_attrs *attrs)
{
    int out[TR_MAX_OUT], pending[TR_MAX_OUT], dest[TR_MAX_OUT];
    bool acc[TR_MAX_OUT] = {false}, wanted = false;
    for (int i = 0; i < nout; i++)
        wanted |= for_values[i] >= 0 && ad->needs[for_values[i]];
    if (!wanted)
        return;
    for (int i = 0; i < nout; i++) {
        int v = for_values[i];
        pending[i] = -1;
        if (v < 0 || !ad->needs[v]) {
            out[i] = new_act(ad, v >= 0 ? v : for_values[0]);
            continue;
        }
        dest[i] = destination(ad, v, &acc[i]);
        out[i] = dest[i];
        if (acc[i] && nout > 1)
            out[i] = pending[i] = new_act(ad, v);
    }
    backward_node(ad, op, in, nin, out, nout, attrs, nout == 1 && acc[0]);
    for (int i = 0; i < nout; i++)
        if (pending[i] >= 0)
            backward_node(ad, TR_OP_ACCUMULATE, &pending[i], 1, &dest[i], 1, NULL, true);
}

/* The gradient gy passes unchanged to x (add, bias_add, reshape's storage). */
static void pass_through(struct tr_autodiff *ad, int x, int gy)
{
    if (!ad->needs[x])
        return;
    /* Shared only when nothing else can write it: an activation not yet handed out (never the
     * loss.scale input, which must stay as the caller set it), of x's own precision. */
    if (ad->g->values[x].kind != TR_PARAM && ad->grad[x] < 0 && !ad->shared[gy] &&
        ad->g->values[gy].kind == TR_ACT && ad->g->values[gy].dtype == ad->g->values[x].dtype) {
        ad->grad[x] = gy;
        ad->shared[gy] = true;
        return;
    }
    bool acc;
    int dest = destination(ad, x, &acc);
    if (acc)
        backward_node(ad, TR_OP_ACCUMULATE, &gy, 1, &dest, 1, NULL, true);
    else
        backward_node(ad, TR_OP_SCALE, &gy, 1, &dest, 1, &(union tr_attrs){.scale = {1}}, false);
}

/* A view of v with another shape (reshape's backward, batch flattening): no copy, the view
 * shares v's storage and so its "shared" mark. */
static int view(struct tr_autodiff *ad, int v, struct tr_shape s)
{
    int w = tr_value_add(ad->g, TR_ACT, ad->g->values[v].dtype, &s, NULL);
    backward_node(ad, TR_OP_RESHAPE, &v, 1, &w, 1, NULL, false);
    ad->g->values[w].view_of = ad->g->values[v].view_of >= 0 ? ad->g->values[v].view_of : v;
    ad->shared[w] = ad->shared[v];
    return w;
}

/* [.., rows, cols] seen as [rows·…, cols]. */
static struct tr_shape as_matrix(struct tr_shape s)
{
    struct tr_dim rows = tr_shape_numel(&s), cols = s.dim[s.rank - 1];
    rows.k /= cols.k;
    rows.b -= cols.b, rows.s -= cols.s;
    return tr_shape_make(2, (struct tr_dim[]){rows, cols});
}

/* ---- the gradient rules the op table points to (ops.c), by op --------------------------- */

void tr_grad_matmul(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    int a = n->in[0], b = n->in[1], ta = n->attrs.matmul.trans_a, tb = n->attrs.matmul.trans_b;
    bool b_shared = shape_of(ad, b).rank == 2 && shape_of(ad, a).rank > 2;
    union tr_attrs at = {0};
    if (ad->needs[a]) {   /* da = dy·op(b)ᵀ, or op(b)·dyᵀ when a was transposed */
        at.matmul.trans_a = ta ? (uint8_t)tb : 0;
        at.matmul.trans_b = ta ? 1 : (uint8_t)!tb;
        emit(ad, TR_OP_MATMUL, ta ? (int[]){b, gy} : (int[]){gy, b}, 2, &a, 1, &at);
    }
    if (ad->needs[b]) {   /* db = op(a)ᵀ·dy, or dyᵀ·op(a) when b was transposed; summed over
                           * the batch for a shared b by flattening the batch into rows */
        int aa = b_shared ? view(ad, a, as_matrix(shape_of(ad, a))) : a;
        int gg = b_shared ? view(ad, gy, as_matrix(shape_of(ad, gy))) : gy;
        at.matmul.trans_a = tb ? 1 : (uint8_t)!ta;
        at.matmul.trans_b = tb ? (uint8_t)ta : 0;
        emit(ad, TR_OP_MATMUL, tb ? (int[]){gg, aa} : (int[]){aa, gg}, 2, &b, 1, &at);
    }
}

void tr_grad_bias_add(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    if (ad->needs[n->in[1]])
        emit(ad, TR_OP_BIAS_GRAD, &gy, 1, &n->in[1], 1, NULL);
    pass_through(ad, n->in[0], gy);
}

void tr_grad_add(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    pass_through(ad, n->in[0], gy);
    pass_through(ad, n->in[1], gy);
}

void tr_grad_mul(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    const int *in = n->in;
    if (ad->needs[in[0]])
        emit(ad, TR_OP_MUL, (int[]){gy, in[1]}, 2, &in[0], 1, NULL);
    if (ad->needs[in[1]])
        emit(ad, TR_OP_MUL, (int[]){gy, in[0]}, 2, &in[1], 1, NULL);
}

/* Linear in x with the same attributes (scale, dropout's mask): the op itself on gy. */
void tr_grad_same_op(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, n->op, &gy, 1, &n->in[0], 1, &n->attrs);
}

void tr_grad_relu(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_RELU_BWD, (int[]){gy, n->out[0]}, 2, &n->in[0], 1, NULL);
}

void tr_grad_tanh(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_TANH_BWD, (int[]){gy, n->out[0]}, 2, &n->in[0], 1, NULL);
}

void tr_grad_gelu(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_GELU_BWD, (int[]){gy, n->in[0]}, 2, &n->in[0], 1, &n->attrs);
}

void tr_grad_softmax(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_SOFTMAX_BWD, (int[]){gy, n->out[0]}, 2, &n->in[0], 1, NULL);
}

void tr_grad_log_softmax(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_LOG_SOFTMAX_BWD, (int[]){gy, n->out[0]}, 2, &n->in[0], 1, NULL);
}

void tr_grad_cross_entropy(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_CROSS_ENTROPY_BWD, (int[]){gy, n->in[0], n->in[1]}, 3, &n->in[0], 1, &n->attrs);
}

/* The classifier's weight is a parameter: its gradient is added straight into the parameter's
 * (attrs add_dw) rather than through a [classes, D] temporary and an ACCUMULATE, which for
 * GPT-2's vocabulary would be the arena's largest value. */
void tr_grad_linear_cross_entropy(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    int in[5] = {gy, n->in[0], n->in[1], n->in[2], n->out[1]}, x = n->in[0], w = n->in[1];
    union tr_attrs at = n->attrs;
    bool ax = false;
    if (ad->g->values[w].kind != TR_PARAM || (ad->needs[x] && (ad->grad[x] >= 0))) {
        emit(ad, TR_OP_LINEAR_CROSS_ENTROPY_BWD, in, 5, n->in, 2, &at);   /* the general way */
        return;
    }
    int dx = ad->needs[x] ? destination(ad, x, &ax) : new_act(ad, x);
    at.cross_entropy.add_dw = 1;
    backward_node(ad, TR_OP_LINEAR_CROSS_ENTROPY_BWD, in, 5, (int[]){dx, ad->g->values[w].grad}, 2, &at, false);
}

void tr_grad_layernorm(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_LAYERNORM_BWD, (int[]){gy, n->in[0], n->in[1], n->out[1]}, 4, n->in, 3, &n->attrs);
}

void tr_grad_embedding(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_EMBEDDING_BWD, (int[]){gy, n->in[1]}, 2, &n->in[0], 1, NULL);
}

void tr_grad_attention(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    const int *in = n->in;
    int bin[7] = {gy, in[0], in[1], in[2], n->out[0], n->out[1], n->nin > 3 ? in[3] : -1};
    emit(ad, TR_OP_ATTENTION_BWD, bin, n->nin > 3 ? 7 : 6, in, 3, &n->attrs);
}

void tr_grad_conv2d(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    const int *in = n->in;
    if (ad->needs[in[0]])
        emit(ad, TR_OP_CONV2D_BWD_DATA, (int[]){gy, in[1]}, 2, &in[0], 1, &n->attrs);
    if (ad->needs[in[1]])
        emit(ad, TR_OP_CONV2D_BWD_FILTER, (int[]){gy, in[0]}, 2, &in[1], 1, &n->attrs);
}

void tr_grad_batchnorm(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_BATCHNORM_BWD, (int[]){gy, n->in[0], n->in[1], n->out[1]}, 4, n->in, 3, &n->attrs);
}

void tr_grad_maxpool(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_MAXPOOL_BWD, (int[]){gy, n->out[1]}, 2, &n->in[0], 1, &n->attrs);
}

void tr_grad_avgpool(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_AVGPOOL_BWD, &gy, 1, &n->in[0], 1, &n->attrs);
}

void tr_grad_global_avgpool(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_GLOBAL_AVGPOOL_BWD, &gy, 1, &n->in[0], 1, &n->attrs);
}

void tr_grad_reshape(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    pass_through(ad, n->in[0], view(ad, gy, shape_of(ad, n->in[0])));
}

void tr_grad_permute(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    union tr_attrs inv = {0};
    for (int i = 0; i < shape_of(ad, n->out[0]).rank; i++)
        inv.permute.perm[n->attrs.permute.perm[i]] = i;
    emit(ad, TR_OP_PERMUTE, &gy, 1, &n->in[0], 1, &inv);
}

void tr_grad_slice(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_SLICE_BWD, &gy, 1, &n->in[0], 1, &n->attrs);
}

void tr_grad_concat(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    int axis = n->attrs.axis.axis;
    int64_t start = 0;
    for (int i = 0; i < n->nin; i++) {
        int x = n->in[i];
        union tr_attrs at = {.slice = {axis, start}};
        if (ad->needs[x])
            emit(ad, TR_OP_SLICE, &gy, 1, &x, 1, &at);
        start += shape_of(ad, x).dim[axis].k;
    }
}

void tr_grad_gather(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_GATHER_BWD, (int[]){gy, n->in[1]}, 2, &n->in[0], 1, &n->attrs);
}

void tr_grad_masked_fill(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    union tr_attrs at = n->attrs;
    at.fill.value = 0;
    emit(ad, TR_OP_MASKED_FILL, (int[]){gy, n->in[1]}, 2, &n->in[0], 1, &at);
}

void tr_grad_cast(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    emit(ad, TR_OP_CAST, &gy, 1, &n->in[0], 1, NULL);
}

/* Tensor parallelism (Megatron-LM's g and f): a sum over the tensor ranks passes the gradient to
 * each unchanged; the input of column-split layers, each rank's part of the gradient, summed. */
void tr_grad_allreduce(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    pass_through(ad, n->in[0], gy);
}

void tr_grad_tensor_in(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    if (!ad->needs[n->in[0]])
        return;
    int sum = new_act(ad, n->in[0]);
    backward_node(ad, TR_OP_ALLREDUCE, &gy, 1, &sum, 1, NULL, false);
    pass_through(ad, n->in[0], sum);
}

/* Sequence parallelism: a gather's gradient reduce-scattered (partial) or sliced; a scatter's
 * and a slice's gathered (the gradient of a whole value every rank holds alike, each rank
 * having computed the same). */
void tr_grad_seq(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    if (!ad->needs[n->in[0]])
        return;
    enum tr_op op = n->op != TR_OP_SEQ_GATHER ? TR_OP_SEQ_GATHER : n->attrs.seq.partial ? TR_OP_SEQ_SCATTER
                                                                                        : TR_OP_SEQ_SLICE;
    int dx = new_act(ad, n->in[0]);
    backward_node(ad, op, &gy, 1, &dx, 1, &(union tr_attrs){.seq = {0}}, false);
    pass_through(ad, n->in[0], dx);
}

/* SUM and MEAN: dy broadcast back over the reduced axis, ÷ its size for the mean. */
void tr_grad_sum(struct tr_autodiff *ad, const struct tr_node *n, int gy)
{
    union tr_attrs at = n->attrs;
    at.axis.mean = n->op == TR_OP_MEAN;
    emit(ad, TR_OP_SUM_BWD, &gy, 1, &n->in[0], 1, &at);
}

/* Each differentiable op's rule, by op: the ops whose row (ops.c) says TR_GRAD_RULE, and only
 * they (tests/check_ops.c). Here, not in the op table, so that the table (read by every pass)
 * does not point back into this pass. */
static tr_grad_rule *const rules[TR_NOPS] = {
    [TR_OP_MATMUL] = tr_grad_matmul,
    [TR_OP_BIAS_ADD] = tr_grad_bias_add,
    [TR_OP_ADD] = tr_grad_add,
    [TR_OP_MUL] = tr_grad_mul,
    [TR_OP_SCALE] = tr_grad_same_op,
    [TR_OP_RELU] = tr_grad_relu,
    [TR_OP_GELU] = tr_grad_gelu,
    [TR_OP_TANH] = tr_grad_tanh,
    [TR_OP_SOFTMAX] = tr_grad_softmax,
    [TR_OP_LOG_SOFTMAX] = tr_grad_log_softmax,
    [TR_OP_CROSS_ENTROPY] = tr_grad_cross_entropy,
    [TR_OP_LINEAR_CROSS_ENTROPY] = tr_grad_linear_cross_entropy,
    [TR_OP_LAYERNORM] = tr_grad_layernorm,
    [TR_OP_EMBEDDING] = tr_grad_embedding,
    [TR_OP_DROPOUT] = tr_grad_same_op,
    [TR_OP_ATTENTION] = tr_grad_attention,
    [TR_OP_CONV2D] = tr_grad_conv2d,
    [TR_OP_BATCHNORM] = tr_grad_batchnorm,
    [TR_OP_MAXPOOL] = tr_grad_maxpool,
    [TR_OP_AVGPOOL] = tr_grad_avgpool,
    [TR_OP_GLOBAL_AVGPOOL] = tr_grad_global_avgpool,
    [TR_OP_RESHAPE] = tr_grad_reshape,
    [TR_OP_PERMUTE] = tr_grad_permute,
    [TR_OP_SLICE] = tr_grad_slice,
    [TR_OP_CONCAT] = tr_grad_concat,
    [TR_OP_GATHER] = tr_grad_gather,
    [TR_OP_MASKED_FILL] = tr_grad_masked_fill,
    [TR_OP_CAST] = tr_grad_cast,
    [TR_OP_ALLREDUCE] = tr_grad_allreduce,
    [TR_OP_TENSOR_IN] = tr_grad_tensor_in,
    [TR_OP_SEQ_GATHER] = tr_grad_seq,
    [TR_OP_SEQ_SCATTER] = tr_grad_seq,
    [TR_OP_SEQ_SLICE] = tr_grad_seq,
    [TR_OP_SUM] = tr_grad_sum,
    [TR_OP_MEAN] = tr_grad_sum,
};

tr_grad_rule *tr_grad_rule_of(enum tr_op op)
{
    return rules[op];
}

static bool differentiable(enum tr_op op)
{
    return rules[op] != NULL;
}

/* needs[v]: v is a parameter, or a float output of a differentiable op reading one. */
static void mark_needs(struct tr_autodiff *ad, int nforward)
{
    struct tr_graph *g = ad->g;
    for (int v = 0; v < g->nvalues; v++)
        ad->needs[v] = g->values[v].kind == TR_PARAM;
    for (int i = 0; i < nforward; i++) {
        const struct tr_node *n = &g->nodes[i];
        bool any = false;
        for (int j = 0; j < n->nin; j++)
            any |= n->in[j] >= 0 && ad->needs[n->in[j]];
        for (int j = 0; j < n->nout; j++)
            ad->needs[n->out[j]] = any && differentiable(n->op) && tr_dtype_is_float(g->values[n->out[j]].dtype);
    }
}

int tr_autodiff(struct tr_graph *g)
{
    if (g->error)
        return -1;
    if (g->loss < 0) {
        snprintf(g->message, sizeof g->message, "autodiff: no loss was set");
        return g->error = TR_EINVAL, -1;
    }
    int nforward = g->nnodes;
    for (int v = 0, n = g->nvalues; v < n; v++)   /* every parameter gets its gradient buffer */
        if (g->values[v].kind == TR_PARAM && g->values[v].grad < 0) {
            char name[sizeof g->values[v].name];
            struct tr_shape s = g->values[v].shape;
            snprintf(name, sizeof name, "%.90s.grad", g->values[v].name);
            int gv = tr_value_add(g, TR_GRAD, g->values[v].dtype == TR_F64 ? TR_F64 : TR_F32, &s, name);
            g->values[v].grad = gv;
        }
    struct tr_shape one = tr_shape_make(1, (struct tr_dim[]){tr_dim_const(1)});
    int seed = tr_value_add(g, TR_INPUT, g->values[g->loss].dtype, &one, "loss.scale");

    /* Passes append values: size the side tables for the most a backward can add (≤ 8 per
     * forward output and node, generously). */
    int cap = g->nvalues + 16 * (nforward + 1);
    struct tr_autodiff ad = {g, tr_xmalloc((size_t)cap * sizeof(int)), tr_xcalloc((size_t)cap, 1),
                          tr_xcalloc((size_t)cap, 1)};
    for (int v = 0; v < cap; v++)
        ad.grad[v] = -1;
    mark_needs(&ad, nforward);
    ad.grad[g->loss] = seed;
    int saved_block = g->block;
    for (int i = nforward - 1; i >= 0 && !g->error; i--) {
        struct tr_node n = g->nodes[i];   /* a copy: appending may move the array */
        int gy = ad.grad[n.out[0]];
        if (gy < 0 || !differentiable(n.op))
            continue;
        g->block = n.block;   /* backward nodes belong to their forward's block (remat's unit) */
        int first = g->nnodes;
        rules[n.op](&ad, &n, gy);
        for (int k = first; k < g->nnodes; k++)
            g->nodes[k].origin = i;
        if (g->nvalues + 16 > cap) {
            snprintf(g->message, sizeof g->message, "autodiff: internal: side tables too small");
            g->error = TR_EINVAL;
        }
    }
    g->block = saved_block;
    free(ad.grad), free(ad.needs), free(ad.shared);
    return g->error ? -1 : seed;
}
