#!/bin/sh
# How a run ends when it is told to stop, as cron, systemd and a closed terminal tell it:
# budget.time stops it by the clock (checkpointed, evaluated, reported, exit 8, run.json says
# "time-limit", and each resume gets the time again); SIGHUP ends it as SIGINT and SIGTERM do
# (checkpoint, exit 130, run.json names the signal); a signal during the final evaluation ends
# it at once and the resume evaluates again; no thread but one takes a stop signal, and a run
# sent SIGTERM hundreds of times a second through its GEMMs stops cleanly and resumes; and a run killed with SIGKILL again and again,
# then resumed, has each step once in metrics.jsonl and its event files, the first of which
# keeps the recipe, plan, HParams and graph.
. "$srcdir/tests/lib.sh"
python=${TRAINRUN_TEST_PYTHON:-$srcdir/.venv/bin/python}
recipe="$srcdir/recipes/mlp.yaml"
newest() { ls -d "$1"/mlp/2* 2>/dev/null | tail -n 1; }
# json FILE EXPR: a value of a JSON file, by a Python expression over j.
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
# wait_for TEST...: polls (10 ms) until the test holds, for at most a minute.
wait_for() {
  for i in $(seq 6000); do "$@" && return 0; sleep 0.01; done
  return 1
}

# ---- budget.time -------------------------------------------------------------------------------
# 100,000 steps take minutes; budget.time=3s stops the run after the step in progress when the
# three seconds since it started (data and planning included) are up.
set -- train.steps=100000 budget.time=3s train.checkpoint_every=0 data.num_workers=0 report.dir="$scratch/t"
run timeout 300 "$TRAINRUN" "$recipe" "$@"
expect_rc 8 "a run past its budget.time"
dir=$(newest "$scratch/t")
expect_in "$out" "stopped by budget.time" "the last line says the clock stopped it"
expect_in "$out" "trainrun resume $dir" "and how to continue"
expect_in "$out" "test accuracy" "the run was evaluated on its test split"
expect_in "$err" "budget.time (3 s)" "the message names the budget"
first=$(json "$dir/run.json" 'j["segments"][0]["to_step"]')
checks=$((checks + 1))
[ "$first" -ge 1 ] && [ "$first" -lt 100000 ] || fail "budget.time: stopped after step $first"
expect_in "$(json "$dir/run.json" 'j["outcome"], j["exit_code"], j["segments"][0]["outcome"]')" \
  "time-limit 8 time-limit" "run.json says the clock stopped it"
expect_in "$(json "$dir/report.json" 'j["status"]')" "time-limit" "report.json's status"
checks=$((checks + 1))
[ -f "$dir/checkpoints/step-$first.safetensors" ] || fail "budget.time: no checkpoint of step $first"
expect_in "$(grep '"test/accuracy"' "$dir/metrics.jsonl")" "{\"step\":$first," "the test numbers at the last step"
# A resume gets the whole budget again, from its own start: it trains on and stops by the clock.
run timeout 300 "$TRAINRUN" resume "$dir" --quiet
expect_rc 8 "a resumed run past its budget.time"
checks=$((checks + 1))
[ "$(json "$dir/run.json" 'j["segments"][1]["from_step"]')" = "$first" ] &&
  [ "$(json "$dir/run.json" 'j["segments"][1]["to_step"]')" -gt "$first" ] ||
  fail "the resumed part did not go on from step $first: $(cat "$dir/run.json")"
# --resume auto continues a run the clock stopped, like one a signal stopped.
run timeout 300 "$TRAINRUN" "$recipe" "$@" --resume auto
expect_rc 8 "--resume auto of a run stopped by budget.time"
expect_in "$(json "$dir/run.json" 'len(j["segments"])')" "3" "--resume auto went on in the same folder"

# ---- SIGHUP, as SIGINT and SIGTERM ----------------------------------------------------------------
set -- train.checkpoint_every=0 data.num_workers=0 --quiet
"$TRAINRUN" "$recipe" report.dir="$scratch/ref" "$@" >/dev/null 2>&1 || fail "the uninterrupted run"
"$TRAINRUN" "$recipe" report.dir="$scratch/h" train.steps=600 "$@" >"$scratch/h.out" 2>&1 &
pid=$!
started() { [ -s "$(newest "$scratch/h")/metrics.jsonl" ]; }
wait_for started
kill -HUP "$pid"
wait "$pid"
rc=$? err=$(cat "$scratch/h.out")
dir=$(newest "$scratch/h")
if [ "$rc" = 0 ]; then
  echo "note: the run finished before SIGHUP arrived; the signal path was not exercised"
