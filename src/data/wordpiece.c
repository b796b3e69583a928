/* BERT's WordPiece tokenizer (wordpiece.h) as Hugging Face's `tokenizers` (0.23) runs it for
 * BertWordPieceTokenizer, stage by stage: BertNormalizer (clean_text, handle_chinese_chars,
 * strip_accents and lowercase), BertPreTokenizer (whitespace and punctuation), then the WordPiece
 * model. Character classes come from utf8proc (Unicode 15); `tokenizers` takes punctuation,
 * nonspacing marks and controls from a Unicode 8 table (Rust's unicode_categories), so the two
 * differ on characters given those classes since 2016: U+2E43 splits a word here, not there. */
#include "data/wordpiece.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/input.h"

#define MAX_VOCAB_BYTES (256 << 20)   /* BERT's vocab.txt is 0.2 MB; refuse what cannot be one */
#define MAX_WORD_CHARS 100            /* a longer word is one [UNK] (max_input_chars_per_word) */
#define MAX_WORD_BYTES (4 * MAX_WORD_CHARS)
#define CHUNK_BYTES (64 << 10)        /* text is normalised this much at a time (see encode) */
#define FNV_BASIS 2166136261u

/* BertWordPieceTokenizer's special tokens (those the vocabulary has). `tokenizers` finds them in
 * the raw text before normalising anything, so a "[SEP]" in the text is [SEP]'s id, not
 * "[", "sep", "]"; "[sep]" is not one. */
static const char *const SPECIALS[] = {"[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"};
#define N_SPECIALS (sizeof SPECIALS / sizeof *SPECIALS)

struct tr_wordpiece {
    struct tr_vocab_file vocab;   /* token i is vocab.line[i], trailing blanks cut */
    uint32_t *hash;               /* of each token */
    int32_t *slot;                /* open addressing on the hash: id + 1, 0 when empty */
    uint32_t mask;
    /* Bytes of the longest token, and of the longest "##" token without its "##": no match
     * is longer, so the search for the longest starts there rather than at the word's end. */
    size_t longest, longest_continuation;
    int32_t unk;
    int32_t special[N_SPECIALS];  /* the ids of SPECIALS, -1 for one not in the vocabulary */
    bool lowercase;
};

/* ---- vocabulary files ----------------------------------------------------------------------- */

static int read_whole(const char *path, char **text, size_t *len, struct tr_diag *diag)
{
    struct tr_diag why = {0};
    FILE *f = tr_fopen_regular(path, &why);   /* a FIFO would block, /dev/zero never end */
    if (!f) {
        tr_fail_because(diag, TR_EDATA, &why, "%s: cannot read", path);
        return TR_EDATA;   /* spelt out: gcc cannot see that the call returns it */
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = tr_xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0 && n + got <= MAX_VOCAB_BYTES) {
        n += got;
        if (n + 1 == cap)
            buf = tr_xrealloc(buf, cap *= 2);
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err || got || n == 0) {
        struct tr_where at = {.file = path};
        if (err)
            tr_diag_add(diag, at, "cannot read: %s", strerror(err));
        else if (got)
            tr_diag_add(diag, at, "over %d MiB, too large for a vocabulary", MAX_VOCAB_BYTES >> 20);
        else
            tr_diag_add(diag, at, "the file is empty; a vocabulary lists one entry a line");
        free(buf);
        return TR_EDATA;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

size_t tr_utf8_valid_length(const char *text, size_t len)
{
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = s[i] < 0x80 ? 1 : utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &c);
        if (k < 0)
            break;
        i += (size_t)k;
    }
    return i;
}

/* Points f's lines into f->text, cutting it at each '\n'; complains of blank and non-UTF-8
 * lines. Returns the number of problems. */
