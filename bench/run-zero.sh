#!/bin/sh
# ZeRO on this machine (not run in CI): 2 ranks × 1 thread, optimize.shard=off against optimizer
# (stage 1) and gradients (stage 2), the same recipe and batch, interleaved round by round. Per
# case and mode: the median step over the rounds (plan.json's measured_step_seconds), rank 0's
# gradients and optimizer state measured, its seconds in the gradients' collectives and in
# gathering the updated parameters (run.json's ranks), and whether the mode's last checkpoint is
# the unsharded one's bits (stage 1 must be; stage 2 sums in another order).
#   bench/run-zero.sh [ROUNDS]   (from the checkout, after building and `trainrun calibrate`)
set -eu
rounds=${1:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
echo "rounds=$rounds $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc --all) threads"
exec /usr/bin/python3 - "$rounds" <<'PY'
import filecmp, glob, json, os, shutil, statistics, subprocess, sys, tempfile
rounds = int(sys.argv[1])
STEPS = 20
CASES = [("bert-small", ["recipes/bert-small.yaml"]), ("gpt-small", ["recipes/gpt-small.yaml"])]
SHORT = ["train.steps=%d" % STEPS, "train.epochs=null", "train.eval_every=0", "train.eval_samples=8",
         "train.checkpoint_every=%d" % STEPS, "report.tensorboard=false", "report.monitor_every=0",
         "distributed.overlap=off", "--quiet"]
scratch = tempfile.mkdtemp(prefix="zero.")
got = {}
try:
    for r in range(rounds):
        for name, args in (CASES if r % 2 == 0 else CASES[::-1]):
            last = {}
            modes = ("off", "optimizer", "gradients")
            for mode in (modes if r % 2 == 0 else modes[::-1]):
                out = os.path.join(scratch, mode)
                shutil.rmtree(out, ignore_errors=True)
                subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", "./trainrun"] + args +
                               SHORT + ["report.dir=" + out, "optimize.shard=" + mode], check=True,
                               stdout=subprocess.DEVNULL)
                run = os.path.join(out, name, "latest")
                step = json.load(open(os.path.join(run, "plan.json")))["measured_step_seconds"]
                rank0 = json.load(open(os.path.join(run, "run.json")))["ranks"]["each"][0]
                got.setdefault((name, mode), []).append((step, rank0["measured_regions"]["optimizer"],
                                                         rank0["reduce_seconds"] / STEPS, rank0["gather_seconds"] / STEPS,
                                                         rank0["measured_regions"]["grads"]))
                last[mode] = sorted(glob.glob(os.path.join(run, "checkpoints", "*.safetensors")))[-1]
            for mode in modes:
                got.setdefault((name, mode, "same"), []).append(filecmp.cmp(last["off"], last[mode], shallow=False))
    print("%-11s %-10s %10s %14s %16s %14s %12s %10s" % ("case", "shard", "step s", "grads bytes", "optimizer bytes",
                                                       "collectives s", "gather s", "same bits"))
    for name, _ in CASES:
        for mode in ("off", "optimizer", "gradients"):
            rows = got[(name, mode)]
            med = lambda i: statistics.median(x[i] for x in rows)
            print("%-11s %-10s %10.4f %14d %16d %14.4f %12.4f %10s" % (name, mode, med(0), rows[0][4], rows[0][1],
                                                                    med(2), med(3), all(got[(name, mode, "same")])))
finally:
    shutil.rmtree(scratch, ignore_errors=True)
PY
