/* The backend interface (DESIGN.md §3): a kernel per op plus the few memory operations the
 * executor needs. The CPU backend (src/backend/cpu) is the reference; the CUDA backend
 * implements the same table. Kernels never allocate: scratch comes from the workspace the
 * memory plan sized (tr_backend_ops.workspace_bytes).
 *
 * A backend is an instance (struct tr_backend), one per device, opened with tr_backend_open and
 * closed with tr_backend_close: every entry takes it first (kernels find it in args->be), and
 * whatever the backend keeps — CUDA's streams, events, library handles and algorithm caches, the
 * fenced CPU's registry of mappings — lives in its state, never in a global, so one process can
 * hold one instance per device. Failures are a code and a sentence in a struct tr_diag
 * (core/error.h); nothing is allocated unless something fails.
 *
 * Conventions every kernel follows — the graph builders and autodiff rely on them:
 *  - tensors are contiguous, row-major; a kernel reads in[], writes out[];
 *  - when node->accumulate is set, outputs are added into (+=) instead of overwritten — except
 *    saved statistics (layer norm's stats, attention's lse, batch norm's saved and running
 *    statistics, max-pool's argmax), which are always overwritten: the backward needs this
 *    call's own;
 *  - statistics are f32 (f64 beside f64 data, in the test graphs);
 *  - results are bitwise independent of the thread count: threads split independent outputs
 *    (rows, columns), never one reduction (a sum is always taken in the same order);
 *  - the float types are f32, bf16/f16 (16-bit storage, f32 arithmetic) and f64 (the tests'
 *    gradient checks); integer tensors (ids, targets, masks, argmax, rank) stay i32/u8 beside
 *    any of them. A node may mix f32 with bf16/f16 tensors (AMP: 16-bit activations beside f32
 *    parameters, gradients, statistics, lse and loss), never f64 with 16-bit ones (refused).
 *    The CPU's kernels are written for f32 and f64: a node with 16-bit tensors runs the f32
 *    kernel on f32 copies in the workspace — inputs widened exactly, outputs rounded to nearest
 *    even (widened first when the node accumulates) — so its result is the f32 result on the
 *    widened inputs, rounded once. Except PERMUTE, SLICE, SLICE_BWD, CONCAT and MASKED_FILL,
 *    which move 16-bit elements as they are when their float tensors share one dtype, and
 *    CAST, which converts any dtype to any other (src/backend/cpu/widen.c keeps this table);
 *  - a bad input that only shows at run time (an id out of range) returns TR_EINVAL with a
 *    sentence in args->diag; nothing else fails (a device's own failure: TR_EFAIL).
 *
 * Inputs (in) and outputs (out) per op, as graph.h names them:
 *   MATMUL          in a, b                 out y     a [P.., M, K] (trans_a: [P.., K, M]),
 *                                                     b [P.., K, N] or [K, N] shared (trans_b: N, K)
 *   BIAS_ADD        in x [.., N], bias [N]  out y
 *   ADD, MUL        in a, b (same shape)    out y
 *   SCALE           in x                    out y = alpha·x
 *   RELU, TANH      in x                    out y
 *   GELU            in x                    out y     erf form, or tanh form when tanh_approx
 *   SOFTMAX, LOG_SOFTMAX  in x              out y     over the last dim
 *   CROSS_ENTROPY   in logits [N, C], targets i32 [N]   out loss [1]: mean over targets ≠ ignore_index (0 if none)
 *   LINEAR_CROSS_ENTROPY  in x [N, D], w [C, D], targets i32 [N]   out loss [1] (as CROSS_ENTROPY's
 *                   of x·wᵀ), lse f32 [N] (0 for ignored rows), rank i32 [N]: the classes scoring
 *                   above the target, ties broken by index (−1 for ignored rows); the logits are
 *                   held a chunk of rows at a time (attrs.cross_entropy.chunk, 0: the backend's)
 *   LAYERNORM       in x [.., D], gamma [D], beta [D]   out y, stats f32 [rows, 2] = (mean, 1/σ)
 *   EMBEDDING       in table [V, D], ids i32 [..]       out y [.., D]
 *   DROPOUT         in x                    out y = x·keep/(1−p); keep = uniform ≥ p, feature f's
 *                   uniform word f mod 4 of tr_rng_uniform4(seed, step, sample id of dim 0's
 *                   row, position = dim 1 when rank ≥ 3 else 0, group f / 4, stream), f the
 *                   index within the remaining dims
 *   ATTENTION       in q, k, v [B, H, S, D] (+ mask u8 [B, S]: 1 real token, 0 padding)
 *                   out o [B, H, S, D], lse f32 [B, H, S]; scale = 1/√D (attrs.attention.scale 0);
 *                   causal: key ≤ query; the mask is present when there is a fourth input
 *   CONV2D          in x [N, C, H, W], w [O, C, kh, kw]      out y [N, O, H', W'] (stride, pad)
 *   BATCHNORM       in x [N, C, H, W] (or [N, C]), gamma [C], beta [C], running_mean [C], running_var [C]
 *                   out y, saved f32 [2, C] = (mean, 1/σ); training updates the running
 *                   statistics in place like PyTorch (momentum, unbiased variance)
 *   MAXPOOL         in x [N, C, H, W]       out y, argmax i32 (flat index within the H·W plane)
 *   AVGPOOL         in x                    out y     padding counted (PyTorch's default)
 *   GLOBAL_AVGPOOL  in x [N, C, H, W]       out y [N, C]
 *   PERMUTE         in x                    out y     y's axis i is x's axis perm[i]
 *   SLICE           in x                    out y     x[.., start : start + len(y), ..] on axis
 *   CONCAT          in x0, x1, ..           out y     along axis
 *   GATHER          in x [N, D], ids i32 [M]          out y [M, D]
 *   MASKED_FILL     in x, mask u8 (a prefix of x's shape)   out y = mask ? value : x
 *   CAST            in x                    out y (the output's dtype)
 *   SUM, MEAN       in x                    out y     over axis (kept out), or all when −1 → [1]
 *   ARGMAX          in x                    out y i32 over the last dim
 * Backward:
 *   BIAS_GRAD       in dy [.., N]           out dbias [N]
 *   RELU_BWD        in dy, y                out dx
 *   GELU_BWD        in dy, x                out dx
 *   TANH_BWD        in dy, y                out dx
 *   SOFTMAX_BWD     in dy, y                out dx
 *   LOG_SOFTMAX_BWD in dy, y                out dx
 *   CROSS_ENTROPY_BWD in dloss [1], logits, targets      out dlogits
 *   LINEAR_CROSS_ENTROPY_BWD in dloss [1], x, w, targets, lse   out dx, dw (the logits again);
 *                   attrs add_dw: dw is added into (a parameter's gradient), dx as accumulate says
 *   LAYERNORM_BWD   in dy, x, gamma, stats  out dx, dgamma, dbeta
 *   EMBEDDING_BWD   in dy, ids              out dtable [V, D] (zeroed, then rows scatter-added)
 *   ATTENTION_BWD   in do, q, k, v, o, lse (+ mask)      out dq, dk, dv
 *   CONV2D_BWD_DATA in dy, w                out dx
 *   CONV2D_BWD_FILTER in dy, x              out dw
 *   BATCHNORM_BWD   in dy, x, gamma, saved  out dx, dgamma, dbeta (training statistics)
 *   MAXPOOL_BWD     in dy, argmax           out dx
 *   AVGPOOL_BWD, GLOBAL_AVGPOOL_BWD  in dy  out dx
 *   SLICE_BWD       in dy                   out dx: zeros with dy at [start, start + len) on axis
 *   GATHER_BWD      in dy [M, D], ids       out dx [N, D] (zeroed, scatter-added)
 *   SUM_BWD         in dy                   out dx: dy broadcast along axis (−1: everywhere),
 *                                                     divided by the axis's size when attrs.axis.mean
 *   ACCUMULATE      in x                    out y += x (accumulate is implied)
 * The backward of DROPOUT is DROPOUT of dy with the same attributes (the same mask); of
 * PERMUTE, the inverse PERMUTE; of MASKED_FILL, MASKED_FILL of dy with 0; of CAST, a CAST back.
 */
