/* The error type (error.h), paths that refuse to be truncated, and the few allocation helpers
 * every stage shares. */
#include "core/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* At start-up, where these helpers serve, running out of memory ends the process with the
 * documented failure status rather than a crash. */
static void out_of_memory(void)
{
    fputs("trainrun: out of memory\n", stderr);
    exit(1);   /* TR_EXIT_FAILURE (core/exit.h): the one exit outside main, where no caller can go on */
}

void *tr_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        out_of_memory();
    }
    return p;
}

void *tr_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        out_of_memory();
    }
    return p;
}

void *tr_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        out_of_memory();
    }
    return q;
}

char *tr_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    return memcpy(tr_xmalloc(n), s, n);
}

static char *vprintf_alloc(const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        n = 0;
    char *s = tr_xmalloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *tr_vstrdup_printf(const char *fmt, va_list ap)
{
    return vprintf_alloc(fmt, ap);
}

char *tr_strdup_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vprintf_alloc(fmt, ap);
    va_end(ap);
    return s;
}

void tr_diag_vadd(struct tr_diag *d, struct tr_where where, const char *fmt, va_list ap)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 8;
        d->items = tr_xrealloc(d->items, (size_t)d->cap * sizeof *d->items);
    }
    struct tr_diag_item *it = &d->items[d->n++];
    it->file_copy = tr_strdup(where.file);
    it->arg_copy = tr_strdup(where.arg);
    it->where = where;
    it->where.file = it->file_copy;
    it->where.arg = it->arg_copy;
    it->message = vprintf_alloc(fmt, ap);
}

void tr_diag_add(struct tr_diag *d, struct tr_where where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tr_diag_vadd(d, where, fmt, ap);
    va_end(ap);
}

/* s, at most max bytes of it (then "…"), with control characters written \xNN: bytes from an
 * input (a CSV cell holding ESC ] 0 ; … BEL, a recipe key) never reach a terminal as escapes.
 * newlines: keep '\n', which trainrun puts between the lines of its own messages. */
static void put_escaped(FILE *out, const char *s, size_t max, bool newlines)
{
    size_t n = 0;   /* past max, to the end of the character under way */
    for (; *s && (n < max || ((unsigned char)*s & 0xC0) == 0x80); s++, n++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && c != '\t' && !(c == '\n' && newlines)) || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    if (*s)
        fputs("…", out);
}

/* An override or a file's name is echoed up to this many bytes: a 120 KB argument is named,
 * not repeated. */
#define ECHO_MAX 200

char *tr_diag_line(const struct tr_diag *d, int i)
{
    const struct tr_diag_item *it = &d->items[i];
    const struct tr_where *w = &it->where;
    char *line = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&line, &len);
    if (!out)
        out_of_memory();
    if (w->arg) {
        fputs("override '", out);
        put_escaped(out, w->arg, ECHO_MAX, false);
        fputs("': ", out);
    } else if (w->file) {
        put_escaped(out, w->file, TR_PATH_MAX, false);
        if (w->line > 0)
            fprintf(out, ":%d:%d", w->line, w->col);
        fputs(": ", out);
    }
    put_escaped(out, it->message, SIZE_MAX, true);
    if (fclose(out))
        out_of_memory();
    return line;
}

void tr_diag_print(const struct tr_diag *d, FILE *out)
{
    for (int i = 0; i < d->n; i++) {
        char *line = tr_diag_line(d, i);
        fprintf(out, "%s\n", line);
        free(line);
    }
}

void tr_diag_free(struct tr_diag *d)
{
    for (int i = 0; i < d->n; i++) {
        free(d->items[i].file_copy);
        free(d->items[i].arg_copy);
        free(d->items[i].message);
    }
    free(d->items);
    d->items = NULL;
    d->n = d->cap = 0;
    d->code = 0;
}

int tr_vfail(struct tr_diag *d, int code, struct tr_where where, const char *fmt, va_list ap)
{
    if (!d)
        return code;
    tr_diag_vadd(d, where, fmt, ap);
    if (!d->code)
        d->code = code;
    return code;
}

int tr_fail_at(struct tr_diag *d, int code, struct tr_where where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tr_vfail(d, code, where, fmt, ap);
    va_end(ap);
    return code;
}

int tr_fail_file(struct tr_diag *d, int code, const char *path, int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tr_vfail(d, code, (struct tr_where){.file = path, .line = line, .col = col}, fmt, ap);
    va_end(ap);
    return code;
}

int tr_fail(struct tr_diag *d, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tr_vfail(d, code, (struct tr_where){0}, fmt, ap);
    va_end(ap);
    return code;
}

int tr_fail_because(struct tr_diag *d, int code, struct tr_diag *why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *words = vprintf_alloc(fmt, ap);
    va_end(ap);
    tr_fail(d, code, "%s: %s", words, tr_diag_last(why));
    free(words);
    tr_diag_free(why);
    return code;
}

const char *tr_diag_last(const struct tr_diag *d)
{
    return d->n ? d->items[d->n - 1].message : "";
}

const char *tr_err_name(int code)
{
    switch ((enum tr_err)code) {
    case TR_OK: return "no error";
    case TR_EINVAL: return "invalid input";
    case TR_EIO: return "input/output error";
    case TR_ENOMEM: return "out of memory";
    case TR_ENOFIT: return "the budget cannot fit the job";
    case TR_EDATA: return "the data could not be read";
    case TR_EDIVERGED: return "training diverged";
    case TR_EREGRESSION: return "worse than the promoted run";
    case TR_EUNCHANGED: return "no data source changed";
    case TR_ELOCKED: return "another run holds the lock";
    case TR_EINTERRUPTED: return "interrupted";
    case TR_EFAIL: return "internal failure";
    case TR_ETIMEUP: return "budget.time ran out";
    }
    return "unknown error";
}

int tr_path_set(struct tr_path *p, struct tr_diag *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p->s, sizeof p->s, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof p->s) {
        va_start(ap, fmt);
        char *whole = vprintf_alloc(fmt, ap);
        va_end(ap);
        p->s[0] = '\0';
        tr_fail(d, TR_EINVAL, "path too long (%zu bytes; at most %d): '%.80s…'", strlen(whole),
                TR_PATH_MAX - 1, whole);
        free(whole);
        return TR_EINVAL;
    }
    return 0;
}
