/* splitmix64 and the Fisher–Yates shuffle (shuffle.h). */
#include "data/shuffle.h"

#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t tr_splitmix64(uint64_t *state)
{
    *state += GOLDEN;
    return mix(*state);
}

uint64_t tr_epoch_seed(uint64_t seed, int64_t epoch)
{
    return mix(seed + ((uint64_t)epoch + 1) * GOLDEN);
}

/* A uniform integer in [0, bound): Lemire, "Fast random integer generation in an interval"
 * (ACM TOMACS 2019) — a multiply, and a rejection only in the rare biased low range. */
static uint64_t below(uint64_t *state, uint64_t bound)
{
    unsigned __int128 m = (unsigned __int128)tr_splitmix64(state) * bound;
    uint64_t low = (uint64_t)m;
    if (low < bound) {
        uint64_t floor = -bound % bound;
        while (low < floor) {
            m = (unsigned __int128)tr_splitmix64(state) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

void tr_shuffle(int64_t *v, int64_t n, uint64_t seed)
{
    uint64_t state = seed;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)below(&state, (uint64_t)i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}
