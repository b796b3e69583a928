/* A run compared with the one before it (reporter, DESIGN.md §2): report.json against
 * report.json, so any two runs compare, however old, without their metrics files. Every field
 * may be missing or null (schema_version 1, a run killed before its end): a quantity either
 * side lacks is null, never a guess. Rendered as a section of report.md and report.html. */
#include "report/compare.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/atomic.h"
#include "core/input.h"
#include "report/svg.h"

/* A rounding's worth of slack, so a change of exactly the limit (0.98 after 1.00, at 2 %) is
 * not past it: 0.98 / 1.00 − 1 is −0.0200000000000000178 in doubles. */
static const double SLACK = 1e-9;

/* ---- reading report.json ---------------------------------------------------------------- */

/* The value at a dotted path of object keys ("plan.data.max_len"), or NULL. */
static json_t *at(const json_t *j, const char *path)
{
    json_t *v = (json_t *)j;
    char key[128];
    while (v && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        v = json_object_get(v, key);   /* NULL for a non-object */
        path += n + (path[n] == '.');
    }
    return v;
}

static double number_at(const json_t *j, const char *path)
{
    json_t *v = at(j, path);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *string_at(const json_t *j, const char *path)
{
    return json_string_value(at(j, path));
}

json_t *tr_report_json_load(const char *run_dir)
{
    struct tr_path path;
    if (tr_path_set(&path, NULL, "%s/report.json", run_dir))
        return NULL;
    json_t *j = json_load_file(path.s, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    if (!json_is_string(json_object_get(j, "run"))) {
        size_t n = strlen(run_dir);
        while (n > 1 && run_dir[n - 1] == '/')
            n--;
        size_t start = n;
        while (start && run_dir[start - 1] != '/')
            start--;
        json_object_set_new(j, "run", json_stringn(run_dir + start, n - start));
    }
    return j;
}

/* ---- words ------------------------------------------------------------------------------- */

void tr_format_elapsed(double seconds, char out[48])
{
    if (!isfinite(seconds))
        snprintf(out, 48, "unknown");
    else if (fabs(seconds) < 120)
        snprintf(out, 48, "%.1f s", seconds);
    else if (fabs(seconds) < 7200)
        snprintf(out, 48, "%.1f min", seconds / 60);
    else
        snprintf(out, 48, "%.1f h", seconds / 3600);
}

void tr_format_count(double value, char out[48])
{
    char digits[40];
    snprintf(digits, sizeof digits, "%.0f", fabs(value));
    size_t n = strlen(digits), o = 0;
    if (value <= -0.5)
        out[o++] = '-';
    for (size_t i = 0; i < n && o < 46; i++) {
        if (i && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = 0;
}

/* U+2212, the minus sign typography uses; '-' is a hyphen. */
#define MINUS "\xe2\x88\x92"

void tr_format_percent(double relative, char out[48])
{
    if (!isfinite(relative))
        snprintf(out, 48, "n/a");
    else
        snprintf(out, 48, "%s%.1f %%", relative < 0 ? MINUS : "+", fabs(100 * relative));
}

/* How a quantity's values read: a plain number, a duration, bytes, or a rate with its unit. */
enum kind { PLAIN, DURATION, BYTES, RATE };

static void value_words(double v, enum kind kind, const char *unit, char out[96])
{
    char b[48];
    if (!isfinite(v))
        snprintf(out, 96, "?");
    else if (kind == DURATION)
        tr_format_elapsed(v, b), snprintf(out, 96, "%s", b);
    else if (kind == BYTES) {
        char bytes[32];
        tr_format_bytes((uint64_t)fabs(v), bytes);
        snprintf(out, 96, "%s%s", v < 0 ? MINUS : "", bytes);
    } else if (kind == RATE)
        snprintf(out, 96, "%.1f %s", v, unit ? unit : "");
    else
        snprintf(out, 96, "%.4g", v);
}

/* "+1.2 min (+5.0 %)": the difference b − a in a's words, and relative to a. */
static void change_words(double a, double b, enum kind kind, const char *unit, char out[160])
{
    if (!isfinite(a) || !isfinite(b)) {
        snprintf(out, 160, "%s", "");
        return;
    }
    char delta[96], percent[48];
    value_words(fabs(b - a), kind, unit, delta);
    tr_format_percent(a != 0 ? (b - a) / fabs(a) : NAN, percent);
    if (b == a)
        snprintf(out, 160, "same");
    else
        snprintf(out, 160, "%s%s (%s)", b < a ? MINUS : "+", delta, percent);
}

void tr_format_change(double before, double after, char out[160])
{
    change_words(before, after, PLAIN, NULL, out);
}

/* ---- the comparison ---------------------------------------------------------------------- */

static json_t *number_or_null(double v, enum kind kind)
{
    if (!isfinite(v))
        return json_null();
    return kind == BYTES ? json_integer((json_int_t)v) : json_real(v);
}

/* {previous, current, delta, relative, worse}, or NULL when either value is unknown. better:
 * +1 when higher is better, −1 when lower is, 0 when neither (never worse). worse: moved the
 * wrong way by more than limit relative to the previous value. */
static json_t *quantity(double prev, double cur, int better, double limit, enum kind kind)
{
    if (!isfinite(prev) || !isfinite(cur))
        return NULL;
    double relative = prev != 0 ? (cur - prev) / fabs(prev) : NAN;
    int worse = better && isfinite(relative) && -better * relative > limit + SLACK;
    json_t *q = json_object();
    json_object_set_new(q, "previous", number_or_null(prev, kind));
    json_object_set_new(q, "current", number_or_null(cur, kind));
    json_object_set_new(q, "delta", number_or_null(cur - prev, kind));
    json_object_set_new(q, "relative", number_or_null(relative, PLAIN));
    json_object_set_new(q, "worse", json_boolean(worse));
    return q;
}

/* Adds "WHAT A → B (±x %), past the L % limit" to regressions when q is worse. */
static void note_regression(json_t *regressions, const json_t *q, const char *what, enum kind kind,
                            const char *unit, double limit)
{
    if (!json_is_true(json_object_get(q, "worse")))
        return;
    char a[96], b[96], percent[48], line[400];
    value_words(number_at(q, "previous"), kind, unit, a);
    value_words(number_at(q, "current"), kind, unit, b);
    tr_format_percent(number_at(q, "relative"), percent);
    snprintf(line, sizeof line, "%s %s → %s (%s), past the %g %% limit", what, a, b, percent, 100 * limit);
    json_array_append_new(regressions, json_string(line));
}

static int better_of(const char *word)
{
    return !word ? 0 : !strcmp(word, "higher") ? 1 : !strcmp(word, "lower") ? -1 : 0;
}

/* The key metric, when both runs have the same one; the current run's "better" decides. */
static json_t *compare_metric(const json_t *prev, const json_t *cur, double limit, json_t *regressions)
{
    const char *name = string_at(cur, "key_metric.name"), *prev_name = string_at(prev, "key_metric.name");
    if (!name || !prev_name || strcmp(name, prev_name))
        return json_null();
    const char *better = string_at(cur, "key_metric.better");
    if (!better_of(better))
        better = string_at(prev, "key_metric.better");
    json_t *q = quantity(number_at(prev, "key_metric.value"), number_at(cur, "key_metric.value"),
                         better_of(better), limit, PLAIN);
    if (!q)
        return json_null();
    json_t *m = json_pack("{ss}", "name", name);
    json_object_set_new(m, "better", better_of(better) ? json_string(better) : json_null());
    json_object_update(m, q);
    json_decref(q);
    note_regression(regressions, m, name, PLAIN, NULL, limit);
    return m;
}

static json_t *or_null(json_t *q)
{
    return q ? q : json_null();
}

/* Tokens a second when both runs counted them (text), else samples a second. */
static json_t *compare_throughput(const json_t *prev, const json_t *cur, int judge, double limit, json_t *regressions)
{
    const char *key = "throughput.tokens_per_s", *unit = "tokens/s";
    if (!isfinite(number_at(prev, key)) || !isfinite(number_at(cur, key)))
        key = "throughput.samples_per_s", unit = "samples/s";
    json_t *q = quantity(number_at(prev, key), number_at(cur, key), judge, limit, RATE);
    if (!q)
        return json_null();
    json_t *t = json_pack("{ss}", "unit", unit);
    json_object_update(t, q);
    json_decref(q);
    note_regression(regressions, t, "throughput", RATE, unit, limit);
    return t;
}

static json_t *compare_memory(const json_t *prev, const json_t *cur, int judge, double limit, json_t *regressions)
{
    json_t *footprint = quantity(number_at(prev, "plan.measured_footprint_bytes"),
                                 number_at(cur, "plan.measured_footprint_bytes"), -judge, limit, BYTES);
    json_t *regions = quantity(number_at(prev, "plan.measured_peak_bytes"),
                               number_at(cur, "plan.measured_peak_bytes"), -judge, limit, BYTES);
    note_regression(regressions, footprint, "memory footprint", BYTES, NULL, limit);
    note_regression(regressions, regions, "regions' peak", BYTES, NULL, limit);
    return json_pack("{soso}", "footprint", or_null(footprint), "regions", or_null(regions));
}

/* "none", or "selective 4 of 4"; "" when the plan does not say. */
static void checkpointing_words(const json_t *plan, char out[96])
{
    const char *mode = string_at(plan, "checkpointing.mode");
    if (!mode)
        snprintf(out, 96, "%s", "");
    else if (!strcmp(mode, "none"))
        snprintf(out, 96, "none");
    else
        snprintf(out, 96, "%s %.0f of %.0f", mode, number_at(plan, "checkpointing.blocks"),
                 number_at(plan, "checkpointing.of"));
}

/* "32 × 1" (micro-batch × accumulation), or dynamic batching's buckets "32 × 16, 16 × 32"
 * (rows × tokens); "" when the plan does not say. */
static void batching_words(const json_t *plan, char out[256])
{
    double accumulation = number_at(plan, "accumulation");
    *out = 0;
    if (accumulation > 0) {
        snprintf(out, 256, "%.0f × %.0f", number_at(plan, "micro"), accumulation);
        return;
    }
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(plan, "micro_batch"), i, b)
        snprintf(out + strlen(out), 256 - strlen(out), "%s%.0f × %.0f", i ? ", " : "", number_at(b, "rows"),
                 number_at(b, "max_len"));
}

static void dynamic_words(const json_t *plan, char out[8])
{
    json_t *v = json_object_get(plan, "dynamic_batching");
    snprintf(out, 8, "%s", json_is_true(v) ? "on" : json_is_false(v) ? "off" : "");
}

void tr_plan_words(const json_t *plan, char *out, size_t outsize)
{
    *out = 0;
    if (!json_is_object(plan))
        return;
    char ckpt[96], batch[256];
    const char *precision = string_at(plan, "precision");
    checkpointing_words(plan, ckpt);
    batching_words(plan, batch);
    snprintf(out, outsize, "%s%s%s%s%s", precision ? precision : "?", *ckpt ? ", checkpointing " : "", ckpt,
             *batch ? ", " : "", batch);
}

/* Adds "WHAT A → B" when both are known and differ. */
static void note_change(json_t *list, const char *what, const char *a, const char *b)
{
    if (!a || !b || !*a || !*b || !strcmp(a, b))
        return;
    char line[700];
    snprintf(line, sizeof line, "%s %s → %s", what, a, b);
    json_array_append_new(list, json_string(line));
}

static json_t *plan_changes(const json_t *prev, const json_t *cur)
{
    json_t *changes = json_array();
    const json_t *a = json_object_get(prev, "plan"), *b = json_object_get(cur, "plan");
    if (!json_is_object(a) || !json_is_object(b))
        return changes;
    note_change(changes, "precision", string_at(a, "precision"), string_at(b, "precision"));
    char wa[256], wb[256];
    checkpointing_words(a, wa), checkpointing_words(b, wb);
    note_change(changes, "checkpointing", wa, wb);
    batching_words(a, wa), batching_words(b, wb);
    note_change(changes, "micro-batch", wa, wb);
    dynamic_words(a, wa), dynamic_words(b, wb);
    note_change(changes, "dynamic batching", wa, wb);
    return changes;
}

/* Adds a reason when the numbers at path differ; words writes one value. */
static void note_number(json_t *why, const json_t *prev, const json_t *cur, const char *path, const char *what,
                        const char *suffix, void (*words)(double, char[48]))
{
    double a = number_at(prev, path), b = number_at(cur, path);
    if (!isfinite(a) || !isfinite(b) || a == b)
        return;
    char wa[48], wb[48], line[300];
    words(a, wa), words(b, wb);
    snprintf(line, sizeof line, "%s%s → %s%s", what, wa, wb, suffix);
    json_array_append_new(why, json_string(line));
}

static void bytes_words(double v, char out[48])
{
    char b[32];
    tr_format_bytes((uint64_t)fmax(v, 0), b);
    snprintf(out, 48, "%s", b);
}

static void length_words(double v, char out[48])
{
    snprintf(out, 48, "%.1f", v);
}

/* What the planner saw differently: the budget, the device, the data, the recipe, the
 * program and the host (its timings). Empty when all of it is the same. */
static json_t *inputs_changed(const json_t *prev, const json_t *cur)
{
    json_t *why = json_array();
    note_number(why, prev, cur, "plan.budget_bytes", "budget ", "", bytes_words);
    note_change(why, "device", string_at(prev, "plan.device.name"), string_at(cur, "plan.device.name"));
    note_number(why, prev, cur, "plan.device.memory_bytes", "device memory ", "", bytes_words);
    note_number(why, prev, cur, "plan.data.max_len", "data: the longest sequence ", " tokens", tr_format_count);
    note_number(why, prev, cur, "plan.data.train_samples", "data: ", " training samples", tr_format_count);
    double ma = number_at(prev, "plan.data.mean_len"), mb = number_at(cur, "plan.data.mean_len");
    if (fabs(ma - mb) >= 0.05)   /* as printed: 14.2 and 14.24 are the same length */
        note_number(why, prev, cur, "plan.data.mean_len", "data: the mean length ", " tokens", length_words);
    const char *ra = string_at(prev, "environment.recipe_sha256"), *rb = string_at(cur, "environment.recipe_sha256");
    if (ra && rb && strcmp(ra, rb))
        json_array_append_new(why, json_string("the recipe changed (sha256 differs)"));
    note_change(why, "trainrun", string_at(prev, "environment.trainrun"), string_at(cur, "environment.trainrun"));
    note_change(why, "host", string_at(prev, "environment.host"), string_at(cur, "environment.host"));
    note_change(why, "cpu", string_at(prev, "environment.cpu"), string_at(cur, "environment.cpu"));
    return why;
}

/* A run that trained to its last step: finished, or finished but worse than the promoted run. */
static int ran_to_end(const char *status)
{
    return status && (!strcmp(status, "finished") || !strcmp(status, "regression"));
}

json_t *tr_report_compare(const json_t *previous, const json_t *current, const struct tr_regression_limits *lim)
{
    struct tr_regression_limits l = lim ? *lim : TR_REGRESSION_DEFAULTS;
    json_t *cmp = json_object(), *regressions = json_array();
    const char *run = string_at(previous, "run"), *status = string_at(previous, "status");
    json_object_set_new(cmp, "previous", run ? json_string(run) : json_null());
    json_object_set_new(cmp, "previous_status", status ? json_string(status) : json_null());
    json_object_set_new(cmp, "limits", json_pack("{sfsfsf}", "metric", l.metric, "time", l.time, "memory", l.memory));
    json_object_set_new(cmp, "metric", compare_metric(previous, current, l.metric, regressions));
    /* A run that failed early is short, and stopped before its memory and speed settled: time,
     * throughput and memory are judged only between runs that trained to their last step. */
    const char *cur_status = string_at(current, "status");
    int finished = ran_to_end(status) && ran_to_end(cur_status);
    json_t *duration = quantity(number_at(previous, "duration_seconds"), number_at(current, "duration_seconds"),
                                finished ? -1 : 0, l.time, DURATION);
    note_regression(regressions, duration, "duration", DURATION, NULL, l.time);
    json_object_set_new(cmp, "duration", or_null(duration));
    json_object_set_new(cmp, "throughput", compare_throughput(previous, current, finished, l.time, regressions));
    json_object_set_new(cmp, "memory", compare_memory(previous, current, finished, l.memory, regressions));
    json_t *changes = plan_changes(previous, current), *why = inputs_changed(previous, current);
    if (json_array_size(changes) && !json_array_size(why))
        json_array_append_new(why, json_string("the inputs the planner saw are the same (budget, device, data, "
                                               "recipe); its timing calibration or measurements differ"));
    json_object_set_new(cmp, "plan_changed", json_boolean(json_array_size(changes) > 0));
    json_object_set_new(cmp, "plan_changes", changes);
    json_object_set_new(cmp, "why", why);
    json_object_set_new(cmp, "regressions", regressions);
    return cmp;
}

/* ---- folders ----------------------------------------------------------------------------- */

static int by_version(const void *a, const void *b)
{
    return strverscmp(*(char *const *)a, *(char *const *)b);
}

char **tr_subfolders(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    int cap = 16;
    char **names = malloc((size_t)cap * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d))) {
        struct tr_path path;
        struct stat st;
        if (e->d_name[0] == '.' || tr_path_set(&path, NULL, "%s/%s", dir, e->d_name) || lstat(path.s, &st) ||
            !S_ISDIR(st.st_mode))
            continue;
        if (*n + 1 == cap) {
            char **grown = realloc(names, (size_t)(cap *= 2) * sizeof *names);
            if (!grown)
                break;
            names = grown;
        }
        if (!(names[*n] = strdup(e->d_name)))
            break;
        ++*n;
    }
    closedir(d);
    if (!names)
        return NULL;
    names[*n] = NULL;
    /* Stamps sort by time as versions do: a second run in the same second, -2, after the
     * first, and -10 after -9. */
    qsort(names, (size_t)*n, sizeof *names, by_version);
    return names;
}

void tr_names_free(char **names)
{
    for (int i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

int tr_report_find_previous(const char *run_dir, struct tr_path *out)
{
    struct tr_path parent, base;
    if (tr_path_set(&parent, NULL, "%s", run_dir))
        return 0;
    size_t n = strlen(parent.s);
    while (n > 1 && parent.s[n - 1] == '/')
        parent.s[--n] = 0;
    char *slash = strrchr(parent.s, '/');
    /* The run's own name, also when run_dir is the latest link. */
    char *resolved = realpath(run_dir, NULL);
    const char *real = resolved ? strrchr(resolved, '/') : NULL;
    tr_path_set(&base, NULL, "%s", real ? real + 1 : slash ? slash + 1 : parent.s);   /* no longer than parent */
    free(resolved);
    if (slash == parent.s)
        parent.s[1] = 0;
    else if (slash)
        *slash = 0;
    else
        tr_path_set(&parent, NULL, ".");
    int count, found = 0;
    char **names = tr_subfolders(parent.s, &count);
    for (int i = count - 1; i >= 0 && !found; i--) {
        struct tr_path path;
        if (strverscmp(names[i], base.s) < 0 &&
            tr_path_set(&path, NULL, "%s/%s/report.json", parent.s, names[i]) == 0 && !access(path.s, R_OK))
            found = tr_path_set(out, NULL, "%s/%s", parent.s, names[i]) == 0;
    }
    tr_names_free(names);
    return found;
}

/* report.regression in the resolved recipe.yaml, the trainer's own emitter's output: two-space
 * indents, "key: value  # origin", so a line reader suffices. */
void tr_regression_limits_read(const char *run_dir, struct tr_regression_limits *lim)
{
    *lim = TR_REGRESSION_DEFAULTS;
    struct tr_path path;
    char line[512];
    FILE *f = tr_path_set(&path, NULL, "%s/recipe.yaml", run_dir) ? NULL : tr_fopen_regular(path.s, NULL);
    if (!f)
        return;
    int in_report = 0, in_regression = 0;
    while (fgets(line, sizeof line, f)) {
        size_t indent = strspn(line, " ");
        const char *key = line + indent;
        if (*key == '#' || *key == '\n' || !*key)
            continue;
        if (indent == 0)
            in_report = !strncmp(key, "report:", 7), in_regression = 0;
        else if (indent == 2)
            in_regression = in_report && !strncmp(key, "regression:", 11);
        else if (indent == 4 && in_regression) {
            double *slot = !strncmp(key, "metric:", 7) ? &lim->metric : !strncmp(key, "time:", 5) ? &lim->time
                         : !strncmp(key, "memory:", 7) ? &lim->memory : NULL;
            char *end;
            double v = slot ? strtod(strchr(key, ':') + 1, &end) : NAN;
            if (slot && end != strchr(key, ':') + 1 && isfinite(v) && v >= 0)
                *slot = v;
        }
    }
    fclose(f);
}

/* ---- rendering --------------------------------------------------------------------------- */

/* One row of a comparison table, as text. */
struct row {
    char what[96], a[96], b[96], change[160];
    int worse;
};

static void quantity_row(struct row *r, const json_t *q, const char *what, enum kind kind, const char *unit)
{
    snprintf(r->what, sizeof r->what, "%s", what);
    double a = number_at(q, "previous"), b = number_at(q, "current");
    value_words(a, kind, unit, r->a);
    value_words(b, kind, unit, r->b);
    change_words(a, b, kind, unit, r->change);
    r->worse = json_is_true(json_object_get(q, "worse"));
}

/* The comparison's quantities as rows; returns how many (at most 5). */
static int comparison_rows(const json_t *cmp, struct row rows[5])
{
    int n = 0;
    const json_t *m = json_object_get(cmp, "metric"), *t = json_object_get(cmp, "throughput");
    if (json_is_object(m)) {
        char what[96];
        const char *better = string_at(m, "better");
        snprintf(what, sizeof what, "%s%s%s%s", string_at(m, "name") ? string_at(m, "name") : "key metric",
                 better ? " (" : "", better ? better : "", better ? " is better)" : "");
        quantity_row(&rows[n++], m, what, PLAIN, NULL);
    }
    if (json_is_object(json_object_get(cmp, "duration")))
        quantity_row(&rows[n++], json_object_get(cmp, "duration"), "duration", DURATION, NULL);
    if (json_is_object(t))
        quantity_row(&rows[n++], t, "throughput", RATE, string_at(t, "unit"));
    if (json_is_object(at(cmp, "memory.footprint")))
        quantity_row(&rows[n++], at(cmp, "memory.footprint"), "memory footprint (measured)", BYTES, NULL);
    if (json_is_object(at(cmp, "memory.regions")))
        quantity_row(&rows[n++], at(cmp, "memory.regions"), "regions' peak (measured)", BYTES, NULL);
    return n;
}

FILE *tr_report_file_open(struct tr_atomic *a, const char *dir, const char *name, struct tr_diag *d)
{
    struct tr_diag said = {0};   /* worded below, as before the atomic writer */
    char *path = tr_strdup_printf("%s/%s", dir, name);
    int rc = tr_atomic_open(a, path, &said);
    if (rc)
        tr_fail(d, TR_EIO, "cannot write %s: %s", *a->tmp.s ? a->tmp.s : path, strerror(a->error));
    tr_diag_free(&said);
    free(path);
    errno = 0;
    return rc ? NULL : a->f;
}

int tr_report_file_commit(struct tr_atomic *a, int filled, struct tr_diag *d)
{
    struct tr_diag said = {0};
    int e = errno;
    if (filled) {
        tr_atomic_abort(a);
    } else if (tr_atomic_commit(a, &said)) {
        e = a->error;
        filled = -1;
    }
    tr_diag_free(&said);
    return filled ? tr_fail(d, TR_EIO, "cannot write %s: %s", a->path.s, e ? strerror(e) : "write error") : 0;
}

void tr_md_cell(FILE *out, const char *text)
{
    fputs("| ", out);
    for (const char *p = text; *p; p++)
        if (*p == '|')
            fputs("\\|", out);
        else
            fputc(*p == '\n' ? ' ' : *p, out);
    fputc(' ', out);
}

static void rows_md(FILE *out, const char *const head[4], const struct row *rows, int n)
{
    for (int i = 0; i < 4; i++)
        tr_md_cell(out, head[i]);
    fputs("|\n| --- | --- | --- | --- |\n", out);
    for (int i = 0; i < n; i++) {
        char change[200];
        snprintf(change, sizeof change, "%s%s", rows[i].change, rows[i].worse ? ", a regression" : "");
        tr_md_cell(out, rows[i].what), tr_md_cell(out, rows[i].a), tr_md_cell(out, rows[i].b);
        tr_md_cell(out, change);
        fputs("|\n", out);
    }
}

static void rows_html(FILE *out, const char *const head[4], const struct row *rows, int n)
{
    fputs("<table class=\"compare\">\n<tr>", out);
    for (int i = 0; i < 4; i++) {
        fputs("<th>", out);
        tr_html_escape(out, head[i]);
        fputs("</th>", out);
    }
    fputs("</tr>\n", out);
    for (int i = 0; i < n; i++) {
        const char *cells[4] = {rows[i].what, rows[i].a, rows[i].b, rows[i].change};
        fputs("<tr>", out);
        for (int c = 0; c < 4; c++) {
            fputs(c == 3 && rows[i].worse ? "<td style=\"color:#b3261e;font-weight:bold\">" : "<td>", out);
            tr_html_escape(out, cells[c]);
            fputs(c == 3 && rows[i].worse ? ", a regression</td>" : "</td>", out);
        }
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
}

static void limits_words(const json_t *cmp, char out[128])
{
    snprintf(out, 128, "metric %g %%, time %g %%, memory %g %%", 100 * number_at(cmp, "limits.metric"),
             100 * number_at(cmp, "limits.time"), 100 * number_at(cmp, "limits.memory"));
}

static void list_md(FILE *out, const char *title, const json_t *items)
{
    if (!json_array_size(items))
        return;
    if (*title)
        fprintf(out, "%s\n\n", title);
    size_t i;
    json_t *v;
    json_array_foreach(items, i, v)
        fprintf(out, "- %s\n", json_string_value(v) ? json_string_value(v) : "?");
    fputc('\n', out);
}

static const char *const compare_head[4] = {"quantity", "previous", "this run", "change"};

/* The regressions, called out first. */
static void regressions_md(FILE *out, const json_t *cmp)
{
    char limits[128];
    limits_words(cmp, limits);
    const json_t *regressions = json_object_get(cmp, "regressions");
    if (json_array_size(regressions)) {
        fprintf(out, "**%zu regression%s** past the limits (%s):\n\n", json_array_size(regressions),
                json_array_size(regressions) == 1 ? "" : "s", limits);
        list_md(out, "", regressions);
    } else
        fprintf(out, "No regressions past the limits (%s).\n\n", limits);
}

/* What the planner chose differently, and why. */
static void plan_md(FILE *out, const json_t *cmp)
{
    if (!json_is_true(json_object_get(cmp, "plan_changed")))
        fputs("The plan is the same.\n\n", out);
    list_md(out, "The plan changed:", json_object_get(cmp, "plan_changes"));
    list_md(out, "What the planner saw differently:", json_object_get(cmp, "why"));
}

void tr_compare_write_md(FILE *out, const json_t *cmp)
{
    const char *run = string_at(cmp, "previous"), *status = string_at(cmp, "previous_status");
    fprintf(out, "## Compared with %s%s%s%s\n\n", run ? run : "the previous run", status ? " (" : "",
            status ? status : "", status ? ")" : "");
    regressions_md(out, cmp);
    struct row rows[5];
    int n = comparison_rows(cmp, rows);
    if (n) {
        rows_md(out, compare_head, rows, n);
        fputc('\n', out);
    }
    plan_md(out, cmp);
}

static void list_html(FILE *out, const char *title, const json_t *items, const char *style)
{
    if (!json_array_size(items))
        return;
    fputs("<p>", out);
    tr_html_escape(out, title);
    fprintf(out, "</p>\n<ul%s>\n", style);
    size_t i;
    json_t *v;
    json_array_foreach(items, i, v) {
        fputs("<li>", out);
        tr_html_escape(out, json_string_value(v) ? json_string_value(v) : "?");
        fputs("</li>\n", out);
    }
    fputs("</ul>\n", out);
}

static void regressions_html(FILE *out, const json_t *cmp)
{
    char limits[128], title[256];
    limits_words(cmp, limits);
    const json_t *regressions = json_object_get(cmp, "regressions");
    size_t nreg = json_array_size(regressions);
    if (nreg) {
        snprintf(title, sizeof title, "%zu regression%s past the limits (%s):", nreg, nreg == 1 ? "" : "s", limits);
        list_html(out, title, regressions, " class=\"regressions\" style=\"color:#b3261e;font-weight:bold\"");
    } else {
        fputs("<p>No regressions past the limits (", out);
        tr_html_escape(out, limits);
        fputs(").</p>\n", out);
    }
}

static void plan_html(FILE *out, const json_t *cmp)
{
    if (!json_is_true(json_object_get(cmp, "plan_changed")))
        fputs("<p>The plan is the same.</p>\n", out);
    list_html(out, "The plan changed:", json_object_get(cmp, "plan_changes"), "");
    list_html(out, "What the planner saw differently:", json_object_get(cmp, "why"), "");
}

void tr_compare_write_html(FILE *out, const json_t *cmp)
{
    const char *run = string_at(cmp, "previous"), *status = string_at(cmp, "previous_status");
    fputs("<h2>Compared with ", out);
    tr_html_escape(out, run ? run : "the previous run");
    if (status) {
        fputs(" (", out);
        tr_html_escape(out, status);
        fputc(')', out);
    }
    fputs("</h2>\n", out);
    regressions_html(out, cmp);
    struct row rows[5];
    int n = comparison_rows(cmp, rows);
    if (n)
        rows_html(out, compare_head, rows, n);
    plan_html(out, cmp);
}

/* ---- two runs side by side (trainrun report --compare) ----------------------------------- */

static void text_row(struct row *r, const char *what, const char *a, const char *b)
{
    snprintf(r->what, sizeof r->what, "%s", what);
    snprintf(r->a, sizeof r->a, "%s", a && *a ? a : "?");
    snprintf(r->b, sizeof r->b, "%s", b && *b ? b : "?");
    snprintf(r->change, sizeof r->change, "%s", !a || !b || !*a || !*b ? "" : strcmp(a, b) ? "changed" : "same");
    r->worse = 0;
}

static void number_row(struct row *r, const char *what, double a, double b, enum kind kind, const char *unit)
{
    snprintf(r->what, sizeof r->what, "%s", what);
    value_words(a, kind, unit, r->a);
    value_words(b, kind, unit, r->b);
    change_words(a, b, kind, unit, r->change);
    r->worse = 0;
}

static void exit_code_words(const json_t *run, char out[96])
{
    json_t *code = json_object_get(run, "exit_code");
    if (json_is_integer(code))
        snprintf(out, 96, "%" JSON_INTEGER_FORMAT, json_integer_value(code));
    else
        snprintf(out, 96, "%s", "");
}

/* The plan's knobs as rows; returns how many (4). */
static int plan_rows(const json_t *a, const json_t *b, struct row *rows)
{
    const json_t *pa = json_object_get(a, "plan"), *pb = json_object_get(b, "plan");
    char wa[256], wb[256];
    text_row(&rows[0], "precision", string_at(pa, "precision"), string_at(pb, "precision"));
    checkpointing_words(pa, wa), checkpointing_words(pb, wb);
    text_row(&rows[1], "checkpointing", wa, wb);
    batching_words(pa, wa), batching_words(pb, wb);
    text_row(&rows[2], "micro-batch", wa, wb);
    dynamic_words(pa, wa), dynamic_words(pb, wb);
    text_row(&rows[3], "dynamic batching", wa, wb);
    return 4;
}

/* Every row of the side-by-side table, in a new array (free it); *n its length. */
static struct row *side_by_side_rows(const json_t *a, const json_t *b, int *n)
{
    const json_t *fa = json_object_get(a, "final"), *fb = json_object_get(b, "final");
    struct row *rows = calloc(16 + json_object_size(fa), sizeof *rows);
    if (!rows)
        return NULL;
    char wa[96], wb[96];
    int k = 0;
    text_row(&rows[k], "run", string_at(a, "run"), string_at(b, "run"));
    rows[k++].change[0] = 0;   /* two runs are two runs */
    text_row(&rows[k++], "recipe", string_at(a, "name"), string_at(b, "name"));
    text_row(&rows[k++], "status", string_at(a, "status"), string_at(b, "status"));
    exit_code_words(a, wa), exit_code_words(b, wb);
    text_row(&rows[k++], "exit code", wa, wb);
    number_row(&rows[k++], "duration", number_at(a, "duration_seconds"), number_at(b, "duration_seconds"),
               DURATION, NULL);
    const char *ka = string_at(a, "key_metric.name"), *kb = string_at(b, "key_metric.name");
    if (ka && kb && !strcmp(ka, kb)) {
        char what[96];
        snprintf(what, sizeof what, "key metric %s", ka);
        number_row(&rows[k++], what, number_at(a, "key_metric.value"), number_at(b, "key_metric.value"), PLAIN,
                   NULL);
    } else
        text_row(&rows[k++], "key metric", ka, kb);
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)fa, name, v) {
        json_t *w = json_object_get(fb, name);
        if (json_is_number(v) && json_is_number(w))
            number_row(&rows[k++], name, json_number_value(v), json_number_value(w), PLAIN, NULL);
    }
    number_row(&rows[k++], "throughput", number_at(a, "throughput.samples_per_s"),
               number_at(b, "throughput.samples_per_s"), RATE, "samples/s");
    if (isfinite(number_at(a, "throughput.tokens_per_s")) || isfinite(number_at(b, "throughput.tokens_per_s")))
        number_row(&rows[k++], "throughput", number_at(a, "throughput.tokens_per_s"),
                   number_at(b, "throughput.tokens_per_s"), RATE, "tokens/s");
    k += plan_rows(a, b, &rows[k]);
    number_row(&rows[k++], "memory footprint (measured)", number_at(a, "plan.measured_footprint_bytes"),
               number_at(b, "plan.measured_footprint_bytes"), BYTES, NULL);
    number_row(&rows[k++], "regions' peak (measured)", number_at(a, "plan.measured_peak_bytes"),
               number_at(b, "plan.measured_peak_bytes"), BYTES, NULL);
    *n = k;
    return rows;
}

static const char *const runs_head[4] = {"", "A", "B", "change"};

void tr_compare_runs_md(FILE *out, const json_t *a, const json_t *b, const json_t *cmp)
{
    const char *ra = string_at(a, "run"), *rb = string_at(b, "run");
    fprintf(out, "# %s vs %s\n\n", ra ? ra : "A", rb ? rb : "B");
    int n = 0;
    struct row *rows = side_by_side_rows(a, b, &n);
    if (rows)
        rows_md(out, runs_head, rows, n);
    free(rows);
    fprintf(out, "\n## B judged against A\n\n");
    regressions_md(out, cmp);
    plan_md(out, cmp);
}

/* A report.json series, [[step, value], …], as two arrays (free both); returns the points. */
static int series_points(const json_t *run, const char *name, double **x, double **y)
{
    const json_t *s = json_object_get(json_object_get(run, "series"), name);
    size_t n = json_array_size(s), i;
    *x = malloc((n ? n : 1) * sizeof **x), *y = malloc((n ? n : 1) * sizeof **y);
    if (!*x || !*y)
        return 0;
    json_t *p;
    json_array_foreach(s, i, p) {
        (*x)[i] = number_at(json_array_get(p, 0), ""), (*y)[i] = number_at(json_array_get(p, 1), "");
    }
    return (int)n;
}

/* One plot of series name, a line per run. */
static void overlay(FILE *out, const json_t *a, const json_t *b, const char *name)
{
    char la[96], lb[96];
    snprintf(la, sizeof la, "A %s", string_at(a, "run") ? string_at(a, "run") : "");
    snprintf(lb, sizeof lb, "B %s", string_at(b, "run") ? string_at(b, "run") : "");
    struct tr_svg_line lines[2] = {{.label = la}, {.label = lb}};
    double *x[2], *y[2];
    lines[0].n = series_points(a, name, &x[0], &y[0]);
    lines[1].n = series_points(b, name, &x[1], &y[1]);
    for (int i = 0; i < 2; i++)
        lines[i].x = x[i], lines[i].y = y[i];
    if (lines[0].n || lines[1].n)
        tr_svg_plot(out, name, name, lines, 2);
    for (int i = 0; i < 2; i++)
        free(x[i]), free(y[i]);
}

const char tr_compare_css[] =
    "body{font-family:system-ui,sans-serif;max-width:72em;margin:0 auto;padding:0 1em;line-height:1.4;color:#222}"
    "table{border-collapse:collapse;width:100%;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;overflow-wrap:break-word}"
    ".scroll{overflow-x:auto}@media (max-width:40em){body{padding:0 .4em}table{font-size:.85em}}"
    "svg.plot{width:100%;height:auto;margin:.5em 0}"
    ".finished{color:#1a7f37}.failed,.unknown,.interrupted,.killed,.regression,.no-report{color:#b3261e}";

void tr_compare_runs_html(FILE *out, const json_t *a, const json_t *b, const json_t *cmp)
{
    const char *ra = string_at(a, "run") ? string_at(a, "run") : "A";
    const char *rb = string_at(b, "run") ? string_at(b, "run") : "B";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>", out);
    tr_html_escape(out, ra);
    fputs(" vs ", out);
    tr_html_escape(out, rb);
    fprintf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", tr_compare_css);
    tr_html_escape(out, ra);
    fputs(" vs ", out);
    tr_html_escape(out, rb);
    fputs("</h1>\n", out);
    int n = 0;
    struct row *rows = side_by_side_rows(a, b, &n);
    if (rows)
        rows_html(out, runs_head, rows, n);
    free(rows);
    fputs("<h2>B judged against A</h2>\n", out);
    regressions_html(out, cmp);
    plan_html(out, cmp);
    fputs("<h2>Loss</h2>\n", out);
    overlay(out, a, b, "train/loss");
    overlay(out, a, b, "eval/loss");
    fputs("</body>\n</html>\n", out);
}
