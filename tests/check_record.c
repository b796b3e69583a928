/* The run's record (src/train/record.c): time lines that add up to what was spent, the leak
 * check flagging the first step a gauge grew at (real heap growth, not a simulated number) and
 * staying quiet while memory holds still, and run.json's parts adding up over a resume. */
#include "runner.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/graph.h"
#include "report/events.h"
#include "train/record.h"

START_TEST(timer_lines_add_up)
{
    struct tr_timer t;
    tr_timer_start(&t, 100.0, 2.0);
    t.phase[TR_FORWARD] = 1.5, t.phase[TR_BACKWARD] = 3.0, t.phase[TR_RECOMPUTE] = 0.5;
    t.spent[TR_TIME_OPTIMIZER] = 0.25, t.spent[TR_TIME_EVAL] = 0.75, t.spent[TR_TIME_CHECKPOINT] = 0.125;
    json_t *line = json_object();
    tr_timer_line(&t, line, 110.0, 2.5);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/wall")), 10.0);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/data")), 0.5);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/forward")), 1.5);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/backward")), 3.0);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/recompute")), 0.5);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/optimizer")), 0.25);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/evaluation")), 0.75);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/checkpointing")), 0.125);
    json_decref(line);
    /* The next interval starts from nothing. */
    line = json_object();
    tr_timer_line(&t, line, 111.0, 2.5);
    ck_assert_double_eq(json_number_value(json_object_get(line, "time/wall")), 1.0);
    for (int i = 0; i < TR_NTIME; i++)
        ck_assert_double_eq(json_number_value(json_object_get(line, tr_time_key(i))), 0.0);
    json_decref(line);
}
END_TEST

static const char *verdict(const struct tr_leak *l, json_t **j)
{
    *j = tr_leak_json(l);
    return json_string_value(json_object_get(*j, "verdict"));
}

START_TEST(leak_quiet_when_constant)
{
    struct tr_leak l;
    tr_leak_init(&l, 3);
    for (int step = 1; step <= 40; step++) {
        void *p = malloc(4096);   /* freed within the step, as the trainer's own buffers are */
        memset(p, 1, 4096);
        free(p);
        tr_leak_sample(&l, step, 1000, NULL);
    }
    json_t *j;
    ck_assert_str_eq(verdict(&l, &j), "constant");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "baseline_step")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "last_step")), 40);
    ck_assert(json_is_null(json_object_get(json_object_get(j, "heap"), "first_grew_step")));
    json_decref(j);
}
END_TEST

START_TEST(leak_flags_first_growth)
{
    struct tr_leak l;
    tr_leak_init(&l, 2);
    enum { CHUNK = 24 << 20 };
    char *kept = NULL;
    for (int step = 1; step <= 12; step++) {
        if (step == 6) {   /* a real leak: kept and touched, so the heap and the resident set grow */
            kept = malloc(CHUNK);
            ck_assert_ptr_nonnull(kept);
            memset(kept, 7, CHUNK);
        }
        tr_leak_sample(&l, step, step >= 9 ? 2000 : 1000, NULL);   /* the allocator: from step 9 */
    }
    json_t *j;
    ck_assert_str_eq(verdict(&l, &j), "grew");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "allocated"), "first_grew_step")), 9);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "allocated"), "first_grew_value")), 2000);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "heap"), "first_grew_step")), 6);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "rss"), "first_grew_step")), 6);
    json_t *heap = json_object_get(j, "heap");
    ck_assert_int_ge(json_integer_value(json_object_get(heap, "last")) - json_integer_value(json_object_get(heap, "baseline")),
                     CHUNK);
    json_decref(j);
    free(kept);
}
END_TEST

START_TEST(leak_too_short)
{
    struct tr_leak l;
    tr_leak_init(&l, 10);
    for (int step = 1; step <= 10; step++)
        tr_leak_sample(&l, step, 1000, NULL);
    json_t *j;
    ck_assert_str_eq(verdict(&l, &j), "too short");
    ck_assert(!json_is_true(json_object_get(j, "checked")));
    json_decref(j);
    tr_leak_sample(&l, 11, 1000, NULL);   /* the baseline alone: nothing to compare yet */
    ck_assert_str_eq(verdict(&l, &j), "too short");
    json_decref(j);
    tr_leak_sample(&l, 12, 1000, NULL);
    ck_assert_str_eq(verdict(&l, &j), "constant");
    json_decref(j);
}
END_TEST

