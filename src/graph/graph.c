/* Building the static graph: leaves, nodes, and one builder per op with its shape rule.
 * A builder that is handed shapes that do not fit records the first error in the graph and
 * returns -1; later builders given -1 pass it on, so a model builder checks once at the end. */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/ops.h"

const char *tr_op_name(enum tr_op op)
{
    return op < TR_NOPS && tr_ops[op].name ? tr_ops[op].name : "?";
}

void tr_graph_init(struct tr_graph *g)
{
    memset(g, 0, sizeof *g);
    g->block = -1;
    g->loss = -1;
    g->tensor = 1;
}

void tr_graph_free(struct tr_graph *g)
{
    free(g->values);
    free(g->nodes);
    memset(g, 0, sizeof *g);
}

void tr_graph_block(struct tr_graph *g, int b)
{
    g->block = b;
}

void tr_graph_layout(struct tr_graph *g, enum tr_layout layout)
{
    g->layout = (uint8_t)layout;
}

static int fail(struct tr_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct tr_graph *g, const char *fmt, ...)
{
    if (!g->error) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->message, sizeof g->message, fmt, ap);
        va_end(ap);
        g->error = TR_EINVAL;
    }
    return -1;
}

int tr_value_add(struct tr_graph *g, enum tr_value_kind kind, enum tr_dtype t, const struct tr_shape *s,
                 const char *name)
{
    struct tr_shape shape = *s;   /* s may point into the array the realloc below moves */
    if (g->nvalues == g->cap_values) {
        g->cap_values = g->cap_values ? 2 * g->cap_values : 64;
        g->values = tr_xrealloc(g->values, (size_t)g->cap_values * sizeof *g->values);
    }
    struct tr_value *v = &g->values[g->nvalues];
    memset(v, 0, sizeof *v);
    v->dtype = t;
    v->shape = shape;
    v->kind = kind;
    v->producer = -1;
    v->grad = -1;
    v->view_of = -1;
    v->gathers = -1;
    v->split_axis = -1;
    v->init_key = g->nvalues - g->tensor_values;
    if (name)
        snprintf(v->name, sizeof v->name, "%s", name);
    return g->nvalues++;
}

int tr_node_add(struct tr_graph *g, enum tr_op op, const int *in, int nin, const int *out, int nout,
                const union tr_attrs *attrs)
{
    const struct tr_op_info *info = &tr_ops[op];
    if (nin < info->nin_min || nin > info->nin_max || nout != info->nout)
        fail(g, "internal: %s with %d inputs and %d outputs, not as ops.c says", info->name, nin, nout);
    if (g->nnodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 64;
        g->nodes = tr_xrealloc(g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes);
    }
    struct tr_node *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->nin = nin;
    n->nout = nout;
    memcpy(n->in, in, (size_t)nin * sizeof *in);
    memcpy(n->out, out, (size_t)nout * sizeof *out);
    if (attrs)
        n->attrs = *attrs;
    n->block = g->block;
    n->phase = TR_FORWARD;
    n->origin = -1;
    for (int i = 0; i < nout; i++)
        if (g->values[out[i]].producer < 0 && g->values[out[i]].kind == TR_ACT)
            g->values[out[i]].producer = g->nnodes;
    return g->nnodes++;
}

void tr_graph_relink(struct tr_graph *g)
{
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_ACT)
            g->values[v].producer = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const struct tr_node *n = &g->nodes[i];
        int in = n->nin ? n->in[0] : -1;
        if (tr_op_is_view(n->op))   /* reshape, tensor_in */
            g->values[n->out[0]].view_of = g->values[in].view_of >= 0 ? g->values[in].view_of : in;
        for (int j = 0; j < n->nout; j++) {
            struct tr_value *val = &g->values[n->out[j]];
            if (val->kind == TR_ACT && val->producer < 0)
                val->producer = i;
        }
    }
}

/* ---- helpers for builders ------------------------------------------------------------- */

static bool valid(const struct tr_graph *g, int v)
{
    return v >= 0 && v < g->nvalues;
}

static const struct tr_shape *shape(const struct tr_graph *g, int v)
{
    return &g->values[v].shape;
}

static char *describe(const struct tr_graph *g, int v, char buf[96])
{
    tr_shape_format(shape(g, v), buf, 96);
    return buf;
}

