/* PLACEHOLDER: the embedding kernels are being written; each fails cleanly until then. */
#include "backend/cpu/cpu.h"
int tr_cpu_embedding(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "embedding: not written yet"); }
int tr_cpu_embedding_bwd(const struct tr_kernel_args *a) { return tr_cpu_fail(a, "embedding_bwd: not written yet"); }
