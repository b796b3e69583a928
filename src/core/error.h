/* Errors as values (STYLE.md): a function returns 0 or a negative TR_E… code and adds
 * sentences to a struct tr_diag list, each with the place it concerns. The recipe stage
 * collects every problem before reporting, so a user fixes them all in one pass. */
#ifndef TR_ERROR_H
#define TR_ERROR_H

#include <stdarg.h>
#include <stdio.h>

enum tr_err {
    TR_OK = 0,
    TR_EINVAL = -1,   /* invalid input (recipe, override, argument) */
    TR_EIO = -2,      /* a file could not be read or written */
    TR_ENOMEM = -3,   /* out of memory */
};

/* Where a problem is: a file position, an override argument, or nowhere in particular. */
struct tr_where {
    const char *file;   /* NULL when not about a file */
    int line, col;      /* 1-based; 0 when unknown */
    const char *arg;    /* the command-line override, when about one */
};

struct tr_diag_item {
    struct tr_where where;
    char *file_copy;    /* owns where.file's text */
    char *arg_copy;     /* owns where.arg's text */
    char *message;
};

struct tr_diag {
    struct tr_diag_item *items;
    int n, cap;
};

void tr_diag_add(struct tr_diag *d, struct tr_where where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tr_diag_vadd(struct tr_diag *d, struct tr_where where, const char *fmt, va_list ap);
/* Writes one line per problem: "file:line:col: message" or "override 'k=v': message". */
void tr_diag_print(const struct tr_diag *d, FILE *out);
/* The same line for item i, in a buffer the caller frees. */
char *tr_diag_line(const struct tr_diag *d, int i);
void tr_diag_free(struct tr_diag *d);

/* printf into a new string; aborts the process on out of memory (the only sane reaction
 * at start-up, where all of this runs). */
char *tr_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *tr_strdup(const char *s);
void *tr_xmalloc(size_t n);
void *tr_xcalloc(size_t n, size_t size);
void *tr_xrealloc(void *p, size_t n);

#endif