else
  expect_rc 130 "SIGHUP"
  expect_in "$(cat "$scratch/h.out")" "stopped by SIGHUP" "the message names the signal"
  expect_in "$(json "$dir/run.json" 'j["signal"], j["outcome"], j["segments"][0]["signal"]')" \
    "SIGHUP interrupted SIGHUP" "run.json names the signal"
  step=$(json "$dir/run.json" 'j["segments"][0]["to_step"]')
  checks=$((checks + 1))
  [ -f "$dir/checkpoints/step-$step.safetensors" ] || fail "SIGHUP: no checkpoint of step $step"
  run "$TRAINRUN" resume "$dir" --quiet
  expect_rc 0 "resume after SIGHUP"
  checks=$((checks + 1))
  cmp -s "$(newest "$scratch/ref")/checkpoints/step-600.safetensors" "$dir/checkpoints/step-600.safetensors" ||
    fail "SIGHUP + resume changed the result"
fi

# ---- no thread takes a signal in the middle of its work -----------------------------------------
# A signal handler's frame lands below the interrupted thread's stack pointer, where oneDNN's f32
# GEMM kernels keep state (a SIGTERM during one corrupted the heap: core/stop.h). Every thread of
# a run blocks SIGINT, SIGTERM and SIGHUP but the one that takes them; a run sent SIGTERM every
# few milliseconds through a half-second step of bert-small's GEMMs (on oneDNN, whatever the CPU)
# stops after that step, checkpointed, and resumes.
bert="$srcdir/recipes/bert-small.yaml"
set -- train.batch_size=512 train.steps=4 train.eval_every=0 train.eval_samples=64 report.log_every=1 --quiet
TR_CPU_GEMM=onednn "$TRAINRUN" "$bert" "$@" report.dir="$scratch/storm" >"$scratch/storm.out" 2>&1 &
pid=$!
stepped() { grep -qs "^step 1/" "$scratch"/storm/bert-small/*/log.txt; }
# up to 5 minutes: where f32 GEMMs are not oneDNN's by default (AVX2), TR_CPU_GEMM=onednn is
# another set of kernels, which the run calibrates first
for i in $(seq 300); do stepped && break; kill -0 "$pid" 2>/dev/null || break; sleep 1; done
checks=$((checks + 1))
unblocked=$(for t in /proc/"$pid"/task/*; do
  [ "$(cat "$t/comm" 2>/dev/null)" = trainrun-stop ] && continue
  mask=$(sed -n 's/^SigBlk:[[:space:]]*//p' "$t/status" 2>/dev/null)
  [ -n "$mask" ] && [ $((0x$mask & 0x4003)) != $((0x4003)) ] && echo "${t##*/}"
done)
[ -z "$unblocked" ] || fail "threads $unblocked of a run take stop signals themselves"
while kill -TERM "$pid" 2>/dev/null; do sleep 0.002; done
wait "$pid"
rc=$? err=$(cat "$scratch/storm.out")
expect_rc 130 "a run sent SIGTERM hundreds of times a second"
expect_in "$err" "stopped by SIGTERM after step" "it stopped after the step"
dir=$(echo "$scratch"/storm/bert-small/2*)
run env TR_CPU_GEMM=onednn "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "the resume after the storm"

# ---- a signal during the final evaluation ------------------------------------------------------
# A wide MLP on Fashion-MNIST's 10,000 test images: one step, then seconds of evaluation.
set -- data.dataset=fashion-mnist model.hidden=1024 model.layers=3 train.steps=1 budget.memory=2GiB \
  data.num_workers=0 report.dir="$scratch/e"
