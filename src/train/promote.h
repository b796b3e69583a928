/* The promotion gate of nightly runs (report.promote.*): a run that finished is compared, by
 * one metric, with the run its recipe's `promoted` link points to; not worse (allowing
 * min_delta) moves the link to it, worse leaves the link and makes the run exit 6 (a
 * regression). The first run that finishes is promoted. After the trainer, before the report. */
#ifndef TR_PROMOTE_H
#define TR_PROMOTE_H

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"
#include "recipe/recipe.h"

enum tr_promotion_decision { TR_PROMOTION_FIRST, TR_PROMOTION_PROMOTED, TR_PROMOTION_REGRESSION };

struct tr_promotion {
    char metric[128];             /* "test/accuracy" */
    int maximise;                 /* 1: higher is better */
    double min_delta;
    char candidate[256];          /* this run's folder name */
    double candidate_value;       /* NAN: the run never logged the metric */
    char promoted_run[256];       /* the promoted run compared with; "" for the first */
    double promoted_value;        /* NAN: none, or it never logged the metric */
    enum tr_promotion_decision decision;
    char reason[1024];            /* one line for people */
};

/* Decides for the finished run folder run_dir (in the recipe folder dir) and, unless it is a
 * regression, points dir/promoted at it. Returns 0 with *p filled (a regression is a decision,
 * not a failure), or TR_EIO (its metrics unreadable, the link not moved). */
int tr_promote(const struct tr_recipe *r, const char *dir, const char *run_dir, struct tr_promotion *p,
               struct tr_diag *d);

/* run.json's "promotion": {metric, mode, min_delta, candidate, candidate_value, promoted_run,
 * promoted_value, decision: "first" | "promoted" | "regression"}. */
json_t *tr_promotion_json(const struct tr_promotion *p);

#endif
