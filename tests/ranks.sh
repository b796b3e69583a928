#!/bin/sh
# Data parallelism over MPI, as a cluster runs it: mpirun --oversubscribe, one thread a rank, no
# binding. 2 and 3 ranks train as one rank does with the matching accumulation (the one rank
# replays the ranks' plan.json, so each step is cut into the same micro-batches): mlp, bert-small
# with dynamic batching (ranks get different token counts) and resnet (batch norm: each rank's
# running statistics are replaced by the mean over the ranks after every step, so all hold the
# same) give the same losses within 1e-6 relative; the parameters are the same bits on every rank
# (each checkpoint compares their hashes, statistics included, and fails the run if they
# differ), and the final weights equal the one rank's. Rank 0 alone writes the run folder. A
# stopped or killed rank ends every rank within distributed.timeout + 10 s. Ranks started with
# different recipes refuse before training. Runs resume on
# another rank count (2 → 1, and 1 → 2 through --resume auto) to the same bits. A batch that does
# not split over the ranks and a launch MPI did not make are refused.
# Skipped (77) without mpirun or where trainrun was built without MPI.
. "$srcdir/tests/lib.sh"
mpi_ranks

# ranks N LABEL RECIPE [key=value...]: N ranks train into $scratch/LABEL; the run folder in $dir.
ranks() {
  n=$1 label=$2
  shift 2
  run timeout 300 mpirun --oversubscribe --bind-to none -np "$n" "$TRAINRUN" "$@" report.log_every=1 \
    train.eval_samples=64 report.dir="$scratch/$label" --quiet
  expect_rc 0 "$label: $n ranks"
  dir=$(echo "$scratch/$label"/*/latest)
}

# alone LABEL PLAN RECIPE [key=value...]: one process replays PLAN into $scratch/LABEL.
alone() {
  label=$1 plan=$2
  shift 2
  run "$TRAINRUN" "$@" report.log_every=1 train.eval_samples=64 report.dir="$scratch/$label" --plan "$plan" --quiet
  expect_rc 0 "$label: one process"
  dir=$(echo "$scratch/$label"/*/latest)
}

# wait_for FILE: until FILE exists, a minute at most (a checkpoint: the run is under way).
wait_for() {
  i=0
  while [ ! -e "$1" ] && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
  done
}

# sharded_as_planned OFF DIR SHARD: DIR's ranks (optimize.shard=SHARD; plan --ranks --json's
# output in $out) held the regions they and the plan predicted, and their parts of what SHARD
# splits add up to OFF's (unsharded) whole: the state exactly, gradients and parameters within the
# 64-byte padding of a tensor's cut.
sharded_as_planned() {
  checks=$((checks + 1))
  printf '%s\n' "$out" | python3 -c '
import json, sys
planned = json.load(sys.stdin)["ranks"]
off, run = (json.load(open(p + "/run.json"))["ranks"] for p in sys.argv[1:3])
shard = sys.argv[3]
assert run["shard"] == shard, run
whole = off["each"][0]["measured_regions"]
for r, p in zip(run["each"], planned["each"]):
    got = r["measured_regions"]
    assert r["predicted_regions"] == got, r
    assert (got["params"], got["grads"], got["optimizer"]) == (p["params_bytes"], p["grads_bytes"], p["optimizer_bytes"]), (got, p)
parts = {k: [r["measured_regions"][k] for r in run["each"]] for k in ("params", "grads", "optimizer")}
assert sum(parts["optimizer"]) == whole["optimizer"], (parts, whole)
for k in ("grads", "params")[:1 if shard == "gradients" else 2]:
    assert whole[k] - 4096 < sum(parts[k]) <= whole[k], (k, parts, whole)
print("ZeRO (%s) on %d ranks: parameters %s, gradients %s of %d bytes; arena %d (unsharded %d), as planned" % (
    shard, len(run["each"]), parts["params"], parts["grads"], whole["grads"], run["each"][0]["measured_regions"]["arena"],
    whole["arena"]))
' "$1" "$2" "$3" || fail "ZeRO ($3): the ranks' regions are not what they and plan --ranks predicted"
}

