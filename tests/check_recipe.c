/* Unit tests of the recipe stage (src/recipe/, DESIGN.md §9): the schema's defaults and their
 * round trip through the YAML `trainrun check` prints; layering of conf files, recipe,
 * extends and overrides, with each value's origin; typed values; and a table of bad inputs,
 * each with the exact messages a user must see. Every test runs in its own scratch folder. */
#include "runner.h"
#include <jansson.h>
#include <math.h>

#include "recipe/recipe.h"
#include "recipe/schema.h"
#include "unit.h"

/* ---- scaffolding ---------------------------------------------------------------------------- */

static char *scratch;      /* the test's folder, and the current directory while it runs */
static char *start_dir;

static void scratch_setup(void)
{
    start_dir = getcwd(NULL, 0);
    scratch = unit_mkdtemp();
    ck_assert_int_eq(chdir(scratch), 0);
}

static void scratch_teardown(void)
{
    ck_assert_int_eq(chdir(start_dir), 0);
    unit_rmtree(scratch);
    free(scratch);
    free(start_dir);
}

/* A recipe that passes validation: the defaults lack data and a tokenizer for bert. */
#define DATA "data: {dataset: wordnet, tokenizer: bytes}\n"

static int load_text(struct tr_recipe *r, const char *yaml, const char *const *overrides,
                     struct tr_diag *diag)
{
    return tr_recipe_load_string(r, yaml, strlen(yaml), "r.yaml", (char *const *)overrides,
                                 unit_count(overrides), diag);
}

/* Loads yaml (as r.yaml) with overrides, failing the test unless it loads cleanly. */
static void load_ok(struct tr_recipe *r, const char *yaml, const char *const *overrides)
{
    struct tr_diag diag = {0};
    int rc = load_text(r, yaml, overrides, &diag);
    char *got = unit_diag_text(&diag);
    ck_assert_msg(rc == 0 && diag.n == 0, "the recipe did not load:\n%s", got);
    free(got);
    tr_diag_free(&diag);
}

/* The same from files: tr_recipe_load with conf files (either may be NULL). */
static int load_files(struct tr_recipe *r, const char *system_conf, const char *user_conf,
                      const char *recipe, const char *const *overrides, struct tr_diag *diag)
{
    struct tr_recipe_sources src = {.system_conf = system_conf, .user_conf = user_conf,
                                    .recipe = recipe, .overrides = (char *const *)overrides,
                                    .noverrides = unit_count(overrides)};
    return tr_recipe_load(r, &src, diag);
}

static void expect_origin(const struct tr_recipe *r, const char *path, enum tr_origin_kind kind,
                          const char *file, int line, int col)
{
    int key = tr_key_find(path);
    ck_assert_msg(key >= 0, "no key %s", path);
    const struct tr_origin *o = &r->origin[key];
    ck_assert_msg(o->kind == kind, "%s: origin kind %d, expected %d", path, o->kind, kind);
    ck_assert_msg((!o->file && !file) || (o->file && file && !strcmp(o->file, file)),
                  "%s: origin file '%s', expected '%s'", path, o->file ? o->file : "(null)",
                  file ? file : "(null)");
    ck_assert_msg(o->line == line && o->col == col, "%s: origin at %d:%d, expected %d:%d", path,
                  o->line, o->col, line, col);
}

static bool is_null(const struct tr_recipe *r, const char *path)
{
    int key = tr_key_find(path);
    ck_assert_msg(key >= 0, "no key %s", path);
    return r->is_null[key];
}

/* The YAML `trainrun check` prints, every origin comment made "# default", so that two
 * recipes compare by their values alone. Caller frees. */
static char *yaml_values(const struct tr_recipe *r)
{
    struct tr_recipe copy = *r;   /* shallow: only the origins differ, and it is not freed */
    for (int i = 0; i < tr_nkeys; i++)
        copy.origin[i] = (struct tr_origin){.kind = TR_ORIGIN_DEFAULT};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tr_recipe_write_yaml(&copy, f);
    fclose(f);
    return text;
}

static char *yaml_with_origins(const struct tr_recipe *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tr_recipe_write_yaml(r, f);
    fclose(f);
    return text;
}

/* The recipe as tr_recipe_to_json writes it, parsed (caller json_decref's). */
static json_t *json_of(const struct tr_recipe *r)
{
    char *text = tr_recipe_to_json(r);
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    ck_assert_msg(doc != NULL, "tr_recipe_to_json wrote bad JSON: %s", err.text);
    free(text);
    return doc;
}

/* The value at a dotted key path under "recipe". */
static json_t *json_value_at(json_t *doc, const char *path)
{
    json_t *at = json_object_get(doc, "recipe");
    char *copy = tr_strdup(path), *save = NULL;
    for (char *part = strtok_r(copy, ".", &save); part && at; part = strtok_r(NULL, ".", &save))
        at = json_object_get(at, part);
    free(copy);
    ck_assert_msg(at != NULL, "no %s in the JSON", path);
    return at;
}

/* ---- defaults ------------------------------------------------------------------------------- */

/* The built-in defaults are the ones DESIGN.md §9 documents. */
START_TEST(defaults_documented)
{
    struct tr_recipe r;
    tr_recipe_init(&r);
    ck_assert(is_null(&r, "name") && r.name == NULL);
    ck_assert_int_eq(r.seed, 1234);
    ck_assert_str_eq(r.device, "auto");
    ck_assert_int_eq(r.model.arch, TR_ARCH_BERT);
    ck_assert_int_eq(r.model.layers, 12);
    ck_assert_int_eq(r.model.hidden, 768);
    ck_assert_int_eq(r.model.heads, 12);
    ck_assert_int_eq(r.model.ffn, 3072);
    ck_assert_int_eq(r.model.max_len, 128);
    ck_assert_double_eq(r.model.dropout, 0.1);
    ck_assert_int_eq(r.model.activation, TR_ACT_AUTO);
    ck_assert(is_null(&r, "model.init.path") && r.model.init.path == NULL);
    ck_assert_int_eq(r.model.init.from_run, TR_FROM_RUN_NONE);
    ck_assert(is_null(&r, "data.dataset"));
    ck_assert(is_null(&r, "data.train.source"));
    ck_assert_int_eq(r.data.train.format, TR_FMT_AUTO);
    ck_assert_int_eq(r.data.tokenizer.kind, TR_TOK_NONE);
    ck_assert(r.data.tokenizer.lowercase);
    ck_assert_int_eq(tr_recipe_num_workers(&r, 8), 2);
    ck_assert_int_eq(r.data.prefetch_factor, 2);
    ck_assert_int_eq(r.data.pin_memory, TR_AUTO);
    ck_assert_int_eq(r.train.batch_size, 32);
    ck_assert_int_eq(r.train.epochs, 3);
    ck_assert(is_null(&r, "train.steps"));
    ck_assert_int_eq(r.train.optimizer.name, TR_OPT_ADAMW);
    ck_assert_double_eq(r.train.optimizer.lr, 5.0e-5);
    ck_assert_double_eq(r.train.optimizer.weight_decay, 0.01);
    ck_assert_int_eq(r.train.optimizer.betas.n, 2);
    ck_assert_double_eq(r.train.optimizer.betas.v[0], 0.9);
    ck_assert_double_eq(r.train.optimizer.betas.v[1], 0.999);
    ck_assert_double_eq(r.train.optimizer.eps, 1.0e-8);
    ck_assert(!r.train.optimizer.nesterov);
    ck_assert_int_eq(r.train.schedule.name, TR_SCHED_LINEAR);
    ck_assert(!r.train.schedule.warmup.is_steps);
    ck_assert_double_eq(r.train.schedule.warmup.fraction, 0.06);
    ck_assert_double_eq(r.train.grad_clip, 1.0);
    ck_assert_int_eq(r.train.eval_every, 500);
    ck_assert_int_eq(r.train.checkpoint_every, 1000);
    ck_assert_uint_eq(r.budget.memory, UINT64_C(14) << 30);
    ck_assert(is_null(&r, "budget.time"));
    ck_assert_int_eq(r.optimize.amp, TR_AMP_AUTO);
    ck_assert_double_eq(r.optimize.loss_scale.init, 65536);
    ck_assert_double_eq(r.optimize.loss_scale.growth, 2.0);
    ck_assert_double_eq(r.optimize.loss_scale.backoff, 0.5);
    ck_assert_int_eq(r.optimize.loss_scale.interval, 2000);
    ck_assert_double_eq(r.optimize.loss_scale.min, 1);
    ck_assert_int_eq(r.optimize.loss_scale.hysteresis, 1);
    ck_assert_int_eq(r.optimize.checkpointing.name, TR_CKPT_AUTO);
    ck_assert_int_eq(r.optimize.dynamic_batching.mode, TR_AUTO);
    ck_assert(is_null(&r, "optimize.dynamic_batching.buckets"));
    ck_assert_int_eq(r.optimize.accumulation.name, 0);
    ck_assert_str_eq(r.report.dir, "runs");
    ck_assert(r.report.tensorboard);
    ck_assert(is_null(&r, "report.notify.url"));
    ck_assert_int_eq(r.report.notify.on.n, 2);
    ck_assert_int_eq(r.report.notify.on.v[0], TR_NOTIFY_FAILURE);
    ck_assert_int_eq(r.report.notify.on.v[1], TR_NOTIFY_REGRESSION);
    ck_assert_double_eq(r.report.notify.timeout, 10);
    /* Every key says where it came from, and null is exactly the keys whose default is. */
    for (int i = 0; i < tr_nkeys; i++) {
        expect_origin(&r, tr_keys[i].path, TR_ORIGIN_DEFAULT, NULL, 0, 0);
        ck_assert_msg(r.is_null[i] == !strcmp(tr_keys[i].def, "null"), "%s: is_null %d",
                      tr_keys[i].path, r.is_null[i]);
    }
    tr_recipe_free(&r);
}
END_TEST

