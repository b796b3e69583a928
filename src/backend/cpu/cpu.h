/* Shared by the CPU backend's kernel files: each file writes its kernels once over a type
 * `real` and includes that body twice (f32 and f64, see template.h); the kernel tr_cpu_<op>,
 * defined under that name in its file, picks one by the first input's dtype. 16-bit tensors
 * reach the f32 kernels as f32 copies (widen.c). Threads: OpenMP over independent outputs only. */
#ifndef TR_CPU_H
#define TR_CPU_H

#include <stdarg.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/cpu/onednn.h"
#include "core/error.h"

/* Loops over fewer elements than this run on the calling thread (`#pragma omp parallel for
 * if (n >= TR_CPU_GRAIN)`): opening a parallel region costs microseconds, and on a loaded
 * machine the wait for a descheduled thread at its join — the MLP recipe's step was mostly
 * that. 32768 is PyTorch's grain too. Only loops that split independent outputs carry it (the
 * bits never depend on it), and none that calls BLAS (outside an active region OpenBLAS would
 * start threads of its own). */
#define TR_CPU_GRAIN 32768
/* The same for dropout's elements, each of which costs a quarter of ten Philox rounds, about
 * eight plain elements' time: below TR_CPU_GRAIN on one thread the MLP recipe's 64 × 256
 * dropouts took 35 µs each, twice what two threads take (AMD EPYC Zen 4). */
#define TR_CPU_DRAW_GRAIN (TR_CPU_GRAIN / 8)

/* Every kernel of the CPU table (cpu.c), named tr_cpu_<op>. */
int tr_cpu_matmul(const struct tr_kernel_args *a);
int tr_cpu_bias_add(const struct tr_kernel_args *a);
int tr_cpu_add(const struct tr_kernel_args *a);
int tr_cpu_mul(const struct tr_kernel_args *a);
int tr_cpu_scale(const struct tr_kernel_args *a);
int tr_cpu_relu(const struct tr_kernel_args *a);
int tr_cpu_gelu(const struct tr_kernel_args *a);
int tr_cpu_tanh(const struct tr_kernel_args *a);
int tr_cpu_softmax(const struct tr_kernel_args *a);
int tr_cpu_log_softmax(const struct tr_kernel_args *a);
int tr_cpu_cross_entropy(const struct tr_kernel_args *a);
int tr_cpu_linear_cross_entropy(const struct tr_kernel_args *a);
int tr_cpu_layernorm(const struct tr_kernel_args *a);
int tr_cpu_embedding(const struct tr_kernel_args *a);
int tr_cpu_dropout(const struct tr_kernel_args *a);
int tr_cpu_attention(const struct tr_kernel_args *a);
int tr_cpu_conv2d(const struct tr_kernel_args *a);
int tr_cpu_batchnorm(const struct tr_kernel_args *a);
int tr_cpu_maxpool(const struct tr_kernel_args *a);
int tr_cpu_avgpool(const struct tr_kernel_args *a);
int tr_cpu_global_avgpool(const struct tr_kernel_args *a);
int tr_cpu_permute(const struct tr_kernel_args *a);
int tr_cpu_slice(const struct tr_kernel_args *a);
int tr_cpu_concat(const struct tr_kernel_args *a);
int tr_cpu_gather(const struct tr_kernel_args *a);
int tr_cpu_masked_fill(const struct tr_kernel_args *a);
int tr_cpu_cast(const struct tr_kernel_args *a);
int tr_cpu_sum(const struct tr_kernel_args *a);
int tr_cpu_mean(const struct tr_kernel_args *a);
int tr_cpu_argmax(const struct tr_kernel_args *a);
int tr_cpu_bias_grad(const struct tr_kernel_args *a);
int tr_cpu_relu_bwd(const struct tr_kernel_args *a);
int tr_cpu_gelu_bwd(const struct tr_kernel_args *a);
int tr_cpu_tanh_bwd(const struct tr_kernel_args *a);
int tr_cpu_softmax_bwd(const struct tr_kernel_args *a);
int tr_cpu_log_softmax_bwd(const struct tr_kernel_args *a);
int tr_cpu_cross_entropy_bwd(const struct tr_kernel_args *a);
int tr_cpu_linear_cross_entropy_bwd(const struct tr_kernel_args *a);
int tr_cpu_layernorm_bwd(const struct tr_kernel_args *a);
int tr_cpu_embedding_bwd(const struct tr_kernel_args *a);
int tr_cpu_attention_bwd(const struct tr_kernel_args *a);
int tr_cpu_conv2d_bwd_data(const struct tr_kernel_args *a);
int tr_cpu_conv2d_bwd_filter(const struct tr_kernel_args *a);
int tr_cpu_batchnorm_bwd(const struct tr_kernel_args *a);
int tr_cpu_maxpool_bwd(const struct tr_kernel_args *a);
int tr_cpu_avgpool_bwd(const struct tr_kernel_args *a);
int tr_cpu_global_avgpool_bwd(const struct tr_kernel_args *a);
int tr_cpu_slice_bwd(const struct tr_kernel_args *a);
int tr_cpu_gather_bwd(const struct tr_kernel_args *a);
int tr_cpu_sum_bwd(const struct tr_kernel_args *a);
int tr_cpu_accumulate(const struct tr_kernel_args *a);

