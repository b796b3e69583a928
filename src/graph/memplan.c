/* Liveness, then best-fit placement of activations in one arena (memplan.h). */
#include "graph/memplan.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/ops.h"

#define ALIGN 64

/* A pipeline stage's plan: which stage, and what travels between the stages (stages.h). */
struct stage_of { int stage; const struct tr_transfer *t; int nt; };

static size_t align_up(size_t n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

void tr_bind_shapes(const struct tr_graph *g, const struct tr_node *n, int64_t B, int64_t S,
                    struct tr_tensor *in, struct tr_tensor *out)
{
    for (int side = 0; side < 2; side++) {
        const int *vs = side ? n->out : n->in;
        int count = side ? n->nout : n->nin;
        struct tr_tensor *t = side ? out : in;
        for (int i = 0; i < count; i++) {
            const struct tr_value *v = &g->values[vs[i]];
            t[i] = (struct tr_tensor){.dtype = v->dtype, .rank = v->shape.rank};
            for (int d = 0; d < v->shape.rank; d++)
                t[i].dim[d] = tr_dim_eval(v->shape.dim[d], B, S);
        }
    }
}

/* ---- the free list: blocks of the arena not in use, sorted by offset --------------------- */

struct block { size_t offset, size; };

struct arena {
    struct block *free;
    int nfree, cap;
    size_t top;        /* the end of the highest block ever handed out: the arena's size */
};

static void arena_release(struct arena *a, size_t offset, size_t size)
{
    int i = 0;
    while (i < a->nfree && a->free[i].offset < offset)
        i++;
    if (a->nfree == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->free = tr_xrealloc(a->free, (size_t)a->cap * sizeof *a->free);
    }
    memmove(&a->free[i + 1], &a->free[i], (size_t)(a->nfree - i) * sizeof *a->free);
    a->free[i] = (struct block){offset, size};
    a->nfree++;
    /* coalesce with the next block, then with the previous one */
    if (i + 1 < a->nfree && a->free[i].offset + a->free[i].size == a->free[i + 1].offset) {
        a->free[i].size += a->free[i + 1].size;
        memmove(&a->free[i + 1], &a->free[i + 2], (size_t)(a->nfree - i - 2) * sizeof *a->free);
        a->nfree--;
    }
    if (i > 0 && a->free[i - 1].offset + a->free[i - 1].size == a->free[i].offset) {
        a->free[i - 1].size += a->free[i].size;
        memmove(&a->free[i], &a->free[i + 1], (size_t)(a->nfree - i - 1) * sizeof *a->free);
        a->nfree--;
    }
}

/* Best fit: the smallest free block that holds size; else grow the arena at the top (taking
 * a free block that ends there, if any). */
static size_t arena_take(struct arena *a, size_t size)
{
    int best = -1;
    for (int i = 0; i < a->nfree; i++)
        if (a->free[i].size >= size && (best < 0 || a->free[i].size < a->free[best].size))
            best = i;
    if (best < 0) {
        struct block *last = a->nfree ? &a->free[a->nfree - 1] : NULL;
        if (last && last->offset + last->size == a->top) {
            size_t offset = last->offset;
            a->top = offset + size;
            a->nfree--;
            return offset;
        }
        size_t offset = a->top;
        a->top += size;
        return offset;
    }
    size_t offset = a->free[best].offset;
    a->free[best].offset += size;
    a->free[best].size -= size;
    if (a->free[best].size == 0) {
        memmove(&a->free[best], &a->free[best + 1], (size_t)(a->nfree - best - 1) * sizeof *a->free);
        a->nfree--;
    }
    return offset;
}

/* ---- liveness --------------------------------------------------------------------------- */

static void touch(struct tr_memplan *p, int root, int step)
{
    if (p->first[root] < 0 || step < p->first[root])
        p->first[root] = step;
    if (step > p->last[root])
        p->last[root] = step;
}

static void liveness(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n,
                     const int *keep, int nkeep)
{
    for (int v = 0; v < g->nvalues; v++)
        p->first[v] = p->last[v] = p->read_at[v] = -1;
    for (int step = 0; step < n; step++) {
        const struct tr_node *node = &g->nodes[schedule[step]];
        for (int i = 0; i < node->nin; i++) {
            int root = node->in[i] >= 0 ? tr_storage_of(g, node->in[i]) : -1;
            if (root >= 0 && p->read_at[root] < 0 && p->first[root] >= 0 && p->first[root] < step)
                p->read_at[root] = step;
            if (root >= 0)
                touch(p, root, step);
        }
        for (int i = 0; i < node->nout; i++)
            touch(p, tr_storage_of(g, node->out[i]), step);
    }
    for (int i = 0; i < nkeep; i++) {
        int root = tr_storage_of(g, keep[i]);
        if (p->first[root] >= 0)
            p->last[root] = n;
    }
}

/* A pipeline stage's liveness (tr_memplan_build_stage): inputs from step 0, what it receives
 * from the start of the part that reads it, what it sends to the end of the part that makes it
 * (the forward's: into the backward's first step). */
static void stage_liveness(struct tr_memplan *p, const struct tr_graph *g, int n, int stage,
                           const struct tr_transfer *t, int nt)
{
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_INPUT && p->first[v] >= 0)
            p->first[v] = 0;
    for (int i = 0; i < nt; i++) {
        int v = t[i].value, begins = t[i].part == TR_PART_FORWARD ? 0 : p->split;
        /* the forward's sends travel while later micro-batches run: kept, with the micro-batch's
         * stash, until its backward begins (the step.c's waits for them there); the backward's
         * are waited for as its part ends */
        int ends = t[i].part == TR_PART_FORWARD ? (p->split < n ? p->split : n - 1) : n - 1;
        if (t[i].to == stage && p->first[v] >= 0)
            p->first[v] = begins;
        if (t[i].from == stage && p->first[v] >= 0 && p->last[v] < ends)
            p->last[v] = ends;
    }
}

