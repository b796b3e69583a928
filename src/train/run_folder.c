/* The run folder's files (run_folder.h): made, appended to, synced at checkpoints and closed
 * with the run's record and reports. */
#include "train/run_folder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/atomic.h"
#include "data/cache.h"
#include "data/sha256.h"
#include "report/compare.h"
#include "report/environment.h"
#include "report/graph_dot.h"
#include "report/index.h"
#include "report/prometheus.h"
#include "report/run_report.h"
#include "report/tensorboard.h"
#include "train/record.h"
#include "train/runs.h"

enum { TIMELINE_POINTS = 200 };   /* plan.json's memory timeline of one step: at most this many */

void tr_run_folder_init(struct tr_run_folder *f, bool quiet)
{
    *f = (struct tr_run_folder){.events = {.fd = -1}, .quiet = quiet, .tty = isatty(STDOUT_FILENO)};
}

/* One appended file of the run folder, new or appended to: never through a symbolic link (a
 * link planted there would have its target written), and only a regular file. */
static FILE *open_appended_file(const char *path, bool fresh, struct tr_diag *d)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (fresh ? O_TRUNC : 0),
                  0666);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1, errno = EINVAL;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f && fd >= 0)
        close(fd);
    if (!f)
        tr_fail(d, TR_EIO, "cannot write %s: %s", path,
                errno == ELOOP ? "it is a symbolic link; refused, and its target left as it is"
                : errno == EINVAL ? "it is not a regular file; refused" : strerror(errno));
    return f;
}

/* log.txt and metrics.jsonl, new (fresh) or appended to. */
static int open_appended(struct tr_run_folder *f, bool fresh, struct tr_diag *d)
{
    struct tr_path log, metrics;
    if (tr_path_set(&log, d, "%s/log.txt", f->dir.s) || tr_path_set(&metrics, d, "%s/metrics.jsonl", f->dir.s))
        return TR_EINVAL;
    if (!(f->log = open_appended_file(log.s, fresh, d)) || !(f->metrics = open_appended_file(metrics.s, fresh, d)))
        return TR_EIO;
    return 0;
}

/* report.dir/NAME/<stamp>, or <stamp>-N for the Nth run in one second. */
static int fresh_name(struct tr_run_folder *f, const struct tr_recipe *r, struct tr_diag *d)
{
    time_t now_s = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime(&now_s));
    int rc = tr_path_set(&f->dir, d, "%s/%s/%s", r->report.dir, r->name, stamp);
    for (int n = 2; !rc && access(f->dir.s, F_OK) == 0 && n < 100; n++)
        rc = tr_path_set(&f->dir, d, "%s/%s/%s-%d", r->report.dir, r->name, stamp, n);
    return rc;
}

static int create(struct tr_run_folder *f, const struct tr_recipe *r, struct tr_diag *d)
{
    struct tr_path path;
    int rc = fresh_name(f, r, d);
    if (rc || (rc = tr_path_set(&path, d, "%s/checkpoints", f->dir.s)))
        return rc;
    int err = tr_make_folders(path.s);
    if (err)
        return tr_fail(d, TR_EIO, "cannot create %s: %s", path.s, strerror(err));
    struct tr_atomic a;
    if ((rc = tr_path_set(&path, d, "%s/recipe.yaml", f->dir.s)) || (rc = tr_atomic_open(&a, path.s, d)))
        return rc;
    tr_recipe_write_yaml(r, a.f);
    return (rc = tr_atomic_commit(&a, d)) ? rc : open_appended(f, true, d);
}

/* NAME/latest at a fresh run once it has begun (run.json written): never at a folder whose
 * setting up failed. */
static void point_latest(struct tr_run_folder *f, const struct tr_recipe *r)
{
    struct tr_path runs;
    struct tr_diag why = {0};
    if (tr_path_set(&runs, &why, "%s/%s", r->report.dir, r->name) == 0 &&
        tr_runs_link_set(runs.s, "latest", strrchr(f->dir.s, '/') + 1))
        tr_run_folder_say(f, "warning: cannot point %s/latest at the new run: %s\n", runs.s, strerror(errno));
    tr_diag_free(&why);
}

int tr_run_folder_follow(struct tr_run_folder *f, const char *dir, struct tr_diag *d)
{
    f->silent = f->quiet = true;
    return tr_path_set(&f->dir, d, "%s", dir);
}

