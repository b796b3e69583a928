/* The model a recipe names, with its input, labels, logits and loss (models.h). */
#include <stdio.h>

#include "models/models.h"

int tr_model_build(struct tr_graph *g, const struct tr_recipe *r, int sample_rank,
                   const int64_t *sample_dims, int classes, int training, struct tr_model *m)
{
    struct tr_dim dims[TR_MAX_RANK] = {tr_dim_B(1)};
    int64_t features = 1;
    for (int i = 0; i < sample_rank; i++) {
        dims[i + 1] = tr_dim_const(sample_dims[i]);
        features *= sample_dims[i];
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
    default:
        return snprintf(g->message, sizeof g->message, "model.arch %s is not built yet (it lands with the transformers)",
                        r->model.arch == TR_ARCH_BERT ? "bert" : "gpt"),
               g->error = -1;
    }
    m->loss = tr_cross_entropy(g, m->logits, m->y, -100);
    tr_graph_set_loss(g, m->loss);
    return g->error;
}
