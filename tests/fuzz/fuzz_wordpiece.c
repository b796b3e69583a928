/* libFuzzer harness for one-entry-a-line vocabulary files (make fuzz-wordpiece): the input is a
 * whole vocab.txt, written to /dev/shm since the readers take a path, opened as BERT's
 * WordPiece vocabulary (src/data/wordpiece.c, cased and uncased) and as a chars list
 * (src/data/tokenizer.c). Beyond ASan+UBSan: a refusal names the file; an accepted vocabulary
 * tokenises a sentence to ids inside it and finds [UNK] by name. */
#include "fuzz_tokenizers.h"

static const char sentence[] = "The quick brown fox, naïve café — 日本語 ##s [SEP] unknownword42!\n\t";

static void tokenize_sentence(const struct tr_tokenizer *t)
{
    struct tr_ids ids = {0};
    struct tr_diag d = {0};
    FUZZ_CHECK(tr_tokenize(t, sentence, sizeof sentence - 1, &ids, &d) == 0);
    for (size_t i = 0; i < ids.n; i++)
        FUZZ_CHECK(ids.v[i] >= 0 && ids.v[i] < tr_tokenizer_vocab_size(t));
    free(tr_detokenize(t, ids.v, ids.n));
    tr_ids_free(&ids);
    tr_diag_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_write_file(path, sizeof path, "vocab.txt", data, size))
        return 0;
    static const struct { int kind; bool lowercase; } opens[] = {
        {TR_TOK_WORDPIECE, false}, {TR_TOK_WORDPIECE, true}, {TR_TOK_CHARS, false},
    };
    for (size_t i = 0; i < sizeof opens / sizeof *opens; i++) {
        struct tr_tokenizer *t = NULL;
        struct tr_diag d = {0};
        if (tr_tokenizer_open(&t, opens[i].kind, path, NULL, opens[i].lowercase, &d)) {
            fuzz_check_names(&d, path);
        } else {
            tokenize_sentence(t);
            if (opens[i].kind == TR_TOK_WORDPIECE)
                FUZZ_CHECK(tr_tokenizer_special(t, "[UNK]") >= 0);
            tr_tokenizer_free(t);
        }
        tr_diag_free(&d);
    }
    unlink(path);
    return 0;
}
