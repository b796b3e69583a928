/* Chrome trace event files as PyTorch's profiler writes them (trace.h). */
#include "report/trace.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/atomic.h"
#include "data/cache.h"
#include "graph/memplan.h"
#include "graph/ops.h"

enum tr_trace_action tr_trace_action(const struct tr_trace_schedule *s, int64_t i)
{
    int64_t cycle = s->wait + s->warmup + s->active;
    if (s->active <= 0 || i < s->skip_first)
        return TR_TRACE_NONE;
    i -= s->skip_first;
    if (s->repeat > 0 && i / cycle >= s->repeat)
        return TR_TRACE_NONE;
    int64_t at = i % cycle;
    if (at < s->wait)
        return TR_TRACE_NONE;
    if (at < s->wait + s->warmup)
        return TR_TRACE_WARMUP;
    return at < cycle - 1 ? TR_TRACE_RECORD : TR_TRACE_RECORD_AND_SAVE;
}

void tr_trace_origin(struct tr_trace_info *info)
{
    struct timespec mono, real;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    info->origin = (double)mono.tv_sec + (double)mono.tv_nsec * 1e-9;
    info->origin_ns = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec;
}

/* ---- the events ------------------------------------------------------------------------------ */

static const struct tr_exec_event *sort_events;

/* By start; at the same start the longer first, so that a span opens before what it holds. */
static int by_start(const void *a, const void *b)
{
    const struct tr_exec_event *x = &sort_events[*(const int64_t *)a], *y = &sort_events[*(const int64_t *)b];
    if (x->began != y->began)
        return x->began < y->began ? -1 : 1;
    return x->seconds > y->seconds ? -1 : x->seconds < y->seconds;
}

/* PyTorch's names for the element types, so that readers grouping by them see familiar ones. */
static const char *type_name(enum tr_dtype t)
{
    static const char *const names[TR_NDTYPES] = {
        [TR_F32] = "float", [TR_BF16] = "c10::BFloat16", [TR_F16] = "c10::Half",
        [TR_I32] = "int", [TR_U8] = "unsigned char", [TR_F64] = "double"};
    return (unsigned)t < TR_NDTYPES && names[t] ? names[t] : "unknown";
}

static void dims_list(FILE *f, const struct tr_tensor *t, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s[", i ? ", " : "");
        for (int k = 0; k < t[i].rank; k++)
            fprintf(f, "%s%lld", k ? ", " : "", (long long)t[i].dim[k]);
        fputc(']', f);
    }
    fputc(']', f);
}

static void types_list(FILE *f, const struct tr_tensor *t, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", type_name(t[i].dtype));
    fputc(']', f);
}

static const char *const phase_names[] = {"forward", "backward", "recompute", "optimizer"};

/* A node's run: an op on the CPU (cat cpu_op; never a GPU kernel's category), with the graph
 * node, its shapes and dtypes, and the op table's FLOPs and bytes. */
static void op_event(FILE *f, const struct tr_trace_info *info, const struct tr_exec_event *e, int64_t id)
{
    const struct tr_node *n = &info->g->nodes[e->node];
    struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
    tr_bind_shapes(info->g, n, e->B, e->S, in, out);
    fprintf(f, "    {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
               "\"ts\": %.3f, \"dur\": %.3f,\n     \"args\": {\"External id\": %lld, \"node\": %d, \"phase\": \"%s\", "
               "\"Input Dims\": ", tr_op_name(n->op), info->pid, info->tid, (e->began - info->origin) * 1e6,
            e->seconds * 1e6, (long long)id, e->node, phase_names[n->phase < 4 ? n->phase : 0]);
    dims_list(f, in, n->nin);
    fputs(", \"Input type\": ", f);
    types_list(f, in, n->nin);
    fputs(", \"Output Dims\": ", f);
    dims_list(f, out, n->nout);
    fputs(", \"Output type\": ", f);
    types_list(f, out, n->nout);
    fprintf(f, ", \"flops\": %.0f, \"bytes\": %.0f, \"B\": %lld, \"S\": %lld}}", tr_ops[n->op].flops(n, in, out),
            tr_node_bytes(n, in, out), (long long)e->B, (long long)e->S);
}

/* A node's kernels on the device, timed by its own clock (cat kernel, as in PyTorch's traces: pid
 * the device, tid its stream, the backend's one compute stream here), tied to the cpu_op that
 * launched them by their ids. The device finished them when the host saw it do so: they end
 * there. */
enum { COMPUTE_STREAM = 1 };
static void kernel_event(FILE *f, const struct tr_trace_info *info, const struct tr_exec_event *e, int64_t id)
{
    double on_device = e->device_seconds < e->seconds ? e->device_seconds : e->seconds;
    fprintf(f, "    {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
               "\"ts\": %.3f, \"dur\": %.3f,\n     \"args\": {\"External id\": %lld, \"correlation\": %lld, "
               "\"device\": %d, \"stream\": %d, \"node\": %d}}",
            tr_op_name(info->g->nodes[e->node].op), info->device, COMPUTE_STREAM,
            (e->began + e->seconds - on_device - info->origin) * 1e6, on_device * 1e6, (long long)id, (long long)id,
            info->device, COMPUTE_STREAM, e->node);
}

/* The thread an event's lane ran on. */
static int lane_tid(const struct tr_trace_info *info, int lane)
{
    return lane == TR_LANE_COMMUNICATION ? (info->comm_tid ? info->comm_tid : info->tid + 1) : info->tid;
}

