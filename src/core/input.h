/* Opening a file trainrun reads as input (recipe, extends, conf, data, tokenizer, plan): it
 * must be a regular file. A FIFO would block the open or the read forever, a device such as
 * /dev/zero never ends, a directory is no file at all; each is refused before it is read. */
#ifndef TR_INPUT_H
#define TR_INPUT_H

#include <stdio.h>

#include "core/error.h"

/* open(path, flags) for reading, refused unless path is a regular file. The fd (its
 * O_NONBLOCK cleared), or a negative tr_err with the reason in d at path: TR_EIO when it cannot
 * be opened (errno kept: ENOENT for a missing file), TR_EINVAL with "not a regular file (a
 * FIFO)" and the like. A FIFO is opened without blocking, so the answer comes at once. */
int tr_open_regular(const char *path, int flags, struct tr_diag *d);
/* The same as a stdio stream for reading ("rb"), or NULL with the reason in d. */
FILE *tr_fopen_regular(const char *path, struct tr_diag *d);
/* "a FIFO", "a directory", "a character device", …: what a st_mode is, for a message. */
const char *tr_file_kind(unsigned mode);

#endif
