/* trainrun's cache folder and the token cache in it (DESIGN.md §5), internal to src/data/: each
 * split's tokens kept between runs as a shard in $XDG_CACHE_HOME/trainrun/tokens/, keyed by a
 * sha256 of everything that decides the ids (dataset.c builds the key). A shard is mapped
 * read-only and used in place; one missing, damaged or made from other inputs is a miss: the
 * caller tokenises and writes it again. */
#ifndef TR_DATA_CACHE_H
#define TR_DATA_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/sha256.h"

/* Part of every key: bump it when a shard's layout changes or a tokenizer's ids do, so that no
 * shard of the old kind is ever read. trainrun's version is in the key too. */
#define TR_SHARD_VERSION 1

/* trainrun's cache folder joined to sub ("datasets/iris", "tokens"): $XDG_CACHE_HOME/trainrun,
 * or ~/.cache/trainrun when XDG_CACHE_HOME is unset or relative (the XDG spec: a relative path
 * is ignored); NULL when HOME is not set either. Caller frees. */
char *tr_cache_path(const char *sub);
/* mkdir -p: 0, or the errno of the folder that could not be made. */
int tr_make_folders(const char *path);
/* The token cache's folder, tr_cache_path("tokens"), made when missing; NULL when
 * TRAINRUN_NO_CACHE is set (to anything but "" or "0"), or, with a warning, when there is no
 * cache folder or it cannot be made. Caller frees. */
char *tr_token_cache_dir(struct tr_diag *warnings);

/* A key: fields hashed with their lengths, so that no two lists of fields hash alike. */
void tr_shard_key_begin(struct tr_sha256 *k);   /* the shard version and trainrun's version */
void tr_shard_key_text(struct tr_sha256 *k, const char *s);   /* NULL differs from "" */
void tr_shard_key_int(struct tr_sha256 *k, int64_t v);

enum tr_shard_kind {
    TR_SHARD_STREAM = 1,              /* language modelling: ntokens ids, one running text */
    TR_SHARD_SAMPLES = 2,             /* classification: n samples and their labels */
};

/* What a shard holds: a stream of ntokens ids, or n samples, sample i being tokens[offsets[i],
 * offsets[i+1]) of class labels[i]. An empty array is NULL. */
struct tr_shard {
    int kind;                         /* enum tr_shard_kind */
    int64_t n, ntokens;
    const int32_t *tokens;
    const int64_t *offsets;           /* samples: n + 1, from 0 to ntokens; NULL for a stream */
    const int32_t *labels;            /* samples: n; NULL for a stream */
    void *map;                        /* tr_shard_open: the mapping the arrays point into */
    size_t map_bytes;
};

/* Maps the shard at path when it holds what key names: 1, with every array checked (offsets in
 * order and ending at ntokens, ids below vocab, labels below nclasses), so that nothing read
 * from it is trusted unchecked. 0 when it is not there, or (with a warning added to warnings)
 * when it cannot be read or is damaged: the caller then tokenises and writes it again. */
int tr_shard_open(const char *path, const unsigned char key[32], int kind, int64_t vocab, int nclasses,
                  struct tr_shard *s, struct tr_diag *warnings);
/* Writes s (map unused) to path for key, atomically: a temporary file in the same folder (made
 * when missing), flushed to disk, then renamed over path, so that a reader sees a whole shard or
 * none and two runs writing the same one both succeed. A shard that cannot be written is a
 * warning, not an error: the data was loaded, only the next run tokenises again. */
void tr_shard_write(const char *path, const unsigned char key[32], const struct tr_shard *s,
                    struct tr_diag *warnings);

/* Frees p unless it points into the mapping map (bytes long): what came from a shard is the
 * file's, not the heap's. */
void tr_cache_free(void *p, const void *map, size_t bytes);
void tr_cache_unmap(void *map, size_t bytes);   /* NULL is harmless */

#endif
