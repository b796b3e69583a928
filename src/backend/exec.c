/* The executor (exec.h): bind, run, and in debug mode police the arena. */
#include "backend/exec.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "graph/ops.h"

void *tr_exec_data(const struct tr_exec *x, int v)
{
    int root = tr_storage_of(x->g, v);
    if (x->plan->offset[root] < 0 || (x->shard.fill && x->plan->region[root] == TR_PARAM))
        return NULL;   /* ZeRO 3: a parameter is whole only in its copies and the host's view */
    return x->base[x->plan->region[root]] + x->plan->offset[root];
}

/* A copy's failure (its sentence in inner), passed on in d under the value it concerned. */
static int copy_failed(const struct tr_exec *x, int v, const char *what, int rc, struct tr_diag *inner,
                       struct tr_diag *d)
{
    rc = tr_fail(d, rc, "%s value %d (%s): %s", what, v, x->g->values[v].name, tr_diag_last(inner));
    tr_diag_free(inner);
    return rc;
}

int tr_exec_read(const struct tr_exec *x, int v, void *host, size_t bytes, struct tr_diag *d)
{
    struct tr_diag why = {0};
    int rc = tr_backend_copy(x->be, host, tr_exec_data(x, v), bytes, TR_COPY_TO_HOST, &why);
    return rc ? copy_failed(x, v, "reading", rc, &why, d) : 0;
}

int tr_exec_write(struct tr_exec *x, int v, const void *host, size_t bytes, struct tr_diag *d)
{
    struct tr_diag why = {0};
    int rc = tr_backend_copy(x->be, tr_exec_data(x, v), host, bytes, TR_COPY_TO_DEVICE, &why);
    return rc ? copy_failed(x, v, "writing", rc, &why, d) : 0;
}

int tr_exec_fill(struct tr_exec *x, int v, int byte, size_t bytes, struct tr_diag *d)
{
    struct tr_diag why = {0};
    int rc = tr_backend_fill(x->be, tr_exec_data(x, v), byte, bytes, &why);
    return rc ? copy_failed(x, v, "filling", rc, &why, d) : 0;
}

int tr_exec_stage(struct tr_exec *x, const struct tr_memplan *plan, int v, const void *host, size_t bytes,
                  struct tr_diag *d)
{
    int root = tr_storage_of(x->g, v);
    if (x->g->values[root].kind != TR_INPUT || plan->offset[root] < 0 || x->nstaged == TR_EXEC_MAX_STAGED)
        return tr_fail(d, TR_EINVAL, "staging value %d (%s): not an input, or %d staged already", v,
                       x->g->values[v].name, x->nstaged);
    struct tr_staged *s = &x->staged[x->nstaged++];
    *s = (struct tr_staged){v, plan->offset[root], host, bytes};
    struct tr_diag why = {0};
    int rc = x->stage ? tr_backend_copy_ahead(x->be, x->stage + s->offset, host, bytes, &why) : 0;
    return rc ? copy_failed(x, v, "copying ahead", rc, &why, d) : 0;
}

int tr_exec_commit(struct tr_exec *x, struct tr_diag *d)
{
    struct tr_diag why = {0};
    int n = x->nstaged, rc;
    x->nstaged = 0;
    if (x->stage && n && (rc = tr_backend_join(x->be, &why))) {
        rc = tr_fail(d, rc, "waiting for the inputs copied ahead: %s", tr_diag_last(&why));
        tr_diag_free(&why);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        const struct tr_staged *s = &x->staged[i];
        char *to = x->base[TR_INPUT] + s->offset;
        rc = x->stage ? tr_backend_copy(x->be, to, x->stage + s->offset, s->bytes, TR_COPY_ON_DEVICE, &why)
                      : tr_backend_copy(x->be, to, s->host, s->bytes, TR_COPY_TO_DEVICE, &why);
        if (rc)
            return copy_failed(x, s->v, "committing", rc, &why, d);
    }
    return 0;
}

static size_t region_size(const struct tr_exec *x, enum tr_value_kind kind)
{
    return x->region_bytes[kind] ? x->region_bytes[kind] : x->plan->region_bytes[kind];
}

static bool sharded(const struct tr_exec *x, enum tr_value_kind kind)
{
    return kind == TR_PARAM && x->shard.fill;
}

