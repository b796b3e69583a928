/* Unit tests of URL redaction (src/core/url.c): a data URL keeps its path and its harmless
 * parameters while user:password@ and secret parameters become ***; a webhook's URL keeps only
 * its scheme, host and port; what is not a URL passes unchanged (data) or is named as such
 * (webhook). */
#include "runner.h"

#include "core/url.h"
#include "unit.h"

/* Each URL, redacted one way, and what it must show. */
static const struct {
    const char *url, *want;
    enum tr_url_redaction how;
} cases[] = {
    {"https://example.org/iris.csv", "https://example.org/iris.csv", TR_URL_CREDENTIALS},
    {"http://user:pw@host/x?token=abc", "http://***@host/x?token=***", TR_URL_CREDENTIALS},
    {"http://user@host:8080/x", "http://***@host:8080/x", TR_URL_CREDENTIALS},
    {"https://u:p@ss@host/x", "https://***@host/x", TR_URL_CREDENTIALS},   /* the last '@' ends the user */
    {"https://h/x?a=1&TOKEN=t&b=2", "https://h/x?a=1&TOKEN=***&b=2", TR_URL_CREDENTIALS},
    {"https://h/x?key=k;sig=s;x=1", "https://h/x?key=***;sig=***;x=1", TR_URL_CREDENTIALS},
    {"https://s3.example/b/o?X-Amz-Signature=abc&X-Amz-Date=1",
     "https://s3.example/b/o?X-Amz-Signature=***&X-Amz-Date=1", TR_URL_CREDENTIALS},
    {"https://h/x?refresh_token=r&monkey=m&keyboard=k", "https://h/x?refresh_token=***&monkey=m&keyboard=k",
     TR_URL_CREDENTIALS},
    {"https://h/x?tok%65n=abc", "https://h/x?tok%65n=***", TR_URL_CREDENTIALS},   /* what the server decodes */
    {"https://h/x#access_token=t&state=1", "https://h/x#access_token=***&state=1", TR_URL_CREDENTIALS},
    {"https://h/x?token", "https://h/x?token", TR_URL_CREDENTIALS},   /* no value: nothing to hide */
    {"https://h/x?", "https://h/x?", TR_URL_CREDENTIALS},
    {"https://h/a@b/c", "https://h/a@b/c", TR_URL_CREDENTIALS},   /* an '@' in the path is no user */
    {"file:///data/x.csv", "file:///data/x.csv", TR_URL_CREDENTIALS},
    {"datasets/iris/iris.csv", "datasets/iris/iris.csv", TR_URL_CREDENTIALS},
    {"", "", TR_URL_CREDENTIALS},
    {"https://hooks.example/services/T0/B0/XYZ?token=SECRET", "https://hooks.example/…?***", TR_URL_WEBHOOK},
    {"http://user:pw@hooks.example:8080/", "http://***@hooks.example:8080", TR_URL_WEBHOOK},
    {"https://hooks.example", "https://hooks.example", TR_URL_WEBHOOK},
    {"http://127.0.0.1:9/#frag", "http://127.0.0.1:9#***", TR_URL_WEBHOOK},
    {"http://[::1]:81/a", "http://[::1]:81/…", TR_URL_WEBHOOK},
    {"not a URL", "<a URL that does not parse>", TR_URL_WEBHOOK},
    {"http://user@/x", "<a URL that does not parse>", TR_URL_WEBHOOK},
};

START_TEST(redactions)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = tr_url_redact(cases[i].url, cases[i].how);
        ck_assert_msg(!strcmp(got, cases[i].want), "%s: got %s, want %s", cases[i].url, got, cases[i].want);
        free(got);
    }
}
END_TEST

START_TEST(secret_names)
{
    const char *yes[] = {"token", "KEY", "Sig", "x.signature", "my-secret", "API_KEY", "access_token"};
    const char *no[] = {"tokens", "keys", "monkey", "design", "v", "", "signatures"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        ck_assert_msg(tr_url_param_is_secret(yes[i], strlen(yes[i])), "%s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ck_assert_msg(!tr_url_param_is_secret(no[i], strlen(no[i])), "%s", no[i]);
}
END_TEST

static Suite *url_suite(void)
{
    Suite *s = suite_create("url");
    TCase *tc = tcase_create("redaction");
    tcase_add_test(tc, redactions);
    tcase_add_test(tc, secret_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(url_suite());
}
