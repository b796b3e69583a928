/* The planner's time model (plan.h): a micro-step is the sum over its nodes of the FLOPs at
 * the device's GEMM rate for the precision the node reads, the bytes it reads and writes at
 * the device's bandwidth, and a fixed cost per kernel. Recomputation is in the schedule, so it
 * is counted; so is padding, since the plan is for the padded (B, S). */
#include "plan/plan.h"

#include "core/tensor.h"

static int64_t numel(const struct tr_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->dim[d];
    return n;
}

/* FLOPs of the GEMM-like ops (2 per multiply-add); the others' arithmetic hides behind their
 * bytes. */
static double node_flops(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    switch (n->op) {
    case TR_OP_MATMUL: {   /* out [.., M, N], inner K from a [.., M, K] or [.., K, M] */
        int r = in[0].rank;
        return 2.0 * (double)numel(&out[0]) * (double)in[0].dim[n->attrs.matmul.trans_a ? r - 2 : r - 1];
    }
    case TR_OP_LINEAR_CROSS_ENTROPY:   /* x [N, D] · w [C, D]ᵀ */
        return 2.0 * (double)in[0].dim[0] * (double)in[0].dim[1] * (double)in[1].dim[0];
    case TR_OP_LINEAR_CROSS_ENTROPY_BWD:   /* the logits again, then dx and dw */
        return 6.0 * (double)numel(&out[0]) * (double)(out[1].rank ? out[1].dim[0] : 1);
    case TR_OP_ATTENTION: {   /* q·kᵀ and p·v over [B, H, S, D] */
        int64_t S = in[0].dim[2];
        return 4.0 * (double)numel(&in[0]) * (double)S;
    }
    case TR_OP_ATTENTION_BWD: {   /* p again, then dv, dp, dq, dk: dy, q, k, … */
        int64_t S = in[2].dim[2];
        return 10.0 * (double)numel(&in[1]) * (double)S;
    }
    case TR_OP_CONV2D:   /* out [N, O, H', W'] from w [O, C, kh, kw] */
        return 2.0 * (double)numel(&out[0]) * (double)(in[1].dim[1] * in[1].dim[2] * in[1].dim[3]);
    case TR_OP_CONV2D_BWD_DATA:   /* as the forward, dx [N, C, H, W] from dy and w */
    case TR_OP_CONV2D_BWD_FILTER: {
        const struct tr_tensor *w = n->op == TR_OP_CONV2D_BWD_DATA ? &in[1] : &out[0];
        const struct tr_tensor *dy = &in[0];
        return 2.0 * (double)numel(dy) * (double)(w->dim[1] * w->dim[2] * w->dim[3]);
    }
    default:
        return 0;
    }
}

/* Evaluations of exp, erf or a hash: what such ops cost beyond their bytes on a CPU. */
static double node_specials(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out)
{
    switch (n->op) {
    case TR_OP_GELU: case TR_OP_GELU_BWD: case TR_OP_TANH: case TR_OP_TANH_BWD: case TR_OP_DROPOUT:
    case TR_OP_SOFTMAX: case TR_OP_LOG_SOFTMAX:
        return (double)numel(&out[0]);
    case TR_OP_CROSS_ENTROPY:
        return (double)numel(&in[0]);
    case TR_OP_LINEAR_CROSS_ENTROPY:   /* every logit's exp: x [N, D], w [C, D] */
        return (double)in[0].dim[0] * (double)in[1].dim[0];
    case TR_OP_LINEAR_CROSS_ENTROPY_BWD:   /* the logits again: dy, x, w, … */
        return (double)in[1].dim[0] * (double)in[2].dim[0];
    case TR_OP_ATTENTION:   /* the probabilities, S per query: q, k [B, H, S, D] */
        return (double)numel(&in[0]) / (double)in[0].dim[3] * (double)in[1].dim[2];
    case TR_OP_ATTENTION_BWD:   /* the probabilities again: dy, q, k, … */
        return (double)numel(&in[1]) / (double)in[1].dim[3] * (double)in[2].dim[2];
    default:
        return 0;
    }
}

/* Which rate a node computes at: the precision of its first operand. */
static int node_precision(const struct tr_tensor *in, int nin)
{
    if (nin < 1)
        return TR_PREC_FP32;
    return in[0].dtype == TR_BF16 ? TR_PREC_BF16 : in[0].dtype == TR_F16 ? TR_PREC_FP16 : TR_PREC_FP32;
}

double tr_plan_step_seconds(const struct tr_graph *g, int64_t B, int64_t S, const struct tr_device *dev,
                            double *flops, double *bytes)
{
    struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
    double seconds = 0, f_sum = 0, b_sum = 0;
    for (int node = 0; node < g->nnodes; node++) {   /* the schedule is creation order (program.c) */
        const struct tr_node *n = &g->nodes[node];
        if (n->op == TR_OP_RESHAPE)   /* a view: no kernel */
            continue;
        tr_bind_shapes(g, n, B, S, in, out);
        double f = node_flops(n, in, out), b = 0;
        for (int i = 0; i < n->nin; i++)
            b += (double)numel(&in[i]) * (double)tr_dtype_size(in[i].dtype);
        for (int i = 0; i < n->nout; i++)
            b += (double)numel(&out[i]) * (double)tr_dtype_size(out[i].dtype) * (n->accumulate ? 2 : 1);
        int prec = node_precision(in, n->nin);
        if (f > 0 && prec != TR_PREC_FP32 && dev->widen_16bit > 0)   /* read 2 bytes, write and read 4 */
            for (int i = 0; i < n->nin; i++)
                if (tr_dtype_is_16bit(in[i].dtype))
                    b += dev->widen_16bit * 10.0 * (double)numel(&in[i]);
        double rate = dev->gemm_flops[prec] > 0 ? dev->gemm_flops[prec] : dev->gemm_flops[TR_PREC_FP32];
        seconds += f / rate + (f > 0 ? dev->gemm_seconds : 0) + b / dev->bandwidth + dev->node_seconds +
                   node_specials(n, in, out) * dev->special_seconds;
        f_sum += f, b_sum += b;
    }
    if (flops)
        *flops = f_sum;
    if (bytes)
        *bytes = b_sum;
    return seconds;
}
