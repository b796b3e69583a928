/* The pipeline's split (stages.h). */
#include "graph/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/memplan.h"
#include "graph/ops.h"

static int stage_of_block(const struct tr_stages *st, int b)
{
    int s = 0;
    while (s + 1 < st->count && b >= st->first_block[s + 1])
        s++;
    return s;
}

static uint64_t lowest(uint64_t m)
{
    return m & (~m + 1);
}

static int refuse(const struct tr_graph *g, struct tr_stages *st, const char *what, int v)
{
    struct tr_graph *w = (struct tr_graph *)g;   /* the sentence only */
    snprintf(w->message, sizeof w->message, "pipeline: value %d (%s) %s", v, g->values[v].name, what);
    tr_stages_free(st);
    return TR_EINVAL;
}

/* Each forward node's stages: its block's; outside the blocks, its readers' — all of them for a
 * node that reads parameters and inputs alone, else the first (later ones receive its output). */
static void forward_stages(const struct tr_stages *st, const struct tr_graph *g, const int *schedule, int n,
                           uint64_t *mask)
{
    bool *param_only = tr_xcalloc((size_t)g->nnodes + 1, 1);
    uint64_t *readers = tr_xcalloc((size_t)g->nvalues + 1, sizeof *readers);
    for (int i = 0; i < n; i++) {
        const struct tr_node *node = &g->nodes[schedule[i]];
        bool only = node->phase == TR_FORWARD;
        for (int j = 0; j < node->nin && only; j++) {
            const struct tr_value *v = &g->values[node->in[j]];
            only = v->kind != TR_ACT || (v->producer >= 0 && param_only[v->producer]);
        }
        param_only[schedule[i]] = only;
    }
    for (int i = n - 1; i >= 0; i--) {
        int k = schedule[i];
        const struct tr_node *node = &g->nodes[k];
        if (node->phase != TR_FORWARD)
            continue;
        uint64_t m = 0;
        if (node->block >= 0) {
            m = 1ull << stage_of_block(st, node->block);
        } else {
            for (int j = 0; j < node->nout; j++)
                m |= readers[node->out[j]];
            if (!m)   /* read by nothing: the loss, the logits */
                m = 1ull << (st->count - 1);
            if (!param_only[k])
                m = lowest(m);
        }
        mask[k] = m;
        for (int j = 0; j < node->nin; j++)
            readers[node->in[j]] |= m;
    }
    free(param_only), free(readers);
}

