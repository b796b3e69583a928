/* Small model builders for the engine's tests and benchmarks, until src/models/ has the real
 * ones: a BERT-style post-LN transformer block, and an MLP. */
#ifndef TR_TESTS_MODELS_H
#define TR_TESTS_MODELS_H

#include <stdio.h>

#include "graph/graph.h"

static inline int model_param(struct tr_graph *g, enum tr_dtype t, const char *prefix, const char *name,
                              int rank, const int64_t *dims)
{
    char full[48];
    struct tr_dim d[TR_MAX_RANK];
    snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", name);
    for (int i = 0; i < rank; i++)
        d[i] = tr_dim_const(dims[i]);
    return tr_param(g, full, t, rank, d);
}

static inline int model_linear(struct tr_graph *g, enum tr_dtype t, const char *prefix, int x,
                               int64_t in, int64_t out)
{
    char name[40];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int w = model_param(g, t, "", name, 2, (int64_t[]){out, in});
    snprintf(name, sizeof name, "%s.bias", prefix);
    int b = model_param(g, t, "", name, 1, (int64_t[]){out});
    return tr_linear(g, x, w, b);
}

/* [B, S, D] → heads [B, H, S, D/H] */
static inline int model_heads(struct tr_graph *g, int x, int64_t H, int64_t Dh)
{
    int r = tr_reshape(g, x, 4, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(H), tr_dim_const(Dh)});
    return tr_permute(g, r, (int[]){0, 2, 1, 3});
}

/* One post-LN encoder block (BERT): x [B, S, D] → [B, S, D]. */
static inline int model_bert_block(struct tr_graph *g, enum tr_dtype t, int layer, int x, int mask,
                                   int64_t D, int64_t H, int64_t F, float dropout)
{
    char p[32];
    int64_t Dh = D / H;
    tr_graph_block(g, layer);
    snprintf(p, sizeof p, "l%d.q", layer);
    int q = model_heads(g, model_linear(g, t, p, x, D, D), H, Dh);
    snprintf(p, sizeof p, "l%d.k", layer);
    int k = model_heads(g, model_linear(g, t, p, x, D, D), H, Dh);
    snprintf(p, sizeof p, "l%d.v", layer);
    int v = model_heads(g, model_linear(g, t, p, x, D, D), H, Dh);
    int o = tr_attention(g, q, k, v, mask, 0);
    o = tr_permute(g, o, (int[]){0, 2, 1, 3});
    o = tr_reshape(g, o, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(D)});
    snprintf(p, sizeof p, "l%d.o", layer);
    o = tr_dropout(g, model_linear(g, t, p, o, D, D), dropout, (uint32_t)(2 * layer));
    snprintf(p, sizeof p, "l%d.ln1", layer);
    int h = tr_layernorm(g, tr_add(g, x, o), model_param(g, t, p, "weight", 1, (int64_t[]){D}),
                         model_param(g, t, p, "bias", 1, (int64_t[]){D}), 1e-12f);
    snprintf(p, sizeof p, "l%d.ffn1", layer);
    int f = tr_gelu(g, model_linear(g, t, p, h, D, F), 0);
    snprintf(p, sizeof p, "l%d.ffn2", layer);
    f = tr_dropout(g, model_linear(g, t, p, f, F, D), dropout, (uint32_t)(2 * layer + 1));
    snprintf(p, sizeof p, "l%d.ln2", layer);
    int y = tr_layernorm(g, tr_add(g, h, f), model_param(g, t, p, "weight", 1, (int64_t[]){D}),
                         model_param(g, t, p, "bias", 1, (int64_t[]){D}), 1e-12f);
    tr_graph_block(g, -1);
    return y;
}

#endif
