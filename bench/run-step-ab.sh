#!/bin/sh
# Two trainrun binaries' training steps, interleaved round by round (this machine's speed
# drifts): the redesign's "no step more than 2% slower" check, or any before/after change.
# Each run trains STEPS steps with evaluation and checkpoints off; a run's step time is the
# median over its logged steps of (data + forward + backward + recompute + optimizer) from
# metrics.jsonl, past the first 5 steps (warm-up). Prints one line per recipe: the medians
# over rounds, and new/old.
#   bench/run-step-ab.sh OLD_TRAINRUN NEW_TRAINRUN [ROUNDS] [STEPS] [RECIPE…]
# (a RECIPE may carry overrides: "recipes/bert-small.yaml optimize.amp=bf16")
set -eu
old=$1 new=$2 rounds=${3:-5} steps=${4:-40}
shift $(($# < 4 ? $# : 4))
[ $# -gt 0 ] || set -- recipes/bert-small.yaml recipes/gpt-small.yaml recipes/mlp.yaml "recipes/bert-small.yaml optimize.amp=bf16"
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/trainrun-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT
step_ms() {   # run folder → median step milliseconds past warm-up
    python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t = [sum(r.get("time/" + k, 0.0) for k in ("data", "forward", "backward", "recompute", "optimizer"))
     for r in rows if "time/forward" in r and r["step"] > 5]
print("%.3f" % (1e3 * statistics.median(t)))
PY
}
run() {   # binary recipe tag round → step ms
    "$1" "$2" train.steps="$steps" train.eval_every=0 train.checkpoint_every=0 train.eval_samples=64 report.log_every=1 \
        report.dir="$work/$3-$4" name=ab --quiet >/dev/null
    step_ms "$work/$3-$4/ab/latest"
}
for recipe in "$@"; do
    o= n=
    for i in $(seq "$rounds"); do
        if [ $((i % 2)) = 1 ]; then a=$(run "$old" $recipe old "$i"); b=$(run "$new" $recipe new "$i")
        else b=$(run "$new" $recipe new "$i"); a=$(run "$old" $recipe old "$i"); fi
        o="$o $a" n="$n $b"
    done
    python3 - "$recipe" "$o" "$n" <<'PY'
import statistics, sys
o = [float(x) for x in sys.argv[2].split()]; n = [float(x) for x in sys.argv[3].split()]
mo, mn = statistics.median(o), statistics.median(n)
print("%-40s old %8.2f ms  new %8.2f ms  new/old %.3f   (rounds: %s | %s)" % (sys.argv[1], mo, mn, mn / mo,
      " ".join("%.1f" % x for x in o), " ".join("%.1f" % x for x in n)))
PY
done
