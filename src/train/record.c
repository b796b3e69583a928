/* The run's record: time by cause and the leak check (record.h). */
#include "train/record.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/atomic.h"
#include "core/stop.h"
#include "graph/graph.h"
#include "report/run_report.h"

const char *tr_time_key(int i)
{
    static const char *const keys[TR_NTIME] = {"time/data", "time/forward", "time/backward", "time/recompute",
                                               "time/optimizer", "time/evaluation", "time/checkpointing"};
    return i >= 0 && i < TR_NTIME ? keys[i] : "time/?";
}

void tr_timer_start(struct tr_timer *t, double now, double wait_total)
{
    *t = (struct tr_timer){.wait_seen = wait_total, .since = now};
}

void tr_timer_line(struct tr_timer *t, json_t *line, double now, double wait_total)
{
    t->spent[TR_TIME_DATA] += wait_total - t->wait_seen;
    t->spent[TR_TIME_FORWARD] += t->phase[TR_FORWARD];
    t->spent[TR_TIME_BACKWARD] += t->phase[TR_BACKWARD];
    t->spent[TR_TIME_RECOMPUTE] += t->phase[TR_RECOMPUTE];
    t->spent[TR_TIME_OPTIMIZER] += t->phase[TR_OPTIMIZER];
    json_object_set_new(line, "time/wall", json_real(now - t->since));
    for (int i = 0; i < TR_NTIME; i++)
        json_object_set_new(line, tr_time_key(i), json_real(t->spent[i]));
    tr_timer_start(t, now, wait_total);
}

/* ---- the steps' times ------------------------------------------------------------------------ */

void tr_step_times_add(struct tr_step_times *t, double seconds)
{
    if (t->seen++ > 0)   /* the first: caches, pages and threads warming up */
        t->seconds[(t->seen - 2) % TR_STEP_TIMES] = seconds;
}

