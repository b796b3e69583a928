/* The loader (loader.h): worker threads fill a ring of step slots, the trainer takes them in
 * order. Steps are numbered k = epoch · per_epoch + index from 0; worker w makes the steps
 * k ≡ w (mod workers) into slot k mod ring, so a slot is free again once the consumer has let
 * go of step k − ring, and no two threads ever write one slot at once. Everything the threads
 * share is guarded by one mutex; the copying itself runs outside it. */
#include "data/loader.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/shuffle.h"

#define MAX_WORKERS 1024
#define ID_BITS 40   /* dynamic batching sorts keys length << ID_BITS | id */

struct slot {
    int64_t step;    /* the step it holds or is being filled with */
    bool ready;
    int64_t n, ntokens, nslots;   /* samples; text: real tokens and token slots */
    int nmicro;
    struct tr_batch *micro;   /* up to batch micro-batches, pointing into the arrays below */
    float *x;
    int32_t *y;
    int64_t *ids;
    int32_t *tokens, *targets;   /* text: the micro-batches' [n, S] one after another */
    uint8_t *mask;
};

/* An epoch's layout: the order of its samples and, with dynamic batching, where each
 * micro-batch starts in it. Each worker keeps its own, so no lock is held while shuffling and
 * sorting (O(n log n), once an epoch a worker). */
struct worker {
    struct tr_loader *l;
    int index;
    pthread_t thread;
    bool started;
    int64_t *order;
    int64_t layout_epoch;
    uint8_t *starts;       /* dynamic: 1 where a micro-batch starts */
    uint64_t *keys;        /* dynamic: scratch, a pool's (length, id) keys sorted */
    int64_t *chunks;       /* dynamic: scratch, micro-batch starts in keys (+ the end) */
    int64_t *perm;         /* dynamic: scratch, the micro-batches' shuffled order */
};

struct tr_loader {
    const struct tr_split *s;
    int64_t batch, micro, features, per_epoch, pool, multiple;
    struct tr_length_bucket *buckets;
    int nbuckets;
    uint64_t seed;
    bool shuffle, drop_last;
    int nworkers, ring;
    int hold;                   /* steps the consumer holds at once (1 or 2) */
    struct tr_memory_ops mem;   /* where the ring's arrays come from */
    struct slot *slots;
    struct tr_batch *batches;
    float *xs;
    int32_t *ys;
    int64_t *ids;
    int64_t seq;               /* text: the longest sequence a micro-batch can hold; 0 for features */
    int32_t *toks, *tgts;
    uint8_t *masks;
    struct worker *workers;    /* nworkers, or one for the consumer when there are none */

