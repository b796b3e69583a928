/* Unit tests of src/data/: SHA-256 against the FIPS 180-4 examples, data set definitions,
 * CSV and IDX files (good ones, and broken ones each with the exact sentence expected), the
 * real digits, iris, Austen and (when Debian's packages are installed) Fashion-MNIST and
 * WordNet sets, splits and normalisation; text: TSV and JSON Lines samples tokenised with
 * [CLS]/[SEP] and cut, language-model windows, lines: ranges and lists of files, prepare
 * scripts run once and cached; and the loader's stream: complete epochs, one order for any
 * thread count, seek, drop_last and the batches a consumer holds. */
#include "runner.h"
#include <stdarg.h>
#include <stdint.h>
#include <math.h>
#include <zlib.h>

#include "data/dataset.h"
#include "data/csv.h"
#include "data/files.h"
#include "data/loader.h"
#include "data/sha256.h"
#include "data/shuffle.h"
#include "recipe/recipe.h"
#include "unit.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_gz(const char *path, const void *data, size_t len)
{
    gzFile gz = gzopen(path, "wb");
    ck_assert_msg(gz != NULL, "cannot write %s", path);
    ck_assert_int_eq(gzwrite(gz, data, (unsigned)len), (int)len);
    ck_assert_int_eq(gzclose(gz), Z_OK);
}

/* Loads dir/dataset.yaml holding yaml; returns rc, the diagnostics in *text (caller frees). */
static int load_yaml(const char *dir, const char *yaml, struct tr_data *d, char **text)
{
    char *path = unit_write_in(dir, "dataset.yaml", yaml);
    struct tr_diag diag = {0};
    int rc = tr_data_load_definition(path, d, &diag);
    *text = unit_diag_text(&diag);
    tr_diag_free(&diag);
    free(path);
    return rc;
}

/* A CSV file d.csv holding csv, read by a definition with the given extra lines. */
static int load_csv(const char *dir, const char *csv, const char *extra, struct tr_data *d, char **text)
{
    free(unit_write_in(dir, "d.csv", csv));
    char *yaml = tr_strdup_printf("format: csv\nsource: d.csv\nsplit: {valid: 0, test: 0}\n%s", extra);
    int rc = load_yaml(dir, yaml, d, text);
    free(yaml);
    return rc;
}

/* "dir/line\n", with "{dir}" in line standing for dir too. Caller frees. */
static char *expected_line(const char *dir, const char *line)
{
    const char *at = strstr(line, "{dir}");
    return at ? tr_strdup_printf("%s/%.*s%s%s\n", dir, (int)(at - line), line, dir, at + 5)
              : tr_strdup_printf("%s/%s\n", dir, line);
}

/* Loading must fail with exactly this one line, placed in the scratch folder. */
static void expect_csv_error(const char *csv, const char *extra, const char *line)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    int rc = load_csv(dir, csv, extra, &d, &text);
    char *want = expected_line(dir, line);
    ck_assert_msg(rc != 0, "loaded, expected: %s", want);
    ck_assert_str_eq(text, want);
    ck_assert_ptr_null(d.train.x);   /* nothing left to free */
    free(want);
    free(text);
    unit_rmtree(dir);
    free(dir);
}

static const char *datasets_dir(void)
{
    static char path[4096];
    const char *src = getenv("srcdir");
    snprintf(path, sizeof path, "%s/datasets", src && *src ? src : ".");
    return path;
}

/* The data set named in datasets/, loaded through a recipe as trainrun loads it. */
static int load_named(const char *name, struct tr_data *d, char **text)
{
    struct tr_recipe r;
    struct tr_diag diag = {0};
    char *yaml = tr_strdup_printf("model: {arch: mlp}\ndata: {dataset: %s}\n", name);
    ck_assert_int_eq(tr_recipe_load_string(&r, yaml, strlen(yaml), "r.yaml", NULL, 0, &diag), 0);
    int rc = tr_data_load(&r, datasets_dir(), d, &diag);
    *text = unit_diag_text(&diag);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
    free(yaml);
    return rc;
}

/* Every normalised value of s (tr_split_rows: floats, or images kept as bytes) within [lo, hi], both met. */
static void expect_range(const struct tr_split *s, float lo, float hi)
{
    int64_t f = tr_split_features(s);
    float min = INFINITY, max = -INFINITY, *row = malloc((size_t)f * sizeof *row);
    for (int64_t i = 0; i < s->n; i++) {
        tr_split_rows(s, &i, 1, row);
        for (int64_t j = 0; j < f; j++)
            min = fminf(min, row[j]), max = fmaxf(max, row[j]);
    }
    free(row);
    ck_assert_msg(min == lo && max == hi, "values from %g to %g, expected %g to %g", min, max, lo, hi);
}

/* ---- SHA-256 -------------------------------------------------------------------------------- */