START_TEST(record_over_a_resume)
{
    char dir[64] = "/tmp/check_record.XXXXXX", path[200];
    struct tr_diag err = {0};
    ck_assert_ptr_nonnull(mkdtemp(dir));
    json_t *rec;
    ck_assert_int_eq(tr_run_record_begin(&rec, dir, json_pack("{ss}", "host", "h"), 0, &err), 0);
    snprintf(path, sizeof path, "%s/run.json", dir);
    json_t *on_disk = json_load_file(path, 0, NULL);   /* written at the start: a killed run has it */
    ck_assert_ptr_nonnull(on_disk);
    ck_assert(json_is_null(json_object_get(json_array_get(json_object_get(on_disk, "segments"), 0), "exit_code")));
    json_decref(on_disk);
    ck_assert_int_eq(tr_run_record_end(rec, dir, &(struct tr_record_end){130, 2.5, 40, SIGHUP}, NULL, &err), 0);
    json_decref(rec);
    ck_assert_int_eq(tr_run_record_begin(&rec, dir, json_pack("{ss}", "host", "h2"), 40, &err), 0);
    ck_assert_int_eq(tr_run_record_end(rec, dir, &(struct tr_record_end){8, 1.5, 100, 0},
                                       json_pack("{ss}", "verdict", "constant"), &err), 0);
    json_decref(rec);
    json_t *j = json_load_file(path, 0, NULL);
    json_t *segments = json_object_get(j, "segments");
    ck_assert_uint_eq(json_array_size(segments), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(segments, 0), "exit_code")), 130);
    /* each part says how it ended in words, and which signal stopped it */
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(segments, 0), "outcome")), "interrupted");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(segments, 0), "signal")), "SIGHUP");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(segments, 1), "outcome")), "time-limit");
    ck_assert(json_is_null(json_object_get(json_array_get(segments, 1), "signal")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "outcome")), "time-limit");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(segments, 1), "from_step")), 40);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(segments, 1), "to_step")), 100);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 8);
    ck_assert_double_eq(json_number_value(json_object_get(j, "seconds")), 4.0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "environment"), "host")), "h2");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "leak"), "verdict")), "constant");
    json_decref(j);
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A resumed run cuts an event file back: to the records up to its checkpoint's step, to the
 * length noted at that checkpoint, and past a torn last record; the header records stay. */
START_TEST(event_file_cut_back_to_a_checkpoint)
{
    char dir[64] = "/tmp/check_record.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    struct tr_events ev = {.fixed_time = 1.5};
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_events_open(&ev, dir, 1, 0, &d), 0);
    tr_events_text(&ev, "recipe", 0, "name: x");
    int64_t at[11];
    for (int step = 1; step <= 10; step++) {
        tr_events_scalar(&ev, "train/loss", step, 1.0 / step);
        ck_assert_int_eq(tr_events_flush(&ev, 0), 0);
        at[step] = tr_events_written(&ev);
    }
    struct tr_path path = ev.path;
    ck_assert_int_eq(tr_events_close(&ev), 0);
    FILE *f = fopen(path.s, "ab");   /* a crash mid-write: a record's first bytes */
    fwrite("\x20\0\0", 1, 3, f);
    fclose(f);
    struct stat st;
    ck_assert_int_eq(tr_events_trim(path.s, -1, 10, &d), 0);   /* nothing past step 10: the torn end */
    ck_assert_int_eq(stat(path.s, &st), 0);
    ck_assert_int_eq(st.st_size, at[10]);
    ck_assert_int_eq(tr_events_trim(path.s, -1, 7, &d), 0);    /* by step */
    ck_assert_int_eq(stat(path.s, &st), 0);
    ck_assert_int_eq(st.st_size, at[7]);
    ck_assert_int_eq(tr_events_trim(path.s, at[3], 7, &d), 0); /* by the length noted */
    ck_assert_int_eq(stat(path.s, &st), 0);
    ck_assert_int_eq(st.st_size, at[3]);
    ck_assert_int_eq(tr_events_trim(path.s, at[3] - 5, 7, &d), 0);   /* not at a record's end: the whole */
    ck_assert_int_eq(stat(path.s, &st), 0);                            /* records before it */
    ck_assert_int_eq(st.st_size, at[2]);
    ck_assert_int_eq(tr_events_trim(path.s, -1, 0, &d), 0);    /* step 0: the header and texts stay */
    ck_assert_int_eq(stat(path.s, &st), 0);
    ck_assert_int_gt(st.st_size, 0);
    ck_assert_int_lt(st.st_size, at[1]);
    ck_assert_int_eq(d.n, 0);
    ck_assert_int_eq(tr_events_trim("/nonexistent/events", -1, 0, &d), TR_EIO);
    unlink(path.s);
    ck_assert_int_eq(rmdir(dir), 0);
    tr_diag_free(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record");
    TCase *tc = tcase_create("record");
    tcase_add_test(tc, timer_lines_add_up);
    tcase_add_test(tc, leak_quiet_when_constant);
    tcase_add_test(tc, leak_flags_first_growth);
    tcase_add_test(tc, leak_too_short);
    tcase_add_test(tc, record_over_a_resume);
    tcase_add_test(tc, event_file_cut_back_to_a_checkpoint);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
