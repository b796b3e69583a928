/* Loading a recipe: built-in defaults < system conf < user conf < recipe (after what it
 * extends) < command-line overrides. Each layer is YAML walked against the schema; every
 * problem is collected with its place, and nothing is reported until all layers are read. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/input.h"
#include "recipe/recipe.h"
#include "recipe/schema.h"
#include "recipe/units.h"
#include "recipe/validate.h"
#include "recipe/value.h"
#include "recipe/yaml_load.h"

#define MAX_FILE_BYTES (1 << 20)   /* a recipe is a page of YAML; a megabyte is a mistake */
#define MAX_EXTENDS 8
#define MAX_DIAGS 100              /* past this, more messages do not help anyone */
#define MAX_MAPPING 512

struct loader {
    struct tr_recipe *r;
    struct tr_diag *diag;
    struct tr_origin layer;        /* kind and file of the layer being applied */
    const char *arg;               /* the override being applied, if any */
    char *chain[MAX_EXTENDS + 1];  /* real paths of the recipe files being read: cycles */
    int depth;
};

static const char *intern(struct tr_recipe *r, const char *s)
{
    if (r->nfiles == r->capfiles) {
        r->capfiles = r->capfiles ? 2 * r->capfiles : 8;
        r->files = tr_xrealloc(r->files, (size_t)r->capfiles * sizeof *r->files);
    }
    return r->files[r->nfiles++] = tr_strdup(s);
}

static struct tr_where where_at(const struct loader *ld, const yaml_node_t *n)
{
    struct tr_where w = {.file = ld->layer.file, .arg = ld->arg};
    if (n && !ld->arg) {
        w.line = (int)n->start_mark.line + 1;
        w.col = (int)n->start_mark.column + 1;
    }
    return w;
}

