#!/bin/sh
# The time model's forecast against the measured step (not run in CI): for every shipped recipe
# and two shapes nobody tuned on, a short run of the planner's choice, interleaved round by round;
# per case the plan's predicted step time, the median measured (the run's plan.json:
# measured_step_seconds, the first step a warm-up) over the rounds, and the error.
#   bench/run-forecast.sh [THREADS] [ROUNDS] [STEPS]      (from the checkout, after building and
#   `trainrun calibrate`; ~10 minutes on 2 quiet cores with 2 rounds of 20 steps)
# STEPS defaults to 20: with dynamic batching a step's time depends on its bucket (bert-small on
# wordnet-senses: 70–200 ms), and the forecast is their mean; a 4-step run measures 3 of them.
# A case whose forecast steps would take less than half a second runs more (at most 2000): the
# MLP's 0.5 ms steps measured 0.84–0.95 ms as the median of 20, 0.45–0.56 ms of 300.
set -eu
threads=${1:-$(nproc)}
rounds=${2:-2}
steps=${3:-20}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
echo "threads=$threads rounds=$rounds steps=$steps $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
exec /usr/bin/python3 - "$rounds" "$steps" <<'PY'
import json, math, os, shutil, statistics, subprocess, sys, tempfile
rounds, steps = int(sys.argv[1]), int(sys.argv[2])
CASES = [  # (name, recipe, overrides); the last two are shapes the model was not tuned on
    ("mlp", "recipes/mlp.yaml", []),
    ("resnet", "recipes/resnet.yaml", []),
    ("bert-small", "recipes/bert-small.yaml", []),
    ("gpt-small", "recipes/gpt-small.yaml", []),
    ("bert 2x(up to 512)", "recipes/bert.yaml", ["train.batch_size=2"]),
    ("bert-small 8x128 (untuned)", "recipes/bert-small.yaml", ["train.batch_size=8"]),
    ("gpt-small 4x256 (untuned)", "recipes/gpt-small.yaml", ["train.batch_size=4", "model.max_len=256"]),
]
SHORT = ["train.epochs=null", "train.eval_every=0", "train.eval_samples=8", "train.checkpoint_every=0",
         "report.tensorboard=false"]
MIN_SECONDS, MAX_STEPS = 0.5, 2000
def steps_for(recipe, over):
    """steps, or more where the plan's forecast steps would take less than MIN_SECONDS"""
    p = subprocess.run(["./trainrun", "plan", recipe, *over, "--json"], capture_output=True, text=True)
    predicted = json.loads(p.stdout)["predicted_step_seconds"] if p.returncode == 0 else 0
    return max(steps, min(MAX_STEPS, math.ceil(MIN_SECONDS / predicted) + 1)) if predicted > 0 else steps
got = {c[0]: [] for c in CASES}
pred = {}
scratch = tempfile.mkdtemp(prefix="forecast.")
try:
    for r in range(rounds):
        for name, recipe, over in (CASES if r % 2 == 0 else CASES[::-1]):
            out = os.path.join(scratch, "run")
            shutil.rmtree(out, ignore_errors=True)
            n = steps_for(recipe, over)
            p = subprocess.run(["./trainrun", recipe, *over, "train.steps=%d" % n, *SHORT, "report.dir=" + out,
                                "--quiet"], capture_output=True, text=True)
            if p.returncode:
                print("# %s: exit %d %s" % (name, p.returncode, p.stderr.strip().splitlines()[-1:]))
                continue
            name_dir = [d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d))][0]
            run = os.path.join(out, name_dir, "latest")
            plan = json.load(open(os.path.join(run, "plan.json")))
            pred[name] = plan["predicted_step_seconds"]
            if plan.get("measured_step_seconds"):
                got[name].append(plan["measured_step_seconds"])
            print("# round %d %s: %d steps, predicted %.4g s, measured %s s" % (r + 1, name, n, pred[name],
                  plan.get("measured_step_seconds")), flush=True)
finally:
    shutil.rmtree(scratch, ignore_errors=True)
print("| case | predicted s/step | measured s/step (median) | error |")
print("| --- | ---: | ---: | ---: |")
for name, _, _ in CASES:
    if got[name]:
        m = statistics.median(got[name])
        print("| %s | %.4g | %.4g | %+.0f%% |" % (name, pred[name], m, 100 * (pred[name] - m) / m))
PY
