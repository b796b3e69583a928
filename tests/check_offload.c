/* The offload pass (src/graph/offload.c) and the executor's copies (src/backend/exec.c): small
 * MLP and GPT models with dropout, built by the real builders. The pass must put an OFFLOAD,
 * an OFFLOAD_WAIT and a RELOAD in place for each value it sends, leave the backward reading
 * only the copies, shrink the arena, size the host ring by the values sent, and change no bit
 * of the loss or the gradients: on the plain CPU in debug mode (a dead slot is poisoned, so a read of a
 * freed original shows) and on the fenced CPU, whose copies wait on its queue until a join. */
#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "graph/program.h"
#include "models/models.h"

#define B 3
#define S 7
#define VOCAB 50
#define FEATURES 12

/* A model built, differentiated and (maybe) offloaded, with its program. */
struct built {
    struct tr_recipe r;
    struct tr_graph g;
    struct tr_model m;
    struct tr_program p;
    int scale;       /* the loss scale input */
    int offloaded;   /* tr_offload's count; -1: the pass not run */
    int keep[2];
};

/* What one training step left behind. */
struct outcome {
    char *grads;     /* every parameter's gradient, in value order */
    size_t grad_bytes;
    float loss;
    uint64_t sent, back;   /* the executor's copy counters */
};

static uint64_t draw(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static float uniform(uint64_t *s, float scale)
{
    return scale * (2.0f * (float)(draw(s) >> 40) / 16777216.0f - 1.0f);
}

static size_t value_bytes(const struct tr_graph *g, int v)
{
    return (size_t)tr_dim_eval(tr_shape_numel(&g->values[v].shape), B, S) * tr_dtype_size(g->values[v].dtype);
}

static void build(struct built *b, enum tr_arch arch, int layers, double dropout, bool offload)
{
    memset(b, 0, sizeof *b);
    tr_recipe_init(&b->r);
    b->r.model.arch = arch;
    b->r.model.layers = layers, b->r.model.hidden = 16, b->r.model.heads = 2, b->r.model.ffn = 32;
    b->r.model.max_len = 16, b->r.model.dropout = dropout;
    tr_graph_init(&b->g);
    int64_t features[1] = {FEATURES};
    bool text = arch != TR_ARCH_MLP;
    tr_model_build(&b->g, &b->r, text ? 0 : 1, text ? NULL : features, 3, text ? VOCAB : 0, 1, &b->m);
    b->scale = tr_autodiff(&b->g);
    ck_assert_msg(b->scale >= 0, "%s", b->g.message);
    b->keep[0] = b->m.loss, b->keep[1] = b->m.logits >= 0 ? b->m.logits : b->m.rank;
    b->offloaded = offload ? tr_offload(&b->g, b->keep, 2, (struct tr_offload_grain){0}) : -1;
    ck_assert_msg(b->offloaded >= -1 && !b->g.error, "%s", b->g.message);
}

static void plan(struct built *b)
{
    ck_assert_int_eq(tr_program_plan(&b->p, &b->g, &(struct tr_bucket){B, S}, 1, b->keep, 2,
                                     tr_cpu_ops.workspace_bytes, false), 0);
}

static void built_free(struct built *b)
{
    tr_program_free(&b->p);
    tr_graph_free(&b->g);
    tr_recipe_free(&b->r);
}

/* The node of op that reads value v; -1 when none, -2 when several. */
static int node_of(const struct tr_graph *g, enum tr_op op, int v)
{
    int found = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const struct tr_node *n = &g->nodes[i];
        if (n->op == op && n->in[0] == v)
            found = found == -1 ? i : -2;
    }
    return found;
}

/* The first node not of the forward that reads v's storage (-1: none). */
static int first_backward_reader(const struct tr_graph *g, int v)
{
    for (int i = 0; i < g->nnodes; i++) {
        const struct tr_node *n = &g->nodes[i];
        for (int j = 0; n->phase != TR_FORWARD && j < n->nin; j++)
            if (n->in[j] >= 0 && tr_storage_of(g, n->in[j]) == v)
                return i;
    }
    return -1;
}

/* Each OFFLOAD x → h has one OFFLOAD_WAIT of x after it and one RELOAD h → y before y's first
 * backward reader; after the pass no backward node reads x. Returns the OFFLOADs. */
