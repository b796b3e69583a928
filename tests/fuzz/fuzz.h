/* What the libFuzzer harnesses of tests/fuzz/ share: the input written to a file for readers
 * that take a path (in /dev/shm, so no disk is touched), and the promise every reader makes on
 * a refusal — a message that names the input. Each harness is one fuzz_<reader>.c; replay.c
 * runs any of them over files for make check (tests/fuzz-replay.sh). */
#ifndef TR_FUZZ_H
#define TR_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);   /* libFuzzer's entry point */

#define FUZZ_CHECK(cond)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* The folder inputs are written to: /dev/shm when there is one (memory, not disk). */
static inline const char *fuzz_dir(void)
{
    return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

/* Writes size bytes to a new file named <dir>/fuzz-<pid>-<name> into path; 0 or -1. */
static inline int fuzz_write_file(char *path, size_t cap, const char *name, const void *data, size_t size)
{
    snprintf(path, cap, "%s/fuzz-%d-%s", fuzz_dir(), (int)getpid(), name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = size ? fwrite(data, 1, size, f) : 0;
    if (fclose(f) != 0 || n != size) {
        unlink(path);
        return -1;
    }
    return 0;
}

/* A refusal names the input: some line of d holds name (the path or the label it was given). */
static inline void fuzz_check_names(const struct tr_diag *d, const char *name)
{
    int found = 0;
    FUZZ_CHECK(d->n > 0);
    for (int i = 0; i < d->n && !found; i++) {
        char *line = tr_diag_line(d, i);
        found = strstr(line, name) != NULL;
        free(line);
    }
    if (!found) {
        tr_diag_print(d, stderr);
        fprintf(stderr, "(the message does not name %s)\n", name);
    }
    FUZZ_CHECK(found);
}

#endif
