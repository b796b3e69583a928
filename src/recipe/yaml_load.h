/* Reading YAML within limits, for every YAML trainrun reads from outside (recipes, extends,
 * conf files, key=value overrides, dataset.yaml, device profiles). libyaml's scanner is
 * quadratic in how deeply collections nest (200 KB of `[[[…]]]` took 35 s, 1 MiB over 900 s),
 * its composer quadratic in anchors and aliases, and aliases can repeat a value without end
 * ("billion laughs"); a pass over the events stops at the first limit, so whatever the size
 * cap lets in is refused in milliseconds. trainrun-recipe(5) documents the limits. */
#ifndef TR_YAML_LOAD_H
#define TR_YAML_LOAD_H

#include <stddef.h>
#include <yaml.h>

#define TR_YAML_MAX_DEPTH 64         /* collections inside collections; a recipe needs 4 */
#define TR_YAML_MAX_NODES 100000     /* values, an alias counted as all it repeats */
#define TR_YAML_MAX_ANCHORS 256      /* &name */
#define TR_YAML_MAX_ALIASES 4096     /* *name */

/* yaml_parser_load(parser, doc) for a parser reading exactly text (len bytes, given to
 * yaml_parser_set_input_string): on its first document the whole of text is checked against
 * the limits first. 1, or 0 with parser->problem and problem_mark set, for a limit as for a
 * syntax error, so that a caller reports both the same way. */
int tr_yaml_load(yaml_parser_t *parser, const char *text, size_t len, yaml_document_t *doc);

#endif
