/* One recipe value: a YAML node converted by its key's type, then stored into the struct
 * at the key's offset. The loader calls these for every layer, defaults included. */
#ifndef TR_VALUE_H
#define TR_VALUE_H

#include <yaml.h>

#include "recipe/recipe.h"
#include "recipe/schema.h"

struct tr_value {
    bool is_null;
    union {
        char *s;
        int64_t i;
        double f;
        bool b;
        int e;
        uint64_t size;
        struct tr_ints ints;
        struct tr_floats floats;
        struct tr_strs strs;
        struct tr_choice choice;
        struct tr_warmup warmup;
    } u;
};

/* Converts node to k's type. On failure returns a message (caller frees) and sets *bad to
 * the node at fault (an element of a list, say); on success returns NULL. */
char *tr_value_convert(const struct tr_key *k, yaml_document_t *doc, yaml_node_t *node,
                       struct tr_value *out, yaml_node_t **bad);
/* Moves v into r's field for key index, freeing what it replaces. */
void tr_value_store(struct tr_recipe *r, int key, struct tr_value *v);
/* Frees a list of strings' elements and empties it. */
void tr_strs_free(struct tr_strs *l);
/* YAML's null: an empty plain scalar, ~, null, Null or NULL. */
bool tr_node_is_null(const yaml_node_t *node);
/* The node's text as a message quotes it: 'abc', a list, a mapping. Caller frees. */
char *tr_node_describe(const yaml_node_t *node);

#endif
