/* A run compared with another (reporter, DESIGN.md §2): two parsed report.json objects in,
 * one "comparison" object out (trainrun-report(5)): the key metric, duration, throughput and
 * memory side by side, what the planner chose differently and why, and the regressions past
 * the recipe's report.regression limits. Also written as a Markdown or HTML section. */
#ifndef TR_COMPARE_H
#define TR_COMPARE_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

/* Relative thresholds, as fractions of the previous run's value (0.02: 2 %): a quantity that
 * moved in its worse direction by more than its limit is a regression. */
struct tr_regression_limits {
    double metric;   /* the key metric */
    double time;     /* the duration and the throughput */
    double memory;   /* the measured footprint and regions' peak */
};

/* The recipe's defaults: report.regression.metric, .time, .memory. */
#define TR_REGRESSION_DEFAULTS ((struct tr_regression_limits){.metric = 0.02, .time = 0.10, .memory = 0.05})

/* current judged against previous with lim; either may lack any field (schema_version 1, a
 * run killed early). Returns a new object (never NULL unless out of memory). */
json_t *tr_report_compare(const json_t *previous, const json_t *current, const struct tr_regression_limits *lim);

/* The previous run of the recipe run_dir belongs to: of the sibling folders whose names sort
 * before run_dir's own (stamps sort by time), the last one holding a report.json, whatever its
 * status. Symbolic links (latest) are skipped; run_dir may be one. Writes its path to out;
 * returns 1, or 0 when there is none (or its path would not fit). */
int tr_report_find_previous(const char *run_dir, struct tr_path *out);

/* The limits a run was made with: report.regression in its folder's resolved recipe.yaml, the
 * defaults for any key not there (an older run, no recipe.yaml). */
void tr_regression_limits_read(const char *run_dir, struct tr_regression_limits *lim);

/* run_dir's report.json, with "run" set to the folder's name when the file lacks it
 * (schema_version 1); NULL when there is none or it does not parse. */
json_t *tr_report_json_load(const char *run_dir);

/* The "## Compared with RUN" section: the regressions first, a table of quantity, previous,
 * this run and change, then the plan's changes and why. */
void tr_compare_write_md(FILE *out, const json_t *cmp);
/* The same section as HTML (an <h2> and what follows it), its text escaped. */
void tr_compare_write_html(FILE *out, const json_t *cmp);

/* Two runs side by side (`trainrun report --compare A B`): the run, status, duration, key
 * metric, the final metrics both have, throughput, the plan's knobs and memory, each with A's
 * value, B's and the change; then cmp (B judged against A): the regressions, the plan's changes
 * and why. The HTML page is self-contained and adds the loss curves of both runs overlaid. */
void tr_compare_runs_md(FILE *out, const json_t *a, const json_t *b, const json_t *cmp);
void tr_compare_runs_html(FILE *out, const json_t *a, const json_t *b, const json_t *cmp);

/* The style sheet of the pages written here and in index.c: tables that fit a phone. */
extern const char tr_compare_css[];

/* Words for people, shared by the comparison, the runs index and `trainrun report`. */
/* "42.0 s", "22.8 min", "1.5 h"; "unknown" for a non-finite value. */
void tr_format_elapsed(double seconds, char out[48]);
/* A whole number with thousands separators: "12,000". */
void tr_format_count(double value, char out[48]);
/* A signed relative change as a percentage with a true minus sign: "−3.3 %", "+12.0 %". */
void tr_format_percent(double relative, char out[48]);

/* A plan in short: "bf16, checkpointing selective 4 of 4, 32 × 1" (micro-batch ×
 * accumulation, or dynamic batching's rows × tokens); "" for a plan that is not an object. */
void tr_plan_words(const json_t *plan, char *out, size_t outsize);

/* "+0.0012 (+0.2 %)": after − before and the change relative to before; "same"; "" when
 * either is unknown. */
void tr_format_change(double before, double after, char out[160]);

/* A report file written whole or not at all, through the one atomic writer (core/atomic.h):
 * tr_report_file_open opens the temporary beside dir/name into a; tr_report_file_commit
 * renames it over dir/name, durably, when filling it went well (filled == 0 and no write
 * error), else removes it. They return NULL / TR_EIO with the sentence in d. */
struct tr_atomic;
FILE *tr_report_file_open(struct tr_atomic *a, const char *dir, const char *name, struct tr_diag *d);
int tr_report_file_commit(struct tr_atomic *a, int filled, struct tr_diag *d);

/* Writes "| text " as a Markdown table cell: a '|' would end it and a newline the row. */
void tr_md_cell(FILE *out, const char *text);

/* The names of dir's subfolders (no symbolic links, no dot-names), sorted as versions
 * (strverscmp: run -10 after -9), as a NULL-terminated array to free with tr_names_free; NULL
 * when dir cannot be read. */
char **tr_subfolders(const char *dir, int *n);
void tr_names_free(char **names);

#endif
