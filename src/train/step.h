/* One optimizer step's forward and backward passes (DESIGN.md §3, gradient accumulation): the
 * loader's micro-batches (loader.h) run one after another, each on the program's plan for its
 * size (B, S), their gradients adding up in the gradients region. Each micro-batch's loss is a
 * mean over its targets, so it is weighted by its share of the step's real count — samples for
 * classification, target tokens for language modelling — and the update equals one big batch's
 * however the step was cut. The trainer does the rest (unscaling, clipping, the update). */
#ifndef TR_STEP_H
#define TR_STEP_H

#include "backend/exec.h"
#include "backend/profile.h"
#include "data/loader.h"
#include "graph/program.h"
#include "dist/gradients.h"
#include "graph/stages.h"
#include "models/models.h"

/* A pipeline stage's side of the pipeline (DESIGN.md §10): its neighbours over comm (the stages
 * of one data rank: comm's rank is the stage), the split, the forward's sends in flight per slot,
 * and what it measured. */
struct tr_pipe {
    const struct tr_comm *comm;
    const struct tr_stages *st;
    int stage;
    struct tr_comm_request *sent;   /* [slot · nforward + i]: the forward's i-th send of the slot */
    int nforward;                   /* the transfers this stage sends in its forward */
    int slots;                      /* its micro-batches in flight at most (tr_pipe_init's) */
    int in_flight, in_flight_peak;  /* micro-batches between their forward and backward: now, and
                                     * the most there were (1F1B: min(stages − stage, micro-batches)) */
    double waited, ran;             /* seconds waiting for neighbours, running the stage's nodes */
    struct tr_exec_profile *profile;   /* the trainer's: each wait a span in the traces (NULL: none) */
    int64_t step;                   /* the step in progress, for those spans */
    double sent_bytes;              /* bytes sent to other stages */
    void **copies;                  /* a forward alone (evaluation): each send's host copy, two turns
                                     * of them, so that the next batch runs while this one travels */
    size_t *copy_bytes;
    int turn;
    float *parts;                   /* a shared weight's gradient, each holder's piece (TR_PIPE_PIECE
                                     * floats each: nparts of them), summed after the step's backward */
    int nparts;
};

void tr_pipe_init(struct tr_pipe *pp, const struct tr_comm *comm, const struct tr_stages *st, int stage, int slots);
void tr_pipe_free(struct tr_pipe *pp);
/* A forward alone through the stages (evaluation; pp initialised with 2 slots): what this stage
 * receives, its nodes at (B, S), what it sends — copied, so that the next batch may run while it
 * travels; tr_pipe_drain waits for the last ones. */
int tr_pipe_forward(struct tr_pipe *pp, struct tr_exec *x, int64_t B, int64_t S, struct tr_diag *d);
int tr_pipe_drain(struct tr_pipe *pp, struct tr_diag *d);
/* Whether x holds value v (a stage holds only what its nodes use). */
bool tr_exec_holds(const struct tr_exec *x, int v);

struct tr_step_runner {
    struct tr_exec *x;              /* its plan is switched to each micro-batch's */
    const struct tr_program *p;
    const struct tr_model *m;
    int loss_scale;                 /* the loss.scale input (tr_autodiff's value) */
    int lm;                         /* a language model: its targets are next tokens */
    int64_t features;               /* feature vectors: floats a sample (0 for text) */
    struct tr_rng_ctx *rng;         /* its step and sample ids (host memory, the loader's) are set
                                     * per micro-batch */
    int rank, world;                /* across ranks (dist/): this rank runs its share of each step's
                                     * micro-batches, in order (world 0 or 1: all of them) */
    struct tr_grad_reducer *reducer;   /* armed before the rank's last micro-batch of a step (its
                                        * buckets leave as that backward writes them); NULL: none */
    struct tr_optim *offload;       /* the optimizer's state offloaded (optim.h: tr_optim_overlap):
                                     * armed before the last micro-batch of a step, its gradients
                                     * sent after it; NULL: none */
    struct tr_pipe *pipe;           /* pipelined: the micro-batches run 1F1B through the stages, the
                                     * shared weights' gradients summed after; NULL: none */
    struct tr_tensor_sums *sequence;   /* sequence parallel: the partial gradients summed over the
                                        * tensor ranks after the backward; NULL: none */
};

/* A micro-batch into x's inputs (at x's plan): features and labels, or for text the token
 * ids, their positions (0, 1, …), segment 0, the padding mask and the labels or next-token
 * targets. 0, or a code with the sentence in d (a device's copy failed). */
int tr_feed(struct tr_exec *x, const struct tr_model *m, int lm, const struct tr_batch *b, int64_t features,
            struct tr_diag *d);
/* The targets the micro-batch's mean loss runs over: its labels, or for a language model its
 * target tokens, those ≠ −100 (ignored) either way. */
int64_t tr_batch_targets(const struct tr_batch *b, int lm);
/* Zeroes the gradients, then runs forward and backward over the step's micro-batches, the
 * gradient of micro-batch i's mean loss scaled by scale × targets_i / Σ targets (micro-batches
 * without targets are skipped). *loss gets the step's mean loss, Σ (targets_i / Σ) · loss_i.
 * Across ranks, the Σ runs over the whole step and this rank runs its share of the micro-batches,
 * the ranks' gradients and losses adding up to the step's (dist/gradients.h); *ran says whether
 * it ran any.
 * Each micro-batch's inputs are staged (exec.h) while the one before it runs; next, when not
 * NULL, is the step that follows, whose first micro-batch is staged while this one's last runs
 * (its arrays must stay valid until it has run: loader.h's hold 2). Pipelined, this stage's
 * part of each micro-batch in the 1F1B order (the first stage at most min(stages, micro-batches)
 * in flight), *loss the last stage's alone (0 on the others). Returns 0, or a code with the
 * sentence in d. */
int tr_step_gradients(const struct tr_step_runner *r, const struct tr_step *st, const struct tr_step *next,
                      uint64_t step, double scale, double *loss, bool *ran, struct tr_diag *d);

#endif
