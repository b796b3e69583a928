/* The run report's writing half (reporter, DESIGN.md §2): struct tr_run_report as
 * report.json (trainrun-report(5)), report.md (a terminal, git) and report.html (one file,
 * inline CSS and SVG). Each goes to a temporary file renamed over the old one, so a reader
 * never sees half a report; nothing time-dependent goes in, so re-rendering is byte-stable. */
#include "report/run_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/svg.h"

/* The metrics the summary tables show, in this order, when the run logged them; best: the
 * lowest (−1) or highest (+1) value, 0 for none. */
static const struct { const char *name; int best; } key_metrics[] = {
    {"train/loss", 0}, {"eval/loss", -1}, {"eval/accuracy", 1}, {"eval/perplexity", -1},
    {"test/loss", 0}, {"test/accuracy", 0}, {"train/samples_per_s", 0}, {"train/tokens_per_s", 0},
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

static json_t *number_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static void duration_words(double seconds, char out[48])
{
    if (!isfinite(seconds))
        snprintf(out, 48, "unknown");
    else if (seconds < 120)
        snprintf(out, 48, "%.1f s", seconds);
    else if (seconds < 7200)
        snprintf(out, 48, "%.1f min", seconds / 60);
    else
        snprintf(out, 48, "%.1f h", seconds / 3600);
}

/* ---- report.json ------------------------------------------------------------------------- */

static json_t *plan_summary(const struct tr_run_report *rep)
{
    if (!rep->plan)
        return json_null();
    static const char *const copied[] = {
        "precision", "checkpointing", "dynamic_batching", "padding_fraction", "micro_batch", "micro",
        "accumulation", "predicted_peak_bytes", "measured_peak_bytes", "predicted_footprint_bytes",
        "measured_footprint_bytes", "budget_bytes", "regions", "measured_regions", "reason"};
    json_t *p = json_object();
    json_object_set_new(p, "amp", json_string(*rep->amp ? rep->amp : "unknown"));
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        json_t *v = json_object_get(rep->plan, copied[i]);
        json_object_set(p, copied[i], v ? v : json_null());
    }
    json_object_set_new(p, "data_workers", json_integer(rep->workers));
    json_object_set_new(p, "prefetch_factor", json_integer(rep->prefetch));
    return p;
}

static json_t *report_json(const struct tr_run_report *rep)
{
    json_t *j = json_object(), *final = json_object(), *best = json_object(), *rows = json_array();
    json_object_set_new(j, "schema_version", json_integer(1));
    json_object_set_new(j, "name", json_string(rep->name));
    json_object_set_new(j, "arch", json_string(rep->arch));
    json_object_set_new(j, "dataset", json_string(rep->dataset));
    json_object_set_new(j, "status", json_string(rep->status));
    json_object_set_new(j, "exit_code", rep->exit_code >= 0 ? json_integer(rep->exit_code) : json_null());
    json_object_set_new(j, "duration_seconds", number_or_null(rep->seconds));
    json_object_set_new(j, "steps", json_integer(rep->last_step));
    for (int i = 0; i < rep->nseries; i++)
        json_object_set_new(final, rep->series[i].name, number_or_null(last(&rep->series[i])));
    for (size_t k = 0; k < sizeof key_metrics / sizeof key_metrics[0]; k++) {
        const struct tr_series *s = tr_run_report_series(rep, key_metrics[k].name);
        int b = key_metrics[k].best ? best_index(s, key_metrics[k].best) : -1;
        if (b >= 0)
            json_object_set_new(best, s->name, json_pack("{sIso}", "step", (json_int_t)s->step[b], "value",
                                                         number_or_null(s->value[b])));
    }
    json_object_set_new(j, "final", final);
    json_object_set_new(j, "best", best);
    json_object_set_new(j, "plan", plan_summary(rep));
    for (int i = 0; i < rep->nrows; i++)
        json_array_append_new(rows, json_pack("{ssssss}", "item", rep->rows[i].item, "setting",
                                              rep->rows[i].setting, "detail", rep->rows[i].detail));
    json_object_set_new(j, "checklist", rows);
    json_object_set(j, "warnings", rep->warnings);
    return j;
}

