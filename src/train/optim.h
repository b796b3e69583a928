/* The optimizer step and the learning-rate schedule (DESIGN.md §2, trainer). Parameters,
 * gradients and optimizer state are flat f32 regions; the step walks every parameter value of
 * the graph with the recipe's optimizer (recipe/optimizers.h: AdamW, SGD with momentum or
 * Nesterov, as PyTorch defines them, so loss trajectories can be compared step by step). */
#ifndef TR_OPTIM_H
#define TR_OPTIM_H

#include "backend/exec.h"
#include "recipe/recipe.h"

struct tr_optim {
    const struct tr_graph *g;
    const struct tr_memplan *plan;
    const struct tr_backend *be;   /* whose memory the regions are, and who runs the passes */
    char *params, *grads;      /* the regions */
    float *state;              /* the descriptor's nstate tensors, one after the other */
    int nstate;                /* of them kept (SGD without momentum: 0) */
    size_t state_bytes;
    float *host_state;         /* the host's view of state (tr_optim_host_state) */
    struct tr_param_span *spans;   /* every parameter, in graph order (host memory) */
    int nspans;
    int64_t total;             /* the parameters' elements */
    int kind;                  /* enum tr_optimizer */
    double weight_decay, beta1, beta2, eps, momentum;
    int nesterov;
    int64_t step;              /* optimizer steps taken */
    float grad_factor;         /* clipping's factor for the next update (tr_grad_clip), else 1 */
};

/* The optimizer over g's parameters and gradients (at plan's offsets), its state in `state`
 * (tr_plan_optimizer_bytes long), all of it be's memory. */
void tr_optim_init(struct tr_optim *o, const struct tr_recipe *r, const struct tr_graph *g,
                   const struct tr_memplan *plan, const struct tr_backend *be, char *params, char *grads,
                   float *state);
void tr_optim_free(struct tr_optim *o);
/* The host's view of the state, for checkpoints: the state itself on a host-visible backend,
 * else a host copy that pull fills from the device and push copies back (0, or a code with the
 * backend's sentence in d). */
float *tr_optim_host_state(struct tr_optim *o);
int tr_optim_pull(struct tr_optim *o, struct tr_diag *d);
int tr_optim_push(struct tr_optim *o, struct tr_diag *d);
/* One update with learning rate lr from the accumulated gradients: 0, or a code with the
 * sentence in d (a device fault). */
int tr_optim_step(struct tr_optim *o, double lr, struct tr_diag *d);

/* The learning rate at optimizer step t (1-based) of total: linear warm-up, then constant,
 * linear decay to 0 or cosine to 0. */
double tr_schedule_lr(const struct tr_recipe *r, int64_t t, int64_t total);

/* The global L2 norm of all gradients; with clip > 0 and a larger norm, the next
 * tr_optim_step reads them scaled to clip (the scaling fused into the update's pass: the
 * gradients in memory stay as they are). Returns the norm before clipping (NaN or Inf if any gradient is); NaN with a sentence added to
 * d when the backend failed. */
double tr_grad_clip(struct tr_optim *o, double clip, struct tr_diag *d);
/* Multiplies every gradient by inv (the fp16 loss scale's inverse) and says whether all of
 * them are finite: the unscaling and the overflow check in one pass (false with a sentence
 * added to d when the backend failed). */
bool tr_grad_unscale(struct tr_optim *o, float inv, struct tr_diag *d);
/* The first parameter whose gradient holds NaN or Inf, or -1 (copies each gradient to the
 * host in turn: for the failure's message, not for every step). */
int tr_grad_first_nonfinite(const struct tr_optim *o);

#endif
