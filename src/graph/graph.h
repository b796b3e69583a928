/* The static graph (DESIGN.md §3): values with symbolic sizes and nodes named by op, built
 * once per plan by the model builders through small functions named by op
 * (`y = tr_matmul(g, x, w, 0, 1)`). Passes (amp, autodiff, remat) rewrite or append nodes; the
 * schedule and the memory plan turn the graph into something an executor can run. */
#ifndef TR_GRAPH_H
#define TR_GRAPH_H

#include "core/tensor.h"

enum tr_value_kind {
    TR_PARAM,    /* trained weights: persistent, the parameters region */
    TR_GRAD,     /* a parameter's gradient: persistent, accumulates (+=) across micro-batches */
    TR_STATE,    /* persistent non-trained state: batch-norm running statistics */
    TR_INPUT,    /* data fed per micro-batch: the data buffers region */
    TR_ACT,      /* everything else: lives in the arena while live */
    TR_HOST,     /* an activation's copy in the host's memory, between its forward and its
                  * backward (the offload pass): the host ring, outside the device's regions */
};

enum tr_op {
    /* forward */
    TR_OP_MATMUL,         /* y = op(a)·op(b) (+ y when accumulate); batched over leading dims */
    TR_OP_BIAS_ADD,       /* y = x + bias, bias broadcast over rows (last dim) */
    TR_OP_ADD,            /* y = a + b, same shape */
    TR_OP_MUL,            /* y = a ⊙ b, same shape */
    TR_OP_SCALE,          /* y = alpha·x */
    TR_OP_RELU,
    TR_OP_GELU,           /* exact (erf) or tanh approximation */
    TR_OP_TANH,
    TR_OP_SOFTMAX,        /* over the last dim */
    TR_OP_LOG_SOFTMAX,    /* over the last dim */
    TR_OP_CROSS_ENTROPY,  /* logits [N, C], targets i32 [N] → mean loss [1] over targets ≠ ignore */
    TR_OP_LINEAR_CROSS_ENTROPY, /* x [N, D], w [C, D], targets → cross-entropy of x·wᵀ, never
                                 * holding all the logits; also lse [N], rank i32 [N] */
    TR_OP_LAYERNORM,      /* over the last dim; outputs y and stats [rows, 2] (mean, rstd) */
    TR_OP_EMBEDDING,      /* table [V, D], ids i32 [...] → [..., D] */
    TR_OP_DROPOUT,        /* counter-based mask: a pure function of (seed, step, sample, position, feature, stream) */
    TR_OP_ATTENTION,      /* q, k, v [B, H, S, D] (+ key padding mask u8 [B, S]) → out, lse [B, H, S] */
    TR_OP_CONV2D,         /* x [N, C, H, W], w [O, C, kh, kw] → [N, O, H', W'] (channels last:
                           * x [N, H, W, C] → [N, H', W', O], the same w) */
    TR_OP_BATCHNORM,      /* x [N, C, H, W] (or [N, H, W, C]), gamma, beta, running mean/var → y, saved [2, C] */
    TR_OP_MAXPOOL,        /* → y and argmax indices (i32) */
    TR_OP_AVGPOOL,
    TR_OP_GLOBAL_AVGPOOL, /* [N, C, H, W] (or [N, H, W, C]) → [N, C] */
    TR_OP_RESHAPE,        /* same elements, new shape: a view, no copy */
    TR_OP_PERMUTE,        /* transpose of any axes, copied */
    TR_OP_SLICE,          /* a range along one axis */
    TR_OP_CONCAT,         /* along one axis */
    TR_OP_GATHER,         /* rows of x [N, D] at ids [M] → [M, D] */
    TR_OP_MASKED_FILL,    /* y = mask ? value : x, mask u8 broadcast over trailing dims */
    TR_OP_CAST,
    TR_OP_SUM,            /* over one axis, or all (axis = -1) */
    TR_OP_MEAN,
    TR_OP_ARGMAX,         /* over the last dim → i32 */
    /* tensor parallelism (Megatron-LM's f and g): a collective over the tensor ranks */
    TR_OP_ALLREDUCE,      /* y = Σ over the tensor ranks of x (g); its gradient passes unchanged */
    TR_OP_TENSOR_IN,      /* y = x, a view (f); its gradient is summed over the tensor ranks */
    /* sequence parallelism: [B, S/T, …] on each tensor rank ↔ [B, S, …] whole, along axis 1 */
    TR_OP_SEQ_GATHER,     /* y = the ranks' parts one after the other (all-gather); its gradient
                           * reduce-scattered (partial: each rank's is a part of the sum) or this
                           * rank's part taken (the same on every rank) */
    TR_OP_SEQ_SCATTER,    /* y = this rank's part of Σ over the ranks of x (reduce-scatter); its
                           * gradient gathered */
    TR_OP_SEQ_SLICE,      /* y = this rank's part of x (the same on every rank); its gradient gathered */
    /* activation offload (the offload pass): copies between the arena and the host ring */
    TR_OP_OFFLOAD,        /* h (TR_HOST) = x: sent to the host on the copy queue, beside the kernels */
    TR_OP_OFFLOAD_WAIT,   /* reads x, writes nothing: x's copy has left before its slot is reused */
    TR_OP_RELOAD,         /* y = h: back from the host on the copy queue, landed before y's first reader */
    /* backward */
    TR_OP_BIAS_GRAD,      /* dbias = Σ_rows dy */
    TR_OP_RELU_BWD,       /* dx = dy · [y > 0] */
    TR_OP_GELU_BWD,       /* dx = dy · gelu'(x) */
    TR_OP_TANH_BWD,       /* dx = dy · (1 − y²) */
    TR_OP_SOFTMAX_BWD,    /* dx = y ⊙ (dy − Σ dy⊙y) */
    TR_OP_LOG_SOFTMAX_BWD,/* dx = dy − exp(y)·Σ dy */
    TR_OP_CROSS_ENTROPY_BWD,
    TR_OP_LINEAR_CROSS_ENTROPY_BWD, /* → dx, dw (the logits computed again, a chunk at a time) */
    TR_OP_LAYERNORM_BWD,  /* → dx, dgamma, dbeta */
    TR_OP_EMBEDDING_BWD,  /* scatter-add of dy rows into dtable */
    TR_OP_ATTENTION_BWD,  /* → dq, dk, dv */
    TR_OP_CONV2D_BWD_DATA,
    TR_OP_CONV2D_BWD_FILTER,
    TR_OP_BATCHNORM_BWD,  /* → dx, dgamma, dbeta */
    TR_OP_MAXPOOL_BWD,
    TR_OP_AVGPOOL_BWD,
    TR_OP_GLOBAL_AVGPOOL_BWD,
    TR_OP_SLICE_BWD,      /* dy placed into zeros of x's shape */
    TR_OP_GATHER_BWD,     /* scatter-add */
    TR_OP_SUM_BWD,        /* broadcast dy back over the reduced axis (÷ its size when attrs.axis.mean) */
    TR_OP_ACCUMULATE,     /* y += x: gradient contributions, parameter gradients */
    TR_NOPS
};

