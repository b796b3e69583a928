/* Helpers shared by the Check unit tests (tests/check_<module>.c): a scratch folder for the
 * files the loader reads, and diagnostics joined into one string, so that a failing
 * assertion prints the whole list that was got beside the one expected. */
#ifndef TR_TESTS_UNIT_H
#define TR_TESTS_UNIT_H

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* A new empty folder under $TMPDIR (or /tmp); the caller removes it with unit_rmtree. */
static inline char *unit_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = tr_strdup_printf("%s/trainrun-unit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
    return dir;
}

static inline int unit_remove_one(const char *path, const struct stat *st, int flag,
                                  struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static inline void unit_rmtree(const char *dir)
{
    nftw(dir, unit_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes text to path, failing the test when it cannot. */
static inline void unit_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The same at dir/name; returns that path (caller frees). */
static inline char *unit_write_in(const char *dir, const char *name, const char *text)
{
    char *path = tr_strdup_printf("%s/%s", dir, name);
    unit_write(path, text);
    return path;
}

/* The diagnostic lines (tr_diag_line), each ended by a newline; "" when there are none.
 * Caller frees. */
static inline char *unit_diag_text(const struct tr_diag *d)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < d->n; i++) {
        char *line = tr_diag_line(d, i);
        fprintf(f, "%s\n", line);
        free(line);
    }
    fclose(f);
    return text;
}

/* The number of entries before the NULL that ends a list of strings. */
static inline int unit_count(const char *const *list)
{
    int n = 0;
    while (list && list[n])
        n++;
    return n;
}

/* ‖got − want‖ and ‖a‖ over n floats, summed in double: the parts of a normwise error. */
static inline double unit_distance(const float *got, const float *want, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    return sqrt(sum);
}

static inline double unit_norm(const float *a, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)a[i] * a[i];
    return sqrt(sum);
}

/* ‖got − want‖ / ‖want‖ (‖got − want‖ when want is 0). */
static inline double unit_normwise(const float *got, const float *want, int64_t n)
{
    double norm = unit_norm(want, n);
    return unit_distance(got, want, n) / (norm > 0 ? norm : 1);
}

#endif