# same_training A B WHAT: every step's train/loss within 1e-6 relative; whether the last weights
# are the same bits is said (the summation order across ranks may round otherwise).
same_training() {
  same_losses "$1" "$2" "$3" 1e-6
  if cmp -s "$(ls -v "$1"/checkpoints/*.safetensors | tail -n 1)" "$(ls -v "$2"/checkpoints/*.safetensors | tail -n 1)"; then
    echo "$3: the last weights are the one process's, bit for bit"
  else
    echo "note: $3: the last weights differ from the one process's in their bits (the losses agree)"
  fi
}

# mlp: 2 ranks × 1 micro-batch against 1 process × 2, over 40 steps; then 3 ranks.
ranks 2 mlp-2 "$srcdir/recipes/mlp.yaml" train.steps=40 optimize.accumulation=1 train.checkpoint_every=20
two=$dir
expect_in "$(cat "$two/log.txt")" "ranks: 2 (started by mpirun)" "the log names the ranks"
expect_in "$(cat "$two/run.json")" '"world": 2' "run.json records the ranks"
expect_in "$(cat "$two/report.md")" "## Ranks" "the report has every rank's memory and time"
checks=$((checks + 1))
python3 - "$two/report.json" <<'PY' || fail "report.json's ranks"
import json, sys
each = json.load(open(sys.argv[1]))["ranks"]["each"]
assert [e["rank"] for e in each] == [0, 1], each
assert all(e["peak_resident_bytes"] > 1 << 20 and e["step_seconds"] > 0 for e in each), each
PY
checks=$((checks + 1))
[ "$(ls "$scratch/mlp-2/mlp" | grep -c '^2')" = 1 ] || fail "rank 0 alone makes a run folder: $(ls "$scratch/mlp-2/mlp")"
run "$TRAINRUN" plan "$srcdir/recipes/mlp.yaml" train.steps=40 optimize.accumulation=1 --ranks 2 --json
expect_rc 0 "plan --ranks 2"
checks=$((checks + 1))
printf '%s\n' "$out" | python3 -c '
import json, sys
planned, ran = json.load(sys.stdin), json.load(open(sys.argv[1]))
assert planned["ranks"]["per_rank_batch"] == 32, planned["ranks"]
assert planned["predicted_peak_bytes"] == ran["measured_peak_bytes"], (planned["predicted_peak_bytes"], ran["measured_peak_bytes"])
# the run measured the bus rate of its ranks and forecast the communication; plan --ranks reuses it
assert ran["predicted_comm_seconds"] > 0, ran["predicted_comm_seconds"]
assert planned["ranks"]["bus_bytes_per_second"] > 0 and planned["ranks"]["comm_seconds"] > 0, planned["ranks"]
' "$two/plan.json" || fail "plan --ranks 2: its regions are not what a rank of the run held, or no forecast"
alone mlp-1 "$two/plan.json" "$srcdir/recipes/mlp.yaml" train.steps=40
same_training "$dir" "$two" "mlp, 2 ranks"
expect_in "$(cat "$dir/log.txt")" "2 micro-batches of 32 samples a step" "one process replays the plan with 2 micro-batches"
ranks 3 mlp-3 "$srcdir/recipes/mlp.yaml" train.steps=40 train.batch_size=48
three=$dir
alone mlp-1b "$three/plan.json" "$srcdir/recipes/mlp.yaml" train.steps=40 train.batch_size=48
same_training "$dir" "$three" "mlp, 3 ranks"

# ZeRO stage 1 (optimize.shard=optimizer): each of 3 ranks keeps and updates its part of the
# optimizer's state, then gathers the others' updated parameters; the gradients are a
# reduce-scatter and an all-gather over the same parts unsharded, so both train to the same bits
# over the same buckets (how Open MPI orders 3 ranks' sums depends on a message's size), each
# bucket sent after the backward or as the backward writes it (distributed.overlap). Each
# rank's regions are what it predicted, its optimizer state what plan --ranks says (a third of it,
# cut where a piece of the norm begins), and the checkpoints hold the whole state.
set -- "$srcdir/recipes/bert-small.yaml" data.dataset=austen-passages model.layers=2 model.max_len=64 \
  train.batch_size=12 train.steps=10 optimize.accumulation=2 train.grad_clip=0.5 train.checkpoint_every=5
