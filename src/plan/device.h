/* The device a plan is made for (DESIGN.md §4): how much memory it has, how fast it computes
 * and moves bytes, and what lives on it outside the allocator's regions. Either this host,
 * measured once and cached (tr_device_host), or a named profile of a machine one does not
 * have, read from a data file (etc/devices.yaml, tr_device_profile). */
#ifndef TR_DEVICE_H
#define TR_DEVICE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"   /* enum tr_device_kind: the backend a device trains on */
#include "core/alloc.h"      /* struct tr_space */
#include "core/error.h"
#include "graph/graph.h"   /* TR_NOPS: a class per op */

/* Rates by the precision GEMMs read: [0] fp32 (TF32 where the profile says the engine uses
 * it), [1] bf16, [2] fp16 — index by enum tr_plan_precision. */
#define TR_NPRECISIONS 3

/* The time model's kernel classes (cost.c: tr_cost_class): one per op of the op table, and a
 * GEMM's by its variant (a·b, a·bᵀ as the forward's linear layers, aᵀ·b as their weight
 * gradients) and its shape (its smallest dimension below 96, below 384, or larger). */
enum { TR_GEMM_NN, TR_GEMM_NT, TR_GEMM_TN, TR_GEMM_VARIANTS };
enum { TR_GEMM_SMALL, TR_GEMM_MEDIUM, TR_GEMM_LARGE, TR_GEMM_SHAPES };
#define TR_COST_CLASSES (TR_NOPS + TR_GEMM_VARIANTS * TR_GEMM_SHAPES)
#define TR_COST_POINTS 8

/* A kernel class's measured time as a function of its work (FLOPs where the op table gives the
 * op FLOPs, else the bytes it reads and writes): points (work, seconds) rising in work, read
 * as a line between neighbours, the first segment's line below them (its intercept is the
 * per-call cost), the last point's rate above them. n = 0: not measured. */
struct tr_cost_curve {
    int n;
    double work[TR_COST_POINTS], seconds[TR_COST_POINTS];
};

/* What `trainrun calibrate` measured by running the CPU backend's kernels on probe graphs of
 * its own (device_kernels.c), by class and by the precision the node reads. */
struct tr_kernel_costs {
    bool measured;
    struct tr_cost_curve curve[TR_COST_CLASSES][TR_NPRECISIONS];
    double exec_node_seconds;    /* the executor's own cost a node, beyond its kernel */
    double optimizer_byte_seconds[2];   /* the update a byte of f32 parameters: [0] SGD-like
                                         * (one state tensor or none), [1] AdamW-like (two) */
    double sumsq_byte_seconds;   /* the gradients' norm, a byte of gradients */
    double fill_byte_seconds;    /* zeroing the gradients, a byte */
};

