/* Prometheus's text exposition format for node_exporter's textfile collector (prometheus.h). */
#include "report/prometheus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic.h"

/* A label value as the format escapes it: backslash, double quote and newline. */
static void label(FILE *f, const char *s)
{
    for (; *s; s++)
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
}

/* One gauge: its HELP and TYPE lines, then the sample (nothing when value is not a number). */
static void gauge(FILE *f, const char *name, const char *help, const char *recipe, const char *extra_label,
                  const char *extra_value, double value)
{
    if (!isfinite(value))
        return;
    fprintf(f, "# HELP trainrun_%s %s\n# TYPE trainrun_%s gauge\ntrainrun_%s{recipe=\"", name, help, name, name);
    label(f, recipe);
    if (extra_label) {
        fprintf(f, "\",%s=\"", extra_label);
        label(f, extra_value);
    }
    fprintf(f, "\"} %.17g\n", value);
}

static double number(const json_t *j)
{
    return json_is_number(j) ? json_number_value(j) : NAN;
}

char *tr_prometheus_text(const json_t *report, const char *recipe, double ended)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return NULL;
    const char *status = json_string_value(json_object_get(report, "status"));
    static const char *const statuses[] = {"finished", "regression", "interrupted", "time-limit", "failed"};
    fprintf(f, "# HELP trainrun_last_run_status The last run's outcome: 1 for its status, 0 for the others.\n"
               "# TYPE trainrun_last_run_status gauge\n");
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        fputs("trainrun_last_run_status{recipe=\"", f);
        label(f, recipe);
        fprintf(f, "\",status=\"%s\"} %d\n", statuses[i], status && !strcmp(status, statuses[i]));
    }
    gauge(f, "last_run_exit_code", "The last run's exit status (trainrun(1) EXIT STATUS).", recipe, NULL, NULL,
          number(json_object_get(report, "exit_code")));
    gauge(f, "last_run_success", "1 when the last run finished (exit status 0), else 0.", recipe, NULL, NULL,
          status ? !strcmp(status, "finished") : NAN);
    gauge(f, "last_run_end_timestamp_seconds", "When the last run ended, in Unix time.", recipe, NULL, NULL, ended);
    gauge(f, "last_run_duration_seconds", "The last run's wall-clock time.", recipe, NULL, NULL,
          number(json_object_get(report, "duration_seconds")));
    gauge(f, "last_run_steps", "The optimizer steps the last run reached.", recipe, NULL, NULL,
          number(json_object_get(report, "steps")));
    const json_t *key = json_object_get(report, "key_metric");
    const char *key_name = json_string_value(json_object_get(key, "name"));
    if (key_name)
        gauge(f, "last_run_key_metric", "The last run's key metric (trainrun-report(5): key_metric), named by "
              "the metric label.", recipe, "metric", key_name, number(json_object_get(key, "value")));
    const json_t *through = json_object_get(report, "throughput"), *plan = json_object_get(report, "plan");
    gauge(f, "last_run_samples_per_second", "The last run's median training throughput in samples.", recipe, NULL,
          NULL, number(json_object_get(through, "samples_per_s")));
    gauge(f, "last_run_tokens_per_second", "The last run's median training throughput in tokens (text).", recipe,
          NULL, NULL, number(json_object_get(through, "tokens_per_s")));
    gauge(f, "last_run_footprint_bytes", "The last run's measured footprint (peak resident set, or device memory).",
          recipe, NULL, NULL, number(json_object_get(plan, "measured_footprint_bytes")));
    gauge(f, "last_run_predicted_footprint_bytes", "The planner's predicted footprint for the last run.", recipe,
          NULL, NULL, number(json_object_get(plan, "predicted_footprint_bytes")));
    gauge(f, "last_run_budget_bytes", "The last run's memory budget.", recipe, NULL, NULL,
          number(json_object_get(plan, "budget_bytes")));
    gauge(f, "last_run_peak_bytes", "The last run's measured peak of its regions.", recipe, NULL, NULL,
          number(json_object_get(plan, "measured_peak_bytes")));
    fclose(f);
    return text;
}

int tr_prometheus_write(const char *path, const json_t *report, const char *recipe, double ended,
                        struct tr_diag *d)
{
    char *text = tr_prometheus_text(report, recipe, ended);
    if (!text)
        return tr_fail(d, TR_EIO, "%s: out of memory", path);
    int rc = tr_atomic_write(path, text, strlen(text), d) ? TR_EIO : 0;
    free(text);
    return rc;
}
