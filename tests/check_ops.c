/* The op table (src/graph/ops.c): every op of enum tr_op has every fact — a name, its arity,
 * an amp policy, its in-place and checkpointing classes, a gradient rule or an explicit none,
 * FLOPs and special-function rules for the time model, what runs it — and every op that runs
 * on a device has a kernel in the CPU backend's table (check_cuda's table test asks the same
 * of the CUDA one). A row left out fails here (or, the last one, ops.c's static assertion). */
#include "runner.h"

#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "graph/ops.h"

START_TEST(every_op_has_every_fact)
{
    for (int op = 0; op < TR_NOPS; op++) {
        const struct tr_op_info *info = &tr_ops[op];
        ck_assert_msg(info->name && info->name[0], "op %d has no row (no name) in ops.c", op);
        const char *name = info->name;
        ck_assert_str_eq(tr_op_name((enum tr_op)op), name);
        for (int other = 0; other < op; other++)
            ck_assert_msg(strcmp(tr_ops[other].name, name) != 0, "%s: two ops of that name", name);
        ck_assert_msg(info->nin_min >= 1 && info->nin_min <= info->nin_max && info->nin_max <= TR_MAX_IN,
                      "%s: inputs %d..%d", name, info->nin_min, info->nin_max);
        /* a wait on a copy (offload_wait) reads its source and writes nothing */
        int least = op == TR_OP_OFFLOAD_WAIT ? 0 : 1;
        ck_assert_msg(info->nout >= least && info->nout <= TR_MAX_OUT, "%s: %d outputs", name, info->nout);
        ck_assert_msg(info->amp != TR_AMP_UNSET, "%s: no amp policy", name);
        ck_assert_msg(info->remat != TR_REMAT_UNSET, "%s: no checkpointing class", name);
        ck_assert_msg(info->grad_kind != TR_GRAD_UNSET, "%s: no gradient rule, nor a none", name);
        ck_assert_msg((info->grad_kind == TR_GRAD_RULE) == (tr_grad_rule_of((enum tr_op)op) != NULL),
                      "%s: a gradient rule exactly when grad_kind says so", name);
        ck_assert_msg(info->flops && info->specials, "%s: no FLOPs or specials rule (tr_cost_none: none)", name);
        ck_assert_msg(info->runs_on != TR_OP_RUNS_ON_UNSET, "%s: nothing says what runs it", name);
        ck_assert_msg(!info->in_place || info->nout == 1, "%s: in place with %d outputs", name, info->nout);
    }
}
END_TEST

/* A backward op is never differentiated again, and only backward ops say so. */
START_TEST(backward_ops_are_marked)
{
    for (int op = 0; op < TR_NOPS; op++)
        ck_assert_msg((tr_ops[op].grad_kind == TR_GRAD_BACKWARD_OP) == (op >= TR_OP_BIAS_GRAD),
                      "%s: backward op or not", tr_ops[op].name);
}
END_TEST

START_TEST(every_device_op_has_a_cpu_kernel)
{
    const struct tr_backend *cpu = tr_backend_cpu();
    for (int op = 0; op < TR_NOPS; op++) {
        bool device = tr_ops[op].runs_on == TR_OP_RUNS_ON_DEVICE;
        ck_assert_msg(device == (cpu->ops->kernels[op] != NULL), "%s: CPU kernel %s", tr_ops[op].name,
                      device ? "missing" : "present for an op no device runs");
    }
}
END_TEST

/* The builders' arity is the table's: a node appended with another fails the graph. */
START_TEST(node_arity_checked)
{
    struct tr_graph g;
    tr_graph_init(&g);
    int x = tr_input(&g, "x", TR_F32, 2, (struct tr_dim[]){tr_dim_const(2), tr_dim_const(3)});
    ck_assert_int_ge(tr_relu(&g, x), 0);
    ck_assert_int_eq(g.error, 0);
    int y = tr_value_add(&g, TR_ACT, TR_F32, &g.values[x].shape, NULL);
    tr_node_add(&g, TR_OP_MATMUL, &x, 1, &y, 1, NULL);
    ck_assert_int_eq(g.error, TR_EINVAL);
    ck_assert_str_eq(g.message, "internal: matmul with 1 inputs and 1 outputs, not as ops.c says");
    tr_graph_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, every_op_has_every_fact);
    tcase_add_test(tc, backward_ops_are_marked);
    tcase_add_test(tc, every_device_op_has_a_cpu_kernel);
    tcase_add_test(tc, node_arity_checked);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