static void report(struct loader *ld, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void report(struct loader *ld, const yaml_node_t *n, const char *fmt, ...)
{
    if (ld->diag->n >= MAX_DIAGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (ld->diag->n == MAX_DIAGS - 1)
        tr_diag_add(ld->diag, where_at(ld, n), "too many errors; stopping here");
    else
        tr_diag_vadd(ld->diag, where_at(ld, n), fmt, ap);
    va_end(ap);
}

/* ---- setting values ------------------------------------------------------------------ */

static void set_leaf(struct loader *ld, int key, yaml_document_t *doc, yaml_node_t *node)
{
    struct tr_value v;
    yaml_node_t *bad;
    char *msg = tr_value_convert(&tr_keys[key], doc, node, &v, &bad);
    if (msg) {
        report(ld, bad, "%s", msg);
        free(msg);
        return;
    }
    tr_value_store(ld->r, key, &v);
    struct tr_origin o = ld->layer;
    if (!ld->arg) {
        o.line = (int)node->start_mark.line + 1;
        o.col = (int)node->start_mark.column + 1;
    }
    ld->r->origin[key] = o;
}

/* Whether line (0-based) of text starts with blanks that hold a tab. */
static bool indented_with_tab(const char *text, size_t len, size_t line)
{
    size_t i = 0;
    for (size_t at = 0; at < line && i < len; i++)
        at += text[i] == '\n';
    for (; i < len && (text[i] == ' ' || text[i] == '\t'); i++)
        if (text[i] == '\t')
            return true;
    return false;
}

static void report_syntax(struct loader *ld, const yaml_parser_t *parser, const char *text,
                          size_t len)
{
    yaml_node_t at = {.start_mark = parser->problem_mark};
    const char *problem = parser->problem ? parser->problem : "syntax error";
    /* libyaml says "found character that cannot start any token" for an indenting tab. */
    bool tab = !strstr(problem, "tab") && indented_with_tab(text, len, parser->problem_mark.line);
    /* An unclosed [ { or " is found lines later, often at the end: name where it opened
     * (an override is one line, named whole). */
    char *context = !parser->context ? tr_strdup("")
                    : parser->context_mark.line == parser->problem_mark.line || ld->arg
                        ? tr_strdup_printf(" %s", parser->context)
                        : tr_strdup_printf(" %s that starts at %d:%d", parser->context,
                                           (int)parser->context_mark.line + 1,
                                           (int)parser->context_mark.column + 1);
    report(ld, &at, "invalid YAML: %s%s%s", problem, context,
           tab ? " (the line is indented with a tab; YAML indents with spaces)" : "");
    free(context);
}

/* Parses YAML text held in memory into doc; on a syntax error reports it and returns -1. */
static int parse_yaml(struct loader *ld, const char *text, size_t len, yaml_document_t *doc)
{
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int ok = tr_yaml_load(&parser, text, len, doc);   /* within the depth and alias limits */
    if (!ok) {
        report_syntax(ld, &parser, text, len);
    } else if (yaml_document_get_root_node(doc)) {
        yaml_document_t next;
        if (!yaml_parser_load(&parser, &next)) {
            report_syntax(ld, &parser, text, len);
            ok = 0;
        } else {
            yaml_node_t *root = yaml_document_get_root_node(&next);
            if (root) {   /* placed at its '---', not at its first key */
                yaml_node_t at = {.start_mark = next.start_mark};
                report(ld, &at, "a second YAML document ('---'); a recipe is one mapping");
                ok = 0;
            }
            yaml_document_delete(&next);
        }
        if (!ok)
            yaml_document_delete(doc);
    }
    yaml_parser_delete(&parser);
    return ok ? 0 : -1;
}

static void set_default(struct loader *ld, int key, enum tr_origin_kind kind)
{
    yaml_document_t doc;
    const char *def = tr_keys[key].def;
    struct loader quiet = *ld;
    if (parse_yaml(&quiet, def, strlen(def), &doc))
        return;   /* impossible for the table's own defaults; check_recipe tests each */
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    struct tr_value v;
    yaml_node_t *bad;
    yaml_node_t empty_null = {.type = YAML_SCALAR_NODE,
        .data.scalar = {.value = (yaml_char_t *)"", .style = YAML_PLAIN_SCALAR_STYLE}};
    char *msg = tr_value_convert(&tr_keys[key], &doc, root ? root : &empty_null, &v, &bad);
    if (msg)
        abort();   /* a broken default in schema.c: a programming error, caught by the tests */
    tr_value_store(ld->r, key, &v);
    ld->r->origin[key] = (struct tr_origin){.kind = kind, .file = kind == TR_ORIGIN_RESET ? ld->layer.file : NULL};
    yaml_document_delete(&doc);
}

/* Keys under a section path ("" for all). */
static bool under(const char *path, const char *section)
{
    size_t n = strlen(section);
    return !n || (strncmp(path, section, n) == 0 && (path[n] == '.' || path[n] == '\0'));
}

static void reset_section(struct loader *ld, const char *section, enum tr_origin_kind kind)
{
    for (int i = 0; i < tr_nkeys; i++)
        if (under(tr_keys[i].path, section))
            set_default(ld, i, kind);
}

static int shorthand_of(const char *section)
{
    size_t n = strlen(section);
    for (int i = 0; i < tr_nkeys; i++) {
        const char *p = tr_keys[i].path;
        if ((tr_keys[i].flags & TR_SHORTHAND) && strncmp(p, section, n) == 0 && p[n] == '.' &&
            !strchr(p + n + 1, '.'))
            return i;
    }
    return -1;
}

static void unknown_key(struct loader *ld, const char *path, const yaml_node_t *at)
{
    char *hint = tr_key_suggest(path);
    if (!hint && !strchr(path, '.') && tr_edit_distance(path, "extends") <= 2)
        hint = tr_strdup("extends");   /* a recipe's word, though not in the schema */
    if (hint) {
        report(ld, at, "unknown key '%s'; did you mean '%s'?", path, hint);
    } else {
        const char *dot = strrchr(path, '.');
        char *section = dot ? strndup(path, (size_t)(dot - path)) : tr_strdup("");
        char *children = tr_section_children(section);
        if (tr_section_exists(section))
            report(ld, at, "unknown key '%s'; valid keys %s%s%s are: %s", path, *section ? "in " : "",
                   section, *section ? "" : "at the top", children);
        else
            report(ld, at, "unknown key '%s'", path);
        free(section);
        free(children);
    }
    free(hint);
}

static void walk_mapping(struct loader *ld, const char *section, yaml_document_t *doc,
                         yaml_node_t *map);

/* Applies one value at a dotted path: a key, a section (a mapping, null, or a scalar for its
 * shorthand key), or an unknown name. key_node places messages about the name itself. */
static void apply_at(struct loader *ld, const char *path, yaml_document_t *doc,
                     yaml_node_t *value, const yaml_node_t *key_node)
{
    int key = tr_key_find(path);
    if (key >= 0) {
        set_leaf(ld, key, doc, value);
        return;
    }
    if (!tr_section_exists(path)) {
        unknown_key(ld, path, key_node);
        return;
    }
    int shorthand = shorthand_of(path);
    if (value->type == YAML_MAPPING_NODE) {
        walk_mapping(ld, path, doc, value);
    } else if (tr_node_is_null(value)) {
        struct loader at = *ld;
        reset_section(&at, path, ld->layer.kind);
        for (int i = 0; i < tr_nkeys; i++)   /* the reset happened here, in this layer */
            if (under(tr_keys[i].path, path))
                ld->r->origin[i] = (struct tr_origin){.kind = ld->layer.kind, .file = ld->layer.file,
                    .line = ld->arg ? 0 : (int)value->start_mark.line + 1,
                    .col = ld->arg ? 0 : (int)value->start_mark.column + 1};
    } else if (shorthand >= 0) {
        set_leaf(ld, shorthand, doc, value);
    } else {
        char *children = tr_section_children(path);
        char *got = tr_node_describe(value);
        report(ld, value, "%s is a section: expected a mapping of its keys (%s), got %s", path,
               children, got);
        free(children);
        free(got);
    }
}

static void walk_mapping(struct loader *ld, const char *section, yaml_document_t *doc,
                         yaml_node_t *map)
{
    yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
    if (top - start > MAX_MAPPING) {
        report(ld, map, "a mapping of %d keys; no section of a recipe has that many",
               (int)(top - start));
        return;
    }
    for (yaml_node_pair_t *p = start; p < top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v)
            continue;
        if (k->type != YAML_SCALAR_NODE || k->data.scalar.length == 0 ||
            strlen((char *)k->data.scalar.value) != k->data.scalar.length) {
            report(ld, k, "a key must be a name such as 'train' or 'batch_size'");
            continue;
        }
        const char *name = (const char *)k->data.scalar.value;
        bool repeated = false;
        for (yaml_node_pair_t *q = start; q < p && !repeated; q++) {
            yaml_node_t *k2 = yaml_document_get_node(doc, q->key);
            repeated = k2 && k2->type == YAML_SCALAR_NODE && !strcmp((char *)k2->data.scalar.value, name);
        }
        if (repeated) {
            report(ld, k, "'%s' appears twice in this mapping", name);
            continue;
        }
        if (!*section && !strcmp(name, "extends"))
            continue;   /* handled before the walk (recipes) or rejected (conf files) */
        char *path = *section ? tr_strdup_printf("%s.%s", section, name) : tr_strdup(name);
        apply_at(ld, path, doc, v, k);
        free(path);
    }
}

/* ---- files ---------------------------------------------------------------------------- */

static char *read_file(struct loader *ld, const char *path, size_t *len, bool missing_ok,
                       const yaml_node_t *from)
{
    struct tr_diag why = {0};
    FILE *f = tr_fopen_regular(path, &why);   /* a FIFO or /dev/zero: refused, not read */
    if (!f) {
        if (!(missing_ok && errno == ENOENT))
            report(ld, from, "cannot read %s: %s", path, tr_diag_last(&why));
        tr_diag_free(&why);
        return NULL;
    }
    char *buf = tr_xmalloc(MAX_FILE_BYTES + 1);
    *len = fread(buf, 1, MAX_FILE_BYTES + 1, f);
    int err = ferror(f);
    fclose(f);
    if (err || *len > MAX_FILE_BYTES) {
        report(ld, from, err ? "cannot read %s: read error" : "%s is larger than 1 MiB; is it a recipe?", path);
        free(buf);
        return NULL;
    }
    return buf;
}

static void load_document(struct loader *ld, const char *text, size_t len);

/* extends: base.yaml — the base is read first, relative to the file that names it. */
static void load_extends(struct loader *ld, yaml_document_t *doc, yaml_node_t *root)
{
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE || strcmp((char *)k->data.scalar.value, "extends"))
            continue;
        if (ld->layer.kind != TR_ORIGIN_RECIPE) {
            report(ld, k, "extends is read only in recipe files, not in conf files or overrides");
            return;
        }
        if (v->type != YAML_SCALAR_NODE || tr_node_is_null(v) || v->data.scalar.length == 0 ||
            strlen((char *)v->data.scalar.value) != v->data.scalar.length) {
            report(ld, v, "extends: expected the path of another recipe file");
            return;
        }
        const char *name = (const char *)v->data.scalar.value;
        const char *slash = ld->layer.file ? strrchr(ld->layer.file, '/') : NULL;
        char *path = (name[0] == '/' || !slash)
                         ? tr_strdup(name)
                         : tr_strdup_printf("%.*s/%s", (int)(slash - ld->layer.file), ld->layer.file, name);
        char *real = realpath(path, NULL);   /* allocated: no PATH_MAX buffer to overrun */
        if (!real) {
            report(ld, v, "extends: cannot read %s: %s", path, strerror(errno));
            free(path);
            return;
        }
        for (int i = 0; i < ld->depth; i++)
            if (ld->chain[i] && !strcmp(ld->chain[i], real)) {
                report(ld, v, "extends: %s is already being read (a cycle of extends)", path);
                free(real);
                free(path);
                return;
            }
        if (ld->depth > MAX_EXTENDS) {   /* the chain holds the recipe and 8 bases */
            report(ld, v, "extends: more than %d levels deep", MAX_EXTENDS);
            free(real);
            free(path);
            return;
        }
        size_t len;
        char *text = read_file(ld, path, &len, false, v);
        if (text) {
            struct loader sub = *ld;
            sub.layer.file = intern(ld->r, path);
            sub.chain[sub.depth++] = real;
            load_document(&sub, text, len);
            free(text);
        }
        free(real);
        free(path);
        return;
    }
}

