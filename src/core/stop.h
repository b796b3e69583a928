/* Stopping cleanly on a signal (DESIGN.md §2, every stage): SIGINT, SIGTERM and SIGHUP only set
 * a flag, which each long phase reads between its units of work — the training loop between
 * steps, evaluation between batches, data preparation between files or chunks, a download, a
 * webhook or a prepare script while it waits — and ends with TR_EINTERRUPTED, so the run
 * checkpoints and records how it ended (exit 130). The flag is the program's one piece of
 * signal state; this module is its only owner. */
#ifndef TR_CORE_STOP_H
#define TR_CORE_STOP_H

#include <signal.h>
#include <stdbool.h>

#include "core/error.h"

/* No thread of trainrun ever runs a signal handler for these: the kernel runs one on whichever
 * thread it picks, writing its frame below that thread's stack pointer, and oneDNN's f32 GEMM
 * kernels (gemm:jit) keep live state there — a signal during one corrupted the heap (SIGUSR1
 * 200 times a second on bert-small: 5 runs of 8 aborted; with an alternate signal stack, or
 * with OpenBLAS's GEMMs, none of 8; a single SIGTERM cut 1 run in 8). tr_stop_init, the first
 * thing main does while it is the only thread, blocks SIGINT, SIGTERM and SIGHUP (every thread
 * made later — OpenMP's, MPI's, the loader's — inherits that) and starts one thread that takes
 * them with sigwaitinfo and acts for the process, as the actions below say: stop (set the
 * flag), ignore, or end the process by the signal, as its default action does. A long wait
 * looks at the flag at least every TR_STOP_SLICE seconds (tr_stop_sleep): no signal cuts a
 * blocking call short. A process that did not call it (a unit test) starts it at its first
 * install or catch; a child a fork made (the check framework's) starts its own. */
void tr_stop_init(void);

/* 1 when this process runs the stop thread, else 0: a count of the process's threads that asks
 * whether others have started (OpenMP's team: plan/ceiling.c) leaves it out. It never allocates,
 * so it has no malloc arena of its own; its stack is 256 KiB. */
int tr_stop_threads(void);

/* Records sig as the reason to stop, unless one was recorded already (the first signal is the
 * one reported). */
void tr_stop_request(int sig);

/* The signal that asked to stop (SIGINT, SIGTERM or SIGHUP), or 0: cheap enough for a loop. */
int tr_stop_requested(void);

/* How many stop signals this process took so far, whatever it did with them: a test that sent
 * one waits for this to grow. */
unsigned tr_stop_taken(void);

/* A run's actions, from its data's loading to its notification: clears the flag and makes
 * SIGINT, SIGTERM and SIGHUP stop; tr_stop_uninstall puts the old actions back. A SIGHUP that
 * was ignored stays ignored: `nohup trainrun …` asked for that. SIGINT and SIGTERM stop even
 * when ignored (a shell ignores SIGINT for its background jobs; `kill -INT` is still meant). */
void tr_stop_install(void);
void tr_stop_uninstall(void);

/* The same for the rest of the process, without clearing the flag: `trainrun RECIPE
 * --if-data-changed` from its refresh on. */
void tr_stop_catch_always(void);

/* The signals that stop a run, caught while one phase that polls tr_stop_requested() runs
 * outside a run (a download for `trainrun plan`). */
struct tr_stop_catch {
    int old[3];   /* SIGINT's, SIGTERM's and SIGHUP's actions as they were (stop.c) */
};
/* From now on SIGINT, SIGTERM and SIGHUP stop instead of ending the process; one that was
 * ignored stays ignored (the phase then ends as the process would have). */
void tr_stop_catch_begin(struct tr_stop_catch *c);
/* Puts the old actions back. A stop that came meanwhile, for a signal whose old action was to
 * end the process (nobody else would have caught it: `trainrun plan`), ends it now by that
 * signal, as it would have, only after the phase has cleaned up. */
void tr_stop_catch_end(struct tr_stop_catch *c);

/* A long wait's slice: how late a stop may be seen by a loop that sleeps (seconds). */
#define TR_STOP_SLICE 0.05

/* Sleeps `seconds`, in slices, unless a stop is asked for; true when one cut the sleep short. */
bool tr_stop_sleep(double seconds);

/* "SIGINT", "SIGTERM", "SIGHUP" ("a signal" for any other). */
const char *tr_stop_signal_name(int sig);

/* When a stop was requested: TR_EINTERRUPTED with "stopped by SIGTERM during <what>" in d;
 * otherwise 0. `if ((rc = tr_stop_check(d, "the evaluation"))) break;` */
int tr_stop_check(struct tr_diag *d, const char *what);

#endif
