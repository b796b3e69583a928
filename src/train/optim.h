/* The optimizer step and the learning-rate schedule (DESIGN.md §2, trainer). Parameters,
 * gradients and optimizer state are flat f32 regions; the step walks every parameter value of
 * the graph: AdamW (decoupled weight decay) or SGD with momentum/Nesterov, as PyTorch defines
 * them, so loss trajectories can be compared step by step. */
#ifndef TR_OPTIM_H
#define TR_OPTIM_H

#include "backend/exec.h"
#include "recipe/recipe.h"

struct tr_optim {
    const struct tr_graph *g;
    const struct tr_memplan *plan;
    char *params, *grads;      /* the regions */
    float *state;              /* AdamW: m then v per parameter; SGD: the momentum buffer */
    size_t state_bytes;
    int kind;                  /* enum tr_optimizer */
    double weight_decay, beta1, beta2, eps, momentum;
    int nesterov;
    int64_t step;              /* optimizer steps taken */
};

/* The optimizer over g's parameters and gradients (at plan's offsets), its state in `state`
 * (tr_plan_optimizer_bytes long). */
void tr_optim_init(struct tr_optim *o, const struct tr_recipe *r, const struct tr_graph *g,
                   const struct tr_memplan *plan, char *params, char *grads, float *state);
/* One update with learning rate lr from the accumulated gradients. */
void tr_optim_step(struct tr_optim *o, double lr);

/* The learning rate at optimizer step t (1-based) of total: linear warm-up, then constant,
 * linear decay to 0 or cosine to 0. */
double tr_schedule_lr(const struct tr_recipe *r, int64_t t, int64_t total);

/* The global L2 norm of all gradients; with clip > 0 and a larger norm, scales them to clip.
 * Returns the norm before clipping (NaN or Inf if any gradient is). */
double tr_grad_clip(struct tr_optim *o, double clip);
/* Multiplies every gradient by inv (the fp16 loss scale's inverse) and says whether all of
 * them are finite: the unscaling and the overflow check in one pass. */
bool tr_grad_unscale(struct tr_optim *o, float inv);
/* The first parameter whose gradient holds NaN or Inf, or -1. */
int tr_grad_first_nonfinite(const struct tr_optim *o);

#endif
