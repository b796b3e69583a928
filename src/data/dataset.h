/* The data stage (DESIGN.md §5), second in the pipeline: the recipe's data section becomes
 * three in-memory splits of normalised float features and integer labels, read from CSV or IDX
 * files whose decompressed content is checked against the sha256 that the definition pins.
 * The trainer reads struct tr_data and never the files; the loader (loader.h) batches a split. */
#ifndef TR_DATASET_H
#define TR_DATASET_H

#include <stdint.h>

#include "core/error.h"
#include "recipe/recipe.h"

#define TR_DATA_RANK_MAX 4

/* One split: n samples of shape dims[0..rank), row-major, sample after sample; or, for text,
 * n token sequences. */
struct tr_split {
    int64_t n;
    int rank;
    int64_t dims[TR_DATA_RANK_MAX];   /* per sample: [64] for digits, [1, 28, 28] for images */
    float *x;                         /* n × prod(dims) floats, normalised; NULL for text */
    int32_t *y;                       /* n labels in [0, nclasses); NULL for language modelling */
    /* Text (tr_data.kind != TR_DATA_FEATURES): */
    int32_t *tokens;                  /* every token id of the split, sample after sample */
    int64_t *offsets;                 /* classification: n + 1; sample i is tokens[offsets[i],
                                       * offsets[i+1]), [CLS] … [SEP] cut to model.max_len */
    int64_t window;                   /* language modelling: sample i is the window + 1 tokens
                                       * from tokens[i·window] (inputs, then shifted targets) */
    int64_t ntokens;
};

enum tr_norm_kind { TR_NORM_NONE, TR_NORM_SCALE, TR_NORM_STANDARDIZE };

/* The transform applied to every split, kept so that inference can apply it again. */
struct tr_norm {
    int kind;                         /* enum tr_norm_kind */
    double scale;                     /* TR_NORM_SCALE: x / scale */
    int64_t nfeatures;                /* TR_NORM_STANDARDIZE: (x - mean[f]) / std[f], */
    float *mean, *std;                /*   the train split's statistics (std 0 counts as 1) */
};

enum tr_data_kind {
    TR_DATA_FEATURES,                 /* csv, idx: float features and a label */
    TR_DATA_TEXT_CLASSES,             /* tsv, jsonl: a text and a label */
    TR_DATA_TEXT_LM,                  /* text: running text for language modelling */
};

struct tr_tokenizer;

struct tr_data {
    int kind;                         /* enum tr_data_kind */
    struct tr_split train, valid, test;   /* valid and test may hold n = 0 */
    struct tr_tokenizer *tokenizer;   /* text: the one that made the tokens (owned) */
    int64_t vocab;                    /* text: its vocabulary size */
    int32_t pad_id;                   /* text: the padding id ([PAD], or 0) */
    int nclasses;
    char **class_names;               /* nclasses names, then NULL */
    char name[64];
    struct tr_norm norm;
};

/* The data of a recipe: data.dataset names datasets_dir/<name>/dataset.yaml; otherwise
 * data.train (and data.valid, data.test when given) name CSV files inline. An inline set gets
 * the shipped definitions' split, 10 % valid and 20 % test cut from the train file (each only
 * when data.valid / data.test name no file) with split seed 0, and is not normalised.
 * Returns 0, or TR_EINVAL (bad definition or content), TR_EIO (a file cannot be read) or
 * TR_ENOMEM, with the reasons in diag; then *out is zeroed (tr_data_free is harmless). Every
 * failure is a data error: the caller exits with TR_EXIT_DATA. */
int tr_data_load(const struct tr_recipe *r, const char *datasets_dir, struct tr_data *out,
                 struct tr_diag *diag);
/* The same from a definition file (dataset.yaml, or any name); relative sources are found
 * beside it. */
int tr_data_load_definition(const char *path, struct tr_data *out, struct tr_diag *diag);
void tr_data_free(struct tr_data *d);
/* prod(dims): the floats of one sample. */
int64_t tr_split_features(const struct tr_split *s);

/* dataset.yaml, one mapping (unknown keys are errors, with a "did you mean"):
 *
 *   name: digits                    # optional; when loaded by name it must match the folder
 *   description, licence, homepage  # free text for people
 *   package: dataset-fashion-mnist  # the Debian package whose files these are: named when
 *                                   #   a file is missing
 *   format: csv | idx
 *   source: digits.csv.gz           # one file holding every sample, split below; or
 *   sha256: <64 hex>                #   (sha256 always pins the DECOMPRESSED content)
 *   train: {source: …, sha256: …}   # a file a split (csv); for idx each split is
 *   valid: …                        #   {images: {source, sha256}, labels: {source, sha256}}
 *   test: …                         #   (train is then required; valid and test optional)
 *   header: auto | none | sklearn | names   # csv; sklearn: `n_samples,n_features,class…`;
 *                                   #   names: one line of column names; auto: guess
 *   label: last | first | <0-based column> | <column name>   # csv; default last
 *   num_classes: 10                 # at least one of these two; they must agree
 *   class_names: [...]
 *   shape: [1, 8, 8]                # per-sample shape; its product is the feature count
 *                                   #   (default: [features] for csv, [1, rows, cols] for idx)
 *   split: {valid: 0.1, test: 0.2, seed: 0}   # cut from the train pool (or the one source)
 *                                   #   a number < 1 is a fraction of the pool, ≥ 1 a count;
 *                                   #   the pool is shuffled with the split's own seed
 *                                   #   (splitmix64 + Fisher–Yates, shuffle.h), never the
 *                                   #   recipe's: every run sees the same test set
 *   normalize: none | standardize | {scale: 16}
 *
 * Sources are paths, relative to the definition's folder, or file:// URLs. Every split keeps
 * its samples in file order. */

#endif
