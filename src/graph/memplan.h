/* The memory plan (DESIGN.md §3): for concrete sizes (B, S), every value gets a byte offset in
 * its region. Activations share one arena by liveness over the schedule — best-fit, with
 * elementwise ops writing in place over an input that dies there (the ggml-alloc idea) — and
 * the arena's size is the plan's peak. Parameters, gradients, state and inputs get fixed
 * offsets in their own regions — except, where a step is one micro-batch (nothing to add up
 * across runs of the schedule), the gradients: then they are arena values too, each from the
 * step where the backward first writes it to the schedule's end (the optimizer reads them after
 * it), over the activations the backward has freed by then — what PyTorch's
 * zero_grad(set_to_none=True) gives, planned. Nothing is allocated here: the plan says how much. */
#ifndef TR_MEMPLAN_H
#define TR_MEMPLAN_H

#include "graph/graph.h"
#include "graph/stages.h"

#define TR_NKINDS 6   /* enum tr_value_kind: params, grads, state, inputs, arena, host */

struct tr_memplan {
    int64_t B, S;
    int nvalues;
    int64_t *offset;            /* per value: offset in its kind's region (views: their root's) */
    size_t *bytes;              /* per value: its size at (B, S), 64-byte aligned */
    int *first, *last;          /* per value: the schedule steps where its storage is live */
    size_t region_bytes[TR_NKINDS];  /* by tr_region_kind; [TR_ACT] is the arena: the planned peak;
                                      * [TR_HOST] the host ring offloaded activations take */
    size_t arena_sum;           /* Σ sizes of arena values: what no reuse would take */
    size_t arena_live_peak;     /* the most bytes live at one step: the bound any packing meets */
    int *read_at;               /* per value: the first step after the one that makes it that reads
                                 * it, or -1 (a RELOAD's copy lands before it: exec.c) */
    size_t *live;               /* per schedule step: the arena's bytes live while it runs (its
                                 * outputs taken, what dies there not yet given back); the peak
                                 * is arena_live_peak. Traces draw it (report/trace.c). */
    size_t workspace_bytes;     /* the largest scratch one node needs */
    signed char *region;        /* per value: the region it lives in (tr_region_kind, or TR_ACT
                                 * for a gradient in the arena) */
    bool grads_in_arena;        /* the gradients are arena values (tr_memplan_build) */
    int *zero, nzero;           /* grads_in_arena: the gradients by the step they start at (first),
                                 * which the executor zeroes there before the node runs */
    int *gather, ngather;       /* the gather pass's copies (graph.h) by the step they start at
                                 * (their first reader's; the graph's gather_ahead: that of the
                                 * copies a block before), then by value: the order the executor
                                 * fills them in, the same on every rank and in every bucket */
    int *gather_at;             /* per value: its place in gather, or -1 */
    /* A pipeline stage's plan (tr_memplan_build_stage): */
    bool staged;                /* a pipeline stage's plan */
    int split;                  /* where its backward begins (its steps: a forward alone) */
    uint8_t *stash;             /* per value: an activation the forward makes and the backward
                                 * reads, kept between the two while other micro-batches run:
                                 * placed apart, from stash_at on, stash_bytes in all (the arena
                                 * is stash_at + stash_bytes); the others share [0, stash_at) */
    int64_t stash_at;
    size_t stash_bytes;
};

/* The scratch one node needs from its bound shapes: a backend's (backend.h, the ops'
 * workspace_bytes), which the graph does not know. */
typedef size_t (*tr_workspace_fn)(const struct tr_node *node, const struct tr_tensor *in,
                                  const struct tr_tensor *out);

/* Plans schedule[0..n-1] of g at (B, S). keep lists values that must outlive the schedule
 * (the loss, logits read by evaluation). workspace sizes the workspace (NULL: none).
 * grads_in_arena: the gradients in the arena — only where each optimizer step runs the schedule
 * once (one micro-batch a step), since the arena does not keep them from one run to the next; a
 * gradient no node writes starts at step 0. */
int tr_memplan_build(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n,
                     int64_t B, int64_t S, const int *keep, int nkeep, tr_workspace_fn workspace,
                     bool grads_in_arena);
/* The plan of a pipeline stage's schedule (stages.h: split, and the transfers to and from stage):
 * as tr_memplan_build, with what a stage differs in — its inputs in the arena from step 0 (the
 * trainer writes them before the forward; the backward reads some), a value it receives live
 * from the start of the part that reads it, one it sends until the end of the part that makes
 * it, the values kept between the forward and the backward placed apart (stash), and no place
 * for a parameter, gradient or state no node of its reads. */
int tr_memplan_build_stage(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n, int split,
                           int stage, const struct tr_transfer *transfers, int ntransfers, int64_t B, int64_t S,
                           const int *keep, int nkeep, tr_workspace_fn workspace);
void tr_memplan_free(struct tr_memplan *p);

/* The region a kind of value lives in: state (batch-norm statistics) sits with the parameters,
 * since it is saved and restored with them; the others have their own. */
static inline enum tr_value_kind tr_region_kind(enum tr_value_kind k)
{
    return k == TR_STATE ? TR_PARAM : k;
}

/* Whether value v (a root: not a view) lives in the arena. */
static inline bool tr_memplan_in_arena(const struct tr_memplan *p, int v)
{
    return p->region[v] == TR_ACT;
}

/* The value whose storage v uses: v itself, or the value it is a view of. */
static inline int tr_storage_of(const struct tr_graph *g, int v)
{
    return g->values[v].view_of >= 0 ? g->values[v].view_of : v;
}

/* Each value of `kind`'s last toucher in schedule (n steps of g's nodes): the step of the last
 * node that reads or writes its storage (a root's entry; −1: none). g->nvalues entries, the
 * caller's to free. */
int *tr_last_touch(const struct tr_graph *g, const int *schedule, int n, enum tr_value_kind kind);

/* The node's tensors bound at (B, S), data pointers left NULL. */
void tr_bind_shapes(const struct tr_graph *g, const struct tr_node *n, int64_t B, int64_t S,
                    struct tr_tensor *in, struct tr_tensor *out);

#endif
