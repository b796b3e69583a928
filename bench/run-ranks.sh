#!/bin/sh
# Data parallelism on this machine (not run in CI): 2 ranks × 1 thread against 1 process × 2
# threads, the same recipe, batch and plan shape, interleaved round by round. Per case: the
# median step (plan.json's measured_step_seconds, first step a warm-up) of each over the rounds,
# the ratio (above 1: the ranks are faster), and the seconds the ranks spent in the gradients'
# collectives (run.json's ranks.reduce_seconds, rank 0) as a share of their training time, and
# the part of them the step waited for after the backward (reduce_exposed_seconds): the ranks
# run twice, with distributed.overlap=false (every bucket after the backward) and true (each
# bucket as soon as the backward has written it, on a communication thread).
#   bench/run-ranks.sh [ROUNDS] [BUCKETS...]   (from the checkout, after building and
#   `trainrun calibrate`; BUCKETS: distributed.bucket sizes to compare, default 25MiB)
set -eu
rounds=${1:-3}
shift $(( $# > 0 ? 1 : 0 ))
buckets=${*:-25MiB}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "rounds=$rounds buckets=$buckets $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
echo "cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc --all) threads"
exec /usr/bin/python3 - "$rounds" $buckets <<'PY'
import json, os, shutil, statistics, subprocess, sys, tempfile
rounds, buckets = int(sys.argv[1]), sys.argv[2:]
STEPS = 20
CASES = [("resnet", ["recipes/resnet.yaml", "train.steps=%d" % STEPS]),
         ("bert-small", ["recipes/bert-small.yaml", "train.steps=%d" % STEPS])]
SHORT = ["train.epochs=null", "train.eval_every=0", "train.eval_samples=8", "train.checkpoint_every=0",
         "report.tensorboard=false", "report.monitor_every=0", "--quiet"]
scratch = tempfile.mkdtemp(prefix="ranks.")
got = {}
def run(name, args, ranks, bucket, plan, overlap="on"):
    out = os.path.join(scratch, "run")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, OMP_NUM_THREADS="1" if ranks > 1 else "2")
    cmd = ["./trainrun"] + args + SHORT + ["report.dir=" + out, "distributed.bucket=" + bucket,
                                          "distributed.overlap=" + overlap]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + cmd
    else:
        cmd += ["--plan", plan]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    run_dir = os.path.join(out, name, "latest")
    step = json.load(open(os.path.join(run_dir, "plan.json")))["measured_step_seconds"]
    record = json.load(open(os.path.join(run_dir, "run.json")))
    keep = os.path.join(scratch, "plan-%s.json" % name)
    if ranks > 1:
        shutil.copy(os.path.join(run_dir, "plan.json"), keep)
    each = record.get("ranks", {}).get("each", [{}])
    return step, each[0].get("reduce_seconds", 0.0), each[0].get("reduce_exposed_seconds", 0.0), keep
try:
    for r in range(rounds):
        for name, args in (CASES if r % 2 == 0 else CASES[::-1]):
            for bucket in buckets:
                plan = None
                # the one process replays the ranks' plan; the overlap's order alternates by round
                for ranks, overlap in ((2, "off"), (2, "on"), (1, "off")) if r % 2 == 0 else \
                                      ((2, "on"), (2, "off"), (1, "off")):
                    step, reduce_s, exposed_s, keep = run(name, args, ranks, bucket, plan, overlap)
                    plan = plan or keep
                    got.setdefault((name, bucket, ranks, overlap), []).append((step, reduce_s, exposed_s))
    print("%-11s %-7s %-8s %12s %12s %8s %14s %14s %6s" % ("case", "bucket", "overlap", "1×2 step s", "2×1 step s",
                                                         "ratio", "collectives s", "exposed s", "share"))
    med = lambda key, i: statistics.median(x[i] for x in got[key])
    for name, _ in CASES:
        for bucket in buckets:
            one = med((name, bucket, 1, "off"), 0)
            for overlap in ("off", "on"):
                key = (name, bucket, 2, overlap)
                two, reduce_s, exposed_s = med(key, 0), med(key, 1) / STEPS, med(key, 2) / STEPS
                print("%-11s %-7s %-8s %12.4f %12.4f %8.2f %14.4f %14.4f %5.0f%%" % (
                    name, bucket, overlap, one, two, one / two, reduce_s, exposed_s, 100 * exposed_s / two))
finally:
    shutil.rmtree(scratch, ignore_errors=True)
PY