enum tr_phase { TR_FORWARD, TR_BACKWARD, TR_RECOMPUTE, TR_OPTIMIZER };

#define TR_MAX_IN 8
#define TR_MAX_OUT 4

union tr_attrs {
    struct { uint8_t trans_a, trans_b; } matmul;
    struct { float alpha; } scale;
    struct { uint8_t tanh_approx; } gelu;
    struct { float eps; } norm;                         /* layer norm, batch norm */
    struct { float p; uint32_t stream; uint16_t seq_rank, seq_parts; } dropout;
                        /* seq_parts > 1: x is this tensor rank's part of the sequence (axis 1),
                         * its positions offset by seq_rank parts: the one device's mask */
    struct { uint8_t causal, padding_mask; float scale; } attention;   /* scale 0: 1/√D */
    struct { int32_t ignore_index, chunk; uint8_t add_dw; } cross_entropy;
                        /* chunk: rows of logits held at once (0: the backend's choice);
                         * add_dw: LINEAR_CROSS_ENTROPY_BWD adds into dw (a parameter's
                         * gradient) whatever node->accumulate says of dx */
    struct { int stride, pad; uint8_t channels_last; } conv;   /* channels_last: enum tr_layout */
    struct { int kernel, stride, pad; uint8_t channels_last; } pool;
    struct { float eps, momentum; uint8_t training, channels_last; } batchnorm;
    struct { int axis; int64_t start; } slice;          /* the length is the output's dim */
    struct { int perm[TR_MAX_RANK]; } permute;
    struct { int axis; uint8_t mean; } axis;            /* concat, sum, mean; sum_bwd (mean: ÷ n) */
    struct { float value; } fill;
    struct { int64_t count; } gather;                   /* rows of the table (gather_bwd) */
    struct { uint8_t partial; } seq;                    /* seq_gather: its gradient reduce-scattered */
};

