#!/bin/sh
# Pipeline parallelism on this machine (not run in CI): bert-small on P = 2 and 4 stages (one rank
# each, one thread a rank) with m = 4, 8 and 16 micro-batches a step (fixed batching: the batch of
# 32 cut into m), each layout and m once a round, interleaved. Per case: the bubble the planner
# predicted (plan.json's pipeline.predicted_bubble; 1F1B's (P − 1) / (m + P − 1) beside it) and
# the one measured (run.json's ranks: each stage's seconds waiting for its neighbours over its
# seconds waiting and running, the mean over the stages — waiting counts the transfers too: the
# bytes a stage sends a step are given beside it); the step's median time; each stage's
# arena in use at its peak against 1F1B's theory (the parts' shared activations + min(P − s, m)
# micro-batches' stash: GPipe would hold m), and the micro-batches it held in flight.
#   bench/run-pipeline.sh [ROUNDS]   (from the checkout, after building and `trainrun calibrate`)
set -eu
rounds=${1:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
echo "rounds=$rounds $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc --all) threads"
exec /usr/bin/python3 - "$rounds" <<'PY'
import json, os, shutil, statistics, subprocess, sys, tempfile
rounds = int(sys.argv[1])
STEPS = 30
SHORT = ["train.steps=%d" % STEPS, "train.epochs=null", "train.eval_every=0", "train.eval_samples=8",
         "train.checkpoint_every=0", "report.tensorboard=false", "report.monitor_every=0",
         "optimize.dynamic_batching=off", "--quiet"]
CASES = [(P, m) for P in (2, 4) for m in (4, 8, 16)]
scratch = tempfile.mkdtemp(prefix="pipeline.")
got = {}
try:
    for r in range(rounds):
        for P, m in (CASES if r % 2 == 0 else CASES[::-1]):
            out = os.path.join(scratch, "%d-%d" % (P, m))
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(P), "./trainrun",
                            "recipes/bert-small.yaml", "optimize.parallel.pipeline=%d" % P,
                            "optimize.accumulation=%d" % m, "report.dir=" + out] + SHORT, check=True,
                           stdout=subprocess.DEVNULL)
            run_dir = os.path.join(out, "bert-small", "latest")
            plan = json.load(open(os.path.join(run_dir, "plan.json")))
            run = json.load(open(os.path.join(run_dir, "run.json")))
            got.setdefault((P, m), []).append((plan, run))
finally:
    shutil.rmtree(scratch, ignore_errors=True)
print("%-6s %-6s %10s %10s %10s %14s %12s" % ("P", "m", "1F1B", "predicted", "measured", "sent a step", "step (s)"))
for (P, m), runs in sorted(got.items()):
    plan, run = runs[-1]
    pipe = plan["pipeline"]
    measured = statistics.median(statistics.mean(e["pipeline"]["bubble"] for e in run["ranks"]["each"]) for _, run in runs)
    sent = max(s["sent_bytes_per_micro"] for s in pipe["stage"]) * m
    step = statistics.median(run["step_seconds"]["measured"] for _, run in runs)
    print("%-6d %-6d %9.0f%% %9.0f%% %9.0f%% %11.1f MiB %12.4f" % (P, m, 100.0 * (P - 1) / (m + P - 1),
          100 * pipe["predicted_bubble"], 100 * measured, sent / 2**20, step))
print()
print("%-6s %-6s %-6s %8s %14s %14s %14s" % ("P", "m", "stage", "held", "arena in use", "1F1B theory", "GPipe theory"))
for (P, m), runs in sorted(got.items()):
    plan, run = runs[-1]
    for e in sorted(run["ranks"]["each"], key=lambda e: e["pipeline"]["stage"]):
        p = e["pipeline"]
        shared = e["predicted_regions"]["arena"] - p["slots"] * p["stash_bytes"]
        print("%-6d %-6d %-6d %4d of %d %14d %14d %14d" % (P, m, p["stage"], p["in_flight_peak"], m, p["arena_in_use_peak_bytes"],
              shared + min(P - p["stage"], m) * p["stash_bytes"], shared + m * p["stash_bytes"]))
PY
