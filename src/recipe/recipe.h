/* The recipe: what to train and within what (DESIGN.md §9). First stage of the pipeline:
 * YAML files, conf files and key=value overrides become one typed struct tr_recipe, each
 * value remembering where it came from. Later stages read the struct, never the YAML. */
#ifndef TR_RECIPE_H
#define TR_RECIPE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

#define TR_LIST_MAX 16

struct tr_ints   { int n; int64_t v[TR_LIST_MAX]; };
struct tr_floats { int n; double v[TR_LIST_MAX]; };
struct tr_strs   { int n; char *v[TR_LIST_MAX]; };   /* owned by the recipe */
/* "auto | off | … | <number>": name is an index into the key's names, or -1 for a number. */
struct tr_choice { int name; int64_t n; };
/* Warm-up: a fraction of the training steps (0.06) or a number of steps (500). */
struct tr_warmup { bool is_steps; double fraction; int64_t steps; };

/* Enumerations: their order is the order of the names in schema.c. */
enum tr_arch       { TR_ARCH_MLP, TR_ARCH_RESNET, TR_ARCH_BERT, TR_ARCH_GPT };
enum tr_activation { TR_ACT_AUTO, TR_ACT_RELU, TR_ACT_GELU, TR_ACT_GELU_TANH, TR_ACT_TANH };
enum tr_from_run   { TR_FROM_RUN_NONE, TR_FROM_RUN_PROMOTED, TR_FROM_RUN_LATEST };
enum tr_format     { TR_FMT_AUTO, TR_FMT_CSV, TR_FMT_TSV, TR_FMT_JSONL, TR_FMT_TEXT, TR_FMT_IDX, TR_FMT_BIN };
/* A csv table's header line (data.train.header; a definition's header: takes these and more). */
enum tr_table_header { TR_TABLE_HEADER_AUTO, TR_TABLE_HEADER_TRUE, TR_TABLE_HEADER_FALSE, TR_TABLE_HEADER_SKLEARN };
/* What a csv table's missing cell (empty, NA, N/A, NaN, nan, ?) becomes. */
enum tr_missing { TR_MISSING_REFUSE, TR_MISSING_DROP, TR_MISSING_ZERO, TR_MISSING_MEAN };
enum tr_tokenizer_kind { TR_TOK_NONE, TR_TOK_BYTES, TR_TOK_CHARS, TR_TOK_WORDPIECE, TR_TOK_GPT2_BPE };
enum tr_tristate   { TR_AUTO, TR_OFF, TR_ON };
enum tr_optimizer  { TR_OPT_ADAMW, TR_OPT_SGD, TR_OPT_LION };
enum { TR_OPT_COUNT = TR_OPT_LION + 1 };          /* their descriptors: recipe/optimizers.h */
enum tr_schedule   { TR_SCHED_CONSTANT, TR_SCHED_LINEAR, TR_SCHED_COSINE };
enum tr_amp        { TR_AMP_AUTO, TR_AMP_OFF, TR_AMP_BF16, TR_AMP_FP16 };
enum tr_parallel_mode { TR_PARALLEL_AUTO, TR_PARALLEL_DATA };   /* how the model spreads over ranks */
enum tr_shard_mode { TR_SHARD_AUTO, TR_SHARD_OFF, TR_SHARD_OPTIMIZER, TR_SHARD_GRADIENTS, TR_SHARD_PARAMETERS };   /* ZeRO: what ranks split */
enum tr_switch     { TR_SWITCH_AUTO, TR_SWITCH_ON, TR_SWITCH_OFF };
/* optimize.offload: what lives in the host's memory instead of the device's */
enum tr_offload_mode { TR_OFFLOAD_AUTO, TR_OFFLOAD_OFF, TR_OFFLOAD_OPTIMIZER, TR_OFFLOAD_ACTIVATIONS, TR_OFFLOAD_BOTH };
enum tr_ckpt       { TR_CKPT_AUTO, TR_CKPT_OFF, TR_CKPT_SELECTIVE, TR_CKPT_FULL };
enum tr_notify_on  { TR_NOTIFY_FAILURE, TR_NOTIFY_REGRESSION, TR_NOTIFY_SUCCESS };
enum tr_stop_metric { TR_STOP_NONE, TR_STOP_EVAL_LOSS, TR_STOP_EVAL_ACCURACY };
enum tr_stop_mode  { TR_STOP_AUTO, TR_STOP_MIN, TR_STOP_MAX };
enum tr_promote_mode { TR_PROMOTE_AUTO, TR_PROMOTE_MIN, TR_PROMOTE_MAX };

