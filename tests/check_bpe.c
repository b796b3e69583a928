/* Unit tests of src/data/bpe.c, GPT-2's byte-level BPE: every line of
 * tests/fixtures/tokenizer/corpus.txt against the ids Hugging Face's tokenizers gives it
 * (gpt2.ids, written by make_gpt2_fixtures.py) and back to its text, the special token and the
 * vocabulary size, broken vocabulary files and text that is not UTF-8 (each with the exact
 * sentence expected), megabyte pieces, threads sharing one tokenizer, and the speed. */
#include "runner.h"

#include <stdint.h>
#include <time.h>

#include "cli/exit.h"
#include "data/bpe.h"
#include "unit.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* $srcdir/rel, srcdir "." when unset (caller frees). */
static char *source_path(const char *rel)
{
    const char *src = getenv("srcdir");
    return tr_strdup_printf("%s/%s", src && *src ? src : ".", rel);
}

/* The whole file, NUL-ended (caller frees). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    char *text = tr_xmalloc((size_t)size + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    text[size] = 0;
    *len = (size_t)size;
    return text;
}

static struct tr_bpe *open_gpt2(void)
{
    char *encoder = source_path("datasets/vocab/gpt2/encoder.json");
    char *merges = source_path("datasets/vocab/gpt2/vocab.bpe");
    struct tr_diag diag = {0};
    struct tr_bpe *b;
    int rc = tr_bpe_open(&b, encoder, merges, &diag);
    char *text = unit_diag_text(&diag);
    ck_assert_msg(rc == 0, "GPT-2's vocabulary did not open: %s", text);
    free(text);
    tr_diag_free(&diag);
    free(encoder);
    free(merges);
    return b;
}

/* corpus.txt, its lines split on '\n' alone (it holds \x1b, NBSP, U+2003 and the like), and the
 * ids tokenizers gave each (gpt2.ids). */
struct corpus {
    char *text;
    size_t len, n;
    char **line;
    size_t *line_len;
    struct tr_ids *want;
};

/* Where each line of text starts and how long it is; returns how many lines, without the empty
 * piece after the last newline. */
static size_t split_lines(char *text, size_t len, char ***line, size_t **line_len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    *line = tr_xmalloc(n * sizeof **line);
    *line_len = tr_xmalloc(n * sizeof **line_len);
    char *at = text;
    for (size_t i = 0; i < n; i++) {
        char *eol = memchr(at, '\n', len - (size_t)(at - text));
        (*line)[i] = at;
        (*line_len)[i] = (size_t)(eol - at);
        at = eol + 1;
    }
    return n;
}

static struct corpus corpus_read(void)
{
    struct corpus c = {0};
    char *path = source_path("tests/fixtures/tokenizer/corpus.txt");
    c.text = slurp(path, &c.len);
    free(path);
    c.n = split_lines(c.text, c.len, &c.line, &c.line_len);
    path = source_path("tests/fixtures/tokenizer/gpt2.ids");
    size_t ids_len;
    char *ids = slurp(path, &ids_len), **line;
    size_t *line_len;
    size_t n = split_lines(ids, ids_len, &line, &line_len);
    ck_assert_msg(n == c.n, "%s has %zu lines for the corpus's %zu", path, n, c.n);
    c.want = tr_xcalloc(n, sizeof *c.want);
    for (size_t i = 0; i < n; i++) {
        line[i][line_len[i]] = 0;
        for (char *p = line[i], *end; *p; p = end)
            tr_ids_push(&c.want[i], (int32_t)strtol(p, &end, 10));
    }
    free(ids);
    free(line);
    free(line_len);
    free(path);
    return c;
}

static void corpus_free(struct corpus *c)
{
    for (size_t i = 0; i < c->n; i++)
        tr_ids_free(&c->want[i]);
    free(c->want);
    free(c->line);
    free(c->line_len);
    free(c->text);
}

static bool same_ids(const struct tr_ids *a, const struct tr_ids *b)
{
    return a->n == b->n && (!a->n || !memcmp(a->v, b->v, a->n * sizeof *a->v));
}

/* "id id …" (caller frees). */
static char *ids_text(const struct tr_ids *ids)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (size_t i = 0; i < ids->n; i++)
        fprintf(f, "%s%d", i ? " " : "", ids->v[i]);
    fclose(f);
    return text;
}

