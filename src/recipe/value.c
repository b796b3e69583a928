/* Converting YAML nodes to typed recipe values. Plain scalars are typed by the schema, not
 * by YAML 1.1's resolver, so `amp: off` is the name "off", not the boolean false. */
#include "recipe/value.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "recipe/units.h"

static const char *text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static bool is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

bool tr_node_is_null(const yaml_node_t *n)
{
    if (!is_plain(n))
        return false;
    const char *t = text(n);
    return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

char *tr_node_describe(const yaml_node_t *n)
{
    if (n->type == YAML_SEQUENCE_NODE) {
        int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
        return count ? tr_strdup_printf("a list of %d", count) : tr_strdup("an empty list");
    }
    if (n->type == YAML_MAPPING_NODE)
        return tr_strdup("a mapping");
    if (tr_node_is_null(n))
        return tr_strdup("null");
    /* Quote at most 60 bytes, cut on a UTF-8 boundary, so messages stay one line. */
    const char *t = text(n);
    size_t len = n->data.scalar.length, cut = len > 60 ? 60 : len;
    while (cut < len && cut > 0 && ((unsigned char)t[cut] & 0xC0) == 0x80)
        cut--;
    char *clean = tr_xmalloc(cut + 1);
    for (size_t i = 0; i < cut; i++)
        clean[i] = (t[i] == '\n' || t[i] == '\r' || t[i] == '\t' || t[i] == '\0') ? ' ' : t[i];
    clean[cut] = '\0';
    char *s = tr_strdup_printf("%s'%s%s'", is_plain(n) ? "" : "the quoted string ", clean,
                               cut < len ? "…" : "");
    free(clean);
    return s;
}

static int bool_text(const char *t, bool *b)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(t, yes[i]))
            return *b = true, 0;
        if (!strcasecmp(t, no[i]))
            return *b = false, 0;
    }
    return TR_EINVAL;
}

/* A decimal number: [+-]digits[.digits][e[+-]digits]; no hex, inf or nan. */
static int number_text(const char *t, double *x)
{
    const char *p = t;
    if (*p == '+' || *p == '-')
        p++;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
        return TR_EINVAL;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q) && !strchr(".eE+-", *q))
            return TR_EINVAL;
    char *end;
    *x = strtod(t, &end) + 0.0;   /* + 0.0 turns -0 into 0 */
    return (*end || !isfinite(*x)) ? TR_EINVAL : 0;
}

/* Numbers and booleans are plain scalars: "32" in quotes is a string. */
static int parse_bool(const yaml_node_t *n, bool *b)
{
    return is_plain(n) ? bool_text(text(n), b) : TR_EINVAL;
}

static int parse_number(const yaml_node_t *n, double *x)
{
    return is_plain(n) ? number_text(text(n), x) : TR_EINVAL;
}

static bool in_range(const struct tr_key *k, double x)
{
    bool lo = (k->flags & TR_MIN_OPEN) ? x > k->min : x >= k->min;
    bool hi = (k->flags & TR_MAX_OPEN) ? x < k->max : x <= k->max;
    return lo && hi;
}

static int parse_int(const struct tr_key *k, const yaml_node_t *n, int64_t *i)
{
    double x;
    if (parse_number(n, &x) || x != floor(x) || x < k->min || x > k->max)
        return TR_EINVAL;
    /* Every range lies within 2^53, where a double holds whole numbers exactly (reading the
     * digits instead would turn 9.007199254740992e15 into 9). */
    *i = (int64_t)x;
    return 0;
}

/* Enum names match case-insensitively; a boolean means "on"/"off" where those are names. */
static int parse_name(const char *const *names, const yaml_node_t *n, int *e)
{
    if (n->type != YAML_SCALAR_NODE)
        return TR_EINVAL;
    for (int i = 0; names[i]; i++)
        if (!strcasecmp(text(n), names[i]))
            return *e = i, 0;
    bool b;
    if (parse_bool(n, &b) == 0)
        for (int i = 0; names[i]; i++)
            if (!strcmp(names[i], b ? "on" : "off"))
                return *e = i, 0;
    return TR_EINVAL;
}

static int parse_warmup(const yaml_node_t *n, struct tr_warmup *w)
{
    if (!is_plain(n))
        return TR_EINVAL;
    const char *t = text(n);
    size_t len = strlen(t);
    double x;
    if (len > 1 && t[len - 1] == '%') {
        char *number = strndup(t, len - 1);   /* number_text, not strtod: no hex (0x10%) */
        bool ok = isdigit((unsigned char)t[0]) && number_text(number, &x) == 0 && x < 100;
        free(number);
        if (!ok)
            return TR_EINVAL;
        *w = (struct tr_warmup){.fraction = x / 100};
        return 0;
    }
    if (parse_number(n, &x) || x < 0)
        return TR_EINVAL;
    if (strpbrk(t, ".eE")) {   /* written as a fraction */
        if (x >= 1)
            return TR_EINVAL;
        *w = (struct tr_warmup){.fraction = x};
        return 0;
    }
    if (x > 9007199254740992.0)
        return TR_EINVAL;
    *w = (struct tr_warmup){.is_steps = true, .steps = (int64_t)x};
    return 0;
}

