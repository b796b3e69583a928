/* BERT's WordPiece tokenizer (tokenizer.h's "wordpiece" kind), id for id what Hugging Face's
 * `tokenizers` BertWordPieceTokenizer gives on the same vocab.txt. Also two helpers that
 * tokenizer.c shares: the UTF-8 check, and the reader of files of one entry a line (its
 * "chars" kind lists characters so). */
#ifndef TR_WORDPIECE_H
#define TR_WORDPIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/ids.h"

/* The offset of the first byte of text that does not begin a valid UTF-8 sequence (overlong
 * forms, surrogates and code points past U+10FFFF do not), or len when all of it is UTF-8. */
size_t tr_utf8_valid_length(const char *text, size_t len);

/* A vocabulary file read whole, one entry a line; an entry's id is its line number from 0. */
struct tr_vocab_file {
    char *text;         /* the file, each line ended by '\0' in place of its '\n' */
    char **line;        /* n pointers into text */
    size_t *len;        /* the bytes of each line */
    int32_t n;
};

/* Reads path. A file that cannot be read, is empty, or has a line that is blank or not UTF-8 is
 * an error naming the file (and line), added to diag; returns 0 or TR_EDATA. */
int tr_vocab_file_read(struct tr_vocab_file *f, const char *path, struct tr_diag *diag);
void tr_vocab_file_free(struct tr_vocab_file *f);

struct tr_wordpiece;

/* vocab_txt: BERT's vocab.txt (trailing blanks of a line are not part of its token, as in
 * `tokenizers`). It must hold [UNK]; a token listed twice is an error naming both lines.
 * lowercase: BertNormalizer's lowercase, which strips accents too (uncased BERT models).
 * Returns 0 or TR_EDATA with the problems added to diag. */
int tr_wordpiece_open(struct tr_wordpiece **out, const char *vocab_txt, bool lowercase,
                      struct tr_diag *diag);
void tr_wordpiece_free(struct tr_wordpiece *w);

/* Appends the ids of len bytes of UTF-8 text (no [CLS]/[SEP]). Returns 0, or TR_EINVAL when the
 * text is not UTF-8 (tr_tokenize checks that first and says where). */
int tr_wordpiece_encode(const struct tr_wordpiece *w, const char *text, size_t len,
                        struct tr_ids *ids);

/* The text of ids as `tokenizers`' WordPiece decoder writes it: tokens joined by spaces, a
 * "##" piece glued to the one before, no space before . , ! ? and the like; special tokens
 * kept as their text and ids outside the vocabulary skipped. Caller frees. */
char *tr_wordpiece_decode(const struct tr_wordpiece *w, const int32_t *ids, size_t n);

int64_t tr_wordpiece_vocab_size(const struct tr_wordpiece *w);
/* The id of token (any token: "[CLS]", "##ing"), or -1 when the vocabulary lacks it. */
int32_t tr_wordpiece_token_id(const struct tr_wordpiece *w, const char *token);

#endif
