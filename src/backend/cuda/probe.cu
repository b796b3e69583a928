/* The CUDA build's view of the machine (probe.h). Never fails: a machine without a GPU or a
 * driver reports 0 devices, which is what the CPU-only CI machines see. */
#include "backend/cuda/probe.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <string.h>

extern "C" void tr_cuda_probe(struct tr_cuda_info *info)
{
    memset(info, 0, sizeof *info);
    cudaRuntimeGetVersion(&info->runtime_version);
    if (cudaDriverGetVersion(&info->driver_version) != cudaSuccess)
        info->driver_version = 0;
    info->cudnn_version = (long)cudnnGetVersion();
    info->cublaslt_version = (int)cublasLtGetVersion();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   /* clear the sticky "no device" error */
        n = 0;
    }
    info->devices = n;
    if (n > 0) {
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
            snprintf(info->first_name, sizeof info->first_name, "%s", prop.name);
            info->first_memory = prop.totalGlobalMem;
        }
    }
}
