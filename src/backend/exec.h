/* The executor: walks a schedule and runs each node's kernel on a backend, with the memory
 * plan's offsets into regions the caller allocated. It allocates nothing while running.
 * Debug mode poisons every arena slot when its value dies and, after each node, checks that
 * the kernel wrote nothing outside its own outputs (a shadow copy of the arena). */
#ifndef TR_EXEC_H
#define TR_EXEC_H

#include "backend/backend.h"
#include "core/alloc.h"
#include "graph/memplan.h"

#define TR_EXEC_MAX_STAGED 8

struct tr_exec;

/* What the executor calls before and after each node it runs (not views: they run nothing),
 * with the node's place in the schedule: the profiler (profile.h), and later traces and
 * gradient buckets that start communicating as the backward produces them. A hook that
 * returns non-zero stops the run, its code returned and its sentence in d. All NULL:
 * no hook, and the executor pays one test per node for it. */
struct tr_exec_hook {
    int (*before)(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d);
    int (*after)(void *ctx, const struct tr_exec *x, int step, const struct tr_node *node, struct tr_diag *d);
    void *ctx;
};

struct tr_exec {
    const struct tr_graph *g;
    const int *schedule;
    int n;
    const struct tr_memplan *plan;
    const struct tr_backend *be;
    char *base[TR_NKINDS];      /* region bases, by value kind ([TR_ACT]: the arena) */
    size_t region_bytes[TR_NKINDS];   /* their sizes (tr_exec_alloc's; 0: the plan's) */
    void *workspace;
    const struct tr_rng_ctx *rng;
    bool debug;
    struct tr_exec_hook hook;   /* called around every node that runs; none by default */
    int64_t B, S;               /* the sizes of the run in progress (tr_exec_run's), for the hook */
    int to;                     /* where the run in progress ends (tr_exec_run_part's) */
    char *shadow;               /* debug: the arena as it should be */
    size_t shadow_bytes;
    char *seen;                 /* debug on a device: the arena as copied back after a node */
    char *mirror[TR_NKINDS];    /* host copies of device regions (tr_exec_host), made on first use */
    char *stage;                /* a device's staging for inputs copied ahead: the inputs region's
                                 * second half (tr_exec_alloc doubles it); NULL on the host */
    struct tr_staged {          /* inputs staged and not yet committed */
        int v;
        int64_t offset;         /* in the inputs region, by the plan the batch will run under */
        const void *host;
        size_t bytes;
    } staged[TR_EXEC_MAX_STAGED];
    int nstaged;
    /* ZeRO stage 3 (graph.h's gather pass): the parameters region holds this rank's shard of
     * them alone. fill writes parameter `param` (its place among them) whole at dst, the slot
     * of the plan's copy number `copy` (memplan.h: gather), where the copy starts — every rank
     * calls it for the same copies in the same order, 0 first in each run; with ready, fill may
     * only begin it, and ready(copy) waits until every copy up to that one is written (INT_MAX:
     * every one begun), called before a node reads one. The host's view of the parameters
     * (tr_exec_host) is whole, laid out as the plan lays them out, made on first use:
     * tr_exec_pull leaves it as it is (the trainer gathers it) and tr_exec_push gives it to
     * push, which keeps this rank's shard of it. NULL fill: none. */
    struct tr_exec_shard {
        int (*fill)(void *ctx, int copy, int param, void *dst, struct tr_diag *d);
        int (*ready)(void *ctx, int copy, struct tr_diag *d);
        int (*push)(void *ctx, const char *view, struct tr_diag *d);
        void *ctx;
    } shard;
    /* Tensor parallelism: runs a collective node (ops.h: TR_OP_RUNS_ON_COLLECTIVE) over its
     * bound tensors — every tensor rank calls it for the same nodes in the same order. NULL run:
     * a graph with such a node fails at it. */
    struct tr_exec_collective {
        int (*run)(void *ctx, const struct tr_kernel_args *a);
        void *ctx;
    } collective;
    /* Activation offload (graph.h: the offload pass): on a backend with a copy queue (backend.h:
     * copy_ahead), OFFLOAD sends behind and RELOAD brings back ahead, joined at OFFLOAD_WAIT
     * and before the first node that reads what came back (join_at: that step, INT_MAX when
     * none is on its way); elsewhere, and in debug mode, each copy at once. Counted over every
     * run: the bytes each way, the seconds the host spent queuing and waiting for them. */
    bool in_flight;             /* a copy queued and not joined */
    int join_at;
    struct tr_exec_copies {
        uint64_t sent, back;
        double seconds;
    } copies;
};