static void load_document(struct loader *ld, const char *text, size_t len)
{
    yaml_document_t doc;
    if (parse_yaml(ld, text, len, &doc))
        return;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || tr_node_is_null(root)) {
        /* an empty file: nothing to apply */
    } else if (root->type != YAML_MAPPING_NODE) {
        report(ld, root, "expected a mapping of keys (model:, train:, …) at the top, got %s",
               root->type == YAML_SEQUENCE_NODE ? "a list" : "a single value");
    } else {
        load_extends(ld, &doc, root);
        walk_mapping(ld, "", &doc, root);
    }
    yaml_document_delete(&doc);
}

static void load_file(struct loader *ld, const char *path, enum tr_origin_kind kind, bool missing_ok)
{
    size_t len;
    struct loader at = *ld;
    at.layer = (struct tr_origin){.kind = kind, .file = intern(ld->r, path)};
    char *text = read_file(ld, path, &len, missing_ok, NULL);   /* the message names path */
    if (!text)
        return;
    char *real = kind == TR_ORIGIN_RECIPE ? realpath(path, NULL) : NULL;
    if (real)
        at.chain[at.depth++] = real;
    load_document(&at, text, len);
    if (at.depth > ld->depth)
        free(at.chain[at.depth - 1]);
    free(text);
}

