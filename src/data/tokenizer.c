/* The tokenizer front end (tokenizer.h): text is checked to be UTF-8 once here, whatever the
 * kind, then handed to the kind's code — wordpiece.c, bpe.c, or the byte and character
 * tokenizers, small enough to live in this file. */
#include "data/tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "data/bpe.h"
#include "data/wordpiece.h"
#include "recipe/recipe.h"

/* The chars kind: the code points of a vocabulary file, one a line, id = line number. */
struct chars {
    utf8proc_int32_t *of_id;    /* id → code point */
    struct chars_entry {
        utf8proc_int32_t code;
        int32_t id;
    } *by_code;                 /* sorted by code point, for bsearch */
    int32_t n;
};

struct tr_tokenizer {
    int kind;                   /* TR_TOK_… of recipe/recipe.h */
    union {
        struct tr_wordpiece *wordpiece;
        struct tr_bpe *bpe;
        struct chars *chars;
    } impl;
};

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

/* The bytes of the invalid sequence at s that one U+FFFD replaces: its lead byte and the
 * continuation bytes that could still begin a valid sequence (Unicode's "maximal subpart",
 * which Rust's from_utf8_lossy, and so `tokenizers`, replaces as one). */
static size_t invalid_length(const unsigned char *s, size_t n)
{
    unsigned char lead = s[0], lo = 0x80, hi = 0xBF;   /* the second byte's range */
    size_t need = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 && lead <= 0xEF ? 3
                  : lead >= 0xC2 && lead <= 0xDF ? 2 : 1;
    if (lead == 0xE0)
        lo = 0xA0;   /* overlong below */
    else if (lead == 0xED)
        hi = 0x9F;   /* surrogates above */
    else if (lead == 0xF0)
        lo = 0x90;   /* overlong below */
    else if (lead == 0xF4)
        hi = 0x8F;   /* past U+10FFFF above */
    size_t k = 1;
    while (k < need && k < n && s[k] >= (k == 1 ? lo : 0x80) && s[k] <= (k == 1 ? hi : 0xBF))
        k++;
    return k;
}

/* n bytes as a string, each invalid sequence replaced by U+FFFD. Caller frees. */
static char *utf8_lossy(const unsigned char *s, size_t n)
{
    char *out = tr_xmalloc(3 * n + 1), *o = out;   /* a byte becomes at most one U+FFFD */
    for (size_t i = 0, k; i < n; i += k) {
        k = tr_utf8_valid_length((const char *)s + i, n - i);
        memcpy(o, s + i, k);
        o += k;
        if (i + k < n) {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            k += invalid_length(s + i + k, n - i - k);
        }
    }
    *o = '\0';
    return out;
}

/* ---- bytes: one id a byte ------------------------------------------------------------------- */

static void bytes_encode(const char *text, size_t len, struct tr_ids *ids)
{
    for (size_t i = 0; i < len; i++)
        tr_ids_push(ids, (unsigned char)text[i]);
}

/* Ids outside 0-255 are skipped. */
static char *bytes_decode(const int32_t *ids, size_t n)
{
    unsigned char *bytes = tr_xmalloc(n + 1);
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < 256)
            bytes[len++] = (unsigned char)ids[i];
    char *text = utf8_lossy(bytes, len);
    free(bytes);
    return text;
}

/* ---- chars: one id a listed code point ------------------------------------------------------ */

/* The one character a line of the list stands for, or -1: "\n" is a newline and "\\" a
 * backslash, so that every character can be listed one a line. */
static utf8proc_int32_t line_character(const char *line, size_t len)
{
    if (len == 2 && line[0] == '\\')
        return line[1] == 'n' ? '\n' : line[1] == '\\' ? '\\' : -1;
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)line, (utf8proc_ssize_t)len, &c);
    return k == (utf8proc_ssize_t)len && c != '\\' ? c : -1;
}

/* The order of the list's lookup table; ids break ties so that a repeated character is
 * reported on its later line. */
