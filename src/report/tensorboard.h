/* What a run tells TensorBoard once, at its start (events.h writes it): the resolved recipe and
 * the plan as text, the HParams session (the recipe's main hyper-parameters and the knobs the
 * plan chose), and the model's forward graph. */
#ifndef TR_TENSORBOARD_H
#define TR_TENSORBOARD_H

#include <stdint.h>

#include "graph/graph.h"
#include "plan/plan.h"
#include "recipe/recipe.h"
#include "report/events.h"

/* The dotted recipe keys shown as hyper-parameters, NULL-terminated; beside them the knobs the
 * planner chose (k), as plan.precision, plan.checkpointing, plan.batching, plan.micro_batch and
 * plan.accumulation — never the recipe's `auto`. */
extern const char *const tr_tb_hparam_keys[];

void tr_tb_session_start(struct tr_events *ev, const struct tr_recipe *r, const char *plan_markdown,
                         const struct tr_graph *g, const struct tr_knobs *k, double start_secs);

#endif
