/* The training loop across ranks (ranks.h). */
#include "train/ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "report/crc32c.h"

int tr_ranks_after_backward(struct tr_grad_reducer *r, const struct tr_comm *all, char *grads, bool ran,
                            struct tr_ranks_step *st, struct tr_diag *d)
{
    if (all->world == 1)
        return 0;
    int rc = r->comm->world > 1 ? tr_grad_reduce(r, grads, ran, d) : 0;
    double sums[4] = {st->loss, st->signal, st->time_up, st->failed};
    if (!rc)
        rc = tr_comm_sum_doubles(all, sums, 4, d);
    if (!rc)
        *st = (struct tr_ranks_step){sums[0], sums[1] > 0, sums[2] > 0, sums[3] > 0};
    return rc;
}

/* The ranks whose value differs from rank 0's, "1, 3", into out; 0 when none does. */
static size_t differing(const struct tr_comm *c, const uint64_t *all, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int k = 1; k < c->world && used < size; k++)
        if (all[k] != all[0])
            used += (size_t)snprintf(out + used, size - used, "%s%d", used ? ", " : "", k);
    return used;
}

int tr_ranks_same_job(const struct tr_comm *c, const struct tr_recipe *r, const struct tr_data *data,
                      struct tr_diag *d)
{
    if (c->world == 1)
        return 0;
    char *json = tr_recipe_to_json(r);
    const struct tr_split *splits[3] = {&data->train, &data->valid, &data->test};
    uint64_t mine = json ? tr_crc32c(json, strlen(json)) : 0;
    for (int i = 0; i < 3; i++)
        mine = mine * 1000003u ^ (uint64_t)splits[i]->n ^ (uint64_t)splits[i]->ntokens << 20;
    free(json);
    uint64_t *all = tr_xcalloc((size_t)c->world, sizeof *all);
    int rc = tr_comm_gather(c, mine, all, d);
    char differ[256];
    if (!rc && differing(c, all, differ, sizeof differ))
        rc = tr_fail(d, TR_EINVAL, "rank %s of %d %s a different job from rank 0's (the resolved recipe or the data "
                     "loaded): a conf file, an override or a data set differs between them; nothing was trained",
                     differ, c->world, strchr(differ, ',') ? "run" : "runs");
    free(all);
    return rc;
}

enum { CHUNK = 1 << 22 };   /* bytes a copy through the host moves at a time */

int tr_ranks_broadcast_region(const struct tr_comm *c, const struct tr_backend *be, char *region, size_t bytes,
                              struct tr_diag *d)
{
    if (c->world == 1 || !bytes)
        return 0;
    if (be->ops->host_visible)
        return tr_comm_broadcast(c, region, bytes, d);
    char *host = tr_xmalloc(bytes < CHUNK ? bytes : CHUNK);
    int rc = 0;
    for (size_t at = 0; at < bytes && !rc; at += CHUNK) {
        size_t n = bytes - at < CHUNK ? bytes - at : CHUNK;
        if (c->rank == 0)
            rc = tr_backend_copy(be, host, region + at, n, TR_COPY_TO_HOST, d);
        rc = tr_comm_agree(c, rc, "reading its memory", d);
        if (!rc)
            rc = tr_comm_broadcast(c, host, n, d);
        if (!rc && c->rank != 0)
            rc = tr_backend_copy(be, region + at, host, n, TR_COPY_TO_DEVICE, d);
    }
    free(host);
    return rc;
}

/* CRC-32C of the parameters region, a chunk at a time through the host. */
static int params_hash(const struct tr_exec *x, uint64_t *hash, struct tr_diag *d)
{
    size_t bytes = x->region_bytes[TR_PARAM];
    char *host = tr_xmalloc(bytes < CHUNK ? (bytes ? bytes : 1) : CHUNK);
    uint64_t h = 0;
    int rc = 0;
    for (size_t at = 0; at < bytes && !rc; at += CHUNK) {
        size_t n = bytes - at < CHUNK ? bytes - at : CHUNK;
        rc = tr_backend_copy(x->be, host, x->base[TR_PARAM] + at, n, TR_COPY_TO_HOST, d);
        h = h * 1000003u ^ tr_crc32c(host, n);
    }
    free(host);
    *hash = h ^ bytes;
    return rc;
}

int tr_ranks_same_params(const struct tr_comm *c, const struct tr_exec *x, int64_t step, struct tr_diag *d)
{
    if (c->world == 1 || x->shard.fill)   /* ZeRO 3: each rank holds its own part of them */
        return 0;
    uint64_t mine = 0, *all = tr_xcalloc((size_t)c->world, sizeof *all);
    int rc = params_hash(x, &mine, d);
    rc = tr_comm_agree(c, rc, "reading its parameters", d);   /* every rank gathers, whatever its copy did */
    if (!rc)
        rc = tr_comm_gather(c, mine, all, d);
    char differ[256];
    size_t used = rc ? 0 : differing(c, all, differ, sizeof differ);
    free(all);
    if (used)
        rc = tr_fail(d, TR_EFAIL, "after step %lld the parameters of rank %s differ from rank 0's: the ranks "
                     "no longer train one model (a rank's device or memory is faulty, or the ranks run different "
                     "builds)", (long long)step, differ);
    return rc;
}

