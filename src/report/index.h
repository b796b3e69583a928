/* The runs index (reporter, DESIGN.md §2): every run of every recipe under report.dir on one
 * page, RUNS/index.md and RUNS/index.html, built from the runs' report.json files alone, so
 * a person sees in a minute which recipe's newest run broke and how its key metric trends.
 * `trainrun report RUNS_DIR` writes it (trainrun-report(5)). */
#ifndef TR_INDEX_H
#define TR_INDEX_H

#include <stddef.h>

#include "core/error.h"

/* What a folder holds, as `trainrun report` tells them apart. */
enum tr_folder_kind {
    TR_FOLDER_OTHER,    /* none of these */
    TR_FOLDER_RUN,      /* a run: metrics.jsonl, plan.json or report.json in it */
    TR_FOLDER_RECIPE,   /* a recipe's runs, RUNS/NAME: a subfolder is a run */
    TR_FOLDER_RUNS,     /* report.dir, RUNS: a subfolder holds a run */
};

enum tr_folder_kind tr_folder_kind(const char *dir);

/* Writes runs_dir/index.md and runs_dir/index.html (each to a temporary file renamed over the
 * old one): a summary with each recipe's newest run, not-finished ones first; then per recipe
 * its runs, newest first, and its key metric's trend. A run folder without report.json is
 * listed as "no report". Nothing time-dependent goes in: the same folders give the same
 * bytes. Returns 0, or TR_EIO with a sentence in d. */
int tr_runs_index_write(const char *runs_dir, struct tr_diag *d);

#endif
