/* The CPU backend behind a fence (backend.h, tr_cpu_fenced_ops): the regions are mapped with no
 * access, opened only while a kernel, a copy, a fill or an optimizer pass runs. A host access
 * that bypasses the backend — what would read garbage or crash on a GPU — is a SIGSEGV here, on
 * a machine without one. Each instance keeps its own registry of mappings and its own copies
 * held back, so two instances in one process fence their regions apart. */
#include "backend/cpu/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_FENCED 16

/* An instance's state. */
struct fence {
    struct {
        void *p;
        size_t bytes;   /* the mapping's, whole pages */
    } mapped[MAX_FENCED];
    /* Copies ahead (and behind) wait here until join, in the order queued: a GPU's second
     * queue gives no promise before it. Each reads its source when queued (the earliest a copy
     * engine may: the kernels before it have run) into held, and writes its destination at the
     * join (the latest); a source changed in between — a copy queued before its bytes were
     * final, or its slot reused before the join — fails the join. */
    struct ahead {
        void *dst;
        const void *src;
        size_t bytes, held;   /* held: where its source's bytes as queued are in held */
        enum tr_copy direction;
    } *ahead;
    int nahead, cap;
    char *held;
    size_t nheld, held_cap;
    struct tr_memory_ops memory;   /* the regions: alloc and free with this fence as ctx */
};

static struct fence *fence_of(const struct tr_backend *be) { return be->state; }

static size_t page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

static void set_access(struct fence *f, int prot)
{
    for (int i = 0; i < MAX_FENCED; i++)
        if (f->mapped[i].p)
            mprotect(f->mapped[i].p, f->mapped[i].bytes, prot);
}

static void open_fence(const struct tr_backend *be) { set_access(fence_of(be), PROT_READ | PROT_WRITE); }
static void close_fence(const struct tr_backend *be) { set_access(fence_of(be), PROT_NONE); }

/* Whole pages, zeroed by the kernel, page-aligned (beyond TR_ALLOC_ALIGN), closed at once. */
static void *fenced_alloc(size_t bytes, void *ctx)
{
    struct fence *f = ctx;
    int slot = 0;
    while (slot < MAX_FENCED && f->mapped[slot].p)
        slot++;
    if (slot == MAX_FENCED)
        return NULL;
    size_t size = page_round(bytes);
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    f->mapped[slot].p = p, f->mapped[slot].bytes = size;
    return p;
}

static void fenced_free(void *p, void *ctx)
{
    struct fence *f = ctx;
    for (int i = 0; i < MAX_FENCED; i++)
        if (f->mapped[i].p == p) {
            munmap(p, f->mapped[i].bytes);
            f->mapped[i].p = NULL;
        }
}

static int fenced_open(struct tr_backend *be, struct tr_diag *d)
{
    (void)d;
    struct fence *f = tr_xcalloc(1, sizeof *f);
    f->memory = (struct tr_memory_ops){fenced_alloc, fenced_free, f, "cpu-fenced"};
    be->state = f;
    be->memory = &f->memory;
    be->host_memory = &tr_cpu_memory;
    return 0;
}

/* The regions are the allocator's to free; what is still mapped goes with the instance. */
static void fenced_close(struct tr_backend *be)
{
    struct fence *f = fence_of(be);
    for (int i = 0; i < MAX_FENCED; i++)
        if (f->mapped[i].p)
            munmap(f->mapped[i].p, f->mapped[i].bytes);
    free(f->ahead), free(f->held);
    free(f);
    be->state = NULL;
}

static int fenced_run(tr_kernel_fn kernel, const struct tr_kernel_args *a)
{
    open_fence(a->be);
    int rc = tr_cpu_run_widened(kernel, a);
    close_fence(a->be);
    return rc;
}

static int fenced_copy(const struct tr_backend *be, void *dst, const void *src, size_t bytes,
                       enum tr_copy direction, struct tr_diag *d)
{
    open_fence(be);
    int rc = tr_cpu_copy(be, dst, src, bytes, direction, d);
    close_fence(be);
    return rc;
}

static int fenced_copy_ahead(const struct tr_backend *be, void *dst, const void *src, size_t bytes,
                             enum tr_copy direction, struct tr_diag *d)
{
    (void)d;
    struct fence *f = fence_of(be);
    if (f->nahead == f->cap) {   /* both grow while the first steps queue their most; then stay */
        f->cap = f->cap ? 2 * f->cap : 64;
        f->ahead = tr_xrealloc(f->ahead, (size_t)f->cap * sizeof *f->ahead);
    }
    if (f->nheld + bytes > f->held_cap) {
        f->held_cap = f->nheld + bytes > 2 * f->held_cap ? f->nheld + bytes : 2 * f->held_cap;
        f->held = tr_xrealloc(f->held, f->held_cap);
    }
    open_fence(be);
    memcpy(f->held + f->nheld, src, bytes);
    close_fence(be);
    f->ahead[f->nahead++] = (struct ahead){dst, src, bytes, f->nheld, direction};
    f->nheld += bytes;
    return 0;
}

static int fenced_join(const struct tr_backend *be, struct tr_diag *d)
{
    struct fence *f = fence_of(be);
    int rc = 0;
    open_fence(be);
    for (int i = 0; i < f->nahead && !rc; i++) {
        const struct ahead *a = &f->ahead[i];
        if (memcmp(a->src, f->held + a->held, a->bytes))
            rc = tr_fail(d, TR_EFAIL, "internal: the source of a copy %s (%zu bytes) changed between its queuing "
                         "and the join", a->direction == TR_COPY_TO_HOST ? "to the host" : "to the device", a->bytes);
        else
            memcpy(a->dst, f->held + a->held, a->bytes);
    }
    close_fence(be);
    f->nahead = 0, f->nheld = 0;
    return rc;
}

static int fenced_fill(const struct tr_backend *be, void *dst, int byte, size_t bytes, struct tr_diag *d)
{
    open_fence(be);
    int rc = tr_cpu_fill(be, dst, byte, bytes, d);
    close_fence(be);
    return rc;
}

static int fenced_optim_step(const struct tr_backend *be, const struct tr_optim_args *a)
{
    open_fence(be);
    int rc = tr_cpu_optim_step(be, a);
    close_fence(be);
    return rc;
}

static int fenced_grad_sumsq(const struct tr_backend *be, const struct tr_optim_args *a, double *sumsq)
{
    open_fence(be);
    int rc = tr_cpu_grad_sumsq(be, a, sumsq);
    close_fence(be);
    return rc;
}

static int fenced_grad_scale(const struct tr_backend *be, const struct tr_optim_args *a, float factor, bool *finite)
{
    open_fence(be);
    int rc = tr_cpu_grad_scale(be, a, factor, finite);
    close_fence(be);
    return rc;
}

const struct tr_backend_ops tr_cpu_fenced_ops = {
    .name = "cpu-fenced",
    .kernels = tr_cpu_kernels,
    .run = fenced_run,
    .workspace_bytes = tr_cpu_workspace_bytes,
    .host_visible = false,
    .open = fenced_open,
    .close = fenced_close,
    .copy = fenced_copy,
    .fill = fenced_fill,
    .synchronize = fenced_join,   /* the kernels ran already: only copies ahead wait */
    .copy_ahead = fenced_copy_ahead,
    .join = fenced_join,
    .optim_step = fenced_optim_step,
    .grad_sumsq = fenced_grad_sumsq,
    .grad_scale = fenced_grad_scale,
};