/* An inline data source (data.train / data.valid / data.test). */
struct tr_source {
    char *source;      /* path, file:// or http(s):// URL; NULL: not given */
    char *sha256;      /* 64 hex digits, or NULL */
    int format;        /* enum tr_format */
    char *text;        /* field holding the input text (or features) */
    char *label;       /* field holding the label */
    int header;        /* csv: enum tr_table_header */
    int missing;       /* csv: enum tr_missing */
};

/* Where a value came from, lowest to highest precedence. */
enum tr_origin_kind {
    TR_ORIGIN_DEFAULT,
    TR_ORIGIN_SYSTEM_CONF,
    TR_ORIGIN_USER_CONF,
    TR_ORIGIN_RECIPE,
    TR_ORIGIN_OVERRIDE,
    TR_ORIGIN_RESET,      /* set back to the default by a ~key override */
    TR_ORIGIN_DERIVED,    /* follows from another value; file holds the reason (static text) */
};

struct tr_origin {
    enum tr_origin_kind kind;
    const char *file;     /* conf or recipe file (owned by the recipe); the override text */
    int line, col;
};

#define TR_NKEYS_MAX 128

struct tr_recipe {
    char *name;
    int64_t seed;
    char *device;
    struct {
        int arch;
        int64_t layers, hidden, heads, ffn, max_len;
        double dropout;
        int activation;
        struct { char *path; int from_run; } init;
    } model;
    struct {
        char *dataset;
        struct tr_source train, valid, test;
        struct { int kind; char *vocab, *merges; bool lowercase; } tokenizer;
        struct tr_choice num_workers;     /* auto (name 0: tr_recipe_num_workers), or a number */
        int64_t prefetch_factor;
        int pin_memory;   /* enum tr_tristate */
        bool shuffle;
        uint64_t max_download;    /* bytes; 0 when null (no cap but the disk's) */
        double prepare_timeout;   /* seconds; 0 when null (no limit) */
    } data;
    struct {
        int64_t batch_size, epochs, steps;   /* exactly one is null (0): epochs or steps */
        struct {
            int name;
            double lr, weight_decay, eps, momentum;
            struct tr_floats betas;
            bool nesterov;
        } optimizer;
        struct { int name; struct tr_warmup warmup; double min_lr; } schedule;
        double grad_clip;                    /* 0 when null (no clipping) */
        int64_t eval_every, checkpoint_every;
        int64_t eval_samples;                /* 0 when null: every sample */
        struct { int metric, mode; int64_t patience; double min_delta; } early_stop;
    } train;
    struct {
        uint64_t memory;   /* bytes */
        uint64_t host_memory;   /* bytes of the host's memory offloading may take; 0 when null
                                 * (what the machine can spare, measured) */
        double time;       /* seconds; 0 when null (no limit) */
    } budget;
    struct {
        int amp;
        struct { double init, growth, backoff, min; int64_t interval, hysteresis; } loss_scale;
        struct tr_choice checkpointing;       /* enum tr_ckpt, or a number of blocks */
        struct { int mode; struct tr_ints buckets; int64_t pool, tokens; } dynamic_batching;
        struct tr_choice accumulation;        /* auto (name 0), or a number of micro-steps */
        int shard;                            /* enum tr_shard_mode */
        struct { int mode; int64_t pipeline, tensor; int sequence; } parallel;
              /* mode: enum tr_parallel_mode; pipeline, tensor 0 when null; sequence: enum tr_switch */
        int offload;                          /* enum tr_offload_mode */
        struct tr_choice offload_blocks;      /* auto (name 0), or activation offload's blocks */
        struct tr_choice offload_largest;     /* auto (name 0), or the percent of the offloaded
                                               * activations' bytes the largest of them make */
    } optimize;
    struct {
        char *dir;
        int64_t log_every;
        bool tensorboard;
        int64_t histograms_every;
        double flush_every;   /* seconds */
        struct { char *url; struct tr_ints on; struct tr_strs headers_from_env; double timeout; } notify;
        struct { double metric, time, memory; } regression;   /* fractions: 0.02 is 2 % */
        /* nightly runs: how many run folders stay, and the gate a finished run passes to
         * become the promoted one */
        int64_t keep;      /* 0 when null: keep all */
        struct { char *metric; int mode; double min_delta; } promote;   /* metric NULL: the key metric */
        char *prometheus;  /* the metrics textfile; NULL when null: report.dir/NAME/trainrun.prom */
        double monitor_every;   /* seconds between the sampler's readings (report/monitor.h); 0: off */
    } report;
    /* per-op traces of chosen steps (report/trace.h): torch.profiler.schedule's numbers; active 0
     * is off */
    struct { int64_t skip_first, wait, warmup, active, repeat; } profile;
    /* across ranks (dist/): the gradients' buckets, bytes */
    struct { uint64_t bucket; double timeout; int overlap; } distributed;   /* overlap: enum tr_switch */
      /* timeout: seconds, 0 none */