ranks 3 zero-off "$@" optimize.shard=off distributed.overlap=off distributed.bucket=64KiB
off=$dir
ranks 3 zero-1 "$@" optimize.shard=optimizer distributed.overlap=on distributed.bucket=64KiB
sharded=$dir
run "$TRAINRUN" plan "$@" optimize.shard=optimizer --ranks 3 --json
expect_rc 0 "plan --ranks 3, sharded"
checks=$((checks + 1))
printf '%s\n' "$out" | python3 -c '
import json, sys
planned = json.load(sys.stdin)
off, sharded = (json.load(open(p + "/run.json"))["ranks"] for p in sys.argv[1:3])
assert off["shard"] == "off" and sharded["shard"] == "optimizer" and sharded["overlap"], (off, sharded)
for r in off["each"] + sharded["each"]:
    assert r["predicted_regions"] == r["measured_regions"], r
whole = off["each"][0]["measured_regions"]["optimizer"]
parts = [r["measured_regions"]["optimizer"] for r in sharded["each"]]
assert sum(parts) == whole and max(parts) < whole / 2, (parts, whole)
assert [r["optimizer_bytes"] for r in planned["ranks"]["each"]] == parts, (planned["ranks"], parts)
print("ZeRO 1 on 3 ranks: optimizer state %s of %d bytes, as planned" % (parts, whole))
' "$off" "$sharded" || fail "ZeRO 1: the ranks\' regions are not what they and plan --ranks predicted"
for step in 5 10; do
  checks=$((checks + 1))
  cmp -s "$off/checkpoints/step-$step.safetensors" "$sharded/checkpoints/step-$step.safetensors" ||
    fail "ZeRO 1: step $step's checkpoint (weights and the whole optimizer state) differs from unsharded"
done
alone zero-alone "$sharded/plan.json" "$@"
same_training "$dir" "$sharded" "bert-small, ZeRO 1 on 3 ranks"
# ZeRO stage 2 (optimize.shard=gradients): each micro-batch's gradients, in the arena, are
# reduce-scattered after its backward and each rank keeps the sums of its part alone; the sums
# add in another order than unsharded, so the curve agrees within 1e-6. Each rank's gradients and
# optimizer state are a third (as plan --ranks says), its arena holds a micro-batch's gradients.
ranks 3 zero-2 "$@" optimize.shard=gradients
staged=$dir
same_training "$off" "$staged" "bert-small, ZeRO 2 on 3 ranks against unsharded"
run "$TRAINRUN" plan "$@" optimize.shard=gradients --ranks 3 --json
expect_rc 0 "plan --ranks 3, ZeRO 2"
sharded_as_planned "$off" "$staged" gradients
# ZeRO stage 3 (optimize.shard=parameters): each rank keeps its part of the parameters too, and
# every node reads copies gathered whole just before their first reader, freed after their
# phase's last: the same values as stage 2 reads, so the same bits (the checkpoints, gathered
# whole on rank 0, compared). Each rank's parameters, gradients and state are its part, as planned.
ranks 3 zero-3 "$@" optimize.shard=parameters distributed.overlap=off
gathered=$dir
for step in 5 10; do
  checks=$((checks + 1))
  cmp -s "$staged/checkpoints/step-$step.safetensors" "$gathered/checkpoints/step-$step.safetensors" ||
    fail "ZeRO 3: step $step's checkpoint differs from ZeRO 2's"
done
same_training "$off" "$gathered" "bert-small, ZeRO 3 on 3 ranks against unsharded"
# A block ahead (distributed.overlap=on): each block's copies gathered on a thread of their own
# while the block before runs, on a communicator of their own; the same values, so the same bits.
ranks 3 zero-3-ahead "$@" optimize.shard=parameters distributed.overlap=on
ahead=$dir
expect_in "$(cat "$ahead/log.txt")" "ZeRO 3: each parameter gathered whole a block ahead" "the copies travel ahead"
for step in 5 10; do
  checks=$((checks + 1))
  cmp -s "$gathered/checkpoints/step-$step.safetensors" "$ahead/checkpoints/step-$step.safetensors" ||
    fail "ZeRO 3 a block ahead: step $step's checkpoint differs from the copies gathered in place"
