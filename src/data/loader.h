/* The loader: an endless stream of optimizer steps over a split, epoch after epoch, for a
 * step-based trainer (DESIGN.md §5). A step is the recipe's target batch of samples, already cut
 * into the micro-batches the trainer runs one after another, so the loss can be normalised by
 * the step's real count before the first backward. Epoch e's layout — the order of its samples
 * and where its micro-batches start — is a function of (seed, e) alone (shuffle.h), so the
 * stream is the same for any number of worker threads and any prefetch depth, and
 * tr_loader_seek can restart it at any step on resume.
 *
 * Fixed batching cuts each step into micro-batches of `micro` rows. Dynamic batching (length
 * buckets, DESIGN.md §3) shuffles, sorts by length within pools of `pool` steps' samples, puts
 * each sequence in the first bucket that holds its length, cuts each bucket's run of sequences
 * into micro-batches of at most the bucket's rows, shuffles the micro-batches' order and then
 * cuts the stream into steps of `batch` samples: a micro-batch that straddles two steps is split
 * between them. Each micro-batch is padded only to its own longest sequence. */
#ifndef TR_LOADER_H
#define TR_LOADER_H

#include <stdint.h>

#include "core/alloc.h"
#include "core/error.h"
#include "data/dataset.h"

struct tr_loader;

/* One micro-batch. Its arrays live in the loader's ring (allocated once, at open) and stay
 * valid until the next step is taken (options.hold 2: the one after), or until seek or close. */
struct tr_batch {
    float *x;          /* n × features, contiguous, in the split's sample shape */
    int32_t *y;        /* n labels */
    int64_t *ids;      /* n sample indices in the split: stable names for dropout's RNG */
    int64_t n;         /* rows */
    /* Text splits (x is NULL): [n, S] token ids, next-token targets (language modelling) and a
     * mask (1 a token, 0 padding); y holds classification labels. */
    int32_t *tokens, *targets;
    uint8_t *mask;
    int64_t S;
};

/* One optimizer step: n samples in nmicro micro-batches. */
struct tr_step {
    int64_t epoch;     /* from 0 */
    int64_t index;     /* the step's place in its epoch, from 0 */
    int64_t n;         /* samples: the batch, except an epoch's last step when !drop_last */
    int nmicro;
    const struct tr_batch *micro;
    int64_t tokens;    /* text: real tokens in the step (language modelling: n × the window) */
    int64_t slots;     /* text: token slots, padding included (Σ micro-batch n × S) */
};

/* Dynamic batching's length bucket: sequences of at most len tokens, in micro-batches of at
 * most rows. */
struct tr_length_bucket { int64_t len, rows; };

struct tr_loader_options {
    int64_t batch;       /* samples a step */
    int64_t micro;       /* fixed batching: rows a micro-batch (1 … batch; 0: batch) */
    const struct tr_length_bucket *buckets;   /* dynamic batching when nbuckets > 0 (text only): */
    int nbuckets;        /*   len increasing, the last at least the split's longest sequence */
    int64_t pool;        /* dynamic: sort by length within pools of pool × batch samples */
    uint64_t seed;
    int shuffle;         /* 0: split order (dynamic: sorted pools, micro-batches not shuffled);
                          * else epoch e is permuted by (seed, e) */
    int drop_last;       /* drop an epoch's last step when it is short */
    int num_workers;     /* threads producing steps; 0: tr_loader_next produces in the caller's */
    int prefetch;        /* steps each worker prepares ahead (ignored with 0 workers) */
    int hold;            /* steps the consumer holds at once: 0 or 1, the last taken; 2, the
                          * one before it too (a device copying the next step's inputs ahead
                          * while this one's are still read) */
    const struct tr_memory_ops *memory;   /* the ring's batches: NULL, the heap; a GPU run's
                          * backend gives page-locked memory, which its copies read directly */
    int64_t seq_multiple;   /* text classification: each micro-batch padded to a multiple of this
                             * many positions (sequence parallelism's tensor ranks; 0 or 1: none) */
};

/* The heap bytes tr_loader_open(s, o) will take: its ring of steps and its workers' sample
 * orders. */
size_t tr_loader_memory_bytes(const struct tr_split *s, const struct tr_loader_options *o);
/* Opens a stream of steps over s (which must outlive the loader). Worker w produces steps
 * k ≡ w (mod num_workers) into ring slot k mod ring, and the consumer takes them strictly in
 * order. Returns 0, or TR_EINVAL / TR_ENOMEM with diag. */
int tr_loader_open(struct tr_loader **l, const struct tr_split *s, const struct tr_loader_options *o,
                   struct tr_diag *diag);
/* The next step of the stream; always 0 (the stream does not end). The step taken before is
 * let go (options.hold 2: the one taken before that). */
int tr_loader_next(struct tr_loader *l, struct tr_step *step);
/* Restarts the stream at step `index` of epoch `epoch` (resume; negative values count as 0,
 * an index past the epoch's end counts on into the next); every step taken before is invalid. */
void tr_loader_seek(struct tr_loader *l, int64_t epoch, int64_t index);
int64_t tr_loader_steps_per_epoch(const struct tr_loader *l);
/* Seconds tr_loader_next spent waiting for data (producing it, with 0 workers). */
double tr_loader_wait_seconds(const struct tr_loader *l);
/* A text batch of the samples ids[0..n) of s into caller arrays of n × tr_text_padded(s,
 * multiple): classification pads to the batch's longest sample (id 0, mask 0), rounded up to a
 * multiple of `multiple` (0 or 1: none), and copies the labels; language modelling copies each
 * window and its targets. Returns the batch's S. */
int64_t tr_text_batch(const struct tr_split *s, const int64_t *ids, int64_t n, int64_t multiple, int32_t *tokens,
                      int32_t *targets, uint8_t *mask, int32_t *labels);
/* The longest a batch of s can be padded to: tr_text_longest, rounded up to a multiple (classification). */
int64_t tr_text_padded(const struct tr_split *s, int64_t multiple);
/* The longest sequence in a text split (the window, for language modelling). */
int64_t tr_text_longest(const struct tr_split *s);
/* The length at or below which a fraction q (0 … 1) of the split's sequences lie: the
 * nearest-rank percentile (q = 0.99: the 99th). */
int64_t tr_text_percentile(const struct tr_split *s, double q);
/* Sample i's length in tokens (the window, for language modelling). */
int64_t tr_text_length(const struct tr_split *s, int64_t i);
/* Stops and joins the workers, frees the ring. NULL is fine. */
void tr_loader_close(struct tr_loader *l);

#endif
