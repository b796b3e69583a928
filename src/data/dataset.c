/* From a recipe's data section to struct tr_data (dataset.h): find the definition (a named
 * dataset.yaml, or the recipe's inline CSV files), run its prepare script when its files are
 * missing or stale, read its tables (files.c), tokenising text as it is read or mapping the
 * tokens of an earlier run from the token cache (cache.c), cut the validation and test sets from
 * the train pool with the definition's own split seed, and normalise every split with
 * statistics of the train split alone. */
#include "data/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/progress.h"
#include "core/stop.h"
#include "data/cache.h"
#include "data/csv.h"
#include "data/definition.h"
#include "data/fetch.h"
#include "data/files.h"
#include "data/prepare.h"
#include "data/shuffle.h"
#include "data/sources.h"
#include "data/tokenizer.h"
#include "recipe/schema.h"


int64_t tr_split_features(const struct tr_split *s)
{
    int64_t f = 1;
    for (int i = 0; i < s->rank; i++)
        f *= s->dims[i];
    return f;
}

/* A grey level as normalize() would have made it: the same float operations, in this order. */
static float pixel_value(const struct tr_split *s, uint8_t p, int64_t j)
{
    float v = (float)p;
    if (s->pixel_norm.kind == TR_NORM_SCALE)
        return v / s->pixel_norm.scale;
    if (s->pixel_norm.kind == TR_NORM_STANDARDIZE)
        return (v - s->pixel_norm.mean[j]) / s->pixel_norm.std[j];
    return v;
}

void tr_split_rows(const struct tr_split *s, const int64_t *ids, int64_t n, float *out)
{
    int64_t f = tr_split_features(s);
    for (int64_t i = 0; i < n; i++) {
        float *o = out + i * f;
        if (s->x) {
            memcpy(o, s->x + ids[i] * f, (size_t)f * sizeof(float));
            continue;
        }
        const uint8_t *p = s->pixels + ids[i] * f;
        for (int64_t j = 0; j < f; j++)
            o[j] = pixel_value(s, p[j], j);
    }
}

/* ---- reading the tables ------------------------------------------------------------------ */

/* The package to name when a file is missing: not when prepare makes the files, since the
 * package then holds what prepare reads, and prepare names it itself. */
static const char *package_of(const struct tr_data_def *def)
{
    return def->prepare ? NULL : def->package;
}

/* pool_names: the classes the pool's labels named, which every later file's labels name too. */
static int read_table(const struct tr_data_def *def, const struct tr_data_source *src, char *const *pool_names,
                      struct tr_table *t, struct tr_diag *diag)
{
    unsigned char *data = NULL, *labels = NULL;
    size_t data_len = 0, labels_len = 0;
    const struct tr_data_file *f = &src->files[0];
    int rc = tr_data_read(f, package_of(def), &data, &data_len, NULL, diag);
    if (!rc && def->format == TR_FMT_IDX)
        rc = tr_data_read(&src->labels, package_of(def), &labels, &labels_len, NULL, diag);
    if (!rc && def->format == TR_FMT_IDX)
        rc = tr_idx_parse(f->path, data, data_len, src->labels.path, labels, labels_len, def->nclasses, t,
                          diag);
    else if (!rc) {
        struct tr_csv_options o = {.header = def->header, .label = def->label, .label_at = def->label_at,
                                   .nclasses = def->nclasses, .missing = def->missing,
                                   .class_names = def->class_names ? def->class_names : pool_names};
        rc = tr_csv_parse(f->path, (const char *)data, data_len, &o, t, diag);
    }
    free(data);
    free(labels);
    return rc;
}

/* missing: mean. Each missing feature becomes the mean of its column's cells in the pool (the
 * train file, or the one source, before the split), in every file: one value a column, as
 * inference would use it. */
static int fill_missing(struct tr_table *t, int ntables, const char *pool_path, struct tr_diag *diag)
{
    bool any = false;
    for (int i = 0; i < ntables; i++)
        any = any || t[i].missing;
    if (!any)
        return 0;
    int64_t f = t[0].nfeatures;
    double *sum = tr_xcalloc((size_t)f, sizeof *sum);
    int64_t *count = tr_xcalloc((size_t)f, sizeof *count);
    for (int64_t r = 0; r < t[0].n; r++)
        for (int64_t j = 0; j < f; j++)
            if (!isnan(t[0].x[r * f + j]))
                sum[j] += t[0].x[r * f + j], count[j]++;
    int rc = 0;
    for (int64_t j = 0; j < f && !rc; j++)
        if (!count[j])
            rc = tr_fail_file(diag, TR_EINVAL, pool_path, 0, 0, "feature %lld is missing in every row: no mean "
                              "to fill it with (missing: mean)", (long long)j);
    for (int i = 0; i < ntables && !rc; i++)
        for (int64_t r = 0; t[i].missing && r < t[i].n; r++)
            for (int64_t j = 0; j < f && j < t[i].nfeatures; j++)
                if (isnan(t[i].x[r * t[i].nfeatures + j]))
                    t[i].x[r * t[i].nfeatures + j] = (float)(sum[j] / (double)count[j]);
    free(sum);
    free(count);
    return rc;
}

/* The definition's problems found only by reading: every file must agree with the first. */
static int check_tables(const struct tr_data_def *def, const struct tr_table *t, int ntables,
                        const char *const *paths, struct tr_diag *diag)
{
    for (int i = 1; i < ntables; i++)
        if (t[i].nfeatures != t[0].nfeatures) {
            tr_diag_add(diag, (struct tr_where){.file = paths[i]}, "%lld features a sample, but %s has %lld",
                        (long long)t[i].nfeatures, paths[0], (long long)t[0].nfeatures);
            return TR_EINVAL;
        }
    if (def->class_names && t[0].class_names)
        for (int c = 0; c < def->nclasses; c++)
            if (strcmp(def->class_names[c], t[0].class_names[c])) {
                tr_diag_add(diag, (struct tr_where){.file = paths[0], .line = 1, .col = 1},
                            "the header names class %d '%s'; the definition calls it '%s'", c,
                            t[0].class_names[c], def->class_names[c]);
                return TR_EINVAL;
            }
    int64_t f = 1;
    for (int i = 0; i < def->shape_rank; i++)
        f *= def->shape[i];
    if (def->shape_rank && f != t[0].nfeatures) {
        tr_diag_add(diag, (struct tr_where){.file = def->file}, "shape: holds %lld features a sample, but "
                    "%s has %lld", (long long)f, paths[0], (long long)t[0].nfeatures);
        return TR_EINVAL;
    }
    return 0;
}