/* The ids of len bytes of text, which must be UTF-8. */
static struct tr_ids encode(const struct tr_bpe *b, const char *text, size_t len)
{
    struct tr_ids ids = {0};
    struct tr_diag err = {0};
    ck_assert_msg(tr_bpe_encode(b, text, len, &ids, &err) == 0, "%s", tr_diag_last(&err));
    return ids;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* ---- GPT-2's vocabulary --------------------------------------------------------------------- */

START_TEST(corpus_ids_match_tokenizers)
{
    struct tr_bpe *b = open_gpt2();
    struct corpus c = corpus_read();
    for (size_t i = 0; i < c.n; i++) {
        struct tr_ids got = encode(b, c.line[i], c.line_len[i]);
        if (!same_ids(&got, &c.want[i]))
            ck_abort_msg("corpus.txt line %zu: '%.*s'\n  ours:       %s\n  tokenizers: %s", i + 1,
                         (int)c.line_len[i], c.line[i], ids_text(&got), ids_text(&c.want[i]));
        tr_ids_free(&got);
    }
    printf("bpe: all %zu corpus lines match tokenizers\n", c.n);
    corpus_free(&c);
    tr_bpe_free(b);
}
END_TEST

START_TEST(corpus_lines_decode_to_themselves)
{
    struct tr_bpe *b = open_gpt2();
    struct corpus c = corpus_read();
    for (size_t i = 0; i < c.n; i++) {
        struct tr_ids ids = encode(b, c.line[i], c.line_len[i]);
        char *back = tr_bpe_decode(b, ids.v, ids.n);
        ck_assert_msg(strlen(back) == c.line_len[i] && !memcmp(back, c.line[i], c.line_len[i]),
                      "corpus.txt line %zu: '%.*s' came back as '%s'", i + 1, (int)c.line_len[i],
                      c.line[i], back);
        free(back);
        tr_ids_free(&ids);
    }
    corpus_free(&c);
    tr_bpe_free(b);
}
END_TEST

START_TEST(special_token_and_vocabulary_size)
{
    struct tr_bpe *b = open_gpt2();
    ck_assert_int_eq(tr_bpe_token_id(b, "<|endoftext|>"), 50256);
    ck_assert_int_eq(tr_bpe_vocab_size(b), 50257);
    ck_assert_int_eq(tr_bpe_token_id(b, "Ġthe"), 262);
    ck_assert_int_eq(tr_bpe_token_id(b, "no such token"), -1);
    ck_assert_int_eq(tr_bpe_token_id(b, ""), -1);
    char *text = tr_bpe_decode(b, (const int32_t[]){50256}, 1);
    ck_assert_str_eq(text, "<|endoftext|>");
    free(text);
    /* in text it is only text: no special tokens are added or recognised */
    struct tr_ids ids = encode(b, "<|endoftext|>", 13);
    text = ids_text(&ids);
    ck_assert_str_eq(text, "27 91 437 1659 5239 91 29");
    free(text);
    tr_ids_free(&ids);
    tr_bpe_free(b);
}
END_TEST

/* A few ids tokenizers 0.23 gives, written out to be read without the fixtures. */
START_TEST(known_encodings)
{
    static const struct {
        const char *text;
        size_t len;
        const char *ids;
    } cases[] = {
        {"Hello world", 11, "15496 995"},
        {"don't stop", 10, "9099 470 2245"},
        {"a\0b", 3, "64 188 65"},   /* NUL is a byte like any other */
        {"", 0, ""},
    };
    struct tr_bpe *b = open_gpt2();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tr_ids ids = encode(b, cases[i].text, cases[i].len);
        char *got = ids_text(&ids);
        ck_assert_msg(!strcmp(got, cases[i].ids), "'%s': got %s, expected %s", cases[i].text, got,
                      cases[i].ids);
        free(got);
        tr_ids_free(&ids);
    }
    tr_bpe_free(b);
}
END_TEST

