/* The optimizers' descriptors (optimizers.h). Their updates are the backends' (cpu/device.c,
 * cuda/device.cu), their formulas written above each. */
#include "recipe/optimizers.h"

const char *const tr_optimizer_names[TR_OPT_COUNT + 1] = {
    [TR_OPT_ADAMW] = "adamw",
    [TR_OPT_SGD] = "sgd",
    [TR_OPT_LION] = "lion",
};

static bool sgd_keeps_momentum(const struct tr_recipe *r)
{
    return r->train.optimizer.momentum > 0;
}

const struct tr_optimizer_desc tr_optimizers[TR_OPT_COUNT] = {
    [TR_OPT_ADAMW] = {.nstate = 2, .state = {{"m", TR_F32}, {"v", TR_F32}}},
    [TR_OPT_SGD] = {.nstate = 1, .state = {{"momentum", TR_F32}}, .keeps_state = sgd_keeps_momentum},
    [TR_OPT_LION] = {.nstate = 1, .state = {{"m", TR_F32}}},   /* half AdamW's state */
};

int tr_optimizer_nstate(const struct tr_recipe *r)
{
    const struct tr_optimizer_desc *o = &tr_optimizers[r->train.optimizer.name];
    return o->keeps_state && !o->keeps_state(r) ? 0 : o->nstate;
}
