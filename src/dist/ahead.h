/* Work a thread of its own does ahead of the trainer (ZeRO 3's copies gathered a block ahead,
 * train/optim.c): jobs queued in order, run one after the other, each waited for by its place
 * in the queue. Where the trainer waits, the watchdog times the wait as a collective. */
#ifndef TR_DIST_AHEAD_H
#define TR_DIST_AHEAD_H

#include "core/error.h"
#include "dist/comm.h"

/* What the thread runs for job `job` (the queuer's number) with arg: 0, or a code with its
 * sentence in d. */
typedef int (*tr_ahead_fn)(void *ctx, int job, void *arg, struct tr_diag *d);

struct tr_ahead;

/* The thread, running run(ctx, …) for each job; its waits timed by c's watchdog as `what`. NULL
 * where the thread cannot be made (the caller then runs the jobs itself). */
struct tr_ahead *tr_ahead_start(tr_ahead_fn run, void *ctx, const struct tr_comm *c, const char *what);
/* Queues a job at place `at`: 0 begins another round (after every job queued before has run),
 * and each next place is one more. */
void tr_ahead_queue(struct tr_ahead *a, int at, int job, void *arg);
/* Until the jobs at places up to `at` have run (at beyond the last queued: all of them). 0, or
 * the first failed job's code with its sentence in d (the jobs after it are not run). */
int tr_ahead_wait(struct tr_ahead *a, int at, struct tr_diag *d);
/* The seconds the thread spent running jobs, so far. */
double tr_ahead_seconds(struct tr_ahead *a);
void tr_ahead_stop(struct tr_ahead *a);

#endif