/* ---- splitting --------------------------------------------------------------------------- */

static int64_t cut_size(double spec, int64_t pool)
{
    return spec <= 0 ? 0 : spec < 1 ? llround(spec * (double)pool) : (int64_t)spec;
}

static int compare_ids(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void set_shape(struct tr_split *s, const struct tr_data_def *def, const struct tr_table *t)
{
    s->rank = def->shape_rank ? def->shape_rank : t->rank;
    memcpy(s->dims, def->shape_rank ? def->shape : t->dims, sizeof s->dims);
}

/* Split s gets the token sequences and labels ids[0..n) of a text table, in that order. */
static int take_text_rows(const struct tr_table *t, const int64_t *ids, int64_t n, struct tr_split *s,
                          struct tr_diag *diag)
{
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += t->offsets[ids[i] + 1] - t->offsets[ids[i]];
    s->n = n;
    s->ntokens = total;
    s->tokens = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    s->offsets = malloc((size_t)(n + 1) * sizeof(int64_t));
    s->y = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!s->tokens || !s->offsets || !s->y) {
        tr_diag_add(diag, (struct tr_where){0}, "out of memory splitting the data (%lld tokens)", (long long)total);
        return TR_ENOMEM;
    }
    s->offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t from = t->offsets[ids[i]], len = t->offsets[ids[i] + 1] - from;
        memcpy(s->tokens + s->offsets[i], t->tokens + from, (size_t)len * sizeof(int32_t));
        s->offsets[i + 1] = s->offsets[i] + len;
        s->y[i] = t->y[ids[i]];
    }
    return 0;
}

/* Split s gets rows ids[0..n) of t, in that order. */
static int take_rows(const struct tr_table *t, const int64_t *ids, int64_t n, struct tr_split *s,
                     struct tr_diag *diag)
{
    if (t->offsets)
        return take_text_rows(t, ids, n, s, diag);
    s->n = n;
    if (!n)
        return 0;
    size_t f = (size_t)t->nfeatures, size = t->pixels ? 1 : sizeof(float);
    void *rows = malloc((size_t)n * f * size);
    s->y = malloc((size_t)n * sizeof(int32_t));
    *(t->pixels ? (void **)&s->pixels : (void **)&s->x) = rows;
    if (!rows || !s->y) {
        tr_diag_add(diag, (struct tr_where){0}, "out of memory splitting the data (%zu bytes)", (size_t)n * f * size);
        return TR_ENOMEM;
    }
    const char *from = t->pixels ? (const char *)t->pixels : (const char *)t->x;
    for (int64_t i = 0; i < n; i++) {
        memcpy((char *)rows + (size_t)i * f * size, from + (size_t)ids[i] * f * size, f * size);
        s->y[i] = t->y[ids[i]];
    }
    return 0;
}

/* Moves a whole table into a split. */
static void adopt(struct tr_table *t, struct tr_split *s)
{
    s->n = t->n;
    s->x = t->x;
    s->pixels = t->pixels;
    s->y = t->y;
    s->tokens = t->tokens;
    s->offsets = t->offsets;
    s->ntokens = t->ntokens;
    s->map = t->map;
    s->map_bytes = t->map_bytes;
    t->x = NULL;
    t->pixels = NULL;
    t->y = NULL;
    t->tokens = NULL;
    t->offsets = NULL;
    t->map = NULL;
}

/* Cuts test (first) and valid (next) from the pool's order shuffled by the split seed; the
 * rest is train. Each split keeps file order. Drawing test first keeps the test set the same
 * when only the valid size changes. A pool with nothing to cut is train as it is (for text, maybe
 * still the token cache's mapping). */
static int cut(const struct tr_data_def *def, struct tr_table *pool, int64_t ntest, int64_t nvalid,
               struct tr_data *d, struct tr_diag *diag)
{
    int64_t n = pool->n;
    if (ntest + nvalid >= n) {
        tr_diag_add(diag, def->split_at, "%s: %lld valid and %lld test samples leave none of %lld to "
                    "train on", def->file ? "split" : "data.train.source", (long long)nvalid, (long long)ntest,
                    (long long)n);
        return TR_EINVAL;
    }
    if (!ntest && !nvalid) {
        adopt(pool, &d->train);
        return 0;
    }
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) {
        tr_diag_add(diag, (struct tr_where){0}, "out of memory splitting the data");
        return TR_ENOMEM;
    }
    for (int64_t i = 0; i < n; i++)
        ids[i] = i;
    tr_shuffle(ids, n, def->split_seed);
    int64_t at[4] = {0, ntest, ntest + nvalid, n};
    struct tr_split *to[3] = {&d->test, &d->valid, &d->train};
    int rc = 0;
    for (int s = 0; s < 3 && !rc; s++) {
        if (at[s + 1] == at[s] && to[s] != &d->train)
            continue;   /* the split comes from a file of its own, or is empty */
        qsort(ids + at[s], (size_t)(at[s + 1] - at[s]), sizeof *ids, compare_ids);
        rc = take_rows(pool, ids + at[s], at[s + 1] - at[s], to[s], diag);
    }
    free(ids);
    return rc;
}

/* ---- normalising ------------------------------------------------------------------------- */

/* Images kept as bytes are normalised as they are read (tr_split_rows): their split only notes how. */
static void scale_split(struct tr_split *s, int64_t f, float scale)
{
    s->pixel_norm.kind = TR_NORM_SCALE, s->pixel_norm.scale = scale;
    for (int64_t i = 0; s->x && i < s->n * f; i++)
        s->x[i] /= scale;
}

static void standardize_split(struct tr_split *s, int64_t f, const float *mean, const float *std)
{
    s->pixel_norm.kind = TR_NORM_STANDARDIZE, s->pixel_norm.mean = mean, s->pixel_norm.std = std;
    for (int64_t i = 0; s->x && i < s->n; i++)
        for (int64_t j = 0; j < f; j++)
            s->x[i * f + j] = (s->x[i * f + j] - mean[j]) / std[j];
}

/* Feature j of sample i as read, before normalising. */
static float raw_feature(const struct tr_split *s, int64_t i, int64_t j, int64_t f)
{
    return s->x ? s->x[i * f + j] : (float)s->pixels[i * f + j];
}

/* Mean and population standard deviation (like scikit-learn's StandardScaler) of the train
 * split, two passes in double; a constant feature gets std 1, so it maps to 0, not NaN. */
