/* A recipe's inline data (data.train, data.valid, data.test) as a data set definition, the
 * same struct tr_data_def a dataset.yaml becomes (definition.h): every format a definition
 * reads from one file a split (csv, tsv, jsonl, text), checked before any file is read, so that
 * `trainrun check` refuses what the data stage would. dataset.c loads it like any other. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data/definition.h"
#include "data/fetch.h"
#include "recipe/schema.h"

/* Inline data sets are cut like a definition's defaults (datasets/digits/dataset.yaml). */
#define INLINE_VALID 0.1
#define INLINE_TEST 0.2

static const char *const split_names[3] = {"train", "valid", "test"};
static const char *const format_names[] = {"auto", "csv", "tsv", "jsonl", "text", "idx", "bin"};   /* enum tr_format */

struct tr_where tr_data_key_where(const struct tr_recipe *r, const char *key)
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

/* Whether data.<split>.<what> was given (by a conf file, the recipe or an override). */
static bool key_given(const struct tr_recipe *r, const char *split, const char *what)
{
    char key[40];
    snprintf(key, sizeof key, "data.%s.%s", split, what);
    int k = tr_key_find(key);
    return k >= 0 && r->origin[k].kind != TR_ORIGIN_DEFAULT && r->origin[k].kind != TR_ORIGIN_RESET;
}

static int key_problem(const struct tr_recipe *r, const char *split, const char *what, struct tr_diag *diag,
                       const char *fmt, const char *a, const char *b)
{
    char key[40];
    snprintf(key, sizeof key, "data.%s.%s", split, what);
    char *said = tr_strdup_printf(fmt, a, b);
    tr_diag_add(diag, tr_data_key_where(r, key), "%s: %s", key, said);
    free(said);
    return TR_EINVAL;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n > m && !strcasecmp(s + n - m, tail);
}

/* format: auto, by the file name (a URL's query aside): .csv, .tsv, .jsonl or .ndjson, .txt,
 * each also with .gz; TR_FMT_AUTO when the name says none of them. */
static int format_of_name(const char *path)
{
    static const struct { const char *ext; int format; } by_ext[] = {
        {".csv", TR_FMT_CSV}, {".tsv", TR_FMT_TSV}, {".jsonl", TR_FMT_JSONL}, {".ndjson", TR_FMT_JSONL},
        {".txt", TR_FMT_TEXT},
    };
    char *name = tr_strdup(path);
    name[strcspn(name, "?#")] = '\0';
    if (ends_with(name, ".gz"))
        name[strlen(name) - 3] = '\0';
    int format = TR_FMT_AUTO;
    for (size_t i = 0; i < sizeof by_ext / sizeof by_ext[0]; i++)
        if (ends_with(name, by_ext[i].ext))
            format = by_ext[i].format;
    free(name);
    return format;
}

/* The split's format: its format key's, else its file name's. */
static int split_format(const struct tr_recipe *r, const char *split, const struct tr_source *s, int *format,
                        struct tr_diag *diag)
{
    *format = s->format != TR_FMT_AUTO ? s->format : format_of_name(s->source);
    if (*format == TR_FMT_AUTO)
        return key_problem(r, split, "source", diag, "'%s' does not say its format (.csv, .tsv, .jsonl, .txt, each "
                           "maybe .gz); set data.%s.format", s->source, split);
    if (*format == TR_FMT_IDX || *format == TR_FMT_BIN)
        return key_problem(r, split, "format", diag, "%s data is not read inline; inline data is csv, tsv, jsonl "
                           "or text (%s files: define them in datasets/NAME/dataset.yaml, trainrun-dataset(5))",
                           format_names[*format], *format == TR_FMT_IDX ? "idx images: and labels:" : "bin");
    return 0;
}

static int inline_file(const struct tr_recipe *r, const char *split, const struct tr_source *s,
                       struct tr_data_source *out, struct tr_diag *diag)
{
    char key[32];
    snprintf(key, sizeof key, "data.%s.source", split);
    const char *path = !strncmp(s->source, "file://", 7) ? s->source + 7 : s->source;
    bool url = !strncasecmp(path, "http://", 7) || !strncasecmp(path, "https://", 8);
    if (!url && tr_fetch_is_url(path)) {
        tr_diag_add(diag, tr_data_key_where(r, key), "%s: '%.*s' URLs are not fetched; trainrun fetches https://, "
                    "http:// and file:// URLs only", key, (int)(strstr(path, "://") - path + 3), path);
        return TR_EINVAL;
    }
    out->given = true;
    struct tr_data_file *f = tr_data_source_add(out);
    *(url ? &f->url : &f->path) = tr_strdup(path);
    f->source_at = tr_data_key_where(r, key);
    if (s->sha256) {
        for (int i = 0; i < 64 && s->sha256[i]; i++)
            f->sha256[i] = (char)(s->sha256[i] >= 'A' && s->sha256[i] <= 'F' ? s->sha256[i] - 'A' + 'a'
                                                                            : s->sha256[i]);
        f->pinned_by = tr_strdup_printf("data.%s.sha256", split);
    }
    return 0;
}