/* How the trainer fills a parameter or state value before the first step. */
enum tr_init {
    TR_INIT_ZERO,
    TR_INIT_ONE,
    TR_INIT_UNIFORM,   /* U(−scale, scale): PyTorch's Linear/Conv default is scale = 1/√fan_in */
    TR_INIT_NORMAL,    /* N(0, scale²) */
};

struct tr_value {
    enum tr_dtype dtype;
    struct tr_shape shape;
    enum tr_value_kind kind;
    uint8_t init;       /* params and state: enum tr_init */
    uint8_t no_decay;   /* params: excluded from weight decay (biases, norms, embeddings) */
    float init_scale;
    int producer;       /* the node that writes it; -1 for params, grads, state, inputs */
    int grad;           /* params: their TR_GRAD value; else -1 */
    int view_of;        /* reshape: the value whose storage it shares; else -1 */
    int gathers;        /* the gather pass's copies: the parameter they hold whole, by its place
                         * among the graph's parameters (the optimizer's order); else -1 */
    char name[96];      /* params and inputs: "bert.encoder.layer.11.attention.output.LayerNorm.weight" */
    /* Tensor parallelism: a parameter held a slice per tensor rank (tr_param_split) — along
     * split_axis (−1: whole on every rank), the whole axis being split_parts blocks (GPT's fused
     * QKV: 3), of which each rank holds its 1/T of each, in rank order. init_key: its number in
     * the graph built on one device, which initialisation is keyed by (tensor_values). */
    int8_t split_axis;
    uint8_t split_parts;
    int init_key;
};

struct tr_node {
    enum tr_op op;
    int in[TR_MAX_IN], nin;
    int out[TR_MAX_OUT], nout;
    union tr_attrs attrs;
    int block;          /* the model block it belongs to (-1: none): checkpointing's unit */
    uint8_t phase;      /* enum tr_phase */
    uint8_t accumulate; /* outputs are added into (+=), not overwritten */
    int origin;         /* backward nodes: the forward node whose gradient they compute (autodiff);
                         * -1 for forward nodes. The pipeline's split (stages.h) puts each on its
                         * forward's stage */
};

/* How 4-D images lie in memory: [N, C, H, W], or channels last [N, H, W, C] (each pixel's
 * channels together: oneDNN's CPU convolutions take it as it is, with no reorder either side). */
enum tr_layout { TR_NCHW, TR_NHWC };

/* The axes of a 4-D image's channels, height and width in a layout. */
struct tr_image_axes { int c, h, w; };
static inline struct tr_image_axes tr_image_axes(int layout)
{
    return layout == TR_NHWC ? (struct tr_image_axes){3, 1, 2} : (struct tr_image_axes){1, 2, 3};
}

