/* Reading and parsing a data set's files (files.h): zlib reads gzip and plain files alike, the
 * bytes are hashed as they arrive, and the parsers check every count against the buffer before
 * they index it. A file's first error stops its reading: past that, the rest is noise.
 * Text files (TSV, JSON Lines through jansson) become samples handed to a callback. */
#include "data/files.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include <utf8proc.h>
#include <zlib.h>

#include "core/input.h"
#include "data/cache.h"
#include "data/csv.h"
#include "data/sha256.h"
#include "recipe/recipe.h"
#include "recipe/units.h"

#define MAX_DATA_BYTES ((size_t)1 << 34)   /* 16 GiB decompressed: past that, a bomb or a mistake */
#define READ_CHUNK (1u << 24)

static int out_of_memory(struct tr_diag *diag, const char *path, size_t bytes)
{
    tr_diag_add(diag, (struct tr_where){.file = path}, "out of memory reading the data (%zu bytes)", bytes);
    return TR_ENOMEM;
}

/* ---- bytes --------------------------------------------------------------------------------- */

static int cannot_open(const struct tr_data_file *f, const char *package, int err, struct tr_diag *diag)
{
    if (package && err == ENOENT)
        tr_diag_add(diag, (struct tr_where){.file = f->path},
                    "cannot read: %s; the Debian package %s installs it (apt-get install %s)",
                    strerror(err), package, package);
    else
        tr_diag_add(diag, (struct tr_where){.file = f->path}, "cannot read: %s", strerror(err));
    return TR_EIO;
}

/* Reads gz to the end, hashing, into *buf; or, when buf is NULL, hashing each chunk and
 * dropping it, to check a file without holding it. 0, or an error already in diag. */
static int read_all(gzFile gz, const char *path, unsigned char **buf, size_t *len, char hex[65],
                    struct tr_diag *diag)
{
    size_t cap = 1 << 20, n = 0, total = 0;
    unsigned char *b = malloc(cap);
    if (!b)
        return out_of_memory(diag, path, cap);
    struct tr_sha256 sha;
    tr_sha256_init(&sha);
    for (int got = 1; got > 0;) {
        if (!buf)
            n = 0;
        if (n == cap) {
            unsigned char *bigger = cap < MAX_DATA_BYTES ? realloc(b, cap * 2) : NULL;
            if (!bigger) {
                free(b);
                if (cap >= MAX_DATA_BYTES)
                    return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "larger than %zu GiB decompressed; not read",
                                        MAX_DATA_BYTES >> 30);
                return out_of_memory(diag, path, cap * 2);
            }
            b = bigger, cap *= 2;
        }
        size_t want = cap - n < READ_CHUNK ? cap - n : READ_CHUNK;
        got = gzread(gz, b + n, (unsigned)want);
        if (got > 0) {
            tr_sha256_update(&sha, b + n, (size_t)got);
            n += (size_t)got;
            total += (size_t)got;
        }
    }
    int errnum;
    const char *msg = gzerror(gz, &errnum);
    if (errnum == Z_ERRNO) {
        int err = errno;
        free(b);
        tr_diag_add(diag, (struct tr_where){.file = path}, "cannot read: %s", strerror(err));
        return TR_EIO;
    }
    if (errnum != Z_OK && errnum != Z_STREAM_END) {
        const char *gt = strchr(msg, '>');   /* zlib says "<fd:N>: problem" (gzdopen) */
        if (!strncmp(msg, "<fd:", 4) && gt && !strncmp(gt, ">: ", 3))
            msg = gt + 3;
        int rc = tr_fail_file(diag, TR_EINVAL, path, 0, 0, "corrupt or truncated gzip data: %s", msg);
        free(b);
        return rc;
    }
    unsigned char digest[32];
    tr_sha256_final(&sha, digest);
    tr_sha256_hex(digest, hex);
    if (buf)
        *buf = b;
    else
        free(b);
    *len = total;
    return 0;
}

/* Reads f into *buf (or only checks it, buf NULL) and compares its sha256 with the pinned one;
 * the hash goes to sha256 when it is not NULL. */
