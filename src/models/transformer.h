/* Pieces the transformer builders share (bert.c, gpt.c): parameters with Hugging Face's names
 * and initialisation (N(0, 0.02) for matrices and embeddings, zero biases, unit norms), heads
 * split and merged, and GELU by the recipe's activation. */
#ifndef TR_TRANSFORMER_H
#define TR_TRANSFORMER_H

#include <stdarg.h>

#include "models/models.h"

/* A parameter named by a printf format, initialised N(0, 0.02) (std 0: zero; std < 0: one);
 * no_decay for biases, norms and embeddings. */
int tr_tf_param(struct tr_graph *g, int rank, const int64_t *dims, float std, int no_decay, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* A Linear layer with HF's layout (weight [out, in], bias [out]) named prefix.weight/.bias. */
int tr_tf_linear(struct tr_graph *g, int x, int64_t in, int64_t out, float std, const char *prefix);
/* GPT-2's Conv1D: weight stored [in, out], y = x·W + b. */
int tr_tf_conv1d(struct tr_graph *g, int x, int64_t in, int64_t out, float std, const char *prefix);
/* LayerNorm with weight/bias named prefix.weight, prefix.bias (HF "LayerNorm" or "ln_1"). */
int tr_tf_layernorm(struct tr_graph *g, int x, int64_t D, float eps, const char *prefix);
/* [B, S, D] → [B, H, S, D/H] and back. */
int tr_tf_heads(struct tr_graph *g, int x, int64_t H, int64_t Dh);
int tr_tf_merge(struct tr_graph *g, int x, int64_t D);
/* Dropout with probability p, or x itself when p is 0 (evaluation): no node at all. */
int tr_tf_dropout(struct tr_graph *g, int x, float p, uint32_t stream);
int tr_tf_gelu(struct tr_graph *g, const struct tr_recipe *r, int x, int tanh_default);

#endif
