/* The profiler (profile.c): an executor hook (exec.h) that adds the time of each node to its
 * op's and its phase's totals — the trainer's time/forward, time/backward… and, with
 * TR_PROFILE set, the per-op table that bench/ and trainrun print at the end. While recording
 * it also keeps each node's run as an event, beside the spans the trainer adds (its steps,
 * data waits, the optimizer…): the trace report/trace.c writes. */
#ifndef TR_BACKEND_PROFILE_H
#define TR_BACKEND_PROFILE_H

#include <stdio.h>

#include "backend/exec.h"

/* One thing that took time on the calling thread: a node the executor ran (node ≥ 0, at the
 * run's B and S, live: the arena's bytes live while it ran, as the memory plan has them), a
 * span the trainer named (node TR_EVENT_SPAN; step: its step for "ProfilerStep#"), or a
 * counter's value at a time (node TR_EVENT_COUNTER, live: the value). Seconds on
 * CLOCK_MONOTONIC. */
enum { TR_EVENT_SPAN = -1, TR_EVENT_COUNTER = -2 };
struct tr_exec_event {
    double began, seconds;
    double device_seconds;        /* a node on a device: its kernels' time on the device's clock; else 0 */
    const char *name;             /* a span's or counter's: a string that outlives the profile */
    int node;
    int64_t B, S, step;
    int64_t live;
    int lane;                     /* the thread it ran on: TR_LANE_TRAINER, or TR_LANE_COMMUNICATION
                                   * (gradient buckets summed while the backward runs) */
};
enum { TR_LANE_TRAINER, TR_LANE_COMMUNICATION };

struct tr_exec_profile {
    bool per_op;                  /* time every node into op_seconds; a device then waits for
                                   * each, where phases alone wait only where the phase changes */
    double op_seconds[TR_NOPS];   /* with per_op: seconds per op, added to */
    double *phase_seconds;        /* optional, 4 entries by enum tr_phase, added to */
    double node_started, phase_started;
    bool in_phase;
    bool recording;               /* keep every node's run in events (waiting for each, as per_op) */
    struct tr_exec_event *events;
    int64_t nevents, cap_events;
};

/* The hook that fills p, which must outlive the executor's runs. */
struct tr_exec_hook tr_exec_profiler(struct tr_exec_profile *p);
/* The per-op table: each op that took time, in ms per run (runs ≥ 1; `per` names a run:
 * "run", "step") and its share of the total. */
void tr_exec_profile_print(FILE *f, const struct tr_exec_profile *p, int64_t runs, const char *per);
/* A span the trainer timed, kept while recording (name: a string that outlives p; step: for
 * "ProfilerStep#", else 0). */
void tr_exec_profile_span(struct tr_exec_profile *p, const char *name, int64_t step, double began, double ended);
/* The same, of another thread's work (lane: TR_LANE_COMMUNICATION), added by the trainer's thread
 * once that work is done: the profile is the trainer's alone. */
void tr_exec_profile_span_on(struct tr_exec_profile *p, int lane, const char *name, int64_t step, double began,
                             double ended);
/* A counter's value at a time, kept while recording (name: as for a span). */
void tr_exec_profile_counter(struct tr_exec_profile *p, const char *name, double at, int64_t value);
/* The events kept so far are dropped (their memory is kept for the next); tr_exec_profile_free
 * releases it. */
void tr_exec_profile_clear(struct tr_exec_profile *p);
void tr_exec_profile_free(struct tr_exec_profile *p);

#endif
