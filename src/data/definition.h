/* A data set's definition, parsed from dataset.yaml (format in dataset.h) or built from a
 * recipe's inline data.train/valid/test: which files to read, how to read them, how to split
 * and normalise. Internal to src/data/: dataset.c turns it into struct tr_data. */
#ifndef TR_DATA_DEFINITION_H
#define TR_DATA_DEFINITION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"

enum tr_csv_header { TR_HEADER_AUTO, TR_HEADER_NONE, TR_HEADER_SKLEARN, TR_HEADER_NAMES };

struct tr_data_file {
    char *path;          /* resolved: relative sources are joined to the definition's folder */
    char sha256[65];     /* lower-case hex; "" when the definition pins none */
    char *pinned_by;     /* "datasets/digits/dataset.yaml:9:9" or "data.train.sha256" */
};

/* One split's files: a CSV file, or IDX images and labels. */
struct tr_data_source {
    bool given;
    struct tr_data_file data;     /* the CSV file, or the IDX images */
    struct tr_data_file labels;   /* IDX labels */
};

struct tr_data_def {
    char *file;                   /* the definition's path; NULL for an inline recipe */
    char name[64];
    char *package;                /* the Debian package that installs the files, or NULL */
    int format;                   /* TR_FMT_CSV or TR_FMT_IDX */
    struct tr_data_source all;    /* one file to split three ways; else train (+ valid, test) */
    struct tr_data_source train, valid, test;
    int header;                   /* enum tr_csv_header */
    char *label;                  /* csv label column: "last", "first", "3", "species" */
    struct tr_where label_at;     /* where label was set, for its errors */
    int nclasses;                 /* 0: from the data */
    char **class_names;           /* NULL-ended, or NULL */
    int shape_rank;               /* 0: the file's own shape */
    int64_t shape[TR_DATA_RANK_MAX];
    double split_valid, split_test;   /* < 1: fraction of the pool; ≥ 1: count; 0: none */
    uint64_t split_seed;
    struct tr_where split_at;     /* where split: was given, for its errors */
    int norm;                     /* enum tr_norm_kind */
    double scale;
};

/* Parses path into def; 0 or TR_EINVAL / TR_EIO with every problem in diag. */
int tr_data_def_parse(const char *path, struct tr_data_def *def, struct tr_diag *diag);
void tr_data_def_free(struct tr_data_def *def);

#endif