static int train_statistics(const struct tr_split *train, int64_t f, struct tr_norm *norm,
                            struct tr_diag *diag)
{
    norm->nfeatures = f;
    norm->mean = malloc((size_t)f * sizeof(float));
    norm->std = malloc((size_t)f * sizeof(float));
    double *sum = calloc((size_t)f, sizeof(double)), *sq = calloc((size_t)f, sizeof(double));
    if (!norm->mean || !norm->std || !sum || !sq) {
        free(sum);
        free(sq);
        tr_diag_add(diag, (struct tr_where){0}, "out of memory normalising the data");
        return TR_ENOMEM;
    }
    for (int64_t i = 0; i < train->n; i++)
        for (int64_t j = 0; j < f; j++)
            sum[j] += raw_feature(train, i, j, f);
    for (int64_t j = 0; j < f; j++)
        sum[j] /= (double)train->n;
    for (int64_t i = 0; i < train->n; i++)
        for (int64_t j = 0; j < f; j++) {
            double dev = raw_feature(train, i, j, f) - sum[j];
            sq[j] += dev * dev;
        }
    for (int64_t j = 0; j < f; j++) {
        double sd = sqrt(sq[j] / (double)train->n);
        norm->mean[j] = (float)sum[j];
        norm->std[j] = sd > 0 ? (float)sd : 1.0f;
    }
    free(sum);
    free(sq);
    return 0;
}

static int normalize(const struct tr_data_def *def, struct tr_data *d, struct tr_diag *diag)
{
    int64_t f = tr_split_features(&d->train);
    struct tr_split *splits[3] = {&d->train, &d->valid, &d->test};
    d->norm.kind = def->norm;
    if (def->norm == TR_NORM_SCALE) {
        d->norm.scale = def->scale;
        for (int s = 0; s < 3; s++)
            scale_split(splits[s], f, (float)def->scale);
    } else if (def->norm == TR_NORM_STANDARDIZE) {
        int rc = train_statistics(&d->train, f, &d->norm, diag);
        if (rc)
            return rc;
        for (int s = 0; s < 3; s++)
            standardize_split(splits[s], f, d->norm.mean, d->norm.std);
    }
    return 0;
}

/* ---- text -------------------------------------------------------------------------------- */

/* How text is read: the tokenizer (the recipe's, or the definition's) and model.max_len, the
 * longest classification sample and the language-model window. */
struct text_setup {
    int kind;                     /* enum tr_tokenizer_kind; TR_TOK_NONE for features */
    char *vocab, *merges;         /* owned */
    bool lowercase;
    int64_t max_len;
};

static bool is_text(int format)
{
    return format == TR_FMT_TSV || format == TR_FMT_JSONL || format == TR_FMT_TEXT;
}

static int open_tokenizer(const struct text_setup *ts, struct tr_data *d, struct tr_diag *diag)
{
    if (tr_tokenizer_open(&d->tokenizer, ts->kind, ts->vocab, ts->merges, ts->lowercase, diag))
        return TR_EINVAL;
    d->vocab = tr_tokenizer_vocab_size(d->tokenizer);
    d->tokenizer_kind = ts->kind;
    d->tokenizer_files[0] = ts->vocab ? tr_strdup(ts->vocab) : NULL;
    d->tokenizer_files[1] = ts->merges ? tr_strdup(ts->merges) : NULL;
    int32_t pad = tr_tokenizer_special(d->tokenizer, "[PAD]");
    d->pad_id = pad >= 0 ? pad : 0;
    return 0;
}

/* One load's text: its tokenizer, and the token cache (cache.h). Each source (a split's files)
 * is one shard, keyed by what decides its ids (shard_key); model.max_len is not among them, since
 * samples are cut to it and streams cut into windows after the cache, which is cheap. */
struct text_load {
    const struct text_setup *ts;
    const struct tr_tokenizer *tok;
    int64_t vocab;
    char *cache_dir;              /* the token cache's folder (owned); NULL when it is off */
    const char *name;             /* the data set's, for people reading the shards' names */
    char vocab_sha256[65], merges_sha256[65];   /* the tokenizer's files' hashes; "" for none */
    bool verified;                /* prepare checked every file against its sha256 this load */
    struct tr_diag *warnings;
};

static int text_load_begin(const struct tr_data_def *def, const struct text_setup *ts, struct tr_data *d,
                           struct text_load *tl, struct tr_diag *diag)
{
    *tl = (struct text_load){.ts = ts, .tok = d->tokenizer, .vocab = d->vocab, .name = d->name,
                             .verified = def->prepare != NULL, .warnings = &d->warnings,
                             .cache_dir = tr_token_cache_dir(&d->warnings)};
    int rc = 0;
    if (tl->cache_dir && ts->vocab)
        rc = tr_data_check(&(struct tr_data_file){.path = ts->vocab}, NULL, tl->vocab_sha256, diag);
    if (!rc && tl->cache_dir && ts->merges)
        rc = tr_data_check(&(struct tr_data_file){.path = ts->merges}, NULL, tl->merges_sha256, diag);
    return rc;
}

/* A file of a text source as read: its bytes (NULL until read) and its sha256. */
struct file_bytes {
    unsigned char *buf;
    size_t len;
    char sha256[65];
};

static int read_file(const struct tr_data_def *def, const struct tr_data_file *f, struct file_bytes *fb,
                     struct tr_diag *diag)
{
    return tr_data_read(f, package_of(def), &fb->buf, &fb->len, fb->sha256, diag);
}

/* The text of a file's bytes: its lines: range, without a byte-order mark, checked to be UTF-8. */
static int text_of(const struct tr_data_file *f, const struct file_bytes *fb, const char **text, size_t *len,
                   int *first_line, struct tr_diag *diag)
{
    int rc = tr_text_lines(f, (const char *)fb->buf, fb->len, text, len, first_line, diag);
    if (!rc && *text == (const char *)fb->buf && *len >= 3 && !memcmp(*text, "\xef\xbb\xbf", 3))
        *text += 3, *len -= 3;   /* a byte-order mark, as Windows editors write: not text */
    return rc ? rc : tr_utf8_check(f->path, *text, *len, *first_line, diag);
}

