/* safetensors reading and writing (safetensors.h). Reading checks, in this order: the
 * 8-byte length against the file and the 100 MB cap, the JSON, each entry's fields, dtype,
 * shape and offsets, then that the tensors tile the data buffer exactly. Every message
 * starts with the file's name; names from the file are quoted with control bytes escaped. */
#include "core/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic.h"
#include "core/error.h"

static const char *const dtype_names[TR_NDTYPES] = {"F32", "BF16", "F16", "I32", "U8", "F64"};

/* Dtypes the format defines that the engine has no kernels for: named as unsupported rather
 * than unknown, so a user knows the file is fine and the engine is the limit. With
 * TR_ST_ANY_DTYPE the whole-byte ones are listed as TR_ST_OTHER (a checkpoint's I64
 * position_ids, a BOOL mask buffer); the packed sub-byte ones (size 0) never are. */
static const struct { const char *name; size_t size; } other_dtypes[] = {
    {"BOOL", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2}, {"U32", 4}, {"I64", 8}, {"U64", 8},
    {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"F6_E2M3", 0}, {"F6_E3M2", 0}, {"F4", 0},
    {"C64", 8},
};

#define QUOTED_MAX 72   /* a quoted name in a message: at most ~64 bytes of it, escaped */

const char *tr_st_dtype_name(enum tr_dtype t)
{
    return t < TR_NDTYPES ? dtype_names[t] : "?";
}

/* "name: " then the sentence, added to d. Returns code, so that callers can `return fail(…)`. */
__attribute__((format(printf, 4, 5)))
static int fail(struct tr_diag *d, int code, const char *file, const char *fmt, ...)
{
    if (!d)
        return code;
    va_list ap;
    va_start(ap, fmt);
    char *sentence = tr_vstrdup_printf(fmt, ap);
    va_end(ap);
    tr_fail(d, code, "%s: %s", file, sentence);
    free(sentence);
    return code;
}

/* s for a message: control bytes escaped as \xNN, cut at a UTF-8 character boundary after
 * ~64 bytes with "..." — a hostile name must not forge lines or flood the terminal. */
static const char *quote(const char *s, char *out, size_t size)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o >= size - 8) {
            if ((*p & 0xc0) == 0x80) {   /* mid-character: drop its first bytes too */
                while (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0x80)
                    o--;
                if (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0xc0)
                    o--;
            }
            memcpy(out + o, "...", 4);
            return out;
        }
        if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
    return out;
}

static void format_shape(const int64_t *shape, int rank, char *out, size_t n)
{
    size_t len = (size_t)snprintf(out, n, "[");
    for (int i = 0; i < rank && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < n)
        snprintf(out + len, n - len, "]");
}

/* numel·size of a shape, or -1 when that overflows 64 bits. Zero dimensions are left out of
 * the overflow check's product, so that [0, 2^62, 2^62] is refused too: its strides would
 * overflow wherever it is used, even though it holds nothing. */
static int64_t shape_bytes(const int64_t *shape, int rank, size_t elem)
{
    int64_t product = (int64_t)elem;
    bool empty = false;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == 0)
            empty = true;
        else if (__builtin_mul_overflow(product, shape[i], &product))
            return -1;
    }
    return empty ? 0 : product;
}

/* ---- reading ------------------------------------------------------------------------------ */

struct parse_ctx {
    const char *file;
    struct tr_diag *d;
    size_t data_len;   /* the byte buffer after the header */
    unsigned flags;    /* TR_ST_ANY_DTYPE */
};

/* The bytes of one element and the format's name of a tensor's dtype. */
static size_t element_size(const struct tr_st_tensor *t)
{
    if (t->dtype != TR_ST_OTHER)
        return tr_dtype_size(t->dtype);
    for (size_t i = 0; i < sizeof other_dtypes / sizeof *other_dtypes; i++)
        if (!strcmp(t->other_dtype, other_dtypes[i].name))
            return other_dtypes[i].size;
    return 0;
}

static const char *format_dtype(const struct tr_st_tensor *t)
{
    return t->dtype == TR_ST_OTHER ? t->other_dtype : dtype_names[t->dtype];
}

