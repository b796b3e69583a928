/* The allocator (src/core/alloc.c): regions taken and given back with exact statistics,
 * alignment and zeroing, the hard limit refused one byte past it and met exactly, memory ops
 * that fail or misbehave, and the process footprint (VmHWM/VmRSS, the peak reset, the heap). */
#include "runner.h"
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/error.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

/* AddressSanitizer keeps freed blocks in quarantine and refuses impossible sizes with an abort
 * rather than NULL, so the assertions that depend on either are left to the plain build. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Memory ops that count their calls over the CPU heap and fail from call number fail_at on
 * (1-based; 0: never), so that a test sees exactly what the allocator asked of them. */
struct counting {
    int allocs, frees, fail_at;
    void *last_freed;
};

static void *counting_alloc(size_t bytes, void *ctx)
{
    struct counting *c = ctx;
    if (c->fail_at && c->allocs + 1 >= c->fail_at)
        return NULL;
    c->allocs++;
    return tr_cpu_memory.alloc(bytes, tr_cpu_memory.ctx);
}

static void counting_free(void *p, void *ctx)
{
    struct counting *c = ctx;
    c->frees++;
    c->last_freed = p;
    tr_cpu_memory.free(p, tr_cpu_memory.ctx);
}

static struct tr_memory_ops counting_ops(struct counting *c, const char *name)
{
    return (struct tr_memory_ops){counting_alloc, counting_free, c, name};
}

static void *take(struct tr_allocator *a, enum tr_region r, size_t bytes)
{
    void *p = NULL;
    int rc = tr_alloc_region(a, r, bytes, &p);
    ck_assert_msg(rc == 0, "%s of %zu bytes: rc %d: %s", tr_region_name(r), bytes, rc,
                  tr_alloc_error(a));
    return p;
}

static void assert_region(const struct tr_alloc_stats *s, enum tr_region r, size_t current,
                          size_t peak, uint64_t allocs, uint64_t frees)
{
    const struct tr_region_stats *rs = &s->region[r];
    ck_assert_msg(rs->current == current && rs->peak == peak && rs->allocs == allocs &&
                      rs->frees == frees,
                  "%s: current %zu peak %zu allocs %llu frees %llu, expected %zu %zu %llu %llu",
                  tr_region_name(r), rs->current, rs->peak, (unsigned long long)rs->allocs,
                  (unsigned long long)rs->frees, current, peak, (unsigned long long)allocs,
                  (unsigned long long)frees);
}

START_TEST(region_names)
{
    static const char *const want[TR_NREGIONS] = {"params", "copies", "grads", "optimizer",
                                                  "arena", "workspace", "data"};
    for (int r = 0; r < TR_NREGIONS; r++)
        ck_assert_str_eq(tr_region_name((enum tr_region)r), want[r]);
    ck_assert_str_eq(tr_region_name(TR_NREGIONS), "?");
    ck_assert_str_eq(tr_region_name((enum tr_region)-1), "?");
}
END_TEST

START_TEST(format_bytes)
{
    static const struct { uint64_t bytes; const char *text; } cases[] = {
        {0, "0 B"},
        {1, "1 B"},
        {1023, "1023 B"},
        {1024, "1.00 KiB"},
        {1536, "1.50 KiB"},
        {768 * KIB, "768.00 KiB"},
        {MIB, "1.00 MiB"},
        {3 * GIB / 2, "1.50 GiB"},
        {8 * (uint64_t)GIB, "8.00 GiB"},
        {(uint64_t)1 << 40, "1.00 TiB"},
        {UINT64_MAX, "16.00 EiB"},
    };
    char out[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tr_format_bytes(cases[i].bytes, out);
        ck_assert_str_eq(out, cases[i].text);
    }
}
END_TEST

/* Take, give back and take again: every counter is exact, peaks stay, the ops see one call
 * per region and one free per release. */