int tr_run_folder_open(struct tr_run_folder *f, const struct tr_recipe *r, const char *resume_dir,
                       struct tr_diag *d)
{
    if (!resume_dir)
        return create(f, r, d);
    int rc = tr_path_set(&f->dir, d, "%s", resume_dir);
    f->resumed = true;
    return rc ? rc : open_appended(f, false, d);
}

/* ---- the data's files ------------------------------------------------------------------------ */

/* Copies a file whole (a vocabulary: a few megabytes at most). */
static int copy_file(const char *from, const char *to, struct tr_diag *d)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return tr_fail(d, TR_EIO, "cannot copy %s to %s: %s", from, to, strerror(errno));
    struct tr_atomic a;
    int rc = tr_atomic_open(&a, to, d);
    char buf[65536];
    size_t n;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, a.f) != n)
            rc = tr_fail(d, TR_EIO, "cannot copy %s to %s: %s", from, to, strerror(errno));
    if (!rc && ferror(in))
        rc = tr_fail(d, TR_EIO, "cannot copy %s to %s: %s", from, to, strerror(errno));
    fclose(in);
    if (rc)
        tr_atomic_abort(&a);
    return rc ? rc : tr_atomic_commit(&a, d);
}

static int write_labels(const struct tr_run_folder *f, char *const *class_names, struct tr_diag *d)
{
    struct tr_path path;
    struct tr_atomic a;
    int rc = tr_path_set(&path, d, "%s/labels.txt", f->dir.s);
    if (rc || (rc = tr_atomic_open(&a, path.s, d)))
        return rc;
    for (int i = 0; class_names[i]; i++)
        fprintf(a.f, "%s\n", class_names[i]);
    return tr_atomic_commit(&a, d);
}

static int copy_tokenizer(const struct tr_run_folder *f, const struct tr_data *data, struct tr_diag *d)
{
    static const char *const names[][2] = {
        [TR_TOK_WORDPIECE] = {"vocab.txt", NULL}, [TR_TOK_GPT2_BPE] = {"encoder.json", "vocab.bpe"},
        [TR_TOK_CHARS] = {"chars.txt", NULL},
    };
    int kind = data->tokenizer_kind;
    if (kind != TR_TOK_WORDPIECE && kind != TR_TOK_GPT2_BPE && kind != TR_TOK_CHARS)
        return 0;
    struct tr_path path;
    int rc = tr_path_set(&path, d, "%s/tokenizer", f->dir.s);
    if (rc)
        return rc;
    if (mkdir(path.s, 0777) && errno != EEXIST)
        return tr_fail(d, TR_EIO, "cannot create %s: %s", path.s, strerror(errno));
    for (int i = 0; i < 2 && !rc; i++)
        if (names[kind][i] && data->tokenizer_files[i] &&
            !(rc = tr_path_set(&path, d, "%s/tokenizer/%s", f->dir.s, names[kind][i])))
            rc = copy_file(data->tokenizer_files[i], path.s, d);
    return rc;
}

int tr_run_folder_keep_data(struct tr_run_folder *f, const struct tr_data *data, struct tr_diag *d)
{
    if (tr_data_sources_write(data, f->dir.s, d))
        return TR_EIO;
    int rc = 0;
    if (data->class_names && data->kind != TR_DATA_TEXT_LM)
        rc = write_labels(f, data->class_names, d);
    return rc ? rc : copy_tokenizer(f, data, d);
}

/* ---- the appended files ---------------------------------------------------------------------- */

void tr_run_folder_say(struct tr_run_folder *f, const char *fmt, ...)
{
    va_list ap;
    if (!f->quiet) {
        if (f->tty)
            fputs("\r\033[K", stdout);   /* the progress bar's line, cleared for the text */
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        fflush(stdout);
    }
    if (f->log) {
        va_start(ap, fmt);
        vfprintf(f->log, fmt, ap);
        va_end(ap);
        fflush(f->log);
    }
}

/* A resume refused before its record began leaves the folder's files as they were; another
 * rank's view writes nothing. */
static bool refused_resume(const struct tr_run_folder *f)
{
    return (f->resumed && !f->record) || f->silent;
}

