/* Gradients and running statistics summed over the ranks (gradients.h). */
#include "dist/gradients.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "plan/shard.h"

/* The run's floats [from, from + n) summed over the ranks: a reduce-scatter over the parts of
 * it each rank owns, then (unsharded) an all-gather of them; counts and displs: scratch. */
static int sum_run(const struct tr_grad_reducer *r, float *run, int64_t from, int64_t n, int *counts, int *displs,
                   struct tr_diag *d)
{
    if (!r->parts)
        return tr_comm_sum_floats(r->comm, run + from, (size_t)n, d);
    for (int k = 0; k < r->comm->world; k++) {
        int64_t lo = r->parts[k] > from ? r->parts[k] : from;
        int64_t hi = r->parts[k + 1] < from + n ? r->parts[k + 1] : from + n;
        counts[k] = hi > lo ? (int)(hi - lo) : 0, displs[k] = hi > lo ? (int)(lo - from) : 0;
    }
    int rc = tr_comm_reduce_scatter(r->comm, run + from, counts, displs, d);
    return rc || r->shard ? rc : tr_comm_allgather(r->comm, run + from, counts, displs, d);
}

/* The parts of the run (floats from r->first) each rank owns: ZeRO's cut of the parameters'
 * elements (end to end) placed where the elements lie; NULL where the gradients do not lie in
 * the parameters' order. */
static int64_t *run_parts(const struct tr_grad_reducer *r, const struct tr_param_span *spans, int nspans)
{
    int world = r->comm->world;
    int64_t *numel = tr_xmalloc((size_t)(nspans + 1) * sizeof *numel), *first = tr_xmalloc((size_t)(world + 1) * sizeof *first);
    int64_t *parts = tr_xmalloc((size_t)(world + 1) * sizeof *parts), run = (r->end - r->first) / (int64_t)sizeof(float);
    bool ordered = true;
    for (int i = 0; i < nspans; i++) {
        numel[i] = spans[i].numel;
        ordered = ordered && (i == 0 || spans[i].grad >= spans[i - 1].grad + spans[i - 1].numel * (int64_t)sizeof(float));
    }
    tr_shard_cut(numel, nspans, world, first);
    for (int k = 0; k <= world; k++) {
        parts[k] = run;
        for (int i = 0; i < nspans; i++)
            if (first[k] >= spans[i].state && first[k] < spans[i].state + spans[i].numel) {
                parts[k] = (spans[i].grad - r->first) / (int64_t)sizeof(float) + (first[k] - spans[i].state);
                break;
            }
    }
    parts[0] = 0;
    free(numel), free(first);
    if (!ordered || run > INT32_MAX) {   /* counts are MPI's ints */
        free(parts);
        return NULL;
    }
    return parts;
}

/* One bucket summed over the ranks, a span of the trace while the profile records. */
static int sum_bucket(struct tr_grad_reducer *r, float *bucket, size_t n, struct tr_diag *d)
{
    double began = tr_now();
    int rc = tr_comm_sum_floats(r->comm, bucket, n, d);
    if (r->profile)
        tr_exec_profile_span(r->profile, "gradient bucket", r->step, began, tr_now());
    return rc;
}

/* ---- ZeRO stage 2 ------------------------------------------------------------------------------- */

static void stage2_init(struct tr_grad_reducer *r, const struct tr_graph *g, int nspans)
{
    int world = r->comm->world;
    r->stage2 = true;
    r->grad_values = tr_xmalloc((size_t)(nspans + 1) * sizeof *r->grad_values);
    r->numel = tr_xmalloc((size_t)(nspans + 1) * sizeof *r->numel);
    r->cut = tr_xmalloc((size_t)(world + 1) * sizeof *r->cut);
    int i = 0;
    for (int v = 0; v < g->nvalues && i < nspans; v++)
        if (g->values[v].kind == TR_PARAM)
            r->grad_values[i] = g->values[v].grad, r->numel[i++] = tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
    tr_shard_cut(r->numel, nspans, world, r->cut);
    free(r->bucket);   /* the buckets go through the host buffer: a whole one */
    r->buffer_elems = r->bucket_elems;
    r->bucket = tr_xmalloc((size_t)r->buffer_elems * sizeof *r->bucket);
}

