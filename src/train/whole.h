/* A pipelined run's whole model, on rank 0 for a checkpoint's while (DESIGN.md §10): the stages
 * hold their own parameters and optimizer state, but a checkpoint holds whole tensors — the file
 * one device writes, which PyTorch reads and a run of another layout resumes from. The stages of
 * data rank 0 send theirs to rank 0, which writes them as one device would; a resume's rank 0
 * reads the file into it and sends every rank what its stage holds. */
#ifndef TR_WHOLE_H
#define TR_WHOLE_H

#include "train/session.h"

struct tr_whole {
    struct tr_memplan plan;    /* the whole model's parameters laid out as one device lays them */
    struct tr_exec x;          /* over them: what the checkpoint writer and reader take */
    struct tr_optim o;         /* the optimizer state, whole */
    float *params, *state;
};

/* Rank 0: the whole model's room, empty (host memory: its parameters and state once). */
void tr_whole_open(struct tr_whole *w, const struct tr_session *s);
void tr_whole_close(struct tr_whole *w);
/* Every stage of data rank 0: its parameters and optimizer state into rank 0's w (opened there;
 * the others pass theirs alone). The other data ranks' stages hold the same: nothing. */
int tr_whole_gather(struct tr_session *s, struct tr_whole *w, struct tr_diag *d);
/* Every rank: from rank 0's w (read from a checkpoint), what its stage holds, with the
 * optimizer's step. */
int tr_whole_scatter(struct tr_session *s, struct tr_whole *w, struct tr_diag *d);

#endif
