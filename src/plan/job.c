/* What the planner is given (plan.h): the device — a named profile or this host, calibrated —
 * and the job: the data's longest sequence, the process's footprint so far, the budget. */
#include "plan/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomic.h"
#include "data/cache.h"
#include "recipe/schema.h"

/* The profiles file: $TRAINRUN_DEVICES, else etc/devices.yaml in a checkout, else the
 * installed one. */
static const char *profiles_path(void)
{
    const char *env = getenv("TRAINRUN_DEVICES");
    if (env && *env)
        return env;
    return access("etc/devices.yaml", F_OK) == 0 ? "etc/devices.yaml" : PKGDATADIR "/devices.yaml";
}

int tr_plan_device(struct tr_device *d, const char *profile, bool recalibrate, struct tr_diag *diag)
{
    if (profile)
        return tr_device_profile(profiles_path(), profile, d, diag);
    const char *off = getenv("TRAINRUN_NO_CACHE");
    char *dir = off && *off && strcmp(off, "0") ? NULL : tr_cache_path("calibration");
    int rc = tr_device_host(d, "/proc/self/exe", dir, recalibrate, diag);
    free(dir);
    return rc;
}

int tr_plan_device_named(struct tr_device *d, const char *device, struct tr_diag *diag)
{
    if (!strcmp(device, "cpu") || (!strcmp(device, "auto") && !tr_device_cuda_seen()))
        return tr_plan_device(d, NULL, false, diag);
    int index = !strncmp(device, "cuda:", 5) ? atoi(device + 5) : 0;   /* the recipe checked the form */
    return tr_device_cuda(d, index, profiles_path(), diag);
}

const struct tr_backend_ops *tr_plan_backend(const struct tr_device *dev)
{
    struct tr_diag ignored = {0};
    const struct tr_backend_ops *ops = tr_backend_ops_for(dev->kind, &ignored);
    tr_diag_free(&ignored);
    return ops;
}

tr_workspace_fn tr_plan_workspace(const struct tr_device *dev)
{
    const struct tr_backend_ops *ops = tr_plan_backend(dev);
    return ops ? ops->workspace_bytes : NULL;
}

/* The kind of data (enum tr_data_kind) a model reads. */
static int model_reads(int arch)
{
    return arch == TR_ARCH_BERT ? TR_DATA_TEXT_CLASSES : arch == TR_ARCH_GPT ? TR_DATA_TEXT_LM : TR_DATA_FEATURES;
}

bool tr_plan_overlap(const struct tr_recipe *r, int local_world, int threads)
{
    if (r->distributed.overlap != TR_SWITCH_AUTO)
        return r->distributed.overlap == TR_SWITCH_ON;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > (long)local_world * (threads > 0 ? threads : 1);
}

/* What the machine can spare for offloading, measured: MemAvailable, less (on a CPU device,
 * whose memory the host's is) the device's budget. */
static uint64_t host_spare(const struct tr_device *dev, uint64_t budget)
{
    uint64_t spare = tr_meminfo_bytes("MemAvailable");
    if (dev->kind == TR_DEVICE_CPU)
        spare = spare > budget ? spare - budget : 0;
    return spare;
}

int tr_plan_job_init(struct tr_plan_job *job, const struct tr_recipe *r, const struct tr_data *data,
                     const struct tr_device *dev, struct tr_diag *diag)
{
    if (model_reads(r->model.arch) != data->kind) {
        static const char *const kinds[] = {"feature vectors (csv, idx)", "labelled texts (tsv, jsonl)",
                                            "running text (text)"};
        tr_diag_add(diag, (struct tr_where){0}, "model.arch %s reads %s; data set %s holds %s",
                    tr_keys[tr_key_find("model.arch")].names[r->model.arch], kinds[model_reads(r->model.arch)],
                    data->name, kinds[data->kind]);
        return TR_EINVAL;
    }
    *job = (struct tr_plan_job){.r = r, .data = data, .dev = dev, .seq = 1, .budget = r->budget.memory, .world = 1};
    if (data->kind != TR_DATA_FEATURES) {   /* text: plans for the longest sequence of any split */
        const struct tr_split *sp[3] = {&data->train, &data->valid, &data->test};
        for (int i = 0; i < 3; i++)
            if (sp[i]->n && tr_text_longest(sp[i]) > job->seq)
                job->seq = tr_text_longest(sp[i]);
    }
    if (dev->memory && dev->memory < job->budget)   /* a budget beyond the device is the device */
        job->budget = dev->memory;
    /* this process as it is — binary, libraries, the data as loaded — and its peak so far (what
     * loading held for a while), rounded up so that the few pages two processes differ by do
     * not change the plan; a profile plans another machine, whose process is alike */
    const uint64_t grain = (uint64_t)8 << 20;
    int64_t now = tr_process_rss(), peak = tr_process_peak_rss();
    if (now <= 0)   /* no /proc: the peak stands for both */
        now = peak;
    if (dev->kind == TR_DEVICE_CPU && now > 0) {
        job->base_bytes = ((uint64_t)now + grain - 1) / grain * grain;
        job->prior_peak = peak > 0 ? ((uint64_t)peak + grain - 1) / grain * grain : 0;
    }
    tr_plan_ceiling(job, job->budget, &job->ceiling);   /* a cgroup's or an address-space limit */
    if (job->ceiling.kind != TR_CEILING_NONE)
        job->budget = job->ceiling.bytes;
    job->host_budget = r->budget.host_memory ? r->budget.host_memory : host_spare(dev, job->budget);
    return 0;
}

/* calibration/collectives-<host>.json: {"2": bus bytes a second, …} by ranks. */
static char *collectives_file(void)
{
    const char *off = getenv("TRAINRUN_NO_CACHE");
    if (off && *off && strcmp(off, "0"))
        return NULL;
    char host[128] = "localhost", *dir = tr_cache_path("calibration");
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        *c = *c == '/' ? '_' : *c;
    char *path = dir ? tr_strdup_printf("%s/collectives-%s.json", dir, host) : NULL;
    free(dir);
    return path;
}

double tr_plan_bus_rate_cached(int world, double *latency)
{
    char *path = collectives_file(), key[32];
    json_t *j = path ? json_load_file(path, 0, NULL) : NULL;
    snprintf(key, sizeof key, "%d", world);
    double rate = json_number_value(json_object_get(j, key));
    snprintf(key, sizeof key, "%d.latency", world);   /* caches written before it have none: 0 */
    *latency = json_number_value(json_object_get(j, key));
    *latency = *latency > 0 ? *latency : 0;
    json_decref(j);
    free(path);
    return rate > 0 ? rate : 0;
}

void tr_plan_bus_rate_save(int world, double rate, double latency)
{
    char *path = collectives_file(), key[32];
    if (!path || rate <= 0) {
        free(path);
        return;
    }
    json_t *j = json_load_file(path, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    snprintf(key, sizeof key, "%d", world);
    json_object_set_new(j, key, json_real(rate));
    snprintf(key, sizeof key, "%d.latency", world);
    json_object_set_new(j, key, json_real(latency));
    char *dir = tr_cache_path("calibration");
    struct tr_atomic a;
    struct tr_diag ignored = {0};   /* a cache: not written is not an error */
    if (dir && !tr_make_folders(dir) && !tr_atomic_open(&a, path, &ignored)) {
        json_dumpf(j, a.f, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', a.f);
        tr_atomic_commit(&a, &ignored);
    }
    tr_diag_free(&ignored);
    json_decref(j);
    free(dir), free(path);
}
