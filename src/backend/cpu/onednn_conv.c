/* CONV2D, CONV2D_BWD_DATA and CONV2D_BWD_FILTER on oneDNN (onednn.h), the graph's layout in and
 * out (NCHW or NHWC): f32, and bf16 (f32 accumulation) where the CPU computes it (AVX-512 BF16, AMX); f64, f16,
 * bf16 on other CPUs (widened), TR_CPU_CONV=im2col and whatever oneDNN refuses stay on conv.c's
 * im2col + OpenBLAS path, decided per node at prepare. A bf16 filter gradient's pieces are f32
 * partials, summed in f32 and rounded to bf16 once.
 *
 * Layouts: images channels last (attrs.conv.channels_last, the graph's on the CPU: plan/build.c)
 * go to oneDNN as nhwc, read and written in place: no reorder but the weights' (Zen 4, the
 * ResNet: the reorders below had been 14% of the f32 step, 18% of the bf16 one). An output is
 * buffered only when accumulated (the reorder's sum post-op, dst = src + dst in f32). Images
 * [N, C, H, W]: on AVX2 oneDNN 2.6.3's direct convolutions (jit:avx2, jit_1x1:avx2) want blocked
 * activations (nChw8c) and weights (OIhw8i8o); given NCHW it falls back to its own im2col + GEMM,
 * 2–3× slower (Zen 3, one thread, 16 images of the recipes' ResNet shapes). So there each piece
 * of images is reordered into blocked buffers in the node's workspace, convolved and reordered
 * back, the weights once per call.
 *
 * Determinism: the batch is cut into groups of GROUP images and the last group into powers of
 * two (tr_onednn_cut_of); each piece is one single-threaded primitive execution inside the OpenMP
 * region, as MATMUL's tiles are (onednn.c's head says why that is one thread's primitive). The
 * filter gradient sums over images: each piece writes its own blocked partial into the
 * workspace, and the partials are added in piece order. The bits depend on N, never on threads.
 *
 * Primitives are made at prepare for every piece size up to the bucket's N (GROUP, 8, 4, 2, 1
 * where the batch varies), in a cache keyed by op, sizes and accumulation that nodes of the same
 * shapes share; all sizes of one shape use the weights layout oneDNN picks for a full group, so
 * the weights are reordered once whatever the pieces. */
#include "config.h"

#include "backend/cpu/onednn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"

#ifdef HAVE_ONEDNN
#include <omp.h>

#include "backend/cpu/onednn_impl.h"

/* 16 images: one thread's primitive runs at 45–90 GFLOP/s on the ResNet's shapes from 8 images
 * on (Zen 3), and 128-image batches still give 8 pieces to share among the threads. */
#define GROUP 16
#define MAX_SIZES 8   /* GROUP, GROUP/2, …, 1 */

enum role { IN0, IN1, OUT, NROLES };   /* in[0], in[1], out[0] of the node */
enum kind { ACT_X, ACT_Y, WEIGHTS };   /* x [n, C, H, W], y [n, O, Ho, Wo], w [O, C, kh, kw] */