START_TEST(statistics_exact)
{
    struct counting c = {0};
    struct tr_memory_ops ops = counting_ops(&c, "counting");
    struct tr_allocator a;
    tr_alloc_init(&a, &ops);
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.current, 0);
    ck_assert_uint_eq(s.peak, 0);
    ck_assert_str_eq(tr_alloc_error(&a), "");

    take(&a, TR_REGION_PARAMS, 1000);
    take(&a, TR_REGION_GRADS, 4096);
    void *arena = take(&a, TR_REGION_ARENA, MIB);
    tr_alloc_stats(&a, &s);
    assert_region(&s, TR_REGION_PARAMS, 1000, 1000, 1, 0);
    assert_region(&s, TR_REGION_GRADS, 4096, 4096, 1, 0);
    assert_region(&s, TR_REGION_ARENA, MIB, MIB, 1, 0);
    assert_region(&s, TR_REGION_OPTIMIZER, 0, 0, 0, 0);
    ck_assert_uint_eq(s.current, 1000 + 4096 + MIB);
    ck_assert_uint_eq(s.peak, 1000 + 4096 + MIB);
    ck_assert_uint_eq(s.allocs, 3);
    ck_assert_uint_eq(s.frees, 0);
    ck_assert_int_eq(c.allocs, 3);

    tr_alloc_release(&a, TR_REGION_ARENA);
    ck_assert_int_eq(c.frees, 1);
    ck_assert_ptr_eq(c.last_freed, arena);
    tr_alloc_release(&a, TR_REGION_ARENA);   /* not held: nothing */
    tr_alloc_release(&a, TR_REGION_DATA);
    ck_assert_int_eq(c.frees, 1);
    take(&a, TR_REGION_ARENA, 512 * KIB);
    tr_alloc_stats(&a, &s);
    assert_region(&s, TR_REGION_ARENA, 512 * KIB, MIB, 2, 1);
    ck_assert_uint_eq(s.current, 1000 + 4096 + 512 * KIB);
    ck_assert_uint_eq(s.peak, 1000 + 4096 + MIB);
    ck_assert_uint_eq(s.allocs, 4);
    ck_assert_uint_eq(s.frees, 1);

    tr_alloc_destroy(&a);
    ck_assert_int_eq(c.allocs, 4);
    ck_assert_int_eq(c.frees, 4);
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.current, 0);
    ck_assert_uint_eq(s.peak, 1000 + 4096 + MIB);
    tr_alloc_destroy(&a);   /* twice is harmless */
    ck_assert_int_eq(c.frees, 4);
}
END_TEST

/* A region is replaced only through an explicit release: asking again is an error that
 * changes nothing. */
START_TEST(asking_twice_refused)
{
    struct counting c = {0};
    struct tr_memory_ops ops = counting_ops(&c, "counting");
    struct tr_allocator a;
    tr_alloc_init(&a, &ops);
    void *first = take(&a, TR_REGION_PARAMS, 1000);
    void *p = (void *)&c;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_PARAMS, 2000, &p), TR_EINVAL);
    ck_assert_str_eq(tr_alloc_error(&a),
                     "params: already held (1000 B); release it before asking again");
    ck_assert_ptr_eq(p, &c);
    ck_assert_int_eq(c.allocs, 1);
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    assert_region(&s, TR_REGION_PARAMS, 1000, 1000, 1, 0);
    ck_assert_uint_eq(s.current, 1000);

    tr_alloc_release(&a, TR_REGION_PARAMS);
    ck_assert_ptr_eq(c.last_freed, first);
    take(&a, TR_REGION_PARAMS, 2000);
    ck_assert_str_eq(tr_alloc_error(&a), "");   /* a success clears the last failure */
    tr_alloc_destroy(&a);
    ck_assert_int_eq(c.frees, 2);
}
END_TEST

START_TEST(invalid_arguments)
{
    struct tr_allocator a;
    tr_alloc_init(&a, NULL);
    void *p = NULL;
    ck_assert_int_eq(tr_alloc_region(&a, TR_NREGIONS, 64, &p), TR_EINVAL);
    ck_assert_str_eq(tr_alloc_error(&a), "tr_alloc_region: not a region");
    ck_assert_int_eq(tr_alloc_region(&a, (enum tr_region)-1, 64, &p), TR_EINVAL);
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_DATA, 64, NULL), TR_EINVAL);
    ck_assert_str_eq(tr_alloc_error(&a), "tr_alloc_region: no place for the pointer (out is NULL)");
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.allocs, 0);
    ck_assert_uint_eq(s.current, 0);
    tr_alloc_release(&a, TR_NREGIONS);   /* not a region: nothing */
    tr_alloc_destroy(&a);
}
END_TEST

