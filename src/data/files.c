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

/* ---- CSV ----------------------------------------------------------------------------------- */

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

static int count_fields(const struct line *l)
{
    int n = 1;
    for (const char *p = l->s; (p = memchr(p, ',', (size_t)(l->s + l->len - p))) != NULL; p++)
        n++;
    return n;
}

/* Field i's text [*start, *end), blanks around it trimmed, and its 1-based column. */
static int field_at(const struct line *l, const char **cur, const char **start, const char **end)
{
    const char *s = *cur, *limit = l->s + l->len;
    const char *comma = memchr(s, ',', (size_t)(limit - s));
    const char *e = comma ? comma : limit;
    *cur = comma ? comma + 1 : limit;
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *start = s;
    *end = e;
    return (int)(s - l->s) + 1;
}

enum { NUM_OK, NUM_EMPTY, NUM_BAD, NUM_RANGE };

/* Decimal numbers only: strtod's hex, inf and nan are not data. */
static int parse_number(const char *s, const char *e, double *out)
{
    char buf[64];
    size_t n = (size_t)(e - s);
    if (!n)
        return NUM_EMPTY;
    if (n >= sizeof buf)
        return NUM_BAD;
    memcpy(buf, s, n);   /* the text is not NUL-terminated: look only at the copy */
    buf[n] = '\0';
    if (strspn(buf, "0123456789+-.eE") < n)
        return NUM_BAD;
    char *end;
    double v = strtod(buf, &end);
    if (end != buf + n)
        return NUM_BAD;
    if (!isfinite(v) || fabs(v) > FLT_MAX)
        return NUM_RANGE;
    *out = v;
    return NUM_OK;
}

static bool is_whole(double v, double min)
{
    return v == floor(v) && v >= min && v <= INT32_MAX;
}

static bool all_numbers(const struct line *l)
{
    const char *cur = l->s, *s, *e;
    double v;
    for (int i = count_fields(l); i > 0; i--) {
        field_at(l, &cur, &s, &e);
        if (parse_number(s, e, &v) != NUM_OK)
            return false;
    }
    return true;
}

/* header: auto. Words on the first line: sklearn's `n_samples,n_features,names…` when its first
 * two fields are whole numbers, else column names. All numbers: data, unless it is an sklearn
 * header whose class names are numbers, seen by n_features + 1 matching the next line. */
static int detect_header(const struct line *first, struct cursor after)
{
    const char *cur = first->s, *s, *e;
    double n0 = -1, n1 = -1;
    field_at(first, &cur, &s, &e);
    parse_number(s, e, &n0);
    field_at(first, &cur, &s, &e);
    parse_number(s, e, &n1);
    bool counts = count_fields(first) >= 3 && is_whole(n0, 0) && is_whole(n1, 1);
    if (!all_numbers(first))
        return counts ? TR_HEADER_SKLEARN : TR_HEADER_NAMES;
    struct line second;
    if (counts && next_line(&after, &second) && count_fields(&second) != count_fields(first) &&
        count_fields(&second) == (int)n1 + 1)
        return TR_HEADER_SKLEARN;
    return TR_HEADER_NONE;
}

/* Column names, or sklearn's class names (fields from skip on), as a NULL-ended list. */
static char **header_words(const struct line *l, int skip)
{
    int n = count_fields(l);
    char **words = tr_xcalloc((size_t)n + 1, sizeof *words);
    const char *cur = l->s, *s, *e;
    for (int i = 0; i < n; i++) {
        field_at(l, &cur, &s, &e);
        if (i >= skip)
            words[i - skip] = tr_strdup_printf("%.*s", (int)(e - s), s);
    }
    return words;
}

static void free_words(char **words)
{
    for (int i = 0; words && words[i]; i++)
        free(words[i]);
    free(words);
}

struct csv_layout {
    int header;
    int ncols, label_col;
    int64_t promised;        /* sklearn header's n_samples, or -1 */
    char **names;            /* column names (header: names) */
    char **class_names;      /* sklearn header's class names */
};

static int read_sklearn_header(const char *path, const struct line *l, struct csv_layout *lay,
                               struct tr_diag *diag)
{
    const char *cur = l->s, *s, *e;
    double n0 = -1, n1 = -1;
    field_at(l, &cur, &s, &e);
    parse_number(s, e, &n0);
    field_at(l, &cur, &s, &e);
    parse_number(s, e, &n1);
    if (count_fields(l) < 3 || !is_whole(n0, 0) || !is_whole(n1, 1))
        return tr_fail_file(diag, TR_EINVAL, path, l->number, 1,
                            "expected scikit-learn's header line n_samples,n_features,class names…");
    lay->promised = (int64_t)n0;
    lay->ncols = (int)n1 + 1;
    lay->class_names = header_words(l, 2);
    return 0;
}

