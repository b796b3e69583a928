/* The resolved recipe written out for people (YAML with each value's origin as a comment,
 * readable back as a recipe) and for machines (JSON: values and origins). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recipe/recipe.h"
#include "recipe/schema.h"
#include "recipe/units.h"

#define COMMENT_COLUMN 44

static const void *field(const struct tr_recipe *r, int key)
{
    return (const char *)r + tr_keys[key].offset;
}

char *tr_origin_describe(const struct tr_origin *o)
{
    switch (o->kind) {
    case TR_ORIGIN_DEFAULT:     return tr_strdup("default");
    case TR_ORIGIN_DERIVED:     return tr_strdup_printf("default: %s", o->file);
    case TR_ORIGIN_RESET:       return tr_strdup_printf("default: reset by override %s", o->file);
    case TR_ORIGIN_OVERRIDE:    return tr_strdup("override");
    case TR_ORIGIN_SYSTEM_CONF:
    case TR_ORIGIN_USER_CONF:
    case TR_ORIGIN_RECIPE:
        return tr_strdup_printf("%s%s:%d:%d", o->kind == TR_ORIGIN_RECIPE ? "" : "conf ", o->file,
                                o->line, o->col);
    }
    return tr_strdup("?");
}

/* Shortest text that reads back as the same double. */
static void format_double(double x, char out[40])
{
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(out, 40, "%.*g", precision, x);
        if (strtod(out, NULL) == x)
            break;
    }
    if (!strpbrk(out, ".en"))   /* keep it a number with a point: 1 → 1.0 */
        strcat(out, ".0");
}

/* A string is written plain only when YAML would read it back as the same string. */
static bool plain_safe(const char *s)
{
    static const char *const words[] = {"null", "Null", "NULL", "~", "true", "false", "yes",
                                        "no", "on", "off", "True", "False", "Yes", "No", "On", "Off"};
    if (!*s || strchr("-?:,[]{}#&*!|>'\"%@` ", s[0]) || s[strlen(s) - 1] == ' ')
        return false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(s, words[i]))
            return false;
    char *end;
    strtod(s, &end);
    if (!*end)
        return false;   /* looks like a number */
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f || (*p == ':' && (p[1] == ' ' || !p[1])) || (*p == ' ' && p[1] == '#') || *p == '"')
            return false;
    }
    return true;
}