/* Zero bytes holds the region (plain SGD has no optimizer state) without calling the ops. */
START_TEST(zero_bytes)
{
    struct counting c = {0};
    struct tr_memory_ops ops = counting_ops(&c, "counting");
    struct tr_allocator a;
    tr_alloc_init(&a, &ops);
    void *p = (void *)&c;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_OPTIMIZER, 0, &p), 0);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(c.allocs, 0);
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_OPTIMIZER, 0, &p), TR_EINVAL);
    ck_assert_str_eq(tr_alloc_error(&a),
                     "optimizer: already held (0 B); release it before asking again");
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    assert_region(&s, TR_REGION_OPTIMIZER, 0, 0, 1, 0);
    tr_alloc_release(&a, TR_REGION_OPTIMIZER);
    ck_assert_int_eq(c.frees, 0);
    tr_alloc_stats(&a, &s);
    assert_region(&s, TR_REGION_OPTIMIZER, 0, 0, 1, 1);
    tr_alloc_destroy(&a);
}
END_TEST

/* Aligned for every size, and zeroed even where the heap hands back memory it had dirtied. */
START_TEST(aligned_and_zeroed)
{
    static const size_t sizes[] = {1, 7, 63, 64, 65, 1000, 4095, 4096, 4097, 200 * KIB + 3,
                                   MIB + 1};
    struct tr_allocator a;
    tr_alloc_init(&a, NULL);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        for (int round = 0; round < 2; round++) {
            unsigned char *dirt = malloc(n);   /* a freed, dirtied block the heap may reuse */
            ck_assert_ptr_nonnull(dirt);
            memset(dirt, 0xAB, n);
            free(dirt);
            unsigned char *p = take(&a, TR_REGION_WORKSPACE, n);
            ck_assert_msg((uintptr_t)p % TR_ALLOC_ALIGN == 0, "%zu bytes at %p", n, (void *)p);
            size_t k = 0;
            while (k < n && p[k] == 0)   /* one assertion, not a million: ASan is slow */
                k++;
            ck_assert_msg(k == n, "%zu bytes: byte %zu is %d", n, k, k < n ? p[k] : 0);
            memset(p, 0xCD, n);   /* dirty it for the next round's block */
            tr_alloc_release(&a, TR_REGION_WORKSPACE);
        }
    }
    tr_alloc_destroy(&a);
}
END_TEST

/* The limit met exactly is accepted; one byte past it is refused with the whole story, and
 * the refusal neither calls the ops nor changes what is held. */
START_TEST(limit_exact)
{
    struct counting c = {0};
    struct tr_memory_ops ops = counting_ops(&c, "counting");
    struct tr_allocator a;
    tr_alloc_init(&a, &ops);
    ck_assert_int_eq(tr_alloc_set_limit(&a, MIB), 0);
    take(&a, TR_REGION_PARAMS, 768 * KIB);

    void *p = (void *)&c;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_ARENA, 256 * KIB + 1, &p), TR_ENOMEM);
    ck_assert_str_eq(tr_alloc_error(&a), "arena: 256.00 KiB more would exceed the 1.00 MiB "
                                         "limit by 1 B (768.00 KiB already held: params 768.00 KiB)");
    ck_assert_ptr_eq(p, &c);
    ck_assert_int_eq(c.allocs, 1);
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.current, 768 * KIB);
    ck_assert_uint_eq(s.refused, 1);
    assert_region(&s, TR_REGION_ARENA, 0, 0, 0, 0);

    take(&a, TR_REGION_ARENA, 256 * KIB);
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.current, MIB);
    ck_assert_uint_eq(s.limit, MIB);

    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_DATA, 1, &p), TR_ENOMEM);
    ck_assert_str_eq(tr_alloc_error(&a), "data: 1 B more would exceed the 1.00 MiB limit by 1 B "
                                         "(1.00 MiB already held: params 768.00 KiB, "
                                         "arena 256.00 KiB)");
    take(&a, TR_REGION_DATA, 0);   /* nothing more: fits a full budget */

    /* A size near SIZE_MAX must not wrap the sum into something that fits. */
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_WORKSPACE, SIZE_MAX, &p), TR_ENOMEM);
    tr_alloc_release(&a, TR_REGION_PARAMS);
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_WORKSPACE, SIZE_MAX, &p), TR_ENOMEM);
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.refused, 4);
    ck_assert_int_eq(c.allocs, 2);
    tr_alloc_destroy(&a);
}
END_TEST

