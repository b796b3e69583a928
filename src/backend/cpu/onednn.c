/* MATMUL on oneDNN (onednn.h): the instance's cache of matmul primitives and the tiled call.
 *
 * Determinism: oneDNN 2.6.3 has no deterministic mode and may split a GEMM's reduction across
 * threads. So, as matmul.inc does with OpenBLAS, the output is cut into pieces of fixed shapes
 * and threads take whole pieces, each one single-threaded primitive execution: oneDNN built
 * with OpenMP runs sequentially inside an active parallel region (omp_in_parallel()), and every
 * primitive is made while OpenMP's thread count is 1, so its blocking and scratchpad are a
 * one-thread primitive's wherever it runs. The bits depend on the pieces, never on the threads.
 *
 * Shapes: a size that varies with the micro-batch (B or S in the graph; the rows of a linear
 * layer) is cut into TILE_M rows and then powers of two (a remainder of 100 rows: 64, 32, 4),
 * so one bounded set of primitive shapes — made at prepare for each bucket's largest — serves
 * every smaller micro-batch without a creation in the step; a varying reduction size (a weight
 * gradient's K = B·S) is a runtime dimension, which 2.6.3's f32 GEMM takes at full speed. A
 * fixed size is cut into full tiles and one exact remainder.
 *
 * Scratchpads are the user's (dnnl_scratchpad_mode_user): one per thread in the node's
 * workspace, which tr_cpu_workspace_bytes counts, so the memory plan stays exact. */
#include "config.h"

#include "backend/cpu/onednn.h"

#include <stdio.h>
#include <string.h>

#include "backend/cpu/cpu.h"

#ifdef HAVE_ONEDNN
#include <omp.h>
#include <stdlib.h>

#include "backend/cpu/onednn_impl.h"

/* 256 × 512 as OpenBLAS's tiles (matmul.c): a BERT-base layer's GEMMs give 12 to 24 of them. */
#define TILE_M 256
#define TILE_N 512
/* Piece shapes of one node: heights (TILE_M, then 128 … 1) × widths, with room to spare. */
#define MAX_SIZES 12
#define MAX_PIECES (MAX_SIZES * MAX_SIZES)
#define RT DNNL_RUNTIME_DIM_VAL

enum mode { MODE_DEFAULT, MODE_F32, MODE_BF16 };   /* MODE_DEFAULT: OpenBLAS or the widened path */

/* A node's GEMM as matmul.inc sees it: C[p] (+)= op(A[p])·op(B[p]), p < P, each [M, N]. */
struct geom {
    int ta, tb, acc;
    dnnl_data_type_t at, bt, yt;
    int64_t P, M, N, K, a_stride, b_stride;   /* strides in elements, 0: shared */
};

/* One primitive: a piece's shape and layout (RT where it is given at execution). */
struct gemm_key {
    int64_t m, n, k, lda, ldb, ldc;
    int ta, tb, acc;
    dnnl_data_type_t at, bt, yt;
};

struct gemm {
    struct gemm_key key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t scratch_md;
    size_t scratch;
};

/* What the cache knows about one node: the shapes it was prepared for, which sizes vary, and
 * whether oneDNN runs it. */
struct entry {
    const struct tr_node *node;   /* NULL: a free slot */
    struct geom g;
    bool varies_m, varies_n, varies_k;
    enum mode mode;
    int gemm[MAX_PIECES], npieces;   /* indices into gemms */
};

/* TR_CPU_GEMM: "onednn" sends f32 GEMMs to oneDNN too, "openblas" keeps every GEMM there. */
static const char *gemm_choice(void)
{
    const char *v = getenv("TR_CPU_GEMM");
    return v ? v : "";
}

/* bf16 computes natively where tr_onednn_isa_bf16 (onednn_pieces.c) says so; 2.6.3 has no f16
 * CPU kernels at all (none for AVX512-FP16): f16 always widens. */

bool tr_onednn_computes_bf16(void) { return tr_onednn_isa_bf16() && strcmp(gemm_choice(), "openblas") != 0; }

/* f32 GEMMs go to oneDNN where its AVX-512 kernels beat OpenBLAS's (bench/README.md, "MATMUL on
 * OpenBLAS against oneDNN": 1.0-1.4x on forward and backward data, 0.9-1.3x on the weight
 * gradients of BERT's layers, Xeon with AVX-512) and the node's M and N are fixed (prepare
 * keeps the others on OpenBLAS); on AVX2 OpenBLAS ties or wins, so it stays. TR_CPU_GEMM=onednn
 * or openblas decides it on any CPU, for every node. */
