/* GPT-2 generation with a key/value cache, and the sampler (gpt_decode.h). The maths is gpt.c's
 * block, row by row: what the training graph does for a whole window at once, done here for
 * the new positions only, the earlier ones' keys and values read back from the cache. */
#include "models/gpt_decode.h"

#include "core/blas.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define EPS 1e-5f   /* GPT2Config.layer_norm_epsilon, as gpt.c */

/* ---- the weights --------------------------------------------------------------------------- */

/* The tensor prefix + name, F32 of exactly the dims given, or NULL with the sentence in diag.
 * Aligned data is used in place; data the file left unaligned (safetensors.h) is copied once. */
static const float *weight(struct tr_gpt_decoder *d, const struct tr_safetensors *st, const char *prefix,
                           const char *name, int rank, const int64_t *dims, struct tr_diag *diag)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const struct tr_st_tensor *t = tr_st_find(st, full);
    if (!t) {
        tr_fail(diag, TR_EINVAL, "%s is missing", full);
        return NULL;
    }
    int same = t->dtype == TR_F32 && t->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = t->shape[i] == dims[i];
    if (!same) {
        char want[96] = "", got[96] = "";
        for (int i = 0; i < rank; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "", (long long)dims[i]);
        for (int i = 0; i < t->rank; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        tr_fail(diag, TR_EINVAL, "%s is %s [%s]; the recipe's model needs F32 [%s]", full,
                tr_st_dtype_name(t->dtype), got, want);
        return NULL;
    }
    if ((uintptr_t)t->data % sizeof(float) == 0)
        return t->data;
    void *copy = tr_xmalloc(t->bytes);
    memcpy(copy, t->data, t->bytes);
    d->copies[d->ncopies++] = copy;
    return copy;
}

static int block_weights(struct tr_gpt_decoder *d, const struct tr_safetensors *st, const char *prefix, int layer,
                         struct tr_diag *diag)
{
    int64_t D = d->hidden, F = d->ffn;
    struct tr_gpt_block_weights *w = &d->block[layer];
    struct { const float **to; const char *name; int rank; int64_t dims[2]; } want[] = {
        {&w->ln_1_w, "ln_1.weight", 1, {D}},         {&w->ln_1_b, "ln_1.bias", 1, {D}},
        {&w->attn_w, "attn.c_attn.weight", 2, {D, 3 * D}}, {&w->attn_b, "attn.c_attn.bias", 1, {3 * D}},
        {&w->attn_proj_w, "attn.c_proj.weight", 2, {D, D}}, {&w->attn_proj_b, "attn.c_proj.bias", 1, {D}},
        {&w->ln_2_w, "ln_2.weight", 1, {D}},         {&w->ln_2_b, "ln_2.bias", 1, {D}},
        {&w->fc_w, "mlp.c_fc.weight", 2, {D, F}},    {&w->fc_b, "mlp.c_fc.bias", 1, {F}},
        {&w->mlp_proj_w, "mlp.c_proj.weight", 2, {F, D}}, {&w->mlp_proj_b, "mlp.c_proj.bias", 1, {D}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "transformer.h.%d.%s", layer, want[i].name);
        if (!(*want[i].to = weight(d, st, prefix, name, want[i].rank, want[i].dims, diag)))
            return TR_EINVAL;
    }
    return 0;
}

/* The working rows, max_len of each, and the cache: two allocations, nothing later. */
static int allocate(struct tr_gpt_decoder *d, struct tr_diag *diag)
{
    int64_t P = d->max_len, D = d->hidden;
    size_t rows = (size_t)(P * D * 3 + P * 3 * D + P * d->ffn + P * P + d->vocab);
    size_t cache = (size_t)(2 * d->layers * P * D);
    d->work = calloc(rows, sizeof(float));
    d->cache = calloc(cache, sizeof(float));
    if (!d->work || !d->cache)
        return tr_fail(diag, TR_ENOMEM, "out of memory: generation needs %.1f MiB for a context of %lld tokens",
                       (double)(rows + cache) * sizeof(float) / 1048576.0, (long long)P);
    float *at = d->work;
    d->x = at, at += P * D;
    d->normed = at, at += P * D;
    d->attn = at, at += P * D;
    d->qkv = at, at += P * 3 * D;
    d->hidden_ffn = at, at += P * d->ffn;
    d->scores = at, at += P * P;
    d->logits = at;
    d->keys = d->cache;
    d->values = d->cache + d->layers * P * D;
    return 0;
}

