/* Every recipe key, in the order `trainrun check` prints them (DESIGN.md §9). Keys of a
 * section stay together. man/trainrun-recipe.5 documents each row; a test keeps them in step. */
#include "recipe/schema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "recipe/optimizers.h"
#include "recipe/recipe.h"
#include "recipe/units.h"

#define OFF(field) offsetof(struct tr_recipe, field)
#define BIG 9007199254740992.0   /* 2^53: the largest whole number a double holds exactly */

static const char *const arch_names[] = {"mlp", "resnet", "bert", "gpt", NULL};
static const char *const activation_names[] = {"auto", "relu", "gelu", "gelu_tanh", "tanh", NULL};
static const char *const from_run_names[] = {"none", "promoted", "latest", NULL};
static const char *const format_names[] = {"auto", "csv", "tsv", "jsonl", "text", "idx", "bin", NULL};
static const char *const header_names[] = {"auto", "true", "false", "sklearn", NULL};   /* enum tr_table_header */
static const char *const missing_names[] = {"refuse", "drop", "zero", "mean", NULL};     /* enum tr_missing */
static const char *const tokenizer_names[] = {"none", "bytes", "chars", "wordpiece", "gpt2-bpe", NULL};
static const char *const tristate_names[] = {"auto", "off", "on", NULL};
static const char *const parallel_names[] = {"auto", "data", NULL};   /* enum tr_parallel_mode */
static const char *const schedule_names[] = {"constant", "linear", "cosine", NULL};
static const char *const amp_names[] = {"auto", "off", "bf16", "fp16", NULL};
static const char *const shard_names[] = {"auto", "off", "optimizer", "gradients", "parameters", NULL};   /* enum tr_shard_mode */
static const char *const switch_names[] = {"auto", "on", "off", NULL};         /* enum tr_switch */
static const char *const offload_names[] = {"auto", "off", "optimizer", "activations", "both", NULL};   /* enum tr_offload_mode */
static const char *const ckpt_names[] = {"auto", "off", "selective", "full", NULL};
static const char *const auto_names[] = {"auto", NULL};
static const char *const notify_names[] = {"failure", "regression", "success", NULL};
static const char *const stop_metric_names[] = {"none", "eval.loss", "eval.accuracy", NULL};
static const char *const stop_mode_names[] = {"auto", "min", "max", NULL};
static const char *const promote_mode_names[] = {"auto", "min", "max", NULL};

#define SOURCE_KEYS(split, what)                                                              \
    {"data." split ".source", TR_T_STR, OFF(data.what.source), "null", 0, 0, NULL,             \
     TR_NULLABLE | TR_SHORTHAND, 0, 0,                                                        \
     "the " split " data: a path, file:// or http(s):// URL (null: from data.dataset)"},       \
    {"data." split ".sha256", TR_T_SHA256, OFF(data.what.sha256), "null", 0, 0, NULL,          \
     TR_NULLABLE, 0, 0, "the SHA-256 of the decompressed content, checked on every read (null: not checked)"},   \
    {"data." split ".format", TR_T_ENUM, OFF(data.what.format), "auto", 0, 0, format_names, 0, \
     0, 0, "file format; auto: from the file name's extension"},                              \
    {"data." split ".text", TR_T_STR, OFF(data.what.text), "null", 0, 0, NULL, TR_NULLABLE, 0, \
     0, "the field (column, JSON key) holding the input"},                                    \
    {"data." split ".label", TR_T_STR, OFF(data.what.label), "null", 0, 0, NULL, TR_NULLABLE,  \
     0, 0, "the field holding the label (null for language modelling)"},                       \
    {"data." split ".header", TR_T_ENUM, OFF(data.what.header), "auto", 0, 0, header_names, 0, \
     0, 0, "csv: whether the first line names the columns (auto: when a word stands above a number)"}, \
    {"data." split ".missing", TR_T_ENUM, OFF(data.what.missing), "refuse", 0, 0, missing_names, \
     0, 0, 0, "csv: an empty or NA cell is refused, drops its row, or becomes zero or its column's mean"}

