/* trainrun sample RUN_DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]:
 * text from a trained GPT run. The run's recorded recipe (already resolved, as resume reads it),
 * its tokenizer, the weights of its newest checkpoint that verifies; then the prompt and its
 * continuation on stdout, token by token, from the key/value-cached decoder and the sampler of
 * models/gpt_decode.h. Reads the run folder and writes nothing there. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "models/gpt_decode.h"
#include "models/models.h"
#include "recipe/optimizers.h"
#include "recipe/recipe.h"
#include "recipe/schema.h"
#include "train/checkpoint.h"

static const char usage[] =
    "usage: trainrun sample RUN_DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]\n";

struct sample_options {
    const char *prompt;
    int64_t tokens, top_k;
    double temperature;
    uint64_t seed;
};

/* ---- the command line ---------------------------------------------------------------------- */

/* A whole number ≥ min in text (the value of option), or a usage error printed. */
static int whole_number(const char *option, const char *text, int64_t min, const char *what, int64_t *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (!*text || *end || errno || n < min) {
        fprintf(stderr, "trainrun: %s %s: expected %s\n%s", option, text, what, usage);
        return TR_EXIT_USAGE;
    }
    *out = n;
    return 0;
}

static int read_options(const struct tr_args *a, struct sample_options *o)
{
    *o = (struct sample_options){.prompt = tr_args_value(a, "--prompt"), .tokens = 100, .top_k = 40,
                                 .temperature = 1.0};
    const char *tokens = tr_args_value(a, "--tokens"), *top_k = tr_args_value(a, "--top-k");
    const char *temperature = tr_args_value(a, "--temperature"), *seed = tr_args_value(a, "--seed");
    if (!o->prompt) {
        fprintf(stderr, "trainrun: sample needs a prompt: --prompt TEXT\n%s", usage);
        return TR_EXIT_USAGE;
    }
    if (tokens && whole_number("--tokens", tokens, 1, "a number of tokens, 1 or more", &o->tokens))
        return TR_EXIT_USAGE;
    if (top_k && whole_number("--top-k", top_k, 0, "a number of tokens, or 0 for all", &o->top_k))
        return TR_EXIT_USAGE;
    if (seed) {
        int64_t n;
        if (whole_number("--seed", seed, 0, "a whole number, 0 or more", &n))
            return TR_EXIT_USAGE;
        o->seed = (uint64_t)n;
    }
    if (temperature) {
        char *end;
        o->temperature = strtod(temperature, &end);
        if (!*temperature || *end || !isfinite(o->temperature) || o->temperature < 0) {
            fprintf(stderr, "trainrun: --temperature %s: expected a number, 0 (the likeliest token each time) "
                    "or more\n%s", temperature, usage);
            return TR_EXIT_USAGE;
        }
    }
    return 0;
}

/* ---- the run's tokenizer ------------------------------------------------------------------- */

static int readable(const char *path)
{
    return access(path, R_OK) == 0;
}

/* A tokenizer file: the run's own copy, run_dir/tokenizer/<kept>, when there is one; else the
 * recipe's path, found as the data stage finds it (tr_data_find_file). NULL: none. */
static char *tokenizer_file(const char *run_dir, const char *kept, const char *given)
{
    char *copy = tr_strdup_printf("%s/tokenizer/%s", run_dir, kept);
    if (readable(copy))
        return copy;
    free(copy);
    return tr_data_find_file(given, tr_cli_datasets_dir());
}

/* The kind of a run whose recipe names none (its data set's definition did): from the files the
 * run kept. TR_TOK_NONE when it kept none. */
static int kept_kind(const char *run_dir)
{
    static const struct { const char *file; int kind; } kinds[] = {
        {"encoder.json", TR_TOK_GPT2_BPE}, {"vocab.txt", TR_TOK_WORDPIECE}, {"chars.txt", TR_TOK_CHARS}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char *path = tr_strdup_printf("%s/tokenizer/%s", run_dir, kinds[i].file);
        int found = readable(path);
        free(path);
        if (found)
            return kinds[i].kind;
    }
    return TR_TOK_NONE;
}

