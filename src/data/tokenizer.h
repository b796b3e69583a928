/* Tokenizers (DESIGN.md §5): UTF-8 text → token ids, and back for `trainrun sample`.
 *   wordpiece  BERT's: the basic tokenizer (control characters dropped, whitespace split,
 *              optional lower-casing with accents stripped by NFD, punctuation and CJK ideographs
 *              split off), then greedy longest-match WordPiece with "##" continuations and
 *              [UNK] for a word with no split or longer than 100 characters (vocab.txt).
 *   gpt2_bpe   GPT-2's byte-level BPE: the pre-tokenisation pattern (PCRE2), bytes mapped to
 *              printable characters, merges by rank (encoder.json + vocab.bpe).
 *   bytes      one id per byte (256 ids), no vocabulary file.
 *   chars      one id per Unicode code point listed in a vocabulary file (UTF-8, one character
 *              a line, the line "\n" standing for a newline and "\\" for a backslash); an
 *              unlisted character is id 0.
 * Ids equal those of Hugging Face's `tokenizers` loading the same files (tests/check_tokenizer.c
 * on tests/fixtures/tokenizer/corpus.txt). No special tokens are added by tr_tokenize: the
 * caller adds [CLS]/[SEP] or <|endoftext|> with tr_tokenizer_special. (As in `tokenizers`, a
 * "[SEP]" written in the text is [SEP]'s id for wordpiece.) utf8proc does Unicode
 * normalisation and categories, PCRE2 the GPT-2 pattern; no hand-written Unicode tables. */
#ifndef TR_TOKENIZER_H
#define TR_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/ids.h"

struct tr_tokenizer;

/* kind: enum tr_tokenizer_kind of recipe/recipe.h (TR_TOK_WORDPIECE, TR_TOK_GPT2_BPE, TR_TOK_BYTES,
 * TR_TOK_CHARS). vocab: vocab.txt, encoder.json or the chars list (NULL for bytes); merges:
 * vocab.bpe (gpt2_bpe only). lowercase: wordpiece only (uncased BERT: lower-case, strip
 * accents). A missing, empty or unreadable file, a vocabulary with duplicate
 * entries, or a malformed line is an error naming the file and line, added to diag; returns 0
 * or TR_EDATA. */
int tr_tokenizer_open(struct tr_tokenizer **out, int kind, const char *vocab, const char *merges,
                      bool lowercase, struct tr_diag *diag);
void tr_tokenizer_free(struct tr_tokenizer *t);

/* Appends the ids of len bytes of text to ids. Text that is not valid UTF-8 is an error for every
 * kind: returns TR_EINVAL with a sentence in d ("text is not UTF-8 at byte 12 (0xff)", the
 * offset of the first bad sequence from 0), adding no ids; 0 otherwise. */
int tr_tokenize(const struct tr_tokenizer *t, const char *text, size_t len, struct tr_ids *ids,
                struct tr_diag *d);

/* The text of ids, joined as the tokenizer's decoder would ("##" pieces glued for WordPiece,
 * bytes reassembled for BPE and bytes; invalid UTF-8 from a partial sequence becomes U+FFFD).
 * Ids outside the vocabulary are skipped. Caller frees. */
char *tr_detokenize(const struct tr_tokenizer *t, const int32_t *ids, size_t n);

int64_t tr_tokenizer_vocab_size(const struct tr_tokenizer *t);
/* The id of a special token ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]", "<|endoftext|>"),
 * or -1 when the vocabulary has none. */
int32_t tr_tokenizer_special(const struct tr_tokenizer *t, const char *name);

#endif
