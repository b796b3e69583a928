/* dataset.yaml → struct tr_data_def (definition.h). A small walker of its own over libyaml's
 * document tree: the recipe's schema machinery (src/recipe/) describes recipes, not data sets.
 * Every problem is collected with its file:line:col before the definition is refused; sources
 * are resolved last, once it is known whether a prepare: script makes them. */
#include "data/definition.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

#include "core/input.h"
#include "data/cache.h"
#include "data/fetch.h"
#include "recipe/recipe.h"
#include "recipe/units.h"
#include "recipe/yaml_load.h"

#define MAX_DEFINITION_BYTES (1 << 20)   /* a definition is a page of YAML */
#define MAX_CLASSES (1 << 24)

/* The top-level keys, in the order a definition usually gives them. */
static const char *const top_keys[] = {
    "name", "description", "licence", "homepage", "package", "prepare", "format", "source", "sha256",
    "train", "valid", "test", "header", "missing", "text", "label", "num_classes", "class_names", "shape", "split",
    "normalize", "tokenizer", NULL};
#define NTOP_KEYS (sizeof top_keys / sizeof top_keys[0] - 1)

struct parser {
    const char *file;
    const char *dir;              /* the definition's folder, "" for the current one */
    yaml_document_t doc;
    struct tr_diag *diag;
    int errors;
    struct tr_data_def *def;
    const yaml_node_t *given[NTOP_KEYS];   /* each top-level key's value, once seen */
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

/* A source as written: an https:// or http:// URL, fetched into the download cache before it is
 * read (dataset.c); or a path, less any file:// prefix, resolved once the whole definition is
 * read (resolve_sources), since prepare: decides the folder a relative one is found in. */
static void set_source(struct parser *p, const yaml_node_t *n, const char *source, struct tr_data_file *f)
{
    free(f->path);
    free(f->url);
    f->path = f->url = NULL;
    f->source_at = where_of(p, n);
    if (!strncasecmp(source, "http://", 7) || !strncasecmp(source, "https://", 8)) {
        f->url = tr_strdup(source);
        return;
    }
    if (!strncmp(source, "file://", 7))
        source += 7;
    else if (tr_fetch_is_url(source)) {
        problem(p, n, "source: '%.*s' URLs are not fetched; trainrun fetches https://, http:// and file:// URLs "
                "only", (int)(strstr(source, "://") - source + 3), source);
        return;
    }
    if (!*source) {
        problem(p, n, "source: empty path");
        return;
    }
    f->path = tr_strdup(source);
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

/* lines: [first, last], 1-based, both read. */
static void set_lines(struct parser *p, yaml_node_t *n, struct tr_data_file *f)
{
    if (n->type != YAML_SEQUENCE_NODE || n->data.sequence.items.top - n->data.sequence.items.start != 2) {
        problem(p, n, "lines: expected [first, last], line numbers from 1, both ends read");
        return;
    }
    yaml_node_item_t *start = n->data.sequence.items.start;
    int64_t first, last;
    if (!whole(p, node_at(p, start[0]), "lines", 1, INT64_MAX, &first) ||
        !whole(p, node_at(p, start[1]), "lines", 1, INT64_MAX, &last))
        return;
    if (first > last) {
        problem(p, n, "lines: [%lld, %lld] ends before it starts", (long long)first, (long long)last);
        return;
    }
    f->first_line = first;
    f->last_line = last;
    f->lines_at = where_of(p, n);
}

static void on_file_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    struct tr_data_file *f = ctx;
    if (!strcmp(key, "sha256")) {
        set_sha256(p, v, f);
        return;
    }
    if (!strcmp(key, "lines")) {
        set_lines(p, v, f);
        return;
    }
    const char *s = scalar(p, v, key);
    if (s)
        set_source(p, v, s, f);
}

static const char *const file_keys[] = {"source", "sha256", "lines", NULL};

struct tr_data_file *tr_data_source_add(struct tr_data_source *s)
{
    s->files = tr_xrealloc(s->files, ((size_t)s->nfiles + 1) * sizeof *s->files);
    memset(&s->files[s->nfiles], 0, sizeof *s->files);
    return &s->files[s->nfiles++];
}

/* The split's one file: its first, made when the split names none yet. */
static struct tr_data_file *first_file(struct tr_data_source *s)
{
    return s->nfiles ? &s->files[0] : tr_data_source_add(s);
}

static void on_source_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    struct tr_data_source *src = ctx;
    if (!strcmp(key, "images") || !strcmp(key, "labels")) {
        static const char *const idx_file_keys[] = {"source", "sha256", NULL};
        struct tr_data_file *f = !strcmp(key, "images") ? first_file(src) : &src->labels;
        src->pair = true;
        char section[16];
        snprintf(section, sizeof section, "%s.", key);
        walk(p, v, section, idx_file_keys, on_file_key, f);
        if (!f->path && !f->url)
            problem(p, v, "%s: source: missing", key);
    } else {
        on_file_key(p, key, v, first_file(src));
    }
}

