/* dataset.yaml → struct tr_data_def (definition.h). A small walker of its own over libyaml's
 * document tree: the recipe's schema machinery (src/recipe/) describes recipes, not data sets.
 * Every problem is collected with its file:line:col before the definition is refused. */
#include "data/definition.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "recipe/recipe.h"
#include "recipe/units.h"

#define MAX_DEFINITION_BYTES (1 << 20)   /* a definition is a page of YAML */
#define MAX_CLASSES (1 << 24)

struct parser {
    const char *file;
    const char *dir;              /* the definition's folder, "" for the current one */
    yaml_document_t doc;
    struct tr_diag *diag;
    int errors;
    struct tr_data_def *def;
};

static struct tr_where where_of(const struct parser *p, const yaml_node_t *n)
{
    struct tr_where w = {.file = p->file};
    if (n) {
        w.line = (int)n->start_mark.line + 1;
        w.col = (int)n->start_mark.column + 1;
    }
    return w;
}

static void problem(struct parser *p, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct parser *p, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tr_diag_vadd(p->diag, where_of(p, n), fmt, ap);
    va_end(ap);
    p->errors++;
}

static yaml_node_t *node_at(struct parser *p, int id)
{
    return yaml_document_get_node(&p->doc, id);
}

/* The text of a scalar, or NULL after saying that key wanted one. */
static const char *scalar(struct parser *p, const yaml_node_t *n, const char *key)
{
    if (n->type != YAML_SCALAR_NODE) {
        problem(p, n, "%s: expected a single value, not a %s", key,
                n->type == YAML_MAPPING_NODE ? "mapping" : "list");
        return NULL;
    }
    return (const char *)n->data.scalar.value;
}

static bool number(struct parser *p, const yaml_node_t *n, const char *key, double min, double *out)
{
    const char *s = scalar(p, n, key);
    if (!s)
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < min) {
        problem(p, n, "%s: '%s' is not a number of at least %g", key, s, min);
        return false;
    }
    *out = v;
    return true;
}

static bool whole(struct parser *p, const yaml_node_t *n, const char *key, int64_t min, int64_t max,
                  int64_t *out)
{
    const char *s = scalar(p, n, key);
    if (!s)
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) {
        problem(p, n, "%s: '%s' is not a whole number from %lld to %lld", key, s, (long long)min,
                (long long)max);
        return false;
    }
    *out = v;
    return true;
}

/* ---- mappings ---------------------------------------------------------------------------- */

typedef void key_handler(struct parser *p, const char *key, yaml_node_t *value, void *ctx);

static void unknown_key(struct parser *p, const yaml_node_t *k, const char *section, const char *key,
                        const char *const *names)
{
    const char *best = NULL;
    int best_d = 3;
    for (int i = 0; names[i]; i++) {
        int d = tr_edit_distance(key, names[i]);
        if (d < best_d)
            best = names[i], best_d = d;
    }
    if (best)
        problem(p, k, "unknown key '%s%s'; did you mean '%s%s'?", section, key, section, best);
    else {
        char list[512] = "";
        for (int i = 0; names[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
        problem(p, k, "unknown key '%s%s'; %s has %s", section, key, *section ? section : "a definition",
                list);
    }
}

/* Calls handle for each key of map, after checking it is one of names and given once.
 * section ("split.") prefixes keys in messages. */
static void walk(struct parser *p, yaml_node_t *map, const char *section, const char *const *names,
                 key_handler *handle, void *ctx)
{
    if (map->type != YAML_MAPPING_NODE) {
        problem(p, map, "%s: expected a mapping of %s…", *section ? section : "the definition", names[0]);
        return;
    }
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
        yaml_node_t *k = node_at(p, pair->key), *v = node_at(p, pair->value);
        if (k->type != YAML_SCALAR_NODE) {
            problem(p, k, "a key must be a name");
            continue;
        }
        const char *key = (const char *)k->data.scalar.value;
        bool repeated = false;
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pair && !repeated; q++) {
            yaml_node_t *k2 = node_at(p, q->key);
            repeated = k2->type == YAML_SCALAR_NODE && !strcmp((const char *)k2->data.scalar.value, key);
        }
        int i = 0;
        while (names[i] && strcmp(names[i], key))
            i++;
        if (repeated)
            problem(p, k, "'%s%s' is given twice", section, key);
        else if (!names[i])
            unknown_key(p, k, section, key, names);
        else
            handle(p, key, v, ctx);
    }
}

/* ---- files ------------------------------------------------------------------------------- */