/* Where a tensor's bytes are, before the tiling check; index into the tensors array. */
struct span {
    uint64_t begin, end;
    int index;
    const char *name;
};

__attribute__((format(printf, 3, 4)))
static int tensor_fail(const struct parse_ctx *c, const char *name, const char *fmt, ...)
{
    char sentence[512], q[QUOTED_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sentence, sizeof sentence, fmt, ap);
    va_end(ap);
    return fail(c->d, TR_EINVAL, c->file, "tensor '%s': %s",
                quote(name, q, sizeof q), sentence);
}

static int parse_dtype(const struct parse_ctx *c, const char *name, const char *s,
                       struct tr_st_tensor *out)
{
    char q[QUOTED_MAX];
    for (int t = 0; t < TR_NDTYPES; t++)
        if (!strcmp(s, dtype_names[t])) {
            out->dtype = (enum tr_dtype)t;
            return 0;
        }
    for (size_t i = 0; i < sizeof other_dtypes / sizeof *other_dtypes; i++) {
        if (strcmp(s, other_dtypes[i].name))
            continue;
        if ((c->flags & TR_ST_ANY_DTYPE) && other_dtypes[i].size) {
            out->dtype = TR_ST_OTHER;
            out->other_dtype = other_dtypes[i].name;
            return 0;
        }
        return tensor_fail(c, name, "dtype %s is not supported (supported: F32, BF16, F16, "
                           "F64, I32, U8)", s);
    }
    return tensor_fail(c, name, "unknown dtype '%s'", quote(s, q, sizeof q));
}

static int parse_shape(const struct parse_ctx *c, const char *name, json_t *shape,
                       struct tr_st_tensor *t)
{
    if (!json_is_array(shape))
        return tensor_fail(c, name, "shape is not an array");
    size_t rank = json_array_size(shape);
    for (size_t i = 0; i < rank; i++)
        if (!json_is_integer(json_array_get(shape, i)))
            return tensor_fail(c, name, "shape is not an array of integers");
    if (rank > TR_MAX_RANK)
        return tensor_fail(c, name, "rank %zu is more than the %d supported", rank, TR_MAX_RANK);
    t->rank = (int)rank;
    for (int i = 0; i < t->rank; i++) {
        t->shape[i] = json_integer_value(json_array_get(shape, (size_t)i));
        if (t->shape[i] < 0)
            return tensor_fail(c, name, "shape dimension %d is negative (%lld)", i,
                               (long long)t->shape[i]);
    }
    return 0;
}

static int parse_offsets(const struct parse_ctx *c, const char *name, json_t *offsets,
                         const struct tr_st_tensor *t, struct span *sp)
{
    json_t *first = json_array_get(offsets, 0), *second = json_array_get(offsets, 1);
    if (!json_is_array(offsets) || json_array_size(offsets) != 2 || !json_is_integer(first) ||
        !json_is_integer(second))
        return tensor_fail(c, name, "data_offsets is not an array of two integers");
    long long begin = json_integer_value(first), end = json_integer_value(second);
    if (begin < 0 || end < 0)
        return tensor_fail(c, name, "data_offsets [%lld, %lld] are negative", begin, end);
    if (end < begin)
        return tensor_fail(c, name, "data_offsets [%lld, %lld] end before they begin", begin, end);
    char shape[160];
    format_shape(t->shape, t->rank, shape, sizeof shape);
    int64_t need = shape_bytes(t->shape, t->rank, element_size(t));
    if (need < 0)
        return tensor_fail(c, name, "shape %s of %s is too large: its size in bytes overflows "
                           "64 bits", shape, format_dtype(t));
    if (end - begin != need)
        return tensor_fail(c, name, "data_offsets [%lld, %lld] hold %lld bytes, but shape %s of "
                           "%s needs %lld", begin, end, end - begin, shape,
                           format_dtype(t), (long long)need);
    if ((uint64_t)end > c->data_len)
        return tensor_fail(c, name, "data_offsets [%lld, %lld] run past the end of the %zu-byte "
                           "data buffer; the file may be truncated", begin, end, c->data_len);
    sp->begin = (uint64_t)begin;
    sp->end = (uint64_t)end;
    return 0;
}

