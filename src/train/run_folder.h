/* The run folder (DESIGN.md §6), the one module that writes its files: recipe.yaml, the data's
 * files (data-sources.json, labels.txt, tokenizer/), plan.json, run.json, log.txt,
 * metrics.jsonl and the TensorBoard event file. Opened after the weights, before the loop;
 * closed at the run's end with its record and reports. Files written whole go through the
 * atomic writer; the appended ones are flushed a line at a time and fsynced at each
 * checkpoint (tr_run_folder_sync), the one durability policy for them. */
#ifndef TR_RUN_FOLDER_H
#define TR_RUN_FOLDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"
#include "data/dataset.h"
#include "recipe/recipe.h"
#include "report/events.h"
#include "train/session.h"

struct tr_run_folder {
    struct tr_path dir;
    FILE *log, *metrics;       /* log.txt, metrics.jsonl; NULL until opened */
    struct tr_events events;   /* report.tensorboard; fd −1 when off */
    json_t *record;            /* run.json, once begun */
    bool resumed;              /* an existing folder, opened to go on: until this part's record
                                * begins (a resume refused before it), only log.txt is written */
    bool quiet;                /* lines for people go to log.txt only */
    bool silent;               /* another rank's view of rank 0's folder (tr_run_folder_follow):
                                * its dir, nothing opened, written or said */
    bool tty;                  /* stdout is a terminal: a progress bar, redrawn in place */
};

/* Nothing open yet: what tr_run_folder_end and _close accept before tr_run_folder_open. */
void tr_run_folder_init(struct tr_run_folder *f, bool quiet);
/* A fresh run: report.dir/NAME/<UTC stamp>[-N] with checkpoints/, recipe.yaml, a new log.txt and
 * metrics.jsonl, and NAME/latest pointed at it. With resume_dir: that folder, its log and
 * metrics appended to. 0 or TR_EIO / TR_EINVAL. */
int tr_run_folder_open(struct tr_run_folder *f, const struct tr_recipe *r, const char *resume_dir,
                       struct tr_diag *d);
/* Ranks other than 0 (dist/comm.h): the folder rank 0 opened, at dir, known but never written;
 * what the steps say and log goes nowhere (rank 0 says it), traces excepted (one per rank). */
int tr_run_folder_follow(struct tr_run_folder *f, const char *dir, struct tr_diag *d);
/* What `trainrun sample` and later inference need besides the recipe and the weights: the
 * data's sources (for --if-data-changed), the tokenizer's files in tokenizer/ (vocab.txt,
 * encoder.json + vocab.bpe, or chars.txt) and the class names, one a line, in labels.txt. */
int tr_run_folder_keep_data(struct tr_run_folder *f, const struct tr_data *data, struct tr_diag *d);

/* A line for people: on stdout unless quiet, and always in log.txt. */
void tr_run_folder_say(struct tr_run_folder *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line of metrics.jsonl, {"step": n, "tag": value, …} (taken), and with events the same
 * values as TensorBoard scalars under the same tags. */
void tr_run_folder_metric(struct tr_run_folder *f, json_t *line, bool events);
/* The failure's sentences in log.txt, "error: …" each. */
void tr_run_folder_log_errors(struct tr_run_folder *f, const struct tr_diag *d);

/* plan.json's contents: the plan as `trainrun plan --json` prints it, the training data's shape,
 * the memory timeline of one step and the recipe's values; the caller may add measurements
 * before writing it. */
json_t *tr_run_folder_plan_json(const struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data);
/* A resume's first check: run_dir/plan.json keeps the recipe's values the run began with
 * ("recipe"); the recipe now in run_dir/recipe.yaml (r) must have the same. 0 (also when there
 * is no plan.json yet, or one without "recipe"), or TR_EINVAL naming each key that differs
 * with both values. */
int tr_run_folder_check_recipe(const char *run_dir, const struct tr_recipe *r, struct tr_diag *d);
/* Writes plan (taken) with its "warnings" (taken: each said and sent to TensorBoard at step). */
int tr_run_folder_write_plan(struct tr_run_folder *f, json_t *plan, json_t *warnings, int64_t step,
                             struct tr_diag *d);
/* The program b drawn (report/graph_dot.h) as graph.dot and, through Graphviz, graph.svg, which
 * report.html shows: one block in full, the others as a box each. For people, so a failure (no
 * dot on PATH) is a warning in the log, and the run goes on. */
void tr_run_folder_draw(struct tr_run_folder *f, const struct tr_built *b, const char *name);
/* report.tensorboard: a new event file. A fresh run (start 0) opens with the recipe, the plan
 * (plan_markdown), its HParams session and the graph g; a resumed one with SessionLog START at
 * the first step it logs again, so TensorBoard drops what the interrupted session logged after
 * its last checkpoint and the curves continue as one. */
int tr_run_folder_open_events(struct tr_run_folder *f, const struct tr_recipe *r, int64_t start,
                              const char *plan_markdown, const struct tr_graph *g, const struct tr_knobs *k,
                              struct tr_diag *d);
/* run.json opened: when and where the run (or this part of a resumed one) started, and the warm
 * start it began from (taken; NULL: none). */
int tr_run_folder_begin_record(struct tr_run_folder *f, const struct tr_recipe *r, int64_t start, json_t *warm_start,
                               struct tr_diag *d);
/* Sets run.json's key to value (taken) at once; a failure is a warning in the log. */
void tr_run_folder_note(struct tr_run_folder *f, const char *key, json_t *value);
/* The appended files made durable: log.txt, metrics.jsonl and the event file flushed and fsynced
 * (at each checkpoint: what it restores is never ahead of what they say). */
int tr_run_folder_sync(struct tr_run_folder *f, struct tr_diag *d);

/* How the run ended, for its record and reports. */
struct tr_run_end {
    int err;                   /* 0 or the failure's enum tr_err */
    int exit_status;           /* the process's exit status for it (cli/exit.c), as run.json records it */
    double seconds;            /* the whole run */
    int64_t steps;
    json_t *leak;              /* the leak check's verdict (taken), or NULL */
    int signal;                /* interrupted: the signal that stopped it (core/stop.h), else 0 */
    const char *name;          /* the recipe's, labelling the Prometheus textfile's metrics */
    const char *prometheus;    /* that textfile (report.prometheus), or NULL: trainrun.prom beside the
                                * recipe's run folders */
};
/* run.json closed, the run's report rendered, the Prometheus textfile and the index of all runs
 * in report_dir written (a failure is a warning: the report is for people), and the TensorBoard session ended
 * (unless interrupted: the session goes on when resumed) and closed. */
void tr_run_folder_end(struct tr_run_folder *f, const char *report_dir, const struct tr_run_end *end);
/* A signal cut the run's notification after its end was recorded: run.json says so
 * (tr_run_record_cut); 0 when no record was begun. */
int tr_run_folder_notification_cut(struct tr_run_folder *f, int exit_status, int signal, struct tr_diag *d);
void tr_run_folder_close(struct tr_run_folder *f);

#endif