static bool f32_on_onednn(void)
{
    const char *choice = gemm_choice();
    if (*choice)
        return !strcmp(choice, "onednn");
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

static dnnl_data_type_t dnnl_type(enum tr_dtype t)
{
    return t == TR_F32 ? dnnl_f32 : t == TR_BF16 ? dnnl_bf16 : t == TR_F16 ? dnnl_f16 : dnnl_data_type_undef;
}

static size_t type_size(dnnl_data_type_t t)
{
    return t == dnnl_f32 ? 4 : 2;
}

/* The node's GEMM and the way oneDNN would run it (MODE_DEFAULT: it does not take it). */
static enum mode geom_of(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out,
                         struct geom *g)
{
    if (node->op != TR_OP_MATMUL)
        return MODE_DEFAULT;
    const struct tr_tensor *a = &in[0], *b = &in[1], *y = &out[0];
    const char *choice = gemm_choice();
    enum mode mode = MODE_DEFAULT;
    if (!strcmp(choice, "openblas"))
        return MODE_DEFAULT;
    if (a->dtype == TR_F32 && b->dtype == TR_F32 && y->dtype == TR_F32 && f32_on_onednn())
        mode = MODE_F32;
    else if (a->dtype == TR_BF16 && b->dtype == TR_BF16 && (y->dtype == TR_BF16 || y->dtype == TR_F32) &&
             tr_onednn_isa_bf16())
        mode = MODE_BF16;
    if (mode == MODE_DEFAULT)
        return mode;
    *g = (struct geom){.ta = node->attrs.matmul.trans_a, .tb = node->attrs.matmul.trans_b, .acc = node->accumulate,
                       .at = dnnl_type(a->dtype), .bt = dnnl_type(b->dtype), .yt = dnnl_type(y->dtype)};
    g->M = y->dim[y->rank - 2], g->N = y->dim[y->rank - 1];
    g->K = g->ta ? a->dim[a->rank - 2] : a->dim[a->rank - 1];
    g->P = g->M && g->N ? tr_tensor_numel(y) / (g->M * g->N) : 0;
    g->b_stride = b->rank == 2 ? 0 : g->K * g->N;
    if (!g->ta && g->b_stride == 0)   /* one GEMM over all batches: [P·M, K]·[K, N] (matmul.inc) */
        g->M *= g->P, g->P = 1;
    g->a_stride = g->M * g->K;
    if (g->M == 0 || g->N == 0 || g->K == 0)
        return MODE_DEFAULT;   /* nothing to multiply: the default path's zeros */
    return mode;
}


/* The distinct piece sizes of cuts of every size up to `bound` (varying) or of `bound` (fixed). */
static int cut_sizes(int64_t bound, int64_t tile, bool varies, int64_t *sizes)
{
    int n = 0;
    if (bound >= tile)
        sizes[n++] = tile;
    if (!varies) {
        if (bound % tile)
            sizes[n++] = bound % tile;
        return n;
    }
    for (int64_t p = tile / 2 > 0 ? tile / 2 : 1; p >= 1 && n < MAX_SIZES; p /= 2)
        if (p <= bound && p < tile)
            sizes[n++] = p;
    return n;
}

/* ---- primitives ----------------------------------------------------------------------------------- */

static bool key_equal(const struct gemm_key *x, const struct gemm_key *y)
{
    return x->m == y->m && x->n == y->n && x->k == y->k && x->lda == y->lda && x->ldb == y->ldb &&
           x->ldc == y->ldc && x->ta == y->ta && x->tb == y->tb && x->acc == y->acc && x->at == y->at &&
           x->bt == y->bt && x->yt == y->yt;
}

/* The key of an m × n piece of the node's GEMM; the varying sizes (and the strides made of
 * them) given at execution. */
static struct gemm_key key_of(const struct geom *g, int64_t m, int64_t n, bool varies_m, bool varies_n,
                              bool varies_k)
{
    int64_t K = varies_k ? RT : g->K, M = varies_m ? RT : g->M, N = varies_n ? RT : g->N;
    return (struct gemm_key){.m = m, .n = n, .k = K, .lda = g->ta ? M : K, .ldb = g->tb ? K : N, .ldc = N,
                             .ta = g->ta, .tb = g->tb, .acc = g->acc, .at = g->at, .bt = g->bt, .yt = g->yt};
}

/* A's m × k piece, B's k × n, C's m × n, by their leading dimensions (row-major; transposed: the
 * storage's columns). */
static void piece_descs(const struct gemm_key *k, dnnl_memory_desc_t *a, dnnl_memory_desc_t *b,
                        dnnl_memory_desc_t *c)
{
    dnnl_dims_t ad = {k->m, k->k}, bd = {k->k, k->n}, cd = {k->m, k->n};
    dnnl_dims_t as = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1};
    dnnl_dims_t bs = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1};
    dnnl_dims_t cs = {k->ldc, 1};
    dnnl_memory_desc_init_by_strides(a, 2, ad, k->at, as);
    dnnl_memory_desc_init_by_strides(b, 2, bd, k->bt, bs);
    dnnl_memory_desc_init_by_strides(c, 2, cd, k->yt, cs);
}

