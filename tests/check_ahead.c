/* Work done ahead on a thread of its own (src/dist/ahead.c, ZeRO 3's copies): jobs run in the
 * order queued, a wait returns once the jobs up to its place have run (not before), a new round
 * begins after the last one's jobs have all run, and a failed job's sentence reaches the waiter
 * while the jobs after it are passed over. */
#include "runner.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "dist/ahead.h"

struct record {
    int order[64], n;
    atomic_int ran;
    int fail_at;
};

static int job(void *ctx, int which, void *arg, struct tr_diag *d)
{
    struct record *r = ctx;
    usleep(2000);   /* long enough for a waiter to arrive before it ends */
    if (which == r->fail_at)
        return tr_fail(d, TR_EFAIL, "job %d: %s", which, (const char *)arg);
    r->order[r->n++] = which;
    atomic_fetch_add(&r->ran, 1);
    return 0;
}

START_TEST(jobs_in_order_waited_by_place)
{
    struct record r = {.fail_at = -1};
    struct tr_comm c = {.world = 1};
    struct tr_ahead *a = tr_ahead_start(job, &r, &c, "testing");
    ck_assert_ptr_nonnull(a);
    struct tr_diag d = {0};
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 8; i++)
            tr_ahead_queue(a, i, 10 * round + i, "x");
        ck_assert_int_eq(tr_ahead_wait(a, 3, &d), 0);
        ck_assert_int_ge(atomic_load(&r.ran), 8 * round + 4);   /* at least the first four of this round */
        ck_assert_int_eq(tr_ahead_wait(a, 1 << 30, &d), 0);     /* beyond the last: all */
        ck_assert_int_eq(atomic_load(&r.ran), 8 * round + 8);
    }
    for (int i = 0; i < 24; i++)   /* one after the other, as queued, round after round */
        ck_assert_int_eq(r.order[i], 10 * (i / 8) + i % 8);
    ck_assert_double_gt(tr_ahead_seconds(a), 0);
    tr_ahead_stop(a);
}
END_TEST

START_TEST(a_failure_reaches_the_waiter)
{
    struct record r = {.fail_at = 2};
    struct tr_comm c = {.world = 1};
    struct tr_ahead *a = tr_ahead_start(job, &r, &c, "testing");
    struct tr_diag d = {0};
    for (int i = 0; i < 5; i++)
        tr_ahead_queue(a, i, i, "the ranks went away");
    usleep(50000);   /* every job run or passed over by now (a loaded machine's order): */
    ck_assert_int_eq(tr_ahead_wait(a, 1, &d), 0);   /* a place before the failure is fine */
    ck_assert_int_eq(tr_ahead_wait(a, 4, &d), TR_EFAIL);
    ck_assert_str_eq(tr_diag_last(&d), "job 2: the ranks went away");
    ck_assert_int_eq(r.n, 2);   /* the jobs after the failed one passed over */
    tr_diag_free(&d);
    tr_ahead_queue(a, 0, 7, "x");   /* a new round starts clean */
    ck_assert_int_eq(tr_ahead_wait(a, 0, &d), 0);
    ck_assert_int_eq(r.order[r.n - 1], 7);
    tr_ahead_stop(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ahead");
    TCase *tc = tcase_create("ahead");
    tcase_add_test(tc, jobs_in_order_waited_by_place);
    tcase_add_test(tc, a_failure_reaches_the_waiter);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
