/* OpenBLAS, loaded at run time (dlopen) rather than linked: its start-up code reserves a
 * 128 MiB buffer per thread, and under a small RLIMIT_AS it spins there, before main. Loaded
 * this way it starts only when main has checked the limits (cli/limits.c), or at the first
 * call (unit tests, benches). The kernels call these pointers; <cblas.h> gives the enums. */
#ifndef TR_CORE_BLAS_H
#define TR_CORE_BLAS_H

#include <cblas.h>
#include <stdbool.h>

#include "core/alloc.h"   /* struct tr_space */
#include "core/error.h"

/* The CBLAS routines trainrun calls, by their CBLAS names. Before tr_blas_load each points at
 * a stand-in that loads the library first (or exits 1 saying why it cannot). */
struct tr_blas {
    void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                  float, const float *, blasint, const float *, blasint, float, float *, blasint);
    void (*dgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                  double, const double *, blasint, const double *, blasint, double, double *, blasint);
    void (*sgemv)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, blasint, blasint, float, const float *, blasint,
                  const float *, blasint, float, float *, blasint);
    void (*dgemv)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, blasint, blasint, double, const double *, blasint,
                  const double *, blasint, double, double *, blasint);
    void (*sger)(enum CBLAS_ORDER, blasint, blasint, float, const float *, blasint, const float *, blasint,
                 float *, blasint);
    void (*dger)(enum CBLAS_ORDER, blasint, blasint, double, const double *, blasint, const double *, blasint,
                 double *, blasint);
    char *(*get_config)(void);     /* openblas_get_config: "OpenBLAS 0.3.21 DYNAMIC_ARCH …" */
    char *(*get_corename)(void);   /* openblas_get_corename: the kernels chosen, "Haswell" */
};

/* The table: written once, by the first tr_blas_load (main calls it before any thread
 * starts), and only read afterwards — the dynamic linker's work, done later. */
extern struct tr_blas tr_blas;

/* Loads OpenBLAS (the build configure checked, TR_OPENBLAS_PATH, else its soname) and fills
 * tr_blas; a second call does nothing. 0, or TR_EIO with the loader's reason in d. */
int tr_blas_load(struct tr_diag *d);
/* Whether it is loaded (what it reserves is already in this process's address space). */
bool tr_blas_loaded(void);
/* What loading it added to this process's address space — the library's segments and the
 * buffers its start-up code reserves, one per thread — measured around the dlopen; zeros
 * before. `trainrun calibrate` caches it for the limits check (cli/limits.c). */
struct tr_space tr_blas_load_cost(void);
/* The library must not load in this process: it would not fit the address-space limit, and
 * OpenBLAS spins rather than fail there. A later tr_blas_load fails with TR_ENOFIT and why;
 * a first call ends the process with exit status 3 saying why. */
void tr_blas_forbid(const char *why);

#endif
