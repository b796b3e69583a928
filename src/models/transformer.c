/* Shared transformer pieces (transformer.h). */
#include "models/transformer.h"

#include <stdio.h>

int tr_tf_param(struct tr_graph *g, int rank, const int64_t *dims, float std, int no_decay, const char *fmt, ...)
{
    char name[sizeof g->values[0].name];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    struct tr_dim d[TR_MAX_RANK];
    for (int i = 0; i < rank; i++)
        d[i] = tr_dim_const(dims[i]);
    int p = tr_param(g, name, TR_F32, rank, d);
    tr_param_init(g, p, std > 0 ? TR_INIT_NORMAL : std < 0 ? TR_INIT_ONE : TR_INIT_ZERO, std > 0 ? std : 0,
                  no_decay);
    return p;
}

int tr_tf_linear(struct tr_graph *g, int x, int64_t in, int64_t out, float std, const char *prefix)
{
    return tr_tf_project(g, x, in, out, std, prefix, false, TR_TF_WHOLE, 1);
}

int tr_tf_project(struct tr_graph *g, int x, int64_t in, int64_t out, float std, const char *prefix, bool conv1d,
                  enum tr_tf_split how, int parts)
{
    int64_t T = how == TR_TF_WHOLE ? 1 : g->tensor;
    int64_t i = how == TR_TF_ROWS ? in / T : in, o = how == TR_TF_COLUMNS ? out / T : out;
    int w = tr_tf_param(g, 2, conv1d ? (int64_t[]){i, o} : (int64_t[]){o, i}, std, 0, "%s.weight", prefix);
    int b = tr_tf_param(g, 1, &o, 0, 1, "%s.bias", prefix);
    if (how == TR_TF_COLUMNS) {   /* its outputs: the weight's out axis, and the bias */
        tr_param_split(g, w, conv1d ? 1 : 0, parts);
        tr_param_split(g, b, 0, parts);
    } else if (how == TR_TF_ROWS) {   /* its inputs: the weight's in axis; the bias whole */
        tr_param_split(g, w, conv1d ? 0 : 1, 1);
    }
    int y = tr_matmul(g, x, w, 0, !conv1d);
    if (how == TR_TF_ROWS && T > 1)   /* sequence parallel: each rank its part of the sum */
        y = g->sequence ? tr_seq_scatter(g, y) : tr_allreduce(g, y);
    return tr_bias_add(g, y, b);
}

int tr_tf_tensor_in(struct tr_graph *g, int x)
{
    if (g->tensor < 2)
        return x;
    return g->sequence ? tr_seq_gather(g, x, true) : tr_tensor_in(g, x);
}

int tr_tf_sequence_in(struct tr_graph *g, int x)
{
    return g->tensor > 1 && g->sequence ? tr_seq_slice(g, x) : x;
}

int tr_tf_sequence_out(struct tr_graph *g, int x)
{
    return g->tensor > 1 && g->sequence ? tr_seq_gather(g, x, false) : x;
}

int tr_tf_check_split(struct tr_graph *g, const struct tr_recipe *r)
{
    int64_t T = g->tensor;
    if (r->model.heads <= 0 || r->model.hidden % r->model.heads)
        return snprintf(g->message, sizeof g->message, "model.hidden %lld is not a multiple of model.heads %lld",
                        (long long)r->model.hidden, (long long)r->model.heads), g->error = -1;
    if (r->model.heads % T || r->model.ffn % T)
        return snprintf(g->message, sizeof g->message, "optimize.parallel.tensor %lld does not divide model.heads "
                        "%lld and model.ffn %lld: each tensor rank takes whole heads and an equal part of the "
                        "feed-forward", (long long)T, (long long)r->model.heads, (long long)r->model.ffn),
               g->error = -1;
    return 0;
}

int tr_tf_layernorm(struct tr_graph *g, int x, int64_t D, float eps, const char *prefix)
{
    int w = tr_tf_param(g, 1, &D, -1, 1, "%s.weight", prefix);
    int b = tr_tf_param(g, 1, &D, 0, 1, "%s.bias", prefix);
    return tr_layernorm(g, x, w, b, eps);
}

int tr_tf_heads(struct tr_graph *g, int x, int64_t H, int64_t Dh)
{
    int r = tr_reshape(g, x, 4, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(H), tr_dim_const(Dh)});
    return tr_permute(g, r, (int[]){0, 2, 1, 3});
}

int tr_tf_merge(struct tr_graph *g, int x, int64_t D)
{
    int o = tr_permute(g, x, (int[]){0, 2, 1, 3});
    return tr_reshape(g, o, 3, (struct tr_dim[]){tr_dim_B(1), tr_dim_S(1), tr_dim_const(D)});
}

int tr_tf_dropout(struct tr_graph *g, int x, float p, uint32_t stream)
{
    return p > 0 ? tr_dropout(g, x, p, stream) : x;
}

int tr_tf_gelu(struct tr_graph *g, const struct tr_recipe *r, int x, int tanh_default)
{
    switch (r->model.activation) {
    case TR_ACT_RELU:      return tr_relu(g, x);
    case TR_ACT_TANH:      return tr_tanh(g, x);
    case TR_ACT_GELU:      return tr_gelu(g, x, 0);
    case TR_ACT_GELU_TANH: return tr_gelu(g, x, 1);
    default:               return tr_gelu(g, x, tanh_default);   /* auto: BERT erf, GPT-2 tanh */
    }
}
