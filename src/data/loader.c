/* The loader (loader.h): worker threads fill a ring of batch slots, the trainer takes them in
 * order. Batches are numbered k = epoch · per_epoch + index from 0; worker w makes the batches
 * k ≡ w (mod workers) into slot k mod ring, so a slot is free again once the consumer has let
 * go of batch k − ring, and no two threads ever write one slot at once. Everything the threads
 * share is guarded by one mutex; the copying itself runs outside it. */
#include "data/loader.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/shuffle.h"

#define MAX_WORKERS 1024

struct slot {
    int64_t batch;   /* the batch it holds or is being filled with */
    bool ready;
    int64_t n;       /* rows */
    float *x;
    int32_t *y;
    int64_t *ids;
    int32_t *tokens, *targets;   /* text: [n, S] each */
    uint8_t *mask;
    int64_t S;
};

struct worker {
    struct tr_loader *l;
    int index;
    pthread_t thread;
    bool started;
    int64_t *order;        /* the permutation of order_epoch: each worker keeps its own, so */
    int64_t order_epoch;   /*   no lock is held while shuffling (O(n), once an epoch a worker) */
};

struct tr_loader {
    const struct tr_split *s;
    int64_t batch, features, per_epoch;
    uint64_t seed;
    bool shuffle, drop_last;
    int nworkers, ring, hold;
    struct slot *slots;
    float *xs;
    int32_t *ys;
    int64_t *ids;
    int64_t seq;               /* text: the longest sequence a batch can hold; 0 for features */
    int32_t *toks, *tgts;
    uint8_t *masks;
    struct worker *workers;    /* nworkers, or one for the consumer when there are none */