START_TEST(limit_nothing_held)
{
    struct tr_allocator a;
    tr_alloc_init(&a, NULL);
    ck_assert_int_eq(tr_alloc_set_limit(&a, 8 * GIB), 0);
    void *p = NULL;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_ARENA, 9 * GIB, &p), TR_ENOMEM);
    ck_assert_str_eq(tr_alloc_error(&a), "arena: 9.00 GiB more would exceed the 8.00 GiB limit by "
                                         "1.00 GiB (nothing else held)");
    ck_assert_ptr_null(p);
    tr_alloc_destroy(&a);
}
END_TEST

/* A limit below what is held is refused and the old one kept; 0 removes the limit. */
START_TEST(set_limit)
{
    struct tr_allocator a;
    tr_alloc_init(&a, NULL);
    take(&a, TR_REGION_PARAMS, 2 * KIB);
    take(&a, TR_REGION_GRADS, 2 * KIB);
    ck_assert_int_eq(tr_alloc_set_limit(&a, 8 * KIB), 0);
    ck_assert_int_eq(tr_alloc_set_limit(&a, 4 * KIB - 1), TR_EINVAL);
    ck_assert_str_eq(tr_alloc_error(&a), "a limit of 4.00 KiB is below what is held (4.00 KiB "
                                         "already held: params 2.00 KiB, grads 2.00 KiB)");
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.limit, 8 * KIB);
    ck_assert_int_eq(tr_alloc_set_limit(&a, 4 * KIB), 0);   /* exactly what is held */
    void *p;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_DATA, 1, &p), TR_ENOMEM);
    ck_assert_int_eq(tr_alloc_set_limit(&a, 0), 0);
    take(&a, TR_REGION_DATA, 64 * KIB);
    tr_alloc_destroy(&a);
}
END_TEST

/* Memory ops that return NULL: TR_ENOMEM and a sentence, never a crash, and the regions
 * already held stay held. */
START_TEST(ops_failure)
{
    struct counting c = {.fail_at = 3};
    struct tr_memory_ops ops = counting_ops(&c, "fake");
    struct tr_allocator a;
    tr_alloc_init(&a, &ops);
    take(&a, TR_REGION_PARAMS, 3 * GIB / 2 / 1024);   /* 1.50 MiB */
    take(&a, TR_REGION_GRADS, 3 * GIB / 2 / 1024);
    void *p = (void *)&c;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_OPTIMIZER, 3 * GIB / 2, &p), TR_ENOMEM);
    ck_assert_str_eq(tr_alloc_error(&a), "optimizer: the fake memory could not provide 1.50 GiB "
                                         "(3.00 MiB already held: params 1.50 MiB, grads 1.50 MiB)");
    ck_assert_ptr_eq(p, &c);
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.failed, 1);
    ck_assert_uint_eq(s.refused, 0);
    ck_assert_uint_eq(s.allocs, 2);
    ck_assert_uint_eq(s.current, 3 * MIB);
    assert_region(&s, TR_REGION_OPTIMIZER, 0, 0, 0, 0);
    tr_alloc_destroy(&a);
    ck_assert_int_eq(c.frees, 2);
}
END_TEST

static void *null_alloc(size_t bytes, void *ctx)
{
    (void)bytes, (void)ctx;
    return NULL;
}

static void never_free(void *p, void *ctx)
{
    (void)p, (void)ctx;
    ck_abort_msg("free called for memory never given");
}

START_TEST(ops_always_null)
{
    struct tr_memory_ops ops = {null_alloc, never_free, NULL, "fake"};
    struct tr_allocator a;
    tr_alloc_init(&a, &ops);
    void *p = NULL;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_ARENA, 1, &p), TR_ENOMEM);
    ck_assert_str_eq(tr_alloc_error(&a),
                     "arena: the fake memory could not provide 1 B (nothing else held)");
    tr_alloc_destroy(&a);
}
END_TEST

