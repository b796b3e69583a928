/* The planner's time model (plan.h): a micro-step is the sum over its scheduled nodes of each
 * node's time. On this host each node's kernel class (its op; a GEMM's variant and shape) was
 * measured by `trainrun calibrate` as a curve of seconds against work — FLOPs for the ops the
 * op table (ops.c) gives FLOPs, bytes read and written for the rest — so a node's time is its
 * class's curve at its work, plus the executor's own cost a node. A device profile has no
 * curves: there a node is its FLOPs at the GEMM rate, its bytes at the bandwidth and a fixed
 * cost per kernel. Recomputation is in the schedule, so it is counted; so is padding, since
 * the plan is for the padded (B, S). */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/tensor.h"
#include "graph/ops.h"

/* By the first 16-bit input, not by in[0]: a loss's backward takes the f32 dloss first and the
 * 16-bit activations after it (the kernels pick by those too), and keyed by dloss its bf16 times
 * went into the fp32 curve (the fused head's backward forecast at half gpt-small's measured). */
int tr_cost_precision(const struct tr_tensor *in, int nin)
{
    for (int i = 0; i < nin; i++)
        if (in[i].dtype == TR_BF16 || in[i].dtype == TR_F16)
            return in[i].dtype == TR_BF16 ? TR_PREC_BF16 : TR_PREC_FP16;
    return TR_PREC_FP32;
}

/* A GEMM's class: a·bᵀ is the forward's linear layer, aᵀ·b a weight's gradient, a·b the rest;
 * its shape by the smallest of M, N and K, where packing and threads stop paying. */
static int gemm_class(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    int ta = n->attrs.matmul.trans_a, tb = n->attrs.matmul.trans_b;
    int variant = ta && !tb ? TR_GEMM_TN : tb ? TR_GEMM_NT : TR_GEMM_NN;
    const struct tr_tensor *a = &in[0], *y = &out[0];
    int64_t M = y->dim[y->rank - 2], N = y->dim[y->rank - 1], K = a->dim[a->rank - (ta ? 2 : 1)];
    int64_t least = M < N ? M : N;
    least = K < least ? K : least;
    int shape = least < 96 ? TR_GEMM_SMALL : least < 384 ? TR_GEMM_MEDIUM : TR_GEMM_LARGE;
    return TR_NOPS + variant * TR_GEMM_SHAPES + shape;
}

int tr_cost_class(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out, double *work)
{
    double f = tr_ops[n->op].flops(n, in, out);
    *work = f > 0 ? f : tr_node_bytes(n, in, out);
    return n->op == TR_OP_MATMUL ? gemm_class(n, in, out) : (int)n->op;
}

/* The curve between its points, the first segment's line below them, the last point's rate above. */
double tr_cost_curve_seconds(const struct tr_cost_curve *c, double work)
{
    if (c->n <= 0)
        return -1;
    if (c->n == 1 || work >= c->work[c->n - 1]) {   /* at the largest point's rate beyond it */
        int i = c->n - 1;
        return c->work[i] > 0 ? c->seconds[i] * work / c->work[i] : c->seconds[i];
    }
    int i = 1;
    while (i < c->n - 1 && work > c->work[i])
        i++;
    double w0 = c->work[i - 1], w1 = c->work[i], s0 = c->seconds[i - 1], s1 = c->seconds[i];
    double t = w1 > w0 ? s0 + (s1 - s0) * (work - w0) / (w1 - w0) : s0;
    /* below the first point the line may fall under zero: no kernel is free */
    double floor_s = 0.25 * s0 * (w0 > 0 ? fmin(1, work / w0) : 1);
    return t > floor_s ? t : floor_s;
}

/* A profile's node: FLOPs at the GEMM rate, bytes at the bandwidth, fixed costs. */
static double profile_seconds(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out,
                              const struct tr_device *dev, double f, double *b)
{
    int prec = tr_cost_precision(in, n->nin);
    if (f > 0 && prec != TR_PREC_FP32 && dev->widen_16bit > 0)   /* read 2 bytes, write and read 4 */
        for (int i = 0; i < n->nin; i++)
            if (tr_dtype_is_16bit(in[i].dtype))
                *b += dev->widen_16bit * 10.0 * (double)tr_tensor_numel(&in[i]);
    double rate = dev->gemm_flops[prec] > 0 ? dev->gemm_flops[prec] : dev->gemm_flops[TR_PREC_FP32];
    return f / rate + (f > 0 ? dev->gemm_seconds : 0) + *b / dev->bandwidth + dev->node_seconds +
           tr_ops[n->op].specials(n, in, out) * dev->special_seconds;
}