static int check_copies(const struct tr_graph *g, const char *model)
{
    int offloads = 0, waits = 0, reloads = 0, host_values = 0;
    for (int i = 0; i < g->nnodes; i++) {
        offloads += g->nodes[i].op == TR_OP_OFFLOAD;
        waits += g->nodes[i].op == TR_OP_OFFLOAD_WAIT;
        reloads += g->nodes[i].op == TR_OP_RELOAD;
    }
    for (int v = 0; v < g->nvalues; v++)
        host_values += g->values[v].kind == TR_HOST;
    ck_assert_msg(waits == offloads && reloads == offloads && host_values == offloads,
                  "%s: %d offloads, %d waits, %d reloads, %d host values", model, offloads, waits, reloads,
                  host_values);
    for (int i = 0; i < g->nnodes; i++) {
        const struct tr_node *n = &g->nodes[i];
        if (n->op != TR_OP_OFFLOAD)
            continue;
        int x = n->in[0], h = n->out[0];
        ck_assert_int_eq(g->values[h].kind, TR_HOST);
        ck_assert_int_eq(g->values[x].kind, TR_ACT);
        ck_assert_int_eq(n->phase, TR_FORWARD);
        int wait = node_of(g, TR_OP_OFFLOAD_WAIT, x), reload = node_of(g, TR_OP_RELOAD, h);
        ck_assert_msg(wait > i, "%s: value %d: wait at %d, offload at %d", model, x, wait, i);
        ck_assert_msg(reload > wait, "%s: value %d: reload at %d, wait at %d", model, x, reload, wait);
        ck_assert_int_eq(g->nodes[reload].phase, TR_BACKWARD);
        for (int j = i + 1; j < g->nnodes; j++)   /* no forward reader after it is sent */
            for (int k = 0; g->nodes[j].phase == TR_FORWARD && g->nodes[j].op != TR_OP_OFFLOAD_WAIT &&
                            k < g->nodes[j].nin; k++)
                ck_assert_msg(g->nodes[j].in[k] < 0 || tr_storage_of(g, g->nodes[j].in[k]) != x,
                              "%s: node %d (%s) reads value %d after its offload", model, j,
                              tr_op_name(g->nodes[j].op), x);
        int stale = first_backward_reader(g, x);
        ck_assert_msg(stale < 0, "%s: node %d (%s) reads the offloaded value %d, not its reload", model, stale,
                      stale >= 0 ? tr_op_name(g->nodes[stale].op) : "", x);
        int y = g->nodes[reload].out[0], reader = first_backward_reader(g, y);
        ck_assert_msg(reader > reload, "%s: value %d: reloaded at %d, first read at %d", model, x, reload, reader);
    }
    return offloads;
}

/* Regions from the plain CPU's heap, or from a fenced instance: its memory for the device's,
 * its host memory for the host ring. */
static void take_regions(struct tr_exec *x, const struct tr_program *p, const struct tr_backend *be, bool fenced)
{
    for (int k = 0; k < TR_NKINDS; k++) {
        const struct tr_memory_ops *mem = k == TR_HOST ? be->host_memory : be->memory;
        x->base[k] = fenced ? mem->alloc(p->region_bytes[k] + 64, mem->ctx) : calloc(p->region_bytes[k] + 64, 1);
        ck_assert_ptr_nonnull(x->base[k]);
    }
    x->workspace = fenced ? be->memory->alloc(p->workspace_bytes + 64, be->memory->ctx)
                          : calloc(p->workspace_bytes + 64, 1);
    ck_assert_ptr_nonnull(x->workspace);
}

static void give_regions(struct tr_exec *x, const struct tr_backend *be, bool fenced)
{
    for (int k = 0; k < TR_NKINDS; k++) {
        const struct tr_memory_ops *mem = k == TR_HOST ? be->host_memory : be->memory;
        if (fenced)
            mem->free(x->base[k], mem->ctx);
        else
            free(x->base[k]);
    }
    if (fenced)
        be->memory->free(x->workspace, be->memory->ctx);
    else
        free(x->workspace);
}

/* v's bytes, written through the backend: fenced memory is not the host's to touch. */
static void put(struct tr_exec *x, int v, const void *host)
{
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_write(x, v, host, value_bytes(x->g, v), &why) == 0, "%s", tr_diag_last(&why));
}

