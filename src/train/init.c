/* A run's first weights (init.h): drawn, or read from a safetensors file by name with the
 * allowances real checkpoints need. Hugging Face's own loader (modeling_utils.py,
 * _load_state_dict_into_model) is the reference for what a user expects to load: it strips or
 * adds the base model's prefix, renames gamma/beta, drops unexpected keys and initialises the
 * missing head. */
#include "train/init.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/safetensors.h"

#define INIT_STREAM 0x1417u   /* the dropout streams are small numbers; initialisation has its own */

/* Tensors of a checkpoint that trainrun's models hold only once: the file's copy must equal the
 * parameter it is tied to, or the checkpoint is of another (untied) model. */
static const struct { const char *file_name, *param; } tied[] = {
    {"lm_head.weight", "transformer.wte.weight"},   /* GPT2LMHeadModel's head is wte */
};

static int is_weight(const struct tr_value *val)
{
    return val->kind == TR_PARAM || val->kind == TR_STATE;
}

static int64_t numel(const struct tr_value *val)
{
    return tr_dim_eval(tr_shape_numel(&val->shape), 1, 1);
}

/* ---- drawn ------------------------------------------------------------------------------------ */

/* The whole value (tensor parallel: its whole shape), keyed by its number in the one-device graph. */
static void init_value(const struct tr_init_target *t, int v, float *data)
{
    const struct tr_value *val = &t->g->values[v];
    struct tr_shape whole = tr_value_whole_shape(t->g, v);
    int64_t n = tr_dim_eval(tr_shape_numel(&whole), 1, 1);
    uint64_t key = (uint64_t)val->init_key;
    for (int64_t i = 0; i < n; i++) {
        float u = tr_rng_uniform(t->seed, 0, key, (uint32_t)(i >> 32), (uint32_t)i, INIT_STREAM);
        switch (val->init) {
        case TR_INIT_ONE:     data[i] = 1; break;
        case TR_INIT_UNIFORM: data[i] = (2 * u - 1) * val->init_scale; break;
        case TR_INIT_NORMAL: {   /* Box–Muller from a second, independent uniform */
            float u2 = tr_rng_uniform(t->seed, 0, key, (uint32_t)(i >> 32) | 0x80000000u, (uint32_t)i,
                                      INIT_STREAM);
            data[i] = val->init_scale * sqrtf(-2 * logf(1 - u)) * cosf(6.2831853f * u2);
            break;
        }
        default:              data[i] = 0;
        }
    }
}

int tr_init_random(const struct tr_init_target *t, struct tr_diag *d)
{
    for (int v = 0; v < t->g->nvalues; v++) {   /* a pipeline stage: the weights it holds */
        if (!is_weight(&t->g->values[v]) || !tr_exec_host(t->x, v))
            continue;
        if (t->g->values[v].split_axis < 0) {
            init_value(t, v, tr_exec_host(t->x, v));
            continue;
        }
        /* tensor parallel: the whole weight drawn, this rank's slice kept — the one device's values */
        float *whole = tr_xmalloc((size_t)tr_dim_eval(tr_shape_numel(&t->g->values[v].shape), 1, 1) *
                                  (size_t)t->g->tensor * sizeof *whole);
        init_value(t, v, whole);
        tr_value_slice(t->g, v, t->g->tensor_rank, whole, tr_exec_host(t->x, v), sizeof *whole, true);
        free(whole);
    }
    return tr_exec_push(t->x, TR_PARAM, d);
}

/* ---- read ------------------------------------------------------------------------------------- */

struct load {
    const struct tr_init_target *t;
    const char *path;
    struct tr_safetensors st;
    char *used;                 /* per file tensor: read into the model */
    struct tr_init_info *info;
    struct tr_diag *d;
};