/* Whether a stage keeps v between its forward and its backward (memplan.h: stash). */
static bool stashed(const struct tr_memplan *p, int v)
{
    return p->stash && p->first[v] >= 0 && p->first[v] < p->split && p->last[v] >= p->split;
}

/* The input of an in-place node (ops.c: elementwise, its kernels written to allow it) whose
 * slot its output can take: same size, a plain activation (not a view, not shared by a view)
 * that is last used right here. */
static int in_place_donor(const struct tr_memplan *p, const struct tr_graph *g,
                          const struct tr_node *node, int step, const bool *has_views)
{
    if (!tr_ops[node->op].in_place || node->accumulate || node->nout != 1)
        return -1;
    int out = node->out[0];
    if (g->values[out].view_of >= 0 || has_views[out])
        return -1;
    for (int i = 0; i < node->nin; i++) {
        int v = node->in[i];
        if (v >= 0 && g->values[v].kind == TR_ACT && g->values[v].view_of < 0 && !has_views[v] &&
            p->last[v] == step && p->first[v] < step && p->bytes[v] == p->bytes[out] &&
            g->values[v].dtype == g->values[out].dtype && stashed(p, v) == stashed(p, out))
            return v;
    }
    return -1;
}

/* Each step's list of values (by last step): lists[s][0..count[s]-1]. */
static void list_add(int **lists, int *count, int s, int v)
{
    lists[s] = tr_xrealloc(lists[s], (size_t)(count[s] + 1) * sizeof(int));
    lists[s][count[s]++] = v;
}

/* The values pick(v) takes, by their first step (0 … n) and then by value, a counting sort: the
 * order the arena places them in and the executor prepares them in. *count gets how many. */
static int *by_first_step(const struct tr_memplan *p, const struct tr_graph *g, int n,
                          bool (*pick)(const struct tr_memplan *, const struct tr_graph *, int), int *count)
{
    int *at = tr_xcalloc((size_t)n + 1, sizeof *at);   /* per step, then where its values start */
    *count = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (pick(p, g, v))
            at[p->first[v]]++, (*count)++;
    for (int s = 0, sum = 0; s <= n; s++) {
        int here = at[s];
        at[s] = sum, sum += here;
    }
    int *list = tr_xmalloc((size_t)(*count ? *count : 1) * sizeof *list);
    for (int v = 0; v < g->nvalues; v++)
        if (pick(p, g, v))
            list[at[p->first[v]]++] = v;
    free(at);
    return list;
}

