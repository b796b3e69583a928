/* A load's sources (dataset.h, struct tr_data_origin), internal to src/data/: the definition's
 * URL sources fetched before anything is read, and what identifies every file it reads. */
#ifndef TR_DATA_SOURCES_H
#define TR_DATA_SOURCES_H

#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/definition.h"
#include "recipe/recipe.h"

/* What the data refresh may spend: the recipe's (its conf files', its overrides') limits. */
struct tr_data_refresh_options {
    int64_t max_download;     /* data.max_download: bytes one URL source may bring; 0: no cap */
    double prepare_timeout;   /* data.prepare_timeout: seconds; 0: no limit */
    FILE *progress;           /* where downloads show how far they are; NULL: quiet */
};
/* r's options (r NULL: the keys' defaults), progress on stderr. */
void tr_data_refresh_options_of(const struct tr_recipe *r, struct tr_data_refresh_options *o);

/* Fetches each URL source of def into the download cache (fetch.h) and points its path there;
 * each becomes an origin of out (retries become out's warnings). 0, or TR_EINVAL / TR_EIO /
 * TR_EINTERRUPTED with the reason in diag, placed at the definition's source:. */
int tr_data_fetch_sources(struct tr_data_def *def, const struct tr_data_refresh_options *o, struct tr_data *out,
                          struct tr_diag *diag);
/* Adds the other files of def to out's origins, each with its sha256 (the pinned one, or the
 * content's): call once the files are there (after prepare). */
int tr_data_record_origins(const struct tr_data_def *def, struct tr_data *out, struct tr_diag *diag);
void tr_data_origins_free(struct tr_data *d);

#endif
