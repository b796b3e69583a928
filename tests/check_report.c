/* The TensorBoard writer against ../shared/reference/tensorboard-format.md: CRC-32C and its mask
 * on the reference's vectors (RFC 3720, leveldb, TensorBoard's own tests), TFRecord framing, and
 * whole records byte for byte (§9: the version record, a scalar, text, the hparams session
 * start and end, SessionLog START) as the writer puts them in a file. */
#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/crc32c.h"
#include "report/events.h"
#include "report/protobuf.h"

START_TEST(crc32c_vectors)
{
    uint8_t zeros[32] = {0}, ones[32], up[32], down[32];
    for (int i = 0; i < 32; i++)
        ones[i] = 0xFF, up[i] = (uint8_t)i, down[i] = (uint8_t)(31 - i);
    ck_assert_uint_eq(tr_crc32c("123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(tr_crc32c_mask(0xE3069283u), 0xC78AB0E5u);
    ck_assert_uint_eq(tr_crc32c("", 0), 0);
    ck_assert_uint_eq(tr_crc32c_mask(0), 0xA282EAD8u);
    ck_assert_uint_eq(tr_crc32c(zeros, 32), 0x8A9136AAu);
    ck_assert_uint_eq(tr_crc32c_mask(0x8A9136AAu), 0x0FD7FFFAu);
    ck_assert_uint_eq(tr_crc32c(ones, 32), 0x62A8AB43u);
    ck_assert_uint_eq(tr_crc32c(up, 32), 0x46DD794Eu);
    ck_assert_uint_eq(tr_crc32c(down, 32), 0x113FDB5Cu);
    ck_assert_uint_eq(tr_crc32c_mask(tr_crc32c("\x1a\x11" "CRC test, one two", 19)), 0x5794D08Au);
    uint64_t len = 24;
    ck_assert_uint_eq(tr_crc32c_mask(tr_crc32c(&len, 8)), 0x224B7FA3u);
}
END_TEST

/* §9.2: the payload of Event{wall_time 1700000000, step 1, summary{value{tag "loss",
 * simple_value 0.5}}} framed into 42 bytes. */
static const uint8_t scalar_record[] = {
    0x1a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x9b, 0xd8, 0x2d, 0x09, 0x00, 0x00, 0x00,
    0x40, 0xfc, 0x54, 0xd9, 0x41, 0x10, 0x01, 0x2a, 0x0d, 0x0a, 0x0b, 0x0a, 0x04, 0x6c, 0x6f, 0x73,
    0x73, 0x15, 0x00, 0x00, 0x00, 0x3f, 0x8d, 0xb0, 0x2e, 0x39};

START_TEST(framing)
{
    struct tr_pb out = {0};
    tr_events_frame(&out, scalar_record + 12, sizeof scalar_record - 16);
    ck_assert_uint_eq(out.len, sizeof scalar_record);
    ck_assert_mem_eq(out.data, scalar_record, sizeof scalar_record);
    tr_pb_free(&out);
}
END_TEST

START_TEST(varints)
{
    struct tr_pb b = {0};
    tr_pb_varint(&b, 0);
    tr_pb_varint(&b, 127);
    tr_pb_varint(&b, 128);
    tr_pb_varint(&b, 300);
    tr_pb_varint(&b, UINT64_MAX);
    const uint8_t want[] = {0x00, 0x7f, 0x80, 0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0xff, 0x01};
    ck_assert_uint_eq(b.len, sizeof want);
    ck_assert_mem_eq(b.data, want, sizeof want);
    tr_pb_free(&b);
}
END_TEST

/* Reads a hex dump ("18 00 …"; quoted text stands for its bytes) into out; returns its length. */
static size_t bytes_of(const char *dump, uint8_t *out)
{
    size_t n = 0;
    for (const char *p = dump; *p;) {
        if (*p == '"') {
            const char *end = strchr(p + 1, '"');
            memcpy(out + n, p + 1, (size_t)(end - p - 1));
            n += (size_t)(end - p - 1);
            p = end + 1;
        } else if (*p == ' ') {
            p++;
        } else {
            unsigned v;
            sscanf(p, "%2x", &v);
            out[n++] = (uint8_t)v;
            p += 2;
        }
    }
    return n;
}

/* The records of §9 as the writer puts them in a file, with every wall time 1700000000 (the
 * session end's own time is 1700003600). */
START_TEST(records_byte_for_byte)
{
    char dir[] = "/tmp/trainrun-events.XXXXXX";
    struct tr_diag err = {0};
    ck_assert_ptr_nonnull(mkdtemp(dir));
    struct tr_events ev = {.fixed_time = 1700000000.0};
    ck_assert_int_eq(tr_events_open(&ev, dir, 1000, 60, &err), 0);
    ck_assert_ptr_nonnull(strstr(ev.path.s, "/events.out.tfevents."));
    tr_events_scalar(&ev, "loss", 1, 0.5);
    tr_events_text(&ev, "notes", 1, "hello *world*");
    struct tr_hparam hp[] = {{.name = "lr", .kind = TR_HP_NUMBER, .number = 0.001},
                             {.name = "optimizer", .kind = TR_HP_STRING, .string = "adam"},
                             {.name = "use_bn", .kind = TR_HP_BOOL, .flag = 1}};
    tr_events_session_start(&ev, hp, 3, 1700000000.0);
    tr_events_session_end(&ev, TR_SESSION_SUCCESS, 1700003600.0);
    ck_assert_int_eq(tr_events_close(&ev), 0);

    static uint8_t want[4096], got[4096];
    size_t n = 0;
    n += bytes_of("18 00 00 00 00 00 00 00 a3 7f 4b 22 09 00 00 00 40 fc 54 d9 41 1a 0d \"brain.Event:2\" "
                  "ec ed 8f 9d", want + n);                                         /* §9.1 */
    n += bytes_of("10 00 00 00 00 00 00 00 95 fb fe 18 09 00 00 00 40 fc 54 d9 41 10 e8 07 3a 02 08 01 "
                  "ce 8a 06 b1", want + n);                                         /* §9.7 */
    memcpy(want + n, scalar_record, sizeof scalar_record);                          /* §9.2 */
    n += sizeof scalar_record;
    n += bytes_of("35 00 00 00 00 00 00 00 d6 c5 5d e6 09 00 00 00 40 fc 54 d9 41 10 01 2a 28 0a 26 0a 05 "
                  "\"notes\" 42 13 08 07 12 00 42 0d \"hello *world*\" 4a 08 0a 06 0a 04 \"text\" d8 4d fc 13",
                  want + n);                                                        /* §9.4 */
    n += bytes_of("81 00 00 00 00 00 00 00 02 cd 16 56 09 00 00 00 40 fc 54 d9 41 2a 76 0a 74 0a 1c "
                  "\"_hparams_/session_start_info\" 42 06 08 01 12 02 12 00 4a 4c 0a 4a 0a 07 \"hparams\" "
                  "12 3f 1a 3d 0a 0f 0a 02 \"lr\" 12 09 11 fc a9 f1 d2 4d 62 50 3f 0a 13 0a 09 \"optimizer\" "
                  "12 06 1a 04 \"adam\" 0a 0c 0a 06 \"use_bn\" 12 02 20 01 29 00 00 00 40 fc 54 d9 41 "
                  "5c 39 27 72", want + n);                                         /* §9.5 */
    uint8_t end_payload[128];                                                       /* §9.6 */
    size_t m = bytes_of("09 00 00 00 40 fc 54 d9 41 2a 42 0a 40 0a 1a \"_hparams_/session_end_info\" "
                        "42 06 08 01 12 02 12 00 4a 1a 0a 18 0a 07 \"hparams\" 12 0d 22 0b 08 01 11 00 00 00 c4 "
                        "ff 54 d9 41", end_payload);
    ck_assert_uint_eq(m, 77);
    struct tr_pb framed = {0};
    tr_events_frame(&framed, end_payload, m);
    memcpy(want + n, framed.data, framed.len);
    n += framed.len;
    tr_pb_free(&framed);

    FILE *f = fopen(ev.path.s, "rb");
    ck_assert_ptr_nonnull(f);
    size_t have = fread(got, 1, sizeof got, f);
    fclose(f);
    ck_assert_uint_eq(have, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "byte %zu: %02x, expected %02x", i, got[i], want[i]);
    unlink(ev.path.s);
    rmdir(dir);
    tr_diag_free(&err);
}
END_TEST

/* A folder the writer cannot create a file in is a sentence, not a crash. */
START_TEST(open_failure)
{
    struct tr_events ev = {0};
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_events_open(&ev, "/nonexistent/folder", 1, 5, &err), TR_EIO);
    ck_assert_ptr_nonnull(strstr(tr_diag_last(&err), "cannot create /nonexistent/folder/events.out.tfevents."));
    ck_assert_int_eq(tr_events_close(&ev), 0);
    tr_diag_free(&err);
}
END_TEST

/* A folder named by a path past PATH_MAX (here a real one, spelt with 2100 "./") is refused
 * with a sentence; no file is made at the path cut short. */
START_TEST(path_too_long_refused)
{
    char dir[] = "/tmp/trainrun-events.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    size_t len = strlen(dir);
    char *far = malloc(len + 2 * 2100 + 1);
    memcpy(far, dir, len);
    for (int i = 0; i < 2100; i++)
        memcpy(far + len + 2 * i, "/.", 2);
    far[len + 2 * 2100] = '\0';
    struct tr_events ev = {0};
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_events_open(&ev, far, 1, 5, &err), TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&err), "path too long ("), "%s", tr_diag_last(&err));
    ck_assert_int_eq(tr_events_close(&ev), 0);
    ck_assert_int_eq(rmdir(dir), 0);   /* empty: nothing was written */
    tr_diag_free(&err);
    free(far);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("tensorboard");
    tcase_add_test(tc, crc32c_vectors);
    tcase_add_test(tc, framing);
    tcase_add_test(tc, varints);
    tcase_add_test(tc, records_byte_for_byte);
    tcase_add_test(tc, open_failure);
    tcase_add_test(tc, path_too_long_refused);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
