/* The finish stage (DESIGN.md §2, §6): after the loop and the test evaluation, before the run
 * folder's record and reports close. The last line, plan.json's measurements against its
 * predictions, and for nightly runs the promotion gate and retention (report.promote.*,
 * report.keep). */
#ifndef TR_FINISH_H
#define TR_FINISH_H

#include "train/loop.h"
#include "train/run_folder.h"
#include "train/session.h"

/* rc 0: "done: …", TR_ETIMEUP "stopped by budget.time: …", with the test split's numbers in
 * the log and metrics.jsonl (NAN each when there is none); otherwise the failure's sentences
 * in the log. Stopped by a signal or the clock, a line says how to continue. */
void tr_finish_say_done(struct tr_run_folder *f, const struct tr_data *data, struct tr_train_result *res, int rc,
                        const struct tr_diag *d);
/* plan.json once more, with what the allocator and the OS measured and the median step time
 * (res), a warning for each prediction missed (regions off by more than 1 %, a footprint above
 * its prediction); the step time predicted and measured into run.json too; nothing when no region was ever allocated. 0 or TR_EIO. */
int tr_finish_measured_plan(struct tr_run_folder *f, const struct tr_session *s, const struct tr_recipe *r,
                            const struct tr_data *data, const struct tr_train_result *res, struct tr_diag *d);
/* report.promote: the finished run against the promoted one (no metric named: no gate). 0,
 * TR_EREGRESSION (worse: the promoted run stays) or TR_EIO. */
int tr_finish_promote(struct tr_run_folder *f, const struct tr_recipe *r, struct tr_diag *d);
/* report.keep: the oldest run folders beyond it go; never this one, `latest`'s or `promoted`'s. */
void tr_finish_retain(struct tr_run_folder *f, const struct tr_recipe *r);

#endif