/* The primitive descriptor of a piece, made as a one-thread primitive (the file's head says
 * why); NULL when oneDNN has no kernel for it but its reference one. */
static dnnl_primitive_desc_t piece_pd(dnnl_engine_t engine, const struct gemm_key *k)
{
    dnnl_memory_desc_t a, b, c;
    piece_descs(k, &a, &b, &c);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c) || dnnl_primitive_attr_create(&attr))
        return NULL;
    bool ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && k->acc)   /* C += A·B: the sum post-op reads C first */
        ok = dnnl_post_ops_create(&ops) == dnnl_success && dnnl_post_ops_append_sum(ops, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
    if (ok)
        pd = tr_onednn_one_thread_pd(&desc, attr, engine, NULL);
    dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    return pd;
}




/* The index of the primitive for key in o->gemms, made when there is none (counted: at
 * prepare, or by a kernel); -1 when oneDNN cannot make it. */
static int gemm_find(const struct tr_onednn *o, const struct gemm_key *key)
{
    for (int i = 0; i < o->ngemms; i++)
        if (key_equal(&o->gemms[i].key, key))
            return i;
    return -1;
}

static int gemm_for(struct tr_onednn *o, const struct gemm_key *key, bool in_kernel)
{
    int found = gemm_find(o, key);
    if (found >= 0)
        return found;
    dnnl_primitive_desc_t pd = piece_pd(o->engine, key);
    if (!pd)
        return -1;
    struct gemm made = {.key = *key};
    made.scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    made.scratch = tr_onednn_aligned(dnnl_memory_desc_get_size(&made.scratch_md));
    dnnl_status_t st = tr_onednn_one_thread_primitive(&made.prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success)
        return -1;
    if (o->ngemms == o->cap_gemms) {
        o->cap_gemms = o->cap_gemms ? 2 * o->cap_gemms : 64;
        o->gemms = tr_xrealloc(o->gemms, (size_t)o->cap_gemms * sizeof *o->gemms);
    }
    o->gemms[o->ngemms] = made;
    o->counts.primitives++;
    o->counts.made_in_kernels += in_kernel;
    return o->ngemms++;
}

/* ---- the node map ------------------------------------------------------------------------------- */

static size_t slot_of(const struct tr_node *node, int cap)
{
    uintptr_t h = (uintptr_t)node;
    h ^= h >> 17, h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (size_t)(cap - 1);
}

static struct entry *entry_find(const struct tr_onednn *o, const struct tr_node *node)
{
    if (!o->cap_entries)
        return NULL;
    for (size_t i = slot_of(node, o->cap_entries);; i = (i + 1) & (size_t)(o->cap_entries - 1)) {
        if (o->entries[i].node == node)
            return &o->entries[i];
        if (!o->entries[i].node)
            return NULL;
    }
}

/* Puts a new entry for node into the table (which has room). */
static struct entry *entry_insert(struct tr_onednn *o, const struct tr_node *node)
{
    size_t i = slot_of(node, o->cap_entries);
    while (o->entries[i].node)
        i = (i + 1) & (size_t)(o->cap_entries - 1);
    o->entries[i] = (struct entry){.node = node};
    o->nentries++;
    return &o->entries[i];
}

/* The node's entry, a new one (mode MODE_DEFAULT, no pieces, no shapes) when it has none. */
static struct entry *entry_add(struct tr_onednn *o, const struct tr_node *node)
{
    struct entry *e = entry_find(o, node);
    if (e)
        return e;
    if (2 * (o->nentries + 1) > o->cap_entries) {   /* at most half full: short probes */
        struct entry *old = o->entries;
        int cap = o->cap_entries;
        o->cap_entries = cap ? 2 * cap : 256;
        o->entries = tr_xcalloc((size_t)o->cap_entries, sizeof *o->entries);
        o->nentries = 0;
        for (int i = 0; i < cap; i++)
            if (old[i].node)
                *entry_insert(o, old[i].node) = old[i];
        free(old);
    }
    return entry_insert(o, node);
}

/* Whether a node's shapes now are ones its entry was made for. */
static bool fits(const struct entry *e, const struct geom *g)
{
    const struct geom *p = &e->g;
    return p->ta == g->ta && p->tb == g->tb && p->acc == g->acc && p->at == g->at && p->bt == g->bt &&
           p->yt == g->yt && (e->varies_m || p->M == g->M) && (e->varies_n || p->N == g->N) &&
           (e->varies_k || p->K == g->K);
}


/* Adds the primitives for every piece of e's node at sizes up to g's (the varying ones) to e.
 * false when one cannot be made, or the scratchpads would not fit `budget` bytes. */