/* Tokenises classification samples as tr_text_parse hands them over, into one table. */
struct text_reader {
    const struct tr_tokenizer *tok;
    const char *path;
    int32_t cls, sep;             /* -1 where the vocabulary has none (bytes, chars, gpt2-bpe) */
    struct tr_ids ids;            /* every sample's tokens so far */
    struct tr_progress shown;     /* tokenising's progress, in samples */
    int64_t *offsets;             /* n + 1 */
    int32_t *y;
    int64_t n, cap;
};

/* Sample i becomes [CLS] tokens [SEP], whole: BERT's input, cut to model.max_len later
 * (cut_to_max_len). */
static int take_sample(void *ctx, const struct tr_text_sample *s, struct tr_diag *diag)
{
    struct text_reader *r = ctx;
    tr_progress_update(&r->shown, r->n);
    if (tr_stop_requested())   /* a signal: the run ends here (core/stop.h) */
        return tr_stop_check(diag, "tokenising");
    size_t start = r->ids.n;
    if (r->cls >= 0)
        tr_ids_push(&r->ids, r->cls);
    struct tr_diag why = {0};
    if (tr_tokenize(r->tok, s->text, s->len, &r->ids, &why)) {
        tr_fail_file(diag, TR_EINVAL, r->path, s->line, s->col, "%s", tr_diag_last(&why));
        tr_diag_free(&why);
        return TR_EINVAL;
    }
    if (r->sep >= 0)
        tr_ids_push(&r->ids, r->sep);
    if (r->ids.n == start) {
        tr_diag_add(diag, (struct tr_where){.file = r->path, .line = s->line, .col = s->col},
                    "the text is empty: no tokens to learn from");
        return TR_EINVAL;
    }
    if (r->n + 1 >= r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->offsets = tr_xrealloc(r->offsets, (size_t)(r->cap + 1) * sizeof *r->offsets);
        r->y = tr_xrealloc(r->y, (size_t)r->cap * sizeof *r->y);
    }
    r->y[r->n] = s->label;
    r->offsets[++r->n] = (int64_t)r->ids.n;
    return 0;
}

/* A tsv or jsonl source's files, read in order, as one table of token sequences. */
static int tokenise_samples(const struct tr_data_def *def, const struct tr_data_source *src,
                            const struct file_bytes *fb, const struct text_load *tl, struct tr_table *t,
                            struct tr_diag *diag)
{
    struct text_reader r = {.tok = tl->tok, .cls = tr_tokenizer_special(tl->tok, "[CLS]"),
                            .sep = tr_tokenizer_special(tl->tok, "[SEP]")};
    struct tr_text_options o = {.format = def->format, .text = def->text, .label = def->label,
                                .text_at = def->text_at, .label_at = def->label_at,
                                .class_names = def->class_names, .nclasses = def->nclasses};
    r.offsets = tr_xmalloc(sizeof *r.offsets);
    r.offsets[0] = 0;
    int rc = 0;
    tr_progress_begin(&r.shown, "tokenising", 0, "samples");
    for (int i = 0; i < src->nfiles && !rc; i++) {
        const char *text;
        size_t len;
        r.path = src->files[i].path;
        rc = text_of(&src->files[i], &fb[i], &text, &len, &o.first_line, diag);
        if (!rc)
            rc = tr_text_parse(r.path, text, len, &o, take_sample, &r, diag);
    }
    tr_progress_end(&r.shown);
    *t = (struct tr_table){.n = r.n, .tokens = r.ids.v, .offsets = r.offsets, .y = r.y,
                           .ntokens = (int64_t)r.ids.n, .nclasses = def->nclasses};
    return rc;
}

/* A language-model source: its files' text, each ending in a newline (one is added where it
 * lacks it), tokenised into one stream; GPT-2's <|endoftext|> separates files when its
 * vocabulary has it, as GPT-2 was trained between documents. */
static int tokenise_stream(const struct tr_data_source *src, const struct file_bytes *fb,
                           const struct text_load *tl, struct tr_table *t, struct tr_diag *diag)
{
    int32_t end_of_text = tl->ts->kind == TR_TOK_GPT2_BPE ? tr_tokenizer_special(tl->tok, "<|endoftext|>")
                                                          : -1;
    struct tr_ids ids = {0};
    int rc = 0;
    for (int i = 0; i < src->nfiles && !rc; i++) {
        const char *text;
        size_t len;
        int first_line;
        struct tr_diag why = {0};
        if (!(rc = tr_stop_check(diag, "tokenising")))   /* a signal: the run ends here */
            rc = text_of(&src->files[i], &fb[i], &text, &len, &first_line, diag);
        if (!rc && i && end_of_text >= 0)
            tr_ids_push(&ids, end_of_text);
        if (!rc && (tr_tokenize(tl->tok, text, len, &ids, &why) ||
                    (end_of_text < 0 && len && text[len - 1] != '\n' &&
                     tr_tokenize(tl->tok, "\n", 1, &ids, &why))))
            rc = tr_fail_file(diag, TR_EINVAL, src->files[i].path, 0, 0, "%s", tr_diag_last(&why));
        tr_diag_free(&why);
    }
    *t = (struct tr_table){.tokens = ids.v, .ntokens = (int64_t)ids.n};
    return rc;
}

/* What decides a source's ids, hashed: its format; its files' content and lines: ranges; the
 * fields and classes samples are read with; the tokenizer's kind, option and files' content.
 * Anything added to what tokenising reads belongs here too. */
static void shard_key(const struct tr_data_def *def, const struct tr_data_source *src,
                      const struct text_load *tl, const struct file_bytes *fb, unsigned char key[32])
{
    struct tr_sha256 k;
    tr_shard_key_begin(&k);
    tr_shard_key_int(&k, def->format);
    tr_shard_key_int(&k, tl->ts->kind);
    tr_shard_key_int(&k, tl->ts->lowercase);
    tr_shard_key_text(&k, tl->vocab_sha256);
    tr_shard_key_text(&k, tl->merges_sha256);
    tr_shard_key_int(&k, src->nfiles);
    for (int i = 0; i < src->nfiles; i++) {
        tr_shard_key_text(&k, fb[i].sha256);
        tr_shard_key_int(&k, src->files[i].first_line);
        tr_shard_key_int(&k, src->files[i].last_line);
    }
    if (def->format != TR_FMT_TEXT) {
        tr_shard_key_text(&k, def->text);
        tr_shard_key_text(&k, def->label);
        tr_shard_key_int(&k, def->nclasses);
        tr_shard_key_int(&k, def->class_names != NULL);
        for (int c = 0; def->class_names && def->class_names[c]; c++)
            tr_shard_key_text(&k, def->class_names[c]);
    }
    tr_sha256_final(&k, key);
}

