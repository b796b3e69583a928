/* The optimizers a recipe names (train.optimizer.name), each as one descriptor: the state
 * tensors it keeps per parameter — their names in a checkpoint and their dtype — and when it
 * keeps none. Every place that knows an optimizer's layout reads it here: the schema's names,
 * the planner's optimizer region, checkpoints, and the backends' updates, which select their
 * kernel by the optimizer's id and find state k at state + k·(the parameters' elements). */
#ifndef TR_OPTIMIZERS_H
#define TR_OPTIMIZERS_H

#include <stdbool.h>

#include "core/tensor.h"
#include "recipe/recipe.h"

#define TR_OPT_MAX_STATES 2

struct tr_optimizer_state {
    const char *name;        /* a checkpoint holds it as "optimizer.<name>.<parameter>" */
    enum tr_dtype dtype;
};

struct tr_optimizer_desc {
    int nstate;
    struct tr_optimizer_state state[TR_OPT_MAX_STATES];
    /* Whether the recipe's settings keep the state at all (NULL: always): SGD without momentum
     * keeps none. */
    bool (*keeps_state)(const struct tr_recipe *r);
};

/* By enum tr_optimizer. */
extern const struct tr_optimizer_desc tr_optimizers[TR_OPT_COUNT];
/* The names the recipe accepts, by enum tr_optimizer, NULL-terminated (the schema's). */
extern const char *const tr_optimizer_names[TR_OPT_COUNT + 1];

/* The state tensors per parameter r's optimizer keeps: its descriptor's, or 0. */
int tr_optimizer_nstate(const struct tr_recipe *r);

#endif
