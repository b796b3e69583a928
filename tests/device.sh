#!/bin/sh
# The trainer on a device the host cannot see. TRAINRUN_BACKEND=cpu-fenced runs the CPU's kernels
# behind a fence: the regions are mapped with no access except while a kernel, a copy, a fill or
# an optimizer pass runs, so any host read or write that bypasses the backend — what a GPU's
# memory would punish — is a crash. Every model trains, evaluates, checkpoints, resumes, writes
# histograms and (fp16) unscales through the backend, and ends bit for bit where the plain CPU
# ends. Then device: cuda where no GPU is seen: a sentence, no run folder; device: auto: the CPU.
. "$srcdir/tests/lib.sh"
set -- data.num_workers=1 train.eval_samples=64 --quiet

sums() { grep -o '"train/loss":[^,]*' "$1/metrics.jsonl" | tr -d '\n'; }

# train NAME RECIPE ARGS...: the same run plain and fenced; both must succeed and agree exactly.
train() {
  name=$1 recipe=$2; shift 2
  for be in cpu cpu-fenced; do
    TRAINRUN_BACKEND=$be run "$TRAINRUN" "$srcdir/recipes/$recipe.yaml" report.dir="$scratch/$be" "$@"
    expect_rc 0 "$name on $be"
  done
  plain=$scratch/cpu/$(basename "$recipe")/latest fenced=$scratch/cpu-fenced/$(basename "$recipe")/latest
  checks=$((checks + 1))
  [ -n "$(sums "$plain")" ] && [ "$(sums "$plain")" = "$(sums "$fenced")" ] ||
    fail "$name: fenced losses differ: $(sums "$fenced") against $(sums "$plain")"
  last=$(ls "$plain/checkpoints" | sort -t- -k2 -n | tail -n 1)
  checks=$((checks + 1))
  cmp -s "$plain/checkpoints/$last" "$fenced/checkpoints/$last" || fail "$name: fenced checkpoint $last differs"
  rm -rf "$scratch/cpu" "$scratch/cpu-fenced"
}

train "mlp, histograms every step" mlp train.steps=6 train.eval_every=3 train.checkpoint_every=3 \
  report.histograms_every=1 "$@"
train "mlp in fp16 (the loss scaler's unscale and overflow check)" mlp train.steps=6 optimize.amp=fp16 "$@"
train "gpt-small, fused classifier" gpt-small model.layers=1 model.hidden=64 model.heads=2 model.ffn=128 \
  model.max_len=64 train.batch_size=4 train.steps=3 train.eval_every=3 "$@"
if [ -d /usr/share/wordnet ] || [ -d /usr/share/wordnet-base ]; then
  train "bert-small, dynamic batching" bert-small model.layers=1 model.hidden=64 model.heads=2 model.ffn=128 \
    train.batch_size=8 train.steps=3 train.eval_every=3 "$@"
fi
if [ -d /usr/share/dataset-fashion-mnist ] || ls /usr/share/*fashion* >/dev/null 2>&1; then
  train "resnet, batch norm's running statistics" resnet train.batch_size=8 train.steps=2 train.eval_every=2 "$@"
fi

# Resume on the fenced device: the checkpoint is read back through the backend. A run cut by
# SIGTERM after its step-4 checkpoint, resumed, ends where the uninterrupted one does.
set -- data.num_workers=1 train.eval_samples=64 train.steps=40 train.checkpoint_every=4
TRAINRUN_BACKEND=cpu-fenced run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" report.dir="$scratch/whole" "$@" --quiet
expect_rc 0 "fenced run of 40 steps"
sigterm_cut cut 4 env TRAINRUN_BACKEND=cpu-fenced "$TRAINRUN" "$srcdir/recipes/mlp.yaml" "$@"
TRAINRUN_BACKEND=cpu-fenced run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "resuming the fenced run"
checks=$((checks + 1))
cmp -s "$scratch/whole/mlp/latest/checkpoints/step-40.safetensors" "$dir/checkpoints/step-40.safetensors" ||
  fail "a fenced run cut by SIGTERM and resumed ends where an uninterrupted one does"
set -- data.num_workers=1 train.eval_samples=64 --quiet

# A backend that is not there: said plainly.
TRAINRUN_BACKEND=tpu run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" report.dir="$scratch/tpu" train.steps=1 "$@"
expect_rc 1 "an unknown TRAINRUN_BACKEND"
expect_in "$err" "TRAINRUN_BACKEND: expected cpu, cpu-fenced or cuda, got 'tpu'" "the unknown backend is named"

# device: cuda with no GPU: the sentence says what to do, and nothing is left behind.
if ! "$TRAINRUN" --version 2>/dev/null | grep -q "GPUs seen: [1-9]"; then
  run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" device=cuda report.dir="$scratch/cuda" train.steps=1 "$@"
  expect_rc 1 "device: cuda without a GPU"
  expect_in "$err" "device: cuda:0: " "the device is named"
  expect_in "$err" "set device: cpu" "the way out is said"
  checks=$((checks + 1))
  [ ! -e "$scratch/cuda" ] || fail "device: cuda without a GPU left $(ls -R "$scratch/cuda" | head -n 3)"
  run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" device=auto report.dir="$scratch/auto" train.steps=2 "$@"
  expect_rc 0 "device: auto without a GPU trains on the CPU"
  expect_in "$(grep -A1 '"device"' "$scratch"/auto/mlp/latest/plan.json)" '"name": "cpu"' "device: auto planned the CPU"
fi
finish
