/* Unit tests of the download cache (src/data/fetch.c) without a network: a URL's cache name,
 * the metadata file's round trip and its refusals, the backoff schedule and its environment,
 * which schemes are fetched, and whole fetches of file:// URLs: the copy and its metadata, a
 * pinned mismatch that leaves the cache byte for byte as it was, a changed pin that fetches
 * again, never an executable file; and data-sources.json (src/data/sources.c), when two runs
 * read the same data. tests/fetch.sh covers HTTP against a loopback server. */
#include "runner.h"
#include <stdbool.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "data/fetch.h"
#include "data/sha256.h"
#include "unit.h"

START_TEST(cache_names)
{
    char *a = tr_fetch_cache_name("https://example.org/data/train.csv.gz?token=1#x");
    char hex[65];
    const char *url = "https://example.org/data/train.csv.gz?token=1#x";
    tr_sha256_of(url, strlen(url), hex);
    char *want = tr_strdup_printf("%.32s-train.csv.gz", hex);
    ck_assert_str_eq(a, want);
    free(want);
    char *b = tr_fetch_cache_name("https://example.org/data/train.csv.gz?token=2");
    ck_assert_str_ne(a, b);                               /* another URL, another file */
    ck_assert_str_eq(a + 32, b + 32);                     /* one readable name */
    free(a);
    free(b);
    const struct { const char *url, *tail; } cases[] = {
        {"https://example.org", "-download"},
        {"https://example.org/", "-download"},
        {"https://example.org/a b/c d%20e.csv", "-c_d_20e.csv"},
        {"https://example.org/..", "-_.."},
        {"https://example.org/.hidden", "-_.hidden"},
        {"file:///srv/data/x.tsv", "-x.tsv"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *name = tr_fetch_cache_name(cases[i].url);
        ck_assert_msg(strlen(name) > 32 && !strcmp(name + 32, cases[i].tail), "%s → %s", cases[i].url, name);
        ck_assert_ptr_null(strchr(name, '/'));
        free(name);
    }
    char long_url[400] = "https://example.org/";
    memset(long_url + strlen(long_url), 'x', 300);
    char *name = tr_fetch_cache_name(long_url);
    ck_assert_uint_eq(strlen(name), 32 + 1 + 64);         /* a name fits any file system */
    free(name);
}
END_TEST

START_TEST(schemes)
{
    ck_assert(tr_fetch_scheme_allowed("https://example.org/x"));
    ck_assert(tr_fetch_scheme_allowed("HTTP://example.org/x"));
    ck_assert(tr_fetch_scheme_allowed("file:///x"));
    ck_assert(!tr_fetch_scheme_allowed("ftp://example.org/x"));
    ck_assert(!tr_fetch_scheme_allowed("scp://example.org/x"));
    ck_assert(!tr_fetch_scheme_allowed("/x"));
    ck_assert(tr_fetch_is_url("ftp://example.org/x"));
    ck_assert(tr_fetch_is_url("git+ssh://example.org/x"));
    ck_assert(!tr_fetch_is_url("data/x.csv"));
    ck_assert(!tr_fetch_is_url("a:b/c"));
    ck_assert(!tr_fetch_is_url("://x"));
    struct tr_fetch_options o;
    ck_assert_int_eq(tr_fetch_options_from_env(&o, 0, NULL, NULL), 0);
    struct tr_fetch_result res;
    struct tr_diag diag = {0}, warnings = {0};
    ck_assert_int_eq(tr_fetch("ftp://example.org/x", NULL, NULL, "/nonexistent", &o, &res, &diag, &warnings),
                     TR_EINVAL);
    char *text = unit_diag_text(&diag);
    ck_assert_str_eq(text, "ftp://example.org/x: trainrun fetches https://, http:// and file:// URLs only\n");
    free(text);
    ck_assert_ptr_null(res.path);
    tr_diag_free(&diag);
}
END_TEST

START_TEST(backoff_schedule)
{
    unsetenv("TRAINRUN_FETCH_BACKOFF");
    unsetenv("TRAINRUN_FETCH_RETRIES");
    unsetenv("TRAINRUN_FETCH_TIMEOUT");
    unsetenv("TRAINRUN_FETCH_MAX_BYTES");
    struct tr_fetch_options o;
    ck_assert_int_eq(tr_fetch_options_from_env(&o, 123, "data.max_download", NULL), 0);
    ck_assert_int_eq(o.timeout, 30);
    ck_assert_int_eq(o.retries, 4);
    ck_assert_int_eq(o.max_bytes, 123);
    ck_assert_str_eq(o.max_bytes_from, "data.max_download");
    const double want[] = {2, 4, 8, 16, 32, 60, 60};
    for (int i = 0; i < 7; i++)
        ck_assert_double_eq(tr_fetch_backoff(&o, i), want[i]);
    ck_assert_double_eq(tr_fetch_backoff(&o, 1000), 60);   /* no overflow */
    setenv("TRAINRUN_FETCH_BACKOFF", "0.5", 1);
    setenv("TRAINRUN_FETCH_RETRIES", "0", 1);
    setenv("TRAINRUN_FETCH_MAX_BYTES", "1000", 1);
    ck_assert_int_eq(tr_fetch_options_from_env(&o, 123, "data.max_download", NULL), 0);
    ck_assert_double_eq(tr_fetch_backoff(&o, 0), 0.5);
    ck_assert_double_eq(tr_fetch_backoff(&o, 3), 4);
    ck_assert_int_eq(o.retries, 0);
    ck_assert_int_eq(o.timeout, 30);
    ck_assert_int_eq(o.max_bytes, 1000);   /* the variable wins over the recipe's cap */
    ck_assert_str_eq(o.max_bytes_from, "TRAINRUN_FETCH_MAX_BYTES");
    unsetenv("TRAINRUN_FETCH_BACKOFF");
    unsetenv("TRAINRUN_FETCH_RETRIES");
    unsetenv("TRAINRUN_FETCH_MAX_BYTES");
}
END_TEST

/* A value the variable cannot mean is refused with its name, its value and the range: never
 * remapped to a default in silence (a cron job's "RETRIES=-1" once meant 4 retries). */
START_TEST(invalid_environment_refused)
{
    static const char *const cases[][3] = {
        {"TRAINRUN_FETCH_RETRIES", "-1", "TRAINRUN_FETCH_RETRIES=-1: not a whole number from 0 to 100"},
        {"TRAINRUN_FETCH_RETRIES", "abc", "TRAINRUN_FETCH_RETRIES=abc: not a whole number from 0 to 100"},
        {"TRAINRUN_FETCH_RETRIES", "2.5", "TRAINRUN_FETCH_RETRIES=2.5: not a whole number from 0 to 100"},
        {"TRAINRUN_FETCH_RETRIES", "1e9", "TRAINRUN_FETCH_RETRIES=1e9: not a whole number from 0 to 100"},
        {"TRAINRUN_FETCH_RETRIES", "3x", "TRAINRUN_FETCH_RETRIES=3x: not a whole number from 0 to 100"},
        {"TRAINRUN_FETCH_TIMEOUT", "0", "TRAINRUN_FETCH_TIMEOUT=0: not a number from 1 to 86400"},
        {"TRAINRUN_FETCH_TIMEOUT", "nan", "TRAINRUN_FETCH_TIMEOUT=nan: not a number from 1 to 86400"},
        {"TRAINRUN_FETCH_BACKOFF", "-2", "TRAINRUN_FETCH_BACKOFF=-2: not a number from 0 to 3600"},
        {"TRAINRUN_FETCH_MAX_BYTES", "10GiB", "TRAINRUN_FETCH_MAX_BYTES=10GiB: not a whole number from 0 to"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i][0], cases[i][1], 1);
        struct tr_fetch_options o;
        struct tr_diag d = {0};
        ck_assert_int_eq(tr_fetch_options_from_env(&o, 0, NULL, &d), TR_EINVAL);
        ck_assert_msg(strstr(tr_diag_last(&d), cases[i][2]), "%s", tr_diag_last(&d));
        tr_diag_free(&d);
        unsetenv(cases[i][0]);
    }
    setenv("TRAINRUN_FETCH_RETRIES", "100", 1);   /* the ends of the range are valid */
    struct tr_fetch_options o;
    ck_assert_int_eq(tr_fetch_options_from_env(&o, 0, NULL, NULL), 0);
    ck_assert_int_eq(o.retries, 100);
    setenv("TRAINRUN_FETCH_RETRIES", "", 1);      /* set but empty: the default */
    ck_assert_int_eq(tr_fetch_options_from_env(&o, 0, NULL, NULL), 0);
    ck_assert_int_eq(o.retries, 4);
    unsetenv("TRAINRUN_FETCH_RETRIES");
}
END_TEST

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tr_strdup("(missing)");
    char *buf = tr_xcalloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(metadata_round_trip)
{
    char *dir = unit_mkdtemp(), *path = tr_strdup_printf("%s/x.json", dir);
    struct tr_fetch_meta m = {.url = "https://example.org/x", .etag = "\"abc\"", .bytes = 12345,
                              .fetched = "2026-11-29T20:00:00Z"};
    memset(m.sha256, 'a', 64);
    ck_assert_int_eq(tr_fetch_meta_write(path, &m), 0);
    struct tr_fetch_meta r;
    ck_assert_int_eq(tr_fetch_meta_read(path, &r), 0);
    ck_assert_str_eq(r.url, m.url);
    ck_assert_str_eq(r.etag, m.etag);
    ck_assert_ptr_null(r.last_modified);
    ck_assert_str_eq(r.sha256, m.sha256);
    ck_assert_int_eq(r.bytes, 12345);
    ck_assert_str_eq(r.fetched, m.fetched);
    tr_fetch_meta_free(&r);
    const char *bad[] = {"", "[]", "{\"url\": \"u\", \"sha256\": \"short\", \"bytes\": 1}",
                         "{\"sha256\": \"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "\", \"bytes\": 1}",
                         "{\"url\": \"u\", \"sha256\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unit_write(path, bad[i]);
        ck_assert_int_eq(tr_fetch_meta_read(path, &r), -1);
        ck_assert_ptr_null(r.url);
    }
    ck_assert_int_eq(tr_fetch_meta_read("/nonexistent/x.json", &r), -1);

    /* A URL with credentials is written without them, to a file only its owner reads. */
    m.url = "https://bob:hunter2@example.org/x.csv?token=T0K3N&v=2";
    ck_assert_int_eq(tr_fetch_meta_write(path, &m), 0);
    ck_assert_int_eq(tr_fetch_meta_read(path, &r), 0);
    ck_assert_str_eq(r.url, "https://***@example.org/x.csv?token=***&v=2");
    tr_fetch_meta_free(&r);
    char *text = slurp(path);
    ck_assert_msg(!strstr(text, "hunter2") && !strstr(text, "T0K3N") && !strstr(text, "bob"), "%s", text);
    free(text);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    unit_rmtree(dir);
    free(dir);
    free(path);
}
END_TEST