static int by_seconds(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tr_step_times_median(const struct tr_step_times *t, int64_t *count)
{
    int64_t n = t->seen - 1 < TR_STEP_TIMES ? t->seen - 1 : TR_STEP_TIMES;
    *count = n > 0 ? n : 0;
    if (n <= 0)
        return NAN;
    double *v = tr_xmalloc((size_t)n * sizeof *v);
    memcpy(v, t->seconds, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, by_seconds);
    double m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return m;
}

/* ---- the leak check -------------------------------------------------------------------------- */

/* What a gauge may rise above its baseline before it counts as growth: the allocator's bytes
 * are exact; the heap moves with the log's and the event writer's buffers; the resident set
 * by whole pages the kernel maps in for stacks and file reads. */
static const int64_t tolerance[TR_NGAUGES] = {0, 1 << 20, 8 << 20};

const char *tr_gauge_name(int i)
{
    static const char *const names[TR_NGAUGES] = {"allocated", "heap", "rss"};
    return i >= 0 && i < TR_NGAUGES ? names[i] : "?";
}

/* The resident set from /proc/self/statm (pages): cheap enough to read every step. */
static int64_t rss_now(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text[128];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = 0;
    long long size, resident;
    if (sscanf(text, "%lld %lld", &size, &resident) != 2)
        return -1;
    return resident * (int64_t)sysconf(_SC_PAGESIZE);
}

void tr_leak_init(struct tr_leak *l, int64_t warmup)
{
    *l = (struct tr_leak){.warmup = warmup};
    for (int i = 0; i < TR_NGAUGES; i++)
        l->g[i].tolerance = tolerance[i];
}

void tr_leak_sample(struct tr_leak *l, int64_t step, int64_t allocated, int64_t now_values[TR_NGAUGES])
{
    int64_t v[TR_NGAUGES] = {allocated, (int64_t)tr_heap_in_use(), rss_now()};
    if (now_values)
        memcpy(now_values, v, sizeof v);
    l->last_step = step;
    if (step <= l->warmup)
        return;
    int baseline = !l->baseline_step;
    if (baseline)
        l->baseline_step = step;
    for (int i = 0; i < TR_NGAUGES; i++) {
        if (baseline)
            l->g[i].baseline = l->g[i].max = v[i];
        l->g[i].last = v[i];
        if (v[i] > l->g[i].max)
            l->g[i].max = v[i];
        if (!l->g[i].first_grew && v[i] > l->g[i].baseline + l->g[i].tolerance)
            l->g[i].first_grew = step, l->g[i].first_value = v[i];
    }
}

json_t *tr_leak_json(const struct tr_leak *l)
{
    json_t *j = json_object();
    int checked = l->baseline_step > 0 && l->last_step > l->baseline_step, grew = 0;
    json_object_set_new(j, "checked", json_boolean(checked));
    json_object_set_new(j, "warmup_steps", json_integer(l->warmup));
    json_object_set_new(j, "baseline_step", l->baseline_step ? json_integer(l->baseline_step) : json_null());
    json_object_set_new(j, "last_step", json_integer(l->last_step));
    for (int i = 0; i < TR_NGAUGES; i++) {
        json_t *g = json_object();
        json_object_set_new(g, "baseline", checked ? json_integer(l->g[i].baseline) : json_null());
        json_object_set_new(g, "last", checked ? json_integer(l->g[i].last) : json_null());
        json_object_set_new(g, "max", checked ? json_integer(l->g[i].max) : json_null());
        json_object_set_new(g, "tolerance", json_integer(l->g[i].tolerance));
        json_object_set_new(g, "first_grew_step", l->g[i].first_grew ? json_integer(l->g[i].first_grew) : json_null());
        json_object_set_new(g, "first_grew_value", l->g[i].first_grew ? json_integer(l->g[i].first_value) : json_null());
        json_object_set_new(j, tr_gauge_name(i), g);
        grew |= l->g[i].first_grew != 0;
    }
    json_object_set_new(j, "verdict", json_string(!checked ? "too short" : grew ? "grew" : "constant"));
    return j;
}

/* ---- run.json ---------------------------------------------------------------------------------- */

static void utc_now(char out[32])
{
    time_t t = time(NULL);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
}

static int write_record(json_t *record, const char *dir, struct tr_diag *d)
{
    struct tr_path path;
    int rc = tr_path_set(&path, d, "%s/run.json", dir);
    if (rc)
        return rc;
    struct tr_diag said = {0};   /* worded below, from errno */
    rc = tr_atomic_write_json(path.s, record, JSON_INDENT(2) | JSON_PRESERVE_ORDER, &said);
    tr_diag_free(&said);
    return rc ? tr_fail(d, TR_EIO, "cannot write %s: %s", path.s, strerror(errno)) : 0;
}

int tr_run_record_begin(json_t **record, const char *dir, json_t *environment, int64_t from_step,
                        struct tr_diag *d)
{
    struct tr_path path;
    char started[32];
    if (tr_path_set(&path, d, "%s/run.json", dir)) {
        json_decref(environment);
        return TR_EINVAL;
    }
    utc_now(started);
    json_t *r = json_load_file(path.s, 0, NULL);   /* a resumed run's, from its earlier processes */
    if (!json_is_object(r) || !json_is_array(json_object_get(r, "segments"))) {
        json_decref(r);
        r = json_pack("{ss so* s[]}", "started", started, "environment", environment, "segments");
    } else {
        json_object_set_new(r, "environment", environment ? environment : json_null());
    }
    json_array_append_new(json_object_get(r, "segments"),
                          json_pack("{ss sn sn sn sI sn}", "started", started, "ended", "seconds", "exit_code",
                                    "from_step", (json_int_t)from_step, "to_step"));
    *record = r;
    return write_record(r, dir, d);
}

/* How a process ended, in run.json's words: its exit status, the outcome, the signal. */
static void set_ending(json_t *o, const struct tr_record_end *end)
{
    json_object_set_new(o, "exit_code", json_integer(end->exit_code));
    json_object_set_new(o, "outcome", json_string(tr_run_status_word(end->exit_code)));
    json_object_set_new(o, "signal", end->signal ? json_string(tr_stop_signal_name(end->signal)) : json_null());
}

int tr_run_record_end(json_t *record, const char *dir, const struct tr_record_end *end, json_t *leak,
                      struct tr_diag *d)
{
    char ended[32];
    utc_now(ended);
    json_t *segments = json_object_get(record, "segments"), *last = json_array_get(segments, json_array_size(segments) - 1);
    json_object_set_new(last, "ended", json_string(ended));
    json_object_set_new(last, "seconds", json_real(end->seconds));
    set_ending(last, end);
    json_object_set_new(last, "to_step", json_integer(end->to_step));
    double total = 0;
    size_t i;
    json_t *s;
    json_array_foreach(segments, i, s)
        total += json_number_value(json_object_get(s, "seconds"));
    set_ending(record, end);
    json_object_set_new(record, "seconds", json_real(total));
    json_object_set_new(record, "leak", leak ? leak : json_null());
    return write_record(record, dir, d);
}

int tr_run_record_cut(json_t *record, const char *dir, int exit_code, int signal, struct tr_diag *d)
{
    json_t *segments = json_object_get(record, "segments"), *last = json_array_get(segments, json_array_size(segments) - 1);
    struct tr_record_end end = {.exit_code = exit_code, .signal = signal};
    if (last)
        set_ending(last, &end);
    set_ending(record, &end);
    json_object_set_new(record, "notification", json_sprintf("cut by %s", tr_stop_signal_name(signal)));
    return write_record(record, dir, d);
}

int tr_run_record_note(json_t *record, const char *dir, const char *key, json_t *value, struct tr_diag *d)
{
    json_object_set_new(record, key, value);
    return write_record(record, dir, d);
}
