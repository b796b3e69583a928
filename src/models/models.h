/* Model builders (DESIGN.md §3): each turns the recipe's model section into graph nodes with
 * the graph API, names its parameters, says how to initialise them, and marks its blocks for
 * checkpointing. The same builder makes the training graph and the evaluation graph, so both
 * lay out their parameters identically and share one parameters region. */
#ifndef TR_MODELS_H
#define TR_MODELS_H

#include "graph/graph.h"
#include "recipe/recipe.h"

struct tr_model {
    int x;          /* input: features [B, …] (f32) */
    int y;          /* input: labels i32 [B] */
    int logits;     /* [B, classes] */
    int loss;       /* mean cross-entropy over the micro-batch, [1] */
};

/* sample_dims: one sample's shape ([64] for digits, [1, 28, 28] for images). */
int tr_model_build(struct tr_graph *g, const struct tr_recipe *r, int sample_rank,
                   const int64_t *sample_dims, int classes, int training, struct tr_model *m);

int tr_mlp_build(struct tr_graph *g, const struct tr_recipe *r, int x, int64_t features, int classes,
                 int training);
int tr_resnet_build(struct tr_graph *g, const struct tr_recipe *r, int x, const int64_t *chw, int classes,
                    int training);

/* A linear layer named prefix.weight [out, in] and prefix.bias [out], PyTorch's initialisation. */
int tr_model_linear(struct tr_graph *g, const char *prefix, int x, int64_t in, int64_t out);

#endif
