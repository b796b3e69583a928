/* The optimizer step and the learning-rate schedule (DESIGN.md §2, trainer). Parameters,
 * gradients and optimizer state are flat f32 regions; the step walks every parameter value of
 * the graph with the recipe's optimizer (recipe/optimizers.h: AdamW, SGD with momentum or
 * Nesterov, as PyTorch defines them, so loss trajectories can be compared step by step). */
#ifndef TR_OPTIM_H
#define TR_OPTIM_H

#include "backend/exec.h"
#include "dist/comm.h"
#include "graph/stages.h"
#include "recipe/recipe.h"

struct tr_ahead;

struct tr_optim {
    const struct tr_graph *g;
    const struct tr_memplan *plan;
    const struct tr_backend *be;   /* whose memory the regions are, and who runs the passes */
    char *params, *grads;      /* the regions */
    float *state;              /* the descriptor's nstate tensors, one after the other */
    int nstate;                /* of them kept (SGD without momentum: 0) */
    size_t state_bytes;
    float *host_state;         /* the host's view of state (tr_optim_host_state) */
    struct tr_param_span *spans;   /* every parameter, in graph order (host memory) */
    int nspans;
    int64_t total;             /* the parameters' elements */
    int kind;                  /* enum tr_optimizer */
    double weight_decay, beta1, beta2, eps, momentum;
    int nesterov;
    int64_t step;              /* optimizer steps taken */
    float grad_factor;         /* clipping's factor for the next update (tr_grad_clip), else 1 */
    /* ZeRO stage 1 (plan/shard.h): the ranks share the state, each keeping and updating its part
     * of the parameters' elements, [lo, lo + own); NULL comm: this process holds it all */
    const struct tr_comm *comm;
    int stage;                 /* 1; 2: grads hold this rank's part alone, element lo at 0; 3:
                                * params too (the parameters read through gathered copies) */
    int64_t lo, own;
    int *counts, *displs;      /* every rank's part: its elements and its first */
    struct tr_param_span *shard_spans;   /* the spans' parts in this rank's (state offsets from lo) */
    int nshard;
    double *pieces;            /* the norm's pieces (TR_SUMSQ_PIECE values of a parameter), all ranks' */
    int64_t npieces;
    float *gather;             /* the parameters gathered through it, gather_elems at a time */
    int64_t gather_elems;
    int *gather_counts;        /* a piece's parts, every rank's counts then displacements */
    double gather_seconds;     /* spent gathering the updated parameters (stage 3: the copies) */
    struct tr_exec *x;         /* stage 3: the executor whose host view the parameters gather into */
    struct tr_ahead *ahead;    /* stage 3 a block ahead: the thread gathering the copies (dist/ahead.h) */
    int *ahead_counts;         /* its counts and displacements */
    /* pipelined (tr_optim_pipelined): the stages this one's parameters are among */
    const struct tr_comm *pipe;
    int64_t *piece_at;         /* per span: its first piece among all the model's (the norm's) */
    uint8_t *counted;          /* per span: its gradient counts in the norm here (a shared weight's
                                * on its first stage alone) */
    /* tensor parallel (tr_optim_tensor): the ranks this one's blocks are split over, and the spans
     * whose gradients count in the norm here (the sliced ones; the whole ones on tensor rank 0) */
    const struct tr_comm *tensor;
    struct tr_param_span *norm_spans;
    int nnorm;
    /* optimizer-state offload (tr_optim_offload): state is the host's memory, the update the
     * CPU's, over host copies of the parameters (laid out as their region) and gradients */
    char *host_params;
    float *host_grads;         /* parameter i's at its state offset, end to end */
    struct tr_param_span *host_spans;   /* the spans over those copies */
    bool stale;                /* host_params behind the device's (initialised, or a checkpoint pushed) */
    struct tr_grads_down *down;   /* with a copy queue: the gradients leave as the backward writes
                                   * them (tr_optim_overlap); NULL: down after the backward */
    struct tr_optim_moved {    /* what the offloaded updates moved, summed over this process's steps */
        int64_t steps;         /* updates this process made (offloaded or not) */
        uint64_t down, up;     /* gradients to the host, parameters back */
        uint64_t early;        /* of down: sent while the backward ran (tr_optim_overlap) */
        double seconds;        /* the host's time copying and waiting for the copies */
        double update_seconds; /* the CPU's updates */
    } moved;
};

/* The optimizer over g's parameters and gradients (at plan's offsets), its state in `state`
 * (tr_plan_optimizer_bytes long), all of it be's memory. shard: the ranks sharing the state
 * (its state then tr_plan_optimizer_shard_bytes long: this rank's part; be's memory the host's),
 * NULL for none; stage (ZeRO's, with shard): 2, grads holds only this rank's part's summed
 * gradients, end to end; 3, params this rank's part of the parameters too, end to end. */
void tr_optim_init(struct tr_optim *o, const struct tr_recipe *r, const struct tr_graph *g,
                   const struct tr_memplan *plan, const struct tr_backend *be, char *params, char *grads,
                   float *state, const struct tr_comm *shard, int stage);
/* A pipeline stage's optimizer (graph/stages.h): its plan holds its stage's parameters alone,
 * the gradients' norm and fp16's overflow check are the stages' together over pipe. */