/* Ops that break their promise of alignment are caught, and the block goes back to them. */
static _Alignas(64) unsigned char misaligned_pool[256];
static void *misaligned_alloc(size_t bytes, void *ctx)
{
    (void)bytes, (void)ctx;
    return misaligned_pool + 8;
}

static void record_free(void *p, void *ctx)
{
    *(void **)ctx = p;
}

START_TEST(ops_misaligned)
{
    void *freed = NULL;
    struct tr_memory_ops ops = {misaligned_alloc, record_free, &freed, "odd"};
    struct tr_allocator a;
    tr_alloc_init(&a, &ops);
    void *p = NULL;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_COPIES, 100, &p), TR_EINVAL);
    ck_assert_str_eq(tr_alloc_error(&a),
                     "copies: the odd memory returned a block that is not 64-byte aligned");
    ck_assert_ptr_eq(freed, misaligned_pool + 8);
    ck_assert_ptr_null(p);
    struct tr_alloc_stats s;
    tr_alloc_stats(&a, &s);
    ck_assert_uint_eq(s.current, 0);
    ck_assert_uint_eq(s.failed, 1);
    tr_alloc_destroy(&a);
}
END_TEST

/* The real heap refusing an impossible size: TR_ENOMEM, not a crash. (ASan aborts on such a
 * size unless allocator_may_return_null=1, so there the fake ops above stand in.) */
START_TEST(system_failure)
{
    if (UNDER_ASAN)
        return;
    struct tr_allocator a;
    tr_alloc_init(&a, NULL);
    void *p = NULL;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_ARENA, SIZE_MAX - 4096, &p), TR_ENOMEM);
    ck_assert_str_eq(tr_alloc_error(&a),
                     "arena: the cpu memory could not provide 16.00 EiB (nothing else held)");
    ck_assert_ptr_null(p);
    tr_alloc_destroy(&a);
}
END_TEST

START_TEST(summary_table)
{
    struct tr_allocator a;
    tr_alloc_init(&a, NULL);
    take(&a, TR_REGION_PARAMS, 1000);
    take(&a, TR_REGION_ARENA, 3 * MIB / 2);
    tr_alloc_release(&a, TR_REGION_ARENA);
    take(&a, TR_REGION_ARENA, MIB);
    ck_assert_int_eq(tr_alloc_set_limit(&a, 4 * MIB), 0);
    void *p;
    ck_assert_int_eq(tr_alloc_region(&a, TR_REGION_DATA, 8 * MIB, &p), TR_ENOMEM);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    tr_alloc_summary(&a, f);
    fclose(f);
    ck_assert_str_eq(text,
                     "memory (cpu)\n"
                     "  region          current         peak   allocs    frees\n"
                     "  params           1000 B       1000 B        1        0\n"
                     "  copies              0 B          0 B        0        0\n"
                     "  grads               0 B          0 B        0        0\n"
                     "  optimizer           0 B          0 B        0        0\n"
                     "  arena          1.00 MiB     1.50 MiB        2        1\n"
                     "  workspace           0 B          0 B        0        0\n"
                     "  data                0 B          0 B        0        0\n"
                     "  total          1.00 MiB     1.50 MiB        3        1\n"
                     "  limit 4.00 MiB; 1 refused by it, 0 failed in the cpu memory\n");
    free(text);
    tr_alloc_destroy(&a);
}
END_TEST

/* ---- the process footprint ---- */

START_TEST(rss_readable)
{
    int64_t rss = tr_process_rss(), peak = tr_process_peak_rss();
    ck_assert_msg(rss > 0, "VmRSS: %lld", (long long)rss);
    ck_assert_msg(peak >= rss, "VmHWM %lld below VmRSS %lld", (long long)peak, (long long)rss);
    ck_assert_int_eq(peak % 1024, 0);
}
END_TEST

/* A touched 64 MiB region shows in the resident set and its peak; after it is given back, a
 * reset brings the peak down to the resident set (where clear_refs may be written). The
 * check runs each test in a fresh fork, so nothing earlier inflates the numbers; measured
 * against the resident set before (not the peak before), the growth does not depend on the
 * peak being reset. */
