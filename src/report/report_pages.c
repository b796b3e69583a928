/* The run report's writing half (reporter, DESIGN.md §2): struct tr_run_report as
 * report.json (trainrun-report(5)), report.md (a terminal, git) and report.html (one file,
 * inline CSS and SVG). Each table is filled once and written either way. Each file goes to a
 * temporary file renamed over the old one, so a reader never sees half a report; nothing
 * time-dependent goes in, so re-rendering is byte-stable. */
#include "report/run_report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/atomic.h"
#include "core/input.h"
#include "report/compare.h"
#include "report/svg.h"

/* The metrics the summary tables show, in this order, when the run logged them; best: the
 * lowest (−1) or highest (+1) value, 0 for none. */
static const struct { const char *name; int best; } key_metrics[] = {
    {"train/loss", 0}, {"eval/loss", -1}, {"eval/accuracy", 1}, {"eval/perplexity", -1},
    {"test/loss", 0}, {"test/accuracy", 0}, {"test/perplexity", 0}, {"train/samples_per_s", 0},
    {"train/tokens_per_s", 0},
};

static double last(const struct tr_series *s)
{
    return s && s->n ? s->value[s->n - 1] : NAN;
}

/* The best value of s (sign −1: lowest) and its index. */
static int best_index(const struct tr_series *s, int sign)
{
    int best = -1;
    for (int i = 0; s && i < s->n; i++)
        if (isfinite(s->value[i]) && (best < 0 || sign * (s->value[i] - s->value[best]) > 0))
            best = i;
    return best;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of s's values (throughput: a line that held an evaluation reads low). */
static double median(const struct tr_series *s)
{
    if (!s || !s->n)
        return NAN;
    double *v = malloc((size_t)s->n * sizeof *v);
    if (!v)
        return NAN;
    memcpy(v, s->value, (size_t)s->n * sizeof *v);
    qsort(v, (size_t)s->n, sizeof *v, by_value);
    double m = s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
    free(v);
    return m;
}

static json_t *number_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* A metric's value as people read it: accuracies in per cent, losses to 4 decimals,
 * throughput whole. */
static void value_words(const char *name, double v, char out[64])
{
    size_t n = strlen(name);
    if (!isfinite(v))
        snprintf(out, 64, "%s", isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
    else if (n >= 8 && !strcmp(name + n - 8, "accuracy"))
        snprintf(out, 64, "%.2f %%", 100 * v);
    else if (n >= 6 && !strcmp(name + n - 6, "_per_s"))
        snprintf(out, 64, "%.0f", v);
    else if (n >= 10 && !strcmp(name + n - 10, "perplexity"))
        snprintf(out, 64, "%.2f", v);
    else
        snprintf(out, 64, "%.4f", v);
}

/* The run's key metric: what a person compares from one night to the next. For text
 * classifiers and the rest, accuracy (test, else evaluation); for language models
 * perplexity; else a loss. better: +1 higher, −1 lower. */
static const struct tr_series *key_metric(const struct tr_run_report *rep, int *better)
{
    static const struct { const char *name; int better; } order[] = {
        {"test/accuracy", 1}, {"eval/accuracy", 1}, {"eval/loss", -1}, {"train/loss", -1}};
    static const struct { const char *name; int better; } lm_order[] = {
        {"test/perplexity", -1}, {"eval/perplexity", -1}, {"eval/loss", -1}, {"train/loss", -1}};
    int lm = !strncmp(rep->arch, "gpt", 3);
    for (size_t i = 0; i < 4; i++) {
        const char *name = lm ? lm_order[i].name : order[i].name;
        const struct tr_series *s = tr_run_report_series(rep, name);
        if (s && s->n) {
            *better = lm ? lm_order[i].better : order[i].better;
            return s;
        }
    }
    return NULL;
}

/* ---- tables, filled once and written as Markdown or HTML --------------------------------- */

enum { MAX_COLS = 7, MAX_ROWS = 48, CELL = 480 };

struct table {
    const char *head[MAX_COLS];
    int ncols, nrows;
    char cell[MAX_ROWS][MAX_COLS][CELL];
};

static struct table *table_new(int ncols, const char *const *head)
{
    struct table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ncols = ncols;
    for (int c = 0; c < ncols; c++)
        t->head[c] = head[c];
    return t;
}

static void table_row(struct table *t, ...)
{
    if (!t || t->nrows == MAX_ROWS)
        return;
    va_list ap;
    va_start(ap, t);
    for (int c = 0; c < t->ncols; c++) {
        const char *text = va_arg(ap, const char *);
        snprintf(t->cell[t->nrows][c], CELL, "%s", text ? text : "");
    }
    va_end(ap);
    t->nrows++;
}

static void md_table(FILE *out, const struct table *t)
{
    if (!t)
        return;
    for (int c = 0; c < t->ncols; c++)
        tr_md_cell(out, t->head[c]);
    fputs("|\n", out);
    for (int c = 0; c < t->ncols; c++)
        fputs("| --- ", out);
    fputs("|\n", out);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++)
            tr_md_cell(out, t->cell[r][c]);
        fputs("|\n", out);
    }
    fputc('\n', out);
}

