#!/bin/sh
# model.init as a user meets it: a tiny GPT starts from a Hugging Face GPT2LMHeadModel checkpoint
# (tests/fixtures/hf/gpt2, vocabulary 100: a chars tokenizer listing 100 characters), then from
# its own run's checkpoint, whose optimizer state is ignored; a tokenizer of another size and a
# missing file are data errors (exit 4) that say what is wrong.
. "$srcdir/tests/lib.sh"
hf="$srcdir/tests/fixtures/hf/gpt2/model.safetensors"
{ printf '\\n\n'; printf '\\\\\n'
  for c in 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 \
           64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 93 94 95 \
           96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 \
           121 122 123 124 125 126; do
    printf "\\$(printf '%03o' "$c")\n"
  done
  printf 'é\næ\n—\nü\n'; } >"$scratch/chars.txt"
checks=$((checks + 1))
[ "$(wc -l <"$scratch/chars.txt")" -eq 100 ] || fail "the chars list has $(wc -l <"$scratch/chars.txt") lines, not 100"

# tiny KEY=VALUE...: trains the GPT of the fixture's config (2 layers, hidden 32, 2 heads,
# 32 positions) for a step on Jane Austen.
tiny() {
  run "$TRAINRUN" "$srcdir/recipes/gpt-small.yaml" model.layers=2 model.hidden=32 model.heads=2 model.ffn=128 \
    model.max_len=32 data.tokenizer.kind=chars data.tokenizer.vocab="$scratch/chars.txt" \
    '~data.tokenizer.merges' train.steps=1 train.batch_size=4 train.eval_every=100 data.num_workers=0 \
    report.dir="$scratch/runs" --quiet "$@"
}

tiny model.init="$hf"
expect_rc 0 "a GPT from a Hugging Face checkpoint"
dir=$(ls -d "$scratch"/runs/gpt-small/2* | head -n 1)
expect_in "$(cat "$dir/log.txt")" "model.init: 28 tensors from $hf" "the log says what was loaded"
expect_not_in "$(cat "$dir/log.txt")" "ignored" "save_pretrained's file has nothing to ignore"

tiny model.init="$dir/checkpoints/step-1.safetensors"
expect_rc 0 "a GPT from its own run's checkpoint"
dir2=$(ls -d "$scratch"/runs/gpt-small/2* | grep -v "^$dir\$" | head -n 1)
expect_in "$(cat "$dir2/log.txt")" "model.init: 28 tensors from $dir/checkpoints/step-1.safetensors; 56 of its \
tensors ignored (optimizer.m." "the optimizer state is counted as ignored"

head -n 99 "$scratch/chars.txt" >"$scratch/chars99.txt"
tiny model.init="$hf" data.tokenizer.vocab="$scratch/chars99.txt"
expect_rc 4 "a checkpoint of another vocabulary"
expect_in "$err" "model.init: $hf: tensor 'transformer.wte.weight' is [100, 32], the model's is [99, 32]: the \
checkpoint's vocabulary has 100 tokens, the tokenizer's ($scratch/chars99.txt) 99" "the vocabulary file is named"

tiny model.init="$scratch/nowhere.safetensors"
expect_rc 4 "a missing checkpoint"
expect_in "$err" "model.init: $scratch/nowhere.safetensors: cannot open" "the missing file is named"
finish
