/* The runs index (src/report/index.c) on a runs folder written here: what kind of folder each
 * level is, the rows and their order, links only to reports that are there, the trend, text
 * escaped in HTML, report.json files that are broken or hold nulls, and the same bytes when
 * written twice. tests/index.sh runs the same through the binary. */
#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/index.h"

static void mkdirs(const char *root, const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static char *slurp(const char *root, const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s was not written", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = 0;
    fclose(f);
    return text;
}

static void remove_tree(const char *root)
{
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    ck_assert_int_eq(system(command), 0);
}

#define RUN(stamp, status, value) \
    "{\"run\": \"" stamp "\", \"status\": \"" status "\", \"exit_code\": 0, \"duration_seconds\": 60," \
    " \"key_metric\": {\"name\": \"test/accuracy\", \"value\": " value ", \"better\": \"higher\"}}"

/* Two recipes: a, whose newest run failed, and <b>, all finished; a folder that is no recipe. */
static void make_runs(char root[64])
{
    snprintf(root, 64, "/tmp/check_report_index.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    mkdirs(root, "a");
    mkdirs(root, "a/20261101-100000");
    mkdirs(root, "a/20261102-100000");
    mkdirs(root, "a/20261103-100000");
    put(root, "a/20261101-100000/report.json", RUN("20261101-100000", "finished", "0.5"));
    put(root, "a/20261101-100000/report.html", "<p>a</p>");
    put(root, "a/20261102-100000/report.json", RUN("20261102-100000", "finished", "0.6"));
    put(root, "a/20261103-100000/report.json", "{\"status\": \"failed\", \"exit_code\": 5, \"key_metric\": null,"
                                               " \"plan\": null, \"duration_seconds\": null}");
    mkdirs(root, "<b>");   /* a name HTML must escape and a URL encode */
    mkdirs(root, "<b>/20261101-090000");
    put(root, "<b>/20261101-090000/report.json", "{\"truncated\": ");
    put(root, "<b>/20261101-090000/metrics.jsonl", "");
    put(root, "<b>/20261101-090000/report.md", "# b");
    mkdirs(root, "empty");
    mkdirs(root, "empty/nothing");
}

START_TEST(folder_kinds)
{
    char root[64], path[128];
    make_runs(root);
    ck_assert_int_eq(tr_folder_kind(root), TR_FOLDER_RUNS);
    snprintf(path, sizeof path, "%s/a", root);
    ck_assert_int_eq(tr_folder_kind(path), TR_FOLDER_RECIPE);
    snprintf(path, sizeof path, "%s/a/20261101-100000", root);
    ck_assert_int_eq(tr_folder_kind(path), TR_FOLDER_RUN);
    snprintf(path, sizeof path, "%s/empty", root);
    ck_assert_int_eq(tr_folder_kind(path), TR_FOLDER_OTHER);
    ck_assert_int_eq(tr_folder_kind("/nonexistent/folder"), TR_FOLDER_OTHER);
    remove_tree(root);
}
END_TEST

START_TEST(index_rows_and_trend)
{
    char root[64];
    struct tr_diag err = {0};
    make_runs(root);
    ck_assert_int_eq(tr_runs_index_write(root, &err), 0);
    char *md = slurp(root, "index.md"), *html = slurp(root, "index.html");
    ck_assert_ptr_nonnull(strstr(md, "2 recipes, 4 runs. The newest run of 2 recipes did not finish or regressed.\n"));
    ck_assert_ptr_null(strstr(md, "empty"));
    /* The failed recipe first in the summary; its runs newest first. */
    char *a = strstr(md, "| a | 20261103-100000 | failed |"), *b = strstr(md, "| <b> | [20261101-090000](<b>/20261101-090000/report.md) |");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert(a < b);
    char *newest = strstr(md, "| 20261103-100000 |"), *oldest = strstr(md, "| 20261101-100000 |");
    ck_assert_ptr_nonnull(newest);
    ck_assert_ptr_nonnull(oldest);
    ck_assert(newest < oldest);
    ck_assert_ptr_nonnull(strstr(md, "| 60 % | +10 (+20.0 %) |"));
    ck_assert_ptr_nonnull(strstr(md, "Trend: ▁█ test/accuracy (higher is better) over 2 runs: 50 % → 60 %\n"));
    /* A report.json that does not parse is no report. */
    ck_assert_ptr_nonnull(strstr(md, "(<b>/20261101-090000/report.md) |  | unknown (no report) |"));
    /* HTML: a link only where report.html is, the folder name encoded in the URL and escaped. */
    ck_assert_ptr_nonnull(strstr(html, "<a href=\"a/20261101-100000/report.html\">20261101-100000</a>"));
    ck_assert_ptr_null(strstr(html, "a/20261102-100000/report"));
    ck_assert_ptr_nonnull(strstr(html, "<h2 id=\"r-&lt;b&gt;\">&lt;b&gt;</h2>"));
    ck_assert_ptr_nonnull(strstr(html, "<a href=\"%3Cb%3E/20261101-090000/report.md\">20261101-090000</a>"));
    ck_assert_ptr_null(strstr(html, "<b>"));
    ck_assert_ptr_nonnull(strstr(html, "<svg class=\"trend\""));
    ck_assert_ptr_nonnull(strstr(html, "<td class=\"failed\">failed</td>"));
    ck_assert_ptr_null(strstr(html, "<script"));
    /* Written again: the same bytes, no temporary file left. */
    ck_assert_int_eq(tr_runs_index_write(root, &err), 0);
    char *md2 = slurp(root, "index.md"), *html2 = slurp(root, "index.html");
    ck_assert_str_eq(md, md2);
    ck_assert_str_eq(html, html2);
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s/.index.md.tmp", root);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    free(md), free(html), free(md2), free(html2);
    remove_tree(root);
    tr_diag_free(&err);
}
END_TEST

START_TEST(unreadable_or_empty)
{
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_runs_index_write("/nonexistent/runs", &err), TR_EIO);
    ck_assert_ptr_nonnull(strstr(tr_diag_last(&err), "cannot read /nonexistent/runs"));
    char root[] = "/tmp/check_report_index.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    ck_assert_int_eq(tr_runs_index_write(root, &err), 0);
    char *md = slurp(root, "index.md");
    ck_assert_ptr_nonnull(strstr(md, "0 recipes, 0 runs. No runs yet."));
    free(md);
    remove_tree(root);
    tr_diag_free(&err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("report_index");
    TCase *tc = tcase_create("index");
    tcase_add_test(tc, folder_kinds);
    tcase_add_test(tc, index_rows_and_trend);
    tcase_add_test(tc, unreadable_or_empty);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