struct tr_graph {
    struct tr_value *values;
    struct tr_node *nodes;
    int nvalues, nnodes, cap_values, cap_nodes;
    int block;          /* current block for new nodes (tr_graph_block) */
    uint8_t layout;     /* enum tr_layout of the images new nodes take (tr_graph_layout) */
    int error;          /* first builder error (0: none): shapes that do not fit, and so on */
    char message[256];
    int loss;           /* the scalar loss value, once set; -1 before */
    bool gather_ahead;  /* the gather pass's copies travel a block ahead (tr_gather_params) */
    int tensor;         /* tensor parallelism: the model built for T ranks (1: whole) … */
    int tensor_rank;    /* … as this one's slice of it */
    bool sequence;      /* sequence parallelism beside it: the blocks' residual stream, norms and
                         * dropouts a part of the sequence a tensor rank (tr_seq_gather, …) */
    int tensor_values;  /* values the split added (tr_allreduce, tr_tensor_in): a value's init_key
                         * is its index less those before it */
};

void tr_graph_init(struct tr_graph *g);
void tr_graph_free(struct tr_graph *g);
/* Nodes built after this belong to block b (-1: outside any block). */
void tr_graph_block(struct tr_graph *g, int b);
/* Convolutions, batch norms and pools built after this take and give images in this layout
 * (TR_NCHW until set); the nodes record it, and their gradients follow. */
void tr_graph_layout(struct tr_graph *g, enum tr_layout layout);

/* Leaves. */
int tr_param(struct tr_graph *g, const char *name, enum tr_dtype t, int rank, const struct tr_dim *dims);
int tr_input(struct tr_graph *g, const char *name, enum tr_dtype t, int rank, const struct tr_dim *dims);
int tr_state(struct tr_graph *g, const char *name, enum tr_dtype t, int rank, const struct tr_dim *dims);
/* Sets how a parameter (or state) is initialised and whether weight decay applies to it. */
void tr_param_init(struct tr_graph *g, int v, enum tr_init init, float scale, int no_decay);

/* Builders: each returns the output value (or -1 after an error, recorded in g). */
int tr_matmul(struct tr_graph *g, int a, int b, int trans_a, int trans_b);
int tr_linear(struct tr_graph *g, int x, int w, int bias);   /* x·wᵀ + bias, w [out, in] */
int tr_bias_add(struct tr_graph *g, int x, int bias);
int tr_add(struct tr_graph *g, int a, int b);
int tr_mul(struct tr_graph *g, int a, int b);
int tr_scale(struct tr_graph *g, int x, float alpha);
int tr_relu(struct tr_graph *g, int x);
int tr_gelu(struct tr_graph *g, int x, int tanh_approx);
int tr_tanh(struct tr_graph *g, int x);
int tr_softmax(struct tr_graph *g, int x);
int tr_log_softmax(struct tr_graph *g, int x);
int tr_cross_entropy(struct tr_graph *g, int logits, int targets, int ignore_index);
/* The mean cross-entropy of the logits x·wᵀ (x [N, D], w [C, D]: a classifier without bias)
 * against targets i32 [N], computed without ever holding all N × C logits; *lse gets each
 * row's log-sum-exp and *rank (i32 [N]) how many classes score above the target (−1 for an
 * ignored row): top-1 is rank 0, top-5 rank < 5. Either pointer may be NULL. */
int tr_linear_cross_entropy(struct tr_graph *g, int x, int w, int targets, int ignore_index, int *lse,
                            int *rank);
int tr_layernorm(struct tr_graph *g, int x, int gamma, int beta, float eps);
int tr_embedding(struct tr_graph *g, int table, int ids);
int tr_dropout(struct tr_graph *g, int x, float p, uint32_t stream);
int tr_attention(struct tr_graph *g, int q, int k, int v, int padding_mask, int causal);
int tr_conv2d(struct tr_graph *g, int x, int w, int stride, int pad);
int tr_batchnorm(struct tr_graph *g, int x, int gamma, int beta, int running_mean,
                 int running_var, float eps, float momentum, int training);