    pthread_mutex_t mu;
    pthread_cond_t space, ready, idle;
    int64_t next;              /* the batch the consumer takes next */
    int64_t released;          /* batches below this are let go: their slots may be refilled */
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

/* The split's sample order in epoch e: identity, or the permutation drawn from (seed, e). */
static const int64_t *epoch_order(const struct tr_loader *l, struct worker *w, int64_t epoch)
{
    int64_t want = l->shuffle ? epoch : 0;
    if (w->order_epoch != want) {
        for (int64_t i = 0; i < l->s->n; i++)
            w->order[i] = i;
        if (l->shuffle)
            tr_shuffle(w->order, l->s->n, tr_epoch_seed(l->seed, epoch));
        w->order_epoch = want;
    }
    return w->order;
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

int64_t tr_text_batch(const struct tr_split *s, const int64_t *ids, int64_t n, int32_t *tokens,
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

/* Copies batch k's samples into slot; touches nothing shared but the slot it owns. */
static void produce(const struct tr_loader *l, struct worker *w, int64_t k, struct slot *slot)
{
    int64_t epoch = k / l->per_epoch, start = (k % l->per_epoch) * l->batch;
    int64_t n = l->s->n - start < l->batch ? l->s->n - start : l->batch;
    const int64_t *order = epoch_order(l, w, epoch);
    for (int64_t i = 0; i < n; i++)
        slot->ids[i] = order[start + i];
    slot->n = n;
    if (l->seq) {
        slot->S = tr_text_batch(l->s, slot->ids, n, slot->tokens, slot->targets, slot->mask, slot->y);
        return;
    }
    size_t row = (size_t)l->features * sizeof(float);
    slot->S = 1;
    for (int64_t i = 0; i < n; i++) {
        memcpy(slot->x + i * l->features, l->s->x + slot->ids[i] * l->features, row);
        slot->y[i] = l->s->y[slot->ids[i]];
    }
}

/* Worker w's first batch at or after the stream's start. */
static int64_t first_batch(const struct tr_loader *l, int w)
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
            k = first_batch(l, w->index);
        }
        if (l->seeking || k >= l->released + l->ring) {
            pthread_cond_wait(&l->space, &l->mu);
            continue;
        }
        struct slot *slot = &l->slots[k % l->ring];
        slot->batch = k;
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

static int check_arguments(const struct tr_split *s, int64_t batch, int drop_last, int num_workers,
                           int prefetch, int hold, struct tr_diag *diag)
{
    const char *why = NULL;
    if (batch < 1)
        why = "the batch size must be at least 1";
    else if (s->n < 1)
        why = "the split holds no samples";
    else if (drop_last && s->n < batch)
        why = "the split holds fewer samples than one batch, and drop_last drops that one";
    else if (num_workers < 0 || num_workers > MAX_WORKERS)
        why = "num_workers must be from 0 to 1024";
    else if (prefetch < 1 || hold < 1)
        why = "prefetch and hold must be at least 1";
    if (why)
        tr_diag_add(diag, (struct tr_where){0}, "loader: %s (batch %lld, %lld samples)", why,
                    (long long)batch, (long long)s->n);
    return why ? TR_EINVAL : 0;
}

/* The ring: every slot's arrays in a few allocations, made once. */
static int allocate_ring(struct tr_loader *l, struct tr_diag *diag)
{
    /* A slot's rows start on a 64-byte line so that slots never share one between threads. */
    size_t stride = l->seq ? 0 : ((size_t)l->batch * (size_t)l->features + 15) & ~(size_t)15;
    size_t tstride = ((size_t)l->batch * (size_t)l->seq + 63) & ~(size_t)63;   /* text tokens */
    if (l->seq) {
        l->toks = aligned_alloc(64, (size_t)l->ring * tstride * sizeof(int32_t));
        l->tgts = aligned_alloc(64, (size_t)l->ring * tstride * sizeof(int32_t));
        l->masks = aligned_alloc(64, (size_t)l->ring * tstride);
        if (!l->toks || !l->tgts || !l->masks) {
            tr_diag_add(diag, (struct tr_where){0}, "loader: out of memory for %d batches of %lld × %lld tokens",
                        l->ring, (long long)l->batch, (long long)l->seq);
            return TR_ENOMEM;
        }
    }
    unsigned __int128 bytes = (unsigned __int128)l->ring * stride * sizeof(float);
    l->slots = calloc((size_t)l->ring, sizeof *l->slots);
    l->xs = bytes < ((size_t)1 << 40) ? aligned_alloc(64, (size_t)bytes ? (size_t)bytes : 64) : NULL;
    l->ys = calloc((size_t)l->ring * ((size_t)l->batch + 16), sizeof(int32_t));
    l->ids = calloc((size_t)l->ring * ((size_t)l->batch + 8), sizeof(int64_t));
    if (!l->slots || !l->xs || !l->ys || !l->ids) {
        tr_diag_add(diag, (struct tr_where){0}, "loader: out of memory for %d batches of %lld samples",
                    l->ring, (long long)l->batch);
        return TR_ENOMEM;
    }
    for (int i = 0; i < l->ring; i++)
        l->slots[i] = (struct slot){.batch = -1, .x = l->xs + (size_t)i * stride,
                                    .y = l->ys + (size_t)i * ((size_t)l->batch + 16),
                                    .ids = l->ids + (size_t)i * ((size_t)l->batch + 8),
                                    .tokens = l->seq ? l->toks + (size_t)i * tstride : NULL,
                                    .targets = l->seq ? l->tgts + (size_t)i * tstride : NULL,
                                    .mask = l->seq ? l->masks + (size_t)i * tstride : NULL};
    return 0;
}

static int start_workers(struct tr_loader *l, struct tr_diag *diag)
{
    int count = l->nworkers ? l->nworkers : 1;
    l->workers = calloc((size_t)count, sizeof *l->workers);
    for (int i = 0; l->workers && i < count; i++) {
        l->workers[i] = (struct worker){.l = l, .index = i, .order_epoch = -1,
                                        .order = malloc((size_t)l->s->n * sizeof(int64_t))};
        if (!l->workers[i].order)
            break;
    }
    if (!l->workers || !l->workers[count - 1].order) {
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

int tr_loader_open(struct tr_loader **out, const struct tr_split *s, int64_t batch, uint64_t seed, int shuffle,
                   int drop_last, int num_workers, int prefetch, int hold, struct tr_diag *diag)
{
    *out = NULL;
    int rc = check_arguments(s, batch, drop_last, num_workers, prefetch, hold, diag);
    if (rc)
        return rc;
    struct tr_loader *l = calloc(1, sizeof *l);
    if (!l) {
        tr_diag_add(diag, (struct tr_where){0}, "loader: out of memory");
        return TR_ENOMEM;
    }
    *l = (struct tr_loader){.s = s, .batch = batch, .features = s->tokens ? 0 : tr_split_features(s),
                            .seq = s->tokens ? tr_text_longest(s) : 0, .seed = seed,
                            .shuffle = shuffle != 0, .drop_last = drop_last != 0, .nworkers = num_workers,
                            .hold = hold, .ring = num_workers * prefetch + hold};
    l->per_epoch = drop_last ? s->n / batch : (s->n + batch - 1) / batch;
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
        free(l->workers[i].order);
    }
    pthread_cond_destroy(&l->idle);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->space);
    pthread_mutex_destroy(&l->mu);
    free(l->workers);
    free(l->slots);
    free(l->xs);
    free(l->ys);
    free(l->ids);
    free(l->toks);
    free(l->tgts);
    free(l->masks);
    free(l);
}

/* ---- the consumer -------------------------------------------------------------------------- */

int tr_loader_next(struct tr_loader *l, struct tr_batch *b)
{
    pthread_mutex_lock(&l->mu);
    int64_t k = l->next;
    if (k - l->hold + 1 > l->released) {   /* batch k − hold goes: the consumer keeps hold */
        l->released = k - l->hold + 1;
        pthread_cond_broadcast(&l->space);
    }
    struct slot *slot = &l->slots[k % l->ring];
    if (!l->nworkers) {
        double t0 = now();
        produce(l, &l->workers[0], k, slot);
        slot->batch = k;
        l->wait_seconds += now() - t0;
    } else if (!(slot->ready && slot->batch == k)) {
        double t0 = now();
        while (!(slot->ready && slot->batch == k))
            pthread_cond_wait(&l->ready, &l->mu);
        l->wait_seconds += now() - t0;
    }
    *b = (struct tr_batch){.x = slot->x, .y = slot->y, .ids = slot->ids, .n = slot->n,
                           .epoch = k / l->per_epoch, .index = k % l->per_epoch, .tokens = slot->tokens,
                           .targets = slot->targets, .mask = slot->mask, .S = slot->S};
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
    /* A worker still copying an old batch owns its slot until it is done; new work waits. */
    l->seeking = true;
    while (l->writers)
        pthread_cond_wait(&l->idle, &l->mu);
    l->seeking = false;
    pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
}

int64_t tr_loader_batches_per_epoch(const struct tr_loader *l)
{
    return l->per_epoch;
}

double tr_loader_wait_seconds(const struct tr_loader *l)
{
    return l->wait_seconds;
}
