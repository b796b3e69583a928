#!/bin/sh
# Issue 7's check of mixed precision against fp32: 300 steps of recipes/bert-small.yaml in fp32,
# bf16 and fp16, three seeds each, run one after another; the evaluation accuracy at the end
# (the valid split, 11,800 glosses) per run and as a mean per precision, and the training loss
# curves, plotted side by side by bench/plot_curves.py.
#   bench/run-amp-curves.sh [RUNS_DIR]   (from the build folder; about 50 minutes on 2 cores)
# Writes RUNS_DIR (default /tmp/trainrun-amp-curves)/<amp>-<seed>/…, bench/amp-curves.tsv and
# bench/amp-curves.svg.
set -eu
runs=${1:-/tmp/trainrun-amp-curves}
here=$(dirname "$0")
export OMP_WAIT_POLICY=passive
tsv="$here/amp-curves.tsv"
printf 'amp\tseed\teval_accuracy\teval_loss\tseconds\n' >"$tsv"
for seed in 1 2 3; do
  for amp in off bf16 fp16; do
    dir="$runs/$amp-$seed"
    rm -rf "$dir"
    ./trainrun recipes/bert-small.yaml train.steps=300 train.eval_every=0 train.checkpoint_every=0 \
      report.log_every=10 seed=$seed optimize.amp=$amp report.dir="$dir" --quiet
    m="$dir/bert-small/latest/metrics.jsonl"
    python3 - "$m" "$amp" "$seed" "$dir/bert-small/latest/log.txt" >>"$tsv" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = [l for l in lines if "eval/accuracy" in l][-1]
seconds = re.search(r"done: \d+ steps in ([0-9.]+) s", open(sys.argv[4]).read()).group(1)
print(f"{sys.argv[2]}\t{sys.argv[3]}\t{ev['eval/accuracy']:.4f}\t{ev['eval/loss']:.4f}\t{seconds}")
PY
    tail -n 1 "$dir/bert-small/latest/log.txt"
  done
done
python3 "$here/plot_curves.py" "$runs" "$here/amp-curves.svg" "$tsv"
