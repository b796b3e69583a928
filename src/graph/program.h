/* A program: the differentiated graph, its schedule, and one memory plan per length bucket
 * (B, S), all sharing one arena as large as the largest plan (DESIGN.md §3). It is what the
 * planner compares and what the trainer runs. */
#ifndef TR_PROGRAM_H
#define TR_PROGRAM_H

#include "graph/memplan.h"

struct tr_bucket { int64_t B, S; };

struct tr_program {
    struct tr_graph *graph;         /* borrowed; autodiff has run on it */
    int *schedule, n;
    struct tr_memplan *plans;       /* one per bucket */
    struct tr_bucket *buckets;
    int nbuckets;
    size_t region_bytes[TR_NKINDS]; /* the most any plan needs, per region */
    size_t workspace_bytes;
    /* A pipeline stage's program (tr_program_plan_stage): its nodes alone, the backward from
     * split on; slots micro-batches kept between their forward and backward, each slot's stash
     * (memplan.h) after the others', as large as the largest bucket's; slotted[bucket · slots +
     * slot]: the bucket's plan with its stash in that slot. split 0: not a stage. */
    int split, slots;
    struct tr_memplan *slotted;
    size_t stash_bytes;             /* one slot's */
};

/* Plans g (already differentiated) for each bucket; keep: values that outlive the schedule;
 * workspace: the backend's scratch per node (memplan.h; NULL: none); grads_in_arena: each
 * optimizer step is one run of the schedule, or ZeRO stage 2 takes each run's gradients out of
 * the arena after it (memplan.h; each bucket's plan has them at its own offsets). */
int tr_program_plan(struct tr_program *p, struct tr_graph *g, const struct tr_bucket *buckets,
                    int nbuckets, const int *keep, int nkeep, tr_workspace_fn workspace, bool grads_in_arena);
/* Stage `stage` of st's split of g (stages.h), with slots micro-batches in flight between its
 * forward and its backward. */
int tr_program_plan_stage(struct tr_program *p, struct tr_graph *g, const struct tr_stages *st, int stage, int slots,
                          const struct tr_bucket *buckets, int nbuckets, const int *keep, int nkeep,
                          tr_workspace_fn workspace);
/* A stage's plan for (B, S) with its stash in slot (0 … slots − 1), or NULL. */
const struct tr_memplan *tr_program_slot_plan(const struct tr_program *p, int64_t B, int64_t S, int slot);
/* The plan for the smallest bucket that holds (B, S), or NULL if none does. */
const struct tr_memplan *tr_program_plan_for(const struct tr_program *p, int64_t B, int64_t S);
void tr_program_free(struct tr_program *p);

#endif