int tr_gpt_decoder_init(struct tr_gpt_decoder *d, const struct tr_recipe *r, const struct tr_safetensors *st,
                        const char *prefix, struct tr_diag *diag)
{
    *d = (struct tr_gpt_decoder){.layers = r->model.layers, .hidden = r->model.hidden, .heads = r->model.heads,
                                 .ffn = r->model.ffn, .max_len = r->model.max_len,
                                 .activation = r->model.activation};
    if (d->layers < 0 || d->hidden <= 0 || d->heads <= 0 || d->hidden % d->heads || d->ffn <= 0 ||
        d->max_len <= 0)
        return tr_fail(diag, TR_EINVAL, "the recipe's model is not a GPT this can run (hidden %lld, heads %lld, "
                       "ffn %lld, max_len %lld)", (long long)d->hidden, (long long)d->heads, (long long)d->ffn,
                       (long long)d->max_len);
    char name[256];
    snprintf(name, sizeof name, "%stransformer.wte.weight", prefix);
    const struct tr_st_tensor *wte = tr_st_find(st, name);
    d->vocab = wte && wte->rank >= 1 ? wte->shape[0] : 1;   /* checked with the rest below */
    d->block = tr_xcalloc((size_t)d->layers + 1, sizeof *d->block);
    d->copies = tr_xcalloc((size_t)(12 * d->layers + 4), sizeof *d->copies);
    int64_t D = d->hidden;
    if (!(d->wte = weight(d, st, prefix, "transformer.wte.weight", 2, (int64_t[]){d->vocab, D}, diag)) ||
        !(d->wpe = weight(d, st, prefix, "transformer.wpe.weight", 2, (int64_t[]){d->max_len, D}, diag)) ||
        !(d->ln_f_w = weight(d, st, prefix, "transformer.ln_f.weight", 1, &D, diag)) ||
        !(d->ln_f_b = weight(d, st, prefix, "transformer.ln_f.bias", 1, &D, diag)))
        return tr_gpt_decoder_free(d), TR_EINVAL;
    for (int layer = 0; layer < d->layers; layer++)
        if (block_weights(d, st, prefix, layer, diag))
            return tr_gpt_decoder_free(d), TR_EINVAL;
    int rc = allocate(d, diag);
    if (rc)
        tr_gpt_decoder_free(d);
    return rc;
}

void tr_gpt_decoder_reset(struct tr_gpt_decoder *d)
{
    d->t = 0;
}

void tr_gpt_decoder_free(struct tr_gpt_decoder *d)
{
    for (int i = 0; i < d->ncopies; i++)
        free(d->copies[i]);
    free(d->copies);
    free(d->block);
    free(d->work);
    free(d->cache);
    *d = (struct tr_gpt_decoder){0};
}

/* ---- one pass ------------------------------------------------------------------------------ */

/* mean = Σx/D; var = Σ(x − mean)²/D; y = (x − mean)/√(var + eps)·w + b: the CPU kernel's two
 * passes in the same order (layernorm.inc), so the two agree to the last bits or nearly. */
static void layernorm(const float *x, const float *w, const float *b, int64_t rows, int64_t D, float *y)
{
    for (int64_t r = 0; r < rows; r++, x += D, y += D) {
        float sum = 0, squares = 0;
        for (int64_t c = 0; c < D; c++)
            sum += x[c];
        float mean = sum / (float)D;
        for (int64_t c = 0; c < D; c++)
            squares += (x[c] - mean) * (x[c] - mean);
        float rstd = 1 / sqrtf(squares / (float)D + EPS);
        for (int64_t c = 0; c < D; c++)
            y[c] = (x[c] - mean) * rstd * w[c] + b[c];
    }
}

/* GPT-2's Conv1D: y[n, out] = x[n, in]·W[in, out] + b. y starts as b and the product is added
 * (beta 1): OpenBLAS's beta = 0 has not always cleared NaNs already in y (attention.inc). */
static void conv1d(const float *x, int64_t n, int64_t in, const float *w, const float *b, int64_t out, float *y)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(y + i * out, b, (size_t)out * sizeof *y);
    tr_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)out, (int)in, 1, x, (int)in, w, (int)out,
                1, y, (int)out);
}

/* The feed-forward's nonlinearity as tr_tf_gelu picks it: model.activation, auto being GPT-2's
 * tanh form ½x(1 + tanh(√(2/π)(x + 0.044715x³))). */
static void activate(int activation, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        switch (activation) {
        case TR_ACT_RELU: x[i] = v > 0 ? v : 0; break;
        case TR_ACT_TANH: x[i] = tanhf(v); break;
        case TR_ACT_GELU: x[i] = 0.5f * v * (1 + erff(v * 0.7071067811865476f)); break;
        default:          x[i] = 0.5f * v * (1 + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); break;
        }
    }
}