#ifndef TR_BACKEND_H
#define TR_BACKEND_H

#include "core/alloc.h"
#include "core/error.h"
#include "graph/graph.h"

/* The kinds of device a run trains on (the plan's device, plan/device.h, says which). */
enum tr_device_kind { TR_DEVICE_CPU, TR_DEVICE_CUDA };

struct tr_backend;

/* What dropout's counter-based generator needs to know about the micro-batch being run. */
struct tr_rng_ctx {
    uint64_t seed;
    uint64_t step;               /* the optimizer step */
    const int64_t *sample_ids;   /* the data set index of each row of dim 0; NULL: the row number */
};

struct tr_kernel_args {
    const struct tr_backend *be;  /* the instance running the node (set by tr_backend_run) */
    const struct tr_node *node;
    struct tr_tensor in[TR_MAX_IN];
    struct tr_tensor out[TR_MAX_OUT];
    int nin, nout;
    void *workspace;
    size_t workspace_bytes;
    const struct tr_rng_ctx *rng;
    struct tr_diag *diag;        /* a failure's sentence */
};

typedef int (*tr_kernel_fn)(const struct tr_kernel_args *args);

/* The directions of a copy (tr_backend_copy): host memory is the process's, device memory the regions'. */
enum tr_copy { TR_COPY_TO_DEVICE, TR_COPY_TO_HOST, TR_COPY_ON_DEVICE };

