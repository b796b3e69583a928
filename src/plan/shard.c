/* ZeRO's shards (shard.h). */
#include "plan/shard.h"

#include <stdlib.h>

#include "core/alloc.h"

const char *tr_shard_name(int stage)
{
    return stage == 3 ? "parameters" : stage == 2 ? "gradients" : stage == 1 ? "optimizer" : "off";
}

void tr_shard_cut(const int64_t *numel, int n, int world, int64_t *first)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += numel[i];
    first[0] = 0;
    first[world] = total;
    /* rank k's first element: the first piece that starts at or after k·total/world */
    int k = 1;
    int64_t at = 0;   /* parameter i's first element */
    for (int i = 0; i < n && k < world; at += numel[i++])
        for (int64_t piece = 0; piece < numel[i] && k < world; piece += TR_SUMSQ_PIECE)
            while (k < world && at + piece >= (int64_t)((double)total * k / world))
                first[k++] = at + piece;
    while (k < world)   /* no piece starts after: the last ranks own nothing */
        first[k++] = total;
}

int64_t tr_shard_elements(const int64_t *numel, int n, int world, int rank)
{
    int64_t *first = tr_xmalloc((size_t)(world + 1) * sizeof *first);
    tr_shard_cut(numel, n, world, first);
    int64_t own = first[rank + 1] - first[rank];
    free(first);
    return own;
}

int tr_shard_spans(const struct tr_param_span *spans, int nspans, int64_t lo, int64_t hi, struct tr_param_span *out)
{
    int count = 0;
    for (int i = 0; i < nspans; i++) {
        int64_t a = spans[i].state, b = a + spans[i].numel;
        int64_t from = a > lo ? a : lo, to = b < hi ? b : hi;
        if (from >= to)
            continue;
        int64_t skip = from - a;   /* elements of the parameter before the shard's part */
        out[count++] = (struct tr_param_span){.param = spans[i].param + skip * (int64_t)sizeof(float),
                                              .grad = spans[i].grad + skip * (int64_t)sizeof(float),
                                              .state = from - lo, .numel = to - from, .decay = spans[i].decay};
    }
    return count;
}