static const char *source_role(const struct tr_data_def *def, const struct tr_data_source *src)
{
    return src == &def->all ? "all" : src == &def->train ? "train" : src == &def->valid ? "valid" : "test";
}

/* cache_dir/<data set>.<split>.<key in hex>.shard: the name says what it holds to a person,
 * the key what it was made from. */
static char *shard_path(const struct tr_data_def *def, const struct tr_data_source *src,
                        const struct text_load *tl, const unsigned char key[32])
{
    char hex[65];
    tr_sha256_hex(key, hex);
    const char *name = tr_data_is_folder_name(tl->name) ? tl->name : "data";
    return tr_strdup_printf("%s/%s.%s.%s.shard", tl->cache_dir, name, source_role(def, src), hex);
}

/* Each file's sha256, for the key: its pin when prepare has just checked it, else read (and
 * kept for tokenising), so that no file is hashed twice. */
static int hash_files(const struct tr_data_def *def, const struct tr_data_source *src, const struct text_load *tl,
                      struct file_bytes *fb, struct tr_diag *diag)
{
    int rc = 0;
    for (int i = 0; i < src->nfiles && !rc; i++) {
        if (tl->verified && src->files[i].sha256[0])
            memcpy(fb[i].sha256, src->files[i].sha256, sizeof fb[i].sha256);
        else
            rc = read_file(def, &src->files[i], &fb[i], diag);
    }
    return rc;
}

/* t from the shard at path, when it is there, whole and made for key. */
static bool from_shard(const char *path, const unsigned char key[32], int kind, const struct tr_data_def *def,
                       const struct text_load *tl, struct tr_table *t)
{
    struct tr_shard s;
    if (!tr_shard_open(path, key, kind, tl->vocab, def->nclasses, &s, tl->warnings))
        return false;
    *t = (struct tr_table){.n = s.n, .ntokens = s.ntokens, .tokens = (int32_t *)s.tokens,
                           .offsets = (int64_t *)s.offsets, .y = (int32_t *)s.labels,
                           .nclasses = def->nclasses, .map = s.map, .map_bytes = s.map_bytes};
    return true;
}

/* One source's tokens, as a stream or samples (enum tr_shard_kind): from its shard in the token
 * cache, or tokenised now and written there. */
static int text_source(const struct tr_data_def *def, const struct tr_data_source *src, int kind,
                       const struct text_load *tl, struct tr_table *t, struct tr_diag *diag)
{
    struct file_bytes *fb = tr_xcalloc((size_t)src->nfiles, sizeof *fb);
    unsigned char key[32];
    char *path = NULL;
    int rc = tl->cache_dir ? hash_files(def, src, tl, fb, diag) : 0;
    if (!rc && tl->cache_dir) {
        shard_key(def, src, tl, fb, key);
        path = shard_path(def, src, tl, key);
    }
    bool hit = path && from_shard(path, key, kind, def, tl, t);
    for (int i = 0; i < src->nfiles && !rc && !hit; i++)
        if (!fb[i].buf)
            rc = read_file(def, &src->files[i], &fb[i], diag);
    if (!rc && !hit)
        rc = kind == TR_SHARD_STREAM ? tokenise_stream(src, fb, tl, t, diag)
                                     : tokenise_samples(def, src, fb, tl, t, diag);
    if (!rc && !hit && path)
        tr_shard_write(path, key, &(struct tr_shard){.kind = kind, .n = t->n, .ntokens = t->ntokens,
                                                     .tokens = t->tokens, .offsets = t->offsets, .labels = t->y},
                       tl->warnings);
    for (int i = 0; i < src->nfiles; i++)
        free(fb[i].buf);
    free(fb);
    free(path);
    return rc;
}

/* Language modelling: each split one stream cut into windows of max_len tokens; window i is
 * tokens[i·window, (i+1)·window] (its inputs and, shifted by one, its targets). */
static int load_stream(const struct tr_data_def *def, const struct text_load *tl, struct tr_data *d,
                       struct tr_diag *diag)
{
    const struct tr_data_source *src[3] = {def->all.given ? &def->all : &def->train, &def->valid, &def->test};
    struct tr_split *to[3] = {&d->train, &d->valid, &d->test};
    static const char *const names[3] = {"train", "valid", "test"};
    int64_t max_len = tl->ts->max_len;
    int rc = 0;
    for (int s = 0; s < 3 && !rc; s++) {
        struct tr_table t = {0};
        if (src[s]->given)
            rc = text_source(def, src[s], TR_SHARD_STREAM, tl, &t, diag);
        *to[s] = (struct tr_split){.tokens = t.tokens, .ntokens = t.ntokens, .window = max_len,
                                   .n = t.ntokens ? (t.ntokens - 1) / max_len : 0,
                                   .map = t.map, .map_bytes = t.map_bytes};
        if (!rc && src[s]->given && to[s]->n == 0) {
            tr_diag_add(diag, (struct tr_where){.file = def->file}, "%s: %lld tokens, too few for one window "
                        "of model.max_len %lld tokens and the target after it", names[s], (long long)t.ntokens,
                        (long long)max_len);
            rc = TR_EINVAL;
        }
    }
    return rc;
}

/* Whether a classification sample of max_len tokens has room for text between [CLS] and [SEP]. */
static int samples_fit(const struct text_load *tl, struct tr_diag *diag)
{
    int64_t specials = (tr_tokenizer_special(tl->tok, "[CLS]") >= 0) +
                       (tr_tokenizer_special(tl->tok, "[SEP]") >= 0);
    if (tl->ts->max_len > specials)
        return 0;
    tr_diag_add(diag, (struct tr_where){0}, "model.max_len: %lld leaves no room for text between [CLS] and [SEP]",
                (long long)tl->ts->max_len);
    return TR_EINVAL;
}

/* Cuts the samples of s longer than max_len to their first max_len tokens, [SEP] (sep ≥ 0) kept
 * last. The cache keeps samples whole, so that max_len is not in its key; the cut split is a
 * copy, so that a mapped shard is never written. */