/* Parameters, state and inputs, the same bits for the same model whatever was offloaded: the
 * pass adds its values after the builder's. */
static void feed(struct tr_exec *x, const struct built *b)
{
    const struct tr_graph *g = &b->g;
    uint64_t seed = 0x5eed;
    for (int v = 0; v < g->nvalues; v++) {
        enum tr_value_kind kind = g->values[v].kind;
        if (v == b->scale || (kind != TR_PARAM && kind != TR_STATE && kind != TR_INPUT))
            continue;
        size_t n = value_bytes(g, v) / tr_dtype_size(g->values[v].dtype);
        void *host = calloc(n + 1, 4);
        if (g->values[v].dtype == TR_F32)
            for (size_t i = 0; i < n; i++)
                ((float *)host)[i] = uniform(&seed, kind == TR_INPUT ? 1 : 0.3f);
        if (v == b->m.ids || v == b->m.y)
            for (size_t i = 0; i < n; i++)
                ((int32_t *)host)[i] = (int32_t)(draw(&seed) % (v == b->m.y && b->m.ids < 0 ? 3 : VOCAB));
        if (v == b->m.positions)
            for (size_t i = 0; i < n; i++)
                ((int32_t *)host)[i] = (int32_t)(i % S);
        if (v == b->m.mask)   /* padding in the last row */
            for (size_t i = 0; i < n; i++)
                ((uint8_t *)host)[i] = !(i / S == B - 1 && i % S >= S - 2);
        put(x, v, host);
        free(host);
    }
    float one = 1;
    put(x, b->scale, &one);
}

/* One forward and backward of b on be (fenced: its regions its own), debug mode on the plain
 * CPU: each copy at once, a dead slot poisoned. */
static struct outcome step_on(const struct built *b, const struct tr_backend *be, bool fenced)
{
    const struct tr_graph *g = &b->g;
    struct tr_rng_ctx rng = {.seed = 7, .step = 3};
    struct tr_exec x = {.g = g, .schedule = b->p.schedule, .n = b->p.n, .plan = &b->p.plans[0], .be = be,
                        .rng = &rng, .debug = !fenced};
    take_regions(&x, &b->p, be, fenced);
    feed(&x, b);
    struct tr_diag why = {0};
    ck_assert_msg(tr_exec_run(&x, B, S, &why) == 0, "%s", tr_diag_last(&why));
    struct outcome o = {.sent = x.copies.sent, .back = x.copies.back};
    ck_assert_int_eq(tr_exec_read(&x, b->m.loss, &o.loss, sizeof o.loss, &why), 0);
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == TR_PARAM)
            o.grad_bytes += value_bytes(g, g->values[v].grad);
    o.grads = malloc(o.grad_bytes + 1);
    size_t at = 0;
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind != TR_PARAM)
            continue;
        int grad = g->values[v].grad;
        ck_assert_int_eq(tr_exec_read(&x, grad, o.grads + at, value_bytes(g, grad), &why), 0);
        at += value_bytes(g, grad);
    }
    ck_assert_msg(o.loss == o.loss, "the loss is NaN: a dead value was read");
    give_regions(&x, be, fenced);
    tr_exec_free(&x);
    return o;
}

static void assert_same(const struct outcome *want, const struct outcome *got, const char *what)
{
    ck_assert_msg(got->grad_bytes == want->grad_bytes, "%s: %zu gradient bytes, %zu without", what,
                  got->grad_bytes, want->grad_bytes);
    size_t at = 0;
    while (at < want->grad_bytes && want->grads[at] == got->grads[at])
        at++;
    ck_assert_msg(at == want->grad_bytes, "%s: gradients differ from byte %zu (float %zu)", what, at, at / 4);
    ck_assert_msg(memcmp(&want->loss, &got->loss, sizeof got->loss) == 0, "%s: loss %.9g, %.9g without", what,
                  (double)got->loss, (double)want->loss);
}

/* Offloaded against not: the copies in place, a smaller arena, a host ring of the host values'
 * bytes, and the same bits on the plain CPU and behind the fence. */
