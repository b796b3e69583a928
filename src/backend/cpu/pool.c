/* PLACEHOLDER: the pool kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_maxpool(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "maxpool: not written yet"); }
int tr_cpu_maxpool_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "maxpool_bwd: not written yet"); }
int tr_cpu_avgpool(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "avgpool: not written yet"); }
int tr_cpu_avgpool_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "avgpool_bwd: not written yet"); }
int tr_cpu_global_avgpool(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "global_avgpool: not written yet"); }
int tr_cpu_global_avgpool_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "global_avgpool_bwd: not written yet"); }