    /* Per key (index into the schema): where its value came from, and whether it is null. */
    struct tr_origin origin[TR_NKEYS_MAX];
    bool is_null[TR_NKEYS_MAX];
    char **files;         /* file names and override texts that origins point to, owned */
    int nfiles, capfiles;
    char *recipe_file;    /* the recipe given on the command line, or NULL */
};

/* The layers to load, lowest first after the built-in defaults. Any may be NULL. */
struct tr_recipe_sources {
    const char *system_conf;   /* $(sysconfdir)/trainrun.conf; missing is fine */
    const char *user_conf;     /* ~/.config/trainrun/trainrun.conf or $TRAINRUN_CONF */
    bool user_conf_required;   /* true when named by $TRAINRUN_CONF: missing is an error */
    const char *recipe;        /* the recipe file (may use extends:) */
    char *const *overrides;    /* "a.b=value" or "~a.b" */
    int noverrides;
};

/* Fills the defaults, then applies each layer; collects every problem into diag.
 * Returns 0, or TR_EINVAL when diag holds errors (the recipe is then unusable). */
/* data.num_workers as a number: `auto` is half of the cores online (at least 1), the lower end of
 * the seed's 50–75 %: the step's own threads run on the same cores. cores ≤ 0: asks the system. */
int64_t tr_recipe_num_workers(const struct tr_recipe *r, long cores);
int64_t tr_num_workers_auto(long cores);   /* what `auto` is on a host of that many cores */

int tr_recipe_load(struct tr_recipe *r, const struct tr_recipe_sources *src, struct tr_diag *diag);
/* The same from in-memory YAML, for tests and the fuzzer ("file" names it in messages). */
int tr_recipe_load_string(struct tr_recipe *r, const char *yaml, size_t len, const char *file,
                          char *const *overrides, int noverrides, struct tr_diag *diag);
void tr_recipe_init(struct tr_recipe *r);   /* built-in defaults only */
void tr_recipe_free(struct tr_recipe *r);

/* The conf file paths that apply now: $TRAINRUN_SYSTEM_CONF or $(sysconfdir)/trainrun.conf;
 * $TRAINRUN_CONF, else $XDG_CONFIG_HOME or ~/.config, /trainrun/trainrun.conf. The paths are
 * kept in the caller's system and user; 0, or TR_EINVAL when one is too long (in d). */
int tr_recipe_default_sources(struct tr_recipe_sources *src, struct tr_path *system, struct tr_path *user,
                              struct tr_diag *d);

/* Output for `trainrun check`. */
void tr_recipe_write_yaml(const struct tr_recipe *r, FILE *out);
char *tr_recipe_to_json(const struct tr_recipe *r);   /* caller frees */
/* "recipes/x.yaml:3:9", "override", "default", …; caller frees. */
char *tr_origin_describe(const struct tr_origin *o);

#endif
