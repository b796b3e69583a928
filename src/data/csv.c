/* Delimited tables (csv.h): libcsv (Debian libcsv-dev 3.0.3, RFC 4180 in its strict mode) cuts
 * the text into cells; this file tells where each cell starts, and builds a csv data set's
 * numeric table from the rows: the header line, the label column, class numbers or class names,
 * missing cells. libcsv keeps no positions, so the text is handed to it a piece at a time, each
 * piece ending at a delimiter or a line break: a cell it completes began where the last one
 * ended. */
#include "data/csv.h"

#include <csv.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "recipe/units.h"

#define SHOWN 40            /* bytes of a cell quoted in a message */

/* ---- rows of cells ------------------------------------------------------------------------- */

struct splitter {
    const char *path, *text;
    size_t len;
    const struct tr_csv_dialect *dialect;
    size_t cell_begin, piece_end;   /* where the next cell may begin; the end of the piece fed */
    size_t counted_to, line_start;  /* line numbers are counted up to counted_to */
    int line;
    struct tr_csv_cell *cells;      /* the row so far; .s holds an offset into bytes until the row ends */
    int ncells, cells_cap;
    char *bytes;                    /* the row's cells, NUL after each */
    size_t nbytes, bytes_cap;
    tr_csv_row_fn *row;
    void *ctx;
    struct tr_diag *diag;
    int rc;
};

/* Line and column of byte at (never before the last asked for). */
static void position_of(struct splitter *sp, size_t at, int *line, int *col)
{
    for (const char *nl; sp->counted_to < at && (nl = memchr(sp->text + sp->counted_to, '\n',
                                                            at - sp->counted_to)) != NULL;) {
        sp->line++;
        sp->counted_to = sp->line_start = (size_t)(nl - sp->text) + 1;
    }
    sp->counted_to = at;
    *line = sp->line;
    *col = (int)(at - sp->line_start) + 1;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Where the cell that ends now began: for a row's first cell, past the line breaks before it
 * (the LF of a CRLF, blank lines: libcsv skips them); past blanks that trimming drops. */
static size_t cell_start(const struct splitter *sp)
{
    size_t at = sp->cell_begin;
    while (at < sp->len && ((!sp->ncells && (sp->text[at] == '\n' || sp->text[at] == '\r')) ||
                            (sp->dialect->trim && is_blank(sp->text[at]))))
        at++;
    return at;
}

static void on_cell(void *s, size_t n, void *data)
{
    struct splitter *sp = data;
    if (sp->rc)
        return;
    size_t at = cell_start(sp);
    sp->cell_begin = sp->piece_end;
    if (sp->ncells == sp->cells_cap) {
        sp->cells_cap = sp->cells_cap ? 2 * sp->cells_cap : 16;
        sp->cells = tr_xrealloc(sp->cells, (size_t)sp->cells_cap * sizeof *sp->cells);
    }
    if (sp->nbytes + n + 1 > sp->bytes_cap) {
        while (sp->nbytes + n + 1 > sp->bytes_cap)
            sp->bytes_cap = sp->bytes_cap ? 2 * sp->bytes_cap : 256;
        sp->bytes = tr_xrealloc(sp->bytes, sp->bytes_cap);
    }
    struct tr_csv_cell *c = &sp->cells[sp->ncells++];
    *c = (struct tr_csv_cell){.s = (const char *)(uintptr_t)sp->nbytes, .n = n,
                              .quoted = sp->dialect->quoting && at < sp->len && sp->text[at] == '"'};
    position_of(sp, at < sp->len ? at : sp->len, &c->line, &c->col);
    if (n)
        memcpy(sp->bytes + sp->nbytes, s, n);
    sp->bytes[sp->nbytes + n] = '\0';
    sp->nbytes += n + 1;
}

/* A row of blanks is a blank line (libcsv drops them only when it trims): one unquoted cell of
 * blanks, or with a TAB delimiter (a blank itself) unquoted cells of blanks only. */
static bool blank_row(const struct tr_csv_cell *cells, int n, unsigned char delimiter)
{
    if (n != 1 && delimiter != '\t')
        return false;
    for (int k = 0; k < n; k++) {
        if (cells[k].quoted)
            return false;
        for (size_t i = 0; i < cells[k].n; i++)
            if (!is_blank(cells[k].s[i]))
                return false;
    }
    return true;
}

static void on_row_end(int terminator, void *data)
{
    (void)terminator;
    struct splitter *sp = data;
    if (sp->rc || !sp->ncells)
        return;
    for (int i = 0; i < sp->ncells; i++)
        sp->cells[i].s = sp->bytes + (uintptr_t)sp->cells[i].s;
    if (!blank_row(sp->cells, sp->ncells, sp->dialect->delimiter))
        sp->rc = sp->row(sp->ctx, sp->cells, sp->ncells, sp->diag);
    sp->ncells = 0;
    sp->nbytes = 0;
}

/* The end of the piece from `from`: just past the next delimiter or line break. */
static size_t piece_end(const char *text, size_t len, size_t from, unsigned char delimiter)
{
    for (size_t i = from; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == delimiter || c == '\n' || c == '\r')
            return i + 1;
    }
    return len;
}

