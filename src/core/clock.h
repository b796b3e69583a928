/* The monotonic clock the trainer and the ranks time themselves by. */
#ifndef TR_CORE_CLOCK_H
#define TR_CORE_CLOCK_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double tr_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