static int read_checked(const struct tr_data_file *f, const char *package, unsigned char **buf, size_t *len,
                        char sha256[65], struct tr_diag *diag)
{
    *len = 0;
    struct tr_diag why = {0};
    int fd = tr_open_regular(f->path, O_RDONLY, &why);   /* a FIFO would block, /dev/zero never end */
    int err = fd < 0 ? errno : ENOMEM;
    if (fd == TR_EINVAL)
        return tr_fail_because(diag, TR_EIO, &why, "%s: cannot read", f->path);
    tr_diag_free(&why);
    gzFile gz = fd < 0 ? NULL : gzdopen(fd, "rb");
    if (!gz) {
        if (fd >= 0)
            close(fd);
        return cannot_open(f, package, err, diag);
    }
    char hex[65];
    int rc = read_all(gz, f->path, buf, len, hex, diag);
    int closed = gzclose_r(gz);
    if (!rc && closed != Z_OK)
        rc = tr_fail_file(diag, TR_EINVAL, f->path, 0, 0, "corrupt or truncated gzip data (zlib error %d)", closed);
    if (!rc && f->sha256[0] && strcmp(hex, f->sha256))
        rc = tr_fail_file(diag, TR_EINVAL, f->path, 0, 0, "sha256 mismatch: expected %s (%s), got %s", f->sha256,
                          f->pinned_by ? f->pinned_by : "pinned", hex);
    if (!rc && sha256)
        memcpy(sha256, hex, sizeof hex);
    if (rc && buf) {
        free(*buf);
        *buf = NULL;
        *len = 0;
    }
    return rc;
}

int tr_data_read(const struct tr_data_file *f, const char *package, unsigned char **buf, size_t *len,
                 char sha256[65], struct tr_diag *diag)
{
    *buf = NULL;
    return read_checked(f, package, buf, len, sha256, diag);
}

int tr_data_check(const struct tr_data_file *f, const char *package, char sha256[65], struct tr_diag *diag)
{
    size_t len;
    return read_checked(f, package, NULL, &len, sha256, diag);
}

/* ---- lines (tsv, jsonl) -------------------------------------------------------------------- */

struct line {
    const char *s;
    size_t len;
    int number;   /* 1-based */
};

struct cursor {
    const char *text;
    size_t len, pos;
    int number;   /* of the last line returned */
};

/* The next line that is not blank, without its "\n" or "\r\n"; false at the end. */
static bool next_line(struct cursor *c, struct line *l)
{
    while (c->pos < c->len) {
        const char *s = c->text + c->pos;
        const char *nl = memchr(s, '\n', c->len - c->pos);
        size_t n = nl ? (size_t)(nl - s) : c->len - c->pos;
        c->pos += n + (nl != NULL);
        c->number++;
        if (n && s[n - 1] == '\r')
            n--;
        size_t blank = 0;
        while (blank < n && (s[blank] == ' ' || s[blank] == '\t'))
            blank++;
        if (blank < n) {
            *l = (struct line){s, n, c->number};
            return true;
        }
    }
    return false;
}

/* ---- IDX ----------------------------------------------------------------------------------- */

#define IDX_IMAGES 0x00000803u   /* unsigned bytes, 3 dimensions */
#define IDX_LABELS 0x00000801u   /* unsigned bytes, 1 dimension */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Checks an IDX file's magic, dimensions and size; dims gets its ndims dimensions. */
static int idx_header(const char *path, const unsigned char *b, size_t len, uint32_t magic,
                      int64_t *dims, struct tr_diag *diag)
{
    int ndims = (int)(magic & 0xff);
    size_t header = 4 + 4 * (size_t)ndims;
    if (len >= 4 && be32(b) != magic)
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "not an IDX %s file: magic number 0x%08x, expected 0x%08x",
                            ndims == 3 ? "image" : "label", be32(b), magic);
    if (len < header)
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "truncated: %zu bytes, shorter than its IDX header (%zu)",
                            len, header);
    unsigned __int128 bytes = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(b + 4 + 4 * i);
        bytes *= (uint64_t)dims[i];
    }
    if (dims[0] == 0)
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file holds no samples");
    if (bytes == 0)
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "its samples hold no data (a dimension is 0)");
    if (bytes > len - header)
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "truncated: the header promises %llu bytes of data, the file "
                            "holds %zu", (unsigned long long)(bytes > UINT64_MAX ? UINT64_MAX : bytes),
                            len - header);
    if (bytes < len - header)
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "%zu bytes follow the data that the header describes",
                            len - header - (size_t)bytes);
    return 0;
}

