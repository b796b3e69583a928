/* Unit tests of src/core/safetensors.c: round trips through the writer and the mmap reader,
 * a file built byte by byte from the format's description, one the Python package wrote,
 * hostile headers each with the exact sentence expected, and the writer's atomicity when
 * the directory is missing or read-only, the disk fills mid-write, or the rename fails. */
#include "runner.h"
#include <dirent.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>

#include "core/safetensors.h"
#include "unit.h"

#define FILE_NAME "t.safetensors"

/* ---- helpers -------------------------------------------------------------------------------- */

static void put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A file as the format describes it: the header's length (8 bytes, little-endian), the
 * header, then data_len bytes of data (byte i is i & 0xff). Caller frees. */
static uint8_t *build(const char *header, size_t data_len, size_t *len)
{
    size_t n = strlen(header);
    *len = 8 + n + data_len;
    uint8_t *buf = tr_xmalloc(*len);
    put_u64le(buf, n);
    memcpy(buf + 8, header, n);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + n + i] = (uint8_t)i;
    return buf;
}

/* Parsing buf fails with code and exactly message, and leaves st empty. */
static void expect_buffer_error(const void *buf, size_t len, int code, const char *message)
{
    struct tr_safetensors st;
    struct tr_diag err = {0};
    int rc = tr_st_parse(&st, buf, len, FILE_NAME, &err);
    ck_assert_msg(rc == code, "rc %d, expected %d; message: %s", rc, code, tr_diag_last(&err));
    ck_assert_str_eq(tr_diag_last(&err), message);
    ck_assert_ptr_null(st.tensors);
    ck_assert_ptr_null(st.header);
    ck_assert_int_eq(st.n, 0);
    tr_st_close(&st);   /* harmless on a failed parse */
    tr_diag_free(&err);
}

static void expect_error(const char *header, size_t data_len, const char *message)
{
    size_t len;
    uint8_t *buf = build(header, data_len, &len);
    expect_buffer_error(buf, len, TR_EINVAL, message);
    free(buf);
}

/* The names in dir, sorted, each ended by a newline. Caller frees. */
static char *listing(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, ".."))
            fprintf(f, "%s\n", names[i]->d_name);
        free(names[i]);
    }
    free(names);
    fclose(f);
    return text;
}

static void expect_listing(const char *dir, const char *want)
{
    char *got = listing(dir);
    ck_assert_str_eq(got, want);
    free(got);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char *text = NULL;
    FILE *out = open_memstream(&text, len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, out);
    fclose(f);
    fclose(out);
    return text;
}

/* Removes the scratch folder and frees its name and the file name in it. */
static void remove_scratch(char *dir, char *path)
{
    unit_rmtree(dir);
    free(dir);
    free(path);
}

