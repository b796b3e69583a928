/* Unit tests of the token cache (src/data/cache.c, and dataset.c's use of it): a first load
 * tokenises and writes a shard a split, the next maps that file (the same ids; the file untouched);
 * whatever decides the ids (a source's content or lines, the fields and classes, the tokenizer's
 * kind, option and files' content) makes a new shard, and nothing else does (model.max_len is
 * applied after the cache); a shard damaged in any byte, or forged with bad contents, is said
 * and made again; a cache that cannot be written, TRAINRUN_NO_CACHE and runs building the same
 * shard at once only cost time. Every test has its own XDG_CACHE_HOME, never the user's. */
#include "runner.h"
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

#include "data/cache.h"
#include "data/dataset.h"
#include "data/sha256.h"
#include "recipe/recipe.h"
#include "unit.h"

/* ---- a scratch data set and its cache --------------------------------------------------------- */

/* dir/datasets/set/ holds the data set "set"; dir/cache is XDG_CACHE_HOME, so the shards are in
 * dir/cache/trainrun/tokens. */
struct scratch {
    char *dir, *datasets, *set, *cache, *tokens;
};

static void scratch_begin(struct scratch *s)
{
    s->dir = unit_mkdtemp();
    s->datasets = tr_strdup_printf("%s/datasets", s->dir);
    s->set = tr_strdup_printf("%s/set", s->datasets);
    s->cache = tr_strdup_printf("%s/cache", s->dir);
    s->tokens = tr_strdup_printf("%s/trainrun/tokens", s->cache);
    ck_assert_int_eq(mkdir(s->datasets, 0777), 0);
    ck_assert_int_eq(mkdir(s->set, 0777), 0);
    setenv("XDG_CACHE_HOME", s->cache, 1);
    unsetenv("TRAINRUN_NO_CACHE");
}

static void scratch_end(struct scratch *s)
{
    unit_rmtree(s->dir);
    free(s->dir), free(s->datasets), free(s->set), free(s->cache), free(s->tokens);
}

static void put(const struct scratch *s, const char *name, const char *text)
{
    free(unit_write_in(s->set, name, text));
}

/* The data of a recipe on "set" with model.max_len: the status, and the errors in *text (caller
 * frees). */
static int try_load(const struct scratch *s, int max_len, struct tr_data *d, char **text)
{
    char *yaml = tr_strdup_printf("model: {arch: mlp, max_len: %d}\ndata: {dataset: set}\n", max_len);
    struct tr_recipe r;
    struct tr_diag diag = {0};
    ck_assert_int_eq(tr_recipe_load_string(&r, yaml, strlen(yaml), "r.yaml", NULL, 0, &diag), 0);
    int rc = tr_data_load(&r, s->datasets, d, &diag);
    *text = unit_diag_text(&diag);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
    free(yaml);
    return rc;
}