static void cut_to_max_len(struct tr_split *s, int64_t max_len, int32_t sep)
{
    int64_t total = 0, longer = 0;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t len = s->offsets[i + 1] - s->offsets[i];
        total += len < max_len ? len : max_len;
        longer += len > max_len;
    }
    if (!longer)
        return;
    int32_t *tokens = tr_xmalloc((size_t)total * sizeof *tokens);
    int64_t *offsets = tr_xmalloc((size_t)(s->n + 1) * sizeof *offsets);
    offsets[0] = 0;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t from = s->offsets[i], len = s->offsets[i + 1] - from, keep = len < max_len ? len : max_len;
        memcpy(tokens + offsets[i], s->tokens + from, (size_t)keep * sizeof *tokens);
        if (keep < len && sep >= 0)
            tokens[offsets[i] + keep - 1] = sep;
        offsets[i + 1] = offsets[i] + keep;
    }
    tr_cache_free(s->tokens, s->map, s->map_bytes);
    tr_cache_free(s->offsets, s->map, s->map_bytes);
    s->tokens = tokens;
    s->offsets = offsets;
    s->ntokens = total;
}

/* Text splits hold tokens even when empty, so that a reader tells text from features by them. */
static void text_splits_complete(struct tr_data *d)
{
    struct tr_split *splits[3] = {&d->train, &d->valid, &d->test};
    for (int s = 0; s < 3; s++) {
        if (!splits[s]->tokens)
            splits[s]->tokens = tr_xcalloc(1, sizeof *splits[s]->tokens);
        if (d->kind == TR_DATA_TEXT_CLASSES && !splits[s]->offsets)
            splits[s]->offsets = tr_xcalloc(1, sizeof *splits[s]->offsets);
    }
}

/* ---- a definition into data -------------------------------------------------------------- */

static void set_names(const struct tr_data_def *def, const struct tr_table *first, struct tr_data *d)
{
    d->class_names = tr_xcalloc((size_t)d->nclasses + 1, sizeof *d->class_names);
    for (int c = 0; c < d->nclasses; c++)
        d->class_names[c] = def->class_names ? tr_strdup(def->class_names[c])
                            : first->class_names ? tr_strdup(first->class_names[c])
                                                : tr_strdup_printf("%d", c);
}

/* The number of classes: the definition's, else the first file's header's names, else the
 * largest label + 1 over every file; no file may hold a label past it. */
static int class_count(const struct tr_data_def *def, const struct tr_table *t, int ntables,
                       const char *const *paths, struct tr_diag *diag)
{
    int n = def->nclasses ? def->nclasses : t[0].class_names ? t[0].nclasses : 0;
    for (int i = 0; !n && i < ntables; i++)
        n = t[i].nclasses > n ? t[i].nclasses : n;
    for (int i = 1; i < ntables; i++)
        if (t[i].nclasses > n) {
            tr_diag_add(diag, (struct tr_where){.file = paths[i]}, "holds labels up to %d, but %s names "
                        "%d classes", t[i].nclasses - 1, paths[0], n);
            return -1;
        }
    return n;
}

static int build(const struct tr_data_def *def, struct tr_table *t, const struct tr_data_source *const *src,
                 int ntables, struct tr_data *d, struct tr_diag *diag)
{
    const char *paths[3];
    for (int i = 0; i < ntables; i++)
        paths[i] = src[i]->files[0].path;
    int rc = check_tables(def, t, ntables, paths, diag);
    if (rc)
        return rc;
    d->nclasses = class_count(def, t, ntables, paths, diag);
    if (d->nclasses < 0)
        return TR_EINVAL;
    set_names(def, &t[0], d);
    struct tr_split *splits[3] = {&d->train, &d->valid, &d->test};
    for (int s = 0; s < 3; s++)
        set_shape(splits[s], def, &t[0]);
    /* Tables after the first are the valid and test files, in that order when both exist. */
    int next = 1;
    bool valid_file = def->valid.given, test_file = def->test.given;
    if (valid_file)
        adopt(&t[next++], &d->valid);
    if (test_file)
        adopt(&t[next++], &d->test);
    rc = cut(def, &t[0], test_file ? 0 : cut_size(def->split_test, t[0].n),
             valid_file ? 0 : cut_size(def->split_valid, t[0].n), d, diag);
    return rc ? rc : normalize(def, d, diag);
}

/* The tables of a csv, idx, tsv or jsonl definition: the pool (one source, or train) and the
 * valid and test files, built into splits; text (tl not NULL) samples then cut to max_len. */
static int load_tables(const struct tr_data_def *def, const struct text_load *tl, struct tr_data *out,
                       struct tr_diag *diag)
{
    const struct tr_data_source *src[3] = {def->all.given ? &def->all : &def->train};
    int ntables = 1;
    if (def->valid.given)
        src[ntables++] = &def->valid;
    if (def->test.given)
        src[ntables++] = &def->test;
    struct tr_table t[3] = {{0}};
    int rc = tl ? samples_fit(tl, diag) : 0;
    for (int i = 0; i < ntables && !rc; i++)
        rc = tl ? text_source(def, src[i], TR_SHARD_SAMPLES, tl, &t[i], diag)
                : read_table(def, src[i], t[0].class_names, &t[i], diag);
    if (!rc)
        rc = fill_missing(t, ntables, src[0]->files[0].path, diag);
    if (!rc)
        rc = build(def, t, src, ntables, out, diag);
    for (int i = 0; i < ntables; i++)
        tr_table_free(&t[i]);
    struct tr_split *splits[3] = {&out->train, &out->valid, &out->test};
    for (int s = 0; s < 3 && !rc && tl; s++)
        cut_to_max_len(splits[s], tl->ts->max_len, tr_tokenizer_special(tl->tok, "[SEP]"));
    return rc;
}

/* The data set's name: the definition's, else its folder's. */
static void set_name(const struct tr_data_def *def, struct tr_data *out)
{
    if (def->name[0])
        memcpy(out->name, def->name, sizeof out->name);
    else if (def->file) {
        const char *end = strrchr(def->file, '/'), *start = end;
        while (start && start > def->file && start[-1] != '/')
            start--;
        snprintf(out->name, sizeof out->name, "%.*s", end ? (int)(end - start) : 1, end ? start : ".");
    }
}

/* Text: the tokenizer, then each split's tokens through the token cache. */
static int load_text(const struct tr_data_def *def, const struct text_setup *ts, struct tr_data *out,
                     struct tr_diag *diag)
{
    out->kind = def->format == TR_FMT_TEXT ? TR_DATA_TEXT_LM : TR_DATA_TEXT_CLASSES;
    struct text_load tl = {0};
    int rc = open_tokenizer(ts, out, diag);
    if (!rc)
        rc = text_load_begin(def, ts, out, &tl, diag);
    if (!rc && def->format == TR_FMT_TEXT) {
        rc = load_stream(def, &tl, out, diag);
        if (!rc)
            out->class_names = tr_xcalloc(1, sizeof *out->class_names);
    } else if (!rc)
        rc = load_tables(def, &tl, out, diag);
    free(tl.cache_dir);
    if (!rc)
        text_splits_complete(out);
    return rc;
}