/* One parameter as the optimizer sees it: its bytes in the parameters and gradients regions,
 * its first state element, its size, and whether weight decay applies. */
#define TR_SUMSQ_PIECE 16384   /* grad_sumsq's pieces on host-visible backends */
#define TR_COLLECTIVE_ID_BYTES 128   /* a communicator's id (NCCL's ncclUniqueId) */

struct tr_param_span {
    int64_t param, grad;   /* byte offsets into the regions */
    int64_t state;         /* element offset of its words in each state tensor */
    int64_t numel;
    int decay;
};

/* The optimizer step over every parameter at once (a multi-tensor update): the optimizer kind's
 * update, its formula written above each backend's kernel (recipe/optimizers.h lists the kinds
 * and their state). params, grads and state are device memory; spans is host memory, in graph
 * order. */
struct tr_optim_args {
    char *params, *grads;
    float *state;            /* state k of nstate for every parameter at state + k·total (AdamW:
                              * m then v; SGD: momentum); NULL when nstate is 0 */
    int nstate;
    int64_t total;           /* the parameters' elements together */
    const struct tr_param_span *spans;
    int nspans;
    int kind;                /* enum tr_optimizer: which update */
    double lr, weight_decay, beta1, beta2, eps, momentum;
    int nesterov;
    int64_t step;            /* 1 at the first update */
    float grad_factor;       /* optim_step: each gradient multiplied by it as the update reads it
                              * (clipping, fused; the gradients in memory stay as they are);
                              * 0 reads as 1 */
    struct tr_diag *diag;    /* a failure's sentence */
};

/* The factor an update multiplies each gradient by as it reads it (0 reads as 1). */
static inline float tr_optim_grad_factor(const struct tr_optim_args *a)
{
    return a->grad_factor > 0 ? a->grad_factor : 1;
}

/* What a kind of backend is and does: one const table per kind (CPU, fenced CPU, CUDA). The
 * entries after workspace_bytes take the instance first. */
struct tr_backend_ops {
    const char *name;
    const tr_kernel_fn *kernels;   /* TR_NOPS of them, by op; NULL where the kind has none yet */
    /* How the kind runs a kernel of its table (the CPU: 16-bit tensors through f32 copies; the
     * fenced CPU: that, with its regions opened); NULL: the kernel is called as it is. */
    int (*run)(tr_kernel_fn kernel, const struct tr_kernel_args *a);
    /* Scratch one node needs, from its bound shapes (im2col buffers, the f32 copies of 16-bit
     * tensors); 0 for most. in and out hold node->nin and node->nout tensors. A function of the
     * kind and the shapes alone: the planner sizes workspaces before any device is opened, and
     * for devices this machine does not have. */
    size_t (*workspace_bytes)(const struct tr_node *node, const struct tr_tensor *in,
                              const struct tr_tensor *out);
    /* Makes what the instance keeps for one node at its bound shapes (in, out: node->nin and
     * node->nout tensors, data NULL) before the first step — the CPU's oneDNN primitives — so
     * the step makes none; g says which sizes vary with the micro-batch. Called for every node of
     * every bucket's plan (tr_backend_prepare_program); NULL: the kind keeps nothing. 0, or a
     * code with a sentence in d. */
    int (*prepare)(const struct tr_backend *be, const struct tr_graph *g, const struct tr_node *node,
                   const struct tr_tensor *in, const struct tr_tensor *out, struct tr_diag *d);
    /* host_visible: the host may read and write the regions directly (the CPU); otherwise every
     * access goes through copy and fill. */
    bool host_visible;

    /* Makes be's state and memory (be->ops and be->device are set); touches no device (a CUDA
     * context starts at the first entry that needs one). 0 or TR_E… with a sentence. close
     * releases what open and the entries made. */
    int (*open)(struct tr_backend *be, struct tr_diag *d);
    void (*close)(struct tr_backend *be);

