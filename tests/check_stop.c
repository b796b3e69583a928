/* Stopping and progress (src/core/stop.c, src/core/progress.c): a signal sets the flag, the
 * first one stays the one reported, and tr_stop_check turns it into TR_EINTERRUPTED naming
 * it; progress draws a terminal line and clears it, writes plain lines only when due, and
 * nothing when quiet. */
#include "runner.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/progress.h"
#include "core/stop.h"

/* Sends sig to the process, as kill(1) does, and waits for the stop thread to have taken it. */
static void send(int sig)
{
    unsigned before = tr_stop_taken();
    kill(getpid(), sig);
    for (int i = 0; i < 5000 && tr_stop_taken() == before; i++)
        usleep(1000);
    ck_assert_uint_gt(tr_stop_taken(), before);
}

START_TEST(first_signal_is_the_one_reported)
{
    tr_stop_install();
    ck_assert_int_eq(tr_stop_requested(), 0);
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_stop_check(&d, "the evaluation"), 0);
    send(SIGHUP);   /* a closed terminal: stops cleanly too, no longer kills the process */
    ck_assert_int_eq(tr_stop_requested(), SIGHUP);
    send(SIGTERM);
    ck_assert_int_eq(tr_stop_requested(), SIGHUP);
    ck_assert_int_eq(tr_stop_check(&d, "the evaluation"), TR_EINTERRUPTED);
    ck_assert_str_eq(tr_diag_last(&d), "stopped by SIGHUP during the evaluation");
    tr_diag_free(&d);
    tr_stop_uninstall();
    tr_stop_install();   /* a new run starts with no stop requested */
    ck_assert_int_eq(tr_stop_requested(), 0);
    send(SIGINT);
    ck_assert_str_eq(tr_stop_signal_name(tr_stop_requested()), "SIGINT");
    tr_stop_uninstall();
    ck_assert_str_eq(tr_stop_signal_name(SIGTERM), "SIGTERM");
}
END_TEST

/* Whether the calling thread blocks SIGINT, SIGTERM and SIGHUP. */
static void *blocks_all(void *unused)
{
    (void)unused;
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    return (void *)(intptr_t)(sigismember(&now, SIGINT) && sigismember(&now, SIGTERM) && sigismember(&now, SIGHUP));
}

/* No thread but the stop thread takes a stop signal (a handler's frame would land below a
 * oneDNN kernel's stack pointer): this one, one made later, OpenMP's. */
START_TEST(no_thread_runs_a_handler)
{
    tr_stop_init();
    ck_assert(blocks_all(NULL));
    pthread_t t;
    void *blocked = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, blocks_all, NULL), 0);
    pthread_join(t, &blocked);
    ck_assert(blocked);
    int all = 1;
#pragma omp parallel num_threads(2) reduction(&& : all)
    all = blocks_all(NULL) != NULL;
    ck_assert(all);
}
END_TEST

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *term_soon(void *unused)
{
    (void)unused;
    usleep(100000);
    kill(getpid(), SIGTERM);
    return NULL;
}

/* A wait sees a stop within a slice, though no signal cuts it short; without one it sleeps
 * the whole time. */
START_TEST(sleep_ends_at_a_stop)
{
    tr_stop_install();
    double began = seconds_now();
    ck_assert(!tr_stop_sleep(0.12));
    ck_assert_double_ge(seconds_now() - began, 0.12);
    pthread_t t;
    pthread_create(&t, NULL, term_soon, NULL);
    began = seconds_now();
    ck_assert(tr_stop_sleep(10));
    ck_assert_double_lt(seconds_now() - began, 0.1 + 10 * TR_STOP_SLICE);
    ck_assert_int_eq(tr_stop_requested(), SIGTERM);
    pthread_join(t, NULL);
    tr_stop_uninstall();
}
END_TEST

/* How a child that runs f ended: the signal that ended it, or 0 when it returned. */
static int child_ends_by(void (*f)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        f();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void stop_caught_then_ended(void)
{
    struct tr_stop_catch c;
    tr_stop_catch_begin(&c);
    send(SIGTERM);
    if (tr_stop_requested() != SIGTERM)
        _exit(1);
    tr_stop_catch_end(&c);   /* nobody else catches it: the process ends by it now */
}

static void default_after_uninstall(void)
{
    tr_stop_install();
    tr_stop_uninstall();
    kill(getpid(), SIGHUP);
    sleep(5);
}

static void hup_ignored(void)
{
    signal(SIGHUP, SIG_IGN);   /* nohup */
    tr_stop_init();
    tr_stop_install();
    send(SIGHUP);
    if (tr_stop_requested())
        _exit(1);
    tr_stop_uninstall();
    send(SIGHUP);
}

/* Outside a run a stop signal ends the process, as by its default action; an ignored SIGHUP
 * stays ignored. */
START_TEST(outside_a_run_the_signal_ends_the_process)
{
    ck_assert_int_eq(child_ends_by(stop_caught_then_ended), SIGTERM);
    ck_assert_int_eq(child_ends_by(default_after_uninstall), SIGHUP);
    ck_assert_int_eq(child_ends_by(hup_ignored), 0);
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
    tcase_add_test(tc, no_thread_runs_a_handler);
    tcase_add_test(tc, sleep_ends_at_a_stop);
    tcase_add_test(tc, outside_a_run_the_signal_ends_the_process);
    tcase_add_test(tc, plain_lines_only_when_due);
    tcase_add_test(tc, terminal_line_redrawn_and_cleared);
    tcase_add_test(tc, quiet_shows_nothing);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
