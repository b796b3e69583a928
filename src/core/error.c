/* Diagnostics lists and the few allocation helpers every stage shares. */
#include "core/error.h"

#include "core/exit.h"

#include <stdlib.h>
#include <string.h>

/* At start-up, where these helpers serve, running out of memory ends the process with the
 * documented failure status rather than a crash. */
static void out_of_memory(void)
{
    fputs("trainrun: out of memory\n", stderr);
    exit(TR_EXIT_FAILURE);
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

char *tr_diag_line(const struct tr_diag *d, int i)
{
    const struct tr_diag_item *it = &d->items[i];
    const struct tr_where *w = &it->where;
    if (w->arg)
        return tr_strdup_printf("override '%s': %s", w->arg, it->message);
    if (w->file && w->line > 0)
        return tr_strdup_printf("%s:%d:%d: %s", w->file, w->line, w->col, it->message);
    if (w->file)
        return tr_strdup_printf("%s: %s", w->file, it->message);
    return tr_strdup(it->message);
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
}