/* Each key's default, written as an override, is valid input and gives the same value: the
 * schema table's default texts go through the same conversion as a user's. */
START_TEST(each_default_reads_back)
{
    struct tr_recipe base;
    struct tr_diag base_diag = {0};
    load_text(&base, "", NULL, &base_diag);   /* fails validation only: no data, no tokenizer */
    json_t *want = json_of(&base);
    for (int i = 0; i < tr_nkeys; i++) {
        const struct tr_key *k = &tr_keys[i];
        char *text = tr_strdup_printf("%s=%s", k->path, k->def);
        const char *overrides[] = {text, NULL};
        struct tr_recipe r;
        struct tr_diag diag = {0};
        load_text(&r, "", overrides, &diag);
        /* The same validation messages as without the override, and no others. */
        ck_assert_msg(diag.n == base_diag.n, "%s: %d messages, expected %d", text, diag.n,
                      base_diag.n);
        for (int j = 0; j < diag.n; j++)
            ck_assert_str_eq(diag.items[j].message, base_diag.items[j].message);
        json_t *got = json_of(&r);
        ck_assert_msg(json_equal(json_value_at(got, k->path), json_value_at(want, k->path)),
                      "%s does not give the default", text);
        if (strcmp(k->path, "name") != 0)   /* name: null is then derived from the file */
            expect_origin(&r, k->path, TR_ORIGIN_OVERRIDE, text, 0, 0);
        json_decref(got);
        tr_diag_free(&diag);
        tr_recipe_free(&r);
        free(text);
    }
    json_decref(want);
    tr_diag_free(&base_diag);
    tr_recipe_free(&base);
}
END_TEST

/* `trainrun check` prints the defaults as a recipe that reads back to the same values. */
START_TEST(defaults_round_trip)
{
    struct tr_recipe r, back;
    tr_recipe_init(&r);
    char *written = yaml_with_origins(&r);
    /* Every key is on its own line, marked as a default. */
    int defaults = 0;
    for (const char *p = written; (p = strstr(p, " # default\n")); p++)
        defaults++;
    ck_assert_int_eq(defaults, tr_nkeys);
    ck_assert_ptr_nonnull(strstr(written, "\nseed: 1234                                  "
                                          "# default\n"));
    ck_assert_ptr_nonnull(strstr(written, "\nbudget:\n  memory: 14GiB "));

    struct tr_diag diag = {0};
    int rc = tr_recipe_load_string(&back, written, strlen(written), NULL, NULL, 0, &diag);
    /* Read without a file, the defaults fail validation, and only that. */
    ck_assert_int_eq(rc, TR_EINVAL);
    char *got = unit_diag_text(&diag);
    ck_assert_str_eq(got,
        "name: a recipe read without a file needs a name\n"
        "model.arch bert reads text: set data.tokenizer to wordpiece, gpt2-bpe, bytes or chars\n"
        "data: no training data; set data.dataset (a folder under datasets/) or "
        "data.train.source (a file or URL)\n");
    char *first = yaml_values(&r), *second = yaml_values(&back);
    ck_assert_str_eq(second, first);
    free(got), free(first), free(second), free(written);
    tr_diag_free(&diag);
    tr_recipe_free(&back);
    tr_recipe_free(&r);
}
END_TEST

/* A recipe that sets (nearly) every key away from its default, with strings that need
 * quoting, reads back from its own `trainrun check` output to the same values. */
static const char full_recipe[] =
    "name: \"1234\"\n"
    "seed: 7\n"
    "device: cuda:1\n"
    "model:\n"
    "  arch: gpt\n"
    "  layers: 6\n"
    "  hidden: 512\n"
    "  heads: 8\n"
    "  ffn: 2048\n"
    "  max_len: 1024\n"
    "  dropout: 0.0\n"
    "  activation: gelu_tanh\n"
    "  init: {from_run: latest}\n"
    "data:\n"
    "  train:\n"
    "    source: https://example.com/train.tsv.gz\n"
    "    sha256: 9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08\n"
    "    format: tsv\n"
    "    text: 'gloss: \"the\" \\ text'\n"
    "    label: 'label #1'\n"
    "  valid: data/valid.tsv\n"
    "  test: {source: \"-1\", format: jsonl, text: on, label: \"null\"}\n"
    "  tokenizer: {kind: gpt2-bpe, vocab: vocab/encoder.json, merges: vocab/vocab.bpe,\n"
    "              lowercase: false}\n"
    "  num_workers: 0\n"
    "  prefetch_factor: 4\n"
    "  pin_memory: on\n"
    "train:\n"
    "  batch_size: 64\n"
    "  steps: 20000\n"
    "  optimizer: {name: sgd, lr: 0.1, weight_decay: 0, betas: [0.8, 0.95], eps: 1e-6,\n"
    "              momentum: 0.95, nesterov: yes}\n"
    "  schedule: {name: cosine, warmup: 500}\n"
    "  grad_clip: null\n"
    "  eval_every: 0\n"
    "  checkpoint_every: 250\n"
    "budget:\n"
    "  memory: 1.5e9\n"
    "  time: 1h30m\n"
    "optimize:\n"
    "  amp: fp16\n"
    "  loss_scale: {init: 1024, growth: 1.5, backoff: 0.25, interval: 100, min: 0.5,\n"
    "               hysteresis: 2}\n"
    "  checkpointing: 3\n"
    "  dynamic_batching: {mode: on, buckets: [64, 256, 1024], pool: 50}\n"
    "  accumulation: 8\n"
    "report:\n"
    "  dir: my runs/#1\n"
    "  tensorboard: off\n"
    "  histograms_every: 100\n"
    "  notify: {url: \"https://hooks.example.com/x?a=1&b=2\", on: [success, failure],\n"
    "           timeout: 2.5s}\n";