static int open_tokenizer(const char *run_dir, const struct tr_recipe *r, struct tr_tokenizer **tok)
{
    int kind = r->data.tokenizer.kind == TR_TOK_NONE ? kept_kind(run_dir) : r->data.tokenizer.kind;
    if (kind == TR_TOK_NONE) {
        fprintf(stderr, "trainrun: %s names no tokenizer (data.tokenizer.kind: none) and keeps none in "
                "%s/tokenizer/: its text cannot be encoded\n", run_dir, run_dir);
        return TR_EXIT_USAGE;
    }
    const char *vocab_name = kind == TR_TOK_GPT2_BPE ? "encoder.json"
                             : kind == TR_TOK_CHARS  ? "chars.txt"
                                                     : "vocab.txt";
    char *vocab = kind == TR_TOK_BYTES ? NULL : tokenizer_file(run_dir, vocab_name, r->data.tokenizer.vocab);
    char *merges = kind == TR_TOK_GPT2_BPE ? tokenizer_file(run_dir, "vocab.bpe", r->data.tokenizer.merges) : NULL;
    struct tr_diag diag = {0};
    int rc = tr_tokenizer_open(tok, kind, vocab, merges, r->data.tokenizer.lowercase, &diag);
    if (rc) {
        for (int i = 0; i < diag.n; i++) {
            char *line = tr_diag_line(&diag, i);
            fprintf(stderr, "trainrun: %s\n", line);
            free(line);
        }
    }
    tr_diag_free(&diag);
    free(vocab);
    free(merges);
    return tr_exit_status(rc);
}

/* ---- the newest checkpoint that verifies --------------------------------------------------- */

/* Opens in c the newest run_dir/checkpoints/step-N.safetensors that verifies for g and the
 * recipe's optimizer (train/checkpoint.h's reader); the ones passed over are named on stderr. */
static int open_checkpoint(const char *run_dir, const struct tr_recipe *r, const struct tr_graph *g,
                           struct tr_checkpoint *c)
{
    char *dir = tr_strdup_printf("%s/checkpoints", run_dir);
    struct tr_checkpoint_layout l = {.g = g, .optimizer = r->train.optimizer.name, .nstate = tr_optimizer_nstate(r)};
    struct tr_diag skipped = {0}, d = {0};
    int unread = tr_checkpoint_open_newest(dir, &l, c, &skipped, &d);   /* unread: as good as empty */
    for (int i = 0; i < skipped.n; i++)
        fprintf(stderr, "trainrun: warning: skipped a damaged checkpoint: %s\n", skipped.items[i].message);
    if (!c->found)
        fprintf(stderr, "trainrun: %s holds no checkpoint that verifies%s\n", dir,
                !unread && c->files ? "" : " (the run stopped before it wrote one)");
    tr_diag_free(&skipped), tr_diag_free(&d);
    free(dir);
    return c->found ? 0 : TR_EXIT_USAGE;
}

/* The weights: the run's model graph built as the trainer built it (for the order of its
 * checkpoint's tensors), the newest checkpoint checked against it, and the decoder on top. */
static int load_model(const char *run_dir, const struct tr_recipe *r, int64_t vocab, struct tr_checkpoint *c,
                      struct tr_gpt_decoder *dec)
{
    struct tr_graph g;
    struct tr_model m;
    tr_graph_init(&g);
    tr_model_build(&g, r, 0, NULL, 0, vocab, 0, &m);
    int rc = TR_EXIT_USAGE;
    if (g.error)
        fprintf(stderr, "trainrun: %s: model: %s\n", run_dir, g.message);
    else
        rc = open_checkpoint(run_dir, r, &g, c);
    tr_graph_free(&g);
    if (rc)
        return rc;
    struct tr_diag err = {0};
    rc = tr_gpt_decoder_init(dec, r, &c->st, "", &err);
    if (rc) {
        fprintf(stderr, "trainrun: %s: %s\n", run_dir, tr_diag_last(&err));
        tr_diag_free(&err);
        tr_checkpoint_close(c);
        return rc == TR_ENOMEM ? TR_EXIT_FAILURE : TR_EXIT_USAGE;
    }
    return 0;
}