START_TEST(decode_replaces_cut_characters)
{
    struct tr_bpe *b = open_gpt2();
    int32_t a = tr_bpe_token_id(b, "a"), e4 = tr_bpe_token_id(b, "ä"), b8 = tr_bpe_token_id(b, "¸"),
            c3 = tr_bpe_token_id(b, "Ã");   /* the bytes 0xE4, 0xB8 (of 中) and 0xC3 */
    char *text = tr_bpe_decode(b, (const int32_t[]){a, e4, b8, a}, 4);
    ck_assert_str_eq(text, "a\xEF\xBF\xBD" "a");   /* one U+FFFD for the cut sequence */
    free(text);
    text = tr_bpe_decode(b, (const int32_t[]){c3, c3, b8}, 3);
    ck_assert_str_eq(text, "\xEF\xBF\xBD\xC3\xB8");   /* a lead byte, then a whole character */
    free(text);
    text = tr_bpe_decode(b, (const int32_t[]){-1, a, 50257, INT32_MAX}, 4);   /* unknown ids skipped */
    ck_assert_str_eq(text, "a");
    free(text);
    text = tr_bpe_decode(b, NULL, 0);
    ck_assert_str_eq(text, "");
    free(text);
    tr_bpe_free(b);
}
END_TEST

/* Merging is O(n log n) in a piece: a megabyte without a space is no slower than words. Ids as
 * tokenizers 0.23 gives them. */
START_TEST(megabyte_pieces)
{
    struct tr_bpe *b = open_gpt2();
    size_t n = 1 << 20;
    char *text = tr_xmalloc(n + 2);
    memset(text, 'a', n);
    struct tr_ids ids = encode(b, text, n);
    ck_assert_uint_eq(ids.n, n / 4);
    for (size_t i = 0; i < ids.n; i++)
        ck_assert_int_eq(ids.v[i], 24794);   /* "aaaa" */
    tr_ids_free(&ids);
    memset(text, ' ', n);
    memcpy(text + n, "x", 2);
    ids = encode(b, text, n + 1);   /* GPT-2 has no token of two spaces */
    ck_assert_uint_eq(ids.n, n);
    ck_assert_int_eq(ids.v[0], 220);
    ck_assert_int_eq(ids.v[n - 2], 220);
    ck_assert_int_eq(ids.v[n - 1], 2124);   /* " x" */
    char *back = tr_bpe_decode(b, ids.v, ids.n);
    ck_assert(!strcmp(back, text));
    free(back);
    tr_ids_free(&ids);
    free(text);
    tr_bpe_free(b);
}
END_TEST

/* One tokenizer, many threads: the cache they share must never hand one the ids of another's
 * piece. */
START_TEST(threads_share_a_tokenizer)
{
    struct tr_bpe *b = open_gpt2();
    struct corpus c = corpus_read();
    long wrong = 0;
    #pragma omp parallel for num_threads(8) schedule(dynamic, 16) reduction(+ : wrong)
    for (size_t k = 0; k < 4 * c.n; k++) {
        size_t i = (k * 7919) % c.n;   /* out of order, four times over: threads race for slots */
        struct tr_ids got = {0};
        struct tr_diag err = {0};
        wrong += tr_bpe_encode(b, c.line[i], c.line_len[i], &got, &err) ||
                 !same_ids(&got, &c.want[i]);
        tr_ids_free(&got);
    }
    ck_assert_int_eq(wrong, 0);
    corpus_free(&c);
    tr_bpe_free(b);
}
END_TEST

/* The whole corpus as one text, twice: the first pass fills the cache of pieces. */
START_TEST(speed)
{
    struct tr_bpe *b = open_gpt2();
    struct corpus c = corpus_read();
    double mb_s[2];
    struct tr_ids ids = {0};
    for (int pass = 0; pass < 2; pass++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tr_ids_free(&ids);
        ids = encode(b, c.text, c.len);
        mb_s[pass] = (double)c.len / seconds_since(&t0) / 1e6;
    }
    char *back = tr_bpe_decode(b, ids.v, ids.n);
    ck_assert(strlen(back) == c.len && !memcmp(back, c.text, c.len));
    printf("bpe: corpus.txt, %zu bytes, %zu tokens: %.1f MB/s with a cold cache, %.1f MB/s warm\n",
           c.len, ids.n, mb_s[0], mb_s[1]);
    free(back);
    tr_ids_free(&ids);
    corpus_free(&c);
    tr_bpe_free(b);
}
END_TEST

/* ---- broken files ----------------------------------------------------------------------------- */

static const char MISSING[] = "(no file)";