done
checks=$((checks + 1))
python3 - "$gathered" "$ahead" <<'PY' || fail "ZeRO 3 a block ahead: the regions are not as planned, or no more arena"
import json, sys
now, ahead = (json.load(open(p + "/run.json"))["ranks"]["each"] for p in sys.argv[1:3])
for r in ahead:
    assert r["predicted_regions"] == r["measured_regions"], r
assert ahead[0]["measured_regions"]["arena"] >= now[0]["measured_regions"]["arena"], (ahead[0], now[0])
print("ZeRO 3 a block ahead: arena %d bytes (%d gathered as each block begins), gathering %.4f s" % (
    ahead[0]["measured_regions"]["arena"], now[0]["measured_regions"]["arena"], ahead[0]["gather_seconds"]))
PY
run "$TRAINRUN" plan "$@" optimize.shard=parameters --ranks 3 --json
expect_rc 0 "plan --ranks 3, ZeRO 3"
sharded_as_planned "$off" "$gathered" parameters
# ZeRO 3 resumed on another rank count: rank 0 reads the whole parameters and state, every rank
# keeps its new part of them; 3 ranks stopped by SIGTERM and resumed on 2 end as 3 uninterrupted.
set -- "$@" optimize.shard=parameters train.steps=60
ranks 3 zero-3-whole "$@"
whole3=$dir
sigterm_cut zero-3-cut 5 mpirun --oversubscribe --bind-to none -np 3 "$TRAINRUN" "$@" report.log_every=1 \
  train.eval_samples=64
run timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "ZeRO 3 on 3 ranks resumed on 2"
expect_in "$(cat "$dir/log.txt")" "ranks: 2 (started by mpirun)" "the resumed part ran on 2 ranks"
same_training "$whole3" "$dir" "bert-small, ZeRO 3 on 3 ranks, resumed on 2"
run "$TRAINRUN" plan "$srcdir/recipes/resnet.yaml" optimize.shard=parameters --ranks 2
expect_rc 2 "ZeRO 3 of a model with batch norm's statistics"
expect_in "$err" "optimize.shard: parameters shards no running statistics" "the refusal says why"

# A trace per rank, which Holistic Trace Analysis reads together: the ranks' ops alike, each
# step's all-reduce inside it.
python=${TRAINRUN_TEST_PYTHON:-$srcdir/.venv/bin/python}
if "$python" -c 'import hta' 2>/dev/null; then
  ranks 2 traced "$srcdir/recipes/mlp.yaml" train.steps=8 profile.active=3 distributed.overlap=off
  checks=$((checks + 1))
  [ "$(ls "$dir/traces" | grep -c '\.pt\.trace\.json$')" = 2 ] || fail "a trace per rank: $(ls "$dir/traces")"
  checks=$((checks + 1))
  "$python" "$srcdir/tests/trace_check.py" "$dir" --ranks 2 || fail "HTA on the ranks' traces"
  expect_in "$(cat "$dir/report.md")" "The critical path: rank" "the report names the critical path"
  expect_in "$(cat "$dir/report.md")" "| rank | compute ms a step | all-reduce ms a step (waiting included) |" \
    "the report's table of the ranks"
  # overlapped: the buckets on the communication thread, begun while the backward ran (2
  # micro-batches a step: the gradients in a region of their own, not the arena)
  ranks 2 overlapped "$srcdir/recipes/mlp.yaml" train.steps=8 profile.active=3 distributed.overlap=on \
    distributed.bucket=64KiB optimize.accumulation=2 optimize.shard=off
  checks=$((checks + 1))
  "$python" "$srcdir/tests/trace_check.py" "$dir" --ranks 2 || fail "HTA on the overlapped ranks' traces"
  checks=$((checks + 1))
  python3 - "$dir/run.json" <<'PY' || fail "run.json: the overlap's seconds"
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
assert ranks["overlap"] is True, ranks
for r in ranks["each"]:
    assert 0 <= r["reduce_exposed_seconds"] and r["reduce_seconds"] > 0, r
