/* Notifications (src/report/notify.c) against a webhook in this process, on loopback: which
 * exit statuses notify as what, the body read from a run folder's report.json (or made up
 * without one), a regression delivered with its header from the environment, a 500 tried
 * again, a refused connection given up within the timeout, and no secret in any message. */
#include "runner.h"
#include "unit.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#include "cli/exit.h"
#include "recipe/recipe.h"
#include "report/notify.h"

/* ---- a webhook: answers the given statuses in turn, keeping the last request ---------------- */

struct hook {
    int fd, port;
    int statuses[4], nstatuses;
    int served;
    char request[16384];
    pthread_t thread;
};

/* One request: the header, then Content-Length bytes of body. */
static size_t read_request(int c, char *buf, size_t cap)
{
    size_t len = 0;
    long want = -1;
    while (len + 1 < cap) {
        ssize_t n = recv(c, buf + len, cap - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end && want < 0) {
            const char *cl = strcasestr(buf, "Content-Length:");
            want = (long)(end + 4 - buf) + (cl ? strtol(cl + 15, NULL, 10) : 0);
        }
        if (want >= 0 && (long)len >= want)
            break;
    }
    buf[len] = '\0';
    return len;
}

static void *serve(void *arg)
{
    struct hook *h = arg;
    for (int i = 0; i < h->nstatuses; i++) {
        int c = accept(h->fd, NULL, NULL);
        if (c < 0)
            break;
        read_request(c, h->request, sizeof h->request);
        char answer[128];
        int n = snprintf(answer, sizeof answer, "HTTP/1.1 %d Test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                         h->statuses[i]);
        ck_assert_int_eq(send(c, answer, (size_t)n, 0), n);
        close(c);
        h->served++;
    }
    return NULL;
}

static void hook_start(struct hook *h, const int *statuses, int n)
{
    memset(h, 0, sizeof *h);
    memcpy(h->statuses, statuses, (size_t)n * sizeof *statuses);
    h->nstatuses = n;
    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(h->fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(h->fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(h->fd, 4), 0);
    ck_assert_int_eq(getsockname(h->fd, (struct sockaddr *)&a, &len), 0);
    h->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&h->thread, NULL, serve, h), 0);
}

static void hook_stop(struct hook *h)
{
    pthread_join(h->thread, NULL);
    close(h->fd);
}

/* A port nothing listens on: bound, then closed. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* ---- recipes and run folders -------------------------------------------------------------------- */

static void load(struct tr_recipe *r, const char *notify)
{
    char *yaml = tr_strdup_printf("name: nightly\nmodel: {arch: mlp}\ndata: {dataset: digits}\n"
                                  "report:\n  notify: %s\n", notify);
    struct tr_diag diag = {0};
    int rc = tr_recipe_load_string(r, yaml, strlen(yaml), "r.yaml", NULL, 0, &diag);
    char *text = unit_diag_text(&diag);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    tr_diag_free(&diag);
    free(yaml);
}

static const char report_json[] =
    "{\"schema_version\": 2, \"run\": \"20261129-020000\", \"name\": \"bert\", \"status\": \"finished\",\n"
    " \"exit_code\": 6, \"duration_seconds\": 812.5, \"steps\": 100,\n"
    " \"key_metric\": {\"name\": \"test/accuracy\", \"value\": 0.81, \"better\": \"higher\"},\n"
    " \"environment\": {\"host\": \"trainer-7\", \"recipe_sha256\": \"00\"},\n"
    " \"warnings\": [{\"kind\": \"data-bound\", \"message\": \"The steps waited for data.\"}]}\n";

