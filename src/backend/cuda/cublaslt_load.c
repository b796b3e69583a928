/* cuBLASLt, loaded at its first call rather than linked: the library maps over 500 MiB, which
 * the dynamic loader would reserve before main — under a small RLIMIT_AS the binary would not
 * even start, let alone say which limit would do (cli/limits.c). These definitions stand for
 * the routines the CUDA backend calls; each looks its real one up once. A library that
 * cannot be loaded makes every call fail with CUBLAS_STATUS_NOT_INITIALIZED. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"   /* the header's own (void)-less declarations */
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "config.h"

static void *library;
static pthread_once_t opened = PTHREAD_ONCE_INIT;
static char failure[512] = "cuBLASLt could not be loaded";

static void open_library(void)
{
    void *h = dlopen(TR_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen(TR_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(failure, sizeof failure, "cuBLASLt could not be loaded: %s", dlerror());
    __atomic_store_n(&library, h, __ATOMIC_RELEASE);
}

/* The routine name of the library, or NULL. */
static void *routine(const char *name)
{
    pthread_once(&opened, open_library);
    void *h = __atomic_load_n(&library, __ATOMIC_ACQUIRE);
    return h ? dlsym(h, name) : NULL;
}

/* One routine: its real one, looked up once (a race looks it up twice, harmlessly). */
#define FORWARD(name, params, args)                                                          \
    cublasStatus_t CUBLASWINAPI name params                                                   \
    {                                                                                         \
        static cublasStatus_t (*real) params;                                                 \
        if (!__atomic_load_n(&real, __ATOMIC_ACQUIRE))                                        \
            __atomic_store_n(&real, (cublasStatus_t (*) params)routine(#name), __ATOMIC_RELEASE); \
        cublasStatus_t (*f) params = __atomic_load_n(&real, __ATOMIC_ACQUIRE);                \
        return f ? f args : CUBLAS_STATUS_NOT_INITIALIZED;                                    \
    }

FORWARD(cublasLtCreate, (cublasLtHandle_t *h), (h))
FORWARD(cublasLtDestroy, (cublasLtHandle_t h), (h))
FORWARD(cublasLtMatmul,
        (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A, cublasLtMatrixLayout_t a,
         const void *B, cublasLtMatrixLayout_t b, const void *beta, const void *C, cublasLtMatrixLayout_t c, void *D,
         cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
         cudaStream_t stream),
        (h, desc, alpha, A, a, B, b, beta, C, c, D, d, algo, workspace, workspace_bytes, stream))
FORWARD(cublasLtMatmulAlgoGetHeuristic,
        (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
         cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
         cublasLtMatmulHeuristicResult_t results[], int *returned),
        (h, desc, a, b, c, d, pref, requested, results, returned))
FORWARD(cublasLtMatmulDescCreate, (cublasLtMatmulDesc_t *desc, cublasComputeType_t compute, cudaDataType_t scale),
        (desc, compute, scale))
FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
FORWARD(cublasLtMatmulDescSetAttribute,
        (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t size),
        (desc, attr, buf, size))
FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t *pref), (pref))
FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
FORWARD(cublasLtMatmulPreferenceSetAttribute,
        (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t size),
        (pref, attr, buf, size))
FORWARD(cublasLtMatrixLayoutCreate, (cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                     uint64_t cols, int64_t ld),
        (layout, type, rows, cols, ld))
FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
FORWARD(cublasLtMatrixLayoutSetAttribute,
        (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void *buf, size_t size),
        (layout, attr, buf, size))

/* The loaded library's version; before anything loaded it (a CPU run's report asks), the
 * version built against, whose soname the loader takes: loading 500 MiB to ask would add
 * some 130 MiB to the resident set after the planner measured it. */
size_t CUBLASWINAPI cublasLtGetVersion(void)
{
    if (!__atomic_load_n(&library, __ATOMIC_ACQUIRE))
        return CUBLAS_VERSION;
    size_t (*f)(void) = (size_t (*)(void))routine("cublasLtGetVersion");
    return f ? f() : 0;
}

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status)
{
    const char *(*f)(cublasStatus_t) = (const char *(*)(cublasStatus_t))routine("cublasLtGetStatusString");
    return f ? f(status) : failure;
}
