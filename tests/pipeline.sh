#!/bin/sh
# Pipeline parallelism over MPI (DESIGN.md §10), as a cluster runs it: mpirun --oversubscribe, one
# thread a rank. The model's blocks dealt to 2 and 4 stages (and 2 data ranks × 2 stages) train as
# one process does over the same micro-batches (it replays the pipelined run's plan.json): BERT to
# the bit — losses, and the checkpoint file itself — since each stage runs the one device's ops in
# its order; GPT, whose tied token embedding is read by the first and the last stage (its gradient
# summed between them), within 1e-5 relative. 1F1B, not GPipe: stage s keeps min(P − s, m)
# micro-batches between forward and backward (measured), the arena it uses at its peak as planned,
# and every rank's regions as predicted. Checkpoints hold whole tensors, so a pipelined run resumes
# on one process and a one-process run on 2 stages (resume's optimize.parallel overrides) to the
# same bits as uninterrupted. A budget only 2 stages fit: the planner spreads the model itself, and
# no rank passes the budget. A stage that dies ends every rank within distributed.timeout + 10 s.
# Layouts that cannot be are refused (status 2). Skipped (77) without mpirun or MPI.
. "$srcdir/tests/lib.sh"
mpi_ranks

bert="$srcdir/recipes/bert-small.yaml"
gpt="$srcdir/recipes/gpt-small.yaml"
short="train.steps=20 train.eval_every=10 train.eval_samples=64 train.checkpoint_every=10 report.log_every=1"

# ranks N LABEL RECIPE [key=value...]: N ranks train into $scratch/LABEL; the run folder in $dir.
ranks() {
  n=$1 label=$2
  shift 2
  # shellcheck disable=SC2086 # $short is a list of words
  run timeout 300 mpirun --oversubscribe --bind-to none -np "$n" "$TRAINRUN" "$@" $short report.dir="$scratch/$label" --quiet
  expect_rc 0 "$label: $n ranks"
  dir=$(echo "$scratch/$label"/*/latest)
}

# alone LABEL PLAN RECIPE [key=value...]: one process replays PLAN into $scratch/LABEL.
alone() {
  label=$1 plan=$2
  shift 2
  # shellcheck disable=SC2086
  run "$TRAINRUN" "$@" $short report.dir="$scratch/$label" --plan "$plan" --quiet
  expect_rc 0 "$label: one process"
  dir=$(echo "$scratch/$label"/*/latest)
}

# same_checkpoint A B WHAT: run folders A and B end with the same step-20 checkpoint, byte for byte.
same_checkpoint() {
  checks=$((checks + 1))
  cmp -s "$1/checkpoints/step-20.safetensors" "$2/checkpoints/step-20.safetensors" ||
    fail "$3: the checkpoints differ"
}

# as_1f1b DIR P M: DIR's run.json says each stage s kept min(P − s, M) micro-batches in flight
# (slots planned as many), its arena in use at that peak as planned, and each rank's regions as
# predicted, none above what the allocator held.
as_1f1b() {
  checks=$((checks + 1))
  python3 - "$1" "$2" "$3" <<'PY' || fail "$1: not 1F1B as planned"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
P, m = int(sys.argv[2]), int(sys.argv[3])
for r in run["ranks"]["each"]:
    p = r["pipeline"]
    want = min(P - p["stage"], m)
    assert p["in_flight_peak"] == want == p["slots"], (r["rank"], p, want)
    assert p["arena_in_use_peak_bytes"] == r["measured_regions"]["arena"], (r["rank"], p)
    assert r["measured_regions"] == r["predicted_regions"], (r["rank"], r["measured_regions"], r["predicted_regions"])
    print("rank %d, stage %d: %d micro-batches in flight of %d (1F1B: min(%d - %d, %d)), arena %d bytes as planned"
          % (r["rank"], p["stage"], p["in_flight_peak"], m, P, p["stage"], m, r["measured_regions"]["arena"]))
PY
}

# BERT, 2 and 4 stages, and 2 data ranks × 2 stages, 8 micro-batches a step (fixed batching, so m is
# known): the same bits as one process over the same micro-batches.
fixed="optimize.dynamic_batching=off optimize.accumulation=8"
# bert_stages N P M WHAT TOLERANCE: bert-small on N ranks, P stages, 8 micro-batches a step (M a
# pipeline's), 1F1B as planned, against one process over the same micro-batches; the pipelined
# run's folder in $piped.
bert_stages() {
  # shellcheck disable=SC2086
  ranks "$1" "bert-$1-$2" "$bert" $fixed optimize.parallel.pipeline="$2"
  piped=$dir
  as_1f1b "$piped" "$2" "$3"
  expect_in "$(cat "$piped/log.txt")" "ranks: $1 (started by mpirun) = $(($1 / $2)) data × $2 pipeline stages" \
    "$4: the log says the layout"
  alone "bert-$1-$2-alone" "$piped/plan.json" "$bert"
  same_losses "$piped" "$dir" "bert-small, $4" "$5" 20
}
bert_stages 2 2 8 "2 stages" 0
same_checkpoint "$piped" "$dir" "bert-small, 2 stages"
p2=$piped
bert_stages 4 4 8 "4 stages" 0
same_checkpoint "$piped" "$dir" "bert-small, 4 stages"
bert_stages 4 2 4 "2 data ranks × 2 stages" 1e-6