static void put_string(FILE *out, const char *s)
{
    if (plain_safe(s)) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* Writes the value of key in YAML; returns nothing, writes to out. */
static void put_value(FILE *out, const struct tr_recipe *r, int key)
{
    const struct tr_key *k = &tr_keys[key];
    const void *f = field(r, key);
    char buf[40];
    if (r->is_null[key]) {
        fputs("null", out);
        return;
    }
    switch (k->type) {
    case TR_T_STR:
    case TR_T_SHA256:
        put_string(out, *(char *const *)f);
        break;
    case TR_T_INT:
        fprintf(out, "%lld", (long long)*(const int64_t *)f);
        break;
    case TR_T_FLOAT:
        format_double(*(const double *)f, buf);
        fputs(buf, out);
        break;
    case TR_T_BOOL:
        fputs(*(const bool *)f ? "true" : "false", out);
        break;
    case TR_T_ENUM:
        fputs(k->names[*(const int *)f], out);
        break;
    case TR_T_SIZE:
        tr_format_size(*(const uint64_t *)f, buf);
        fputs(buf, out);
        break;
    case TR_T_DURATION:
        tr_format_duration(*(const double *)f, buf);
        fputs(buf, out);
        break;
    case TR_T_INTS:
    case TR_T_ENUMS: {
        const struct tr_ints *l = f;
        fputc('[', out);
        for (int i = 0; i < l->n; i++) {
            if (k->type == TR_T_ENUMS)
                fprintf(out, "%s%s", i ? ", " : "", k->names[l->v[i]]);
            else
                fprintf(out, "%s%lld", i ? ", " : "", (long long)l->v[i]);
        }
        fputc(']', out);
        break;
    }
    case TR_T_ENV_NAMES: {
        const struct tr_strs *l = f;
        fputc('[', out);
        for (int i = 0; i < l->n; i++) {
            fputs(i ? ", " : "", out);
            put_string(out, l->v[i]);
        }
        fputc(']', out);
        break;
    }
    case TR_T_FLOATS: {
        const struct tr_floats *l = f;
        fputc('[', out);
        for (int i = 0; i < l->n; i++) {
            format_double(l->v[i], buf);
            fprintf(out, "%s%s", i ? ", " : "", buf);
        }
        fputc(']', out);
        break;
    }
    case TR_T_CHOICE: {
        const struct tr_choice *ch = f;
        if (ch->name >= 0)
            fputs(k->names[ch->name], out);
        else
            fprintf(out, "%lld", (long long)ch->n);
        break;
    }
    case TR_T_WARMUP: {
        const struct tr_warmup *w = f;
        if (w->is_steps) {
            fprintf(out, "%lld", (long long)w->steps);
        } else {
            format_double(w->fraction, buf);
            fputs(buf, out);
        }
        break;
    }
    }
}

/* Length of the common leading sections of two dotted paths ("a.b.c", "a.b.d" → 2 parts). */
static int common_sections(const char *a, const char *b)
{
    int parts = 0;
    for (size_t i = 0; a[i] && a[i] == b[i]; i++)
        if (a[i] == '.')
            parts++;
    return parts;
}

void tr_recipe_write_yaml(const struct tr_recipe *r, FILE *out)
{
    const char *prev = "";
    for (int key = 0; key < tr_nkeys; key++) {
        const char *path = tr_keys[key].path;
        int depth = 0;
        for (const char *p = path; *p; p++)
            depth += *p == '.';
        /* Open the sections this key is in that the previous key was not. */
        const char *part = path;
        for (int level = 0; level < depth; level++) {
            const char *dot = strchr(part, '.');
            if (level >= common_sections(prev, path))
                fprintf(out, "%*s%.*s:\n", 2 * level, "", (int)(dot - part), part);
            part = dot + 1;
        }
        char *text = NULL;
        size_t len = 0;
        FILE *line = open_memstream(&text, &len);
        fprintf(line, "%*s%s: ", 2 * depth, "", part);
        put_value(line, r, key);
        fclose(line);
        char *origin = tr_origin_describe(&r->origin[key]);
        fprintf(out, "%-*s # %s\n", COMMENT_COLUMN - 1, text, origin);
        free(origin);
        free(text);
        prev = path;
    }
}

/* ---- JSON ------------------------------------------------------------------------------ */

static json_t *json_value(const struct tr_recipe *r, int key)
{
    const struct tr_key *k = &tr_keys[key];
    const void *f = field(r, key);
    if (r->is_null[key])
        return json_null();
    switch (k->type) {
    case TR_T_STR:
    case TR_T_SHA256:   return json_string(*(char *const *)f);
    case TR_T_INT:      return json_integer(*(const int64_t *)f);
    case TR_T_FLOAT:
    case TR_T_DURATION: return json_real(*(const double *)f);
    case TR_T_BOOL:     return json_boolean(*(const bool *)f);
    case TR_T_ENUM:     return json_string(k->names[*(const int *)f]);
    case TR_T_SIZE:     return json_integer((json_int_t) * (const uint64_t *)f);
    case TR_T_INTS:
    case TR_T_ENUMS: {
        const struct tr_ints *l = f;
        json_t *a = json_array();
        for (int i = 0; i < l->n; i++)
            json_array_append_new(a, k->type == TR_T_ENUMS ? json_string(k->names[l->v[i]])
                                                            : json_integer(l->v[i]));
        return a;
    }
    case TR_T_ENV_NAMES: {
        const struct tr_strs *l = f;
        json_t *a = json_array();
        for (int i = 0; i < l->n; i++)
            json_array_append_new(a, json_string(l->v[i]));
        return a;
    }
    case TR_T_FLOATS: {
        const struct tr_floats *l = f;
        json_t *a = json_array();
        for (int i = 0; i < l->n; i++)
            json_array_append_new(a, json_real(l->v[i]));
        return a;
    }
    case TR_T_CHOICE: {
        const struct tr_choice *ch = f;
        return ch->name >= 0 ? json_string(k->names[ch->name]) : json_integer(ch->n);
    }
    case TR_T_WARMUP: {
        const struct tr_warmup *w = f;
        return w->is_steps ? json_pack("{sI}", "steps", (json_int_t)w->steps)
                           : json_pack("{sf}", "fraction", w->fraction);
    }
    }
    return json_null();
}

static json_t *json_origin(const struct tr_origin *o)
{
    static const char *const kinds[] = {"default", "system_conf", "user_conf", "recipe",
                                        "override", "reset", "derived"};
    json_t *j = json_pack("{ss}", "kind", kinds[o->kind]);
    if (o->kind == TR_ORIGIN_OVERRIDE || o->kind == TR_ORIGIN_RESET)
        json_object_set_new(j, "argument", json_string(o->file));
    else if (o->kind == TR_ORIGIN_DERIVED)
        json_object_set_new(j, "reason", json_string(o->file));
    else if (o->file)
        json_object_set_new(j, "file", json_string(o->file)),
        json_object_set_new(j, "line", json_integer(o->line)),
        json_object_set_new(j, "col", json_integer(o->col));
    return j;
}

/* Puts value at the dotted path inside obj, creating the sections on the way. */
static void json_put_path(json_t *obj, const char *path, json_t *value)
{
    const char *dot;
    while ((dot = strchr(path, '.'))) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(dot - path), path);
        json_t *next = json_object_get(obj, name);
        if (!next)
            json_object_set_new(obj, name, next = json_object());
        obj = next;
        path = dot + 1;
    }
    json_object_set_new(obj, path, value);
}

char *tr_recipe_to_json(const struct tr_recipe *r)
{
    json_t *values = json_object(), *origins = json_object();
    for (int key = 0; key < tr_nkeys; key++) {
        json_put_path(values, tr_keys[key].path, json_value(r, key));
        json_object_set_new(origins, tr_keys[key].path, json_origin(&r->origin[key]));
    }
    json_t *doc = json_pack("{sbsoso}", "ok", 1, "recipe", values, "origins", origins);
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(doc);
    return text;
}