START_TEST(file_urls_are_fetched_and_verified)
{
    char *dir = unit_mkdtemp(), *cache = tr_strdup_printf("%s/downloads", dir);
    char *source = unit_write_in(dir, "data.csv", "1,2,0\n3,4,1\n");
    char *url = tr_strdup_printf("file://%s", source), hex[65], *name = tr_fetch_cache_name(url);
    char *copy = tr_strdup_printf("%s/%s", cache, name), *meta = tr_strdup_printf("%s.json", copy);
    tr_sha256_of("1,2,0\n3,4,1\n", 12, hex);
    struct tr_fetch_options o;
    ck_assert_int_eq(tr_fetch_options_from_env(&o, 0, NULL, NULL), 0);
    o.retries = 0;
    struct tr_fetch_result res;
    struct tr_diag diag = {0}, warnings = {0};

    /* Unpinned: copied, hashed, recorded; never executable. */
    ck_assert_int_eq(tr_fetch(url, NULL, NULL, cache, &o, &res, &diag, &warnings), 0);
    ck_assert_str_eq(res.path, copy);
    ck_assert_str_eq(res.meta.sha256, hex);
    ck_assert_int_eq(res.meta.bytes, 12);
    ck_assert(res.downloaded);
    struct stat st;
    ck_assert_int_eq(stat(copy, &st), 0);
    ck_assert_int_eq(st.st_mode & 0111, 0);
    char *text = slurp(copy);
    ck_assert_str_eq(text, "1,2,0\n3,4,1\n");
    free(text);
    tr_fetch_result_free(&res);

    /* The file changed, the pin is the old content: a data error; the cache as it was. */
    unit_write(source, "9,9,1\n");
    char *copy_before = slurp(copy), *meta_before = slurp(meta);
    ck_assert_int_eq(tr_fetch(url, hex, "d.yaml:3:9", cache, &o, &res, &diag, &warnings), TR_EINVAL);
    text = unit_diag_text(&diag);
    char new_hex[65];
    tr_sha256_of("9,9,1\n", 6, new_hex);
    char *want = tr_strdup_printf("%s: sha256 mismatch: expected %s (d.yaml:3:9), got %s; the download was "
                                  "deleted and the cached copy left as it was\n", url, hex, new_hex);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    tr_diag_free(&diag);
    ck_assert_ptr_null(res.path);
    char *copy_after = slurp(copy), *meta_after = slurp(meta);
    ck_assert_str_eq(copy_after, copy_before);
    ck_assert_str_eq(meta_after, meta_before);
    free(copy_after), free(meta_after), free(copy_before), free(meta_before);
    char *part = tr_strdup_printf("%s.part", copy);
    ck_assert_int_ne(access(part, F_OK), 0);   /* the new bytes are gone */

    /* Pinned right: the new content replaces the copy. */
    ck_assert_int_eq(tr_fetch(url, new_hex, "d.yaml:3:9", cache, &o, &res, &diag, &warnings), 0);
    ck_assert_str_eq(res.meta.sha256, new_hex);
    text = slurp(copy);
    ck_assert_str_eq(text, "9,9,1\n");
    free(text);
    tr_fetch_result_free(&res);

    /* A damaged copy is not trusted: fetched again. */
    unit_write(copy, "damaged");
    ck_assert_int_eq(tr_fetch(url, NULL, NULL, cache, &o, &res, &diag, &warnings), 0);
    text = slurp(copy);
    ck_assert_str_eq(text, "9,9,1\n");
    free(text);
    tr_fetch_result_free(&res);

    /* A source that is not there: an error naming it, no retry for a file. */
    unlink(source);
    ck_assert_int_ne(tr_fetch(url, NULL, NULL, cache, &o, &res, &diag, &warnings), 0);
    text = unit_diag_text(&diag);
    ck_assert_msg(strstr(text, url) != NULL, "%s", text);
    free(text);
    tr_diag_free(&diag);
    tr_diag_free(&warnings);
    unit_rmtree(dir);
    free(dir), free(cache), free(source), free(url), free(name), free(copy), free(meta), free(part);
}
END_TEST