/* Each op's tensors: what they are and how oneDNN names them. */
static const struct {
    enum kind kind[NROLES];
    int arg[NROLES];
    dnnl_query_t md[NROLES];
} op_roles[3] = {
    {{ACT_X, WEIGHTS, ACT_Y}, {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
     {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md}},
    {{ACT_Y, WEIGHTS, ACT_X}, {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
     {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md}},
    {{ACT_Y, ACT_X, WEIGHTS}, {DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS},
     {dnnl_query_diff_dst_md, dnnl_query_src_md, dnnl_query_diff_weights_md}},
};

/* A convolution piece: its op (0 forward, 1 backward data, 2 backward filter), n images, the
 * sizes, and whether the output is accumulated. */
struct conv_shape {
    int op, acc, nhwc;   /* nhwc: the activations channels last (attrs.conv.channels_last) */
    dnnl_data_type_t dt;   /* every tensor's: f32 or bf16 */
    int64_t n, C, H, W, O, kh, kw, Ho, Wo, stride, pad;
};

/* The descriptors of one piece's tensors, plain (the graph's) and oneDNN's, and its scratchpad. */
struct conv_mds {
    dnnl_memory_desc_t plain[NROLES], blocked[NROLES], scratch;
};

struct conv_prim {
    struct conv_shape key;
    struct conv_mds md;
    dnnl_primitive_t conv;
    /* inputs: plain → blocked, NULL where they are the same; the output: blocked → plain, with
     * the sum post-op when accumulating */
    dnnl_primitive_t reorder[NROLES];
};

/* A node: its shapes at the largest micro-batch prepared, and the primitives of its piece sizes. */
struct conv_node {
    const struct tr_node *node;
    struct conv_shape shape;
    bool native, varies;
    int prim[MAX_SIZES], nprims;
};

struct onednn_conv {
    struct conv_prim *prims;
    int nprims, cap_prims;
    struct conv_node *nodes;
    int nnodes, cap_nodes;
};

/* TR_CPU_CONV: "im2col" keeps every convolution on conv.c's path. */
static bool conv_wanted(void)
{
    const char *v = getenv("TR_CPU_CONV");
    return !v || strcmp(v, "im2col") != 0;
}

static bool is_conv(enum tr_op op)
{
    return op == TR_OP_CONV2D || op == TR_OP_CONV2D_BWD_DATA || op == TR_OP_CONV2D_BWD_FILTER;
}

/* The node's convolution when oneDNN takes it (f32 throughout, or bf16 throughout on a CPU that
 * computes it; something to compute). */
static bool conv_takes(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                       struct conv_shape *s)
{
    /* the filter gradient on AVX2: oneDNN 2.6.3's gave other bits on 3 threads than on 1 (AMD EPYC,
     * tests/threads.sh's ResNet, 2026-12-06; its pieces and their sum are fixed, so the cause is
     * inside the primitive, not found yet): kept on im2col there, which is thread-invariant */
    if (node->op == TR_OP_CONV2D_BWD_FILTER && !tr_onednn_isa_avx512())
        return false;
    if (!is_conv(node->op) || !conv_wanted() || in[1].dtype != in[0].dtype || out[0].dtype != in[0].dtype ||
        !(in[0].dtype == TR_F32 || (in[0].dtype == TR_BF16 && tr_onednn_isa_bf16())))
        return false;
    int op = node->op == TR_OP_CONV2D ? 0 : node->op == TR_OP_CONV2D_BWD_DATA ? 1 : 2;
    const struct tr_tensor *t[NROLES] = {&in[0], &in[1], &out[0]}, *x = NULL, *y = NULL, *w = NULL;
    for (int r = 0; r < NROLES; r++) {
        enum kind k = op_roles[op].kind[r];
        *(k == ACT_X ? &x : k == ACT_Y ? &y : &w) = t[r];
    }
    struct tr_image_axes a = tr_image_axes(node->attrs.conv.channels_last);
    *s = (struct conv_shape){.op = op, .acc = node->accumulate,
                             .nhwc = node->attrs.conv.channels_last == TR_NHWC,
                             .dt = in[0].dtype == TR_F32 ? dnnl_f32 : dnnl_bf16, .n = x->dim[0],
                             .C = x->dim[a.c], .H = x->dim[a.h], .W = x->dim[a.w], .O = w->dim[0],
                             .kh = w->dim[2], .kw = w->dim[3], .Ho = y->dim[a.h], .Wo = y->dim[a.w],
                             .stride = node->attrs.conv.stride, .pad = node->attrs.conv.pad};
    return s->n > 0 && s->C > 0 && s->H > 0 && s->W > 0 && s->O > 0 && s->Ho > 0 && s->Wo > 0;
}

static bool same_sizes(const struct conv_shape *a, const struct conv_shape *b)
{
    return a->op == b->op && a->acc == b->acc && a->nhwc == b->nhwc && a->dt == b->dt && a->C == b->C && a->H == b->H && a->W == b->W && a->O == b->O &&
           a->kh == b->kh && a->kw == b->kw && a->Ho == b->Ho && a->Wo == b->Wo && a->stride == b->stride &&
           a->pad == b->pad;
}

/* ---- descriptors ------------------------------------------------------------------------------- */

/* A tensor of the piece in the graph's layout (plain) or oneDNN's choice (any), of type dt.
 * Channels last, the activations stay as they are: oneDNN's direct kernels take nhwc (AVX-512,
 * AVX2) at the blocked layouts' speed, within 8% (Zen 4, one thread, the ResNet's shapes; bench/
 * README), and the reorders either side cost more than that. */
static void typed_md(const struct conv_shape *s, enum kind k, bool any, dnnl_data_type_t dt, dnnl_memory_desc_t *md)
{
    dnnl_dims_t x = {s->n, s->C, s->H, s->W}, y = {s->n, s->O, s->Ho, s->Wo}, w = {s->O, s->C, s->kh, s->kw};
    dnnl_format_tag_t plain = k == WEIGHTS ? dnnl_oihw : s->nhwc ? dnnl_nhwc : dnnl_nchw;
    dnnl_format_tag_t tag = any && (k == WEIGHTS || !s->nhwc) ? dnnl_format_tag_any : plain;
    dnnl_memory_desc_init_by_tag(md, 4, k == ACT_X ? x : k == ACT_Y ? y : w, dt, tag);
}

/* The same in the piece's type. */
static void tensor_md(const struct conv_shape *s, enum kind k, bool any, dnnl_memory_desc_t *md)
{
    typed_md(s, k, any, s->dt, md);
}

/* A forward channels last: oneDNN 2.6.3 lists its brgemm convolution first, but without AMX the
 * direct one is faster on nhwc (Zen 4, one thread, the ResNet's shapes: bf16 5–18%, f32 2–7%;
 * bench/README). With AMX, brgemm is the AMX kernel: kept. */
static bool direct_unless_amx(const char *impl)
{
    return strncmp(impl, "brgconv:", 8) != 0 || strstr(impl, "amx") != NULL;
}

/* The piece's primitive descriptor, activations in oneDNN's layouts and the weights in
 * `weights` (NULL: its choice too); a backward one hinted by the forward one, as oneDNN asks.
 * NULL when it has no kernel for it but its reference one. */
static dnnl_primitive_desc_t conv_pd(dnnl_engine_t engine, const struct conv_shape *s,
                                     const dnnl_memory_desc_t *weights)
{
    dnnl_memory_desc_t x, y, w, hint_w;
    tensor_md(s, ACT_X, true, &x), tensor_md(s, ACT_Y, true, &y), tensor_md(s, WEIGHTS, true, &hint_w);
    if (weights)
        w = *weights;
    else   /* the filter gradient in f32 always: its pieces' partials are summed in f32 */
        typed_md(s, WEIGHTS, true, s->op == 2 ? dnnl_f32 : s->dt, &w);
    if (s->op == 0)
        hint_w = w;   /* a backward's hint keeps its own choice: a layout for backward data may have no forward kernel */
    /* padding on both sides, as the op's contract: Ho = (H + 2·pad − kh) / stride + 1 */
    dnnl_dims_t strides = {s->stride, s->stride}, pad = {s->pad, s->pad}, pad_r = {s->pad, s->pad};
    dnnl_convolution_desc_t fwd, bwd;
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &x, &hint_w, NULL, &y,
                                           strides, pad, pad_r) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        return NULL;
    dnnl_primitive_desc_t pd = NULL, hint = NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success)
        hint = s->nhwc && s->op == 0 ? tr_onednn_one_thread_pd_preferring(&fwd, attr, engine, NULL, direct_unless_amx)
                                     : tr_onednn_one_thread_pd(&fwd, attr, engine, NULL);
    dnnl_status_t st = dnnl_success;
    if (s->op == 1)
        st = dnnl_convolution_backward_data_desc_init(&bwd, dnnl_convolution_direct, &x, &w, &y, strides, pad, pad_r);
    else if (s->op == 2)
        st = dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &x, &w, NULL, &y, strides,
                                                         pad, pad_r);
    if (s->op == 0)
        pd = hint, hint = NULL;
    else if (hint && st == dnnl_success)
        pd = tr_onednn_one_thread_pd(&bwd, attr, engine, hint);
    dnnl_primitive_desc_destroy(hint);
    dnnl_primitive_attr_destroy(attr);
    return pd;
}