/* A new activation of shape s and dtype t, produced by a new node op(in...). */
static int emit(struct tr_graph *g, enum tr_op op, const int *in, int nin, enum tr_dtype t,
                const struct tr_shape *s, const union tr_attrs *attrs)
{
    int y = tr_value_add(g, TR_ACT, t, s, NULL);
    tr_node_add(g, op, in, nin, &y, 1, attrs);
    return y;
}

#define CHECK_VALUES(g, ...)                                                          \
    do {                                                                              \
        const int vs_[] = {__VA_ARGS__};                                              \
        if ((g)->error)                                                               \
            return -1;                                                                \
        for (size_t i_ = 0; i_ < sizeof vs_ / sizeof vs_[0]; i_++)                    \
            if (!valid((g), vs_[i_]))                                                 \
                return fail((g), "%s: value %d does not exist", __func__, vs_[i_]);   \
    } while (0)

/* Statistics (losses, normalisation moments, log-sum-exp) are f32 whatever the storage, except
 * in the f64 test graphs. */
static enum tr_dtype stats_dtype(const struct tr_graph *g, int v)
{
    return g->values[v].dtype == TR_F64 ? TR_F64 : TR_F32;
}

static struct tr_dim last(const struct tr_graph *g, int v)
{
    const struct tr_shape *s = shape(g, v);
    return s->dim[s->rank - 1];
}

/* ---- leaves ---------------------------------------------------------------------------- */

static int leaf(struct tr_graph *g, enum tr_value_kind kind, const char *name, enum tr_dtype t,
                int rank, const struct tr_dim *dims)
{
    if (rank < 1 || rank > TR_MAX_RANK)
        return fail(g, "%s: rank %d is outside 1..%d", name, rank, TR_MAX_RANK);
    struct tr_shape s = tr_shape_make(rank, dims);
    return tr_value_add(g, kind, t, &s, name);
}

int tr_param(struct tr_graph *g, const char *name, enum tr_dtype t, int rank, const struct tr_dim *dims)
{
    int p = leaf(g, TR_PARAM, name, t, rank, dims);
    for (int i = 0; p >= 0 && i < rank; i++)
        if (dims[i].b || dims[i].s)
            return fail(g, "%s: a parameter's size cannot depend on B or S", name);
    return p;
}

int tr_input(struct tr_graph *g, const char *name, enum tr_dtype t, int rank, const struct tr_dim *dims)
{
    return leaf(g, TR_INPUT, name, t, rank, dims);
}

int tr_state(struct tr_graph *g, const char *name, enum tr_dtype t, int rank, const struct tr_dim *dims)
{
    return leaf(g, TR_STATE, name, t, rank, dims);
}

void tr_param_init(struct tr_graph *g, int v, enum tr_init init, float scale, int no_decay)
{
    if (!valid(g, v))
        return;
    g->values[v].init = (uint8_t)init;
    g->values[v].init_scale = scale;
    g->values[v].no_decay = (uint8_t)no_decay;
}

void tr_graph_set_loss(struct tr_graph *g, int loss)
{
    if (valid(g, loss))
        g->loss = loss;
}

/* ---- linear algebra -------------------------------------------------------------------- */

int tr_matmul(struct tr_graph *g, int a, int b, int trans_a, int trans_b)
{
    CHECK_VALUES(g, a, b);
    const struct tr_shape *sa = shape(g, a), *sb = shape(g, b);
    char ba[96], bb[96];
    if (sa->rank < 2 || sb->rank < 2 || (sb->rank != 2 && sb->rank != sa->rank))
        return fail(g, "matmul: shapes %s and %s: b must be a matrix or batched like a",
                    describe(g, a, ba), describe(g, b, bb));
    struct tr_dim M = sa->dim[sa->rank - (trans_a ? 1 : 2)], Ka = sa->dim[sa->rank - (trans_a ? 2 : 1)];
    struct tr_dim Kb = sb->dim[sb->rank - (trans_b ? 1 : 2)], N = sb->dim[sb->rank - (trans_b ? 2 : 1)];
    bool batch_ok = true;
    for (int i = 0; sb->rank > 2 && i < sa->rank - 2; i++)
        batch_ok &= tr_dim_equal(sa->dim[i], sb->dim[i]);
    if (!tr_dim_equal(Ka, Kb) || !batch_ok)
        return fail(g, "matmul: shapes %s%s and %s%s do not multiply", describe(g, a, ba),
                    trans_a ? "ᵀ" : "", describe(g, b, bb), trans_b ? "ᵀ" : "");
    if (trans_a && sb->rank == 2 && sa->rank > 2)
        return fail(g, "matmul: a transposed batched a needs a batched b");
    struct tr_shape s = *sa;
    s.dim[s.rank - 2] = M;
    s.dim[s.rank - 1] = N;
    union tr_attrs at = {.matmul = {(uint8_t)trans_a, (uint8_t)trans_b}};
    return emit(g, TR_OP_MATMUL, (int[]){a, b}, 2, g->values[a].dtype, &s, &at);
}

