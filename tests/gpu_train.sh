#!/bin/sh
# Training on the GPU against the CPU, through the real binary: each model trains a few steps
# from the same seed on device=cpu and device=cuda in f32, and the loss curves must agree; a
# bf16 run on cuda must end with a finite loss; and the plan's memory must hold on the device
# (measured footprint ≤ predicted, the regions' measured peak = the predicted one within 1 %).
# Skips (77) where trainrun was built without CUDA or sees no GPU, as tests/gpu.sh does.
#
# Models: mlp on digits, gpt-small on austen (2 layers, 64-token windows), bert-small on
# austen-passages (bench/gpu/datasets: 40-word passages, 64 tokens). ResNet is left out: its
# data set, Fashion-MNIST, comes from a Debian package that no GPU machine has; nothing else in
# the tree has images.
#
# Environment:
#   GPU_TRAIN_DEVICE  cuda (default) or cuda:N; or cpu-fenced, the stand-in for a machine
#                     without a GPU: the "device" runs are device=cpu with
#                     TRAINRUN_BACKEND=cpu-fenced (the CPU kernels behind a fence), which must
#                     give the CPU's losses bit for bit — this checks the script itself.
#   GPU_TRAIN_MODELS  which models, of "mlp gpt bert" (default: all three)
#   GPU_TRAIN_STEPS   steps a run (default 20)
#
# Tolerance on a GPU. f32 GEMMs there run in TF32 (src/backend/cuda/README: MATMUL, attention,
# the fused head), whose products keep 10 mantissa bits: a unit roundoff of 2^-11 ≈ 4.9e-4
# against f32's 6e-8. Step 1 starts from the same weights and batch, so its loss and gradient
# norm differ only by those roundings, averaged over rows and parameters: within 2e-3 and 5e-3
# relative (4 and 10 units). Later steps drift: AdamW divides each gradient by its own running
# size, so a rounding that flips the sign of a near-zero gradient moves that weight by a whole
# learning rate; each of the 20 losses must stay within 2e-2 relative. A wrong kernel (a
# missing gradient term, a transposed operand, a bad mask) shows as 10 % or more in the step-1
# gradient norm or within a few steps of the curve. These bounds are estimates until a first
# GPU run prints the real differences (each model's line below): tighten them then.
. "$srcdir/tests/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the metrics"; exit 77; }
device=${GPU_TRAIN_DEVICE:-cuda}
models=${GPU_TRAIN_MODELS:-mlp gpt bert}
steps=${GPU_TRAIN_STEPS:-20}
case $device in
  cpu-fenced) backend=cpu-fenced on=cpu kernels= ;;
  cuda | cuda:[0-9]*)
    backend='' on=$device kernels=--kernels
    version=$("$TRAINRUN" --version) || { echo "trainrun --version failed"; exit 1; }
    reason=$(gpu_skip_reason "$version") && { echo "SKIP: $reason"; exit 77; } ;;
  *) echo "GPU_TRAIN_DEVICE: expected cuda, cuda:N or cpu-fenced, got '$device'"; exit 99 ;;
esac

# Every optimize: knob pinned (the same plan on both devices), a log line every step, the
# evaluations and checkpoints down to the one at the end, and a budget that fits a GPU's
# context and libraries as well as the CPU's process.
common="seed=1 train.steps=$steps train.epochs=null train.eval_every=0 train.eval_samples=32
  train.checkpoint_every=0 report.log_every=1 report.tensorboard=false budget.memory=8GiB
  optimize.checkpointing=off optimize.dynamic_batching=off optimize.accumulation=1 data.num_workers=1"