static int split_lines(struct tr_vocab_file *f, size_t size, const char *path, struct tr_diag *diag)
{
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += f->text[i] == '\n';
    lines += f->text[size - 1] != '\n';   /* a last line with no newline */
    f->line = tr_xmalloc(lines * sizeof *f->line);
    f->len = tr_xmalloc(lines * sizeof *f->len);
    int problems = 0;
    char *s = f->text;
    for (f->n = 0; (size_t)f->n < lines; f->n++) {
        size_t left = size - (size_t)(s - f->text);
        char *end = memchr(s, '\n', left);
        size_t len = end ? (size_t)(end - s) : left, valid = tr_utf8_valid_length(s, len);
        struct tr_where at = {.file = path, .line = f->n + 1, .col = (int)valid + 1};
        if (len == 0) {
            tr_diag_add(diag, at, "blank line; each line holds one entry");
            problems++;
        } else if (valid < len) {
            tr_diag_add(diag, at, "not UTF-8 at byte %zu of the line (0x%02x)", valid,
                        (unsigned char)s[valid]);
            problems++;
        }
        s[len] = '\0';
        f->line[f->n] = s;
        f->len[f->n] = len;
        s += len + 1;
    }
    return problems;
}

int tr_vocab_file_read(struct tr_vocab_file *f, const char *path, struct tr_diag *diag)
{
    *f = (struct tr_vocab_file){0};
    size_t size;
    if (read_whole(path, &f->text, &size, diag))
        return TR_EDATA;
    /* MAX_VOCAB_BYTES keeps the line count, so the ids, well inside int32_t. */
    if (split_lines(f, size, path, diag)) {
        tr_vocab_file_free(f);
        return TR_EDATA;
    }
    return 0;
}

void tr_vocab_file_free(struct tr_vocab_file *f)
{
    free(f->text);
    free(f->line);
    free(f->len);
    *f = (struct tr_vocab_file){0};
}

/* ---- character classes, as BertNormalizer and BertPreTokenizer define them -------------------- */

/* Rust's char::is_whitespace, the White_Space property: the Z categories, \t to \r and U+0085. */
static bool is_whitespace(int32_t c)
{
    if (c < 0x80)
        return c == ' ' || (c >= '\t' && c <= '\r');
    int cat = utf8proc_category(c);
    return c == 0x85 || cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
           cat == UTF8PROC_CATEGORY_ZP;
}

/* BertNormalizer's is_control: the categories Cc, Cf, Co and Cs (not Cn: an unassigned code
 * point stays), less \t, \n and \r, which count as whitespace. */
static bool is_control(int32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return false;
    int cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
           cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS;
}

/* BERT's "Chinese characters", the CJK ideograph blocks as `tokenizers` lists them: its sixth
 * range starts at U+2B920 where Google's BERT has U+2B820, and we follow `tokenizers`. */
