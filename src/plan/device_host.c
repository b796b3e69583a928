/* This host as a device (device.h): its memory, and a calibration — GEMM rate, bandwidth, the
 * cost of one kernel, what BLAS and OpenMP threads take — measured once by `trainrun
 * calibrate` in a process of its own (so that the threads' buffers are seen growing, not
 * already there) and cached per host, so that nightly runs plan alike. */
#include "plan/device.h"

#include "core/blas.h"
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/onednn.h"
#include "core/alloc.h"
#include "core/atomic.h"
#include "core/error.h"
#include "data/cache.h"
#include "data/sha256.h"

#define CALIBRATION_VERSION 10  /* 4: the address space reserved; 5: each kernel class measured, and
                                 * whether the rounds settled; 6: the optimizer's passes past the
                                 * caches, the norm in parallel pieces and clipping in the update;
                                 * 7: bf16 attention on oneDNN's bf16 GEMMs; 8: a node's
                                 * precision by its first 16-bit input (cost.c), the
                                 * optimizer's pass off a power of two (device_kernels.c); 9: the
                                 * convolutional probe channels last, as the CPU runs it; 10: every
                                 * probe once a round, settled around the median */

/* The CPU backend's kernel choices, which the measured times belong to: oneDNN's ISA and where
 * the f32 and bf16 GEMMs run (TR_CPU_GEMM), and TR_CPU_CONV. A calibration taken with other
 * choices is another host's. */
static void kernel_paths(char *out, size_t size)
{
    char onednn[256];
    const char *conv = getenv("TR_CPU_CONV");
    tr_onednn_describe(onednn, sizeof onednn);
    snprintf(out, size, "%s; convolutions %s", onednn, conv && *conv ? conv : "default");
}

/* The running binary's size and modification time: a rebuilt or upgraded trainrun has other
 * kernels, so its calibration is measured again (into the same file). */
static void binary_identity(char *out, size_t size)
{
    struct stat st;
    if (stat("/proc/self/exe", &st))
        snprintf(out, size, "unknown");
    else
        snprintf(out, size, "%lld bytes, modified %lld.%09ld", (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                 (long)st.st_mtim.tv_nsec);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The first line of /proc/cpuinfo's "model name", or "unknown CPU". */
static void cpu_model(char *out, size_t size)
{
    snprintf(out, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && colon) {
            snprintf(out, size, "%s", colon + 2);
            out[strcspn(out, "\n")] = '\0';
            break;
        }
    }
    if (f)
        fclose(f);
}

uint64_t tr_meminfo_bytes(const char *field)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kib = 0;
    char line[256], want[64];
    snprintf(want, sizeof want, "%s: %%llu kB", field);
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, want, &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib * 1024;
}

static void host_identity(struct tr_device *d)
{
    char host[128] = "localhost", model[256];
    gethostname(host, sizeof host - 1);
    cpu_model(model, sizeof model);
    d->kind = TR_DEVICE_CPU;
    d->this_host = true;
    d->threads = omp_get_max_threads();
    snprintf(d->name, sizeof d->name, "cpu");
    snprintf(d->description, sizeof d->description, "this host (%.60s): %.60s, %d threads", host, model, d->threads);
    d->memory = tr_meminfo_bytes("MemTotal");   /* a memory cgroup's limit is a ceiling (ceiling.c) */
    /* 16-bit storage everywhere; the kernels widen to f32, so 16-bit GEMMs run at the f32 rate */
    for (int p = 0; p < TR_NPRECISIONS; p++)
        d->supports[p] = true;
    d->widen_16bit = 1;
    d->fp16_widened = tr_onednn_computes_bf16();   /* oneDNN 2.6.3 has no f16 kernels for a CPU */
}

/* ---- the measurement ------------------------------------------------------------------------ */

/* Seconds of one sgemm M × N × K, best of five after a warm-up. */
static double time_gemm(int M, int N, int K)
{
    float *a = tr_xmalloc((size_t)M * K * sizeof *a), *b = tr_xmalloc((size_t)K * N * sizeof *b);
    float *c = tr_xmalloc((size_t)M * N * sizeof *c);
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = (float)(i % 7) * 0.125f;
    for (size_t i = 0; i < (size_t)K * N; i++)
        b[i] = (float)(i % 5) * 0.25f;
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = now();
        tr_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
        double t = now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    free(a), free(b), free(c);
    return best;
}

