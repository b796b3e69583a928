#!/bin/sh
# Offloading (optimize.offload): what it saves and costs, and what the planner does with it.
#   bench/run-offload.sh [STEPS] > bench/offload-DATE-CPU.txt
# 1. bert-small (4 layers, hidden 256, batch 32, sequences to 128, fp32, no checkpointing, one
#    micro-batch) with each offload pinned (the activations every block's, then the first
#    block's alone: optimize.offload_blocks 4 and 1, then the largest making half their bytes:
#    optimize.offload_largest 50, "/L50"), on BACKEND (default cpu: the plain CPU, whose copies
#    are memcpys and whose steps time the offload's own cost; cpu-fenced, the stand-in for a
#    device the host cannot see, adds two mprotect calls a region to every kernel and copy, so
#    its steps time the fence): the device's arena, the host's regions and the device footprint
#    predicted against measured, the step time, and what crossed the link.
# 2. The planner's decisions where offloading is searched: bert-small on the fenced CPU in
#    200 MiB (with the host's memory as measured, then 64 MiB of it), and BERT-base on the
#    rtx3090 profile from 22 GiB down to 1 GiB, each beside the same plan with offload=off.
# Needs the data sets of tests (wordnet) and a built ./trainrun; runs from the source tree.
set -u
steps=${1:-6}
backend=${BACKEND:-cpu}
tr=${TRAINRUN:-./trainrun}
"$tr" calibrate >/dev/null   # the forecasts from this binary's calibration, taken before any run
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
echo
echo "## 1. bert-small on the $backend backend, $steps steps, each offload pinned"
echo
modes="off optimizer activations both activations/1 both/1 activations/L50 both/L50"
for mode in $modes; do
  grain=${mode#*/} largest=100
  [ "$grain" = "$mode" ] && grain=4
  case $grain in L*) largest=${grain#L} grain=4 ;; esac
  case $mode in off|optimizer) grain=auto largest=auto ;; esac
  TRAINRUN_BACKEND=$backend "$tr" recipes/bert-small.yaml report.dir="$out/$(echo "$mode" | tr / _)" \
    optimize.offload="${mode%/*}" optimize.offload_blocks=$grain optimize.offload_largest=$largest \
    optimize.amp=off optimize.checkpointing=off optimize.dynamic_batching=off optimize.accumulation=1 \
    train.steps="$steps" train.eval_every=0 train.eval_samples=32 train.checkpoint_every=0 data.num_workers=1 \
    --quiet >/dev/null || echo "FAILED: offload $mode"
done
python3 - "$out" $modes <<'PY'
import json, sys
MiB = 1 << 20
print("| offload (/blocks) | arena pred / meas (MiB) | device footprint pred / meas (MiB) | host pred / meas (MiB) | link MiB a step | link s a step (pred / meas) | step s (pred / meas) |")
print("| --- | --- | --- | --- | ---: | --- | --- |")
for mode in sys.argv[2:]:
    j = json.load(open("%s/%s/bert-small/latest/plan.json" % (sys.argv[1], mode.replace("/", "_"))))
    h, m = j["host"], j.get("measured_host", {})
    print("| %s | %.2f / %.2f | %.1f / %.1f | %.2f / %.2f | %.1f | %.4f / %.4f | %.3f / %.3f |" % (
        mode, j["regions"]["arena"] / MiB, j["measured_regions"]["arena"] / MiB,
        j["predicted_footprint_bytes"] / MiB, j["measured_footprint_bytes"] / MiB,
        h["predicted_bytes"] / MiB, m.get("bytes", 0) / MiB, m.get("link_bytes_per_step", 0) / MiB,
        h["predicted_link_seconds"], m.get("link_seconds_per_step", 0),
        j["predicted_step_seconds"], j["measured_step_seconds"] or 0))
PY
echo
echo "## 2. The planner's decisions"
echo
# decide WHAT BACKEND PLAN-ARGS...: the decision's sentence (BACKEND: TRAINRUN_BACKEND, "" the device's)
decide() {
  what=$1 backend=$2
  shift 2
  printf '%s\n  ' "$what"
  env TRAINRUN_BACKEND="$backend" "$tr" plan "$@" 2>&1 | grep -E '^(decision|no plan|trainrun: nothing)' | head -n 1
}
decide "bert-small, fenced CPU, 200 MiB" cpu-fenced recipes/bert-small.yaml optimize.amp=off budget.memory=200MiB
decide "  the same without offloading" cpu-fenced recipes/bert-small.yaml optimize.amp=off budget.memory=200MiB \
  optimize.offload=off
decide "  the same with 64 MiB of the host's memory" cpu-fenced recipes/bert-small.yaml optimize.amp=off \
  budget.memory=200MiB budget.host_memory=64MiB
for budget in 22GiB 2500MiB 2GiB 1536MiB 1GiB; do
  decide "BERT-base, rtx3090 profile, $budget" "" recipes/bert.yaml --device-profile rtx3090 budget.memory=$budget
  decide "  the same without offloading" "" recipes/bert.yaml --device-profile rtx3090 budget.memory=$budget \
    optimize.offload=off
done