static int only_space(unsigned char c)
{
    return c == ' ';
}

static int no_space(unsigned char c)
{
    (void)c;
    return 0;
}

static int parse_error(struct splitter *sp, struct csv_parser *p, size_t at, bool at_end)
{
    int line, col;
    if (csv_error(p) != CSV_EPARSE)
        return tr_fail_file(sp->diag, TR_ENOMEM, sp->path, 0, 0, "out of memory reading the table (%s)",
                            csv_strerror(csv_error(p)));
    if (at_end) {
        position_of(sp, cell_start(sp), &line, &col);
        return tr_fail_file(sp->diag, TR_EINVAL, sp->path, line, col, "this quoted cell is never closed: a '\"' "
                            "must end it");
    }
    position_of(sp, at, &line, &col);
    if (sp->text[at] == '"')
        return tr_fail_file(sp->diag, TR_EINVAL, sp->path, line, col, "'\"' inside an unquoted cell; quote the "
                            "whole cell and double each '\"' in it (RFC 4180)");
    return tr_fail_file(sp->diag, TR_EINVAL, sp->path, line, col, "text after a quoted cell's closing '\"'; a "
                        "quoted cell ends at the delimiter or the line's end");
}

int tr_csv_rows(const char *path, const char *text, size_t len, const struct tr_csv_dialect *dialect,
                tr_csv_row_fn *row, void *ctx, struct tr_diag *diag)
{
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0)
        return tr_fail_file(diag, TR_ENOMEM, path, 0, 0, "out of memory reading the table");
    csv_set_delim(&p, dialect->delimiter);
    /* 0xff never occurs in UTF-8: with it as the quote, '"' is an ordinary character. */
    csv_set_quote(&p, dialect->quoting ? '"' : 0xff);
    csv_set_space_func(&p, !dialect->trim ? no_space : dialect->delimiter == '\t' ? only_space : NULL);
    size_t pos = len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0;
    struct splitter sp = {.path = path, .text = text, .len = len, .dialect = dialect, .cell_begin = pos,
                          .counted_to = 0, .line = dialect->first_line > 0 ? dialect->first_line : 1,
                          .row = row, .ctx = ctx, .diag = diag};
    while (pos < len && !sp.rc) {
        size_t end = piece_end(text, len, pos, dialect->delimiter);
        sp.piece_end = end;
        size_t done = csv_parse(&p, text + pos, end - pos, on_cell, on_row_end, &sp);
        if (done < end - pos && !sp.rc)
            sp.rc = parse_error(&sp, &p, pos + done, false);
        pos = end;
    }
    sp.piece_end = len;
    if (!sp.rc && csv_fini(&p, on_cell, on_row_end, &sp) != 0 && !sp.rc)
        sp.rc = parse_error(&sp, &p, len, true);
    csv_free(&p);
    free(sp.cells);
    free(sp.bytes);
    return sp.rc;
}