static void html_table(FILE *out, const struct table *t, const char *class)
{
    if (!t)
        return;
    fprintf(out, "<table class=\"%s\">\n<tr>", class);
    for (int c = 0; c < t->ncols; c++) {
        fputs("<th>", out);
        tr_html_escape(out, t->head[c]);
        fputs("</th>", out);
    }
    fputs("</tr>\n", out);
    for (int r = 0; r < t->nrows; r++) {
        fputs("<tr>", out);
        for (int c = 0; c < t->ncols; c++) {
            fputs("<td>", out);
            tr_html_escape(out, t->cell[r][c]);
            fputs("</td>", out);
        }
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
}

/* The page's parts, each built from rep once. */
struct pages {
    const struct tr_run_report *rep;
    const json_t *comparison;            /* tr_report_compare's, or NULL */
    struct table *metrics, *plan, *time, *ranks_run, *profile, *ranks, *largest, *environment;
    char critical[256];                  /* across ranks: the sentence above the ranks table */
    char headline[6][400];               /* status, duration, steps, model, promotion, failure ("" when none) */
    char key[200];                       /* the key metric in a sentence, "" when none */
};

static struct table *metrics_table(const struct tr_run_report *rep)
{
    struct table *t = table_new(3, (const char *const[]){"metric", "final", "best"});
    for (size_t k = 0; t && k < sizeof key_metrics / sizeof key_metrics[0]; k++) {
        const struct tr_series *s = tr_run_report_series(rep, key_metrics[k].name);
        if (!s || !s->n)
            continue;
        char final[64], best[128] = "", v[64];
        value_words(s->name, s->value[s->n - 1], final);
        int b = key_metrics[k].best ? best_index(s, key_metrics[k].best) : -1;
        if (b >= 0) {
            value_words(s->name, s->value[b], v);
            snprintf(best, sizeof best, "%s at step %.0f", v, s->step[b]);
        }
        table_row(t, s->name, final, best);
    }
    return t;
}

static struct table *plan_table(const struct tr_run_report *rep)
{
    struct table *t = table_new(3, (const char *const[]){"item", "setting", "why, measured"});
    for (int i = 0; t && i < rep->nrows; i++)
        table_row(t, rep->rows[i].item, rep->rows[i].setting, rep->rows[i].detail);
    return t;
}

static struct table *time_table(const struct tr_run_report *rep)
{
    if (!isfinite(rep->time[0]) || !(rep->time[0] > 0))
        return NULL;
    static const char *const words[TR_REPORT_TIMES] = {
        "the training loop, wall-clock", "waiting for data", "forward", "backward", "recomputation (checkpointing)",
        "optimizer (unscale, clip, update)", "evaluation", "checkpointing", "the rest (logging, feeding batches)"};
    struct table *t = table_new(3, (const char *const[]){"where", "seconds", "share"});
    for (int i = 0; t && i < TR_REPORT_TIMES; i++) {
        if (!isfinite(rep->time[i]) || (i == 4 && rep->time[i] == 0))   /* no checkpointing, no recompute */
            continue;
        char secs[32], share[32];
        snprintf(secs, sizeof secs, "%.1f", rep->time[i]);
        snprintf(share, sizeof share, "%.1f %%", 100 * rep->time[i] / rep->time[0]);
        table_row(t, words[i], secs, i ? share : "100 %");
    }
    return t;
}

/* The last trace's record (run.json's "traces"; the recipe's profile: section), or NULL. */
static const json_t *last_trace(const struct tr_run_report *rep)
{
    const json_t *traces = json_object_get(rep->record, "traces");
    return json_is_array(traces) && json_array_size(traces) ? json_array_get(traces, json_array_size(traces) - 1) : NULL;
}

static int by_seconds(const void *a, const void *b)
{
    double x = json_real_value(json_object_get(*(json_t *const *)a, "seconds"));
    double y = json_real_value(json_object_get(*(json_t *const *)b, "seconds"));
    return x > y ? -1 : x < y;
}

/* "1.23 TFLOP/s" or "45.6 GB/s" */
static void rate_words(double rate, bool flops, char out[48])
{
    static const char *const prefix[] = {"", "k", "M", "G", "T", "P"};
    int p = 0;
    while (rate >= 1000 && p < 5)
        rate /= 1000, p++;
    snprintf(out, 48, "%.3g %s%s/s", rate, prefix[p], flops ? "FLOP" : "B");
}

/* The top ops of the last trace by time: runs, milliseconds a step, share, and the rate they
 * reached against the best the calibration measured for their kernels. */
static struct table *profile_table(const struct tr_run_report *rep)
{
    const json_t *trace = last_trace(rep), *ops = json_object_get(trace, "ops"), *v;
    const json_t *steps = json_object_get(trace, "steps");
    if (!json_is_object(ops) || !json_object_size(ops))
        return NULL;
    double nsteps = (double)(json_integer_value(json_array_get(steps, 1)) - json_integer_value(json_array_get(steps, 0)) + 1);
    json_t *sorted[TR_REPORT_PROFILE_OPS * 8];
    const char *key;
    size_t n = 0;
    double total = 0;
    json_object_foreach((json_t *)ops, key, v)
        if (n < sizeof sorted / sizeof sorted[0]) {
            sorted[n++] = (json_t *)v;
            total += json_real_value(json_object_get(v, "seconds"));
        }
    qsort(sorted, n, sizeof *sorted, by_seconds);
    struct table *t = table_new(5, (const char *const[]){"op", "runs", "ms a step", "share", "rate (of the calibrated best)"});
    for (size_t i = 0; t && i < n && i < TR_REPORT_PROFILE_OPS; i++) {
        const char *name = "?";
        json_object_foreach((json_t *)ops, key, v)
            if (v == sorted[i])
                name = key;
        double s = json_real_value(json_object_get(sorted[i], "seconds")), work = json_real_value(json_object_get(sorted[i], "work"));
        double peak = json_real_value(json_object_get(sorted[i], "calibrated_rate"));
        bool flops = !strcmp(json_string_value(json_object_get(sorted[i], "work_unit")) ?: "", "flop");
        char runs[32], ms[32], share[32], rate[48], best[48], cell[128];
        snprintf(runs, sizeof runs, "%lld", (long long)json_integer_value(json_object_get(sorted[i], "count")));
        snprintf(ms, sizeof ms, "%.3f", s * 1e3 / (nsteps > 0 ? nsteps : 1));
        snprintf(share, sizeof share, "%.1f %%", total > 0 ? 100 * s / total : 0);
        rate_words(s > 0 ? work / s : 0, flops, rate);
        if (peak > 0) {
            rate_words(peak, flops, best);
            snprintf(cell, sizeof cell, "%s (%.0f %% of %s)", rate, 100 * (work / s) / peak, best);
        } else
            snprintf(cell, sizeof cell, "%s (not calibrated)", rate);
        table_row(t, name, runs, ms, share, cell);
    }
    return t;
}

/* Across ranks: each rank's compute and all-reduce a step in the traced steps; the slowest
 * rank's compute is the step's critical path (the others wait for it in the all-reduce). */
static struct table *ranks_table(const struct tr_run_report *rep, char *critical, size_t size)
{
    const json_t *trace = last_trace(rep), *ranks = json_object_get(trace, "ranks"), *steps = json_object_get(trace, "steps"), *v;
    if (json_array_size(ranks) < 2)
        return NULL;
    double nsteps = (double)(json_integer_value(json_array_get(steps, 1)) - json_integer_value(json_array_get(steps, 0)) + 1);
    nsteps = nsteps > 0 ? nsteps : 1;
    struct table *t = table_new(3, (const char *const[]){"rank", "compute ms a step", "all-reduce ms a step (waiting included)"});
    size_t i;
    double slowest = -1, wait = 0;
    json_int_t who = 0;
    json_array_foreach((json_t *)ranks, i, v) {
        double compute = json_real_value(json_object_get(v, "compute_seconds")) * 1e3 / nsteps;
        double reduce = json_real_value(json_object_get(v, "all_reduce_seconds")) * 1e3 / nsteps;
        char rank[16], a[32], b[32];
        snprintf(rank, sizeof rank, "%lld", (long long)json_integer_value(json_object_get(v, "rank")));
        snprintf(a, sizeof a, "%.3f", compute);
        snprintf(b, sizeof b, "%.3f", reduce);
        if (t)
            table_row(t, rank, a, b);
        if (compute > slowest)
            slowest = compute, who = json_integer_value(json_object_get(v, "rank"));
        wait = reduce > wait ? reduce : wait;
    }
    snprintf(critical, size, "The critical path: rank %lld computed longest, %.3f ms a step; the others waited "
             "for it in the all-reduce (up to %.3f ms a step, the collective itself included).", (long long)who,
             slowest, wait);
    return t;
}

/* Across ranks: each rank's peak resident set, median step, collectives (and the part the steps
 * waited for), data waits and optimizer state (sharded: its part) (run.json). */
static struct table *ranks_run_table(const struct tr_run_report *rep)
{
    const json_t *each = json_object_get(json_object_get(rep->record, "ranks"), "each"), *v;
    if (json_array_size(each) < 2)
        return NULL;
    struct table *t = table_new(7, (const char *const[]){"rank", "peak resident set", "median step s",
                                                         "in collectives s (waits included)",
                                                         "of which after the backward s", "waiting for data s",
                                                         "optimizer state"});
    size_t i;
    json_array_foreach((json_t *)each, i, v) {
        char rank[16], peak[32], step[32], reduce[32], exposed[32], wait[32], state[32];
        snprintf(rank, sizeof rank, "%lld", (long long)json_integer_value(json_object_get(v, "rank")));
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(v, "peak_resident_bytes")), peak);
        snprintf(step, sizeof step, "%.4f", json_number_value(json_object_get(v, "step_seconds")));
        snprintf(reduce, sizeof reduce, "%.3f", json_number_value(json_object_get(v, "reduce_seconds")));
        snprintf(exposed, sizeof exposed, "%.3f", json_number_value(json_object_get(v, "reduce_exposed_seconds")));
        snprintf(wait, sizeof wait, "%.3f", json_number_value(json_object_get(v, "data_wait_seconds")));
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(json_object_get(v, "measured_regions"), "optimizer")),
                        state);
        if (t)
            table_row(t, rank, peak, step, reduce, exposed, wait, state);
    }
    return t;
}