static char *mirror_of(struct tr_exec *x, enum tr_value_kind kind)
{
    if (!x->mirror[kind] && sharded(x, kind))   /* the whole, as the plan lays it out */
        x->mirror[kind] = tr_xcalloc(x->plan->region_bytes[kind] + 1, 1);
    if (!x->mirror[kind])
        x->mirror[kind] = x->be->ops->host_visible ? x->base[kind] : tr_xcalloc(region_size(x, kind) + 1, 1);
    return x->mirror[kind];
}

char *tr_exec_view(struct tr_exec *x, enum tr_value_kind kind)
{
    return mirror_of(x, kind);
}

void tr_exec_drop_host(struct tr_exec *x, enum tr_value_kind kind)
{
    if (x->mirror[kind] != x->base[kind])
        free(x->mirror[kind]);
    x->mirror[kind] = NULL;
}

void *tr_exec_host(struct tr_exec *x, int v)
{
    int root = tr_storage_of(x->g, v);
    if (x->plan->offset[root] < 0)
        return NULL;
    return mirror_of(x, (enum tr_value_kind)x->plan->region[root]) + x->plan->offset[root];
}

static int mirror_copy(struct tr_exec *x, enum tr_value_kind kind, enum tr_copy direction, struct tr_diag *d)
{
    char *m = mirror_of(x, kind);
    if (sharded(x, kind))
        return direction == TR_COPY_TO_DEVICE ? x->shard.push(x->shard.ctx, m, d) : 0;
    if (m == x->base[kind])
        return 0;
    size_t bytes = region_size(x, kind);
    struct tr_diag why = {0};
    int rc = tr_backend_copy(x->be, direction == TR_COPY_TO_HOST ? m : x->base[kind],
                             direction == TR_COPY_TO_HOST ? x->base[kind] : m, bytes, direction, &why);
    if (rc) {
        rc = tr_fail(d, rc, "copying the %zu-byte region %s the device: %s", bytes,
                     direction == TR_COPY_TO_HOST ? "from" : "to", tr_diag_last(&why));
        tr_diag_free(&why);
    }
    return rc;
}

int tr_exec_pull(struct tr_exec *x, enum tr_value_kind kind, struct tr_diag *d)
{
    return mirror_copy(x, kind, TR_COPY_TO_HOST, d);
}

int tr_exec_push(struct tr_exec *x, enum tr_value_kind kind, struct tr_diag *d)
{
    return mirror_copy(x, kind, TR_COPY_TO_DEVICE, d);
}

/* A node's failure (its sentence in inner, NULL: what), passed on in d under its step and op. */
static int fail(const struct tr_node *n, int step, int rc, struct tr_diag *inner, const char *what,
                struct tr_diag *d)
{
    rc = tr_fail(d, rc ? rc : TR_EINVAL, "step %d (%s): %s", step, tr_op_name(n->op),
                 inner ? tr_diag_last(inner) : what);
    if (inner)
        tr_diag_free(inner);
    return rc;
}

/* Debug: fill a dead value's slot with NaN bytes (0xff…), so a kernel that reads it yields
 * NaN, which the tests see in the loss. */
static int poison(struct tr_exec *x, int step, struct tr_diag *d)
{
    const struct tr_memplan *p = x->plan;
    for (int v = 0; v < x->g->nvalues; v++) {
        if (!tr_memplan_in_arena(p, v) || x->g->values[v].view_of >= 0 || p->last[v] != step ||
            p->offset[v] < 0 || (p->staged && step == x->to - 1))
            continue;   /* a stage's part's last step: what dies there may be sent first */
        bool handed_on = false;   /* an in-place heir now owns the slot */
        const struct tr_node *node = &x->g->nodes[x->schedule[step]];
        for (int i = 0; i < node->nout; i++)
            handed_on |= tr_storage_of(x->g, node->out[i]) != v && p->offset[tr_storage_of(x->g, node->out[i])] == p->offset[v];
        if (!handed_on) {
            struct tr_diag why = {0};
            int rc = tr_backend_fill(x->be, x->base[TR_ACT] + p->offset[v], 0xff, p->bytes[v], &why);
            if (rc)
                return fail(node, step, rc, &why, NULL, d);
            memset(x->shadow + p->offset[v], 0xff, p->bytes[v]);
        }
    }
    return 0;
}

/* Debug: the arena as it is now, on the host: the region itself, or a copy of a device's. */
static const char *arena_now(struct tr_exec *x, struct tr_diag *d)
{
    if (x->be->ops->host_visible)
        return x->base[TR_ACT];
    if (!x->seen)
        x->seen = tr_xmalloc(x->shadow_bytes);
    return tr_backend_copy(x->be, x->seen, x->base[TR_ACT], x->plan->region_bytes[TR_ACT], TR_COPY_TO_HOST, d)
               ? NULL
               : x->seen;
}

