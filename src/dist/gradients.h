/* The step's gradients summed over the ranks (data parallelism, DESIGN.md §10). Each rank ran
 * its part of the step's micro-batches, each weighted by its share of the whole step's targets
 * (train/step.h), so the sum is the step's gradient, as one process running every micro-batch
 * would have it; every rank then takes the same update and the parameters stay the same bits.
 * The gradients travel through a host buffer in buckets of about bucket_bytes, in parameter
 * order. Batch norm's running statistics are averaged the same way after each step, so every
 * rank holds the mean of what each rank's own micro-batches made of them.
 *
 * Overlapped with the backward (tr_grad_reducer_overlap): where the host sees the gradients in a
 * region of their own, a communication thread sums each bucket as soon as the backward has
 * written it for the last time — in the rank's last micro-batch of the step, after the last node
 * of the schedule that touches any gradient in it. The buckets go in one order fixed before
 * the first step (by that node, then by offset), the same on every rank since every rank runs
 * the same program; a rank that ran none of the step's micro-batches sends zeros, in the same
 * order, after its (empty) backward. The buckets are the same elements as without overlap, so
 * the sums are the same bits. */
#ifndef TR_DIST_GRADIENTS_H
#define TR_DIST_GRADIENTS_H

#include "backend/backend.h"
#include "backend/profile.h"
#include "dist/comm.h"
#include "graph/memplan.h"

/* A run of f32 elements at a byte offset from a region's base. */
struct tr_span_f32 { int64_t offset, numel; };

struct tr_grad_reducer {
    const struct tr_comm *comm;
    const struct tr_backend *be;     /* whose memory the regions are */
    int64_t bucket_elems;            /* floats a collective sums at most */
    float *bucket;                   /* host memory: what is summed through it, up to a bucket */
    int64_t buffer_elems;
    struct tr_span_f32 *grads, *state;   /* every parameter's gradient; every f32 running statistic */
    int ngrads, nstate;
    /* the host sees the gradients, in a region of their own: summed where they lie, as one run
     * of floats from the first to the end of the last (the alignment gaps between them hold
     * zeros), without the copies through the bucket */
    bool in_place;
    int64_t first, end;              /* that run's bytes from the region's base */
    /* a device that sums its own memory (backend.h: collective_sum; CUDA: NCCL): the gradients
     * summed where they lie, the whole run a bucket at a time, or each in the arena */
    bool on_device, grads_in_arena;
    /* where the host sees the gradients, each bucket is summed as a reduce-scatter then an
     * all-gather over ZeRO's parts of it (plan/shard.h): parts[k] is rank k's first float of the
     * run, parts[world] its end; shard (ZeRO stage 1): the all-gather is left out, each rank
     * keeping the sums of its own part (its optimizer's), the rest of the run stale */
    int64_t *parts;
    bool shard;
    /* ZeRO stage 2: each micro-batch's gradients (in the arena, at its plan's offsets) are
     * reduce-scattered after its backward, in buckets of the parameters' elements end to end,
     * and this rank's part of each sum added into its shard (the gradients' region, this rank's
     * elements [cut[rank], cut[rank + 1]) end to end); every rank sums as many times a step
     * (the most micro-batches any rank runs), zeros where it has none left */
    bool stage2;
    int *grad_values;                /* every parameter's gradient value, in the optimizer's order */
    int64_t *numel, *cut;            /* their elements; ZeRO's cut (world + 1) */
    int rounds, done;                /* the step's sums, and those made */
    float *summed;                   /* the shard, while a step runs */
    int *counts, *displs;            /* the trainer's thread's: a bucket's parts */
    double seconds;                  /* spent in reductions so far (overlapped: in the collectives) */
    double exposed;                  /* overlapped: the trainer's wait for them after the backward */
    struct tr_grad_overlap *overlap; /* the communication thread, NULL without one */
    int comm_tid;                    /* its thread id, for the trace */
    struct tr_exec_profile *profile; /* while it records, each bucket's sum is a span of step's */
    int64_t step;
};

/* A reducer for the gradients the optimizer's spans name and the f32 running statistics of g
 * (where plan puts them; plan->grads_in_arena: the gradients share the arena with activations,
 * so only their own bytes are touched). shard: ZeRO stage 1, each rank keeps only its part's
 * sums (where the host does not see the gradients, all of them are summed: still right). Nothing
 * is allocated alone (world 1). */
void tr_grad_reducer_init(struct tr_grad_reducer *r, const struct tr_comm *comm, const struct tr_backend *be,
                          const struct tr_param_span *spans, int nspans, const struct tr_graph *g,
                          const struct tr_memplan *plan, size_t bucket_bytes, int shard);
void tr_grad_reducer_free(struct tr_grad_reducer *r);
/* Opens the device's own collectives (NCCL on GPU ranks), its id made by rank 0 and given to
 * every rank over MPI; every rank calls it. Where any rank cannot, none uses them (the gradients
 * then travel through host copies) and d says why. 0, or a code with the sentence in d. */
int tr_grad_reducer_device(struct tr_grad_reducer *r, struct tr_diag *d);
/* ZeRO stage 2, before a step's first micro-batch: its shard of summed gradients (the gradients'
 * region) zeroed, and rounds sums to make (the most micro-batches a rank runs this step). */
void tr_grad_reducer_begin(struct tr_grad_reducer *r, char *shard, int rounds);
/* ZeRO stage 2, after a micro-batch's backward on x: its gradients summed over the ranks, this
 * rank's part added into the shard (x NULL: a round this rank has no micro-batch for, zeros).
 * 0, or a code with the sentence in d. */
int tr_grad_reduce_micro(struct tr_grad_reducer *r, const struct tr_exec *x, struct tr_diag *d);
/* Whether this step's rounds are not all made yet. */
bool tr_grad_reducer_owes(const struct tr_grad_reducer *r);
/* Starts the communication thread for the program's schedule (n nodes of g), if the gradients
 * can be summed where they lie and MPI lets another thread call it; returns whether it did. The
 * executor hook it returns chains `inner` (the profiler's) and pushes each bucket as its last
 * writer finishes while armed (tr_grad_reducer_arm). */
bool tr_grad_reducer_overlap(struct tr_grad_reducer *r, const struct tr_graph *g, const int *schedule, int n,
                             const struct tr_memplan *plan);
struct tr_exec_hook tr_grad_reducer_hook(struct tr_grad_reducer *r, struct tr_exec_hook inner);
/* Before the rank's last micro-batch of a step runs: its backward's gradients are final as it
 * writes them, so buckets leave while it runs. No-op without the thread. */
void tr_grad_reducer_arm(struct tr_grad_reducer *r, char *grads);

/* Sums the gradients at grads (a region's base) over the ranks, in place. ran: whether this rank
 * ran a micro-batch of the step; one that did not adds zeros (its gradients were not written).
 * Overlapped: sends the buckets not yet sent and waits for every one to be summed (the exposed
 * wait), each a span of the trace's communication lane. 0, or a code with the sentence in d. */
int tr_grad_reduce(struct tr_grad_reducer *r, char *grads, bool ran, struct tr_diag *d);
/* The running statistics at params (the parameters region's base, where state lives) replaced
 * by their mean over the ranks. */
int tr_state_average(struct tr_grad_reducer *r, char *params, struct tr_diag *d);

#endif
