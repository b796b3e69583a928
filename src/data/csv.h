/* Reading delimited tables (RFC 4180 CSV, and TAB-separated text) through libcsv: rows of cells
 * with the line and column each cell starts at, and on top of them the numeric table a csv data
 * set becomes (features, a label column of class numbers or class names, a header line, a policy
 * for missing cells). Internal to src/data/: dataset.c reads csv files with tr_csv_parse,
 * files.c reads tsv text with tr_csv_rows. */
#ifndef TR_DATA_CSV_H
#define TR_DATA_CSV_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "data/files.h"

/* One cell of a row: its text (quotes removed, "" unescaped, blanks around an unquoted cell
 * trimmed; NUL-ended, valid for the call only) and where it starts in the file. */
struct tr_csv_cell {
    const char *s;
    size_t n;
    bool quoted;
    int line, col;   /* 1-based; col in bytes */
};

struct tr_csv_dialect {
    unsigned char delimiter;   /* ',' or '\t' */
    bool quoting;              /* RFC 4180 quotes; false: '"' is a character like any other */
    bool trim;                 /* blanks around unquoted cells are not part of them */
    int first_line;            /* the file's number of the text's first line (1 for a whole file) */
};

/* Called for each row in file order (rows of blank lines are skipped); non-zero (with its reason
 * in diag) stops the reading. */
typedef int tr_csv_row_fn(void *ctx, const struct tr_csv_cell *cells, int ncells, struct tr_diag *diag);

/* Splits len bytes of text (need not end in a newline; a UTF-8 byte-order mark is skipped) into
 * rows: LF, CRLF or CR ends a row outside quotes. A quote inside an unquoted cell, text after a
 * closing quote and a quote never closed are errors at path:line:col. */
int tr_csv_rows(const char *path, const char *text, size_t len, const struct tr_csv_dialect *dialect,
                tr_csv_row_fn *row, void *ctx, struct tr_diag *diag);

#define TR_CSV_MAX_CLASSES 100000   /* distinct labels: past that the label column is surely not classes */

struct tr_csv_options {
    int header;                       /* enum tr_csv_header */
    const char *label;                /* NULL or "last", "first", a column (0-based, or negative
                                       * from the end: -1 is the last), a column name */
    struct tr_where label_at;         /* where label was set */
    int nclasses;                     /* 0: unknown */
    char *const *class_names;         /* NULL-ended: the classes labels name (a label may also be
                                       * a class number below their count); NULL: from the data */
    int missing;                      /* enum tr_missing (recipe.h): refuse, drop the row, 0, or
                                       * NaN for the caller to fill with the mean */
    unsigned char delimiter;          /* ',' (0 means ',') or '\t' */
};

/* Parses a numeric table (len bytes; need not end in a NUL or newline) read from path. Labels
 * that are all whole numbers ≥ 0 are class numbers; otherwise (with no class_names) each
 * distinct label is a class, the classes ordered by the bytes of their names (strcmp), so that
 * the same table in any row order gives the same class ids; t->class_names then holds them. */
int tr_csv_parse(const char *path, const char *text, size_t len, const struct tr_csv_options *o,
                 struct tr_table *t, struct tr_diag *diag);

/* The classes n labels name, by tr_csv_parse's rule: every label a whole number ≥ 0 gives
 * *names NULL and *nclasses the largest + 1; else *names holds the distinct labels sorted by
 * their bytes (NULL-ended; the caller frees it and them) and *nclasses their count. labels is
 * sorted in place (the caller frees it). */
void tr_csv_classes(char **labels, size_t n, char ***names, int *nclasses);

/* Whether a cell's text is one of the markers of a missing value. */
bool tr_csv_is_missing(const struct tr_csv_cell *c);

#endif