static int parse_entry(const struct parse_ctx *c, const char *name, json_t *entry,
                       struct tr_st_tensor *t, struct span *sp)
{
    if (!json_is_object(entry))
        return tensor_fail(c, name, "entry is not an object");
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    for (int i = 0; i < 3; i++)
        if (!json_object_get(entry, fields[i]))
            return tensor_fail(c, name, "missing field '%s'", fields[i]);
    json_t *dtype = json_object_get(entry, "dtype");
    if (!json_is_string(dtype))
        return tensor_fail(c, name, "dtype is not a string");
    int rc = parse_dtype(c, name, json_string_value(dtype), t);
    if (!rc)
        rc = parse_shape(c, name, json_object_get(entry, "shape"), t);
    if (!rc)
        rc = parse_offsets(c, name, json_object_get(entry, "data_offsets"), t, sp);
    t->name = name;
    t->bytes = (size_t)(sp->end - sp->begin);
    return rc;
}

static int parse_metadata(const struct parse_ctx *c, json_t *meta, struct tr_safetensors *st)
{
    char q[QUOTED_MAX];
    if (json_is_null(meta))   /* as the reference reader: null is no metadata */
        return 0;
    if (!json_is_object(meta))
        return fail(c->d, TR_EINVAL, c->file, "__metadata__ is not an object");
    size_t n = json_object_size(meta);
    st->metadata = calloc(2 * n + 1, sizeof *st->metadata);
    if (!st->metadata)
        return fail(c->d, TR_ENOMEM, c->file, "out of memory");
    const char *key;
    json_t *value;
    json_object_foreach(meta, key, value) {
        if (!json_is_string(value))
            return fail(c->d, TR_EINVAL, c->file,
                        "__metadata__ value of '%s' is not a string", quote(key, q, sizeof q));
        st->metadata[2 * st->n_metadata] = key;
        st->metadata[2 * st->n_metadata + 1] = json_string_value(value);
        st->n_metadata++;
    }
    return 0;
}

static int span_by_offset(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->index - y->index;
}

/* The format forbids holes and overlaps: sorted by offset, each tensor starts where the
 * previous ended, and the last ends where the buffer does (a zero-byte tensor may sit at
 * any boundary). */
static int check_tiling(const struct parse_ctx *c, struct span *spans, int n)
{
    char q1[QUOTED_MAX], q2[QUOTED_MAX];
    qsort(spans, (size_t)n, sizeof *spans, span_by_offset);
    uint64_t covered = 0;
    for (int i = 0; i < n; i++) {
        if (spans[i].begin > covered)
            return fail(c->d, TR_EINVAL, c->file, "no tensor covers bytes "
                        "%llu..%llu of the data buffer (the format allows no holes)",
                        (unsigned long long)covered, (unsigned long long)spans[i].begin);
        if (spans[i].begin < covered)
            return fail(c->d, TR_EINVAL, c->file, "tensors '%s' (bytes %llu..%llu) "
                        "and '%s' (bytes %llu..%llu) overlap",
                        quote(spans[i - 1].name, q1, sizeof q1),
                        (unsigned long long)spans[i - 1].begin,
                        (unsigned long long)spans[i - 1].end,
                        quote(spans[i].name, q2, sizeof q2), (unsigned long long)spans[i].begin,
                        (unsigned long long)spans[i].end);
        covered = spans[i].end;
    }
    if (covered < c->data_len)
        return fail(c->d, TR_EINVAL, c->file, "no tensor covers bytes %llu..%zu "
                    "of the data buffer (the format allows no holes)",
                    (unsigned long long)covered, c->data_len);
    return 0;
}