const struct tr_key tr_keys[] = {
    {"name", TR_T_STR, OFF(name), "null", 0, 0, NULL, TR_NULLABLE, 0, 0,
     "the run folder's name under report.dir (null: the recipe file's name)"},
    {"seed", TR_T_INT, OFF(seed), "1234", 0, BIG, NULL, 0, 0, 0,
     "seed of every random choice: initialisation, shuffling, dropout"},
    {"device", TR_T_STR, OFF(device), "auto", 0, 0, NULL, 0, 0, 0,
     "auto, cpu, cuda or cuda:N (auto: the first GPU if one is seen, else the CPU)"},

    {"model.arch", TR_T_ENUM, OFF(model.arch), "bert", 0, 0, arch_names, 0, 0, 0,
     "the architecture"},
    {"model.layers", TR_T_INT, OFF(model.layers), "12", 1, 1024, NULL, 0, 0, 0,
     "blocks: transformer layers, residual blocks, or hidden layers of the MLP"},
    {"model.hidden", TR_T_INT, OFF(model.hidden), "768", 1, 1048576, NULL, 0, 0, 0,
     "width: model dimension, base channel count, or MLP hidden width"},
    {"model.heads", TR_T_INT, OFF(model.heads), "12", 1, 1024, NULL, 0, 0, 0,
     "attention heads (bert, gpt); must divide model.hidden"},
    {"model.ffn", TR_T_INT, OFF(model.ffn), "3072", 1, 4194304, NULL, 0, 0, 0,
     "inner width of the feed-forward sublayer (bert, gpt)"},
    {"model.max_len", TR_T_INT, OFF(model.max_len), "128", 1, 1048576, NULL, 0, 0, 0,
     "longest sequence in tokens; longer inputs are truncated"},
    {"model.dropout", TR_T_FLOAT, OFF(model.dropout), "0.1", 0, 1, NULL, TR_MAX_OPEN, 0, 0,
     "dropout probability"},
    {"model.activation", TR_T_ENUM, OFF(model.activation), "auto", 0, 0, activation_names, 0, 0,
     0, "activation; auto: the architecture's own (gelu for bert/gpt, relu otherwise)"},
    {"model.init.path", TR_T_STR, OFF(model.init.path), "null", 0, 0, NULL,
     TR_NULLABLE | TR_SHORTHAND, 0, 0,
     "start from these weights: a .safetensors file (Hugging Face names accepted)"},
    {"model.init.from_run", TR_T_ENUM, OFF(model.init.from_run), "none", 0, 0, from_run_names,
     0, 0, 0, "start from the final weights of this recipe's promoted or latest run"},

    {"data.dataset", TR_T_STR, OFF(data.dataset), "null", 0, 0, NULL, TR_NULLABLE, 0, 0,
     "a data set defined once under datasets/NAME/dataset.yaml"},
    SOURCE_KEYS("train", train),
    SOURCE_KEYS("valid", valid),
    SOURCE_KEYS("test", test),
    {"data.tokenizer.kind", TR_T_ENUM, OFF(data.tokenizer.kind), "none", 0, 0, tokenizer_names,
     TR_SHORTHAND, 0, 0, "how text becomes tokens (none: the data is numeric)"},
    {"data.tokenizer.vocab", TR_T_STR, OFF(data.tokenizer.vocab), "null", 0, 0, NULL,
     TR_NULLABLE, 0, 0, "vocabulary: BERT vocab.txt or GPT-2 encoder.json"},
    {"data.tokenizer.merges", TR_T_STR, OFF(data.tokenizer.merges), "null", 0, 0, NULL,
     TR_NULLABLE, 0, 0, "GPT-2 merges file (vocab.bpe)"},
    {"data.tokenizer.lowercase", TR_T_BOOL, OFF(data.tokenizer.lowercase), "true", 0, 0, NULL,
     0, 0, 0, "lower-case and strip accents before WordPiece (uncased vocabularies)"},
    {"data.num_workers", TR_T_CHOICE, OFF(data.num_workers), "2", 0, 256, auto_names, 0, 0, 0,
     "loader threads: auto (half the cores, at least 1), or a number (0: load in the training thread)"},
    {"data.prefetch_factor", TR_T_INT, OFF(data.prefetch_factor), "2", 1, 64, NULL, 0, 0, 0,
     "batches each loader thread prepares ahead"},
    {"data.pin_memory", TR_T_ENUM, OFF(data.pin_memory), "auto", 0, 0, tristate_names, 0, 0, 0,
     "page-locked loader buffers (auto: on when training on a GPU)"},
    {"data.shuffle", TR_T_BOOL, OFF(data.shuffle), "true", 0, 0, NULL, 0, 0, 0,
     "a new order of the training samples every epoch, from the seed (false: the split's order)"},
    {"data.max_download", TR_T_SIZE, OFF(data.max_download), "4GiB", 1, BIG, NULL, TR_NULLABLE, 0, 0,
     "the largest file a URL source may bring (null: no cap but the disk's, 1 GiB kept free)"},
    {"data.prepare_timeout", TR_T_DURATION, OFF(data.prepare_timeout), "30m", 0, 31536000, NULL,
     TR_NULLABLE | TR_MIN_OPEN, 0, 0,
     "how long a data set's prepare script may run before it and its processes are ended (null: no limit)"},

    {"train.batch_size", TR_T_INT, OFF(train.batch_size), "32", 1, 16777216, NULL, 0, 0, 0,
     "the target (effective) batch per optimizer step, in samples"},
    {"train.epochs", TR_T_INT, OFF(train.epochs), "3", 1, 1000000, NULL, TR_NULLABLE, 0, 0,
     "passes over the training data (null when train.steps is set: a default 3 gives way)"},
    {"train.steps", TR_T_INT, OFF(train.steps), "null", 1, BIG, NULL, TR_NULLABLE, 0, 0,
     "optimizer steps to train for (null: train by epochs)"},
    {"train.optimizer.name", TR_T_ENUM, OFF(train.optimizer.name), "adamw", 0, 0,
     tr_optimizer_names, TR_SHORTHAND, 0, 0, "the optimizer"},
    {"train.optimizer.lr", TR_T_FLOAT, OFF(train.optimizer.lr), "5.0e-5", 0, 10, NULL,
     TR_MIN_OPEN, 0, 0, "peak learning rate"},
    {"train.optimizer.weight_decay", TR_T_FLOAT, OFF(train.optimizer.weight_decay), "0.01", 0,
     10, NULL, 0, 0, 0, "decoupled weight decay (adamw) or L2 penalty (sgd)"},
    {"train.optimizer.betas", TR_T_FLOATS, OFF(train.optimizer.betas), "[0.9, 0.999]", 0, 1,
     NULL, TR_MAX_OPEN, 2, 2, "adamw's moment decay rates"},
    {"train.optimizer.eps", TR_T_FLOAT, OFF(train.optimizer.eps), "1.0e-8", 0, 1, NULL,
     TR_MIN_OPEN, 0, 0, "adamw's denominator term"},
    {"train.optimizer.momentum", TR_T_FLOAT, OFF(train.optimizer.momentum), "0.9", 0, 1, NULL,
     TR_MAX_OPEN, 0, 0, "sgd's momentum (0: plain SGD)"},
    {"train.optimizer.nesterov", TR_T_BOOL, OFF(train.optimizer.nesterov), "false", 0, 0, NULL,
     0, 0, 0, "sgd: Nesterov momentum"},
    {"train.schedule.name", TR_T_ENUM, OFF(train.schedule.name), "linear", 0, 0,
     schedule_names, TR_SHORTHAND, 0, 0,
     "learning-rate schedule after warm-up: constant, linear decay to 0, or cosine"},
    {"train.schedule.warmup", TR_T_WARMUP, OFF(train.schedule.warmup), "0.06", 0, BIG, NULL, 0,
     0, 0, "linear warm-up: a fraction of all steps (0.06, 6%) or a number of steps (500)"},
    {"train.grad_clip", TR_T_FLOAT, OFF(train.grad_clip), "1.0", 0, 1e6, NULL,
     TR_NULLABLE | TR_MIN_OPEN, 0, 0, "clip the gradients' global norm to this (null: no clipping)"},
    {"train.eval_every", TR_T_INT, OFF(train.eval_every), "500", 0, BIG, NULL, 0, 0, 0,
     "evaluate every N optimizer steps (0: only at the end)"},
    {"train.eval_samples", TR_T_INT, OFF(train.eval_samples), "null", 1, BIG, NULL, TR_NULLABLE, 0, 0,
     "evaluate on at most the first N samples of each split (null: all of them)"},
    {"train.checkpoint_every", TR_T_INT, OFF(train.checkpoint_every), "1000", 0, BIG, NULL, 0,
     0, 0, "write a checkpoint every N optimizer steps (0: only at the end)"},
    {"train.early_stop.metric", TR_T_ENUM, OFF(train.early_stop.metric), "none", 0, 0,
     stop_metric_names, TR_SHORTHAND, 0, 0,
     "stop when this evaluation metric stops improving (none: train all the steps)"},
    {"train.early_stop.patience", TR_T_INT, OFF(train.early_stop.patience), "5", 1, 1000000, NULL, 0,
     0, 0, "evaluations without improvement before stopping"},
    {"train.early_stop.mode", TR_T_ENUM, OFF(train.early_stop.mode), "auto", 0, 0, stop_mode_names, 0,
     0, 0, "min or max is better (auto: min for eval.loss, max for eval.accuracy)"},
    {"train.early_stop.min_delta", TR_T_FLOAT, OFF(train.early_stop.min_delta), "0", 0, 1e9, NULL, 0,
     0, 0, "the least change that counts as an improvement"},

    {"budget.memory", TR_T_SIZE, OFF(budget.memory), "14GiB", 1048576, BIG, NULL, 0, 0, 0,
     "the footprint allowed on the training device: GPU memory, or process memory on the CPU"},
    {"budget.host_memory", TR_T_SIZE, OFF(budget.host_memory), "null", 1048576, BIG, NULL, TR_NULLABLE, 0, 0,
     "the host memory offloading may take beside the device's (null: what the machine can spare, measured)"},
    {"budget.time", TR_T_DURATION, OFF(budget.time), "null", 0, 31536000, NULL,
     TR_NULLABLE | TR_MIN_OPEN, 0, 0,
     "wall-clock limit: stop, checkpoint and report when reached (null: none)"},

    {"optimize.amp", TR_T_ENUM, OFF(optimize.amp), "auto", 0, 0, amp_names, 0, 0, 0,
     "mixed precision: auto (the planner decides), off (fp32), bf16 or fp16"},
    {"optimize.loss_scale.init", TR_T_FLOAT, OFF(optimize.loss_scale.init), "65536", 0, 1e38,
     NULL, TR_MIN_OPEN, 0, 0, "fp16: the first loss scale"},
    {"optimize.loss_scale.growth", TR_T_FLOAT, OFF(optimize.loss_scale.growth), "2.0", 1, 1000,
     NULL, TR_MIN_OPEN, 0, 0, "fp16: factor applied after interval clean steps"},
    {"optimize.loss_scale.backoff", TR_T_FLOAT, OFF(optimize.loss_scale.backoff), "0.5", 0, 1,
     NULL, TR_MIN_OPEN | TR_MAX_OPEN, 0, 0, "fp16: factor applied on overflow"},
    {"optimize.loss_scale.interval", TR_T_INT, OFF(optimize.loss_scale.interval), "2000", 1,
     BIG, NULL, 0, 0, 0, "fp16: clean steps before the scale grows"},
    {"optimize.loss_scale.min", TR_T_FLOAT, OFF(optimize.loss_scale.min), "1", 0, 1e38, NULL,
     TR_MIN_OPEN, 0, 0, "fp16: a scale below this ends the run as diverged"},
    {"optimize.loss_scale.hysteresis", TR_T_INT, OFF(optimize.loss_scale.hysteresis), "1", 1,
     1000, NULL, 0, 0, 0, "fp16: overflows in a row before the scale backs off"},
    {"optimize.checkpointing", TR_T_CHOICE, OFF(optimize.checkpointing), "auto", 1, 1024,
     ckpt_names, 0, 0, 0,
     "gradient checkpointing: auto, off, selective, full, or the number of blocks to recompute"},
    {"optimize.dynamic_batching.mode", TR_T_ENUM, OFF(optimize.dynamic_batching.mode), "auto",
     0, 0, tristate_names, TR_SHORTHAND, 0, 0,
     "length-bucketed micro-batches for variable-length data"},
    {"optimize.dynamic_batching.buckets", TR_T_INTS, OFF(optimize.dynamic_batching.buckets),
     "null", 1, 1048576, NULL, TR_NULLABLE, 1, TR_LIST_MAX,
     "bucket upper bounds in tokens, increasing (null: the planner chooses)"},
    {"optimize.dynamic_batching.pool", TR_T_INT, OFF(optimize.dynamic_batching.pool), "100", 1,
     1000000, NULL, 0, 0, 0, "sort by length within pools of this many batches"},
    {"optimize.dynamic_batching.tokens", TR_T_INT, OFF(optimize.dynamic_batching.tokens), "0", 0,
     BIG, NULL, 0, 0, 0,
     "token slots a micro-batch may hold, rows × its bucket's length (0: the fixed plan's, "
     "micro-batch × longest sequence)"},
    {"optimize.accumulation", TR_T_CHOICE, OFF(optimize.accumulation), "auto", 1, 16777216,
     auto_names, 0, 0, 0, "micro-steps per optimizer step: auto, or a number dividing the batch"},
    {"optimize.shard", TR_T_ENUM, OFF(optimize.shard), "auto", 0, 0, shard_names, 0, 0, 0,
     "across ranks, ZeRO: each rank keeps and updates only its part of the optimizer's state (stage 1), "
     "and of the summed gradients (gradients: stage 2) (auto: the planner's choice)"},
    {"optimize.parallel.mode", TR_T_ENUM, OFF(optimize.parallel.mode), "auto", 0, 0, parallel_names,
     TR_SHORTHAND, 0, 0,
     "across ranks, how the model spreads: auto (the planner's choice), data (every rank the whole model), "
     "or pinned by pipeline and tensor"},
    {"optimize.parallel.pipeline", TR_T_INT, OFF(optimize.parallel.pipeline), "null", 1, 64, NULL, TR_NULLABLE, 0,
     0, "pipeline stages the model's blocks are dealt to (null: the planner's choice)"},
    {"optimize.parallel.tensor", TR_T_INT, OFF(optimize.parallel.tensor), "null", 1, 64, NULL, TR_NULLABLE, 0, 0,
     "ranks each transformer block's heads and MLP are split across (null: the planner's choice)"},
    {"optimize.parallel.sequence", TR_T_ENUM, OFF(optimize.parallel.sequence), "auto", 0, 0, switch_names, 0, 0, 0,
     "with tensor parallelism, the blocks' norms, dropouts and residual stream split along the sequence "
     "across the tensor ranks (auto: the planner's choice)"},
    {"optimize.offload", TR_T_ENUM, OFF(optimize.offload), "auto", 0, 0, offload_names, 0, 0, 0,
     "the host's memory as extra room: the optimizer's state and update (optimizer), saved activations "
     "(activations), both, or off (auto: the planner's choice, on a device the host cannot see)"},
    {"optimize.offload_blocks", TR_T_CHOICE, OFF(optimize.offload_blocks), "auto", 1, 1048576, auto_names, 0, 0, 0,
     "activation offload's grain: the saved activations of the first N blocks (and the embeddings'), N the "
     "model's blocks for every one (auto: the planner's choice)"},
    {"optimize.offload_largest", TR_T_CHOICE, OFF(optimize.offload_largest), "auto", 1, 100, auto_names, 0, 0, 0,
     "activation offload's other grain: only the largest saved activations, until they make P percent of "
     "the bytes (100: all of them; auto: the planner's choice)"},

    {"report.dir", TR_T_STR, OFF(report.dir), "runs", 0, 0, NULL, 0, 0, 0,
     "where run folders go: DIR/NAME/YYYYmmdd-HHMMSS/"},
    {"report.log_every", TR_T_INT, OFF(report.log_every), "0", 0, BIG, NULL, 0, 0, 0,
     "a progress line and metrics every N steps (0: about 20 in a run)"},
    {"report.tensorboard", TR_T_BOOL, OFF(report.tensorboard), "true", 0, 0, NULL, 0, 0, 0,
     "write TensorBoard event files"},
    {"report.histograms_every", TR_T_INT, OFF(report.histograms_every), "0", 0, BIG, NULL, 0,
     0, 0, "weight and gradient histograms every N steps (0: off)"},
    {"report.flush_every", TR_T_DURATION, OFF(report.flush_every), "5s", 0, 3600, NULL, 0, 0, 0,
     "write TensorBoard's records to disk at least this often (0: each record at once)"},
    {"report.notify.url", TR_T_STR, OFF(report.notify.url), "null", 0, 0, NULL,
     TR_NULLABLE | TR_SHORTHAND, 0, 0, "POST a JSON summary here when a run ends (null: off)"},
    {"report.notify.on", TR_T_ENUMS, OFF(report.notify.on), "[failure, regression]", 0, 0,
     notify_names, 0, 1, 3, "which outcomes notify"},
    {"report.notify.headers_from_env", TR_T_ENV_NAMES, OFF(report.notify.headers_from_env), "[]", 0, 0,
     NULL, 0, 0, TR_LIST_MAX, "environment variables, each holding one header line 'Name: value' to send"},
    {"report.notify.timeout", TR_T_DURATION, OFF(report.notify.timeout), "10s", 0, 600, NULL,
     TR_MIN_OPEN, 0, 0, "give up on the notification after this long"},
    {"report.regression.metric", TR_T_FLOAT, OFF(report.regression.metric), "0.02", 0, 1000, NULL, 0, 0, 0,
     "the key metric regresses when it moves the worse way by more than this fraction"},
    {"report.regression.time", TR_T_FLOAT, OFF(report.regression.time), "0.10", 0, 1000, NULL, 0, 0, 0,
     "the duration or throughput regresses when worse by more than this fraction"},
    {"report.regression.memory", TR_T_FLOAT, OFF(report.regression.memory), "0.05", 0, 1000, NULL, 0, 0, 0,
     "the measured memory regresses when it grows by more than this fraction"},

    /* nightly runs: retention and the promotion gate */
    {"report.keep", TR_T_INT, OFF(report.keep), "null", 0, BIG, NULL, TR_NULLABLE, 0, 0,
     "run folders of this recipe to keep, newest first, besides the promoted one (null or 0: all)"},
    {"report.promote.metric", TR_T_STR, OFF(report.promote.metric), "null", 0, 0, NULL,
     TR_NULLABLE | TR_SHORTHAND, 0, 0,
     "the metric a finished run must not be worse in than the promoted run (key: the key metric; null: no gate)"},
    {"report.promote.mode", TR_T_ENUM, OFF(report.promote.mode), "auto", 0, 0, promote_mode_names, 0,
     0, 0, "min or max is better (auto: max for accuracies and throughput, min otherwise)"},
    {"report.promote.min_delta", TR_T_FLOAT, OFF(report.promote.min_delta), "0", 0, 1e9, NULL, 0,
     0, 0, "how much worse than the promoted run a run may be and still be promoted"},
    {"report.monitor_every", TR_T_DURATION, OFF(report.monitor_every), "5s", 0, 3600, NULL, 0, 0, 0,
     "read CPU, memory and (through NVML) GPU utilisation, power, heat and clocks this often (0: off)"},
    {"report.prometheus", TR_T_STR, OFF(report.prometheus), "null", 0, 0, NULL, TR_NULLABLE, 0, 0,
     "the Prometheus textfile a run's end rewrites (null: report.dir/NAME/trainrun.prom)"},

    /* traces (report/trace.h), torch.profiler.schedule's rule over this process's steps */
    {"profile.skip_first", TR_T_INT, OFF(profile.skip_first), "0", 0, BIG, NULL, 0, 0, 0,
     "steps before the first cycle"},
    {"profile.wait", TR_T_INT, OFF(profile.wait), "0", 0, BIG, NULL, 0, 0, 0,
     "steps a cycle starts with, not traced"},
    {"profile.warmup", TR_T_INT, OFF(profile.warmup), "0", 0, BIG, NULL, 0, 0, 0,
     "steps traced and dropped after the wait"},
    {"profile.active", TR_T_INT, OFF(profile.active), "0", 0, BIG, NULL, 0, 0, 0,
     "steps traced into the cycle's file in the run folder's traces/ (0: no traces)"},
    {"profile.repeat", TR_T_INT, OFF(profile.repeat), "1", 0, BIG, NULL, 0, 0, 0,
     "cycles (0: until the run ends)"},

    /* across ranks (dist/gradients.h): used only where mpirun or srun started more than one */
    {"distributed.bucket", TR_T_SIZE, OFF(distributed.bucket), "25MiB", 4096, 1073741824.0, NULL, 0, 0, 0,
     "the gradients travel between ranks in buckets of this size"},
    {"distributed.overlap", TR_T_ENUM, OFF(distributed.overlap), "auto", 0, 0, switch_names, 0, 0, 0,
     "a bucket travels as soon as the backward has written it, on a thread of its own (auto: where "
     "the host has a core beyond the ranks' threads)"},
    {"distributed.timeout", TR_T_DURATION, OFF(distributed.timeout), "5m", 0, 86400, NULL, 0, 0, 0,
     "how long a rank waits for the others during the steps before every rank ends (0: for ever)"},
};

