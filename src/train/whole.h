/* A spread run's checkpoints (DESIGN.md §10): pipeline stages hold their own parameters and
 * optimizer state, tensor ranks their slices of each block's, but a checkpoint holds whole
 * tensors — the file one device writes, which PyTorch reads and a run of another layout resumes
 * from. Rank 0 writes it a tensor at a time, each from the first stage of data rank 0's pipeline
 * that holds it (a sliced one put together from its tensor ranks' slices, one tensor whole at a
 * time), so no process ever holds the whole model; a resume's rank 0 reads the file and gives
 * every rank, tensor by tensor, what its stage holds (its slice of it). */
#ifndef TR_WHOLE_H
#define TR_WHOLE_H

#include "train/checkpoint.h"
#include "train/session.h"

/* Every stage of data rank 0 (the others: nothing): its tensors to rank 0, which writes
 * dir/step-<step>.safetensors with the trainer's state (dir NULL: rank 0 takes them and writes
 * nothing — its own part of the checkpoint failed — so that no stage waits on it). */
int tr_whole_write(struct tr_session *s, const char *dir, int64_t step, const char *recipe_name,
                   const char *trainer_state, struct tr_diag *d);
/* The checkpoints' layout: the whole model's (every stage's graph is it). */
struct tr_checkpoint_layout tr_whole_layout(const struct tr_session *s);
/* Every rank, after rank 0 opened the checkpoint to resume from in c (tr_checkpoint_resume_open):
 * what its stage holds, from c's tensors. */
int tr_whole_scatter(struct tr_session *s, const struct tr_checkpoint *c, struct tr_diag *d);

#endif
