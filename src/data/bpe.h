/* GPT-2's byte-level BPE (tokenizer.h's "gpt2_bpe" kind), id for id what Hugging Face's
 * `tokenizers` ByteLevelBPETokenizer gives on the same encoder.json and vocab.bpe with
 * add_prefix_space=False: the GPT-2 pattern cuts text into pieces, each piece's bytes become
 * printable characters, and the merges of vocab.bpe join them by rank. */
#ifndef TR_BPE_H
#define TR_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/ids.h"

struct tr_bpe;

/* encoder_json: {"token": id, …}, the ids 0 to n-1 each once, with an entry for each of the 256
 * byte characters. merges: vocab.bpe, one "left right" pair a line by rank, a first line
 * "#version: …" skipped; both parts and their join must be tokens. A missing, empty or unreadable
 * file, malformed JSON, a repeated id and a bad merge line are errors naming the file (and line),
 * added to diag; returns 0 or TR_EDATA. */
int tr_bpe_open(struct tr_bpe **out, const char *encoder_json, const char *merges,
                struct tr_diag *diag);
void tr_bpe_free(struct tr_bpe *b);

/* Appends the ids of len bytes of text to ids; no special tokens. Safe to call from several
 * threads at once. Text that is not UTF-8 is an error: returns TR_EINVAL, adding no ids, with
 * tr_tokenize's sentence in d (the byte offset of the first bad sequence); 0 otherwise. */
int tr_bpe_encode(const struct tr_bpe *b, const char *text, size_t len, struct tr_ids *ids,
                  struct tr_diag *d);

/* The bytes of ids joined, as UTF-8: each bad sequence (a token cut inside a character) becomes
 * U+FFFD, and ids outside the vocabulary are skipped, as `tokenizers` decodes. Caller frees. */
char *tr_bpe_decode(const struct tr_bpe *b, const int32_t *ids, size_t n);

int64_t tr_bpe_vocab_size(const struct tr_bpe *b);
/* The id of token as written in encoder.json ("<|endoftext|>"), or -1 when there is none. */
int32_t tr_bpe_token_id(const struct tr_bpe *b, const char *token);

#endif