/* ---- overrides -------------------------------------------------------------------------- */

static bool valid_path(const char *p, size_t n)
{
    if (n == 0 || p[0] == '.' || p[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(p[i] == '.' || p[i] == '_' || p[i] == '-' || (p[i] >= 'a' && p[i] <= 'z') ||
              (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')) ||
            (p[i] == '.' && p[i + 1] == '.'))
            return false;
    return true;
}

static void apply_override(struct loader *ld, const char *text)
{
    struct loader at = *ld;
    at.arg = text;
    at.layer = (struct tr_origin){.kind = TR_ORIGIN_OVERRIDE, .file = intern(ld->r, text)};
    if (text[0] == '~') {
        const char *path = text + 1;
        if (!valid_path(path, strlen(path))) {
            report(&at, NULL, "expected ~KEY, such as ~train.steps");
        } else if (!strcmp(path, "extends")) {   /* not a key: "did you mean 'extends'?" misled */
            report(&at, NULL, "extends cannot be removed by an override: it is read only in recipe "
                   "files; edit the recipe, or name the base recipe itself");
        } else if (tr_key_find(path) >= 0 || tr_section_exists(path)) {
            at.layer.kind = TR_ORIGIN_RESET;
            reset_section(&at, path, TR_ORIGIN_RESET);
        } else {
            unknown_key(&at, path, NULL);
        }
        return;
    }
    const char *eq = strchr(text, '=');
    if (!eq || !valid_path(text, (size_t)(eq - text))) {
        report(&at, NULL, "expected KEY=VALUE (train.batch_size=64) or ~KEY (~train.steps)");
        return;
    }
    char *path = strndup(text, (size_t)(eq - text));
    const char *value = eq + 1;
    yaml_document_t doc;
    if (!strcmp(path, "extends")) {
        report(&at, NULL, "extends is read only in recipe files");
    } else if (parse_yaml(&at, value, strlen(value), &doc) == 0) {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root)   /* nothing, blanks or only a comment: "k=", "k= # x" */
            report(&at, NULL, "no value after '='; write %s=null for null, or ~%s for the default", path, path);
        else if ((root->type == YAML_SEQUENCE_NODE && root->data.sequence.style != YAML_FLOW_SEQUENCE_STYLE) ||
            (root->type == YAML_MAPPING_NODE && root->data.mapping.style != YAML_FLOW_MAPPING_STYLE))
            report(&at, NULL, "a value is a YAML scalar or a flow collection ([0.9, 0.95] or {name: sgd})");
        else
            apply_at(&at, path, &doc, root, NULL);
        yaml_document_delete(&doc);
    }
    free(path);
}

/* ---- the whole load ------------------------------------------------------------------------ */

void tr_recipe_init(struct tr_recipe *r)
{
    memset(r, 0, sizeof *r);
    struct tr_diag diag = {0};
    struct loader ld = {.r = r, .diag = &diag};
    reset_section(&ld, "", TR_ORIGIN_DEFAULT);
    tr_diag_free(&diag);
}

void tr_recipe_free(struct tr_recipe *r)
{
    for (int i = 0; i < tr_nkeys; i++)
        if (tr_keys[i].type == TR_T_STR || tr_keys[i].type == TR_T_SHA256)
            free(*(char **)((char *)r + tr_keys[i].offset));
        else if (tr_keys[i].type == TR_T_ENV_NAMES)
            tr_strs_free((struct tr_strs *)((char *)r + tr_keys[i].offset));
    for (int i = 0; i < r->nfiles; i++)
        free(r->files[i]);
    free(r->files);
    free(r->recipe_file);
    memset(r, 0, sizeof *r);
}

/* The precedence of the layer a value came from; defaults and resets rank lowest. */
static int layer_rank(enum tr_origin_kind k)
{
    switch (k) {
    case TR_ORIGIN_SYSTEM_CONF: return 1;
    case TR_ORIGIN_USER_CONF:   return 2;
    case TR_ORIGIN_RECIPE:      return 3;
    case TR_ORIGIN_OVERRIDE:    return 4;
    case TR_ORIGIN_DEFAULT: case TR_ORIGIN_RESET: case TR_ORIGIN_DERIVED:
    default:                    return 0;
    }
}

/* Values that follow from others: name: null is the recipe file's name without its extension;
 * train.steps, when set, replaces the default train.epochs. */
static void derive(struct tr_recipe *r)
{
    int name = tr_key_find("name");
    if (r->is_null[name] && r->recipe_file) {
        const char *base = strrchr(r->recipe_file, '/');
        base = base ? base + 1 : r->recipe_file;
        const char *dot = strrchr(base, '.');
        r->name = strndup(base, dot && dot != base ? (size_t)(dot - base) : strlen(base));
        r->is_null[name] = false;
        r->origin[name] = (struct tr_origin){.kind = TR_ORIGIN_DERIVED, .file = "the recipe file's name"};
    }
    /* train.epochs and train.steps: set in two layers, the later layer's wins (an override of
     * steps replaces the recipe's epochs); set in one layer, validation reports both. */
    int epochs = tr_key_find("train.epochs"), steps = tr_key_find("train.steps");
    if (!r->is_null[steps] && !r->is_null[epochs]) {
        int le = layer_rank(r->origin[epochs].kind), ls = layer_rank(r->origin[steps].kind);
        int loser = ls > le ? epochs : le > ls ? steps : -1;
        if (loser >= 0) {
            r->is_null[loser] = true;
            *(int64_t *)((char *)r + tr_keys[loser].offset) = 0;
            static const char *const why[2][2] = {
                {"train.epochs is set", "train.epochs is set in a later layer"},
                {"train.steps is set", "train.steps is set in a later layer"}};
            int loser_rank = loser == epochs ? le : ls;
            r->origin[loser] = (struct tr_origin){.kind = TR_ORIGIN_DERIVED,
                                                  .file = why[loser == epochs][loser_rank > 0]};
        }
    }
}

static int finish(struct tr_recipe *r, struct loader *ld, char *const *overrides, int noverrides)
{
    for (int i = 0; i < noverrides; i++)
        apply_override(ld, overrides[i]);
    derive(r);
    if (ld->diag->n == 0)
        tr_recipe_validate(r, ld->diag);
    return ld->diag->n ? TR_EINVAL : 0;
}

int tr_recipe_load(struct tr_recipe *r, const struct tr_recipe_sources *src, struct tr_diag *diag)
{
    tr_recipe_init(r);
    struct loader ld = {.r = r, .diag = diag};
    if (src->system_conf && *src->system_conf)
        load_file(&ld, src->system_conf, TR_ORIGIN_SYSTEM_CONF, true);
    if (src->user_conf && *src->user_conf)
        load_file(&ld, src->user_conf, TR_ORIGIN_USER_CONF, !src->user_conf_required);
    if (src->recipe) {
        r->recipe_file = tr_strdup(src->recipe);
        load_file(&ld, src->recipe, TR_ORIGIN_RECIPE, false);
    }
    return finish(r, &ld, src->overrides, src->noverrides);
}

int tr_recipe_load_string(struct tr_recipe *r, const char *yaml, size_t len, const char *file,
                          char *const *overrides, int noverrides, struct tr_diag *diag)
{
    tr_recipe_init(r);
    struct loader ld = {.r = r, .diag = diag};
    r->recipe_file = tr_strdup(file);
    ld.layer = (struct tr_origin){.kind = TR_ORIGIN_RECIPE, .file = intern(r, file)};
    load_document(&ld, yaml, len);
    ld.layer = (struct tr_origin){0};
    return finish(r, &ld, overrides, noverrides);
}

int tr_recipe_default_sources(struct tr_recipe_sources *src, struct tr_path *system, struct tr_path *user,
                              struct tr_diag *d)
{
    memset(src, 0, sizeof *src);
    const char *sys = getenv("TRAINRUN_SYSTEM_CONF");
    int rc = tr_path_set(system, d, "%s", sys ? sys : SYSCONFDIR "/trainrun.conf");
    src->system_conf = system->s;
    const char *conf = getenv("TRAINRUN_CONF"), *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    src->user_conf_required = conf != NULL;
    user->s[0] = '\0';   /* none found: no user conf */
    if (!rc && conf)
        rc = tr_path_set(user, d, "%s", conf);   /* empty: no user conf at all */
    else if (!rc && xdg && *xdg)
        rc = tr_path_set(user, d, "%s/trainrun/trainrun.conf", xdg);
    else if (!rc && home && *home)
        rc = tr_path_set(user, d, "%s/.config/trainrun/trainrun.conf", home);
    src->user_conf = user->s;
    return rc;
}