/* Debug: everything the node did not own must be as it was. */
static int police(struct tr_exec *x, const struct tr_node *node, int step, struct tr_diag *d)
{
    const struct tr_memplan *p = x->plan;
    struct tr_diag why = {0};
    const char *arena = arena_now(x, &why);
    if (!arena)
        return fail(node, step, why.code, &why, NULL, d);
    for (int i = 0; i < node->nout; i++) {
        int v = tr_storage_of(x->g, node->out[i]);
        if (tr_memplan_in_arena(p, v) && p->offset[v] >= 0)
            memcpy(x->shadow + p->offset[v], arena + p->offset[v], p->bytes[v]);
    }
    size_t size = p->region_bytes[TR_ACT];
    if (memcmp(x->shadow, arena, size) == 0)
        return 0;
    size_t at = 0;
    while (at < size && x->shadow[at] == arena[at])
        at++;
    char what[160];
    snprintf(what, sizeof what, "wrote arena byte %zu, outside its outputs", at);
    for (int v = 0; v < x->g->nvalues; v++)
        if (tr_memplan_in_arena(p, v) && p->offset[v] >= 0 && x->g->values[v].view_of < 0 &&
            at >= (size_t)p->offset[v] && at < (size_t)p->offset[v] + p->bytes[v])
            snprintf(what, sizeof what, "wrote into value %d (live %d..%d), not its output", v,
                     p->first[v], p->last[v]);
    return fail(node, step, TR_EINVAL, NULL, what, d);
}

bool tr_exec_phase_ends(const struct tr_exec *x, int step)
{
    enum tr_phase phase = x->g->nodes[x->schedule[step]].phase;
    for (int next = step + 1; next < x->n; next++) {
        const struct tr_node *n = &x->g->nodes[x->schedule[next]];
        if (!tr_op_is_view(n->op))
            return n->phase != phase;
    }
    return true;
}

/* Waits for the copies begun up to copy c (INT_MAX: all), where they travel on their own. */
static int ready(struct tr_exec *x, int c, struct tr_diag *d)
{
    return x->shard.ready ? x->shard.ready(x->shard.ctx, c, d) : 0;
}

/* ZeRO 3: copy number c filled (or begun) with its parameter, whole, from the ranks' shards. */
static int gather(struct tr_exec *x, int c, struct tr_diag *d)
{
    int v = x->plan->gather[c];
    char *dst = x->base[TR_ACT] + x->plan->offset[v];
    int rc = x->shard.fill(x->shard.ctx, c, x->g->values[v].gathers, dst, d);
    if (!rc && x->debug)   /* debug: no write beside a node's, and the shadow takes it */
        rc = ready(x, c, d);
    if (!rc && x->debug && x->shadow && x->be->ops->host_visible &&
        (size_t)x->plan->offset[v] + x->plan->bytes[v] <= x->shadow_bytes)
        memcpy(x->shadow + x->plan->offset[v], dst, x->plan->bytes[v]);
    return rc;
}

/* ZeRO 3: the copies node reads, written before it runs. */
static int inputs_ready(struct tr_exec *x, const struct tr_node *node, struct tr_diag *d)
{
    int last = -1;
    for (int i = 0; i < node->nin; i++) {
        int c = node->in[i] >= 0 ? x->plan->gather_at[tr_storage_of(x->g, node->in[i])] : -1;
        last = c > last ? c : last;
    }
    return last >= 0 ? ready(x, last, d) : 0;
}

int tr_exec_gathers(struct tr_exec *x, struct tr_diag *d)
{
    int rc = 0;
    for (int c = 0; c < x->plan->ngather && !rc; c++)
        rc = gather(x, c, d);
    int done = ready(x, INT_MAX, d);
    return rc ? rc : done;
}

/* Every copy on the queue landed (activation offload's, and inputs copied ahead with them). */
static int landed(struct tr_exec *x, struct tr_diag *d)
{
    if (!x->in_flight)
        return 0;
    double began = tr_now();
    int rc = tr_backend_join(x->be, d);
    x->copies.seconds += tr_now() - began;
    x->in_flight = false, x->join_at = INT_MAX;
    return rc;
}