static int parse_sha256(const yaml_node_t *n, char **s)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.length != 64)
        return TR_EINVAL;
    char *hex = tr_strdup(text(n));
    for (int i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)hex[i])) {
            free(hex);
            return TR_EINVAL;
        }
        hex[i] = (char)tolower((unsigned char)hex[i]);
    }
    *s = hex;
    return 0;
}

/* What POSIX calls a name: letters, digits and underscores, not starting with a digit. */
static bool is_env_name(const char *t)
{
    if (!*t || isdigit((unsigned char)*t))
        return false;
    for (const char *p = t; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return false;
    return true;
}

/* One scalar of a scalar-typed key (or one list element); 0 or TR_EINVAL. */
static int convert_scalar(const struct tr_key *k, const yaml_node_t *n, struct tr_value *v)
{
    double x;
    switch (k->type) {
    case TR_T_STR:
        if (n->type != YAML_SCALAR_NODE || n->data.scalar.length == 0 ||
            strlen(text(n)) != n->data.scalar.length)   /* no empty strings, no NUL bytes */
            return TR_EINVAL;
        v->u.s = tr_strdup(text(n));
        return 0;
    case TR_T_INT:
    case TR_T_INTS:
        return parse_int(k, n, &v->u.i);
    case TR_T_FLOAT:
    case TR_T_FLOATS:
        if (parse_number(n, &x) || !in_range(k, x))
            return TR_EINVAL;
        v->u.f = x;
        return 0;
    case TR_T_BOOL:
        return parse_bool(n, &v->u.b);
    case TR_T_ENUM:
    case TR_T_ENUMS:
        return parse_name(k->names, n, &v->u.e);
    case TR_T_SIZE:
        if (!is_plain(n) || tr_parse_size(text(n), &v->u.size) || !in_range(k, (double)v->u.size))
            return TR_EINVAL;
        return 0;
    case TR_T_DURATION:
        if (!is_plain(n) || tr_parse_duration(text(n), &v->u.f) || !in_range(k, v->u.f))
            return TR_EINVAL;
        return 0;
    case TR_T_CHOICE:
        if (parse_name(k->names, n, &v->u.choice.name) == 0)
            return 0;
        v->u.choice.name = -1;
        return parse_int(k, n, &v->u.choice.n);
    case TR_T_WARMUP:
        return parse_warmup(n, &v->u.warmup);
    case TR_T_SHA256:
        return parse_sha256(n, &v->u.s);
    case TR_T_ENV_NAMES:
        if (n->type != YAML_SCALAR_NODE || !is_env_name(text(n)))
            return TR_EINVAL;
        v->u.s = tr_strdup(text(n));
        return 0;
    }
    return TR_EINVAL;
}

static bool is_list_type(enum tr_type t)
{
    return t == TR_T_INTS || t == TR_T_FLOATS || t == TR_T_ENUMS || t == TR_T_ENV_NAMES;
}

/* Whether a quoted scalar would be accepted written plain ("32" for a number). */
static bool valid_unquoted(const struct tr_key *k, const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || is_plain(n) || is_list_type(k->type))
        return false;
    yaml_node_t plain = *n;
    plain.data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
    struct tr_value v = {0};
    if (convert_scalar(k, &plain, &v))
        return false;
    if (k->type == TR_T_STR || k->type == TR_T_SHA256)
        free(v.u.s);
    return true;
}

static char *mismatch(const struct tr_key *k, const yaml_node_t *n, const char *what)
{
    char *expected = tr_key_expected(k), *got = tr_node_describe(n);
    /* A quoted number is a string in YAML; say so rather than just "expected a number". */
    char *msg = tr_strdup_printf("%s%s: expected %s, got %s%s", k->path, what, expected, got,
                                 valid_unquoted(k, n) ? " (remove the quotes)" : "");
    free(expected);
    free(got);
    return msg;
}

/* One element of a list key, as a key of its own, for messages about that element. */
static struct tr_key element_of(const struct tr_key *k)
{
    struct tr_key e = *k;
    e.type = k->type == TR_T_INTS ? TR_T_INT : k->type == TR_T_FLOATS ? TR_T_FLOAT : TR_T_ENUM;
    e.flags &= ~(unsigned)TR_NULLABLE;
    return e;
}