static int resolve_label(const char *path, const struct tr_csv_options *o, struct csv_layout *lay,
                         struct tr_diag *diag)
{
    const char *label = o->label ? o->label : "last";
    int last = lay->ncols - 1;
    if (!strcmp(label, "last"))
        lay->label_col = last;
    else if (!strcmp(label, "first"))
        lay->label_col = 0;
    else if (strspn(label, "0123456789") == strlen(label)) {
        long col = strtol(label, NULL, 10);
        if (strlen(label) > 9 || col > last) {
            tr_diag_add(diag, o->label_at, "label: column %s does not exist; %s has %d columns (0 to %d)",
                        label, path, lay->ncols, last);
            return TR_EINVAL;
        }
        lay->label_col = (int)col;
    } else {
        int i = 0;
        while (lay->names && lay->names[i] && strcmp(lay->names[i], label))
            i++;
        if (!lay->names || !lay->names[i]) {
            tr_diag_add(diag, o->label_at, "label: %s has no column named '%s'%s", path, label,
                        lay->names ? "" : " (it has no header line of column names)");
            return TR_EINVAL;
        }
        lay->label_col = i;
    }
    return 0;
}

/* The header (if any), the column count and the label column. *data is the first data line. */
static int read_layout(const char *path, struct cursor *c, const struct tr_csv_options *o,
                       struct csv_layout *lay, struct line *data, bool *have_data, struct tr_diag *diag)
{
    struct line first;
    if (!next_line(c, &first))
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file is empty");
    lay->header = o->header == TR_HEADER_AUTO ? detect_header(&first, *c) : o->header;
    lay->promised = -1;
    int rc = 0;
    if (lay->header == TR_HEADER_SKLEARN)
        rc = read_sklearn_header(path, &first, lay, diag);
    else if (lay->header == TR_HEADER_NAMES) {
        lay->names = header_words(&first, 0);
        lay->ncols = count_fields(&first);
    }
    if (rc)
        return rc;
    *have_data = lay->header == TR_HEADER_NONE ? (*data = first, true) : next_line(c, data);
    if (!*have_data)
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file holds no samples");
    if (!lay->ncols)
        lay->ncols = count_fields(data);
    if (lay->ncols < 2)
        return tr_fail_file(diag, TR_EINVAL, path, data->number, 1,
                            "a row needs at least one feature and a label; this one has 1 column");
    return resolve_label(path, o, lay, diag);
}

/* The label bound: as the caller fixed it, else the sklearn header's class count; 0: none. */
static int class_bound(const char *path, const struct tr_csv_options *o, const struct csv_layout *lay,
                       struct tr_diag *diag, int *bound)
{
    int named = 0;
    while (lay->class_names && lay->class_names[named])
        named++;
    if (o->nclasses && named && named != o->nclasses)
        return tr_fail_file(diag, TR_EINVAL, path, 1, 1, "the header names %d classes; the definition says %d", named,
                            o->nclasses);
    *bound = o->nclasses ? o->nclasses : named;
    return 0;
}

static int parse_row(const char *path, const struct line *l, const struct csv_layout *lay, int bound,
                     float *x, int32_t *y, bool first_line_data, struct tr_diag *diag)
{
    const char *cur = l->s, *s, *e;
    for (int i = 0; i < lay->ncols; i++) {
        int col = field_at(l, &cur, &s, &e);
        double v = 0;
        int got = parse_number(s, e, &v);
        if (got == NUM_EMPTY)
            return tr_fail_file(diag, TR_EINVAL, path, l->number, col, "empty field; expected a number");
        if (got == NUM_BAD)
            return tr_fail_file(diag, TR_EINVAL, path, l->number, col, "'%.*s' is not a number%s", (int)(e - s), s,
                                first_line_data && l->number == 1
                                    ? " (if this line names the columns, set header: names)" : "");
        if (got == NUM_RANGE)
            return tr_fail_file(diag, TR_EINVAL, path, l->number, col, "'%.*s' is out of range for a float",
                                (int)(e - s), s);
        if (i != lay->label_col) {
            *x++ = (float)v;
            continue;
        }
        if (v != floor(v))
            return tr_fail_file(diag, TR_EINVAL, path, l->number, col, "label %.*s is not a whole number",
                                (int)(e - s), s);
        if (v < 0 || (bound && v >= bound) || v > INT32_MAX - 1)
            return bound ? tr_fail_file(diag, TR_EINVAL, path, l->number, col,
                                        "label %.*s is out of range: %d classes (0 to %d)", (int)(e - s), s, bound,
                                        bound - 1)
                         : tr_fail_file(diag, TR_EINVAL, path, l->number, col, "label %.*s is out of range: labels "
                                        "are class numbers from 0", (int)(e - s), s);
        *y = (int32_t)v;
    }
    return 0;
}

