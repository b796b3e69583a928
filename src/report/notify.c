/* Notifications (notify.h): the run's summary, read from its report.json, POSTed with libcurl
 * within report.notify.timeout and tried again briefly when the webhook fails. A notification
 * that cannot be delivered is a warning, never a failed run; every message about it is
 * scrubbed of the secrets the request carries. */
#include "report/notify.h"
#include "report/run_report.h"

#include <ctype.h>
#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "core/error.h"
#include "core/exit.h"
#include "core/stop.h"
#include "core/url.h"
#include "recipe/schema.h"

enum {
    MAX_ATTEMPTS = 3,
    CONNECT_TIMEOUT_MS = 3000,   /* a webhook that takes longer to accept a connection is down */
    MAX_SECRETS = 2 * TR_LIST_MAX + 8,
};
static const double first_backoff = 0.5;   /* seconds before the second attempt; doubled after */
static const double least_attempt = 0.25;  /* seconds: less time left than this is not worth a try */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int tr_notify_outcome(int exit_code)
{
    switch (exit_code) {
    case TR_EXIT_OK:         return TR_NOTIFY_SUCCESS;
    case TR_EXIT_REGRESSION: return TR_NOTIFY_REGRESSION;
    case TR_EXIT_UNCHANGED:  /* skipped: nothing ran */
    case TR_EXIT_LOCKED:     return -1;
    default:                 return TR_NOTIFY_FAILURE;
    }
}

/* "failure", "regression", "success": the names report.notify.on takes. */
static const char *outcome_name(int outcome)
{
    return tr_keys[tr_key_find("report.notify.on")].names[outcome];
}

/* ---- the body ---------------------------------------------------------------------------------- */

static json_t *string_or_null(const char *s)
{
    json_t *j = s ? json_string(s) : NULL;   /* NULL too for text that is not UTF-8 */
    return j ? j : json_null();
}

static const char *report_string(json_t *report, const char *key)
{
    const char *s = json_string_value(json_object_get(report, key));
    return s && *s ? s : NULL;
}

/* report.json's value for key when it has one of that JSON type (a number: integer or real),
 * else fallback (owned). */
static json_t *report_value(json_t *report, const char *key, json_type type, json_t *fallback)
{
    json_t *v = json_object_get(report, key);
    if (v && (json_typeof(v) == type || (type == JSON_REAL && json_is_number(v)))) {
        json_decref(fallback);
        return json_incref(v);
    }
    return fallback;
}

json_t *tr_notify_body(const struct tr_recipe *r, const char *run_dir, int exit_code)
{
    struct tr_path path;
    char host[256] = "", *real = NULL;
    json_t *report = NULL;
    bool has_dir = run_dir && *run_dir;
    if (has_dir) {
        if (tr_path_set(&path, NULL, "%s/report.json", run_dir) == 0)
            report = json_load_file(path.s, 0, NULL);
        real = realpath(run_dir, NULL);
    }
    const char *dir = real ? real : run_dir;
    /* The run: the real folder's name, not that of the link it was reached by (runs/NAME/latest,
     * which `trainrun resume` is often given and report.json's "run" then names). */
    const char *name = report_string(report, "name"), *run = NULL;
    if (has_dir) {
        const char *slash = strrchr(dir, '/');
        run = slash ? slash + 1 : dir;
    }
    const char *from_env = json_string_value(json_object_get(json_object_get(report, "environment"), "host"));
    if (from_env)
        snprintf(host, sizeof host, "%s", from_env);
    else if (gethostname(host, sizeof host - 1))
        host[0] = '\0';
    int outcome = tr_notify_outcome(exit_code);

    json_t *body = json_object();
    json_object_set_new(body, "recipe", string_or_null(name ? name : r->name));
    json_object_set_new(body, "run", string_or_null(run));
    json_object_set_new(body, "run_dir", string_or_null(has_dir ? dir : NULL));
    const char *status = report_string(report, "status");
    json_object_set_new(body, "status", string_or_null(status ? status : tr_run_status_word(exit_code)));
    json_object_set_new(body, "exit_code", json_integer(exit_code));
    json_object_set_new(body, "outcome", string_or_null(outcome >= 0 ? outcome_name(outcome) : NULL));
    json_object_set_new(body, "duration_seconds", report_value(report, "duration_seconds", JSON_REAL, json_null()));
    json_object_set_new(body, "key_metric", report_value(report, "key_metric", JSON_OBJECT, json_null()));
    json_object_set_new(body, "warnings", report_value(report, "warnings", JSON_ARRAY, json_array()));
    json_object_set_new(body, "host", string_or_null(*host ? host : NULL));
    bool has_report = has_dir && tr_path_set(&path, NULL, "%s/report.html", dir) == 0 && access(path.s, F_OK) == 0;
    json_object_set_new(body, "report", string_or_null(has_report ? path.s : NULL));
    json_decref(report);
    free(real);
    return body;
}

