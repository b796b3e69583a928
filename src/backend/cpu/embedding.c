/* EMBEDDING and GATHER on the CPU, with their backward: rows of a table picked by i32 ids,
 * and the scatter-add of the gradient rows back into the table. GATHER (x [N, D], ids [M])
 * is the same lookup with x as the table, so both ops share one body (embedding.inc, built for
 * f32 and f64). */
#include <string.h>

#include "backend/cpu/cpu.h"

/* Columns per task of the scatter-add: 32 f32 are two cache lines, so neighbouring tasks do not
 * share a line, and D = 768 still splits into 24 tasks. */
#define COLUMN_BLOCK 32

/* Every id must name a row of the table; checked before any output is written. */
static int check_ids(const struct tr_kernel_args *a, const int32_t *ids, int64_t n, int64_t rows)
{
    enum tr_op op = a->node->op;
    for (int64_t p = 0; p < n; p++) {
        if (ids[p] >= 0 && ids[p] < rows)
            continue;
        if (op == TR_OP_EMBEDDING || op == TR_OP_EMBEDDING_BWD)
            return tr_cpu_fail(a, "%s: id %d at position %lld is outside the vocabulary of %lld",
                               tr_op_name(op), ids[p], (long long)p, (long long)rows);
        return tr_cpu_fail(a, "%s: id %d at position %lld is outside the %lld rows of x",
                           tr_op_name(op), ids[p], (long long)p, (long long)rows);
    }
    return 0;
}

#define TR_KERNEL_BODY "backend/cpu/embedding.inc"
#include "backend/cpu/instantiate.h"

/* GATHER is EMBEDDING's kernel, GATHER_BWD EMBEDDING_BWD's; named apart for the dispatch messages. */
#define gather_f32 embedding_f32
#define gather_f64 embedding_f64
#define gather_bwd_f32 embedding_bwd_f32
#define gather_bwd_f64 embedding_bwd_f64

int tr_cpu_embedding(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, embedding); }
int tr_cpu_embedding_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, embedding_bwd); }
int tr_cpu_gather(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, gather); }
int tr_cpu_gather_bwd(const struct tr_kernel_args *a) { return TR_CPU_BY_DTYPE(a, gather_bwd); }
