"""What the hostile case tables share: a tiny recipe that plans in a second, its data, and the
leaf keys of the recipe schema with the kind of value each takes (as `trainrun check` prints
them), from which the recipes family makes its wrong-type cases."""
import random

from hostile import Case  # noqa: F401  (re-exported for the tables)


def tiny_csv(rows=60, features=4, classes=3, seed=1):
    rnd = random.Random(seed)
    lines = []
    for i in range(rows):
        c = i % classes
        lines.append(",".join("%.3f" % (rnd.random() + c) for _ in range(features)) + ",%d" % c)
    return "\n".join(lines) + "\n"


TRAIN_CSV = tiny_csv()

# A recipe that `check`s and `plan`s in about a second: an MLP on 60 rows of inline CSV.
def tiny_recipe(data="  train: {source: train.csv}\n", extra=""):
    return ("name: tiny\ndevice: cpu\nmodel: {arch: mlp, layers: 1, hidden: 8}\ndata:\n" + data +
            "train: {batch_size: 8, steps: 20}\nbudget: {memory: 256MiB}\n" + extra)


TINY = tiny_recipe()
TINY_FILES = {"r.yaml": TINY, "train.csv": TRAIN_CSV}

# Every leaf key and the kind of value it takes: int, num (a real), bool, enum, str (any
# string), list, size (memory), dur (duration), path (a file or null).
KEYS = """
name str; seed int; device enum; model.arch enum; model.layers int; model.hidden int; model.heads int;
model.ffn int; model.max_len int; model.dropout num; model.activation enum; model.init.path path;
model.init.from_run enum; data.dataset str; data.train.source path; data.train.sha256 str;
data.train.format enum; data.train.text str; data.train.label str; data.valid.source path;
data.valid.format enum; data.test.source path; data.test.format enum; data.tokenizer.kind enum;
data.tokenizer.vocab path; data.tokenizer.merges path; data.tokenizer.lowercase bool;
data.num_workers int; data.prefetch_factor int; data.pin_memory enum; data.shuffle bool;
train.batch_size int; train.epochs int; train.steps int; train.optimizer.name enum;
train.optimizer.lr num; train.optimizer.weight_decay num; train.optimizer.betas list;
train.optimizer.eps num; train.optimizer.momentum num; train.optimizer.nesterov bool;
train.schedule.name enum; train.schedule.warmup num; train.grad_clip num; train.eval_every int;
train.eval_samples int; train.checkpoint_every int; train.early_stop.metric enum;
train.early_stop.patience int; train.early_stop.mode enum; train.early_stop.min_delta num;
budget.memory size; budget.time dur; optimize.amp enum; optimize.loss_scale.init num;
optimize.loss_scale.growth num; optimize.loss_scale.backoff num; optimize.loss_scale.interval int;
optimize.loss_scale.min num; optimize.loss_scale.hysteresis int; optimize.checkpointing enum;
optimize.dynamic_batching.mode enum; optimize.dynamic_batching.buckets list;
optimize.dynamic_batching.pool int; optimize.dynamic_batching.tokens int; optimize.accumulation enum;
report.dir path; report.log_every int; report.tensorboard bool; report.histograms_every int;
report.flush_every dur; report.notify.url str; report.notify.on list;
report.notify.headers_from_env list; report.notify.timeout dur; report.regression.metric num;
report.regression.time num; report.regression.memory num; report.keep int;
report.promote.metric str; report.promote.mode enum; report.promote.min_delta num
"""
LEAF_KEYS = [tuple(item.split()) for item in KEYS.replace("\n", " ").split(";") if item.strip()]


def nest(key, value):
    """A YAML block setting dotted key to value (a YAML flow text), as lines of text."""
    parts = key.split(".")
    return "".join("  " * i + p + ":\n" for i, p in enumerate(parts[:-1])) + \
        "  " * (len(parts) - 1) + parts[-1] + ": " + value + "\n"