int tr_idx_parse(const char *images_path, const unsigned char *images, size_t images_len,
                 const char *labels_path, const unsigned char *labels, size_t labels_len, int nclasses,
                 struct tr_table *t, struct tr_diag *diag)
{
    memset(t, 0, sizeof *t);
    int64_t idims[3] = {0}, ldims[1] = {0};
    if (idx_header(images_path, images, images_len, IDX_IMAGES, idims, diag) ||
        idx_header(labels_path, labels, labels_len, IDX_LABELS, ldims, diag))
        return TR_EINVAL;
    if (ldims[0] != idims[0])
        return tr_fail_file(diag, TR_EINVAL, labels_path, 0, 0, "holds %lld labels, but %s holds %lld images",
                            (long long)ldims[0], images_path, (long long)idims[0]);
    int bound = nclasses ? nclasses : 256, max = 0;
    const unsigned char *lab = labels + 8;
    for (int64_t i = 0; i < ldims[0]; i++) {
        if (lab[i] >= bound)
            return tr_fail_file(diag, TR_EINVAL, labels_path, 0, 0, "sample %lld has label %d; the data set has %d "
                                "classes (0 to %d)", (long long)i, lab[i], bound, bound - 1);
        if (lab[i] > max)
            max = lab[i];
    }
    t->n = idims[0];
    t->nfeatures = idims[1] * idims[2];
    t->rank = 3;
    t->dims[0] = 1, t->dims[1] = idims[1], t->dims[2] = idims[2];
    size_t count = (size_t)t->n * (size_t)t->nfeatures;
    t->pixels = malloc(count);   /* kept as bytes: a quarter of floats' memory (dataset.h) */
    t->y = malloc((size_t)t->n * sizeof(int32_t));
    if (!t->pixels || !t->y) {
        tr_table_free(t);
        return out_of_memory(diag, images_path, count);
    }
    memcpy(t->pixels, images + 16, count);
    for (int64_t i = 0; i < t->n; i++)
        t->y[i] = lab[i];
    t->nclasses = nclasses ? nclasses : max + 1;
    return 0;
}

/* ---- text ---------------------------------------------------------------------------------- */

/* The offset just past the line that starts at `at` (its '\n' included). */
static size_t after_line(const char *text, size_t len, size_t at)
{
    const char *nl = memchr(text + at, '\n', len - at);
    return nl ? (size_t)(nl - text) + 1 : len;
}

int tr_text_lines(const struct tr_data_file *f, const char *text, size_t len, const char **start,
                  size_t *slice_len, int *first_line, struct tr_diag *diag)
{
    *start = text;
    *slice_len = len;
    *first_line = 1;
    if (!f->first_line)
        return 0;
    size_t from = 0, to;
    int64_t line = 1;
    for (; line < f->first_line && from < len; line++)
        from = after_line(text, len, from);
    for (to = from; line <= f->last_line && to < len; line++)
        to = after_line(text, len, to);
    if (line - 1 < f->last_line) {   /* the file ended first: line - 1 is its line count */
        tr_diag_add(diag, f->lines_at, "lines: [%lld, %lld], but %s has %lld lines", (long long)f->first_line,
                    (long long)f->last_line, f->path, (long long)(line - 1));
        return TR_EINVAL;
    }
    *start = text + from;
    *slice_len = to - from;
    *first_line = (int)f->first_line;
    return 0;
}

int tr_utf8_check(const char *path, const char *text, size_t len, int first_line, struct tr_diag *diag)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t line_start = 0;
    int line = first_line;
    for (size_t i = 0; i < len;) {
        if (s[i] < 0x80) {   /* ASCII, most of any text: no call */
            if (s[i++] == '\n')
                line++, line_start = i;
            continue;
        }
        utf8proc_int32_t code;
        utf8proc_ssize_t n = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &code);
        if (n < 0)
            return tr_fail_file(diag, TR_EINVAL, path, line, (int)(i - line_start) + 1,
                                "invalid UTF-8 (byte 0x%02x); text data must be UTF-8", s[i]);
        i += (size_t)n;
    }
    return 0;
}

/* A label, quoted in messages: at most 40 bytes of it. */
#define LABEL_SHOWN 40

