#!/bin/sh
# TensorBoard reads what trainrun writes: a run's event file loaded by TensorBoard's own code
# (tests/tensorboard_check.py, in the virtual environment scripts/setup makes) shows every
# metric at its step, the recipe and plan texts, the HParams session, histograms and the graph;
# every truncation of the file (a crash mid-write) loads what came before it; a run killed and
# resumed shows one continuous curve equal to an uninterrupted run's.
. "$srcdir/tests/lib.sh"
python=${TRAINRUN_TEST_PYTHON:-$srcdir/.venv/bin/python}
"$python" -c 'import tensorboard' 2>/dev/null ||
  { echo "SKIP: no Python with tensorboard at $python (scripts/setup makes .venv)"; exit 77; }
check() { "$python" "$srcdir/tests/tensorboard_check.py" "$@" || fail "tensorboard_check.py $1"; }
recipe="$srcdir/recipes/mlp.yaml"
# 1200 steps (about 3 s), every record written at once, so a kill finds some past a checkpoint.
set -- train.steps=1200 train.eval_every=200 report.log_every=10 report.histograms_every=300 \
  report.flush_every=0 --quiet

run "$TRAINRUN" "$recipe" report.dir="$scratch/a" "$@"
expect_rc 0 "a run with TensorBoard events"
"$TRAINRUN" check "$scratch"/a/mlp/latest/recipe.yaml --json >"$scratch/resolved.json"
checks=$((checks + 1)); check full "$scratch"/a/mlp/latest 300 "$scratch/resolved.json"
checks=$((checks + 1)); check cut "$scratch"/a/mlp/latest

# Killed with SIGKILL soon after its checkpoint at step 300, having logged steps past it, then
# resumed: the new session's SessionLog START at step 301 hides the dead session's later points.
"$TRAINRUN" "$recipe" report.dir="$scratch/b" "$@" train.checkpoint_every=300 >/dev/null 2>&1 &
pid=$!
dir=
last_step() { tail -n 1 "$1/metrics.jsonl" 2>/dev/null | sed -n 's/^{"step":\([0-9]*\).*/\1/p' | grep . || echo 0; }
for i in $(seq 2000); do   # until a step past the checkpoint is logged
  dir=$(ls -d "$scratch"/b/mlp/2* 2>/dev/null | head -n 1)
  [ -n "$dir" ] && [ -e "$dir/checkpoints/step-300.safetensors" ] && [ "$(last_step "$dir")" -gt 300 ] && break
  sleep 0.01
done
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ -e "$dir/checkpoints/step-1200.safetensors" ]; then
  echo "note: the run finished before SIGKILL; the resume below only re-evaluates"
else
  echo "killed after step $(last_step "$dir") was logged"
fi
checks=$((checks + 1)); check prefix "$dir" "$scratch"/a/mlp/latest
run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "resume"
checks=$((checks + 1)); check same "$dir" "$scratch"/a/mlp/latest
finish