bool tr_csv_is_missing(const struct tr_csv_cell *c)
{
    static const char *const markers[] = {"NA", "N/A", "NaN", "nan", "?", NULL};
    if (!c->n)
        return true;
    for (int i = 0; !c->quoted && markers[i]; i++)
        if (!strcmp(c->s, markers[i]))
            return true;
    return false;
}

/* ---- numbers ------------------------------------------------------------------------------- */

enum { NUM_OK, NUM_BAD, NUM_RANGE };

/* Decimal numbers only: strtod's hex, inf and nan are not data. */
static int parse_number(const struct tr_csv_cell *c, double *out)
{
    if (!c->n || c->n > 63 || strspn(c->s, "0123456789+-.eE") < c->n)
        return NUM_BAD;
    char *end;
    double v = strtod(c->s, &end);
    if (end != c->s + c->n)
        return NUM_BAD;
    if (!isfinite(v) || fabs(v) > FLT_MAX)
        return NUM_RANGE;
    *out = v;
    return NUM_OK;
}

static bool is_whole(double v, double min)
{
    return v == floor(v) && v >= min && v <= INT32_MAX - 1;
}

static bool is_number(const struct tr_csv_cell *c)
{
    double v;
    return parse_number(c, &v) == NUM_OK;
}

/* ---- the table's layout -------------------------------------------------------------------- */

/* A row kept whole (its cells' text copied) until the layout is known. */
struct kept_row {
    struct tr_csv_cell *cells;
    int n;
};

static void keep_row(struct kept_row *k, const struct tr_csv_cell *cells, int n)
{
    k->cells = tr_xcalloc((size_t)n, sizeof *k->cells);
    k->n = n;
    for (int i = 0; i < n; i++) {
        k->cells[i] = cells[i];
        char *s = tr_xmalloc(cells[i].n + 1);
        memcpy(s, cells[i].s, cells[i].n + 1);
        k->cells[i].s = s;
    }
}

static void free_kept(struct kept_row *k)
{
    for (int i = 0; i < k->n; i++)
        free((char *)k->cells[i].s);
    free(k->cells);
    *k = (struct kept_row){0};
}

/* Distinct labels in the order first seen, found by an open-addressing hash of their bytes. */
struct label_set {
    char **names;
    int *line, *col;              /* where each was first seen */
    int n, cap;
    int32_t *slots;               /* index + 1; 0: empty */
    size_t nslots;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 14695981039346656037ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void grow_slots(struct label_set *L)
{
    free(L->slots);
    L->nslots = L->nslots ? 2 * L->nslots : 64;
    L->slots = tr_xcalloc(L->nslots, sizeof *L->slots);
    for (int i = 0; i < L->n; i++) {
        size_t h = hash_bytes(L->names[i], strlen(L->names[i])) & (L->nslots - 1);
        while (L->slots[h])
            h = (h + 1) & (L->nslots - 1);
        L->slots[h] = i + 1;
    }
}

/* The label's id in first-seen order; -1 past TR_CSV_MAX_CLASSES. */
static int label_id(struct label_set *L, const struct tr_csv_cell *c)
{
    if (2 * (size_t)(L->n + 1) > L->nslots)
        grow_slots(L);
    size_t h = hash_bytes(c->s, c->n) & (L->nslots - 1);
    for (; L->slots[h]; h = (h + 1) & (L->nslots - 1)) {
        const char *name = L->names[L->slots[h] - 1];
        if (strlen(name) == c->n && !memcmp(name, c->s, c->n))
            return L->slots[h] - 1;
    }
    if (L->n == TR_CSV_MAX_CLASSES)
        return -1;
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 16;
        L->names = tr_xrealloc(L->names, (size_t)L->cap * sizeof *L->names);
        L->line = tr_xrealloc(L->line, (size_t)L->cap * sizeof *L->line);
        L->col = tr_xrealloc(L->col, (size_t)L->cap * sizeof *L->col);
    }
    L->names[L->n] = tr_strdup(c->s);
    L->line[L->n] = c->line;
    L->col[L->n] = c->col;
    L->slots[h] = L->n + 1;
    return L->n++;
}

