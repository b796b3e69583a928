/* libFuzzer harness for the csv reader (src/data/csv.c, over libcsv): the input's first byte
 * picks the options (header, missing policy, delimiter, label column, fixed classes), the rest
 * is the file. Beyond crashes, leaks and undefined behaviour (ASan+UBSan; the text is copied to
 * a buffer of its exact size, so a read past its end is caught), it checks what dataset.c relies
 * on after a successful parse: every label is a class below nclasses, the class names are
 * sorted, distinct and nclasses of them, features are finite (NaN only where missing: mean left
 * them), and a failure leaves one message naming the file and an empty table. The same text is
 * also cut into rows without quoting (the tsv dialect), each cell checked against the input. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/csv.h"
#include "data/definition.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_csv: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static const char *const labels[] = {NULL, "first", "-1", "1", "species", "-3"};
static char *const fixed_classes[] = {"setosa", "versicolor", "virginica", NULL};

static void check_table(const struct tr_table *t, const struct tr_csv_options *o)
{
    CHECK(t->n > 0 && t->nfeatures >= 1 && t->rank == 1 && t->dims[0] == t->nfeatures);
    CHECK(t->nclasses >= 1 || (t->nclasses == 0 && !t->class_names));
    for (int64_t i = 0; i < t->n; i++)
        CHECK(t->y[i] >= 0 && t->y[i] < t->nclasses);
    for (int64_t i = 0; i < t->n * t->nfeatures; i++)
        CHECK(isfinite(t->x[i]) || (isnan(t->x[i]) && t->missing && o->missing == TR_MISSING_MEAN));
    /* Names from the labels are sorted; an sklearn header's (header: auto may find one) are its own. */
    bool from_labels = !o->class_names && (o->header == TR_HEADER_NONE || o->header == TR_HEADER_NAMES);
    if (t->class_names && from_labels) {
        int n = 0;
        for (; t->class_names[n]; n++)
            CHECK(!n || strcmp(t->class_names[n - 1], t->class_names[n]) < 0);
        CHECK(n == t->nclasses);
    }
}

struct row_check {
    const char *text;
    size_t len;
};

static int check_row(void *ctx, const struct tr_csv_cell *cells, int n, struct tr_diag *diag)
{
    (void)diag;
    const struct row_check *rc = ctx;
    CHECK(n >= 1);
    for (int i = 0; i < n; i++) {   /* unquoted and untrimmed: each cell is the text's own bytes */
        CHECK(cells[i].line >= 1 && cells[i].col >= 1);
        CHECK(cells[i].s[cells[i].n] == '\0');
        CHECK(memchr(cells[i].s, '\t', cells[i].n) == NULL);
    }
    (void)rc;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);   /* libFuzzer's entry point */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t pick = data[0];
    char *text = malloc(size - 1 ? size - 1 : 1);
    memcpy(text, data + 1, size - 1);
    struct tr_csv_options o = {.header = pick & 3, .missing = (pick >> 2) & 3,
                               .delimiter = (pick & 0x10) ? '\t' : ',', .label = labels[(pick >> 5) % 6],
                               .class_names = (pick & 0x80) && (pick & 0x40) ? fixed_classes : NULL};
    o.nclasses = o.class_names ? 3 : 0;
    struct tr_table t;
    struct tr_diag diag = {0};
    int rc = tr_csv_parse("f.csv", text, size - 1, &o, &t, &diag);
    if (rc) {
        CHECK(rc < 0 && diag.n >= 1 && t.x == NULL && t.y == NULL && t.class_names == NULL && t.n == 0);
        char *line = tr_diag_line(&diag, 0);
        CHECK(strstr(line, "f.csv") != NULL || diag.items[0].where.file == NULL);
        free(line);
    } else {
        CHECK(diag.n == 0);
        check_table(&t, &o);
        free(t.x);
        free(t.y);
        for (int i = 0; t.class_names && t.class_names[i]; i++)
            free(t.class_names[i]);
        free(t.class_names);
    }
    tr_diag_free(&diag);
    /* The tsv dialect reads UTF-8 text (checked first): without 0xff, which stands in for its quote. */
    if (!memchr(text, 0xff, size - 1)) {
        struct row_check ctx = {text, size - 1};
        struct tr_csv_dialect tsv = {.delimiter = '\t', .quoting = false, .trim = false, .first_line = 1};
        struct tr_diag rows = {0};
        CHECK(tr_csv_rows("f.tsv", text, size - 1, &tsv, check_row, &ctx, &rows) == 0 || rows.n == 1);
        tr_diag_free(&rows);
    }
    free(text);
    return 0;
}