int tr_stages_split(struct tr_stages *st, const struct tr_graph *g, const int *schedule, int n, int count,
                    const int *first_block)
{
    memset(st, 0, sizeof *st);
    if (count < 1 || count > TR_MAX_STAGES) {
        snprintf(((struct tr_graph *)g)->message, sizeof g->message, "pipeline: %d stages (1 … %d)", count,
                 TR_MAX_STAGES);
        return TR_EINVAL;
    }
    int *order = NULL;
    if (!schedule) {   /* creation order */
        order = tr_xmalloc((size_t)(n ? n : 1) * sizeof *order);
        for (int i = 0; i < n; i++)
            order[i] = i;
        schedule = order;
    }
    st->count = count;
    memcpy(st->first_block, first_block, (size_t)(count + 1) * sizeof *first_block);
    uint64_t *mask = tr_xcalloc((size_t)g->nnodes + 1, sizeof *mask);
    forward_stages(st, g, schedule, n, mask);
    for (int i = 0; i < n; i++) {   /* backward and recomputation: their forward's */
        int k = schedule[i];
        const struct tr_node *node = &g->nodes[k];
        if (node->phase != TR_FORWARD)
            mask[k] = node->block >= 0 ? 1ull << stage_of_block(st, node->block)
                      : node->origin >= 0 ? mask[node->origin] : 1ull << (count - 1);
    }
    /* who makes each value (its first writer, not adding into it), and in which part; a stage that
     * adds into a value another made (a gradient flowing down a pre-LN model's residual stream)
     * reads it: it is sent there, and added into on arrival */
    uint64_t *writers = tr_xcalloc((size_t)g->nvalues + 1, sizeof *writers), *to = tr_xcalloc((size_t)g->nvalues + 1, sizeof *to);
    uint64_t *adders = tr_xcalloc((size_t)g->nvalues + 1, sizeof *adders);
    uint8_t *part = tr_xcalloc((size_t)g->nvalues + 1, 1);
    int rc = 0, bad = -1;
    const char *why = NULL;
    for (int i = 0; i < n && !rc; i++) {
        const struct tr_node *node = &g->nodes[schedule[i]];
        for (int j = 0; j < node->nout && !tr_op_is_view(node->op); j++) {   /* a view writes nothing */
            int v = tr_storage_of(g, node->out[j]);
            if (node->accumulate) {
                adders[v] |= mask[schedule[i]];
                continue;
            }
            if (g->values[v].kind == TR_ACT && writers[v] && writers[v] != mask[schedule[i]])
                rc = TR_EINVAL, bad = v, why = "would be written on two stages";
            writers[v] |= mask[schedule[i]];
            part[v] = node->phase == TR_FORWARD ? TR_PART_FORWARD : TR_PART_BACKWARD;
        }
    }
    for (int i = 0; i < n && !rc; i++) {   /* what each stage reads that it does not make */
        const struct tr_node *node = &g->nodes[schedule[i]];
        for (int j = 0; j < node->nin; j++) {
            int v = tr_storage_of(g, node->in[j]);
            if (g->values[v].kind == TR_ACT)
                to[v] |= mask[schedule[i]] & ~writers[v];
        }
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind == TR_ACT)
            to[v] |= adders[v] & ~writers[v];
        else
            writers[v] |= adders[v];   /* a weight's gradient: each stage's part (shared below) */
    }
    for (int v = 0; v < g->nvalues && !rc; v++) {
        if (!to[v])
            continue;
        if (__builtin_popcountll(writers[v]) != 1) {
            rc = TR_EINVAL, bad = v, why = "is read on a stage that does not make it, and made on several";
            break;
        }
        /* the stages that write it, the maker first: each reader takes it from the nearest of them
         * on the side it comes from (the forward's from below, the backward's from above), so that
         * what each adds reaches the stages after it */
        uint64_t chain = writers[v] | (g->values[v].kind == TR_ACT ? adders[v] : 0);
        int maker = __builtin_ctzll(writers[v]);
        for (uint64_t m = to[v]; m; m &= m - 1) {
            int t = __builtin_ctzll(m), from = -1;
            for (int k = 0; k < st->count; k++)
                if (chain >> k & 1 && (part[v] == TR_PART_FORWARD ? k < t : k > t) &&
                    (from < 0 || (part[v] == TR_PART_FORWARD ? k > from : k < from)))
                    from = k;
            if (from < 0 || (part[v] == TR_PART_FORWARD) != (t > maker)) {
                rc = TR_EINVAL, bad = v, why = "would travel against its pass's direction";
                break;
            }
            st->transfers = tr_xrealloc(st->transfers, (size_t)(st->ntransfers + 1) * sizeof *st->transfers);
            st->transfers[st->ntransfers++] = (struct tr_transfer){v, from, t, part[v]};
        }
    }
    for (int v = 0; v < g->nvalues && !rc; v++)   /* weights two stages read: their gradients summed */
        if (g->values[v].kind == TR_PARAM && g->values[v].grad >= 0 &&
            __builtin_popcountll(writers[g->values[v].grad]) > 1) {
            st->shared = tr_xrealloc(st->shared, (size_t)(st->nshared + 1) * sizeof *st->shared);
            st->shared_on = tr_xrealloc(st->shared_on, (size_t)(st->nshared + 1) * sizeof *st->shared_on);
            st->shared_on[st->nshared] = writers[g->values[v].grad];
            st->shared[st->nshared++] = v;
        }
    st->stage = tr_xcalloc((size_t)count, sizeof *st->stage);
    for (int s = 0; s < count && !rc; s++) {
        struct tr_stage *one = &st->stage[s];
        one->schedule = tr_xmalloc((size_t)(n ? n : 1) * sizeof *one->schedule);
        one->split = -1;
        for (int i = 0; i < n; i++) {
            const struct tr_node *node = &g->nodes[schedule[i]];
            if (!(mask[schedule[i]] >> s & 1))
                continue;
            if (node->phase != TR_FORWARD && one->split < 0)
                one->split = one->n;
            if (node->phase == TR_FORWARD && one->split >= 0)
                rc = TR_EINVAL, bad = node->out[0], why = "is made by a forward node after the backward began";
            one->schedule[one->n++] = schedule[i];
        }
        if (one->split < 0)
            one->split = one->n;
    }
    free(mask), free(writers), free(to), free(part), free(order), free(adders);
    return rc ? refuse(g, st, why, bad) : 0;
}