static void fill(void *data, size_t bytes, unsigned seed)
{
    uint8_t *p = data;
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

/* ---- round trips ---------------------------------------------------------------------------- */

/* Every dtype at every rank 0..5, plus zero-element tensors. */
START_TEST(round_trip_every_dtype_and_rank)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/model.safetensors", dir);
    enum { N = TR_NDTYPES * (TR_MAX_RANK + 1) + 2 };
    struct tr_st_tensor t[N];
    char names[N][32];
    int n = 0;
    for (int d = 0; d < TR_NDTYPES; d++)
        for (int rank = 0; rank <= TR_MAX_RANK; rank++, n++) {
            snprintf(names[n], sizeof names[n], "layer.%d.%s.rank%d", n, tr_dtype_name(d), rank);
            t[n] = (struct tr_st_tensor){.name = names[n], .dtype = (enum tr_dtype)d, .rank = rank};
            int64_t numel = 1;
            for (int i = 0; i < rank; i++)
                numel *= t[n].shape[i] = 1 + (i + d + rank) % 3;   /* odd sizes: 1, 2, 3 */
            t[n].bytes = (size_t)numel * tr_dtype_size(d);
        }
    t[n++] = (struct tr_st_tensor){.name = "empty.f32", .dtype = TR_F32, .rank = 3,
                                   .shape = {4, 0, 5}};
    t[n++] = (struct tr_st_tensor){.name = "empty.u8", .dtype = TR_U8, .rank = 1, .shape = {0}};
    void *data[N];
    for (int i = 0; i < n; i++) {
        data[i] = t[i].bytes ? tr_xmalloc(t[i].bytes) : NULL;
        fill(data[i], t[i].bytes, (unsigned)i);
        t[i].data = data[i];
    }
    struct tr_diag err = {0};
    ck_assert_msg(tr_st_write(path, t, n, NULL, &err) == 0, "%s", tr_diag_last(&err));
    expect_listing(dir, "model.safetensors\n");   /* no temporary file left */

    struct tr_safetensors st;
    ck_assert_msg(tr_st_open(&st, path, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, n);
    ck_assert_int_eq(st.n_metadata, 0);
    ck_assert_ptr_null(st.metadata[0]);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | ((const uint8_t *)st.mapping)[i];
    ck_assert_int_eq((8 + header_len) % 8, 0);   /* padded with spaces to 8 bytes */
    for (int i = 0; i < n; i++) {
        const struct tr_st_tensor *got = tr_st_find(&st, t[i].name);
        ck_assert_msg(got != NULL, "%s missing", t[i].name);
        ck_assert_str_eq(got->name, t[i].name);
        ck_assert_int_eq(got->dtype, t[i].dtype);
        ck_assert_int_eq(got->rank, t[i].rank);
        for (int k = 0; k < t[i].rank; k++)
            ck_assert_int_eq(got->shape[k], t[i].shape[k]);
        ck_assert_uint_eq(got->bytes, t[i].bytes);
        ck_assert(t[i].bytes == 0 || memcmp(got->data, t[i].data, t[i].bytes) == 0);
        /* laid out by element size: every tensor aligned to its element in the mapping */
        ck_assert_uint_eq((uintptr_t)got->data % tr_dtype_size(got->dtype), 0);
    }
    for (int i = 1; i < st.n; i++)   /* st.tensors is in file order, back to back */
        ck_assert_ptr_eq((const uint8_t *)st.tensors[i - 1].data + st.tensors[i - 1].bytes,
                         st.tensors[i].data);
    ck_assert_str_eq(tr_st_dtype_name(TR_BF16), "BF16");
    ck_assert_ptr_null(tr_st_find(&st, "layer.0"));
    ck_assert_ptr_null(tr_st_find(&st, ""));
    tr_st_close(&st);
    ck_assert_ptr_null(st.mapping);
    for (int i = 0; i < n; i++)
        free(data[i]);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* Values survive as values, not only as bytes: f32 and the 16-bit floats. */
START_TEST(round_trip_values)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/v.safetensors", dir);
    float f[4] = {1.5f, -0.0f, INFINITY, 3.25e-5f};
    uint16_t bf[4], h[4];
    for (int i = 0; i < 4; i++)
        bf[i] = tr_f32_to_bf16(f[i]), h[i] = tr_f32_to_f16(f[i]);
    int32_t ints[3] = {INT32_MIN, 0, INT32_MAX};
    double d = -1.0 / 3.0;
    struct tr_st_tensor t[] = {
        {.name = "f", .dtype = TR_F32, .rank = 2, .shape = {2, 2}, .data = f, .bytes = 16},
        {.name = "bf", .dtype = TR_BF16, .rank = 1, .shape = {4}, .data = bf, .bytes = 8},
        {.name = "h", .dtype = TR_F16, .rank = 1, .shape = {4}, .data = h, .bytes = 8},
        {.name = "i", .dtype = TR_I32, .rank = 1, .shape = {3}, .data = ints, .bytes = 12},
        {.name = "d", .dtype = TR_F64, .rank = 0, .data = &d, .bytes = 8},
    };
    struct tr_diag err = {0};
    ck_assert_msg(tr_st_write(path, t, 5, NULL, &err) == 0, "%s", tr_diag_last(&err));
    struct tr_safetensors st;
    ck_assert_msg(tr_st_open(&st, path, &err) == 0, "%s", tr_diag_last(&err));
    const float *gf = tr_st_find(&st, "f")->data;
    const uint16_t *gbf = tr_st_find(&st, "bf")->data, *gh = tr_st_find(&st, "h")->data;
    for (int i = 0; i < 4; i++) {
        ck_assert(memcmp(&gf[i], &f[i], 4) == 0);
        float got_bf = tr_bf16_to_f32(gbf[i]), want_bf = tr_bf16_to_f32(bf[i]);
        float got_h = tr_f16_to_f32(gh[i]), want_h = tr_f16_to_f32(h[i]);
        ck_assert(memcmp(&got_bf, &want_bf, 4) == 0);   /* bits: -0 stays -0 */
        ck_assert(memcmp(&got_h, &want_h, 4) == 0);
    }
    ck_assert_int_eq(((const int32_t *)tr_st_find(&st, "i")->data)[0], INT32_MIN);
    ck_assert_int_eq(tr_st_find(&st, "d")->rank, 0);
    ck_assert(*(const double *)tr_st_find(&st, "d")->data == d);
    tr_st_close(&st);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

START_TEST(metadata_round_trip)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/m.safetensors", dir);
    uint8_t one = 7;
    struct tr_st_tensor t = {.name = "x", .dtype = TR_U8, .rank = 1, .shape = {1}, .data = &one,
                             .bytes = 1};
    const char *const kv[] = {"format", "pt", "step", "1200",
                              "note", "quotes \" and \\ and\nnewline", "empty", "",
                              "unicode", "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82", NULL};
    struct tr_diag err = {0};
    ck_assert_msg(tr_st_write(path, &t, 1, kv, &err) == 0, "%s", tr_diag_last(&err));
    struct tr_safetensors st;
    ck_assert_msg(tr_st_open(&st, path, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n_metadata, 5);
    for (int i = 0; i < 10; i++)   /* in the order written */
        ck_assert_str_eq(st.metadata[i], kv[i]);
    ck_assert_ptr_null(st.metadata[10]);
    ck_assert_str_eq(tr_st_metadata(&st, "step"), "1200");
    ck_assert_str_eq(tr_st_metadata(&st, "empty"), "");
    ck_assert_ptr_null(tr_st_metadata(&st, "missing"));
    ck_assert_int_eq(st.n, 1);
    tr_st_close(&st);

    /* metadata alone, no tensors: an empty data buffer */
    ck_assert_msg(tr_st_write(path, NULL, 0, kv, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_msg(tr_st_open(&st, path, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, 0);
    ck_assert_ptr_null(tr_st_find(&st, "x"));
    ck_assert_str_eq(tr_st_metadata(&st, "format"), "pt");
    tr_st_close(&st);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* The writer's layout: by element size, largest first, then by name; the caller's order does
 * not matter, so the same tensors give the same bytes. */
START_TEST(writer_layout)
{
    char *dir = unit_mkdtemp();
    char *a = tr_strdup_printf("%s/a.safetensors", dir);
    char *b = tr_strdup_printf("%s/b.safetensors", dir);
    uint8_t bytes[3] = {1, 2, 3};
    float floats[2] = {1, 2};
    double doubles[2] = {3, 4};
    struct tr_st_tensor t[] = {
        {.name = "z", .dtype = TR_U8, .rank = 1, .shape = {3}, .data = bytes, .bytes = 3},
        {.name = "b", .dtype = TR_F64, .rank = 1, .shape = {1}, .data = doubles, .bytes = 8},
        {.name = "a", .dtype = TR_F32, .rank = 1, .shape = {2}, .data = floats, .bytes = 8},
        {.name = "a2", .dtype = TR_F64, .rank = 1, .shape = {1}, .data = doubles + 1, .bytes = 8},
    };
    struct tr_st_tensor reversed[] = {t[3], t[2], t[1], t[0]};
    struct tr_diag err = {0};
    ck_assert_msg(tr_st_write(a, t, 4, NULL, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_msg(tr_st_write(b, reversed, 4, NULL, &err) == 0, "%s", tr_diag_last(&err));
    size_t len_a, len_b;
    char *text_a = slurp(a, &len_a), *text_b = slurp(b, &len_b);
    ck_assert_uint_eq(len_a, len_b);
    ck_assert(memcmp(text_a, text_b, len_a) == 0);
    const char *header = "{\"a2\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                         "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]},"
                         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                         "\"z\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[24,27]}}";
    size_t n = strlen(header), padded = (n + 7) / 8 * 8;
    ck_assert_uint_eq(len_a, 8 + padded + 27);
    ck_assert_uint_eq((uint8_t)text_a[0] | (size_t)(uint8_t)text_a[1] << 8, padded);
    ck_assert(memcmp(text_a + 8, header, n) == 0);
    for (size_t i = n; i < padded; i++)
        ck_assert_int_eq(text_a[8 + i], ' ');
    free(text_a), free(text_b), free(b);
    remove_scratch(dir, a);
    tr_diag_free(&err);
}
END_TEST

/* A file written by hand from the format's description, as the Python package would write
 * it (metadata, tensors out of offset order in the JSON, header padded with spaces). */
START_TEST(hand_built_file)
{
    const char *header = "{\"__metadata__\":{\"format\":\"pt\"},"
                         "\"weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                         "\"ids\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[0,4]}}";
    size_t n = strlen(header), padded = (n + 7) / 8 * 8, len = 8 + padded + 12;
    uint8_t *buf = tr_xcalloc(1, len);
    put_u64le(buf, padded);
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, ' ', padded - n);
    uint8_t *data = buf + 8 + padded;
    memcpy(data, (uint8_t[]){9, 8, 7, 6}, 4);
    memcpy(data + 4, (uint8_t[]){0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0}, 8); /* 1.5, -2 */
    struct tr_safetensors st;
    struct tr_diag err = {0};
    ck_assert_msg(tr_st_parse(&st, buf, len, FILE_NAME, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, 2);
    ck_assert_str_eq(st.tensors[0].name, "ids");      /* file order */
    ck_assert_str_eq(st.tensors[1].name, "weight");
    ck_assert_ptr_null(st.mapping);
    const struct tr_st_tensor *ids = tr_st_find(&st, "ids"), *w = tr_st_find(&st, "weight");
    ck_assert_int_eq(ids->dtype, TR_U8);
    ck_assert_int_eq(ids->rank, 2);
    ck_assert_int_eq(ids->shape[0], 2);
    ck_assert_int_eq(ids->shape[1], 2);
    ck_assert_ptr_eq(ids->data, data);
    ck_assert_int_eq(((const uint8_t *)ids->data)[3], 6);
    ck_assert_int_eq(w->dtype, TR_F32);
    ck_assert_uint_eq(w->bytes, 8);
    float v[2];
    memcpy(v, w->data, 8);
    ck_assert(v[0] == 1.5f && v[1] == -2.0f);
    ck_assert_str_eq(tr_st_metadata(&st, "format"), "pt");
    tr_st_close(&st);

    /* the same without padding: legal, the data then starts unaligned */
    free(buf);
    buf = build("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &len);
    ck_assert_msg(tr_st_parse(&st, buf, len, NULL, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, 1);
    tr_st_close(&st);
    /* "__metadata__": null is no metadata, as the reference reader takes it */
    free(buf);
    buf = build("{\"__metadata__\":null}", 0, &len);
    ck_assert_msg(tr_st_parse(&st, buf, len, NULL, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n_metadata, 0);
    ck_assert_ptr_null(st.metadata[0]);
    tr_st_close(&st);
    /* an empty file: {} and no data */
    free(buf);
    buf = build("{}", 0, &len);
    ck_assert_msg(tr_st_parse(&st, buf, len, NULL, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, 0);
    ck_assert_int_eq(st.n_metadata, 0);
    tr_st_close(&st);
    free(buf);
    tr_diag_free(&err);
}
END_TEST

/* A file the Python package wrote (safetensors 0.8.0: serialize() of TensorSpecs over raw
 * buffers holding the values checked below), kept as its bytes: the header as text, padded
 * with two spaces by the package itself, then the 55 data bytes. */
static const char python_header[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"producer\":\"safetensors 0.8.0\"},"
    "\"x64\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
    "\"none\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
    "\"weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]},"
    "\"ids\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[24,36]},"
    "\"bias\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[36,42]},"
    "\"half\":{\"dtype\":\"F16\",\"shape\":[1,1,2],\"data_offsets\":[42,46]},"
    "\"mask\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[46,51]},"
    "\"r5\":{\"dtype\":\"U8\",\"shape\":[1,2,1,1,2],\"data_offsets\":[51,55]}}  ";
static const uint8_t python_data[] = {
    0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0xd5, 0xbf, 0x00, 0x00, 0xc0, 0x3f,
    0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x80, 0x3e, 0xca, 0xf2, 0x49, 0x71,
    0xf9, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0x7f,
    0xc0, 0x3f, 0x00, 0xc0, 0x80, 0x7f, 0x00, 0x3c, 0xff, 0xfb, 0x00, 0x01,
    0xfe, 0xff, 0x07, 0x0a, 0x0b, 0x0c, 0x0d,
};

START_TEST(python_reference_file)
{
    size_t n = strlen(python_header), len = 8 + n + sizeof python_data;
    ck_assert_uint_eq(n, 536);
    ck_assert_uint_eq(len, 599);   /* the size of the file Python wrote */
    uint8_t *buf = tr_xmalloc(len);
    put_u64le(buf, n);
    memcpy(buf + 8, python_header, n);
    memcpy(buf + 8 + n, python_data, sizeof python_data);
    struct tr_safetensors st;
    struct tr_diag err = {0};
    int rc = tr_st_parse(&st, buf, len, "python.safetensors", &err);
    ck_assert_msg(rc == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, 8);
    ck_assert_int_eq(st.n_metadata, 2);
    ck_assert_str_eq(tr_st_metadata(&st, "producer"), "safetensors 0.8.0");
    const char *order[] = {"x64", "none", "weight", "ids", "bias", "half", "mask", "r5"};
    for (int i = 0; i < 8; i++)
        ck_assert_str_eq(st.tensors[i].name, order[i]);
    double x64;
    memcpy(&x64, tr_st_find(&st, "x64")->data, 8);
    ck_assert(x64 == -1.0 / 3.0);
    ck_assert_int_eq(tr_st_find(&st, "x64")->rank, 0);
    float w[4];
    memcpy(w, tr_st_find(&st, "weight")->data, 16);
    ck_assert(w[0] == 1.5f && w[1] == -2.0f && w[2] == 0.25f && w[3] == 1e30f);
    int32_t ids[3];
    memcpy(ids, tr_st_find(&st, "ids")->data, 12);
    ck_assert(ids[0] == -7 && ids[1] == 0 && ids[2] == INT32_MAX);
    const struct tr_st_tensor *bias = tr_st_find(&st, "bias"), *half = tr_st_find(&st, "half");
    ck_assert_int_eq(bias->dtype, TR_BF16);
    uint16_t h[3];
    memcpy(h, bias->data, 6);
    ck_assert(tr_bf16_to_f32(h[0]) == 1.5f && tr_bf16_to_f32(h[1]) == -2.0f &&
              isinf(tr_bf16_to_f32(h[2])));
    ck_assert_int_eq(half->dtype, TR_F16);
    ck_assert_int_eq(half->rank, 3);
    memcpy(h, half->data, 4);
    ck_assert(tr_f16_to_f32(h[0]) == 1.0f && tr_f16_to_f32(h[1]) == -65504.0f);
    const struct tr_st_tensor *none = tr_st_find(&st, "none"), *r5 = tr_st_find(&st, "r5");
    ck_assert_uint_eq(none->bytes, 0);
    ck_assert_int_eq(none->shape[0], 0);
    ck_assert_int_eq(none->shape[1], 3);
    ck_assert_int_eq(r5->rank, 5);
    ck_assert_int_eq(((const uint8_t *)r5->data)[3], 0x0d);
    ck_assert_int_eq(((const uint8_t *)tr_st_find(&st, "mask")->data)[3], 255);
    tr_st_close(&st);
    free(buf);
    tr_diag_free(&err);
}
END_TEST

/* ---- hostile input -------------------------------------------------------------------------- */

#define T(name, body) "\"" name "\":{" body "}"
#define F32_4 "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]"

START_TEST(hostile_lengths)
{
    struct tr_safetensors st;   /* no buffer for the message: still refused */
    ck_assert_int_eq(tr_st_parse(&st, "", 0, FILE_NAME, NULL), TR_EINVAL);
    expect_buffer_error("", 0, TR_EINVAL,
                        FILE_NAME ": file is 0 bytes, too short for the 8-byte header length");
    expect_buffer_error("\x02\0\0\0\0", 5, TR_EINVAL,
                        FILE_NAME ": file is 5 bytes, too short for the 8-byte header length");
    uint8_t buf[18] = {0};
    put_u64le(buf, 100);
    memcpy(buf + 8, "{}", 2);
    expect_buffer_error(buf, sizeof buf, TR_EINVAL,
                        FILE_NAME ": header length 100 is more than the 10 bytes that follow it; "
                        "the file is truncated or not safetensors");
    put_u64le(buf, UINT64_MAX);   /* the length wraps if added to 8 without care */
    expect_buffer_error(buf, sizeof buf, TR_EINVAL,
                        FILE_NAME ": header length 18446744073709551615 is more than the 10 bytes "
                        "that follow it; the file is truncated or not safetensors");
    put_u64le(buf, UINT64_MAX - 7);
    expect_buffer_error(buf, sizeof buf, TR_EINVAL,
                        FILE_NAME ": header length 18446744073709551608 is more than the 10 bytes "
                        "that follow it; the file is truncated or not safetensors");
    /* past the 100 MB cap, though within the file: refused before jansson sees it */
    size_t big = 8 + (size_t)TR_ST_MAX_HEADER + 1;
    uint8_t *huge = calloc(1, big);
    ck_assert_ptr_nonnull(huge);
    put_u64le(huge, TR_ST_MAX_HEADER + 1);
    huge[8] = '{';
    expect_buffer_error(huge, big, TR_EINVAL,
                        FILE_NAME ": header length 100000001 is more than the "
                        "100000000-byte limit");
    free(huge);
    put_u64le(buf, 0);
    expect_buffer_error(buf, 8, TR_EINVAL,
                        FILE_NAME ": header is not a JSON object (it does not start with '{')");
}
END_TEST

START_TEST(hostile_json)
{
    const char *not_object = FILE_NAME ": header is not a JSON object (it does not start with '{')";
    expect_error("[1, 2]", 0, not_object);
    expect_error("\"a\"", 0, not_object);
    expect_error(" {}", 0, not_object);   /* the format: the header starts with '{' */
    expect_error("{\"a\":", 0, FILE_NAME ": header is not valid JSON: unexpected token near end "
                 "of file (byte 5 of the header)");
    expect_error("{} x", 0, FILE_NAME ": header is not valid JSON: end of file expected near 'x' "
                 "(byte 4 of the header)");
    expect_error("{'a':1}", 0, FILE_NAME ": header is not valid JSON: string or '}' expected "
                 "near ''' (byte 2 of the header)");
    /* a control byte in the header is escaped in the message, not printed */
    expect_error("{\"a\":\"x\" \x1b[2J}", 0, FILE_NAME ": header is not valid JSON: '}' "
                 "expected near '\\x1b' (byte 10 of the header)");   /* a terminal escape */
    expect_error("{\"a\x01\":1}", 0, FILE_NAME ": header is not valid JSON: control character "
                 "0x1 near '\"a' (byte 3 of the header)");
    expect_error("{\"a\":\"\xff\"}", 0, FILE_NAME ": header is not valid JSON: unable to decode "
                 "byte 0xff near '\"' (byte 6 of the header)");
    expect_error("{\"a\\u0000b\":{" F32_4 "}}", 4, FILE_NAME ": header is not valid JSON: NUL byte "
                 "in object key not supported near '\"a\\u0000b\"' (byte 11 of the header)");
    expect_error("{" T("a", F32_4) "," T("a", F32_4) "}", 4, FILE_NAME ": header is not valid "
                 "JSON: duplicate object key near '\"a\"' (byte 57 of the header)");
    /* the same name spelled two ways is still a duplicate */
    expect_error("{" T("a", F32_4) "," T("\\u0061", F32_4) "}", 4, FILE_NAME ": header is not "
                 "valid JSON: duplicate object key near '\"\\u0061\"' (byte 62 of the header)");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]")
                 "}", 4, FILE_NAME ": header is not valid JSON: too big integer near "
                 "'99999999999999999999' (byte 70 of the header)");
    /* nesting deep enough to exhaust the stack of a naive recursive parser */
    enum { DEPTH = 100000 };
    char *deep = tr_xmalloc(2 * DEPTH + 8);
    strcpy(deep, "{\"a\":");
    memset(deep + 5, '[', DEPTH);
    memset(deep + 5 + DEPTH, ']', DEPTH);
    strcpy(deep + 5 + 2 * DEPTH, "}");
    expect_error(deep, 0, FILE_NAME ": header is not valid JSON: maximum parsing depth reached "
                 "near '[' (byte 2053 of the header)");
    free(deep);
}
END_TEST

START_TEST(hostile_entries)
{
    expect_error("{\"a\":5}", 0, FILE_NAME ": tensor 'a': entry is not an object");
    expect_error("{\"a\":null}", 0, FILE_NAME ": tensor 'a': entry is not an object");
    expect_error("{" T("a", "\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': missing field 'dtype'");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': missing field 'shape'");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1]") "}", 4,
                 FILE_NAME ": tensor 'a': missing field 'data_offsets'");
    expect_error("{" T("a", "\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': dtype is not a string");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': shape is not an array");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': shape is not an array of integers");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': shape is not an array of integers");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]") "}", 4,
                 FILE_NAME ": tensor 'a': data_offsets is not an array of two integers");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]") "}", 4,
                 FILE_NAME ": tensor 'a': data_offsets is not an array of two integers");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]") "}", 4,
                 FILE_NAME ": tensor 'a': data_offsets is not an array of two integers");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"0\":4}") "}", 4,
                 FILE_NAME ": tensor 'a': data_offsets is not an array of two integers");
}
END_TEST

