/* BERT for sequence classification, as Hugging Face's BertForSequenceClassification, with its
 * parameter names ("bert.encoder.layer.0.attention.self.query.weight", …, "classifier.weight"),
 * so model.init loads a save_pretrained safetensors file as it is: token, position and segment
 * embeddings summed and normalised; model.layers post-LN encoder blocks (self-attention over
 * the real tokens, then a GELU feed-forward, each added back and normalised); the pooler
 * (dense + tanh on the first token, [CLS]) and a linear classifier. Each block is a
 * checkpointing unit. */
#include <stdio.h>

#include "models/transformer.h"

#define STD 0.02f   /* BertConfig.initializer_range */
#define EPS 1e-12f  /* BertConfig.layer_norm_eps */

static int block(struct tr_graph *g, const struct tr_recipe *r, int x, int mask, int layer, float p)
{
    int64_t D = r->model.hidden, H = r->model.heads, F = r->model.ffn, T = g->tensor;
    char at[96], name[128];
    snprintf(at, sizeof at, "bert.encoder.layer.%d", layer);
    tr_graph_block(g, layer);
    int qkv[3], in = tr_tf_tensor_in(g, x);
    static const char *const parts[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {   /* tensor parallel: each rank H/T heads */
        snprintf(name, sizeof name, "%s.attention.self.%s", at, parts[i]);
        qkv[i] = tr_tf_heads(g, tr_tf_project(g, in, D, D, STD, name, false, TR_TF_COLUMNS, 1), H / T, D / H);
    }
    int o = tr_tf_merge(g, tr_attention(g, qkv[0], qkv[1], qkv[2], mask, 0), D / T);
    snprintf(name, sizeof name, "%s.attention.output.dense", at);
    o = tr_tf_dropout(g, tr_tf_project(g, o, D, D, STD, name, false, TR_TF_ROWS, 1), p, (uint32_t)(4 * layer + 1));
    snprintf(name, sizeof name, "%s.attention.output.LayerNorm", at);
    int h = tr_tf_layernorm(g, tr_add(g, x, o), D, EPS, name);
    snprintf(name, sizeof name, "%s.intermediate.dense", at);
    int f = tr_tf_gelu(g, r, tr_tf_project(g, tr_tf_tensor_in(g, h), D, F, STD, name, false, TR_TF_COLUMNS, 1), 0);
    snprintf(name, sizeof name, "%s.output.dense", at);
    f = tr_tf_dropout(g, tr_tf_project(g, f, F, D, STD, name, false, TR_TF_ROWS, 1), p, (uint32_t)(4 * layer + 2));
    snprintf(name, sizeof name, "%s.output.LayerNorm", at);
    int y = tr_tf_layernorm(g, tr_add(g, h, f), D, EPS, name);
    tr_graph_block(g, -1);
    return y;
}

int tr_bert_build(struct tr_graph *g, const struct tr_recipe *r, const struct tr_model *m, int64_t vocab,
                  int classes, int training)
{
    int64_t D = r->model.hidden, P = r->model.max_len, types = 2;
    float p = training ? (float)r->model.dropout : 0;
    if (tr_tf_check_split(g, r))
        return -1;
    int word = tr_tf_param(g, 2, (int64_t[]){vocab, D}, STD, 1, "bert.embeddings.word_embeddings.weight");
    int pos = tr_tf_param(g, 2, (int64_t[]){P, D}, STD, 1, "bert.embeddings.position_embeddings.weight");
    int type = tr_tf_param(g, 2, (int64_t[]){types, D}, STD, 1, "bert.embeddings.token_type_embeddings.weight");
    int x = tr_add(g, tr_add(g, tr_embedding(g, word, m->ids), tr_embedding(g, pos, m->positions)),
                   tr_embedding(g, type, m->segments));
    x = tr_tf_dropout(g, tr_tf_layernorm(g, x, D, EPS, "bert.embeddings.LayerNorm"), p, 0);
    x = tr_tf_sequence_in(g, x);
    for (int layer = 0; layer < r->model.layers; layer++)
        x = block(g, r, x, m->mask, layer, p);
    x = tr_tf_sequence_out(g, x);
    int first = tr_reshape(g, tr_slice(g, x, 1, 0, 1), 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(D)});
    int pooled = tr_tanh(g, tr_tf_linear(g, first, D, D, STD, "bert.pooler.dense"));
    pooled = tr_tf_dropout(g, pooled, p, 0xFFFFu);
    return tr_tf_linear(g, pooled, D, classes, STD, "classifier");
}