void tr_run_folder_metric(struct tr_run_folder *f, json_t *line, bool events)
{
    if (refused_resume(f)) {
        json_decref(line);
        return;
    }
    char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fprintf(f->metrics, "%s\n", text);
    fflush(f->metrics);
    free(text);
    if (events) {
        int64_t step = json_integer_value(json_object_get(line, "step"));
        const char *tag;
        json_t *value;
        json_object_foreach(line, tag, value)
            if (strcmp(tag, "step") && json_is_number(value))
                tr_events_scalar(&f->events, tag, step, json_number_value(value));
        tr_events_tick(&f->events);
    }
    json_decref(line);
}

void tr_run_folder_log_errors(struct tr_run_folder *f, const struct tr_diag *d)
{
    for (int i = 0; f->log && i < d->n; i++)
        fprintf(f->log, "error: %s\n", d->items[i].message);
}

int tr_run_folder_sync(struct tr_run_folder *f, struct tr_diag *d)
{
    if (f->silent)
        return 0;
    struct tr_path log, metrics;
    int rc = tr_path_set(&log, d, "%s/log.txt", f->dir.s);
    if (!rc)
        rc = tr_path_set(&metrics, d, "%s/metrics.jsonl", f->dir.s);
    if (!rc)
        rc = tr_file_sync(f->log, log.s, d);
    if (!rc)
        rc = tr_file_sync(f->metrics, metrics.s, d);
    tr_events_flush(&f->events, 1);   /* what TensorBoard shows is never behind a checkpoint */
    return rc;
}

/* ---- plan.json, run.json, events ------------------------------------------------------------- */

static void recipe_hash(const struct tr_recipe *r, char hash[65])
{
    char *recipe = tr_recipe_to_json(r);
    tr_sha256_of(recipe, strlen(recipe), hash);
    free(recipe);
}

/* The recipe's values, without where each came from: what a resume compares. */
static json_t *recipe_values(const struct tr_recipe *r)
{
    char *text = tr_recipe_to_json(r);
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    json_t *values = json_incref(json_object_get(doc, "recipe"));
    json_decref(doc);
    return values;
}

json_t *tr_run_folder_plan_json(const struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data)
{
    char hash[65];
    recipe_hash(r, hash);
    char *text = tr_plan_to_json(&s->plan, true, hash);
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    const struct tr_split *train = &data->train;
    double mean_len = train->offsets && train->n ? (double)(train->offsets[train->n] - train->offsets[0]) / (double)train->n
                    : train->tokens ? (double)train->window : 1.0;
    json_object_set_new(j, "data", json_pack("{sI sI sf}", "train_samples", (json_int_t)train->n, "max_len",
                                             (json_int_t)s->job.seq, "mean_len", mean_len));
    json_object_set_new(j, "timeline", tr_plan_timeline_json(&s->train.b, TIMELINE_POINTS));
    json_object_set_new(j, "recipe", recipe_values(r));
    return j;
}

/* A value for a message: compact JSON, cut short. */
static void shown_value(const json_t *v, char out[80])
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) : NULL;
    snprintf(out, 80, "%s", text ? text : "not set");
    if (text && strlen(text) >= 80)
        snprintf(out + 72, 8, "…");
    free(text);
}

/* The keys whose values differ between now and then (objects compared key by key), as
 * "key is X, was Y" items of diff, path the dotted key so far. */
static void differences(const char *path, const json_t *now, const json_t *then, struct tr_diag *diff)
{
    if (json_is_object(now) && json_is_object(then)) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)now, key, v) {
            char *sub = *path ? tr_strdup_printf("%s.%s", path, key) : tr_strdup(key);
            differences(sub, v, json_object_get(then, key), diff);
            free(sub);
        }
        json_object_foreach((json_t *)then, key, v)
            if (!json_object_get(now, key)) {
                char *sub = *path ? tr_strdup_printf("%s.%s", path, key) : tr_strdup(key);
                differences(sub, NULL, v, diff);
                free(sub);
            }
        return;
    }
    if (now && then && json_equal((json_t *)now, (json_t *)then))
        return;
    char a[80], b[80];
    shown_value(now, a), shown_value(then, b);
    tr_fail(diff, TR_EINVAL, "%s is %s, was %s", path, a, b);
}

/* plan.json as a resume reads it back: a regular file (a FIFO would block), JSON. NULL and
 * *missing when there is none. */
static json_t *read_plan(const char *path, bool *missing, struct tr_diag *d)
{
    *missing = false;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 && errno == ENOENT)
        return *missing = true, NULL;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        tr_fail(d, TR_EINVAL, "%s: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    json_error_t e;
    json_t *plan = json_loadfd(fd, 0, &e);
    close(fd);
    if (!plan)
        tr_fail(d, TR_EINVAL, "%s:%d:%d: %s", path, e.line, e.column, e.text);
    return plan;
}