START_TEST(hostile_dtypes_and_shapes)
{
    expect_error("{" T("a", "\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': unknown dtype 'Q7'");
    expect_error("{" T("a", "\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
                 FILE_NAME ": tensor 'a': unknown dtype 'f32'");   /* names are upper case */
    const char *supported = "is not supported (supported: F32, BF16, F16, F64, I32, U8)";
    char want[256];
    snprintf(want, sizeof want, FILE_NAME ": tensor 'a': dtype I64 %s", supported);
    expect_error("{" T("a", "\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]") "}", 8, want);
    snprintf(want, sizeof want, FILE_NAME ": tensor 'a': dtype BOOL %s", supported);
    expect_error("{" T("a", "\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]") "}", 1, want);
    snprintf(want, sizeof want, FILE_NAME ": tensor 'a': dtype F8_E4M3 %s", supported);
    expect_error("{" T("a", "\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]") "}", 1, want);
    expect_error("{" T("a", "\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1],\"data_offsets\":[0,1]") "}",
                 1, FILE_NAME ": tensor 'a': rank 6 is more than the 5 supported");
    expect_error("{" T("a", "\"dtype\":\"U8\",\"shape\":[2,-3],\"data_offsets\":[0,1]") "}", 1,
                 FILE_NAME ": tensor 'a': shape dimension 1 is negative (-3)");
    /* 2^32·2^32 elements: numel overflows */
    expect_error("{" T("a", "\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                       "\"data_offsets\":[0,1]") "}", 1,
                 FILE_NAME ": tensor 'a': shape [4294967296, 4294967296] of U8 is too large: its "
                 "size in bytes overflows 64 bits");
    /* numel fits, numel·8 does not */
    expect_error("{" T("a", "\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
                       "\"data_offsets\":[0,1]") "}", 1,
                 FILE_NAME ": tensor 'a': shape [2305843009213693952] of F64 is too large: its "
                 "size in bytes overflows 64 bits");
    /* a zero dimension does not excuse the others: strides would overflow */
    expect_error("{" T("a", "\"dtype\":\"U8\",\"shape\":[0,9223372036854775807,2],"
                       "\"data_offsets\":[0,0]") "}", 0,
                 FILE_NAME ": tensor 'a': shape [0, 9223372036854775807, 2] of U8 is too large: "
                 "its size in bytes overflows 64 bits");
}
END_TEST

/* TR_ST_ANY_DTYPE (model.init reads other frameworks' checkpoints): the whole-byte dtypes the
 * engine lacks are listed, sized by the format's rules; the packed sub-byte ones and unknown
 * names are still refused. */
START_TEST(other_dtypes_listed_on_request)
{
    size_t len;
    uint8_t *buf = build("{" T("ids", "\"dtype\":\"I64\",\"shape\":[1,2],\"data_offsets\":[0,16]") ","
                         T("mask", "\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[20,22]") ","
                         T("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]") "}", 22, &len);
    struct tr_safetensors st;
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_st_parse(&st, buf, len, FILE_NAME, &err), TR_EINVAL);
    ck_assert_msg(tr_st_parse_with(&st, buf, len, FILE_NAME, TR_ST_ANY_DTYPE, &err) == 0, "%s", tr_diag_last(&err));
    const struct tr_st_tensor *ids = tr_st_find(&st, "ids"), *mask = tr_st_find(&st, "mask"),
                              *w = tr_st_find(&st, "w");
    ck_assert(ids && mask && w);
    ck_assert(ids->dtype == TR_ST_OTHER && !strcmp(ids->other_dtype, "I64") && ids->bytes == 16);
    ck_assert(mask->dtype == TR_ST_OTHER && !strcmp(mask->other_dtype, "BOOL") && mask->bytes == 2);
    ck_assert(w->dtype == TR_F32 && w->other_dtype == NULL);
    tr_st_close(&st);
    free(buf);

    static const struct { const char *header; size_t len; const char *message; } bad[] = {
        {"{" T("a", "\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
         FILE_NAME ": tensor 'a': data_offsets [0, 4] hold 4 bytes, but shape [1] of I64 needs 8"},
        {"{" T("a", "\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]") "}", 1,
         FILE_NAME ": tensor 'a': dtype F4 is not supported (supported: F32, BF16, F16, F64, I32, U8)"},
        {"{" T("a", "\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
         FILE_NAME ": tensor 'a': unknown dtype 'Q7'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        buf = build(bad[i].header, bad[i].len, &len);
        ck_assert_int_eq(tr_st_parse_with(&st, buf, len, FILE_NAME, TR_ST_ANY_DTYPE, &err), TR_EINVAL);
        ck_assert_str_eq(tr_diag_last(&err), bad[i].message);
        free(buf);
    }
    tr_diag_free(&err);
}
END_TEST

START_TEST(hostile_offsets)
{
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]") "}", 12,
                 FILE_NAME ": tensor 'a': data_offsets [0, 12] hold 12 bytes, but shape [2, 2] "
                 "of F32 needs 16");
    expect_error("{" T("a", "\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,0]") "}", 0,
                 FILE_NAME ": tensor 'a': data_offsets [0, 0] hold 0 bytes, but shape [] of U8 "
                 "needs 1");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]") "}", 4,
                 FILE_NAME ": tensor 'a': data_offsets [-4, 0] are negative");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]") "}", 8,
                 FILE_NAME ": tensor 'a': data_offsets [8, 4] end before they begin");
    /* truncated data: the last tensor runs past the end */
    expect_error("{" T("a", F32_4) "," T("b", "\"dtype\":\"F32\",\"shape\":[2],"
                 "\"data_offsets\":[4,12]") "}", 10,
                 FILE_NAME ": tensor 'b': data_offsets [4, 12] run past the end of the 10-byte "
                 "data buffer; the file may be truncated");
    /* far past the end, where begin + pointer would wrap */
    expect_error("{" T("a", "\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":"
                 "[9223372036854775806,9223372036854775807]") "}", 4,
                 FILE_NAME ": tensor 'a': data_offsets [9223372036854775806, 9223372036854775807] "
                 "run past the end of the 4-byte data buffer; the file may be truncated");
}
END_TEST