/* Causal attention of the n new rows of qkv (positions t0 … t0 + n − 1) over the cached keys
 * and values 0 … t0 + n − 1, per head h:  S = q_h·K_hᵀ/√Dh (row i sees keys j ≤ t0 + i),
 * softmax by rows, attn_h = S·V_h. The new keys and values go into the cache first. */
static void attend(struct tr_gpt_decoder *d, int layer, int64_t t0, int64_t n)
{
    int64_t D = d->hidden, H = d->heads, Dh = D / H, P = d->max_len, T = t0 + n;
    float scale = 1 / sqrtf((float)Dh);
    for (int64_t h = 0; h < H; h++) {
        float *K = d->keys + ((int64_t)layer * H + h) * P * Dh, *V = d->values + ((int64_t)layer * H + h) * P * Dh;
        for (int64_t i = 0; i < n; i++) {
            memcpy(K + (t0 + i) * Dh, d->qkv + i * 3 * D + D + h * Dh, (size_t)Dh * sizeof(float));
            memcpy(V + (t0 + i) * Dh, d->qkv + i * 3 * D + 2 * D + h * Dh, (size_t)Dh * sizeof(float));
        }
        memset(d->scores, 0, (size_t)(n * T) * sizeof(float));
        tr_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)T, (int)Dh, scale, d->qkv + h * Dh,
                    (int)(3 * D), K, (int)Dh, 1, d->scores, (int)T);
        for (int64_t i = 0; i < n; i++) {
            float *s = d->scores + i * T, max = -INFINITY, sum = 0;
            int64_t seen = t0 + i + 1;
            for (int64_t j = 0; j < seen; j++)
                max = s[j] > max ? s[j] : max;
            for (int64_t j = 0; j < seen; j++)
                sum += s[j] = expf(s[j] - max);
            for (int64_t j = 0; j < seen; j++)
                s[j] /= sum;
            for (int64_t j = seen; j < T; j++)
                s[j] = 0;
        }
        for (int64_t i = 0; i < n; i++)
            memset(d->attn + i * D + h * Dh, 0, (size_t)Dh * sizeof(float));
        tr_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)Dh, (int)T, 1, d->scores, (int)T, V,
                    (int)Dh, 1, d->attn + h * Dh, (int)D);
    }
}

static void add_rows(float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* One pre-LN block on the n rows of d->x: x += attn(ln_1(x)); x += mlp(ln_2(x)). */
static void block(struct tr_gpt_decoder *d, int layer, int64_t t0, int64_t n)
{
    const struct tr_gpt_block_weights *w = &d->block[layer];
    int64_t D = d->hidden, F = d->ffn;
    layernorm(d->x, w->ln_1_w, w->ln_1_b, n, D, d->normed);
    conv1d(d->normed, n, D, w->attn_w, w->attn_b, 3 * D, d->qkv);
    attend(d, layer, t0, n);
    conv1d(d->attn, n, D, w->attn_proj_w, w->attn_proj_b, D, d->normed);
    add_rows(d->x, d->normed, n * D);
    layernorm(d->x, w->ln_2_w, w->ln_2_b, n, D, d->normed);
    conv1d(d->normed, n, D, w->fc_w, w->fc_b, F, d->hidden_ffn);
    activate(d->activation, d->hidden_ffn, n * F);
    conv1d(d->hidden_ffn, n, F, w->mlp_proj_w, w->mlp_proj_b, D, d->normed);
    add_rows(d->x, d->normed, n * D);
}

int tr_gpt_decoder_feed(struct tr_gpt_decoder *d, const int32_t *ids, int64_t n, struct tr_diag *diag)
{
    int64_t D = d->hidden, t0 = d->t;
    if (n <= 0 || t0 + n > d->max_len)
        return tr_fail(diag, TR_EINVAL, "%lld tokens after %lld do not fit the context of %lld", (long long)n,
                       (long long)t0, (long long)d->max_len);
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= d->vocab)
            return tr_fail(diag, TR_EINVAL, "token id %d is outside the model's vocabulary of %lld", (int)ids[i],
                           (long long)d->vocab);
        for (int64_t c = 0; c < D; c++)   /* x = wte[id] + wpe[position] */
            d->x[i * D + c] = d->wte[(int64_t)ids[i] * D + c] + d->wpe[(t0 + i) * D + c];
    }
    for (int layer = 0; layer < d->layers; layer++)
        block(d, layer, t0, n);
    d->t = t0 + n;
    /* Only the last row's logits are wanted: ln_f on it, then the tied head, logits = wte·x. */
    layernorm(d->x + (n - 1) * D, d->ln_f_w, d->ln_f_b, 1, D, d->normed);
    memset(d->logits, 0, (size_t)d->vocab * sizeof(float));
    tr_blas.sgemv(CblasRowMajor, CblasNoTrans, (int)d->vocab, (int)D, 1, d->wte, (int)D, d->normed, 1, 1, d->logits, 1);
    return 0;
}