static const json_t *timeline(const struct tr_run_report *rep)
{
    const json_t *t = json_object_get(rep->plan, "timeline");
    return json_is_array(json_object_get(t, "live_bytes")) ? t : NULL;
}

static struct table *largest_table(const struct tr_run_report *rep)
{
    const json_t *tl = timeline(rep);
    if (!tl)
        return NULL;
    struct table *t = table_new(5, (const char *const[]){"size", "dtype", "shape", "made by", "live over nodes"});
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(tl, "largest"), i, v) {
        char size[32], by[200], live[64];
        tr_format_bytes((uint64_t)json_integer_value(json_object_get(v, "bytes")), size);
        long long block = (long long)json_integer_value(json_object_get(v, "block"));
        snprintf(by, sizeof by, "%s (%s%s)", json_string_value(json_object_get(v, "op")),
                 json_string_value(json_object_get(v, "phase")), block >= 0 ? ", block " : "");
        if (block >= 0)
            snprintf(by + strlen(by) - 1, sizeof by - strlen(by) + 1, "%lld)", block);
        snprintf(live, sizeof live, "%lld–%lld", (long long)json_integer_value(json_object_get(v, "first_node")),
                 (long long)json_integer_value(json_object_get(v, "last_node")));
        table_row(t, size, json_string_value(json_object_get(v, "dtype")),
                  json_string_value(json_object_get(v, "shape")), by, live);
    }
    return t;
}