/* The table of those kernels by op (cpu.c): the CPU's and the fenced CPU's. */
extern const tr_kernel_fn tr_cpu_kernels[TR_NOPS];
/* The CPU's workspace_bytes entry (cpu.c): the kernels' scratch plus the f32 copies of 16-bit
 * tensors. */
size_t tr_cpu_workspace_bytes(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);

/* Workspace of the kernels that need scratch (conv2d's im2col, the fused classifier's logits,
 * attention's tiles). */
typedef size_t (*tr_cpu_workspace_fn)(const struct tr_node *node, const struct tr_tensor *in,
                                      const struct tr_tensor *out);
size_t tr_cpu_batchnorm_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                  const struct tr_tensor *out);
size_t tr_cpu_conv2d_workspace(const struct tr_node *node, const struct tr_tensor *in,
                               const struct tr_tensor *out);
/* LINEAR_CROSS_ENTROPY and its backward on oneDNN's bf16 GEMMs (softmax.c): the workspace it
 * needs (0: it does not take the node), its primitives made at prepare, and the run (*ran false:
 * the widened path runs instead, nothing written). */
struct tr_onednn;
size_t tr_cpu_lce_onednn_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);
int tr_cpu_lce_onednn_prepare(struct tr_onednn *o, const struct tr_node *node, const struct tr_tensor *in,
                              const struct tr_tensor *out);
int tr_cpu_lce_onednn(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran);

/* ATTENTION and its backward on bf16 as stored, their tiles' GEMMs on oneDNN's bf16 kernels
 * (attention.c), the same three entries. */
size_t tr_cpu_attention_onednn_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                         const struct tr_tensor *out);
int tr_cpu_attention_onednn_prepare(struct tr_onednn *o, const struct tr_graph *g, const struct tr_node *node,
                                    const struct tr_tensor *in, const struct tr_tensor *out);
int tr_cpu_attention_onednn(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran);

size_t tr_cpu_linear_cross_entropy_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                             const struct tr_tensor *out);
size_t tr_cpu_attention_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                  const struct tr_tensor *out);

/* 16-bit storage (widen.c): runs the kernel on f32 copies of the node's bf16/f16 tensors,
 * placed at the start of the workspace, unless the op takes them as they are (shape.c's). */
int tr_cpu_run_widened(tr_kernel_fn kernel, const struct tr_kernel_args *a);
/* The kernel's own workspace for those f32 copies (kernel_workspace on the f32 shapes) plus
 * the copies; in and out hold node->nin and node->nout tensors. */
size_t tr_cpu_widened_workspace(const struct tr_node *node, const struct tr_tensor *in,
                                const struct tr_tensor *out, tr_cpu_workspace_fn kernel_workspace);
/* A run of n elements from f32, bf16 or f16 to f32 and back (round to nearest even). */
void tr_cpu_widen_run(const void *src, enum tr_dtype t, float *dst, int64_t n);
void tr_cpu_narrow_run(const float *src, void *dst, enum tr_dtype t, int64_t n);

/* C[p] (+)= op(A[p])·op(B[p]), p < P, in fixed tm × tn output tiles (matmul.inc says more):
 * the one GEMM every kernel uses, so that results never depend on the thread count. */
void tr_cpu_gemm_f32(int ta, int tb, int64_t P, int64_t M, int64_t N, int64_t K, const float *A,
                     int64_t a_stride, const float *B, int64_t b_stride, float beta, float *C, int64_t tm,
                     int64_t tn);
