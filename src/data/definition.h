/* A data set's definition, parsed from dataset.yaml (format in dataset.h) or built from a
 * recipe's inline data.train/valid/test: which files to read, how to read them, how to split
 * and normalise, and for text which tokenizer and which `prepare` script makes the files.
 * Internal to src/data/: dataset.c turns it into struct tr_data. */
#ifndef TR_DATA_DEFINITION_H
#define TR_DATA_DEFINITION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"

enum tr_csv_header { TR_HEADER_AUTO, TR_HEADER_NONE, TR_HEADER_SKLEARN, TR_HEADER_NAMES };

struct tr_data_file {
    char *path;          /* resolved: relative sources are joined to the definition's folder, or
                          * to the prepared folder when the definition names a prepare: script;
                          * for a URL, the download cache's copy once fetched (NULL before) */
    char *url;           /* an https:// or http:// source as given, or NULL (fetch.h) */
    struct tr_where source_at;       /* where source: was given, for its errors */
    char sha256[65];     /* lower-case hex; "" when the definition pins none */
    char *pinned_by;     /* "datasets/digits/dataset.yaml:9:9" or "data.train.sha256" */
    int64_t first_line, last_line;   /* lines: [first, last], 1-based, both read; 0: the whole file */
    struct tr_where lines_at;        /* where lines: was given, for its errors */
};

/* One split's files: a CSV file, IDX images and labels, or text files read in order and joined. */
struct tr_data_source {
    bool given;
    struct tr_data_file *files;   /* nfiles of them: the CSV file, the IDX images, the text files */
    int nfiles;
    struct tr_data_file labels;   /* IDX labels */
    bool pair;                    /* named by images: and labels: (idx) */
    struct tr_where list_at;      /* where a list of files was given; .file NULL for one mapping */
};

/* The tokenizer a text data set is read with unless the recipe names one (data.tokenizer). */
struct tr_data_tokenizer {
    int kind;                     /* enum tr_tokenizer_kind; TR_TOK_NONE: the definition names none */
    char *vocab, *merges;         /* resolved against the definition's folder, or NULL */
    bool lowercase;
    struct tr_where at;           /* where tokenizer: was given */
};

struct tr_data_def {
    char *file;                   /* the definition's path; NULL for an inline recipe */
    char name[64];
    char *package;                /* the Debian package that installs the files, or NULL */
    int format;                   /* TR_FMT_CSV, TR_FMT_TSV, TR_FMT_JSONL, TR_FMT_TEXT or TR_FMT_IDX */
    struct tr_data_source all;    /* one file to split three ways; else train (+ valid, test) */
    struct tr_data_source train, valid, test;
    int header;                   /* enum tr_csv_header */
    int missing;                  /* csv: enum tr_missing */
    char *label;                  /* csv label column: "last", "first", "3", "species"; tsv and
                                   * jsonl: the label field */
    struct tr_where label_at;     /* where label was set, for its errors */
    char *text;                   /* tsv, jsonl: the field holding a sample's text */
    struct tr_where text_at;
    int nclasses;                 /* 0: from the data */
    char **class_names;           /* NULL-ended, or NULL */
    struct tr_where class_names_at;
    int shape_rank;               /* 0: the file's own shape */
    int64_t shape[TR_DATA_RANK_MAX];
    double split_valid, split_test;   /* < 1: fraction of the pool; ≥ 1: count; 0: none */
    uint64_t split_seed;
    struct tr_where split_at;     /* where split: was given, for its errors */
    int norm;                     /* enum tr_norm_kind */
    double scale;
    char *prepare;                /* the prepare: script's path (beside the definition), or NULL */
    struct tr_where prepare_at;
    char *prepared_dir;           /* where prepare writes and relative sources are found */
    struct tr_data_tokenizer tokenizer;
};

/* Parses path into def; 0 or TR_EINVAL / TR_EIO with every problem in diag. */
int tr_data_def_parse(const char *path, struct tr_data_def *def, struct tr_diag *diag);
/* Whether s can name a data set's folder: letters, digits, '.', '_', '-', not starting with '.'
 * (so never "..") and shorter than tr_data_def.name. */
bool tr_data_is_folder_name(const char *s);
/* The definition a recipe's inline data.train (and data.valid, data.test) make (inline.c), checked
 * without reading a file; 0 or TR_EINVAL with every problem at its recipe key in diag. */
int tr_data_def_inline(const struct tr_recipe *r, struct tr_data_def *def, struct tr_diag *diag);
/* Where a recipe key's value came from, for messages about it ({0} for a default). */
struct tr_where tr_data_key_where(const struct tr_recipe *r, const char *key);
/* Adds a zeroed file to s and returns it. */
struct tr_data_file *tr_data_source_add(struct tr_data_source *s);
void tr_data_def_free(struct tr_data_def *def);

#endif
