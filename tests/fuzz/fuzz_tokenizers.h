/* The repository's own tokenizer files, opened once per fuzzing process, for harnesses whose
 * inputs are text to tokenise (fuzz_text.c, fuzz_fields.h). FUZZ_SRCDIR is the source tree,
 * set by the Makefile. */
#ifndef TR_FUZZ_TOKENIZERS_H
#define TR_FUZZ_TOKENIZERS_H

#include "fuzz.h"

#include "data/tokenizer.h"
#include "recipe/recipe.h"

#ifndef FUZZ_SRCDIR
#define FUZZ_SRCDIR "."
#endif

/* kind: TR_TOK_BYTES, TR_TOK_WORDPIECE (BERT's vocab.txt, uncased) or TR_TOK_GPT2_BPE. */
static inline const struct tr_tokenizer *fuzz_tokenizer(int kind)
{
    static struct tr_tokenizer *open[TR_TOK_GPT2_BPE + 1];
    if (!open[kind]) {
        struct tr_diag d = {0};
        const char *vocab = kind == TR_TOK_WORDPIECE ? FUZZ_SRCDIR "/datasets/vocab/bert-base-uncased/vocab.txt"
                            : kind == TR_TOK_GPT2_BPE ? FUZZ_SRCDIR "/datasets/vocab/gpt2/encoder.json"
                                                      : NULL;
        const char *merges = kind == TR_TOK_GPT2_BPE ? FUZZ_SRCDIR "/datasets/vocab/gpt2/vocab.bpe" : NULL;
        if (tr_tokenizer_open(&open[kind], kind, vocab, merges, kind == TR_TOK_WORDPIECE, &d)) {
            tr_diag_print(&d, stderr);
            abort();
        }
        tr_diag_free(&d);
    }
    return open[kind];
}

/* Tokenises len bytes of UTF-8 text and decodes the ids back: every id inside the vocabulary. */
static inline void fuzz_tokenize(int kind, const char *text, size_t len)
{
    const struct tr_tokenizer *t = fuzz_tokenizer(kind);
    struct tr_ids ids = {0};
    struct tr_diag d = {0};
    if (tr_tokenize(t, text, len, &ids, &d) == 0) {
        for (size_t i = 0; i < ids.n; i++)
            FUZZ_CHECK(ids.v[i] >= 0 && ids.v[i] < tr_tokenizer_vocab_size(t));
        free(tr_detokenize(t, ids.v, ids.n));
    }
    tr_ids_free(&ids);
    tr_diag_free(&d);
}

/* libFuzzer calls this once before the first input: the vocabularies are read here, so that
 * their second or so under ASan is not taken for a slow input. replay.c calls it too. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_tokenizer(TR_TOK_BYTES);
    fuzz_tokenizer(TR_TOK_WORDPIECE);
    fuzz_tokenizer(TR_TOK_GPT2_BPE);
    return 0;
}

#endif