START_TEST(full_round_trip)
{
    struct tr_recipe r, back;
    load_ok(&r, full_recipe, NULL);
    /* Spot checks that the recipe says what this test thinks it says. */
    ck_assert_str_eq(r.name, "1234");
    ck_assert_str_eq(r.data.train.sha256,
                     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
    ck_assert_str_eq(r.data.train.text, "gloss: \"the\" \\ text");
    ck_assert_str_eq(r.data.test.text, "on");
    ck_assert_str_eq(r.data.test.label, "null");
    ck_assert(!is_null(&r, "data.test.label"));
    ck_assert(is_null(&r, "train.epochs"));        /* steps replaces the default epochs */
    ck_assert(is_null(&r, "train.grad_clip"));
    ck_assert_uint_eq(r.budget.memory, 1500000000);
    ck_assert_double_eq(r.report.notify.timeout, 2.5);

    char *first = yaml_values(&r);
    load_ok(&back, first, NULL);
    char *second = yaml_values(&back);
    ck_assert_str_eq(second, first);
    /* The JSON agrees too: the same values, whatever their origins. */
    json_t *a = json_of(&r), *b = json_of(&back);
    ck_assert(json_equal(json_object_get(a, "recipe"), json_object_get(b, "recipe")));
    json_decref(a), json_decref(b);

    /* With origins: each comment says where the value came from. */
    char *written = yaml_with_origins(&r);
    ck_assert_ptr_nonnull(strstr(written, "\nseed: 7                                     "
                                          "# r.yaml:2:7\n"));
    ck_assert_ptr_nonnull(strstr(written, "\n  epochs: null                              "
                                          "# default: train.steps is set\n"));
    ck_assert_ptr_nonnull(strstr(written, "\n    label: \"label #1\"                       "
                                          "# r.yaml:20:12\n"));
    free(first), free(second), free(written);
    tr_recipe_free(&back);
    tr_recipe_free(&r);
}
END_TEST

/* ---- layering: conf files < recipe < overrides ---------------------------------------------- */

START_TEST(layering_values_and_origins)
{
    char *sys = unit_write_in(scratch, "system.conf",
        "seed: 1\n"
        "train:\n"
        "  batch_size: 16\n"
        "  epochs: 5\n"
        "report: {dir: /srv/runs}\n");
    char *user = unit_write_in(scratch, "user.conf",
        "train:\n"
        "  batch_size: 24\n"
        "budget:\n"
        "  memory: 8GiB\n"
        "report: {dir: runs-user}\n");
    unit_write("r.yaml",
        DATA
        "train:\n"
        "  batch_size: 48\n"
        "  optimizer: {lr: 0.001}\n");
    const char *overrides[] = {"train.batch_size=64", "model.layers=6", "model.layers=8", NULL};
    struct tr_recipe r;
    struct tr_diag diag = {0};
    int rc = load_files(&r, sys, user, "r.yaml", overrides, &diag);
    char *got = unit_diag_text(&diag);
    ck_assert_msg(rc == 0, "%s", got);

    ck_assert_int_eq(r.seed, 1);                                    /* system conf only */
    expect_origin(&r, "seed", TR_ORIGIN_SYSTEM_CONF, sys, 1, 7);
    ck_assert_int_eq(r.train.epochs, 5);
    expect_origin(&r, "train.epochs", TR_ORIGIN_SYSTEM_CONF, sys, 4, 11);
    ck_assert_str_eq(r.report.dir, "runs-user");                    /* user beats system */
    expect_origin(&r, "report.dir", TR_ORIGIN_USER_CONF, user, 5, 15);
    ck_assert_uint_eq(r.budget.memory, UINT64_C(8) << 30);
    expect_origin(&r, "budget.memory", TR_ORIGIN_USER_CONF, user, 4, 11);
    ck_assert_double_eq(r.train.optimizer.lr, 0.001);               /* recipe beats confs */
    expect_origin(&r, "train.optimizer.lr", TR_ORIGIN_RECIPE, "r.yaml", 4, 19);
    ck_assert_str_eq(r.data.dataset, "wordnet");
    expect_origin(&r, "data.dataset", TR_ORIGIN_RECIPE, "r.yaml", 1, 17);
    ck_assert_int_eq(r.train.batch_size, 64);                       /* override beats all */
    expect_origin(&r, "train.batch_size", TR_ORIGIN_OVERRIDE, "train.batch_size=64", 0, 0);
    ck_assert_int_eq(r.model.layers, 8);                            /* the last override wins */
    expect_origin(&r, "model.layers", TR_ORIGIN_OVERRIDE, "model.layers=8", 0, 0);
    ck_assert_int_eq(r.model.hidden, 768);                          /* nobody set it */
    expect_origin(&r, "model.hidden", TR_ORIGIN_DEFAULT, NULL, 0, 0);
    ck_assert_str_eq(r.name, "r");                                  /* from the file name */
    ck_assert_int_eq(r.origin[tr_key_find("name")].kind, TR_ORIGIN_DERIVED);

    /* The origins as `trainrun check` and --json show them. */
    char *where = tr_origin_describe(&r.origin[tr_key_find("seed")]);
    char *want = tr_strdup_printf("conf %s:1:7", sys);
    ck_assert_str_eq(where, want);
    free(where), free(want);
    where = tr_origin_describe(&r.origin[tr_key_find("train.optimizer.lr")]);
    ck_assert_str_eq(where, "r.yaml:4:19");
    free(where);
    where = tr_origin_describe(&r.origin[tr_key_find("train.batch_size")]);
    ck_assert_str_eq(where, "override");
    free(where);
    json_t *doc = json_of(&r);
    json_t *o = json_object_get(json_object_get(doc, "origins"), "budget.memory");
    ck_assert_str_eq(json_string_value(json_object_get(o, "kind")), "user_conf");
    ck_assert_str_eq(json_string_value(json_object_get(o, "file")), user);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "line")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "col")), 11);
    o = json_object_get(json_object_get(doc, "origins"), "train.batch_size");
    ck_assert_str_eq(json_string_value(json_object_get(o, "argument")), "train.batch_size=64");
    json_decref(doc);

    free(got), free(sys), free(user);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* A missing system conf is fine; a user conf named by $TRAINRUN_CONF must exist; so must the
 * recipe. The message names the file once. */