/* A problem with the file: "PATH: …". */
__attribute__((format(printf, 2, 3)))
static int fail(struct load *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *what = tr_xmalloc(n > 0 ? (size_t)n + 1 : 1);
    va_start(ap, fmt);
    vsnprintf(what, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
    va_end(ap);
    tr_fail(l->d, TR_EINVAL, "%s: %s", l->path, what);
    free(what);
    return TR_EINVAL;
}

/* The base model's prefix ("bert.", "transformer."): the first name component that every
 * parameter and state value has, but for those of at most one other component, fewer, which
 * are the task head ("classifier."). "" when there is none: mlp (fc0., fc1., head.) and
 * resnet name their layers side by side. */
static void base_prefix(const struct tr_graph *g, char *out, size_t size)
{
    struct part { const char *name; int len, count; } part[2];
    int parts = 0;
    out[0] = '\0';
    for (int v = 0; v < g->nvalues; v++) {
        if (!is_weight(&g->values[v]))
            continue;
        const char *name = g->values[v].name, *dot = strchr(name, '.');
        int len = dot ? (int)(dot - name) + 1 : 0, i = 0;
        while (i < parts && (part[i].len != len || strncmp(part[i].name, name, (size_t)len)))
            i++;
        if (!len || (i == parts && parts == 2))
            return;   /* a name without a component, or a third component */
        if (i == parts)
            part[parts++] = (struct part){name, len, 0};
        part[i].count++;
    }
    int base = parts == 2 && part[1].count > part[0].count;
    if (parts && (parts == 1 || part[base].count > part[!base].count) && part[base].len < (int)size)
        snprintf(out, size, "%.*s", part[base].len, part[base].name);
}

static int in_base(const char *name, const char *base)
{
    return *base && !strncmp(name, base, strlen(base));
}

/* name, or its old LayerNorm alias (x.weight → x.gamma, x.bias → x.beta), in the file;
 * *aliased when found by the alias. */
static const struct tr_st_tensor *find_aliased(const struct tr_safetensors *st, const char *name, int *aliased)
{
    const struct tr_st_tensor *hit = tr_st_find(st, name);
    if (hit)
        return hit;
    size_t n = strlen(name);
    static const struct { const char *ours, *old; } alias[] = {{".weight", ".gamma"}, {".bias", ".beta"}};
    for (size_t i = 0; i < sizeof alias / sizeof *alias; i++) {
        size_t k = strlen(alias[i].ours);
        char other[sizeof ((struct tr_value *)0)->name + 8];
        if (n < k || strcmp(name + n - k, alias[i].ours) || n - k + strlen(alias[i].old) >= sizeof other)
            continue;
        snprintf(other, sizeof other, "%.*s%s", (int)(n - k), name, alias[i].old);
        if ((hit = tr_st_find(st, other))) {
            *aliased = 1;
            return hit;
        }
    }
    return NULL;
}

/* A parameter's tensor in the file: by its name, else without the base prefix (*unprefixed). */
static const struct tr_st_tensor *find(const struct load *l, const char *name, int *aliased, int *unprefixed)
{
    *aliased = *unprefixed = 0;
    const struct tr_st_tensor *hit = find_aliased(&l->st, name, aliased);
    if (!hit && in_base(name, l->info->base)) {
        hit = find_aliased(&l->st, name + strlen(l->info->base), aliased);
        *unprefixed = hit != NULL;
    }
    return hit;
}

/* The file tensor's shape is value v's (whole); dims gets its (constant) sizes. */
static int same_shape(const struct tr_graph *g, int v, const struct tr_st_tensor *t, int64_t *dims)
{
    struct tr_shape whole = tr_value_whole_shape(g, v);   /* tensor parallel: the file's is the whole */
    int same = t->rank == whole.rank;
    for (int i = 0; i < whole.rank; i++) {
        dims[i] = tr_dim_eval(whole.dim[i], 1, 1);
        same = same && t->shape[i] == dims[i];
    }
    return same;
}

/* A shape that differs: the sentence, with what it means when it is the vocabulary or the
 * position table (their first dimension is the tokenizer's size or model.max_len). */
static int shape_error(struct load *l, const char *name, const struct tr_st_tensor *t, const int64_t *dims,
                       int rank)
{
    char theirs[160], ours[160], why[512] = "";
    struct tr_shape file = {.rank = t->rank}, model = {.rank = rank};
    for (int i = 0; i < t->rank; i++)
        file.dim[i] = tr_dim_const(t->shape[i]);
    for (int i = 0; i < rank; i++)
        model.dim[i] = tr_dim_const(dims[i]);
    tr_shape_format(&file, theirs, sizeof theirs);
    tr_shape_format(&model, ours, sizeof ours);
    const struct tr_init_target *m = l->t;
    if (rank == 2 && t->rank == 2 && t->shape[1] == dims[1] && t->shape[0] != dims[0]) {
        if (m->vocab && dims[0] == m->vocab)
            snprintf(why, sizeof why, ": the checkpoint's vocabulary has %lld tokens, the tokenizer's (%s) %lld; "
                     "use the vocabulary the checkpoint was trained with", (long long)t->shape[0],
                     m->vocab_file ? m->vocab_file : "data.tokenizer", (long long)m->vocab);
        else if (m->max_len && dims[0] == m->max_len)
            snprintf(why, sizeof why, ": the checkpoint has %lld positions, model.max_len is %lld; set model.max_len "
                     "to %lld", (long long)t->shape[0], (long long)m->max_len, (long long)t->shape[0]);
    }
    if (strcmp(t->name, name))
        return fail(l, "tensor '%s' (the model's %s) is %s, the model's is %s%s", t->name, name, theirs, ours, why);
    return fail(l, "tensor '%s' is %s, the model's is %s%s", name, theirs, ours, why);
}

/* The tensor's n elements as f32 into out; data may be unaligned (memcpy per element). */
static int to_f32(const struct tr_st_tensor *t, float *out, int64_t n)
{
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case TR_F32:
        memcpy(out, p, (size_t)n * sizeof(float));
        return 0;
    case TR_F16:
        if ((uintptr_t)p % sizeof(uint16_t) == 0) {
            tr_f16_widen((const uint16_t *)t->data, out, n);
            return 0;
        }
        __attribute__((fallthrough));   /* unaligned F16: element by element, as BF16 */
    case TR_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == TR_F16 ? tr_f16_to_f32(h) : tr_bf16_to_f32(h);
        }
        return 0;
    case TR_F64:
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
        }
        return 0;
    case TR_I32: case TR_U8: case TR_NDTYPES:
    default:
        return -1;
    }
}

