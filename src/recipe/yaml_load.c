/* YAML within limits (yaml_load.h): one pass over the text's events, keeping for each open
 * collection and each anchor how many values it holds and how deep it nests once its aliases
 * are expanded; then libyaml composes the document as before, so values and their places are
 * the same as yaml_parser_load's alone. */
#include "recipe/yaml_load.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define TEXT(x) #x
#define NUMBER(x) TEXT(x)

/* libyaml's problem strings are not freed by the parser: these live for the program. */
static const char too_deep[] = "collections nested more than " NUMBER(TR_YAML_MAX_DEPTH)
                               " levels deep; trainrun reads at most " NUMBER(TR_YAML_MAX_DEPTH);
static const char alias_too_deep[] = "an alias whose value would nest more than " NUMBER(TR_YAML_MAX_DEPTH)
                                     " levels deep; trainrun reads at most " NUMBER(TR_YAML_MAX_DEPTH);
static const char too_many_nodes[] = "more than " NUMBER(TR_YAML_MAX_NODES)
                                     " values, counting all that aliases repeat";
static const char too_many_anchors[] = "more than " NUMBER(TR_YAML_MAX_ANCHORS) " anchors (&name)";
static const char too_many_aliases[] = "more than " NUMBER(TR_YAML_MAX_ALIASES) " aliases (*name)";

/* A value as aliases expand it: its count of values and its collections' depth. */
struct extent {
    size_t nodes;
    int height;   /* 0 for a scalar, 1 + the deepest child's for a collection */
};

struct anchor {
    char *name;
    struct extent of;
};

struct open_collection {
    struct extent so_far;   /* itself and the children closed so far */
    char *anchor;           /* its &name, or NULL */
};

struct limits {
    struct open_collection open[TR_YAML_MAX_DEPTH];
    int depth;
    struct anchor anchors[TR_YAML_MAX_ANCHORS];
    int nanchors, naliases;
    size_t nodes;
};

static void forget_anchors(struct limits *l)
{
    for (int i = 0; i < l->nanchors; i++)
        free(l->anchors[i].name);
    l->nanchors = 0;
}

static struct extent anchored(const struct limits *l, const char *name)
{
    for (int i = l->nanchors - 1; i >= 0; i--)   /* a name given again means the later value */
        if (!strcmp(l->anchors[i].name, name))
            return l->anchors[i].of;
    return (struct extent){1, 0};   /* undefined: libyaml's composer says so */
}

/* A value of extent e ends (a scalar, an alias, a closed collection) under the open ones:
 * counted into its parent, remembered under its anchor. NULL, or what limit it passes. */
static const char *value_ends(struct limits *l, struct extent e, char *anchor)
{
    if (l->depth + e.height > TR_YAML_MAX_DEPTH) {
        free(anchor);
        return alias_too_deep;
    }
    if (l->depth > 0) {
        struct extent *parent = &l->open[l->depth - 1].so_far;
        parent->nodes += e.nodes;
        if (e.height + 1 > parent->height)
            parent->height = e.height + 1;
    }
    if (!anchor)
        return NULL;
    if (l->nanchors == TR_YAML_MAX_ANCHORS) {
        free(anchor);
        return too_many_anchors;
    }
    l->anchors[l->nanchors++] = (struct anchor){anchor, e};
    return NULL;
}

static char *copy(const yaml_char_t *anchor)
{
    return anchor ? tr_strdup((const char *)anchor) : NULL;
}

/* One event against the limits: NULL, or the limit it passes. */
static const char *check_event(struct limits *l, const yaml_event_t *e)
{
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        forget_anchors(l);   /* anchors are a document's own */
        return NULL;
    case YAML_SCALAR_EVENT:
        if (++l->nodes > TR_YAML_MAX_NODES)
            return too_many_nodes;
        return value_ends(l, (struct extent){1, 0}, copy(e->data.scalar.anchor));
    case YAML_ALIAS_EVENT: {
        struct extent of = anchored(l, (const char *)e->data.alias.anchor);
        if (++l->naliases > TR_YAML_MAX_ALIASES)
            return too_many_aliases;
        if ((l->nodes += of.nodes) > TR_YAML_MAX_NODES)
            return too_many_nodes;
        return value_ends(l, of, NULL);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if (l->depth == TR_YAML_MAX_DEPTH)
            return too_deep;
        if (++l->nodes > TR_YAML_MAX_NODES)
            return too_many_nodes;
        l->open[l->depth++] = (struct open_collection){
            .so_far = {1, 1},
            .anchor = copy(e->type == YAML_SEQUENCE_START_EVENT ? e->data.sequence_start.anchor
                                                                : e->data.mapping_start.anchor)};
        return NULL;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: {
        struct open_collection *c = &l->open[--l->depth];
        return value_ends(l, c->so_far, c->anchor);
    }
    case YAML_NO_EVENT:
    case YAML_STREAM_START_EVENT:
    case YAML_STREAM_END_EVENT:
    case YAML_DOCUMENT_END_EVENT:
        return NULL;   /* hold no values */
    }
    return NULL;
}

/* The first limit text passes, with its place; NULL when within them all, or when libyaml
 * finds a syntax error first (the composer then finds it again, and says it its own way). */
static const char *over_limits(const char *text, size_t len, yaml_mark_t *at)
{
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    struct limits *l = tr_xcalloc(1, sizeof *l);
    const char *problem = NULL;
    for (bool end = false; !end && !problem;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&parser, &e))
            break;
        problem = check_event(l, &e);
        *at = e.start_mark;
        end = e.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&e);
    }
    while (l->depth > 0)
        free(l->open[--l->depth].anchor);
    forget_anchors(l);
    free(l);
    yaml_parser_delete(&parser);
    return problem;
}

int tr_yaml_load(yaml_parser_t *parser, const char *text, size_t len, yaml_document_t *doc)
{
    yaml_mark_t at;
    const char *problem = parser->stream_start_produced ? NULL : over_limits(text, len, &at);
    if (problem) {
        memset(doc, 0, sizeof *doc);
        parser->error = YAML_COMPOSER_ERROR;
        parser->problem = problem;
        parser->problem_mark = at;
        parser->context = NULL;
        return 0;
    }
    return yaml_parser_load(parser, doc);
}
