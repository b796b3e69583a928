/* The multilayer perceptron: model.layers hidden layers of model.hidden units, each a linear
 * layer, the activation and dropout, then a linear head. Parameter names follow PyTorch's
 * nn.Sequential of the same layers ("fc0.weight", …, "head.weight"). */
#include <math.h>
#include <stdio.h>

#include "models/models.h"

int tr_model_linear(struct tr_graph *g, const char *prefix, int x, int64_t in, int64_t out)
{
    char name[96];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int w = tr_param(g, name, TR_F32, 2, (struct tr_dim[]){tr_dim_const(out), tr_dim_const(in)});
    snprintf(name, sizeof name, "%s.bias", prefix);
    int b = tr_param(g, name, TR_F32, 1, (struct tr_dim[]){tr_dim_const(out)});
    float bound = 1.0f / sqrtf((float)in);   /* PyTorch's nn.Linear: kaiming_uniform(a=√5) */
    tr_param_init(g, w, TR_INIT_UNIFORM, bound, 0);
    tr_param_init(g, b, TR_INIT_UNIFORM, bound, 1);
    return tr_linear(g, x, w, b);
}

static int activation(struct tr_graph *g, int act, int x)
{
    switch (act) {
    case TR_ACT_GELU:      return tr_gelu(g, x, 0);
    case TR_ACT_GELU_TANH: return tr_gelu(g, x, 1);
    case TR_ACT_TANH:      return tr_tanh(g, x);
    default:               return tr_relu(g, x);   /* auto: relu for the MLP */
    }
}

int tr_mlp_build(struct tr_graph *g, const struct tr_recipe *r, int x, int64_t features, int classes,
                 int training)
{
    int64_t width = features;
    for (int64_t l = 0; l < r->model.layers; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "fc%lld", (long long)l);
        tr_graph_block(g, (int)l);
        x = activation(g, r->model.activation, tr_model_linear(g, prefix, x, width, r->model.hidden));
        if (training && r->model.dropout > 0)
            x = tr_dropout(g, x, (float)r->model.dropout, (uint32_t)l);
        width = r->model.hidden;
    }
    tr_graph_block(g, -1);
    return tr_model_linear(g, "head", x, width, classes);
}