START_TEST(hostile_tiling)
{
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]") ","
                 T("b", "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]") "}", 12,
                 FILE_NAME ": tensors 'a' (bytes 0..8) and 'b' (bytes 4..12) overlap");
    /* two names for the same bytes */
    expect_error("{" T("a", F32_4) "," T("b", F32_4) "}", 4,
                 FILE_NAME ": tensors 'a' (bytes 0..4) and 'b' (bytes 0..4) overlap");
    /* an empty tensor inside another's bytes */
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]") ","
                 T("e", "\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]") "}", 8,
                 FILE_NAME ": tensors 'a' (bytes 0..8) and 'e' (bytes 4..4) overlap");
    expect_error("{" T("a", F32_4) "," T("b", "\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[8,12]") "}", 12,
                 FILE_NAME ": no tensor covers bytes 4..8 of the data buffer (the format allows "
                 "no holes)");
    expect_error("{" T("a", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]") "}", 8,
                 FILE_NAME ": no tensor covers bytes 0..4 of the data buffer (the format allows "
                 "no holes)");
    expect_error("{" T("a", F32_4) "}", 6, FILE_NAME ": no tensor covers bytes 4..6 of the data "
                 "buffer (the format allows no holes)");
    expect_error("{}", 3, FILE_NAME ": no tensor covers bytes 0..3 of the data buffer (the format "
                 "allows no holes)");
    /* empty tensors at boundaries are fine */
    size_t len;
    uint8_t *buf = build("{" T("a", F32_4) ","
                         T("e", "\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]") ","
                         T("f", "\"dtype\":\"F32\",\"shape\":[0, 3],\"data_offsets\":[0,0]") "}",
                         4, &len);
    struct tr_safetensors st;
    struct tr_diag err = {0};
    ck_assert_msg(tr_st_parse(&st, buf, len, FILE_NAME, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, 3);
    tr_st_close(&st);
    free(buf);
    tr_diag_free(&err);
}
END_TEST

