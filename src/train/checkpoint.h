/* Checkpoints (DESIGN.md §6): the weights, batch-norm statistics and optimizer state of a run in
 * one safetensors file (PyTorch's safetensors.torch.load_file reads it), with the trainer's
 * position, a format version and a SHA-256 over every tensor and all of the metadata. Written
 * atomically; read by one reader (tr_checkpoint_open_newest) for resume, sample and warm
 * starts: a checkpoint that does not verify is never loaded, and the one before it is used
 * instead; one that is whole but of another model makes a resume refuse. */
#ifndef TR_CHECKPOINT_H
#define TR_CHECKPOINT_H

#include <stdbool.h>

#include "backend/exec.h"
#include "core/safetensors.h"
#include "train/optim.h"

/* 2: the checksum covers the metadata too (the step, the trainer's state); 1 is refused by a
 * resume (checkpoint.c, trainrun(1) FILES). */
#define TR_CHECKPOINT_VERSION "2"

/* What a checkpoint of a run holds: g's parameters and state as g lists them, then each
 * parameter's nstate optimizer state tensors ("optimizer.<state>.<parameter>",
 * recipe/optimizers.h). */
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
    int64_t *damaged;          /* a resume's reader: the steps of the files it passed over */
    int ndamaged;
};

/* The reader: opens in c the newest dir/step-N.safetensors (of every file the folder holds)
 * that verifies against l — format 2, its step the one its name says, the checksum over its
 * tensors and metadata, every tensor of l there with its shape and none besides — or, with l
 * NULL (a warm start's source, of a run whose graph this one need not share), the newest that
 * is whole (or of format 1: only its weights are used). Each file passed over is one item of
 * skipped, "path: why". 0 (c->found false when none passed), or TR_EIO when dir cannot be
 * read. */
int tr_checkpoint_open_newest(const char *dir, const struct tr_checkpoint_layout *l, struct tr_checkpoint *c,
                              struct tr_diag *skipped, struct tr_diag *d);
void tr_checkpoint_close(struct tr_checkpoint *c);

/* Writes dir/step-<step>.safetensors; trainer_state is the trainer's own text (early stopping's
 * record), kept in the metadata. */
int tr_checkpoint_write(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t step,
                        const char *recipe_name, const char *trainer_state, struct tr_diag *d);
/* A checkpoint a tensor at a time, for a model no one process holds whole (a pipeline's stages):
 * l's tensors in the file's name order, each with its value and optimizer state (−1: the value's
 * own); tr_checkpoint_write_each writes the file tr_checkpoint_write would of the same tensors,
 * fill(ctx, t, from, buf, bytes) giving each one's bytes in that order, a piece at a time
 * (core/safetensors.h: TR_ST_PIECE). */
struct tr_checkpoint_tensor {
    struct tr_st_tensor t;     /* its name, dtype, shape and bytes (no data) */
    int value, state;
};
int tr_checkpoint_tensors(const struct tr_checkpoint_layout *l, struct tr_checkpoint_tensor **out);
void tr_checkpoint_tensors_free(struct tr_checkpoint_tensor *t, int n);
typedef int (*tr_checkpoint_fill_fn)(void *ctx, const struct tr_checkpoint_tensor *t, size_t from, void *buf,
                                     size_t bytes, struct tr_diag *d);
int tr_checkpoint_write_each(const char *dir, const struct tr_checkpoint_layout *l, int64_t step, int64_t optimizer_step,
                             const char *recipe_name, const char *trainer_state, tr_checkpoint_fill_fn fill, void *ctx,
                             struct tr_diag *d);
/* tr_checkpoint_resume's finding and verifying without its loading: c left open on the newest
 * checkpoint of l that verifies (c->found false: none), its step, optimizer step and trainer state
 * read; tr_st_find(&c->st, name) then gives each tensor. The same refusals. */
int tr_checkpoint_resume_open(const char *dir, const struct tr_checkpoint_layout *l, struct tr_checkpoint *c,
                              int64_t *step, int64_t *optimizer_step, char *state, size_t statesize, char *warn,
                              size_t warnsize, struct tr_diag *d);
/* Loads the newest checkpoint in dir that verifies into the regions and the optimizer; sets
 * *step (0 when dir holds none that verifies) and copies its trainer state into state. Files
 * that do not verify are named in warn (if not NULL) and renamed to step-N.safetensors.damaged
 * (the run will write their steps again, and never over a file it did not write); the
 * temporaries of writes a crash cut short are removed. TR_EINVAL, loading nothing and moving
 * nothing, when the newest file that is not damaged is whole but of another model or of
 * format 1: the run's recipe or model changed since, and a resume must refuse. */
int tr_checkpoint_resume(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t *step,
                         char *state, size_t statesize, char *warn, size_t warnsize, struct tr_diag *d);
/* The newest checkpoint in dir that is whole (the reader with no layout): its path into path;
 * files passed over are named in warn. 0, or TR_EDATA when dir holds none (d says so). */
int tr_checkpoint_newest(const char *dir, char *path, size_t pathsize, char *warn, size_t warnsize,
                         struct tr_diag *d);

#endif