/* The weights layout every piece of these sizes uses: oneDNN's choice for a full group. */
static bool weights_md_of(dnnl_engine_t engine, const struct conv_shape *s, dnnl_memory_desc_t *md)
{
    struct conv_shape group = *s;
    group.n = GROUP;
    dnnl_primitive_desc_t pd = conv_pd(engine, &group, NULL);
    if (!pd)
        return false;
    int r = op_roles[s->op].kind[IN1] == WEIGHTS ? IN1 : OUT;
    *md = *dnnl_primitive_desc_query_md(pd, op_roles[s->op].md[r], 0);
    dnnl_primitive_desc_destroy(pd);
    return true;
}

/* The piece's descriptors, from its primitive descriptor. */
static void mds_of(const_dnnl_primitive_desc_t pd, const struct conv_shape *s, struct conv_mds *m)
{
    for (int r = 0; r < NROLES; r++) {
        tensor_md(s, op_roles[s->op].kind[r], false, &m->plain[r]);
        m->blocked[r] = *dnnl_primitive_desc_query_md(pd, op_roles[s->op].md[r], 0);
    }
    m->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
}

/* Whether role r is read or written through a buffer in the workspace: an input oneDNN wants in
 * another layout, or an activation output in another layout or accumulated (the reorder back
 * writes the graph's tensor, adding to it). */