/* A span the trainer named: its steps (ProfilerStep#N, as the profiler marks them), data waits,
 * the optimizer, evaluation, checkpoints. */
static void span_event(FILE *f, const struct tr_trace_info *info, const struct tr_exec_event *e)
{
    char name[64];
    if (!strcmp(e->name, "ProfilerStep#"))
        snprintf(name, sizeof name, "ProfilerStep#%lld", (long long)e->step);
    else
        snprintf(name, sizeof name, "%s", e->name);
    fprintf(f, "    {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
               "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"step\": %lld}}",
            name, info->pid, lane_tid(info, e->lane), (e->began - info->origin) * 1e6, e->seconds * 1e6,
            (long long)e->step);
}

/* A counter track's value from a time on (readers draw it as a step line). */
static void counter_event(FILE *f, const struct tr_trace_info *info, const char *name, double at, int64_t value)
{
    fprintf(f, "    {\"ph\": \"C\", \"cat\": \"memory\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
               "\"args\": {\"bytes\": %lld}}", name, info->pid, info->tid, (at - info->origin) * 1e6, (long long)value);
}

/* The header, as PyTorch's: on one line each of its fields, "rank": N among them (HTA finds a
 * file's rank by that text). */
static void header(FILE *f, const struct tr_trace_info *info, const char *path)
{
    json_t *name = json_string(info->name ? info->name : "trainrun"), *trace = json_string(path);
    char *qname = json_dumps(name, JSON_ENCODE_ANY), *qpath = json_dumps(trace, JSON_ENCODE_ANY);
    fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n"
               "  \"distributedInfo\": {\"backend\": \"%s\", \"rank\": %d, \"world_size\": %d},\n"
               "  \"record_shapes\": 1,\n  \"trace_id\": \"%d-%lld\",\n  \"displayTimeUnit\": \"ms\",\n"
               "  \"baseTimeNanoseconds\": %lld,\n  \"traceName\": %s,\n  \"traceEvents\": [\n"
               "    {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, \"ts\": 0, \"args\": {\"name\": %s}},\n"
               "    {\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": %d, \"tid\": 0, \"ts\": 0, \"args\": {\"labels\": \"CPU\"}},\n"
               "    {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"ts\": 0, \"args\": {\"name\": \"trainer\"}}",
            info->backend ? info->backend : "none", info->rank, info->world_size, info->pid,
            (long long)info->origin_ns, (long long)info->origin_ns, qpath ? qpath : "\"\"", info->pid,
            qname ? qname : "\"trainrun\"", info->pid, info->pid, info->tid);
    free(qname), free(qpath);
    json_decref(name), json_decref(trace);
}

int tr_trace_write(const char *dir, const struct tr_trace_info *info, const struct tr_exec_event *events,
                   int64_t n, struct tr_path *path, struct tr_diag *d)
{
    char host[128] = "localhost";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int err = tr_make_folders(dir);
    if (err)
        return tr_fail(d, TR_EIO, "trace: cannot make %s: %s", dir, strerror(err));
    if (tr_path_set(path, d, "%s/%s_%d.%lld.pt.trace.json", dir, host, info->pid,
                    (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000))
        return TR_EIO;
    struct tr_atomic a;
    if (tr_atomic_open(&a, path->s, d))
        return TR_EIO;
    int64_t *order = tr_xmalloc((size_t)(n ? n : 1) * sizeof *order);
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    sort_events = events;
    qsort(order, (size_t)n, sizeof *order, by_start);
    header(a.f, info, path->s);
    bool kernels = false;
    for (int64_t i = 0; i < n && !kernels; i++)
        kernels = events[i].node >= 0 && events[i].device_seconds > 0;
    if (kernels)   /* the device's process and stream, named as PyTorch's traces name them */
        fprintf(a.f, ",\n    {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, \"ts\": 0, "
                     "\"args\": {\"name\": \"GPU %d\"}},\n"
                     "    {\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": %d, \"tid\": 0, \"ts\": 0, "
                     "\"args\": {\"labels\": \"GPU %d\"}},\n"
                     "    {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"ts\": 0, "
                     "\"args\": {\"name\": \"stream %d\"}}",
                info->device, info->device, info->device, info->device, info->device, COMPUTE_STREAM, COMPUTE_STREAM);
    bool lanes = false;
    for (int64_t i = 0; i < n && !lanes; i++)
        lanes = events[i].lane == TR_LANE_COMMUNICATION;
    if (lanes)
        fprintf(a.f, ",\n    {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"ts\": 0, "
                     "\"args\": {\"name\": \"communication\"}}", info->pid, lane_tid(info, TR_LANE_COMMUNICATION));
    int64_t ops = 0, live = -1;
    for (int64_t i = 0; i < n; i++) {
        const struct tr_exec_event *e = &events[order[i]];
        fputs(",\n", a.f);
        if (e->node >= 0) {
            op_event(a.f, info, e, ++ops);
            if (e->device_seconds > 0) {
                fputs(",\n", a.f);
                kernel_event(a.f, info, e, ops);
            }
            if (e->live != live) {   /* the arena's track, where it changes */
                fputs(",\n", a.f);
                counter_event(a.f, info, "arena live bytes", e->began, live = e->live);
            }
        } else if (e->node == TR_EVENT_COUNTER) {
            counter_event(a.f, info, e->name, e->began, e->live);
        } else {
            span_event(a.f, info, e);
        }
    }
    fputs("\n  ]\n}\n", a.f);
    free(order);
    return tr_atomic_commit(&a, d) ? TR_EIO : 0;
}