/* run.json's environment, a row a fact. */
static struct table *environment_table(const struct tr_run_report *rep)
{
    json_t *env = json_object_get(rep->record, "environment");
    if (!json_is_object(env))
        return NULL;
    struct table *t = table_new(2, (const char *const[]){"what", "value"});
    const char *key;
    json_t *v;
    json_object_foreach(env, key, v) {
        char text[CELL] = "";
        if (json_is_string(v))
            snprintf(text, sizeof text, "%s", json_string_value(v));
        else if (json_is_integer(v) && !strcmp(key, "memory_bytes"))
            tr_format_bytes((uint64_t)json_integer_value(v), text);
        else if (json_is_object(v) || json_is_array(v)) {   /* libraries, GPUs: name value, … */
            size_t i;
            const char *k;
            json_t *e;
            if (json_is_object(v))
                json_object_foreach(v, k, e)
                    snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s %s", *text ? "; " : "", k,
                             json_is_string(e) ? json_string_value(e) : "?");
            else
                json_array_foreach(v, i, e)
                    snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", i ? "; " : "",
                             json_string_value(json_object_get(e, "name")) ? json_string_value(json_object_get(e, "name")) : "?");
            if (!*text)
                snprintf(text, sizeof text, "none");
        } else if (json_is_null(v))
            snprintf(text, sizeof text, "none");
        else {
            char *dumped = json_dumps(v, JSON_ENCODE_ANY);
            snprintf(text, sizeof text, "%s", dumped ? dumped : "?");
            free(dumped);
        }
        table_row(t, key, text);
    }
    return t;
}

static void pages_build(struct pages *pg, const struct tr_run_report *rep, const json_t *comparison)
{
    *pg = (struct pages){.rep = rep, .comparison = comparison};
    char took[48], code[16];
    tr_format_elapsed(rep->seconds, took);
    snprintf(code, sizeof code, rep->exit_code >= 0 ? "%d" : "unknown", rep->exit_code);
    snprintf(pg->headline[0], sizeof pg->headline[0], "Status: %s (exit code %s)", rep->status, code);
    if (*rep->started)
        snprintf(pg->headline[1], sizeof pg->headline[1], "Duration: %s, started %.10s %.5s UTC", took,
                 rep->started, rep->started + 11);
    else
        snprintf(pg->headline[1], sizeof pg->headline[1], "Duration: %s", took);
    snprintf(pg->headline[2], sizeof pg->headline[2], "Steps: %lld; run folder %s", rep->last_step, rep->run);
    snprintf(pg->headline[3], sizeof pg->headline[3], "Model: %s on %s%s%.0d%s%s", rep->arch, rep->dataset,
             rep->nclasses ? "; " : "", rep->nclasses, rep->nclasses ? " classes: " : "", rep->classes);
    const char *promotion = json_string_value(json_object_get(json_object_get(rep->record, "promotion"), "reason"));
    if (promotion)
        snprintf(pg->headline[4], sizeof pg->headline[4], "Promotion: %s", promotion);
    const char *failure = json_string_value(json_object_get(json_object_get(rep->record, "failure"), "sentence"));
    if (failure)   /* what the process could not say in its last lines (a rank's timeout) */
        snprintf(pg->headline[5], sizeof pg->headline[5], "Failure: %.390s", failure);
    int better;
    const struct tr_series *k = key_metric(rep, &better);
    if (k) {
        char v[64];
        value_words(k->name, last(k), v);
        snprintf(pg->key, sizeof pg->key, "%s %s (%s is better)", k->name, v, better > 0 ? "higher" : "lower");
    }
    pg->metrics = metrics_table(rep);
    pg->plan = plan_table(rep);
    pg->time = time_table(rep);
    pg->ranks_run = ranks_run_table(rep);
    pg->profile = profile_table(rep);
    pg->ranks = ranks_table(rep, pg->critical, sizeof pg->critical);
    pg->largest = largest_table(rep);
    pg->environment = environment_table(rep);
}

static void pages_free(struct pages *pg)
{
    free(pg->metrics), free(pg->plan), free(pg->time), free(pg->profile), free(pg->ranks), free(pg->largest);
    free(pg->ranks_run);
    free(pg->environment);
}

/* ---- report.json ------------------------------------------------------------------------- */

static json_t *plan_summary(const struct tr_run_report *rep)
{
    if (!rep->plan)
        return json_null();
    static const char *const copied[] = {
        "precision", "checkpointing", "dynamic_batching", "padding_fraction", "micro_batch", "micro",
        "accumulation", "predicted_peak_bytes", "measured_peak_bytes", "predicted_footprint_bytes",
        "measured_footprint_bytes", "budget_bytes", "regions", "measured_regions", "data", "reason"};
    json_t *p = json_object();
    json_object_set_new(p, "amp", json_string(*rep->amp ? rep->amp : "unknown"));
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        json_t *v = json_object_get(rep->plan, copied[i]);
        json_object_set(p, copied[i], v ? v : json_null());
    }
    json_t *dev = json_object_get(rep->plan, "device");
    json_object_set_new(p, "device", dev ? json_pack("{sO? sO? sO?}", "name", json_object_get(dev, "name"),
                                                     "description", json_object_get(dev, "description"),
                                                     "memory_bytes", json_object_get(dev, "memory_bytes"))
                                         : json_null());
    json_t *hash = json_object_get(rep->plan, "recipe_sha256");
    json_object_set(p, "recipe_sha256", hash ? hash : json_null());
    json_object_set_new(p, "data_workers", json_integer(rep->workers));
    json_object_set_new(p, "prefetch_factor", json_integer(rep->prefetch));
    return p;
}

