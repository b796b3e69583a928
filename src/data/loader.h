/* The loader: an endless stream of training batches over a split, epoch after epoch, for a
 * step-based trainer (DESIGN.md §5). Epoch e's order is a permutation of the split drawn from
 * (seed, e) alone (shuffle.h), so the stream is the same for any number of worker threads and
 * any prefetch depth, and tr_loader_seek can restart it anywhere on resume. */
#ifndef TR_LOADER_H
#define TR_LOADER_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"

struct tr_loader;

/* One batch. Its arrays live in the loader's ring (allocated once, at open) and stay valid
 * until `hold` more batches have been taken (see tr_loader_open), or until seek or close. */
struct tr_batch {
    float *x;          /* n × features, contiguous, in the split's sample shape */
    int32_t *y;        /* n labels */
    int64_t *ids;      /* n sample indices in the split: stable names for dropout's RNG */
    int64_t n;         /* rows: the batch size, except an epoch's last batch when !drop_last */
    int64_t epoch;     /* from 0 */
    int64_t index;     /* the batch's place in its epoch, from 0 */
    /* Text splits (x is NULL): [n, S] token ids, next-token targets (language modelling) and a
     * mask (1 a token, 0 padding); y holds classification labels. */
    int32_t *tokens, *targets;
    uint8_t *mask;
    int64_t S;
};

/* Opens a stream of batches of `batch` samples of s (which must outlive the loader).
 *   shuffle      0: every epoch in split order; else epoch e is permuted by (seed, e)
 *   drop_last    drop an epoch's last batch when it is short
 *   num_workers  threads producing batches; 0: tr_loader_next produces in the caller's thread
 *   prefetch     batches each worker prepares ahead (ignored with 0 workers)
 *   hold         batches the consumer keeps using at once (gradient accumulation takes
 *                `accumulation` batches before running any): batch k stays valid until batch
 *                k + hold is taken. 1 means "until the next call".
 * Worker w produces batches k ≡ w (mod num_workers) into ring slot k mod ring, and the
 * consumer takes them strictly in order. Returns 0, or TR_EINVAL / TR_ENOMEM with diag. */
int tr_loader_open(struct tr_loader **l, const struct tr_split *s, int64_t batch, uint64_t seed, int shuffle,
                   int drop_last, int num_workers, int prefetch, int hold, struct tr_diag *diag);
/* The next batch of the stream; always 0 (the stream does not end). */
int tr_loader_next(struct tr_loader *l, struct tr_batch *b);
/* Restarts the stream at batch `index` of epoch `epoch` (resume; negative values count as 0,
 * an index past the epoch's end counts on into the next); every batch taken before is
 * invalid. */
void tr_loader_seek(struct tr_loader *l, int64_t epoch, int64_t index);
int64_t tr_loader_batches_per_epoch(const struct tr_loader *l);
/* Seconds tr_loader_next spent waiting for data (producing it, with 0 workers). */
double tr_loader_wait_seconds(const struct tr_loader *l);
/* A text batch of the samples ids[0..n) of s into caller arrays of n × tr_text_longest(s):
 * classification pads to the batch's longest sample (id 0, mask 0) and copies the labels;
 * language modelling copies each window and its targets. Returns the batch's S. */
int64_t tr_text_batch(const struct tr_split *s, const int64_t *ids, int64_t n, int32_t *tokens,
                      int32_t *targets, uint8_t *mask, int32_t *labels);
/* The longest sequence in a text split (the window, for language modelling). */
int64_t tr_text_longest(const struct tr_split *s);
/* Stops and joins the workers, frees the ring. NULL is fine. */
void tr_loader_close(struct tr_loader *l);

#endif