static int write_json(FILE *out, const struct tr_run_report *rep)
{
    json_t *j = report_json(rep);
    int rc = json_dumpf(j, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', out);
    json_decref(j);
    return rc;
}

/* ---- report.md --------------------------------------------------------------------------- */

/* A table cell: a '|' would end it and a newline the row. */
static void md_cell(FILE *out, const char *text)
{
    fputs("| ", out);
    for (const char *p = text; *p; p++)
        if (*p == '|')
            fputs("\\|", out);
        else
            fputc(*p == '\n' ? ' ' : *p, out);
    fputc(' ', out);
}

/* A table's final and best cells for s; best is empty for a metric with no better direction. */
static void metric_cells(const struct tr_series *s, int sign, char final[64], char best[64])
{
    snprintf(final, 64, "%.6g", s->value[s->n - 1]);
    int b = sign ? best_index(s, sign) : -1;
    if (b < 0)
        *best = 0;
    else
        snprintf(best, 64, "%.6g at step %.0f", s->value[b], s->step[b]);
}

static int write_md(FILE *out, const struct tr_run_report *rep)
{
    char took[48], code[16];
    duration_words(rep->seconds, took);
    snprintf(code, sizeof code, rep->exit_code >= 0 ? "%d" : "unknown", rep->exit_code);
    fprintf(out, "# %s: %s\n\n", *rep->name ? rep->name : "run", rep->status);
    fprintf(out, "- Status: %s (exit code %s)\n- Duration: %s\n- Steps: %lld\n- Model: %s on %s\n\n",
            rep->status, code, took, rep->last_step, rep->arch, rep->dataset);
    fputs("## Metrics\n\n| metric | final | best |\n| --- | --- | --- |\n", out);
    for (size_t k = 0; k < sizeof key_metrics / sizeof key_metrics[0]; k++) {
        const struct tr_series *s = tr_run_report_series(rep, key_metrics[k].name);
        if (!s || !s->n)
            continue;
        char final[64], best[64];
        metric_cells(s, key_metrics[k].best, final, best);
        md_cell(out, s->name), md_cell(out, final), md_cell(out, best);
        fputs("|\n", out);
    }
    fputs("\n## Plan\n\n| item | setting | why, measured |\n| --- | --- | --- |\n", out);
    for (int i = 0; i < rep->nrows; i++) {
        md_cell(out, rep->rows[i].item), md_cell(out, rep->rows[i].setting), md_cell(out, rep->rows[i].detail);
        fputs("|\n", out);
    }
    fputs("\n## Warnings\n\n", out);
    size_t i;
    json_t *w;
    json_array_foreach(rep->warnings, i, w)
        fprintf(out, "- %s\n", json_string_value(json_object_get(w, "message")));
    if (!json_array_size(rep->warnings))
        fputs("None.\n", out);
    return 0;
}

/* ---- report.html ------------------------------------------------------------------------- */

static const char css[] =
    "body{font-family:system-ui,sans-serif;max-width:56em;margin:0 auto;padding:0 1em;line-height:1.4;color:#222}"
    "table{border-collapse:collapse;width:100%;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;overflow-wrap:break-word}"
    "td:last-child{overflow-wrap:anywhere}svg.plot{width:100%;height:auto;margin:.5em 0}"
    ".finished{color:#1a7f37}.failed,.unknown,.interrupted{color:#b3261e}"
    ".warnings li{color:#8a4b00}";

static void html_row(FILE *out, const char *tag, const char *const *cells, int n)
{
    fputs("<tr>", out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "<%s>", tag);
        tr_html_escape(out, cells[i]);
        fprintf(out, "</%s>", tag);
    }
    fputs("</tr>\n", out);
}

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
    fputs("<h2>Plots</h2>\n", out);
    plot(out, rep, "Loss", "loss", 1, (const char *const[3]){"train/loss", "eval/loss", NULL},
         (const char *const[3]){"train", "eval", NULL});
    plot(out, rep, "Learning rate", "lr", 1, (const char *const[3]){"train/lr", NULL, NULL},
         (const char *const[3]){"train/lr", NULL, NULL});
    int tokens = tr_run_report_series(rep, "train/tokens_per_s") != NULL;
    const char *speed = tokens ? "train/tokens_per_s" : "train/samples_per_s";
    plot(out, rep, "Throughput", tokens ? "tokens/s" : "samples/s", 1, (const char *const[3]){speed, NULL, NULL},
         (const char *const[3]){speed, NULL, NULL});
    plot(out, rep, "Memory", "MiB", 1.0 / 1048576,
         (const char *const[3]){"memory/allocated", "memory/peak", "memory/predicted_footprint"},
         (const char *const[3]){"allocated", "peak RSS", "predicted footprint"});
    plot(out, rep, "Loss scale", "loss scale", 1, (const char *const[3]){"train/loss_scale", NULL, NULL},
         (const char *const[3]){"fp16 loss scale", NULL, NULL});
}