/* A split: one mapping, or (text formats) a list of {source, sha256, lines} read in order. */
static void parse_source(struct parser *p, const char *split, yaml_node_t *v, struct tr_data_source *src)
{
    static const char *const names[] = {"source", "sha256", "lines", "images", "labels", NULL};
    char section[32];
    src->given = true;
    if (v->type != YAML_SEQUENCE_NODE) {
        snprintf(section, sizeof section, "%s.", split);
        walk(p, v, section, names, on_source_key, src);
        return;
    }
    src->list_at = where_of(p, v);
    yaml_node_item_t *start = v->data.sequence.items.start, *top = v->data.sequence.items.top;
    if (start == top)
        problem(p, v, "%s: an empty list; name at least one file", split);
    for (yaml_node_item_t *it = start; it < top; it++) {
        yaml_node_t *item = node_at(p, *it);
        struct tr_data_file *f = tr_data_source_add(src);
        snprintf(section, sizeof section, "%s[%d].", split, (int)(it - start));
        walk(p, item, section, file_keys, on_file_key, f);
        if (item->type == YAML_MAPPING_NODE && !f->path && !f->url)
            problem(p, item, "%ssource: missing", section);
    }
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
    def->class_names_at = where_of(p, v);
}

bool tr_data_is_folder_name(const char *s)
{
    size_t n = strlen(s);
    return n && n < sizeof ((struct tr_data_def *)0)->name && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static void parse_name(struct parser *p, yaml_node_t *v, struct tr_data_def *def)
{
    const char *s = scalar(p, v, "name");
    if (!s)
        return;
    if (!tr_data_is_folder_name(s))
        problem(p, v, "name: '%s' is not a folder name (letters, digits, '.', '_', '-'; under %d characters)",
                s, (int)sizeof def->name);
    else
        strcpy(def->name, s);
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

/* A field or column name (label:, text:), kept with where it was given for later errors. */
static void parse_field(struct parser *p, yaml_node_t *v, const char *key, char **out, struct tr_where *at)
{
    const char *s = scalar(p, v, key);
    if (s) {
        *out = tr_strdup(s);
        *at = where_of(p, v);
    }
}

/* Whether path (which exists) lies in folder, both with links resolved; false when either is
 * not there. */
static bool lies_in(const char *path, const char *folder)
{
    char *real = realpath(path, NULL), *top = folder ? realpath(folder, NULL) : NULL;
    size_t n = top ? strlen(top) : 0;
    bool in = real && top && !strncmp(real, top, n) && (real[n] == '/' || real[n] == '\0' || !strcmp(top, "/"));
    free(real);
    free(top);
    return in;
}

/* Nothing fetched is ever run (DESIGN.md §5): a prepare: script is named only by a definition in
 * a datasets folder or among the user's own files, never by one in trainrun's cache, where
 * downloads (and what prepare scripts make) are kept; nor may the script itself lie there. */
static void check_prepare_origin(struct parser *p, const yaml_node_t *v, const char *script)
{
    char *cache = tr_cache_path("");
    if (cache && cache[strlen(cache) - 1] == '/')
        cache[strlen(cache) - 1] = '\0';
    const char *folder = *p->dir ? p->dir : ".";
    if (lies_in(folder, cache) || lies_in(script, cache))
        problem(p, v, "prepare: %s lies in trainrun's cache (%s), where downloads are kept; only a definition in "
                "a datasets folder or among your own files may name a prepare script, and nothing fetched is "
                "ever run", lies_in(folder, cache) ? p->file : script, cache);
    free(cache);
}

/* prepare: a script in the definition's folder, on this machine: never a URL, never in the cache
 * (check_prepare_origin). */
static void parse_prepare(struct parser *p, yaml_node_t *v, struct tr_data_def *def)
{
    const char *s = scalar(p, v, "prepare");
    if (!s)
        return;
    def->prepare_at = where_of(p, v);
    if (tr_fetch_is_url(s)) {
        problem(p, v, "prepare: '%s' is a URL; a prepare script is a file in the definition's folder, since "
                "nothing fetched is ever run", s);
        return;
    }
    bool up = !strcmp(s, "..") || !strncmp(s, "../", 3) || strstr(s, "/../") ||
              (strlen(s) >= 3 && !strcmp(s + strlen(s) - 3, "/.."));
    if (!*s || s[0] == '/' || up) {
        problem(p, v, "prepare: expected the name of a script in the definition's folder, got '%s'", s);
        return;
    }
    def->prepare = *p->dir ? tr_strdup_printf("%s/%s", p->dir, s) : tr_strdup(s);
    if (access(def->prepare, R_OK) != 0)
        problem(p, v, "prepare: cannot read the script %s: %s", def->prepare, strerror(errno));
    else
        check_prepare_origin(p, v, def->prepare);
}

static bool parse_bool(struct parser *p, const yaml_node_t *n, const char *key, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    const char *s = scalar(p, n, key);
    for (int i = 0; s && i < 3; i++)
        if (!strcasecmp(s, yes[i]) || !strcasecmp(s, no[i])) {
            *out = !strcasecmp(s, yes[i]);
            return true;
        }
    if (s)
        problem(p, n, "%s: expected true or false, got '%s'", key, s);
    return false;
}

/* A tokenizer file: relative paths are the definition's folder's, like its shipped vocabularies. */
static char *beside(const struct parser *p, const char *path)
{
    return path[0] == '/' || !*p->dir ? tr_strdup(path) : tr_strdup_printf("%s/%s", p->dir, path);
}

static void on_tokenizer_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    /* Indexed like enum tr_tokenizer_kind, and named as data.tokenizer.kind names them; none
     * ("") is what leaving tokenizer: out says. */
    static const char *const kinds[] = {"", "bytes", "chars", "wordpiece", "gpt2-bpe", NULL};
    struct tr_data_tokenizer *t = ctx;
    char name[32];
    snprintf(name, sizeof name, "tokenizer.%s", key);
    if (!strcmp(key, "kind"))
        parse_choice(p, v, name, kinds, &t->kind);
    else if (!strcmp(key, "lowercase"))
        parse_bool(p, v, name, &t->lowercase);
    else {
        const char *s = scalar(p, v, name);
        char **path = !strcmp(key, "vocab") ? &t->vocab : &t->merges;
        if (s && !*s)
            problem(p, v, "%s: empty path", name);
        else if (s)
            *path = beside(p, s);
    }
}

/* The files each kind reads, as data.tokenizer checks them (src/recipe/validate.c). */
static void parse_tokenizer(struct parser *p, yaml_node_t *v, struct tr_data_tokenizer *t)
{
    static const char *const names[] = {"kind", "vocab", "merges", "lowercase", NULL};
    t->lowercase = true;
    t->at = where_of(p, v);
    int errors = p->errors;
    walk(p, v, "tokenizer.", names, on_tokenizer_key, t);
    if (p->errors > errors)
        return;
    if (t->kind == TR_TOK_NONE)
        problem(p, v, "tokenizer.kind: missing; bytes, chars, wordpiece or gpt2-bpe");
    else if ((t->kind == TR_TOK_WORDPIECE || t->kind == TR_TOK_CHARS) && !t->vocab)
        problem(p, v, "tokenizer: %s needs vocab (%s)", t->kind == TR_TOK_CHARS ? "chars" : "wordpiece",
                t->kind == TR_TOK_CHARS ? "a list of characters" : "a BERT vocab.txt");
    else if (t->kind == TR_TOK_GPT2_BPE && (!t->vocab || !t->merges))
        problem(p, v, "tokenizer: gpt2-bpe needs vocab (encoder.json) and merges (vocab.bpe)");
    else if (t->kind != TR_TOK_GPT2_BPE && t->merges)
        problem(p, v, "tokenizer: merges is for gpt2-bpe");
    else if (t->kind == TR_TOK_BYTES && t->vocab)
        problem(p, v, "tokenizer: bytes takes no vocab file");
}

static void on_top_key(struct parser *p, const char *key, yaml_node_t *v, void *ctx)
{
    /* Indexed like enum tr_format and enum tr_csv_header; "" marks formats this reader lacks. */
    static const char *const formats[] = {"", "csv", "tsv", "jsonl", "text", "idx", "", NULL};
    /* Indexed like enum tr_csv_header, then true and false: names and none by other names. */
    static const char *const headers[] = {"auto", "none", "sklearn", "names", "true", "false", NULL};
    static const char *const missing[] = {"refuse", "drop", "zero", "mean", NULL};   /* enum tr_missing */
    static const char *const split_keys[] = {"valid", "test", "seed", NULL};
    struct tr_data_def *def = ctx;
    for (size_t i = 0; i < NTOP_KEYS; i++)
        if (!strcmp(top_keys[i], key))
            p->given[i] = v;
    int64_t n;
    if (!strcmp(key, "name"))
        parse_name(p, v, def);
    else if (!strcmp(key, "description") || !strcmp(key, "licence") || !strcmp(key, "homepage"))
        (void)scalar(p, v, key);
    else if (!strcmp(key, "package")) {
        const char *s = scalar(p, v, key);
        if (s)
            def->package = tr_strdup(s);
    } else if (!strcmp(key, "prepare"))
        parse_prepare(p, v, def);
    else if (!strcmp(key, "format"))
        parse_choice(p, v, key, formats, &def->format);
    else if (!strcmp(key, "source") || !strcmp(key, "sha256")) {
        def->all.given = true;
        on_file_key(p, key, v, first_file(&def->all));
    } else if (!strcmp(key, "train"))
        parse_source(p, key, v, &def->train);
    else if (!strcmp(key, "valid"))
        parse_source(p, key, v, &def->valid);
    else if (!strcmp(key, "test"))
        parse_source(p, key, v, &def->test);
    else if (!strcmp(key, "header")) {
        parse_choice(p, v, key, headers, &def->header);
        def->header = def->header == 4 ? TR_HEADER_NAMES : def->header == 5 ? TR_HEADER_NONE : def->header;
    } else if (!strcmp(key, "missing"))
        parse_choice(p, v, key, missing, &def->missing);
    else if (!strcmp(key, "text"))
        parse_field(p, v, key, &def->text, &def->text_at);
    else if (!strcmp(key, "label"))
        parse_field(p, v, key, &def->label, &def->label_at);
    else if (!strcmp(key, "num_classes")) {
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
    else if (!strcmp(key, "tokenizer"))
        parse_tokenizer(p, v, &def->tokenizer);
}

/* ---- whole-definition checks ------------------------------------------------------------- */

/* Named as the format: key names them (enum tr_format). */
static const char *const format_names[] = {"auto", "csv", "tsv", "jsonl", "text", "idx", "bin"};

#define FMT(x) (1u << TR_FMT_##x)
#define TEXT_FORMATS (FMT(TSV) | FMT(JSONL) | FMT(TEXT))

/* Keys that mean something for some formats only; given for another, they are mistakes. */
static const struct { const char *key; unsigned formats; } format_keys[] = {
    {"header", FMT(CSV) | FMT(TSV)},
    {"missing", FMT(CSV)},
    {"text", FMT(TSV) | FMT(JSONL)},
    {"label", FMT(CSV) | FMT(TSV) | FMT(JSONL)},
    {"num_classes", FMT(CSV) | FMT(TSV) | FMT(JSONL) | FMT(IDX)},
    {"class_names", FMT(CSV) | FMT(TSV) | FMT(JSONL) | FMT(IDX)},
    {"shape", FMT(CSV) | FMT(IDX)},
    {"normalize", FMT(CSV) | FMT(IDX)},
    {"split", FMT(CSV) | FMT(TSV) | FMT(JSONL) | FMT(IDX)},
    {"tokenizer", TEXT_FORMATS},
};

/* "csv, tsv and jsonl": the formats of mask. */
static void format_list(unsigned mask, char *out, size_t size)
{
    int n = 0, total = 0;
    for (int f = 0; f < 7; f++)
        total += (mask >> f) & 1;
    *out = '\0';
    for (int f = 0; f < 7; f++)
        if (mask & (1u << f)) {
            n++;
            snprintf(out + strlen(out), size - strlen(out), "%s%s", n == 1 ? "" : n == total ? " and " : ", ",
                     format_names[f]);
        }
}

static const yaml_node_t *given(const struct parser *p, const char *key)
{
    for (size_t i = 0; i < NTOP_KEYS; i++)
        if (!strcmp(top_keys[i], key))
            return p->given[i];
    return NULL;
}

static void check_format_keys(struct parser *p)
{
    int format = p->def->format;
    for (size_t i = 0; i < sizeof format_keys / sizeof format_keys[0]; i++) {
        const yaml_node_t *v = given(p, format_keys[i].key);
        if (v && !(format_keys[i].formats & (1u << format))) {
            char list[64];
            format_list(format_keys[i].formats, list, sizeof list);
            problem(p, v, "%s: is for %s data sets, not %s", format_keys[i].key, list, format_names[format]);
        }
    }
}

/* A text split's files: lists, and lines: ranges where a line is a sample or running text. */
static void check_text_files(struct parser *p, const char *what, const struct tr_data_source *s, int format)
{
    if (s->list_at.file && !((1u << format) & TEXT_FORMATS)) {
        tr_diag_add(p->diag, s->list_at, "%s: a list of files is for tsv, jsonl and text data sets, not %s",
                    what, format_names[format]);
        p->errors++;
    }
    for (int i = 0; i < s->nfiles; i++)
        if (s->files[i].lines_at.file && format != TR_FMT_TEXT && format != TR_FMT_JSONL) {
            tr_diag_add(p->diag, s->files[i].lines_at, "lines: is for text and jsonl data sets, not %s%s",
                        format_names[format], format == TR_FMT_TSV ? " (a tsv file's first line is its header)"
                                                                   : "");
            p->errors++;
        }
}

static void check_source(struct parser *p, const yaml_node_t *root, const char *what,
                         const struct tr_data_source *s, int format)
{
    if (!s->given)
        return;
    bool paths = s->nfiles > 0;
    for (int i = 0; i < s->nfiles; i++)
        paths = paths && (s->files[i].path || s->files[i].url);
    if (format == TR_FMT_IDX && (!s->pair || !paths || (!s->labels.path && !s->labels.url)))
        problem(p, root, "%s: an idx data set names images: and labels: files", what);
    else if (format != TR_FMT_IDX && s->pair)
        problem(p, root, "%s: images: and labels: are for idx data sets", what);
    else if (format == TR_FMT_CSV && (s->nfiles != 1 || !paths))
        problem(p, root, "%s: a csv data set names one source: file", what);
    else if (!paths && !s->list_at.file)   /* a list's items said so themselves */
        problem(p, root, "%s: source: missing", what);
    check_text_files(p, what, s, format);
}

/* tsv and jsonl: which fields hold the text and the label, and what the labels are. */
static void check_text_fields(struct parser *p, const yaml_node_t *root)
{
    struct tr_data_def *def = p->def;
    const char *format = format_names[def->format];
    if (!def->text)
        problem(p, root, "text: missing; name the field that holds each sample's text");
    if (!def->label)
        problem(p, root, "label: missing; name the field that holds each sample's class");
    else if (def->text && !strcmp(def->text, def->label))
        problem(p, given(p, "label"), "label: '%s' is the text: field too; a sample's class is another field",
                def->label);
    if (!def->nclasses)
        problem(p, root, "class_names: missing; a %s data set's labels are names from this list (or class "
                         "numbers below num_classes)", format);
    const yaml_node_t *header = given(p, "header");
    if (header && def->format == TR_FMT_TSV && def->header != TR_HEADER_NAMES && def->header != TR_HEADER_AUTO)
        problem(p, header, "header: a tsv file's first line names its fields; header: names is the only choice");
    def->header = TR_HEADER_NAMES;
}

/* Where prepare writes: trainrun's cache (DESIGN.md §5), $XDG_CACHE_HOME/trainrun or
 * ~/.cache/trainrun, then datasets/<name>: an installed datasets/ folder is read-only. */
static void set_prepared_dir(struct parser *p)
{
    struct tr_data_def *def = p->def;
    const yaml_node_t *at = given(p, "prepare");
    char name[sizeof def->name] = "", *folder = realpath(*p->dir ? p->dir : ".", NULL);
    if (def->name[0])
        strcpy(name, def->name);
    else if (folder && tr_data_is_folder_name(strrchr(folder, '/') + 1))
        strcpy(name, strrchr(folder, '/') + 1);
    free(folder);
    char *sub = tr_strdup_printf("datasets/%s", name);
    if (!name[0])
        problem(p, at, "prepare: give the data set a name: (its prepared folder's name); its folder's name "
                       "will not do");
    else if ((def->prepared_dir = tr_cache_path(sub)) == NULL)
        problem(p, at, "prepare: neither XDG_CACHE_HOME nor HOME is set, so there is no cache folder to "
                       "prepare the files in");
    free(sub);
}

static void resolve(struct tr_data_file *f, const char *base)
{
    if (!f->path || f->path[0] == '/' || !*base)
        return;
    char *full = tr_strdup_printf("%s/%s", base, f->path);
    free(f->path);
    f->path = full;
}

/* Relative sources are found beside the definition, or in the prepared folder. */
static void resolve_sources(struct parser *p)
{
    struct tr_data_def *def = p->def;
    const char *base = def->prepared_dir ? def->prepared_dir : p->dir;
    struct tr_data_source *all[4] = {&def->all, &def->train, &def->valid, &def->test};
    for (int s = 0; s < 4; s++) {
        for (int i = 0; i < all[s]->nfiles; i++)
            resolve(&all[s]->files[i], base);
        resolve(&all[s]->labels, base);
    }
}

static void check_definition(struct parser *p, const yaml_node_t *root)
{
    struct tr_data_def *def = p->def;
    if (!def->format) {
        problem(p, root, "format: missing; csv, tsv, jsonl, text or idx");
        return;
    }
    check_format_keys(p);
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
    if (def->format == TR_FMT_TSV || def->format == TR_FMT_JSONL)
        check_text_fields(p, root);
    if (def->prepare)
        set_prepared_dir(p);
}

/* ---- reading ----------------------------------------------------------------------------- */

static char *read_small_file(const char *path, size_t *len, struct tr_diag *diag)
{
    struct tr_diag why = {0};
    FILE *f = tr_fopen_regular(path, &why);   /* a FIFO would block, /dev/zero never end */
    if (!f) {
        tr_fail_because(diag, TR_EIO, &why, "%s: cannot read", path);
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
    int ok = tr_yaml_load(&parser, text, len, &p->doc);   /* within the depth and alias limits */
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
    if (load_document(&p, text, len) == 0) {
        yaml_node_t *root = yaml_document_get_root_node(&p.doc);
        if (!root)
            problem(&p, NULL, "the definition is empty");
        else {
            walk(&p, root, "", top_keys, on_top_key, def);
            if (!p.errors)
                check_definition(&p, root);
            if (!p.errors)
                resolve_sources(&p);
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
    free(f->url);
    free(f->pinned_by);
}

static void free_source(struct tr_data_source *s)
{
    for (int i = 0; i < s->nfiles; i++)
        free_file(&s->files[i]);
    free(s->files);
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
    free(def->text);
    free(def->prepare);
    free(def->prepared_dir);
    free(def->tokenizer.vocab);
    free(def->tokenizer.merges);
    for (int i = 0; def->class_names && def->class_names[i]; i++)
        free(def->class_names[i]);
    free(def->class_names);
    memset(def, 0, sizeof *def);
}
