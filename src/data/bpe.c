/* GPT-2's byte-level BPE (bpe.h), the way Hugging Face's `tokenizers` runs it: PCRE2 cuts the
 * text with GPT-2's pattern, each piece's bytes map to tokens of one byte character, and a heap
 * of neighbouring pairs applies the merge of lowest rank (leftmost first) until none applies, as
 * tokenizers' Word::merge_all does. The heap keeps a piece O(n log n): 4 MB of random letters
 * with no space encode at ~1.5 MB/s, where rescanning for the best pair after each merge would
 * take hours. A cache catches 92% of Austen's pieces; prose runs at 10-20 MB/s on one core,
 * tokenizers' own encode at 0.9. */
#include "data/bpe.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/input.h"


/* GPT-2's pattern (encoder.py) with \s spelled \p{White_Space}: tokenizers runs it in
 * Oniguruma, whose \s is Unicode's White_Space, while PCRE2's \s also takes U+180E (Mongolian
 * vowel separator), which then splits pieces tokenizers keeps whole. \p{White_Space} needs
 * PCRE2 10.40. Checked code point by code point, the one difference left is Unicode's age:
 * 9,392 letters and digits that tokenizers' Oniguruma knows (Unicode 16) are unassigned in
 * PCRE2 10.42's tables (Unicode 14), so punctuation here; only tables of our own would cure it. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\p{White_Space}\\p{L}\\p{N}]+"
    "|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+";

#define NO_TOKEN (-1)
#define NO_PAIR UINT64_MAX   /* a free slot of the pair table: ids are below 2^31 */
#define NO_SYMBOL SIZE_MAX
#define BYTE_CHARACTERS_END 0x144   /* the byte characters are below U+0144 */

/* Pieces up to this many bytes are cached: nearly every word of prose is shorter, and a slot
 * holds its ids in place. 16384 slots of 136 bytes are 2.1 MiB per tokenizer. */
#define CACHE_PIECE_BYTES 24
#define CACHE_SLOTS 16384
/* Slots are locked in stripes so that threads encoding at once rarely wait on each other. */
#define CACHE_LOCKS 64

struct pair_rank {
    uint64_t pair;           /* left id << 32 | right id */
    int32_t rank, merged;    /* the line's place among the merges; the id of the joined token */
};

struct cache_slot {
    uint64_t hash;
    uint8_t len, n;          /* the piece's bytes; its ids (0: a free slot) */
    char piece[CACHE_PIECE_BYTES];
    int32_t ids[CACHE_PIECE_BYTES];
};

struct piece_cache {
    pthread_mutex_t lock[CACHE_LOCKS];
    struct cache_slot slot[CACHE_SLOTS];
};

struct tr_bpe {
    int32_t n;                   /* tokens, with ids 0 to n-1 */
    char *keys;                  /* each token as encoder.json spells it, NUL-ended */
    size_t keys_size;
    size_t *key_at;              /* id → its token in keys */
    int32_t *by_key;             /* a hash table of ids by token, NO_TOKEN where free */
    size_t key_mask;
    unsigned char *bytes;        /* id → the bytes it stands for, bytes_at[id] to bytes_at[id + 1] */
    size_t *bytes_at;
    struct pair_rank *pairs;     /* a hash table of the merges by pair */
    size_t pair_mask;
    int32_t byte_id[256];        /* each byte's token of one character */
    pcre2_code *pattern;
    struct piece_cache *cache;   /* written by const encoders, under its locks */
};

/* FNV-1a, 64 bits: short keys, no adversary to fear. */
static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3u;
    return h;
}

