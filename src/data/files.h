/* Reading a data set's files: the decompressed bytes (gzip or plain, through zlib) checked
 * against their pinned sha256, then parsed as CSV or IDX into a table of raw features and
 * labels. Internal to src/data/; dataset.c splits and normalises the tables. Every error names
 * the file, and for CSV the line and column. */
#ifndef TR_DATA_FILES_H
#define TR_DATA_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/definition.h"

/* What one file (or IDX pair) held: n samples of nfeatures raw floats and their labels. */
struct tr_table {
    int64_t n, nfeatures;
    int rank;
    int64_t dims[TR_DATA_RANK_MAX];   /* the file's own per-sample shape */
    float *x;
    int32_t *y;
    int nclasses;                     /* as the caller fixed it, or from the header, or max + 1 */
    char **class_names;               /* from an sklearn header, NULL-ended; else NULL */
};

/* The whole decompressed content of f into *buf (caller frees), its sha256 checked when f pins
 * one. package, when not NULL, is named in the message for a missing file. */
int tr_data_read(const struct tr_data_file *f, const char *package, unsigned char **buf, size_t *len,
                 struct tr_diag *diag);

struct tr_csv_options {
    int header;                       /* enum tr_csv_header */
    const char *label;                /* NULL or "last", "first", a 0-based column, a column name */
    struct tr_where label_at;         /* where label was set */
    int nclasses;                     /* 0: unknown */
};

/* Parses CSV text (len bytes; need not end in a NUL or newline) read from path. */
int tr_csv_parse(const char *path, const char *text, size_t len, const struct tr_csv_options *o,
                 struct tr_table *t, struct tr_diag *diag);
/* Parses an IDX image file (magic 0x00000803: u8 [n, rows, cols]) and its label file
 * (0x00000801: u8 [n]). nclasses bounds the labels (0: 256). */
int tr_idx_parse(const char *images_path, const unsigned char *images, size_t images_len,
                 const char *labels_path, const unsigned char *labels, size_t labels_len, int nclasses,
                 struct tr_table *t, struct tr_diag *diag);
void tr_table_free(struct tr_table *t);

#endif