static void free_label_set(struct label_set *L)
{
    for (int i = 0; i < L->n; i++)
        free(L->names[i]);
    free(L->names);
    free(L->line);
    free(L->col);
    free(L->slots);
}

static void free_words(char **words)
{
    for (int i = 0; words && words[i]; i++)
        free(words[i]);
    free(words);
}

static int count_words(char *const *words)
{
    int n = 0;
    while (words && words[n])
        n++;
    return n;
}

struct table_reader {
    const char *path;
    const struct tr_csv_options *o;
    struct tr_diag *diag;
    struct kept_row first;         /* the first row, until the second tells what it is */
    bool have_first, laid_out;
    int header;                    /* the header as read: never TR_HEADER_AUTO */
    int ncols, label_col;
    int64_t promised;              /* an sklearn header's n_samples, or -1 */
    char **names;                  /* column names (a header line of names) */
    char **sklearn_names;          /* an sklearn header's class names */
    char *const *class_names;      /* the classes labels name: the caller's, else sklearn's; or NULL */
    int bound;                     /* labels below it; 0: none */
    struct label_set labels;       /* without class_names: the labels as read */
    float *x;
    int32_t *y;
    int64_t n, cap, dropped;
    bool filled_nan;               /* missing: mean left NaN to fill */
};

/* sklearn's `n_samples,n_features,class names…`: its first two cells. */
static bool sklearn_counts(const struct kept_row *r, double *n0, double *n1)
{
    return r->n >= 3 && parse_number(&r->cells[0], n0) == NUM_OK && is_whole(*n0, 0) &&
           parse_number(&r->cells[1], n1) == NUM_OK && is_whole(*n1, 1);
}

/* header: auto (trainrun-dataset(5)): scikit-learn's header line when its first two cells are
 * whole numbers (n_samples ≥ 0, n_features ≥ 1), the second line has n_features + 1 cells, and
 * the first line has a cell that is not a number or another count of cells; else a line of
 * column names when a cell of it that is not a number (nor missing) stands above a number
 * (or, in a file of one line, when no cell of it is a number nor missing); else data. */
static int detect_header(const struct kept_row *first, const struct tr_csv_cell *second, int nsecond)
{
    double n0, n1;
    bool words = false, all_words = true;
    for (int i = 0; i < first->n; i++) {
        bool word = !is_number(&first->cells[i]) && !tr_csv_is_missing(&first->cells[i]);
        words = words || word;
        all_words = all_words && word;
    }
    if (!second)
        return all_words ? TR_HEADER_NAMES : TR_HEADER_NONE;
    if (sklearn_counts(first, &n0, &n1) && nsecond == (int)n1 + 1 && (words || first->n != nsecond))
        return TR_HEADER_SKLEARN;
    for (int i = 0; i < first->n && i < nsecond; i++)
        if (!is_number(&first->cells[i]) && !tr_csv_is_missing(&first->cells[i]) && is_number(&second[i]))
            return TR_HEADER_NAMES;
    return TR_HEADER_NONE;
}

static char **words_of(const struct kept_row *r, int skip)
{
    char **words = tr_xcalloc((size_t)r->n + 1, sizeof *words);
    for (int i = skip; i < r->n; i++)
        words[i - skip] = tr_strdup(r->cells[i].s);
    return words;
}

