/* Unit tests of src/recipe/units.c: memory sizes and durations as people write them in
 * recipes, their formatting for `trainrun check` (which must read back the same), and the
 * edit distance behind "did you mean". */
#include "runner.h"
#include <math.h>
#include <stdint.h>

#include "recipe/units.h"
#include "unit.h"

#define GIB (UINT64_C(1) << 30)
#define MIB (UINT64_C(1) << 20)
#define TIB (UINT64_C(1) << 40)

/* ---- sizes ------------------------------------------------------------------------------- */

static const struct { const char *text; uint64_t bytes; } good_sizes[] = {
    {"14GiB", 14 * GIB},
    {"512MiB", 512 * MIB},
    {"14GB", UINT64_C(14000000000)},
    {"1.5e9", UINT64_C(1500000000)},       /* bare numbers are bytes */
    {"1500000000", UINT64_C(1500000000)},
    {"14 GiB", 14 * GIB},                  /* a space before the unit */
    {"14gib", 14 * GIB},                   /* units are case-insensitive */
    {"14GIB", 14 * GIB},
    {"512mib", 512 * MIB},
    {"14gb", UINT64_C(14000000000)},
    {"0.5KiB", 512},
    {"1.5GiB", 3 * GIB / 2},
    {"1kB", 1000},
    {"1KB", 1000},
    {"2TB", UINT64_C(2000000000000)},
    {"3TiB", 3 * TIB},
    {"100B", 100},
    {"0", 0},
    {".5MiB", MIB / 2},
    /* The largest sizes below 2^63: every later sum of sizes stays exact in int64. */
    {"8388607TiB", UINT64_C(8388607) * TIB},
    {"9223372036854774784", UINT64_C(9223372036854774784)},
};

START_TEST(size_parses)
{
    uint64_t bytes = 7;
    const char *text = good_sizes[_i].text;
    ck_assert_msg(tr_parse_size(text, &bytes) == 0, "'%s' was refused", text);
    ck_assert_msg(bytes == good_sizes[_i].bytes, "'%s' read as %llu, expected %llu", text,
                  (unsigned long long)bytes, (unsigned long long)good_sizes[_i].bytes);
}
END_TEST

static const char *const bad_sizes[] = {
    "1.5B",        /* not a whole number of bytes */
    "0.1KiB",      /* 102.4 bytes */
    "-1GiB",       /* no signs */
    "+1GiB",
    "14XB",        /* no such unit */
    "14GiBs",
    "14 G",
    "GiB",         /* no number */
    "",
    " 14GiB",
    "1e400",       /* not finite */
    "1e400GiB",
    "0x10",        /* no hexadecimal */
    "inf",
    "nan",
    "1e",
    "1.2.3",
    "8388608TiB",  /* 2^63 and above */
    "9223372036854775808",
    "1e19",
    "16777216TiB",
};

START_TEST(size_refused)
{
    uint64_t bytes = 7;
    const char *text = bad_sizes[_i];
    ck_assert_msg(tr_parse_size(text, &bytes) == TR_EINVAL, "'%s' was accepted as %llu", text,
                  (unsigned long long)bytes);
    ck_assert_msg(bytes == 7, "'%s' changed the output on failure", text);
}
END_TEST

START_TEST(size_formats)
{
    char out[32];
    tr_format_size(14 * GIB, out);
    ck_assert_str_eq(out, "14GiB");
    tr_format_size(512 * MIB, out);
    ck_assert_str_eq(out, "512MiB");
    tr_format_size(3 * TIB, out);
    ck_assert_str_eq(out, "3TiB");
    tr_format_size(1024, out);
    ck_assert_str_eq(out, "1KiB");
    tr_format_size(1536, out);              /* not a whole KiB: plain bytes */
    ck_assert_str_eq(out, "1536");
    tr_format_size(1500000000, out);
    ck_assert_str_eq(out, "1500000000");
    tr_format_size(0, out);
    ck_assert_str_eq(out, "0");
}
END_TEST

/* Whatever tr_format_size writes, tr_parse_size reads back as the same number. */
START_TEST(size_round_trips)
{
    const uint64_t sizes[] = {0, 1, 512, 1000, 1024, 1536, MIB, 14 * GIB, UINT64_C(14000000000),
                              UINT64_C(1500000000), 3 * TIB, UINT64_C(8388607) * TIB,
                              UINT64_C(9007199254740992)};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char out[32];
        uint64_t back = 7;
        tr_format_size(sizes[i], out);
        ck_assert_msg(tr_parse_size(out, &back) == 0, "'%s' does not read back", out);
        ck_assert_msg(back == sizes[i], "%llu → '%s' → %llu", (unsigned long long)sizes[i], out,
                      (unsigned long long)back);
    }
}
END_TEST

/* ---- durations --------------------------------------------------------------------------- */

static const struct { const char *text; double seconds; } good_durations[] = {
    {"90m", 5400},  {"2h", 7200},     {"1h30m", 5400}, {"45s", 45},     {"1.5h", 5400},
    {"30", 30},     {"0.5", 0.5},     {"1d", 86400},   {"500ms", 0.5},  {"2min", 120},
    {"1h30m15s", 5415}, {"1e3", 1000}, {"1d12h", 129600}, {"0.1s", 0.1},
};

