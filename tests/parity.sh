#!/bin/sh
# Loss-trajectory parity with PyTorch: the same MLP, and the same small ResNet (batch norm in
# training mode, strided convolutions, 1×1 shortcuts), from the same initial weights, on the same
# batches in the same order, for 50 steps of SGD (Nesterov momentum, weight decay) and of AdamW;
# every step's loss must match PyTorch 1.13's (tests/fixtures/make_train_fixtures.py).
# Tolerance: both compute in f32 with different summation orders, so each loss differs from the
# reference by a few ulps at first (~1e-7 relative) and the trajectories drift apart slowly as the
# updates compound; the normwise difference of the 50 losses must stay below 1e-4 — a wrong
# update rule (decay on biases, a missing bias correction, momentum off by a step) shows at the
# first few steps as 1e-3 or more.
. "$srcdir/tests/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the fixtures"; exit 77; }
fixtures="$srcdir/tests/fixtures/parity"
for case in sgd adamw resnet-sgd resnet-adamw; do
  opt=${case#resnet-}
  case $case in
    resnet-*) model="{arch: resnet, layers: 1, hidden: 4, dropout: 0, init: \"$fixtures/resnet-init.safetensors\"}"
              dataset=parity-image ;;
    *) model="{arch: mlp, layers: 2, hidden: 32, activation: relu, dropout: 0, init: \"$fixtures/init.safetensors\"}"
       dataset=parity ;;
  esac
  case $opt in
    sgd) optimizer="{name: sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 5.0e-4}" ;;
    adamw) optimizer="{name: adamw, lr: 1.0e-3, betas: [0.9, 0.999], eps: 1.0e-8, weight_decay: 0.01}" ;;
  esac
  cat >"$scratch/$case.yaml" <<YAML
name: parity-$case
seed: 1
device: cpu
model: $model
data: {dataset: $dataset, shuffle: false, num_workers: 0}
train:
  batch_size: 32
  steps: 50
  optimizer: $optimizer
  schedule: {name: constant, warmup: 0}
  grad_clip: null
  eval_every: 0
  checkpoint_every: 0
budget: {memory: 256MiB}
report: {dir: "$scratch/runs", log_every: 1}
optimize: {amp: off}
YAML
  TRAINRUN_DATASETS="$srcdir/tests/fixtures" run "$TRAINRUN" "$scratch/$case.yaml" --quiet
  expect_rc 0 "$case run"
  checks=$((checks + 1))
  python3 - "$scratch/runs/parity-$case/latest/metrics.jsonl" "$fixtures/losses.json" "$case" <<'PY' || fail "$case: the losses differ from PyTorch's"
import json, math, sys
ours = [l["train/loss"] for l in map(json.loads, open(sys.argv[1])) if "train/loss" in l]
ref = json.load(open(sys.argv[2]))[sys.argv[3]]
assert len(ours) == len(ref) == 50, (len(ours), len(ref))
diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(ours, ref)) / sum(b * b for b in ref))
first = abs(ours[0] - ref[0]) / abs(ref[0])
print(f"{sys.argv[3]}: 50 losses, normwise difference {diff:.2e}, first step {first:.2e}, "
      f"last {ours[-1]:.6f} vs {ref[-1]:.6f}")
assert diff < 1e-4, diff
PY
done
finish
