/* A resumed run's appended files cut back to the checkpoint it resumes from (DESIGN.md §6):
 * metrics.jsonl and the TensorBoard event files hold what the interrupted process logged after
 * that checkpoint, which the resumed one logs again. Before each checkpoint is written, run.json
 * notes how long they were ("checkpointed"); a resume from that checkpoint cuts them back to
 * those lengths, one from an older checkpoint to the lines and records up to its step. Called
 * by the training loop: at its checkpoints, and when it resumes. */
#ifndef TR_TRIM_H
#define TR_TRIM_H

#include <jansson.h>
#include <stdint.h>

#include "train/run_folder.h"

/* run.json's "checkpointed" for the checkpoint of step about to be written, f's appended files
 * just synced: {"step", "metrics_bytes", "events_file", "events_bytes"} (the last two null
 * without events). */
json_t *tr_trim_mark(const struct tr_run_folder *f, int64_t step);

/* Resuming from the checkpoint of step: metrics.jsonl (open in f) and every event file in f's
 * folder cut back to it, a torn last line or record dropped. 0, or TR_EIO with the reason in d. */
int tr_trim_after(struct tr_run_folder *f, int64_t step, struct tr_diag *d);

#endif
