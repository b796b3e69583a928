#!/bin/sh
# Mixed precision through the real binary: bf16 and fp16 runs train; fp16's loss scaler, forced
# to overflow by a huge first scale, skips steps and halves the scale until the gradients fit,
# then training goes on; a floor above where they fit ends the run as diverged (exit 5); and a
# run resumed from a checkpoint taken mid-way keeps the scale, ending bit for bit where the
# uninterrupted run ends.
. "$srcdir/tests/lib.sh"
recipe="$srcdir/recipes/mlp.yaml"

for amp in bf16 fp16; do
  run "$TRAINRUN" "$recipe" optimize.amp=$amp train.steps=300 report.dir="$scratch/$amp" --quiet
  expect_rc 0 "an $amp run"
  acc=$(echo "$out" | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
  checks=$((checks + 1))
  awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.95) }' || fail "$amp: test accuracy ${acc:-none} < 0.95"
  expect_in "$(cat "$scratch/$amp/mlp/latest/log.txt")" "" "$amp: a log"
done

# 1e12 overflows fp16 (65504) at once: steps are skipped, the scale halved each time.
run "$TRAINRUN" "$recipe" optimize.amp=fp16 optimize.loss_scale.init=1e12 train.steps=60 \
  train.checkpoint_every=10 report.dir="$scratch/over"
expect_rc 0 "fp16 from a scale of 1e12"
dir="$scratch/over/mlp/latest"
expect_in "$out" "step 1: fp16 gradients overflowed at loss scale 1e+12; step skipped, scale now 5e+11" \
  "the first step is skipped and the scale halved"
python3 - "$dir/metrics.jsonl" "$dir/log.txt" <<'PY' || fail "the scale's history"
import json, re, sys
skips = [float(m.group(1)) for m in re.finditer(r"overflowed at loss scale ([0-9.e+]+)", open(sys.argv[2]).read())]
assert len(skips) >= 15, skips                       # 1e12 / 2^k fits after 20 or so halvings
assert all(abs(b - a / 2) <= 1e-5 * a for a, b in zip(skips[:20], skips[1:20])), skips   # printed to 6 digits
lines = [json.loads(l) for l in open(sys.argv[1]) if "train/loss" in l]
last = lines[-1]
assert last["train/skipped_steps"] == len(skips), (last, len(skips))
assert last["train/loss_scale"] < 1e12 / 2 ** 15, last
losses = [l["train/loss"] for l in lines]
assert losses[-1] < losses[0] - 0.3, losses          # it recovered and learnt
PY
checks=$((checks + 1))

# Resumed from step 10 (the later checkpoints removed), the scale comes from the checkpoint.
mkdir -p "$scratch/res" && cp -R "$dir/." "$scratch/res/"
rm -f "$scratch/res/checkpoints/step-20.safetensors" "$scratch/res/checkpoints/step-30.safetensors" \
  "$scratch/res/checkpoints/step-40.safetensors" "$scratch/res/checkpoints/step-50.safetensors" \
  "$scratch/res/checkpoints/step-60.safetensors"
run "$TRAINRUN" resume "$scratch/res" --quiet
expect_rc 0 "resuming the fp16 run at step 10"
checks=$((checks + 1))
cmp -s "$dir/checkpoints/step-60.safetensors" "$scratch/res/checkpoints/step-60.safetensors" ||
  fail "the resumed fp16 run ends elsewhere than the uninterrupted one (the loss scale was not kept?)"

# A floor the scale must pass on its way down: the run ends as diverged, and says what to try.
run "$TRAINRUN" "$recipe" optimize.amp=fp16 optimize.loss_scale.init=1e12 optimize.loss_scale.min=1e9 \
  train.steps=60 report.dir="$scratch/collapse"
expect_rc 5 "a loss scale below its minimum"
expect_in "$err" "below optimize.loss_scale.min 1e+09" "the floor is named"
expect_in "$err" "optimize.amp=bf16" "bf16 is suggested"
finish