int tr_bias_add(struct tr_graph *g, int x, int bias)
{
    CHECK_VALUES(g, x, bias);
    char bx[96], bb[96];
    if (shape(g, bias)->rank != 1 || !tr_dim_equal(shape(g, bias)->dim[0], last(g, x)))
        return fail(g, "bias_add: bias %s does not match the last dim of %s", describe(g, bias, bb),
                    describe(g, x, bx));
    return emit(g, TR_OP_BIAS_ADD, (int[]){x, bias}, 2, g->values[x].dtype, shape(g, x), NULL);
}

int tr_linear(struct tr_graph *g, int x, int w, int bias)
{
    int y = tr_matmul(g, x, w, 0, 1);
    return bias >= 0 ? tr_bias_add(g, y, bias) : y;
}

static int same_shape_binary(struct tr_graph *g, enum tr_op op, int a, int b)
{
    CHECK_VALUES(g, a, b);
    char ba[96], bb[96];
    if (!tr_shape_equal(shape(g, a), shape(g, b)))
        return fail(g, "%s: shapes %s and %s differ", tr_op_name(op), describe(g, a, ba), describe(g, b, bb));
    return emit(g, op, (int[]){a, b}, 2, g->values[a].dtype, shape(g, a), NULL);
}

int tr_add(struct tr_graph *g, int a, int b) { return same_shape_binary(g, TR_OP_ADD, a, b); }
int tr_mul(struct tr_graph *g, int a, int b) { return same_shape_binary(g, TR_OP_MUL, a, b); }

static int unary(struct tr_graph *g, enum tr_op op, int x, const union tr_attrs *attrs)
{
    CHECK_VALUES(g, x);
    if (!tr_dtype_is_float(g->values[x].dtype))
        return fail(g, "%s: needs a floating-point input", tr_op_name(op));
    return emit(g, op, &x, 1, g->values[x].dtype, shape(g, x), attrs);
}

int tr_scale(struct tr_graph *g, int x, float alpha)
{
    return unary(g, TR_OP_SCALE, x, &(union tr_attrs){.scale = {alpha}});
}
int tr_relu(struct tr_graph *g, int x) { return unary(g, TR_OP_RELU, x, NULL); }
int tr_tanh(struct tr_graph *g, int x) { return unary(g, TR_OP_TANH, x, NULL); }
int tr_softmax(struct tr_graph *g, int x) { return unary(g, TR_OP_SOFTMAX, x, NULL); }
int tr_log_softmax(struct tr_graph *g, int x) { return unary(g, TR_OP_LOG_SOFTMAX, x, NULL); }

int tr_gelu(struct tr_graph *g, int x, int tanh_approx)
{
    return unary(g, TR_OP_GELU, x, &(union tr_attrs){.gelu = {(uint8_t)tanh_approx}});
}

int tr_dropout(struct tr_graph *g, int x, float p, uint32_t stream)
{
    if (!(p >= 0 && p < 1))
        return fail(g, "dropout: p = %g is outside [0, 1)", p);
    CHECK_VALUES(g, x);
    bool part = shape(g, x)->rank >= 3 && tr_value_seq_part(g, x);   /* sequence parallel */
    return unary(g, TR_OP_DROPOUT, x, &(union tr_attrs){.dropout = {p, stream, (uint16_t)(part ? g->tensor_rank : 0),
                                                                    (uint16_t)(part ? g->tensor : 1)}});
}

/* ---- losses and normalisation ------------------------------------------------------------ */

int tr_cross_entropy(struct tr_graph *g, int logits, int targets, int ignore_index)
{
    CHECK_VALUES(g, logits, targets);
    const struct tr_shape *sl = shape(g, logits), *st = shape(g, targets);
    char bl[96], bt[96];
    if (sl->rank != 2 || st->rank != 1 || !tr_dim_equal(sl->dim[0], st->dim[0]) ||
        g->values[targets].dtype != TR_I32)
        return fail(g, "cross_entropy: logits %s and targets %s: expected [N, C] and i32 [N]",
                    describe(g, logits, bl), describe(g, targets, bt));
    struct tr_shape s = tr_shape_make(1, (struct tr_dim[]){tr_dim_const(1)});
    union tr_attrs at = {.cross_entropy = {ignore_index}};
    return emit(g, TR_OP_CROSS_ENTROPY, (int[]){logits, targets}, 2, stats_dtype(g, logits), &s, &at);
}

