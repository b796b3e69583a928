/* The device a plan is made for (DESIGN.md §4): how much memory it has, how fast it computes
 * and moves bytes, and what lives on it outside the allocator's regions. Either this host,
 * measured once and cached (tr_device_host), or a named profile of a machine one does not
 * have, read from a data file (etc/devices.yaml, tr_device_profile). */
#ifndef TR_DEVICE_H
#define TR_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"   /* enum tr_device_kind: the backend a device trains on */
#include "core/alloc.h"      /* struct tr_space */
#include "core/error.h"

/* Rates by the precision GEMMs read: [0] fp32 (TF32 where the profile says the engine uses
 * it), [1] bf16, [2] fp16 — index by enum tr_plan_precision. */
#define TR_NPRECISIONS 3

struct tr_device {
    char name[64];            /* "cpu" (this host), "rtx3090", … */
    char description[160];    /* "NVIDIA GeForce RTX 3090 (24 GiB, Ampere)", "this host: 2 threads, …" */
    int kind;                 /* enum tr_device_kind */
    int index;                /* its number among its kind's (cuda:N): the backend instance's device */
    uint64_t memory;          /* bytes the device holds: CPU, the RAM (or the cgroup's limit) */
    bool supports[TR_NPRECISIONS];   /* the precision can be used at all (fp32 always) */
    double gemm_flops[TR_NPRECISIONS];   /* dense GEMM rate, FLOP/s, sustained */
    double bandwidth;         /* memory bandwidth, bytes/s, sustained */
    double node_seconds;      /* fixed cost of one kernel (launch, dispatch), seconds */
    double gemm_seconds;      /* CPU: a GEMM's fixed cost beyond its FLOPs at the sustained rate
                               * (packing, threads meeting): what makes small micro-batches slow */
    double special_seconds;   /* CPU: one exp/erf-like evaluation (GELU, softmax, dropout's hash),
                               * all threads together; 0 where such ops are bound by bytes (GPUs) */
    double widen_16bit;       /* CPU: 16-bit operands are widened to f32 before a GEMM (1), or
                               * read as they are (0) */
    /* What lives on the device outside the regions. */
    uint64_t context_bytes;   /* CUDA: the context and loaded modules; CPU: 0 (measured as the
                               * process's resident set at planning) */
    uint64_t thread_bytes;    /* CPU: what BLAS and OpenMP threads take once they have run (their
                               * buffers and stacks), for `threads` threads */
    uint64_t library_workspace;   /* cuBLAS/cuDNN workspaces the engine does not plan */
    /* CPU: address space (RLIMIT_AS, RLIMIT_DATA) reserved beyond what is touched, measured
     * by `trainrun calibrate` as /proc/self/status VmSize and VmData deltas: loading OpenBLAS
     * (its segments, a buffer per thread), OpenMP's threads' first parallel region and GEMM
     * (stacks, malloc arenas, the calling thread's BLAS buffer), one more thread (a loader
     * worker: its stack and arena). Zeros for a profile. */
    struct tr_space blas_space, thread_space, worker_space;
    int threads;              /* CPU: the threads the engine runs with */
    bool this_host;           /* this host (tr_device_host), not a profile of another machine */
    char source[512];         /* where the numbers come from: a measurement and its date, or the
                               * profile's cited sources */
    struct tr_path path;      /* the profile file, or the calibration cache, read; "" when none */
    char unsaved[512];        /* why a calibration measured now could not be cached ("path: why"),
                               * for `trainrun calibrate`; "" when it was, or no cache was asked for */
};

/* The profile `name` from the profiles file at path (etc/devices.yaml). 0, or TR_EINVAL when
 * there is no such profile (diag lists the names there are) or the file or entry is malformed,
 * TR_EIO when it cannot be read; diag holds the sentence. */
int tr_device_profile(const char *path, const char *name, struct tr_device *d, struct tr_diag *diag);
/* The profile names in the file at path, comma-separated, into out. 0 or TR_E…. */
int tr_device_profile_names(const char *path, char *out, size_t size);

/* GPU index as a CUDA device: its context started (tr_cuda_start), its memory and the
 * context's cost measured now, its rates from the cuda profile in the profiles file at path
 * whose description names the same GPU model (or assumed, said in source). 0, or TR_EINVAL
 * with diag (no GPU, no such index, a build without CUDA). */
int tr_device_cuda(struct tr_device *d, int index, const char *profiles, struct tr_diag *diag);
/* Whether this build sees a GPU (device: auto trains on it when it does). */
bool tr_device_cuda_seen(void);
/* A CUDA device's memory in use now, all processes' (total − free), for predicted-against-
 * measured; 0 for the CPU or when it cannot be read. */
int64_t tr_device_in_use(const struct tr_device *d);

/* This host as a CPU device: RAM (or the memory cgroup's limit when lower), the threads
 * OpenMP will use, and the calibration measured by `exe calibrate` — a clean process, so
 * that what BLAS threads take is seen — cached under cache_dir (one file per host, threads
 * and CPU model) so that nightly runs plan alike. force: measure again. 0, or TR_E… with diag. */
int tr_device_host(struct tr_device *d, const char *exe, const char *cache_dir, bool force,
                   struct tr_diag *diag);
/* The measurement itself, in this process (the calibrate subcommand): GEMM rate, bandwidth,
 * per-kernel cost and what the threads take. Writes the fields tr_device_host caches. */
int tr_device_measure(struct tr_device *d, struct tr_diag *diag);
/* That measurement as JSON, as the cache keeps it and `trainrun calibrate --json` prints it;
 * caller frees. */
char *tr_device_calibration_json(const struct tr_device *d);

#endif