void tr_grad_reducer_begin(struct tr_grad_reducer *r, char *shard, int rounds)
{
    if (!r->stage2)
        return;
    r->summed = (float *)shard;
    r->rounds = rounds, r->done = 0;
    memset(r->summed, 0, (size_t)(r->cut[r->comm->rank + 1] - r->cut[r->comm->rank]) * sizeof *r->summed);
}

/* One sum of the round: arena holds this rank's gradients at plan's offsets (NULL: zeros). */
static int stage2_round(struct tr_grad_reducer *r, const char *arena, const struct tr_memplan *plan, struct tr_diag *d)
{
    int world = r->comm->world, rank = r->comm->rank, rc = 0;
    int64_t total = r->cut[world], lo = r->cut[rank], hi = r->cut[rank + 1];
    double began = tr_now();
    for (int64_t from = 0; from < total && !rc; from += r->buffer_elems) {
        int64_t to = from + r->buffer_elems < total ? from + r->buffer_elems : total;
        if (!arena)
            memset(r->bucket, 0, (size_t)(to - from) * sizeof *r->bucket);
        for (int i = 0, at = 0; arena && i < r->ngrads; at += (int)r->numel[i++]) {   /* packed end to end */
            int64_t a = at > from ? at : from, b = at + r->numel[i] < to ? at + r->numel[i] : to;
            if (a < b)
                memcpy(r->bucket + (a - from), arena + plan->offset[r->grad_values[i]] + (a - at) * (int64_t)sizeof(float),
                       (size_t)(b - a) * sizeof(float));
        }
        for (int k = 0; k < world; k++) {
            int64_t a = r->cut[k] > from ? r->cut[k] : from, b = r->cut[k + 1] < to ? r->cut[k + 1] : to;
            r->counts[k] = b > a ? (int)(b - a) : 0, r->displs[k] = b > a ? (int)(a - from) : 0;
        }
        rc = tr_comm_reduce_scatter(r->comm, r->bucket, r->counts, r->displs, d);
        int64_t a = lo > from ? lo : from, b = hi < to ? hi : to;
        for (int64_t e = a; !rc && e < b; e++)   /* this round's sum of this rank's part, added */
            r->summed[e - lo] += r->bucket[e - from];
    }
    r->done++;
    r->seconds += tr_now() - began;
    r->exposed += tr_now() - began;
    return rc;
}

int tr_grad_reduce_micro(struct tr_grad_reducer *r, const struct tr_exec *x, struct tr_diag *d)
{
    return r->stage2 ? stage2_round(r, x ? x->base[TR_ACT] : NULL, x ? x->plan : NULL, d) : 0;
}

bool tr_grad_reducer_owes(const struct tr_grad_reducer *r)
{
    return r->stage2 && r->done < r->rounds;
}

void tr_grad_reducer_init(struct tr_grad_reducer *r, const struct tr_comm *comm, const struct tr_backend *be,
                          const struct tr_param_span *spans, int nspans, const struct tr_graph *g,
                          const struct tr_memplan *plan, size_t bucket_bytes, int shard)
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
    r->grads_in_arena = plan->grads_in_arena;
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
    if (r->in_place)
        r->parts = run_parts(r, spans, nspans);
    r->shard = shard && r->parts;
    if (shard >= 2 && be->ops->host_visible)   /* stage 3 sums as stage 2 does */
        stage2_init(r, g, nspans);
    r->counts = tr_xmalloc((size_t)comm->world * 2 * sizeof *r->counts);
    r->displs = r->counts + comm->world;
}

static void overlap_stop(struct tr_grad_reducer *r);

void tr_grad_reducer_free(struct tr_grad_reducer *r)
{
    overlap_stop(r);
    free(r->bucket), free(r->grads), free(r->state), free(r->parts), free(r->counts);
    free(r->grad_values), free(r->numel), free(r->cut);
    if (r->on_device && r->be->ops->collective_close)
        r->be->ops->collective_close(r->be);
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
    double began = tr_now();
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
    r->seconds += tr_now() - began;
    return rc;
}

