#!/bin/sh
# Tensor parallelism over MPI (DESIGN.md §10), as a cluster runs it: mpirun --oversubscribe, one
# thread a rank. Each transformer block's heads and feed-forward split over 2 ranks as Megatron-LM
# splits them (QKV and the first feed-forward GEMM by columns — GPT's fused QKV by heads of each of
# Q, K and V — the output projections by rows, an all-reduce after each half forward and one before
# it backward) train as one process does over the same micro-batches (it replays the split run's
# plan.json), within 1e-5 relative over 20 fp32 steps: bert-small, gpt-small, 2 data ranks × 2
# tensor ranks, 2 pipeline stages × 2 tensor ranks, and with every block recomputed (checkpointing
# copies the blocks' all-reduces). Every rank's regions are as predicted and it ran 4 all-reduces
# a block a micro-batch. Sequence parallelism beside it (the residual stream, norms and dropouts a
# part of the sequence a rank) trains as one process does too (bert-small, gpt-small, 2 stages ×
# 2 tensor ranks), its collectives as counted, its arena smaller. Checkpoints hold whole tensors
# (the one device's names and shapes), so a split run resumes on one process and a one-process
# run on 2 tensor ranks, each to the uninterrupted split run's losses. A budget one rank cannot
# meet: the planner splits the model itself, no rank passing the budget; one only sequence
# parallelism meets: the planner takes it. A rank killed mid-run ends every rank within
# distributed.timeout + 10 s. Layouts that cannot be are refused (status 2). Skipped (77) without
# mpirun or MPI.
. "$srcdir/tests/lib.sh"
mpi_ranks

bert="$srcdir/recipes/bert-small.yaml"
gpt="$srcdir/recipes/gpt-small.yaml"
short="train.steps=20 train.eval_every=10 train.eval_samples=64 train.checkpoint_every=10 report.log_every=1"
fixed="optimize.dynamic_batching=off optimize.accumulation=8"

# split N LABEL RECIPE [key=value...]: N ranks train into $scratch/LABEL, then one process replays
# their plan into $scratch/LABEL-alone; the folders in $split and $dir.
split() {
  n=$1 label=$2 recipe=$3
  shift 3
  # shellcheck disable=SC2086 # $short is a list of words
  run timeout 300 mpirun --oversubscribe --bind-to none -np "$n" "$TRAINRUN" "$recipe" "$@" $short \
    report.dir="$scratch/$label" --quiet
  expect_rc 0 "$label: $n ranks"
  split=$(echo "$scratch/$label"/*/latest)
  # shellcheck disable=SC2086
  run "$TRAINRUN" "$recipe" $short report.dir="$scratch/$label-alone" --plan "$split/plan.json" --quiet
  expect_rc 0 "$label: one process"
  dir=$(echo "$scratch/$label-alone"/*/latest)
}

# as_planned DIR MICRO PER_MICRO [PER_STEP]: every rank of DIR's run had its regions as predicted and
# ran PER_MICRO collectives a micro-batch (MICRO a step, 20 steps) and PER_STEP more a step, their
# bytes as forecast within 10%. Tensor parallel, 4 all-reduces a block a micro-batch (6 where the
# blocks' forward is recomputed); sequence parallel, 4 all-gathers and 4 reduce-scatters a block,
# the head's gather and the embeddings' part's gradient gathered, then the 6 norm and bias
# gradients a block each rank has a part of, summed once a step.
as_planned() {
  checks=$((checks + 1))
  python3 - "$@" <<'PY' || fail "$1: the ranks' regions or collectives are not as planned"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
micro, per_micro = int(sys.argv[2]), int(sys.argv[3])
per_step = int(sys.argv[4]) if len(sys.argv) > 4 else 0
for r in run["ranks"]["each"]:
    t = r["tensor"]
    assert r["measured_regions"] == r["predicted_regions"], (r["rank"], r["measured_regions"], r["predicted_regions"])
    assert t["allreduces"] == (per_micro * micro + per_step) * 20, (r["rank"], t)
    moved = t["allreduce_bytes"] / 20
    assert abs(moved - t["predicted_allreduce_bytes_per_step"]) <= 0.1 * moved, (r["rank"], t)
    print("rank %d (tensor rank %d): regions as predicted; %d collectives, %.2f MiB a step (forecast %.2f), "
          "%.1f ms a step (forecast %.1f)" % (r["rank"], t["rank"], t["allreduces"], moved / 2**20,
          t["predicted_allreduce_bytes_per_step"] / 2**20, 1e3 * t["allreduce_seconds_per_step"],
          1e3 * t["predicted_allreduce_seconds_per_step"]))
PY
}