static int by_code_then_id(const void *a, const void *b)
{
    const struct chars_entry *x = a, *y = b;
    return x->code != y->code ? (x->code > y->code) - (x->code < y->code) : (x->id > y->id) - (x->id < y->id);
}

static int by_code(const void *a, const void *b)
{
    const struct chars_entry *x = a, *y = b;
    return (x->code > y->code) - (x->code < y->code);
}

static void chars_free(struct chars *c)
{
    if (!c)
        return;
    free(c->of_id);
    free(c->by_code);
    free(c);
}

/* Reads the list in f (from path) into c; returns the number of problems added to diag. */
static int chars_index(struct chars *c, const struct tr_vocab_file *f, const char *path,
                       struct tr_diag *diag)
{
    int problems = 0;
    size_t listed = 0;
    for (int32_t id = 0; id < f->n; id++) {
        c->of_id[id] = line_character(f->line[id], f->len[id]);
        if (c->of_id[id] < 0) {
            tr_diag_add(diag, (struct tr_where){.file = path, .line = id + 1, .col = 1},
                        "'%s' is not one character (write a newline as \\n, a backslash as \\\\)",
                        f->line[id]);
            problems++;
        } else
            c->by_code[listed++] = (struct chars_entry){c->of_id[id], id};
    }
    qsort(c->by_code, listed, sizeof *c->by_code, by_code_then_id);
    for (size_t i = 1; i < listed; i++)
        if (c->by_code[i].code == c->by_code[i - 1].code) {
            int32_t id = c->by_code[i].id;
            tr_diag_add(diag, (struct tr_where){.file = path, .line = id + 1, .col = 1},
                        "character '%s' is listed twice (first on line %d)", f->line[id],
                        c->by_code[i - 1].id + 1);
            problems++;
        }
    return problems;
}

static int chars_open(struct chars **out, const char *path, struct tr_diag *diag)
{
    struct tr_vocab_file f;
    if (tr_vocab_file_read(&f, path, diag))
        return TR_EDATA;
    struct chars *c = tr_xcalloc(1, sizeof *c);
    c->n = f.n;
    c->of_id = tr_xmalloc((size_t)f.n * sizeof *c->of_id);
    c->by_code = tr_xmalloc((size_t)f.n * sizeof *c->by_code);
    int problems = chars_index(c, &f, path, diag);
    tr_vocab_file_free(&f);
    if (problems) {
        chars_free(c);
        return TR_EDATA;
    }
    *out = c;
    return 0;
}

static int32_t chars_id(const struct chars *c, utf8proc_int32_t code)
{
    struct chars_entry key = {code, 0};
    const struct chars_entry *e = bsearch(&key, c->by_code, (size_t)c->n, sizeof key, by_code);
    return e ? e->id : 0;
}

/* text is valid UTF-8 (tr_tokenize checked); an unlisted character is id 0. */
static void chars_encode(const struct chars *c, const char *text, size_t len, struct tr_ids *ids)
{
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)text;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t code;
        i += (size_t)utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &code);
        tr_ids_push(ids, chars_id(c, code));
    }
}

/* Ids outside the list are skipped. */
static char *chars_decode(const struct chars *c, const int32_t *ids, size_t n)
{
    char *out = tr_xmalloc(4 * n + 1), *o = out;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < c->n)
            o += utf8proc_encode_char(c->of_id[ids[i]], (utf8proc_uint8_t *)o);
    *o = '\0';
    return out;
}

/* ---- the front end -------------------------------------------------------------------------- */

/* Whether the file a kind needs was given; says so when not. */
static bool given(const char *file, const char *kind, const char *what, struct tr_diag *diag)
{
    if (!file)
        tr_diag_add(diag, (struct tr_where){0}, "the %s tokenizer needs %s", kind, what);
    return file != NULL;
}

