#!/bin/sh
# The token cache as a user meets it: the first run on Jane Austen tokenises her and keeps the
# tokens in $XDG_CACHE_HOME/trainrun/tokens, one shard a split; the next run reads them and
# trains alike; a damaged shard is said and made again, a cache that cannot be written is a
# warning and not a failure, and TRAINRUN_NO_CACHE=1 leaves no trace.
. "$srcdir/tests/lib.sh"
tokens=$XDG_CACHE_HOME/trainrun/tokens

# gpt OUT [NAME=VALUE...]: a tiny GPT on Austen's bytes for 2 steps, its run under $scratch/OUT,
# with those changes to the environment.
gpt() {
  out_dir=$1
  shift
  run env "$@" "$TRAINRUN" "$srcdir/recipes/gpt-small.yaml" model.layers=1 model.hidden=32 model.heads=2 model.ffn=64 \
    model.max_len=32 data.tokenizer.kind=bytes '~data.tokenizer.vocab' '~data.tokenizer.merges' \
    train.steps=2 train.batch_size=4 train.eval_every=2 train.checkpoint_every=0 data.num_workers=0 \
    report.dir="$scratch/$out_dir" --quiet
}
losses() { grep -o '"train/loss":[^,]*' "$scratch/$1"/gpt-small/latest/metrics.jsonl; }
# The shards: inode, change time and size of each, by name.
listing() { (cd "$tokens" 2>/dev/null && stat -c '%n %i %Z %s' *); }

gpt first
expect_rc 0 "the first run"
expect_not_in "$err" "warning" "the first run"
checks=$((checks + 1))
[ "$(ls "$tokens" | grep -c '^austen\.\(train\|valid\|test\)\.[0-9a-f]\{64\}\.shard$')" = 3 ] ||
  fail "one shard a split expected in $tokens: $(ls "$tokens")"
before=$(listing)

gpt second
expect_rc 0 "the second run"
expect_not_in "$err" "warning" "the second run"
checks=$((checks + 1))
[ "$(listing)" = "$before" ] || fail "the second run wrote the shards again: $before, then $(listing)"
checks=$((checks + 1))
[ "$(losses second)" = "$(losses first)" ] || fail "the runs differ: $(losses first), then $(losses second)"

# A shard cut short: said, tokenised again, written again whole.
train=$(ls "$tokens"/austen.train.*.shard)
head -c 100 "$train" >"$scratch/short" && cat "$scratch/short" >"$train"
gpt damaged
expect_rc 0 "a damaged shard"
expect_in "$err" "trainrun: warning: $train: a damaged token cache shard (100 bytes, shorter than its header); tokenising again" \
  "a damaged shard is said"
checks=$((checks + 1))
[ "$(stat -c %s "$train")" -gt 100 ] || fail "the damaged shard was not made again"
checks=$((checks + 1))
[ "$(losses damaged)" = "$(losses first)" ] || fail "the run on a damaged shard differs"

# A cache that cannot be written: XDG_CACHE_HOME names a file.
echo "not a folder" >"$scratch/a-file"
gpt unwritable XDG_CACHE_HOME="$scratch/a-file"
expect_rc 0 "an unwritable cache"
expect_in "$err" "trainrun: warning: $scratch/a-file/trainrun/tokens: cannot write the token cache: Not a directory" \
  "an unwritable cache is said"

# Off: nothing written, nothing said.
gpt off TRAINRUN_NO_CACHE=1 XDG_CACHE_HOME="$scratch/off"
expect_rc 0 "TRAINRUN_NO_CACHE=1"
expect_not_in "$err" "warning" "TRAINRUN_NO_CACHE=1"
checks=$((checks + 1))
[ ! -e "$scratch/off/trainrun/tokens" ] || fail "TRAINRUN_NO_CACHE=1 made $scratch/off/trainrun/tokens"
finish