int tr_maxpool(struct tr_graph *g, int x, int kernel, int stride, int pad);
int tr_avgpool(struct tr_graph *g, int x, int kernel, int stride, int pad);
int tr_global_avgpool(struct tr_graph *g, int x);
int tr_reshape(struct tr_graph *g, int x, int rank, const struct tr_dim *dims);
int tr_permute(struct tr_graph *g, int x, const int *perm);
int tr_transpose(struct tr_graph *g, int x);   /* the last two axes */
int tr_slice(struct tr_graph *g, int x, int axis, int64_t start, int64_t len);
void tr_split(struct tr_graph *g, int x, int axis, int parts, int *out);
int tr_concat(struct tr_graph *g, const int *xs, int n, int axis);
int tr_gather(struct tr_graph *g, int x, int ids);
int tr_masked_fill(struct tr_graph *g, int x, int mask, float value);
int tr_cast(struct tr_graph *g, int x, enum tr_dtype to);
int tr_sum(struct tr_graph *g, int x, int axis);    /* axis −1: all elements → [1] */
int tr_mean(struct tr_graph *g, int x, int axis);
int tr_argmax(struct tr_graph *g, int x);

/* Tensor parallelism (Megatron-LM), for builders whose graph is a slice (g->tensor > 1):
 * tr_allreduce sums x over the tensor ranks (a row-split layer's partial outputs); tr_tensor_in
 * is x itself, whose gradient is summed over them (before a column-split layer). tr_param_split
 * says how parameter p is sliced (graph.h's split_axis, split_parts); tr_value_whole_shape gives
 * the shape one device holds; tr_value_slice copies between a whole tensor and this rank's
 * slice of it (elements of `size` bytes; to_slice: whole → slice, else slice → whole). */
int tr_allreduce(struct tr_graph *g, int x);
/* Sequence parallelism (Korthikanti et al., 2022), along axis 1 of x: tr_seq_gather puts the
 * tensor ranks' parts [B, S/T, …] together into [B, S, …] — its gradient each rank's part of the
 * sum over the ranks (partial: the column-split layers it feeds give each rank a part of the
 * gradient) or of the gradient itself (the layers it feeds are whole on every rank);
 * tr_seq_scatter sums a row-split layer's partial outputs and keeps this rank's part;
 * tr_seq_slice keeps this rank's part of a value every rank holds whole. A dropout over a part
 * draws the one device's mask (its positions offset). S must be a multiple of T. */
int tr_seq_gather(struct tr_graph *g, int x, bool partial);
int tr_seq_scatter(struct tr_graph *g, int x);
int tr_seq_slice(struct tr_graph *g, int x);
/* Whether axis 1 of v is a tensor rank's part of the sequence. */
bool tr_value_seq_part(const struct tr_graph *g, int v);
int tr_tensor_in(struct tr_graph *g, int x);
void tr_param_split(struct tr_graph *g, int p, int axis, int parts);
struct tr_shape tr_value_whole_shape(const struct tr_graph *g, int v);
void tr_value_slice(const struct tr_graph *g, int v, int rank, void *whole, void *slice, size_t size, bool to_slice);

/* Marks the loss; tr_autodiff differentiates it. */
void tr_graph_set_loss(struct tr_graph *g, int loss);

/* The amp pass (amp.c): rewrites a forward graph, before autodiff, for mixed precision with
 * activations in `low` (TR_BF16 or TR_F16) by amp.c's per-op table, casts put before the ops
 * that compute in 16 bits (of parameters too when working_copies); keep_f32 names values to
 * compute and keep in f32 (the logits). Returns 0, or g->error with g->message. */
int tr_amp(struct tr_graph *g, enum tr_dtype low, const int *keep_f32, int nkeep, bool working_copies);

