/* The run report's reading half (reporter, DESIGN.md §2): a run folder's recipe.yaml,
 * metrics.jsonl, plan.json and run.json into struct tr_run_report, with the checklist of what the plan
 * turned on and the warnings a person should see first. report_pages.c writes it out. */
#include "report/run_report.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/exit.h"
#include "core/input.h"
#include "recipe/recipe.h"

/* Loss spikes: a logged train/loss above SPIKE_RATIO × the median of the SPIKE_WINDOW logged
 * before it (fewer than SPIKE_MIN_HISTORY: too early to tell). Data-bound: waiting for data
 * more than DATA_BOUND of the time on average. */
enum { SPIKE_WINDOW = 20, SPIKE_MIN_HISTORY = 5 };
static const double SPIKE_RATIO = 3.0, DATA_BOUND = 0.2;
static const double GPU_HOT_C = 85;   /* most data-centre GPUs slow down from the high 80s */

const char *const tr_report_time_names[TR_REPORT_TIMES] = {
    "wall", "data", "forward", "backward", "recompute", "optimizer", "evaluation", "checkpointing", "other"};

static int add_point(struct tr_run_report *rep, const char *name, double step, double value)
{
    struct tr_series *s = NULL;
    for (int i = 0; i < rep->nseries && !s; i++)
        if (!strcmp(rep->series[i].name, name))
            s = &rep->series[i];
    if (!s) {
        struct tr_series *grown = realloc(rep->series, (size_t)(rep->nseries + 1) * sizeof *grown);
        if (!grown)
            return -1;
        rep->series = grown;
        s = &rep->series[rep->nseries++];
        *s = (struct tr_series){.name = strdup(name)};
        if (!s->name)
            return -1;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double *st = realloc(s->step, (size_t)cap * sizeof *st);
        if (st)
            s->step = st;
        double *v = realloc(s->value, (size_t)cap * sizeof *v);
        if (v)
            s->value = v;
        if (!st || !v)
            return -1;
        s->cap = cap;
    }
    s->step[s->n] = step, s->value[s->n++] = value;
    return 0;
}

const struct tr_series *tr_run_report_series(const struct tr_run_report *rep, const char *name)
{
    for (int i = 0; i < rep->nseries; i++)
        if (!strcmp(rep->series[i].name, name))
            return &rep->series[i];
    return NULL;
}

/* metrics.jsonl: a line that does not parse (the last one of a killed run) is skipped. Sets
 * *finished when a test line is there: the trainer writes it only after the last step. */
static int read_metrics(struct tr_run_report *rep, FILE *f, int *finished)
{
    char *line = NULL;
    size_t size = 0;
    int rc = 0;
    while (!rc && getline(&line, &size, f) > 0) {
        json_t *j = json_loads(line, 0, NULL), *v;
        if (!json_is_object(j)) {
            json_decref(j);
            continue;
        }
        double step = json_number_value(json_object_get(j, "step"));
        if (step > (double)rep->last_step)
            rep->last_step = (long long)step;
        const char *key;
        json_object_foreach(j, key, v) {
            if (!strcmp(key, "step") || !json_is_number(v))
                continue;
            if (!strncmp(key, "test/", 5))
                *finished = 1;
            rc = add_point(rep, key, step, json_number_value(v));
            if (rc)
                break;
        }
        json_decref(j);
    }
    free(line);
    return rc;
}

/* The few values of the resolved recipe.yaml the report shows. It is the trainer's own
 * emitter's output (two-space indents, "key: value  # origin"), so a line reader suffices. */