int tr_linear_cross_entropy(struct tr_graph *g, int x, int w, int targets, int ignore_index, int *lse,
                            int *rank)
{
    CHECK_VALUES(g, x, w, targets);
    const struct tr_shape *sx = shape(g, x), *sw = shape(g, w), *st = shape(g, targets);
    char bx[96], bw[96], bt[96];
    if (sx->rank != 2 || sw->rank != 2 || st->rank != 1 || !tr_dim_equal(sx->dim[1], sw->dim[1]) ||
        !tr_dim_equal(sx->dim[0], st->dim[0]) || g->values[targets].dtype != TR_I32 ||
        g->values[x].dtype != g->values[w].dtype)
        return fail(g, "linear_cross_entropy: x %s, w %s and targets %s: expected [N, D], [C, D] and "
                    "i32 [N]", describe(g, x, bx), describe(g, w, bw), describe(g, targets, bt));
    struct tr_shape one = tr_shape_make(1, (struct tr_dim[]){tr_dim_const(1)}),
                    rows = tr_shape_make(1, sx->dim);
    int out[3] = {tr_value_add(g, TR_ACT, stats_dtype(g, x), &one, NULL),
                  tr_value_add(g, TR_ACT, stats_dtype(g, x), &rows, NULL),
                  tr_value_add(g, TR_ACT, TR_I32, &rows, NULL)};
    tr_node_add(g, TR_OP_LINEAR_CROSS_ENTROPY, (int[]){x, w, targets}, 3, out, 3,
                &(union tr_attrs){.cross_entropy = {ignore_index, 0}});
    if (lse)
        *lse = out[1];
    if (rank)
        *rank = out[2];
    return out[0];
}

int tr_layernorm(struct tr_graph *g, int x, int gamma, int beta, float eps)
{
    CHECK_VALUES(g, x, gamma, beta);
    struct tr_dim D = last(g, x);
    if (shape(g, gamma)->rank != 1 || !tr_dim_equal(shape(g, gamma)->dim[0], D) ||
        !tr_shape_equal(shape(g, gamma), shape(g, beta)))
        return fail(g, "layernorm: gamma and beta must be [%lld], the last dim of x", (long long)D.k);
    struct tr_dim rows = tr_shape_numel(shape(g, x));
    rows.k /= D.k;
    struct tr_shape ss = tr_shape_make(2, (struct tr_dim[]){rows, tr_dim_const(2)});
    int y = tr_value_add(g, TR_ACT, g->values[x].dtype, shape(g, x), NULL);
    int stats = tr_value_add(g, TR_ACT, stats_dtype(g, x), &ss, NULL);
    tr_node_add(g, TR_OP_LAYERNORM, (int[]){x, gamma, beta}, 3, (int[]){y, stats}, 2,
                &(union tr_attrs){.norm = {eps}});
    return y;
}

int tr_embedding(struct tr_graph *g, int table, int ids)
{
    CHECK_VALUES(g, table, ids);
    const struct tr_shape *st = shape(g, table), *si = shape(g, ids);
    if (st->rank != 2 || g->values[ids].dtype != TR_I32 || si->rank >= TR_MAX_RANK)
        return fail(g, "embedding: expected a table [V, D] and i32 ids");
    struct tr_shape s = *si;
    s.dim[s.rank++] = st->dim[1];
    return emit(g, TR_OP_EMBEDDING, (int[]){table, ids}, 2, g->values[table].dtype, &s, NULL);
}