/* ---- the URL, and what no message may show ---------------------------------------------------- */

struct url_parts { char *scheme, *user, *password, *host, *port, *path, *query, *fragment; };

static int url_split(const char *url, struct url_parts *p)
{
    memset(p, 0, sizeof *p);
    CURLU *u = curl_url();
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0)) {
        curl_url_cleanup(u);
        return TR_EINVAL;
    }
    /* A part the URL lacks stays NULL. */
    curl_url_get(u, CURLUPART_SCHEME, &p->scheme, 0);
    curl_url_get(u, CURLUPART_USER, &p->user, 0);
    curl_url_get(u, CURLUPART_PASSWORD, &p->password, 0);
    curl_url_get(u, CURLUPART_HOST, &p->host, 0);
    curl_url_get(u, CURLUPART_PORT, &p->port, 0);
    curl_url_get(u, CURLUPART_PATH, &p->path, 0);
    curl_url_get(u, CURLUPART_QUERY, &p->query, 0);
    curl_url_get(u, CURLUPART_FRAGMENT, &p->fragment, 0);
    curl_url_cleanup(u);
    return p->scheme && p->host ? 0 : TR_EINVAL;
}

static void url_parts_free(struct url_parts *p)
{
    char **parts[] = {&p->scheme, &p->user, &p->password, &p->host, &p->port, &p->path, &p->query, &p->fragment};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        curl_free(*parts[i]);
    memset(p, 0, sizeof *p);
}

/* url as messages show it (core/url.h): scheme://host:port, the rest hidden. */
static void redact_webhook(const char *url, char *out, size_t size)
{
    char *shown = tr_url_redact(url, TR_URL_WEBHOOK);
    snprintf(out, size, "%s", shown);
    free(shown);
}

/* The texts a request carries that messages must not: header lines from the environment, and
 * the URL whole and in parts. Owned copies. */
struct secrets {
    char *v[MAX_SECRETS];
    int n;
};

static void secret_add(struct secrets *s, const char *text)
{
    if (text && strlen(text) >= 3 && s->n < MAX_SECRETS)   /* shorter would mangle ordinary words */
        s->v[s->n++] = tr_strdup(text);
}

static void secrets_free(struct secrets *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    s->n = 0;
}

/* msg with every secret replaced by ***, longest first (a URL before its parts). Frees msg. */
static char *scrub(char *msg, const struct secrets *s)
{
    for (int pass = 0; pass < s->n; pass++) {
        const char *longest = NULL;
        for (int i = 0; i < s->n; i++)
            if (strstr(msg, s->v[i]) && (!longest || strlen(s->v[i]) > strlen(longest)))
                longest = s->v[i];
        if (!longest)
            break;
        size_t n = strlen(longest), cap = strlen(msg) * 2 + 16, len = 0;
        char *out = tr_xmalloc(cap);
        for (const char *p = msg; *p;) {
            if (!strncmp(p, longest, n)) {
                len += (size_t)sprintf(out + len, "***");   /* 3 bytes for at least 3 */
                p += n;
            } else {
                out[len++] = *p++;
            }
            if (len + 16 > cap)
                out = tr_xrealloc(out, cap *= 2);
        }
        out[len] = '\0';
        free(msg);
        msg = out;
    }
    return msg;
}

/* ---- the request ------------------------------------------------------------------------------- */

/* libcurl wants curl_global_init once per process before any thread uses it; the data stage's
 * downloads may call it too, which libcurl counts, so both are safe in any order. Here, at the
 * first notification, not in main: its set-up (OpenSSL's) would add 8 MiB to the process base
 * every plan measures. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_status;

static void curl_init(void)
{
    curl_init_status = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* "Name: value": a token (RFC 9110 §5.6.2), a colon, a value; no CR or LF to smuggle in more. */
