/* A backend instance's life (backend.h), whatever its kind: open makes one for a device, run
 * sends a node to its kernel, close releases it. Knows no kind: select.c chooses one. */
#include "backend/backend.h"

#include <ctype.h>
#include <stdlib.h>

#include "graph/memplan.h"

int tr_backend_open_ops(const struct tr_backend_ops *ops, int device, struct tr_backend **out, struct tr_diag *d)
{
    struct tr_backend *be = tr_xcalloc(1, sizeof *be);
    be->ops = ops, be->device = device;
    int rc = ops->open(be, d);
    *out = rc ? NULL : be;
    if (rc)
        free(be);
    return rc;
}

void tr_backend_close(struct tr_backend *be)
{
    if (!be)
        return;
    be->ops->close(be);
    free(be);
}

/* An op the kind has no kernel for (a backend still being written): which op, and whose. */
static int no_kernel(const struct tr_backend *be, const struct tr_kernel_args *args)
{
    char who[16];
    size_t i = 0;
    for (; be->ops->name[i] && i + 1 < sizeof who; i++)
        who[i] = (char)toupper((unsigned char)be->ops->name[i]);
    who[i] = '\0';
    if (!args->diag)
        return TR_EINVAL;
    return tr_fail(args->diag, TR_EINVAL, "op %s has no %s kernel yet", tr_op_name(args->node->op), who);
}

int tr_backend_run(const struct tr_backend *be, struct tr_kernel_args *args)
{
    tr_kernel_fn fn = be->ops->kernels[args->node->op];
    args->be = be;
    if (!fn)
        return no_kernel(be, args);
    return be->ops->run ? be->ops->run(fn, args) : fn(args);
}

int tr_backend_prepare_program(const struct tr_backend *be, const struct tr_graph *g, const int *schedule, int n,
                               const int64_t *B, const int64_t *S, int nplans, struct tr_diag *d)
{
    if (!be->ops->prepare)
        return 0;
    for (int p = 0; p < nplans; p++)
        for (int i = 0; i < n; i++) {
            const struct tr_node *node = &g->nodes[schedule[i]];
            struct tr_tensor in[TR_MAX_IN], out[TR_MAX_OUT];
            tr_bind_shapes(g, node, B[p], S[p], in, out);
            int rc = be->ops->prepare(be, g, node, in, out, d);
            if (rc)
                return rc;
        }
    return 0;
}