/* The data refresh: URL sources fetched, prepare run where files are missing, and what
 * identifies each file recorded in out->origins. */
static int refresh(struct tr_data_def *def, const struct tr_data_refresh_options *o, struct tr_data *out,
                   struct tr_diag *diag)
{
    set_name(def, out);
    int rc = tr_data_fetch_sources(def, o, out, diag);
    if (!rc)
        rc = tr_data_ensure_prepared(def, o->prepare_timeout, diag);
    if (!rc)
        rc = tr_data_record_origins(def, out, diag);
    return rc;
}

/* The labels as tr_text_parse hands them over, copied. */
struct label_list {
    char **v;
    size_t n, cap;
};

static int collect_label(void *ctx, const struct tr_text_sample *s, struct tr_diag *diag)
{
    (void)diag;
    struct label_list *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = tr_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = tr_strdup_printf("%.*s", (int)s->label_len, s->label_text);
    return 0;
}

/* Inline tsv and jsonl data name no classes: they are the train file's labels, found as a csv
 * table's are (csv.h: class numbers, or names in byte order). */
static int classes_from_labels(struct tr_data_def *def, struct tr_diag *diag)
{
    if (def->file || (def->format != TR_FMT_TSV && def->format != TR_FMT_JSONL) || def->nclasses)
        return 0;
    struct tr_text_options o = {.format = def->format, .text = def->text, .label = def->label,
                                .text_at = def->text_at, .label_at = def->label_at};
    struct label_list labels = {0};
    int rc = 0;
    for (int i = 0; i < def->train.nfiles && !rc; i++) {
        struct file_bytes fb = {0};
        const char *text;
        size_t len;
        rc = read_file(def, &def->train.files[i], &fb, diag);
        if (!rc)
            rc = text_of(&def->train.files[i], &fb, &text, &len, &o.first_line, diag);
        if (!rc)
            rc = tr_text_parse(def->train.files[i].path, text, len, &o, collect_label, &labels, diag);
        free(fb.buf);
    }
    if (!rc)
        tr_csv_classes(labels.v, labels.n, &def->class_names, &def->nclasses);
    if (!rc && def->nclasses > TR_CSV_MAX_CLASSES)
        rc = tr_fail_file(diag, TR_EINVAL, def->train.files[0].path, 0, 0, "%d distinct labels, more than %d: is "
                          "data.train.label (%s) the class?", def->nclasses, TR_CSV_MAX_CLASSES, def->label);
    for (size_t i = 0; i < labels.n; i++)
        free(labels.v[i]);
    free(labels.v);
    return rc;
}

static int load_def(struct tr_data_def *def, const struct text_setup *ts, const struct tr_data_refresh_options *o,
                    struct tr_data *out, struct tr_diag *diag)
{
    int rc = refresh(def, o, out, diag);
    if (!rc)
        rc = classes_from_labels(def, diag);
    if (rc)
        return rc;
    return is_text(def->format) ? load_text(def, ts, out, diag) : load_tables(def, NULL, out, diag);
}

static void text_setup_free(struct text_setup *ts)
{
    free(ts->vocab);
    free(ts->merges);
}

/* The definition's own tokenizer, and model.max_len's default: a definition loaded without a
 * recipe. */
static int definition_text_setup(const struct tr_data_def *def, struct text_setup *ts, struct tr_diag *diag)
{
    *ts = (struct text_setup){.max_len = strtoll(tr_keys[tr_key_find("model.max_len")].def, NULL, 10)};
    if (!is_text(def->format))
        return 0;
    if (def->tokenizer.kind == TR_TOK_NONE) {
        tr_diag_add(diag, (struct tr_where){.file = def->file}, "tokenizer: missing; text data is read "
                    "through one (bytes, chars, wordpiece or gpt2-bpe), named here or by a recipe's "
                    "data.tokenizer");
        return TR_EINVAL;
    }
    ts->kind = def->tokenizer.kind;
    ts->vocab = def->tokenizer.vocab ? tr_strdup(def->tokenizer.vocab) : NULL;
    ts->merges = def->tokenizer.merges ? tr_strdup(def->tokenizer.merges) : NULL;
    ts->lowercase = def->tokenizer.lowercase;
    return 0;
}

int tr_data_load_definition(const char *path, struct tr_data *out, struct tr_diag *diag)
{
    memset(out, 0, sizeof *out);
    struct tr_data_def def;
    struct text_setup ts = {0};
    int rc = tr_data_def_parse(path, &def, diag);
    if (!rc)
        rc = definition_text_setup(&def, &ts, diag);
    struct tr_data_refresh_options o;
    tr_data_refresh_options_of(NULL, &o);
    if (!rc)
        rc = load_def(&def, &ts, &o, out, diag);
    text_setup_free(&ts);
    tr_data_def_free(&def);
    if (rc)
        tr_data_free(out);
    return rc;
}

/* ---- from a recipe ----------------------------------------------------------------------- */

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "digits, fashion-mnist, iris": the folders of dir holding a dataset.yaml. Caller frees. */
static char *known_datasets(const char *dir)
{
    DIR *d = opendir(dir);
    char *names[256];
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL && n < 256;) {
        char *path = tr_strdup_printf("%s/%s/dataset.yaml", dir, e->d_name);
        struct stat st;
        if (e->d_name[0] != '.' && stat(path, &st) == 0)
            names[n++] = tr_strdup(e->d_name);
        free(path);
    }
    if (d)
        closedir(d);
    qsort(names, (size_t)n, sizeof *names, compare_names);
    char *list = tr_strdup(n ? "" : "none");
    for (int i = 0; i < n; i++) {
        char *longer = tr_strdup_printf("%s%s%s", list, i ? ", " : "", names[i]);
        free(list);
        free(names[i]);
        list = longer;
    }
    return list;
}

/* Absolute, here, or nowhere else: the tokenizer then names the file it cannot read (dataset.h). */
char *tr_data_find_file(const char *path, const char *dir)
{
    if (!path)
        return NULL;
    char *in_datasets = tr_strdup_printf("%s/%s", dir, path);
    if (path[0] != '/' && access(path, F_OK) != 0 && access(in_datasets, F_OK) == 0)
        return in_datasets;
    free(in_datasets);
    return tr_strdup(path);
}