static int tensor_by_name(const void *a, const void *b)
{
    const struct tr_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* The 8-byte length and the JSON it announces; *header_len is that length. */
static int load_header(const struct parse_ctx *c, const uint8_t *p, size_t len, json_t **root,
                       uint64_t *header_len)
{
    if (len < 8)
        return fail(c->d, TR_EINVAL, c->file, "file is %zu bytes, too short for "
                    "the 8-byte header length", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | p[i];
    if (n > len - 8)
        return fail(c->d, TR_EINVAL, c->file, "header length %llu is more than "
                    "the %zu bytes that follow it; the file is truncated or not safetensors",
                    (unsigned long long)n, len - 8);
    if (n > TR_ST_MAX_HEADER)
        return fail(c->d, TR_EINVAL, c->file, "header length %llu is more than "
                    "the %u-byte limit", (unsigned long long)n, TR_ST_MAX_HEADER);
    if (n == 0 || p[8] != '{')
        return fail(c->d, TR_EINVAL, c->file,
                    "header is not a JSON object (it does not start with '{')");
    json_error_t error;
    *root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &error);
    if (!*root) {
        char q[sizeof error.text + 64];
        quote(error.text, q, sizeof q);   /* jansson quotes the bytes near the error: escape them */
        return fail(c->d, TR_EINVAL, c->file,
                    "header is not valid JSON: %s (byte %d of the header)", q, error.position);
    }
    if (!json_is_object(*root))   /* unreachable after the '{' check; kept for safety */
        return fail(c->d, TR_EINVAL, c->file, "header is not a JSON object");
    *header_len = n;
    return 0;
}

/* The entries of the header into st; spans gets each tensor's offsets. */
static int parse_entries(const struct parse_ctx *c, struct tr_safetensors *st, struct span *spans)
{
    const char *key;
    json_t *value;
    json_object_foreach(st->header, key, value) {
        int rc;
        if (!strcmp(key, "__metadata__")) {
            rc = parse_metadata(c, value, st);
        } else {
            spans[st->n] = (struct span){.index = st->n, .name = key};
            rc = parse_entry(c, key, value, &st->tensors[st->n], &spans[st->n]);
            st->n++;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* The tensors in file order, their data pointers set, and the index by name. */
static int arrange(const struct parse_ctx *c, struct tr_safetensors *st, const struct span *spans,
                   const uint8_t *data)
{
    struct tr_st_tensor *ordered = malloc((size_t)(st->n ? st->n : 1) * sizeof *ordered);
    st->by_name = malloc((size_t)(st->n ? st->n : 1) * sizeof *st->by_name);
    if (!ordered || !st->by_name) {
        free(ordered);
        return fail(c->d, TR_ENOMEM, c->file, "out of memory");
    }
    for (int i = 0; i < st->n; i++) {
        ordered[i] = st->tensors[spans[i].index];
        ordered[i].data = data + spans[i].begin;
    }
    free(st->tensors);
    st->tensors = ordered;
    for (int i = 0; i < st->n; i++)
        st->by_name[i] = &st->tensors[i];
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, tensor_by_name);
    return 0;
}

int tr_st_parse(struct tr_safetensors *st, const void *buf, size_t len, const char *name,
                struct tr_diag *d)
{
    return tr_st_parse_with(st, buf, len, name, 0, d);
}

int tr_st_parse_with(struct tr_safetensors *st, const void *buf, size_t len, const char *name,
                     unsigned flags, struct tr_diag *d)
{
    memset(st, 0, sizeof *st);
    struct parse_ctx c = {.file = name ? name : "<buffer>", .d = d, .flags = flags};
    const uint8_t *p = buf;
    uint64_t header_len = 0;
    int rc = load_header(&c, p, len, &st->header, &header_len);
    struct span *spans = NULL;
    if (!rc) {
        c.data_len = len - 8 - (size_t)header_len;
        size_t entries = json_object_size(st->header);
        st->tensors = calloc(entries ? entries : 1, sizeof *st->tensors);
        spans = calloc(entries ? entries : 1, sizeof *spans);
        if (!st->tensors || !spans)
            rc = fail(d, TR_ENOMEM, c.file, "out of memory");
    }
    if (!rc)
        rc = parse_entries(&c, st, spans);
    if (!rc)
        rc = check_tiling(&c, spans, st->n);
    if (!rc)
        rc = arrange(&c, st, spans, p + 8 + header_len);
    free(spans);
    if (rc) {
        tr_st_close(st);
        return rc;
    }
    if (!st->metadata && !(st->metadata = calloc(1, sizeof *st->metadata))) {
        tr_st_close(st);
        return fail(d, TR_ENOMEM, c.file, "out of memory");
    }
    return 0;
}

int tr_st_open(struct tr_safetensors *st, const char *path, struct tr_diag *d)
{
    return tr_st_open_with(st, path, 0, d);
}

int tr_st_open_with(struct tr_safetensors *st, const char *path, unsigned flags, struct tr_diag *d)
{
    memset(st, 0, sizeof *st);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO: refused below, not waited on */
    if (fd < 0)
        return fail(d, TR_EIO, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        return fail(d, TR_EIO, path, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(d, TR_EINVAL, path, "not a regular file");
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return fail(d, TR_EINVAL, path, "too large to map");
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {   /* mmap refuses length 0; an empty file fails in parse as too short */
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return fail(d, TR_EIO, path, "cannot map: %s", strerror(e));
        }
    }
    close(fd);
    int rc = tr_st_parse_with(st, map ? map : "", size, path, flags, d);
    if (rc) {
        if (map)
            munmap(map, size);
        return rc;
    }
    st->mapping = map;
    st->mapping_size = size;
    return 0;
}

static int find_by_name(const void *key, const void *elem)
{
    const struct tr_st_tensor *const *t = elem;
    return strcmp(key, (*t)->name);
}

const struct tr_st_tensor *tr_st_find(const struct tr_safetensors *st, const char *name)
{
    if (!st->n)
        return NULL;
    const struct tr_st_tensor *const *hit =
        bsearch(name, st->by_name, (size_t)st->n, sizeof *st->by_name, find_by_name);
    return hit ? *hit : NULL;
}

const char *tr_st_metadata(const struct tr_safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_metadata; i++)
        if (!strcmp(st->metadata[2 * i], key))
            return st->metadata[2 * i + 1];
    return NULL;
}

void tr_st_close(struct tr_safetensors *st)
{
    free(st->tensors);
    free(st->by_name);
    free(st->metadata);
    json_decref(st->header);
    if (st->mapping)
        munmap(st->mapping, st->mapping_size);
    memset(st, 0, sizeof *st);
}

/* ---- writing ------------------------------------------------------------------------------ */

/* Largest element first (8-byte dtypes, then 4, 2, 1), then by name: see tr_st_write. */
static int tensor_by_layout(const void *a, const void *b)
{
    const struct tr_st_tensor *const *x = a, *const *y = b;
    size_t sx = tr_dtype_size((*x)->dtype), sy = tr_dtype_size((*y)->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp((*x)->name, (*y)->name);
}

static int check_tensor(const char *path, const struct tr_st_tensor *t, bool filled_later, struct tr_diag *d)
{
    char q[QUOTED_MAX], shape[160];
    if (!t->name)
        return fail(d, TR_EINVAL, path, "a tensor has no name");
    if (!strcmp(t->name, "__metadata__"))
        return fail(d, TR_EINVAL, path, "a tensor may not be called __metadata__");
    if ((unsigned)t->dtype >= TR_NDTYPES)
        return fail(d, TR_EINVAL, path, "tensor '%s': invalid dtype %d",
                    quote(t->name, q, sizeof q), (int)t->dtype);
    if (t->rank < 0 || t->rank > TR_MAX_RANK)
        return fail(d, TR_EINVAL, path, "tensor '%s': rank %d is not 0 to %d",
                    quote(t->name, q, sizeof q), t->rank, TR_MAX_RANK);
    format_shape(t->shape, t->rank, shape, sizeof shape);
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 0)
            return fail(d, TR_EINVAL, path, "tensor '%s': shape %s has a negative "
                        "dimension", quote(t->name, q, sizeof q), shape);
    int64_t need = shape_bytes(t->shape, t->rank, tr_dtype_size(t->dtype));
    if (need < 0 || (uint64_t)need != t->bytes)
        return fail(d, TR_EINVAL, path, "tensor '%s': bytes is %zu, but shape %s of "
                    "%s needs %lld", quote(t->name, q, sizeof q), t->bytes, shape,
                    dtype_names[t->dtype], (long long)need);
    if (t->bytes && !t->data && !filled_later)
        return fail(d, TR_EINVAL, path, "tensor '%s': data is NULL",
                    quote(t->name, q, sizeof q));
    return 0;
}

static json_t *json_int_array(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static int add_metadata(const char *path, json_t *root, const char *const *kv, struct tr_diag *d)
{
    char q[QUOTED_MAX];
    json_t *meta = json_object();
    json_object_set_new(root, "__metadata__", meta);
    for (int i = 0; kv[i]; i += 2) {
        if (!kv[i + 1])
            return fail(d, TR_EINVAL, path, "metadata key '%s' has no value",
                        quote(kv[i], q, sizeof q));
        if (json_object_get(meta, kv[i]))
            return fail(d, TR_EINVAL, path, "metadata key '%s' is given twice",
                        quote(kv[i], q, sizeof q));
        json_t *value = json_string(kv[i + 1]);
        if (!value || json_object_set_new(meta, kv[i], value))
            return fail(d, TR_EINVAL, path, "metadata '%s' is not valid UTF-8",
                        quote(kv[i], q, sizeof q));
    }
    return 0;
}

/* The header's JSON, tensors in the order given (already laid out). */
static int build_header(const char *path, const struct tr_st_tensor *const *order, int n,
                        const char *const *metadata_kv, char **text, struct tr_diag *d)
{
    char q[QUOTED_MAX];
    json_t *root = json_object();
    int rc = metadata_kv ? add_metadata(path, root, metadata_kv, d) : 0;
    int64_t offset = 0;
    for (int i = 0; i < n && !rc; i++) {
        const struct tr_st_tensor *t = order[i];
        if (json_object_get(root, t->name)) {
            rc = fail(d, TR_EINVAL, path, "tensor '%s' is given twice",
                      quote(t->name, q, sizeof q));
            break;
        }
        int64_t end;
        if (__builtin_add_overflow(offset, (int64_t)t->bytes, &end)) {
            rc = fail(d, TR_EINVAL, path, "the tensors total more than 2^63 bytes");
            break;
        }
        json_t *entry = json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtype_names[t->dtype],
                                  "shape", json_int_array(t->shape, t->rank), "data_offsets",
                                  (json_int_t)offset, (json_int_t)end);
        if (!entry)
            rc = fail(d, TR_ENOMEM, path, "out of memory");
        else if (json_object_set_new(root, t->name, entry))
            rc = fail(d, TR_EINVAL, path, "tensor name '%s' is not valid UTF-8",
                      quote(t->name, q, sizeof q));
        offset = end;
    }
    if (!rc && !(*text = json_dumps(root, JSON_COMPACT)))
        rc = fail(d, TR_ENOMEM, path, "out of memory");
    json_decref(root);
    /* padded to a multiple of 8, and the limit is one: a reader refuses exactly these */
    if (!rc && strlen(*text) > TR_ST_MAX_HEADER)
        rc = fail(d, TR_EINVAL, path, "the header would be %zu bytes, more than the "
                  "%u-byte limit", strlen(*text), TR_ST_MAX_HEADER);
    return rc;
}

/* The length, the header padded with spaces to end on a multiple of 8, the data. */
static int write_contents(FILE *f, const char *header, const struct tr_st_tensor *const *order,
                          int n)
{
    size_t len = strlen(header), pad = (8 - len % 8) % 8;
    uint64_t total = len + pad;
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (uint8_t)(total >> (8 * i));
    static const char spaces[8] = "        ";
    if (fwrite(prefix, 1, 8, f) != 8 || fwrite(header, 1, len, f) != len ||
        fwrite(spaces, 1, pad, f) != pad)
        return -1;
    for (int i = 0; i < n; i++)
        if (order[i]->bytes && fwrite(order[i]->data, 1, order[i]->bytes, f) != order[i]->bytes)
            return -1;
    return fflush(f);
}

/* Through the one atomic writer (core/atomic.h): temporary, fsync, rename, fsync the folder. */
static int write_atomically(const char *path, const char *header,
                            const struct tr_st_tensor *const *order, int n, struct tr_diag *d)
{
    struct tr_atomic a;
    int rc = tr_atomic_open(&a, path, d);
    if (!rc) {
        (void)write_contents(a.f, header, order, n);   /* a failure stays in the stream: commit says it */
        rc = tr_atomic_commit(&a, d);
    }
    return rc;
}

int tr_st_write(const char *path, const struct tr_st_tensor *tensors, int n,
                const char *const *metadata_kv, struct tr_diag *d)
{
    if (n < 0 || (n > 0 && !tensors))
        return fail(d, TR_EINVAL, path, "invalid tensor list");
    for (int i = 0; i < n; i++) {
        int rc = check_tensor(path, &tensors[i], false, d);
        if (rc)
            return rc;
    }
    const struct tr_st_tensor **order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order)
        return fail(d, TR_ENOMEM, path, "out of memory");
    for (int i = 0; i < n; i++)
        order[i] = &tensors[i];
    qsort(order, (size_t)n, sizeof *order, tensor_by_layout);
    char *header = NULL;
    int rc = build_header(path, order, n, metadata_kv, &header, d);
    if (!rc)
        rc = write_atomically(path, header, order, n, d);
    free(header);
    free(order);
    return rc;
}

int tr_st_write_each(const char *path, const struct tr_st_tensor *tensors, int n, const char *const *metadata_kv,
                     tr_st_fill_fn fill, void *ctx, const char *const *(*finish)(void *ctx), struct tr_diag *d)
{
    if (n < 0 || (n > 0 && !tensors))
        return fail(d, TR_EINVAL, path, "invalid tensor list");
    const struct tr_st_tensor **order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order)
        return fail(d, TR_ENOMEM, path, "out of memory");
    for (int i = 0; i < n; i++) {
        int rc = check_tensor(path, &tensors[i], true, d);
        if (rc)
            return free(order), rc;
        order[i] = &tensors[i];
    }
    qsort(order, (size_t)n, sizeof *order, tensor_by_layout);
    int64_t *at = calloc((size_t)(n ? n : 1), sizeof *at);   /* each tensor's place in the data, by index */
    char *header = NULL, *buf = malloc(TR_ST_PIECE);
    int rc = !at || !buf ? fail(d, TR_ENOMEM, path, "out of memory") : 0;
    int64_t offset = 0;
    for (int i = 0; !rc && i < n; i++)
        at[order[i] - tensors] = offset, offset += (int64_t)order[i]->bytes;
    if (!rc)
        rc = build_header(path, order, n, metadata_kv, &header, d);
    struct tr_atomic a = {0};
    if (!rc)
        rc = tr_atomic_open(&a, path, d);
    size_t len = header ? strlen(header) : 0, start = 8 + len + (8 - len % 8) % 8;
    if (!rc)   /* the header as it will be (its late values their final length), then each tensor */
        (void)write_contents(a.f, header, order, 0);
    for (int i = 0; !rc && i < n; i++)
        for (size_t from = 0; !rc && (from < tensors[i].bytes || (from == 0 && !tensors[i].bytes)); from += TR_ST_PIECE) {
            size_t piece = tensors[i].bytes - from < TR_ST_PIECE ? tensors[i].bytes - from : TR_ST_PIECE;
            rc = fill(ctx, i, from, buf, piece, d);
            if (!rc && piece && (fseeko(a.f, (off_t)(start + (size_t)at[i] + from), SEEK_SET) ||
                                 fwrite(buf, 1, piece, a.f) != piece))
                rc = fail(d, TR_EIO, path, "writing a tensor failed");
            if (!tensors[i].bytes)
                break;
        }
    const char *const *late = !rc && finish ? finish(ctx) : NULL;
    char *again = NULL;
    if (late && !(rc = build_header(path, order, n, late, &again, d)) && strlen(again) != len)
        rc = fail(d, TR_EINVAL, path, "internal: the header's late values changed its length");
    if (!rc && again && (fseeko(a.f, 0, SEEK_SET) || write_contents(a.f, again, order, 0)))
        rc = fail(d, TR_EIO, path, "writing the header failed");
    if (!rc)
        rc = tr_atomic_commit(&a, d);
    else
        tr_atomic_abort(&a);
    free(header), free(again), free(order), free(at), free(buf);
    return rc;
}