/* A later split's field or option: the train split's, or an error when it says otherwise. */
static int same_as_train(const struct tr_recipe *r, int i, const char *what, bool differs, struct tr_diag *diag)
{
    if (!i || !key_given(r, split_names[i], what) || !differs)
        return 0;
    return key_problem(r, split_names[i], what, diag, "every split is read as data.train.%s says; %s", what,
                       "set it there, or drop it here");
}

static bool strings_differ(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b));
}

/* The keys that mean something for the split's format only. */
static int format_keys(const struct tr_recipe *r, int i, const struct tr_source *s, int format,
                       struct tr_diag *diag)
{
    const char *split = split_names[i];
    if (format != TR_FMT_CSV && key_given(r, split, "header"))
        return key_problem(r, split, "header", diag, "is for csv data, not %s%s", format_names[format],
                           format == TR_FMT_TSV ? " (a tsv file's first line names its fields)" : "");
    if (format != TR_FMT_CSV && key_given(r, split, "missing"))
        return key_problem(r, split, "missing", diag, "is for csv data, not %s%s", format_names[format], "");
    if (format == TR_FMT_CSV && s->text)
        return key_problem(r, split, "text", diag, "a csv table's features are every column but the label; "
                           "text is for tsv and jsonl data%s%s", "", "");
    if (format == TR_FMT_TEXT && (s->text || s->label))
        return key_problem(r, split, s->text ? "text" : "label", diag, "text data is running text for language "
                           "modelling: it has no fields%s%s", "", "");
    if (i || (format != TR_FMT_TSV && format != TR_FMT_JSONL))
        return 0;
    if (!s->text || !s->label)
        return key_problem(r, split, s->text ? "label" : "text", diag, "null; a %s file's samples need the field "
                           "holding their %s", format_names[format], s->text ? "class" : "text");
    if (!strcmp(s->text, s->label))
        return key_problem(r, split, "label", diag, "'%s' is data.train.text too; a sample's class is another "
                           "field%s", s->label, "");
    return 0;
}

/* The csv header choice as a definition's header: says it (enum tr_csv_header). */
static int csv_header(int choice)
{
    static const int header[] = {[TR_TABLE_HEADER_AUTO] = TR_HEADER_AUTO, [TR_TABLE_HEADER_TRUE] = TR_HEADER_NAMES,
                                 [TR_TABLE_HEADER_FALSE] = TR_HEADER_NONE,
                                 [TR_TABLE_HEADER_SKLEARN] = TR_HEADER_SKLEARN};
    return header[choice];
}

static void name_from_path(const char *path, char name[64])
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strcspn(base, ".");
    snprintf(name, 64, "%.*s", (int)(n ? n : strlen(base)), base);
}

int tr_data_def_inline(const struct tr_recipe *r, struct tr_data_def *def, struct tr_diag *diag)
{
    memset(def, 0, sizeof *def);
    const struct tr_source *s[3] = {&r->data.train, &r->data.valid, &r->data.test};
    struct tr_data_source *d[3] = {&def->train, &def->valid, &def->test};
    int rc = 0, format = TR_FMT_AUTO;
    for (int i = 0; i < 3 && !rc; i++) {
        if (!s[i]->source)
            continue;
        int f;
        rc = split_format(r, split_names[i], s[i], &f, diag);
        if (!rc && i && f != format)
            rc = key_problem(r, split_names[i], s[i]->format ? "format" : "source", diag, "%s data, but "
                             "data.train is %s; every split is read in one format", format_names[f],
                             format_names[format]);
        format = i ? format : f;
        if (!rc)
            rc = format_keys(r, i, s[i], format, diag);
        if (!rc)
            rc = same_as_train(r, i, "label", strings_differ(s[i]->label, s[0]->label), diag);
        if (!rc)
            rc = same_as_train(r, i, "text", strings_differ(s[i]->text, s[0]->text), diag);
        if (!rc)
            rc = same_as_train(r, i, "header", s[i]->header != s[0]->header, diag);
        if (!rc)
            rc = same_as_train(r, i, "missing", s[i]->missing != s[0]->missing, diag);
        if (!rc)
            rc = inline_file(r, split_names[i], s[i], d[i], diag);
    }
    def->format = format;
    def->header = format == TR_FMT_CSV ? csv_header(s[0]->header) : TR_HEADER_NAMES;
    def->missing = s[0]->missing;
    def->label = s[0]->label ? tr_strdup(s[0]->label) : NULL;
    def->label_at = tr_data_key_where(r, "data.train.label");
    def->text = s[0]->text ? tr_strdup(s[0]->text) : NULL;
    def->text_at = tr_data_key_where(r, "data.train.text");
    bool splits = format != TR_FMT_TEXT;   /* running text is not cut into samples to draw from */
    def->split_valid = def->valid.given || !splits ? 0 : INLINE_VALID;
    def->split_test = def->test.given || !splits ? 0 : INLINE_TEST;
    const struct tr_data_file *first = def->train.nfiles ? &def->train.files[0] : NULL;
    name_from_path(!first ? "inline" : first->path ? first->path : first->url, def->name);
    return rc;
}

int tr_data_check_inline(const struct tr_recipe *r, struct tr_diag *diag)
{
    if (!r->data.train.source)
        return 0;
    struct tr_data_def def;
    int rc = tr_data_def_inline(r, &def, diag);
    tr_data_def_free(&def);
    return rc;
}
