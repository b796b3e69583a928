/* safetensors files: the weights a run starts from (model.init) and the checkpoints it
 * writes. The reader trusts nothing in the file: every length, offset and shape is checked
 * before a pointer into the data is handed out. The writer replaces its target atomically.
 * Format: https://github.com/huggingface/safetensors (8-byte LE header length, JSON, data). */
#ifndef TR_SAFETENSORS_H
#define TR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

/* The largest header accepted, as in the reference implementation: a header is a few
 * hundred bytes per tensor, so this is ~200k tensors, and it caps what jansson allocates. */
#define TR_ST_MAX_HEADER 100000000u

/* One tensor. Read: name and data belong to the struct tr_safetensors (data points into
 * the file or buffer) and last until tr_st_close. data is aligned to the element size when
 * the file was written with its header padded to 8 bytes and its tensors ordered by
 * element size (ours and the Python package's are); a file from elsewhere may leave it
 * unaligned: memcpy rather than cast when unsure.
 * Written: the caller's; bytes must equal numel·tr_dtype_size(dtype). */
struct tr_st_tensor {
    const char *name;
    enum tr_dtype dtype;
    int rank;                       /* 0 (a scalar) to TR_MAX_RANK */
    int64_t shape[TR_MAX_RANK];
    const void *data;
    size_t bytes;
    const char *other_dtype;        /* dtype TR_ST_OTHER: the format's name ("I64"); else NULL */
};

/* Read with TR_ST_ANY_DTYPE, a tensor of a whole-byte dtype the engine has no kernels for
 * (I64, BOOL, I8, U16, …: the position_ids and mask buffers of other frameworks' checkpoints)
 * is listed with this dtype, so that a reader can name or skip it; never pass one to a kernel
 * or to tr_dtype_size. Without the flag such a file is refused. */
#define TR_ST_OTHER ((enum tr_dtype)TR_NDTYPES)
enum { TR_ST_ANY_DTYPE = 1 };

struct json_t;

struct tr_safetensors {
    struct tr_st_tensor *tensors;   /* in the order of their data in the file */
    int n;
    const char **metadata;          /* key, value, …, NULL from "__metadata__"; never NULL if open */
    int n_metadata;                 /* pairs */
    /* private */
    struct tr_st_tensor **by_name;  /* the tensors sorted by name, for tr_st_find */
    struct json_t *header;          /* owns the strings above */
    void *mapping;                  /* the file, mapped; NULL when parsed from a caller's buffer */
    size_t mapping_size;
};

/* Maps the file at path read-only and parses it. mmap rather than read: a checkpoint is
 * gigabytes and the tensors are used in place, so reading would double the memory and the
 * time. The price is SIGBUS if another process truncates the file while it is open; our
 * writer never does (it renames a new file over the old, and a mapping keeps the old one).
 * Returns 0, or TR_EIO / TR_EINVAL / TR_ENOMEM with a sentence in d naming the file.
 * On failure *st is left empty; tr_st_close on it is harmless. */
int tr_st_open(struct tr_safetensors *st, const char *path, struct tr_diag *d);

/* Parses a whole file held in buf[0..len); name is what messages call it (NULL: "<buffer>").
 * The tensors' data point into buf, which must outlive st. Same returns as tr_st_open. */
int tr_st_parse(struct tr_safetensors *st, const void *buf, size_t len, const char *name,
                struct tr_diag *d);
/* The same two with flags (TR_ST_ANY_DTYPE, or 0). */
int tr_st_open_with(struct tr_safetensors *st, const char *path, unsigned flags, struct tr_diag *d);
int tr_st_parse_with(struct tr_safetensors *st, const void *buf, size_t len, const char *name,
                     unsigned flags, struct tr_diag *d);

/* The tensor called name, or NULL. O(log n). */
const struct tr_st_tensor *tr_st_find(const struct tr_safetensors *st, const char *name);

/* The "__metadata__" value for key, or NULL. */
const char *tr_st_metadata(const struct tr_safetensors *st, const char *key);

void tr_st_close(struct tr_safetensors *st);

/* Writes n tensors and the metadata (key, value, …, NULL; or NULL for none) to path,
 * atomically: a temporary "path.tmp.<pid>" is written, flushed, fsynced and renamed over
 * path, then the directory is fsynced (a temporary left by a crashed run with the same pid
 * is replaced). On failure the temporary file is removed and a file already at path is
 * left as it was (except when only the final directory fsync fails: the new file is then
 * in place, but may not survive a power cut; d says so).
 * Tensors are laid out by element size, largest first, then by name: with the header padded
 * so the data starts at a multiple of 8 bytes, every tensor is then aligned to its element
 * size without holes (the format forbids them), and the same tensors give the same bytes
 * whatever order the caller lists them in. Names must be unique, valid UTF-8 and not
 * "__metadata__"; a header over TR_ST_MAX_HEADER, which readers refuse, is not written.
 * Returns 0, TR_EINVAL (bad input: nothing is created), TR_EIO or TR_ENOMEM. */
int tr_st_write(const char *path, const struct tr_st_tensor *tensors, int n,
                const char *const *metadata_kv, struct tr_diag *d);
/* The same a piece at a time, for files larger than one wants in memory: tensors' data unused,
 * fill(ctx, i, from, buf, bytes) puts bytes [from, from + bytes) of tensor i in buf, pieces of
 * TR_ST_PIECE bytes (a tensor's last one shorter; an empty tensor one piece of 0), called for
 * i = 0 … n − 1 in that order whatever the file's layout; then finish(ctx) (NULL: none) may give
 * the metadata again with values only it knows, each as long as metadata_kv's placeholder (a
 * checksum of the bytes filled), and the header is written again. Atomic as tr_st_write. */
#define TR_ST_PIECE ((size_t)4 << 20)
typedef int (*tr_st_fill_fn)(void *ctx, int i, size_t from, void *buf, size_t bytes, struct tr_diag *d);
int tr_st_write_each(const char *path, const struct tr_st_tensor *tensors, int n, const char *const *metadata_kv,
                     tr_st_fill_fn fill, void *ctx, const char *const *(*finish)(void *ctx), struct tr_diag *d);

/* "F32", "BF16", …: the format's name for a dtype. */
const char *tr_st_dtype_name(enum tr_dtype t);

#endif