const int tr_nkeys = sizeof tr_keys / sizeof tr_keys[0];
_Static_assert(sizeof tr_keys / sizeof tr_keys[0] <= TR_NKEYS_MAX, "raise TR_NKEYS_MAX");

int tr_key_find_n(const char *path, size_t n)
{
    for (int i = 0; i < tr_nkeys; i++)
        if (strlen(tr_keys[i].path) == n && strncmp(tr_keys[i].path, path, n) == 0)
            return i;
    return -1;
}

int tr_key_find(const char *path)
{
    return tr_key_find_n(path, strlen(path));
}

bool tr_section_exists(const char *path)
{
    size_t n = strlen(path);
    if (n == 0)
        return true;
    for (int i = 0; i < tr_nkeys; i++)
        if (strncmp(tr_keys[i].path, path, n) == 0 && tr_keys[i].path[n] == '.')
            return true;
    return false;
}

static char *join_names(const char *const *names)
{
    size_t len = 1;
    for (int i = 0; names[i]; i++)
        len += strlen(names[i]) + 2;
    char *s = tr_xmalloc(len);
    s[0] = '\0';
    for (int i = 0; names[i]; i++) {
        if (i)
            strcat(s, ", ");
        strcat(s, names[i]);
    }
    return s;
}

/* "[0, 1)", "(0, 10]": the interval of a number key, in the notation people know. */
static char *interval(const struct tr_key *k)
{
    return tr_strdup_printf("%c%g, %g%c", (k->flags & TR_MIN_OPEN) ? '(' : '[', k->min, k->max,
                            (k->flags & TR_MAX_OPEN) ? ')' : ']');
}