static json_t *times_json(const struct tr_run_report *rep)
{
    if (!isfinite(rep->time[0]))
        return json_null();
    json_t *t = json_object();
    for (int i = 0; i < TR_REPORT_TIMES; i++)
        json_object_set_new(t, tr_report_time_names[i], number_or_null(rep->time[i]));
    return t;
}

static json_t *series_json(const struct tr_run_report *rep)
{
    json_t *all = json_object();
    for (int i = 0; i < rep->nseries; i++) {
        json_t *points = json_array();
        for (int k = 0; k < rep->series[i].n; k++)
            json_array_append_new(points, json_pack("[fo]", rep->series[i].step[k],
                                                    number_or_null(rep->series[i].value[k])));
        json_object_set_new(all, rep->series[i].name, points);
    }
    return all;
}

json_t *tr_run_report_json(const struct tr_run_report *rep)
{
    json_t *j = json_object(), *final = json_object(), *best = json_object(), *rows = json_array();
    json_object_set_new(j, "schema_version", json_integer(2));
    json_object_set_new(j, "run", json_string(rep->run));
    json_object_set_new(j, "name", json_string(rep->name));
    json_object_set_new(j, "arch", json_string(rep->arch));
    json_object_set_new(j, "dataset", json_string(rep->dataset));
    json_object_set_new(j, "status", json_string(rep->status));
    json_object_set_new(j, "exit_code", rep->exit_code >= 0 ? json_integer(rep->exit_code) : json_null());
    json_object_set_new(j, "duration_seconds", number_or_null(rep->seconds));
    json_object_set_new(j, "started", *rep->started ? json_string(rep->started) : json_null());
    json_object_set_new(j, "steps", json_integer(rep->last_step));
    int better;
    const struct tr_series *k = key_metric(rep, &better);
    json_object_set_new(j, "key_metric", k ? json_pack("{ss so ss}", "name", k->name, "value", number_or_null(last(k)),
                                                       "better", better > 0 ? "higher" : "lower")
                                           : json_null());
    for (int i = 0; i < rep->nseries; i++)
        json_object_set_new(final, rep->series[i].name, number_or_null(last(&rep->series[i])));
    for (size_t m = 0; m < sizeof key_metrics / sizeof key_metrics[0]; m++) {
        const struct tr_series *s = tr_run_report_series(rep, key_metrics[m].name);
        int b = key_metrics[m].best ? best_index(s, key_metrics[m].best) : -1;
        if (b >= 0)
            json_object_set_new(best, s->name, json_pack("{sIso}", "step", (json_int_t)s->step[b], "value",
                                                         number_or_null(s->value[b])));
    }
    json_object_set_new(j, "final", final);
    json_object_set_new(j, "best", best);
    json_object_set_new(j, "throughput", json_pack("{soso}", "samples_per_s",
                                                   number_or_null(median(tr_run_report_series(rep, "train/samples_per_s"))),
                                                   "tokens_per_s",
                                                   number_or_null(median(tr_run_report_series(rep, "train/tokens_per_s")))));
    json_object_set_new(j, "plan", plan_summary(rep));
    for (int i = 0; i < rep->nrows; i++)
        json_array_append_new(rows, json_pack("{ssssss}", "item", rep->rows[i].item, "setting",
                                              rep->rows[i].setting, "detail", rep->rows[i].detail));
    json_object_set_new(j, "checklist", rows);
    json_object_set_new(j, "time", times_json(rep));
    json_t *leak = json_object_get(rep->record, "leak"), *env = json_object_get(rep->record, "environment");
    json_object_set_new(j, "leak", leak ? json_incref(leak) : json_null());
    json_t *promotion = json_object_get(rep->record, "promotion");
    json_object_set_new(j, "promotion", promotion ? json_incref(promotion) : json_null());
    json_t *ranks = json_object_get(rep->record, "ranks");
    json_object_set_new(j, "ranks", ranks ? json_incref(ranks) : json_null());
    const json_t *trace = last_trace(rep);
    json_object_set_new(j, "profile", trace ? json_incref((json_t *)trace) : json_null());
    json_object_set_new(j, "graph", rep->graph_bytes >= 0
                                        ? json_pack("{sssIsb}", "svg", "graph.svg", "bytes", (json_int_t)rep->graph_bytes,
                                                    "inline", rep->graph_bytes <= TR_REPORT_GRAPH_INLINE)
                                        : json_null());
    json_object_set_new(j, "memory_timeline", timeline(rep) ? json_incref((json_t *)timeline(rep)) : json_null());
    json_object_set_new(j, "environment", env ? json_incref(env) : json_null());
    json_object_set(j, "warnings", rep->warnings);
    json_object_set_new(j, "series", series_json(rep));
    return j;
}

/* ---- report.md --------------------------------------------------------------------------- */

