/* The pieces oneDNN's MATMUL (onednn.c) and convolutions (onednn_conv.c) share: how a varying
 * size is cut into the pieces primitives are made for, primitives made on one thread, the
 * scratch alignment and the thread slots. A file of its own so that the two depend on it and
 * not on each other (tests/includes.sh: no circles between files). */
#include "config.h"

#ifdef HAVE_ONEDNN
#include <omp.h>
#include <string.h>

#include "backend/cpu/onednn_impl.h"

/* ---- cutting a size into pieces ----------------------------------------------------------------- */

struct cut tr_onednn_cut_of(int64_t size, int64_t tile, bool binary)
{
    return (struct cut){size / tile, tile, size % tile, binary};
}

int tr_onednn_cut_count(const struct cut *c)
{
    return (int)c->full + (c->binary ? __builtin_popcountll((unsigned long long)c->rest) : c->rest > 0);
}

int64_t tr_onednn_cut_at(const struct cut *c, int64_t i, int64_t *size)
{
    if (i < c->full || !c->binary) {
        *size = i < c->full ? c->tile : c->rest;
        return i * c->tile;
    }
    int64_t offset = c->full * c->tile;
    for (int bit = 62; bit >= 0; bit--) {
        int64_t p = (int64_t)1 << bit;
        if (!(c->rest & p))
            continue;
        if (i == c->full) {
            *size = p;
            return offset;
        }
        offset += p, i--;
    }
    *size = 0;
    return offset;
}

dnnl_primitive_desc_t tr_onednn_one_thread_pd(const_dnnl_op_desc_t desc, const_dnnl_primitive_attr_t attr,
                                              dnnl_engine_t engine, const_dnnl_primitive_desc_t hint)
{
    return tr_onednn_one_thread_pd_preferring(desc, attr, engine, hint, NULL);
}

dnnl_primitive_desc_t tr_onednn_one_thread_pd_preferring(const_dnnl_op_desc_t desc, const_dnnl_primitive_attr_t attr,
                                                         dnnl_engine_t engine, const_dnnl_primitive_desc_t hint,
                                                         bool (*prefer)(const char *impl))
{
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_primitive_desc_t first = NULL, chosen = NULL;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    if (dnnl_primitive_desc_iterator_create(&it, desc, attr, engine, hint) == dnnl_success) {
        do {
            dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
            const char *impl = NULL;
            if (!pd || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) || !impl ||
                !strncmp(impl, "ref", 3))
                dnnl_primitive_desc_destroy(pd);
            else if (!prefer || prefer(impl))
                chosen = pd;
            else if (!first)
                first = pd;
            else
                dnnl_primitive_desc_destroy(pd);
        } while (!chosen && dnnl_primitive_desc_iterator_next(it) == dnnl_success);
        dnnl_primitive_desc_iterator_destroy(it);
    }
    omp_set_num_threads(threads);
    if (chosen)
        dnnl_primitive_desc_destroy(first);
    return chosen ? chosen : first;
}

dnnl_status_t tr_onednn_one_thread_primitive(dnnl_primitive_t *prim, const_dnnl_primitive_desc_t pd)
{
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_status_t st = dnnl_primitive_create(prim, pd);
    omp_set_num_threads(threads);
    return st;
}

size_t tr_onednn_aligned(size_t bytes)
{
    return (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

/* bf16 computes natively from AVX-512 BF16 on (AMX includes it); below, 2.6.3 has no bf16
 * matmul or convolution kernel but its reference one, slower than widening. */
bool tr_onednn_isa_avx512(void)
{
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

bool tr_onednn_isa_bf16(void)
{
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

int tr_onednn_slots(void)
{
    int t = omp_get_max_threads();
    return t > 2 ? t : 2;
}

int tr_onednn_threads(const struct tr_onednn *o, int64_t pieces, size_t stride, size_t shared, size_t have)
{
    int threads = omp_get_max_threads();
    if (threads > 1 && pieces < threads)
        threads = pieces > 2 ? (int)pieces : 2;
    if (threads > o->nstreams)
        threads = o->nstreams;
    if (stride && (size_t)threads * stride + shared > have)
        threads = have > shared ? (int)((have - shared) / stride) : 0;
    return threads;
}

bool tr_onednn_dims_vary(const struct tr_graph *g, int v, int from, int to)
{
    const struct tr_shape *s = &g->values[v].shape;
    for (int i = from; i < to && i < s->rank; i++)
        if (s->dim[i].b || s->dim[i].s)
            return true;
    return false;
}

#endif