static void check_model(enum tr_arch arch, const char *model)
{
    struct built plain, off;
    build(&plain, arch, 3, 0.1, false);
    build(&off, arch, 3, 0.1, true);
    ck_assert_int_ge(tr_graph_blocks(&off.g), 3);
    ck_assert_msg(off.offloaded > 0, "%s: nothing offloaded", model);
    ck_assert_int_eq(check_copies(&off.g, model), off.offloaded);
    plan(&plain), plan(&off);

    const struct tr_memplan *mp = &off.p.plans[0];
    size_t host = 0, moved = 0;
    for (int v = 0; v < off.g.nvalues; v++)
        if (off.g.values[v].kind == TR_HOST)
            host += mp->bytes[v], moved += value_bytes(&off.g, v);
    size_t arena = plain.p.region_bytes[TR_ACT], arena_off = off.p.region_bytes[TR_ACT];
    ck_assert_msg(arena_off < arena, "%s: arena %zu bytes offloaded, %zu without", model, arena_off, arena);
    ck_assert_uint_eq(mp->region_bytes[TR_HOST], host);
    ck_assert_uint_eq(off.p.region_bytes[TR_HOST], host);
    ck_assert_uint_eq(plain.p.region_bytes[TR_HOST], 0);

    struct outcome want = step_on(&plain, tr_backend_cpu(), false);
    struct outcome cpu = step_on(&off, tr_backend_cpu(), false);
    char what[96];
    snprintf(what, sizeof what, "%s offloaded, plain CPU", model);
    assert_same(&want, &cpu, what);
    ck_assert_uint_eq(cpu.sent, moved);
    ck_assert_uint_eq(cpu.back, moved);

    struct tr_backend *be = NULL;
    struct tr_diag why = {0};
    ck_assert_msg(tr_backend_open_ops(&tr_cpu_fenced_ops, 0, &be, &why) == 0, "%s", tr_diag_last(&why));
    ck_assert(tr_backend_copies_ahead(be));
    struct outcome fenced = step_on(&off, be, true);
    tr_backend_close(be);
    snprintf(what, sizeof what, "%s offloaded, fenced CPU", model);
    assert_same(&want, &fenced, what);
    ck_assert_uint_eq(fenced.sent, moved);
    ck_assert_uint_eq(fenced.back, moved);
    printf("%s: %d offloaded; arena %zu bytes, %zu without; host ring %zu bytes; the same gradients\n", model,
           off.offloaded, arena_off, arena, host);
    free(want.grads), free(cpu.grads), free(fenced.grads);
    built_free(&plain), built_free(&off);
}

START_TEST(mlp_offloaded_same_gradients) { check_model(TR_ARCH_MLP, "mlp"); }
END_TEST

START_TEST(gpt_offloaded_same_gradients) { check_model(TR_ARCH_GPT, "gpt"); }
END_TEST

/* One step of b on the plain CPU and behind the fence: both the same bytes as want. */
static void same_on_both(const struct outcome *want, struct built *b, const char *what)
{
    char where[160];
    struct outcome cpu = step_on(b, tr_backend_cpu(), false);
    snprintf(where, sizeof where, "%s, plain CPU", what);
    assert_same(want, &cpu, where);
    struct tr_backend *be = NULL;
    struct tr_diag why = {0};
    ck_assert_msg(tr_backend_open_ops(&tr_cpu_fenced_ops, 0, &be, &why) == 0, "%s", tr_diag_last(&why));
    struct outcome fenced = step_on(b, be, true);
    tr_backend_close(be);
    snprintf(where, sizeof where, "%s, fenced CPU", what);
    assert_same(want, &fenced, where);
    free(cpu.grads), free(fenced.grads);
}

/* A grain (the planner's): the activations made before block 1's forward (the embeddings' and
 * block 0's) alone — fewer than every block's, none made later — and the same gradients as
 * without, on the plain CPU and behind the fence; a grain of every block is every block's. */