static bool add_pieces(struct tr_onednn *o, struct entry *e, const struct geom *g, size_t budget, bool in_kernel)
{
    int64_t heights[MAX_SIZES], widths[MAX_SIZES];
    int nh = cut_sizes(g->M, TILE_M, e->varies_m, heights), nw = cut_sizes(g->N, TILE_N, e->varies_n, widths);
    for (int i = 0; i < nh; i++)
        for (int j = 0; j < nw; j++) {
            struct gemm_key key = key_of(g, heights[i], widths[j], e->varies_m, e->varies_n, e->varies_k);
            int k = gemm_for(o, &key, in_kernel), have = 0;
            if (k < 0)
                return false;
            while (have < e->npieces && e->gemm[have] != k)
                have++;
            if (have == e->npieces && e->npieces < MAX_PIECES)
                e->gemm[e->npieces++] = k;
            if (o->gemms[k].scratch * (size_t)tr_onednn_slots() > budget)
                return false;
        }
    return true;
}

/* ---- the entries ---------------------------------------------------------------------------------- */

int tr_onednn_open(struct tr_onednn **out, struct tr_diag *d)
{
    struct tr_onednn *o = tr_xcalloc(1, sizeof *o);
    *out = NULL;
    if (dnnl_engine_create(&o->engine, dnnl_cpu, 0) != dnnl_success) {
        free(o);
        return tr_fail(d, TR_EFAIL, "oneDNN: cannot make a CPU engine");
    }
    int want = omp_get_num_procs() > omp_get_max_threads() ? omp_get_num_procs() : omp_get_max_threads();
    want = want < 2 ? 2 : want > MAX_STREAMS ? MAX_STREAMS : want;
    for (; o->nstreams < want; o->nstreams++)
        if (dnnl_stream_create(&o->streams[o->nstreams], o->engine, dnnl_stream_in_order) != dnnl_success) {
            tr_onednn_close(o);
            return tr_fail(d, TR_EFAIL, "oneDNN: cannot make a stream");
        }
    *out = o;
    return 0;
}

void tr_onednn_close(struct tr_onednn *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->ngemms; i++)
        dnnl_primitive_destroy(o->gemms[i].prim);
    tr_onednn_conv_free(o);
    for (int i = 0; i < o->nstreams; i++)
        dnnl_stream_destroy(o->streams[i]);
    dnnl_engine_destroy(o->engine);
    free(o->gemms), free(o->entries), free(o);
}


int tr_onednn_prepare(struct tr_onednn *o, const struct tr_graph *graph, const struct tr_node *node,
                      const struct tr_tensor *in, const struct tr_tensor *out, size_t workspace, struct tr_diag *d)
{
    struct geom g;
    if (o && (node->op == TR_OP_CONV2D || node->op == TR_OP_CONV2D_BWD_DATA || node->op == TR_OP_CONV2D_BWD_FILTER))
        return tr_onednn_conv_prepare(o, graph, node, in, out, workspace);
    if (!o || node->op != TR_OP_MATMUL)
        return 0;
    enum mode mode = geom_of(node, in, out, &g);
    if (mode == MODE_DEFAULT)
        return 0;
    struct entry *e = entry_add(o, node);
    bool first = e->g.M == 0;
    if (!first && e->mode == MODE_DEFAULT)
        return 0;   /* another bucket found it cannot: it stays on the default path */
    int yr = out[0].rank, ar = in[0].rank;
    bool merged = !g.ta && in[1].rank == 2;   /* M is every leading dim of y (geom_of) */
    e->varies_m = e->varies_m || tr_onednn_dims_vary(graph, node->out[0], merged ? 0 : yr - 2, yr - 1);
    e->varies_n = e->varies_n || tr_onednn_dims_vary(graph, node->out[0], yr - 1, yr);
    e->varies_k = e->varies_k || tr_onednn_dims_vary(graph, node->in[0], g.ta ? ar - 2 : ar - 1, g.ta ? ar - 1 : ar);
    if (first || g.M > e->g.M || g.N > e->g.N || g.K > e->g.K)
        e->g = g;   /* the largest bucket's shapes: the bound of the varying sizes */
    if (mode == MODE_F32 && !*gemm_choice() && (e->varies_m || e->varies_n)) {
        /* A size that varies is cut into power-of-two pieces, a call each, where OpenBLAS
         * makes one: bert-small's length-bucketed step ran 10% slower so (bench/README.md). */
        e->mode = MODE_DEFAULT, e->npieces = 0;
        return 0;
    }
    e->mode = mode;
    if (!add_pieces(o, e, &g, workspace, false)) {
        e->mode = MODE_DEFAULT, e->npieces = 0;
        o->counts.fallback_nodes++;
        return 0;
    }
    if (first)
        o->counts.native_nodes++;
    (void)d;
    return 0;
}

/* The primitive for an m × n piece among the node's. */
static const struct gemm *piece_gemm(const struct tr_onednn *o, const struct entry *e, int64_t m, int64_t n)
{
    for (int i = 0; i < e->npieces; i++) {
        const struct gemm *p = &o->gemms[e->gemm[i]];
        if (p->key.m == m && p->key.n == n)
            return p;
    }
    return NULL;
}

