/* A model's forward graph as a TensorFlow GraphDef, for TensorBoard's Graphs dashboard
 * (Event.graph_def): one NodeDef per forward op, parameter and input, named by scope so the
 * dashboard nests them (stage1 › 0 › conv1), with each output's shape on the edges. */
#ifndef TR_GRAPHDEF_H
#define TR_GRAPHDEF_H

#include <stdint.h>

#include "graph/graph.h"
#include "report/protobuf.h"

/* The forward part of g, shapes evaluated at batch B (and sequence length S). */
void tr_graphdef_build(const struct tr_graph *g, int64_t B, int64_t S, struct tr_pb *out);

#endif