# same_tensors A B: the step-20 checkpoints of A and B hold the same tensors, names, dtypes and shapes.
same_tensors() {
  checks=$((checks + 1))
  python3 - "$1/checkpoints/step-20.safetensors" "$2/checkpoints/step-20.safetensors" <<'PY' ||
import json, struct, sys
def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"]) for k, v in h.items()}
a, b = header(sys.argv[1]), header(sys.argv[2])
assert a == b, sorted(set(a.items()) ^ set(b.items()))[:4]
print("the split run's checkpoint holds the one device's %d tensors, whole" % len(a))
PY
    fail "$1: its checkpoint's tensors are not the one device's"
}

# within_budget DIR BYTES: every rank of DIR's run had its regions as predicted, its resident set within BYTES.
within_budget() {
  checks=$((checks + 1))
  python3 - "$1" "$2" <<'PY' || fail "$2 bytes a rank: a rank's regions or resident set are not as planned"
import json, sys
run, budget = json.load(open(sys.argv[1] + "/run.json")), int(sys.argv[2])
for r in run["ranks"]["each"]:
    assert r["measured_regions"] == r["predicted_regions"], r
    assert r["peak_resident_bytes"] <= budget, r
    print("rank %d (tensor rank %d): regions as predicted, peak resident %.1f MiB of %.1f" % (r["rank"],
          r["tensor"]["rank"], r["peak_resident_bytes"] / 2**20, budget / 2**20))
PY
}

# shellcheck disable=SC2086 # $fixed is a list of words
split 2 bert-t2 "$bert" $fixed optimize.parallel.tensor=2 optimize.parallel.sequence=off
expect_in "$(cat "$split/log.txt")" "ranks: 2 (started by mpirun) = 1 data × 2 tensor ranks" "the log says the layout"
same_losses "$split" "$dir" "bert-small, 2 tensor ranks" 1e-5 20
as_planned "$split" 8 16
same_tensors "$split" "$dir"
t2=$split
split 2 gpt-t2 "$gpt" $fixed optimize.parallel.tensor=2 optimize.parallel.sequence=off
same_losses "$split" "$dir" "gpt-small, 2 tensor ranks" 1e-5 20
as_planned "$split" 8 16
split 4 bert-d2t2 "$bert" $fixed optimize.parallel.tensor=2 optimize.parallel.sequence=off
expect_in "$(cat "$split/log.txt")" "= 2 data × 2 tensor ranks" "the log says 2 data × 2 tensor ranks"
same_losses "$split" "$dir" "bert-small, 2 data × 2 tensor ranks" 1e-5 20
split 4 bert-p2t2 "$bert" $fixed optimize.parallel.tensor=2 optimize.parallel.pipeline=2 optimize.parallel.sequence=on
expect_in "$(cat "$split/log.txt")" "= 1 data × 2 pipeline stages × 2 tensor ranks" "the log says 2 stages × 2 tensor ranks"
same_losses "$split" "$dir" "bert-small, 2 pipeline stages × 2 tensor ranks, sequence parallel" 1e-5 20
split 2 bert-t2-full "$bert" $fixed optimize.parallel.tensor=2 optimize.checkpointing=full optimize.parallel.sequence=off
same_losses "$split" "$dir" "bert-small, 2 tensor ranks, every block recomputed" 1e-5 20
as_planned "$split" 8 24

