/* The CUDA build's view of the machine (probe.h). Never fails: a machine without a GPU or a
 * driver reports 0 devices, which is what the CPU-only CI machines see. */
#include "backend/cuda/probe.h"

#include "backend/cuda/cuda.h"

extern "C" {
#include "backend/backend.h"
}

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The host link's measurement's buffers, stream and events, released whatever happens (CUDA's
 * error cleared: a failure here only leaves the link unmeasured). */
struct link_probe {
    void *host = NULL, *dev = NULL;
    cudaStream_t stream = NULL;
    cudaEvent_t begin = NULL, end = NULL;
    ~link_probe()
    {
        if (begin)
            cudaEventDestroy(begin);
        if (end)
            cudaEventDestroy(end);
        if (stream)
            cudaStreamDestroy(stream);
        cudaFree(dev);
        cudaFreeHost(host);
        cudaGetLastError();
    }
};

/* One copy's rate over the probe's stream, bytes/s, timed by the device's clock; 0 on failure. */
static double copy_rate(struct link_probe *l, size_t bytes, bool down)
{
    float ms = 0;
    cudaEventRecord(l->begin, l->stream);
    cudaMemcpyAsync(down ? l->host : l->dev, down ? l->dev : l->host, bytes,
                    down ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, l->stream);
    cudaEventRecord(l->end, l->stream);
    if (cudaEventSynchronize(l->end) != cudaSuccess || cudaEventElapsedTime(&ms, l->begin, l->end) != cudaSuccess ||
        ms <= 0)
        return 0;
    return (double)bytes / (ms * 1e-3);
}

/* The host link each way, as offloading uses it: a page-locked buffer copied to the device and
 * back, the best of 4 after one that warms the path (the rate a copy engine keeps, not a first
 * copy's page-table walk). Zeros where the buffers cannot be had: the profile's rate or the
 * default stands then. */
static void measure_link(struct tr_cuda_start *s)
{
    const size_t bytes = (size_t)64 << 20;
    struct link_probe l;
    if (cudaHostAlloc(&l.host, bytes, cudaHostAllocDefault) != cudaSuccess || cudaMalloc(&l.dev, bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&l.begin) != cudaSuccess || cudaEventCreate(&l.end) != cudaSuccess)
        return;
    memset(l.host, 0, bytes);
    double best[2] = {0, 0};
    for (int down = 0; down < 2; down++)
        for (int i = 0; i < 5; i++) {
            double rate = copy_rate(&l, bytes, down);
            if (i > 0 && rate > best[down])
                best[down] = rate;
        }
    if (best[0] > 0 && best[1] > 0)
        s->link_up = best[0], s->link_down = best[1], s->link_bytes = bytes;
}

extern "C" int tr_cuda_start(int index, struct tr_cuda_start *s, char *err, unsigned long errsize)
{
    memset(s, 0, sizeof *s);
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);   /* a user's own setting wins */
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || index >= n) {
        if (e == cudaSuccess && n > 0)
            snprintf(err, errsize, "device: cuda:%d: no such GPU (%d seen: cuda:0 to cuda:%d)", index, n, n - 1);
        else
            snprintf(err, errsize, "device: cuda:%d: no GPU can be used here (CUDA: %s); set device: cpu, or "
                     "device: auto to train on a GPU only where one is seen", index,
                     e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        cudaGetLastError();
        return -1;
    }
    cudaDeviceProp prop;
    if ((e = cudaSetDevice(index)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&prop, index)) != cudaSuccess) {
        snprintf(err, errsize, "device: cuda:%d: cannot start a context: %s", index, cudaGetErrorString(e));
        return -1;
    }
    measure_link(s);   /* its buffers freed before the memory is read */
    /* a backend instance's context (stream, cuBLASLt, its buffers) held while the memory is
     * read, so that what it takes is measured: the trainer's own instance makes the same */
    struct tr_backend *be = NULL;
    struct tr_diag why = {};
    if (tr_backend_open_ops(&tr_cuda_ops, index, &be, &why) || tr_backend_synchronize(be, &why)) {
        snprintf(err, errsize, "device: cuda:%d: %s", index, tr_diag_last(&why));
        tr_backend_close(be);
        tr_diag_free(&why);
        return -1;
    }
    size_t free_bytes = 0, total = 0;
    e = cudaMemGetInfo(&free_bytes, &total);
    tr_backend_close(be);
    if (e != cudaSuccess) {
        snprintf(err, errsize, "device: cuda:%d: cudaMemGetInfo failed: %s", index, cudaGetErrorString(e));
        return -1;
    }
    snprintf(s->name, sizeof s->name, "%s", prop.name);
    s->total = total, s->free = free_bytes;
    s->major = prop.major, s->minor = prop.minor, s->multiprocessors = prop.multiProcessorCount;
    return 0;
}

extern "C" unsigned long long tr_cuda_in_use(void)
{
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return total - free_bytes;
}
