/* This host's ceilings on a job's footprint, below the recipe's budget (plan.h): the memory
 * cgroup's memory.max or memory.high (containers, systemd's MemoryMax=), and the address-space
 * limits RLIMIT_AS and RLIMIT_DATA, which count what is reserved, not what is touched. The
 * planner plans within the tightest (job.c) and, when nothing fits, names the limit that would
 * do; main checks the part known before the plan (cli/limits.c). */
#include "plan/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/blas.h"
#include "core/stop.h"

/* ---- address space ---------------------------------------------------------------------------- */

static const struct {
    int resource;
    const char *name;
    const char *ulimit;   /* the shell's option for it */
    bool data;            /* counted as VmData (else VmSize) */
} space_limits[] = {{RLIMIT_AS, "RLIMIT_AS", "-v", false}, {RLIMIT_DATA, "RLIMIT_DATA", "-d", true}};
#define NLIMITS (sizeof space_limits / sizeof space_limits[0])

static uint64_t limit_bytes(size_t i)
{
    struct rlimit l;
    if (getrlimit(space_limits[i].resource, &l) || l.rlim_cur == RLIM_INFINITY)
        return 0;
    return (uint64_t)l.rlim_cur;
}

static int64_t part(struct tr_space s, size_t i)
{
    return space_limits[i].data ? s.data : s.size;
}

static struct tr_space plus(struct tr_space a, struct tr_space b, int64_t times)
{
    return (struct tr_space){a.size + b.size * times, a.data + b.data * times};
}