static json_t *body_of(const char *request)
{
    const char *body = strstr(request, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    json_error_t e;
    json_t *j = json_loads(body + 4, 0, &e);
    ck_assert_msg(j != NULL, "the body is not JSON: %s (%s)", e.text, body + 4);
    return j;
}

static const char *field(json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* ---- the tests ------------------------------------------------------------------------------------ */

START_TEST(outcomes_of_exit_statuses)
{
    ck_assert_int_eq(tr_notify_outcome(TR_EXIT_OK), TR_NOTIFY_SUCCESS);
    ck_assert_int_eq(tr_notify_outcome(TR_EXIT_REGRESSION), TR_NOTIFY_REGRESSION);
    const int failures[] = {TR_EXIT_FAILURE, TR_EXIT_USAGE, TR_EXIT_NO_FIT, TR_EXIT_DATA, TR_EXIT_DIVERGED,
                            TR_EXIT_INTERRUPTED};
    for (size_t i = 0; i < sizeof failures / sizeof failures[0]; i++)
        ck_assert_int_eq(tr_notify_outcome(failures[i]), TR_NOTIFY_FAILURE);
    /* Nothing ran: the data had not changed, or another run held the lock. */
    ck_assert_int_eq(tr_notify_outcome(TR_EXIT_UNCHANGED), -1);
    ck_assert_int_eq(tr_notify_outcome(TR_EXIT_LOCKED), -1);
}
END_TEST

START_TEST(body_from_report_json)
{
    struct tr_recipe r;
    load(&r, "{url: 'http://127.0.0.1:1/'}");
    /* Reached through runs/NAME/latest, as `trainrun resume` often is: named by the folder. */
    char *top = unit_mkdtemp(), *dir = tr_strdup_printf("%s/latest", top);
    char *folder = tr_strdup_printf("%s/20261129-020000", top);
    ck_assert_int_eq(mkdir(folder, 0755), 0);
    ck_assert_int_eq(symlink("20261129-020000", dir), 0);
    free(unit_write_in(dir, "report.json", report_json));
    json_t *b = tr_notify_body(&r, dir, TR_EXIT_REGRESSION);
    ck_assert_str_eq(field(b, "recipe"), "bert");   /* the report's, as the run recorded it */
    ck_assert_str_eq(field(b, "run"), "20261129-020000");
    char real[4096];
    ck_assert_ptr_nonnull(realpath(folder, real));
    ck_assert_str_eq(field(b, "run_dir"), real);
    ck_assert_str_eq(field(b, "status"), "finished");
    ck_assert_int_eq(json_integer_value(json_object_get(b, "exit_code")), 6);
    ck_assert_str_eq(field(b, "outcome"), "regression");
    ck_assert_double_eq(json_number_value(json_object_get(b, "duration_seconds")), 812.5);
    ck_assert_str_eq(field(json_object_get(b, "key_metric"), "name"), "test/accuracy");
    ck_assert_int_eq(json_array_size(json_object_get(b, "warnings")), 1);
    ck_assert_str_eq(field(b, "host"), "trainer-7");
    ck_assert(json_is_null(json_object_get(b, "report")));   /* no report.html here */
    json_decref(b);
    free(unit_write_in(dir, "report.html", "<html></html>\n"));
    b = tr_notify_body(&r, dir, TR_EXIT_REGRESSION);
    char *html = tr_strdup_printf("%s/report.html", real);
    ck_assert_str_eq(field(b, "report"), html);
    free(html);
    /* The fields, in order: a receiver may print them as they come. */
    static const char *const keys[] = {"recipe", "run", "run_dir", "status", "exit_code", "outcome",
                                       "duration_seconds", "key_metric", "warnings", "host", "report"};
    ck_assert_int_eq(json_object_size(b), sizeof keys / sizeof keys[0]);
    size_t k = 0;
    for (void *it = json_object_iter(b); it; it = json_object_iter_next(b, it), k++)
        ck_assert_str_eq(json_object_iter_key(it), keys[k]);
    json_decref(b);
    unit_rmtree(top);
    free(top);
    free(folder);
    free(dir);
    tr_recipe_free(&r);
}
END_TEST

/* A run that failed before its folder existed (its data could not be fetched, say). */
START_TEST(body_without_run_folder)
{
    struct tr_recipe r;
    load(&r, "{url: 'http://127.0.0.1:1/'}");
    json_t *b = tr_notify_body(&r, NULL, TR_EXIT_DATA);
    ck_assert_str_eq(field(b, "recipe"), "nightly");
    ck_assert(json_is_null(json_object_get(b, "run")));
    ck_assert(json_is_null(json_object_get(b, "run_dir")));
    ck_assert_str_eq(field(b, "status"), "failed");
    ck_assert_str_eq(field(b, "outcome"), "failure");
    ck_assert(json_is_null(json_object_get(b, "key_metric")));
    ck_assert_int_eq(json_array_size(json_object_get(b, "warnings")), 0);
    ck_assert_ptr_nonnull(field(b, "host"));
    json_decref(b);
    tr_recipe_free(&r);
}
END_TEST

START_TEST(regression_delivered_with_header_from_env)
{
    struct hook h;
    hook_start(&h, (const int[]){200}, 1);
    char *dir = unit_mkdtemp();
    free(unit_write_in(dir, "report.json", report_json));
    setenv("CHECK_NOTIFY_AUTH", "Authorization: Bearer tok-4711", 1);
    char *notify = tr_strdup_printf("{url: 'http://127.0.0.1:%d/hook', headers_from_env: [CHECK_NOTIFY_AUTH]}", h.port);
    struct tr_recipe r;
    load(&r, notify);   /* on: [failure, regression], the default */
    struct tr_notify_result res;
    struct tr_diag err = {0};
    ck_assert_msg(tr_notify(&r, dir, TR_EXIT_REGRESSION, &res, &err) == 0, "%s", tr_diag_last(&err));
    hook_stop(&h);
    ck_assert(res.delivered);
    ck_assert_int_eq(res.attempts, 1);
    ck_assert_int_eq(res.http_status, 200);
    ck_assert_msg(!strncmp(h.request, "POST /hook HTTP/1.1\r\n", 21), "%s", h.request);
    ck_assert_ptr_nonnull(strcasestr(h.request, "\r\nContent-Type: application/json\r\n"));
    ck_assert_ptr_nonnull(strstr(h.request, "\r\nAuthorization: Bearer tok-4711\r\n"));
    json_t *b = body_of(h.request);
    ck_assert_str_eq(field(b, "outcome"), "regression");
    ck_assert_str_eq(field(b, "recipe"), "bert");
    json_decref(b);
    unsetenv("CHECK_NOTIFY_AUTH");
    tr_recipe_free(&r);
    free(notify);
    unit_rmtree(dir);
    free(dir);
    tr_diag_free(&err);
}
END_TEST

START_TEST(server_error_tried_again)
{
    struct hook h;
    hook_start(&h, (const int[]){500, 503, 200}, 3);
    char *notify = tr_strdup_printf("{url: 'http://127.0.0.1:%d/', on: [failure]}", h.port);
    struct tr_recipe r;
    load(&r, notify);
    struct tr_notify_result res;
    struct tr_diag err = {0};
    ck_assert_msg(tr_notify(&r, NULL, TR_EXIT_DIVERGED, &res, &err) == 0, "%s", tr_diag_last(&err));
    hook_stop(&h);
    ck_assert(res.delivered);
    ck_assert_int_eq(res.attempts, 3);
    ck_assert_int_eq(h.served, 3);
    ck_assert_msg(res.seconds >= 1.4, "0.5 s, then 1 s between attempts; took %.2f s", res.seconds);
    tr_recipe_free(&r);
    free(notify);
    tr_diag_free(&err);
}
END_TEST

/* A 4xx says the request is wrong: sending it again would not help. */
START_TEST(client_error_not_tried_again)
{
    struct hook h;
    hook_start(&h, (const int[]){404}, 1);
    char *notify = tr_strdup_printf("{url: 'http://127.0.0.1:%d/x', on: [failure]}", h.port);
    struct tr_recipe r;
    load(&r, notify);
    struct tr_notify_result res;
    struct tr_diag err = {0};
    ck_assert_int_lt(tr_notify(&r, NULL, TR_EXIT_FAILURE, &res, &err), 0);
    hook_stop(&h);
    ck_assert_int_eq(res.attempts, 1);
    ck_assert_msg(strstr(tr_diag_last(&err), "the server answered HTTP 404 (1 attempt"), "%s", tr_diag_last(&err));
    tr_recipe_free(&r);
    free(notify);
    tr_diag_free(&err);
}
END_TEST

START_TEST(outcome_not_listed_sends_nothing)
{
    struct tr_recipe r;
    load(&r, "{url: 'http://127.0.0.1:1/'}");   /* on: [failure, regression] */
    struct tr_notify_result res;
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_notify(&r, NULL, TR_EXIT_OK, &res, &err), 0);
    ck_assert(!res.delivered);
    ck_assert_int_eq(res.attempts, 0);
    ck_assert_int_eq(tr_notify(&r, NULL, TR_EXIT_LOCKED, &res, &err), 0);
    ck_assert_int_eq(res.attempts, 0);
    tr_recipe_free(&r);
    load(&r, "null");   /* off */
    ck_assert_int_eq(tr_notify(&r, NULL, TR_EXIT_FAILURE, &res, &err), 0);
    ck_assert_int_eq(res.attempts, 0);
    tr_recipe_free(&r);
    tr_diag_free(&err);
}
END_TEST

/* A variable not set, or not holding a header line: nothing is sent, the message names the
 * variable and never shows its value. */
START_TEST(bad_header_variables)
{
    struct tr_recipe r;
    load(&r, "{url: 'http://127.0.0.1:1/', on: [failure], headers_from_env: [CHECK_NOTIFY_UNSET]}");
    unsetenv("CHECK_NOTIFY_UNSET");
    struct tr_notify_result res;
    struct tr_diag err = {0};
    ck_assert_int_lt(tr_notify(&r, NULL, TR_EXIT_FAILURE, &res, &err), 0);
    ck_assert_int_eq(res.attempts, 0);
    ck_assert_str_eq(tr_diag_last(&err), "report.notify.headers_from_env: $CHECK_NOTIFY_UNSET is not set; nothing was sent "
                          "to http://127.0.0.1:1");
    tr_recipe_free(&r);
    static const char *const bad[] = {"Bearer tok-4711", "Authorization: tok-4711\r\nX-Evil: 1",
                                      "Bad Name: tok-4711", ": tok-4711", "Authorization:   "};
    load(&r, "{url: 'http://127.0.0.1:1/', on: [failure], headers_from_env: [CHECK_NOTIFY_BAD]}");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("CHECK_NOTIFY_BAD", bad[i], 1);
        ck_assert_int_lt(tr_notify(&r, NULL, TR_EXIT_FAILURE, &res, &err), 0);
        ck_assert_int_eq(res.attempts, 0);
        ck_assert_msg(strstr(tr_diag_last(&err), "$CHECK_NOTIFY_BAD does not hold a header line 'Name: value'"), "%s", tr_diag_last(&err));
        ck_assert_msg(!strstr(tr_diag_last(&err), "tok-4711"), "the value shown: %s", tr_diag_last(&err));
    }
    unsetenv("CHECK_NOTIFY_BAD");
    tr_recipe_free(&r);
    tr_diag_free(&err);
}
END_TEST