/* Every call that can fail returns 0, or a code with its sentence added to d (core/error.h);
 * nothing is allocated unless it fails. */

/* Runs the whole schedule at (B, S), each at most the plan's. */
int tr_exec_run(struct tr_exec *x, int64_t B, int64_t S, struct tr_diag *d);
/* Steps from … to − 1 alone: a pipeline stage's forward or backward (program.h). */
int tr_exec_run_part(struct tr_exec *x, int64_t B, int64_t S, int from, int to, struct tr_diag *d);
/* ZeRO stage 3: every copy of x->plan filled in order, no node run — a rank with no
 * micro-batch in a round, so that the others' gathers find it. */
int tr_exec_gathers(struct tr_exec *x, struct tr_diag *d);
/* Frees the host's view of a region where it is a copy (ZeRO 3's whole parameters, after
 * initialisation or a checkpoint); the next tr_exec_host makes it again. */
void tr_exec_drop_host(struct tr_exec *x, enum tr_value_kind kind);
/* Whether the node at step is its phase's last before another phase (or the schedule's end). */
bool tr_exec_phase_ends(const struct tr_exec *x, int step);
/* Where a value's data is (valid for persistent values always, for activations while live). */
void *tr_exec_data(const struct tr_exec *x, int v);
/* Copies between the host and a value's data, whatever memory the backend's is (backend.h:
 * host_visible): bytes from its start. */
int tr_exec_read(const struct tr_exec *x, int v, void *host, size_t bytes, struct tr_diag *d);
int tr_exec_write(struct tr_exec *x, int v, const void *host, size_t bytes, struct tr_diag *d);
int tr_exec_fill(struct tr_exec *x, int v, int byte, size_t bytes, struct tr_diag *d);
/* Inputs staged ahead, so that the next micro-batch's travel while this one runs (backend.h:
 * copy_ahead). tr_exec_stage takes input v's bytes for the plan its batch will run under; on a
 * device they leave at once, into the staging half of the inputs region, and the host memory
 * must stay as it is until that batch has run; where the host sees the regions nothing moves
 * yet, and host must stay until the commit. tr_exec_commit puts every staged input in place,
 * ordered before whatever is queued after it. */
int tr_exec_stage(struct tr_exec *x, const struct tr_memplan *plan, int v, const void *host, size_t bytes,
                  struct tr_diag *d);
int tr_exec_commit(struct tr_exec *x, struct tr_diag *d);
/* The host's view of the persistent region of a kind (TR_PARAM: parameters and state), for
 * initialisation and checkpoints: the region itself where the host sees it, else a host copy
 * (x->plan's region size) that tr_exec_pull fills from the region and tr_exec_push copies
 * back. tr_exec_host is v's address in that view. */
void *tr_exec_host(struct tr_exec *x, int v);
char *tr_exec_view(struct tr_exec *x, enum tr_value_kind kind);   /* the whole view of a kind */
int tr_exec_pull(struct tr_exec *x, enum tr_value_kind kind, struct tr_diag *d);
int tr_exec_push(struct tr_exec *x, enum tr_value_kind kind, struct tr_diag *d);
/* Takes the regions (sizes by value kind, as a plan or program gives them) and the workspace
 * from the allocator, which enforces its byte limit; TR_ENOMEM when refused. On a backend that
 * copies ahead, the inputs region is twice its size: the second half stages. */
int tr_exec_alloc(struct tr_exec *x, struct tr_allocator *a, const size_t *region_bytes,
                  size_t workspace_bytes, struct tr_diag *d);
/* The bytes the inputs region takes for plans needing `inputs` on a backend of kind ops (NULL:
 * none): twice them, each half on a TR_EXEC_STAGE_ALIGN boundary, where it copies ahead; as
 * they are elsewhere. */
#define TR_EXEC_STAGE_ALIGN 256
size_t tr_exec_inputs_bytes(const struct tr_backend_ops *ops, size_t inputs);
void tr_exec_free(struct tr_exec *x);

#endif