/* The tokenizer text is read with: the recipe's data.tokenizer unless its kind is none, else
 * the definition's tokenizer:. */
static int recipe_text_setup(const struct tr_recipe *r, const char *dir, const struct tr_data_def *def,
                             struct text_setup *ts, struct tr_diag *diag)
{
    *ts = (struct text_setup){.max_len = r->model.max_len};
    if (!is_text(def->format))
        return 0;
    if (r->data.tokenizer.kind == TR_TOK_NONE && def->tokenizer.kind == TR_TOK_NONE) {
        tr_diag_add(diag, tr_data_key_where(r, "data.tokenizer.kind"), "data.tokenizer.kind: none, and %s names no "
                    "tokenizer:; text data is read through one: set data.tokenizer (bytes, chars, wordpiece "
                    "or gpt2-bpe), or tokenizer: in the definition", def->file);
        return TR_EINVAL;
    }
    if (r->data.tokenizer.kind == TR_TOK_NONE) {
        ts->kind = def->tokenizer.kind;
        ts->vocab = def->tokenizer.vocab ? tr_strdup(def->tokenizer.vocab) : NULL;
        ts->merges = def->tokenizer.merges ? tr_strdup(def->tokenizer.merges) : NULL;
        ts->lowercase = def->tokenizer.lowercase;
        return 0;
    }
    ts->kind = r->data.tokenizer.kind;
    ts->lowercase = r->data.tokenizer.lowercase;
    ts->vocab = tr_data_find_file(r->data.tokenizer.vocab, dir);
    ts->merges = tr_data_find_file(r->data.tokenizer.merges, dir);
    return 0;
}

/* datasets_dir/<name>/dataset.yaml, parsed into def; *path is the file's (caller frees). */
static int named_definition(const struct tr_recipe *r, const char *dir, struct tr_data_def *def, char **path,
                            struct tr_diag *diag)
{
    const char *name = r->data.dataset;
    struct tr_where at = tr_data_key_where(r, "data.dataset");
    *path = tr_strdup_printf("%s/%s/dataset.yaml", dir, name);
    struct stat st;
    if (!tr_data_is_folder_name(name) || stat(*path, &st) != 0) {
        char *known = known_datasets(dir);
        tr_diag_add(diag, at, "data.dataset: no data set '%s' (no %s); the data sets in %s: %s", name, *path,
                    dir, known);
        free(known);
        memset(def, 0, sizeof *def);
        return TR_EINVAL;
    }
    int rc = tr_data_def_parse(*path, def, diag);
    if (!rc && def->name[0] && strcmp(def->name, name)) {
        tr_diag_add(diag, (struct tr_where){.file = *path}, "name: '%s', but the folder is '%s'; they must "
                    "be the same", def->name, name);
        rc = TR_EINVAL;
    }
    return rc;
}

/* The recipe's definition: data.dataset's, or one made of its inline data.train/valid/test. */
static int recipe_definition(const struct tr_recipe *r, const char *dir, struct tr_data_def *def,
                             struct tr_diag *diag)
{
    if (r->data.dataset) {
        char *path;
        int rc = named_definition(r, dir, def, &path, diag);
        free(path);
        return rc;
    }
    if (r->data.train.source)
        return tr_data_def_inline(r, def, diag);
    memset(def, 0, sizeof *def);
    tr_diag_add(diag, tr_data_key_where(r, "data.dataset"), "data: no training data; set data.dataset or "
                "data.train.source");
    return TR_EINVAL;
}

int tr_data_load(const struct tr_recipe *r, const char *datasets_dir, struct tr_data *out,
                 struct tr_diag *diag)
{
    return tr_data_load_showing(r, datasets_dir, stderr, out, diag);
}

int tr_data_load_showing(const struct tr_recipe *r, const char *datasets_dir, FILE *progress, struct tr_data *out,
                         struct tr_diag *diag)
{
    memset(out, 0, sizeof *out);
    const char *dir = datasets_dir ? datasets_dir : "datasets";
    struct tr_data_def def;
    struct text_setup ts = {0};
    int rc = recipe_definition(r, dir, &def, diag);
    if (!rc)
        rc = recipe_text_setup(r, dir, &def, &ts, diag);
    struct tr_data_refresh_options o;
    tr_data_refresh_options_of(r, &o);
    o.progress = progress;
    if (!rc)
        rc = load_def(&def, &ts, &o, out, diag);
    text_setup_free(&ts);
    tr_data_def_free(&def);
    if (rc)
        tr_data_free(out);
    return rc;
}

int tr_data_refresh(const struct tr_recipe *r, const char *datasets_dir, struct tr_data *out,
                    struct tr_diag *diag)
{
    memset(out, 0, sizeof *out);
    struct tr_data_def def;
    int rc = recipe_definition(r, datasets_dir ? datasets_dir : "datasets", &def, diag);
    struct tr_data_refresh_options o;
    tr_data_refresh_options_of(r, &o);
    if (!rc)
        rc = refresh(&def, &o, out, diag);
    tr_data_def_free(&def);
    if (rc)
        tr_data_free(out);
    return rc;
}

static void free_split(struct tr_split *s)
{
    free(s->x);
    free(s->pixels);
    tr_cache_free(s->y, s->map, s->map_bytes);
    tr_cache_free(s->tokens, s->map, s->map_bytes);
    tr_cache_free(s->offsets, s->map, s->map_bytes);
    tr_cache_unmap(s->map, s->map_bytes);
}

void tr_data_print_warnings(const struct tr_data *d, FILE *out)
{
    for (int i = 0; i < d->warnings.n; i++) {
        char *line = tr_diag_line(&d->warnings, i);
        fprintf(out, "trainrun: warning: %s\n", line);
        free(line);
    }
}

void tr_data_free(struct tr_data *d)
{
    free_split(&d->train);
    free_split(&d->valid);
    free_split(&d->test);
    for (int i = 0; d->class_names && d->class_names[i]; i++)
        free(d->class_names[i]);
    free(d->class_names);
    free(d->norm.mean);
    free(d->norm.std);
    tr_tokenizer_free(d->tokenizer);
    free(d->tokenizer_files[0]);
    free(d->tokenizer_files[1]);
    tr_diag_free(&d->warnings);
    tr_data_origins_free(d);
    memset(d, 0, sizeof *d);
}
