#!/bin/sh
# Sampling as a user meets it: train a tiny GPT on Jane Austen for 30 steps, then ask it to go
# on from a prompt; the same seed gives the same text, the window slides past model.max_len, a
# damaged newest checkpoint is passed over, and what is not a GPT run or not a run is refused.
. "$srcdir/tests/lib.sh"
"$TRAINRUN" "$srcdir/recipes/gpt-small.yaml" model.layers=1 model.hidden=32 model.heads=2 model.ffn=64 \
  model.max_len=32 data.tokenizer.kind=bytes '~data.tokenizer.vocab' '~data.tokenizer.merges' \
  train.steps=30 train.batch_size=8 train.checkpoint_every=10 train.eval_every=30 data.num_workers=0 \
  report.dir="$scratch/runs" --quiet >"$scratch/train.out" 2>&1 ||
  { fail "training the tiny GPT: $(cat "$scratch/train.out")"; finish; }
dir=$(ls -d "$scratch"/runs/gpt-small/2* | head -n 1)
prompt="It is a truth"

run "$TRAINRUN" sample "$dir" --prompt "$prompt" --tokens 20 --seed 1
expect_rc 0 "sample"
first=$out
expect_in "$first" "$prompt" "the sample shows the prompt"
checks=$((checks + 1))
case "$first" in "$prompt"?*) ;; *) fail "the sample does not start with the prompt and go on: '$first'" ;; esac
run "$TRAINRUN" sample "$dir" --prompt "$prompt" --tokens 20 --seed 1
expect_rc 0 "sample again"
checks=$((checks + 1))
[ "$out" = "$first" ] || fail "the same seed gave another text: '$first', then '$out'"
run "$TRAINRUN" sample "$dir" --prompt="$prompt" --tokens=20 --seed=2 --top-k=0 --temperature=1.5
expect_rc 0 "sample with every option as --name=value"
checks=$((checks + 1))
[ "$out" != "$first" ] || fail "seeds 1 and 2 gave the same 20 bytes at temperature 1.5: '$out'"

# Greedy: the seed does not matter. 40 tokens after a 13-byte prompt pass max_len 32: the
# window slides (the cache recomputed each token after that).
run "$TRAINRUN" sample "$dir" --prompt "$prompt" --tokens 40 --temperature 0 --seed 5
expect_rc 0 "greedy sample past the context"
greedy=$out
run "$TRAINRUN" sample "$dir" --prompt "$prompt" --tokens 40 --temperature 0 --seed 6
checks=$((checks + 1))
[ "$out" = "$greedy" ] || fail "temperature 0 depends on the seed: '$greedy', then '$out'"
# Bytes drawn one at a time still print as UTF-8: a character is written once its last byte is
# drawn, and bytes that make none become U+FFFD.
run "$TRAINRUN" sample "$dir" --prompt "Five hundred £ a year" --tokens 60 --temperature 2 --top-k 0
expect_rc 0 "a hot sample over every byte"
expect_in "$out" "Five hundred £ a year" "the prompt is printed as given"
checks=$((checks + 1))
printf '%s' "$out" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1 || fail "the sample is not UTF-8: '$out'"
# A prompt longer than the window: only its last 32 tokens are the context.
long="It is a truth universally acknowledged, that a single man in possession of a good fortune"
run "$TRAINRUN" sample "$dir" --prompt "$long" --tokens 5
expect_rc 0 "a prompt longer than model.max_len"
expect_in "$out" "$long" "the long prompt is printed whole"

# The newest checkpoint damaged: the one before is used, and the damaged one named.
cp "$dir/checkpoints/step-30.safetensors" "$scratch/step-30.safetensors"
head -c 3000 "$scratch/step-30.safetensors" >"$dir/checkpoints/step-30.safetensors"
run "$TRAINRUN" sample "$dir" --prompt "$prompt" --tokens 5
expect_rc 0 "sample past a damaged checkpoint"
expect_in "$err" "skipped a damaged checkpoint: $dir/checkpoints/step-30.safetensors" "the damaged file is named"
mkdir "$scratch/empty" && cp "$dir/recipe.yaml" "$scratch/empty/"
run "$TRAINRUN" sample "$scratch/empty" --prompt "$prompt"
expect_rc 2 "a run without checkpoints"
expect_in "$err" "holds no checkpoint that verifies" "the message says why"
cp "$scratch/step-30.safetensors" "$dir/checkpoints/step-30.safetensors"

# SGD's checkpoints hold momentum buffers where AdamW's hold m and v: they verify too.
"$TRAINRUN" "$srcdir/recipes/gpt-small.yaml" model.layers=1 model.hidden=32 model.heads=2 model.ffn=64 \
  model.max_len=32 data.tokenizer.kind=bytes '~data.tokenizer.vocab' '~data.tokenizer.merges' \
  train.steps=5 train.batch_size=8 'train.optimizer={name: sgd, lr: 0.1, momentum: 0.9}' data.num_workers=0 \
  report.dir="$scratch/sgd" --quiet >"$scratch/train.out" 2>&1 || fail "training with SGD: $(cat "$scratch/train.out")"
run "$TRAINRUN" sample "$(ls -d "$scratch"/sgd/gpt-small/2* | head -n 1)" --prompt "$prompt" --tokens 5
expect_rc 0 "sample from an SGD run"
expect_not_in "$err" "skipped" "the SGD checkpoint verifies"

# Not a GPT's run folder, not a run folder, bad numbers: exit 2 with a sentence.
mkdir "$scratch/mlp"
"$TRAINRUN" check "$srcdir/recipes/mlp.yaml" >"$scratch/mlp/recipe.yaml"
run "$TRAINRUN" sample "$scratch/mlp" --prompt "$prompt"
expect_rc 2 "a run of an mlp"
expect_in "$err" "model.arch mlp; sample generates text from language models (model.arch gpt) only" \
  "the message names the architecture"
run "$TRAINRUN" sample "$scratch/nowhere" --prompt "$prompt"
expect_rc 2 "a missing run folder"
expect_in "$err" "is not a run folder" "the message says why"
run "$TRAINRUN" sample "$dir"
expect_rc 2 "no prompt"
expect_in "$err" "needs a prompt" "the message asks for one"
run "$TRAINRUN" sample "$dir" --prompt
expect_rc 2 "--prompt without its text"
expect_in "$err" "option '--prompt' needs a value" "the message names the option"
for bad in "--tokens 0" "--tokens -3" "--tokens 2x" "--temperature -1" "--temperature nan" "--top-k -1" \
  "--seed -1"; do
  run "$TRAINRUN" sample "$dir" --prompt "$prompt" $bad
  expect_rc 2 "sample $bad"
  expect_in "$err" "${bad%% *} ${bad#* }: expected" "sample $bad names the option and its value"
done
run "$TRAINRUN" sample "$dir" --prompt "$prompt" model.max_len=64
expect_rc 2 "an override"
expect_in "$err" "takes no overrides" "sample refuses overrides"
run "$TRAINRUN" sample --help
expect_rc 0 "sample --help"
expect_in "$out" "usage: trainrun sample RUN_DIR --prompt TEXT" "sample --help prints its usage"
finish
