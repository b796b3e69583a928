/* The op table (ops.c): every fact of every op of graph.h's enum tr_op in one row, read by
 * the passes and the planner instead of a switch each — the name, how many values it reads
 * and writes, how amp treats it, whether its output may take a dying input's slot, whether
 * selective checkpointing recomputes it, its gradient rule, its FLOPs for the time model, and
 * what runs it. A new op is a new enumerator and a new row; tests/check_ops.c fails while a
 * fact of a row is missing (every enum below keeps 0 for "not said"). */
#ifndef TR_GRAPH_OPS_H
#define TR_GRAPH_OPS_H

#include "graph/graph.h"

/* How the amp pass (amp.c) sets out[0]'s precision. */
enum tr_amp_policy {
    TR_AMP_UNSET,
    TR_AMP_FOLLOW,       /* the precision of its first input: 16-bit when that one is */
    TR_AMP_FOLLOW_ALL,   /* 16-bit when any input is (add, mul, concat: no weights among them) */
    TR_AMP_LOW,          /* float inputs cast to 16 bits, out[0] 16-bit: GEMMs */
    TR_AMP_WIDE,         /* out[0] f32; 16-bit inputs are read as they are: losses, reductions */
    TR_AMP_START,        /* out[0] 16-bit, f32 inputs read as they are: an embedding lookup */
    TR_AMP_KEEP,         /* as built: a CAST's output is what it was asked for */
};

/* What selective checkpointing (remat.c) does with the op's outputs. */
enum tr_remat_class {
    TR_REMAT_UNSET,
    TR_REMAT_CHEAP,      /* cheap to run twice whatever its size: recomputed, not kept */
    TR_REMAT_KEEP,       /* a GEMM, a convolution, attention, or state that moves: kept */
};

/* Where an op gets its gradient. */
enum tr_grad_kind {
    TR_GRAD_UNSET,
    TR_GRAD_RULE,        /* its rule (tr_grad_rule_of, autodiff.c) appends its backward */
    TR_GRAD_BACKWARD_OP, /* none: a backward op itself, never differentiated again */
    TR_GRAD_NONE,        /* not differentiable: its outputs carry no gradient (argmax) */
};

/* What runs it. A collective (tensor parallelism's all-reduce) runs on no single device's
 * kernel table, so a backend's table leaves it NULL and the executor hands it to its
 * communicator (exec.h: collective); check_ops asks a kernel only of DEVICE ops. */
enum tr_op_runs_on {
    TR_OP_RUNS_ON_UNSET,
    TR_OP_RUNS_ON_NOTHING,    /* a view (reshape): no kernel, the executor skips it */
    TR_OP_RUNS_ON_DEVICE,     /* a kernel of the backend's table (backend.h: kernels[op]) */
    TR_OP_RUNS_ON_COLLECTIVE, /* communication between devices, no kernel of one device */
    TR_OP_RUNS_ON_COPY,       /* a copy between the device's memory and the host's (activation
                               * offload): the executor queues it on the backend's copy entries */
};

struct tr_autodiff;   /* autodiff.c's state while it appends a backward */

/* Appends the backward of forward node n, whose first output's gradient is gy. */
typedef void tr_grad_rule(struct tr_autodiff *ad, const struct tr_node *n, int gy);
/* A count for the time model of node n bound to in[nin] and out[nout] (memplan.h:
 * tr_bind_shapes): FLOPs (2 per multiply-add), or evaluations of exp, erf or a hash. */
typedef double tr_cost_rule(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out);

#define TR_OP_VARIADIC TR_MAX_IN   /* nin_max of an op that reads any number (concat) */

struct tr_op_info {
    const char *name;           /* as logs, plans and TensorBoard graphs show it */
    int8_t nin_min, nin_max;    /* the values it reads (an optional one: min < max) */
    int8_t nout;                /* the values it writes */
    enum tr_amp_policy amp;
    bool in_place;              /* out[i] depends only on in[i]: out[0] may take the slot of
                                 * an input dying here (memplan.c); its CPU kernel allows it */
    enum tr_remat_class remat;
    enum tr_grad_kind grad_kind;
    tr_cost_rule *flops;        /* the GEMM-rate work; tr_cost_none where its bytes dominate */
    tr_cost_rule *specials;     /* exp, erf or hash evaluations beyond its bytes */
    enum tr_op_runs_on runs_on;
};

/* TR_NOPS rows; declared without a size so that ops.c's definition takes the length of its
 * initializer, which its static assertion then checks. */
extern const struct tr_op_info tr_ops[];

/* The cost rule of ops whose cost is all in their bytes. */
double tr_cost_none(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out);
/* The bytes a node reads and writes at its bound shapes (an accumulated output read too). */
double tr_node_bytes(const struct tr_node *n, const struct tr_tensor *in, const struct tr_tensor *out);

/* The gradient rules (autodiff.c), one per differentiable op or family, and the rule of an op:
 * its TR_GRAD_RULE row's, NULL for any other. */
tr_grad_rule *tr_grad_rule_of(enum tr_op op);
tr_grad_rule tr_grad_matmul, tr_grad_bias_add, tr_grad_add, tr_grad_mul, tr_grad_same_op, tr_grad_relu,
    tr_grad_tanh, tr_grad_gelu, tr_grad_softmax, tr_grad_log_softmax, tr_grad_cross_entropy,
    tr_grad_linear_cross_entropy, tr_grad_layernorm, tr_grad_embedding, tr_grad_attention, tr_grad_conv2d,
    tr_grad_batchnorm, tr_grad_maxpool, tr_grad_avgpool, tr_grad_global_avgpool, tr_grad_reshape,
    tr_grad_permute, tr_grad_slice, tr_grad_concat, tr_grad_gather, tr_grad_masked_fill, tr_grad_cast,
    tr_grad_sum, tr_grad_allreduce, tr_grad_tensor_in, tr_grad_seq;

static inline bool tr_op_is_view(enum tr_op op)
{
    return tr_ops[op].runs_on == TR_OP_RUNS_ON_NOTHING;
}

#endif