static const struct { const char *message; const char *digest; } fips[] = {
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",   /* 448 bits */
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
     "mnopqrstnopqrstu",   /* 896 bits */
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

START_TEST(sha256_fips_vectors)
{
    char hex[65];
    tr_sha256_of(fips[_i].message, strlen(fips[_i].message), hex);
    ck_assert_str_eq(hex, fips[_i].digest);
}
END_TEST

/* A million 'a's, fed in uneven pieces so every path through update's buffering runs. */
START_TEST(sha256_million_a)
{
    static char a[1000000];
    memset(a, 'a', sizeof a);
    struct tr_sha256 s;
    unsigned char digest[32];
    char hex[65];
    tr_sha256_init(&s);
    for (size_t at = 0, piece = 1; at < sizeof a; at += piece, piece = piece * 7 % 131 + 1)
        tr_sha256_update(&s, a + at, piece < sizeof a - at ? piece : sizeof a - at);
    tr_sha256_final(&s, digest);
    tr_sha256_hex(digest, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    tr_sha256_of(a, sizeof a, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* Lengths around the padding's block boundary (55, 56, 63, 64 bytes) hash alike in one call
 * and byte by byte. */
START_TEST(sha256_pieces_match_whole)
{
    char text[200], whole[65], pieces[65];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)('A' + i % 53);
    for (size_t len = 0; len < sizeof text; len++) {
        tr_sha256_of(text, len, whole);
        struct tr_sha256 s;
        unsigned char digest[32];
        tr_sha256_init(&s);
        for (size_t i = 0; i < len; i++)
            tr_sha256_update(&s, text + i, 1);
        tr_sha256_final(&s, digest);
        tr_sha256_hex(digest, pieces);
        ck_assert_msg(!strcmp(whole, pieces), "length %zu", len);
    }
}
END_TEST

/* ---- the shuffle ----------------------------------------------------------------------------- */

START_TEST(shuffle_is_a_seeded_permutation)
{
    enum { N = 1000 };
    static int64_t a[N], b[N];
    for (int i = 0; i < N; i++)
        a[i] = b[i] = i;
    tr_shuffle(a, N, 42);
    tr_shuffle(b, N, 42);
    ck_assert_mem_eq(a, b, sizeof a);
    int seen[N] = {0}, moved = 0;
    for (int i = 0; i < N; i++) {
        ck_assert(a[i] >= 0 && a[i] < N && !seen[a[i]]);
        seen[a[i]] = 1;
        moved += a[i] != i;
    }
    ck_assert_int_gt(moved, N * 9 / 10);
    for (int i = 0; i < N; i++)
        b[i] = i;
    tr_shuffle(b, N, 43);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    /* The generator is splitmix64 as published: its first output from state 0. */
    uint64_t state = 0;
    ck_assert_uint_eq(tr_splitmix64(&state), UINT64_C(0xe220a8397b1dcdaf));
    ck_assert_uint_ne(tr_epoch_seed(7, 0), tr_epoch_seed(7, 1));
    ck_assert_uint_ne(tr_epoch_seed(7, 0), tr_epoch_seed(8, 0));
}
END_TEST

/* ---- CSV ------------------------------------------------------------------------------------ */

START_TEST(csv_reads_numbers_and_labels)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    int rc = load_csv(dir, "a, b ,kind\r\n1.5,-2e1,1\r\n\r\n3,4,0\r\n", "label: kind\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.train.n, 2);
    ck_assert_int_eq(d.train.rank, 1);
    ck_assert_int_eq(d.train.dims[0], 2);
    ck_assert_int_eq(d.valid.n, 0);
    ck_assert_int_eq(d.test.n, 0);
    ck_assert_float_eq(d.train.x[0], 1.5f);
    ck_assert_float_eq(d.train.x[1], -20.0f);
    ck_assert_float_eq(d.train.x[2], 3.0f);
    ck_assert_int_eq(d.train.y[0], 1);
    ck_assert_int_eq(d.train.y[1], 0);
    ck_assert_int_eq(d.nclasses, 2);   /* the largest label + 1 */
    ck_assert_str_eq(d.class_names[1], "1");
    ck_assert_ptr_null(d.class_names[2]);
    ck_assert_str_eq(d.name, strrchr(dir, '/') + 1);   /* the definition's folder */
    tr_data_free(&d);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(csv_label_columns)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    ck_assert_int_eq(load_csv(dir, "2,7,8\n1,5,6\n", "label: first\n", &d, &text), 0);
    ck_assert_int_eq(d.train.y[0], 2);
    ck_assert_float_eq(d.train.x[0], 7.0f);
    ck_assert_int_eq(d.nclasses, 3);
    tr_data_free(&d);
    free(text);
    ck_assert_int_eq(load_csv(dir, "7,2,8\n5,1,6\n", "label: 1\n", &d, &text), 0);
    ck_assert_int_eq(d.train.y[1], 1);
    ck_assert_float_eq(d.train.x[1], 8.0f);
    tr_data_free(&d);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* scikit-learn's header gives the class names and the sample count. */
START_TEST(csv_sklearn_header)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    int rc = load_csv(dir, "3,2,cat,dog\n1,2,0\n3,4,1\n5,6,1\n", "", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.train.n, 3);
    ck_assert_int_eq(d.nclasses, 2);
    ck_assert_str_eq(d.class_names[0], "cat");
    ck_assert_str_eq(d.class_names[1], "dog");
    tr_data_free(&d);
    free(text);
    /* Class names that are numbers: told apart from data by n_features + 1 columns below. */
    rc = load_csv(dir, "2,2,0,1,2\n1,2,0\n3,4,2\n", "", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.train.n, 2);
    ck_assert_int_eq(d.nclasses, 3);
    tr_data_free(&d);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(csv_gzip_and_sha256)
{
    char *dir = unit_mkdtemp(), *text, hex[65];
    const char csv[] = "1,2,0\n3,4,1\n";
    char *path = tr_strdup_printf("%s/d.csv.gz", dir);
    write_gz(path, csv, strlen(csv));
    tr_sha256_of(csv, strlen(csv), hex);   /* of the decompressed content */
    char *yaml = tr_strdup_printf("format: csv\nsource: d.csv.gz\nsha256: %s\nsplit: {valid: 0, test: 0}\n", hex);
    struct tr_data d;
    ck_assert_msg(load_yaml(dir, yaml, &d, &text) == 0, "%s", text);
    ck_assert_int_eq(d.train.n, 2);
    ck_assert_float_eq(d.train.x[2], 3.0f);
    tr_data_free(&d);
    free(text);
    free(yaml);

    const char *zero = "0000000000000000000000000000000000000000000000000000000000000000";
    yaml = tr_strdup_printf("format: csv\nsource: d.csv.gz\nsha256: %s\n", zero);
    ck_assert_int_ne(load_yaml(dir, yaml, &d, &text), 0);
    char *want = tr_strdup_printf("%s: sha256 mismatch: expected %s (%s/dataset.yaml:3:9), got %s\n", path,
                                  zero, dir, hex);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    free(yaml);

    /* A gzip stream cut short is refused, whatever its first bytes held. */
    FILE *f = fopen(path, "rb");
    unsigned char gz[256];
    size_t n = fread(gz, 1, sizeof gz, f);
    fclose(f);
    write_bytes(path, gz, n - 6);
    ck_assert_int_ne(load_yaml(dir, "format: csv\nsource: d.csv.gz\n", &d, &text), 0);
    want = tr_strdup_printf("%s: corrupt or truncated gzip data: unexpected end of file\n", path);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    free(path);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(csv_errors)
{
    expect_csv_error("1,2,0\n3,x,1\n", "", "d.csv:2:3: 'x' is not a number");
    expect_csv_error("1,2,0\n3,  0x1F,1\n", "", "d.csv:2:5: '0x1F' is not a number");
    expect_csv_error("1,2,0\n3,nan,1\n", "", "d.csv:2:3: missing value ('nan'); set missing: drop, zero or "
                     "mean to accept such cells");
    expect_csv_error("1,2,0\n3,inf,1\n", "", "d.csv:2:3: 'inf' is not a number");
    expect_csv_error("1,2,0\n3,1e999,1\n", "", "d.csv:2:3: '1e999' is out of range for a float");
    expect_csv_error("1,2,0\n3,,1\n", "", "d.csv:2:3: missing value (an empty cell); set missing: drop, zero "
                     "or mean to accept such cells");
    expect_csv_error("1,2,0\n3,1\n", "", "d.csv:2:1: expected 3 columns, found 2");
    expect_csv_error("1,2,0\n\n\n3,1,4,1\n", "", "d.csv:4:1: expected 3 columns, found 4");
    expect_csv_error("", "", "d.csv: the file is empty");
    expect_csv_error("\n \n", "", "d.csv: the file is empty");
    expect_csv_error("a,b,label\n", "", "d.csv: the file holds no samples: only a header line");
    expect_csv_error("1,2,0\n3,4,2\n", "num_classes: 2\n", "d.csv:2:5: label 2 is out of range: 2 classes (0 to 1)");
    expect_csv_error("1\n2\n", "", "d.csv:1:1: a row needs at least one feature and a label; this one has 1 column");
    expect_csv_error("3,2,a,b\n1,2,0\n3,4,1\n", "", "d.csv:1:1: the header says 3 samples; the file holds 2");
    expect_csv_error("2,2,a,b\n1,2,0\n", "class_names: [a, b, c]\n",
                     "d.csv:1:1: the header names 2 classes; the definition says 3");
    expect_csv_error("2,2,a,b\n1,2,0\n3,4,1\n", "class_names: [a, c]\n",
                     "d.csv:1:1: the header names class 1 'b'; the definition calls it 'c'");
    expect_csv_error("a,b\n1,2\n", "header: sklearn\n",
                     "d.csv:1:1: expected scikit-learn's header line n_samples,n_features,class names…");
    expect_csv_error("x,y\n1,2\n", "header: none\n",
                     "d.csv:1:1: 'x' is not a number (if this line names the columns, set header: true)");
    /* A header promising a billion columns is refused at the first row, before allocating. */
    expect_csv_error("2,1000000000,a,b\n1,2,0\n", "header: sklearn\n", "d.csv:2:1: expected 1000000001 columns, "
                     "found 3");
    expect_csv_error("1,2,0\n", "shape: [3]\n", "dataset.yaml: shape: holds 3 features a sample, but {dir}/d.csv has 2");
}
END_TEST

/* The train file's classes are every split's: the test file's ids follow them, and a label the
 * train file never had is refused at its place in the test file. */
START_TEST(csv_pool_classes_bind_later_files)
{
    char *dir = unit_mkdtemp(), *text;
    free(unit_write_in(dir, "train.csv", "x,kind\n1,b\n2,c\n3,a\n"));
    free(unit_write_in(dir, "test.csv", "x,kind\n4,c\n5,c\n"));
    free(unit_write_in(dir, "bad.csv", "x,kind\n4,c\n5,d\n"));
    struct tr_data d;
    ck_assert_msg(load_yaml(dir, "format: csv\ntrain: {source: train.csv}\ntest: {source: test.csv}\nlabel: kind\n"
                            "split: {valid: 0}\n", &d, &text) == 0, "%s", text);
    free(text);
    ck_assert_int_eq(d.nclasses, 3);
    ck_assert_str_eq(d.class_names[2], "c");
    ck_assert_int_eq(d.test.y[0], 2);
    ck_assert_int_eq(d.test.y[1], 2);
    tr_data_free(&d);
    ck_assert_int_ne(load_yaml(dir, "format: csv\ntrain: {source: train.csv}\ntest: {source: bad.csv}\nlabel: kind\n"
                               "split: {valid: 0}\n", &d, &text), 0);
    char *want = tr_strdup_printf("%s/bad.csv:3:3: label 'd' is not one of the 3 classes (a, …) nor a class number "
                                  "below 3; did you mean 'a'?\n", dir);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* missing: mean fills every file with the pool's column means (before the split). */
START_TEST(csv_mean_comes_from_the_pool)
{
    char *dir = unit_mkdtemp(), *text;
    free(unit_write_in(dir, "train.csv", "a,b,kind\n1,10,x\n3,,y\nNA,30,x\n"));
    free(unit_write_in(dir, "test.csv", "a,b,kind\n,,y\n"));
    struct tr_data d;
    ck_assert_msg(load_yaml(dir, "format: csv\ntrain: {source: train.csv}\ntest: {source: test.csv}\nheader: true\n"
                            "missing: mean\n"
                            "split: {valid: 0}\n", &d, &text) == 0, "%s", text);
    free(text);
    ck_assert_int_eq(d.train.n, 3);
    ck_assert_double_eq(d.train.x[2 * 2], 2);   /* NA → mean(1, 3) */
    ck_assert_double_eq(d.train.x[1 * 2 + 1], 20);
    ck_assert_double_eq(d.test.x[0], 2);
    ck_assert_double_eq(d.test.x[1], 20);
    tr_data_free(&d);
    ck_assert_int_ne(load_yaml(dir, "format: csv\nsource: test.csv\nheader: true\nmissing: mean\nsplit: {valid: 0, test: 0}\n", &d,
                          &text), 0);
    char *want = tr_strdup_printf("%s/test.csv: feature 0 is missing in every row: no mean to fill it with "
                                  "(missing: mean)\n", dir);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    ck_assert_int_ne(load_yaml(dir, "format: csv\nsource: test.csv\nmissing: fill\n", &d, &text), 0);
    ck_assert_msg(strstr(text, "missing: expected one of refuse, drop, zero, mean, got 'fill'") != NULL, "%s", text);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* A file's bytes do not end in a NUL: with the text in a buffer of its exact size, ASan sees
 * any read past the last field (the fuzzer found strspn doing that). */
START_TEST(csv_text_needs_no_nul)
{
    const char csv[] = "1,2,0\n3,4,1";
    char *text = tr_xmalloc(sizeof csv - 1);
    memcpy(text, csv, sizeof csv - 1);
    struct tr_csv_options o = {.header = TR_HEADER_NONE};
    struct tr_table t;
    struct tr_diag diag = {0};
    ck_assert_int_eq(tr_csv_parse("t.csv", text, sizeof csv - 1, &o, &t, &diag), 0);
    ck_assert_int_eq(t.n, 2);
    ck_assert_int_eq(t.y[1], 1);
    tr_table_free(&t);
    free(text);
}
END_TEST

/* The label column's problems are the definition's, placed at its label: key. */
START_TEST(csv_label_errors)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    ck_assert_int_ne(load_csv(dir, "a,b\n1,0\n", "label: kind\n", &d, &text), 0);
    char *want = tr_strdup_printf("%s/dataset.yaml:4:8: label: %s/d.csv has no column named 'kind'\n", dir, dir);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    ck_assert_int_ne(load_csv(dir, "1,0\n", "label: 2\n", &d, &text), 0);
    want = tr_strdup_printf("%s/dataset.yaml:4:8: label: column 2 does not exist; %s/d.csv has 2 columns "
                            "(0 to 1, or -1 to -2 from the end)\n", dir, dir);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- definitions ----------------------------------------------------------------------------- */

static const struct { const char *yaml, *line; } bad_definitions[] = {
    {"format: csv\nsource: d.csv\nnomalize: standardize\n",
     "dataset.yaml:3:1: unknown key 'nomalize'; did you mean 'normalize'?"},
    {"format: csv\nsource: d.csv\nsplit: {valid: 0.1, tset: 0.2}\n",
     "dataset.yaml:3:21: unknown key 'split.tset'; did you mean 'split.test'?"},
    {"source: d.csv\n", "dataset.yaml:1:1: format: missing; csv, tsv, jsonl, text or idx"},
    {"format: bin\nsource: d.csv\n", "dataset.yaml:1:9: format: expected one of csv, tsv, jsonl, text, idx, got 'bin'"},
    {"format: csv\n", "dataset.yaml:1:1: no data: give source: (one file, split by split:) or train:"},
    {"format: csv\nsource: d.csv\ntrain: {source: d.csv}\n",
     "dataset.yaml:1:1: give either source: (one file, split by split:) or train: (a file a split), not both"},
    {"format: csv\nsource: d.csv\nsha256: abc\n",
     "dataset.yaml:3:9: sha256: expected 64 hexadecimal digits, got 'abc'"},
    {"format: csv\nsource: d.csv\nsplit: {valid: 1.5}\n",
     "dataset.yaml:3:16: split.valid: 1.5 is neither a fraction below 1 nor a whole number of samples"},
    {"format: csv\nsource: d.csv\nsplit: {valid: -0.1}\n",
     "dataset.yaml:3:16: split.valid: '-0.1' is not a number of at least 0"},
    {"format: csv\nsource: d.csv\nnormalize: {scale: 0}\n", "dataset.yaml:3:20: normalize.scale: must be more than 0"},
    {"format: csv\nsource: d.csv\nnormalize: minmax\n",
     "dataset.yaml:3:12: normalize: expected none, standardize or {scale: N}, got 'minmax'"},
    {"format: csv\nsource: d.csv\nnum_classes: 3\nclass_names: [a, b]\n",
     "dataset.yaml:1:1: class_names names 2 classes, num_classes says 3"},
    {"format: csv\nsource: d.csv\nclass_names: [a, a]\n",
     "dataset.yaml:3:18: class_names: 'a' is named twice (classes 0 and 1)"},
    {"format: csv\nsource: d.csv\nshape: [0, 2]\n", "dataset.yaml:3:9: shape: '0' is not a whole number from 1 to 2147483647"},
    {"format: csv\nsource: d.csv\nname: ../up\n",
     "dataset.yaml:3:7: name: '../up' is not a folder name (letters, digits, '.', '_', '-'; under 64 characters)"},
    {"format: csv\nsource: d.csv\nsource: e.csv\n", "dataset.yaml:3:1: 'source' is given twice"},
    {"format: csv\nsource: ftp://example.org/d.csv\n",
     "dataset.yaml:2:9: source: 'ftp://' URLs are not fetched; trainrun fetches https://, http:// and file:// URLs "
     "only"},
    {"format: csv\nsource: d.csv\nprepare: https://example.org/prepare\n",
     "dataset.yaml:3:10: prepare: 'https://example.org/prepare' is a URL; a prepare script is a file in the "
     "definition's folder, since nothing fetched is ever run"},
    {"format: idx\ntrain: {images: {source: i.gz}}\n",
     "dataset.yaml:1:1: train: an idx data set names images: and labels: files"},
    {"format: idx\nsource: i.gz\n", "dataset.yaml:1:1: source: an idx data set names train: {images:, labels:}"},
    {"format: csv\ntrain: {source: a.csv}\ntest: {source: b.csv}\nsplit: {test: 0.2}\n",
     "dataset.yaml:4:8: split.test: the data set has a test: file of its own"},
    {"format: csv\nsource: d.csv\nlabel: [1]\n", "dataset.yaml:3:8: label: expected a single value, not a list"},
    {"format: csv\nsource: [d.csv\n", "dataset.yaml:3:1: invalid YAML: did not find expected ',' or ']'"},
    {"- a\n- b\n", "dataset.yaml:1:1: the definition: expected a mapping of name…"},
    {"", "dataset.yaml: the definition is empty"},
    {"format: csv\nsource: d.csv\nsplit: {valid: 2, test: 1}\n",
     "dataset.yaml:3:8: split: 2 valid and 1 test samples leave none of 3 to train on"},
    /* Keys that mean nothing for the format. */
    {"format: idx\ntrain: {images: {source: i}, labels: {source: l}}\nlabel: x\n",
     "dataset.yaml:3:8: label: is for csv, tsv and jsonl data sets, not idx"},
    {"format: text\nsource: d.csv\nlabel: x\n", "dataset.yaml:3:8: label: is for csv, tsv and jsonl data sets, not text"},
    {"format: csv\nsource: d.csv\ntokenizer: {kind: bytes}\n",
     "dataset.yaml:3:12: tokenizer: is for tsv, jsonl and text data sets, not csv"},
    {"format: text\nsource: d.csv\nsplit: {valid: 0.1}\n",
     "dataset.yaml:3:8: split: is for csv, tsv, jsonl and idx data sets, not text"},
    {"format: text\nsource: d.csv\nnormalize: standardize\n",
     "dataset.yaml:3:12: normalize: is for csv and idx data sets, not text"},
    {"format: csv\ntrain: [{source: d.csv}]\n",
     "dataset.yaml:2:8: train: a list of files is for tsv, jsonl and text data sets, not csv"},
    {"format: tsv\ntrain: {images: {source: i}, labels: {source: l}}\ntext: t\nlabel: l\nnum_classes: 2\n",
     "dataset.yaml:1:1: train: images: and labels: are for idx data sets"},
    /* tsv and jsonl name their fields and classes. */
    {"format: tsv\nsource: d.csv\nlabel: l\nnum_classes: 2\n",
     "dataset.yaml:1:1: text: missing; name the field that holds each sample's text"},
    {"format: jsonl\nsource: d.csv\ntext: t\nnum_classes: 2\n",
     "dataset.yaml:1:1: label: missing; name the field that holds each sample's class"},
    {"format: tsv\nsource: d.csv\ntext: t\nlabel: l\n",
     "dataset.yaml:1:1: class_names: missing; a tsv data set's labels are names from this list (or class "
     "numbers below num_classes)"},
    {"format: jsonl\nsource: d.csv\ntext: t\nlabel: t\nnum_classes: 2\n",
     "dataset.yaml:4:8: label: 't' is the text: field too; a sample's class is another field"},
    {"format: tsv\nsource: d.csv\ntext: t\nlabel: l\nnum_classes: 2\nheader: none\n",
     "dataset.yaml:6:9: header: a tsv file's first line names its fields; header: names is the only choice"},
    /* Lists of files and lines: ranges. */
    {"format: text\ntrain: []\n", "dataset.yaml:2:8: train: an empty list; name at least one file"},
    {"format: text\ntrain: [{lines: [1, 2]}]\n", "dataset.yaml:2:9: train[0].source: missing"},
    {"format: text\ntrain: [{source: d.csv, lnes: [1, 2]}]\n",
     "dataset.yaml:2:25: unknown key 'train[0].lnes'; did you mean 'train[0].lines'?"},
    {"format: text\ntrain: {source: d.csv, lines: [3, 2]}\n", "dataset.yaml:2:31: lines: [3, 2] ends before it starts"},
    {"format: text\ntrain: {source: d.csv, lines: 3}\n",
     "dataset.yaml:2:31: lines: expected [first, last], line numbers from 1, both ends read"},
    {"format: text\ntrain: {source: d.csv, lines: [0, 2]}\n",
     "dataset.yaml:2:32: lines: '0' is not a whole number from 1 to 9223372036854775807"},
    {"format: tsv\ntrain: {source: d.csv, lines: [1, 2]}\ntext: t\nlabel: l\nnum_classes: 2\n",
     "dataset.yaml:2:31: lines: is for text and jsonl data sets, not tsv (a tsv file's first line is its header)"},
    {"format: text\ntrain: {source: d.csv, lines: [1, 9]}\ntokenizer: {kind: bytes}\n",
     "dataset.yaml:2:31: lines: [1, 9], but {dir}/d.csv has 3 lines"},
    /* prepare: and tokenizer:. */
    {"format: text\nsource: d.csv\nprepare: /bin/true\n",
     "dataset.yaml:3:10: prepare: expected the name of a script in the definition's folder, got '/bin/true'"},
    {"format: text\nsource: d.csv\nprepare: ../x\n",
     "dataset.yaml:3:10: prepare: expected the name of a script in the definition's folder, got '../x'"},
    {"format: text\nsource: d.csv\nprepare: make.sh\n",
     "dataset.yaml:3:10: prepare: cannot read the script {dir}/make.sh: No such file or directory"},
    {"format: text\nsource: d.csv\ntokenizer: {kind: wordpiece}\n",
     "dataset.yaml:3:12: tokenizer: wordpiece needs vocab (a BERT vocab.txt)"},
    {"format: text\nsource: d.csv\ntokenizer: {kind: gpt2-bpe, vocab: e.json}\n",
     "dataset.yaml:3:12: tokenizer: gpt2-bpe needs vocab (encoder.json) and merges (vocab.bpe)"},
    {"format: text\nsource: d.csv\ntokenizer: {kind: bytes, vocab: v.txt}\n",
     "dataset.yaml:3:12: tokenizer: bytes takes no vocab file"},
    {"format: text\nsource: d.csv\ntokenizer: {kind: sentencepiece}\n",
     "dataset.yaml:3:19: tokenizer.kind: expected one of bytes, chars, wordpiece, gpt2-bpe, got 'sentencepiece'"},
    {"format: text\nsource: d.csv\ntokenizer: {vocab: v.txt}\n",
     "dataset.yaml:3:12: tokenizer.kind: missing; bytes, chars, wordpiece or gpt2-bpe"},
    {"format: text\nsource: d.csv\ntokenizer: {kind: bytes, lowercase: maybe}\n",
     "dataset.yaml:3:37: tokenizer.lowercase: expected true or false, got 'maybe'"},
    {"format: text\nsource: d.csv\n",
     "dataset.yaml: tokenizer: missing; text data is read through one (bytes, chars, wordpiece or gpt2-bpe), "
     "named here or by a recipe's data.tokenizer"},
};

START_TEST(definition_errors)
{
    char *dir = unit_mkdtemp(), *text;
    free(unit_write_in(dir, "d.csv", "1,0\n2,1\n3,0\n"));
    struct tr_data d;
    ck_assert_int_ne(load_yaml(dir, bad_definitions[_i].yaml, &d, &text), 0);
    char *want = expected_line(dir, bad_definitions[_i].line);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(missing_file_names_the_package)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    ck_assert_int_eq(load_yaml(dir, "format: csv\nsource: gone.csv\npackage: dataset-gone\n", &d, &text), TR_EIO);
    char *want = tr_strdup_printf("%s/gone.csv: cannot read: No such file or directory; the Debian package "
                                  "dataset-gone installs it (apt-get install dataset-gone)\n", dir);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- IDX ------------------------------------------------------------------------------------ */

enum { IDX_N = 5, IDX_ROWS = 2, IDX_COLS = 3 };

static size_t idx_images(unsigned char *b, uint32_t magic, uint32_t n)
{
    uint32_t head[4] = {magic, n, IDX_ROWS, IDX_COLS};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            b[4 * i + j] = (unsigned char)(head[i] >> (24 - 8 * j));
    for (uint32_t i = 0; i < n * IDX_ROWS * IDX_COLS; i++)
        b[16 + i] = (unsigned char)(i * 8);
    return 16 + n * IDX_ROWS * IDX_COLS;
}

static size_t idx_labels(unsigned char *b, uint32_t magic, uint32_t n, int first)
{
    uint32_t head[2] = {magic, n};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            b[4 * i + j] = (unsigned char)(head[i] >> (24 - 8 * j));
    for (uint32_t i = 0; i < n; i++)
        b[8 + i] = (unsigned char)(i ? i % 3 : (unsigned)first);
    return 8 + n;
}

static const char idx_yaml[] =
    "format: idx\nnum_classes: 3\nnormalize: {scale: 255}\n"
    "train: {images: {source: i.gz}, labels: {source: l.gz}}\n";

/* Writes i.gz and l.gz (images cut by `cut` bytes), loads idx_yaml; returns rc. */
static int load_idx(const char *dir, uint32_t image_magic, uint32_t label_magic, uint32_t nlabels, int cut,
                    int first_label, struct tr_data *d, char **text)
{
    unsigned char images[16 + IDX_N * IDX_ROWS * IDX_COLS + 8], labels[8 + IDX_N + 4];
    size_t ilen = idx_images(images, image_magic, IDX_N), llen = idx_labels(labels, label_magic, nlabels, first_label);
    char *ipath = tr_strdup_printf("%s/i.gz", dir), *lpath = tr_strdup_printf("%s/l.gz", dir);
    write_gz(ipath, images, (size_t)((int)ilen - cut));
    write_gz(lpath, labels, llen);
    free(ipath);
    free(lpath);
    return load_yaml(dir, idx_yaml, d, text);
}

START_TEST(idx_reads_images_and_labels)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    int rc = load_idx(dir, 0x803, 0x801, IDX_N, 0, 2, &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.train.n, IDX_N);
    ck_assert_int_eq(d.train.rank, 3);
    ck_assert_int_eq(d.train.dims[0], 1);
    ck_assert_int_eq(d.train.dims[1], IDX_ROWS);
    ck_assert_int_eq(d.train.dims[2], IDX_COLS);
    /* kept as bytes (a quarter of floats' memory), given scaled as floats */
    ck_assert_ptr_null(d.train.x);
    ck_assert_ptr_nonnull(d.train.pixels);
    float rows[2 * IDX_ROWS * IDX_COLS];
    int64_t ids[2] = {0, 1};
    tr_split_rows(&d.train, ids, 2, rows);
    ck_assert_float_eq(rows[7], 56.0f / 255.0f);   /* scaled */
    for (int j = 0; j < 2 * IDX_ROWS * IDX_COLS; j++)
        ck_assert_float_eq(rows[j], (float)d.train.pixels[j] / 255.0f);
    ck_assert_int_eq(d.train.y[0], 2);
    ck_assert_int_eq(d.train.y[4], 1);
    ck_assert_int_eq(d.nclasses, 3);
    tr_data_free(&d);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

static const struct { uint32_t image_magic, label_magic, nlabels; int cut, first_label; const char *line; } bad_idx[] = {
    {0x801, 0x801, IDX_N, 0, 0, "i.gz: not an IDX image file: magic number 0x00000801, expected 0x00000803"},
    {0x803, 0x803, IDX_N, 0, 0, "l.gz: not an IDX label file: magic number 0x00000803, expected 0x00000801"},
    {0x803, 0x801, IDX_N, 1, 0, "i.gz: truncated: the header promises 30 bytes of data, the file holds 29"},
    {0x803, 0x801, IDX_N, 40, 0, "i.gz: truncated: 6 bytes, shorter than its IDX header (16)"},
    {0x803, 0x801, IDX_N, 44, 0, "i.gz: truncated: 2 bytes, shorter than its IDX header (16)"},
    {0x803, 0x801, IDX_N, -8, 0, "i.gz: 8 bytes follow the data that the header describes"},
    {0x803, 0x801, IDX_N - 1, 0, 0, "l.gz: holds 4 labels, but {dir}/i.gz holds 5 images"},
    {0x803, 0x801, IDX_N, 0, 3, "l.gz: sample 0 has label 3; the data set has 3 classes (0 to 2)"},
};

START_TEST(idx_errors)
{
    char *dir = unit_mkdtemp(), *text;
    struct tr_data d;
    ck_assert_int_ne(load_idx(dir, bad_idx[_i].image_magic, bad_idx[_i].label_magic, bad_idx[_i].nlabels,
                              bad_idx[_i].cut, bad_idx[_i].first_label, &d, &text), 0);
    char *want = expected_line(dir, bad_idx[_i].line);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- splits and normalisation ------------------------------------------------------------------ */

/* n rows "i,i%k": feature 0 names the row, so splits can be checked for what they hold. */
static char *numbered_csv(int n, int k)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < n; i++)
        fprintf(f, "%d,%d\n", i, i % k);
    fclose(f);
    return text;
}

START_TEST(splits_are_disjoint_deterministic_and_in_file_order)
{
    char *dir = unit_mkdtemp(), *text, *csv = numbered_csv(1000, 4);
    free(unit_write_in(dir, "d.csv", csv));
    const char *yaml = "format: csv\nsource: d.csv\nsplit: {valid: 0.15, test: 100, seed: 5}\n";
    struct tr_data a, b;
    ck_assert_msg(load_yaml(dir, yaml, &a, &text) == 0, "%s", text);
    free(text);
    ck_assert_int_eq(a.train.n, 750);
    ck_assert_int_eq(a.valid.n, 150);
    ck_assert_int_eq(a.test.n, 100);
    int seen[1000] = {0};
    const struct tr_split *splits[3] = {&a.train, &a.valid, &a.test};
    for (int s = 0; s < 3; s++)
        for (int64_t i = 0; i < splits[s]->n; i++) {
            int row = (int)splits[s]->x[i];
            ck_assert_msg(!seen[row], "row %d is in two splits", row);
            seen[row] = 1;
            ck_assert_int_eq(splits[s]->y[i], row % 4);
            ck_assert(i == 0 || splits[s]->x[i] > splits[s]->x[i - 1]);
        }
    ck_assert_msg(load_yaml(dir, yaml, &b, &text) == 0, "%s", text);
    free(text);
    ck_assert_mem_eq(a.test.x, b.test.x, (size_t)a.test.n * sizeof(float));
    ck_assert_mem_eq(a.valid.x, b.valid.x, (size_t)a.valid.n * sizeof(float));
    tr_data_free(&b);
    /* Only the valid size changes: the test set stays; another seed moves it. */
    ck_assert_int_eq(load_yaml(dir, "format: csv\nsource: d.csv\nsplit: {valid: 0.3, test: 100, seed: 5}\n",
                               &b, &text), 0);
    free(text);
    ck_assert_mem_eq(a.test.x, b.test.x, (size_t)a.test.n * sizeof(float));
    tr_data_free(&b);
    ck_assert_int_eq(load_yaml(dir, "format: csv\nsource: d.csv\nsplit: {valid: 0.15, test: 100, seed: 6}\n",
                               &b, &text), 0);
    free(text);
    ck_assert(memcmp(a.test.x, b.test.x, (size_t)a.test.n * sizeof(float)) != 0);
    tr_data_free(&b);
    tr_data_free(&a);
    free(csv);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* Standardising uses the train file's statistics alone: a valid value of 100 does not move
 * the mean. Population std: train 1, 2, 3, 4 has mean 2.5 and std √1.25. */
START_TEST(standardize_uses_train_statistics)
{
    char *dir = unit_mkdtemp(), *text;
    free(unit_write_in(dir, "a.csv", "1,5,0\n2,5,1\n3,5,0\n4,5,1\n"));
    free(unit_write_in(dir, "b.csv", "100,5,0\n"));
    free(unit_write_in(dir, "c.csv", "2.5,6,1\n"));
    struct tr_data d;
    int rc = load_yaml(dir, "format: csv\nnormalize: standardize\ntrain: {source: a.csv}\nvalid: {source: b.csv}\n"
                            "test: {source: c.csv}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.norm.kind, TR_NORM_STANDARDIZE);
    ck_assert_float_eq(d.norm.mean[0], 2.5f);
    ck_assert_float_eq_tol(d.norm.std[0], sqrtf(1.25f), 1e-6f);
    ck_assert_float_eq(d.norm.std[1], 1.0f);   /* a constant feature: std 0 taken as 1 */
    ck_assert_float_eq_tol(d.train.x[0], -1.5f / sqrtf(1.25f), 1e-6f);
    ck_assert_float_eq_tol(d.valid.x[0], 97.5f / sqrtf(1.25f), 1e-4f);
    ck_assert_float_eq(d.valid.x[1], 0.0f);
    ck_assert_float_eq(d.test.x[0], 0.0f);
    ck_assert_float_eq(d.test.x[1], 1.0f);
    tr_data_free(&d);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- the shipped data sets ------------------------------------------------------------------- */

START_TEST(digits_loads)
{
    struct tr_data d;
    char *text;
    int rc = load_named("digits", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    ck_assert_str_eq(d.name, "digits");
    ck_assert_int_eq(d.train.n + d.valid.n + d.test.n, 1797);
    ck_assert_int_eq(d.train.n, 1258);
    ck_assert_int_eq(d.valid.n, 180);
    ck_assert_int_eq(d.test.n, 359);
    ck_assert_int_eq(d.train.rank, 1);
    ck_assert_int_eq(d.train.dims[0], 64);
    ck_assert_int_eq(d.test.dims[0], 64);
    ck_assert_int_eq(d.nclasses, 10);
    ck_assert_str_eq(d.class_names[9], "9");
    ck_assert_int_eq(d.norm.kind, TR_NORM_SCALE);
    expect_range(&d.train, 0.0f, 1.0f);
    expect_range(&d.test, 0.0f, 1.0f);
    int counts[10] = {0};
    const struct tr_split *splits[3] = {&d.train, &d.valid, &d.test};
    for (int s = 0; s < 3; s++)
        for (int64_t i = 0; i < splits[s]->n; i++) {
            ck_assert(splits[s]->y[i] >= 0 && splits[s]->y[i] < 10);
            counts[splits[s]->y[i]]++;
        }
    ck_assert_int_eq(counts[0], 178);   /* scikit-learn's class sizes */
    ck_assert_int_eq(counts[8], 174);
    tr_data_free(&d);
}
END_TEST

START_TEST(iris_loads_standardized)
{
    struct tr_data d;
    char *text;
    int rc = load_named("iris", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    ck_assert_int_eq(d.train.n, 105);
    ck_assert_int_eq(d.valid.n, 15);
    ck_assert_int_eq(d.test.n, 30);
    ck_assert_int_eq(d.nclasses, 3);
    ck_assert_str_eq(d.class_names[2], "virginica");
    for (int j = 0; j < 4; j++) {
        double sum = 0, sq = 0, other = 0;
        for (int64_t i = 0; i < d.train.n; i++) {
            sum += d.train.x[i * 4 + j];
            sq += (double)d.train.x[i * 4 + j] * d.train.x[i * 4 + j];
        }
        for (int64_t i = 0; i < d.test.n; i++)
            other += d.test.x[i * 4 + j];
        ck_assert_double_eq_tol(sum / (double)d.train.n, 0.0, 1e-6);
        ck_assert_double_eq_tol(sq / (double)d.train.n, 1.0, 1e-5);
        ck_assert(fabs(other / (double)d.test.n) > 1e-4);   /* the test split is not its own */
    }
    tr_data_free(&d);
}
END_TEST

START_TEST(unknown_dataset_lists_the_known_ones)
{
    struct tr_data d;
    char *text;
    ck_assert_int_eq(load_named("digts", &d, &text), TR_EINVAL);
    ck_assert_msg(strstr(text, "r.yaml:2:17: data.dataset: no data set 'digts' (no ") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "austen, digits, fashion-mnist, iris, iris-species, wordnet-senses\n") != NULL, "%s", text);
    free(text);
}
END_TEST

START_TEST(fashion_mnist_loads)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("fashion_mnist_loads: skipped; apt-get install dataset-fashion-mnist to run it\n");
        return;
    }
    struct tr_data d;
    char *text;
    int rc = load_named("fashion-mnist", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    ck_assert_int_eq(d.train.n + d.valid.n, 60000);
    ck_assert_int_eq(d.valid.n, 5000);
    ck_assert_int_eq(d.test.n, 10000);
    ck_assert_int_eq(d.train.rank, 3);
    ck_assert_int_eq(d.train.dims[0], 1);
    ck_assert_int_eq(d.train.dims[1], 28);
    ck_assert_int_eq(d.train.dims[2], 28);
    ck_assert_int_eq(d.nclasses, 10);
    ck_assert_str_eq(d.class_names[9], "Ankle boot");
    expect_range(&d.test, 0.0f, 1.0f);
    int counts[10] = {0};
    for (int64_t i = 0; i < d.test.n; i++)
        counts[d.test.y[i]]++;
    for (int c = 0; c < 10; c++)
        ck_assert_int_eq(counts[c], 1000);   /* the test set is balanced */
    tr_data_free(&d);
}
END_TEST

/* ---- inline data in a recipe ------------------------------------------------------------------ */

static int load_inline(const char *data_yaml, struct tr_data *d, char **text)
{
    struct tr_recipe r;
    struct tr_diag diag = {0};
    char *yaml = tr_strdup_printf("model: {arch: mlp}\ndata: %s\n", data_yaml);
    ck_assert_int_eq(tr_recipe_load_string(&r, yaml, strlen(yaml), "r.yaml", NULL, 0, &diag), 0);
    int rc = tr_data_load(&r, datasets_dir(), d, &diag);
    *text = unit_diag_text(&diag);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
    free(yaml);
    return rc;
}

START_TEST(inline_csv_is_split_like_a_definition)
{
    char *dir = unit_mkdtemp(), *text, *csv = numbered_csv(100, 3);
    free(unit_write_in(dir, "rows.csv", csv));
    char *data = tr_strdup_printf("{train: {source: %s/rows.csv}}", dir);
    struct tr_data d;
    ck_assert_msg(load_inline(data, &d, &text) == 0, "%s", text);
    free(text);
    ck_assert_str_eq(d.name, "rows");
    ck_assert_int_eq(d.train.n, 70);
    ck_assert_int_eq(d.valid.n, 10);
    ck_assert_int_eq(d.test.n, 20);
    ck_assert_int_eq(d.nclasses, 3);
    ck_assert_int_eq(d.norm.kind, TR_NORM_NONE);
    tr_data_free(&d);
    free(data);

    data = tr_strdup_printf("{train: {source: %s/rows.csv, format: idx}}", dir);
    ck_assert_int_ne(load_inline(data, &d, &text), 0);
    char *want = tr_strdup_printf("r.yaml:2:%d: data.train.format: idx data is not read inline; inline data is "
                                  "csv, tsv, jsonl or text (idx images: and labels: files: define them in "
                                  "datasets/NAME/dataset.yaml, trainrun-dataset(5))\n",
                                  (int)(strstr(data, "idx") - data) + 7);   /* after "data: " */
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    free(data);
    ck_assert_int_ne(load_inline("{train: {source: 'ftp://example.org/x.csv'}}", &d, &text), 0);
    ck_assert_str_eq(text, "r.yaml:2:24: data.train.source: 'ftp://' URLs are not fetched; trainrun fetches "
                           "https://, http:// and file:// URLs only\n");
    free(text);
    free(csv);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- text data sets --------------------------------------------------------------------------- */

/* A WordPiece vocabulary small enough to read: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, then words. */
static const char tiny_vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\nsat\ndog\n##s\nran\n.\n";
enum { PAD, UNK, CLS, SEP, THE, CAT, SAT, DOG, S_, RAN, DOT };

/* Token ids of sample i of split s. */
static void expect_sample(const struct tr_split *s, int64_t i, const int32_t *ids, int64_t n, int32_t label)
{
    ck_assert_int_lt(i, s->n);
    int64_t len = s->offsets[i + 1] - s->offsets[i];
    ck_assert_msg(len == n, "sample %lld has %lld tokens, expected %lld", (long long)i, (long long)len, (long long)n);
    ck_assert_mem_eq(s->tokens + s->offsets[i], ids, (size_t)n * sizeof *ids);
    ck_assert_int_eq(s->y[i], label);
}

/* Writes dir/datasets/<name>/dataset.yaml and the files its test names (pairs of name, text,
 * then NULL); returns dir/datasets (caller frees). */
static char *datasets_in(const char *dir, const char *name, const char *yaml, ...)
{
    char *datasets = tr_strdup_printf("%s/datasets", dir), *folder = tr_strdup_printf("%s/%s", datasets, name);
    ck_assert_int_eq(mkdir(datasets, 0777), 0);
    ck_assert_int_eq(mkdir(folder, 0777), 0);
    free(unit_write_in(folder, "dataset.yaml", yaml));
    va_list ap;
    va_start(ap, yaml);
    for (const char *file; (file = va_arg(ap, const char *)) != NULL;)
        free(unit_write_in(folder, file, va_arg(ap, const char *)));
    va_end(ap);
    free(folder);
    return datasets;
}

/* The data of a recipe read from datasets (recipe is its YAML); diagnostics in *text. */
static int load_recipe(const char *datasets, const char *recipe, struct tr_data *d, char **text)
{
    struct tr_recipe r;
    struct tr_diag diag = {0};
    int rc = tr_recipe_load_string(&r, recipe, strlen(recipe), "r.yaml", NULL, 0, &diag);
    char *problems = unit_diag_text(&diag);
    ck_assert_msg(rc == 0, "%s", problems);
    free(problems);
    rc = tr_data_load(&r, datasets, d, &diag);
    *text = unit_diag_text(&diag);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
    return rc;
}

START_TEST(tsv_reads_texts_and_label_names)
{
    char *dir = unit_mkdtemp(), *text;
    free(unit_write_in(dir, "vocab.txt", tiny_vocab));
    free(unit_write_in(dir, "t.tsv", "label\ttext\r\nanimal\tThe cat sat.\r\n\naction\tdogs ran\r\n"));
    free(unit_write_in(dir, "v.tsv", "\xef\xbb\xbftext\tlabel\nthe dog\taction\n"));   /* a byte-order mark */
    struct tr_data d;
    int rc = load_yaml(dir, "format: tsv\ntext: text\nlabel: label\nclass_names: [animal, action]\n"
                            "tokenizer: {kind: wordpiece, vocab: vocab.txt}\n"
                            "train: {source: t.tsv}\nvalid: {source: v.tsv}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.kind, TR_DATA_TEXT_CLASSES);
    ck_assert_ptr_nonnull(d.tokenizer);
    ck_assert_int_eq(d.vocab, 11);
    ck_assert_int_eq(d.pad_id, PAD);
    ck_assert_int_eq(d.nclasses, 2);
    ck_assert_str_eq(d.class_names[1], "action");
    ck_assert_int_eq(d.train.n, 2);
    ck_assert_ptr_null(d.train.x);
    expect_sample(&d.train, 0, (const int32_t[]){CLS, THE, CAT, SAT, DOT, SEP}, 6, 0);
    expect_sample(&d.train, 1, (const int32_t[]){CLS, DOG, S_, RAN, SEP}, 5, 1);
    ck_assert_int_eq(d.train.ntokens, 11);
    expect_sample(&d.valid, 0, (const int32_t[]){CLS, THE, DOG, SEP}, 4, 1);
    ck_assert_int_eq(d.test.n, 0);   /* empty, yet text: tokens and offsets to read */
    ck_assert_ptr_nonnull(d.test.tokens);
    ck_assert_int_eq(d.test.offsets[0], 0);
    tr_data_free(&d);
    ck_assert_ptr_null(d.tokenizer);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* JSON Lines through the bytes tokenizer (no [CLS] or [SEP]): escapes decoded, labels by name
 * or number, lines: ranges, and a list of files joined in order. */
START_TEST(jsonl_reads_objects)
{
    char *dir = unit_mkdtemp(), *text;
    free(unit_write_in(dir, "a.jsonl", "{\"text\": \"h\\u00e9\", \"label\": \"b\", \"id\": 1}\n"
                                       "{\"label\": 0, \"text\": \"x\\ty\"}\n"
                                       "{\"text\": \"zz\", \"label\": \"a\"}\n"));
    free(unit_write_in(dir, "b.jsonl", "\n{\"text\": \"q\", \"label\": 1}"));
    struct tr_data d;
    int rc = load_yaml(dir, "format: jsonl\ntext: text\nlabel: label\nclass_names: [a, b]\n"
                            "tokenizer: {kind: bytes}\n"
                            "train: [{source: a.jsonl}, {source: b.jsonl}]\n"
                            "test: {source: a.jsonl, lines: [2, 3]}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.vocab, 256);
    ck_assert_int_eq(d.pad_id, 0);
    ck_assert_int_eq(d.train.n, 4);
    expect_sample(&d.train, 0, (const int32_t[]){'h', 0xc3, 0xa9}, 3, 1);
    expect_sample(&d.train, 1, (const int32_t[]){'x', '\t', 'y'}, 3, 0);
    expect_sample(&d.train, 2, (const int32_t[]){'z', 'z'}, 2, 0);
    expect_sample(&d.train, 3, (const int32_t[]){'q'}, 1, 1);
    ck_assert_int_eq(d.test.n, 2);
    expect_sample(&d.test, 0, (const int32_t[]){'x', '\t', 'y'}, 3, 0);
    expect_sample(&d.test, 1, (const int32_t[]){'z', 'z'}, 2, 0);
    tr_data_free(&d);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* One tsv source split like a csv one: disjoint, in file order, the same every time. */
START_TEST(tsv_one_source_is_split)
{
    char *dir = unit_mkdtemp(), *text;
    char *tsv = tr_strdup("text\tlabel\n");
    for (int i = 0; i < 20; i++) {   /* sample i: the byte 'A' + i, label i % 3 */
        char *longer = tr_strdup_printf("%s%c\t%d\n", tsv, 'A' + i, i % 3);
        free(tsv);
        tsv = longer;
    }
    free(unit_write_in(dir, "d.tsv", tsv));
    struct tr_data d;
    int rc = load_yaml(dir, "format: tsv\ntext: text\nlabel: label\nnum_classes: 3\ntokenizer: {kind: bytes}\n"
                            "source: d.tsv\nsplit: {valid: 4, test: 0.25, seed: 3}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.train.n, 11);
    ck_assert_int_eq(d.valid.n, 4);
    ck_assert_int_eq(d.test.n, 5);
    int seen[20] = {0};
    const struct tr_split *splits[3] = {&d.train, &d.valid, &d.test};
    for (int s = 0; s < 3; s++) {
        ck_assert_int_eq(splits[s]->ntokens, splits[s]->n);
        for (int64_t i = 0; i < splits[s]->n; i++) {
            int row = splits[s]->tokens[splits[s]->offsets[i]] - 'A';
            ck_assert(row >= 0 && row < 20 && !seen[row]);
            seen[row] = 1;
            ck_assert_int_eq(splits[s]->y[i], row % 3);
            ck_assert(i == 0 || splits[s]->tokens[i] > splits[s]->tokens[i - 1]);
        }
    }
    tr_data_free(&d);
    free(text);
    free(tsv);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* The recipe's tokenizer comes first, its vocabulary found in the datasets folder; samples
 * are cut to model.max_len with [SEP] kept last. */
START_TEST(recipe_tokenizer_and_max_len)
{
    char *dir = unit_mkdtemp(), *text;
    char *datasets = datasets_in(dir, "pets", "format: tsv\ntext: text\nlabel: label\nclass_names: [a, b]\n"
                                 "tokenizer: {kind: bytes}\ntrain: {source: t.tsv}\n",
                                 "t.tsv", "text\tlabel\nthe cat sat the dog\ta\nthe cat\tb\n", NULL);
    free(unit_write_in(datasets, "tiny-vocab.txt", tiny_vocab));
    struct tr_data d;
    int rc = load_recipe(datasets, "model: {arch: bert, max_len: 4}\ndata: {dataset: pets, tokenizer: "
                         "{kind: wordpiece, vocab: tiny-vocab.txt}}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.vocab, 11);
    expect_sample(&d.train, 0, (const int32_t[]){CLS, THE, CAT, SEP}, 4, 0);
    expect_sample(&d.train, 1, (const int32_t[]){CLS, THE, CAT, SEP}, 4, 1);
    tr_data_free(&d);
    free(text);
    /* Without one, the definition's: bytes, cut to 4 with nothing added. (A transformer's recipe
     * must name its tokenizer: src/recipe/validate.c.) */
    rc = load_recipe(datasets, "model: {arch: mlp, max_len: 4}\ndata: {dataset: pets}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    expect_sample(&d.train, 0, (const int32_t[]){'t', 'h', 'e', ' '}, 4, 0);
    tr_data_free(&d);
    free(text);
    free(datasets);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(text_without_tokenizer)
{
    char *dir = unit_mkdtemp(), *text;
    char *datasets = datasets_in(dir, "prose", "format: text\ntrain: {source: a.txt}\n", "a.txt", "words\n", NULL);
    struct tr_data d;
    ck_assert_int_eq(load_recipe(datasets, "model: {arch: mlp}\ndata: {dataset: prose}\n", &d, &text), TR_EINVAL);
    char *want = tr_strdup_printf("data.tokenizer.kind: none, and %s/prose/dataset.yaml names no tokenizer:; "
                                  "text data is read through one: set data.tokenizer (bytes, chars, wordpiece "
                                  "or gpt2-bpe), or tokenizer: in the definition\n", datasets);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    free(datasets);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* Language modelling: a split's files joined (a newline added to one that lacks it), or the
 * lines it names, as one stream in windows of model.max_len. */
START_TEST(text_stream_in_windows)
{
    char *dir = unit_mkdtemp(), *text;
    char *datasets = datasets_in(dir, "prose", "format: text\ntokenizer: {kind: bytes}\n"
                                 "train:\n  - source: a.txt\n  - {source: b.txt}\n"
                                 "valid: {source: a.txt, lines: [2, 3]}\ntest: {source: a.txt, lines: [3, 3]}\n",
                                 "a.txt", "one\ntwo\nthree\n", "b.txt", "four", NULL);
    struct tr_data d;
    int rc = load_recipe(datasets, "model: {arch: gpt, max_len: 4}\ndata: {dataset: prose, tokenizer: bytes}\n",
                         &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(d.kind, TR_DATA_TEXT_LM);
    ck_assert_int_eq(d.nclasses, 0);
    ck_assert_ptr_null(d.class_names[0]);
    const char *want[3] = {"one\ntwo\nthree\nfour\n", "two\nthree\n", "three\n"};
    const struct tr_split *splits[3] = {&d.train, &d.valid, &d.test};
    for (int s = 0; s < 3; s++) {
        int64_t n = (int64_t)strlen(want[s]);
        ck_assert_int_eq(splits[s]->ntokens, n);
        ck_assert_int_eq(splits[s]->window, 4);
        ck_assert_int_eq(splits[s]->n, (n - 1) / 4);   /* 4, 2, 1 */
        ck_assert_ptr_null(splits[s]->offsets);
        ck_assert_ptr_null(splits[s]->y);
        for (int64_t i = 0; i < n; i++)
            ck_assert_int_eq(splits[s]->tokens[i], (unsigned char)want[s][i]);
    }
    tr_data_free(&d);
    free(text);
    /* Too short for one window and its target. */
    ck_assert_int_ne(load_recipe(datasets, "model: {arch: gpt, max_len: 6}\ndata: {dataset: prose, tokenizer: bytes}\n",
                                 &d, &text), 0);
    char *line = tr_strdup_printf("%s/prose/dataset.yaml: test: 6 tokens, too few for one window of "
                                  "model.max_len 6 tokens and the target after it\n", datasets);
    ck_assert_str_eq(text, line);
    free(line);
    free(text);
    free(datasets);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* Loading must fail with exactly this one line (placed in the scratch folder); file holds the
 * data and extra the definition's lines after the format. */
static void expect_text_error(const char *format, const char *file, const char *extra, const char *line)
{
    char *dir = unit_mkdtemp(), *text;
    free(unit_write_in(dir, "t.txt", file));
    char *yaml = tr_strdup_printf("format: %s\ntrain: {source: t.txt}\ntokenizer: {kind: bytes}\n%s", format, extra);
    struct tr_data d;
    int rc = load_yaml(dir, yaml, &d, &text);
    char *want = expected_line(dir, line);
    ck_assert_msg(rc != 0, "loaded, expected: %s", want);
    ck_assert_str_eq(text, want);
    ck_assert_ptr_null(d.tokenizer);   /* freed */
    free(want);
    free(text);
    free(yaml);
    unit_rmtree(dir);
    free(dir);
}

static const char tsv_fields[] = "text: text\nlabel: label\nclass_names: [animal, plant]\n";
static const char jsonl_fields[] = "text: text\nlabel: label\nclass_names: [animal, plant]\n";

START_TEST(text_errors)
{
    expect_text_error("tsv", "text\tlabel\ncat\tanimal\nrose\tplnt\n", tsv_fields,
                      "t.txt:3:6: label 'plnt' is not one of the 2 class_names; did you mean 'plant'?");
    expect_text_error("tsv", "text\tlabel\ncat\tanimal\tx\n", tsv_fields,
                      "t.txt:2:1: expected 2 fields (a TAB between fields), found 3");
    expect_text_error("tsv", "body\tlabel\ncat\tanimal\n", tsv_fields,
                      "dataset.yaml:4:7: text: {dir}/t.txt has no field named 'text'; its first line names 'body', "
                      "'label'");
    expect_text_error("tsv", "text\tlabel\nca\xfft\tanimal\n", tsv_fields,
                      "t.txt:2:3: invalid UTF-8 (byte 0xff); text data must be UTF-8");
    expect_text_error("tsv", "text\tlabel\n\tanimal\n", tsv_fields, "t.txt:2:1: the text is empty: no tokens to learn from");
    expect_text_error("tsv", "text\tlabel\ncat\t5\n", "text: text\nlabel: label\nnum_classes: 2\n",
                      "t.txt:2:5: label '5' is not a class number from 0 to 1 (the definition names no class_names)");
    expect_text_error("tsv", "", tsv_fields, "t.txt: the file is empty");
    expect_text_error("tsv", "text\tlabel\n", tsv_fields, "t.txt: the file holds no samples");
    expect_text_error("jsonl", "{\"text\": \"a\", \"label\": \"animal\"}\n{\"text\": \"a\"\n", jsonl_fields,
                      "t.txt:2:12: invalid JSON: '}' expected near end of file");
    expect_text_error("jsonl", "[1]\n", jsonl_fields, "t.txt:1:1: expected a JSON object, one a line");
    expect_text_error("jsonl", "{\"label\": \"animal\"}\n", jsonl_fields, "t.txt:1:1: no field 'text'");
    expect_text_error("jsonl", "{\"text\": 1, \"label\": \"animal\"}\n", jsonl_fields,
                      "t.txt:1:1: field 'text' is not a string");
    expect_text_error("jsonl", "{\"text\": \"a\", \"label\": 2}\n", jsonl_fields,
                      "t.txt:1:1: field 'label' is neither a class name nor a class number from 0 to 1");
    expect_text_error("jsonl", "{\"text\": \"a\", \"label\": \"fungus\"}\n", jsonl_fields,
                      "t.txt:1:1: label 'fungus' is not one of the 2 class_names");
    expect_text_error("text", "ok\nstill ok\n\xe2\x82\n", "", "t.txt:3:1: invalid UTF-8 (byte 0xe2); text data must be UTF-8");
    expect_text_error("text", "short\n", "",
                      "dataset.yaml: train: 6 tokens, too few for one window of model.max_len 128 tokens and the "
                      "target after it");
}
END_TEST

/* ---- prepare ----------------------------------------------------------------------------------- */

/* A scratch folder whose definition's prepare script `make` copies src.txt into the prepared
 * folder, counting its runs in runs.txt; trainrun's cache is made there too. */
static char *prepared_set(const char *script, char hex[65])
{
    char *dir = unit_mkdtemp(), *cache = tr_strdup_printf("%s/cache", dir);
    setenv("XDG_CACHE_HOME", cache, 1);
    free(cache);
    char src[300];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = i % 50 == 49 ? '\n' : (char)('a' + i % 26);
    char *path = tr_strdup_printf("%s/src.txt", dir);
    write_bytes(path, src, sizeof src);
    free(path);
    tr_sha256_of(src, sizeof src, hex);
    free(unit_write_in(dir, "make", script));
    char *yaml = tr_strdup_printf("name: prep\nprepare: make\nformat: text\ntokenizer: {kind: bytes}\n"
                                  "train: {source: t.txt, sha256: %s}\n", hex);
    free(unit_write_in(dir, "dataset.yaml", yaml));
    free(yaml);
    return dir;
}

static const char copy_script[] =
    "here=$(dirname \"$0\")\necho run >>\"$here/runs.txt\"\necho progress\ncp \"$here/src.txt\" \"$1/t.txt\"\n";

static int runs(const char *dir)
{
    char *path = tr_strdup_printf("%s/runs.txt", dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    for (int c; f && (c = fgetc(f)) != EOF;)
        n += c == '\n';
    if (f)
        fclose(f);
    free(path);
    return n;
}

static int load_prepared(const char *dir, struct tr_data *d, char **text)
{
    char *path = tr_strdup_printf("%s/dataset.yaml", dir);
    struct tr_diag diag = {0};
    int rc = tr_data_load_definition(path, d, &diag);
    *text = unit_diag_text(&diag);
    tr_diag_free(&diag);
    free(path);
    return rc;
}

START_TEST(prepare_runs_once)
{
    char hex[65], *text;
    char *dir = prepared_set(copy_script, hex);
    struct tr_data d;
    ck_assert_msg(load_prepared(dir, &d, &text) == 0, "%s", text);
    ck_assert_str_eq(text, "");
    ck_assert_int_eq(runs(dir), 1);
    ck_assert_int_eq(d.train.ntokens, 300);
    ck_assert_int_eq(d.train.n, 2);   /* 299 / 128 */
    tr_data_free(&d);
    free(text);
    char *made = tr_strdup_printf("%s/cache/trainrun/datasets/prep/t.txt", dir);
    ck_assert_int_eq(access(made, R_OK), 0);
    ck_assert_msg(load_prepared(dir, &d, &text) == 0, "%s", text);
    ck_assert_int_eq(runs(dir), 1);   /* cached: not run again */
    tr_data_free(&d);
    free(text);
    unit_write(made, "stale");        /* a file unlike its sha256 is made again */
    ck_assert_msg(load_prepared(dir, &d, &text) == 0, "%s", text);
    ck_assert_int_eq(runs(dir), 2);
    ck_assert_int_eq(d.train.ntokens, 300);
    tr_data_free(&d);
    free(text);
    free(made);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(prepare_failures)
{
    char hex[65], *text;
    char *dir = prepared_set("echo starting\necho 'no WordNet here:' >&2\necho '  install it' >&2\nexit 3\n", hex);
    struct tr_data d;
    ck_assert_int_eq(load_prepared(dir, &d, &text), TR_EINVAL);
    char *want = tr_strdup_printf("%s/dataset.yaml:2:10: prepare: sh %s/make %s/cache/trainrun/datasets/prep "
                                  "failed (exit status 3): no WordNet here:   install it\n", dir, dir, dir);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    /* It succeeds, but what it makes is not what the definition pins. */
    free(unit_write_in(dir, "make", "echo other >\"$1/t.txt\"\n"));
    ck_assert_int_eq(load_prepared(dir, &d, &text), TR_EINVAL);
    char other[65];
    tr_sha256_of("other\n", 6, other);
    want = tr_strdup_printf("%s/cache/trainrun/datasets/prep/t.txt: sha256 mismatch: expected %s "
                            "(%s/dataset.yaml:5:32), got %s\n"
                            "%s/dataset.yaml:2:10: prepare: sh %s/make %s/cache/trainrun/datasets/prep ran, but "
                            "the file above is still missing or unlike its sha256\n",
                            dir, hex, dir, other, dir, dir, dir);
    ck_assert_str_eq(text, want);
    free(want);
    free(text);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- the shipped text sets ------------------------------------------------------------------- */

/* Austen through the bytes tokenizer: a token a byte, so each split holds the bytes that
 * datasets/austen/dataset.yaml counts (five novels; Persuasion's two volumes). */
START_TEST(austen_loads)
{
    struct tr_data d;
    char *text;
    int rc = load_recipe(datasets_dir(), "model: {arch: gpt, max_len: 128}\n"
                         "data: {dataset: austen, tokenizer: {kind: bytes}}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    ck_assert_str_eq(d.name, "austen");
    ck_assert_int_eq(d.kind, TR_DATA_TEXT_LM);
    ck_assert_int_eq(d.vocab, 256);
    ck_assert_int_eq(d.train.ntokens, 3558175);
    ck_assert_int_eq(d.valid.ntokens, 215529);
    ck_assert_int_eq(d.test.ntokens, 251325);
    ck_assert_int_eq(d.train.n, (3558175 - 1) / 128);
    ck_assert_int_eq(d.valid.window, 128);
    static const int32_t start[] = {'S', 'E', 'N', 'S', 'E'};
    ck_assert_mem_eq(d.train.tokens, start, sizeof start);
    tr_data_free(&d);
}
END_TEST

/* WordNet senses, prepared from Debian's wordnet-base into a scratch cache (about 3 s). */
START_TEST(wordnet_senses_loads)
{
    if (access("/usr/share/wordnet/data.noun", R_OK) != 0) {
        printf("wordnet_senses_loads: skipped; apt-get install wordnet-base to run it\n");
        return;
    }
    char *dir = unit_mkdtemp(), *cache = tr_strdup_printf("%s/cache", dir), *text;
    setenv("XDG_CACHE_HOME", cache, 1);
    struct tr_data d;
    int rc = load_recipe(datasets_dir(), "model: {arch: bert, max_len: 64}\n"
                         "data: {dataset: wordnet-senses, tokenizer: {kind: bytes}}\n", &d, &text);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    ck_assert_int_eq(d.kind, TR_DATA_TEXT_CLASSES);
    ck_assert_int_eq(d.train.n, 93371);
    ck_assert_int_eq(d.valid.n, 11800);
    ck_assert_int_eq(d.test.n, 11871);
    ck_assert_int_eq(d.nclasses, 45);
    ck_assert_str_eq(d.class_names[5], "noun.animal");
    int64_t longest = 0;
    for (int64_t i = 0; i < d.train.n; i++)
        if (d.train.offsets[i + 1] - d.train.offsets[i] > longest)
            longest = d.train.offsets[i + 1] - d.train.offsets[i];
    ck_assert_int_eq(longest, 64);   /* glosses run to 505 bytes: cut */
    tr_data_free(&d);
    free(cache);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- the loader ------------------------------------------------------------------------------ */

enum { LN = 103, LF = 3 };

/* Sample i holds features 10i, 10i+1, 10i+2 and label i % 7. */
static struct tr_split numbered_split(void)
{
    struct tr_split s = {.n = LN, .rank = 1, .dims = {LF}};
    s.x = tr_xmalloc(LN * LF * sizeof(float));
    s.y = tr_xmalloc(LN * sizeof(int32_t));
    for (int i = 0; i < LN; i++) {
        for (int j = 0; j < LF; j++)
            s.x[i * LF + j] = (float)(10 * i + j);
        s.y[i] = i % 7;
    }
    return s;
}

static void free_split(struct tr_split *s)
{
    free(s->x);
    free(s->y);
}

static struct tr_loader *open_with(const struct tr_split *s, const struct tr_loader_options *o)
{
    struct tr_loader *l;
    struct tr_diag diag = {0};
    int rc = tr_loader_open(&l, s, o, &diag);
    char *text = unit_diag_text(&diag);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    tr_diag_free(&diag);
    return l;
}

/* Steps of `batch` samples, each one micro-batch (micro 0) unless micro says otherwise. */
static struct tr_loader *open_loader(const struct tr_split *s, int64_t batch, uint64_t seed, int shuffle,
                                     int drop_last, int workers, int prefetch, int64_t micro)
{
    struct tr_loader_options o = {.batch = batch, .micro = micro, .seed = seed, .shuffle = shuffle,
                                  .drop_last = drop_last, .num_workers = workers, .prefetch = prefetch};
    return open_with(s, &o);
}

/* The step's only micro-batch. */
static struct tr_batch next_batch(struct tr_loader *l, struct tr_step *st)
{
    ck_assert_int_eq(tr_loader_next(l, st), 0);
    ck_assert_int_eq(st->nmicro, 1);
    return st->micro[0];
}

/* A batch's rows are the samples its ids name. */
static void check_batch(const struct tr_batch *b)
{
    for (int64_t i = 0; i < b->n; i++) {
        int64_t id = b->ids[i];
        ck_assert(id >= 0 && id < LN);
        ck_assert_float_eq(b->x[i * LF], (float)(10 * id));
        ck_assert_float_eq(b->x[i * LF + 2], (float)(10 * id + 2));
        ck_assert_int_eq(b->y[i], id % 7);
    }
}

/* The ids of the next nbatches batches, checked, appended to out. */
static void take(struct tr_loader *l, int nbatches, int64_t *out, int64_t *count)
{
    for (int k = 0; k < nbatches; k++) {
        struct tr_step st;
        struct tr_batch b = next_batch(l, &st);
        check_batch(&b);
        for (int64_t i = 0; i < b.n; i++)
            out[(*count)++] = b.ids[i];
    }
}

START_TEST(loader_covers_every_sample_once_an_epoch)
{
    struct tr_split s = numbered_split();
    int workers = _i;
    struct tr_loader *l = open_loader(&s, 10, 1, 1, 0, workers, 2, 0);
    ck_assert_int_eq(tr_loader_steps_per_epoch(l), 11);
    for (int epoch = 0; epoch < 3; epoch++) {
        int seen[LN] = {0};
        for (int k = 0; k < 11; k++) {
            struct tr_step st;
            struct tr_batch b = next_batch(l, &st);
            check_batch(&b);
            ck_assert_int_eq(st.epoch, epoch);
            ck_assert_int_eq(st.index, k);
            ck_assert_int_eq(b.n, k < 10 ? 10 : 3);
            for (int64_t i = 0; i < b.n; i++)
                seen[b.ids[i]]++;
        }
        for (int i = 0; i < LN; i++)
            ck_assert_msg(seen[i] == 1, "epoch %d: sample %d seen %d times", epoch, i, seen[i]);
    }
    ck_assert(tr_loader_wait_seconds(l) >= 0);
    tr_loader_close(l);
    free_split(&s);
}
END_TEST

/* One stream whatever the threads: 0, 1 or 3 workers, any prefetch. */
START_TEST(loader_order_is_independent_of_workers)
{
    struct tr_split s = numbered_split();
    enum { BATCHES = 60 };
    static int64_t want[BATCHES * 8], got[BATCHES * 8];
    int64_t nwant = 0;
    struct tr_loader *l = open_loader(&s, 8, 99, 1, 0, 0, 1, 0);
    take(l, BATCHES, want, &nwant);
    tr_loader_close(l);
    static const int configs[][2] = {{1, 1}, {1, 4}, {3, 1}, {3, 2}, {3, 7}, {8, 3}, {0, 5}};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        int64_t ngot = 0;
        l = open_loader(&s, 8, 99, 1, 0, configs[c][0], configs[c][1], 0);
        take(l, BATCHES, got, &ngot);
        tr_loader_close(l);
        ck_assert_int_eq(ngot, nwant);
        ck_assert_msg(!memcmp(got, want, (size_t)nwant * sizeof *got), "workers %d prefetch %d", configs[c][0],
                      configs[c][1]);
    }
    free_split(&s);
}
END_TEST

START_TEST(loader_orders_differ_by_epoch_and_seed)
{
    struct tr_split s = numbered_split();
    int64_t a[2 * LN], b[2 * LN], na = 0, nb = 0;
    struct tr_loader *l = open_loader(&s, LN, 5, 1, 0, 2, 2, 0);
    take(l, 2, a, &na);
    tr_loader_close(l);
    ck_assert(memcmp(a, a + LN, LN * sizeof *a) != 0);   /* epoch 0 against epoch 1 */
    l = open_loader(&s, LN, 6, 1, 0, 2, 2, 0);
    take(l, 2, b, &nb);
    tr_loader_close(l);
    ck_assert(memcmp(a, b, LN * sizeof *a) != 0);        /* seed 5 against seed 6 */
    nb = 0;
    l = open_loader(&s, 50, 5, 0, 0, 1, 2, 0);            /* no shuffle: split order */
    take(l, 3, b, &nb);
    tr_loader_close(l);
    for (int i = 0; i < LN; i++)
        ck_assert_int_eq(b[i], i);
    free_split(&s);
}
END_TEST

/* Seeking to (epoch, index) gives the stream from there, in a fresh loader and mid-stream. */
START_TEST(loader_seek_reproduces_the_stream)
{
    struct tr_split s = numbered_split();
    static int64_t want[64 * 10], got[64 * 10];
    int64_t nwant = 0, ngot = 0, skip = 0;
    struct tr_loader *l = open_loader(&s, 10, 3, 1, 0, 3, 2, 0);
    take(l, 40, want, &nwant);
    tr_loader_close(l);
    for (int k = 0; k < 26; k++)   /* batch 26 is epoch 2, index 4; 11 batches an epoch */
        skip += k % 11 < 10 ? 10 : 3;
    for (int workers = 0; workers <= 3; workers += 3) {
        ngot = 0;
        l = open_loader(&s, 10, 3, 1, 0, workers, 2, 0);
        take(l, 7, got, &ngot);   /* run ahead, then go back */
        ngot = 0;
        tr_loader_seek(l, 2, 4);
        struct tr_step st;
        struct tr_batch b = next_batch(l, &st);
        ck_assert_int_eq(st.epoch, 2);
        ck_assert_int_eq(st.index, 4);
        for (int64_t i = 0; i < b.n; i++)
            got[ngot++] = b.ids[i];
        take(l, 13, got, &ngot);
        ck_assert_mem_eq(got, want + skip, (size_t)ngot * sizeof *got);
        tr_loader_seek(l, 0, 0);   /* and back to the start */
        ngot = 0;
        take(l, 5, got, &ngot);
        ck_assert_mem_eq(got, want, (size_t)ngot * sizeof *got);
        tr_loader_close(l);
    }
    free_split(&s);
}
END_TEST

START_TEST(loader_drop_last)
{
    struct tr_split s = numbered_split();
    struct tr_loader *l = open_loader(&s, 10, 1, 1, 1, 2, 2, 0);
    ck_assert_int_eq(tr_loader_steps_per_epoch(l), 10);
    for (int k = 0; k < 25; k++) {
        struct tr_step st;
        struct tr_batch b = next_batch(l, &st);
        ck_assert_int_eq(b.n, 10);
        ck_assert_int_eq(st.epoch, k / 10);
        ck_assert_int_eq(st.index, k % 10);
    }
    tr_loader_close(l);
    struct tr_loader *none;
    struct tr_diag diag = {0};
    struct tr_loader_options o = {.batch = 200, .seed = 1, .shuffle = 1, .drop_last = 1, .num_workers = 2,
                                  .prefetch = 2};
    ck_assert_int_eq(tr_loader_open(&none, &s, &o, &diag), TR_EINVAL);
    ck_assert_ptr_null(none);
    char *text = unit_diag_text(&diag);
    ck_assert_str_eq(text, "loader: the split holds fewer samples than one batch, and drop_last drops that "
                           "one (batch 200, 103 samples)\n");
    free(text);
    tr_diag_free(&diag);
    o = (struct tr_loader_options){.batch = 0, .seed = 1, .shuffle = 1, .num_workers = 2, .prefetch = 2};
    ck_assert_int_eq(tr_loader_open(&none, &s, &o, &diag), TR_EINVAL);
    tr_diag_free(&diag);
    free_split(&s);
}
END_TEST

/* A step of 28 in micro-batches of 7: four, each whole, and all of them valid together while the
 * workers run ahead. */
START_TEST(loader_step_keeps_its_micro_batches)
{
    struct tr_split s = numbered_split();
    struct tr_loader *l = open_loader(&s, 28, 2, 1, 0, 3, 1, 7);
    for (int k = 0; k < 30; k++) {
        struct tr_step st;
        tr_loader_next(l, &st);
        int64_t ids[28], n = 0;
        for (int a = 0; a < st.nmicro; a++) {
            ck_assert_int_le(st.micro[a].n, 7);
            memcpy(ids + n, st.micro[a].ids, (size_t)st.micro[a].n * sizeof(int64_t));
            n += st.micro[a].n;
        }
        ck_assert_int_eq(n, st.n);
        ck_assert_int_eq(st.n, k % 4 < 3 ? 28 : 103 - 84);
        ck_assert_int_eq(st.nmicro, (st.n + 6) / 7);
        usleep(2000);   /* let the workers fill every free slot */
        for (int a = 0, at = 0; a < st.nmicro; at += (int)st.micro[a].n, a++) {
            ck_assert_msg(!memcmp(ids + at, st.micro[a].ids, (size_t)st.micro[a].n * sizeof(int64_t)),
                          "step %d: micro-batch %d was overwritten while held", k, a);
            check_batch(&st.micro[a]);
        }
    }
    tr_loader_close(l);
    free_split(&s);
}
END_TEST

/* ---- dynamic batching ---------------------------------------------------------------------- */

enum { TN = 1000, TBATCH = 32 };

/* TN classification texts of lengths 3 … 120, skewed short as real ones are: sample i holds
 * tokens 1000·i + j and label i % 5. */
static struct tr_split text_split(void)
{
    struct tr_split s = {.n = TN};
    s.offsets = tr_xmalloc((TN + 1) * sizeof(int64_t));
    s.y = tr_xmalloc(TN * sizeof(int32_t));
    uint64_t state = 7;
    s.offsets[0] = 0;
    for (int i = 0; i < TN; i++) {
        uint64_t r = tr_splitmix64(&state) % 1000;
        int64_t len = 3 + (int64_t)(r * r / 8500);   /* 3 … 120 */
        s.offsets[i + 1] = s.offsets[i] + len;
        s.y[i] = i % 5;
    }
    s.ntokens = s.offsets[TN];
    s.tokens = tr_xmalloc((size_t)s.ntokens * sizeof(int32_t));
    for (int i = 0; i < TN; i++)
        for (int64_t j = s.offsets[i]; j < s.offsets[i + 1]; j++)
            s.tokens[j] = (int32_t)(1000 * i + (j - s.offsets[i]));
    return s;
}

static void free_text_split(struct tr_split *s)
{
    free(s->offsets), free(s->y), free(s->tokens);
}

static const struct tr_length_bucket text_buckets[] = {{16, 32}, {32, 32}, {64, 16}, {120, 8}};

static struct tr_loader *open_dynamic(const struct tr_split *s, uint64_t seed, int workers, int prefetch)
{
    struct tr_loader_options o = {.batch = TBATCH, .buckets = text_buckets, .nbuckets = 4, .pool = 4,
                                  .seed = seed, .shuffle = 1, .num_workers = workers, .prefetch = prefetch};
    return open_with(s, &o);
}

/* Appends the step's ids to out and checks each micro-batch: within one bucket's rows and
 * length, padded to its own longest, its tokens and mask those of the samples it names. */
static void check_dynamic_step(const struct tr_split *s, const struct tr_step *st, int64_t *out, int64_t *count)
{
    int64_t real = 0, slots = 0, n = 0;
    for (int a = 0; a < st->nmicro; a++) {
        const struct tr_batch *b = &st->micro[a];
        int64_t longest = 0, shortest = 1 << 20;
        for (int64_t i = 0; i < b->n; i++) {
            int64_t id = b->ids[i], len = tr_text_length(s, id);
            longest = len > longest ? len : longest;
            shortest = len < shortest ? len : shortest;
            for (int64_t j = 0; j < b->S; j++) {
                ck_assert_int_eq(b->mask[i * b->S + j], j < len);
                if (j < len)
                    ck_assert_int_eq(b->tokens[i * b->S + j], 1000 * id + j);
            }
            ck_assert_int_eq(b->y[i], id % 5);
            out[(*count)++] = id;
            real += len;
        }
        ck_assert_int_eq(b->S, longest);
        int k = 0;   /* the bucket of its longest; its shortest is in the same one */
        while (text_buckets[k].len < longest)
            k++;
        ck_assert_msg(k == 0 || shortest > text_buckets[k - 1].len, "micro-batch %d mixes buckets: %lld … %lld",
                      a, (long long)shortest, (long long)longest);
        ck_assert_int_le(b->n, text_buckets[k].rows);
        slots += b->n * b->S;
        n += b->n;
    }
    ck_assert_int_eq(n, st->n);
    ck_assert_int_eq(real, st->tokens);
    ck_assert_int_eq(slots, st->slots);
}

/* Every sample once an epoch, in steps of the batch (the last one short), cut by length. */
/* hold 2 (a device copying ahead): the step taken before stays as it was while the next is
 * taken and the workers refill every slot they may; with 0 workers too, whose one slot hold 1
 * would reuse at once. */
START_TEST(loader_hold_two_keeps_the_step_before)
{
    struct tr_split s = numbered_split();
    int workers = _i;
    struct tr_loader_options o = {.batch = 9, .micro = 4, .seed = 5, .shuffle = 1, .num_workers = workers,
                                  .prefetch = 2, .hold = 2};
    struct tr_loader *l = open_with(&s, &o);
    struct tr_step before, now;
    int64_t ids[9];
    tr_loader_next(l, &before);
    for (int k = 0; k < 40; k++) {
        int64_t n = 0;
        for (int a = 0; a < before.nmicro; a++) {
            memcpy(ids + n, before.micro[a].ids, (size_t)before.micro[a].n * sizeof(int64_t));
            n += before.micro[a].n;
        }
        tr_loader_next(l, &now);
        usleep(1000);   /* let the workers fill every free slot */
        for (int a = 0, at = 0; a < before.nmicro; at += (int)before.micro[a].n, a++) {
            ck_assert_msg(!memcmp(ids + at, before.micro[a].ids, (size_t)before.micro[a].n * sizeof(int64_t)),
                          "step %d: held micro-batch %d was overwritten when the next was taken", k, a);
            check_batch(&before.micro[a]);
        }
        before = now;
    }
    tr_loader_close(l);
    free_split(&s);
}
END_TEST

START_TEST(dynamic_batching_cuts_steps_by_length)
{
    struct tr_split s = text_split();
    struct tr_loader *l = open_dynamic(&s, 3, 2, 2);
    int64_t per_epoch = tr_loader_steps_per_epoch(l), slots = 0, tokens = 0;
    ck_assert_int_eq(per_epoch, (TN + TBATCH - 1) / TBATCH);
    static int64_t ids[2][TN];
    for (int epoch = 0; epoch < 2; epoch++) {
        int64_t count = 0;
        int seen[TN] = {0};
        for (int64_t k = 0; k < per_epoch; k++) {
            struct tr_step st;
            tr_loader_next(l, &st);
            ck_assert_int_eq(st.epoch, epoch);
            ck_assert_int_eq(st.n, k < per_epoch - 1 ? TBATCH : TN - (per_epoch - 1) * TBATCH);
            check_dynamic_step(&s, &st, ids[epoch], &count);
            slots += st.slots, tokens += st.tokens;
        }
        for (int64_t i = 0; i < count; i++)
            seen[ids[epoch][i]]++;
        for (int i = 0; i < TN; i++)
            ck_assert_msg(seen[i] == 1, "epoch %d: sample %d seen %d times", epoch, i, seen[i]);
    }
    ck_assert(memcmp(ids[0], ids[1], sizeof ids[0]));   /* each epoch its own order */
    /* sorted pools pad far less than batches of the shuffled order would (~1.5 here) */
    ck_assert_msg((double)(slots - tokens) / (double)tokens < 0.25, "padding %.3f",
                  (double)(slots - tokens) / (double)tokens);
    tr_loader_close(l);
    free_text_split(&s);
}
END_TEST

/* The same steps for any number of workers, and from any step after a seek. */
START_TEST(dynamic_batching_is_deterministic_and_seekable)
{
    struct tr_split s = text_split();
    enum { STEPS = 80 };   /* two and a half epochs */
    static int64_t want[STEPS * TBATCH], got[STEPS * TBATCH];
    static int64_t want_micro[STEPS], got_micro[STEPS];
    int64_t nwant = 0;
    struct tr_loader *l = open_dynamic(&s, 11, 0, 1);
    for (int k = 0; k < STEPS; k++) {
        struct tr_step st;
        tr_loader_next(l, &st);
        check_dynamic_step(&s, &st, want, &nwant);
        want_micro[k] = st.nmicro;
    }
    tr_loader_close(l);
    static const int configs[][2] = {{1, 1}, {3, 2}, {4, 5}};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        int64_t ngot = 0;
        l = open_dynamic(&s, 11, configs[c][0], configs[c][1]);
        for (int k = 0; k < STEPS; k++) {
            struct tr_step st;
            tr_loader_next(l, &st);
            check_dynamic_step(&s, &st, got, &ngot);
            got_micro[k] = st.nmicro;
        }
        ck_assert_int_eq(ngot, nwant);
        ck_assert_mem_eq(got, want, (size_t)nwant * sizeof *got);
        ck_assert_mem_eq(got_micro, want_micro, sizeof got_micro);
        int64_t per_epoch = tr_loader_steps_per_epoch(l), at = 45;   /* epoch 1, mid-way */
        tr_loader_seek(l, at / per_epoch, at % per_epoch);
        int64_t skip = 0;
        for (int k = 0; k < at; k++)
            skip += k % per_epoch < per_epoch - 1 ? TBATCH : TN - (per_epoch - 1) * TBATCH;
        ngot = 0;
        for (int k = (int)at; k < STEPS; k++) {
            struct tr_step st;
            tr_loader_next(l, &st);
            check_dynamic_step(&s, &st, got, &ngot);
            ck_assert_int_eq(st.nmicro, want_micro[k]);
        }
        ck_assert_mem_eq(got, want + skip, (size_t)ngot * sizeof *got);
        tr_loader_close(l);
    }
    /* another seed, another stream */
    int64_t nother = 0;
    l = open_dynamic(&s, 12, 2, 2);
    for (int k = 0; k < 4; k++) {
        struct tr_step st;
        tr_loader_next(l, &st);
        check_dynamic_step(&s, &st, got, &nother);
    }
    ck_assert(memcmp(got, want, (size_t)nother * sizeof *got));
    tr_loader_close(l);
    free_text_split(&s);
}
END_TEST

/* Nearest-rank percentiles of lengths 1 … 100, stored in reverse. */
START_TEST(text_percentiles)
{
    int64_t offsets[101] = {0};
    for (int i = 0; i < 100; i++)
        offsets[i + 1] = offsets[i] + (100 - i);
    struct tr_split s = {.n = 100, .offsets = offsets};
    ck_assert_int_eq(tr_text_percentile(&s, 0.5), 50);
    ck_assert_int_eq(tr_text_percentile(&s, 0.99), 99);
    ck_assert_int_eq(tr_text_percentile(&s, 1), 100);
    ck_assert_int_eq(tr_text_percentile(&s, 0), 1);
    s = (struct tr_split){.n = 3, .window = 64};   /* language modelling: every window alike */
    ck_assert_int_eq(tr_text_percentile(&s, 0.5), 64);
}
END_TEST

START_TEST(dynamic_batching_refuses_bad_buckets)
{
    struct tr_split s = text_split(), numbers = numbered_split();
    static const struct {
        struct tr_length_bucket b[2];
        int n;
        const char *why;
    } cases[] = {
        {{{16, 8}, {64, 4}}, 2, "the last bucket is shorter than the longest sequence"},
        {{{64, 8}, {32, 4}}, 2, "buckets must grow in length and hold at least one row"},
        {{{16, 8}, {200, 0}}, 2, "buckets must grow in length and hold at least one row"},
    };
    for (size_t c = 0; c <= sizeof cases / sizeof cases[0]; c++) {
        struct tr_loader *none;
        struct tr_diag diag = {0};
        int text = c < sizeof cases / sizeof cases[0];
        struct tr_loader_options o = {.batch = TBATCH, .buckets = text ? cases[c].b : text_buckets,
                                      .nbuckets = text ? cases[c].n : 4, .pool = 2, .prefetch = 1};
        ck_assert_int_eq(tr_loader_open(&none, text ? &s : &numbers, &o, &diag), TR_EINVAL);
        char *msg = unit_diag_text(&diag);
        ck_assert_msg(strstr(msg, text ? cases[c].why : "length buckets need text"), "%s", msg);
        free(msg);
        tr_diag_free(&diag);
    }
    free_text_split(&s);
    free_split(&numbers);
}
END_TEST

static Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("sha256");
    tcase_add_loop_test(tc, sha256_fips_vectors, 0, (int)(sizeof fips / sizeof fips[0]));
    tcase_add_test(tc, sha256_million_a);
    tcase_add_test(tc, sha256_pieces_match_whole);
    tcase_add_test(tc, shuffle_is_a_seeded_permutation);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_add_test(tc, csv_reads_numbers_and_labels);
    tcase_add_test(tc, csv_label_columns);
    tcase_add_test(tc, csv_sklearn_header);
    tcase_add_test(tc, csv_gzip_and_sha256);
    tcase_add_test(tc, csv_errors);
    tcase_add_test(tc, csv_text_needs_no_nul);
    tcase_add_test(tc, csv_label_errors);
    tcase_add_test(tc, csv_pool_classes_bind_later_files);
    tcase_add_test(tc, csv_mean_comes_from_the_pool);
    tcase_add_loop_test(tc, definition_errors, 0, (int)(sizeof bad_definitions / sizeof bad_definitions[0]));
    tcase_add_test(tc, missing_file_names_the_package);
    tcase_add_test(tc, idx_reads_images_and_labels);
    tcase_add_loop_test(tc, idx_errors, 0, (int)(sizeof bad_idx / sizeof bad_idx[0]));
    tcase_add_test(tc, splits_are_disjoint_deterministic_and_in_file_order);
    tcase_add_test(tc, standardize_uses_train_statistics);
    tcase_add_test(tc, inline_csv_is_split_like_a_definition);
    suite_add_tcase(s, tc);

    tc = tcase_create("datasets");
    tcase_add_test(tc, digits_loads);
    tcase_add_test(tc, iris_loads_standardized);
    tcase_add_test(tc, unknown_dataset_lists_the_known_ones);
    tcase_add_test(tc, fashion_mnist_loads);
    tcase_add_test(tc, austen_loads);
    tcase_add_test(tc, wordnet_senses_loads);
    tcase_set_timeout(tc, 120);   /* Fashion-MNIST under the sanitizers */
    suite_add_tcase(s, tc);

    tc = tcase_create("text");
    tcase_add_test(tc, tsv_reads_texts_and_label_names);
    tcase_add_test(tc, jsonl_reads_objects);
    tcase_add_test(tc, tsv_one_source_is_split);
    tcase_add_test(tc, recipe_tokenizer_and_max_len);
    tcase_add_test(tc, text_without_tokenizer);
    tcase_add_test(tc, text_stream_in_windows);
    tcase_add_test(tc, text_errors);
    tcase_add_test(tc, prepare_runs_once);
    tcase_add_test(tc, prepare_failures);
    suite_add_tcase(s, tc);

    tc = tcase_create("loader");
    tcase_add_loop_test(tc, loader_covers_every_sample_once_an_epoch, 0, 4);
    tcase_add_test(tc, loader_order_is_independent_of_workers);
    tcase_add_test(tc, loader_orders_differ_by_epoch_and_seed);
    tcase_add_test(tc, loader_seek_reproduces_the_stream);
    tcase_add_test(tc, loader_drop_last);
    tcase_add_test(tc, loader_step_keeps_its_micro_batches);
    tcase_add_loop_test(tc, loader_hold_two_keeps_the_step_before, 0, 4);
    tcase_add_test(tc, dynamic_batching_cuts_steps_by_length);
    tcase_add_test(tc, dynamic_batching_is_deterministic_and_seekable);
    tcase_add_test(tc, dynamic_batching_refuses_bad_buckets);
    tcase_add_test(tc, text_percentiles);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(data_suite());
}