static int open_kind(struct tr_tokenizer *t, const char *vocab, const char *merges, bool lowercase,
                     struct tr_diag *diag)
{
    switch (t->kind) {
    case TR_TOK_BYTES:
        return 0;
    case TR_TOK_CHARS:
        if (!given(vocab, "chars", "a list of characters, one a line", diag))
            return TR_EDATA;
        return chars_open(&t->impl.chars, vocab, diag);
    case TR_TOK_WORDPIECE:
        if (!given(vocab, "wordpiece", "a vocabulary (BERT's vocab.txt)", diag))
            return TR_EDATA;
        return tr_wordpiece_open(&t->impl.wordpiece, vocab, lowercase, diag);
    case TR_TOK_GPT2_BPE:
        if (!given(vocab, "gpt2-bpe", "a vocabulary (GPT-2's encoder.json)", diag) ||
            !given(merges, "gpt2-bpe", "merges (GPT-2's vocab.bpe)", diag))
            return TR_EDATA;
        return tr_bpe_open(&t->impl.bpe, vocab, merges, diag) ? TR_EDATA : 0;
    case TR_TOK_NONE:
        break;
    }
    tr_diag_add(diag, (struct tr_where){0}, "no tokenizer is chosen (data.tokenizer.kind is none)");
    return TR_EDATA;
}

int tr_tokenizer_open(struct tr_tokenizer **out, int kind, const char *vocab, const char *merges,
                      bool lowercase, struct tr_diag *diag)
{
    struct tr_tokenizer *t = tr_xcalloc(1, sizeof *t);
    t->kind = kind;
    int rc = open_kind(t, vocab, merges, lowercase, diag);
    if (rc) {
        free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}

void tr_tokenizer_free(struct tr_tokenizer *t)
{
    if (!t)
        return;
    if (t->kind == TR_TOK_WORDPIECE)
        tr_wordpiece_free(t->impl.wordpiece);
    else if (t->kind == TR_TOK_GPT2_BPE)
        tr_bpe_free(t->impl.bpe);
    else if (t->kind == TR_TOK_CHARS)
        chars_free(t->impl.chars);
    free(t);
}

int tr_tokenize(const struct tr_tokenizer *t, const char *text, size_t len, struct tr_ids *ids,
                struct tr_diag *d)
{
    size_t valid = tr_utf8_valid_length(text, len);
    if (valid < len)
        return tr_fail(d, TR_EINVAL, "text is not UTF-8 at byte %zu (0x%02x)", valid, (unsigned char)text[valid]);
    switch (t->kind) {
    case TR_TOK_WORDPIECE:
        tr_wordpiece_encode(t->impl.wordpiece, text, len, ids);   /* cannot fail on valid UTF-8 */
        return 0;
    case TR_TOK_GPT2_BPE:
        return tr_bpe_encode(t->impl.bpe, text, len, ids, d);
    case TR_TOK_CHARS:
        chars_encode(t->impl.chars, text, len, ids);
        return 0;
    default:
        bytes_encode(text, len, ids);
        return 0;
    }
}

char *tr_detokenize(const struct tr_tokenizer *t, const int32_t *ids, size_t n)
{
    switch (t->kind) {
    case TR_TOK_WORDPIECE:
        return tr_wordpiece_decode(t->impl.wordpiece, ids, n);
    case TR_TOK_GPT2_BPE:
        return tr_bpe_decode(t->impl.bpe, ids, n);
    case TR_TOK_CHARS:
        return chars_decode(t->impl.chars, ids, n);
    default:
        return bytes_decode(ids, n);
    }
}

int64_t tr_tokenizer_vocab_size(const struct tr_tokenizer *t)
{
    switch (t->kind) {
    case TR_TOK_WORDPIECE:
        return tr_wordpiece_vocab_size(t->impl.wordpiece);
    case TR_TOK_GPT2_BPE:
        return tr_bpe_vocab_size(t->impl.bpe);
    case TR_TOK_CHARS:
        return t->impl.chars->n;
    default:
        return 256;
    }
}

int32_t tr_tokenizer_special(const struct tr_tokenizer *t, const char *name)
{
    switch (t->kind) {
    case TR_TOK_WORDPIECE:
        return tr_wordpiece_token_id(t->impl.wordpiece, name);
    case TR_TOK_GPT2_BPE:
        return tr_bpe_token_id(t->impl.bpe, name);
    default:
        return -1;   /* bytes and characters have no special tokens */
    }
}
