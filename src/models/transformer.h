/* Pieces the transformer builders share (bert.c, gpt.c): parameters with Hugging Face's names
 * and initialisation (N(0, 0.02) for matrices and embeddings, zero biases, unit norms), heads
 * split and merged, and GELU by the recipe's activation. */
#ifndef TR_TRANSFORMER_H
#define TR_TRANSFORMER_H

#include <stdarg.h>
#include <stdbool.h>

#include "models/models.h"

/* A parameter named by a printf format, initialised N(0, 0.02) (std 0: zero; std < 0: one);
 * no_decay for biases, norms and embeddings. */
int tr_tf_param(struct tr_graph *g, int rank, const int64_t *dims, float std, int no_decay, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* A Linear layer with HF's layout (weight [out, in], bias [out]) named prefix.weight/.bias. */
int tr_tf_linear(struct tr_graph *g, int x, int64_t in, int64_t out, float std, const char *prefix);
/* A projection y = x·W + b of in → out features (the whole model's), HF's Linear (weight
 * [out, in]) or GPT-2's Conv1D (weight [in, out]: conv1d), split over g->tensor ranks as
 * Megatron-LM splits a transformer's (graph.h: tensor parallelism): whole; by columns — each rank
 * 1/T of the outputs of each of `parts` blocks (GPT's fused QKV: 3, so that every rank takes whole
 * heads of Q, K and V), x read through tr_tf_tensor_in; by rows — each rank 1/T of the inputs (a
 * column-split layer's outputs), the partial products summed over the ranks, then the bias,
 * whole on each. */
enum tr_tf_split { TR_TF_WHOLE, TR_TF_COLUMNS, TR_TF_ROWS };
int tr_tf_project(struct tr_graph *g, int x, int64_t in, int64_t out, float std, const char *prefix, bool conv1d,
                  enum tr_tf_split how, int parts);
/* x as column-split layers read it: tr_tensor_in over several ranks, else x. */
int tr_tf_tensor_in(struct tr_graph *g, int x);
/* Sequence parallel (g->sequence): the blocks' residual stream a part of the sequence a tensor
 * rank — tr_tf_tensor_in gathers it whole before a column-split layer, a row-split layer sums
 * into each rank's part (tr_tf_project), the norms, dropouts and residual adds between work on
 * parts; tr_tf_sequence_in takes this rank's part of the embeddings' output (the same on every
 * rank) and tr_tf_sequence_out puts the last block's output together for the head. Without it,
 * x itself. */
int tr_tf_sequence_in(struct tr_graph *g, int x);
int tr_tf_sequence_out(struct tr_graph *g, int x);
/* The recipe's heads and feed-forward against g->tensor: 0, or g->error with a sentence. */
int tr_tf_check_split(struct tr_graph *g, const struct tr_recipe *r);
/* LayerNorm with weight/bias named prefix.weight, prefix.bias (HF "LayerNorm" or "ln_1"). */
int tr_tf_layernorm(struct tr_graph *g, int x, int64_t D, float eps, const char *prefix);
/* [B, S, D] → [B, H, S, D/H] and back. */
int tr_tf_heads(struct tr_graph *g, int x, int64_t H, int64_t Dh);
int tr_tf_merge(struct tr_graph *g, int x, int64_t D);
/* Dropout with probability p, or x itself when p is 0 (evaluation): no node at all. */
int tr_tf_dropout(struct tr_graph *g, int x, float p, uint32_t stream);
int tr_tf_gelu(struct tr_graph *g, const struct tr_recipe *r, int x, int tanh_default);

#endif
