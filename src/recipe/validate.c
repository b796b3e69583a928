/* Cross-field validation of a loaded recipe. Types and ranges of single keys were checked
 * while loading (value.c); here are the rules that need two or more keys. */
#include "recipe/validate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recipe/schema.h"

struct checker {
    const struct tr_recipe *r;
    struct tr_diag *diag;
};

static int key(const char *path)
{
    int k = tr_key_find(path);
    if (k < 0)
        abort();   /* a typo in this file: the tests load every rule */
    return k;
}

static bool explicit(const struct tr_recipe *r, const char *path)
{
    enum tr_origin_kind kind = r->origin[key(path)].kind;
    return kind != TR_ORIGIN_DEFAULT && kind != TR_ORIGIN_RESET && kind != TR_ORIGIN_DERIVED;
}

static bool is_null(const struct tr_recipe *r, const char *path)
{
    return r->is_null[key(path)];
}

/* Reports at the place the value of path was set: its file:line:col, or its override. */
static void fail(struct checker *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct checker *c, const char *path, const char *fmt, ...)
{
    const struct tr_origin *o = &c->r->origin[key(path)];
    struct tr_where w = {0};
    if (o->kind == TR_ORIGIN_OVERRIDE || o->kind == TR_ORIGIN_RESET)
        w.arg = o->file;
    else if (o->kind == TR_ORIGIN_DERIVED)
        w.file = c->r->recipe_file;   /* o->file is the reason, not a place */
    else if (o->file)
        w = (struct tr_where){.file = o->file, .line = o->line, .col = o->col};
    va_list ap;
    va_start(ap, fmt);
    tr_diag_vadd(c->diag, w, fmt, ap);
    va_end(ap);
}

static void check_name(struct checker *c)
{
    const char *name = c->r->name;
    if (!name) {
        fail(c, "name", "name: a recipe read without a file needs a name");
        return;
    }
    bool ok = strlen(name) <= 64 && name[0] != '.' && name[0] != '-';
    for (const char *p = name; *p && ok; p++)
        ok = isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-';
    if (!ok)
        fail(c, "name", "name '%s' is not usable as a folder name: use at most 64 letters, digits, "
             "'.', '_' or '-', not starting with '.' or '-'%s", name,
             c->r->origin[key("name")].kind == TR_ORIGIN_DERIVED ? " (it comes from the file name; set name:)" : "");
}

static void check_device(struct checker *c)
{
    const char *d = c->r->device;
    if (!strcmp(d, "auto") || !strcmp(d, "cpu") || !strcmp(d, "cuda"))
        return;
    if (!strncmp(d, "cuda:", 5) && d[5] && strlen(d + 5) <= 3 && strspn(d + 5, "0123456789") == strlen(d + 5))
        return;
    fail(c, "device", "device: expected auto, cpu, cuda or cuda:N (N a GPU index), got '%s'", d);
}

static void check_model(struct checker *c)
{
    const struct tr_recipe *r = c->r;
    bool transformer = r->model.arch == TR_ARCH_BERT || r->model.arch == TR_ARCH_GPT;
    if (transformer && r->model.hidden % r->model.heads)
        fail(c, explicit(r, "model.heads") ? "model.heads" : "model.hidden",
             "model.heads (%lld) must divide model.hidden (%lld)", (long long)r->model.heads,
             (long long)r->model.hidden);
    if (!is_null(r, "model.init.path") && r->model.init.from_run != TR_FROM_RUN_NONE)
        fail(c, "model.init.from_run", "model.init: give either a path or from_run, not both");
    if (transformer && r->data.tokenizer.kind == TR_TOK_NONE)
        fail(c, "model.arch", "model.arch %s reads text: set data.tokenizer to wordpiece, gpt2-bpe, "
             "bytes or chars", r->model.arch == TR_ARCH_BERT ? "bert" : "gpt");
}

static void check_source(struct checker *c, const char *split)
{
    static const char *const fields[] = {"sha256", "text", "label"};
    char path[64], other[64];
    snprintf(path, sizeof path, "data.%s.source", split);
    if (!is_null(c->r, path))
        return;
    for (int i = 0; i < 3; i++) {
        snprintf(other, sizeof other, "data.%s.%s", split, fields[i]);
        if (!is_null(c->r, other))
            fail(c, other, "%s is set but %s is not: name the file or URL to read", other, path);
    }
    const struct tr_source *s = !strcmp(split, "train") ? &c->r->data.train
                              : !strcmp(split, "valid") ? &c->r->data.valid : &c->r->data.test;
    snprintf(other, sizeof other, "data.%s.format", split);
    if (s->format != TR_FMT_AUTO)
        fail(c, other, "%s is set but %s is not: name the file or URL to read", other, path);
}