void tr_cpu_gemm_f64(int ta, int tb, int64_t P, int64_t M, int64_t N, int64_t K, const double *A,
                     int64_t a_stride, const double *B, int64_t b_stride, double beta, double *C,
                     int64_t tm, int64_t tn);

/* OpenBLAS's kernels (blas.c): when the ones it chose lack AVX2 on a CPU that has it, sets
 * OPENBLAS_CORETYPE and executes argv again (returns only when it does not); the name chosen. */
void tr_cpu_blas_pick_core(char **argv);
const char *tr_cpu_blas_core(void);

/* The memory and optimizer entries of the table (device.c); the instance is not used (the CPU
 * keeps no state), so the fenced backend calls them with its own. */
int tr_cpu_copy(const struct tr_backend *be, void *dst, const void *src, size_t bytes, enum tr_copy direction,
                struct tr_diag *d);
int tr_cpu_fill(const struct tr_backend *be, void *dst, int byte, size_t bytes, struct tr_diag *d);
int tr_cpu_synchronize(const struct tr_backend *be, struct tr_diag *d);
int tr_cpu_optim_step(const struct tr_backend *be, const struct tr_optim_args *a);
int tr_cpu_grad_sumsq(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq);
int tr_cpu_grad_scale(const struct tr_backend *be, const struct tr_optim_args *a, float factor, bool *finite);

/* What the instance's oneDNN cache holds (onednn.h); zeros for the shared instance, the fenced
 * backend's and a build without oneDNN. */
struct tr_onednn_counts tr_cpu_onednn_counts(const struct tr_backend *be);

/* Adds the sentence to a->diag (when there is one) and returns TR_EINVAL (fail.c). */
int tr_cpu_fail(const struct tr_kernel_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Rows and the last dim of a tensor seen as a matrix [rows, cols]. */
static inline int64_t tr_cpu_cols(const struct tr_tensor *t) { return t->rank ? t->dim[t->rank - 1] : 1; }
static inline int64_t tr_cpu_rows(const struct tr_tensor *t) { return tr_tensor_numel(t) / (t->rank ? t->dim[t->rank - 1] : 1); }

/* A kernel's f32 or f64 body (written once in its .inc) by the first input's dtype: each
 * kernel is defined, under its own name, as `int tr_cpu_<op>(const struct tr_kernel_args *a)
 * { return TR_CPU_BY_DTYPE(a, <op>); }`, inlined. */
static inline int tr_cpu_by_dtype(const struct tr_kernel_args *a, const char *name, tr_kernel_fn f32,
                                  tr_kernel_fn f64)
{
    switch (a->in[0].dtype) {
    case TR_F32: return f32(a);
    case TR_F64: return f64(a);
    case TR_BF16: case TR_F16: case TR_I32: case TR_U8: case TR_NDTYPES:
        break;
    }
    return tr_cpu_fail(a, "%s: %s tensors are not supported on the CPU", name, tr_dtype_name(a->in[0].dtype));
}
#define TR_CPU_BY_DTYPE(a, op) tr_cpu_by_dtype(a, #op, op##_f32, op##_f64)

/* Whether the op's bf16 body (instantiate.h's TR_KERNEL_BF16) takes the node as it is stored:
 * its activations bf16, and in f32 the tensors amp keeps there beside them (a bias, batch
 * norm's per-channel tensors; widen.c's table). */
bool tr_cpu_bf16_body_takes(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);

/* TR_CPU_BY_DTYPE for a body built for bf16 storage too, which widen.c hands the nodes it takes. */
static inline int tr_cpu_by_dtype16(const struct tr_kernel_args *a, const char *name, tr_kernel_fn f32,
                                    tr_kernel_fn f64, tr_kernel_fn bf16)
{
    if (a->in[0].dtype != TR_BF16)
        return tr_cpu_by_dtype(a, name, f32, f64);
    if (!tr_cpu_bf16_body_takes(a->node, a->in, a->out))
        return tr_cpu_fail(a, "%s: these dtypes do not reach its bf16 body", name);
    return bf16(a);
}
#define TR_CPU_BY_DTYPE16(a, op) tr_cpu_by_dtype16(a, #op, op##_f32, op##_f64, op##_bf16)

#endif