void tr_optim_pipelined(struct tr_optim *o, const struct tr_comm *pipe, const struct tr_stages *st, int stage);
/* Tensor parallel (graph.h): the gradients' norm and fp16's overflow check are the tensor ranks'
 * together — each sliced parameter's part from its rank, a whole one (the same on every rank)
 * counted once. */
void tr_optim_tensor(struct tr_optim *o, const struct tr_comm *tensor);
/* Optimizer-state offload (ZeRO-Offload's, on one device): the state given to tr_optim_init
 * is host memory, and each step copies the gradients to host_grads (the parameters' elements,
 * float each, end to end), updates host_params (the parameters region's bytes, its layout) with
 * the CPU backend's optimizer — the same code, so the same bits, as on the device — and copies
 * each parameter back on the copy queue, all landed before the step returns. The host copy of
 * the parameters is taken from the device before the first step and after any push. */
void tr_optim_offload(struct tr_optim *o, char *host_params, float *host_grads);
/* Offloaded, on a backend with a copy queue (backend.h: copy_ahead): the gradients go down in
 * buckets of at most bucket_bytes (runs of them end to end) as the step's last micro-batch's
 * backward writes them — each after the last node of schedule (n steps, g's) that touches any
 * gradient in it, behind that node's kernels on the queue. The hook (chaining inner) sends them
 * while armed; tr_optim_arm arms it before the last micro-batch runs, and tr_optim_sent, after
 * it, sends what is left and joins the queue, so that whatever comes after (fp16's unscaling)
 * waits for every copy; the host reads them once the device is synchronized, at its first use.
 * A step that armed nothing (its micro-batches had no targets) copies them after the backward,
 * as without. False, and nothing changes, where not offloaded or no queue. */
bool tr_optim_overlap(struct tr_optim *o, const struct tr_graph *g, const int *schedule, int n, size_t bucket_bytes);
struct tr_exec_hook tr_optim_hook(struct tr_optim *o, struct tr_exec_hook inner);
int tr_optim_arm(struct tr_optim *o, struct tr_diag *d);
int tr_optim_sent(struct tr_optim *o, struct tr_diag *d);
void tr_optim_free(struct tr_optim *o);
/* The host's view of the state, for checkpoints: the state itself on a host-visible backend,
 * else a host copy that pull fills from the device and push copies back (0, or a code with the
 * backend's sentence in d). */
float *tr_optim_host_state(struct tr_optim *o);
int tr_optim_pull(struct tr_optim *o, struct tr_diag *d);
int tr_optim_push(struct tr_optim *o, struct tr_diag *d);
/* Sharded, the host's view is the whole state, laid out as unsharded (checkpoints hold it
 * whole): tr_optim_gather fills rank 0's from every rank's part (every rank calls it; pull then
 * copies nothing); tr_optim_share gives rank 0's to every rank, each keeping its part (a
 * resume); tr_optim_release frees the view again (it is as large as the unsharded state).
 * Unsharded: nothing, 0. */
int tr_optim_gather(struct tr_optim *o, struct tr_diag *d);
int tr_optim_share(struct tr_optim *o, struct tr_diag *d);
void tr_optim_release(struct tr_optim *o);
/* ZeRO stage 3: the executor's parameters are this rank's part (exec.h: shard): x's gathered
 * copies are filled from every rank's part — where x's graph gathers a block ahead and MPI lets
 * any thread call it, by a thread of their own, waited for before each reader — and its host
 * view's are kept from; with x's, the checkpoints' gather and the resume's share above take the
 * parameters too. */
void tr_optim_serve(struct tr_optim *o, struct tr_exec *x);
/* The seconds spent gathering parameters (stages 1 and 2 the updated ones, 3 the copies: on the
 * thread ahead, where they travel a block ahead). */
double tr_optim_gather_seconds(const struct tr_optim *o);
/* One update with learning rate lr from the accumulated gradients: 0, or a code with the
 * sentence in d (a device fault). Sharded: this rank's part updated, then every rank's
 * gathered, so all hold the same parameters. */
int tr_optim_step(struct tr_optim *o, double lr, struct tr_diag *d);

/* The learning rate at optimizer step t (1-based) of total: linear warm-up, then constant,
 * linear decay to 0 or cosine to 0. */
double tr_schedule_lr(const struct tr_recipe *r, int64_t t, int64_t total);

/* The global L2 norm of all gradients (sharded: each rank's pieces summed across the ranks,
 * then added in order, the same bits as unsharded); with clip > 0 and a larger norm, the next
 * tr_optim_step reads them scaled to clip (the scaling fused into the update's pass: the
 * gradients in memory stay as they are). Returns the norm before clipping (NaN or Inf if any gradient is); NaN with a sentence added to
 * d when the backend failed. */
double tr_grad_clip(struct tr_optim *o, double clip, struct tr_diag *d);
/* Multiplies every gradient by inv (the fp16 loss scale's inverse) and says whether all of
 * them are finite: the unscaling and the overflow check in one pass (false with a sentence
 * added to d when the backend failed). */
bool tr_grad_unscale(struct tr_optim *o, float inv, struct tr_diag *d);
/* The first parameter whose gradient holds NaN or Inf, or -1 (copies each gradient to the
 * host in turn: for the failure's message, not for every step). */
int tr_grad_first_nonfinite(const struct tr_optim *o);

#endif
