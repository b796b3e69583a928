/* The CUDA backend (DESIGN.md §3, issue 12): the kernel table of backend.h on an NVIDIA GPU —
 * cuBLASLt for MATMUL and the GEMMs inside attention and the fused classifier, cuDNN for the
 * convolutions and training-mode batch norm, own kernels for the rest, and the table's memory
 * and optimizer entries (device.cu). src/backend/cuda/README lists what is done; an op whose
 * slot is NULL is refused by tr_backend_run with "op X has no CUDA kernel yet".
 *
 * What a caller must know:
 *  - every tensor's .data and the workspace are device pointers; args->rng and its sample_ids
 *    (int64, one per row of dim 0, when not NULL) are host memory: DROPOUT copies the ids to
 *    the context's buffer when they changed since its last call;
 *  - kernels are queued on the backend's one stream (created with the context, on the first
 *    kernel run) and return before they finish; tr_cuda_synchronize waits for them and says
 *    what failed. The stream is a blocking one, so a cudaMemcpy on the default stream waits
 *    for the kernels queued before it (what the tests rely on). Ops that check their input on
 *    the host (EMBEDDING, EMBEDDING_BWD, CROSS_ENTROPY(_BWD) and LINEAR_CROSS_ENTROPY(_BWD):
 *    ids and targets in range) wait for the stream themselves;
 *  - one host thread drives the backend at a time (the executor): the context's check words
 *    are shared;
 *  - results do not depend on scheduling: no atomics in float sums, reductions in fixed trees
 *    and fixed chunks. f32 GEMMs (MATMUL, attention's, LINEAR_CROSS_ENTROPY's) and f32
 *    convolutions use TF32 tensor cores (10-bit mantissa products, f32 accumulation: about 1e-3
 *    relative, PyTorch's allow_tf32 default for convolutions); cuBLASLt's and cuDNN's algorithm
 *    choices (cuDNN's: deterministic ones only) may differ between GPUs and library versions;
 *  - creating the table touches no device: tr_backend_cuda() is safe where no GPU is seen. */
#ifndef TR_CUDA_H
#define TR_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

struct tr_backend;

const struct tr_backend *tr_backend_cuda(void);

/* Waits for every queued kernel; 0, or TR_EINVAL with a sentence in error (size bytes) naming
 * what failed (an asynchronous fault surfaces here, not in the kernel call that caused it). */
int tr_cuda_synchronize(char *error, unsigned long size);

#ifdef __cplusplus
}
#endif

#endif
