/* libFuzzer harness for GPT-2's tokenizer files (make fuzz-bpe): the input is encoder.json, a
 * NUL byte, then vocab.bpe (no NUL: vocab.bpe is the repository's own), both written to
 * /dev/shm since the reader takes paths (src/data/bpe.c). Beyond ASan+UBSan: a refusal names
 * one of the files; accepted files tokenise a sentence to ids inside the vocabulary that
 * decode back to the sentence (byte-level BPE loses nothing). */
#include "fuzz_tokenizers.h"

static const char sentence[] = "Hello world's 12 naïve cafés\n\n  — 日本語! <|endoftext|>";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    char encoder[256], merges[256];
    if (fuzz_write_file(encoder, sizeof encoder, "encoder.json", data, json_len))
        return 0;
    if (nul ? fuzz_write_file(merges, sizeof merges, "vocab.bpe", nul + 1, size - json_len - 1)
            : (snprintf(merges, sizeof merges, "%s", FUZZ_SRCDIR "/datasets/vocab/gpt2/vocab.bpe"), 0)) {
        unlink(encoder);
        return 0;
    }
    struct tr_tokenizer *t = NULL;
    struct tr_diag d = {0};
    if (tr_tokenizer_open(&t, TR_TOK_GPT2_BPE, encoder, merges, false, &d)) {
        FUZZ_CHECK(d.n > 0);
        char *line = tr_diag_line(&d, d.n - 1);
        FUZZ_CHECK(strstr(line, encoder) || strstr(line, merges));
        free(line);
    } else {
        struct tr_ids ids = {0};
        struct tr_diag why = {0};
        FUZZ_CHECK(tr_tokenize(t, sentence, sizeof sentence - 1, &ids, &why) == 0);
        for (size_t i = 0; i < ids.n; i++)
            FUZZ_CHECK(ids.v[i] >= 0 && ids.v[i] < tr_tokenizer_vocab_size(t));
        char *back = tr_detokenize(t, ids.v, ids.n);
        FUZZ_CHECK(!strcmp(back, sentence));
        free(back);
        tr_ids_free(&ids);
        tr_diag_free(&why);
        tr_tokenizer_free(t);
    }
    tr_diag_free(&d);
    unlink(encoder);
    if (nul)
        unlink(merges);
    return 0;
}
