/* The pipeline's split (DESIGN.md §10, the seed's §5.1): a differentiated program's nodes dealt
 * to P stages by block — stage s runs blocks first_block[s] … first_block[s + 1] − 1, the nodes
 * before the first block (embeddings) with stage 0, those after the last (head, loss) with stage
 * P − 1 — each forward node on its block's stage, each backward or recomputed node on its forward's.
 * A node outside the blocks goes where its readers are; one that reads parameters and inputs
 * alone (an amp cast of a weight) runs on every stage that reads it, so a weight two stages share
 * (GPT's tied token embedding) is each one's own, its gradient each one's part of the sum.
 * Values one stage makes and another reads travel between them: the forward's to later stages
 * once its forward has run, the backward's to earlier ones once its backward has. */
#ifndef TR_STAGES_H
#define TR_STAGES_H

#include "graph/graph.h"

#define TR_MAX_STAGES 64
#define TR_PIPE_PIECE ((size_t)1 << 20)   /* floats at a time a shared weight's gradient is summed in
                                           * between its stages (train/step.c) */

enum tr_part { TR_PART_FORWARD, TR_PART_BACKWARD };

/* A value that travels: made by stage `from` in its `part`, read by stage `to` in the same part. */
struct tr_transfer {
    int value, from, to;
    uint8_t part;   /* enum tr_part */
};

struct tr_stage {
    int *schedule, n;   /* the stage's nodes in the program's order */
    int split;          /* [0, split): its forward; [split, n): its backward and recomputation */
};

struct tr_stages {
    int count;                     /* P */
    int first_block[TR_MAX_STAGES + 1];
    struct tr_stage *stage;        /* count of them */
    struct tr_transfer *transfers; /* in value order */
    int ntransfers;
    int *shared, nshared;          /* parameters more than one stage reads: their gradient is the
                                    * sum of the stages' parts */
    uint64_t *shared_on;           /* each one's stages, a bit each */
};

/* Deals schedule[0..n−1] of g (NULL: its nodes in creation order; differentiated or forward alone) to count stages at first_block
 * (count + 1 entries: 0, …, the graph's blocks). 0, or TR_EINVAL with a sentence in g->message:
 * a value two stages would both write, or one that would travel against its part's direction. */
int tr_stages_split(struct tr_stages *st, const struct tr_graph *g, const int *schedule, int n, int count,
                    const int *first_block);
void tr_stages_free(struct tr_stages *st);
/* Whether stage s's nodes read or write value v (a weight: whether the stage holds it), and the
 * first stage that does (−1: none). */
bool tr_stages_holds(const struct tr_stages *st, const struct tr_graph *g, int s, int v);
int tr_stages_holder(const struct tr_stages *st, const struct tr_graph *g, int v);

/* Blocks dealt to count stages by weight (each block's cost: time or bytes; NULL: one each),
 * as evenly as contiguous runs allow — the heaviest stage as light as it can be — with the
 * work outside the blocks (before: stage 0's; after: the last's) counted on their stages. */
void tr_stages_balance(const double *weight, int nblocks, double before, double after, int count, int *first_block);

#endif