/* ---- generation ---------------------------------------------------------------------------- */

/* The continuation as it grows: the text of the prompt's and the new tokens is decoded again
 * after each token and only what is new is written, so a character whose bytes span tokens
 * comes out whole. Trailing U+FFFD (what an unfinished UTF-8 sequence decodes to) is held back
 * until the next token. A token that decodes to nothing, or to a NUL (a byte model's 0), is
 * left out: tr_detokenize's text ends at the first NUL, and nothing after it would show. */
struct printer {
    const struct tr_tokenizer *tok;
    struct tr_ids ids;
    size_t shown;   /* bytes of the decoded text written (or the prompt's, taken as written) */
};

static void print_new(struct printer *p, int final)
{
    char *text = tr_detokenize(p->tok, p->ids.v, p->ids.n);
    size_t end = strlen(text);
    while (!final && end >= 3 && end - 3 >= p->shown && !memcmp(text + end - 3, "\xEF\xBF\xBD", 3))
        end -= 3;
    if (end > p->shown) {
        fwrite(text + p->shown, 1, end - p->shown, stdout);
        p->shown = end;
    }
    fflush(stdout);
    free(text);
}

static void print_token(struct printer *p, int32_t id)
{
    char *alone = tr_detokenize(p->tok, &id, 1);
    if (*alone) {
        tr_ids_push(&p->ids, id);
        print_new(p, 0);
    }
    free(alone);
}

/* Feeds the context: the last max_len ids at most (the model saw no longer windows). */
static int feed_context(struct tr_gpt_decoder *dec, const struct tr_ids *ids)
{
    struct tr_diag err = {0};
    size_t n = ids->n < (size_t)dec->max_len ? ids->n : (size_t)dec->max_len;
    tr_gpt_decoder_reset(dec);
    if (tr_gpt_decoder_feed(dec, ids->v + ids->n - n, (int64_t)n, &err)) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&err));
        tr_diag_free(&err);
        return TR_EXIT_FAILURE;
    }
    return 0;
}

/* The prompt's ids into ids, and printed; an empty one starts a new document where the
 * vocabulary has <|endoftext|>. */
static int start(const struct tr_tokenizer *tok, const char *prompt, int32_t end_of_text, struct tr_ids *ids,
                 struct printer *p)
{
    struct tr_diag d = {0};
    if (tr_tokenize(tok, prompt, strlen(prompt), ids, &d)) {
        fprintf(stderr, "trainrun: --prompt: %s\n", tr_diag_last(&d));
        tr_diag_free(&d);
        return TR_EXIT_USAGE;
    }
    for (size_t i = 0; i < ids->n; i++)
        tr_ids_push(&p->ids, ids->v[i]);
    if (ids->n == 0 && end_of_text >= 0) {
        tr_ids_push(ids, end_of_text);   /* as GPT-2 itself begins unconditioned text */
    } else if (ids->n == 0) {
        fprintf(stderr, "trainrun: --prompt: the prompt holds no token to continue\n");
        return TR_EXIT_USAGE;
    }
    char *decoded = tr_detokenize(tok, p->ids.v, p->ids.n);
    p->shown = strlen(decoded);
    free(decoded);
    fputs(prompt, stdout);
    fflush(stdout);
    return 0;
}