static bool buffered(const struct conv_mds *m, int op, int acc, int r)
{
    if (r == OUT && op_roles[op].kind[OUT] == WEIGHTS)
        return false;
    return (r == OUT && acc) || !dnnl_memory_desc_equal(&m->plain[r], &m->blocked[r]);
}

static size_t md_bytes(const dnnl_memory_desc_t *md)
{
    return tr_onednn_aligned(dnnl_memory_desc_get_size(md));
}

/* ---- the workspace ----------------------------------------------------------------------------- */

/* Pieces of a batch of n images. */
static int pieces_of(int64_t n)
{
    struct cut c = tr_onednn_cut_of(n, GROUP, true);
    return tr_onednn_cut_count(&c);
}

/* The most pieces of any batch up to n images: the filter gradient's partials. */
static int most_pieces(int64_t n)
{
    int most = 0;
    for (int64_t i = n > 2 * GROUP ? n - GROUP : 1; i <= n; i++)
        most = pieces_of(i) > most ? pieces_of(i) : most;
    return most;
}

/* The part of the workspace before the thread slots: the blocked weights (forward, backward
 * data; when oneDNN wants them in another layout) or each piece's partial filter gradient. */
static size_t shared_bytes(const struct conv_mds *m, int op, int pieces)
{
    if (op == 2)
        return (size_t)pieces * md_bytes(&m->blocked[OUT]);
    return buffered(m, op, 0, IN1) ? md_bytes(&m->blocked[IN1]) : 0;
}

/* One thread's slot: its buffered activations and the scratchpad. */
static size_t slot_bytes(const struct conv_mds *m, int op, int acc)
{
    size_t bytes = md_bytes(&m->scratch);
    for (int r = 0; r < NROLES; r++)
        if (op_roles[op].kind[r] != WEIGHTS && buffered(m, op, acc, r))
            bytes += md_bytes(&m->blocked[r]);
    return bytes;
}

/* Where role r of the slot's piece lies in it (roles in order, then the scratchpad). */
static size_t slot_offset(const struct conv_mds *m, int op, int acc, int upto)
{
    size_t at = 0;
    for (int r = 0; r < upto; r++)
        if (op_roles[op].kind[r] != WEIGHTS && buffered(m, op, acc, r))
            at += md_bytes(&m->blocked[r]);
    return at;
}

size_t tr_onednn_conv_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct conv_shape s;
    if (!conv_takes(node, in, out, &s))
        return 0;
    dnnl_engine_t engine;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        return 0;
    size_t bytes = 0;
    dnnl_memory_desc_t w;
    struct conv_shape piece = s;
    piece.n = s.n < GROUP ? s.n : GROUP;   /* the largest piece: prepare takes a node only where all fit */
    dnnl_primitive_desc_t pd = weights_md_of(engine, &s, &w) ? conv_pd(engine, &piece, &w) : NULL;
    if (pd) {
        struct conv_mds m;
        mds_of(pd, &piece, &m);
        bytes = shared_bytes(&m, s.op, most_pieces(s.n)) + slot_bytes(&m, s.op, s.acc) * (size_t)tr_onednn_slots();
    }
    dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(engine);
    return bytes;
}

