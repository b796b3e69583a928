/* Which backend a run trains on (backend.h, tr_backend_for): the device's kind decides, unless
 * TRAINRUN_BACKEND names one (the tests run the CPU fenced, as a device the host cannot see). */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "plan/device.h"
#ifdef HAVE_CUDA
#include "backend/cuda/cuda.h"
#endif

static const struct tr_backend *cuda_backend(char *error, size_t size)
{
#ifdef HAVE_CUDA
    (void)error, (void)size;
    return tr_backend_cuda();
#else
    snprintf(error, size, "this trainrun was built without CUDA (configure found no CUDA toolkit); "
             "rebuild where nvcc, cuBLASLt and cuDNN are installed, or train on device: cpu");
    return NULL;
#endif
}

const struct tr_backend *tr_backend_for(int device_kind, char *error, size_t size)
{
    const char *named = getenv("TRAINRUN_BACKEND");
    if (named && *named) {
        if (!strcmp(named, "cpu"))
            return tr_backend_cpu();
        if (!strcmp(named, "cpu-fenced"))
            return tr_backend_cpu_fenced();
        if (!strcmp(named, "cuda"))
            return cuda_backend(error, size);
        snprintf(error, size, "TRAINRUN_BACKEND: expected cpu, cpu-fenced or cuda, got '%s'", named);
        return NULL;
    }
    return device_kind == TR_DEVICE_CUDA ? cuda_backend(error, size) : tr_backend_cpu();
}
