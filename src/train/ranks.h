/* The training loop across ranks (DESIGN.md §10, data parallelism): after each step's backward
 * the gradients, the loss and the wishes to stop (a signal, budget.time) summed over the ranks,
 * so every rank takes the same update and stops after the same step; after its update batch
 * norm's running statistics averaged; at each checkpoint the parameters' hashes compared. With
 * one rank each is nothing and the loop runs as it always did. */
#ifndef TR_RANKS_H
#define TR_RANKS_H

#include "backend/exec.h"
#include "dist/comm.h"
#include "data/dataset.h"
#include "dist/gradients.h"
#include "recipe/recipe.h"

/* What the ranks agreed after a step's backward. */
struct tr_ranks_step {
    double loss;       /* the step's loss: this rank's part in, the sum over the ranks out */
    bool signal;       /* a stop signal reached any rank */
    bool time_up;      /* budget.time ran out on any rank */
    bool failed;       /* a rank's step failed (its own output says why) */
};

/* After step's backward: the gradients at grads summed over r's ranks (a stage's data ranks; ran:
 * whether this rank ran a micro-batch of the step), then the loss and the stop wishes over all the
 * ranks (pipelined, the stages before the last add 0 to the loss). 0, or a code with the sentence
 * in d. */
int tr_ranks_after_backward(struct tr_grad_reducer *r, const struct tr_comm *all, char *grads, bool ran,
                            struct tr_ranks_step *st, struct tr_diag *d);
/* Whether every rank runs the same job: a hash of its resolved recipe and of the data it
 * loaded (each split's samples and tokens) against rank 0's. TR_EINVAL naming the ranks that
 * differ (a conf file or an override that differs between hosts, other data) otherwise. */
int tr_ranks_same_job(const struct tr_comm *c, const struct tr_recipe *r, const struct tr_data *data,
                      struct tr_diag *d);
/* bytes of be's memory at region from rank 0 to every rank, through the host a chunk at a time
 * (rank 0's resumed parameters and optimizer state, for ranks that did not read them). */
int tr_ranks_broadcast_region(const struct tr_comm *c, const struct tr_backend *be, char *region, size_t bytes,
                              struct tr_diag *d);
/* Whether every rank holds the same parameters (and running statistics): the region's hash
 * compared; TR_EFAIL naming the ranks that differ from rank 0 at step otherwise. ZeRO 3, where
 * each rank holds its own part: 0. */
int tr_ranks_same_params(const struct tr_comm *c, const struct tr_exec *x, int64_t step, struct tr_diag *d);

/* Tensor parallelism's all-reduces over a stage's tensor ranks, and what they cost (run.json). */
struct tr_tensor_sums {
    const struct tr_comm *comm;
    int64_t count;
    double bytes, seconds;     /* summed, and the time spent in them (waits for the other ranks included) */
    int *partial, npartial;    /* sequence parallel: the parameters each rank has a part of the
                                * gradient of (norms and biases over a part of the sequence) */
};
/* The collectives (exec.h: collective; ctx a struct tr_tensor_sums) over the tensor ranks: the
 * all-reduce (a node's input summed into its output, every rank the same bits) and sequence
 * parallelism's all-gather, reduce-scatter and slice along axis 1; 16-bit values summed in f32
 * a piece at a time and rounded once. */
int tr_ranks_tensor_sum(void *ctx, const struct tr_kernel_args *a);
/* Sequence parallel: t's partial parameters (found by tr_ranks_find_partial in x's graph) have
 * their gradients summed over the tensor ranks, once the step's backward is done. */
void tr_ranks_find_partial(struct tr_tensor_sums *t, const struct tr_graph *g);
int tr_ranks_sum_partial(struct tr_tensor_sums *t, const struct tr_exec *x, struct tr_diag *d);

#endif