static char *int_range(const struct tr_key *k)
{
    if (k->max >= BIG)
        return tr_strdup_printf("at least %.0f", k->min);
    return tr_strdup_printf("from %.0f to %.0f", k->min, k->max);
}

char *tr_key_expected(const struct tr_key *k)
{
    char *part = NULL, *s;
    char lo[32], hi[32];
    switch (k->type) {
    case TR_T_STR:
        s = tr_strdup("a non-empty string");
        break;
    case TR_T_INT:
        part = int_range(k);
        s = tr_strdup_printf("a whole number %s", part);
        break;
    case TR_T_FLOAT:
        part = interval(k);
        s = tr_strdup_printf("a number in %s", part);
        break;
    case TR_T_BOOL:
        s = tr_strdup("true or false");
        break;
    case TR_T_ENUM:
        part = join_names(k->names);
        s = tr_strdup_printf("one of %s", part);
        break;
    case TR_T_SIZE:
        tr_format_size((uint64_t)k->min, lo);
        tr_format_size((uint64_t)k->max, hi);
        s = tr_strdup_printf("a memory size such as 14GiB, 512MiB, 14GB or 1.5e9 (bytes), from %s "
                             "to %s", lo, hi);
        break;
    case TR_T_DURATION:
        tr_format_duration(k->min, lo);
        tr_format_duration(k->max, hi);   /* 8760h, not 3.1536e+07s */
        s = tr_strdup_printf("a duration such as 45s, 90m, 2h or 1h30m, %s %s and at most %s",
                             (k->flags & TR_MIN_OPEN) ? "more than" : "at least", lo, hi);
        break;
    case TR_T_INTS:
        part = int_range(k);
        s = tr_strdup_printf("a list of %d to %d whole numbers %s", k->list_min, k->list_max, part);
        break;
    case TR_T_FLOATS:
        part = interval(k);
        if (k->list_min == k->list_max)
            s = tr_strdup_printf("a list of %d numbers in %s", k->list_min, part);
        else
            s = tr_strdup_printf("a list of %d to %d numbers in %s", k->list_min, k->list_max, part);
        break;
    case TR_T_ENUMS:
        part = join_names(k->names);
        s = tr_strdup_printf("a list of distinct names from %s", part);
        break;
    case TR_T_CHOICE:
        part = join_names(k->names);
        s = tr_strdup_printf("%s, or a whole number from %.0f to %.0f", part, k->min, k->max);
        break;
    case TR_T_WARMUP:
        s = tr_strdup("a fraction of the steps below 1 (0.06 or 6%) or a whole number of steps (500)");
        break;
    case TR_T_SHA256:
        s = tr_strdup("64 hexadecimal digits");
        break;
    case TR_T_ENV_NAMES:
        s = tr_strdup_printf("a list of at most %d distinct environment variable names", k->list_max);
        break;
    default:
        s = tr_strdup("a value");
    }
    free(part);
    if (k->flags & TR_NULLABLE) {
        char *t = tr_strdup_printf("%s, or null", s);
        free(s);
        s = t;
    }
    return s;
}