/* The data lines from first on, each checked for its column count before anything is
 * allocated: what is allocated is then bounded by the text's own size. */
static int count_rows(const char *path, struct cursor c, const struct line *first, int ncols, int64_t *n,
                      struct tr_diag *diag)
{
    struct line l = *first;
    *n = 0;
    do {
        int found = count_fields(&l);
        if (found != ncols)
            return tr_fail_file(diag, TR_EINVAL, path, l.number, 1, "expected %d columns, found %d", ncols, found);
        ++*n;
    } while (next_line(&c, &l));
    return 0;
}

static int parse_rows(const char *path, struct cursor *c, const struct line *first,
                      const struct csv_layout *lay, int bound, struct tr_table *t, struct tr_diag *diag)
{
    int rc = count_rows(path, *c, first, lay->ncols, &t->n, diag);
    if (rc)
        return rc;
    t->nfeatures = lay->ncols - 1;
    size_t xbytes = (size_t)t->n * (size_t)t->nfeatures * sizeof(float);
    t->x = malloc(xbytes ? xbytes : 1);
    t->y = malloc((size_t)t->n * sizeof(int32_t));
    if (!t->x || !t->y)
        return out_of_memory(diag, path, xbytes);
    struct line l = *first;
    int32_t max = -1;
    for (int64_t r = 0; r < t->n; r++) {
        if (r && !next_line(c, &l))
            break;
        rc = parse_row(path, &l, lay, bound, t->x + r * t->nfeatures, t->y + r,
                           lay->header == TR_HEADER_NONE, diag);
        if (rc)
            return rc;
        if (t->y[r] > max)
            max = t->y[r];
    }
    if (lay->promised >= 0 && lay->promised != t->n)
        return tr_fail_file(diag, TR_EINVAL, path, 1, 1, "the header says %lld samples; the file holds %lld",
                            (long long)lay->promised, (long long)t->n);
    t->nclasses = bound ? bound : max + 1;
    return 0;
}

int tr_csv_parse(const char *path, const char *text, size_t len, const struct tr_csv_options *o,
                 struct tr_table *t, struct tr_diag *diag)
{
    memset(t, 0, sizeof *t);
    struct cursor c = {.text = text, .len = len};
    struct csv_layout lay = {0};
    struct line first;
    bool have_data = false;
    int bound = 0;
    int rc = read_layout(path, &c, o, &lay, &first, &have_data, diag);
    if (!rc)
        rc = class_bound(path, o, &lay, diag, &bound);
    if (!rc)
        rc = parse_rows(path, &c, &first, &lay, bound, t, diag);
    if (!rc) {
        t->rank = 1;
        t->dims[0] = t->nfeatures;
        t->class_names = lay.class_names;
        lay.class_names = NULL;
    }
    free_words(lay.names);
    free_words(lay.class_names);
    if (rc)
        tr_table_free(t);
    return rc;
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
    t->x = malloc(count * sizeof(float));
    t->y = malloc((size_t)t->n * sizeof(int32_t));
    if (!t->x || !t->y) {
        tr_table_free(t);
        return out_of_memory(diag, images_path, count * sizeof(float));
    }
    const unsigned char *pix = images + 16;
    for (size_t i = 0; i < count; i++)
        t->x[i] = (float)pix[i];
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

struct tsv_layout {
    int ncols;
    int col[2];   /* of the text, of the label */
};

/* Splits l at its TABs: returns the field count, with fields col[0] and col[1] in s and n. */
static int tsv_fields(const struct line *l, const int col[2], const char *s[2], size_t n[2])
{
    const char *p = l->s, *end = l->s + l->len;
    for (int count = 0;; count++) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        const char *e = tab ? tab : end;
        for (int k = 0; k < 2; k++)
            if (count == col[k])
                s[k] = p, n[k] = (size_t)(e - p);
        if (!tab)
            return count + 1;
        p = tab + 1;
    }
}

