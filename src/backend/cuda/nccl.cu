/* NCCL for GPU ranks (backend.h: the collective entries): loaded at the first use rather than
 * linked, as cuBLASLt is (cublaslt_load.c) — only a run of several GPU ranks needs it, and a
 * one-GPU run should not map it. One communicator a process: one GPU a rank. Each sum runs on
 * the instance's stream, after the backward's kernels, and is waited for by polling, so that
 * NCCL's asynchronous errors (a rank gone, a broken link) end the wait with a sentence instead
 * of a hang; the communicator is then aborted. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/internal.h"

static struct {
    void *library;
    ncclResult_t (*get_unique_id)(ncclUniqueId *id);
    ncclResult_t (*comm_init_rank)(ncclComm_t *comm, int world, ncclUniqueId id, int rank);
    ncclResult_t (*all_reduce)(const void *send, void *recv, size_t n, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream);
    ncclResult_t (*comm_get_async_error)(ncclComm_t comm, ncclResult_t *error);
    ncclResult_t (*comm_abort)(ncclComm_t comm);
    ncclResult_t (*comm_destroy)(ncclComm_t comm);
    const char *(*get_error_string)(ncclResult_t result);
} nccl;
static ncclComm_t communicator;

/* libnccl.so.2 and its routines, once; 0, or a sentence. */
static int load(struct tr_diag *d)
{
    if (nccl.library)
        return 0;
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tr_fail(d, TR_EFAIL, "NCCL cannot be loaded (%s): GPU ranks sum their gradients with it; it ships "
                       "with the CUDA toolkit (/usr/local/cuda/lib64)", dlerror());
    void *f[] = {dlsym(h, "ncclGetUniqueId"), dlsym(h, "ncclCommInitRank"), dlsym(h, "ncclAllReduce"),
                 dlsym(h, "ncclCommGetAsyncError"), dlsym(h, "ncclCommAbort"), dlsym(h, "ncclCommDestroy"),
                 dlsym(h, "ncclGetErrorString")};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!f[i]) {
            dlclose(h);
            return tr_fail(d, TR_EFAIL, "libnccl.so.2 lacks a routine trainrun calls (NCCL 2.7 or later needed)");
        }
    nccl.get_unique_id = (ncclResult_t (*)(ncclUniqueId *))f[0];
    nccl.comm_init_rank = (ncclResult_t (*)(ncclComm_t *, int, ncclUniqueId, int))f[1];
    nccl.all_reduce = (ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                        cudaStream_t))f[2];
    nccl.comm_get_async_error = (ncclResult_t (*)(ncclComm_t, ncclResult_t *))f[3];
    nccl.comm_abort = (ncclResult_t (*)(ncclComm_t))f[4];
    nccl.comm_destroy = (ncclResult_t (*)(ncclComm_t))f[5];
    nccl.get_error_string = (const char *(*)(ncclResult_t))f[6];
    nccl.library = h;
    return 0;
}

static int failed(struct tr_diag *d, const char *what, ncclResult_t r)
{
    return tr_fail(d, TR_EFAIL, "NCCL %s: %s", what, nccl.get_error_string ? nccl.get_error_string(r) : "failed");
}

int cuda_collective_id(void *id, size_t size, struct tr_diag *d)
{
    if (size < sizeof(ncclUniqueId))
        return tr_fail(d, TR_EINVAL, "internal: a communicator id of %zu bytes, NCCL's is %zu", size,
                       sizeof(ncclUniqueId));
    int rc = load(d);
    if (rc)
        return rc;
    ncclUniqueId made;
    ncclResult_t r = nccl.get_unique_id(&made);
    if (r != ncclSuccess)
        return failed(d, "ncclGetUniqueId", r);
    memcpy(id, &made, sizeof made);
    return 0;
}

int cuda_collective_open(const struct tr_backend *be, const void *id, int world, int rank,
                                    struct tr_diag *d)
{
    int rc = load(d);
    if (rc || !cuda_context_for(be, d))   /* the instance's device made current */
        return rc ? rc : TR_EFAIL;
    ncclUniqueId given;
    memcpy(&given, id, sizeof given);
    ncclResult_t r = nccl.comm_init_rank(&communicator, world, given, rank);
    return r == ncclSuccess ? 0 : failed(d, "ncclCommInitRank", r);
}

int cuda_collective_sum(const struct tr_backend *be, float *data, size_t n, struct tr_diag *d)
{
    struct cuda_context *ctx = cuda_context_for(be, d);
    if (!ctx)
        return TR_EFAIL;
    ncclResult_t r = nccl.all_reduce(data, data, n, ncclFloat, ncclSum, communicator, ctx->stream);
    if (r != ncclSuccess)
        return failed(d, "ncclAllReduce", r);
    for (;;) {   /* waited for by polling: an asynchronous error ends it */
        cudaError_t e = cudaStreamQuery(ctx->stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return tr_fail(d, TR_EFAIL, "the gradients' sum on the GPU: %s", cudaGetErrorString(e));
        ncclResult_t async = ncclSuccess;
        nccl.comm_get_async_error(communicator, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
            nccl.comm_abort(communicator);
            communicator = NULL;
            return failed(d, "(a rank failed while summing)", async);
        }
        struct timespec pause = {0, 20000};
        nanosleep(&pause, NULL);
    }
}

void cuda_collective_close(const struct tr_backend *be)
{
    (void)be;
    if (communicator)
        nccl.comm_destroy(communicator);
    communicator = NULL;
}