START_TEST(first_block_offloaded)
{
    struct built plain, all, one, three;
    build(&plain, TR_ARCH_GPT, 3, 0.1, false);
    build(&all, TR_ARCH_GPT, 3, 0.1, true);
    build(&one, TR_ARCH_GPT, 3, 0.1, false);
    build(&three, TR_ARCH_GPT, 3, 0.1, false);
    one.offloaded = tr_offload(&one.g, one.keep, 2, (struct tr_offload_grain){.blocks = 1});
    three.offloaded = tr_offload(&three.g, three.keep, 2, (struct tr_offload_grain){.blocks = 3});
    ck_assert_msg(!one.g.error && !three.g.error, "%s%s", one.g.message, three.g.message);
    ck_assert_int_gt(one.offloaded, 0);
    ck_assert_int_lt(one.offloaded, all.offloaded);
    ck_assert_int_eq(three.offloaded, all.offloaded);
    ck_assert_int_eq(check_copies(&one.g, "gpt, block 0's"), one.offloaded);
    int begins = 0;   /* block 1's first forward node */
    while (begins < one.g.nnodes && !(one.g.nodes[begins].phase == TR_FORWARD && one.g.nodes[begins].block >= 1))
        begins++;
    for (int i = 0; i < one.g.nnodes; i++)
        if (one.g.nodes[i].op == TR_OP_OFFLOAD)
            ck_assert_msg(one.g.values[one.g.nodes[i].in[0]].producer < begins, "value %d, made at %d, offloaded; "
                          "block 1 begins at %d", one.g.nodes[i].in[0], one.g.values[one.g.nodes[i].in[0]].producer,
                          begins);
    plan(&plain), plan(&all), plan(&one);
    size_t arena = plain.p.region_bytes[TR_ACT], arena_all = all.p.region_bytes[TR_ACT];
    size_t arena_one = one.p.region_bytes[TR_ACT];
    ck_assert_uint_lt(one.p.region_bytes[TR_HOST], all.p.region_bytes[TR_HOST]);
    struct outcome want = step_on(&plain, tr_backend_cpu(), false);
    same_on_both(&want, &one, "gpt, block 0's offloaded");
    printf("gpt: block 0's %d of %d offloaded; arena %zu bytes (%zu every block's, %zu none); host ring %zu "
           "bytes (%zu)\n", one.offloaded, all.offloaded, arena_one, arena_all, arena, one.p.region_bytes[TR_HOST],
           all.p.region_bytes[TR_HOST]);
    free(want.grads);
    built_free(&plain), built_free(&all), built_free(&one), built_free(&three);
}
END_TEST

/* Whether the OFFLOAD nodes of g send value v. */
static bool sends(const struct tr_graph *g, int v)
{
    return node_of(g, TR_OP_OFFLOAD, v) >= 0;
}

/* The other grain: the largest saved activations until they make half of every one's bytes (at
 * one row of S tokens) — a subset of every block's, none smaller than one left, and the fewest
 * that reach half — with the same gradients as without, on the plain CPU and behind the fence;
 * 100 percent is every one. */
START_TEST(largest_offloaded)
{
    struct built plain, all, half, whole;
    build(&plain, TR_ARCH_GPT, 3, 0.1, false);
    build(&all, TR_ARCH_GPT, 3, 0.1, true);
    build(&half, TR_ARCH_GPT, 3, 0.1, false);
    build(&whole, TR_ARCH_GPT, 3, 0.1, false);
    half.offloaded = tr_offload(&half.g, half.keep, 2, (struct tr_offload_grain){.largest = 50, .len = S});
    whole.offloaded = tr_offload(&whole.g, whole.keep, 2, (struct tr_offload_grain){.largest = 100, .len = S});
    ck_assert_msg(!half.g.error && !whole.g.error, "%s%s", half.g.message, whole.g.message);
    ck_assert_int_eq(whole.offloaded, all.offloaded);
    ck_assert_int_gt(half.offloaded, 0);
    ck_assert_int_lt(half.offloaded, all.offloaded);
    ck_assert_int_eq(check_copies(&half.g, "gpt, the largest half"), half.offloaded);
    size_t total = 0, taken = 0, smallest_taken = SIZE_MAX, largest_left = 0;
    int n = 0;
    for (int v = 0; v < plain.g.nvalues; v++) {   /* the original values keep their numbers */
        if (!sends(&all.g, v)) {
            ck_assert_msg(!sends(&half.g, v), "value %d sent by the largest, not by every block's", v);
            continue;
        }
        size_t bytes = (size_t)tr_dim_eval(tr_shape_numel(&plain.g.values[v].shape), 1, S) *
                       tr_dtype_size(plain.g.values[v].dtype);
        total += bytes;
        if (sends(&half.g, v))
            taken += bytes, n++, smallest_taken = bytes < smallest_taken ? bytes : smallest_taken;
        else
            largest_left = bytes > largest_left ? bytes : largest_left;
    }
    ck_assert_int_eq(n, half.offloaded);
    ck_assert_msg(taken * 2 >= total && (taken - smallest_taken) * 2 < total, "%zu of %zu bytes taken, the smallest "
                  "%zu: not the fewest that make half", taken, total, smallest_taken);
    ck_assert_msg(smallest_taken >= largest_left, "a value of %zu bytes taken, one of %zu left", smallest_taken,
                  largest_left);
    plan(&plain), plan(&half);
    struct outcome want = step_on(&plain, tr_backend_cpu(), false);
    same_on_both(&want, &half, "gpt, the largest half offloaded");
    printf("gpt: the largest %d of %d offloaded, %zu of %zu bytes a row; arena %zu bytes (%zu none); host ring %zu "
           "bytes\n", half.offloaded, all.offloaded, taken, total, half.p.region_bytes[TR_ACT],
           plain.p.region_bytes[TR_ACT], half.p.region_bytes[TR_HOST]);
    free(want.grads);
    built_free(&plain), built_free(&all), built_free(&half), built_free(&whole);
}
END_TEST