/* The header line: which columns hold the text and the label. */
static int tsv_header(const char *path, struct cursor *c, const struct tr_text_options *o,
                      struct tsv_layout *lay, struct tr_diag *diag)
{
    struct line header;
    if (!next_line(c, &header))
        return tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file is empty");
    const char *names[2] = {o->text, o->label};
    const struct tr_where at[2] = {o->text_at, o->label_at};
    lay->col[0] = lay->col[1] = -1;
    lay->ncols = 0;
    const char *p = header.s, *end = header.s + header.len;
    char *list = tr_strdup("");
    for (bool more = true; more; lay->ncols++) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        const char *e = tab ? tab : end;
        for (int k = 0; k < 2; k++)
            if (lay->col[k] < 0 && strlen(names[k]) == (size_t)(e - p) && !memcmp(names[k], p, (size_t)(e - p)))
                lay->col[k] = lay->ncols;
        if (strlen(list) < 200) {
            char *longer = tr_strdup_printf("%s%s'%.*s'", list, *list ? ", " : "", (int)(e - p), p);
            free(list);
            list = longer;
        }
        more = tab != NULL;
        p = more ? tab + 1 : end;
    }
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++)
        if (lay->col[k] < 0) {
            tr_diag_add(diag, at[k], "%s: %s has no field named '%s'; its first line names %s%s",
                        k ? "label" : "text", path, names[k], list, strlen(list) >= 200 ? ", …" : "");
            rc = TR_EINVAL;
        }
    free(list);
    return rc;
}

static int tsv_sample(const char *path, const struct line *l, const struct tsv_layout *lay,
                      const struct tr_text_options *o, tr_text_sample_fn *take, void *ctx, struct tr_diag *diag)
{
    const char *s[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    int found = tsv_fields(l, lay->col, s, n);
    if (found != lay->ncols)
        return tr_fail_file(diag, TR_EINVAL, path, l->number, 1, "expected %d fields (a TAB between fields), found %d",
                            lay->ncols, found);
    struct tr_text_sample sample = {.text = s[0], .len = n[0], .line = l->number, .col = (int)(s[0] - l->s) + 1};
    int rc = class_of(path, l->number, (int)(s[1] - l->s) + 1, s[1], n[1], o, &sample.label, diag);
    return rc ? rc : take(ctx, &sample, diag);
}

static int jsonl_label(const char *path, const struct line *l, const json_t *label,
                       const struct tr_text_options *o, int32_t *out, struct tr_diag *diag)
{
    if (json_is_string(label))
        return class_of(path, l->number, 1, json_string_value(label), json_string_length(label), o, out, diag);
    json_int_t v = json_is_integer(label) ? json_integer_value(label) : -1;
    if (!json_is_integer(label) || v < 0 || v >= o->nclasses)
        return tr_fail_file(diag, TR_EINVAL, path, l->number, 1, "field '%s' is neither a class name nor a class "
                            "number from 0 to %d", o->label, o->nclasses - 1);
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
    if (!rc) {
        sample.text = json_string_value(text);
        sample.len = json_string_length(text);
        rc = take(ctx, &sample, diag);
    }
    json_decref(obj);
    return rc;
}

int tr_text_parse(const char *path, const char *text, size_t len, const struct tr_text_options *o,
                  tr_text_sample_fn *take, void *ctx, struct tr_diag *diag)
{
    struct cursor c = {.text = text, .len = len, .number = o->first_line - 1};
    struct tsv_layout lay = {0};
    if (o->format == TR_FMT_TSV) {
        int rc = tsv_header(path, &c, o, &lay, diag);
        if (rc)
            return rc;
    }
    struct line l;
    int64_t n = 0;
    for (; next_line(&c, &l); n++) {
        int rc = o->format == TR_FMT_TSV ? tsv_sample(path, &l, &lay, o, take, ctx, diag)
                                         : jsonl_sample(path, &l, o, take, ctx, diag);
        if (rc)
            return rc;
    }
    return n ? 0 : tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file holds no samples");
}

void tr_table_free(struct tr_table *t)
{
    free(t->x);
    tr_cache_free(t->y, t->map, t->map_bytes);
    tr_cache_free(t->tokens, t->map, t->map_bytes);
    tr_cache_free(t->offsets, t->map, t->map_bytes);
    tr_cache_unmap(t->map, t->map_bytes);
    free_words(t->class_names);
    memset(t, 0, sizeof *t);
}
