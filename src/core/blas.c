/* The OpenBLAS loader (blas.h): dlopen, then one dlsym per routine into the table. The table
 * starts out pointing at stand-ins that load on first use, so code that never calls
 * tr_blas_load (a unit test, a bench) works unchanged; trainrun itself loads it in main, after
 * the limits check, so that a library that cannot be loaded is said at start (exit 1). */
#include "core/blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core/exit.h"

/* Loads, or ends the process saying why: the stand-ins have no caller to return an error to. */
static void load_or_exit(void)
{
    struct tr_diag d = {0};
    int rc = tr_blas_load(&d);
    if (rc == 0)
        return;
    fprintf(stderr, "trainrun: %s\n", tr_diag_last(&d));
    exit(rc == TR_ENOFIT ? TR_EXIT_NO_FIT : TR_EXIT_FAILURE);   /* what cli/exit.c maps them to */
}

static void first_sgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m,
                        blasint n, blasint k, float alpha, const float *a, blasint lda, const float *b,
                        blasint ldb, float beta, float *c, blasint ldc)
{
    load_or_exit();
    tr_blas.sgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void first_dgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m,
                        blasint n, blasint k, double alpha, const double *a, blasint lda, const double *b,
                        blasint ldb, double beta, double *c, blasint ldc)
{
    load_or_exit();
    tr_blas.dgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void first_sgemv(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE t, blasint m, blasint n, float alpha,
                        const float *a, blasint lda, const float *x, blasint incx, float beta, float *y,
                        blasint incy)
{
    load_or_exit();
    tr_blas.sgemv(o, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

static void first_dgemv(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE t, blasint m, blasint n, double alpha,
                        const double *a, blasint lda, const double *x, blasint incx, double beta, double *y,
                        blasint incy)
{
    load_or_exit();
    tr_blas.dgemv(o, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

static void first_sger(enum CBLAS_ORDER o, blasint m, blasint n, float alpha, const float *x, blasint incx,
                       const float *y, blasint incy, float *a, blasint lda)
{
    load_or_exit();
    tr_blas.sger(o, m, n, alpha, x, incx, y, incy, a, lda);
}

static void first_dger(enum CBLAS_ORDER o, blasint m, blasint n, double alpha, const double *x, blasint incx,
                       const double *y, blasint incy, double *a, blasint lda)
{
    load_or_exit();
    tr_blas.dger(o, m, n, alpha, x, incx, y, incy, a, lda);
}

static char *first_get_config(void)
{
    load_or_exit();
    return tr_blas.get_config();
}

static char *first_get_corename(void)
{
    load_or_exit();
    return tr_blas.get_corename();
}

struct tr_blas tr_blas = {first_sgemm, first_dgemm, first_sgemv, first_dgemv,
                          first_sger,  first_dger,  first_get_config, first_get_corename};

/* The load happens once; the stand-ins may race to it from OpenMP threads. */
static pthread_mutex_t loading = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool loaded;
static struct tr_space load_cost;   /* written once, under the lock */
static char forbidden[512];         /* why it must not load; "" while it may */

/* The library: the build configure checked (the OpenMP one, by its path), else whatever the
 * soname finds (an installed trainrun moved to a host with OpenBLAS elsewhere). */
static void *open_library(struct tr_diag *d)
{
    void *h = dlopen(TR_OPENBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    char first[512];
    snprintf(first, sizeof first, "%s", dlerror());
    if ((h = dlopen(TR_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL)))
        return h;
    tr_fail(d, TR_EIO, "cannot load OpenBLAS: %s; %s (install libopenblas0-openmp)", first, dlerror());
    return NULL;
}

/* Every routine of the table from h, or the name of the first one missing. */
static const char *fill_table(void *h, struct tr_blas *t)
{
    static const struct { const char *name; size_t offset; } routines[] = {
        {"cblas_sgemm", offsetof(struct tr_blas, sgemm)},
        {"cblas_dgemm", offsetof(struct tr_blas, dgemm)},
        {"cblas_sgemv", offsetof(struct tr_blas, sgemv)},
        {"cblas_dgemv", offsetof(struct tr_blas, dgemv)},
        {"cblas_sger", offsetof(struct tr_blas, sger)},
        {"cblas_dger", offsetof(struct tr_blas, dger)},
        {"openblas_get_config", offsetof(struct tr_blas, get_config)},
        {"openblas_get_corename", offsetof(struct tr_blas, get_corename)},
    };
    _Static_assert(sizeof routines / sizeof routines[0] == sizeof(struct tr_blas) / sizeof(void (*)(void)),
                   "every entry of struct tr_blas is looked up");
    for (size_t i = 0; i < sizeof routines / sizeof routines[0]; i++) {
        void *f = dlsym(h, routines[i].name);
        if (!f)
            return routines[i].name;
        memcpy((char *)t + routines[i].offset, &f, sizeof f);
    }
    return NULL;
}

int tr_blas_load(struct tr_diag *d)
{
    if (atomic_load(&loaded))
        return 0;
    pthread_mutex_lock(&loading);
    int rc = 0;
    if (!atomic_load(&loaded) && *forbidden)
        rc = tr_fail(d, TR_ENOFIT, "%s", forbidden);
    else if (!atomic_load(&loaded)) {
        struct tr_space before = tr_process_space();
        void *h = open_library(d);
        struct tr_space after = tr_process_space();
        struct tr_blas t;
        const char *missing = h ? fill_table(h, &t) : NULL;
        if (!h)
            rc = TR_EIO;
        else if (missing)
            rc = tr_fail(d, TR_EIO, "cannot load OpenBLAS: %s has no %s", TR_OPENBLAS_PATH, missing);
        else {
            tr_blas = t;
            load_cost = (struct tr_space){after.size - before.size, after.data - before.data};
            atomic_store(&loaded, true);
        }
    }
    pthread_mutex_unlock(&loading);
    return rc;
}

bool tr_blas_loaded(void)
{
    return atomic_load(&loaded);
}

struct tr_space tr_blas_load_cost(void)
{
    pthread_mutex_lock(&loading);
    struct tr_space cost = load_cost;
    pthread_mutex_unlock(&loading);
    return cost;
}

void tr_blas_forbid(const char *why)
{
    pthread_mutex_lock(&loading);
    snprintf(forbidden, sizeof forbidden, "%s", why);
    pthread_mutex_unlock(&loading);
}
