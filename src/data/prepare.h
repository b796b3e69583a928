/* A definition's prepare: script (trainrun-dataset(5), PREPARE SCRIPTS), internal to src/data/:
 * dataset.c calls it during the data refresh, after the URL sources are fetched and before the
 * files are read. The script runs in a process group of its own, within a time limit, and a
 * stop (SIGINT, SIGTERM, SIGHUP: core/stop.h) or the limit ends the whole group. */
#ifndef TR_DATA_PREPARE_H
#define TR_DATA_PREPARE_H

#include "core/error.h"
#include "data/definition.h"

/* Seconds the group is given between SIGTERM and SIGKILL. */
#define TR_PREPARE_GRACE 5.0

/* Runs def's prepare script when one of its files is missing or unlike its sha256, then checks
 * again; 0 when every file is there. timeout: seconds the script may run (0: no limit). Fails
 * with TR_EINVAL (the script failed, timed out, or left a file missing) or TR_EINTERRUPTED (a
 * stop was asked for: the group was ended), the reason in diag at the definition's prepare:. */
int tr_data_ensure_prepared(const struct tr_data_def *def, double timeout, struct tr_diag *diag);

#endif