/* The class a label names: its index in class_names, or, with no names, its class number. */
static int class_of(const char *path, int line, int col, const char *s, size_t n,
                    const struct tr_text_options *o, int32_t *out, struct tr_diag *diag)
{
    int shown = n > LABEL_SHOWN ? LABEL_SHOWN : (int)n;
    if (!o->class_names && !o->nclasses) {   /* the classes are yet to be found */
        *out = -1;
        return 0;
    }
    if (!o->class_names) {
        char buf[16] = "";
        long v = -1;
        if (n && n < sizeof buf) {
            memcpy(buf, s, n);   /* s is not NUL-ended: look only at the copy */
            buf[n] = '\0';
            v = strspn(buf, "0123456789") == n ? strtol(buf, NULL, 10) : -1;
        }
        if (v < 0 || v >= o->nclasses)
            return tr_fail_file(diag, TR_EINVAL, path, line, col, "label '%.*s' is not a class number from 0 to %d "
                                "(the definition names no class_names)", shown, s, o->nclasses - 1);
        *out = (int32_t)v;
        return 0;
    }
    for (int c = 0; o->class_names[c]; c++)
        if (strlen(o->class_names[c]) == n && !memcmp(o->class_names[c], s, n)) {
            *out = c;
            return 0;
        }
    char *label = tr_strdup_printf("%.*s", (int)n, s);
    const char *best = NULL;
    int best_d = 3;
    for (int c = 0; o->class_names[c]; c++) {
        int d = tr_edit_distance(label, o->class_names[c]);
        if (d < best_d)
            best = o->class_names[c], best_d = d;
    }
    free(label);
    return tr_fail_file(diag, TR_EINVAL, path, line, col, "label '%.*s' is not one of the %d class_names%s%s%s",
                        shown, s, o->nclasses, best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
}

/* A tsv file, read as rows by csv.c (a TAB between cells, no quoting, nothing trimmed). */
struct tsv_reader {
    const char *path;
    const struct tr_text_options *o;
    tr_text_sample_fn *take;
    void *ctx;
    int ncols;                    /* 0 until the header line is read */
    int col[2];                   /* of the text, of the label */
    int64_t n;
};

/* The header line: which columns hold the text and the label. */
static int tsv_header(struct tsv_reader *r, const struct tr_csv_cell *cells, int ncells, struct tr_diag *diag)
{
    const char *names[2] = {r->o->text, r->o->label};
    const struct tr_where at[2] = {r->o->text_at, r->o->label_at};
    r->col[0] = r->col[1] = -1;
    r->ncols = ncells;
    char *list = tr_strdup("");
    for (int i = 0; i < ncells; i++) {
        for (int k = 0; k < 2; k++)
            if (r->col[k] < 0 && !strcmp(names[k], cells[i].s) && strlen(names[k]) == cells[i].n)
                r->col[k] = i;
        if (strlen(list) < 200) {
            char *longer = tr_strdup_printf("%s%s'%s'", list, *list ? ", " : "", cells[i].s);
            free(list);
            list = longer;
        }
    }
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++)
        if (r->col[k] < 0) {
            tr_diag_add(diag, at[k], "%s: %s has no field named '%s'; its first line names %s%s",
                        k ? "label" : "text", r->path, names[k], list, strlen(list) >= 200 ? ", …" : "");
            rc = TR_EINVAL;
        }
    free(list);
    return rc;
}

static int tsv_row(void *ctx, const struct tr_csv_cell *cells, int ncells, struct tr_diag *diag)
{
    struct tsv_reader *r = ctx;
    if (!r->ncols)
        return tsv_header(r, cells, ncells, diag);
    if (ncells != r->ncols)
        return tr_fail_file(diag, TR_EINVAL, r->path, cells[0].line, 1, "expected %d fields (a TAB between fields), "
                            "found %d", r->ncols, ncells);
    const struct tr_csv_cell *text = &cells[r->col[0]], *label = &cells[r->col[1]];
    struct tr_text_sample sample = {.text = text->s, .len = text->n, .line = text->line, .col = text->col,
                                    .label_text = label->s, .label_len = label->n};
    int rc = class_of(r->path, label->line, label->col, label->s, label->n, r->o, &sample.label, diag);
    r->n++;
    return rc ? rc : r->take(r->ctx, &sample, diag);
}

