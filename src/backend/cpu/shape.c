/* PLACEHOLDER: the shape kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_permute(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "permute: not written yet"); }
int tr_cpu_slice(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "slice: not written yet"); }
int tr_cpu_slice_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "slice_bwd: not written yet"); }
int tr_cpu_concat(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "concat: not written yet"); }
int tr_cpu_gather(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "gather: not written yet"); }
int tr_cpu_gather_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "gather_bwd: not written yet"); }
int tr_cpu_masked_fill(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "masked_fill: not written yet"); }
int tr_cpu_cast(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "cast: not written yet"); }