int tr_run_folder_check_recipe(const char *run_dir, const struct tr_recipe *r, struct tr_diag *d)
{
    struct tr_path path;
    bool missing;
    if (tr_path_set(&path, d, "%s/plan.json", run_dir))
        return TR_EINVAL;
    json_t *plan = read_plan(path.s, &missing, d);
    if (!plan)
        return missing ? 0 : TR_EINVAL;
    json_t *then = json_object_get(plan, "recipe"), *now = recipe_values(r);
    struct tr_diag diff = {0};
    if (then)   /* a plan.json of a trainrun before it kept the recipe: the checkpoints' shapes are checked */
        differences("", now, then, &diff);
    int rc = 0;
    if (diff.n) {
        char more[40] = "";
        if (diff.n > 3)
            snprintf(more, sizeof more, "; and %d more", diff.n - 3);
        rc = tr_fail(d, TR_EINVAL, "resume: %s/recipe.yaml is not the recipe this run began with (kept in %s): "
                     "%s%s%s%s%s%s; a resumed run goes on as it began: put recipe.yaml back as it was, or start "
                     "a new run with the edited recipe; nothing was changed", run_dir, path.s, diff.items[0].message,
                     diff.n > 1 ? "; " : "", diff.n > 1 ? diff.items[1].message : "", diff.n > 2 ? "; " : "",
                     diff.n > 2 ? diff.items[2].message : "", more);
    }
    tr_diag_free(&diff);
    json_decref(now), json_decref(plan);
    return rc;
}

