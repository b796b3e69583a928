/* Generation from a GPT-2 model (gpt.c: its names, its Conv1D layouts, its tied head) with a
 * cache of every layer's keys and values, so that a new token costs one pass over the weights
 * instead of one per position of the context: the inference twin of the training graph, held
 * to its logits by tests/check_sample.c. The weights are used in place, as a safetensors file
 * holds them. Then the sampler (`trainrun sample`): temperature, top-k, and one Philox draw per
 * token, so the same seed gives the same text. */
#ifndef TR_GPT_DECODE_H
#define TR_GPT_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/safetensors.h"
#include "recipe/recipe.h"

/* One block's weights: HF's transformer.h.<i>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
 * mlp.c_proj}; the projections are [in, out]. */
struct tr_gpt_block_weights {
    const float *ln_1_w, *ln_1_b, *attn_w, *attn_b, *attn_proj_w, *attn_proj_b;
    const float *ln_2_w, *ln_2_b, *fc_w, *fc_b, *mlp_proj_w, *mlp_proj_b;
};

struct tr_gpt_decoder {
    int64_t layers, hidden, heads, ffn, max_len, vocab;
    int activation;                        /* enum tr_activation; auto is GPT-2's tanh GELU */
    const float *wte, *wpe, *ln_f_w, *ln_f_b;
    struct tr_gpt_block_weights *block;    /* [layers] */
    int64_t t;                             /* positions held in the cache */
    float *keys, *values;                  /* [layers][heads][max_len][head_dim] each */
    float *logits;                         /* [vocab]: the last position fed */
    /* private: the working rows (max_len of each) and the cache, one allocation each */
    float *x, *normed, *qkv, *attn, *hidden_ffn, *scores;
    float *work, *cache;
    void **copies;                         /* weights copied because the file left them unaligned */
    int ncopies;
};

/* Takes the weights of r's GPT (model.layers, .hidden, .heads, .ffn, .max_len, .activation)
 * from st, each named prefix + its parameter name ("" for a checkpoint); the vocabulary is
 * transformer.wte.weight's first dimension. 0, or TR_EINVAL (a weight missing, not F32, or of
 * another shape than r's model has: diag names it) or TR_ENOMEM. st must outlive d. */
int tr_gpt_decoder_init(struct tr_gpt_decoder *d, const struct tr_recipe *r, const struct tr_safetensors *st,
                        const char *prefix, struct tr_diag *diag);
/* Runs ids[0..n) at positions t … t + n − 1 (one batch of matrix products; n = 1 is one step),
 * appending their keys and values to the cache; d->logits then holds the last one's logits.
 * TR_EINVAL with the sentence in diag when t + n passes max_len or an id is outside the vocabulary. */
int tr_gpt_decoder_feed(struct tr_gpt_decoder *d, const int32_t *ids, int64_t n, struct tr_diag *diag);
/* Empties the cache: the next token fed is at position 0. */
void tr_gpt_decoder_reset(struct tr_gpt_decoder *d);
void tr_gpt_decoder_free(struct tr_gpt_decoder *d);

/* The next token from logits: temperature 0 is the argmax (the lowest id among equals); else the
 * top_k largest logits (0: all), softmax(logit / temperature) over them, and one uniform draw of
 * Philox 4×32 at counter (draws, "samp") under key seed, so draw d of seed s is always the same. */
struct tr_sampler {
    int64_t vocab, top_k;
    double temperature;
    uint64_t seed, draws;
    struct tr_candidate { float logit; int32_t id; double weight; } *candidates;   /* [vocab] */
};

void tr_sampler_init(struct tr_sampler *s, int64_t vocab, double temperature, int64_t top_k, uint64_t seed);
int32_t tr_sampler_next(struct tr_sampler *s, const float *logits);
void tr_sampler_free(struct tr_sampler *s);

#endif