START_TEST(layering_missing_files)
{
    unit_write("r.yaml", DATA);
    struct tr_recipe_sources src = {.system_conf = "no-system.conf", .user_conf = "no-user.conf",
                                    .recipe = "r.yaml"};
    struct tr_recipe r;
    struct tr_diag diag = {0};
    ck_assert_int_eq(tr_recipe_load(&r, &src, &diag), 0);   /* an optional user conf */
    tr_recipe_free(&r);

    src.user_conf_required = true;
    ck_assert_int_eq(tr_recipe_load(&r, &src, &diag), TR_EINVAL);
    char *got = unit_diag_text(&diag);
    ck_assert_str_eq(got, "cannot read no-user.conf: No such file or directory\n");
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);

    src = (struct tr_recipe_sources){.recipe = "none.yaml"};
    ck_assert_int_eq(tr_recipe_load(&r, &src, &diag), TR_EINVAL);
    got = unit_diag_text(&diag);
    ck_assert_str_eq(got, "cannot read none.yaml: No such file or directory\n");
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);

    mkdir("folder.yaml", 0700);
    src = (struct tr_recipe_sources){.recipe = "folder.yaml"};
    ck_assert_int_eq(tr_recipe_load(&r, &src, &diag), TR_EINVAL);
    got = unit_diag_text(&diag);
    ck_assert_str_eq(got, "cannot read folder.yaml: not a regular file (a directory)\n");
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* Problems in every layer are collected in one run, in layer order. */
START_TEST(layering_errors_from_every_layer)
{
    unit_write("system.conf", "train:\n  epochs: many\n");
    unit_write("user.conf", "extends: r.yaml\nmodel: {layrs: 2}\n");
    unit_write("r.yaml", DATA "seed: -1\n");
    const char *overrides[] = {"optimize.amp=fp8", NULL};
    struct tr_recipe r;
    struct tr_diag diag = {0};
    ck_assert_int_eq(load_files(&r, "system.conf", "user.conf", "r.yaml", overrides, &diag),
                     TR_EINVAL);
    char *got = unit_diag_text(&diag);
    ck_assert_str_eq(got,
        "system.conf:2:11: train.epochs: expected a whole number from 1 to 1000000, or null, "
        "got 'many'\n"
        "user.conf:1:1: extends is read only in recipe files, not in conf files or overrides\n"
        "user.conf:2:9: unknown key 'model.layrs'; did you mean 'model.layers'?\n"
        "r.yaml:2:7: seed: expected a whole number at least 0, got '-1'\n"
        "override 'optimize.amp=fp8': optimize.amp: expected one of auto, off, bf16, fp16, "
        "got 'fp8'\n");
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* ---- extends -------------------------------------------------------------------------------- */

/* The base is read first and relative to the file naming it; the naming file wins, wherever
 * its extends: line is. */
START_TEST(extends_relative_and_chained)
{
    mkdir("recipes", 0700);
    mkdir("recipes/lib", 0700);
    unit_write("recipes/lib/base.yaml", DATA "seed: 9\nmodel: {layers: 4, hidden: 256}\n");
    unit_write("recipes/lib/mid.yaml", "extends: base.yaml\nmodel:\n  layers: 5\n  heads: 4\n");
    unit_write("recipes/r.yaml", "model: {layers: 6}\nextends: lib/mid.yaml\n");
    struct tr_recipe r;
    struct tr_diag diag = {0};
    int rc = load_files(&r, NULL, NULL, "recipes/r.yaml", NULL, &diag);
    char *got = unit_diag_text(&diag);
    ck_assert_msg(rc == 0, "%s", got);
    ck_assert_int_eq(r.model.layers, 6);
    expect_origin(&r, "model.layers", TR_ORIGIN_RECIPE, "recipes/r.yaml", 1, 17);
    ck_assert_int_eq(r.model.heads, 4);
    expect_origin(&r, "model.heads", TR_ORIGIN_RECIPE, "recipes/lib/mid.yaml", 4, 10);
    ck_assert_int_eq(r.model.hidden, 256);
    expect_origin(&r, "model.hidden", TR_ORIGIN_RECIPE, "recipes/lib/base.yaml", 3, 28);
    ck_assert_int_eq(r.seed, 9);
    expect_origin(&r, "seed", TR_ORIGIN_RECIPE, "recipes/lib/base.yaml", 2, 7);
    ck_assert_str_eq(r.name, "r");   /* the recipe's name, not its base's */
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

START_TEST(extends_absolute_path)
{
    char *base = unit_write_in(scratch, "base.yaml", DATA "seed: 5\n");
    mkdir("elsewhere", 0700);
    char *text = tr_strdup_printf("extends: %s\n", base);
    unit_write("elsewhere/r.yaml", text);
    struct tr_recipe r;
    struct tr_diag diag = {0};
    ck_assert_int_eq(load_files(&r, NULL, NULL, "elsewhere/r.yaml", NULL, &diag), 0);
    ck_assert_int_eq(r.seed, 5);
    expect_origin(&r, "seed", TR_ORIGIN_RECIPE, base, 2, 7);
    free(base), free(text);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* Failures of extends: each placed at the extends: value that caused it. */
static const struct {
    const char *what;
    const char *files[3][2];   /* name, text; r.yaml is loaded */
    const char *expected;
} extends_failures[] = {
    {"a cycle", {{"r.yaml", DATA "extends: b.yaml\n"}, {"b.yaml", "seed: 1\nextends: r.yaml\n"}},
     "b.yaml:2:10: extends: r.yaml is already being read (a cycle of extends)\n"},
    {"extends itself", {{"r.yaml", "extends: r.yaml\n"}},
     "r.yaml:1:10: extends: r.yaml is already being read (a cycle of extends)\n"},
    {"a missing base", {{"r.yaml", DATA "extends: nowhere.yaml\n"}},
     "r.yaml:2:10: extends: cannot read nowhere.yaml: No such file or directory\n"},
    {"a missing base, relative to its file",
     {{"r.yaml", "extends: lib/mid.yaml\n"}, {"lib/mid.yaml", "extends: gone.yaml\n"}},
     "lib/mid.yaml:1:10: extends: cannot read lib/gone.yaml: No such file or directory\n"},
    {"not a path", {{"r.yaml", DATA "extends: [a.yaml, b.yaml]\n"}},
     "r.yaml:2:10: extends: expected the path of another recipe file\n"},
    {"null", {{"r.yaml", DATA "extends:\n"}},
     "r.yaml:2:9: extends: expected the path of another recipe file\n"},
    {"a problem in the base",
     {{"r.yaml", "extends: b.yaml\n"}, {"b.yaml", DATA "model: {layers: 0}\n"}},
     "b.yaml:2:17: model.layers: expected a whole number from 1 to 1024, got '0'\n"},
    {"misspelt", {{"r.yaml", DATA "extend: b.yaml\n"}},
     "r.yaml:2:1: unknown key 'extend'; did you mean 'extends'?\n"},
};

START_TEST(extends_fails)
{
    mkdir("lib", 0700);
    for (int f = 0; f < 3 && extends_failures[_i].files[f][0]; f++)
        unit_write(extends_failures[_i].files[f][0], extends_failures[_i].files[f][1]);
    struct tr_recipe r;
    struct tr_diag diag = {0};
    int rc = load_files(&r, NULL, NULL, "r.yaml", NULL, &diag);
    char *got = unit_diag_text(&diag);
    ck_assert_msg(rc == TR_EINVAL, "%s: loaded", extends_failures[_i].what);
    ck_assert_str_eq(got, extends_failures[_i].expected);
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* A recipe may stand on 8 bases in a chain; a 9th is refused, at the extends that asks for it. */
START_TEST(extends_depth)
{
    for (int bases = 8; bases <= 9; bases++) {
        unit_write("r.yaml", DATA "extends: b1.yaml\n");
        for (int i = 1; i <= bases; i++) {
            char name[16], *text = i < bases ? tr_strdup_printf("extends: b%d.yaml\n", i + 1)
                                             : tr_strdup("seed: 42\n");
            snprintf(name, sizeof name, "b%d.yaml", i);
            unit_write(name, text);
            free(text);
        }
        struct tr_recipe r;
        struct tr_diag diag = {0};
        int rc = load_files(&r, NULL, NULL, "r.yaml", NULL, &diag);
        char *got = unit_diag_text(&diag);
        if (bases == 8) {
            ck_assert_msg(rc == 0, "8 bases: %s", got);
            ck_assert_int_eq(r.seed, 42);
        } else {
            ck_assert_int_eq(rc, TR_EINVAL);
            ck_assert_str_eq(got, "b8.yaml:1:10: extends: more than 8 levels deep\n");
        }
        free(got);
        tr_diag_free(&diag);
        tr_recipe_free(&r);
    }
}
END_TEST

START_TEST(extends_in_conf_file)
{
    unit_write("base.yaml", "seed: 3\n");
    unit_write("user.conf", "seed: 2\nextends: base.yaml\n");
    unit_write("r.yaml", DATA);
    struct tr_recipe r;
    struct tr_diag diag = {0};
    ck_assert_int_eq(load_files(&r, NULL, "user.conf", "r.yaml", NULL, &diag), TR_EINVAL);
    char *got = unit_diag_text(&diag);
    ck_assert_str_eq(got, "user.conf:2:1: extends is read only in recipe files, not in conf "
                          "files or overrides\n");
    ck_assert_int_eq(r.seed, 2);   /* the base was not read */
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* ---- overrides ------------------------------------------------------------------------------ */

START_TEST(override_scalar_list_mapping)
{
    const char *overrides[] = {"train.batch_size=64", "train.optimizer.betas=[0.9,0.95]",
                               "train.optimizer={name: sgd, lr: 0.1}", NULL};
    struct tr_recipe r;
    load_ok(&r, DATA "train:\n  optimizer: {weight_decay: 0.1, momentum: 0.5}\n", overrides);
    ck_assert_int_eq(r.train.batch_size, 64);
    expect_origin(&r, "train.batch_size", TR_ORIGIN_OVERRIDE, "train.batch_size=64", 0, 0);
    ck_assert_int_eq(r.train.optimizer.betas.n, 2);
    ck_assert_double_eq(r.train.optimizer.betas.v[0], 0.9);
    ck_assert_double_eq(r.train.optimizer.betas.v[1], 0.95);
    expect_origin(&r, "train.optimizer.betas", TR_ORIGIN_OVERRIDE,
                  "train.optimizer.betas=[0.9,0.95]", 0, 0);
    /* A mapping sets the keys it names and leaves its section's others alone. */
    ck_assert_int_eq(r.train.optimizer.name, TR_OPT_SGD);
    ck_assert_double_eq(r.train.optimizer.lr, 0.1);
    expect_origin(&r, "train.optimizer.lr", TR_ORIGIN_OVERRIDE,
                  "train.optimizer={name: sgd, lr: 0.1}", 0, 0);
    ck_assert_double_eq(r.train.optimizer.weight_decay, 0.1);
    expect_origin(&r, "train.optimizer.weight_decay", TR_ORIGIN_RECIPE, "r.yaml", 3, 29);
    tr_recipe_free(&r);
}
END_TEST

/* A scalar for a section sets its shorthand key: data.tokenizer=bytes is data.tokenizer.kind. */
START_TEST(override_shorthand)
{
    const char *overrides[] = {"data.tokenizer=bytes", "report.notify=https://example.com/hook",
                               "optimize.dynamic_batching=off", NULL};
    struct tr_recipe r;
    load_ok(&r, "data: {dataset: wordnet, tokenizer: chars}\n", overrides);
    ck_assert_int_eq(r.data.tokenizer.kind, TR_TOK_BYTES);
    expect_origin(&r, "data.tokenizer.kind", TR_ORIGIN_OVERRIDE, "data.tokenizer=bytes", 0, 0);
    ck_assert_str_eq(r.report.notify.url, "https://example.com/hook");
    ck_assert_int_eq(r.optimize.dynamic_batching.mode, TR_OFF);
    tr_recipe_free(&r);
}
END_TEST

/* ~key sets a key back to its default, and says so in its origin. */
START_TEST(override_reset_key)
{
    const char *overrides[] = {"~train.epochs", NULL};
    struct tr_recipe r;
    load_ok(&r, DATA "train:\n  epochs: 7\n  batch_size: 8\n", overrides);
    ck_assert_int_eq(r.train.epochs, 3);
    expect_origin(&r, "train.epochs", TR_ORIGIN_RESET, "~train.epochs", 0, 0);
    ck_assert_int_eq(r.train.batch_size, 8);
    expect_origin(&r, "train.batch_size", TR_ORIGIN_RECIPE, "r.yaml", 4, 15);
    char *where = tr_origin_describe(&r.origin[tr_key_find("train.epochs")]);
    ck_assert_str_eq(where, "default: reset by override ~train.epochs");
    free(where);
    tr_recipe_free(&r);
}
END_TEST

/* ~section resets every key under it, and nothing beside it. */
START_TEST(override_reset_section)
{
    const char *overrides[] = {"~train.optimizer", NULL};
    struct tr_recipe r;
    load_ok(&r, DATA "train:\n  batch_size: 8\n  optimizer: {name: sgd, lr: 0.5, momentum: 0.8,"
                " betas: [0.5, 0.6]}\n", overrides);
    ck_assert_int_eq(r.train.optimizer.name, TR_OPT_ADAMW);
    ck_assert_double_eq(r.train.optimizer.lr, 5e-5);
    ck_assert_double_eq(r.train.optimizer.momentum, 0.9);
    ck_assert_double_eq(r.train.optimizer.betas.v[0], 0.9);
    for (int i = 0; i < tr_nkeys; i++)
        if (!strncmp(tr_keys[i].path, "train.optimizer.", 16))
            expect_origin(&r, tr_keys[i].path, TR_ORIGIN_RESET, "~train.optimizer", 0, 0);
    ck_assert_int_eq(r.train.batch_size, 8);
    expect_origin(&r, "train.batch_size", TR_ORIGIN_RECIPE, "r.yaml", 3, 15);
    tr_recipe_free(&r);
}
END_TEST

/* key=null makes a nullable key null; section=null resets the section, as the override. */
START_TEST(override_null)
{
    const char *overrides[] = {"train.grad_clip=null", "budget.time=~",
                               "train.schedule=null", NULL};
    struct tr_recipe r;
    load_ok(&r, DATA "budget: {time: 2h}\ntrain:\n  schedule: {name: cosine, warmup: 100}\n",
            overrides);
    ck_assert(is_null(&r, "train.grad_clip"));
    expect_origin(&r, "train.grad_clip", TR_ORIGIN_OVERRIDE, "train.grad_clip=null", 0, 0);
    ck_assert(is_null(&r, "budget.time"));
    ck_assert_int_eq(r.train.schedule.name, TR_SCHED_LINEAR);
    ck_assert(!r.train.schedule.warmup.is_steps);
    expect_origin(&r, "train.schedule.warmup", TR_ORIGIN_OVERRIDE, "train.schedule=null", 0, 0);
    tr_recipe_free(&r);
}
END_TEST

/* train.steps replaces epochs when epochs is the default, reset to it by ~train.epochs or
 * nulled, or set in an earlier layer; validate.c's own advice ("~train.epochs drops epochs")
 * must work. Both in one layer is an error (the bad-input table). */
START_TEST(override_steps_replace_epochs)
{
    const char *steps[] = {"train.steps=500", NULL};
    struct tr_recipe r;
    load_ok(&r, DATA, steps);
    ck_assert_int_eq(r.train.steps, 500);
    ck_assert(is_null(&r, "train.epochs"));
    ck_assert_int_eq(r.origin[tr_key_find("train.epochs")].kind, TR_ORIGIN_DERIVED);
    tr_recipe_free(&r);

    const char *reset[] = {"~train.epochs", NULL};
    load_ok(&r, DATA "train: {epochs: 2, steps: 100}\n", reset);
    ck_assert(is_null(&r, "train.epochs"));
    ck_assert_int_eq(r.train.steps, 100);
    tr_recipe_free(&r);

    const char *null[] = {"train.epochs=null", NULL};
    load_ok(&r, DATA "train: {epochs: 2, steps: 100}\n", null);
    ck_assert(is_null(&r, "train.epochs"));
    tr_recipe_free(&r);

    const char *section[] = {"~train", "train.steps=50", NULL};
    load_ok(&r, DATA "train: {epochs: 2}\n", section);
    ck_assert(is_null(&r, "train.epochs"));
    ck_assert_int_eq(r.train.steps, 50);
    tr_recipe_free(&r);

    /* set in two layers, the later one wins either way round */
    load_ok(&r, DATA "train: {epochs: 2}\n", steps);
    ck_assert(is_null(&r, "train.epochs"));
    ck_assert_int_eq(r.train.steps, 500);
    ck_assert_str_eq(r.origin[tr_key_find("train.epochs")].file, "train.steps is set in a later layer");
    tr_recipe_free(&r);
    const char *epochs[] = {"train.epochs=4", NULL};
    load_ok(&r, DATA "train: {steps: 100}\n", epochs);
    ck_assert(is_null(&r, "train.steps"));
    ck_assert_int_eq(r.train.epochs, 4);
    tr_recipe_free(&r);
}
END_TEST

/* ---- typed values in recipes ---------------------------------------------------------------- */

START_TEST(units_in_recipes)
{
    struct tr_recipe r;
    load_ok(&r, DATA "budget: {memory: 512MiB, time: 1h30m}\n"
                "report: {notify: {url: 'http://h', timeout: 0.5s}}\n"
                "train: {schedule: {warmup: 6%}}\n", NULL);
    ck_assert_uint_eq(r.budget.memory, UINT64_C(512) << 20);
    ck_assert_double_eq(r.budget.time, 5400);
    ck_assert_double_eq(r.report.notify.timeout, 0.5);
    ck_assert(!r.train.schedule.warmup.is_steps);
    ck_assert_double_eq_tol(r.train.schedule.warmup.fraction, 0.06, 1e-15);
    tr_recipe_free(&r);

    load_ok(&r, DATA "budget: {memory: 14 GiB, time: 45}\ntrain: {schedule: {warmup: 500}}\n",
            NULL);
    ck_assert_uint_eq(r.budget.memory, UINT64_C(14) << 30);
    ck_assert_double_eq(r.budget.time, 45);
    ck_assert(r.train.schedule.warmup.is_steps);
    ck_assert_int_eq(r.train.schedule.warmup.steps, 500);
    tr_recipe_free(&r);

    load_ok(&r, DATA "budget: {memory: 1.5e9}\nseed: 9.007199254740992e15\n", NULL);
    ck_assert_uint_eq(r.budget.memory, 1500000000);
    ck_assert_int_eq(r.seed, INT64_C(9007199254740992));   /* not 9: the exponent counts */
    tr_recipe_free(&r);
}
END_TEST

/* Names match whatever their case; booleans mean on/off where those are names; `amp: off` is
 * the name off (YAML 1.1 would read it as false). */
START_TEST(enums_and_booleans)
{
    struct tr_recipe r;
    load_ok(&r, "data:\n  dataset: wordnet\n"
                "  tokenizer: {kind: WordPiece, vocab: v.txt, lowercase: No}\n"
                "  pin_memory: yes\n"
                "model: {arch: GPT, activation: GELU}\n"
                "train: {optimizer: {name: SGD, nesterov: YES}, schedule: Cosine}\n"
                "optimize: {amp: off, checkpointing: Selective, accumulation: AUTO,"
                " dynamic_batching: Off}\n"
                "report: {tensorboard: off}\n", NULL);
    ck_assert_int_eq(r.data.tokenizer.kind, TR_TOK_WORDPIECE);
    ck_assert(!r.data.tokenizer.lowercase);
    ck_assert_int_eq(r.data.pin_memory, TR_ON);
    ck_assert_int_eq(r.model.arch, TR_ARCH_GPT);
    ck_assert_int_eq(r.model.activation, TR_ACT_GELU);
    ck_assert_int_eq(r.train.optimizer.name, TR_OPT_SGD);
    ck_assert(r.train.optimizer.nesterov);
    ck_assert_int_eq(r.train.schedule.name, TR_SCHED_COSINE);
    ck_assert_int_eq(r.optimize.amp, TR_AMP_OFF);
    ck_assert_int_eq(r.optimize.checkpointing.name, TR_CKPT_SELECTIVE);
    ck_assert_int_eq(r.optimize.accumulation.name, 0);
    ck_assert_int_eq(r.optimize.dynamic_batching.mode, TR_OFF);
    ck_assert(!r.report.tensorboard);
    tr_recipe_free(&r);

    load_ok(&r, "data: {dataset: wordnet, tokenizer: bytes, pin_memory: false}\n"
                "optimize: {amp: false, checkpointing: 4, accumulation: 4}\n"
                "report: {tensorboard: True}\n", NULL);
    ck_assert_int_eq(r.optimize.amp, TR_AMP_OFF);
    ck_assert_int_eq(r.optimize.checkpointing.name, -1);
    ck_assert_int_eq(r.optimize.checkpointing.n, 4);
    ck_assert_int_eq(r.optimize.accumulation.name, -1);
    ck_assert_int_eq(r.optimize.accumulation.n, 4);
    ck_assert_int_eq(r.data.pin_memory, TR_OFF);
    ck_assert(r.report.tensorboard);
    tr_recipe_free(&r);
}
END_TEST

/* ---- bad input: the exact messages --------------------------------------------------------------
 * Each row is a recipe written to r.yaml (or file) in the scratch folder, the overrides given
 * after it, and every line `trainrun check` must print, in order. */

struct bad_case {
    const char *yaml;
    const char *overrides[4];
    const char *expected;    /* the tr_diag_line of each problem, each ended by \n */
    const char *file;        /* NULL: r.yaml */
};

static const struct bad_case bad_cases[] = {
    /* Misspelt and unknown keys. */
    {"train:\n  batchsize: 64\n",
     .expected = "r.yaml:2:3: unknown key 'train.batchsize'; did you mean 'train.batch_size'?\n"},
    {"batch_size: 64\n",
     .expected = "r.yaml:1:1: unknown key 'batch_size'; did you mean 'train.batch_size'?\n"},
    {"train:\n  optimiser:\n    lr: 0.001\n",
     .expected = "r.yaml:2:3: unknown key 'train.optimiser'; did you mean 'train.optimizer'?\n"},
    {"optimise: {amp: bf16}\n",
     .expected = "r.yaml:1:1: unknown key 'optimise'; did you mean 'optimize'?\n"},
    {"model: {batch_size: 8}\n",
     .expected = "r.yaml:1:9: unknown key 'model.batch_size'; did you mean "
                 "'train.batch_size'?\n"},
    {"model:\n  colour: red\n",
     .expected = "r.yaml:2:3: unknown key 'model.colour'; valid keys in model are: arch, "
                 "layers, hidden, heads, ffn, max_len, dropout, activation, init\n"},
    {"wandb: true\n",
     .expected = "r.yaml:1:1: unknown key 'wandb'; valid keys at the top are: name, seed, "
                 "device, model, data, train, budget, optimize, report, profile, distributed\n"},

    /* Wrong types. */
    {"model:\n  layers: twelve\n",
     .expected = "r.yaml:2:11: model.layers: expected a whole number from 1 to 1024, got "
                 "'twelve'\n"},
    {"model:\n  layers: \"12\"\n",
     .expected = "r.yaml:2:11: model.layers: expected a whole number from 1 to 1024, got the "
                 "quoted string '12' (remove the quotes)\n"},
    {"budget: {memory: '14GiB'}\n",
     .expected = "r.yaml:1:18: budget.memory: expected a memory size such as 14GiB, 512MiB, "
                 "14GB or 1.5e9 (bytes), from 1MiB to 8192TiB, got the quoted string '14GiB' "
                 "(remove the quotes)\n"},
    {"model: {dropout: \"1.0\"}\n",   /* the quotes are not the problem: no hint */
     .expected = "r.yaml:1:18: model.dropout: expected a number in [0, 1), got the quoted "
                 "string '1.0'\n"},
    {"model:\n  layers: 12.5\n",
     .expected = "r.yaml:2:11: model.layers: expected a whole number from 1 to 1024, got "
                 "'12.5'\n"},
    {"model:\n  layers: [12]\n",
     .expected = "r.yaml:2:11: model.layers: expected a whole number from 1 to 1024, got a "
                 "list of 1\n"},
    {"model:\n  layers: {n: 12}\n",
     .expected = "r.yaml:2:11: model.layers: expected a whole number from 1 to 1024, got a "
                 "mapping\n"},
    {"train: 64\n",
     .expected = "r.yaml:1:8: train is a section: expected a mapping of its keys (batch_size, "
                 "epochs, steps, optimizer, schedule, grad_clip, eval_every, eval_samples, "
                 "checkpoint_every, early_stop), got '64'\n"},
    {"report:\n  tensorboard: maybe\n",
     .expected = "r.yaml:2:16: report.tensorboard: expected true or false, got 'maybe'\n"},
    {"seed: null\n",
     .expected = "r.yaml:1:7: seed: expected a whole number at least 0, got null\n"},
    {"name: ''\n",
     .expected = "r.yaml:1:7: name: expected a non-empty string, or null, got the quoted "
                 "string ''\n"},
    {"data:\n  train:\n    source: x.csv\n    sha256: abc123\n",
     .expected = "r.yaml:4:13: data.train.sha256: expected 64 hexadecimal digits, or null, got "
                 "'abc123'\n"},

    /* Out of range. */
    {"model:\n  dropout: 1.0\n",
     .expected = "r.yaml:2:12: model.dropout: expected a number in [0, 1), got '1.0'\n"},
    {"train:\n  optimizer: {lr: 0}\n",
     .expected = "r.yaml:2:19: train.optimizer.lr: expected a number in (0, 10], got '0'\n"},
    {"train:\n  batch_size: 0\n",
     .expected = "r.yaml:2:15: train.batch_size: expected a whole number from 1 to 16777216, "
                 "got '0'\n"},
    {"train:\n  batch_size: -8\n",
     .expected = "r.yaml:2:15: train.batch_size: expected a whole number from 1 to 16777216, "
                 "got '-8'\n"},
    {"optimize:\n  loss_scale: {backoff: 1}\n",
     .expected = "r.yaml:2:25: optimize.loss_scale.backoff: expected a number in (0, 1), got "
                 "'1'\n"},

    /* Names, sizes, durations, warm-up. */
    {"model:\n  arch: transformer\n",
     .expected = "r.yaml:2:9: model.arch: expected one of mlp, resnet, bert, gpt, got "
                 "'transformer'\n"},
    {"optimize: {amp: on}\n",   /* on is no name of amp's */
     .expected = "r.yaml:1:17: optimize.amp: expected one of auto, off, bf16, fp16, got 'on'\n"},
    {"budget:\n  memory: 14XB\n",
     .expected = "r.yaml:2:11: budget.memory: expected a memory size such as 14GiB, 512MiB, "
                 "14GB or 1.5e9 (bytes), from 1MiB to 8192TiB, got '14XB'\n"},
    {"budget:\n  memory: 1.5B\n",
     .expected = "r.yaml:2:11: budget.memory: expected a memory size such as 14GiB, 512MiB, "
                 "14GB or 1.5e9 (bytes), from 1MiB to 8192TiB, got '1.5B'\n"},
    {"budget:\n  memory: 512KiB\n",
     .expected = "r.yaml:2:11: budget.memory: expected a memory size such as 14GiB, 512MiB, "
                 "14GB or 1.5e9 (bytes), from 1MiB to 8192TiB, got '512KiB'\n"},
    {"budget:\n  time: 1h30\n",
     .expected = "r.yaml:2:9: budget.time: expected a duration such as 45s, 90m, 2h or 1h30m, "
                 "more than 0s and at most 8760h, or null, got '1h30'\n"},
    {"report:\n  notify: {timeout: 0s}\n",
     .expected = "r.yaml:2:21: report.notify.timeout: expected a duration such as 45s, 90m, 2h "
                 "or 1h30m, more than 0s and at most 10m, got '0s'\n"},
    {"report:\n  regression: {metric: -0.01}\n",
     .expected = "r.yaml:2:24: report.regression.metric: expected a number in [0, 1000], got '-0.01'\n"},
    {"report:\n  regression: {time: 2%}\n",
     .expected = "r.yaml:2:22: report.regression.time: expected a number in [0, 1000], got '2%'\n"},
    {"train:\n  schedule: {warmup: 1.5}\n",
     .expected = "r.yaml:2:22: train.schedule.warmup: expected a fraction of the steps below 1 "
                 "(0.06 or 6%) or a whole number of steps (500), got '1.5'\n"},
    {"train:\n  schedule: {warmup: 100%}\n",
     .expected = "r.yaml:2:22: train.schedule.warmup: expected a fraction of the steps below 1 "
                 "(0.06 or 6%) or a whole number of steps (500), got '100%'\n"},
    {"train:\n  schedule: {warmup: 0x10%}\n",
     .expected = "r.yaml:2:22: train.schedule.warmup: expected a fraction of the steps below 1 "
                 "(0.06 or 6%) or a whole number of steps (500), got '0x10%'\n"},

    /* Lists. */
    {"train:\n  optimizer: {betas: [0.9]}\n",
     .expected = "r.yaml:2:22: train.optimizer.betas: expected a list of 2 numbers in [0, 1), "
                 "got a list of 1\n"},
    {"train:\n  optimizer: {betas: [0.9, 1.0]}\n",
     .expected = "r.yaml:2:28: train.optimizer.betas[1]: expected a number in [0, 1), got "
                 "'1.0'\n"},
    {"train:\n  optimizer: {betas: 0.9}\n",
     .expected = "r.yaml:2:22: train.optimizer.betas: expected a list of 2 numbers in [0, 1), "
                 "got '0.9'\n"},
    {"report:\n  notify: {on: [failure, success, failure]}\n",
     .expected = "r.yaml:2:35: report.notify.on[2]: 'failure' is listed twice\n"},
    {"report:\n  notify: {on: [failure, crash]}\n",
     .expected = "r.yaml:2:26: report.notify.on[1]: expected one of failure, regression, "
                 "success, got 'crash'\n"},
    {"report:\n  notify: {on: []}\n",
     .expected = "r.yaml:2:16: report.notify.on: expected a list of distinct names from "
                 "failure, regression, success, got an empty list\n"},

    /* YAML itself. */
    {"train:\n  epochs: 2\n  epochs: 3\n",
     .expected = "r.yaml:3:3: 'epochs' appears twice in this mapping\n"},
    {"model: {layers: 3\n",
     .expected = "r.yaml:2:1: invalid YAML: did not find expected ',' or '}' while parsing a "
                 "flow mapping that starts at 1:8\n"},
    {"seed: 1: 2\n",
     .expected = "r.yaml:1:8: invalid YAML: mapping values are not allowed in this context\n"},
    {"- model\n- train\n",
     .expected = "r.yaml:1:1: expected a mapping of keys (model:, train:, …) at the top, got a "
                 "list\n"},
    {"hello\n",
     .expected = "r.yaml:1:1: expected a mapping of keys (model:, train:, …) at the top, got a "
                 "single value\n"},
    {DATA "---\nseed: 1\n",
     .expected = "r.yaml:2:1: a second YAML document ('---'); a recipe is one mapping\n"},
    {"model:\n\tlayers: 3\n",
     .expected = "r.yaml:2:1: invalid YAML: found character that cannot start any token while "
                 "scanning for the next token (the line is indented with a tab; YAML indents "
                 "with spaces)\n"},
    {"model:\n  layers: 3\n\thidden: 4\n",
     .expected = "r.yaml:3:1: invalid YAML: found a tab character that violates indentation "
                 "while scanning a plain scalar that starts at 2:11\n"},

    /* Rules across keys (validate.c), each placed at the value that breaks it. */
    {DATA "model:\n  hidden: 100\n  heads: 3\n",
     .expected = "r.yaml:4:10: model.heads (3) must divide model.hidden (100)\n"},
    {DATA "model:\n  hidden: 100\n",   /* heads is the default: blame hidden */
     .expected = "r.yaml:3:11: model.heads (12) must divide model.hidden (100)\n"},
    {DATA "train:\n  epochs: 2\n  steps: 1000\n",
     .expected = "r.yaml:4:10: train: set either epochs or steps, not both (train.epochs=null "
                 "or ~train.epochs drops epochs)\n"},
    {DATA "train:\n  steps: 100\n  schedule: {warmup: 500}\n",
     .expected = "r.yaml:4:22: train.schedule.warmup: 500 warm-up steps are more than "
                 "train.steps (100)\n"},
    {"data:\n  tokenizer: bytes\n",
     .expected = "data: no training data; set data.dataset (a folder under datasets/) or "
                 "data.train.source (a file or URL)\n"},
    {"data:\n  dataset: wordnet\n",
     .expected = "model.arch bert reads text: set data.tokenizer to wordpiece, gpt2-bpe, bytes "
                 "or chars\n"},
    {"data:\n  dataset: wordnet\n  train: corpus.txt\n  tokenizer: bytes\n",
     .expected = "r.yaml:3:10: data: give either data.dataset or data.train, not both\n"},
    {"data:\n  dataset: wordnet\n  tokenizer: bytes\n  valid: {text: gloss}\n",
     .expected = "r.yaml:4:17: data.valid.text is set but data.valid.source is not: name the "
                 "file or URL to read\n"},
    {"data:\n  dataset: wordnet\n  tokenizer: wordpiece\n",
     .expected = "r.yaml:3:14: data.tokenizer: wordpiece needs vocab (a BERT vocab.txt)\n"},
    {"data:\n  dataset: wordnet\n  tokenizer:\n    kind: gpt2-bpe\n    vocab: encoder.json\n",
     .expected = "r.yaml:4:11: data.tokenizer: gpt2-bpe needs vocab (encoder.json) and merges "
                 "(vocab.bpe)\n"},
    {"data:\n  dataset: wordnet\n  tokenizer: {kind: bytes, vocab: vocab.txt}\n",
     .expected = "r.yaml:3:35: data.tokenizer: bytes takes no vocab or merges files\n"},
    {DATA "model:\n  init: {path: w.safetensors, from_run: latest}\n",
     .expected = "r.yaml:3:41: model.init: give either a path or from_run, not both\n"},
    {DATA "model:\n  layers: 4\noptimize:\n  checkpointing: 6\n",
     .expected = "r.yaml:5:18: optimize.checkpointing: 6 blocks, but the model has 4 "
                 "(model.layers)\n"},
    {DATA "train:\n  batch_size: 30\noptimize:\n  accumulation: 4\n",
     .expected = "r.yaml:5:17: optimize.accumulation: train.batch_size 30 is not a multiple of "
                 "4 micro-steps\n"},
    {DATA "optimize:\n  dynamic_batching:\n    buckets: [32, 64, 64]\n",
     .expected = "r.yaml:4:14: optimize.dynamic_batching.buckets must increase: 64 follows 64\n"},
    {DATA "model:\n  max_len: 256\noptimize:\n  dynamic_batching: {buckets: [128, 512]}\n",
     .expected = "r.yaml:5:31: optimize.dynamic_batching.buckets: the largest bucket (512) "
                 "exceeds model.max_len (256)\n"},
    {DATA "optimize:\n  dynamic_batching: {mode: off, buckets: [64]}\n",
     .expected = "r.yaml:3:42: optimize.dynamic_batching: buckets are given but mode is off\n"},
    {DATA "optimize:\n  loss_scale: {init: 1024, min: 2048}\n",
     .expected = "r.yaml:3:33: optimize.loss_scale: min (2048) is above init (1024)\n"},
    {DATA "device: gpu0\n",
     .expected = "r.yaml:2:9: device: expected auto, cpu, cuda or cuda:N (N a GPU index), got "
                 "'gpu0'\n"},
    {DATA "device: cuda:1234\n",
     .expected = "r.yaml:2:9: device: expected auto, cpu, cuda or cuda:N (N a GPU index), got "
                 "'cuda:1234'\n"},
    {DATA,
     .expected = "my run.yaml: name 'my run' is not usable as a folder name: use at most 64 "
                 "letters, digits, '.', '_' or '-', not starting with '.' or '-' (it comes "
                 "from the file name; set name:)\n",
     .file = "my run.yaml"},
    {DATA "name: ../up\n",
     .expected = "r.yaml:2:7: name '../up' is not usable as a folder name: use at most 64 "
                 "letters, digits, '.', '_' or '-', not starting with '.' or '-'\n"},
    {DATA "report:\n  notify: mailto:me@example.com\n",
     .expected = "r.yaml:3:11: report.notify.url: expected an http:// or https:// URL, got "
                 "'mailto:me@example.com'\n"},

    /* Overrides. */
    {DATA, .overrides = {"train.epochs"},
     .expected = "override 'train.epochs': expected KEY=VALUE (train.batch_size=64) or ~KEY "
                 "(~train.steps)\n"},
    {DATA, .overrides = {"=64"},
     .expected = "override '=64': expected KEY=VALUE (train.batch_size=64) or ~KEY "
                 "(~train.steps)\n"},
    {DATA, .overrides = {"train.epochs="},
     .expected = "override 'train.epochs=': no value after '='; write train.epochs=null for "
                 "null, or ~train.epochs for the default\n"},
    {DATA, .overrides = {"train.epochs= # none"},
     .expected = "override 'train.epochs= # none': no value after '='; write train.epochs=null "
                 "for null, or ~train.epochs for the default\n"},
    {DATA, .overrides = {"train.optimizer=name: sgd"},
     .expected = "override 'train.optimizer=name: sgd': a value is a YAML scalar or a flow "
                 "collection ([0.9, 0.95] or {name: sgd})\n"},
    {DATA, .overrides = {"train.optimizer.betas=[0.9"},
     .expected = "override 'train.optimizer.betas=[0.9': invalid YAML: did not find expected "
                 "',' or ']' while parsing a flow sequence\n"},
    {DATA, .overrides = {"optimize.ampp=bf16"},
     .expected = "override 'optimize.ampp=bf16': unknown key 'optimize.ampp'; did you mean "
                 "'optimize.amp'?\n"},
    {DATA, .overrides = {"train.optimizer={name: sgd, momentm: 0.8}"},
     .expected = "override 'train.optimizer={name: sgd, momentm: 0.8}': unknown key "
                 "'train.optimizer.momentm'; did you mean 'train.optimizer.momentum'?\n"},
    {DATA, .overrides = {"~train..epochs"},
     .expected = "override '~train..epochs': expected ~KEY, such as ~train.steps\n"},
    {DATA, .overrides = {"~train.epoch"},
     .expected = "override '~train.epoch': unknown key 'train.epoch'; did you mean "
                 "'train.epochs'?\n"},
    {DATA, .overrides = {"~extends"},
     .expected = "override '~extends': extends cannot be removed by an override: it is read only in "
                 "recipe files; edit the recipe, or name the base recipe itself\n"},
    {DATA, .overrides = {"data.dataset=../../evil"},
     .expected = "override 'data.dataset=../../evil': data.dataset: '../../evil' is not a data set name: "
                 "a folder under datasets/, of at most 63 letters, digits, '.', '_' or '-', not starting "
                 "with '.' (no '/')\n"},
    {DATA, .overrides = {"data.dataset=.hidden"},
     .expected = "override 'data.dataset=.hidden': data.dataset: '.hidden' is not a data set name: "
                 "a folder under datasets/, of at most 63 letters, digits, '.', '_' or '-', not starting "
                 "with '.' (no '/')\n"},
    {DATA, .overrides = {"extends=base.yaml"},
     .expected = "override 'extends=base.yaml': extends is read only in recipe files\n"},
    {DATA, .overrides = {"model.layers=0"},
     .expected = "override 'model.layers=0': model.layers: expected a whole number from 1 to "
                 "1024, got '0'\n"},
    {DATA, .overrides = {"train.epochs=null"},
     .expected = "override 'train.epochs=null': train: set epochs or steps; both are null\n"},
    {DATA, .overrides = {"model.heads=5"},
     .expected = "override 'model.heads=5': model.heads (5) must divide model.hidden (768)\n"},

    /* Several problems: all reported in one run, recipe first, then overrides in order. */
    {"model:\n  layers: 0\n  arch: rnn\ntrain:\n  batchsize: 3\n  optimizer: {betas: [0.9, 1]}\n",
     .overrides = {"budget.memory=lots", "seed=-1"},
     .expected = "r.yaml:2:11: model.layers: expected a whole number from 1 to 1024, got '0'\n"
                 "r.yaml:3:9: model.arch: expected one of mlp, resnet, bert, gpt, got 'rnn'\n"
                 "r.yaml:5:3: unknown key 'train.batchsize'; did you mean 'train.batch_size'?\n"
                 "r.yaml:6:28: train.optimizer.betas[1]: expected a number in [0, 1), got '1'\n"
                 "override 'budget.memory=lots': budget.memory: expected a memory size such as "
                 "14GiB, 512MiB, 14GB or 1.5e9 (bytes), from 1MiB to 8192TiB, got 'lots'\n"
                 "override 'seed=-1': seed: expected a whole number at least 0, got '-1'\n"},
    {"data:\n  dataset: wordnet\n  tokenizer: wordpiece\nmodel: {hidden: 100}\n"
     "optimize: {accumulation: 3}\n",
     .expected = "r.yaml:4:17: model.heads (12) must divide model.hidden (100)\n"
                 "r.yaml:3:14: data.tokenizer: wordpiece needs vocab (a BERT vocab.txt)\n"
                 "r.yaml:5:26: optimize.accumulation: train.batch_size 32 is not a multiple of "
                 "3 micro-steps\n"},
};

START_TEST(bad_input)
{
    const struct bad_case *c = &bad_cases[_i];
    const char *file = c->file ? c->file : "r.yaml";
    unit_write(file, c->yaml);
    struct tr_recipe r;
    struct tr_diag diag = {0};
    int rc = load_files(&r, NULL, NULL, file, c->overrides, &diag);
    char *got = unit_diag_text(&diag);
    ck_assert_msg(rc == TR_EINVAL, "row %d loaded (rc %d):\n%s", _i, rc, c->yaml);
    ck_assert_msg(!strcmp(got, c->expected), "row %d:\n%s\ngot:\n%sexpected:\n%s", _i, c->yaml,
                  got, c->expected);
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* The messages are lines: one diag line never holds a newline, however the value was written. */
START_TEST(messages_stay_on_one_line)
{
    struct tr_recipe r;
    struct tr_diag diag = {0};
    load_text(&r, "model:\n  arch: \"two\\nlines\\tand a tab\"\nseed: \"" 
                  "an extremely long value that goes on well past sixty bytes of text\"\n",
              NULL, &diag);
    char *got = unit_diag_text(&diag);
    ck_assert_str_eq(got,
        "r.yaml:2:9: model.arch: expected one of mlp, resnet, bert, gpt, got the quoted string "
        "'two lines and a tab'\n"
        "r.yaml:3:7: seed: expected a whole number at least 0, got the quoted string 'an "
        "extremely long value that goes on well past sixty bytes o…'\n");
    free(got);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* A hundred messages help nobody: past 99 the loader says it stopped, and stops. */
START_TEST(messages_capped)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < 150; i++)
        fprintf(f, "k%d: 1\n", i);
    fclose(f);
    struct tr_recipe r;
    struct tr_diag diag = {0};
    ck_assert_int_eq(load_text(&r, text, NULL, &diag), TR_EINVAL);
    ck_assert_int_eq(diag.n, 100);
    char *line = tr_diag_line(&diag, 98);
    ck_assert_str_eq(line, "r.yaml:99:1: unknown key 'k98'; valid keys at the top are: name, "
                           "seed, device, model, data, train, budget, optimize, report, profile, distributed");
    free(line);
    line = tr_diag_line(&diag, 99);
    ck_assert_str_eq(line, "r.yaml:100:1: too many errors; stopping here");
    free(line);
    free(text);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
}
END_TEST

/* text of n opening brackets after prefix, and their n closing ones (caller frees). */
static char *nested(const char *prefix, size_t n)
{
    size_t p = strlen(prefix);
    char *t = malloc(p + 2 * n + 2);
    memcpy(t, prefix, p);
    memset(t + p, '[', n);
    memset(t + p + n, ']', n);
    strcpy(t + p + 2 * n, "\n");
    return t;
}

static char *first_line(const char *yaml, const char *const *overrides)
{
    struct tr_recipe r;
    struct tr_diag diag = {0};
    ck_assert_int_eq(load_text(&r, yaml, overrides, &diag), TR_EINVAL);
    char *line = tr_diag_line(&diag, 0);
    tr_diag_free(&diag);
    tr_recipe_free(&r);
    return line;
}

/* libyaml's scanner is quadratic in nesting (1 MiB of [[[…]]] took over 900 s, a 120 KB
 * override 17.7 s) and its composer in anchors: past 64 levels, 100,000 values (aliases
 * expanded: "billion laughs"), 256 anchors or 4,096 aliases, the text is refused at the place
 * it went past, before it is composed. */
START_TEST(yaml_limits)
{
    char *text = nested("model: ", 63), *line = first_line(text, NULL);   /* 64 levels: read */
    ck_assert_msg(strstr(line, "r.yaml:1:8: model is a section") && strstr(line, "got a list of 1"), "%s", line);
    free(line), free(text);
    text = nested("model: ", (1 << 20) / 2 - 8), line = first_line(text, NULL);
    ck_assert_str_eq(line, "r.yaml:1:71: invalid YAML: collections nested more than 64 levels deep; "
                           "trainrun reads at most 64");
    free(line), free(text);
    text = nested("model.layers=", 120 * 1024 / 2);
    text[strlen(text) - 1] = '\0';
    line = first_line("model: {arch: mlp}\n", (const char *const[]){text, NULL});
    ck_assert_ptr_nonnull(strstr(line, "': invalid YAML: collections nested more than 64 levels deep"));
    free(line), free(text);
    char *deep = nested("", 63);   /* 63 [ then 63 ]: an alias inside makes 65 levels with b's own */
    text = tr_strdup_printf("a: &a [1]\nb: %.63s*a%s", deep, deep + 63);
    free(deep);
    line = first_line(text, NULL);
    free(text);
    ck_assert_str_eq(line, "r.yaml:2:67: invalid YAML: an alias whose value would nest more than 64 "
                           "levels deep; trainrun reads at most 64");
    free(line);

    char *laughs = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&laughs, &len);
    fprintf(f, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 10; i++)
        fprintf(f, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i,
                i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
    fclose(f);
    line = first_line(laughs, NULL);
    ck_assert_str_eq(line, "r.yaml:5:45: invalid YAML: more than 100000 values, counting all that aliases repeat");
    free(line), free(laughs);

    f = open_memstream(&laughs, &len);
    for (int i = 0; i < 257; i++)
        fprintf(f, "- &a%d x\n", i);
    fclose(f);
    line = first_line(laughs, NULL);
    ck_assert_str_eq(line, "r.yaml:257:3: invalid YAML: more than 256 anchors (&name)");
    free(line), free(laughs);

    f = open_memstream(&laughs, &len);
    fprintf(f, "- &a x\n");
    for (int i = 0; i < 4097; i++)
        fprintf(f, "- *a\n");
    fclose(f);
    line = first_line(laughs, NULL);
    ck_assert_str_eq(line, "r.yaml:4098:3: invalid YAML: more than 4096 aliases (*name)");
    free(line), free(laughs);
}
END_TEST

/* data.num_workers: auto is half the cores, at least 1 (the seed's 50–75 %, its lower end: the
 * step's threads share the cores); a number stays the number. */
START_TEST(num_workers_auto_from_cores)
{
    ck_assert_int_eq(tr_num_workers_auto(1), 1);
    ck_assert_int_eq(tr_num_workers_auto(2), 1);
    ck_assert_int_eq(tr_num_workers_auto(3), 1);
    ck_assert_int_eq(tr_num_workers_auto(16), 8);
    ck_assert_int_ge(tr_num_workers_auto(0), 1);   /* this host's */
    struct tr_recipe r;
    load_ok(&r, "name: t\n" DATA, (const char *const[]){"data.num_workers=auto", NULL});
    ck_assert_int_eq(tr_recipe_num_workers(&r, 12), 6);
    tr_recipe_free(&r);
    load_ok(&r, "name: t\n" DATA, (const char *const[]){"data.num_workers=5", NULL});
    ck_assert_int_eq(tr_recipe_num_workers(&r, 12), 5);
    tr_recipe_free(&r);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *recipe_suite(void)
{
    Suite *s = suite_create("recipe");
    TCase *tc = tcase_create("defaults");
    tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
    tcase_add_test(tc, defaults_documented);
    tcase_add_test(tc, num_workers_auto_from_cores);
    tcase_add_test(tc, each_default_reads_back);
    tcase_add_test(tc, defaults_round_trip);
    tcase_add_test(tc, full_round_trip);
    suite_add_tcase(s, tc);

    tc = tcase_create("layering");
    tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
    tcase_add_test(tc, layering_values_and_origins);
    tcase_add_test(tc, layering_missing_files);
    tcase_add_test(tc, layering_errors_from_every_layer);
    suite_add_tcase(s, tc);

    tc = tcase_create("extends");
    tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
    tcase_add_test(tc, extends_relative_and_chained);
    tcase_add_test(tc, extends_absolute_path);
    tcase_add_loop_test(tc, extends_fails, 0, N(extends_failures));
    tcase_add_test(tc, extends_depth);
    tcase_add_test(tc, extends_in_conf_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("overrides");
    tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
    tcase_add_test(tc, override_scalar_list_mapping);
    tcase_add_test(tc, override_shorthand);
    tcase_add_test(tc, override_reset_key);
    tcase_add_test(tc, override_reset_section);
    tcase_add_test(tc, override_null);
    tcase_add_test(tc, override_steps_replace_epochs);
    suite_add_tcase(s, tc);

    tc = tcase_create("values");
    tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
    tcase_add_test(tc, units_in_recipes);
    tcase_add_test(tc, enums_and_booleans);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
    tcase_add_loop_test(tc, bad_input, 0, N(bad_cases));
    tcase_add_test(tc, messages_stay_on_one_line);
    tcase_add_test(tc, messages_capped);
    tcase_add_test(tc, yaml_limits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(recipe_suite());
}
