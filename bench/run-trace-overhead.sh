#!/bin/sh
# What tracing costs (not run in CI): each recipe's run with profile: off and with every step
# traced (profile.active=STEPS), interleaved round by round; per case the median step
# (plan.json's measured_step_seconds, the first step a warm-up) over the rounds, the ratio on/off,
# and the trace file's events and the seconds writing it took (run.json's traces).
#   bench/run-trace-overhead.sh [THREADS] [ROUNDS]     (from the checkout, after building and
#   `trainrun calibrate`; ~5 minutes on 2 cores with 5 rounds)
set -eu
threads=${1:-$(nproc)}
rounds=${2:-5}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
echo "threads=$threads rounds=$rounds $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
exec /usr/bin/python3 - "$rounds" <<'PY'
import json, os, shutil, statistics, subprocess, sys, tempfile
rounds = int(sys.argv[1])
CASES = [("mlp", "recipes/mlp.yaml", 400), ("bert-small", "recipes/bert-small.yaml", 20),
         ("resnet", "recipes/resnet.yaml", 20)]
SHORT = ["train.epochs=null", "train.eval_every=0", "train.eval_samples=8", "train.checkpoint_every=0",
         "report.tensorboard=false", "--quiet"]
got = {(c[0], on): [] for c in CASES for on in (0, 1)}
files = {}
scratch = tempfile.mkdtemp(prefix="trace-overhead.")
try:
    for r in range(rounds):
        for name, recipe, steps in (CASES if r % 2 == 0 else CASES[::-1]):
            for on in ((0, 1) if r % 2 == 0 else (1, 0)):
                out = os.path.join(scratch, "run")
                shutil.rmtree(out, ignore_errors=True)
                extra = ["profile.active=%d" % steps] if on else []
                p = subprocess.run(["./trainrun", recipe, "train.steps=%d" % steps, *extra, *SHORT,
                                    "report.dir=" + out], capture_output=True, text=True)
                if p.returncode:
                    sys.exit("%s: exit %d %s" % (name, p.returncode, p.stderr.strip()[-300:]))
                run = os.path.join(out, [d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d))][0], "latest")
                got[(name, on)].append(json.load(open(os.path.join(run, "plan.json")))["measured_step_seconds"])
                if on:
                    t = json.load(open(os.path.join(run, "run.json")))["traces"][0]
                    files.setdefault(name, []).append((t["events"], t["write_seconds"]))
                print("# round %d %s %s: %.5f s/step" % (r + 1, name, "traced" if on else "off", got[(name, on)][-1]),
                      flush=True)
finally:
    shutil.rmtree(scratch, ignore_errors=True)
print("| case | steps | off s/step | traced s/step | traced / off | events a file | writing it |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, _, steps in CASES:
    off, on = statistics.median(got[(name, 0)]), statistics.median(got[(name, 1)])
    ev = statistics.median(e for e, _ in files[name])
    w = statistics.median(s for _, s in files[name])
    print("| %s | %d | %.5f | %.5f | %.3f | %d | %.3f s |" % (name, steps, off, on, on / off, ev, w))
PY