static void read_recipe(struct tr_run_report *rep, FILE *f)
{
    char line[1024], path[4][64] = {{0}};
    while (fgets(line, sizeof line, f)) {
        size_t indent = strspn(line, " ");
        char *key = line + indent, *colon = strchr(key, ':');
        if (indent % 2 || indent / 2 > 3 || !colon || *key == '#' || *key == '-')
            continue;
        *colon = 0;
        int depth = (int)(indent / 2);
        snprintf(path[depth], sizeof path[depth], "%s", key);
        char *value = colon + 1, *hash = strstr(value, " #");
        if (hash)
            *hash = 0;
        value += strspn(value, " ");
        size_t n = strcspn(value, "\r\n");
        while (n && value[n - 1] == ' ')
            n--;
        value[n] = 0;
        if (n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n - 1] == value[0])
            value[n - 1] = 0, value++;
        char dotted[300] = "";
        for (int d = 0; d <= depth; d++)
            snprintf(dotted + strlen(dotted), sizeof dotted - strlen(dotted), "%s%s", d ? "." : "", path[d]);
        if (!strcmp(dotted, "name"))
            snprintf(rep->name, sizeof rep->name, "%s", value);
        else if (!strcmp(dotted, "model.arch"))
            snprintf(rep->arch, sizeof rep->arch, "%s", value);
        else if (!strcmp(dotted, "data.dataset"))
            snprintf(rep->dataset, sizeof rep->dataset, "%s", value);
        else if (!strcmp(dotted, "optimize.amp"))
            snprintf(rep->amp, sizeof rep->amp, "%s", value);
        else if (!strcmp(dotted, "optimize.checkpointing"))
            snprintf(rep->checkpointing, sizeof rep->checkpointing, "%s", value);
        else if (!strcmp(dotted, "data.pin_memory"))
            snprintf(rep->pin_memory, sizeof rep->pin_memory, "%s", value);
        else if (!strcmp(dotted, "data.num_workers"))
            rep->workers = strcmp(value, "auto") ? atoll(value) : -1;   /* -1: auto, sized at the run */
        else if (!strcmp(dotted, "data.prefetch_factor"))
            rep->prefetch = atoll(value);
        else if (!strcmp(dotted, "train.batch_size"))
            rep->batch_size = atoll(value);
    }
}

const char *tr_run_status_word(int exit_code)
{
    return exit_code == TR_EXIT_OK ? "finished" : exit_code == TR_EXIT_REGRESSION ? "regression"
         : exit_code == TR_EXIT_INTERRUPTED ? "interrupted" : exit_code == TR_EXIT_TIME_LIMIT ? "time-limit"
         : "failed";
}

/* When process pid began, in seconds since the epoch (Linux: /proc/PID/stat's start time in
 * clock ticks after boot, and /proc/stat's boot time); −1 when unknown. */
static double process_began(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');   /* the command name may hold spaces and parentheses */
    unsigned long long ticks = 0, boot = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &ticks) != 1)
        return -1;
    f = fopen("/proc/stat", "r");
    while (f && fgets(buf, sizeof buf, f) && sscanf(buf, "btime %llu", &boot) != 1)
        ;
    if (f)
        fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    return boot && hz > 0 ? (double)boot + (double)ticks / (double)hz : -1;
}

/* Is the run in dir going on? Its recipe folder's lock (trainrun(1), NIGHTLY RETRAINING) names
 * the process that holds it, "pid N, started T …"; that process alive on this host, begun by T
 * (a later process is another that was given the pid again), and this the recipe's newest run,
 * means yes. */