    pthread_mutex_t mu;
    pthread_cond_t space, ready, idle;
    int64_t next;              /* the step the consumer takes next */
    int64_t released;          /* steps below this are let go: their slots may be refilled */
    int64_t base;              /* where the stream last (re)started */
    uint64_t generation;       /* bumped by seek: work of an older generation is thrown away */
    int writers;               /* workers filling a slot right now */
    bool seeking, stop;
    double wait_seconds;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int64_t tr_text_length(const struct tr_split *s, int64_t i)
{
    return s->offsets ? s->offsets[i + 1] - s->offsets[i] : s->window;
}

int64_t tr_text_longest(const struct tr_split *s)
{
    if (!s->offsets)
        return s->window;
    int64_t longest = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (s->offsets[i + 1] - s->offsets[i] > longest)
            longest = s->offsets[i + 1] - s->offsets[i];
    return longest;
}

static int compare_lengths(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t tr_text_percentile(const struct tr_split *s, double q)
{
    if (!s->offsets || s->n < 1)
        return s->window;
    int64_t *len = tr_xmalloc((size_t)s->n * sizeof *len);
    for (int64_t i = 0; i < s->n; i++)
        len[i] = s->offsets[i + 1] - s->offsets[i];
    qsort(len, (size_t)s->n, sizeof *len, compare_lengths);
    int64_t rank = (int64_t)ceil(q * (double)s->n);   /* nearest rank, from 1 */
    int64_t p = len[rank < 1 ? 0 : rank > s->n ? s->n - 1 : rank - 1];
    free(len);
    return p;
}

static int64_t round_up(int64_t x, int64_t multiple)
{
    return multiple > 1 ? (x + multiple - 1) / multiple * multiple : x;
}

int64_t tr_text_padded(const struct tr_split *s, int64_t multiple)
{
    return s->offsets ? round_up(tr_text_longest(s), multiple) : tr_text_longest(s);
}

int64_t tr_text_batch(const struct tr_split *s, const int64_t *ids, int64_t n, int64_t multiple, int32_t *tokens,
                      int32_t *targets, uint8_t *mask, int32_t *labels)
{
    if (!s->offsets) {   /* language modelling: a window and the same shifted by one */
        int64_t S = s->window;
        for (int64_t i = 0; i < n; i++) {
            const int32_t *at = s->tokens + ids[i] * S;
            memcpy(tokens + i * S, at, (size_t)S * sizeof(int32_t));
            memcpy(targets + i * S, at + 1, (size_t)S * sizeof(int32_t));
            memset(mask + i * S, 1, (size_t)S);
        }
        return S;
    }
    int64_t S = 1;   /* classification: padded to the batch's longest, the padding masked */
    for (int64_t i = 0; i < n; i++)
        if (s->offsets[ids[i] + 1] - s->offsets[ids[i]] > S)
            S = s->offsets[ids[i] + 1] - s->offsets[ids[i]];
    S = round_up(S, multiple);
    for (int64_t i = 0; i < n; i++) {
        int64_t len = s->offsets[ids[i] + 1] - s->offsets[ids[i]];
        memcpy(tokens + i * S, s->tokens + s->offsets[ids[i]], (size_t)len * sizeof(int32_t));
        memset(tokens + i * S + len, 0, (size_t)(S - len) * sizeof(int32_t));
        memset(mask + i * S, 1, (size_t)len);
        memset(mask + i * S + len, 0, (size_t)(S - len));
        labels[i] = s->y[ids[i]];
    }
    return S;
}

/* ---- an epoch's layout ----------------------------------------------------------------------- */

static int compare_keys(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The first bucket that holds a sequence of len tokens (the last holds every one). */
static int bucket_of(const struct tr_loader *l, int64_t len)
{
    int b = 0;
    while (b < l->nbuckets - 1 && l->buckets[b].len < len)
        b++;
    return b;
}

/* Dynamic batching over w->order (already shuffled): each pool sorted by (length, id), each
 * bucket's run cut into micro-batches of its rows, the micro-batches' order shuffled by a seed
 * of their own, the order rewritten micro-batch after micro-batch with their starts marked. */
static void cut_by_length(const struct tr_loader *l, struct worker *w, int64_t epoch)
{
    int64_t n = l->s->n, pool = l->pool * l->batch, nchunks = 0;
    for (int64_t p = 0; p < n; p += pool) {
        int64_t m = n - p < pool ? n - p : pool;
        for (int64_t i = p; i < p + m; i++)
            w->keys[i] = (uint64_t)tr_text_length(l->s, w->order[i]) << ID_BITS | (uint64_t)w->order[i];
        qsort(w->keys + p, (size_t)m, sizeof *w->keys, compare_keys);
        for (int64_t i = p; i < p + m;) {
            int b = bucket_of(l, (int64_t)(w->keys[i] >> ID_BITS));
            int64_t start = i;
            while (i < p + m && i - start < l->buckets[b].rows && bucket_of(l, (int64_t)(w->keys[i] >> ID_BITS)) == b)
                i++;
            w->chunks[nchunks++] = start;
        }
    }
    w->chunks[nchunks] = n;
    for (int64_t c = 0; c < nchunks; c++)
        w->perm[c] = c;
    if (l->shuffle)   /* ~seed: a stream apart from the one that shuffled the samples */
        tr_shuffle(w->perm, nchunks, tr_epoch_seed(~l->seed, epoch));
    int64_t at = 0;
    for (int64_t c = 0; c < nchunks; c++)
        for (int64_t j = w->chunks[w->perm[c]]; j < w->chunks[w->perm[c] + 1]; j++, at++) {
            w->order[at] = (int64_t)(w->keys[j] & (((uint64_t)1 << ID_BITS) - 1));
            w->starts[at] = j == w->chunks[w->perm[c]];
        }
}

/* Epoch e's layout in w: identity, or the permutation drawn from (seed, e); then, with
 * buckets, cut by length. */
static void epoch_layout(const struct tr_loader *l, struct worker *w, int64_t epoch)
{
    int64_t want = l->shuffle ? epoch : 0;
    if (w->layout_epoch == want)
        return;
    for (int64_t i = 0; i < l->s->n; i++)
        w->order[i] = i;
    if (l->shuffle)
        tr_shuffle(w->order, l->s->n, tr_epoch_seed(l->seed, epoch));
    if (l->nbuckets)
        cut_by_length(l, w, epoch);
    w->layout_epoch = want;
}

/* The micro-batch of the samples order[0..n) into slot at row r and token slot t. */
static void fill_micro(const struct tr_loader *l, struct slot *slot, const int64_t *order, int64_t n, int64_t r,
                       int64_t t)
{
    struct tr_batch *b = &slot->micro[slot->nmicro++];
    *b = (struct tr_batch){.ids = slot->ids + r, .y = slot->y + r, .n = n, .S = 1};
    memcpy(b->ids, order, (size_t)n * sizeof(int64_t));
    if (l->seq) {
        b->tokens = slot->tokens + t, b->targets = slot->targets + t, b->mask = slot->mask + t;
        b->S = tr_text_batch(l->s, b->ids, n, l->multiple, b->tokens, b->targets, b->mask, b->y);
        return;
    }
    b->x = slot->x + r * l->features;
    tr_split_rows(l->s, b->ids, n, b->x);
    for (int64_t i = 0; i < n; i++)
        b->y[i] = l->s->y[b->ids[i]];
}

/* Copies step k's samples into slot, cut into its micro-batches; touches nothing shared but the
 * slot it owns. */
static void produce(const struct tr_loader *l, struct worker *w, int64_t k, struct slot *slot)
{
    int64_t epoch = k / l->per_epoch, first = (k % l->per_epoch) * l->batch;
    int64_t n = l->s->n - first < l->batch ? l->s->n - first : l->batch;
    epoch_layout(l, w, epoch);
    const int64_t *order = w->order + first;
    slot->n = n, slot->nmicro = 0, slot->ntokens = 0, slot->nslots = 0;
    for (int64_t r = 0, t = 0; r < n;) {
        int64_t end = r + 1;
        if (l->nbuckets)
            while (end < n && !w->starts[first + end])
                end++;
        else
            end = r + l->micro < n ? r + l->micro : n;
        fill_micro(l, slot, order + r, end - r, r, t);
        const struct tr_batch *b = &slot->micro[slot->nmicro - 1];
        if (l->seq) {
            for (int64_t i = 0; i < b->n; i++)
                slot->ntokens += tr_text_length(l->s, b->ids[i]);
            slot->nslots += b->n * b->S;
            t += b->n * b->S;
        }
        r = end;
    }
}

/* Worker w's first step at or after the stream's start. */
static int64_t first_step(const struct tr_loader *l, int w)
{
    int64_t ahead = ((int64_t)w - l->base % l->nworkers + l->nworkers) % l->nworkers;
    return l->base + ahead;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    struct tr_loader *l = w->l;
    pthread_mutex_lock(&l->mu);
    uint64_t generation = l->generation - 1;
    int64_t k = 0;
    while (!l->stop) {
        if (generation != l->generation) {
            generation = l->generation;
            k = first_step(l, w->index);
        }
        if (l->seeking || k >= l->released + l->ring) {
            pthread_cond_wait(&l->space, &l->mu);
            continue;
        }
        struct slot *slot = &l->slots[k % l->ring];
        slot->step = k;
        slot->ready = false;
        l->writers++;
        pthread_mutex_unlock(&l->mu);
        produce(l, w, k, slot);
        pthread_mutex_lock(&l->mu);
        l->writers--;
        if (generation == l->generation) {
            slot->ready = true;
            pthread_cond_signal(&l->ready);
            k += l->nworkers;
        }
        if (!l->writers)
            pthread_cond_broadcast(&l->idle);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- opening and closing ------------------------------------------------------------------- */

static const char *bad_options(const struct tr_split *s, const struct tr_loader_options *o)
{
    if (o->batch < 1)
        return "the batch size must be at least 1";
    if (o->micro < 0 || o->micro > o->batch)
        return "a micro-batch must hold from 1 to batch samples";
    if (s->n < 1)
        return "the split holds no samples";
    if (o->drop_last && s->n < o->batch)
        return "the split holds fewer samples than one batch, and drop_last drops that one";
    if (o->num_workers < 0 || o->num_workers > MAX_WORKERS)
        return "num_workers must be from 0 to 1024";
    if (o->prefetch < 1)
        return "prefetch must be at least 1";
    if (!o->nbuckets)
        return NULL;
    if (!s->tokens)
        return "length buckets need text";
    if (o->pool < 1)
        return "the pool must hold at least one batch";
    if (s->n >= (int64_t)1 << ID_BITS)
        return "too many samples to sort by length";
    for (int b = 0; b < o->nbuckets; b++)
        if (o->buckets[b].rows < 1 || (b && o->buckets[b].len <= o->buckets[b - 1].len))
            return "buckets must grow in length and hold at least one row";
    if (o->buckets[o->nbuckets - 1].len < tr_text_longest(s))
        return "the last bucket is shorter than the longest sequence";
    return NULL;
}

static int check_arguments(const struct tr_split *s, const struct tr_loader_options *o, struct tr_diag *diag)
{
    const char *why = bad_options(s, o);
    if (why)
        tr_diag_add(diag, (struct tr_where){0}, "loader: %s (batch %lld, %lld samples)", why,
                    (long long)o->batch, (long long)s->n);
    return why ? TR_EINVAL : 0;
}

/* A ring array from the loader's memory (page-locked for a GPU: backend.h's host_memory),
 * zeroed and 64-byte aligned; never 0 bytes. */
static void *ring_alloc(struct tr_loader *l, size_t bytes)
{
    return l->mem.alloc(bytes ? bytes : 64, l->mem.ctx);
}

static void ring_free(struct tr_loader *l, void *p)
{
    if (p)
        l->mem.free(p, l->mem.ctx);
}

/* The ring: every slot's arrays in a few allocations, made once. A step's micro-batches are
 * padded to at most the longest sequence, so its tokens fit in batch × seq. */
static int allocate_ring(struct tr_loader *l, struct tr_diag *diag)
{
    /* A slot's rows start on a 64-byte line so that slots never share one between threads. */
    size_t stride = l->seq ? 0 : ((size_t)l->batch * (size_t)l->features + 15) & ~(size_t)15;
    size_t tstride = ((size_t)l->batch * (size_t)l->seq + 63) & ~(size_t)63;   /* text tokens */
    if (l->seq) {
        l->toks = ring_alloc(l, (size_t)l->ring * tstride * sizeof(int32_t));
        l->tgts = ring_alloc(l, (size_t)l->ring * tstride * sizeof(int32_t));
        l->masks = ring_alloc(l, (size_t)l->ring * tstride);
        if (!l->toks || !l->tgts || !l->masks) {
            tr_diag_add(diag, (struct tr_where){0}, "loader: out of memory for %d batches of %lld × %lld tokens",
                        l->ring, (long long)l->batch, (long long)l->seq);
            return TR_ENOMEM;
        }
    }
    unsigned __int128 bytes = (unsigned __int128)l->ring * stride * sizeof(float);
    l->slots = calloc((size_t)l->ring, sizeof *l->slots);
    l->batches = calloc((size_t)l->ring * (size_t)l->batch, sizeof *l->batches);
    l->xs = bytes < ((size_t)1 << 40) ? ring_alloc(l, (size_t)bytes) : NULL;
    l->ys = ring_alloc(l, (size_t)l->ring * ((size_t)l->batch + 16) * sizeof(int32_t));
    l->ids = ring_alloc(l, (size_t)l->ring * ((size_t)l->batch + 8) * sizeof(int64_t));
    if (!l->slots || !l->batches || !l->xs || !l->ys || !l->ids) {
        tr_diag_add(diag, (struct tr_where){0}, "loader: out of memory for %d batches of %lld samples",
                    l->ring, (long long)l->batch);
        return TR_ENOMEM;
    }
    for (int i = 0; i < l->ring; i++)
        l->slots[i] = (struct slot){.step = -1, .x = l->xs + (size_t)i * stride,
                                    .micro = l->batches + (size_t)i * (size_t)l->batch,
                                    .y = l->ys + (size_t)i * ((size_t)l->batch + 16),
                                    .ids = l->ids + (size_t)i * ((size_t)l->batch + 8),
                                    .tokens = l->seq ? l->toks + (size_t)i * tstride : NULL,
                                    .targets = l->seq ? l->tgts + (size_t)i * tstride : NULL,
                                    .mask = l->seq ? l->masks + (size_t)i * tstride : NULL};
    return 0;
}

static bool allocate_layout(const struct tr_loader *l, struct worker *w)
{
    size_t n = (size_t)l->s->n;
    w->order = malloc(n * sizeof *w->order);
    if (!l->nbuckets)
        return w->order;
    w->starts = malloc(n);
    w->keys = malloc(n * sizeof *w->keys);
    w->chunks = malloc((n + 1) * sizeof *w->chunks);
    w->perm = malloc(n * sizeof *w->perm);
    return w->order && w->starts && w->keys && w->chunks && w->perm;
}

static int held(const struct tr_loader_options *o)
{
    return o->hold > 1 ? 2 : 1;
}

/* What tr_loader_open takes from the heap, as allocate_ring and allocate_layout take it: the
 * ring's slots and each worker's sample order (the planner counts it in the footprint). */
size_t tr_loader_memory_bytes(const struct tr_split *s, const struct tr_loader_options *o)
{
    size_t ring = (size_t)o->num_workers * (size_t)o->prefetch + (size_t)held(o), batch = (size_t)o->batch;
    size_t n = (size_t)s->n, workers = o->num_workers ? (size_t)o->num_workers : 1;
    size_t seq = s->tokens ? (size_t)tr_text_padded(s, o->seq_multiple) : 0;
    size_t stride = seq ? 0 : (batch * (size_t)tr_split_features(s) + 15) & ~(size_t)15;
    size_t tstride = (batch * seq + 63) & ~(size_t)63;
    size_t bytes = ring * (tstride * (2 * sizeof(int32_t) + 1) + stride * sizeof(float) + sizeof(struct slot) +
                           batch * sizeof(struct tr_batch) + (batch + 16) * sizeof(int32_t) +
                           (batch + 8) * sizeof(int64_t));
    struct worker w;
    size_t layout = n * sizeof *w.order;
    if (o->nbuckets)
        layout += n + n * sizeof *w.keys + (n + 1) * sizeof *w.chunks + n * sizeof *w.perm;
    return bytes + workers * (sizeof w + layout);
}

static void free_layout(struct worker *w)
{
    free(w->order), free(w->starts), free(w->keys), free(w->chunks), free(w->perm);
}

static int start_workers(struct tr_loader *l, struct tr_diag *diag)
{
    int count = l->nworkers ? l->nworkers : 1;
    bool ok = (l->workers = calloc((size_t)count, sizeof *l->workers)) != NULL;
    for (int i = 0; ok && i < count; i++) {
        l->workers[i] = (struct worker){.l = l, .index = i, .layout_epoch = -1};
        ok = allocate_layout(l, &l->workers[i]);
    }
    if (!ok) {
        tr_diag_add(diag, (struct tr_where){0}, "loader: out of memory for %d sample orders", count);
        return TR_ENOMEM;
    }
    for (int i = 0; i < l->nworkers; i++) {
        int err = pthread_create(&l->workers[i].thread, NULL, work, &l->workers[i]);
        if (err) {
            tr_diag_add(diag, (struct tr_where){0}, "loader: cannot start worker thread %d: %s", i,
                        strerror(err));
            return TR_ENOMEM;
        }
        l->workers[i].started = true;
    }
    return 0;
}

int tr_loader_open(struct tr_loader **out, const struct tr_split *s, const struct tr_loader_options *o,
                   struct tr_diag *diag)
{
    *out = NULL;
    int rc = check_arguments(s, o, diag);
    if (rc)
        return rc;
    struct tr_loader *l = calloc(1, sizeof *l);
    struct tr_length_bucket *buckets = o->nbuckets ? malloc((size_t)o->nbuckets * sizeof *buckets) : NULL;
    if (!l || (o->nbuckets && !buckets)) {
        free(l), free(buckets);
        tr_diag_add(diag, (struct tr_where){0}, "loader: out of memory");
        return TR_ENOMEM;
    }
    if (buckets)
        memcpy(buckets, o->buckets, (size_t)o->nbuckets * sizeof *buckets);
    *l = (struct tr_loader){.s = s, .batch = o->batch, .micro = o->micro ? o->micro : o->batch,
                            .features = s->tokens ? 0 : tr_split_features(s),
                            .buckets = buckets, .nbuckets = o->nbuckets, .pool = o->pool,
                            .seq = s->tokens ? tr_text_padded(s, o->seq_multiple) : 0, .seed = o->seed,
                            .multiple = o->seq_multiple,
                            .shuffle = o->shuffle != 0, .drop_last = o->drop_last != 0,
                            .nworkers = o->num_workers, .hold = held(o), .ring = o->num_workers * o->prefetch + held(o),
                            .mem = o->memory ? *o->memory : tr_cpu_memory};
    l->per_epoch = l->drop_last ? s->n / l->batch : (s->n + l->batch - 1) / l->batch;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->space, NULL);
    pthread_cond_init(&l->ready, NULL);
    pthread_cond_init(&l->idle, NULL);
    rc = allocate_ring(l, diag);
    if (!rc)
        rc = start_workers(l, diag);
    if (rc) {
        tr_loader_close(l);
        return rc;
    }
    *out = l;
    return 0;
}

void tr_loader_close(struct tr_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
    int count = l->nworkers ? l->nworkers : 1;
    for (int i = 0; l->workers && i < count; i++) {
        if (l->workers[i].started)
            pthread_join(l->workers[i].thread, NULL);
        free_layout(&l->workers[i]);
    }
    pthread_cond_destroy(&l->idle);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->space);
    pthread_mutex_destroy(&l->mu);
    free(l->workers);
    free(l->slots);
    free(l->batches);
    free(l->buckets);
    ring_free(l, l->xs);
    ring_free(l, l->ys);
    ring_free(l, l->ids);
    ring_free(l, l->toks);
    ring_free(l, l->tgts);
    ring_free(l, l->masks);
    free(l);
}

/* ---- the consumer -------------------------------------------------------------------------- */

int tr_loader_next(struct tr_loader *l, struct tr_step *step)
{
    pthread_mutex_lock(&l->mu);
    int64_t k = l->next;
    if (k - l->hold + 1 > l->released) {   /* the step taken hold steps ago goes */
        l->released = k - l->hold + 1;
        pthread_cond_broadcast(&l->space);
    }
    struct slot *slot = &l->slots[k % l->ring];
    if (!l->nworkers) {
        double t0 = now();
        produce(l, &l->workers[0], k, slot);
        slot->step = k;
        l->wait_seconds += now() - t0;
    } else if (!(slot->ready && slot->step == k)) {
        double t0 = now();
        while (!(slot->ready && slot->step == k))
            pthread_cond_wait(&l->ready, &l->mu);
        l->wait_seconds += now() - t0;
    }
    *step = (struct tr_step){.epoch = k / l->per_epoch, .index = k % l->per_epoch, .n = slot->n,
                             .nmicro = slot->nmicro, .micro = slot->micro, .tokens = slot->ntokens,
                             .slots = slot->nslots};
    l->next = k + 1;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

void tr_loader_seek(struct tr_loader *l, int64_t epoch, int64_t index)
{
    int64_t k = (epoch > 0 ? epoch : 0) * l->per_epoch + (index > 0 ? index : 0);
    pthread_mutex_lock(&l->mu);
    l->base = l->next = l->released = k;
    l->generation++;
    for (int i = 0; i < l->ring; i++)
        l->slots[i].ready = false;
    /* A worker still copying an old step owns its slot until it is done; new work waits. */
    l->seeking = true;
    while (l->writers)
        pthread_cond_wait(&l->idle, &l->mu);
    l->seeking = false;
    pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
}

int64_t tr_loader_steps_per_epoch(const struct tr_loader *l)
{
    return l->per_epoch;
}

double tr_loader_wait_seconds(const struct tr_loader *l)
{
    return l->wait_seconds;
}
