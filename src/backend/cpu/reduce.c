/* PLACEHOLDER: the reduce kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_sum(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "sum: not written yet"); }
int tr_cpu_mean(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "mean: not written yet"); }
int tr_cpu_sum_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "sum_bwd: not written yet"); }
int tr_cpu_argmax(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "argmax: not written yet"); }