/* The same, which must succeed. */
static void load(const struct scratch *s, int max_len, struct tr_data *d)
{
    char *text;
    int rc = try_load(s, max_len, d, &text);
    ck_assert_msg(rc == 0, "the load failed: %s", text);
    free(text);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = tr_xmalloc(*len + 1);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void spill(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* The number of files in the token cache whose names hold part; -1 when it has no folder. */
static int files_in_cache(const struct scratch *s, const char *part)
{
    DIR *d = opendir(s->tokens);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.' && strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* The path of the one shard of split role ("train", "valid"). Caller frees. */
static char *shard_of(const struct scratch *s, const char *role)
{
    char *prefix = tr_strdup_printf("set.%s.", role), *path = NULL;
    DIR *d = opendir(s->tokens);
    ck_assert_msg(d != NULL, "no token cache at %s", s->tokens);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            ck_assert_msg(path == NULL, "two %s shards", role);
            path = tr_strdup_printf("%s/%s", s->tokens, e->d_name);
        }
    closedir(d);
    ck_assert_msg(path != NULL, "no %s shard in %s", role, s->tokens);
    ck_assert_msg(strlen(path) > 6 && !strcmp(path + strlen(path) - 6, ".shard"), "%s", path);
    free(prefix);
    return path;
}

/* ---- what a load gave ------------------------------------------------------------------------- */

static bool inside(const struct tr_split *sp, const void *p)
{
    const char *c = p, *m = sp->map;
    return m && c >= m && c < m + sp->map_bytes;
}

/* Whether split sp came from the token cache: mapped, its tokens (and labels) in the mapping. */
static void expect_mapped(const struct tr_split *sp, bool mapped, const char *what)
{
    if (!mapped) {
        ck_assert_msg(sp->map == NULL, "%s: read from the cache, expected tokenised", what);
        return;
    }
    ck_assert_msg(sp->map != NULL, "%s: tokenised, expected read from the cache", what);
    ck_assert_msg(inside(sp, sp->tokens), "%s: the tokens are not the shard's", what);
    ck_assert_msg(!sp->y || inside(sp, sp->y), "%s: the labels are not the shard's", what);
}

static void expect_same_split(const struct tr_split *a, const struct tr_split *b)
{
    ck_assert_int_eq(a->n, b->n);
    ck_assert_int_eq(a->ntokens, b->ntokens);
    ck_assert_int_eq(a->window, b->window);
    ck_assert_mem_eq(a->tokens, b->tokens, (size_t)a->ntokens * sizeof *a->tokens);
    ck_assert((a->offsets == NULL) == (b->offsets == NULL) && (a->y == NULL) == (b->y == NULL));
    if (a->offsets && a->n)
        ck_assert_mem_eq(a->offsets, b->offsets, (size_t)(a->n + 1) * sizeof *a->offsets);
    if (a->y && a->n)
        ck_assert_mem_eq(a->y, b->y, (size_t)a->n * sizeof *a->y);
}

static void expect_same_data(const struct tr_data *a, const struct tr_data *b)
{
    ck_assert_int_eq(a->kind, b->kind);
    expect_same_split(&a->train, &b->train);
    expect_same_split(&a->valid, &b->valid);
    expect_same_split(&a->test, &b->test);
}

static void expect_no_warnings(const struct tr_data *d)
{
    char *text = unit_diag_text(&d->warnings);
    ck_assert_msg(d->warnings.n == 0, "warnings: %s", text);
    free(text);
}

/* Every warning holds needle, and there is at least one. */
static void expect_warnings(const struct tr_data *d, const char *needle)
{
    char *text = unit_diag_text(&d->warnings);
    ck_assert_msg(d->warnings.n > 0, "no warning, expected '%s'", needle);
    for (int i = 0; i < d->warnings.n; i++)
        ck_assert_msg(strstr(d->warnings.items[i].message, needle), "expected '%s' in: %s", needle, text);
    free(text);
}

/* The same data with the cache off: what tokenising gives. */
static void load_uncached(const struct scratch *s, int max_len, struct tr_data *d)
{
    setenv("TRAINRUN_NO_CACHE", "1", 1);
    load(s, max_len, d);
    unsetenv("TRAINRUN_NO_CACHE");
}

/* ---- the data sets ---------------------------------------------------------------------------- */

static const char austen[] = "It is a truth universally acknowledged,\nthat a single man in possession\n"
                             "of a good fortune, must be in want of a wife.\n";

/* Language modelling on text through bytes: train the whole of t.txt (pinned), valid its lines. */
static void write_stream_set(const struct scratch *s, const char *text, const char *valid_lines)
{
    put(s, "t.txt", text);
    char hex[65];
    tr_sha256_of(text, strlen(text), hex);
    char *yaml = tr_strdup_printf("format: text\ntokenizer: {kind: bytes}\ntrain: {source: t.txt, sha256: %s}\n"
                                  "valid: {source: t.txt, lines: %s}\n", hex, valid_lines);
    put(s, "dataset.yaml", yaml);
    free(yaml);
}

static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\nsat\ndog\n##s\nran\n.\n";
enum { PAD, UNK, CLS, SEP, THE, CAT, SAT, DOG, S_, RAN, DOT };
static const char train_tsv[] = "text\ttitle\tlabel\nThe cat sat.\tcats\tanimal\nthe dogs ran\tdogs\taction\n"
                                "the cat\tpets\tanimal\n";
static const char valid_tsv[] = "text\ttitle\tlabel\nthe dog\tdog\taction\n";

/* A classification set as one test of what_decides_the_ids writes it. */
struct classes_set {
    const char *train, *valid;    /* train.tsv (pinned) and valid.tsv (not) */
    const char *vocab;            /* written to vocab.txt and words.txt */
    const char *tokenizer;        /* the definition's tokenizer: */
    const char *classes;          /* class_names */
    const char *text;             /* the text field */
    const char *extra;            /* more lines of the definition */
};

static const struct classes_set base_set = {train_tsv, valid_tsv, vocab,
                                             "{kind: wordpiece, vocab: vocab.txt, lowercase: true}",
                                             "[animal, action]", "text", ""};

static void write_classes_set(const struct scratch *s, const struct classes_set *c)
{
    put(s, "train.tsv", c->train);
    put(s, "valid.tsv", c->valid);
    put(s, "vocab.txt", c->vocab);
    put(s, "words.txt", c->vocab);
    char hex[65];
    tr_sha256_of(c->train, strlen(c->train), hex);
    char *yaml = tr_strdup_printf("name: set\nformat: tsv\ntext: %s\nlabel: label\nclass_names: %s\ntokenizer: %s\n"
                                  "train: {source: train.tsv, sha256: %s}\nvalid: {source: valid.tsv}\n%s",
                                  c->text, c->classes, c->tokenizer, hex, c->extra);
    put(s, "dataset.yaml", yaml);
    free(yaml);
}

/* ---- a second load maps what the first wrote ---------------------------------------------------- */

START_TEST(stream_second_load_maps_the_shard)
{
    struct scratch s;
    scratch_begin(&s);
    write_stream_set(&s, austen, "[1, 2]");
    struct tr_data first, second, plain;
    load(&s, 8, &first);
    expect_no_warnings(&first);
    expect_mapped(&first.train, false, "first load, train");
    expect_mapped(&first.valid, false, "first load, valid");
    ck_assert_int_eq(files_in_cache(&s, ".shard"), 2);
    ck_assert_int_eq(files_in_cache(&s, ""), 2);   /* no temporary file left */
    char *train = shard_of(&s, "train");
    struct stat before, after;
    ck_assert_int_eq(stat(train, &before), 0);
    load(&s, 8, &second);
    expect_no_warnings(&second);
    expect_mapped(&second.train, true, "second load, train");
    expect_mapped(&second.valid, true, "second load, valid");
    expect_same_data(&first, &second);
    ck_assert_int_eq(second.train.ntokens, (int64_t)strlen(austen));
    ck_assert_int_eq(second.train.tokens[0], 'I');
    ck_assert_int_eq(stat(train, &after), 0);
    ck_assert(before.st_ino == after.st_ino && before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
              before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);   /* read, not written again */
    load_uncached(&s, 8, &plain);
    expect_same_data(&plain, &second);
    tr_data_free(&first), tr_data_free(&second), tr_data_free(&plain);
    free(train);
    scratch_end(&s);
}
END_TEST

START_TEST(samples_second_load_maps_the_shard)
{
    struct scratch s;
    scratch_begin(&s);
    write_classes_set(&s, &base_set);
    struct tr_data first, second;
    load(&s, 128, &first);
    expect_no_warnings(&first);
    expect_mapped(&first.train, false, "first load");
    char *train = shard_of(&s, "train");
    struct stat before, after;
    ck_assert_int_eq(stat(train, &before), 0);
    load(&s, 128, &second);
    expect_no_warnings(&second);
    expect_mapped(&second.train, true, "second load, train");
    expect_mapped(&second.valid, true, "second load, valid");
    ck_assert(inside(&second.train, second.train.offsets));   /* nothing cut: all of it the shard's */
    expect_same_data(&first, &second);
    const int32_t want[] = {CLS, THE, CAT, SAT, DOT, SEP, CLS, THE, DOG, S_, RAN, SEP, CLS, THE, CAT, SEP};
    ck_assert_int_eq(second.train.ntokens, 16);
    ck_assert_mem_eq(second.train.tokens, want, sizeof want);
    ck_assert_int_eq(second.train.y[1], 1);
    ck_assert_int_eq(stat(train, &after), 0);
    ck_assert(before.st_ino == after.st_ino && before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
    tr_data_free(&first), tr_data_free(&second);
    free(train);
    scratch_end(&s);
}
END_TEST

/* model.max_len is applied after the cache: another one maps the same shard, cuts a copy (so the
 * shard, mapped read-only, is never written) and gives what tokenising gives. */
START_TEST(max_len_is_applied_after_the_cache)
{
    struct scratch s;
    scratch_begin(&s);
    write_classes_set(&s, &base_set);
    struct tr_data whole, cut, plain;
    load(&s, 128, &whole);
    char *train = shard_of(&s, "train");
    size_t len, len_after;
    unsigned char *bytes = slurp(train, &len);
    load(&s, 4, &cut);
    expect_no_warnings(&cut);
    ck_assert_int_eq(files_in_cache(&s, ""), 2);
    ck_assert_msg(cut.train.map != NULL && inside(&cut.train, cut.train.y), "the shard was not used");
    ck_assert_msg(!inside(&cut.train, cut.train.tokens), "cut samples must be a copy");
    const int32_t want[] = {CLS, THE, CAT, SEP, CLS, THE, DOG, SEP, CLS, THE, CAT, SEP};
    ck_assert_int_eq(cut.train.ntokens, 12);
    ck_assert_mem_eq(cut.train.tokens, want, sizeof want);
    expect_mapped(&cut.valid, true, "valid, nothing to cut");
    ck_assert(inside(&cut.valid, cut.valid.offsets));
    unsigned char *after = slurp(train, &len_after);
    ck_assert(len == len_after && !memcmp(bytes, after, len));
    load_uncached(&s, 4, &plain);
    expect_same_data(&plain, &cut);
    tr_data_free(&whole), tr_data_free(&cut), tr_data_free(&plain);
    /* The same for a stream: other windows over the same shard. */
    write_stream_set(&s, austen, "[1, 2]");
    load(&s, 8, &whole);
    load(&s, 5, &cut);
    expect_mapped(&cut.train, true, "a stream with another max_len");
    ck_assert_int_eq(cut.train.window, 5);
    ck_assert_int_eq(cut.train.n, ((int64_t)strlen(austen) - 1) / 5);
    tr_data_free(&whole), tr_data_free(&cut);
    free(bytes), free(after), free(train);
    scratch_end(&s);
}
END_TEST

/* ---- what makes a new shard --------------------------------------------------------------------- */

static const char other_train[] = "text\ttitle\tlabel\nThe cat ran.\tcats\tanimal\n";
static const char other_valid[] = "text\ttitle\tlabel\nthe cats\tcats\tanimal\n";
static const char other_vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\nsat\ndog\n##s\nran\n.\nmat\n";

static const struct change {
    const char *what;
    struct classes_set set;
    bool train_changes, valid_changes;   /* whether each split gets a new shard */
} changes[] = {
    {"train.tsv's content and sha256", {other_train, valid_tsv, vocab, "{kind: wordpiece, vocab: vocab.txt, "
     "lowercase: true}", "[animal, action]", "text", ""}, true, false},
    {"valid.tsv's content (pinned by no sha256)", {train_tsv, other_valid, vocab, "{kind: wordpiece, vocab: "
     "vocab.txt, lowercase: true}", "[animal, action]", "text", ""}, false, true},
    {"the vocabulary's content", {train_tsv, valid_tsv, other_vocab, "{kind: wordpiece, vocab: vocab.txt, "
     "lowercase: true}", "[animal, action]", "text", ""}, true, true},
    {"lowercase", {train_tsv, valid_tsv, vocab, "{kind: wordpiece, vocab: vocab.txt, lowercase: false}",
     "[animal, action]", "text", ""}, true, true},
    {"the tokenizer's kind", {train_tsv, valid_tsv, vocab, "{kind: bytes}", "[animal, action]", "text", ""},
     true, true},
    {"the order of the class names", {train_tsv, valid_tsv, vocab, "{kind: wordpiece, vocab: vocab.txt, "
     "lowercase: true}", "[action, animal]", "text", ""}, true, true},
    {"the text field", {train_tsv, valid_tsv, vocab, "{kind: wordpiece, vocab: vocab.txt, lowercase: true}",
     "[animal, action]", "title", ""}, true, true},
    /* Neither names nor times are content: */
    {"the vocabulary's name, not its content", {train_tsv, valid_tsv, vocab, "{kind: wordpiece, vocab: "
     "words.txt, lowercase: true}", "[animal, action]", "text", ""}, false, false},
    {"every file written again, and a description", {train_tsv, valid_tsv, vocab, "{kind: wordpiece, vocab: "
     "vocab.txt, lowercase: true}", "[animal, action]", "text", "description: the same\n"}, false, false},
};

START_TEST(what_decides_the_ids_decides_the_shard)
{
    const struct change *c = &changes[_i];
    struct scratch s;
    scratch_begin(&s);
    write_classes_set(&s, &base_set);
    struct tr_data before, changed, again;
    load(&s, 128, &before);
    tr_data_free(&before);
    load(&s, 128, &before);
    expect_mapped(&before.train, true, c->what);
    struct timespec past[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    write_classes_set(&s, &c->set);
    char *path = tr_strdup_printf("%s/train.tsv", s.set);
    ck_assert_int_eq(utimensat(AT_FDCWD, path, past, 0), 0);   /* a time like no other */
    free(path);
    load(&s, 128, &changed);
    expect_no_warnings(&changed);
    expect_mapped(&changed.train, !c->train_changes, c->what);
    expect_mapped(&changed.valid, !c->valid_changes, c->what);
    ck_assert_int_eq(files_in_cache(&s, ".train."), 1 + c->train_changes);
    ck_assert_int_eq(files_in_cache(&s, ".valid."), 1 + c->valid_changes);
    load(&s, 128, &again);
    expect_mapped(&again.train, true, c->what);
    expect_mapped(&again.valid, true, c->what);
    expect_same_data(&changed, &again);
    if (!c->train_changes && !c->valid_changes)
        expect_same_data(&before, &changed);
    tr_data_free(&before), tr_data_free(&changed), tr_data_free(&again);
    scratch_end(&s);
}
END_TEST

/* A stream's lines: make its ids: valid's range moves, train (the whole file) stays. */
START_TEST(lines_decide_the_shard)
{
    struct scratch s;
    scratch_begin(&s);
    write_stream_set(&s, austen, "[1, 2]");
    struct tr_data before, after;
    load(&s, 8, &before);
    write_stream_set(&s, austen, "[2, 3]");
    load(&s, 8, &after);
    expect_mapped(&after.train, true, "train");
    expect_mapped(&after.valid, false, "valid, other lines");
    ck_assert_int_eq(after.valid.tokens[0], 't');
    tr_data_free(&before), tr_data_free(&after);
    scratch_end(&s);
}
END_TEST

/* A pin keys a shard only once its file is checked against it: a file changed under its old
 * pin is the error it always was, shard or no shard. */
START_TEST(a_file_changed_under_its_pin_is_an_error)
{
    struct scratch s;
    scratch_begin(&s);
    write_stream_set(&s, austen, "[1, 2]");
    struct tr_data d;
    load(&s, 8, &d);
    tr_data_free(&d);
    put(&s, "t.txt", "It is a truth universally denied.\n");
    char *text;
    ck_assert_int_ne(try_load(&s, 8, &d, &text), 0);
    ck_assert_msg(strstr(text, "t.txt: sha256 mismatch: expected"), "%s", text);
    free(text);
    scratch_end(&s);
}
END_TEST

/* ---- damage ----------------------------------------------------------------------------------- */

/* Loads, expecting the warning about path and the data tokenised (as first), and the shard
 * written again as it was (bytes, len). */
static void expect_made_again(const struct scratch *s, const char *path, const struct tr_data *first,
                              const unsigned char *bytes, size_t len, const char *says, const char *what)
{
    struct tr_data d;
    load(s, 8, &d);
    expect_warnings(&d, "a damaged token cache shard");
    expect_warnings(&d, says);
    ck_assert_int_eq(d.warnings.n, 1);
    ck_assert_str_eq(d.warnings.items[0].where.file, path);
    expect_mapped(&d.train, false, what);
    expect_same_data(first, &d);
    size_t now_len;
    unsigned char *now = slurp(path, &now_len);
    ck_assert_msg(now_len == len && !memcmp(now, bytes, len), "%s: the shard was not made again", what);
    free(now);
    tr_data_free(&d);
}

/* Every byte of a shard, flipped in turn (header, arrays and the padding between them), is
 * found: no bit of a shard is trusted. */
START_TEST(every_damaged_byte_is_found)
{
    struct scratch s;
    scratch_begin(&s);
    write_classes_set(&s, &base_set);
    struct tr_data first;
    load(&s, 8, &first);
    char *path = shard_of(&s, "train");
    size_t len;
    unsigned char *bytes = slurp(path, &len);
    ck_assert_uint_eq(len, 128 + 64 + 64 + 3 * 4);   /* 16 tokens, 4 offsets (aligned), 3 labels */
    for (size_t i = 0; i < len; i++) {
        bytes[i] ^= 0xff;
        spill(path, bytes, len);
        bytes[i] ^= 0xff;
        char what[64];
        snprintf(what, sizeof what, "byte %zu flipped", i);
        expect_made_again(&s, path, &first, bytes, len, "", what);
    }
    tr_data_free(&first);
    free(bytes), free(path);
    scratch_end(&s);
}
END_TEST

/* A shard cut short or grown, to each length that matters. */
START_TEST(a_truncated_shard_is_made_again)
{
    struct scratch s;
    scratch_begin(&s);
    write_stream_set(&s, austen, "[1, 2]");
    struct tr_data first;
    load(&s, 8, &first);
    char *path = shard_of(&s, "train");
    size_t len;
    unsigned char *bytes = slurp(path, &len);
    const size_t lengths[] = {0, 1, 127, 128, 129, len - 1, len + 1};
    const char *says[] = {"0 bytes, shorter than its header", "1 bytes, shorter", "127 bytes, shorter",
                          "128 bytes, its header says", "bytes, its header says", "bytes, its header says",
                          "bytes, its header says"};
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        unsigned char *cut = tr_xcalloc(1, lengths[k] + 1);
        memcpy(cut, bytes, lengths[k] < len ? lengths[k] : len);
        spill(path, cut, lengths[k]);
        free(cut);
        expect_made_again(&s, path, &first, bytes, len, says[k], says[k]);
    }
    /* Garbage of the right length, and a shard of another split under this one's name. */
    unsigned char *garbage = tr_xmalloc(len);
    for (size_t i = 0; i < len; i++)
        garbage[i] = (unsigned char)(i * 131 + 7);
    spill(path, garbage, len);
    expect_made_again(&s, path, &first, bytes, len, "not a shard: its magic is wrong", "garbage");
    char *valid = shard_of(&s, "valid");
    size_t valid_len;
    unsigned char *other = slurp(valid, &valid_len);
    spill(path, other, valid_len);
    expect_made_again(&s, path, &first, bytes, len, "its key is not the one its name promises", "another key");
    tr_data_free(&first);
    free(bytes), free(garbage), free(other), free(path), free(valid);
    scratch_end(&s);
}
END_TEST

/* Forged shards: a header field changed, or an array's contents made impossible with the CRC
 * made to match (which no accident does, but which must not crash a run either). */
enum region { HEADER_U32, TOKEN, OFFSET, LABEL };

static const struct forgery {
    const char *what;
    int region;                   /* enum region */
    int64_t at, value;            /* HEADER_U32: the byte; else the index in the array */
    const char *says;
} forgeries[] = {
    {"the version", HEADER_U32, 8, 2, "version 2, not 1"},
    {"the byte order", HEADER_U32, 12, 0x04030201, "written on a machine of the other byte order"},
    {"the kind", HEADER_U32, 48, 1, "it holds another kind of data"},
    {"the sample count", HEADER_U32, 60, 0x7fffffff, "its counts are impossible"},
    {"the size", HEADER_U32, 72, 4096, "its header says 4096"},
    {"an unused byte", HEADER_U32, 100, 1, "its header's unused bytes are not zeros"},
    {"an id past the vocabulary", TOKEN, 3, 11, "a token id outside the vocabulary"},
    {"a negative id", TOKEN, 0, -1, "a token id outside the vocabulary"},
    {"a label past the classes", LABEL, 2, 2, "a label outside the classes"},
    {"a negative label", LABEL, 0, -1, "a label outside the classes"},
    {"offsets out of order", OFFSET, 1, 14, "its offsets are out of order"},
    {"offsets from 1", OFFSET, 0, 1, "its offsets do not span its tokens"},
    {"offsets past the tokens", OFFSET, 3, 17, "its offsets do not span its tokens"},
};

START_TEST(a_forged_shard_is_made_again)
{
    const struct forgery *f = &forgeries[_i];
    struct scratch s;
    scratch_begin(&s);
    write_classes_set(&s, &base_set);
    struct tr_data first;
    load(&s, 8, &first);
    char *path = shard_of(&s, "train");
    size_t len;
    unsigned char *bytes = slurp(path, &len), *forged = tr_xmalloc(len);
    memcpy(forged, bytes, len);
    /* 16 tokens from byte 128, 4 offsets from 192, 3 labels from 256 (cache.c's layout). */
    if (f->region == HEADER_U32) {
        uint32_t v = (uint32_t)f->value;
        memcpy(forged + f->at, &v, sizeof v);
    } else if (f->region == OFFSET) {
        memcpy(forged + 192 + 8 * f->at, &f->value, sizeof f->value);
    } else {
        int32_t v = (int32_t)f->value;
        memcpy(forged + (f->region == TOKEN ? 128 : 256) + 4 * f->at, &v, sizeof v);
    }
    if (f->region != HEADER_U32) {
        uint32_t crc = (uint32_t)crc32_z(0, forged + 128, len - 128);
        memcpy(forged + 52, &crc, sizeof crc);
    }
    spill(path, forged, len);
    expect_made_again(&s, path, &first, bytes, len, f->says, f->what);
    tr_data_free(&first);
    free(bytes), free(forged), free(path);
    scratch_end(&s);
}
END_TEST

/* ---- a cache that cannot be used -------------------------------------------------------------- */

/* XDG_CACHE_HOME a file: no folder can be made in it, even by root. The data loads, said. */
START_TEST(an_unwritable_cache_still_loads)
{
    struct scratch s;
    scratch_begin(&s);
    write_stream_set(&s, austen, "[1, 2]");
    char *file = tr_strdup_printf("%s/a-file", s.dir);
    unit_write(file, "not a folder\n");
    setenv("XDG_CACHE_HOME", file, 1);
    struct tr_data d, plain;
    load(&s, 8, &d);
    expect_warnings(&d, "cannot write the token cache: Not a directory; the text is tokenised again next run");
    ck_assert_int_eq(d.warnings.n, 1);   /* once, not for each split */
    char *folder = tr_strdup_printf("%s/trainrun/tokens", file);
    ck_assert_str_eq(d.warnings.items[0].where.file, folder);
    load_uncached(&s, 8, &plain);
    expect_same_data(&plain, &d);
    tr_data_free(&d), tr_data_free(&plain);
    free(file), free(folder);
    scratch_end(&s);
}
END_TEST

/* A cache folder the user may read but not write (as root, the test writes as nobody): the
 * shards in it are read; a new one is a warning. */
START_TEST(a_read_only_cache_is_read)
{
    struct scratch s;
    scratch_begin(&s);
    write_stream_set(&s, austen, "[1, 2]");
    struct tr_data d;
    load(&s, 8, &d);
    tr_data_free(&d);
    ck_assert_int_eq(chmod(s.dir, 0755), 0);
    ck_assert_int_eq(chmod(s.tokens, 0555), 0);
    uid_t uid = geteuid();
    if (uid == 0) {
        struct passwd *nobody = getpwnam("nobody");
        ck_assert_int_eq(seteuid(nobody ? nobody->pw_uid : 65534), 0);
    }
    load(&s, 8, &d);
    expect_no_warnings(&d);
    expect_mapped(&d.train, true, "a read-only cache");
    tr_data_free(&d);
    if (uid == 0)
        ck_assert_int_eq(seteuid(0), 0);
    write_stream_set(&s, "Another text, another shard: no room for it.\n", "[1, 1]");
    if (uid == 0)
        ck_assert_int_eq(seteuid(getpwnam("nobody") ? getpwnam("nobody")->pw_uid : 65534), 0);
    load(&s, 8, &d);
    if (uid == 0)
        ck_assert_int_eq(seteuid(0), 0);
    expect_warnings(&d, "cannot write the token cache: Permission denied");
    expect_mapped(&d.train, false, "a new shard");
    ck_assert_int_eq(d.train.tokens[0], 'A');
    tr_data_free(&d);
    chmod(s.tokens, 0755);
    scratch_end(&s);
}
END_TEST

/* TRAINRUN_NO_CACHE=1 reads and writes nothing; "0" and "" leave the cache on. */
START_TEST(no_cache_writes_nothing)
{
    struct scratch s;
    scratch_begin(&s);
    write_stream_set(&s, austen, "[1, 2]");
    struct tr_data d;
    setenv("TRAINRUN_NO_CACHE", "1", 1);
    for (int i = 0; i < 2; i++) {
        load(&s, 8, &d);
        expect_no_warnings(&d);
        expect_mapped(&d.train, false, "TRAINRUN_NO_CACHE=1");
        tr_data_free(&d);
    }
    ck_assert_int_eq(files_in_cache(&s, ""), -1);
    char *trainrun = tr_strdup_printf("%s/trainrun", s.cache);
    ck_assert(access(trainrun, F_OK) != 0);
    free(trainrun);
    const char *on[] = {"0", ""};
    for (int i = 0; i < 2; i++) {
        setenv("TRAINRUN_NO_CACHE", on[i], 1);
        load(&s, 8, &d);
        expect_mapped(&d.train, i == 1, on[i]);
        ck_assert_int_eq(files_in_cache(&s, ".shard"), 2);
        tr_data_free(&d);
    }
    /* The shards are there, but TRAINRUN_NO_CACHE=1 does not read them either. */
    setenv("TRAINRUN_NO_CACHE", "1", 1);
    load(&s, 8, &d);
    expect_mapped(&d.train, false, "TRAINRUN_NO_CACHE=1 with shards");
    tr_data_free(&d);
    scratch_end(&s);
}
END_TEST

/* Features are not text: nothing is cached. */
START_TEST(features_are_not_cached)
{
    struct scratch s;
    scratch_begin(&s);
    put(&s, "d.csv", "1,2,0\n3,4,1\n5,6,0\n");
    put(&s, "dataset.yaml", "format: csv\nsource: d.csv\nsplit: {valid: 0, test: 0}\n");
    struct tr_data d;
    load(&s, 8, &d);
    expect_no_warnings(&d);
    ck_assert_int_eq(d.train.n, 3);
    ck_assert_int_eq(files_in_cache(&s, ""), -1);
    tr_data_free(&d);
    scratch_end(&s);
}
END_TEST

/* Four runs tokenising the same data set at once all load it, and leave whole shards. */
START_TEST(runs_building_the_same_shards_at_once)
{
    struct scratch s;
    scratch_begin(&s);
    size_t copies = 2000;
    char *big = tr_xmalloc(copies * strlen(austen) + 1);
    for (size_t i = 0; i < copies; i++)
        memcpy(big + i * strlen(austen), austen, strlen(austen));
    big[copies * strlen(austen)] = '\0';
    write_stream_set(&s, big, "[1, 300]");
    char *yaml = tr_strdup("model: {arch: mlp, max_len: 8}\ndata: {dataset: set}\n");
    pid_t pids[4];
    for (int k = 0; k < 4; k++) {
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0) {   /* no Check in here: the exit status says it */
            struct tr_recipe r;
            struct tr_diag diag = {0};
            struct tr_data d;
            int rc = tr_recipe_load_string(&r, yaml, strlen(yaml), "r.yaml", NULL, 0, &diag);
            rc = rc ? rc : tr_data_load(&r, s.datasets, &d, &diag);
            _exit(rc == 0 && d.warnings.n == 0 && d.train.ntokens == (int64_t)strlen(big) ? 0 : 1);
        }
    }
    for (int k = 0; k < 4; k++) {
        int status;
        ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "run %d failed", k);
    }
    ck_assert_int_eq(files_in_cache(&s, ""), 2);
    struct tr_data d;
    load(&s, 8, &d);
    expect_no_warnings(&d);
    expect_mapped(&d.train, true, "after four runs");
    ck_assert_int_eq(d.train.ntokens, (int64_t)strlen(big));
    tr_data_free(&d);
    free(big), free(yaml);
    scratch_end(&s);
}
END_TEST

/* A prepared data set's files are checked by prepare's test; their pins then key the shards. */
START_TEST(prepared_sets_are_cached)
{
    struct scratch s;
    scratch_begin(&s);
    put(&s, "src.txt", austen);
    put(&s, "make", "here=$(dirname \"$0\")\necho run >>\"$here/runs.txt\"\ncp \"$here/src.txt\" \"$1/t.txt\"\n");
    char hex[65];
    tr_sha256_of(austen, strlen(austen), hex);
    char *yaml = tr_strdup_printf("name: set\nprepare: make\nformat: text\ntokenizer: {kind: bytes}\n"
                                  "train: {source: t.txt, sha256: %s}\n", hex);
    put(&s, "dataset.yaml", yaml);
    struct tr_data first, second, third;
    load(&s, 8, &first);
    load(&s, 8, &second);
    expect_no_warnings(&second);
    expect_mapped(&second.train, true, "a prepared set, again");
    expect_same_data(&first, &second);
    /* A prepared file gone bad is prepared again, then the shard is used. */
    char *prepared = tr_strdup_printf("%s/trainrun/datasets/set/t.txt", s.cache);
    unit_write(prepared, "spoilt\n");
    load(&s, 8, &third);
    expect_mapped(&third.train, true, "prepared again");
    expect_same_data(&first, &third);
    size_t len;
    char *runs_txt = tr_strdup_printf("%s/runs.txt", s.set);
    unsigned char *runs = slurp(runs_txt, &len);
    ck_assert_int_eq((int)len, 8);   /* "run\n" twice */
    tr_data_free(&first), tr_data_free(&second), tr_data_free(&third);
    free(yaml), free(prepared), free(runs), free(runs_txt);
    scratch_end(&s);
}
END_TEST

/* ---- the shard format alone ------------------------------------------------------------------ */

/* Written and read back, empty arrays included; and a shard is never mistaken for another kind. */
START_TEST(shard_round_trip)
{
    char *dir = unit_mkdtemp(), *path = tr_strdup_printf("%s/deeper/x.shard", dir);
    unsigned char key[32] = {1, 2, 3};
    const int32_t tokens[] = {5, 6, 7}, labels[] = {1, 0};
    const int64_t offsets[] = {0, 1, 3};
    struct tr_diag warnings = {0};
    struct tr_shard w = {.kind = TR_SHARD_SAMPLES, .n = 2, .ntokens = 3, .tokens = tokens, .offsets = offsets,
                         .labels = labels}, r;
    tr_shard_write(path, key, &w, &warnings);   /* its folder made on the way */
    ck_assert_int_eq(warnings.n, 0);
    ck_assert_int_eq(tr_shard_open(path, key, TR_SHARD_SAMPLES, 8, 2, &r, &warnings), 1);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.ntokens, 3);
    ck_assert_mem_eq(r.tokens, tokens, sizeof tokens);
    ck_assert_mem_eq(r.offsets, offsets, sizeof offsets);
    ck_assert_mem_eq(r.labels, labels, sizeof labels);
    ck_assert_int_eq((uintptr_t)r.tokens % 64, 0);
    ck_assert_int_eq((uintptr_t)r.offsets % 64, 0);
    ck_assert_int_eq((uintptr_t)r.labels % 64, 0);
    tr_cache_unmap(r.map, r.map_bytes);
    ck_assert_int_eq(tr_shard_open(path, key, TR_SHARD_STREAM, 8, 2, &r, &warnings), 0);
    ck_assert_int_eq(warnings.n, 1);
    ck_assert_ptr_null(r.map);
    tr_diag_free(&warnings);
    /* Nothing at all: a stream of no tokens, and no samples. */
    struct tr_shard none = {.kind = TR_SHARD_STREAM};
    tr_shard_write(path, key, &none, &warnings);
    ck_assert_int_eq(tr_shard_open(path, key, TR_SHARD_STREAM, 8, 2, &r, &warnings), 1);
    ck_assert(r.ntokens == 0 && r.tokens == NULL && r.map_bytes == 128);
    tr_cache_unmap(r.map, r.map_bytes);
    const int64_t zero = 0;
    none = (struct tr_shard){.kind = TR_SHARD_SAMPLES, .offsets = &zero};
    tr_shard_write(path, key, &none, &warnings);
    ck_assert_int_eq(tr_shard_open(path, key, TR_SHARD_SAMPLES, 8, 2, &r, &warnings), 1);
    ck_assert(r.n == 0 && r.offsets[0] == 0 && r.labels == NULL);
    tr_cache_unmap(r.map, r.map_bytes);
    ck_assert_int_eq(warnings.n, 0);
    /* A missing shard is a plain miss, without a word. */
    ck_assert_int_eq(tr_shard_open("/nonexistent/x.shard", key, TR_SHARD_STREAM, 8, 2, &r, &warnings), 0);
    ck_assert_int_eq(warnings.n, 0);
    free(path);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* $XDG_CACHE_HOME/trainrun, else ~/.cache/trainrun; a relative XDG_CACHE_HOME is ignored. */
START_TEST(cache_folder)
{
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/home/u", 1);
    char *p = tr_cache_path("tokens");
    ck_assert_str_eq(p, "/x/cache/trainrun/tokens");
    free(p);
    setenv("XDG_CACHE_HOME", "relative", 1);
    p = tr_cache_path("tokens");
    ck_assert_str_eq(p, "/home/u/.cache/trainrun/tokens");
    free(p);
    unsetenv("XDG_CACHE_HOME");
    p = tr_cache_path("datasets/x");
    ck_assert_str_eq(p, "/home/u/.cache/trainrun/datasets/x");
    free(p);
    unsetenv("HOME");
    ck_assert_ptr_null(tr_cache_path("tokens"));
    struct tr_diag warnings = {0};
    ck_assert_ptr_null(tr_token_cache_dir(&warnings));
    ck_assert_int_eq(warnings.n, 1);
    ck_assert(strstr(warnings.items[0].message, "neither XDG_CACHE_HOME nor HOME is set"));
    tr_diag_free(&warnings);
}
END_TEST

static Suite *cache_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("loads");
    tcase_add_test(tc, stream_second_load_maps_the_shard);
    tcase_add_test(tc, samples_second_load_maps_the_shard);
    tcase_add_test(tc, max_len_is_applied_after_the_cache);
    tcase_add_loop_test(tc, what_decides_the_ids_decides_the_shard, 0, (int)(sizeof changes / sizeof changes[0]));
    tcase_add_test(tc, lines_decide_the_shard);
    tcase_add_test(tc, a_file_changed_under_its_pin_is_an_error);
    tcase_add_test(tc, features_are_not_cached);
    tcase_add_test(tc, prepared_sets_are_cached);
    suite_add_tcase(s, tc);
    tc = tcase_create("damage");
    tcase_add_test(tc, every_damaged_byte_is_found);
    tcase_add_test(tc, a_truncated_shard_is_made_again);
    tcase_add_loop_test(tc, a_forged_shard_is_made_again, 0, (int)(sizeof forgeries / sizeof forgeries[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("unusable");
    tcase_add_test(tc, an_unwritable_cache_still_loads);
    tcase_add_test(tc, a_read_only_cache_is_read);
    tcase_add_test(tc, no_cache_writes_nothing);
    tcase_add_test(tc, runs_building_the_same_shards_at_once);
    suite_add_tcase(s, tc);
    tc = tcase_create("format");
    tcase_add_test(tc, shard_round_trip);
    tcase_add_test(tc, cache_folder);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(cache_suite());
}
