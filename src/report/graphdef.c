/* GraphDef from a tr_graph (graphdef.h). The messages, from TensorFlow's graph.proto,
 * node_def.proto and attr_value.proto (TensorBoard keeps copies under compat/proto):
 *   GraphDef  { repeated NodeDef node = 1; VersionDef versions = 4; }
 *   NodeDef   { string name = 1; string op = 2; repeated string input = 3; string device = 4;
 *               map<string, AttrValue> attr = 5; }
 *   AttrValue { oneof: ListValue list = 1; bytes s = 2; int64 i = 3; float f = 4; bool b = 5;
 *               DataType type = 6; TensorShapeProto shape = 7; … }
 *   AttrValue.ListValue { …; repeated TensorShapeProto shape = 7; }
 *   VersionDef { int32 producer = 1; }
 * The Graphs dashboard reads "_output_shapes" (a list of shapes) to label edges. */
#include "report/graphdef.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Where each phase's nodes nest: the backward under "gradients/" as TensorFlow's own graphs put
 * it, recomputation (checkpointing's second forward) and the optimizer beside it. */
static const char *const phase_scope[] = {
    [TR_FORWARD] = "", [TR_BACKWARD] = "gradients/", [TR_RECOMPUTE] = "recompute/", [TR_OPTIMIZER] = "optimizer/",
};

enum { GRAPH_NODE = 1, GRAPH_VERSIONS = 4, VERSION_PRODUCER = 1, NODE_NAME = 1, NODE_OP = 2,
       NODE_INPUT = 3, NODE_DEVICE = 4, NODE_ATTR = 5, MAP_KEY = 1, MAP_VALUE = 2, ATTR_LIST = 1,
       ATTR_S = 2, LIST_SHAPE = 7, SHAPE_DIM = 2, DIM_SIZE = 1 };

/* "stage1.0.conv1.weight" → "stage1/0/conv1/weight": the dashboard nests by '/'. */
static void scoped(const char *dotted, char *out, size_t n)
{
    snprintf(out, n, "%s", dotted);
    for (char *c = out; *c; c++)
        if (*c == '.')
            *c = '/';
}

static void shape_of(const struct tr_value *v, int64_t B, int64_t S, struct tr_pb *shape)
{
    for (int d = 0; d < v->shape.rank; d++) {
        struct tr_pb dim = {0};
        int64_t size = tr_dim_eval(v->shape.dim[d], B, S);
        if (size)
            tr_pb_uint(&dim, DIM_SIZE, (uint64_t)size);
        tr_pb_take(shape, SHAPE_DIM, &dim);
    }
}

static void attr(struct tr_pb *node, const char *key, struct tr_pb *value)
{
    struct tr_pb entry = {0};
    tr_pb_string(&entry, MAP_KEY, key);
    tr_pb_take(&entry, MAP_VALUE, value);
    tr_pb_take(node, NODE_ATTR, &entry);
}

/* NodeDef {name, op, input…, device, attr {_output_shapes, dtype…}} for values outs[0..nout) */
static void node_def(struct tr_pb *graph, const char *name, const char *op, char (*inputs)[176],
                     int nin, const struct tr_graph *g, const int *outs, int nout, int64_t B, int64_t S)
{
    struct tr_pb node = {0}, list = {0}, shapes = {0}, dtype = {0};
    tr_pb_string(&node, NODE_NAME, name);
    tr_pb_string(&node, NODE_OP, op);
    for (int i = 0; i < nin; i++)
        tr_pb_string(&node, NODE_INPUT, inputs[i]);
    tr_pb_string(&node, NODE_DEVICE, "/device:CPU:0");
    for (int o = 0; o < nout; o++) {
        struct tr_pb shape = {0};
        shape_of(&g->values[outs[o]], B, S, &shape);
        tr_pb_take(&list, LIST_SHAPE, &shape);
    }
    tr_pb_take(&shapes, ATTR_LIST, &list);
    attr(&node, "_output_shapes", &shapes);
    if (nout) {
        tr_pb_string(&dtype, ATTR_S, tr_dtype_name(g->values[outs[0]].dtype));
        attr(&node, "dtype", &dtype);
    }
    tr_pb_take(graph, GRAPH_NODE, &node);
}

/* The scope of parameter v: its name's without the last part ("encoder/layer/0/attention/query"). */
static void param_scope(const struct tr_value *param, char out[128])
{
    scoped(param->name, out, 128);
    char *last = strrchr(out, '/');
    *(last ? last : out) = '\0';
}

/* The scope of node n: that of the parameter whose gradient it writes, else of its first
 * parameter input, else of the first input a forward or recomputed node made (a backward node
 * sits where the forward node it differentiates sits), else of its first input's producer.
 * param_of[v]: the parameter whose gradient value v is, or −1. */
static void node_scope(const struct tr_graph *g, int n, const int *param_of, char (*scope)[128])
{
    const struct tr_node *node = &g->nodes[n];
    for (int o = 0; o < node->nout; o++)
        if (param_of[node->out[o]] >= 0) {
            param_scope(&g->values[param_of[node->out[o]]], scope[n]);
            return;
        }
    int from = -1;
    for (int i = 0; i < node->nin; i++) {
        const struct tr_value *val = &g->values[node->in[i]];
        if (val->kind == TR_PARAM) {
            param_scope(val, scope[n]);
            return;
        }
        int p = val->producer;
        if (p >= 0 && from < 0 && g->nodes[p].phase != TR_BACKWARD)
            from = p;
    }
    if (from < 0 && node->nin)
        from = g->values[node->in[0]].producer;
    if (from >= 0 && from != n)
        memcpy(scope[n], scope[from], sizeof scope[n]);
}

/* NodeDef of node n, named "[phase/]scope/op_n"; names its outputs in source. A node that adds
 * into its output (a gradient summed over its uses) reads the earlier writer's value too, so the
 * sum's every term is an edge. */
static void op_def(struct tr_pb *out, const struct tr_graph *g, int n, const int *param_of, char (*source)[176],
                   char (*scope)[128], int64_t B, int64_t S)
{
    const struct tr_node *node = &g->nodes[n];
    char inputs[TR_MAX_IN + TR_MAX_OUT][176];
    int nin = 0;
    for (int i = 0; i < node->nin; i++)
        if (source[node->in[i]][0])
            snprintf(inputs[nin++], sizeof inputs[0], "%s", source[node->in[i]]);
    for (int o = 0; node->accumulate && o < node->nout; o++)
        if (source[node->out[o]][0])
            snprintf(inputs[nin++], sizeof inputs[0], "%s", source[node->out[o]]);
    node_scope(g, n, param_of, scope);
    char name[176];
    snprintf(name, sizeof name, "%s%s%s%s_%d", phase_scope[node->phase], scope[n], scope[n][0] ? "/" : "",
             tr_op_name(node->op), n);
    node_def(out, name, tr_op_name(node->op), inputs, nin, g, node->out, node->nout, B, S);
    for (int o = 0; o < node->nout; o++)
        if (o)
            snprintf(source[node->out[o]], sizeof source[0], "%.170s:%d", name, o);
        else
            snprintf(source[node->out[o]], sizeof source[0], "%s", name);
}

void tr_graphdef_build(const struct tr_graph *g, int64_t B, int64_t S, struct tr_pb *out)
{
    *out = (struct tr_pb){0};
    /* Each value's name as an edge source ("node" or "node:1"); each node's scope (node_scope). */
    char (*source)[176] = tr_xcalloc((size_t)g->nvalues, sizeof *source);
    char (*scope)[128] = tr_xcalloc((size_t)g->nnodes + 1, sizeof *scope);
    int *param_of = tr_xcalloc((size_t)g->nvalues, sizeof *param_of);
    for (int v = 0; v < g->nvalues; v++)
        param_of[v] = -1;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM && g->values[v].grad >= 0)
            param_of[g->values[v].grad] = v;
    for (int v = 0; v < g->nvalues; v++) {
        const struct tr_value *val = &g->values[v];
        if (val->kind != TR_PARAM && val->kind != TR_STATE && val->kind != TR_INPUT)
            continue;
        if (val->name[0])
            scoped(val->name, source[v], sizeof source[v]);
        else
            snprintf(source[v], sizeof source[v], "input_%d", v);
        const char *op = val->kind == TR_INPUT ? "Placeholder" : val->kind == TR_PARAM ? "Parameter" : "State";
        node_def(out, source[v], op, NULL, 0, g, &v, 1, B, S);
    }
    /* phase by phase, so that what a node reads is named before it: a recomputed value before the
     * backward that reads it, whatever the order the nodes were added in */
    static const enum tr_phase order[] = {TR_FORWARD, TR_RECOMPUTE, TR_BACKWARD, TR_OPTIMIZER};
    for (int p = 0; p < 4; p++)
        for (int n = 0; n < g->nnodes; n++)
            if (g->nodes[n].phase == order[p])
                op_def(out, g, n, param_of, source, scope, B, S);
    struct tr_pb versions = {0};
    tr_pb_uint(&versions, VERSION_PRODUCER, 22);
    tr_pb_take(out, GRAPH_VERSIONS, &versions);
    free(source);
    free(scope);
    free(param_of);
}
