#!/bin/sh
# Issue 8's measurement of dynamic batching: recipes/bert-small.yaml on wordnet-senses (batch 32,
# max_len 128), 40 steps each, one run after another:
#   fixed-128   one plan at 32 × 128; each batch padded to its own longest (the loader's way)
#   fixed-p99   model.max_len = the training texts' 99th-percentile length (1% of them cut)
#   dynamic     optimize.dynamic_batching=on: buckets 16, 32, 64, 128 with the fixed plan's
#               token budget (32 × 128), sorted pools of 100 batches
#   dynamic-p99 the same with a budget of 32 × p99 tokens: the longest bucket gets fewer rows
# For each: the padding fraction (padding tokens per real token), the activation arena (the
# plan's largest), the regions the plan asked for, peak RSS, step time and real tokens per second
# over steps 11–40 (steps 1–10 warm up). Each run waits until the 1-minute load is below 1.5:
# another benchmark on the same cores would skew the times.
#   bench/run-dynbatch.sh [RUNS_DIR [OVERRIDE...]]   (from the build folder; about 5 minutes on
#   2 cores; overrides go to every run, e.g. model.layers=1 for a quick try of the script)
# Writes RUNS_DIR (default /tmp/trainrun-dynbatch)/<case>/… and bench/dynbatch.tsv.
set -eu
runs=${1:-/tmp/trainrun-dynbatch}
[ $# -gt 0 ] && shift
here=$(dirname "$0")
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive   # one core computes, one loader thread fills
quiet() {   # until the 1-minute load is below 1.5 (the run before included: about a minute)
  while [ "$(awk '{ print ($1 >= 1.5) }' /proc/loadavg)" = 1 ]; do
    echo "load $(cut -d' ' -f1 /proc/loadavg): waiting for it to fall below 1.5"; sleep 20
  done
}
train() {   # train CASE OVERRIDES...
  quiet
  case=$1
  shift
  rm -rf "${runs:?}/$case"
  # shellcheck disable=SC2086
  ./trainrun recipes/bert-small.yaml train.steps=40 report.log_every=10 train.eval_every=0 \
    train.checkpoint_every=0 data.num_workers=1 report.dir="$runs/$case" $extra "$@" >"$runs/$case.out"
  grep -E '^(text|plan):' "$runs/$case.out"
}
mkdir -p "$runs"
extra="$*"   # the overrides for every run (words without spaces)
train fixed-128
p99=$(sed -n 's/^text: .* p99 \([0-9]*\),.*/\1/p' "$runs/fixed-128.out")
train fixed-p99 model.max_len="$p99"
train dynamic optimize.dynamic_batching=on
train dynamic-p99 optimize.dynamic_batching=on optimize.dynamic_batching.tokens=$((32 * p99))
python3 - "$runs" >"$here/dynbatch.tsv" <<'PY'
import json, re, sys
runs = sys.argv[1]
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
print("case\tpadding_fraction\tarena_MiB\tregions_MiB\tpeak_rss_MiB\tstep_ms\ttokens_per_s\tmicro_steps")
for case in ("fixed-128", "fixed-p99", "dynamic", "dynamic-p99"):
    out = open(f"{runs}/{case}.out").read()
    size, unit = re.search(r"activation arena ([0-9.]+) (\w+)", out).groups()
    lines = [json.loads(l) for l in open(f"{runs}/{case}/bert-small/latest/metrics.jsonl")]
    steady = [l for l in lines if "train/tokens_per_s" in l and l["step"] > 10]
    mean = lambda key: sum(l[key] for l in steady) / len(steady)
    step_ms = 1000 * sum(32 * 10 / l["train/samples_per_s"] for l in steady) / (10 * len(steady))
    print(f"{case}\t{mean('data/padding_fraction'):.3f}\t{float(size) * units[unit] / 2**20:.2f}\t"
          f"{steady[-1]['memory/predicted_peak'] / 2**20:.1f}\t{steady[-1]['memory/peak'] / 2**20:.0f}\t"
          f"{step_ms:.0f}\t{mean('train/tokens_per_s'):.0f}\t{mean('train/micro_steps'):.2f}")
PY
cat "$here/dynbatch.tsv"