/* ---- the sampler --------------------------------------------------------------------------- */

void tr_sampler_init(struct tr_sampler *s, int64_t vocab, double temperature, int64_t top_k, uint64_t seed)
{
    *s = (struct tr_sampler){.vocab = vocab, .top_k = top_k > 0 && top_k < vocab ? top_k : vocab,
                             .temperature = temperature, .seed = seed};
    s->candidates = tr_xcalloc((size_t)vocab, sizeof *s->candidates);
}

void tr_sampler_free(struct tr_sampler *s)
{
    free(s->candidates);
    s->candidates = NULL;
}

/* a ranks below b: a smaller logit, or an equal one with a larger id. */
static int ranks_below(const struct tr_candidate *a, const struct tr_candidate *b)
{
    return a->logit < b->logit || (a->logit == b->logit && a->id > b->id);
}

/* Restores the min-heap (the lowest-ranked at the root) below slot i of c[0..k). */
static void sift_down(struct tr_candidate *c, int64_t k, int64_t i)
{
    for (;;) {
        int64_t low = i, l = 2 * i + 1, r = l + 1;
        if (l < k && ranks_below(&c[l], &c[low]))
            low = l;
        if (r < k && ranks_below(&c[r], &c[low]))
            low = r;
        if (low == i)
            return;
        struct tr_candidate swap = c[i];
        c[i] = c[low], c[low] = swap;
        i = low;
    }
}

static int by_id(const void *a, const void *b)
{
    return ((const struct tr_candidate *)a)->id - ((const struct tr_candidate *)b)->id;
}

/* The k best logits into c[0..k), by id: a heap of the best so far, O(V log k). */
static void top_k(const float *logits, int64_t V, int64_t k, struct tr_candidate *c)
{
    for (int64_t i = 0; i < k; i++)
        c[i] = (struct tr_candidate){logits[i], (int32_t)i, 0};
    if (k == V)
        return;
    for (int64_t i = k / 2; i-- > 0;)
        sift_down(c, k, i);
    for (int64_t i = k; i < V; i++) {
        struct tr_candidate next = {logits[i], (int32_t)i, 0};
        if (ranks_below(&c[0], &next)) {
            c[0] = next;
            sift_down(c, k, 0);
        }
    }
    qsort(c, (size_t)k, sizeof *c, by_id);   /* top_k = V and top_k = 0 then draw alike */
}

static int32_t argmax(const float *logits, int64_t V)
{
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

/* A uniform double in [0, 1) with 53 random bits: draw n of seed, counter (n, "samp"). */
static double uniform(uint64_t seed, uint64_t n)
{
    const uint32_t counter[4] = {(uint32_t)n, (uint32_t)(n >> 32), 0x73616d70u, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    struct tr_philox r = tr_philox4x32(counter, key);
    return (double)(((uint64_t)r.v[0] << 21) ^ (r.v[1] >> 11)) * 0x1p-53;
}

int32_t tr_sampler_next(struct tr_sampler *s, const float *logits)
{
    uint64_t n = s->draws++;
    if (s->temperature <= 0)
        return argmax(logits, s->vocab);
    int64_t k = s->top_k;
    top_k(logits, s->vocab, k, s->candidates);
    struct tr_candidate *c = s->candidates;
    float max = c[0].logit;
    for (int64_t i = 1; i < k; i++)
        max = c[i].logit > max ? c[i].logit : max;
    double total = 0;
    for (int64_t i = 0; i < k; i++)   /* softmax(logit / T), unnormalised */
        total += c[i].weight = exp(((double)c[i].logit - max) / s->temperature);
    double target = uniform(s->seed, n) * total, sum = 0;
    for (int64_t i = 0; i < k; i++) {
        sum += c[i].weight;
        if (target < sum)
            return c[i].id;
    }
    for (int64_t i = k; i-- > 0;)   /* rounding left target at the very top: the last possible one */
        if (c[i].weight > 0)
            return c[i].id;
    return c[0].id;
}