/* The widening of a node's 16-bit tensors to f32 copies and back: read 2 bytes, write and read 4,
 * write 2, at the bandwidth. */
static double widening_seconds(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out,
                               const struct tr_device *dev)
{
    double elements = 0;
    for (int i = 0; i < n->nin; i++)
        elements += tr_dtype_is_16bit(in[i].dtype) ? (double)tr_tensor_numel(&in[i]) : 0;
    for (int i = 0; i < n->nout; i++)
        elements += tr_dtype_is_16bit(out[i].dtype) ? (double)tr_tensor_numel(&out[i]) : 0;
    return dev->bandwidth > 0 ? 12.0 * elements / dev->bandwidth : 0;
}

/* A calibrated node: its class's curve at its precision (fp16: bf16's, or fp32's plus the widening
 * where bf16 runs natively and fp16 does not), else at fp32 (widening aside, a 16-bit node runs the
 * f32 kernel), else the profile's formula. */
static double measured_seconds(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out,
                               const struct tr_device *dev, double f, double *b)
{
    double work, widening = 0;
    int cls = tr_cost_class(n, in, out, &work), prec = tr_cost_precision(in, n->nin);
    if (prec == TR_PREC_FP16 && dev->fp16_widened)
        prec = TR_PREC_FP32, widening = widening_seconds(n, in, out, dev);
    double t = tr_cost_curve_seconds(&dev->kernels.curve[cls][prec], work);
    if (t < 0 && prec == TR_PREC_FP16)   /* calibrate measures 16-bit nodes in bf16 (device_kernels.c) */
        t = tr_cost_curve_seconds(&dev->kernels.curve[cls][TR_PREC_BF16], work);
    if (t < 0)
        t = tr_cost_curve_seconds(&dev->kernels.curve[cls][TR_PREC_FP32], work);
    if (t < 0 && n->op == TR_OP_MATMUL)   /* another shape class of the same variant */
        for (int c = TR_NOPS; c < TR_COST_CLASSES && t < 0; c++)
            t = tr_cost_curve_seconds(&dev->kernels.curve[c][TR_PREC_FP32], work);
    if (t < 0)
        t = profile_seconds(n, in, out, dev, f, b);
    return t + widening + dev->kernels.exec_node_seconds;
}

double tr_plan_step_seconds(const struct tr_graph *g, int64_t B, int64_t S, const struct tr_device *dev,
                            double *flops, double *bytes)
{
    return tr_plan_nodes_seconds(g, NULL, g->nnodes, B, S, dev, flops, bytes);
}

double tr_plan_collective_bytes(const struct tr_graph *g, int64_t B, int64_t S, int *count, double *moved)
{
    struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
    double bytes = 0;
    *count = 0, *moved = 0;
    for (int i = 0; i < g->nnodes; i++) {
        enum tr_op op = g->nodes[i].op;
        if (tr_ops[op].runs_on != TR_OP_RUNS_ON_COLLECTIVE || op == TR_OP_SEQ_SLICE)
            continue;
        ++*count;
        tr_bind_shapes(g, &g->nodes[i], B, S, in, out);
        const struct tr_tensor *whole = op == TR_OP_SEQ_SCATTER ? &in[0] : &out[0];
        double n = (double)tr_tensor_numel(whole) * (double)tr_dtype_size(whole->dtype);
        bytes += n, *moved += op == TR_OP_ALLREDUCE ? 2 * n : n;
    }
    return bytes;
}