/* Copy bandwidth over buffers far larger than the caches: bytes read + written per second. */
static double measure_bandwidth(void)
{
    const size_t n = (size_t)64 << 20;
    char *a = tr_xmalloc(n), *b = tr_xmalloc(n);
    memset(a, 1, n), memset(b, 2, n);
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (int chunk = 0; chunk < 64; chunk++)
            memcpy(b + (size_t)chunk * (n / 64), a + (size_t)chunk * (n / 64), n / 64);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    free(a), free(b);
    return 2.0 * (double)n / best;
}

/* The fixed cost of one small kernel: a parallel loop over a few thousand floats. */
static double measure_kernel(void)
{
    const int n = 4096, reps = 2000;
    float *x = tr_xcalloc(n, sizeof *x);
    double t0 = now();
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)
            x[i] = x[i] * 0.5f + 1.0f;
    }
    double t = (now() - t0) / reps;
    free(x);
    return t;
}

/* One erf per element over 4 Mi floats, in parallel: what GELU, softmax's exp and dropout's
 * hash cost beyond their bytes. */
static double measure_special(void)
{
    const int n = 1 << 22;
    float *x = tr_xmalloc((size_t)n * sizeof *x);
    for (int i = 0; i < n; i++)
        x[i] = (float)(i % 1000) * 1e-3f - 0.5f;
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    free(x);
    return best / n;
}

static struct tr_space space_since(struct tr_space before)
{
    struct tr_space now = tr_process_space();
    return (struct tr_space){now.size - before.size, now.data - before.data};
}

/* What OpenMP's threads reserve once they have run: their stacks, the malloc arena each
 * thread's first allocation creates (64 MiB of address space, little of it touched), and the
 * buffer OpenBLAS reserves for the thread calling a multithreaded GEMM. Must run before any
 * other parallel region of this process. */
static struct tr_space measure_thread_space(void)
{
    struct tr_space before = tr_process_space();
#pragma omp parallel
    {
        void *volatile small = malloc(64);   /* volatile: not optimised away */
        free(small);
    }
    const int n = 256;   /* 2 × 256³ FLOPs: past OpenBLAS's threshold for threads */
    float *a = tr_xcalloc((size_t)n * n, sizeof *a), *b = tr_xcalloc((size_t)n * n, sizeof *b);
    float *c = tr_xcalloc((size_t)n * n, sizeof *c);
    tr_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    free(a), free(b), free(c);   /* mmapped (256 KiB each), so given back: not counted */
    return space_since(before);
}

struct worker_probe {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage;   /* 1: the worker has allocated; 2: it may end */
};

static void *probe_worker(void *arg)
{
    struct worker_probe *p = arg;
    void *volatile small = malloc(64);
    pthread_mutex_lock(&p->lock);
    p->stage = 1;
    pthread_cond_broadcast(&p->cond);
    while (p->stage != 2)
        pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    free(small);
    return NULL;
}

/* What one more thread reserves while it lives (a data loader's worker): its stack and arena. */
static struct tr_space measure_worker_space(void)
{
    struct worker_probe p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct tr_space before = tr_process_space(), cost = {0, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, probe_worker, &p))
        return cost;
    pthread_mutex_lock(&p.lock);
    while (p.stage != 1)
        pthread_cond_wait(&p.cond, &p.lock);
    cost = space_since(before);
    p.stage = 2;
    pthread_cond_broadcast(&p.cond);
    pthread_mutex_unlock(&p.lock);
    pthread_join(t, NULL);
    return cost;
}

int tr_device_measure(struct tr_device *d, const struct tr_calibration_rule *rule, struct tr_diag *diag)
{
    memset(d, 0, sizeof *d);
    host_identity(d);
    if (!tr_blas_loaded() && tr_blas_load(diag))   /* main loaded it; a test may not have */
        return TR_EIO;
    int64_t before = tr_process_rss();
    if (before < 0) {
        return tr_fail(diag, TR_EIO, "cannot read this process's resident set (/proc/self/status)");
    }
    /* the threads' first region is here, inside the resident set's before and after */
    d->blas_space = tr_blas_load_cost();
    d->thread_space = measure_thread_space();
    d->worker_space = measure_worker_space();
    /* the sustained rate from a large GEMM; a small one's excess time is the fixed cost */
    double flops = 2.0 * 1024 * 1024 * 1024 / time_gemm(1024, 1024, 1024);
    double small = time_gemm(64, 256, 256) - 2.0 * 64 * 256 * 256 / flops;
    d->gemm_seconds = small > 0 ? small : 0;
    d->bandwidth = measure_bandwidth();
    d->node_seconds = measure_kernel();
    d->special_seconds = measure_special();
    int64_t after = tr_process_rss();   /* the matrices are back with the OS: what stays is the threads' */
    d->thread_bytes = after > before ? (uint64_t)(after - before) : 0;
    int rc = tr_device_measure_kernels(d, rule, diag);   /* after the resident set: its buffers are its own */
    if (rc)
        return rc;
    for (int p = 0; p < TR_NPRECISIONS; p++)
        d->gemm_flops[p] = flops;
    time_t t = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    snprintf(d->source, sizeof d->source, "measured on this host by `trainrun calibrate` at %s: sgemm 1024³ "
             "and 64 × 256 × 256 best of 5, memcpy 64 MiB best of 4, a 4096-float parallel loop, GELU's erf over 4 Mi floats, "
             "resident set before and after, address space (VmSize, VmData) around loading OpenBLAS, the threads' first "
             "region and GEMM, one more thread; every kernel class on probe graphs in fp32 and bf16 (fp16 read as bf16, or as fp32 widened where bf16 computes natively), %d rounds "
             "of each, the last %d within %.0f%%", date, rule->max_rounds, rule->window, rule->tolerance * 100);
    return 0;
}

