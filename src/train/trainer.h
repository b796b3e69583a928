/* The trainer (DESIGN.md §2): data → the model's training and evaluation programs → steps of
 * forward, backward and the optimizer, with evaluation, and the run folder (§6). One call
 * trains one recipe; `trainrun run` is a thin shell around it. */
#ifndef TR_TRAINER_H
#define TR_TRAINER_H

#include <stdio.h>

#include "recipe/recipe.h"

struct tr_train_options {
    const char *datasets_dir;   /* where datasets/<name>/dataset.yaml live */
    int quiet;                  /* no progress lines on stdout */
    const char *resume_dir;     /* continue this run folder from its newest good checkpoint */
    const char *plan_file;      /* --plan FILE: run this saved plan (refused when it no longer fits) */
};

struct tr_train_result {
    int64_t steps;
    double seconds, data_wait_seconds;
    double train_loss;          /* the last step's */
    double valid_loss, valid_accuracy, valid_top5;
    double test_loss, test_accuracy, test_top5;   /* top5: the true class among the 5 highest */
    char run_dir[4096];
};

/* Trains; returns an exit status (cli/exit.h): 0, TR_EXIT_DATA, TR_EXIT_DIVERGED,
 * TR_EXIT_INTERRUPTED (SIGINT or SIGTERM: the step in progress finishes and is checkpointed),
 * TR_EXIT_FAILURE…, with the reason in diag. A resumed run ends with the same weights, bit for
 * bit, as one never interrupted (on the same machine and thread count). */
int tr_train(const struct tr_recipe *r, const struct tr_train_options *opt, struct tr_train_result *res,
             struct tr_diag *diag);

#endif