static int tsv_parse(const char *path, const char *text, size_t len, const struct tr_text_options *o,
                     tr_text_sample_fn *take, void *ctx, struct tr_diag *diag)
{
    struct tsv_reader r = {.path = path, .o = o, .take = take, .ctx = ctx};
    struct tr_csv_dialect tsv = {.delimiter = '\t', .quoting = false, .trim = false, .first_line = o->first_line};
    int rc = tr_csv_rows(path, text, len, &tsv, tsv_row, &r, diag);
    if (!rc && !r.ncols)
        rc = tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file is empty");
    if (!rc && !r.n)
        rc = tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file holds no samples");
    return rc;
}

static int jsonl_label(const char *path, const struct line *l, const json_t *label,
                       const struct tr_text_options *o, int32_t *out, struct tr_diag *diag)
{
    if (json_is_string(label))
        return class_of(path, l->number, 1, json_string_value(label), json_string_length(label), o, out, diag);
    json_int_t v = json_is_integer(label) ? json_integer_value(label) : -1;
    if (!o->nclasses && v >= 0 && v <= INT32_MAX - 1) {   /* the classes are yet to be found */
        *out = -1;
        return 0;
    }
    if (!json_is_integer(label) || v < 0 || v >= o->nclasses)
        return o->nclasses ? tr_fail_file(diag, TR_EINVAL, path, l->number, 1, "field '%s' is neither a class name "
                                          "nor a class number from 0 to %d", o->label, o->nclasses - 1)
                           : tr_fail_file(diag, TR_EINVAL, path, l->number, 1, "field '%s' is neither a class name "
                                          "nor a class number from 0", o->label);
    *out = (int32_t)v;
    return 0;
}

static int jsonl_sample(const char *path, const struct line *l, const struct tr_text_options *o,
                        tr_text_sample_fn *take, void *ctx, struct tr_diag *diag)
{
    json_error_t err;
    json_t *obj = json_loadb(l->s, l->len, JSON_REJECT_DUPLICATES, &err);
    if (!obj)
        return tr_fail_file(diag, TR_EINVAL, path, l->number, err.column > 0 ? err.column : 1, "invalid JSON: %s",
                            err.text);
    json_t *text = json_object_get(obj, o->text), *label = json_object_get(obj, o->label);
    struct tr_text_sample sample = {.line = l->number, .col = 1};
    int rc;
    if (!json_is_object(obj))
        rc = tr_fail_file(diag, TR_EINVAL, path, l->number, 1, "expected a JSON object, one a line");
    else if (!text || !label)
        rc = tr_fail_file(diag, TR_EINVAL, path, l->number, 1, "no field '%s'", text ? o->label : o->text);
    else if (!json_is_string(text))
        rc = tr_fail_file(diag, TR_EINVAL, path, l->number, 1, "field '%s' is not a string", o->text);
    else
        rc = jsonl_label(path, l, label, o, &sample.label, diag);
    char number[24];
    if (!rc) {
        sample.text = json_string_value(text);
        sample.len = json_string_length(text);
        if (json_is_string(label))
            sample.label_text = json_string_value(label), sample.label_len = json_string_length(label);
        else
            sample.label_len = (size_t)snprintf(number, sizeof number, "%lld", (long long)json_integer_value(label)),
            sample.label_text = number;
        rc = take(ctx, &sample, diag);
    }
    json_decref(obj);
    return rc;
}

int tr_text_parse(const char *path, const char *text, size_t len, const struct tr_text_options *o,
                  tr_text_sample_fn *take, void *ctx, struct tr_diag *diag)
{
    if (o->format == TR_FMT_TSV)
        return tsv_parse(path, text, len, o, take, ctx, diag);
    struct cursor c = {.text = text, .len = len, .number = o->first_line - 1};
    struct line l;
    int64_t n = 0;
    for (; next_line(&c, &l); n++) {
        int rc = jsonl_sample(path, &l, o, take, ctx, diag);
        if (rc)
            return rc;
    }
    return n ? 0 : tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file holds no samples");
}

void tr_table_free(struct tr_table *t)
{
    free(t->x);
    free(t->pixels);
    tr_cache_free(t->y, t->map, t->map_bytes);
    tr_cache_free(t->tokens, t->map, t->map_bytes);
    tr_cache_free(t->offsets, t->map, t->map_bytes);
    tr_cache_unmap(t->map, t->map_bytes);
    for (int i = 0; t->class_names && t->class_names[i]; i++)
        free(t->class_names[i]);
    free(t->class_names);
    memset(t, 0, sizeof *t);
}
