/* A load's sources (dataset.h, struct tr_data_origin), internal to src/data/: the definition's
 * URL sources fetched before anything is read, and what identifies every file it reads. */
#ifndef TR_DATA_SOURCES_H
#define TR_DATA_SOURCES_H

#include "core/error.h"
#include "data/dataset.h"
#include "data/definition.h"

/* Fetches each URL source of def into the download cache (fetch.h) and points its path there;
 * each becomes an origin of out (retries become out's warnings). 0, or TR_EINVAL / TR_EIO with
 * the reason in diag, placed at the definition's source:. */
int tr_data_fetch_sources(struct tr_data_def *def, struct tr_data *out, struct tr_diag *diag);
/* Adds the other files of def to out's origins, each with its sha256 (the pinned one, or the
 * content's): call once the files are there (after prepare). */
int tr_data_record_origins(const struct tr_data_def *def, struct tr_data *out, struct tr_diag *diag);
void tr_data_origins_free(struct tr_data *d);

#endif