# train LABEL BACKEND DEVICE AMP RECIPE [key=value...]: one run into $scratch/LABEL; its folder
# in $dir. BACKEND empty: the device's own (TRAINRUN_BACKEND set empty, never inherited).
train() {
  label=$1 be=$2 dev=$3 amp=$4 recipe=$5
  shift 5
  # shellcheck disable=SC2086 # $common is a list of words
  run env TRAINRUN_BACKEND="$be" "$TRAINRUN" "$recipe" device="$dev" optimize.amp="$amp" $common \
    report.dir="$scratch/$label" "$@" --quiet
  expect_rc 0 "$label: training on $dev${be:+ ($be)}"
  dir=$(echo "$scratch/$label"/*/latest)
}

# compare MODEL CPU_DIR DEVICE_DIR BF16_DIR: the curves, the bf16 run, the plans' memory.
compare() {
  checks=$((checks + 1))
  python3 - "$1" "$2" "$3" "$4" "$steps" "$device" <<'PY' || fail "$1: the device's runs (above)"
import json, math, sys
model, cpu, dev, bf16, steps, device = sys.argv[1:7]
steps, fenced = int(steps), device == "cpu-fenced"

def metrics(run):
    lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
    lines = [l for l in lines if "train/loss" in l]
    assert len(lines) == steps, f"{run}: {len(lines)} logged steps, expected {steps}"
    return [l["train/loss"] for l in lines], lines[0]["train/grad_norm"]

def rel(a, b):
    return abs(a - b) / max(abs(a), 1e-30)

bad = []
ref, ref_norm = metrics(cpu)
got, got_norm = metrics(dev)
diffs = [rel(a, b) for a, b in zip(ref, got)]
if fenced:   # the same kernels on the same data: the same bits
    bad += [f"step {k + 1}: loss {b!r} on the fenced CPU, {a!r} on the CPU"
            for k, (a, b) in enumerate(zip(ref, got)) if a != b]
    if got_norm != ref_norm:
        bad.append(f"step 1: gradient norm {got_norm!r} fenced, {ref_norm!r} on the CPU")
else:        # TF32 GEMMs: the header's bounds
    if diffs[0] > 2e-3:
        bad.append(f"step 1: loss {got[0]} against the CPU's {ref[0]} (relative {diffs[0]:.2e} > 2e-3)")
    if rel(ref_norm, got_norm) > 5e-3:
        bad.append(f"step 1: gradient norm {got_norm} against {ref_norm} "
                   f"(relative {rel(ref_norm, got_norm):.2e} > 5e-3)")
    bad += [f"step {k + 1}: loss {b} against {a} (relative {d:.2e} > 2e-2)"
            for k, (a, b, d) in enumerate(zip(ref, got, diffs)) if d > 2e-2]
print(f"{model}: {steps} steps, loss {ref[0]:.5f} -> {ref[-1]:.5f} on the CPU; {device}'s relative "
      f"difference: step 1 {diffs[0]:.2e}, largest {max(diffs):.2e} (step {diffs.index(max(diffs)) + 1}), "
      f"last {diffs[-1]:.2e}; step-1 gradient norm {rel(ref_norm, got_norm):.2e}")

half, _ = metrics(bf16)
if not math.isfinite(half[-1]):
    bad.append(f"bf16: the last loss is {half[-1]}")
print(f"{model}: bf16 on {device}: loss {half[0]:.5f} -> {half[-1]:.5f} (f32 on the CPU: {ref[-1]:.5f})")

for label, run in (("f32", dev), ("bf16", bf16)):
    plan = json.load(open(run + "/plan.json"))
    name = plan["device"]["name"]
    pp, mp = plan["predicted_peak_bytes"], plan["measured_peak_bytes"]
    pf, mf = plan["predicted_footprint_bytes"], plan["measured_footprint_bytes"]
    print(f"{model}: {label} on {name}: regions' peak {mp} bytes (predicted {pp}, {(mp - pp) / pp:+.2%}); "
          f"footprint {mf} (predicted {pf}, {(mf - pf) / pf:+.2%})")
    if not fenced and not name.startswith("cuda"):
        bad.append(f"{label}: plan.json's device is {name}, not a GPU")
    if abs(mp - pp) > 0.01 * pp:
        bad.append(f"{label}: the regions peaked at {mp} bytes, predicted {pp} (more than 1 % apart)")
    # On a GPU the footprint is the device memory in use; on the fenced CPU it is the process's
    # resident set, which counts the fenced mappings again, and means nothing for a device.
    if not fenced and mf > pf:
        bad.append(f"{label}: device memory in use {mf} bytes, above the predicted footprint {pf}")
for line in bad:
    print(f"{model}: {line}")
sys.exit(1 if bad else 0)
PY
}

TRAINRUN_DATASETS=$scratch/datasets
export TRAINRUN_DATASETS
"$srcdir/bench/gpu/datasets" "$TRAINRUN_DATASETS" 40 >/dev/null || { echo "FAIL: bench/gpu/datasets"; exit 1; }
for model in $models; do
  case $model in
    mlp) set -- "$srcdir/recipes/mlp.yaml" ;;
    gpt) set -- "$srcdir/recipes/gpt-small.yaml" model.layers=2 model.max_len=64 train.batch_size=4 ;;
    bert) set -- "$srcdir/recipes/bert-small.yaml" data.dataset=austen-passages model.layers=2 \
            model.max_len=64 train.batch_size=8 ;;
    *) echo "GPU_TRAIN_MODELS: no model '$model' (mlp, gpt, bert)"; exit 99 ;;
  esac
  before=$failures
  train "$model-cpu" "" cpu off "$@"
  cpu_dir=$dir
  train "$model-dev" "$backend" "$on" off "$@"
  dev_dir=$dir
  train "$model-bf16" "$backend" "$on" bf16 "$@"
  [ "$failures" = "$before" ] && compare "$model" "$cpu_dir" "$dev_dir" "$dir"
done

# A traced run on the device: each node's kernels as "kernel" events on the device's clock beside
# the host's cpu_op, which Holistic Trace Analysis reads, its GPU analyses included.
python=${TRAINRUN_TEST_PYTHON:-$srcdir/.venv/bin/python}
if "$python" -c 'import hta' 2>/dev/null; then
  run env TRAINRUN_BACKEND="$backend" "$TRAINRUN" "$srcdir/recipes/mlp.yaml" device="$on" train.steps=8 \
    train.eval_every=0 profile.active=3 report.dir="$scratch/traced" --quiet
  expect_rc 0 "a traced run on $on"
  checks=$((checks + 1))
  "$python" "$srcdir/tests/trace_check.py" "$scratch/traced/mlp/latest" $kernels || fail "HTA on the device's trace"
else
  echo "note: no HolisticTraceAnalysis here: the device's trace not read"
fi
finish
