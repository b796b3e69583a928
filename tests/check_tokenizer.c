/* Unit tests of src/data/tokenizer.c and wordpiece.c: BERT's WordPiece against Hugging Face's
 * `tokenizers` on every line of tests/fixtures/tokenizer/corpus.txt (wordpiece.ids, written by
 * make_wordpiece_fixtures.py), the byte and character tokenizers, broken vocabularies and text
 * each with the exact sentence expected, decoding, and special tokens; and a line saying how
 * fast WordPiece runs. */
#include "runner.h"
#include <stdint.h>
#include <time.h>

#include "cli/exit.h"
#include "data/tokenizer.h"
#include "recipe/recipe.h"
#include "unit.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* path under the source tree ($srcdir, "." when unset). Caller frees. */
static char *source_path(const char *path)
{
    const char *src = getenv("srcdir");
    return tr_strdup_printf("%s/%s", src && *src ? src : ".", path);
}

/* The whole of a file under the source tree, '\0'-ended; its length in *len. Caller frees. */
static char *read_source(const char *path, size_t *len)
{
    char *full = source_path(path);
    FILE *f = fopen(full, "rb");
    ck_assert_msg(f != NULL, "cannot read %s: %s", full, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    char *text = tr_xmalloc((size_t)size + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    text[size] = '\0';
    *len = (size_t)size;
    free(full);
    return text;
}

static struct tr_tokenizer *open_ok(int kind, const char *vocab, const char *merges)
{
    struct tr_tokenizer *t;
    struct tr_diag diag = {0};
    int rc = tr_tokenizer_open(&t, kind, vocab, merges, true, &diag);
    char *text = unit_diag_text(&diag);
    ck_assert_msg(rc == 0, "cannot open the tokenizer: %s", text);
    free(text);
    tr_diag_free(&diag);
    return t;
}

static struct tr_tokenizer *open_bert(void)
{
    char *vocab = source_path("datasets/vocab/bert-base-uncased/vocab.txt");
    struct tr_tokenizer *t = open_ok(TR_TOK_WORDPIECE, vocab, NULL);
    free(vocab);
    return t;
}

/* Opening must fail with exactly the lines want (each ended by a newline). */
static void expect_open_error(int kind, const char *vocab, const char *want)
{
    struct tr_tokenizer *t;
    struct tr_diag diag = {0};
    int rc = tr_tokenizer_open(&t, kind, vocab, NULL, true, &diag);
    char *text = unit_diag_text(&diag);
    ck_assert_msg(tr_exit_status(rc) == TR_EXIT_DATA, "opened, expected: %s", want);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(text, want);
    free(text);
    tr_diag_free(&diag);
}

/* ids as text, "1 2 3". Caller frees. */
static char *ids_text(const int32_t *v, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? " " : "", v[i]);
    fclose(f);
    return text;
}

/* The ids of text, as text. Caller frees. */
static char *tokens_of(const struct tr_tokenizer *t, const char *text)
{
    struct tr_ids ids = {0};
    struct tr_diag err = {0};
    ck_assert_msg(tr_tokenize(t, text, strlen(text), &ids, &err) == 0, "%s", tr_diag_last(&err));
    char *s = ids_text(ids.v, ids.n);
    tr_ids_free(&ids);
    return s;
}

static void expect_tokens(const struct tr_tokenizer *t, const char *text, const char *want)
{
    char *got = tokens_of(t, text);
    ck_assert_msg(!strcmp(got, want), "'%s': ids %s, expected %s", text, got, want);
    free(got);
}

static void expect_detokenized(const struct tr_tokenizer *t, const int32_t *ids, size_t n,
                               const char *want)
{
    char *got = tr_detokenize(t, ids, n);
    ck_assert_str_eq(got, want);
    free(got);
}

/* The lists of ids of wordpiece.ids, one a line, as one list. Caller frees. */
static char *joined_lines(const char *lines)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (const char *p = lines, *end; (end = strchr(p, '\n')); p = end + 1)
        if (end > p)
            fprintf(f, "%s%.*s", ftell(f) ? " " : "", (int)(end - p), p);
    fclose(f);
    return text;
}

/* ---- WordPiece against Hugging Face's tokenizers ---------------------------------------------- */