/* An offload pass's copy (exec.h): queued where the backend has a queue, else done at once. */
static int run_copy(struct tr_exec *x, int step, const struct tr_kernel_args *a, struct tr_diag *d)
{
    bool queue = tr_backend_copies_ahead(x->be) && !x->debug;   /* debug: the shadow sees each land */
    size_t bytes = tr_tensor_bytes(&a->in[0]);   /* the micro-batch's, not the bucket's */
    double began = tr_now();
    int rc = 0;
    if (!x->in_flight)
        x->join_at = INT_MAX;
    if (a->node->op == TR_OP_OFFLOAD) {
        rc = queue ? tr_backend_copy_behind(x->be, a->out[0].data, a->in[0].data, bytes, d)
                   : tr_backend_copy(x->be, a->out[0].data, a->in[0].data, bytes, TR_COPY_TO_HOST, d);
        x->copies.sent += bytes;
        x->in_flight |= queue;
    } else if (a->node->op == TR_OP_RELOAD) {
        rc = queue ? tr_backend_copy_ahead(x->be, a->out[0].data, a->in[0].data, bytes, d)
                   : tr_backend_copy(x->be, a->out[0].data, a->in[0].data, bytes, TR_COPY_TO_DEVICE, d);
        x->copies.back += bytes;
        if (queue) {
            int reader = x->plan->read_at[tr_storage_of(x->g, a->node->out[0])];   /* the memory plan's */
            reader = reader < 0 ? x->n : reader;
            x->in_flight = true, x->join_at = reader < x->join_at ? reader : x->join_at;
        }
    }   /* OFFLOAD_WAIT: joined below, the slot reused after it */
    x->copies.seconds += tr_now() - began;
    return rc ? rc : a->node->op == TR_OP_OFFLOAD_WAIT ? landed(x, d) : 0;
}

int tr_exec_run(struct tr_exec *x, int64_t B, int64_t S, struct tr_diag *d)
{
    return tr_exec_run_part(x, B, S, 0, x->n, d);
}

int tr_exec_run_part(struct tr_exec *x, int64_t B, int64_t S, int from, int to, struct tr_diag *d)
{
    if (B > x->plan->B || S > x->plan->S)
        return tr_fail(d, TR_EINVAL, "sizes B=%lld S=%lld exceed the plan's (%lld, %lld)", (long long)B,
                       (long long)S, (long long)x->plan->B, (long long)x->plan->S);
    struct tr_diag why = {0};   /* a kernel's sentence, passed on under its step: nothing allocated unless one fails */
    if (x->debug) {   /* each run may bind another plan (length buckets): its arena, synced */
        if (x->shadow_bytes < x->plan->region_bytes[TR_ACT] + 1) {
            free(x->shadow), free(x->seen);
            x->seen = NULL;
            x->shadow_bytes = x->plan->region_bytes[TR_ACT] + 1;
            x->shadow = tr_xmalloc(x->shadow_bytes);
        }
        const char *arena = arena_now(x, &why);
        if (!arena) {
            int rc = tr_fail(d, why.code, "debug: %s", tr_diag_last(&why));
            tr_diag_free(&why);
            return rc;
        }
        memcpy(x->shadow, arena, x->plan->region_bytes[TR_ACT]);
    }
    const struct tr_exec_hook *hook = x->hook.before || x->hook.after ? &x->hook : NULL;
    const struct tr_memplan *p = x->plan;
    x->B = B, x->S = S, x->to = to;
    int z = 0, c = 0;
    while (z < p->nzero && p->first[p->zero[z]] < from)
        z++;
    while (c < p->ngather && p->first[p->gather[c]] < from)
        c++;
    for (int step = from; step < to; step++) {
        const struct tr_node *node = &x->g->nodes[x->schedule[step]];
        for (; z < p->nzero && p->first[p->zero[z]] == step; z++) {   /* gradients in the arena start at 0 */
            int rc = tr_backend_fill(x->be, x->base[TR_ACT] + p->offset[p->zero[z]], 0, p->bytes[p->zero[z]], &why);
            if (rc)
                return fail(node, step, rc, &why, NULL, d);
            if (x->debug)
                memset(x->shadow + p->offset[p->zero[z]], 0, p->bytes[p->zero[z]]);
        }
        int gathered = 0;   /* ZeRO 3: the copies starting here gathered, those the node reads there */
        for (; !gathered && c < p->ngather && p->first[p->gather[c]] == step; c++)
            gathered = gather(x, c, &why);
        if (!gathered && x->shard.ready && !x->debug)
            gathered = inputs_ready(x, node, &why);
        if (gathered) {
            ready(x, INT_MAX, &(struct tr_diag){0});   /* none left writing into the arena */
            return fail(node, step, gathered, &why, NULL, d);
        }
        if (!tr_op_is_view(node->op)) {   /* a view: nothing to run */
            struct tr_kernel_args a = {.node = node, .nin = node->nin, .nout = node->nout,
                                       .workspace = x->workspace,
                                       .workspace_bytes = x->plan->workspace_bytes,
                                       .rng = x->rng, .diag = &why};
            tr_bind_shapes(x->g, node, B, S, a.in, a.out);
            for (int i = 0; i < node->nin; i++)
                a.in[i].data = tr_exec_data(x, node->in[i]);
            for (int i = 0; i < node->nout; i++)
                a.out[i].data = tr_exec_data(x, node->out[i]);
            int rc;
            if (x->in_flight && x->join_at <= step && (rc = landed(x, &why)))   /* what it reads came back */
                return fail(node, step, rc, &why, NULL, d);
            if (hook && hook->before && (rc = hook->before(hook->ctx, x, step, node, &why)))
                return fail(node, step, rc, &why, NULL, d);
            if (tr_ops[node->op].runs_on == TR_OP_RUNS_ON_COPY)
                rc = run_copy(x, step, &a, &why);
            else if (tr_ops[node->op].runs_on == TR_OP_RUNS_ON_COLLECTIVE)
                rc = x->collective.run ? x->collective.run(x->collective.ctx, &a)
                                       : tr_fail(&why, TR_EFAIL, "internal: a collective and no ranks to run it");
            else
                rc = tr_backend_run(x->be, &a);
            if (rc)
                return fail(node, step, rc, &why, NULL, d);
            if (hook && hook->after && (rc = hook->after(hook->ctx, x, step, node, &why)))
                return fail(node, step, rc, &why, NULL, d);
        }
        int rc;
        if (x->debug && ((rc = police(x, node, step, d)) || (rc = poison(x, step, d))))
            return rc;
    }
    int rc = landed(x, &why);   /* nothing left on its way past the run */
    return rc ? fail(&x->g->nodes[x->schedule[to - 1]], to - 1, rc, &why, NULL, d) : 0;
}