/* The threads this process runs now (/proc/self/status), or 1 when it cannot tell. */
static int threads_running(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = 1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

struct tr_space tr_plan_space_pending(const struct tr_device *dev)
{
    struct tr_space pending = {0, 0};
    if (!tr_blas_loaded())
        pending = plus(pending, dev->blas_space, 1);
    if (threads_running() - tr_stop_threads() <= 1)   /* no parallel region yet: OpenMP's team is still to come */
        pending = plus(pending, dev->thread_space, 1);
    return pending;
}

struct tr_limit tr_plan_space_limits(void)
{
    struct tr_limit tightest = {"RLIMIT_AS", 0};
    for (size_t i = 0; i < NLIMITS; i++) {
        uint64_t b = limit_bytes(i);
        if (b && (!tightest.bytes || b < tightest.bytes))
            tightest = (struct tr_limit){space_limits[i].name, b};
    }
    return tightest;
}

/* "RLIMIT_AS is 200 MB; this run reserves about 612 MB of address space: raise it to at least
 * 613 MB (ulimit -v 598634)". MB are 10⁶ bytes, as prlimit and most schedulers take them;
 * ulimit counts KiB. The limit named is a megabyte above the reservation: two processes of the
 * same run reserve a few hundred KB more or less (tests/limits.sh saw 476 MB named, then 477
 * reserved under it). */
static void say_needed(size_t i, uint64_t limit, int64_t need, const char *detail, char *out, size_t size)
{
    unsigned long long mb = ((unsigned long long)need + 999999) / 1000000, kib = (unsigned long long)(mb + 1) * 1000000 / 1024 + 1;
    snprintf(out, size, "%s is %llu MB; this run reserves about %llu MB of address space%s: raise it to at least "
             "%llu MB (ulimit %s %llu)", space_limits[i].name, (unsigned long long)(limit / 1000000), mb, detail,
             mb + 1, space_limits[i].ulimit, kib);
}

int tr_plan_space_refusal(struct tr_space pending, struct tr_space extra, char *why, size_t size)
{
    struct tr_space now = tr_process_space();
    if (now.size < 0)
        return 0;   /* no /proc: nothing measured, nothing refused */
    for (size_t i = 0; i < NLIMITS; i++) {
        uint64_t limit = limit_bytes(i);
        int64_t need = part(now, i) + part(pending, i) + part(extra, i);
        if (!limit || need <= (int64_t)limit)
            continue;
        char detail[256];
        snprintf(detail, sizeof detail, " before its plan's regions (this process %lld MB, then OpenBLAS and the "
                 "threads %lld MB, as `trainrun calibrate` measured them), and the plan more; `trainrun plan` "
                 "names the whole", (long long)(part(now, i) / 1000000), (long long)(part(pending, i) / 1000000));
        say_needed(i, limit, need, detail, why, size);
        return 1;
    }
    return 0;
}

/* The address-space ceilings as footprint ceilings: a footprint (resident bytes, the planner's
 * model) F reserves F + overhead of address space, where the overhead is what the process has
 * reserved beyond its resident set, what it has yet to reserve (OpenBLAS, the threads, the
 * loader's workers) less the resident part the footprint already counts (thread_bytes). */
static void space_ceiling(const struct tr_plan_job *job, struct tr_ceiling *best)
{
    const struct tr_device *dev = job->dev;
    struct tr_space now = tr_process_space();
    if (now.size < 0)
        return;
    struct tr_space pending = plus(tr_plan_space_pending(dev), dev->worker_space, tr_recipe_num_workers(job->r, 0));
    for (size_t i = 0; i < NLIMITS; i++) {
        uint64_t limit = limit_bytes(i);
        if (!limit)
            continue;
        int64_t overhead = part(now, i) + part(pending, i) - (int64_t)job->base_bytes - (int64_t)dev->thread_bytes;
        uint64_t bytes = (int64_t)limit > overhead ? (uint64_t)((int64_t)limit - overhead) : 0;
        if (best->kind != TR_CEILING_NONE && bytes >= best->bytes)
            continue;
        *best = (struct tr_ceiling){.kind = TR_CEILING_SPACE, .bytes = bytes, .limit = limit, .overhead = overhead};
        snprintf(best->name, sizeof best->name, "%s", space_limits[i].name);
    }
}

/* ---- the memory cgroup ------------------------------------------------------------------------ */

static bool read_u64(const char *path, uint64_t *v)
{
    FILE *f = fopen(path, "r");
    unsigned long long x;
    bool ok = f && fscanf(f, "%llu", &x) == 1;   /* "max" does not read: no limit */
    if (f)
        fclose(f);
    if (ok)
        *v = x;
    return ok;
}

/* A key of a memory.stat file ("anon 1234"), or 0. */
static uint64_t stat_key(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    unsigned long long v = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ' ' && sscanf(line + n + 1, "%llu", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

/* The mount point of the cgroup hierarchy of type fstype ("cgroup2"; "cgroup" with option
 * opt, "memory") from /proc/self/mountinfo, into out; false when none. */
static bool mount_point(const char *fstype, const char *opt, struct tr_path *out)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[4096];
    bool found = false;
    while (!found && f && fgets(line, sizeof line, f)) {
        char *sep = strstr(line, " - "), point[2048], type[64], source[256], opts[1024] = "";
        if (!sep || sscanf(line, "%*s %*s %*s %*s %2047s", point) != 1 ||
            sscanf(sep + 3, "%63s %255s %1023s", type, source, opts) < 2)
            continue;
        found = !strcmp(type, fstype) && (!opt || strstr(opts, opt)) && !tr_path_set(out, NULL, "%s", point);
    }
    if (f)
        fclose(f);
    return found;
}

/* This process's cgroup path in the v2 hierarchy ("0::/a/b") or in v1's memory one
 * ("4:memory:/a/b"), from file (/proc/self/cgroup), into out. */
static bool cgroup_path(const char *file, bool v2, struct tr_path *out)
{
    FILE *f = fopen(file, "r");
    char line[4096];
    bool found = false;
    while (!found && f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
        if (!second)
            continue;
        bool is_v2 = !strncmp(line, "0::", 3);
        bool is_memory = !is_v2 && second - first - 1 == 6 && !strncmp(first + 1, "memory", 6);
        if (v2 ? is_v2 : is_memory)
            found = !tr_path_set(out, NULL, "%s", second + 1);
    }
    if (f)
        fclose(f);
    return found;
}

/* The tightest memory limit on the cgroup at root/path and every ancestor up to root: v2's
 * memory.max and memory.high, v1's memory.limit_in_bytes. Fills c (limit, name, said holds the
 * cgroup's path) and returns true when one is set. */
static bool tightest_cgroup(const char *root, const char *path, bool v2, struct tr_ceiling *c, struct tr_path *at)
{
    static const char *const v2_files[] = {"memory.max", "memory.high"}, *const v1_files[] = {"memory.limit_in_bytes"};
    const char *const *files = v2 ? v2_files : v1_files;
    size_t nfiles = v2 ? 2 : 1;
    char rel[4096];
    snprintf(rel, sizeof rel, "%s", path);
    bool found = false;
    for (;;) {
        for (size_t i = 0; i < nfiles; i++) {
            struct tr_path file;
            uint64_t v;
            if (tr_path_set(&file, NULL, "%s%s/%s", root, strcmp(rel, "/") ? rel : "", files[i]) ||
                !read_u64(file.s, &v) || v >= ((uint64_t)1 << 60))   /* v1 writes "no limit" as 2⁶³ − 4096 */
                continue;
            if (!found || v < c->limit) {
                found = true;
                c->limit = v;
                snprintf(c->name, sizeof c->name, "%s", files[i]);
                tr_path_set(at, NULL, "%s", *rel ? rel : "/");
            }
        }
        char *slash = strrchr(rel, '/');
        if (!slash || !strcmp(rel, "/") || !*rel)
            break;
        if (slash == rel)
            snprintf(rel, sizeof rel, "/");
        else
            *slash = '\0';
    }
    return found;
}

/* The memory other processes of that cgroup hold and cannot give back: its anonymous memory
 * (memory.stat's anon, v1's total_rss) less this process's (RssAnon). Page cache is not
 * subtracted: the kernel reclaims it before the limit bites. */
static uint64_t others_anon(const char *root, const char *at, bool v2)
{
    struct tr_path stat;
    if (tr_path_set(&stat, NULL, "%s%s/memory.stat", root, strcmp(at, "/") ? at : ""))
        return 0;
    uint64_t anon = stat_key(stat.s, v2 ? "anon" : "total_rss"), mine = 0;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %llu kB", &kib) == 1)
            mine = (uint64_t)kib * 1024;
    if (f)
        fclose(f);
    return anon > mine ? anon - mine : 0;
}

/* The memory cgroup's ceiling: TRAINRUN_CGROUP_ROOT (a test hook: a v2 tree to read instead of
 * the mounted one, with the process's cgroup in its file cgroup.self, else /proc/self/cgroup),
 * else the cgroup2 mount, else v1's memory controller. */
static void cgroup_ceiling(struct tr_ceiling *best)
{
    const char *hook = getenv("TRAINRUN_CGROUP_ROOT");
    struct tr_path root, path, self, at = {""};
    struct tr_ceiling c = {.kind = TR_CEILING_CGROUP};
    bool v2 = true, found = false;
    if (hook && *hook) {
        if (tr_path_set(&root, NULL, "%s", hook) || tr_path_set(&self, NULL, "%s/cgroup.self", hook))
            return;
        const char *list = access(self.s, R_OK) == 0 ? self.s : "/proc/self/cgroup";
        found = cgroup_path(list, true, &path) && tightest_cgroup(root.s, path.s, true, &c, &at);
    } else {
        found = mount_point("cgroup2", NULL, &root) && cgroup_path("/proc/self/cgroup", true, &path) &&
                tightest_cgroup(root.s, path.s, true, &c, &at);
        if (!found && (v2 = false, mount_point("cgroup", "memory", &root)) &&
            cgroup_path("/proc/self/cgroup", false, &path))
            found = tightest_cgroup(root.s, path.s, false, &c, &at);
    }
    if (!found)
        return;
    uint64_t others = others_anon(root.s, at.s, v2);
    c.bytes = c.limit > others ? c.limit - others : 0;
    c.overhead = (int64_t)others;
    snprintf(c.said, sizeof c.said, "%s", at.s);   /* the cgroup, until the sentence is made */
    if (best->kind == TR_CEILING_NONE || c.bytes < best->bytes)
        *best = c;
}

/* ---- the tightest ------------------------------------------------------------------------------ */

void tr_plan_ceiling(const struct tr_plan_job *job, uint64_t budget, struct tr_ceiling *out)
{
    *out = (struct tr_ceiling){.kind = TR_CEILING_NONE};
    if (!job->dev->this_host || job->dev->kind != TR_DEVICE_CPU)
        return;   /* a profile plans another machine; a GPU's memory is its own */
    cgroup_ceiling(out);
    space_ceiling(job, out);
    if (out->kind == TR_CEILING_NONE || out->bytes >= budget) {
        *out = (struct tr_ceiling){.kind = TR_CEILING_NONE};
        return;
    }
    char within[32], limit[32], budget_s[32], others[32];
    tr_format_bytes(out->bytes, within), tr_format_bytes(out->limit, limit), tr_format_bytes(budget, budget_s);
    if (out->kind == TR_CEILING_CGROUP) {
        char cgroup[sizeof out->said];
        memcpy(cgroup, out->said, sizeof cgroup);
        tr_format_bytes((uint64_t)out->overhead, others);
        snprintf(out->said, sizeof out->said, "%s of cgroup %s is %s%s%s%s: planning within %s, below the budget %s",
                 out->name, cgroup, limit, out->overhead ? " (other processes in it hold " : "",
                 out->overhead ? others : "", out->overhead ? ")" : "", within, budget_s);
    } else {
        snprintf(out->said, sizeof out->said, "%s is %llu MB, and this run reserves about %lld MB of address "
                 "space beyond its footprint (OpenBLAS's buffers, the threads' stacks and malloc arenas, as "
                 "`trainrun calibrate` measured them): planning within %s, below the budget %s", out->name,
                 (unsigned long long)(out->limit / 1000000), (long long)(out->overhead / 1000000), within, budget_s);
    }
}

void tr_plan_ceiling_refusal(const struct tr_ceiling *c, uint64_t footprint, char *out, size_t size)
{
    if (c->kind == TR_CEILING_SPACE) {
        for (size_t i = 0; i < NLIMITS; i++)
            if (!strcmp(space_limits[i].name, c->name))
                say_needed(i, c->limit, (int64_t)footprint + c->overhead, "", out, size);
        return;
    }
    char need[32], limit[32];
    tr_format_bytes(footprint + (uint64_t)c->overhead, need), tr_format_bytes(c->limit, limit);
    snprintf(out, size, "%s (%s) would have to be at least %s", c->name, limit, need);
}
