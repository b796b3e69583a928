/* The one atomic writer (STYLE.md: every file trainrun writes whole goes through it): the
 * contents go to PATH.tmp.PID, are flushed and fsynced, renamed over PATH, and the folder is
 * fsynced, so a reader — or a machine after a power cut — sees the old file or the new one,
 * never half of one. A failure at any step leaves PATH as it was and no temporary behind.
 * Files trainrun appends to (metrics.jsonl, log.txt, event files) are made durable at each
 * checkpoint by tr_file_sync, the one policy for them. */
#ifndef TR_ATOMIC_H
#define TR_ATOMIC_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

struct tr_atomic {
    FILE *f;                 /* write the contents here, then tr_atomic_commit */
    struct tr_path path, tmp;
    int error;               /* after a failure, the errno behind it: for a caller that words its
                              * own warning (the token cache's) */
};

/* Opens the temporary beside path (O_EXCL: never through a link or into someone's open file;
 * one a crashed process of our pid left behind is replaced). */
int tr_atomic_open(struct tr_atomic *a, const char *path, struct tr_diag *d);
/* Flush, fsync, close, rename over the path, fsync its folder. On failure the temporary is
 * removed and the path left unchanged; either way a->f is closed. */
int tr_atomic_commit(struct tr_atomic *a, struct tr_diag *d);
/* Gives up: closes and removes the temporary (a no-op when nothing is open). */
void tr_atomic_abort(struct tr_atomic *a);
/* The whole file from one buffer. */
int tr_atomic_write(const char *path, const void *data, size_t bytes, struct tr_diag *d);
/* The whole file as jansson writes j with flags (json_dumpf). Both leave errno at the failure's
 * cause, for a caller that words its own sentence. */
struct json_t;
int tr_atomic_write_json(const char *path, const struct json_t *j, size_t flags, struct tr_diag *d);

/* Flushes an appended file and fsyncs it (what a checkpoint does for each such file). */
int tr_file_sync(FILE *f, const char *path, struct tr_diag *d);
/* fsync of the folder holding path: a rename or a new file in it survives a power cut. */
int tr_sync_folder_of(const char *path, struct tr_diag *d);

#endif
