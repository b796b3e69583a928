/* The promotion gate (promote.h). A run's numbers come from the reporter's own reading of its
 * folder (report/run_report.h), so the gate and the report never disagree on a "final" value
 * or on which metric is the key one. */
#include "train/promote.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "report/run_report.h"
#include "train/runs.h"

/* report.json's object for a run folder: the one on disk (what its report said), or, when
 * fresh or when there is none, read again from the folder's files. NULL when unreadable. */
static json_t *run_summary(const char *run_dir, int fresh)
{
    char *path = tr_strdup_printf("%s/report.json", run_dir);
    json_t *j = fresh ? NULL : json_load_file(path, 0, NULL);
    free(path);
    if (json_is_object(json_object_get(j, "final")))
        return j;
    json_decref(j);
    struct tr_run_report rep;
    struct tr_run_outcome finished = {.exit_code = 0, .seconds = NAN};
    if (tr_run_report_load(run_dir, fresh ? &finished : NULL, &rep, NULL))
        return NULL;
    j = tr_run_report_json(&rep);
    tr_run_report_free(&rep);
    return j;
}

static double final_value(const json_t *summary, const char *metric)
{
    json_t *v = json_object_get(json_object_get(summary, "final"), metric);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* "eval.accuracy", as early_stop names it, is metrics.jsonl's "eval/accuracy". */
static void metric_name(const char *given, char *out, size_t size)
{
    snprintf(out, size, "%s", given);
    char *dot = strchr(out, '.');
    if (dot && !strchr(out, '/'))
        *dot = '/';
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* Which metric, and which way is better: the recipe's, or for "key" the key metric of the report. */
static int choose_metric(const struct tr_recipe *r, const json_t *summary, struct tr_promotion *p)
{
    const json_t *key = json_object_get(summary, "key_metric");
    const char *key_name = json_string_value(json_object_get(key, "name"));
    if (r->report.promote.metric && strcmp(r->report.promote.metric, "key"))
        metric_name(r->report.promote.metric, p->metric, sizeof p->metric);
    else if (key_name)
        snprintf(p->metric, sizeof p->metric, "%s", key_name);
    else
        return -1;
    if (r->report.promote.mode != TR_PROMOTE_AUTO)
        p->maximise = r->report.promote.mode == TR_PROMOTE_MAX;
    else if (key_name && !strcmp(key_name, p->metric))
        p->maximise = !strcmp(json_string_value(json_object_get(key, "better")) ?: "", "higher");
    else
        p->maximise = ends_with(p->metric, "accuracy") || ends_with(p->metric, "_per_s");
    return 0;
}

/* The decision, from the two values; promoted_value NAN: nothing to compare with. */
static void decide(struct tr_promotion *p)
{
    const char *way = p->maximise ? "higher" : "lower";
    if (!*p->promoted_run) {
        p->decision = TR_PROMOTION_FIRST;
        snprintf(p->reason, sizeof p->reason, "promoted: %s is the first finished run (%s %.6g)", p->candidate,
                 p->metric, p->candidate_value);
    } else if (isnan(p->candidate_value)) {
        p->decision = TR_PROMOTION_REGRESSION;
        snprintf(p->reason, sizeof p->reason, "regression: this run logged no %s; the promoted run stays %s",
                 p->metric, p->promoted_run);
    } else if (isnan(p->promoted_value)) {
        p->decision = TR_PROMOTION_PROMOTED;
        snprintf(p->reason, sizeof p->reason, "promoted: %s %.6g (the promoted run %s logged no %s)", p->metric,
                 p->candidate_value, p->promoted_run, p->metric);
    } else {
        double worse_by = p->maximise ? p->promoted_value - p->candidate_value : p->candidate_value - p->promoted_value;
        int promoted = !(worse_by > p->min_delta);
        p->decision = promoted ? TR_PROMOTION_PROMOTED : TR_PROMOTION_REGRESSION;
        snprintf(p->reason, sizeof p->reason, "%s: %s %.6g against %.6g of the promoted run %s (%s is better, "
                 "min_delta %g)%s", promoted ? "promoted" : "regression", p->metric, p->candidate_value,
                 p->promoted_value, p->promoted_run, way, p->min_delta,
                 promoted ? "" : "; the promoted run stays");
    }
}

int tr_promote(const struct tr_recipe *r, const char *dir, const char *run_dir, struct tr_promotion *p,
               struct tr_diag *d)
{
    memset(p, 0, sizeof *p);
    p->min_delta = r->report.promote.min_delta;
    p->candidate_value = p->promoted_value = NAN;
    const char *base = strrchr(run_dir, '/');
    snprintf(p->candidate, sizeof p->candidate, "%s", base ? base + 1 : run_dir);
    json_t *mine = run_summary(run_dir, 1);
    if (!mine || choose_metric(r, mine, p)) {
        json_decref(mine);
        return tr_fail(d, TR_EIO, "promotion: cannot read the metrics of %s", run_dir);
    }
    p->candidate_value = final_value(mine, p->metric);
    json_decref(mine);
    if (tr_runs_link_target(dir, "promoted", p->promoted_run, sizeof p->promoted_run) == 0 &&
        strcmp(p->promoted_run, p->candidate)) {
        char *path = tr_strdup_printf("%s/%s", dir, p->promoted_run);
        json_t *theirs = run_summary(path, 0);
        free(path);
        p->promoted_value = final_value(theirs, p->metric);
        json_decref(theirs);
    } else if (!strcmp(p->promoted_run, p->candidate)) {   /* resumed after its promotion */
        p->promoted_value = p->candidate_value;
    }
    decide(p);
    if (p->decision != TR_PROMOTION_REGRESSION && tr_runs_link_set(dir, "promoted", p->candidate))
        return tr_fail(d, TR_EIO, "promotion: cannot point %s/promoted at %s: %s", dir, p->candidate, strerror(errno));
    return 0;
}

json_t *tr_promotion_json(const struct tr_promotion *p)
{
    static const char *const words[] = {"first", "promoted", "regression"};
    json_t *j = json_object();
    json_object_set_new(j, "metric", json_string(p->metric));
    json_object_set_new(j, "mode", json_string(p->maximise ? "max" : "min"));
    json_object_set_new(j, "min_delta", json_real(p->min_delta));
    json_object_set_new(j, "candidate", json_string(p->candidate));
    json_object_set_new(j, "candidate_value", isfinite(p->candidate_value) ? json_real(p->candidate_value) : json_null());
    json_object_set_new(j, "promoted_run", *p->promoted_run ? json_string(p->promoted_run) : json_null());
    json_object_set_new(j, "promoted_value", isfinite(p->promoted_value) ? json_real(p->promoted_value) : json_null());
    json_object_set_new(j, "decision", json_string(words[p->decision]));
    json_object_set_new(j, "reason", json_string(p->reason));
    return j;
}
