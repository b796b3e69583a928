/* The CPU backend behind a fence (backend.h, tr_backend_cpu_fenced): the regions are mapped
 * with no access, opened only while a kernel, a copy, a fill or an optimizer pass runs. A host
 * access that bypasses the backend — what would read garbage or crash on a GPU — is a SIGSEGV
 * here, on a machine without one. The registry of mappings is process-wide: the backend is a
 * test instrument for one trainer at a time. */
#include "backend/cpu/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_FENCED 16

static struct {
    void *p;
    size_t bytes;   /* the mapping's, whole pages */
} fenced[MAX_FENCED];

static size_t page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

static void set_access(int prot)
{
    for (int i = 0; i < MAX_FENCED; i++)
        if (fenced[i].p)
            mprotect(fenced[i].p, fenced[i].bytes, prot);
}

static void open_fence(void) { set_access(PROT_READ | PROT_WRITE); }
static void close_fence(void) { set_access(PROT_NONE); }

/* Whole pages, zeroed by the kernel, page-aligned (beyond TR_ALLOC_ALIGN), closed at once. */
static void *fenced_alloc(size_t bytes, void *ctx)
{
    (void)ctx;
    int slot = 0;
    while (slot < MAX_FENCED && fenced[slot].p)
        slot++;
    if (slot == MAX_FENCED)
        return NULL;
    size_t size = page_round(bytes);
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    fenced[slot].p = p, fenced[slot].bytes = size;
    return p;
}

static void fenced_free(void *p, void *ctx)
{
    (void)ctx;
    for (int i = 0; i < MAX_FENCED; i++)
        if (fenced[i].p == p) {
            munmap(p, fenced[i].bytes);
            fenced[i].p = NULL;
        }
}

static const struct tr_memory_ops fenced_memory = {fenced_alloc, fenced_free, NULL, "cpu-fenced"};

static int fenced_kernel(const struct tr_kernel_args *a)
{
    struct tr_kernel_args args = *a;
    open_fence();
    int rc = tr_backend_run(tr_backend_cpu(), &args);
    close_fence();
    return rc;
}

static int fenced_copy(void *dst, const void *src, size_t bytes, enum tr_copy direction, char *error)
{
    open_fence();
    int rc = tr_cpu_copy(dst, src, bytes, direction, error);
    close_fence();
    return rc;
}

/* Copies ahead wait here until join: a GPU's second queue gives no promise before it. */
#define MAX_AHEAD 64

static struct {
    void *dst;
    const void *src;
    size_t bytes;
} ahead[MAX_AHEAD];
static int nahead;

static int fenced_copy_ahead(void *dst, const void *src, size_t bytes, char *error)
{
    if (nahead == MAX_AHEAD) {
        snprintf(error, TR_KERNEL_ERROR_MAX, "more than %d copies ahead without a join", MAX_AHEAD);
        return TR_EINVAL;
    }
    ahead[nahead].dst = dst, ahead[nahead].src = src, ahead[nahead].bytes = bytes;
    nahead++;
    return 0;
}

static int fenced_join(char *error)
{
    int rc = 0;
    for (int i = 0; i < nahead && !rc; i++)
        rc = fenced_copy(ahead[i].dst, ahead[i].src, ahead[i].bytes, TR_COPY_TO_DEVICE, error);
    nahead = 0;
    return rc;
}

static int fenced_fill(void *dst, int byte, size_t bytes, char *error)
{
    open_fence();
    int rc = tr_cpu_fill(dst, byte, bytes, error);
    close_fence();
    return rc;
}

static int fenced_optim_step(const struct tr_optim_args *a)
{
    open_fence();
    int rc = tr_cpu_optim_step(a);
    close_fence();
    return rc;
}

static int fenced_grad_sumsq(const struct tr_optim_args *a, double *sumsq)
{
    open_fence();
    int rc = tr_cpu_grad_sumsq(a, sumsq);
    close_fence();
    return rc;
}

static int fenced_grad_scale(const struct tr_optim_args *a, float factor, bool *finite)
{
    open_fence();
    int rc = tr_cpu_grad_scale(a, factor, finite);
    close_fence();
    return rc;
}

static struct tr_backend fenced_backend;

const struct tr_backend *tr_backend_cpu_fenced(void)
{
    if (fenced_backend.name)
        return &fenced_backend;
    const struct tr_backend *cpu = tr_backend_cpu();
    fenced_backend = *cpu;
    fenced_backend.name = "cpu-fenced";
    for (int op = 0; op < TR_NOPS; op++)
        fenced_backend.kernels[op] = cpu->kernels[op] ? fenced_kernel : NULL;
    fenced_backend.memory = &fenced_memory;
    fenced_backend.host_visible = false;
    fenced_backend.copy = fenced_copy;
    fenced_backend.fill = fenced_fill;
    fenced_backend.synchronize = fenced_join;   /* the kernels ran already: only copies ahead wait */
    fenced_backend.copy_ahead = fenced_copy_ahead;
    fenced_backend.join = fenced_join;
    fenced_backend.optim_step = fenced_optim_step;
    fenced_backend.grad_sumsq = fenced_grad_sumsq;
    fenced_backend.grad_scale = fenced_grad_scale;
    return &fenced_backend;
}