static int resolve_label(struct table_reader *tr)
{
    const struct tr_csv_options *o = tr->o;
    const char *label = o->label ? o->label : "last";
    int last = tr->ncols - 1;
    const char *digits = label + (label[0] == '-');
    if (!strcmp(label, "last") || !strcmp(label, "first")) {
        tr->label_col = label[0] == 'l' ? last : 0;
        return 0;
    }
    if (*digits && strspn(digits, "0123456789") == strlen(digits)) {
        long col = strlen(digits) > 9 ? LONG_MAX : strtol(label, NULL, 10);
        if (col < 0)
            col += tr->ncols;
        if (col < 0 || col > last) {
            tr_diag_add(tr->diag, o->label_at, "label: column %s does not exist; %s has %d columns (0 to %d, or "
                        "-1 to -%d from the end)", label, tr->path, tr->ncols, last, tr->ncols);
            return TR_EINVAL;
        }
        tr->label_col = (int)col;
        return 0;
    }
    for (int i = 0; tr->names && tr->names[i]; i++)
        if (!strcmp(tr->names[i], label)) {
            tr->label_col = i;
            return 0;
        }
    tr_diag_add(tr->diag, o->label_at, "label: %s has no column named '%s'%s", tr->path, label,
                tr->names ? "" : " (its first line is not a header of column names; set header: true if it is)");
    return TR_EINVAL;
}

/* The classes labels name, and the bound on class numbers. */
static int set_classes(struct table_reader *tr)
{
    int named = count_words(tr->sklearn_names);
    if (tr->o->nclasses && named && named != tr->o->nclasses)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, tr->first.cells[0].line, 1, "the header names %d "
                            "classes; the definition says %d", named, tr->o->nclasses);
    tr->class_names = tr->o->class_names ? tr->o->class_names : tr->sklearn_names;
    int listed = count_words(tr->class_names);
    tr->bound = tr->o->nclasses ? tr->o->nclasses : listed;
    return 0;
}

/* The header (if any), the column count and the label column, from the first two rows. */
static int lay_out(struct table_reader *tr, const struct tr_csv_cell *second, int nsecond)
{
    const struct kept_row *first = &tr->first;
    tr->laid_out = true;
    tr->header = tr->o->header == TR_HEADER_AUTO ? detect_header(first, second, nsecond) : tr->o->header;
    tr->promised = -1;
    double n0, n1;
    if (tr->header == TR_HEADER_SKLEARN) {
        if (!sklearn_counts(first, &n0, &n1))
            return tr_fail_file(tr->diag, TR_EINVAL, tr->path, first->cells[0].line, 1, "expected scikit-learn's "
                                "header line n_samples,n_features,class names…");
        tr->promised = (int64_t)n0;
        tr->ncols = (int)n1 + 1;
        tr->sklearn_names = words_of(first, 2);
    } else if (tr->header == TR_HEADER_NAMES) {
        tr->names = words_of(first, 0);
        tr->ncols = first->n;
    } else
        tr->ncols = first->n;
    if (tr->header != TR_HEADER_NONE && !second)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, 0, 0, "the file holds no samples: only a header line");
    if (tr->ncols < 2)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, first->cells[0].line, 1, "a row needs at least one "
                            "feature and a label; this one has 1 column");
    int rc = resolve_label(tr);
    return rc ? rc : set_classes(tr);
}

/* ---- rows into the table ------------------------------------------------------------------- */

static int missing_cell(struct table_reader *tr, const struct tr_csv_cell *c, bool label)
{
    const char *what = c->n ? c->s : "";
    if (label && tr->o->missing != TR_MISSING_REFUSE)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "the label is missing%s%s%s; a row "
                            "without one can only be left out (missing: drop)", c->n ? " ('" : "", what,
                            c->n ? "')" : "");
    return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "missing value (%s%s%s); set missing: "
                        "drop, zero or mean to accept such cells", c->n ? "'" : "an empty cell", what,
                        c->n ? "'" : "");
}

