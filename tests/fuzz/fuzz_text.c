/* libFuzzer harness for plain-text (language-modelling) files as a format: text data set reads
 * them (make fuzz-text): the slice a `lines: [first, last]` names (tr_text_lines), the UTF-8
 * check (tr_utf8_check, src/data/files.c), then the tokenizers on it. Input: one byte choosing
 * the tokenizer (bytes, WordPiece, GPT-2 BPE), two bytes each for first and last line (0: the
 * whole file), then the file. Beyond ASan+UBSan: the slice lies inside the file, a refusal
 * names the file, and ids lie inside the vocabulary. */
#include "fuzz_tokenizers.h"

#include "data/definition.h"
#include "data/files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    static const int kinds[] = {TR_TOK_BYTES, TR_TOK_WORDPIECE, TR_TOK_GPT2_BPE};
    int kind = kinds[data[0] % 3];
    struct tr_data_file f = {.path = "fuzz.txt"};
    f.first_line = data[1] | data[2] << 8;
    f.last_line = data[3] | data[4] << 8;
    if (f.first_line == 0 || f.last_line < f.first_line)   /* what definition.c lets through */
        f.first_line = f.last_line = 0;
    size -= 5;
    char *text = malloc(size ? size : 1);   /* exact size: ASan sees a read past its end */
    memcpy(text, data + 5, size);
    const char *slice;
    size_t slice_len;
    int first_line;
    struct tr_diag diag = {0};
    int rc = tr_text_lines(&f, text, size, &slice, &slice_len, &first_line, &diag);
    if (!rc) {
        FUZZ_CHECK(slice >= text && slice_len <= size - (size_t)(slice - text));
        rc = tr_utf8_check(f.path, slice, slice_len, first_line, &diag);
    }
    if (rc)
        fuzz_check_names(&diag, f.path);
    else
        fuzz_tokenize(kind, slice, slice_len);
    tr_diag_free(&diag);
    free(text);
    return 0;
}
