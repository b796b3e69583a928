/* The initial-weights stage (DESIGN.md §9, model.init): after the session is built, before the
 * run folder opens. Random weights, a file's, or a warm start from this recipe's promoted or
 * latest run (found before this run's folder becomes `latest`). */
#ifndef TR_WEIGHTS_H
#define TR_WEIGHTS_H

#include <jansson.h>

#include "train/session.h"

struct tr_weights {            /* what model.init did, for the log and run.json */
    char summary[1024];        /* what was loaded, ignored, drawn; "" for drawn weights */
    json_t *warm_start;        /* model.init.from_run: {from_run, run, checkpoint}; NULL otherwise */
};

/* Writes the first weights into s's training regions. A resumed run (resume_dir) takes the warm
 * start its first part recorded. 0; TR_EDATA (no run or file to start from, or a file that does
 * not fit the model), TR_EFAIL. */
int tr_weights_init(struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data,
                    const char *resume_dir, struct tr_weights *w, struct tr_diag *d);
void tr_weights_free(struct tr_weights *w);

#endif
