#!/bin/sh
# The planner's optimality check (not run in CI): for 5 (recipe, budget) pairs, every feasible
# candidate of `trainrun plan --json` replayed with `trainrun RECIPE --plan FILE` for a few steps,
# round-robin over the candidates; per candidate the median seconds a step (first step untimed),
# per pair the chosen plan's against the fastest measured (PASS within 10%), the rank
# correlation of predicted and measured, and the forecast error per candidate ((predicted −
# measured) / measured; the pair's largest and median in its summary). The work is bench/plan_optimality.py's.
#   bench/run-plan-optimality.sh [THREADS] [ROUNDS] [STEPS] [PAIRS] [OUT]   (from the checkout,
#   after building; PAIRS: the first N of the list, or names joined by commas; OUT defaults to
#   bench/plan-optimality.tsv)
#   smoke: bench/run-plan-optimality.sh 2 1 3 2 /tmp/plan-optimality.tsv   (~2 minutes on 2 cores)
#   full:  bench/run-plan-optimality.sh 2 5 6                              (~20 minutes on 2 cores)
set -eu
threads=${1:-$(nproc)}
rounds=${2:-5}
steps=${3:-6}
pairs=${4:-5}
out=${5:-bench/plan-optimality.tsv}
here=$(dirname "$0")
# The planner is calibrated per thread count (~/.cache/trainrun/calibration/*-<N>t.json): plan
# and runs see the same threads.
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
echo "threads=$threads rounds=$rounds steps=$steps pairs=$pairs $(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD 2>/dev/null || true)"
exec /usr/bin/python3 "$here/plan_optimality.py" --trainrun ./trainrun --rounds "$rounds" --steps "$steps" \
  --pairs "$pairs" --out "$out"