/* A node a kernel meets unprepared, or at shapes it was not prepared for, or with a piece its
 * prepare did not see: the primitives made now (counted), or the default path from now on
 * when they cannot be. A node prepare kept on the default path stays there. */
static struct entry *entry_in_kernel(struct tr_onednn *o, const struct tr_kernel_args *a, const struct geom *g,
                                     enum mode mode)
{
    struct entry *e = entry_add(o, a->node);
    if (e->g.M && fits(e, g) && e->mode == MODE_DEFAULT)
        return e;
    if (!e->g.M || !fits(e, g))
        *e = (struct entry){.node = a->node, .g = *g};
    e->mode = mode;
    if (!add_pieces(o, e, g, a->workspace ? a->workspace_bytes : 0, true))
        e->mode = MODE_DEFAULT, e->npieces = 0;
    return e;
}

/* Whether the node's primitives cover every piece of these cuts: each distinct size once (the
 * last full tile, then the remainder's pieces). */
static bool has_pieces(const struct tr_onednn *o, const struct entry *e, const struct cut *rows, const struct cut *cols)
{
    for (int i = rows->full ? (int)rows->full - 1 : 0; i < tr_onednn_cut_count(rows); i++)
        for (int j = cols->full ? (int)cols->full - 1 : 0; j < tr_onednn_cut_count(cols); j++) {
            int64_t m, n;
            tr_onednn_cut_at(rows, i, &m), tr_onednn_cut_at(cols, j, &n);
            if (!piece_gemm(o, e, m, n))
                return false;
        }
    return true;
}

/* Executes primitive p on the calling thread at key k's concrete sizes (p's own key, or p's with its
 * runtime sizes filled in), on stream `slot` with the scratchpad at `scratch`: its memory objects
 * made around the handles (oneDNN's memory objects are small; the data is the regions'). */
static dnnl_status_t piece_execute(const struct tr_onednn *o, const struct gemm *p, const struct gemm_key *k,
                                   const void *A, const void *B, void *C, void *scratch, int slot)
{
    dnnl_memory_desc_t amd, bmd, cmd;
    piece_descs(k, &amd, &bmd, &cmd);
    dnnl_memory_t mem[4] = {NULL, NULL, NULL, NULL};
    dnnl_status_t st = dnnl_memory_create(&mem[0], &amd, o->engine, (void *)A);
    if (st == dnnl_success)
        st = dnnl_memory_create(&mem[1], &bmd, o->engine, (void *)B);
    if (st == dnnl_success)
        st = dnnl_memory_create(&mem[2], &cmd, o->engine, C);
    if (st == dnnl_success && p->scratch)
        st = dnnl_memory_create(&mem[3], &p->scratch_md, o->engine, scratch);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]},
                               {DNNL_ARG_SCRATCHPAD, mem[3]}};
    if (st == dnnl_success)
        st = dnnl_primitive_execute(p->prim, o->streams[slot], p->scratch ? 4 : 3, args);
    if (st == dnnl_success)
        st = dnnl_stream_wait(o->streams[slot]);
    for (int t = 0; t < 4; t++)
        dnnl_memory_destroy(mem[t]);
    return st;
}

/* Runs one m × n piece at (p, i, j) of the node's GEMM on the calling thread. */
static dnnl_status_t run_piece(const struct tr_onednn *o, const struct gemm *p, const struct geom *g,
                               const void *A0, const void *B0, void *C0, void *workspace, int64_t b, int64_t i,
                               int64_t j, int64_t m, int64_t n, int slot, size_t stride)
{
    struct gemm_key k = p->key;   /* the concrete sizes of this piece */
    k.m = m, k.n = n, k.k = g->K, k.lda = g->ta ? g->M : g->K, k.ldb = g->tb ? g->K : g->N, k.ldc = g->N;
    size_t as = type_size(g->at), bs = type_size(g->bt), ys = type_size(g->yt);
    const char *A = (const char *)A0 + (size_t)(b * g->a_stride) * as;
    const char *B = (const char *)B0 + (size_t)(b * g->b_stride) * bs;
    A += (size_t)(g->ta ? i : i * g->K) * as;
    B += (size_t)(g->tb ? j * g->K : j) * bs;
    char *C = (char *)C0 + (size_t)(b * g->M * g->N + i * g->N + j) * ys;
    return piece_execute(o, p, &k, A, B, C, (char *)workspace + (size_t)slot * stride, slot);
}