/* The power of two minus one for a table at most half full with n entries. */
static size_t table_mask(size_t n)
{
    size_t size = 16;
    while (size < 2 * n)
        size *= 2;
    return size - 1;
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

/* Whether p (n > 0 bytes) starts with a well-formed UTF-8 sequence (Unicode Table 3-7). *len is
 * its length or, when it is not, the length of its maximal subpart: the bytes one U+FFFD
 * replaces, as Rust's String::from_utf8_lossy (tokenizers' decoder) and Python replace them. */
static bool utf8_sequence(const unsigned char *p, size_t n, size_t *len)
{
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;   /* the range of the second byte, then of the rest */
    if (p[0] < 0x80) {
        *len = 1;
        return true;
    }
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        need = 1;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        need = 2;
        lo = p[0] == 0xE0 ? 0xA0 : 0x80;   /* no overlong forms */
        hi = p[0] == 0xED ? 0x9F : 0xBF;   /* no surrogates */
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        need = 3;
        lo = p[0] == 0xF0 ? 0x90 : 0x80;
        hi = p[0] == 0xF4 ? 0x8F : 0xBF;   /* nothing past U+10FFFF */
    } else {
        *len = 1;
        return false;
    }
    size_t i = 1;
    for (; i <= need && i < n && p[i] >= lo && p[i] <= hi; i++)
        lo = 0x80, hi = 0xBF;
    *len = i;
    return i == need + 1;
}

/* The offset of the first bad sequence in text, or len when it is all UTF-8. */
static size_t utf8_invalid_at(const unsigned char *text, size_t len)
{
    size_t at = 0, n;
    while (at < len && utf8_sequence(text + at, len - at, &n))
        at += n;
    return at;
}

/* ---- GPT-2's byte characters ------------------------------------------------------------------ */

/* GPT-2's bytes_to_unicode (encoder.py): the printable bytes stand for themselves and the 68
 * others for U+0100 on, in byte order, so that every token is printable text. */
static void byte_characters(uint32_t cp[256])
{
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        cp[b] = printable ? (uint32_t)b : next++;
    }
}

/* The UTF-8 of cp, below U+0800 as all byte characters are, NUL-ended in out[3]. */
static void utf8_of_byte_character(uint32_t cp, char out[3])
{
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
        return;
    }
    out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* ---- reading the files ------------------------------------------------------------------------ */

/* The whole of path, NUL-ended, in *text (caller frees); 0, or TR_EDATA when it cannot be
 * read or is empty. */
static int read_whole(const char *path, char **text, size_t *len, struct tr_diag *diag)
{
    struct tr_diag why = {0};
    FILE *f = tr_fopen_regular(path, &why);   /* a FIFO would block, /dev/zero never end */
    if (!f)
        return tr_fail_because(diag, TR_EDATA, &why, "%s: cannot read", path);
    size_t cap = 1 << 16, n = 0, got;
    char *buf = tr_xmalloc(cap);
    do {
        if (cap - n < 2)
            buf = tr_xrealloc(buf, cap *= 2);
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err || !n) {
        free(buf);
        return err ? tr_fail_file(diag, TR_EDATA, path, 0, 0, "cannot read: %s", strerror(err))
                   : tr_fail_file(diag, TR_EDATA, path, 0, 0, "is empty");
    }
    buf[n] = 0;
    *text = buf, *len = n;
    return 0;
}

/* The id of the n bytes at token, or NO_TOKEN. */
static int32_t find_token(const struct tr_bpe *b, const char *token, size_t n)
{
    for (size_t i = hash_bytes(token, n) & b->key_mask;; i = (i + 1) & b->key_mask) {
        int32_t id = b->by_key[i];
        if (id == NO_TOKEN)
            return NO_TOKEN;
        const char *key = b->keys + b->key_at[id];
        if (!memcmp(key, token, n) && !key[n])
            return id;
    }
}

static void index_tokens(struct tr_bpe *b)
{
    b->key_mask = table_mask((size_t)b->n);
    b->by_key = tr_xmalloc((b->key_mask + 1) * sizeof *b->by_key);
    memset(b->by_key, 0xFF, (b->key_mask + 1) * sizeof *b->by_key);   /* all NO_TOKEN */
    for (int32_t id = 0; id < b->n; id++) {
        const char *key = b->keys + b->key_at[id];
        size_t i = hash_bytes(key, strlen(key)) & b->key_mask;
        while (b->by_key[i] != NO_TOKEN)
            i = (i + 1) & b->key_mask;
        b->by_key[i] = id;
    }
}