static int still_running(const char *dir)
{
    struct tr_path path;
    char line[256] = "";
    FILE *f = tr_path_set(&path, NULL, "%s/../.lock", dir) ? NULL : fopen(path.s, "r");
    if (!f)
        return 0;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    long pid = 0;
    char stamp[32] = "";
    if (!got || sscanf(line, "pid %ld, started %31s", &pid, stamp) < 1 || pid <= 0 ||
        (kill((pid_t)pid, 0) && errno != EPERM))
        return 0;
    struct tm tm = {0};
    double began = process_began(pid);
    char *end = strptime(stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (end && !*end && began >= 0 && began > (double)timegm(&tm) + 2)   /* the stamp is whole seconds */
        return 0;
    char target[256];
    if (tr_path_set(&path, NULL, "%s/../latest", dir) || readlink(path.s, target, sizeof target) <= 0)
        return 0;   /* the holder's run is the newest one */
    char *real_latest = realpath(path.s, NULL), *real_dir = realpath(dir, NULL);
    int same = real_latest && real_dir && !strcmp(real_latest, real_dir);
    free(real_latest);
    free(real_dir);
    return same;
}

/* Without the trainer's word: run.json's (a last part that never ended was killed), else the
 * last report.json's, else what the files show. */
static void read_outcome(struct tr_run_report *rep, int finished)
{
    json_t *segments = json_object_get(rep->record, "segments");
    json_t *last = json_array_get(segments, json_array_size(segments) - 1);
    if (last) {
        json_t *code = json_object_get(last, "exit_code");
        if (json_is_integer(code)) {
            rep->exit_code = (int)json_integer_value(code);
            snprintf(rep->status, sizeof rep->status, "%s", tr_run_status_word(rep->exit_code));
            rep->seconds = json_number_value(json_object_get(rep->record, "seconds"));
        } else
            snprintf(rep->status, sizeof rep->status, "%s", still_running(rep->dir.s) ? "running" : "killed");
        return;
    }
    struct tr_path path;
    json_t *old = tr_path_set(&path, NULL, "%s/report.json", rep->dir.s) ? NULL : json_load_file(path.s, 0, NULL);
    const char *status = json_string_value(json_object_get(old, "status"));
    if (status && strlen(status) < sizeof rep->status) {
        snprintf(rep->status, sizeof rep->status, "%s", status);
        json_t *code = json_object_get(old, "exit_code"), *secs = json_object_get(old, "duration_seconds");
        rep->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
        rep->seconds = json_is_number(secs) ? json_number_value(secs) : NAN;
    } else
        snprintf(rep->status, sizeof rep->status, "%s", finished ? "finished" : "unknown");
    json_decref(old);
}

static double mean(const struct tr_series *s)
{
    double sum = 0;
    for (int i = 0; s && i < s->n; i++)
        sum += s->value[i];
    return s && s->n ? sum / s->n : NAN;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void warn(struct tr_run_report *rep, const char *kind, const char *message)
{
    json_array_append_new(rep->warnings, json_pack("{ssss}", "kind", kind, "message", message));
}

static void find_spikes(struct tr_run_report *rep)
{
    const struct tr_series *loss = tr_run_report_series(rep, "train/loss");
    char steps[200] = "";
    int spikes = 0;
    double worst = 0;
    for (int i = SPIKE_MIN_HISTORY; loss && i < loss->n; i++) {
        double window[SPIKE_WINDOW];
        int from = i > SPIKE_WINDOW ? i - SPIKE_WINDOW : 0, n = i - from;
        memcpy(window, loss->value + from, (size_t)n * sizeof *window);
        qsort(window, (size_t)n, sizeof *window, by_value);
        double median = n % 2 ? window[n / 2] : (window[n / 2 - 1] + window[n / 2]) / 2;
        if (!(median > 0) || !(loss->value[i] > SPIKE_RATIO * median))
            continue;
        if (++spikes <= 5)
            snprintf(steps + strlen(steps), sizeof steps - strlen(steps), "%s%.0f", spikes > 1 ? ", " : "",
                     loss->step[i]);
        worst = fmax(worst, loss->value[i] / median);
    }
    if (!spikes)
        return;
    char line[400];
    snprintf(line, sizeof line, "loss spikes: train/loss rose above %g× the median of the %d logged before it "
             "%d time%s, at step%s %s%s (at most %.1f×)", SPIKE_RATIO, SPIKE_WINDOW, spikes, spikes > 1 ? "s" : "",
             spikes > 1 ? "s" : "", steps, spikes > 5 ? ", …" : "", worst);
    warn(rep, "loss-spike", line);
}

/* The time lines' sums; other: the wall-clock time no cause accounts for (logging, feeding). */
static void sum_times(struct tr_run_report *rep)
{
    double accounted = 0;
    for (int i = 0; i < TR_REPORT_TIMES - 1; i++) {
        char name[64];
        snprintf(name, sizeof name, "time/%s", tr_report_time_names[i]);
        const struct tr_series *s = tr_run_report_series(rep, name);
        rep->time[i] = s ? 0 : NAN;
        for (int k = 0; s && k < s->n; k++)
            rep->time[i] += s->value[k];
        if (i > 0 && s)
            accounted += rep->time[i];
    }
    rep->time[TR_REPORT_TIMES - 1] = isfinite(rep->time[0]) ? fmax(0, rep->time[0] - accounted) : NAN;
}

static void find_warnings(struct tr_run_report *rep)
{
    char line[400];
    double wait = mean(tr_run_report_series(rep, "data/wait_fraction"));
    if (wait > DATA_BOUND) {
        snprintf(line, sizeof line, "data-bound: the steps waited for data %.0f%% of the time on average; "
                 "raise data.num_workers or data.prefetch_factor", 100 * wait);
        warn(rep, "data-bound", line);
    }
    find_spikes(rep);
    const struct tr_series *skipped = tr_run_report_series(rep, "train/skipped_steps");
    if (skipped && skipped->n && skipped->value[skipped->n - 1] > 0) {
        snprintf(line, sizeof line, "fp16: %.0f step%s skipped: the gradients overflowed at the loss scale",
                 skipped->value[skipped->n - 1], skipped->value[skipped->n - 1] == 1 ? "" : "s");
        warn(rep, "skipped-steps", line);
    }
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(rep->plan, "warnings"), i, w)
        if (json_is_string(w))
            warn(rep, "memory", json_string_value(w));
    json_array_foreach(json_object_get(json_object_get(rep->record, "monitor"), "gpus"), i, w) {   /* NVML's */
        double peak = json_number_value(json_object_get(w, "peak_temperature_c"));
        if (json_is_true(json_object_get(w, "throttled"))) {
            snprintf(line, sizeof line, "GPU %zu was held back: %s (peak %.0f °C); its steps ran slower than it can",
                     i, json_string_value(json_object_get(w, "throttle_reasons")) ?: "?", peak);
            warn(rep, "gpu-throttled", line);
        } else if (peak >= GPU_HOT_C) {
            snprintf(line, sizeof line, "GPU %zu reached %.0f °C: check its cooling", i, peak);
            warn(rep, "gpu-hot", line);
        }
    }
}

static long long plan_int(const struct tr_run_report *rep, const char *key)
{
    return (long long)json_integer_value(json_object_get(rep->plan, key));
}

static void bytes(const struct tr_run_report *rep, const char *key, char out[32])
{
    json_t *v = json_object_get(rep->plan, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        tr_format_bytes((uint64_t)json_integer_value(v), out);
    else
        snprintf(out, 32, "?");
}

static struct tr_check_row *row(struct tr_run_report *rep, const char *item)
{
    struct tr_check_row *r = &rep->rows[rep->nrows++];
    snprintf(r->item, sizeof r->item, "%s", item);
    return r;
}

static void amp_and_loader_rows(struct tr_run_report *rep)
{
    const char *precision = json_string_value(json_object_get(rep->plan, "precision"));
    const char *reason = json_string_value(json_object_get(rep->plan, "reason"));
    struct tr_check_row *r = row(rep, "AMP");
    if (!precision || !strcmp(precision, "fp32"))
        snprintf(r->setting, sizeof r->setting, "off (fp32)");
    else
        snprintf(r->setting, sizeof r->setting, "on (%s)", precision);
    snprintf(r->detail, sizeof r->detail, "optimize.amp: %s%s%s", *rep->amp ? rep->amp : "?",
             reason ? "; the planner: " : "", reason ? reason : "");
    r = row(rep, "Data loader");
    /* pin_memory: on a GPU the loader's ring is page-locked and the next micro-batch copied ahead;
     * on the CPU nothing is copied to a device, so there is nothing to pin. */
    const char *device = json_string_value(json_object_get(json_object_get(rep->plan, "device"), "name"));
    bool gpu = device && strcmp(device, "cpu");
    long cores = (long)json_integer_value(json_object_get(json_object_get(rep->record, "environment"), "cpus"));
    long long workers = rep->workers >= 0 ? rep->workers : cores > 0 ? (long long)tr_num_workers_auto(cores) : -1;
    if (workers < 0)
        snprintf(r->setting, sizeof r->setting, "auto workers, prefetch %lld, pin_memory %s", rep->prefetch,
                 gpu ? "on" : "off");
    else
        snprintf(r->setting, sizeof r->setting, "%lld worker%s%s, prefetch %lld, pin_memory %s", workers,
                 workers == 1 ? "" : "s", rep->workers < 0 ? " (auto: half the cores)" : "", rep->prefetch,
                 gpu ? "on" : "off");
    double wait = mean(tr_run_report_series(rep, "data/wait_fraction"));
    int at = isfinite(wait) ? snprintf(r->detail, sizeof r->detail, "data wait %.1f%% of the time on average", 100 * wait)
                            : snprintf(r->detail, sizeof r->detail, "no data wait measured");
    snprintf(r->detail + at, sizeof r->detail - (size_t)at, "; data.pin_memory: %s, %s",
             *rep->pin_memory ? rep->pin_memory : "?",
             gpu ? "batches in page-locked memory, the next copied to the GPU while a step computes"
                 : "the CPU trains from the batches where they are: nothing to pin");
}

/* The seed's item 4: the environment settings that matter — threads, the BLAS kernels in use,
 * the devices visible — from run.json's environment. */
static void environment_row(struct tr_run_report *rep)
{
    json_t *env = json_object_get(rep->record, "environment"), *set = json_object_get(env, "settings");
    struct tr_check_row *r = row(rep, "Environment");
    const char *kernels = json_string_value(json_object_get(env, "blas_kernels"));
    json_t *threads = json_object_get(env, "threads");
    size_t gpus = json_array_size(json_object_get(env, "gpus"));
    char blas[96];
    if (kernels)
        snprintf(blas, sizeof blas, "OpenBLAS %s kernels", kernels);
    else
        snprintf(blas, sizeof blas, "BLAS kernels not recorded");
    if (json_is_integer(threads))
        snprintf(r->setting, sizeof r->setting, "%lld thread%s, %s, %zu GPU%s visible",
                 (long long)json_integer_value(threads), json_integer_value(threads) == 1 ? "" : "s", blas, gpus,
                 gpus == 1 ? "" : "s");
    else
        snprintf(r->setting, sizeof r->setting, "not recorded");
    *r->detail = 0;
    const char *name;
    json_t *value;
    json_object_foreach(set, name, value) {
        size_t n = strlen(r->detail);
        snprintf(r->detail + n, sizeof r->detail - n, "%s%s=%s", n ? ", " : "", name,
                 json_is_string(value) ? json_string_value(value) : "(unset)");
    }
    if (!*r->detail)
        snprintf(r->detail, sizeof r->detail, "this run's run.json records no settings");
}

/* plan.json's candidate like the chosen one (precision, batching) but with checkpointing mode
 * ("none" or not "none": any); the fastest such, or NULL. */
static const json_t *sibling_candidate(const struct tr_run_report *rep, bool checkpointed)
{
    const char *precision = json_string_value(json_object_get(rep->plan, "precision"));
    bool dynamic = json_is_true(json_object_get(rep->plan, "dynamic_batching"));
    const json_t *best = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(rep->plan, "candidates"), i, c) {
        const char *mode = json_string_value(json_object_get(json_object_get(c, "checkpointing"), "mode"));
        const char *p = json_string_value(json_object_get(c, "precision"));
        if (!mode || !p || !precision || strcmp(p, precision) || (strcmp(mode, "none") != 0) != checkpointed ||
            json_is_true(json_object_get(c, "dynamic_batching")) != dynamic || !json_is_true(json_object_get(c, "fits")))
            continue;
        double t = json_number_value(json_object_get(c, "predicted_step_seconds"));
        if (!best || t < json_number_value(json_object_get(best, "predicted_step_seconds")))
            best = c;
    }
    return best;
}

/* Why checkpointing is on or off: pinned by the recipe, or what the planner weighed — the
 * footprint it saves against the budget, and the recomputation it costs a step. */
static void checkpointing_why(const struct tr_run_report *rep, bool on, char *out, size_t size)
{
    const char *setting = *rep->checkpointing ? rep->checkpointing : "?";
    if (strcmp(setting, "auto")) {
        snprintf(out, size, "optimize.checkpointing: %s, pinned by the recipe", setting);
        return;
    }
    char budget[32], mine[32], other[32];
    bytes(rep, "budget_bytes", budget), bytes(rep, "predicted_footprint_bytes", mine);
    double t = json_number_value(json_object_get(rep->plan, "predicted_step_seconds"));
    const json_t *alt = sibling_candidate(rep, !on);
    if (alt)
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(alt, "predicted_footprint_bytes")), other);
    double ta = alt ? json_number_value(json_object_get(alt, "predicted_step_seconds")) : NAN;
    if (on && !alt)
        snprintf(out, size, "optimize.checkpointing: auto, on: without it no plan of this precision and "
                 "batching fits the budget %s; recomputing the forward brings the footprint to %s", budget, mine);
    else if (on)
        snprintf(out, size, "optimize.checkpointing: auto, on: without it the fastest plan that fits the budget %s "
                 "takes %.3g s a step (footprint %s); with it the larger micro-batch it frees takes %.3g s "
                 "(footprint %s), recomputation included", budget, ta, other, t, mine);
    else if (alt)
        snprintf(out, size, "optimize.checkpointing: auto, off: the footprint %s fits the budget %s without "
                 "recomputing; checkpointing would bring it to %s but cost %.3g s a step instead of %.3g s",
                 mine, budget, other, ta, t);
    else
        snprintf(out, size, "optimize.checkpointing: auto, off: the footprint %s fits the budget %s without "
                 "recomputing anything", mine, budget);
}