    /* Copies bytes, ordered after every kernel queued before it; a copy to the host has
     * arrived when it returns, a copy to the device has read its source. 0 or a code with a
     * sentence in d. */
    int (*copy)(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
                struct tr_diag *d);
    /* Sets bytes of device memory to byte, ordered as copy. */
    int (*fill)(const struct tr_backend *be, void *dst, int byte, size_t bytes, struct tr_diag *d);
    /* Waits for everything queued, copies ahead too; an asynchronous fault surfaces here. */
    int (*synchronize)(const struct tr_backend *be, struct tr_diag *d);
    /* Copies ahead: the next micro-batch's inputs travel while this one computes (NULL where
     * the host sees the regions: nothing to overlap). copy_ahead queues a copy to the device
     * on a second queue; it starts once everything queued before it is done and runs beside
     * whatever is queued after. Its source must stay as it is until join has been called and
     * a later synchronize or copy to the host has returned. join: whatever is queued after it
     * waits for every copy ahead queued before it. direction TR_COPY_TO_HOST (copy behind: an
     * activation offloaded): the same queue the other way, from device memory into the host's
     * (page-locked on a GPU); the device source must stay as it is until join, and the host
     * bytes are there for a later copy ahead on the queue, or once a synchronize returns. */
    int (*copy_ahead)(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
                      struct tr_diag *d);
    int (*join)(const struct tr_backend *be, struct tr_diag *d);
    /* The device's own clock around what is queued between the two (the profiler's traces: a
     * node's kernels, without the host's launch and wait): timer_start marks the queue,
     * timer_stop marks it again, waits for the mark and gives the device seconds between (CUDA:
     * two timing events on the stream). NULL where the host runs the kernels: its clock is it. */
    int (*timer_start)(const struct tr_backend *be, struct tr_diag *d);
    int (*timer_stop)(const struct tr_backend *be, double *seconds, struct tr_diag *d);

    /* The optimizer's passes over all gradients: the update (the gradients read times
     * grad_factor); the sum of squares (in double, in an order fixed by the sizes alone: the
     * same bits on any thread count; host-visible backends: each parameter in pieces of
     * TR_SUMSQ_PIECE values from its start, the pieces' sums added one after the other, so a
     * span of one piece gives that piece's sum exactly); multiplying every gradient by factor and saying whether all of them are
     * finite afterwards (the fp16 unscale and overflow check fused; clipping). A failure's
     * sentence goes to a->diag. */
    int (*optim_step)(const struct tr_backend *be, const struct tr_optim_args *a);
    /* Across ranks (dist/gradients.h), where the backend sums its own memory (CUDA: NCCL, loaded
     * at the first use); NULL where the host sums through copies. collective_id makes the
     * communicator's id (rank 0's, TR_COLLECTIVE_ID_BYTES, given to the others over MPI) for
     * every rank's collective_open; collective_sum sums n floats at data over the ranks in
     * place and waits for them, a failed rank making it fail rather than hang. */
    int (*collective_id)(void *id, size_t size, struct tr_diag *d);
    int (*collective_open)(const struct tr_backend *be, const void *id, int world, int rank, struct tr_diag *d);
    int (*collective_sum)(const struct tr_backend *be, float *data, size_t n, struct tr_diag *d);
    void (*collective_close)(const struct tr_backend *be);
    int (*grad_sumsq)(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq);
    int (*grad_scale)(const struct tr_backend *be, const struct tr_optim_args *a, float factor, bool *finite);
};

/* One backend on one device. The handle does not change once open (entries take it const);
 * what changes as it runs (streams, caches, copies held back) is in *state. One host thread
 * drives an instance at a time. */
struct tr_backend {
    const struct tr_backend_ops *ops;
    int device;                  /* the device's number among its kind's (cuda:N); 0 on the CPU */
    /* Memory. The regions come from `memory`; the host buffers the loader fills from
     * `host_memory` (CUDA: page-locked, so copies to the device run at full speed and
     * asynchronously). */
    const struct tr_memory_ops *memory, *host_memory;
    void *state;                 /* the kind's own (open makes it, close frees it) */
};

/* The entries, called on an instance: tr_backend_copy(be, dst, src, bytes, direction, d). */
static inline int tr_backend_copy(const struct tr_backend *be, void *dst, const void *src, size_t bytes,
                                  enum tr_copy direction, struct tr_diag *d)
{
    return be->ops->copy(be, dst, src, bytes, direction, d);
}

static inline int tr_backend_fill(const struct tr_backend *be, void *dst, int byte, size_t bytes, struct tr_diag *d)
{
    return be->ops->fill(be, dst, byte, bytes, d);
}

static inline int tr_backend_synchronize(const struct tr_backend *be, struct tr_diag *d)
{
    return be->ops->synchronize(be, d);
}

/* Whether the backend copies ahead (copy_ahead and join exist): where it does not, inputs are
 * written in place. */
static inline bool tr_backend_copies_ahead(const struct tr_backend *be) { return be->ops->copy_ahead != NULL; }