int tr_onednn_matmul(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran)
{
    struct geom g;
    *ran = false;
    enum mode mode = o ? geom_of(a->node, a->in, a->out, &g) : MODE_DEFAULT;
    if (mode == MODE_DEFAULT)
        return 0;
    struct entry *e = entry_find(o, a->node);
    if (!e || !e->g.M || !fits(e, &g))
        e = entry_in_kernel(o, a, &g, mode);
    if (e->mode == MODE_DEFAULT)
        return 0;
    struct cut rows = tr_onednn_cut_of(g.M, TILE_M, e->varies_m), cols = tr_onednn_cut_of(g.N, TILE_N, e->varies_n);
    int nrows = tr_onednn_cut_count(&rows), ncols = tr_onednn_cut_count(&cols);
    if (!has_pieces(o, e, &rows, &cols) && (e = entry_in_kernel(o, a, &g, mode))->mode == MODE_DEFAULT)
        return 0;
    size_t stride = 0;
    for (int i = 0; i < e->npieces; i++)
        if (o->gemms[e->gemm[i]].scratch > stride)
            stride = o->gemms[e->gemm[i]].scratch;
    int64_t tiles = g.P * nrows * ncols;
    int threads = tr_onednn_threads(o, tiles, stride, 0, a->workspace_bytes);
    if (threads < 1)
        return tr_cpu_fail(a, "MATMUL: oneDNN needs %zu bytes of workspace, has %zu", stride, a->workspace_bytes);
    int failed = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(| : failed)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t b = t / (nrows * ncols), m, n;
        int64_t i = tr_onednn_cut_at(&rows, t / ncols % nrows, &m), j = tr_onednn_cut_at(&cols, t % ncols, &n);
        const struct gemm *p = piece_gemm(o, e, m, n);
        failed |= run_piece(o, p, &g, a->in[0].data, a->in[1].data, a->out[0].data, a->workspace, b, i, j, m, n,
                            omp_get_thread_num(), stride) != dnnl_success;
    }
    *ran = true;
    return failed ? tr_cpu_fail(a, "MATMUL: a oneDNN matmul failed") : 0;
}

/* ---- GEMMs by shape, for kernels that multiply inside themselves ------------------------------- */

static size_t scratch_of(const struct gemm_key *key);

/* The service's shape as a node's geometry: one GEMM, nothing varies. */
static struct geom geom_of_shape(const struct tr_onednn_gemm *s)
{
    struct geom g = {.ta = s->ta, .tb = s->tb, .acc = s->acc, .at = dnnl_type(s->at), .bt = dnnl_type(s->bt),
                     .yt = dnnl_type(s->yt), .P = 1, .M = s->M, .N = s->N, .K = s->K};
    g.a_stride = g.M * g.K;
    return g;
}

/* The primitives of a shape's distinct pieces: its cuts of fixed sizes have two piece sizes a
 * side at most (the full tile, the remainder). */
struct shape_prims {
    int64_t h[2], w[2];
    int nh, nw, idx[2][2];   /* indices into o->gemms */
};

/* Finds them, or makes them where they are missing when `make` (counted: at prepare); −1 when
 * one is missing or cannot be made. */
static int shape_prims_of(struct tr_onednn *o, const struct tr_onednn_gemm *s, bool make, struct shape_prims *sp)
{
    struct geom g = geom_of_shape(s);
    sp->nh = cut_sizes(g.M, s->tm, false, sp->h), sp->nw = cut_sizes(g.N, s->tn, false, sp->w);
    for (int i = 0; i < sp->nh; i++)
        for (int j = 0; j < sp->nw; j++) {
            struct gemm_key key = key_of(&g, sp->h[i], sp->w[j], false, false, false);
            int k = make ? gemm_for(o, &key, false) : gemm_find(o, &key);
            if (k < 0)
                return -1;
            sp->idx[i][j] = k;
        }
    return 0;
}

bool tr_onednn_gemm_available(const struct tr_onednn_gemm *s)
{
    bool bf16 = s->at == TR_BF16 && s->bt == TR_BF16 && (s->yt == TR_BF16 || s->yt == TR_F32);
    return bf16 && tr_onednn_computes_bf16() && s->M > 0 && s->N > 0 && s->K > 0 && s->tm > 0 && s->tn > 0;
}

int tr_onednn_gemm_prepare(struct tr_onednn *o, const struct tr_onednn_gemm *s)
{
    struct shape_prims sp;
    return o && tr_onednn_gemm_available(s) ? shape_prims_of(o, s, true, &sp) : -1;
}

bool tr_onednn_gemm_ready(struct tr_onednn *o, const struct tr_onednn_gemm *s)
{
    struct shape_prims sp;
    return o && tr_onednn_gemm_available(s) && shape_prims_of(o, s, false, &sp) == 0;
}

size_t tr_onednn_gemm_workspace(const struct tr_onednn_gemm *s)
{
    if (!tr_onednn_gemm_available(s))
        return 0;
    struct geom g = geom_of_shape(s);
    struct gemm_key key = key_of(&g, s->M < s->tm ? s->M : s->tm, s->N < s->tn ? s->N : s->tn, false, false, false);
    return scratch_of(&key) * (size_t)tr_onednn_slots();
}

