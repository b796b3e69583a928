/* oneDNN in the CPU backend: MATMUL's GEMMs as oneDNN matmul primitives (and f32 convolutions,
 * onednn_conv.c, unless TR_CPU_CONV=im2col), made when a program is
 * prepared (backend.h: prepare) and kept in the instance's cache, never in a global. bf16
 * operands compute in bf16 with f32 accumulation where the CPU has the instructions (AVX-512
 * BF16, AMX); f32 runs on oneDNN where the CPU has AVX-512 and on OpenBLAS below, unless
 * TR_CPU_GEMM (onednn, openblas) decides. Every other node, and every node oneDNN
 * cannot take, runs as before (OpenBLAS, 16-bit through f32 copies): decided at prepare. */
#ifndef TR_CPU_ONEDNN_H
#define TR_CPU_ONEDNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

struct tr_onednn;   /* an instance's engine, streams, primitives and counts */

/* What the cache holds and when it was filled: prepare's primitives, and those a kernel had to
 * make itself because its node was not prepared at these shapes (each one is a creation inside
 * a training step: zero when the trainer prepared every bucket). */
struct tr_onednn_counts {
    int64_t primitives;       /* made, at prepare and in kernels */
    int64_t made_in_kernels;  /* of those, made by a kernel: not prepared */
    int64_t native_nodes;     /* nodes whose GEMMs run on oneDNN */
    int64_t fallback_nodes;   /* nodes oneDNN would take but cannot (no kernel, scratch over budget) */
};

/* The instance's oneDNN (*out; NULL when trainrun is built without it): 0, or TR_EFAIL. */
int tr_onednn_open(struct tr_onednn **out, struct tr_diag *d);
void tr_onednn_close(struct tr_onednn *o);

/* Makes the primitives one node needs at its bound shapes (in, out: node->nin, node->nout
 * tensors), g saying which sizes vary with the micro-batch: those get primitives for every
 * piece they can be cut into (onednn.c), so smaller batches need none made in the step.
 * workspace: the node's workspace at these shapes (tr_cpu_workspace_bytes); a node whose
 * scratchpads would not fit it, or that oneDNN has no kernel for, stays on the default path. 0. */
int tr_onednn_prepare(struct tr_onednn *o, const struct tr_graph *g, const struct tr_node *node,
                      const struct tr_tensor *in, const struct tr_tensor *out, size_t workspace, struct tr_diag *d);

/* Runs a MATMUL on oneDNN when its node is one oneDNN takes (*ran set; the code returned),
 * else leaves it to the caller (*ran false, 0). o NULL: never. */
int tr_onednn_matmul(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran);

/* Runs a CONV2D, CONV2D_BWD_DATA or CONV2D_BWD_FILTER on oneDNN when its node is one oneDNN
 * takes (f32; onednn_conv.c), as tr_onednn_matmul does. */
int tr_onednn_conv(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran);

/* The workspace a node takes on oneDNN at these shapes (its scratchpads, one per thread), 0 for
 * nodes it does not take: a function of the shapes, this CPU and TR_CPU_GEMM alone, as the
 * planner needs (backend.h: workspace_bytes). */
size_t tr_onednn_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);

/* One GEMM of fixed shapes for a kernel that multiplies inside itself (the fused classifier
 * and loss): C (+= when acc) op(A)·op(B), row-major, [M, N] over K, cut into tm × tn tiles as
 * MATMUL's are (single-threaded pieces, the bits independent of the threads). bf16 operands
 * only, C bf16 or f32, where the CPU computes bf16. */
struct tr_onednn_gemm {
    int ta, tb, acc;
    int64_t M, N, K, tm, tn;
    enum tr_dtype at, bt, yt;
};

/* Whether oneDNN runs the shape on this CPU (a function of it alone, for the planner). */
bool tr_onednn_gemm_available(const struct tr_onednn_gemm *s);
/* Makes its primitives (at prepare): 0, or −1 when oneDNN cannot. */
int tr_onednn_gemm_prepare(struct tr_onednn *o, const struct tr_onednn_gemm *s);
/* Whether prepare made its primitives. */
bool tr_onednn_gemm_ready(struct tr_onednn *o, const struct tr_onednn_gemm *s);
/* Its scratchpads, one per thread: the workspace it needs besides the caller's own. */
size_t tr_onednn_gemm_workspace(const struct tr_onednn_gemm *s);
/* Runs it with the primitives prepare made (none is made here): 0; −1 when they are not there
 * or the workspace is short (the caller takes its own path, nothing written); 1 when oneDNN
 * failed. */
int tr_onednn_gemm_run(struct tr_onednn *o, const struct tr_onednn_gemm *s, const void *A, const void *B, void *C,
                       void *workspace, size_t workspace_bytes);

/* The same service for kernels that run their own threads (attention's tiles): a shape
 * multiplied whole, as one single-threaded piece on the calling thread. prepare it as above with
 * tm ≥ M and tn ≥ N; its piece (NULL when prepare did not make it) stays valid until the next
 * prepare. tr_onednn_gemm_scratch: its scratchpad bytes for one thread, as the planner needs
 * them (a function of the shape and this CPU). run: on stream `slot` (each thread its own, below
 * tr_onednn_streams), the scratchpad at `scratch` (tr_onednn_piece_scratch bytes): 0, or 1 when
 * oneDNN failed. */
struct tr_onednn_piece;
size_t tr_onednn_gemm_scratch(const struct tr_onednn_gemm *s);
const struct tr_onednn_piece *tr_onednn_gemm_piece(struct tr_onednn *o, const struct tr_onednn_gemm *s);
size_t tr_onednn_piece_scratch(const struct tr_onednn_piece *piece);
int tr_onednn_piece_run(struct tr_onednn *o, const struct tr_onednn_piece *piece, const void *A, const void *B,
                        void *C, void *scratch, int slot);
int tr_onednn_streams(const struct tr_onednn *o);

struct tr_onednn_counts tr_onednn_counts_of(const struct tr_onednn *o);

/* Whether this CPU multiplies bf16 matrices in bf16 (AVX-512 BF16 or AMX, and TR_CPU_GEMM not
 * openblas): then the planner gives bf16 plans 16-bit working copies of the weights, which
 * those GEMMs read as they are (plan/build.c); elsewhere they would only be widened back. */
bool tr_onednn_computes_bf16(void);

/* "oneDNN 2.6.3, avx2 ISA" for --version; "not built" without it. */
void tr_onednn_describe(char *buf, size_t n);

#endif
