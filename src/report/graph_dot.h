/* The program the planner chose as a picture (torchviz's view), in Graphviz's DOT language: a box
 * per scheduled node — forward, backward and recomputation in their own colours — labelled with
 * its op and its output's dtype, shape and size, an arrow per value between them, the values the
 * backward reads from the forward (what is saved for it) drawn bold, and the node where the
 * arena's live bytes peak outlined. A 12-layer model has thousands of nodes: one block is drawn in
 * full with what belongs to no block (embeddings, the head and loss), and each other block as one
 * box per phase; full draws every node. */
#ifndef TR_REPORT_GRAPH_DOT_H
#define TR_REPORT_GRAPH_DOT_H

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"
#include "graph/memplan.h"

/* Writes schedule[0..n-1] of g, sized by the plan mp, to out. 0, or −1 on a write error. */
int tr_graph_dot(FILE *out, const struct tr_graph *g, const int *schedule, int n, const struct tr_memplan *mp,
                 bool full, const char *title);

/* tr_graph_dot into the file path, written whole or not at all (core/atomic.h). 0, or TR_EIO
 * with a sentence in d. */
int tr_graph_dot_file(const char *path, const struct tr_graph *g, const int *schedule, int n,
                      const struct tr_memplan *mp, bool full, const char *title, struct tr_diag *d);

/* Graphviz's dot renders the DOT file dot_path as SVG into svg_path (NULL: standard output),
 * through svg_path.partial renamed over it when whole. 0, or TR_EIO with a sentence in d: no
 * `dot` on PATH (Debian's graphviz), or it failed. */
int tr_graph_svg(const char *dot_path, const char *svg_path, struct tr_diag *d);

#endif
