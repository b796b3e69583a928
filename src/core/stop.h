/* Stopping cleanly on a signal (DESIGN.md §2, every stage): SIGINT, SIGTERM and SIGHUP only set
 * a flag, which each long phase reads between its units of work — the training loop between
 * steps, evaluation between batches, data preparation between files or chunks — and ends
 * with TR_EINTERRUPTED, so the run checkpoints and records how it ended (exit 130). The flag
 * is the program's one piece of signal state; this module is its only owner. */
#ifndef TR_CORE_STOP_H
#define TR_CORE_STOP_H

#include "core/error.h"

/* Installs the handlers (without SA_RESTART: a blocking read or wait returns EINTR, and its
 * caller looks at the flag) and clears the flag; tr_stop_uninstall puts the old ones back.
 * A second signal is absorbed: the first one named is the one reported. */
void tr_stop_install(void);
void tr_stop_uninstall(void);

/* The signal that asked to stop (SIGINT, SIGTERM or SIGHUP), or 0: cheap enough for a loop. */
int tr_stop_requested(void);

/* "SIGINT", "SIGTERM", "SIGHUP" ("a signal" for any other). */
const char *tr_stop_signal_name(int sig);

/* When a stop was requested: TR_EINTERRUPTED with "stopped by SIGTERM during <what>" in d;
 * otherwise 0. `if ((rc = tr_stop_check(d, "the evaluation"))) break;` */
int tr_stop_check(struct tr_diag *d, const char *what);

#endif
