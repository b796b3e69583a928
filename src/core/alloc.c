/* The allocator's regions, their statistics and the hard limit (alloc.h), and the process
 * footprint read from /proc. Runs at start-up, when the memory plan sizes each region, and at
 * the end, when the report compares the plan with what was measured. */
#include "core/alloc.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TR_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TR_UNDER_ASAN 1
#endif
#endif

#ifdef TR_UNDER_ASAN
/* From compiler-rt's sanitizer/allocator_interface.h, which GCC does not ship; libasan has it. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

static const char *const region_names[TR_NREGIONS] = {
    [TR_REGION_PARAMS] = "params",       [TR_REGION_COPIES] = "copies",
    [TR_REGION_GRADS] = "grads",         [TR_REGION_OPTIMIZER] = "optimizer",
    [TR_REGION_ARENA] = "arena",         [TR_REGION_WORKSPACE] = "workspace",
    [TR_REGION_DATA] = "data",
};

const char *tr_region_name(enum tr_region r)
{
    return (unsigned)r < TR_NREGIONS ? region_names[r] : "?";
}

void tr_format_bytes(uint64_t bytes, char out[32])
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(out, 32, "%" PRIu64 " B", bytes);
        return;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(out, 32, "%.2f %s", v, units[u]);
}

/* ---- the default memory: the CPU heap ---- */

static void *cpu_alloc(size_t bytes, void *ctx)
{
    (void)ctx;
    void *p = NULL;
    int rc = posix_memalign(&p, TR_ALLOC_ALIGN, bytes);
    if (rc != 0) {
        errno = rc;
        return NULL;
    }
    return memset(p, 0, bytes);
}

static void cpu_free(void *p, void *ctx)
{
    (void)ctx;
    free(p);
}

const struct tr_memory_ops tr_cpu_memory = {
    .alloc = cpu_alloc, .free = cpu_free, .ctx = NULL, .name = "cpu",
};

/* ---- regions ---- */

void tr_alloc_init(struct tr_allocator *a, const struct tr_memory_ops *ops)
{
    memset(a, 0, sizeof *a);
    a->ops = ops ? *ops : tr_cpu_memory;
    if (!a->ops.name)
        a->ops.name = "?";
}

void tr_alloc_destroy(struct tr_allocator *a)
{
    for (int r = 0; r < TR_NREGIONS; r++)
        tr_alloc_release(a, (enum tr_region)r);
}

static void set_error(struct tr_allocator *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(struct tr_allocator *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->error, sizeof a->error, fmt, ap);
    va_end(ap);
}

/* "6.75 GiB already held: params 1.20 GiB, grads 1.20 GiB", or "nothing else held", so that a
 * refusal says where the budget went. */
static void describe_held(const struct tr_allocator *a, char *out, size_t n)
{
    if (a->stats.current == 0) {
        snprintf(out, n, "nothing else held");
        return;
    }
    char size[32];
    tr_format_bytes(a->stats.current, size);
    size_t used = (size_t)snprintf(out, n, "%s already held:", size);
    const char *sep = " ";
    for (int r = 0; r < TR_NREGIONS && used < n; r++) {
        if (a->region[r].bytes == 0)
            continue;
        tr_format_bytes(a->region[r].bytes, size);
        used += (size_t)snprintf(out + used, n - used, "%s%s %s", sep, region_names[r], size);
        sep = ", ";
    }
}

int tr_alloc_set_limit(struct tr_allocator *a, size_t bytes)
{
    if (bytes != 0 && bytes < a->stats.current) {
        char limit[32], held[256];
        tr_format_bytes(bytes, limit);
        describe_held(a, held, sizeof held);
        set_error(a, "a limit of %s is below what is held (%s)", limit, held);
        return TR_EINVAL;
    }
    a->stats.limit = bytes;
    return 0;
}

/* TR_ENOMEM with a sentence when bytes more would pass the limit. current ≤ limit always holds
 * (tr_alloc_set_limit keeps it), so limit − current cannot wrap, and bytes is never added to
 * anything before it is known to fit. */
static int check_limit(struct tr_allocator *a, enum tr_region r, size_t bytes)
{
    size_t limit = a->stats.limit, room = limit - a->stats.current;
    if (limit == 0 || bytes <= room)
        return 0;
    char want[32], lim[32], over[32], held[256];
    tr_format_bytes(bytes, want);
    tr_format_bytes(limit, lim);
    tr_format_bytes(bytes - room, over);
    describe_held(a, held, sizeof held);
    set_error(a, "%s: %s more would exceed the %s limit by %s (%s)", region_names[r], want, lim,
              over, held);
    a->stats.refused++;
    return TR_ENOMEM;
}

/* The memory ops' block for bytes, or TR_ENOMEM / TR_EINVAL with a sentence. */
static int take_block(struct tr_allocator *a, enum tr_region r, size_t bytes, void **block)
{
    char want[32], held[256];
    void *p = a->ops.alloc(bytes, a->ops.ctx);
    if (!p) {
        tr_format_bytes(bytes, want);
        describe_held(a, held, sizeof held);
        set_error(a, "%s: the %s memory could not provide %s (%s)", region_names[r], a->ops.name,
                  want, held);
        a->stats.failed++;
        return TR_ENOMEM;
    }
    if ((uintptr_t)p % TR_ALLOC_ALIGN != 0) {
        a->ops.free(p, a->ops.ctx);
        set_error(a, "%s: the %s memory returned a block that is not %d-byte aligned",
                  region_names[r], a->ops.name, TR_ALLOC_ALIGN);
        a->stats.failed++;
        return TR_EINVAL;
    }
    *block = p;
    return 0;
}

