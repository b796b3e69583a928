/* ZeRO's shards (DESIGN.md §10): which of the parameters' elements each rank's optimizer owns.
 * The elements are the optimizer's (every parameter laid end to end, in the graph's order);
 * rank k owns [first[k], first[k + 1]), about a world-th of them, cut only where a piece of
 * the gradient norm's sum begins (TR_SUMSQ_PIECE values from a parameter's start, backend.h),
 * so that each rank sums whole pieces and the norm adds the same pieces in the same order as
 * one process does: the same bits, sharded or not. The cut depends on the parameters' sizes
 * and the ranks alone, so the planner, the optimizer and the collectives agree on it. */
#ifndef TR_PLAN_SHARD_H
#define TR_PLAN_SHARD_H

#include <stdint.h>

#include "backend/backend.h"

/* A plan's ZeRO stage (tr_knobs' shard) as plan.json and run.json name it: "off", "optimizer",
 * "gradients", "parameters". */
const char *tr_shard_name(int stage);
/* first[0 … world]: the ranks' first elements, first[world] the total (numel[i]: parameter i's). */
void tr_shard_cut(const int64_t *numel, int n, int world, int64_t *first);
/* Elements rank owns of the parameters numel[0 … n − 1] (the whole when world is 1). */
int64_t tr_shard_elements(const int64_t *numel, int n, int world, int rank);
/* The spans of `spans` (the optimizer's, state offsets their element offsets end to end) that fall
 * in [lo, hi), cut where needed, into out (at most nspans entries); their state offsets from
 * lo. Returns how many. */
int tr_shard_spans(const struct tr_param_span *spans, int nspans, int64_t lo, int64_t hi, struct tr_param_span *out);

#endif
