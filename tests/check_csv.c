/* Unit tests of the csv reader (src/data/csv.c, libcsv underneath): tables as people keep them,
 * with a header line, class names as labels, RFC 4180 quoting and CRLF, and missing cells under
 * each policy; every refusal at its file:line:column. Then the same through a definition, where
 * the pool's classes bind the valid and test files and missing: mean uses the pool's means. */
#include "runner.h"

#include "data/csv.h"
#include "data/definition.h"
#include "unit.h"

/* tr_csv_parse over text in a buffer of its exact size (no NUL after it, for ASan). */
static int parse(const char *csv, const struct tr_csv_options *o, struct tr_table *t, char **text)
{
    size_t len = strlen(csv);
    char *copy = tr_xmalloc(len ? len : 1);
    memcpy(copy, csv, len);
    struct tr_diag diag = {0};
    int rc = tr_csv_parse("t.csv", copy, len, o, t, &diag);
    *text = unit_diag_text(&diag);
    tr_diag_free(&diag);
    free(copy);
    return rc;
}

static void expect_table(const char *csv, const struct tr_csv_options *o, struct tr_table *t)
{
    char *text;
    ck_assert_msg(parse(csv, o, t, &text) == 0, "%s", text);
    free(text);
}

static void expect_refusal(const char *csv, const struct tr_csv_options *o, const char *line)
{
    struct tr_table t;
    char *text;
    ck_assert_msg(parse(csv, o, &t, &text) != 0, "parsed, expected: %s", line);
    char *want = tr_strdup_printf("%s\n", line);
    ck_assert_str_eq(text, want);
    ck_assert_ptr_null(t.x);
    ck_assert_ptr_null(t.class_names);
    free(want);
    free(text);
}

static void free_table(struct tr_table *t)
{
    free(t->x);
    free(t->y);
    for (int i = 0; t->class_names && t->class_names[i]; i++)
        free(t->class_names[i]);
    free(t->class_names);
}

/* String labels are classes in byte order: the same rows in any order get the same ids. */
START_TEST(string_labels_are_classes_in_byte_order)
{
    struct tr_csv_options o = {.header = TR_HEADER_AUTO};
    struct tr_table t, u;
    expect_table("x,y,species\n1,2,virginica\n3,4,setosa\n5,6,versicolor\n7,8,setosa\n", &o, &t);
    ck_assert_int_eq(t.n, 4);
    ck_assert_int_eq(t.nfeatures, 2);
    ck_assert_int_eq(t.nclasses, 3);
    ck_assert_str_eq(t.class_names[0], "setosa");
    ck_assert_str_eq(t.class_names[1], "versicolor");
    ck_assert_str_eq(t.class_names[2], "virginica");
    ck_assert_ptr_null(t.class_names[3]);
    int32_t want[4] = {2, 0, 1, 0};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(t.y[i], want[i]);
    expect_table("x,y,species\n5,6,versicolor\n7,8,setosa\n1,2,virginica\n", &o, &u);
    ck_assert_int_eq(u.y[0], 1);
    ck_assert_int_eq(u.y[1], 0);
    ck_assert_int_eq(u.y[2], 2);
    free_table(&u);
    free_table(&t);
    /* Byte order, not the locale's: upper case before lower, "T" before "benign". */
    expect_table("1,T\n2,benign\n3,F\n", &o, &t);
    ck_assert_str_eq(t.class_names[0], "F");
    ck_assert_str_eq(t.class_names[1], "T");
    ck_assert_str_eq(t.class_names[2], "benign");
    free_table(&t);
    /* Whole numbers ≥ 0 stay class numbers; -1/1 are names ("-1" before "1"). */
    expect_table("1,2,3\n4,5,0\n", &o, &t);
    ck_assert_ptr_null(t.class_names);
    ck_assert_int_eq(t.nclasses, 4);
    ck_assert_int_eq(t.y[0], 3);
    free_table(&t);
    expect_table("1,2,1\n4,5,-1\n", &o, &t);
    ck_assert_str_eq(t.class_names[0], "-1");
    ck_assert_int_eq(t.y[0], 1);
    ck_assert_int_eq(t.y[1], 0);
    free_table(&t);
}
END_TEST