static void check_data(struct checker *c)
{
    const struct tr_recipe *r = c->r;
    bool named = !is_null(r, "data.dataset"), inline_train = !is_null(r, "data.train.source");
    if (named && inline_train)
        fail(c, "data.train.source", "data: give either data.dataset or data.train, not both");
    else if (!named && !inline_train)
        fail(c, "data.dataset", "data: no training data; set data.dataset (a folder under "
             "datasets/) or data.train.source (a file or URL)");
    for (int i = 0; named && i < 2; i++) {   /* a data set's own splits are not replaced, yet */
        char key[32];
        snprintf(key, sizeof key, "data.%s.source", i ? "test" : "valid");
        if (!is_null(r, key))
            fail(c, key, "data: %s next to data.dataset: a data set keeps its own %s split (its "
                 "dataset.yaml says which); drop %s, or give the training data inline too", key,
                 i ? "test" : "validation", key);
    }
    const char *set = r->data.dataset;
    if (named && (!*set || set[0] == '.' || strlen(set) >= 64 ||
                  strspn(set, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(set)))
        fail(c, "data.dataset", "data.dataset: '%s' is not a data set name: a folder under datasets/, of at "
             "most 63 letters, digits, '.', '_' or '-', not starting with '.' (no '/')", set);
    check_source(c, "train");
    check_source(c, "valid");
    check_source(c, "test");

    int kind = r->data.tokenizer.kind;
    bool vocab = !is_null(r, "data.tokenizer.vocab"), merges = !is_null(r, "data.tokenizer.merges");
    if (kind == TR_TOK_WORDPIECE && !vocab)
        fail(c, "data.tokenizer.kind", "data.tokenizer: wordpiece needs vocab (a BERT vocab.txt)");
    if (kind == TR_TOK_GPT2_BPE && (!vocab || !merges))
        fail(c, "data.tokenizer.kind", "data.tokenizer: gpt2-bpe needs vocab (encoder.json) and merges (vocab.bpe)");
    if (kind == TR_TOK_CHARS && !vocab)
        fail(c, "data.tokenizer.kind", "data.tokenizer: chars needs vocab (the characters, one a line)");
    if ((kind == TR_TOK_WORDPIECE || kind == TR_TOK_CHARS) && merges)
        fail(c, "data.tokenizer.merges", "data.tokenizer: merges is for gpt2-bpe, not %s",
             kind == TR_TOK_CHARS ? "chars" : "wordpiece");
    if ((kind == TR_TOK_BYTES || kind == TR_TOK_NONE) && (vocab || merges))
        fail(c, vocab ? "data.tokenizer.vocab" : "data.tokenizer.merges",
             "data.tokenizer: %s takes no vocab or merges files", kind == TR_TOK_NONE ? "none" : "bytes");
}

static void check_train(struct checker *c)
{
    const struct tr_recipe *r = c->r;
    bool by_epochs = !is_null(r, "train.epochs"), by_steps = !is_null(r, "train.steps");
    if (by_epochs && by_steps)
        fail(c, "train.steps", "train: set either epochs or steps, not both (train.epochs=null "
             "or ~train.epochs drops epochs)");
    else if (!by_epochs && !by_steps)
        fail(c, "train.epochs", "train: set epochs or steps; both are null");
    if (r->train.early_stop.metric != TR_STOP_NONE && r->train.eval_every == 0)
        fail(c, "train.early_stop.metric", "train.early_stop needs evaluations to compare: set "
             "train.eval_every above 0");
    const struct tr_warmup *w = &r->train.schedule.warmup;
    if (w->is_steps && !is_null(r, "train.steps") && w->steps > r->train.steps)
        fail(c, "train.schedule.warmup", "train.schedule.warmup: %lld warm-up steps are more than "
             "train.steps (%lld)", (long long)w->steps, (long long)r->train.steps);
}

static void check_optimize(struct checker *c)
{
    const struct tr_recipe *r = c->r;
    const struct tr_choice *ck = &r->optimize.checkpointing;
    if (ck->name < 0 && ck->n > r->model.layers)
        fail(c, "optimize.checkpointing", "optimize.checkpointing: %lld blocks, but the model has "
             "%lld (model.layers)", (long long)ck->n, (long long)r->model.layers);
    const struct tr_choice *sent = &r->optimize.offload_blocks;
    if (sent->name < 0 && sent->n > r->model.layers)
        fail(c, "optimize.offload_blocks", "optimize.offload_blocks: %lld blocks, but the model has "
             "%lld (model.layers)", (long long)sent->n, (long long)r->model.layers);
    else if (sent->name < 0 && (r->optimize.offload == TR_OFFLOAD_OFF || r->optimize.offload == TR_OFFLOAD_OPTIMIZER))
        fail(c, "optimize.offload_blocks", "optimize.offload_blocks: %lld blocks, but optimize.offload=%s "
             "offloads no activations", (long long)sent->n, r->optimize.offload == TR_OFFLOAD_OFF ? "off" : "optimizer");
    const struct tr_choice *largest = &r->optimize.offload_largest;
    if (largest->name < 0 && (r->optimize.offload == TR_OFFLOAD_OFF || r->optimize.offload == TR_OFFLOAD_OPTIMIZER))
        fail(c, "optimize.offload_largest", "optimize.offload_largest: %lld%%, but optimize.offload=%s "
             "offloads no activations", (long long)largest->n, r->optimize.offload == TR_OFFLOAD_OFF ? "off" : "optimizer");
    else if (largest->name < 0 && largest->n < 100 && sent->name < 0 && sent->n < r->model.layers)
        fail(c, "optimize.offload_largest", "optimize.offload_largest: %lld%% and optimize.offload_blocks: %lld "
             "are two grains; pin one (the other auto)", (long long)largest->n, (long long)sent->n);
    const struct tr_choice *acc = &r->optimize.accumulation;
    if (acc->name < 0 && r->train.batch_size % acc->n)
        fail(c, "optimize.accumulation", "optimize.accumulation: train.batch_size %lld is not a "
             "multiple of %lld micro-steps", (long long)r->train.batch_size, (long long)acc->n);
    const struct tr_ints *b = &r->optimize.dynamic_batching.buckets;
    if (!is_null(r, "optimize.dynamic_batching.buckets")) {
        for (int i = 1; i < b->n; i++)
            if (b->v[i] <= b->v[i - 1]) {
                fail(c, "optimize.dynamic_batching.buckets", "optimize.dynamic_batching.buckets "
                     "must increase: %lld follows %lld", (long long)b->v[i], (long long)b->v[i - 1]);
                break;
            }
        if (b->v[b->n - 1] > r->model.max_len)
            fail(c, "optimize.dynamic_batching.buckets", "optimize.dynamic_batching.buckets: the "
                 "largest bucket (%lld) exceeds model.max_len (%lld)", (long long)b->v[b->n - 1],
                 (long long)r->model.max_len);
        if (r->optimize.dynamic_batching.mode == TR_OFF)
            fail(c, "optimize.dynamic_batching.buckets", "optimize.dynamic_batching: buckets are "
                 "given but mode is off");
    }
    if (r->optimize.loss_scale.min > r->optimize.loss_scale.init)
        fail(c, "optimize.loss_scale.min", "optimize.loss_scale: min (%g) is above init (%g)",
             r->optimize.loss_scale.min, r->optimize.loss_scale.init);
}

static void check_report(struct checker *c)
{
    const char *url = c->r->report.notify.url;
    if (url && strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        fail(c, "report.notify.url", "report.notify.url: expected an http:// or https:// URL, got '%s'", url);
}

void tr_recipe_validate(const struct tr_recipe *r, struct tr_diag *diag)
{
    struct checker c = {.r = r, .diag = diag};
    check_name(&c);
    check_device(&c);
    check_model(&c);
    check_data(&c);
    check_train(&c);
    check_optimize(&c);
    check_report(&c);
}

int64_t tr_recipe_num_workers(const struct tr_recipe *r, long cores)
{
    return r->data.num_workers.name != 0 ? r->data.num_workers.n : tr_num_workers_auto(cores);
}

int64_t tr_num_workers_auto(long cores)
{
    if (cores <= 0)
        cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores >= 2 ? cores / 2 : 1;
}