# Sequence parallelism beside it: the blocks' residual stream, norms and dropouts a part of the
# sequence on each tensor rank (all-gathers before the column-split layers, reduce-scatters after
# the row-split ones), each micro-batch padded to a multiple of 2; the same losses, dropout masks
# included, and the one device's checkpoint.
split 2 bert-sp "$bert" $fixed optimize.parallel.tensor=2 optimize.parallel.sequence=on
expect_in "$(cat "$split/log.txt")" "sequence parallel" "the log says sequence parallel"
same_losses "$split" "$dir" "bert-small, 2 tensor ranks, sequence parallel" 1e-5 20
as_planned "$split" 8 34 24
same_tensors "$split" "$dir"
sp_arena=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ranks']['each'][0]['measured_regions']['arena'])" "$split/run.json")
tp_arena=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ranks']['each'][0]['measured_regions']['arena'])" "$t2/run.json")
checks=$((checks + 1))
[ "$sp_arena" -lt "$tp_arena" ] || fail "sequence parallel: arena $sp_arena bytes, not below tensor parallel's $tp_arena"
echo "arena a rank: $tp_arena bytes tensor parallel, $sp_arena sequence parallel"
split 2 gpt-sp "$gpt" $fixed optimize.parallel.tensor=2 optimize.parallel.sequence=on
same_losses "$split" "$dir" "gpt-small, 2 tensor ranks, sequence parallel" 1e-5 20
as_planned "$split" 8 34 24

# A budget only sequence parallelism meets: bert-small's micro-batch of 64 on 2 tensor ranks. The
# smallest footprints with and without it, as the planner names them when nothing fits (status 3;
# on the Xeon 321 and 345 MiB), set the budget halfway between: the planner takes it, every
# rank's regions are as predicted and no rank's resident set passes the budget; without it, 3.
sp_keys="optimize.parallel.tensor=2 train.batch_size=64 optimize.dynamic_batching=off optimize.accumulation=1"
# smallest SEQUENCE: the bytes the planner says would fit with optimize.parallel.sequence=SEQUENCE.
smallest() {
  # shellcheck disable=SC2086 # $sp_keys is a list of words
  timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" $sp_keys optimize.parallel.sequence="$1" \
    budget.memory=1MiB report.dir="$scratch/sp-budget" --quiet 2>&1 |
    sed -n 's/.*budget.memory=\([0-9]*\) or more would fit.*/\1/p' | head -n 1
}
with=$(smallest on) without=$(smallest off)
checks=$((checks + 1))
if [ -n "$with" ] && [ -n "$without" ] && [ "$with" -lt "$without" ]; then
  budget=$(((with + without) / 2))
  echo "smallest footprint a rank: $with bytes with sequence parallelism, $without without; budget $budget"
  # shellcheck disable=SC2086
  run timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" budget.memory="$budget" $sp_keys \
    train.steps=10 train.eval_every=0 train.eval_samples=64 report.dir="$scratch/sp-budget" --quiet
  expect_rc 0 "bert-small's micro-batch of 64 on 2 tensor ranks in $budget bytes a rank"
  dir=$(echo "$scratch/sp-budget"/*/latest)
  expect_in "$(grep planner "$dir/log.txt")" "sequence parallel" "the planner took sequence parallelism"
  within_budget "$dir" "$budget"
  # shellcheck disable=SC2086
  run timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" budget.memory="$budget" $sp_keys \
    optimize.parallel.sequence=off train.steps=10 report.dir="$scratch/sp-budget" --quiet
  expect_rc 3 "the same without sequence parallelism"
else
  fail "sequence parallelism: the smallest footprint a rank is '$with' bytes with it, '$without' without"
fi

# A budget no plan with the whole model on one rank fits (250 MiB at the least): the planner
# splits the blocks over the 2 ranks (its own choice of tensor ranks; 2 stages, which fit too and
# which it may find faster by a near tie, left out), every rank's regions are as predicted, and no
# rank's resident set passes the budget.
run timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" budget.memory=240MiB \
  optimize.parallel.pipeline=1 optimize.parallel.sequence=off train.steps=10 \
  train.eval_every=5 train.eval_samples=64 train.checkpoint_every=5 report.dir="$scratch/budget" --quiet
expect_rc 0 "bert-small in 240 MiB a rank on 2 ranks"
dir=$(echo "$scratch/budget"/*/latest)
expect_in "$(cat "$dir/log.txt")" "2 tensor ranks" "the planner split the blocks"
run "$TRAINRUN" plan "$bert" budget.memory=240MiB optimize.parallel.pipeline=1 optimize.parallel.sequence=off --ranks 2
expect_in "$out" "layout: 2 ranks = 1 data × 2 tensor ranks" "plan --ranks shows the layout"
expect_in "$out" "why: with the whole model on each rank nothing fits" "plan --ranks says why"
within_budget "$dir" 251658240