static bool arena_grad(const struct tr_memplan *p, const struct tr_graph *g, int v)
{
    return p->region[v] == TR_ACT && g->values[v].kind == TR_GRAD;
}

static bool gathered_copy(const struct tr_memplan *p, const struct tr_graph *g, int v)
{
    return g->values[v].gathers >= 0 && p->first[v] >= 0;
}

/* grads_in_arena: every gradient from the step the backward first writes it (step 0 for one no
 * node writes) to the schedule's end, listed in p->zero by that step, then by value: the order
 * the arena places them in and the executor zeroes them in. */
static void grads_live(struct tr_memplan *p, const struct tr_graph *g, int n)
{
    for (int v = 0; v < g->nvalues; v++)
        if (arena_grad(p, g, v)) {
            p->first[v] = p->first[v] < 0 ? 0 : p->first[v];
            p->last[v] = n;
        }
    p->zero = by_first_step(p, g, n, arena_grad, &p->nzero);
}

/* gather_ahead: each copy starts where the copies of the run of nodes (of one block, in a row)
 * before its first reader's run start — gathered a block ahead of its use. */
static void gathers_ahead(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n)
{
    int *run = tr_xmalloc((size_t)(n + 1) * sizeof *run), *start = tr_xmalloc((size_t)(n + 1) * sizeof *start);
    for (int s = 0, r = 0; s < n; s++) {
        r += s > 0 && g->nodes[schedule[s]].block != g->nodes[schedule[s - 1]].block;
        run[s] = r, start[s] = -1;   /* start[r]: where run r's copies start, -1: it has none */
    }
    for (int v = 0; v < g->nvalues; v++)
        if (gathered_copy(p, g, v) && (start[run[p->first[v]]] < 0 || p->first[v] < start[run[p->first[v]]]))
            start[run[p->first[v]]] = p->first[v];
    int *ahead = tr_xmalloc((size_t)(n + 1) * sizeof *ahead);
    for (int r = 0, before = -1; r < n; r++) {   /* the run before's start, for each run with copies */
        ahead[r] = before >= 0 ? before : start[r];
        if (start[r] >= 0)
            before = start[r];
    }
    for (int v = 0; v < g->nvalues; v++)
        if (gathered_copy(p, g, v))
            p->first[v] = ahead[run[p->first[v]]];
    free(run), free(start), free(ahead);
}

/* The gather pass's copies by their first step, then by value, in p->gather; p->gather_at. */
static void gathers_listed(struct tr_memplan *p, const struct tr_graph *g, int n)
{
    p->gather = by_first_step(p, g, n, gathered_copy, &p->ngather);
    p->gather_at = tr_xmalloc((size_t)(g->nvalues ? g->nvalues : 1) * sizeof *p->gather_at);
    for (int v = 0; v < g->nvalues; v++)
        p->gather_at[v] = -1;
    for (int c = 0; c < p->ngather; c++)
        p->gather_at[p->gather[c]] = c;
}

/* A stage's arena values no node of its writes — its inputs, what it receives — by their first
 * step (the start of the part that reads them), −1 after the last; *count 0. */
static int *given_values(const struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n,
                         const struct stage_of *stage, int *count)
{
    bool *made = tr_xcalloc((size_t)g->nvalues + 1, 1);
    for (int step = 0; step < n; step++)
        for (int i = 0; i < g->nodes[schedule[step]].nout && !tr_op_is_view(g->nodes[schedule[step]].op); i++)
            made[tr_storage_of(g, g->nodes[schedule[step]].out[i])] = true;   /* a view makes nothing */
    for (int i = 0; i < stage->nt; i++)   /* received: given, though its nodes may add into it */
        if (stage->t[i].to == stage->stage)
            made[stage->t[i].value] = false;
    int *list = tr_xmalloc((size_t)(g->nvalues + 1) * sizeof *list), k = 0;
    for (int step = 0; step <= n; step++)   /* few distinct first steps (0, split): a scan each is cheap */
        for (int v = 0; v < g->nvalues && (step == 0 || step == p->split); v++)
            if (!made[v] && p->region[v] == TR_ACT && g->values[v].view_of < 0 && p->first[v] == step)
                list[k++] = v;
    list[k] = -1;
    free(made);
    *count = 0;
    return list;
}