static bool is_header_line(const char *s)
{
    const char *p = s;
    while (*p && (isalnum((unsigned char)*p) || strchr("!#$%&'*+-.^_`|~", *p)))
        p++;
    if (p == s || *p != ':')
        return false;
    for (p++; *p == ' ' || *p == '\t'; p++)
        ;
    if (!*p)
        return false;
    return !strpbrk(p, "\r\n");
}

struct post {
    CURL *curl;
    struct curl_slist *headers;
    struct secrets secrets;
    char where[512];                    /* the URL, redacted */
    char curl_error[CURL_ERROR_SIZE];
};

/* The headers: JSON, no Expect: 100-continue (a second round trip some servers never answer),
 * then each report.notify.headers_from_env variable's line. */
static int add_headers(struct post *post, const struct tr_strs *names, struct tr_diag *d)
{
    post->headers = curl_slist_append(NULL, "Content-Type: application/json");
    post->headers = curl_slist_append(post->headers, "Expect:");
    for (int i = 0; i < names->n; i++) {
        const char *line = getenv(names->v[i]);
        if (!line || !*line) {
            return tr_fail(d, TR_EINVAL, "report.notify.headers_from_env: $%s is not set; nothing was sent to %s",
                           names->v[i], post->where);
        }
        if (!is_header_line(line)) {   /* the value may be a token: never shown */
            return tr_fail(d, TR_EINVAL, "report.notify.headers_from_env: $%s does not hold a header line "
                           "'Name: value' (its value is not shown); nothing was sent to %s", names->v[i], post->where);
        }
        secret_add(&post->secrets, line);
        const char *value = strchr(line, ':') + 1;
        secret_add(&post->secrets, value + strspn(value, " \t"));
        post->headers = curl_slist_append(post->headers, line);
    }
    return post->headers ? 0 : TR_ENOMEM;
}

/* libcurl's progress callback, at least once a second: a stop (SIGINT, SIGTERM, SIGHUP) ends
 * the request at once, not after report.notify.timeout. */
static int stop_asked(void *user, curl_off_t down_total, curl_off_t down, curl_off_t up_total, curl_off_t up)
{
    (void)user, (void)down_total, (void)down, (void)up_total, (void)up;
    return tr_stop_requested() != 0;
}

static size_t discard(char *data, size_t size, size_t n, void *user)
{
    (void)data;
    (void)user;
    return size * n;   /* the answer's body is not ours to print: it may echo what we sent */
}

static int post_open(struct post *post, const struct tr_recipe *r, struct tr_diag *d)
{
    const char *url = r->report.notify.url;
    redact_webhook(url, post->where, sizeof post->where);
    struct url_parts p;
    if (url_split(url, &p) == 0) {
        secret_add(&post->secrets, url);
        secret_add(&post->secrets, p.user);
        secret_add(&post->secrets, p.password);
        secret_add(&post->secrets, p.path && strcmp(p.path, "/") ? p.path : NULL);
        secret_add(&post->secrets, p.query);
        secret_add(&post->secrets, p.fragment);
    }
    url_parts_free(&p);
    int rc = add_headers(post, &r->report.notify.headers_from_env, d);
    if (rc)
        return rc;
    pthread_once(&curl_once, curl_init);
    if (curl_init_status != CURLE_OK || !(post->curl = curl_easy_init()))
        return tr_fail(d, TR_ENOMEM, "cannot start libcurl to notify %s", post->where);
    CURL *c = post->curl;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, post->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "trainrun/" PACKAGE_VERSION);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, post->curl_error);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);   /* no SIGALRM for timeouts: we may not own signals */
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, stop_asked);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    /* Redirects are not followed: they would carry the headers, secrets and all, elsewhere. */
    return 0;
}

static void post_close(struct post *post)
{
    curl_easy_cleanup(post->curl);
    curl_slist_free_all(post->headers);
    secrets_free(&post->secrets);
}

/* Not answered, or answered "not now": worth another try. A 4xx says the request is wrong. */
static bool worth_retrying(CURLcode code, long http)
{
    if (code == CURLE_OK)
        return http >= 500 || http == 408 || http == 429;
    return code != CURLE_URL_MALFORMAT && code != CURLE_UNSUPPORTED_PROTOCOL && code != CURLE_OUT_OF_MEMORY;
}


