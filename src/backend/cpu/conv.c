/* PLACEHOLDER: the conv kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_conv2d(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "conv2d: not written yet"); }
int tr_cpu_conv2d_bwd_data(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "conv2d_bwd_data: not written yet"); }
int tr_cpu_conv2d_bwd_filter(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "conv2d_bwd_filter: not written yet"); }
size_t tr_cpu_conv2d_workspace(const struct tr_node *n, const struct tr_tensor *i, const struct tr_tensor *o) { (void)n, (void)i, (void)o; return 0; }
