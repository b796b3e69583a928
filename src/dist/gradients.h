/* The step's gradients summed over the ranks (data parallelism, DESIGN.md §10). Each rank ran
 * its part of the step's micro-batches, each weighted by its share of the whole step's targets
 * (train/step.h), so the sum is the step's gradient, as one process running every micro-batch
 * would have it; every rank then takes the same update and the parameters stay the same bits.
 * The gradients travel through a host buffer in buckets of about bucket_bytes, in parameter
 * order. Batch norm's running statistics are averaged the same way after each step, so every
 * rank holds the mean of what each rank's own micro-batches made of them. */
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
    double seconds;                  /* spent in reductions so far */
    struct tr_exec_profile *profile; /* while it records, each bucket's sum is a span of step's */
    int64_t step;
};

/* A reducer for the gradients the optimizer's spans name and the f32 running statistics of g
 * (where plan puts them; plan->grads_in_arena: the gradients share the arena with activations,
 * so only their own bytes are touched). Nothing is allocated alone (world 1). */
void tr_grad_reducer_init(struct tr_grad_reducer *r, const struct tr_comm *comm, const struct tr_backend *be,
                          const struct tr_param_span *spans, int nspans, const struct tr_graph *g,
                          const struct tr_memplan *plan, size_t bucket_bytes);
void tr_grad_reducer_free(struct tr_grad_reducer *r);

/* Sums the gradients at grads (a region's base) over the ranks, in place. ran: whether this rank
 * ran a micro-batch of the step; one that did not adds zeros (its gradients were not written).
 * 0, or a code with the sentence in d. */
int tr_grad_reduce(struct tr_grad_reducer *r, char *grads, bool ran, struct tr_diag *d);
/* The running statistics at params (the parameters region's base, where state lives) replaced
 * by their mean over the ranks. */
int tr_state_average(struct tr_grad_reducer *r, char *params, struct tr_diag *d);

#endif