static char *element_mismatch(const struct tr_key *k, const yaml_node_t *n, int i)
{
    char where[16];
    snprintf(where, sizeof where, "[%d]", i);
    if (k->type != TR_T_ENV_NAMES) {
        struct tr_key element = element_of(k);
        return mismatch(&element, n, where);
    }
    char *got = tr_node_describe(n);
    char *msg = tr_strdup_printf("%s%s: expected an environment variable name (letters, digits and _, "
                                 "not first a digit), got %s", k->path, where, got);
    free(got);
    return msg;
}

void tr_strs_free(struct tr_strs *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    memset(l, 0, sizeof *l);
}

/* Element i of a list of environment variable names, unless an earlier one has its name. */
static char *store_name(const struct tr_key *k, struct tr_strs *l, int i, char *name)
{
    for (int j = 0; j < i; j++)
        if (!strcmp(l->v[j], name)) {
            char *msg = tr_strdup_printf("%s[%d]: '%s' is listed twice", k->path, i, name);
            free(name);
            return msg;
        }
    l->v[i] = name;
    l->n = i + 1;
    return NULL;
}

static char *convert_list(const struct tr_key *k, yaml_document_t *doc, yaml_node_t *n,
                          struct tr_value *out, yaml_node_t **bad)
{
    int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count < k->list_min || count > k->list_max) {
        *bad = n;
        return mismatch(k, n, "");
    }
    for (int i = 0; i < count; i++) {
        yaml_node_t *item = yaml_document_get_node(doc, n->data.sequence.items.start[i]);
        struct tr_value one = {0};
        if (!item || item->type != YAML_SCALAR_NODE || convert_scalar(k, item, &one)) {
            *bad = item ? item : n;
            if (k->type == TR_T_ENV_NAMES)
                tr_strs_free(&out->u.strs);
            return element_mismatch(k, *bad, i);
        }
        if (k->type == TR_T_ENV_NAMES) {
            char *msg = store_name(k, &out->u.strs, i, one.u.s);
            if (msg) {
                *bad = item;
                tr_strs_free(&out->u.strs);
                return msg;
            }
        } else if (k->type == TR_T_FLOATS)
            out->u.floats.v[i] = one.u.f;
        else if (k->type == TR_T_INTS)
            out->u.ints.v[i] = one.u.i;
        else {
            for (int j = 0; j < i; j++)
                if (out->u.ints.v[j] == one.u.e) {
                    *bad = item;
                    return tr_strdup_printf("%s[%d]: '%s' is listed twice", k->path, i, k->names[one.u.e]);
                }
            out->u.ints.v[i] = one.u.e;
        }
    }
    out->u.ints.n = count;   /* n sits first in every list struct */
    if (k->type == TR_T_FLOATS)
        out->u.floats.n = count;
    return NULL;
}

char *tr_value_convert(const struct tr_key *k, yaml_document_t *doc, yaml_node_t *n,
                       struct tr_value *out, yaml_node_t **bad)
{
    memset(out, 0, sizeof *out);
    *bad = n;
    if (tr_node_is_null(n)) {
        if (k->flags & TR_NULLABLE) {
            out->is_null = true;
            return NULL;
        }
        return mismatch(k, n, "");
    }
    if (is_list_type(k->type)) {
        if (n->type != YAML_SEQUENCE_NODE)
            return mismatch(k, n, "");
        return convert_list(k, doc, n, out, bad);
    }
    if (n->type != YAML_SCALAR_NODE || convert_scalar(k, n, out))
        return mismatch(k, n, "");
    return NULL;
}

static size_t field_size(enum tr_type t)
{
    switch (t) {
    case TR_T_STR:
    case TR_T_SHA256:   return sizeof(char *);
    case TR_T_INT:      return sizeof(int64_t);
    case TR_T_FLOAT:
    case TR_T_DURATION: return sizeof(double);
    case TR_T_BOOL:     return sizeof(bool);
    case TR_T_ENUM:     return sizeof(int);
    case TR_T_SIZE:     return sizeof(uint64_t);
    case TR_T_INTS:
    case TR_T_ENUMS:    return sizeof(struct tr_ints);
    case TR_T_FLOATS:   return sizeof(struct tr_floats);
    case TR_T_CHOICE:   return sizeof(struct tr_choice);
    case TR_T_WARMUP:   return sizeof(struct tr_warmup);
    case TR_T_ENV_NAMES: return sizeof(struct tr_strs);
    }
    return 0;
}

void tr_value_store(struct tr_recipe *r, int key, struct tr_value *v)
{
    const struct tr_key *k = &tr_keys[key];
    char *field = (char *)r + k->offset;
    if (k->type == TR_T_STR || k->type == TR_T_SHA256)
        free(*(char **)field);
    else if (k->type == TR_T_ENV_NAMES)
        tr_strs_free((struct tr_strs *)field);
    memcpy(field, &v->u, field_size(k->type));
    r->is_null[key] = v->is_null;
    memset(v, 0, sizeof *v);   /* the string now belongs to r */
}