static inline int tr_backend_copy_ahead(const struct tr_backend *be, void *dst, const void *src, size_t bytes,
                                        struct tr_diag *d)
{
    return be->ops->copy_ahead(be, dst, src, bytes, TR_COPY_TO_DEVICE, d);
}

/* The copy queue the other way (copy_ahead's TR_COPY_TO_HOST): device bytes to the host's memory. */
static inline int tr_backend_copy_behind(const struct tr_backend *be, void *dst, const void *src, size_t bytes,
                                         struct tr_diag *d)
{
    return be->ops->copy_ahead(be, dst, src, bytes, TR_COPY_TO_HOST, d);
}

static inline int tr_backend_join(const struct tr_backend *be, struct tr_diag *d) { return be->ops->join(be, d); }

static inline int tr_backend_optim_step(const struct tr_backend *be, const struct tr_optim_args *a)
{
    return be->ops->optim_step(be, a);
}

static inline int tr_backend_grad_sumsq(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq)
{
    return be->ops->grad_sumsq(be, a, sumsq);
}

static inline int tr_backend_grad_scale(const struct tr_backend *be, const struct tr_optim_args *a, float factor,
                                        bool *finite)
{
    return be->ops->grad_scale(be, a, factor, finite);
}

/* BATCHNORM's x seen as [N, C, S]: S = H·W, or 1 for x [N, C] (both backends' layout); x
 * channels last [N, H, W, C] is N·H·W rows of C, as [N, C]. */
struct tr_bn_geom {
    int64_t N, C, S;
};

static inline struct tr_bn_geom tr_bn_geom_of(const struct tr_node *node, const struct tr_tensor *x)
{
    struct tr_bn_geom g = {x->dim[0], x->dim[1], 1};
    if (node->attrs.batchnorm.channels_last) {
        g.C = x->dim[x->rank - 1];
        for (int d = 1; d < x->rank - 1; d++)
            g.N *= x->dim[d];
        return g;
    }
    for (int d = 2; d < x->rank; d++)
        g.S *= x->dim[d];
    return g;
}

/* The CPU backend's table: OpenBLAS for GEMMs, OpenMP for the rest. */
extern const struct tr_backend_ops tr_cpu_ops;
/* The CPU backend as a device the host cannot see: the regions are mapped inaccessible except
 * while a kernel, a copy or a fill runs, so any direct host access to them is a crash. The
 * tests run whole trainings on it to prove the trainer reaches tensors only through copy and
 * fill, as the CUDA backend needs. Its copies ahead are held back until join (or
 * synchronize), as a device's may land late: an input committed before its join, or a source
 * let go too early, gives other bytes. Each instance fences its own regions; slow (two
 * mprotect calls a region a kernel). */
extern const struct tr_backend_ops tr_cpu_fenced_ops;
/* The CPU backend has no state: this one instance serves every caller that wants the CPU
 * (tests, tools); tr_backend_open gives an instance of its own, as for every kind. */
const struct tr_backend *tr_backend_cpu(void);

/* The kind of backend a device kind (enum tr_device_kind) trains on: "cpu", "cpu-fenced" or
 * "cuda", the environment's TRAINRUN_BACKEND overriding it (the tests' hook); NULL with a
 * sentence in d when that backend is not built or not known. */
const struct tr_backend_ops *tr_backend_ops_for(int device_kind, struct tr_diag *d);
/* An instance of that backend on device number `device` (cuda:N; 0 on the CPU) into *out:
 * 0, or a code with a sentence in d (*out NULL). Touches no device yet. */
int tr_backend_open(int device_kind, int device, struct tr_backend **out, struct tr_diag *d);
/* An instance of the kind ops is (tests: a particular kind whatever the environment says). */
int tr_backend_open_ops(const struct tr_backend_ops *ops, int device, struct tr_backend **out, struct tr_diag *d);
/* Releases the instance and everything it made; NULL is ignored. */
void tr_backend_close(struct tr_backend *be);

/* Prepares the instance for every node of a schedule at each of nplans bucket sizes (B[i],
 * S[i]) of graph g (backend.h: prepare); nothing where the kind keeps nothing. */
int tr_backend_prepare_program(const struct tr_backend *be, const struct tr_graph *g, const int *schedule, int n,
                               const int64_t *B, const int64_t *S, int nplans, struct tr_diag *d);

/* Runs one node's kernel on bound tensors (the executor's and the tests' single entry point):
 * sets args->be; 0, or a code with the sentence in args->diag. */
int tr_backend_run(const struct tr_backend *be, struct tr_kernel_args *args);

#endif
