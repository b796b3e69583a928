/* The run's end (finish.h): its last line, what the plan met, the promotion gate, retention. */
#include "train/finish.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "train/promote.h"
#include "train/runs.h"

void tr_finish_say_done(struct tr_run_folder *f, const struct tr_data *data, struct tr_train_result *res, int rc,
                        const struct tr_diag *d)
{
    bool resumable = (rc == TR_EINTERRUPTED || rc == TR_ETIMEUP) && f->log;
    if (rc && rc != TR_ETIMEUP)
        tr_run_folder_log_errors(f, d);
    if (resumable)   /* its checkpoint is written (or none was due: nothing had trained) */
        tr_run_folder_say(f, "%s; 'trainrun resume %s' continues it\n", tr_diag_last(d), f->dir.s);
    if (rc && rc != TR_ETIMEUP)
        return;
    const char *ended = rc ? "stopped by budget.time" : "done";
    double wait = 100 * res->data_wait_seconds / (res->seconds > 0 ? res->seconds : 1);
    if (!data->test.n) {
        res->test = (struct tr_eval){NAN, NAN, NAN};
        tr_run_folder_say(f, "%s: %lld steps in %.1f s (data wait %.1f%%); no test split\n", ended,
                          (long long)res->steps, res->seconds, wait);
        return;
    }
    const struct tr_eval *t = &res->test;
    tr_run_folder_say(f, "%s: %lld steps in %.1f s (data wait %.1f%%); test loss %.4f, test accuracy %.4f\n", ended,
                      (long long)res->steps, res->seconds, wait, t->loss, t->accuracy);
    tr_run_folder_metric(f, json_pack("{sIsfsfsfsf}", "step", (json_int_t)res->steps, "test/loss", t->loss,
                                      "test/accuracy", t->accuracy, "test/top5_accuracy", t->top5, "test/perplexity",
                                      exp(t->loss)), true);
}

/* The sizes measured and predicted, in words: regions' peak (rp, rq) and footprint (fp, fq). */
struct sizes {
    char rp[32], rq[32], fp[32], fq[32];
};

/* The predictions the measurements missed, as sentences. */
static json_t *missed(const struct tr_session *s, const struct tr_alloc_stats *st, int64_t foot,
                      const struct sizes *w)
{
    const struct tr_candidate *c = tr_session_chosen(s);
    json_t *warnings = json_array();
    char line[300];
    const char *rp = w->rp, *rq = w->rq, *fp = w->fp, *fq = w->fq;
    if (fabs((double)st->peak - (double)c->peak) > 0.01 * (double)c->peak) {
        snprintf(line, sizeof line, "memory: the regions peaked at %s, predicted %s (%+.1f%%)", rp, rq,
                 100.0 * ((double)st->peak - (double)c->peak) / (double)c->peak);
        json_array_append_new(warnings, json_string(line));
    }
    if (foot > 0 && (uint64_t)foot > c->footprint) {
        snprintf(line, sizeof line, "memory: the footprint (%s) reached %s, above the predicted %s",
                 s->dev.kind == TR_DEVICE_CUDA ? "device memory in use" : "peak resident set", fp, fq);
        json_array_append_new(warnings, json_string(line));
    }
    return warnings;
}

/* The step time predicted against the median measured: the log's line, plan.json's
 * measured_step_seconds and run.json's "step_seconds". No warning when they differ: a busy
 * machine's steps are slower than any forecast, and a warning would come and go with the load. */
static void step_time(struct tr_run_folder *f, const struct tr_candidate *c, const struct tr_train_result *res,
                      json_t *plan)
{
    bool measured = res->timed_steps > 0 && isfinite(res->step_seconds);
    double error = measured && c->step_seconds > 0 ? (res->step_seconds - c->step_seconds) / c->step_seconds : NAN;
    json_object_set_new(plan, "measured_step_seconds", measured ? json_real(res->step_seconds) : json_null());
    tr_run_folder_note(f, "step_seconds", json_pack("{sf so sI}", "predicted", c->step_seconds, "measured",
                                                    measured ? json_real(res->step_seconds) : json_null(),
                                                    "timed_steps", (json_int_t)res->timed_steps));
    if (!measured) {
        tr_run_folder_say(f, "time: a step predicted %.3g s; not measured (the first step is a warm-up)\n",
                          c->step_seconds);
        return;
    }
    tr_run_folder_say(f, "time: a step took %.3g s (median of %lld), predicted %.3g s (%+.0f%%)\n",
                      res->step_seconds, (long long)res->timed_steps, c->step_seconds, 100 * error);
}

/* Offloaded: the host's regions measured against the plan's, and what crossed the host link a
 * step — the bytes each way, the seconds the host spent queuing, copying and waiting for them
 * against the forecast at the link's rate, and the share of that hidden behind the kernels. A
 * host-visible or fenced CPU copies at the join, on the host's own time: none is hidden there.
 * plan.json's "measured_host"; the log's "offload:" line. */