int tr_alloc_region(struct tr_allocator *a, enum tr_region r, size_t bytes, void **out)
{
    if ((unsigned)r >= TR_NREGIONS || !out) {
        set_error(a, "tr_alloc_region: %s", !out ? "no place for the pointer (out is NULL)"
                                                 : "not a region");
        return TR_EINVAL;
    }
    if (a->region[r].held) {
        char size[32];
        tr_format_bytes(a->region[r].bytes, size);
        set_error(a, "%s: already held (%s); release it before asking again", region_names[r],
                  size);
        return TR_EINVAL;
    }
    int rc = check_limit(a, r, bytes);
    void *p = NULL;
    if (rc == 0 && bytes > 0)
        rc = take_block(a, r, bytes, &p);
    if (rc != 0)
        return rc;

    a->region[r].ptr = p;
    a->region[r].bytes = bytes;
    a->region[r].held = 1;
    struct tr_region_stats *rs = &a->stats.region[r];
    rs->current = bytes;
    if (bytes > rs->peak)
        rs->peak = bytes;
    rs->allocs++;
    a->stats.current += bytes;
    if (a->stats.current > a->stats.peak)
        a->stats.peak = a->stats.current;
    a->stats.allocs++;
    a->error[0] = '\0';
    *out = p;
    return 0;
}

void tr_alloc_release(struct tr_allocator *a, enum tr_region r)
{
    if ((unsigned)r >= TR_NREGIONS || !a->region[r].held)
        return;
    if (a->region[r].ptr)
        a->ops.free(a->region[r].ptr, a->ops.ctx);
    a->stats.current -= a->region[r].bytes;
    a->stats.region[r].current = 0;
    a->stats.region[r].frees++;
    a->stats.frees++;
    a->region[r].ptr = NULL;
    a->region[r].bytes = 0;
    a->region[r].held = 0;
}

const char *tr_alloc_error(const struct tr_allocator *a)
{
    return a->error;
}

void tr_alloc_stats(const struct tr_allocator *a, struct tr_alloc_stats *out)
{
    *out = a->stats;
}

static void summary_row(FILE *out, const char *name, size_t current, size_t peak,
                        uint64_t allocs, uint64_t frees)
{
    char cur[32], pk[32];
    tr_format_bytes(current, cur);
    tr_format_bytes(peak, pk);
    fprintf(out, "  %-10s %12s %12s %8" PRIu64 " %8" PRIu64 "\n", name, cur, pk, allocs, frees);
}

void tr_alloc_summary(const struct tr_allocator *a, FILE *out)
{
    const struct tr_alloc_stats *s = &a->stats;
    fprintf(out, "memory (%s)\n", a->ops.name);
    fprintf(out, "  %-10s %12s %12s %8s %8s\n", "region", "current", "peak", "allocs", "frees");
    for (int r = 0; r < TR_NREGIONS; r++)
        summary_row(out, region_names[r], s->region[r].current, s->region[r].peak,
                    s->region[r].allocs, s->region[r].frees);
    summary_row(out, "total", s->current, s->peak, s->allocs, s->frees);
    char limit[32] = "none";
    if (s->limit)
        tr_format_bytes(s->limit, limit);
    fprintf(out, "  limit %s; %" PRIu64 " refused by it, %" PRIu64 " failed in the %s memory\n",
            limit, s->refused, s->failed, a->ops.name);
}

/* ---- the process footprint ---- */

/* The "key:   123 kB" line of /proc/self/status, in bytes, or TR_EIO. */
static int64_t proc_status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return TR_EIO;
    char line[256];
    size_t klen = strlen(key);
    int64_t bytes = TR_EIO;
    while (fgets(line, sizeof line, f)) {
        long long kib;
        if (strncmp(line, key, klen) == 0 && line[klen] == ':' &&
            sscanf(line + klen + 1, "%lld", &kib) == 1) {
            bytes = (int64_t)kib * 1024;
            break;
        }
    }
    fclose(f);
    return bytes;
}

int64_t tr_process_peak_rss(void)
{
    int64_t bytes = proc_status_bytes("VmHWM");
    if (bytes >= 0)
        return bytes;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return TR_EIO;
    return (int64_t)ru.ru_maxrss * 1024;   /* kilobytes on Linux */
}

int64_t tr_process_rss(void)
{
    return proc_status_bytes("VmRSS");
}

struct tr_space tr_process_space(void)
{
    return (struct tr_space){proc_status_bytes("VmSize"), proc_status_bytes("VmData")};
}

int tr_process_reset_peak(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return TR_EIO;
    ssize_t n = write(fd, "5", 1);
    int rc = close(fd);
    return n == 1 && rc == 0 ? 0 : TR_EIO;
}

size_t tr_heap_in_use(void)
{
#if defined(TR_UNDER_ASAN)
    return __sanitizer_get_current_allocated_bytes();
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#else
    return 0;
#endif
}
