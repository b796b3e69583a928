/* The planner's time model (plan.h): a micro-step is the sum over its nodes of the FLOPs at
 * the device's GEMM rate for the precision the node reads, the bytes it reads and writes at
 * the device's bandwidth, and a fixed cost per kernel; each op's FLOPs and special-function
 * evaluations are its rules in the op table (ops.c). Recomputation is in the schedule, so it
 * is counted; so is padding, since the plan is for the padded (B, S). */
#include "plan/plan.h"

#include "core/tensor.h"
#include "graph/ops.h"

static int64_t numel(const struct tr_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->dim[d];
    return n;
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
        if (tr_op_is_view(n->op))   /* no kernel */
            continue;
        tr_bind_shapes(g, n, B, S, in, out);
        double f = tr_ops[n->op].flops(n, in, out), b = 0;
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
                   tr_ops[n->op].specials(n, in, out) * dev->special_seconds;
        f_sum += f, b_sum += b;
    }
    if (flops)
        *flops = f_sum;
    if (bytes)
        *bytes = b_sum;
    return seconds;
}