struct tr_device {
    char name[64];            /* "cpu" (this host), "rtx3090", … */
    char description[160];    /* "NVIDIA GeForce RTX 3090 (24 GiB, Ampere)", "this host: 2 threads, …" */
    int kind;                 /* enum tr_device_kind */
    int index;                /* its number among its kind's (cuda:N): the backend instance's device */
    uint64_t memory;          /* bytes the device holds: CPU, the RAM (or the cgroup's limit) */
    bool supports[TR_NPRECISIONS];   /* the precision can be used at all (fp32 always) */
    double gemm_flops[TR_NPRECISIONS];   /* dense GEMM rate, FLOP/s, sustained */
    double bandwidth;         /* memory bandwidth, bytes/s, sustained */
    double host_link;         /* bytes/s one way between the host's memory and the device's (the
                               * offload's copies): a GPU's measured at start (tr_device_cuda), a
                               * profile's host_link_gbs; 0: tr_device_host_link's default */
    double node_seconds;      /* fixed cost of one kernel (launch, dispatch), seconds */
    double gemm_seconds;      /* CPU: a GEMM's fixed cost beyond its FLOPs at the sustained rate
                               * (packing, threads meeting): what makes small micro-batches slow */
    double special_seconds;   /* CPU: one exp/erf-like evaluation (GELU, softmax, dropout's hash),
                               * all threads together; 0 where such ops are bound by bytes (GPUs) */
    double widen_16bit;       /* CPU: 16-bit operands are widened to f32 before a GEMM (1), or
                               * read as they are (0) */
    bool fp16_widened;        /* CPU: bf16 runs in bf16 (oneDNN, bf16 bodies) but fp16 on widened
                               * f32 copies: fp16 nodes cost fp32's curves plus the widening, not
                               * bf16's (cost.c); false: fp16 reads bf16's curves */
    struct tr_kernel_costs kernels;   /* this host: each kernel class measured; a profile: none */
    bool stable;              /* this host: the calibration's rounds agreed within its tolerance */
    double spread;            /* the larger spread of the last rounds (device_kernels.c), (max − min) / median */
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
    bool unsettled;           /* … because its rounds did not settle (not stable) */
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
/* A field of /proc/meminfo ("MemTotal", "MemAvailable") in bytes; 0 where it cannot be read. */
uint64_t tr_meminfo_bytes(const char *field);

/* This host as a CPU device: RAM (or the memory cgroup's limit when lower), the threads
 * OpenMP will use, and the calibration measured by `exe calibrate` — a clean process, so
 * that what BLAS threads take is seen — cached under cache_dir (one file per host, threads
 * and CPU model) so that nightly runs plan alike. force: measure again. 0, or TR_E… with diag. */
int tr_device_host(struct tr_device *d, const char *exe, const char *cache_dir, bool force,
                   struct tr_diag *diag);
/* How `trainrun calibrate` measures: max_rounds rounds of every probe (the default: the window,
 * for the planner's own first calibration; `trainrun calibrate` takes more), settled when the
 * `window` rounds nearest the median (of the probes' time together, and of the optimizer's
 * passes' together) lie within `tolerance` of it ((max − min) / median). A measurement that
 * does not settle is not cached. */
struct tr_calibration_rule {
    int window, max_rounds;
    double tolerance;
};
#define TR_CALIBRATION_RULE_DEFAULT ((struct tr_calibration_rule){3, 3, 0.10})
#define TR_CALIBRATE_ROUNDS 8   /* `trainrun calibrate`'s cap on rounds */
/* The rule on one series of round times (n of them, at most 64): true when the rule->window
 * values nearest its median lie within the tolerance; *spread gets their spread (∞ when there
 * are fewer than window). */
bool tr_calibration_stable(const double *series, int n, const struct tr_calibration_rule *rule, double *spread);
/* The kernels' part of the measurement (device_kernels.c): the probes run in rounds under
 * rule; sets d->kernels, d->stable and d->spread. 0 or TR_E… with diag. */
int tr_device_measure_kernels(struct tr_device *d, const struct tr_calibration_rule *rule, struct tr_diag *diag);
/* The rule from the environment of `trainrun calibrate` (its options travel to the child that
 * measures as TRAINRUN_CALIBRATE_TOLERANCE and TRAINRUN_CALIBRATE_ROUNDS). */
struct tr_calibration_rule tr_calibration_rule_from_env(void);
/* The kernel costs as the cache keeps them, and back: −1 when j is not such an object. */
json_t *tr_kernel_costs_json(const struct tr_kernel_costs *k);
int tr_kernel_costs_from_json(json_t *j, struct tr_kernel_costs *k);
/* How many (class, precision) curves hold points. */
int tr_kernel_classes_measured(const struct tr_kernel_costs *k);
/* The best rate the calibration measured for op's kernels at a precision: work (FLOPs where the
 * op table gives it FLOPs, else bytes) a second, over every point of its classes' curves (a
 * matmul's every variant and shape); 0 when none was measured. */
double tr_kernel_peak_rate(const struct tr_kernel_costs *k, int op, int precision);
/* A curve's seconds at work (struct tr_cost_curve; cost.c); −1 when the curve has no points. */
double tr_cost_curve_seconds(const struct tr_cost_curve *c, double work);

/* The measurement itself, in this process (the calibrate subcommand): GEMM rate, bandwidth,
 * per-kernel cost and what the threads take. Writes the fields tr_device_host caches. */
int tr_device_measure(struct tr_device *d, const struct tr_calibration_rule *rule, struct tr_diag *diag);
/* That measurement as JSON, as the cache keeps it and `trainrun calibrate --json` prints it;
 * caller frees. */
char *tr_device_calibration_json(const struct tr_device *d);

/* The host link's rate: a GPU's as measured at start, or a profile's host_link_gbs; else a GPU's
 * PCIe 4.0 ×16 (25 GB/s each way, page-locked), and on the CPU a copy within memory (half its
 * calibrated bandwidth: each byte read and written). */
static inline double tr_device_host_link(const struct tr_device *d)
{
    if (d->host_link > 0)
        return d->host_link;
    return d->kind == TR_DEVICE_CUDA ? 25e9 : d->bandwidth > 0 ? d->bandwidth / 2 : 5e9;
}

#endif
