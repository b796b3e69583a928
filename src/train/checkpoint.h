/* Checkpoints (DESIGN.md §6): the weights, batch-norm statistics and optimizer state of a run in
 * one safetensors file (PyTorch's safetensors.torch.load_file reads it), with the trainer's
 * position, a format version and a SHA-256 of every tensor in its metadata. Written atomically;
 * read by one reader (tr_checkpoint_open_newest) for resume, sample and warm starts: a
 * checkpoint that does not verify is never loaded, and the one before it is used instead. */
#ifndef TR_CHECKPOINT_H
#define TR_CHECKPOINT_H

#include <stdbool.h>

#include "backend/exec.h"
#include "core/safetensors.h"
#include "train/optim.h"

#define TR_CHECKPOINT_VERSION "1"

/* What a checkpoint of a run holds, in the order its checksum covers: g's parameters and
 * state as g lists them, then each parameter's nstate optimizer state tensors
 * ("optimizer.<state>.<parameter>", recipe/optimizers.h). */
struct tr_checkpoint_layout {
    const struct tr_graph *g;
    int optimizer;   /* enum tr_optimizer */
    int nstate;      /* its state tensors kept (tr_optimizer_nstate) */
};

/* A checkpoint found by the reader. */
struct tr_checkpoint {
    bool found;                /* st is open on path */
    int files;                 /* the step-N.safetensors files the folder holds */
    struct tr_path path;
    struct tr_safetensors st;
};

/* The reader: opens in c the newest dir/step-N.safetensors that verifies against l — its
 * format version, every tensor of l there with its shape, the checksum over them — or, with
 * l NULL (a warm start's source, of a run whose graph this one need not share), the newest
 * that opens and is a trainrun checkpoint. Each file passed over is one item of skipped,
 * "path: why". 0 (c->found false when none passed), or TR_EIO when dir cannot be read. */
int tr_checkpoint_open_newest(const char *dir, const struct tr_checkpoint_layout *l, struct tr_checkpoint *c,
                              struct tr_diag *skipped, struct tr_diag *d);
void tr_checkpoint_close(struct tr_checkpoint *c);

/* Writes dir/step-<step>.safetensors; trainer_state is the trainer's own text (early stopping's
 * record), kept in the metadata. */
int tr_checkpoint_write(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t step,
                        const char *recipe_name, const char *trainer_state, struct tr_diag *d);
/* Loads the newest checkpoint in dir that verifies into the regions and the optimizer; sets
 * *step (0 when dir holds none) and copies its trainer state into state. Files that do not
 * verify are named in warn (if not NULL); the temporaries of writes a crash cut short are
 * removed. */
int tr_checkpoint_resume(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t *step,
                         char *state, size_t statesize, char *warn, size_t warnsize, struct tr_diag *d);
/* The newest checkpoint in dir that is whole (the reader with no layout): its path into path;
 * files passed over are named in warn. 0, or TR_EDATA when dir holds none (d says so). */
int tr_checkpoint_newest(const char *dir, char *path, size_t pathsize, char *warn, size_t warnsize,
                         struct tr_diag *d);

#endif