START_TEST(header_detected_or_declared)
{
    struct tr_table t;
    struct tr_csv_options o = {.header = TR_HEADER_AUTO};
    expect_table("1,2,0\n3,4,1\n", &o, &t);   /* numbers over numbers: data */
    ck_assert_int_eq(t.n, 2);
    free_table(&t);
    expect_table("a,b,label\n1,2,0\n", &o, &t);   /* a word over a number: names */
    ck_assert_int_eq(t.n, 1);
    free_table(&t);
    expect_table("1,NA,cat\n3,4,dog\n", &(struct tr_csv_options){.missing = TR_MISSING_ZERO}, &t);
    ck_assert_int_eq(t.n, 2);   /* a missing cell over a number is no header, a word over a word neither */
    free_table(&t);
    o.header = TR_HEADER_NAMES;   /* header: true */
    expect_table("0,1,2\n1,2,0\n", &o, &t);
    ck_assert_int_eq(t.n, 1);
    free_table(&t);
    o.header = TR_HEADER_NONE;    /* header: false */
    expect_refusal("x,y,z\n1,2,0\n", &o, "t.csv:1:1: 'x' is not a number (if this line names the columns, set "
                                         "header: true)");
    o.header = TR_HEADER_AUTO;
    expect_refusal("x,y,z\n", &o, "t.csv: the file holds no samples: only a header line");
}
END_TEST

/* RFC 4180: quoted cells hold delimiters, "" and line breaks; CRLF ends rows; a BOM is skipped. */
START_TEST(quoting_and_crlf)
{
    struct tr_table t;
    struct tr_csv_options o = {.header = TR_HEADER_AUTO, .label = "kind"};
    expect_table("\xef\xbb\xbf\"width, cm\",\"say \"\"x\"\"\",kind\r\n\"1.5\",2,\"Iris, setosa\"\r\n"
                 "3,4,\"a \"\"b\"\"\"\r\n", &o, &t);
    ck_assert_int_eq(t.n, 2);
    ck_assert_double_eq(t.x[0], 1.5);
    ck_assert_str_eq(t.class_names[0], "Iris, setosa");
    ck_assert_str_eq(t.class_names[1], "a \"b\"");
    free_table(&t);
    o.label = NULL;
    expect_refusal("1,2,0\n3,4\"5,1\n", &o, "t.csv:2:4: '\"' inside an unquoted cell; quote the whole cell and "
                                          "double each '\"' in it (RFC 4180)");
    expect_refusal("1,2,0\n3,\"4\"5,1\n", &o, "t.csv:2:6: text after a quoted cell's closing '\"'; a quoted cell "
                                            "ends at the delimiter or the line's end");
    expect_refusal("1,2,0\n3,4,\"a\n5,6,b\n", &o, "t.csv:2:5: this quoted cell is never closed: a '\"' must end it");
    expect_refusal("1,2,\"a\nb\"\n", &o, "t.csv:1:5: the label holds a control character (byte 0x0a); class names "
                                         "are one line of text");
    expect_refusal("1,2,\xff\n", &o, "t.csv:1:5: the label is not UTF-8 (byte 0xff); class names are text");
}
END_TEST

START_TEST(missing_cells_by_policy)
{
    struct tr_table t;
    const char *csv = "a,b,label\n1,2,x\n,4,y\nNA,6,x\n7,?,\n";
    struct tr_csv_options o = {.header = TR_HEADER_AUTO};
    expect_refusal(csv, &o, "t.csv:3:1: missing value (an empty cell); set missing: drop, zero or mean to accept "
                            "such cells");
    expect_refusal("a,b\n1,N/A\n", &(struct tr_csv_options){.label = "first"},
                   "t.csv:2:3: missing value ('N/A'); set missing: drop, zero or mean to accept such cells");
    o.missing = TR_MISSING_DROP;
    expect_table(csv, &o, &t);
    ck_assert_int_eq(t.n, 1);
    ck_assert_int_eq(t.dropped, 3);
    free_table(&t);
    o.missing = TR_MISSING_ZERO;
    expect_refusal(csv, &o, "t.csv:5:5: the label is missing; a row without one can only be left out (missing: "
                            "drop)");
    expect_table("a,b,label\n1,2,x\n,4,y\nNA,6,x\n", &o, &t);
    ck_assert_double_eq(t.x[2], 0);
    ck_assert_double_eq(t.x[4], 0);
    ck_assert(!t.missing);
    free_table(&t);
    o.missing = TR_MISSING_MEAN;   /* NaN here; the data stage fills in the pool's mean */
    expect_table("a,b,label\n1,2,x\n,4,y\nNA,6,x\n", &o, &t);
    ck_assert(t.missing);
    ck_assert(isnan(t.x[2]));
    free_table(&t);
    /* A quoted NA is the text NA: not a number. */
    expect_refusal("a,b,label\n1,2,x\n\"NA\",6,x\n", &(struct tr_csv_options){.missing = TR_MISSING_ZERO},
                   "t.csv:3:1: 'NA' is not a number");
}
END_TEST