# GPT: the tied token embedding's gradient is the first and the last stage's parts summed
ranks 2 gpt-p2 "$gpt" optimize.parallel.pipeline=2
gp2=$dir
alone gpt-p2-alone "$gp2/plan.json" "$gpt"
same_losses "$gp2" "$dir" "gpt-small, 2 stages" 1e-5 20

# A budget no plan with the whole model on one rank fits, but 2 stages do: the planner spreads the
# model (its own choice of stages; tensor parallelism, which it would take here, left out), every
# rank's regions are as predicted, and no rank's resident set passes the budget — rank 0's
# included, which writes the checkpoints.
run timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" budget.memory=240MiB optimize.parallel.tensor=1 train.steps=10 \
  train.eval_every=5 train.eval_samples=64 train.checkpoint_every=5 report.dir="$scratch/budget" --quiet
expect_rc 0 "bert-small in 240 MiB a rank on 2 ranks"
dir=$(echo "$scratch/budget"/*/latest)
expect_in "$(cat "$dir/log.txt")" "2 pipeline stages" "the planner spread the model"
run "$TRAINRUN" plan "$bert" budget.memory=240MiB optimize.parallel.tensor=1 --ranks 2
expect_in "$out" "why: with the whole model on each rank nothing fits" "plan --ranks says why"
checks=$((checks + 1))
python3 - "$dir" 251658240 <<'PY' || fail "240 MiB a rank: a rank's regions or resident set are not as planned"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
for r in run["ranks"]["each"]:
    assert r["measured_regions"] == r["predicted_regions"], r
    assert r["peak_resident_bytes"] <= int(sys.argv[2]), r
    print("rank %d (stage %d): regions as predicted, peak resident %.1f MiB of 240" % (r["rank"], r["pipeline"]["stage"],
          r["peak_resident_bytes"] / 2**20))
PY
run "$TRAINRUN" plan "$bert" budget.memory=100MiB --ranks 2
expect_rc 3 "nothing fits in 100 MiB a rank, however spread"
expect_in "$err" "on each rank: the smallest footprint is" "says the smallest footprint a rank"

# Resume on another layout: a 2-stage run stopped by SIGTERM, resumed by one process; a one-process
# run stopped, resumed on 2 stages; each ends as the uninterrupted 2-stage run (the same bits).
long="train.steps=400 train.eval_every=0 train.eval_samples=64 train.checkpoint_every=20 report.log_every=1"
# shellcheck disable=SC2086
run timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" $long optimize.parallel.pipeline=2 \
  report.dir="$scratch/whole" --quiet
expect_rc 0 "the uninterrupted 2-stage run"
whole=$(echo "$scratch/whole"/*/latest)
# cut LABEL KEYS LAUNCH...: LAUNCH (the recipe, $long and KEYS follow) into $scratch/LABEL, SIGTERM
# once step 40 is checkpointed (lib.sh); the run folder in $dir.
cut() {
  label=$1 keys=$2
  shift 2
  # shellcheck disable=SC2086
  sigterm_cut "$label" 40 "$@" "$bert" $long $keys
}
# both replay the uninterrupted run's plan: the same micro-batches whatever the host's load when
# each planned (the ranks' bus rate, measured at the start, weighs the candidates)
cut two-to-one "optimize.parallel.pipeline=2 --plan $whole/plan.json" mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN"
run "$TRAINRUN" resume "$dir" optimize.parallel.pipeline=1 --quiet
expect_rc 0 "2 stages resumed by one process"
same_losses "$whole" "$dir" "2 stages, resumed by one process" 0 400
cut one-to-two "--plan $whole/plan.json" "$TRAINRUN"
run timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" resume "$dir" optimize.parallel.pipeline=2 --quiet
expect_rc 0 "one process resumed on 2 stages"
expect_in "$(cat "$dir/log.txt")" "2 pipeline stages" "the resumed part ran on 2 stages"
same_losses "$whole" "$dir" "one process, resumed on 2 stages" 0 400

# A stage killed mid-run: every rank ends within distributed.timeout + 10 s, none left running.
kill_rank1 "a killed stage" fault mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" train.steps=1000000 \
  train.eval_every=0 train.checkpoint_every=20 optimize.parallel.pipeline=2 distributed.timeout=5s

# Layouts that cannot be: refused before anything trains.
run timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" optimize.parallel.pipeline=3 \
  report.dir="$scratch/bad" --quiet
expect_rc 2 "3 stages on 2 ranks"
expect_in "$err" "optimize.parallel.pipeline 3 does not divide the 2 ranks" "says why"
run timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" model.layers=1 optimize.parallel.pipeline=2 \
  report.dir="$scratch/bad" --quiet
expect_rc 2 "2 stages of a 1-block model"
expect_in "$err" "the model has 1 block to deal to its stages" "says why"
run "$TRAINRUN" resume "$p2" train.steps=30 --quiet
expect_rc 2 "a resume with an override beside the layout"
finish