/* Copies each token of the encoder.json object into keys, at its id. */
static int read_tokens(struct tr_bpe *b, const char *path, json_t *root, struct tr_diag *diag)
{
    size_t n = json_object_size(root);
    if (!n)
        return tr_fail_file(diag, TR_EDATA, path, 0, 0, "has no tokens");
    if (n > INT32_MAX)   /* ids are int32_t */
        return tr_fail_file(diag, TR_EDATA, path, 0, 0, "has %zu tokens; ids stop at %d", n, INT32_MAX);
    b->n = (int32_t)n;
    b->key_at = tr_xmalloc(n * sizeof *b->key_at);
    for (size_t id = 0; id < n; id++)
        b->key_at[id] = SIZE_MAX;
    size_t used = 0, cap = 1 << 16;
    b->keys = tr_xmalloc(cap);
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        json_int_t id = json_is_integer(value) ? json_integer_value(value) : -1;
        if (id < 0 || (size_t)id >= n)
            return tr_fail_file(diag, TR_EDATA, path, 0, 0,
                                "the id of '%s' must be a whole number from 0 to %zu (the file has %zu "
                                "tokens)", key, n - 1, n);
        if (b->key_at[id] != SIZE_MAX)
            return tr_fail_file(diag, TR_EDATA, path, 0, 0, "'%s' and '%s' have the same id, %lld",
                                b->keys + b->key_at[id], key, (long long)id);
        size_t len = strlen(key) + 1;
        while (cap - used < len)
            b->keys = tr_xrealloc(b->keys, cap *= 2);
        memcpy(b->keys + used, key, len);
        b->key_at[id] = used;
        used += len;
    }
    b->keys_size = used;
    index_tokens(b);
    return 0;
}

static int load_encoder(struct tr_bpe *b, const char *path, struct tr_diag *diag)
{
    char *text;
    size_t len;
    int rc = read_whole(path, &text, &len, diag);
    if (rc)
        return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return tr_fail_file(diag, TR_EDATA, path, jerr.line > 0 ? jerr.line : 0, jerr.column > 0 ? jerr.column : 0,
                            "is not valid JSON: %s", jerr.text);
    rc = json_is_object(root) ? read_tokens(b, path, root, diag)
                              : tr_fail_file(diag, TR_EDATA, path, 0, 0, "is not a JSON object of tokens and ids");
    json_decref(root);
    return rc;
}

/* The bytes token stands for, into out (room for strlen(token)); returns how many. A token with
 * a character that is no byte's stands for its UTF-8 as it is, as in tokenizers' decoder. */
static size_t token_bytes(const char *token, const int byte_of[BYTE_CHARACTERS_END],
                          unsigned char *out)
{
    const unsigned char *p = (const unsigned char *)token;
    size_t n = 0, len, size = strlen(token);
    for (size_t i = 0; i < size; i += len) {
        utf8_sequence(p + i, size - i, &len);   /* jansson gives UTF-8: len is 1 to 4 */
        uint32_t c = len == 1 ? p[i] : len == 2 ? (p[i] & 0x1Fu) << 6 | (p[i + 1] & 0x3Fu)
                                                : BYTE_CHARACTERS_END;
        if (c >= BYTE_CHARACTERS_END || byte_of[c] < 0) {
            memcpy(out, token, size);
            return size;
        }
        out[n++] = (unsigned char)byte_of[c];
    }
    return n;
}