/* ---- primitives -------------------------------------------------------------------------------- */

static bool shape_equal(const struct conv_shape *a, const struct conv_shape *b)
{
    return a->n == b->n && same_sizes(a, b);
}

/* A reorder from one layout to another (dst = src, or dst = src + dst with sum), counted. */
static bool reorder_of(struct tr_onednn *o, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, bool sum,
                       dnnl_primitive_t *prim, bool in_kernel)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && sum)
        ok = dnnl_post_ops_create(&ops) == dnnl_success && dnnl_post_ops_append_sum(ops, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
    ok = ok && dnnl_reorder_primitive_desc_create(&pd, from, o->engine, to, o->engine, attr) == dnnl_success;
    /* a reorder needing a scratchpad would need room the layout has not counted */
    ok = ok && dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) == 0;
    ok = ok && tr_onednn_one_thread_primitive(prim, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    if (ok)
        o->counts.primitives++, o->counts.made_in_kernels += in_kernel;
    return ok;
}

static void prim_destroy(struct conv_prim *p)
{
    dnnl_primitive_destroy(p->conv);
    for (int r = 0; r < NROLES; r++)
        dnnl_primitive_destroy(p->reorder[r]);
}

/* Makes a piece's convolution and reorders. */
static bool prim_make(struct tr_onednn *o, const struct conv_shape *s, struct conv_prim *p, bool in_kernel)
{
    *p = (struct conv_prim){.key = *s};
    dnnl_memory_desc_t w;
    if (!weights_md_of(o->engine, s, &w))
        return false;
    dnnl_primitive_desc_t pd = conv_pd(o->engine, s, &w);
    if (!pd)
        return false;
    mds_of(pd, s, &p->md);
    bool ok = tr_onednn_one_thread_primitive(&p->conv, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    if (ok)
        o->counts.primitives++, o->counts.made_in_kernels += in_kernel;
    for (int r = 0; ok && r < NROLES; r++) {
        const struct conv_mds *m = &p->md;
        if (r != OUT && buffered(m, s->op, s->acc, r))
            ok = reorder_of(o, &m->plain[r], &m->blocked[r], false, &p->reorder[r], in_kernel);
        else if (r == OUT && (buffered(m, s->op, s->acc, r) || op_roles[s->op].kind[OUT] == WEIGHTS))
            ok = reorder_of(o, &m->blocked[r], &m->plain[r], s->acc, &p->reorder[r], in_kernel);
    }
    if (!ok)
        prim_destroy(p);
    return ok;
}

/* The index of the primitives for s in the cache, made when there are none; -1 when oneDNN
 * cannot make them. */
static int prim_for(struct tr_onednn *o, const struct conv_shape *s, bool in_kernel)
{
    struct onednn_conv *c = o->conv;
    for (int i = 0; i < c->nprims; i++)
        if (shape_equal(&c->prims[i].key, s))
            return i;
    struct conv_prim made;
    if (!prim_make(o, s, &made, in_kernel))
        return -1;
    if (c->nprims == c->cap_prims) {
        c->cap_prims = c->cap_prims ? 2 * c->cap_prims : 64;
        c->prims = tr_xrealloc(c->prims, (size_t)c->cap_prims * sizeof *c->prims);
    }
    c->prims[c->nprims] = made;
    return c->nprims++;
}

void tr_onednn_conv_free(struct tr_onednn *o)
{
    struct onednn_conv *c = o->conv;
    if (!c)
        return;
    for (int i = 0; i < c->nprims; i++)
        prim_destroy(&c->prims[i]);
    free(c->prims), free(c->nodes), free(c);
    o->conv = NULL;
}

/* ---- nodes ------------------------------------------------------------------------------------- */

/* The node's entry, a new one (no shapes yet) when it has none. Nodes are few (a ResNet-50 has
 * 160 convolutions with their backwards): a list. */
static struct conv_node *node_of(struct tr_onednn *o, const struct tr_node *node)
{
    if (!o->conv)
        o->conv = tr_xcalloc(1, sizeof *o->conv);
    struct onednn_conv *c = o->conv;
    for (int i = 0; i < c->nnodes; i++)
        if (c->nodes[i].node == node)
            return &c->nodes[i];
    if (c->nnodes == c->cap_nodes) {
        c->cap_nodes = c->cap_nodes ? 2 * c->cap_nodes : 64;
        c->nodes = tr_xrealloc(c->nodes, (size_t)c->cap_nodes * sizeof *c->nodes);
    }
    c->nodes[c->nnodes] = (struct conv_node){.node = node};
    return &c->nodes[c->nnodes++];
}

static const struct conv_prim *node_prim(const struct tr_onednn *o, const struct conv_node *e, int64_t n)
{
    for (int i = 0; i < e->nprims; i++)
        if (o->conv->prims[e->prim[i]].key.n == n)
            return &o->conv->prims[e->prim[i]];
    return NULL;
}

/* The workspace the node needs at n images with these primitives. */
static size_t node_bytes(const struct tr_onednn *o, const struct conv_node *e, int64_t n, int pieces, size_t *stride)
{
    size_t slot = 0, shared = 0;
    for (int i = 0; i < e->nprims; i++) {
        const struct conv_prim *p = &o->conv->prims[e->prim[i]];
        if (p->key.n > n)
            continue;
        size_t b = slot_bytes(&p->md, p->key.op, p->key.acc), s = shared_bytes(&p->md, p->key.op, pieces);
        slot = b > slot ? b : slot, shared = s > shared ? s : shared;
    }
    *stride = slot;
    return shared;
}

/* Adds the primitives for every piece size of batches up to s->n images (varies) or of s->n to
 * e; false when one cannot be made or they would not fit `budget` bytes of workspace. */
static bool add_sizes(struct tr_onednn *o, struct conv_node *e, const struct conv_shape *s, bool varies,
                      size_t budget, bool in_kernel)
{
    struct cut c = tr_onednn_cut_of(s->n, GROUP, true);
    for (int i = 0; varies ? i < MAX_SIZES : i < tr_onednn_cut_count(&c); i++) {
        struct conv_shape piece = *s;
        if (varies)
            piece.n = i == 0 ? GROUP : GROUP >> i;
        else
            tr_onednn_cut_at(&c, i, &piece.n);
        if (piece.n < 1 || piece.n > s->n || node_prim(o, e, piece.n))
            continue;
        int k = prim_for(o, &piece, in_kernel);
        if (k < 0 || e->nprims == MAX_SIZES)
            return false;
        e->prim[e->nprims++] = k;
    }
    size_t stride;
    size_t shared = node_bytes(o, e, s->n, most_pieces(s->n), &stride);
    return shared + stride * (size_t)tr_onednn_slots() <= budget;
}

int tr_onednn_conv_prepare(struct tr_onednn *o, const struct tr_graph *graph, const struct tr_node *node,
                           const struct tr_tensor *in, const struct tr_tensor *out, size_t workspace)
{
    struct conv_shape s;
    if (!conv_takes(node, in, out, &s))
        return 0;
    struct conv_node *e = node_of(o, node);
    bool first = e->shape.n == 0;
    if (!first && !e->native)
        return 0;   /* another bucket found it cannot: it stays on im2col */
    if (!first && !same_sizes(&e->shape, &s))
        return 0;   /* only the batch varies between a node's buckets; a kernel meets the rest */
    e->varies = e->varies || tr_onednn_dims_vary(graph, node->in[0], 0, 1);
    if (first || s.n > e->shape.n)
        e->shape = s;   /* the largest bucket's: the bound of the batch */
    e->native = add_sizes(o, e, &s, e->varies, workspace, false);
    if (!e->native)
        o->counts.fallback_nodes++;
    else if (first)
        o->counts.native_nodes++;
    return 0;
}

/* A node a kernel meets unprepared, at sizes it was not prepared for or with a piece size its
 * prepare did not make: the primitives made now (counted), or im2col from now on when they
 * cannot be. A node prepare kept on im2col stays there. */
static struct conv_node *node_in_kernel(struct tr_onednn *o, const struct tr_kernel_args *a,
                                        const struct conv_shape *s)
{
    struct conv_node *e = node_of(o, a->node);
    if (e->shape.n && !e->native && same_sizes(&e->shape, s))
        return e;
    if (!e->shape.n || !same_sizes(&e->shape, s))
        *e = (struct conv_node){.node = a->node, .shape = *s};
    e->native = add_sizes(o, e, s, false, a->workspace ? a->workspace_bytes : 0, true);
    return e;
}

/* ---- running ----------------------------------------------------------------------------------- */

/* Executes prim on the slot's stream with args (memory objects made around the handles: they
 * are small, the data is the regions' and the workspace's). */
static dnnl_status_t execute(const struct tr_onednn *o, dnnl_primitive_t prim, int slot, int nargs,
                             const int *arg, const dnnl_memory_desc_t *const *md, void *const *data)
{
    dnnl_memory_t mem[NROLES + 1] = {NULL};
    dnnl_exec_arg_t args[NROLES + 1];
    dnnl_status_t st = dnnl_success;
    int used = 0;
    for (int i = 0; i < nargs && st == dnnl_success; i++) {
        if (dnnl_memory_desc_get_size(md[i]) == 0)
            continue;   /* an empty scratchpad */
        st = dnnl_memory_create(&mem[used], md[i], o->engine, data[i]);
        args[used] = (dnnl_exec_arg_t){arg[i], mem[used]};
        used++;
    }
    if (st == dnnl_success)
        st = dnnl_primitive_execute(prim, o->streams[slot], used, args);
    if (st == dnnl_success)
        st = dnnl_stream_wait(o->streams[slot]);
    for (int i = 0; i < used; i++)
        dnnl_memory_destroy(mem[i]);
    return st;
}

static dnnl_status_t reorder(const struct tr_onednn *o, dnnl_primitive_t prim, int slot, const dnnl_memory_desc_t *from,
                             void *src, const dnnl_memory_desc_t *to, void *dst)
{
    return execute(o, prim, slot, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO},
                   (const dnnl_memory_desc_t *const[]){from, to}, (void *const[]){src, dst});
}

