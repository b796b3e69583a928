/* Notifications: the reporter's last act (DESIGN.md §2). When a run ends with an outcome that
 * report.notify.on lists, POSTs a JSON summary of its report.json to report.notify.url, all
 * within report.notify.timeout. Secrets come only from the environment (headers_from_env) and
 * no message ever shows them, nor the URL's user, path, query or fragment. */
#ifndef TR_NOTIFY_H
#define TR_NOTIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "recipe/recipe.h"

/* The outcome an exit status notifies as (enum tr_notify_on): 0 success, 6 regression, any
 * other failure — except 7 (data unchanged) and 75 (locked), where no run took place: −1. */
int tr_notify_outcome(int exit_code);
const char *tr_notify_outcome_name(int outcome);

/* The body: recipe, run, run_dir, status, exit_code, outcome, duration_seconds, key_metric,
 * warnings, host, report — from run_dir/report.json where it has them (run_dir may be NULL or
 * not hold one: a run that failed before its folder existed), else from r and exit_code. */
json_t *tr_notify_body(const struct tr_recipe *r, const char *run_dir, int exit_code);


struct tr_notify_result {
    bool delivered;     /* false with 0 returned: notifications off, or this outcome not listed */
    int attempts;
    long http_status;   /* the last answer's; 0 when none came */
    double seconds;
};

/* Notifies of a run that ended with exit_code in run_dir, when r asks for it: up to 3 attempts
 * (a failed connection, HTTP 408, 429 or 5xx is tried again after 0.5 s, then 1 s), never past
 * report.notify.timeout in all. Returns 0 (delivered, or nothing to send: see res) or a
 * negative TR_E… code with the reason in d, secrets redacted. */
int tr_notify(const struct tr_recipe *r, const char *run_dir, int exit_code, struct tr_notify_result *res,
              struct tr_diag *d);

/* tr_notify at the end of a run: a delivery is noted in run_dir/log.txt; a failure is a
 * warning there and on stderr. Returns 0, or TR_EINTERRUPTED when a signal (core/stop.h) cut
 * the notification short, which the caller's exit status then says (130); a failed delivery
 * never changes it. Messages show the URL as core/url.h's TR_URL_WEBHOOK does. */
int tr_notify_run_end(const struct tr_recipe *r, const char *run_dir, int exit_code);

#endif
