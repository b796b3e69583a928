/* The profiler (profile.c): an executor hook (exec.h) that adds the time of each node to its
 * op's and its phase's totals — the trainer's time/forward, time/backward… and, with
 * TR_PROFILE set, the per-op table that bench/ and trainrun print at the end. */
#ifndef TR_BACKEND_PROFILE_H
#define TR_BACKEND_PROFILE_H

#include <stdio.h>

#include "backend/exec.h"

struct tr_exec_profile {
    bool per_op;                  /* time every node into op_seconds; a device then waits for
                                   * each, where phases alone wait only where the phase changes */
    double op_seconds[TR_NOPS];   /* with per_op: seconds per op, added to */
    double *phase_seconds;        /* optional, 4 entries by enum tr_phase, added to */
    double node_started, phase_started;
    bool in_phase;
};

/* The hook that fills p, which must outlive the executor's runs. */
struct tr_exec_hook tr_exec_profiler(struct tr_exec_profile *p);
/* The per-op table: each op that took time, in ms per run (runs ≥ 1; `per` names a run:
 * "run", "step") and its share of the total. */
void tr_exec_profile_print(FILE *f, const struct tr_exec_profile *p, int64_t runs, const char *per);

#endif