/* A label as a class of class_names: a name of it, or a class number below the bound. */
static int named_class(struct table_reader *tr, const struct tr_csv_cell *c, int32_t *y)
{
    for (int k = 0; tr->class_names[k]; k++)
        if (!strcmp(tr->class_names[k], c->s) && strlen(tr->class_names[k]) == c->n) {
            *y = k;
            return 0;
        }
    double v;
    if (parse_number(c, &v) == NUM_OK && is_whole(v, 0) && v < tr->bound) {
        *y = (int32_t)v;
        return 0;
    }
    const char *best = NULL;
    int best_d = 3;
    for (int k = 0; tr->class_names[k]; k++) {
        int d = tr_edit_distance(c->s, tr->class_names[k]);
        if (d < best_d)
            best = tr->class_names[k], best_d = d;
    }
    return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "label '%.*s' is not one of the %d "
                        "classes (%s, …) nor a class number below %d%s%s%s", SHOWN, c->s, tr->bound,
                        tr->class_names[0] ? tr->class_names[0] : "", tr->bound, best ? "; did you mean '" : "",
                        best ? best : "", best ? "'?" : "");
}

/* A class name goes into reports and the run's files: one printable line of UTF-8. */
static int check_label_text(struct table_reader *tr, const struct tr_csv_cell *c)
{
    for (size_t i = 0; i < c->n; i++)
        if ((unsigned char)c->s[i] < 0x20 || c->s[i] == 0x7f)
            return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "the label holds a control "
                                "character (byte 0x%02x); class names are one line of text", (unsigned char)c->s[i]);
    utf8proc_int32_t code;
    for (size_t i = 0; i < c->n;) {
        utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)c->s + i, (utf8proc_ssize_t)(c->n - i), &code);
        if (n < 0)
            return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "the label is not UTF-8 (byte "
                                "0x%02x); class names are text", (unsigned char)c->s[i]);
        i += (size_t)n;
    }
    return 0;
}

static int label_of(struct table_reader *tr, const struct tr_csv_cell *c, int32_t *y)
{
    if (tr->class_names)
        return named_class(tr, c, y);
    int rc = check_label_text(tr, c);
    if (rc)
        return rc;
    int id = label_id(&tr->labels, c);
    if (id < 0)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "more than %d distinct labels: is "
                            "column %d (label: %s) the class?", TR_CSV_MAX_CLASSES, tr->label_col,
                            tr->o->label ? tr->o->label : "last");
    *y = id;
    return 0;
}

static int feature_of(struct table_reader *tr, const struct tr_csv_cell *c, float *x)
{
    double v = 0;
    int got = parse_number(c, &v);
    if (got == NUM_BAD)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "'%.*s' is not a number%s", SHOWN,
                            c->s, tr->header == TR_HEADER_NONE && tr->n == 0 && !tr->dropped
                                      ? " (if this line names the columns, set header: true)" : "");
    if (got == NUM_RANGE)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, c->line, c->col, "'%.*s' is out of range for a float",
                            SHOWN, c->s);
    *x = (float)v;
    return 0;
}

/* A row with a missing cell under missing: drop. */
static bool drops(const struct table_reader *tr, const struct tr_csv_cell *cells, int n)
{
    for (int i = 0; tr->o->missing == TR_MISSING_DROP && i < n; i++)
        if (tr_csv_is_missing(&cells[i]))
            return true;
    return false;
}