int tr_onednn_gemm_run(struct tr_onednn *o, const struct tr_onednn_gemm *s, const void *A, const void *B, void *C,
                       void *workspace, size_t workspace_bytes)
{
    struct shape_prims sp;
    if (!o || shape_prims_of(o, s, false, &sp))
        return -1;   /* not prepared: the caller's own path */
    struct geom g = geom_of_shape(s);
    struct cut rows = tr_onednn_cut_of(g.M, s->tm, false), cols = tr_onednn_cut_of(g.N, s->tn, false);
    int nrows = tr_onednn_cut_count(&rows), ncols = tr_onednn_cut_count(&cols);
    size_t stride = 0;
    for (int i = 0; i < sp.nh; i++)
        for (int j = 0; j < sp.nw; j++)
            stride = o->gemms[sp.idx[i][j]].scratch > stride ? o->gemms[sp.idx[i][j]].scratch : stride;
    int64_t tiles = (int64_t)nrows * ncols;
    int threads = tr_onednn_threads(o, tiles, stride, 0, workspace_bytes);
    if (threads < 1)
        return -1;
    int failed = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(| : failed)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t m, n;
        int64_t i = tr_onednn_cut_at(&rows, t / ncols, &m), j = tr_onednn_cut_at(&cols, t % ncols, &n);
        const struct gemm *p = &o->gemms[sp.idx[m == sp.h[0] ? 0 : 1][n == sp.w[0] ? 0 : 1]];
        failed |= run_piece(o, p, &g, A, B, C, workspace, 0, i, j, m, n, omp_get_thread_num(), stride) != dnnl_success;
    }
    return failed ? 1 : 0;
}

/* A shape multiplied whole is one piece: its primitive, when prepare made it. */
static const struct gemm *whole_piece(struct tr_onednn *o, const struct tr_onednn_gemm *s)
{
    struct geom g = geom_of_shape(s);
    struct gemm_key key = key_of(&g, s->M, s->N, false, false, false);
    int k = o && tr_onednn_gemm_available(s) ? gemm_find(o, &key) : -1;
    return k < 0 ? NULL : &o->gemms[k];
}

size_t tr_onednn_gemm_scratch(const struct tr_onednn_gemm *s)
{
    if (!tr_onednn_gemm_available(s))
        return 0;
    struct geom g = geom_of_shape(s);
    struct gemm_key key = key_of(&g, s->M, s->N, false, false, false);
    return scratch_of(&key);
}

const struct tr_onednn_piece *tr_onednn_gemm_piece(struct tr_onednn *o, const struct tr_onednn_gemm *s)
{
    return (const struct tr_onednn_piece *)whole_piece(o, s);
}

size_t tr_onednn_piece_scratch(const struct tr_onednn_piece *piece)
{
    return ((const struct gemm *)piece)->scratch;
}

int tr_onednn_piece_run(struct tr_onednn *o, const struct tr_onednn_piece *piece, const void *A, const void *B,
                        void *C, void *scratch, int slot)
{
    const struct gemm *p = (const struct gemm *)piece;
    if (slot < 0 || slot >= o->nstreams)
        return 1;
    return piece_execute(o, p, &p->key, A, B, C, scratch, slot) != dnnl_success;
}

int tr_onednn_streams(const struct tr_onednn *o) { return o ? o->nstreams : 0; }

/* A piece's scratchpad bytes, remembered by key (the planner asks for every node of every
 * candidate: a primitive descriptor each time made BERT-base's plan take 1.6 s). One table a
 * thread, so no lock; when it is full the oldest answer goes. */
#define SCRATCH_MEMO 256
static size_t scratch_of(const struct gemm_key *key)
{
    static _Thread_local struct { struct gemm_key key; size_t bytes; } memo[SCRATCH_MEMO];
    static _Thread_local int used, next;
    for (int i = 0; i < used; i++)
        if (key_equal(&memo[i].key, key))
            return memo[i].bytes;
    dnnl_engine_t engine;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        return 0;
    dnnl_primitive_desc_t pd = piece_pd(engine, key);
    size_t bytes = pd ? tr_onednn_aligned(dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0))) : 0;
    dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(engine);
    memo[next].key = *key, memo[next].bytes = bytes;
    next = (next + 1) % SCRATCH_MEMO, used += used < SCRATCH_MEMO;
    return bytes;
}

size_t tr_onednn_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    struct geom g;
    if ((node->op == TR_OP_CONV2D || node->op == TR_OP_CONV2D_BWD_DATA || node->op == TR_OP_CONV2D_BWD_FILTER))
        return tr_onednn_conv_workspace(node, in, out);
    if (geom_of(node, in, out, &g) == MODE_DEFAULT)
        return 0;
    /* the largest piece's scratchpad: prepare takes a node only where all of its pieces fit */
    struct gemm_key key = key_of(&g, g.M < TILE_M ? g.M : TILE_M, g.N < TILE_N ? g.N : TILE_N, false, false, false);
    return scratch_of(&key) * (size_t)tr_onednn_slots();
}