static void place_arena(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n,
                        const struct stage_of *stage)
{
    struct arena a = {0}, kept = {0};   /* kept: a stage's stash */
    bool *has_views = tr_xcalloc((size_t)g->nvalues, 1);
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].view_of >= 0)
            has_views[g->values[v].view_of] = true;
    int **dying = tr_xcalloc((size_t)n + 1, sizeof *dying);
    int *ndying = tr_xcalloc((size_t)n + 1, sizeof *ndying);
    if (p->grads_in_arena)
        grads_live(p, g, n);
    if (g->gather_ahead)
        gathers_ahead(p, g, schedule, n);
    gathers_listed(p, g, n);
    int next = 0, *given = stage ? given_values(p, g, schedule, n, stage, &next) : NULL;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_ACT && g->values[v].view_of < 0 && p->first[v] >= 0)
            list_add(dying, ndying, p->last[v], v);
    size_t live = 0;
    p->live = tr_xcalloc((size_t)(n ? n : 1), sizeof *p->live);
    for (int step = 0, z = 0, c = 0; step < n; step++) {
        const struct tr_node *node = &g->nodes[schedule[step]];
        int donor = in_place_donor(p, g, node, step, has_views);
        for (; z < p->nzero && p->first[p->zero[z]] == step; z++) {   /* gradients: to the end, never released */
            p->offset[p->zero[z]] = (int64_t)arena_take(&a, p->bytes[p->zero[z]]);
            live += p->bytes[p->zero[z]];
        }
        for (; c < p->ngather && p->first[p->gather[c]] == step; c++) {   /* copies: filled before their reader */
            p->offset[p->gather[c]] = (int64_t)arena_take(&a, p->bytes[p->gather[c]]);
            live += p->bytes[p->gather[c]];
        }
        for (; given && given[next] >= 0 && p->first[given[next]] == step; next++) {   /* a stage's: written before its part */
            int v = given[next];
            p->offset[v] = (int64_t)arena_take(stashed(p, v) ? &kept : &a, p->bytes[v]);
            live += p->bytes[v];
        }
        for (int i = 0; i < node->nout; i++) {
            int v = node->out[i];
            if (g->values[v].kind != TR_ACT || g->values[v].view_of >= 0 || p->first[v] != step)
                continue;
            if (donor >= 0) {
                p->offset[v] = p->offset[donor];
                p->offset[donor] = -2;   /* its slot moved on: not released below */
            } else {
                p->offset[v] = (int64_t)arena_take(stashed(p, v) ? &kept : &a, p->bytes[v]);
                live += p->bytes[v];
            }
        }
        p->live[step] = live;
        if (live > p->arena_live_peak)
            p->arena_live_peak = live;
        for (int i = 0; i < ndying[step]; i++) {
            int v = dying[step][i];
            if (p->offset[v] == -2) {
                p->offset[v] = p->offset[node->out[0]];   /* shared with its in-place heir */
                continue;
            }
            arena_release(stashed(p, v) ? &kept : &a, (size_t)p->offset[v], p->bytes[v]);
            live -= p->bytes[v];
        }
    }
    p->stash_at = (int64_t)a.top, p->stash_bytes = kept.top;
    for (int v = 0; v < g->nvalues; v++)   /* the stash after the rest */
        if (p->stash && p->stash[v] && p->offset[v] >= 0)
            p->offset[v] += p->stash_at;
    p->region_bytes[TR_ACT] = a.top + kept.top;
    for (int s = 0; s <= n; s++)
        free(dying[s]);
    free(dying), free(ndying), free(has_views), free(a.free), free(kept.free), free(given);
}

static void place_persistent(struct tr_memplan *p, const struct tr_graph *g)
{
    for (int v = 0; v < g->nvalues; v++) {
        enum tr_value_kind k = (enum tr_value_kind)p->region[v];
        if (k == TR_ACT || g->values[v].view_of >= 0 || (p->staged && p->first[v] < 0))
            continue;   /* a stage's: only what its nodes use */
        p->offset[v] = (int64_t)p->region_bytes[k];
        p->region_bytes[k] += p->bytes[v];
    }
}