/* Bytes of one image of a kind of tensor. */
static size_t image_bytes(const struct conv_shape *s, enum kind k)
{
    return (size_t)(k == ACT_X ? s->C * s->H * s->W : s->O * s->Ho * s->Wo) * (s->dt == dnnl_f32 ? 4 : 2);
}

/* Runs piece i (images from n0) on the calling thread's slot: its inputs reordered into the
 * slot, the convolution, the output reordered back (forward, backward data) or left as the
 * piece's partial (backward filter). */
static dnnl_status_t run_piece(const struct tr_onednn *o, const struct conv_prim *p, const struct tr_kernel_args *a,
                               int64_t n0, int i, char *weights, char *slot, int thread)
{
    const struct conv_shape *s = &p->key;
    const struct conv_mds *m = &p->md;
    int op = s->op;
    void *plain[NROLES] = {a->in[0].data, a->in[1].data, a->out[0].data}, *data[NROLES + 1];
    dnnl_status_t st = dnnl_success;
    for (int r = 0; r < NROLES && st == dnnl_success; r++) {
        enum kind k = op_roles[op].kind[r];
        if (k == WEIGHTS) {
            data[r] = r == OUT ? weights + (size_t)i * md_bytes(&m->blocked[OUT])
                               : buffered(m, op, 0, r) ? weights : plain[r];
            continue;
        }
        plain[r] = (char *)plain[r] + (size_t)n0 * image_bytes(s, k);
        data[r] = buffered(m, op, s->acc, r) ? slot + slot_offset(m, op, s->acc, r) : plain[r];
        if (r != OUT && p->reorder[r])
            st = reorder(o, p->reorder[r], thread, &m->plain[r], plain[r], &m->blocked[r], data[r]);
    }
    data[NROLES] = slot + slot_offset(m, op, s->acc, NROLES);
    const int args[NROLES + 1] = {op_roles[op].arg[IN0], op_roles[op].arg[IN1], op_roles[op].arg[OUT],
                                  DNNL_ARG_SCRATCHPAD};
    const dnnl_memory_desc_t *mds[NROLES + 1] = {&m->blocked[IN0], &m->blocked[IN1], &m->blocked[OUT], &m->scratch};
    if (st == dnnl_success)
        st = execute(o, p->conv, thread, NROLES + 1, args, mds, data);
    if (st == dnnl_success && p->reorder[OUT] && op_roles[op].kind[OUT] != WEIGHTS)
        st = reorder(o, p->reorder[OUT], thread, &m->blocked[OUT], data[OUT], &m->plain[OUT], plain[OUT]);
    return st;
}