/* ---- overlapped with the backward -------------------------------------------------------------- */

/* A bucket of the gradients' run: floats [from, from + n) from its start, final after the
 * schedule's node `ready` (−1: before any). */
struct overlap_bucket {
    int64_t from, n;
    int ready;
    double began, ended;   /* its collective, on the communication thread */
};

struct tr_grad_overlap {
    struct overlap_bucket *buckets;   /* in the order they are sent: by ready, then by from */
    int nbuckets;
    int sent, summed;                 /* buckets handed to the thread, buckets it has summed */
    bool armed, stop;
    float *run;                       /* the gradients' run while armed */
    int rc;                           /* the first failed collective's code, its sentence in why */
    int *counts, *displs;             /* the thread's scratch for a bucket's parts */
    struct tr_diag why;
    struct tr_exec_hook inner;        /* the hook it chains (the profiler's) */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work, done;
};

static void *communicate(void *arg)
{
    struct tr_grad_reducer *r = arg;
    struct tr_grad_overlap *o = r->overlap;
    pthread_mutex_lock(&o->lock);
    r->comm_tid = (int)syscall(SYS_gettid);
    for (;;) {
        while (!o->stop && o->summed == o->sent)
            pthread_cond_wait(&o->work, &o->lock);
        if (o->summed == o->sent)
            break;
        struct overlap_bucket *b = &o->buckets[o->summed];
        bool failed = o->rc != 0;
        pthread_mutex_unlock(&o->lock);
        struct tr_diag why = {0};
        double began = tr_now();
        /* after a failure the rest are not sent: the step fails on every rank (the watchdog ends
         * a wait for this rank's missing ones) */
        int rc = failed ? 0 : sum_run(r, o->run, b->from, b->n, o->counts, o->displs, &why);
        double ended = tr_now();
        pthread_mutex_lock(&o->lock);
        b->began = began, b->ended = ended;
        if (rc && !o->rc) {
            o->rc = rc;
            o->why = why;
        } else {
            tr_diag_free(&why);
        }
        o->summed++;
        pthread_cond_broadcast(&o->done);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

static int by_ready(const void *a, const void *b)
{
    const struct overlap_bucket *x = a, *y = b;
    return x->ready != y->ready ? (x->ready > y->ready) - (x->ready < y->ready) : (x->from > y->from) - (x->from < y->from);
}

bool tr_grad_reducer_overlap(struct tr_grad_reducer *r, const struct tr_graph *g, const int *schedule, int n,
                             const struct tr_memplan *plan)
{
    if (r->comm->world == 1 || !r->in_place || !r->comm->threads || r->overlap)
        return false;
    int *last = tr_last_touch(g, schedule, n, TR_GRAD);   /* after it the backward leaves it alone */
    struct tr_grad_overlap *o = tr_xcalloc(1, sizeof *o);
    int64_t total = (r->end - r->first) / (int64_t)sizeof(float);
    o->nbuckets = (int)((total + r->bucket_elems - 1) / r->bucket_elems);
    o->buckets = tr_xcalloc((size_t)(o->nbuckets ? o->nbuckets : 1), sizeof *o->buckets);
    for (int b = 0; b < o->nbuckets; b++) {
        int64_t from = b * r->bucket_elems, to = from + r->bucket_elems < total ? from + r->bucket_elems : total;
        o->buckets[b] = (struct overlap_bucket){.from = from, .n = to - from, .ready = -1};
        for (int v = 0; v < g->nvalues; v++) {   /* the gradients that overlap it */
            if (g->values[v].kind != TR_GRAD)
                continue;
            int64_t lo = (plan->offset[v] - r->first) / (int64_t)sizeof(float);
            int64_t hi = lo + tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
            if (lo < to && hi > from && last[v] > o->buckets[b].ready)
                o->buckets[b].ready = last[v];
        }
    }
    free(last);
    qsort(o->buckets, (size_t)o->nbuckets, sizeof *o->buckets, by_ready);
    o->counts = tr_xmalloc((size_t)r->comm->world * 2 * sizeof *o->counts);
    o->displs = o->counts + r->comm->world;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->work, NULL);
    pthread_cond_init(&o->done, NULL);
    r->overlap = o;
    if (pthread_create(&o->thread, NULL, communicate, r)) {   /* no thread: summed after the backward */
        pthread_mutex_destroy(&o->lock), pthread_cond_destroy(&o->work), pthread_cond_destroy(&o->done);
        free(o->buckets), free(o->counts), free(o);
        r->overlap = NULL;
        return false;
    }
    return true;
}

static void overlap_stop(struct tr_grad_reducer *r)
{
    struct tr_grad_overlap *o = r->overlap;
    if (!o)
        return;
    pthread_mutex_lock(&o->lock);
    o->stop = true;
    pthread_cond_signal(&o->work);
    pthread_mutex_unlock(&o->lock);
    pthread_join(o->thread, NULL);
    pthread_mutex_destroy(&o->lock), pthread_cond_destroy(&o->work), pthread_cond_destroy(&o->done);
    tr_diag_free(&o->why);
    free(o->buckets), free(o->counts), free(o);
    r->overlap = NULL;
}

/* Hands the thread every bucket final after the schedule's node `step` (all: INT_MAX). */
static void send_ready(struct tr_grad_overlap *o, int step)
{
    int to = o->sent;
    while (to < o->nbuckets && o->buckets[to].ready <= step)
        to++;
    if (to == o->sent)
        return;
    pthread_mutex_lock(&o->lock);
    o->sent = to;
    pthread_cond_signal(&o->work);
    pthread_mutex_unlock(&o->lock);
}

static int overlap_before(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    struct tr_grad_reducer *r = ctx;
    const struct tr_exec_hook *inner = &r->overlap->inner;
    return inner->before ? inner->before(inner->ctx, x, step, node, d) : 0;
}

static int overlap_after(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d)
{
    struct tr_grad_reducer *r = ctx;
    struct tr_grad_overlap *o = r->overlap;
    int rc = o->inner.after ? o->inner.after(o->inner.ctx, x, step, node, d) : 0;
    if (o->armed)
        send_ready(o, step);
    return rc;
}

struct tr_exec_hook tr_grad_reducer_hook(struct tr_grad_reducer *r, struct tr_exec_hook inner)
{
    if (!r->overlap)
        return inner;
    r->overlap->inner = inner;
    return (struct tr_exec_hook){.before = inner.before ? overlap_before : NULL, .after = overlap_after, .ctx = r};
}

void tr_grad_reducer_arm(struct tr_grad_reducer *r, char *grads)
{
    struct tr_grad_overlap *o = r->overlap;
    if (!o)
        return;
    o->run = (float *)(grads + r->first);
    o->armed = true;
    send_ready(o, -1);   /* what no node writes (a parameter the loss does not use) */
}

/* After the backward: the rest sent, every bucket waited for, each a span of the trace. */
static int overlap_finish(struct tr_grad_reducer *r, char *grads, struct tr_diag *d)
{
    struct tr_grad_overlap *o = r->overlap;
    double began = tr_now();
    if (!o->armed) {   /* this rank ran none of the step's micro-batches: zeros */
        o->run = (float *)(grads + r->first);
        memset(o->run, 0, (size_t)(r->end - r->first));
    }
    send_ready(o, INT_MAX);
    pthread_mutex_lock(&o->lock);
    while (o->summed < o->nbuckets)
        pthread_cond_wait(&o->done, &o->lock);
    int rc = o->rc;
    if (rc) {
        rc = tr_fail_because(d, rc, &o->why, "summing the gradients over the ranks");
        o->why = (struct tr_diag){0};
    }
    o->rc = 0, o->sent = o->summed = 0, o->armed = false;
    pthread_mutex_unlock(&o->lock);
    double ended = tr_now();
    r->exposed += ended - began;
    for (int b = 0; b < o->nbuckets; b++) {
        r->seconds += o->buckets[b].ended - o->buckets[b].began;
        if (r->profile)
            tr_exec_profile_span_on(r->profile, TR_LANE_COMMUNICATION, "gradient bucket", r->step,
                                    o->buckets[b].began, o->buckets[b].ended);
    }
    return rc;
}

/* ---- a device's own collectives ----------------------------------------------------------------- */

int tr_grad_reducer_device(struct tr_grad_reducer *r, struct tr_diag *d)
{
    const struct tr_backend_ops *ops = r->be->ops;
    if (r->comm->world == 1 || ops->host_visible || !ops->collective_sum)
        return 0;
    char id[TR_COLLECTIVE_ID_BYTES] = {0};
    struct tr_diag why = {0};
    int rc = r->comm->rank == 0 ? ops->collective_id(id, sizeof id, &why) : 0;
    rc = tr_comm_agree(r->comm, rc, "making the GPUs' communicator", &why);
    if (!rc)
        rc = tr_comm_broadcast(r->comm, id, sizeof id, &why);
    if (!rc)
        rc = ops->collective_open(r->be, id, r->comm->world, r->comm->rank, &why);
    rc = tr_comm_agree(r->comm, rc, "opening the GPUs' communicator", &why);
    r->on_device = rc == 0;
    if (rc)
        tr_fail_because(d, rc, &why, "the gradients travel through host copies");
    else
        tr_diag_free(&why);
    return rc;
}

/* On the device: the run of gradients a bucket at a time (each in the arena alone), zeros first
 * where this rank wrote none. */
static int device_sum(struct tr_grad_reducer *r, char *grads, bool ran, struct tr_diag *d)
{
    const struct tr_backend *be = r->be;
    int rc = 0;
    if (!r->grads_in_arena) {
        size_t n = (size_t)(r->end - r->first) / sizeof(float);
        float *run = (float *)(grads + r->first);
        if (!ran)
            rc = tr_backend_fill(be, run, 0, n * sizeof *run, d);
        for (size_t at = 0; at < n && !rc; at += (size_t)r->bucket_elems)
            rc = be->ops->collective_sum(be, run + at, n - at < (size_t)r->bucket_elems ? n - at : (size_t)r->bucket_elems, d);
        return rc;
    }
    for (int i = 0; i < r->ngrads && !rc; i++) {
        float *g = (float *)(grads + r->grads[i].offset);
        if (!ran)
            rc = tr_backend_fill(be, g, 0, (size_t)r->grads[i].numel * sizeof *g, d);
        if (!rc)
            rc = be->ops->collective_sum(be, g, (size_t)r->grads[i].numel, d);
    }
    return rc;
}

int tr_grad_reduce(struct tr_grad_reducer *r, char *grads, bool ran, struct tr_diag *d)
{
    if (r->comm->world == 1)
        return 0;
    if (r->overlap)
        return overlap_finish(r, grads, d);
    if (r->stage2) {   /* the rounds this rank has no micro-batch for: zeros */
        int rc = 0;
        while (!rc && r->done < r->rounds)
            rc = stage2_round(r, NULL, NULL, d);
        r->done = r->rounds = 0;
        return rc;
    }
    double began = tr_now();
    int rc = 0;
    if (r->on_device) {
        rc = device_sum(r, grads, ran, d);
        r->seconds += tr_now() - began;
    } else if (!r->in_place) {
        rc = reduce(r, grads, r->grads, r->ngrads, ran, 1, d);
    } else {
        float *run = (float *)(grads + r->first);
        size_t n = (size_t)(r->end - r->first) / sizeof(float);
        if (!ran)   /* this rank's gradients were not written this step */
            memset(run, 0, n * sizeof *run);
        for (size_t at = 0; at < n && !rc; at += (size_t)r->bucket_elems) {
            double from = tr_now();
            rc = sum_run(r, run, (int64_t)at, (int64_t)(n - at < (size_t)r->bucket_elems ? n - at : (size_t)r->bucket_elems),
                         r->counts, r->displs, d);
            if (r->profile)
                tr_exec_profile_span(r->profile, "gradient bucket", r->step, from, tr_now());
        }
        r->seconds += tr_now() - began;
    }
    r->exposed += tr_now() - began;   /* nothing overlapped */
    return rc;
}

int tr_state_average(struct tr_grad_reducer *r, char *params, struct tr_diag *d)
{
    if (r->comm->world == 1 || !r->nstate)
        return 0;
    return reduce(r, params, r->state, r->nstate, true, 1.0f / (float)r->comm->world, d);
}
