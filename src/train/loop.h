/* The training-loop stage (DESIGN.md §2–§3): steps of forward, backward and the update on the
 * session, each logged, evaluated, checkpointed and stopped early as the recipe says, into the
 * run folder. After the run folder opens, before the test evaluation and the run's end. Its
 * state between steps — early stopping, the timer, the leak check, the progress bar — is
 * struct tr_loop. A stop signal (core/stop.h: SIGINT, SIGTERM, SIGHUP) ends it after the step
 * or evaluation batch in progress, checkpointed; budget.time after the step in progress,
 * checkpointed and evaluated. */
#ifndef TR_LOOP_H
#define TR_LOOP_H

#include "backend/profile.h"
#include "core/clock.h"
#include "report/monitor.h"
#include "report/trace.h"
#include "train/evaluate.h"
#include "train/ranks.h"
#include "train/record.h"
#include "train/run_folder.h"
#include "train/session.h"
#include "train/whole.h"

struct tr_loop {
    int64_t total_steps;
    struct { double best; int64_t best_step, bad; int stopped; } early;   /* train.early_stop */
    double bar_drawn;          /* when the progress bar was last drawn */
    struct tr_timer timer;     /* where the time went since the last logged line */
    struct tr_exec_profile profile;   /* the training executor's hook: timer.phase, and with
                                       * TR_PROFILE set the per-op table printed at the end */
    int64_t timer_step;        /* the last step whose line carried the time */
    struct tr_leak leak;       /* memory at each step's start, after warm-up */
    double deadline;           /* budget.time: when it is up (tr_now's clock), 0 for none */
    int64_t checkpointed;      /* the step of the checkpoint written or resumed from last; -1 none */
    bool eval_pending;         /* the validation after the checkpoint's step is still to do */
    struct tr_step_times step_times;   /* each step's batch and training, for the measured step time */
    struct {                   /* the recipe's profile: section (report/trace.h) */
        struct tr_trace_schedule schedule;
        struct tr_trace_info info;
        int64_t first;         /* the first step of the cycle being kept */
        json_t *written;       /* run.json's "traces": each file, its steps and its ops */
    } trace;
    struct tr_monitor *monitor;   /* report.monitor_every's sampler, NULL when off */
    const struct tr_comm *comm;   /* the ranks (dist/comm.h): world 1 alone */
    struct tr_grad_reducer reducer;   /* their gradients summed after each backward (train/ranks.h) */
    struct tr_ranks_step agreed;  /* the last step's sums: its loss, and whether any rank would stop */
    struct tr_checkpoint resumed; /* pipelined: rank 0's checkpoint resumed from, open until the stages
                                   * take their tensors (tr_loop_share_resume) */
};

/* What the run did, for the caller's result line. */
struct tr_train_result {
    int64_t steps;
    double seconds, data_wait_seconds;   /* the loop's */
    double train_loss;                   /* the last step's */
    double step_seconds;                 /* the median step (record.h: tr_step_times), NAN: none */
    int64_t timed_steps;                 /* the steps that median is of */
    struct tr_eval valid, test;
    const char *run_dir;                 /* the run folder, once its first files are written */
};


/* The steps the recipe asks for (train.steps, else train.epochs over the training split), and
 * budget.time's deadline counted from started (tr_now: when this process's run began); comm:
 * the ranks that train together (each step's batch is theirs together). */
void tr_loop_init(struct tr_loop *l, const struct tr_recipe *r, const struct tr_data *data, double started,
                  const struct tr_comm *comm);
/* A resumed run: the newest checkpoint that verifies into the session, and the loop where that
 * step left it; *start gets its step. 0 or TR_EFAIL. */
/* Across ranks, after rank 0's tr_loop_resume: what it restored — the step, the parameters and
 * optimizer state, fp16's scale, early stopping's state — given to the other ranks, which read
 * no run folder. Every rank calls it; alone it is nothing. */
int tr_loop_share_resume(struct tr_loop *l, struct tr_session *s, int64_t *start, struct tr_diag *d);
int tr_loop_resume(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, int64_t *start,
                   struct tr_diag *d);
/* The run's first lines in the log: what trains on what, how, where. */
void tr_loop_say_start(const struct tr_loop *l, const struct tr_session *s, struct tr_run_folder *f,
                       const struct tr_recipe *r, const struct tr_data *data, const char *init_summary);
/* Steps start+1 … total_steps (fewer when stopped early). 0; TR_EDATA (the loader),
 * TR_EDIVERGED, TR_EINTERRUPTED (a signal: checkpointed, unless it came before the first
 * step), TR_ETIMEUP (budget.time: checkpointed, and the validation split evaluated),
 * TR_EFAIL. */
int tr_loop_run(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, const struct tr_recipe *r,
                const struct tr_data *data, int64_t start, struct tr_train_result *res, struct tr_diag *d);
/* A checkpoint of step, with the loop's state, after the run folder's appended files are
 * synced (what it says happened is on disk first). */
int tr_loop_checkpoint(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, const struct tr_recipe *r,
                       int64_t step, struct tr_diag *d);
/* The run's last checkpoint, of step: nothing when that one is written already (by budget.time,
 * or the checkpoint a resume with nothing left to train began from). */
int tr_loop_last_checkpoint(struct tr_loop *l, struct tr_session *s, struct tr_run_folder *f, const struct tr_recipe *r,
                            int64_t step, struct tr_diag *d);
/* The evaluation of a split, its time counted as evaluation's. */
int tr_loop_evaluate(struct tr_loop *l, struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data,
                     const struct tr_split *split, struct tr_eval *out, struct tr_diag *d);
/* After the loop: the time not yet logged, and the leak check's verdict said; returns the
 * verdict for run.json, or NULL when the run folder has no record. */
json_t *tr_loop_end(struct tr_loop *l, struct tr_run_folder *f, int64_t steps);

#endif
