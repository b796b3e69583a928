/* PLACEHOLDER: the dropout kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_dropout(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "dropout: not written yet"); }
