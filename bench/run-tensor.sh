#!/bin/sh
# Tensor parallelism on this machine (not run in CI): bert-small and gpt-small, one process (one
# thread, and "x2": two, the cores the ranks take) against 2 tensor ranks (without and with
# sequence parallelism, "+ seq") and 2 pipeline stages (one thread a rank), the batch of 32 in 8 micro-batches
# (fixed batching), each layout once a round, interleaved. Per case: the step's median time; the
# all-reduces' bytes and seconds a step, measured (run.json ranks.each[].tensor: their time counts
# the waits for the other rank) against the planner's forecast (plan.json tensor: the bytes at
# the ranks' measured bus rate); each rank's regions (the parameters, gradients and optimizer
# state it holds) and its peak resident set.
#   bench/run-tensor.sh [ROUNDS]   (from the checkout, after building and `trainrun calibrate`)
set -eu
rounds=${1:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
echo "rounds=$rounds $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc --all) threads"
exec /usr/bin/python3 - "$rounds" <<'PY'
import json, os, shutil, statistics, subprocess, sys, tempfile
rounds = int(sys.argv[1])
SHORT = ["train.steps=30", "train.epochs=null", "train.eval_every=0", "train.eval_samples=8",
         "train.checkpoint_every=0", "report.tensorboard=false", "report.monitor_every=0",
         "optimize.dynamic_batching=off", "optimize.accumulation=8", "--quiet"]
LAYOUTS = [("1 process", 1, []), ("1 process x2", 1, []),
           ("2 tensor ranks", 2, ["optimize.parallel.tensor=2", "optimize.parallel.sequence=off"]),
           ("2 tensor + seq", 2, ["optimize.parallel.tensor=2", "optimize.parallel.sequence=on"]),
           ("2 stages", 2, ["optimize.parallel.pipeline=2"])]
CASES = [(model, layout) for model in ("bert-small", "gpt-small") for layout in LAYOUTS]
scratch = tempfile.mkdtemp(prefix="tensor.")
got = {}
try:
    for r in range(rounds):
        for model, (name, n, keys) in (CASES if r % 2 == 0 else CASES[::-1]):
            out = os.path.join(scratch, model + name.replace(" ", "-"))
            shutil.rmtree(out, ignore_errors=True)
            cmd = ["./trainrun", "recipes/%s.yaml" % model] + keys + ["report.dir=" + out] + SHORT
            if n > 1:
                cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(n)] + cmd
            env = dict(os.environ, OMP_NUM_THREADS="2" if name.endswith("x2") else "1")   # x2: the 2 cores' threads
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
            run_dir = os.path.join(out, model, "latest")
            run = json.load(open(os.path.join(run_dir, "run.json")))
            got.setdefault((model, name), []).append((json.load(open(os.path.join(run_dir, "plan.json"))), run,
                max(json.loads(l).get("memory/peak", 0) for l in open(os.path.join(run_dir, "metrics.jsonl")))))
finally:
    shutil.rmtree(scratch, ignore_errors=True)
print("%-11s %-15s %9s %7s %15s %15s %16s %12s" % ("model", "layout", "step (s)", "vs 1", "all-reduce MiB",
      "predicted MiB", "all-reduce ms", "predicted ms"))
for model in ("bert-small", "gpt-small"):
    one = statistics.median(run["step_seconds"]["measured"] for _, run, _ in got[(model, "1 process")])
    for name, _, _ in LAYOUTS:
        runs = got[(model, name)]
        plan, run, _ = runs[-1]
        step = statistics.median(run["step_seconds"]["measured"] for _, run, _ in runs)
        row = "%-11s %-15s %9.4f %6.2fx" % (model, name, step, one / step)
        if "tensor" in plan:
            each = [e["tensor"] for _, run, _ in runs for e in run["ranks"]["each"]]
            row += " %15.2f %15.2f %16.1f %12.1f" % (statistics.median(t["allreduce_bytes"] / 30 for t in each) / 2**20,
                   plan["tensor"]["allreduce_bytes_per_step"] / 2**20,
                   1e3 * statistics.median(t["allreduce_seconds_per_step"] for t in each),
                   1e3 * plan["tensor"]["predicted_allreduce_seconds"])
        print(row)
print()
print("%-11s %-15s %-5s %12s %12s %12s %12s %14s" % ("model", "layout", "rank", "params MiB", "optimizer", "arena",
      "regions", "peak RSS MiB"))
for model in ("bert-small", "gpt-small"):
    for name, _, _ in LAYOUTS:
        plan, run, peak = got[(model, name)][-1]   # one process: the plan's regions (exact) and the metrics' peak
        each = run.get("ranks", {}).get("each") or [{"rank": 0, "measured_regions": plan["regions"],
                                                     "peak_resident_bytes": peak}]
        for e in each:
            m = e["measured_regions"]
            print("%-11s %-15s %-5d %12.2f %12.2f %12.2f %12.2f %14.1f" % (model, name, e["rank"], m["params"] / 2**20,
                  m["optimizer"] / 2**20, m["arena"] / 2**20, sum(m.values()) / 2**20, e["peak_resident_bytes"] / 2**20))
PY