/* The activations over one micro-step as a text chart: 64 columns, 8 rows. */
static void md_timeline(FILE *out, const json_t *tl)
{
    enum { COLS = 64, ROWS = 8 };
    json_t *live = json_object_get(tl, "live_bytes");
    size_t n = json_array_size(live);
    double col[COLS] = {0}, peak = 1;
    for (size_t i = 0; i < n; i++) {
        double v = (double)json_integer_value(json_array_get(live, i));
        size_t c = i * COLS / n;
        col[c] = fmax(col[c], v), peak = fmax(peak, v);
    }
    long long nodes = (long long)json_integer_value(json_object_get(tl, "nodes"));
    long long backward = (long long)json_integer_value(json_object_get(tl, "backward_from"));
    char top[32];
    tr_format_bytes((uint64_t)json_integer_value(json_object_get(tl, "peak_bytes")), top);
    fprintf(out, "Activations live over one micro-step of %lld × %lld (%lld nodes; the top is %s, at node %lld, %s):\n\n"
            "```\n", (long long)json_integer_value(json_object_get(tl, "B")),
            (long long)json_integer_value(json_object_get(tl, "S")), nodes, top,
            (long long)json_integer_value(json_object_get(tl, "peak_node")),
            json_string_value(json_object_get(tl, "peak_op")));
    for (int row = ROWS; row >= 1 && n; row--) {
        fputc('|', out);
        for (int c = 0; c < COLS; c++)
            fputc(col[c] * ROWS >= peak * row - peak / 2 ? '#' : ' ', out);
        fputs("|\n", out);
    }
    int mark = nodes ? (int)(backward * COLS / nodes) : 0;
    fprintf(out, " %-*s^ backward from node %lld\n```\n\n", mark, "forward", backward);
}

static int write_md(FILE *out, const struct pages *pg)
{
    const struct tr_run_report *rep = pg->rep;
    fprintf(out, "# %s: %s\n\n", *rep->name ? rep->name : "run", rep->status);
    for (int i = 0; i < 6; i++)
        if (*pg->headline[i])
            fprintf(out, "- %s\n", pg->headline[i]);
    if (*pg->key)
        fprintf(out, "- Key metric: %s\n", pg->key);
    fputc('\n', out);
    if (pg->comparison)
        tr_compare_write_md(out, pg->comparison);
    fputs("## Warnings\n\n", out);
    size_t i;
    json_t *w;
    json_array_foreach(rep->warnings, i, w)
        fprintf(out, "- %s\n", json_string_value(json_object_get(w, "message")));
    fputs(json_array_size(rep->warnings) ? "\n" : "No warnings.\n\n", out);
    fputs("## Metrics\n\n", out);
    md_table(out, pg->metrics);
    fputs("## Plan and memory checklist\n\n", out);
    md_table(out, pg->plan);
    if (pg->time) {
        fputs("## Time\n\n", out);
        md_table(out, pg->time);
    }
    if (pg->ranks_run) {
        fputs("## Ranks\n\nEach rank, as it reported at the end of its steps:\n\n", out);
        md_table(out, pg->ranks_run);
    }
    if (pg->profile) {
        const json_t *tr = last_trace(rep), *st = json_object_get(tr, "steps");
        fprintf(out, "## Profile\n\nSteps %lld–%lld as traced in `traces/%s`, the top ops by time:\n\n",
                (long long)json_integer_value(json_array_get(st, 0)), (long long)json_integer_value(json_array_get(st, 1)),
                json_string_value(json_object_get(tr, "file")) ?: "?");
        md_table(out, pg->profile);
    }
    if (pg->ranks) {
        fprintf(out, "%s\n\n", pg->critical);
        md_table(out, pg->ranks);
    }
    if (pg->largest) {
        fputs("## Memory over one step\n\n", out);
        md_timeline(out, timeline(rep));
        fputs("The largest tensors live at the peak:\n\n", out);
        md_table(out, pg->largest);
    }
    if (rep->graph_bytes >= 0)
        fputs("## Program\n\nThe program the planner chose, drawn by Graphviz: [graph.svg](graph.svg) "
              "(its source: graph.dot; `trainrun graph --full` draws every block).\n\n", out);
    if (pg->environment) {
        fputs("## Environment\n\n", out);
        md_table(out, pg->environment);
    }
    return 0;
}

/* ---- report.html ------------------------------------------------------------------------- */

static const char css[] =
    "body{font-family:system-ui,sans-serif;max-width:56em;margin:0 auto;padding:0 1em;line-height:1.4;color:#222}"
    "table{border-collapse:collapse;width:100%;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;overflow-wrap:break-word}"
    "svg{width:100%;max-width:40em;height:auto;margin:.5em 0}.environment td,.compare td,.plan td{overflow-wrap:anywhere}"
    ".finished{color:#1a7f37}.failed,.unknown,.interrupted,.killed,.regression{color:#b3261e}.running,.time-limit{color:#8a4b00}"
    ".warnings li{color:#8a4b00}.regressions li{color:#b3261e;font-weight:bold}.none{color:#555}"
    ".graph svg{width:auto;max-width:100%;height:auto}pre{overflow-x:auto}.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(20em,1fr));gap:0 1em}"
    "@media (max-width:40em){body{padding:0 .4em}table{font-size:.85em}th,td{padding:.2em .3em}}";

/* One plot of up to three series; scale multiplies the values (bytes to MiB). */
static void plot(FILE *out, const struct tr_run_report *rep, const char *title, const char *ylabel, double scale,
                 const char *const names[3], const char *const labels[3])
{
    struct tr_svg_line lines[3];
    double *scaled[3] = {0};
    int n = 0;
    for (int i = 0; i < 3 && names[i]; i++) {
        const struct tr_series *s = tr_run_report_series(rep, names[i]);
        if (!s || !s->n)
            continue;
        const double *y = s->value;
        if (scale != 1 && (scaled[n] = malloc((size_t)s->n * sizeof(double)))) {
            for (int k = 0; k < s->n; k++)
                scaled[n][k] = s->value[k] * scale;
            y = scaled[n];
        }
        lines[n++] = (struct tr_svg_line){.label = labels[i], .x = s->step, .y = y, .n = s->n};
    }
    if (n)
        tr_svg_plot(out, title, ylabel, lines, n);
    for (int i = 0; i < 3; i++)
        free(scaled[i]);
}