START_TEST(peak_rss_follows_region)
{
    const int64_t region = 64 * (int64_t)MIB, grown = 60 * (int64_t)MIB;
    int reset_ok = tr_process_reset_peak() == 0;
    int64_t rss0 = tr_process_rss(), peak0 = tr_process_peak_rss();
    ck_assert(rss0 > 0 && peak0 > 0);

    struct tr_allocator a;
    tr_alloc_init(&a, NULL);
    unsigned char *p = take(&a, TR_REGION_ARENA, (size_t)region);
    long page = sysconf(_SC_PAGESIZE);
    for (int64_t k = 0; k < region; k += page)   /* the memset did it; a lazy ops would not */
        p[k] = 1;
    int64_t rss1 = tr_process_rss(), peak1 = tr_process_peak_rss();
    ck_assert_msg(rss1 - rss0 >= grown, "VmRSS grew by %lld bytes", (long long)(rss1 - rss0));
    ck_assert_msg(peak1 - rss0 >= grown, "VmHWM %lld, VmRSS before %lld", (long long)peak1,
                  (long long)rss0);
    if (reset_ok)
        ck_assert_msg(peak1 - peak0 >= grown, "VmHWM grew by %lld bytes",
                      (long long)(peak1 - peak0));
    tr_alloc_destroy(&a);

    if (tr_process_reset_peak() != 0) {
        fprintf(stderr, "check_alloc: /proc/self/clear_refs not writable; reset not checked\n");
        return;
    }
    int64_t peak2 = tr_process_peak_rss(), rss2 = tr_process_rss();
    /* The peak is now the resident set of the moment, give or take the pages the two reads
     * themselves touch. */
    ck_assert_msg(peak2 <= rss2 + 4 * (int64_t)MIB, "VmHWM %lld after reset, VmRSS %lld",
                  (long long)peak2, (long long)rss2);
    /* ASan holds freed blocks in quarantine, so the region's pages stay resident there. */
    if (!UNDER_ASAN)
        ck_assert_msg(peak2 <= peak1 - 32 * (int64_t)MIB, "VmHWM %lld after reset, %lld before",
                      (long long)peak2, (long long)peak1);
}
END_TEST

/* Many small blocks, so that glibc serves them from its arena rather than mmap. tr_xmalloc is
 * in another file, so the compiler cannot elide the blocks. */
START_TEST(heap_in_use_follows_malloc)
{
    enum { BLOCKS = 1024, BLOCK = 1024 };
    size_t before = tr_heap_in_use();
    ck_assert_msg(before > 0, "tr_heap_in_use is 0: no mallinfo2 here");
    void **blocks = tr_xmalloc(BLOCKS * sizeof *blocks);
    for (int i = 0; i < BLOCKS; i++)
        blocks[i] = tr_xmalloc(BLOCK);
    size_t during = tr_heap_in_use();
    ck_assert_msg(during >= before + BLOCKS * BLOCK, "heap in use %zu, %zu before", during,
                  before);
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
    free(blocks);
    size_t after = tr_heap_in_use();
    ck_assert_msg(after + BLOCKS * BLOCK <= during, "heap in use %zu after the frees, %zu during",
                  after, during);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("regions");
    tcase_add_test(tc, region_names);
    tcase_add_test(tc, format_bytes);
    tcase_add_test(tc, statistics_exact);
    tcase_add_test(tc, asking_twice_refused);
    tcase_add_test(tc, invalid_arguments);
    tcase_add_test(tc, zero_bytes);
    tcase_add_test(tc, aligned_and_zeroed);
    tcase_add_test(tc, limit_exact);
    tcase_add_test(tc, limit_nothing_held);
    tcase_add_test(tc, set_limit);
    tcase_add_test(tc, ops_failure);
    tcase_add_test(tc, ops_always_null);
    tcase_add_test(tc, ops_misaligned);
    tcase_add_test(tc, system_failure);
    tcase_add_test(tc, summary_table);
    suite_add_tcase(s, tc);
    TCase *fp = tcase_create("footprint");
    tcase_set_timeout(fp, 60);
    tcase_add_test(fp, rss_readable);
    tcase_add_test(fp, peak_rss_follows_region);
    tcase_add_test(fp, heap_in_use_follows_malloc);
    suite_add_tcase(s, fp);
    return unit_run(s);
}
