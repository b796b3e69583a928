#!/bin/sh
# GPU ranks over NCCL: 2 ranks, one GPU each (device auto: cuda:LOCAL_RANK), train bert-small as
# one GPU process replaying their plan does, the gradients summed on the devices over NCCL (its
# id made by rank 0 and given over MPI): the curves agree within 1e-5 relative (the same
# micro-batches; only the sums' order differs), the log says NCCL summed them, and every rank's
# regions are what it predicted. Skips (77) without mpirun, without MPI or CUDA in this build, or
# with fewer than two GPUs (NCCL gives each rank a GPU of its own).
. "$srcdir/tests/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
version=$("$TRAINRUN" --version) || { echo "trainrun --version failed"; exit 1; }
reason=$(gpu_skip_reason "$version") && { echo "SKIP: $reason"; exit 77; }
printf '%s\n' "$version" | grep -q "^Ranks: across processes over MPI" || { echo "SKIP: built without MPI"; exit 77; }
gpus=$(printf '%s\n' "$version" | sed -n 's/.*GPUs seen: \([0-9]*\).*/\1/p' | head -n 1)
[ "${gpus:-0}" -ge 2 ] || { echo "SKIP: ${gpus:-0} GPU seen; NCCL's ranks need one each"; exit 77; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
TRAINRUN_DATASETS=$scratch/datasets
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMP_NUM_THREADS TRAINRUN_DATASETS
"$srcdir/bench/gpu/datasets" "$TRAINRUN_DATASETS" >/dev/null || { echo "FAIL: bench/gpu/datasets"; exit 1; }

set -- "$srcdir/recipes/bert-small.yaml" data.dataset=austen-passages model.layers=2 model.max_len=64 \
  train.batch_size=16 train.steps=20 train.epochs=null train.eval_samples=32 report.log_every=1 \
  optimize.amp=off optimize.accumulation=2 optimize.dynamic_batching=off
run timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$TRAINRUN" "$@" report.dir="$scratch/two" --quiet
expect_rc 0 "2 GPU ranks"
two=$(echo "$scratch/two"/*/latest)
expect_in "$(cat "$two/log.txt")" "ranks: the GPUs sum their gradients over NCCL" "NCCL summed the gradients"
run "$TRAINRUN" "$@" device=cuda:0 --plan "$two/plan.json" report.dir="$scratch/one" --quiet
expect_rc 0 "one GPU replaying the ranks' plan"
one=$(echo "$scratch/one"/*/latest)
same_losses "$one" "$two" "2 GPU ranks over NCCL" 1e-5 20
checks=$((checks + 1))
python3 - "$two" <<'PY' || fail "2 GPU ranks: the regions are not as predicted"
import json, sys
for r in json.load(open(sys.argv[1] + "/run.json"))["ranks"]["each"]:
    assert r["predicted_regions"] == r["measured_regions"], r
PY
finish
