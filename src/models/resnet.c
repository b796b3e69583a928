/* A residual network for small images (28×28 grey now, 32×32×3 as well), in the graph's image
 * layout (the data's [N, C, H, W] made channels last first where that is it): a 3×3 stem, three
 * stages of model.layers basic blocks (conv3×3 → BN → ReLU → conv3×3 → BN, + shortcut, ReLU)
 * with widths w, 2w, 4w (w = model.hidden) and stride 2 at the start of stages 2 and 3, a
 * global average pool and a linear head. Batch norm uses batch statistics while training and
 * the running ones in evaluation; those live beside the parameters and are saved with them. */
#include <math.h>
#include <stdio.h>

#include "models/models.h"

static int conv(struct tr_graph *g, const char *prefix, int x, int64_t in, int64_t out, int k, int stride)
{
    char name[48];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int w = tr_param(g, name, TR_F32, 4,
                     (struct tr_dim[]){tr_dim_const(out), tr_dim_const(in), tr_dim_const(k), tr_dim_const(k)});
    tr_param_init(g, w, TR_INIT_UNIFORM, 1.0f / sqrtf((float)(in * k * k)), 0);
    return tr_conv2d(g, x, w, stride, k / 2);
}

static int batchnorm(struct tr_graph *g, const char *prefix, int x, int64_t channels, int training)
{
    static const struct { const char *name; enum tr_value_kind kind; enum tr_init init; } parts[] = {
        {"weight", TR_PARAM, TR_INIT_ONE}, {"bias", TR_PARAM, TR_INIT_ZERO},
        {"running_mean", TR_STATE, TR_INIT_ZERO}, {"running_var", TR_STATE, TR_INIT_ONE},
    };
    int v[4];
    for (int i = 0; i < 4; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s.%s", prefix, parts[i].name);
        struct tr_dim d = tr_dim_const(channels);
        v[i] = parts[i].kind == TR_PARAM ? tr_param(g, name, TR_F32, 1, &d) : tr_state(g, name, TR_F32, 1, &d);
        tr_param_init(g, v[i], parts[i].init, 0, 1);
    }
    return tr_batchnorm(g, x, v[0], v[1], v[2], v[3], 1e-5f, 0.1f, training);
}

static int basic_block(struct tr_graph *g, const char *prefix, int x, int64_t in, int64_t out, int stride,
                       int training)
{
    char name[48];
    snprintf(name, sizeof name, "%s.conv1", prefix);
    int y = conv(g, name, x, in, out, 3, stride);
    snprintf(name, sizeof name, "%s.bn1", prefix);
    y = tr_relu(g, batchnorm(g, name, y, out, training));
    snprintf(name, sizeof name, "%s.conv2", prefix);
    y = conv(g, name, y, out, out, 3, 1);
    snprintf(name, sizeof name, "%s.bn2", prefix);
    y = batchnorm(g, name, y, out, training);
    int shortcut = x;
    if (stride != 1 || in != out) {
        snprintf(name, sizeof name, "%s.down.conv", prefix);
        shortcut = conv(g, name, x, in, out, 1, stride);
        snprintf(name, sizeof name, "%s.down.bn", prefix);
        shortcut = batchnorm(g, name, shortcut, out, training);
    }
    return tr_relu(g, tr_add(g, y, shortcut));
}

int tr_resnet_build(struct tr_graph *g, const struct tr_recipe *r, int x, const int64_t *chw, int classes,
                    int training)
{
    int64_t width = r->model.hidden, channels = width;
    int block = 0;
    if (g->layout == TR_NHWC) {   /* the data's [N, C, H, W] images channels last */
        struct tr_dim d[4] = {g->values[x].shape.dim[0], tr_dim_const(chw[1]), tr_dim_const(chw[2]), tr_dim_const(chw[0])};
        x = chw[0] == 1 ? tr_reshape(g, x, 4, d) : tr_permute(g, x, (const int[]){0, 2, 3, 1});
    }
    x = tr_relu(g, batchnorm(g, "stem.bn", conv(g, "stem.conv", x, chw[0], width, 3, 1), width, training));
    for (int stage = 0; stage < 3; stage++) {
        int64_t out = width << stage;
        for (int64_t b = 0; b < r->model.layers; b++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "stage%d.%lld", stage + 1, (long long)b);
            tr_graph_block(g, block++);
            x = basic_block(g, prefix, x, channels, out, stage > 0 && b == 0 ? 2 : 1, training);
            channels = out;
        }
    }
    tr_graph_block(g, -1);
    return tr_model_linear(g, "head", tr_global_avgpool(g, x), channels, classes);
}
