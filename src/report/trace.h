/* Per-rank traces in the Chrome trace event format, with the header PyTorch's profiler writes
 * (schemaVersion, deviceProperties, distributedInfo, traceEvents), named as its
 * tensorboard_trace_handler names them: <host>_<pid>.<milliseconds>.pt.trace.json, in the run
 * folder's traces/. Real readers open them: chrome://tracing, Perfetto, TensorBoard's profile
 * plugin, Holistic Trace Analysis (tests/trace.sh).
 *
 * What is traced follows the recipe's profile: section, torch.profiler.schedule's rule: after
 * skip_first steps, cycles of wait steps (nothing), warmup steps (nothing kept) and active steps
 * (every node and span kept), repeat cycles (0: until the run ends); each cycle's active steps
 * make one file. active 0 is off, and then the profiler's hook only adds phase times. */
#ifndef TR_REPORT_TRACE_H
#define TR_REPORT_TRACE_H

#include <stdint.h>

#include "backend/profile.h"
#include "core/error.h"

struct tr_trace_schedule {
    int64_t skip_first, wait, warmup, active, repeat;
};

enum tr_trace_action {
    TR_TRACE_NONE,           /* not traced */
    TR_TRACE_WARMUP,         /* traced and dropped: the tracer's own start-up is not measured */
    TR_TRACE_RECORD,         /* kept */
    TR_TRACE_RECORD_AND_SAVE /* kept, and the cycle's file written after it */
};

/* What to do at the i-th step of this process (from 0), as torch.profiler.schedule says. */
enum tr_trace_action tr_trace_action(const struct tr_trace_schedule *s, int64_t i);

/* Who wrote the trace, for its header and its events' pid and tid. */
struct tr_trace_info {
    const struct tr_graph *g;    /* the graph the node events' indices are in */
    int rank, world_size;
    const char *backend;         /* distributedInfo.backend: "none" on one process */
    const char *name;            /* the process's name in readers: the recipe's */
    int pid, tid;                /* the process and the thread that ran the nodes */
    int comm_tid;                /* the thread that summed gradients while they ran (0: none) */
    int device;                  /* the device's number (cuda:N): its kernels' pid, as in PyTorch's traces */
    double origin;               /* CLOCK_MONOTONIC seconds at ts 0 */
    int64_t origin_ns;           /* CLOCK_REALTIME nanoseconds at the same instant: baseTimeNanoseconds */
};

/* The clock pair for info->origin and info->origin_ns, read together. */
void tr_trace_origin(struct tr_trace_info *info);

/* Writes the events (in any order: written by start, parents first) into dir/<host>_<pid>.<ms>
 * .pt.trace.json atomically, making dir when needed; the file's path into path. 0, or TR_EIO with
 * the reason in d. */
int tr_trace_write(const char *dir, const struct tr_trace_info *info, const struct tr_exec_event *events,
                   int64_t n, struct tr_path *path, struct tr_diag *d);

#endif