static int dtype_error(struct load *l, const struct tr_st_tensor *t)
{
    return fail(l, "tensor '%s' is %s; model.init reads F32, F16, BF16 and F64 weights", t->name,
                t->dtype == TR_ST_OTHER ? t->other_dtype : tr_st_dtype_name(t->dtype));
}

static int out_of_memory(struct load *l)
{
    return tr_fail(l->d, TR_ENOMEM, "%s: out of memory", l->path);
}

/* One parameter or state value from the file; *missing when the file has none. */
static int load_value(struct load *l, int v, int *missing)
{
    const struct tr_value *val = &l->t->g->values[v];
    int aliased, unprefixed;
    const struct tr_st_tensor *t = find(l, val->name, &aliased, &unprefixed);
    *missing = t == NULL;
    if (!t)
        return 0;
    int64_t dims[TR_MAX_RANK];
    if (!same_shape(l->t->g, v, t, dims))
        return shape_error(l, val->name, t, dims, val->shape.rank);
    int T = val->split_axis >= 0 ? l->t->g->tensor : 1;   /* tensor parallel: this rank's slice */
    float *whole = T > 1 ? malloc((size_t)numel(val) * (size_t)T * sizeof *whole) : tr_exec_host(l->t->x, v);
    if (!whole)
        return out_of_memory(l);
    int bad = to_f32(t, whole, numel(val) * T);
    if (T > 1 && !bad)
        tr_value_slice(l->t->g, v, l->t->g->tensor_rank, whole, tr_exec_host(l->t->x, v), sizeof *whole, true);
    if (T > 1)
        free(whole);
    if (bad)
        return dtype_error(l, t);
    l->used[t - l->st.tensors] = 1;
    l->info->loaded++;
    l->info->converted += t->dtype != TR_F32;
    l->info->aliased += aliased;
    l->info->unprefixed += unprefixed;
    return 0;
}

/* The model's values the file lacks: drawn when they are exactly the task head, else an error
 * naming the first. */
static int settle_missing(struct load *l, const int *missing, int nmissing)
{
    const struct tr_graph *g = l->t->g;
    const char *base = l->info->base;
    int head = 0, first_base = -1;
    for (int v = 0; v < g->nvalues; v++)
        if (is_weight(&g->values[v]) && *base && !in_base(g->values[v].name, base))
            head++;
    for (int i = 0; i < nmissing && first_base < 0; i++)
        if (!*base || in_base(g->values[missing[i]].name, base))
            first_base = missing[i];
    if (!l->info->loaded)
        return fail(l, "none of the model's %d tensors is in it (it has %d, the first '%s'); is it a checkpoint of "
                    "another model?", nmissing, l->st.n, l->st.n ? l->st.tensors[0].name : "");
    if (first_base >= 0 || nmissing != head) {
        int first = first_base >= 0 ? first_base : missing[0];
        if (nmissing > 1)
            return fail(l, "no tensor '%s', and %d more of the model's are missing", g->values[first].name,
                        nmissing - 1);
        return fail(l, "no tensor '%s'", g->values[first].name);
    }
    const char *name = g->values[missing[0]].name, *dot = strchr(name, '.');
    snprintf(l->info->fresh_head, sizeof l->info->fresh_head, "%.*s", dot ? (int)(dot - name) + 1 : (int)strlen(name),
             name);
    for (int i = 0; i < nmissing; i++)
        init_value(l->t, missing[i], tr_exec_host(l->t->x, missing[i]));
    l->info->fresh = nmissing;
    return 0;
}

