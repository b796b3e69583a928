#!/bin/sh
# Gradient checkpointing through the real binary: an MLP and a tiny GPT, dropout on, trained
# with optimize.checkpointing off, full, selective and a number of blocks, end their runs with
# checkpoints that are the same bytes; the plan each run records (in TensorBoard's text) says
# which checkpointing it applied.
. "$srcdir/tests/lib.sh"

# plan_says DIR WORDS WHAT: the run's event file holds the plan sentence WORDS.
plan_says() {
  checks=$((checks + 1))
  grep -aq "$2" "$1"/events.out.tfevents.* || fail "$3: the plan does not say '$2'"
}

# same_end SETTING BASE DIR STEP: DIR's last checkpoint is BASE's, byte for byte.
same_end() {
  checks=$((checks + 1))
  cmp -s "$2/checkpoints/step-$4.safetensors" "$3/checkpoints/step-$4.safetensors" ||
    fail "checkpointing $1 trains elsewhere than off"
}

mlp() {
  run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=20 train.checkpoint_every=20 \
    optimize.checkpointing=$1 report.dir="$scratch/mlp-$1" --quiet
  expect_rc 0 "the MLP, checkpointing $1"
}
for setting in off auto full 1 selective; do mlp $setting; done
base="$scratch/mlp-off/mlp/latest"
plan_says "$base" "fp32, no gradient checkpointing," "off"
plan_says "$scratch/mlp-auto/mlp/latest" "no gradient checkpointing," "auto: the planner needs none"
plan_says "$scratch/mlp-auto/mlp/latest" "The planner: fp32, checkpointing none" "auto: the planner's reason"
plan_says "$scratch/mlp-full/mlp/latest" "full recomputation of all 2 blocks" "full"
plan_says "$scratch/mlp-1/mlp/latest" "full recomputation of block 0 of 2" "one block"
plan_says "$scratch/mlp-selective/mlp/latest" "nothing in this model is cheap to recompute" "selective"
for setting in full 1 selective; do same_end $setting "$base" "$scratch/mlp-$setting/mlp/latest" 20; done

gpt() {
  run "$TRAINRUN" "$srcdir/recipes/gpt-small.yaml" model.layers=3 model.hidden=32 model.heads=2 model.ffn=64 \
    model.max_len=32 data.tokenizer.kind=bytes '~data.tokenizer.vocab' '~data.tokenizer.merges' \
    train.steps=10 train.batch_size=8 train.checkpoint_every=10 train.eval_every=10 data.num_workers=0 \
    optimize.checkpointing=$1 report.dir="$scratch/gpt-$1" --quiet
  expect_rc 0 "the GPT, checkpointing $1"
}
for setting in off full 2 selective; do gpt $setting; done
base="$scratch/gpt-off/gpt-small/latest"
plan_says "$scratch/gpt-full/gpt-small/latest" "full recomputation of all 3 blocks" "GPT full"
plan_says "$scratch/gpt-2/gpt-small/latest" "full recomputation of blocks 0–1 of 3" "GPT two blocks"
plan_says "$scratch/gpt-selective/gpt-small/latest" "selective recomputation in all 3 blocks" "GPT selective"
for setting in full 2 selective; do same_end $setting "$base" "$scratch/gpt-$setting/gpt-small/latest" 10; done
finish
