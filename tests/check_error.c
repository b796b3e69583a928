/* The one error type (core/error.h) and the one map from its codes to exit statuses
 * (cli/exit.c): tr_fail returns the code it is given and keeps the first, a line names its
 * place, a path that does not fit is refused rather than cut, and every code has the status
 * trainrun(1) documents. */
#include <check.h>
#include <string.h>

#include "cli/exit.h"
#include "core/error.h"
#include "runner.h"
#include "unit.h"

START_TEST(fail_returns_the_code_and_keeps_the_first)
{
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_fail(&d, TR_EDATA, "%s: cannot read", "a.csv"), TR_EDATA);
    ck_assert_int_eq(d.code, TR_EDATA);
    struct tr_where at = {.file = "b.yaml", .line = 3, .col = 7};
    ck_assert_int_eq(tr_fail_at(&d, TR_EINVAL, at, "unknown key '%s'", "lr"), TR_EINVAL);
    ck_assert_int_eq(d.code, TR_EDATA);   /* the first failure is the one a caller reports */
    ck_assert_int_eq(d.n, 2);
    ck_assert_str_eq(tr_diag_last(&d), "unknown key 'lr'");
    ck_assert_int_eq(tr_fail_file(&d, TR_EIO, "c.txt", 0, 0, "is empty"), TR_EIO);
    ck_assert_int_eq(d.code, TR_EDATA);
    tr_diag_free(&d);
    ck_assert_int_eq(d.code, 0);
    ck_assert_str_eq(tr_diag_last(&d), "");
    ck_assert_int_eq(tr_fail(NULL, TR_ENOMEM, "no one to tell"), TR_ENOMEM);   /* the code alone */
}
END_TEST

START_TEST(a_line_names_its_place)
{
    struct tr_diag d = {0};
    tr_fail_at(&d, TR_EINVAL, (struct tr_where){.file = "r.yaml", .line = 12, .col = 5}, "not a number");
    tr_fail_file(&d, TR_EDATA, "train.csv", 0, 0, "the file is empty");
    tr_fail_at(&d, TR_EINVAL, (struct tr_where){.arg = "lr=fast"}, "not a number");
    tr_fail(&d, TR_EFAIL, "the device failed");
    const char *want[] = {"r.yaml:12:5: not a number", "train.csv: the file is empty",
                          "override 'lr=fast': not a number", "the device failed"};
    for (int i = 0; i < 4; i++) {
        char *line = tr_diag_line(&d, i);
        ck_assert_str_eq(line, want[i]);
        free(line);
    }
    tr_diag_free(&d);
}
END_TEST

/* Input bytes never reach a terminal as escapes: control characters in a message, a file's
 * name or an override are written \xNN (a tab stays, and a message's own line breaks); an
 * override is echoed up to 200 bytes. */
START_TEST(control_characters_are_escaped)
{
    struct tr_diag d = {0};
    tr_fail_file(&d, TR_EDATA, "t.csv", 2, 3, "'\x1b]0;pwned\x07' is not a number");
    tr_fail_at(&d, TR_EINVAL, (struct tr_where){.arg = "seed=\r1\n"}, "two\nlines\tand\x7f");
    tr_fail_file(&d, TR_EDATA, "a\x1b[2Jb.csv", 0, 0, "is empty");
    char *long_arg = malloc(1001);
    memset(long_arg, '[', 1000);
    long_arg[1000] = '\0';
    tr_fail_at(&d, TR_EINVAL, (struct tr_where){.arg = long_arg}, "too deep");
    const char *want[] = {"t.csv:2:3: '\\x1b]0;pwned\\x07' is not a number",
                          "override 'seed=\\x0d1\\x0a': two\nlines\tand\\x7f", "a\\x1b[2Jb.csv: is empty"};
    for (int i = 0; i < 3; i++) {
        char *line = tr_diag_line(&d, i);
        ck_assert_str_eq(line, want[i]);
        free(line);
    }
    char *line = tr_diag_line(&d, 3);
    ck_assert_uint_eq(strlen(line), strlen("override '") + 200 + strlen("…': too deep"));
    ck_assert_ptr_nonnull(strstr(line, "[[…': too deep"));
    free(line);
    free(long_arg);
    tr_diag_free(&d);
}
END_TEST

START_TEST(a_path_too_long_is_refused_not_cut)
{
    char *name = malloc(5001);
    memset(name, 'a', 5000);
    name[5000] = '\0';
    struct tr_path p;
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_path_set(&p, &d, "/tmp/%s", name), TR_EINVAL);
    ck_assert_str_eq(p.s, "");
    ck_assert_int_eq(d.code, TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&d), "path too long (5005 bytes; at most 4095)"), "%s", tr_diag_last(&d));
    name[TR_PATH_MAX - 1 - 5] = '\0';   /* "/tmp/" + the rest: exactly the most that fits */
    ck_assert_int_eq(tr_path_set(&p, &d, "/tmp/%s", name), 0);
    ck_assert_uint_eq(strlen(p.s), TR_PATH_MAX - 1);
    ck_assert_int_eq(d.n, 1);
    tr_diag_free(&d);
    free(name);
}
END_TEST

/* trainrun(1)'s EXIT STATUS, code by code. */
START_TEST(every_code_has_its_exit_status)
{
    const struct { int code, status; } map[] = {
        {TR_OK, TR_EXIT_OK},
        {TR_EINVAL, TR_EXIT_USAGE},
        {TR_EIO, TR_EXIT_FAILURE},
        {TR_ENOMEM, TR_EXIT_FAILURE},
        {TR_ENOFIT, TR_EXIT_NO_FIT},
        {TR_EDATA, TR_EXIT_DATA},
        {TR_EDIVERGED, TR_EXIT_DIVERGED},
        {TR_EREGRESSION, TR_EXIT_REGRESSION},
        {TR_EUNCHANGED, TR_EXIT_UNCHANGED},
        {TR_ELOCKED, TR_EXIT_LOCKED},
        {TR_EINTERRUPTED, TR_EXIT_INTERRUPTED},
        {TR_EFAIL, TR_EXIT_FAILURE},
        {TR_ETIMEUP, TR_EXIT_TIME_LIMIT},
    };
    ck_assert_int_eq(sizeof map / sizeof *map, 1 - TR_ETIMEUP);   /* every enum tr_err, once */
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        ck_assert_int_eq(map[i].code, -(int)i);
        ck_assert_int_eq(tr_exit_status(map[i].code), map[i].status);
    }
    const int documented[] = {0, 2, 1, 1, 3, 4, 5, 6, 7, 75, 130, 1, 8};
    for (size_t i = 0; i < sizeof documented / sizeof *documented; i++)
        ck_assert_int_eq(tr_exit_status(-(int)i), documented[i]);
    ck_assert_int_eq(tr_exit_status(-99), TR_EXIT_FAILURE);   /* not a code: a failure */
    ck_assert_str_eq(tr_err_name(TR_EDATA), "the data could not be read");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("error");
    tcase_add_test(tc, fail_returns_the_code_and_keeps_the_first);
    tcase_add_test(tc, a_line_names_its_place);
    tcase_add_test(tc, control_characters_are_escaped);
    tcase_add_test(tc, a_path_too_long_is_refused_not_cut);
    tcase_add_test(tc, every_code_has_its_exit_status);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