/* Reverse-mode differentiation of the loss (graph.h's autodiff.c): appends the backward nodes
 * (phase TR_BACKWARD) and gives every parameter a TR_GRAD value that the backward adds into,
 * so gradients accumulate across micro-batches until the optimizer zeroes them. The gradient
 * of the loss itself is the input value it returns ("loss.scale", [1]): 1, or the fp16 loss
 * scale. Returns that value, or -1 with g->error set. */
int tr_autodiff(struct tr_graph *g);

/* The remat pass (remat.c): gradient checkpointing, after autodiff. mode[b] (enum
 * tr_remat_mode) says how block b < nblocks is checkpointed; later blocks are not. Full: the
 * block keeps only its inputs, and its forward is copied (phase TR_RECOMPUTE) just before its
 * backward; selective: only the cheap ops' outputs are made again (remat.c says which). The
 * gradients are the same bits as without it. Returns 0, or g->error with g->message. */
enum tr_remat_mode { TR_REMAT_NONE, TR_REMAT_SELECTIVE, TR_REMAT_FULL };
int tr_remat(struct tr_graph *g, const uint8_t *mode, int nblocks);
/* The gather pass (gather.c): ZeRO stage 3, after autodiff and remat. Each parameter a node
 * reads gets two activations that hold it whole, gathered from the ranks' shards just before
 * their first reader runs (memplan.h, exec.h): one for the forward, one for the backward and
 * its recomputation, so that each lives only while its phase reads it and a parameter takes
 * the arena for about its block's span twice a step. The parameters themselves are then read
 * by no node: each rank keeps only its shard of them. ahead: each copy is gathered when the
 * copies of the block before its reader's are, so that it can travel (on a thread of its own)
 * while that block runs — one block's copies more in the arena (memplan.h). */
void tr_gather_params(struct tr_graph *g, bool ahead);
/* The offload pass (offload.c): activation offload, after autodiff and remat. Each saved
 * activation — made by the forward, read by the backward (or its recomputation), neither kept
 * (keep) nor a parameter's size — with a whole run of nodes (one block's forward or backward, the
 * head's, the embeddings') between its last forward reader and the run before its first
 * backward reader's is sent to the host's memory and brought back: an OFFLOAD node after its
 * last forward reader copies it into a TR_HOST value (the copy travels beside the rest of that
 * run), an OFFLOAD_WAIT where the next run begins holds its slot until the copy has left, and a
 * RELOAD where the backward run before its reader's begins copies it into a new activation
 * (landing while that run computes), which the backward reads instead; its views are made again
 * over the copy. So the memory plan frees its slot between the two; the arena's packing changes
 * with it and may come out larger for a model of few blocks (the planner compares both).
 * Which of them go is the grain's. Returns the values offloaded (0: none has a run between),
 * or -1 with g->error set. */
struct tr_offload_grain {
    int blocks;     /* > 0: only the activations the forward makes before block `blocks` begins (the
                     * embeddings' and the first blocks': theirs wait longest for their backward);
                     * ≤ 0, or the model's blocks or more: every block's */
    int largest;    /* 1 … 99: of those, only the largest, by their bytes at one row of `len`
                     * tokens, until they make `largest` percent of all their bytes (ties: the
                     * earlier made first); 0 or 100: all of them */
    int64_t len;    /* the sequence the sizes are compared at: the longest (1 for no sequence) */
};
int tr_offload(struct tr_graph *g, const int *keep, int nkeep, struct tr_offload_grain grain);
/* After a pass rebuilt the nodes: views point at their storage, producers at the node numbers. */
void tr_graph_relink(struct tr_graph *g);
/* The number of blocks the builder marked (one more than the highest block number). */
int tr_graph_blocks(const struct tr_graph *g);

/* The low-level append every builder and pass uses. Returns the node index. */
int tr_node_add(struct tr_graph *g, enum tr_op op, const int *in, int nin, const int *out, int nout,
                const union tr_attrs *attrs);
int tr_value_add(struct tr_graph *g, enum tr_value_kind kind, enum tr_dtype t, const struct tr_shape *s,
                 const char *name);

const char *tr_op_name(enum tr_op op);

#endif