static bool is_chinese(int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ASCII's punctuation (which includes symbols such as $ + < = > ^ ` |) and the P categories. */
static bool is_punctuation(int32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126);
    int cat = utf8proc_category(c);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

/* ---- the vocabulary's hash table ------------------------------------------------------------ */

static uint32_t fnv1a(uint32_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The id of the token prefix + s (of hash h), or -1. The two parts spare the caller from
 * building "##piece" for every candidate piece. */
static int32_t find(const struct tr_wordpiece *w, uint32_t h, const char *prefix, size_t plen,
                    const char *s, size_t n)
{
    for (uint32_t i = h & w->mask;; i = (i + 1) & w->mask) {
        int32_t id = w->slot[i] - 1;
        if (id < 0)
            return -1;
        const char *t = w->vocab.line[id];
        if (w->hash[id] == h && w->vocab.len[id] == plen + n && !memcmp(t, prefix, plen) &&
            !memcmp(t + plen, s, n))
            return id;
    }
}

/* The length of s without trailing whitespace, which `tokenizers` cuts off a vocab.txt line. */
static size_t trimmed_length(const char *s, size_t n)
{
    size_t keep = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        i += (size_t)utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (!is_whitespace(c))
            keep = i;
    }
    return keep;
}

/* Hashes every token into the table; complains of duplicates and of lines of blanks only.
 * Returns the number of problems. */
static int index_tokens(struct tr_wordpiece *w, const char *path, struct tr_diag *diag)
{
    struct tr_vocab_file *v = &w->vocab;
    size_t size = 16;
    while (size < 2 * (size_t)v->n)
        size *= 2;
    w->mask = (uint32_t)(size - 1);
    w->slot = tr_xcalloc(size, sizeof *w->slot);
    w->hash = tr_xmalloc((size_t)v->n * sizeof *w->hash);
    int problems = 0;
    for (int32_t id = 0; id < v->n; id++) {
        char *t = v->line[id];
        size_t len = v->len[id] = trimmed_length(t, v->len[id]);
        t[len] = '\0';
        struct tr_where at = {.file = path, .line = id + 1, .col = 1};
        uint32_t h = w->hash[id] = fnv1a(FNV_BASIS, t, len);
        int32_t first = find(w, h, "", 0, t, len);
        if (len == 0 || first >= 0) {
            if (len == 0)
                tr_diag_add(diag, at, "a line of blanks only; each line holds one token");
            else
                tr_diag_add(diag, at, "token '%s' is listed twice (first on line %d)", t, first + 1);
            problems++;
            continue;
        }
        uint32_t i = h & w->mask;
        while (w->slot[i])
            i = (i + 1) & w->mask;
        w->slot[i] = id + 1;
        if (len > w->longest)
            w->longest = len;
        if (len > 2 && !memcmp(t, "##", 2) && len - 2 > w->longest_continuation)
            w->longest_continuation = len - 2;
    }
    return problems;
}

int tr_wordpiece_open(struct tr_wordpiece **out, const char *vocab_txt, bool lowercase,
                      struct tr_diag *diag)
{
    *out = NULL;
    struct tr_wordpiece *w = tr_xcalloc(1, sizeof *w);
    w->lowercase = lowercase;
    if (tr_vocab_file_read(&w->vocab, vocab_txt, diag) || index_tokens(w, vocab_txt, diag)) {
        tr_wordpiece_free(w);
        return TR_EDATA;
    }
    for (size_t i = 0; i < N_SPECIALS; i++)
        w->special[i] = tr_wordpiece_token_id(w, SPECIALS[i]);
    w->unk = w->special[0];
    if (w->unk < 0) {
        tr_diag_add(diag, (struct tr_where){.file = vocab_txt},
                    "no [UNK] token, which WordPiece gives a word it cannot split");
        tr_wordpiece_free(w);
        return TR_EDATA;
    }
    *out = w;
    return 0;
}

void tr_wordpiece_free(struct tr_wordpiece *w)
{
    if (!w)
        return;
    tr_vocab_file_free(&w->vocab);
    free(w->hash);
    free(w->slot);
    free(w);
}

int64_t tr_wordpiece_vocab_size(const struct tr_wordpiece *w)
{
    return w->vocab.n;
}

int32_t tr_wordpiece_token_id(const struct tr_wordpiece *w, const char *token)
{
    size_t n = strlen(token);
    return find(w, fnv1a(FNV_BASIS, token, n), "", 0, token, n);
}

/* ---- encoding ------------------------------------------------------------------------------- */

/* Buffers of the normalising stages, kept from one chunk of text to the next. */
struct scratch {
    char *clean;                /* after clean_text and handle_chinese_chars, UTF-8 */
    size_t clean_cap;
    utf8proc_int32_t *chars;    /* then as code points, decomposed (NFD) when lower-casing */
    size_t chars_cap;
};

/* BertNormalizer's clean_text (drop NUL, U+FFFD and controls; whitespace becomes a space) and
 * handle_chinese_chars (a space either side of an ideograph), from n bytes of text into out,
 * which has room for 2n: an ideograph of 3 bytes grows to 5. Returns the bytes written, or -1
 * when the text is not UTF-8. */
static ptrdiff_t clean(const char *text, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(n - i), &c);
        if (k < 0)
            return -1;
        bool dropped = c == 0 || c == 0xFFFD || is_control(c), ideograph = is_chinese(c);
        if (!dropped && is_whitespace(c))   /* after the test for controls: \v and U+0085 go */
            out[o++] = ' ';
        else if (!dropped) {
            if (ideograph)
                out[o++] = ' ';
            memcpy(out + o, text + i, (size_t)k);
            o += (size_t)k;
            if (ideograph)
                out[o++] = ' ';
        }
        i += (size_t)k;
    }
    return (ptrdiff_t)o;
}

