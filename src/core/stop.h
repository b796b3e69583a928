/* Stopping cleanly on a signal (DESIGN.md §2, every stage): SIGINT, SIGTERM and SIGHUP only set
 * a flag, which each long phase reads between its units of work — the training loop between
 * steps, evaluation between batches, data preparation between files or chunks, a download, a
 * webhook or a prepare script while it waits — and ends with TR_EINTERRUPTED, so the run
 * checkpoints and records how it ended (exit 130). The flag is the program's one piece of
 * signal state; this module is its only owner. */
#ifndef TR_CORE_STOP_H
#define TR_CORE_STOP_H

#include <signal.h>

#include "core/error.h"

/* Records sig as the reason to stop, unless one was recorded already (the first signal is the
 * one reported): a signal handler's whole body (async-signal-safe). */
void tr_stop_request(int sig);

/* The signal that asked to stop (SIGINT, SIGTERM or SIGHUP), or 0: cheap enough for a loop. */
int tr_stop_requested(void);

/* A run's handlers, from its data's loading to its notification: clears the flag and makes
 * SIGINT, SIGTERM and SIGHUP call tr_stop_request (without SA_RESTART: a blocking read or wait
 * returns EINTR, and its caller looks at the flag); tr_stop_uninstall puts the old ones back.
 * A SIGHUP that was ignored stays ignored: `nohup trainrun …` asked for that. SIGINT and SIGTERM
 * are caught even when ignored (a shell ignores SIGINT for its background jobs; `kill -INT` is
 * still meant). */
void tr_stop_install(void);
void tr_stop_uninstall(void);

/* The same for the rest of the process, without clearing the flag: `trainrun RECIPE
 * --if-data-changed` from its refresh on. */
void tr_stop_catch_always(void);

/* The signals that stop a run, caught while one phase that polls tr_stop_requested() runs
 * outside a run (a download for `trainrun plan`). */
struct tr_stop_catch {
    struct sigaction old[3];   /* SIGINT, SIGTERM, SIGHUP as they were */
};
/* From now on SIGINT, SIGTERM and SIGHUP call tr_stop_request instead of ending the process;
 * one that was ignored stays ignored (the phase then ends as the process would have). */
void tr_stop_catch_begin(struct tr_stop_catch *c);
/* Puts the old handlers back. A stop that came meanwhile, for a signal whose old action was the
 * default (nobody else would have caught it: `trainrun plan`), is then delivered again, so the
 * process ends by that signal as it would have, only after the phase has cleaned up. */
void tr_stop_catch_end(struct tr_stop_catch *c);

/* "SIGINT", "SIGTERM", "SIGHUP" ("a signal" for any other). */
const char *tr_stop_signal_name(int sig);

/* When a stop was requested: TR_EINTERRUPTED with "stopped by SIGTERM during <what>" in d;
 * otherwise 0. `if ((rc = tr_stop_check(d, "the evaluation"))) break;` */
int tr_stop_check(struct tr_diag *d, const char *what);

#endif
