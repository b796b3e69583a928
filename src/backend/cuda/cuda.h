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
 *  - each instance (tr_backend_open) has its own context on its own device: a stream, a copy
 *    stream, cuBLASLt's and cuDNN's handles and cuDNN's algorithm choices, created by the
 *    first entry that needs them, on the thread that drives the instance (its device made
 *    current there); kernels are queued on the instance's stream and return before they
 *    finish; synchronize waits for them and says what failed. The stream is a blocking one, so a cudaMemcpy on the default stream waits
 *    for the kernels queued before it (what the tests rely on). Ops that check their input on
 *    the host (EMBEDDING, EMBEDDING_BWD, CROSS_ENTROPY(_BWD) and LINEAR_CROSS_ENTROPY(_BWD):
 *    ids and targets in range) wait for the stream themselves;
 *  - one host thread drives an instance at a time (the executor): the context's check words
 *    are shared;
 *  - results do not depend on scheduling: no atomics in float sums, reductions in fixed trees
 *    and fixed chunks. f32 GEMMs (MATMUL, attention's, LINEAR_CROSS_ENTROPY's) and f32
 *    convolutions use TF32 tensor cores (10-bit mantissa products, f32 accumulation: about 1e-3
 *    relative, PyTorch's allow_tf32 default for convolutions); cuBLASLt's and cuDNN's algorithm
 *    choices (cuDNN's: deterministic ones only) may differ between GPUs and library versions;
 *  - the table and opening an instance touch no device: both are safe where no GPU is seen. */
#ifndef TR_CUDA_H
#define TR_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

struct tr_backend_ops;

/* The CUDA backend's table (backend.h); tr_backend_open makes its instances. */
extern const struct tr_backend_ops tr_cuda_ops;

#ifdef __cplusplus
}
#endif

#endif
