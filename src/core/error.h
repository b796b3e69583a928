/* Errors as values (STYLE.md), one type for the whole program: a library function returns 0 or
 * a negative TR_E… code and adds the sentence to a struct tr_diag, with the place it concerns
 * (file:line:col, an override). `return tr_fail(d, TR_EDATA, "…");` does both at once; a caller
 * passes a failure on with `if (rc) return rc;`. The recipe stage collects every problem
 * before reporting, so a user fixes them all in one pass. Only src/cli/ turns a code into an
 * exit status (cli/exit.h). */
#ifndef TR_ERROR_H
#define TR_ERROR_H

#include <stdarg.h>
#include <stdio.h>

/* What went wrong, as a caller may need to branch on it; each maps to one exit status
 * (src/cli/exit.c), given beside it. */
enum tr_err {
    TR_OK = 0,
    TR_EINVAL = -1,        /* invalid input: recipe, override, argument, file contents (2) */
    TR_EIO = -2,           /* a file could not be read or written (1) */
    TR_ENOMEM = -3,        /* out of memory (1) */
    TR_ENOFIT = -4,        /* the budget cannot fit the job with any plan (3) */
    TR_EDATA = -5,         /* data could not be fetched, verified or read (4) */
    TR_EDIVERGED = -6,     /* NaN/Inf in the loss or gradients; the loss scale collapsed (5) */
    TR_EREGRESSION = -7,   /* finished, but worse than the promoted run (6) */
    TR_EUNCHANGED = -8,    /* skipped: no data source changed (7) */
    TR_ELOCKED = -9,       /* another run holds the lock (75) */
    TR_EINTERRUPTED = -10, /* stopped by a signal after checkpointing (130) */
    TR_EFAIL = -11,        /* an internal, device or system failure (1) */
    TR_ETIMEUP = -12,      /* budget.time ran out: checkpointed, evaluated and reported (8) */
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
    int code;           /* the first failure's enum tr_err, 0 while none (tr_fail) */
};

void tr_diag_add(struct tr_diag *d, struct tr_where where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tr_diag_vadd(struct tr_diag *d, struct tr_where where, const char *fmt, va_list ap);
/* Adds the sentence, records code as d->code if none was, and returns code: the one-line
 * failure, `return tr_fail(d, TR_EIO, "%s: %s", path, strerror(errno));`. d NULL: the code
 * alone, for a caller that wants no sentence. */
int tr_fail(struct tr_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int tr_fail_at(struct tr_diag *d, int code, struct tr_where where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int tr_vfail(struct tr_diag *d, int code, struct tr_where where, const char *fmt, va_list ap);
/* A callee's failure told in the caller's words: adds "<fmt…>: <why's last sentence>" to d,
 * frees why and returns code. `if (tr_exec_run(x, B, S, &why)) return tr_fail_because(d,
 * TR_EFAIL, &why, "step %lld", t);` */
int tr_fail_because(struct tr_diag *d, int code, struct tr_diag *why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* tr_fail_at for a place in a file, path[:line:col] (line 0: the file as a whole): the data
 * readers' one-line failure. */
int tr_fail_file(struct tr_diag *d, int code, const char *path, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The last sentence added ("" when none): for a caller that wraps it in its own context. */
const char *tr_diag_last(const struct tr_diag *d);
/* The sentence of a code alone ("invalid input", …), for a failure that has no sentence. */
const char *tr_err_name(int code);
/* Writes one line per problem: "file:line:col: message" or "override 'k=v': message". */
void tr_diag_print(const struct tr_diag *d, FILE *out);
/* The same line for item i, in a buffer the caller frees. */
char *tr_diag_line(const struct tr_diag *d, int i);
void tr_diag_free(struct tr_diag *d);

/* printf into a new string; aborts the process on out of memory (the only sane reaction
 * at start-up, where all of this runs). */
char *tr_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *tr_vstrdup_printf(const char *fmt, va_list ap);
char *tr_strdup(const char *s);

/* A file's path, no longer than the kernel takes (PATH_MAX). tr_path_set formats it and
 * refuses (TR_EINVAL, "path too long: …") what does not fit, rather than truncate it to a
 * path that names another file. */
#define TR_PATH_MAX 4096
struct tr_path {
    char s[TR_PATH_MAX];
};
int tr_path_set(struct tr_path *p, struct tr_diag *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *tr_xmalloc(size_t n);
void *tr_xcalloc(size_t n, size_t size);
void *tr_xrealloc(void *p, size_t n);

#endif