PY
else
  echo "note: no HolisticTraceAnalysis here (scripts/setup installs it): the ranks' traces not read"
fi

# bert-small with dynamic batching: the ranks' micro-batches hold different token counts.
set -- "$srcdir/recipes/bert-small.yaml" data.dataset=austen-passages model.layers=2 model.max_len=64 \
  train.batch_size=16 train.steps=10 optimize.dynamic_batching.mode=on
ranks 2 bert-2 "$@"
two=$dir
alone bert-1 "$two/plan.json" "$@"
same_training "$dir" "$two" "bert-small with dynamic batching, 2 ranks"

# resnet: batch norm's running statistics averaged, so the hashes agree at every checkpoint.
set -- "$srcdir/recipes/resnet.yaml" train.batch_size=32 train.steps=10 train.checkpoint_every=5
ranks 2 resnet-2 "$@"
two=$dir
alone resnet-1 "$two/plan.json" "$@"
same_training "$dir" "$two" "resnet, 2 ranks"

# Resume on another rank count: a 2-rank run stopped by SIGTERM and resumed by one process, and a
# one-process run (2 micro-batches a step) stopped and resumed by 2 ranks through --resume auto
# (the nightly path), each end as the uninterrupted 2-rank run does, to the bit (2,000 steps: the
# SIGTERM lands long before the last).
long="$srcdir/recipes/mlp.yaml train.steps=2000 train.checkpoint_every=50 report.log_every=1 train.eval_samples=64"
# cut LABEL KEYS LAUNCH...: LAUNCH (the recipe, $long's keys and KEYS follow) into
# $scratch/LABEL, SIGTERM once step 100 is checkpointed; the run folder in $dir.
cut() {
  label=$1 keys=$2
  shift 2
  # shellcheck disable=SC2086 # $long and $keys are lists of words
  "$@" $long $keys report.dir="$scratch/$label" --quiet >"$scratch/cut.out" 2>&1 &
  launched=$!
  wait_for "$scratch/$label/mlp/latest/checkpoints/step-100.safetensors"
  pkill -TERM -f "^$TRAINRUN .*report.dir=$scratch/$label" 2>/dev/null   # the ranks: mpirun, signalled, would end them
  wait "$launched"
  dir=$(echo "$scratch/$label"/*/latest)
  checks=$((checks + 1))
  grep -q "stopped by SIGTERM after step" "$dir/log.txt" || fail "$label: not stopped by SIGTERM: $(tail -n 3 "$scratch/cut.out")"
}
# shellcheck disable=SC2086
run timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" $long report.dir="$scratch/whole" --quiet
expect_rc 0 "the uninterrupted 2-rank run"
whole=$(echo "$scratch/whole"/*/latest)
cut two-to-one "" mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN"
run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "2 ranks resumed by one process"
same_training "$whole" "$dir" "2 ranks, resumed by one process"
cut one-to-two optimize.accumulation=2 "$TRAINRUN"
# shellcheck disable=SC2086
run timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" $long optimize.accumulation=2 \
  report.dir="$scratch/one-to-two" --resume auto --quiet
expect_rc 0 "one process resumed by 2 ranks (--resume auto)"
expect_in "$(cat "$dir/log.txt")" "ranks: 2 (started by mpirun)" "the resumed part ran on 2 ranks"
same_training "$whole" "$dir" "one process, resumed by 2 ranks"

# Faults: rank 1 stopped (SIGSTOP: the real hang) or killed (SIGKILL) mid-run. Every rank is gone
# within distributed.timeout + 10 s; a stopped one makes rank 0 end with status 10, saying what it
# waited in and, having asked the others, that rank 1 did not answer — on stderr, in log.txt,
# run.json's failure and the report; the checkpoints written stay whole (their safetensors
# header reads).
# fault SIGNAL: a long 2-rank run, SIGNAL to rank 1 once step 1000 is checkpointed; its exit
# status in $rc, the seconds until mpirun ended in $took, stderr in $err.
fault() {
  rm -rf "$scratch/fault"
  mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=1000000 \
    train.eval_every=0 train.checkpoint_every=1000 distributed.timeout=5s report.dir="$scratch/fault" --quiet \
    >"$scratch/fault.out" 2>"$scratch/fault.err" &
  launcher=$!
  wait_for "$scratch/fault/mlp/latest/checkpoints/step-1000.safetensors"
  signal_rank1 "$1" "recipes/mlp.yaml train.steps=1000000" || { fail "$1: no rank 1 to stop"; return; }
  err=$(cat "$scratch/fault.err")
  kill -9 "$victim" 2>/dev/null
  checks=$((checks + 1))
  [ "$took" -le 15 ] || fail "$1 of rank 1: the ranks ended after $took s, more than distributed.timeout + 10"
  checks=$((checks + 1))
  pgrep -f "recipes/mlp.yaml train.steps=1000000" >/dev/null && fail "$1 of rank 1: a rank is left running"
  checks=$((checks + 1))
  python3 - "$scratch/fault/mlp/latest/checkpoints" <<'PY' || fail "$1 of rank 1: a checkpoint is damaged"
import json, os, struct, sys
for name in os.listdir(sys.argv[1]):
    with open(os.path.join(sys.argv[1], name), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        json.loads(f.read(n))
PY
  echo "$1 of rank 1: every rank ended after $took s, status $rc"
}
fault STOP
expect_rc 10 "a stopped rank"
expect_in "$err" "rank 0 of 2: no answer from the other ranks for" "rank 0 says it waited"
expect_in "$err" "rank 1 did not answer (stopped, or its host went away)" "rank 0 names the rank that stopped answering"
checks=$((checks + 1))
python3 - "$scratch/fault/mlp/latest" <<'PY' || fail "a stopped rank: run.json and the report do not name the rank"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
f = run["failure"]
assert run["exit_code"] == 10 and f["kind"] == "ranks" and f["silent_ranks"] == "1" and f["step"] > 1000, run
report = open(sys.argv[1] + "/report.md").read()
assert "Failure: rank 0 of 2: no answer" in report and "rank 1 did not answer" in report, report[:800]
log = open(sys.argv[1] + "/log.txt").read()
assert "failed: rank 0 of 2: no answer from the other ranks" in log, log[-600:]
print("STOP of rank 1: run.json and the report name rank %s, step %d, after %.1f s" % (f["silent_ranks"], f["step"], f["waited_seconds"]))
PY
fault KILL
checks=$((checks + 1))
[ "$rc" != 0 ] || fail "a killed rank: mpirun's status is 0"

# Refused: a batch the ranks cannot share; ranks that MPI did not start (torchrun's variables).
run mpirun --oversubscribe --bind-to none -np 3 "$TRAINRUN" "$srcdir/recipes/mlp.yaml" report.dir="$scratch/bad" --quiet
checks=$((checks + 1))
[ "$rc" != 0 ] || fail "a batch of 64 over 3 ranks ran"
expect_in "$err" "train.batch_size 64 does not split evenly over 3 ranks: make it a multiple of 3" "its sentence"
checks=$((checks + 1))
[ "$(printf '%s\n' "$err" | grep -c 'does not split evenly')" = 1 ] || fail "more than rank 0 said it: $err"
# Ranks started with different recipes (mpirun's MPMD form: another seed on rank 1) refuse.
run timeout 120 mpirun --oversubscribe --bind-to none -np 1 "$TRAINRUN" "$srcdir/recipes/mlp.yaml" \
  report.dir="$scratch/two-jobs" --quiet : -np 1 "$TRAINRUN" "$srcdir/recipes/mlp.yaml" seed=3 \
  report.dir="$scratch/two-jobs" --quiet
checks=$((checks + 1))
[ "$rc" != 0 ] || fail "ranks with different recipes trained"
expect_in "$err" "rank 1 of 2 runs a different job from rank 0's" "ranks with different recipes: the sentence"
checks=$((checks + 1))
[ ! -e "$scratch/two-jobs/mlp/latest" ] || fail "ranks with different recipes made a run folder"
run env WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 timeout 60 "$TRAINRUN" "$srcdir/recipes/mlp.yaml" report.dir="$scratch/bad"
expect_rc 2 "torchrun's variables without mpirun"
expect_in "$err" "torchrun says rank 1 of 2, but MPI sees rank 0 of 1" "its sentence"
finish