/* encoder.json and vocab.bpe (NULL: GPT-2's), and the one line opening them must give, with
 * {dir} standing for their folder. */
static const struct bad_vocabulary {
    const char *encoder, *merges, *message;
} bad_vocabularies[] = {
    {MISSING, NULL, "{dir}/encoder.json: cannot read: No such file or directory"},
    {"", NULL, "{dir}/encoder.json: is empty"},
    {"{\"a\": 0,\n \"b\": }", NULL,
     "{dir}/encoder.json:2:7: is not valid JSON: unexpected token near '}'"},
    {"[\"a\", \"b\"]", NULL, "{dir}/encoder.json: is not a JSON object of tokens and ids"},
    {"{}", NULL, "{dir}/encoder.json: has no tokens"},
    {"{\"a\": 0, \"b\": 0}", NULL, "{dir}/encoder.json: 'a' and 'b' have the same id, 0"},
    {"{\"a\": 0, \"a\": 1}", NULL,
     "{dir}/encoder.json:1:12: is not valid JSON: duplicate object key near '\"a\"'"},
    {"{\"a\": 0, \"b\": 2}", NULL,
     "{dir}/encoder.json: the id of 'b' must be a whole number from 0 to 1 (the file has 2 tokens)"},
    {"{\"a\": \"0\", \"b\": 1}", NULL,
     "{dir}/encoder.json: the id of 'a' must be a whole number from 0 to 1 (the file has 2 tokens)"},
    {"{\"a\": 0}", NULL, "{dir}/encoder.json: has no token 'Ā' for the byte 0x00"},
    {NULL, MISSING, "{dir}/vocab.bpe: cannot read: No such file or directory"},
    {NULL, "", "{dir}/vocab.bpe: is empty"},
    {NULL, "#version: 0.2\nĠ t\nĠ\n",
     "{dir}/vocab.bpe:3:1: expected two tokens separated by a space, not 'Ġ'"},
    {NULL, "#version: 0.2\nĠ t\nĠ a b\n",
     "{dir}/vocab.bpe:3:1: expected two tokens separated by a space, not 'Ġ a b'"},
    {NULL, "Ġ t\n\nĠ a\n", "{dir}/vocab.bpe:2:1: expected two tokens separated by a space, not ''"},
    {NULL, "#version: 0.2\nĠ  t\n",
     "{dir}/vocab.bpe:2:1: expected two tokens separated by a space, not 'Ġ  t'"},
    {NULL, "#version: 0.2\nĠ t\nĠ zq|x\n",
     "{dir}/vocab.bpe:3:1: 'zq|x' is not a token of {dir}/encoder.json"},
    {NULL, "#version: 0.2\nĠ <|endoftext|>\n",
     "{dir}/vocab.bpe:2:1: 'Ġ' and '<|endoftext|>' make 'Ġ<|endoftext|>', which is not a token of "
     "{dir}/encoder.json"},
    {NULL, "#version: 0.2\nĠ t\nĠ a\nĠ t\n",
     "{dir}/vocab.bpe:4:1: the merge of 'Ġ' and 't' is listed twice"},
};

/* "dir/…" for each {dir} in line, and a newline (caller frees). */
static char *expected_line(const char *dir, const char *line)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (const char *at; (at = strstr(line, "{dir}")); line = at + 5)
        fprintf(f, "%.*s%s", (int)(at - line), line, dir);
    fprintf(f, "%s\n", line);
    fclose(f);
    return text;
}

/* Writes name in dir: text, GPT-2's file of that name when text is NULL, nothing if MISSING. */
static char *write_vocabulary_file(const char *dir, const char *name, const char *text)
{
    if (text == MISSING)
        return tr_strdup_printf("%s/%s", dir, name);
    if (text)
        return unit_write_in(dir, name, text);
    char *gpt2 = tr_strdup_printf("datasets/vocab/gpt2/%s", name), *path = source_path(gpt2);
    size_t len;
    char *copy = slurp(path, &len);
    char *written = unit_write_in(dir, name, copy);
    free(copy);
    free(path);
    free(gpt2);
    return written;
}