/* Nothing listens: three attempts, 0.5 s and 1 s apart, well within the timeout; the message
 * shows neither the URL's token nor the header's. */
START_TEST(refused_given_up_without_secrets)
{
    setenv("CHECK_NOTIFY_AUTH", "X-Token: tok-4711", 1);
    char *notify = tr_strdup_printf("{url: 'http://bob:pw-4711@127.0.0.1:%d/hooks/abc4711?token=SECRET', "
                                    "on: [failure], timeout: 5s, headers_from_env: [CHECK_NOTIFY_AUTH]}",
                                    closed_port());
    struct tr_recipe r;
    load(&r, notify);
    struct tr_notify_result res;
    struct tr_diag err = {0};
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_lt(tr_notify(&r, NULL, TR_EXIT_FAILURE, &res, &err), 0);
    double took = seconds_since(&t0);
    ck_assert_int_eq(res.attempts, 3);
    ck_assert_msg(took >= 1.4 && took < 5, "took %.2f s", took);
    ck_assert_msg(strstr(tr_diag_last(&err), "could not notify http://***@127.0.0.1:") && strstr(tr_diag_last(&err), "/…?*** of the failure: "),
                  "%s", tr_diag_last(&err));
    static const char *const secrets[] = {"SECRET", "tok-4711", "pw-4711", "abc4711", "bob"};
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
        ck_assert_msg(!strstr(tr_diag_last(&err), secrets[i]), "'%s' shown: %s", secrets[i], tr_diag_last(&err));
    unsetenv("CHECK_NOTIFY_AUTH");
    tr_recipe_free(&r);
    free(notify);
    tr_diag_free(&err);
}
END_TEST