int tr_attention(struct tr_graph *g, int q, int k, int v, int padding_mask, int causal)
{
    CHECK_VALUES(g, q, k, v);
    const struct tr_shape *sq = shape(g, q);
    char bq[96], bk[96];
    if (sq->rank != 4 || !tr_shape_equal(sq, shape(g, k)) || !tr_shape_equal(sq, shape(g, v)))
        return fail(g, "attention: q %s, k %s and v must be [B, H, S, D] alike",
                    describe(g, q, bq), describe(g, k, bk));
    if (padding_mask >= 0) {
        const struct tr_shape *sm = shape(g, padding_mask);
        if (!valid(g, padding_mask) || sm->rank != 2 || !tr_dim_equal(sm->dim[0], sq->dim[0]) ||
            !tr_dim_equal(sm->dim[1], sq->dim[2]) || g->values[padding_mask].dtype != TR_U8)
            return fail(g, "attention: the padding mask must be u8 [B, S]");
    }
    union tr_attrs at = {.attention = {(uint8_t)causal, padding_mask >= 0, 0}};
    struct tr_shape ls = tr_shape_make(3, sq->dim);
    int o = tr_value_add(g, TR_ACT, g->values[q].dtype, sq, NULL);
    int lse = tr_value_add(g, TR_ACT, stats_dtype(g, q), &ls, NULL);
    int in[4] = {q, k, v, padding_mask};
    tr_node_add(g, TR_OP_ATTENTION, in, padding_mask >= 0 ? 4 : 3, (int[]){o, lse}, 2, &at);
    return o;
}

/* ---- convolutional ----------------------------------------------------------------------- */

static struct tr_dim out_size(struct tr_dim in, int64_t kernel, int stride, int pad)
{
    return tr_dim_const((in.k + 2 * pad - kernel) / stride + 1);
}

/* "[N, C, H, W]" or "[N, H, W, C]" */
static const char *image_dims(const struct tr_graph *g)
{
    return g->layout == TR_NHWC ? "[N, H, W, C]" : "[N, C, H, W]";
}

int tr_conv2d(struct tr_graph *g, int x, int w, int stride, int pad)
{
    CHECK_VALUES(g, x, w);
    const struct tr_shape *sx = shape(g, x), *sw = shape(g, w);
    char bx[96], bw[96];
    struct tr_image_axes a = tr_image_axes(g->layout);
    int c = a.c, h = a.h, wd = a.w;
    if (sx->rank != 4 || sw->rank != 4 || !tr_dim_equal(sx->dim[c], sw->dim[1]) || stride < 1 ||
        pad < 0 || sx->dim[h].b || sx->dim[h].s || sx->dim[wd].b || sx->dim[wd].s ||
        sx->dim[h].k + 2 * pad < sw->dim[2].k || sx->dim[wd].k + 2 * pad < sw->dim[3].k)
        return fail(g, "conv2d: x %s and w %s: expected %s and [O, C, kh, kw]",
                    describe(g, x, bx), describe(g, w, bw), image_dims(g));
    struct tr_shape s = *sx;
    s.dim[c] = sw->dim[0];
    s.dim[h] = out_size(sx->dim[h], sw->dim[2].k, stride, pad);
    s.dim[wd] = out_size(sx->dim[wd], sw->dim[3].k, stride, pad);
    return emit(g, TR_OP_CONV2D, (int[]){x, w}, 2, g->values[x].dtype, &s,
                &(union tr_attrs){.conv = {stride, pad, g->layout}});
}

int tr_batchnorm(struct tr_graph *g, int x, int gamma, int beta, int running_mean,
                 int running_var, float eps, float momentum, int training)
{
    CHECK_VALUES(g, x, gamma, beta, running_mean, running_var);
    const struct tr_shape *sx = shape(g, x);
    int c = sx->rank == 4 ? tr_image_axes(g->layout).c : 1;
    if ((sx->rank != 4 && sx->rank != 2) || shape(g, gamma)->rank != 1 ||
        !tr_dim_equal(shape(g, gamma)->dim[0], sx->dim[c]))
        return fail(g, "batchnorm: expected x %s or [N, C] and parameters [C]", image_dims(g));
    struct tr_shape ss = tr_shape_make(2, (struct tr_dim[]){tr_dim_const(2), sx->dim[c]});
    int y = tr_value_add(g, TR_ACT, g->values[x].dtype, sx, NULL);
    int saved = tr_value_add(g, TR_ACT, stats_dtype(g, x), &ss, NULL);
    union tr_attrs at = {.batchnorm = {eps, momentum, (uint8_t)training, (uint8_t)(c == 3)}};
    tr_node_add(g, TR_OP_BATCHNORM, (int[]){x, gamma, beta, running_mean, running_var}, 5,
                (int[]){y, saved}, 2, &at);
    return y;
}