/* byte_id, and the bytes of each token. */
static int map_bytes(struct tr_bpe *b, const char *path, struct tr_diag *diag)
{
    uint32_t cp[256];
    int byte_of[BYTE_CHARACTERS_END];   /* code point → byte, -1 for none */
    byte_characters(cp);
    for (int c = 0; c < BYTE_CHARACTERS_END; c++)
        byte_of[c] = -1;
    for (int byte = 0; byte < 256; byte++) {
        char utf8[3];
        byte_of[cp[byte]] = byte;
        utf8_of_byte_character(cp[byte], utf8);
        b->byte_id[byte] = find_token(b, utf8, strlen(utf8));
        if (b->byte_id[byte] == NO_TOKEN)
            return tr_fail_file(diag, TR_EDATA, path, 0, 0, "has no token '%s' for the byte 0x%02X", utf8, byte);
    }
    b->bytes_at = tr_xmalloc(((size_t)b->n + 1) * sizeof *b->bytes_at);
    b->bytes = tr_xmalloc(b->keys_size);   /* a token's bytes are never more than its text */
    size_t used = 0;
    for (int32_t id = 0; id < b->n; id++) {
        b->bytes_at[id] = used;
        used += token_bytes(b->keys + b->key_at[id], byte_of, b->bytes + used);
    }
    b->bytes_at[b->n] = used;
    return 0;
}

/* ---- merges ----------------------------------------------------------------------------------- */

/* The slot of pair in the table: the one holding it, or the free one where it would go. */
static struct pair_rank *pair_slot(const struct tr_bpe *b, uint64_t pair)
{
    size_t i = (size_t)(pair * 0x9e3779b97f4a7c15u >> 32) & b->pair_mask;   /* Fibonacci hashing */
    while (b->pairs[i].pair != pair && b->pairs[i].pair != NO_PAIR)
        i = (i + 1) & b->pair_mask;
    return &b->pairs[i];
}

static uint64_t pair_of(int32_t left, int32_t right)
{
    return (uint64_t)left << 32 | (uint32_t)right;
}

/* vocab.bpe as it is read: the file, and encoder.json, which must hold its tokens. */
struct merges_file {
    const char *path, *encoder;
    int line;
    struct tr_diag *diag;
};

/* Adds the merge of the line's n bytes (no newline) at rank; 0, or TR_EDATA. Split on ' '
 * into exactly two parts, as tokenizers splits. The joined token is the line less its space,
 * made in place: the text is ours. */
static int add_merge(struct tr_bpe *b, const struct merges_file *f, char *line, size_t n, int32_t rank)
{
    char *space = memchr(line, ' ', n);
    size_t left_n = space ? (size_t)(space - line) : 0, right_n = space ? n - left_n - 1 : 0;
    if (!left_n || !right_n || memchr(space + 1, ' ', right_n))
        return tr_fail_file(f->diag, TR_EDATA, f->path, f->line, 1,
                            "expected two tokens separated by a space, not '%.*s'", (int)n, line);
    int32_t left = find_token(b, line, left_n), right = find_token(b, space + 1, right_n);
    if (left == NO_TOKEN || right == NO_TOKEN)
        return tr_fail_file(f->diag, TR_EDATA, f->path, f->line, 1, "'%.*s' is not a token of %s",
                            (int)(left == NO_TOKEN ? left_n : right_n), left == NO_TOKEN ? line : space + 1,
                            f->encoder);
    memmove(space, space + 1, right_n);
    int32_t merged = find_token(b, line, n - 1);
    if (merged == NO_TOKEN)
        return tr_fail_file(f->diag, TR_EDATA, f->path, f->line, 1,
                            "'%.*s' and '%.*s' make '%.*s', which is not a token of %s", (int)left_n, line,
                            (int)right_n, line + left_n, (int)(n - 1), line, f->encoder);
    struct pair_rank *slot = pair_slot(b, pair_of(left, right));
    if (slot->pair != NO_PAIR)
        return tr_fail_file(f->diag, TR_EDATA, f->path, f->line, 1, "the merge of '%.*s' and '%.*s' is listed twice",
                            (int)left_n, line, (int)right_n, line + left_n);
    *slot = (struct pair_rank){.pair = pair_of(left, right), .rank = rank, .merged = merged};
    return 0;
}

