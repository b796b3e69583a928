/* A growing list of token ids: what every tokenizer (tokenizer.h, bpe.h, wordpiece.h) appends
 * to. Below them all, so that the tokenizers and their dispatcher include it, not each other. */
#ifndef TR_IDS_H
#define TR_IDS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"

struct tr_ids {
    int32_t *v;
    size_t n, cap;
};

static inline void tr_ids_push(struct tr_ids *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        ids->cap = ids->cap ? 2 * ids->cap : 256;
        ids->v = tr_xrealloc(ids->v, ids->cap * sizeof *ids->v);
    }
    ids->v[ids->n++] = id;
}

static inline void tr_ids_free(struct tr_ids *ids)
{
    free(ids->v);
    *ids = (struct tr_ids){0};
}

#endif