/* One block, no dropout: the ReLU's output is read by the head, whose backward comes next; no
 * whole run lies between a forward and its backward, so nothing is sent and nothing changes. */
START_TEST(one_block_offloads_nothing)
{
    struct built b;
    build(&b, TR_ARCH_MLP, 1, 0, false);
    int nodes = b.g.nnodes, values = b.g.nvalues;
    ck_assert_int_eq(tr_graph_blocks(&b.g), 1);
    ck_assert_int_eq(tr_offload(&b.g, b.keep, 2, (struct tr_offload_grain){0}), 0);
    ck_assert_int_eq(b.g.nnodes, nodes);
    ck_assert_int_eq(b.g.nvalues, values);
    built_free(&b);
}
END_TEST

/* The fenced CPU reads a queued copy's source when queued and writes it at the join: a source
 * changed in between (a gradient sent before its last writer, a slot reused too soon) fails the
 * join; one left alone lands its bytes as queued. */
START_TEST(fenced_join_fails_a_changed_source)
{
    struct tr_backend *be = NULL;
    struct tr_diag why = {0};
    ck_assert_msg(tr_backend_open_ops(&tr_cpu_fenced_ops, 0, &be, &why) == 0, "%s", tr_diag_last(&why));
    const struct tr_memory_ops *mem = be->memory;
    float *dev = mem->alloc(4 * sizeof(float), mem->ctx), host[4] = {0}, back[4] = {0}, one[4] = {1, 2, 3, 4};
    ck_assert_int_eq(tr_backend_copy(be, dev, one, sizeof one, TR_COPY_TO_DEVICE, &why), 0);
    ck_assert_int_eq(tr_backend_copy_behind(be, host, dev, sizeof host, &why), 0);
    ck_assert_int_eq(tr_backend_fill(be, dev, 0, 2 * sizeof(float), &why), 0);   /* a writer after the copy */
    ck_assert_float_eq(host[0], 0);   /* nothing lands before the join */
    ck_assert_int_ne(tr_backend_join(be, &why), 0);
    ck_assert_msg(strstr(tr_diag_last(&why), "changed between its queuing and the join"), "%s", tr_diag_last(&why));
    tr_diag_free(&why);
    why = (struct tr_diag){0};
    ck_assert_int_eq(tr_backend_copy_behind(be, back, dev, sizeof back, &why), 0);
    ck_assert_int_eq(tr_backend_join(be, &why), 0);
    ck_assert_float_eq(back[0], 0);
    ck_assert_float_eq(back[3], 4);
    mem->free(dev, mem->ctx);
    tr_backend_close(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("offload");
    TCase *tc = tcase_create("offload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mlp_offloaded_same_gradients);
    tcase_add_test(tc, gpt_offloaded_same_gradients);
    tcase_add_test(tc, one_block_offloads_nothing);
    tcase_add_test(tc, first_block_offloaded);
    tcase_add_test(tc, largest_offloaded);
    tcase_add_test(tc, fenced_join_fails_a_changed_source);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