/* ---- the cache ------------------------------------------------------------------------------- */

static json_t *to_json(const struct tr_device *d)
{
    char model[256];
    cpu_model(model, sizeof model);
    json_t *j = json_pack("{si ss ss si sf sf sf sf sf sI ss}", "version", CALIBRATION_VERSION, "cpu", model,
                          "description", d->description, "threads", d->threads, "gemm_flops", d->gemm_flops[0],
                          "gemm_seconds", d->gemm_seconds,
                          "bandwidth", d->bandwidth, "node_seconds", d->node_seconds, "special_seconds",
                          d->special_seconds, "thread_bytes", (json_int_t)d->thread_bytes, "source", d->source);
    char paths[384], binary[128];
    kernel_paths(paths, sizeof paths), binary_identity(binary, sizeof binary);
    json_object_set_new(j, "kernel_paths", json_string(paths));
    json_object_set_new(j, "binary", json_string(binary));
    json_object_set_new(j, "stable", json_boolean(d->stable));
    json_object_set_new(j, "spread", json_real(isfinite(d->spread) ? d->spread : -1));
    json_object_set_new(j, "kernels", tr_kernel_costs_json(&d->kernels));
    json_object_set_new(j, "address_space",
                        json_pack("{s[II] s[II] s[II]}", "blas", (json_int_t)d->blas_space.size,
                                  (json_int_t)d->blas_space.data, "threads", (json_int_t)d->thread_space.size,
                                  (json_int_t)d->thread_space.data, "worker", (json_int_t)d->worker_space.size,
                                  (json_int_t)d->worker_space.data));
    return j;
}

/* The address-space figures ({"blas": [VmSize, VmData], "threads": …, "worker": …}) into d, or
 * −1 when one is missing or negative. */
static int read_spaces(json_t *j, struct tr_device *d)
{
    json_int_t v[6] = {-1, -1, -1, -1, -1, -1};
    if (!j || json_unpack(j, "{s[II] s[II] s[II]}", "blas", &v[0], &v[1], "threads", &v[2], &v[3], "worker",
                          &v[4], &v[5]))
        return -1;
    for (int i = 0; i < 6; i++)
        if (v[i] < 0)
            return -1;
    d->blas_space = (struct tr_space){v[0], v[1]};
    d->thread_space = (struct tr_space){v[2], v[3]};
    d->worker_space = (struct tr_space){v[4], v[5]};
    return 0;
}

/* Whether j's string field key is want. */
static bool string_is(json_t *j, const char *key, const char *want)
{
    json_t *v = json_object_get(j, key);
    return json_is_string(v) && !strcmp(json_string_value(v), want);
}

/* The calibration in j for this host, or −1 when it is another's, another version's, or taken on other
 * kernel paths (kernel_paths). */