static void batching_rows(struct tr_run_report *rep)
{
    json_t *ck = json_object_get(rep->plan, "checkpointing");
    const char *mode = json_string_value(json_object_get(ck, "mode"));
    struct tr_check_row *r = row(rep, "Checkpointing");
    if (!mode || !strcmp(mode, "none"))
        snprintf(r->setting, sizeof r->setting, "off");
    else
        snprintf(r->setting, sizeof r->setting, "%s in %lld of %lld blocks", mode,
                 (long long)json_integer_value(json_object_get(ck, "blocks")),
                 (long long)json_integer_value(json_object_get(ck, "of")));
    checkpointing_why(rep, mode && strcmp(mode, "none"), r->detail, sizeof r->detail);
    r = row(rep, "Dynamic batching");
    json_t *buckets = json_object_get(rep->plan, "micro_batch");
    if (json_is_true(json_object_get(rep->plan, "dynamic_batching")))
        snprintf(r->setting, sizeof r->setting, "on (%zu length buckets)", json_array_size(buckets));
    else
        snprintf(r->setting, sizeof r->setting, "off");
    double pad = mean(tr_run_report_series(rep, "data/padding_fraction"));
    if (isfinite(pad))
        snprintf(r->detail, sizeof r->detail, "padding fraction %.1f%% (measured)", 100 * pad);
    else
        snprintf(r->detail, sizeof r->detail, "padding fraction %.1f%% (predicted)",
                 100 * json_number_value(json_object_get(rep->plan, "padding_fraction")));
    r = row(rep, "Accumulation");
    if (plan_int(rep, "accumulation") > 0) {
        snprintf(r->setting, sizeof r->setting, "%lld × %lld", plan_int(rep, "micro"), plan_int(rep, "accumulation"));
        snprintf(r->detail, sizeof r->detail, "micro-batch × steps, for train.batch_size %lld", rep->batch_size);
        return;
    }
    /* Dynamic batching: the micro-batches a step vary with the lengths drawn. */
    double micro_steps = mean(tr_run_report_series(rep, "train/micro_steps"));
    if (!isfinite(micro_steps))
        micro_steps = json_number_value(json_object_get(rep->plan, "micro_steps"));
    snprintf(r->setting, sizeof r->setting, "%.2f micro-steps a step", micro_steps);
    snprintf(r->detail, sizeof r->detail, "micro-batches (rows × tokens):");
    size_t i;
    json_t *b;
    json_array_foreach(buckets, i, b)
        snprintf(r->detail + strlen(r->detail), sizeof r->detail - strlen(r->detail), "%s %lld × %lld",
                 i ? "," : "", (long long)json_integer_value(json_object_get(b, "rows")),
                 (long long)json_integer_value(json_object_get(b, "max_len")));
    snprintf(r->detail + strlen(r->detail), sizeof r->detail - strlen(r->detail), "; train.batch_size %lld",
             rep->batch_size);
}