/* Every corpus line's ids equal those on the same line of wordpiece.ids; a failure shows the
 * first line that differs. */
START_TEST(wordpiece_matches_huggingface)
{
    struct tr_tokenizer *t = open_bert();
    size_t corpus_len, want_len;
    char *corpus = read_source("tests/fixtures/tokenizer/corpus.txt", &corpus_len);
    char *want = read_source("tests/fixtures/tokenizer/wordpiece.ids", &want_len);
    char *line = corpus, *want_line = want, *first_bad = NULL;
    int lines = 0, matched = 0;
    for (char *end; (end = memchr(line, '\n', corpus_len - (size_t)(line - corpus))); line = end + 1) {
        char *want_end = strchr(want_line, '\n');
        ck_assert_msg(want_end != NULL, "wordpiece.ids has fewer lines than corpus.txt");
        *want_end = '\0';
        struct tr_ids ids = {0};
        struct tr_diag err = {0};
        ck_assert_msg(tr_tokenize(t, line, (size_t)(end - line), &ids, &err) == 0,
                      "line %d: %s", lines + 1, tr_diag_last(&err));
        char *got = ids_text(ids.v, ids.n);
        if (!strcmp(got, want_line))
            matched++;
        else if (!first_bad)
            first_bad = tr_strdup_printf("line %d: %.*s\n  tokenizers: %s\n  trainrun:   %s", lines + 1,
                                         (int)(end - line), line, want_line, got);
        free(got);
        tr_ids_free(&ids);
        want_line = want_end + 1;
        lines++;
    }
    ck_assert_msg(*want_line == '\0', "wordpiece.ids has more lines than corpus.txt");
    printf("wordpiece: %d of %d corpus lines match Hugging Face tokenizers\n", matched, lines);
    ck_assert_msg(matched == lines, "%d of %d lines differ; the first, %s", lines - matched, lines,
                  first_bad);
    free(first_bad);
    free(corpus);
    free(want);
    tr_tokenizer_free(t);
}
END_TEST

/* The corpus as one text (past the 64 KiB at which WordPiece cuts its work) gives every line's
 * ids one after the other, since a newline is whitespace; and the throughput, printed. */