START_TEST(hostile_metadata_and_names)
{
    expect_error("{\"__metadata__\":[\"a\"]}", 0, FILE_NAME ": __metadata__ is not an object");
    expect_error("{\"__metadata__\":\"a=b\"}", 0, FILE_NAME ": __metadata__ is not an object");
    expect_error("{\"__metadata__\":{\"step\":12}}", 0,
                 FILE_NAME ": __metadata__ value of 'step' is not a string");
    expect_error("{\"__metadata__\":{\"a\":\"b\",\"a\":\"c\"}}", 0, FILE_NAME ": header is not "
                 "valid JSON: duplicate object key near '\"a\"' (byte 28 of the header)");
    /* a name that would forge a second line in a log is escaped */
    expect_error("{" T("w\\nERROR: all good", "\"dtype\":\"Q\",\"shape\":[1],\"data_offsets\":[0,1]")
                 "}", 1, FILE_NAME ": tensor 'w\\x0aERROR: all good': unknown dtype 'Q'");
    /* a long name is cut, at a character boundary (é is two bytes) */
    char header[512], want[512];
    snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"Q\",\"shape\":[1],\"data_offsets\":[0,1]}}",
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    snprintf(want, sizeof want, FILE_NAME ": tensor '%.64s...': unknown dtype 'Q'", header + 2);
    expect_error(header, 1, want);
    memmove(header + 3, header + 2, strlen(header + 2) + 1);
    header[2] = 'x';   /* now the cut falls inside an é, which goes whole */
    snprintf(want, sizeof want, FILE_NAME ": tensor '%.63s...': unknown dtype 'Q'", header + 2);
    expect_error(header, 1, want);
    /* a tensor entry's unknown extra field is ignored, as the format leaves room for them */
    size_t len;
    uint8_t *buf = build("{" T("a", F32_4 ",\"extra\":[1]") "}", 4, &len);
    struct tr_safetensors st;
    struct tr_diag err = {0};
    ck_assert_msg(tr_st_parse(&st, buf, len, FILE_NAME, &err) == 0, "%s", tr_diag_last(&err));
    tr_st_close(&st);
    free(buf);
    tr_diag_free(&err);
}
END_TEST