static int take_row(struct table_reader *tr, const struct tr_csv_cell *cells, int n)
{
    if (n != tr->ncols)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, cells[0].line, 1, "expected %d columns, found %d",
                            tr->ncols, n);
    if (drops(tr, cells, n)) {
        tr->dropped++;
        return 0;
    }
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? 2 * tr->cap : 1024;
        tr->x = tr_xrealloc(tr->x, (size_t)tr->cap * (size_t)(tr->ncols - 1) * sizeof *tr->x);
        tr->y = tr_xrealloc(tr->y, (size_t)tr->cap * sizeof *tr->y);
    }
    float *x = tr->x + (size_t)tr->n * (size_t)(tr->ncols - 1);
    for (int i = 0; i < n; i++) {
        const struct tr_csv_cell *c = &cells[i];
        bool label = i == tr->label_col;
        int rc = 0;
        if (tr_csv_is_missing(c) && (label || tr->o->missing == TR_MISSING_REFUSE))
            rc = missing_cell(tr, c, label);
        else if (label)
            rc = label_of(tr, c, &tr->y[tr->n]);
        else if (tr_csv_is_missing(c)) {
            *x++ = tr->o->missing == TR_MISSING_ZERO ? 0.0f : NAN;
            tr->filled_nan |= tr->o->missing == TR_MISSING_MEAN;
        } else
            rc = feature_of(tr, c, x++);
        if (rc)
            return rc;
    }
    tr->n++;
    return 0;
}

static int on_table_row(void *ctx, const struct tr_csv_cell *cells, int n, struct tr_diag *diag)
{
    (void)diag;
    struct table_reader *tr = ctx;
    if (!tr->have_first) {
        keep_row(&tr->first, cells, n);
        tr->have_first = true;
        return 0;
    }
    if (!tr->laid_out) {
        int rc = lay_out(tr, cells, n);
        if (!rc && tr->header == TR_HEADER_NONE)
            rc = take_row(tr, tr->first.cells, tr->first.n);
        if (rc)
            return rc;
    }
    return take_row(tr, cells, n);
}

/* ---- labels into classes ------------------------------------------------------------------- */

/* Labels all whole numbers ≥ 0 are class numbers: y becomes the numbers, checked against the
 * bound. Returns 1 when they are, 0 when they are names, or an error. */
static int class_numbers(struct table_reader *tr, struct tr_table *t)
{
    const struct label_set *L = &tr->labels;
    int32_t *number = tr_xmalloc((size_t)(L->n ? L->n : 1) * sizeof *number);
    int32_t max = -1;
    for (int i = 0; i < L->n; i++) {
        double v;
        struct tr_csv_cell c = {.s = L->names[i], .n = strlen(L->names[i])};
        if (parse_number(&c, &v) != NUM_OK || !is_whole(v, 0)) {
            free(number);
            return 0;
        }
        number[i] = (int32_t)v;
        if (tr->bound && number[i] >= tr->bound) {
            free(number);
            return tr_fail_file(tr->diag, TR_EINVAL, tr->path, L->line[i], L->col[i], "label %s is out of range: "
                                "%d classes (0 to %d)", L->names[i], tr->bound, tr->bound - 1);
        }
        max = number[i] > max ? number[i] : max;
    }
    for (int64_t r = 0; r < t->n; r++)
        t->y[r] = number[t->y[r]];
    free(number);
    t->nclasses = tr->bound ? tr->bound : max + 1;
    return 1;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Labels that name classes: the classes sorted by their bytes, y renumbered to match. */
static int class_names_from_labels(struct table_reader *tr, struct tr_table *t)
{
    struct label_set *L = &tr->labels;
    if (tr->o->nclasses && tr->o->nclasses != L->n)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, 0, 0, "the labels name %d classes; num_classes says %d",
                            L->n, tr->o->nclasses);
    char **sorted = tr_xcalloc((size_t)L->n + 1, sizeof *sorted);
    memcpy(sorted, L->names, (size_t)L->n * sizeof *sorted);
    qsort(sorted, (size_t)L->n, sizeof *sorted, compare_strings);
    int32_t *id = tr_xmalloc((size_t)L->n * sizeof *id);
    for (int k = 0; k < L->n; k++)   /* label i (first-seen order) → its sorted place k */
        id[label_id(L, &(struct tr_csv_cell){.s = sorted[k], .n = strlen(sorted[k])})] = k;
    for (int64_t r = 0; r < t->n; r++)
        t->y[r] = id[t->y[r]];
    free(id);
    t->class_names = sorted;   /* the strings move from L */
    L->n = 0;
    t->nclasses = count_words(sorted);
    return 0;
}

