/* The run folder's files (run_folder.h): made, appended to, synced at checkpoints and closed
 * with the run's record and reports. */
#include "train/run_folder.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/atomic.h"
#include "data/cache.h"
#include "data/sha256.h"
#include "report/environment.h"
#include "report/index.h"
#include "report/run_report.h"
#include "report/tensorboard.h"
#include "train/record.h"
#include "train/runs.h"

enum { TIMELINE_POINTS = 200 };   /* plan.json's memory timeline of one step: at most this many */

void tr_run_folder_init(struct tr_run_folder *f, bool quiet)
{
    *f = (struct tr_run_folder){.events = {.fd = -1}, .quiet = quiet, .tty = isatty(STDOUT_FILENO)};
}

/* log.txt and metrics.jsonl, new ("w") or appended to ("a"). */
static int open_appended(struct tr_run_folder *f, const char *mode, struct tr_diag *d)
{
    struct tr_path log, metrics;
    if (tr_path_set(&log, d, "%s/log.txt", f->dir.s) || tr_path_set(&metrics, d, "%s/metrics.jsonl", f->dir.s))
        return TR_EINVAL;
    f->log = fopen(log.s, mode);
    f->metrics = fopen(metrics.s, mode);
    if (!f->log || !f->metrics)
        return tr_fail(d, TR_EIO, "cannot write in %s: %s", f->dir.s, strerror(errno));
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
    struct tr_path path, runs;
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
    if ((rc = tr_atomic_commit(&a, d)) || (rc = open_appended(f, "w", d)) ||
        (rc = tr_path_set(&runs, d, "%s/%s", r->report.dir, r->name)))
        return rc;
    if (tr_runs_link_set(runs.s, "latest", strrchr(f->dir.s, '/') + 1))
        tr_run_folder_say(f, "warning: cannot point %s/latest at the new run: %s\n", runs.s, strerror(errno));
    return 0;
}

int tr_run_folder_open(struct tr_run_folder *f, const struct tr_recipe *r, const char *resume_dir,
                       struct tr_diag *d)
{
    if (!resume_dir)
        return create(f, r, d);
    int rc = tr_path_set(&f->dir, d, "%s", resume_dir);
    return rc ? rc : open_appended(f, "a", d);
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

void tr_run_folder_metric(struct tr_run_folder *f, json_t *line, bool events)
{
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
    return j;
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
    return warm_start ? tr_run_record_note(f->record, f->dir.s, "warm_start", warm_start, d) : 0;
}

void tr_run_folder_note(struct tr_run_folder *f, const char *key, json_t *value)
{
    struct tr_diag why = {0};
    if (tr_run_record_note(f->record, f->dir.s, key, value, &why))
        tr_run_folder_say(f, "warning: %s\n", tr_diag_last(&why));
    tr_diag_free(&why);
}

/* ---- the end --------------------------------------------------------------------------------- */

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
    if (f->log) {   /* the report is for people: failing to write it does not fail the run */
        struct tr_run_outcome outcome = {.exit_code = end->exit_status, .seconds = end->seconds};
        if (tr_run_report_render(f->dir.s, &outcome, &why))
            tr_run_folder_say(f, "warning: report: %s\n", tr_diag_last(&why));
        tr_diag_free(&why);
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
