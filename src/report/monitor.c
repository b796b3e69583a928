/* The sampler thread (monitor.h). */
#include "report/monitor.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

/* ---- NVML, loaded at run time: the few calls used, with the driver's types -------------------- */

typedef void *nvml_device;
struct nvml_utilization { unsigned gpu, memory; };
struct nvml_memory { unsigned long long total, free, used; };
enum { NVML_SUCCESS = 0, NVML_TEMPERATURE_GPU = 0, NVML_CLOCK_SM = 1 };

struct nvml {
    void *lib;
    int (*init)(void);
    int (*shutdown)(void);
    int (*count)(unsigned *);
    int (*handle)(unsigned, nvml_device *);
    int (*utilization)(nvml_device, struct nvml_utilization *);
    int (*memory)(nvml_device, struct nvml_memory *);
    int (*power)(nvml_device, unsigned *);
    int (*temperature)(nvml_device, int, unsigned *);
    int (*clock)(nvml_device, int, unsigned *);
    int (*reasons)(nvml_device, unsigned long long *);
    nvml_device dev[TR_MONITOR_GPUS];
    int ndev;
};

/* NVML opened and its GPUs listed; 0, or −1 with why in note. */
static int nvml_open(struct nvml *n, char *note, size_t size)
{
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        snprintf(note, size, "GPU monitoring skipped: no NVML (libnvidia-ml.so.1, the driver's) on this host");
        return -1;
    }
    *(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
    *(void **)&n->count = dlsym(n->lib, "nvmlDeviceGetCount_v2");
    *(void **)&n->handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&n->utilization = dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
    *(void **)&n->memory = dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
    *(void **)&n->power = dlsym(n->lib, "nvmlDeviceGetPowerUsage");
    *(void **)&n->temperature = dlsym(n->lib, "nvmlDeviceGetTemperature");
    *(void **)&n->clock = dlsym(n->lib, "nvmlDeviceGetClockInfo");
    *(void **)&n->reasons = dlsym(n->lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!n->reasons)
        *(void **)&n->reasons = dlsym(n->lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    unsigned count = 0;
    if (!n->init || !n->count || !n->handle || n->init() != NVML_SUCCESS) {
        snprintf(note, size, "GPU monitoring skipped: NVML would not start");
        dlclose(n->lib);
        n->lib = NULL;
        return -1;
    }
    if (n->count(&count) != NVML_SUCCESS)
        count = 0;
    for (unsigned i = 0; i < count && n->ndev < TR_MONITOR_GPUS; i++)
        if (n->handle(i, &n->dev[n->ndev]) == NVML_SUCCESS)
            n->ndev++;
    snprintf(note, size, "NVML: %d GPU%s monitored", n->ndev, n->ndev == 1 ? "" : "s");
    return 0;
}

static void nvml_close(struct nvml *n)
{
    if (!n->lib)
        return;
    if (n->shutdown)
        n->shutdown();
    dlclose(n->lib);
    n->lib = NULL;
}

static void nvml_sample(const struct nvml *n, struct tr_monitor_gpu *g)
{
    for (int i = 0; i < n->ndev; i++) {
        struct nvml_utilization u;
        struct nvml_memory m;
        unsigned v;
        unsigned long long r;
        g[i] = (struct tr_monitor_gpu){NAN, NAN, NAN, NAN, NAN, 0};
        if (n->utilization && n->utilization(n->dev[i], &u) == NVML_SUCCESS)
            g[i].utilization = u.gpu;
        if (n->memory && n->memory(n->dev[i], &m) == NVML_SUCCESS)
            g[i].memory_used = (double)m.used;
        if (n->power && n->power(n->dev[i], &v) == NVML_SUCCESS)
            g[i].power = v * 1e-3;
        if (n->temperature && n->temperature(n->dev[i], NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
            g[i].temperature = v;
        if (n->clock && n->clock(n->dev[i], NVML_CLOCK_SM, &v) == NVML_SUCCESS)
            g[i].sm_clock = v;
        if (n->reasons && n->reasons(n->dev[i], &r) == NVML_SUCCESS)
            g[i].throttle = r;
    }
}

/* NVML's clock event reasons (nvml.h's nvmlClocksEventReason*). */
static const struct { uint64_t bit; const char *words; bool held_back; } reasons[] = {
    {0x1, "idle", false},
    {0x2, "application clocks setting", false},
    {0x4, "power cap (software)", true},
    {0x8, "slowdown (hardware)", true},
    {0x10, "sync boost", false},
    {0x20, "thermal slowdown (software)", true},
    {0x40, "thermal slowdown (hardware)", true},
    {0x80, "power brake (hardware)", true},
    {0x100, "display clock setting", false},
};

void tr_monitor_throttle_words(uint64_t r, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (r & reasons[i].bit) {
            int w = snprintf(out + used, size - used, "%s%s", used ? ", " : "", reasons[i].words);
            if (w < 0 || (size_t)w >= size - used)
                break;
            used += (size_t)w;
        }
    if (!used)
        snprintf(out, size, "none");
}

bool tr_monitor_throttled(uint64_t r)
{
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if ((r & reasons[i].bit) && reasons[i].held_back)
            return true;
    return false;
}

/* ---- the host --------------------------------------------------------------------------------- */

/* The sampler reads with open and read into its own stack: no malloc, so the thread never makes
 * a malloc arena of its own (64 MiB of address space, which a job under `ulimit -v` does not
 * have to spare; the planner counts the loader's workers, not this thread). */
static int read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* All cores' busy and total jiffies (/proc/stat's first line); −1 when unreadable. */
static int cpu_jiffies(double *busy, double *total)
{
    char buf[512];
    unsigned long long v[8] = {0};
    int got = read_text("/proc/stat", buf, sizeof buf) ? 0 : sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
                                                                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    if (got < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += (double)v[i];
    *busy = *total - (double)v[3] - (double)v[4];   /* less idle and iowait */
    return 0;
}

/* This process's user + system CPU seconds (/proc/self/stat); NAN when unreadable. */
static double process_cpu_seconds(void)
{
    char buf[1024];
    if (read_text("/proc/self/stat", buf, sizeof buf))
        return NAN;
    char *p = strrchr(buf, ')');   /* the command's name may hold spaces */
    unsigned long utime, stime;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return NAN;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* The cores' mean frequency in MHz: cpufreq's scaling_cur_freq where the kernel has it, else
 * /proc/cpuinfo's "cpu MHz"; NAN when neither says. */
static double cpu_mhz(void)
{
    double sum = 0;
    int n = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < cores && c < 1024; c++) {
        char path[96], text[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/cpufreq/scaling_cur_freq", c);
        double khz;
        if (!read_text(path, text, sizeof text) && sscanf(text, "%lf", &khz) == 1)
            sum += khz / 1000, n++;
    }
    if (n)
        return sum / n;
    static char info[1 << 16];   /* only the sampler thread reads it */
    if (read_text("/proc/cpuinfo", info, sizeof info))
        return NAN;
    for (char *at = strstr(info, "cpu MHz"); at; at = strstr(at + 1, "cpu MHz")) {
        double mhz;
        char *colon = strchr(at, ':');
        if (colon && sscanf(colon + 1, "%lf", &mhz) == 1)
            sum += mhz, n++;
    }
    return n ? sum / n : NAN;
}

/* The resident set (/proc/self/status's VmRSS) in bytes; −1 when unreadable. */
static int64_t rss_bytes(void)
{
    char buf[4096];
    long long kib;
    const char *at = read_text("/proc/self/status", buf, sizeof buf) ? NULL : strstr(buf, "VmRSS:");
    return at && sscanf(at + 6, "%lld", &kib) == 1 ? (int64_t)kib * 1024 : -1;
}

/* ---- the thread ------------------------------------------------------------------------------- */

struct sums {
    int n;
    double v[4];              /* cpu utilization, process cores, MHz, rss */
    int vn[4];
    double g[TR_MONITOR_GPUS][5];
    int gn[TR_MONITOR_GPUS][5];
    uint64_t throttle[TR_MONITOR_GPUS];
};

struct tr_monitor {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    double interval, began;
    struct nvml nvml;
    char note[160];
    struct sums since, run;   /* since the last take; over the whole run */
    double peak_temperature[TR_MONITOR_GPUS], peak_power[TR_MONITOR_GPUS];
    double cost;              /* seconds the samples took, together */
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void add(struct sums *s, const double v[4], const struct tr_monitor_gpu *g, int ngpu)
{
    s->n++;
    for (int i = 0; i < 4; i++)
        if (isfinite(v[i]))
            s->v[i] += v[i], s->vn[i]++;
    for (int d = 0; d < ngpu; d++) {
        double gv[5] = {g[d].utilization, g[d].memory_used, g[d].power, g[d].temperature, g[d].sm_clock};
        for (int i = 0; i < 5; i++)
            if (isfinite(gv[i]))
                s->g[d][i] += gv[i], s->gn[d][i]++;
        s->throttle[d] |= g[d].throttle;
    }
}

static void means(const struct sums *s, int ngpu, struct tr_monitor_means *out)
{
    *out = (struct tr_monitor_means){.n = s->n, .gpus = ngpu};
    double *field[4] = {&out->cpu_utilization, &out->process_cores, &out->cpu_mhz, &out->rss};
    for (int i = 0; i < 4; i++)
        *field[i] = s->vn[i] ? s->v[i] / s->vn[i] : NAN;
    for (int d = 0; d < ngpu; d++) {
        double *gf[5] = {&out->gpu[d].utilization, &out->gpu[d].memory_used, &out->gpu[d].power,
                         &out->gpu[d].temperature, &out->gpu[d].sm_clock};
        for (int i = 0; i < 5; i++)
            *gf[i] = s->gn[d][i] ? s->g[d][i] / s->gn[d][i] : NAN;
        out->gpu[d].throttle = s->throttle[d];
    }
}

static void *sampler(void *arg)
{
    struct tr_monitor *m = arg;
    double busy0 = 0, total0 = 0, cpu0 = process_cpu_seconds(), t0 = now();
    bool have_jiffies = cpu_jiffies(&busy0, &total0) == 0;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double at = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + m->interval;
        until.tv_sec = (time_t)at, until.tv_nsec = (long)((at - floor(at)) * 1e9);
        pthread_cond_timedwait(&m->wake, &m->lock, &until);
        if (m->stop)
            break;
        pthread_mutex_unlock(&m->lock);
        double began = now(), busy, total, cpu = process_cpu_seconds(), v[4];
        bool jiffies = cpu_jiffies(&busy, &total) == 0;
        v[0] = jiffies && have_jiffies && total > total0 ? 100 * (busy - busy0) / (total - total0) : NAN;
        v[1] = began > t0 ? (cpu - cpu0) / (began - t0) : NAN;
        v[2] = cpu_mhz();
        int64_t rss = rss_bytes();
        v[3] = rss > 0 ? (double)rss : NAN;
        struct tr_monitor_gpu g[TR_MONITOR_GPUS];
        nvml_sample(&m->nvml, g);
        busy0 = busy, total0 = total, have_jiffies = jiffies, cpu0 = cpu, t0 = began;
        double took = now() - began;
        pthread_mutex_lock(&m->lock);
        add(&m->since, v, g, m->nvml.ndev);
        add(&m->run, v, g, m->nvml.ndev);
        for (int d = 0; d < m->nvml.ndev; d++) {
            m->peak_temperature[d] = fmax(m->peak_temperature[d], isfinite(g[d].temperature) ? g[d].temperature : 0);
            m->peak_power[d] = fmax(m->peak_power[d], isfinite(g[d].power) ? g[d].power : 0);
        }
        m->cost += took;
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

struct tr_monitor *tr_monitor_start(double interval)
{
    if (!(interval > 0))
        return NULL;
    struct tr_monitor *m = tr_xcalloc(1, sizeof *m);
    m->interval = interval, m->began = now();
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    nvml_open(&m->nvml, m->note, sizeof m->note);
    pthread_attr_t attr;   /* a small stack: its reads take a few KiB, the default reserves 8 MiB */
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int failed = pthread_create(&m->thread, &attr, sampler, m);
    pthread_attr_destroy(&attr);
    if (failed) {
        nvml_close(&m->nvml);
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->wake);
        free(m);
        return NULL;
    }
    return m;
}

void tr_monitor_take(struct tr_monitor *m, struct tr_monitor_means *out)
{
    *out = (struct tr_monitor_means){0};
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    means(&m->since, m->nvml.ndev, out);
    memset(&m->since, 0, sizeof m->since);
    pthread_mutex_unlock(&m->lock);
}

static json_t *number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *tr_monitor_stop(struct tr_monitor *m)
{
    if (!m)
        return NULL;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_cond_signal(&m->wake);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    struct tr_monitor_means run;
    means(&m->run, m->nvml.ndev, &run);
    json_t *gpus = json_array();
    for (int d = 0; d < run.gpus; d++) {
        char words[256];
        tr_monitor_throttle_words(run.gpu[d].throttle, words, sizeof words);
        json_array_append_new(gpus, json_pack("{so so so so so so so ss sb}", "utilization", number(run.gpu[d].utilization),
                                              "memory_used_bytes", number(run.gpu[d].memory_used), "power_watts",
                                              number(run.gpu[d].power), "temperature_c", number(run.gpu[d].temperature),
                                              "sm_clock_mhz", number(run.gpu[d].sm_clock), "peak_temperature_c",
                                              number(m->peak_temperature[d]), "peak_power_watts",
                                              number(m->peak_power[d]), "throttle_reasons", words, "throttled",
                                              tr_monitor_throttled(run.gpu[d].throttle)));
    }
    json_t *j = json_pack("{sf si so so so so so so ss}", "interval_seconds", m->interval, "samples", run.n,
                          "sample_seconds", number(run.n ? m->cost / run.n : NAN), "cpu_utilization",
                          number(run.cpu_utilization), "process_cores", number(run.process_cores), "cpu_mhz",
                          number(run.cpu_mhz), "rss_bytes", number(run.rss), "gpus", gpus, "note", m->note);
    nvml_close(&m->nvml);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->wake);
    free(m);
    return j;
}
