/* A graph made runnable for tests: autodiff, a schedule in creation order, a memory plan at
 * (B, S), the regions from the allocator, and the executor.
 * Graph-level gradient checks perturb parameters and compare with the gradients autodiff built. */
#ifndef TR_TESTS_HARNESS_H
#define TR_TESTS_HARNESS_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "graph/memplan.h"

struct harness {
    struct tr_graph g;
    int *schedule, n, loss_scale;
    struct tr_memplan plan;
    struct tr_exec x;
    struct tr_rng_ctx rng;
    struct tr_allocator alloc;
};

static inline void harness_plan(struct harness *h, int64_t B, int64_t S, bool debug)
{
    ck_assert_msg(!h->g.error, "graph: %s", h->g.message);
    h->loss_scale = tr_autodiff(&h->g);
    ck_assert_msg(h->loss_scale >= 0, "autodiff: %s", h->g.message);
    h->n = h->g.nnodes;
    h->schedule = malloc((size_t)h->n * sizeof(int));
    for (int i = 0; i < h->n; i++)
        h->schedule[i] = i;
    tr_memplan_build(&h->plan, &h->g, h->schedule, h->n, B, S, &h->g.loss, 1, tr_cpu_ops.workspace_bytes, false);
    h->x = (struct tr_exec){.g = &h->g, .schedule = h->schedule, .n = h->n, .plan = &h->plan,
                            .be = tr_backend_cpu(), .rng = &h->rng, .debug = debug};
    tr_alloc_init(&h->alloc, NULL);
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_alloc(&h->x, &h->alloc, h->plan.region_bytes, h->plan.workspace_bytes, &why) == 0,
                  "%s", tr_diag_last(&why));
    h->rng = (struct tr_rng_ctx){.seed = 1234, .step = 1};
}

static inline void harness_free(struct harness *h)
{
    tr_alloc_destroy(&h->alloc);
    tr_exec_free(&h->x);
    tr_memplan_free(&h->plan);
    free(h->schedule);
    tr_graph_free(&h->g);
}

static inline double *harness_f64(struct harness *h, int v)
{
    return tr_exec_data(&h->x, v);
}

static inline void harness_fill(struct harness *h, int v, uint64_t *seed, double lo, double hi)
{
    double *d = harness_f64(h, v);
    int64_t n = (int64_t)(h->plan.bytes[v] / sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        *seed ^= *seed >> 12, *seed ^= *seed << 25, *seed ^= *seed >> 27;
        d[i] = lo + (hi - lo) * (double)((*seed * 2685821657736338717ull) >> 11) / 9007199254740992.0;
    }
}

/* One forward + backward with gradients zeroed first; returns the loss. */
static inline double harness_run(struct harness *h, int64_t B, int64_t S)
{
    if (h->plan.region_bytes[TR_GRAD])
        memset(h->x.base[TR_GRAD], 0, h->plan.region_bytes[TR_GRAD]);
    *harness_f64(h, h->loss_scale) = 1;
    struct tr_diag why = {0};
    int rc = tr_exec_run(&h->x, B, S, &why);
    ck_assert_msg(rc == 0, "exec: %s", tr_diag_last(&why));
    return *harness_f64(h, h->g.loss);
}

/* ‖fd − autodiff‖ / ‖fd‖ over every element of every parameter (f64 graphs). */
static inline double harness_gradcheck(struct harness *h, int64_t B, int64_t S)
{
    harness_run(h, B, S);
    size_t gbytes = h->plan.region_bytes[TR_GRAD];
    double *analytic = malloc(gbytes + 8);
    memcpy(analytic, h->x.base[TR_GRAD], gbytes);
    double diff = 0, norm = 0;
    for (int v = 0; v < h->g.nvalues; v++) {
        if (h->g.values[v].kind != TR_PARAM)
            continue;
        double *p = harness_f64(h, v);
        const double *an = analytic + h->plan.offset[h->g.values[v].grad] / (int64_t)sizeof(double);
        int64_t count = tr_dim_eval(tr_shape_numel(&h->g.values[v].shape), B, S);
        for (int64_t i = 0; i < count; i++) {
            double keep = p[i], step = 1e-6 * (fabs(keep) > 1 ? fabs(keep) : 1);
            p[i] = keep + step;
            double plus = harness_run(h, B, S);
            p[i] = keep - step;
            double minus = harness_run(h, B, S);
            p[i] = keep;
            double fd = (plus - minus) / (2 * step);
            diff += (fd - an[i]) * (fd - an[i]);
            norm += fd * fd;
        }
    }
    free(analytic);
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

#endif