static void html_plots(FILE *out, const struct tr_run_report *rep)
{
    fputs("<h2>Plots</h2>\n<div class=\"plots\">\n", out);
    plot(out, rep, "Loss", "loss", 1, (const char *const[3]){"train/loss", "eval/loss", NULL},
         (const char *const[3]){"train", "eval", NULL});
    plot(out, rep, "Learning rate", "lr", 1, (const char *const[3]){"train/lr", NULL, NULL},
         (const char *const[3]){"train/lr", NULL, NULL});
    int tokens = tr_run_report_series(rep, "train/tokens_per_s") != NULL;
    const char *speed = tokens ? "train/tokens_per_s" : "train/samples_per_s";
    plot(out, rep, "Throughput", tokens ? "tokens/s" : "samples/s", 1, (const char *const[3]){speed, NULL, NULL},
         (const char *const[3]){speed, NULL, NULL});
    plot(out, rep, "Memory", "MiB", 1.0 / 1048576,
         (const char *const[3]){"memory/rss", "memory/heap", "memory/predicted_footprint"},
         (const char *const[3]){"resident set", "heap in use", "predicted footprint"});
    plot(out, rep, "Loss scale", "loss scale", 1, (const char *const[3]){"train/loss_scale", NULL, NULL},
         (const char *const[3]){"fp16 loss scale", NULL, NULL});
    fputs("</div>\n", out);
}

/* The memory timeline: forward and backward nodes in two colours. */
static void html_timeline(FILE *out, const json_t *tl)
{
    json_t *live = json_object_get(tl, "live_bytes");
    int n = (int)json_array_size(live);
    long long nodes = (long long)json_integer_value(json_object_get(tl, "nodes"));
    long long backward = (long long)json_integer_value(json_object_get(tl, "backward_from"));
    double *x = malloc((size_t)n * 2 * sizeof *x), *fw = x ? x + n : NULL, *bw = malloc((size_t)n * sizeof *bw);
    if (x && bw && n) {
        for (int i = 0; i < n; i++) {
            double node = (double)i * (double)nodes / n, mib = (double)json_integer_value(json_array_get(live, i)) / 1048576;
            x[i] = node;
            fw[i] = node < (double)backward ? mib : NAN;
            bw[i] = (double)(i + 1) * (double)nodes / n > (double)backward ? mib : NAN;   /* joins the forward line */
        }
        char title[160];
        snprintf(title, sizeof title, "Activations over one micro-step (%lld × %lld)",
                 (long long)json_integer_value(json_object_get(tl, "B")),
                 (long long)json_integer_value(json_object_get(tl, "S")));
        tr_svg_plot_x(out, title, "node of the schedule", "MiB live",
                      (struct tr_svg_line[]){{.label = "forward", .x = x, .y = fw, .n = n},
                                             {.label = "backward", .x = x, .y = bw, .n = n}}, 2);
    }
    free(x), free(bw);
}

static void html_time(FILE *out, const struct tr_run_report *rep)
{
    static const char *const labels[TR_REPORT_TIMES - 1] = {"data", "forward", "backward", "recompute", "optimizer",
                                                            "evaluation", "checkpointing", "rest"};
    double parts[TR_REPORT_TIMES - 1];
    for (int i = 1; i < TR_REPORT_TIMES; i++)
        parts[i - 1] = isfinite(rep->time[i]) ? rep->time[i] : 0;
    tr_svg_shares(out, "Where the time went", labels, parts, TR_REPORT_TIMES - 1);
}

/* graph.svg in the page, from its <svg> element on (Graphviz's XML prologue and DOCTYPE are not
 * HTML's, nor are its namespace attributes: the page names no URL), when it is small enough;
 * else a link to it. */
static void html_graph(FILE *out, const struct tr_run_report *rep)
{
    fputs("<h2>Program</h2>\n<p>The program the planner chose, drawn by Graphviz (<a href=\"graph.svg\">graph.svg</a>, "
          "its source <a href=\"graph.dot\">graph.dot</a>): blue forward, orange backward, yellow dashed "
          "recomputed; one block in full, the others a box each.</p>\n", out);
    if (rep->graph_bytes > TR_REPORT_GRAPH_INLINE)
        return;
    struct tr_path path;
    tr_path_set(&path, NULL, "%s/graph.svg", rep->dir.s);
    FILE *svg = tr_fopen_regular(path.s, NULL);
    char *text = svg ? calloc(1, (size_t)TR_REPORT_GRAPH_INLINE + 1) : NULL;
    size_t n = text ? fread(text, 1, TR_REPORT_GRAPH_INLINE, svg) : 0;
    const char *start = n ? strstr(text, "<svg") : NULL, *end = start ? strchr(start, '>') : NULL;
    if (end) {   /* the <svg> tag without its xmlns attributes: HTML knows the namespace */
        fputs("<div class=\"graph\">", out);
        for (const char *c = start; c < end;) {
            const char *next = strchr(c + 1, ' ');
            if (!next || next > end)
                next = end;
            if (strncmp(c, " xmlns", 6))
                fwrite(c, 1, (size_t)(next - c), out);
            c = next;
        }
        fprintf(out, "%s</div>\n", end);
    }
    free(text);
    if (svg)
        fclose(svg);
}

