/* The model a recipe names, with its input, labels, logits and loss (models.h). */
#include <stdio.h>

#include "models/models.h"

/* The token inputs of a text model: ids, positions, segments (bert), the padding mask. */
static void text_inputs(struct tr_graph *g, int segments, struct tr_model *m)
{
    const struct tr_dim bs[2] = {tr_dim_B(1), tr_dim_S(1)};
    m->ids = tr_input(g, "ids", TR_I32, 2, bs);
    m->positions = tr_input(g, "positions", TR_I32, 2, bs);
    if (segments)
        m->segments = tr_input(g, "segments", TR_I32, 2, bs);
    m->mask = tr_input(g, "mask", TR_U8, 2, bs);
}

int tr_model_build(struct tr_graph *g, const struct tr_recipe *r, int sample_rank,
                   const int64_t *sample_dims, int classes, int64_t vocab, int training,
                   struct tr_model *m)
{
    *m = (struct tr_model){-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    struct tr_dim dims[TR_MAX_RANK] = {tr_dim_B(1)};
    int64_t features = 1;
    for (int i = 0; i < sample_rank; i++) {
        dims[i + 1] = tr_dim_const(sample_dims[i]);
        features *= sample_dims[i];
    }
    if (r->model.arch == TR_ARCH_GPT) {   /* a language model: every position predicts the next */
        text_inputs(g, 0, m);
        m->y = tr_input(g, "y", TR_I32, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1)});
        m->hidden = tr_gpt_build(g, r, m, vocab, training, &m->head);
        /* [B·S, vocab] logits would be the largest tensor by far (3.1 GiB for GPT-2 at batch
         * 16): the head and the loss are one op that holds a chunk of rows of them at a time */
        struct tr_dim tokens = tr_dim_mul(tr_dim_B(1), tr_dim_S(1));
        int flat = tr_reshape(g, m->hidden, 2, (struct tr_dim[]){tokens, tr_dim_const(r->model.hidden)});
        int targets = tr_reshape(g, m->y, 1, &tokens);
        m->loss = tr_linear_cross_entropy(g, flat, m->head, targets, -100, NULL, &m->rank);
        tr_graph_set_loss(g, m->loss);
        return g->error;
    }
    m->y = tr_input(g, "y", TR_I32, 1, (struct tr_dim[]){tr_dim_B(1)});
    switch (r->model.arch) {
    case TR_ARCH_MLP:
        m->x = tr_input(g, "x", TR_F32, 2, (struct tr_dim[]){tr_dim_B(1), tr_dim_const(features)});
        m->logits = tr_mlp_build(g, r, m->x, features, classes, training);
        break;
    case TR_ARCH_RESNET:
        if (sample_rank != 3)
            return snprintf(g->message, sizeof g->message, "model.arch resnet needs images [C, H, W]"),
                   g->error = -1;
        m->x = tr_input(g, "x", TR_F32, 4, dims);
        m->logits = tr_resnet_build(g, r, m->x, sample_dims, classes, training);
        break;
    default:   /* bert */
        text_inputs(g, 1, m);
        m->logits = tr_bert_build(g, r, m, vocab, classes, training);
        break;
    }
    m->loss = tr_cross_entropy(g, m->logits, m->y, -100);
    tr_graph_set_loss(g, m->loss);
    return g->error;
}

int tr_model_logits(struct tr_graph *g, struct tr_model *m)
{
    if (m->logits < 0 && m->hidden >= 0)
        m->logits = tr_matmul(g, m->hidden, m->head, 0, 1);
    return m->logits;
}
