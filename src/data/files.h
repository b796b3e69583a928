/* Reading a data set's files: the decompressed bytes (gzip or plain, through zlib) checked
 * against their pinned sha256, then parsed as IDX into a table of raw features and labels
 * (CSV tables: csv.h), or as TSV or JSON Lines into text samples handed one by one to the
 * caller, who tokenises them. Internal to src/data/; dataset.c splits and normalises the
 * tables. Every error names the file, and for text the line and column. */
#ifndef TR_DATA_FILES_H
#define TR_DATA_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/definition.h"

/* What one file (or IDX pair) held: n samples of nfeatures raw floats and their labels; or,
 * for text classification, n token sequences (tokens[offsets[i], offsets[i+1])) and labels. */
struct tr_table {
    int64_t n, nfeatures;
    int rank;
    int64_t dims[TR_DATA_RANK_MAX];   /* the file's own per-sample shape */
    float *x;
    uint8_t *pixels;                  /* idx: n × nfeatures grey levels as stored (x NULL) */
    int32_t *y;
    int32_t *tokens;                  /* text: ntokens ids; NULL for features */
    int64_t *offsets;                 /* text: n + 1 */
    int64_t ntokens;
    int nclasses;                     /* as the caller fixed it, or from the header, or max + 1 */
    char **class_names;               /* from an sklearn header or a csv's labels that name classes
                                       * (csv.h), NULL-ended; else NULL */
    bool missing;                     /* csv, missing: mean: x holds NaN where a cell was missing */
    int64_t dropped;                  /* csv, missing: drop: the rows left out */
    void *map;                        /* text from the token cache: the shard (map_bytes long)
                                       * its arrays point into, as in struct tr_split */
    size_t map_bytes;
};

/* The whole decompressed content of f into *buf (caller frees), its sha256 checked when f pins
 * one and, when sha256 is not NULL, written there as hex (what keys the token cache, cache.h).
 * package, when not NULL, is named in the message for a missing file. */
int tr_data_read(const struct tr_data_file *f, const char *package, unsigned char **buf, size_t *len,
                 char sha256[65], struct tr_diag *diag);

/* Parses an IDX image file (magic 0x00000803: u8 [n, rows, cols]) and its label file
 * (0x00000801: u8 [n]). nclasses bounds the labels (0: 256). */
int tr_idx_parse(const char *images_path, const unsigned char *images, size_t images_len,
                 const char *labels_path, const unsigned char *labels, size_t labels_len, int nclasses,
                 struct tr_table *t, struct tr_diag *diag);
void tr_table_free(struct tr_table *t);

/* Reads f to the end and checks its sha256 like tr_data_read, keeping none of it: is the file
 * there and right, and (sha256 not NULL) what is its hash? */
int tr_data_check(const struct tr_data_file *f, const char *package, char sha256[65], struct tr_diag *diag);

/* The lines f's lines: range names ([first, last], 1-based), or all of text: *start, *len and
 * *first_line (the file's number of the slice's first line). A range past the file's end is an
 * error at the definition's lines:. */
int tr_text_lines(const struct tr_data_file *f, const char *text, size_t len, const char **start,
                  size_t *slice_len, int *first_line, struct tr_diag *diag);

/* Checks that len bytes of text are UTF-8; the first bad byte is an error at path:line:col
 * (line counted from first_line, col in bytes). */
int tr_utf8_check(const char *path, const char *text, size_t len, int first_line, struct tr_diag *diag);

/* One text sample as read: its text (in a buffer that lives for the call only), its class, and
 * where the text field starts in the file. */
struct tr_text_sample {
    const char *text;
    size_t len;
    int32_t label;                    /* -1 when the options name no classes */
    const char *label_text;           /* the label as written (a number's digits; not NUL-ended) */
    size_t label_len;
    int line, col;
};

/* Called for each sample in file order; a non-zero return (with its reason in diag) stops. */
typedef int tr_text_sample_fn(void *ctx, const struct tr_text_sample *s, struct tr_diag *diag);

struct tr_text_options {
    int format;                       /* TR_FMT_TSV (a header line of field names, a TAB between
                                       * fields, no quoting) or TR_FMT_JSONL (an object a line) */
    const char *text, *label;         /* the fields holding the text and the label */
    struct tr_where text_at, label_at;   /* where the definition names them */
    char *const *class_names;         /* NULL-ended: labels are these names; NULL: class numbers */
    int nclasses;                     /* 0 (and no class_names): labels are only handed over, as
                                       * label_text, to find the classes from */
    int first_line;                   /* the file's number of the first line of text */
};

/* Parses TSV or JSON Lines text (len bytes; need not end in a NUL or newline) read from path,
 * handing each sample to take. UTF-8 is the caller's to check (tr_utf8_check). */
int tr_text_parse(const char *path, const char *text, size_t len, const struct tr_text_options *o,
                  tr_text_sample_fn *take, void *ctx, struct tr_diag *diag);

#endif
