/* The data stage (DESIGN.md §5), second in the pipeline: the recipe's data section becomes
 * three in-memory splits of normalised float features and integer labels, read from CSV (csv.h)
 * or IDX files, or of token ids, read from TSV, JSON Lines or plain text through a tokenizer (once:
 * the token cache keeps them for later runs); every file's decompressed content is checked
 * against the sha256 that the definition pins.
 * The trainer reads struct tr_data and never the files; the loader (loader.h) batches a split. */
#ifndef TR_DATASET_H
#define TR_DATASET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "recipe/recipe.h"

#define TR_DATA_RANK_MAX 4

/* One split: n samples of shape dims[0..rank), row-major, sample after sample; or, for text,
 * n token sequences. */
struct tr_split {
    int64_t n;
    int rank;
    int64_t dims[TR_DATA_RANK_MAX];   /* per sample: [64] for digits, [1, 28, 28] for images */
    float *x;                         /* n × prod(dims) floats, normalised; NULL for text and
                                       * for images kept as bytes (pixels) */
    uint8_t *pixels;                  /* IDX images: n × prod(dims) grey levels as stored, a
                                       * quarter of the floats' memory; tr_split_rows gives
                                       * them normalised by pixel_norm, as x would hold them */
    struct {
        int kind;                     /* enum tr_norm_kind */
        float scale;                  /* TR_NORM_SCALE */
        const float *mean, *std;      /* TR_NORM_STANDARDIZE: tr_data.norm's arrays */
    } pixel_norm;
    int32_t *y;                       /* n labels in [0, nclasses); NULL for language modelling */
    /* Text (tr_data.kind != TR_DATA_FEATURES): */
    int32_t *tokens;                  /* every token id of the split, sample after sample */
    int64_t *offsets;                 /* classification: n + 1; sample i is tokens[offsets[i],
                                       * offsets[i+1]), [CLS] … [SEP] cut to model.max_len */
    int64_t window;                   /* language modelling: sample i is the window + 1 tokens
                                       * from tokens[i·window] (inputs, then shifted targets) */
    int64_t ntokens;
    void *map;                        /* text from the token cache: its shard, mapped read-only
                                       * (map_bytes long), into which tokens, offsets and y may
                                       * point (read them, never write them); NULL otherwise.
                                       * tr_data_free unmaps it and frees only what lies outside */
    size_t map_bytes;
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

/* One file a load read, what identifies it: a run records them (data-sources.json) so that
 * `--if-data-changed` can tell whether anything changed since. */
struct tr_data_origin {
    char *source;                     /* the URL as the definition gives it, or the file's path */
    char *path;                       /* the file read: for a URL, the download cache's copy */
    char sha256[65];                  /* of the content as definitions pin it (decompressed) */
    char *etag, *last_modified;       /* a URL's validators, as the server last gave them */
    bool downloaded;                  /* a URL downloaded by this load (not a 304) */
};

struct tr_data {
    int kind;                         /* enum tr_data_kind */
    struct tr_split train, valid, test;   /* valid and test may hold n = 0 */
    struct tr_tokenizer *tokenizer;   /* text: the one that made the tokens (owned) */
    int64_t vocab;                    /* text: its vocabulary size */
    int32_t pad_id;                   /* text: the padding id ([PAD], or 0) */
    int tokenizer_kind;               /* text: enum tr_tokenizer_kind */
    char *tokenizer_files[2];         /* text: the vocabulary and merges files read (owned, or NULL),
                                       * for the run folder's copies */
    int nclasses;
    char **class_names;               /* nclasses names, then NULL */
    char name[64];
    struct tr_norm norm;
    struct tr_diag warnings;          /* what went wrong without stopping the load (the token
                                       * cache could not be written, a damaged shard was made
                                       * again, a download was retried): the caller shows them */
    struct tr_data_origin *origins;   /* every file read, in the definition's order, once each */
    int norigins;
};

/* The data of a recipe: data.dataset names datasets_dir/<name>/dataset.yaml; otherwise
 * data.train (and data.valid, data.test when given) name files inline, csv, tsv, jsonl or text
 * (inline.c). An inline set gets the shipped definitions' split, 10 % valid and 20 % test cut
 * from the train file (each only when data.valid / data.test name no file; not for text) with
 * split seed 0, and is not normalised; inline tsv and jsonl classes are the train file's labels.
 * Returns 0, or TR_EINVAL (bad definition or content), TR_EIO (a file cannot be read) or
 * TR_ENOMEM, with the reasons in diag; then *out is zeroed (tr_data_free is harmless). Every
 * failure is a data error: the caller reports it as TR_EDATA (exit status 4). */
int tr_data_load(const struct tr_recipe *r, const char *datasets_dir, struct tr_data *out,
                 struct tr_diag *diag);
/* The recipe's inline data checked as tr_data_load would check it before reading a file (its
 * formats, fields and options; trainrun check): 0, or TR_EINVAL with the reasons at their
 * recipe keys in diag. 0 for a recipe without inline data. */
int tr_data_check_inline(const struct tr_recipe *r, struct tr_diag *diag);
/* tr_data_load with the downloads' progress on progress (NULL: quiet, for --quiet), where
 * tr_data_load shows it on stderr. A signal during a download or a prepare script ends the load
 * with TR_EINTERRUPTED (core/stop.h), which is no data error. */
int tr_data_load_showing(const struct tr_recipe *r, const char *datasets_dir, FILE *progress, struct tr_data *out,
                         struct tr_diag *diag);
/* The same from a definition file (dataset.yaml, or any name); relative sources are found
 * beside it. Text is read with the definition's own tokenizer: and model.max_len's default. */
int tr_data_load_definition(const char *path, struct tr_data *out, struct tr_diag *diag);
void tr_data_free(struct tr_data *d);

/* The data refresh alone: finds the recipe's definition, fetches its URL sources into the
 * download cache (a conditional request each: unchanged files are not downloaded again), runs its
 * prepare script when needed, and fills out->origins, out->name and out->warnings; nothing is
 * read or tokenised. Returns like tr_data_load (every failure is a data error). */
int tr_data_refresh(const struct tr_recipe *r, const char *datasets_dir, struct tr_data *out,
                    struct tr_diag *diag);
/* d's origins as data-sources.json holds them:
 *   {"version": 1, "dataset": NAME, "sources": [{"source", "path", "sha256", "etag",
 *    "last_modified"}, …]}   (etag and last_modified null for local files). New reference. */
json_t *tr_data_sources_json(const struct tr_data *d);
/* Writes tr_data_sources_json(d) to dir/data-sources.json (atomically): 0, or TR_EIO with the
 * reason in diag. The trainer calls it as it fills a new run folder. */
int tr_data_sources_write(const struct tr_data *d, const char *dir, struct tr_diag *diag);
/* Whether two data-sources.json documents name the same sources with the same sha256 each, in
 * any order (the ETags may differ: a server may change them without changing the bytes). */
bool tr_data_sources_same(const json_t *a, const json_t *b);
/* Whether d reads the same bytes as the run in dir began with (its data-sources.json), file by
 * file in the definition's order, wherever the files are now (a data set folder moved is the
 * same data): NULL (also when dir has no record, from an older trainrun), or what differs in
 * what (size bytes) — the first source with another sha256, or "the number of files". */
const char *tr_data_changed_since(const struct tr_data *d, const char *dir, char *what, size_t size);
/* d's warnings, one "trainrun: warning: …" line each, on out (before a run's log exists). */
void tr_data_print_warnings(const struct tr_data *d, FILE *out);
/* A file a recipe names (a tokenizer's vocabulary): as given when it is there (relative to the
 * current folder), else in the data sets folder dir, where the shipped vocabularies live, so
 * that vocab/bert-base-uncased/vocab.txt works from anywhere. NULL for NULL; caller frees. */
char *tr_data_find_file(const char *path, const char *dir);
/* prod(dims): the floats of one sample. */
int64_t tr_split_features(const struct tr_split *s);

/* Samples ids[0..n) of a feature split, normalised, into out (n × tr_split_features floats):
 * x's rows, or pixels' through pixel_norm — the same floats either way. */
void tr_split_rows(const struct tr_split *s, const int64_t *ids, int64_t n, float *out);

/* dataset.yaml, one mapping (unknown keys are errors, with a "did you mean"; so are keys that
 * mean nothing for the format, such as label: for idx or tokenizer: for csv):
 *
 *   name: digits                    # optional; when loaded by name it must match the folder
 *   description, licence, homepage  # free text for people
 *   package: dataset-fashion-mnist  # the Debian package whose files these are: named when
 *                                   #   a file is missing
 *   prepare: prepare                # a script in the definition's folder that makes the files:
 *                                   #   run as `/bin/sh <folder>/prepare DIR`, DIR being
 *                                   #   $XDG_CACHE_HOME/trainrun/datasets/<name> (~/.cache/…
 *                                   #   when unset), where relative sources are then found; run
 *                                   #   only when a source is missing or fails its sha256, then
 *                                   #   checked again. Its stdout is dropped, its stderr quoted
 *                                   #   when it fails.
 *   format: csv | tsv | jsonl | text | idx
 *   source: digits.csv.gz           # one file holding every sample, split below; or
 *                                   #   an https:// or http:// URL, fetched into the download
 *                                   #   cache (fetch.h) and read from there; or
 *   sha256: <64 hex>                #   (sha256 always pins the DECOMPRESSED content)
 *   train: {source: …, sha256: …}   # a file a split (csv); for idx each split is
 *   valid: …                        #   {images: {source, sha256}, labels: {source, sha256}}
 *   test: …                         #   (train is then required; valid and test optional);
 *                                   #   tsv, jsonl, text: a split may be a list of
 *                                   #   {source, sha256, lines} read in order and joined, and
 *                                   #   two splits may name the same file
 *     lines: [first, last]          # text, jsonl: only these lines of the file (1-based, both
 *                                   #   read; the file must reach last)
 *   header: auto | true | false | sklearn   # csv (names, none: true, false); sklearn:
 *                                   #   `n_samples,n_features,class…`; true: one line of column
 *                                   #   names; auto: a word above a number (csv.c's rule).
 *                                   #   tsv: always names (its first line names the fields)
 *   missing: refuse | drop | zero | mean   # csv: an empty or NA cell (csv.h); default refuse
 *   label: last | first | <column, 0-based or -1 from the end> | <column name>   # csv; last.
 *                                   #   tsv, jsonl: the field holding the class, a name from
 *                                   #   class_names (or, with only num_classes, a number)
 *   text: text                      # tsv, jsonl: the field holding the text
 *   num_classes: 10                 # at least one of these two (required for tsv, jsonl;
 *                                   #   csv without: class numbers, or its labels' names);
 *   class_names: [...]              #   they must agree
 *   shape: [1, 8, 8]                # per-sample shape; its product is the feature count
 *                                   #   (default: [features] for csv, [1, rows, cols] for idx)
 *   split: {valid: 0.1, test: 0.2, seed: 0}   # cut from the train pool (or the one source)
 *                                   #   a number < 1 is a fraction of the pool, ≥ 1 a count;
 *                                   #   the pool is shuffled with the split's own seed
 *                                   #   (splitmix64 + Fisher–Yates, shuffle.h), never the
 *                                   #   recipe's: every run sees the same test set. Not text.
 *   normalize: none | standardize | {scale: 16}   # csv, idx
 *   tokenizer: {kind: wordpiece, vocab: vocab.txt, merges: …, lowercase: true}
 *                                   # tsv, jsonl, text: the tokenizer when the recipe's
 *                                   #   data.tokenizer.kind is none; paths relative to the
 *                                   #   definition's folder
 *
 * Sources are paths, relative to the definition's folder (or the prepared folder), file:// URLs
 * (read in place), or https:// and http:// URLs (fetched, fetch.h; other schemes are refused).
 * A prepare: script is named only by a definition outside trainrun's cache, and lies outside it
 * too: nothing fetched is ever run. Every split keeps its samples in file order.
 *
 * Text: tsv is a header line of field names, then a sample a line, a TAB between fields, no
 * quoting; jsonl an object a line (jansson); text is running text. Files must be UTF-8. A
 * classification sample becomes [CLS] tokens [SEP] (ids from the tokenizer's vocabulary; only
 * the tokens for one without them), cut to model.max_len with [SEP] kept last. Language
 * modelling tokenises a split's files, each ending in a newline (one is added where it lacks
 * it; gpt2-bpe puts <|endoftext|> between files instead), as one stream of ntokens, cut into
 * n = (ntokens − 1) / model.max_len windows. The recipe's data.tokenizer (unless its kind is
 * none) comes before the definition's tokenizer:; its relative paths are looked for in the
 * current folder, then in the datasets folder (vocab/bert-base-uncased/vocab.txt).
 *
 * Token cache (cache.h): each split's tokens, before the cut to model.max_len and the windows,
 * are kept in $XDG_CACHE_HOME/trainrun/tokens/<name>.<split>.<key>.shard (~/.cache/… when
 * unset), the key a sha256 of the files' content and lines:, the fields and class_names, and
 * the tokenizer's kind, lowercase and files' content. A later load maps the shard read-only
 * (tr_split.map) instead of tokenising; a damaged shard, or one that cannot be written, is a
 * warning (tr_data.warnings), never an error. TRAINRUN_NO_CACHE=1 turns the cache off. */

#endif