static int generate(struct tr_gpt_decoder *dec, const struct tr_tokenizer *tok, const struct sample_options *o)
{
    struct tr_ids ids = {0};
    struct printer p = {.tok = tok};
    int32_t end_of_text = tr_tokenizer_special(tok, "<|endoftext|>");
    int rc = start(tok, o->prompt, end_of_text, &ids, &p);
    if (rc) {
        tr_ids_free(&ids), tr_ids_free(&p.ids);
        return rc;
    }
    struct tr_sampler sampler;
    tr_sampler_init(&sampler, dec->vocab, o->temperature, o->top_k, o->seed);
    rc = feed_context(dec, &ids);
    for (int64_t i = 0; i < o->tokens && !rc; i++) {
        struct tr_diag err = {0};
        int32_t next = tr_sampler_next(&sampler, dec->logits);
        if (next == end_of_text)
            break;
        tr_ids_push(&ids, next);
        print_token(&p, next);
        if (i + 1 == o->tokens)
            break;
        if (dec->t == dec->max_len)   /* the window is full: slide it, recomputing the cache */
            rc = feed_context(dec, &ids);
        else if (tr_gpt_decoder_feed(dec, &next, 1, &err))
            rc = (fprintf(stderr, "trainrun: %s\n", tr_diag_last(&err)), TR_EXIT_FAILURE);
        tr_diag_free(&err);
    }
    print_new(&p, 1);
    putchar('\n');
    tr_sampler_free(&sampler);
    tr_ids_free(&ids), tr_ids_free(&p.ids);
    if (fflush(stdout) || ferror(stdout)) {
        perror("trainrun: writing the sample");
        return TR_EXIT_FAILURE;
    }
    return rc;
}

/* ---- the subcommand ------------------------------------------------------------------------ */

/* The run's recipe into r, which is initialised whatever happens (tr_recipe_free it). */
static int load_run(const char *run_dir, struct tr_recipe *r)
{
    struct tr_path path;
    struct tr_diag diag = {0};
    if (tr_path_set(&path, &diag, "%s/recipe.yaml", run_dir)) {
        tr_recipe_init(r);
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&diag));
        tr_diag_free(&diag);
        return TR_EXIT_USAGE;
    }
    if (!readable(path.s)) {
        tr_recipe_init(r);
        fprintf(stderr, "trainrun: %s is not a run folder: it has no readable recipe.yaml\n", run_dir);
        return TR_EXIT_USAGE;
    }
    struct tr_recipe_sources src = {.recipe = path.s};
    int rc = tr_recipe_load(r, &src, &diag) ? TR_EXIT_USAGE : 0;
    if (rc)
        tr_diag_print(&diag, stderr);
    else if (r->model.arch != TR_ARCH_GPT)
        rc = (fprintf(stderr, "trainrun: %s is a run of model.arch %s; sample generates text from language "
                      "models (model.arch gpt) only\n", run_dir,
                      tr_keys[tr_key_find("model.arch")].names[r->model.arch]), TR_EXIT_USAGE);
    tr_diag_free(&diag);
    return rc;
}

int tr_cmd_sample(int argc, char **argv)
{
    static const char *const flags[] = {"--help", "-h", NULL};
    static const char *const valued[] = {"--prompt", "--tokens", "--temperature", "--top-k", "--seed", NULL};
    struct tr_args args;
    struct sample_options opt;
    int rc = tr_args_start_valued(argc, argv, flags, valued, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    if (args.noverrides) {
        fprintf(stderr, "trainrun: sample uses the run as it was recorded; it takes no overrides\n%s", usage);
        tr_args_free(&args);
        return TR_EXIT_USAGE;
    }
    if ((rc = read_options(&args, &opt))) {
        tr_args_free(&args);
        return rc;
    }
    struct tr_recipe recipe;
    struct tr_tokenizer *tok = NULL;
    struct tr_checkpoint checkpoint = {0};
    struct tr_gpt_decoder dec;
    rc = load_run(args.recipe, &recipe);
    if (!rc && !(rc = open_tokenizer(args.recipe, &recipe, &tok)) &&
        !(rc = load_model(args.recipe, &recipe, tr_tokenizer_vocab_size(tok), &checkpoint, &dec))) {
        rc = generate(&dec, tok, &opt);
        tr_gpt_decoder_free(&dec);
        tr_checkpoint_close(&checkpoint);
    }
    tr_tokenizer_free(tok);
    tr_recipe_free(&recipe);
    tr_args_free(&args);
    return rc;
}