void tr_csv_classes(char **labels, size_t n, char ***names, int *nclasses)
{
    *names = NULL;
    *nclasses = 0;
    double v;
    for (size_t i = 0; i < n; i++) {
        struct tr_csv_cell c = {.s = labels[i], .n = strlen(labels[i])};
        if (parse_number(&c, &v) != NUM_OK || !is_whole(v, 0))
            break;
        *nclasses = (int)v + 1 > *nclasses ? (int)v + 1 : *nclasses;
        if (i + 1 == n)
            return;
    }
    qsort(labels, n, sizeof *labels, compare_strings);
    *names = tr_xcalloc(n + 1, sizeof **names);
    int k = 0;
    for (size_t i = 0; i < n; i++)
        if (!k || strcmp((*names)[k - 1], labels[i]))
            (*names)[k++] = tr_strdup(labels[i]);
    *nclasses = k;
}

static int finish_table(struct table_reader *tr, struct tr_table *t)
{
    if (tr->promised >= 0 && tr->promised != tr->n + tr->dropped)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, tr->first.cells[0].line, 1, "the header says %lld "
                            "samples; the file holds %lld", (long long)tr->promised, (long long)(tr->n + tr->dropped));
    if (!tr->n)
        return tr_fail_file(tr->diag, TR_EINVAL, tr->path, 0, 0, "the file holds no samples%s",
                            tr->dropped ? ": every row has a missing cell (missing: drop)" : "");
    *t = (struct tr_table){.n = tr->n, .nfeatures = tr->ncols - 1, .rank = 1, .dims = {tr->ncols - 1},
                           .x = tr->x, .y = tr->y, .missing = tr->filled_nan, .dropped = tr->dropped};
    tr->x = NULL;
    tr->y = NULL;
    if (tr->class_names) {
        t->nclasses = tr->bound;
        t->class_names = tr->sklearn_names;
        tr->sklearn_names = NULL;
        return 0;
    }
    int rc = class_numbers(tr, t);
    return rc < 0 ? rc : rc ? 0 : class_names_from_labels(tr, t);
}

int tr_csv_parse(const char *path, const char *text, size_t len, const struct tr_csv_options *o,
                 struct tr_table *t, struct tr_diag *diag)
{
    memset(t, 0, sizeof *t);
    struct table_reader tr = {.path = path, .o = o, .diag = diag};
    struct tr_csv_dialect dialect = {.delimiter = o->delimiter ? o->delimiter : ',', .quoting = true,
                                     .trim = true, .first_line = 1};
    int rc = tr_csv_rows(path, text, len, &dialect, on_table_row, &tr, diag);
    if (!rc && !tr.have_first)
        rc = tr_fail_file(diag, TR_EINVAL, path, 0, 0, "the file is empty");
    if (!rc && !tr.laid_out) {   /* a file of one line */
        rc = lay_out(&tr, NULL, 0);
        if (!rc && tr.header == TR_HEADER_NONE)
            rc = take_row(&tr, tr.first.cells, tr.first.n);
    }
    if (!rc)
        rc = finish_table(&tr, t);
    free_kept(&tr.first);
    free_words(tr.names);
    free_words(tr.sklearn_names);
    free_label_set(&tr.labels);
    free(tr.x);
    free(tr.y);
    if (rc) {   /* a csv table holds no mapping: tr_table_free's other half is not needed */
        free(t->x);
        free(t->y);
        free_words(t->class_names);
        memset(t, 0, sizeof *t);
    }
    return rc;
}