static void offload_measured(struct tr_run_folder *f, const struct tr_session *s, const struct tr_candidate *c,
                             json_t *plan, json_t *warnings)
{
    if (!c->k.offload)
        return;
    struct tr_alloc_stats host;
    tr_alloc_stats(&s->host_alloc, &host);
    const struct tr_exec_copies *a = &s->train.x.copies;
    const struct tr_optim_moved *o = &s->optim.moved;
    double steps = o->steps > 0 ? (double)o->steps : 1;
    double bytes = ((double)a->sent + (double)a->back + (double)o->down + (double)o->up) / steps;
    double seconds = (a->seconds + o->seconds) / steps;
    bool gpu = s->dev.kind == TR_DEVICE_CUDA;   /* its copies overlap on the device's clock, which the
                                                 * host's does not see: not measured yet */
    json_t *regions = json_object();
    for (int r = 0; r < TR_NREGIONS; r++)
        if (host.region[r].peak)
            json_object_set_new(regions, tr_region_name(r), json_integer((json_int_t)host.region[r].peak));
    json_object_set_new(plan, "measured_host", json_pack(
        "{sI so sf sf sf sf sf sf so sf sI}", "bytes", (json_int_t)host.peak, "regions", regions,
        "link_bytes_per_step", bytes, "activation_bytes_per_step", ((double)a->sent + (double)a->back) / steps,
        "optimizer_bytes_per_step", ((double)o->down + (double)o->up) / steps,
        "gradient_bytes_during_backward_per_step", (double)o->early / steps, "link_seconds_per_step", seconds,
        "host_update_seconds_per_step", o->update_seconds / steps, "overlap", gpu ? json_null() : json_real(0),
        "predicted_link_seconds", c->link_seconds, "steps", (json_int_t)o->steps));
    char held[32], predicted[32], moved[32], early[32], line[300], grads[128] = "";
    tr_format_bytes(host.peak, held), tr_format_bytes(c->host_bytes, predicted), tr_format_bytes((uint64_t)bytes, moved);
    if (o->down) {
        tr_format_bytes((uint64_t)((double)o->early / steps), early);
        snprintf(grads, sizeof grads, "; %s of the gradients a step sent during the backward", early);
    }
    tr_run_folder_say(f, "offload: host regions peaked at %s (predicted %s); %s a step over the host link, %.3g s "
                      "of the host's time (predicted %.3g s at %.3g GB/s, %.3g s exposed)%s; %s\n", held, predicted,
                      moved, seconds, c->link_seconds, tr_device_host_link(&s->dev) / 1e9, c->link_exposed, grads,
                      gpu ? "the overlap on the device's copy engine not measured yet"
                          : "none hidden behind the kernels: the CPU copies on the host's own time");
    if (host.peak != c->host_bytes) {
        snprintf(line, sizeof line, "memory: the host regions peaked at %s, predicted %s", held, predicted);
        json_array_append_new(warnings, json_string(line));
    }
}

int tr_finish_measured_plan(struct tr_run_folder *f, const struct tr_session *s, const struct tr_recipe *r,
                            const struct tr_data *data, const struct tr_train_result *res, struct tr_diag *d)
{
    int64_t step = res->steps;
    struct tr_alloc_stats st;
    tr_alloc_stats(&s->alloc, &st);
    if (!f->log || s->plan.chosen < 0 || !st.allocs)
        return 0;
    const struct tr_candidate *c = tr_session_chosen(s);
    json_t *j = tr_run_folder_plan_json(s, r, data), *regions = json_object();
    int64_t foot = tr_session_footprint(s);
    for (int i = 0; i < TR_NREGIONS; i++)
        json_object_set_new(regions, tr_region_name(i), json_integer((json_int_t)st.region[i].peak));
    json_object_set_new(j, "measured_peak_bytes", json_integer((json_int_t)st.peak));
    json_object_set_new(j, "measured_regions", regions);
    json_object_set_new(j, "measured_footprint_bytes", json_integer(foot));
    struct sizes w;
    tr_format_bytes(st.peak, w.rp), tr_format_bytes(c->peak, w.rq);
    tr_format_bytes(foot > 0 ? (uint64_t)foot : 0, w.fp), tr_format_bytes(c->footprint, w.fq);
    tr_run_folder_say(f, "memory: regions peaked at %s (predicted %s); footprint %s (predicted %s)\n", w.rp, w.rq,
                      w.fp, w.fq);
    json_t *warnings = missed(s, &st, foot, &w);
    offload_measured(f, s, c, j, warnings);
    step_time(f, c, res, j);
    tr_run_folder_metric(f, json_pack("{sIsfsf}", "step", (json_int_t)step, "memory/measured_peak", (double)st.peak,
                                      "memory/measured_footprint", (double)foot), true);
    return tr_run_folder_write_plan(f, j, warnings, step, d);
}

int tr_finish_promote(struct tr_run_folder *f, const struct tr_recipe *r, struct tr_diag *d)
{
    if (!r->report.promote.metric || !f->record)
        return 0;
    struct tr_path dir;
    struct tr_promotion p;
    int rc = tr_runs_parent(f->dir.s, &dir, d);
    if (rc || (rc = tr_promote(r, dir.s, f->dir.s, &p, d)))
        return rc;
    tr_run_folder_say(f, "%s\n", p.reason);
    tr_run_folder_note(f, "promotion", tr_promotion_json(&p));
    if (p.decision == TR_PROMOTION_REGRESSION)
        return tr_fail(d, TR_EREGRESSION, "%s", p.reason);
    return 0;
}

void tr_finish_retain(struct tr_run_folder *f, const struct tr_recipe *r)
{
    struct tr_diag d = {0};
    struct tr_path dir;
    if (r->report.keep <= 0 || !f->record || tr_runs_parent(f->dir.s, &dir, &d)) {
        tr_diag_free(&d);
        return;
    }
    char deleted[2048];
    int n = tr_runs_retain(dir.s, r->report.keep, strrchr(f->dir.s, '/') + 1, deleted, sizeof deleted);
    if (n < 0)
        tr_run_folder_say(f, "warning: report.keep: cannot read %s: %s\n", dir.s, strerror(errno));
    else if (n > 0)
        tr_run_folder_say(f, "report.keep %lld: deleted %d old run folder%s: %s\n", (long long)r->report.keep, n,
                          n == 1 ? "" : "s", deleted);
}