START_TEST(duration_parses)
{
    double seconds = -1;
    const char *text = good_durations[_i].text;
    ck_assert_msg(tr_parse_duration(text, &seconds) == 0, "'%s' was refused", text);
    ck_assert_msg(seconds == good_durations[_i].seconds, "'%s' read as %.17g s, expected %.17g",
                  text, seconds, good_durations[_i].seconds);
}
END_TEST

static const char *const bad_durations[] = {
    "h",        /* a unit without a number */
    "5x",       /* no such unit */
    "1h30",     /* the last number needs its unit */
    "",
    "-5s",
    "1 h",
    "1hh",
    "5mins",
    "1e400s",
    "inf",
    "nan",
    "s",
    "1h 30m",
    "0x10s",
};

START_TEST(duration_refused)
{
    double seconds = -1;
    const char *text = bad_durations[_i];
    ck_assert_msg(tr_parse_duration(text, &seconds) == TR_EINVAL, "'%s' was accepted as %g s",
                  text, seconds);
    ck_assert_msg(seconds == -1, "'%s' changed the output on failure", text);
}
END_TEST

START_TEST(duration_formats)
{
    char out[32];
    tr_format_duration(5400, out);
    ck_assert_str_eq(out, "90m");
    tr_format_duration(7200, out);
    ck_assert_str_eq(out, "2h");
    tr_format_duration(86400, out);
    ck_assert_str_eq(out, "24h");
    tr_format_duration(45, out);
    ck_assert_str_eq(out, "45s");
    tr_format_duration(10, out);   /* the default report.notify.timeout: once printed 1e+01s */
    ck_assert_str_eq(out, "10s");
    tr_format_duration(90061, out);
    ck_assert_str_eq(out, "90061s");
    tr_format_duration(0.5, out);
    ck_assert_str_eq(out, "0.5s");
    /* The shortest text that reads back, not all 17 digits. */
    tr_format_duration(0.1, out);
    ck_assert_str_eq(out, "0.1s");
    tr_format_duration(2.3, out);
    ck_assert_str_eq(out, "2.3s");
}
END_TEST

START_TEST(duration_round_trips)
{
    const double durations[] = {0.001, 0.1, 0.5, 1, 2.3, 45, 59.5, 60, 61, 3600, 5400, 5415,
                                86400, 31536000, 1.0 / 3};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++) {
        char out[32];
        double back = -1;
        tr_format_duration(durations[i], out);
        ck_assert_msg(tr_parse_duration(out, &back) == 0, "'%s' does not read back", out);
        ck_assert_msg(back == durations[i], "%.17g → '%s' → %.17g", durations[i], out, back);
    }
}
END_TEST

/* ---- edit distance ------------------------------------------------------------------------ */

START_TEST(edit_distance)
{
    ck_assert_int_eq(tr_edit_distance("", ""), 0);
    ck_assert_int_eq(tr_edit_distance("batch_size", "batch_size"), 0);
    ck_assert_int_eq(tr_edit_distance("", "abc"), 3);
    ck_assert_int_eq(tr_edit_distance("kitten", "sitting"), 3);
    ck_assert_int_eq(tr_edit_distance("batchsize", "batch_size"), 1);   /* a deletion */
    ck_assert_int_eq(tr_edit_distance("optimiser", "optimizer"), 1);    /* a substitution */
    /* Swapping two neighbours is one edit, not two. */
    ck_assert_int_eq(tr_edit_distance("ab", "ba"), 1);
    ck_assert_int_eq(tr_edit_distance("epcohs", "epochs"), 1);
    ck_assert_int_eq(tr_edit_distance("warmpu", "warmup"), 1);
    /* Optimal string alignment: no edit of a transposed pair, so "ca" → "abc" is 3. */
    ck_assert_int_eq(tr_edit_distance("ca", "abc"), 3);
    ck_assert_int_eq(tr_edit_distance("lr", "lr"), 0);
}
END_TEST

START_TEST(edit_distance_symmetric_and_bounded)
{
    static const char *const words[] = {"", "a", "ab", "ba", "epochs", "epcohs", "steps",
                                        "train.batch_size", "batch_size", "optimizer"};
    const int n = (int)(sizeof words / sizeof words[0]);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int d = tr_edit_distance(words[i], words[j]);
            size_t li = strlen(words[i]), lj = strlen(words[j]);
            ck_assert_int_eq(d, tr_edit_distance(words[j], words[i]));
            ck_assert_int_le(d, (int)(li > lj ? li : lj));
            ck_assert_int_ge(d, (int)(li > lj ? li - lj : lj - li));
        }
    /* Beyond 128 bytes nothing is a near miss. */
    char long_name[200];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    ck_assert_int_ge(tr_edit_distance(long_name, long_name), 1000);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *units_suite(void)
{
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("size");
    tcase_add_loop_test(tc, size_parses, 0, N(good_sizes));
    tcase_add_loop_test(tc, size_refused, 0, N(bad_sizes));
    tcase_add_test(tc, size_formats);
    tcase_add_test(tc, size_round_trips);
    suite_add_tcase(s, tc);

    tc = tcase_create("duration");
    tcase_add_loop_test(tc, duration_parses, 0, N(good_durations));
    tcase_add_loop_test(tc, duration_refused, 0, N(bad_durations));
    tcase_add_test(tc, duration_formats);
    tcase_add_test(tc, duration_round_trips);
    suite_add_tcase(s, tc);

    tc = tcase_create("edit_distance");
    tcase_add_test(tc, edit_distance);
    tcase_add_test(tc, edit_distance_symmetric_and_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(units_suite());
}