/* data-sources.json: what a run records, and when two of them name the same data. */
START_TEST(data_sources_compare)
{
    struct tr_data_origin origins[2] = {
        {.source = "https://example.org/a.csv", .path = "/c/a.csv", .etag = "\"1\""},
        {.source = "b.csv", .path = "b.csv"},
    };
    memset(origins[0].sha256, 'a', 64);
    memset(origins[1].sha256, 'b', 64);
    struct tr_data d = {.origins = origins, .norigins = 2, .name = "set"};
    json_t *j = tr_data_sources_json(&d);
    char *text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *want = tr_strdup_printf("{\"version\":1,\"dataset\":\"set\",\"sources\":["
                                  "{\"source\":\"https://example.org/a.csv\",\"path\":\"/c/a.csv\",\"sha256\":\"%.64s\","
                                  "\"etag\":\"\\\"1\\\"\",\"last_modified\":null},"
                                  "{\"source\":\"b.csv\",\"path\":\"b.csv\",\"sha256\":\"%.64s\",\"etag\":null,"
                                  "\"last_modified\":null}]}", origins[0].sha256, origins[1].sha256);
    ck_assert_str_eq(text, want);
    free(text);
    free(want);

    /* The same files in another order, with another ETag and path: the same data. */
    struct tr_data_origin swapped[2] = {origins[1], origins[0]};
    swapped[1].etag = "\"2\"";
    swapped[1].path = "/elsewhere/a.csv";
    struct tr_data e = {.origins = swapped, .norigins = 2};
    json_t *k = tr_data_sources_json(&e);
    ck_assert(tr_data_sources_same(j, k));
    json_decref(k);

    /* Another hash, one file fewer, one more, nothing at all: changed. */
    swapped[0].sha256[0] = 'c';
    k = tr_data_sources_json(&e);
    ck_assert(!tr_data_sources_same(j, k));
    json_decref(k);
    e.norigins = 1;
    k = tr_data_sources_json(&e);
    ck_assert(!tr_data_sources_same(j, k) && !tr_data_sources_same(k, j));
    json_decref(k);
    e.norigins = 0;
    k = tr_data_sources_json(&e);
    ck_assert(!tr_data_sources_same(k, k));
    json_decref(k);
    /* A URL's credentials never reach the file. */
    struct tr_data_origin secret = {.source = "https://u:pw@example.org/a.csv?X-Amz-Signature=S1G&n=1", .path = "/c/a"};
    memset(secret.sha256, 'a', 64);
    struct tr_data s1 = {.origins = &secret, .norigins = 1, .name = "set"};
    k = tr_data_sources_json(&s1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(k, "sources"), 0), "source")),
                     "https://***@example.org/a.csv?X-Amz-Signature=***&n=1");
    json_decref(k);
    json_t *junk = json_pack("{s[{ss}]}", "sources", "source", "b.csv");   /* no sha256 */
    ck_assert(!tr_data_sources_same(junk, junk));
    ck_assert(!tr_data_sources_same(NULL, j));
    json_decref(junk);
    json_decref(j);
}
END_TEST

static Suite *fetch_suite(void)
{
    Suite *s = suite_create("fetch");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, cache_names);
    tcase_add_test(tc, schemes);
    tcase_add_test(tc, backoff_schedule);
    tcase_add_test(tc, invalid_environment_refused);
    tcase_add_test(tc, metadata_round_trip);
    tcase_add_test(tc, data_sources_compare);
    suite_add_tcase(s, tc);
    tc = tcase_create("file");
    tcase_add_test(tc, file_urls_are_fetched_and_verified);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(fetch_suite());
}