static int load_merges(struct tr_bpe *b, const char *path, const char *encoder, struct tr_diag *diag)
{
    char *text;
    size_t len;
    int rc = read_whole(path, &text, &len, diag);
    if (rc)
        return rc;
    size_t lines = 1;
    for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))); p++)
        lines++;
    b->pair_mask = table_mask(lines);
    b->pairs = tr_xmalloc((b->pair_mask + 1) * sizeof *b->pairs);
    for (size_t i = 0; i <= b->pair_mask; i++)
        b->pairs[i].pair = NO_PAIR;
    struct merges_file f = {.path = path, .encoder = encoder, .diag = diag};
    int32_t rank = 0;
    for (char *line = text, *end = text + len; line < end && !rc;) {
        char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            eol = end;
        size_t n = (size_t)(eol - line);
        if (n && line[n - 1] == '\r')   /* tokenizers reads lines with Rust's lines(), which drops it */
            n--;
        f.line++;
        /* tokenizers skips the "#version: 0.2" header, and any line like it */
        if (n < 8 || memcmp(line, "#version", 8))
            rc = add_merge(b, &f, line, n, rank++);
        line = eol < end ? eol + 1 : end;
    }
    free(text);
    return rc;
}

/* ---- the pattern and the cache ---------------------------------------------------------------- */

static int compile_pattern(struct tr_bpe *b, struct tr_diag *diag)
{
    int code;
    PCRE2_SIZE at;
    b->pattern = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                               &code, &at, NULL);
    if (!b->pattern) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof message);
        tr_diag_add(diag, (struct tr_where){0},
                    "PCRE2 cannot compile GPT-2's pattern (%s); trainrun needs PCRE2 10.40 or later",
                    (const char *)message);
        return TR_EFAIL;
    }
    /* JIT matches several times faster where PCRE2 has it; the interpreter serves where not. */
    pcre2_jit_compile(b->pattern, PCRE2_JIT_COMPLETE);
    return 0;
}

static struct piece_cache *cache_new(void)
{
    struct piece_cache *c = tr_xcalloc(1, sizeof *c);   /* n = 0: every slot free */
    for (int i = 0; i < CACHE_LOCKS; i++)
        pthread_mutex_init(&c->lock[i], NULL);
    return c;
}

static void cache_free(struct piece_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < CACHE_LOCKS; i++)
        pthread_mutex_destroy(&c->lock[i]);
    free(c);
}

/* Copies the ids of the n bytes at piece into ids and returns how many, or 0 when not cached. */
static size_t cache_get(struct piece_cache *c, uint64_t hash, const char *piece, size_t n,
                        int32_t ids[CACHE_PIECE_BYTES])
{
    size_t i = hash & (CACHE_SLOTS - 1), got = 0;
    pthread_mutex_lock(&c->lock[i % CACHE_LOCKS]);
    const struct cache_slot *s = &c->slot[i];
    if (s->n && s->hash == hash && s->len == n && !memcmp(s->piece, piece, n)) {
        got = s->n;
        memcpy(ids, s->ids, got * sizeof *ids);
    }
    pthread_mutex_unlock(&c->lock[i % CACHE_LOCKS]);
    return got;
}

/* Caches the count ids of the n bytes at piece, in place of whatever held its slot. */
static void cache_put(struct piece_cache *c, uint64_t hash, const char *piece, size_t n,
                      const int32_t *ids, size_t count)
{
    size_t i = hash & (CACHE_SLOTS - 1);
    pthread_mutex_lock(&c->lock[i % CACHE_LOCKS]);
    struct cache_slot *s = &c->slot[i];
    s->hash = hash, s->len = (uint8_t)n, s->n = (uint8_t)count;
    memcpy(s->piece, piece, n);
    memcpy(s->ids, ids, count * sizeof *ids);
    pthread_mutex_unlock(&c->lock[i % CACHE_LOCKS]);
}

/* ---- encoding --------------------------------------------------------------------------------- */

struct symbol {
    int32_t id;              /* NO_TOKEN once merged into the symbol before it */
    size_t prev, next;       /* NO_SYMBOL at the ends */
};

/* A pair of neighbours that merges: the left one's place, the ids then, and the joined id. */
struct merge {
    size_t pos;
    int32_t rank, left, right, merged;
};

/* One encode call's working space, grown to its longest piece. */
struct merger {
    struct symbol *sym;
    struct merge *heap;      /* a binary min-heap by (rank, pos) */
    size_t cap, heap_n;
};