/* The cleaned text as code points in s->chars; when lower-casing, first decomposed (NFD) with
 * the nonspacing marks (Mn) dropped, which strips accents, then lower-cased. Returns the count. */
static size_t normalise(const struct tr_wordpiece *w, struct scratch *s, size_t n)
{
    utf8proc_option_t nfd = w->lowercase ? UTF8PROC_DECOMPOSE : 0;
    utf8proc_ssize_t got;
    if (s->chars_cap < n + 1) {   /* the most it can take without NFD */
        s->chars_cap = n + 1;
        s->chars = tr_xrealloc(s->chars, s->chars_cap * sizeof *s->chars);
    }
    /* It returns the length it needs, and it cannot fail on clean's output, valid UTF-8. */
    while ((got = utf8proc_decompose((const utf8proc_uint8_t *)s->clean, (utf8proc_ssize_t)n, s->chars,
                                     (utf8proc_ssize_t)s->chars_cap, nfd)) > (utf8proc_ssize_t)s->chars_cap) {
        s->chars_cap = (size_t)got;
        s->chars = tr_xrealloc(s->chars, s->chars_cap * sizeof *s->chars);
    }
    if (!w->lowercase)
        return (size_t)got;
    size_t kept = 0;
    for (size_t i = 0; i < (size_t)got; i++)
        if (utf8proc_category(s->chars[i]) != UTF8PROC_CATEGORY_MN)
            s->chars[kept++] = utf8proc_tolower(s->chars[i]);
    return kept;
}

/* The longest token that matches word[start..] ("##" in front past the word's first piece):
 * its id, with *end where it stops; -1 when none does. */
static int32_t longest_match(const struct tr_wordpiece *w, const char *word, size_t start, size_t n,
                             size_t *end)
{
    const char *prefix = start ? "##" : "";
    size_t plen = start ? 2 : 0, most = start ? w->longest_continuation : w->longest;
    if (most > n - start)
        most = n - start;
    uint32_t h[MAX_WORD_BYTES + 1];   /* h[k]: the hash of prefix and the piece's first k bytes */
    h[0] = fnv1a(FNV_BASIS, prefix, plen);
    for (size_t k = 0; k < most; k++)
        h[k + 1] = fnv1a(h[k], word + start + k, 1);
    for (size_t k = most; k > 0; k--) {
        if (start + k < n && ((unsigned char)word[start + k] & 0xC0) == 0x80)
            continue;   /* not at a character's end */
        int32_t id = find(w, h[k], prefix, plen, word + start, k);
        if (id >= 0) {
            *end = start + k;
            return id;
        }
    }
    return -1;
}

/* Pushes the pieces of a word, greedy longest match first from the left; false when some part
 * matches no token. */
static bool split_word(const struct tr_wordpiece *w, const char *word, size_t n, struct tr_ids *ids)
{
    for (size_t start = 0, end; start < n; start = end) {
        int32_t id = longest_match(w, word, start, n, &end);
        if (id < 0)
            return false;
        tr_ids_push(ids, id);
    }
    return true;
}

/* The WordPiece model on one word of n bytes and chars characters: a word too long, or with a
 * part no token matches, is one [UNK]. */
static void encode_word(const struct tr_wordpiece *w, const char *word, size_t n, size_t chars,
                        struct tr_ids *ids)
{
    size_t first = ids->n;
    if (chars > MAX_WORD_CHARS || !split_word(w, word, n, ids)) {
        ids->n = first;
        tr_ids_push(ids, w->unk);
    }
}

/* BertPreTokenizer: words end at whitespace, which goes, and at punctuation, which is a word
 * of its own; each word goes through the model. A word's bytes are kept only up to the
 * length past which it is [UNK] anyway. */