static int from_json(json_t *j, struct tr_device *d)
{
    char model[256], paths[384], binary[128];
    cpu_model(model, sizeof model);
    kernel_paths(paths, sizeof paths);
    binary_identity(binary, sizeof binary);
    if (!string_is(j, "kernel_paths", paths) || !string_is(j, "binary", binary))
        return -1;
    json_int_t version = 0, threads = 0, thread_bytes = 0;
    double flops = 0, gemm = 0, bandwidth = 0, node = 0, special = 0;
    const char *cpu = NULL, *source = NULL;
    if (!j || json_unpack(j, "{sI ss sI sF sF sF sF sF sI ss}", "version", &version, "cpu", &cpu, "threads",
                          &threads, "gemm_flops", &flops, "gemm_seconds", &gemm, "bandwidth", &bandwidth, "node_seconds", &node, "special_seconds",
                          &special, "thread_bytes", &thread_bytes, "source", &source) ||
        version != CALIBRATION_VERSION || strcmp(cpu, model) || threads != d->threads || flops <= 0 ||
        bandwidth <= 0 || node < 0 || thread_bytes < 0 || read_spaces(json_object_get(j, "address_space"), d) ||
        tr_kernel_costs_from_json(json_object_get(j, "kernels"), &d->kernels))
        return -1;
    json_t *spread = json_object_get(j, "spread");
    d->stable = json_is_true(json_object_get(j, "stable"));
    d->spread = json_is_number(spread) && json_number_value(spread) >= 0 ? json_number_value(spread) : INFINITY;
    for (int p = 0; p < TR_NPRECISIONS; p++)
        d->gemm_flops[p] = flops;
    d->bandwidth = bandwidth, d->node_seconds = node, d->special_seconds = special, d->gemm_seconds = gemm;
    d->thread_bytes = (uint64_t)thread_bytes;
    snprintf(d->source, sizeof d->source, "%s", source);
    return 0;
}

/* Runs `exe calibrate --json` and reads what it prints. */
static json_t *calibrate_child(const char *exe, struct tr_diag *diag)
{
    int fds[2];
    if (pipe(fds)) {
        tr_fail(diag, TR_EIO, "calibration: pipe: %s", strerror(errno));
        return NULL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]), close(fds[1]);
        execl(exe, exe, "calibrate", "--json", "--no-cache", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        tr_fail(diag, TR_EIO, "calibration: fork: %s", strerror(errno));
        return NULL;
    }
    FILE *in = fdopen(fds[0], "r");
    json_error_t je;
    json_t *j = in ? json_loadf(in, 0, &je) : NULL;
    if (in)
        fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!j || !WIFEXITED(status) || WEXITSTATUS(status)) {
        json_decref(j);
        tr_fail(diag, TR_EIO, "calibration: %s calibrate failed (status %d)", exe, status);
        return NULL;
    }
    return j;
}

static int cache_file(const char *cache_dir, const struct tr_device *d, struct tr_path *out, struct tr_diag *diag)
{
    char host[128] = "localhost";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    char paths[384], hex[65];   /* one file per set of kernel paths: switching back finds the old one */
    kernel_paths(paths, sizeof paths);
    tr_sha256_of(paths, strlen(paths), hex);
    return tr_path_set(out, diag, "%s/%s-%dt-%.8s.json", cache_dir, host, d->threads, hex);
}

int tr_device_host(struct tr_device *d, const char *exe, const char *cache_dir, bool force,
                   struct tr_diag *diag)
{
    memset(d, 0, sizeof *d);
    host_identity(d);
    struct tr_path cache = {""};
    if (cache_dir && cache_file(cache_dir, d, &cache, diag))
        return TR_EINVAL;
    const char *path = cache.s;
    json_error_t je;
    json_t *j = !force && *path ? json_load_file(path, 0, &je) : NULL;
    if (j && from_json(j, d) == 0) {
        json_decref(j);
        d->path = cache;
        return 0;
    }
    json_decref(j);
    if (!(j = calibrate_child(exe, diag)))
        return TR_EIO;
    if (from_json(j, d)) {
        json_decref(j);
        return tr_fail(diag, TR_EIO, "calibration: %s calibrate printed something else than this host's "
                       "calibration", exe);
    }
    if (!d->stable) {   /* used for this plan, never kept: a loaded machine's numbers would stick */
        snprintf(d->unsaved, sizeof d->unsaved, "the measurement did not settle: its rounds still differed by "
                 "%.0f%% after the last round (the machine is busy?)", d->spread * 100);
        d->unsettled = true;
    } else if (*path) {   /* a cache that cannot be written: measured again next time; calibrate says so */
        struct tr_diag unsaved = {0};
        int folder_err = tr_make_folders(cache_dir);
        if (folder_err)
            snprintf(d->unsaved, sizeof d->unsaved, "%s: %s", cache_dir, strerror(folder_err));
        else if (tr_atomic_write_json(path, j, JSON_INDENT(2), &unsaved) == 0)
            d->path = cache;
        else
            snprintf(d->unsaved, sizeof d->unsaved, "%s", tr_diag_last(&unsaved));
        tr_diag_free(&unsaved);
    }
    json_decref(j);
    return 0;
}

/* For the calibrate subcommand: the measurement as the cache keeps it. */
char *tr_device_calibration_json(const struct tr_device *d)
{
    json_t *j = to_json(d);
    char *s = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    return s;
}