/* A webhook that accepts and never answers holds the run for the timeout, not longer. */
START_TEST(hanging_webhook_bounded_by_timeout)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 4), 0);   /* the kernel accepts; nobody reads or answers */
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char *notify = tr_strdup_printf("{url: 'http://127.0.0.1:%d/', on: [failure], timeout: 1s}", ntohs(a.sin_port));
    struct tr_recipe r;
    load(&r, notify);
    struct tr_notify_result res;
    struct tr_diag err = {0};
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_lt(tr_notify(&r, NULL, TR_EXIT_FAILURE, &res, &err), 0);
    double took = seconds_since(&t0);
    ck_assert_msg(took >= 0.9 && took < 1.5, "took %.2f s for a 1 s timeout", took);
    ck_assert_msg(strstr(tr_diag_last(&err), "Timeout was reached"), "%s", tr_diag_last(&err));
    close(fd);
    tr_recipe_free(&r);
    free(notify);
    tr_diag_free(&err);
}
END_TEST

int main(void)
{
    static const char *const proxies[] = {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"};
    for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++)   /* loopback is reached directly */
        unsetenv(proxies[i]);
    Suite *s = suite_create("notify");
    TCase *tc = tcase_create("notify");
    tcase_add_test(tc, outcomes_of_exit_statuses);
    tcase_add_test(tc, body_from_report_json);
    tcase_add_test(tc, body_without_run_folder);
    tcase_add_test(tc, regression_delivered_with_header_from_env);
    tcase_add_test(tc, server_error_tried_again);
    tcase_add_test(tc, client_error_not_tried_again);
    tcase_add_test(tc, outcome_not_listed_sends_nothing);
    tcase_add_test(tc, bad_header_variables);
    tcase_add_test(tc, refused_given_up_without_secrets);
    tcase_add_test(tc, hanging_webhook_bounded_by_timeout);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
