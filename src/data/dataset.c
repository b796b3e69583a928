/* From a recipe's data section to struct tr_data (dataset.h): find the definition (a named
 * dataset.yaml, or the recipe's inline CSV files), read its tables (files.c), cut the
 * validation and test sets from the train pool with the definition's own split seed, and
 * normalise every split with statistics of the train split alone. */
#include "data/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/definition.h"
#include "data/files.h"
#include "data/shuffle.h"
#include "recipe/schema.h"

/* Inline data sets are cut like a definition's defaults (datasets/digits/dataset.yaml). */
#define INLINE_VALID 0.1
#define INLINE_TEST 0.2

int64_t tr_split_features(const struct tr_split *s)
{
    int64_t f = 1;
    for (int i = 0; i < s->rank; i++)
        f *= s->dims[i];
    return f;
}

/* ---- reading the tables ------------------------------------------------------------------ */

static int read_table(const struct tr_data_def *def, const struct tr_data_source *src, struct tr_table *t,
                      struct tr_diag *diag)
{
    unsigned char *data = NULL, *labels = NULL;
    size_t data_len = 0, labels_len = 0;
    int rc = tr_data_read(&src->data, def->package, &data, &data_len, diag);
    if (!rc && def->format == TR_FMT_IDX)
        rc = tr_data_read(&src->labels, def->package, &labels, &labels_len, diag);
    if (!rc && def->format == TR_FMT_IDX)
        rc = tr_idx_parse(src->data.path, data, data_len, src->labels.path, labels, labels_len,
                          def->nclasses, t, diag);
    else if (!rc) {
        struct tr_csv_options o = {.header = def->header, .label = def->label, .label_at = def->label_at,
                                   .nclasses = def->nclasses};
        rc = tr_csv_parse(src->data.path, (const char *)data, data_len, &o, t, diag);
    }
    free(data);
    free(labels);
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

/* Split s gets rows ids[0..n) of t, in that order. */
static int take_rows(const struct tr_table *t, const int64_t *ids, int64_t n, struct tr_split *s,
                     struct tr_diag *diag)
{
    s->n = n;
    if (!n)
        return 0;
    size_t f = (size_t)t->nfeatures;
    s->x = malloc((size_t)n * f * sizeof(float));
    s->y = malloc((size_t)n * sizeof(int32_t));
    if (!s->x || !s->y) {
        tr_diag_add(diag, (struct tr_where){0}, "out of memory splitting the data (%zu bytes)",
                    (size_t)n * f * sizeof(float));
        return TR_ENOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        memcpy(s->x + (size_t)i * f, t->x + (size_t)ids[i] * f, f * sizeof(float));
        s->y[i] = t->y[ids[i]];
    }
    return 0;
}

/* Moves a whole table into a split. */
static void adopt(struct tr_table *t, struct tr_split *s)
{
    s->n = t->n;
    s->x = t->x;
    s->y = t->y;
    t->x = NULL;
    t->y = NULL;
}

/* Cuts test (first) and valid (next) from the pool's order shuffled by the split seed; the
 * rest is train. Each split keeps file order. Drawing test first keeps the test set the same
 * when only the valid size changes. */
static int cut(const struct tr_data_def *def, const struct tr_table *pool, int64_t ntest, int64_t nvalid,
               struct tr_data *d, struct tr_diag *diag)
{
    int64_t n = pool->n;
    if (ntest + nvalid >= n) {
        tr_diag_add(diag, def->split_at, "%s: %lld valid and %lld test samples leave none of %lld to "
                    "train on", def->file ? "split" : "data.train.source", (long long)nvalid, (long long)ntest,
                    (long long)n);
        return TR_EINVAL;
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

static void scale_split(struct tr_split *s, int64_t f, float scale)
{
    for (int64_t i = 0; i < s->n * f; i++)
        s->x[i] /= scale;
}

static void standardize_split(struct tr_split *s, int64_t f, const float *mean, const float *std)
{
    for (int64_t i = 0; i < s->n; i++)
        for (int64_t j = 0; j < f; j++)
            s->x[i * f + j] = (s->x[i * f + j] - mean[j]) / std[j];
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
            sum[j] += train->x[i * f + j];
    for (int64_t j = 0; j < f; j++)
        sum[j] /= (double)train->n;
    for (int64_t i = 0; i < train->n; i++)
        for (int64_t j = 0; j < f; j++) {
            double dev = train->x[i * f + j] - sum[j];
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
        paths[i] = src[i]->data.path;
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

static void name_from_path(const char *path, char name[64])
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strcspn(base, ".");
    snprintf(name, 64, "%.*s", (int)(n ? n : strlen(base)), base);
}

static int load_def(const struct tr_data_def *def, struct tr_data *out, struct tr_diag *diag)
{
    const struct tr_data_source *src[3] = {def->all.given ? &def->all : &def->train};
    int ntables = 1;
    if (def->valid.given)
        src[ntables++] = &def->valid;
    if (def->test.given)
        src[ntables++] = &def->test;
    struct tr_table t[3] = {{0}};
    int rc = 0;
    for (int i = 0; i < ntables && !rc; i++)
        rc = read_table(def, src[i], &t[i], diag);
    if (!rc)
        rc = build(def, t, src, ntables, out, diag);
    for (int i = 0; i < ntables; i++)
        tr_table_free(&t[i]);
    if (rc)
        return rc;
    if (def->name[0])
        memcpy(out->name, def->name, sizeof out->name);
    else if (def->file) {   /* the folder's name */
        const char *end = strrchr(def->file, '/'), *start = end;
        while (start && start > def->file && start[-1] != '/')
            start--;
        snprintf(out->name, sizeof out->name, "%.*s", end ? (int)(end - start) : 1, end ? start : ".");
    }
    return 0;
}

int tr_data_load_definition(const char *path, struct tr_data *out, struct tr_diag *diag)
{
    memset(out, 0, sizeof *out);
    struct tr_data_def def;
    int rc = tr_data_def_parse(path, &def, diag);
    if (!rc)
        rc = load_def(&def, out, diag);
    tr_data_def_free(&def);
    if (rc)
        tr_data_free(out);
    return rc;
}

/* ---- from a recipe ----------------------------------------------------------------------- */

/* Where a recipe key's value came from, for messages about it. */
static struct tr_where key_where(const struct tr_recipe *r, const char *key)
{
    int k = tr_key_find(key);
    if (k < 0)
        return (struct tr_where){0};
    const struct tr_origin *o = &r->origin[k];
    if (o->kind == TR_ORIGIN_OVERRIDE)
        return (struct tr_where){.arg = o->file};
    if (o->kind == TR_ORIGIN_DEFAULT || o->kind == TR_ORIGIN_RESET || o->kind == TR_ORIGIN_DERIVED)
        return (struct tr_where){0};
    return (struct tr_where){.file = o->file, .line = o->line, .col = o->col};
}

static bool is_csv_name(const char *path)
{
    size_t n = strlen(path);
    return (n > 4 && !strcmp(path + n - 4, ".csv")) || (n > 7 && !strcmp(path + n - 7, ".csv.gz"));
}

static int inline_source(const struct tr_recipe *r, const char *split, const struct tr_source *s,
                         struct tr_data_source *out, struct tr_diag *diag)
{
    char key[32];
    snprintf(key, sizeof key, "data.%s.source", split);
    const char *path = !strncmp(s->source, "file://", 7) ? s->source + 7 : s->source;
    if (!strncmp(path, "http://", 7) || !strncmp(path, "https://", 8)) {
        tr_diag_add(diag, key_where(r, key), "%s: downloads are not supported yet; download the file "
                    "and name its path", key);
        return TR_EINVAL;
    }
    if (s->format != TR_FMT_CSV && !(s->format == TR_FMT_AUTO && is_csv_name(path))) {
        if (s->format != TR_FMT_AUTO)   /* else the file's name is at fault: name the source */
            snprintf(key, sizeof key, "data.%s.format", split);
        tr_diag_add(diag, key_where(r, key), "%s: inline data is read as csv (.csv or .csv.gz); define "
                    "other formats in datasets/NAME/dataset.yaml", key);
        return TR_EINVAL;
    }
    if (s->text) {
        snprintf(key, sizeof key, "data.%s.text", split);
        tr_diag_add(diag, key_where(r, key), "%s: a numeric CSV's features are every column but the "
                    "label; text is for text data", key);
        return TR_EINVAL;
    }
    out->given = true;
    out->data.path = tr_strdup(path);
    if (s->sha256) {
        for (int i = 0; i < 64 && s->sha256[i]; i++)
            out->data.sha256[i] = (char)(s->sha256[i] >= 'A' && s->sha256[i] <= 'F'
                                             ? s->sha256[i] - 'A' + 'a' : s->sha256[i]);
        out->data.pinned_by = tr_strdup_printf("data.%s.sha256", split);
    }
    return 0;
}

static int inline_definition(const struct tr_recipe *r, struct tr_data_def *def, struct tr_diag *diag)
{
    memset(def, 0, sizeof *def);
    def->format = TR_FMT_CSV;
    def->header = TR_HEADER_AUTO;
    const struct tr_source *s[3] = {&r->data.train, &r->data.valid, &r->data.test};
    struct tr_data_source *d[3] = {&def->train, &def->valid, &def->test};
    static const char *const names[3] = {"train", "valid", "test"};
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        if (s[i]->source)
            rc = inline_source(r, names[i], s[i], d[i], diag);
        if (!rc && i && s[i]->label && (!s[0]->label || strcmp(s[i]->label, s[0]->label))) {
            char key[32];
            snprintf(key, sizeof key, "data.%s.label", names[i]);
            tr_diag_add(diag, key_where(r, key), "%s: every split's label is read from the column that "
                        "data.train.label names", key);
            rc = TR_EINVAL;
        }
    }
    def->label = tr_strdup(s[0]->label);
    def->label_at = key_where(r, "data.train.label");
    def->split_valid = def->valid.given ? 0 : INLINE_VALID;
    def->split_test = def->test.given ? 0 : INLINE_TEST;
    name_from_path(def->train.data.path ? def->train.data.path : "inline", def->name);
    return rc;
}

static bool is_folder_name(const char *s)
{
    size_t n = strlen(s);
    return n && n < 64 && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

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

static int load_named(const struct tr_recipe *r, const char *dir, struct tr_data *out, struct tr_diag *diag)
{
    const char *name = r->data.dataset;
    struct tr_where at = key_where(r, "data.dataset");
    char *path = tr_strdup_printf("%s/%s/dataset.yaml", dir, name);
    struct stat st;
    int rc = 0;
    if (!is_folder_name(name) || stat(path, &st) != 0) {
        char *known = known_datasets(dir);
        tr_diag_add(diag, at, "data.dataset: no data set '%s' (no %s); the data sets in %s: %s", name, path,
                    dir, known);
        free(known);
        free(path);
        return TR_EINVAL;
    }
    struct tr_data_def def;
    rc = tr_data_def_parse(path, &def, diag);
    if (!rc && def.name[0] && strcmp(def.name, name)) {
        tr_diag_add(diag, (struct tr_where){.file = path}, "name: '%s', but the folder is '%s'; they must "
                    "be the same", def.name, name);
        rc = TR_EINVAL;
    }
    if (!rc)
        rc = load_def(&def, out, diag);
    tr_data_def_free(&def);
    free(path);
    return rc;
}

int tr_data_load(const struct tr_recipe *r, const char *datasets_dir, struct tr_data *out,
                 struct tr_diag *diag)
{
    memset(out, 0, sizeof *out);
    int rc;
    if (r->data.dataset)
        rc = load_named(r, datasets_dir ? datasets_dir : "datasets", out, diag);
    else if (r->data.train.source) {
        struct tr_data_def def;
        rc = inline_definition(r, &def, diag);
        if (!rc)
            rc = load_def(&def, out, diag);
        tr_data_def_free(&def);
    } else {
        tr_diag_add(diag, key_where(r, "data.dataset"), "data: no training data; set data.dataset or "
                    "data.train.source");
        rc = TR_EINVAL;
    }
    if (rc)
        tr_data_free(out);
    return rc;
}

static void free_split(struct tr_split *s)
{
    free(s->x);
    free(s->y);
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
    memset(d, 0, sizeof *d);
}
