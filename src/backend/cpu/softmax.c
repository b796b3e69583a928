/* PLACEHOLDER: the softmax kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_softmax(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "softmax: not written yet"); }
int tr_cpu_log_softmax(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "log_softmax: not written yet"); }
int tr_cpu_softmax_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "softmax_bwd: not written yet"); }
int tr_cpu_log_softmax_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "log_softmax_bwd: not written yet"); }
int tr_cpu_cross_entropy(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "cross_entropy: not written yet"); }
int tr_cpu_cross_entropy_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "cross_entropy_bwd: not written yet"); }
