/* A GPT-2 language model, as Hugging Face's GPT2LMHeadModel, with its parameter names
 * ("transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", …) and layouts — the
 * attention and MLP projections are Conv1D, stored [in, out] — so model.init loads a
 * save_pretrained file as it is: token and learned position embeddings; model.layers pre-LN
 * decoder blocks (causal self-attention, then a tanh-GELU feed-forward, each added to the
 * stream); a final LayerNorm; logits against the token embedding itself (tied: HF saves no
 * lm_head), which models.c fuses with the loss. Each block is a checkpointing unit. */
#include <math.h>
#include <stdio.h>

#include "models/transformer.h"

#define STD 0.02f   /* GPT2Config.initializer_range */
#define EPS 1e-5f   /* GPT2Config.layer_norm_epsilon */

static int block(struct tr_graph *g, const struct tr_recipe *r, int x, int mask, int layer, float p)
{
    int64_t D = r->model.hidden, H = r->model.heads, F = r->model.ffn, T = g->tensor;
    float proj_std = STD / sqrtf(2.0f * (float)r->model.layers);
    char at[96], name[128];
    snprintf(at, sizeof at, "transformer.h.%d", layer);
    tr_graph_block(g, layer);
    snprintf(name, sizeof name, "%s.ln_1", at);
    int a = tr_tf_tensor_in(g, tr_tf_layernorm(g, x, D, EPS, name));
    snprintf(name, sizeof name, "%s.attn.c_attn", at);
    int qkv[3];   /* tensor parallel: each rank H/T heads of each of Q, K and V */
    tr_split(g, tr_tf_project(g, a, D, 3 * D, STD, name, true, TR_TF_COLUMNS, 3), 2, 3, qkv);
    for (int i = 0; i < 3; i++)
        qkv[i] = tr_tf_heads(g, qkv[i], H / T, D / H);
    int o = tr_tf_merge(g, tr_attention(g, qkv[0], qkv[1], qkv[2], mask, 1), D / T);
    snprintf(name, sizeof name, "%s.attn.c_proj", at);
    o = tr_tf_dropout(g, tr_tf_project(g, o, D, D, proj_std, name, true, TR_TF_ROWS, 1), p, (uint32_t)(4 * layer + 1));
    int h = tr_add(g, x, o);
    snprintf(name, sizeof name, "%s.ln_2", at);
    int f = tr_tf_tensor_in(g, tr_tf_layernorm(g, h, D, EPS, name));
    snprintf(name, sizeof name, "%s.mlp.c_fc", at);
    f = tr_tf_gelu(g, r, tr_tf_project(g, f, D, F, STD, name, true, TR_TF_COLUMNS, 1), 1);
    snprintf(name, sizeof name, "%s.mlp.c_proj", at);
    f = tr_tf_dropout(g, tr_tf_project(g, f, F, D, proj_std, name, true, TR_TF_ROWS, 1), p, (uint32_t)(4 * layer + 2));
    int y = tr_add(g, h, f);
    tr_graph_block(g, -1);
    return y;
}

int tr_gpt_build(struct tr_graph *g, const struct tr_recipe *r, const struct tr_model *m, int64_t vocab,
                 int training, int *head)
{
    float p = training ? (float)r->model.dropout : 0;
    int64_t D = r->model.hidden, P = r->model.max_len;
    if (tr_tf_check_split(g, r))
        return -1;
    int wte = tr_tf_param(g, 2, (int64_t[]){vocab, D}, STD, 1, "transformer.wte.weight");
    int wpe = tr_tf_param(g, 2, (int64_t[]){P, D}, STD / 2, 1, "transformer.wpe.weight");
    int x = tr_add(g, tr_embedding(g, wte, m->ids), tr_embedding(g, wpe, m->positions));
    x = tr_tf_dropout(g, x, p, 0);
    x = tr_tf_sequence_in(g, x);
    for (int layer = 0; layer < r->model.layers; layer++)
        x = block(g, r, x, m->mask, layer, p);
    x = tr_tf_sequence_out(g, x);
    *head = wte;   /* tied: the logits are x·wteᵀ */
    return tr_tf_layernorm(g, x, D, EPS, "transformer.ln_f");
}
