/* Gradients and running statistics summed over the ranks (gradients.h). */
#include "dist/gradients.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One bucket summed over the ranks, a span of the trace while the profile records. */
static int sum_bucket(struct tr_grad_reducer *r, float *bucket, size_t n, struct tr_diag *d)
{
    double began = now();
    int rc = tr_comm_sum_floats(r->comm, bucket, n, d);
    if (r->profile)
        tr_exec_profile_span(r->profile, "gradient bucket", r->step, began, now());
    return rc;
}

void tr_grad_reducer_init(struct tr_grad_reducer *r, const struct tr_comm *comm, const struct tr_backend *be,
                          const struct tr_param_span *spans, int nspans, const struct tr_graph *g,
                          const struct tr_memplan *plan, size_t bucket_bytes)
{
    *r = (struct tr_grad_reducer){.comm = comm, .be = be};
    if (comm->world == 1)
        return;
    int state = 0;
    for (int v = 0; v < g->nvalues; v++)
        state += g->values[v].kind == TR_STATE && g->values[v].dtype == TR_F32;
    r->grads = tr_xcalloc((size_t)nspans + 1, sizeof *r->grads);
    r->state = tr_xcalloc((size_t)state + 1, sizeof *r->state);
    int64_t total = 0;
    r->first = nspans ? spans[0].grad : 0;
    for (int i = 0; i < nspans; i++) {
        r->grads[r->ngrads++] = (struct tr_span_f32){spans[i].grad, spans[i].numel};
        total += spans[i].numel;
        int64_t end = spans[i].grad + spans[i].numel * (int64_t)sizeof(float);
        r->first = spans[i].grad < r->first ? spans[i].grad : r->first;
        r->end = end > r->end ? end : r->end;
    }
    r->in_place = be->ops->host_visible && !plan->grads_in_arena;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_STATE && g->values[v].dtype == TR_F32)
            r->state[r->nstate++] = (struct tr_span_f32){plan->offset[v],
                                                         tr_dim_eval(tr_shape_numel(&g->values[v].shape), plan->B, plan->S)};
    int64_t cap = (int64_t)(bucket_bytes / sizeof(float)), staged = 0;
    r->bucket_elems = cap < 1 ? 1 : cap;
    for (int s = 0; s < r->nstate; s++)   /* what goes through the host buffer: the statistics, */
        staged += r->state[s].numel;
    if (!r->in_place)                     /* and the gradients unless summed where they lie */
        staged = total > staged ? total : staged;
    r->buffer_elems = staged < r->bucket_elems ? (staged ? staged : 1) : r->bucket_elems;
    r->bucket = tr_xmalloc((size_t)r->buffer_elems * sizeof *r->bucket);
}

void tr_grad_reducer_free(struct tr_grad_reducer *r)
{
    free(r->bucket), free(r->grads), free(r->state);
    *r = (struct tr_grad_reducer){0};
}

/* Copies the elements [from, from + n) of the spans laid end to end (in their order) between
 * base and the bucket: into it (to_host), or back out of it. */
static int move(const struct tr_grad_reducer *r, char *base, const struct tr_span_f32 *spans, int nspans,
                int64_t from, int64_t n, bool to_host, struct tr_diag *d)
{
    int64_t at = 0;   /* where span s starts in the run of all of them */
    for (int s = 0; s < nspans && at < from + n; at += spans[s++].numel) {
        int64_t lo = from > at ? from : at, hi = from + n < at + spans[s].numel ? from + n : at + spans[s].numel;
        if (lo >= hi)
            continue;
        char *device = base + spans[s].offset + (lo - at) * (int64_t)sizeof(float);
        float *host = r->bucket + (lo - from);
        size_t bytes = (size_t)(hi - lo) * sizeof(float);
        int rc = to_host ? tr_backend_copy(r->be, host, device, bytes, TR_COPY_TO_HOST, d)
                         : tr_backend_copy(r->be, device, host, bytes, TR_COPY_TO_DEVICE, d);
        if (rc)
            return rc;
    }
    return 0;
}

/* The spans at base summed over the ranks, a bucket at a time; zeros stand for this rank's
 * values when !mine; scale multiplies the sums (1: none). */
static int reduce(struct tr_grad_reducer *r, char *base, const struct tr_span_f32 *spans, int nspans, bool mine,
                  float scale, struct tr_diag *d)
{
    int64_t total = 0;
    for (int s = 0; s < nspans; s++)
        total += spans[s].numel;
    double began = now();
    int rc = 0;
    for (int64_t from = 0; from < total && !rc; from += r->buffer_elems) {
        int64_t n = total - from < r->buffer_elems ? total - from : r->buffer_elems;
        if (mine)
            rc = move(r, base, spans, nspans, from, n, true, d);
        else
            memset(r->bucket, 0, (size_t)n * sizeof *r->bucket);
        if (!rc)
            rc = sum_bucket(r, r->bucket, (size_t)n, d);
        for (int64_t i = 0; !rc && scale != 1 && i < n; i++)
            r->bucket[i] *= scale;
        if (!rc)
            rc = move(r, base, spans, nspans, from, n, false, d);
    }
    r->seconds += now() - began;
    return rc;
}

int tr_grad_reduce(struct tr_grad_reducer *r, char *grads, bool ran, struct tr_diag *d)
{
    if (r->comm->world == 1)
        return 0;
    if (!r->in_place)
        return reduce(r, grads, r->grads, r->ngrads, ran, 1, d);
    double began = now();
    float *run = (float *)(grads + r->first);
    size_t n = (size_t)(r->end - r->first) / sizeof(float);
    if (!ran)   /* this rank's gradients were not written this step */
        memset(run, 0, n * sizeof *run);
    int rc = 0;
    for (size_t at = 0; at < n && !rc; at += (size_t)r->bucket_elems)
        rc = sum_bucket(r, run + at, n - at < (size_t)r->bucket_elems ? n - at : (size_t)r->bucket_elems, d);
    r->seconds += now() - began;
    return rc;
}

int tr_state_average(struct tr_grad_reducer *r, char *params, struct tr_diag *d)
{
    if (r->comm->world == 1 || !r->nstate)
        return 0;
    return reduce(r, params, r->state, r->nstate, true, 1.0f / (float)r->comm->world, d);
}