bool tr_stages_holds(const struct tr_stages *st, const struct tr_graph *g, int s, int v)
{
    const struct tr_stage *one = &st->stage[s];
    for (int i = 0; i < one->n; i++) {
        const struct tr_node *node = &g->nodes[one->schedule[i]];
        for (int j = 0; j < node->nin; j++)
            if (tr_storage_of(g, node->in[j]) == v)
                return true;
        for (int j = 0; j < node->nout; j++)
            if (tr_storage_of(g, node->out[j]) == v)
                return true;
    }
    return false;
}

int tr_stages_holder(const struct tr_stages *st, const struct tr_graph *g, int v)
{
    for (int s = 0; s < st->count; s++)
        if (tr_stages_holds(st, g, s, v))
            return s;
    return -1;
}

void tr_stages_free(struct tr_stages *st)
{
    for (int s = 0; st->stage && s < st->count; s++)
        free(st->stage[s].schedule);
    free(st->stage), free(st->transfers), free(st->shared), free(st->shared_on);
    memset(st, 0, sizeof *st);
}

void tr_stages_balance(const double *weight, int nblocks, double before, double after, int count, int *first_block)
{
    /* cost[s][i]: the lightest heaviest stage dealing blocks 0 … i − 1 to stages 0 … s, one block
     * each at least (−1: impossible), and among deals as light, the least sum of squares (the most
     * even); cut[s][i]: where stage s then begins */
    int cols = nblocks + 1;
    double *prefix = tr_xcalloc((size_t)cols, sizeof *prefix);
    for (int b = 0; b < nblocks; b++)
        prefix[b + 1] = prefix[b] + (weight ? weight[b] : 1.0);
    double *cost = tr_xmalloc((size_t)(count * cols) * sizeof *cost), *squares = tr_xcalloc((size_t)(count * cols), sizeof *squares);
    int *cut = tr_xcalloc((size_t)(count * cols), sizeof *cut);
    for (int s = 0; s < count; s++)
        for (int i = 0; i <= nblocks; i++) {
            double tail = s == count - 1 ? after : 0, best = -1, even = 0;
            if (s == 0) {
                best = i >= 1 || nblocks == 0 ? prefix[i] + before + tail : -1;
                even = best * best;
            } else {
                for (int c = s; c < i; c++) {
                    double earlier = cost[(s - 1) * cols + c], own = prefix[i] - prefix[c] + tail;
                    double worst = earlier > own ? earlier : own, sq = squares[(s - 1) * cols + c] + own * own;
                    bool tie = best >= 0 && worst <= best * (1 + 1e-12) && worst >= best * (1 - 1e-12);
                    if (earlier >= 0 && (best < 0 || (tie ? sq < even : worst < best)))
                        best = worst, even = sq, cut[s * cols + i] = c;
                }
            }
            cost[s * cols + i] = best, squares[s * cols + i] = even;
        }
    first_block[count] = nblocks;
    for (int s = count - 1, i = nblocks; s >= 0; s--)
        i = first_block[s] = s ? cut[s * cols + i] : 0;
    free(prefix), free(cost), free(squares), free(cut);
}