/* The filter gradient: partial 0 += partial 1, += partial 2, … in piece order, per value (any
 * threads: each value's sum is one thread's), then reordered into dw (+= when accumulating). */
static dnnl_status_t sum_partials(const struct tr_onednn *o, const struct conv_prim *p, const struct tr_kernel_args *a,
                                  char *partials, int pieces)
{
    size_t stride = md_bytes(&p->md.blocked[OUT]) / sizeof(float);
    int64_t values = (int64_t)(dnnl_memory_desc_get_size(&p->md.blocked[OUT]) / sizeof(float));
    float *sum = (float *)partials;
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < values; v++) {
        float total = sum[v];
        for (int r = 1; r < pieces; r++)
            total += sum[(size_t)r * stride + (size_t)v];
        sum[v] = total;
    }
    return reorder(o, p->reorder[OUT], 0, &p->md.blocked[OUT], partials, &p->md.plain[OUT], a->out[0].data);
}

int tr_onednn_conv(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran)
{
    struct conv_shape s;
    *ran = false;
    if (!o || !conv_takes(a->node, a->in, a->out, &s))
        return 0;
    struct conv_node *e = o->conv ? node_of(o, a->node) : NULL;
    struct cut cut = tr_onednn_cut_of(s.n, GROUP, true);
    int pieces = tr_onednn_cut_count(&cut);
    bool covered = e && e->native && same_sizes(&e->shape, &s);
    for (int i = covered && cut.full ? (int)cut.full - 1 : 0; covered && i < pieces; i++) {
        int64_t n;
        tr_onednn_cut_at(&cut, i, &n);
        covered = node_prim(o, e, n) != NULL;
    }
    if (!covered)
        e = node_in_kernel(o, a, &s);
    if (!e->native)
        return 0;
    size_t stride, shared = node_bytes(o, e, s.n, pieces, &stride);
    size_t have = a->workspace ? a->workspace_bytes : 0;
    int threads = tr_onednn_threads(o, pieces, stride, shared, have);
    if (threads < 1)
        return tr_cpu_fail(a, "%s: oneDNN needs %zu bytes of workspace, has %zu", tr_op_name(a->node->op),
                           shared + stride, have);
    char *weights = a->workspace, *slots = (char *)a->workspace + shared;
    const struct conv_prim *head = &o->conv->prims[e->prim[0]];
    dnnl_status_t st = dnnl_success;
    if (s.op != 2 && head->reorder[IN1])   /* the weights, once for every piece */
        st = reorder(o, head->reorder[IN1], 0, &head->md.plain[IN1], a->in[1].data, &head->md.blocked[IN1], weights);
    int failed = st != dnnl_success;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(| : failed)
    for (int i = 0; i < pieces; i++) {
        int64_t n, n0 = tr_onednn_cut_at(&cut, i, &n);
        int t = omp_get_thread_num();
        if (!failed)
            failed |= run_piece(o, node_prim(o, e, n), a, n0, i, weights, slots + (size_t)t * stride, t) != dnnl_success;
    }
    if (!failed && s.op == 2)
        failed = sum_partials(o, head, a, weights, pieces) != dnnl_success;
    *ran = true;
    return failed ? tr_cpu_fail(a, "%s: a oneDNN convolution failed", tr_op_name(a->node->op)) : 0;
}

#else /* !HAVE_ONEDNN: every convolution on im2col */

int tr_onednn_conv(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran)
{
    (void)o, (void)a;
    *ran = false;
    return 0;
}

#endif
