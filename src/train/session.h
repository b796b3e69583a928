/* The plan and program-build stages (DESIGN.md §2): the loaded data and the recipe in, the
 * session out — the device and its kernels, the plan chosen for the budget, the training and
 * evaluation programs it builds, one set of regions for both and the optimizer's state. After
 * the data, before the weights and the run folder; the loop and evaluation run on it. */
#ifndef TR_SESSION_H
#define TR_SESSION_H

#include <stdint.h>

#include "backend/exec.h"
#include "core/alloc.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "dist/comm.h"
#include "plan/plan.h"
#include "recipe/recipe.h"
#include "train/optim.h"
#include "train/ranks.h"
#include "train/scaler.h"
#include "train/step.h"

struct tr_side {               /* one of the two programs: training or evaluation */
    struct tr_built b;         /* its graph, model and program (plan/build.c) */
    struct tr_exec x;
    int loss_scale;
    int lm;                    /* a language model: its targets are the next tokens */
};

/* How the ranks spread the job (DESIGN.md §10): ranks = data × pipeline × tensor; rank r is
 * tensor rank r mod T of stage (r div T) mod P of data rank r div (P·T) — a block's tensor ranks
 * on neighbouring ranks (they talk most), then a pipeline's stages. */
struct tr_rank_layout {
    int data, pipeline, tensor;
    int data_rank, stage, tensor_rank;      /* this rank's */
};

struct tr_session {
    const struct tr_comm *comm;   /* the ranks it trains among (NULL: alone) */
    struct tr_rank_layout layout;
    struct tr_comm data_comm;     /* the ranks of this stage: the batch is theirs to share, their
                                   * gradients summed (without a pipeline: comm's ranks) */
    struct tr_comm pipe_comm;     /* pipelined: the stages of this data rank, rank the stage */
    struct tr_comm tensor_comm;   /* tensor parallel: the ranks this stage's blocks are split over */
    struct tr_tensor_sums tensor_sums[2];   /* and their all-reduces: training's, evaluation's */
    struct tr_pipe pipe, eval_pipe;   /* pipelined: each program's stage among them */
    double bus_rate, bus_latency; /* theirs, measured (tr_comm_bus_rate), for the plan's forecast */
    struct tr_device dev;      /* recipe device: this host, calibrated, or a GPU, measured */
    struct tr_backend *be;         /* the device's kernels and memory: the run's instance */
    struct tr_plan_job job;
    struct tr_recipe recipe;   /* this rank's share of the batch under the layout: what job plans for
                                * and the programs are built for */
    struct tr_plan plan;       /* the planner's choice: plan.cand[plan.chosen] */
    /* The chosen knobs: one (micro, seq), or with dynamic batching one plan per length bucket —
     * all in one arena, the largest plan's. */
    struct tr_knobs k;
    enum tr_dtype amp;         /* the activations' precision: TR_F32, or TR_BF16 / TR_F16 (optimize.amp) */
    struct tr_side train, eval;
    struct tr_allocator alloc;
    struct tr_allocator host_alloc;   /* offloaded (optimize.offload): the host's regions, from the
                                       * backend's host memory, within budget.host_memory */
    struct tr_optim optim;
    struct tr_rng_ctx rng;
    struct tr_scaler scaler;   /* fp16's loss scale */
};

/* The ranks' layout (tr_rank_layout) of stages pipeline stages each split over tensors ranks
 * (rank 0's plan's: cli/train.c), the rest data parallel, and the communicators of a stage's
 * data ranks, of a data rank's stages and of a stage's tensor ranks — every rank calls it, after
 * rank 0 planned (its layout search: plan.h) and before the others replay its plan. 0, or
 * TR_EINVAL: stages × tensors that do not divide the ranks, or more than one beside
 * optimize.parallel: data. */
int tr_session_lay_out(struct tr_session *s, const struct tr_recipe *r, int stages, int tensors, struct tr_diag *d);
/* The plan stage: the recipe's device and its backend, then the plan — searched for this host
 * and the budget, or replayed: the knobs given (another rank's choice), else from plan_file
 * (--plan FILE) or a resumed run's own plan.json (resume_dir; when it kept one). 0; TR_ENOFIT
 * when nothing fits the budget; TR_EINVAL for a job or saved plan that cannot be planned;
 * TR_EFAIL for the device. r and data stay in use by s. */
int tr_session_plan(struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data,
                    const char *plan_file, const char *resume_dir, const struct tr_knobs *given,
                    struct tr_diag *d);
/* The program-build stage: both programs of the chosen plan on one set of regions (each the
 * larger of the two), plus the optimizer state, all from the allocator under the memory
 * budget. 0; TR_EINVAL (the model refused), TR_ENOFIT (the budget), TR_EFAIL. */
int tr_session_build(struct tr_session *s, const struct tr_recipe *r, struct tr_diag *d);
void tr_session_free(struct tr_session *s);

/* The footprint the budget bounds, as measured: the process's peak resident set on the CPU, the
 * device memory in use on a GPU (the regions never grow, so after a step it is the peak). */
int64_t tr_session_footprint(const struct tr_session *s);
/* The chosen candidate's predictions. */
const struct tr_candidate *tr_session_chosen(const struct tr_session *s);

/* Whether the model is spread over the ranks (a pipeline, tensor parallelism): its checkpoints
 * then travel a tensor at a time (whole.h). */
static inline bool tr_session_spread(const struct tr_session *s)
{
    return s->train.b.pipelined || s->layout.tensor > 1;
}

#endif
