#!/bin/sh
# The host's memory as extra room (optimize.offload), on the fenced CPU standing in for a device
# the host cannot see (tests/device.sh): the optimizer's state and update on the host and saved
# activations sent there and back, and the gradients sent down as the backward writes them, train
# bit for bit as without them — the fenced backend reads a queued copy's source when queued and
# lands it only at its join, failing the join if the source changed between: a copy read too
# soon, landed late, or a slot reused before its copy left would fail or change a bit — with every
# block's activations, the first blocks' alone or the largest alone; the device's arena is as the
# plan predicts and smaller than without,
# the host's regions as predicted. The planner takes offloading where nothing else fits the
# budget, and not when the host's budget is too small for it; a resumed offloaded run ends where
# an uninterrupted one does.
. "$srcdir/tests/lib.sh"
TRAINRUN_BACKEND=cpu-fenced
export TRAINRUN_BACKEND
# buckets of 4 KiB: the gradients go down in many copies as the backward writes them
set -- data.num_workers=1 train.eval_samples=64 distributed.bucket=4KiB --quiet

sums() { grep -o '"train/loss":[^,]*' "$1/metrics.jsonl" | tr -d '\n'; }

# measured OFF ON: the offloaded run's plan.json against its prediction and the run without: the
# arena as planned, and smaller — but for $shrink no (a model of few blocks: the pass keeps each
# activation's slot until its copy has left and gives up in-place reuse, and the packing may
# come out larger; the planner compares both, the pinned runs here take it regardless).
measured() {
  checks=$((checks + 1))
  python3 - "$1/plan.json" "$2/plan.json" "$name" "$shrink" "$grain" "${largest:-100}" <<'PY' || fail "$name: the offloaded run's memory is not as planned"
import json, sys
off, on, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
shrink, grain, largest = sys.argv[4] == "yes", int(sys.argv[5]), int(sys.argv[6])
arena, host = on["measured_regions"]["arena"], on["measured_host"]
print("%s: arena %d predicted, %d measured (%d without offload); host %d predicted, %d measured; "
      "%.0f activation and %.0f optimizer bytes a step over the link" % (name, on["regions"]["arena"], arena,
      off["measured_regions"]["arena"], on["host"]["predicted_bytes"], host["bytes"],
      host["activation_bytes_per_step"], host["optimizer_bytes_per_step"]))
print("%s: the activations of %d of %d blocks, the largest making %d%% of their bytes; %.0f bytes of gradients a "
      "step sent during the backward" % (name, on["offload_blocks"], on["checkpointing"]["of"], on["offload_largest"],
      host["gradient_bytes_during_backward_per_step"]))
ok = (on["offload"] == "both" and arena == on["regions"]["arena"] and (arena < off["measured_regions"]["arena"] or not shrink)
      and on["measured_regions"]["optimizer"] == 0 and host["bytes"] == on["host"]["predicted_bytes"]
      and host["regions"]["optimizer"] == off["regions"]["optimizer"]
      and host["activation_bytes_per_step"] > 0 and host["optimizer_bytes_per_step"] > 0
      and host["gradient_bytes_during_backward_per_step"] > 0 and on["offload_blocks"] == grain
      and on["offload_largest"] == largest)
sys.exit(0 if ok else 1)
PY
}

# train NAME RECIPE ARGS...: the same run without offload and with both, the activations of
# $grain blocks (optimize.offload_blocks), the largest making $largest percent of their bytes
# (optimize.offload_largest, 100: all); both must succeed and agree exactly, in every loss and
# the last checkpoint.
train() {
  name=$1 recipe=$2; shift 2
  run "$TRAINRUN" "$srcdir/recipes/$recipe.yaml" report.dir="$scratch/off" optimize.offload=off "$@"
  expect_rc 0 "$name, offload off"
  run "$TRAINRUN" "$srcdir/recipes/$recipe.yaml" report.dir="$scratch/both" optimize.offload=both \
    optimize.offload_blocks="$grain" optimize.offload_largest="${largest:-100}" "$@"
  expect_rc 0 "$name, offload both"
  off=$scratch/off/$recipe/latest on=$scratch/both/$recipe/latest
  checks=$((checks + 1))
  [ -n "$(sums "$off")" ] && [ "$(sums "$off")" = "$(sums "$on")" ] ||
    fail "$name: offloaded losses differ: $(sums "$on") against $(sums "$off")"
  last=$(ls "$off/checkpoints" | sort -t- -k2 -n | tail -n 1)
  checks=$((checks + 1))
  cmp -s "$off/checkpoints/$last" "$on/checkpoints/$last" || fail "$name: offloaded checkpoint $last differs"
  measured "$off" "$on"
  rm -rf "$scratch/off" "$scratch/both"
}

small="model.hidden=64 model.heads=2 model.ffn=128" shrink=yes grain=2
train "mlp" mlp train.steps=6 train.checkpoint_every=3 "$@"
shrink=no
train "mlp in fp16, clipped (the unscale, the overflow check and the norm on the device)" mlp \
  train.steps=6 optimize.amp=fp16 train.grad_clip=0.5 "$@"
shrink=yes grain=3
# shellcheck disable=SC2086
train "gpt-small, fused classifier" gpt-small model.layers=3 $small model.max_len=64 train.batch_size=4 \
  train.steps=3 train.eval_every=3 "$@"
grain=1
# shellcheck disable=SC2086
train "gpt-small, the first block's activations alone" gpt-small model.layers=3 $small model.max_len=64 \
  train.batch_size=4 train.steps=3 train.eval_every=3 "$@"