static char *resolve(struct parser *p, const yaml_node_t *n, const char *source)
{
    if (!strncmp(source, "file://", 7))
        source += 7;
    if (!strncmp(source, "http://", 7) || !strncmp(source, "https://", 8)) {
        problem(p, n, "source: downloads are not supported yet; install the file and name its path");
        return NULL;
    }
    if (!*source) {
        problem(p, n, "source: empty path");
        return NULL;
    }
    if (source[0] == '/' || !*p->dir)
        return tr_strdup(source);
    return tr_strdup_printf("%s/%s", p->dir, source);
}

static void set_sha256(struct parser *p, const yaml_node_t *n, struct tr_data_file *f)
{
    const char *s = scalar(p, n, "sha256");
    if (!s)
        return;
    size_t len = strlen(s);
    bool hex = len == 64;
    for (size_t i = 0; hex && i < len; i++)
        hex = strchr("0123456789abcdefABCDEF", s[i]) != NULL;
    if (!hex) {
        problem(p, n, "sha256: expected 64 hexadecimal digits, got '%s'", s);
        return;
    }
    for (size_t i = 0; i < 64; i++)
        f->sha256[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
    f->sha256[64] = '\0';
    free(f->pinned_by);
    f->pinned_by = tr_strdup_printf("%s:%d:%d", p->file, (int)n->start_mark.line + 1,
                                    (int)n->start_mark.column + 1);
}

static void on_file_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    struct tr_data_file *f = ctx;
    if (!strcmp(key, "sha256")) {
        set_sha256(p, v, f);
        return;
    }
    const char *s = scalar(p, v, key);
    if (s) {
        free(f->path);
        f->path = resolve(p, v, s);
    }
}

static const char *const file_keys[] = {"source", "sha256", NULL};

static void on_source_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    struct tr_data_source *src = ctx;
    if (!strcmp(key, "images") || !strcmp(key, "labels")) {
        char section[16];
        snprintf(section, sizeof section, "%s.", key);
        walk(p, v, section, file_keys, on_file_key, !strcmp(key, "images") ? &src->data : &src->labels);
        if (!strcmp(key, "images") ? !src->data.path : !src->labels.path)
            problem(p, v, "%s: source: missing", key);
    } else {
        on_file_key(p, key, v, &src->data);
    }
}

static void parse_source(struct parser *p, const char *split, yaml_node_t *v, struct tr_data_source *src)
{
    static const char *const names[] = {"source", "sha256", "images", "labels", NULL};
    char section[16];
    snprintf(section, sizeof section, "%s.", split);
    src->given = true;
    walk(p, v, section, names, on_source_key, src);
}

/* ---- the other sections ------------------------------------------------------------------ */

static void on_split_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    struct tr_data_def *def = ctx;
    if (!strcmp(key, "seed")) {
        int64_t seed;
        if (whole(p, v, "split.seed", 0, INT64_MAX, &seed))
            def->split_seed = (uint64_t)seed;
        return;
    }
    double x;
    char name[16];
    snprintf(name, sizeof name, "split.%s", key);
    if (!number(p, v, name, 0, &x))
        return;
    if (x >= 1 && x != floor(x)) {
        problem(p, v, "%s: %g is neither a fraction below 1 nor a whole number of samples", name, x);
        return;
    }
    *(!strcmp(key, "valid") ? &def->split_valid : &def->split_test) = x;
}

static void on_normalize_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    struct tr_data_def *def = ctx;
    double scale;
    if (number(p, v, "normalize.scale", 0, &scale)) {
        if (scale == 0) {
            problem(p, v, "normalize.scale: must be more than 0");
            return;
        }
        def->norm = TR_NORM_SCALE;
        def->scale = scale;
    }
}

static void parse_normalize(struct parser *p, yaml_node_t *v, struct tr_data_def *def)
{
    static const char *const names[] = {"scale", NULL};
    if (v->type == YAML_MAPPING_NODE) {
        walk(p, v, "normalize.", names, on_normalize_key, def);
        return;
    }
    const char *s = scalar(p, v, "normalize");
    if (!s)
        return;
    if (!strcmp(s, "none"))
        def->norm = TR_NORM_NONE;
    else if (!strcmp(s, "standardize"))
        def->norm = TR_NORM_STANDARDIZE;
    else
        problem(p, v, "normalize: expected none, standardize or {scale: N}, got '%s'", s);
}

static void parse_shape(struct parser *p, yaml_node_t *v, struct tr_data_def *def)
{
    if (v->type != YAML_SEQUENCE_NODE) {
        problem(p, v, "shape: expected a list of dimensions, like [1, 28, 28]");
        return;
    }
    yaml_node_item_t *start = v->data.sequence.items.start, *top = v->data.sequence.items.top;
    if (top - start < 1 || top - start > TR_DATA_RANK_MAX) {
        problem(p, v, "shape: expected 1 to %d dimensions, got %d", TR_DATA_RANK_MAX, (int)(top - start));
        return;
    }
    def->shape_rank = 0;
    for (yaml_node_item_t *it = start; it < top; it++)
        if (!whole(p, node_at(p, *it), "shape", 1, INT32_MAX, &def->shape[def->shape_rank++]))
            def->shape_rank = 0;
}