struct tr_onednn_counts tr_onednn_counts_of(const struct tr_onednn *o)
{
    return o ? o->counts : (struct tr_onednn_counts){0};
}

/* dnnl_get_effective_cpu_isa's value by name (ONEDNN_MAX_CPU_ISA caps it). */
static const char *isa_name(dnnl_cpu_isa_t isa)
{
    static const struct { dnnl_cpu_isa_t isa; const char *name; } names[] = {
        {dnnl_cpu_isa_sse41, "sse41"}, {dnnl_cpu_isa_avx, "avx"}, {dnnl_cpu_isa_avx2, "avx2"},
        {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"}, {dnnl_cpu_isa_avx512_mic, "avx512_mic"},
        {dnnl_cpu_isa_avx512_mic_4ops, "avx512_mic_4ops"}, {dnnl_cpu_isa_avx512_core, "avx512_core"},
        {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"}, {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
        {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].isa == isa)
            return names[i].name;
    return "unknown";
}

void tr_onednn_describe(char *buf, size_t n)
{
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, n, "oneDNN %d.%d.%d, %s ISA; bf16 GEMMs %s, f32 GEMMs on %s", v->major, v->minor, v->patch,
             isa_name(dnnl_get_effective_cpu_isa()), tr_onednn_isa_bf16() ? "in bf16" : "widened to f32",
             !f32_on_onednn() ? "OpenBLAS" : *gemm_choice() ? "oneDNN (TR_CPU_GEMM)" : "oneDNN (AVX-512)");
}

#else /* !HAVE_ONEDNN: every GEMM on OpenBLAS */

int tr_onednn_open(struct tr_onednn **out, struct tr_diag *d)
{
    (void)d;
    *out = NULL;
    return 0;
}

void tr_onednn_close(struct tr_onednn *o) { (void)o; }

int tr_onednn_prepare(struct tr_onednn *o, const struct tr_graph *g, const struct tr_node *node,
                      const struct tr_tensor *in, const struct tr_tensor *out, size_t workspace, struct tr_diag *d)
{
    (void)o, (void)g, (void)node, (void)in, (void)out, (void)workspace, (void)d;
    return 0;
}

int tr_onednn_matmul(struct tr_onednn *o, const struct tr_kernel_args *a, bool *ran)
{
    (void)o, (void)a;
    *ran = false;
    return 0;
}

size_t tr_onednn_workspace(const struct tr_node *node, const struct tr_tensor *in, const struct tr_tensor *out)
{
    (void)node, (void)in, (void)out;
    return 0;
}

struct tr_onednn_counts tr_onednn_counts_of(const struct tr_onednn *o)
{
    (void)o;
    return (struct tr_onednn_counts){0};
}

bool tr_onednn_computes_bf16(void) { return false; }

bool tr_onednn_gemm_available(const struct tr_onednn_gemm *s)
{
    (void)s;
    return false;
}

int tr_onednn_gemm_prepare(struct tr_onednn *o, const struct tr_onednn_gemm *s)
{
    (void)o, (void)s;
    return -1;
}

bool tr_onednn_gemm_ready(struct tr_onednn *o, const struct tr_onednn_gemm *s)
{
    (void)o, (void)s;
    return false;
}

size_t tr_onednn_gemm_workspace(const struct tr_onednn_gemm *s)
{
    (void)s;
    return 0;
}

int tr_onednn_gemm_run(struct tr_onednn *o, const struct tr_onednn_gemm *s, const void *A, const void *B, void *C,
                       void *workspace, size_t workspace_bytes)
{
    (void)o, (void)s, (void)A, (void)B, (void)C, (void)workspace, (void)workspace_bytes;
    return -1;
}

size_t tr_onednn_gemm_scratch(const struct tr_onednn_gemm *s)
{
    (void)s;
    return 0;
}

const struct tr_onednn_piece *tr_onednn_gemm_piece(struct tr_onednn *o, const struct tr_onednn_gemm *s)
{
    (void)o, (void)s;
    return NULL;
}

size_t tr_onednn_piece_scratch(const struct tr_onednn_piece *piece)
{
    (void)piece;
    return 0;
}

int tr_onednn_piece_run(struct tr_onednn *o, const struct tr_onednn_piece *piece, const void *A, const void *B,
                        void *C, void *scratch, int slot)
{
    (void)o, (void)piece, (void)A, (void)B, (void)C, (void)scratch, (void)slot;
    return 1;
}

int tr_onednn_streams(const struct tr_onednn *o)
{
    (void)o;
    return 0;
}

void tr_onednn_describe(char *buf, size_t n) { snprintf(buf, n, "oneDNN not built (configure --without-onednn or no libdnnl-dev)"); }

#endif
