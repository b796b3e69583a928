/* A stop asked for by a signal (core: every stage's long waits look at it): SIGINT, SIGTERM
 * and SIGHUP record their number here, and a download, a webhook, a prepare script or the
 * training loop ends early, cleanly, when it is set; the run then ends with exit status 130.
 * The one piece of mutable global state a signal needs (STYLE.md). */
#ifndef TR_CORE_STOP_H
#define TR_CORE_STOP_H

#include <signal.h>

/* Records sig as the reason to stop: a signal handler's whole body (async-signal-safe). */
void tr_stop_request(int sig);
/* The signal that asked for a stop, or 0 when none has. */
int tr_stop_requested(void);

/* For the rest of the process (a run, from its data stage to its webhook), SIGINT, SIGTERM and
 * SIGHUP call tr_stop_request: the run ends the documented way (exit 130), never by the signal.
 * A SIGHUP that was ignored stays ignored: `nohup trainrun …` asked for that. SIGINT and
 * SIGTERM are caught even when ignored (a shell ignores SIGINT for its background jobs; `kill
 * -INT` is still meant), as the training loop always has. */
void tr_stop_catch_always(void);

/* The signals that stop a run, caught while a phase that polls tr_stop_requested() runs. */
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

#endif