static void memory_row(struct tr_run_report *rep)
{
    char pp[32], mp[32], pf[32], mf[32], budget[32];
    bytes(rep, "predicted_peak_bytes", pp), bytes(rep, "measured_peak_bytes", mp);
    bytes(rep, "predicted_footprint_bytes", pf), bytes(rep, "measured_footprint_bytes", mf);
    bytes(rep, "budget_bytes", budget);
    struct tr_check_row *r = row(rep, "Memory");
    snprintf(r->setting, sizeof r->setting, "regions %s predicted, %s measured", pp, mp);
    snprintf(r->detail, sizeof r->detail, "footprint %s predicted, %s measured; budget %s", pf, mf, budget);
}

/* Offloading (optimize.offload): the host's regions predicted against measured, what crossed the
 * host link a step and the host's time on it against the forecast, and the overlap — from
 * plan.json's "host" and "measured_host" (train/finish.c). No row when nothing was offloaded. */
static void offload_row(struct tr_run_report *rep)
{
    const char *what = json_string_value(json_object_get(rep->plan, "offload"));
    json_t *host = json_object_get(rep->plan, "host"), *m = json_object_get(rep->plan, "measured_host");
    if (!what || !strcmp(what, "off") || !host)
        return;
    static const struct { const char *name, *words; } said[] = {
        {"optimizer", "the optimizer's state and update"}, {"activations", "saved activations"},
        {"both", "the optimizer's state and update, saved activations"}};
    struct tr_check_row *r = row(rep, "Offload");
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
        if (!strcmp(what, said[i].name))
            snprintf(r->setting, sizeof r->setting, "%s in the host's memory", said[i].words);
    char predicted[32], measured[32] = "?", budget[32], moved[32] = "?";
    tr_format_bytes((uint64_t)json_integer_value(json_object_get(host, "predicted_bytes")), predicted);
    tr_format_bytes((uint64_t)json_integer_value(json_object_get(host, "budget_bytes")), budget);
    if (m)
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(m, "bytes")), measured),
            tr_format_bytes((uint64_t)json_number_value(json_object_get(m, "link_bytes_per_step")), moved);
    json_t *overlap = m ? json_object_get(m, "overlap") : NULL;
    char hidden[64] = "overlap not measured";
    if (json_is_number(overlap))
        snprintf(hidden, sizeof hidden, "%.0f%% of it hidden behind the kernels", 100 * json_number_value(overlap));
    snprintf(r->detail, sizeof r->detail, "host regions %s predicted, %s measured (budget %s); %s a step over the "
             "host link, %.3g s of the host's time (predicted %.3g s, %.3g s exposed); %s", predicted, measured,
             budget, moved, m ? json_number_value(json_object_get(m, "link_seconds_per_step")) : NAN,
             json_number_value(json_object_get(host, "predicted_link_seconds")),
             json_number_value(json_object_get(host, "predicted_link_exposed_seconds")), hidden);
}