static bool merge_before(const struct merge *a, const struct merge *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct merger *m, struct merge x)
{
    size_t i = m->heap_n++;
    for (; i && merge_before(&x, &m->heap[(i - 1) / 2]); i = (i - 1) / 2)
        m->heap[i] = m->heap[(i - 1) / 2];
    m->heap[i] = x;
}

static struct merge heap_pop(struct merger *m)
{
    struct merge top = m->heap[0], last = m->heap[--m->heap_n];
    size_t i = 0, n = m->heap_n;
    for (size_t child; (child = 2 * i + 1) < n; i = child) {
        if (child + 1 < n && merge_before(&m->heap[child + 1], &m->heap[child]))
            child++;
        if (!merge_before(&m->heap[child], &last))
            break;
        m->heap[i] = m->heap[child];
    }
    m->heap[i] = last;
    return top;
}

/* Queues the pair of the symbol at pos and the next one, when the merges join them. */
static void queue_pair(const struct tr_bpe *b, struct merger *m, size_t pos)
{
    size_t next = m->sym[pos].next;
    if (next == NO_SYMBOL)
        return;
    int32_t left = m->sym[pos].id, right = m->sym[next].id;
    const struct pair_rank *p = pair_slot(b, pair_of(left, right));
    if (p->pair != NO_PAIR)
        heap_push(m, (struct merge){.pos = pos, .rank = p->rank, .left = left, .right = right,
                                    .merged = p->merged});
}

/* The n bytes of piece as byte tokens in m->sym, merged until no pair of neighbours is a merge,
 * that of lowest rank first and, among equals, the leftmost (tokenizers' Word::merge_all). */
static void merge_piece(const struct tr_bpe *b, struct merger *m, const unsigned char *piece, size_t n)
{
    if (n > m->cap) {
        m->cap = n;
        m->sym = tr_xrealloc(m->sym, n * sizeof *m->sym);
        m->heap = tr_xrealloc(m->heap, 3 * n * sizeof *m->heap);   /* n - 1 pairs, 2 more a merge */
    }
    for (size_t i = 0; i < n; i++)
        m->sym[i] = (struct symbol){.id = b->byte_id[piece[i]], .prev = i ? i - 1 : NO_SYMBOL,
                                    .next = i + 1 < n ? i + 1 : NO_SYMBOL};
    m->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        queue_pair(b, m, i);
    while (m->heap_n) {
        struct merge top = heap_pop(m);
        struct symbol *left = &m->sym[top.pos];
        /* Stale once either side has merged since: a merged token is longer, so its id differs. */
        if (left->id != top.left || left->next == NO_SYMBOL || m->sym[left->next].id != top.right)
            continue;
        struct symbol *right = &m->sym[left->next];
        left->id = top.merged;
        left->next = right->next;
        right->id = NO_TOKEN;
        if (left->next != NO_SYMBOL)
            m->sym[left->next].prev = top.pos;
        if (left->prev != NO_SYMBOL)
            queue_pair(b, m, left->prev);
        queue_pair(b, m, top.pos);
    }
}

/* Appends the ids of one piece the pattern cut. */
static void encode_piece(const struct tr_bpe *b, struct merger *m, const char *piece, size_t n,
                         struct tr_ids *ids)
{
    if (n == 1) {
        tr_ids_push(ids, b->byte_id[(unsigned char)piece[0]]);
        return;
    }
    bool cacheable = n <= CACHE_PIECE_BYTES;
    uint64_t hash = cacheable ? hash_bytes(piece, n) : 0;
    int32_t cached[CACHE_PIECE_BYTES];
    size_t count = cacheable ? cache_get(b->cache, hash, piece, n, cached) : 0;
    if (count) {
        for (size_t i = 0; i < count; i++)
            tr_ids_push(ids, cached[i]);
        return;
    }
    merge_piece(b, m, (const unsigned char *)piece, n);
    for (size_t i = 0; i != NO_SYMBOL; i = m->sym[i].next) {   /* the first symbol never merges away */
        tr_ids_push(ids, m->sym[i].id);
        if (cacheable)
            cached[count++] = m->sym[i].id;
    }
    if (cacheable)
        cache_put(b->cache, hash, piece, n, cached, count);
}