static int tensor_sum(const struct tr_comm *c, const struct tr_kernel_args *a)
{
    const struct tr_tensor *in = &a->in[0], *out = &a->out[0];
    int64_t n = tr_tensor_numel(out);
    if (out->dtype == TR_F32) {
        if (out->data != in->data)
            memcpy(out->data, in->data, (size_t)n * sizeof(float));
        return tr_comm_sum_floats(c, out->data, (size_t)n, a->diag);
    }
    if (!tr_dtype_is_16bit(out->dtype))
        return tr_fail(a->diag, TR_EFAIL, "internal: an all-reduce of %s values", tr_dtype_name(out->dtype));
    enum { PIECE = 65536 };   /* the f32 sum of a piece, on the stack */
    float sum[PIECE];
    const uint16_t *from = in->data;
    uint16_t *to = out->data;
    int rc = 0;
    for (int64_t at = 0; at < n && !rc; at += PIECE) {
        int64_t m = n - at < PIECE ? n - at : PIECE;
        for (int64_t i = 0; i < m; i++)
            sum[i] = out->dtype == TR_BF16 ? tr_bf16_to_f32(from[at + i]) : tr_f16_to_f32(from[at + i]);
        rc = tr_comm_sum_floats(c, sum, (size_t)m, a->diag);
        for (int64_t i = 0; i < m && !rc; i++)
            to[at + i] = out->dtype == TR_BF16 ? tr_f32_to_bf16(sum[i]) : tr_f32_to_f16(sum[i]);
    }
    return rc;
}

/* ---- sequence parallelism: a tensor rank's part of axis 1 -------------------------------------- */

/* [B, S, …] whole against [B, S/T, …] a rank's part: element i of rank k's part (in its own
 * order) is element whole_at(p, k, i) of the whole. */
struct seq_parts {
    int T, rank;
    int64_t part;    /* elements in a rank's part */
    int64_t inner;   /* a part's elements a sample: S/T · … */
    size_t size;     /* an element's bytes */
};

static struct seq_parts seq_parts_of(const struct tr_comm *c, const struct tr_tensor *part)
{
    struct seq_parts p = {c->world, c->rank, tr_tensor_numel(part), 1, tr_dtype_size(part->dtype)};
    for (int i = 1; i < part->rank; i++)
        p.inner *= part->dim[i];
    return p;
}

static int64_t whole_at(const struct seq_parts *p, int k, int64_t i)
{
    return (i / p->inner * p->T + k) * p->inner + i % p->inner;
}

/* Copies elements [at, at + n) of rank k's part between its order and the whole's: into the
 * whole (to_whole) or out of it, a run at a time. */
static void seq_copy(const struct seq_parts *p, int k, int64_t at, int64_t n, char *part, char *whole, bool to_whole)
{
    for (int64_t i = at; i < at + n;) {
        int64_t run = p->inner - i % p->inner;
        run = run < at + n - i ? run : at + n - i;
        char *w = whole + (size_t)whole_at(p, k, i) * p->size, *q = part + (size_t)(i - at) * p->size;
        memcpy(to_whole ? w : q, to_whole ? q : w, (size_t)run * p->size);
        i += run;
    }
}

enum { SEQ_PIECE = 262144 };   /* the bytes of the ranks' pieces, on the stack */

/* All-gather: each rank's part into the whole, a piece of each part at a time. */
static int seq_gather(const struct tr_comm *c, const struct tr_kernel_args *a)
{
    struct seq_parts p = seq_parts_of(c, &a->in[0]);
    char all[SEQ_PIECE];
    int64_t m = (int64_t)(SEQ_PIECE / ((size_t)p.T * p.size));
    int rc = 0;
    for (int64_t at = 0; at < p.part && !rc; at += m) {
        int64_t n = p.part - at < m ? p.part - at : m;
        rc = tr_comm_allgather_bytes(c, (const char *)a->in[0].data + (size_t)at * p.size, all, (size_t)n * p.size,
                                     a->diag);
        for (int k = 0; k < p.T && !rc; k++)
            seq_copy(&p, k, at, n, all + (size_t)k * (size_t)n * p.size, a->out[0].data, true);
    }
    return rc;
}

/* Reduce-scatter: this rank's part of the ranks' sum, summed in f32 a piece at a time (16-bit
 * values rounded once). */
