/* The evaluation stage (DESIGN.md §2): a split through the session's evaluation program, in
 * batches, into its mean loss, accuracy and top-5 accuracy. The loop calls it on the
 * validation split, the run's end on the test split. */
#ifndef TR_EVALUATE_H
#define TR_EVALUATE_H

#include "train/session.h"

struct tr_eval {
    double loss, accuracy;
    double top5;               /* the true class among the 5 highest */
};

/* Over the first eval_samples rows of split (0: all of them); for language models per token,
 * over every next-token target. NAN each when nothing was counted. Its progress is shown as
 * what ("the evaluation of the test split"); when interruptible, a stop signal is looked for
 * between batches (not across ranks: they stop together, after a step). 0, TR_EINTERRUPTED (a
 * signal: the rest not evaluated) or TR_EFAIL when the device failed. */
int tr_evaluate(struct tr_session *s, const struct tr_data *data, const struct tr_split *split, const char *what,
                bool interruptible, int64_t eval_samples, struct tr_eval *out, struct tr_diag *d);

/* Adds up where each row's true class ranks among its logits: top-1 and top-5 hits; rows whose
 * truth is negative (no target) are skipped. Returns the rows counted. */
int64_t tr_rank_truth(const float *logits, const int32_t *truth, int64_t rows, int64_t classes, int64_t *correct,
                      int64_t *in_top5);

#endif