START_TEST(wordpiece_whole_corpus_and_speed)
{
    struct tr_tokenizer *t = open_bert();
    size_t corpus_len, want_len;
    char *corpus = read_source("tests/fixtures/tokenizer/corpus.txt", &corpus_len);
    char *want = read_source("tests/fixtures/tokenizer/wordpiece.ids", &want_len);
    char *joined = joined_lines(want);
    struct tr_ids ids = {0};
    struct tr_diag err = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int runs = 0;
    do {
        ids.n = 0;
        ck_assert_int_eq(tr_tokenize(t, corpus, corpus_len, &ids, &err), 0);
        runs++;
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while (runs < 20 && (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < 0.5);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("wordpiece: %.1f MB/s (%zu bytes of corpus, %zu ids, %d runs)\n",
           1e-6 * (double)corpus_len * runs / seconds, corpus_len, ids.n, runs);
    char *got = ids_text(ids.v, ids.n);
    ck_assert_msg(!strcmp(got, joined), "the whole corpus's ids differ from its lines' ids");
    free(got);
    free(joined);
    tr_ids_free(&ids);
    free(corpus);
    free(want);
    tr_tokenizer_free(t);
}
END_TEST

/* Text Hugging Face's tokenizers was asked about beside the corpus: literal special tokens,
 * which it finds before normalising; words of 100 characters and of 101 (after accents go);
 * controls dropped before whitespace is split on, so \v and U+0085 join words; BERT's CJK
 * ranges as tokenizers has them (U+2B820 is not one, U+2B920 is); full-width letters. */
START_TEST(wordpiece_edge_cases)
{
    struct tr_tokenizer *t = open_bert();
    expect_tokens(t, "[CLS] hi [sep][SEP]x[MASK", "101 7632 1031 19802 1033 102 1060 1031 7308");
    char a100[101], e101[203] = "";
    memset(a100, 'a', 100);
    a100[100] = '\0';
    for (int i = 0; i < 101; i++)
        strcat(e101, "\xc3\xa9");
    char *want = tr_strdup("13360");
    for (int i = 0; i < 48; i++) {
        char *more = tr_strdup_printf("%s 11057", want);
        free(want);
        want = more;
    }
    char *all = tr_strdup_printf("%s 2050", want);
    expect_tokens(t, a100, all);
    expect_tokens(t, e101, "100");
    expect_tokens(t, "a\vb\xc2\x85" "c\xe2\x80\x8b" "d", "5925 2094");
    expect_tokens(t, "\xf0\xab\xa0\xa0\xf0\xab\xa4\xa0", "100 100");
    expect_tokens(t, "\xef\xbc\xa8\xef\xbd\x85\xef\xbd\x8c\xef\xbd\x8c\xef\xbd\x8f", "100");
    expect_tokens(t, "", "");
    free(want);
    free(all);
    tr_tokenizer_free(t);
}
END_TEST

/* tokenizers' WordPiece decoder: "##" pieces glued on, a space between other tokens but none
 * before . , ! ?; special tokens kept, ids outside the vocabulary skipped. */
START_TEST(wordpiece_detokenize)
{
    struct tr_tokenizer *t = open_bert();
    const char *text = "The unaffable tokenization, isn't it? Yes!";
    expect_tokens(t, text, "1996 14477 20961 3468 19204 3989 1010 3475 1005 1056 2009 1029 2748 999");
    struct tr_ids ids = {0};
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_tokenize(t, text, strlen(text), &ids, &err), 0);
    expect_detokenized(t, ids.v, ids.n, "the unaffable tokenization, isn ' t it? yes!");
    const int32_t special[] = {101, 7592, -1, 102, 30522, 0};
    expect_detokenized(t, special, 6, "[CLS] hello [SEP] [PAD]");
    const int32_t piece_first[] = {11057, 11057};
    expect_detokenized(t, piece_first, 2, "##aaaa");   /* the first keeps its "##" */
    expect_detokenized(t, NULL, 0, "");
    tr_ids_free(&ids);
    tr_tokenizer_free(t);
}
END_TEST

START_TEST(wordpiece_specials)
{
    struct tr_tokenizer *t = open_bert();
    ck_assert_int_eq(tr_tokenizer_vocab_size(t), 30522);
    ck_assert_int_eq(tr_tokenizer_special(t, "[CLS]"), 101);
    ck_assert_int_eq(tr_tokenizer_special(t, "[SEP]"), 102);
    ck_assert_int_eq(tr_tokenizer_special(t, "[PAD]"), 0);
    ck_assert_int_eq(tr_tokenizer_special(t, "[UNK]"), 100);
    ck_assert_int_eq(tr_tokenizer_special(t, "[MASK]"), 103);
    ck_assert_int_eq(tr_tokenizer_special(t, "<|endoftext|>"), -1);
    tr_tokenizer_free(t);
}
END_TEST

/* ---- GPT-2's BPE, reached through the front end (tests/check_bpe.c tests it whole) ----------- */

START_TEST(gpt2_bpe_dispatch)
{
    char *encoder = source_path("datasets/vocab/gpt2/encoder.json");
    char *merges = source_path("datasets/vocab/gpt2/vocab.bpe");
    struct tr_tokenizer *t = open_ok(TR_TOK_GPT2_BPE, encoder, merges);
    size_t corpus_len, want_len;
    char *corpus = read_source("tests/fixtures/tokenizer/corpus.txt", &corpus_len);
    char *want = read_source("tests/fixtures/tokenizer/gpt2.ids", &want_len);
    char *end = strchr(corpus, '\n'), *want_end = strchr(want, '\n');
    *end = *want_end = '\0';
    expect_tokens(t, corpus, want);
    struct tr_ids ids = {0};
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_tokenize(t, corpus, strlen(corpus), &ids, &err), 0);
    expect_detokenized(t, ids.v, ids.n, corpus);
    ck_assert_int_eq(tr_tokenize(t, "a\xff", 2, &ids, &err), -1);
    ck_assert_str_eq(tr_diag_last(&err), "text is not UTF-8 at byte 1 (0xff)");
    ck_assert_int_eq(tr_tokenizer_vocab_size(t), 50257);
    ck_assert_int_eq(tr_tokenizer_special(t, "<|endoftext|>"), 50256);
    ck_assert_int_eq(tr_tokenizer_special(t, "[CLS]"), -1);
    tr_ids_free(&ids);
    tr_diag_free(&err);
    free(corpus);
    free(want);
    free(encoder);
    free(merges);
    tr_tokenizer_free(t);
}
END_TEST

