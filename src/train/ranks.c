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

int tr_ranks_tensor_sum(void *ctx, const struct tr_kernel_args *a)
{
    struct tr_tensor_sums *t = ctx;
    double began = tr_now();
    int rc = tensor_sum(t->comm, a);
    t->seconds += tr_now() - began;
    t->bytes += (double)tr_tensor_numel(&a->out[0]) * (double)tr_dtype_size(a->out[0].dtype);
    t->count++;
    return rc;
}
