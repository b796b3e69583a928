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
    if (n > 0)
        tr_cuda_gpu(0, info->first_name, sizeof info->first_name, &info->first_memory);
}

extern "C" int tr_cuda_gpu(int index, char *name, unsigned long namesize, unsigned long long *memory)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    snprintf(name, namesize, "%s", prop.name);
    *memory = prop.totalGlobalMem;
    return 0;
}
