#!/bin/sh
# Crash and resume, as cron meets it: a run killed with SIGKILL at 5 random moments and resumed
# each time ends with the same weights and optimizer state, bit for bit, as a run never
# interrupted; SIGTERM checkpoints and exits 130; a damaged newest checkpoint is passed over;
# Lion's state round-trips as AdamW's does; a folder that never started is not resumed.
. "$srcdir/tests/lib.sh"
recipe="$srcdir/recipes/mlp.yaml"
set -- train.checkpoint_every=20 data.num_workers=1 --quiet
"$TRAINRUN" "$recipe" report.dir="$scratch/a" "$@" >/dev/null || fail "the uninterrupted run"
reference=$(ls "$scratch"/a/mlp/latest/checkpoints/step-600.safetensors)

# A random delay in seconds between 0.05 and 0.8, different each call (awk's srand uses time).
delay() { awk -v seed="$(od -An -N4 -tu4 /dev/urandom)" 'BEGIN { srand(seed); printf "%.2f", 0.05 + rand() * 0.75 }'; }
# The first run folder that began training (has run.json); one killed while being set up never
# started, and resume refuses it: the test then starts a new run, as cron's --resume auto does.
started() { for d in "$scratch"/b/mlp/2*; do [ -f "$d/run.json" ] && echo "$d" && break; done; }
kills=0
"$TRAINRUN" "$recipe" report.dir="$scratch/b" "$@" >/dev/null 2>&1 &
pid=$!
while [ "$kills" -lt 5 ]; do
  sleep "$(delay)"
  if kill -KILL "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
  wait "$pid" 2>/dev/null
  dir=$(started)
  if [ -n "$dir" ]; then
    "$TRAINRUN" resume "$dir" --quiet >/dev/null 2>&1 &
  else   # killed before a run folder began: start again
    "$TRAINRUN" "$recipe" report.dir="$scratch/b" "$@" >/dev/null 2>&1 &
  fi
  pid=$!
done
wait "$pid"
dir=$(started)
if [ -z "$dir" ]; then   # every kill came during set-up: the last process was a fresh run that finished
  dir=$(ls -d "$scratch"/b/mlp/2* | tail -n 1)
fi
run "$TRAINRUN" resume "$dir" --quiet   # finished already, or finishes now
expect_rc 0 "the last resume"
checks=$((checks + 1))
cmp -s "$reference" "$dir/checkpoints/step-600.safetensors" ||
  fail "after $kills kills and resumes the final checkpoint differs from the uninterrupted run's"
echo "killed $kills times; $(grep -c '^resuming' "$dir/log.txt") resumes logged"

# SIGTERM: the step in progress finishes, a checkpoint is written, exit 130, resume finishes.
"$TRAINRUN" "$recipe" report.dir="$scratch/c" train.checkpoint_every=0 data.num_workers=0 >"$scratch/c.out" 2>&1 &
pid=$!
for i in $(seq 500); do   # until training has begun: a signal during start-up is not this test's
  [ -s "$(ls -d "$scratch"/c/mlp/2* 2>/dev/null | head -n 1)/metrics.jsonl" ] && break
  sleep 0.01
done
kill -TERM "$pid"
wait "$pid"
rc=$?
if grep -q "^done:" "$scratch/c.out"; then
  echo "note: the run finished before SIGTERM arrived; the signal path was not exercised"
else
  expect_rc 130 "SIGTERM"
  expect_in "$(cat "$scratch/c.out")" "trainrun resume" "the signal message says how to continue"
  dir=$(ls -d "$scratch"/c/mlp/2*)
  run "$TRAINRUN" resume "$dir" --quiet
  expect_rc 0 "resume after SIGTERM"
  checks=$((checks + 1))
  cmp -s "$reference" "$dir/checkpoints/step-600.safetensors" || fail "SIGTERM + resume changed the result"
  # run.json keeps both parts: the first ended 130, the second 0; the report says finished.
  json=$(tr -d ' \n' <"$dir/run.json")
  expect_in "$json" '"exit_code":130,"from_step":0' "run.json: the interrupted part"
  expect_in "$json" '"exit_code":0,"from_step":' "run.json: the resumed part"
  expect_in "$(cat "$dir/report.json")" '"status": "finished"' "the resumed run's report"
fi
# The killed and resumed run: each process that got going left its part in run.json.
json=$(cat "$(started)/run.json")
checks=$((checks + 1))
[ "$(printf '%s' "$json" | grep -c '"from_step"')" -ge 2 ] || fail "run.json of a run resumed $kills times has one part"

# A damaged newest checkpoint is skipped with a warning, and the run continues from the one before.
dir=$(ls -d "$scratch"/a/mlp/2*)
rm "$dir"/checkpoints/step-600.safetensors
head -c 3000 "$dir"/checkpoints/step-580.safetensors >"$dir/cut" && mv "$dir/cut" "$dir"/checkpoints/step-580.safetensors
run "$TRAINRUN" resume "$dir"
expect_rc 0 "resume past a damaged checkpoint"
expect_in "$out" "skipped damaged checkpoints" "the damaged file is reported"
expect_in "$out" "resuming $dir at step 560" "the previous checkpoint is used"
checks=$((checks + 1))
cmp -s "$reference" "$dir/checkpoints/step-600.safetensors" || fail "resuming from step 560 changed the result"

# Lion's one state tensor (m) round-trips too: resumed from step 560, the final checkpoint is the
# uninterrupted run's, byte for byte.
lion="train.optimizer.name=lion train.optimizer.lr=1.0e-4 train.optimizer.betas=[0.9,0.99]"
# shellcheck disable=SC2086
"$TRAINRUN" "$recipe" report.dir="$scratch/l" $lion "$@" >/dev/null || fail "the uninterrupted Lion run"
dir=$(ls -d "$scratch"/l/mlp/2*)
cp "$dir/checkpoints/step-600.safetensors" "$scratch/lion-600"
rm "$dir"/checkpoints/step-600.safetensors "$dir"/checkpoints/step-580.safetensors
run "$TRAINRUN" resume "$dir"
expect_rc 0 "resume of a Lion run"
expect_in "$out" "resuming $dir at step 560" "Lion's checkpoint verifies"
checks=$((checks + 1))
cmp -s "$scratch/lion-600" "$dir/checkpoints/step-600.safetensors" || fail "resuming a Lion run changed the result"

run "$TRAINRUN" resume "$scratch/nowhere"
expect_rc 2 "resume of a folder that is not a run"
expect_in "$err" "is not a run folder" "the message says why"

# A run folder whose setting up was cut short (no run.json): resume says it never started, and
# --resume auto passes it by and starts a new run.
dir=$(ls -d "$scratch"/a/mlp/2*)
rm "$dir/run.json"
run "$TRAINRUN" resume "$dir"
expect_rc 2 "resume of a folder that never started"
expect_in "$err" "$dir never started: it has no run.json" "the message says so"
run "$TRAINRUN" "$recipe" report.dir="$scratch/a" train.steps=20 --resume auto
expect_rc 0 "--resume auto past a folder that never started"
expect_in "$out" "never started" "--resume auto says why it starts a new run"
finish