START_TEST(broken_vocabulary_files)
{
    const struct bad_vocabulary *bad = &bad_vocabularies[_i];
    char *dir = unit_mkdtemp();
    char *encoder = write_vocabulary_file(dir, "encoder.json", bad->encoder);
    char *merges = write_vocabulary_file(dir, "vocab.bpe", bad->merges);
    struct tr_diag diag = {0};
    struct tr_bpe *b;
    int rc = tr_bpe_open(&b, encoder, merges, &diag);
    char *got = unit_diag_text(&diag), *want = expected_line(dir, bad->message);
    ck_assert_int_eq(tr_exit_status(rc), TR_EXIT_DATA);
    ck_assert_ptr_null(b);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    tr_diag_free(&diag);
    free(encoder);
    free(merges);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* A merges file with CRLF line ends, or with no merges at all, is still a vocabulary. */
START_TEST(crlf_and_header_only_merges)
{
    char *dir = unit_mkdtemp();
    char *encoder = write_vocabulary_file(dir, "encoder.json", NULL);
    static const struct {
        const char *merges, *ids;
    } cases[] = {
        {"#version: 0.2\r\nĠ t\r\nh e\r\nĠt he\r\n", "262"},   /* " the" is Ġthe */
        {"#version: 0.2\n", "220 83 71 68"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *merges = unit_write_in(dir, "vocab.bpe", cases[i].merges);
        struct tr_diag diag = {0};
        struct tr_bpe *b;
        ck_assert_int_eq(tr_bpe_open(&b, encoder, merges, &diag), 0);
        struct tr_ids ids = encode(b, " the", 4);
        char *got = ids_text(&ids);
        ck_assert_str_eq(got, cases[i].ids);
        free(got);
        tr_ids_free(&ids);
        tr_bpe_free(b);
        free(merges);
    }
    free(encoder);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- text that is not UTF-8 --------------------------------------------------------------------- */

static const struct bad_text {
    const char *text, *message;
} bad_texts[] = {
    {"abc\xC3(", "text is not UTF-8 at byte 3 (0xc3)"},              /* a lead byte alone */
    {"\x80", "text is not UTF-8 at byte 0 (0x80)"},                  /* a continuation byte first */
    {"ok \xED\xA0\x80", "text is not UTF-8 at byte 3 (0xed)"},       /* a surrogate */
    {"\xC0\x80", "text is not UTF-8 at byte 0 (0xc0)"},              /* an overlong NUL */
    {"x\xF4\x90\x80\x80", "text is not UTF-8 at byte 1 (0xf4)"},     /* past U+10FFFF */
    {"fin\xE2\x82", "text is not UTF-8 at byte 3 (0xe2)"},           /* cut at the end */
    {"é\xFF", "text is not UTF-8 at byte 2 (0xff)"},
};

START_TEST(text_that_is_not_utf8)
{
    struct tr_bpe *b = open_gpt2();
    struct tr_ids ids = {0};
    struct tr_diag err = {0};
    const struct bad_text *bad = &bad_texts[_i];
    ck_assert_int_eq(tr_bpe_encode(b, bad->text, strlen(bad->text), &ids, &err), -1);
    ck_assert_str_eq(tr_diag_last(&err), bad->message);
    ck_assert_uint_eq(ids.n, 0);   /* no ids before the bad byte either */
    tr_diag_free(&err);
    tr_bpe_free(b);
}
END_TEST

static Suite *bpe_suite(void)
{
    Suite *s = suite_create("bpe");
    TCase *tc = tcase_create("gpt2");
    tcase_add_test(tc, corpus_ids_match_tokenizers);
    tcase_add_test(tc, corpus_lines_decode_to_themselves);
    tcase_add_test(tc, special_token_and_vocabulary_size);
    tcase_add_test(tc, known_encodings);
    tcase_add_test(tc, decode_replaces_cut_characters);
    tcase_add_test(tc, megabyte_pieces);
    tcase_add_test(tc, threads_share_a_tokenizer);
    tcase_add_test(tc, speed);
    tcase_set_timeout(tc, 60);   /* the sanitizers */
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_loop_test(tc, broken_vocabulary_files, 0,
                        (int)(sizeof bad_vocabularies / sizeof bad_vocabularies[0]));
    tcase_add_test(tc, crlf_and_header_only_merges);
    tcase_add_loop_test(tc, text_that_is_not_utf8, 0, (int)(sizeof bad_texts / sizeof bad_texts[0]));
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(bpe_suite());
}
