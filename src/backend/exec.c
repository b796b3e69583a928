/* The executor (exec.h): bind, run, and in debug mode police the arena. */
#include "backend/exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void *tr_exec_data(const struct tr_exec *x, int v)
{
    int root = tr_storage_of(x->g, v);
    if (x->plan->offset[root] < 0)
        return NULL;
    return x->base[tr_region_kind(x->g->values[root].kind)] + x->plan->offset[root];
}

static int fail(struct tr_exec *x, const struct tr_node *n, int step, const char *what)
{
    snprintf(x->error, sizeof x->error, "step %d (%s): %s", step, tr_op_name(n->op), what);
    return TR_EINVAL;
}

/* Debug: fill a dead value's slot with NaN bytes (0xff…), so a kernel that reads it yields
 * NaN, which the tests see in the loss. */
static void poison(struct tr_exec *x, int step)
{
    const struct tr_memplan *p = x->plan;
    for (int v = 0; v < x->g->nvalues; v++) {
        if (x->g->values[v].kind != TR_ACT || x->g->values[v].view_of >= 0 || p->last[v] != step ||
            p->offset[v] < 0)
            continue;
        bool handed_on = false;   /* an in-place heir now owns the slot */
        const struct tr_node *node = &x->g->nodes[x->schedule[step]];
        for (int i = 0; i < node->nout; i++)
            handed_on |= tr_storage_of(x->g, node->out[i]) != v && p->offset[tr_storage_of(x->g, node->out[i])] == p->offset[v];
        if (!handed_on) {
            memset(x->base[TR_ACT] + p->offset[v], 0xff, p->bytes[v]);
            memset(x->shadow + p->offset[v], 0xff, p->bytes[v]);
        }
    }
}

/* Debug: everything the node did not own must be as it was. */
static int police(struct tr_exec *x, const struct tr_node *node, int step)
{
    const struct tr_memplan *p = x->plan;
    for (int i = 0; i < node->nout; i++) {
        int v = tr_storage_of(x->g, node->out[i]);
        if (x->g->values[v].kind == TR_ACT && p->offset[v] >= 0)
            memcpy(x->shadow + p->offset[v], x->base[TR_ACT] + p->offset[v], p->bytes[v]);
    }
    size_t size = p->region_bytes[TR_ACT];
    if (memcmp(x->shadow, x->base[TR_ACT], size) == 0)
        return 0;
    size_t at = 0;
    while (at < size && x->shadow[at] == x->base[TR_ACT][at])
        at++;
    char what[160];
    snprintf(what, sizeof what, "wrote arena byte %zu, outside its outputs", at);
    for (int v = 0; v < x->g->nvalues; v++)
        if (x->g->values[v].kind == TR_ACT && p->offset[v] >= 0 && x->g->values[v].view_of < 0 &&
            at >= (size_t)p->offset[v] && at < (size_t)p->offset[v] + p->bytes[v])
            snprintf(what, sizeof what, "wrote into value %d (live %d..%d), not its output", v,
                     p->first[v], p->last[v]);
    return fail(x, node, step, what);
}

int tr_exec_run(struct tr_exec *x, int64_t B, int64_t S)
{
    if (B > x->plan->B || S > x->plan->S) {
        snprintf(x->error, sizeof x->error, "sizes B=%lld S=%lld exceed the plan's (%lld, %lld)",
                 (long long)B, (long long)S, (long long)x->plan->B, (long long)x->plan->S);
        return TR_EINVAL;
    }
    if (x->debug) {   /* each run may bind another plan (length buckets): its arena, synced */
        if (x->shadow_bytes < x->plan->region_bytes[TR_ACT] + 1) {
            free(x->shadow);
            x->shadow_bytes = x->plan->region_bytes[TR_ACT] + 1;
            x->shadow = tr_xmalloc(x->shadow_bytes);
        }
        memcpy(x->shadow, x->base[TR_ACT], x->plan->region_bytes[TR_ACT]);
    }
    char kernel_error[TR_KERNEL_ERROR_MAX];
    for (int step = 0; step < x->n; step++) {
        const struct tr_node *node = &x->g->nodes[x->schedule[step]];
        if (node->op != TR_OP_RESHAPE) {   /* a view: nothing to run */
            struct tr_kernel_args a = {.node = node, .nin = node->nin, .nout = node->nout,
                                       .workspace = x->workspace,
                                       .workspace_bytes = x->plan->workspace_bytes,
                                       .rng = x->rng, .error = kernel_error};
            tr_bind_shapes(x->g, node, B, S, a.in, a.out);
            for (int i = 0; i < node->nin; i++)
                a.in[i].data = tr_exec_data(x, node->in[i]);
            for (int i = 0; i < node->nout; i++)
                a.out[i].data = tr_exec_data(x, node->out[i]);
            kernel_error[0] = '\0';
            double start = x->op_seconds || x->phase_seconds ? seconds() : 0;
            if (tr_backend_run(x->be, &a))
                return fail(x, node, step, kernel_error);
            if (x->op_seconds || x->phase_seconds) {
                double took = seconds() - start;
                if (x->op_seconds)
                    x->op_seconds[node->op] += took;
                if (x->phase_seconds)
                    x->phase_seconds[node->phase] += took;
            }
        }
        if (x->debug) {
            if (police(x, node, step))
                return TR_EINVAL;
            poison(x, step);
        }
    }
    return 0;
}

int tr_exec_alloc(struct tr_exec *x, struct tr_allocator *a, const size_t *region_bytes,
                  size_t workspace_bytes)
{
    static const struct { enum tr_value_kind kind; enum tr_region region; } map[] = {
        {TR_PARAM, TR_REGION_PARAMS}, {TR_GRAD, TR_REGION_GRADS}, {TR_INPUT, TR_REGION_DATA},
        {TR_ACT, TR_REGION_ARENA},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        void *p = NULL;
        if (tr_alloc_region(a, map[i].region, region_bytes[map[i].kind], &p))
            return snprintf(x->error, sizeof x->error, "%s", tr_alloc_error(a)), TR_ENOMEM;
        x->base[map[i].kind] = p;
    }
    if (tr_alloc_region(a, TR_REGION_WORKSPACE, workspace_bytes, &x->workspace))
        return snprintf(x->error, sizeof x->error, "%s", tr_alloc_error(a)), TR_ENOMEM;
    return 0;
}

void tr_exec_free(struct tr_exec *x)
{
    free(x->shadow);
    x->shadow = NULL;
    x->shadow_bytes = 0;
}