static int pool(struct tr_graph *g, enum tr_op op, int x, int kernel, int stride, int pad)
{
    CHECK_VALUES(g, x);
    const struct tr_shape *sx = shape(g, x);
    if (g->layout != TR_NCHW)
        return fail(g, "%s: images channels last are not supported; [N, C, H, W] only", tr_op_name(op));
    if (sx->rank != 4 || kernel < 1 || stride < 1 || pad < 0 || 2 * pad > kernel ||
        sx->dim[2].k + 2 * pad < kernel || sx->dim[3].k + 2 * pad < kernel)
        return fail(g, "%s: expected x [N, C, H, W] and a kernel that fits", tr_op_name(op));
    struct tr_shape s = *sx;
    s.dim[2] = out_size(sx->dim[2], kernel, stride, pad);
    s.dim[3] = out_size(sx->dim[3], kernel, stride, pad);
    union tr_attrs at = {.pool = {kernel, stride, pad}};
    if (op == TR_OP_AVGPOOL)
        return emit(g, op, &x, 1, g->values[x].dtype, &s, &at);
    int y = tr_value_add(g, TR_ACT, g->values[x].dtype, &s, NULL);
    int idx = tr_value_add(g, TR_ACT, TR_I32, &s, NULL);
    tr_node_add(g, op, &x, 1, (int[]){y, idx}, 2, &at);
    return y;
}

int tr_maxpool(struct tr_graph *g, int x, int kernel, int stride, int pad)
{
    return pool(g, TR_OP_MAXPOOL, x, kernel, stride, pad);
}

int tr_avgpool(struct tr_graph *g, int x, int kernel, int stride, int pad)
{
    return pool(g, TR_OP_AVGPOOL, x, kernel, stride, pad);
}

int tr_global_avgpool(struct tr_graph *g, int x)
{
    CHECK_VALUES(g, x);
    if (shape(g, x)->rank != 4)
        return fail(g, "global_avgpool: expected x %s", image_dims(g));
    int c = tr_image_axes(g->layout).c;
    struct tr_shape s = tr_shape_make(2, (struct tr_dim[]){shape(g, x)->dim[0], shape(g, x)->dim[c]});
    return emit(g, TR_OP_GLOBAL_AVGPOOL, &x, 1, g->values[x].dtype, &s,
                &(union tr_attrs){.pool = {.channels_last = g->layout}});
}

/* ---- shapes -------------------------------------------------------------------------------- */

int tr_reshape(struct tr_graph *g, int x, int rank, const struct tr_dim *dims)
{
    CHECK_VALUES(g, x);
    struct tr_shape s = tr_shape_make(rank, dims);
    struct tr_dim a = tr_shape_numel(shape(g, x)), b = tr_shape_numel(&s);
    char bx[96], bs[96];
    tr_shape_format(&s, bs, sizeof bs);
    if (rank < 1 || rank > TR_MAX_RANK || !tr_dim_equal(a, b))
        return fail(g, "reshape: %s has a different number of elements than %s", describe(g, x, bx), bs);
    int y = emit(g, TR_OP_RESHAPE, &x, 1, g->values[x].dtype, &s, NULL);
    g->values[y].view_of = g->values[x].view_of >= 0 ? g->values[x].view_of : x;
    return y;
}

int tr_permute(struct tr_graph *g, int x, const int *perm)
{
    CHECK_VALUES(g, x);
    const struct tr_shape *sx = shape(g, x);
    struct tr_shape s = *sx;
    unsigned seen = 0;
    union tr_attrs at = {0};
    for (int i = 0; i < sx->rank; i++) {
        if (perm[i] < 0 || perm[i] >= sx->rank || (seen & (1u << perm[i])))
            return fail(g, "permute: not a permutation of %d axes", sx->rank);
        seen |= 1u << perm[i];
        s.dim[i] = sx->dim[perm[i]];
        at.permute.perm[i] = perm[i];
    }
    return emit(g, TR_OP_PERMUTE, &x, 1, g->values[x].dtype, &s, &at);
}

int tr_transpose(struct tr_graph *g, int x)
{
    CHECK_VALUES(g, x);
    int r = shape(g, x)->rank, perm[TR_MAX_RANK];
    if (r < 2)
        return fail(g, "transpose: needs two axes");
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    return tr_permute(g, x, perm);
}

int tr_slice(struct tr_graph *g, int x, int axis, int64_t start, int64_t len)
{
    CHECK_VALUES(g, x);
    const struct tr_shape *sx = shape(g, x);
    /* k·B^b·S^s ≥ k for any B, S ≥ 1: within k is within the tensor (BERT's first token of S) */
    if (axis < 0 || axis >= sx->rank || start < 0 || len < 1 || start + len > sx->dim[axis].k)
        return fail(g, "slice: [%lld, %lld) on axis %d is outside the tensor", (long long)start,
                    (long long)(start + len), axis);
    struct tr_shape s = *sx;
    s.dim[axis] = tr_dim_const(len);
    return emit(g, TR_OP_SLICE, &x, 1, g->values[x].dtype, &s,
                &(union tr_attrs){.slice = {axis, start}});
}

