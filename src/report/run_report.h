/* The run report (DESIGN.md §2, reporter): a run folder's recipe.yaml, metrics.jsonl,
 * plan.json and run.json read into one struct, then written as report.json (schema:
 * trainrun-report(5)), report.md and report.html, compared with the previous run of the same
 * recipe when there is one. The trainer writes it at the end of every run; `trainrun report
 * RUN_DIR` writes it again from the files alone. */
#ifndef TR_RUN_REPORT_H
#define TR_RUN_REPORT_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"

/* How the run ended, as the trainer knows it. */
struct tr_run_outcome {
    int exit_code;     /* core/exit.h */
    double seconds;    /* wall-clock, the whole run */
};

/* One metric over the steps it was logged at, in file order. */
struct tr_series {
    char *name;        /* "train/loss", "eval/accuracy", … */
    double *step, *value;
    int n, cap;
};

/* One row of the checklist: what the planner or recipe turned on, and why. */
struct tr_check_row {
    char item[40], setting[160], detail[400];
};

/* Where the time went, summed over metrics.jsonl's "time/…" lines (seconds; NAN: not logged). */
enum { TR_REPORT_TIMES = 9 };   /* wall, then data … checkpointing, then other = wall − the rest */
extern const char *const tr_report_time_names[TR_REPORT_TIMES];

#define TR_REPORT_PROFILE_OPS 10   /* the ops the report's profile lists */
#define TR_REPORT_GRAPH_INLINE 500000   /* report.html holds graph.svg up to this many bytes; links it above */

struct tr_run_report {
    struct tr_path dir;
    char run[256];               /* the folder's own name: its start, 20261129-183205 */
    char started[32];            /* run.json's start, ISO 8601 UTC; "" when not known */
    char name[128], arch[64], dataset[128], amp[16], checkpointing[16], pin_memory[8];   /* recipe.yaml's */
    char classes[160];           /* labels.txt's class names, "a, b, c" (cut with "…"); "" when none */
    int nclasses;
    long long workers, prefetch, batch_size;
    char status[16];             /* finished, failed, interrupted, time-limit, unknown */
    int exit_code;               /* −1: unknown */
    double seconds;              /* NAN: unknown */
    long long last_step;
    struct tr_series *series;
    int nseries;
    json_t *plan;                /* plan.json, or NULL */
    json_t *record;              /* run.json (started, environment, segments, leak), or NULL */
    double time[TR_REPORT_TIMES];
    struct tr_check_row rows[12];
    int nrows;
    json_t *warnings;            /* [{"kind", "message"}] */
    long long graph_bytes;       /* graph.svg's size (the program drawn); −1 when the folder has none */
};

/* Reads the run folder dir; outcome NULL: the status, exit code and duration come from an
 * existing report.json, else are inferred (a test line in metrics.jsonl: finished). Returns 0,
 * or TR_EINVAL / TR_ENOMEM with a sentence in d (dir is not a run folder, a file does not parse). */
int tr_run_report_load(const char *dir, const struct tr_run_outcome *outcome, struct tr_run_report *rep,
                       struct tr_diag *d);
/* Writes report.json, report.md and report.html into rep->dir, each to a temporary file
 * renamed over the old one. Returns 0, or TR_EIO with a sentence in d. */
int tr_run_report_write(const struct tr_run_report *rep, struct tr_diag *d);
void tr_run_report_free(struct tr_run_report *rep);

/* report.json's object for rep (trainrun-report(5)), without the comparison. */
json_t *tr_run_report_json(const struct tr_run_report *rep);

/* report.json's word for a run that exited with exit_code: finished (0), regression (6: finished,
 * but worse than the promoted run), interrupted (130), time-limit (8: stopped by budget.time) or
 * failed. */
const char *tr_run_status_word(int exit_code);

/* The series named name, or NULL. */
const struct tr_series *tr_run_report_series(const struct tr_run_report *rep, const char *name);

/* load + write + free: what the trainer and `trainrun report` call. */
int tr_run_report_render(const char *dir, const struct tr_run_outcome *outcome, struct tr_diag *d);

#endif