int tr_run_folder_write_plan(struct tr_run_folder *f, json_t *plan, json_t *warnings, int64_t step,
                             struct tr_diag *d)
{
    size_t i;
    json_t *w;
    json_array_foreach(warnings, i, w) {
        tr_run_folder_say(f, "warning: %s\n", json_string_value(w));
        tr_events_text(&f->events, "warnings", step, json_string_value(w));
    }
    json_object_set_new(plan, "warnings", warnings);
    if (refused_resume(f))
        return json_decref(plan), 0;
    struct tr_path path;
    struct tr_atomic a;
    int rc = tr_path_set(&path, d, "%s/plan.json", f->dir.s);
    if (!rc && !(rc = tr_atomic_open(&a, path.s, d))) {
        if (json_dumpf(plan, a.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
            tr_atomic_abort(&a);
            rc = tr_fail(d, TR_EIO, "cannot write %s: %s", path.s, strerror(errno));
        } else {
            rc = tr_atomic_commit(&a, d);
        }
    }
    json_decref(plan);
    return rc;
}

void tr_run_folder_draw(struct tr_run_folder *f, const struct tr_built *b, const char *name)
{
    struct tr_path dot, svg;
    struct tr_diag why = {0};
    char title[256];
    snprintf(title, sizeof title, "%s: the chosen program, %d nodes", name, b->p.n);
    if (tr_path_set(&dot, &why, "%s/graph.dot", f->dir.s) || tr_path_set(&svg, &why, "%s/graph.svg", f->dir.s) ||
        tr_graph_dot_file(dot.s, &b->g, b->p.schedule, b->p.n, &b->p.plans[b->p.nbuckets - 1], false, title, &why) ||
        tr_graph_svg(dot.s, svg.s, &why))
        tr_run_folder_say(f, "warning: the graph is not drawn: %s\n", tr_diag_last(&why));
    tr_diag_free(&why);
}

int tr_run_folder_open_events(struct tr_run_folder *f, const struct tr_recipe *r, int64_t start,
                              const char *plan_markdown, const struct tr_graph *g, const struct tr_knobs *k,
                              struct tr_diag *d)
{
    if (!r->report.tensorboard)
        return 0;
    struct tr_diag why = {0};
    if (tr_events_open(&f->events, f->dir.s, start + 1, r->report.flush_every, &why))
        return tr_fail_because(d, TR_EFAIL, &why, "tensorboard");
    if (start == 0)
        tr_tb_session_start(&f->events, r, plan_markdown ? plan_markdown : "", g, k, (double)time(NULL));
    return 0;
}

int tr_run_folder_begin_record(struct tr_run_folder *f, const struct tr_recipe *r, int64_t start, json_t *warm_start,
                               struct tr_diag *d)
{
    char hash[65];
    recipe_hash(r, hash);
    int rc = tr_run_record_begin(&f->record, f->dir.s, tr_environment(hash), start, d);
    if (rc) {
        json_decref(warm_start);
        return rc;
    }
    if (!f->resumed)
        point_latest(f, r);
    return warm_start ? tr_run_record_note(f->record, f->dir.s, "warm_start", warm_start, d) : 0;
}

void tr_run_folder_note(struct tr_run_folder *f, const char *key, json_t *value)
{
    if (f->silent) {
        json_decref(value);
        return;
    }
    struct tr_diag why = {0};
    if (tr_run_record_note(f->record, f->dir.s, key, value, &why))
        tr_run_folder_say(f, "warning: %s\n", tr_diag_last(&why));
    tr_diag_free(&why);
}

/* ---- the end --------------------------------------------------------------------------------- */

/* The Prometheus textfile from the report just rendered: end->prometheus, or trainrun.prom in
 * the folder of the recipe's runs (the run folder's parent). A failure is a warning. */
static void prometheus(struct tr_run_folder *f, const struct tr_run_end *end)
{
    struct tr_path path;
    struct tr_diag why = {0};
    json_t *report = tr_report_json_load(f->dir.s);
    char *parent = tr_strdup_printf("%s", f->dir.s), *slash = strrchr(parent, '/');
    if (slash)
        *slash = '\0';
    int rc = end->prometheus ? tr_path_set(&path, &why, "%s", end->prometheus)
                             : tr_path_set(&path, &why, "%s/trainrun.prom", slash ? parent : ".");
    if (!rc && !report)
        rc = tr_fail(&why, TR_EIO, "%s/report.json: not written", f->dir.s);
    if (!rc)
        rc = tr_prometheus_write(path.s, report, end->name ? end->name : "", (double)time(NULL), &why);
    if (rc)
        tr_run_folder_say(f, "warning: Prometheus textfile: %s\n", tr_diag_last(&why));
    tr_diag_free(&why);
    json_decref(report);
    free(parent);
}

void tr_run_folder_end(struct tr_run_folder *f, const char *report_dir, const struct tr_run_end *end)
{
    struct tr_diag why = {0};
    if (f->log && f->record &&
        tr_run_record_end(f->record, f->dir.s, &(struct tr_record_end){.exit_code = end->exit_status,
                          .seconds = end->seconds, .to_step = end->steps, .signal = end->signal}, end->leak, &why))
        tr_run_folder_say(f, "warning: %s\n", tr_diag_last(&why));
    else if (!f->log || !f->record)
        json_decref(end->leak);
    tr_diag_free(&why);
    if (f->log && f->record) {   /* the report is for people: failing to write it does not fail the run */
        struct tr_run_outcome outcome = {.exit_code = end->exit_status, .seconds = end->seconds};
        if (tr_run_report_render(f->dir.s, &outcome, &why))
            tr_run_folder_say(f, "warning: report: %s\n", tr_diag_last(&why));
        tr_diag_free(&why);
        prometheus(f, end);
        if (tr_runs_index_write(report_dir, &why))
            tr_run_folder_say(f, "warning: runs index: %s\n", tr_diag_last(&why));
        tr_diag_free(&why);
    }
    bool failed = end->err && end->err != TR_EREGRESSION;
    /* interrupted or stopped by budget.time: the session goes on when resumed */
    if (f->events.fd >= 0 && end->err != TR_EINTERRUPTED && end->err != TR_ETIMEUP)
        tr_events_session_end(&f->events, failed ? TR_SESSION_FAILURE : TR_SESSION_SUCCESS, (double)time(NULL));
    if (tr_events_close(&f->events) && f->log)
        tr_run_folder_say(f, "warning: TensorBoard events: %s\n", tr_events_error(&f->events));
}

int tr_run_folder_notification_cut(struct tr_run_folder *f, int exit_status, int signal, struct tr_diag *d)
{
    return f->record ? tr_run_record_cut(f->record, f->dir.s, exit_status, signal, d) : 0;
}

void tr_run_folder_close(struct tr_run_folder *f)
{
    json_decref(f->record);
    f->record = NULL;
    if (f->log)
        fclose(f->log);
    if (f->metrics)
        fclose(f->metrics);
    f->log = f->metrics = NULL;
}
