/* The runs index (reporter, DESIGN.md §2): RUNS/index.md and RUNS/index.html from the
 * report.json of every run folder RUNS/NAME/STAMP, newest first, each run compared with the
 * one before it (compare.c) and each recipe's key metric drawn as a trend. Only the folders'
 * names and files go in, never the time, so rendering twice gives the same bytes. */
#include "report/index.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/atomic.h"
#include "report/compare.h"
#include "report/svg.h"

/* One run folder: its report.json (NULL: none, or it does not parse) and the comparison with
 * the newest older run of its recipe that has one (NULL: none). */
struct run_entry {
    char *stamp;
    json_t *report, *cmp;
    int has_md, has_html;   /* report.md, report.html are there to link to */
};

/* A recipe's folder: its runs newest first; metric: the key metric its trend follows (the
 * newest run's), or NULL; the trend: that metric's values, oldest first, and their colours. */
struct recipe_entry {
    char *name;
    struct run_entry *runs;
    int n;
    const char *metric, *better;
    double *trend;
    const char **trend_colours;
    int ntrend;
};

/* The recipes in folder order, and in the summary's order (not finished first). */
struct runs_index {
    const char *dir;
    struct recipe_entry *recipes;
    const struct recipe_entry **by_urgency;
    int n, nruns;
};

/* A path too long to name a file names none: 0. */
static int has_file(const char *dir, const char *name)
{
    struct tr_path path;
    return tr_path_set(&path, NULL, "%s/%s", dir, name) == 0 && !access(path.s, F_OK);
}

/* A run folder holds what the trainer writes first (recipe.yaml, plan.json) or last. */
static int is_run(const char *dir)
{
    return has_file(dir, "metrics.jsonl") || has_file(dir, "plan.json") || has_file(dir, "report.json") ||
           has_file(dir, "recipe.yaml");
}

/* 1 when a subfolder of dir is a run. */
static int holds_run(const char *dir)
{
    int n, found = 0;
    char **names = tr_subfolders(dir, &n);
    for (int i = 0; i < n && !found; i++) {
        struct tr_path path;
        found = tr_path_set(&path, NULL, "%s/%s", dir, names[i]) == 0 && is_run(path.s);
    }
    tr_names_free(names);
    return found;
}

enum tr_folder_kind tr_folder_kind(const char *dir)
{
    if (is_run(dir))
        return TR_FOLDER_RUN;
    if (holds_run(dir))
        return TR_FOLDER_RECIPE;
    int n;
    enum tr_folder_kind kind = TR_FOLDER_OTHER;
    char **names = tr_subfolders(dir, &n);
    for (int i = 0; i < n && kind == TR_FOLDER_OTHER; i++) {
        struct tr_path path;
        if (tr_path_set(&path, NULL, "%s/%s", dir, names[i]) == 0 && holds_run(path.s))
            kind = TR_FOLDER_RUNS;
    }
    tr_names_free(names);
    return kind;
}

/* ---- reading the folders ----------------------------------------------------------------- */