/* Every prefix of a valid file fails cleanly (ASan watches the reads), and so does every
 * single-byte corruption of its length field. */
START_TEST(hostile_truncations)
{
    const char *header = "{\"__metadata__\":{\"k\":\"v\"}," T("a", F32_4) ","
                         T("b", "\"dtype\":\"BF16\",\"shape\":[2,1],\"data_offsets\":[4,8]") "}";
    size_t len;
    uint8_t *full = build(header, 8, &len);
    struct tr_safetensors st;
    struct tr_diag err = {0};
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *prefix = tr_xmalloc(cut ? cut : 1);   /* exactly cut bytes: ASan sees overreads */
        memcpy(prefix, full, cut);
        ck_assert_msg(tr_st_parse(&st, prefix, cut, FILE_NAME, &err) == TR_EINVAL,
                      "a %zu-byte prefix parsed", cut);
        ck_assert(strncmp(tr_diag_last(&err), FILE_NAME ": ", strlen(FILE_NAME) + 2) == 0);
        free(prefix);
    }
    for (int i = 0; i < 8; i++)
        for (int bit = 0; bit < 8; bit++) {
            full[i] ^= (uint8_t)(1u << bit);
            ck_assert_int_eq(tr_st_parse(&st, full, len, FILE_NAME, &err), TR_EINVAL);
            full[i] ^= (uint8_t)(1u << bit);
        }
    ck_assert_int_eq(tr_st_parse(&st, full, len, FILE_NAME, &err), 0);
    tr_st_close(&st);
    free(full);
    tr_diag_free(&err);
}
END_TEST

/* Opening from a path: missing, not a regular file, empty, truncated. */
START_TEST(open_errors)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/w.safetensors", dir), want[1024];
    struct tr_diag err = {0};
    struct tr_safetensors st;
    ck_assert_int_eq(tr_st_open(&st, path, &err), TR_EIO);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    ck_assert_str_eq(tr_diag_last(&err), want);
    ck_assert_int_eq(tr_st_open(&st, dir, &err), TR_EINVAL);
    snprintf(want, sizeof want, "%s: not a regular file", dir);
    ck_assert_str_eq(tr_diag_last(&err), want);
    unit_write(path, "");
    ck_assert_int_eq(tr_st_open(&st, path, &err), TR_EINVAL);
    snprintf(want, sizeof want, "%s: file is 0 bytes, too short for the 8-byte header length",
             path);
    ck_assert_str_eq(tr_diag_last(&err), want);

    float x[4] = {1, 2, 3, 4};
    struct tr_st_tensor t = {.name = "x", .dtype = TR_F32, .rank = 1, .shape = {4}, .data = x,
                             .bytes = 16};
    ck_assert_msg(tr_st_write(path, &t, 1, NULL, &err) == 0, "%s", tr_diag_last(&err));
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(truncate(path, sb.st_size - 1), 0);   /* a copy cut short */
    ck_assert_int_eq(tr_st_open(&st, path, &err), TR_EINVAL);
    snprintf(want, sizeof want, "%s: tensor 'x': data_offsets [0, 16] run past the end of the "
             "15-byte data buffer; the file may be truncated", path);
    ck_assert_str_eq(tr_diag_last(&err), want);
    ck_assert_ptr_null(st.mapping);
    ck_assert_int_eq(truncate(path, 20), 0);   /* cut inside the header */
    ck_assert_int_eq(tr_st_open(&st, path, &err), TR_EINVAL);
    snprintf(want, sizeof want, "%s: header length %lld is more than the 12 bytes that follow it; "
             "the file is truncated or not safetensors", path, (long long)sb.st_size - 8 - 16);
    ck_assert_str_eq(tr_diag_last(&err), want);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* ---- the writer: bad input and atomicity ---------------------------------------------------- */

