/* The data stage's one source of randomness: splitmix64 (Steele, Lea & Flood, OOPSLA 2014)
 * driving a Fisher–Yates shuffle, with Lemire's unbiased bounded draw. The split of a data set
 * into train/valid/test and the loader's order of each epoch are both pure functions of a
 * seed, the same on every machine, thread count and run. */
#ifndef TR_SHUFFLE_H
#define TR_SHUFFLE_H

#include <stdint.h>

/* The next output of the splitmix64 stream whose state is *state. */
uint64_t tr_splitmix64(uint64_t *state);
/* The seed of epoch e's order under seed: output e of the splitmix64 stream started at seed,
 * computed directly (the stream's state after e steps is seed + e·0x9E3779B97F4A7C15). */
uint64_t tr_epoch_seed(uint64_t seed, int64_t epoch);
/* Permutes v[0..n) in place: Fisher–Yates from the top, j uniform in [0, i], drawn from the
 * splitmix64 stream started at seed. */
void tr_shuffle(int64_t *v, int64_t n, uint64_t seed);

#endif