# Resume on another layout: a split run (sequence parallel too, dynamic batching) stopped by
# SIGTERM, resumed by one process; a one-process run stopped, resumed on 2 tensor ranks; each ends
# as the uninterrupted split run.
long="train.steps=100 train.eval_every=0 train.eval_samples=64 train.checkpoint_every=20 report.log_every=1"
# shellcheck disable=SC2086
run timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" $long optimize.parallel.tensor=2 \
  optimize.parallel.sequence=on report.dir="$scratch/whole" --quiet
expect_rc 0 "the uninterrupted split run"
whole=$(echo "$scratch/whole"/*/latest)
# cut LABEL KEYS LAUNCH...: LAUNCH (the recipe, $long and KEYS follow) into $scratch/LABEL, SIGTERM
# once step 40 is checkpointed (lib.sh); the run folder in $dir.
cut() {
  label=$1 keys=$2
  shift 2
  # shellcheck disable=SC2086
  sigterm_cut "$label" 40 "$@" "$bert" $long $keys
}
cut two-to-one "optimize.parallel.tensor=2 --plan $whole/plan.json" mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN"
run "$TRAINRUN" resume "$dir" optimize.parallel.tensor=1 --quiet
expect_rc 0 "2 tensor ranks resumed by one process"
same_losses "$whole" "$dir" "2 tensor ranks, resumed by one process" 1e-5 100
cut one-to-two "--plan $whole/plan.json" "$TRAINRUN"
run timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" resume "$dir" optimize.parallel.tensor=2 \
  optimize.parallel.sequence=on --quiet
expect_rc 0 "one process resumed on 2 tensor ranks"
expect_in "$(cat "$dir/log.txt")" "2 tensor ranks" "the resumed part ran on 2 tensor ranks"
same_losses "$whole" "$dir" "one process, resumed on 2 tensor ranks" 1e-5 100

# A tensor rank killed mid-run: every rank ends within distributed.timeout + 10 s, none left running.
kill_rank1 "a killed tensor rank" fault mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" train.steps=1000000 \
  train.eval_every=0 train.checkpoint_every=20 optimize.parallel.tensor=2 distributed.timeout=5s

# Layouts that cannot be: refused before anything trains.
run timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" optimize.parallel.tensor=3 \
  report.dir="$scratch/bad" --quiet
expect_rc 2 "3 tensor ranks on 2 ranks"
expect_in "$err" "optimize.parallel.tensor 3 does not divide the 2 ranks" "says why"
run timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" model.heads=1 model.hidden=64 \
  optimize.parallel.tensor=2 report.dir="$scratch/bad" --quiet
expect_rc 2 "one head over 2 tensor ranks"
expect_in "$err" "optimize.parallel.tensor 2 does not divide model.heads 1" "says why"
run timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" optimize.parallel=data \
  optimize.parallel.tensor=2 report.dir="$scratch/bad" --quiet
expect_rc 2 "tensor ranks beside optimize.parallel: data"
# Sequence parallel with the recipe's bucket bounds odd: each rounded up to a multiple of 2, which
# the micro-batches padded to 2 then stay within.
run timeout 300 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" optimize.parallel.tensor=2 \
  optimize.parallel.sequence=on "optimize.dynamic_batching.buckets=[17,33]" train.steps=4 train.eval_every=0 \
  train.eval_samples=64 report.dir="$scratch/odd" --quiet
expect_rc 0 "sequence parallel, buckets of 17 and 33 tokens"
expect_in "$(python3 -c "import json,sys; print(sorted({b['max_len'] for b in json.load(open(sys.argv[1]))['micro_batch']}))" \
  "$scratch"/odd/*/latest/plan.json)" "[18, 34, 128]" "the bucket bounds rounded up to multiples of 2"
run timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$bert" optimize.parallel.tensor=2 \
  optimize.parallel.sequence=on model.max_len=127 report.dir="$scratch/bad" --quiet
expect_rc 2 "sequence parallel with model.max_len 127 on 2 tensor ranks"
expect_in "$err" "model.max_len is not a multiple of optimize.parallel.tensor" "says why"
finish
