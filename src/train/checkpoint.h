/* Checkpoints (DESIGN.md §6): the weights, batch-norm statistics and optimizer state of a run in
 * one safetensors file (PyTorch's safetensors.torch.load_file reads it), with the trainer's
 * position, a format version and a SHA-256 of every tensor in its metadata. Written atomically;
 * a checkpoint that does not verify is never loaded, and resume falls back to an older one. */
#ifndef TR_CHECKPOINT_H
#define TR_CHECKPOINT_H

#include "backend/exec.h"
#include "train/optim.h"

#define TR_CHECKPOINT_VERSION "1"

/* Writes dir/step-<step>.safetensors; trainer_state is the trainer's own text (early stopping's
 * record), kept in the metadata. 0, or an error code with a sentence in err. */
int tr_checkpoint_write(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t step,
                        const char *recipe_name, const char *trainer_state, char *err, size_t errsize);
/* Loads the newest checkpoint in dir that verifies into the regions and the optimizer; sets
 * *step (0 when dir holds none) and copies its trainer state into state. Files that do not
 * verify are named in warn (if not NULL). */
int tr_checkpoint_resume(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t *step,
                         char *state, size_t statesize, char *warn, size_t warnsize, char *err,
                         size_t errsize);
/* The newest checkpoint in dir whose file is whole (a warm start's source, model.init.from_run,
 * before any graph exists to verify its checksum against): its path into path; files passed
 * over are named in warn. 0, or −1 when dir holds none (err says so). */
int tr_checkpoint_newest(const char *dir, char *path, size_t pathsize, char *warn, size_t warnsize, char *err,
                         size_t errsize);

#endif