double tr_plan_nodes_seconds(const struct tr_graph *g, const int *nodes, int count, int64_t B, int64_t S,
                             const struct tr_device *dev, double *flops, double *bytes)
{
    struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
    double seconds = 0, f_sum = 0, b_sum = 0, by_op[TR_NOPS] = {0};
    for (int i = 0; i < count; i++) {   /* the schedule is creation order (program.c) */
        int node = nodes ? nodes[i] : i;
        const struct tr_node *n = &g->nodes[node];
        if (tr_op_is_view(n->op) || tr_ops[n->op].runs_on == TR_OP_RUNS_ON_COLLECTIVE ||
            tr_ops[n->op].runs_on == TR_OP_RUNS_ON_COPY)   /* no kernel; the bus's or the host link's (plan.c) */
            continue;
        tr_bind_shapes(g, n, B, S, in, out);
        double f = tr_ops[n->op].flops(n, in, out), b = tr_node_bytes(n, in, out);
        double t = dev->kernels.measured ? measured_seconds(n, in, out, dev, f, &b)
                                         : profile_seconds(n, in, out, dev, f, &b);
        seconds += t, by_op[n->op] += t;
        f_sum += f, b_sum += b;
    }
    /* TR_FORECAST_OPS=1: the forecast per op on stderr, to set beside TR_PROFILE=1's measurement */
    const char *per_op = getenv("TR_FORECAST_OPS");
    for (int op = 0; per_op && *per_op == '1' && op < TR_NOPS; op++)
        if (by_op[op] > 0)
            fprintf(stderr, "  forecast %-22s %9.2f ms per micro-step (B %lld, S %lld)\n", tr_op_name(op), by_op[op] * 1e3,
                    (long long)B, (long long)S);
    if (flops)
        *flops = f_sum;
    if (bytes)
        *bytes = b_sum;
    return seconds;
}

double tr_plan_optimizer_seconds(const struct tr_device *dev, int nstate, double param_bytes, double grad_bytes,
                                 double state_bytes)
{
    const struct tr_kernel_costs *k = &dev->kernels;
    if (!k->measured)   /* the update reads and writes each parameter and its state, and reads and zeroes its gradient */
        return (4 * param_bytes + 2 * state_bytes) / dev->bandwidth;
    /* the gradients zeroed, their norm taken (every step: clipping and the divergence check), the update */
    return grad_bytes * (k->fill_byte_seconds + k->sumsq_byte_seconds) +
           param_bytes * k->optimizer_byte_seconds[nstate >= 2];
}

void tr_plan_balance(const struct tr_graph *g, int stages, int64_t B, int64_t S, const struct tr_device *dev,
                     int *first_block)
{
    int blocks = tr_graph_blocks(g);
    double *weight = tr_xcalloc((size_t)blocks + 1, sizeof *weight), outside = 0, after = 0;
    for (int i = 0; i < g->nnodes; i++) {
        double t = tr_plan_nodes_seconds(g, &i, 1, B, S, dev, NULL, NULL);
        if (g->nodes[i].block >= 0)
            weight[g->nodes[i].block] += t;
        else
            outside += t;
    }
    struct tr_stages two;   /* the head's: a second stage of no blocks */
    int cut[3] = {0, blocks, blocks};
    if (!tr_stages_split(&two, g, NULL, g->nnodes, 2, cut)) {
        after = tr_plan_nodes_seconds(g, two.stage[1].schedule, two.stage[1].n, B, S, dev, NULL, NULL);
        tr_stages_free(&two);
    }
    tr_stages_balance(weight, blocks, outside - after, after, stages, first_block);
    free(weight);
}

void tr_plan_balance_memory(const struct tr_graph *g, int stages, int nstate, int *first_block)
{
    int blocks = tr_graph_blocks(g);
    double *weight = tr_xcalloc((size_t)blocks + 1, sizeof *weight), outside = 0, after = 0;
    struct tr_stages two;   /* the head's: a second stage of no blocks */
    int cut[3] = {0, blocks, blocks};
    bool split = !tr_stages_split(&two, g, NULL, g->nnodes, 2, cut);
    for (int v = 0; v < g->nvalues; v++) {   /* each weight with its first reader's block */
        if (g->values[v].kind != TR_PARAM)
            continue;
        int block = -2;
        for (int i = 0; i < g->nnodes && block == -2; i++)
            for (int j = 0; j < g->nodes[i].nin; j++)
                if (g->nodes[i].in[j] == v)
                    block = g->nodes[i].block;
        double bytes = (double)tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1) * 4 * (2 + nstate);
        if (block >= 0)
            weight[block] += bytes;
        else if (split && tr_stages_holds(&two, g, 1, v) && !tr_stages_holds(&two, g, 0, v))
            after += bytes;
        else
            outside += bytes;
    }
    if (split)
        tr_stages_free(&two);
    tr_stages_balance(weight, blocks, outside, after, stages, first_block);
    free(weight);
}
