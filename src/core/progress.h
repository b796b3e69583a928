/* Progress of a long phase — evaluation, data preparation, tokenising — for whoever waits on
 * it: on a terminal (stderr a tty) one line redrawn in place at most ten times a second;
 * otherwise (cron, a pipe, a log file) a plain line every TR_PROGRESS_LINE_SECONDS; nothing
 * with --quiet, and nothing for a phase over before its first line is due. Any stage may call
 * it: begin, then update as often as is cheap (it reads the clock and returns), then end. */
#ifndef TR_CORE_PROGRESS_H
#define TR_CORE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define TR_PROGRESS_LINE_SECONDS 10.0   /* plain lines: one each this often */
#define TR_PROGRESS_DRAW_SECONDS 0.1    /* a terminal's line: redrawn at most this often */
#define TR_PROGRESS_FIRST_SECONDS 0.5   /* a terminal's line: not for a phase shorter than this */

enum tr_progress_mode { TR_PROGRESS_OFF, TR_PROGRESS_LINES, TR_PROGRESS_TERMINAL };

struct tr_progress {
    char what[128];            /* "evaluation (test split)" */
    const char *unit;          /* "samples", "bytes", "files" */
    int64_t done, total;       /* total 0: not known */
    enum tr_progress_mode mode;
    FILE *out;                 /* stderr */
    double began, shown;       /* monotonic seconds: the phase's start, the last line shown */
    bool drawn;                /* a terminal line is on screen: cleared at the end */
    bool said;                 /* a plain line was written: the end gets one too */
};

/* --quiet: no progress anywhere in the process (like a log level, set once by src/cli/). */
void tr_progress_quiet(bool quiet);

/* A phase named what, of total units (0: unknown). Its mode and stream come from the process:
 * off when quiet, a terminal line when stderr is a tty, plain lines otherwise. */
void tr_progress_begin(struct tr_progress *p, const char *what, int64_t total, const char *unit);
/* done units so far: shown when a line is due. */
void tr_progress_update(struct tr_progress *p, int64_t done);
/* The terminal line cleared, or after plain lines the total one ("…: 2000 samples in 31 s"). */
void tr_progress_end(struct tr_progress *p);

#endif