/* The time model against the run: plan.json's predicted step time and the median step the run
 * measured (train/finish.c), as the memory row sets the regions against their prediction. */
static void step_time_row(struct tr_run_report *rep)
{
    json_t *p = json_object_get(rep->plan, "predicted_step_seconds"), *m = json_object_get(rep->plan, "measured_step_seconds");
    struct tr_check_row *r = row(rep, "Step time");
    if (!json_is_number(p)) {
        snprintf(r->setting, sizeof r->setting, "not recorded");
        snprintf(r->detail, sizeof r->detail, "this run's plan.json predicts no step time");
        return;
    }
    double predicted = json_number_value(p);
    if (!json_is_number(m)) {
        snprintf(r->setting, sizeof r->setting, "%.3g s predicted, not measured", predicted);
        snprintf(r->detail, sizeof r->detail, "the run ended before a second step (the first is a warm-up)");
        return;
    }
    double measured = json_number_value(m);
    snprintf(r->setting, sizeof r->setting, "%.3g s predicted, %.3g s measured", predicted, measured);
    snprintf(r->detail, sizeof r->detail, "the measured median step is %+.0f%% off the prediction (the time model "
             "from `trainrun calibrate`; a busy machine's steps are slower)", 100 * (measured - predicted) / predicted);
}