if [ -r /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
  "$TRAINRUN" "$recipe" "$@" >"$scratch/e.out" 2>&1 &
  pid=$!
  validated() { grep -q "eval loss" "$(newest "$scratch/e")/log.txt" 2>/dev/null; }
  wait_for validated
  kill -TERM "$pid"
  wait "$pid"
  rc=$? err=$(cat "$scratch/e.out")
  dir=$(newest "$scratch/e")
  if grep -q "^done:" "$scratch/e.out"; then
    echo "note: the test evaluation ended before SIGTERM arrived; the signal path was not exercised"
  else
    expect_rc 130 "SIGTERM during the test evaluation"
    expect_in "$(cat "$scratch/e.out")" "stopped by SIGTERM during evaluation (test split)" "the message says when"
    expect_in "$(json "$dir/run.json" 'j["signal"], j["exit_code"]')" "SIGTERM 130" "run.json"
    checks=$((checks + 1))
    [ -f "$dir/checkpoints/step-1.safetensors" ] || fail "no checkpoint before the test evaluation"
    checks=$((checks + 1))
    grep -q '"test/loss"' "$dir/metrics.jsonl" && fail "an interrupted test evaluation logged its numbers"
    run "$TRAINRUN" resume "$dir" --quiet
    expect_rc 0 "resume after a signal during the test evaluation"
    expect_in "$(grep -c '"test/loss"' "$dir/metrics.jsonl")" "1" "the resume evaluated the test split once"
  fi
else
  echo "note: no Fashion-MNIST (apt-get install dataset-fashion-mnist): the evaluation case is skipped"
fi

# ---- SIGKILL, again and again ------------------------------------------------------------------
"$python" -c 'import tensorboard' 2>/dev/null ||
  { echo "note: no Python with tensorboard at $python: the event-file cases are skipped"; finish; }
check() { checks=$((checks + 1)); "$python" "$srcdir/tests/tensorboard_check.py" "$@" || fail "tensorboard_check.py $*"; }
# Killed before its first checkpoint, with events held back (report.flush_every 1h): the file
# already holds the recipe, plan, HParams and graph.
set -- train.steps=100000 train.checkpoint_every=0 report.log_every=1 report.flush_every=1h data.num_workers=0
"$TRAINRUN" "$recipe" report.dir="$scratch/k1" "$@" >/dev/null 2>&1 &
pid=$!
logged() { [ "$(cat "$(newest "$scratch/k1")/metrics.jsonl" 2>/dev/null | wc -l)" -ge 3 ]; }
wait_for logged
kill -KILL "$pid"
wait "$pid" 2>/dev/null
check once "$(newest "$scratch/k1")" full
# Checkpoints every 7 steps, a line a step: killed at 5 moments and resumed each time, then
# finished; each step is once in metrics.jsonl and in the event files' raw records.
set -- train.steps=1500 train.checkpoint_every=7 report.log_every=1 report.flush_every=0 data.num_workers=0 --quiet
delay() { awk -v seed="$(od -An -N4 -tu4 /dev/urandom)" 'BEGIN { srand(seed); printf "%.2f", 1.5 + rand() * 2 }'; }
"$TRAINRUN" "$recipe" report.dir="$scratch/k" "$@" >/dev/null 2>&1 &
pid=$!
kills=0 tries=0
while [ "$kills" -lt 5 ] && [ "$tries" -lt 40 ]; do   # a resume that fails at once must not loop
  tries=$((tries + 1))
  sleep "$(delay)"
  if kill -KILL "$pid" 2>/dev/null; then
    kills=$((kills + 1))
    wait "$pid" 2>/dev/null
  elif wait "$pid" 2>/dev/null; then
    break   # it finished before the next kill (a fast machine): nothing left to kill
  fi
  dir=$(newest "$scratch/k")
  if [ -n "$dir" ] && [ -f "$dir/recipe.yaml" ]; then
    "$TRAINRUN" resume "$dir" --quiet >/dev/null 2>&1 &
  else
    "$TRAINRUN" "$recipe" report.dir="$scratch/k" "$@" >/dev/null 2>&1 &
  fi
  pid=$!
done
wait "$pid" 2>/dev/null
dir=$(newest "$scratch/k")
run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "the last resume"
echo "killed $kills times; $(grep -c '^resuming' "$dir/log.txt") resumes logged"
check once "$dir" full
# A resume of the finished run evaluates again; its numbers replace the earlier ones.
run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "a resume of the finished run"
check once "$dir"
finish