void tr_split(struct tr_graph *g, int x, int axis, int parts, int *out)
{
    int64_t n = valid(g, x) && axis >= 0 && axis < shape(g, x)->rank ? shape(g, x)->dim[axis].k : 0;
    for (int i = 0; i < parts; i++)
        out[i] = (parts > 0 && n % parts == 0) ? tr_slice(g, x, axis, i * (n / parts), n / parts)
                                               : fail(g, "split: %lld is not divisible by %d", (long long)n, parts);
}

int tr_concat(struct tr_graph *g, const int *xs, int n, int axis)
{
    if (g->error)
        return -1;
    if (n < 1 || n > TR_MAX_IN || !valid(g, xs[0]))
        return fail(g, "concat: 1 to %d inputs", TR_MAX_IN);
    struct tr_shape s = *shape(g, xs[0]);
    if (axis < 0 || axis >= s.rank)
        return fail(g, "concat: axis %d", axis);
    for (int i = 1; i < n; i++) {
        if (!valid(g, xs[i]) || shape(g, xs[i])->rank != s.rank)
            return fail(g, "concat: inputs of different ranks");
        for (int d = 0; d < s.rank; d++)
            if (d != axis && !tr_dim_equal(shape(g, xs[i])->dim[d], s.dim[d]))
                return fail(g, "concat: inputs differ outside axis %d", axis);
        if (!tr_dim_equal((struct tr_dim){1, s.dim[axis].b, s.dim[axis].s, s.dim[axis].div},
                          (struct tr_dim){1, shape(g, xs[i])->dim[axis].b, shape(g, xs[i])->dim[axis].s, shape(g, xs[i])->dim[axis].div}))
            return fail(g, "concat: sizes along axis %d must have the same form", axis);
        s.dim[axis].k += shape(g, xs[i])->dim[axis].k;
    }
    return emit(g, TR_OP_CONCAT, xs, n, g->values[xs[0]].dtype, &s,
                &(union tr_attrs){.axis = {axis}});
}

int tr_gather(struct tr_graph *g, int x, int ids)
{
    CHECK_VALUES(g, x, ids);
    if (shape(g, x)->rank != 2 || shape(g, ids)->rank != 1 || g->values[ids].dtype != TR_I32)
        return fail(g, "gather: expected x [N, D] and i32 ids [M]");
    struct tr_shape s = tr_shape_make(2, (struct tr_dim[]){shape(g, ids)->dim[0], shape(g, x)->dim[1]});
    return emit(g, TR_OP_GATHER, (int[]){x, ids}, 2, g->values[x].dtype, &s,
                &(union tr_attrs){.gather = {shape(g, x)->dim[0].k}});
}

int tr_masked_fill(struct tr_graph *g, int x, int mask, float value)
{
    CHECK_VALUES(g, x, mask);
    const struct tr_shape *sx = shape(g, x), *sm = shape(g, mask);
    bool prefix = sm->rank <= sx->rank && g->values[mask].dtype == TR_U8;
    for (int i = 0; prefix && i < sm->rank; i++)
        prefix = tr_dim_equal(sm->dim[i], sx->dim[i]);
    if (!prefix)
        return fail(g, "masked_fill: the mask must be u8 with a prefix of x's shape");
    return emit(g, TR_OP_MASKED_FILL, (int[]){x, mask}, 2, g->values[x].dtype, sx,
                &(union tr_attrs){.fill = {value}});
}

int tr_allreduce(struct tr_graph *g, int x)
{
    CHECK_VALUES(g, x);
    g->tensor_values++;
    return emit(g, TR_OP_ALLREDUCE, &x, 1, g->values[x].dtype, shape(g, x), NULL);
}

/* x's shape with axis 1 divided by the tensor ranks (parted) or made whole again. */
static struct tr_shape seq_shape(struct tr_graph *g, int x, bool parted)
{
    struct tr_shape s = *shape(g, x);
    int div = s.dim[1].div > 1 ? s.dim[1].div : 1;
    s.dim[1].div = (uint8_t)(parted ? div * g->tensor : div / g->tensor);
    if (s.dim[1].div == 1)
        s.dim[1].div = 0;
    return s;
}