/* ---- bytes and characters ------------------------------------------------------------------- */

START_TEST(bytes_round_trip)
{
    struct tr_tokenizer *t = open_ok(TR_TOK_BYTES, NULL, NULL);
    const char *text = "h\xc3\xa9llo, w\xc3\xb6rld \xf0\x9f\xa4\x96\n\t\x01";
    struct tr_ids ids = {0};
    struct tr_diag err = {0};
    ck_assert_int_eq(tr_tokenize(t, text, strlen(text), &ids, &err), 0);
    ck_assert_uint_eq(ids.n, strlen(text));
    for (size_t i = 0; i < ids.n; i++)
        ck_assert_int_eq(ids.v[i], (unsigned char)text[i]);
    expect_detokenized(t, ids.v, ids.n, text);
    ck_assert_int_eq(tr_tokenizer_vocab_size(t), 256);
    ck_assert_int_eq(tr_tokenizer_special(t, "<|endoftext|>"), -1);
    /* A character cut short is one U+FFFD; ids that are no byte are skipped. */
    const int32_t cut[] = {0xc3, 'a', 0xf0, 0x9f, 0xa4, 300, -1, 'b', 0xff, 0xed, 0xa0};
    expect_detokenized(t, cut, 11, "\xef\xbf\xbd" "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    tr_ids_free(&ids);
    tr_tokenizer_free(t);
}
END_TEST

START_TEST(chars_tokenizer)
{
    char *dir = unit_mkdtemp();
    char *list = unit_write_in(dir, "chars.txt", "?\na\nb\n\\n\n\\\\\n\xc3\xa9\n \n\xf0\x9f\xa4\x96");
    struct tr_tokenizer *t = open_ok(TR_TOK_CHARS, list, NULL);
    ck_assert_int_eq(tr_tokenizer_vocab_size(t), 8);
    expect_tokens(t, "ab\n\xc3\xa9 \\\xf0\x9f\xa4\x96z", "1 2 3 5 6 4 7 0");
    const int32_t ids[] = {1, 2, 3, 5, 6, 4, 7, 8, -1};
    expect_detokenized(t, ids, 9, "ab\n\xc3\xa9 \\\xf0\x9f\xa4\x96");
    ck_assert_int_eq(tr_tokenizer_special(t, "[CLS]"), -1);
    tr_tokenizer_free(t);
    free(list);

    list = unit_write_in(dir, "bad.txt", "?\na\nab\na\n\\\nb\n");
#define HOW "(write a newline as \\n, a backslash as \\\\)"
    char *want = tr_strdup_printf("%s:3:1: 'ab' is not one character " HOW "\n"
                                  "%s:5:1: '\\' is not one character " HOW "\n"
                                  "%s:4:1: character 'a' is listed twice (first on line 2)\n", list, list, list);
#undef HOW
    expect_open_error(TR_TOK_CHARS, list, want);
    free(want);
    expect_open_error(TR_TOK_CHARS, NULL, "the chars tokenizer needs a list of characters, one a line\n");
    free(list);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- errors --------------------------------------------------------------------------------- */

START_TEST(vocabulary_errors)
{
    char *dir = unit_mkdtemp();
    struct { const char *name, *text, *want; } cases[] = {
        {"missing.txt", NULL, "{path}: cannot read: No such file or directory\n"},
        {"empty.txt", "", "{path}: the file is empty; a vocabulary lists one entry a line\n"},
        {"twice.txt", "[UNK]\nhello\n##lo\nhello\n##lo\n",
         "{path}:4:1: token 'hello' is listed twice (first on line 2)\n"
         "{path}:5:1: token '##lo' is listed twice (first on line 3)\n"},
        {"trailing.txt", "[UNK]\nhi \nhi\r\n", "{path}:3:1: token 'hi' is listed twice (first on line 2)\n"},
        {"blank.txt", "[UNK]\n\nhi\n", "{path}:2:1: blank line; each line holds one entry\n"},
        {"blanks.txt", "[UNK]\n \t\nhi\n", "{path}:2:1: a line of blanks only; each line holds one token\n"},
        {"latin1.txt", "[UNK]\nh\xffi\n", "{path}:2:2: not UTF-8 at byte 1 of the line (0xff)\n"},
        {"no-unk.txt", "hello\nworld",
         "{path}: no [UNK] token, which WordPiece gives a word it cannot split\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *path = tr_strdup_printf("%s/%s", dir, cases[i].name);
        if (cases[i].text)
            unit_write(path, cases[i].text);
        char *want = tr_strdup(cases[i].want);
        for (char *at; (at = strstr(want, "{path}"));) {
            char *next = tr_strdup_printf("%.*s%s%s", (int)(at - want), want, path, at + 6);
            free(want);
            want = next;
        }
        expect_open_error(TR_TOK_WORDPIECE, path, want);
        free(want);
        free(path);
    }
    char *folder = tr_strdup_printf("%s: cannot read: not a regular file (a directory)\n", dir);
    expect_open_error(TR_TOK_WORDPIECE, dir, folder);
    free(folder);
    expect_open_error(TR_TOK_WORDPIECE, NULL,
                      "the wordpiece tokenizer needs a vocabulary (BERT's vocab.txt)\n");
    expect_open_error(TR_TOK_GPT2_BPE, NULL,
                      "the gpt2-bpe tokenizer needs a vocabulary (GPT-2's encoder.json)\n");
    expect_open_error(TR_TOK_NONE, NULL, "no tokenizer is chosen (data.tokenizer.kind is none)\n");
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* Text that is not UTF-8 is refused by every kind, at the first bad byte, adding no ids. */
START_TEST(text_not_utf8)
{
    static const struct { const char *text, *want; } cases[] = {
        {"ab\xff" "cd", "text is not UTF-8 at byte 2 (0xff)"},
        {"ab\xc3", "text is not UTF-8 at byte 2 (0xc3)"},              /* cut short */
        {"\xc3\xa9\xc0\x80", "text is not UTF-8 at byte 2 (0xc0)"},     /* overlong NUL */
        {"x\xed\xa0\x80", "text is not UTF-8 at byte 1 (0xed)"},        /* a surrogate */
        {"\xf4\x90\x80\x80", "text is not UTF-8 at byte 0 (0xf4)"},     /* past U+10FFFF */
        {"ok \x80", "text is not UTF-8 at byte 3 (0x80)"},              /* a lone continuation */
    };
    char *dir = unit_mkdtemp();
    char *list = unit_write_in(dir, "chars.txt", "?\na\n");
    struct tr_tokenizer *kinds[] = {open_bert(), open_ok(TR_TOK_BYTES, NULL, NULL),
                                    open_ok(TR_TOK_CHARS, list, NULL)};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            struct tr_ids ids = {0};
            struct tr_diag err = {0};
            int rc = tr_tokenize(kinds[k], cases[i].text, strlen(cases[i].text), &ids, &err);
            ck_assert_int_eq(rc, -1);
            ck_assert_str_eq(tr_diag_last(&err), cases[i].want);
            ck_assert_uint_eq(ids.n, 0);
            tr_ids_free(&ids);
            tr_diag_free(&err);
        }
    for (size_t k = 0; k < 3; k++)
        tr_tokenizer_free(kinds[k]);
    free(list);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

static Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("wordpiece");
    tcase_add_test(tc, wordpiece_matches_huggingface);
    tcase_add_test(tc, wordpiece_whole_corpus_and_speed);
    tcase_add_test(tc, wordpiece_edge_cases);
    tcase_add_test(tc, wordpiece_detokenize);
    tcase_add_test(tc, wordpiece_specials);
    tcase_set_timeout(tc, 60);   /* the corpus, many times over, under the sanitizers */
    suite_add_tcase(s, tc);

    tc = tcase_create("gpt2-bpe");
    tcase_add_test(tc, gpt2_bpe_dispatch);
    suite_add_tcase(s, tc);

    tc = tcase_create("bytes and chars");
    tcase_add_test(tc, bytes_round_trip);
    tcase_add_test(tc, chars_tokenizer);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, vocabulary_errors);
    tcase_add_test(tc, text_not_utf8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(tokenizer_suite());
}