static void parse_class_names(struct parser *p, yaml_node_t *v, struct tr_data_def *def)
{
    if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.top == v->data.sequence.items.start) {
        problem(p, v, "class_names: expected a list of names, one a class in label order");
        return;
    }
    yaml_node_item_t *start = v->data.sequence.items.start, *top = v->data.sequence.items.top;
    int n = (int)(top - start);
    char **names = tr_xcalloc((size_t)n + 1, sizeof *names);
    for (int i = 0; i < n; i++) {
        yaml_node_t *item = node_at(p, start[i]);
        const char *s = scalar(p, item, "class_names");
        names[i] = tr_strdup(s ? s : "");
        for (int j = 0; s && j < i; j++)
            if (!strcmp(names[j], s))
                problem(p, item, "class_names: '%s' is named twice (classes %d and %d)", s, j, i);
    }
    def->class_names = names;
}

static void parse_name(struct parser *p, yaml_node_t *v, struct tr_data_def *def)
{
    const char *s = scalar(p, v, "name");
    if (!s)
        return;
    size_t len = strlen(s);
    bool ok = len > 0 && len < sizeof def->name && s[0] != '.';
    for (size_t i = 0; ok && i < len; i++)
        ok = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]) != NULL;
    if (!ok)
        problem(p, v, "name: '%s' is not a folder name (letters, digits, '.', '_', '-'; under %d characters)",
                s, (int)sizeof def->name);
    else
        memcpy(def->name, s, len + 1);
}

static void parse_choice(struct parser *p, yaml_node_t *v, const char *key, const char *const *names,
                         int *out)
{
    const char *s = scalar(p, v, key);
    if (!s)
        return;
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], s)) {
            *out = i;
            return;
        }
    char list[256] = "";
    for (int i = 0; names[i]; i++)
        if (*names[i])
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", *list ? ", " : "", names[i]);
    problem(p, v, "%s: expected one of %s, got '%s'", key, list, s);
}

static void on_top_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    /* Indexed like enum tr_format and enum tr_csv_header; "" marks formats this reader lacks. */
    static const char *const formats[] = {"", "csv", "", "", "", "idx", "", NULL};
    static const char *const headers[] = {"auto", "none", "sklearn", "names", NULL};
    static const char *const split_keys[] = {"valid", "test", "seed", NULL};
    struct tr_data_def *def = ctx;
    int64_t n;
    if (!strcmp(key, "name"))
        parse_name(p, v, def);
    else if (!strcmp(key, "description") || !strcmp(key, "licence") || !strcmp(key, "homepage"))
        (void)scalar(p, v, key);
    else if (!strcmp(key, "package")) {
        const char *s = scalar(p, v, key);
        if (s)
            def->package = tr_strdup(s);
    } else if (!strcmp(key, "format"))
        parse_choice(p, v, key, formats, &def->format);
    else if (!strcmp(key, "source") || !strcmp(key, "sha256")) {
        def->all.given = true;
        on_file_key(p, key, v, &def->all.data);
    } else if (!strcmp(key, "train"))
        parse_source(p, key, v, &def->train);
    else if (!strcmp(key, "valid"))
        parse_source(p, key, v, &def->valid);
    else if (!strcmp(key, "test"))
        parse_source(p, key, v, &def->test);
    else if (!strcmp(key, "header"))
        parse_choice(p, v, key, headers, &def->header);
    else if (!strcmp(key, "label")) {
        const char *s = scalar(p, v, key);
        if (s) {
            def->label = tr_strdup(s);
            def->label_at = where_of(p, v);
        }
    } else if (!strcmp(key, "num_classes")) {
        if (whole(p, v, key, 1, MAX_CLASSES, &n))
            def->nclasses = (int)n;
    } else if (!strcmp(key, "class_names"))
        parse_class_names(p, v, def);
    else if (!strcmp(key, "shape"))
        parse_shape(p, v, def);
    else if (!strcmp(key, "split")) {
        def->split_at = where_of(p, v);
        walk(p, v, "split.", split_keys, on_split_key, def);
    } else if (!strcmp(key, "normalize"))
        parse_normalize(p, v, def);
}

/* ---- whole-definition checks ------------------------------------------------------------- */

static void check_source(struct parser *p, const yaml_node_t *root, const char *what,
                         const struct tr_data_source *s, int format)
{
    if (!s->given)
        return;
    if (format == TR_FMT_IDX && (!s->data.path || !s->labels.path))
        problem(p, root, "%s: an idx data set names images: and labels: files", what);
    else if (format == TR_FMT_CSV && (s->labels.path || !s->data.path))
        problem(p, root, "%s: a csv data set names one source: file", what);
}