static const char *last_part(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* The valid key or section nearest to an unknown path: a small edit of the whole path
 * (train.batchsize), or the same last name in another section (batch_size → train.batch_size).
 * Returns a new string or NULL. */
char *tr_key_suggest(const char *path)
{
    const char *best = NULL;
    size_t best_len = 0;
    int best_d = 1000;
    for (int i = 0; i < tr_nkeys; i++) {
        /* Every section above a key is a candidate too: "train.optimiser" → train.optimizer. */
        const char *p = tr_keys[i].path;
        size_t len = strlen(p);
        for (size_t n = 1; n <= len && n < 128; n++) {
            if (n < len && p[n] != '.')
                continue;
            char cand[128];
            memcpy(cand, p, n);
            cand[n] = '\0';
            int d = tr_edit_distance(path, cand);
            if (d < best_d)
                best_d = d, best = p, best_len = n;
        }
    }
    int allowed = strlen(path) < 6 ? 1 : strlen(path) < 12 ? 2 : 3;
    if (best && best_d <= allowed)
        return strndup(best, best_len);
    /* The same (or nearly the same) last name elsewhere: the user put it in the wrong section. */
    const char *leaf = last_part(path);
    for (int i = 0; i < tr_nkeys; i++)
        if (tr_edit_distance(leaf, last_part(tr_keys[i].path)) <= (strlen(leaf) < 5 ? 0 : 1))
            return tr_strdup(tr_keys[i].path);
    return NULL;
}

/* The names directly under a section, "a, b, c", for "valid keys here" messages. */
char *tr_section_children(const char *section)
{
    size_t n = strlen(section), cap = 256, len = 0;
    char *out = tr_xmalloc(cap);
    out[0] = '\0';
    const char *prev = NULL;
    size_t prev_len = 0;
    for (int i = 0; i < tr_nkeys; i++) {
        const char *p = tr_keys[i].path;
        if (n && (strncmp(p, section, n) != 0 || p[n] != '.'))
            continue;
        const char *child = n ? p + n + 1 : p;
        const char *dot = strchr(child, '.');
        size_t clen = dot ? (size_t)(dot - child) : strlen(child);
        if (prev && prev_len == clen && strncmp(prev, child, clen) == 0)
            continue;   /* keys of a section are adjacent in the table */
        if (len + clen + 3 > cap)
            out = tr_xrealloc(out, cap = 2 * (cap + clen));
        len += (size_t)sprintf(out + len, "%s%.*s", len ? ", " : "", (int)clen, child);
        prev = child, prev_len = clen;
    }
    return out;
}