static int seq_scatter(const struct tr_comm *c, const struct tr_kernel_args *a)
{
    struct seq_parts p = seq_parts_of(c, &a->out[0]);
    enum tr_dtype t = a->out[0].dtype;
    if (t != TR_F32 && !tr_dtype_is_16bit(t))
        return tr_fail(a->diag, TR_EFAIL, "internal: a reduce-scatter of %s values", tr_dtype_name(t));
    float all[SEQ_PIECE / sizeof(float)], sum[SEQ_PIECE / sizeof(float) / 2];
    int64_t m = (int64_t)(sizeof sum / sizeof *sum) / p.T;
    int rc = 0;
    for (int64_t at = 0; at < p.part && !rc; at += m) {
        int64_t n = p.part - at < m ? p.part - at : m;
        for (int k = 0; k < p.T; k++) {
            float *to = all + (size_t)k * (size_t)n;
            if (t == TR_F32) {
                seq_copy(&p, k, at, n, (char *)to, a->in[0].data, false);
                continue;
            }
            uint16_t piece[SEQ_PIECE / sizeof(float) / 2];
            seq_copy(&p, k, at, n, (char *)piece, a->in[0].data, false);
            for (int64_t i = 0; i < n; i++)
                to[i] = t == TR_BF16 ? tr_bf16_to_f32(piece[i]) : tr_f16_to_f32(piece[i]);
        }
        float *out = t == TR_F32 ? (float *)a->out[0].data + at : sum;
        rc = tr_comm_reduce_scatter_block(c, all, out, (size_t)n, a->diag);
        uint16_t *to = (uint16_t *)a->out[0].data + at;
        for (int64_t i = 0; t != TR_F32 && !rc && i < n; i++)
            to[i] = t == TR_BF16 ? tr_f32_to_bf16(sum[i]) : tr_f32_to_f16(sum[i]);
    }
    return rc;
}

/* This rank's part of a value every rank holds whole: no communication. */
static int seq_slice(const struct tr_comm *c, const struct tr_kernel_args *a)
{
    struct seq_parts p = seq_parts_of(c, &a->out[0]);
    seq_copy(&p, p.rank, 0, p.part, a->out[0].data, a->in[0].data, false);
    return 0;
}

void tr_ranks_find_partial(struct tr_tensor_sums *t, const struct tr_graph *g)
{
    free(t->partial);
    t->partial = NULL, t->npartial = 0;
    bool *partial = tr_xcalloc((size_t)g->nvalues, sizeof *partial);
    for (int i = 0; i < g->nnodes; i++) {   /* a forward node over a part of the sequence */
        const struct tr_node *n = &g->nodes[i];
        bool part = false;
        for (int j = 0; j < n->nin; j++)
            part = part || tr_value_seq_part(g, n->in[j]);
        for (int j = 0; part && n->phase == TR_FORWARD && j < n->nin; j++)
            partial[n->in[j]] = partial[n->in[j]] || g->values[n->in[j]].kind == TR_PARAM;
    }
    t->partial = tr_xcalloc((size_t)g->nvalues, sizeof *t->partial);
    for (int v = 0; v < g->nvalues; v++)
        if (partial[v] && g->values[v].grad >= 0)
            t->partial[t->npartial++] = g->values[v].grad;
    free(partial);
}

int tr_ranks_sum_partial(struct tr_tensor_sums *t, const struct tr_exec *x, struct tr_diag *d)
{
    int rc = 0;
    for (int i = 0; i < t->npartial && !rc; i++) {
        int v = t->partial[i];
        struct tr_kernel_args a = {.nin = 1, .nout = 1, .diag = d};
        const struct tr_value *val = &x->g->values[v];
        void *data = tr_exec_data(x, v);
        if (!data)   /* pipelined: another stage's (this stage's tensor ranks skip it alike) */
            continue;
        a.in[0] = (struct tr_tensor){.dtype = val->dtype, .rank = val->shape.rank, .data = data};
        for (int k = 0; k < val->shape.rank; k++)
            a.in[0].dim[k] = tr_dim_eval(val->shape.dim[k], 1, 1);
        a.out[0] = a.in[0];
        double began = tr_now();
        rc = tensor_sum(t->comm, &a);
        t->seconds += tr_now() - began;
        t->bytes += (double)tr_tensor_bytes(&a.in[0]);
        t->count++;
    }
    return rc;
}

int tr_ranks_tensor_sum(void *ctx, const struct tr_kernel_args *a)
{
    struct tr_tensor_sums *t = ctx;
    enum tr_op op = a->node->op;
    if (op == TR_OP_SEQ_SLICE)
        return seq_slice(t->comm, a);
    double began = tr_now();
    int rc = op == TR_OP_SEQ_GATHER ? seq_gather(t->comm, a) : op == TR_OP_SEQ_SCATTER ? seq_scatter(t->comm, a)
                                                                                    : tensor_sum(t->comm, a);
    t->seconds += tr_now() - began;
    const struct tr_tensor *whole = op == TR_OP_SEQ_SCATTER ? &a->in[0] : &a->out[0];
    t->bytes += (double)tr_tensor_numel(whole) * (double)tr_dtype_size(whole->dtype);
    t->count++;
    return rc;
}
