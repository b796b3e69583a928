/* Stopping and progress (src/core/stop.c, src/core/progress.c): a signal sets the flag, the
 * first one stays the one reported, and tr_stop_check turns it into TR_EINTERRUPTED naming
 * it; progress draws a terminal line and clears it, writes plain lines only when due, and
 * nothing when quiet. */
#include "runner.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "core/stop.h"

START_TEST(first_signal_is_the_one_reported)
{
    tr_stop_install();
    ck_assert_int_eq(tr_stop_requested(), 0);
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_stop_check(&d, "the evaluation"), 0);
    raise(SIGHUP);   /* a closed terminal: stops cleanly too, no longer kills the process */
    ck_assert_int_eq(tr_stop_requested(), SIGHUP);
    raise(SIGTERM);
    ck_assert_int_eq(tr_stop_requested(), SIGHUP);
    ck_assert_int_eq(tr_stop_check(&d, "the evaluation"), TR_EINTERRUPTED);
    ck_assert_str_eq(tr_diag_last(&d), "stopped by SIGHUP during the evaluation");
    tr_diag_free(&d);
    tr_stop_uninstall();
    tr_stop_install();   /* a new run starts with no stop requested */
    ck_assert_int_eq(tr_stop_requested(), 0);
    raise(SIGINT);
    ck_assert_str_eq(tr_stop_signal_name(tr_stop_requested()), "SIGINT");
    tr_stop_uninstall();
    ck_assert_str_eq(tr_stop_signal_name(SIGTERM), "SIGTERM");
}
END_TEST

/* What p wrote into its stream since the last call. */
static char *written(FILE *out)
{
    static char text[4096];
    long at = ftell(out);
    rewind(out);
    size_t n = fread(text, 1, sizeof text - 1, out);
    text[n] = '\0';
    fseek(out, at, SEEK_SET);
    return text;
}

START_TEST(plain_lines_only_when_due)
{
    tr_progress_quiet(false);
    struct tr_progress p;
    tr_progress_begin(&p, "evaluation (test split)", 1000, "samples");
    FILE *out = tmpfile();
    p.out = out, p.mode = TR_PROGRESS_LINES;
    tr_progress_update(&p, 10);
    ck_assert_str_eq(written(out), "");   /* a quick phase says nothing */
    p.began -= 2 * TR_PROGRESS_LINE_SECONDS, p.shown -= 2 * TR_PROGRESS_LINE_SECONDS;   /* time passes */
    tr_progress_update(&p, 250);
    ck_assert_ptr_nonnull(strstr(written(out), "evaluation (test split): 250/1000 samples (25%), 20 s\n"));
    tr_progress_update(&p, 300);   /* not due again yet */
    ck_assert_ptr_null(strstr(written(out), "300"));
    tr_progress_update(&p, 1000);
    tr_progress_end(&p);
    ck_assert_ptr_nonnull(strstr(written(out), "evaluation (test split): 1000 samples in 20 s\n"));
    fclose(out);
}
END_TEST

START_TEST(terminal_line_redrawn_and_cleared)
{
    tr_progress_quiet(false);
    struct tr_progress p;
    tr_progress_begin(&p, "tokenising train.txt", 0, "bytes");
    FILE *out = tmpfile();
    p.out = out, p.mode = TR_PROGRESS_TERMINAL;
    tr_progress_update(&p, 1);
    ck_assert_str_eq(written(out), "");   /* not in the first half second */
    p.began -= 1, p.shown -= 1;
    tr_progress_update(&p, 4096);
    ck_assert_ptr_nonnull(strstr(written(out), "\r\033[Ktokenising train.txt: 4096 bytes, 1 s"));
    tr_progress_end(&p);
    size_t n = strlen(written(out));
    ck_assert_str_eq(written(out) + n - 4, "\r\033[K");   /* the line cleared for what follows */
    fclose(out);
}
END_TEST

START_TEST(quiet_shows_nothing)
{
    tr_progress_quiet(true);
    struct tr_progress p;
    tr_progress_begin(&p, "evaluation", 10, "samples");
    ck_assert_int_eq(p.mode, TR_PROGRESS_OFF);
    tr_progress_end(&p);
    tr_progress_quiet(false);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stop");
    TCase *tc = tcase_create("stop");
    tcase_add_test(tc, first_signal_is_the_one_reported);
    tcase_add_test(tc, plain_lines_only_when_due);
    tcase_add_test(tc, terminal_line_redrawn_and_cleared);
    tcase_add_test(tc, quiet_shows_nothing);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