int tr_bpe_encode(const struct tr_bpe *b, const char *text, size_t len, struct tr_ids *ids,
                  struct tr_diag *d)
{
    size_t bad = utf8_invalid_at((const unsigned char *)text, len);
    if (bad < len) {
        /* the sentence tr_tokenize gives for every kind */
        return tr_fail(d, TR_EINVAL, "text is not UTF-8 at byte %zu (0x%02x)", bad, (unsigned char)text[bad]);
    }
    pcre2_match_data *match = pcre2_match_data_create_from_pattern(b->pattern, NULL);
    if (!match) {
        return tr_fail(d, TR_ENOMEM, "out of memory encoding %zu bytes", len);
    }
    struct merger m = {0};
    int rc = 0;
    /* Every character is a letter, a digit, a space or none of these, and the pattern takes each
     * kind, so every match begins where the last one ended. */
    for (size_t at = 0; at < len;) {
        int found = pcre2_match(b->pattern, (PCRE2_SPTR)text, len, at, PCRE2_NO_UTF_CHECK, match, NULL);
        if (found < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(found, message, sizeof message);
            rc = tr_fail(d, TR_EFAIL, "GPT-2's pattern failed at byte offset %zu: %s", at, (const char *)message);
            break;
        }
        const PCRE2_SIZE *span = pcre2_get_ovector_pointer(match);
        encode_piece(b, &m, text + span[0], span[1] - span[0], ids);
        at = span[1];
    }
    free(m.sym);
    free(m.heap);
    pcre2_match_data_free(match);
    return rc;
}

/* ---- decoding and the rest -------------------------------------------------------------------- */

char *tr_bpe_decode(const struct tr_bpe *b, const int32_t *ids, size_t n)
{
    size_t size = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < b->n)
            size += b->bytes_at[ids[i] + 1] - b->bytes_at[ids[i]];
    unsigned char *joined = tr_xmalloc(size);
    size = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < b->n) {
            size_t from = b->bytes_at[ids[i]], to = b->bytes_at[ids[i] + 1];
            memcpy(joined + size, b->bytes + from, to - from);
            size += to - from;
        }
    char *text = tr_xmalloc(3 * size + 1);   /* each bad byte may become U+FFFD's three */
    size_t used = 0, len;
    for (size_t i = 0; i < size; i += len) {
        bool good = utf8_sequence(joined + i, size - i, &len);
        memcpy(text + used, good ? (const char *)joined + i : "\xEF\xBF\xBD", good ? len : 3);
        used += good ? len : 3;
    }
    text[used] = 0;
    free(joined);
    return text;
}

int64_t tr_bpe_vocab_size(const struct tr_bpe *b)
{
    return b->n;
}

int32_t tr_bpe_token_id(const struct tr_bpe *b, const char *token)
{
    return find_token(b, token, strlen(token));
}

int tr_bpe_open(struct tr_bpe **out, const char *encoder_json, const char *merges, struct tr_diag *diag)
{
    *out = NULL;
    struct tr_bpe *b = tr_xcalloc(1, sizeof *b);
    int rc = load_encoder(b, encoder_json, diag);
    if (!rc)
        rc = map_bytes(b, encoder_json, diag);
    if (!rc)
        rc = load_merges(b, merges, encoder_json, diag);
    if (!rc)
        rc = compile_pattern(b, diag);
    if (rc) {
        tr_bpe_free(b);
        return rc;
    }
    b->cache = cache_new();
    *out = b;
    return 0;
}

void tr_bpe_free(struct tr_bpe *b)
{
    if (!b)
        return;
    cache_free(b->cache);
    pcre2_code_free(b->pattern);
    free(b->keys);
    free(b->key_at);
    free(b->by_key);
    free(b->bytes);
    free(b->bytes_at);
    free(b->pairs);
    free(b);
}