static void encode_words(const struct tr_wordpiece *w, const utf8proc_int32_t *c, size_t n,
                         struct tr_ids *ids)
{
    char word[MAX_WORD_BYTES + 4];
    size_t bytes = 0, chars = 0;
    for (size_t i = 0; i <= n; i++) {
        bool space = i == n || is_whitespace(c[i]), punct = !space && is_punctuation(c[i]);
        if ((space || punct) && chars) {
            encode_word(w, word, bytes, chars, ids);
            bytes = chars = 0;
        }
        if (space)
            continue;
        if (++chars <= MAX_WORD_CHARS)
            bytes += (size_t)utf8proc_encode_char(c[i], (utf8proc_uint8_t *)word + bytes);
        if (punct) {
            encode_word(w, word, bytes, chars, ids);
            bytes = chars = 0;
        }
    }
}

/* n bytes of text, or fewer ending just after an ASCII whitespace byte once past CHUNK_BYTES.
 * Cutting there changes nothing: every stage treats the byte as a space, a word's end and
 * a starter that combining marks are not reordered across. It bounds the scratch memory. */
static size_t chunk_length(const char *text, size_t n)
{
    size_t i = CHUNK_BYTES;
    while (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r')
        i++;
    return i < n ? i + 1 : n;
}

/* Normalises, splits and encodes len bytes of text that hold no special token; false when
 * they are not UTF-8. */
static bool encode_plain(const struct tr_wordpiece *w, const char *text, size_t len,
                         struct scratch *s, struct tr_ids *ids)
{
    for (size_t at = 0, n; at < len; at += n) {
        n = chunk_length(text + at, len - at);
        if (2 * n > s->clean_cap)
            s->clean = tr_xrealloc(s->clean, s->clean_cap = 2 * n);
        ptrdiff_t cleaned = clean(text + at, n, s->clean);
        if (cleaned < 0)
            return false;
        size_t chars = normalise(w, s, (size_t)cleaned);
        encode_words(w, s->chars, chars, ids);
    }
    return true;
}

/* The offset of the first special token in n bytes of text, with its length and id in *len
 * and *id; n when there is none. */
static size_t find_special(const struct tr_wordpiece *w, const char *text, size_t n, size_t *len,
                           int32_t *id)
{
    for (const char *p = text; (p = memchr(p, '[', n - (size_t)(p - text))); p++)
        for (size_t i = 0; i < N_SPECIALS; i++) {
            size_t k = strlen(SPECIALS[i]);
            if (w->special[i] >= 0 && k <= n - (size_t)(p - text) && !memcmp(p, SPECIALS[i], k)) {
                *len = k;
                *id = w->special[i];
                return (size_t)(p - text);
            }
        }
    *len = 0;
    return n;
}

int tr_wordpiece_encode(const struct tr_wordpiece *w, const char *text, size_t len,
                        struct tr_ids *ids)
{
    struct scratch s = {0};
    size_t first = ids->n;
    bool utf8 = true;
    for (size_t at = 0, before, special_len; utf8 && at < len; at += before + special_len) {
        int32_t special_id;
        before = find_special(w, text + at, len - at, &special_len, &special_id);
        utf8 = encode_plain(w, text + at, before, &s, ids);
        if (special_len)
            tr_ids_push(ids, special_id);
    }
    free(s.clean);
    free(s.chars);
    if (!utf8) {
        ids->n = first;
        return TR_EINVAL;
    }
    return 0;
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* Whether `tokenizers`' decoder cleanup drops the space before token: its rules (" ." → ".",
 * " n't" → "n't", …) that can meet a token, which holds no space of its own. */
static bool hugs_previous(const char *token)
{
    static const char *const starts[] = {".", "?", "!", ",", "n't", "'m", "'s", "'ve", "'re"};
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++)
        if (!strncmp(token, starts[i], strlen(starts[i])))
            return true;
    return false;
}

char *tr_wordpiece_decode(const struct tr_wordpiece *w, const int32_t *ids, size_t n)
{
    size_t size = 1;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < w->vocab.n)
            size += w->vocab.len[ids[i]] + 1;
    char *out = tr_xmalloc(size), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= w->vocab.n)
            continue;
        const char *t = w->vocab.line[ids[i]];
        size_t len = w->vocab.len[ids[i]];
        if (o > out && !strncmp(t, "##", 2))
            t += 2, len -= 2;
        else if (o > out && !hugs_previous(t))
            *o++ = ' ';
        memcpy(o, t, len);
        o += len;
    }
    *o = '\0';
    return out;
}
