/* Model builders (DESIGN.md §3): each turns the recipe's model section into graph nodes with
 * the graph API, names its parameters, says how to initialise them, and marks its blocks for
 * checkpointing. The same builder makes the training graph and the evaluation graph, so both
 * lay out their parameters identically and share one parameters region. */
#ifndef TR_MODELS_H
#define TR_MODELS_H

#include "graph/graph.h"
#include "recipe/recipe.h"

/* A model's inputs and outputs; an input the model does not take is −1. */
struct tr_model {
    int x;          /* features [B, …] (f32): mlp, resnet */
    int ids;        /* token ids i32 [B, S]: bert, gpt */
    int positions;  /* position of each token i32 [B, S] (0, 1, …) */
    int segments;   /* segment (token type) i32 [B, S]: bert */
    int mask;       /* u8 [B, S]: 1 a real token, 0 padding */
    int y;          /* labels i32 [B]; for gpt the next tokens [B, S] (−100: no target) */
    int logits;     /* [B, classes]; none (−1) for gpt, whose logits are never held whole */
    int loss;       /* mean cross-entropy over the micro-batch's targets, [1] */
    int hidden;     /* gpt: the final hidden states [B, S, D] */
    int head;       /* gpt: the output layer [vocab, D] (the tied token embedding): the logits
                     * are hidden·headᵀ */
    int rank;       /* gpt: i32 [B·S], per token the vocabulary entries scoring above the
                     * target (−1: no target): what accuracy and top-5 are counted from */
};

/* sample_dims: one sample's shape ([64] for digits, [1, 28, 28] for images; unused for text).
 * vocab: the tokenizer's vocabulary size (text models only). */
int tr_model_build(struct tr_graph *g, const struct tr_recipe *r, int sample_rank,
                   const int64_t *sample_dims, int classes, int64_t vocab, int training,
                   struct tr_model *m);

int tr_mlp_build(struct tr_graph *g, const struct tr_recipe *r, int x, int64_t features, int classes,
                 int training);
int tr_resnet_build(struct tr_graph *g, const struct tr_recipe *r, int x, const int64_t *chw, int classes,
                    int training);

/* The logits as a value: m->logits, or for gpt a matmul added for them (tests, inference). */
int tr_model_logits(struct tr_graph *g, struct tr_model *m);

/* Text models (bert.c, gpt.c) read m's token inputs; bert returns the logits. */
int tr_bert_build(struct tr_graph *g, const struct tr_recipe *r, const struct tr_model *m, int64_t vocab,
                  int classes, int training);
/* gpt returns the final hidden states [B, S, D] and in *head the tied output layer [V, D]. */
int tr_gpt_build(struct tr_graph *g, const struct tr_recipe *r, const struct tr_model *m, int64_t vocab,
                 int training, int *head);

/* A linear layer named prefix.weight [out, in] and prefix.bias [out], PyTorch's initialisation. */
int tr_model_linear(struct tr_graph *g, const char *prefix, int x, int64_t in, int64_t out);

#endif
