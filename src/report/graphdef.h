/* A model's program as a TensorFlow GraphDef, for TensorBoard's Graphs dashboard
 * (Event.graph_def): one NodeDef per op, parameter and input, named by scope so the dashboard
 * nests them (stage1 › 0 › conv1), with each output's shape on the edges. The forward is at the
 * top; the backward under gradients/ (fed by the loss's scale and the values the forward saved),
 * recomputation under recompute/, the optimizer's nodes, if the program holds any, under optimizer/. */
#ifndef TR_GRAPHDEF_H
#define TR_GRAPHDEF_H

#include <stdint.h>

#include "graph/graph.h"
#include "report/protobuf.h"

/* Every node of g, shapes evaluated at batch B (and sequence length S). */
void tr_graphdef_build(const struct tr_graph *g, int64_t B, int64_t S, struct tr_pb *out);

#endif
