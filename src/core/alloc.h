/* The allocator (DESIGN.md §3): the run's memory as a few regions, one allocation each, sized by
 * the memory plan before the first step and never grown in it. It keeps exact statistics for
 * the regions and refuses, with a sentence, any request past the budget's hard limit. The
 * footprint — what the OS sees, regions plus everything libraries take — is measured by the
 * tr_process_* functions at the end, never confused with the regions' bytes. */
#ifndef TR_ALLOC_H
#define TR_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Every region starts on this boundary: a cache line on x86 and Arm, and enough for AVX-512. */
#define TR_ALLOC_ALIGN 64

enum tr_region {
    TR_REGION_PARAMS,      /* the master parameters */
    TR_REGION_COPIES,      /* their low-precision copies (bf16/f16) */
    TR_REGION_GRADS,       /* one flat block; all-reduce buckets are slices of it */
    TR_REGION_OPTIMIZER,   /* moments and the like */
    TR_REGION_ARENA,       /* activations, offsets from the graph's liveness plan */
    TR_REGION_WORKSPACE,   /* BLAS/cuDNN/CPU kernel scratch */
    TR_REGION_DATA,        /* the loader's ring of batches */
    TR_NREGIONS
};

/* Where the bytes come from: the CPU's heap by default, cudaMalloc for the CUDA backend.
 * alloc returns TR_ALLOC_ALIGN-aligned, zeroed memory, or NULL when it cannot; it is never
 * called with 0 bytes. free is never called with NULL. */
struct tr_memory_ops {
    void *(*alloc)(size_t bytes, void *ctx);
    void (*free)(void *p, void *ctx);
    void *ctx;
    const char *name;   /* "cpu", "cuda:0": in messages and the summary */
};

/* posix_memalign + memset. The memset commits every page up front, so that a region the
 * machine cannot back fails here, at start-up, rather than as an OOM kill in step 900. */
extern const struct tr_memory_ops tr_cpu_memory;

struct tr_region_stats {
    size_t current;       /* bytes held now (exactly what was asked for) */
    size_t peak;          /* the most held at once */
    uint64_t allocs;      /* successful tr_alloc_region calls */
    uint64_t frees;       /* releases of a held region */
};

struct tr_alloc_stats {
    struct tr_region_stats region[TR_NREGIONS];
    size_t current;       /* all regions together */
    size_t peak;          /* the most held at once, all regions together (≤ Σ region peaks) */
    size_t limit;         /* 0: none */
    uint64_t allocs, frees;
    uint64_t refused;     /* requests refused by the limit */
    uint64_t failed;      /* requests the memory ops could not satisfy */
};

/* Not thread-safe: the regions are taken by one thread at start-up. Initialise with
 * tr_alloc_init; the fields are private. */
struct tr_allocator {
    struct tr_memory_ops ops;
    struct {
        void *ptr;
        size_t bytes;
        int held;
    } region[TR_NREGIONS];
    struct tr_alloc_stats stats;
    char error[512];      /* the last failure's sentence; "" when none */
};

/* ops NULL: tr_cpu_memory. The ops are copied. */
void tr_alloc_init(struct tr_allocator *a, const struct tr_memory_ops *ops);
/* Releases every region still held. */
void tr_alloc_destroy(struct tr_allocator *a);

/* The hard limit on the bytes all regions hold together; 0 removes it. A limit below what is
 * already held is refused (TR_EINVAL) and the old one kept. */
int tr_alloc_set_limit(struct tr_allocator *a, size_t bytes);

/* One allocation of bytes for region r, aligned and zeroed, in *out. 0, or:
 * TR_ENOMEM when the limit would be passed or the memory ops fail; TR_EINVAL when r is not a
 * region, out is NULL or r is already held (release it first: a region is never replaced
 * behind the back of whoever holds pointers into it). A failure leaves *out and the
 * statistics' current bytes untouched and a sentence in tr_alloc_error. 0 bytes holds the
 * region with *out = NULL and calls no ops (SGD without momentum has no optimizer state). */
int tr_alloc_region(struct tr_allocator *a, enum tr_region r, size_t bytes, void **out);
/* Gives region r back; nothing when it is not held. */
void tr_alloc_release(struct tr_allocator *a, enum tr_region r);

/* The last failure's sentence, "" when none. */
const char *tr_alloc_error(const struct tr_allocator *a);
void tr_alloc_stats(const struct tr_allocator *a, struct tr_alloc_stats *out);
/* A small table in the manner of PyTorch's memory_summary: per region current, peak,
 * allocations, releases; the totals; the limit. */
void tr_alloc_summary(const struct tr_allocator *a, FILE *out);

/* "params", "copies", "grads", "optimizer", "arena", "workspace", "data"; "?" otherwise. */
const char *tr_region_name(enum tr_region r);
/* "512 B", "1.50 GiB": a size for people (binary units, two decimals). */
void tr_format_bytes(uint64_t bytes, char out[32]);

/* The process's footprint (Linux), in bytes, or a negative TR_E… code when it cannot be read.
 * Peak and current resident set (VmHWM, VmRSS of /proc/self/status); without /proc the peak
 * comes from getrusage (ru_maxrss) and the current one is TR_EIO. */
int64_t tr_process_peak_rss(void);
int64_t tr_process_rss(void);
/* Address space, not resident memory: what RLIMIT_AS counts (VmSize: every mapping, reserved
 * or touched) and what RLIMIT_DATA counts (VmData: private writable mappings), in bytes. */
struct tr_space {
    int64_t size, data;
};
/* This process's now; both TR_EIO without /proc. */
struct tr_space tr_process_space(void);
/* Resets the peak to the current resident set (writes "5" to /proc/self/clear_refs, Linux ≥
 * 4.0), so that a later phase's peak is its own. TR_EIO when not permitted or not there. */
int tr_process_reset_peak(void);
/* Bytes malloc has handed out and not had back, for leak checks around a phase: mallinfo2's
 * arena plus mmapped chunks (glibc ≥ 2.33), or AddressSanitizer's own count under ASan, whose
 * allocator glibc does not see; 0 where neither exists. */
size_t tr_heap_in_use(void);

#endif