size_t tr_exec_inputs_bytes(const struct tr_backend_ops *ops, size_t inputs)
{
    size_t half = (inputs + TR_EXEC_STAGE_ALIGN - 1) / TR_EXEC_STAGE_ALIGN * TR_EXEC_STAGE_ALIGN;
    return ops && ops->copy_ahead && inputs ? 2 * half : inputs;
}

int tr_exec_alloc(struct tr_exec *x, struct tr_allocator *a, const size_t *region_bytes,
                  size_t workspace_bytes, struct tr_diag *d)
{
    static const struct { enum tr_value_kind kind; enum tr_region region; } map[] = {
        {TR_PARAM, TR_REGION_PARAMS}, {TR_GRAD, TR_REGION_GRADS}, {TR_INPUT, TR_REGION_DATA},
        {TR_ACT, TR_REGION_ARENA},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        void *p = NULL;
        size_t bytes = region_bytes[map[i].kind];
        size_t held = map[i].kind == TR_INPUT ? tr_exec_inputs_bytes(x->be ? x->be->ops : NULL, bytes) : bytes;
        if (tr_alloc_region(a, map[i].region, held, &p))
            return tr_fail(d, TR_ENOMEM, "%s", tr_alloc_error(a));
        x->base[map[i].kind] = p;
        x->region_bytes[map[i].kind] = bytes;
        if (held != bytes)
            x->stage = (char *)p + held / 2;
    }
    if (tr_alloc_region(a, TR_REGION_WORKSPACE, workspace_bytes, &x->workspace))
        return tr_fail(d, TR_ENOMEM, "%s", tr_alloc_error(a));
    return 0;
}

void tr_exec_free(struct tr_exec *x)
{
    free(x->shadow), free(x->seen);
    x->shadow = x->seen = NULL;
    for (int k = 0; k < TR_NKINDS; k++) {
        if (x->mirror[k] != x->base[k])
            free(x->mirror[k]);
        x->mirror[k] = NULL;
    }
    x->shadow_bytes = 0;
    x->stage = NULL;
    x->nstaged = 0;
}