/* What went wrong with the last attempt, as a sentence (may hold secrets: scrub it). */
static char *attempt_error(const struct post *post, CURLcode code, long http)
{
    if (code == CURLE_OK)
        return tr_strdup_printf("the server answered HTTP %ld", http);
    return tr_strdup_printf("%s%s%s", curl_easy_strerror(code), *post->curl_error ? ": " : "", post->curl_error);
}

static int post_send(struct post *post, const char *body, double deadline, const char *outcome,
                     struct tr_notify_result *res, struct tr_diag *d)
{
    CURL *c = post->curl;
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    double began = now();
    for (int attempt = 1;; attempt++) {
        long left_ms = (long)((deadline - now()) * 1000);
        left_ms = left_ms < 1 ? 1 : left_ms;
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, left_ms);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, left_ms < CONNECT_TIMEOUT_MS ? left_ms : (long)CONNECT_TIMEOUT_MS);
        post->curl_error[0] = '\0';
        CURLcode code = tr_stop_requested() ? CURLE_ABORTED_BY_CALLBACK : curl_easy_perform(c);
        long http = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
        res->attempts = attempt;
        res->http_status = http;
        if (code == CURLE_OK && http >= 200 && http < 300) {
            res->delivered = true;
            return 0;
        }
        int sig = tr_stop_requested();
        if (sig)
            return tr_fail(d, TR_EINTERRUPTED, "notifying %s of the %s: stopped by signal %d (%s) after %.1f s",
                           post->where, outcome, sig, strsignal(sig), now() - began);
        double backoff = first_backoff * (double)(1 << (attempt - 1));
        if (attempt == MAX_ATTEMPTS || !worth_retrying(code, http) || deadline - now() < backoff + least_attempt) {
            char *why = attempt_error(post, code, http);
            char *msg = tr_strdup_printf("could not notify %s of the %s: %s (%d attempt%s in %.1f s)", post->where,
                                         outcome, why, attempt, attempt == 1 ? "" : "s", now() - began);
            msg = scrub(msg, &post->secrets);   /* before anyone sees it: no secrets */
            tr_fail(d, TR_EIO, "%s", msg);
            free(why);
            free(msg);
            return TR_EIO;
        }
        tr_stop_sleep(backoff);
    }
}

static bool listed(const struct tr_ints *on, int outcome)
{
    for (int i = 0; i < on->n; i++)
        if (on->v[i] == outcome)
            return true;
    return false;
}

int tr_notify(const struct tr_recipe *r, const char *run_dir, int exit_code, struct tr_notify_result *res,
              struct tr_diag *d)
{
    memset(res, 0, sizeof *res);
    int outcome = tr_notify_outcome(exit_code);
    if (!r->report.notify.url || outcome < 0 || !listed(&r->report.notify.on, outcome))
        return 0;
    double started = now(), deadline = started + r->report.notify.timeout;
    struct post post = {0};
    int rc = post_open(&post, r, d);
    if (!rc) {
        json_t *body = tr_notify_body(r, run_dir, exit_code);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (text)
            rc = post_send(&post, text, deadline, outcome_name(outcome), res, d);
        else
            rc = tr_fail(d, TR_ENOMEM, "cannot write the notification's JSON");
        free(text);
    }
    post_close(&post);
    res->seconds = now() - started;
    return rc;
}

int tr_notify_run_end(const struct tr_recipe *r, const char *run_dir, int exit_code)
{
    struct tr_notify_result res;
    struct tr_diag d = {0};
    struct tr_path path;
    int rc = tr_notify(r, run_dir, exit_code, &res, &d);
    if (rc == 0 && !res.delivered)
        return 0;
    FILE *log = NULL;
    if (run_dir && *run_dir && tr_path_set(&path, NULL, "%s/log.txt", run_dir) == 0)
        log = fopen(path.s, "a");
    if (rc) {
        fprintf(stderr, "trainrun: warning: %s\n", tr_diag_last(&d));
        if (log)
            fprintf(log, "warning: %s\n", tr_diag_last(&d));
    } else if (log) {
        char where[512];
        redact_webhook(r->report.notify.url, where, sizeof where);
        fprintf(log, "notified %s of the %s (HTTP %ld, %d attempt%s in %.1f s)\n", where,
                outcome_name(tr_notify_outcome(exit_code)), res.http_status, res.attempts,
                res.attempts == 1 ? "" : "s", res.seconds);
    }
    if (log)
        fclose(log);
    tr_diag_free(&d);
    return rc == TR_EINTERRUPTED ? rc : 0;
}