static int write_html(FILE *out, const struct pages *pg)
{
    const struct tr_run_report *rep = pg->rep;
    const char *name = *rep->name ? rep->name : "run";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>", out);
    tr_html_escape(out, name);
    fprintf(out, ": %s</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", rep->status, css);
    tr_html_escape(out, name);
    fprintf(out, ": <span class=\"%s\">%s</span></h1>\n<ul>\n", rep->status, rep->status);
    for (int i = 0; i < 6; i++)
        if (*pg->headline[i]) {
            fputs(i == 4 && !strcmp(rep->status, "regression") ? "<li class=\"regression\">" : "<li>", out);
            tr_html_escape(out, pg->headline[i]);
            fputs("</li>\n", out);
        }
    if (*pg->key) {
        fputs("<li>Key metric: <b>", out);
        tr_html_escape(out, pg->key);
        fputs("</b></li>\n", out);
    }
    fputs("</ul>\n", out);
    if (pg->comparison)
        tr_compare_write_html(out, pg->comparison);
    fputs("<h2>Warnings</h2>\n", out);
    if (json_array_size(rep->warnings)) {
        fputs("<ul class=\"warnings\">\n", out);
        size_t i;
        json_t *w;
        json_array_foreach(rep->warnings, i, w) {
            fputs("<li>", out);
            tr_html_escape(out, json_string_value(json_object_get(w, "message")));
            fputs("</li>\n", out);
        }
        fputs("</ul>\n", out);
    } else
        fputs("<p class=\"none\">No warnings.</p>\n", out);
    fputs("<h2>Metrics</h2>\n", out);
    html_table(out, pg->metrics, "metrics");
    fputs("<h2>Plan and memory checklist</h2>\n", out);
    html_table(out, pg->plan, "plan");
    html_plots(out, rep);
    if (pg->time) {
        fputs("<h2>Time</h2>\n", out);
        html_time(out, rep);
        html_table(out, pg->time, "time");
    }
    if (pg->ranks_run) {
        fputs("<h2>Ranks</h2>\n<p>Each rank, as it reported at the end of its steps:</p>\n", out);
        html_table(out, pg->ranks_run, "ranks-run");
    }
    if (pg->profile) {
        const json_t *tr = last_trace(rep), *st = json_object_get(tr, "steps");
        fprintf(out, "<h2>Profile</h2>\n<p>Steps %lld–%lld as traced in <code>traces/%s</code>, the top ops by time:</p>\n",
                (long long)json_integer_value(json_array_get(st, 0)), (long long)json_integer_value(json_array_get(st, 1)),
                json_string_value(json_object_get(tr, "file")) ?: "?");
        html_table(out, pg->profile, "profile");
    }
    if (pg->ranks) {
        fputs("<p>", out);
        tr_html_escape(out, pg->critical);
        fputs("</p>\n", out);
        html_table(out, pg->ranks, "ranks");
    }
    if (pg->largest) {
        fputs("<h2>Memory over one step</h2>\n", out);
        html_timeline(out, timeline(rep));
        fputs("<p>The largest tensors live at the peak:</p>\n", out);
        html_table(out, pg->largest, "largest");
    }
    if (rep->graph_bytes >= 0)
        html_graph(out, rep);
    if (pg->environment) {
        fputs("<h2>Environment</h2>\n", out);
        html_table(out, pg->environment, "environment");
    }
    fputs("</body>\n</html>\n", out);
    return 0;
}

/* The comparison with the previous run of the same recipe (compare.h), judged with the limits
 * this run recorded; NULL when there is no previous run with a report. */
static json_t *compare_with_previous(const struct tr_run_report *rep)
{
    struct tr_path previous_dir;
    if (!tr_report_find_previous(rep->dir.s, &previous_dir))
        return NULL;
    json_t *previous = tr_report_json_load(previous_dir.s);
    if (!previous)
        return NULL;
    struct tr_regression_limits lim;
    tr_regression_limits_read(rep->dir.s, &lim);
    json_t *current = tr_run_report_json(rep), *cmp = tr_report_compare(previous, current, &lim);
    json_decref(previous);
    json_decref(current);
    return cmp;
}

/* ---- files --------------------------------------------------------------------------------- */

struct writer {
    const char *name;
    int (*fill)(FILE *, const struct pages *);
};

static int write_json_file(FILE *out, const struct pages *pg)
{
    json_t *j = tr_run_report_json(pg->rep);
    if (pg->comparison)
        json_object_set(j, "comparison", (json_t *)pg->comparison);
    int rc = json_dumpf(j, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', out);
    json_decref(j);
    return rc;
}

static int write_atomic(const char *dir, const char *name, int (*fill)(FILE *, const struct pages *),
                        const struct pages *pg, struct tr_diag *d)
{
    struct tr_atomic a;
    FILE *out = tr_report_file_open(&a, dir, name, d);
    return out ? tr_report_file_commit(&a, fill(out, pg), d) : TR_EIO;
}

int tr_run_report_write(const struct tr_run_report *rep, struct tr_diag *d)
{
    json_t *comparison = compare_with_previous(rep);
    struct pages pg;
    pages_build(&pg, rep, comparison);
    int rc = write_atomic(rep->dir.s, "report.json", write_json_file, &pg, d);
    if (!rc)
        rc = write_atomic(rep->dir.s, "report.md", write_md, &pg, d);
    if (!rc)
        rc = write_atomic(rep->dir.s, "report.html", write_html, &pg, d);
    pages_free(&pg);
    json_decref(comparison);
    return rc;
}

/* Here, above both halves (run_report.c reads, this file writes), so neither calls the other. */
int tr_run_report_render(const char *dir, const struct tr_run_outcome *outcome, struct tr_diag *d)
{
    struct tr_run_report rep;
    int rc = tr_run_report_load(dir, outcome, &rep, d);
    if (!rc)
        rc = tr_run_report_write(&rep, d);
    tr_run_report_free(&rep);
    return rc;
}