/* run.json's leak check in a sentence; growth is a warning. */
static void leak_row(struct tr_run_report *rep)
{
    json_t *leak = json_object_get(rep->record, "leak");
    const char *verdict = json_string_value(json_object_get(leak, "verdict"));
    struct tr_check_row *r = row(rep, "Leak check");
    if (!verdict) {
        snprintf(r->setting, sizeof r->setting, "not recorded");
        snprintf(r->detail, sizeof r->detail, "this run has no leak check in run.json");
        return;
    }
    long long from = (long long)json_integer_value(json_object_get(leak, "baseline_step"));
    long long to = (long long)json_integer_value(json_object_get(leak, "last_step"));
    if (!strcmp(verdict, "too short")) {
        snprintf(r->setting, sizeof r->setting, "not done");
        snprintf(r->detail, sizeof r->detail, "the run ended within the check's warm-up, up to step %lld (the first "
                 "log line, evaluation and checkpoint, and at least 10 steps)",
                 (long long)json_integer_value(json_object_get(leak, "warmup_steps")));
        return;
    }
    snprintf(r->setting, sizeof r->setting, "%s", !strcmp(verdict, "constant") ? "constant after warm-up" : "grew");
    snprintf(r->detail, sizeof r->detail, "at each step's start from step %lld to %lld:", from, to);
    static const char *const gauges[] = {"allocated", "heap", "rss"};
    static const char *const words[] = {"allocated", "heap in use", "resident set"};
    for (int i = 0; i < 3; i++) {
        json_t *g = json_object_get(leak, gauges[i]);
        char base[32], last[32], line[400];
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "baseline")), base);
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "last")), last);
        json_t *grew = json_object_get(g, "first_grew_step");
        snprintf(r->detail + strlen(r->detail), sizeof r->detail - strlen(r->detail), "%s %s %s → %s", i ? "," : "",
                 words[i], base, last);
        if (json_is_integer(grew)) {
            snprintf(r->detail + strlen(r->detail), sizeof r->detail - strlen(r->detail), " (grew at step %lld)",
                     (long long)json_integer_value(grew));
            char tol[32];
            tr_format_bytes((uint64_t)json_integer_value(json_object_get(g, "tolerance")), tol);
            snprintf(line, sizeof line, "leak: the %s grew at step %lld, from %s at step %lld to %s by step %lld "
                     "(tolerance %s)", words[i], (long long)json_integer_value(grew), base, from, last, to, tol);
            warn(rep, "leak", line);
        }
    }
}

