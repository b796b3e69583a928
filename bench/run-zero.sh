#!/bin/sh
# ZeRO on this machine (not run in CI): 2 ranks × 1 thread, optimize.shard=off against optimizer
# (stage 1), gradients (stage 2) and parameters (stage 3; "ahead": with distributed.overlap=on, the
# copies gathered a block ahead on a thread of their own), the same recipe and batch, interleaved
# round by round. Per case and mode: the median step over the rounds (plan.json's
# measured_step_seconds), rank 0's parameters, gradients, optimizer state and activation arena
# measured, its seconds in the gradients' collectives and in gathering parameters (run.json's
# ranks: stage 1 and 2 the updated ones, stage 3 the copies), and whether the mode's last
# checkpoint is the bits of the one it should equal (stage 1: unsharded's; stage 2 sums in another
# order: unsharded's, not expected; stage 3: stage 2's; ahead: stage 3's).
#   bench/run-zero.sh [ROUNDS]   (from the checkout, after building and `trainrun calibrate`;
#   ZERO_MODES="parameters ahead" for some of the modes)
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
         "--quiet"]
MODES = tuple(os.environ.get("ZERO_MODES", "off optimizer gradients parameters ahead").split())   # ahead: stage 3, a block ahead
def keys(mode):
    shard = "parameters" if mode == "ahead" else mode
    return ["optimize.shard=" + shard, "distributed.overlap=" + ("on" if mode == "ahead" else "off")]
scratch = tempfile.mkdtemp(prefix="zero.")
got = {}
try:
    for r in range(rounds):
        for name, args in (CASES if r % 2 == 0 else CASES[::-1]):
            last = {}
            modes = MODES
            for mode in (modes if r % 2 == 0 else modes[::-1]):
                out = os.path.join(scratch, mode)
                shutil.rmtree(out, ignore_errors=True)
                subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", "./trainrun"] + args +
                               SHORT + ["report.dir=" + out] + keys(mode), check=True,
                               stdout=subprocess.DEVNULL)
                run = os.path.join(out, name, "latest")
                step = json.load(open(os.path.join(run, "plan.json")))["measured_step_seconds"]
                rank0 = json.load(open(os.path.join(run, "run.json")))["ranks"]["each"][0]
                got.setdefault((name, mode), []).append((step, rank0["measured_regions"]["optimizer"],
                                                         rank0["reduce_seconds"] / STEPS, rank0["gather_seconds"] / STEPS,
                                                         rank0["measured_regions"]["grads"],
                                                         rank0["measured_regions"]["params"],
                                                         rank0["measured_regions"]["arena"]))
                last[mode] = sorted(glob.glob(os.path.join(run, "checkpoints", "*.safetensors")))[-1]
            for mode in modes:
                like = {"parameters": "gradients", "ahead": "parameters"}.get(mode, "off")
                if like in last:
                    got.setdefault((name, mode, "same"), []).append(filecmp.cmp(last[like], last[mode], shallow=False))
    print("%-11s %-10s %8s %12s %12s %12s %12s %11s %9s %10s" % (
        "case", "shard", "step s", "params B", "grads B", "optimizer B", "arena B", "collect. s", "gather s", "same bits"))
    for name, _ in CASES:
        for mode in MODES:
            rows = got[(name, mode)]
            med = lambda i: statistics.median(x[i] for x in rows)
            print("%-11s %-10s %8.4f %12d %12d %12d %12d %11.4f %9.4f %10s" % (
                name, mode, med(0), rows[0][5], rows[0][4], rows[0][1], rows[0][6], med(2), med(3),
                all(got[(name, mode, "same")]) if (name, mode, "same") in got else "-"))
finally:
    shutil.rmtree(scratch, ignore_errors=True)
PY