static int seq_op(struct tr_graph *g, enum tr_op op, int x, bool parted, uint8_t partial)
{
    CHECK_VALUES(g, x);
    if (shape(g, x)->rank < 2 || g->tensor < 2 || parted == tr_value_seq_part(g, x))
        return fail(g, "%s: x must be %s along axis 1 on more than one tensor rank", tr_op_name(op),
                    parted ? "whole" : "a part");
    g->tensor_values++;
    struct tr_shape s = seq_shape(g, x, parted);
    return emit(g, op, &x, 1, g->values[x].dtype, &s, &(union tr_attrs){.seq = {partial}});
}

int tr_seq_gather(struct tr_graph *g, int x, bool partial) { return seq_op(g, TR_OP_SEQ_GATHER, x, false, partial); }
int tr_seq_scatter(struct tr_graph *g, int x) { return seq_op(g, TR_OP_SEQ_SCATTER, x, true, 0); }
int tr_seq_slice(struct tr_graph *g, int x) { return seq_op(g, TR_OP_SEQ_SLICE, x, true, 0); }

bool tr_value_seq_part(const struct tr_graph *g, int v)
{
    const struct tr_shape *s = &g->values[v].shape;
    return s->rank >= 2 && s->dim[1].div > 1;
}

int tr_tensor_in(struct tr_graph *g, int x)
{
    CHECK_VALUES(g, x);
    g->tensor_values++;
    int y = emit(g, TR_OP_TENSOR_IN, &x, 1, g->values[x].dtype, shape(g, x), NULL);
    g->values[y].view_of = g->values[x].view_of >= 0 ? g->values[x].view_of : x;
    return y;
}

void tr_param_split(struct tr_graph *g, int p, int axis, int parts)
{
    if (!valid(g, p) || g->tensor <= 1)
        return;
    g->values[p].split_axis = (int8_t)axis;
    g->values[p].split_parts = (uint8_t)parts;
}

struct tr_shape tr_value_whole_shape(const struct tr_graph *g, int v)
{
    struct tr_shape s = g->values[v].shape;
    if (g->values[v].split_axis >= 0)
        s.dim[g->values[v].split_axis].k *= g->tensor;
    return s;
}

void tr_value_slice(const struct tr_graph *g, int v, int rank, void *whole, void *slice, size_t size, bool to_slice)
{
    const struct tr_value *val = &g->values[v];
    int64_t outer = 1, inner = size, len = val->shape.dim[val->split_axis].k;
    for (int i = 0; i < val->split_axis; i++)
        outer *= val->shape.dim[i].k;
    for (int i = val->split_axis + 1; i < val->shape.rank; i++)
        inner *= val->shape.dim[i].k;
    int64_t parts = val->split_parts, block = len / parts;   /* this rank's rows of each part */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < parts; q++) {
            char *w = (char *)whole + ((o * len * g->tensor) + (q * g->tensor + rank) * block) * inner;
            char *sl = (char *)slice + (o * len + q * block) * inner;
            memcpy(to_slice ? sl : w, to_slice ? w : sl, (size_t)(block * inner));
        }
}

int tr_cast(struct tr_graph *g, int x, enum tr_dtype to)
{
    CHECK_VALUES(g, x);
    return emit(g, TR_OP_CAST, &x, 1, to, shape(g, x), NULL);
}

static int reduce(struct tr_graph *g, enum tr_op op, int x, int axis)
{
    CHECK_VALUES(g, x);
    const struct tr_shape *sx = shape(g, x);
    struct tr_shape s = {0};
    if (axis == -1) {
        s = tr_shape_make(1, (struct tr_dim[]){tr_dim_const(1)});
    } else if (axis >= 0 && axis < sx->rank && sx->rank > 1) {
        for (int i = 0; i < sx->rank; i++)
            if (i != axis)
                s.dim[s.rank++] = sx->dim[i];
    } else {
        return fail(g, "%s: axis %d of a rank-%d tensor", tr_op_name(op), axis, sx->rank);
    }
    return emit(g, op, &x, 1, op == TR_OP_ARGMAX ? TR_I32 : g->values[x].dtype, &s,
                &(union tr_attrs){.axis = {axis}});
}

int tr_sum(struct tr_graph *g, int x, int axis) { return reduce(g, TR_OP_SUM, x, axis); }
int tr_mean(struct tr_graph *g, int x, int axis) { return reduce(g, TR_OP_MEAN, x, axis); }

int tr_argmax(struct tr_graph *g, int x)
{
    CHECK_VALUES(g, x);
    return reduce(g, TR_OP_ARGMAX, x, shape(g, x)->rank - 1);
}
