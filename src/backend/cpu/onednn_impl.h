/* What onednn.c (the instance, MATMUL) and onednn_conv.c (the convolutions) share inside the CPU
 * backend: the instance's engine and streams, its counts, the conv cache it owns, and the ways of
 * cutting a batch into fixed pieces and of making a one-thread primitive. Only with oneDNN. */
#ifndef TR_CPU_ONEDNN_IMPL_H
#define TR_CPU_ONEDNN_IMPL_H

#include <dnnl.h>

#include "backend/cpu/onednn.h"

#define MAX_STREAMS 256
#define SCRATCH_ALIGN 64

struct gemm;
struct entry;
struct onednn_conv;   /* onednn_conv.c: the conv primitives and nodes */

struct tr_onednn {
    dnnl_engine_t engine;
    dnnl_stream_t streams[MAX_STREAMS];   /* one per thread slot: a stream is not shared */
    int nstreams;
    struct gemm *gemms;
    int ngemms, cap_gemms;
    struct entry *entries;   /* open addressing on the node's address */
    int nentries, cap_entries;
    struct onednn_conv *conv;   /* NULL until a convolution is met */
    struct tr_onednn_counts counts;
};

/* A size cut into `full` tiles of `tile` and the rest: in one piece, or (binary) in powers of
 * two, largest first. */
struct cut {
    int64_t full, tile, rest;
    bool binary;
};

struct cut tr_onednn_cut_of(int64_t size, int64_t tile, bool binary);
int tr_onednn_cut_count(const struct cut *c);
/* Piece i's offset and size. */
int64_t tr_onednn_cut_at(const struct cut *c, int64_t i, int64_t *size);

/* Whether oneDNN's effective ISA computes bf16 (AVX-512 BF16, AMX): below, 2.6.3 has only
 * reference kernels for bf16 matmuls and convolutions. */
bool tr_onednn_isa_bf16(void);
/* Whether oneDNN runs AVX-512 (core) kernels on this CPU (ONEDNN_MAX_CPU_ISA can lower it). */
bool tr_onednn_isa_avx512(void);
/* The thread slots a node's scratchpads are counted for: two at least (an active region). */
int tr_onednn_slots(void);
/* Threads for `pieces` single-threaded pieces: no more than pieces, o's streams or the slots of
 * `stride` bytes that `have` bytes of workspace hold after `shared`, but two at least (an active
 * region); 0 when not one slot fits. */
struct tr_onednn;
int tr_onednn_threads(const struct tr_onednn *o, int64_t pieces, size_t stride, size_t shared, size_t have);
size_t tr_onednn_aligned(size_t bytes);
/* Whether a size of graph value v (its dims from..to, exclusive) varies with B or S. */
bool tr_onednn_dims_vary(const struct tr_graph *g, int v, int from, int to);
/* A primitive descriptor made, or a primitive from it, while OpenMP's thread count is 1, so its
 * blocking and threading are a one-thread primitive's wherever it runs (onednn.c's head). The
 * descriptor is NULL when oneDNN has no kernel for it but its reference one. */
dnnl_primitive_desc_t tr_onednn_one_thread_pd(const_dnnl_op_desc_t desc, const_dnnl_primitive_attr_t attr,
                                              dnnl_engine_t engine, const_dnnl_primitive_desc_t hint);
/* The same, the first kernel in oneDNN's order that prefer() takes by its name, or the first one
 * when prefer takes none (prefer NULL: the first one, as tr_onednn_one_thread_pd). */
dnnl_primitive_desc_t tr_onednn_one_thread_pd_preferring(const_dnnl_op_desc_t desc, const_dnnl_primitive_attr_t attr,
                                                         dnnl_engine_t engine, const_dnnl_primitive_desc_t hint,
                                                         bool (*prefer)(const char *impl));
dnnl_status_t tr_onednn_one_thread_primitive(dnnl_primitive_t *prim, const_dnnl_primitive_desc_t pd);

/* onednn_conv.c, called by onednn.c's entries for CONV2D and its backwards. */
int tr_onednn_conv_prepare(struct tr_onednn *o, const struct tr_graph *g, const struct tr_node *node,
                           const struct tr_tensor *in, const struct tr_tensor *out, size_t workspace);
size_t tr_onednn_conv_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out);
void tr_onednn_conv_free(struct tr_onednn *o);

#endif