START_TEST(label_column_by_name_or_index)
{
    struct tr_table t;
    const char *csv = "kind,a,b\ncat,1,2\ndog,3,4\n";
    expect_table(csv, &(struct tr_csv_options){.label = "kind"}, &t);
    ck_assert_int_eq(t.nfeatures, 2);
    ck_assert_double_eq(t.x[0], 1);
    free_table(&t);
    expect_table(csv, &(struct tr_csv_options){.label = "-3"}, &t);
    ck_assert_str_eq(t.class_names[1], "dog");
    free_table(&t);
    expect_table("1,2,5\n3,4,6\n", &(struct tr_csv_options){.label = "-2"}, &t);
    ck_assert_int_eq(t.y[1], 4);
    ck_assert_double_eq(t.x[1], 5);
    free_table(&t);
    expect_refusal(csv, &(struct tr_csv_options){.label = "-4"},
                   "label: column -4 does not exist; t.csv has 3 columns (0 to 2, or -1 to -3 from the end)");
    expect_refusal("1,2,x\n", &(struct tr_csv_options){.label = "kind"},
                   "label: t.csv has no column named 'kind' (its first line is not a header of column names; set "
                   "header: true if it is)");
}
END_TEST

/* Fixed classes (the definition's, or the pool's for a valid or test file): names or numbers. */
START_TEST(fixed_classes_bind_labels)
{
    char *names[] = {"setosa", "versicolor", "virginica", NULL};
    struct tr_csv_options o = {.header = TR_HEADER_NONE, .class_names = names, .nclasses = 3};
    struct tr_table t;
    expect_table("1,virginica\n2,1\n", &o, &t);
    ck_assert_int_eq(t.y[0], 2);
    ck_assert_int_eq(t.y[1], 1);
    free_table(&t);
    expect_refusal("1,setosa\n2,virginca\n", &o, "t.csv:2:3: label 'virginca' is not one of the 3 classes (setosa, "
                                                  "…) nor a class number below 3; did you mean 'virginica'?");
    expect_refusal("1,a\n2,b\n", &(struct tr_csv_options){.nclasses = 3},
                   "t.csv: the labels name 2 classes; num_classes says 3");
}
END_TEST

static int count_rows(void *ctx, const struct tr_csv_cell *cells, int n, struct tr_diag *diag)
{
    (void)diag;
    int *rows = ctx;
    if (*rows == 1) {   /* the second row: quotes and blanks are its text's own */
        ck_assert_int_eq(n, 2);
        ck_assert_str_eq(cells[0].s, " a \"b\" ");
        ck_assert_int_eq(cells[1].line, 3);
        ck_assert_int_eq(cells[1].col, 9);
    }
    ++*rows;
    return 0;
}

/* The tsv dialect: a TAB between cells, no quoting, nothing trimmed. */
START_TEST(tsv_rows_keep_their_text)
{
    const char *tsv = "text\tlabel\n\n a \"b\" \tx\n";
    struct tr_csv_dialect d = {.delimiter = '\t', .quoting = false, .trim = false, .first_line = 1};
    int rows = 0;
    struct tr_diag diag = {0};
    ck_assert_int_eq(tr_csv_rows("t.tsv", tsv, strlen(tsv), &d, count_rows, &rows, &diag), 0);
    ck_assert_int_eq(rows, 2);
    tr_diag_free(&diag);
}
END_TEST

static Suite *csv_suite(void)
{
    Suite *s = suite_create("csv");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, string_labels_are_classes_in_byte_order);
    tcase_add_test(tc, header_detected_or_declared);
    tcase_add_test(tc, quoting_and_crlf);
    tcase_add_test(tc, missing_cells_by_policy);
    tcase_add_test(tc, label_column_by_name_or_index);
    tcase_add_test(tc, fixed_classes_bind_labels);
    tcase_add_test(tc, tsv_rows_keep_their_text);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(csv_suite());
}