/* labels.txt, the classes a classifier's outputs stand for, one a line: their names as the
 * headline lists them, as many as fit. */
static void read_classes(struct tr_run_report *rep, FILE *f)
{
    char line[256];
    size_t used = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t need = strlen(line) + (rep->nclasses ? 2 : 0);
        if (used + need + sizeof ", …" < sizeof rep->classes)
            used += (size_t)snprintf(rep->classes + used, sizeof rep->classes - used, "%s%s",
                                     rep->nclasses ? ", " : "", line);
        else if (!strstr(rep->classes, "…"))
            used += (size_t)snprintf(rep->classes + used, sizeof rep->classes - used, ", …");
        rep->nclasses++;
    }
}

int tr_run_report_load(const char *dir, const struct tr_run_outcome *outcome, struct tr_run_report *rep,
                       struct tr_diag *d)
{
    *rep = (struct tr_run_report){.exit_code = -1, .seconds = NAN, .warnings = json_array(), .graph_bytes = -1};
    struct tr_path path;
    if (tr_path_set(&rep->dir, d, "%s", dir) || tr_path_set(&path, d, "%s/metrics.jsonl", dir))
        return TR_EINVAL;
    FILE *metrics = tr_fopen_regular(path.s, NULL);   /* a FIFO would block */
    tr_path_set(&path, NULL, "%s/plan.json", dir);   /* no longer than metrics.jsonl's */
    int has_plan = !access(path.s, F_OK);
    if (!metrics && !has_plan) {
        return tr_fail(d, TR_EINVAL, "%s is not a run folder: it has neither metrics.jsonl nor plan.json", dir);
    }
    json_error_t jerr;
    if (has_plan && !(rep->plan = json_load_file(path.s, 0, &jerr))) {
        if (metrics)
            fclose(metrics);
        return tr_fail(d, TR_EINVAL, "%s:%d: %s", path.s, jerr.line, jerr.text);
    }
    int finished = 0, rc = metrics ? read_metrics(rep, metrics, &finished) : 0;
    if (metrics)
        fclose(metrics);
    if (rc) {
        return tr_fail(d, TR_ENOMEM, "reading %s/metrics.jsonl: out of memory", dir);
    }
    tr_path_set(&path, NULL, "%s/run.json", dir);
    rep->record = json_load_file(path.s, 0, NULL);   /* runs older than it have none */
    if (rep->record && !json_is_object(rep->record)) {
        json_decref(rep->record);
        rep->record = NULL;
    }
    const char *started = json_string_value(json_object_get(rep->record, "started"));
    snprintf(rep->started, sizeof rep->started, "%s", started ? started : "");
    char *real = realpath(dir, NULL);   /* runs/NAME/latest is a link: the run is the folder it names */
    const char *path_of = real ? real : dir, *base = strrchr(path_of, '/');
    snprintf(rep->run, sizeof rep->run, "%.255s", base && base[1] ? base + 1 : path_of);
    free(real);
    tr_path_set(&path, NULL, "%s/labels.txt", dir);
    FILE *labels = fopen(path.s, "r");
    if (labels) {
        read_classes(rep, labels);
        fclose(labels);
    }
    tr_path_set(&path, NULL, "%s/recipe.yaml", dir);
    FILE *recipe = tr_fopen_regular(path.s, NULL);
    if (recipe) {
        read_recipe(rep, recipe);
        fclose(recipe);
    }
    if (outcome) {
        snprintf(rep->status, sizeof rep->status, "%s", tr_run_status_word(outcome->exit_code));
        rep->exit_code = outcome->exit_code, rep->seconds = outcome->seconds;
    } else
        read_outcome(rep, finished);
    struct stat st;
    tr_path_set(&path, NULL, "%s/graph.svg", dir);
    rep->graph_bytes = stat(path.s, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
    sum_times(rep);
    find_warnings(rep);
    amp_and_loader_rows(rep);
    batching_rows(rep);
    memory_row(rep);
    offload_row(rep);
    step_time_row(rep);
    leak_row(rep);
    environment_row(rep);
    return 0;
}

void tr_run_report_free(struct tr_run_report *rep)
{
    for (int i = 0; i < rep->nseries; i++) {
        free(rep->series[i].name);
        free(rep->series[i].step);
        free(rep->series[i].value);
    }
    free(rep->series);
    json_decref(rep->plan);
    json_decref(rep->record);
    json_decref(rep->warnings);
    *rep = (struct tr_run_report){0};
}
