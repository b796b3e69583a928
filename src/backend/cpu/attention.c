/* PLACEHOLDER: the attention kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_attention(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "attention: not written yet"); }
int tr_cpu_attention_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "attention_bwd: not written yet"); }