/* A tied tensor the file holds must equal the parameter (already loaded) it is tied to. */
static int check_tied(struct load *l)
{
    const struct tr_graph *g = l->t->g;
    for (size_t i = 0; i < sizeof tied / sizeof *tied; i++) {
        const struct tr_st_tensor *t = tr_st_find(&l->st, tied[i].file_name);
        int v = 0;
        while (v < g->nvalues && (!is_weight(&g->values[v]) || strcmp(g->values[v].name, tied[i].param)))
            v++;
        if (!t || v == g->nvalues || l->used[t - l->st.tensors])
            continue;
        int64_t n = numel(&g->values[v]), dims[TR_MAX_RANK];
        if (!same_shape(g, v, t, dims))
            return shape_error(l, tied[i].param, t, dims, g->values[v].shape.rank);
        float *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
        if (!copy)
            return out_of_memory(l);
        int bad = to_f32(t, copy, n);
        int differs = !bad && memcmp(copy, tr_exec_host(l->t->x, v), (size_t)n * sizeof *copy);
        free(copy);
        if (bad)
            return dtype_error(l, t);
        if (differs)
            return fail(l, "tensor '%s' differs from '%s': the checkpoint's output layer is not tied to its token "
                        "embedding, and trainrun's is", t->name, tied[i].param);
        l->used[t - l->st.tensors] = 1;
    }
    return 0;
}

static void count_ignored(struct load *l)
{
    for (int i = 0; i < l->st.n; i++)
        if (!l->used[i]) {
            if (l->info->ignored < 3)
                snprintf(l->info->ignored_names[l->info->ignored], sizeof l->info->ignored_names[0], "%s",
                         l->st.tensors[i].name);
            l->info->ignored++;
        }
}

int tr_init_load(const struct tr_init_target *t, const char *path, struct tr_init_info *info,
                 struct tr_diag *d)
{
    struct load l = {.t = t, .path = path, .info = info, .d = d};
    memset(info, 0, sizeof *info);
    int rc = tr_st_open_with(&l.st, path, TR_ST_ANY_DTYPE, d);
    if (rc)
        return rc;
    int *missing = malloc((size_t)(t->g->nvalues ? t->g->nvalues : 1) * sizeof *missing), nmissing = 0;
    l.used = calloc((size_t)(l.st.n ? l.st.n : 1), 1);
    if (!missing || !l.used)
        rc = out_of_memory(&l);
    base_prefix(t->g, info->base, sizeof info->base);
    for (int v = 0; v < t->g->nvalues && !rc; v++) {
        int absent;
        if (is_weight(&t->g->values[v]) && tr_exec_host(t->x, v) && !(rc = load_value(&l, v, &absent)) && absent)
            missing[nmissing++] = v;
    }
    if (!rc && nmissing)
        rc = settle_missing(&l, missing, nmissing);
    if (!rc)
        rc = check_tied(&l);
    if (!rc)
        count_ignored(&l);
    struct tr_diag why = {0};
    if (!rc && tr_exec_push(t->x, TR_PARAM, &why))
        rc = tr_fail(d, TR_EINVAL, "%s: %s", path, tr_diag_last(&why));
    tr_diag_free(&why);
    free(missing);
    free(l.used);
    tr_st_close(&l.st);
    return rc;
}

void tr_init_summary(const struct tr_init_info *info, const char *path, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "model.init: %d tensors from %s", info->loaded, path);
    if (n < size && info->converted)
        n += (size_t)snprintf(out + n, size - n, ", %d converted to f32", info->converted);
    if (n < size && info->unprefixed)
        n += (size_t)snprintf(out + n, size - n, ", %d named without \"%s\" (a base model's checkpoint)",
                              info->unprefixed, info->base);
    if (n < size && info->aliased)
        n += (size_t)snprintf(out + n, size - n, ", %d under the old names gamma/beta", info->aliased);
    if (n < size && info->ignored) {
        n += (size_t)snprintf(out + n, size - n, "; %d of its tensors ignored (", info->ignored);
        for (int i = 0; i < info->ignored && i < 3 && n < size; i++)
            n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ", " : "", info->ignored_names[i]);
        if (n < size)
            n += (size_t)snprintf(out + n, size - n, "%s)", info->ignored > 3 ? ", …" : "");
    }
    if (n < size)
        n += (size_t)snprintf(out + n, size - n, "\n");
    if (n < size && info->fresh)
        snprintf(out + n, size - n, "model.init: %s has no task head; %s* (%d tensors) initialised as without "
                 "model.init\n", path, info->fresh_head, info->fresh);
}