START_TEST(writer_rejects_bad_input)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/x.safetensors", dir), want[1024];
    struct tr_diag err = {0};
    float x[4] = {0};
    struct tr_st_tensor ok = {.name = "x", .dtype = TR_F32, .rank = 1, .shape = {4}, .data = x,
                              .bytes = 16};
    struct {
        struct tr_st_tensor t[2];
        int n;
        const char *const *kv;
        const char *message;
    } cases[] = {
        {{{.name = "x", .dtype = TR_F32, .rank = 1, .shape = {4}, .data = x, .bytes = 12}}, 1, NULL,
         "tensor 'x': bytes is 12, but shape [4] of F32 needs 16"},
        {{ok, ok}, 2, NULL, "tensor 'x' is given twice"},
        {{{.name = "__metadata__", .dtype = TR_U8, .rank = 1, .shape = {1}, .data = x, .bytes = 1}},
         1, NULL, "a tensor may not be called __metadata__"},
        {{{.name = NULL, .dtype = TR_U8, .rank = 1, .shape = {1}, .data = x, .bytes = 1}}, 1, NULL,
         "a tensor has no name"},
        {{{.name = "x", .dtype = TR_NDTYPES, .rank = 1, .shape = {1}, .data = x, .bytes = 1}}, 1,
         NULL, "tensor 'x': invalid dtype 6"},
        {{{.name = "x", .dtype = TR_U8, .rank = 6, .data = x, .bytes = 1}}, 1, NULL,
         "tensor 'x': rank 6 is not 0 to 5"},
        {{{.name = "x", .dtype = TR_U8, .rank = 2, .shape = {2, -1}, .data = x, .bytes = 1}}, 1,
         NULL, "tensor 'x': shape [2, -1] has a negative dimension"},
        {{{.name = "x", .dtype = TR_U8, .rank = 1, .shape = {4}, .data = NULL, .bytes = 4}}, 1,
         NULL, "tensor 'x': data is NULL"},
        {{{.name = "bad\xff", .dtype = TR_U8, .rank = 1, .shape = {1}, .data = x, .bytes = 1}}, 1,
         NULL, "tensor name 'bad\xff' is not valid UTF-8"},
        {{ok}, 1, (const char *const[]){"k", NULL}, "metadata key 'k' has no value"},
        {{ok}, 1, (const char *const[]){"k", "1", "k", "2", NULL},
         "metadata key 'k' is given twice"},
        {{ok}, 1, (const char *const[]){"k", "\xc3", NULL}, "metadata 'k' is not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ck_assert_int_eq(tr_st_write(path, cases[i].t, cases[i].n, cases[i].kv, &err),
                         TR_EINVAL);
        snprintf(want, sizeof want, "%s: %s", path, cases[i].message);
        ck_assert_str_eq(tr_diag_last(&err), want);
        expect_listing(dir, "");   /* nothing created */
    }
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* A header the reader would refuse is not written: 100 MB of metadata. */
START_TEST(writer_refuses_oversized_header)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/x.safetensors", dir), want[1024];
    struct tr_diag err = {0};
    char *value = tr_xmalloc(TR_ST_MAX_HEADER + 1);
    memset(value, 'a', TR_ST_MAX_HEADER);
    value[TR_ST_MAX_HEADER] = '\0';
    const char *const kv[] = {"k", value, NULL};
    ck_assert_int_eq(tr_st_write(path, NULL, 0, kv, &err), TR_EINVAL);
    snprintf(want, sizeof want, "%s: the header would be 100000025 bytes, more than the "
             "100000000-byte limit", path);
    ck_assert_str_eq(tr_diag_last(&err), want);
    expect_listing(dir, "");
    free(value);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* A temporary file left by a crashed run with our pid (a container's pid 1) is replaced, not
 * a reason to fail every later checkpoint. */
START_TEST(stale_temporary_is_replaced)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/x.safetensors", dir);
    struct tr_diag err = {0};
    char *stale = tr_strdup_printf("%s.tmp.%ld", path, (long)getpid());
    unit_write(stale, "half a checkpoint");
    uint8_t b = 1;
    struct tr_st_tensor t = {.name = "b", .dtype = TR_U8, .rank = 1, .shape = {1}, .data = &b,
                             .bytes = 1};
    ck_assert_msg(tr_st_write(path, &t, 1, NULL, &err) == 0, "%s", tr_diag_last(&err));
    expect_listing(dir, "x.safetensors\n");
    struct tr_safetensors st;
    ck_assert_msg(tr_st_open(&st, path, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(st.n, 1);
    tr_st_close(&st);
    free(stale);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* A missing folder: refused before anything is written. */
START_TEST(write_to_missing_directory)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/nowhere/x.safetensors", dir), want[1024];
    struct tr_diag err = {0};
    uint8_t b = 1;
    struct tr_st_tensor t = {.name = "b", .dtype = TR_U8, .rank = 1, .shape = {1}, .data = &b,
                             .bytes = 1};
    ck_assert_int_eq(tr_st_write(path, &t, 1, NULL, &err), TR_EIO);
    snprintf(want, sizeof want, "%s: cannot create %s.tmp.%ld: No such file or directory", path,
             path, (long)getpid());
    ck_assert_str_eq(tr_diag_last(&err), want);
    expect_listing(dir, "");
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* A folder the writer may not write in. As root, permission bits do not bind: the test then
 * writes as nobody (seteuid, undone after), which is what a shared read-only folder is. */
START_TEST(write_to_read_only_directory)
{
    char *dir = unit_mkdtemp();
    char *ro = tr_strdup_printf("%s/ro", dir);
    char *path = tr_strdup_printf("%s/x.safetensors", ro), want[1024];
    struct tr_diag err = {0};
    ck_assert_int_eq(mkdir(ro, 0755), 0);
    uint8_t b = 1;
    struct tr_st_tensor t = {.name = "b", .dtype = TR_U8, .rank = 1, .shape = {1}, .data = &b,
                             .bytes = 1};
    ck_assert_msg(tr_st_write(path, &t, 1, NULL, &err) == 0, "%s", tr_diag_last(&err));
    size_t old_len;
    char *old = slurp(path, &old_len);
    ck_assert_int_eq(chmod(ro, 0555), 0);
    ck_assert_int_eq(chmod(dir, 0755), 0);
    uid_t uid = geteuid();
    if (uid == 0) {
        struct passwd *nobody = getpwnam("nobody");
        ck_assert_int_eq(seteuid(nobody ? nobody->pw_uid : 65534), 0);
    }
    b = 2;
    int rc = tr_st_write(path, &t, 1, NULL, &err);
    if (uid == 0)
        ck_assert_int_eq(seteuid(0), 0);
    ck_assert_int_eq(rc, TR_EIO);
    snprintf(want, sizeof want, "%s: cannot create %s.tmp.%ld: Permission denied", path, path,
             (long)getpid());
    ck_assert_str_eq(tr_diag_last(&err), want);
    expect_listing(ro, "x.safetensors\n");
    size_t len;
    char *now = slurp(path, &len);
    ck_assert(len == old_len && memcmp(now, old, len) == 0);
    chmod(ro, 0755);
    free(old), free(now), free(ro);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* The disk fills mid-write (RLIMIT_FSIZE stands in for ENOSPC): the temporary file goes,
 * the old checkpoint stays byte for byte. */
START_TEST(failed_write_keeps_existing_file)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/ckpt.safetensors", dir), want[1024];
    struct tr_diag err = {0};
    float small[2] = {1, 2};
    struct tr_st_tensor t = {.name = "w", .dtype = TR_F32, .rank = 1, .shape = {2}, .data = small,
                             .bytes = 8};
    ck_assert_msg(tr_st_write(path, &t, 1, NULL, &err) == 0, "%s", tr_diag_last(&err));
    size_t old_len;
    char *old = slurp(path, &old_len);

    enum { BIG = 1 << 16 };
    float *big = tr_xcalloc(BIG, sizeof *big);
    struct tr_st_tensor t2 = {.name = "w", .dtype = TR_F32, .rank = 1, .shape = {BIG}, .data = big,
                              .bytes = BIG * sizeof *big};
    struct rlimit saved, small_files = {.rlim_cur = 4096};
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small_files.rlim_max = saved.rlim_max;
    void (*saved_handler)(int) = signal(SIGXFSZ, SIG_IGN);   /* EFBIG, not death by SIGXFSZ */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small_files), 0);
    int rc = tr_st_write(path, &t2, 1, NULL, &err);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, saved_handler);
    ck_assert_int_eq(rc, TR_EIO);
    snprintf(want, sizeof want, "%s: cannot write %s.tmp.%ld: File too large; left unchanged",
             path, path, (long)getpid());
    ck_assert_str_eq(tr_diag_last(&err), want);
    expect_listing(dir, "ckpt.safetensors\n");
    size_t len;
    char *now = slurp(path, &len);
    ck_assert(len == old_len && memcmp(now, old, len) == 0);
    free(old), free(now), free(big);
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* The last step fails: the target is a folder, so rename refuses; no temporary file stays. */
START_TEST(failed_rename_leaves_no_temporary)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/taken", dir), want[1024];
    struct tr_diag err = {0};
    ck_assert_int_eq(mkdir(path, 0755), 0);
    free(unit_write_in(path, "keep", "x"));
    uint8_t b = 1;
    struct tr_st_tensor t = {.name = "b", .dtype = TR_U8, .rank = 1, .shape = {1}, .data = &b,
                             .bytes = 1};
    ck_assert_int_eq(tr_st_write(path, &t, 1, NULL, &err), TR_EIO);
    snprintf(want, sizeof want, "%s: cannot rename %s.tmp.%ld over it: Is a directory; left "
             "unchanged", path, path, (long)getpid());
    ck_assert_str_eq(tr_diag_last(&err), want);
    expect_listing(dir, "taken\n");
    expect_listing(path, "keep\n");
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

/* A write replaces the old file; a reader holding the old one open keeps seeing it. */
START_TEST(replace_under_open_reader)
{
    char *dir = unit_mkdtemp();
    char *path = tr_strdup_printf("%s/r.safetensors", dir);
    struct tr_diag err = {0};
    int32_t v = 1;
    struct tr_st_tensor t = {.name = "v", .dtype = TR_I32, .rank = 0, .data = &v, .bytes = 4};
    ck_assert_msg(tr_st_write(path, &t, 1, NULL, &err) == 0, "%s", tr_diag_last(&err));
    struct tr_safetensors old, now;
    ck_assert_msg(tr_st_open(&old, path, &err) == 0, "%s", tr_diag_last(&err));
    v = 2;
    ck_assert_msg(tr_st_write(path, &t, 1, NULL, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_msg(tr_st_open(&now, path, &err) == 0, "%s", tr_diag_last(&err));
    ck_assert_int_eq(*(const int32_t *)tr_st_find(&old, "v")->data, 1);
    ck_assert_int_eq(*(const int32_t *)tr_st_find(&now, "v")->data, 2);
    tr_st_close(&old);
    tr_st_close(&now);
    expect_listing(dir, "r.safetensors\n");
    remove_scratch(dir, path);
    tr_diag_free(&err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("read and write");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, round_trip_every_dtype_and_rank);
    tcase_add_test(tc, round_trip_values);
    tcase_add_test(tc, metadata_round_trip);
    tcase_add_test(tc, writer_layout);
    tcase_add_test(tc, hand_built_file);
    tcase_add_test(tc, python_reference_file);
    tcase_add_test(tc, open_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile input");
    tcase_add_test(tc, hostile_lengths);
    tcase_add_test(tc, hostile_json);
    tcase_add_test(tc, hostile_entries);
    tcase_add_test(tc, hostile_dtypes_and_shapes);
    tcase_add_test(tc, other_dtypes_listed_on_request);
    tcase_add_test(tc, hostile_offsets);
    tcase_add_test(tc, hostile_tiling);
    tcase_add_test(tc, hostile_metadata_and_names);
    tcase_add_test(tc, hostile_truncations);
    suite_add_tcase(s, tc);
    tc = tcase_create("atomic write");
    tcase_add_test(tc, writer_rejects_bad_input);
    tcase_add_test(tc, writer_refuses_oversized_header);
    tcase_add_test(tc, stale_temporary_is_replaced);
    tcase_add_test(tc, write_to_missing_directory);
    tcase_add_test(tc, write_to_read_only_directory);
    tcase_add_test(tc, failed_write_keeps_existing_file);
    tcase_add_test(tc, failed_rename_leaves_no_temporary);
    tcase_add_test(tc, replace_under_open_reader);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