grain=3 largest=50
# shellcheck disable=SC2086
train "gpt-small, the largest activations alone (half their bytes)" gpt-small model.layers=3 $small \
  model.max_len=64 train.batch_size=4 train.steps=3 train.eval_every=3 "$@"
largest=100
# bf16's graph is the CPU's to choose (16-bit weight copies where oneDNN computes bf16): its arena
# as planned, not compared
shrink=no
# shellcheck disable=SC2086
train "gpt-small in bf16 (16-bit activations offloaded)" gpt-small model.layers=3 $small model.max_len=64 \
  train.batch_size=4 train.steps=3 train.eval_every=3 optimize.amp=bf16 "$@"
shrink=yes
if [ -d /usr/share/wordnet ] || [ -d /usr/share/wordnet-base ]; then
  # shellcheck disable=SC2086
  train "bert-small, dynamic batching" bert-small model.layers=3 $small train.batch_size=8 train.steps=3 \
    train.eval_every=3 optimize.dynamic_batching=on optimize.checkpointing=off "$@"
  # shellcheck disable=SC2086
  train "bert-small, 2 of 3 blocks recomputed, accumulation" bert-small model.layers=3 $small train.batch_size=8 \
    train.steps=2 train.eval_every=2 optimize.checkpointing=2 optimize.accumulation=2 "$@"

  # A budget only offloading meets: below what checkpointing every block at one sample a micro-batch
  # needs with the optimizer's state on the device. Then a host too small for what it would hold.
  set -- optimize.amp=off budget.memory=200MiB
  run "$TRAINRUN" plan "$srcdir/recipes/bert-small.yaml" "$@" --json
  expect_rc 0 "bert-small in 200 MiB"
  checks=$((checks + 1))
  printf '%s' "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print("200 MiB: chose %s, checkpointing %s, %d × %d; device footprint %d, host %d of %d" % (j["offload"],
      j["checkpointing"]["mode"], j["accumulation"], j["micro"], j["predicted_footprint_bytes"],
      j["host"]["predicted_bytes"], j["host"]["budget_bytes"]))
sys.exit(0 if j["offload"] in ("optimizer", "both") and j["fits"] and
         j["host"]["predicted_bytes"] <= j["host"]["budget_bytes"] else 1)' ||
    fail "the planner offloads the optimizer's state, and the plan fits both budgets"
  run "$TRAINRUN" plan "$srcdir/recipes/bert-small.yaml" "$@" optimize.offload=off
  expect_rc 3 "bert-small in 200 MiB without offloading"
  run "$TRAINRUN" plan "$srcdir/recipes/bert-small.yaml" "$@" budget.host_memory=64MiB
  expect_rc 3 "bert-small in 200 MiB with 64 MiB of the host's memory"
  expect_in "$out$err" "budget.host_memory=" "the host's budget is named as what to raise"
  run "$TRAINRUN" plan "$srcdir/recipes/bert-small.yaml" "$@"
  expect_in "$out" "host (exact): params 42.28 MiB, grads 42.28 MiB, optimizer 84.56 MiB" "plan shows the host's regions"
  expect_in "$out" "host link: " "plan shows the transfer time"
fi

# Resume: the host's copy of the parameters is taken again from the checkpoint pushed back.
set -- data.num_workers=1 train.eval_samples=64 train.steps=40 train.checkpoint_every=4 optimize.offload=both
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" report.dir="$scratch/whole" "$@" --quiet
expect_rc 0 "an offloaded run of 40 steps"
expect_in "$(cat "$scratch/whole/mlp/latest/report.md")" "| Offload | the optimizer's state and update, saved activations in the host's memory | host regions " "the report's offload row"
expect_in "$(cat "$scratch/whole/mlp/latest/log.txt")" "offload: host regions peaked at " "the log's offload line"
sigterm_cut cut 4 "$TRAINRUN" "$srcdir/recipes/mlp.yaml" "$@"
run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "resuming an offloaded run"
checks=$((checks + 1))
cmp -s "$scratch/whole/mlp/latest/checkpoints/step-40.safetensors" "$dir/checkpoints/step-40.safetensors" ||
  fail "an offloaded run cut by SIGTERM and resumed ends where an uninterrupted one does"

# Bad input: said plainly.
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" --ranks 2 optimize.offload=both
expect_rc 2 "offloading pinned across ranks"
expect_in "$err" "optimize.offload: both offloads one device's memory; across ranks not yet" "why is said"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" optimize.offload=sometimes
expect_rc 2 "an unknown optimize.offload"
expect_in "$err" "optimize.offload" "the key is named"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" optimize.offload=optimizer optimize.offload_blocks=1
expect_rc 2 "a grain with no activations offloaded"
expect_in "$err" "optimize.offload_blocks: 1 blocks, but optimize.offload=optimizer offloads no activations" "why is said"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" optimize.offload=both optimize.offload_blocks=3
expect_rc 2 "a grain of more blocks than the model has"
expect_in "$err" "optimize.offload_blocks: 3 blocks, but the model has 2 (model.layers)" "the model's blocks are said"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" optimize.offload=off optimize.offload_largest=50
expect_rc 2 "the largest activations' grain without activation offload"
expect_in "$err" "optimize.offload_largest: 50%, but optimize.offload=off offloads no activations" "why is said"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" optimize.offload=both optimize.offload_largest=50 optimize.offload_blocks=1
expect_rc 2 "two grains pinned at once"
expect_in "$err" "optimize.offload_largest: 50% and optimize.offload_blocks: 1 are two grains; pin one" "why is said"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" optimize.offload=both optimize.offload_largest=0
expect_rc 2 "a share of 0 percent"
expect_in "$err" "optimize.offload_largest" "the key is named"
finish