static void check_definition(struct parser *p, const yaml_node_t *root)
{
    struct tr_data_def *def = p->def;
    if (!def->format) {
        problem(p, root, "format: missing; csv or idx");
        return;
    }
    if (def->all.given && (def->train.given || def->valid.given || def->test.given))
        problem(p, root, "give either source: (one file, split by split:) or train: (a file a split), "
                         "not both");
    else if (!def->all.given && !def->train.given)
        problem(p, root, "no data: give source: (one file, split by split:) or train:");
    if (def->all.given && def->format == TR_FMT_IDX)
        problem(p, root, "source: an idx data set names train: {images:, labels:}");
    else
        check_source(p, root, "source", &def->all, def->format);
    check_source(p, root, "train", &def->train, def->format);
    check_source(p, root, "valid", &def->valid, def->format);
    check_source(p, root, "test", &def->test, def->format);
    for (int i = 0; i < 2; i++) {
        bool own_file = i ? def->test.given : def->valid.given;
        if (own_file && (i ? def->split_test : def->split_valid) > 0) {
            tr_diag_add(p->diag, def->split_at, "split.%s: the data set has a %s: file of its own",
                        i ? "test" : "valid", i ? "test" : "valid");
            p->errors++;
        }
    }
    int named = 0;
    while (def->class_names && def->class_names[named])
        named++;
    if (named && def->nclasses && named != def->nclasses)
        problem(p, root, "class_names names %d classes, num_classes says %d", named, def->nclasses);
    if (named)
        def->nclasses = named;
    if (def->format == TR_FMT_IDX && (def->label || def->header))
        problem(p, root, "%s: is for csv data sets", def->label ? "label" : "header");
}

/* ---- reading ----------------------------------------------------------------------------- */

static char *read_small_file(const char *path, size_t *len, struct tr_diag *diag)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tr_diag_add(diag, (struct tr_where){.file = path}, "cannot read: %s", strerror(errno));
        return NULL;
    }
    char *text = tr_xmalloc(MAX_DEFINITION_BYTES + 1);
    *len = fread(text, 1, MAX_DEFINITION_BYTES + 1, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad || *len > MAX_DEFINITION_BYTES) {
        tr_diag_add(diag, (struct tr_where){.file = path},
                    bad ? "cannot read the file" : "larger than a data set definition can be (1 MiB)");
        free(text);
        return NULL;
    }
    text[*len] = '\0';
    return text;
}

static int load_document(struct parser *p, const char *text, size_t len)
{
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int ok = yaml_parser_load(&parser, &p->doc);
    if (!ok) {
        yaml_node_t at = {.start_mark = parser.problem_mark};
        problem(p, &at, "invalid YAML: %s", parser.problem ? parser.problem : "syntax error");
    }
    yaml_parser_delete(&parser);
    return ok ? 0 : -1;
}

int tr_data_def_parse(const char *path, struct tr_data_def *def, struct tr_diag *diag)
{
    memset(def, 0, sizeof *def);
    def->file = tr_strdup(path);
    size_t len;
    char *text = read_small_file(path, &len, diag);
    if (!text)
        return TR_EIO;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? tr_strdup_printf("%.*s", (int)(slash - path), path) : tr_strdup("");
    if (slash && slash == path)   /* "/dataset.yaml" */
        strcpy(dir, "/");
    struct parser p = {.file = def->file, .dir = dir, .diag = diag, .def = def};
    static const char *const keys[] = {
        "name", "description", "licence", "homepage", "package", "format", "source", "sha256",
        "train", "valid", "test", "header", "label", "num_classes", "class_names", "shape", "split",
        "normalize", NULL};
    if (load_document(&p, text, len) == 0) {
        yaml_node_t *root = yaml_document_get_root_node(&p.doc);
        if (!root)
            problem(&p, NULL, "the definition is empty");
        else {
            walk(&p, root, "", keys, on_top_key, def);
            if (!p.errors)
                check_definition(&p, root);
        }
        yaml_document_delete(&p.doc);
    }
    free(text);
    free(dir);
    return p.errors ? TR_EINVAL : 0;
}

static void free_file(struct tr_data_file *f)
{
    free(f->path);
    free(f->pinned_by);
}

static void free_source(struct tr_data_source *s)
{
    free_file(&s->data);
    free_file(&s->labels);
}

void tr_data_def_free(struct tr_data_def *def)
{
    free(def->file);
    free(def->package);
    free_source(&def->all);
    free_source(&def->train);
    free_source(&def->valid);
    free_source(&def->test);
    free(def->label);
    for (int i = 0; def->class_names && def->class_names[i]; i++)
        free(def->class_names[i]);
    free(def->class_names);
    memset(def, 0, sizeof *def);
}
