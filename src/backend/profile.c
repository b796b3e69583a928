/* The profiler hook (profile.h): wall time around each node the executor runs. */
#include "backend/profile.h"

#include <stdlib.h>
#include <time.h>

#include "core/error.h"

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A device's kernels return before they finish: per-op times wait for every node, phase
 * times only where the phase changes (the device stays busy in between). */
static bool waits_per_node(const struct tr_exec_profile *p, const struct tr_exec *x)
{
    return x->be->ops->host_visible || p->per_op || p->recording;
}

static struct tr_exec_event *add_event(struct tr_exec_profile *p)
{
    if (p->nevents == p->cap_events) {
        p->cap_events = p->cap_events ? 2 * p->cap_events : 4096;
        p->events = tr_xrealloc(p->events, (size_t)p->cap_events * sizeof *p->events);
    }
    return &p->events[p->nevents++];
}

static int profile_before(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    struct tr_exec_profile *p = ctx;
    double now = seconds();
    p->node_started = now;
    if (!p->in_phase) {
        p->phase_started = now;
        p->in_phase = true;
    }
    return p->recording && x->be->ops->timer_start ? x->be->ops->timer_start(x->be, d) : 0;
}

static int profile_after(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    struct tr_exec_profile *p = ctx;
    if (!waits_per_node(p, x)) {   /* phases alone: only where one ends is there anything to do */
        if (!p->phase_seconds || !tr_exec_phase_ends(x, step))
            return 0;
        int rc = tr_backend_synchronize(x->be, d);
        if (rc)
            return rc;
        p->phase_seconds[node->phase] += seconds() - p->phase_started;
        p->in_phase = false;
        return 0;
    }
    double on_device = 0;
    int rc = p->recording && x->be->ops->timer_stop ? x->be->ops->timer_stop(x->be, &on_device, d) : 0;
    if (!rc && !x->be->ops->host_visible)
        rc = tr_backend_synchronize(x->be, d);
    if (rc)
        return rc;
    double took = seconds() - p->node_started;
    if (p->per_op)
        p->op_seconds[node->op] += took;
    if (p->recording)
        *add_event(p) = (struct tr_exec_event){p->node_started, took, on_device, NULL, (int)(node - x->g->nodes),
                                               x->B, x->S, 0, x->plan->live ? (int64_t)x->plan->live[step] : 0,
                                               TR_LANE_TRAINER};
    if (p->phase_seconds)
        p->phase_seconds[node->phase] += took;
    return 0;
}

struct tr_exec_hook tr_exec_profiler(struct tr_exec_profile *p)
{
    return (struct tr_exec_hook){.before = profile_before, .after = profile_after, .ctx = p};
}

void tr_exec_profile_print(FILE *f, const struct tr_exec_profile *p, int64_t runs, const char *per)
{
    double total = 0;
    for (int op = 0; op < TR_NOPS; op++)
        total += p->op_seconds[op];
    for (int op = 0; op < TR_NOPS; op++)
        if (p->op_seconds[op] > 0)
            fprintf(f, "  %-20s %8.2f ms per %s %5.1f%%\n", tr_op_name((enum tr_op)op),
                    p->op_seconds[op] * 1e3 / (double)(runs > 0 ? runs : 1), per, 100 * p->op_seconds[op] / total);
}

void tr_exec_profile_span(struct tr_exec_profile *p, const char *name, int64_t step, double began, double ended)
{
    if (p->recording)
        *add_event(p) = (struct tr_exec_event){began, ended - began, 0, name, TR_EVENT_SPAN, 0, 0, step, 0, TR_LANE_TRAINER};
}

void tr_exec_profile_span_on(struct tr_exec_profile *p, int lane, const char *name, int64_t step, double began,
                             double ended)
{
    if (p->recording)
        *add_event(p) = (struct tr_exec_event){began, ended - began, 0, name, TR_EVENT_SPAN, 0, 0, step, 0, lane};
}

void tr_exec_profile_counter(struct tr_exec_profile *p, const char *name, double at, int64_t value)
{
    if (p->recording)
        *add_event(p) = (struct tr_exec_event){at, 0, 0, name, TR_EVENT_COUNTER, 0, 0, 0, value, TR_LANE_TRAINER};
}

void tr_exec_profile_clear(struct tr_exec_profile *p)
{
    p->nevents = 0;
}

void tr_exec_profile_free(struct tr_exec_profile *p)
{
    free(p->events);
    p->events = NULL;
    p->nevents = p->cap_events = 0;
}
