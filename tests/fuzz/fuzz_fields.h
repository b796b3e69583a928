/* The body of the TSV and JSON Lines harnesses (fuzz_tsv.c, fuzz_jsonl.c): the input is a whole
 * file of samples read from memory by tr_text_parse (src/data/files.c) as a text-classification
 * set reads it, fields "text" and "label", after tr_utf8_check; each sample's text is then
 * tokenised (bytes or WordPiece, the input's first byte choosing, and whether labels are class
 * names or numbers). Beyond ASan+UBSan: a refusal names the file, every sample handed on lies
 * inside the input and has a label below the class count. */
#ifndef TR_FUZZ_FIELDS_H
#define TR_FUZZ_FIELDS_H

#include "fuzz_tokenizers.h"

#include "data/files.h"

struct fields_seen {
    const char *begin, *end;   /* the input */
    int nclasses, kind;
    long samples;
};

static int take_sample(void *ctx, const struct tr_text_sample *s, struct tr_diag *diag)
{
    (void)diag;
    struct fields_seen *seen = ctx;
    FUZZ_CHECK(s->label >= 0 && s->label < seen->nclasses);
    FUZZ_CHECK(s->line >= 1 && s->col >= 1);
    unsigned sum = 0;
    for (size_t i = 0; i < s->len; i++)   /* the text may be unescaped into a buffer of its own */
        sum += (unsigned char)s->text[i];
    (void)sum;
    fuzz_tokenize(seen->kind, s->text, s->len);
    seen->samples++;
    return 0;
}

static int fuzz_fields(const uint8_t *input, size_t size, int format, const char *path)
{
    if (size < 1)
        return 0;
    static char *const names[] = {"neg", "pos", "other", NULL};
    int flags = input[0];
    char *text = malloc(size - 1 ? size - 1 : 1);   /* exact size: ASan sees a read past its end */
    memcpy(text, input + 1, size - 1);
    struct tr_text_options o = {
        .format = format, .text = "text", .label = "label",
        .class_names = flags & 1 ? names : NULL, .nclasses = 3, .first_line = 1,
    };
    struct fields_seen seen = {text, text + size - 1, 3, flags & 2 ? TR_TOK_WORDPIECE : TR_TOK_BYTES, 0};
    struct tr_diag diag = {0};
    int rc = tr_utf8_check(path, text, size - 1, 1, &diag);
    if (!rc)
        rc = tr_text_parse(path, text, size - 1, &o, take_sample, &seen, &diag);
    if (rc)
        fuzz_check_names(&diag, path);
    tr_diag_free(&diag);
    free(text);
    return 0;
}

#endif