static void html_tables(FILE *out, const struct tr_run_report *rep)
{
    fputs("<h2>Metrics</h2>\n<table>\n", out);
    html_row(out, "th", (const char *const[]){"metric", "final", "best"}, 3);
    for (size_t k = 0; k < sizeof key_metrics / sizeof key_metrics[0]; k++) {
        const struct tr_series *s = tr_run_report_series(rep, key_metrics[k].name);
        if (!s || !s->n)
            continue;
        char final[64], best[64];
        metric_cells(s, key_metrics[k].best, final, best);
        html_row(out, "td", (const char *const[]){s->name, final, best}, 3);
    }
    fputs("</table>\n<h2>Plan</h2>\n<table>\n", out);
    html_row(out, "th", (const char *const[]){"item", "setting", "why, measured"}, 3);
    for (int i = 0; i < rep->nrows; i++)
        html_row(out, "td", (const char *const[]){rep->rows[i].item, rep->rows[i].setting, rep->rows[i].detail}, 3);
    fputs("</table>\n<h2>Warnings</h2>\n<ul class=\"warnings\">\n", out);
    size_t i;
    json_t *w;
    json_array_foreach(rep->warnings, i, w) {
        fputs("<li>", out);
        tr_html_escape(out, json_string_value(json_object_get(w, "message")));
        fputs("</li>\n", out);
    }
    fputs(json_array_size(rep->warnings) ? "</ul>\n" : "<li>None.</li>\n</ul>\n", out);
}

static int write_html(FILE *out, const struct tr_run_report *rep)
{
    char took[48], code[16];
    duration_words(rep->seconds, took);
    snprintf(code, sizeof code, rep->exit_code >= 0 ? "%d" : "unknown", rep->exit_code);
    const char *name = *rep->name ? rep->name : "run";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>", out);
    tr_html_escape(out, name);
    fprintf(out, ": %s</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", rep->status, css);
    tr_html_escape(out, name);
    fprintf(out, ": <span class=\"%s\">%s</span></h1>\n<ul>\n", rep->status, rep->status);
    fprintf(out, "<li>Status: %s (exit code %s)</li>\n<li>Duration: %s</li>\n<li>Steps: %lld</li>\n<li>Model: ",
            rep->status, code, took, rep->last_step);
    tr_html_escape(out, rep->arch);
    fputs(" on ", out);
    tr_html_escape(out, rep->dataset);
    fputs("</li>\n</ul>\n", out);
    html_tables(out, rep);
    html_plots(out, rep);
    fputs("</body>\n</html>\n", out);
    return 0;
}

/* ---- files --------------------------------------------------------------------------------- */

static int write_atomic(const struct tr_run_report *rep, const char *name,
                        int (*fill)(FILE *, const struct tr_run_report *), char *err, size_t errsize)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", rep->dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", rep->dir, name);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        snprintf(err, errsize, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    int rc = fill(out, rep);
    rc |= ferror(out);
    rc |= fclose(out);
    if (rc || rename(tmp, path)) {
        snprintf(err, errsize, "cannot write %s: %s", path, errno ? strerror(errno) : "write error");
        unlink(tmp);
        return -1;
    }
    return 0;
}

int tr_run_report_write(const struct tr_run_report *rep, char *err, size_t errsize)
{
    if (write_atomic(rep, "report.json", write_json, err, errsize) ||
        write_atomic(rep, "report.md", write_md, err, errsize) ||
        write_atomic(rep, "report.html", write_html, err, errsize))
        return -1;
    return 0;
}