static const char *string_of(const json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

/* The key metric's values, oldest first, coloured by the run's status. */
static void find_trend(struct recipe_entry *r)
{
    for (int i = r->n - 1; i >= 0 && r->metric; i--) {
        const json_t *km = json_object_get(r->runs[i].report, "key_metric");
        json_t *v = json_object_get(km, "value");
        const char *name = string_of(km, "name"), *status = string_of(r->runs[i].report, "status");
        if (!name || strcmp(name, r->metric) || !json_is_number(v))
            continue;
        r->trend[r->ntrend] = json_number_value(v);
        r->trend_colours[r->ntrend++] = !status ? "#888" : !strcmp(status, "finished") ? "#1a7f37"
                                      : !strcmp(status, "interrupted") || !strcmp(status, "time-limit") ? "#8a4b00"
                                      : !strcmp(status, "failed") ? "#b3261e" : "#888";
    }
}

/* The runs of recipe r, newest first, each compared with the one before it; −1 with errno
 * (ENAMETOOLONG for a path past PATH_MAX) when they cannot be read. */
static int load_recipe(const char *runs_dir, struct recipe_entry *r)
{
    struct tr_path folder;
    if (tr_path_set(&folder, NULL, "%s/%s", runs_dir, r->name))
        return errno = ENAMETOOLONG, -1;
    const char *dir = folder.s;
    int n;
    char **stamps = tr_subfolders(dir, &n);
    if (!stamps)
        return -1;
    r->runs = calloc((size_t)(n ? n : 1), sizeof *r->runs);
    r->trend = calloc((size_t)(n ? n : 1), sizeof *r->trend);
    r->trend_colours = calloc((size_t)(n ? n : 1), sizeof *r->trend_colours);
    if (!r->runs || !r->trend || !r->trend_colours) {
        tr_names_free(stamps);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct run_entry *e = &r->runs[n - 1 - i];
        struct tr_path path;
        int fits = tr_path_set(&path, NULL, "%s/%s", dir, stamps[i]) == 0;   /* else listed without a report */
        e->stamp = stamps[i];
        e->report = fits ? tr_report_json_load(path.s) : NULL;
        e->has_md = fits && has_file(path.s, "report.md"), e->has_html = fits && has_file(path.s, "report.html");
        stamps[i] = NULL;
    }
    free(stamps);
    r->n = n;
    for (int i = 0; i < n; i++) {
        int j = i + 1;
        while (j < n && !r->runs[j].report)
            j++;
        if (!r->runs[i].report || j == n)
            continue;
        struct tr_regression_limits lim;
        struct tr_path path;
        tr_path_set(&path, NULL, "%s/%s", dir, r->runs[i].stamp);   /* it fit above, as it had a report */
        tr_regression_limits_read(path.s, &lim);
        r->runs[i].cmp = tr_report_compare(r->runs[j].report, r->runs[i].report, &lim);
    }
    for (int i = 0; i < n && !r->metric; i++) {
        const json_t *km = json_object_get(r->runs[i].report, "key_metric");
        r->metric = string_of(km, "name"), r->better = string_of(km, "better");
    }
    find_trend(r);
    return 0;
}

static void index_free(struct runs_index *ix)
{
    for (int i = 0; i < ix->n; i++) {
        struct recipe_entry *r = &ix->recipes[i];
        for (int k = 0; k < r->n; k++) {
            free(r->runs[k].stamp);
            json_decref(r->runs[k].report);
            json_decref(r->runs[k].cmp);
        }
        free(r->runs), free(r->trend), free(r->trend_colours);
        free(r->name);
    }
    free(ix->recipes);
    free(ix->by_urgency);
}

/* The summary's order: recipes whose newest run did not finish first, then by name. */
static int status_rank(const struct recipe_entry *r)
{
    const char *status = string_of(r->runs[0].report, "status");
    return !status ? 2 : !strcmp(status, "failed") ? 0 : !strcmp(status, "finished") ? 3 : 1;
}

static int by_urgency(const void *a, const void *b)
{
    const struct recipe_entry *x = *(const struct recipe_entry *const *)a, *y = *(const struct recipe_entry *const *)b;
    int rx = status_rank(x), ry = status_rank(y);
    return rx != ry ? rx - ry : strverscmp(x->name, y->name);
}

/* The recipes in the summary's order, in a new array (free it). */
static const struct recipe_entry **by_urgency_order(const struct runs_index *ix)
{
    const struct recipe_entry **order = malloc((size_t)(ix->n ? ix->n : 1) * sizeof *order);
    for (int i = 0; order && i < ix->n; i++)
        order[i] = &ix->recipes[i];
    if (order)
        qsort(order, (size_t)ix->n, sizeof *order, by_urgency);
    return order;
}

/* Every recipe folder: one that holds at least one run folder. */
static int index_load(struct runs_index *ix, const char *dir, struct tr_diag *d)
{
    *ix = (struct runs_index){.dir = dir};
    int n;
    char **names = tr_subfolders(dir, &n);
    if (!names)
        return tr_fail(d, TR_EIO, "cannot read %s: %s", dir, strerror(errno));
    ix->recipes = calloc((size_t)(n ? n : 1), sizeof *ix->recipes);
    int rc = ix->recipes ? 0 : -1;
    for (int i = 0; !rc && i < n; i++) {
        struct tr_path path;
        /* not a recipe's folder (or past PATH_MAX): nothing to list */
        if (tr_path_set(&path, NULL, "%s/%s", dir, names[i]) || !holds_run(path.s))
            continue;
        struct recipe_entry *r = &ix->recipes[ix->n++];
        rc = (r->name = strdup(names[i])) ? load_recipe(dir, r) : -1;
        ix->nruns += r->n;
    }
    tr_names_free(names);
    if (!rc && !(ix->by_urgency = by_urgency_order(ix)))
        rc = -1;
    if (rc)
        return tr_fail(d, TR_EIO, "cannot read the run folders under %s: %s", dir, strerror(errno ? errno : ENOMEM));
    return 0;
}

/* ---- one run's cells ----------------------------------------------------------------------- */

struct run_cells {
    char status[64], code[24], duration[48], metric[128], change[160], plan[320], footprint[48], started[24];
    const char *status_class;
    char regressions[1200];
    int nregressions;
};

/* Accuracies are read in per cent. */
static double metric_scale(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n >= 8 && !strcmp(name + n - 8, "accuracy") ? 100 : 1;
}

static void run_cells(const struct recipe_entry *r, const struct run_entry *e, struct run_cells *c)
{
    *c = (struct run_cells){0};
    const json_t *rep = e->report;
    const char *status = string_of(rep, "status");
    if (!rep)
        snprintf(c->status, sizeof c->status, "unknown (no report)"), c->status_class = "no-report";
    else
        snprintf(c->status, sizeof c->status, "%s", status ? status : "unknown"),
            c->status_class = status && strlen(status) < 16 ? status : "unknown";
    json_t *code = json_object_get(rep, "exit_code"), *secs = json_object_get(rep, "duration_seconds");
    if (json_is_integer(code))
        snprintf(c->code, sizeof c->code, "%" JSON_INTEGER_FORMAT, json_integer_value(code));
    if (json_is_number(secs))
        tr_format_elapsed(json_number_value(secs), c->duration);
    const char *started = string_of(rep, "started");   /* 2026-11-29T18:32:05Z: the minute is enough */
    if (started && strlen(started) >= 16)
        snprintf(c->started, sizeof c->started, "%.10s %.5s", started, started + 11);
    else
        snprintf(c->started, sizeof c->started, "%s", started ? started : "");
    const json_t *km = json_object_get(rep, "key_metric");
    json_t *value = json_object_get(km, "value");
    const char *name = string_of(km, "name");
    if (json_is_number(value))
        snprintf(c->metric, sizeof c->metric, "%.4g%s%s%s%s", json_number_value(value) * metric_scale(name),
                 metric_scale(name) == 100 ? " %" : "",
                 name && r->metric && strcmp(name, r->metric) ? " (" : "",
                 name && r->metric && strcmp(name, r->metric) ? name : "",
                 name && r->metric && strcmp(name, r->metric) ? ")" : "");
    const json_t *m = json_object_get(e->cmp, "metric");
    if (json_is_object(m))
        tr_format_change(metric_scale(name) * json_number_value(json_object_get(m, "previous")),
                         metric_scale(name) * json_number_value(json_object_get(m, "current")), c->change);
    tr_plan_words(json_object_get(rep, "plan"), c->plan, sizeof c->plan);
    json_t *footprint = json_object_get(json_object_get(rep, "plan"), "measured_footprint_bytes");
    if (json_is_integer(footprint) && json_integer_value(footprint) >= 0) {
        char b[32];
        tr_format_bytes((uint64_t)json_integer_value(footprint), b);
        snprintf(c->footprint, sizeof c->footprint, "%s", b);
    }
    size_t i;
    json_t *line;
    json_array_foreach(json_object_get(e->cmp, "regressions"), i, line) {
        snprintf(c->regressions + strlen(c->regressions), sizeof c->regressions - strlen(c->regressions), "%s%s",
                 i ? "; " : "", json_string_value(line));
        c->nregressions++;
    }
}

static int not_finished(const struct runs_index *ix)
{
    int n = 0;
    for (int i = 0; i < ix->n; i++)
        n += status_rank(&ix->recipes[i]) != 3;   /* a regression finished, but is not fine either */
    return n;
}

static void summary_words(const struct runs_index *ix, char out[256])
{
    int bad = not_finished(ix);
    int len = snprintf(out, 256, "%d recipe%s, %d run%s. ", ix->n, ix->n == 1 ? "" : "s", ix->nruns,
                       ix->nruns == 1 ? "" : "s");
    if (!ix->n)
        snprintf(out + len, 256 - (size_t)len, "No runs yet.");
    else if (!bad)
        snprintf(out + len, 256 - (size_t)len, "The newest run of every recipe finished.");
    else
        snprintf(out + len, 256 - (size_t)len, "The newest run of %d recipe%s did not finish or regressed.", bad,
                 bad == 1 ? "" : "s");
}

static void trend_words(const struct recipe_entry *r, char out[256])
{
    int n = r->ntrend;
    double scale = metric_scale(r->metric);
    const char *unit = scale == 100 ? " %" : "";
    snprintf(out, 256, "%s%s%s%s over %d run%s: %.4g%s → %.4g%s", r->metric, r->better ? " (" : "",
             r->better ? r->better : "", r->better ? " is better)" : "", n, n == 1 ? "" : "s", scale * r->trend[0],
             unit, scale * r->trend[n - 1], unit);
}

/* ---- index.md ------------------------------------------------------------------------------ */

/* A link cell to NAME/STAMP/FILE when the file is there, else the stamp alone. */
static void md_link_cell(FILE *out, const char *name, const struct run_entry *e)
{
    if (e->has_md)
        fprintf(out, "| [%s](%s/%s/report.md) ", e->stamp, name, e->stamp);
    else
        tr_md_cell(out, e->stamp);
}

static void md_sparkline(FILE *out, const double *y, int n)
{
    static const char *const bars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    double lo = y[0], hi = y[0];
    for (int i = 1; i < n; i++)
        lo = fmin(lo, y[i]), hi = fmax(hi, y[i]);
    for (int i = 0; i < n; i++)
        fputs(bars[hi > lo ? (int)lround(7 * (y[i] - lo) / (hi - lo)) : 3], out);
}

static void md_recipe(FILE *out, const struct recipe_entry *r)
{
    fprintf(out, "\n## %s\n\n", r->name);
    if (r->ntrend >= 2) {
        char words[256];
        trend_words(r, words);
        fputs("Trend: ", out);
        md_sparkline(out, r->trend, r->ntrend);
        fprintf(out, " %s\n\n", words);
    }
    const char *head[] = {"run", "started", "status", "exit", "duration", r->metric ? r->metric : "key metric",
                          "change", "plan", "footprint", "regressions"};
    for (int i = 0; i < 10; i++)
        tr_md_cell(out, head[i]);
    fputs("|\n", out);
    for (int i = 0; i < 10; i++)
        fputs("| --- ", out);
    fputs("|\n", out);
    for (int i = 0; i < r->n; i++) {
        struct run_cells c;
        run_cells(r, &r->runs[i], &c);
        md_link_cell(out, r->name, &r->runs[i]);
        const char *cells[] = {c.started, c.status, c.code, c.duration, c.metric, c.change, c.plan, c.footprint,
                               c.regressions};
        for (size_t k = 0; k < sizeof cells / sizeof cells[0]; k++)
            tr_md_cell(out, cells[k]);
        fputs("|\n", out);
    }
}

static int write_md(FILE *out, const struct runs_index *ix)
{
    char words[256];
    summary_words(ix, words);
    fprintf(out, "# Runs\n\n%s\n\n", words);
    if (ix->n)
        fputs("| recipe | newest run | status | key metric | change | regressions |\n"
              "| --- | --- | --- | --- | --- | --- |\n", out);
    for (int i = 0; i < ix->n; i++) {
        const struct recipe_entry *r = ix->by_urgency[i];
        struct run_cells c;
        run_cells(r, &r->runs[0], &c);
        char regressions[16];
        snprintf(regressions, sizeof regressions, "%d", c.nregressions);
        tr_md_cell(out, r->name);
        md_link_cell(out, r->name, &r->runs[0]);
        tr_md_cell(out, c.status), tr_md_cell(out, c.metric), tr_md_cell(out, c.change);
        tr_md_cell(out, c.nregressions ? regressions : "");
        fputs("|\n", out);
    }
    for (int i = 0; i < ix->n; i++)
        md_recipe(out, &ix->recipes[i]);
    return 0;
}

/* ---- index.html ---------------------------------------------------------------------------- */

/* A relative URL path: the characters a folder name may hold that a URL may not are
 * percent-encoded. */
static void url_path(FILE *out, const char *path)
{
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
            fputc(*p, out);
        else
            fprintf(out, "%%%02X", *p);
}

static void html_cell(FILE *out, const char *text, const char *cls)
{
    fputs(cls ? "<td class=\"" : "<td>", out);
    if (cls) {
        tr_html_escape(out, cls);
        fputs("\">", out);
    }
    tr_html_escape(out, text);
    fputs("</td>", out);
}

/* The run's stamp, linked to its report.html (else report.md) when there is one. */
static void html_link_cell(FILE *out, const char *name, const struct run_entry *e)
{
    fputs("<td>", out);
    if (e->has_html || e->has_md) {
        fputs("<a href=\"", out);
        url_path(out, name);
        fputc('/', out);
        url_path(out, e->stamp);
        fputs(e->has_html ? "/report.html\">" : "/report.md\">", out);
    }
    tr_html_escape(out, e->stamp);
    fputs(e->has_html || e->has_md ? "</a></td>" : "</td>", out);
}

static void html_head_row(FILE *out, const char *const *head, int n)
{
    fputs("<tr>", out);
    for (int i = 0; i < n; i++) {
        fputs("<th>", out);
        tr_html_escape(out, head[i]);
        fputs("</th>", out);
    }
    fputs("</tr>\n", out);
}

static void html_recipe(FILE *out, const struct recipe_entry *r)
{
    fputs("<h2 id=\"r-", out);
    tr_html_escape(out, r->name);
    fputs("\">", out);
    tr_html_escape(out, r->name);
    fputs("</h2>\n", out);
    if (r->ntrend >= 2) {
        char words[256];
        trend_words(r, words);
        fputs("<p>Trend: ", out);
        tr_svg_sparkline(out, words, r->trend, r->trend_colours, r->ntrend);
        fputc(' ', out);
        tr_html_escape(out, words);
        fputs("</p>\n", out);
    }
    const char *head[] = {"run", "started", "status", "exit", "duration", r->metric ? r->metric : "key metric",
                          "change", "plan", "footprint", "regressions"};
    fputs("<div class=\"scroll\"><table class=\"runs\">\n", out);
    html_head_row(out, head, 10);
    for (int i = 0; i < r->n; i++) {
        struct run_cells c;
        run_cells(r, &r->runs[i], &c);
        fputs("<tr>", out);
        html_link_cell(out, r->name, &r->runs[i]);
        html_cell(out, c.started, NULL), html_cell(out, c.status, c.status_class), html_cell(out, c.code, NULL);
        html_cell(out, c.duration, NULL), html_cell(out, c.metric, NULL), html_cell(out, c.change, NULL);
        html_cell(out, c.plan, NULL), html_cell(out, c.footprint, NULL);
        html_cell(out, c.regressions, c.nregressions ? "failed" : NULL);
        fputs("</tr>\n", out);
    }
    fputs("</table></div>\n", out);
}

static void html_summary(FILE *out, const struct runs_index *ix)
{
    const struct recipe_entry *const *order = ix->by_urgency;
    char words[256];
    summary_words(ix, words);
    fputs("<p class=\"summary\">", out);
    tr_html_escape(out, words);
    fputs("</p>\n", out);
    if (!ix->n)
        return;
    fputs("<div class=\"scroll\"><table class=\"newest\">\n", out);
    html_head_row(out, (const char *const[]){"recipe", "newest run", "status", "key metric", "change", "regressions"},
                  6);
    for (int i = 0; i < ix->n; i++) {
        struct run_cells c;
        char regressions[16];
        run_cells(order[i], &order[i]->runs[0], &c);
        snprintf(regressions, sizeof regressions, "%d", c.nregressions);
        fputs("<tr><td><a href=\"#r-", out);
        tr_html_escape(out, order[i]->name);
        fputs("\">", out);
        tr_html_escape(out, order[i]->name);
        fputs("</a></td>", out);
        html_link_cell(out, order[i]->name, &order[i]->runs[0]);
        html_cell(out, c.status, c.status_class), html_cell(out, c.metric, NULL), html_cell(out, c.change, NULL);
        html_cell(out, c.nregressions ? regressions : "", c.nregressions ? "failed" : NULL);
        fputs("</tr>\n", out);
    }
    fputs("</table></div>\n", out);
}

static int write_html(FILE *out, const struct runs_index *ix)
{
    fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Runs</title>\n"
            "<style>%s svg.trend{vertical-align:middle}.summary{font-size:1.1em}</style>\n</head>\n<body>\n"
            "<h1>Runs</h1>\n", tr_compare_css);
    html_summary(out, ix);
    for (int i = 0; i < ix->n; i++)
        html_recipe(out, &ix->recipes[i]);
    fputs("</body>\n</html>\n", out);
    return 0;
}

/* ---- files --------------------------------------------------------------------------------- */

static int write_atomic(const struct runs_index *ix, const char *name, int (*fill)(FILE *, const struct runs_index *),
                        struct tr_diag *d)
{
    struct tr_atomic a;
    FILE *out = tr_report_file_open(&a, ix->dir, name, d);
    return out ? tr_report_file_commit(&a, fill(out, ix), d) : TR_EIO;
}

int tr_runs_index_write(const char *runs_dir, struct tr_diag *d)
{
    struct runs_index ix;
    int rc = index_load(&ix, runs_dir, d);
    if (!rc)
        rc = write_atomic(&ix, "index.md", write_md, d);
    if (!rc)
        rc = write_atomic(&ix, "index.html", write_html, d);
    index_free(&ix);
    return rc;
}
