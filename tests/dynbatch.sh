#!/bin/sh
# Dynamic batching as a user turns it on for a text classifier (a tiny BERT on wordnet-senses):
# the run logs its buckets, its padding fraction, tokens per second and micro-steps per step;
# it pads far less than fixed batches padded to each batch's longest; the steps are the same for
# 0 and 2 loader threads, and a run resumed from a middle checkpoint ends with the same weights,
# bit for bit. Feature vectors have no lengths to batch by: refused.
. "$srcdir/tests/lib.sh"
tiny="model.layers=1 model.hidden=32 model.heads=2 model.ffn=64 train.batch_size=16 train.steps=12
      train.eval_every=0 train.checkpoint_every=6 report.log_every=4 optimize.accumulation=2"
train() {   # train NAME OVERRIDES...: a run in $scratch/NAME (the checkpoints keep the recipe's name)
  name=$1
  shift
  # shellcheck disable=SC2086
  run "$TRAINRUN" "$srcdir/recipes/bert-small.yaml" $tiny report.dir="$scratch/$name" "$@"
  expect_rc 0 "$name"
}
last() {   # last NAME TAG: the tag's value on the run's last metrics line that has it
  grep "\"$2\"" "$scratch/$1/bert-small/latest/metrics.jsonl" | tail -n 1 |
    sed "s|.*\"$2\":\([-0-9.e+]*\).*|\1|"
}
train fixed data.num_workers=1
train dynamic optimize.dynamic_batching=on optimize.dynamic_batching.tokens=256 data.num_workers=2
expect_in "$out" "plan: dynamic batching, micro-batches of 16×16, 8×32, 4×64, 2×128 (rows × tokens)" \
  "the buckets: powers of two up to the longest, rows from the token budget"
for tag in data/padding_fraction train/tokens_per_s train/micro_steps; do
  expect_in "$(grep '"step":12,"train' "$scratch/dynamic/bert-small/latest/metrics.jsonl")" "\"$tag\"" \
    "$tag is logged"
done
checks=$((checks + 1))
awk -v f="$(last fixed data/padding_fraction)" -v d="$(last dynamic data/padding_fraction)" \
  'BEGIN { exit !(f > 0.5 && d < 0.1) }' ||
  fail "padding: fixed $(last fixed data/padding_fraction), dynamic $(last dynamic data/padding_fraction)"
checks=$((checks + 1))
awk -v m="$(last dynamic train/micro_steps)" 'BEGIN { exit !(m >= 2) }' ||
  fail "micro-steps: $(last dynamic train/micro_steps) a step, at least 2 with rows of at most 16 in steps of 16"

train dynamic-0 optimize.dynamic_batching=on optimize.dynamic_batching.tokens=256 data.num_workers=0
reference=$scratch/dynamic/bert-small/latest/checkpoints/step-12.safetensors
checks=$((checks + 1))
cmp -s "$reference" "$scratch/dynamic-0/bert-small/latest/checkpoints/step-12.safetensors" ||
  fail "0 and 2 loader threads trained differently"

dir=$(readlink -f "$scratch/dynamic-0/bert-small/latest")
rm "$dir/checkpoints/step-12.safetensors"
run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "resume at step 6"
checks=$((checks + 1))
cmp -s "$reference" "$dir/checkpoints/step-12.safetensors" || fail "resuming at step 6 changed the weights"

run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" optimize.dynamic_batching=on report.dir="$scratch/mlp"
expect_rc 2 "dynamic batching of feature vectors"
expect_in "$err" "optimize.dynamic_batching: on batches text by length; data set digits holds feature vectors" \
  "the refusal says why"
finish
