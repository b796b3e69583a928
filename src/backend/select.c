/* Which backend a run trains on (backend.h): the device's kind decides, unless TRAINRUN_BACKEND
 * names one (the tests run the CPU fenced, as a device the host cannot see); tr_backend_open
 * makes an instance of that kind (instance.c). */
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#ifdef HAVE_CUDA
#include "backend/cuda/cuda.h"
#endif

static const struct tr_backend_ops *cuda_ops(struct tr_diag *d)
{
#ifdef HAVE_CUDA
    (void)d;
    return &tr_cuda_ops;
#else
    tr_fail(d, TR_EINVAL, "this trainrun was built without CUDA (configure found no CUDA toolkit); "
            "rebuild where nvcc, cuBLASLt and cuDNN are installed, or train on device: cpu");
    return NULL;
#endif
}

const struct tr_backend_ops *tr_backend_ops_for(int device_kind, struct tr_diag *d)
{
    const char *named = getenv("TRAINRUN_BACKEND");
    if (named && *named) {
        if (!strcmp(named, "cpu"))
            return &tr_cpu_ops;
        if (!strcmp(named, "cpu-fenced"))
            return &tr_cpu_fenced_ops;
        if (!strcmp(named, "cuda"))
            return cuda_ops(d);
        tr_fail(d, TR_EINVAL, "TRAINRUN_BACKEND: expected cpu, cpu-fenced or cuda, got '%s'", named);
        return NULL;
    }
    return device_kind == TR_DEVICE_CUDA ? cuda_ops(d) : &tr_cpu_ops;
}

int tr_backend_open(int device_kind, int device, struct tr_backend **out, struct tr_diag *d)
{
    const struct tr_backend_ops *ops = tr_backend_ops_for(device_kind, d);
    *out = NULL;
    return ops ? tr_backend_open_ops(ops, device, out, d) : TR_EINVAL;
}