static int build(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n, int64_t B, int64_t S,
                 const int *keep, int nkeep, tr_workspace_fn workspace, bool grads_in_arena, int split,
                 const struct stage_of *stage)
{
    memset(p, 0, sizeof *p);
    p->B = B, p->S = S;
    p->split = split;
    p->staged = stage != NULL;
    p->nvalues = g->nvalues;
    p->grads_in_arena = grads_in_arena && n > 0;
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1);
    p->offset = tr_xmalloc(nv * sizeof *p->offset);
    p->bytes = tr_xmalloc(nv * sizeof *p->bytes);
    p->first = tr_xmalloc(nv * sizeof *p->first);
    p->last = tr_xmalloc(nv * sizeof *p->last);
    p->read_at = tr_xmalloc(nv * sizeof *p->read_at);
    p->region = tr_xmalloc(nv * sizeof *p->region);
    for (int v = 0; v < g->nvalues; v++) {
        const struct tr_value *val = &g->values[v];
        p->offset[v] = -1;
        p->bytes[v] = align_up((size_t)tr_dim_eval(tr_shape_numel(&val->shape), B, S) * tr_dtype_size(val->dtype));
        p->region[v] = (signed char)((p->grads_in_arena && val->kind == TR_GRAD) || (stage && val->kind == TR_INPUT)
                                         ? TR_ACT : tr_region_kind(val->kind));
        if (p->region[v] == TR_ACT && val->view_of < 0)
            p->arena_sum += p->bytes[v];
    }
    liveness(p, g, schedule, n, keep, nkeep);
    if (stage)
        stage_liveness(p, g, n, stage->stage, stage->t, stage->nt);
    if (stage && split < n) {
        p->stash = tr_xcalloc(nv, 1);
        for (int v = 0; v < g->nvalues; v++)
            p->stash[v] = p->region[v] == TR_ACT && g->values[v].view_of < 0 && stashed(p, v);
    }
    place_arena(p, g, schedule, n, stage);
    place_persistent(p, g);
    for (int v = 0; v < g->nvalues; v++)   /* views live where their storage does */
        if (g->values[v].view_of >= 0)
            p->offset[v] = p->offset[g->values[v].view_of];
    for (int step = 0; workspace && step < n; step++) {
        const struct tr_node *node = &g->nodes[schedule[step]];
        struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
        tr_bind_shapes(g, node, B, S, in, out);
        size_t w = workspace(node, in, out);
        if (w > p->workspace_bytes)
            p->workspace_bytes = align_up(w);
    }
    return 0;
}

int tr_memplan_build(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n,
                     int64_t B, int64_t S, const int *keep, int nkeep, tr_workspace_fn workspace,
                     bool grads_in_arena)
{
    return build(p, g, schedule, n, B, S, keep, nkeep, workspace, grads_in_arena, 0, NULL);
}

int tr_memplan_build_stage(struct tr_memplan *p, const struct tr_graph *g, const int *schedule, int n, int split,
                           int stage, const struct tr_transfer *transfers, int ntransfers, int64_t B, int64_t S,
                           const int *keep, int nkeep, tr_workspace_fn workspace)
{
    const struct stage_of of = {stage, transfers, ntransfers};
    return build(p, g, schedule, n, B, S, keep, nkeep, workspace, false, split, &of);
}

void tr_memplan_free(struct tr_memplan *p)
{
    free(p->offset), free(p->bytes), free(p->first), free(p->last), free(p->read_at), free(p->region), free(p->zero), free(p->gather), free(p->gather_at), free(p->live), free(p->stash);
    memset(p, 0, sizeof *p);
}

int *tr_last_touch(const struct tr_graph *g, const int *schedule, int n, enum tr_value_kind kind)
{
    int *last = tr_xmalloc(((size_t)g->nvalues + 1) * sizeof *last);
    for (int v = 0; v < g->nvalues; v++)
        last[v] = -1;
    for (int step = 0; step < n; step++) {
        const struct tr_node *node = &g->nodes[schedule[step]];
        for (int i = 0; i < node->nin + node->nout; i++) {
            int v = i < node->nin ? node->in[i] : node->out[i - node->nin];
            while (v >= 0 && g->values[v].view_of >= 0)
                v = g->values[v].view_of;
            if (v >= 0 && g->values[v].kind == kind)
                last[v] = step;
        }
    }
    return last;
}
